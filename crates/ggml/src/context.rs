//! Contexts: the owners of tensor and graph metadata, with GGML's memory accounting.
//!
//! A context has a fixed budget of `mem_size` bytes, spent as GGML spends it (368 bytes of
//! metadata per tensor, the graph sizes of `ggml_graph_overhead_custom`, and — when `no_alloc`
//! is false — the tensor's data padded to 16 bytes). Running out is an `Err`, not an abort.
//! With `no_alloc == false` tensor data lives in host memory the context owns (a CPU buffer of
//! `mem_size` bytes, created when the first such tensor is), so tensors of such a context can be
//! read and written at once and computed on the CPU backend.

use std::sync::{Arc, Mutex};

use crate::backend::{host_buffer_type, Buffer};
use crate::error::{Error, Result};
use crate::graph::{graph_nbytes, Graph};
use crate::ops::Op;
use crate::tensor::{
    contiguous_strides, lock, span_bytes, Binding, Tensor, TensorDesc, MAX_DIMS, MAX_OP_PARAMS,
};
use crate::types::Type;

/// Alignment of objects inside a context (`GGML_MEM_ALIGN`).
pub const MEM_ALIGN: usize = 16;
/// Bytes of GGML's per-object header (`sizeof(struct ggml_object)`).
const OBJECT_SIZE: usize = 32;
/// Bytes of GGML's tensor struct (`sizeof(struct ggml_tensor)`).
const TENSOR_SIZE: usize = 336;

/// Metadata bytes one tensor takes in a context (`ggml_tensor_overhead`, 368).
pub const fn tensor_overhead() -> usize {
    OBJECT_SIZE + TENSOR_SIZE
}

pub(crate) const fn pad(x: usize, align: usize) -> usize {
    x.div_ceil(align) * align
}

struct State {
    used: usize,
    no_alloc: bool,
    tensors: Vec<Tensor>,
    /// Host memory for tensor data; replaced (not reused) after `reset`, so tensors created
    /// before a reset never alias tensors created after it.
    arena: Option<Buffer>,
}

struct Inner {
    mem_size: usize,
    state: Mutex<State>,
}

/// A context (`struct ggml_context`): creates tensors and graphs and accounts for their memory.
/// Cheap to clone; clones share the context.
#[derive(Clone)]
pub struct Context(Arc<Inner>);

/// What a new tensor is: its op, parameters, operands and (for views) what it views.
pub(crate) struct NewTensor<'a> {
    pub ty: Type,
    pub ne: &'a [i64],
    pub op: Op,
    pub params: &'a [i32],
    /// Operands by slot; `None` for an empty slot before a used one.
    pub src: Vec<Option<Tensor>>,
    pub view: Option<(&'a Tensor, usize)>,
    /// Explicit strides for views that are not contiguous; `None` = contiguous.
    pub nb: Option<[usize; MAX_DIMS]>,
    /// The closure of a custom op.
    pub custom: Option<crate::ops::custom::CustomFn>,
}

impl<'a> NewTensor<'a> {
    /// A fresh (non-view) result of `op` with operands in slots `0..src.len()`.
    pub fn op(ty: Type, ne: &'a [i64], op: Op, src: Vec<Tensor>) -> NewTensor<'a> {
        NewTensor::op_slots(ty, ne, op, src.into_iter().map(Some).collect())
    }

    /// A fresh (non-view) result of `op` with operands by slot.
    pub fn op_slots(ty: Type, ne: &'a [i64], op: Op, src: Vec<Option<Tensor>>) -> NewTensor<'a> {
        NewTensor {
            ty,
            ne,
            op,
            params: &[],
            src,
            view: None,
            nb: None,
            custom: None,
        }
    }

    /// The same, with op parameters.
    pub fn params(mut self, params: &'a [i32]) -> NewTensor<'a> {
        self.params = params;
        self
    }

    /// Makes the result a view of `of` at byte offset `offs`.
    pub fn view_of(mut self, of: &'a Tensor, offs: usize) -> NewTensor<'a> {
        self.view = Some((of, offs));
        self
    }

    /// Attaches the closure of a custom op.
    pub fn custom(mut self, f: crate::ops::custom::CustomFn) -> NewTensor<'a> {
        self.custom = Some(f);
        self
    }

    /// Gives the result explicit strides.
    pub fn strides(mut self, nb: [usize; MAX_DIMS]) -> NewTensor<'a> {
        self.nb = Some(nb);
        self
    }
}

impl Context {
    /// Creates a context with a budget of `mem_size` bytes (`ggml_init`). With `no_alloc`,
    /// tensors get metadata only and their data is allocated later in a backend buffer.
    pub fn init(mem_size: usize, no_alloc: bool) -> Result<Context> {
        let mem_size = mem_size
            .max(MEM_ALIGN)
            .checked_next_multiple_of(MEM_ALIGN)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "Context::init: mem_size {mem_size} is too large to align to {MEM_ALIGN} bytes"
                ))
            })?;
        Ok(Context(Arc::new(Inner {
            mem_size,
            state: Mutex::new(State {
                used: 0,
                no_alloc,
                tensors: Vec::new(),
                arena: None,
            }),
        })))
    }

    /// The context's budget in bytes (`ggml_get_mem_size`).
    pub fn mem_size(&self) -> usize {
        self.0.mem_size
    }

    /// Bytes used so far (`ggml_used_mem`).
    pub fn used_mem(&self) -> usize {
        lock(&self.0.state).used
    }

    /// Whether new tensors get metadata only (`ggml_get_no_alloc`).
    pub fn get_no_alloc(&self) -> bool {
        lock(&self.0.state).no_alloc
    }

    /// Changes `no_alloc` for tensors created from now on (`ggml_set_no_alloc`).
    pub fn set_no_alloc(&self, no_alloc: bool) {
        lock(&self.0.state).no_alloc = no_alloc;
    }

    /// Forgets every tensor and graph and makes the whole budget available again
    /// (`ggml_reset`). Handles to old tensors stay valid and keep their own memory.
    pub fn reset(&self) {
        let mut s = lock(&self.0.state);
        s.used = 0;
        s.tensors.clear();
        s.arena = None;
    }

    /// Releases the context (`ggml_free`); the same as dropping it.
    pub fn free(self) {}

    /// The tensors of the context in creation order (`ggml_get_first_tensor`/`_next_tensor`).
    pub fn tensors(&self) -> Vec<Tensor> {
        lock(&self.0.state).tensors.clone()
    }

    /// The first tensor named `name` (`ggml_get_tensor`).
    pub fn get_tensor(&self, name: &str) -> Option<Tensor> {
        lock(&self.0.state)
            .tensors
            .iter()
            .find(|t| t.name() == name)
            .cloned()
    }

    /// The largest `nbytes` among the context's tensors (`ggml_get_max_tensor_size`).
    pub fn get_max_tensor_size(&self) -> usize {
        lock(&self.0.state)
            .tensors
            .iter()
            .map(Tensor::nbytes)
            .max()
            .unwrap_or(0)
    }

    /// Reserves `payload` bytes (after a 32-byte object header) and returns the payload offset.
    /// `hint` says how to size the context for what did not fit.
    fn reserve(&self, s: &mut State, payload: usize, what: &str, hint: &str) -> Result<usize> {
        // `None` (more than the address space) is "does not fit" like any other excess.
        let needed = payload
            .checked_next_multiple_of(MEM_ALIGN)
            .and_then(|size| size.checked_add(OBJECT_SIZE));
        let end = needed.and_then(|n| n.checked_add(s.used));
        let Some(end) = end.filter(|&end| end <= self.0.mem_size) else {
            let needed =
                needed.map_or_else(|| format!("more than {}", usize::MAX), |n| n.to_string());
            return Err(Error::AllocFailed(format!(
                "context of {} bytes is full: {what} needs {needed} bytes, {} are left \
                 ({hint}; ContextSize counts a budget for you)",
                self.0.mem_size,
                self.0.mem_size - s.used
            )));
        };
        let offset = s.used + OBJECT_SIZE;
        s.used = end;
        Ok(offset)
    }

    pub(crate) fn reserve_graph(&self, size: usize, grads: bool) -> Result<()> {
        let mut s = lock(&self.0.state);
        // A size whose byte count overflows cannot fit in any context.
        let bytes = graph_nbytes(size, grads).unwrap_or(usize::MAX);
        let hint = format!(
            "size the context with graph_overhead_custom({size}, {grads}) per graph of this \
             size, graph_overhead() per default graph"
        );
        self.reserve(&mut s, bytes, &format!("a graph of size {size}"), &hint)
            .map(|_| ())
    }

    /// Creates a tensor: validates the shape, accounts for its memory, binds its data.
    pub(crate) fn new_tensor_impl(&self, n: NewTensor<'_>) -> Result<Tensor> {
        if n.ne.is_empty() || n.ne.len() > MAX_DIMS {
            return Err(Error::invalid(format!(
                "new_tensor: {} dimensions given; a tensor has 1 to {MAX_DIMS}",
                n.ne.len()
            )));
        }
        let mut ne = [1i64; MAX_DIMS];
        ne[..n.ne.len()].copy_from_slice(n.ne);
        if let Some(i) = ne.iter().position(|&x| x < 0) {
            return Err(Error::invalid(format!(
                "new_tensor: ne[{i}] = {} is negative",
                ne[i]
            )));
        }
        let blck = n.ty.blck_size() as i64;
        if ne[0] % blck != 0 {
            return Err(Error::invalid(format!(
                "new_tensor: ne[0] = {} is not a multiple of the {} block size {blck}",
                ne[0], n.ty
            )));
        }
        let elements = ne
            .iter()
            .try_fold(1i64, |acc, &x| acc.checked_mul(x))
            .filter(|&e| (e as u128) * (n.ty.type_size() as u128) < (isize::MAX as u128));
        if elements.is_none() {
            return Err(Error::invalid(format!(
                "new_tensor: shape {ne:?} of {} has more bytes than memory can address",
                n.ty
            )));
        }
        let nb = n.nb.unwrap_or_else(|| contiguous_strides(n.ty, &ne));
        let data_size = span_bytes(n.ty, &ne, &nb).ok_or_else(|| {
            Error::invalid(format!(
                "new_tensor: shape {ne:?} with strides {nb:?} spans more bytes than memory can \
                 address"
            ))
        })?;

        // Views point into their (root) source; check the bounds GGML checks.
        let (view_src, view_offs) = match n.view {
            Some((src, offs)) => {
                let (root, offs) = match src.view_src() {
                    Some(root) => (root.clone(), offs.saturating_add(src.view_offs())),
                    None => (src.clone(), offs),
                };
                // Saturating: an offset past the address space is out of bounds like any other.
                if data_size > 0 && data_size.saturating_add(offs) > root.nbytes() {
                    return Err(Error::invalid(format!(
                        "view: {data_size} bytes at offset {offs} exceed the {} bytes of {:?}",
                        root.nbytes(),
                        root.name()
                    )));
                }
                (Some(root), offs)
            }
            None => (None, 0),
        };
        if n.params.len() > MAX_OP_PARAMS / 4 {
            return Err(Error::invalid(format!(
                "op {:?}: {} parameters, at most {}",
                n.op,
                n.params.len(),
                MAX_OP_PARAMS / 4
            )));
        }
        let mut op_params = [0i32; MAX_OP_PARAMS / 4];
        op_params[..n.params.len()].copy_from_slice(n.params);

        let mut s = lock(&self.0.state);
        let owns_data = view_src.is_none() && !s.no_alloc;
        // The arena first: if the system refuses it, nothing of the budget has been spent.
        let arena = match (&s.arena, owns_data) {
            (_, false) => None,
            (Some(a), true) => Some(a.clone()),
            (None, true) => {
                let a = host_buffer_type().alloc_buffer(self.0.mem_size)?;
                s.arena = Some(a.clone());
                Some(a)
            }
        };
        let payload = TENSOR_SIZE + if owns_data { data_size } else { 0 };
        let hint = if owns_data {
            "size the context with tensor_overhead() per tensor plus each tensor's data \
             padded to 16 bytes"
        } else {
            "size the context with tensor_overhead() per tensor"
        };
        let offset = self.reserve(&mut s, payload, "a tensor", hint)?;
        let tensor = Tensor::from_desc(TensorDesc {
            ty: n.ty,
            ne,
            nb,
            op: n.op,
            op_params,
            src: n.src,
            view_src,
            view_offs,
            name: String::new(),
            custom: n.custom,
        });
        if let Some(arena) = arena {
            *tensor.binding_slot() = Some(Binding {
                buffer: arena,
                offset: offset + TENSOR_SIZE,
            });
        }
        s.tensors.push(tensor.clone());
        Ok(tensor)
    }

    /// A new tensor of `ty` with the given dimensions (1 to 5 of them; `ggml_new_tensor`).
    pub fn new_tensor(&self, ty: Type, ne: &[i64]) -> Result<Tensor> {
        self.new_tensor_impl(NewTensor::op(ty, ne, Op::None, Vec::new()))
    }

    /// A new vector (`ggml_new_tensor_1d`).
    pub fn new_tensor_1d(&self, ty: Type, ne0: i64) -> Result<Tensor> {
        self.new_tensor(ty, &[ne0])
    }

    /// A new matrix of `ne1` rows of `ne0` (`ggml_new_tensor_2d`).
    pub fn new_tensor_2d(&self, ty: Type, ne0: i64, ne1: i64) -> Result<Tensor> {
        self.new_tensor(ty, &[ne0, ne1])
    }

    /// A new 3-D tensor (`ggml_new_tensor_3d`).
    pub fn new_tensor_3d(&self, ty: Type, ne0: i64, ne1: i64, ne2: i64) -> Result<Tensor> {
        self.new_tensor(ty, &[ne0, ne1, ne2])
    }

    /// A new 4-D tensor (`ggml_new_tensor_4d`).
    pub fn new_tensor_4d(
        &self,
        ty: Type,
        ne0: i64,
        ne1: i64,
        ne2: i64,
        ne3: i64,
    ) -> Result<Tensor> {
        self.new_tensor(ty, &[ne0, ne1, ne2, ne3])
    }

    /// A new tensor with `t`'s type and shape (`ggml_dup_tensor`); data is not copied.
    pub fn dup_tensor(&self, t: &Tensor) -> Result<Tensor> {
        self.new_tensor(t.ty(), &t.ne())
    }

    /// A view of all of `t` with its type, shape and strides (`ggml_view_tensor`); op NONE.
    pub fn view_tensor(&self, t: &Tensor) -> Result<Tensor> {
        let v = self.new_tensor_impl(
            NewTensor::op(t.ty(), &t.ne(), Op::None, Vec::new())
                .view_of(t, 0)
                .strides(t.nb()),
        )?;
        v.set_name(&format!("{} (view)", t.name()));
        Ok(v)
    }

    /// A new graph of GGML's default size 2048 (`ggml_new_graph`).
    pub fn new_graph(&self) -> Result<Graph> {
        self.new_graph_custom(crate::graph::DEFAULT_GRAPH_SIZE, false)
    }

    /// A new graph of at most `size` nodes and `size` leafs, with gradient slots if `grads`
    /// (`ggml_new_graph_custom`).
    pub fn new_graph_custom(&self, size: usize, grads: bool) -> Result<Graph> {
        Graph::new_in(self, size, grads)
    }

    /// A new graph holding `t` and everything it depends on (ggmlR's
    /// `ggml_build_forward_expand(ctx, t)`).
    pub fn build_forward_expand(&self, t: &Tensor) -> Result<Graph> {
        let g = self.new_graph()?;
        g.build_forward_expand(t)?;
        Ok(g)
    }
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = lock(&self.0.state);
        f.debug_struct("Context")
            .field("mem_size", &self.0.mem_size)
            .field("used", &s.used)
            .field("no_alloc", &s.no_alloc)
            .field("n_tensors", &s.tensors.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_arena_spends_no_budget() {
        // No system grants 1 EiB: the arena allocation fails, and the budget must be untouched.
        let ctx = Context::init(1 << 60, false).unwrap();
        let e = ctx.new_tensor_1d(Type::F32, 4).unwrap_err();
        assert!(matches!(e, Error::AllocFailed(_)), "{e}");
        assert_eq!(ctx.used_mem(), 0);
        assert!(ctx.tensors().is_empty());
    }
}
