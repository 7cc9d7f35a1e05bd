//! # ggml-backend-example
//!
//! A ggml backend in its own shared library, the shape of an out-of-tree backend: this crate
//! builds as a `cdylib` exporting `ggml_backend_init` and `ggml_backend_score`
//! ([`ggml::backend_dl_impl!`], [`ggml::backend_dl_score_impl!`]), and
//! `ggml::backend::load("libggml_backend_example.so")` registers its device `"Example0"`.
//!
//! The device computes element-wise `ADD` and `MUL` of contiguous F32 tensors of one shape, in
//! host memory of its own buffer type `"Example"`; everything else goes to other devices (the
//! scheduler) or is refused.

use ggml::backend::{
    BackendImpl, BufferImpl, BufferTypeImpl, DeviceImpl, HostMemory, PlacedGraph, RegistryImpl,
};
use ggml::{BufferType, Device, DeviceType, Error, Op, Registry, Result, Tensor, Type};

/// The score the library reports: usable everywhere, low priority.
pub const SCORE: i32 = 1;

struct ExampleBufferType;

impl BufferTypeImpl for ExampleBufferType {
    fn name(&self) -> String {
        "Example".to_string()
    }
    fn alloc_buffer(&self, size: usize) -> Result<Box<dyn BufferImpl>> {
        Ok(Box::new(HostMemory::new(size)?))
    }
    fn alignment(&self) -> usize {
        32
    }
}

struct ExampleDevice {
    buft: BufferType,
}

/// Whether the device computes `op`: ADD or MUL of three contiguous F32 tensors of one shape.
fn computes(op: &Tensor) -> bool {
    match op.op() {
        Op::None => true,
        Op::Add | Op::Mul => {
            let (Some(a), Some(b)) = (op.src(0), op.src(1)) else {
                return false;
            };
            [op, a, b]
                .iter()
                .all(|t| t.ty() == Type::F32 && t.is_contiguous())
                && a.are_same_shape(op)
                && b.are_same_shape(op)
        }
        _ => false,
    }
}

impl DeviceImpl for ExampleDevice {
    fn name(&self) -> String {
        "Example0".to_string()
    }
    fn description(&self) -> String {
        "example backend in a shared library (ADD, MUL of F32)".to_string()
    }
    fn memory(&self) -> (usize, usize) {
        (0, 0)
    }
    fn dev_type(&self) -> DeviceType {
        DeviceType::Accel
    }
    fn init_backend(&self, params: Option<&str>) -> Result<Box<dyn BackendImpl>> {
        match params {
            None => Ok(Box::new(ExampleEngine)),
            Some(p) => Err(Error::invalid(format!(
                "Example0: init params {p:?} not understood (none are)"
            ))),
        }
    }
    fn buffer_type(&self) -> BufferType {
        self.buft.clone()
    }
    fn supports_op(&self, op: &Tensor) -> bool {
        computes(op)
    }
    fn supports_buft(&self, buft: &BufferType) -> bool {
        *buft == self.buft
    }
}

struct ExampleEngine;

impl BackendImpl for ExampleEngine {
    fn name(&self) -> String {
        "Example0".to_string()
    }

    fn graph_compute(&mut self, graph: &PlacedGraph<'_>) -> Result<()> {
        for (i, node) in graph.nodes().iter().enumerate() {
            if node.op() == Op::None {
                continue;
            }
            if !computes(node) {
                return Err(Error::unsupported(format!(
                    "Example0: cannot compute node {:?} ({})",
                    node.name(),
                    node.op().name()
                )));
            }
            let host = |p: Option<ggml::backend::Place<'_>>| {
                p.and_then(|p| p.host_ptr()).ok_or_else(|| {
                    Error::invalid(format!(
                        "Example0: node {:?} has an operand outside host memory",
                        node.name()
                    ))
                })
            };
            let d = host(graph.place(i))?;
            let a = host(graph.src_place(i, 0))?;
            let b = host(graph.src_place(i, 1))?;
            let n = node.nelements() as usize;
            let mul = node.op() == Op::Mul;
            for k in 0..n {
                // SAFETY: the three places hold `n` contiguous f32 each (checked by
                // `computes`), in host memory the job holds reserved; reads of `a` and `b`
                // at `k` happen before the write of `d` at `k`, so in-place ops are fine.
                unsafe {
                    let x = a.as_ptr().cast::<f32>().add(k).read_unaligned();
                    let y = b.as_ptr().cast::<f32>().add(k).read_unaligned();
                    let r = if mul { x * y } else { x + y };
                    d.as_ptr().cast::<f32>().add(k).write_unaligned(r);
                }
            }
        }
        Ok(())
    }
}

struct ExampleRegistry {
    devices: Vec<Device>,
}

impl RegistryImpl for ExampleRegistry {
    fn name(&self) -> String {
        "Example".to_string()
    }
    fn devices(&self) -> Vec<Device> {
        self.devices.clone()
    }
}

/// The library's registry with its one device (what `ggml_backend_init` returns).
pub fn registry() -> Registry {
    let buft = BufferType::new(ExampleBufferType);
    Registry::new(ExampleRegistry {
        devices: vec![Device::new(ExampleDevice { buft })],
    })
}

ggml::backend_dl_impl!(registry());
ggml::backend_dl_score_impl!(SCORE);
