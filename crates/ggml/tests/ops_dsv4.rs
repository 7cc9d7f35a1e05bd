//! LIGHTNING_INDEXER and the DSV4 hyper-connection ops against plain f64 references, plus
//! their shape rules.
// The references are plain index loops over logical indices, on purpose.
#![allow(clippy::needless_range_loop)]

mod common;

use common::*;
use ggml::{Context, Type};

/// `Σ_h relu(q[:, h, t, s]·k[:, 0, j, s])·w[h, t, 0, s] + mask[j, t, 0, s mod Sm]`.
fn ref_indexer(q: &Host, k: &Host, w: &Host, m: &Host) -> Host {
    let [d, heads, t, s, _] = q.ne;
    Host::from_fn([k.ne[2], t, 1, s, 1], |i| {
        let (j, tt, ss) = (i[0], i[1], i[3]);
        let score: f64 = (0..heads)
            .map(|h| {
                let qk: f64 = (0..d)
                    .map(|e| q.at([e, h, tt, ss, 0]) * k.at([e, 0, j, ss, 0]))
                    .sum();
                qk.max(0.0) * w.at([h, tt, 0, ss, 0])
            })
            .sum();
        score + m.at([j, tt, 0, ss % m.ne[3], 0])
    })
}

/// Softmax per source column of the scaled comb mixes, `+ eps`, then Sinkhorn rounds.
fn ref_hc_comb(mixes: &Host, scale: &Host, base: &Host, eps: f64, n_iter: usize) -> Host {
    let hc = 4;
    let t = mixes.ne[1];
    let mut v = Vec::new();
    for tt in 0..t {
        let mut c = [[0f64; 4]; 4]; // c[src][dst]
        for (src, col) in c.iter_mut().enumerate() {
            for (dst, x) in col.iter_mut().enumerate() {
                let i = 2 * hc + dst + hc * src;
                *x = mixes.at([i, tt, 0, 0, 0]) * scale.v[2] + base.v[i];
            }
            let max = col.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let sum: f64 = col.iter().map(|x| (x - max).exp()).sum();
            for x in col.iter_mut() {
                *x = (*x - max).exp() / sum + eps;
            }
        }
        let cols = |c: &mut [[f64; 4]; 4]| {
            for dst in 0..hc {
                let sum = eps + (0..hc).map(|s| c[s][dst]).sum::<f64>();
                (0..hc).for_each(|s| c[s][dst] /= sum);
            }
        };
        let rows = |c: &mut [[f64; 4]; 4]| {
            for col in c.iter_mut() {
                let sum = eps + col.iter().sum::<f64>();
                col.iter_mut().for_each(|x| *x /= sum);
            }
        };
        cols(&mut c);
        for _ in 1..n_iter {
            rows(&mut c);
            cols(&mut c);
        }
        v.extend(c.iter().flatten());
    }
    Host {
        ne: [hc, hc, t, 1, 1],
        v,
    }
}

fn ref_hc_pre(x: &Host, w: &Host, scale: f64, gated: bool) -> Host {
    let [e, hc, t, ..] = x.ne;
    Host::from_fn([e, t, 1, 1, 1], |i| {
        let sum: f64 = (0..hc)
            .map(|h| {
                let wv = if gated {
                    1.0 / (1.0 + (-w.at([i[0], h, i[1], 0, 0])).exp())
                } else {
                    w.at([h, i[1], 0, 0, 0])
                };
                x.at([i[0], h, i[1], 0, 0]) * wv
            })
            .sum();
        scale * sum
    })
}

fn ref_hc_post(x: &Host, res: &Host, post: &Host, comb: Option<&Host>) -> Host {
    let hc = res.ne[1];
    Host::from_fn(res.ne, |i| {
        let (e, d, t) = (i[0], i[1], i[2]);
        let mix = match comb {
            Some(c) => (0..hc)
                .map(|s| res.at([e, s, t, 0, 0]) * c.at([d, s, t, 0, 0]))
                .sum(),
            None => res.at([e, d, t, 0, 0]),
        };
        x.at([e, t, 0, 0, 0]) * post.at([d, t, 0, 0, 0]) + mix
    })
}

#[test]
fn lightning_indexer() {
    // (D, H, T, S, n_kv, Sm, key type)
    let cases = [
        (8, 3, 4, 2, 5, 1, Type::F32),
        (16, 2, 3, 3, 7, 3, Type::F16),
        (32, 4, 2, 2, 6, 2, Type::BF16),
        (32, 2, 3, 1, 4, 1, Type::Q8_0),
        (64, 1, 1, 1, 1, 1, Type::Q4_0),
    ];
    for (d, h, t, s, n_kv, sm, kt) in cases {
        let name = format!("LIGHTNING_INDEXER(D={d},H={h},T={t},S={s},n_kv={n_kv},Sm={sm},k={kt})");
        check(&name, TOL, |ctx, rng| {
            let (f, l) = (Type::F32, Layout::Contiguous);
            let (q, hq) = input(ctx, f, &[d, h, t, s], Layout::Padded, rng, -1.0, 1.0)?;
            let (k, hk) = if kt.is_quantized() {
                // Random values quantized; the reference uses the dequantized key.
                let n = (d * n_kv * s) as usize;
                let vals: Vec<f32> = (0..n).map(|_| rng.uniform(-1.0, 1.0) as f32).collect();
                let kq = ctx.new_tensor(kt, &[d, 1, n_kv, s])?;
                let mut bytes = vec![0u8; kq.nbytes()];
                let rows = (n_kv * s) as usize;
                ggml::quantize_chunk(kt, &vals, &mut bytes, 0, rows, d as usize, None)?;
                kq.set_bytes(&bytes, 0)?;
                let mut deq = vec![0f32; n];
                ggml::quants::dequantize_row(kt, &bytes, &mut deq)?;
                let hk = Host {
                    ne: shape(&[d, 1, n_kv, s]),
                    v: deq.iter().map(|&v| v as f64).collect(),
                };
                (kq, hk)
            } else {
                input(ctx, kt, &[d, 1, n_kv, s], l, rng, -1.0, 1.0)?
            };
            let (w, hw) = input(ctx, f, &[h, t, 1, s], l, rng, 0.0, 1.0)?;
            let (m, hm) = input(ctx, Type::F16, &[n_kv, t, 1, sm], l, rng, -1.0, 0.0)?;
            Ok((
                ctx.lightning_indexer(&q, &k, &w, &m)?,
                ref_indexer(&hq, &hk, &hw, &hm),
            ))
        });
    }
}

#[test]
fn hc_comb() {
    for (t, eps, n_iter) in [(3, 1e-6f32, 1), (5, 1e-3, 3), (1, 0.0, 20)] {
        let name = format!("DSV4_HC_COMB(T={t},eps={eps},n_iter={n_iter})");
        check(&name, TOL, |ctx, rng| {
            let (f, l) = (Type::F32, Layout::Contiguous);
            let (mx, hmx) = input(ctx, f, &[24, t], Layout::Padded, rng, -2.0, 2.0)?;
            let (sc, hsc) = input(ctx, f, &[3], l, rng, 0.5, 2.0)?;
            let (b, hb) = input(ctx, f, &[24], l, rng, -1.0, 1.0)?;
            let out = ctx.dsv4_hc_comb(&mx, &sc, &b, eps, n_iter)?;
            Ok((
                out,
                ref_hc_comb(&hmx, &hsc, &hb, eps as f64, n_iter as usize),
            ))
        });
    }
}

#[test]
fn hc_pre() {
    for (e, hc, t) in [(8, 4, 3), (5, 1, 2), (17, 3, 1)] {
        for gated in [false, true] {
            for layout in [Layout::Contiguous, Layout::Padded] {
                let name =
                    format!("DSV4_HC_PRE(E={e},hc={hc},T={t},gated={gated},layout={layout:?})");
                check(&name, TOL, |ctx, rng| {
                    let (x, hx) = input(ctx, Type::F32, &[e, hc, t], layout, rng, -1.0, 1.0)?;
                    let wne: &[i64] = if gated { &[e, hc, t] } else { &[hc, t] };
                    let (w, hw) = input(ctx, Type::F32, wne, layout, rng, -2.0, 2.0)?;
                    let out = if gated {
                        ctx.dsv4_hc_pre_gated(&x, &w, 0.75)?
                    } else {
                        ctx.dsv4_hc_pre(&x, &w)?
                    };
                    let scale = if gated { 0.75 } else { 1.0 };
                    Ok((out, ref_hc_pre(&hx, &hw, scale, gated)))
                });
            }
        }
    }
}

#[test]
fn hc_post() {
    for (e, hc, t) in [(8, 4, 3), (5, 1, 2), (17, 3, 1)] {
        for with_comb in [false, true] {
            for layout in [Layout::Contiguous, Layout::Transposed] {
                let name =
                    format!("DSV4_HC_POST(E={e},hc={hc},T={t},comb={with_comb},layout={layout:?})");
                check(&name, TOL, |ctx, rng| {
                    let f = Type::F32;
                    let (x, hx) = input(ctx, f, &[e, t], layout, rng, -1.0, 1.0)?;
                    let (r, hr) = input(ctx, f, &[e, hc, t], layout, rng, -1.0, 1.0)?;
                    let (p, hp) = input(ctx, f, &[hc, t], layout, rng, -1.0, 1.0)?;
                    let (c, hcm) = input(ctx, f, &[hc, hc, t], layout, rng, 0.0, 1.0)?;
                    let comb = with_comb.then_some(&c);
                    let out = ctx.dsv4_hc_post(&x, &r, &p, comb)?;
                    Ok((out, ref_hc_post(&hx, &hr, &hp, with_comb.then_some(&hcm))))
                });
            }
        }
    }
}

#[test]
fn shape_rules() {
    let ctx = Context::init(1 << 20, true).unwrap();
    let f = Type::F32;
    let q = ctx.new_tensor_4d(f, 8, 3, 4, 2).unwrap();
    let k = ctx.new_tensor_4d(Type::F16, 8, 1, 5, 2).unwrap();
    let w = ctx.new_tensor_4d(f, 3, 4, 1, 2).unwrap();
    let m = ctx.new_tensor_4d(Type::F16, 5, 4, 1, 1).unwrap();
    let li = ctx.lightning_indexer(&q, &k, &w, &m).unwrap();
    assert_eq!(li.ne(), [5, 4, 1, 2, 1]);
    let m32 = ctx.new_tensor_4d(f, 5, 4, 1, 1).unwrap();
    assert_err(
        ctx.lightning_indexer(&q, &k, &w, &m32),
        &["LIGHTNING_INDEXER", "mask", "f16"],
    );
    let k_bad = ctx.new_tensor_4d(f, 8, 2, 5, 2).unwrap();
    assert_err(
        ctx.lightning_indexer(&q, &k_bad, &w, &m),
        &["LIGHTNING_INDEXER", "k"],
    );
    let m3 = ctx.new_tensor_4d(Type::F16, 5, 4, 1, 3).unwrap();
    assert_err(
        ctx.lightning_indexer(&q, &k, &w, &m3),
        &["LIGHTNING_INDEXER", "mask", "divisor"],
    );
    let ki = ctx.new_tensor_4d(Type::I32, 8, 1, 5, 2).unwrap();
    assert_err(
        ctx.lightning_indexer(&q, &ki, &w, &m),
        &["LIGHTNING_INDEXER", "k", "f32"],
    );
    let qt = ctx.permute(&q, 1, 0, 2, 3).unwrap();
    let w8 = ctx.new_tensor_4d(f, 8, 4, 1, 2).unwrap();
    assert_err(
        ctx.lightning_indexer(&qt, &k, &w8, &m),
        &["LIGHTNING_INDEXER", "packed"],
    );

    let mixes = ctx.new_tensor_2d(f, 24, 3).unwrap();
    let sc = ctx.new_tensor_1d(f, 3).unwrap();
    let base = ctx.new_tensor_1d(f, 24).unwrap();
    let comb = ctx.dsv4_hc_comb(&mixes, &sc, &base, 1e-6, 2).unwrap();
    assert_err(
        ctx.dsv4_hc_comb(&mixes, &sc, &base, 1e-6, 0),
        &["DSV4_HC_COMB", "n_iter = 0"],
    );
    let m15 = ctx.new_tensor_2d(f, 15, 3).unwrap();
    assert_err(
        ctx.dsv4_hc_comb(&m15, &sc, &base, 1e-6, 1),
        &["DSV4_HC_COMB", "mixes"],
    );
    let sc2 = ctx.new_tensor_1d(f, 2).unwrap();
    assert_err(
        ctx.dsv4_hc_comb(&mixes, &sc2, &base, 1e-6, 1),
        &["DSV4_HC_COMB", "scale"],
    );

    let x = ctx.new_tensor_3d(f, 8, 4, 3).unwrap();
    let wts = ctx.new_tensor_2d(f, 4, 3).unwrap();
    let pre = ctx.dsv4_hc_pre(&x, &wts).unwrap();
    let pre_g = ctx.dsv4_hc_pre_gated(&x, &x, 0.5).unwrap();
    assert_err(ctx.dsv4_hc_pre(&x, &x), &["DSV4_HC_PRE", "weights"]);
    assert_err(
        ctx.dsv4_hc_pre_gated(&x, &wts, 1.0),
        &["DSV4_HC_PRE", "gates"],
    );

    let y = ctx.new_tensor_2d(f, 8, 3).unwrap();
    let cm = ctx.new_tensor_3d(f, 4, 4, 3).unwrap();
    let post = ctx.dsv4_hc_post(&y, &x, &wts, Some(&cm)).unwrap();
    let post_n = ctx.dsv4_hc_post(&y, &x, &wts, None).unwrap();
    let cm_bad = ctx.new_tensor_3d(f, 4, 3, 3).unwrap();
    assert_err(
        ctx.dsv4_hc_post(&y, &x, &wts, Some(&cm_bad)),
        &["DSV4_HC_POST", "comb"],
    );
    assert_err(
        ctx.dsv4_hc_post(&y, &x, &y, None),
        &["DSV4_HC_POST", "post"],
    );
    for n in [&li, &comb, &pre, &pre_g, &post, &post_n] {
        validate_node(n).unwrap_or_else(|e| panic!("{} refused: {e}", n.op().name()));
    }
}
