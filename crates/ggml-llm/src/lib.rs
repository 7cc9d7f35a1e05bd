//! Language models on ggml: GGUF models loaded without a copy ([`Model`]), run with a KV
//! cache ([`Session`]) or as sentence encoders ([`Model::embed`]); the GGUF vocabulary and its
//! tokenizers ([`Vocab`]) and token sampling ([`sampling`]), following llama.cpp's behaviour
//! token for token.
//!
//! Architectures: `llama`, `qwen2`, `qwen3`, `gemma3` (decoders) and `bert` (encoder).
//!
//! ```no_run
//! use ggml_llm::{LoadOptions, Model, Pooling, SessionOptions};
//! # fn main() -> ggml_llm::Result<()> {
//! // Memory-mapped; on the CPU the weights are the file's bytes, not a copy.
//! let model = Model::load("model.gguf", &LoadOptions::default())?;
//! let tokens = model.vocab().tokenize("The capital of France is", true, true)?;
//! let mut session = model.session(SessionOptions { n_ctx: 512, ..Default::default() })?;
//! // Logits of every position: tokens.len() rows of n_vocab values.
//! let logits: Vec<f32> = session.eval(&tokens, true)?;
//! assert_eq!(logits.len(), tokens.len() * model.n_vocab());
//!
//! // Sentence embeddings (a bert model).
//! let encoder = Model::load("minilm.gguf", &LoadOptions::default())?;
//! let ids = encoder.vocab().tokenize("a sentence", true, true)?;
//! let emb: Vec<Vec<f32>> = encoder.embed(&ids, Pooling::Mean, true)?;
//! # Ok(()) }
//! ```
//!
//! Only `ggml`'s public API is used (GGUF files through [`ggml::gguf`], graphs, the graph
//! allocator and backends).

#![warn(missing_docs)]

mod arch;
mod embed;
pub mod kv_cache;
pub mod model;
pub mod sampling;
pub mod session;
mod strings;
mod tokenizer;
mod unicode;
pub mod vocab;

pub use kv_cache::KvCache;
pub use model::{Arch, Hparams, LoadOptions, Model, Pooling, RopeScaling};
pub use session::{Generation, Session, SessionOptions, SessionStats};
pub use vocab::{PreType, SpecialTokens, Token, Vocab, VocabKind};

/// What can go wrong in this crate.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file's vocabulary is missing or malformed; the message names the key.
    #[error("vocabulary: {0}")]
    Vocab(String),
    /// The model's metadata or tensors are missing or malformed; the message names the key or
    /// tensor.
    #[error("model: {0}")]
    Model(String),
    /// A tokenizer model or pre-tokenizer, an architecture or a feature this crate does not
    /// implement.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// A bad argument; the message names it and its value.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// An error from `ggml` (reading the GGUF file).
    #[error(transparent)]
    Ggml(#[from] ggml::Error),
}

/// This crate's result type.
pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    /// The public handles can be shared across threads.
    #[test]
    fn handles_are_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<crate::Vocab>();
        check::<crate::sampling::Chain>();
        check::<crate::Error>();
        check::<crate::Model>();
        check::<crate::Session>();
        check::<crate::KvCache>();
    }
}
