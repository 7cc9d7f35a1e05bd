//! Buffers in device memory: wgpu storage buffers, reached from the host through the queue
//! (writes staged by `Queue::write_buffer`, reads copied into a mapped staging buffer).

use std::ptr::NonNull;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use ggml::backend::{BufferImpl, BufferTypeImpl};
use ggml::{Error, Result};

use crate::{lock, Gpu};

/// Alignment of tensors in the device's buffers.
pub const ALIGNMENT: usize = 32;

/// wgpu copies and writes whole 4-byte words.
const WORD: usize = 4;

/// Bytes per staged write of a fill (bounds the host memory a large fill takes).
const FILL_CHUNK: usize = 4 << 20;

/// The largest buffer: the smaller of the adapter's buffer and storage-binding limits (a kernel
/// binds whole buffers) and of the 32-bit byte addresses the kernels use, in whole words.
pub(crate) fn max_buffer_size(gpu: &Gpu) -> usize {
    let l = &gpu.limits;
    let m = (l.max_buffer_size)
        .min(l.max_storage_buffer_binding_size)
        .min(u64::from(u32::MAX));
    usize::try_from(m).unwrap_or(usize::MAX) & !(WORD - 1)
}

/// The buffer type of a device: storage buffers in its memory.
pub(crate) struct WgpuBufferType {
    gpu: Arc<Gpu>,
}

impl WgpuBufferType {
    pub(crate) fn new(gpu: Arc<Gpu>) -> WgpuBufferType {
        WgpuBufferType { gpu }
    }
}

impl BufferTypeImpl for WgpuBufferType {
    fn name(&self) -> String {
        self.gpu.name.clone()
    }
    fn alloc_buffer(&self, size: usize) -> Result<Box<dyn BufferImpl>> {
        let max = max_buffer_size(&self.gpu);
        let words = size.next_multiple_of(WORD);
        if words > max {
            return Err(Error::AllocFailed(format!(
                "{}: a buffer of {size} bytes is larger than the device's {max}",
                self.gpu.name
            )));
        }
        let scope = self
            .gpu
            .device
            .push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let buf = self.gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("ggml"),
            size: words as u64,
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        if let Some(e) = crate::block_on(scope.pop()) {
            return Err(Error::AllocFailed(format!(
                "{}: allocating {size} bytes: {e}",
                self.gpu.name
            )));
        }
        (self.gpu.allocated).fetch_add(words as u64, Ordering::Relaxed);
        Ok(Box::new(WgpuBuffer {
            gpu: self.gpu.clone(),
            buf,
            size,
        }))
    }
    fn alignment(&self) -> usize {
        ALIGNMENT
    }
    fn max_size(&self) -> usize {
        max_buffer_size(&self.gpu)
    }
}

/// A storage buffer of `size` bytes (the wgpu buffer is rounded up to whole words).
pub(crate) struct WgpuBuffer {
    pub(crate) gpu: Arc<Gpu>,
    pub(crate) buf: wgpu::Buffer,
    size: usize,
}

impl Drop for WgpuBuffer {
    fn drop(&mut self) {
        (self.gpu.allocated).fetch_sub(self.buf.size(), Ordering::Relaxed);
    }
}

impl WgpuBuffer {
    /// Whether `other` lives on the same device.
    pub(crate) fn same_gpu(&self, other: &WgpuBuffer) -> bool {
        self.gpu.id == other.gpu.id
    }
}

/// Whether `offset` and `len` are whole words (what wgpu's copies need).
pub(crate) fn word_aligned(offset: usize, len: usize) -> bool {
    offset.is_multiple_of(WORD) && len.is_multiple_of(WORD)
}

/// The outcome of a staging buffer's mapping, set by wgpu's callback.
type MapState = Arc<Mutex<Option<std::result::Result<(), wgpu::BufferAsyncError>>>>;

/// A read in flight: the words `[start, start + staging size)` of a buffer, copied into a
/// staging buffer whose mapping was requested.
pub(crate) struct StagedRead {
    staging: wgpu::Buffer,
    index: wgpu::SubmissionIndex,
    mapped: MapState,
    /// Bytes of the staging buffer before the first byte asked for.
    skip: usize,
}

/// Queues a copy of `len` bytes at `offset` of `buf` into a new staging buffer and asks for it
/// to be mapped; [`StagedRead::finish`] waits and copies the bytes out.
pub(crate) fn stage_read(gpu: &Gpu, buf: &wgpu::Buffer, offset: usize, len: usize) -> StagedRead {
    let start = offset - offset % WORD;
    let end = (offset + len).next_multiple_of(WORD);
    let size = (end - start) as u64;
    let staging = gpu.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("ggml staging read"),
        size,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut enc = gpu.device.create_command_encoder(&Default::default());
    enc.copy_buffer_to_buffer(buf, start as u64, &staging, 0, size);
    let index = gpu.queue.submit(std::iter::once(enc.finish()));
    let mapped: MapState = Arc::new(Mutex::new(None));
    let slot = mapped.clone();
    staging.map_async(wgpu::MapMode::Read, .., move |r| {
        *lock(&slot) = Some(r);
    });
    StagedRead {
        staging,
        index,
        mapped,
        skip: offset - start,
    }
}

impl StagedRead {
    /// Waits for the copy and the mapping, then copies the bytes asked for into `out`.
    pub(crate) fn finish(self, gpu: &Gpu, out: &mut [u8]) -> Result<()> {
        gpu.wait(Some(self.index.clone()), "read")?;
        // The mapping's callback runs in whichever thread's poll resolves it: when another
        // thread's poll took it, this thread's poll can return (the queue idle) before that
        // thread has run the callback, so poll again a bounded while (seen in CI, session 12).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while lock(&self.mapped).is_none() && std::time::Instant::now() < deadline {
            gpu.wait(None, "read")?;
            std::thread::yield_now();
        }
        let state = lock(&self.mapped).take();
        match state {
            Some(Ok(())) => {}
            Some(Err(e)) => {
                return Err(Error::Compute(format!("{}: mapping a read: {e}", gpu.name)));
            }
            None => {
                return Err(Error::Compute(format!(
                    "{}: a read's staging buffer was never mapped",
                    gpu.name
                )));
            }
        }
        {
            let view = self
                .staging
                .get_mapped_range(..)
                .map_err(|e| Error::Compute(format!("{}: reading a mapping: {e}", gpu.name)))?;
            out.copy_from_slice(&view[self.skip..self.skip + out.len()]);
        }
        self.staging.unmap();
        gpu.peek_error("read")
    }
}

/// Queues a write of `data` at `offset` of `buf`. Whole words are staged as they are; a write
/// that starts or ends inside a word first reads the words it shares with its neighbours
/// (blocking), so that their other bytes are written back unchanged.
pub(crate) fn write_bytes(gpu: &Gpu, buf: &wgpu::Buffer, offset: usize, data: &[u8]) -> Result<()> {
    if data.is_empty() {
        return Ok(());
    }
    if word_aligned(offset, data.len()) {
        gpu.queue.write_buffer(buf, offset as u64, data);
        return gpu.peek_error("write");
    }
    let start = offset - offset % WORD;
    let end = (offset + data.len()).next_multiple_of(WORD);
    let mut words = vec![0u8; end - start];
    stage_read(gpu, buf, start, WORD).finish(gpu, &mut words[..WORD])?;
    let tail = words.len() - WORD;
    stage_read(gpu, buf, end - WORD, WORD).finish(gpu, &mut words[tail..])?;
    let skip = offset - start;
    words[skip..skip + data.len()].copy_from_slice(data);
    gpu.queue.write_buffer(buf, start as u64, &words);
    gpu.peek_error("write")
}

// SAFETY: the buffer has no host address (`host_ptr` is `None`); its bytes are device memory,
// reached only through this implementation's queue operations.
unsafe impl BufferImpl for WgpuBuffer {
    fn size(&self) -> usize {
        self.size
    }
    fn host_ptr(&self) -> Option<NonNull<u8>> {
        None
    }
    unsafe fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        write_bytes(&self.gpu, &self.buf, offset, data)
    }
    unsafe fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        if out.is_empty() {
            return Ok(());
        }
        stage_read(&self.gpu, &self.buf, offset, out.len()).finish(&self.gpu, out)
    }
    unsafe fn fill(&self, offset: usize, size: usize, value: u8) -> Result<()> {
        if value == 0 && word_aligned(offset, size) {
            let mut enc = self.gpu.device.create_command_encoder(&Default::default());
            enc.clear_buffer(&self.buf, offset as u64, Some(size as u64));
            self.gpu.queue.submit(std::iter::once(enc.finish()));
            return self.gpu.peek_error("fill");
        }
        let chunk = vec![value; size.min(FILL_CHUNK)];
        let mut at = offset;
        while at < offset + size {
            let n = (offset + size - at).min(FILL_CHUNK);
            write_bytes(&self.gpu, &self.buf, at, &chunk[..n])?;
            at += n;
        }
        Ok(())
    }
    unsafe fn cpy_tensor(
        &self,
        src: &dyn BufferImpl,
        src_offset: usize,
        offset: usize,
        size: usize,
    ) -> Result<bool> {
        match src.downcast_ref::<WgpuBuffer>() {
            Some(s)
                if self.same_gpu(s)
                    && word_aligned(src_offset, size)
                    && offset.is_multiple_of(WORD) =>
            {
                copy(&self.gpu, &s.buf, src_offset, &self.buf, offset, size);
                self.gpu.peek_error("copy")?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}

/// Queues a copy of `size` bytes (whole words) between two buffers of `gpu`.
pub(crate) fn copy(
    gpu: &Gpu,
    src: &wgpu::Buffer,
    src_offset: usize,
    dst: &wgpu::Buffer,
    dst_offset: usize,
    size: usize,
) -> wgpu::SubmissionIndex {
    let mut enc = gpu.device.create_command_encoder(&Default::default());
    enc.copy_buffer_to_buffer(src, src_offset as u64, dst, dst_offset as u64, size as u64);
    gpu.queue.submit(std::iter::once(enc.finish()))
}
