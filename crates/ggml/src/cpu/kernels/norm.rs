//! Row normalisations: NORM (zero mean, unit variance) and RMS_NORM, with `eps` in op_params 0.
//! Statistics accumulate in f64, as GGML's `ggml_float`.

use super::{is_float, sum_f64, unsupported, KernelFn, NodePtrs, Params};
use super::{operand, Planned};
use crate::error::Result;
use crate::ops::NormParams;
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
