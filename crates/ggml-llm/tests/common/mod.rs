//! Shared by the tokenizer tests: where the vocabulary files are, and the `.inp`/`.out` format
//! of llama.cpp's tokenizer tests (texts separated by `\n__ggml_vocab_test__\n`; one line of
//! space-separated ids per text).

use std::path::PathBuf;

/// The separator between texts in an `.inp` file.
pub const SEP: &str = "\n__ggml_vocab_test__\n";

/// The directory with llama.cpp's `ggml-vocab-*.gguf` files (`GGML_LLM_VOCAB_DIR`, else
/// `$HOME/.cache/ggml-rs/llama-vocab`, which `tools/tokenizer_check/fetch_vocabs.sh` fills), or
/// `None` when it is absent. With `GGML_LLM_REQUIRE_VOCABS=1` (CI) an absent directory fails.
pub fn vocab_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("GGML_LLM_VOCAB_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                .join(".cache/ggml-rs/llama-vocab")
        });
    if dir.is_dir() {
        return Some(dir);
    }
    assert!(
        std::env::var("GGML_LLM_REQUIRE_VOCABS").as_deref() != Ok("1"),
        "{} is missing; run tools/tokenizer_check/fetch_vocabs.sh",
        dir.display()
    );
    eprintln!(
        "skipped: {} is missing (tools/tokenizer_check/fetch_vocabs.sh fills it)",
        dir.display()
    );
    None
}

/// The texts of an `.inp` file.
pub fn split_texts(raw: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < raw.len() {
        match raw[pos..].find(SEP) {
            Some(at) => {
                out.push(raw[pos..pos + at].to_string());
                pos += at + SEP.len();
            }
            None => {
                out.push(raw[pos..].to_string());
                break;
            }
        }
    }
    out
}

/// The id lists of an `.out` file; `None` for a line `ERROR` (the tool failed on that text).
pub fn parse_ids(raw: &str) -> Vec<Option<Vec<u32>>> {
    let ids = |l: &str| {
        l.split_whitespace()
            .map(|t| t.parse().expect("a token id"))
            .collect()
    };
    raw.lines()
        .map(|l| (l != "ERROR").then(|| ids(l)))
        .collect()
}
