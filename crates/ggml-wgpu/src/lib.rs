//! # ggml-wgpu
//!
//! A GPU device for `ggml` through [wgpu](https://wgpu.rs): one backend for Vulkan, Metal and
//! DX12, with its kernels written in WGSL. It is written only against `ggml`'s public backend
//! traits, like any out-of-crate device.
//!
//! - **Registry**: [`register`] enumerates the adapters once and registers one device per
//!   adapter, named `WGPU0`, `WGPU1`, … (description: the adapter's name, API and driver).
//!   A software adapter (Mesa's lavapipe, which wgpu reports as a CPU) is registered as an
//!   integrated GPU: its memory is the host's, as for GGML's Vulkan devices with unified memory,
//!   and a device typed `Cpu` would be taken for the library's own CPU fallback.
//! - **Memory**: buffers are wgpu storage buffers in device memory
//!   ([`ggml::backend::BufferImpl::host_ptr`] is `None`); the host reaches them through the
//!   queue (writes staged by `Queue::write_buffer`, reads through a mapped staging buffer).
//!   [`Device::memory`](ggml::Device::memory) reports a Vulkan adapter's device-local heaps
//!   (free: their budget less their usage, or the total less this backend's buffers).
//! - **Streams**: a stream's engine has a queue of its own (the device's): a graph is recorded as
//!   one command buffer with one compute pass, submitted without waiting; `set`/`get`/`copy`
//!   are queued too, and `synchronize` waits for the last submission. Events are markers in the
//!   queue (`Queue::on_submitted_work_done`); waiting for a marker of the same device costs
//!   nothing, the queue's order is the wait.
//! - **Kernels**: WGSL compute shaders generated per operand type and cached as pipelines the
//!   first time a node needs them (see [`Device::supports_op`](ggml::Device::supports_op) for
//!   what is computed). All arithmetic is f32; F16 and BF16 values are converted when loaded
//!   and stored, which needs no adapter feature (`SHADER_F16` is not used).
//!
//! ```no_run
//! # fn main() -> ggml::Result<()> {
//! let reg = ggml_wgpu::register()?;
//! for dev in reg.devices() {
//!     println!("{}: {}", dev.name(), dev.description());
//! }
//! # Ok(()) }
//! ```

mod buffer;
mod engine;
mod memory;
mod ops;
mod wgsl;

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use ggml::backend::{BackendImpl, DeviceImpl};
use ggml::{BufferType, Device, DeviceType, Error, Registry, Result, Tensor};

pub use buffer::ALIGNMENT;

/// When this environment variable is set, the devices do not use the adapters' `SHADER_F16`
/// (F16 tensors are then read and written as halves of 32-bit words, as on adapters without
/// it), so that both paths can be tested on one adapter.
pub const DISABLE_F16_ENV: &str = "GGML_WGPU_DISABLE_F16";

/// When this environment variable is set, the devices do not use the adapters' `SHADER_F64`
/// (the path of adapters without it: the kernels that take the CPU's float order through f64
/// — fused multiply-adds, `expf`, RMS_NORM's and SOFT_MAX's sums, ROPE's angles, F16 products'
/// tails — fall back to f32).
pub const DISABLE_F64_ENV: &str = "GGML_WGPU_DISABLE_F64";

/// Name of the registry [`register`] adds.
pub const REGISTRY_NAME: &str = "WGPU";

static NEXT_GPU_ID: AtomicU64 = AtomicU64::new(1);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs a future to completion on this thread (wgpu's native futures are ready at once, or
/// become ready while the device is polled).
pub(crate) fn block_on<F: Future>(f: F) -> F::Output {
    use std::task::{Context, Poll, Wake, Waker};
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park();
    }
}

/// One adapter opened as a wgpu device, shared by the ggml device, its buffers and streams.
pub(crate) struct Gpu {
    /// Unique among the process's GPUs (to tell buffers and markers of another device).
    pub(crate) id: u64,
    /// The ggml device name, `WGPU<i>`.
    pub(crate) name: String,
    pub(crate) info: wgpu::AdapterInfo,
    pub(crate) device: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
    pub(crate) limits: wgpu::Limits,
    /// Whether the kernels bind F16 tensors as `f16` arrays (`SHADER_F16` was granted).
    pub(crate) f16: bool,
    /// Whether the kernels compute in f64 where the CPU's roundings need it (`SHADER_F64`
    /// was granted).
    pub(crate) f64: bool,
    /// The first error wgpu reported outside an error scope since a stream last synchronized.
    pub(crate) errors: Arc<Mutex<Option<String>>>,
    /// Compiled pipelines, by kernel key.
    pub(crate) kernels: wgsl::Cache,
    /// Bytes this backend's buffers hold on the device.
    pub(crate) allocated: AtomicU64,
    /// The CPU's GELU table (`wgsl::gelu_table`), uploaded on first use.
    gelu_table: OnceLock<wgpu::Buffer>,
    /// ROPE's angle tables (`ops::RopeTable`), by parameters, made on first use.
    rope_tables: Mutex<Vec<([u32; 8], wgpu::Buffer)>>,
}

impl Gpu {
    /// ROPE's angle table for `t` in device memory, computed and uploaded the first time.
    pub(crate) fn rope_table(&self, t: ops::RopeTable) -> wgpu::Buffer {
        let key = t.key();
        let mut tables = lock(&self.rope_tables);
        if let Some((_, b)) = tables.iter().find(|(k, _)| *k == key) {
            return b.clone();
        }
        let buffer = self.upload_f32("ggml rope table", &t.values());
        tables.push((key, buffer.clone()));
        buffer
    }

    /// The CPU's GELU table in device memory (65536 f32), uploaded the first time.
    pub(crate) fn gelu_table(&self) -> &wgpu::Buffer {
        self.gelu_table
            .get_or_init(|| self.upload_f32("ggml gelu table", &wgsl::gelu_table()))
    }

    /// A storage buffer holding `values`.
    fn upload_f32(&self, label: &str, values: &[f32]) -> wgpu::Buffer {
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        wgpu::util::DeviceExt::create_buffer_init(
            &self.device,
            &wgpu::util::BufferInitDescriptor {
                label: Some(label),
                contents: &bytes,
                usage: wgpu::BufferUsages::STORAGE,
            },
        )
    }

    fn open(index: usize, adapter: &wgpu::Adapter) -> Result<Gpu> {
        let info = adapter.get_info();
        let limits = adapter.limits();
        let f16 = adapter.features().contains(wgpu::Features::SHADER_F16)
            && std::env::var_os(DISABLE_F16_ENV).is_none();
        let f64 = adapter.features().contains(wgpu::Features::SHADER_F64)
            && std::env::var_os(DISABLE_F64_ENV).is_none();
        let mut required_features = wgpu::Features::empty();
        required_features.set(wgpu::Features::SHADER_F16, f16);
        required_features.set(wgpu::Features::SHADER_F64, f64);
        let desc = wgpu::DeviceDescriptor {
            label: Some("ggml-wgpu"),
            required_features,
            required_limits: limits.clone(),
            ..Default::default()
        };
        let (device, queue) = block_on(adapter.request_device(&desc)).map_err(|e| {
            Error::unsupported(format!("wgpu adapter {:?}: cannot open it: {e}", info.name))
        })?;
        let errors = Arc::new(Mutex::new(None::<String>));
        let slot = errors.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            lock(&slot).get_or_insert_with(|| e.to_string());
        }));
        Ok(Gpu {
            id: NEXT_GPU_ID.fetch_add(1, Ordering::Relaxed),
            name: format!("WGPU{index}"),
            f16: device.features().contains(wgpu::Features::SHADER_F16),
            f64: device.features().contains(wgpu::Features::SHADER_F64),
            limits: device.limits(),
            info,
            device,
            queue,
            errors,
            kernels: wgsl::Cache::default(),
            allocated: AtomicU64::new(0),
            gelu_table: OnceLock::new(),
            rope_tables: Mutex::new(Vec::new()),
        })
    }

    /// `Err` with the first error wgpu reported since the last call, naming `what`.
    pub(crate) fn take_error(&self, what: &str) -> Result<()> {
        match lock(&self.errors).take() {
            Some(e) => Err(Error::Compute(format!("{} {what}: {e}", self.name))),
            None => Ok(()),
        }
    }

    /// `Err` if wgpu has reported an error not yet taken (leaves it for the stream).
    pub(crate) fn peek_error(&self, what: &str) -> Result<()> {
        match lock(&self.errors).as_ref() {
            Some(e) => Err(Error::Compute(format!("{} {what}: {e}", self.name))),
            None => Ok(()),
        }
    }

    /// Blocks until the queue has done `index` (or everything submitted, when `None`).
    pub(crate) fn wait(&self, index: Option<wgpu::SubmissionIndex>, what: &str) -> Result<()> {
        self.device
            .poll(wgpu::PollType::Wait {
                submission_index: index,
                timeout: None,
            })
            .map(|_| ())
            .map_err(|e| {
                Error::Compute(format!("{} {what}: waiting for the queue: {e}", self.name))
            })
    }
}

/// The ggml device of one adapter.
struct WgpuDevice {
    gpu: Arc<Gpu>,
    buft: BufferType,
}

impl DeviceImpl for WgpuDevice {
    fn name(&self) -> String {
        self.gpu.name.clone()
    }
    fn description(&self) -> String {
        let i = &self.gpu.info;
        let driver = [i.driver.as_str(), i.driver_info.as_str()]
            .iter()
            .filter(|s| !s.is_empty())
            .copied()
            .collect::<Vec<_>>()
            .join(" ");
        format!("{} ({:?}, {driver})", i.name, i.backend)
    }
    fn memory(&self) -> (usize, usize) {
        let (free, total, _) = memory::query(&self.gpu);
        (free, total)
    }
    fn dev_type(&self) -> DeviceType {
        match self.gpu.info.device_type {
            wgpu::DeviceType::IntegratedGpu | wgpu::DeviceType::Cpu => DeviceType::Igpu,
            _ => DeviceType::Gpu,
        }
    }
    fn device_id(&self) -> Option<String> {
        let id = &self.gpu.info.device_pci_bus_id;
        (!id.is_empty()).then(|| id.clone())
    }
    fn init_backend(&self, params: Option<&str>) -> Result<Box<dyn BackendImpl>> {
        if let Some(p) = params {
            return Err(Error::invalid(format!(
                "{}: init params {p:?} not understood (none are)",
                self.gpu.name
            )));
        }
        Ok(Box::new(engine::Engine::new(self.gpu.clone())))
    }
    fn buffer_type(&self) -> BufferType {
        self.buft.clone()
    }
    fn supports_op(&self, op: &Tensor) -> bool {
        ops::supports(&self.gpu, op)
    }
    fn supports_buft(&self, buft: &BufferType) -> bool {
        *buft == self.buft
    }
    fn offload_op(&self, op: &Tensor) -> bool {
        // GGML's rule for GPU backends: a batch of at least 32 rows is worth the transfer of
        // the weights.
        const MIN_BATCH_SIZE: i64 = 32;
        let batch = match op.op() {
            ggml::Op::GetRows => return false,
            _ => op.ne()[1],
        };
        batch >= MIN_BATCH_SIZE && ops::supports(&self.gpu, op)
    }
    fn features(&self) -> Vec<(String, String)> {
        vec![
            ("BACKEND".into(), format!("{:?}", self.gpu.info.backend)),
            // Whether the kernels use the adapter's SHADER_F16 (off with DISABLE_F16_ENV).
            ("SHADER_F16".into(), (self.gpu.f16 as u8).to_string()),
            // Whether the kernels use the adapter's SHADER_F64 (off with DISABLE_F64_ENV).
            ("SHADER_F64".into(), (self.gpu.f64 as u8).to_string()),
            (
                "MAX_BUFFER".into(),
                buffer::max_buffer_size(&self.gpu).to_string(),
            ),
            // Where `memory()`'s free figure comes from.
            ("MEMORY".into(), memory::query(&self.gpu).2.into()),
        ]
    }
}

/// The wgpu backends this crate is built with: Vulkan, Metal and DX12.
fn backends() -> wgpu::Backends {
    wgpu::Backends::VULKAN | wgpu::Backends::METAL | wgpu::Backends::DX12
}

/// Opens every adapter wgpu finds (Vulkan, Metal, DX12) and makes one ggml device for each,
/// in wgpu's order (adapters that cannot be opened are left out); the first time only.
fn opened() -> &'static (Registry, Vec<Arc<Gpu>>) {
    static OPENED: OnceLock<(Registry, Vec<Arc<Gpu>>)> = OnceLock::new();
    OPENED.get_or_init(|| {
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
            backends: backends(),
            ..wgpu::InstanceDescriptor::new_without_display_handle()
        });
        let adapters = block_on(instance.enumerate_adapters(backends()));
        let mut gpus = Vec::new();
        let mut devices = Vec::new();
        for adapter in &adapters {
            if let Ok(gpu) = Gpu::open(gpus.len(), adapter) {
                let gpu = Arc::new(gpu);
                let buft = BufferType::new(buffer::WgpuBufferType::new(gpu.clone()));
                devices.push(Device::new(WgpuDevice {
                    gpu: gpu.clone(),
                    buft,
                }));
                gpus.push(gpu);
            }
        }
        (Registry::from_devices(REGISTRY_NAME, devices), gpus)
    })
}

/// Whether the device's float products and attention follow the float order the CPU backend
/// takes in this process, so that they give the CPU's bits (on an adapter with `SHADER_F64`):
/// the shaders reproduce the orders of the CPU's AVX-512 path (AVX-512 F/BW/VL/VNNI, with
/// `GGML_CPU_FORCE` not naming a narrower path). On the CPU's AVX2 or portable path (GGML's
/// orders for those builds: other lane counts, band products for quantized batches) the device's
/// results agree with the CPU's to f32 rounding, not bit for bit.
pub fn follows_the_cpus_order() -> bool {
    ops::cpu_avx512()
}

/// The registry of this process's wgpu devices, opened the first time (it may be empty).
pub fn registry() -> Registry {
    opened().0.clone()
}

/// Registers [`registry`] with `ggml` (once; later calls return the same registry), so that
/// `ggml::backend::dev_by_name("WGPU0")` and the scheduler find its devices. `Err` when wgpu
/// finds no adapter.
pub fn register() -> Result<Registry> {
    let reg = registry();
    if reg.dev_count() == 0 {
        return Err(Error::unsupported(
            "ggml-wgpu: wgpu found no adapter (Vulkan, Metal or DX12); on Debian, \
             `apt-get install mesa-vulkan-drivers libvulkan1` gives a software one",
        ));
    }
    ggml::backend::register(reg.clone());
    Ok(reg)
}

#[cfg(test)]
mod tests {
    use ggml::{backend, Context, Type};

    #[test]
    fn a_kernel_is_compiled_once_per_device() {
        let Some(gpu) = super::opened().1.first() else {
            eprintln!("SKIPPED: no wgpu adapter");
            return;
        };
        let dev = super::registry().dev_get(0).unwrap();
        let stream = dev.init(None).unwrap();
        let ctx = Context::init(1 << 20, true).unwrap();
        let a = ctx.new_tensor_2d(Type::F32, 33, 3).unwrap();
        let b = ctx.neg(&ctx.silu(&a).unwrap()).unwrap();
        let graph = ctx.build_forward_expand(&b).unwrap();
        let _buf = backend::alloc_ctx_tensors(&ctx, &stream).unwrap();
        a.set_f32(&[1.5; 99]).unwrap();
        stream.graph_compute(&graph).unwrap();
        let compiled = gpu.kernels.len();
        for _ in 0..3 {
            stream.graph_compute(&graph).unwrap();
        }
        assert_eq!(gpu.kernels.len(), compiled);
        let want = -(1.5 / (1.0 + (-1.5f32).exp()));
        assert!(b
            .get_f32()
            .unwrap()
            .iter()
            .all(|&v| (v - want).abs() < 1e-6));
    }
}
