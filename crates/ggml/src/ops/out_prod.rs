//! OUT_PROD: sums of outer products of the rows of two matrices, batched with broadcasting.

use crate::context::Context;
use crate::error::Result;
use crate::ops::matmul::{want_batch_broadcast, want_weights};
use crate::ops::spec::{req, NoParams, OpSpec, Shape, Slot, Srcs};
use crate::ops::Op;
use crate::tensor::Tensor;
use crate::types::Type;

/// OUT_PROD: `a` `[M, K, A2, A3, A4]` (F32, F16, BF16 or quantized, not transposed) and `b`
/// `[N, K, B2, B3, B4]` (F32, F16 or BF16, each `Bd` a multiple of `Ad`) give F32
/// `[M, N, B2, B3, B4]`.
pub(crate) struct OutProd;

impl OpSpec for OutProd {
    type Params = NoParams;
    const SLOTS: &'static [Slot] = &[req("a"), req("b")];
    fn shape(src: &Srcs<'_>, _: &NoParams) -> Result<Shape> {
        let (a, b) = (src.get(0), src.get(1));
        want_weights(src, 0)?;
        src.want_float(1)?;
        if a.ne[1] != b.ne[1] {
            return Err(src.bad(
                1,
                format!("its ne1 = {} must be a's ne1 = {}", b.ne[1], a.ne[1]),
            ));
        }
        want_batch_broadcast(src, 0, 1)?;
        Ok(Shape::New {
            ty: Type::F32,
            ne: [a.ne[0], b.ne[0], b.ne[2], b.ne[3], b.ne[4]],
        })
    }
}

impl Context {
    /// `ggml_out_prod`: `result[i, j, …] = Σₖ a[i, k, …] · b[j, k, …]` (`A·Bᵀ` with both
    /// stored by columns: the sum over `k` of the outer products of row `k` of `a` and row
    /// `k` of `b`). `a` `[M, K, A2, A3, A4]` (F32, F16, BF16 or quantized, not transposed) is
    /// broadcast over `b`'s batch dimensions (`[N, K, B2, B3, B4]`, F32, F16 or BF16, each
    /// `Bd` a multiple of `Ad`); the result is F32 `[M, N, B2, B3, B4]`.
    pub fn out_prod(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        self.build::<OutProd>(Op::OutProd, &[Some(a), Some(b)], NoParams {}, false)
    }
}
