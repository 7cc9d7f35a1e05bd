//! `ggml tokenize`: ids and pieces of a small BPE vocabulary written to a temporary file, the
//! BOS/special-token flags, and the exit codes of bad command lines and bad files.

use std::path::PathBuf;
use std::process::Command;

use ggml::gguf::{Array, GgufWriter, Value};

fn ggml(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ggml"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A Llama-3-style vocabulary: `<|bos|>` (control, id 0) added first, "hi", " hi", "!".
fn vocab_file(name: &str) -> PathBuf {
    let mut w = GgufWriter::new();
    let strings = |v: &[&str]| Value::Array(Array::from(v.to_vec()));
    w.set("tokenizer.ggml.model", "gpt2").unwrap();
    w.set("tokenizer.ggml.pre", "llama-bpe").unwrap();
    w.set(
        "tokenizer.ggml.tokens",
        strings(&["<|bos|>", "h", "i", "Ġ", "hi", "Ġhi", "!"]),
    )
    .unwrap();
    w.set("tokenizer.ggml.token_type", vec![3i32, 1, 1, 1, 1, 1, 1])
        .unwrap();
    w.set("tokenizer.ggml.merges", strings(&["h i", "Ġ hi"]))
        .unwrap();
    w.set("tokenizer.ggml.bos_token_id", 0u32).unwrap();
    let path = std::env::temp_dir().join(format!(
        "ggml-cli-tokenize-{}-{name}.gguf",
        std::process::id()
    ));
    w.write_to_file(&path).unwrap();
    path
}

#[test]
fn prints_ids_and_pieces() {
    let path = vocab_file("ids");
    let p = path.to_str().unwrap();
    let (code, out, err) = ggml(&["tokenize", p, "-p", "hi hi!"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out, "[0, 4, 5, 6]\n");
    let (_, out, _) = ggml(&["tokenize", p, "-p", "hi hi!", "--no-bos", "--pieces"]);
    assert_eq!(out, "     4 -> 'hi'\n     5 -> ' hi'\n     6 -> '!'\n");
    // The control token's text is parsed unless --no-parse-special.
    let (_, out, _) = ggml(&["tokenize", p, "-p", "<|bos|>hi", "--no-bos"]);
    assert_eq!(out, "[0, 4]\n");
    let (_, out, _) = ggml(&["tokenize", p, "-p", "hi", "--no-bos", "--no-parse-special"]);
    assert_eq!(out, "[4]\n");
    std::fs::remove_file(path).unwrap();
}

#[test]
fn bad_input_gets_clear_errors() {
    let (code, out, _) = ggml(&["tokenize", "--help"]);
    assert_eq!(code, Some(0));
    assert!(out.starts_with("usage: ggml tokenize"));
    let (code, _, err) = ggml(&["tokenize", "x.gguf"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("-p TEXT"), "{err}");
    let (code, _, err) = ggml(&["tokenize", "x.gguf", "-p", "a", "--frobnicate"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("--frobnicate"), "{err}");
    let (code, _, err) = ggml(&["tokenize", "/nonexistent/x.gguf", "-p", "a"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("/nonexistent/x.gguf"), "{err}");
    // A GGUF file without a vocabulary.
    let mut w = GgufWriter::new();
    w.set("general.architecture", "llama").unwrap();
    let path = std::env::temp_dir().join(format!(
        "ggml-cli-tokenize-{}-novocab.gguf",
        std::process::id()
    ));
    w.write_to_file(&path).unwrap();
    let (code, _, err) = ggml(&["tokenize", path.to_str().unwrap(), "-p", "a"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("tokenizer.ggml.model"), "{err}");
    std::fs::remove_file(path).unwrap();
}
