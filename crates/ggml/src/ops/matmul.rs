//! MUL_MAT: matrix products over rows of both operands.

use crate::context::{Context, NewTensor};
use crate::error::{Error, Result};
use crate::ops::Op;
use crate::tensor::Tensor;
use crate::types::Type;

impl Context {
    /// `ggml_mul_mat`: `result[i, j] = Σₖ a[k, i] · b[k, j]` for every batch, i.e. `C = B·Aᵀ`
    /// with rows of both along `ne0`. `a` (the weights, shape `[K, M, …]`) is broadcast over
    /// `b`'s batch dimensions (`[K, N, B2, B3]`); the result is F32 `[M, N, B2, B3]`.
    pub fn mul_mat(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        let (ae, be) = (a.ne(), b.ne());
        if ae[0] != be[0] {
            return Err(Error::invalid(format!(
                "MUL_MAT: a {:?} has rows of {} and b {:?} rows of {}; they must be equal",
                a.name(),
                ae[0],
                b.name(),
                be[0]
            )));
        }
        if be[2] % ae[2] != 0 || be[3] % ae[3] != 0 || ae[4] != 1 || be[4] != 1 {
            return Err(Error::invalid(format!(
                "MUL_MAT: a's batch dims {:?} must divide b's {:?} (4 dimensions at most)",
                &ae[2..],
                &be[2..]
            )));
        }
        if a.is_transposed() {
            return Err(Error::invalid(format!(
                "MUL_MAT: a {:?} is transposed; make it contiguous with cont() first",
                a.name()
            )));
        }
        let ne = [ae[1], be[1], be[2], be[3]];
        self.new_tensor_impl(NewTensor::op(
            Type::F32,
            &ne,
            Op::MulMat,
            vec![a.clone(), b.clone()],
        ))
    }
}
