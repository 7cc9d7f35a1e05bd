//! ```
//! use ggml::gguf::{limits, GgufWriter};
//! let mut w = GgufWriter::new();
//! let deep = (0..=limits::MAX_ARRAY_DEPTH).fold(ggml::gguf::Array::from(vec![1u8]), |a, _| {
//!     ggml::gguf::Array::Array(vec![a])
//! });
//! assert!(w.set("too.deep", deep).is_err(), "arrays nest at most MAX_ARRAY_DEPTH deep");
//! ```
//!
//! Limits the reader enforces on untrusted files, on top of "nothing may claim more bytes than
//! the file has left".
//!
//! Every count and length is checked against the bytes that remain before anything is
//! allocated, and containers grow as their elements are actually decoded, so memory stays
//! proportional to the input. The constants below bound what even a large, well-formed-looking
//! file can ask for.

/// Longest string (key, value or tensor name) in bytes: 64 MiB, as GGML's
/// `GGUF_MAX_STRING_LENGTH`.
pub const MAX_STRING_LEN: u64 = 64 * 1024 * 1024;

/// Most elements in one metadata array: 64 Mi, as GGML's `GGUF_MAX_ARRAY_ELEMENTS`.
pub const MAX_ARRAY_LEN: u64 = 64 * 1024 * 1024;

/// Deepest array nesting accepted (an array of scalars has depth 1). GGML accepts no nesting;
/// the format and the `gguf` Python package allow it.
pub const MAX_ARRAY_DEPTH: usize = 8;

/// Largest `general.alignment`: 1 MiB, as GGML.
pub const MAX_ALIGNMENT: u64 = 1 << 20;

/// Longest tensor name in bytes: GGML's `GGML_MAX_NAME` (64) less its terminating NUL.
pub const MAX_TENSOR_NAME_LEN: usize = 63;

/// Dimensions a GGUF tensor info may carry (GGML's `GGML_MAX_DIMS`).
pub const MAX_FILE_DIMS: usize = 4;

/// Fewest bytes one key/value pair takes: key length (8), one key byte, type (4), one value byte.
pub(crate) const MIN_KV_BYTES: u64 = 8 + 1 + 4 + 1;

/// Fewest bytes one tensor info takes: name length (8), `n_dims` (4), type (4), offset (8). (GGML
/// accepts an empty tensor name.)
pub(crate) const MIN_TENSOR_INFO_BYTES: u64 = 8 + 4 + 4 + 8;
