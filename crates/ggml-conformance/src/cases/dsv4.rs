//! DeepSeek-V4's ops: LIGHTNING_INDEXER (GGML's `test_lightning_indexer`, NMSE 1e-6) and the
//! hyper-connection ops DSV4_HC_COMB, DSV4_HC_PRE and DSV4_HC_POST (`test_dsv4_hc_*`, with
//! GGML's value ranges).

use std::sync::Arc;

use ggml::Type;

use crate::case::{Case, Init, Input, Layout, Metric, Vars, NMSE_SOFT_MAX};
use crate::host::{shape, Host};
use crate::rng::Rng;

const F32: Type = Type::F32;
const HC: usize = 4;

/// A causal mask `[n_kv, T, 1, Sm]`: 0 up to key `n_kv − T + t`, −∞ after.
fn causal(n_kv: i64, t_n: i64) -> Init {
    Init::Custom(Arc::new(move |_: &mut Rng, i| {
        if (i[0] as i64) <= n_kv - t_n + i[1] as i64 {
            0.0
        } else {
            f64::NEG_INFINITY
        }
    }))
}

fn lightning_indexer(out: &mut Vec<Case>) {
    // (D, H, n_kv, T, S, Sm)
    let grid: [(i64, i64, i64, i64, i64, i64); 5] = [
        (128, 4, 64, 3, 1, 1),
        (64, 8, 33, 5, 2, 2),
        (32, 3, 7, 1, 4, 1),
        (128, 2, 65, 4, 2, 1),
        (32, 5, 1, 2, 1, 1),
    ];
    let types = [
        Type::F32,
        Type::F16,
        Type::BF16,
        Type::Q8_0,
        Type::Q5_1,
        Type::Q5_0,
        Type::Q4_1,
        Type::Q4_0,
        Type::IQ4_NL,
    ];
    for (d, h, n_kv, t, s, sm) in grid {
        for ty in types {
            out.push(
                Case::new(
                    "LIGHTNING_INDEXER",
                    Vars::new()
                        .val("hsk", d)
                        .val("nh", h)
                        .val("kv", n_kv)
                        .val("nb", t)
                        .val("ns", s)
                        .val("nm", sm)
                        .ty("type_K", ty),
                    vec![
                        Input::new(F32, &[d, h, t, s]),
                        Input::new(ty, &[d, 1, n_kv, s]),
                        Input::new(F32, &[h, t, 1, s]),
                        Input::new(Type::F16, &[n_kv, t, 1, sm]).init(causal(n_kv, t)),
                    ],
                    |ctx, x| ctx.lightning_indexer(&x[0], &x[1], &x[2], &x[3]),
                    |x| {
                        let (q, k, w, m) = (&x[0], &x[1], &x[2], &x[3]);
                        let ne = [k.ne[2] as i64, q.ne[2] as i64, 1, q.ne[3] as i64];
                        Host::from_fn(shape(&ne), |i| {
                            let (j, t, s) = (i[0], i[1], i[3]);
                            let mut sum = 0.0;
                            for hh in 0..q.ne[1] {
                                let dot: f64 = (0..q.ne[0])
                                    .map(|e| q.at([e, hh, t, s, 0]) * k.at([e, 0, j, s, 0]))
                                    .sum();
                                sum += dot.max(0.0) * w.at([hh, t, 0, s, 0]);
                            }
                            sum + m.at([j, t, 0, s % m.ne[3], 0])
                        })
                    },
                )
                .metric(Metric::Nmse(NMSE_SOFT_MAX)),
            );
        }
    }
}

/// DSV4_HC_COMB for one token: `[dst, src]` logits, softmax over `dst` plus `eps`, then
/// Sinkhorn (columns, then `n_iter − 1` rounds of rows and columns; each sum starts at `eps`).
fn hc_comb_token(logits: [[f64; HC]; HC], eps: f64, n_iter: i32) -> [[f64; HC]; HC] {
    // c[src][dst]
    let mut c = logits;
    for col in c.iter_mut() {
        let top = col.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let total: f64 = col.iter().map(|v| (v - top).exp()).sum();
        for v in col.iter_mut() {
            *v = (*v - top).exp() / total + eps;
        }
    }
    // "cols": for each dst, normalise over src; "rows": for each src, over dst.
    let norm_dst = |c: &mut [[f64; HC]; HC]| {
        for dst in 0..HC {
            let sum = eps + (0..HC).map(|src| c[src][dst]).sum::<f64>();
            for row in c.iter_mut() {
                row[dst] /= sum;
            }
        }
    };
    let norm_src = |c: &mut [[f64; HC]; HC]| {
        for row in c.iter_mut() {
            let sum = eps + row.iter().sum::<f64>();
            row.iter_mut().for_each(|v| *v /= sum);
        }
    };
    norm_dst(&mut c);
    for _ in 1..n_iter {
        norm_src(&mut c);
        norm_dst(&mut c);
    }
    c
}

fn hc_comb(out: &mut Vec<Case>) {
    for (t, n_iter, eps, padded) in [
        (1i64, 1i32, 1e-6f32, false),
        (17, 4, 1e-6, false),
        (9, 20, 1e-6, true),
        (5, 8, 0.01, false),
    ] {
        let layout = if padded {
            Layout::Padded
        } else {
            Layout::Contiguous
        };
        let mixes = [((2 + HC) * HC) as i64, t];
        out.push(Case::new(
            "DSV4_HC_COMB",
            Vars::new()
                .val("n_tokens", t)
                .val("n_iter", n_iter)
                .float("eps", eps)
                .flag("v", padded),
            vec![
                Input::new(F32, &mixes).layout(layout).uniform(-2.0, 2.0),
                Input::new(F32, &[3]).uniform(-0.5, 0.5),
                Input::new(F32, &[mixes[0]]).uniform(-0.25, 0.25),
            ],
            move |ctx, x| ctx.dsv4_hc_comb(&x[0], &x[1], &x[2], eps, n_iter),
            move |x| {
                let (m, sc, base) = (&x[0], &x[1], &x[2]);
                let mut v = Vec::new();
                for tok in 0..m.ne[1] {
                    let logits = std::array::from_fn(|src| {
                        std::array::from_fn(|dst| {
                            let k = 2 * HC + dst + HC * src;
                            m.at([k, tok, 0, 0, 0]) * sc.v[2] + base.v[k]
                        })
                    });
                    let c = hc_comb_token(logits, eps as f64, n_iter);
                    v.extend(c.iter().flatten());
                }
                Host {
                    ne: shape(&[HC as i64, HC as i64, m.ne[1] as i64]),
                    v,
                }
            },
        ));
    }
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

fn hc_pre(out: &mut Vec<Case>) {
    for (e, t, gated, layout) in [
        (1i64, 1i64, false, Layout::Contiguous),
        (31, 17, false, Layout::Contiguous),
        (128, 5, false, Layout::Padded),
        (31, 17, true, Layout::Contiguous),
        (33, 3, true, Layout::Padded),
        (1024, 3, true, Layout::Contiguous),
    ] {
        let x_ne = [e, HC as i64, t];
        let w_ne: Vec<i64> = if gated {
            x_ne.to_vec()
        } else {
            vec![HC as i64, t]
        };
        let scale = 1.0 / HC as f32;
        out.push(Case::new(
            "DSV4_HC_PRE",
            Vars::new()
                .val("n_embd", e)
                .val("n_hc", HC)
                .val("n_tokens", t)
                .flag("gated", gated)
                .flag("v", layout == Layout::Padded),
            vec![
                Input::new(F32, &x_ne).layout(layout),
                if gated {
                    Input::new(F32, &w_ne).layout(layout).uniform(-4.0, 4.0)
                } else {
                    Input::new(F32, &w_ne).uniform(0.0, 1.0)
                },
            ],
            move |ctx, x| {
                if gated {
                    ctx.dsv4_hc_pre_gated(&x[0], &x[1], scale)
                } else {
                    ctx.dsv4_hc_pre(&x[0], &x[1])
                }
            },
            move |x| {
                let (xs, w) = (&x[0], &x[1]);
                Host::from_fn(shape(&[xs.ne[0] as i64, xs.ne[2] as i64]), |i| {
                    let sum: f64 = (0..HC)
                        .map(|h| {
                            let wv = if gated {
                                sigmoid(w.at([i[0], h, i[1], 0, 0]))
                            } else {
                                w.at([h, i[1], 0, 0, 0])
                            };
                            xs.at([i[0], h, i[1], 0, 0]) * wv
                        })
                        .sum();
                    if gated {
                        scale as f64 * sum
                    } else {
                        sum
                    }
                })
            },
        ));
    }
}

fn hc_post(out: &mut Vec<Case>) {
    for (e, t, identity, layout) in [
        (1i64, 1i64, false, Layout::Contiguous),
        (31, 17, false, Layout::Contiguous),
        (64, 5, false, Layout::Padded),
        (31, 17, true, Layout::Contiguous),
        (640, 3, true, Layout::Padded),
        (129, 4, false, Layout::Transposed),
    ] {
        // A transposed `x` [E, T] is a view of [T, E]; the others keep their layouts.
        let x_layout = layout;
        let r_layout = if layout == Layout::Transposed {
            Layout::Permuted([1, 0, 2, 3])
        } else {
            layout
        };
        let mut inputs = vec![
            Input::new(F32, &[e, t]).layout(x_layout),
            Input::new(F32, &[e, HC as i64, t]).layout(r_layout),
            Input::new(F32, &[HC as i64, t]).uniform(0.0, 2.0),
        ];
        if !identity {
            inputs.push(Input::new(F32, &[HC as i64, HC as i64, t]).uniform(0.0, 1.0));
        }
        out.push(Case::new(
            "DSV4_HC_POST",
            Vars::new()
                .val("n_embd", e)
                .val("n_tokens", t)
                .flag("identity", identity)
                .val(
                    "layout",
                    match layout {
                        Layout::Padded => "padded",
                        Layout::Transposed => "transposed",
                        _ => "contiguous",
                    },
                ),
            inputs,
            |ctx, x| ctx.dsv4_hc_post(&x[0], &x[1], &x[2], x.get(3)),
            |x| {
                let (xs, res, post) = (&x[0], &x[1], &x[2]);
                Host::from_fn(res.ne, |i| {
                    let (e, d, t) = (i[0], i[1], i[2]);
                    let mixed = match x.get(3) {
                        Some(comb) => (0..HC)
                            .map(|s| res.at([e, s, t, 0, 0]) * comb.at([d, s, t, 0, 0]))
                            .sum(),
                        None => res.at([e, d, t, 0, 0]),
                    };
                    xs.at([e, t, 0, 0, 0]) * post.at([d, t, 0, 0, 0]) + mixed
                })
            },
        ));
    }
}

/// The DeepSeek-V4 cases.
pub fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    lightning_indexer(&mut out);
    hc_comb(&mut out);
    hc_pre(&mut out);
    hc_post(&mut out);
    out
}
