//! MUL_MAT_ID: the mixture-of-experts product, each token's rows multiplied by the expert
//! matrices its ids select.

use crate::context::Context;
use crate::error::Result;
use crate::ops::matmul::want_weights;
use crate::ops::spec::{req, NoParams, OpSpec, Shape, Slot, Srcs};
use crate::ops::Op;
use crate::tensor::Tensor;
use crate::types::Type;

/// MUL_MAT_ID: `as` `[K, M, n_expert]` (F32, F16, BF16 or quantized, not transposed), `b`
/// `[K, n_b, n_tokens]` (F32, F16 or BF16, `n_b` dividing `n_used`), `ids` I32
/// `[n_used, n_tokens]`; an F32 result `[M, n_used, n_tokens]`.
pub(crate) struct MulMatId;

impl OpSpec for MulMatId {
    type Params = NoParams;
    const SLOTS: &'static [Slot] = &[req("as"), req("b"), req("ids")];
    fn shape(src: &Srcs<'_>, _: &NoParams) -> Result<Shape> {
        let (w, b, ids) = (src.get(0), src.get(1), src.get(2));
        want_weights(src, 0)?;
        if w.ne[3] != 1 || w.ne[4] != 1 {
            return Err(src.bad(0, "it must be 3-D: one [K, M] matrix per expert"));
        }
        src.want_float(1)?;
        if b.ne[3] != 1 || b.ne[4] != 1 {
            return Err(src.bad(1, "it must be 3-D: [K, n_b, n_tokens]"));
        }
        src.want_type(2, &[Type::I32])?;
        if ids.ne[2..].iter().any(|&n| n != 1) {
            return Err(src.bad(2, "it must be 2-D: [n_used, n_tokens]"));
        }
        if ids.ne[1] != b.ne[2] {
            return Err(src.bad(
                2,
                format!(
                    "its ne1 (tokens) must be b's ne2 = {}: one expert list per token",
                    b.ne[2]
                ),
            ));
        }
        if w.ne[0] != b.ne[0] {
            return Err(src.bad(
                1,
                format!("its rows have K = {}; as's K = {}", b.ne[0], w.ne[0]),
            ));
        }
        let divides = if b.ne[1] == 0 {
            ids.ne[0] == 0
        } else {
            ids.ne[0] % b.ne[1] == 0
        };
        if !divides {
            return Err(src.bad(
                1,
                format!("its ne1 must divide ids's ne0 (n_used) = {}", ids.ne[0]),
            ));
        }
        Ok(Shape::New {
            ty: Type::F32,
            ne: [w.ne[1], ids.ne[0], b.ne[2], 1, 1],
        })
    }
}

impl Context {
    /// `ggml_mul_mat_id`: for every token `t` and slot `e`, with expert `x = ids[e, t]`,
    /// `result[i, e, t] = Σₖ as[k, i, x] · b[k, e mod n_b, t]`. Shapes: `as` `[K, M,
    /// n_expert]` (F32, F16, BF16 or quantized, not transposed), `b` `[K, n_b, n_tokens]`
    /// (F32, F16 or BF16; `n_b` is `n_used` or divides it, 1 to share one row), `ids` I32
    /// `[n_used, n_tokens]`; the result is F32 `[M, n_used, n_tokens]`. An id outside
    /// `0..n_expert` makes the computation fail with an error naming the node and the id
    /// (GGML asserts instead).
    pub fn mul_mat_id(&self, r#as: &Tensor, b: &Tensor, ids: &Tensor) -> Result<Tensor> {
        self.build::<MulMatId>(
            Op::MulMatId,
            &[Some(r#as), Some(b), Some(ids)],
            NoParams {},
            false,
        )
    }
}
