//! Loading a GGUF file's tensors into a [`Context`] whose data lives in a backend buffer.
//!
//! On a device that computes on host memory (the CPU), a memory-mapped file is not copied: the
//! tensors are bound to a read-only buffer over the mapping, made with
//! [`Device::buffer_from_host_bytes`](crate::Device::buffer_from_host_bytes). Anywhere else, or
//! for a file read into memory, the tensors get a buffer of the device's type and their bytes are
//! copied in.

use std::sync::Arc;

use super::{FileBytes, GgufFile};
use crate::alloc::{alloc_ctx_tensors_from_buft, tensor_alloc};
use crate::backend::{Backend, Buffer, BufferType, Device};
use crate::context::Context;
use crate::error::Result;
use crate::tensor::Tensor;

impl AsRef<[u8]> for FileBytes {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

/// A file's tensors, loaded: the context holding them (named as in the file, in file order)
/// and the buffer holding their data.
#[derive(Clone, Debug)]
pub struct LoadedTensors {
    /// The context; `ctx.get_tensor(name)` finds a tensor.
    pub ctx: Context,
    /// The buffer with the tensors' bytes.
    pub buffer: Buffer,
    /// Whether the buffer maps the file (no copy was made; the tensors are read-only).
    pub mapped: bool,
}

impl GgufFile {
    /// A `no_alloc` context with one tensor per tensor info, named and shaped as in the file.
    fn tensor_context(&self) -> Result<(Context, Vec<Tensor>)> {
        let infos = self.tensors();
        let ctx = Context::for_metadata(infos.len(), 0)?;
        let tensors = infos
            .iter()
            .map(|info| {
                let t = ctx.new_tensor(info.ty(), &info.ne())?;
                t.set_name(info.name());
                Ok(t)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok((ctx, tensors))
    }

    /// Loads every tensor for use by `backend` (ggmlR's "load all tensors into a context"):
    /// without a copy when the file is memory-mapped and the backend's device can use host
    /// memory, else copied into the device's buffer type.
    pub fn load_tensors(&self, backend: &Backend) -> Result<LoadedTensors> {
        self.load_tensors_with_progress(backend, &mut |_, _| {})
    }

    /// [`GgufFile::load_tensors`], calling `progress(bytes_done, bytes_total)` as the tensors'
    /// bytes are bound: once with all of them when the file is mapped without a copy, else
    /// after each tensor copied (for a progress report on a long load).
    pub fn load_tensors_with_progress(
        &self,
        backend: &Backend,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<LoadedTensors> {
        let dev = backend.get_device();
        let caps = dev.get_props().caps;
        let host_ok = caps.buffer_from_host_ptr && dev.buffer_type().is_host();
        if self.file_bytes().is_mapped() && host_ok {
            let loaded = self.load_tensors_mapped(&dev)?;
            let total = self.total_tensor_bytes();
            progress(total, total);
            Ok(loaded)
        } else {
            self.copy_tensors(&dev.buffer_type(), progress)
        }
    }

    /// Binds the tensors to a read-only buffer over the file's bytes on `dev` (no copy).
    pub fn load_tensors_mapped(&self, dev: &Device) -> Result<LoadedTensors> {
        let (ctx, tensors) = self.tensor_context()?;
        let bytes: Arc<FileBytes> = self.file_bytes().clone();
        let buffer = dev.buffer_from_host_bytes(bytes, self.max_tensor_size())?;
        for (t, info) in tensors.iter().zip(self.tensors()) {
            tensor_alloc(&buffer, t, info.file_range().start)?;
        }
        Ok(LoadedTensors {
            ctx,
            buffer,
            mapped: true,
        })
    }

    /// Allocates the tensors in buffers of `buft` (a multi-buffer past its maximum size) and
    /// copies their bytes in.
    pub fn load_tensors_copied(&self, buft: &BufferType) -> Result<LoadedTensors> {
        self.copy_tensors(buft, &mut |_, _| {})
    }

    /// [`GgufFile::load_tensors_copied`], calling `progress(bytes_done, bytes_total)` after
    /// each tensor.
    fn copy_tensors(
        &self,
        buft: &BufferType,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<LoadedTensors> {
        let (ctx, tensors) = self.tensor_context()?;
        // A file without tensor data (metadata only, or only empty tensors) loads into an
        // empty buffer, as the mapped path does.
        let buffer = if tensors.iter().all(|t| t.nbytes() == 0) {
            buft.alloc_buffer(0)?
        } else {
            alloc_ctx_tensors_from_buft(&ctx, buft)?
        };
        let (total, mut done) = (self.total_tensor_bytes(), 0);
        for (t, info) in tensors.iter().zip(self.tensors()) {
            let data = self.data_of(info);
            t.set_bytes(data, 0)?;
            done += data.len();
            progress(done, total);
        }
        Ok(LoadedTensors {
            ctx,
            buffer,
            mapped: false,
        })
    }

    fn total_tensor_bytes(&self) -> usize {
        self.tensors().iter().map(|i| i.size()).sum()
    }

    fn max_tensor_size(&self) -> usize {
        self.tensors().iter().map(|i| i.size()).max().unwrap_or(0)
    }
}
