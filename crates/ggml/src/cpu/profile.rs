//! A per-op time profile of the CPU engine, on when `GGML_CPU_PROFILE=1` is set (read once per
//! process; off, the engine does not read a clock and this module costs one branch per graph).
//!
//! Thread 0 of a run reads the clock after each node's closing barrier, so a node's time is
//! the wall time from the previous node's end to its own, its threads' imbalance and the
//! barrier included (what the node costs the graph). The times are summed per CPU stream by
//! op (with its sub-op: `UNARY(GELU)`, `GLU(GEGLU)`; a fused pair as `RMS_NORM+MUL`) and by
//! (op, type of the first operand, shapes of the first two operands), and printed to stderr as
//! two tables when the stream is dropped, with each line's time per graph run (per token in
//! token generation, where one graph runs per token).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

use crate::ops::{GluOp, Op, UnaryOp};
use crate::tensor::Tensor;

/// Whether `GGML_CPU_PROFILE` asks for the profile (`1`, or any value but `0` and empty).
pub(crate) fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| {
        std::env::var("GGML_CPU_PROFILE").is_ok_and(|v| !v.is_empty() && v.trim() != "0")
    })
}

/// Count and total time of a line of the profile.
#[derive(Default, Clone, Copy)]
struct Sum {
    nodes: u64,
    ns: u64,
}

/// One CPU stream's profile.
#[derive(Default)]
pub(crate) struct Profile {
    /// Graph runs recorded.
    runs: u64,
    /// The runs' total wall time.
    run_ns: u64,
    by_op: HashMap<String, Sum>,
    by_shape: HashMap<String, Sum>,
    /// Node end times of the current run, in ns from its start (thread 0 writes them).
    ends: Vec<AtomicU64>,
}

/// The node's op as GGML's `ggml_op_desc` names it, `+MUL` after a fused RMS_NORM.
fn op_name(t: &Tensor, fused: bool) -> String {
    let p = t.op_params()[0];
    let sub = match t.op() {
        Op::Unary => UnaryOp::from_i32(p).map(UnaryOp::name),
        Op::Glu => GluOp::from_i32(p).map(GluOp::name),
        _ => None,
    };
    let base = match sub {
        Some(s) => format!("{}({s})", t.op().name()),
        None => t.op().name().to_string(),
    };
    if fused {
        format!("RMS_NORM+{base}")
    } else {
        base
    }
}

/// `[ne0, ne1, ne2, ne3]` without trailing ones.
fn shape(t: &Tensor) -> String {
    let ne = t.ne();
    let n = ne.iter().rposition(|&d| d != 1).map_or(1, |i| i + 1);
    let dims: Vec<String> = ne[..n].iter().map(i64::to_string).collect();
    format!("[{}]", dims.join(","))
}

impl Profile {
    /// Storage for the node end times of a run of `n_nodes` nodes; returns the clock's origin.
    pub(crate) fn start(&mut self, n_nodes: usize) -> Instant {
        self.ends.clear();
        self.ends.resize_with(n_nodes, AtomicU64::default);
        Instant::now()
    }

    /// Records that node `k` ended `ns` after the run's start.
    pub(crate) fn end(&self, k: usize, ns: u64) {
        if let Some(e) = self.ends.get(k) {
            e.store(ns, Ordering::Relaxed);
        }
    }

    /// Adds a finished run: `nodes[k]` is node k's tensor and whether an RMS_NORM was fused
    /// into it; `total_ns` the run's wall time.
    pub(crate) fn record<'a>(
        &mut self,
        nodes: impl Iterator<Item = (&'a Tensor, bool)>,
        total_ns: u64,
    ) {
        self.runs += 1;
        self.run_ns += total_ns;
        let mut prev = 0;
        for ((t, fused), end) in nodes.zip(&self.ends) {
            let end = end.load(Ordering::Relaxed);
            let ns = end.saturating_sub(prev);
            prev = end;
            let op = op_name(t, fused);
            let mut key = op.clone();
            for s in t.srcs().take(2) {
                let _ = write!(key, " {}{}", s.ty().name(), shape(s));
            }
            let _ = write!(key, " -> {}", shape(t));
            for (map, key) in [(&mut self.by_op, op), (&mut self.by_shape, key)] {
                let e = map.entry(key).or_default();
                e.nodes += 1;
                e.ns += ns;
            }
        }
    }

    /// The two tables, slowest lines first (`top` lines of the shape table).
    pub(crate) fn report(&self, n_threads: usize, top: usize) -> String {
        let runs = self.runs.max(1) as f64;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "GGML_CPU_PROFILE: {} graph runs on {n_threads} threads, {:.3} ms per run",
            self.runs,
            self.run_ns as f64 / 1e6 / runs
        );
        for (title, map, limit) in [
            ("op", &self.by_op, usize::MAX),
            (
                "op, first operand's type and shapes -> result",
                &self.by_shape,
                top,
            ),
        ] {
            let mut lines: Vec<(&String, &Sum)> = map.iter().collect();
            lines.sort_by(|a, b| b.1.ns.cmp(&a.1.ns).then(a.0.cmp(b.0)));
            let _ = writeln!(
                out,
                "  {:>9} {:>6} {:>9}  {title}",
                "ms/run", "%", "nodes/run"
            );
            for (key, s) in lines.into_iter().take(limit) {
                let _ = writeln!(
                    out,
                    "  {:>9.3} {:>6.2} {:>9.1}  {key}",
                    s.ns as f64 / 1e6 / runs,
                    100.0 * s.ns as f64 / self.run_ns.max(1) as f64,
                    s.nodes as f64 / runs
                );
            }
        }
        out
    }

    /// Whether a run was recorded.
    pub(crate) fn is_empty(&self) -> bool {
        self.runs == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Context, Type};

    /// Two runs of a two-node graph: the per-op and per-shape lines get the nodes' time
    /// differences, averaged per run, and the percentages of the runs' wall time.
    #[test]
    fn runs_are_summed_by_op_and_by_shape() {
        let ctx = Context::init(1 << 16, false).unwrap();
        let a = ctx.new_tensor_2d(Type::F32, 4, 3).unwrap();
        let g = ctx.gelu(&a).unwrap();
        let s = ctx.scale(&g, 2.0).unwrap();
        let mut p = Profile::default();
        for _ in 0..2 {
            p.start(2);
            p.end(0, 1_000_000);
            p.end(1, 4_000_000);
            p.record([(&g, false), (&s, true)].into_iter(), 5_000_000);
        }
        let r = p.report(2, 10);
        assert!(
            r.contains("2 graph runs on 2 threads, 5.000 ms per run"),
            "{r}"
        );
        assert!(
            r.contains("3.000  60.00       1.0  RMS_NORM+SCALE\n"),
            "{r}"
        );
        assert!(r.contains("1.000  20.00       1.0  UNARY(GELU)\n"), "{r}");
        assert!(r.contains("UNARY(GELU) f32[4,3] -> [4,3]"), "{r}");
        assert!(!p.is_empty());
    }
}
