//! Node fusion at plan time, as GGML's CPU backend fuses (`ggml_cpu_try_fuse_ops`, which in
//! this version fuses one pattern): RMS_NORM immediately followed by a MUL of its result, both
//! F32, becomes one pass that never writes the normalised rows (the RMS_NORM node is skipped;
//! the MUL node runs [`kernels::rms_norm_mul`], bit for bit what the two nodes compute).
//!
//! The conditions are GGML's `ggml_can_fuse`: the RMS_NORM node is used once in the graph, by
//! the MUL that follows it, is not a view and not flagged as an output, both nodes compute,
//! and they have the same shape; and its `ggml_cpu_try_fuse_ops` type checks: F32 operand and
//! result, an F32 multiplier of packed rows as long as the normalised ones.
//! `GGML_CPU_DISABLE_FUSION=1` turns fusion off, as in GGML. The pass allocates nothing.

use std::sync::OnceLock;

use super::kernels::{self, NodePtrs, Planned, TensorPtr};
use crate::backend::PlacedGraph;
use crate::error::Result;
use crate::ops::Op;
use crate::tensor::{flags, Tensor, MAX_SRC};
use crate::types::Type;

/// What the pass decided for one node.
pub(crate) enum Fusion {
    /// Computed on its own.
    Alone,
    /// Computed by the node after it: not planned.
    Absorbed,
    /// Computes the node at `first` too, with `planned`.
    With { first: usize, planned: Planned },
}

/// Whether fusion is on (not turned off by `GGML_CPU_DISABLE_FUSION=1`); read once.
fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| {
        std::env::var("GGML_CPU_DISABLE_FUSION")
            .ok()
            .and_then(|v| v.trim().parse::<i32>().ok())
            != Some(1)
    })
}

/// The decision for node `index` of `graph`.
pub(crate) fn fusion(graph: &[Tensor], index: usize) -> Fusion {
    if !enabled() {
        return Fusion::Alone;
    }
    if rms_norm_mul(graph, index) {
        return Fusion::Absorbed;
    }
    match index.checked_sub(1) {
        Some(first) if rms_norm_mul(graph, first) => Fusion::With {
            first,
            planned: Planned::new(kernels::rms_norm_mul, graph[index].ne()[0] as usize * 4),
        },
        _ => Fusion::Alone,
    }
}

/// Whether node `i` is an RMS_NORM that the MUL at `i + 1` can compute with it.
fn rms_norm_mul(graph: &[Tensor], i: usize) -> bool {
    let (Some(norm), Some(mul)) = (graph.get(i), graph.get(i + 1)) else {
        return false;
    };
    let computes = |t: &Tensor| t.flags() & flags::COMPUTE != 0;
    if norm.op() != Op::RmsNorm || mul.op() != Op::Mul || !computes(norm) || !computes(mul) {
        return false;
    }
    let Some(w) = other_operand(mul, norm) else {
        return false;
    };
    let Some(x) = norm.src(0) else {
        return false;
    };
    let uses: usize = graph
        .iter()
        .map(|t| t.srcs().filter(|s| *s == norm).count())
        .sum();
    uses == 1
        && norm.view_src().is_none()
        && norm.flags() & flags::OUTPUT == 0
        && norm.ne() == mul.ne()
        && [x.ty(), norm.ty(), mul.ty(), w.ty()] == [Type::F32; 4]
        && x.nb()[0] == 4
        && w.ne()[0] == norm.ne()[0]
        && w.nb()[0] == 4
}

/// The MUL's operand that is not `norm`, when `norm` is one of its two.
fn other_operand<'a>(mul: &'a Tensor, norm: &Tensor) -> Option<&'a Tensor> {
    match (mul.src(0), mul.src(1)) {
        (Some(a), Some(b)) if a == norm => Some(b),
        (Some(a), Some(b)) if b == norm => Some(a),
        _ => None,
    }
}

/// The addresses for node `index`, fused with the node at `first` when the pass said so: the
/// fused RMS_NORM × MUL node reads the RMS_NORM's operand and parameters and the MUL's
/// multiplier, and writes the MUL's result.
pub(crate) fn resolve(
    graph: &PlacedGraph<'_>,
    index: usize,
    first: Option<usize>,
) -> Result<NodePtrs> {
    let mut ptrs = NodePtrs::resolve(graph, index)?;
    if let Some(first) = first {
        let norm = NodePtrs::resolve(graph, first)?;
        // The multiplier is the MUL's operand that is not the RMS_NORM.
        let w_slot = usize::from(graph.nodes()[index].src(0) == graph.nodes().get(first));
        let w = ptrs.src[w_slot];
        ptrs.src = [TensorPtr::NULL; MAX_SRC];
        ptrs.src[0] = norm.src[0];
        ptrs.src[1] = w;
        ptrs.op_params = norm.op_params;
    }
    Ok(ptrs)
}
