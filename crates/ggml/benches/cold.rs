//! Matrix-vector products with the weights coming from DRAM, not from a cache: issue 8's
//! "quantized matvec with weights from RAM" case. Each line's graph multiplies one F32 column
//! by as many distinct [14336 → 4096] weight matrices (GGML's perf shape) as take
//! [`COLD_BYTES`] together, several times the largest L3 this project runs on (300 MiB), and
//! adds the products, so every run streams every weight byte from memory once; the rate is
//! the weight bytes per second (`bw cold …` lines). One more line times a language model's
//! output projection of short rows ([`LM_HEAD`]: Gemma 3's Q8_0 [640 → 262144], 178 MB, one
//! matrix), which token generation reads whole for every token. The `stream read` line is the yardstick:
//! a plain read of as many bytes, summed as integers, what the cores can read from DRAM.
//! `tools/bench-vs-ggml/run.sh` with `MODE=cold` times GGML's same graphs beside these.
//!
//! `cargo bench -p ggml --bench cold [-- filter...]`. Timing only: nothing asserted.

mod common;

use std::time::Duration;

use ggml::{backend, Context, Tensor, Type};

/// Minimum measuring time per line (a run reads [`COLD_BYTES`]: tens of milliseconds).
const TARGET: Duration = Duration::from_millis(600);

/// Weight bytes each line streams per run.
const COLD_BYTES: usize = 1 << 30;

/// The weight matrices' shape: M rows of K values.
const M: i64 = 4096;
const K: i64 = 14336;

/// The weight types timed.
const TYPES: [Type; 6] = [
    Type::F32,
    Type::F16,
    Type::Q4_0,
    Type::Q8_0,
    Type::Q4_K,
    Type::Q6_K,
];

/// The output projection timed besides: weight type, rows (the vocabulary), row length.
const LM_HEAD: (Type, i64, i64) = (Type::Q8_0, 262_144, 640);

/// How many `ty` matrices of [`M`] × [`K`] make at least [`COLD_BYTES`].
fn copies(ty: Type) -> usize {
    let bytes = ty.row_size(K).expect("K is whole blocks") * M as usize;
    COLD_BYTES.div_ceil(bytes)
}

/// The graph's result: the sum of `n` weight matrices of `ty` with `m` rows of `k` values
/// times one column, every matrix holding the same values (quantized once) at its own address.
fn cold_graph(ctx: &Context, ty: Type, [m, k]: [i64; 2], n: usize) -> Tensor {
    let bytes = common::pattern_bytes(ty, (m * k) as usize, k as usize);
    let x = ctx.new_tensor_2d(Type::F32, k, 1).unwrap();
    x.set_bytes(&common::pattern_bytes(Type::F32, k as usize, k as usize), 0)
        .unwrap();
    let mut sum: Option<Tensor> = None;
    for _ in 0..n {
        let w = ctx.new_tensor_2d(ty, k, m).unwrap();
        w.set_bytes(&bytes, 0).unwrap();
        let y = ctx.mul_mat(&w, &x).unwrap();
        sum = Some(match sum {
            Some(s) => ctx.add(&s, &y).unwrap(),
            None => y,
        });
    }
    sum.expect("at least one matrix")
}

/// Streams a thread reads at once, as a matrix-vector kernel reads several weight rows.
const STREAMS: usize = 8;

/// The wrapping sum of `part`, read as [`STREAMS`] contiguous pieces side by side (one
/// accumulator each: the compiler vectorises the adds), so that the hardware prefetchers see
/// as many streams as a matrix-vector kernel gives them.
fn read_streams(part: &[u64]) -> u64 {
    let len = part.len() / STREAMS;
    let mut acc = [0u64; STREAMS];
    for i in 0..len {
        for (s, a) in acc.iter_mut().enumerate() {
            *a = a.wrapping_add(part[s * len + i]);
        }
    }
    let tail = part[STREAMS * len..].iter();
    tail.chain(&acc).fold(0, |a, &x| a.wrapping_add(x))
}

/// Seconds of `reps` reads of `data` on `nt` threads (each summing its contiguous part with
/// [`read_streams`]), barrier to barrier; the sums are kept so the reads cannot be dropped.
fn read_runs(data: &[u64], nt: usize, reps: usize) -> Vec<f64> {
    let per = data.len().div_ceil(nt);
    let barrier = std::sync::Barrier::new(nt);
    let times = std::sync::Mutex::new(Vec::with_capacity(reps));
    let total = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|s| {
        for (t, part) in data.chunks(per).enumerate() {
            let (barrier, times, total) = (&barrier, &times, &total);
            s.spawn(move || {
                for _ in 0..reps {
                    barrier.wait();
                    let t0 = std::time::Instant::now();
                    let sum = read_streams(part);
                    barrier.wait();
                    total.fetch_add(sum, std::sync::atomic::Ordering::Relaxed);
                    if t == 0 {
                        times.lock().unwrap().push(t0.elapsed().as_secs_f64());
                    }
                }
            });
        }
    });
    std::hint::black_box(total.into_inner());
    times.into_inner().unwrap()
}

fn print_line(name: &str, nt: usize, (med, best): (f64, f64), bytes: usize) {
    println!(
        "{name:<44} {nt:>8} {:>9.3} ms {:>8.2} GB/s {:>8.2} GB/s",
        med * 1e3,
        bytes as f64 / med / 1e9,
        bytes as f64 / best / 1e9
    );
}

fn main() {
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let wanted = |name: &str| filters.is_empty() || filters.iter().any(|f| name.contains(f));
    println!(
        "{:<44} {:>8} {:>12} {:>12} {:>12}",
        "op", "threads", "median", "rate", "best rate"
    );
    let read_name = "stream read [1 GiB]";
    if wanted(read_name) {
        let data: Vec<u64> = (0..COLD_BYTES as u64 / 8).collect();
        for nt in [1, 2] {
            let (_, once) = common::median_best(read_runs(&data, nt, 2));
            let reps = common::reps_for(once, TARGET);
            print_line(
                read_name,
                nt,
                common::median_best(read_runs(&data, nt, reps)),
                COLD_BYTES,
            );
        }
    }
    let (head_ty, head_m, head_k) = LM_HEAD;
    let cases = TYPES.map(|ty| (ty, [M, K], copies(ty)));
    for (ty, [m, k], n) in cases.into_iter().chain([(head_ty, [head_m, head_k], 1)]) {
        let name = format!("bw cold {ty} matvec x{n} [{k}, {m}]");
        if !wanted(&name) {
            continue;
        }
        let bytes = ty.row_size(k).unwrap() * (m as usize) * n;
        let ctx = Context::init(bytes + (64 << 20), false).unwrap();
        let graph = ctx
            .build_forward_expand(&cold_graph(&ctx, ty, [m, k], n))
            .unwrap();
        for nt in [1, 2] {
            let be = backend::cpu_init().unwrap();
            be.set_n_threads(nt).unwrap();
            print_line(&name, nt, common::time(&be, &graph, TARGET), bytes);
        }
    }
}
