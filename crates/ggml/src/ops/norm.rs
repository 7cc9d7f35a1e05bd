//! Row normalisations: NORM and RMS_NORM, with `eps` in op_params 0.

use crate::context::Context;
use crate::error::{Error, Result};
use crate::ops::{f32_param, Op};
use crate::tensor::Tensor;

impl Context {
    /// `ggml_norm`: each row to zero mean and unit variance, `(x − mean) / √(var + eps)`.
    pub fn norm(&self, a: &Tensor, eps: f32) -> Result<Tensor> {
        self.norm_impl(Op::Norm, a, eps, false)
    }

    /// `ggml_norm_inplace`: as [`Context::norm`], writing into `a`'s memory.
    pub fn norm_inplace(&self, a: &Tensor, eps: f32) -> Result<Tensor> {
        self.norm_impl(Op::Norm, a, eps, true)
    }

    /// `ggml_rms_norm`: each row divided by its root mean square, `x / √(mean(x²) + eps)`
    /// (GGML adds `eps` to the mean square, inside the root).
    pub fn rms_norm(&self, a: &Tensor, eps: f32) -> Result<Tensor> {
        self.norm_impl(Op::RmsNorm, a, eps, false)
    }

    /// `ggml_rms_norm_inplace`: as [`Context::rms_norm`], writing into `a`'s memory.
    pub fn rms_norm_inplace(&self, a: &Tensor, eps: f32) -> Result<Tensor> {
        self.norm_impl(Op::RmsNorm, a, eps, true)
    }

    fn norm_impl(&self, op: Op, a: &Tensor, eps: f32, inplace: bool) -> Result<Tensor> {
        // GGML asserts `eps >= 0` in the kernel; a NaN or infinite eps is refused too.
        if !(eps.is_finite() && eps >= 0.0) {
            return Err(Error::invalid(format!(
                "{}: eps = {eps}; it must be finite and >= 0",
                op.name()
            )));
        }
        self.map_op(a, op, &[f32_param(eps)], inplace)
    }
}
