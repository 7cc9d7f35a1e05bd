//! # ggml-rpc
//!
//! GGML's RPC protocol 7.0.0 (llama.cpp's `ggml-rpc`), written only against `ggml`'s public
//! API:
//!
//! - [`add_server`] connects to an RPC server (GGML's `rpc-server` or ours) and gives a
//!   [`ggml::Registry`] with one device per remote device: buffers whose memory is remote
//!   (no host address), asynchronous uploads and graph computations, copies on the server;
//! - [`Server`] / [`start_server`] serve this library's devices to GGML's clients and ours,
//!   validating every message (see [`server`]);
//! - [`proto`] is the wire format, byte for byte.
//!
//! ```
//! use ggml::{backend, Context, Type};
//! # fn main() -> ggml::Result<()> {
//! let cpu = backend::dev_by_type(ggml::DeviceType::Cpu).unwrap();
//! let server = ggml_rpc::Server::start("127.0.0.1:0", None, 1, &[cpu])?;
//! let reg = ggml_rpc::add_server(&server.endpoint())?;
//! let stream = reg.dev_get(0).unwrap().init(None)?;
//! let ctx = Context::init(1 << 20, true)?;
//! let a = ctx.new_tensor_1d(Type::F32, 4)?;
//! let b = ctx.relu(&a)?;
//! let graph = ctx.build_forward_expand(&b)?;
//! let buf = backend::alloc_ctx_tensors(&ctx, &stream)?;
//! assert!(buf.get_base().is_none(), "remote memory");
//! a.set_f32(&[-1.0, 2.0, -3.0, 4.0])?;
//! stream.graph_compute(&graph)?;
//! assert_eq!(b.get_f32()?, vec![0.0, 2.0, 0.0, 4.0]);
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

mod client;
pub mod proto;
pub mod server;
mod wire;

pub use client::{add_server, DEFAULT_TIMEOUT};
pub use server::{start_server, Server, Session};
