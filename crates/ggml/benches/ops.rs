//! Micro-benchmark of the CPU kernels: GFLOP/s of MUL_MAT (F32, F16 and BF16 weights),
//! MUL_MAT_ID, OUT_PROD, the convolutions (CONV_2D, CONV_TRANSPOSE_1D) and FLASH_ATTN_EXT
//! (Gemma 3 270M's attention shape), and GB/s of the bandwidth-bound ops (the
//! lines named `bw …`, on [4096, 512] F32 tensors, beyond L2; the same cases as
//! `tools/bench-vs-ggml/ggml_bw_ops.py` times in GGML), with 1 and 2 threads. Run with
//! `cargo bench -p ggml --bench ops` (optionally `-- <filter>...` to run the lines containing
//! any of the filters). The `stream …` lines are STREAM-like loops (no graph), the yardstick
//! for the `bw` lines: what one and two cores can stream here.
//! Timing lives here, never in a test.

mod common;

use std::time::Duration;

use ggml::ops::GluOp;
use ggml::{backend, Backend, BufferType, Context, Tensor, Type};

/// Minimum measuring time per line.
const TARGET: Duration = Duration::from_millis(400);

/// Fills a tensor with the benches' pattern ([`common::pattern`]; quantized with
/// `quantize_chunk` for the quantized types).
fn fill(t: &Tensor) {
    let n = t.nelements() as usize;
    if t.ty().is_quantized() {
        let row = t.ne()[0] as usize;
        t.set_bytes(&common::pattern_bytes(t.ty(), n, row), 0)
            .unwrap();
    } else {
        t.set_f32(&common::pattern(n)).unwrap();
    }
}

struct Line {
    name: String,
    /// Work per run: FLOPs (matmul) or bytes moved (the rest).
    work: f64,
    unit: &'static str,
    build: Box<dyn Fn(&Context) -> Tensor>,
    mem: usize,
}

fn mul_mat_line(wt: Type, m: i64, k: i64, n: i64) -> Line {
    mul_mat_in(wt, None, m, k, n)
}

/// [`mul_mat_line`] with the weights in a buffer of `buft` (the CPU's repack type, say)
/// instead of the context's memory, when given.
fn mul_mat_in(wt: Type, buft: Option<BufferType>, m: i64, k: i64, n: i64) -> Line {
    let mem = (m * k * wt.type_size() as i64 + (k * n + m * n) * 4) as usize + (4 << 20);
    let place = buft
        .as_ref()
        .map_or(String::new(), |b| format!(" {}", b.name()));
    Line {
        name: format!("mul_mat {wt} weights{place}  M={m} K={k} N={n}"),
        work: 2.0 * (m * k * n) as f64,
        unit: "GFLOP/s",
        build: Box::new(move |ctx| {
            let a = match &buft {
                // the tensor keeps its context and buffer alive
                Some(buft) => {
                    let wctx = Context::init(1 << 16, true).unwrap();
                    let a = wctx.new_tensor_2d(wt, k, m).unwrap();
                    backend::alloc_ctx_tensors_from_buft(&wctx, buft).unwrap();
                    a
                }
                None => ctx.new_tensor_2d(wt, k, m).unwrap(),
            };
            let b = ctx.new_tensor_2d(Type::F32, k, n).unwrap();
            fill(&a);
            fill(&b);
            ctx.mul_mat(&a, &b).unwrap()
        }),
        mem,
    }
}

/// MUL_MAT_ID of `n_expert` experts `[k, m]` of `wt`, each of `tokens` F32 activation rows
/// choosing `n_used` of them (token t's slot e takes expert (t + e) mod n_expert, so every
/// expert is used alike); FLOPs = 2 · m · k · n_used · tokens.
fn mul_mat_id_line(wt: Type, (k, m, n_expert): (i64, i64, i64), n_used: i64, tokens: i64) -> Line {
    Line {
        name: format!("mul_mat_id {wt} {n_expert} experts  M={m} K={k} used={n_used} T={tokens}"),
        work: 2.0 * (m * k * n_used * tokens) as f64,
        unit: "GFLOP/s",
        build: Box::new(move |ctx| {
            let w = input(ctx, wt, &[k, m, n_expert]);
            let b = input(ctx, Type::F32, &[k, n_used, tokens]);
            let ids = ctx.new_tensor_2d(Type::I32, n_used, tokens).unwrap();
            let picks: Vec<i32> = (0..n_used * tokens)
                .map(|j| ((j / n_used + j % n_used) % n_expert) as i32)
                .collect();
            ids.set_i32(&picks).unwrap();
            ctx.mul_mat_id(&w, &b, &ids).unwrap()
        }),
        mem: (m * k * n_expert) as usize * wt.type_size()
            + ((k + m) * n_used * tokens * 4) as usize
            + (4 << 20),
    }
}

/// OUT_PROD of F32 `a` `[m, k]` and `b` `[n, k]` (a weight gradient's shape):
/// FLOPs = 2 · m · n · k.
fn out_prod_line(m: i64, k: i64, n: i64) -> Line {
    Line {
        name: format!("out_prod f32  M={m} K={k} N={n}"),
        work: 2.0 * (m * k * n) as f64,
        unit: "GFLOP/s",
        build: Box::new(move |ctx| {
            let a = input(ctx, Type::F32, &[m, k]);
            let b = input(ctx, Type::F32, &[n, k]);
            ctx.out_prod(&a, &b).unwrap()
        }),
        mem: ((m * k + n * k + m * n) * 4) as usize + (4 << 20),
    }
}

/// CONV_2D (direct) of an F32 input `[w, w, ic, n]` with a `kt` kernel `[k, k, ic, oc]`,
/// stride 1, no padding: FLOPs = 2 · OW · OH · OC · IC · K² · N.
fn conv_2d_line(kt: Type, w: i64, k: i64, ic: i64, oc: i64, n: i64) -> Line {
    let o = w - k + 1;
    Line {
        name: format!("conv_2d {kt} {k}x{k} {ic}->{oc} in {w}x{w} N={n}"),
        work: 2.0 * (o * o * oc * ic * k * k * n) as f64,
        unit: "GFLOP/s",
        build: Box::new(move |ctx| {
            let a = input(ctx, kt, &[k, k, ic, oc]);
            let b = input(ctx, Type::F32, &[w, w, ic, n]);
            ctx.conv_2d_direct(&a, &b, 1, 1, 0, 0, 1, 1).unwrap()
        }),
        mem: ((k * k * ic * oc + w * w * ic * n + o * o * oc * n) * 4) as usize + (4 << 20),
    }
}

/// CONV_TRANSPOSE_1D of an F32 input `[l, ic]` with a `kt` kernel `[k, oc, ic]`, stride `s`
/// (a vocoder's upsampling stage): FLOPs = 2 · L · K · OC · IC.
fn conv_transpose_1d_line(kt: Type, l: i64, k: i64, ic: i64, oc: i64, s: i32) -> Line {
    // the result's length
    let t = (l - 1) * s as i64 + k;
    Line {
        name: format!("conv_transpose_1d {kt} K={k} s={s} {ic}->{oc} L={l}"),
        work: 2.0 * (l * k * oc * ic) as f64,
        unit: "GFLOP/s",
        build: Box::new(move |ctx| {
            let a = input(ctx, kt, &[k, oc, ic]);
            let b = input(ctx, Type::F32, &[l, ic]);
            ctx.conv_transpose_1d(&a, &b, s, 0, 1).unwrap()
        }),
        mem: ((k * oc * ic + l * ic + t * oc) * 4) as usize + (4 << 20),
    }
}

/// FLASH_ATTN_EXT with F16 K and V, `DK = DV = d`, `n_head` query heads sharing one K/V
/// head, no mask; FLOPs = 4 · d · n_q · n_kv · n_head (the two products).
fn flash_attn_line(d: i64, n_q: i64, n_kv: i64, n_head: i64) -> Line {
    let mem = ((d * n_q * n_head * 8) + 2 * d * n_kv * 2) as usize + (4 << 20);
    Line {
        name: format!("flash_attn F16 KV d={d} q={n_q} kv={n_kv} heads={n_head}/1"),
        work: 4.0 * (d * n_q * n_kv * n_head) as f64,
        unit: "GFLOP/s",
        build: Box::new(move |ctx| {
            let q = ctx.new_tensor_4d(Type::F32, d, n_q, n_head, 1).unwrap();
            let k = ctx.new_tensor_4d(Type::F16, d, n_kv, 1, 1).unwrap();
            let v = ctx.new_tensor_4d(Type::F16, d, n_kv, 1, 1).unwrap();
            for t in [&q, &k, &v] {
                fill(t);
            }
            let scale = 1.0 / (d as f32).sqrt();
            ctx.flash_attn_ext(&q, &k, &v, None, scale, 0.0, 0.0)
                .unwrap()
        }),
        mem,
    }
}

/// A line for an op of one F32 input (plus `extra` more of the same shape) and one output of
/// its shape: bytes = (inputs + 1) · 4 · elements.
fn stream_line(
    op: &'static str,
    ne0: i64,
    ne1: i64,
    inputs: usize,
    f: fn(&Context, &[Tensor]) -> Tensor,
) -> Line {
    let n = (ne0 * ne1) as usize;
    Line {
        name: format!("{op} [{ne0}, {ne1}]"),
        work: ((inputs + 1) * 4 * n) as f64,
        unit: "GB/s",
        build: Box::new(move |ctx| {
            let xs: Vec<Tensor> = (0..inputs)
                .map(|_| {
                    let x = ctx.new_tensor_2d(Type::F32, ne0, ne1).unwrap();
                    fill(&x);
                    x
                })
                .collect();
            f(ctx, &xs)
        }),
        mem: (inputs + 1) * 4 * n + (4 << 20),
    }
}

/// An input tensor of type `ty` and shape `ne`, filled with the pattern.
fn input(ctx: &Context, ty: Type, ne: &[i64]) -> Tensor {
    let x = ctx.new_tensor(ty, ne).unwrap();
    fill(&x);
    x
}

/// A `bw` line: `bytes` read and written per run (the tensors' bytes, as GGML's
/// `test-backend-ops perf` counts them, except that GET_ROWS counts the rows it reads).
fn bw_line(name: &str, bytes: usize, build: impl Fn(&Context) -> Tensor + 'static) -> Line {
    Line {
        name: format!("bw {name}"),
        work: bytes as f64,
        unit: "GB/s",
        build: Box::new(build),
        mem: bytes + (16 << 20),
    }
}

/// The bandwidth-bound ops of a Llama-style layer on [4096, 512] F32 tensors.
fn bw_lines() -> Vec<Line> {
    const NE0: i64 = 4096;
    const NE1: i64 = 512;
    const N: usize = (NE0 * NE1) as usize;
    let f32x = |ctx: &Context| input(ctx, Type::F32, &[NE0, NE1]);
    let mut v = Vec::new();
    type Bin = fn(&Context, &Tensor, &Tensor) -> ggml::Result<Tensor>;
    for (op, f) in [("add", Context::add as Bin), ("mul", Context::mul as Bin)] {
        v.push(bw_line(&format!("{op} [4096, 512]"), 12 * N, move |c| {
            f(c, &f32x(c), &f32x(c)).unwrap()
        }));
        v.push(bw_line(
            &format!("{op} [4096, 512] + row"),
            8 * N + 4 * NE0 as usize,
            move |c| f(c, &f32x(c), &input(c, Type::F32, &[NE0, 1])).unwrap(),
        ));
    }
    v.push(bw_line("scale [4096, 512]", 8 * N, move |c| {
        c.scale(&f32x(c), 0.125).unwrap()
    }));
    v.push(bw_line("silu [4096, 512]", 8 * N, move |c| {
        c.silu(&f32x(c)).unwrap()
    }));
    v.push(bw_line("gelu [4096, 512]", 8 * N, move |c| {
        c.gelu(&f32x(c)).unwrap()
    }));
    for (name, op) in [("geglu", GluOp::Geglu), ("swiglu", GluOp::Swiglu)] {
        v.push(bw_line(&format!("{name} [8192, 512]"), 12 * N, move |c| {
            let a = input(c, Type::F32, &[2 * NE0, NE1]);
            c.glu(&a, op, false).unwrap()
        }));
    }
    v.push(bw_line("soft_max [4096, 512] F16 mask", 10 * N, move |c| {
        let mask = input(c, Type::F16, &[NE0, NE1]);
        c.soft_max_ext(&f32x(c), Some(&mask), 0.125, 0.0).unwrap()
    }));
    v.push(bw_line("rms_norm [4096, 512]", 8 * N, move |c| {
        c.rms_norm(&f32x(c), 1e-6).unwrap()
    }));
    v.push(bw_line("norm [4096, 512]", 8 * N, move |c| {
        c.norm(&f32x(c), 1e-6).unwrap()
    }));
    for (name, mode) in [("normal", 0), ("neox", ggml::ROPE_TYPE_NEOX)] {
        v.push(bw_line(
            &format!("rope {name} [128, 32, 512]"),
            8 * N + 4 * 512,
            move |c| {
                let a = input(c, Type::F32, &[128, 32, 512]);
                let pos = c.new_tensor_1d(Type::I32, 512).unwrap();
                pos.set_i32(&(0..512).collect::<Vec<_>>()).unwrap();
                c.rope_ext(
                    &a, &pos, None, 128, mode, 4096, 10000.0, 1.0, 0.0, 1.0, 32.0, 1.0,
                )
                .unwrap()
            },
        ));
    }
    v.push(bw_line(
        "get_rows [4096, 1024] x 512",
        8 * N + 4 * 512,
        move |c| {
            let a = input(c, Type::F32, &[NE0, 2 * NE1]);
            let ids = c.new_tensor_1d(Type::I32, NE1).unwrap();
            ids.set_i32(&(0..NE1 as i32).map(|i| (i * 7) % 1024).collect::<Vec<_>>())
                .unwrap();
            c.get_rows(&a, &ids).unwrap()
        },
    ));
    for (name, from, to) in [
        ("F32 -> F16", Type::F32, Type::F16),
        ("F16 -> F32", Type::F16, Type::F32),
    ] {
        v.push(bw_line(
            &format!("cpy {name} [4096, 512]"),
            6 * N,
            move |c| {
                let a = input(c, from, &[NE0, NE1]);
                let b = c.new_tensor(to, &[NE0, NE1]).unwrap();
                c.cpy(&a, &b).unwrap()
            },
        ));
    }
    v
}

fn lines() -> Vec<Line> {
    let mut v = bw_lines();
    for size in [1024, 2048] {
        v.push(mul_mat_line(Type::F32, size, size, size));
        v.push(mul_mat_line(Type::BF16, size, size, size));
    }
    v.push(out_prod_line(1024, 512, 1024));
    for wt in [Type::F32, Type::F16, Type::BF16] {
        v.push(mul_mat_line(wt, 4096, 4096, 1));
        v.push(mul_mat_line(wt, 1024, 1024, 64));
    }
    // float weights against 32 columns, and the crossover between the dot products and the
    // packed GEMM (2 to 8 columns)
    for wt in [Type::F32, Type::BF16] {
        v.push(mul_mat_line(wt, 4096, 4096, 32));
    }
    for n in [2, 3, 4, 5, 8] {
        v.push(mul_mat_line(Type::F16, 4096, 4096, n));
    }
    // the shape of GGML's own `test-backend-ops perf -o MUL_MAT` matrix-vector cases
    for wt in [
        Type::F32,
        Type::F16,
        Type::BF16,
        Type::Q4_0,
        Type::Q8_0,
        Type::Q4_K,
        Type::Q6_K,
    ] {
        v.push(mul_mat_line(wt, 4096, 14336, 1));
    }
    for wt in [
        Type::F16,
        Type::Q4_0,
        Type::Q4_1,
        Type::Q5_0,
        Type::Q8_0,
        Type::Q2_K,
        Type::Q3_K,
        Type::Q4_K,
        Type::Q5_K,
        Type::Q6_K,
        Type::IQ4_NL,
        Type::IQ4_XS,
        Type::IQ3_S,
        Type::IQ3_XXS,
        Type::IQ2_XXS,
        Type::IQ2_XS,
        Type::IQ2_S,
        Type::IQ1_S,
        Type::IQ1_M,
    ] {
        v.push(mul_mat_line(wt, 4096, 4096, 1));
        v.push(mul_mat_line(wt, 4096, 4096, 32));
    }
    // the matrix-vector kernels with their weights in L2 (at most 0.6 MB): the kernels'
    // own speed, which the L3 shared with other guests moves less
    for wt in [
        Type::Q4_K,
        Type::Q6_K,
        Type::IQ4_XS,
        Type::IQ3_S,
        Type::IQ3_XXS,
        Type::IQ2_XXS,
        Type::IQ2_XS,
        Type::IQ2_S,
        Type::IQ1_S,
        Type::IQ1_M,
    ] {
        v.push(mul_mat_line(wt, 512, 4096, 1));
    }
    // the types with a repacked layout, their weights in the CPU's repack buffer type
    for wt in [Type::Q4_0, Type::Q5_0, Type::IQ4_NL] {
        for n in [1, 32] {
            v.push(mul_mat_in(
                wt,
                Some(backend::cpu_repack_buffer_type()),
                4096,
                4096,
                n,
            ));
        }
    }
    // prompt-sized batches, and Gemma 3 270M's projection shapes (K=640 has no k-quant)
    for wt in [Type::Q4_0, Type::Q8_0, Type::Q4_K, Type::Q6_K] {
        v.push(mul_mat_line(wt, 4096, 4096, 512));
    }
    for (m, k) in [(2048, 640), (640, 2048), (1024, 640), (640, 1024)] {
        for n in [32, 512] {
            v.push(mul_mat_line(Type::Q8_0, m, k, n));
        }
    }
    v.push(mul_mat_line(Type::Q8_0, 262_144, 640, 32));
    // quantized weights about the crossover from the dot kernels to AMX tiles (5 columns and
    // up, on a CPU with AMX)
    for n in [4, 8, 16] {
        v.push(mul_mat_line(Type::Q5_0, 4096, 4096, n));
    }
    // a mixture of experts' FFN projection (8 experts, 2 per token): generation and a batch
    for wt in [Type::F32, Type::Q8_0, Type::Q4_K] {
        for tokens in [1, 32] {
            v.push(mul_mat_id_line(wt, (2048, 1024, 8), 2, tokens));
        }
    }
    // float experts against a batch: 64 tokens, 8 experts of 1024 x 1024, 2 per token
    for wt in [Type::F32, Type::F16] {
        v.push(mul_mat_id_line(wt, (1024, 1024, 8), 2, 64));
    }
    // Qwen3-30B-A3B's experts (GGML's `test-backend-ops perf` case: 128 experts of
    // 2048 x 768, 8 per token) in a 256-token batch: 16 pairs per expert
    v.push(mul_mat_id_line(Type::F16, (2048, 768, 128), 8, 256));
    // convolutions: a middle layer of a ConvNet (3x3, 64 -> 64 channels, 56x56 out; GGML's
    // perf case 58/3/32->64), a 1x1 one, a deep layer of several images, and a vocoder's
    // transposed convolution
    for kt in [Type::F32, Type::F16] {
        v.push(conv_2d_line(kt, 58, 3, 64, 64, 1));
    }
    v.push(conv_2d_line(Type::F32, 58, 3, 32, 64, 1));
    v.push(conv_2d_line(Type::F32, 56, 1, 64, 64, 1));
    v.push(conv_2d_line(Type::F32, 16, 3, 128, 512, 8));
    for kt in [Type::F32, Type::F16] {
        v.push(conv_transpose_1d_line(kt, 128, 16, 512, 256, 8));
    }
    for (n_q, n_kv) in [(256, 256), (1, 256), (1, 1024)] {
        v.push(flash_attn_line(256, n_q, n_kv, 4));
    }
    for (ne0, ne1) in [(4096, 256), (4096, 4096)] {
        v.push(stream_line("add", ne0, ne1, 2, |c, x| {
            c.add(&x[0], &x[1]).unwrap()
        }));
    }
    for (ne0, ne1) in [(4096, 256), (4096, 2048)] {
        v.push(stream_line("rms_norm", ne0, ne1, 1, |c, x| {
            c.rms_norm(&x[0], 1e-6).unwrap()
        }));
    }
    for (ne0, ne1) in [(512, 2048), (4096, 1024)] {
        v.push(stream_line("soft_max", ne0, ne1, 1, |c, x| {
            c.soft_max(&x[0]).unwrap()
        }));
    }
    v
}

/// One STREAM-like kernel over arrays of [`STREAM_N`] f32 (8 MiB, as the `bw` cases' [4096,
/// 512]): `a = s·b` ("scale", 8 bytes per element moved, the shape of the unary `bw` lines)
/// or `a = b + s·c` ("triad", 12 bytes, the binary ones); plain loops with ordinary stores, as
/// the kernels do.
#[derive(Clone, Copy)]
enum Stream {
    Scale,
    Triad,
}

const STREAM_N: usize = 4096 * 512;

/// `reps` runs of `kind` on `nt` threads, each taking a contiguous part of every array, with
/// a barrier before and after each run; the seconds of each run (barrier to barrier).
fn stream_runs(
    kind: Stream,
    nt: usize,
    reps: usize,
    a: &mut [f32],
    b: &[f32],
    c: &[f32],
) -> Vec<f64> {
    let per = a.len().div_ceil(nt);
    let barrier = std::sync::Barrier::new(nt);
    let times = std::sync::Mutex::new(Vec::with_capacity(reps));
    std::thread::scope(|s| {
        for (t, a) in a.chunks_mut(per).enumerate() {
            let (b, c) = (&b[t * per..][..a.len()], &c[t * per..][..a.len()]);
            let (barrier, times) = (&barrier, &times);
            s.spawn(move || {
                for _ in 0..reps {
                    barrier.wait();
                    let t0 = std::time::Instant::now();
                    match kind {
                        Stream::Scale => a.iter_mut().zip(b).for_each(|(a, &b)| *a = 0.5 * b),
                        Stream::Triad => {
                            for ((a, &b), &c) in a.iter_mut().zip(b).zip(c) {
                                *a = b + 0.5 * c;
                            }
                        }
                    }
                    barrier.wait();
                    if t == 0 {
                        times.lock().unwrap().push(t0.elapsed().as_secs_f64());
                    }
                }
            });
        }
    });
    times.into_inner().unwrap()
}

/// Prints the STREAM-like lines (`stream scale`, `stream triad`) at 1 and 2 threads: what the
/// cores can stream here, the yardstick for the `bw` lines. Timed as the other lines: a
/// warm-up, then runs for at least [`TARGET`]; median and best.
fn stream_lines(filters: &[String]) {
    let b: Vec<f32> = (0..STREAM_N).map(|i| (i % 2003) as f32).collect();
    let (c, mut a) = (b.clone(), vec![0f32; STREAM_N]);
    for (name, kind, bytes) in [("scale", Stream::Scale, 8), ("triad", Stream::Triad, 12)] {
        let name = format!("stream {name} [4096, 512]");
        if !filters.is_empty() && !filters.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        for nt in [1, 2] {
            let (_, once) = common::median_best(stream_runs(kind, nt, 3, &mut a, &b, &c));
            let reps = common::reps_for(once, TARGET);
            let (med, best) = common::median_best(stream_runs(kind, nt, reps, &mut a, &b, &c));
            let work = (bytes * STREAM_N) as f64;
            println!(
                "{name:<44} {nt:>8} {:>9.3} ms {:>8.2} GB/s {:>8.2} GB/s",
                med * 1e3,
                work / med / 1e9,
                work / best / 1e9
            );
        }
    }
}

fn main() {
    // every argument that is not a flag is a filter; a line runs if it contains any of them
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let backends: Vec<(usize, Backend)> = [1usize, 2]
        .into_iter()
        .map(|n| {
            let b = backend::cpu_init().unwrap();
            b.set_n_threads(n).unwrap();
            (n, b)
        })
        .collect();
    println!(
        "{:<44} {:>8} {:>12} {:>12} {:>12}",
        "op", "threads", "median", "rate", "best rate"
    );
    stream_lines(&filters);
    for line in lines() {
        if !filters.is_empty() && !filters.iter().any(|f| line.name.contains(f.as_str())) {
            continue;
        }
        let ctx = Context::init(line.mem, false).unwrap();
        let out = (line.build)(&ctx);
        let graph = ctx.build_forward_expand(&out).unwrap();
        for (n, be) in &backends {
            let (s, best) = common::time(be, &graph, TARGET);
            println!(
                "{:<44} {:>8} {:>9.3} ms {:>8.2} {} {:>8.2} {}",
                line.name,
                n,
                s * 1e3,
                line.work / s / 1e9,
                line.unit,
                line.work / best / 1e9,
                line.unit
            );
        }
    }
}
