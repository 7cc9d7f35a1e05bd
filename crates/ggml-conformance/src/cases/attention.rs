//! FLASH_ATTN_EXT (GGML's `test_flash_attn_ext`: grouped heads, padded causal masks, ALiBi,
//! logit soft-capping, sinks, precision, float and quantized K/V, permuted views) and SOFT_MAX
//! with attention sinks, against f64 references.

use std::sync::Arc;

use ggml::ops::Prec;
use ggml::{Context, Tensor, Type};

use crate::case::{Case, Init, Input, Layout, Metric, Vars, NMSE_MATMUL, NMSE_SOFT_MAX};
use crate::host::Host;
use crate::reference::{alibi_slope, soft_max_sinks};
use crate::rng::Rng;

/// Attention of each query row over the keys of its head: `q` `[DK, n_q, H, S]`, `k`
/// `[DK, n_kv, Hk, S]`, `v` `[DV, n_kv, Hv, S]`, result `[DV, H, n_q, S]`. Keys whose mask is
/// −∞ take no part; a sink adds `e^sink` to the normalisation only; no keys and no sink give
/// zeros.
fn flash_attn_ref(
    (q, k, v): (&Host, &Host, &Host),
    mask: Option<&Host>,
    sinks: Option<&Host>,
    (scale, max_bias, softcap): (f64, f64, f64),
) -> Host {
    let (dk, n_q, n_head, n_seq) = (q.ne[0], q.ne[1], q.ne[2], q.ne[3]);
    let (dv, n_kv) = (v.ne[0], k.ne[1]);
    let mut out = Host::from_fn([dv, n_head, n_q, n_seq, 1], |_| 0.0);
    for s in 0..n_seq {
        for h in 0..n_head {
            let hk = h / (n_head / k.ne[2]);
            let hv = h / (n_head / v.ne[2]);
            let slope = alibi_slope(max_bias, h, n_head);
            for i in 0..n_q {
                let mut logits = Vec::new();
                for j in 0..n_kv {
                    let m = mask.map_or(0.0, |m| m.at([j, i, h % m.ne[2], s % m.ne[3], 0]));
                    if m == f64::NEG_INFINITY {
                        continue;
                    }
                    let dot: f64 = (0..dk)
                        .map(|d| q.at([d, i, h, s, 0]) * k.at([d, j, hk, s, 0]))
                        .sum();
                    let mut x = dot * scale;
                    if softcap != 0.0 {
                        x = softcap * (x / softcap).tanh();
                    }
                    logits.push((j, x + slope * m));
                }
                let sink = sinks.map(|s| s.v[h]);
                let max = logits
                    .iter()
                    .map(|l| l.1)
                    .chain(sink)
                    .fold(f64::NEG_INFINITY, f64::max);
                let total: f64 = logits.iter().map(|l| (l.1 - max).exp()).sum::<f64>()
                    + sink.map_or(0.0, |x| (x - max).exp());
                if total == 0.0 {
                    continue;
                }
                for d in 0..dv {
                    let acc: f64 = logits
                        .iter()
                        .map(|&(j, x)| (x - max).exp() * v.at([d, j, hv, s, 0]))
                        .sum();
                    let at = out.offset([d, h, i, s, 0]);
                    out.v[at] = acc / total;
                }
            }
        }
    }
    out
}

/// A mask: random biases, −∞ above the causal diagonal (key j > query i + 2), and every key
/// of query row `dead_row` masked.
fn causal_mask(dead_row: Option<usize>) -> Init {
    Init::Custom(Arc::new(move |rng: &mut Rng, i| {
        if i[0] > i[1] + 2 || dead_row == Some(i[1]) {
            f64::NEG_INFINITY
        } else {
            rng.uniform(-1.0, 1.0)
        }
    }))
}

/// One FLASH_ATTN_EXT case.
#[derive(Clone, Copy, Debug)]
struct Fa {
    dk: i64,
    dv: i64,
    n_kv: i64,
    n_q: i64,
    n_head: i64,
    n_head_kv: i64,
    n_seq: i64,
    /// Mask planes (M2, M3), or no mask.
    mask: Option<[i64; 2]>,
    max_bias: f32,
    softcap: f32,
    sinks: bool,
    k_ty: Type,
    v_ty: Type,
    /// q, k and v as permuted views (`[D, H, N]` in memory, as llama.cpp builds them).
    permuted: bool,
    prec: Prec,
}

const FA: Fa = Fa {
    dk: 32,
    dv: 32,
    n_kv: 17,
    n_q: 3,
    n_head: 4,
    n_head_kv: 4,
    n_seq: 1,
    mask: None,
    max_bias: 0.0,
    softcap: 0.0,
    sinks: false,
    k_ty: Type::F32,
    v_ty: Type::F32,
    permuted: false,
    prec: Prec::Default,
};

fn build_fa(f: &Fa, ctx: &Context, x: &[Tensor]) -> ggml::Result<Tensor> {
    let mask = f.mask.map(|_| &x[3]);
    let scale = 1.0 / (f.dk as f32).sqrt();
    let mut out = ctx.flash_attn_ext(&x[0], &x[1], &x[2], mask, scale, f.max_bias, f.softcap)?;
    out.flash_attn_ext_set_prec(f.prec)?;
    if f.sinks {
        out = ctx.flash_attn_ext_add_sinks(&out, x.last())?;
    }
    Ok(out)
}

fn fa_case(f: Fa) -> Case {
    let layout = if f.permuted {
        Layout::Permuted([0, 2, 1, 3])
    } else {
        Layout::Contiguous
    };
    let kv_layout = |ty: Type| {
        if ty.is_quantized() {
            Layout::Contiguous
        } else {
            layout
        }
    };
    let mut inputs = vec![
        Input::new(Type::F32, &[f.dk, f.n_q, f.n_head, f.n_seq]).layout(layout),
        Input::new(f.k_ty, &[f.dk, f.n_kv, f.n_head_kv, f.n_seq]).layout(kv_layout(f.k_ty)),
        Input::new(f.v_ty, &[f.dv, f.n_kv, f.n_head_kv, f.n_seq]).layout(kv_layout(f.v_ty)),
    ];
    if let Some([m2, m3]) = f.mask {
        // Padded as llama.cpp pads its KQ mask: more keys and rows than used.
        let dead = (f.n_q > 1).then_some(1);
        inputs
            .push(Input::new(Type::F16, &[f.n_kv + 3, f.n_q + 2, m2, m3]).init(causal_mask(dead)));
    }
    if f.sinks {
        inputs.push(Input::new(Type::F32, &[f.n_head]).uniform(-2.0, 2.0));
    }
    let mask_vars = f
        .mask
        .map_or("none".to_string(), |m| format!("[{},{}]", m[0], m[1]));
    Case::new(
        "FLASH_ATTN_EXT",
        Vars::new()
            .val("hsk", f.dk)
            .val("hsv", f.dv)
            .val("nh", f.n_head_kv)
            .val("nr", f.n_head / f.n_head_kv)
            .val("kv", f.n_kv)
            .val("nb", f.n_q)
            .val("ns", f.n_seq)
            .val("mask", mask_vars)
            .float("max_bias", f.max_bias)
            .float("logit_softcap", f.softcap)
            .flag("sinks", f.sinks)
            .val("prec", f.prec as i32)
            .ty("type_K", f.k_ty)
            .ty("type_V", f.v_ty)
            .flag("permute", f.permuted),
        inputs,
        move |ctx, x| build_fa(&f, ctx, x),
        move |x| {
            let scale = 1.0 / (f.dk as f32).sqrt();
            flash_attn_ref(
                (&x[0], &x[1], &x[2]),
                f.mask.map(|_| &x[3]),
                if f.sinks { x.last() } else { None },
                (scale as f64, f.max_bias as f64, f.softcap as f64),
            )
        },
    )
    .metric(Metric::Nmse(NMSE_MATMUL))
}

fn flash_attn(out: &mut Vec<Case>) {
    let mut fas = Vec::new();
    for (dk, dv) in [(32, 32), (40, 24), (64, 64)] {
        for n_head_kv in [4, 2, 1] {
            for (n_kv, n_q, n_seq) in [(17, 3, 1), (33, 1, 2), (8, 5, 1)] {
                for mask in [None, Some([1, 1]), Some([4, n_seq])] {
                    fas.push(Fa {
                        dk,
                        dv,
                        n_kv,
                        n_q,
                        n_seq,
                        n_head_kv,
                        mask,
                        ..FA
                    });
                }
            }
        }
    }
    for max_bias in [0.0, 8.0] {
        for softcap in [0.0, 1.5, 30.0] {
            for sinks in [false, true] {
                for mask in [None, Some([1, 1])] {
                    if max_bias > 0.0 && mask.is_none() {
                        continue;
                    }
                    fas.push(Fa {
                        max_bias,
                        softcap,
                        sinks,
                        mask,
                        n_head: 6,
                        n_head_kv: 3,
                        prec: if sinks { Prec::F32 } else { Prec::Default },
                        ..FA
                    });
                }
            }
        }
    }
    let types = [
        Type::F32,
        Type::F16,
        Type::BF16,
        Type::Q4_0,
        Type::Q4_1,
        Type::Q5_0,
        Type::Q5_1,
        Type::Q8_0,
        Type::IQ4_NL,
    ];
    for k_ty in types {
        // V of F16 and of K's own type (F32 with F32 is in the grid above).
        let v_types = if matches!(k_ty, Type::F16 | Type::F32) {
            vec![Type::F16]
        } else {
            vec![Type::F16, k_ty]
        };
        for v_ty in v_types {
            fas.push(Fa {
                k_ty,
                v_ty,
                mask: Some([1, 1]),
                n_head_kv: 2,
                ..FA
            });
        }
    }
    fas.push(Fa {
        dk: 256,
        dv: 256,
        k_ty: Type::Q4_K,
        v_ty: Type::Q6_K,
        n_kv: 5,
        ..FA
    });
    for k_ty in [Type::F32, Type::F16] {
        fas.push(Fa {
            k_ty,
            v_ty: k_ty,
            permuted: true,
            mask: Some([2, 1]),
            n_seq: 2,
            n_head: 4,
            n_head_kv: 2,
            ..FA
        });
    }
    out.extend(fas.into_iter().map(fa_case));
}

fn soft_max_sinks_cases(out: &mut Vec<Case>) {
    for a_ty in [Type::F32, Type::F16, Type::BF16] {
        for (a_ne, m_ne) in [
            ([16i64, 4, 6, 2], Some([16i64, 4, 1, 1])),
            ([9, 3, 5, 1], None),
            ([33, 2, 3, 2], Some([33, 5, 3, 2])),
        ] {
            for mty in [Type::F32, Type::F16] {
                if m_ne.is_none() && mty == Type::F16 {
                    continue;
                }
                for inplace in [false, true] {
                    for max_bias in [0.0f32, 8.0] {
                        if max_bias > 0.0 && m_ne.is_none() {
                            continue;
                        }
                        let mut inputs = vec![Input::new(a_ty, &a_ne).uniform(-3.0, 3.0)];
                        inputs.push(Input::new(Type::F32, &[a_ne[2]]).uniform(-2.0, 4.0));
                        if let Some(ne) = m_ne {
                            inputs.push(Input::new(mty, &ne).init(causal_mask(None)));
                        }
                        let mask_vars = m_ne.map_or("none".to_string(), |m| {
                            format!("[{},{},{},{}]", m[0], m[1], m[2], m[3])
                        });
                        out.push(
                            Case::new(
                                "SOFT_MAX",
                                Vars::new()
                                    .ty("type", a_ty)
                                    .list("ne", &a_ne)
                                    .val("mask", mask_vars)
                                    .ty("m_prec", mty)
                                    .float("scale", 0.7)
                                    .float("max_bias", max_bias)
                                    .flag("sinks", true)
                                    .flag("inplace", inplace),
                                inputs,
                                move |ctx, x| {
                                    let sm = if inplace {
                                        ctx.soft_max_ext_inplace(&x[0], x.get(2), 0.7, max_bias)?
                                    } else {
                                        ctx.soft_max_ext(&x[0], x.get(2), 0.7, max_bias)?
                                    };
                                    ctx.soft_max_add_sinks(&sm, Some(&x[1]))
                                },
                                move |x| {
                                    soft_max_sinks(
                                        &x[0],
                                        x.get(2),
                                        0.7f32 as f64,
                                        max_bias as f64,
                                        Some(&x[1]),
                                    )
                                },
                            )
                            .metric(Metric::Nmse(NMSE_SOFT_MAX)),
                        );
                    }
                }
            }
        }
    }
}

/// The FLASH_ATTN_EXT and SOFT_MAX-with-sinks cases.
pub fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    flash_attn(&mut out);
    soft_max_sinks_cases(&mut out);
    out
}
