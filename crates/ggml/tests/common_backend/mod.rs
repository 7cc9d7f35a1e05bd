//! Helpers shared by the `backend_*` tests: a device implemented here, outside the crate, through
//! the public traits (buffer type, buffers, device, backend, registry), a gate that holds a
//! stream still so asynchronous work can be observed before it runs, and error assertions.
//!
//! The test device ("TestAccel" by default) computes ADD and MUL of contiguous F32 tensors with
//! its own loops; a node whose name starts with `fail` makes its compute return an error, and
//! its streams wait for the device's gate before each graph.
#![allow(dead_code)]

use std::fmt::Debug;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use ggml::backend::{
    BackendImpl, BufferImpl, BufferTypeImpl, DeviceImpl, HostMemory, Place, PlacedGraph,
    RegistryImpl,
};
use ggml::{
    Backend, BufferType, Context, Device, DeviceCaps, DeviceType, Error, Event, Graph, Op,
    Registry, Result, Tensor, Type,
};

// ---- assertions ---------------------------------------------------------------------------

/// Asserts that `r` failed and that its message contains every one of `needles`; returns the
/// error for further checks.
#[track_caller]
pub fn expect_err<T: Debug>(r: Result<T>, needles: &[&str]) -> Error {
    let e = match r {
        Ok(v) => panic!("expected an error mentioning {needles:?}, got Ok({v:?})"),
        Err(e) => e,
    };
    let msg = e.to_string();
    for n in needles {
        assert!(msg.contains(n), "error {msg:?} does not mention {n:?}");
    }
    e
}

/// Asserts two f32 slices agree within `tol` relative to the reference's magnitude.
#[track_caller]
pub fn assert_close(got: &[f32], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let err = (g as f64 - w).abs();
        assert!(
            err <= tol * w.abs().max(1.0),
            "element {i}: got {g}, want {w} (error {err})"
        );
    }
}

/// The bytes of a slice of f32 values (little-endian, as tensors store them).
pub fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// f32 values from their bytes.
pub fn bytes_f32(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// A deterministic input of `n` values in roughly [-4, 4), different for each `seed`.
pub fn input(n: usize, seed: u32) -> Vec<f32> {
    (0..n as u32)
        .map(|i| {
            let h = (i.wrapping_mul(2_654_435_761) ^ seed.wrapping_mul(40_503)) % 8000;
            h as f32 / 1000.0 - 4.0
        })
        .collect()
}

// ---- a gate that holds a stream still -----------------------------------------------------

/// A gate: closed, streams that wait on it stop; opened, they go on. Clones share the gate.
#[derive(Clone, Default)]
pub struct Gate(Arc<(Mutex<bool>, Condvar)>);

impl Gate {
    /// A gate that starts closed.
    pub fn closed() -> Gate {
        Gate::default()
    }

    /// A gate that starts open (streams never wait).
    pub fn open_gate() -> Gate {
        let g = Gate::default();
        g.open();
        g
    }

    /// Opens the gate; every waiter goes on.
    pub fn open(&self) {
        *lock(&self.0 .0) = true;
        self.0 .1.notify_all();
    }

    /// Blocks until the gate is open.
    pub fn wait(&self) {
        let mut g = lock(&self.0 .0);
        while !*g {
            g = self.0 .1.wait(g).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Opens the gate from another thread after `ms` milliseconds.
    pub fn open_after(&self, ms: u64) -> std::thread::JoinHandle<()> {
        let g = self.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(ms));
            g.open();
        })
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Holds a stream still: a gated test stream runs a job that waits for the gate, records an
/// event after it, and the held stream waits for that event. Work queued on the held stream
/// after [`Hold::new`] cannot start before [`Hold::release`] (or the hold is dropped).
pub struct Hold {
    gate: Gate,
    // Kept alive until the hold ends; dropping it waits for its (gated) job.
    _blocker: Backend,
}

impl Hold {
    /// Holds `stream` still.
    pub fn new(stream: &Backend) -> Hold {
        let gate = Gate::closed();
        let dev = TestDevice::builder("Blocker").gate(gate.clone()).build();
        let blocker = dev.init(None).expect("blocker stream");
        let ctx = Context::init(1 << 16, true).expect("context");
        let empty = ctx.new_graph_custom(1, false).expect("graph");
        blocker
            .graph_compute_async(&empty)
            .expect("queue the gated job");
        let ev = Event::new(&dev).expect("event");
        ev.record(&blocker).expect("record");
        stream.event_wait(&ev).expect("event_wait");
        Hold {
            gate,
            _blocker: blocker,
        }
    }

    /// Lets the held stream go on.
    pub fn release(&self) {
        self.gate.open();
    }

    /// Lets the held stream go on from another thread after `ms` milliseconds.
    pub fn release_after(&self, ms: u64) -> std::thread::JoinHandle<()> {
        self.gate.open_after(ms)
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        // Never leave a stream held (a failing test must fail, not hang).
        self.gate.open();
    }
}

// ---- buffers ------------------------------------------------------------------------------

/// What the test buffers saw, and switches that change how they behave.
#[derive(Default)]
pub struct Probe {
    /// Buffers allocated, with their sizes.
    pub allocs: Mutex<Vec<usize>>,
    /// `init_tensor` calls: (tensor name, offset).
    pub inits: Mutex<Vec<(String, usize)>>,
    /// `reset` calls.
    pub resets: AtomicUsize,
    /// Buffers whose memory was released.
    pub drops: AtomicUsize,
    /// When set, reads panic (an implementation bug the stream must survive).
    pub panic_on_read: AtomicBool,
}

impl Probe {
    /// The recorded `init_tensor` calls.
    pub fn inits(&self) -> Vec<(String, usize)> {
        lock(&self.inits).clone()
    }

    /// The recorded allocation sizes.
    pub fn allocs(&self) -> Vec<usize> {
        lock(&self.allocs).clone()
    }
}

/// Memory of the test buffer type: [`HostMemory`] plus the probe. A tensor named `refuse` makes
/// `init_tensor` fail.
struct TestMemory {
    mem: HostMemory,
    probe: Arc<Probe>,
}

// SAFETY: the memory is `mem`'s, which upholds the contract; the probe touches no bytes.
unsafe impl BufferImpl for TestMemory {
    fn size(&self) -> usize {
        self.mem.size()
    }
    fn host_ptr(&self) -> Option<NonNull<u8>> {
        self.mem.host_ptr()
    }
    unsafe fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        // SAFETY: forwarded from this method's contract.
        unsafe { self.mem.write(offset, data) }
    }
    unsafe fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        if self.probe.panic_on_read.load(Ordering::SeqCst) {
            panic!("TestMemory: read at {offset} panicked on purpose");
        }
        // SAFETY: forwarded from this method's contract.
        unsafe { self.mem.read(offset, out) }
    }
    unsafe fn fill(&self, offset: usize, size: usize, value: u8) -> Result<()> {
        // SAFETY: forwarded from this method's contract.
        unsafe { self.mem.fill(offset, size, value) }
    }
    fn init_tensor(&self, t: &Tensor, offset: usize) -> Result<()> {
        if t.name() == "refuse" {
            return Err(Error::invalid(format!(
                "TestMemory: init_tensor refuses tensor {:?} at offset {offset}",
                t.name()
            )));
        }
        lock(&self.probe.inits).push((t.name(), offset));
        Ok(())
    }
    fn reset(&self) {
        self.probe.resets.fetch_add(1, Ordering::SeqCst);
    }
}

impl Drop for TestMemory {
    fn drop(&mut self) {
        self.probe.drops.fetch_add(1, Ordering::SeqCst);
    }
}

/// A buffer type over [`HostMemory`] with a chosen name, maximum size and host flag.
struct TestBufferType {
    name: String,
    max_size: usize,
    is_host: bool,
    probe: Arc<Probe>,
}

/// Alignment of the test buffer type.
pub const TEST_ALIGN: usize = 32;

impl BufferTypeImpl for TestBufferType {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn alloc_buffer(&self, size: usize) -> Result<Box<dyn BufferImpl>> {
        lock(&self.probe.allocs).push(size);
        Ok(Box::new(TestMemory {
            mem: HostMemory::new(size)?,
            probe: self.probe.clone(),
        }))
    }
    fn alignment(&self) -> usize {
        TEST_ALIGN
    }
    fn max_size(&self) -> usize {
        self.max_size
    }
    fn is_host(&self) -> bool {
        self.is_host
    }
}

/// A test buffer type and its probe.
pub fn test_buft(name: &str, max_size: usize, is_host: bool) -> (BufferType, Arc<Probe>) {
    let probe = Arc::new(Probe::default());
    let buft = BufferType::new(TestBufferType {
        name: name.to_string(),
        max_size,
        is_host,
        probe: probe.clone(),
    });
    (buft, probe)
}

// ---- the device and its streams -----------------------------------------------------------

/// The test device: see the module documentation.
pub struct TestDevice {
    name: String,
    dev_type: DeviceType,
    buft: BufferType,
    gate: Gate,
    graphs: Arc<AtomicUsize>,
    caps: DeviceCaps,
}

/// Builds a [`TestDevice`].
pub struct TestDeviceBuilder {
    name: String,
    dev_type: DeviceType,
    buft: Option<BufferType>,
    gate: Gate,
    graphs: Arc<AtomicUsize>,
    caps: DeviceCaps,
}

impl TestDeviceBuilder {
    /// The device type (default GPU).
    pub fn dev_type(mut self, t: DeviceType) -> Self {
        self.dev_type = t;
        self
    }
    /// The buffer type (default: device memory named after the device, not host, no limit).
    pub fn buft(mut self, b: BufferType) -> Self {
        self.buft = Some(b);
        self
    }
    /// The gate every graph waits for (default: open).
    pub fn gate(mut self, g: Gate) -> Self {
        self.gate = g;
        self
    }
    /// A counter of graphs computed by the device's streams.
    pub fn count_graphs(mut self, c: Arc<AtomicUsize>) -> Self {
        self.graphs = c;
        self
    }
    /// The capabilities the device reports (default: `DeviceCaps::default()`).
    pub fn caps(mut self, caps: DeviceCaps) -> Self {
        self.caps = caps;
        self
    }
    /// The device handle.
    pub fn build(self) -> Device {
        let buft = self
            .buft
            .unwrap_or_else(|| test_buft(&self.name, usize::MAX, false).0);
        Device::new(TestDevice {
            name: self.name,
            dev_type: self.dev_type,
            buft,
            gate: self.gate,
            graphs: self.graphs,
            caps: self.caps,
        })
    }
}

impl TestDevice {
    /// Starts building a device named `name`.
    pub fn builder(name: &str) -> TestDeviceBuilder {
        TestDeviceBuilder {
            name: name.to_string(),
            dev_type: DeviceType::Gpu,
            buft: None,
            gate: Gate::open_gate(),
            graphs: Arc::default(),
            caps: DeviceCaps::default(),
        }
    }
}

/// Whether the test device computes `op`: ADD or MUL of contiguous F32 tensors, `b` tiled over
/// `a`; ops that compute nothing are fine too.
fn test_supports(op: &Tensor) -> bool {
    if op.op().is_empty() {
        return true;
    }
    if !matches!(op.op(), Op::Add | Op::Mul) {
        return false;
    }
    let (Some(a), Some(b)) = (op.src(0), op.src(1)) else {
        return false;
    };
    [op, a, b]
        .iter()
        .all(|t| t.ty() == Type::F32 && t.is_contiguous())
        && b.can_repeat(a)
}

impl DeviceImpl for TestDevice {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn description(&self) -> String {
        format!("{} (a device implemented by the tests)", self.name)
    }
    fn memory(&self) -> (usize, usize) {
        (1 << 20, 2 << 20)
    }
    fn dev_type(&self) -> DeviceType {
        self.dev_type
    }
    fn device_id(&self) -> Option<String> {
        Some("0000:00:00.0".into())
    }
    fn caps(&self) -> DeviceCaps {
        self.caps
    }
    fn init_backend(&self, params: Option<&str>) -> Result<Box<dyn BackendImpl>> {
        if let Some(p) = params {
            return Err(Error::invalid(format!(
                "{}: init params {p:?} not understood (none are)",
                self.name
            )));
        }
        Ok(Box::new(TestBackend {
            name: self.name.clone(),
            gate: self.gate.clone(),
            graphs: self.graphs.clone(),
        }))
    }
    fn buffer_type(&self) -> BufferType {
        self.buft.clone()
    }
    fn supports_op(&self, op: &Tensor) -> bool {
        test_supports(op)
    }
    fn supports_buft(&self, buft: &BufferType) -> bool {
        *buft == self.buft
    }
    fn offload_op(&self, op: &Tensor) -> bool {
        op.op() == Op::Mul
    }
    fn features(&self) -> Vec<(String, String)> {
        vec![("LOOPS".into(), "1".into())]
    }
}

/// A stream's compute engine on the test device.
struct TestBackend {
    name: String,
    gate: Gate,
    graphs: Arc<AtomicUsize>,
}

/// The address of the first element at `place` (a node or operand of the running job).
fn elements(place: Option<Place<'_>>) -> *mut f32 {
    place
        .and_then(|p| p.host_ptr())
        .expect("test device tensors are in host-addressable memory")
        .as_ptr() as *mut f32
}

impl BackendImpl for TestBackend {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn graph_compute(&mut self, graph: &PlacedGraph<'_>) -> Result<()> {
        self.gate.wait();
        self.graphs.fetch_add(1, Ordering::SeqCst);
        for (i, n) in graph.nodes().iter().enumerate() {
            if n.op().is_empty() {
                continue;
            }
            if n.name().starts_with("fail") {
                return Err(Error::Compute(format!(
                    "{}: node {:?} failed on purpose",
                    self.name,
                    n.name()
                )));
            }
            let (a, b) = (n.src(0).expect("ADD/MUL has a"), n.src(1).expect("and b"));
            let (na, nb) = (a.nelements() as usize, b.nelements() as usize);
            let (ane, bne) = (a.ne(), b.ne());
            let f: fn(f32, f32) -> f32 = match n.op() {
                Op::Add => |x, y| x + y,
                Op::Mul => |x, y| x * y,
                other => {
                    return Err(Error::unsupported(format!(
                        "{}: no loop for {}",
                        self.name,
                        other.name()
                    )))
                }
            };
            let (pd, pa, pb) = (
                elements(graph.place(i)),
                elements(graph.src_place(i, 0)),
                elements(graph.src_place(i, 1)),
            );
            // SAFETY: the stream runs this job with every buffer of the graph reserved for it;
            // the three places hold contiguous F32 tensors (supports_op) of `na`, `na` and `nb`
            // elements. The result may alias `a` (in-place ops), so only raw pointers are used.
            unsafe {
                for i in 0..na {
                    // Index of b tiled over a: each coordinate of a modulo b's extent.
                    let (mut rest, mut j, mut stride) = (i, 0usize, 1usize);
                    for d in 0..ggml::MAX_DIMS {
                        let (ea, eb) = (ane[d] as usize, bne[d] as usize);
                        j += (rest % ea % eb) * stride;
                        rest /= ea;
                        stride *= eb;
                    }
                    debug_assert!(j < nb);
                    *pd.add(i) = f(*pa.add(i), *pb.add(j));
                }
            }
        }
        Ok(())
    }
}

/// A registry of test devices.
pub struct TestRegistry {
    pub name: String,
    pub devices: Vec<Device>,
}

impl RegistryImpl for TestRegistry {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn devices(&self) -> Vec<Device> {
        self.devices.clone()
    }
    fn features(&self) -> Vec<(String, String)> {
        vec![("TEST".into(), "1".into())]
    }
}

/// A registry handle over `devices`.
pub fn test_registry(name: &str, devices: Vec<Device>) -> Registry {
    Registry::new(TestRegistry {
        name: name.to_string(),
        devices,
    })
}

// ---- small graphs -------------------------------------------------------------------------

/// `y = relu(x) * w + x` over `n` F32 values, in a fresh `no_alloc == false` context: the
/// tensors (x, w, y) and the graph.
pub fn relu_mul_add(n: i64) -> (Context, Tensor, Tensor, Tensor, Graph) {
    let ctx = Context::init(1 << 20, false).expect("context");
    let x = ctx.new_tensor_1d(Type::F32, n).expect("x");
    let w = ctx.new_tensor_1d(Type::F32, n).expect("w");
    let r = ctx.relu(&x).expect("relu");
    let m = ctx.mul(&r, &w).expect("mul");
    let y = ctx.add(&m, &x).expect("add");
    let g = ctx.build_forward_expand(&y).expect("graph");
    (ctx, x, w, y, g)
}

/// The f64 reference of [`relu_mul_add`].
pub fn relu_mul_add_ref(x: &[f32], w: &[f32]) -> Vec<f64> {
    x.iter()
        .zip(w)
        .map(|(&x, &w)| (x as f64).max(0.0) * w as f64 + x as f64)
        .collect()
}
