//! Sizing a context without arithmetic: [`ContextSize`] counts the bytes of what a context will
//! hold — tensors' metadata, graphs, tensor data — with GGML's accounting, and
//! [`Context::for_metadata`] makes the usual metadata-only context in one call.
//!
//! ```
//! use ggml::{Context, ContextSize, Type};
//! # fn main() -> ggml::Result<()> {
//! // Two 4×4 F32 tensors and their sum, all with data, and one default graph.
//! let ctx = ContextSize::new()
//!     .data(Type::F32, &[4, 4])
//!     .data(Type::F32, &[4, 4])
//!     .data(Type::F32, &[4, 4])
//!     .graph()
//!     .init(false)?;
//! let a = ctx.new_tensor_2d(Type::F32, 4, 4)?;
//! let b = ctx.new_tensor_2d(Type::F32, 4, 4)?;
//! let sum = ctx.add(&a, &b)?;
//! ctx.build_forward_expand(&sum)?;
//! assert_eq!(ctx.used_mem(), ctx.mem_size());
//!
//! // Weights whose data lives in a backend buffer: metadata of 10 tensors and a graph of 64.
//! let meta = Context::for_metadata(10, 64)?;
//! assert_eq!(
//!     meta.mem_size(),
//!     ContextSize::new().tensors(10).graph_custom(64, false).bytes()?
//! );
//! # Ok(()) }
//! ```

use crate::context::{pad, tensor_overhead, Context, MEM_ALIGN};
use crate::error::{Error, Result};
use crate::graph::{graph_overhead, graph_overhead_custom};
use crate::types::Type;

/// A context's budget, counted from its contents. Each method adds to it; an overflow or a bad
/// shape is kept and reported by [`ContextSize::bytes`] and [`ContextSize::init`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContextSize {
    bytes: usize,
    error: Option<Error>,
}

impl ContextSize {
    /// An empty budget.
    pub fn new() -> ContextSize {
        ContextSize::default()
    }

    fn add(mut self, what: impl FnOnce() -> String, bytes: Option<usize>) -> ContextSize {
        if self.error.is_none() {
            match bytes.and_then(|b| self.bytes.checked_add(b)) {
                Some(total) => self.bytes = total,
                None => {
                    self.error = Some(Error::invalid(format!(
                        "ContextSize: {} takes more bytes than memory can address",
                        what()
                    )))
                }
            }
        }
        self
    }

    /// The metadata of `n` tensors (whose data is elsewhere: views, or a `no_alloc` context).
    pub fn tensors(self, n: usize) -> ContextSize {
        self.add(|| format!("tensors({n})"), n.checked_mul(tensor_overhead()))
    }

    /// One tensor of type `ty` and shape `ne` with its data in the context (for contexts made
    /// with `no_alloc == false`): its metadata plus its bytes padded to 16.
    pub fn data(mut self, ty: Type, ne: &[i64]) -> ContextSize {
        let bytes = match nbytes(ty, ne) {
            Ok(b) => b,
            Err(e) => {
                self.error.get_or_insert(e);
                return self;
            }
        };
        self.add(
            || format!("data({ty}, {ne:?})"),
            bytes
                .checked_next_multiple_of(MEM_ALIGN)
                .and_then(|b| b.checked_add(tensor_overhead())),
        )
    }

    /// One graph of GGML's default size, 2048 nodes ([`Context::new_graph`]).
    pub fn graph(self) -> ContextSize {
        self.add(|| "graph()".into(), Some(graph_overhead()))
    }

    /// One graph of `size` nodes, with gradients when `grads` ([`Context::new_graph_custom`]).
    pub fn graph_custom(self, size: usize, grads: bool) -> ContextSize {
        let bytes = graph_overhead_custom(size, grads);
        self.add(
            || format!("graph_custom({size}, {grads})"),
            (bytes != usize::MAX).then_some(bytes),
        )
    }

    /// The budget in bytes; `Err` for an overflow or a bad shape given on the way.
    pub fn bytes(&self) -> Result<usize> {
        match &self.error {
            Some(e) => Err(e.clone()),
            None => Ok(pad(self.bytes.max(MEM_ALIGN), MEM_ALIGN)),
        }
    }

    /// A context of this budget ([`Context::init`]).
    pub fn init(&self, no_alloc: bool) -> Result<Context> {
        Context::init(self.bytes()?, no_alloc)
    }
}

/// Bytes of a contiguous tensor of `ty` and shape `ne`, with the checks `new_tensor` makes.
fn nbytes(ty: Type, ne: &[i64]) -> Result<usize> {
    let bad = |m: String| Error::invalid(format!("ContextSize::data({ty}, {ne:?}): {m}"));
    if ne.is_empty() || ne.len() > crate::MAX_DIMS {
        return Err(bad(format!(
            "a tensor has 1 to {} dimensions",
            crate::MAX_DIMS
        )));
    }
    if let Some(d) = ne.iter().find(|&&d| d < 0) {
        return Err(bad(format!("dimension {d} is negative")));
    }
    let rows = ne[1..]
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d as usize))
        .ok_or_else(|| bad("more rows than memory can address".into()))?;
    let row = ty.row_size(ne[0]).map_err(|e| bad(e.to_string()))?;
    row.checked_mul(rows)
        .ok_or_else(|| bad("more bytes than memory can address".into()))
}

impl Context {
    /// A context for the metadata of `n_tensors` tensors and, when `graph_size > 0`, one graph
    /// of `graph_size` nodes, with `no_alloc` set: the usual context for weights loaded into a
    /// backend buffer, or for a graph the graph allocator places.
    pub fn for_metadata(n_tensors: usize, graph_size: usize) -> Result<Context> {
        let mut size = ContextSize::new().tensors(n_tensors);
        if graph_size > 0 {
            size = size.graph_custom(graph_size, false);
        }
        size.init(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_follow_ggml_accounting() {
        assert_eq!(ContextSize::new().tensors(3).bytes(), Ok(3 * 368));
        // 4×4 f32 = 64 bytes of data, already a multiple of 16.
        assert_eq!(
            ContextSize::new().data(Type::F32, &[4, 4]).bytes(),
            Ok(368 + 64)
        );
        // 3 f32 = 12 bytes, padded to 16; q4_0 rows of 32 are 18 bytes each.
        assert_eq!(
            ContextSize::new().data(Type::F32, &[3]).bytes(),
            Ok(368 + 16)
        );
        assert_eq!(
            ContextSize::new().data(Type::Q4_0, &[32, 3]).bytes(),
            Ok(368 + 64)
        );
        assert_eq!(ContextSize::new().graph().bytes(), Ok(graph_overhead()));
        assert_eq!(ContextSize::new().bytes(), Ok(MEM_ALIGN), "never empty");
    }

    #[test]
    fn a_context_of_the_counted_size_holds_exactly_that() {
        // relu's result gets data too in a context that allocates.
        let ctx = ContextSize::new()
            .data(Type::F32, &[5, 3])
            .data(Type::F32, &[5, 3])
            .graph_custom(8, false)
            .init(false)
            .unwrap();
        let a = ctx.new_tensor_2d(Type::F32, 5, 3).unwrap();
        let b = ctx.relu(&a).unwrap();
        let g = ctx.new_graph_custom(8, false).unwrap();
        g.build_forward_expand(&b).unwrap();
        assert_eq!(ctx.used_mem(), ctx.mem_size());
        // Nothing more fits.
        let e = ctx.new_tensor_1d(Type::F32, 1).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::AllocFailed);

        let meta = Context::for_metadata(2, 16).unwrap();
        assert!(meta.get_no_alloc());
        let x = meta.new_tensor_1d(Type::F32, 1 << 20).unwrap();
        let y = meta.relu(&x).unwrap();
        meta.new_graph_custom(16, false)
            .unwrap()
            .build_forward_expand(&y)
            .unwrap();
        assert!(meta.new_tensor_1d(Type::F32, 1).is_err());
    }

    #[test]
    fn bad_shapes_and_overflows_are_errors_naming_them() {
        let e = ContextSize::new()
            .data(Type::Q4_0, &[33])
            .bytes()
            .unwrap_err();
        assert!(e.to_string().contains("data(q4_0, [33])"), "{e}");
        let e = ContextSize::new()
            .data(Type::F32, &[-1])
            .bytes()
            .unwrap_err();
        assert!(e.to_string().contains("negative"), "{e}");
        let e = ContextSize::new().tensors(usize::MAX).bytes().unwrap_err();
        assert!(
            e.to_string().contains("tensors(18446744073709551615)"),
            "{e}"
        );
        let e = ContextSize::new()
            .graph_custom(usize::MAX, true)
            .init(true)
            .unwrap_err();
        assert!(e.to_string().contains("graph_custom"), "{e}");
        // The first error is kept.
        let e = ContextSize::new()
            .data(Type::F32, &[])
            .tensors(usize::MAX)
            .bytes()
            .unwrap_err();
        assert!(e.to_string().contains("1 to"), "{e}");
    }
}
