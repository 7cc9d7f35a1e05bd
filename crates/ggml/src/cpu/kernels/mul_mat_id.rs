//! MUL_MAT_ID: `dst[i, e, t] = dot(as row i of expert ids[e, t], b row (e mod n_b, t))`.
//! Every thread lists the (slot, token) pairs of each expert (the same list on every thread);
//! threads split the rows of the experts. For each expert, its pairs' `b` rows are taken
//! [`JB`] at a time into the thread's scratch as f32, and each row of the expert (converted
//! once per block) is dotted with the whole block by MUL_MAT's routine. Pairs whose id is
//! outside `0..n_expert` get a zero row and read nothing.

use super::{dequantizable, is_float, matmul, operand, unsupported, NodePtrs, Params, Planned};
use crate::error::Result;
use crate::tensor::Tensor;
use crate::types::Type;

/// Rows of `b` per block.
const JB: usize = 8;

/// The kernel, with scratch per thread for one expert row and [`JB`] rows of `b` as f32.
pub(super) fn plan(t: &Tensor) -> Result<Planned> {
    let (w, b, ids) = (operand(t, 0)?, operand(t, 1)?, operand(t, 2)?);
    let weights_ok = is_float(w.ty()) || dequantizable(w.ty());
    if t.ty() != Type::F32 || !weights_ok || !is_float(b.ty()) || ids.ty() != Type::I32 {
        return Err(unsupported(t));
    }
    Ok(Planned::new(mul_mat_id, (1 + JB) * w.ne()[0] as usize * 4))
}

unsafe fn mul_mat_id(n: &NodePtrs, p: &Params) {
    let (d, w, b, ids) = (&n.dst, &n.src[0], &n.src[1], &n.src[2]);
    let rows = p.range(w.ne[1] as usize);
    if rows.is_empty() {
        return;
    }
    let k = w.ne[0] as usize;
    let n_expert = w.ne[2] as usize;
    let (n_used, n_tokens, n_b) = (ids.ne[0] as usize, ids.ne[1] as usize, b.ne[1] as usize);
    // The pairs (slot, token) of each expert, in token order; those of invalid ids last.
    let mut by_expert: Vec<Vec<(usize, usize)>> = vec![Vec::new(); n_expert + 1];
    for t in 0..n_tokens {
        for e in 0..n_used {
            // SAFETY: ids is I32 [n_used, n_tokens]; (e, t) is inside it.
            let id = unsafe {
                (ids.row([t, 0, 0, 0]).add(e * ids.nb[0]) as *const i32).read_unaligned()
            };
            let x = usize::try_from(id)
                .ok()
                .filter(|&x| x < n_expert)
                .unwrap_or(n_expert);
            if x == n_expert && p.ith == 0 {
                p.index_fault(2, [e, t, 0], id.into(), n_expert as i64);
            }
            by_expert[x].push((e, t));
        }
    }
    for &(e, t) in &by_expert[n_expert] {
        for i in rows.clone() {
            // SAFETY: dst is [M, n_used, n_tokens]; i < M, only this thread writes row i.
            unsafe { d.set(d.row([e, t, 0, 0]), i, 0.0) }
        }
    }
    let borrow_w = !d.overlaps(w);
    // SAFETY: the plan sized each thread's scratch for (1 + JB)·K f32 values.
    let scratch = unsafe { p.scratch_f32((1 + JB) * k) };
    let (wbuf, bbuf) = scratch.split_at_mut(k);
    let mut out = [0f32; JB];
    for (x, pairs) in by_expert[..n_expert].iter().enumerate() {
        for chunk in pairs.chunks(JB) {
            for (&(e, t), buf) in chunk.iter().zip(bbuf.chunks_exact_mut(k.max(1))) {
                // SAFETY: e mod n_b < b.ne1 (n_b divides n_used, so n_b > 0 here), t < b.ne2.
                unsafe { b.read_row(b.row([e % n_b, t, 0, 0]), &mut buf[..k]) };
            }
            let mut block: [&[f32]; JB] = [&[]; JB];
            for (slot, r) in block.iter_mut().zip(bbuf.chunks_exact(k.max(1))) {
                *slot = &r[..k];
            }
            let block = &block[..chunk.len()];
            for i in rows.clone() {
                // SAFETY: i < M and x < n_expert: a row of `as`; wbuf holds K values.
                unsafe {
                    matmul::row_dots(
                        w,
                        w.row([i, x, 0, 0]),
                        wbuf,
                        borrow_w,
                        block,
                        &mut out[..chunk.len()],
                    )
                };
                for (&(e, t), &v) in chunk.iter().zip(&out) {
                    // SAFETY: as for the zero rows above.
                    unsafe { d.set(d.row([e, t, 0, 0]), i, v) }
                }
            }
        }
    }
}
