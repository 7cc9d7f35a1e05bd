//! The GGUF vocabulary (`tokenizer.ggml.*`) and tokenization as llama.cpp's `llama_vocab` does
//! it: special-token partitioning, BOS/EOS/SEP per metadata, the algorithm the file names, and
//! detokenization.
//!
//! Keys read: `tokenizer.ggml.model` (`llama`, `gpt2`, `gemma4`, `bert`), `.pre`, `.tokens`,
//! `.scores`, `.token_type`, `.merges`, the special ids (`.bos_token_id`, `.eos_token_id`,
//! `.eot_token_id`, `.eom_token_id`, `.unknown_token_id`, `.seperator_token_id`,
//! `.padding_token_id`, `.mask_token_id`, `.fim_*_token_id`), `.add_bos_token`,
//! `.add_eos_token`, `.add_sep_token`, `.add_space_prefix`, `.remove_extra_whitespaces`,
//! `tokenizer.ggml.normalizer.lowercase`/`.strip_accents`, `general.name`.

use std::collections::{HashMap, HashSet};

use ggml::gguf::{Array, GgufFile, Value};

use crate::strings::Strings;
use crate::tokenizer::pretokenize::PreTokenizer;
use crate::tokenizer::{bpe, spm, wpm};
use crate::{Error, Result};

/// A token id.
pub type Token = u32;

/// Which tokenizer algorithm a vocabulary uses (`llama_vocab_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VocabKind {
    /// SentencePiece-style bigram merging by score, with byte fallback (`tokenizer.ggml.model
    /// = "llama"`: Llama 1/2, Gemma 3, Phi-3, …).
    Spm,
    /// Byte-level BPE by merge rank after a pre-tokenizer (`"gpt2"`: Llama 3, Qwen, GPT-2, …;
    /// `"gemma4"`: BPE on `▁`-escaped raw UTF-8).
    Bpe,
    /// WordPiece (`"bert"`).
    Wpm,
}

/// The pre-tokenizer family of a BPE vocabulary (`llama_vocab_pre_type`), from
/// `tokenizer.ggml.pre`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PreType {
    /// llama.cpp's default pipeline (no or `"default"` pre-tokenizer).
    Default,
    /// GPT-2's regex (`gpt-2`, `mpt`, `olmo`, `phi-2`, `jina-es`, …).
    Gpt2,
    /// Llama 3's regex (`llama3`, `llama-bpe`, `llama-v3`, `falcon3`, `pixtral`, …).
    Llama3,
    /// Qwen 2's regex: Llama 3's with single digits (`qwen2`, `deepseek-r1-qwen`, `stablelm2`).
    Qwen2,
    /// Qwen 3.5's regex: Qwen 2's with combining marks inside words (`qwen35`).
    Qwen35,
    /// Single digits, then GPT-2's regex (`starcoder`, `refact`, `command-r`, `smollm`, …).
    Starcoder,
    /// Falcon's punctuation runs, GPT-2's regex, digit triples (`falcon`).
    Falcon,
    /// Gemma 4's newline split on `▁`-escaped text (`gemma4`).
    Gemma4,
    /// DeepSeek Coder's: newlines, letter runs, punctuation runs, CJK runs, single digits
    /// (`deepseek-coder`).
    DeepseekCoder,
}

/// Token attribute bits (`llama_token_attr`).
pub mod attr {
    /// The unknown token.
    pub const UNKNOWN: u32 = 1 << 0;
    /// An unused token.
    pub const UNUSED: u32 = 1 << 1;
    /// A normal token.
    pub const NORMAL: u32 = 1 << 2;
    /// A control token (BOS, EOS, chat markers, …).
    pub const CONTROL: u32 = 1 << 3;
    /// A user-defined token: always matched as a whole, rendered as its text.
    pub const USER_DEFINED: u32 = 1 << 4;
    /// A byte token (`<0xAB>`).
    pub const BYTE: u32 = 1 << 5;
    /// Whitespace to the token's left is removed when it is parsed from text.
    pub const LSTRIP: u32 = 1 << 7;
    /// Whitespace to the token's right is removed when it is parsed from text.
    pub const RSTRIP: u32 = 1 << 8;
}

/// One vocabulary entry (its text is in [`Vocab::texts`]).
#[derive(Clone, Copy, Debug)]
struct TokenData {
    score: f32,
    attr: u32,
}

/// The special token ids of a vocabulary; `None` where the vocabulary has none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpecialTokens {
    /// Beginning of sequence.
    pub bos: Option<Token>,
    /// End of sequence.
    pub eos: Option<Token>,
    /// End of turn.
    pub eot: Option<Token>,
    /// End of message.
    pub eom: Option<Token>,
    /// Unknown.
    pub unk: Option<Token>,
    /// Separator (BERT's `[SEP]`).
    pub sep: Option<Token>,
    /// Padding.
    pub pad: Option<Token>,
    /// Mask.
    pub mask: Option<Token>,
    /// Fill-in-the-middle prefix.
    pub fim_pre: Option<Token>,
    /// Fill-in-the-middle suffix.
    pub fim_suf: Option<Token>,
    /// Fill-in-the-middle middle.
    pub fim_mid: Option<Token>,
    /// Fill-in-the-middle padding.
    pub fim_pad: Option<Token>,
    /// Fill-in-the-middle repository.
    pub fim_rep: Option<Token>,
    /// Fill-in-the-middle file separator.
    pub fim_sep: Option<Token>,
}

/// A vocabulary and its tokenizer, read from a GGUF file's metadata.
///
/// ```no_run
/// # fn main() -> ggml_llm::Result<()> {
/// let file = ggml::gguf::GgufFile::open("model.gguf")?;
/// let vocab = ggml_llm::Vocab::from_gguf(&file)?;
/// let ids = vocab.tokenize("Hello world", true, false)?;
/// assert_eq!(vocab.detokenize(&ids, true, false)?, "Hello world");
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct Vocab {
    kind: VocabKind,
    pre: PreType,
    /// The pre-tokenizer (used by BPE vocabularies only).
    pre_tokenizer: PreTokenizer,
    tokens: Vec<TokenData>,
    /// Each token's text, indexed by text (`token_to_id`).
    texts: Strings,
    bpe_ranks: HashMap<(Vec<u8>, Vec<u8>), u32>,
    special: SpecialTokens,
    eog: HashSet<Token>,
    add_bos: bool,
    add_eos: bool,
    add_sep: bool,
    add_space_prefix: bool,
    escape_whitespaces: bool,
    clean_spaces: bool,
    ignore_merges: bool,
    lowercase: bool,
    strip_accents: bool,
    max_token_len: usize,
    /// Control, user-defined and unknown tokens, longest text first (`cache_special_tokens`).
    special_by_len: Vec<Token>,
    /// Each token's piece with `special = true` (`cache_token_to_piece`).
    pieces: Strings,
}

fn vocab_err(msg: impl Into<String>) -> Error {
    Error::Vocab(msg.into())
}

/// The array at `key`, if present.
fn array<'f>(file: &'f GgufFile, key: &str) -> Result<Option<&'f Array>> {
    match file.get(key) {
        None => Ok(None),
        Some(Value::Array(a)) => Ok(Some(a)),
        Some(v) => Err(vocab_err(format!(
            "{key} is a {}, not an array",
            v.value_type()
        ))),
    }
}

/// The boolean at `key`, if present.
fn flag(file: &GgufFile, key: &str) -> Result<Option<bool>> {
    match file.get(key) {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(v) => Err(vocab_err(format!(
            "{key} is a {}, not a bool",
            v.value_type()
        ))),
    }
}

/// The string at `key`, if present.
fn string<'f>(file: &'f GgufFile, key: &str) -> Result<Option<&'f str>> {
    match file.get(key) {
        None => Ok(None),
        Some(Value::String(s)) => s
            .as_str()
            .map(Some)
            .map_err(|_| vocab_err(format!("{key} is not valid UTF-8"))),
        Some(v) => Err(vocab_err(format!(
            "{key} is a {}, not a string",
            v.value_type()
        ))),
    }
}

const KEY: &str = "tokenizer.ggml.";

/// Token types in `tokenizer.ggml.token_type` (`llama_token_type`) to attributes.
fn attr_of_type(t: i32) -> u32 {
    match t {
        1 => attr::NORMAL,
        2 => attr::UNKNOWN,
        3 => attr::CONTROL,
        4 => attr::USER_DEFINED,
        5 => attr::UNUSED,
        6 => attr::BYTE,
        _ => 0,
    }
}

/// The pre-tokenizer type and the flags llama.cpp ties to it:
/// `(type, ignore_merges, add_bos, clean_spaces, escape_whitespaces)`.
fn pre_type(name: &str) -> Result<(PreType, bool, bool, bool, bool)> {
    use PreType as P;
    Ok(match name {
        "" | "default" => (P::Default, false, false, true, false),
        "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "falcon-h1" | "pixtral" | "midm-2.0"
        | "lfm2" | "jina-v5-nano" => (P::Llama3, true, true, true, false),
        "dbrx" | "smaug-bpe" => (P::Llama3, false, false, true, false),
        "gpt-2" | "phi-2" | "jina-es" | "jina-de" | "gigachat" | "jina-v2-es" | "jina-v2-de"
        | "a.x-4.0" | "mellum" | "modern-bert" | "mpt" | "olmo" | "jais" | "exaone4" => {
            (P::Gpt2, false, false, true, false)
        }
        "trillion" | "granite-docling" => (P::Gpt2, false, false, false, false),
        "qwen2" | "deepseek-r1-qwen" | "kormo" | "f2llmv2" | "hunyuan" | "solar-open" => {
            (P::Qwen2, false, false, false, false)
        }
        "stablelm2" | "megrez" => (P::Qwen2, false, false, true, false),
        "qwen35" => (P::Qwen35, false, false, false, false),
        "starcoder" | "refact" | "codeshell" | "exaone" | "minerva-7b" | "mellum2" => {
            (P::Starcoder, false, false, true, false)
        }
        "command-r" | "smollm" => (P::Starcoder, false, false, false, false),
        "falcon" => (P::Falcon, false, false, true, false),
        "gemma4" => (P::Gemma4, false, false, true, true),
        "deepseek-coder" => (P::DeepseekCoder, false, false, false, false),
        other => {
            return Err(Error::Unsupported(format!(
                "pre-tokenizer type {other:?} (tokenizer.ggml.pre) is not implemented"
            )))
        }
    })
}

/// The token texts llama.cpp recognizes as special when the metadata does not name them.
const EOT_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "<｜end▁of▁sentence｜>",
    "<end_of_utterance>",
];
const EOM_TEXTS: &[&str] = &["<|eom_id|>"];
const FIM_PRE_TEXTS: &[&str] = &[
    "<|fim_prefix|>",
    "<fim-prefix>",
    "<fim_prefix>",
    "<｜fim▁begin｜>",
    "<PRE>",
    "▁<PRE>",
    "<|code_prefix|>",
    "<|prefix|>",
];
const FIM_SUF_TEXTS: &[&str] = &[
    "<|fim_suffix|>",
    "<fim-suffix>",
    "<fim_suffix>",
    "<｜fim▁hole｜>",
    "<SUF>",
    "▁<SUF>",
    "<|code_suffix|>",
    "<|suffix|>",
];
const FIM_MID_TEXTS: &[&str] = &[
    "<|fim_middle|>",
    "<fim-middle>",
    "<fim_middle>",
    "<｜fim▁end｜>",
    "<MID>",
    "▁<MID>",
    "<|code_middle|>",
    "<|middle|>",
];
const FIM_PAD_TEXTS: &[&str] = &["<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"];
const FIM_REP_TEXTS: &[&str] = &[
    "<|fim_repo|>",
    "<|repo_name|>",
    "<fim-repo>",
    "<REPO>",
    "<reponame>",
];
const FIM_SEP_TEXTS: &[&str] = &["<|file_sep|>"];
const EOG_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<｜end▁of▁sentence｜>",
    "[e~[",
];

/// Access to one special-token slot.
type Slot = fn(&mut SpecialTokens) -> &mut Option<Token>;

/// The metadata key (after `tokenizer.ggml.`) of each special token.
const SLOTS: [(&str, Slot); 17] = [
    ("bos_token_id", |s| &mut s.bos),
    ("eos_token_id", |s| &mut s.eos),
    ("eot_token_id", |s| &mut s.eot),
    ("eom_token_id", |s| &mut s.eom),
    ("unknown_token_id", |s| &mut s.unk),
    ("seperator_token_id", |s| &mut s.sep),
    ("padding_token_id", |s| &mut s.pad),
    ("mask_token_id", |s| &mut s.mask),
    ("fim_pre_token_id", |s| &mut s.fim_pre),
    ("fim_suf_token_id", |s| &mut s.fim_suf),
    ("fim_mid_token_id", |s| &mut s.fim_mid),
    ("fim_pad_token_id", |s| &mut s.fim_pad),
    ("fim_rep_token_id", |s| &mut s.fim_rep),
    ("fim_sep_token_id", |s| &mut s.fim_sep),
    ("prefix_token_id", |s| &mut s.fim_pre),
    ("suffix_token_id", |s| &mut s.fim_suf),
    ("middle_token_id", |s| &mut s.fim_mid),
];

/// The special tokens found by their text when the metadata does not give them.
const DETECTED: [(&[&str], Slot); 8] = [
    (EOT_TEXTS, |s| &mut s.eot),
    (EOM_TEXTS, |s| &mut s.eom),
    (FIM_PRE_TEXTS, |s| &mut s.fim_pre),
    (FIM_SUF_TEXTS, |s| &mut s.fim_suf),
    (FIM_MID_TEXTS, |s| &mut s.fim_mid),
    (FIM_PAD_TEXTS, |s| &mut s.fim_pad),
    (FIM_REP_TEXTS, |s| &mut s.fim_rep),
    (FIM_SEP_TEXTS, |s| &mut s.fim_sep),
];

impl Vocab {
    /// Reads the vocabulary of a GGUF file. `Err` names the key when the vocabulary is missing
    /// or malformed, or when its tokenizer model or pre-tokenizer is one this crate does not
    /// implement.
    pub fn from_gguf(file: &GgufFile) -> Result<Vocab> {
        let model = string(file, "tokenizer.ggml.model")?
            .ok_or_else(|| vocab_err("the file has no vocabulary (no tokenizer.ggml.model)"))?;
        let pre_name = string(file, "tokenizer.ggml.pre")?.unwrap_or("");
        let mut special = SpecialTokens::default();
        let add_bos;
        let mut add_sep = false;
        let (mut ignore_merges, mut clean_spaces, mut escape_whitespaces) = (false, false, true);
        let mut add_space_prefix = false;
        let mut pre = PreType::Default;
        let kind = match model {
            "llama" => {
                special.bos = Some(1);
                special.eos = Some(2);
                special.unk = Some(0);
                add_space_prefix = true;
                add_bos = true;
                VocabKind::Spm
            }
            "bert" => {
                special.bos = Some(101);
                special.unk = Some(100);
                special.sep = Some(102);
                special.pad = Some(0);
                special.mask = Some(103);
                add_bos = true;
                add_sep = true;
                clean_spaces = true;
                VocabKind::Wpm
            }
            "gpt2" | "gemma4" => {
                if model == "gpt2" {
                    special.bos = Some(11);
                    special.eos = Some(11);
                }
                let name = if model == "gemma4" {
                    "gemma4"
                } else {
                    pre_name
                };
                let (p, ignore, bos, clean, escape) = pre_type(name)?;
                (
                    pre,
                    ignore_merges,
                    add_bos,
                    clean_spaces,
                    escape_whitespaces,
                ) = (p, ignore, bos, clean, escape);
                VocabKind::Bpe
            }
            other => {
                return Err(Error::Unsupported(format!(
                    "tokenizer model {other:?} (tokenizer.ggml.model) is not implemented"
                )))
            }
        };
        if let Some(b) = flag(file, "tokenizer.ggml.add_space_prefix")? {
            add_space_prefix = b;
        }

        let texts = array(file, "tokenizer.ggml.tokens")?
            .ok_or_else(|| vocab_err("the file has no token list (tokenizer.ggml.tokens)"))?
            .as_string_slice()
            .ok_or_else(|| vocab_err("tokenizer.ggml.tokens is not an array of strings"))?;
        let n = texts.len();
        let scores: Option<Vec<f32>> = match array(file, "tokenizer.ggml.scores")? {
            None => None,
            Some(Array::F32(v)) => Some(v.clone()),
            Some(Array::I32(v)) => Some(v.iter().map(|&x| x as f32).collect()),
            Some(a) => {
                return Err(vocab_err(format!(
                    "tokenizer.ggml.scores is an array of {}, not f32 or i32",
                    a.elem_type()
                )))
            }
        };
        let types = match array(file, "tokenizer.ggml.token_type")? {
            None => None,
            Some(Array::I32(v)) => Some(v.as_slice()),
            Some(a) => {
                return Err(vocab_err(format!(
                    "tokenizer.ggml.token_type is an array of {}, not i32",
                    a.elem_type()
                )))
            }
        };
        for (key, len) in [
            ("scores", scores.as_ref().map(Vec::len)),
            ("token_type", types.map(<[i32]>::len)),
        ] {
            if let Some(len) = len.filter(|&len| len < n) {
                return Err(vocab_err(format!(
                    "tokenizer.ggml.{key} has {len} entries for {n} tokens"
                )));
            }
        }
        let mut tokens = Vec::with_capacity(n);
        let n_bytes = texts.iter().map(|t| t.as_bytes().len()).sum();
        let mut strings = Strings::with_capacity(n, n_bytes);
        let mut max_token_len = 0;
        for (i, t) in texts.iter().enumerate() {
            let text = t.as_bytes();
            if text.is_empty() {
                strings.push(format!("[EMPTY_{i}]").as_bytes());
            } else {
                strings.push(text);
            }
            max_token_len = max_token_len.max(strings.get(i).map_or(0, <[u8]>::len));
            tokens.push(TokenData {
                score: scores.as_ref().map_or(0.0, |s| s[i]),
                attr: types.map_or(attr::NORMAL, |t| attr_of_type(t[i])),
            });
        }
        strings.shrink_to_fit();
        let distinct = strings.index();
        if distinct != n {
            return Err(vocab_err(format!(
                "tokenizer.ggml.tokens has {distinct} distinct texts among {n} tokens"
            )));
        }

        let mut bpe_ranks = HashMap::new();
        if kind == VocabKind::Bpe {
            let merges = array(file, "tokenizer.ggml.merges")?
                .ok_or_else(|| vocab_err("a BPE vocabulary needs tokenizer.ggml.merges"))?
                .as_string_slice()
                .ok_or_else(|| vocab_err("tokenizer.ggml.merges is not an array of strings"))?;
            for (rank, m) in merges.iter().enumerate() {
                let m = m.as_bytes();
                // Split at the first space after the first byte; a merge without one pairs
                // two empty strings, as in llama.cpp.
                let pair = match m.iter().skip(1).position(|&b| b == b' ') {
                    Some(p) => (m[..p + 1].to_vec(), m[p + 2..].to_vec()),
                    None => (Vec::new(), Vec::new()),
                };
                bpe_ranks.entry(pair).or_insert(rank as u32);
            }
        }

        let mut vocab = Vocab {
            kind,
            pre,
            pre_tokenizer: PreTokenizer::for_type(pre),
            tokens,
            texts: strings,
            bpe_ranks,
            special,
            eog: HashSet::new(),
            add_bos,
            add_eos: false,
            add_sep,
            add_space_prefix,
            escape_whitespaces: kind == VocabKind::Bpe && escape_whitespaces,
            clean_spaces,
            ignore_merges,
            lowercase: false,
            strip_accents: false,
            max_token_len,
            special_by_len: Vec::new(),
            pieces: Strings::default(),
        };
        vocab.read_special(file)?;
        vocab.build_caches();
        vocab.set_model_attrs(file)?;
        Ok(vocab)
    }

    /// Special ids and flags from the metadata, then llama.cpp's detection by token text.
    fn read_special(&mut self, file: &GgufFile) -> Result<()> {
        let n = self.tokens.len();
        for (key, slot) in SLOTS {
            let slot = slot(&mut self.special);
            if slot.is_some_and(|id| id as usize >= n) {
                *slot = None;
            }
            let full = format!("{KEY}{key}");
            let Some(v) = file.get(&full) else { continue };
            let id = v.as_integer().ok_or_else(|| {
                vocab_err(format!("{full} is a {}, not an integer", v.value_type()))
            })?;
            if (0..n as i128).contains(&id) {
                *slot = Some(id as Token);
            }
        }
        if let Some(b) = flag(file, "tokenizer.ggml.add_bos_token")? {
            self.add_bos = b;
        }
        if let Some(b) = flag(file, "tokenizer.ggml.add_eos_token")? {
            self.add_eos = b;
        }
        if let Some(b) = flag(file, "tokenizer.ggml.add_sep_token")? {
            self.add_sep = b;
        }
        if self.pre == PreType::Gemma4 {
            self.add_bos = true;
        }
        // BERT's normalizer lowercases and strips accents unless the metadata says otherwise.
        self.lowercase = flag(file, "tokenizer.ggml.normalizer.lowercase")?.unwrap_or(true);
        self.strip_accents =
            flag(file, "tokenizer.ggml.normalizer.strip_accents")?.unwrap_or(self.lowercase);

        // Detection by text, lowest id first where several texts match; a token found this
        // way becomes a control token.
        for (texts, slot) in DETECTED {
            if slot(&mut self.special).is_some() {
                continue;
            }
            let found = texts
                .iter()
                .filter_map(|t| self.text_to_token(t.as_bytes()))
                .min();
            if let Some(id) = found {
                *slot(&mut self.special) = Some(id);
                self.tokens[id as usize].attr |= attr::CONTROL;
            }
        }

        for (i, t) in self.tokens.iter_mut().enumerate() {
            let text = self.texts.get(i).unwrap_or_default();
            if t.attr & attr::CONTROL != 0 && contains(text, b"unused") {
                t.attr |= attr::UNUSED;
            }
        }

        let s = self.special;
        let mut eog: HashSet<Token> = [s.fim_pad, s.fim_rep, s.fim_sep]
            .into_iter()
            .flatten()
            .collect();
        for text in EOG_TEXTS {
            if let Some(id) = self.text_to_token(text.as_bytes()) {
                eog.insert(id);
                self.tokens[id as usize].attr |= attr::CONTROL;
            }
        }
        for text in ["<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"] {
            if let Some(id) = self.text_to_token(text.as_bytes()) {
                self.tokens[id as usize].attr = attr::USER_DEFINED;
            }
        }
        eog.extend([s.eos, s.eot, s.eom].into_iter().flatten());
        let in_eog: Vec<&[u8]> = eog.iter().map(|&id| self.text(id)).collect();
        let has = |t: &str| in_eog.contains(&t.as_bytes());
        let (return_or_flush, call) = (
            has("<|return|>") || has("<|flush|>"),
            has("<|call|>") || has("<|calls|>"),
        );
        let tool_or_plamo = has("<|tool_response>") || has("<|plamo:eos|>");
        let end = self.text_to_token(b"<|end|>");
        if let Some(end) = end.filter(|e| eog.contains(e)) {
            if return_or_flush && call {
                eog.remove(&end);
                self.tokens[end as usize].attr = attr::USER_DEFINED;
            }
        }
        let s_id = self.text_to_token(b"</s>");
        if let Some(s_id) = s_id.filter(|e| eog.contains(e)) {
            if tool_or_plamo {
                eog.remove(&s_id);
                self.tokens[s_id as usize].attr = attr::NORMAL;
            }
        }
        self.eog = eog;
        Ok(())
    }

    /// The special-token list for partitioning and each token's piece.
    fn build_caches(&mut self) {
        let special = attr::CONTROL | attr::USER_DEFINED | attr::UNKNOWN;
        let mut ids: Vec<Token> = (0..self.tokens.len() as Token)
            .filter(|&id| self.tokens[id as usize].attr & special != 0)
            .collect();
        ids.sort_by_key(|&id| std::cmp::Reverse(self.text(id).len()));
        self.special_by_len = ids;
        let mut pieces = Strings::with_capacity(self.tokens.len(), self.texts.n_bytes());
        for id in 0..self.tokens.len() {
            pieces.push(&self.render_piece(id));
        }
        pieces.shrink_to_fit();
        self.pieces = pieces;
    }

    /// Per-model attributes llama.cpp sets by name (`<mask>` lstrip, Phi-3's rstrip).
    fn set_model_attrs(&mut self, file: &GgufFile) -> Result<()> {
        let name = string(file, "general.name")?
            .unwrap_or("")
            .to_ascii_lowercase();
        let arch = string(file, "general.architecture")?.unwrap_or("");
        let pre = string(file, "tokenizer.ggml.pre")?.unwrap_or("");
        let any = |s: &str, subs: &[&str]| subs.iter().any(|x| s.contains(x));
        let mut set = |text: &str, bit: u32, on: bool| {
            if let Some(id) = self.text_to_token(text.as_bytes()) {
                let a = &mut self.tokens[id as usize].attr;
                *a = if on { *a | bit } else { *a & !bit };
            }
        };
        if any(pre, &["jina-v2-de", "jina-v2-es", "jina-v2-code", "mmbert"])
            || any(arch, &["nomic-bert-moe", "jina-bert-v3"])
        {
            set("<mask>", attr::LSTRIP, true);
        } else if any(&name, &["phi-3", "phi3"]) {
            for &id in &self.special_by_len {
                self.tokens[id as usize].attr |= attr::RSTRIP;
            }
            let mut set = |text: &str, on: bool| {
                if let Some(id) = self.text_to_token(text.as_bytes()) {
                    let a = &mut self.tokens[id as usize].attr;
                    *a = if on {
                        *a | attr::RSTRIP
                    } else {
                        *a & !attr::RSTRIP
                    };
                }
            };
            set("</s>", true);
            for t in ["<unk>", "<s>", "<|endoftext|>"] {
                set(t, false);
            }
        } else if any(&name, &["modern-bert"]) {
            set("[MASK]", attr::LSTRIP, true);
        }
        Ok(())
    }

    /// The piece of `id` as `token_to_piece(…, special = true)` renders it.
    fn render_piece(&self, id: usize) -> Vec<u8> {
        let (t, text) = (&self.tokens[id], self.text(id as Token));
        if t.attr & (attr::UNKNOWN | attr::CONTROL | attr::USER_DEFINED) != 0 {
            return text.to_vec();
        }
        if t.attr & attr::NORMAL != 0 {
            if self.kind == VocabKind::Bpe && !self.escape_whitespaces {
                return decode_byte_level(text);
            }
            return replace(text, "\u{2581}".as_bytes(), b" ");
        }
        if t.attr & attr::BYTE != 0 && self.kind != VocabKind::Wpm {
            return vec![hex_byte(text).unwrap_or(0)];
        }
        Vec::new()
    }

    /// The text of token `id`, known to be in range.
    fn text(&self, id: Token) -> &[u8] {
        self.texts.get(id as usize).unwrap_or_default()
    }

    // --- accessors -----------------------------------------------------------------------

    /// The tokenizer algorithm.
    pub fn kind(&self) -> VocabKind {
        self.kind
    }
    /// The pre-tokenizer family (meaningful for [`VocabKind::Bpe`]).
    pub fn pre_type(&self) -> PreType {
        self.pre
    }
    /// Number of tokens.
    pub fn n_tokens(&self) -> usize {
        self.tokens.len()
    }
    /// The special token ids.
    pub fn special(&self) -> SpecialTokens {
        self.special
    }
    /// Whether tokenizing with `add_special` puts BOS first.
    pub fn add_bos(&self) -> bool {
        self.add_bos
    }
    /// Whether tokenizing with `add_special` puts EOS last.
    pub fn add_eos(&self) -> bool {
        self.add_eos
    }
    /// Whether a BERT vocabulary puts SEP last when tokenizing with `add_special`.
    pub fn add_sep(&self) -> bool {
        self.add_sep
    }
    /// Whether `id` ends generation (EOS, EOT, EOM and the chat end markers llama.cpp knows).
    pub fn is_eog(&self, id: Token) -> bool {
        self.eog.contains(&id)
    }
    /// The stored text of token `id` (`llama_vocab_get_text`).
    pub fn token_text(&self, id: Token) -> Result<&[u8]> {
        self.token(id)?;
        Ok(self.text(id))
    }
    /// The score of token `id` (`llama_vocab_get_score`).
    pub fn token_score(&self, id: Token) -> Result<f32> {
        Ok(self.token(id)?.score)
    }
    /// The attribute bits ([`attr`]) of token `id`.
    pub fn token_attr(&self, id: Token) -> Result<u32> {
        Ok(self.token(id)?.attr)
    }
    /// The id of the token whose text is exactly `text`.
    pub fn text_to_token(&self, text: &[u8]) -> Option<Token> {
        self.texts.find(text)
    }

    fn token(&self, id: Token) -> Result<&TokenData> {
        self.tokens.get(id as usize).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "token id {id} is out of range for a vocabulary of {} tokens",
                self.tokens.len()
            ))
        })
    }

    pub(crate) fn score(&self, id: Token) -> f32 {
        self.tokens[id as usize].score
    }
    pub(crate) fn unk(&self) -> Option<Token> {
        self.special.unk
    }
    pub(crate) fn max_token_len(&self) -> usize {
        self.max_token_len
    }
    pub(crate) fn normalizer(&self) -> (bool, bool) {
        (self.lowercase, self.strip_accents)
    }
    pub(crate) fn ignore_merges(&self) -> bool {
        self.ignore_merges
    }
    pub(crate) fn pre_tokenizer(&self) -> &PreTokenizer {
        &self.pre_tokenizer
    }
    pub(crate) fn bpe_rank(&self, left: &[u8], right: &[u8]) -> Option<u32> {
        self.bpe_ranks
            .get(&(left.to_vec(), right.to_vec()))
            .copied()
    }
    /// The token of byte `b` for SentencePiece byte fallback (`<0xAB>`, else the byte itself).
    pub(crate) fn byte_to_token(&self, b: u8) -> Result<Token> {
        self.text_to_token(format!("<0x{b:02X}>").as_bytes())
            .or_else(|| self.text_to_token(&[b]))
            .ok_or_else(|| vocab_err(format!("the vocabulary has no token for byte 0x{b:02X}")))
    }

    // --- tokenize / detokenize ----------------------------------------------------------

    /// Tokenizes `text` (`llama_tokenize`). With `add_special`, BOS/EOS/SEP are added as the
    /// metadata says; with `parse_special`, the texts of control tokens in `text` become those
    /// tokens (user-defined tokens are always matched).
    pub fn tokenize(
        &self,
        text: &str,
        add_special: bool,
        parse_special: bool,
    ) -> Result<Vec<Token>> {
        let mut out = Vec::new();
        let fragments = self.partition(text.as_bytes(), parse_special);
        let need = |id: Option<Token>, what: &str| {
            id.ok_or_else(|| vocab_err(format!("the vocabulary adds a {what} token but has none")))
        };
        if add_special && (self.add_bos || self.kind == VocabKind::Wpm) {
            out.push(need(self.special.bos, "BOS")?);
        }
        let mut prev_special = true;
        for frag in fragments {
            match frag {
                Fragment::Token(id) => {
                    out.push(id);
                    prev_special = true;
                }
                Fragment::Text(t) => {
                    match self.kind {
                        VocabKind::Spm => {
                            let mut s = Vec::with_capacity(t.len() + 1);
                            if self.add_space_prefix && prev_special {
                                s.push(b' ');
                            }
                            s.extend_from_slice(t);
                            spm::tokenize(
                                self,
                                &replace(&s, b" ", "\u{2581}".as_bytes()),
                                &mut out,
                            )?;
                        }
                        VocabKind::Bpe if self.escape_whitespaces => {
                            bpe::tokenize(self, &replace(t, b" ", "\u{2581}".as_bytes()), &mut out)
                        }
                        VocabKind::Bpe => bpe::tokenize(self, t, &mut out),
                        VocabKind::Wpm => wpm::tokenize(self, t, &mut out)?,
                    }
                    prev_special = false;
                }
            }
        }
        if add_special {
            if self.kind == VocabKind::Wpm {
                out.push(need(self.special.sep, "SEP")?);
            } else if self.add_eos {
                out.push(need(self.special.eos, "EOS")?);
            }
        }
        Ok(out)
    }

    /// Splits `text` at the special tokens in it (`tokenizer_st_partition`): longest token
    /// text first, each one's occurrences left to right in the fragments not yet matched.
    fn partition<'t>(&self, text: &'t [u8], parse_special: bool) -> Vec<Fragment<'t>> {
        let mut frags = if text.is_empty() {
            Vec::new()
        } else {
            vec![Fragment::Text(text)]
        };
        for &id in &self.special_by_len {
            let (t, text) = (&self.tokens[id as usize], self.text(id));
            if !parse_special && t.attr & (attr::CONTROL | attr::UNKNOWN) != 0 {
                continue;
            }
            let mut next = Vec::with_capacity(frags.len());
            for frag in frags {
                let Fragment::Text(mut rest) = frag else {
                    next.push(frag);
                    continue;
                };
                while let Some(at) = find(rest, text) {
                    let mut left = &rest[..at];
                    if t.attr & attr::LSTRIP != 0 {
                        while let [init @ .., last] = left {
                            if !is_c_space(*last) {
                                break;
                            }
                            left = init;
                        }
                    }
                    if !left.is_empty() {
                        next.push(Fragment::Text(left));
                    }
                    next.push(Fragment::Token(id));
                    rest = &rest[at + text.len()..];
                    if t.attr & attr::RSTRIP != 0 {
                        while let [first, tail @ ..] = rest {
                            if !is_c_space(*first) {
                                break;
                            }
                            rest = tail;
                        }
                    }
                }
                if !rest.is_empty() {
                    next.push(Fragment::Text(rest));
                }
            }
            frags = next;
        }
        frags
    }

    /// The piece of token `id` (`llama_token_to_piece` with `lstrip = 0`): its text with `▁` as
    /// space (SentencePiece), GPT-2's byte characters decoded (byte-level BPE), one byte for a
    /// byte token. Control and unknown tokens give their text with `special`, else nothing.
    pub fn token_to_piece(&self, id: Token, special: bool) -> Result<&[u8]> {
        let t = self.token(id)?;
        if !special && t.attr & (attr::UNKNOWN | attr::CONTROL) != 0 {
            return Ok(&[]);
        }
        Ok(self.pieces.get(id as usize).unwrap_or_default())
    }

    /// Joins the pieces of `ids` (`llama_detokenize`) as bytes: with `remove_special` a leading
    /// BOS and trailing EOS the vocabulary adds are dropped; `unparse_special` renders control
    /// tokens as their text; the SentencePiece space prefix is removed from the first piece, and
    /// vocabularies that ask for it get llama.cpp's clean-up of spaces before punctuation.
    pub fn detokenize_bytes(
        &self,
        ids: &[Token],
        remove_special: bool,
        unparse_special: bool,
    ) -> Result<Vec<u8>> {
        let mut ids = ids;
        let mut remove_space = self.add_space_prefix;
        let is =
            |id: Option<&Token>, special: Option<Token>| special.is_some_and(|s| id == Some(&s));
        if remove_special && self.add_bos && is(ids.first(), self.special.bos) {
            remove_space = false;
            ids = &ids[1..];
        }
        if remove_special && self.add_eos && is(ids.last(), self.special.eos) {
            ids = &ids[..ids.len() - 1];
        }
        let mut text = Vec::new();
        for &id in ids {
            let mut piece = self.token_to_piece(id, unparse_special)?;
            if remove_space {
                piece = piece.strip_prefix(b" ").unwrap_or(piece);
            }
            remove_space = false;
            text.extend_from_slice(piece);
        }
        if self.clean_spaces {
            text = clean_spaces(&text);
        }
        Ok(text)
    }

    /// [`Vocab::detokenize_bytes`] as a string (malformed UTF-8 becomes U+FFFD).
    pub fn detokenize(
        &self,
        ids: &[Token],
        remove_special: bool,
        unparse_special: bool,
    ) -> Result<String> {
        let bytes = self.detokenize_bytes(ids, remove_special, unparse_special)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }
}

/// A piece of the input after special-token partitioning.
enum Fragment<'t> {
    Text(&'t [u8]),
    Token(Token),
}

/// C's `isspace` in the C locale.
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0B | 0x0C | b'\r')
}

/// The first position of `needle` in `hay` (candidates are found by the first byte, which is
/// rare in text for special tokens such as `<…>`).
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    let (&first, rest) = needle.split_first()?;
    let last_start = hay.len().checked_sub(needle.len())?;
    hay[..=last_start]
        .iter()
        .enumerate()
        .filter(|&(_, &b)| b == first)
        .map(|(i, _)| i)
        .find(|&i| &hay[i + 1..i + needle.len()] == rest)
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    find(hay, needle).is_some()
}

/// `text` with every `from` replaced by `to`.
fn replace(text: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = find(rest, from) {
        out.extend_from_slice(&rest[..at]);
        out.extend_from_slice(to);
        rest = &rest[at + from.len()..];
    }
    out.extend_from_slice(rest);
    out
}

/// The byte of a `<0xAB>` token text.
fn hex_byte(text: &[u8]) -> Option<u8> {
    let hex = std::str::from_utf8(text.get(3..5)?).ok()?;
    u8::from_str_radix(hex, 16).ok()
}

/// GPT-2 byte-level text back to bytes (`llama_decode_text`); a character that stands for no
/// byte is kept as llama.cpp writes it, `[UNK_BYTE_0x…]`.
fn decode_byte_level(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    for cp in crate::unicode::decode_utf8(text) {
        match crate::unicode::char_to_byte(cp) {
            Some(b) => out.push(b),
            None => {
                let mut utf8 = Vec::new();
                crate::unicode::push_utf8(cp, &mut utf8);
                out.extend_from_slice(b"[UNK_BYTE_0x");
                for b in utf8 {
                    out.extend_from_slice(format!("{b:02x}").as_bytes());
                }
                out.extend_from_slice(text);
                out.push(b']');
            }
        }
    }
    out
}

/// llama.cpp's `clean_spaces` passes: no space before `?!.,`, none around a lone `'`, and none
/// before `'s`, `'m`, `'re`, `'ve`.
fn clean_spaces(text: &[u8]) -> Vec<u8> {
    let mut t = text.to_vec();
    // Pass 1: " ?", " !", " .", " ,".
    let mut out: Vec<u8> = t.first().copied().into_iter().collect();
    for i in 1..t.len() {
        if t[i - 1] == b' ' && matches!(t[i], b'?' | b'!' | b'.' | b',') {
            out.pop();
        }
        out.push(t[i]);
    }
    t = out;
    // Pass 2: " ' " loses both spaces.
    let mut out: Vec<u8> = t.first().copied().into_iter().collect();
    let mut i = 1;
    while i < t.len() {
        let x = t[i];
        if x == b'\'' && i + 1 < t.len() && t[i - 1] == b' ' && t[i + 1] == b' ' {
            out.pop();
            out.push(x);
            // The next space is dropped, and llama.cpp blanks it in place, so the byte after it
            // does not see a space before itself.
            t[i + 1] = 0;
            i += 2;
            continue;
        }
        out.push(x);
        i += 1;
    }
    t = out;
    // Pass 3: contractions.
    let mut out: Vec<u8> = t.first().copied().into_iter().collect();
    for i in 1..t.len() {
        let x = t[i];
        if t[i - 1] == b' ' && x == b'\'' && i + 1 < t.len() {
            let x1 = t[i + 1];
            let x2 = t.get(i + 2).copied().filter(|_| i + 2 < t.len());
            if matches!(x1, b's' | b'm')
                || matches!((x1, x2), (b'r', Some(b'e')) | (b'v', Some(b'e')))
            {
                out.pop();
            }
        }
        out.push(x);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_spaces_follows_llama_cpp() {
        assert_eq!(clean_spaces(b"Hello , world !"), b"Hello, world!");
        assert_eq!(clean_spaces(b"a ' b"), b"a'b");
        assert_eq!(
            clean_spaces(b"it 's I 'm we 're you 've don 't"),
            b"it's I'm we're you've don 't"
        );
    }

    #[test]
    fn find_locates_the_first_occurrence() {
        assert_eq!(find(b"abcabd", b"abd"), Some(3));
        assert_eq!(find(b"<s><s>", b"<s>"), Some(0));
        assert_eq!(find(b"x<s", b"<s>"), None);
        assert_eq!(find(b"ab", b"abc"), None);
        assert_eq!(find(b"", b"a"), None);
        assert_eq!(find(b"a", b""), None);
    }

    #[test]
    fn replace_and_hex() {
        assert_eq!(
            replace(b" a b", b" ", "\u{2581}".as_bytes()),
            "\u{2581}a\u{2581}b".as_bytes()
        );
        assert_eq!(hex_byte(b"<0x0A>"), Some(10));
        assert_eq!(decode_byte_level("Ġhi".as_bytes()), b" hi");
    }
}
