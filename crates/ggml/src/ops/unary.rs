//! Element-wise unary ops: the UNARY family (`ggml_unary` and its named forms), and SQR, SQRT,
//! LOG, SIN, COS, SCALE.

use bytemuck::{Pod, Zeroable};

use crate::context::Context;
use crate::error::Result;
use crate::ops::spec::{req, NoParams, OpSpec, Shape, Slot, Srcs};
use crate::ops::Op;
use crate::tensor::Tensor;

/// The result of an element-wise op on `a` alone: `a`'s type and shape.
fn like_a(src: &Srcs<'_>) -> Result<Shape> {
    let a = src.get(0);
    Ok(Shape::New { ty: a.ty, ne: a.ne })
}

/// SQR, SQRT, LOG, SIN, COS: element-wise on F32, F16 or BF16, `a`'s shape.
pub(crate) struct Map;

impl OpSpec for Map {
    type Params = NoParams;
    const SLOTS: &'static [Slot] = &[req("a")];
    const INPLACE: bool = true;
    fn shape(src: &Srcs<'_>, _: &NoParams) -> Result<Shape> {
        like_a(src)
    }
}

/// SCALE's parameters: `x·s + b`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct ScaleParams {
    /// The factor.
    pub s: f32,
    /// The bias added after scaling.
    pub b: f32,
}

/// SCALE: `x·s + b` element-wise, `a`'s shape.
pub(crate) struct Scale;

impl OpSpec for Scale {
    type Params = ScaleParams;
    const SLOTS: &'static [Slot] = &[req("a")];
    const INPLACE: bool = true;
    fn shape(src: &Srcs<'_>, _: &ScaleParams) -> Result<Shape> {
        like_a(src)
    }
}

/// UNARY's parameters: the sub-op in slot 0; XIELU's constants in slots 1–4 (GGML stores
/// `beta + softplus(alpha_n)`, `softplus(alpha_p)`, `beta` and `eps`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct UnaryParams {
    /// The sub-op (`enum ggml_unary_op`).
    pub op: i32,
    /// XIELU: `beta + softplus(alpha_n)`.
    pub alpha_n: f32,
    /// XIELU: `softplus(alpha_p)`.
    pub alpha_p: f32,
    /// XIELU: `beta`.
    pub beta: f32,
    /// XIELU: `eps`.
    pub eps: f32,
}

/// UNARY: the sub-op element-wise, `a`'s type and shape.
pub(crate) struct Unary;

impl OpSpec for Unary {
    type Params = UnaryParams;
    const SLOTS: &'static [Slot] = &[req("a")];
    const INPLACE: bool = true;
    fn shape(src: &Srcs<'_>, p: &UnaryParams) -> Result<Shape> {
        if UnaryOp::from_i32(p.op).is_none() {
            return Err(src.err(format!(
                "op_params[0] = {} is not a unary op (0 to 21)",
                p.op
            )));
        }
        like_a(src)
    }
}

macro_rules! unary_ops {
    ($($(#[doc = $doc:literal])* $name:ident = $v:literal, $s:literal $(, $method:ident, $inplace:ident)?;)*) => {
        /// Sub-op of a UNARY node (`enum ggml_unary_op`), stored in `op_params[0]`.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum UnaryOp {
            $(
                #[doc = concat!("`GGML_UNARY_OP_", $s, "`")]
                $(#[doc = $doc])*
                $name = $v,
            )*
        }

        impl UnaryOp {
            /// GGML's name (`ggml_unary_op_name`).
            pub fn name(self) -> &'static str {
                match self { $(UnaryOp::$name => $s,)* }
            }

            /// The sub-op with GGML id `v`.
            pub fn from_i32(v: i32) -> Option<UnaryOp> {
                match v { $($v => Some(UnaryOp::$name),)* _ => None }
            }
        }

        impl Context {
            $($(
                #[doc = concat!("`ggml_", stringify!($method), "`: the ", $s,
                    " unary op, element-wise (see [`UnaryOp::", stringify!($name), "`]).")]
                pub fn $method(&self, a: &Tensor) -> Result<Tensor> {
                    self.unary(a, UnaryOp::$name)
                }

                #[doc = concat!("`ggml_", stringify!($inplace), "`: as [`Context::", stringify!($method),
                    "`], writing into `a`'s memory.")]
                pub fn $inplace(&self, a: &Tensor) -> Result<Tensor> {
                    self.unary_inplace(a, UnaryOp::$name)
                }
            )?)*
        }
    };
}

unary_ops! {
    Abs = 0, "ABS", abs, abs_inplace; Sgn = 1, "SGN", sgn, sgn_inplace;
    Neg = 2, "NEG", neg, neg_inplace; Step = 3, "STEP", step, step_inplace;
    Tanh = 4, "TANH", tanh, tanh_inplace; Elu = 5, "ELU", elu, elu_inplace;
    Relu = 6, "RELU", relu, relu_inplace; Sigmoid = 7, "SIGMOID", sigmoid, sigmoid_inplace;
    ///
    /// The CPU computes it as GGML's CPU does: for F32 and F16, read from a table of F16
    /// values (the tanh form at each F16 value, rounded to F16) at `x` rounded to F16, so
    /// within F16's rounding of the exact function; F32 gives 0 at or below −10 and `x` at
    /// or above 10. BF16 is computed directly.
    Gelu = 8, "GELU", gelu, gelu_inplace;
    ///
    /// The CPU computes it as GGML's CPU does: for F32 and F16, read from a table of F16
    /// values at `x` rounded to F16, with no clamps (so F32 inputs that F16 rounds to ±∞, from
    /// ±65520 out, give NaN below and +∞ above, as GGML's). BF16 is computed directly.
    GeluQuick = 9, "GELU_QUICK", gelu_quick, gelu_quick_inplace;
    Silu = 10, "SILU", silu, silu_inplace; Hardswish = 11, "HARDSWISH", hardswish, hardswish_inplace;
    Hardsigmoid = 12, "HARDSIGMOID", hardsigmoid, hardsigmoid_inplace;
    Exp = 13, "EXP", exp, exp_inplace; Expm1 = 14, "EXPM1", expm1, expm1_inplace;
    Softplus = 15, "SOFTPLUS", softplus, softplus_inplace;
    GeluErf = 16, "GELU_ERF", gelu_erf, gelu_erf_inplace; Xielu = 17, "XIELU";
    Floor = 18, "FLOOR", floor, floor_inplace; Ceil = 19, "CEIL", ceil, ceil_inplace;
    Round = 20, "ROUND", round, round_inplace; Trunc = 21, "TRUNC", trunc, trunc_inplace;
}

pub(crate) const SQRT_2_OVER_PI: f32 = 0.797_884_6;
pub(crate) const GELU_COEF_A: f32 = 0.044_715;
pub(crate) const GELU_QUICK_COEF: f32 = -1.702;

impl UnaryOp {
    /// The op applied to one value, in f32 (XIELU, which needs parameters, gives NaN; its
    /// kernel reads them from the node). GELU and GELU_QUICK are the exact functions here; the
    /// CPU kernels' F16 tables (see [`UnaryOp::Gelu`]) are within F16's rounding of them.
    #[inline(always)]
    pub fn eval(self, x: f32) -> f32 {
        match self {
            UnaryOp::Abs => x.abs(),
            UnaryOp::Sgn => {
                if x > 0.0 {
                    1.0
                } else if x < 0.0 {
                    -1.0
                } else {
                    0.0
                }
            }
            UnaryOp::Neg => -x,
            UnaryOp::Step => (x > 0.0) as u8 as f32,
            UnaryOp::Tanh => x.tanh(),
            UnaryOp::Elu => {
                if x > 0.0 {
                    x
                } else {
                    x.exp_m1()
                }
            }
            // GGML: `x > 0 ? x : 0` (so -0 and NaN give +0).
            UnaryOp::Relu => {
                if x > 0.0 {
                    x
                } else {
                    0.0
                }
            }
            UnaryOp::Sigmoid => 1.0 / (1.0 + (-x).exp()),
            // The exact tanh form (the CPU kernels read GGML's F16 table of it for F32 and
            // F16, see the variant's doc).
            UnaryOp::Gelu => {
                0.5 * x * (1.0 + (SQRT_2_OVER_PI * x * (1.0 + GELU_COEF_A * x * x)).tanh())
            }
            UnaryOp::GeluQuick => x * (1.0 / (1.0 + (GELU_QUICK_COEF * x).exp())),
            UnaryOp::Silu => x / (1.0 + (-x).exp()),
            UnaryOp::Hardswish => x * ((x + 3.0) / 6.0).clamp(0.0, 1.0),
            UnaryOp::Hardsigmoid => ((x + 3.0) / 6.0).clamp(0.0, 1.0),
            UnaryOp::Exp => x.exp(),
            // GGML computes expf(x) - 1; exp_m1 is the same function without the
            // cancellation near 0.
            UnaryOp::Expm1 => x.exp_m1(),
            // GGML: x above 20 (where ln(1 + eˣ) − x < 3e-9), else ln(1 + eˣ).
            UnaryOp::Softplus => {
                if x > 20.0 {
                    x
                } else {
                    x.exp().ln_1p()
                }
            }
            UnaryOp::GeluErf => {
                0.5 * x * (1.0 + erf(x as f64 * std::f64::consts::FRAC_1_SQRT_2) as f32)
            }
            UnaryOp::Xielu => f32::NAN,
            UnaryOp::Floor => x.floor(),
            UnaryOp::Ceil => x.ceil(),
            UnaryOp::Round => x.round(),
            UnaryOp::Trunc => x.trunc(),
        }
    }
}

/// The error function, to about 1e-15 (series near zero, continued fraction in the tails).
pub(crate) fn erf(x: f64) -> f64 {
    let a = x.abs();
    let r = if a < 2.5 {
        // Maclaurin series: erf(x) = 2/sqrt(pi) * sum (-1)^n x^(2n+1) / (n! (2n+1))
        let mut term = a;
        let mut sum = a;
        let x2 = a * a;
        let mut n = 0.0;
        while term.abs() > 1e-17 * sum.abs() {
            n += 1.0;
            term *= -x2 / n;
            sum += term / (2.0 * n + 1.0);
        }
        sum * std::f64::consts::FRAC_2_SQRT_PI
    } else {
        // erfc(x) = exp(-x^2)/sqrt(pi) * 1/(x + 1/2/(x + 1/(x + 3/2/(x + ...)))) (Lentz)
        let mut f = 0.0;
        for k in (1..60).rev() {
            f = (k as f64 / 2.0) / (a + f);
        }
        1.0 - (-a * a).exp() / std::f64::consts::PI.sqrt() / (a + f)
    };
    r.copysign(x)
}

impl Context {
    /// `ggml_unary`: applies `op` element-wise. XIELU needs parameters and is refused here
    /// (use [`Context::xielu`]).
    /// Inputs of any layout are accepted (GGML asks for contiguous rows; the CPU kernels
    /// follow arbitrary strides).
    pub fn unary(&self, a: &Tensor, op: UnaryOp) -> Result<Tensor> {
        self.unary_impl(a, op, false)
    }

    /// `ggml_unary_inplace`: the same, writing into `a`'s memory.
    pub fn unary_inplace(&self, a: &Tensor, op: UnaryOp) -> Result<Tensor> {
        self.unary_impl(a, op, true)
    }

    fn unary_impl(&self, a: &Tensor, op: UnaryOp, inplace: bool) -> Result<Tensor> {
        if op == UnaryOp::Xielu {
            return Err(crate::Error::invalid(
                "unary: XIELU takes parameters (alpha_n, alpha_p, beta, eps); build it with \
                 Context::xielu",
            ));
        }
        let p = UnaryParams {
            op: op as i32,
            ..UnaryParams::default()
        };
        self.build::<Unary>(Op::Unary, &[Some(a)], p, inplace)
    }

    /// `ggml_xielu`: the xIELU activation element-wise, `a`'s type and shape. With
    /// `αₙ = beta + softplus(alpha_n)` and `αₚ = softplus(alpha_p)` (stored so in op_params
    /// 1–2, `beta` and `eps` in 3–4): `αₚ·x² + beta·x` for `x > 0`, else
    /// `(expm1(min(x, eps)) − x)·αₙ + beta·x`.
    pub fn xielu(
        &self,
        a: &Tensor,
        alpha_n: f32,
        alpha_p: f32,
        beta: f32,
        eps: f32,
    ) -> Result<Tensor> {
        let p = UnaryParams {
            op: UnaryOp::Xielu as i32,
            alpha_n: beta + UnaryOp::Softplus.eval(alpha_n),
            alpha_p: UnaryOp::Softplus.eval(alpha_p),
            beta,
            eps,
        };
        self.build::<Unary>(Op::Unary, &[Some(a)], p, false)
    }

    /// `ggml_scale`: x·s.
    pub fn scale(&self, a: &Tensor, s: f32) -> Result<Tensor> {
        self.scale_bias(a, s, 0.0)
    }

    /// `ggml_scale_inplace`.
    pub fn scale_inplace(&self, a: &Tensor, s: f32) -> Result<Tensor> {
        self.scale_bias_inplace(a, s, 0.0)
    }

    /// `ggml_scale_bias`: x·s + b.
    pub fn scale_bias(&self, a: &Tensor, s: f32, b: f32) -> Result<Tensor> {
        self.build::<Scale>(Op::Scale, &[Some(a)], ScaleParams { s, b }, false)
    }

    /// `ggml_scale_bias_inplace`.
    pub fn scale_bias_inplace(&self, a: &Tensor, s: f32, b: f32) -> Result<Tensor> {
        self.build::<Scale>(Op::Scale, &[Some(a)], ScaleParams { s, b }, true)
    }
}

macro_rules! map_ops {
    ($($op:ident: $method:ident, $inplace:ident, $what:literal;)*) => {
        impl Context {
            $(
                #[doc = concat!("`ggml_", stringify!($method), "`: ", $what, " element-wise.")]
                pub fn $method(&self, a: &Tensor) -> Result<Tensor> {
                    self.build::<Map>(Op::$op, &[Some(a)], NoParams {}, false)
                }

                #[doc = concat!("`ggml_", stringify!($inplace), "`: as [`Context::", stringify!($method),
                    "`], writing into `a`'s memory.")]
                pub fn $inplace(&self, a: &Tensor) -> Result<Tensor> {
                    self.build::<Map>(Op::$op, &[Some(a)], NoParams {}, true)
                }
            )*
        }
    };
}

map_ops! {
    Sqr: sqr, sqr_inplace, "x²";
    Sqrt: sqrt, sqrt_inplace, "√x";
    Log: log, log_inplace, "ln x";
    Sin: sin, sin_inplace, "sin x";
    Cos: cos, cos_inplace, "cos x";
}
