//! Normalisations: NORM (zero mean, unit variance), RMS_NORM and L2_NORM of rows, with `eps` in
//! op_params 0, and GROUP_NORM over groups of channels. Statistics accumulate in f64, as
//! GGML's `ggml_float`.

use super::{is_float, sum_f64, unsupported, KernelFn, NodePtrs, Params};
use super::{operand, Planned};
use crate::error::Result;
use crate::ops::{GroupNormParams, NormParams};
use crate::tensor::Tensor;

/// `kernel` on float rows, with one f32 row of scratch per thread.
pub(super) fn plan(t: &Tensor, kernel: KernelFn) -> Result<Planned> {
    if !is_float(t.ty()) || !is_float(operand(t, 0)?.ty()) {
        return Err(unsupported(t));
    }
    Ok(Planned::new(kernel, t.ne()[0] as usize * 4))
}

/// Applies `f` to every row of `a` (loaded as f32 into the thread's scratch, so in-place
/// results never overwrite what is still to be read) and stores the row into `dst`.
fn per_row(n: &NodePtrs, p: &Params, f: impl Fn(&mut [f32])) {
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

/// `x/√(mean(x²) + eps)` (GGML adds eps to the mean square, inside the root).
pub(super) unsafe fn rms_norm(n: &NodePtrs, p: &Params) {
    let eps = n.params::<NormParams>().eps as f64;
    per_row(n, p, |x| {
        let ms = sum_f64(x, |v| v * v) / x.len() as f64;
        let scale = (1.0 / (ms + eps).sqrt()) as f32;
        for v in x.iter_mut() {
            *v *= scale;
        }
    })
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
