//! Devices (`ggml_backend_dev_t`): what a piece of hardware is, what it can compute, and how to
//! start a stream on it.

use std::ptr::NonNull;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::tensor::Tensor;

use super::buffer::ReadOnlyHost;
use super::traits::DeviceImpl;
use super::{Backend, Buffer, BufferType};

/// The kind of a device (`enum ggml_backend_dev_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeviceType {
    /// The processor, computing on system memory.
    Cpu = 0,
    /// A GPU with its own memory.
    Gpu = 1,
    /// An integrated GPU using host memory.
    Igpu = 2,
    /// An accelerator used together with the CPU backend (BLAS, AMX …).
    Accel = 3,
    /// A meta device splitting tensors across several devices.
    Meta = 4,
}

/// A device's capabilities (`struct ggml_backend_dev_caps`), as its implementation reports
/// them ([`super::DeviceImpl::caps`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceCaps {
    /// `graph_compute_async` and the async transfers return before the work is done. Every
    /// stream of this library can (it has its own worker), so the default is true.
    pub async_compute: bool,
    /// The device has a pinned host buffer type.
    pub host_buffer: bool,
    /// The device can wrap host memory in a buffer.
    pub buffer_from_host_ptr: bool,
    /// The device supports events. Every stream of this library can signal and wait for
    /// events, so the default is true.
    pub events: bool,
}

impl Default for DeviceCaps {
    /// Asynchronous compute and events (what every stream of this library has), no host buffer
    /// type, no host-pointer buffers.
    fn default() -> DeviceCaps {
        DeviceCaps {
            async_compute: true,
            host_buffer: false,
            buffer_from_host_ptr: false,
            events: true,
        }
    }
}

/// A device's properties (`struct ggml_backend_dev_props`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceProps {
    /// Short id.
    pub name: String,
    /// Longer description.
    pub description: String,
    /// Free memory in bytes (0 = unknown).
    pub memory_free: usize,
    /// Total memory in bytes (0 = unknown).
    pub memory_total: usize,
    /// The kind of device.
    pub dev_type: DeviceType,
    /// A stable hardware id (e.g. PCI bus id), if any.
    pub device_id: Option<String>,
    /// Capabilities.
    pub caps: DeviceCaps,
}

handle!(
    /// A device handle. Cheap to clone; compares by identity.
    Device: DeviceImpl
);

impl Device {
    /// A handle over an implementation already shared.
    pub(crate) fn from_arc(imp: Arc<dyn DeviceImpl>) -> Device {
        Device(imp)
    }

    /// A weak handle (a listing that must not keep the device alive).
    pub(crate) fn downgrade(&self) -> std::sync::Weak<dyn DeviceImpl> {
        Arc::downgrade(&self.0)
    }

    /// The implementation (for wrappers such as a loaded library's devices).
    pub(crate) fn imp(&self) -> &dyn DeviceImpl {
        &*self.0
    }

    /// Short id (`ggml_backend_dev_name`).
    pub fn name(&self) -> String {
        self.0.name()
    }

    /// Description (`ggml_backend_dev_description`).
    pub fn description(&self) -> String {
        self.0.description()
    }

    /// (free, total) memory in bytes (`ggml_backend_dev_memory`).
    pub fn memory(&self) -> (usize, usize) {
        self.0.memory()
    }

    /// The kind of device (`ggml_backend_dev_type`).
    pub fn dev_type(&self) -> DeviceType {
        self.0.dev_type()
    }

    /// All properties (`ggml_backend_dev_get_props`).
    pub fn get_props(&self) -> DeviceProps {
        let (memory_free, memory_total) = self.memory();
        DeviceProps {
            name: self.name(),
            description: self.description(),
            memory_free,
            memory_total,
            dev_type: self.dev_type(),
            device_id: self.0.device_id(),
            caps: self.0.caps(),
        }
    }

    /// Starts a new stream on the device (`ggml_backend_dev_init`).
    pub fn init(&self, params: Option<&str>) -> Result<Backend> {
        let imp = self.0.init_backend(params)?;
        Backend::start(self.clone(), imp)
    }

    /// The device's preferred buffer type (`ggml_backend_dev_buffer_type`).
    pub fn buffer_type(&self) -> BufferType {
        self.0.buffer_type()
    }

    /// The device's pinned host buffer type, if any (`ggml_backend_dev_host_buffer_type`).
    pub fn host_buffer_type(&self) -> Option<BufferType> {
        self.0.host_buffer_type()
    }

    /// Wraps `size` bytes of existing host memory in a buffer without copying
    /// (`ggml_backend_dev_buffer_from_host_ptr`), e.g. a memory-mapped model file.
    ///
    /// # Safety
    /// `ptr` must be valid for reads and writes of `size` bytes, and not be accessed by other
    /// code, for as long as the buffer or any tensor placed in it lives.
    pub unsafe fn buffer_from_host_ptr(
        &self,
        ptr: NonNull<u8>,
        size: usize,
        max_tensor_size: usize,
    ) -> Result<Buffer> {
        if !self.0.caps().buffer_from_host_ptr {
            return Err(Error::unsupported(format!(
                "buffer_from_host_ptr: device {} cannot wrap host memory",
                self.name()
            )));
        }
        // SAFETY: forwarded from this function's contract.
        let imp = unsafe { self.0.buffer_from_host_ptr(ptr, size, max_tensor_size)? };
        Ok(Buffer::wrap(
            self.buffer_type(),
            imp,
            &format!("{}_Mapped", self.name()),
        ))
    }

    /// Wraps bytes that `owner` holds (e.g. a memory-mapped model file) in a read-only buffer
    /// without copying, through the device's host-pointer support. The buffer keeps `owner`
    /// alive; writing into it (host writes, or a graph computing into it) is an `Err`.
    pub fn buffer_from_host_bytes<O>(&self, owner: Arc<O>, max_tensor_size: usize) -> Result<Buffer>
    where
        O: AsRef<[u8]> + Send + Sync + 'static,
    {
        if !self.0.caps().buffer_from_host_ptr {
            return Err(Error::unsupported(format!(
                "buffer_from_host_bytes: device {} cannot wrap host memory",
                self.name()
            )));
        }
        let bytes = (*owner).as_ref();
        let len = bytes.len();
        let ptr = NonNull::new(bytes.as_ptr() as *mut u8).unwrap_or(NonNull::dangling());
        // SAFETY: `owner` keeps the bytes alive and in place for the buffer's life (it is stored
        // in the buffer), and `ReadOnlyHost` refuses every write, so the memory behind the
        // shared slice is only ever read.
        let inner = unsafe { self.0.buffer_from_host_ptr(ptr, len, max_tensor_size)? };
        let imp = ReadOnlyHost {
            inner,
            _owner: owner,
        };
        Ok(Buffer::wrap(
            self.buffer_type(),
            Box::new(imp),
            &format!("{}_Mapped", self.name()),
        ))
    }

    /// Whether the device can compute `op` (`ggml_backend_dev_supports_op`).
    pub fn supports_op(&self, op: &Tensor) -> bool {
        self.0.supports_op(op)
    }

    /// Whether the device's streams can use buffers of `buft` (`ggml_backend_dev_supports_buft`).
    pub fn supports_buft(&self, buft: &BufferType) -> bool {
        self.0.supports_buft(buft)
    }

    /// Whether it pays to move weights here to compute `op` (`ggml_backend_dev_offload_op`).
    pub fn offload_op(&self, op: &Tensor) -> bool {
        self.0.offload_op(op)
    }

    /// The device's extra buffer types (`ggml_backend_dev_get_extra_bufts`, through the
    /// registry's proc address in GGML): buffer types beside [`Device::buffer_type`] whose
    /// memory holds tensors in a layout of the device's own, which only some ops can use and
    /// which cannot be read back. The CPU device returns its repack type
    /// ([`super::cpu_repack_buffer_type`]); other devices none.
    pub fn get_extra_bufts(&self) -> Vec<BufferType> {
        self.0.extra_buffer_types()
    }

    /// `(name, value)` features of the device.
    pub fn features(&self) -> Vec<(String, String)> {
        self.0.features()
    }
}
