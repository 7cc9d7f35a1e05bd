//! Row gathering and tiling: GET_ROWS, REPEAT, CONCAT.

use super::{is_float, load, unsupported, KernelFn, NodePtrs, Params};
use crate::error::Result;
use crate::ops::Op;
use crate::tensor::{Tensor, MAX_DIMS};
use crate::types::Type;

pub(super) fn select(t: &Tensor) -> Result<KernelFn> {
    let srcs = t.srcs();
    let float_io = is_float(t.ty()) && is_float(srcs[0].ty());
    Ok(match t.op() {
        Op::GetRows if float_io && srcs[1].ty() == Type::I32 => get_rows,
        Op::Repeat if float_io => repeat,
        Op::Concat if float_io && is_float(srcs[1].ty()) => concat,
        _ => return Err(unsupported(t)),
    })
}

/// `dst[:, i, j, k] = a[:, idx[i, j, k], j, k]`; an index out of range leaves the row zero
/// (the builder cannot see index values; this never reads outside `a`).
fn get_rows(n: &NodePtrs, p: &Params) {
    let (d, a, idx) = (&n.dst, &n.src[0], &n.src[1]);
    let ne0 = d.ne[0] as usize;
    for r in p.range(d.nrows()) {
        let di = d.unravel_row(r);
        // SAFETY: (di[0], di[1], di[2]) indexes idx, whose shape is dst's dims 1..4.
        let row = unsafe {
            load(
                idx.row([di[1], di[2], 0, 0]).add(di[0] * idx.nb[0]),
                Type::I32,
            )
        };
        let drow = d.row(di);
        let row = row as i64;
        // SAFETY: rows of their tensors, indices below ne[0]; the source row is range-checked.
        unsafe {
            if row < 0 || row >= a.ne[1] {
                for i in 0..ne0 {
                    d.set(drow, i, 0.0);
                }
                continue;
            }
            let arow = a.row([row as usize, di[1], di[2], 0]);
            for i in 0..ne0 {
                d.set(drow, i, a.get(arow, i));
            }
        }
    }
}

/// `dst[i] = a[i mod a.ne]` in every dimension.
fn repeat(n: &NodePtrs, p: &Params) {
    let (d, a) = (&n.dst, &n.src[0]);
    let ne0 = d.ne[0] as usize;
    let a0 = a.ne[0] as usize;
    for r in p.range(d.nrows()) {
        let di = d.unravel_row(r);
        let ai: [usize; MAX_DIMS - 1] = std::array::from_fn(|k| di[k] % a.ne[k + 1] as usize);
        let (drow, arow) = (d.row(di), a.row(ai));
        // SAFETY: rows of their tensors; indices reduced below each ne[0].
        unsafe {
            for i in 0..ne0 {
                d.set(drow, i, a.get(arow, i % a0));
            }
        }
    }
}

/// `dst` = `a` followed by `b` along dimension op_params[0].
fn concat(n: &NodePtrs, p: &Params) {
    let dim = n.op_params[0] as usize;
    let (d, a, b) = (&n.dst, &n.src[0], &n.src[1]);
    let ne0 = d.ne[0] as usize;
    for r in p.range(d.nrows()) {
        let di = d.unravel_row(r);
        let drow = d.row(di);
        for i in 0..ne0 {
            let mut full = [i, di[0], di[1], di[2], di[3]];
            let src = if full[dim] < a.ne[dim] as usize {
                a
            } else {
                full[dim] -= a.ne[dim] as usize;
                b
            };
            let row = src.row([full[1], full[2], full[3], full[4]]);
            // SAFETY: `full` indexes `src` (shapes agree outside `dim`, and inside it the index
            // was shifted into b's range); i < dst ne[0].
            unsafe { d.set(drow, i, src.get(row, full[0])) }
        }
    }
}
