//! Assigning a graph's tensors to backends and cutting it into splits
//! (`ggml_backend_sched_split_graph`): GGML's five passes, then the private graph the allocator
//! places and the splits compute.
//!
//! GGML rewrites the operands of the user's nodes to point at the copies it makes; tensors here
//! cannot change their operands, so the scheduler computes *twins*: a private tensor for every
//! node, with the same op and parameters and with operands mapped (copies for inputs from other
//! backends, twins for nodes, leafs as they are). After allocation each user node is given its
//! twin's memory, so the user reads results and the callback observes tensors as in GGML.

use std::collections::HashMap;

use crate::backend::{Backend, BufferType, BufferUsage, DeviceType};
use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::ops::Op;
use crate::tensor::{flags, Tensor};

/// One run of consecutive nodes on one backend, with the inputs copied to it first.
pub(super) struct Split {
    /// Index of the backend.
    pub(super) backend: usize,
    /// The inputs copied from other backends before the split runs.
    pub(super) inputs: Vec<Input>,
    /// The split's nodes: private twins, in order.
    pub(super) nodes: Vec<Tensor>,
    /// The user's nodes the twins stand for (for the evaluation callback).
    pub(super) originals: Vec<Tensor>,
    /// The graph of `nodes` the backend computes.
    pub(super) graph: Graph,
}

/// An input of a split from another backend.
pub(super) struct Input {
    /// The private tensor holding the input on its own backend.
    pub(super) src: Tensor,
    /// Its backend.
    pub(super) from: usize,
    /// Its copy (for the current copy index) on the split's backend.
    pub(super) copy: Tensor,
    /// The key of its copies in [`Assign::copies`].
    key: (u64, usize),
}

/// What [`Assign::split_graph`] produces.
pub(super) struct Plan {
    pub(super) splits: Vec<Split>,
    /// The private graph the allocator places.
    pub(super) graph: Graph,
    /// Backend of each node of `graph`.
    pub(super) node_ids: Vec<usize>,
    /// Backend of each leaf of `graph`.
    pub(super) leaf_ids: Vec<usize>,
    /// `(user node, twin)` for every node.
    pub(super) twins: Vec<(Tensor, Tensor)>,
}

/// Per-graph assignment state kept by the scheduler between `split_graph` calls (reset by
/// `Sched::reset`).
#[derive(Default)]
pub(super) struct Assign {
    /// Tensor id → backend, user pins and computed assignments alike.
    pub(super) ids: HashMap<u64, usize>,
    /// Tensor ids the user pinned (`set_tensor_backend`).
    pub(super) pinned: HashMap<u64, usize>,
    /// (tensor id, backend) → its copies, one per copy index.
    pub(super) copies: HashMap<(u64, usize), Vec<Tensor>>,
}

/// The view ops: they compute nothing and live where their source lives.
pub(super) fn is_view_op(op: Op) -> bool {
    matches!(op, Op::View | Op::Reshape | Op::Permute | Op::Transpose)
}

/// What the passes need to know about the scheduler.
pub(super) struct Ctx<'a> {
    pub(super) backends: &'a [Backend],
    pub(super) bufts: &'a [BufferType],
    pub(super) n_copies: usize,
    pub(super) cur_copy: usize,
    pub(super) op_offload: bool,
}

impl Ctx<'_> {
    fn last(&self) -> usize {
        self.backends.len() - 1
    }

    /// The highest-priority backend that reads `t`'s buffer and computes `op`.
    fn backend_from_buffer(&self, t: &Tensor, op: &Tensor) -> Option<usize> {
        let buft = t.buffer()?.get_type();
        self.backends
            .iter()
            .position(|b| b.supports_buft(&buft) && b.supports_op(op))
    }
}

impl Assign {
    fn id(&self, t: &Tensor) -> Option<usize> {
        self.ids.get(&t.id()).copied()
    }

    fn set(&mut self, t: &Tensor, b: usize) {
        self.ids.insert(t.id(), b);
    }

    /// Assigns `node` to backend `b` if it computes the op (`ggml_backend_sched_set_if_supported`).
    fn set_if_supported(&mut self, cx: &Ctx<'_>, node: &Tensor, b: usize) {
        if cx.backends[b].supports_op(node) {
            self.set(node, b);
        }
    }

    /// The buffer type `t`'s memory has or will have: its buffer's, else its backend's, else
    /// its view source's backend's.
    fn buft_of(&self, cx: &Ctx<'_>, t: &Tensor) -> Option<BufferType> {
        if let Some(buf) = t.buffer() {
            return Some(buf.get_type());
        }
        let id = self
            .id(t)
            .or_else(|| t.view_src().and_then(|v| self.id(v)))?;
        Some(cx.bufts[id].clone())
    }

    /// Whether backend `b` can read `t` where it is (`ggml_backend_sched_buffer_supported`).
    fn buffer_supported(&self, cx: &Ctx<'_>, t: &Tensor, b: usize) -> bool {
        self.buft_of(cx, t)
            .is_some_and(|buft| cx.backends[b].supports_buft(&buft))
    }

    /// Pass 1 for one tensor (`ggml_backend_sched_backend_id_from_cur`).
    fn pass1_backend(&self, cx: &Ctx<'_>, t: &Tensor) -> Result<Option<usize>> {
        if let Some(buf) = t.buffer() {
            return match cx.backend_from_buffer(t, t) {
                Some(b) => Ok(Some(b)),
                None => Err(Error::unsupported(format!(
                    "sched: tensor {:?} ({}) is in a buffer of type {} that no backend of the \
                     scheduler both reads and computes the op on",
                    t.name(),
                    t.op().name(),
                    buf.get_type().name()
                ))),
            };
        }
        if t.flags() & flags::INPUT != 0 {
            return Ok(Some(cx.last()));
        }
        if matches!(t.op(), Op::Rope | Op::FlashAttnExt) {
            return Ok(None);
        }
        for src in t.srcs() {
            let Some(buf) = src.buffer() else { continue };
            if buf.get_usage() != BufferUsage::Weights {
                continue;
            }
            let b = cx.backend_from_buffer(src, t);
            if cx.op_offload && b == Some(cx.last()) && buf.is_host() {
                let offload = cx.backends[..cx.last()]
                    .iter()
                    .position(|be| be.supports_op(t) && be.offload_op(t));
                if offload.is_some() {
                    return Ok(offload);
                }
            }
            return Ok(b);
        }
        Ok(None)
    }

    /// Passes 1 to 4: every node and operand gets a backend.
    fn assign(&mut self, cx: &Ctx<'_>, nodes: &[Tensor], leafs: &[Tensor]) -> Result<()> {
        // Pass 1: pre-allocated tensors, inputs and weights.
        for t in leafs.iter().chain(nodes) {
            if self.id(t).is_none() {
                if let Some(b) = self.pass1_backend(cx, t)? {
                    self.set(t, b);
                }
            }
        }
        // Pass 2: expand the assignments, first those of non-CPU backends, down then up, then
        // any backend's.
        let order: Vec<usize> = (0..nodes.len()).collect();
        for (rev, any) in [(false, false), (true, false), (false, true), (true, true)] {
            let mut cur: Option<usize> = None;
            let walk: Box<dyn Iterator<Item = &usize>> = if rev {
                Box::new(order.iter().rev())
            } else {
                Box::new(order.iter())
            };
            for &i in walk {
                let node = &nodes[i];
                if is_view_op(node.op()) {
                    continue;
                }
                match self.id(node) {
                    Some(b) if !any && b == cx.last() => cur = None,
                    Some(b) => cur = Some(b),
                    None => {
                        if let Some(c) = cur {
                            self.set_if_supported(cx, node, c);
                        }
                    }
                }
            }
        }
        // Pass 3: best fit for what is left, upgrades to higher-priority backends sharing the
        // buffer type.
        for node in nodes {
            if is_view_op(node.op()) {
                continue;
            }
            match self.id(node) {
                None => {
                    let mut best: Option<(usize, usize)> = None;
                    for b in 0..cx.backends.len() {
                        if !cx.backends[b].supports_op(node) {
                            continue;
                        }
                        let n = node
                            .srcs()
                            .filter(|s| {
                                (self.id(s).is_some()
                                    || s.view_src().is_some_and(|v| self.id(v).is_some()))
                                    && self.buffer_supported(cx, s, b)
                            })
                            .count();
                        if best.is_none_or(|(_, bn)| n > bn) {
                            best = Some((b, n));
                        }
                    }
                    if let Some((b, _)) = best {
                        self.set(node, b);
                    }
                }
                Some(cur) => {
                    if self.pinned.contains_key(&node.id()) {
                        continue;
                    }
                    let up = (0..cur).find(|&b| {
                        cx.bufts[b] == cx.bufts[cur]
                            && cx.backends[b].supports_op(node)
                            && node.srcs().all(|s| self.buffer_supported(cx, s, b))
                    });
                    if let Some(b) = up {
                        self.set(node, b);
                    }
                }
            }
        }
        // Pass 4: operands from their node or view source; leftovers to the first backend that
        // computes them.
        for node in nodes {
            if self.id(node).is_none() {
                if let Some(b) = node.view_src().and_then(|v| self.id(v)) {
                    self.set(node, b);
                }
            }
            let cur = self.id(node);
            for src in node.srcs() {
                if self.id(src).is_none() {
                    let b = match src.view_src() {
                        Some(v) => self.id(v),
                        None => cur,
                    };
                    if let Some(b) = b {
                        self.set(src, b);
                    }
                }
            }
            for b in 0..cx.backends.len() {
                if self.id(node).is_some() {
                    break;
                }
                self.set_if_supported(cx, node, b);
            }
            if self.id(node).is_none() {
                return Err(Error::unsupported(format!(
                    "sched: no backend of the scheduler computes node {:?} ({}); the last \
                     backend ({}) is the fallback and does not either",
                    node.name(),
                    node.op().name(),
                    cx.backends[cx.last()].name()
                )));
            }
        }
        Ok(())
    }

    /// The copies of `src` on backend `b`, made once per graph.
    fn copies_of(&mut self, cx: &Ctx<'_>, src: &Tensor, b: usize) -> &[Tensor] {
        let n_copies = cx.n_copies;
        let name = cx.backends[b].name();
        self.copies.entry((src.id(), b)).or_insert_with(|| {
            (0..n_copies)
                .map(|c| {
                    let t = src.dup_layout(&format!("{name}#{}#{c}", src.name()));
                    if n_copies > 1 {
                        t.add_flags(flags::INPUT | flags::OUTPUT);
                    }
                    t
                })
                .collect()
        })
    }

    /// Assigns, cuts into splits and builds the private graph (`ggml_backend_sched_split_graph`).
    pub(super) fn split_graph(&mut self, cx: &Ctx<'_>, graph: &Graph) -> Result<Plan> {
        let (nodes, leafs) = graph.snapshot();
        self.assign(cx, &nodes, &leafs)?;
        let backend_of = |a: &Assign, t: &Tensor| {
            a.id(t).ok_or_else(|| {
                Error::invalid(format!(
                    "sched: tensor {:?} was left without a backend",
                    t.name()
                ))
            })
        };

        // Pass 5: splits, and the copies of their inputs. `private` maps a user tensor to the
        // tensor the private graph uses for it.
        let mut private: HashMap<u64, Tensor> = HashMap::new();
        let mut splits: Vec<Split> = Vec::new();
        let mut twins = Vec::with_capacity(nodes.len());
        let map = |private: &HashMap<u64, Tensor>, t: &Tensor| {
            private.get(&t.id()).cloned().unwrap_or_else(|| t.clone())
        };
        let first = nodes.iter().find(|n| !is_view_op(n.op()));
        let mut cur = match first {
            Some(n) => backend_of(self, n)?,
            None => cx.last(),
        };
        let mut split = Split::new(cur);
        for node in &nodes {
            if !is_view_op(node.op()) {
                let b = backend_of(self, node)?;
                let mut need_new = false;
                if b == cur && !split.inputs.is_empty() {
                    need_new = node.srcs().any(|s| {
                        s.buffer()
                            .is_some_and(|buf| buf.get_usage() == BufferUsage::Weights)
                            && self.id(s) != Some(cur)
                            && !self.buffer_supported(cx, s, cur)
                    });
                }
                if b != cur || need_new {
                    splits.push(std::mem::replace(&mut split, Split::new(b)));
                    cur = b;
                }
            }
            let view = is_view_op(node.op());
            let mut src = Vec::with_capacity(node.n_src_slots());
            for j in 0..node.n_src_slots() {
                let Some(s) = node.src(j) else {
                    src.push(None);
                    continue;
                };
                let sb = backend_of(self, s)?;
                if !view && sb != cur && !self.buffer_supported(cx, s, cur) {
                    let key = (s.id(), cur);
                    let fresh = !self.copies.contains_key(&key);
                    let copy = self.copies_of(cx, s, cur)[cx.cur_copy].clone();
                    if fresh {
                        split.inputs.push(Input {
                            src: map(&private, s),
                            from: sb,
                            copy: copy.clone(),
                            key,
                        });
                    }
                    src.push(Some(copy));
                } else {
                    src.push(Some(map(&private, s)));
                }
            }
            let view_src = node.view_src().map(|v| map(&private, v));
            let twin = node.twin(src, view_src);
            if node.view_src().is_none() {
                if let Some(b) = node.binding_slot().clone() {
                    *twin.binding_slot() = Some(b);
                }
            }
            private.insert(node.id(), twin.clone());
            twins.push((node.clone(), twin.clone()));
            split.nodes.push(twin);
            split.originals.push(node.clone());
        }
        splits.push(split);

        // Pass 6: with several copies, every user input gets one per copy index, the current
        // one being the input itself.
        let mut graph_inputs: Vec<(Tensor, usize)> = Vec::new();
        if cx.n_copies > 1 {
            for leaf in leafs.iter().filter(|l| l.flags() & flags::INPUT != 0) {
                let b = backend_of(self, leaf)?;
                let key = (leaf.id(), b);
                let name = cx.backends[b].name();
                self.copies.entry(key).or_insert_with(|| {
                    (0..cx.n_copies)
                        .map(|c| {
                            let t = if c == cx.cur_copy {
                                leaf.clone()
                            } else {
                                leaf.dup_layout(&format!("{name}#{}#{c}", leaf.name()))
                            };
                            t.add_flags(flags::INPUT | flags::OUTPUT);
                            t
                        })
                        .collect()
                });
                graph_inputs.push((leaf.clone(), b));
            }
        }

        // The private graph: per split, each input kept alive until its copy, which is placed
        // at the start of the split; then the split's nodes.
        let mut g_nodes = Vec::new();
        let mut node_ids = Vec::new();
        for s in &mut splits {
            for input in &s.inputs {
                g_nodes.push(input.src.keep_alive_view());
                node_ids.push(input.from);
                g_nodes.push(input.copy.clone());
                node_ids.push(s.backend);
            }
            for (t, o) in s.nodes.iter().zip(&s.originals) {
                g_nodes.push(t.clone());
                node_ids.push(backend_of(self, o)?);
            }
            s.graph = Graph::from_parts(s.nodes.clone(), Vec::new());
        }
        let mut g_leafs = Vec::new();
        let mut leaf_ids = Vec::new();
        if cx.n_copies > 1 {
            for (leaf, b) in &graph_inputs {
                for c in &self.copies[&(leaf.id(), *b)] {
                    g_leafs.push(c.clone());
                    leaf_ids.push(*b);
                }
            }
            for s in &splits {
                for input in &s.inputs {
                    for c in &self.copies[&input.key] {
                        g_leafs.push(c.clone());
                        leaf_ids.push(s.backend);
                    }
                }
            }
        }
        for leaf in &leafs {
            if cx.n_copies > 1 && leaf.flags() & flags::INPUT != 0 {
                continue; // placed above with its copies
            }
            g_leafs.push(leaf.clone());
            leaf_ids.push(backend_of(self, leaf)?);
        }
        Ok(Plan {
            splits,
            graph: Graph::from_parts(g_nodes, g_leafs),
            node_ids,
            leaf_ids,
            twins,
        })
    }
}

impl Split {
    fn new(backend: usize) -> Split {
        Split {
            backend,
            inputs: Vec::new(),
            nodes: Vec::new(),
            originals: Vec::new(),
            graph: Graph::from_parts(Vec::new(), Vec::new()),
        }
    }
}

/// Whether `b` is a CPU stream.
pub(super) fn is_cpu(b: &Backend) -> bool {
    b.get_device().dev_type() == DeviceType::Cpu
}
