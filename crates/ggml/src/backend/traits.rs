//! The traits a backend implements. A crate outside `ggml` implements these to add a device;
//! the handles in this module ([`super::Buffer`], [`super::Backend`], …) wrap them and add what
//! every backend shares: error checking, usage tags, a real asynchronous stream with its own
//! worker thread, events, and the ordering that keeps asynchronous work sound.

use std::any::Any;
use std::ptr::NonNull;

use crate::error::Result;
use crate::tensor::Tensor;

use super::{BufferType, DeviceType};

/// A kind of memory a device can allocate (`ggml_backend_buffer_type_i`).
pub trait BufferTypeImpl: Send + Sync + 'static {
    /// Short name, e.g. `"CPU"`.
    fn name(&self) -> String;
    /// Allocates `size` bytes (never called with 0).
    fn alloc_buffer(&self, size: usize) -> Result<Box<dyn BufferImpl>>;
    /// Alignment of tensor addresses in such buffers, a power of two.
    fn alignment(&self) -> usize;
    /// Largest single allocation; larger requests are split by callers that can.
    fn max_size(&self) -> usize {
        usize::MAX
    }
    /// Bytes a tensor needs in such a buffer (at least its `nbytes`).
    fn alloc_size(&self, t: &Tensor) -> usize {
        t.nbytes()
    }
    /// Whether the memory is host memory in GGML's standard layout.
    fn is_host(&self) -> bool {
        false
    }
}

/// One allocation of a buffer type (`ggml_backend_buffer_i`). Offsets are bytes from the start
/// of the buffer. The [`super::Buffer`] wrapper guarantees that no two calls that touch the
/// memory overlap in time, and that nothing touches it after the implementation is dropped.
///
/// # Safety
/// Backends that compute on host memory (the CPU one) read and write through
/// [`BufferImpl::host_ptr`] without further checks. An implementation that returns `Some(p)`
/// promises that `p` is valid for reads and writes of [`BufferImpl::size`] bytes for as long as
/// the implementation lives, and that nothing accesses those bytes except through this
/// implementation (its methods and that pointer).
pub unsafe trait BufferImpl: Send + Sync + 'static {
    /// Size in bytes.
    fn size(&self) -> usize;
    /// The address of byte 0 when the memory is host-addressable, else `None`.
    fn host_ptr(&self) -> Option<NonNull<u8>>;
    /// Copies `data` into the buffer at `offset`.
    ///
    /// # Safety
    /// `offset + data.len() <= self.size()`, and no other access to the buffer's memory (a
    /// method call or an access through [`BufferImpl::host_ptr`]) runs at the same time.
    unsafe fn write(&self, offset: usize, data: &[u8]) -> Result<()>;
    /// Copies bytes at `offset` into `out`.
    ///
    /// # Safety
    /// `offset + out.len() <= self.size()`, and no write to the buffer's memory runs at the
    /// same time.
    unsafe fn read(&self, offset: usize, out: &mut [u8]) -> Result<()>;
    /// Sets `size` bytes at `offset` to `value`.
    ///
    /// # Safety
    /// As for [`BufferImpl::write`], with `offset + size <= self.size()`.
    unsafe fn fill(&self, offset: usize, size: usize, value: u8) -> Result<()>;
    /// Prepares a tensor just placed at `offset` (`init_tensor`); most buffers need nothing.
    fn init_tensor(&self, _t: &Tensor, _offset: usize) -> Result<()> {
        Ok(())
    }
    /// Drops per-tensor state (`reset`); most buffers have none.
    fn reset(&self) {}
    /// Whether the memory must never be written (e.g. a file mapped read-only): writes are
    /// refused, and no graph may compute into it.
    fn read_only(&self) -> bool {
        false
    }
}

/// What a device can do beyond the basics, reported in [`super::DeviceCaps`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceImplCaps {
    /// The device has a pinned host buffer type.
    pub host_buffer: bool,
    /// The device can wrap existing host memory in a buffer.
    pub buffer_from_host_ptr: bool,
}

/// A device (`ggml_backend_device_i`).
pub trait DeviceImpl: Send + Sync + 'static {
    /// Short id, e.g. `"CPU"`, `"Vulkan0"`.
    fn name(&self) -> String;
    /// Longer description, e.g. the processor's model name.
    fn description(&self) -> String;
    /// (free, total) bytes of memory; 0 = unknown.
    fn memory(&self) -> (usize, usize);
    /// The kind of device.
    fn dev_type(&self) -> DeviceType;
    /// A stable id such as a PCI bus id, if the device has one.
    fn device_id(&self) -> Option<String> {
        None
    }
    /// Optional capabilities.
    fn caps(&self) -> DeviceImplCaps {
        DeviceImplCaps::default()
    }
    /// Creates the compute engine of a new stream on this device.
    fn init_backend(&self, params: Option<&str>) -> Result<Box<dyn BackendImpl>>;
    /// The device's preferred buffer type. Must return the same buffer type every time.
    fn buffer_type(&self) -> BufferType;
    /// A pinned host buffer type, if the device has one.
    fn host_buffer_type(&self) -> Option<BufferType> {
        None
    }
    /// Wraps `size` bytes of host memory at `ptr` (see [`super::Device::buffer_from_host_ptr`]).
    /// Only called when [`DeviceImplCaps::buffer_from_host_ptr`] is set. The implementation
    /// must not write the memory on its own (only through `write`/`fill` when asked): a caller
    /// may wrap read-only memory and refuse every write (see
    /// [`super::Device::buffer_from_host_bytes`]).
    ///
    /// # Safety
    /// `ptr` must be valid for reads of `size` bytes — and for writes, unless the caller never
    /// lets a write reach the buffer — for as long as the returned buffer lives.
    unsafe fn buffer_from_host_ptr(
        &self,
        _ptr: NonNull<u8>,
        _size: usize,
        _max_tensor_size: usize,
    ) -> Result<Box<dyn BufferImpl>> {
        Err(crate::Error::unsupported(format!(
            "device {} cannot wrap host memory",
            self.name()
        )))
    }
    /// Whether a backend of this device can compute `op` as it is (types, layouts, buffers).
    fn supports_op(&self, op: &Tensor) -> bool;
    /// Whether a backend of this device can read tensors in buffers of `buft`.
    fn supports_buft(&self, buft: &BufferType) -> bool;
    /// Whether it is worth moving weights to this device to compute `op` here.
    fn offload_op(&self, _op: &Tensor) -> bool {
        false
    }
    /// `(name, value)` pairs of features the device was built with or detected.
    fn features(&self) -> Vec<(String, String)> {
        Vec::new()
    }
}

/// The compute engine of one stream (`ggml_backend_i`, the synchronous part). It lives on the
/// stream's worker thread, which calls it one job at a time, in order, after every buffer the
/// job touches has finished earlier work — so implementations are plain synchronous code.
pub trait BackendImpl: Send + 'static {
    /// Short name, e.g. `"CPU"`.
    fn name(&self) -> String;
    /// Computes the nodes in order. Every node and operand is allocated in a buffer the device
    /// supports; nodes without [`crate::tensor::flags::COMPUTE`] and empty ops may be skipped.
    fn graph_compute(&mut self, nodes: &[Tensor]) -> Result<()>;
    /// Sets the number of threads used to compute; `Err` if the backend has no such setting.
    fn set_n_threads(&mut self, n: usize) -> Result<()> {
        Err(crate::Error::unsupported(format!(
            "backend {} has no thread setting (asked for {n})",
            self.name()
        )))
    }
    /// Prepares everything a repeated computation of `nodes` needs. The default keeps the nodes
    /// and computes them with [`BackendImpl::graph_compute`].
    fn graph_plan_create(&mut self, nodes: &[Tensor]) -> Result<Box<dyn Any + Send>> {
        Ok(Box::new(nodes.to_vec()))
    }
    /// Runs a plan made by [`BackendImpl::graph_plan_create`].
    fn graph_plan_compute(&mut self, plan: &mut (dyn Any + Send)) -> Result<()> {
        match plan.downcast_ref::<Vec<Tensor>>() {
            Some(nodes) => {
                let nodes = nodes.clone();
                self.graph_compute(&nodes)
            }
            None => Err(crate::Error::invalid(format!(
                "graph_plan_compute: the plan was not made by backend {}",
                self.name()
            ))),
        }
    }
}

/// A set of devices (`ggml_backend_reg_i`).
pub trait RegistryImpl: Send + Sync + 'static {
    /// The registry's name, e.g. `"CPU"`.
    fn name(&self) -> String;
    /// Its devices.
    fn devices(&self) -> Vec<super::Device>;
    /// `(name, value)` feature pairs (`ggml_backend_get_features`).
    fn features(&self) -> Vec<(String, String)> {
        Vec::new()
    }
}
