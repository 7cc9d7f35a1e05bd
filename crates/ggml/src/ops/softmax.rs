//! SOFT_MAX and its extended form with mask, scale and ALiBi bias.

use bytemuck::{Pod, Zeroable};

use crate::context::Context;
use crate::error::Result;
use crate::ops::spec::{opt, req, Meta, OpSpec, Shape, Slot, Srcs};
use crate::ops::Op;
use crate::tensor::{Tensor, MAX_DIMS};
use crate::types::Type;

/// SOFT_MAX's parameters.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct SoftMaxParams {
    /// Factor applied to `a` before the mask is added.
    pub scale: f32,
    /// ALiBi's maximum bias; 0 disables ALiBi.
    pub max_bias: f32,
}

/// SOFT_MAX: `softmax(a·scale + slope·mask)` per row (with an extra logit per head when
/// `sinks` is given), `a`'s type and shape.
pub(crate) struct SoftMax;

impl OpSpec for SoftMax {
    type Params = SoftMaxParams;
    const SLOTS: &'static [Slot] = &[req("a"), opt("mask"), opt("sinks")];
    const INPLACE: bool = true;
    fn shape(src: &Srcs<'_>, p: &SoftMaxParams) -> Result<Shape> {
        let a = src.get(0);
        if let Some(m) = src.opt(1) {
            check_mask(src, a, m)?;
        }
        if src.opt(2).is_some() {
            check_sinks(src, 2, a.ne[2], "a.ne2")?;
        }
        check_scale_and_bias(src, p.scale, p.max_bias, src.opt(1).is_some())?;
        Ok(Shape::New { ty: a.ty, ne: a.ne })
    }
}

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

    /// `ggml_soft_max_add_sinks`: the SOFT_MAX node `a` with attention sinks: `sinks` (F32,
    /// one value per head, `[a.ne2]` of `a`'s operand) joins each row's softmax as one more
    /// logit that takes no output, `y_i = e^(x_i − m) / (Σ_j e^(x_j − m) + e^(sinks[h] − m))`
    /// with `m` the maximum of the row and the sink, `h` the row's head (dimension 2).
    ///
    /// GGML sets the operand on `a` itself; here nodes do not change once built, so this
    /// returns a new node (in place when `a` was) with `a`'s operands and parameters plus the
    /// sinks, to use instead of `a`. `None` gives the node without sinks. `Err` when `a` is
    /// not a SOFT_MAX node, already has sinks, or `sinks` does not fit.
    pub fn soft_max_add_sinks(&self, a: &Tensor, sinks: Option<&Tensor>) -> Result<Tensor> {
        self.with_operand::<SoftMax>(a, Op::SoftMax, 2, sinks)
    }

    fn soft_max_impl(
        &self,
        a: &Tensor,
        mask: Option<&Tensor>,
        scale: f32,
        max_bias: f32,
        inplace: bool,
    ) -> Result<Tensor> {
        let p = SoftMaxParams { scale, max_bias };
        self.build::<SoftMax>(Op::SoftMax, &[Some(a), mask], p, inplace)
    }
}

fn check_mask(src: &Srcs<'_>, a: &Meta, m: &Meta) -> Result<()> {
    src.want_type(1, &[Type::F32, Type::F16])?;
    let (me, ae) = (m.ne, a.ne);
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
        return Err(src.bad(
            1,
            format!(
                "it does not fit a's shape {ae:?} (ne0 equal, ne1 at least a's, ne2..ne4 \
                 dividing a's)"
            ),
        ));
    }
    Ok(())
}

/// `Err` unless the sinks in slot `i` are an F32 vector of `n_head` values (`what` names where
/// the head count comes from).
pub(crate) fn check_sinks(src: &Srcs<'_>, i: usize, n_head: i64, what: &str) -> Result<()> {
    src.want_type(i, &[Type::F32])?;
    let s = src.get(i);
    if s.ne[0] != n_head || s.nrows() != 1 {
        return Err(src.bad(
            i,
            format!("it must be a vector of {what} = {n_head} values (one per head)"),
        ));
    }
    Ok(())
}

/// `Err` unless `scale` is finite and `max_bias` finite and >= 0, and a positive `max_bias`
/// comes with a mask (the ALiBi bias scales the mask).
pub(crate) fn check_scale_and_bias(
    src: &Srcs<'_>,
    scale: f32,
    max_bias: f32,
    has_mask: bool,
) -> Result<()> {
    if !scale.is_finite() {
        return Err(src.err(format!("scale = {scale}; it must be finite")));
    }
    if !(max_bias.is_finite() && max_bias >= 0.0) {
        return Err(src.err(format!("max_bias = {max_bias}; it must be finite and >= 0")));
    }
    if max_bias > 0.0 && !has_mask {
        return Err(src.err(format!(
            "max_bias = {max_bias} needs a mask (the ALiBi bias scales the mask)"
        )));
    }
    Ok(())
}
