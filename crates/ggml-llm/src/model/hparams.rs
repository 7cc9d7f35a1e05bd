//! A model's hyper-parameters, read from its GGUF metadata with llama.cpp's keys
//! (`{arch}.embedding_length`, `{arch}.attention.head_count`, …) and defaults.

use ggml::gguf::{GgufFile, Value};

use crate::{Error, Result};

/// The architectures this crate runs (`general.architecture`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Arch {
    /// `llama`: Llama 2/3 and the models that copy its layout.
    Llama,
    /// `qwen2`: the Llama layout with biases on Q, K and V.
    Qwen2,
    /// `qwen3`: the Llama layout with an RMS norm per head on Q and K.
    Qwen3,
    /// `gemma3`: sliding-window and global layers, norms after attention and FFN, scaled
    /// embeddings.
    Gemma3,
    /// `bert`: a bidirectional encoder for sentence embeddings.
    Bert,
}

impl Arch {
    /// The architecture named `name`; `Err` names an architecture this crate does not run.
    pub fn from_name(name: &str) -> Result<Arch> {
        Ok(match name {
            "llama" => Arch::Llama,
            "qwen2" => Arch::Qwen2,
            "qwen3" => Arch::Qwen3,
            "gemma3" => Arch::Gemma3,
            "bert" => Arch::Bert,
            _ => {
                return Err(Error::Unsupported(format!(
                    "general.architecture = {name:?}; this crate runs llama, qwen2, qwen3, \
                     gemma3 and bert"
                )))
            }
        })
    }

    /// The name llama.cpp gives the architecture (the metadata key prefix).
    pub fn name(self) -> &'static str {
        match self {
            Arch::Llama => "llama",
            Arch::Qwen2 => "qwen2",
            Arch::Qwen3 => "qwen3",
            Arch::Gemma3 => "gemma3",
            Arch::Bert => "bert",
        }
    }

    /// Whether the model is an encoder that gives embeddings (no logits, no KV cache).
    pub fn is_encoder(self) -> bool {
        self == Arch::Bert
    }

    /// llama.cpp's rope type for the architecture (`llama_model_rope_type`).
    pub fn rope_type(self) -> i32 {
        match self {
            Arch::Llama => ggml::ROPE_TYPE_NORMAL,
            Arch::Qwen2 | Arch::Qwen3 | Arch::Gemma3 => ggml::ROPE_TYPE_NEOX,
            // BERT has learned absolute positions and no rope.
            Arch::Bert => ggml::ROPE_TYPE_NORMAL,
        }
    }
}

/// How the rope's frequencies are scaled for a context longer than the model was trained on
/// (`enum llama_rope_scaling_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RopeScaling {
    /// `none`: never scaled, whatever the factor.
    None,
    /// `linear`: positions divided by the factor.
    Linear,
    /// `yarn`: YaRN, interpolating the slow dimensions and extrapolating the fast ones.
    Yarn,
}

impl RopeScaling {
    /// The scaling named `name` as GGUF writes it; `Err` names any other (`longrope` is not
    /// implemented).
    pub fn from_name(name: &str) -> Result<RopeScaling> {
        Ok(match name {
            "none" => RopeScaling::None,
            "linear" => RopeScaling::Linear,
            "yarn" => RopeScaling::Yarn,
            _ => {
                return Err(Error::Unsupported(format!(
                    "rope.scaling.type = {name:?}; this crate implements none, linear and yarn"
                )))
            }
        })
    }
}

/// How an encoder's per-token states become one embedding (`enum llama_pooling_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pooling {
    /// One embedding per token.
    None,
    /// The mean over the tokens.
    Mean,
    /// The state of the first token (`[CLS]`).
    Cls,
    /// The state of the last token.
    Last,
}

impl Pooling {
    /// The pooling of `{arch}.pooling_type` (llama.cpp's numbering: 0 none, 1 mean, 2 cls,
    /// 3 last); `Err` names any other value.
    pub fn from_gguf(v: i128) -> Result<Pooling> {
        Ok(match v {
            0 => Pooling::None,
            1 => Pooling::Mean,
            2 => Pooling::Cls,
            3 => Pooling::Last,
            _ => {
                return Err(Error::Unsupported(format!(
                    "pooling_type = {v}; this crate pools by none (0), mean (1), cls (2) or \
                     last (3)"
                )))
            }
        })
    }

    /// The pooling named `name` (`none`, `mean`, `cls`, `last`), as the command line spells it.
    pub fn from_name(name: &str) -> Result<Pooling> {
        Ok(match name {
            "none" => Pooling::None,
            "mean" => Pooling::Mean,
            "cls" => Pooling::Cls,
            "last" => Pooling::Last,
            _ => {
                return Err(Error::InvalidArgument(format!(
                    "pooling = {name:?}; it must be none, mean, cls or last"
                )))
            }
        })
    }
}

/// The hyper-parameters of a model (`llama_hparams`, the parts these architectures use).
#[derive(Clone, Debug, PartialEq)]
pub struct Hparams {
    /// The architecture.
    pub arch: Arch,
    /// Context length the model was trained with (`{arch}.context_length`).
    pub n_ctx_train: usize,
    /// Width of the residual stream (`{arch}.embedding_length`).
    pub n_embd: usize,
    /// Number of layers (`{arch}.block_count`).
    pub n_layer: usize,
    /// Width of the feed-forward network (`{arch}.feed_forward_length`).
    pub n_ff: usize,
    /// Query heads (`{arch}.attention.head_count`).
    pub n_head: usize,
    /// Key/value heads (`{arch}.attention.head_count_kv`, default `n_head`).
    pub n_head_kv: usize,
    /// Size of a key head (`{arch}.attention.key_length`, default `n_embd / n_head`).
    pub head_dim_k: usize,
    /// Size of a value head (`{arch}.attention.value_length`, default `n_embd / n_head`).
    pub head_dim_v: usize,
    /// Rotated dimensions per head (`{arch}.rope.dimension_count`, default `head_dim_k`).
    pub n_rot: usize,
    /// Rope base of the global layers (`{arch}.rope.freq_base`, default 10000).
    pub rope_freq_base: f32,
    /// Rope frequency scale (1 / `{arch}.rope.scaling.factor`, default 1; 1 when
    /// `{arch}.rope.scaling.type` is `none`).
    pub rope_freq_scale: f32,
    /// The rope scaling: `{arch}.rope.scaling.type`, default linear.
    pub rope_scaling: RopeScaling,
    /// The context the rope was trained for before scaling, YaRN's `n_ctx_orig`
    /// (`{arch}.rope.scaling.original_context_length`, default `n_ctx_train`).
    pub rope_n_ctx_orig: usize,
    /// YaRN's extrapolation mix: 1 with YaRN scaling, else 0 (llama.cpp's `yarn_ext_factor`
    /// when not given on its command line).
    pub rope_ext_factor: f32,
    /// The factor rope scales its output by (llama.cpp's `yarn_attn_factor`): with YaRN,
    /// the magnitude correction `0.1·ln(s) + 1` of the scale factor `s > 1` cancelled by
    /// the one GGML's rope applies itself, so only `{arch}.rope.scaling.attn_factor`
    /// (default 1) remains.
    pub rope_attn_factor: f32,
    /// YaRN's β_fast and β_slow: the dimensions rotating more than β_fast times over
    /// `rope_n_ctx_orig` positions are not interpolated, those rotating fewer than β_slow
    /// times fully (llama.cpp's defaults, 32 and 1; it reads no key for these architectures).
    pub rope_yarn_beta: (f32, f32),
    /// Rope base of the sliding-window layers (`{arch}.rope.freq_base_swa`, default 10000).
    pub rope_freq_base_swa: f32,
    /// The norms' epsilon (`layer_norm_rms_epsilon`, or `layer_norm_epsilon` for BERT).
    pub norm_eps: f32,
    /// The sliding window (`{arch}.attention.sliding_window`); 0 when no layer slides.
    pub n_swa: usize,
    /// Per layer: whether it attends over the sliding window only.
    pub swa_layers: Vec<bool>,
    /// `{arch}.final_logit_softcapping`; 0 when absent.
    pub final_logit_softcap: f32,
    /// The factor the queries are scaled by (Gemma 3), or the attention scale (others).
    pub attn_scale: f32,
    /// The pooling the file asks for (encoders).
    pub pooling: Pooling,
    /// Whether attention is causal.
    pub causal: bool,
    /// Token types (BERT's `tokenizer.ggml.token_type_count`; 0 elsewhere).
    pub n_token_types: usize,
}

/// BERT's number of token types (a tokenizer key, not the architecture's).
const TOKEN_TYPE_COUNT: &str = "tokenizer.ggml.token_type_count";

/// The metadata of one file, read with the architecture's key prefix.
struct Meta<'a> {
    file: &'a GgufFile,
    arch: &'static str,
}

impl Meta<'_> {
    fn key(&self, suffix: &str) -> String {
        format!("{}.{suffix}", self.arch)
    }

    fn value(&self, suffix: &str) -> Option<(String, &Value)> {
        let key = self.key(suffix);
        self.file.get(&key).map(|v| (key, v))
    }

    /// A non-negative integer, or an array of equal ones (a per-layer value that does not
    /// vary); `None` when absent.
    fn usize_opt(&self, suffix: &str) -> Result<Option<usize>> {
        let Some((key, v)) = self.value(suffix) else {
            return Ok(None);
        };
        let bad = || Error::Model(format!("{key} = {v:?}; it must be a non-negative integer"));
        let n = match v.as_array() {
            Some(a) => {
                let all: Vec<i128> = (0..a.len())
                    .map(|i| a.get(i).and_then(|x| x.as_integer()).ok_or_else(bad))
                    .collect::<Result<_>>()?;
                match all.first() {
                    Some(&first) if all.iter().all(|&x| x == first) => first,
                    _ => {
                        return Err(Error::Unsupported(format!(
                            "{key} varies per layer ({all:?}); this crate needs one value"
                        )))
                    }
                }
            }
            None => v.as_integer().ok_or_else(bad)?,
        };
        usize::try_from(n).map(Some).map_err(|_| bad())
    }

    fn usize(&self, suffix: &str) -> Result<usize> {
        self.usize_opt(suffix)?.ok_or_else(|| {
            Error::Model(format!(
                "the model has no {} (a required key)",
                self.key(suffix)
            ))
        })
    }

    /// Which of `n_layer` layers use sliding-window attention: the file's per-layer bool
    /// array, or from its pattern `p` (default 6) every `p`-th layer global and the others
    /// sliding (llama.cpp's `set_swa_pattern` without dense_first; 0 makes all slide).
    fn swa_layers(&self, n_layer: usize) -> Result<Vec<bool>> {
        const SUFFIX: &str = "attention.sliding_window_pattern";
        if let Some((key, v)) = self.value(SUFFIX) {
            if let Some(a) = v
                .as_array()
                .filter(|a| a.get(0).is_some_and(|x| x.as_bool().is_some()))
            {
                if a.len() != n_layer {
                    return Err(Error::Model(format!(
                        "{key} has {} values for {n_layer} layers",
                        a.len()
                    )));
                }
                return (0..a.len())
                    .map(|i| {
                        a.get(i)
                            .and_then(|x| x.as_bool())
                            .ok_or_else(|| Error::Model(format!("{key}[{i}] is not a bool")))
                    })
                    .collect();
            }
        }
        let pattern = self.usize_opt(SUFFIX)?.unwrap_or(6);
        Ok((0..n_layer)
            .map(|il| pattern == 0 || il % pattern < pattern - 1)
            .collect())
    }

    fn f32_opt(&self, suffix: &str) -> Result<Option<f32>> {
        let Some((key, v)) = self.value(suffix) else {
            return Ok(None);
        };
        let x = match v {
            Value::F32(x) => *x,
            Value::F64(x) => *x as f32,
            _ => return Err(Error::Model(format!("{key} = {v:?}; it must be a float"))),
        };
        if !x.is_finite() {
            return Err(Error::Model(format!("{key} = {x}; it must be finite")));
        }
        Ok(Some(x))
    }
}

/// YaRN's extrapolation mix and the factor rope scales its output by, as llama.cpp derives
/// them when its command line sets neither (`llama_context`'s constructor): the mix is 1 with
/// YaRN, else 0; with a mix, the magnitude correction `get_mscale(s) = 0.1·ln(s) + 1` of the
/// scale factor `s = 1 / freq_scale` (1 for `s ≤ 1`) divided by the `1 + 0.1·ln(s)` GGML's
/// rope multiplies in by itself; then `attn_factor` (`rope.scaling.attn_factor`, default 1).
fn yarn_factors(scaling: RopeScaling, freq_scale: f32, attn_factor: Option<f32>) -> (f32, f32) {
    let ext_factor = if scaling == RopeScaling::Yarn {
        1.0
    } else {
        0.0
    };
    let mut factor = 1.0f32;
    if ext_factor != 0.0 {
        let s = 1.0 / freq_scale;
        let mscale = if s <= 1.0 { 1.0 } else { 0.1 * s.ln() + 1.0 };
        factor = mscale / (1.0 + 0.1 * s.ln());
    }
    (ext_factor, factor * attn_factor.unwrap_or(1.0))
}

impl Hparams {
    /// Reads the hyper-parameters of `file`. `Err` names a missing or malformed key, or an
    /// architecture or feature this crate does not run.
    pub fn from_gguf(file: &GgufFile) -> Result<Hparams> {
        let arch_name = file.get_val_str("general.architecture").map_err(|_| {
            Error::Model("the file has no general.architecture: not a model".into())
        })?;
        let arch = Arch::from_name(arch_name)?;
        let m = Meta {
            file,
            arch: arch.name(),
        };
        let n_embd = m.usize("embedding_length")?;
        let n_layer = m.usize("block_count")?;
        let n_head = m.usize("attention.head_count")?;
        if n_embd == 0 || n_layer == 0 || n_head == 0 {
            return Err(Error::Model(format!(
                "{0}.embedding_length = {n_embd}, {0}.block_count = {n_layer}, \
                 {0}.attention.head_count = {n_head}; each must be positive",
                arch.name()
            )));
        }
        let n_head_kv = m.usize_opt("attention.head_count_kv")?.unwrap_or(n_head);
        if n_head_kv == 0 || n_head % n_head_kv != 0 {
            return Err(Error::Model(format!(
                "{}.attention.head_count_kv = {n_head_kv}; it must divide head_count = {n_head}",
                arch.name()
            )));
        }
        let head_dim_k = m
            .usize_opt("attention.key_length")?
            .unwrap_or(n_embd / n_head);
        let head_dim_v = m
            .usize_opt("attention.value_length")?
            .unwrap_or(n_embd / n_head);
        let n_rot = m.usize_opt("rope.dimension_count")?.unwrap_or(head_dim_k);
        if head_dim_k == 0 || head_dim_v == 0 || n_rot > head_dim_k || n_rot % 2 != 0 {
            return Err(Error::Model(format!(
                "key_length = {head_dim_k}, value_length = {head_dim_v}, rope.dimension_count \
                 = {n_rot}: head sizes must be positive and the rotated part even and within \
                 the head"
            )));
        }
        let rope_scaling = match m.value("rope.scaling.type") {
            None => RopeScaling::Linear,
            Some((key, v)) => {
                let name = v
                    .as_string()
                    .ok_or_else(|| Error::Model(format!("{key} = {v:?}; it must be a string")))?;
                let name = name.to_string_lossy();
                RopeScaling::from_name(&name).map_err(|_| {
                    Error::Unsupported(format!(
                        "{key} = {name:?}; this crate implements none, linear and yarn"
                    ))
                })?
            }
        };
        let scale = m
            .f32_opt("rope.scaling.factor")?
            .or(m.f32_opt("rope.scale_linear")?)
            .unwrap_or(0.0);
        let rope_freq_scale = match (rope_scaling, scale) {
            (RopeScaling::None, _) | (_, 0.0) => 1.0,
            _ => 1.0 / scale,
        };
        let (rope_ext_factor, rope_attn_factor) = yarn_factors(
            rope_scaling,
            rope_freq_scale,
            m.f32_opt("rope.scaling.attn_factor")?,
        );
        let n_ctx_train = m.usize_opt("context_length")?.unwrap_or(0);
        let eps_key = if arch == Arch::Bert {
            "attention.layer_norm_epsilon"
        } else {
            "attention.layer_norm_rms_epsilon"
        };
        let norm_eps = m.f32_opt(eps_key)?.ok_or_else(|| {
            Error::Model(format!(
                "the model has no {} (a required key)",
                m.key(eps_key)
            ))
        })?;

        let mut n_swa = 0;
        let mut swa_layers = vec![false; n_layer];
        if arch == Arch::Gemma3 {
            n_swa = m.usize_opt("attention.sliding_window")?.unwrap_or(0);
            if n_swa > 0 {
                swa_layers = m.swa_layers(n_layer)?;
            }
        }
        let attn_scale = match arch {
            Arch::Gemma3 => 1.0 / (head_dim_k as f32).sqrt(),
            _ => m
                .f32_opt("attention.scale")?
                .filter(|&s| s != 0.0)
                .unwrap_or(1.0 / (head_dim_k as f32).sqrt()),
        };
        let pooling =
            match m.value("pooling_type") {
                Some((key, v)) => Pooling::from_gguf(v.as_integer().ok_or_else(|| {
                    Error::Model(format!("{key} = {v:?}; it must be an integer"))
                })?)?,
                None if arch.is_encoder() => Pooling::Mean,
                None => Pooling::None,
            };
        let causal = match m.value("attention.causal") {
            Some((_, v)) => v.as_bool().unwrap_or(true),
            None => !arch.is_encoder(),
        };
        let hp = Hparams {
            arch,
            n_ctx_train,
            n_embd,
            n_layer,
            n_ff: m.usize("feed_forward_length")?,
            n_head,
            n_head_kv,
            head_dim_k,
            head_dim_v,
            n_rot,
            rope_freq_base: m.f32_opt("rope.freq_base")?.unwrap_or(10000.0),
            rope_freq_scale,
            rope_scaling,
            rope_n_ctx_orig: m
                .usize_opt("rope.scaling.original_context_length")?
                .filter(|&n| n > 0)
                .unwrap_or(n_ctx_train),
            rope_ext_factor,
            rope_attn_factor,
            rope_yarn_beta: (32.0, 1.0),
            rope_freq_base_swa: m.f32_opt("rope.freq_base_swa")?.unwrap_or(10000.0),
            norm_eps,
            n_swa,
            swa_layers,
            final_logit_softcap: m.f32_opt("final_logit_softcapping")?.unwrap_or(0.0),
            attn_scale,
            pooling,
            causal,
            n_token_types: match file.get(TOKEN_TYPE_COUNT) {
                Some(v) => v
                    .as_integer()
                    .and_then(|n| usize::try_from(n).ok())
                    .ok_or_else(|| {
                        Error::Model(format!(
                            "{TOKEN_TYPE_COUNT} = {v:?}; it must be a non-negative integer"
                        ))
                    })?,
                None => 0,
            },
        };
        Ok(hp)
    }

    /// Width of all key heads together.
    pub fn n_embd_k_gqa(&self) -> usize {
        self.head_dim_k * self.n_head_kv
    }

    /// Width of all value heads together.
    pub fn n_embd_v_gqa(&self) -> usize {
        self.head_dim_v * self.n_head_kv
    }

    /// Whether layer `il` attends over the sliding window only.
    pub fn is_swa(&self, il: usize) -> bool {
        self.swa_layers.get(il).copied().unwrap_or(false)
    }

    /// The rope base and frequency scale of layer `il`.
    pub fn rope_of(&self, il: usize) -> (f32, f32) {
        if self.is_swa(il) {
            (self.rope_freq_base_swa, 1.0)
        } else {
            (self.rope_freq_base, self.rope_freq_scale)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yarn_factors_are_llama_cpps() {
        // s = 4: GGML's rope applies 1 + 0.1 ln 4 itself, so only attn_factor remains.
        assert_eq!(yarn_factors(RopeScaling::Yarn, 0.25, None), (1.0, 1.0));
        assert_eq!(yarn_factors(RopeScaling::Yarn, 0.25, Some(0.9)), (1.0, 0.9));
        // s = 1/2 ≤ 1: get_mscale is 1, the division by 1 + 0.1 ln s is not cancelled.
        let (ext, f) = yarn_factors(RopeScaling::Yarn, 2.0, None);
        assert_eq!(ext, 1.0);
        assert!((f - 1.0 / (1.0 + 0.1 * 0.5f32.ln())).abs() < 1e-7, "{f}");
        // Without YaRN: no mix, the factor is attn_factor.
        assert_eq!(
            yarn_factors(RopeScaling::Linear, 0.25, Some(0.9)),
            (0.0, 0.9)
        );
        assert_eq!(yarn_factors(RopeScaling::None, 1.0, None), (0.0, 1.0));
    }

    #[test]
    fn rope_scaling_names() {
        assert_eq!(RopeScaling::from_name("yarn").unwrap(), RopeScaling::Yarn);
        assert_eq!(RopeScaling::from_name("none").unwrap(), RopeScaling::None);
        assert_eq!(
            RopeScaling::from_name("linear").unwrap(),
            RopeScaling::Linear
        );
        let e = RopeScaling::from_name("longrope").unwrap_err().to_string();
        assert!(e.contains("\"longrope\""), "{e}");
    }
}
