//! Row normalisations: NORM and RMS_NORM.

use crate::context::Context;
use crate::error::{Error, Result};
use crate::ops::{f32_param, Op};
use crate::tensor::Tensor;

impl Context {
    /// `ggml_norm`: each row to zero mean and unit variance, `(x − mean) / √(var + eps)`.
    pub fn norm(&self, a: &Tensor, eps: f32) -> Result<Tensor> {
        check_eps("NORM", eps)?;
        self.map_op(a, Op::Norm, &[f32_param(eps)], false)
    }

    /// `ggml_rms_norm`: each row divided by its root mean square, `x / √(mean(x²) + eps)`.
    pub fn rms_norm(&self, a: &Tensor, eps: f32) -> Result<Tensor> {
        check_eps("RMS_NORM", eps)?;
        self.map_op(a, Op::RmsNorm, &[f32_param(eps)], false)
    }

    /// `ggml_rms_norm_inplace`.
    pub fn rms_norm_inplace(&self, a: &Tensor, eps: f32) -> Result<Tensor> {
        check_eps("RMS_NORM", eps)?;
        self.map_op(a, Op::RmsNorm, &[f32_param(eps)], true)
    }
}

fn check_eps(op: &str, eps: f32) -> Result<()> {
    if eps.is_finite() && eps >= 0.0 {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "{op}: eps = {eps}; it must be finite and >= 0"
        )))
    }
}
