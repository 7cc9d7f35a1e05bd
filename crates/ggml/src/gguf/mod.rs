#![doc = include_str!("../doc/gguf.md")]
//! GGUF files: reading ([`GgufFile`]), writing ([`GgufWriter`]), metadata values ([`Value`]).
//!
//! GGUF is GGML's container for model weights. Layout (all little-endian):
//!
//! | field | encoding |
//! | --- | --- |
//! | magic | `b"GGUF"` |
//! | version | u32 (2 or 3; v1 is refused) |
//! | n_tensors, n_kv | i64 each |
//! | key/value pairs | key (u64 length + bytes), value type (u32), value |
//! | tensor infos | name (string), n_dims (u32, ≤ 4), ne (i64 × n_dims), type (u32), offset (u64) |
//! | padding | zeros up to the alignment |
//! | data section | tensor bytes, each at an aligned offset from the section's start |
//!
//! A string is a u64 length and that many bytes (no terminator); an array is its element type
//! (u32), its count (u64) and the elements. The alignment is `general.alignment` (a u32 power of
//! two) or [`DEFAULT_ALIGNMENT`].
//!
//! GGML's and ggmlR's functions map onto these types: `gguf_init_from_file` / ggmlR's `gguf_load`
//! → [`GgufFile::open`] (or [`load`]); `gguf_get_val_*` → `GgufFile::get_val_*`;
//! `gguf_find_tensor`, `gguf_get_tensor_*` → [`GgufFile::find_tensor`], [`TensorInfo`];
//! ggmlR's `gguf_metadata`, `gguf_tensor_names`, `gguf_tensor_info`, `gguf_tensor_data` →
//! [`GgufFile::metadata`], [`GgufFile::tensor_names`], [`GgufFile::tensor_info`],
//! [`GgufFile::tensor_data`] (bytes) and [`GgufFile::tensor_data_f32`]; `gguf_init_empty`,
//! `gguf_set_*`, `gguf_add_tensor`, `gguf_write_to_file` → [`GgufWriter`].
//!
//! Untrusted input is safe: any byte string gives `Ok` or an [`Error::Format`](crate::Error)
//! that names the field and the byte offset; see [`limits`].

mod convert;
mod cursor;
pub mod limits;
mod load;
mod reader;
mod tensor;
mod value;
mod writer;

pub use load::LoadedTensors;
pub use reader::{FileBytes, GgufFile};
pub use tensor::{TensorInfo, MAX_DIMS};
pub use value::{Array, GgufString, Value, ValueType};
pub use writer::GgufWriter;

/// The file magic, `"GGUF"` (`GGUF_MAGIC`).
pub const MAGIC: [u8; 4] = *b"GGUF";

/// The version this crate writes (`GGUF_VERSION`); it reads 2 and 3.
pub const VERSION: u32 = 3;

/// Alignment when `general.alignment` is absent (`GGUF_DEFAULT_ALIGNMENT`).
pub const DEFAULT_ALIGNMENT: usize = 32;

/// The key that sets the alignment (`GGUF_KEY_GENERAL_ALIGNMENT`).
pub const KEY_GENERAL_ALIGNMENT: &str = "general.alignment";

/// Opens a GGUF file (ggmlR's `gguf_load`); the same as [`GgufFile::open`].
pub fn load(path: impl AsRef<std::path::Path>) -> crate::Result<GgufFile> {
    GgufFile::open(path)
}
