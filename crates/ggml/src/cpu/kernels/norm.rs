//! Normalisations: NORM (zero mean, unit variance), RMS_NORM and L2_NORM of rows, with `eps` in
//! op_params 0, and GROUP_NORM over groups of channels. Statistics accumulate in f64, as
//! GGML's `ggml_float`.

use super::vec::wide_fn;
use super::{is_float, ld, sum_f64, unsupported, KernelFn, NodePtrs, Params};
use super::{operand, Planned};
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

wide_fn!(
    /// [`per_row_body`] compiled for the CPU's ISA path.
    fn per_row<F: Fn(&mut [f32])>(n: &NodePtrs, p: &Params, f: F) = per_row_body
);

/// Applies `f` to every row of `a` (loaded as f32 into the thread's scratch, so in-place
/// results never overwrite what is still to be read) and stores the row into `dst`.
#[inline(always)]
fn per_row_body(n: &NodePtrs, p: &Params, f: impl Fn(&mut [f32])) {
    let (d, a) = (&n.dst, &n.src[0]);
    // SAFETY: the plan sized each thread's scratch for ne0 f32 values.
    let buf = unsafe { p.scratch_f32(a.ne[0] as usize) };
    for r in p.range(a.nrows()) {
        let idx = a.unravel_row(r);
        // SAFETY: rows of their tensors with ne0 elements; the scratch is private.
        unsafe { a.read_row(a.row(idx), buf) };
        f(buf);
        // SAFETY: as above.
        unsafe { d.write_row(d.row(idx), buf) };
    }
}

/// `(x − mean)/√(var + eps)`; the statistics accumulate in f64 (GGML's `ggml_float`).
pub(super) unsafe fn norm(n: &NodePtrs, p: &Params) {
    let eps = n.params::<NormParams>().eps as f64;
    per_row(n, p, |x| {
        let len = x.len() as f64;
        let mean = sum_f64(x, |v| v) / len;
        let var = sum_f64(x, |v| (v - mean) * (v - mean)) / len;
        let scale = 1.0 / (var + eps).sqrt();
        for v in x.iter_mut() {
            *v = ((*v as f64 - mean) * scale) as f32;
        }
    })
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

/// `x/√(mean(x²) + eps)`.
pub(super) unsafe fn rms_norm(n: &NodePtrs, p: &Params) {
    let eps = n.params::<NormParams>().eps;
    per_row(n, p, |x| {
        let scale = rms_scale(x, eps);
        for v in x.iter_mut() {
            *v *= scale;
        }
    })
}

/// RMS_NORM followed by MUL, fused (see [`crate::cpu::fusion`]): `dst = (x·scale)·w`, where
/// `src[0]` is RMS_NORM's operand, `src[1]` the MUL's other operand (F32 rows as long as
/// `x`'s, broadcast over rows), `op_params` RMS_NORM's. The same f32 operations in the same
/// order as the two nodes, so the same bits, without writing the normalised rows out.
pub(crate) unsafe fn rms_norm_mul(n: &NodePtrs, p: &Params) {
    rms_norm_mul_wide(n, p)
}

wide_fn!(
    /// [`rms_norm_mul_rows`] compiled for the CPU's ISA path.
    fn rms_norm_mul_wide(n: &NodePtrs, p: &Params) = rms_norm_mul_rows
);

#[inline(always)]
fn rms_norm_mul_rows(n: &NodePtrs, p: &Params) {
    let eps = n.params::<NormParams>().eps;
    let (d, a, w) = (&n.dst, &n.src[0], &n.src[1]);
    let ne0 = a.ne[0] as usize;
    {
        // SAFETY: the plan sized each thread's scratch for ne0 f32 values.
        let buf = unsafe { p.scratch_f32(ne0) };
        for r in p.range(a.nrows()) {
            let idx = a.unravel_row(r);
            let widx: [usize; MAX_DIMS - 1] =
                std::array::from_fn(|k| idx[k] % w.ne[k + 1] as usize);
            // SAFETY: rows of their tensors with ne0 elements (w's rows too: the fusion pass
            // checked); buf is private scratch, so dst may be any operand's memory.
            unsafe {
                a.read_row(a.row(idx), buf);
                let scale = rms_scale(buf, eps);
                let wrow = w.row(widx);
                for (i, v) in buf.iter_mut().enumerate() {
                    *v = (*v * scale) * ld(wrow, i);
                }
                d.write_row(d.row(idx), buf);
            }
        }
    }
}

/// `x / max(‖x‖₂, eps)`.
pub(super) unsafe fn l2_norm(n: &NodePtrs, p: &Params) {
    let eps = n.params::<NormParams>().eps;
    per_row(n, p, |x| {
        let scale = 1.0 / (sum_f64(x, |v| v * v).sqrt() as f32).max(eps);
        for v in x.iter_mut() {
            *v *= scale;
        }
    })
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
