//! RWKV_WKV6, GATED_LINEAR_ATTN, RWKV_WKV7 and GATED_DELTA_NET on F32. Threads split the
//! heads (and, for the delta net, head × sequence pairs); each head's state lives in the
//! result and is updated element by element in GGML's order (f32 arithmetic as GGML's scalar
//! loops).

use super::{ld, st, unsupported, NodePtrs, Params, Planned};
use crate::error::Result;
use crate::ops::{GatedDeltaNetParams, GlaParams, Op};
use crate::tensor::Tensor;
use crate::types::Type;

/// The kernel of one of the four recurrences (all operands F32, checked by the shape rule
/// and again here); the delta net needs `S² + 5·S` floats of scratch.
pub(super) fn plan(t: &Tensor) -> Result<Planned> {
    if t.srcs().any(|s| s.ty() != Type::F32) || t.ty() != Type::F32 {
        return Err(unsupported(t));
    }
    Ok(match t.op() {
        Op::RwkvWkv6 => Planned::new(wkv6, 0),
        Op::GatedLinearAttn => Planned::new(gla, 0),
        Op::RwkvWkv7 => Planned::new(wkv7, 0),
        Op::GatedDeltaNet => {
            let s = t.src(2).map_or(0, |v| v.ne()[0] as usize);
            Planned::new(gated_delta_net, (s * s + 5 * s) * 4)
        }
        _ => return Err(unsupported(t)),
    })
}

/// Sizes of a WKV-style node: head size, heads, tokens, tokens per sequence.
struct Dims {
    s: usize,
    h: usize,
    t: usize,
    per_seq: usize,
}

impl Dims {
    fn of(n: &NodePtrs, state: usize) -> Dims {
        let (s, h) = (n.src[0].ne[0] as usize, n.src[0].ne[1] as usize);
        let t = n.src[0].ne[2] as usize;
        let seqs = n.src[state].ne[1] as usize;
        Dims {
            s,
            h,
            t,
            per_seq: t / seqs.max(1),
        }
    }
}

/// Runs `step(t, h, prev, cur)` for every token and every head of this thread, where `prev`
/// and `cur` are the head's state before and after the token (`prev` is the initial state
/// from operand `state` at a sequence's first token, else `cur`, updated in place) and the
/// outputs of token `t` start at `t·S·H` floats into the result.
///
/// # Safety
/// `n` must be a node of one of the WKV-style ops, its shapes checked by the rule.
unsafe fn for_each_head(
    n: &NodePtrs,
    p: &Params,
    state: usize,
    mut step: impl FnMut(usize, usize, *const u8, *mut u8),
) {
    let dm = Dims::of(n, state);
    let c = dm.s * dm.h;
    let states = n.dst.data.wrapping_add(dm.t * c * 4);
    for t in 0..dm.t {
        let seq = t / dm.per_seq;
        let off = (seq * dm.s * c) * 4;
        let cur = states.wrapping_add(off);
        let prev = if t % dm.per_seq == 0 {
            n.src[state].data.wrapping_add(off) as *const u8
        } else {
            cur as *const u8
        };
        for h in p.range(dm.h) {
            let ho = h * dm.s * dm.s * 4;
            step(t, h, prev.wrapping_add(ho), cur.wrapping_add(ho));
        }
    }
}

/// RWKV-6: `out[j] += r[i]·(tf[i]·k[i]·v[j] + S[i][j])`, `S[i][j] = S[i][j]·td[i] +
/// k[i]·v[j]`.
unsafe fn wkv6(n: &NodePtrs, p: &Params) {
    let dm = Dims::of(n, 5);
    let (s, c) = (dm.s, dm.s * dm.h);
    let [k, v, r, tf, td] = [0, 1, 2, 3, 4].map(|i| n.src[i].data as *const u8);
    let out = n.dst.data;
    // SAFETY (closure body): t < T, h < H and i, j < S index the [S, H, T] operands, the S·H
    // elements of tf, the output's first T·S·H floats and one head's S×S state.
    unsafe {
        for_each_head(n, p, 5, |t, h, prev, cur| {
            let base = t * c + h * s;
            for j in 0..s {
                st(out, base + j, 0.0);
            }
            for i in 0..s {
                let (ki, ri) = (ld(k, base + i), ld(r, base + i));
                let (tfi, tdi) = (ld(tf, h * s + i), ld(td, base + i));
                for j in 0..s {
                    let kv = ld(v, base + j) * ki;
                    let prev_v = ld(prev, i * s + j);
                    let tmp = kv * tfi + prev_v;
                    st(out, base + j, ld(out, base + j) + tmp * ri);
                    st(cur, i * s + j, prev_v * tdi + kv);
                }
            }
        })
    }
}

/// Gated linear attention: `S[i][j] = S[i][j]·g[i] + k[i]·v[j]`, `out[j] += S[i][j]·q[i]·scale`.
unsafe fn gla(n: &NodePtrs, p: &Params) {
    let GlaParams { scale } = n.params();
    let dm = Dims::of(n, 4);
    let (s, c) = (dm.s, dm.s * dm.h);
    let [k, v, q, g] = [0, 1, 2, 3].map(|i| n.src[i].data as *const u8);
    let out = n.dst.data;
    // SAFETY (closure body): as in `wkv6`.
    unsafe {
        for_each_head(n, p, 4, |t, h, prev, cur| {
            let base = t * c + h * s;
            for j in 0..s {
                st(out, base + j, 0.0);
            }
            for i in 0..s {
                let (ki, qi, gi) = (ld(k, base + i), ld(q, base + i) * scale, ld(g, base + i));
                for j in 0..s {
                    let kv = ld(v, base + j) * ki;
                    let tmp = ld(prev, i * s + j) * gi + kv;
                    st(out, base + j, ld(out, base + j) + tmp * qi);
                    st(cur, i * s + j, tmp);
                }
            }
        })
    }
}

/// RWKV-7: per state row `i`, `sa = Σ_j a[j]·S[i][j]`, `S[i][j] = S[i][j]·w[j] + v[i]·k[j]
/// + sa·b[j]`, `out[i] = Σ_j S[i][j]·r[j]`.
unsafe fn wkv7(n: &NodePtrs, p: &Params) {
    let dm = Dims::of(n, 6);
    let (s, c) = (dm.s, dm.s * dm.h);
    let [r, w, k, v, a, b] = [0, 1, 2, 3, 4, 5].map(|i| n.src[i].data as *const u8);
    let out = n.dst.data;
    // SAFETY (closure body): as in `wkv6`.
    unsafe {
        for_each_head(n, p, 6, |t, h, prev, cur| {
            let base = t * c + h * s;
            for i in 0..s {
                let vi = ld(v, base + i);
                let mut sa = 0f32;
                for j in 0..s {
                    sa += ld(a, base + j) * ld(prev, i * s + j);
                }
                let mut result = 0f32;
                for j in 0..s {
                    let kv = vi * ld(k, base + j);
                    let new = ld(prev, i * s + j) * ld(w, base + j) + kv + sa * ld(b, base + j);
                    st(cur, i * s + j, new);
                    result += new * ld(r, base + j);
                }
                st(out, base + i, result);
            }
        })
    }
}

/// Σ x[i]·y[i] accumulated in f64.
fn dot(x: &[f32], y: &[f32]) -> f32 {
    x.iter()
        .zip(y)
        .map(|(&a, &b)| a as f64 * b as f64)
        .sum::<f64>() as f32
}

/// The gated delta rule per (head, sequence) pair of this thread, the state `M` (row `j` =
/// `state[:, j, h, seq]`) in scratch with the token's q, k, v and gate rows.
unsafe fn gated_delta_net(n: &NodePtrs, p: &Params) {
    let GatedDeltaNetParams { k: slots } = n.params();
    let slots = slots as usize;
    let [q, k, v, g, beta, state] = [0, 1, 2, 3, 4, 5].map(|i| n.src[i]);
    let (sv, h, nt, ns) = (
        v.ne[0] as usize,
        v.ne[1] as usize,
        v.ne[2] as usize,
        v.ne[3] as usize,
    );
    let kda = g.ne[0] as usize == sv && sv > 1;
    let scale = 1.0 / (sv as f32).sqrt();
    // SAFETY: the plan sized the scratch for S² + 5·S floats.
    let buf = unsafe { p.scratch_f32(sv * sv + 5 * sv) };
    let (m, rest) = buf.split_at_mut(sv * sv);
    let (delta, rest) = rest.split_at_mut(sv);
    let (qr, rest) = rest.split_at_mut(sv);
    let (kr, rest) = rest.split_at_mut(sv);
    let (vr, gr) = rest.split_at_mut(sv);
    let out = n.dst.data;
    let states = out.wrapping_add(sv * h * nt * ns * 4);
    let snap = sv * sv * h * ns;
    let (rq3, rk3) = (ns / q.ne[3] as usize, ns / k.ne[3] as usize);
    for ir in p.range(h * ns) {
        let (hv, seq) = (ir % h, ir / h);
        let (hq, hk) = (hv % q.ne[1] as usize, hv % k.ne[1] as usize);
        // SAFETY: state is contiguous [S, S, H, n_seqs]: head hv of sequence seq is S² floats
        // from its element [0, 0, hv, seq]; the scratch is private.
        unsafe {
            let from = state.row([0, hv, seq, 0]) as *const u8;
            std::ptr::copy_nonoverlapping(from, m.as_mut_ptr() as *mut u8, sv * sv * 4);
        }
        let final_slot = states.wrapping_add((seq * h + hv) * sv * sv * 4);
        if nt == 0 && slots == 1 {
            // No tokens: the final state is the initial one (GGML copies it there too).
            // SAFETY: slot 0 of this head holds S² floats of the result.
            unsafe {
                std::ptr::copy_nonoverlapping(m.as_ptr() as *const u8, final_slot, sv * sv * 4)
            };
        }
        for t in 0..nt {
            // SAFETY: every index is inside its operand's shape as the rule checked it: rows
            // of q, k, v of S packed floats, gate and beta elements at [·, hv, t, seq].
            let b = unsafe {
                q.read_row(q.row([hq, t, seq / rq3, 0]), qr);
                k.read_row(k.row([hk, t, seq / rk3, 0]), kr);
                v.read_row(v.row([hv, t, seq, 0]), vr);
                let grow = g.row([hv, t, seq, 0]);
                for (i, x) in gr.iter_mut().enumerate().take(g.ne[0] as usize) {
                    *x = g.get(grow, i).exp();
                }
                beta.get(beta.row([hv, t, seq, 0]), 0)
            };
            for row in m.chunks_exact_mut(sv) {
                if kda {
                    row.iter_mut().zip(gr.iter()).for_each(|(x, &e)| *x *= e);
                } else {
                    row.iter_mut().for_each(|x| *x *= gr[0]);
                }
            }
            for (j, row) in m.chunks_exact(sv).enumerate() {
                delta[j] = (vr[j] - dot(row, kr)) * b;
            }
            for (j, row) in m.chunks_exact_mut(sv).enumerate() {
                row.iter_mut()
                    .zip(kr.iter())
                    .for_each(|(x, &kv)| *x += kv * delta[j]);
            }
            let orow = out.wrapping_add(((seq * nt + t) * h + hv) * sv * 4);
            for (j, row) in m.chunks_exact(sv).enumerate() {
                // SAFETY: the output row of (seq, t, hv) has S floats.
                unsafe { st(orow, j, dot(row, qr) * scale) };
            }
            let slot = nt - 1 - t;
            if slot < slots {
                let dst = final_slot.wrapping_add(slot * snap * 4);
                // SAFETY: slot < K: one head's S² floats inside the state part of the result,
                // which the scratch never overlaps.
                unsafe { std::ptr::copy_nonoverlapping(m.as_ptr() as *const u8, dst, sv * sv * 4) };
            }
        }
    }
}
