//! Language models on ggml: the GGUF vocabulary and its tokenizers ([`Vocab`]), and token
//! sampling ([`sampling`]), following llama.cpp's behaviour token for token.
//!
//! Only `ggml`'s public API is used (GGUF metadata through [`ggml::gguf`]).

#![warn(missing_docs)]

pub mod sampling;
mod tokenizer;
mod unicode;
pub mod vocab;

pub use vocab::{PreType, SpecialTokens, Token, Vocab, VocabKind};

/// What can go wrong in this crate.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file's vocabulary is missing or malformed; the message names the key.
    #[error("vocabulary: {0}")]
    Vocab(String),
    /// A tokenizer model or pre-tokenizer this crate does not implement.
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
    }
}
