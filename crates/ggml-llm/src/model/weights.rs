//! The weight tensors of a model, found by llama.cpp's tensor names (`token_embd.weight`,
//! `blk.N.attn_q.weight`, …) in the loaded file and checked against the hyper-parameters.

use ggml::{Context, Tensor};

use super::hparams::{Arch, Hparams};
use crate::{Error, Result};

/// One layer's weights; which are present depends on the architecture.
#[derive(Clone, Debug)]
pub(crate) struct LayerWeights {
    pub attn_norm: Option<Tensor>,
    pub wq: Option<Tensor>,
    pub wk: Option<Tensor>,
    pub wv: Option<Tensor>,
    pub wqkv: Option<Tensor>,
    pub bq: Option<Tensor>,
    pub bk: Option<Tensor>,
    pub bv: Option<Tensor>,
    pub bqkv: Option<Tensor>,
    pub wo: Tensor,
    pub bo: Option<Tensor>,
    pub q_norm: Option<Tensor>,
    pub k_norm: Option<Tensor>,
    pub attn_post_norm: Option<Tensor>,
    pub attn_out_norm: Option<Tensor>,
    pub attn_out_norm_b: Option<Tensor>,
    pub ffn_norm: Option<Tensor>,
    pub ffn_gate: Option<Tensor>,
    pub ffn_up: Tensor,
    pub ffn_down: Tensor,
    pub ffn_up_b: Option<Tensor>,
    pub ffn_down_b: Option<Tensor>,
    pub ffn_post_norm: Option<Tensor>,
    pub layer_out_norm: Option<Tensor>,
    pub layer_out_norm_b: Option<Tensor>,
}

/// The model's weights.
#[derive(Clone, Debug)]
pub(crate) struct Weights {
    pub tok_embd: Tensor,
    pub pos_embd: Option<Tensor>,
    pub type_embd: Option<Tensor>,
    pub tok_norm: Option<Tensor>,
    pub tok_norm_b: Option<Tensor>,
    pub output_norm: Option<Tensor>,
    /// The output projection (the token embeddings when the file ties them).
    pub output: Option<Tensor>,
    pub rope_freqs: Option<Tensor>,
    pub layers: Vec<LayerWeights>,
}

/// Finds tensors by name in the loaded context and checks their shapes.
struct Binder<'a> {
    ctx: &'a Context,
}

impl Binder<'_> {
    fn opt(&self, name: &str, shape: &[usize]) -> Result<Option<Tensor>> {
        let Some(t) = self.ctx.get_tensor(name) else {
            return Ok(None);
        };
        let ne = t.ne();
        let want: Vec<i64> = shape.iter().map(|&n| n as i64).collect();
        let fits = ne
            .iter()
            .enumerate()
            .all(|(d, &n)| n == want.get(d).copied().unwrap_or(1));
        if !fits {
            return Err(Error::Model(format!(
                "tensor {name} has shape {:?}; the hyper-parameters want {want:?}",
                &ne[..t.n_dims().max(1)]
            )));
        }
        Ok(Some(t))
    }

    fn req(&self, name: &str, shape: &[usize]) -> Result<Tensor> {
        self.opt(name, shape)?
            .ok_or_else(|| Error::Model(format!("the model has no tensor {name} (required)")))
    }
}

impl Weights {
    /// Binds the weights of a model with hyper-parameters `hp` from `ctx` (the file's tensors).
    /// `Err` names a missing tensor or one whose shape does not fit.
    pub(crate) fn bind(ctx: &Context, hp: &Hparams, n_vocab: usize) -> Result<Weights> {
        let b = Binder { ctx };
        let (e, ff) = (hp.n_embd, hp.n_ff);
        let n_q = hp.head_dim_k * hp.n_head;
        let (n_k, n_v) = (hp.n_embd_k_gqa(), hp.n_embd_v_gqa());
        let bert = hp.arch == Arch::Bert;
        let tok_embd = b.req("token_embd.weight", &[e, n_vocab])?;
        let mut w = Weights {
            tok_embd: tok_embd.clone(),
            pos_embd: None,
            type_embd: None,
            tok_norm: None,
            tok_norm_b: None,
            output_norm: None,
            output: None,
            rope_freqs: None,
            layers: Vec::with_capacity(hp.n_layer),
        };
        if bert {
            w.pos_embd = Some(b.req("position_embd.weight", &[e, hp.n_ctx_train])?);
            w.type_embd = b.opt("token_types.weight", &[e, hp.n_token_types])?;
            w.tok_norm = Some(b.req("token_embd_norm.weight", &[e])?);
            w.tok_norm_b = Some(b.req("token_embd_norm.bias", &[e])?);
        } else {
            w.output_norm = Some(b.req("output_norm.weight", &[e])?);
            w.output = Some(b.opt("output.weight", &[e, n_vocab])?.unwrap_or(tok_embd));
            w.rope_freqs = b.opt("rope_freqs.weight", &[hp.n_rot / 2])?;
        }
        for il in 0..hp.n_layer {
            let n = |s: &str| format!("blk.{il}.{s}");
            let wqkv = b.opt(&n("attn_qkv.weight"), &[e, n_q + n_k + n_v])?;
            let split = |name: &str, width: usize| match wqkv {
                Some(_) => Ok(None),
                None => b.req(&n(name), &[e, width]).map(Some),
            };
            let gemma = hp.arch == Arch::Gemma3;
            let head_norm = |name: &str| match hp.arch {
                Arch::Qwen3 | Arch::Gemma3 => b.req(&n(name), &[hp.head_dim_k]).map(Some),
                _ => Ok(None),
            };
            let when = |yes: bool, name: &str| match yes {
                true => b.req(&n(name), &[e]).map(Some),
                false => Ok(None),
            };
            let l = LayerWeights {
                attn_norm: when(!bert, "attn_norm.weight")?,
                wq: split("attn_q.weight", n_q)?,
                wk: split("attn_k.weight", n_k)?,
                wv: split("attn_v.weight", n_v)?,
                bqkv: b.opt(&n("attn_qkv.bias"), &[n_q + n_k + n_v])?,
                wqkv,
                bq: b.opt(&n("attn_q.bias"), &[n_q])?,
                bk: b.opt(&n("attn_k.bias"), &[n_k])?,
                bv: b.opt(&n("attn_v.bias"), &[n_v])?,
                wo: b.req(&n("attn_output.weight"), &[n_q, e])?,
                bo: b.opt(&n("attn_output.bias"), &[e])?,
                q_norm: head_norm("attn_q_norm.weight")?,
                k_norm: head_norm("attn_k_norm.weight")?,
                attn_post_norm: when(gemma, "post_attention_norm.weight")?,
                attn_out_norm: when(bert, "attn_output_norm.weight")?,
                attn_out_norm_b: when(bert, "attn_output_norm.bias")?,
                ffn_norm: when(!bert, "ffn_norm.weight")?,
                ffn_gate: match bert {
                    true => None,
                    false => Some(b.req(&n("ffn_gate.weight"), &[e, ff])?),
                },
                ffn_up: b.req(&n("ffn_up.weight"), &[e, ff])?,
                ffn_down: b.req(&n("ffn_down.weight"), &[ff, e])?,
                ffn_up_b: b.opt(&n("ffn_up.bias"), &[ff])?,
                ffn_down_b: b.opt(&n("ffn_down.bias"), &[e])?,
                ffn_post_norm: when(gemma, "post_ffw_norm.weight")?,
                layer_out_norm: when(bert, "layer_output_norm.weight")?,
                layer_out_norm_b: when(bert, "layer_output_norm.bias")?,
            };
            w.layers.push(l);
        }
        Ok(w)
    }
}
