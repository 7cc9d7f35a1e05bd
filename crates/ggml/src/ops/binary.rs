//! Element-wise binary ops with broadcasting: ADD, SUB, MUL, DIV (the second operand is tiled
//! over the first, whose shape the result has) and ADD1 (adds a one-element tensor).

use crate::context::Context;
use crate::error::{Error, Result};
use crate::ops::Op;
use crate::tensor::Tensor;

macro_rules! binary_ops {
    ($($op:ident: $method:ident, $inplace:ident, $what:literal;)*) => {
        impl Context {
            $(
                #[doc = concat!("`ggml_", stringify!($method), "`: ", $what,
                    " element-wise; `b` is broadcast (tiled) over `a`, whose shape and type the result has.")]
                pub fn $method(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
                    self.binary(Op::$op, a, b, false)
                }

                #[doc = concat!("`ggml_", stringify!($inplace), "`: as [`Context::", stringify!($method),
                    "`], writing into `a`'s memory.")]
                pub fn $inplace(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
                    self.binary(Op::$op, a, b, true)
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
    fn binary(&self, op: Op, a: &Tensor, b: &Tensor, inplace: bool) -> Result<Tensor> {
        if !b.can_repeat(a) {
            return Err(Error::invalid(format!(
                "{}: b {:?} of shape {:?} cannot be broadcast to a {:?} of shape {:?}: every \
                 dimension of a must be a multiple of b's",
                op.name(),
                b.name(),
                b.ne(),
                a.name(),
                a.ne()
            )));
        }
        self.result_like(a, op, &[], vec![a.clone(), b.clone()], inplace)
    }

    fn add1_impl(&self, a: &Tensor, b: &Tensor, inplace: bool) -> Result<Tensor> {
        if !b.is_scalar() {
            return Err(Error::invalid(format!(
                "ADD1: b {:?} has shape {:?}; it must have exactly one element",
                b.name(),
                b.ne()
            )));
        }
        self.result_like(a, Op::Add1, &[], vec![a.clone(), b.clone()], inplace)
    }

    /// `ggml_add1`: a + b, where `b` has exactly one element.
    pub fn add1(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        self.add1_impl(a, b, false)
    }

    /// `ggml_add1_inplace`: as [`Context::add1`], writing into `a`'s memory.
    pub fn add1_inplace(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        self.add1_impl(a, b, true)
    }
}
