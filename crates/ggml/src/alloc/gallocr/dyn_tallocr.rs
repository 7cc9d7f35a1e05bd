//! The dynamic allocator the graph allocator plans with (GGML's `ggml_dyn_tallocr`): it hands
//! out and takes back byte ranges of a *virtual* buffer, without touching memory.
//!
//! A virtual buffer is up to [`MAX_CHUNKS`] chunks, each becoming one real buffer once the plan
//! is done. Every chunk keeps its free ranges sorted by offset (at most [`MAX_FREE_BLOCKS`]),
//! with the last range running to the chunk's limit, and its high-water mark, which is the size
//! of the real buffer it will need.

use crate::context::pad;
use crate::error::{Error, Result};

/// The most chunks (real buffers) one virtual buffer is split into (`GGML_VBUFFER_MAX_CHUNKS`).
pub(crate) const MAX_CHUNKS: usize = 16;
/// The most free ranges one chunk keeps track of (`MAX_FREE_BLOCKS`).
pub(crate) const MAX_FREE_BLOCKS: usize = 256;
/// The planning limit of one chunk, and of the last chunk always: half the address space, so
/// sums of offsets and sizes never overflow.
pub(crate) const UNBOUNDED: usize = usize::MAX / 2;

/// A place in a virtual buffer: a chunk and a byte offset inside it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BufferAddress {
    pub(crate) chunk: usize,
    pub(crate) offset: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FreeBlock {
    offset: usize,
    size: usize,
}

#[derive(Debug)]
struct Chunk {
    /// Free ranges, sorted by offset; never two adjacent ones.
    free: Vec<FreeBlock>,
    /// The highest end of any range handed out: the bytes the chunk's buffer needs.
    max_size: usize,
}

impl Chunk {
    fn new(limit: usize) -> Chunk {
        Chunk {
            free: vec![FreeBlock {
                offset: 0,
                size: limit,
            }],
            max_size: 0,
        }
    }

    /// The smallest free range of at least `size` bytes other than the last one; among equal
    /// sizes the later one (GGML compares with `<=`).
    fn best_inner_fit(&self, size: usize) -> Option<usize> {
        let inner = &self.free[..self.free.len().saturating_sub(1)];
        let mut best: Option<(usize, usize)> = None;
        for (i, b) in inner.iter().enumerate() {
            if b.size >= size && best.is_none_or(|(_, s)| b.size <= s) {
                best = Some((i, b.size));
            }
        }
        best.map(|(i, _)| i)
    }

    /// How well the last free range suits `size` bytes: negative = bytes the chunk would have to
    /// grow by, otherwise bytes of the chunk's current extent left unused (GGML's reuse factor).
    fn reuse_factor(&self, size: usize) -> Option<i128> {
        let last = self.free.last()?;
        (last.size >= size).then(|| self.max_size as i128 - last.offset as i128 - size as i128)
    }

    /// Takes `size` bytes from the front of free range `i`.
    fn take(&mut self, i: usize, size: usize) -> usize {
        let block = &mut self.free[i];
        let offset = block.offset;
        block.offset += size;
        block.size -= size;
        if block.size == 0 {
            self.free.remove(i);
        }
        self.max_size = self.max_size.max(offset + size);
        offset
    }

    /// Returns `size` bytes at `offset`, merging with neighbouring free ranges.
    fn give_back(&mut self, offset: usize, size: usize) -> Result<()> {
        // The first range that starts after the returned one.
        let next = self.free.partition_point(|b| b.offset <= offset);
        let joins_prev = next > 0 && {
            let p = self.free[next - 1];
            p.offset + p.size == offset
        };
        let joins_next = next < self.free.len() && offset + size == self.free[next].offset;
        match (joins_prev, joins_next) {
            (true, true) => {
                let n = self.free.remove(next);
                self.free[next - 1].size += size + n.size;
            }
            (true, false) => self.free[next - 1].size += size,
            (false, true) => {
                let n = &mut self.free[next];
                n.offset = offset;
                n.size += size;
            }
            (false, false) => {
                if self.free.len() >= MAX_FREE_BLOCKS {
                    return Err(Error::AllocFailed(format!(
                        "graph allocator: chunk has {MAX_FREE_BLOCKS} separate free ranges \
                         already; cannot return {size} bytes at offset {offset} (the graph \
                         fragments memory too much)"
                    )));
                }
                self.free.insert(next, FreeBlock { offset, size });
            }
        }
        Ok(())
    }
}

/// Plans byte ranges in a virtual buffer of chunks (see the module documentation).
#[derive(Debug)]
pub(crate) struct DynTallocr {
    alignment: usize,
    max_chunk_size: usize,
    chunks: Vec<Chunk>,
}

impl DynTallocr {
    /// An empty allocator whose ranges are multiples of `alignment` (a power of two) and whose
    /// chunks hold up to `max_buffer_size` bytes unless a single request needs more.
    pub(crate) fn new(alignment: usize, max_buffer_size: usize) -> DynTallocr {
        DynTallocr {
            alignment,
            max_chunk_size: max_buffer_size.min(UNBOUNDED),
            chunks: Vec::new(),
        }
    }

    /// Forgets every range handed out and every chunk.
    pub(crate) fn reset(&mut self) {
        self.chunks.clear();
    }

    /// Number of chunks the plan uses so far.
    pub(crate) fn n_chunks(&self) -> usize {
        self.chunks.len()
    }

    /// Bytes chunk `c` needs (0 for a chunk the plan does not use).
    pub(crate) fn chunk_size(&self, c: usize) -> usize {
        self.chunks.get(c).map_or(0, |ch| ch.max_size)
    }

    /// Bytes all chunks need together.
    pub(crate) fn total_size(&self) -> usize {
        self.chunks.iter().map(|c| c.max_size).sum()
    }

    /// The bytes a request of `size` takes: rounded up to the alignment.
    pub(crate) fn aligned(&self, size: usize) -> usize {
        pad(size, self.alignment)
    }

    /// Hands out `size` bytes (rounded up to the alignment): the best-fitting free range inside
    /// a chunk; else the end of the chunk whose extent suits it best (no growth and least waste
    /// first, then least growth); else a new chunk.
    pub(crate) fn alloc(&mut self, size: usize) -> Result<BufferAddress> {
        if size > UNBOUNDED {
            return Err(Error::AllocFailed(format!(
                "graph allocator: a tensor of {size} bytes is larger than any buffer can be"
            )));
        }
        let size = self.aligned(size);

        // Best fit among the inner free ranges. As in GGML the best size is tracked per chunk,
        // so a later chunk with any fitting range wins over an earlier one.
        let mut choice = None;
        for (c, chunk) in self.chunks.iter().enumerate() {
            if let Some(i) = chunk.best_inner_fit(size) {
                choice = Some((c, i));
            }
        }

        // Else the end of a chunk.
        if choice.is_none() {
            let mut best: Option<(usize, i128)> = None;
            for (c, chunk) in self.chunks.iter().enumerate() {
                if let Some(r) = chunk.reuse_factor(size) {
                    if best.is_none_or(|(_, b)| suits_better(r, b)) {
                        best = Some((c, r));
                    }
                }
            }
            choice = best.map(|(c, _)| (c, self.chunks[c].free.len() - 1));
        }

        // Else a new chunk.
        let (c, i) = match choice {
            Some(ci) => ci,
            None => (self.new_chunk(size)?, 0),
        };
        let offset = self.chunks[c].take(i, size);
        Ok(BufferAddress { chunk: c, offset })
    }

    /// Returns `size` bytes (rounded up to the alignment) at `addr`.
    pub(crate) fn free(&mut self, addr: BufferAddress, size: usize) -> Result<()> {
        let size = self.aligned(size);
        let chunk = self.chunks.get_mut(addr.chunk).ok_or_else(|| {
            Error::invalid(format!(
                "graph allocator: chunk {} does not exist (the plan has fewer)",
                addr.chunk
            ))
        })?;
        chunk.give_back(addr.offset, size)
    }

    fn new_chunk(&mut self, min_size: usize) -> Result<usize> {
        if self.chunks.len() >= MAX_CHUNKS {
            return Err(Error::AllocFailed(format!(
                "graph allocator: all {MAX_CHUNKS} chunks are in use and none has room for \
                 {min_size} bytes"
            )));
        }
        // A chunk holds up to the buffer type's maximum, more for a single larger tensor, and
        // the last possible chunk is unbounded: the backend then allocates it or says no.
        let limit = if self.chunks.len() == MAX_CHUNKS - 1 {
            UNBOUNDED
        } else {
            min_size.max(self.max_chunk_size)
        };
        self.chunks.push(Chunk::new(limit));
        Ok(self.chunks.len() - 1)
    }
}

/// Whether using a chunk's end with reuse factor `r` beats one with factor `best`: any fit that
/// needs no growth beats one that does; among those that need none, less waste wins; among those
/// that grow, less growth wins. Ties keep the earlier chunk.
fn suits_better(r: i128, best: i128) -> bool {
    match (r >= 0, best >= 0) {
        (true, true) => r < best,
        (true, false) => true,
        (false, true) => false,
        (false, false) => r > best,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(chunk: usize, offset: usize) -> BufferAddress {
        BufferAddress { chunk, offset }
    }

    #[test]
    fn rounds_to_alignment_and_tracks_high_water() {
        let mut a = DynTallocr::new(32, usize::MAX);
        assert_eq!(a.alloc(10).unwrap(), at(0, 0));
        assert_eq!(a.alloc(33).unwrap(), at(0, 32));
        assert_eq!(a.chunk_size(0), 96);
        assert_eq!(a.total_size(), 96);
        assert_eq!(a.n_chunks(), 1);
    }

    #[test]
    fn best_fit_prefers_smallest_inner_block() {
        let mut a = DynTallocr::new(1, usize::MAX);
        let x = a.alloc(100).unwrap(); // 0..100
        let _s1 = a.alloc(1).unwrap(); // 100..101
        let y = a.alloc(50).unwrap(); // 101..151
        let _s2 = a.alloc(1).unwrap(); // 151..152
        a.free(x, 100).unwrap();
        a.free(y, 50).unwrap();
        // Free: [0,100) [101,151) [152, ..). A 40-byte request takes the 50-byte hole.
        assert_eq!(a.alloc(40).unwrap(), at(0, 101));
        // A 60-byte request takes the 100-byte hole; a 200-byte one goes to the end.
        assert_eq!(a.alloc(60).unwrap(), at(0, 0));
        assert_eq!(a.alloc(200).unwrap(), at(0, 152));
        assert_eq!(a.chunk_size(0), 352);
    }

    #[test]
    fn freeing_merges_neighbours() {
        let mut a = DynTallocr::new(1, usize::MAX);
        let p: Vec<_> = (0..4).map(|_| a.alloc(10).unwrap()).collect();
        a.free(p[0], 10).unwrap();
        a.free(p[2], 10).unwrap();
        assert_eq!(a.chunks[0].free.len(), 3);
        a.free(p[1], 10).unwrap(); // joins [0,10) and [20,30)
        assert_eq!(
            a.chunks[0].free[0],
            FreeBlock {
                offset: 0,
                size: 30
            }
        );
        a.free(p[3], 10).unwrap(); // everything is one range again
        assert_eq!(a.chunks[0].free.len(), 1);
        assert_eq!(a.chunks[0].free[0].offset, 0);
        // The high-water mark stays.
        assert_eq!(a.chunk_size(0), 40);
    }

    #[test]
    fn too_many_free_blocks_is_an_error() {
        let mut a = DynTallocr::new(1, usize::MAX);
        let p: Vec<_> = (0..2 * MAX_FREE_BLOCKS + 2)
            .map(|_| a.alloc(1).unwrap())
            .collect();
        // Free every other range: each becomes a separate free block.
        let mut result = Ok(());
        for addr in p.iter().step_by(2) {
            result = a.free(*addr, 1);
            if result.is_err() {
                break;
            }
        }
        let err = result.unwrap_err();
        assert!(err.to_string().contains("free ranges"), "{err}");
        assert_eq!(a.chunks[0].free.len(), MAX_FREE_BLOCKS);
    }

    #[test]
    fn chunks_split_at_max_size() {
        let mut a = DynTallocr::new(16, 100);
        assert_eq!(a.alloc(60).unwrap(), at(0, 0)); // 64 bytes
        assert_eq!(a.alloc(30).unwrap(), at(0, 64)); // 32 bytes: 96 of 100
        assert_eq!(a.alloc(30).unwrap(), at(1, 0)); // no room: a new chunk
        assert_eq!(a.alloc(500).unwrap(), at(2, 0)); // larger than the maximum: own chunk
        assert_eq!(a.alloc(4).unwrap(), at(1, 32));
        assert_eq!(
            (0..3).map(|c| a.chunk_size(c)).collect::<Vec<_>>(),
            vec![96, 48, 512]
        );
    }

    #[test]
    fn last_block_choice_prefers_no_growth() {
        let mut a = DynTallocr::new(1, 100);
        let x = a.alloc(100).unwrap(); // chunk 0 full
        let _y = a.alloc(80).unwrap(); // chunk 1: 0..80
        a.free(x, 100).unwrap(); // chunk 0's end is free again: 100 bytes, no growth

        // 50 bytes: chunk 0's end needs no growth (reuse 50); chunk 1's needs 50 more.
        assert_eq!(a.alloc(50).unwrap(), at(0, 0));
        // 20 bytes: chunk 0 wastes 30 (reuse 30), chunk 1 grows by 20: chunk 0 wins.
        assert_eq!(a.alloc(20).unwrap(), at(0, 50));
        // 20 more: chunk 0 (reuse 10) fits exactly better.
        assert_eq!(a.alloc(20).unwrap(), at(0, 70));
        // 15 bytes: chunk 0 has 10 left, chunk 1 grows.
        assert_eq!(a.alloc(15).unwrap(), at(1, 80));
        assert_eq!(a.chunk_size(1), 95);
    }

    #[test]
    fn the_last_chunk_is_unbounded_and_then_no_more() {
        let mut a = DynTallocr::new(1, 10);
        for c in 0..MAX_CHUNKS - 1 {
            assert_eq!(a.alloc(10).unwrap(), at(c, 0));
        }
        assert_eq!(a.alloc(10).unwrap(), at(MAX_CHUNKS - 1, 0));
        assert_eq!(a.alloc(1000).unwrap(), at(MAX_CHUNKS - 1, 10));
        assert!(a.alloc(UNBOUNDED).is_err());
        assert!(a.alloc(usize::MAX).is_err());
    }

    #[test]
    fn reset_forgets_everything() {
        let mut a = DynTallocr::new(8, usize::MAX);
        a.alloc(100).unwrap();
        a.reset();
        assert_eq!(a.n_chunks(), 0);
        assert_eq!(a.total_size(), 0);
        assert_eq!(a.alloc(1).unwrap(), at(0, 0));
        assert!(a.free(at(5, 0), 1).is_err());
    }
}
