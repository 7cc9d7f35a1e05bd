//! GGML's RPC wire protocol, version 7.0.0: framing, commands, messages and the serialized
//! tensor, byte for byte.
//!
//! Every integer is little-endian; structs are packed. A request is `u8 command | u64 length |
//! payload`; a response (only commands that have one) is `u64 length | payload`. The first
//! command of a connection is HELLO; a client accepts a server of the same major version and
//! a minor version no newer than its own. Nothing here trusts a length: decoding a payload
//! checks its size against the command's layout before reading a field.

use std::io::{Read, Write};

use ggml::{Error, Result};

/// Protocol major version (`RPC_PROTO_MAJOR_VERSION`).
pub const PROTO_MAJOR: u8 = 7;
/// Protocol minor version.
pub const PROTO_MINOR: u8 = 0;
/// Protocol patch version (tied to GGML's op count, 101).
pub const PROTO_PATCH: u8 = 0;
/// Bytes of transport capabilities in HELLO (all zero: plain TCP).
pub const CONN_CAPS_SIZE: usize = 24;
/// Uploads larger than this try SET_TENSOR_HASH first (`HASH_THRESHOLD`, 10 MiB).
pub const HASH_THRESHOLD: usize = 10 * 1024 * 1024;
/// Dimensions of a tensor on the wire (GGML's `GGML_MAX_DIMS`).
pub const WIRE_DIMS: usize = 4;
/// Operand slots of a tensor on the wire.
pub const WIRE_SRC: usize = 10;
/// Bytes of a tensor name on the wire, with its terminating zero.
pub const WIRE_NAME: usize = 64;
/// Bytes of a serialized tensor (`sizeof(rpc_tensor)`).
pub const TENSOR_SIZE: usize = 296;
/// Bytes before the data in a SET_TENSOR payload: tensor, cache flag, offset.
pub const SET_TENSOR_HEADER: usize = TENSOR_SIZE + 1 + 8;

/// A command (`enum rpc_cmd`), with GGML's numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Cmd {
    /// Allocate a buffer on a device.
    AllocBuffer = 0,
    /// A device's buffer alignment.
    GetAlignment = 1,
    /// A device's largest buffer.
    GetMaxSize = 2,
    /// A buffer's base address.
    BufferGetBase = 3,
    /// Free a buffer.
    FreeBuffer = 4,
    /// Fill a whole buffer with a byte.
    BufferClear = 5,
    /// Write bytes into a tensor (no response).
    SetTensor = 6,
    /// Write a tensor from the server's cache, by content hash.
    SetTensorHash = 7,
    /// Read bytes of a tensor.
    GetTensor = 8,
    /// Copy a tensor into another on the server.
    CopyTensor = 9,
    /// Compute a graph (no response).
    GraphCompute = 10,
    /// A device's free and total memory.
    GetDeviceMemory = 11,
    /// Prepare a tensor placed in a buffer.
    InitTensor = 12,
    /// Bytes a tensor needs in a device's buffers.
    GetAllocSize = 13,
    /// The handshake (always 14).
    Hello = 14,
    /// Number of devices served.
    DeviceCount = 15,
    /// Compute the device's last graph again (no response).
    GraphRecompute = 16,
    /// Fill bytes of a tensor.
    MemsetTensor = 17,
}

impl Cmd {
    /// The command with number `b`, if there is one (RPC_CMD_NONE, 18, is the client's own
    /// marker and never sent).
    pub fn from_u8(b: u8) -> Option<Cmd> {
        use Cmd::*;
        const ALL: [Cmd; 18] = [
            AllocBuffer,
            GetAlignment,
            GetMaxSize,
            BufferGetBase,
            FreeBuffer,
            BufferClear,
            SetTensor,
            SetTensorHash,
            GetTensor,
            CopyTensor,
            GraphCompute,
            GetDeviceMemory,
            InitTensor,
            GetAllocSize,
            Hello,
            DeviceCount,
            GraphRecompute,
            MemsetTensor,
        ];
        ALL.get(b as usize).copied()
    }

    /// Whether the server answers the command (in 7.0.0, buffer frees, clears, memsets,
    /// tensor inits, uploads and computations have no answer).
    pub fn has_response(self) -> bool {
        !matches!(
            self,
            Cmd::FreeBuffer
                | Cmd::BufferClear
                | Cmd::MemsetTensor
                | Cmd::InitTensor
                | Cmd::SetTensor
                | Cmd::GraphCompute
                | Cmd::GraphRecompute
        )
    }
}

/// A serialized tensor (`rpc_tensor`, 296 packed bytes). `id`, `src` and `view_src` are the
/// client's identities for tensors; `buffer` is a server buffer handle and `data` an address in
/// the server's address space for it (0 and 0 when the tensor is in no buffer of that server).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WireTensor {
    /// The client's identity for the tensor (non-zero).
    pub id: u64,
    /// `enum ggml_type`.
    pub ty: u32,
    /// Server buffer handle, 0 for none.
    pub buffer: u64,
    /// Elements per dimension.
    pub ne: [u32; WIRE_DIMS],
    /// Byte strides.
    pub nb: [u32; WIRE_DIMS],
    /// `enum ggml_op`.
    pub op: u32,
    /// Raw op parameters.
    pub op_params: [i32; 16],
    /// Flag bits.
    pub flags: i32,
    /// Operand ids by slot, 0 for an empty slot.
    pub src: [u64; WIRE_SRC],
    /// Id of the tensor this one views, 0 for none.
    pub view_src: u64,
    /// Byte offset in `view_src`.
    pub view_offs: u64,
    /// Address of the first byte in the server's address space.
    pub data: u64,
    /// Name, zero-padded.
    pub name: [u8; WIRE_NAME],
    /// How many graph nodes use the tensor (0 outside GRAPH_COMPUTE).
    pub use_count: i32,
}

impl Default for WireTensor {
    fn default() -> WireTensor {
        WireTensor {
            id: 0,
            ty: 0,
            buffer: 0,
            ne: [0; WIRE_DIMS],
            nb: [0; WIRE_DIMS],
            op: 0,
            op_params: [0; 16],
            flags: 0,
            src: [0; WIRE_SRC],
            view_src: 0,
            view_offs: 0,
            data: 0,
            name: [0; WIRE_NAME],
            use_count: 0,
        }
    }
}

impl WireTensor {
    /// Appends the 296 bytes.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.id.to_le_bytes());
        out.extend_from_slice(&self.ty.to_le_bytes());
        out.extend_from_slice(&self.buffer.to_le_bytes());
        self.ne
            .iter()
            .for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
        self.nb
            .iter()
            .for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
        out.extend_from_slice(&self.op.to_le_bytes());
        self.op_params
            .iter()
            .for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
        out.extend_from_slice(&self.flags.to_le_bytes());
        self.src
            .iter()
            .for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
        out.extend_from_slice(&self.view_src.to_le_bytes());
        out.extend_from_slice(&self.view_offs.to_le_bytes());
        out.extend_from_slice(&self.data.to_le_bytes());
        out.extend_from_slice(&self.name);
        out.extend_from_slice(&self.use_count.to_le_bytes());
    }

    /// Reads one tensor from `r`.
    fn decode(r: &mut Reader<'_>) -> Result<WireTensor> {
        let mut t = WireTensor {
            id: r.u64()?,
            ty: r.u32()?,
            buffer: r.u64()?,
            ..WireTensor::default()
        };
        for v in &mut t.ne {
            *v = r.u32()?;
        }
        for v in &mut t.nb {
            *v = r.u32()?;
        }
        t.op = r.u32()?;
        for v in &mut t.op_params {
            *v = r.u32()? as i32;
        }
        t.flags = r.u32()? as i32;
        for v in &mut t.src {
            *v = r.u64()?;
        }
        t.view_src = r.u64()?;
        t.view_offs = r.u64()?;
        t.data = r.u64()?;
        t.name.copy_from_slice(r.take(WIRE_NAME)?);
        t.use_count = r.u32()? as i32;
        Ok(t)
    }

    /// The name up to its first zero byte (invalid UTF-8 replaced).
    pub fn name_str(&self) -> String {
        let end = self.name.iter().position(|&b| b == 0).unwrap_or(WIRE_NAME);
        String::from_utf8_lossy(&self.name[..end]).into_owned()
    }

    /// Sets the name, cut to 63 bytes (at a character boundary).
    pub fn set_name(&mut self, name: &str) {
        let mut end = name.len().min(WIRE_NAME - 1);
        while !name.is_char_boundary(end) {
            end -= 1;
        }
        self.name = [0; WIRE_NAME];
        self.name[..end].copy_from_slice(&name.as_bytes()[..end]);
    }
}

/// A GRAPH_COMPUTE payload: `u32 device | u32 n_nodes | u64 nodes[n] | u32 n_tensors |
/// rpc_tensor tensors[n_tensors]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GraphMsg {
    /// Device index on the server.
    pub device: u32,
    /// Ids of the nodes, in compute order.
    pub nodes: Vec<u64>,
    /// Every tensor the nodes reach, each once, operands before their users.
    pub tensors: Vec<WireTensor>,
}

/// A request, decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
// the fields are GGML's request struct fields, named as there
// One request lives at a time; boxing the tensors would only add allocations.
#[allow(clippy::large_enum_variant)]
pub enum Request {
    AllocBuffer {
        device: u32,
        size: u64,
    },
    GetAlignment {
        device: u32,
    },
    GetMaxSize {
        device: u32,
    },
    BufferGetBase {
        remote_ptr: u64,
    },
    FreeBuffer {
        remote_ptr: u64,
    },
    BufferClear {
        remote_ptr: u64,
        value: u8,
    },
    /// `cache`: the client asks the server to keep the bytes in its cache directory.
    SetTensor {
        tensor: WireTensor,
        cache: bool,
        offset: u64,
        data: Vec<u8>,
    },
    SetTensorHash {
        tensor: WireTensor,
        offset: u64,
        hash: u64,
    },
    GetTensor {
        tensor: WireTensor,
        offset: u64,
        size: u64,
    },
    CopyTensor {
        src: WireTensor,
        dst: WireTensor,
    },
    GraphCompute(GraphMsg),
    GetDeviceMemory {
        device: u32,
    },
    InitTensor {
        tensor: WireTensor,
    },
    GetAllocSize {
        device: u32,
        tensor: WireTensor,
        srcs: Box<[WireTensor; WIRE_SRC]>,
    },
    Hello {
        caps: [u8; CONN_CAPS_SIZE],
    },
    DeviceCount,
    GraphRecompute {
        device: u32,
    },
    MemsetTensor {
        tensor: WireTensor,
        offset: u64,
        size: u64,
        value: u8,
    },
}

/// Reads fields from a payload, refusing to read past its end.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    what: &'static str,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8], what: &'static str) -> Reader<'a> {
        Reader { buf, pos: 0, what }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len());
        let Some(end) = end else {
            return Err(Error::invalid(format!(
                "rpc {}: payload of {} bytes ends inside a field (at {}, {n} more wanted)",
                self.what,
                self.buf.len(),
                self.pos
            )));
        };
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    pub(crate) fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    pub(crate) fn u32(&mut self) -> Result<u32> {
        self.array().map(u32::from_le_bytes)
    }

    pub(crate) fn u64(&mut self) -> Result<u64> {
        self.array().map(u64::from_le_bytes)
    }

    fn tensor(&mut self) -> Result<WireTensor> {
        WireTensor::decode(self)
    }

    fn rest(&mut self) -> &'a [u8] {
        let s = &self.buf[self.pos..];
        self.pos = self.buf.len();
        s
    }

    /// `Err` unless every byte was read.
    pub(crate) fn finish(&self) -> Result<()> {
        if self.pos != self.buf.len() {
            return Err(Error::invalid(format!(
                "rpc {}: payload of {} bytes, {} expected",
                self.what,
                self.buf.len(),
                self.pos
            )));
        }
        Ok(())
    }
}

/// The payload size a fixed-size request of `cmd` has; `None` for the variable ones.
pub fn fixed_request_size(cmd: Cmd) -> Option<usize> {
    Some(match cmd {
        Cmd::AllocBuffer => 12,
        Cmd::GetAlignment | Cmd::GetMaxSize | Cmd::GetDeviceMemory | Cmd::GraphRecompute => 4,
        Cmd::BufferGetBase | Cmd::FreeBuffer => 8,
        Cmd::BufferClear => 9,
        Cmd::SetTensorHash | Cmd::GetTensor => TENSOR_SIZE + 16,
        Cmd::CopyTensor => 2 * TENSOR_SIZE,
        Cmd::InitTensor => TENSOR_SIZE,
        Cmd::GetAllocSize => 4 + (1 + WIRE_SRC) * TENSOR_SIZE,
        Cmd::Hello => CONN_CAPS_SIZE,
        Cmd::DeviceCount => 0,
        Cmd::MemsetTensor => TENSOR_SIZE + 17,
        Cmd::SetTensor | Cmd::GraphCompute => return None,
    })
}

impl Request {
    /// The request's command.
    pub fn cmd(&self) -> Cmd {
        match self {
            Request::AllocBuffer { .. } => Cmd::AllocBuffer,
            Request::GetAlignment { .. } => Cmd::GetAlignment,
            Request::GetMaxSize { .. } => Cmd::GetMaxSize,
            Request::BufferGetBase { .. } => Cmd::BufferGetBase,
            Request::FreeBuffer { .. } => Cmd::FreeBuffer,
            Request::BufferClear { .. } => Cmd::BufferClear,
            Request::SetTensor { .. } => Cmd::SetTensor,
            Request::SetTensorHash { .. } => Cmd::SetTensorHash,
            Request::GetTensor { .. } => Cmd::GetTensor,
            Request::CopyTensor { .. } => Cmd::CopyTensor,
            Request::GraphCompute(_) => Cmd::GraphCompute,
            Request::GetDeviceMemory { .. } => Cmd::GetDeviceMemory,
            Request::InitTensor { .. } => Cmd::InitTensor,
            Request::GetAllocSize { .. } => Cmd::GetAllocSize,
            Request::Hello { .. } => Cmd::Hello,
            Request::DeviceCount => Cmd::DeviceCount,
            Request::GraphRecompute { .. } => Cmd::GraphRecompute,
            Request::MemsetTensor { .. } => Cmd::MemsetTensor,
        }
    }

    /// The payload bytes.
    pub fn encode_payload(&self) -> Vec<u8> {
        let mut o = Vec::new();
        let u32s = |o: &mut Vec<u8>, v: u32| o.extend_from_slice(&v.to_le_bytes());
        let u64s = |o: &mut Vec<u8>, v: u64| o.extend_from_slice(&v.to_le_bytes());
        match self {
            Request::AllocBuffer { device, size } => {
                u32s(&mut o, *device);
                u64s(&mut o, *size);
            }
            Request::GetAlignment { device }
            | Request::GetMaxSize { device }
            | Request::GetDeviceMemory { device }
            | Request::GraphRecompute { device } => u32s(&mut o, *device),
            Request::BufferGetBase { remote_ptr } | Request::FreeBuffer { remote_ptr } => {
                u64s(&mut o, *remote_ptr)
            }
            Request::BufferClear { remote_ptr, value } => {
                u64s(&mut o, *remote_ptr);
                o.push(*value);
            }
            Request::SetTensor {
                tensor,
                cache,
                offset,
                data,
            } => {
                tensor.encode(&mut o);
                o.push(u8::from(*cache));
                u64s(&mut o, *offset);
                o.extend_from_slice(data);
            }
            Request::SetTensorHash {
                tensor,
                offset,
                hash: v,
            }
            | Request::GetTensor {
                tensor,
                offset,
                size: v,
            } => {
                tensor.encode(&mut o);
                u64s(&mut o, *offset);
                u64s(&mut o, *v);
            }
            Request::CopyTensor { src, dst } => {
                src.encode(&mut o);
                dst.encode(&mut o);
            }
            Request::GraphCompute(g) => {
                u32s(&mut o, g.device);
                u32s(&mut o, g.nodes.len() as u32);
                g.nodes.iter().for_each(|&n| u64s(&mut o, n));
                u32s(&mut o, g.tensors.len() as u32);
                g.tensors.iter().for_each(|t| t.encode(&mut o));
            }
            Request::InitTensor { tensor } => tensor.encode(&mut o),
            Request::GetAllocSize {
                device,
                tensor,
                srcs,
            } => {
                u32s(&mut o, *device);
                tensor.encode(&mut o);
                srcs.iter().for_each(|t| t.encode(&mut o));
            }
            Request::Hello { caps } => o.extend_from_slice(caps),
            Request::DeviceCount => {}
            Request::MemsetTensor {
                tensor,
                offset,
                size,
                value,
            } => {
                tensor.encode(&mut o);
                u64s(&mut o, *offset);
                u64s(&mut o, *size);
                o.push(*value);
            }
        }
        o
    }

    /// Decodes the payload of command number `cmd`. `Err` for an unknown command, a payload of
    /// the wrong size, or counts that do not match the bytes.
    pub fn decode(cmd: u8, payload: &[u8]) -> Result<Request> {
        let c = Cmd::from_u8(cmd)
            .ok_or_else(|| Error::invalid(format!("rpc: unknown command {cmd}")))?;
        if let Some(n) = fixed_request_size(c) {
            if payload.len() != n {
                return Err(Error::invalid(format!(
                    "rpc {c:?}: payload of {} bytes, the command has {n}",
                    payload.len()
                )));
            }
        }
        let mut r = Reader::new(payload, "request");
        let req = match c {
            Cmd::AllocBuffer => Request::AllocBuffer {
                device: r.u32()?,
                size: r.u64()?,
            },
            Cmd::GetAlignment => Request::GetAlignment { device: r.u32()? },
            Cmd::GetMaxSize => Request::GetMaxSize { device: r.u32()? },
            Cmd::GetDeviceMemory => Request::GetDeviceMemory { device: r.u32()? },
            Cmd::GraphRecompute => Request::GraphRecompute { device: r.u32()? },
            Cmd::BufferGetBase => Request::BufferGetBase {
                remote_ptr: r.u64()?,
            },
            Cmd::FreeBuffer => Request::FreeBuffer {
                remote_ptr: r.u64()?,
            },
            Cmd::BufferClear => Request::BufferClear {
                remote_ptr: r.u64()?,
                value: r.u8()?,
            },
            Cmd::SetTensor => Request::SetTensor {
                tensor: r.tensor()?,
                cache: r.u8()? != 0,
                offset: r.u64()?,
                data: r.rest().to_vec(),
            },
            Cmd::SetTensorHash => Request::SetTensorHash {
                tensor: r.tensor()?,
                offset: r.u64()?,
                hash: r.u64()?,
            },
            Cmd::GetTensor => Request::GetTensor {
                tensor: r.tensor()?,
                offset: r.u64()?,
                size: r.u64()?,
            },
            Cmd::CopyTensor => Request::CopyTensor {
                src: r.tensor()?,
                dst: r.tensor()?,
            },
            Cmd::GraphCompute => Request::GraphCompute(decode_graph(&mut r)?),
            Cmd::InitTensor => Request::InitTensor {
                tensor: r.tensor()?,
            },
            Cmd::GetAllocSize => {
                let device = r.u32()?;
                let tensor = r.tensor()?;
                let mut srcs = Box::new([WireTensor::default(); WIRE_SRC]);
                for s in srcs.iter_mut() {
                    *s = r.tensor()?;
                }
                Request::GetAllocSize {
                    device,
                    tensor,
                    srcs,
                }
            }
            Cmd::Hello => Request::Hello { caps: r.array()? },
            Cmd::DeviceCount => Request::DeviceCount,
            Cmd::MemsetTensor => Request::MemsetTensor {
                tensor: r.tensor()?,
                offset: r.u64()?,
                size: r.u64()?,
                value: r.u8()?,
            },
        };
        r.finish()?;
        Ok(req)
    }
}

/// Decodes a GRAPH_COMPUTE payload; the counts must match the bytes exactly.
fn decode_graph(r: &mut Reader<'_>) -> Result<GraphMsg> {
    let device = r.u32()?;
    let n_nodes = r.u32()? as usize;
    // Each count is checked against the bytes left before anything is allocated for it.
    let left = r.buf.len() - r.pos;
    if n_nodes.saturating_mul(8) > left {
        return Err(Error::invalid(format!(
            "rpc GRAPH_COMPUTE: {n_nodes} node ids do not fit in {left} bytes"
        )));
    }
    let nodes = (0..n_nodes).map(|_| r.u64()).collect::<Result<Vec<_>>>()?;
    let n_tensors = r.u32()? as usize;
    let left = r.buf.len() - r.pos;
    if n_tensors.saturating_mul(TENSOR_SIZE) != left {
        return Err(Error::invalid(format!(
            "rpc GRAPH_COMPUTE: {n_tensors} tensors in {left} bytes ({TENSOR_SIZE} each)"
        )));
    }
    let tensors = (0..n_tensors)
        .map(|_| r.tensor())
        .collect::<Result<Vec<_>>>()?;
    Ok(GraphMsg {
        device,
        nodes,
        tensors,
    })
}

/// A connection error as an `Err` naming the peer and what was being done.
pub(crate) fn io_err(peer: &str, what: &str, e: std::io::Error) -> Error {
    Error::Compute(format!("rpc {peer}: {what}: {e}"))
}

/// Writes a request frame.
pub fn write_request(w: &mut impl Write, cmd: Cmd, payload: &[u8]) -> std::io::Result<()> {
    let mut head = [0u8; 9];
    head[0] = cmd as u8;
    head[1..].copy_from_slice(&(payload.len() as u64).to_le_bytes());
    w.write_all(&head)?;
    w.write_all(payload)?;
    w.flush()
}

/// Writes a response frame.
pub fn write_response(w: &mut impl Write, payload: &[u8]) -> std::io::Result<()> {
    w.write_all(&(payload.len() as u64).to_le_bytes())?;
    w.write_all(payload)?;
    w.flush()
}

/// Reads a frame's `u64` length, refusing lengths above `max`.
pub fn read_len(r: &mut impl Read, max: u64) -> std::io::Result<usize> {
    let mut b = [0u8; 8];
    r.read_exact(&mut b)?;
    let n = u64::from_le_bytes(b);
    if n > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("a message of {n} bytes, at most {max} are accepted"),
        ));
    }
    Ok(n as usize)
}

/// Reads exactly `n` bytes.
pub fn read_bytes(r: &mut impl Read, n: usize) -> std::io::Result<Vec<u8>> {
    let mut v = vec![0u8; n];
    r.read_exact(&mut v)?;
    Ok(v)
}

/// 64-bit FNV-1a of `data` (the hash of SET_TENSOR_HASH and the cache file names).
pub fn fnv1a(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The HELLO response payload: version and (plain TCP) capabilities.
pub fn hello_response() -> Vec<u8> {
    let mut v = vec![PROTO_MAJOR, PROTO_MINOR, PROTO_PATCH, 0];
    v.extend_from_slice(&[0; CONN_CAPS_SIZE]);
    v
}

/// `Ok` when a client of this version may talk to a server that answered HELLO with
/// `payload`: same major version, minor no newer than ours.
pub fn check_hello(payload: &[u8]) -> Result<(u8, u8, u8)> {
    if payload.len() != 4 + CONN_CAPS_SIZE {
        return Err(Error::invalid(format!(
            "rpc HELLO: response of {} bytes, {} expected",
            payload.len(),
            4 + CONN_CAPS_SIZE
        )));
    }
    let (major, minor, patch) = (payload[0], payload[1], payload[2]);
    if major != PROTO_MAJOR || minor > PROTO_MINOR {
        return Err(Error::unsupported(format!(
            "rpc: server speaks protocol {major}.{minor}.{patch}; this client speaks \
             {PROTO_MAJOR}.{PROTO_MINOR}.{PROTO_PATCH}"
        )));
    }
    Ok((major, minor, patch))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> WireTensor {
        let mut t = WireTensor {
            id: 0x1111_2222_3333_4444,
            ty: 1,
            buffer: 0x55,
            ne: [2, 3, 4, 5],
            nb: [2, 4, 12, 48],
            op: 29,
            flags: 16,
            view_src: 0x77,
            view_offs: 8,
            data: 0xabcd,
            use_count: 3,
            ..WireTensor::default()
        };
        t.op_params[0] = -1;
        t.src[0] = 0x99;
        t.src[9] = 0x9a;
        t.set_name("weights");
        t
    }

    #[test]
    fn rpc_tensor_fields_are_at_ggml_offsets() {
        let mut b = Vec::new();
        sample().encode(&mut b);
        assert_eq!(b.len(), TENSOR_SIZE);
        let u32at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
        let u64at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
        assert_eq!(u64at(0), 0x1111_2222_3333_4444);
        assert_eq!(u32at(8), 1);
        assert_eq!(u64at(12), 0x55);
        assert_eq!([u32at(20), u32at(24), u32at(28), u32at(32)], [2, 3, 4, 5]);
        assert_eq!([u32at(36), u32at(40), u32at(44), u32at(48)], [2, 4, 12, 48]);
        assert_eq!(u32at(52), 29);
        assert_eq!(u32at(56), u32::MAX);
        assert_eq!(u32at(120), 16);
        assert_eq!(u64at(124), 0x99);
        assert_eq!(u64at(124 + 72), 0x9a);
        assert_eq!(u64at(204), 0x77);
        assert_eq!(u64at(212), 8);
        assert_eq!(u64at(220), 0xabcd);
        assert_eq!(&b[228..235], b"weights");
        assert!(b[235..292].iter().all(|&x| x == 0));
        assert_eq!(u32at(292), 3);
    }

    fn all_requests() -> Vec<Request> {
        let t = sample();
        vec![
            Request::AllocBuffer {
                device: 1,
                size: 96,
            },
            Request::GetAlignment { device: 2 },
            Request::GetMaxSize { device: 3 },
            Request::BufferGetBase { remote_ptr: 4 },
            Request::FreeBuffer { remote_ptr: 5 },
            Request::BufferClear {
                remote_ptr: 6,
                value: 7,
            },
            Request::SetTensor {
                tensor: t,
                cache: true,
                offset: 8,
                data: vec![1, 2, 3],
            },
            Request::SetTensorHash {
                tensor: t,
                offset: 9,
                hash: 10,
            },
            Request::GetTensor {
                tensor: t,
                offset: 11,
                size: 12,
            },
            Request::CopyTensor { src: t, dst: t },
            Request::GraphCompute(GraphMsg {
                device: 1,
                nodes: vec![0x99],
                tensors: vec![t, t],
            }),
            Request::GetDeviceMemory { device: 4 },
            Request::InitTensor { tensor: t },
            Request::GetAllocSize {
                device: 5,
                tensor: t,
                srcs: Box::new([t; WIRE_SRC]),
            },
            Request::Hello {
                caps: [9; CONN_CAPS_SIZE],
            },
            Request::DeviceCount,
            Request::GraphRecompute { device: 6 },
            Request::MemsetTensor {
                tensor: t,
                offset: 1,
                size: 2,
                value: 3,
            },
        ]
    }

    #[test]
    fn every_request_has_ggmls_size_and_round_trips() {
        let reqs = all_requests();
        assert_eq!(reqs.len(), 18, "one per command");
        for r in reqs {
            let p = r.encode_payload();
            let want = match &r {
                Request::SetTensor { data, .. } => SET_TENSOR_HEADER + data.len(),
                Request::GraphCompute(g) => {
                    4 + 4 + 8 * g.nodes.len() + 4 + TENSOR_SIZE * g.tensors.len()
                }
                _ => fixed_request_size(r.cmd()).unwrap(),
            };
            assert_eq!(p.len(), want, "{:?}", r.cmd());
            assert_eq!(Request::decode(r.cmd() as u8, &p).unwrap(), r);
            if fixed_request_size(r.cmd()).is_some_and(|n| n > 0) {
                assert!(Request::decode(r.cmd() as u8, &p[1..]).is_err());
            }
        }
    }

    #[test]
    fn message_bytes() {
        let p = Request::AllocBuffer {
            device: 1,
            size: 96,
        }
        .encode_payload();
        assert_eq!(p, [1, 0, 0, 0, 96, 0, 0, 0, 0, 0, 0, 0]);
        let p = Request::BufferClear {
            remote_ptr: 0x0102,
            value: 0xff,
        }
        .encode_payload();
        assert_eq!(p, [2, 1, 0, 0, 0, 0, 0, 0, 0xff]);
        let mut frame = Vec::new();
        write_request(&mut frame, Cmd::DeviceCount, &[]).unwrap();
        assert_eq!(frame, [15, 0, 0, 0, 0, 0, 0, 0, 0]);
        let mut frame = Vec::new();
        write_response(&mut frame, &[7]).unwrap();
        assert_eq!(frame, [1, 0, 0, 0, 0, 0, 0, 0, 7]);
        // SET_TENSOR: tensor, cache flag, offset, data.
        let p = Request::SetTensor {
            tensor: sample(),
            cache: true,
            offset: 5,
            data: vec![9],
        }
        .encode_payload();
        assert_eq!(p[TENSOR_SIZE], 1);
        assert_eq!(&p[TENSOR_SIZE + 1..TENSOR_SIZE + 9], &5u64.to_le_bytes());
        assert_eq!(p[SET_TENSOR_HEADER], 9);
    }

    #[test]
    fn hello_version_rule() {
        let r = hello_response();
        assert_eq!(r.len(), 28);
        assert_eq!(&r[..4], &[7, 0, 0, 0]);
        assert_eq!(check_hello(&r).unwrap(), (7, 0, 0));
        let mut newer = r.clone();
        newer[1] = 1;
        assert!(
            check_hello(&newer).is_err(),
            "a newer minor version is refused"
        );
        let mut older_major = r.clone();
        older_major[0] = 6;
        assert!(check_hello(&older_major).is_err());
        assert!(check_hello(&r[..27]).is_err());
        assert_eq!(Cmd::Hello as u8, 14);
        assert_eq!(Cmd::from_u8(18), None);
    }

    #[test]
    fn graph_counts_must_match_the_bytes() {
        let g = Request::GraphCompute(GraphMsg {
            device: 0,
            nodes: vec![1],
            tensors: vec![sample()],
        });
        let mut p = g.encode_payload();
        p[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(Request::decode(10, &p).is_err());
        let mut p = g.encode_payload();
        p.push(0);
        assert!(Request::decode(10, &p).is_err());
    }

    #[test]
    fn fnv1a_known_values() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x85944171f73967e8);
    }
}
