//! Compute graphs: the nodes of a computation in execution order, and its leaves.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use crate::context::Context;
use crate::error::{Error, Result};
use crate::ops::Op;
use crate::tensor::{flags, lock, Tensor};

/// Nodes a graph holds by default (`GGML_DEFAULT_GRAPH_SIZE`).
pub const DEFAULT_GRAPH_SIZE: usize = 2048;

/// The primes GGML sizes its graph hash tables with (the first prime after each power of two).
const HASH_PRIMES: [usize; 32] = [
    2, 3, 5, 11, 17, 37, 67, 131, 257, 521, 1031, 2053, 4099, 8209, 16411, 32771, 65537, 131101,
    262147, 524309, 1048583, 2097169, 4194319, 8388617, 16777259, 33554467, 67108879, 134217757,
    268435459, 536870923, 1073741827, 2147483659,
];

/// GGML's `ggml_hash_size`: the smallest listed prime ≥ `min`, else `min | 1`.
fn hash_size(min: usize) -> usize {
    HASH_PRIMES
        .iter()
        .copied()
        .find(|&p| p >= min)
        .unwrap_or(min | 1)
}

/// Bytes a graph of `size` nodes takes in a context, as `ggml_graph_nbytes` counts them (a
/// 96-byte header, node and leaf pointer arrays, the hash table with its use counts and bitset,
/// and gradient slots when asked for).
/// `None` when the count does not fit in a `usize`.
pub(crate) fn graph_nbytes(size: usize, grads: bool) -> Option<usize> {
    let hash = hash_size(size.checked_mul(2)?);
    let ptr = std::mem::size_of::<usize>();
    let slots = if grads { 3 } else { 1 };
    [
        96,
        size.checked_mul(2 * ptr)?,
        hash.checked_mul(4)?,
        hash.checked_mul(slots * ptr)?,
        hash.div_ceil(32) * 4,
    ]
    .into_iter()
    .try_fold(0usize, usize::checked_add)
}

/// Metadata bytes of a default graph in a context (`ggml_graph_overhead`, 82 608 on 64-bit).
pub fn graph_overhead() -> usize {
    graph_overhead_custom(DEFAULT_GRAPH_SIZE, false)
}

/// Metadata bytes of a graph of `size` nodes (`ggml_graph_overhead_custom`).
/// Saturates at `usize::MAX` for sizes no memory could hold.
pub fn graph_overhead_custom(size: usize, grads: bool) -> usize {
    graph_nbytes(size, grads)
        .and_then(|b| b.checked_next_multiple_of(crate::context::MEM_ALIGN))
        .and_then(|b| b.checked_add(32))
        .unwrap_or(usize::MAX)
}

#[derive(Clone)]
pub(crate) struct GraphData {
    /// Capacity in nodes (and in leafs); 0 for a view, which cannot grow.
    size: usize,
    grads: bool,
    pub(crate) nodes: Vec<Tensor>,
    pub(crate) leafs: Vec<Tensor>,
    visited: HashSet<u64>,
}

/// A compute graph (`struct ggml_cgraph`). Cheap to clone; clones share the graph.
#[derive(Clone)]
pub struct Graph(pub(crate) Arc<Mutex<GraphData>>);

impl Graph {
    pub(crate) fn new_in(ctx: &Context, size: usize, grads: bool) -> Result<Graph> {
        if size == 0 {
            return Err(Error::invalid(
                "new_graph_custom: size 0; a graph needs room for nodes",
            ));
        }
        ctx.reserve_graph(size, grads)?;
        Ok(Graph::from_data(GraphData {
            size,
            grads,
            nodes: Vec::new(),
            leafs: Vec::new(),
            visited: HashSet::new(),
        }))
    }

    fn from_data(d: GraphData) -> Graph {
        Graph(Arc::new(Mutex::new(d)))
    }

    /// A graph of exactly these nodes and leafs, in this order (the scheduler's private graphs).
    /// It cannot grow.
    pub(crate) fn from_parts(nodes: Vec<Tensor>, leafs: Vec<Tensor>) -> Graph {
        Graph::from_data(GraphData {
            size: 0,
            grads: false,
            visited: nodes.iter().chain(leafs.iter()).map(Tensor::id).collect(),
            nodes,
            leafs,
        })
    }

    /// Adds `t` and everything it depends on that the graph does not yet hold, in post-order
    /// (operands before the node), as `ggml_build_forward_expand`. Computed tensors become
    /// nodes (flagged [`flags::COMPUTE`]); leaves (op NONE, not parameters) become leafs.
    /// Anonymous tensors are named `node_N` / `leaf_N` as GGML names them.
    pub fn build_forward_expand(&self, t: &Tensor) -> Result<()> {
        let mut g = lock(&self.0);
        let mut new_nodes = Vec::new();
        let mut new_leafs = Vec::new();
        let mut seen = HashSet::new();
        // Iterative post-order: (tensor, next operand to visit).
        let mut stack: Vec<(Tensor, usize)> = Vec::new();
        if !g.visited.contains(&t.id()) {
            seen.insert(t.id());
            stack.push((t.clone(), 0));
        }
        while let Some((cur, i)) = stack.pop() {
            if i < cur.n_src_slots() {
                let s = cur.src(i).cloned();
                stack.push((cur, i + 1));
                if let Some(s) = s {
                    if !g.visited.contains(&s.id()) && seen.insert(s.id()) {
                        stack.push((s, 0));
                    }
                }
                continue;
            }
            if cur.op() == Op::None && cur.flags() & flags::PARAM == 0 {
                new_leafs.push(cur);
            } else {
                new_nodes.push(cur);
            }
        }
        if g.nodes.len() + new_nodes.len() > g.size || g.leafs.len() + new_leafs.len() > g.size {
            return Err(Error::invalid(format!(
                "build_forward_expand: graph of size {} is full ({} nodes, {} leafs; {} and {} \
                 more needed); make it with new_graph_custom(larger size), and count the size \
                 in the context with graph_overhead_custom",
                g.size,
                g.nodes.len(),
                g.leafs.len(),
                new_nodes.len(),
                new_leafs.len()
            )));
        }
        for l in new_leafs {
            if l.name().is_empty() {
                l.set_name(&format!("leaf_{}", g.leafs.len()));
            }
            g.visited.insert(l.id());
            g.leafs.push(l);
        }
        for n in new_nodes {
            if n.name().is_empty() {
                n.set_name(&format!("node_{}", g.nodes.len()));
            }
            if n.op() != Op::None {
                n.add_flags(flags::COMPUTE);
            }
            g.visited.insert(n.id());
            g.nodes.push(n);
        }
        Ok(())
    }

    /// Appends `t` as a node without visiting its operands (`ggml_graph_add_node`).
    pub fn add_node(&self, t: &Tensor) -> Result<()> {
        let mut g = lock(&self.0);
        if g.nodes.len() >= g.size {
            return Err(Error::invalid(format!(
                "add_node: graph of size {} is full; make it with new_graph_custom(larger \
                 size), and count the size in the context with graph_overhead_custom",
                g.size
            )));
        }
        g.visited.insert(t.id());
        g.nodes.push(t.clone());
        Ok(())
    }

    /// Number of nodes (`ggml_graph_n_nodes`).
    pub fn n_nodes(&self) -> usize {
        lock(&self.0).nodes.len()
    }

    /// Number of leafs.
    pub fn n_leafs(&self) -> usize {
        lock(&self.0).leafs.len()
    }

    /// The graph's capacity in nodes (`ggml_graph_size`); 0 for a view.
    pub fn size(&self) -> usize {
        lock(&self.0).size
    }

    /// Whether the graph was made with gradient slots.
    pub fn has_grads(&self) -> bool {
        lock(&self.0).grads
    }

    /// Node `i`; negative `i` counts from the end (`ggml_graph_node`).
    pub fn node(&self, i: i64) -> Result<Tensor> {
        let g = lock(&self.0);
        let n = g.nodes.len() as i64;
        let idx = if i < 0 { n + i } else { i };
        if idx < 0 || idx >= n {
            return Err(Error::invalid(format!(
                "node: index {i} is out of range for a graph of {n} nodes"
            )));
        }
        Ok(g.nodes[idx as usize].clone())
    }

    /// All nodes in execution order (`ggml_graph_nodes`).
    pub fn nodes(&self) -> Vec<Tensor> {
        lock(&self.0).nodes.clone()
    }

    /// Runs `f` on the nodes under the graph's lock, without copying the list.
    pub(crate) fn with_nodes<R>(&self, f: impl FnOnce(&[Tensor]) -> R) -> R {
        f(&lock(&self.0).nodes)
    }

    /// All leafs.
    pub fn leafs(&self) -> Vec<Tensor> {
        lock(&self.0).leafs.clone()
    }

    /// The node or leaf named `name` (`ggml_graph_get_tensor`).
    pub fn get_tensor(&self, name: &str) -> Option<Tensor> {
        let g = lock(&self.0);
        g.leafs
            .iter()
            .chain(g.nodes.iter())
            .find(|t| t.name() == name)
            .cloned()
    }

    /// A graph of nodes `i0..i1` of this one, with no leafs (`ggml_graph_view`). It cannot grow.
    pub fn graph_view(&self, i0: usize, i1: usize) -> Result<Graph> {
        let g = lock(&self.0);
        if i0 > i1 || i1 > g.nodes.len() {
            return Err(Error::invalid(format!(
                "graph_view: range {i0}..{i1} is not within the {} nodes",
                g.nodes.len()
            )));
        }
        let nodes = g.nodes[i0..i1].to_vec();
        Ok(Graph::from_data(GraphData {
            size: 0,
            grads: false,
            visited: nodes.iter().map(Tensor::id).collect(),
            nodes,
            leafs: Vec::new(),
        }))
    }

    /// Removes every node and leaf (`ggml_graph_clear`).
    pub fn clear(&self) {
        let mut g = lock(&self.0);
        g.nodes.clear();
        g.leafs.clear();
        g.visited.clear();
    }

    /// Whether the graph holds `t` as a node or leaf.
    pub fn contains(&self, t: &Tensor) -> bool {
        lock(&self.0).visited.contains(&t.id())
    }

    pub(crate) fn snapshot(&self) -> (Vec<Tensor>, Vec<Tensor>) {
        let g = lock(&self.0);
        (g.nodes.clone(), g.leafs.clone())
    }
}

impl std::fmt::Debug for Graph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let g = lock(&self.0);
        f.debug_struct("Graph")
            .field("size", &g.size)
            .field("n_nodes", &g.nodes.len())
            .field("n_leafs", &g.leafs.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overhead_matches_ggml() {
        assert_eq!(graph_overhead(), 82_608);
        assert_eq!(crate::context::tensor_overhead(), 368);
    }
}
