//! Row normalisations: NORM and RMS_NORM, with `eps` in op_params 0.

use bytemuck::{Pod, Zeroable};

use crate::context::Context;
use crate::error::Result;
use crate::ops::spec::{req, OpSpec, Shape, Slot, Srcs};
use crate::ops::Op;
use crate::tensor::Tensor;

/// The parameters of NORM, RMS_NORM (and L2_NORM): `eps` in slot 0.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct NormParams {
    /// Added to the variance (mean square) before the root; finite and >= 0.
    pub eps: f32,
}

/// NORM, RMS_NORM: a row normalisation of `a`, its type and shape.
pub(crate) struct Norm;

impl OpSpec for Norm {
    type Params = NormParams;
    const SLOTS: &'static [Slot] = &[req("a")];
    const INPLACE: bool = true;
    fn shape(src: &Srcs<'_>, p: &NormParams) -> Result<Shape> {
        // GGML asserts `eps >= 0` in the kernel; a NaN or infinite eps is refused too.
        if !(p.eps.is_finite() && p.eps >= 0.0) {
            return Err(src.err(format!("eps = {}; it must be finite and >= 0", p.eps)));
        }
        let a = src.get(0);
        Ok(Shape::New { ty: a.ty, ne: a.ne })
    }
}

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
        self.build::<Norm>(op, &[Some(a)], NormParams { eps }, inplace)
    }
}
