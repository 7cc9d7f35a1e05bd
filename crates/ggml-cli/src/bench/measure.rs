//! Timing one case as `test-backend-ops perf` does: build the op in a `no_alloc` context,
//! allocate it on the backend, fill the inputs, compute once to warm up, then put the op node
//! into the graph `n_runs` times (`n_runs = 1 + min(free graph slots, target / cost)`) and time
//! whole-graph computations until the minimum time has passed.

use std::time::{Duration, Instant};

use ggml::{backend, graph_overhead_custom, tensor_overhead, Backend, Context, Device, Op};

use super::cases::Case;
use super::fill;
use super::report::{Measurement, Rate};

/// Nodes in a benchmark graph, as in GGML.
const GRAPH_NODES: usize = 8192;

/// Tensor slots a case's context has room for (a case makes at most four).
const CASE_TENSORS: usize = 16;

/// How much work each case is given.
#[derive(Clone, Copy, Debug)]
pub struct Targets {
    /// FLOPs per graph for ops with a FLOP count.
    pub flops: u64,
    /// Bytes moved per graph for the other ops.
    pub bytes: u64,
    /// Graphs are computed until this much time has been measured.
    pub min_time: Duration,
}

impl Targets {
    /// GGML's targets: 8 GFLOP or 8 GiB per graph on a CPU, 100 GFLOP or 32 GiB elsewhere, at
    /// least one second per case; `quick` asks for a few milliseconds per case instead.
    pub fn new(is_cpu: bool, quick: bool) -> Targets {
        const GIB: u64 = 1 << 30;
        match (quick, is_cpu) {
            (true, _) => Targets {
                flops: 4_000_000,
                bytes: 2 << 20,
                min_time: Duration::from_millis(5),
            },
            (false, true) => Targets {
                flops: 8_000_000_000,
                bytes: 8 * GIB,
                min_time: Duration::from_secs(1),
            },
            (false, false) => Targets {
                flops: 100_000_000_000,
                bytes: 32 * GIB,
                min_time: Duration::from_secs(1),
            },
        }
    }
}

/// What became of one case.
#[derive(Debug)]
pub enum Outcome {
    /// The device does not support the op with these types.
    NotSupported,
    /// It ran.
    Measured(Measurement),
}

/// Whether an op only reinterprets its source (`ggml_is_view_op`).
fn is_view_op(op: Op) -> bool {
    matches!(op, Op::View | Op::Reshape | Op::Permute | Op::Transpose)
}

/// Bytes of a node and its operands (the default `op_size`).
fn node_size(t: &ggml::Tensor) -> usize {
    t.nbytes() + t.srcs().map(ggml::Tensor::nbytes).sum::<usize>()
}

/// Runs `case` on `backend` (a stream of `dev`); `Err` with a message when it could not run.
pub fn run_case(
    case: &Case,
    dev: &Device,
    backend: &Backend,
    targets: Targets,
) -> Result<Outcome, String> {
    let ctx = Context::init(
        CASE_TENSORS * tensor_overhead() + graph_overhead_custom(GRAPH_NODES, false),
        true,
    )
    .map_err(|e| e.to_string())?;
    let out = case
        .build(&ctx)
        .map_err(|e| format!("building the graph: {e}"))?;
    if !dev.supports_op(&out) {
        return Ok(Outcome::NotSupported);
    }
    let _buffer = backend::alloc_ctx_tensors(&ctx, backend)
        .map_err(|e| format!("failed to allocate tensors: {e}"))?;
    fill::fill_inputs(&ctx, case.input_range(), case.index_bound())?;

    let graph = ctx
        .new_graph_custom(GRAPH_NODES, false)
        .map_err(|e| e.to_string())?;
    graph
        .build_forward_expand(&out)
        .map_err(|e| e.to_string())?;
    let cost = Cost {
        flops: case.op_flops(),
        bytes: case.op_size(&out),
    };
    time_graph(&graph, &out, cost, backend, targets).map(Outcome::Measured)
}

/// Runs a case of the conformance suite on `target`, its inputs from base seed `seed`: the
/// suite's graph with its (first) output node repeated; FLOPs for the ops [`suite_flops`]
/// counts, else bytes (the node's and its operands').
pub fn run_suite_case(
    case: &ggml_conformance::Case,
    target: &ggml_conformance::Target,
    seed: u64,
    targets: Targets,
) -> Result<Outcome, String> {
    let prepared = match target.prepare(case, seed) {
        Ok(p) => p,
        Err(r) if r.status == ggml_conformance::Status::NotSupported => {
            return Ok(Outcome::NotSupported)
        }
        Err(r) => return Err(r.message),
    };
    let out = prepared.outputs()[0].clone();
    let cost = Cost {
        flops: suite_flops(&out),
        bytes: node_size(&out),
    };
    time_graph(prepared.graph(), &out, cost, &target.backend, targets).map(Outcome::Measured)
}

/// What one run of the timed node costs.
#[derive(Clone, Copy, Debug)]
struct Cost {
    /// FLOPs (0: the op is reported by bandwidth).
    flops: u64,
    /// Bytes (`op_size`).
    bytes: usize,
}

/// FLOPs of the matrix-product-like ops, as `test-backend-ops` counts them (a multiply and an
/// add per weight and output): MUL_MAT and MUL_MAT_ID (`2·K` per result element), OUT_PROD,
/// the direct convolutions, the transposed ones and FLASH_ATTN_EXT; 0 for the others.
pub fn suite_flops(t: &ggml::Tensor) -> u64 {
    let ne = |i: usize| t.src(i).map_or([0; ggml::MAX_DIMS], |s| s.ne());
    let prod = |v: &[i64]| v.iter().map(|&x| x.max(0) as u64).product::<u64>();
    let n = t.nelements() as u64;
    let (a, b) = (ne(0), ne(1));
    match t.op() {
        Op::MulMat | Op::MulMatId => 2 * a[0].max(0) as u64 * n,
        Op::OutProd => 2 * a[1].max(0) as u64 * n,
        Op::Conv2d => 2 * prod(&a[..3]) * n,
        Op::Conv2dDw => 2 * prod(&a[..2]) * n,
        // Kernel [KW, KH, KD, OC·C]: KW·KH·KD·C taps per result element (OC in slot 11).
        Op::Conv3d => 2 * prod(&a[..4]) / (t.op_params()[11].max(1) as u64) * n,
        // Every input element meets every kernel weight of its channel.
        Op::ConvTranspose1d => 2 * prod(&b[..2]) * prod(&a[..2]),
        Op::ConvTranspose2d => 2 * prod(&b[..4]) * prod(&a[..3]),
        Op::FlashAttnExt => {
            let (q, v) = (a, ne(2));
            2 * prod(&q[1..4]) * b[1].max(0) as u64 * (q[0] + v[0]).max(0) as u64
        }
        _ => 0,
    }
}

/// Times whole-graph computations of `graph` with `out` added as often as the targets ask
/// (`1 + min(free graph slots, target / cost)` runs of it per graph).
fn time_graph(
    graph: &ggml::Graph,
    out: &ggml::Tensor,
    cost: Cost,
    backend: &Backend,
    targets: Targets,
) -> Result<Measurement, String> {
    let compute = || {
        backend
            .graph_compute(graph)
            .map_err(|e| format!("graph_compute: {e}"))
    };
    compute()?; // warm-up

    let Cost { flops, bytes: size } = cost;
    let per_op_target = targets
        .flops
        .checked_div(flops)
        .unwrap_or(targets.bytes / size.max(1) as u64);
    let free = graph.size().saturating_sub(graph.n_nodes()) as u64;
    let n_runs = 1 + free.min(per_op_target);
    for _ in 1..n_runs {
        graph.add_node(out).map_err(|e| e.to_string())?;
    }
    // Bytes of one graph: the op's runs plus every other computing node (a suite case's graph
    // may have several: the im2col before a convolution's product).
    let others: usize = graph
        .nodes()
        .iter()
        .filter(|n| !is_view_op(n.op()) && n.id() != out.id())
        .map(node_size)
        .sum();
    let graph_bytes = n_runs as f64 * size as f64 + others as f64;

    let (mut elapsed, mut total_runs, mut total_bytes) = (Duration::ZERO, 0u64, 0f64);
    loop {
        let start = Instant::now();
        compute()?;
        elapsed += start.elapsed();
        total_runs += n_runs;
        total_bytes += graph_bytes;
        if elapsed >= targets.min_time {
            break;
        }
    }
    let seconds = elapsed.as_secs_f64().max(1e-9);
    let rate = if flops > 0 {
        Rate::Flops {
            per_run: flops,
            per_second: flops as f64 * total_runs as f64 / seconds,
        }
    } else {
        Rate::Bandwidth {
            bytes_per_run: size,
            gib_per_second: total_bytes / seconds / (1u64 << 30) as f64,
        }
    };
    Ok(Measurement {
        runs: total_runs,
        us_per_run: elapsed.as_secs_f64() * 1e6 / total_runs as f64,
        rate,
    })
}
