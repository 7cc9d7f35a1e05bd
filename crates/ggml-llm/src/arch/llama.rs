//! The Llama family (llama.cpp's `models/llama.cpp`, `qwen2.cpp`, `qwen3.cpp`): pre-norm
//! layers of RMS norm, attention with rope, RMS norm, SwiGLU feed-forward. Qwen 2 adds biases
//! to Q, K and V (bound when the file has them); Qwen 3 an RMS norm per head on Q and K before
//! rope.

use ggml::ops::GluOp;
use ggml::Tensor;

use super::Builder;
use crate::Result;

/// The logits of the step, `[n_vocab, n_out]`.
pub(super) fn build(b: &Builder<'_>) -> Result<Tensor> {
    let c = b.ctx;
    let mut x = b.embed_tokens()?;
    let n_layer = b.hp.n_layer;
    for (il, l) in b.model.weights().layers.iter().enumerate() {
        let h = b.rms_norm(&x, l.attn_norm.as_ref())?;
        let (q, k, v) = b.qkv_roped(l, il, &h)?;
        let mut a = b.attention(l, il, &q, &k, &v, b.hp.attn_scale)?;
        if il == n_layer - 1 {
            a = b.select_out(&a)?;
            x = b.select_out(&x)?;
        }
        let ffn_inp = c.add(&a, &x)?;
        let h = b.rms_norm(&ffn_inp, l.ffn_norm.as_ref())?;
        let f = b.gated_ffn(l, il, &h, GluOp::Swiglu)?;
        x = c.add(&f, &ffn_inp)?;
    }
    b.lm_head(&x)
}
