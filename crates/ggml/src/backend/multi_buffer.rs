//! Multi-buffers: one buffer handle owning several, as `ggml_backend_alloc_ctx_tensors` returns
//! when a context's tensors exceed the buffer type's maximum size.

use crate::error::{Error, Result};

use super::Buffer;

/// Combines `buffers` into one buffer that owns them (`ggml_backend_multi_buffer_alloc_buffer`):
/// its size is their sum, `clear` and `set_usage` reach every part, and freeing it frees them
/// all. Tensors stay bound to the parts. `Err` for an empty list, a buffer listed twice, a freed
/// buffer, or a multi-buffer among the parts.
pub fn multi_buffer_alloc_buffer(buffers: Vec<Buffer>) -> Result<Buffer> {
    if buffers.is_empty() {
        return Err(Error::invalid(
            "multi_buffer_alloc_buffer: the list of buffers is empty",
        ));
    }
    for (i, b) in buffers.iter().enumerate() {
        if let Some(j) = buffers[..i].iter().position(|e| e == b) {
            return Err(Error::invalid(format!(
                "multi_buffer_alloc_buffer: buffers[{i}] is the same buffer as buffers[{j}]"
            )));
        }
        if b.is_freed() {
            return Err(Error::Freed(format!(
                "multi_buffer_alloc_buffer: buffers[{i}] ({}) was freed",
                b.name()
            )));
        }
        if b.is_multi_buffer() {
            return Err(Error::invalid(format!(
                "multi_buffer_alloc_buffer: buffers[{i}] is itself a multi-buffer"
            )));
        }
    }
    Ok(Buffer::multi(buffers))
}
