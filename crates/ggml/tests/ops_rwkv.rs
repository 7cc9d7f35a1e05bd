//! RWKV_WKV6, GATED_LINEAR_ATTN, RWKV_WKV7 and GATED_DELTA_NET against plain f64 references,
//! plus their shape rules.
// The references are plain index loops over logical indices, on purpose.
#![allow(clippy::needless_range_loop)]

mod common;

use common::*;
use ggml::{Context, Type};

/// The WKV-style layout: per sequence (of `T / n_seqs` tokens) and head, the state `st[i·S +
/// j]` starts from `state` and `step(t, h, st, out)` advances it and fills the token's `S`
/// outputs. Result `[S·H, T + S·n_seqs]`: outputs, then final states.
fn wkv_family(
    s: usize,
    h: usize,
    t: usize,
    state: &Host,
    mut step: impl FnMut(usize, usize, &mut [f64], &mut [f64]),
) -> Host {
    let n_seqs = state.ne[1];
    let c = s * h;
    let mut res = vec![0.0; c * (t + s * n_seqs)];
    for seq in 0..n_seqs {
        for hh in 0..h {
            let base = seq * s * c + hh * s * s;
            let mut st: Vec<f64> = (0..s * s).map(|e| state.v[base + e]).collect();
            for tt in seq * (t / n_seqs)..(seq + 1) * (t / n_seqs) {
                let mut out = vec![0.0; s];
                step(tt, hh, &mut st, &mut out);
                res[tt * c + hh * s..tt * c + hh * s + s].copy_from_slice(&out);
            }
            res[t * c + base..t * c + base + s * s].copy_from_slice(&st);
        }
    }
    Host {
        ne: [c, t + s * n_seqs, 1, 1, 1],
        v: res,
    }
}

fn ref_wkv6(k: &Host, v: &Host, r: &Host, tf: &Host, td: &Host, state: &Host) -> Host {
    let [s, h, t, ..] = k.ne;
    wkv_family(s, h, t, state, |tt, hh, st, out| {
        for i in 0..s {
            let (ki, ri) = (k.at([i, hh, tt, 0, 0]), r.at([i, hh, tt, 0, 0]));
            let (tfi, tdi) = (tf.v[hh * s + i], td.at([i, hh, tt, 0, 0]));
            for j in 0..s {
                let kv = ki * v.at([j, hh, tt, 0, 0]);
                out[j] += ri * (tfi * kv + st[i * s + j]);
                st[i * s + j] = st[i * s + j] * tdi + kv;
            }
        }
    })
}

fn ref_gla(k: &Host, v: &Host, q: &Host, g: &Host, state: &Host, scale: f64) -> Host {
    let [s, h, t, ..] = k.ne;
    wkv_family(s, h, t, state, |tt, hh, st, out| {
        for i in 0..s {
            let (ki, qi, gi) = (
                k.at([i, hh, tt, 0, 0]),
                q.at([i, hh, tt, 0, 0]),
                g.at([i, hh, tt, 0, 0]),
            );
            for j in 0..s {
                st[i * s + j] = st[i * s + j] * gi + ki * v.at([j, hh, tt, 0, 0]);
                out[j] += st[i * s + j] * qi * scale;
            }
        }
    })
}

#[allow(clippy::too_many_arguments)]
fn ref_wkv7(r: &Host, w: &Host, k: &Host, v: &Host, a: &Host, b: &Host, state: &Host) -> Host {
    let [s, h, t, ..] = k.ne;
    wkv_family(s, h, t, state, |tt, hh, st, out| {
        let at = |x: &Host, j: usize| x.at([j, hh, tt, 0, 0]);
        for i in 0..s {
            let sa: f64 = (0..s).map(|j| at(a, j) * st[i * s + j]).sum();
            for j in 0..s {
                st[i * s + j] = st[i * s + j] * at(w, j) + at(v, i) * at(k, j) + sa * at(b, j);
                out[i] += st[i * s + j] * at(r, j);
            }
        }
    })
}

/// The gated delta rule; `M[j][i] = state[i, j, h, seq]`.
fn ref_gdn(
    q: &Host,
    k: &Host,
    v: &Host,
    g: &Host,
    beta: &Host,
    state: &Host,
    slots: usize,
) -> Host {
    let [s, h, t, ns, _] = v.ne;
    let ny = s * h * t * ns;
    let mut res = vec![0.0; ny + slots * s * s * h * ns];
    let scale = 1.0 / (s as f64).sqrt();
    for seq in 0..ns {
        for hh in 0..h {
            let mut m: Vec<Vec<f64>> = (0..s)
                .map(|j| (0..s).map(|i| state.at([i, j, hh, seq, 0])).collect())
                .collect();
            let (qh, kh) = (hh % q.ne[1], hh % k.ne[1]);
            let (qs, ks) = (seq / (ns / q.ne[3]), seq / (ns / k.ne[3]));
            for tt in 0..t {
                let bv = beta.at([0, hh, tt, seq, 0]);
                for row in m.iter_mut() {
                    for (i, x) in row.iter_mut().enumerate() {
                        let gi = if g.ne[0] == 1 { 0 } else { i };
                        *x *= g.at([gi, hh, tt, seq, 0]).exp();
                    }
                }
                let kv = |i: usize| k.at([i, kh, tt, ks, 0]);
                let delta: Vec<f64> = (0..s)
                    .map(|j| {
                        (v.at([j, hh, tt, seq, 0]) - (0..s).map(|i| m[j][i] * kv(i)).sum::<f64>())
                            * bv
                    })
                    .collect();
                for j in 0..s {
                    for i in 0..s {
                        m[j][i] += kv(i) * delta[j];
                    }
                }
                for j in 0..s {
                    let o: f64 = (0..s).map(|i| m[j][i] * q.at([i, qh, tt, qs, 0])).sum();
                    res[((seq * t + tt) * h + hh) * s + j] = o * scale;
                }
                let slot = t - 1 - tt;
                if slot < slots {
                    let base = ny + slot * s * s * h * ns + (seq * h + hh) * s * s;
                    for j in 0..s {
                        for i in 0..s {
                            res[base + j * s + i] = m[j][i];
                        }
                    }
                }
            }
        }
    }
    Host {
        ne: [s * h, t * ns + slots * s * ns, 1, 1, 1],
        v: res,
    }
}

const SIZES: [(i64, i64, i64, i64); 4] = [(4, 2, 6, 2), (8, 3, 5, 1), (1, 1, 3, 3), (5, 4, 4, 4)];

#[test]
fn rwkv_wkv6() {
    for (s, h, t, ns) in SIZES {
        let name = format!("RWKV_WKV6(S={s},H={h},T={t},n_seqs={ns})");
        check(&name, TOL, |ctx, rng| {
            let (f, l) = (Type::F32, Layout::Contiguous);
            let ne = [s, h, t];
            let (k, hk) = input(ctx, f, &ne, l, rng, -1.0, 1.0)?;
            let (v, hv) = input(ctx, f, &ne, l, rng, -1.0, 1.0)?;
            let (r, hr) = input(ctx, f, &ne, l, rng, -1.0, 1.0)?;
            let (tf, htf) = input(ctx, f, &[s, h], l, rng, -1.0, 1.0)?;
            let (td, htd) = input(ctx, f, &ne, l, rng, 0.2, 1.0)?;
            let (st, hst) = input(ctx, f, &[s * s * h, ns], l, rng, -1.0, 1.0)?;
            let out = ctx.rwkv_wkv6(&k, &v, &r, &tf, &td, &st)?;
            Ok((out, ref_wkv6(&hk, &hv, &hr, &htf, &htd, &hst)))
        });
    }
}

#[test]
fn gated_linear_attn() {
    for (s, h, t, ns) in SIZES {
        for scale in [1.0f32, 0.25] {
            let name = format!("GATED_LINEAR_ATTN(S={s},H={h},T={t},n_seqs={ns},scale={scale})");
            check(&name, TOL, |ctx, rng| {
                let (f, l) = (Type::F32, Layout::Contiguous);
                let ne = [s, h, t];
                let (k, hk) = input(ctx, f, &ne, l, rng, -1.0, 1.0)?;
                let (v, hv) = input(ctx, f, &ne, l, rng, -1.0, 1.0)?;
                let (q, hq) = input(ctx, f, &ne, l, rng, -1.0, 1.0)?;
                let (g, hg) = input(ctx, f, &ne, l, rng, 0.2, 1.0)?;
                let (st, hst) = input(ctx, f, &[s * s * h, ns], l, rng, -1.0, 1.0)?;
                let out = ctx.gated_linear_attn(&k, &v, &q, &g, &st, scale)?;
                Ok((out, ref_gla(&hk, &hv, &hq, &hg, &hst, scale as f64)))
            });
        }
    }
}

#[test]
fn rwkv_wkv7() {
    for (s, h, t, ns) in SIZES {
        let name = format!("RWKV_WKV7(S={s},H={h},T={t},n_seqs={ns})");
        check(&name, TOL, |ctx, rng| {
            let (f, l) = (Type::F32, Layout::Contiguous);
            let ne = [s, h, t];
            let (r, hr) = input(ctx, f, &ne, l, rng, -1.0, 1.0)?;
            let (w, hw) = input(ctx, f, &ne, l, rng, 0.2, 1.0)?;
            let (k, hk) = input(ctx, f, &ne, l, rng, -1.0, 1.0)?;
            let (v, hv) = input(ctx, f, &ne, l, rng, -1.0, 1.0)?;
            let (a, ha) = input(ctx, f, &ne, l, rng, -0.5, 0.5)?;
            let (b, hb) = input(ctx, f, &ne, l, rng, -0.5, 0.5)?;
            let (st, hst) = input(ctx, f, &[s * s * h, ns], l, rng, -1.0, 1.0)?;
            let out = ctx.rwkv_wkv7(&r, &w, &k, &v, &a, &b, &st)?;
            Ok((out, ref_wkv7(&hr, &hw, &hk, &hv, &ha, &hb, &hst)))
        });
    }
}

#[test]
fn gated_delta_net() {
    // (S, H, T, n_seqs, Hq, nq, vector gate, K, strided q/k)
    let cases = [
        (4, 2, 3, 2, 2, 2, false, 1, false),
        (8, 4, 5, 2, 2, 1, true, 1, true),
        (5, 3, 4, 3, 1, 3, false, 3, false),
        (3, 2, 2, 1, 2, 1, true, 2, true),
        (1, 1, 1, 1, 1, 1, false, 1, false),
    ];
    for (s, h, t, ns, hq, nq, kda, big_k, strided) in cases {
        let name = format!(
            "GATED_DELTA_NET(S={s},H={h},T={t},n_seqs={ns},Hq={hq},nq={nq},kda={kda},K={big_k},strided={strided})"
        );
        check(&name, TOL, |ctx, rng| {
            let (f, l) = (Type::F32, Layout::Contiguous);
            let ql = if strided { Layout::Padded } else { l };
            let (q, hqv) = input(ctx, f, &[s, hq, t, nq], ql, rng, -1.0, 1.0)?;
            let (k, hk) = input(ctx, f, &[s, hq, t, nq], ql, rng, -1.0, 1.0)?;
            let (v, hv) = input(ctx, f, &[s, h, t, ns], ql, rng, -1.0, 1.0)?;
            let g0 = if kda { s } else { 1 };
            let (g, hg) = input(ctx, f, &[g0, h, t, ns], l, rng, -1.0, 0.0)?;
            let (beta, hb) = input(ctx, f, &[1, h, t, ns], l, rng, 0.0, 1.0)?;
            let (st, hst) = input(ctx, f, &[s, s, h, ns], l, rng, -1.0, 1.0)?;
            let out = ctx.gated_delta_net(&q, &k, &v, &g, &beta, &st, big_k)?;
            Ok((out, ref_gdn(&hqv, &hk, &hv, &hg, &hb, &hst, big_k as usize)))
        });
    }
}

#[test]
fn shape_rules() {
    let ctx = Context::init(1 << 20, true).unwrap();
    let f = Type::F32;
    let x = ctx.new_tensor_3d(f, 4, 2, 6).unwrap();
    let tf = ctx.new_tensor_2d(f, 4, 2).unwrap();
    let st = ctx.new_tensor_2d(f, 32, 2).unwrap();
    let wkv6 = ctx.rwkv_wkv6(&x, &x, &x, &tf, &x, &st).unwrap();
    assert_eq!(wkv6.ne(), [8, 6 + 8, 1, 1, 1]);
    let short = ctx.new_tensor_3d(f, 4, 2, 5).unwrap();
    assert_err(
        ctx.rwkv_wkv6(&x, &short, &x, &tf, &x, &st),
        &["RWKV_WKV6", "v", "[4, 2, 6]"],
    );
    let tf_bad = ctx.new_tensor_1d(f, 7).unwrap();
    assert_err(
        ctx.rwkv_wkv6(&x, &x, &x, &tf_bad, &x, &st),
        &["RWKV_WKV6", "tf", "S·H"],
    );
    let st_bad = ctx.new_tensor_2d(f, 32, 4).unwrap();
    assert_err(
        ctx.rwkv_wkv6(&x, &x, &x, &tf, &x, &st_bad),
        &["RWKV_WKV6", "state", "dividing"],
    );
    let xt = ctx.transpose(&x).unwrap();
    assert_err(
        ctx.gated_linear_attn(&xt, &x, &x, &x, &st, 1.0),
        &["GATED_LINEAR_ATTN", "contiguous"],
    );
    assert_err(
        ctx.gated_linear_attn(&x, &x, &x, &x, &st, f32::NAN),
        &["GATED_LINEAR_ATTN", "scale"],
    );
    let x16 = ctx.new_tensor_3d(Type::F16, 4, 2, 6).unwrap();
    assert_err(
        ctx.rwkv_wkv7(&x, &x, &x, &x, &x16, &x, &st),
        &["RWKV_WKV7", "a", "f16"],
    );
    let gla = ctx.gated_linear_attn(&x, &x, &x, &x, &st, 0.5).unwrap();
    let wkv7 = ctx.rwkv_wkv7(&x, &x, &x, &x, &x, &x, &st).unwrap();

    let v = ctx.new_tensor_4d(f, 4, 4, 3, 2).unwrap();
    let q = ctx.new_tensor_4d(f, 4, 2, 3, 1).unwrap();
    let g = ctx.new_tensor_4d(f, 1, 4, 3, 2).unwrap();
    let s0 = ctx.new_tensor_4d(f, 4, 4, 4, 2).unwrap();
    let gdn = ctx.gated_delta_net(&q, &q, &v, &g, &g, &s0, 2).unwrap();
    assert_eq!(gdn.ne(), [16, 3 * 2 + 2 * 4 * 2, 1, 1, 1]);
    assert_err(
        ctx.gated_delta_net(&q, &q, &v, &g, &g, &s0, 0),
        &["GATED_DELTA_NET", "K = 0"],
    );
    let q3 = ctx.new_tensor_4d(f, 4, 3, 3, 1).unwrap();
    assert_err(
        ctx.gated_delta_net(&q3, &q, &v, &g, &g, &s0, 1),
        &["GATED_DELTA_NET", "q", "divisor"],
    );
    let g2 = ctx.new_tensor_4d(f, 2, 4, 3, 2).unwrap();
    assert_err(
        ctx.gated_delta_net(&q, &q, &v, &g2, &g, &s0, 1),
        &["GATED_DELTA_NET", "g"],
    );
    assert_err(
        ctx.gated_delta_net(&q, &q, &v, &g, &g2, &s0, 1),
        &["GATED_DELTA_NET", "beta"],
    );
    let s_bad = ctx.new_tensor_4d(f, 4, 4, 4, 1).unwrap();
    assert_err(
        ctx.gated_delta_net(&q, &q, &v, &g, &g, &s_bad, 1),
        &["GATED_DELTA_NET", "state"],
    );
    for n in [&wkv6, &gla, &wkv7, &gdn] {
        validate_node(n).unwrap_or_else(|e| panic!("{} refused: {e}", n.op().name()));
    }
}
