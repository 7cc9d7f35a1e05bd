//! Tiny models with random weights, written with `ggml::gguf`'s writer under llama.cpp's names
//! and keys, and an f64 forward pass of them to check the graphs against.

use std::collections::HashMap;

use ggml::gguf::{Array, GgufFile, GgufWriter, Value};
use ggml::Type;

/// The shape and options of a tiny model.
#[derive(Clone, Debug)]
pub struct Spec {
    pub arch: &'static str,
    pub n_vocab: usize,
    pub n_embd: usize,
    pub n_layer: usize,
    pub n_head: usize,
    pub n_head_kv: usize,
    pub head_dim: usize,
    pub n_ff: usize,
    pub n_ctx_train: usize,
    /// Gemma 3's sliding window and pattern.
    pub swa: Option<(usize, usize)>,
    pub softcap: Option<f32>,
    /// Type of the 2-d weight matrices.
    pub weight_type: Type,
    pub seed: u64,
}

impl Spec {
    pub fn new(arch: &'static str) -> Spec {
        Spec {
            arch,
            n_vocab: 40,
            n_embd: 32,
            n_layer: 2,
            n_head: 4,
            n_head_kv: 2,
            head_dim: 8,
            n_ff: 64,
            n_ctx_train: 128,
            swa: (arch == "gemma3").then_some((4, 2)),
            softcap: None,
            weight_type: Type::F32,
            seed: 7,
        }
    }

    pub fn rope_neox(&self) -> bool {
        matches!(self.arch, "qwen2" | "qwen3" | "gemma3")
    }

    pub fn is_swa(&self, il: usize) -> bool {
        self.swa.is_some_and(|(_, p)| il % p < p - 1)
    }
}

/// A tiny model: the file's bytes and the f32 values of every tensor (before quantization).
pub struct Tiny {
    pub spec: Spec,
    pub bytes: Vec<u8>,
    pub w: HashMap<String, Vec<f32>>,
}

struct Lcg(u64);

impl Lcg {
    /// Uniform in [-1, 1).
    fn next(&mut self) -> f32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
}

fn le_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

impl Tiny {
    pub fn new(spec: Spec) -> Tiny {
        Tiny::with_kv(spec, &[])
    }

    /// A tiny model with extra metadata (overriding the generated keys).
    pub fn with_kv(spec: Spec, extra: &[(&str, Value)]) -> Tiny {
        let s = &spec;
        let a = s.arch;
        let mut w = GgufWriter::new();
        let mut set = |k: String, v: Value| w.set(&k, v).unwrap();
        set("general.architecture".into(), a.into());
        set(format!("{a}.context_length"), (s.n_ctx_train as u32).into());
        set(format!("{a}.embedding_length"), (s.n_embd as u32).into());
        set(format!("{a}.block_count"), (s.n_layer as u32).into());
        set(format!("{a}.feed_forward_length"), (s.n_ff as u32).into());
        set(
            format!("{a}.attention.head_count"),
            (s.n_head as u32).into(),
        );
        set(
            format!("{a}.attention.head_count_kv"),
            (s.n_head_kv as u32).into(),
        );
        set(
            format!("{a}.attention.key_length"),
            (s.head_dim as u32).into(),
        );
        set(
            format!("{a}.attention.value_length"),
            (s.head_dim as u32).into(),
        );
        if a == "bert" {
            set(format!("{a}.attention.layer_norm_epsilon"), 1e-12f32.into());
            set("tokenizer.ggml.token_type_count".to_string(), 2u32.into());
            set(format!("{a}.pooling_type"), 1u32.into());
            set(format!("{a}.attention.causal"), false.into());
        } else {
            set(
                format!("{a}.attention.layer_norm_rms_epsilon"),
                1e-6f32.into(),
            );
            set(format!("{a}.rope.freq_base"), 10000.0f32.into());
        }
        if let Some((window, pattern)) = s.swa {
            set(
                format!("{a}.attention.sliding_window"),
                (window as u32).into(),
            );
            set(
                format!("{a}.attention.sliding_window_pattern"),
                (pattern as u32).into(),
            );
            set(format!("{a}.rope.freq_base"), 1_000_000.0f32.into());
        }
        if let Some(cap) = s.softcap {
            set(format!("{a}.final_logit_softcapping"), cap.into());
        }
        // The vocabulary: WordPiece words `▁t{i}` for BERT; for the decoders a SentencePiece
        // one of single characters (`▁`, `t`, digits, letters) so that any such text
        // tokenizes.
        let tokens: Vec<String> = (0..s.n_vocab)
            .map(|i| match (a, i) {
                ("bert", 0) => "[PAD]".into(),
                ("bert", 1) => "[UNK]".into(),
                ("bert", 2) => "[CLS]".into(),
                ("bert", 3) => "[SEP]".into(),
                (_, 0) => "<unk>".into(),
                (_, 1) => "<s>".into(),
                (_, 2) => "</s>".into(),
                ("bert", _) => format!("\u{2581}t{i}"),
                (_, 3) => "\u{2581}".into(),
                (_, 4) => "t".into(),
                (_, 5..=14) => ((b'0' + (i - 5) as u8) as char).to_string(),
                (_, 15..=39) => "abcdefghijklmnopqrsuvwxyz"[i - 15..i - 14].to_string(),
                _ => format!("x{i}"),
            })
            .collect();
        let types: Vec<i32> = (0..s.n_vocab)
            .map(|i| match (a == "bert", i) {
                (true, 1) | (false, 0) => 2,
                (true, 0 | 2 | 3) | (false, 1 | 2) => 3,
                _ => 1,
            })
            .collect();
        set(
            "tokenizer.ggml.model".into(),
            (if a == "bert" { "bert" } else { "llama" }).into(),
        );
        set(
            "tokenizer.ggml.tokens".into(),
            Value::Array(Array::from(tokens)),
        );
        set("tokenizer.ggml.token_type".into(), types.into());
        if a == "bert" {
            set("tokenizer.ggml.unknown_token_id".into(), 1u32.into());
            set("tokenizer.ggml.bos_token_id".into(), 2u32.into());
            set("tokenizer.ggml.seperator_token_id".into(), 3u32.into());
        } else {
            set(
                "tokenizer.ggml.scores".into(),
                vec![0.0f32; s.n_vocab].into(),
            );
            set("tokenizer.ggml.bos_token_id".into(), 1u32.into());
            set("tokenizer.ggml.eos_token_id".into(), 2u32.into());
        }
        for (k, v) in extra {
            set(k.to_string(), v.clone());
        }

        let mut rng = Lcg(s.seed);
        let mut vals: HashMap<String, Vec<f32>> = HashMap::new();
        let mut names: Vec<(String, Vec<usize>)> = Vec::new();
        let mut add = |name: String, ne: Vec<usize>, norm: bool| {
            let n: usize = ne.iter().product();
            let scale = 1.0 / (ne[0] as f32).sqrt();
            let v: Vec<f32> = (0..n)
                .map(|_| {
                    let r = rng.next();
                    if norm {
                        1.0 + 0.2 * r
                    } else {
                        r * scale * 1.5
                    }
                })
                .collect();
            vals.insert(name.clone(), v);
            names.push((name, ne));
        };
        let (e, ff, hd) = (s.n_embd, s.n_ff, s.head_dim);
        let (nq, nk) = (hd * s.n_head, hd * s.n_head_kv);
        // Embeddings get unit scale so that hidden states are O(1).
        add("token_embd.weight".into(), vec![e, s.n_vocab], false);
        if a == "bert" {
            add("position_embd.weight".into(), vec![e, s.n_ctx_train], false);
            add("token_types.weight".into(), vec![e, 2], false);
            add("token_embd_norm.weight".into(), vec![e], true);
            add("token_embd_norm.bias".into(), vec![e], false);
        } else {
            add("output_norm.weight".into(), vec![e], true);
            if a == "llama" {
                add("output.weight".into(), vec![e, s.n_vocab], false);
            }
        }
        for il in 0..s.n_layer {
            let n = |t: &str| format!("blk.{il}.{t}");
            add(n("attn_q.weight"), vec![e, nq], false);
            add(n("attn_k.weight"), vec![e, nk], false);
            add(n("attn_v.weight"), vec![e, nk], false);
            add(n("attn_output.weight"), vec![nq, e], false);
            add(n("ffn_up.weight"), vec![e, ff], false);
            add(n("ffn_down.weight"), vec![ff, e], false);
            if matches!(a, "qwen2" | "bert") {
                add(n("attn_q.bias"), vec![nq], false);
                add(n("attn_k.bias"), vec![nk], false);
                add(n("attn_v.bias"), vec![nk], false);
            }
            if a == "bert" {
                add(n("attn_output.bias"), vec![e], false);
                add(n("attn_output_norm.weight"), vec![e], true);
                add(n("attn_output_norm.bias"), vec![e], false);
                add(n("ffn_up.bias"), vec![ff], false);
                add(n("ffn_down.bias"), vec![e], false);
                add(n("layer_output_norm.weight"), vec![e], true);
                add(n("layer_output_norm.bias"), vec![e], false);
                continue;
            }
            add(n("attn_norm.weight"), vec![e], true);
            add(n("ffn_norm.weight"), vec![e], true);
            add(n("ffn_gate.weight"), vec![e, ff], false);
            if matches!(a, "qwen3" | "gemma3") {
                add(n("attn_q_norm.weight"), vec![hd], true);
                add(n("attn_k_norm.weight"), vec![hd], true);
            }
            if a == "gemma3" {
                add(n("post_attention_norm.weight"), vec![e], true);
                add(n("post_ffw_norm.weight"), vec![e], true);
            }
        }
        for (name, ne) in &names {
            let v = &vals[name];
            let ne64: Vec<i64> = ne.iter().map(|&n| n as i64).collect();
            let quantize = ne.len() == 2 && s.weight_type != Type::F32;
            if quantize {
                let t = s.weight_type;
                let row = t.row_size(ne[0] as i64).unwrap();
                let mut dst = vec![0u8; row * ne[1]];
                ggml::quantize_chunk(t, v, &mut dst, 0, ne[1], ne[0], None).unwrap();
                w.add_tensor(name, t, &ne64, dst).unwrap();
            } else {
                w.add_tensor(name, Type::F32, &ne64, le_bytes(v)).unwrap();
            }
        }
        let bytes = w.to_bytes().unwrap();
        Tiny {
            spec,
            bytes,
            w: vals,
        }
    }

    pub fn file(&self) -> GgufFile {
        GgufFile::from_vec(self.bytes.clone()).unwrap()
    }

    fn t(&self, name: &str) -> &[f32] {
        &self.w[name]
    }

    fn opt(&self, name: &str) -> Option<&[f32]> {
        self.w.get(name).map(Vec::as_slice)
    }

    // --- the f64 reference -------------------------------------------------------------

    /// `W·x (+ b)` for `W` with rows of `x.len()` elements.
    fn lin(&self, name: &str, x: &[f64], bias: Option<&str>) -> Vec<f64> {
        let w = self.t(name);
        let k = x.len();
        let mut y: Vec<f64> = w
            .chunks(k)
            .map(|row| row.iter().zip(x).map(|(&a, &b)| f64::from(a) * b).sum())
            .collect();
        if let Some(b) = bias.and_then(|b| self.opt(b)) {
            y.iter_mut().zip(b).for_each(|(y, &b)| *y += f64::from(b));
        }
        y
    }

    fn rms(&self, x: &[f64], w: &str) -> Vec<f64> {
        let ms = x.iter().map(|v| v * v).sum::<f64>() / x.len() as f64;
        let s = 1.0 / (ms + 1e-6).sqrt();
        x.iter()
            .zip(self.t(w))
            .map(|(&v, &w)| v * s * f64::from(w))
            .collect()
    }

    fn layer_norm(&self, x: &[f64], w: &str, b: &str) -> Vec<f64> {
        let n = x.len() as f64;
        let mean = x.iter().sum::<f64>() / n;
        let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
        let s = 1.0 / (var + 1e-12).sqrt();
        x.iter()
            .zip(self.t(w).iter().zip(self.t(b)))
            .map(|(&v, (&w, &b))| (v - mean) * s * f64::from(w) + f64::from(b))
            .collect()
    }

    fn rope(&self, x: &mut [f64], pos: usize, base: f64) {
        let hd = self.spec.head_dim;
        for i in 0..hd / 2 {
            let theta = pos as f64 * base.powf(-2.0 * i as f64 / hd as f64);
            let (s, c) = theta.sin_cos();
            let (a, b) = if self.spec.rope_neox() {
                (i, i + hd / 2)
            } else {
                (2 * i, 2 * i + 1)
            };
            let (x0, x1) = (x[a], x[b]);
            x[a] = x0 * c - x1 * s;
            x[b] = x0 * s + x1 * c;
        }
    }

    /// The output of the model for `tokens` at positions 0..: logits (`n_vocab` per token) of
    /// a decoder, hidden states (`n_embd` per token) of BERT.
    pub fn reference(&self, tokens: &[u32]) -> Vec<f64> {
        let s = &self.spec;
        let (e, hd) = (s.n_embd, s.head_dim);
        let gemma = s.arch == "gemma3";
        let bert = s.arch == "bert";
        let emb = self.t("token_embd.weight");
        let mut x: Vec<Vec<f64>> = tokens
            .iter()
            .enumerate()
            .map(|(p, &t)| {
                let row = &emb[t as usize * e..(t as usize + 1) * e];
                let mut v: Vec<f64> = row.iter().map(|&a| f64::from(a)).collect();
                if gemma {
                    let k = f64::from((e as f32).sqrt());
                    v.iter_mut().for_each(|a| *a *= k);
                }
                if bert {
                    let ty = &self.t("token_types.weight")[..e];
                    let pe = &self.t("position_embd.weight")[p * e..(p + 1) * e];
                    for (i, a) in v.iter_mut().enumerate() {
                        *a += f64::from(ty[i]) + f64::from(pe[i]);
                    }
                }
                v
            })
            .collect();
        if bert {
            x = x
                .iter()
                .map(|v| self.layer_norm(v, "token_embd_norm.weight", "token_embd_norm.bias"))
                .collect();
        }
        let n = tokens.len();
        let group = s.n_head / s.n_head_kv;
        for il in 0..s.n_layer {
            let nm = |t: &str| format!("blk.{il}.{t}");
            let swa = s.is_swa(il);
            let base = if gemma && swa {
                10000.0
            } else if gemma {
                1_000_000.0
            } else {
                10000.0
            };
            let h: Vec<Vec<f64>> = if bert {
                x.clone()
            } else {
                x.iter()
                    .map(|v| self.rms(v, &nm("attn_norm.weight")))
                    .collect()
            };
            let heads =
                |v: Vec<f64>| -> Vec<Vec<f64>> { v.chunks(hd).map(|c| c.to_vec()).collect() };
            let mut q = Vec::new();
            let mut k = Vec::new();
            let mut vv = Vec::new();
            for (p, hp) in h.iter().enumerate() {
                let mut qh = heads(self.lin(&nm("attn_q.weight"), hp, Some(&nm("attn_q.bias"))));
                let mut kh = heads(self.lin(&nm("attn_k.weight"), hp, Some(&nm("attn_k.bias"))));
                let vh = heads(self.lin(&nm("attn_v.weight"), hp, Some(&nm("attn_v.bias"))));
                if self.opt(&nm("attn_q_norm.weight")).is_some() {
                    qh = qh
                        .iter()
                        .map(|r| self.rms(r, &nm("attn_q_norm.weight")))
                        .collect();
                    kh = kh
                        .iter()
                        .map(|r| self.rms(r, &nm("attn_k_norm.weight")))
                        .collect();
                }
                if !bert {
                    qh.iter_mut().for_each(|r| self.rope(r, p, base));
                    kh.iter_mut().for_each(|r| self.rope(r, p, base));
                }
                q.push(qh);
                k.push(kh);
                vv.push(vh);
            }
            let scale = 1.0 / (hd as f64).sqrt();
            let mut new_x = Vec::with_capacity(n);
            for i in 0..n {
                let mut att = Vec::with_capacity(e);
                for (hh, qh) in q[i].iter().enumerate() {
                    let kvh = hh / group;
                    let seen: Vec<usize> = (0..n)
                        .filter(|&j| bert || (j <= i && !(swa && i - j >= s.swa.unwrap().0)))
                        .collect();
                    let sc: Vec<f64> = seen
                        .iter()
                        .map(|&j| {
                            scale * qh.iter().zip(&k[j][kvh]).map(|(a, b)| a * b).sum::<f64>()
                        })
                        .collect();
                    let m = sc.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                    let ex: Vec<f64> = sc.iter().map(|v| (v - m).exp()).collect();
                    let z: f64 = ex.iter().sum();
                    att.extend((0..hd).map(|d| {
                        seen.iter()
                            .zip(&ex)
                            .map(|(&j, &p)| p / z * vv[j][kvh][d])
                            .sum::<f64>()
                    }));
                }
                let mut o = self.lin(
                    &nm("attn_output.weight"),
                    &att,
                    Some(&nm("attn_output.bias")),
                );
                let xi = &x[i];
                let add = |a: &[f64], b: &[f64]| -> Vec<f64> {
                    a.iter().zip(b).map(|(a, b)| a + b).collect()
                };
                let out = if bert {
                    let h1 = self.layer_norm(
                        &add(&o, xi),
                        &nm("attn_output_norm.weight"),
                        &nm("attn_output_norm.bias"),
                    );
                    let up = self.lin(&nm("ffn_up.weight"), &h1, Some(&nm("ffn_up.bias")));
                    let g: Vec<f64> = up.iter().map(|&u| gelu(u)).collect();
                    let f = self.lin(&nm("ffn_down.weight"), &g, Some(&nm("ffn_down.bias")));
                    self.layer_norm(
                        &add(&f, &h1),
                        &nm("layer_output_norm.weight"),
                        &nm("layer_output_norm.bias"),
                    )
                } else {
                    if gemma {
                        o = self.rms(&o, &nm("post_attention_norm.weight"));
                    }
                    let ffn_inp = add(&o, xi);
                    let h2 = self.rms(&ffn_inp, &nm("ffn_norm.weight"));
                    let gate = self.lin(&nm("ffn_gate.weight"), &h2, None);
                    let up = self.lin(&nm("ffn_up.weight"), &h2, None);
                    let act: Vec<f64> = gate
                        .iter()
                        .zip(&up)
                        .map(|(&g, &u)| {
                            if gemma {
                                gelu(g) * u
                            } else {
                                g / (1.0 + (-g).exp()) * u
                            }
                        })
                        .collect();
                    let mut f = self.lin(&nm("ffn_down.weight"), &act, None);
                    if gemma {
                        f = self.rms(&f, &nm("post_ffw_norm.weight"));
                    }
                    add(&f, &ffn_inp)
                };
                new_x.push(out);
            }
            x = new_x;
        }
        if bert {
            return x.concat();
        }
        let out_name = if self.w.contains_key("output.weight") {
            "output.weight"
        } else {
            "token_embd.weight"
        };
        x.iter()
            .flat_map(|v| {
                let h = self.rms(v, "output_norm.weight");
                let mut l = self.lin(out_name, &h, None);
                if let Some(cap) = s.softcap {
                    let cap = f64::from(cap);
                    l.iter_mut().for_each(|v| *v = cap * (*v / cap).tanh());
                }
                l
            })
            .collect()
    }
}

/// GELU, tanh approximation (GGML's).
fn gelu(x: f64) -> f64 {
    let c = (2.0 / std::f64::consts::PI).sqrt();
    0.5 * x * (1.0 + (c * (x + 0.044715 * x * x * x)).tanh())
}

/// Normalised mean squared error of `got` against `want`.
pub fn nmse(got: &[f32], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len(), "lengths differ");
    let err: f64 = got
        .iter()
        .zip(want)
        .map(|(&g, &w)| (f64::from(g) - w).powi(2))
        .sum();
    let norm: f64 = want.iter().map(|w| w * w).sum();
    err / norm.max(1e-30)
}
