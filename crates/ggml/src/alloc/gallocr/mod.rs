//! The graph allocator (GGML's `ggml_gallocr`): places a graph's tensors in compute buffers,
//! reusing the memory of tensors that are no longer needed.
//!
//! Use is in two steps, as in GGML. [`Gallocr::reserve`] plans a graph (see [`planner`] for the
//! rules) and makes sure the compute buffers are large enough for the plan;
//! [`Gallocr::alloc_graph`] places the tensors of a graph of the same shape where the plan says.
//! A graph's tensors must be fresh (without memory) each time; tensors that already have memory
//! are left where they are.

mod dyn_tallocr;
mod planner;
mod vbuffer;

#[cfg(test)]
mod tests;

use std::sync::Mutex;

use crate::backend::BufferType;
use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::tensor::{lock, Tensor};

use dyn_tallocr::DynTallocr;
use planner::{Buffers, Placement, Planner};
use vbuffer::VBuffer;

/// The places of one node and its operands in a plan (GGML's `node_alloc`).
struct NodePlan {
    dst: Option<Placement>,
    srcs: Vec<Option<Placement>>,
}

/// A stored plan: per node and per leaf, where the tensor goes (`None`: a view, or a tensor
/// that had memory already).
struct Plan {
    nodes: Vec<NodePlan>,
    leafs: Vec<Option<Placement>>,
}

struct State {
    /// Buffer type of each buffer id.
    bufts: Vec<BufferType>,
    /// For each buffer id, the slot of its allocator and virtual buffer: ids with the same
    /// buffer type share one.
    slot_of: Vec<usize>,
    /// Per slot: its buffer type.
    slot_bufts: Vec<BufferType>,
    /// Per slot: the planning allocator.
    tallocs: Vec<DynTallocr>,
    /// Per slot: the compute buffers, once allocated.
    buffers: Vec<Option<VBuffer>>,
    plan: Option<Plan>,
}

/// The graph allocator (`ggml_gallocr_t`): plans where a graph's intermediate tensors live in
/// compute buffers of one or more buffer types, and places them there.
///
/// `Send + Sync`; the methods take `&self` (an internal lock serialises them). Dropping the
/// allocator drops its handles on the compute buffers: their memory is released once no tensor
/// placed in them is left. [`Gallocr::free`] releases it at once, as `ggml_gallocr_free` does.
pub struct Gallocr {
    state: Mutex<State>,
}

impl std::fmt::Debug for Gallocr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = lock(&self.state);
        f.debug_struct("Gallocr")
            .field("bufts", &s.bufts)
            .field("planned", &s.plan.is_some())
            .finish()
    }
}

impl Gallocr {
    /// An allocator with one buffer type (`ggml_gallocr_new`).
    pub fn new(buft: &BufferType) -> Result<Gallocr> {
        Gallocr::new_n(std::slice::from_ref(buft))
    }

    /// An allocator with buffer ids `0..bufts.len()` (`ggml_gallocr_new_n`). Ids with the same
    /// buffer type share one allocator and one set of compute buffers. `Err` for an empty list
    /// or a buffer type whose alignment is not a power of two.
    pub fn new_n(bufts: &[BufferType]) -> Result<Gallocr> {
        if bufts.is_empty() {
            return Err(Error::invalid(
                "gallocr_new_n: bufts is empty; give at least one buffer type",
            ));
        }
        let mut slot_of = Vec::with_capacity(bufts.len());
        let mut tallocs = Vec::new();
        let mut slot_bufts: Vec<BufferType> = Vec::new();
        for buft in bufts {
            match slot_bufts.iter().position(|b| b == buft) {
                Some(slot) => slot_of.push(slot),
                None => {
                    let align = buft.get_alignment();
                    if !align.is_power_of_two() {
                        return Err(Error::invalid(format!(
                            "gallocr_new_n: buffer type {} has alignment {align}, which is not \
                             a power of two",
                            buft.name()
                        )));
                    }
                    slot_of.push(tallocs.len());
                    tallocs.push(DynTallocr::new(align, buft.get_max_size()));
                    slot_bufts.push(buft.clone());
                }
            }
        }
        let n_slots = tallocs.len();
        Ok(Gallocr {
            state: Mutex::new(State {
                bufts: bufts.to_vec(),
                slot_of,
                slot_bufts,
                tallocs,
                buffers: (0..n_slots).map(|_| None).collect(),
                plan: None,
            }),
        })
    }

    /// Plans `graph` with every tensor in buffer 0 and allocates the compute buffers the plan
    /// needs (`ggml_gallocr_reserve`).
    pub fn reserve(&self, graph: &Graph) -> Result<()> {
        self.reserve_n(graph, None, None)
    }

    /// Plans `graph` with node `i` in buffer `node_buffer_ids[i]` and leaf `i` in buffer
    /// `leaf_buffer_ids[i]` (`None`: all in buffer 0), then makes every compute buffer at least
    /// as large as the plan needs: buffers that are too small are replaced by new ones tagged
    /// [`crate::BufferUsage::Compute`] (`ggml_gallocr_reserve_n`); buffers never shrink. The
    /// allocator drops its handles on replaced buffers, whose memory goes once no tensor placed
    /// in them is left. `Err` if an id is out of range, a list's length is not the graph's
    /// count, or memory cannot be had.
    pub fn reserve_n(
        &self,
        graph: &Graph,
        node_buffer_ids: Option<&[usize]>,
        leaf_buffer_ids: Option<&[usize]>,
    ) -> Result<()> {
        let (nodes, leafs) = graph.snapshot();
        let mut s = lock(&self.state);
        s.reserve(&nodes, &leafs, node_buffer_ids, leaf_buffer_ids, true)
    }

    /// Plans `graph` as [`Gallocr::reserve_n`] does without allocating, and returns the bytes
    /// each buffer id would need (`ggml_gallocr_reserve_n_size`); ids sharing a buffer type
    /// report the same shared size. Compute buffers smaller than the plan are dropped.
    pub fn reserve_n_size(
        &self,
        graph: &Graph,
        node_buffer_ids: Option<&[usize]>,
        leaf_buffer_ids: Option<&[usize]>,
    ) -> Result<Vec<usize>> {
        let (nodes, leafs) = graph.snapshot();
        let mut s = lock(&self.state);
        s.reserve(&nodes, &leafs, node_buffer_ids, leaf_buffer_ids, false)?;
        Ok(s.slot_of
            .iter()
            .map(|&slot| s.tallocs[slot].total_size())
            .collect())
    }

    /// Places the tensors of `graph` as planned (`ggml_gallocr_alloc_graph`): leafs, then for
    /// each node its operands and itself. Views are initialised from their source; tensors that
    /// have memory already are left alone.
    ///
    /// If the graph does not match the plan (other node or leaf counts, a tensor larger than
    /// planned or not planned, a compute buffer missing), an allocator with one buffer id plans
    /// again ([`Gallocr::reserve`]); one with several returns an `Err` asking the caller to call
    /// [`Gallocr::reserve_n`] with fresh ids (GGML returns false). As in GGML the plan is matched
    /// by position, not by structure: a graph with the same counts and sizes but other
    /// connections must be planned with `reserve` first. Also `Err` if a tensor of the graph
    /// ends up without memory (e.g. a view of a tensor that is not in the graph and has no
    /// memory); tensors placed by this call are then unplaced again.
    pub fn alloc_graph(&self, graph: &Graph) -> Result<()> {
        let mut s = lock(&self.state);
        let (nodes, leafs) = graph.snapshot();
        if s.needs_replan(&nodes, &leafs) {
            if s.bufts.len() > 1 {
                return Err(Error::invalid(format!(
                    "gallocr_alloc_graph: the graph ({} nodes, {} leafs) does not match the \
                     plan and this allocator has {} buffer ids; call reserve_n with the graph's \
                     buffer ids first",
                    nodes.len(),
                    leafs.len(),
                    s.bufts.len()
                )));
            }
            s.reserve(&nodes, &leafs, None, None, true)?;
        }
        s.place(&nodes, &leafs)
    }

    /// Bytes of the compute buffers of buffer id `buffer_id` (`ggml_gallocr_get_buffer_size`):
    /// the sum of its chunks; 0 if none are allocated, if the id shares its buffers with a
    /// lower id (so sums over ids count each buffer once), or if the id is out of range.
    pub fn get_buffer_size(&self, buffer_id: usize) -> usize {
        let s = lock(&self.state);
        let Some(&slot) = s.slot_of.get(buffer_id) else {
            return 0;
        };
        if s.slot_of[..buffer_id].contains(&slot) {
            return 0;
        }
        s.buffers[slot].as_ref().map_or(0, VBuffer::size)
    }

    /// Releases the compute buffers now (`ggml_gallocr_free`): tensors placed in them can no
    /// longer be used (that is an `Err`, never a dangling access).
    pub fn free(self) {
        let s = lock(&self.state);
        s.buffers.iter().flatten().for_each(VBuffer::release);
    }
}

/// The buffer id of item `i`: from the list if one was given, else 0.
fn ids_or_zero(ids: Option<&[usize]>, n: usize) -> Vec<usize> {
    ids.map_or_else(|| vec![0; n], <[usize]>::to_vec)
}

impl State {
    fn check_ids(&self, ids: Option<&[usize]>, n: usize, what: &str) -> Result<()> {
        let Some(ids) = ids else { return Ok(()) };
        if ids.len() != n {
            return Err(Error::invalid(format!(
                "gallocr_reserve_n: {what} has {} entries for a graph with {n}",
                ids.len()
            )));
        }
        if let Some((i, id)) = ids
            .iter()
            .enumerate()
            .find(|(_, &id)| id >= self.bufts.len())
        {
            return Err(Error::invalid(format!(
                "gallocr_reserve_n: {what}[{i}] = {id} is out of range: the allocator has {} \
                 buffer ids",
                self.bufts.len()
            )));
        }
        Ok(())
    }

    /// Plans a graph's `nodes` and `leafs` and stores the plan; with `allocate`, (re)allocates
    /// compute buffers that are too small, else drops them (GGML's
    /// `ggml_gallocr_reserve_n_impl`).
    fn reserve(
        &mut self,
        nodes: &[Tensor],
        leafs: &[Tensor],
        node_ids: Option<&[usize]>,
        leaf_ids: Option<&[usize]>,
        allocate: bool,
    ) -> Result<()> {
        self.check_ids(node_ids, nodes.len(), "node_buffer_ids")?;
        self.check_ids(leaf_ids, leafs.len(), "leaf_buffer_ids")?;
        let node_ids = ids_or_zero(node_ids, nodes.len());
        let leaf_ids = ids_or_zero(leaf_ids, leafs.len());

        self.plan = None;
        self.tallocs.iter_mut().for_each(DynTallocr::reset);
        let mut planner = Planner::new(Buffers {
            bufts: &self.bufts,
            slot_of: &self.slot_of,
            tallocs: &mut self.tallocs,
        });
        planner.run(nodes, leafs, &node_ids, &leaf_ids)?;
        let plan = Plan {
            nodes: nodes
                .iter()
                .map(|n| NodePlan {
                    dst: planner.placement(n),
                    srcs: n.srcs().map(|s| planner.placement(s)).collect(),
                })
                .collect(),
            leafs: leafs.iter().map(|l| planner.placement(l)).collect(),
        };
        self.plan = Some(plan);

        // Make the compute buffers fit the plan. A slot gets buffers even when the plan puts
        // nothing in it, as in GGML.
        for slot in 0..self.tallocs.len() {
            let talloc = &self.tallocs[slot];
            if self.buffers[slot]
                .as_ref()
                .is_some_and(|vb| vb.holds(talloc))
            {
                continue;
            }
            // Tensors still placed in the old buffers keep them alive; we drop our handles.
            self.buffers[slot] = None;
            if allocate {
                let buft = &self.slot_bufts[slot];
                let vb = VBuffer::alloc(buft, talloc).map_err(|e| {
                    Error::AllocFailed(format!(
                        "gallocr_reserve: failed to allocate {} compute buffer of {} bytes: {e}",
                        buft.name(),
                        talloc.total_size()
                    ))
                })?;
                self.buffers[slot] = Some(vb);
            }
        }
        Ok(())
    }

    /// Whether `t` can be placed with `p` as it is now (GGML's `ggml_gallocr_node_needs_realloc`,
    /// which also checks that the compute buffer for the place exists and is large enough).
    fn fits(&self, t: &Tensor, p: Option<&Placement>) -> bool {
        if t.view_src().is_some() || t.is_allocated() {
            return true;
        }
        let Some(p) = p else { return false };
        let slot = self.slot_of[p.buffer_id];
        self.bufts[p.buffer_id].get_alloc_size(t) <= p.size_max
            && self.buffers[slot]
                .as_ref()
                .is_some_and(|vb| p.addr.offset + p.size_max <= vb.chunk_size(p.addr.chunk))
    }

    /// Whether the stored plan cannot place this graph (GGML's `ggml_gallocr_needs_realloc`;
    /// leafs are checked too).
    fn needs_replan(&self, nodes: &[Tensor], leafs: &[Tensor]) -> bool {
        let Some(plan) = &self.plan else { return true };
        if plan.nodes.len() != nodes.len() || plan.leafs.len() != leafs.len() {
            return true;
        }
        let node_ok = nodes.iter().zip(&plan.nodes).all(|(n, np)| {
            self.fits(n, np.dst.as_ref())
                && n.srcs()
                    .enumerate()
                    .all(|(j, s)| self.fits(s, np.srcs.get(j).and_then(Option::as_ref)))
        });
        let leaf_ok = leafs
            .iter()
            .zip(&plan.leafs)
            .all(|(l, p)| self.fits(l, p.as_ref()));
        !(node_ok && leaf_ok)
    }

    /// Places the graph's tensors as the plan says; on error unplaces what it placed.
    fn place(&self, nodes: &[Tensor], leafs: &[Tensor]) -> Result<()> {
        for vb in self.buffers.iter().flatten() {
            vb.reset()?;
        }
        let Some(plan) = &self.plan else {
            return Err(Error::invalid(
                "gallocr_alloc_graph: no plan; call reserve first",
            ));
        };
        let mut placed = Vec::new();
        let result = (|| {
            for (leaf, p) in leafs.iter().zip(&plan.leafs) {
                self.init_tensor(leaf, p.as_ref(), &mut placed)?;
            }
            for (node, np) in nodes.iter().zip(&plan.nodes) {
                for (j, src) in node.srcs().enumerate() {
                    let p = np.srcs.get(j).and_then(Option::as_ref);
                    self.init_tensor(src, p, &mut placed)?;
                }
                self.init_tensor(node, np.dst.as_ref(), &mut placed)?;
            }
            let all = leafs
                .iter()
                .chain(nodes)
                .chain(nodes.iter().flat_map(|n| n.srcs()));
            for t in all {
                if !t.is_allocated() {
                    return Err(Error::invalid(format!(
                        "gallocr_alloc_graph: tensor {:?} has no memory and the plan has no \
                         place for it{}",
                        t.name(),
                        if t.view_src().is_some() {
                            " (a view whose source has no memory and is not in the graph)"
                        } else {
                            ""
                        }
                    )));
                }
            }
            Ok(())
        })();
        if result.is_err() {
            for t in &placed {
                *t.binding_slot() = None;
            }
        }
        result
    }

    /// Gives one tensor its memory (GGML's `ggml_gallocr_init_tensor`): a view whose source has
    /// memory is initialised; an unplaced tensor goes to its planned place; a tensor with
    /// memory is left alone. Tensors this places are added to `placed`.
    fn init_tensor(
        &self,
        t: &Tensor,
        p: Option<&Placement>,
        placed: &mut Vec<Tensor>,
    ) -> Result<()> {
        if t.view_src().is_some() {
            if t.is_allocated() {
                super::view_init(t)?;
            }
            return Ok(());
        }
        if t.is_allocated() {
            return Ok(());
        }
        let Some(p) = p else { return Ok(()) };
        let buffer = self.buffers[self.slot_of[p.buffer_id]]
            .as_ref()
            .and_then(|vb| vb.chunk(p.addr.chunk))
            .ok_or_else(|| {
                Error::invalid(format!(
                    "gallocr_alloc_graph: compute buffer {} chunk {} for tensor {:?} is not \
                     allocated",
                    p.buffer_id,
                    p.addr.chunk,
                    t.name()
                ))
            })?;
        super::tensor_alloc(buffer, t, p.addr.offset)?;
        placed.push(t.clone());
        Ok(())
    }
}
