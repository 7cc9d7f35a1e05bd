//! Timing shared by the benchmarks.

use std::time::{Duration, Instant};

use ggml::{Backend, Graph};

/// Seconds per run of `graph` on `be`: (median, best) of repeated runs (enough to fill
/// `target`, 3 to 1000 of them) after one warm-up. On a busy machine the best run is the one
/// least disturbed by other processes.
pub fn time(be: &Backend, graph: &Graph, target: Duration) -> (f64, f64) {
    be.graph_compute(graph).unwrap();
    let t0 = Instant::now();
    be.graph_compute(graph).unwrap();
    let once = t0.elapsed().as_secs_f64().max(1e-7);
    let reps = ((target.as_secs_f64() / once) as usize).clamp(3, 1000);
    let mut times: Vec<f64> = (0..reps)
        .map(|_| {
            let t = Instant::now();
            be.graph_compute(graph).unwrap();
            t.elapsed().as_secs_f64()
        })
        .collect();
    times.sort_by(f64::total_cmp);
    (times[reps / 2], times[0])
}
