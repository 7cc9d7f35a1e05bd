//! Opening a ~1 GiB GGUF file: writes 512 tensors of 2 MiB (plus metadata with a 32k-entry
//! vocabulary) to a temporary directory, then times `GgufFile::open` (map + parse + validate)
//! and fetching every tensor's data slice, and separately a pass that reads every byte.
//! Prints milliseconds; deletes the file.
//!
//! `cargo bench -p ggml --bench gguf_open`

use std::time::Instant;

use ggml::gguf::{Array, GgufFile, GgufWriter};
use ggml::Type;

const N_TENSORS: usize = 512;
const TENSOR_BYTES: usize = 2 << 20;

fn main() -> ggml::Result<()> {
    // `cargo test --all-targets` runs bench binaries without `--bench`: do not write 1 GiB then.
    if !std::env::args().any(|a| a == "--bench") {
        println!("gguf_open: skipped (run it with `cargo bench -p ggml --bench gguf_open`)");
        return Ok(());
    }
    let dir = std::env::temp_dir().join(format!("ggml-gguf-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("bench.gguf");

    let data: Vec<u8> = (0..TENSOR_BYTES).map(|i| (i * 31 % 251) as u8).collect();
    let mut w = GgufWriter::new();
    w.set_val_str("general.architecture", "bench")?;
    let vocab: Vec<String> = (0..32_000).map(|i| format!("tok{i}")).collect();
    w.set("tokenizer.ggml.tokens", Array::from(vocab))?;
    w.set(
        "tokenizer.ggml.scores",
        (0..32_000).map(|i| i as f32).collect::<Vec<f32>>(),
    )?;
    for i in 0..N_TENSORS {
        let ne = [(TENSOR_BYTES / 4) as i64 / 1024, 1024];
        w.add_tensor(
            &format!("blk.{}.w{}", i / 8, i % 8),
            Type::F32,
            &ne,
            &data[..],
        )?;
    }
    let t = Instant::now();
    w.write_to_file(&path)?;
    let size = std::fs::metadata(&path)?.len();
    println!(
        "wrote {:.2} GiB ({N_TENSORS} tensors) in {:.0} ms",
        size as f64 / (1u64 << 30) as f64,
        t.elapsed().as_secs_f64() * 1e3
    );

    let mut best = f64::MAX;
    for run in 0..5 {
        let t = Instant::now();
        let f = GgufFile::open(&path)?;
        let mut total = 0usize;
        for info in f.tensors() {
            total += f.data_of(info).len();
        }
        let ms = t.elapsed().as_secs_f64() * 1e3;
        assert_eq!(total, N_TENSORS * TENSOR_BYTES);
        println!(
            "run {run}: open + {} tensor slices: {ms:.3} ms",
            f.n_tensors()
        );
        best = best.min(ms);
    }
    println!("best open + slices: {best:.3} ms");

    let t = Instant::now();
    let f = GgufFile::open(&path)?;
    let sum = f
        .tensors()
        .iter()
        .map(|info| f.data_of(info).iter().map(|&b| b as u64).sum::<u64>())
        .sum::<u64>();
    println!(
        "open + read every tensor byte (checksum {sum}): {:.0} ms",
        t.elapsed().as_secs_f64() * 1e3
    );
    drop(f);
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
