//! The meta device's speed-up: a large matrix product (weight split by rows) and a two-layer
//! MLP (first layer by rows, second by columns, with an all-reduce) on a meta device of two
//! CPU members of one thread each, against one CPU stream of one thread. Prints the time of
//! each and the ratio (close to 2 on a machine with two free cores). Run with
//! `cargo bench -p ggml --bench meta`.

mod common;

use std::time::Duration;

use ggml::backend::{self, SplitState, TensorInfo};
use ggml::{Backend, Context, DeviceType, Tensor, Type};

/// Minimum measuring time per line and backend.
const TARGET: Duration = Duration::from_millis(1500);

fn fill(t: &Tensor) {
    let n = t.nelements() as usize;
    let v: Vec<f32> = (0..n)
        .map(|i| ((i * 7919 % 2003) as f32 / 1001.5) - 1.0)
        .collect();
    t.set_f32(&v).unwrap();
}

/// Builds a graph on `be`, fills its leaves, and times it. Returns (seconds per run, GFLOP/s,
/// cores kept busy while timing: CPU seconds per wall second).
fn measure(be: &Backend, build: fn(&Context) -> (Tensor, f64)) -> (f64, f64, f64) {
    let ctx = Context::init(1 << 20, true).unwrap();
    let (out, flops) = build(&ctx);
    let g = ctx.build_forward_expand(&out).unwrap();
    let _buf = backend::alloc_ctx_tensors(&ctx, be).unwrap();
    for t in ctx.tensors() {
        if t.op() == ggml::Op::None {
            fill(&t);
        }
    }
    let (cpu0, t0) = (cpu_seconds(), std::time::Instant::now());
    let (s, _best) = common::time(be, &g, TARGET);
    let busy = cpu_seconds()
        .zip(cpu0)
        .map(|(c1, c0)| (c1 - c0) / t0.elapsed().as_secs_f64());
    (s, flops / s / 1e9, busy.unwrap_or(f64::NAN))
}

fn new(ctx: &Context, name: &str, ne: &[i64]) -> Tensor {
    let t = ctx.new_tensor(Type::F32, ne).unwrap();
    t.set_name(name);
    t
}

/// y = W x, W [4096, 2048], x [4096, 32].
fn matmul(ctx: &Context) -> (Tensor, f64) {
    let (k, n, t) = (4096, 2048, 32);
    let w = new(ctx, "w1", &[k, n]);
    let x = new(ctx, "x", &[k, t]);
    (ctx.mul_mat(&w, &x).unwrap(), 2.0 * (k * n * t) as f64)
}

/// y = W2 gelu(W1 x + b1) + b2, d = 1024, hidden 4096, 32 tokens.
fn mlp(ctx: &Context) -> (Tensor, f64) {
    let (d, f, t) = (1024, 4096, 32);
    let (w1, b1) = (new(ctx, "w1", &[d, f]), new(ctx, "b1", &[f]));
    let (w2, b2) = (new(ctx, "w2", &[f, d]), new(ctx, "b2", &[d]));
    let x = new(ctx, "x", &[d, t]);
    let h = ctx
        .gelu(&ctx.add(&ctx.mul_mat(&w1, &x).unwrap(), &b1).unwrap())
        .unwrap();
    let y = ctx.add(&ctx.mul_mat(&w2, &h).unwrap(), &b2).unwrap();
    (y, 4.0 * (d * f * t) as f64)
}

fn split(info: &TensorInfo, _n: usize) -> SplitState {
    match info.name.as_str() {
        "w1" => SplitState::axis(1),
        "b1" => SplitState::axis(0),
        "w2" => SplitState::axis(0),
        _ => SplitState::mirrored(),
    }
}

fn main() {
    let cpu = backend::dev_by_type(DeviceType::Cpu).expect("the CPU device");
    println!("CPU: {}", cpu.description());
    let one = cpu.init(None).unwrap();
    one.set_n_threads(1).unwrap();
    let meta = backend::meta_device(&[cpu.clone(), cpu], split).unwrap();
    let two = meta.init(None).unwrap();
    two.set_n_threads(1).unwrap();
    type Build = fn(&Context) -> (Tensor, f64);
    let lines: [(&str, Build); 2] = [
        ("matmul 4096x2048 x 32", matmul),
        ("mlp 1024-4096-1024 x 32", mlp),
    ];
    for (name, build) in lines {
        let (s1, g1, c1) = measure(&one, build);
        let (s2, g2, c2) = measure(&two, build);
        println!(
            "{name:<24} 1 CPU: {:8.3} ms {g1:6.1} GFLOP/s ({c1:.2} cores busy)   \
             Meta(CPU,CPU): {:8.3} ms {g2:6.1} GFLOP/s ({c2:.2} cores busy)   speed-up {:.2}x",
            s1 * 1e3,
            s2 * 1e3,
            s1 / s2
        );
    }
}

/// Seconds of CPU this process has used so far (user and system, from `/proc/self/stat` at
/// Linux's 100 ticks per second); `None` where that file is missing.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may hold spaces) in parentheses.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}
