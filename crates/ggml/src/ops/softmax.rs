//! SOFT_MAX and its extended form with mask, scale and ALiBi bias.

use crate::context::{Context, NewTensor};
use crate::error::{Error, Result};
use crate::ops::{f32_param, Op};
use crate::tensor::Tensor;
use crate::types::Type;

impl Context {
    /// `ggml_soft_max`: softmax of each row.
    pub fn soft_max(&self, a: &Tensor) -> Result<Tensor> {
        self.soft_max_ext(a, None, 1.0, 0.0)
    }

    /// `ggml_soft_max_ext`: `softmax(a · scale + slope · mask)` per row, where `mask` (F32 or
    /// F16, `ne0` equal to a's, at least as many rows, heads and batches broadcast) is optional
    /// and `slope` is the ALiBi slope of the head (dimension 2) when `max_bias > 0`, else 1.
    pub fn soft_max_ext(
        &self,
        a: &Tensor,
        mask: Option<&Tensor>,
        scale: f32,
        max_bias: f32,
    ) -> Result<Tensor> {
        let mut src = vec![a.clone()];
        if let Some(m) = mask {
            let (me, ae) = (m.ne(), a.ne());
            if !matches!(m.ty(), Type::F32 | Type::F16) {
                return Err(Error::invalid(format!(
                    "SOFT_MAX: mask {:?} has type {}; it must be f32 or f16",
                    m.name(),
                    m.ty()
                )));
            }
            if me[0] != ae[0]
                || me[1] < ae[1]
                || ae[2] % me[2] != 0
                || ae[3] % me[3] != 0
                || me[4] != 1
            {
                return Err(Error::invalid(format!(
                    "SOFT_MAX: mask shape {me:?} does not fit a's shape {ae:?} (ne0 equal, ne1 at \
                     least a's, ne2 and ne3 dividing a's)"
                )));
            }
            src.push(m.clone());
        }
        if max_bias < 0.0 || !max_bias.is_finite() || !scale.is_finite() {
            return Err(Error::invalid(format!(
                "SOFT_MAX: scale = {scale}, max_bias = {max_bias}; both must be finite, max_bias >= 0"
            )));
        }
        let ne = a.ne();
        self.new_tensor_impl(
            NewTensor::op(a.ty(), &ne, Op::SoftMax, src)
                .params(&[f32_param(scale), f32_param(max_bias)]),
        )
    }
}
