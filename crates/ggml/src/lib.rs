//! # ggml
//!
//! GGML's tensor library and backend system, in pure Rust: contexts that hold tensors,
//! operators that build compute graphs, and backends (buffer types, buffers, devices,
//! registries, events, asynchronous streams, graph plans) that run them.
//!
//! ```
//! use ggml::{backend, Context, Type};
//! # fn main() -> ggml::Result<()> {
//! let cpu = backend::cpu_init()?;
//! let ctx = Context::init(1 << 20, false)?;
//! let a = ctx.new_tensor_1d(Type::F32, 4)?;
//! let b = ctx.relu(&a)?;
//! let graph = ctx.build_forward_expand(&b)?;
//! a.set_f32(&[-1.0, 2.0, -3.0, 4.0])?;
//! cpu.graph_compute(&graph)?;
//! assert_eq!(b.get_f32()?, vec![0.0, 2.0, 0.0, 4.0]);
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

pub mod alloc;
pub mod backend;
#[doc = include_str!("doc/context.md")]
pub mod context;
mod cpu;
#[doc = include_str!("doc/error.md")]
pub mod error;
pub mod gguf;
#[doc = include_str!("doc/graph.md")]
pub mod graph;
#[doc = include_str!("doc/ops.md")]
pub mod ops;
pub mod quants;
pub mod sizing;
#[doc = include_str!("doc/tensor.md")]
pub mod tensor;
#[doc = include_str!("doc/types.md")]
pub mod types;

pub use alloc::Gallocr;
pub use backend::{
    Backend, Buffer, BufferType, BufferUsage, Device, DeviceCaps, DeviceProps, DeviceType, Event,
    GraphPlan, Pending, Registry, Sched,
};
pub use context::{tensor_overhead, Context};
pub use error::{Error, ErrorKind, Result, Status};
pub use graph::{graph_overhead, graph_overhead_custom, Graph};
pub use ops::{
    rope_yarn_corr_dims, Op, UnaryOp, MROPE_SECTIONS, ROPE_TYPE_IMROPE, ROPE_TYPE_MROPE,
    ROPE_TYPE_NEOX, ROPE_TYPE_NORMAL, ROPE_TYPE_VISION,
};
pub use quants::{quantize_chunk, quantize_requires_imatrix};
pub use sizing::ContextSize;
pub use tensor::{Tensor, MAX_DIMS, MAX_SRC};
pub use types::{bf16, f16, Type, QK_K};

/// The registries this crate is built with, registered (through [`backend::register`], as any
/// other) when the registry is first used: the CPU.
pub(crate) fn builtin_registries() -> Vec<Registry> {
    vec![cpu::registry()]
}
