//! Parses arbitrary bytes as GGUF and walks everything that parsed.
//!
//! Run from the repository root (stable toolchain):
//! `RUSTC_BOOTSTRAP=1 cargo fuzz run gguf_read fuzz/corpus/gguf_read crates/ggml/tests/fixtures/gguf/corpus -- -max_total_time=600`
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../crates/ggml/tests/gguf_support/walk.rs"]
mod walk;

fuzz_target!(|data: &[u8]| {
    if let Ok(f) = ggml::gguf::GgufFile::from_bytes(data) {
        std::hint::black_box(walk::walk(&f));
    }
});
