//! What a queued computation knows about memory: every node and operand resolved, when the job
//! is queued, to a buffer and an offset ([`Resolved`]); the buffers it names are the ones the
//! job's reservation holds. When the job runs, the engine sees them as [`PlacedGraph`].

use std::sync::{Arc, OnceLock};

use crate::error::{Error, Result};
use crate::tensor::Tensor;

use super::buffer::{ImplPtr, Reservation};
use super::traits::{BufferImpl, Place};
use super::Buffer;

/// One tensor's bytes: the index of its buffer in the job's buffer list (and that buffer's id,
/// used while resolving), its offset and its size.
#[derive(Clone, Copy)]
struct Slot {
    buf: u32,
    buf_id: u64,
    offset: usize,
    size: usize,
}

/// Nodes resolved to their buffers at queue time. Resolving again reuses the storage, so a
/// plan computed again and again allocates nothing once its tensors stay where they are, and
/// neither does a stream's `graph_compute` of the same graph once [`Resolved::release`]d
/// storage is given new nodes ([`Resolved::reset`]).
pub(crate) struct Resolved {
    nodes: Vec<Tensor>,
    /// `first[i]`: the slot of node `i`; its operands' slots follow it.
    first: Vec<usize>,
    slots: Vec<Slot>,
    /// Every buffer a slot names, sorted by id (as a reservation takes them).
    buffers: Arc<[Buffer]>,
    /// The buffers met while resolving (reused storage).
    scratch: Vec<Buffer>,
    /// The implementations of `buffers`, taken under the job's reservation ([`Resolved::capture`]).
    imps: Vec<ImplPtr>,
}

impl Resolved {
    /// Resolves `nodes` and their operands through `place` (a tensor's buffer and offset).
    /// `Err` naming `what` when a tensor has no place, lies in a multi-buffer, or does not fit
    /// in its buffer.
    pub(crate) fn new(
        nodes: &[Tensor],
        what: &str,
        place: impl FnMut(&Tensor) -> Result<(Buffer, usize)>,
    ) -> Result<Resolved> {
        let mut r = Resolved::empty();
        r.nodes.extend_from_slice(nodes);
        r.resolve(what, place)?;
        Ok(r)
    }

    /// Storage with no nodes.
    pub(crate) fn empty() -> Resolved {
        Resolved {
            nodes: Vec::new(),
            first: Vec::new(),
            slots: Vec::new(),
            buffers: Arc::from([]),
            scratch: Vec::new(),
            imps: Vec::new(),
        }
    }

    /// Resolves `nodes` through their own bindings.
    pub(crate) fn bound(nodes: &[Tensor], what: &str) -> Result<Resolved> {
        Resolved::new(nodes, what, |t| binding(t, what))
    }

    /// Resolves `nodes` through their bindings in this storage (allocating nothing once it has
    /// held as many nodes, operands and buffers, and the buffers are the ones it holds).
    pub(crate) fn reset(&mut self, nodes: &[Tensor], what: &str) -> Result<()> {
        self.nodes.clear();
        self.nodes.extend_from_slice(nodes);
        self.rebind(what)
    }

    /// Drops the nodes and the buffers' implementations, keeping the storage, and lets go of
    /// the buffers ([`Resolved::park`]).
    pub(crate) fn release(&mut self) {
        self.nodes.clear();
        self.scratch.clear();
        self.imps.clear();
        self.park();
    }

    /// Lets go of the buffers in the list once no reservation shares it: each is replaced by
    /// an empty placeholder, so the list keeps no memory alive while its storage stays for
    /// the next resolution over as many buffers. While a reservation still shares the list
    /// this does nothing (the stream parks it again when it gives the reservation back).
    pub(crate) fn park(&mut self) {
        match (Arc::get_mut(&mut self.buffers), placeholder()) {
            (Some(list), Some(p)) => list.fill(p.clone()),
            (Some(_), None) => self.buffers = Arc::from([]),
            (None, _) => {}
        }
    }

    /// Resolves the same nodes again through their bindings (they may have moved).
    pub(crate) fn rebind(&mut self, what: &str) -> Result<()> {
        self.resolve(what, |t| binding(t, what))
    }

    fn resolve(
        &mut self,
        what: &str,
        mut place: impl FnMut(&Tensor) -> Result<(Buffer, usize)>,
    ) -> Result<()> {
        self.first.clear();
        self.slots.clear();
        self.scratch.clear();
        self.imps.clear();
        for n in self.nodes.iter() {
            self.first.push(self.slots.len());
            for t in std::iter::once(n).chain(n.srcs()) {
                let (buffer, offset) = place(t)?;
                let size = t.nbytes();
                if buffer.is_multi_buffer() {
                    return Err(Error::invalid(format!(
                        "{what}: tensor {:?} is placed in multi-buffer {}; tensors live in its \
                         parts",
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
                self.slots.push(Slot {
                    buf: 0,
                    buf_id: buffer.id(),
                    offset,
                    size,
                });
                if !self.scratch.contains(&buffer) {
                    self.scratch.push(buffer);
                }
            }
        }
        self.scratch.sort_by_key(Buffer::id);
        for s in &mut self.slots {
            let i = self.scratch.iter().position(|b| b.id() == s.buf_id);
            s.buf = i.unwrap_or(0) as u32; // every slot's buffer is in `scratch`
        }
        if *self.buffers != *self.scratch {
            // The list's storage is reused when nothing else shares it and it has the length.
            match Arc::get_mut(&mut self.buffers) {
                Some(list) if list.len() == self.scratch.len() => {
                    list.clone_from_slice(&self.scratch)
                }
                _ => self.buffers = self.scratch.as_slice().into(),
            }
        }
        Ok(())
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

    /// Takes the buffers' implementations under `reservation`, which must hold exactly
    /// [`Resolved::buffers`] (it was made from them).
    pub(crate) fn capture(&mut self, reservation: &Reservation, what: &str) -> Result<()> {
        if !Arc::ptr_eq(reservation.buffers(), &self.buffers) {
            return Err(Error::invalid(format!(
                "{what}: the reservation is not for this job's buffers"
            )));
        }
        self.imps.clear();
        for i in 0..self.buffers.len() {
            self.imps.push(reservation.impl_ptr(i, what)?);
        }
        Ok(())
    }

    /// Whether `reservation` holds exactly the buffers this job was resolved to and captured.
    pub(crate) fn is_covered_by(&self, reservation: &Reservation) -> bool {
        Arc::ptr_eq(reservation.buffers(), &self.buffers) && self.imps.len() == self.buffers.len()
    }

    /// The engine's view.
    ///
    /// # Safety
    /// The reservation the implementations were captured under ([`Resolved::capture`]) must
    /// be alive and running for as long as the view is used.
    pub(crate) unsafe fn view(&self) -> PlacedGraph<'_> {
        PlacedGraph {
            nodes: &self.nodes,
            first: &self.first,
            slots: &self.slots,
            imps: &self.imps,
        }
    }
}

/// A buffer of no memory, put in place of a parked list's buffers (made once; `None` if the
/// host allocator refused even that).
fn placeholder() -> Option<&'static Buffer> {
    static EMPTY: OnceLock<Option<Buffer>> = OnceLock::new();
    EMPTY
        .get_or_init(|| super::host_buffer_type().alloc_buffer(0).ok())
        .as_ref()
}

fn binding(t: &Tensor, what: &str) -> Result<(Buffer, usize)> {
    t.require_binding(what).map(|b| (b.buffer, b.offset))
}

/// Runs `f` on `nodes` placed at their bindings, with their buffers reserved as a job would
/// have them (for unit tests of engines).
#[cfg(test)]
pub(crate) fn with_placed<R>(nodes: Vec<Tensor>, f: impl FnOnce(&PlacedGraph<'_>) -> R) -> R {
    let mut r = Resolved::bound(&nodes, "test").expect("allocated nodes");
    let mut res = Reservation::new(r.buffers().clone(), "test").expect("live buffers");
    res.start(0);
    r.capture(&res, "test").expect("plain buffers");
    // SAFETY: `res` is alive and running until the end of this function.
    f(&unsafe { r.view() })
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
    /// Made only by [`Resolved::view`], under a running reservation that outlives `'a`.
    imps: &'a [ImplPtr],
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

    fn imp(&self, k: usize) -> &'a dyn BufferImpl {
        // SAFETY: the view was made under a running reservation that outlives `'a`.
        unsafe { self.imps[k].get() }
    }

    fn slot(&self, k: usize) -> Place<'a> {
        let s = self.slots[k];
        Place::new(self.imp(s.buf as usize), s.offset, s.size)
    }

    /// Where node `i`'s bytes are; `None` when `i` is out of range.
    pub fn place(&self, i: usize) -> Option<Place<'a>> {
        self.first.get(i).map(|&k| self.slot(k))
    }

    /// Where the operand in slot `j` of node `i` is; `None` when either is out of range or
    /// the slot is empty.
    pub fn src_place(&self, i: usize, j: usize) -> Option<Place<'a>> {
        let n = self.nodes.get(i)?;
        n.src(j)?;
        // Places are kept for the operands present, in slot order.
        let before = (0..j).filter(|&s| n.src(s).is_some()).count();
        Some(self.slot(self.first[i] + 1 + before))
    }

    /// Every buffer the job holds, each once.
    pub fn buffers(&self) -> impl Iterator<Item = &'a dyn BufferImpl> + '_ {
        (0..self.imps.len()).map(|k| self.imp(k))
    }
}
