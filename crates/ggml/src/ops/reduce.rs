//! Reductions: SUM, SUM_ROWS, MEAN, ARGMAX.

use crate::context::Context;
use crate::error::Result;
use crate::ops::spec::{req, NoParams, OpSpec, Shape, Slot, Srcs};
use crate::ops::Op;
use crate::tensor::Tensor;
use crate::types::Type;

const A: &[Slot] = &[req("a")];

/// SUM: the sum of all elements, one element of `a`'s type.
pub(crate) struct Sum;

impl OpSpec for Sum {
    type Params = NoParams;
    const SLOTS: &'static [Slot] = A;
    fn shape(src: &Srcs<'_>, _: &NoParams) -> Result<Shape> {
        Ok(Shape::New {
            ty: src.get(0).ty,
            ne: [1; 5],
        })
    }
}

/// `a`'s shape with one element per row.
fn one_per_row(src: &Srcs<'_>, ty: Type) -> Result<Shape> {
    let mut ne = src.get(0).ne;
    ne[0] = 1;
    Ok(Shape::New { ty, ne })
}

/// SUM_ROWS: the sum of each row, `[1, ne1, ne2, ne3, ne4]` of `a`'s type.
pub(crate) struct SumRows;

impl OpSpec for SumRows {
    type Params = NoParams;
    const SLOTS: &'static [Slot] = A;
    fn shape(src: &Srcs<'_>, _: &NoParams) -> Result<Shape> {
        one_per_row(src, src.get(0).ty)
    }
}

/// MEAN: the mean of each row, `[1, ne1, ne2, ne3, ne4]`, F32.
pub(crate) struct Mean;

impl OpSpec for Mean {
    type Params = NoParams;
    const SLOTS: &'static [Slot] = A;
    fn shape(src: &Srcs<'_>, _: &NoParams) -> Result<Shape> {
        one_per_row(src, Type::F32)
    }
}

/// ARGMAX: the index of the largest element of each row of a matrix, I32 `[ne1]`.
pub(crate) struct Argmax;

impl OpSpec for Argmax {
    type Params = NoParams;
    const SLOTS: &'static [Slot] = A;
    fn shape(src: &Srcs<'_>, _: &NoParams) -> Result<Shape> {
        let a = src.get(0);
        if a.ne[2..].iter().any(|&n| n != 1) {
            return Err(src.bad(0, "it must be a matrix"));
        }
        if a.ne[0] > i32::MAX as i64 {
            return Err(src.bad(0, "its rows are too long for i32 indices"));
        }
        Ok(Shape::New {
            ty: Type::I32,
            ne: [a.ne[1], 1, 1, 1, 1],
        })
    }
}

impl Context {
    /// `ggml_sum`: the sum of all elements, as a one-element tensor of `a`'s type. Any
    /// layout is summed element by element; GGML's CPU assumes packed rows (its check is
    /// compiled out of release builds), so on a transposed or permuted `a` it sums other
    /// memory and its result differs from this one.
    pub fn sum(&self, a: &Tensor) -> Result<Tensor> {
        self.build::<Sum>(Op::Sum, &[Some(a)], NoParams {}, false)
    }

    /// `ggml_sum_rows`: the sum of each row; shape `[1, ne1, ne2, ne3, ne4]`.
    pub fn sum_rows(&self, a: &Tensor) -> Result<Tensor> {
        self.build::<SumRows>(Op::SumRows, &[Some(a)], NoParams {}, false)
    }

    /// `ggml_mean`: the mean of each row; shape `[1, ne1, ne2, ne3, ne4]`, F32.
    pub fn mean(&self, a: &Tensor) -> Result<Tensor> {
        self.build::<Mean>(Op::Mean, &[Some(a)], NoParams {}, false)
    }

    /// `ggml_argmax`: the index of the largest element of each row of a matrix (I32, `[ne1]`;
    /// the last one on ties, as GGML's CPU kernel).
    pub fn argmax(&self, a: &Tensor) -> Result<Tensor> {
        self.build::<Argmax>(Op::Argmax, &[Some(a)], NoParams {}, false)
    }
}
