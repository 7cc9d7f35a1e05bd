//! The planning walk of the graph allocator (GGML's `ggml_gallocr_alloc_graph_impl`): decides
//! where every tensor the allocator owns lives, reusing the memory of tensors nobody needs any
//! more, without touching a tensor.
//!
//! Rules, as GGML's:
//! - Tensors that already have memory (weights, a cache, a context that holds its data) are left
//!   alone; views never get memory of their own (they live in their source's).
//! - Leafs are placed first, then every tensor flagged INPUT (nodes, and operands of nodes), so
//!   inputs get ranges of their own before anything is reused.
//! - Then, node by node in execution order: the operands (only unplaced leafs still need a
//!   place), the node, and then each operand loses one use. An operand with no uses and no views
//!   left gives its memory back; a view with none left counts down its source's views instead,
//!   and the source gives its memory back when it has no uses and no views.
//! - A node whose op may be computed in place ([`Op::can_inplace`]) takes over the memory of the
//!   first operand that this allocator placed (so never a view), that is not an OUTPUT, that
//!   has the node's exact layout, and whose only use is this node (and no views).
//! - OUTPUT tensors never give their memory back.
//! - The COMPUTE flag is not consulted: a node an executor will skip still gets memory and still
//!   keeps its operands alive, as in GGML.

use std::collections::HashMap;

use crate::backend::BufferType;
use crate::error::{Error, Result};
use crate::ops::Op;
use crate::tensor::{flags, Tensor};

use super::dyn_tallocr::{BufferAddress, DynTallocr};

/// Where the plan puts one tensor (GGML's `tensor_alloc`): a buffer id, an address in its
/// virtual buffer, and the bytes the tensor needed when planned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Placement {
    pub(crate) buffer_id: usize,
    pub(crate) addr: BufferAddress,
    pub(crate) size_max: usize,
}

/// What the walk knows about one tensor (GGML's `hash_node`). Counts may go below zero in the
/// corner cases where GGML's do (a view that is not a node releasing its source).
#[derive(Clone, Copy, Debug, Default)]
struct Usage {
    /// Uses as an operand still to come.
    n_children: i32,
    /// Views (nodes other than NONE) of this tensor still alive.
    n_views: i32,
    buffer_id: usize,
    addr: Option<BufferAddress>,
    /// Whether this allocator placed the tensor and its memory is still its own (not handed
    /// over to an in-place consumer, not given back).
    own: bool,
}

/// The buffer types of the allocator and, per buffer id, the dynamic allocator it plans with.
pub(crate) struct Buffers<'a> {
    pub(crate) bufts: &'a [BufferType],
    pub(crate) slot_of: &'a [usize],
    pub(crate) tallocs: &'a mut [DynTallocr],
}

impl Buffers<'_> {
    fn alloc_size(&self, buffer_id: usize, t: &Tensor) -> usize {
        self.bufts[buffer_id].get_alloc_size(t)
    }

    fn talloc(&mut self, buffer_id: usize) -> &mut DynTallocr {
        &mut self.tallocs[self.slot_of[buffer_id]]
    }
}

/// One planning walk over a graph.
pub(crate) struct Planner<'a> {
    buffers: Buffers<'a>,
    table: HashMap<u64, Usage>,
}

impl<'a> Planner<'a> {
    /// A walk with empty bookkeeping; the allocators must have been reset.
    pub(crate) fn new(buffers: Buffers<'a>) -> Planner<'a> {
        Planner {
            buffers,
            table: HashMap::new(),
        }
    }

    fn usage(&mut self, t: &Tensor) -> &mut Usage {
        self.table.entry(t.id()).or_default()
    }

    fn is_own(&self, t: &Tensor) -> bool {
        self.table.get(&t.id()).is_some_and(|u| u.own)
    }

    /// Plans the whole graph. `node_ids[i]` / `leaf_ids[i]` are the buffer ids of node / leaf
    /// `i` (already checked to be in range and of the right length).
    pub(crate) fn run(
        &mut self,
        nodes: &[Tensor],
        leafs: &[Tensor],
        node_ids: &[usize],
        leaf_ids: &[usize],
    ) -> Result<()> {
        // Leafs first: the application may use them outside the graph too.
        for (leaf, &id) in leafs.iter().zip(leaf_ids) {
            self.allocate(leaf, id)?;
        }

        // Count uses and views; place inputs before anything can be reused.
        for (node, &id) in nodes.iter().zip(node_ids) {
            // NONE nodes are not counted as views: the scheduler adds such nodes only to keep
            // their operands alive.
            if let Some(src) = node.view_src() {
                if node.op() != Op::None {
                    self.usage(src).n_views += 1;
                }
            }
            if node.flags() & flags::INPUT != 0 {
                self.allocate(node, id)?;
            }
            for src in node.srcs() {
                self.usage(src).n_children += 1;
                if src.flags() & flags::INPUT != 0 {
                    self.allocate(src, id)?;
                }
            }
        }

        for (node, &id) in nodes.iter().zip(node_ids) {
            for src in node.srcs() {
                self.allocate(src, id)?;
            }
            self.allocate(node, id)?;
            for src in node.srcs() {
                self.drop_use(src)?;
            }
        }
        Ok(())
    }

    /// Where the plan put `t`: `None` for views and tensors that have memory already.
    pub(crate) fn placement(&self, t: &Tensor) -> Option<Placement> {
        if t.view_src().is_some() || t.is_allocated() {
            return None;
        }
        let u = self.table.get(&t.id())?;
        Some(Placement {
            buffer_id: u.buffer_id,
            addr: u.addr?,
            size_max: self.buffers.alloc_size(u.buffer_id, t),
        })
    }

    /// Gives `t` a place in buffer `buffer_id` unless it has memory already, is a view, or was
    /// placed before (GGML's `ggml_gallocr_allocate_node`).
    fn allocate(&mut self, t: &Tensor, buffer_id: usize) -> Result<()> {
        if t.view_src().is_some() || t.is_allocated() || self.is_own(t) {
            return Ok(());
        }
        self.usage(t).own = true;
        if t.op().can_inplace() && self.take_over_operand(t)? {
            return Ok(());
        }
        let size = self.buffers.alloc_size(buffer_id, t);
        let addr = self
            .buffers
            .talloc(buffer_id)
            .alloc(size)
            .map_err(|e| Error::AllocFailed(format!("placing tensor {:?}: {e}", t.name())))?;
        let u = self.usage(t);
        u.buffer_id = buffer_id;
        u.addr = Some(addr);
        Ok(())
    }

    /// Gives `node` the memory of the first operand it may be computed in; `false` if none.
    ///
    /// Only memory this allocator placed and still owns qualifies, so never a view's (views own
    /// nothing): GGML's rule for a view operand (take over its whole source when the view is the
    /// source's last user) and its check for a view of an OUTPUT can never apply, and are left
    /// out.
    fn take_over_operand(&mut self, node: &Tensor) -> Result<bool> {
        for parent in node.srcs() {
            if !self.is_own(parent)
                || parent.flags() & flags::OUTPUT != 0
                || !node.are_same_layout(parent)
            {
                continue;
            }
            let p = *self.usage(parent);
            if p.n_children != 1 || p.n_views != 0 {
                continue;
            }
            let u = self.usage(node);
            u.buffer_id = p.buffer_id;
            u.addr = p.addr;
            self.usage(parent).own = false;
            self.free_extra_space(node, parent)?;
            return Ok(true);
        }
        Ok(false)
    }

    /// After `node` took over `parent`'s memory, gives back what `parent` had beyond `node`'s
    /// needs (keeping the alignment).
    fn free_extra_space(&mut self, node: &Tensor, parent: &Tensor) -> Result<()> {
        let p = *self.usage(parent);
        let addr = p.addr.ok_or_else(|| no_place(parent))?;
        let parent_bytes = self.buffers.alloc_size(p.buffer_id, parent);
        let node_bytes = self.buffers.alloc_size(p.buffer_id, node);
        let talloc = self.buffers.talloc(p.buffer_id);
        // Compared as the allocator counts them, so what is given back stays aligned.
        let parent_size = talloc.aligned(parent_bytes);
        let node_size = talloc.aligned(node_bytes);
        if parent_size < node_size {
            return Err(Error::invalid(format!(
                "graph allocator: tensor {:?} ({node_size} bytes) cannot be computed in the \
                 {parent_size} bytes of {:?}",
                node.name(),
                parent.name()
            )));
        }
        if parent_size > node_size {
            let tail = BufferAddress {
                chunk: addr.chunk,
                offset: addr.offset + node_size,
            };
            talloc.free(tail, parent_size - node_size)?;
        }
        Ok(())
    }

    /// One use of `parent` is done; frees what nothing needs any more.
    fn drop_use(&mut self, parent: &Tensor) -> Result<()> {
        let p = self.usage(parent);
        p.n_children -= 1;
        if p.n_children != 0 || p.n_views != 0 {
            return Ok(());
        }
        let p_own = p.own;
        match parent.view_src() {
            Some(src) => {
                let s = self.usage(src);
                s.n_views -= 1;
                if s.n_views == 0 && s.n_children == 0 && s.own {
                    self.free(src)?;
                }
            }
            None if p_own => self.free(parent)?,
            None => {}
        }
        Ok(())
    }

    /// Gives `t`'s memory back, unless it is an output (GGML's `ggml_gallocr_free_node`).
    fn free(&mut self, t: &Tensor) -> Result<()> {
        if t.flags() & flags::OUTPUT != 0 {
            return Ok(());
        }
        let u = *self.usage(t);
        let addr = u.addr.ok_or_else(|| no_place(t))?;
        let size = self.buffers.alloc_size(u.buffer_id, t);
        self.buffers.talloc(u.buffer_id).free(addr, size)?;
        self.usage(t).own = false;
        Ok(())
    }
}

fn no_place(t: &Tensor) -> Error {
    Error::invalid(format!(
        "graph allocator: tensor {:?} is marked as placed but has no address",
        t.name()
    ))
}
