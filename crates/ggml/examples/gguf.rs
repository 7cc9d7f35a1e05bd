//! GGUF and quantization end to end: quantize a weight matrix to Q4_K, write it to a GGUF file
//! with metadata, open the file (memory-mapped), bind its tensors to a CPU buffer without a
//! copy, and compute with them.
//!
//! Run with `cargo run --release --example gguf`.

use ggml::gguf::{GgufFile, GgufWriter};
use ggml::{backend, quantize_chunk, Context, Type};

fn main() -> ggml::Result<()> {
    let (k, m) = (512usize, 4usize);
    let weights: Vec<f32> = (0..k * m)
        .map(|i| (i * 37 % 101) as f32 / 100.0 + i as f32 / (k * m) as f32)
        .collect();
    let mut q4k = vec![0u8; Type::Q4_K.row_size(k as i64)? * m];
    let written = quantize_chunk(Type::Q4_K, &weights, &mut q4k, 0, m, k, None)?;
    println!(
        "quantized {} f32 values ({} bytes) to {written} bytes of q4_K",
        k * m,
        k * m * 4
    );

    let path = std::env::temp_dir().join(format!("ggml-example-{}.gguf", std::process::id()));
    let mut w = GgufWriter::new();
    w.set("general.name", "example")?;
    w.set("example.rows", m as u32)?;
    w.add_tensor("w", Type::Q4_K, &[k as i64, m as i64], q4k.as_slice())?;
    w.write_to_file(&path)?;

    let file = GgufFile::open(&path)?;
    println!(
        "{}: GGUF v{}, {} keys, {} tensor(s); general.name = {:?}",
        path.display(),
        file.version(),
        file.n_kv(),
        file.n_tensors(),
        file.get_val_str("general.name")?
    );
    let cpu = backend::cpu_init()?;
    let loaded = file.load_tensors(&cpu)?;
    println!(
        "tensors bound to buffer {:?} ({} bytes), mapped without a copy: {}",
        loaded.buffer.name(),
        loaded.buffer.get_size(),
        loaded.mapped
    );

    let wt = loaded.ctx.get_tensor("w").expect("the file's tensor");
    let ctx = Context::init(1 << 20, false)?;
    let x = ctx.new_tensor_1d(Type::F32, k as i64)?;
    x.set_f32(&vec![1.0 / k as f32; k])?;
    let y = ctx.mul_mat(&wt, &x)?;
    cpu.graph_compute(&ctx.build_forward_expand(&y)?)?;

    let exact: Vec<f32> = weights
        .chunks(k)
        .map(|r| r.iter().sum::<f32>() / k as f32)
        .collect();
    println!("row means through q4_K: {:?}", y.get_f32()?);
    println!("row means in f32:       {exact:?}");
    drop(loaded);
    std::fs::remove_file(&path)?;
    Ok(())
}
