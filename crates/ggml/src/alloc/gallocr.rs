//! The graph allocator (GGML's `ggml_gallocr`).

/// Places a graph's intermediate tensors in one compute buffer, reusing memory.
pub struct Gallocr;
