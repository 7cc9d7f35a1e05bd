//! GLU: gated linear units, `act(x)·g`, with `x` and `g` either the two halves of each row of
//! one operand (fused form, optionally swapped) or two operands of the same shape (split form).

use bytemuck::{Pod, Zeroable};

use crate::context::Context;
use crate::error::Result;
use crate::ops::spec::{opt, req, OpSpec, Shape, Slot, Srcs};
use crate::ops::Op;
use crate::tensor::Tensor;

/// The gate activation of a GLU node (`enum ggml_glu_op`), stored in `op_params[0]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum GluOp {
    /// `GGML_GLU_OP_REGLU`: `relu(x)·g` (`x > 0 ? x·g : 0`).
    Reglu = 0,
    /// `GGML_GLU_OP_GEGLU`: `gelu(x)·g` (tanh approximation). The CPU computes it as GGML's
    /// CPU does: for F32 and F16, `gelu` read from a table of F16 values at `x` rounded to
    /// F16 (so within F16's rounding of the exact function); F32 gives 0 at or below −10
    /// whatever `g`, and `x·g` at or above 10.
    Geglu = 1,
    /// `GGML_GLU_OP_SWIGLU`: `silu(x)·g`.
    Swiglu = 2,
    /// `GGML_GLU_OP_SWIGLU_OAI`: with `x' = min(x, limit)`, `y' = clamp(g, −limit, limit)`:
    /// `x'·σ(alpha·x')·(y' + 1)`.
    SwigluOai = 3,
    /// `GGML_GLU_OP_GEGLU_ERF`: `gelu_erf(x)·g` (the exact erf form).
    GegluErf = 4,
    /// `GGML_GLU_OP_GEGLU_QUICK`: `gelu_quick(x)·g` (`x·σ(1.702·x)`); for F32 and F16 the CPU
    /// reads `gelu_quick` from GGML's table of F16 values, as for GELU_QUICK.
    GegluQuick = 5,
    /// `GGML_GLU_OP_SWIGLU_CLAMP`: with `x' = min(x, limit)`, `g' = clamp(g, −limit, limit)`:
    /// `silu(x')·g'`.
    SwigluClamp = 6,
}

impl GluOp {
    /// Every GLU op in GGML's order.
    pub const ALL: [GluOp; 7] = [
        GluOp::Reglu,
        GluOp::Geglu,
        GluOp::Swiglu,
        GluOp::SwigluOai,
        GluOp::GegluErf,
        GluOp::GegluQuick,
        GluOp::SwigluClamp,
    ];

    /// The op with GGML id `v`.
    pub fn from_i32(v: i32) -> Option<GluOp> {
        usize::try_from(v)
            .ok()
            .and_then(|i| GluOp::ALL.get(i).copied())
    }

    /// GGML's name (`ggml_glu_op_name`), e.g. `"SWIGLU"`.
    pub fn name(self) -> &'static str {
        match self {
            GluOp::Reglu => "REGLU",
            GluOp::Geglu => "GEGLU",
            GluOp::Swiglu => "SWIGLU",
            GluOp::SwigluOai => "SWIGLU_OAI",
            GluOp::GegluErf => "GEGLU_ERF",
            GluOp::GegluQuick => "GEGLU_QUICK",
            GluOp::SwigluClamp => "SWIGLU_CLAMP",
        }
    }
}

/// GLU's parameters: the op, whether the halves are swapped, and SWIGLU_OAI's and
/// SWIGLU_CLAMP's constants.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct GluParams {
    /// The gate activation ([`GluOp`] as its GGML value).
    pub op: i32,
    /// Fused form only: 1 when `x` is the second half of each row and `g` the first.
    pub swapped: i32,
    /// SWIGLU_OAI: the factor inside the sigmoid.
    pub alpha: f32,
    /// SWIGLU_OAI and SWIGLU_CLAMP: the clamp limit.
    pub limit: f32,
}

/// GLU: `a` (and `b` in the split form) F32, F16 or BF16; the fused form gives
/// `[a.ne0 / 2, a.ne1, …]` (an odd row's last element is unused, as in GGML), the split form
/// `a`'s shape (`b` of `a`'s type and shape). The result has `a`'s type.
pub(crate) struct Glu;

impl OpSpec for Glu {
    type Params = GluParams;
    const SLOTS: &'static [Slot] = &[req("a"), opt("b")];
    fn shape(src: &Srcs<'_>, p: &GluParams) -> Result<Shape> {
        if GluOp::from_i32(p.op).is_none() {
            return Err(src.err(format!("op_params[0] = {} is not a GLU op (0 to 6)", p.op)));
        }
        if !matches!(p.swapped, 0 | 1) {
            return Err(src.err(format!(
                "op_params[1] (swapped) = {}; it must be 0 or 1",
                p.swapped
            )));
        }
        src.want_float(0)?;
        let a = src.get(0);
        match src.opt(1) {
            Some(b) => {
                if b.ty != a.ty {
                    return Err(src.bad(1, "it must have the type of a"));
                }
                src.want_same_shape(0, 1)?;
                Ok(Shape::New { ty: a.ty, ne: a.ne })
            }
            None => {
                let mut ne = a.ne;
                ne[0] /= 2;
                Ok(Shape::New { ty: a.ty, ne })
            }
        }
    }
}

impl Context {
    /// `ggml_glu`: the fused form, `act(x)·g` with `x` the first half of each row of `a` and
    /// `g` the second (the other way round with `swapped`). Result `[a.ne0 / 2, a.ne1, …]`
    /// of `a`'s type (F32, F16 or BF16). SWIGLU_OAI made here has `alpha = limit = 0`; see
    /// [`Context::swiglu_oai`].
    pub fn glu(&self, a: &Tensor, op: GluOp, swapped: bool) -> Result<Tensor> {
        self.glu_impl(a, None, op, swapped, 0.0, 0.0)
    }

    /// `ggml_glu_split`: `act(a)·b` element-wise, `a` and `b` of the same type (F32, F16 or
    /// BF16) and shape, which the result has.
    pub fn glu_split(&self, a: &Tensor, b: &Tensor, op: GluOp) -> Result<Tensor> {
        self.glu_impl(a, Some(b), op, false, 0.0, 0.0)
    }

    /// `ggml_swiglu_oai`: SWIGLU_OAI with its constants, split (`b` given) or fused (`b`
    /// `None`: halves of `a`'s rows). With `x' = min(x, limit)` and
    /// `g' = clamp(g, −limit, limit)`: `x'·σ(alpha·x')·(g' + 1)`.
    pub fn swiglu_oai(
        &self,
        a: &Tensor,
        b: Option<&Tensor>,
        alpha: f32,
        limit: f32,
    ) -> Result<Tensor> {
        self.glu_impl(a, b, GluOp::SwigluOai, false, alpha, limit)
    }

    /// `ggml_swiglu_clamp`: SWIGLU_CLAMP of `a` and `b` (split form, same type and shape):
    /// with `x' = min(a, limit)` and `g' = clamp(b, −limit, limit)`: `silu(x')·g'`.
    pub fn swiglu_clamp(&self, a: &Tensor, b: &Tensor, limit: f32) -> Result<Tensor> {
        self.glu_impl(a, Some(b), GluOp::SwigluClamp, false, 0.0, limit)
    }

    fn glu_impl(
        &self,
        a: &Tensor,
        b: Option<&Tensor>,
        op: GluOp,
        swapped: bool,
        alpha: f32,
        limit: f32,
    ) -> Result<Tensor> {
        let p = GluParams {
            op: op as i32,
            swapped: swapped as i32,
            alpha,
            limit,
        };
        self.build::<Glu>(Op::Glu, &[Some(a), b], p, false)
    }
}

macro_rules! glu_forms {
    ($($op:ident: $fused:ident, $swapped:ident, $split:ident;)*) => {
        impl Context {
            $(
                #[doc = concat!("`ggml_", stringify!($fused), "`: [`Context::glu`] with `",
                    stringify!($op), "`, `x` the first half of each row and `g` the second.")]
                pub fn $fused(&self, a: &Tensor) -> Result<Tensor> {
                    self.glu(a, GluOp::$op, false)
                }

                #[doc = concat!("`ggml_", stringify!($swapped), "`: [`Context::glu`] with `",
                    stringify!($op), "`, `x` the second half of each row and `g` the first.")]
                pub fn $swapped(&self, a: &Tensor) -> Result<Tensor> {
                    self.glu(a, GluOp::$op, true)
                }

                #[doc = concat!("`ggml_", stringify!($split), "`: [`Context::glu_split`] with `",
                    stringify!($op), "`: `act(a)·b`, `a`'s shape.")]
                pub fn $split(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
                    self.glu_split(a, b, GluOp::$op)
                }
            )*
        }
    };
}

glu_forms! {
    Reglu: reglu, reglu_swapped, reglu_split;
    Geglu: geglu, geglu_swapped, geglu_split;
    Swiglu: swiglu, swiglu_swapped, swiglu_split;
    GegluErf: geglu_erf, geglu_erf_swapped, geglu_erf_split;
    GegluQuick: geglu_quick, geglu_quick_swapped, geglu_quick_split;
}
