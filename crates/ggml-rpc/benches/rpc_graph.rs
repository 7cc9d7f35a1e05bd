//! Our client computing a model-sized graph — a stack of layers of RMS norm and two Q4_K
//! matrix products with SiLU between them, added back to the residual — on the local CPU
//! backend, through our server and through llama.cpp's `ggml-rpc-server`, all on loopback.
//! It prints tokens per second for a batch of 32 columns (like prompt processing) and of one
//! (like generation), the time the weights took to upload, and the largest difference from
//! the local result.
//!
//! `cargo bench -p ggml-rpc --bench rpc_graph`; environment: `RPC_BENCH_LAYERS` (default 8),
//! `RPC_BENCH_THREADS` (compute threads of every target, default 2), `RPC_BENCH_SECS` (time
//! per measurement, default 3), `GGML_RPC_SERVER` (path of llama.cpp's server; skipped when
//! it is not built).

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use ggml::{backend, Backend, Context, DeviceType, Graph, Tensor, Type};

const HIDDEN: i64 = 1024;
const FFN: i64 = 4096;

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The graph over `cols` columns of as many layers as there are weights for.
struct Model {
    ctx: Context,
    x: Tensor,
    out: Tensor,
    graph: Graph,
    cols: usize,
    /// Every weight, in the order of [`weights`].
    weights: Vec<Tensor>,
}

fn q4_k(rows: i64, cols: i64, seed: u32) -> Vec<u8> {
    let src = common::input((rows * cols) as usize, seed);
    let row = Type::Q4_K.row_size(cols).unwrap();
    let mut dst = vec![0u8; row * rows as usize];
    let n = ggml::quantize_chunk(
        Type::Q4_K,
        &src,
        &mut dst,
        0,
        rows as usize,
        cols as usize,
        None,
    )
    .unwrap();
    assert_eq!(n, dst.len());
    dst
}

/// The bytes of every layer's weights: its RMS gain, up and down matrices.
fn weights(layers: usize) -> Vec<[Vec<u8>; 3]> {
    (0..layers as u32)
        .map(|l| {
            let gain = common::input(HIDDEN as usize, 100 + l)
                .iter()
                .flat_map(|v| (1.0 + 0.1 * v).to_le_bytes())
                .collect();
            [gain, q4_k(FFN, HIDDEN, 200 + l), q4_k(HIDDEN, FFN, 300 + l)]
        })
        .collect()
}

fn model(layers: usize, cols: usize) -> Model {
    let ctx = Context::init(1 << 22, true).unwrap();
    let x = ctx.new_tensor_2d(Type::F32, HIDDEN, cols as i64).unwrap();
    let mut weights = Vec::new();
    let mut h = x.clone();
    for _ in 0..layers {
        let gain = ctx.new_tensor_1d(Type::F32, HIDDEN).unwrap();
        let up = ctx.new_tensor_2d(Type::Q4_K, HIDDEN, FFN).unwrap();
        let down = ctx.new_tensor_2d(Type::Q4_K, FFN, HIDDEN).unwrap();
        weights.extend([gain.clone(), up.clone(), down.clone()]);
        let n = ctx.mul(&ctx.rms_norm(&h, 1e-6).unwrap(), &gain).unwrap();
        let u = ctx.silu(&ctx.mul_mat(&up, &n).unwrap()).unwrap();
        let d = ctx.mul_mat(&down, &u).unwrap();
        h = ctx.add(&h, &ctx.scale(&d, 0.02).unwrap()).unwrap();
    }
    let out = ctx.rms_norm(&h, 1e-6).unwrap();
    let graph = ctx.build_forward_expand(&out).unwrap();
    Model {
        ctx,
        x,
        out,
        graph,
        cols,
        weights,
    }
}

/// One target's figures: tokens/s per model, the upload time, the output.
struct Figures {
    tokens_per_s: Vec<f64>,
    upload: Duration,
    out: Vec<Vec<f32>>,
}

/// Builds the two graphs (32 columns, then 1) on `stream`, uploads `bytes` and times them.
fn measure(stream: &Backend, bytes: &[[Vec<u8>; 3]], secs: f64) -> Figures {
    let mut f = Figures {
        tokens_per_s: Vec::new(),
        upload: Duration::ZERO,
        out: Vec::new(),
    };
    for cols in [32, 1] {
        let m = model(bytes.len(), cols);
        let _buf = backend::alloc_ctx_tensors(&m.ctx, stream).unwrap();
        let t0 = Instant::now();
        for (t, b) in m.weights.iter().zip(bytes.iter().flatten()) {
            t.set_bytes(b, 0).unwrap();
        }
        f.upload += t0.elapsed();
        let input = common::input(HIDDEN as usize * m.cols, 1);
        let step = || {
            m.x.set_f32(&input).unwrap();
            stream.graph_compute(&m.graph).unwrap();
            m.out.get_f32().unwrap()
        };
        f.out.push(step());
        step();
        let t0 = Instant::now();
        let mut iters = 0;
        while t0.elapsed().as_secs_f64() < secs {
            step();
            iters += 1;
        }
        f.tokens_per_s
            .push((iters * m.cols) as f64 / t0.elapsed().as_secs_f64());
    }
    f
}

fn max_diff(a: &[Vec<f32>], b: &[Vec<f32>]) -> f32 {
    a.iter()
        .flatten()
        .zip(b.iter().flatten())
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

fn main() {
    let layers = env_or("RPC_BENCH_LAYERS", 8);
    let threads = env_or("RPC_BENCH_THREADS", 2);
    let secs = env_or("RPC_BENCH_SECS", 3) as f64;
    let bytes = weights(layers);
    let weight_bytes: usize = bytes.iter().flatten().map(Vec::len).sum();
    println!(
        "graph: {layers} layers of rms_norm, mul, Q4_K mul_mat {HIDDEN}x{FFN}, silu, Q4_K \
         mul_mat {FFN}x{HIDDEN}, add; {:.1} MiB of weights; {threads} threads per target",
        weight_bytes as f64 / (1 << 20) as f64
    );
    println!(
        "{:<36} {:>12} {:>12} {:>12} {:>14}",
        "target", "pp32 tok/s", "tg1 tok/s", "upload s", "max |diff|"
    );
    let cpu = backend::dev_by_type(DeviceType::Cpu).unwrap();
    let local_stream = cpu.init(None).unwrap();
    local_stream.set_n_threads(threads).unwrap();
    let local = measure(&local_stream, &bytes, secs);
    let row = |name: &str, f: &Figures| {
        println!(
            "{name:<36} {:>12.1} {:>12.1} {:>12.3} {:>14.3e}",
            f.tokens_per_s[0],
            f.tokens_per_s[1],
            f.upload.as_secs_f64(),
            max_diff(&f.out, &local.out)
        );
    };
    row("local CPU", &local);

    let server = ggml_rpc::Server::start("127.0.0.1:0", None, threads, &[cpu]).unwrap();
    let reg = ggml_rpc::add_server(&server.endpoint()).unwrap();
    let ours = measure(&reg.dev_get(0).unwrap().init(None).unwrap(), &bytes, secs);
    row("RPC to ggml rpc-server (ours)", &ours);
    drop(reg);
    server.stop();

    match common::start_ggml_server(threads) {
        Some((_child, ep)) => {
            let reg = ggml_rpc::add_server(&ep).unwrap();
            let theirs = measure(&reg.dev_get(0).unwrap().init(None).unwrap(), &bytes, secs);
            row("RPC to llama.cpp ggml-rpc-server", &theirs);
        }
        None => println!("RPC to llama.cpp ggml-rpc-server: SKIPPED (not built)"),
    }
}
