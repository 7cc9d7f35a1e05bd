//! BERT (llama.cpp's `models/bert.cpp`): token, token-type (type 0) and absolute position
//! embeddings, a layer norm; each layer bidirectional attention, the residual, a layer norm,
//! a GELU feed-forward, the residual, a layer norm. The output is the hidden state of every
//! token; pooling is done by the caller.

use ggml::Tensor;

use super::Builder;
use crate::Result;

/// The hidden states of the step, `[n_embd, n_tokens]`.
pub(super) fn build(b: &Builder<'_>) -> Result<Tensor> {
    let c = b.ctx;
    let w = b.model.weights();
    let mut x = b.embed_tokens()?;
    if let Some(types) = &w.type_embd {
        let row0 = c.view_1d(types, b.hp.n_embd as i64, 0)?;
        x = c.add(&x, &row0)?;
    }
    let pos = w.pos_embd.as_ref().expect("BERT binds position_embd");
    x = c.add(&c.get_rows(pos, &b.inputs.pos)?, &x)?;
    x = b.layer_norm(&x, w.tok_norm.as_ref(), w.tok_norm_b.as_ref())?;
    for (il, l) in w.layers.iter().enumerate() {
        let (q, k, v) = b.qkv(l, &x)?;
        let a = b.attention(l, il, &q, &k, &v, b.hp.attn_scale)?;
        let h = c.add(&a, &x)?;
        let h = b.layer_norm(&h, l.attn_out_norm.as_ref(), l.attn_out_norm_b.as_ref())?;
        let up = b.linear(&l.ffn_up, &h, l.ffn_up_b.as_ref())?;
        let f = b.linear(&l.ffn_down, &c.gelu(&up)?, l.ffn_down_b.as_ref())?;
        let y = c.add(&f, &h)?;
        x = b.layer_norm(&y, l.layer_out_norm.as_ref(), l.layer_out_norm_b.as_ref())?;
    }
    Ok(x)
}
