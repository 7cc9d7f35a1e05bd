//! CPY, DUP and CONT: copy any layout into any layout of the same element count, converting
//! between F32, F16 and BF16. Elements are matched in logical (row-major) order.

use super::{is_float, unsupported, KernelFn, NodePtrs, Params, TensorPtr};
use crate::error::Result;
use crate::tensor::{Tensor, MAX_DIMS};

pub(super) fn select(t: &Tensor) -> Result<KernelFn> {
    if !is_float(t.ty()) || !is_float(t.srcs()[0].ty()) {
        return Err(unsupported(t));
    }
    Ok(copy)
}

/// Address of element `k` (row-major logical order) of `t`.
fn element(t: &TensorPtr, mut k: usize) -> *mut u8 {
    let mut off = 0;
    for d in 0..MAX_DIMS {
        let n = t.ne[d] as usize;
        off += (k % n) * t.nb[d];
        k /= n;
    }
    // SAFETY (of later accesses): k < nelements, so the offset is within the tensor's span.
    unsafe { t.data.add(off) }
}

fn copy(n: &NodePtrs, p: &Params) {
    let (d, a) = (&n.dst, &n.src[0]);
    if d.ne == a.ne {
        // Same shape: row by row.
        for r in p.range(d.nrows()) {
            let idx = d.unravel_row(r);
            let (drow, arow) = (d.row(idx), a.row(idx));
            // SAFETY: rows of their tensors, indices below ne[0].
            unsafe {
                for i in 0..d.ne[0] as usize {
                    d.set(drow, i, a.get(arow, i));
                }
            }
        }
        return;
    }
    for k in p.range(d.nelements()) {
        // SAFETY: k indexes both tensors, which have the same element count.
        unsafe { d.set(element(d, k), 0, a.get(element(a, k), 0)) }
    }
}
