//! Normalisations: NORM (zero mean, unit variance), RMS_NORM and L2_NORM of rows, with `eps` in
//! op_params 0, and GROUP_NORM over groups of channels. Statistics accumulate in f64, as
//! GGML's `ggml_float`.

use super::vec::wide_fn;
use super::{is_float, ld, st, sum_f64, sums_f64, unsupported, KernelFn, NodePtrs, Params};
use super::{operand, Planned, TensorPtr};
use crate::error::Result;
use crate::ops::{GroupNormParams, NormParams};
use crate::tensor::{Tensor, MAX_DIMS};

/// `kernel` on float rows, with one f32 row of scratch per thread.
pub(super) fn plan(t: &Tensor, kernel: KernelFn) -> Result<Planned> {
    if !is_float(t.ty()) || !is_float(operand(t, 0)?.ty()) {
        return Err(unsupported(t));
    }
    Ok(Planned::new(kernel, t.ne()[0] as usize * 4))
}

/// A row normalisation: statistics of the row, then each element from its value and them.
/// Methods rather than closures, `#[inline(always)]`, so they are inlined into each ISA
/// path's copy of [`per_row`] (a closure with a loop inside may not be, and then runs as
/// baseline code).
trait RowNorm {
    type Stats;
    /// The statistics of row `x` (indices `idx` of dimensions 1..5).
    fn stats(&self, x: &[f32], idx: [usize; MAX_DIMS - 1]) -> Self::Stats;
    /// Element `i` of the result from its value `v`.
    fn apply(&self, s: &Self::Stats, v: f32, i: usize) -> f32;
}

/// Each of this thread's rows through `op`. Packed F32 rows are read and written where they
/// are; other layouts go through the thread's f32 scratch row (so in-place results never
/// overwrite what is still to be read).
#[inline(always)]
fn per_row(n: &NodePtrs, p: &Params, op: impl RowNorm) {
    let (d, a) = (&n.dst, &n.src[0]);
    let ne0 = a.ne[0] as usize;
    let fast = a.f32_rows() && d.f32_rows();
    // SAFETY: the plan sized each thread's scratch for ne0 f32 values.
    let buf = if fast {
        &mut [][..]
    } else {
        unsafe { p.scratch_f32(ne0) }
    };
    let rows = p.range(a.nrows());
    let mut idx = a.unravel_row(rows.start);
    for _ in rows {
        let (arow, drow) = (a.row(idx), d.row(idx));
        let x: &[f32] = if fast {
            // SAFETY: a packed F32 row of ne0 values; this shared view ends before dst
            // (which may be a's memory) is written.
            unsafe { std::slice::from_raw_parts(arow as *const f32, ne0) }
        } else {
            // SAFETY: a row of a with ne0 elements into the private scratch.
            unsafe { a.read_row(arow, buf) };
            buf
        };
        let s = op.stats(x, idx);
        let (src, dst) = if fast {
            (arow as *const u8, drow)
        } else {
            (buf.as_ptr() as *const u8, buf.as_mut_ptr() as *mut u8)
        };
        for i in 0..ne0 {
            // SAFETY: src and dst hold ne0 F32 values (packed rows, or the scratch), the same
            // memory or apart; each element is read before it is written.
            unsafe { st(dst, i, op.apply(&s, ld(src, i), i)) };
        }
        if !fast {
            // SAFETY: a row of dst with ne0 elements; the scratch is private.
            unsafe { d.write_row(drow, buf) };
        }
        a.next_row(&mut idx);
    }
}

/// NORM, `(x − mean)/√(var + eps)`: the mean and variance from one pass of f64 sums
/// (GGML's `ggml_float`) of `x − x₀` and its square (shifting by the row's first value keeps
/// `E[(x − x₀)²] − E[x − x₀]²` from cancelling catastrophically when the mean is large
/// against the spread), each result in f64 rounded once.
struct Norm(f64);

impl RowNorm for Norm {
    /// The mean and `1/√(var + eps)`.
    type Stats = (f64, f64);
    #[inline(always)]
    fn stats(&self, x: &[f32], _: [usize; MAX_DIMS - 1]) -> (f64, f64) {
        let len = x.len() as f64;
        let k = x.first().map_or(0.0, |&v| v as f64);
        let [s, sq] = sums_f64(x, |v| [v - k, (v - k) * (v - k)]);
        let m = s / len;
        let var = (sq / len - m * m).max(0.0);
        (k + m, 1.0 / (var + self.0).sqrt())
    }
    #[inline(always)]
    fn apply(&self, &(mean, scale): &(f64, f64), v: f32, _: usize) -> f32 {
        ((v as f64 - mean) * scale) as f32
    }
}

pub(super) unsafe fn norm(n: &NodePtrs, p: &Params) {
    norm_wide(n, p)
}

wide_fn!(
    /// NORM ([`Norm`]) compiled for the CPU's ISA path.
    fn norm_wide(n: &NodePtrs, p: &Params) = norm_rows
);

#[inline(always)]
fn norm_rows(n: &NodePtrs, p: &Params) {
    per_row(n, p, Norm(n.params::<NormParams>().eps as f64))
}

/// RMS_NORM's factor for a row, in GGML's roundings: the squares in f32, summed in f64
/// (`ggml_float`), the mean rounded to f32, then `1/√(mean + eps)` in f32 (GGML adds eps to
/// the mean square, inside the root).
#[inline(always)]
fn rms_scale(x: &[f32], eps: f32) -> f32 {
    let sum = sum_f64(x, |v| {
        let v = v as f32;
        (v * v) as f64
    });
    let mean = (sum / x.len() as f64) as f32;
    1.0 / (mean + eps).sqrt()
}

/// RMS_NORM, `x/√(mean(x²) + eps)`.
struct Rms(f32);

impl RowNorm for Rms {
    type Stats = f32;
    #[inline(always)]
    fn stats(&self, x: &[f32], _: [usize; MAX_DIMS - 1]) -> f32 {
        rms_scale(x, self.0)
    }
    #[inline(always)]
    fn apply(&self, &s: &f32, v: f32, _: usize) -> f32 {
        v * s
    }
}

pub(super) unsafe fn rms_norm(n: &NodePtrs, p: &Params) {
    rms_norm_wide(n, p)
}

wide_fn!(
    /// RMS_NORM ([`Rms`]) compiled for the CPU's ISA path.
    fn rms_norm_wide(n: &NodePtrs, p: &Params) = rms_norm_rows
);

#[inline(always)]
fn rms_norm_rows(n: &NodePtrs, p: &Params) {
    per_row(n, p, Rms(n.params::<NormParams>().eps))
}

/// RMS_NORM followed by MUL, fused (see [`crate::cpu::fusion`]): `dst = (x·scale)·w`, where
/// `src[0]` is RMS_NORM's operand, `src[1]` the MUL's other operand (F32 rows as long as
/// `x`'s, broadcast over rows), `op_params` RMS_NORM's. The same f32 operations in the same
/// order as the two nodes, so the same bits, without writing the normalised rows out.
struct RmsMul<'a> {
    eps: f32,
    w: &'a TensorPtr,
}

impl RowNorm for RmsMul<'_> {
    /// The factor and the multiplier's row.
    type Stats = (f32, *const u8);
    #[inline(always)]
    fn stats(&self, x: &[f32], idx: [usize; MAX_DIMS - 1]) -> (f32, *const u8) {
        let w = self.w;
        let widx: [usize; MAX_DIMS - 1] = std::array::from_fn(|k| idx[k] % w.ne[k + 1] as usize);
        (rms_scale(x, self.eps), w.row(widx))
    }
    #[inline(always)]
    fn apply(&self, &(s, wrow): &(f32, *const u8), v: f32, i: usize) -> f32 {
        // SAFETY: w's rows are packed F32 rows of ne0 values (the fusion pass checked), the
        // row index is within w's shape and i < ne0.
        (v * s) * unsafe { ld(wrow, i) }
    }
}

/// RMS_NORM × MUL fused ([`RmsMul`]).
pub(crate) unsafe fn rms_norm_mul(n: &NodePtrs, p: &Params) {
    rms_norm_mul_wide(n, p)
}

wide_fn!(
    /// RMS_NORM × MUL ([`RmsMul`]) compiled for the CPU's ISA path.
    fn rms_norm_mul_wide(n: &NodePtrs, p: &Params) = rms_norm_mul_rows
);

#[inline(always)]
fn rms_norm_mul_rows(n: &NodePtrs, p: &Params) {
    let eps = n.params::<NormParams>().eps;
    per_row(n, p, RmsMul { eps, w: &n.src[1] })
}

/// L2_NORM, `x / max(‖x‖₂, eps)`, the sum in f64.
struct L2(f32);

impl RowNorm for L2 {
    type Stats = f32;
    #[inline(always)]
    fn stats(&self, x: &[f32], _: [usize; MAX_DIMS - 1]) -> f32 {
        1.0 / (sum_f64(x, |v| v * v).sqrt() as f32).max(self.0)
    }
    #[inline(always)]
    fn apply(&self, &s: &f32, v: f32, _: usize) -> f32 {
        v * s
    }
}

pub(super) unsafe fn l2_norm(n: &NodePtrs, p: &Params) {
    l2_norm_wide(n, p)
}

wide_fn!(
    /// L2_NORM ([`L2`]) compiled for the CPU's ISA path.
    fn l2_norm_wide(n: &NodePtrs, p: &Params) = l2_norm_rows
);

#[inline(always)]
fn l2_norm_rows(n: &NodePtrs, p: &Params) {
    per_row(n, p, L2(n.params::<NormParams>().eps))
}

/// GROUP_NORM on float tensors, no scratch (each group is read twice, then written).
pub(super) fn plan_group_norm(t: &Tensor) -> Result<Planned> {
    if !is_float(t.ty()) || !is_float(operand(t, 0)?.ty()) {
        return Err(unsupported(t));
    }
    Ok(Planned::new(group_norm, 0))
}

/// Each unit of work is one group of channels at one index of dimensions 3 and 4: its mean,
/// then its variance (both in f64), then `(x − mean)/√(var + eps)` for its elements. Only the
/// last pass writes, each element where it was read, so in-place results are safe.
unsafe fn group_norm(n: &NodePtrs, p: &Params) {
    let (d, a) = (&n.dst, &n.src[0]);
    let GroupNormParams { n_groups, eps } = n.params();
    let groups = n_groups.max(1) as usize;
    let [ne0, ne1, channels, ne3, ne4] = a.ne.map(|v| v as usize);
    let per_group = channels.div_ceil(groups).max(1);
    // Groups past the channels are empty: only the first `filled` have elements.
    let filled = channels.div_ceil(per_group);
    // Calls `f(dst row, a row)` for every row of channels `c0..c1` at (i3, i4).
    let rows = |c0: usize, c1: usize, i3: usize, i4: usize, f: &mut dyn FnMut(*mut u8, *mut u8)| {
        for c in c0..c1 {
            for i1 in 0..ne1 {
                let idx = [i1, c, i3, i4];
                f(d.row(idx), a.row(idx));
            }
        }
    };
    for u in p.range(filled * ne3 * ne4) {
        let (g, i3, i4) = (u % filled, u / filled % ne3, u / filled / ne3);
        let c0 = (g * per_group).min(channels);
        let c1 = (c0 + per_group).min(channels);
        let count = (ne0 * ne1 * (c1 - c0)) as f64;
        if count == 0.0 {
            continue;
        }
        let mut sum = 0f64;
        rows(c0, c1, i3, i4, &mut |_, arow| {
            // SAFETY: rows of a within its shape, elements below ne0.
            sum += (0..ne0)
                .map(|i| unsafe { a.get(arow, i) } as f64)
                .sum::<f64>();
        });
        let mean = sum / count;
        let mut sq = 0f64;
        rows(c0, c1, i3, i4, &mut |_, arow| {
            for i in 0..ne0 {
                // SAFETY: as above.
                let v = unsafe { a.get(arow, i) } as f64 - mean;
                sq += v * v;
            }
        });
        let scale = 1.0 / (sq / count + eps as f64).sqrt();
        rows(c0, c1, i3, i4, &mut |drow, arow| {
            for i in 0..ne0 {
                // SAFETY: dst has a's shape; each element is read before it is written, and
                // only this unit touches the group's elements.
                unsafe {
                    let v = a.get(arow, i) as f64;
                    d.set(drow, i, ((v - mean) * scale) as f32);
                }
            }
        });
    }
}
