//! CPY, DUP and CONT: copy any layout into any layout of the same element count, converting
//! between F32, F16 and BF16 (and copying other non-quantized types bit for bit when source
//! and destination agree). Elements are matched in logical order, dimension 0 fastest, as
//! GGML's `dup`/`cpy` do when the shapes differ.

use super::{copyable, unsupported, KernelFn, NodePtrs, Params, TensorPtr};
use crate::error::Result;
use crate::tensor::{Tensor, MAX_DIMS};

pub(super) fn select(t: &Tensor) -> Result<KernelFn> {
    if !copyable(t.srcs()[0].ty(), t.ty()) {
        return Err(unsupported(t));
    }
    Ok(copy)
}

/// Unravels a flat logical index into per-dimension indices of shape `ne`.
fn unravel(ne: &[i64; MAX_DIMS], mut k: usize) -> [usize; MAX_DIMS] {
    let mut idx = [0usize; MAX_DIMS];
    for (d, slot) in idx.iter_mut().enumerate() {
        let n = ne[d] as usize;
        *slot = k % n;
        k /= n;
    }
    idx
}

/// Advances `idx` to the next logical position of shape `ne` (dimension 0 fastest).
fn step(ne: &[i64; MAX_DIMS], idx: &mut [usize; MAX_DIMS]) {
    for d in 0..MAX_DIMS {
        idx[d] += 1;
        if idx[d] < ne[d] as usize {
            return;
        }
        idx[d] = 0;
    }
}

/// Address of the element at `idx` of `t`.
fn element(t: &TensorPtr, idx: &[usize; MAX_DIMS]) -> *mut u8 {
    let off: usize = (0..MAX_DIMS).map(|d| idx[d] * t.nb[d]).sum();
    // SAFETY (of later accesses): idx is within ne, so the offset is within the tensor's span.
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
                    d.copy_from(drow, i, a, arow, i);
                }
            }
        }
        return;
    }
    // Different shapes: this thread's range of logical positions, walked in both shapes.
    let range = p.range(d.nelements());
    if range.is_empty() {
        return;
    }
    let (mut di, mut ai) = (unravel(&d.ne, range.start), unravel(&a.ne, range.start));
    for _ in range {
        // SAFETY: di and ai index their tensors (both walk the same number of positions,
        // fewer than the common element count).
        unsafe { d.copy_from(element(d, &di), 0, a, element(a, &ai), 0) }
        step(&d.ne, &mut di);
        step(&a.ne, &mut ai);
    }
}
