//! SSM_CONV and SSM_SCAN on F32, following GGML's loops (f32 accumulation in the same order),
//! split over channels (conv) and heads (scan).

use super::{ld, st, unsupported, NodePtrs, Params, Planned};
use crate::error::Result;
use crate::ops::SsmScanParams;
use crate::tensor::Tensor;
use crate::types::Type;

/// SSM_CONV or SSM_SCAN; the shape rule fixed the operand types, checked again here.
pub(super) fn plan(t: &Tensor) -> Result<Planned> {
    let f32s = t.srcs().filter(|s| s.ty() == Type::F32).count();
    let kernel = match t.op() {
        crate::ops::Op::SsmConv if f32s == 2 => ssm_conv,
        crate::ops::Op::SsmScan if f32s == 6 => ssm_scan,
        _ => return Err(unsupported(t)),
    };
    Ok(Planned::new(kernel, 0))
}

/// `result[i, t, s] = Σ_j sx[t + j, i, s]·c[j, i]`.
unsafe fn ssm_conv(n: &NodePtrs, p: &Params) {
    let (d, sx, c) = (&n.dst, &n.src[0], &n.src[1]);
    let d_conv = c.ne[0] as usize;
    let (n_t, n_s) = (d.ne[1] as usize, d.ne[2] as usize);
    for ch in p.range(d.ne[0] as usize) {
        for s in 0..n_s {
            for t in 0..n_t {
                let mut sum = 0f32;
                for j in 0..d_conv {
                    // SAFETY: t + j < d_conv − 1 + n_t = sx.ne0, ch < d_inner, s < n_s, j <
                    // d_conv: inside the operands the rule checked.
                    sum += unsafe { sx.get4([t + j, ch, s, 0]) * c.get4([j, ch, 0, 0]) };
                }
                // SAFETY: [ch, t, s] is inside the result.
                unsafe { d.set4([ch, t, s, 0], sum) };
            }
        }
    }
}

/// `log(1 + e^x)`, or `x` above 20 (GGML's `ggml_compute_softplus_f32`).
fn softplus(x: f32) -> f32 {
    if x > 20.0 {
        x
    } else {
        (1.0 + x.exp()).ln()
    }
}

/// The selective scan, per head of this thread's share. States live in the result from the
/// first token on: token 0 reads the initial state `s[ids[q]]` (zeros and a fault when the id
/// is out of range), later tokens the result's own state, which each (head, dim, state) element updates
/// in place — no element is read after another thread could write it.
unsafe fn ssm_scan(n: &NodePtrs, p: &Params) {
    let SsmScanParams { k } = n.params();
    let k = k as usize;
    let [s0, x, dt, a, b, c, ids] = [0, 1, 2, 3, 4, 5, 6].map(|i| n.src[i]);
    let d = &n.dst;
    let (nc, nr, nh) = (s0.ne[0] as usize, s0.ne[1] as usize, x.ne[1] as usize);
    let (nt, ns) = (x.ne[2] as usize, x.ne[3] as usize);
    let ng = b.ne[1] as usize;
    let mamba1 = a.ne[0] != 1;
    // The result: y (x's element count, packed), then K blocks of ns states of `seq` floats.
    let head = nc * nr;
    let seq = head * nh;
    let states = d.data.wrapping_add(nt * ns * nr * nh * 4);
    let heads = p.range(nh);
    for q in 0..ns {
        // SAFETY: q < ids.ne0 = n_seqs.
        let id = unsafe { (ids.data.add(q * ids.nb[0]) as *const i32).read_unaligned() };
        let start = usize::try_from(id)
            .ok()
            .filter(|&i| i < s0.ne[3] as usize)
            .map(|i| s0.data.wrapping_add(i * seq * 4) as *const u8);
        if start.is_none() && p.ith == 0 {
            p.index_fault(6, [q, 0, 0], id.into(), s0.ne[3]);
        }
        let stp = states.wrapping_add(q * seq * 4);
        for t in 0..nt {
            for h in heads.clone() {
                // SAFETY: h < n_head, t < n_t, q < n_seqs index dt; A has n_head rows.
                let dt_sp = softplus(unsafe { dt.get4([h, t, q, 0]) });
                let da2 = if mamba1 {
                    0.0
                } else {
                    // SAFETY: as above, A is [1, n_head].
                    (dt_sp * unsafe { a.get4([0, h, 0, 0]) }).exp()
                };
                let g = h / (nh / ng);
                for i in 0..nr {
                    // SAFETY: i < head_dim, h < n_head, t, q in range: an element of x.
                    let x_dt = unsafe { x.get4([i, h, t, q]) } * dt_sp;
                    let mut sum = 0f32;
                    let off = h * head + i * nc;
                    for j in 0..nc {
                        // SAFETY: float `off + j` is inside one sequence's state block of the
                        // result (and of s for the start state); j < d_state indexes A, B, C.
                        unsafe {
                            let prev = match (t, start) {
                                (0, Some(s)) => ld(s, off + j),
                                (0, None) => 0.0,
                                _ => ld(stp, off + j),
                            };
                            let decay = if mamba1 {
                                (dt_sp * a.get4([j, h, 0, 0])).exp()
                            } else {
                                da2
                            };
                            let state = prev * decay + b.get4([j, g, t, q]) * x_dt;
                            sum += state * c.get4([j, g, t, q]);
                            st(stp, off + j, state);
                        }
                    }
                    let y = ((q * nt + t) * nh + h) * nr + i;
                    // SAFETY: y indexes the packed y part of the result.
                    unsafe { st(d.data, y, sum) };
                }
            }
            // Snapshots: the state `slot` tokens before the end goes to block `slot`.
            let slot = nt - 1 - t;
            if k > 1 && slot > 0 && slot < k {
                let snap = states.wrapping_add((slot * ns + q) * seq * 4);
                for h in heads.clone() {
                    // SAFETY: one head's states, inside block 0 and block `slot < K` of the
                    // result; distinct blocks never overlap.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            stp.add(h * head * 4),
                            snap.add(h * head * 4),
                            head * 4,
                        )
                    };
                }
            }
        }
    }
}
