#![doc = include_str!("../doc/alloc.md")]
//! Placing tensors in buffers: one tensor at an offset ([`tensor_alloc`]), all of a context
//! ([`alloc_ctx_tensors`]), and a graph's intermediate results with memory reuse
//! ([`Gallocr`]).

mod gallocr;

pub use gallocr::Gallocr;

use crate::backend::{multi_buffer_alloc_buffer, Backend, Buffer, BufferType};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::tensor::{Binding, Tensor};

/// Places `t` at byte `offset` of `buffer` (`ggml_backend_tensor_alloc`, with an offset instead
/// of an address). `Err` if `t` is already allocated or a view, if it does not fit, if the
/// buffer is a multi-buffer or was freed, or if the buffer's `init_tensor` fails (the tensor is
/// then left unallocated).
pub fn tensor_alloc(buffer: &Buffer, t: &Tensor, offset: usize) -> Result<()> {
    if buffer.is_multi_buffer() {
        return Err(Error::invalid(format!(
            "tensor_alloc: buffer {} is a multi-buffer; place tensors in its parts",
            buffer.name()
        )));
    }
    if buffer.is_freed() {
        return Err(Error::Freed(format!(
            "tensor_alloc: buffer {} was freed",
            buffer.name()
        )));
    }
    if t.view_src().is_some() {
        return Err(Error::invalid(format!(
            "tensor_alloc: tensor {:?} is a view; use view_init once its source is allocated",
            t.name()
        )));
    }
    let size = buffer.get_type().get_alloc_size(t);
    if offset
        .checked_add(size)
        .is_none_or(|end| end > buffer.get_size())
    {
        return Err(Error::AllocFailed(format!(
            "tensor_alloc: tensor {:?} needs {size} bytes at offset {offset}, past the end of \
             buffer {} of {} bytes (size a buffer with its type's get_alloc_size per tensor, or \
             let alloc_ctx_tensors size it)",
            t.name(),
            buffer.name(),
            buffer.get_size()
        )));
    }
    {
        let mut slot = t.binding_slot();
        if slot.is_some() {
            return Err(Error::invalid(format!(
                "tensor_alloc: tensor {:?} is already allocated",
                t.name()
            )));
        }
        *slot = Some(Binding {
            buffer: buffer.clone(),
            offset,
        });
    }
    let r = buffer.init_tensor(t, offset);
    if r.is_err() {
        // An Err means no effect: the tensor stays unallocated.
        *t.binding_slot() = None;
    }
    r
}

/// Initialises a view whose source is allocated (`ggml_backend_view_init`): the view's bytes
/// are its source's, at its offset; the buffer gets to prepare it.
pub fn view_init(t: &Tensor) -> Result<()> {
    let Some(src) = t.view_src() else {
        return Err(Error::invalid(format!(
            "view_init: tensor {:?} is not a view",
            t.name()
        )));
    };
    let b = src.binding().ok_or_else(|| {
        Error::invalid(format!(
            "view_init: the source {:?} of view {:?} is not allocated",
            src.name(),
            t.name()
        ))
    })?;
    b.buffer.init_tensor(t, b.offset + t.view_offs())
}

/// Bytes `t` takes in a buffer of `buft`: its allocation size padded to the alignment.
fn padded_alloc_size(buft: &BufferType, t: &Tensor) -> Result<usize> {
    let size = buft.get_alloc_size(t);
    size.checked_next_multiple_of(buft.get_alignment())
        .ok_or_else(|| {
            Error::AllocFailed(format!(
                "alloc_ctx_tensors: tensor {:?} needs {size} bytes in buffer type {}, too many \
                 to align",
                t.name(),
                buft.name()
            ))
        })
}

/// Allocates every tensor of a `no_alloc` context in the backend's default buffer type
/// (`ggml_backend_alloc_ctx_tensors`).
pub fn alloc_ctx_tensors(ctx: &Context, backend: &Backend) -> Result<Buffer> {
    alloc_ctx_tensors_from_buft(ctx, &backend.get_device().buffer_type())
}

/// Allocates every unallocated, non-view tensor of a `no_alloc` context in buffers of `buft`
/// (`ggml_backend_alloc_ctx_tensors_from_buft`): one buffer, or — when the tensors exceed the
/// type's maximum size — a multi-buffer of several, each tensor whole in one part. Views are
/// then initialised. `Err` if the context holds its own data, if nothing needs memory, or if
/// an allocation fails (buffers made so far are freed).
pub fn alloc_ctx_tensors_from_buft(ctx: &Context, buft: &BufferType) -> Result<Buffer> {
    if !ctx.get_no_alloc() {
        return Err(Error::invalid(
            "alloc_ctx_tensors: the context holds its tensors' data itself (no_alloc = false); \
             create it with no_alloc = true",
        ));
    }
    let max = buft.get_max_size();
    let tensors = ctx.tensors();
    let todo: Vec<&Tensor> = tensors
        .iter()
        .filter(|t| t.view_src().is_none() && !t.is_allocated())
        .collect();

    // Partition into runs that fit the maximum size (an oversized tensor gets a run alone);
    // each tensor's offset in its run is recorded with it.
    let mut runs: Vec<(Vec<(&Tensor, usize)>, usize)> = Vec::new();
    let mut cur: (Vec<(&Tensor, usize)>, usize) = (Vec::new(), 0);
    for t in todo {
        let size = padded_alloc_size(buft, t)?;
        // A sum past the address space exceeds any maximum too.
        if cur.1 > 0 && cur.1.checked_add(size).is_none_or(|end| end > max) {
            runs.push(std::mem::take(&mut cur));
        }
        cur.0.push((t, cur.1));
        cur.1 += size;
    }
    if cur.1 > 0 {
        runs.push(cur);
    }
    if runs.is_empty() {
        return Err(Error::invalid(
            "alloc_ctx_tensors: no tensor of the context needs memory (all are allocated, \
             views, or empty)",
        ));
    }

    let mut buffers = Vec::with_capacity(runs.len());
    let result = (|| {
        for (run, size) in &runs {
            let buf = buft.alloc_buffer(*size)?;
            buffers.push(buf.clone());
            for &(t, offset) in run {
                tensor_alloc(&buf, t, offset)?;
            }
        }
        for t in &tensors {
            if let Some(src) = t.view_src() {
                if src.is_allocated() {
                    view_init(t)?;
                }
            }
        }
        Ok(())
    })();
    if let Err(e) = result {
        for t in &tensors {
            let mut slot = t.binding_slot();
            if slot.as_ref().is_some_and(|b| buffers.contains(&b.buffer)) {
                *slot = None;
            }
        }
        buffers.iter().for_each(Buffer::release);
        return Err(e);
    }
    if buffers.len() == 1 {
        Ok(buffers.pop().expect("one buffer"))
    } else {
        multi_buffer_alloc_buffer(buffers)
    }
}
