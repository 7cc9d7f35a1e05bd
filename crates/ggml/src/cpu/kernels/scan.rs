//! CUMSUM (running f32 sums along rows, in order, as GGML), COUNT_EQUAL (one thread counts
//! every position, as the reductions here) and SOLVE_TRI (forward substitution per column of
//! the right-hand side).

use super::{operand, unsupported, KernelFn, NodePtrs, Params, Planned};
use crate::error::Result;
use crate::tensor::Tensor;
use crate::types::Type;

/// `kernel` when the result and every operand have the types the shape rule promises:
/// `result` and `operands` in slot order.
pub(super) fn plan(
    t: &Tensor,
    kernel: KernelFn,
    result: Type,
    operands: &[Type],
) -> Result<Planned> {
    let mut ok = t.ty() == result;
    for (i, &ty) in operands.iter().enumerate() {
        ok &= operand(t, i)?.ty() == ty;
    }
    if !ok {
        return Err(unsupported(t));
    }
    Ok(Planned::new(kernel, 0))
}

/// `dst[i] = dst[i − 1] + a[i]` along each row, in f32 (GGML's order of additions).
pub(super) unsafe fn cumsum(n: &NodePtrs, p: &Params) {
    let (d, a) = (&n.dst, &n.src[0]);
    for r in p.range(a.nrows()) {
        let idx = a.unravel_row(r);
        let (drow, arow) = (d.row(idx), a.row(idx));
        let mut acc = 0f32;
        for i in 0..a.ne[0] as usize {
            // SAFETY: dst has a's shape; element i of both rows, read before written.
            unsafe {
                acc += a.get(arow, i);
                d.set(drow, i, acc);
            }
        }
    }
}

/// The number of positions where the I32 operands are equal, as one I64.
pub(super) unsafe fn count_equal(n: &NodePtrs, p: &Params) {
    if p.ith != 0 {
        return;
    }
    let (a, b) = (&n.src[0], &n.src[1]);
    let mut count = 0i64;
    for r in 0..a.nrows() {
        let idx = a.unravel_row(r);
        let (arow, brow) = (a.row(idx), b.row(idx));
        for i in 0..a.ne[0] as usize {
            // SAFETY: a and b have the same shape; element i of row idx of each, I32.
            let (x, y) = unsafe {
                (
                    (arow.add(i * a.nb[0]) as *const i32).read_unaligned(),
                    (brow.add(i * b.nb[0]) as *const i32).read_unaligned(),
                )
            };
            count += (x == y) as i64;
        }
    }
    // SAFETY: the result is one I64.
    unsafe { (n.dst.data as *mut i64).write_unaligned(count) }
}

/// For each batch and column `c` of `b`: `x[c, i] = (b[c, i] − Σ_{t<i} a[t, i]·x[c, t]) /
/// a[i, i]`, summing in f32 in order of `t` (as GGML). Threads split the (batch, column)
/// pairs; each reads back only the unknowns it wrote.
pub(super) unsafe fn solve_tri(n: &NodePtrs, p: &Params) {
    let (d, a, b) = (&n.dst, &n.src[0], &n.src[1]);
    let [k, rows, ne2, ne3, ne4] = b.ne.map(|v| v as usize);
    for u in p.range(k * ne2 * ne3 * ne4) {
        let c = u % k;
        let batch = u / k;
        let (i2, i3, i4) = (batch % ne2, batch / ne2 % ne3, batch / ne2 / ne3);
        for i in 0..rows {
            let at = [i, i2, i3, i4];
            let arow = a.row(at);
            let mut sum = 0f32;
            for t in 0..i {
                // SAFETY: t < i < n = a.ne0 = a.ne1 = dst.ne1; c < k = dst.ne0.
                sum += unsafe { a.get(arow, t) * d.get(d.row([t, i2, i3, i4]), c) };
            }
            // SAFETY: as above; dst and b share the shape [k, n, …].
            unsafe {
                let x = (b.get(b.row(at), c) - sum) / a.get(arow, i);
                d.set(d.row(at), c, x);
            }
        }
    }
}
