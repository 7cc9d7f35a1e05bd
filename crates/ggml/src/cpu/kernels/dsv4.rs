//! LIGHTNING_INDEXER and the DSV4 hyper-connection ops on F32 (any strides but packed rows
//! for the indexer), split as GGML splits them: keys, tokens, result elements.

use super::{dequantize_into, unsupported, NodePtrs, Params, Planned};
use crate::error::Result;
use crate::ops::{HcCombParams, HcPreParams, Op, HC_STREAMS};
use crate::tensor::Tensor;
use crate::types::Type;

/// The kernel of one of the four ops; the indexer needs two rows of `D` floats of scratch
/// (a key converted to f32 and a query row).
pub(super) fn plan(t: &Tensor) -> Result<Planned> {
    let all_f32 = t.srcs().all(|s| s.ty() == Type::F32) && t.ty() == Type::F32;
    Ok(match t.op() {
        Op::LightningIndexer => {
            let k = t.src(1).map(|k| (k.ty(), k.ne()[0] as usize));
            match k {
                Some((ty, d)) if crate::quants::has_to_float(ty) => {
                    Planned::new(lightning_indexer, 2 * d * 4)
                }
                _ => return Err(unsupported(t)),
            }
        }
        Op::Dsv4HcComb if all_f32 => Planned::new(hc_comb, 0),
        Op::Dsv4HcPre if all_f32 => Planned::new(hc_pre, 0),
        Op::Dsv4HcPost if all_f32 => Planned::new(hc_post, 0),
        _ => return Err(unsupported(t)),
    })
}

/// Σ_h relu(q·k)·w[h] + mask, for this thread's keys.
unsafe fn lightning_indexer(n: &NodePtrs, p: &Params) {
    let (d, q, k, w, m) = (&n.dst, &n.src[0], &n.src[1], &n.src[2], &n.src[3]);
    let [dim, heads, tokens, streams, _] = q.ne.map(|x| x as usize);
    // SAFETY: the plan sized the scratch for two rows of D floats.
    let buf = unsafe { p.scratch_f32(2 * dim) };
    let (kr, qr) = buf.split_at_mut(dim);
    let m_streams = m.ne[3] as usize;
    for s in 0..streams {
        for ik in p.range(k.ne[2] as usize) {
            let krow = k.row([0, ik, s, 0]);
            // SAFETY: a packed row of D elements of k; the scratch is private.
            unsafe {
                if k.f32_rows() {
                    k.read_row(krow, kr);
                } else {
                    dequantize_into(k, krow, kr);
                }
            }
            for t in 0..tokens {
                let mut score = 0f32;
                for h in 0..heads {
                    // SAFETY: h < H, t < T, s < S index rows of q and elements of w.
                    let wv = unsafe {
                        q.read_row(q.row([h, t, s, 0]), qr);
                        w.get4([h, t, 0, s])
                    };
                    let qk: f64 = qr
                        .iter()
                        .zip(kr.iter())
                        .map(|(&a, &b)| a as f64 * b as f64)
                        .sum();
                    score += (qk as f32).max(0.0) * wv;
                }
                // SAFETY: ik < n_kv, t < T, s < S (the mask's stream reduced modulo its own).
                unsafe {
                    let mv = m.get4([ik, t, 0, s % m_streams]);
                    d.set4([ik, t, 0, s], score + mv);
                }
            }
        }
    }
}

/// Sinkhorn normalisation of the 4 × 4 matrix `c` (`c[dst + 4·src]`): every sum over `dst`
/// (`cols`) or over `src` (rows) plus `eps` becomes 1.
fn normalise(c: &mut [f32; 16], eps: f32, cols: bool) {
    let hc = HC_STREAMS as usize;
    for a in 0..hc {
        let idx = |b: usize| if cols { a + hc * b } else { b + hc * a };
        let sum = eps + (0..hc).map(|b| c[idx(b)]).sum::<f32>();
        let inv = 1.0 / sum;
        for b in 0..hc {
            c[idx(b)] *= inv;
        }
    }
}

/// The mixing matrix of each of this thread's tokens.
unsafe fn hc_comb(n: &NodePtrs, p: &Params) {
    let HcCombParams { eps, n_iter } = n.params();
    let (d, mixes, scale, base) = (&n.dst, &n.src[0], &n.src[1], &n.src[2]);
    let hc = HC_STREAMS as usize;
    // SAFETY: scale has at least 3 elements.
    let sc = unsafe { scale.get4([2, 0, 0, 0]) };
    for t in p.range(mixes.ne[1] as usize) {
        let mut c = [0f32; 16];
        for src in 0..hc {
            for dst in 0..hc {
                let i = dst + hc * src;
                // SAFETY: 2·hc + i < (2 + hc)·hc = mixes.ne0 = base.ne0; t < T.
                c[i] = unsafe {
                    mixes.get4([2 * hc + i, t, 0, 0]) * sc + base.get4([2 * hc + i, 0, 0, 0])
                };
            }
            let col = &mut c[hc * src..hc * (src + 1)];
            let max = col.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let mut sum = 0f32;
            for v in col.iter_mut() {
                *v = (*v - max).exp();
                sum += *v;
            }
            let inv = 1.0 / sum;
            for v in col.iter_mut() {
                *v = *v * inv + eps;
            }
        }
        normalise(&mut c, eps, true);
        for _ in 1..n_iter {
            normalise(&mut c, eps, false);
            normalise(&mut c, eps, true);
        }
        for src in 0..hc {
            for dst in 0..hc {
                // SAFETY: [dst, src, t] is inside the [4, 4, T] result.
                unsafe { d.set4([dst, src, t, 0], c[dst + hc * src]) };
            }
        }
    }
}

/// `scale·Σ_h x[e, h, t]·w` per result element of this thread.
unsafe fn hc_pre(n: &NodePtrs, p: &Params) {
    let HcPreParams { scale, gated } = n.params();
    let (d, x, w) = (&n.dst, &n.src[0], &n.src[1]);
    let (e, hc) = (x.ne[0] as usize, x.ne[1] as usize);
    for r in p.range(d.nelements()) {
        let (i0, t) = (r % e, r / e);
        let mut sum = 0f32;
        for h in 0..hc {
            // SAFETY: i0 < E, h < hc, t < T index x and the weights or gates.
            let (xv, wv) = unsafe {
                let xv = x.get4([i0, h, t, 0]);
                if gated != 0 {
                    (xv, 1.0 / (1.0 + (-w.get4([i0, h, t, 0])).exp()))
                } else {
                    (xv, w.get4([h, t, 0, 0]))
                }
            };
            sum += xv * wv;
        }
        // SAFETY: [i0, t] is inside the result.
        unsafe { d.set4([i0, t, 0, 0], scale * sum) };
    }
}

/// `x·post + Σ_s residual·comb` (or `+ residual` without comb) per result element.
unsafe fn hc_post(n: &NodePtrs, p: &Params) {
    let (d, x, res, post, comb) = (&n.dst, &n.src[0], &n.src[1], &n.src[2], &n.src[3]);
    let has_comb = !comb.data.is_null();
    let (e, hc) = (d.ne[0] as usize, d.ne[1] as usize);
    for r in p.range(d.nelements()) {
        let (i0, dst, t) = (r % e, (r / e) % hc, r / (e * hc));
        // SAFETY: every index is inside its operand's shape ([E, T], [hc, T], [E, hc, T],
        // [hc, hc, T]) as the rule checked them.
        unsafe {
            let mut sum = x.get4([i0, t, 0, 0]) * post.get4([dst, t, 0, 0]);
            if has_comb {
                for s in 0..hc {
                    sum += res.get4([i0, s, t, 0]) * comb.get4([dst, s, t, 0]);
                }
            } else {
                sum += res.get4([i0, dst, t, 0]);
            }
            d.set4([i0, dst, t, 0], sum);
        }
    }
}
