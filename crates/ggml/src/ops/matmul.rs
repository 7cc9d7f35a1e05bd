//! MUL_MAT: matrix products over rows of both operands.

use bytemuck::{Pod, Zeroable};

use crate::context::Context;
use crate::error::Result;
use crate::ops::spec::{req, OpSpec, Shape, Slot, Srcs};
use crate::ops::Op;
use crate::tensor::{Tensor, MAX_DIMS};
use crate::types::Type;

/// Precision a product should be computed with (`enum ggml_prec`), op parameter 0 of MUL_MAT
/// and 3 of FLASH_ATTN_EXT.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[repr(i32)]
pub enum Prec {
    /// The backend's choice (`GGML_PREC_DEFAULT`).
    #[default]
    Default = 0,
    /// Accumulate in f32 (`GGML_PREC_F32`).
    F32 = 10,
}

/// MUL_MAT's parameters.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct MulMatParams {
    /// The requested precision ([`Prec`] as its GGML value).
    pub prec: i32,
    /// A backend hint (`enum ggml_op_hint`; 0 = none).
    pub hint: i32,
}

/// MUL_MAT: `a` `[K, M, A2, A3, A4]` (weights: float or quantized, not transposed) times `b`
/// `[K, N, B2, B3, B4]` (activations: F32, F16 or BF16, each `Bd` a multiple of `Ad`) gives
/// F32 `[M, N, B2, B3, B4]`.
pub(crate) struct MulMat;

impl OpSpec for MulMat {
    type Params = MulMatParams;
    const SLOTS: &'static [Slot] = &[req("a"), req("b")];
    fn shape(src: &Srcs<'_>, _: &MulMatParams) -> Result<Shape> {
        let (a, b) = (src.get(0), src.get(1));
        want_weights(src, 0)?;
        if !matches!(b.ty, Type::F32 | Type::F16 | Type::BF16) {
            let hint = if b.ty.is_quantized() {
                " (quantized weights go in a, the first operand)"
            } else {
                ""
            };
            return Err(src.bad(1, format!("it must be F32, F16 or BF16{hint}")));
        }
        if a.ne[0] != b.ne[0] {
            return Err(src.bad(
                1,
                format!(
                    "its rows have K = {} elements and a's K = {}; they must be equal",
                    b.ne[0], a.ne[0]
                ),
            ));
        }
        want_batch_broadcast(src, 0, 1)?;
        Ok(Shape::New {
            ty: Type::F32,
            ne: [a.ne[1], b.ne[1], b.ne[2], b.ne[3], b.ne[4]],
        })
    }
}

/// `Err` unless operand `i` can be the weights of a product (MUL_MAT, MUL_MAT_ID, OUT_PROD):
/// F32, F16, BF16 or quantized, and not transposed (GGML refuses `nb0 > nb1`; an empty operand
/// — K = 0 gives nb1 = 0 — has no layout to speak of and is accepted).
pub(crate) fn want_weights(src: &Srcs<'_>, i: usize) -> Result<()> {
    let w = src.get(i);
    if !(w.ty.is_quantized() || matches!(w.ty, Type::F32 | Type::F16 | Type::BF16)) {
        return Err(src.bad(i, "the weights must be F32, F16, BF16 or a quantized type"));
    }
    if w.is_transposed() && w.nelements() > 0 {
        return Err(src.bad(i, "it is transposed; make it contiguous with cont() first"));
    }
    Ok(())
}

/// `Err` unless the batch dimensions (2..) of operand `j` are whole multiples of operand
/// `i`'s (`ggml_can_mul_mat`, `ggml_can_out_prod`; a zero-sized batch dimension of `i` only
/// fits an empty one of `j`).
pub(crate) fn want_batch_broadcast(src: &Srcs<'_>, i: usize, j: usize) -> Result<()> {
    let (a, b) = (src.get(i), src.get(j));
    let broadcasts = (2..MAX_DIMS).all(|d| {
        if a.ne[d] == 0 {
            b.ne[d] == 0
        } else {
            b.ne[d] % a.ne[d] == 0
        }
    });
    if broadcasts {
        return Ok(());
    }
    Err(src.bad(
        j,
        format!(
            "its batch dimensions {:?} must be multiples of {}'s {:?}",
            &b.ne[2..],
            src.slot_name(i),
            &a.ne[2..]
        ),
    ))
}

impl Context {
    /// `ggml_mul_mat`: `result[i, j, …] = Σₖ a[k, i, …] · b[k, j, …]`, i.e. `C = B·Aᵀ` with
    /// rows of both along `ne0`. `a` (the weights, `[K, M, A2, A3, A4]`: F32, F16, BF16 or
    /// quantized) is broadcast over `b`'s batch dimensions (`[K, N, B2, B3, B4]`, F32, F16 or
    /// BF16, each `Bd` a multiple of `Ad`): batch `(j2, j3, j4)` of `b` uses batch
    /// `(j2 / (B2/A2), …)` of `a`. The result is F32 `[M, N, B2, B3, B4]`. `a` must not be
    /// transposed.
    pub fn mul_mat(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        self.build::<MulMat>(
            Op::MulMat,
            &[Some(a), Some(b)],
            MulMatParams::default(),
            false,
        )
    }
}

impl Tensor {
    /// `ggml_mul_mat_set_prec`: asks for `prec` when this MUL_MAT node is computed.
    pub fn mul_mat_set_prec(&self, prec: Prec) -> Result<()> {
        self.set_op_param_i32_for(Op::MulMat, 0, prec as i32)
    }
}
