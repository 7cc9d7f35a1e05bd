//! Row normalisations: NORM (zero mean, unit variance) and RMS_NORM, with `eps` in op_params 0.
//! Statistics accumulate in f64, as GGML's `ggml_float`.

use super::{is_float, unsupported, KernelFn, NodePtrs, Params};
use crate::error::Result;
use crate::ops::Op;
use crate::tensor::Tensor;

pub(super) fn select(t: &Tensor) -> Result<KernelFn> {
    if !is_float(t.ty()) || !is_float(t.srcs()[0].ty()) {
        return Err(unsupported(t));
    }
    Ok(match t.op() {
        Op::Norm => norm,
        Op::RmsNorm => rms_norm,
        _ => return Err(unsupported(t)),
    })
}

fn norm(n: &NodePtrs, p: &Params) {
    let eps = n.param_f32(0) as f64;
    let (d, a) = (&n.dst, &n.src[0]);
    let ne0 = a.ne[0] as usize;
    for r in p.range(a.nrows()) {
        let idx = a.unravel_row(r);
        let (arow, drow) = (a.row(idx), d.row(idx));
        // SAFETY: rows of their tensors, indices below ne[0]; dst may alias a, and every
        // element is read (twice) before it is written.
        unsafe {
            let mean = (0..ne0).map(|i| a.get(arow, i) as f64).sum::<f64>() / ne0 as f64;
            let var = (0..ne0)
                .map(|i| (a.get(arow, i) as f64 - mean).powi(2))
                .sum::<f64>()
                / ne0 as f64;
            let scale = 1.0 / (var + eps).sqrt();
            for i in 0..ne0 {
                d.set(drow, i, ((a.get(arow, i) as f64 - mean) * scale) as f32);
            }
        }
    }
}

fn rms_norm(n: &NodePtrs, p: &Params) {
    let eps = n.param_f32(0) as f64;
    let (d, a) = (&n.dst, &n.src[0]);
    let ne0 = a.ne[0] as usize;
    for r in p.range(a.nrows()) {
        let idx = a.unravel_row(r);
        let (arow, drow) = (a.row(idx), d.row(idx));
        // SAFETY: rows of their tensors, indices below ne[0]; each element is read before it
        // is written.
        unsafe {
            let ms = (0..ne0)
                .map(|i| (a.get(arow, i) as f64).powi(2))
                .sum::<f64>()
                / ne0 as f64;
            let scale = (1.0 / (ms + eps).sqrt()) as f32;
            for i in 0..ne0 {
                d.set(drow, i, a.get(arow, i) * scale);
            }
        }
    }
}
