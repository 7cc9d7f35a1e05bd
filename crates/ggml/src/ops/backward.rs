//! The backward (gradient) and optimizer ops GGML's CPU computes for training: SILU_BACK,
//! RMS_NORM_BACK, SOFT_MAX_BACK, GET_ROWS_BACK and CROSS_ENTROPY_LOSS_BACK (ROPE_BACK is
//! ROPE's description, in `rope.rs`), OPT_STEP_ADAMW and OPT_STEP_SGD. Operand order and
//! parameters are GGML's: for the gradients, slot 0 the gradient of the forward op's result,
//! then the forward op's operands (or, for SOFT_MAX_BACK, its result); for the optimizer
//! steps, the parameter tensor updated in place, its gradient, the moments, the
//! hyper-parameters.

use crate::context::Context;
use crate::error::{Error, Result};
use crate::ops::norm::check_eps;
use crate::ops::spec::{req, NoParams, OpSpec, Shape, Slot, Srcs};
use crate::ops::{NormParams, Op, SoftMaxParams};
use crate::tensor::{Tensor, MAX_DIMS};
use crate::types::Type;

/// `Err` unless operands `0..n` are F32 with packed rows and of operand 0's shape; else the
/// result those backward ops and steps give: operand 0's type and shape.
fn f32_like_a(src: &Srcs<'_>, n: usize) -> Result<Shape> {
    for i in 0..n {
        src.want_type(i, &[Type::F32])?;
        if !src.get(i).rows_packed() {
            return Err(src.bad(i, "its rows must be packed (nb0 = element size)"));
        }
        src.want_same_shape(0, i)?;
    }
    let a = src.get(0);
    Ok(Shape::New { ty: a.ty, ne: a.ne })
}

/// SILU_BACK: the gradient `dy` (slot 0) through SiLU at `x` (slot 1): `dy · s · (1 + x ·
/// (1 − s))` with `s = σ(x)`; F32, one shape, packed rows.
pub(crate) struct SiluBack;

impl OpSpec for SiluBack {
    type Params = NoParams;
    const SLOTS: &'static [Slot] = &[req("a"), req("b")];
    fn shape(src: &Srcs<'_>, _: &NoParams) -> Result<Shape> {
        f32_like_a(src, 2)
    }
}

/// RMS_NORM_BACK: the gradient `dz` (slot 0) through RMS_NORM at `x` (slot 1), per row
/// `(dz + x · (−Σx·dz / (Σx² + n·eps))) / √(Σx²/n + eps)`; F32, one shape, packed rows.
pub(crate) struct RmsNormBack;

impl OpSpec for RmsNormBack {
    type Params = NormParams;
    const SLOTS: &'static [Slot] = &[req("a"), req("b")];
    fn shape(src: &Srcs<'_>, p: &NormParams) -> Result<Shape> {
        check_eps(src, p.eps)?;
        f32_like_a(src, 2)
    }
}

/// SOFT_MAX_BACK: the gradient `dy` (slot 0) through SOFT_MAX whose result was `y` (slot 1),
/// per row `scale · (dy − y·dy) · y`; F32, one shape, packed rows; `max_bias` must be 0 (GGML's
/// CPU has no ALiBi gradient).
pub(crate) struct SoftMaxBack;

impl OpSpec for SoftMaxBack {
    type Params = SoftMaxParams;
    const SLOTS: &'static [Slot] = &[req("a"), req("b")];
    const INPLACE: bool = true;
    fn shape(src: &Srcs<'_>, p: &SoftMaxParams) -> Result<Shape> {
        if !p.scale.is_finite() || p.max_bias != 0.0 {
            return Err(src.err(format!(
                "scale = {}, max_bias = {}; scale must be finite and max_bias 0",
                p.scale, p.max_bias
            )));
        }
        f32_like_a(src, 2)
    }
}

/// GET_ROWS_BACK: the gradient `a` (slot 0, `[n0, R]`, F32 or F16, packed rows) of a
/// GET_ROWS by the I32 row indices `b` (slot 1, a vector of at most `R`): an F32 matrix of the
/// requested shape `[n0, N]`, zero but for row `b[i]`, which gains row `i` of `a` for every
/// `i` (in order).
pub(crate) struct GetRowsBack;

impl OpSpec for GetRowsBack {
    type Params = NoParams;
    const SLOTS: &'static [Slot] = &[req("a"), req("b")];
    fn shape(src: &Srcs<'_>, _: &NoParams) -> Result<Shape> {
        let (a, b) = (src.get(0), src.get(1));
        src.want_type(0, &[Type::F32, Type::F16])?;
        src.want_type(1, &[Type::I32])?;
        if a.ne[2..].iter().any(|&n| n != 1) || !a.rows_packed() {
            return Err(src.bad(0, "it must be a matrix with packed rows"));
        }
        if b.ne[1..].iter().any(|&n| n != 1) || b.ne[0] > a.ne[1] {
            return Err(src.bad(
                1,
                format!("it must be a vector of at most a.ne1 = {} indices", a.ne[1]),
            ));
        }
        let ne = src.requested()?;
        if ne[0] != a.ne[0] || ne[2..].iter().any(|&n| n != 1) {
            return Err(src.err(format!(
                "the result's shape {ne:?} must be a matrix of rows of a.ne0 = {}",
                a.ne[0]
            )));
        }
        Ok(Shape::New { ty: Type::F32, ne })
    }
}

/// CROSS_ENTROPY_LOSS_BACK: the gradient of CROSS_ENTROPY_LOSS with respect to its logits
/// `b` (slot 1) for targets `c` (slot 2), given the loss's gradient `a` (slot 0, one F32
/// element): per row `(softmax(b) − c) · a / rows`; F32, `b` and `c` one shape, packed rows.
pub(crate) struct CrossEntropyLossBack;

impl OpSpec for CrossEntropyLossBack {
    type Params = NoParams;
    const SLOTS: &'static [Slot] = &[req("a"), req("b"), req("c")];
    fn shape(src: &Srcs<'_>, _: &NoParams) -> Result<Shape> {
        src.want_type(0, &[Type::F32])?;
        if !src.get(0).is_scalar() {
            return Err(src.bad(0, "it must be one element"));
        }
        for i in 1..3 {
            src.want_type(i, &[Type::F32])?;
            if !src.get(i).rows_packed() {
                return Err(src.bad(i, "its rows must be packed (nb0 = element size)"));
            }
        }
        src.want_same_shape(1, 2)?;
        let b = src.get(1);
        Ok(Shape::New { ty: b.ty, ne: b.ne })
    }
}

/// An optimizer step's operands: [`f32_like_a`] for `0..n`, and operand `n` an F32 vector of
/// `count` packed hyper-parameters.
fn step_operands(src: &Srcs<'_>, n: usize, count: i64) -> Result<Shape> {
    src.want_type(n, &[Type::F32])?;
    let h = src.get(n);
    if h.nelements() != count || !h.is_contiguous() {
        return Err(src.bad(n, format!("it must hold {count} packed values")));
    }
    f32_like_a(src, n)
}

/// OPT_STEP_ADAMW: one AdamW step of the F32 parameters `a` (slot 0, updated in place: the
/// result is a view of it) with gradient `grad`, moments `m` and `v` (updated too) and the
/// seven hyper-parameters `[alpha, beta1, beta2, eps, wd, beta1h, beta2h]` (F32).
pub(crate) struct OptStepAdamw;

impl OpSpec for OptStepAdamw {
    type Params = NoParams;
    const SLOTS: &'static [Slot] = &[
        req("a"),
        req("grad"),
        req("m"),
        req("v"),
        req("adamw_params"),
    ];
    const INPLACE: bool = true;
    fn shape(src: &Srcs<'_>, _: &NoParams) -> Result<Shape> {
        step_operands(src, 4, 7)
    }
}

/// OPT_STEP_SGD: one SGD step of the F32 parameters `a` (slot 0, updated in place: the
/// result is a view of it) with gradient `grad` and the hyper-parameters `[alpha, wd]` (F32).
pub(crate) struct OptStepSgd;

impl OpSpec for OptStepSgd {
    type Params = NoParams;
    const SLOTS: &'static [Slot] = &[req("a"), req("grad"), req("params")];
    const INPLACE: bool = true;
    fn shape(src: &Srcs<'_>, _: &NoParams) -> Result<Shape> {
        step_operands(src, 2, 2)
    }
}

/// `Err` unless `a` is a trainable parameter (`set_param`), as GGML's optimizer steps assert.
fn want_param(op: Op, a: &Tensor) -> Result<()> {
    if a.flags() & crate::tensor::flags::PARAM != 0 {
        return Ok(());
    }
    Err(Error::invalid(format!(
        "{}: a {:?} is not a trainable parameter (set_param)",
        op.name(),
        a.name()
    )))
}

impl Context {
    /// `ggml_silu_back`: the gradient of SiLU: `a` the gradient of its result (`dy`), `b` its
    /// input (`x`), as GGML's CPU reads them; `dy · σ(x) · (1 + x · (1 − σ(x)))`, F32.
    pub fn silu_back(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        self.build::<SiluBack>(Op::SiluBack, &[Some(a), Some(b)], NoParams {}, false)
    }

    /// `ggml_rms_norm_back`: the gradient of [`Context::rms_norm`] with `eps`: `a` the
    /// gradient of its result, `b` its input; F32, one shape.
    pub fn rms_norm_back(&self, a: &Tensor, b: &Tensor, eps: f32) -> Result<Tensor> {
        let p = NormParams { eps };
        self.build::<RmsNormBack>(Op::RmsNormBack, &[Some(a), Some(b)], p, false)
    }

    /// `ggml_soft_max_ext_back`: the gradient of a soft max with `scale` (no mask, `max_bias`
    /// 0): `a` the gradient of its result, `b` its result; per row `scale · (a − b·a) · b`.
    pub fn soft_max_ext_back(
        &self,
        a: &Tensor,
        b: &Tensor,
        scale: f32,
        max_bias: f32,
    ) -> Result<Tensor> {
        let p = SoftMaxParams { scale, max_bias };
        self.build::<SoftMaxBack>(Op::SoftMaxBack, &[Some(a), Some(b)], p, false)
    }

    /// `ggml_soft_max_ext_back_inplace`: as [`Context::soft_max_ext_back`], writing into
    /// `a`'s memory.
    pub fn soft_max_ext_back_inplace(
        &self,
        a: &Tensor,
        b: &Tensor,
        scale: f32,
        max_bias: f32,
    ) -> Result<Tensor> {
        let p = SoftMaxParams { scale, max_bias };
        self.build::<SoftMaxBack>(Op::SoftMaxBack, &[Some(a), Some(b)], p, true)
    }

    /// `ggml_get_rows_back`: the gradient of [`Context::get_rows`]: `a` (`[n0, R]`) the
    /// gradient of its result, `b` the I32 row indices, `c` the forward input (only its shape
    /// `[n0, N]` is used): an F32 `[n0, N]` whose row `r` is the sum of the rows `i` of `a`
    /// with `b[i] = r`. An index outside `0..N` makes the computation fail with an error
    /// naming the node and the index (GGML asserts).
    pub fn get_rows_back(&self, a: &Tensor, b: &Tensor, c: &Tensor) -> Result<Tensor> {
        let mut ne = [1i64; MAX_DIMS];
        ne[..2].copy_from_slice(&c.ne()[..2]);
        if c.ne()[2..].iter().any(|&n| n != 1) {
            return Err(Error::invalid(format!(
                "GET_ROWS_BACK: c {:?} ({} {:?}) must be a matrix",
                c.name(),
                c.ty(),
                c.ne()
            )));
        }
        self.build_shaped::<GetRowsBack>(Op::GetRowsBack, &[Some(a), Some(b)], NoParams {}, ne)
    }

    /// `ggml_cross_entropy_loss_back`: the gradient of [`Context::cross_entropy_loss`] with
    /// respect to its logits `b`, for targets `c`, given the loss's gradient `a` (one F32
    /// element): per row `(softmax(b) − c) · a / rows`.
    pub fn cross_entropy_loss_back(&self, a: &Tensor, b: &Tensor, c: &Tensor) -> Result<Tensor> {
        let srcs = [Some(a), Some(b), Some(c)];
        self.build::<CrossEntropyLossBack>(Op::CrossEntropyLossBack, &srcs, NoParams {}, false)
    }

    /// `ggml_opt_step_adamw`: one AdamW step of the trainable parameter `a` (F32), in place;
    /// `m` and `v` are updated too. `adamw_params` holds `[alpha, beta1, beta2, eps, wd,
    /// beta1h, beta2h]` (beta1h = 1/(1 − beta1^t), beta2h likewise): `m ← m·beta1 +
    /// g·(1 − beta1)`, `v ← v·beta2 + g²·(1 − beta2)`, `a ← a·(1 − alpha·wd) − alpha·m·beta1h
    /// / (√(v·beta2h) + eps)`. `Err` if `a` is not marked with `set_param`.
    pub fn opt_step_adamw(
        &self,
        a: &Tensor,
        grad: &Tensor,
        m: &Tensor,
        v: &Tensor,
        adamw_params: &Tensor,
    ) -> Result<Tensor> {
        want_param(Op::OptStepAdamw, a)?;
        let srcs = [Some(a), Some(grad), Some(m), Some(v), Some(adamw_params)];
        self.build::<OptStepAdamw>(Op::OptStepAdamw, &srcs, NoParams {}, true)
    }

    /// `ggml_opt_step_sgd`: one SGD step of the trainable parameter `a` (F32), in place, with
    /// `params` = `[alpha, wd]`: `a ← a·(1 − alpha·wd) − alpha·grad`. `Err` if `a` is not
    /// marked with `set_param`.
    pub fn opt_step_sgd(&self, a: &Tensor, grad: &Tensor, params: &Tensor) -> Result<Tensor> {
        want_param(Op::OptStepSgd, a)?;
        let srcs = [Some(a), Some(grad), Some(params)];
        self.build::<OptStepSgd>(Op::OptStepSgd, &srcs, NoParams {}, true)
    }
}
