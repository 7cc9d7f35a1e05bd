//! ROPE (rope, rope_ext, rope_multi, in-place forms, offsets) against an f64 reference written
//! from the definition: angles `p · base^(−2e/n_dims) / ff`, YaRN's ramp between the
//! correction dimensions, and the pair layout of each mode.

mod common;

use common::*;
use ggml::ops::{Meta, NodeMeta, RopeParams};
use ggml::{Context, Op, Tensor, Type};
use ggml::{ROPE_TYPE_IMROPE, ROPE_TYPE_MROPE, ROPE_TYPE_NEOX, ROPE_TYPE_NORMAL, ROPE_TYPE_VISION};

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

// ---- reference -------------------------------------------------------------------------------

/// Which of the four positions pair `i` takes, and its angle exponent.
fn position_and_exponent(c: &Cfg, i: usize) -> (usize, usize) {
    if c.mode & ROPE_TYPE_MROPE == 0 {
        return (0, i);
    }
    let s = c.sections.map(|x| x as usize);
    let starts = [0, s[0], s[0] + s[1], s[0] + s[1] + s[2]];
    let sector = i % s.iter().sum::<usize>();
    let by_range = (0..4).rev().find(|&k| sector >= starts[k]).unwrap();
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
fn rope_ref(a: &Host, pos: &[f64], ff: Option<&[f64]>, c: &Cfg) -> Host {
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
            let p = pos[r[1] + k * ne2];
            let extrap = p * (c.freq_base as f64).powf(-2.0 * e as f64 / nd as f64)
                / ff.map_or(1.0, |f| f[i]);
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
struct Case {
    ty: Type,
    ne: [i64; 4],
    layout: Layout,
    ff: bool,
    inplace: bool,
    c: Cfg,
}

impl Case {
    fn name(&self) -> String {
        let c = &self.c;
        format!(
            "ROPE(type={},ne={:?},layout={:?},n_dims={},mode={},sections={:?},n_offs={},\
             fs={},ef={},af={},ff={},inplace={})",
            self.ty,
            self.ne,
            self.layout,
            c.n_dims,
            c.mode,
            c.sections,
            c.n_offs,
            c.freq_scale,
            c.ext_factor,
            c.attn_factor,
            self.ff,
            self.inplace
        )
    }

    /// Builds the node with the builder the parameters call for and returns it with the
    /// reference.
    fn build(&self, ctx: &Context, rng: &mut Rng) -> ggml::Result<(Tensor, Host)> {
        let c = self.c;
        let (a, ha) = input(ctx, self.ty, &self.ne, self.layout, rng, -1.0, 1.0)?;
        let per_token = if c.mode & ROPE_TYPE_MROPE != 0 { 4 } else { 1 };
        let n_pos = self.ne[2] * per_token;
        let pos: Vec<f64> = (0..n_pos).map(|_| rng.range(-4, 60) as f64).collect();
        let (b, _) = input_values(ctx, Type::I32, &[n_pos], &pos)?;
        let n_ff = if c.mode == ROPE_TYPE_VISION {
            c.n_dims
        } else {
            c.n_dims / 2
        } as i64;
        let ff = if self.ff {
            let (f, hf) = input(ctx, Type::F32, &[n_ff], Layout::Contiguous, rng, 0.8, 3.0)?;
            Some((f, hf))
        } else {
            None
        };
        let fft = ff.as_ref().map(|f| &f.0);
        let plain = c.freq_scale == 1.0
            && c.ext_factor == 0.0
            && c.attn_factor == 1.0
            && c.n_ctx_orig == 0
            && c.freq_base == 10000.0
            && c.beta_fast == 0.0
            && c.beta_slow == 0.0;
        let out = if c.mode & ROPE_TYPE_MROPE != 0 {
            let f = if self.inplace {
                Context::rope_multi_inplace
            } else {
                Context::rope_multi
            };
            f(
                ctx,
                &a,
                &b,
                fft,
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
        } else if plain && !self.ff {
            if self.inplace {
                ctx.rope_inplace(&a, &b, c.n_dims, c.mode)?
            } else {
                ctx.rope(&a, &b, c.n_dims, c.mode)?
            }
        } else {
            let f = if self.inplace {
                Context::rope_ext_inplace
            } else {
                Context::rope_ext
            };
            f(
                ctx,
                &a,
                &b,
                fft,
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
        if self.inplace {
            assert_aliases(&out, &a);
        }
        let hf = ff.as_ref().map(|f| f.1.v.clone());
        Ok((out, rope_ref(&ha, &pos, hf.as_deref(), &c)))
    }
}

fn run(cases: &[Case]) {
    for case in cases {
        check(&case.name(), TOL, |ctx, rng| case.build(ctx, rng));
    }
}

fn base(ty: Type, ne: [i64; 4], c: Cfg) -> Case {
    Case {
        ty,
        ne,
        layout: Layout::Contiguous,
        ff: false,
        inplace: false,
        c,
    }
}

#[test]
fn normal_and_neox() {
    let mut cases = Vec::new();
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
                        cases.push(Case {
                            ff,
                            inplace,
                            ..base(
                                ty,
                                ne,
                                Cfg {
                                    n_dims,
                                    mode,
                                    ..PLAIN
                                },
                            )
                        });
                    }
                }
            }
        }
    }
    run(&cases);
}

#[test]
fn yarn_scaling_and_attn_factor() {
    let mut cases = Vec::new();
    for mode in [ROPE_TYPE_NORMAL, ROPE_TYPE_NEOX] {
        for (fs, ef, af) in [(1.0, 0.0, 0.7), (0.25, 1.0, 1.0), (0.5, 0.5, 1.3)] {
            for (n_ctx_orig, beta_fast, beta_slow) in [(4096, 32.0, 1.0), (0, 1.0, 1.0)] {
                for ff in [false, true] {
                    cases.push(Case {
                        ff,
                        ..base(
                            Type::F32,
                            [32, 3, 5, 1],
                            Cfg {
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
                            },
                        )
                    });
                }
            }
        }
    }
    run(&cases);
}

#[test]
fn multi_section_modes() {
    let mut cases = Vec::new();
    for ty in [Type::F32, Type::F16] {
        for mode in [ROPE_TYPE_MROPE, ROPE_TYPE_IMROPE] {
            for (ne, n_dims, sections) in [
                ([32, 3, 5, 1], 32, [8, 4, 4, 0]),
                ([20, 2, 3, 1], 16, [4, 2, 2, 0]),
                ([24, 2, 4, 1], 24, [3, 3, 3, 3]),
                ([16, 2, 3, 1], 16, [2, 1, 1, 0]),
            ] {
                for (ff, inplace, ef) in [(false, false, 0.0), (true, true, 0.5)] {
                    cases.push(Case {
                        ff,
                        inplace,
                        ..base(
                            ty,
                            ne,
                            Cfg {
                                n_dims,
                                mode,
                                sections,
                                freq_scale: 0.5,
                                ext_factor: ef,
                                n_ctx_orig: 2048,
                                beta_fast: 32.0,
                                beta_slow: 1.0,
                                ..PLAIN
                            },
                        )
                    });
                }
            }
        }
        for (ne, sections) in [([16, 3, 4, 1], [4, 4, 0, 0]), ([24, 2, 3, 1], [3, 5, 2, 2])] {
            for ff in [false, true] {
                cases.push(Case {
                    ff,
                    ..base(
                        ty,
                        ne,
                        Cfg {
                            n_dims: ne[0] as i32 / 2,
                            mode: ROPE_TYPE_VISION,
                            sections,
                            ..PLAIN
                        },
                    )
                });
            }
        }
    }
    run(&cases);
}

#[test]
fn offsets_and_strided_inputs() {
    let mut cases = Vec::new();
    for mode in [ROPE_TYPE_NORMAL, ROPE_TYPE_NEOX, ROPE_TYPE_MROPE] {
        let sections = if mode == ROPE_TYPE_MROPE {
            [2, 1, 1, 0]
        } else {
            [0; 4]
        };
        for (n_dims, n_offs) in [(4, 2), (6, 4), (8, 0)] {
            cases.push(base(
                Type::F32,
                [10, 3, 4, 1],
                Cfg {
                    n_dims,
                    mode,
                    sections,
                    n_offs,
                    ..PLAIN
                },
            ));
        }
    }
    for layout in [Layout::Permuted([0, 2, 1, 3]), Layout::Padded] {
        for ty in [Type::F32, Type::F16] {
            for inplace in [false, true] {
                cases.push(Case {
                    layout,
                    inplace,
                    ff: true,
                    ..base(
                        ty,
                        [12, 5, 3, 2],
                        Cfg {
                            n_dims: 8,
                            mode: ROPE_TYPE_NEOX,
                            ..PLAIN
                        },
                    )
                });
            }
        }
    }
    run(&cases);
}

#[test]
#[allow(deprecated)]
fn rope_custom_is_rope_ext_without_factors() {
    let ctx = Context::init(1 << 20, true).unwrap();
    let a = ctx.new_tensor_3d(Type::F32, 8, 2, 3).unwrap();
    let b = ctx.new_tensor_1d(Type::I32, 3).unwrap();
    let args = (8, ROPE_TYPE_NEOX, 4096, 1e4, 0.5, 1.0, 1.0, 32.0, 1.0);
    let x = ctx
        .rope_custom(
            &a, &b, args.0, args.1, args.2, args.3, args.4, args.5, args.6, args.7, args.8,
        )
        .unwrap();
    let y = ctx
        .rope_ext(
            &a, &b, None, args.0, args.1, args.2, args.3, args.4, args.5, args.6, args.7, args.8,
        )
        .unwrap();
    assert_eq!(x.op_params(), y.op_params());
    let xi = ctx
        .rope_custom_inplace(
            &a, &b, args.0, args.1, args.2, args.3, args.4, args.5, args.6, args.7, args.8,
        )
        .unwrap();
    assert_aliases(&xi, &a);
}

#[test]
fn op_params_have_ggml_layout() {
    let ctx = Context::init(1 << 20, true).unwrap();
    let a = ctx.new_tensor_3d(Type::F32, 16, 2, 3).unwrap();
    let b = ctx.new_tensor_1d(Type::I32, 12).unwrap();
    let r = ctx
        .rope_multi(
            &a,
            &b,
            None,
            12,
            [4, 2, 2, 0],
            ROPE_TYPE_MROPE,
            2048,
            1e6,
            0.5,
            0.25,
            0.9,
            32.0,
            1.0,
        )
        .unwrap();
    let p = r.op_params();
    assert_eq!(&p[..5], &[0, 12, 8, 0, 2048]);
    let f: Vec<f32> = p[5..11].iter().map(|&x| f32::from_bits(x as u32)).collect();
    assert_eq!(f, [1e6, 0.5, 0.25, 0.9, 32.0, 1.0]);
    assert_eq!(&p[11..16], &[4, 2, 2, 0, 0]);
    let typed: RopeParams = ggml::ops::read_params(&p);
    assert_eq!(typed.sections, [4, 2, 2, 0]);
    r.rope_set_offset(2).unwrap();
    assert_eq!(r.op_params()[15], 2);
    // Sections are stored only for the multi-section modes (as GGML).
    let a2 = ctx.new_tensor_3d(Type::F32, 16, 2, 3).unwrap();
    let b2 = ctx.new_tensor_1d(Type::I32, 3).unwrap();
    let r2 = ctx
        .rope_multi(
            &a2,
            &b2,
            None,
            16,
            [4, 2, 2, 0],
            ROPE_TYPE_NEOX,
            0,
            1e4,
            1.0,
            0.0,
            1.0,
            0.0,
            0.0,
        )
        .unwrap();
    assert_eq!(&r2.op_params()[11..15], &[0; 4]);
    // The correction dimensions GGML computes for llama's YaRN defaults.
    let d = ggml::rope_yarn_corr_dims(128, 4096, 10000.0, 32.0, 1.0);
    assert_eq!(d, [20.0, 46.0]);
    let d = ggml::rope_yarn_corr_dims(64, 0, 10000.0, 1.0, 1.0);
    assert_eq!(d[0], 0.0);
    assert_eq!(d[1], f32::NEG_INFINITY);
}

#[test]
fn builder_nodes_validate() {
    let ctx = Context::init(1 << 20, true).unwrap();
    let a = ctx.new_tensor_3d(Type::F16, 16, 2, 3).unwrap();
    let b = ctx.new_tensor_1d(Type::I32, 3).unwrap();
    let b4 = ctx.new_tensor_1d(Type::I32, 12).unwrap();
    let f = ctx.new_tensor_1d(Type::F32, 8).unwrap();
    let nodes = [
        ctx.rope(&a, &b, 16, ROPE_TYPE_NORMAL).unwrap(),
        ctx.rope_inplace(&a, &b, 8, ROPE_TYPE_NEOX).unwrap(),
        ctx.rope_ext(&a, &b, Some(&f), 16, 2, 0, 1e4, 1.0, 0.0, 1.0, 0.0, 0.0)
            .unwrap(),
        ctx.rope_multi(
            &a,
            &b4,
            Some(&f),
            8,
            [4, 4, 0, 0],
            24,
            0,
            1e4,
            1.0,
            0.0,
            1.0,
            0.0,
            0.0,
        )
        .unwrap(),
    ];
    for n in &nodes {
        let src: Vec<Option<Meta>> = (0..n.n_src_slots())
            .map(|i| n.src(i).map(Meta::of))
            .collect();
        let params = n.op_params();
        let node = NodeMeta {
            dst: Meta::of(n),
            view_offs: n.view_src().map(|_| n.view_offs()),
            src: &src,
            op_params: &params,
        };
        Op::Rope.validate(&node).unwrap();
        // An odd n_dims received from outside is refused.
        let mut bad = params;
        bad[1] = 7;
        let node = NodeMeta {
            op_params: &bad,
            ..node
        };
        assert_err(Op::Rope.validate(&node), &["ROPE", "n_dims = 7"]);
    }
}

#[test]
fn bad_arguments_are_refused() {
    let ctx = Context::init(1 << 20, true).unwrap();
    let a = ctx.new_tensor_3d(Type::F32, 10, 2, 3).unwrap();
    let b = ctx.new_tensor_1d(Type::I32, 3).unwrap();
    let ext = |a: &Tensor, b: &Tensor, c: Option<&Tensor>, n_dims, mode| {
        ctx.rope_ext(a, b, c, n_dims, mode, 0, 1e4, 1.0, 0.0, 1.0, 0.0, 0.0)
    };
    assert_err(ext(&a, &b, None, 10, 1), &["ROPE", "mode = 1"]);
    assert_err(ext(&a, &b, None, 10, 4), &["ROPE", "mode = 4"]);
    assert_err(ext(&a, &b, None, 9, 0), &["n_dims = 9"]);
    assert_err(ext(&a, &b, None, 12, 0), &["n_dims = 12", "a.ne0 = 10"]);
    assert_err(ext(&a, &b, None, -2, 0), &["n_dims = -2"]);
    let b_f32 = ctx.new_tensor_1d(Type::F32, 3).unwrap();
    assert_err(ext(&a, &b_f32, None, 10, 0), &["ROPE", "b", "i32"]);
    let b_short = ctx.new_tensor_1d(Type::I32, 2).unwrap();
    assert_err(ext(&a, &b_short, None, 10, 0), &["b", "3 positions"]);
    let b_2d = ctx.new_tensor_2d(Type::I32, 3, 2).unwrap();
    assert_err(ext(&a, &b_2d, None, 10, 0), &["b", "vector"]);
    let c_f16 = ctx.new_tensor_1d(Type::F16, 5).unwrap();
    assert_err(ext(&a, &b, Some(&c_f16), 10, 0), &["c", "f32"]);
    let c_short = ctx.new_tensor_1d(Type::F32, 4).unwrap();
    assert_err(ext(&a, &b, Some(&c_short), 10, 0), &["c", "at least 5"]);
    let ai = ctx.new_tensor_3d(Type::I32, 10, 2, 3).unwrap();
    assert_err(ext(&ai, &b, None, 10, 0), &["a", "f32 or f16"]);
    let at = ctx.transpose(&a).unwrap();
    let bt = ctx.new_tensor_1d(Type::I32, 3).unwrap();
    assert_err(ext(&at, &bt, None, 2, 0), &["a", "packed"]);
    let multi = |sections, mode, n_dims| {
        let b4 = ctx.new_tensor_1d(Type::I32, 12).unwrap();
        ctx.rope_multi(
            &a, &b4, None, n_dims, sections, mode, 0, 1e4, 1.0, 0.0, 1.0, 0.0, 0.0,
        )
    };
    assert_err(multi([0, 0, 0, 4], ROPE_TYPE_MROPE, 8), &["sections"]);
    assert_err(multi([-1, 4, 0, 0], ROPE_TYPE_MROPE, 8), &["sections"]);
    assert_err(
        multi([8, 4, 0, 0], ROPE_TYPE_MROPE, 8),
        &["sections", "a.ne0 = 10"],
    );
    assert_err(
        multi([2, 2, 0, 0], ROPE_TYPE_VISION, 4),
        &["VISION", "n_dims = 4"],
    );
    // mrope wants four positions per token
    assert_err(
        ctx.rope_multi(
            &a,
            &b,
            None,
            8,
            [2, 2, 0, 0],
            ROPE_TYPE_MROPE,
            0,
            1e4,
            1.0,
            0.0,
            1.0,
            0.0,
            0.0,
        ),
        &["b", "12 positions"],
    );
    // offsets: checked when set, the node keeps its old value
    let r = ext(&a, &b, None, 6, 0).unwrap();
    assert_err(r.rope_set_offset(3), &["n_offs = 3"]);
    assert_err(r.rope_set_offset(6), &["n_offs = 6"]);
    assert_err(r.rope_set_offset(-2), &["n_offs = -2"]);
    r.rope_set_offset(4).unwrap();
    assert_eq!(r.op_params()[15], 4);
    let sum = ctx.add(&a, &a).unwrap();
    assert_err(sum.rope_set_offset(2), &["rope_set_offset", "ADD"]);
    let v = ctx.new_tensor_3d(Type::F32, 8, 2, 3).unwrap();
    let b4 = ctx.new_tensor_1d(Type::I32, 12).unwrap();
    let rv = ctx
        .rope_multi(
            &v,
            &b4,
            None,
            4,
            [2, 2, 0, 0],
            ROPE_TYPE_VISION,
            0,
            1e4,
            1.0,
            0.0,
            1.0,
            0.0,
            0.0,
        )
        .unwrap();
    assert_err(rv.rope_set_offset(2), &["VISION"]);
}
