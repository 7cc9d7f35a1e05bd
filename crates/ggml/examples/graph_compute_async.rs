//! `ggml_backend_graph_compute_async`: start a computation, do other work, then wait.
//!
//! The CPU backend here is a real stream with its own worker thread (GGML's blocks), so the
//! host's work overlaps the computation. Run with
//! `cargo run --release --example graph_compute_async`.

use std::time::Instant;

use ggml::{backend, Context, Type};

fn main() -> ggml::Result<()> {
    let cpu = backend::cpu_init()?;
    let ctx = Context::init(16 * 1024 * 1024, false)?;
    let a = ctx.new_tensor_1d(Type::F32, 100)?;
    let b = ctx.relu(&a)?;
    let graph = ctx.build_forward_expand(&b)?;
    let input: Vec<f32> = (0..100).map(|i| (i as f32 - 50.0) / 10.0).collect();
    a.set_f32(&input)?;
    cpu.graph_compute_async(&graph)?; // returns at once; the work runs on the backend's stream
    cpu.synchronize()?;
    let out: Vec<f32> = b.get_f32()?;
    println!("relu of {:?} .. = {:?} ..", &input[45..50], &out[45..50]);

    // A larger graph, to show the overlap: a chain of matrix products.
    let n = 512;
    let big = Context::init(64 * 1024 * 1024, false)?;
    let w = big.new_tensor_2d(Type::F32, n, n)?;
    let mut x = big.new_tensor_2d(Type::F32, n, n)?;
    w.set_f32(&vec![1.0 / n as f32; (n * n) as usize])?;
    x.set_f32(&vec![1.0; (n * n) as usize])?;
    for _ in 0..8 {
        x = big.mul_mat(&w, &x)?;
    }
    let chain = big.build_forward_expand(&x)?;

    let t0 = Instant::now();
    cpu.graph_compute_async(&chain)?;
    let returned = t0.elapsed();
    // Host work that does not touch the graph's buffers runs meanwhile.
    let mut host_sum = 0u64;
    let mut host_steps = 0u64;
    while cpu.n_pending() > 0 {
        host_sum = host_sum.wrapping_add(host_steps * host_steps);
        host_steps += 1;
    }
    cpu.synchronize()?;
    let total = t0.elapsed();
    println!(
        "8 products of {n}×{n}: graph_compute_async returned after {:?}; the host ran {host_steps} \
         steps of its own work (checksum {host_sum}) while the stream computed; done after {:?}",
        returned, total
    );
    println!("result[0] = {} (expected 1)", x.get_f32()?[0]);
    Ok(())
}
