//! Compute graphs of the architectures: the pieces they share ([`Builder`]: inputs, norms,
//! projections, rope, attention over the KV cache) and one module per architecture with its
//! layer order (`llama` for llama/qwen2/qwen3, `gemma3`, `bert`).
//!
//! A graph computes one step: `n_tokens` new tokens at positions `n_past..n_past + n_tokens`,
//! attending over the first `n_kv` cells of the cache (`n_kv_swa` in sliding-window layers),
//! and gives `n_out` rows of output (the last `n_out` tokens). Its shape depends on these
//! numbers only, so a graph built once is run again for every step of the same shape with new
//! inputs ([`StepGraph::set_inputs`]).

mod bert;
mod gemma3;
mod llama;

use ggml::ops::{GluOp, Prec};
use ggml::{f16, Context, Graph, Tensor, Type};

use crate::kv_cache::KvCache;
use crate::model::{Arch, Hparams, LayerWeights, Model};
use crate::Result;

/// The shape of one step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Step {
    /// New tokens.
    pub n_tokens: usize,
    /// Cache cells attended over (0 without a cache).
    pub n_kv: usize,
    /// Cache cells attended over in sliding-window layers (0 without them).
    pub n_kv_swa: usize,
    /// Output rows: the last `n_out` tokens.
    pub n_out: usize,
}

/// The input tensors of a step's graph.
#[derive(Debug)]
pub(crate) struct Inputs {
    /// Token ids, I32 `[n_tokens]`.
    tokens: Tensor,
    /// Positions, I32 `[n_tokens]`.
    pos: Tensor,
    /// Cache rows the new keys and values go to, I64 `[n_tokens]`.
    kv_idx: Option<Tensor>,
    /// The same in the sliding-window layers' ring.
    kv_idx_swa: Option<Tensor>,
    /// The causal mask, F16 `[n_kv, n_tokens]`: 0 where a token sees a cell, −∞ elsewhere.
    mask: Option<Tensor>,
    /// The sliding-window mask, F16 `[n_kv_swa, n_tokens]`.
    mask_swa: Option<Tensor>,
    /// Rows of the last layer to output, I32 `[n_out]` (absent when all are).
    out_ids: Option<Tensor>,
}

/// A built graph for one step shape.
#[derive(Debug)]
pub(crate) struct StepGraph {
    /// The shape it computes.
    pub step: Step,
    /// The graph.
    pub graph: Graph,
    /// Its output: logits `[n_vocab, n_out]` or hidden states `[n_embd, n_out]` (encoders).
    pub out: Tensor,
    inputs: Inputs,
    /// Cells of the sliding-window layers' ring.
    swa_cells: usize,
    /// Holds the graph's tensors.
    _ctx: Context,
}

impl StepGraph {
    /// Fills the inputs for `tokens` at positions `n_past..` (the sliding window is
    /// `hp.n_swa`).
    pub(crate) fn set_inputs(&self, tokens: &[u32], n_past: usize, hp: &Hparams) -> Result<()> {
        let s = self.step;
        let ids: Vec<i32> = tokens.iter().map(|&t| t as i32).collect();
        self.inputs.tokens.set_i32(&ids)?;
        let pos: Vec<i32> = (0..s.n_tokens).map(|i| (n_past + i) as i32).collect();
        self.inputs.pos.set_i32(&pos)?;
        let cells = |idx: &Option<Tensor>, ring: usize| -> Result<()> {
            if let Some(idx) = idx {
                let bytes: Vec<u8> = (n_past..n_past + s.n_tokens)
                    .flat_map(|p| ((if ring > 0 { p % ring } else { p }) as i64).to_le_bytes())
                    .collect();
                idx.set_bytes(&bytes, 0)?;
            }
            Ok(())
        };
        cells(&self.inputs.kv_idx, 0)?;
        cells(&self.inputs.kv_idx_swa, self.swa_cells)?;
        if let Some(m) = &self.inputs.mask {
            m.set_bytes(&mask_bytes(s.n_tokens, s.n_kv, n_past, None), 0)?;
        }
        if let Some(m) = &self.inputs.mask_swa {
            let ring = Some((self.swa_cells, hp.n_swa));
            m.set_bytes(&mask_bytes(s.n_tokens, s.n_kv_swa, n_past, ring), 0)?;
        }
        if let Some(o) = &self.inputs.out_ids {
            let rows: Vec<i32> = (s.n_tokens - s.n_out..s.n_tokens)
                .map(|i| i as i32)
                .collect();
            o.set_i32(&rows)?;
        }
        Ok(())
    }
}

/// The F16 mask of a step of `n_tokens` after `n_past` over `n_kv` cells: query `i`
/// (position `p = n_past + i`) sees the position `q` a cell holds when `q <= p` and, for a
/// sliding-window ring `(cells, window)`, `p - q < window`. Cell `j` holds position `j`, or in
/// a ring the last position written to it (`q ≡ j mod cells`, at most the step's last).
fn mask_bytes(
    n_tokens: usize,
    n_kv: usize,
    n_past: usize,
    ring: Option<(usize, usize)>,
) -> Vec<u8> {
    let zero = f16::from_f32(0.0).to_le_bytes();
    let minf = f16::NEG_INFINITY.to_le_bytes();
    let last = n_past + n_tokens - 1;
    let held = |j: usize| -> Option<usize> {
        match ring {
            None => Some(j),
            Some(_) if j > last => None,
            Some((cells, _)) => Some(last - (last - j) % cells),
        }
    };
    let mut out = Vec::with_capacity(2 * n_kv * n_tokens);
    for i in 0..n_tokens {
        let p = n_past + i;
        for j in 0..n_kv {
            let sees = held(j).is_some_and(|q| q <= p && ring.is_none_or(|(_, w)| p - q < w));
            out.extend_from_slice(if sees { &zero } else { &minf });
        }
    }
    out
}

/// The most nodes (and, separately, leafs) a step's graph of a model with `hp` has.
pub(crate) fn max_nodes(hp: &Hparams) -> usize {
    64 * hp.n_layer + 256
}

/// Builds the graph of `step` for `model`; `kv` is the cache (decoders) or `None`
/// (encoders). `flash_attn` picks FLASH_ATTN_EXT over MUL_MAT + SOFT_MAX for cached attention.
pub(crate) fn build(
    model: &Model,
    kv: Option<&KvCache>,
    step: Step,
    flash_attn: bool,
) -> Result<StepGraph> {
    let hp = model.hparams();
    let n_nodes = max_nodes(hp);
    let ctx = Context::for_metadata(n_nodes, n_nodes)?;
    let nt = step.n_tokens as i64;
    let input = |ty: Type, ne: &[i64], name: &str| -> Result<Tensor> {
        let t = ctx.new_tensor(ty, ne)?;
        t.set_name(name);
        t.set_input();
        Ok(t)
    };
    let cached = kv.is_some();
    let mask = |n_kv: usize, name: &str| input(Type::F16, &[n_kv as i64, nt], name);
    let has_swa = cached && hp.swa_layers.iter().any(|&s| s);
    let inputs = Inputs {
        tokens: input(Type::I32, &[nt], "inp_tokens")?,
        pos: input(Type::I32, &[nt], "inp_pos")?,
        kv_idx: cached
            .then(|| input(Type::I64, &[nt], "inp_kv_idx"))
            .transpose()?,
        kv_idx_swa: has_swa
            .then(|| input(Type::I64, &[nt], "inp_kv_idx_swa"))
            .transpose()?,
        mask: cached.then(|| mask(step.n_kv, "inp_mask")).transpose()?,
        mask_swa: has_swa
            .then(|| mask(step.n_kv_swa, "inp_mask_swa"))
            .transpose()?,
        out_ids: (step.n_out < step.n_tokens)
            .then(|| input(Type::I32, &[step.n_out as i64], "inp_out_ids"))
            .transpose()?,
    };
    let b = Builder {
        ctx: &ctx,
        hp,
        model,
        kv,
        step,
        flash_attn,
        inputs: &inputs,
    };
    let out = match hp.arch {
        Arch::Llama | Arch::Qwen2 | Arch::Qwen3 => llama::build(&b)?,
        Arch::Gemma3 => gemma3::build(&b)?,
        Arch::Bert => bert::build(&b)?,
    };
    out.set_name("result_output");
    out.set_output();
    let graph = ctx.new_graph_custom(n_nodes, false)?;
    graph.build_forward_expand(&out)?;
    Ok(StepGraph {
        step,
        graph,
        out,
        inputs,
        swa_cells: kv.map_or(0, KvCache::swa_cells),
        _ctx: ctx,
    })
}

/// The directory named by `GGML_LLM_DUMP_TENSORS` (read once), a debugging aid: the
/// intermediates the architectures name as llama.cpp's graph callback does ([`Builder::cb`],
/// `NAME-LAYER`) are kept (graph outputs) and, after each step, written to `DIR/NAME-LAYER.f32`
/// (their f32 values in logical order, no header), to compare with llama.cpp's
/// (`tools/llm_ref/gemma_intermediates.py`).
pub(crate) fn dump_dir() -> Option<&'static std::path::Path> {
    static DIR: std::sync::OnceLock<Option<std::path::PathBuf>> = std::sync::OnceLock::new();
    DIR.get_or_init(|| std::env::var_os("GGML_LLM_DUMP_TENSORS").map(Into::into))
        .as_deref()
}

/// Writes the intermediates [`Builder::cb`] named in `graph` to `dir` (see [`dump_dir`]).
pub(crate) fn dump(graph: &ggml::Graph, dir: &std::path::Path) -> Result<()> {
    for t in graph.nodes() {
        let name = t.name();
        if name.ends_with(|c: char| c.is_ascii_digit()) && name.contains('-') {
            let bytes: Vec<u8> = t.get_f32()?.iter().flat_map(|v| v.to_le_bytes()).collect();
            let path = dir.join(format!("{name}.f32"));
            std::fs::write(&path, bytes).map_err(|e| {
                crate::Error::InvalidArgument(format!(
                    "GGML_LLM_DUMP_TENSORS: writing {}: {e}",
                    path.display()
                ))
            })?;
        }
    }
    Ok(())
}

/// What the architecture modules build with.
pub(crate) struct Builder<'a> {
    ctx: &'a Context,
    hp: &'a Hparams,
    model: &'a Model,
    kv: Option<&'a KvCache>,
    step: Step,
    flash_attn: bool,
    inputs: &'a Inputs,
}

impl Builder<'_> {
    /// Names `t` as llama.cpp's graph callback does, `NAME-LAYER`; kept for [`dump`] when
    /// [`dump_dir`] is set.
    fn cb(&self, t: &Tensor, name: &str, il: usize) {
        t.set_name(&format!("{name}-{il}"));
        if dump_dir().is_some() {
            t.set_output();
        }
    }

    /// The token embeddings of the inputs, `[n_embd, n_tokens]`.
    fn embed_tokens(&self) -> Result<Tensor> {
        Ok(self
            .ctx
            .get_rows(&self.model.weights().tok_embd, &self.inputs.tokens)?)
    }

    /// `rms_norm(x) · w`.
    fn rms_norm(&self, x: &Tensor, w: Option<&Tensor>) -> Result<Tensor> {
        let n = self.ctx.rms_norm(x, self.hp.norm_eps)?;
        Ok(match w {
            Some(w) => self.ctx.mul(&n, w)?,
            None => n,
        })
    }

    /// `rms_norm(x) · w` when the layer has `w` (Qwen 3's per-head norms), else `x`.
    fn head_norm(&self, x: Tensor, w: Option<&Tensor>) -> Result<Tensor> {
        match w {
            Some(_) => self.rms_norm(&x, w),
            None => Ok(x),
        }
    }

    /// `norm(x) · w + b` (layer norm).
    fn layer_norm(&self, x: &Tensor, w: Option<&Tensor>, b: Option<&Tensor>) -> Result<Tensor> {
        let n = self.ctx.norm(x, self.hp.norm_eps)?;
        let n = match w {
            Some(w) => self.ctx.mul(&n, w)?,
            None => n,
        };
        self.bias(n, b)
    }

    fn bias(&self, x: Tensor, b: Option<&Tensor>) -> Result<Tensor> {
        Ok(match b {
            Some(b) => self.ctx.add(&x, b)?,
            None => x,
        })
    }

    /// `w · x + b`.
    fn linear(&self, w: &Tensor, x: &Tensor, b: Option<&Tensor>) -> Result<Tensor> {
        let y = self.ctx.mul_mat(w, x)?;
        self.bias(y, b)
    }

    /// The queries, keys and values of `x`, each `[head_dim, n_heads, n_tokens]`.
    fn qkv(&self, l: &LayerWeights, x: &Tensor) -> Result<(Tensor, Tensor, Tensor)> {
        let (c, hp) = (self.ctx, self.hp);
        let nt = self.step.n_tokens as i64;
        let (hk, hv) = (hp.head_dim_k as i64, hp.head_dim_v as i64);
        let (nh, nkv) = (hp.n_head as i64, hp.n_head_kv as i64);
        if let Some(wqkv) = &l.wqkv {
            let qkv = self.linear(wqkv, x, l.bqkv.as_ref())?;
            let f = std::mem::size_of::<f32>();
            let part = |hd: i64, n: i64, offset: i64| -> Result<Tensor> {
                let v = c.view_3d(
                    &qkv,
                    hd,
                    n,
                    nt,
                    hd as usize * f,
                    qkv.nb()[1],
                    offset as usize * f,
                )?;
                Ok(c.cont(&v)?)
            };
            return Ok((
                part(hk, nh, 0)?,
                part(hk, nkv, hk * nh)?,
                part(hv, nkv, hk * nh + hk * nkv)?,
            ));
        }
        let one = |w: &Option<Tensor>, b: &Option<Tensor>, hd: i64, n: i64| -> Result<Tensor> {
            let w = w.as_ref().expect("bound with the separate projections");
            let y = self.linear(w, x, b.as_ref())?;
            Ok(c.reshape_3d(&y, hd, n, nt)?)
        };
        Ok((
            one(&l.wq, &l.bq, hk, nh)?,
            one(&l.wk, &l.bk, hk, nkv)?,
            one(&l.wv, &l.bv, hv, nkv)?,
        ))
    }

    /// The decoders' queries, keys and values of layer `il` for the normed input `h`: the
    /// projections, the per-head RMS norms where the layer has them (Qwen 3, Gemma 3), and
    /// rope on the queries and keys.
    fn qkv_roped(
        &self,
        l: &LayerWeights,
        il: usize,
        h: &Tensor,
    ) -> Result<(Tensor, Tensor, Tensor)> {
        let (q, k, v) = self.qkv(l, h)?;
        let (q, k) = (
            self.head_norm(q, l.q_norm.as_ref())?,
            self.head_norm(k, l.k_norm.as_ref())?,
        );
        self.cb(&q, "Qcur_normed", il);
        self.cb(&k, "Kcur_normed", il);
        self.cb(&v, "Vcur", il);
        let (q, k) = (self.rope(&q, il)?, self.rope(&k, il)?);
        self.cb(&q, "Qcur", il);
        self.cb(&k, "Kcur", il);
        Ok((q, k, v))
    }

    /// The gated feed-forward network of the decoders: `down(op(gate(h), up(h)))` with the
    /// layer's biases where it has them.
    fn gated_ffn(&self, l: &LayerWeights, il: usize, h: &Tensor, op: GluOp) -> Result<Tensor> {
        let gate = l.ffn_gate.as_ref().expect("decoders bind ffn_gate");
        let gate = self.linear(gate, h, None)?;
        let up = self.linear(&l.ffn_up, h, l.ffn_up_b.as_ref())?;
        let act = self.ctx.glu_split(&gate, &up, op)?;
        self.cb(&gate, "ffn_gate", il);
        self.cb(&up, "ffn_up", il);
        let act_name = match op {
            GluOp::Geglu => "ffn_geglu",
            GluOp::Swiglu => "ffn_swiglu",
            _ => "ffn_glu",
        };
        self.cb(&act, act_name, il);
        self.linear(&l.ffn_down, &act, l.ffn_down_b.as_ref())
    }

    /// Rope of `x` `[head_dim, n_heads, n_tokens]` at the input positions, with layer `il`'s
    /// base and scale and the model's YaRN parameters (inert without YaRN: no extrapolation
    /// mix, output factor `rope.scaling.attn_factor`).
    fn rope(&self, x: &Tensor, il: usize) -> Result<Tensor> {
        let hp = self.hp;
        let (base, scale) = hp.rope_of(il);
        Ok(self.ctx.rope_ext(
            x,
            &self.inputs.pos,
            self.model.weights().rope_freqs.as_ref(),
            hp.n_rot as i32,
            hp.arch.rope_type(),
            hp.rope_n_ctx_orig as i32,
            base,
            scale,
            hp.rope_ext_factor,
            hp.rope_attn_factor,
            hp.rope_yarn_beta.0,
            hp.rope_yarn_beta.1,
        )?)
    }

    /// Attention of layer `il` (queries `q`, new keys `k` and values `v`, each `[head_dim,
    /// n_heads, n_tokens]`) then the output projection: `[n_embd, n_tokens]`. With a cache, `k`
    /// and `v` are written to it first and the queries attend over its first `n_kv` cells
    /// under the layer's mask; without one, over `k` and `v` with no mask.
    fn attention(
        &self,
        l: &LayerWeights,
        il: usize,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        kq_scale: f32,
    ) -> Result<Tensor> {
        let (c, hp) = (self.ctx, self.hp);
        let nt = self.step.n_tokens as i64;
        let (hk, hv) = (hp.head_dim_k as i64, hp.head_dim_v as i64);
        let nkv = hp.n_head_kv as i64;
        let (k, v, mask) = match self.kv {
            Some(cache) => {
                let (idx, n_kv, mask) = if hp.is_swa(il) {
                    let i = &self.inputs;
                    (&i.kv_idx_swa, self.step.n_kv_swa, i.mask_swa.as_ref())
                } else {
                    let i = &self.inputs;
                    (&i.kv_idx, self.step.n_kv, i.mask.as_ref())
                };
                let idx = idx.as_ref().expect("a cached step has indices");
                let store = |cache_t: &Tensor, cur: &Tensor, hd: i64| -> Result<Tensor> {
                    let rows = c.reshape_2d(cur, hd * nkv, nt)?;
                    let all = c.set_rows(cache_t, &rows, idx)?;
                    let el = cache_t.nb()[0];
                    Ok(c.view_3d(
                        &all,
                        hd,
                        nkv,
                        n_kv as i64,
                        hd as usize * el,
                        cache_t.nb()[1],
                        0,
                    )?)
                };
                (store(cache.k(il), k, hk)?, store(cache.v(il), v, hv)?, mask)
            }
            None => (k.clone(), v.clone(), None),
        };
        let q = c.permute(q, 0, 2, 1, 3)?;
        let k = c.permute(&k, 0, 2, 1, 3)?;
        let v = c.permute(&v, 0, 2, 1, 3)?;
        let nh = hp.n_head as i64;
        let out = if self.flash_attn && self.kv.is_some() {
            let o = c.flash_attn_ext(&q, &k, &v, mask, kq_scale, 0.0, 0.0)?;
            o.flash_attn_ext_set_prec(Prec::F32)?;
            c.reshape_2d(&o, hv * nh, nt)?
        } else {
            let kq = c.mul_mat(&k, &q)?;
            kq.mul_mat_set_prec(Prec::F32)?;
            let kq = c.soft_max_ext(&kq, mask, kq_scale, 0.0)?;
            let vt = c.cont(&c.transpose(&v)?)?;
            let kqv = c.mul_mat(&vt, &kq)?;
            let o = c.permute(&kqv, 0, 2, 1, 3)?;
            c.cont_2d(&o, hv * nh, nt)?
        };
        self.cb(&out, "kqv_out", il);
        self.linear(&l.wo, &out, l.bo.as_ref())
    }

    /// The rows of `x` that are output (all, or the last `n_out`).
    fn select_out(&self, x: &Tensor) -> Result<Tensor> {
        Ok(match &self.inputs.out_ids {
            Some(ids) => self.ctx.get_rows(x, ids)?,
            None => x.clone(),
        })
    }

    /// The decoders' head: the final RMS norm, the output projection and, when the file asks
    /// for it, soft-capping of the logits.
    fn lm_head(&self, x: &Tensor) -> Result<Tensor> {
        let (c, w) = (self.ctx, self.model.weights());
        let x = self.rms_norm(x, w.output_norm.as_ref())?;
        let output = w
            .output
            .as_ref()
            .expect("decoders bind an output projection");
        let logits = c.mul_mat(output, &x)?;
        let cap = self.hp.final_logit_softcap;
        if cap == 0.0 {
            return Ok(logits);
        }
        let t = c.tanh(&c.scale(&logits, 1.0 / cap)?)?;
        Ok(c.scale(&t, cap)?)
    }
}
