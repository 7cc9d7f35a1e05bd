//! # ggml-testdev
//!
//! A device for testing `ggml`'s backend system with memory that is **not** host memory, written
//! only against `ggml`'s public traits (this crate cannot reach anything else).
//!
//! A [`Server`] is a thread that owns the bytes of every buffer allocated on its devices and
//! serves reads, writes, fills, copies and graph computations over a channel, in the order they
//! arrive — like a GPU's queue or a remote machine. Its buffers have no host address
//! ([`ggml::backend::BufferImpl::host_ptr`] is `None`), so the library reaches them only
//! through the traits:
//!
//! - buffers: `write`/`read`/`fill` are requests to the server; `cpy_tensor` copies on the
//!   server when the source is a buffer of the same server (no byte crosses the channel);
//! - streams: the engine has a queue of its own ([`ggml::backend::BackendImpl::has_own_queue`]):
//!   `graph_compute`, `set_tensor_async` and `cpy_tensor_async` are sent without waiting,
//!   `synchronize` waits for the server's reply, `event_record` queues a marker on the server,
//!   and `event_wait` on a marker of the same server costs nothing (the server's order is the
//!   wait);
//! - computing: the engine finds its own buffers among the graph's places (by downcasting) and
//!   sends the nodes with their (buffer, offset) places; the server computes them with the
//!   public CPU backend on its own copy of the bytes ([`ggml::Backend::graph_compute_at`]).
//!
//! [`Counts`] says what the server did, so tests can tell which path a transfer took.
//!
//! ```
//! use ggml::{backend, Context, Type};
//! # fn main() -> ggml::Result<()> {
//! let server = ggml_testdev::Server::start("doc")?;
//! let dev = server.device("DocRemote0");
//! let stream = dev.init(None)?;
//! let ctx = Context::init(1 << 20, true)?;
//! let a = ctx.new_tensor_1d(Type::F32, 4)?;
//! let b = ctx.relu(&a)?;
//! let graph = ctx.build_forward_expand(&b)?;
//! let buf = backend::alloc_ctx_tensors(&ctx, &stream)?;
//! assert!(buf.get_base().is_none(), "not host memory");
//! a.set_f32(&[-1.0, 2.0, -3.0, 4.0])?;
//! stream.graph_compute(&graph)?;
//! assert_eq!(b.get_f32()?, vec![0.0, 2.0, 0.0, 4.0]);
//! # Ok(()) }
//! ```

use std::collections::HashMap;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use ggml::backend::{
    self, BackendImpl, BufferImpl, BufferTypeImpl, DeviceImpl, EventImpl, Place, PlacedGraph,
};
use ggml::{
    Backend, Buffer, BufferType, Context, Device, DeviceType, Error, Registry, Result, Tensor, Type,
};

/// Alignment of tensors in a server's buffers.
pub const ALIGNMENT: usize = 32;

/// Memory a server's devices report (free, total).
const MEMORY: usize = 1 << 30;

static NEXT_SERVER_ID: AtomicU64 = AtomicU64::new(1);

/// What a server has done since it started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Buffers allocated.
    pub allocs: usize,
    /// Buffers freed.
    pub frees: usize,
    /// Writes of bytes sent by the host (buffer writes and `set_tensor_async`).
    pub writes: usize,
    /// Reads of bytes sent back to the host.
    pub reads: usize,
    /// Fills.
    pub fills: usize,
    /// Copies between buffers done on the server (no byte crossed the channel).
    pub copies: usize,
    /// Graphs computed.
    pub computes: usize,
    /// Event markers passed.
    pub marks: usize,
    /// Synchronizations answered.
    pub syncs: usize,
    /// Event waits that the server's order satisfied without blocking a stream.
    pub native_waits: usize,
    /// All-reduces done by a device of [`Server::device_with_all_reduce`].
    pub all_reduces: usize,
}

#[derive(Default)]
struct Counters {
    allocs: AtomicUsize,
    frees: AtomicUsize,
    writes: AtomicUsize,
    reads: AtomicUsize,
    fills: AtomicUsize,
    copies: AtomicUsize,
    computes: AtomicUsize,
    marks: AtomicUsize,
    syncs: AtomicUsize,
    native_waits: AtomicUsize,
    all_reduces: AtomicUsize,
}

fn bump(c: &AtomicUsize) {
    c.fetch_add(1, Ordering::SeqCst);
}

impl Counters {
    fn snapshot(&self) -> Counts {
        let g = |c: &AtomicUsize| c.load(Ordering::SeqCst);
        Counts {
            allocs: g(&self.allocs),
            frees: g(&self.frees),
            writes: g(&self.writes),
            reads: g(&self.reads),
            fills: g(&self.fills),
            copies: g(&self.copies),
            computes: g(&self.computes),
            marks: g(&self.marks),
            syncs: g(&self.syncs),
            native_waits: g(&self.native_waits),
            all_reduces: g(&self.all_reduces),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

// ---- the server --------------------------------------------------------------------------

/// Where bytes are on a server: a buffer id and an offset.
type At = (u64, usize);

/// A request to a server. Requests with a `reply` are answered; the first error of the others
/// is kept and answered by the next [`Cmd::Sync`].
enum Cmd {
    Alloc {
        size: usize,
        reply: Sender<Result<u64>>,
    },
    Free {
        buf: u64,
    },
    Write {
        at: At,
        data: Vec<u8>,
        reply: Option<Sender<Result<()>>>,
    },
    Read {
        at: At,
        size: usize,
        reply: Sender<Result<Vec<u8>>>,
    },
    Fill {
        at: At,
        size: usize,
        value: u8,
        reply: Sender<Result<()>>,
    },
    Copy {
        src: At,
        dst: At,
        size: usize,
        reply: Option<Sender<Result<()>>>,
    },
    Compute {
        nodes: Vec<Tensor>,
        /// Every node's and operand's place, by tensor id.
        places: HashMap<u64, At>,
    },
    Mark(Arc<Marker>),
    Sync {
        reply: Sender<Result<()>>,
    },
}

/// One buffer's bytes on the server: a host buffer only the server touches, and a byte tensor
/// over all of it for reading and writing ranges.
struct Mirror {
    buffer: Buffer,
    bytes: Tensor,
    _ctx: Context,
}

impl Mirror {
    fn new(size: usize) -> Result<Mirror> {
        let buffer = backend::cpu_buffer_type().alloc_buffer(size)?;
        let ctx = Context::init(4 * ggml::tensor_overhead(), true)?;
        let len = i64::try_from(size)
            .map_err(|_| Error::invalid(format!("testdev: buffer of {size} bytes is too large")))?;
        let bytes = ctx.new_tensor_1d(Type::I8, len)?;
        backend::tensor_alloc(&buffer, &bytes, 0)?;
        Ok(Mirror {
            buffer,
            bytes,
            _ctx: ctx,
        })
    }
}

struct ServerState {
    mirrors: HashMap<u64, Mirror>,
    next_buf: u64,
    cpu: Backend,
    /// The first error of a request without a reply, since the last sync.
    error: Option<Error>,
    counts: Arc<Counters>,
}

impl ServerState {
    fn mirror(&self, buf: u64) -> Result<&Mirror> {
        self.mirrors
            .get(&buf)
            .ok_or_else(|| Error::invalid(format!("testdev server: no buffer {buf}")))
    }

    fn read(&self, (buf, offset): At, size: usize) -> Result<Vec<u8>> {
        let mut out = vec![0u8; size];
        self.mirror(buf)?.bytes.get_bytes(&mut out, offset)?;
        Ok(out)
    }

    fn write(&self, (buf, offset): At, data: &[u8]) -> Result<()> {
        self.mirror(buf)?.bytes.set_bytes(data, offset)
    }

    fn compute(&self, nodes: &[Tensor], places: &HashMap<u64, At>) -> Result<()> {
        self.cpu.graph_compute_at(nodes, |t| {
            let &(buf, offset) = places.get(&t.id())?;
            Some((self.mirrors.get(&buf)?.buffer.clone(), offset))
        })
    }

    /// Serves one request.
    fn serve(&mut self, cmd: Cmd) {
        let c = self.counts.clone();
        match cmd {
            Cmd::Alloc { size, reply } => {
                let r = Mirror::new(size).map(|m| {
                    self.next_buf += 1;
                    self.mirrors.insert(self.next_buf, m);
                    bump(&c.allocs);
                    self.next_buf
                });
                let _ = reply.send(r);
            }
            Cmd::Free { buf } => {
                if self.mirrors.remove(&buf).is_some() {
                    bump(&c.frees);
                }
            }
            Cmd::Write { at, data, reply } => {
                bump(&c.writes);
                let r = self.write(at, &data);
                self.answer(reply, r);
            }
            Cmd::Read { at, size, reply } => {
                bump(&c.reads);
                let _ = reply.send(self.read(at, size));
            }
            Cmd::Fill {
                at: (buf, offset),
                size,
                value,
                reply,
            } => {
                bump(&c.fills);
                let r = self
                    .mirror(buf)
                    .and_then(|m| backend::tensor_memset(&m.bytes, value, offset, size));
                let _ = reply.send(r);
            }
            Cmd::Copy {
                src,
                dst,
                size,
                reply,
            } => {
                bump(&c.copies);
                let r = self.read(src, size).and_then(|b| self.write(dst, &b));
                self.answer(reply, r);
            }
            Cmd::Compute { nodes, places } => {
                bump(&c.computes);
                let r = self.compute(&nodes, &places);
                self.answer(None, r);
            }
            Cmd::Mark(m) => {
                bump(&c.marks);
                m.reach(self.error.clone());
            }
            Cmd::Sync { reply } => {
                bump(&c.syncs);
                let _ = reply.send(self.error.take().map_or(Ok(()), Err));
            }
        }
    }

    /// Sends `r` to `reply`, or keeps its error for the next sync when nobody waits for it.
    fn answer(&mut self, reply: Option<Sender<Result<()>>>, r: Result<()>) {
        match reply {
            Some(reply) => {
                let _ = reply.send(r);
            }
            None => {
                if let Err(e) = r {
                    self.error.get_or_insert(e);
                }
            }
        }
    }
}

fn serve(rx: Receiver<Cmd>, mut state: ServerState) {
    // Ends when every sender (the server handle, its devices, buffers and streams) is gone.
    while let Ok(cmd) = rx.recv() {
        state.serve(cmd);
    }
}

/// The client side of a server: its id, its request channel, its counters, and whether its
/// thread still runs.
struct Link {
    id: u64,
    name: String,
    tx: Sender<Cmd>,
    counts: Arc<Counters>,
    alive: Arc<AtomicBool>,
}

/// Clears a server's `alive` flag when its thread ends, however it ends.
struct AliveGuard(Arc<AtomicBool>);

impl Drop for AliveGuard {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

impl Link {
    fn stopped(&self) -> Error {
        Error::Compute(format!("testdev server {}: the server stopped", self.name))
    }

    /// Sends a request without waiting.
    fn send(&self, cmd: Cmd) -> Result<()> {
        self.tx.send(cmd).map_err(|_| self.stopped())
    }

    /// Sends a request and waits for its reply.
    fn call<T>(&self, make: impl FnOnce(Sender<Result<T>>) -> Cmd) -> Result<T> {
        let (tx, rx) = mpsc::channel();
        self.send(make(tx))?;
        rx.recv().map_err(|_| self.stopped())?
    }
}

/// A server thread owning the memory of its devices (see the crate documentation). Cheap to
/// clone; the thread ends once the server, its devices, buffers and streams are all dropped.
#[derive(Clone)]
pub struct Server {
    link: Arc<Link>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Server({})", self.link.name)
    }
}

impl Server {
    /// Starts a server thread named after `name`; it computes with a CPU stream of its own.
    pub fn start(name: &str) -> Result<Server> {
        let (tx, rx) = mpsc::channel();
        let (ready_tx, ready_rx) = mpsc::channel();
        let counts = Arc::new(Counters::default());
        let server_counts = counts.clone();
        let alive = Arc::new(AtomicBool::new(true));
        let guard = AliveGuard(alive.clone());
        std::thread::Builder::new()
            .name(format!("testdev-{name}"))
            .spawn(move || {
                let _alive = guard;
                match backend::cpu_init() {
                    Ok(cpu) => {
                        let _ = ready_tx.send(Ok(()));
                        let state = ServerState {
                            mirrors: HashMap::new(),
                            next_buf: 0,
                            cpu,
                            error: None,
                            counts: server_counts,
                        };
                        serve(rx, state);
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                    }
                }
            })
            .map_err(|e| Error::AllocFailed(format!("testdev: cannot start a server: {e}")))?;
        let link = Link {
            id: NEXT_SERVER_ID.fetch_add(1, Ordering::Relaxed),
            name: name.to_string(),
            tx,
            counts,
            alive,
        };
        ready_rx.recv().map_err(|_| link.stopped())??;
        Ok(Server {
            link: Arc::new(link),
        })
    }

    /// A new device named `name` whose memory lives on this server. Devices of one server can
    /// copy between their buffers on the server.
    pub fn device(&self, name: &str) -> Device {
        self.device_with_ops(name, |_| true)
    }

    /// A device as [`Server::device`] that computes only the ops `only` accepts (of those the
    /// CPU computes): for tests of code that spreads a graph over several devices.
    pub fn device_with_ops(
        &self,
        name: &str,
        only: impl Fn(&Tensor) -> bool + Send + Sync + 'static,
    ) -> Device {
        self.make_device(name, Box::new(only), false)
    }

    /// A device as [`Server::device`] that sums tensors across the streams of a meta device
    /// itself ([`ggml::backend::DeviceImpl::all_reduce`], when it is a meta device's first
    /// member), counted in [`Counts::all_reduces`].
    pub fn device_with_all_reduce(&self, name: &str) -> Device {
        self.make_device(name, Box::new(|_| true), true)
    }

    fn make_device(&self, name: &str, only: OpFilter, all_reduce: bool) -> Device {
        let buft = BufferType::new(RemoteBufferType {
            name: name.to_string(),
            link: self.link.clone(),
        });
        Device::new(RemoteDevice {
            name: name.to_string(),
            link: self.link.clone(),
            buft,
            only,
            all_reduce,
        })
    }

    /// What the server has done so far.
    pub fn counts(&self) -> Counts {
        self.link.counts.snapshot()
    }
}

/// A registry named `name` over `devices`.
pub fn registry(name: &str, devices: Vec<Device>) -> Registry {
    Registry::from_devices(name, devices)
}

/// Starts a server, makes one device named `device_name` on it, and registers it with `ggml`
/// in a registry named `"TestDev"`, as a loaded backend would be: afterwards
/// `ggml::backend::dev_by_name(device_name)` finds it.
pub fn register(device_name: &str) -> Result<(Server, Device)> {
    let server = Server::start(device_name)?;
    let dev = server.device(device_name);
    backend::register(registry("TestDev", vec![dev.clone()]));
    Ok((server, dev))
}

// ---- buffers -------------------------------------------------------------------------------

struct RemoteBufferType {
    name: String,
    link: Arc<Link>,
}

impl BufferTypeImpl for RemoteBufferType {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn alloc_buffer(&self, size: usize) -> Result<Box<dyn BufferImpl>> {
        let id = self.link.call(|reply| Cmd::Alloc { size, reply })?;
        Ok(Box::new(RemoteBuffer {
            link: self.link.clone(),
            id,
            size,
        }))
    }
    fn alignment(&self) -> usize {
        ALIGNMENT
    }
}

/// A buffer whose bytes are on a server.
struct RemoteBuffer {
    link: Arc<Link>,
    id: u64,
    size: usize,
}

impl RemoteBuffer {
    /// Whether `other` is a buffer of the same server.
    fn same_server(&self, other: &RemoteBuffer) -> bool {
        self.link.id == other.link.id
    }
}

impl Drop for RemoteBuffer {
    fn drop(&mut self) {
        // A stopped server has no memory left to free.
        let _ = self.link.send(Cmd::Free { buf: self.id });
    }
}

// SAFETY: the buffer has no host address (`host_ptr` is `None`); its bytes are the server's,
// reached only through this implementation's requests, which the server serves one at a time.
unsafe impl BufferImpl for RemoteBuffer {
    fn size(&self) -> usize {
        self.size
    }
    fn host_ptr(&self) -> Option<NonNull<u8>> {
        None
    }
    unsafe fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        let data = data.to_vec();
        self.link.call(|reply| Cmd::Write {
            at: (self.id, offset),
            data,
            reply: Some(reply),
        })
    }
    unsafe fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        let size = out.len();
        let bytes = self.link.call(|reply| Cmd::Read {
            at: (self.id, offset),
            size,
            reply,
        })?;
        out.copy_from_slice(&bytes);
        Ok(())
    }
    unsafe fn fill(&self, offset: usize, size: usize, value: u8) -> Result<()> {
        self.link.call(|reply| Cmd::Fill {
            at: (self.id, offset),
            size,
            value,
            reply,
        })
    }
    unsafe fn cpy_tensor(
        &self,
        src: &dyn BufferImpl,
        src_offset: usize,
        offset: usize,
        size: usize,
    ) -> Result<bool> {
        match src.downcast_ref::<RemoteBuffer>() {
            Some(s) if self.same_server(s) => {
                self.link.call(|reply| Cmd::Copy {
                    src: (s.id, src_offset),
                    dst: (self.id, offset),
                    size,
                    reply: Some(reply),
                })?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}

// ---- the device and its engine -----------------------------------------------------------

struct RemoteDevice {
    name: String,
    link: Arc<Link>,
    buft: BufferType,
    /// Which ops the device computes (of those the CPU computes).
    only: OpFilter,
    /// Whether it sums tensors across streams itself.
    all_reduce: bool,
}

/// Which ops a device computes.
type OpFilter = Box<dyn Fn(&Tensor) -> bool + Send + Sync>;

/// The CPU device, whose kernels the server computes with.
fn cpu_device() -> Option<Device> {
    backend::dev_by_type(DeviceType::Cpu)
}

impl DeviceImpl for RemoteDevice {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn description(&self) -> String {
        format!(
            "{} (test device; memory in server thread {})",
            self.name, self.link.name
        )
    }
    fn memory(&self) -> (usize, usize) {
        (MEMORY, MEMORY)
    }
    fn dev_type(&self) -> DeviceType {
        DeviceType::Gpu
    }
    fn init_backend(&self, params: Option<&str>) -> Result<Box<dyn BackendImpl>> {
        if let Some(p) = params {
            return Err(Error::invalid(format!(
                "{}: init params {p:?} not understood (none are)",
                self.name
            )));
        }
        Ok(Box::new(RemoteEngine {
            name: self.name.clone(),
            link: self.link.clone(),
        }))
    }
    fn buffer_type(&self) -> BufferType {
        self.buft.clone()
    }
    fn supports_op(&self, op: &Tensor) -> bool {
        (self.only)(op) && cpu_device().is_some_and(|cpu| cpu.supports_op(op))
    }
    fn supports_buft(&self, buft: &BufferType) -> bool {
        *buft == self.buft
    }
    /// Sums F32 tensors through the host, in member order, once every stream is done.
    fn all_reduce(&self, backends: &[Backend], tensors: &[Tensor]) -> Result<bool> {
        if !self.all_reduce {
            return Ok(false);
        }
        backends.iter().try_for_each(Backend::synchronize)?;
        let mut sum: Option<Vec<f32>> = None;
        for t in tensors {
            let v = t.get_f32()?;
            match sum.as_mut() {
                None => sum = Some(v),
                Some(s) => s.iter_mut().zip(v).for_each(|(a, b)| *a += b),
            }
        }
        if let Some(s) = sum {
            tensors.iter().try_for_each(|t| t.set_f32(&s))?;
        }
        bump(&self.link.counts.all_reduces);
        Ok(true)
    }
}

/// A stream's engine on a server: a queue of its own (the server's channel).
struct RemoteEngine {
    name: String,
    link: Arc<Link>,
}

impl RemoteEngine {
    /// Where node or operand `t`'s place is on this engine's server.
    fn at(&self, place: Option<Place<'_>>, t: &Tensor) -> Result<At> {
        let what = format!("graph_compute (tensor {:?})", t.name());
        match place {
            Some(p) => self.own(p, &what),
            None => Err(Error::invalid(format!("{} {what}: no place", self.name))),
        }
    }

    /// Where `place` is on this engine's server; `Err` naming `what` otherwise.
    fn own(&self, place: Place<'_>, what: &str) -> Result<At> {
        place
            .downcast::<RemoteBuffer>()
            .filter(|(b, _)| b.link.id == self.link.id)
            .map(|(b, offset)| (b.id, offset))
            .ok_or_else(|| {
                Error::unsupported(format!(
                    "{} {what}: the bytes are not in the memory of server {}",
                    self.name, self.link.name
                ))
            })
    }
}

impl BackendImpl for RemoteEngine {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn graph_compute(&mut self, graph: &PlacedGraph<'_>) -> Result<()> {
        let mut places = HashMap::new();
        for (i, n) in graph.nodes().iter().enumerate() {
            places.insert(n.id(), self.at(graph.place(i), n)?);
            for j in 0..n.n_src_slots() {
                if let Some(s) = n.src(j) {
                    places.insert(s.id(), self.at(graph.src_place(i, j), s)?);
                }
            }
        }
        self.link.send(Cmd::Compute {
            nodes: graph.nodes().to_vec(),
            places,
        })
    }

    fn has_own_queue(&self) -> bool {
        true
    }

    fn synchronize(&mut self) -> Result<()> {
        self.link.call(|reply| Cmd::Sync { reply })
    }

    fn set_tensor_async(&mut self, dst: Place<'_>, data: &[u8]) -> Result<()> {
        let at = self.own(dst, "set_tensor_async")?;
        self.link.send(Cmd::Write {
            at,
            data: data.to_vec(),
            reply: None,
        })
    }

    fn get_tensor_async(&mut self, src: Place<'_>, out: &mut [u8]) -> Result<()> {
        let at = self.own(src, "get_tensor_async")?;
        let size = out.len();
        let bytes = self.link.call(|reply| Cmd::Read { at, size, reply })?;
        out.copy_from_slice(&bytes);
        Ok(())
    }

    fn cpy_tensor_async(&mut self, src: Place<'_>, dst: Place<'_>) -> Result<bool> {
        match (self.own(src, "copy"), self.own(dst, "copy")) {
            (Ok(src_at), Ok(dst_at)) => {
                self.link.send(Cmd::Copy {
                    src: src_at,
                    dst: dst_at,
                    size: dst.size(),
                    reply: None,
                })?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    fn event_record(&mut self) -> Result<Option<Arc<dyn EventImpl>>> {
        let marker = Arc::new(Marker {
            server: self.link.id,
            alive: self.link.alive.clone(),
            state: Mutex::new(None),
            cv: Condvar::new(),
        });
        self.link.send(Cmd::Mark(marker.clone()))?;
        Ok(Some(marker))
    }

    fn event_wait(&mut self, event: &dyn EventImpl) -> Result<bool> {
        // The server serves requests in order: work sent after this point comes after the
        // marker, whichever stream of the server recorded it.
        let ours = event
            .downcast_ref::<Marker>()
            .is_some_and(|m| m.server == self.link.id);
        if ours {
            bump(&self.link.counts.native_waits);
        }
        Ok(ours)
    }
}

/// A marker in a server's queue: reached when the server gets to it, with the server's first
/// unreported error at that time.
struct Marker {
    server: u64,
    /// Whether the server still runs (a marker a stopped server dropped is never reached).
    alive: Arc<AtomicBool>,
    state: Mutex<Option<Result<()>>>,
    cv: Condvar,
}

impl Marker {
    fn reach(&self, error: Option<Error>) {
        *lock(&self.state) = Some(error.map_or(Ok(()), Err));
        self.cv.notify_all();
    }
}

impl EventImpl for Marker {
    fn synchronize(&self) -> Result<()> {
        let mut s = lock(&self.state);
        loop {
            if let Some(r) = s.as_ref() {
                return r.clone();
            }
            if !self.alive.load(Ordering::SeqCst) {
                return Err(Error::Compute(
                    "testdev: the server stopped before it reached the event".into(),
                ));
            }
            s = (self.cv.wait_timeout(s, Duration::from_millis(20)))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
    fn is_reached(&self) -> bool {
        lock(&self.state).is_some()
    }
}
