//! Row gathering and tiling: GET_ROWS, REPEAT, CONCAT.

use crate::context::{Context, NewTensor};
use crate::error::{Error, Result};
use crate::ops::Op;
use crate::tensor::{Tensor, MAX_DIMS};
use crate::types::Type;

impl Context {
    /// `ggml_get_rows`: rows of `a` picked by the I32 indices `b`: the result is
    /// `[a.ne0, b.ne0, b.ne1, b.ne2]` with `result[:, i, j, k] = a[:, b[i, j, k], j, k]`; F32
    /// (I32 when `a` is I32). An index outside `0..a.ne1` gives a row of zeros on the CPU
    /// (GGML asserts there).
    pub fn get_rows(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        let (ae, be) = (a.ne(), b.ne());
        if b.ty() != Type::I32 {
            return Err(Error::invalid(format!(
                "GET_ROWS: indices {:?} have type {}; they must be i32",
                b.name(),
                b.ty()
            )));
        }
        // GGML: a.ne2 == b.ne1, a.ne3 == b.ne2, b.ne3 == 1 (and, with five dimensions here,
        // neither has a fifth).
        if ae[2] != be[1] || ae[3] != be[2] || be[3] != 1 || ae[4] != 1 || be[4] != 1 {
            return Err(Error::invalid(format!(
                "GET_ROWS: indices {:?} of shape {be:?} do not fit a {:?} of shape {ae:?}: a.ne2 \
                 must equal b.ne1, a.ne3 must equal b.ne2, b.ne3 and both ne4 must be 1",
                b.name(),
                a.name()
            )));
        }
        let ty = if a.ty() == Type::I32 {
            Type::I32
        } else {
            Type::F32
        };
        let ne = [ae[0], be[0], be[1], be[2]];
        self.new_tensor_impl(NewTensor::op(
            ty,
            &ne,
            Op::GetRows,
            vec![a.clone(), b.clone()],
        ))
    }

    /// `ggml_repeat`: `a` tiled to `b`'s shape (every dimension of `b` a multiple of `a`'s).
    pub fn repeat(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        if !a.can_repeat(b) {
            return Err(Error::invalid(format!(
                "REPEAT: a's shape {:?} does not tile b's shape {:?}",
                a.ne(),
                b.ne()
            )));
        }
        let ne = b.ne();
        self.new_tensor_impl(NewTensor::op(a.ty(), &ne, Op::Repeat, vec![a.clone()]))
    }

    /// `ggml_concat`: `a` followed by `b` along dimension `dim`; all other dimensions equal.
    pub fn concat(&self, a: &Tensor, b: &Tensor, dim: usize) -> Result<Tensor> {
        if dim >= MAX_DIMS {
            return Err(Error::invalid(format!(
                "CONCAT: dim = {dim}; it must be below {MAX_DIMS}"
            )));
        }
        if a.ty() != b.ty() {
            return Err(Error::invalid(format!(
                "CONCAT: a is {} and b is {}; types must match",
                a.ty(),
                b.ty()
            )));
        }
        let (ae, be) = (a.ne(), b.ne());
        if let Some(d) = (0..MAX_DIMS).find(|&d| d != dim && ae[d] != be[d]) {
            return Err(Error::invalid(format!(
                "CONCAT along {dim}: ne[{d}] differs ({} vs {})",
                ae[d], be[d]
            )));
        }
        let mut ne = ae;
        ne[dim] += be[dim];
        self.new_tensor_impl(
            NewTensor::op(a.ty(), &ne, Op::Concat, vec![a.clone(), b.clone()])
                .params(&[dim as i32]),
        )
    }
}
