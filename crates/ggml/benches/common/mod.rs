//! Timing shared by the benchmarks.

use std::time::{Duration, Instant};

use ggml::{Backend, Graph, Type};

/// Seconds per run of `graph` on `be`: (median, best) of repeated runs (enough to fill
/// `target`, 3 to 1000 of them) after one warm-up. On a busy machine the best run is the one
/// least disturbed by other processes.
pub fn time(be: &Backend, graph: &Graph, target: Duration) -> (f64, f64) {
    be.graph_compute(graph).unwrap();
    let t0 = Instant::now();
    be.graph_compute(graph).unwrap();
    let times: Vec<f64> = (0..reps_for(t0.elapsed().as_secs_f64(), target))
        .map(|_| {
            let t = Instant::now();
            be.graph_compute(graph).unwrap();
            t.elapsed().as_secs_f64()
        })
        .collect();
    median_best(times)
}

/// Runs to fill `target` when one takes `once` seconds: 3 to 1000.
pub fn reps_for(once: f64, target: Duration) -> usize {
    ((target.as_secs_f64() / once.max(1e-7)) as usize).clamp(3, 1000)
}

/// (median, best) of run times in seconds (at least one).
pub fn median_best(mut times: Vec<f64>) -> (f64, f64) {
    times.sort_by(f64::total_cmp);
    (times[times.len() / 2], times[0])
}

/// The benches' deterministic values (those of `ggml_mul_mat.py` too): value i is
/// (i·7919 mod 2003)/1001.5 − 1, in [-1, 1).
// (not every bench uses every helper)
#[allow(dead_code)]
pub fn pattern(n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 7919 % 2003) as f32 / 1001.5) - 1.0)
        .collect()
}

/// [`pattern`]'s `n` values as the bytes of `ty`: f32 as is, a quantized type quantized in
/// rows of `row` values (`quantize_chunk`).
#[allow(dead_code)]
pub fn pattern_bytes(ty: Type, n: usize, row: usize) -> Vec<u8> {
    let v = pattern(n);
    if ty == Type::F32 {
        return bytemuck::cast_slice(&v).to_vec();
    }
    let mut q = vec![0u8; ty.row_size(row as i64).unwrap() * (n / row)];
    // an importance matrix of ones for the types that cannot do without one
    let ones = vec![1.0f32; row];
    let imatrix = ggml::quants::quantize_requires_imatrix(ty).then_some(&ones[..]);
    ggml::quants::quantize_chunk(ty, &v, &mut q, 0, n / row, row, imatrix).unwrap();
    q
}
