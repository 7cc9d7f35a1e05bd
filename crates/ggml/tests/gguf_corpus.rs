//! Regression: every file of the minimised fuzz corpus (and any fixed crash input) goes through
//! the reader, giving `Ok` (then everything is walked) or a format error with an offset.
//! The corpus comes from `fuzz/fuzz_targets/gguf_read.rs` (see `fuzz/README.md`).

mod gguf_support;

use std::path::PathBuf;

use ggml::gguf::GgufFile;

#[test]
fn fuzz_corpus_parses_or_fails_cleanly() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gguf");
    let mut n = 0;
    let (mut ok, mut err) = (0, 0);
    for sub in ["corpus", "crashes"] {
        let Ok(entries) = std::fs::read_dir(root.join(sub)) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            let bytes = std::fs::read(&path).unwrap();
            match GgufFile::from_bytes(&bytes) {
                Ok(f) => {
                    gguf_support::walk(&f);
                    ok += 1;
                }
                Err(e) => {
                    let m = e.to_string();
                    assert!(m.contains("at offset"), "{}: {m}", path.display());
                    err += 1;
                }
            }
            n += 1;
        }
    }
    assert!(n > 100, "corpus has only {n} files");
    assert!(ok > 0 && err > 0, "{ok} ok, {err} errors");
}
