//! What a queued computation knows about memory: every node and operand resolved, when the job
//! is queued, to a buffer and an offset ([`Resolved`]); the buffers it names are the ones the
//! job's reservation holds. When the job runs, the engine sees them as [`PlacedGraph`].

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::tensor::Tensor;

use super::traits::{BufferImpl, Place};
use super::Buffer;

/// Runs `f` on `nodes` placed at their bindings, with their buffers' implementations locked as
/// a job would have them (for unit tests of engines).
#[cfg(test)]
pub(crate) fn with_placed<R>(nodes: Vec<Tensor>, f: impl FnOnce(&PlacedGraph<'_>) -> R) -> R {
    let r = Resolved::bound(nodes, "test").expect("allocated nodes");
    let guards: Vec<_> = r.buffers().iter().map(Buffer::impl_guard).collect();
    let imps = super::buffer::impls(&guards, "test").expect("live buffers");
    f(&r.view(&imps))
}

/// One tensor's bytes: the index of its buffer in the job's buffer list, its offset, its size.
#[derive(Clone, Copy)]
struct Slot {
    buf: u32,
    offset: usize,
    size: usize,
}

/// Nodes resolved to their buffers at queue time.
pub(crate) struct Resolved {
    nodes: Vec<Tensor>,
    /// `first[i]`: the slot of node `i`; its operands' slots follow it.
    first: Vec<usize>,
    slots: Vec<Slot>,
    /// Every buffer a slot names, sorted by id (as a reservation takes them).
    buffers: Arc<[Buffer]>,
}

impl Resolved {
    /// Resolves `nodes` and their operands through `place` (a tensor's buffer and offset).
    /// `Err` naming `what` when a tensor has no place, lies in a multi-buffer, or does not fit
    /// in its buffer.
    pub(crate) fn new(
        nodes: Vec<Tensor>,
        what: &str,
        mut place: impl FnMut(&Tensor) -> Result<(Buffer, usize)>,
    ) -> Result<Resolved> {
        let mut buffers: Vec<Buffer> = Vec::new();
        let mut first = Vec::with_capacity(nodes.len());
        let mut slots = Vec::with_capacity(nodes.len() * 3);
        for n in &nodes {
            first.push(slots.len());
            for t in std::iter::once(n).chain(n.srcs()) {
                let (buffer, offset) = place(t)?;
                let size = t.nbytes();
                if buffer.is_multi_buffer() {
                    return Err(Error::invalid(format!(
                        "{what}: tensor {:?} is placed in multi-buffer {}; tensors live in its parts",
                        t.name(),
                        buffer.name()
                    )));
                }
                if offset
                    .checked_add(size)
                    .is_none_or(|end| end > buffer.get_size())
                {
                    return Err(Error::invalid(format!(
                        "{what}: tensor {:?} ({size} bytes at offset {offset}) does not fit in \
                         buffer {} of {} bytes",
                        t.name(),
                        buffer.name(),
                        buffer.get_size()
                    )));
                }
                let buf = match buffers.iter().position(|b| *b == buffer) {
                    Some(i) => i,
                    None => {
                        buffers.push(buffer);
                        buffers.len() - 1
                    }
                };
                slots.push(Slot {
                    buf: buf as u32,
                    offset,
                    size,
                });
            }
        }
        // Sort the buffers by id and renumber the slots to match.
        let mut order: Vec<usize> = (0..buffers.len()).collect();
        order.sort_by_key(|&i| buffers[i].id());
        let mut new_index = vec![0u32; buffers.len()];
        for (new, &old) in order.iter().enumerate() {
            new_index[old] = new as u32;
        }
        for s in &mut slots {
            s.buf = new_index[s.buf as usize];
        }
        let buffers: Arc<[Buffer]> = order.iter().map(|&i| buffers[i].clone()).collect();
        Ok(Resolved {
            nodes,
            first,
            slots,
            buffers,
        })
    }

    /// Resolves `nodes` through their own bindings.
    pub(crate) fn bound(nodes: Vec<Tensor>, what: &str) -> Result<Resolved> {
        Resolved::new(nodes, what, |t| {
            t.require_binding(what).map(|b| (b.buffer, b.offset))
        })
    }

    /// The buffers the job touches, sorted by id.
    pub(crate) fn buffers(&self) -> &Arc<[Buffer]> {
        &self.buffers
    }

    /// The nodes.
    pub(crate) fn nodes(&self) -> &[Tensor] {
        &self.nodes
    }

    /// The buffer node `i` is placed in.
    pub(crate) fn node_buffer(&self, i: usize) -> &Buffer {
        &self.buffers[self.slots[self.first[i]].buf as usize]
    }

    /// The engine's view, with `imps` the implementations of [`Resolved::buffers`] in order.
    pub(crate) fn view<'a>(&'a self, imps: &'a [&'a dyn BufferImpl]) -> PlacedGraph<'a> {
        PlacedGraph {
            nodes: &self.nodes,
            first: &self.first,
            slots: &self.slots,
            imps,
        }
    }
}

/// A graph as an engine computes it ([`super::BackendImpl::graph_compute`]): its nodes in
/// order, and for each node and each of its operands the [`Place`] of its bytes — the buffer's
/// implementation and the offset in it, resolved when the job was queued. Every buffer named
/// here is reserved for the job while it runs.
#[derive(Clone, Copy)]
pub struct PlacedGraph<'a> {
    nodes: &'a [Tensor],
    first: &'a [usize],
    slots: &'a [Slot],
    imps: &'a [&'a dyn BufferImpl],
}

impl std::fmt::Debug for PlacedGraph<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlacedGraph")
            .field("n_nodes", &self.nodes.len())
            .field("n_buffers", &self.imps.len())
            .finish()
    }
}

impl<'a> PlacedGraph<'a> {
    /// The nodes, in the order they are to be computed.
    pub fn nodes(&self) -> &'a [Tensor] {
        self.nodes
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether there are no nodes.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    fn slot(&self, k: usize) -> Place<'a> {
        let s = self.slots[k];
        Place::new(self.imps[s.buf as usize], s.offset, s.size)
    }

    /// Where node `i`'s bytes are; `None` when `i` is out of range.
    pub fn place(&self, i: usize) -> Option<Place<'a>> {
        self.first.get(i).map(|&k| self.slot(k))
    }

    /// Where operand `j` of node `i` is; `None` when either is out of range.
    pub fn src_place(&self, i: usize, j: usize) -> Option<Place<'a>> {
        let n = self.nodes.get(i)?;
        (j < n.srcs().len()).then(|| self.slot(self.first[i] + 1 + j))
    }

    /// Every buffer the job holds (each once).
    pub fn buffers(&self) -> &'a [&'a dyn BufferImpl] {
        self.imps
    }
}
