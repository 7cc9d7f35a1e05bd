//! The scheduler (`ggml_backend_sched_*`): runs one graph over several backends.
//!
//! As GGML's: each node is assigned to a backend (tensors already in a buffer stay with a
//! backend that reads it, unless `offload_op` says moving the op pays; then the assignments
//! spread from the higher-priority backends, nodes move up to backends sharing their buffer
//! type, what is left takes the best fit, operands follow their nodes), the graph is cut into
//! splits of consecutive nodes on one backend, each split's inputs from other backends are
//! copied to it, every backend's compute buffer is planned by one graph allocator, and the
//! splits run in order. With `parallel`, split inputs have four copies used in turn and events
//! order the streams, so consecutive graphs pipeline.
//!
//! One difference from GGML: GGML rewrites the operands of the user's nodes to point at the
//! copies; here the scheduler computes private twins of the nodes (see [`assign`]) and gives
//! each user node its twin's memory, so the graph the user built is never changed.

mod assign;

use std::sync::{Arc, Mutex};

use crate::alloc::Gallocr;
use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::tensor::{lock, Tensor};

use super::{Backend, BufferType, Event};
use assign::{Assign, Ctx, Plan};

/// Most backends a scheduler takes (`GGML_SCHED_MAX_BACKENDS`).
pub const SCHED_MAX_BACKENDS: usize = 16;

/// Copies of split inputs with `parallel` (`GGML_SCHED_MAX_COPIES`).
pub const SCHED_MAX_COPIES: usize = 4;

/// The evaluation callback (`ggml_backend_sched_eval_callback`): called with `ask = true` for
/// each node before it is computed — return whether you want to observe it; then, for a node
/// you asked for, with `ask = false` once it is computed (its data can be read) — return
/// `false` to skip the rest of the split. It must not call the scheduler.
pub type EvalCallback = dyn Fn(&Tensor, bool) -> bool + Send + Sync;

struct State {
    backends: Vec<Backend>,
    bufts: Vec<BufferType>,
    galloc: Gallocr,
    graph_size: usize,
    n_copies: usize,
    cur_copy: usize,
    next_copy: usize,
    /// `events[backend][copy]`: recorded after each split.
    events: Vec<Vec<Event>>,
    assign: Assign,
    plan: Option<Plan>,
    /// The user graph the plan was made for.
    planned: Option<Graph>,
    prev_node_ids: Vec<usize>,
    prev_leaf_ids: Vec<usize>,
    /// User tensors the scheduler gave memory (their memory goes back at the next reset).
    bound: Vec<Tensor>,
    is_reset: bool,
    is_alloc: bool,
    eval_cb: Option<Arc<EvalCallback>>,
}

/// A scheduler over several backends (`ggml_backend_sched_t`). Cheap to clone (clones share
/// the scheduler); `Send + Sync`, its methods serialise on an internal lock.
#[derive(Clone)]
pub struct Sched(Arc<Mutex<State>>);

impl std::fmt::Debug for Sched {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = lock(&self.0);
        f.debug_struct("Sched")
            .field("backends", &s.backends)
            .field("n_copies", &s.n_copies)
            .field("n_splits", &s.plan.as_ref().map_or(0, |p| p.splits.len()))
            .finish()
    }
}

/// A scheduler over `backends`, highest priority first (`ggml_backend_sched_new`). A CPU
/// backend is appended when the last one is not a CPU stream: the last backend is the fallback
/// and the home of unallocated graph inputs. `graph_size` is the most nodes (and leafs) of a
/// graph it will schedule; `parallel` keeps [`SCHED_MAX_COPIES`] copies of split inputs so
/// that consecutive graphs pipeline. Weights in buffers tagged [`super::BufferUsage::Weights`]
/// decide where their ops run; ops move from the CPU to a backend whose device says
/// [`super::Device::offload_op`] (GGML's `op_offload = true`).
///
/// `Err` when `backends` is empty, holds more than [`SCHED_MAX_BACKENDS`] (the CPU included)
/// or the same stream twice, or `graph_size` is 0.
pub fn sched_new(backends: &[Backend], graph_size: usize, parallel: bool) -> Result<Sched> {
    if backends.is_empty() {
        return Err(Error::invalid(
            "sched_new: backends is empty; give at least one backend",
        ));
    }
    if graph_size == 0 {
        return Err(Error::invalid(
            "sched_new: graph_size is 0; give the most nodes a scheduled graph has",
        ));
    }
    let mut backends = backends.to_vec();
    if !assign::is_cpu(&backends[backends.len() - 1]) {
        backends.push(super::cpu_init()?);
    }
    if backends.len() > SCHED_MAX_BACKENDS {
        return Err(Error::invalid(format!(
            "sched_new: {} backends (the CPU fallback included); at most {SCHED_MAX_BACKENDS}",
            backends.len()
        )));
    }
    for (i, b) in backends.iter().enumerate() {
        if backends[..i].contains(b) {
            return Err(Error::invalid(format!(
                "sched_new: backend {} is given twice (index {i}); give each stream once",
                b.name()
            )));
        }
    }
    let bufts: Vec<BufferType> = backends
        .iter()
        .map(Backend::get_default_buffer_type)
        .collect();
    let n_copies = if parallel { SCHED_MAX_COPIES } else { 1 };
    let events = backends
        .iter()
        .map(|b| {
            (0..n_copies)
                .map(|_| Event::new(&b.get_device()))
                .collect::<Result<Vec<_>>>()
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Sched(Arc::new(Mutex::new(State {
        galloc: Gallocr::new_n(&bufts)?,
        backends,
        bufts,
        graph_size,
        n_copies,
        cur_copy: 0,
        next_copy: 0,
        events,
        assign: Assign::default(),
        plan: None,
        planned: None,
        prev_node_ids: Vec::new(),
        prev_leaf_ids: Vec::new(),
        bound: Vec::new(),
        is_reset: true,
        is_alloc: false,
        eval_cb: None,
    }))))
}

impl State {
    fn check_size(&self, g: &Graph, what: &str) -> Result<()> {
        let n = g.n_nodes() + g.n_leafs();
        if n > self.graph_size {
            return Err(Error::invalid(format!(
                "sched {what}: the graph has {n} nodes and leafs; the scheduler was made for \
                 graph_size {}",
                self.graph_size
            )));
        }
        Ok(())
    }

    fn synchronize(&mut self) -> Result<()> {
        let mut first = Ok(());
        for b in &self.backends {
            let r = b.synchronize();
            if first.is_ok() {
                first = r;
            }
        }
        if !self.is_alloc {
            self.next_copy = 0;
        }
        first
    }

    fn reset(&mut self) {
        if !self.is_reset {
            for t in self.bound.drain(..) {
                *t.binding_slot() = None;
            }
            let pinned = std::mem::take(&mut self.assign.pinned);
            self.assign = Assign {
                ids: pinned.clone(),
                pinned,
                copies: Default::default(),
            };
            self.plan = None;
            self.planned = None;
            self.is_reset = true;
        }
        self.is_alloc = false;
    }

    fn split(&mut self, g: &Graph) -> Result<Plan> {
        let cx = Ctx {
            backends: &self.backends,
            bufts: &self.bufts,
            n_copies: self.n_copies,
            cur_copy: self.cur_copy,
            op_offload: true,
        };
        self.is_reset = false;
        self.assign.split_graph(&cx, g)
    }

    fn alloc_graph(&mut self, g: &Graph) -> Result<()> {
        self.check_size(g, "alloc_graph")?;
        if self.is_alloc {
            return Err(Error::invalid(
                "sched alloc_graph: a graph is already allocated; call reset first",
            ));
        }
        self.cur_copy = self.next_copy;
        self.next_copy = (self.next_copy + 1) % self.n_copies;
        let plan = self.split(g)?;
        // Tensors without memory now are the ones this allocation places.
        let (_, leafs) = g.snapshot();
        let fresh: Vec<Tensor> = leafs
            .iter()
            .filter(|l| !l.is_allocated())
            .cloned()
            .chain(
                plan.twins
                    .iter()
                    .filter(|(o, _)| o.view_src().is_none() && !o.is_allocated())
                    .map(|(o, _)| o.clone()),
            )
            .collect();
        let changed = |ids: &[usize], prev: &[usize]| {
            ids.len() != prev.len()
                || ids
                    .iter()
                    .zip(prev)
                    .any(|(&a, &b)| a != b && self.bufts[a] != self.bufts[b])
        };
        let moved = changed(&plan.node_ids, &self.prev_node_ids)
            || changed(&plan.leaf_ids, &self.prev_leaf_ids);
        if moved || self.galloc.alloc_graph(&plan.graph).is_err() {
            self.synchronize()?;
            self.galloc
                .reserve_n(&plan.graph, Some(&plan.node_ids), Some(&plan.leaf_ids))?;
            self.galloc.alloc_graph(&plan.graph)?;
        }
        for (o, t) in &plan.twins {
            if o.view_src().is_none() && !o.is_allocated() {
                *o.binding_slot() = t.binding_slot().clone();
            }
        }
        self.bound = fresh;
        self.prev_node_ids = plan.node_ids.clone();
        self.prev_leaf_ids = plan.leaf_ids.clone();
        self.plan = Some(plan);
        self.planned = Some(g.clone());
        self.is_alloc = true;
        Ok(())
    }

    fn compute_splits(&mut self) -> Result<()> {
        let Some(plan) = &self.plan else {
            return Err(Error::invalid("sched graph_compute: no graph is allocated"));
        };
        let c = self.cur_copy;
        let mut prev: Option<usize> = None;
        for split in &plan.splits {
            let sb = &self.backends[split.backend];
            let ev = &self.events[split.backend][c];
            if split.inputs.is_empty() {
                if let Some(p) = prev.filter(|&p| p != split.backend) {
                    // The allocator may have reused memory of the previous split.
                    self.events[p][c].synchronize()?;
                }
            }
            for input in &split.inputs {
                if input.src.flags() & crate::tensor::flags::INPUT != 0 {
                    // The user's data: copied now, so the user may change it afterwards.
                    ev.synchronize()?;
                    super::tensor_copy(&input.src, &input.copy)?;
                } else {
                    sb.event_wait(ev)?;
                    super::tensor_copy_async(
                        &self.backends[input.from],
                        sb,
                        &input.src,
                        &input.copy,
                    )?;
                }
            }
            match &self.eval_cb {
                None => sb.graph_compute_async(&split.graph)?,
                Some(cb) => {
                    if !compute_observed(sb, split, cb.as_ref())? {
                        ev.record(sb)?;
                        prev = Some(split.backend);
                        continue;
                    }
                }
            }
            ev.record(sb)?;
            prev = Some(split.backend);
        }
        Ok(())
    }
}

/// Computes `split` in runs that end at the nodes the callback asks to observe, synchronizing
/// after each run and showing the node; `Ok(false)` when the callback stopped the split.
fn compute_observed(b: &Backend, split: &assign::Split, cb: &EvalCallback) -> Result<bool> {
    let n = split.nodes.len();
    let mut j0 = 0;
    while j0 < n {
        let mut j1 = j0;
        let mut want = cb(&split.originals[j0], true);
        while !want && j1 + 1 < n {
            j1 += 1;
            want = cb(&split.originals[j1], true);
        }
        let run = Graph::from_parts(split.nodes[j0..=j1].to_vec(), Vec::new());
        b.graph_compute_async(&run)?;
        b.synchronize()?;
        if want && !cb(&split.originals[j1], false) {
            return Ok(false);
        }
        j0 = j1 + 1;
    }
    Ok(true)
}

impl Sched {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        lock(&self.0)
    }

    /// Plans `graph` as the largest graph to come and allocates the compute buffers it needs
    /// (`ggml_backend_sched_reserve`); then resets. `Err` if the graph is larger than the
    /// scheduler's `graph_size`, an op has no backend, or memory cannot be had.
    pub fn reserve(&self, graph: &Graph) -> Result<()> {
        let mut s = self.state();
        s.check_size(graph, "reserve")?;
        s.synchronize()?;
        let r = s.split(graph).and_then(|plan| {
            s.galloc
                .reserve_n(&plan.graph, Some(&plan.node_ids), Some(&plan.leaf_ids))
        });
        s.reset();
        r
    }

    /// Assigns `graph`'s nodes to backends, splits it and places its tensors in the compute
    /// buffers (`ggml_backend_sched_alloc_graph`). Graph inputs (leafs flagged INPUT without
    /// memory) get memory here: set their data after this call. `Err` if a graph is already
    /// allocated (call [`Sched::reset`] first), for the reasons of [`Sched::reserve`].
    pub fn alloc_graph(&self, graph: &Graph) -> Result<()> {
        self.state().alloc_graph(graph)
    }

    /// Computes `graph` over the backends and returns once every split is queued
    /// (`ggml_backend_sched_graph_compute_async`); allocates it first unless it is the graph
    /// allocated last. `Err` if another graph is allocated (reset first), or for the reasons
    /// of [`Sched::alloc_graph`] and [`Backend::graph_compute_async`]; errors while computing
    /// come from [`Sched::synchronize`].
    pub fn graph_compute_async(&self, graph: &Graph) -> Result<()> {
        let mut s = self.state();
        if !s.is_reset && !s.is_alloc {
            s.reset();
        }
        if !s.is_alloc {
            s.alloc_graph(graph)?;
        } else if s
            .planned
            .as_ref()
            .is_some_and(|p| !Arc::ptr_eq(&p.0, &graph.0))
        {
            return Err(Error::invalid(
                "sched graph_compute: another graph is allocated; call reset first",
            ));
        }
        s.compute_splits()
    }

    /// Computes `graph` and waits for it (`ggml_backend_sched_graph_compute`).
    pub fn graph_compute(&self, graph: &Graph) -> Result<()> {
        self.graph_compute_async(graph)?;
        self.synchronize()
    }

    /// Waits for every backend (`ggml_backend_sched_synchronize`); returns the first error
    /// queued work raised.
    pub fn synchronize(&self) -> Result<()> {
        self.state().synchronize()
    }

    /// Forgets the assignments and the allocation of the last graph
    /// (`ggml_backend_sched_reset`); user pins made with [`Sched::set_tensor_backend`] stay.
    /// Tensors that the scheduler gave memory lose it (using them is an `Err`, never a read of
    /// reused memory). Call it before scheduling another graph.
    pub fn reset(&self) {
        self.state().reset();
    }

    /// Number of backends, the CPU fallback included (`ggml_backend_sched_get_n_backends`).
    pub fn get_n_backends(&self) -> usize {
        self.state().backends.len()
    }

    /// Backend `i` (`ggml_backend_sched_get_backend`); `None` when out of range.
    pub fn get_backend(&self, i: usize) -> Option<Backend> {
        self.state().backends.get(i).cloned()
    }

    /// Number of splits of the last graph split (`ggml_backend_sched_get_n_splits`).
    pub fn get_n_splits(&self) -> usize {
        self.state().plan.as_ref().map_or(0, |p| p.splits.len())
    }

    /// Copies kept of split inputs: 4 with `parallel`, else 1 (`ggml_backend_sched_get_n_copies`).
    pub fn get_n_copies(&self) -> usize {
        self.state().n_copies
    }

    /// The compute buffer type of `backend` (`ggml_backend_sched_get_buffer_type`); `Err` if it
    /// is not one of the scheduler's.
    pub fn get_buffer_type(&self, backend: &Backend) -> Result<BufferType> {
        let s = self.state();
        let i = s.index_of(backend, "get_buffer_type")?;
        Ok(s.bufts[i].clone())
    }

    /// Bytes of `backend`'s compute buffer (`ggml_backend_sched_get_buffer_size`): 0 when it
    /// shares its buffer type with a higher-priority backend. `Err` if it is not one of the
    /// scheduler's.
    pub fn get_buffer_size(&self, backend: &Backend) -> Result<usize> {
        let s = self.state();
        let i = s.index_of(backend, "get_buffer_size")?;
        Ok(s.galloc.get_buffer_size(i))
    }

    /// Pins `node` to `backend` (`ggml_backend_sched_set_tensor_backend`): the assignment
    /// passes keep it. `Err` if `backend` is not one of the scheduler's.
    pub fn set_tensor_backend(&self, node: &Tensor, backend: &Backend) -> Result<()> {
        let mut s = self.state();
        let i = s.index_of(backend, "set_tensor_backend")?;
        s.assign.pinned.insert(node.id(), i);
        s.assign.ids.insert(node.id(), i);
        s.is_reset = false;
        Ok(())
    }

    /// The backend `node` is assigned to, if any (`ggml_backend_sched_get_tensor_backend`).
    pub fn get_tensor_backend(&self, node: &Tensor) -> Option<Backend> {
        let s = self.state();
        let i = *s.assign.ids.get(&node.id())?;
        s.backends.get(i).cloned()
    }

    /// Sets the evaluation callback (`ggml_backend_sched_set_eval_callback`); `None` removes it.
    pub fn set_eval_callback(&self, cb: Option<Arc<EvalCallback>>) {
        self.state().eval_cb = cb;
    }
}

impl State {
    fn index_of(&self, backend: &Backend, what: &str) -> Result<usize> {
        self.backends
            .iter()
            .position(|b| b == backend)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "sched {what}: backend {} is not one of the scheduler's",
                    backend.name()
                ))
            })
    }
}
