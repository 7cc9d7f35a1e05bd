//! The CPU repack buffer type (GGML's `CPU_REPACK`, `ggml_backend_cpu_repack_buffer_type`):
//! host memory whose `set_tensor` stores a whole weight tensor in a layout of the CPU
//! kernels' own ([`repack_layout`]) instead of the type's blocks. Such memory is not host
//! memory in GGML's standard layout (`is_host` is false): it cannot be read back, written in
//! part or used by any op but MUL_MAT (and MUL_MAT_ID) as the weights, with F32 activations.
//!
//! The CPU backend recognises the buffers by their implementation (through
//! [`Place::downcast`](crate::backend::Place::downcast) when it resolves a node's addresses,
//! and [`BufferType::is`] when it plans one), and then sees the weight as a tensor of the
//! layout's type with the same shape: the kernels of that type compute on it, and give what
//! the original type's kernels give on the original blocks, bit for bit (see
//! [`repack_layout`]).

use std::ptr::NonNull;
use std::sync::OnceLock;

use crate::backend::{BufferImpl, BufferType, BufferTypeImpl, HostMemory};
use crate::cpu::quant_dot::{repack_blocks, repack_layout};
use crate::error::{Error, Result};
use crate::ops::Op;
use crate::tensor::Tensor;
use crate::types::Type;

/// The name of the buffer type (GGML's).
const NAME: &str = "CPU_REPACK";

/// Alignment of tensors in repack buffers (GGML's, as for CPU buffers).
const ALIGN: usize = 32;

/// The CPU repack buffer type (`ggml_backend_cpu_repack_buffer_type`): weights stored in the
/// CPU kernels' own layout on upload, for MUL_MAT and MUL_MAT_ID. Only tensors of a type with
/// a layout (Q4_0, Q5_0 and IQ4_NL: their levels unpacked to bytes, at 34 bytes per 32
/// values against their 18, 22 and 18) can be placed in its buffers; see the module
/// documentation for what they refuse.
pub fn cpu_repack_buffer_type() -> BufferType {
    static BUFT: OnceLock<BufferType> = OnceLock::new();
    BUFT.get_or_init(|| BufferType::new(RepackBufferType))
        .clone()
}

/// The implementation of [`cpu_repack_buffer_type`].
pub(crate) struct RepackBufferType;

impl BufferTypeImpl for RepackBufferType {
    fn name(&self) -> String {
        NAME.into()
    }
    fn alloc_buffer(&self, size: usize) -> Result<Box<dyn BufferImpl>> {
        Ok(Box::new(RepackBuffer {
            mem: HostMemory::new(size)?,
        }))
    }
    fn alignment(&self) -> usize {
        ALIGN
    }
    fn alloc_size(&self, t: &Tensor) -> usize {
        layout(t).map_or(t.nbytes(), |(_, bytes)| bytes)
    }
}

/// The layout's type and bytes of weight `t` in a repack buffer; `Err` naming the tensor
/// where it cannot be placed there: a type without a layout, a view, or a tensor that is not
/// a contiguous matrix (or stack of matrices) of whole blocks.
fn layout(t: &Tensor) -> Result<(Type, usize)> {
    let refuse = |why: String| {
        Error::unsupported(format!(
            "{NAME}: tensor {:?} ({}, {:?}) cannot be placed in a repack buffer: {why}",
            t.name(),
            t.ty(),
            &t.ne()[..t.n_dims().max(1)]
        ))
    };
    let ty =
        repack_layout(t.ty()).ok_or_else(|| refuse("its type has no repacked layout".into()))?;
    if t.view_src().is_some() || !t.is_contiguous() || t.ne()[3] != 1 || t.ne()[4] != 1 {
        return Err(refuse(
            "only whole contiguous 2-D or 3-D weights are repacked".into(),
        ));
    }
    let rows: i64 = t.ne()[1..].iter().product();
    let bytes = ty.row_size(t.ne()[0])? * rows as usize;
    Ok((ty, bytes))
}

/// The type the CPU kernels see weight `t` as when it lies in a repack buffer (its layout's),
/// else its own type; `Err` when it lies in one and node `node` may not use it there (only
/// MUL_MAT and MUL_MAT_ID take a repacked weight, as operand 0, with F32 activations).
pub(crate) fn kernel_type(node: &Tensor, slot: usize, t: &Tensor) -> Result<Type> {
    let in_repack = t
        .buffer()
        .is_some_and(|b| b.get_type().is::<RepackBufferType>());
    if !in_repack {
        return Ok(t.ty());
    }
    let f32_acts = node.src(1).is_some_and(|b| b.ty() == Type::F32);
    let weights = matches!(node.op(), Op::MulMat | Op::MulMatId) && slot == 0 && f32_acts;
    if !weights {
        return Err(Error::unsupported(format!(
            "CPU: {} (node {:?}) cannot read operand {slot} {:?}: it lies in a {NAME} buffer, \
             which only MUL_MAT and MUL_MAT_ID read, as their weights with F32 activations",
            node.op().name(),
            node.name(),
            t.name()
        )));
    }
    Ok(layout(t)?.0)
}

/// Every operand of `node` that lies in a repack buffer may be used there
/// ([`kernel_type`]); `Err` naming the first that may not.
pub(crate) fn check_operands(node: &Tensor) -> Result<()> {
    for slot in 0..crate::tensor::MAX_SRC {
        if let Some(s) = node.src(slot) {
            kernel_type(node, slot, s)?;
        }
    }
    Ok(())
}

/// One allocation of [`cpu_repack_buffer_type`]: host memory holding its tensors in their
/// layouts.
pub(crate) struct RepackBuffer {
    mem: HostMemory,
}

impl RepackBuffer {
    fn refuse(&self, what: &str, t: Option<&Tensor>) -> Error {
        let tensor = t.map_or(String::new(), |t| format!(" of tensor {:?}", t.name()));
        Error::unsupported(format!(
            "{NAME} buffer: {what}{tensor} refused: its tensors are stored repacked for the CPU \
             kernels (set each whole tensor once; they cannot be read back or written in part)"
        ))
    }

    /// The layout's type and bytes of tensor `t` placed at byte `at`, checked to fit in this
    /// buffer.
    pub(crate) fn placed(&self, t: &Tensor, at: usize) -> Result<(Type, usize)> {
        let (ty, bytes) = layout(t)?;
        if at
            .checked_add(bytes)
            .is_none_or(|end| end > self.mem.size())
        {
            return Err(Error::invalid(format!(
                "{NAME} buffer: tensor {:?} repacked takes {bytes} bytes at offset {at}, past \
                 the buffer's {}",
                t.name(),
                self.mem.size()
            )));
        }
        Ok((ty, bytes))
    }
}

// SAFETY: the memory is `mem`'s, which upholds the contract; this wrapper only changes what
// is written (and refuses raw reads and writes).
unsafe impl BufferImpl for RepackBuffer {
    fn size(&self) -> usize {
        self.mem.size()
    }
    fn host_ptr(&self) -> Option<NonNull<u8>> {
        self.mem.host_ptr()
    }
    unsafe fn write(&self, _offset: usize, _data: &[u8]) -> Result<()> {
        Err(self.refuse("a raw write", None))
    }
    unsafe fn read(&self, _offset: usize, _out: &mut [u8]) -> Result<()> {
        Err(self.refuse("a raw read", None))
    }
    unsafe fn fill(&self, offset: usize, size: usize, value: u8) -> Result<()> {
        // SAFETY: forwarded from this method's contract.
        unsafe { self.mem.fill(offset, size, value) }
    }
    fn init_tensor(&self, t: &Tensor, offset: usize) -> Result<()> {
        self.placed(t, offset).map(|_| ())
    }
    unsafe fn set_tensor(&self, t: &Tensor, at: usize, offset: usize, data: &[u8]) -> Result<()> {
        if offset != 0 || data.len() != t.nbytes() {
            return Err(self.refuse(
                &format!(
                    "a write of {} bytes at offset {offset} (not the whole {} bytes)",
                    data.len(),
                    t.nbytes()
                ),
                Some(t),
            ));
        }
        let (_, bytes) = self.placed(t, at)?;
        let base = self
            .mem
            .host_ptr()
            .map_or(std::ptr::null_mut(), |p| p.as_ptr());
        // SAFETY: `placed` checked that the tensor's repacked bytes lie in the buffer; the
        // caller excludes every other access to the buffer during the call.
        let dst = unsafe { std::slice::from_raw_parts_mut(base.add(at), bytes) };
        repack_blocks(t.ty(), data, dst)
    }
    unsafe fn get_tensor(
        &self,
        t: &Tensor,
        _at: usize,
        _offset: usize,
        _out: &mut [u8],
    ) -> Result<()> {
        Err(self.refuse("get_tensor", Some(t)))
    }
    unsafe fn memset_tensor(
        &self,
        t: &Tensor,
        _at: usize,
        _offset: usize,
        _size: usize,
        _value: u8,
    ) -> Result<()> {
        Err(self.refuse("memset_tensor", Some(t)))
    }
}
