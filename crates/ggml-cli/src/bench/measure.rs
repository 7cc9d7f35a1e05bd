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
    let compute = || {
        backend
            .graph_compute(&graph)
            .map_err(|e| format!("graph_compute: {e}"))
    };
    compute()?; // warm-up

    let flops = case.op_flops();
    let size = case.op_size(&out);
    let per_op_target = targets
        .flops
        .checked_div(flops)
        .unwrap_or(targets.bytes / size.max(1) as u64);
    let free = graph.size().saturating_sub(graph.n_nodes()) as u64;
    let n_runs = 1 + free.min(per_op_target);
    for _ in 1..n_runs {
        graph.add_node(&out).map_err(|e| e.to_string())?;
    }
    // Bytes of one graph: the op's runs plus any other computing node (none of the cases has
    // one today but a view).
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
    Ok(Outcome::Measured(Measurement {
        runs: total_runs,
        us_per_run: elapsed.as_secs_f64() * 1e6 / total_runs as f64,
        rate,
    }))
}
