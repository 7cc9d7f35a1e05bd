//! ROPE (GGML's `test_rope`): rope, rope_ext and rope_multi with their in-place forms, every
//! mode (normal, neox, mrope, imrope, vision), YaRN parameters, frequency factors, offsets and
//! strided inputs, against an f64 reference written from the definition: angles
//! `p · base^(−2e/n_dims) / ff`, YaRN's ramp between the correction dimensions, and the pair
//! layout of each mode.

use ggml::{Context, Type};
use ggml::{ROPE_TYPE_IMROPE, ROPE_TYPE_MROPE, ROPE_TYPE_NEOX, ROPE_TYPE_NORMAL, ROPE_TYPE_VISION};

use crate::case::{Case, Init, Input, Layout, Vars};
use crate::host::Host;

/// One ROPE case's parameters (GGML's op_params, less the unused slots).
#[derive(Clone, Copy, Debug)]
struct Cfg {
    n_dims: i32,
    mode: i32,
    sections: [i32; 4],
    n_offs: i32,
    n_ctx_orig: i32,
    freq_base: f32,
    freq_scale: f32,
    ext_factor: f32,
    attn_factor: f32,
    beta_fast: f32,
    beta_slow: f32,
}

const PLAIN: Cfg = Cfg {
    n_dims: 0,
    mode: ROPE_TYPE_NORMAL,
    sections: [0; 4],
    n_offs: 0,
    n_ctx_orig: 0,
    freq_base: 10000.0,
    freq_scale: 1.0,
    ext_factor: 0.0,
    attn_factor: 1.0,
    beta_fast: 0.0,
    beta_slow: 0.0,
};

impl Cfg {
    fn multi(&self) -> bool {
        self.mode & ROPE_TYPE_MROPE != 0
    }

    /// No YaRN or scaling parameter away from `ggml_rope`'s defaults.
    fn plain(&self) -> bool {
        self.freq_scale == 1.0
            && self.ext_factor == 0.0
            && self.attn_factor == 1.0
            && self.n_ctx_orig == 0
            && self.freq_base == 10000.0
            && self.beta_fast == 0.0
            && self.beta_slow == 0.0
    }

    /// How many frequency factors the op reads.
    fn n_factors(&self) -> i64 {
        if self.mode == ROPE_TYPE_VISION {
            self.n_dims as i64
        } else {
            self.n_dims as i64 / 2
        }
    }
}

// ---- reference -------------------------------------------------------------------------------

/// Which of the four positions pair `i` takes, and its angle exponent.
fn position_and_exponent(c: &Cfg, i: usize) -> (usize, usize) {
    if !c.multi() {
        return (0, i);
    }
    let s = c.sections.map(|x| x as usize);
    let starts = [0, s[0], s[0] + s[1], s[0] + s[1] + s[2]];
    let sector = i % s.iter().sum::<usize>();
    let by_range = (0..4).rev().find(|&k| sector >= starts[k]).unwrap_or(0);
    match c.mode {
        ROPE_TYPE_IMROPE => {
            let k = if sector % 3 == 1 && sector < 3 * s[1] {
                1
            } else if sector % 3 == 2 && sector < 3 * s[2] {
                2
            } else if sector % 3 == 0 && sector < 3 * s[0] {
                0
            } else {
                3
            };
            (k, i)
        }
        // Each section counts its exponent from its own first pair.
        ROPE_TYPE_VISION => (by_range, sector - starts[by_range]),
        _ => (by_range, i),
    }
}

/// YaRN's correction range in f64: the dimensions that turn beta_fast and beta_slow times.
fn corr_dims(c: &Cfg) -> (f64, f64) {
    let nd = c.n_dims as f64;
    let dim = |beta: f64| {
        nd * (c.n_ctx_orig as f64 / (beta * 2.0 * std::f64::consts::PI)).ln()
            / (2.0 * (c.freq_base as f64).ln())
    };
    let low = dim(c.beta_fast as f64).floor().max(0.0);
    let high = dim(c.beta_slow as f64).ceil().min(nd - 1.0);
    (low, high)
}

/// ROPE of `a` (rows over heads, tokens on dimension 2) at positions `pos`.
fn rope_ref(a: &Host, pos: &Host, ff: Option<&Host>, c: &Cfg) -> Host {
    let nd = c.n_dims as usize;
    let off = c.n_offs as usize;
    let ne2 = a.ne[2];
    let vision = c.mode == ROPE_TYPE_VISION;
    let (low, high) = corr_dims(c);
    a.map_rows(a.ne[0], |r, row| {
        let mut out = row.to_vec();
        let pairs = if vision { nd } else { nd / 2 };
        for i in 0..pairs {
            let (k, e) = position_and_exponent(c, i);
            let p = pos.v[r[2] + k * ne2];
            let extrap = p * (c.freq_base as f64).powf(-2.0 * e as f64 / nd as f64)
                / ff.map_or(1.0, |f| f.v[i]);
            let interp = c.freq_scale as f64 * extrap;
            let mut mscale = c.attn_factor as f64;
            let theta = if c.ext_factor != 0.0 {
                let y = (i as f64 - low) / (high - low).max(0.001);
                let mix = (1.0 - y.clamp(0.0, 1.0)) * c.ext_factor as f64;
                mscale *= 1.0 + 0.1 * (1.0 / c.freq_scale as f64).ln();
                interp * (1.0 - mix) + extrap * mix
            } else {
                interp
            };
            let (cos, sin) = (theta.cos() * mscale, theta.sin() * mscale);
            let (j0, j1) = match c.mode {
                ROPE_TYPE_NORMAL => (off + 2 * i, off + 2 * i + 1),
                ROPE_TYPE_VISION => (i, i + nd),
                _ => (off + i, off + i + nd / 2),
            };
            let (x0, x1) = (row[j0], row[j1]);
            out[j0] = x0 * cos - x1 * sin;
            out[j1] = x0 * sin + x1 * cos;
        }
        out
    })
}

// ---- cases -----------------------------------------------------------------------------------

/// One case: input type, shape and layout, whether frequency factors are given, in place.
#[derive(Clone, Copy, Debug)]
struct Spec {
    ty: Type,
    ne: [i64; 4],
    layout: (Layout, &'static str),
    ff: bool,
    inplace: bool,
    c: Cfg,
}

fn spec(ty: Type, ne: [i64; 4], c: Cfg) -> Spec {
    Spec {
        ty,
        ne,
        layout: (Layout::Contiguous, "contiguous"),
        ff: false,
        inplace: false,
        c,
    }
}

/// The node with the builder the parameters call for.
fn build(s: &Spec, ctx: &Context, x: &[ggml::Tensor]) -> ggml::Result<ggml::Tensor> {
    let c = s.c;
    let (a, b, ff) = (&x[0], &x[1], x.get(2));
    let out = if c.multi() {
        let f = if s.inplace {
            Context::rope_multi_inplace
        } else {
            Context::rope_multi
        };
        f(
            ctx,
            a,
            b,
            ff,
            c.n_dims,
            c.sections,
            c.mode,
            c.n_ctx_orig,
            c.freq_base,
            c.freq_scale,
            c.ext_factor,
            c.attn_factor,
            c.beta_fast,
            c.beta_slow,
        )?
    } else if c.plain() && ff.is_none() {
        if s.inplace {
            ctx.rope_inplace(a, b, c.n_dims, c.mode)?
        } else {
            ctx.rope(a, b, c.n_dims, c.mode)?
        }
    } else {
        let f = if s.inplace {
            Context::rope_ext_inplace
        } else {
            Context::rope_ext
        };
        f(
            ctx,
            a,
            b,
            ff,
            c.n_dims,
            c.mode,
            c.n_ctx_orig,
            c.freq_base,
            c.freq_scale,
            c.ext_factor,
            c.attn_factor,
            c.beta_fast,
            c.beta_slow,
        )?
    };
    if c.n_offs != 0 {
        out.rope_set_offset(c.n_offs)?;
    }
    Ok(out)
}

fn case(s: Spec) -> Case {
    let c = s.c;
    let n_pos = s.ne[2] * if c.multi() { 4 } else { 1 };
    let mut inputs = vec![
        Input::new(s.ty, &s.ne).layout(s.layout.0),
        Input::new(Type::I32, &[n_pos]).init(Init::Ints(-4, 60)),
    ];
    if s.ff {
        inputs.push(Input::new(Type::F32, &[c.n_factors()]).uniform(0.8, 3.0));
    }
    Case::new(
        "ROPE",
        Vars::new()
            .ty("type", s.ty)
            .list("ne_a", &s.ne)
            .val("n_dims", c.n_dims)
            .val("mode", c.mode)
            .list("sections", &c.sections)
            .val("n_offs", c.n_offs)
            .val("n_ctx", c.n_ctx_orig)
            .float("fs", c.freq_scale)
            .float("ef", c.ext_factor)
            .float("af", c.attn_factor)
            .flag("ff", s.ff)
            .val("layout", s.layout.1)
            .flag("inplace", s.inplace),
        inputs,
        move |ctx, x| build(&s, ctx, x),
        move |x| rope_ref(&x[0], &x[1], x.get(2), &c),
    )
}

fn normal_and_neox(out: &mut Vec<Spec>) {
    for ty in [Type::F32, Type::F16] {
        for mode in [ROPE_TYPE_NORMAL, ROPE_TYPE_NEOX] {
            for (ne, n_dims) in [
                ([10, 5, 3, 1], 10),
                ([10, 5, 3, 1], 6),
                ([64, 3, 7, 2], 64),
                ([11, 2, 4, 1], 8),
                ([128, 2, 3, 1], 32),
            ] {
                for ff in [false, true] {
                    for inplace in [false, true] {
                        let c = Cfg {
                            n_dims,
                            mode,
                            ..PLAIN
                        };
                        out.push(Spec {
                            ff,
                            inplace,
                            ..spec(ty, ne, c)
                        });
                    }
                }
            }
        }
    }
}

fn yarn(out: &mut Vec<Spec>) {
    for mode in [ROPE_TYPE_NORMAL, ROPE_TYPE_NEOX] {
        for (fs, ef, af) in [(1.0, 0.0, 0.7), (0.25, 1.0, 1.0), (0.5, 0.5, 1.3)] {
            for (n_ctx_orig, beta_fast, beta_slow) in [(4096, 32.0, 1.0), (0, 1.0, 1.0)] {
                for ff in [false, true] {
                    let c = Cfg {
                        n_dims: 32,
                        mode,
                        n_ctx_orig,
                        freq_base: 500000.0,
                        freq_scale: fs,
                        ext_factor: ef,
                        attn_factor: af,
                        beta_fast,
                        beta_slow,
                        ..PLAIN
                    };
                    out.push(Spec {
                        ff,
                        ..spec(Type::F32, [32, 3, 5, 1], c)
                    });
                }
            }
        }
    }
}

fn multi_section(out: &mut Vec<Spec>) {
    for ty in [Type::F32, Type::F16] {
        for mode in [ROPE_TYPE_MROPE, ROPE_TYPE_IMROPE] {
            for (ne, n_dims, sections) in [
                ([32, 3, 5, 1], 32, [8, 4, 4, 0]),
                ([20, 2, 3, 1], 16, [4, 2, 2, 0]),
                ([24, 2, 4, 1], 24, [3, 3, 3, 3]),
                ([16, 2, 3, 1], 16, [2, 1, 1, 0]),
            ] {
                for (ff, inplace, ef) in [(false, false, 0.0), (true, true, 0.5)] {
                    let c = Cfg {
                        n_dims,
                        mode,
                        sections,
                        freq_scale: 0.5,
                        ext_factor: ef,
                        n_ctx_orig: 2048,
                        beta_fast: 32.0,
                        beta_slow: 1.0,
                        ..PLAIN
                    };
                    out.push(Spec {
                        ff,
                        inplace,
                        ..spec(ty, ne, c)
                    });
                }
            }
        }
        for (ne, sections) in [([16, 3, 4, 1], [4, 4, 0, 0]), ([24, 2, 3, 1], [3, 5, 2, 2])] {
            for ff in [false, true] {
                let c = Cfg {
                    n_dims: ne[0] as i32 / 2,
                    mode: ROPE_TYPE_VISION,
                    sections,
                    ..PLAIN
                };
                out.push(Spec {
                    ff,
                    ..spec(ty, ne, c)
                });
            }
        }
    }
}

fn offsets_and_strided(out: &mut Vec<Spec>) {
    for mode in [ROPE_TYPE_NORMAL, ROPE_TYPE_NEOX, ROPE_TYPE_MROPE] {
        let sections = if mode == ROPE_TYPE_MROPE {
            [2, 1, 1, 0]
        } else {
            [0; 4]
        };
        for (n_dims, n_offs) in [(4, 2), (6, 4), (8, 0)] {
            let c = Cfg {
                n_dims,
                mode,
                sections,
                n_offs,
                ..PLAIN
            };
            out.push(spec(Type::F32, [10, 3, 4, 1], c));
        }
    }
    for layout in [
        (Layout::Permuted([0, 2, 1, 3]), "permuted"),
        (Layout::Padded, "padded"),
    ] {
        for ty in [Type::F32, Type::F16] {
            for inplace in [false, true] {
                let c = Cfg {
                    n_dims: 8,
                    mode: ROPE_TYPE_NEOX,
                    ..PLAIN
                };
                out.push(Spec {
                    layout,
                    inplace,
                    ff: true,
                    ..spec(ty, [12, 5, 3, 2], c)
                });
            }
        }
    }
}

/// The ROPE cases.
pub fn cases() -> Vec<Case> {
    let mut specs = Vec::new();
    normal_and_neox(&mut specs);
    yarn(&mut specs);
    multi_section(&mut specs);
    offsets_and_strided(&mut specs);
    specs.into_iter().map(case).collect()
}
