//! # ggml
//!
//! GGML's tensor library and backend system, in pure Rust.
#![warn(missing_docs)]

pub mod error;
pub mod quants;
pub mod types;

pub use error::{Error, Result, Status};
pub use types::{bf16, f16, Type, QK_K};
