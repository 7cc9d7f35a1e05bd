#![doc = include_str!("../doc/backend.md")]
//! The backend system: buffer types, buffers, devices, registries, streams ([`Backend`]),
//! events and graph plans, and the functions that move data between them.
//!
//! Backends are traits ([`BufferTypeImpl`], [`BufferImpl`], [`DeviceImpl`], [`BackendImpl`],
//! [`EventImpl`], [`RegistryImpl`]) that a crate outside `ggml` can implement; the handles here
//! add what all backends share. Differences from GGML, on purpose: every backend (the CPU one
//! too) is a real asynchronous stream with events; errors are `Err` values, never aborts; host
//! access to a tensor waits for queued work on its buffer, so safe code never sees a data race.
//!
//! Memory need not be host memory. Every job is resolved when it is queued: each node and
//! operand to a [`Place`] (its buffer's implementation, which the backend downcasts to its own
//! type, and the offset in it), and those buffers are what the job reserves. An engine with a
//! queue of its own (a GPU stream, a remote server) overrides the asynchronous hooks of
//! [`BackendImpl`]; the stream then keeps each job's buffers reserved until the engine has
//! synchronized, and lets device events order streams without blocking. Copies between devices
//! that can copy directly ([`BufferImpl::cpy_tensor`], [`BackendImpl::cpy_tensor_async`]) do
//! not go through host memory. The crate `ggml-testdev` is such a device, written only
//! against these traits.
//!
//! [`meta_device`] makes one device over several for tensor parallelism: each tensor is split
//! over the members by its [`SplitState`], and a graph runs on all of them at once, with
//! all-reduces where partial sums must be combined.

#[macro_use]
mod handle;

mod buffer;
mod device;
mod event;
pub(crate) mod job;
mod load;
mod meta;
mod multi_buffer;
mod registry;
mod sched;
pub(crate) mod stream;
mod traits;

pub use buffer::{host_buffer_type, Buffer, BufferType, BufferUsage, HostMemory, HOST_ALIGN};
pub use device::{Device, DeviceCaps, DeviceProps, DeviceType};
pub use event::Event;
pub use job::PlacedGraph;
pub use load::{
    build_id, build_id_c, load, load_all, load_all_from_path, loaded_libraries, unload,
    BackendEntry, BACKEND_API_VERSION,
};
pub use meta::{meta_device, meta_devices, SplitAxis, SplitState, TensorInfo, META_MAX_DEVICES};
pub use multi_buffer::multi_buffer_alloc_buffer;
pub use registry::{
    dev_by_name, dev_by_type, dev_count, dev_get, device_register, devices, init_best,
    init_by_name, init_by_type, reg_by_name, reg_count, reg_get, register, Registry,
};
pub use sched::{sched_new, EvalCallback, Sched, SCHED_MAX_BACKENDS, SCHED_MAX_COPIES};
pub use stream::{Backend, GraphPlan, Pending};
pub use traits::{
    AsAny, BackendImpl, BufferImpl, BufferTypeImpl, DeviceImpl, EventImpl, Place, RegistryImpl,
};

pub use crate::alloc::{alloc_ctx_tensors, alloc_ctx_tensors_from_buft, tensor_alloc, view_init};
pub use crate::cpu::{cpu_buffer_type, cpu_init, cpu_repack_buffer_type};

use crate::error::Result;
use crate::tensor::Tensor;

/// Writes `data` into `t` at byte `offset`, after queued work on its buffer
/// (`ggml_backend_tensor_set`).
pub fn tensor_set(t: &Tensor, data: &[u8], offset: usize) -> Result<()> {
    t.set_bytes(data, offset)
}

/// Reads bytes of `t` from `offset` into `out`, after queued work on its buffer
/// (`ggml_backend_tensor_get`).
pub fn tensor_get(t: &Tensor, out: &mut [u8], offset: usize) -> Result<()> {
    t.get_bytes(out, offset)
}

/// Sets `size` bytes of `t` from `offset` to `value` (`ggml_backend_tensor_memset`).
pub fn tensor_memset(t: &Tensor, value: u8, offset: usize, size: usize) -> Result<()> {
    t.check_range("tensor_memset", offset, size)?;
    let b = t.require_binding("tensor_memset")?;
    b.buffer.host_fill(t, b.offset, offset, size, value)
}

/// Copies `src` into `dst` (same layout) synchronously, after the work queued on their buffers
/// (`ggml_backend_tensor_copy`): directly between the devices when they can
/// ([`BufferImpl::cpy_tensor`]), else through host memory.
pub fn tensor_copy(src: &Tensor, dst: &Tensor) -> Result<()> {
    stream::tensor_copy(src, dst)
}

/// Copies `src` (computed on `b_src`) into `dst` (used on `b_dst`): after all work queued on
/// `b_src` so far and before work queued later on `b_dst`. Returns at once
/// (`ggml_backend_tensor_copy_async`).
pub fn tensor_copy_async(
    b_src: &Backend,
    b_dst: &Backend,
    src: &Tensor,
    dst: &Tensor,
) -> Result<()> {
    stream::tensor_copy_async(b_src, b_dst, src, dst)
}
