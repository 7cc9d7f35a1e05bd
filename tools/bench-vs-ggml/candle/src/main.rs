//! Times candle 0.11's CPU matrix products on ggml-rs's bench shapes, as
//! `crates/ggml/benches/ops.rs` times ggml-rs's: the same fill pattern, one warm-up run, then
//! repeated runs for at least 0.4 s; prints the median's and the best run's GFLOP/s in that
//! bench's columns, each line prefixed `candle`.
//!
//! ```text
//! RUSTFLAGS="-C target-cpu=native" cargo run --release -- TYPE:M:K:N...
//! ```
//!
//! TYPE is one of f32, f16, q4_0, q4_1, q5_0, q5_1, q8_0, q2_K … q6_K: weights of M rows of K
//! values against F32 activations of N rows. Quantized weights go through `QMatMul` (candle's
//! quantized models' path: activations quantized to the dot type, its vec_dot kernels); F32
//! and F16 weights through `Tensor::matmul` (the `gemm` crate), F16 with the activations
//! converted to F16 as `QMatMul::TensorF16` does. Candle chooses its SIMD kernels at compile
//! time (`cfg(target_feature)`), hence `target-cpu=native`: candle built for this CPU, as GGML
//! is. The thread count is rayon's: `RAYON_NUM_THREADS` (run.sh runs one process per count).
//! Timing only: nothing asserted.

use std::time::{Duration, Instant};

use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{DType, Device, Module, Tensor};

const TARGET: Duration = Duration::from_millis(400);

/// ops.rs's fill: value i is (i·7919 mod 2003)/1001.5 − 1.
fn pattern(n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 7919 % 2003) as f32 / 1001.5) - 1.0)
        .collect()
}

fn dtype(name: &str) -> Option<GgmlDType> {
    Some(match name {
        "f32" => GgmlDType::F32,
        "f16" => GgmlDType::F16,
        "bf16" => GgmlDType::BF16,
        "q4_0" => GgmlDType::Q4_0,
        "q4_1" => GgmlDType::Q4_1,
        "q5_0" => GgmlDType::Q5_0,
        "q5_1" => GgmlDType::Q5_1,
        "q8_0" => GgmlDType::Q8_0,
        "q2_K" => GgmlDType::Q2K,
        "q3_K" => GgmlDType::Q3K,
        "q4_K" => GgmlDType::Q4K,
        "q5_K" => GgmlDType::Q5K,
        "q6_K" => GgmlDType::Q6K,
        _ => return None,
    })
}

/// One product `x · wᵀ` of the case, ready to run.
type Run = Box<dyn Fn() -> candle_core::Result<Tensor>>;

fn build(ty: GgmlDType, m: usize, k: usize, n: usize) -> candle_core::Result<Run> {
    let dev = Device::Cpu;
    let w = Tensor::from_vec(pattern(m * k), (m, k), &dev)?;
    let x = Tensor::from_vec(pattern(n * k), (n, k), &dev)?;
    Ok(match ty {
        GgmlDType::F32 => {
            let wt = w.t()?;
            Box::new(move || x.matmul(&wt))
        }
        GgmlDType::F16 => {
            let wt = w.to_dtype(DType::F16)?.t()?;
            Box::new(move || x.to_dtype(DType::F16)?.matmul(&wt)?.to_dtype(DType::F32))
        }
        _ => {
            let q = QMatMul::from_qtensor(QTensor::quantize(&w, ty)?)?;
            Box::new(move || q.forward(&x))
        }
    })
}

/// (median, best) seconds per run: one warm-up, then enough runs to fill [`TARGET`] (3 to
/// 1000).
fn time(run: &Run) -> candle_core::Result<(f64, f64)> {
    run()?;
    let t0 = Instant::now();
    run()?;
    let once = t0.elapsed().as_secs_f64().max(1e-7);
    let reps = ((TARGET.as_secs_f64() / once) as usize).clamp(3, 1000);
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t = Instant::now();
        run()?;
        times.push(t.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    Ok((times[times.len() / 2], times[0]))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let threads = candle_core::utils::get_num_threads();
    for case in std::env::args().skip(1) {
        let parts: Vec<&str> = case.split(':').collect();
        let [name, m, k, n] = parts[..] else {
            return Err(format!("a case is TYPE:M:K:N, got {case:?}").into());
        };
        let ty = dtype(name).ok_or_else(|| format!("unknown type {name:?} in {case:?}"))?;
        let (m, k, n): (usize, usize, usize) = (m.parse()?, k.parse()?, n.parse()?);
        let (med, best) = time(&build(ty, m, k, n)?)?;
        let flop = 2.0 * (m * k * n) as f64;
        let label = format!("candle mul_mat {name} weights  M={m} K={k} N={n}");
        println!(
            "{label:<44} {threads:>8} {:>9.3} ms {:>8.2} GFLOP/s {:>8.2} GFLOP/s",
            med * 1e3,
            flop / med / 1e9,
            flop / best / 1e9
        );
    }
    Ok(())
}
