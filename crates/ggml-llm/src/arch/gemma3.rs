//! Gemma 3 (llama.cpp's `models/gemma3.cpp`): embeddings scaled by `√n_embd`; each layer RMS
//! norm, attention (per-head RMS norms on Q and K, rope with the base of its kind —
//! sliding-window or global —, queries scaled by `1/√head_dim`), an RMS norm after attention,
//! the residual, RMS norm, GeGLU feed-forward, an RMS norm after it, the residual; the logits
//! soft-capped when the file says so. The norms' weights in the file already include Gemma's
//! `1 +`.

use ggml::ops::GluOp;
use ggml::Tensor;

use super::Builder;
use crate::Result;

/// The logits of the step, `[n_vocab, n_out]`.
pub(super) fn build(b: &Builder<'_>) -> Result<Tensor> {
    let c = b.ctx;
    let hp = b.hp;
    let mut x = c.scale(&b.embed_tokens()?, (hp.n_embd as f32).sqrt())?;
    for (il, l) in b.model.weights().layers.iter().enumerate() {
        let h = b.rms_norm(&x, l.attn_norm.as_ref())?;
        b.cb(&h, "attn_norm", il);
        let (q, k, v) = b.qkv_roped(l, il, &h)?;
        let q = c.scale(&q, hp.attn_scale)?;
        let mut a = b.attention(l, il, &q, &k, &v, 1.0)?;
        if il == hp.n_layer - 1 {
            a = b.select_out(&a)?;
            x = b.select_out(&x)?;
        }
        let a = b.rms_norm(&a, l.attn_post_norm.as_ref())?;
        b.cb(&a, "attn_post_norm", il);
        let sa_out = c.add(&a, &x)?;
        b.cb(&sa_out, "sa_out", il);
        let h = b.rms_norm(&sa_out, l.ffn_norm.as_ref())?;
        b.cb(&h, "ffn_norm", il);
        let f = b.gated_ffn(l, il, &h, GluOp::Geglu)?;
        b.cb(&f, "ffn_out", il);
        let f = b.rms_norm(&f, l.ffn_post_norm.as_ref())?;
        b.cb(&f, "ffn_post_norm", il);
        x = c.add(&f, &sa_out)?;
        b.cb(&x, "l_out", il);
    }
    b.lm_head(&x)
}
