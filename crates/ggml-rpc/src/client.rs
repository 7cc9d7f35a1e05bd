//! The client: remote devices as `ggml` devices (`ggml_backend_rpc_add_server`).
//!
//! One TCP connection per server, shared by its devices, buffers and streams; the server keeps
//! a connection's buffers until it closes. Requests go in order on the connection, so a stream
//! is a queue of its own: uploads and graph computations are sent without waiting, reads and
//! `synchronize` wait for the server's answer (a broken computation closes the connection, and
//! the next call that needs it returns `Err`). Every read and write has a timeout: a server
//! that stops answering is an `Err`, never a hang.

use std::collections::{HashMap, HashSet};
use std::io::{BufReader, BufWriter};
use std::net::{TcpStream, ToSocketAddrs};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use ggml::backend::{
    self, BackendImpl, BufferImpl, BufferTypeImpl, DeviceImpl, Place, PlacedGraph,
};
use ggml::{BufferType, Device, DeviceType, Error, Registry, Result, Tensor};

use crate::proto::{self, GraphMsg, Request, WireTensor, CONN_CAPS_SIZE};
use crate::wire;

/// How long a call waits for the server before it fails.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);
/// Largest piece of one transfer (the wire's 32-bit tensor sizes; GGML's 1 GiB chunk).
const CHUNK: usize = 1 << 30;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

struct Link {
    r: BufReader<TcpStream>,
    w: BufWriter<TcpStream>,
    /// Why the connection is unusable, once it is.
    dead: Option<String>,
}

/// A connection to one server.
struct Conn {
    endpoint: String,
    link: Mutex<Link>,
    /// The last GRAPH_COMPUTE payload sent per device, for GRAPH_RECOMPUTE.
    last_graph: Mutex<HashMap<u32, Vec<u8>>>,
}

impl Conn {
    fn connect(endpoint: &str, timeout: Duration) -> Result<Arc<Conn>> {
        let err = |what: String| Error::invalid(format!("rpc endpoint {endpoint:?}: {what}"));
        let addrs: Vec<_> = endpoint
            .to_socket_addrs()
            .map_err(|e| err(format!("not a host:port ({e})")))?
            .collect();
        let mut last = None;
        let sock = addrs.iter().find_map(|a| {
            TcpStream::connect_timeout(a, timeout.min(Duration::from_secs(10)))
                .map_err(|e| last = Some(e))
                .ok()
        });
        let sock = sock.ok_or_else(|| {
            Error::Compute(format!(
                "rpc endpoint {endpoint:?}: cannot connect: {}",
                last.map_or_else(|| "no address".to_string(), |e| e.to_string())
            ))
        })?;
        let io = |e| proto::io_err(endpoint, "connect", e);
        sock.set_nodelay(true).map_err(io)?;
        sock.set_read_timeout(Some(timeout)).map_err(io)?;
        sock.set_write_timeout(Some(timeout)).map_err(io)?;
        let conn = Arc::new(Conn {
            endpoint: endpoint.to_string(),
            link: Mutex::new(Link {
                r: BufReader::new(sock.try_clone().map_err(io)?),
                w: BufWriter::new(sock),
                dead: None,
            }),
            last_graph: Mutex::new(HashMap::new()),
        });
        let hello = conn.call(
            &Request::Hello {
                caps: [0; CONN_CAPS_SIZE],
            },
            Some(4 + CONN_CAPS_SIZE),
        )?;
        proto::check_hello(&hello)?;
        Ok(conn)
    }

    fn is_dead(&self) -> bool {
        lock(&self.link).dead.is_some()
    }

    /// Sends `req`; with `reply`, waits for the response and checks its size (`Some(n)`).
    fn exchange(&self, req: &Request, reply: Option<Option<usize>>) -> Result<Vec<u8>> {
        let mut l = lock(&self.link);
        if let Some(why) = &l.dead {
            return Err(Error::Compute(format!(
                "rpc {}: the connection is closed ({why})",
                self.endpoint
            )));
        }
        let r = Self::exchange_on(&mut l, req, reply);
        r.map_err(|e| {
            let msg = format!("{:?}: {e}", req.cmd());
            l.dead = Some(msg.clone());
            Error::Compute(format!("rpc {}: {msg}", self.endpoint))
        })
    }

    fn exchange_on(
        l: &mut Link,
        req: &Request,
        reply: Option<Option<usize>>,
    ) -> std::io::Result<Vec<u8>> {
        proto::write_request(&mut l.w, req.cmd(), &req.encode_payload())?;
        let Some(expect) = reply else {
            return Ok(Vec::new());
        };
        let n = proto::read_len(&mut l.r, expect.map_or(u64::MAX, |n| n as u64))?;
        if expect.is_some_and(|e| e != n) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("a response of {n} bytes, {expect:?} expected"),
            ));
        }
        proto::read_bytes(&mut l.r, n)
    }

    /// Sends a request without a response.
    fn send(&self, req: &Request) -> Result<()> {
        self.exchange(req, None).map(|_| ())
    }

    /// Sends a request and returns its response (of `expect` bytes when given).
    fn call(&self, req: &Request, expect: Option<usize>) -> Result<Vec<u8>> {
        self.exchange(req, Some(expect))
    }

    fn call_u64(&self, req: &Request) -> Result<u64> {
        let v = self.call(req, Some(8))?;
        Ok(u64::from_le_bytes(v[..8].try_into().expect("8 bytes")))
    }

    /// A round trip: everything sent before it has been served when it returns.
    fn barrier(&self) -> Result<()> {
        self.call(&Request::DeviceCount, Some(4)).map(|_| ())
    }
}

/// Registries made by [`add_server`], by endpoint.
fn servers() -> &'static Mutex<HashMap<String, Registry>> {
    static S: OnceLock<Mutex<HashMap<String, Registry>>> = OnceLock::new();
    S.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Devices named so far (`RPC0`, `RPC1`, … across servers).
static DEVICE_COUNTER: AtomicUsize = AtomicUsize::new(0);

/// Connects to the RPC server at `endpoint` (`"host:port"`) and returns a registry named
/// `RPC[endpoint]` with one device per remote device (`ggml_backend_rpc_add_server`).
/// Calling it again for the same endpoint returns the same registry while its connection
/// lives. Like GGML, the registry is not registered globally: pass it to
/// [`ggml::backend::register`] for `dev_by_name` to find its devices.
pub fn add_server(endpoint: &str) -> Result<Registry> {
    let mut all = lock(servers());
    if let Some(reg) = all.get(endpoint) {
        let alive = reg.devices().first().is_none_or(|d| d.memory() != (0, 0));
        if alive {
            return Ok(reg.clone());
        }
    }
    let conn = Conn::connect(endpoint, DEFAULT_TIMEOUT)?;
    let v = conn.call(&Request::DeviceCount, Some(4))?;
    let n = u32::from_le_bytes(v[..4].try_into().expect("4 bytes"));
    let devices = (0..n)
        .map(|index| {
            let alignment = conn.call_u64(&Request::GetAlignment { device: index })?;
            let max_size = conn.call_u64(&Request::GetMaxSize { device: index })?;
            if !alignment.is_power_of_two() {
                return Err(Error::invalid(format!(
                    "rpc {endpoint}: device {index} has alignment {alignment}, not a power of 2"
                )));
            }
            let buft = BufferType::new(RpcBufferType {
                conn: conn.clone(),
                index,
                name: format!("RPC{index}[{endpoint}]"),
                alignment: alignment as usize,
                max_size: usize::try_from(max_size).unwrap_or(usize::MAX),
            });
            let k = DEVICE_COUNTER.fetch_add(1, Ordering::Relaxed);
            Ok(Device::new(RpcDevice {
                conn: conn.clone(),
                index,
                name: format!("RPC{k}"),
                buft,
            }))
        })
        .collect::<Result<Vec<_>>>()?;
    let reg = Registry::from_devices(&format!("RPC[{endpoint}]"), devices);
    all.insert(endpoint.to_string(), reg.clone());
    Ok(reg)
}

// ---- buffers -------------------------------------------------------------------------------

struct RpcBufferType {
    conn: Arc<Conn>,
    index: u32,
    name: String,
    alignment: usize,
    max_size: usize,
}

impl BufferTypeImpl for RpcBufferType {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn alloc_buffer(&self, size: usize) -> Result<Box<dyn BufferImpl>> {
        let v = self.conn.call(
            &Request::AllocBuffer {
                device: self.index,
                size: size as u64,
            },
            Some(16),
        )?;
        let remote_ptr = u64::from_le_bytes(v[..8].try_into().expect("8 bytes"));
        let remote_size = u64::from_le_bytes(v[8..].try_into().expect("8 bytes"));
        if remote_ptr == 0 {
            return Err(Error::AllocFailed(format!(
                "{}: the server could not allocate {size} bytes",
                self.name
            )));
        }
        let base = self.conn.call_u64(&Request::BufferGetBase { remote_ptr })?;
        Ok(Box::new(RpcBuffer {
            conn: self.conn.clone(),
            remote_ptr,
            base,
            size: usize::try_from(remote_size).unwrap_or(0).min(size.max(1)),
        }))
    }
    fn alignment(&self) -> usize {
        self.alignment
    }
    fn max_size(&self) -> usize {
        self.max_size
    }
}

/// A buffer in a server's memory: its handle there and its base address in the server's
/// address space.
struct RpcBuffer {
    conn: Arc<Conn>,
    remote_ptr: u64,
    base: u64,
    size: usize,
}

impl Drop for RpcBuffer {
    fn drop(&mut self) {
        // The server frees the buffer anyway when the connection ends.
        lock(&self.conn.last_graph).clear();
        let _ = self.conn.send(&Request::FreeBuffer {
            remote_ptr: self.remote_ptr,
        });
    }
}

impl RpcBuffer {
    /// `len` bytes at `offset` of this buffer, as the wire names them.
    fn at(&self, offset: usize, len: usize) -> WireTensor {
        wire::bytes(self.remote_ptr, self.base + offset as u64, len as u32)
    }

    /// Runs `f(offset, len)` over `[offset, offset + len)` in pieces the wire can carry.
    fn chunks(
        offset: usize,
        len: usize,
        mut f: impl FnMut(usize, usize) -> Result<()>,
    ) -> Result<()> {
        (0..len)
            .step_by(CHUNK)
            .try_for_each(|k| f(offset + k, CHUNK.min(len - k)))
    }

    fn set_request(&self, offset: usize, data: &[u8], cache: bool) -> Request {
        Request::SetTensor {
            tensor: self.at(offset, data.len()),
            cache,
            offset: 0,
            data: data.to_vec(),
        }
    }
}

// SAFETY: the buffer has no host address (`host_ptr` is `None`); its bytes are the server's,
// reached only through requests on the connection, which the server serves in order.
unsafe impl BufferImpl for RpcBuffer {
    fn size(&self) -> usize {
        self.size
    }
    fn host_ptr(&self) -> Option<NonNull<u8>> {
        None
    }
    unsafe fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        Self::chunks(offset, data.len(), |off, len| {
            let piece = &data[off - offset..off - offset + len];
            // Large writes are mostly weights: the server may have them cached already.
            let cache = len > proto::HASH_THRESHOLD;
            if cache {
                let req = Request::SetTensorHash {
                    tensor: self.at(off, len),
                    offset: 0,
                    hash: proto::fnv1a(piece),
                };
                if self.conn.call(&req, Some(1))? == [1] {
                    return Ok(());
                }
            }
            self.conn.send(&self.set_request(off, piece, cache))
        })?;
        // An upload has no reply: make sure the server took it.
        self.conn.barrier()
    }
    unsafe fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        Self::chunks(offset, out.len(), |off, len| {
            let req = Request::GetTensor {
                tensor: self.at(off, len),
                offset: 0,
                size: len as u64,
            };
            let v = self.conn.call(&req, Some(len))?;
            out[off - offset..off - offset + len].copy_from_slice(&v);
            Ok(())
        })
    }
    unsafe fn fill(&self, offset: usize, size: usize, value: u8) -> Result<()> {
        Self::chunks(offset, size, |off, len| {
            let req = Request::MemsetTensor {
                tensor: self.at(off, len),
                offset: 0,
                size: len as u64,
                value,
            };
            self.conn.send(&req)
        })
    }
    unsafe fn cpy_tensor(
        &self,
        src: &dyn BufferImpl,
        src_offset: usize,
        offset: usize,
        size: usize,
    ) -> Result<bool> {
        match src.downcast_ref::<RpcBuffer>() {
            Some(s) if Arc::ptr_eq(&s.conn, &self.conn) => {
                copy_on_server(&self.conn, s, src_offset, self, offset, size)?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}

/// COPY_TENSOR of `size` bytes between two buffers of one connection.
fn copy_on_server(
    conn: &Conn,
    src: &RpcBuffer,
    src_offset: usize,
    dst: &RpcBuffer,
    offset: usize,
    size: usize,
) -> Result<()> {
    RpcBuffer::chunks(0, size, |k, len| {
        let req = Request::CopyTensor {
            src: src.at(src_offset + k, len),
            dst: dst.at(offset + k, len),
        };
        match conn.call(&req, Some(1))?[0] {
            1 => Ok(()),
            _ => Err(Error::Compute(format!(
                "rpc {}: the server could not copy {len} bytes",
                conn.endpoint
            ))),
        }
    })
}

// ---- the device and its engine -----------------------------------------------------------

struct RpcDevice {
    conn: Arc<Conn>,
    index: u32,
    name: String,
    buft: BufferType,
}

impl DeviceImpl for RpcDevice {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn description(&self) -> String {
        self.conn.endpoint.clone()
    }
    fn memory(&self) -> (usize, usize) {
        let req = Request::GetDeviceMemory { device: self.index };
        match self.conn.call(&req, Some(16)) {
            Ok(v) => {
                let g = |r: std::ops::Range<usize>| {
                    usize::try_from(u64::from_le_bytes(v[r].try_into().expect("8 bytes")))
                        .unwrap_or(usize::MAX)
                };
                (g(0..8), g(8..16))
            }
            Err(_) => (0, 0),
        }
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
        if self.conn.is_dead() {
            return Err(Error::Compute(format!(
                "{}: the connection to {} is closed",
                self.name, self.conn.endpoint
            )));
        }
        Ok(Box::new(RpcEngine {
            conn: self.conn.clone(),
            index: self.index,
            name: format!("RPC{}[{}]", self.index, self.conn.endpoint),
        }))
    }
    fn buffer_type(&self) -> BufferType {
        self.buft.clone()
    }
    fn supports_op(&self, op: &Tensor) -> bool {
        // The protocol has no question for this; a server computes what GGML's CPU computes
        // at least, and this library's servers what this library's CPU does.
        let wire_ok = op.ne()[proto::WIRE_DIMS] == 1
            && !matches!(
                op.op(),
                ggml::Op::Custom
                    | ggml::Op::MapCustom1
                    | ggml::Op::MapCustom2
                    | ggml::Op::MapCustom3
            );
        wire_ok && backend::dev_by_type(DeviceType::Cpu).is_some_and(|cpu| cpu.supports_op(op))
    }
    fn supports_buft(&self, buft: &BufferType) -> bool {
        *buft == self.buft
    }
}

/// A stream on a remote device: the connection is its queue.
struct RpcEngine {
    conn: Arc<Conn>,
    index: u32,
    name: String,
}

impl RpcEngine {
    /// `place` as (buffer handle, address) on this engine's server; `Err` naming `what`
    /// when the bytes are elsewhere.
    fn own<'a>(&self, place: Place<'a>, what: &str) -> Result<(&'a RpcBuffer, u64)> {
        place
            .downcast::<RpcBuffer>()
            .filter(|(b, _)| Arc::ptr_eq(&b.conn, &self.conn))
            .map(|(b, off)| (b, b.base + off as u64))
            .ok_or_else(|| {
                Error::unsupported(format!(
                    "{} {what}: the bytes are not in the memory of {}",
                    self.name, self.conn.endpoint
                ))
            })
    }

    /// The GRAPH_COMPUTE message for `graph`: every node and operand once, operands before
    /// users, views after what they view; operands that are not nodes go as plain leaves.
    fn serialize(&self, graph: &PlacedGraph<'_>) -> Result<GraphMsg> {
        let nodes = graph.nodes();
        let node_ids: HashSet<u64> = nodes.iter().map(Tensor::id).collect();
        let mut uses: HashMap<u64, i32> = HashMap::new();
        for n in nodes {
            for s in n.srcs() {
                *uses.entry(s.id()).or_default() += 1;
            }
        }
        let mut out = GraphMsg {
            device: self.index,
            nodes: nodes.iter().map(Tensor::id).collect(),
            tensors: Vec::new(),
        };
        let mut seen = HashSet::new();
        let mut emit = |t: &Tensor, place: Place<'_>, full: bool| -> Result<()> {
            if !seen.insert(t.id()) {
                return Ok(());
            }
            let (buf, data) = self.own(place, &format!("graph_compute ({:?})", t.name()))?;
            let mut w = wire::encode(t, buf.remote_ptr, data)?;
            w.use_count = uses.get(&t.id()).copied().unwrap_or(0);
            if full {
                for (slot, s) in w.src.iter_mut().zip(0..t.n_src_slots()) {
                    *slot = t.src(s).map_or(0, Tensor::id);
                }
                if let Some(root) = t.view_src() {
                    w.view_src = root.id();
                    w.view_offs = t.view_offs() as u64;
                }
            } else {
                // Only its bytes matter here.
                w.op = 0;
                w.op_params = [0; 16];
            }
            out.tensors.push(w);
            Ok(())
        };
        for (i, n) in nodes.iter().enumerate() {
            for j in 0..n.n_src_slots() {
                if let (Some(s), Some(p)) = (n.src(j), graph.src_place(i, j)) {
                    emit_with_root(&mut emit, s, p, !node_ids.contains(&s.id()))?;
                }
            }
            let p = graph
                .place(i)
                .ok_or_else(|| Error::invalid(format!("{}: node {i} has no place", self.name)))?;
            emit_with_root(&mut emit, n, p, false)?;
        }
        Ok(out)
    }
}

/// Emits `t` (as a leaf when `leaf`), after the tensor it views when it is a view of one that
/// is in the same buffer `offs` bytes before it.
fn emit_with_root<'a>(
    emit: &mut impl FnMut(&Tensor, Place<'a>, bool) -> Result<()>,
    t: &Tensor,
    place: Place<'a>,
    leaf: bool,
) -> Result<()> {
    if !leaf {
        if let Some(root) = t.view_src() {
            let root_place = place.before(t.view_offs(), root.nbytes()).ok_or_else(|| {
                Error::invalid(format!(
                    "rpc: view {:?} lies outside the buffer of what it views",
                    t.name()
                ))
            })?;
            emit(root, root_place, false)?;
        }
    }
    emit(t, place, !leaf)
}

impl BackendImpl for RpcEngine {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn graph_compute(&mut self, graph: &PlacedGraph<'_>) -> Result<()> {
        if graph.is_empty() {
            return Ok(());
        }
        let req = Request::GraphCompute(self.serialize(graph)?);
        let payload = req.encode_payload();
        let mut last = lock(&self.conn.last_graph);
        if last.get(&self.index) == Some(&payload) {
            drop(last);
            return self
                .conn
                .send(&Request::GraphRecompute { device: self.index });
        }
        last.insert(self.index, payload);
        drop(last);
        self.conn.send(&req)
    }

    fn has_own_queue(&self) -> bool {
        true
    }

    fn synchronize(&mut self) -> Result<()> {
        self.conn.barrier()
    }

    fn set_tensor_async(&mut self, dst: Place<'_>, data: &[u8]) -> Result<()> {
        let (buf, _) = self.own(dst, "set_tensor_async")?;
        RpcBuffer::chunks(dst.offset(), data.len(), |off, len| {
            let piece = &data[off - dst.offset()..off - dst.offset() + len];
            self.conn.send(&buf.set_request(off, piece, false))
        })
    }

    fn get_tensor_async(&mut self, src: Place<'_>, out: &mut [u8]) -> Result<()> {
        let (buf, _) = self.own(src, "get_tensor_async")?;
        // SAFETY: the place lies in its buffer and `out` has its size; the job's reservation
        // excludes other access, and the connection orders this after queued work.
        unsafe { buf.read(src.offset(), out) }
    }

    fn cpy_tensor_async(&mut self, src: Place<'_>, dst: Place<'_>) -> Result<bool> {
        match (self.own(src, "copy"), self.own(dst, "copy")) {
            (Ok((s, _)), Ok((d, _))) => {
                copy_on_server(&self.conn, s, src.offset(), d, dst.offset(), dst.size())?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}
