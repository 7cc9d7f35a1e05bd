//! FLASH_ATTN_EXT: fused attention `softmax(scale·Q·Kᵀ + slope·mask)·V` per head, with
//! grouped-query broadcasting, ALiBi, logit soft-capping and attention sinks.

use bytemuck::{Pod, Zeroable};

use crate::context::Context;
use crate::error::Result;
use crate::ops::softmax::{check_scale_and_bias, check_sinks};
use crate::ops::spec::{opt, req, Meta, OpSpec, Shape, Slot, Srcs};
use crate::ops::{Op, Prec};
use crate::tensor::Tensor;
use crate::types::Type;

/// FLASH_ATTN_EXT's parameters.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct FlashAttnExtParams {
    /// Factor applied to `Q·Kᵀ`.
    pub scale: f32,
    /// ALiBi's maximum bias; 0 disables ALiBi.
    pub max_bias: f32,
    /// Soft-capping of the logits: `softcap · tanh(x / softcap)`; 0 disables it.
    pub logit_softcap: f32,
    /// The requested precision ([`Prec`] as its GGML value).
    pub prec: i32,
}

/// Whether K and V rows of type `t` can be read as f32.
fn kv_type(t: Type) -> bool {
    matches!(t, Type::F32 | Type::F16 | Type::BF16)
        || (t.is_quantized() && crate::quants::has_to_float(t))
}

/// FLASH_ATTN_EXT: q `[DK, n_q, n_head, n_seq]` (F32), k `[DK, n_kv, n_head_kv, n_seq]`,
/// v `[DV, n_kv, n_head_kv_v, n_seq]` (float or quantized), optional F16 mask
/// `[≥ n_kv, ≥ n_q, M2, M3]` and F32 sinks `[n_head]`; F32 result `[DV, n_head, n_q, n_seq]`.
pub(crate) struct FlashAttnExt;

impl OpSpec for FlashAttnExt {
    type Params = FlashAttnExtParams;
    const SLOTS: &'static [Slot] = &[req("q"), req("k"), req("v"), opt("mask"), opt("sinks")];
    fn shape(src: &Srcs<'_>, p: &FlashAttnExtParams) -> Result<Shape> {
        let (q, k, v) = (src.get(0), src.get(1), src.get(2));
        src.want_type(0, &[Type::F32])?;
        for (i, t) in [(1, k), (2, v)] {
            if !kv_type(t.ty) {
                return Err(src.bad(i, "its type must be F32, F16, BF16 or a dequantizable type"));
            }
        }
        for (i, t) in [(0, q), (1, k), (2, v)] {
            if !t.rows_packed() {
                return Err(src.bad(i, "its rows must be packed (nb0 = element size)"));
            }
            if t.ne[4] != 1 {
                return Err(src.bad(i, "it must have at most 4 dimensions"));
            }
        }
        let divides = |n: i64, m: i64| m > 0 && n % m == 0;
        if k.ne[0] != q.ne[0] || !divides(q.ne[2], k.ne[2]) || k.ne[3] != q.ne[3] {
            return Err(src.bad(
                1,
                format!(
                    "it does not fit q's shape {:?}: k.ne0 must be q.ne0, k.ne2 must divide \
                     q.ne2 (grouped heads) and k.ne3 must be q.ne3",
                    q.ne
                ),
            ));
        }
        if v.ne[1] != k.ne[1] || !divides(q.ne[2], v.ne[2]) || v.ne[3] != q.ne[3] {
            return Err(src.bad(
                2,
                format!(
                    "it does not fit k's and q's shapes: v.ne1 must be k.ne1 = {}, v.ne2 must \
                     divide q.ne2 = {} and v.ne3 must be q.ne3 = {}",
                    k.ne[1], q.ne[2], q.ne[3]
                ),
            ));
        }
        if let Some(m) = src.opt(3) {
            check_mask(src, q, k, m)?;
        }
        if src.opt(4).is_some() {
            check_sinks(src, 4, q.ne[2], "q.ne2")?;
        }
        if !p.logit_softcap.is_finite() {
            return Err(src.err(format!(
                "logit_softcap = {}; it must be finite",
                p.logit_softcap
            )));
        }
        check_scale_and_bias(src, p.scale, p.max_bias, src.opt(3).is_some())?;
        if p.prec != Prec::Default as i32 && p.prec != Prec::F32 as i32 {
            return Err(src.err(format!(
                "prec = {}; it must be {} (default) or {} (F32)",
                p.prec,
                Prec::Default as i32,
                Prec::F32 as i32
            )));
        }
        Ok(Shape::New {
            ty: Type::F32,
            ne: [v.ne[0], q.ne[2], q.ne[1], q.ne[3], 1],
        })
    }
}

fn check_mask(src: &Srcs<'_>, q: &Meta, k: &Meta, m: &Meta) -> Result<()> {
    src.want_type(3, &[Type::F16])?;
    let fits = m.ne[0] >= k.ne[1]
        && m.ne[1] >= q.ne[1]
        && m.ne[2] > 0
        && m.ne[3] > 0
        && q.ne[2] % m.ne[2] == 0
        && q.ne[3] % m.ne[3] == 0
        && m.ne[4] == 1;
    if !fits {
        return Err(src.bad(
            3,
            format!(
                "it does not fit: ne0 must be at least n_kv = {}, ne1 at least n_q = {}, ne2 and \
                 ne3 must divide q's {} and {}",
                k.ne[1], q.ne[1], q.ne[2], q.ne[3]
            ),
        ));
    }
    if !m.rows_packed() {
        return Err(src.bad(3, "its rows must be packed (nb0 = element size)"));
    }
    Ok(())
}

impl Context {
    /// `ggml_flash_attn_ext`: attention of every query row over the keys and values of its
    /// head, in one pass (online softmax).
    ///
    /// `q` is F32 `[DK, n_q, n_head, n_seq]`; `k` `[DK, n_kv, n_head_kv, n_seq]` and `v`
    /// `[DV, n_kv, n_head_kv, n_seq]` are F32, F16, BF16 or a quantized type (head `h` uses
    /// key/value head `h / (n_head / n_head_kv)`); `mask`, optional, F16
    /// `[≥ n_kv, ≥ n_q, M2, M3]` with `M2`, `M3` dividing `n_head`, `n_seq` (broadcast).
    /// For query `i` of head `h`: `s_j = scale·(q_i·k_j)`, then with `logit_softcap ≠ 0`
    /// `s_j = logit_softcap·tanh(s_j / logit_softcap)`, plus `slope·mask[j, i]` (the ALiBi
    /// slope of `h` with `max_bias > 0`, else 1; a key whose mask is −∞ is skipped); the
    /// output is `Σ_j softmax(s)_j · v_j` (zeros when every key is masked). The result is F32
    /// `[DV, n_head, n_q, n_seq]` — heads and queries swapped relative to `q`.
    #[allow(clippy::too_many_arguments)]
    pub fn flash_attn_ext(
        &self,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        mask: Option<&Tensor>,
        scale: f32,
        max_bias: f32,
        logit_softcap: f32,
    ) -> Result<Tensor> {
        let p = FlashAttnExtParams {
            scale,
            max_bias,
            logit_softcap,
            prec: Prec::Default as i32,
        };
        self.build::<FlashAttnExt>(
            Op::FlashAttnExt,
            &[Some(q), Some(k), Some(v), mask],
            p,
            false,
        )
    }

    /// `ggml_flash_attn_ext_add_sinks`: the FLASH_ATTN_EXT node `a` with attention sinks:
    /// `sinks` (F32 `[n_head]`) adds one logit per head to each query's softmax that takes
    /// no value (the weights sum to less than 1).
    ///
    /// GGML sets the operand on `a` itself; here nodes do not change once built, so this
    /// returns a new node with `a`'s operands and parameters plus the sinks, to use instead
    /// of `a`. `None` gives the node without sinks. `Err` when `a` is not a FLASH_ATTN_EXT
    /// node, already has sinks, or `sinks` does not fit.
    pub fn flash_attn_ext_add_sinks(&self, a: &Tensor, sinks: Option<&Tensor>) -> Result<Tensor> {
        self.with_operand::<FlashAttnExt>(a, Op::FlashAttnExt, 4, sinks)
    }
}

impl Tensor {
    /// `ggml_flash_attn_ext_set_prec`: asks for `prec` when this FLASH_ATTN_EXT node is
    /// computed (parameter slot 3; the CPU always accumulates in f32).
    pub fn flash_attn_ext_set_prec(&self, prec: Prec) -> Result<()> {
        self.set_op_param_i32_for(Op::FlashAttnExt, 3, prec as i32)
    }

    /// `ggml_flash_attn_ext_get_prec`: the precision asked for this FLASH_ATTN_EXT node.
    pub fn flash_attn_ext_get_prec(&self) -> Result<Prec> {
        if self.op() != Op::FlashAttnExt {
            return Err(crate::error::Error::invalid(format!(
                "flash_attn_ext_get_prec: tensor {:?} is computed by {}, not FLASH_ATTN_EXT",
                self.name(),
                self.op().name()
            )));
        }
        Ok(if self.get_op_params_i32(3)? == Prec::F32 as i32 {
            Prec::F32
        } else {
            Prec::Default
        })
    }
}
