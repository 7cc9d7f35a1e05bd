//! Arbitrary bytes as the frames of an RPC connection, decoded and executed by a server
//! session over the CPU device (after HELLO and one 1024-byte buffer).
//!
//! Run from the repository root (stable toolchain):
//! `RUSTC_BOOTSTRAP=1 cargo fuzz run rpc_decode fuzz/corpus/rpc_decode crates/ggml-rpc/tests/fixtures/corpus -- -max_total_time=600`
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../crates/ggml-rpc/tests/support/fuzz_one.rs"]
mod fuzz_one;

fuzz_target!(|data: &[u8]| {
    std::hint::black_box(fuzz_one::run(data));
});
