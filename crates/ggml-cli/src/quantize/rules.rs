//! llama.cpp's per-tensor rules (`src/llama-quant.cpp`): which tensors are quantized, the type
//! each tensor of a mix gets (by its role, its layer and the model's shape), the fallback for
//! rows that are not whole blocks, and which tensors need an importance matrix.
//!
//! The rules depend on the order tensors are seen in (counters of `attn_v` and `ffn_*` tensors
//! stand for the layer index), so [`Planner::target`] must be called in [`llama_order`].

use std::cmp::Ordering;

use ggml::gguf::{GgufFile, Value};
use ggml::Type;

use super::ftype::Ftype;

/// The model facts the rules look at (llama.cpp's hparams, read from the file's metadata).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Model {
    /// `general.architecture`.
    pub arch: String,
    /// `{arch}.block_count`.
    pub n_layer: u32,
    /// `{arch}.attention.head_count` (of layer 0 when given per layer).
    pub n_head: u32,
    /// `{arch}.attention.head_count_kv`; `n_head` when absent.
    pub n_head_kv: u32,
    /// `{arch}.expert_count`; 0 when absent.
    pub n_expert: u32,
}

impl Model {
    /// Reads the model facts; `Err` names a missing or malformed key.
    pub fn from_gguf(f: &GgufFile) -> Result<Model, String> {
        let arch = f
            .get_val_str("general.architecture")
            .map_err(|e| format!("{e} (llama.cpp's mixes need the model's architecture)"))?
            .to_string();
        let int = |key: &str| -> Result<Option<u32>, String> {
            let full = format!("{arch}.{key}");
            let Some(v) = f.get(&full) else {
                return Ok(None);
            };
            // Per-layer arrays (some models vary head counts by layer): layer 0's, as llama.cpp's
            // n_gqa() takes by default.
            let first = match v {
                Value::Array(a) => a.get(0).and_then(|v| v.as_integer()),
                v => v.as_integer(),
            };
            first
                .and_then(|i| u32::try_from(i).ok())
                .map(Some)
                .ok_or_else(|| format!("gguf key {full:?} is not a u32 or an array of them"))
        };
        let n_layer = int("block_count")?
            .filter(|&n| n > 0)
            .ok_or_else(|| format!("gguf key \"{arch}.block_count\" is missing or 0"))?;
        let n_head = int("attention.head_count")?.unwrap_or(0);
        Ok(Model {
            n_layer,
            n_head,
            n_head_kv: int("attention.head_count_kv")?.unwrap_or(n_head),
            n_expert: int("expert_count")?.unwrap_or(0),
            arch,
        })
    }

    /// Query heads per key/value head (`n_gqa`); 0 without key/value heads.
    fn n_gqa(&self) -> u32 {
        self.n_head.checked_div(self.n_head_kv).unwrap_or(0)
    }

    /// Whether llama.cpp's loader calls this model a 70B (its `LLM_TYPE_70B`, the only size the
    /// rules look at).
    fn is_70b(&self) -> bool {
        match self.arch.as_str() {
            "llama" => self.n_layer == 80 && self.n_head != self.n_head_kv,
            "qwen2" | "deci" | "olmo" => self.n_layer == 80,
            "jais2" => self.n_layer == 68,
            _ => false,
        }
    }

    fn is_falcon(&self) -> bool {
        self.arch == "falcon"
    }
}

/// The layer in a `blk.N.` name, as C's `sscanf(name, "blk.%d.")` reads it.
fn layer_of(name: &str) -> Option<i64> {
    let rest = name.strip_prefix("blk.")?;
    let digits = rest.strip_prefix(['-', '+']).unwrap_or(rest);
    let end = digits
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(digits.len());
    if end == 0 {
        return None;
    }
    rest[..rest.len() - digits.len() + end].parse().ok()
}

/// llama.cpp's tensor order (its loader's `weight_name_comparer`): tensors outside `blk.N.`
/// first, then by layer, each group by name.
pub fn llama_order(a: &str, b: &str) -> Ordering {
    let layer = |n: &str| layer_of(n).unwrap_or(-1);
    layer(a).cmp(&layer(b)).then_with(|| a.cmp(b))
}

/// A tensor's role, which decides its rules (llama.cpp's `tensor_category`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Category {
    Output,
    TokenEmbd,
    AttnQkv,
    AttnKvB,
    AttnV,
    AttnK,
    AttnQ,
    AttnOutput,
    FfnUp,
    FfnGate,
    FfnDown,
    Other,
}

fn is_token_embd(name: &str) -> bool {
    matches!(name, "token_embd.weight" | "per_layer_token_embd.weight")
}

impl Category {
    /// The role of the tensor named `name`; the first matching rule wins.
    pub fn of(name: &str) -> Category {
        use Category as C;
        if name == "output.weight" {
            return C::Output;
        }
        if is_token_embd(name) {
            return C::TokenEmbd;
        }
        const BY_PART: [(&str, Category); 9] = [
            ("attn_qkv.weight", C::AttnQkv),
            ("attn_kv_b.weight", C::AttnKvB),
            ("attn_v.weight", C::AttnV),
            ("attn_k.weight", C::AttnK),
            ("attn_q.weight", C::AttnQ),
            ("attn_output.weight", C::AttnOutput),
            ("ffn_up", C::FfnUp),
            ("ffn_gate", C::FfnGate),
            ("ffn_down", C::FfnDown),
        ];
        BY_PART
            .iter()
            .find(|(part, _)| name.contains(part))
            .map_or(C::Other, |&(_, c)| c)
    }

    /// The roles llama.cpp treats as `attn_v` (the most sensitive to quantization).
    fn is_attn_v(self) -> bool {
        matches!(
            self,
            Category::AttnV | Category::AttnQkv | Category::AttnKvB
        )
    }
}

/// The command-line choices the rules take.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// The mix.
    pub ftype: Ftype,
    /// `--pure`: every quantized tensor gets the mix's type (and fallbacks), no per-role rules.
    pub pure: bool,
    /// Not `--leave-output-tensor`.
    pub quantize_output: bool,
    /// `--output-tensor-type`.
    pub output_type: Option<Type>,
    /// `--token-embedding-type`.
    pub token_embd_type: Option<Type>,
    /// `COPY`: nothing is quantized.
    pub only_copy: bool,
}

/// Parts of names that are never quantized, whatever the architecture (norms and routers are
/// matched separately).
const NEVER_QUANTIZED: [&str; 34] = [
    "ffn_gate_inp.weight",
    "ffn_gate_tid2eid.weight",
    "altup",
    "laurel",
    "per_layer_model_proj",
    "ssm_conv1d",
    "shortconv.conv.weight",
    "indexer.k_proj.weight",
    "indexer.q_proj.weight",
    "time_mix_first.weight",
    "time_mix_w0.weight",
    "time_mix_w1.weight",
    "time_mix_w2.weight",
    "time_mix_v0.weight",
    "time_mix_v1.weight",
    "time_mix_v2.weight",
    "time_mix_a0.weight",
    "time_mix_a1.weight",
    "time_mix_a2.weight",
    "time_mix_g1.weight",
    "time_mix_g2.weight",
    "time_mix_decay_w1.weight",
    "time_mix_decay_w2.weight",
    "time_mix_lerp_fused.weight",
    "attn_rel_b.weight",
    ".position_embd",
    "sam.pos_embd",
    "sam.neck.",
    "sam.net_",
    ".rel_pos",
    ".patch_embd",
    ".patch_merger",
    "a.rvq.codebook",
    "mm.a.code_embd",
];

/// More parts never quantized in `glm5-next` models.
const NEVER_QUANTIZED_GLM5_NEXT: [&str; 14] = [
    "hc_",
    "indexer.attn_q_b",
    "indexer.attn_k",
    "indexer.proj",
    "indexer_compressor_gate",
    "indexer_compressor_ape",
    "ssm_f_a.weight",
    "ssm_f_b.weight",
    "ssm_g_a.weight",
    "ssm_g_b.weight",
    "ssm_beta.weight",
    "attn_kv_a_mqa.weight",
    "attn_k_b.weight",
    "attn_v_b.weight",
];

/// GGML's `ggml_n_dims`: 1 + the index of the last dimension that is not 1.
pub fn n_dims(ne: &[i64]) -> usize {
    ne.iter().rposition(|&n| n != 1).map_or(1, |i| i + 1)
}

/// Whether the tensor may change type at all (llama.cpp's `tensor_allows_quantization`): 2-D
/// and 3-D `*weight` tensors that are not norms, routers, small special tables or (with
/// `--leave-output-tensor`) the output.
pub fn allows_quantization(opts: &Options, arch: &str, name: &str, ne: &[i64]) -> bool {
    if opts.only_copy || n_dims(ne) < 2 || !name.ends_with("weight") {
        return false;
    }
    let excluded = |parts: &[&str]| parts.iter().any(|p| name.contains(p));
    !(name.contains("_norm.weight")
        || (!opts.quantize_output && name == "output.weight")
        || matches!(name, "position_embd.weight" | "token_types.weight")
        || excluded(&NEVER_QUANTIZED)
        || (arch == "glm5-next" && excluded(&NEVER_QUANTIZED_GLM5_NEXT)))
}

/// Whether quantizing `name` to `ty` in the mix `ftype` needs importance data (llama.cpp's
/// `tensor_requires_imatrix`): the 1–2-bit IQ types and IQ3_XXS, and Q2_K in a Q2_K_S file;
/// never the token embeddings or the output.
pub fn requires_imatrix(name: &str, ty: Type, ftype: Ftype) -> bool {
    if is_token_embd(name) || name == "output.weight" {
        return false;
    }
    match ty {
        Type::IQ3_XXS | Type::IQ2_XXS | Type::IQ2_XS | Type::IQ2_S | Type::IQ1_M | Type::IQ1_S => {
            true
        }
        Type::Q2_K => ftype == Ftype::Q2_K_S,
        _ => false,
    }
}

/// A tensor whose rows were not whole blocks of the type its rules chose.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fallback {
    /// The type the rules chose.
    pub wanted: Type,
    /// The type it got instead.
    pub got: Type,
}

/// The type of each tensor, decided in llama.cpp's order with its counters.
pub struct Planner<'a> {
    model: &'a Model,
    opts: &'a Options,
    has_imatrix: bool,
    /// No `output.weight`: the token embeddings double as the output and follow its rules.
    tied_embeddings: bool,
    n_attn_v: i64,
    i_attn_v: i64,
    i_ffn_down: i64,
    i_ffn_gate: i64,
    i_ffn_up: i64,
}

/// Whether a layer gets more bits in the `_M` mixes: the first and last eighths, and every
/// third layer between (llama.cpp's `use_more_bits`).
fn use_more_bits(i_layer: i64, n_layers: i64) -> bool {
    i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2
}

impl<'a> Planner<'a> {
    /// A planner for a file whose tensors are named `names` (all of them, in any order).
    pub fn new<'n>(
        model: &'a Model,
        opts: &'a Options,
        has_imatrix: bool,
        names: impl IntoIterator<Item = &'n str>,
    ) -> Planner<'a> {
        let (mut n_attn_v, mut tied_embeddings) = (0, true);
        for name in names {
            let c = Category::of(name);
            n_attn_v += i64::from(c.is_attn_v());
            tied_embeddings &= c != Category::Output;
        }
        Planner {
            model,
            opts,
            has_imatrix,
            tied_embeddings,
            n_attn_v,
            i_attn_v: 0,
            i_ffn_down: 0,
            i_ffn_gate: 0,
            i_ffn_up: 0,
        }
    }

    /// The type of the tensor `name` of type `ty` and shape `ne` (llama.cpp's
    /// `llama_tensor_get_type`), with the fallback taken when its rows are not whole blocks.
    /// `Err` when no fallback exists or a layer cannot be read from a MoE tensor's name.
    pub fn target(
        &mut self,
        name: &str,
        ty: Type,
        ne: &[i64; 4],
    ) -> Result<(Type, Option<Fallback>), String> {
        if !allows_quantization(self.opts, &self.model.arch, name, ne) {
            return Ok((ty, None));
        }
        let category = Category::of(name);
        if let (Some(t), Category::TokenEmbd) = (self.opts.token_embd_type, category) {
            return Ok((t, None));
        }
        if let (Some(t), Category::Output) = (self.opts.output_type, category) {
            return Ok((t, None));
        }
        let Some(default) = self.opts.ftype.default_type() else {
            return Err(format!(
                "llama.cpp has no tensor type for file type {:?}",
                self.opts.ftype
            ));
        };
        if !default.is_quantized() {
            return Ok((default, None));
        }
        let wanted = if self.opts.pure {
            default
        } else {
            self.mix_type(default, name, ne, category)?
        };
        fallback(name, ne[0], wanted)
    }

    /// The layer and layer count the rules use for an `ffn_*` tensor: the counter, or in a MoE
    /// model (whose expert tensors need not come in layer order) the layer in the name.
    fn layer_info(&self, counter: i64, name: &str) -> Result<(i64, i64), String> {
        let n_layer = i64::from(self.model.n_layer);
        if self.model.n_expert <= 1 {
            return Ok((counter, n_layer));
        }
        match layer_of(name) {
            Some(l) if (0..n_layer).contains(&l) => Ok((l, n_layer)),
            Some(l) => Err(format!(
                "tensor {name}: layer {l} is not in [0, {n_layer}) (block_count)"
            )),
            None => Err(format!("tensor {name}: no layer (blk.N.) in its name")),
        }
    }

    /// The mix's type for one tensor (llama.cpp's `llama_tensor_get_type_impl`).
    fn mix_type(
        &mut self,
        default: Type,
        name: &str,
        ne: &[i64; 4],
        category: Category,
    ) -> Result<Type, String> {
        use Category as C;
        use Ftype as F;
        use Type as T;
        let f = self.opts.ftype;
        let m = self.model;
        let (gqa, n_expert, falcon) = (m.n_gqa(), m.n_expert, m.is_falcon());
        let mut t = default;

        if m.arch == "glm5-next"
            && ["attn_q_a", "attn_q_b", "nextn.eh_proj"]
                .iter()
                .any(|p| name.contains(p))
        {
            return Ok(T::Q8_0);
        }
        // Two bits or fewer per weight (the IQ1/IQ2 mixes).
        let tiny = matches!(
            f,
            F::IQ2_XXS | F::IQ2_XS | F::IQ1_S | F::IQ2_S | F::IQ2_M | F::IQ1_M
        );
        let iq2_s_or_m = matches!(f, F::IQ2_S | F::IQ2_M);

        if category == C::Output || (self.tied_embeddings && category == C::TokenEmbd) {
            t = if let Some(o) = self.opts.output_type {
                o
            } else if f == F::MXFP4_MOE || falcon || ne[0] % t.blck_size() as i64 != 0 {
                T::Q8_0
            } else if tiny || f == F::IQ3_XXS {
                T::Q5_K
            } else if t != T::Q8_0 {
                T::Q6_K
            } else {
                t
            };
        } else if f == F::MXFP4_MOE {
            // Expert tensors (3-D) in MXFP4, the rest in Q8_0; bailingmoe3's 3-D attention
            // projections are not experts.
            let expert =
                m.arch != "bailingmoe3" || matches!(category, C::FfnUp | C::FfnGate | C::FfnDown);
            t = if ne[2] > 1 && expert {
                T::MXFP4
            } else {
                T::Q8_0
            };
        } else if category == C::TokenEmbd {
            // (--token-embedding-type was applied before the mix.)
            if matches!(f, F::IQ2_XXS | F::IQ2_XS | F::IQ1_S | F::IQ1_M) {
                t = T::Q2_K;
            } else if matches!(f, F::IQ2_S | F::IQ2_M | F::IQ3_XXS) {
                t = T::IQ3_S;
            } else if matches!(f, F::TQ1_0 | F::TQ2_0 | F::Q2_0) {
                t = T::Q4_K;
            }
        } else if tiny {
            if category.is_attn_v() {
                t = if gqa >= 4 || n_expert >= 4 {
                    T::Q4_K
                } else if iq2_s_or_m {
                    T::IQ3_S
                } else {
                    T::Q2_K
                };
                self.i_attn_v += 1;
            } else if n_expert == 8 && category == C::AttnK {
                t = T::Q4_K;
            } else if category == C::FfnDown {
                if self.i_ffn_down < i64::from(m.n_layer) / 8 {
                    t = if iq2_s_or_m { T::IQ3_S } else { T::Q2_K };
                }
                self.i_ffn_down += 1;
            } else if category == C::AttnOutput {
                if n_expert == 8 {
                    t = T::Q5_K;
                } else if matches!(f, F::IQ1_S | F::IQ1_M) {
                    t = T::IQ2_XXS;
                } else if iq2_s_or_m {
                    t = T::IQ3_S;
                }
            }
        } else if category.is_attn_v() {
            // attn_qkv tensors take these rules too: llama.cpp tests for attn_v-like roles
            // before its own branch for attn_qkv, which is never reached.
            let i = self.i_attn_v;
            t = match f {
                F::Q2_K if gqa >= 4 => T::Q4_K,
                F::Q2_K => T::Q3_K,
                F::Q2_K_S if gqa >= 4 => T::Q4_K,
                F::IQ3_XXS if gqa >= 4 => T::Q4_K,
                F::IQ3_XXS if !self.has_imatrix => T::IQ3_S,
                F::IQ3_XXS => T::IQ3_XXS,
                F::IQ3_XS | F::IQ3_S if gqa >= 4 => T::Q4_K,
                F::IQ3_M => T::Q4_K,
                F::Q3_K_M if i < 2 => T::Q5_K,
                F::Q3_K_M => T::Q4_K,
                F::Q3_K_L => T::Q5_K,
                F::IQ4_NL | F::IQ4_XS if gqa >= 4 => T::Q5_K,
                F::Q4_K_M | F::Q5_K_M if use_more_bits(i, self.n_attn_v) => T::Q6_K,
                F::Q4_K_S if i < 4 => T::Q5_K,
                _ => t,
            };
            if m.is_70b() && matches!(t, T::Q3_K | T::Q4_K) {
                // 70B models share attn_v between 8 heads: it is small, so more bits are cheap.
                t = T::Q5_K;
            }
            if n_expert == 8 {
                t = T::Q8_0;
            }
            self.i_attn_v += 1;
        } else if category == C::AttnK {
            t = match f {
                _ if n_expert == 8 => T::Q8_0,
                F::IQ3_XS => T::IQ3_XXS,
                F::IQ3_XXS => T::IQ2_S,
                _ => t,
            };
        } else if category == C::AttnQ {
            t = match f {
                F::IQ3_XS => T::IQ3_XXS,
                F::IQ3_XXS => T::IQ2_S,
                _ => t,
            };
        } else if category == C::FfnDown {
            let (il, nl) = self.layer_info(self.i_ffn_down, name)?;
            let more = use_more_bits(il, nl);
            let first_eighth = il < nl / 8;
            t = match f {
                F::Q2_K => T::Q3_K,
                F::Q2_K_S if first_eighth => T::Q4_K,
                F::Q2_K_S => t,
                F::IQ3_XXS if !self.has_imatrix && first_eighth => T::Q4_K,
                F::IQ3_XXS if !self.has_imatrix => T::Q3_K,
                F::Q3_K_M if il < nl / 16 => T::Q5_K,
                F::Q3_K_M if !falcon || more => T::Q4_K,
                F::Q3_K_M => T::Q3_K,
                F::IQ3_M if first_eighth || (n_expert == 8 && more) => T::Q4_K,
                F::Q3_K_L if falcon => T::Q4_K,
                F::Q3_K_L => T::Q5_K,
                F::Q4_K_M if falcon && il < nl / 16 => T::Q6_K,
                F::Q4_K_M if falcon && more => T::Q5_K,
                F::Q4_K_M if falcon => T::Q4_K,
                F::Q4_K_M if more => T::Q6_K,
                F::Q4_K_M => t,
                F::IQ4_NL | F::IQ4_XS if first_eighth && !self.has_imatrix => T::Q5_K,
                F::Q5_K_M if more => T::Q6_K,
                F::Q4_K_S if !falcon && first_eighth => T::Q5_K,
                // Guards the first ffn_down layers, which go wrong even with an imatrix.
                F::Q4_0 if self.has_imatrix && first_eighth => T::Q4_1,
                F::Q5_0 if self.has_imatrix && first_eighth => T::Q5_1,
                _ => t,
            };
            self.i_ffn_down += 1;
        } else if category == C::AttnOutput {
            t = if falcon {
                if f == F::Q3_K_L {
                    T::Q4_K
                } else {
                    t
                }
            } else if n_expert == 8 {
                let bumped = matches!(
                    f,
                    F::Q2_K
                        | F::IQ3_XS
                        | F::IQ3_XXS
                        | F::Q3_K_S
                        | F::Q3_K_M
                        | F::IQ4_NL
                        | F::Q4_K_S
                        | F::Q4_K_M
                        | F::IQ3_S
                        | F::IQ3_M
                        | F::IQ4_XS
                );
                if bumped {
                    T::Q5_K
                } else {
                    t
                }
            } else {
                match f {
                    F::Q2_K => T::Q3_K,
                    F::IQ3_XXS => T::IQ3_S,
                    F::Q3_K_M | F::IQ3_M => T::Q4_K,
                    F::Q3_K_L => T::Q5_K,
                    _ => t,
                }
            };
        } else if matches!(category, C::FfnGate | C::FfnUp) {
            let counter = match category {
                C::FfnGate => &mut self.i_ffn_gate,
                _ => &mut self.i_ffn_up,
            };
            let i = *counter;
            *counter += 1;
            let (il, nl) = self.layer_info(i, name)?;
            if f == F::IQ3_XS && il >= nl / 8 && il < 7 * nl / 8 {
                t = T::IQ3_XXS;
            }
        }
        Ok(t)
    }
}

/// `wanted`, or when rows of `ncols` are not whole blocks of it, llama.cpp's fallback: a
/// 32-block type of about the same size, or F16 when that does not fit either
/// (`tensor_type_fallback`).
pub fn fallback(name: &str, ncols: i64, wanted: Type) -> Result<(Type, Option<Fallback>), String> {
    use Type as T;
    let fits = |t: Type| ncols % t.blck_size() as i64 == 0;
    if fits(wanted) {
        return Ok((wanted, None));
    }
    let mut got = match wanted {
        T::IQ1_S
        | T::IQ1_M
        | T::IQ2_XXS
        | T::IQ2_XS
        | T::IQ2_S
        | T::IQ3_XXS
        | T::IQ3_S
        | T::IQ4_XS => T::IQ4_NL,
        T::Q2_0 | T::Q2_K | T::Q3_K | T::TQ1_0 | T::TQ2_0 => T::Q4_0,
        T::Q4_K => T::Q5_0,
        T::Q5_K => T::Q5_1,
        T::Q6_K => T::Q8_0,
        t if t.blck_size() <= 32 => t,
        t => {
            return Err(format!(
                "tensor {name}: rows of {ncols} are not whole {t} blocks of {}, and llama.cpp \
                 has no fallback type for {t}",
                t.blck_size()
            ))
        }
    };
    if !fits(got) {
        got = T::F16;
    }
    Ok((got, Some(Fallback { wanted, got })))
}

#[cfg(test)]
mod tests {
    use super::*;
    use Type as T;

    fn model(n_layer: u32, n_head: u32, n_head_kv: u32, n_expert: u32) -> Model {
        Model {
            arch: "llama".into(),
            n_layer,
            n_head,
            n_head_kv,
            n_expert,
        }
    }

    fn options(ftype: Ftype) -> Options {
        Options {
            ftype,
            pure: false,
            quantize_output: true,
            output_type: None,
            token_embd_type: None,
            only_copy: false,
        }
    }

    /// The names of a dense model's weights and norms, in llama.cpp's order.
    fn names(n_layer: u32, tied: bool) -> Vec<String> {
        let mut v = vec!["token_embd.weight".to_string(), "output_norm.weight".into()];
        if !tied {
            v.push("output.weight".into());
        }
        for l in 0..n_layer {
            for t in [
                "attn_k",
                "attn_norm",
                "attn_output",
                "attn_q",
                "attn_v",
                "ffn_down",
                "ffn_gate",
                "ffn_up",
            ] {
                v.push(format!("blk.{l}.{t}.weight"));
            }
        }
        v.sort_by(|a, b| llama_order(a, b));
        v
    }

    /// Every tensor's type for a model whose rows have `cols` columns.
    fn plan(
        model: &Model,
        opts: &Options,
        imatrix: bool,
        names: &[String],
        cols: i64,
    ) -> Vec<(String, Type)> {
        let mut p = Planner::new(model, opts, imatrix, names.iter().map(String::as_str));
        names
            .iter()
            .map(|n| {
                let ne = if n.contains("norm") {
                    [cols, 1, 1, 1]
                } else {
                    [cols, cols, 1, 1]
                };
                (n.clone(), p.target(n, T::F16, &ne).unwrap().0)
            })
            .collect()
    }

    fn type_of(plan: &[(String, Type)], name: &str) -> Type {
        plan.iter().find(|(n, _)| n == name).unwrap().1
    }

    #[test]
    fn roles_come_from_names() {
        use Category as C;
        for (name, c) in [
            ("output.weight", C::Output),
            ("token_embd.weight", C::TokenEmbd),
            ("per_layer_token_embd.weight", C::TokenEmbd),
            ("blk.0.attn_qkv.weight", C::AttnQkv),
            ("blk.0.attn_kv_b.weight", C::AttnKvB),
            ("blk.3.attn_v.weight", C::AttnV),
            ("blk.3.attn_k.weight", C::AttnK),
            ("blk.3.attn_q.weight", C::AttnQ),
            ("blk.3.attn_output.weight", C::AttnOutput),
            ("blk.3.ffn_up_exps.weight", C::FfnUp),
            ("blk.3.ffn_gate.weight", C::FfnGate),
            ("blk.3.ffn_down_shexp.weight", C::FfnDown),
            ("blk.3.attn_q_norm.weight", C::Other),
        ] {
            assert_eq!(Category::of(name), c, "{name}");
        }
    }

    #[test]
    fn only_multi_dimensional_weights_that_are_not_norms_are_quantized() {
        let o = options(Ftype::Q4_K_M);
        let m2 = [64, 64, 1, 1];
        assert!(allows_quantization(&o, "llama", "blk.0.attn_q.weight", &m2));
        assert!(!allows_quantization(
            &o,
            "llama",
            "blk.0.attn_q.weight",
            &[64, 1, 1, 1]
        ));
        assert!(!allows_quantization(&o, "llama", "blk.0.attn_q.bias", &m2));
        assert!(!allows_quantization(
            &o,
            "llama",
            "blk.0.attn_norm.weight",
            &m2
        ));
        assert!(!allows_quantization(
            &o,
            "llama",
            "blk.0.ffn_gate_inp.weight",
            &m2
        ));
        assert!(!allows_quantization(
            &o,
            "gemma3n",
            "blk.0.altup_proj.weight",
            &m2
        ));
        assert!(!allows_quantization(
            &o,
            "bert",
            "position_embd.weight",
            &m2
        ));
        assert!(allows_quantization(&o, "llama", "blk.0.hc_x.weight", &m2));
        assert!(!allows_quantization(
            &o,
            "glm5-next",
            "blk.0.hc_x.weight",
            &m2
        ));
        assert!(allows_quantization(&o, "llama", "output.weight", &m2));
        let leave = Options {
            quantize_output: false,
            ..o.clone()
        };
        assert!(!allows_quantization(&leave, "llama", "output.weight", &m2));
        let copy = Options {
            only_copy: true,
            ..o
        };
        assert!(!allows_quantization(
            &copy,
            "llama",
            "blk.0.attn_q.weight",
            &m2
        ));
    }

    #[test]
    fn q4_k_m_gives_more_bits_to_attn_v_and_ffn_down_of_some_layers() {
        let m = model(32, 32, 8, 0);
        let names = names(32, false);
        let p = plan(&m, &options(Ftype::Q4_K_M), false, &names, 4096);
        // use_more_bits(i, 32): i < 4, i >= 28, or (i - 4) % 3 == 2.
        let more = |i: i64| !(4..28).contains(&i) || (i - 4) % 3 == 2;
        for l in 0..32 {
            let want = if more(l) { T::Q6_K } else { T::Q4_K };
            assert_eq!(
                type_of(&p, &format!("blk.{l}.attn_v.weight")),
                want,
                "attn_v {l}"
            );
            assert_eq!(
                type_of(&p, &format!("blk.{l}.ffn_down.weight")),
                want,
                "ffn_down {l}"
            );
            for t in ["attn_q", "attn_k", "attn_output", "ffn_gate", "ffn_up"] {
                assert_eq!(
                    type_of(&p, &format!("blk.{l}.{t}.weight")),
                    T::Q4_K,
                    "{t} {l}"
                );
            }
            assert_eq!(
                type_of(&p, &format!("blk.{l}.attn_norm.weight")),
                T::F16,
                "kept"
            );
        }
        assert_eq!(type_of(&p, "output.weight"), T::Q6_K);
        assert_eq!(type_of(&p, "token_embd.weight"), T::Q4_K);
        assert_eq!(type_of(&p, "output_norm.weight"), T::F16);
    }

    #[test]
    fn q3_k_m_and_q5_k_s_follow_their_rules() {
        let m = model(32, 32, 32, 0);
        let names = names(32, false);
        let p = plan(&m, &options(Ftype::Q3_K_M), false, &names, 4096);
        for l in 0..32 {
            let v = if l < 2 { T::Q5_K } else { T::Q4_K };
            assert_eq!(
                type_of(&p, &format!("blk.{l}.attn_v.weight")),
                v,
                "attn_v {l}"
            );
            let d = if l < 2 { T::Q5_K } else { T::Q4_K };
            assert_eq!(
                type_of(&p, &format!("blk.{l}.ffn_down.weight")),
                d,
                "ffn_down {l}"
            );
            assert_eq!(type_of(&p, &format!("blk.{l}.attn_output.weight")), T::Q4_K);
            assert_eq!(type_of(&p, &format!("blk.{l}.attn_q.weight")), T::Q3_K);
        }
        let p = plan(&m, &options(Ftype::Q5_K_S), false, &names, 4096);
        assert_eq!(type_of(&p, "blk.0.attn_v.weight"), T::Q5_K);
        assert_eq!(type_of(&p, "blk.0.ffn_down.weight"), T::Q5_K);
        assert_eq!(type_of(&p, "output.weight"), T::Q6_K);
    }

    #[test]
    fn imatrix_and_gqa_change_the_iq_mixes() {
        let names = names(8, false);
        let mha = model(8, 8, 8, 0);
        let gqa = model(8, 8, 2, 0);
        let iq3 = options(Ftype::IQ3_XXS);
        assert_eq!(
            type_of(&plan(&mha, &iq3, false, &names, 256), "blk.3.attn_v.weight"),
            T::IQ3_S
        );
        assert_eq!(
            type_of(&plan(&mha, &iq3, true, &names, 256), "blk.3.attn_v.weight"),
            T::IQ3_XXS
        );
        assert_eq!(
            type_of(&plan(&gqa, &iq3, true, &names, 256), "blk.3.attn_v.weight"),
            T::Q4_K
        );
        // Without an imatrix, ffn_down of the first eighth gets Q4_K, the rest Q3_K.
        let p = plan(&mha, &iq3, false, &names, 256);
        assert_eq!(type_of(&p, "blk.0.ffn_down.weight"), T::Q4_K);
        assert_eq!(type_of(&p, "blk.1.ffn_down.weight"), T::Q3_K);
        assert_eq!(type_of(&p, "blk.1.attn_k.weight"), T::IQ2_S);
        assert_eq!(type_of(&p, "token_embd.weight"), T::IQ3_S);
        assert_eq!(type_of(&p, "output.weight"), T::Q5_K);
        let iq2 = plan(&mha, &options(Ftype::IQ2_XXS), true, &names, 256);
        assert_eq!(type_of(&iq2, "blk.0.attn_v.weight"), T::Q2_K);
        assert_eq!(
            type_of(&iq2, "blk.0.ffn_down.weight"),
            T::Q2_K,
            "first eighth"
        );
        assert_eq!(type_of(&iq2, "blk.1.ffn_down.weight"), T::IQ2_XXS);
        assert_eq!(type_of(&iq2, "token_embd.weight"), T::Q2_K);
    }

    #[test]
    fn tied_embeddings_take_the_output_rules_and_odd_rows_fall_back() {
        // Gemma 3 270M: 18 layers, 4 query heads per key/value head, rows of 640.
        let m = model(18, 4, 1, 0);
        let names = names(18, true);
        let p = plan(&m, &options(Ftype::Q4_K_M), false, &names, 640);
        assert_eq!(
            type_of(&p, "token_embd.weight"),
            T::Q8_0,
            "640 is not whole q4_K blocks"
        );
        assert_eq!(
            type_of(&p, "blk.0.attn_q.weight"),
            T::Q5_0,
            "q4_K's fallback"
        );
        assert_eq!(
            type_of(&p, "blk.0.attn_v.weight"),
            T::Q8_0,
            "q6_K's fallback"
        );
        assert_eq!(type_of(&p, "blk.3.attn_v.weight"), T::Q5_0);
        let p = plan(&m, &options(Ftype::Q4_K_M), false, &names, 1024);
        assert_eq!(type_of(&p, "token_embd.weight"), T::Q6_K);
        let p = plan(&m, &options(Ftype::IQ4_XS), false, &names, 640);
        assert_eq!(type_of(&p, "blk.5.ffn_up.weight"), T::IQ4_NL);
        assert_eq!(
            type_of(&p, "blk.0.attn_v.weight"),
            T::Q5_1,
            "gqa 4: q5_K, then its fallback"
        );
        assert_eq!(
            type_of(&p, "blk.0.ffn_down.weight"),
            T::Q5_1,
            "q5_K without imatrix"
        );
    }

    #[test]
    fn fallbacks_follow_llama_cpp() {
        let fb = |cols, t| fallback("w", cols, t).map(|(t, _)| t);
        assert_eq!(fb(640, T::Q4_K), Ok(T::Q5_0));
        assert_eq!(fb(640, T::Q5_K), Ok(T::Q5_1));
        assert_eq!(fb(640, T::Q6_K), Ok(T::Q8_0));
        assert_eq!(fb(640, T::Q3_K), Ok(T::Q4_0));
        assert_eq!(fb(640, T::IQ2_XS), Ok(T::IQ4_NL));
        assert_eq!(fb(96, T::Q2_0), Ok(T::Q4_0));
        assert_eq!(fb(48, T::Q4_K), Ok(T::F16), "q5_0 does not fit either");
        assert_eq!(fb(48, T::Q8_0), Ok(T::F16), "a 32-block type goes to F16");
        assert_eq!(fb(512, T::Q4_K), Ok(T::Q4_K));
        assert!(fb(96, T::Q1_0).unwrap_err().contains("no fallback"));
        let (_, f) = fallback("w", 640, T::Q4_K).unwrap();
        assert_eq!(
            f,
            Some(Fallback {
                wanted: T::Q4_K,
                got: T::Q5_0
            })
        );
    }

    #[test]
    fn pure_and_explicit_types_override_the_mix() {
        let m = model(8, 8, 8, 0);
        let names = names(8, false);
        let pure = Options {
            pure: true,
            ..options(Ftype::Q4_K_M)
        };
        let p = plan(&m, &pure, false, &names, 512);
        assert!(p
            .iter()
            .filter(|(n, _)| !n.contains("norm"))
            .all(|(_, t)| *t == T::Q4_K));
        let set = Options {
            output_type: Some(T::Q8_0),
            token_embd_type: Some(T::F16),
            ..pure
        };
        let p = plan(&m, &set, false, &names, 512);
        assert_eq!(type_of(&p, "output.weight"), T::Q8_0);
        assert_eq!(type_of(&p, "token_embd.weight"), T::F16);
        // F16 and F32 mixes convert every quantizable tensor, without rules.
        let p = plan(&m, &options(Ftype::AllF32), false, &names, 48);
        assert_eq!(type_of(&p, "blk.0.attn_v.weight"), T::F32);
    }

    #[test]
    fn moe_layers_come_from_names() {
        let m = model(4, 8, 8, 8);
        let o = options(Ftype::Q4_K_M);
        let names = [
            "blk.2.ffn_down_exps.weight",
            "blk.9.ffn_down_exps.weight",
            "ffn_down.weight",
        ];
        let mut p = Planner::new(&m, &o, false, names);
        let ne = [256, 256, 8, 1];
        // use_more_bits(2, 4): 2 >= 7 * 4 / 8.
        assert_eq!(p.target(names[0], T::F16, &ne).unwrap().0, T::Q6_K);
        assert!(p
            .target(names[1], T::F16, &ne)
            .unwrap_err()
            .contains("layer 9"));
        assert!(p
            .target(names[2], T::F16, &ne)
            .unwrap_err()
            .contains("no layer"));
        // The 8-expert rule: attn_v in Q8_0.
        assert_eq!(
            p.target("blk.0.attn_v.weight", T::F16, &ne).unwrap().0,
            T::Q8_0
        );
    }

    #[test]
    fn imatrix_requirements_and_order() {
        assert!(requires_imatrix(
            "blk.0.attn_q.weight",
            T::IQ2_XXS,
            Ftype::IQ2_XXS
        ));
        assert!(requires_imatrix(
            "blk.0.attn_q.weight",
            T::IQ3_XXS,
            Ftype::IQ3_XXS
        ));
        assert!(!requires_imatrix(
            "token_embd.weight",
            T::IQ2_XXS,
            Ftype::IQ2_XXS
        ));
        assert!(!requires_imatrix("output.weight", T::IQ1_S, Ftype::IQ1_S));
        assert!(requires_imatrix(
            "blk.0.ffn_up.weight",
            T::Q2_K,
            Ftype::Q2_K_S
        ));
        assert!(!requires_imatrix(
            "blk.0.ffn_up.weight",
            T::Q2_K,
            Ftype::Q2_K
        ));
        assert!(!requires_imatrix(
            "blk.0.ffn_up.weight",
            T::IQ4_XS,
            Ftype::IQ4_XS
        ));
        let mut v = [
            "blk.10.a",
            "blk.2.b",
            "output.weight",
            "blk.2.a",
            "token_embd.weight",
        ];
        v.sort_by(|a, b| llama_order(a, b));
        assert_eq!(
            v,
            [
                "output.weight",
                "token_embd.weight",
                "blk.2.a",
                "blk.2.b",
                "blk.10.a"
            ]
        );
        assert_eq!(layer_of("blk.7.x"), Some(7));
        assert_eq!(layer_of("blk.-3.x"), Some(-3));
        assert_eq!(layer_of("blk.x"), None);
        assert_eq!(layer_of("blkx.1"), None);
    }

    #[test]
    fn model_facts_come_from_metadata() {
        let mut w = ggml::gguf::GgufWriter::new();
        w.set("general.architecture", "gemma3").unwrap();
        w.set("gemma3.block_count", 18u32).unwrap();
        w.set("gemma3.attention.head_count", 4u32).unwrap();
        w.set("gemma3.attention.head_count_kv", vec![1u32, 1])
            .unwrap();
        let f = GgufFile::from_vec(w.to_bytes().unwrap()).unwrap();
        let m = Model::from_gguf(&f).unwrap();
        assert_eq!(
            (m.n_layer, m.n_head, m.n_head_kv, m.n_expert, m.n_gqa()),
            (18, 4, 1, 0, 4)
        );
        assert!(!m.is_70b());
        assert!(model(80, 64, 8, 0).is_70b() && !model(80, 64, 64, 0).is_70b());
        let empty = GgufFile::from_vec(ggml::gguf::GgufWriter::new().to_bytes().unwrap()).unwrap();
        assert!(Model::from_gguf(&empty)
            .unwrap_err()
            .contains("general.architecture"));
    }
}
