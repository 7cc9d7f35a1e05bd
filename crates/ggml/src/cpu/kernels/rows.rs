//! Row gathering and tiling: GET_ROWS, REPEAT, CONCAT. Elements move bit for bit between
//! equal types (so I32 rows stay exact) and are converted between F32, F16 and BF16; CONCAT
//! of a quantized type copies whole blocks (GGML's `concat_any`).

use super::copy::block_rows;
use super::TensorPtr;
use super::{copyable, dequantizable, dequantize_into, unsupported, KernelFn, NodePtrs, Params};
use super::{operand, Planned};
use crate::error::Result;
use crate::ops::ConcatParams;
use crate::tensor::{Tensor, MAX_DIMS};
use crate::types::Type;

/// GET_ROWS: rows copied (plain types) or dequantized through one f32 row of scratch.
pub(super) fn plan_get_rows(t: &Tensor) -> Result<Planned> {
    let (a, idx) = (operand(t, 0)?.ty(), operand(t, 1)?.ty());
    if idx != Type::I32 {
        return Err(unsupported(t));
    }
    if copyable(a, t.ty()) {
        Ok(Planned::new(get_rows, 0))
    } else if dequantizable(a) && t.ty() == Type::F32 {
        Ok(Planned::new(get_rows_dequantized, t.ne()[0] as usize * 4))
    } else {
        Err(unsupported(t))
    }
}

/// REPEAT (one operand) and CONCAT (two): element copies into the result's type.
pub(super) fn plan_copies(t: &Tensor, kernel: KernelFn) -> Result<Planned> {
    let copyable_in = |i| operand(t, i).map(|s| copyable(s.ty(), t.ty()));
    let ok = copyable_in(0)? && (t.n_src_slots() < 2 || copyable_in(1)?);
    if !ok {
        return Err(unsupported(t));
    }
    Ok(Planned::new(kernel, 0))
}

/// CONCAT: element copies as [`plan_copies`] plans them, or for a quantized type (`a`, `b`
/// and the result all of it, every row whole packed blocks, as GGML's `concat_any` asserts) whole
/// blocks copied as bytes.
pub(super) fn plan_concat(t: &Tensor) -> Result<Planned> {
    let ty = t.ty();
    if !ty.is_quantized() {
        return plan_copies(t, concat);
    }
    let blocks = |s: &Tensor| s.ty() == ty && block_rows(s);
    if blocks(t) && blocks(operand(t, 0)?) && blocks(operand(t, 1)?) {
        Ok(Planned::new(concat, 0))
    } else {
        Err(unsupported(t))
    }
}

/// `dst[:, i, j, k] = a[:, idx[i, j, k], j, k]`. An index outside `0..a.ne1` gives a row of
/// zeros and fails the run after this node (GGML asserts instead; the builder cannot see
/// index values, and this never reads outside `a`).
pub(super) unsafe fn get_rows(n: &NodePtrs, p: &Params) {
    let (d, a, idx) = (&n.dst, &n.src[0], &n.src[1]);
    let ne0 = d.ne[0] as usize;
    for r in p.range(d.nrows()) {
        let di = d.unravel_row(r);
        let drow = d.row(di);
        // SAFETY: di indexes a dst row; the source row index is checked against a.ne1, and
        // di[1], di[2] index a's dims 2 and 3 (the builder made them equal to idx's dims 1
        // and 2); element indices stay below ne[0].
        unsafe {
            match source_row(a, idx, di, p) {
                Some(row) => d.copy_run(drow, 0, a, a.row([row, di[1], di[2], 0]), 0, ne0),
                None => (0..ne0).for_each(|i| d.zero(drow, i)),
            }
        }
    }
}

/// The row index `idx[i, j, k]` for dst row `di`, if it lies within `a`; an index outside is
/// reported to `p` as a fault.
///
/// # Safety
/// `di` must index a row of dst, whose dims 1..4 are idx's shape.
unsafe fn source_row(
    a: &TensorPtr,
    idx: &TensorPtr,
    di: [usize; MAX_DIMS - 1],
    p: &Params,
) -> Option<usize> {
    // SAFETY: forwarded from the caller.
    let row = unsafe {
        (idx.row([di[1], di[2], 0, 0]).add(di[0] * idx.nb[0]) as *const i32).read_unaligned()
    };
    let inside = row >= 0 && i64::from(row) < a.ne[1];
    if !inside {
        p.index_fault(1, [di[0], di[1], di[2]], row.into(), a.ne[1]);
    }
    inside.then_some(row as usize)
}

/// GET_ROWS from a quantized `a` into F32: each picked row is dequantized (an index outside
/// `a` gives zeros and a fault, as for the plain kernel).
pub(super) unsafe fn get_rows_dequantized(n: &NodePtrs, p: &Params) {
    let (d, a, idx) = (&n.dst, &n.src[0], &n.src[1]);
    let ne0 = d.ne[0] as usize;
    // SAFETY: the plan sized each thread's scratch for ne0 f32 values (`work_size`).
    let buf = unsafe { p.scratch_f32(ne0) };
    for r in p.range(d.nrows()) {
        let di = d.unravel_row(r);
        let drow = d.row(di);
        // SAFETY: di indexes a dst row; the source row is range-checked; indices below ne0.
        unsafe {
            match source_row(a, idx, di, p) {
                Some(row) => dequantize_into(a, a.row([row, di[1], di[2], 0]), buf),
                None => buf.fill(0.0),
            }
            for (i, v) in buf.iter().enumerate() {
                d.set(drow, i, *v);
            }
        }
    }
}

/// `dst[i] = a[i mod a.ne]` in every dimension.
pub(super) unsafe fn repeat(n: &NodePtrs, p: &Params) {
    let (d, a) = (&n.dst, &n.src[0]);
    let ne0 = d.ne[0] as usize;
    let a0 = a.ne[0] as usize;
    for r in p.range(d.nrows()) {
        let di = d.unravel_row(r);
        let ai: [usize; MAX_DIMS - 1] = std::array::from_fn(|k| di[k] % a.ne[k + 1] as usize);
        let (drow, arow) = (d.row(di), a.row(ai));
        // SAFETY: rows of their tensors; each run stays inside both rows (a0 divides ne0).
        unsafe {
            for start in (0..ne0).step_by(a0.max(1)) {
                d.copy_run(drow, start, a, arow, 0, a0.min(ne0 - start));
            }
        }
    }
}

/// `dst` = `a` followed by `b` along the dimension of [`ConcatParams`].
pub(super) unsafe fn concat(n: &NodePtrs, p: &Params) {
    let dim = n.params::<ConcatParams>().dim as usize;
    let (d, a, b) = (&n.dst, &n.src[0], &n.src[1]);
    let ne0 = d.ne[0] as usize;
    for r in p.range(d.nrows()) {
        let di = d.unravel_row(r);
        let drow = d.row(di);
        if dim == 0 {
            let na = a.ne[0] as usize;
            // SAFETY: the row of dst is a's row (na elements) followed by b's (ne0 − na); the
            // other indices agree between the three tensors.
            unsafe {
                concat_run(d, drow, 0, a, a.row(di), na);
                concat_run(d, drow, na, b, b.row(di), ne0 - na);
            }
            continue;
        }
        let mut si = di;
        let src = if si[dim - 1] < a.ne[dim] as usize {
            a
        } else {
            si[dim - 1] -= a.ne[dim] as usize;
            b
        };
        // SAFETY: `si` indexes `src` (shapes agree outside `dim`, and inside it the index was
        // shifted into b's range); the row has ne0 elements in all three tensors.
        unsafe { concat_run(d, drow, 0, src, src.row(si), ne0) }
    }
}

/// Copies the `n` elements of `src`'s row `srow` into `d`'s row `drow` from element `i0`: for
/// a quantized type (the plan checked all three tensors are of it, rows packed, and `i0`, `n`
/// are whole blocks: each row is) the blocks as bytes, else [`TensorPtr::copy_run`].
///
/// # Safety
/// Both rows must belong to their tensors and hold the `n` elements from those positions.
unsafe fn concat_run(
    d: &TensorPtr,
    drow: *mut u8,
    i0: usize,
    src: &TensorPtr,
    srow: *const u8,
    n: usize,
) {
    if d.ty.is_quantized() {
        let (blck, size) = (d.ty.blck_size(), d.ty.type_size());
        // SAFETY: forwarded from the caller; `copy` allows overlapping rows.
        unsafe { std::ptr::copy(srow, drow.add(i0 / blck * size), n / blck * size) }
    } else {
        // SAFETY: forwarded from the caller; the plan checked the types are `copyable`.
        unsafe { d.copy_run(drow, i0, src, srow, 0, n) }
    }
}
