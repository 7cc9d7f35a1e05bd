//! llama.cpp's own tokenizer tests: for each `models/ggml-vocab-*.gguf` of the llama.cpp
//! source package that has `.inp`/`.out` files (written by llama.cpp's
//! `tests/test-tokenizer-0`, `add_special = false`, `parse_special = false`), our ids must equal
//! the expected ids for every text.

mod common;

use ggml::gguf::GgufFile;
use ggml_llm::Vocab;

/// Runs one vocabulary's `.inp`/`.out` pair; returns (texts, mismatches as messages).
fn check(name: &str) -> Option<(usize, Vec<String>)> {
    let dir = common::vocab_dir()?;
    let base = dir.join(format!("ggml-vocab-{name}.gguf"));
    let file = GgufFile::open(&base).unwrap_or_else(|e| panic!("{}: {e}", base.display()));
    let vocab = Vocab::from_gguf(&file).unwrap_or_else(|e| panic!("{name}: {e}"));
    let inp = std::fs::read_to_string(base.with_extension("gguf.inp")).unwrap();
    let out = std::fs::read_to_string(base.with_extension("gguf.out")).unwrap();
    let (texts, expected) = (common::split_texts(&inp), common::parse_ids(&out));
    assert_eq!(
        texts.len(),
        expected.len(),
        "{name}: .inp and .out disagree in length"
    );
    let mut bad = Vec::new();
    for (text, want) in texts.iter().zip(&expected) {
        let want = want
            .as_ref()
            .expect("llama.cpp's .out files have ids on every line");
        let got = vocab.tokenize(text, false, false).unwrap();
        if &got != want {
            bad.push(format!("{name}: {text:?}\n  want {want:?}\n  got  {got:?}"));
        }
    }
    Some((texts.len(), bad))
}

macro_rules! vocab_tests {
    ($($test:ident => $name:literal,)*) => {$(
        #[test]
        fn $test() {
            if let Some((n, bad)) = check($name) {
                assert!(bad.is_empty(), "{} of {n} texts differ:\n{}", bad.len(), bad.join("\n"));
            }
        }
    )*};
}

vocab_tests! {
    llama_spm => "llama-spm",
    phi_3 => "phi-3",
    llama_bpe => "llama-bpe",
    qwen2 => "qwen2",
    qwen35 => "qwen35",
    gpt_2 => "gpt-2",
    mpt => "mpt",
    starcoder => "starcoder",
    refact => "refact",
    command_r => "command-r",
    falcon => "falcon",
    gemma_4 => "gemma-4",
    bert_bge => "bert-bge",
    deepseek_coder => "deepseek-coder",
}
