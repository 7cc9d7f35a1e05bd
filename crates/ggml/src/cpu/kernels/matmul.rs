//! MUL_MAT: `dst[i, j] = dot(a row i, b row j)` per batch, with `a` broadcast over the batch
//! dimensions of `b`. Weights `a` in F32, F16 or BF16, activations `b` in F32, F16 or BF16;
//! result F32. Threads split the rows of `a`; a row of `a` that is not F32 is converted once
//! into the thread's scratch and reused for every row of `b`.

use super::{is_float, unsupported, KernelFn, NodePtrs, Params, TensorPtr};
use crate::error::Result;
use crate::tensor::Tensor;
use crate::types::Type;

pub(super) fn select(t: &Tensor) -> Result<KernelFn> {
    let (a, b) = (&t.srcs()[0], &t.srcs()[1]);
    if t.ty() != Type::F32 || !is_float(a.ty()) || !is_float(b.ty()) {
        return Err(unsupported(t));
    }
    Ok(mul_mat)
}

/// Two f32 rows of scratch per thread (one row of `a`, one of `b`).
pub(super) fn work_size(t: &Tensor) -> usize {
    2 * t.srcs()[0].ne()[0] as usize * 4
}

/// Loads row `row` of `t` into `out` as f32, or borrows it when it already is packed f32.
///
/// # Safety
/// `row` must be a row of `t`, `out.len() == ne[0]`.
unsafe fn row_f32<'a>(t: &TensorPtr, row: *const u8, out: &'a mut [f32]) -> &'a [f32] {
    if t.ty == Type::F32 && t.rows_packed() {
        // SAFETY: a packed f32 row of ne[0] elements; it is only read during this node.
        return unsafe { std::slice::from_raw_parts(row as *const f32, out.len()) };
    }
    for (i, v) in out.iter_mut().enumerate() {
        // SAFETY: forwarded from the caller.
        *v = unsafe { t.get(row, i) };
    }
    out
}

/// Dot product with eight independent partial sums (vectorises well, rounds like a tree).
pub(crate) fn dot(x: &[f32], y: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (xc, yc) = (x.chunks_exact(8), y.chunks_exact(8));
    let tail: f32 = xc
        .remainder()
        .iter()
        .zip(yc.remainder())
        .map(|(a, b)| a * b)
        .sum();
    for (a, b) in xc.zip(yc) {
        for k in 0..8 {
            acc[k] += a[k] * b[k];
        }
    }
    acc.iter().sum::<f32>() + tail
}

fn mul_mat(n: &NodePtrs, p: &Params) {
    let (d, a, b) = (&n.dst, &n.src[0], &n.src[1]);
    let k = a.ne[0] as usize;
    // SAFETY: the plan sized each thread's scratch for 2 * ne00 f32 values.
    let scratch = unsafe { p.scratch_f32(2 * k) };
    let (abuf, bbuf) = scratch.split_at_mut(k);
    let rows_a = a.ne[1] as usize;
    let batches: usize = b.ne[2..].iter().product::<i64>() as usize;
    // Broadcast ratios of b's batch dimensions over a's.
    let ratio: [usize; 3] = std::array::from_fn(|i| (b.ne[i + 2] / a.ne[i + 2]) as usize);
    for batch in 0..batches {
        let bi = [
            batch % b.ne[2] as usize,
            batch / b.ne[2] as usize % b.ne[3] as usize,
            batch / (b.ne[2] * b.ne[3]) as usize,
        ];
        let ai = [bi[0] / ratio[0], bi[1] / ratio[1], bi[2] / ratio[2]];
        for i in p.range(rows_a) {
            // SAFETY: i < a.ne[1]; ai within a's batch dimensions; buffers hold ne00 values.
            let arow = unsafe { row_f32(a, a.row([i, ai[0], ai[1], ai[2]]), abuf) };
            for j in 0..b.ne[1] as usize {
                // SAFETY: j < b.ne[1]; bi within b's batch dimensions.
                let brow = unsafe { row_f32(b, b.row([j, bi[0], bi[1], bi[2]]), bbuf) };
                let v = dot(arow, brow);
                // SAFETY: dst is [a.ne1, b.ne1, b.ne2, b.ne3]; (i, j, bi) is in range and
                // only this thread writes rows i of its range.
                unsafe { d.set(d.row([j, bi[0], bi[1], bi[2]]), i, v) }
            }
        }
    }
}
