//! Element-wise binary ops with broadcasting of the second operand: ADD, SUB, MUL, DIV, ADD1.

use super::vec::wide_fn;
use super::{is_float, ld, operand, st, unsupported, KernelFn, NodePtrs, Params, Planned};
use crate::error::Result;
use crate::tensor::Tensor;

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

/// `dst = f(a, b)` with `b` tiled over `a`'s shape; threads claim pieces of `dst`'s rows
/// ([`Params::row_pieces`]). Packed F32 rows go through plain loops the compiler vectorises.
#[inline(always)]
fn broadcast(n: &NodePtrs, p: &Params, f: impl Fn(f32, f32) -> f32) {
    let (d, a, b) = (&n.dst, &n.src[0], &n.src[1]);
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

/// `dst = a + b[0]` for a one-element `b`.
pub(super) unsafe fn add1(n: &NodePtrs, p: &Params) {
    let (d, a, b) = (&n.dst, &n.src[0], &n.src[1]);
    // SAFETY: b has one element.
    let y = unsafe { b.get(b.data, 0) };
    for r in p.range(d.nrows()) {
        let idx = d.unravel_row(r);
        let (drow, arow) = (d.row(idx), a.row(idx));
        // SAFETY: rows of their tensors, indices below ne[0].
        unsafe {
            for i in 0..d.ne[0] as usize {
                d.set(drow, i, a.get(arow, i) + y);
            }
        }
    }
}
