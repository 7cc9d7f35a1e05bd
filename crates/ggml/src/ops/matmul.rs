//! MUL_MAT: matrix products over rows of both operands.

use crate::context::{Context, NewTensor};
use crate::error::{Error, Result};
use crate::ops::Op;
use crate::tensor::{Tensor, MAX_DIMS};
use crate::types::Type;

impl Context {
    /// `ggml_mul_mat`: `result[i, j, …] = Σₖ a[k, i, …] · b[k, j, …]`, i.e. `C = B·Aᵀ` with
    /// rows of both along `ne0`. `a` (the weights, `[K, M, A2, A3, A4]`) is broadcast over
    /// `b`'s batch dimensions (`[K, N, B2, B3, B4]`, each `Bd` a multiple of `Ad`): batch
    /// `(j2, j3, j4)` of `b` uses batch `(j2 / (B2/A2), …)` of `a`. The result is F32
    /// `[M, N, B2, B3, B4]`. `a` must not be transposed.
    pub fn mul_mat(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        let (ae, be) = (a.ne(), b.ne());
        if ae[0] != be[0] {
            return Err(Error::invalid(format!(
                "MUL_MAT: a {:?} has rows of K = {} and b {:?} rows of K = {}; they must be equal",
                a.name(),
                ae[0],
                b.name(),
                be[0]
            )));
        }
        // `ggml_can_mul_mat`: b's batch dimensions are whole multiples of a's (a zero-sized
        // batch dimension of a only fits an empty one of b).
        let broadcasts = (2..MAX_DIMS).all(|d| {
            if ae[d] == 0 {
                be[d] == 0
            } else {
                be[d] % ae[d] == 0
            }
        });
        if !broadcasts {
            return Err(Error::invalid(format!(
                "MUL_MAT: a's batch dimensions {:?} must divide b's {:?}",
                &ae[2..],
                &be[2..]
            )));
        }
        // GGML refuses a transposed `a` (nb0 > nb1); an empty `a` (K = 0 gives nb1 = 0) has no
        // layout to speak of and is accepted (the product is zeros).
        if a.is_transposed() && a.nelements() > 0 {
            return Err(Error::invalid(format!(
                "MUL_MAT: a {:?} is transposed (nb = {:?}); make it contiguous with cont() first",
                a.name(),
                a.nb()
            )));
        }
        let ne = [ae[1], be[1], be[2], be[3], be[4]];
        self.new_tensor_impl(NewTensor::op(
            Type::F32,
            &ne,
            Op::MulMat,
            vec![a.clone(), b.clone()],
        ))
    }
}
