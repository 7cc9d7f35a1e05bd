//! Element-wise binary ops with broadcasting: ADD, SUB, MUL, DIV (the second operand is tiled
//! over the first, whose shape the result has) and ADD1 (adds a one-element tensor).

use crate::context::Context;
use crate::error::Result;
use crate::ops::spec::{req, NoParams, OpSpec, Shape, Slot, Srcs};
use crate::ops::Op;
use crate::tensor::Tensor;

/// ADD, SUB, MUL, DIV: `b` must tile `a` (every dimension of `a` a multiple of `b`'s); the
/// result has `a`'s type and shape. Operands F32, F16 or BF16.
pub(crate) struct Binary;

impl OpSpec for Binary {
    type Params = NoParams;
    const SLOTS: &'static [Slot] = &[req("a"), req("b")];
    const INPLACE: bool = true;
    fn shape(src: &Srcs<'_>, _: &NoParams) -> Result<Shape> {
        let (a, b) = (src.get(0), src.get(1));
        if !b.can_repeat(a) {
            return Err(src.bad(
                1,
                format!(
                    "it cannot be broadcast to {}: every dimension of a must be a multiple of \
                     b's",
                    src.describe(0)
                ),
            ));
        }
        Ok(Shape::New { ty: a.ty, ne: a.ne })
    }
}

/// ADD1: `b` has exactly one element; the result has `a`'s type and shape.
pub(crate) struct Add1;

impl OpSpec for Add1 {
    type Params = NoParams;
    const SLOTS: &'static [Slot] = &[req("a"), req("b")];
    const INPLACE: bool = true;
    fn shape(src: &Srcs<'_>, _: &NoParams) -> Result<Shape> {
        if !src.get(1).is_scalar() {
            return Err(src.bad(1, "it must have exactly one element"));
        }
        let a = src.get(0);
        Ok(Shape::New { ty: a.ty, ne: a.ne })
    }
}

macro_rules! binary_ops {
    ($($op:ident: $method:ident, $inplace:ident, $what:literal;)*) => {
        impl Context {
            $(
                #[doc = concat!("`ggml_", stringify!($method), "`: ", $what,
                    " element-wise; `b` is broadcast (tiled) over `a`, whose shape and type the \
                    result has (every dimension of `a` a multiple of `b`'s).")]
                pub fn $method(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
                    self.build::<Binary>(Op::$op, &[Some(a), Some(b)], NoParams {}, false)
                }

                #[doc = concat!("`ggml_", stringify!($inplace), "`: as [`Context::", stringify!($method),
                    "`], writing into `a`'s memory.")]
                pub fn $inplace(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
                    self.build::<Binary>(Op::$op, &[Some(a), Some(b)], NoParams {}, true)
                }
            )*
        }
    };
}

binary_ops! {
    Add: add, add_inplace, "a + b";
    Sub: sub, sub_inplace, "a − b";
    Mul: mul, mul_inplace, "a × b";
    Div: div, div_inplace, "a ÷ b";
}

impl Context {
    /// `ggml_add1`: a + b, where `b` has exactly one element; `a`'s shape and type.
    pub fn add1(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        self.build::<Add1>(Op::Add1, &[Some(a), Some(b)], NoParams {}, false)
    }

    /// `ggml_add1_inplace`: as [`Context::add1`], writing into `a`'s memory.
    pub fn add1_inplace(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        self.build::<Add1>(Op::Add1, &[Some(a), Some(b)], NoParams {}, true)
    }
}
