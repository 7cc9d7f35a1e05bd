//! ARGSORT and TOP_K: each row's values are read into the thread's scratch and their indices
//! sorted there (a stable sort, so ties keep index order), then written as I32.

use std::cmp::Ordering;

use super::{is_float, operand, unsupported, KernelFn, NodePtrs, Params, Planned};
use crate::error::Result;
use crate::ops::{ArgsortParams, SortOrder};
use crate::tensor::Tensor;
use crate::types::Type;

/// `kernel` for a float operand and an I32 result, with scratch for one row's values and
/// indices.
pub(super) fn plan(t: &Tensor, kernel: KernelFn) -> Result<Planned> {
    let a = operand(t, 0)?;
    if t.ty() != Type::I32 || !is_float(a.ty()) {
        return Err(unsupported(t));
    }
    Ok(Planned::new(kernel, 2 * a.ne()[0] as usize * 4))
}

/// `x < y` as GGML compares, made a total order: NaN is above every number and equal to NaN.
fn ascending(x: f32, y: f32) -> Ordering {
    x.partial_cmp(&y)
        .unwrap_or_else(|| x.is_nan().cmp(&y.is_nan()))
}

/// Sorts the indices of every row of operand 0 by `cmp` of their values, then hands the
/// sorted indices and the result row to `emit`.
fn sort_rows(
    n: &NodePtrs,
    p: &Params,
    cmp: impl Fn(f32, f32) -> Ordering,
    emit: impl Fn(&mut [u32], *mut u8),
) {
    let (d, a) = (&n.dst, &n.src[0]);
    let ne0 = a.ne[0] as usize;
    // SAFETY: the plan sized each thread's scratch for 2·ne0 f32 values.
    let scratch = unsafe { p.scratch_f32(2 * ne0) };
    let (vals, idx) = scratch.split_at_mut(ne0);
    let idx: &mut [u32] = bytemuck::cast_slice_mut(idx);
    for r in p.range(a.nrows()) {
        let at = a.unravel_row(r);
        // SAFETY: a row of a with ne0 elements; the scratch is private.
        unsafe { a.read_row(a.row(at), vals) };
        for (i, slot) in idx.iter_mut().enumerate() {
            *slot = i as u32;
        }
        idx.sort_by(|&i, &j| cmp(vals[i as usize], vals[j as usize]));
        emit(idx, d.row(at));
    }
}

/// Writes `idx` as the I32 elements of the result row `row`.
///
/// # Safety
/// `row` must be a row of the I32 result `n.dst` with at least `idx.len()` elements.
unsafe fn write_indices(n: &NodePtrs, row: *mut u8, idx: &[u32]) {
    for (i, &v) in idx.iter().enumerate() {
        // SAFETY: forwarded from the caller; the shape rule bounds ne0 by i32::MAX.
        unsafe { (row.add(i * n.dst.nb[0]) as *mut i32).write_unaligned(v as i32) }
    }
}

/// ARGSORT in the node's [`SortOrder`].
pub(super) unsafe fn argsort(n: &NodePtrs, p: &Params) {
    let desc = SortOrder::from_i32(n.params::<ArgsortParams>().order) == Some(SortOrder::Desc);
    sort_rows(
        n,
        p,
        |x, y| {
            if desc {
                ascending(y, x)
            } else {
                ascending(x, y)
            }
        },
        // SAFETY: the result has a's shape, so each row holds ne0 indices.
        |idx, row| unsafe { write_indices(n, row, idx) },
    )
}

/// TOP_K: the `k = dst.ne0` indices of the largest values, largest first, then the first two
/// swapped as GGML's CPU kernel does (to show that their order is not part of the result).
pub(super) unsafe fn top_k(n: &NodePtrs, p: &Params) {
    let k = n.dst.ne[0] as usize;
    sort_rows(
        n,
        p,
        |x, y| ascending(y, x),
        |idx, row| {
            let top = &mut idx[..k];
            if k > 1 {
                top.swap(0, 1);
            }
            // SAFETY: the result rows hold k <= ne0 indices.
            unsafe { write_indices(n, row, top) }
        },
    )
}
