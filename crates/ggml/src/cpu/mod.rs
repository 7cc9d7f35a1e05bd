//! The CPU backend: its buffer types, device, registry and compute engine.

mod compute;
mod features;
mod fusion;
pub(crate) mod gemm;
pub(crate) mod kernels;
mod profile;
pub(crate) mod quant_dot;
pub(crate) mod repack;
mod threadpool;

use std::ptr::NonNull;
use std::sync::OnceLock;

use crate::backend::{
    host_buffer_type, Backend, BackendImpl, BufferImpl, BufferType, Device, DeviceCaps, DeviceImpl,
    DeviceType, HostMemory, Registry, RegistryImpl,
};
use crate::error::Result;
use crate::tensor::Tensor;

pub use repack::cpu_repack_buffer_type;

/// The CPU buffer type (`ggml_backend_cpu_buffer_type`): the host buffer type
/// ([`host_buffer_type`]), aligned host memory usable by every backend that can read host
/// memory.
pub fn cpu_buffer_type() -> BufferType {
    host_buffer_type()
}

/// Starts a stream on the CPU device (`ggml_backend_cpu_init`).
pub fn cpu_init() -> Result<Backend> {
    device().init(None)
}

struct CpuDevice;

impl DeviceImpl for CpuDevice {
    fn name(&self) -> String {
        "CPU".into()
    }
    fn description(&self) -> String {
        features::cpu_model_name()
    }
    fn memory(&self) -> (usize, usize) {
        features::memory()
    }
    fn dev_type(&self) -> DeviceType {
        DeviceType::Cpu
    }
    fn caps(&self) -> DeviceCaps {
        DeviceCaps {
            buffer_from_host_ptr: true,
            ..DeviceCaps::default()
        }
    }
    fn init_backend(&self, _params: Option<&str>) -> Result<Box<dyn BackendImpl>> {
        Ok(Box::new(compute::CpuBackend::new()))
    }
    fn buffer_type(&self) -> BufferType {
        cpu_buffer_type()
    }
    fn extra_buffer_types(&self) -> Vec<BufferType> {
        vec![cpu_repack_buffer_type()]
    }
    unsafe fn buffer_from_host_ptr(
        &self,
        ptr: NonNull<u8>,
        size: usize,
        _max_tensor_size: usize,
    ) -> Result<Box<dyn BufferImpl>> {
        // SAFETY: the caller guarantees the memory is valid for the buffer's lifetime.
        Ok(Box::new(unsafe { HostMemory::borrowed(ptr, size) }))
    }
    fn supports_op(&self, op: &Tensor) -> bool {
        // whether a kernel exists does not depend on how matrix-vector products are taken
        op.op().is_empty() || kernels::plan(op, kernels::Matvec::Tiles).is_ok()
    }
    fn supports_buft(&self, buft: &BufferType) -> bool {
        buft.is_host() || buft.is::<repack::RepackBufferType>()
    }
    fn features(&self) -> Vec<(String, String)> {
        features::features()
    }
}

/// The CPU device.
fn device() -> Device {
    static DEV: OnceLock<Device> = OnceLock::new();
    DEV.get_or_init(|| Device::new(CpuDevice)).clone()
}

struct CpuRegistry;

impl RegistryImpl for CpuRegistry {
    fn name(&self) -> String {
        "CPU".into()
    }
    fn devices(&self) -> Vec<Device> {
        vec![device()]
    }
    fn features(&self) -> Vec<(String, String)> {
        features::features()
    }
}

/// The CPU registry, which the crate registers among its built-in registries.
pub(crate) fn registry() -> Registry {
    static REG: OnceLock<Registry> = OnceLock::new();
    REG.get_or_init(|| Registry::new(CpuRegistry)).clone()
}
