//! A matrix product, as GGML's `simple-backend` example: weights in a backend buffer, the
//! product computed on the CPU backend, the result printed.
//!
//! Run with `cargo run --example simple`.

use ggml::{backend, Context, Type};

fn main() -> ggml::Result<()> {
    // A: 4 rows of 2, B: 3 rows of 2 (GGML's example data).
    let (rows_a, cols_a) = (4i64, 2i64);
    let matrix_a = [2.0f32, 8.0, 5.0, 1.0, 4.0, 2.0, 8.0, 6.0];
    let (rows_b, cols_b) = (3i64, 2i64);
    let matrix_b = [10.0f32, 5.0, 9.0, 9.0, 5.0, 4.0];

    let cpu = backend::init_best()?;
    println!(
        "backend: {} on {}",
        cpu.name(),
        cpu.get_device().description()
    );

    // The tensors' data lives in a backend buffer, as with any device.
    let ctx = Context::init(3 * ggml::tensor_overhead() + ggml::graph_overhead(), true)?;
    let a = ctx.new_tensor_2d(Type::F32, cols_a, rows_a)?;
    let b = ctx.new_tensor_2d(Type::F32, cols_b, rows_b)?;
    let result = ctx.mul_mat(&a, &b)?;
    let _buffer = backend::alloc_ctx_tensors(&ctx, &cpu)?;
    a.set_f32(&matrix_a)?;
    b.set_f32(&matrix_b)?;

    let graph = ctx.new_graph()?;
    graph.build_forward_expand(&result)?;
    cpu.graph_compute(&graph)?;

    // result is [rows_a, rows_b]: result^T = A · B^T
    let out = result.get_f32()?;
    let (n, m) = (result.ne()[0] as usize, result.ne()[1] as usize);
    println!("mul mat ({n} x {m}) (transposed result):");
    for i in 0..n {
        let row: Vec<String> = (0..m).map(|j| format!("{:.2}", out[j * n + i])).collect();
        println!("[ {} ]", row.join(" "));
    }
    Ok(())
}
