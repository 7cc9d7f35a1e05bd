//! Normalisations: NORM, RMS_NORM and L2_NORM of rows (`eps` in op_params 0), and GROUP_NORM
//! over groups of channels (dimension 2).

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

/// NORM, RMS_NORM, L2_NORM: a row normalisation of `a`, its type and shape.
pub(crate) struct Norm;

impl OpSpec for Norm {
    type Params = NormParams;
    const SLOTS: &'static [Slot] = &[req("a")];
    const INPLACE: bool = true;
    fn shape(src: &Srcs<'_>, p: &NormParams) -> Result<Shape> {
        // GGML asserts `eps >= 0` in the kernel; a NaN or infinite eps is refused too.
        check_eps(src, p.eps)?;
        let a = src.get(0);
        Ok(Shape::New { ty: a.ty, ne: a.ne })
    }
}

/// `Err` unless `eps` is finite and >= 0 (GGML asserts `eps >= 0` in its kernels).
pub(super) fn check_eps(src: &Srcs<'_>, eps: f32) -> Result<()> {
    if eps.is_finite() && eps >= 0.0 {
        return Ok(());
    }
    Err(src.err(format!("eps = {eps}; it must be finite and >= 0")))
}

/// GROUP_NORM's parameters.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct GroupNormParams {
    /// Number of groups the channels (dimension 2) are split into; at least 1.
    pub n_groups: i32,
    /// Added to the variance before the root; finite and >= 0.
    pub eps: f32,
}

/// GROUP_NORM: zero mean and unit variance over each group of `⌈ne2 / n_groups⌉` channels
/// (all of dimensions 0 and 1 of those channels), separately for every index of dimensions 3
/// and 4; `a`'s type and shape.
pub(crate) struct GroupNorm;

impl OpSpec for GroupNorm {
    type Params = GroupNormParams;
    const SLOTS: &'static [Slot] = &[req("a")];
    const INPLACE: bool = true;
    fn shape(src: &Srcs<'_>, p: &GroupNormParams) -> Result<Shape> {
        if p.n_groups < 1 {
            return Err(src.err(format!("n_groups = {}; it must be at least 1", p.n_groups)));
        }
        check_eps(src, p.eps)?;
        let a = src.get(0);
        Ok(Shape::New { ty: a.ty, ne: a.ne })
    }
}

impl Context {
    /// `ggml_l2_norm`: each row divided by its Euclidean norm, `x / max(‖x‖₂, eps)`; `a`'s
    /// type and shape.
    pub fn l2_norm(&self, a: &Tensor, eps: f32) -> Result<Tensor> {
        self.build::<Norm>(Op::L2Norm, &[Some(a)], NormParams { eps }, false)
    }

    /// `ggml_l2_norm_inplace`: as [`Context::l2_norm`], writing into `a`'s memory.
    pub fn l2_norm_inplace(&self, a: &Tensor, eps: f32) -> Result<Tensor> {
        self.build::<Norm>(Op::L2Norm, &[Some(a)], NormParams { eps }, true)
    }

    /// `ggml_group_norm`: the channels (dimension 2) are split into groups of
    /// `⌈ne2 / n_groups⌉` (the last may be smaller; groups past the channels are empty), and
    /// every element of a group — all of dimensions 0 and 1 of its channels, for one index
    /// of dimensions 3 and 4 — becomes `(x − mean)/√(var + eps)` with the group's mean and
    /// variance. `a`'s type and shape; `n_groups >= 1`.
    pub fn group_norm(&self, a: &Tensor, n_groups: i32, eps: f32) -> Result<Tensor> {
        let p = GroupNormParams { n_groups, eps };
        self.build::<GroupNorm>(Op::GroupNorm, &[Some(a)], p, false)
    }

    /// `ggml_group_norm_inplace`: as [`Context::group_norm`], writing into `a`'s memory.
    pub fn group_norm_inplace(&self, a: &Tensor, n_groups: i32, eps: f32) -> Result<Tensor> {
        let p = GroupNormParams { n_groups, eps };
        self.build::<GroupNorm>(Op::GroupNorm, &[Some(a)], p, true)
    }

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
