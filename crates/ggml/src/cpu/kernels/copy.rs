//! CPY, DUP and CONT: copy any layout into any layout of the same element count, converting
//! between F32, F16 and BF16 (and copying other non-quantized types bit for bit when source
//! and destination agree). Elements are matched in logical order, dimension 0 fastest, as
//! GGML's `dup`/`cpy` do when the shapes differ. Between a float type and a quantized one
//! (same shape), rows are quantized with GGML's reference quantizer or dequantized. (GGML's
//! CPU quantizes to Q8_0 with its x86 `quantize_row_q8_0`, `v·(127/amax)` rounded half to
//! even, not the reference `v/(amax/127)` rounded half away: at rounding ties a level can
//! differ by one. The wgpu device follows this reference form, so the two change together.)

use super::{
    copyable, dequantizable, dequantize_into, is_float, unsupported, NodePtrs, Params, TensorPtr,
};
use super::{operand, Planned};
use crate::error::Result;
use crate::quants;
use crate::tensor::{Tensor, MAX_DIMS};

/// CPY, DUP, CONT: element copies between plain types, or rows quantized/dequantized
/// through one f32 row of scratch per thread.
pub(super) fn plan(t: &Tensor) -> Result<Planned> {
    let a = operand(t, 0)?;
    let (src, dst) = (a.ty(), t.ty());
    let same_shape = t.ne() == a.ne();
    let row = t.ne()[0] as usize * 4;
    if copyable(src, dst) {
        Ok(Planned::new(copy, 0))
    } else if same_shape && is_float(src) && dst.is_quantized() && quants::has_from_float_ref(dst) {
        Ok(Planned::new(quantize_rows, row))
    } else if same_shape && dequantizable(src) && is_float(dst) {
        Ok(Planned::new(dequantize_rows, row))
    } else if same_shape && src == dst && packed_rows(a) && packed_rows(t) {
        Ok(Planned::new(copy_block_rows, 0))
    } else {
        Err(unsupported(t))
    }
}

/// Whether `t`'s rows are packed blocks (dimension 0 not strided), as a block copy needs.
fn packed_rows(t: &Tensor) -> bool {
    t.nb()[0] == t.ty().type_size()
}

/// Rows of one quantized type into the same type (same shape): each row's blocks copied as
/// bytes, the other dimensions in any layout (GGML's `dup_bytes`).
unsafe fn copy_block_rows(n: &NodePtrs, p: &Params) {
    let (d, a) = (&n.dst, &n.src[0]);
    let row_bytes = d.ne[0] as usize / d.ty.blck_size() * d.ty.type_size();
    for r in p.range(d.nrows()) {
        let idx = d.unravel_row(r);
        // SAFETY: rows of their tensors (same shape, same type, packed blocks: the plan), so
        // each holds `row_bytes` bytes; the destination row is this thread's, and a copy onto
        // itself (the same elements) is allowed by `copy`.
        unsafe { std::ptr::copy(a.row(idx), d.row(idx), row_bytes) }
    }
}

/// Float rows into quantized rows (GGML's `from_float`), row by row.
pub(super) unsafe fn quantize_rows(n: &NodePtrs, p: &Params) {
    let (d, a) = (&n.dst, &n.src[0]);
    let ne0 = d.ne[0] as usize;
    let row_bytes = ne0 / d.ty.blck_size() * d.ty.type_size();
    // SAFETY: the plan sized each thread's scratch for ne0 f32 values (`work_size`).
    let buf = unsafe { p.scratch_f32(ne0) };
    for r in p.range(d.nrows()) {
        let idx = d.unravel_row(r);
        let (drow, arow) = (d.row(idx), a.row(idx));
        // SAFETY: rows of their tensors (same shape); a quantized row is `row_bytes` packed
        // bytes that only this thread writes.
        unsafe {
            for (i, v) in buf.iter_mut().enumerate() {
                *v = a.get(arow, i);
            }
            let out = std::slice::from_raw_parts_mut(drow, row_bytes);
            // The planner checked the type has a reference quantizer and the row is whole
            // blocks, so this cannot fail.
            let _ = quants::quantize_row_ref(d.ty, buf, out);
        }
    }
}

/// Quantized rows into float rows, row by row.
pub(super) unsafe fn dequantize_rows(n: &NodePtrs, p: &Params) {
    let (d, a) = (&n.dst, &n.src[0]);
    let ne0 = d.ne[0] as usize;
    // SAFETY: the plan sized each thread's scratch for ne0 f32 values (`work_size`).
    let buf = unsafe { p.scratch_f32(ne0) };
    for r in p.range(d.nrows()) {
        let idx = d.unravel_row(r);
        // SAFETY: rows of their tensors (same shape), indices below ne0.
        unsafe {
            dequantize_into(a, a.row(idx), buf);
            let drow = d.row(idx);
            for (i, v) in buf.iter().enumerate() {
                d.set(drow, i, *v);
            }
        }
    }
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

/// Address of the element at `idx` of `t` (only computed, as [`TensorPtr::row`] does; reading
/// or writing it needs `idx` within `ne`).
fn element(t: &TensorPtr, idx: &[usize; MAX_DIMS]) -> *mut u8 {
    let off: usize = (0..MAX_DIMS).map(|d| idx[d] * t.nb[d]).sum();
    t.data.wrapping_add(off)
}

pub(super) unsafe fn copy(n: &NodePtrs, p: &Params) {
    let (d, a) = (&n.dst, &n.src[0]);
    if d.ne == a.ne {
        // Same shape: row by row.
        for r in p.range(d.nrows()) {
            let idx = d.unravel_row(r);
            let (drow, arow) = (d.row(idx), a.row(idx));
            // SAFETY: rows of their tensors, indices below ne[0].
            unsafe { d.copy_run(drow, 0, a, arow, 0, d.ne[0] as usize) }
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
