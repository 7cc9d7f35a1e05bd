//! Reductions: SUM, SUM_ROWS, MEAN, ARGMAX.

use crate::context::{Context, NewTensor};
use crate::error::{Error, Result};
use crate::ops::Op;
use crate::tensor::Tensor;
use crate::types::Type;

impl Context {
    /// `ggml_sum`: the sum of all elements, as a one-element tensor of `a`'s type.
    pub fn sum(&self, a: &Tensor) -> Result<Tensor> {
        self.new_tensor_impl(NewTensor::op(a.ty(), &[1], Op::Sum, vec![a.clone()]))
    }

    /// `ggml_sum_rows`: the sum of each row; shape `[1, ne1, ne2, ne3, ne4]`.
    pub fn sum_rows(&self, a: &Tensor) -> Result<Tensor> {
        let mut ne = a.ne();
        ne[0] = 1;
        self.new_tensor_impl(NewTensor::op(a.ty(), &ne, Op::SumRows, vec![a.clone()]))
    }

    /// `ggml_mean`: the mean of each row; shape `[1, ne1, ne2, ne3, ne4]`, F32.
    pub fn mean(&self, a: &Tensor) -> Result<Tensor> {
        let mut ne = a.ne();
        ne[0] = 1;
        self.new_tensor_impl(NewTensor::op(Type::F32, &ne, Op::Mean, vec![a.clone()]))
    }

    /// `ggml_argmax`: the index of the largest element of each row of a matrix (I32, `[ne1]`;
    /// the last one on ties, as GGML's CPU kernel).
    pub fn argmax(&self, a: &Tensor) -> Result<Tensor> {
        if !a.is_matrix() {
            return Err(Error::invalid(format!(
                "ARGMAX: a {:?} has shape {:?}; it must be a matrix",
                a.name(),
                a.ne()
            )));
        }
        if a.ne()[0] > i32::MAX as i64 {
            return Err(Error::invalid(format!(
                "ARGMAX: rows of {} elements; indices must fit an i32",
                a.ne()[0]
            )));
        }
        self.new_tensor_impl(NewTensor::op(
            Type::I32,
            &[a.ne()[1]],
            Op::Argmax,
            vec![a.clone()],
        ))
    }
}
