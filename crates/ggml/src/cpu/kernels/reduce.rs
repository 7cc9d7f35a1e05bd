//! Reductions: SUM (everything), SUM_ROWS, MEAN (per row), ARGMAX (per row). Sums accumulate in
//! f64, as GGML's `ggml_float`.

use super::{is_float, unsupported, KernelFn, NodePtrs, Params, TensorPtr};
use super::{operand, Planned};
use crate::error::Result;
use crate::tensor::Tensor;
use crate::types::Type;

/// `kernel` for a float operand and a result of type `result` (a float type when `None`).
pub(super) fn plan(t: &Tensor, kernel: KernelFn, result: Option<Type>) -> Result<Planned> {
    let result_ok = result.map_or(is_float(t.ty()), |r| t.ty() == r);
    if !is_float(operand(t, 0)?.ty()) || !result_ok {
        return Err(unsupported(t));
    }
    Ok(Planned::new(kernel, 0))
}

fn row_sum(a: &TensorPtr, r: usize) -> f64 {
    let row = a.row_at(r);
    // SAFETY: a row of `a`, indices below ne[0].
    (0..a.ne[0] as usize)
        .map(|i| unsafe { a.get(row, i) } as f64)
        .sum()
}

pub(super) unsafe fn sum(n: &NodePtrs, p: &Params) {
    if p.ith != 0 {
        return;
    }
    let a = &n.src[0];
    let total: f64 = (0..a.nrows()).map(|r| row_sum(a, r)).sum();
    // SAFETY: dst has one element.
    unsafe { n.dst.set(n.dst.data, 0, total as f32) }
}

fn per_row(n: &NodePtrs, p: &Params, f: impl Fn(&TensorPtr, usize) -> f32) {
    let (d, a) = (&n.dst, &n.src[0]);
    for r in p.range(a.nrows()) {
        let v = f(a, r);
        // SAFETY: dst has one element per row of a, with the same row indices.
        unsafe { d.set(d.row(a.unravel_row(r)), 0, v) }
    }
}

pub(super) unsafe fn sum_rows(n: &NodePtrs, p: &Params) {
    per_row(n, p, |a, r| row_sum(a, r) as f32)
}

pub(super) unsafe fn mean(n: &NodePtrs, p: &Params) {
    per_row(n, p, |a, r| (row_sum(a, r) / a.ne[0] as f64) as f32)
}

/// Index of the largest element of each row, written as I32. As GGML's
/// `ggml_vec_argmax_f32`, the running maximum is `max > v ? max : v` and any element equal to
/// it takes the index, so ties give the *last* position.
pub(super) unsafe fn argmax(n: &NodePtrs, p: &Params) {
    let (d, a) = (&n.dst, &n.src[0]);
    for r in p.range(a.nrows()) {
        let row = a.row_at(r);
        let (mut max, mut best) = (f32::NEG_INFINITY, 0usize);
        for i in 0..a.ne[0] as usize {
            // SAFETY: a row of `a`, index below ne[0].
            let v = unsafe { a.get(row, i) };
            max = if max > v { max } else { v };
            if max == v {
                best = i;
            }
        }
        // SAFETY: dst is the I32 vector [a.ne1] and a is a matrix, so r < dst.ne0 (element r,
        // not row r); the builder bounds ne0 by i32::MAX, so the index fits.
        unsafe { (d.data.add(r * d.nb[0]) as *mut i32).write_unaligned(best as i32) }
    }
}
