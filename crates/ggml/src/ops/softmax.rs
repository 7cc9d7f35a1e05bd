//! SOFT_MAX and its extended form with mask, scale and ALiBi bias.

use crate::context::Context;
use crate::error::{Error, Result};
use crate::ops::{f32_param, Op};
use crate::tensor::{Tensor, MAX_DIMS};
use crate::types::Type;

impl Context {
    /// `ggml_soft_max`: softmax of each row.
    pub fn soft_max(&self, a: &Tensor) -> Result<Tensor> {
        self.soft_max_impl(a, None, 1.0, 0.0, false)
    }

    /// `ggml_soft_max_inplace`: as [`Context::soft_max`], writing into `a`'s memory.
    pub fn soft_max_inplace(&self, a: &Tensor) -> Result<Tensor> {
        self.soft_max_impl(a, None, 1.0, 0.0, true)
    }

    /// `ggml_soft_max_ext`: `softmax(a · scale + slope · mask)` per row.
    ///
    /// `mask` (F32 or F16) is optional: its `ne0` equals a's, it has at least as many rows
    /// (row `i` of a uses row `i` of the mask), and its dimensions 2, 3 and 4 divide a's (it is
    /// broadcast over heads and batches). `slope` is 1, or with `max_bias > 0` the ALiBi slope
    /// of the head (a's dimension 2) — which needs a mask, as in GGML.
    pub fn soft_max_ext(
        &self,
        a: &Tensor,
        mask: Option<&Tensor>,
        scale: f32,
        max_bias: f32,
    ) -> Result<Tensor> {
        self.soft_max_impl(a, mask, scale, max_bias, false)
    }

    /// `ggml_soft_max_ext_inplace`: as [`Context::soft_max_ext`], writing into `a`'s memory.
    pub fn soft_max_ext_inplace(
        &self,
        a: &Tensor,
        mask: Option<&Tensor>,
        scale: f32,
        max_bias: f32,
    ) -> Result<Tensor> {
        self.soft_max_impl(a, mask, scale, max_bias, true)
    }

    fn soft_max_impl(
        &self,
        a: &Tensor,
        mask: Option<&Tensor>,
        scale: f32,
        max_bias: f32,
        inplace: bool,
    ) -> Result<Tensor> {
        let mut src = vec![a.clone()];
        if let Some(m) = mask {
            check_mask(a, m)?;
            src.push(m.clone());
        }
        if !scale.is_finite() {
            return Err(Error::invalid(format!(
                "SOFT_MAX: scale = {scale}; it must be finite"
            )));
        }
        if !(max_bias.is_finite() && max_bias >= 0.0) {
            return Err(Error::invalid(format!(
                "SOFT_MAX: max_bias = {max_bias}; it must be finite and >= 0"
            )));
        }
        if max_bias > 0.0 && mask.is_none() {
            return Err(Error::invalid(format!(
                "SOFT_MAX: max_bias = {max_bias} needs a mask (the ALiBi bias scales the mask)"
            )));
        }
        self.result_like(
            a,
            Op::SoftMax,
            &[f32_param(scale), f32_param(max_bias)],
            src,
            inplace,
        )
    }
}

fn check_mask(a: &Tensor, m: &Tensor) -> Result<()> {
    if !matches!(m.ty(), Type::F32 | Type::F16) {
        return Err(Error::invalid(format!(
            "SOFT_MAX: mask {:?} has type {}; it must be f32 or f16",
            m.name(),
            m.ty()
        )));
    }
    let (me, ae) = (m.ne(), a.ne());
    let fits = me[0] == ae[0]
        && me[1] >= ae[1]
        && (2..MAX_DIMS).all(|d| {
            if me[d] == 0 {
                ae[d] == 0
            } else {
                ae[d] % me[d] == 0
            }
        });
    if !fits {
        return Err(Error::invalid(format!(
            "SOFT_MAX: mask shape {me:?} does not fit a's shape {ae:?} (ne0 equal, ne1 at least \
             a's, ne2..ne4 dividing a's)"
        )));
    }
    Ok(())
}
