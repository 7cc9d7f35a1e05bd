//! Throughput of quantization and dequantization per type, in MB/s of f32 data (input of the
//! quantizers, output of the dequantizers). `tools/quant_fixtures/bench_ggml.py` measures GGML's
//! own functions on the same sizes, so the two tables can be read side by side.
//!
//! `cargo bench -p ggml --bench quants [-- TYPE...]`

use std::hint::black_box;
use std::time::{Duration, Instant};

use ggml::quants::{
    dequantize_row, has_quantizer, has_to_float, quantize_chunk, quantize_requires_imatrix,
};
use ggml::Type;

/// Matrix benchmarked: N_ROWS rows of N_PER_ROW values (4 MiB of f32).
const N_ROWS: usize = 64;
const N_PER_ROW: usize = 16384;
/// Each measurement repeats the operation for at least this long and reports the best run.
const BUDGET: Duration = Duration::from_millis(300);

/// Normal-ish deterministic data (sum of four uniforms, xorshift generator).
fn data(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed | 1;
    let mut uniform = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 11) as f32 / (1u64 << 53) as f32
    };
    (0..n)
        .map(|_| (uniform() + uniform() + uniform() + uniform() - 2.0) * 1.7)
        .collect()
}

/// Best time of one call of `f`, repeated for at least [`BUDGET`].
fn best_time(mut f: impl FnMut()) -> Duration {
    let start = Instant::now();
    let mut best = Duration::MAX;
    while start.elapsed() < BUDGET || best == Duration::MAX {
        let t = Instant::now();
        f();
        best = best.min(t.elapsed());
    }
    best
}

fn mb_per_s(n_values: usize, t: Duration) -> f64 {
    (n_values * 4) as f64 / t.as_secs_f64() / 1e6
}

fn main() {
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let n = N_ROWS * N_PER_ROW;
    let src = data(n, 0x5eed);
    let imatrix: Vec<f32> = data(N_PER_ROW, 7).iter().map(|v| v * v + 0.1).collect();
    println!("{N_ROWS} rows x {N_PER_ROW} values; MB/s of f32 data (best of repeated runs)");
    println!(
        "{:8} {:>12} {:>12} {:>12}",
        "type", "quantize", "q+imatrix", "dequantize"
    );
    for ty in Type::ALL {
        let wanted = filter.is_empty() || filter.iter().any(|f| f.eq_ignore_ascii_case(ty.name()));
        if !wanted || !has_quantizer(ty) || !has_to_float(ty) || ty == Type::F32 {
            continue;
        }
        let mut q = vec![0u8; ty.row_size(n as i64).unwrap()];
        // Build the grid i-quants' lookup tables (GGML's `ggml_quantize_init`) before timing.
        let row = ty.row_size(N_PER_ROW as i64).unwrap();
        let w = Some(imatrix.as_slice());
        quantize_chunk(ty, &src[..N_PER_ROW], &mut q[..row], 0, 1, N_PER_ROW, w).unwrap();
        let plain = (!quantize_requires_imatrix(ty)).then(|| {
            best_time(|| {
                quantize_chunk(ty, black_box(&src), &mut q, 0, N_ROWS, N_PER_ROW, None).unwrap();
            })
        });
        let imat = best_time(|| {
            let w = Some(imatrix.as_slice());
            quantize_chunk(ty, black_box(&src), &mut q, 0, N_ROWS, N_PER_ROW, w).unwrap();
        });
        let mut back = vec![0f32; n];
        let deq = best_time(|| {
            dequantize_row(ty, black_box(&q), &mut back).unwrap();
        });
        black_box(&back);
        let plain = plain.map_or("-".to_owned(), |t| format!("{:.1}", mb_per_s(n, t)));
        println!(
            "{:8} {:>12} {:>12.1} {:>12.1}",
            ty.name(),
            plain,
            mb_per_s(n, imat),
            mb_per_s(n, deq)
        );
    }
}
