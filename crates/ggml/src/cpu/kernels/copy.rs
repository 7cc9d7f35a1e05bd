//! CPY, DUP and CONT: copy any layout into any layout of the same element count, converting
//! between F32, F16 and BF16, and between F32 and I32 as GGML's CPU does on x86 (toward zero,
//! NaN and out-of-range values to `i32::MIN`: [`f32_to_i32`](super::f32_to_i32); I32 to F32
//! rounded to nearest even), and copying other non-quantized types bit for bit when source
//! and destination agree. Elements are matched in logical order, dimension 0 fastest, as
//! GGML's `dup`/`cpy` do when the shapes differ. Between a float type and a quantized one
//! (same shape), rows are quantized as GGML's CPU quantizes them ([`quantize_row_cpu`]: its
//! x86 quantizer for Q8_0 and Q8_1, the reference one for every other type) or dequantized.
//! One quantized type into the same type copies whole blocks (GGML's `dup_bytes`): row by row
//! between equal shapes, in logical order between different ones.

use super::{
    copyable, dequantizable, dequantize_into, is_float, unsupported, NodePtrs, Params, TensorPtr,
};
use super::{operand, Planned};
use crate::cpu::quant_dot::{isa, quantize_act};
use crate::error::Result;
use crate::quants;
use crate::tensor::{Tensor, MAX_DIMS};
use crate::types::Type;

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
    } else if src == dst && block_rows(a) && block_rows(t) {
        Ok(Planned::new(copy_blocks, 0))
    } else {
        Err(unsupported(t))
    }
}

/// Whether `t`'s rows are whole packed blocks (dimension 0 not strided, ne0 a multiple of the
/// block size), as a block copy needs.
pub(super) fn block_rows(t: &Tensor) -> bool {
    t.nb()[0] == t.ty().type_size() && t.ne()[0] % t.ty().blck_size() as i64 == 0
}

/// Quantizes one row of f32 values `x` (whole blocks) into `out` (its `ty.row_size` bytes) as
/// GGML's CPU `from_float` does on x86 (`type_traits_cpu`): Q8_0 and Q8_1 through its x86
/// quantizer (`quantize_row_q8_0`/`_q8_1` of `arch/x86/quants.c`: levels `v·(127/amax)`
/// rounded half to even, the same on every path here: [`quantize_act`]), every other type
/// through the reference quantizer (GGML's x86 build calls the `_ref` one for those,
/// Q8_K included). A Q8_0/Q8_1 block holding a NaN or an infinity takes the reference form.
///
/// The caller has checked that `ty` has a reference quantizer and the lengths agree.
pub(super) fn quantize_row_cpu(ty: Type, x: &[f32], out: &mut [u8]) {
    match ty {
        Type::Q8_0 | Type::Q8_1 => quantize_act(ty, isa(), x, out),
        _ => {
            // Cannot fail: the caller checked the type and the row is whole blocks.
            let _ = quants::quantize_row_ref(ty, x, out);
        }
    }
}

/// One quantized type into the same type, whole blocks copied as bytes (GGML's `dup_bytes`):
/// between equal shapes row by row (the other dimensions in any layout), between different
/// shapes block by block in logical order (each row is whole blocks in both shapes, so block
/// boundaries fall at the same logical positions).
unsafe fn copy_blocks(n: &NodePtrs, p: &Params) {
    let (d, a) = (&n.dst, &n.src[0]);
    let (blck, size) = (d.ty.blck_size(), d.ty.type_size());
    if d.ne == a.ne {
        let row_bytes = d.ne[0] as usize / blck * size;
        for r in p.range(d.nrows()) {
            let idx = d.unravel_row(r);
            // SAFETY: rows of their tensors (same shape, same type, packed blocks: the plan),
            // so each holds `row_bytes` bytes; the destination row is this thread's, and
            // `copy` allows a copy onto itself (the same elements).
            unsafe { std::ptr::copy(a.row(idx), d.row(idx), row_bytes) }
        }
        return;
    }
    let blocks = |ne: &[i64; MAX_DIMS]| {
        let mut ne = *ne;
        ne[0] /= blck as i64;
        ne
    };
    // SAFETY: in block units each tensor's dimension 0 holds ne0 / blck blocks `size` bytes
    // apart (packed rows: the plan), so each address walked is a whole block of its tensor.
    unsafe {
        walk(&blocks(&d.ne), d, &blocks(&a.ne), a, p, |to, from| {
            std::ptr::copy(from, to, size)
        })
    }
}

/// Float rows into quantized rows (GGML's CPU `from_float`: [`quantize_row_cpu`]), row by
/// row.
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
            // The planner checked the type has a reference quantizer; rows are whole blocks.
            quantize_row_cpu(d.ty, buf, out);
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
    // SAFETY: `element` addresses elements of their tensors (the walk stays inside both
    // shapes), and the types satisfy `copyable` (the plan).
    unsafe {
        walk(&d.ne, d, &a.ne, a, p, |to, from| {
            d.copy_from(to, 0, a, from, 0)
        })
    }
}

/// Calls `f(dst unit, src unit)` for this thread's share of the logical positions of shapes
/// `dne` (of `d`) and `ane` (of `a`), which hold equally many units (elements, or blocks with
/// dimension 0 counted in blocks), dimension 0 fastest in both; units are addressed by
/// [`element`] with the tensors' strides.
///
/// # Safety
/// `dne` and `ane` must index units of `d` and `a` through their strides, and `f` must be
/// safe to call on any such pair of addresses (each destination unit is this thread's).
unsafe fn walk(
    dne: &[i64; MAX_DIMS],
    d: &TensorPtr,
    ane: &[i64; MAX_DIMS],
    a: &TensorPtr,
    p: &Params,
    mut f: impl FnMut(*mut u8, *const u8),
) {
    let total: usize = dne.iter().map(|&n| n as usize).product();
    let range = p.range(total);
    if range.is_empty() {
        return;
    }
    let (mut di, mut ai) = (unravel(dne, range.start), unravel(ane, range.start));
    for _ in range {
        f(element(d, &di), element(a, &ai));
        step(dne, &mut di);
        step(ane, &mut ai);
    }
}
