//! The server: serves local devices to GGML's RPC clients (llama.cpp's and ours), one thread
//! per connection, each connection's buffers its own.
//!
//! Nothing that arrives is trusted. A frame's length is capped before anything is allocated for
//! it; a buffer handle must be one this connection allocated; a tensor's type, shape, strides
//! and address must put all its bytes inside its buffer (checked arithmetic); a graph's
//! tensors must name operands sent before them, and each node passes its op's shape rule
//! ([`ggml::Context::new_node`], which refuses custom ops); kernels bound-check their index
//! operands. Any failure closes that connection — as GGML's server does, there are no error
//! replies — and nothing else.

use std::collections::HashMap;
use std::io::{BufReader, BufWriter, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use ggml::ops::NodeDesc;
use ggml::{backend, Backend, Buffer, Context, Device, Error, Op, Result, Tensor, Type};

use crate::proto::{self, Cmd, GraphMsg, Request, WireTensor, SET_TENSOR_HEADER};
use crate::wire;

/// Spacing of buffer base addresses in a connection's address space: buffer `k` starts at
/// `k << ADDR_SHIFT`, so no two buffers' address ranges can meet.
const ADDR_SHIFT: u32 = 40;
/// Largest buffer the server allocates (below the address spacing).
const MAX_BUFFER: u64 = (1 << ADDR_SHIFT) - 1;
/// Largest GRAPH_COMPUTE payload accepted (about 900 000 tensors).
const MAX_GRAPH_MSG: u64 = 256 << 20;
/// Most buffers one connection may hold.
const MAX_BUFFERS: usize = 1 << 16;

/// A device served: the device and one stream on it, shared by every connection.
struct Served {
    device: Device,
    stream: Backend,
}

/// One buffer of a connection: the memory and a byte tensor over all of it.
struct SrvBuffer {
    buffer: Buffer,
    bytes: Tensor,
    _ctx: Context,
    base: u64,
    size: usize,
}

/// A graph kept for GRAPH_RECOMPUTE: its nodes and where every tensor's bytes are.
struct StoredGraph {
    _ctx: Context,
    nodes: Vec<Tensor>,
    places: HashMap<u64, (Buffer, usize)>,
}

/// What one connection owns and may name.
pub struct Session {
    devices: Arc<Vec<Served>>,
    cache_dir: Option<PathBuf>,
    buffers: HashMap<u64, SrvBuffer>,
    next: u64,
    stored: HashMap<u32, StoredGraph>,
    hello_done: bool,
    /// Largest buffer this connection may allocate.
    max_buffer: u64,
}

/// A resolved byte range of a connection's buffer.
struct Range<'a> {
    buf: &'a SrvBuffer,
    offset: usize,
    len: usize,
}

fn bad(msg: impl Into<String>) -> Error {
    Error::invalid(format!("rpc server: {}", msg.into()))
}

impl Session {
    fn new(devices: Arc<Vec<Served>>, cache_dir: Option<PathBuf>) -> Session {
        Session {
            devices,
            cache_dir,
            buffers: HashMap::new(),
            next: 1,
            stored: HashMap::new(),
            hello_done: false,
            max_buffer: MAX_BUFFER,
        }
    }

    /// A session over `devices` that is not attached to a socket, allocating buffers of at
    /// most `max_buffer` bytes (for the fuzz target and tests that drive
    /// [`Session::serve_stream`] directly).
    pub fn detached(
        devices: &[Device],
        cache_dir: Option<&Path>,
        max_buffer: usize,
    ) -> Result<Session> {
        let mut s = Session::new(
            Arc::new(init_devices(devices, 1)?),
            cache_dir.map(Path::to_path_buf),
        );
        s.max_buffer = (max_buffer as u64).min(MAX_BUFFER);
        Ok(s)
    }

    /// The largest payload a frame of `cmd` may claim: the command's size, or for SET_TENSOR
    /// the header plus the largest buffer this connection holds.
    pub fn max_payload(&self, cmd: Cmd) -> u64 {
        match proto::fixed_request_size(cmd) {
            Some(n) => n as u64,
            None if cmd == Cmd::GraphCompute => MAX_GRAPH_MSG,
            None => {
                let largest = self.buffers.values().map(|b| b.size).max().unwrap_or(0);
                (SET_TENSOR_HEADER + largest) as u64
            }
        }
    }

    fn device(&self, i: u32) -> Result<&Served> {
        self.devices.get(i as usize).ok_or_else(|| {
            bad(format!(
                "device {i}: {} devices are served",
                self.devices.len()
            ))
        })
    }

    fn buffer(&self, handle: u64) -> Result<&SrvBuffer> {
        self.buffers.get(&handle).ok_or_else(|| {
            bad(format!(
                "buffer handle {handle:#x} is not one of this connection"
            ))
        })
    }

    /// The bytes of `t` from `offset` for `len` bytes (`None`: all of the tensor from
    /// `offset`), checked against the tensor and its buffer.
    fn range(&self, t: &WireTensor, offset: u64, len: Option<u64>) -> Result<Range<'_>> {
        let layout = wire::layout(t)?;
        if t.buffer == 0 {
            return Err(bad("the tensor is in no buffer"));
        }
        let buf = self.buffer(t.buffer)?;
        let nbytes = layout.nbytes as u64;
        let len = len.unwrap_or(nbytes.saturating_sub(offset));
        let start = t
            .data
            .checked_sub(buf.base)
            .filter(|&s| s <= buf.size as u64);
        let Some(start) = start else {
            return Err(bad(format!(
                "tensor data address {:#x} is outside its buffer [{:#x}, +{})",
                t.data, buf.base, buf.size
            )));
        };
        // The tensor must lie in its buffer, and the range in the tensor.
        let tensor_end = start.checked_add(nbytes);
        let range_end = offset.checked_add(len);
        match (tensor_end, range_end) {
            (Some(te), Some(re)) if te <= buf.size as u64 && re <= nbytes => Ok(Range {
                buf,
                offset: (start + offset) as usize,
                len: len as usize,
            }),
            _ => Err(bad(format!(
                "{len} bytes at offset {offset} of a tensor of {nbytes} bytes at {start} in a \
                 buffer of {} bytes",
                buf.size
            ))),
        }
    }

    /// Serves one request; the response payload, or `None` for commands without one
    /// ([`Cmd::has_response`]). `Err` closes the connection.
    pub fn handle(&mut self, req: Request) -> Result<Option<Vec<u8>>> {
        let cmd = req.cmd();
        let resp = self.serve(req)?;
        debug_assert_eq!(resp.is_some(), cmd.has_response(), "{cmd:?}");
        Ok(resp)
    }

    fn serve(&mut self, req: Request) -> Result<Option<Vec<u8>>> {
        let cmd = req.cmd();
        if !self.hello_done {
            return match req {
                Request::Hello { .. } => {
                    self.hello_done = true;
                    Ok(Some(proto::hello_response()))
                }
                _ => Err(bad(format!("{cmd:?} before HELLO"))),
            };
        }
        let u64b = |v: u64| Some(v.to_le_bytes().to_vec());
        match req {
            Request::Hello { .. } => Err(bad("a second HELLO")),
            Request::DeviceCount => Ok(Some((self.devices.len() as u32).to_le_bytes().to_vec())),
            Request::AllocBuffer { device, size } => self.alloc(device, size).map(Some),
            Request::GetAlignment { device } => {
                let a = self.device(device)?.device.buffer_type().get_alignment();
                Ok(u64b(a as u64))
            }
            Request::GetMaxSize { device } => {
                let m = self.device(device)?.device.buffer_type().get_max_size();
                Ok(u64b((m as u64).min(MAX_BUFFER)))
            }
            Request::GetDeviceMemory { device } => {
                let (free, total) = self.device(device)?.device.memory();
                let mut v = (free as u64).to_le_bytes().to_vec();
                v.extend_from_slice(&(total as u64).to_le_bytes());
                Ok(Some(v))
            }
            Request::BufferGetBase { remote_ptr } => Ok(u64b(self.buffer(remote_ptr)?.base)),
            Request::FreeBuffer { remote_ptr } => {
                self.buffer(remote_ptr)?;
                // Stored graphs may place tensors in the buffer.
                self.stored.clear();
                self.buffers.remove(&remote_ptr);
                Ok(None)
            }
            Request::BufferClear { remote_ptr, value } => {
                self.buffer(remote_ptr)?.buffer.clear(value)?;
                Ok(None)
            }
            Request::MemsetTensor {
                tensor,
                offset,
                size,
                value,
            } => {
                let r = self.range(&tensor, offset, Some(size))?;
                backend::tensor_memset(&r.buf.bytes, value, r.offset, r.len)?;
                Ok(None)
            }
            Request::SetTensor {
                tensor,
                cache,
                offset,
                data,
            } => {
                let r = self.range(&tensor, offset, Some(data.len() as u64))?;
                r.buf.bytes.set_bytes(&data, r.offset)?;
                if cache && data.len() > proto::HASH_THRESHOLD {
                    self.cache_store(&data)?;
                }
                Ok(None)
            }
            Request::SetTensorHash {
                tensor,
                offset,
                hash,
            } => {
                let Some(data) = self.cache_load(hash)? else {
                    return Ok(Some(vec![0]));
                };
                let r = self.range(&tensor, offset, Some(data.len() as u64))?;
                r.buf.bytes.set_bytes(&data, r.offset)?;
                Ok(Some(vec![1]))
            }
            Request::GetTensor {
                tensor,
                offset,
                size,
            } => {
                let r = self.range(&tensor, offset, Some(size))?;
                let mut out = vec![0u8; r.len];
                r.buf.bytes.get_bytes(&mut out, r.offset)?;
                Ok(Some(out))
            }
            Request::CopyTensor { src, dst } => {
                let s = self.range(&src, 0, None)?;
                let d = self.range(&dst, 0, Some(s.len as u64))?;
                let mut tmp = vec![0u8; s.len];
                s.buf.bytes.get_bytes(&mut tmp, s.offset)?;
                d.buf.bytes.set_bytes(&tmp, d.offset)?;
                Ok(Some(vec![1]))
            }
            Request::InitTensor { tensor } => {
                self.range(&tensor, 0, None)?;
                Ok(None)
            }
            Request::GetAllocSize { device, tensor, .. } => {
                self.device(device)?;
                Ok(u64b(wire::layout(&tensor)?.nbytes as u64))
            }
            Request::GraphCompute(g) => {
                self.graph_compute(g)?;
                Ok(None)
            }
            Request::GraphRecompute { device } => {
                let served = self.device(device)?;
                let g = self
                    .stored
                    .get(&device)
                    .ok_or_else(|| bad(format!("GRAPH_RECOMPUTE: no graph on device {device}")))?;
                served
                    .stream
                    .graph_compute_at(&g.nodes, |t| g.places.get(&t.id()).cloned())?;
                Ok(None)
            }
        }
    }

    fn alloc(&mut self, device: u32, size: u64) -> Result<Vec<u8>> {
        let served = self.device(device)?;
        let fail = || {
            let mut v = 0u64.to_le_bytes().to_vec();
            v.extend_from_slice(&0u64.to_le_bytes());
            v
        };
        // Bounded by what the device has free now (when it says), so a client cannot ask for
        // more memory than there is.
        let (free, total) = served.device.memory();
        let known = if free > 0 { free } else { total };
        let limit = match known {
            0 => self.max_buffer,
            n => (n as u64).min(self.max_buffer),
        };
        if size > limit || self.buffers.len() >= MAX_BUFFERS {
            return Ok(fail());
        }
        let size = (size as usize).max(1);
        let Ok(buffer) = served.device.buffer_type().alloc_buffer(size) else {
            return Ok(fail());
        };
        let ctx = Context::init(2 * ggml::tensor_overhead(), true)?;
        let bytes = ctx.new_tensor_1d(Type::I8, size as i64)?;
        backend::tensor_alloc(&buffer, &bytes, 0)?;
        let handle = self.next;
        self.next += 1;
        let base = handle << ADDR_SHIFT;
        self.buffers.insert(
            handle,
            SrvBuffer {
                buffer,
                bytes,
                _ctx: ctx,
                base,
                size,
            },
        );
        let mut v = handle.to_le_bytes().to_vec();
        v.extend_from_slice(&(size as u64).to_le_bytes());
        Ok(v)
    }

    fn cache_path(&self, hash: u64) -> Option<PathBuf> {
        self.cache_dir
            .as_ref()
            .map(|d| d.join(format!("{hash:016x}")))
    }

    fn cache_store(&self, data: &[u8]) -> Result<()> {
        if let Some(p) = self.cache_path(proto::fnv1a(data)) {
            std::fs::write(&p, data)
                .map_err(|e| bad(format!("cannot write cache file {}: {e}", p.display())))?;
        }
        Ok(())
    }

    fn cache_load(&self, hash: u64) -> Result<Option<Vec<u8>>> {
        let Some(p) = self.cache_path(hash) else {
            return Ok(None);
        };
        match std::fs::read(&p) {
            // A file that does not hash to its name is not what the client asked for.
            Ok(d) if proto::fnv1a(&d) == hash => Ok(Some(d)),
            _ => Ok(None),
        }
    }

    /// Rebuilds a graph from the wire, checks it, computes it, and keeps it for
    /// GRAPH_RECOMPUTE.
    fn graph_compute(&mut self, g: GraphMsg) -> Result<()> {
        let served = self.device(g.device)?;
        if g.nodes.is_empty() {
            return Err(bad("GRAPH_COMPUTE with no nodes"));
        }
        let ctx = Context::init((g.tensors.len() + 1) * ggml::tensor_overhead(), true)?;
        // Tensors by wire id, in the order sent: operands must come before their users.
        let mut by_id: HashMap<u64, Tensor> = HashMap::with_capacity(g.tensors.len());
        let mut places = HashMap::with_capacity(g.tensors.len());
        for wt in &g.tensors {
            if wt.id == 0 || by_id.contains_key(&wt.id) {
                return Err(bad(format!("tensor id {:#x} is 0 or sent twice", wt.id)));
            }
            let t = self.build_tensor(&ctx, wt, &by_id)?;
            let r = self.range(wt, 0, None)?;
            places.insert(t.id(), (r.buf.buffer.clone(), r.offset));
            by_id.insert(wt.id, t);
        }
        let nodes = g
            .nodes
            .iter()
            .map(|id| {
                by_id
                    .get(id)
                    .cloned()
                    .ok_or_else(|| bad(format!("graph node {id:#x} is not among the tensors")))
            })
            .collect::<Result<Vec<_>>>()?;
        served
            .stream
            .graph_compute_at(&nodes, |t| places.get(&t.id()).cloned())?;
        self.stored.insert(
            g.device,
            StoredGraph {
                _ctx: ctx,
                nodes,
                places,
            },
        );
        Ok(())
    }

    /// The tensor `wt` describes, its operands and view source looked up among those built.
    fn build_tensor(
        &self,
        ctx: &Context,
        wt: &WireTensor,
        by_id: &HashMap<u64, Tensor>,
    ) -> Result<Tensor> {
        let layout = wire::layout(wt)?;
        let find = |id: u64, what: &str| {
            by_id.get(&id).ok_or_else(|| {
                bad(format!(
                    "tensor {:#x}: {what} {id:#x} was not sent before it",
                    wt.id
                ))
            })
        };
        let mut src: [Option<&Tensor>; ggml::MAX_SRC] = [None; ggml::MAX_SRC];
        for (slot, &id) in src.iter_mut().zip(wt.src.iter()) {
            if id != 0 {
                *slot = Some(find(id, "operand")?);
            }
        }
        let view = match wt.view_src {
            0 => None,
            id => {
                let offs = usize::try_from(wt.view_offs)
                    .map_err(|_| bad(format!("view offset {} is too large", wt.view_offs)))?;
                Some((find(id, "view source")?, offs))
            }
        };
        let op = Op::from_u32(wt.op).ok_or_else(|| bad(format!("op id {} is unknown", wt.op)))?;
        let name = wt.name_str();
        ctx.new_node(&NodeDesc {
            ty: layout.ty,
            ne: layout.ne,
            nb: layout.nb,
            op,
            op_params: wt.op_params,
            src,
            view,
            flags: wt.flags as u32,
            name: &name,
        })
    }
}

/// One stream per device, with `n_threads` where the device has a thread setting.
fn init_devices(devices: &[Device], n_threads: usize) -> Result<Vec<Served>> {
    if devices.is_empty() {
        return Err(Error::invalid(
            "rpc server: devices is empty; serve at least one",
        ));
    }
    devices
        .iter()
        .map(|d| {
            let stream = d.init(None)?;
            // Devices without a thread setting keep theirs.
            let _ = stream.set_n_threads(n_threads.max(1));
            Ok(Served {
                device: d.clone(),
                stream,
            })
        })
        .collect()
}

/// Reads requests from a socket and serves them until the client leaves or breaks a rule.
fn serve_connection(sock: TcpStream, mut session: Session) -> Result<()> {
    let peer = sock
        .peer_addr()
        .map_or_else(|_| "?".to_string(), |a| a.to_string());
    let _ = sock.set_nodelay(true);
    let r = BufReader::new(
        sock.try_clone()
            .map_err(|e| proto::io_err(&peer, "clone", e))?,
    );
    session.serve_stream(r, BufWriter::new(sock), &peer)
}

impl Session {
    /// Serves the requests read from `r`, writing responses to `w`, until `r` ends (`Ok`) or
    /// a request breaks a rule (`Err`: the connection is to be closed). `peer` names the other
    /// side in errors.
    pub fn serve_stream(&mut self, mut r: impl Read, mut w: impl Write, peer: &str) -> Result<()> {
        let io = |what: &str, e| proto::io_err(peer, what, e);
        loop {
            let mut cmd = [0u8; 1];
            match r.read_exact(&mut cmd) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
                Err(e) => return Err(io("read", e)),
            }
            let c =
                Cmd::from_u8(cmd[0]).ok_or_else(|| bad(format!("unknown command {}", cmd[0])))?;
            let len = proto::read_len(&mut r, self.max_payload(c)).map_err(|e| io("frame", e))?;
            let payload = proto::read_bytes(&mut r, len).map_err(|e| io("payload", e))?;
            let req = Request::decode(cmd[0], &payload)?;
            drop(payload);
            if let Some(resp) = self.handle(req)? {
                proto::write_response(&mut w, &resp).map_err(|e| io("write", e))?;
            }
        }
    }
}

/// A running server (see the module documentation). Stops when [`Server::stop`] is called
/// or the handle is dropped.
pub struct Server {
    addr: std::net::SocketAddr,
    stop: Arc<AtomicBool>,
    conns: Arc<Mutex<HashMap<u64, TcpStream>>>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "rpc Server({})", self.addr)
    }
}

impl Server {
    /// Listens on `endpoint` (`"host:port"`; port 0 picks a free one) and serves `devices`
    /// to every client that connects, each connection on its own thread. `cache_dir` keeps
    /// large uploads by content hash (SET_TENSOR_HASH); `n_threads` goes to each device that
    /// has a thread setting.
    pub fn start(
        endpoint: &str,
        cache_dir: Option<&Path>,
        n_threads: usize,
        devices: &[Device],
    ) -> Result<Server> {
        let served = Arc::new(init_devices(devices, n_threads)?);
        if let Some(d) = cache_dir {
            std::fs::create_dir_all(d).map_err(|e| {
                Error::invalid(format!("cache_dir {}: cannot create it: {e}", d.display()))
            })?;
        }
        let listener = TcpListener::bind(endpoint)
            .map_err(|e| Error::invalid(format!("endpoint {endpoint:?}: cannot listen: {e}")))?;
        let addr = listener
            .local_addr()
            .map_err(|e| Error::invalid(format!("endpoint {endpoint:?}: {e}")))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| Error::invalid(format!("endpoint {endpoint:?}: {e}")))?;
        let stop = Arc::new(AtomicBool::new(false));
        let conns = Arc::new(Mutex::new(HashMap::new()));
        let (stop2, conns2) = (stop.clone(), conns.clone());
        let cache = cache_dir.map(Path::to_path_buf);
        let thread = std::thread::Builder::new()
            .name(format!("rpc-server-{addr}"))
            .spawn(move || accept_loop(listener, served, cache, stop2, conns2))
            .map_err(|e| Error::AllocFailed(format!("rpc server: cannot start a thread: {e}")))?;
        Ok(Server {
            addr,
            stop,
            conns,
            thread: Some(thread),
        })
    }

    /// The address the server listens on.
    pub fn local_addr(&self) -> std::net::SocketAddr {
        self.addr
    }

    /// The endpoint string clients connect to (`"host:port"`).
    pub fn endpoint(&self) -> String {
        self.addr.to_string()
    }

    /// Stops listening, closes every connection and waits for the accept thread.
    pub fn stop(mut self) {
        self.shutdown();
    }

    /// Blocks until the server stops (it runs until the process ends or [`Server::stop`] is
    /// called from another thread through a clone of nothing: in practice, forever).
    pub fn wait(mut self) {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for (_, c) in lock(&self.conns).drain() {
            let _ = c.shutdown(Shutdown::Both);
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn accept_loop(
    listener: TcpListener,
    served: Arc<Vec<Served>>,
    cache: Option<PathBuf>,
    stop: Arc<AtomicBool>,
    conns: Arc<Mutex<HashMap<u64, TcpStream>>>,
) {
    let mut next_id = 0u64;
    while !stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((sock, peer)) => {
                let _ = sock.set_nonblocking(false);
                next_id += 1;
                let id = next_id;
                if let Ok(c) = sock.try_clone() {
                    lock(&conns).insert(id, c);
                }
                let session = Session::new(served.clone(), cache.clone());
                let conns = conns.clone();
                let spawned = std::thread::Builder::new()
                    .name(format!("rpc-conn-{peer}"))
                    .spawn(move || {
                        if let Err(e) = serve_connection(sock, session) {
                            eprintln!("rpc server: closing connection from {peer}: {e}");
                        }
                        // The clone kept for `stop` would hold the connection open.
                        if let Some(c) = lock(&conns).remove(&id) {
                            let _ = c.shutdown(Shutdown::Both);
                        }
                    });
                if let Err(e) = spawned {
                    eprintln!("rpc server: cannot serve {peer}: {e}");
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => {
                eprintln!("rpc server: accept failed: {e}");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

/// Serves `devices` on `endpoint` until the process ends
/// (`ggml_backend_rpc_start_server`). Prints what it exposes; warns loudly when the address
/// is not a loopback one.
pub fn start_server(
    endpoint: &str,
    cache_dir: Option<&Path>,
    n_threads: usize,
    devices: &[Device],
) -> Result<()> {
    let server = Server::start(endpoint, cache_dir, n_threads, devices)?;
    announce(&server, devices, cache_dir);
    server.wait();
    Ok(())
}

/// Prints the protocol version, the address and the devices a server exposes.
pub fn announce(server: &Server, devices: &[Device], cache_dir: Option<&Path>) {
    println!(
        "ggml rpc server v{}.{}.{} listening on {}",
        proto::PROTO_MAJOR,
        proto::PROTO_MINOR,
        proto::PROTO_PATCH,
        server.endpoint()
    );
    if !server.local_addr().ip().is_loopback() {
        eprintln!(
            "WARNING: the rpc server is bound to {}, reachable from other machines; anyone who \
             can connect may allocate memory and compute on these devices",
            server.local_addr()
        );
    }
    for (i, d) in devices.iter().enumerate() {
        let (free, total) = d.memory();
        println!(
            "  device {i}: {} ({}), {} MiB free of {} MiB",
            d.name(),
            d.description(),
            free >> 20,
            total >> 20
        );
    }
    if let Some(c) = cache_dir {
        println!("  cache: {}", c.display());
    }
    let _ = std::io::stdout().flush();
}
