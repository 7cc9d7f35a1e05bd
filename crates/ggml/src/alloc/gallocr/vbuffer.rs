//! Virtual buffers: the real buffers (one per chunk) behind one buffer id of the graph
//! allocator (GGML's `vbuffer`).

use crate::backend::{Buffer, BufferType, BufferUsage};
use crate::error::Result;

use super::dyn_tallocr::DynTallocr;

/// The chunk buffers of one planned virtual buffer, all tagged [`BufferUsage::Compute`].
pub(crate) struct VBuffer {
    chunks: Vec<Buffer>,
}

impl VBuffer {
    /// Allocates one buffer of `buft` per chunk of the plan in `talloc`, each as large as the
    /// chunk's high-water mark. A plan with no chunk gives a virtual buffer with no buffer (GGML
    /// still makes one, so that views can be initialised). On failure the buffers made so far
    /// are freed.
    pub(crate) fn alloc(buft: &BufferType, talloc: &DynTallocr) -> Result<VBuffer> {
        let mut chunks = Vec::with_capacity(talloc.n_chunks());
        for c in 0..talloc.n_chunks() {
            match buft.alloc_buffer(talloc.chunk_size(c)) {
                Ok(b) => {
                    b.set_usage(BufferUsage::Compute);
                    chunks.push(b);
                }
                Err(e) => {
                    chunks.iter().for_each(Buffer::release);
                    return Err(e);
                }
            }
        }
        Ok(VBuffer { chunks })
    }

    /// The buffer of chunk `c`, if there is one.
    pub(crate) fn chunk(&self, c: usize) -> Option<&Buffer> {
        self.chunks.get(c)
    }

    /// Bytes of chunk `c` (0 if there is no such chunk).
    pub(crate) fn chunk_size(&self, c: usize) -> usize {
        self.chunks.get(c).map_or(0, Buffer::get_size)
    }

    /// Bytes of all chunks together.
    pub(crate) fn size(&self) -> usize {
        self.chunks.iter().map(Buffer::get_size).sum()
    }

    /// Whether every chunk of the plan in `talloc` fits in this virtual buffer.
    pub(crate) fn holds(&self, talloc: &DynTallocr) -> bool {
        (0..talloc.n_chunks()).all(|c| talloc.chunk_size(c) <= self.chunk_size(c))
    }

    /// Resets every chunk buffer (`ggml_backend_buffer_reset`) before tensors are placed anew.
    pub(crate) fn reset(&self) -> Result<()> {
        self.chunks.iter().try_for_each(Buffer::reset)
    }

    /// Frees every chunk buffer now, after queued work on it.
    pub(crate) fn release(&self) {
        self.chunks.iter().for_each(Buffer::release);
    }
}
