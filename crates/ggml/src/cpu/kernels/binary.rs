//! Element-wise binary ops with broadcasting of the second operand: ADD, SUB, MUL, DIV, and
//! ADD1 (ADD of a one-element `b`).

use super::vec::wide_fn;
use super::TensorPtr;
use super::{is_float, ld, operand, st, unsupported, KernelFn, NodePtrs, Params, Planned};
use crate::error::Result;
use crate::tensor::Tensor;
use crate::tensor::MAX_DIMS;

/// `kernel` for a node whose result and operands are all F32, F16 or BF16.
pub(super) fn plan(t: &Tensor, kernel: KernelFn) -> Result<Planned> {
    let floats = is_float(t.ty()) && is_float(operand(t, 0)?.ty()) && is_float(operand(t, 1)?.ty());
    if !floats {
        return Err(unsupported(t));
    }
    Ok(Planned::new(kernel, 0))
}

pub(super) unsafe fn add(n: &NodePtrs, p: &Params) {
    broadcast_wide(n, p, |x, y| x + y)
}
pub(super) unsafe fn sub(n: &NodePtrs, p: &Params) {
    broadcast_wide(n, p, |x, y| x - y)
}
pub(super) unsafe fn mul(n: &NodePtrs, p: &Params) {
    broadcast_wide(n, p, |x, y| x * y)
}
pub(super) unsafe fn div(n: &NodePtrs, p: &Params) {
    broadcast_wide(n, p, |x, y| x / y)
}

wide_fn!(
    /// [`broadcast`] compiled for the CPU's ISA path.
    fn broadcast_wide<F: Fn(f32, f32) -> f32>(n: &NodePtrs, p: &Params, f: F) = broadcast
);

/// `dst = f(a, b)` with `b` tiled over `a`'s shape. When every tensor is packed F32 and `b`
/// repeats with a period of its own size along the flattened tensor ([`tile_period`]: the
/// same shape, one row, one element, …), threads claim contiguous pieces of the flattened
/// tensor ([`Params::flat_pieces`]) and run plain loops over runs of `b`, kept in cache;
/// otherwise they claim pieces of `dst`'s rows ([`Params::row_pieces`]), packed F32 rows
/// through the same plain loops. Each element is `f` of the same two values either way.
#[inline(always)]
fn broadcast(n: &NodePtrs, p: &Params, f: impl Fn(f32, f32) -> f32) {
    let (d, a, b) = (&n.dst, &n.src[0], &n.src[1]);
    if let Some(period) = tile_period(d, a, b) {
        let (dp, ap, bp) = (d.data, a.data as *const u8, b.data as *const u8);
        for piece in p.flat_pieces(d.nelements()) {
            // SAFETY: packed F32 tensors: dst and a hold every index of the piece, b every
            // index below `period`; dst may be a (or b) exactly, which element-by-element
            // access tolerates (each element is read before it is written).
            unsafe {
                if period == 1 {
                    let y = ld(bp, 0);
                    for i in piece {
                        st(dp, i, f(ld(ap, i), y));
                    }
                    continue;
                }
                let (mut i, mut j) = (piece.start, piece.start % period);
                while i < piece.end {
                    let run = (period - j).min(piece.end - i);
                    let (dr, ar, br) = (dp.add(4 * i), ap.add(4 * i), bp.add(4 * j));
                    for k in 0..run {
                        st(dr, k, f(ld(ar, k), ld(br, k)));
                    }
                    (i, j) = (i + run, 0);
                }
            }
        }
        return;
    }
    let ne0 = d.ne[0] as usize;
    let nb0 = b.ne[0] as usize;
    let fast = d.f32_rows() && a.f32_rows() && b.f32_rows();
    for (r, span) in p.row_pieces(d.nrows(), ne0) {
        let idx = d.unravel_row(r);
        let mut bidx = idx;
        for (k, i) in bidx.iter_mut().enumerate() {
            *i %= b.ne[k + 1] as usize;
        }
        let (drow, arow, brow) = (d.row(idx), a.row(idx), b.row(bidx));
        // SAFETY: the rows are rows of their tensors and every index is below that tensor's
        // ne[0]; dst may alias a (in place), which element-by-element access tolerates (each
        // element is read before it is written).
        unsafe {
            if fast && nb0 == ne0 {
                for i in span {
                    st(drow, i, f(ld(arow, i), ld(brow, i)));
                }
            } else if fast && nb0 == 1 {
                let y = ld(brow, 0);
                for i in span {
                    st(drow, i, f(ld(arow, i), y));
                }
            } else {
                for i in span {
                    let y = b.get(brow, i % nb0);
                    d.set(drow, i, f(a.get(arow, i), y));
                }
            }
        }
    }
}

/// When `dst`, `a` and `b` are packed F32 and `b` has `dst`'s leading dimensions and ones
/// after them (`[ne0, …, ne_k, 1, …, 1]`: the same shape, a row, one element), so that
/// element `i` of the flattened `dst` takes element `i mod period` of `b`: that period,
/// `b`'s element count (at least 1).
fn tile_period(d: &TensorPtr, a: &TensorPtr, b: &TensorPtr) -> Option<usize> {
    if !(d.f32_packed() && a.f32_packed() && b.f32_packed()) {
        return None;
    }
    let lead = (0..MAX_DIMS)
        .find(|&k| b.ne[k] != d.ne[k])
        .unwrap_or(MAX_DIMS);
    let ones = b.ne[lead..].iter().all(|&n| n == 1);
    (ones && d.nelements() > 0).then(|| b.nelements())
}
