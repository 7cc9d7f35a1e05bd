//! Tensors: a type, up to five dimensions with byte strides, the op that produces them, and the
//! memory they live in once allocated.
//!
//! A [`Tensor`] is a cheap-to-clone handle (`Arc`), usable across contexts as in GGML. Its shape
//! and op are fixed at creation; its name, flags and memory binding may change later (interior
//! mutability), so every method takes `&self`.

use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::backend::Buffer;
use crate::error::{Error, Result};
use crate::ops::Op;
use crate::types::{bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16, Type};

/// The largest number of dimensions a tensor has (ggmlR's 5; GGML has 4).
pub const MAX_DIMS: usize = 5;
/// The largest number of operands of one op (`GGML_MAX_SRC`).
pub const MAX_SRC: usize = 10;
/// Bytes of op parameters per tensor (`GGML_MAX_OP_PARAMS`).
pub const MAX_OP_PARAMS: usize = 64;
/// The longest tensor name in bytes, not counting GGML's terminating NUL (`GGML_MAX_NAME - 1`).
pub const MAX_NAME: usize = 63;

/// Tensor flags (`enum ggml_tensor_flag`), combinable as a bit set.
///
/// ```
/// use ggml::{tensor::flags, Context, Type};
/// let ctx = Context::for_metadata(1, 0).unwrap();
/// let x = ctx.new_tensor_1d(Type::F32, 4).unwrap();
/// x.set_input();
/// assert_eq!(x.flags() & flags::INPUT, flags::INPUT);
/// assert_eq!(x.flags() & flags::OUTPUT, 0);
/// ```
pub mod flags {
    /// A graph input: allocated up front by the graph allocator, never overlapped.
    pub const INPUT: u32 = 1;
    /// A graph output: never freed or overwritten by the graph allocator.
    pub const OUTPUT: u32 = 2;
    /// A trainable parameter.
    pub const PARAM: u32 = 4;
    /// The loss of a training graph (scalar F32).
    pub const LOSS: u32 = 8;
    /// The node must be computed; executors skip nodes without it.
    pub const COMPUTE: u32 = 16;
}

static NEXT_TENSOR_ID: AtomicU64 = AtomicU64::new(1);

/// Where a tensor's bytes live: a buffer and a byte offset from its start.
#[derive(Clone)]
pub(crate) struct Binding {
    pub(crate) buffer: Buffer,
    pub(crate) offset: usize,
}

/// What a tensor is made of; built by [`crate::Context`] and the op builders.
pub(crate) struct TensorDesc {
    pub(crate) ty: Type,
    pub(crate) ne: [i64; MAX_DIMS],
    pub(crate) nb: [usize; MAX_DIMS],
    pub(crate) op: Op,
    pub(crate) op_params: [i32; MAX_OP_PARAMS / 4],
    /// GGML's operand slots in order; a slot may be empty before a used one (e.g. the mask
    /// of `soft_max_ext` left out while its sinks are given). Trailing empty slots are dropped.
    pub(crate) src: Vec<Option<Tensor>>,
    pub(crate) view_src: Option<Tensor>,
    pub(crate) view_offs: usize,
    pub(crate) name: String,
    /// The closure of a custom op (MAP_CUSTOM1/2/3, CUSTOM); `None` for every other node.
    pub(crate) custom: Option<crate::ops::custom::CustomFn>,
}

pub(crate) struct TensorInner {
    id: u64,
    desc: TensorDesc,
    /// The op parameters; GGML lets a few be changed after the node is built
    /// (`ggml_mul_mat_set_prec`, `ggml_set_op_params_i32`).
    op_params: [AtomicI32; MAX_OP_PARAMS / 4],
    name: Mutex<String>,
    flags: AtomicU32,
    binding: Mutex<Option<Binding>>,
}

/// A tensor handle. Clones refer to the same tensor.
#[derive(Clone)]
pub struct Tensor(pub(crate) Arc<TensorInner>);

impl PartialEq for Tensor {
    fn eq(&self, other: &Tensor) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}
impl Eq for Tensor {}
impl std::hash::Hash for Tensor {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.0.id.hash(h)
    }
}

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tensor")
            .field("name", &self.name())
            .field("type", &self.ty())
            .field("op", &self.op())
            .field("ne", &&self.ne()[..self.n_dims().max(1)])
            .finish()
    }
}

/// Contiguous byte strides for a shape (`nb[0] = type_size`, `nb[1] = row size`, …).
pub(crate) fn contiguous_strides(ty: Type, ne: &[i64; MAX_DIMS]) -> [usize; MAX_DIMS] {
    let mut nb = [0usize; MAX_DIMS];
    nb[0] = ty.type_size();
    nb[1] = nb[0] * (ne[0] as usize / ty.blck_size());
    for i in 2..MAX_DIMS {
        nb[i] = nb[i - 1] * ne[i - 1] as usize;
    }
    nb
}

/// Bytes spanned by a tensor of this type, shape and strides (`ggml_nbytes`).
/// `None` when the count overflows (only possible for shapes and strides not yet validated:
/// every tensor that exists has a representable span).
pub(crate) fn span_bytes(ty: Type, ne: &[i64; MAX_DIMS], nb: &[usize; MAX_DIMS]) -> Option<usize> {
    if ne.iter().any(|&n| n <= 0) {
        return Some(0);
    }
    let blck = ty.blck_size();
    let (first, start) = if blck == 1 {
        (0, ty.type_size())
    } else {
        (1, (ne[0] as usize).checked_mul(nb[0])? / blck)
    };
    (first..MAX_DIMS).try_fold(start, |acc, i| {
        (ne[i] as usize - 1)
            .checked_mul(nb[i])
            .and_then(|x| acc.checked_add(x))
    })
}

impl Tensor {
    pub(crate) fn from_desc(desc: TensorDesc) -> Tensor {
        let name = desc.name.clone();
        let op_params = desc.op_params.map(AtomicI32::new);
        Tensor(Arc::new(TensorInner {
            id: NEXT_TENSOR_ID.fetch_add(1, Ordering::Relaxed),
            op_params,
            desc,
            name: Mutex::new(name),
            flags: AtomicU32::new(0),
            binding: Mutex::new(None),
        }))
    }

    /// A new tensor with this one's type, shape and strides and the rest given; no memory.
    fn shaped_like(
        &self,
        op: Op,
        op_params: [i32; MAX_OP_PARAMS / 4],
        src: Vec<Option<Tensor>>,
        view: Option<(Tensor, usize)>,
        name: String,
    ) -> Tensor {
        let d = &self.0.desc;
        let (view_src, view_offs) = match view {
            Some((v, offs)) => (Some(v), offs),
            None => (None, 0),
        };
        // A copy of a custom-op node keeps its closure.
        let custom = if op == d.op { d.custom.clone() } else { None };
        Tensor::from_desc(TensorDesc {
            ty: d.ty,
            ne: d.ne,
            nb: d.nb,
            op,
            op_params,
            src,
            view_src,
            view_offs,
            name,
            custom,
        })
    }

    /// A new tensor like this one (type, shape, strides, op, op parameters, name, flags) with
    /// other operands and view source (the scheduler's private copy of a graph node). It has
    /// no memory.
    pub(crate) fn twin(&self, src: Vec<Option<Tensor>>, view_src: Option<Tensor>) -> Tensor {
        let view = view_src.map(|v| (v, self.view_offs()));
        let t = self.shaped_like(self.op(), self.op_params(), src, view, self.name());
        t.add_flags(self.flags());
        t
    }

    /// A twin ([`Tensor::twin`]) with another shape and strides and, for a view, another byte
    /// offset into its source: one member's slice of a meta device's tensor. `Err` when the
    /// shape is negative or its span overflows. It has no memory.
    pub(crate) fn twin_shaped(
        &self,
        ne: [i64; MAX_DIMS],
        nb: [usize; MAX_DIMS],
        src: Vec<Option<Tensor>>,
        view: Option<(Tensor, usize)>,
    ) -> Result<Tensor> {
        if ne.iter().any(|&n| n < 0) || span_bytes(self.ty(), &ne, &nb).is_none() {
            return Err(Error::invalid(format!(
                "tensor {:?}: slice shape {ne:?} with strides {nb:?} is not addressable",
                self.name()
            )));
        }
        let d = &self.0.desc;
        let (view_src, view_offs) = match view {
            Some((v, offs)) => (Some(v), offs),
            None => (None, 0),
        };
        let t = Tensor::from_desc(TensorDesc {
            ty: d.ty,
            ne,
            nb,
            op: d.op,
            op_params: self.op_params(),
            src,
            view_src,
            view_offs,
            name: self.name(),
            custom: d.custom.clone(),
        });
        t.add_flags(self.flags());
        Ok(t)
    }

    /// A weak handle to this tensor (a table keyed by tensor that must not keep it alive).
    pub(crate) fn downgrade(&self) -> std::sync::Weak<TensorInner> {
        Arc::downgrade(&self.0)
    }

    /// A new tensor with this one's type, shape and strides, op NONE and no operands, named
    /// `name` (`ggml_dup_tensor_layout`). It has no memory.
    pub(crate) fn dup_layout(&self, name: &str) -> Tensor {
        self.shaped_like(
            Op::None,
            [0; MAX_OP_PARAMS / 4],
            Vec::new(),
            None,
            name.to_string(),
        )
    }

    /// A view of all of this tensor with op NONE whose operand is the tensor itself
    /// (`ggml_view_tensor` with `src[0]` set): in a graph it keeps the tensor's memory alive
    /// until that point. It has no memory of its own.
    pub(crate) fn keep_alive_view(&self) -> Tensor {
        let root = match self.view_src() {
            Some(r) => (r.clone(), self.view_offs()),
            None => (self.clone(), 0),
        };
        let name = format!("{} (view)", self.name());
        self.shaped_like(
            Op::None,
            [0; MAX_OP_PARAMS / 4],
            vec![Some(self.clone())],
            Some(root),
            name,
        )
    }

    /// A process-unique id for this tensor (stable for its lifetime).
    pub fn id(&self) -> u64 {
        self.0.id
    }

    /// The element type.
    pub fn ty(&self) -> Type {
        self.0.desc.ty
    }

    /// Elements per dimension; unused dimensions are 1.
    pub fn ne(&self) -> [i64; MAX_DIMS] {
        self.0.desc.ne
    }

    /// Byte stride per dimension.
    pub fn nb(&self) -> [usize; MAX_DIMS] {
        self.0.desc.nb
    }

    /// The op that computes this tensor ([`Op::None`] for leaves).
    pub fn op(&self) -> Op {
        self.0.desc.op
    }

    /// The op's parameters as GGML stores them (`op_params`, 16 × i32; floats as their bits).
    /// [`crate::ops::read_params`] reads them as the op's typed parameter struct.
    pub fn op_params(&self) -> [i32; MAX_OP_PARAMS / 4] {
        std::array::from_fn(|i| self.0.op_params[i].load(Ordering::Acquire))
    }

    /// Parameter slot `i` as an i32 (`ggml_get_op_params_i32`); `Err` for `i >= 16`.
    pub fn get_op_params_i32(&self, i: usize) -> Result<i32> {
        Ok(self.op_param_slot(i)?.load(Ordering::Acquire))
    }

    /// Parameter slot `i` as an f32 (`ggml_get_op_params_f32`); `Err` for `i >= 16`.
    pub fn get_op_params_f32(&self, i: usize) -> Result<f32> {
        Ok(f32::from_bits(self.get_op_params_i32(i)? as u32))
    }

    /// Sets parameter slot `i` (`ggml_set_op_params_i32`). The value is checked against the
    /// op's shape rule: a value that would make the node invalid is refused and nothing changes.
    /// Set parameters before the graph is computed: a computation already queued may read the
    /// old or the new value.
    pub fn set_op_params_i32(&self, i: usize, v: i32) -> Result<()> {
        let slot = self.op_param_slot(i)?;
        let mut params = self.op_params();
        params[i] = v;
        let srcs: Vec<Option<crate::ops::Meta>> = (0..self.n_src_slots())
            .map(|s| self.src(s).map(crate::ops::Meta::of))
            .collect();
        let node = crate::ops::NodeMeta {
            dst: crate::ops::Meta::of(self),
            view_offs: self.view_src().map(|_| self.view_offs()),
            src: &srcs,
            op_params: &params,
        };
        if self.op() != Op::None {
            self.op().validate(&node)?;
        }
        slot.store(v, Ordering::Release);
        Ok(())
    }

    /// Sets parameter slot `i` (`ggml_set_op_params_f32`), checked as
    /// [`Tensor::set_op_params_i32`].
    pub fn set_op_params_f32(&self, i: usize, v: f32) -> Result<()> {
        self.set_op_params_i32(i, v.to_bits() as i32)
    }

    /// Sets slot `i` of a node that must be computed by `op` (the `ggml_*_set_prec` family).
    pub(crate) fn set_op_param_i32_for(&self, op: Op, i: usize, v: i32) -> Result<()> {
        if self.op() != op {
            return Err(Error::invalid(format!(
                "{}_set_prec: tensor {:?} is computed by {}, not {}",
                op.name().to_lowercase(),
                self.name(),
                self.op().name(),
                op.name()
            )));
        }
        self.set_op_params_i32(i, v)
    }

    fn op_param_slot(&self, i: usize) -> Result<&AtomicI32> {
        self.0.op_params.get(i).ok_or_else(|| {
            Error::invalid(format!(
                "op_params: slot {i}; a tensor has {} slots",
                MAX_OP_PARAMS / 4
            ))
        })
    }

    /// The closure of a custom op node.
    pub(crate) fn custom_fn(&self) -> Option<&crate::ops::custom::CustomFn> {
        self.0.desc.custom.as_ref()
    }

    /// The operand in slot `i` of the op (GGML's `src[i]`), if that slot is used.
    pub fn src(&self, i: usize) -> Option<&Tensor> {
        self.0.desc.src.get(i).and_then(Option::as_ref)
    }

    /// The operands present, in slot order (empty slots skipped).
    pub fn srcs(&self) -> impl Iterator<Item = &Tensor> + '_ {
        self.0.desc.src.iter().flatten()
    }

    /// How many operand slots the op uses: one past the last used slot.
    pub fn n_src_slots(&self) -> usize {
        self.0.desc.src.len()
    }

    /// The root tensor this one is a view of (never itself a view), if any.
    pub fn view_src(&self) -> Option<&Tensor> {
        self.0.desc.view_src.as_ref()
    }

    /// Byte offset of this view into [`Tensor::view_src`].
    pub fn view_offs(&self) -> usize {
        self.0.desc.view_offs
    }

    /// The tensor's name (empty if none was given).
    pub fn name(&self) -> String {
        lock(&self.0.name).clone()
    }

    /// Sets the name, truncated to [`MAX_NAME`] bytes on a character boundary as GGML does.
    /// Returns the tensor for chaining.
    pub fn set_name(&self, name: &str) -> &Tensor {
        let mut end = name.len().min(MAX_NAME);
        while !name.is_char_boundary(end) {
            end -= 1;
        }
        *lock(&self.0.name) = name[..end].to_string();
        self
    }

    /// The flag bits (see [`flags`]).
    pub fn flags(&self) -> u32 {
        self.0.flags.load(Ordering::Acquire)
    }

    pub(crate) fn add_flags(&self, bits: u32) {
        self.0.flags.fetch_or(bits, Ordering::AcqRel);
    }

    /// Marks the tensor as a graph input (`ggml_set_input`).
    pub fn set_input(&self) {
        self.add_flags(flags::INPUT);
    }

    /// Marks the tensor, and the tensor it views, as a graph output (`ggml_set_output`).
    pub fn set_output(&self) {
        self.add_flags(flags::OUTPUT);
        if let Some(v) = self.view_src() {
            v.add_flags(flags::OUTPUT);
        }
    }

    /// Marks a leaf as a trainable parameter (`ggml_set_param`); `Err` if it is computed by an op.
    pub fn set_param(&self) -> Result<()> {
        if self.op() != Op::None {
            return Err(Error::invalid(format!(
                "set_param: tensor {:?} is computed by {:?}; only leaves can be parameters",
                self.name(),
                self.op()
            )));
        }
        self.add_flags(flags::PARAM);
        Ok(())
    }

    /// Marks a scalar F32 tensor as the loss (`ggml_set_loss`).
    pub fn set_loss(&self) -> Result<()> {
        if !self.is_scalar() || self.ty() != Type::F32 {
            return Err(Error::invalid(format!(
                "set_loss: tensor {:?} is {} {:?}; the loss must be a scalar f32",
                self.name(),
                self.ty(),
                self.ne()
            )));
        }
        self.add_flags(flags::LOSS);
        Ok(())
    }

    /// Number of elements (`ggml_nelements`).
    pub fn nelements(&self) -> i64 {
        self.ne().iter().product()
    }

    /// Number of rows: the product of all dimensions but the first (`ggml_nrows`).
    pub fn nrows(&self) -> i64 {
        self.ne()[1..].iter().product()
    }

    /// Bytes spanned by the tensor's elements, honouring strides (`ggml_nbytes`).
    pub fn nbytes(&self) -> usize {
        // Checked when the tensor was created, so this never saturates.
        span_bytes(self.ty(), &self.0.desc.ne, &self.0.desc.nb).unwrap_or(usize::MAX)
    }

    /// Bytes of one row of `ne[0]` elements (`ggml_row_size(type, ne0)`).
    pub fn row_size(&self) -> usize {
        self.ty().type_size() * self.ne()[0] as usize / self.ty().blck_size()
    }

    /// Index of the highest dimension larger than one, plus one; at least 1 (`ggml_n_dims`).
    pub fn n_dims(&self) -> usize {
        let ne = self.ne();
        (1..MAX_DIMS)
            .rev()
            .find(|&i| ne[i] > 1)
            .map_or(1, |i| i + 1)
    }

    /// Whether any dimension is zero.
    pub fn is_empty(&self) -> bool {
        self.ne().contains(&0)
    }

    /// Whether the tensor has exactly one element.
    pub fn is_scalar(&self) -> bool {
        self.ne().iter().all(|&n| n == 1)
    }

    /// Whether only dimension 0 may exceed one.
    pub fn is_vector(&self) -> bool {
        self.ne()[1..].iter().all(|&n| n == 1)
    }

    /// Whether only dimensions 0 and 1 may exceed one.
    pub fn is_matrix(&self) -> bool {
        self.ne()[2..].iter().all(|&n| n == 1)
    }

    /// Whether only dimensions 0..3 may exceed one.
    pub fn is_3d(&self) -> bool {
        self.ne()[3..].iter().all(|&n| n == 1)
    }

    /// Whether dimensions 0 and 1 are swapped in memory (`nb[0] > nb[1]`).
    pub fn is_transposed(&self) -> bool {
        let nb = self.nb();
        nb[0] > nb[1]
    }

    /// Whether any stride is larger than the next one (`ggml_is_permuted`).
    pub fn is_permuted(&self) -> bool {
        let nb = self.nb();
        nb.windows(2).any(|w| w[0] > w[1])
    }

    /// Packed in order with no gaps (`ggml_is_contiguous`).
    pub fn is_contiguous(&self) -> bool {
        self.is_contiguous_n(0)
    }

    /// Dimension 0 packed, rows may be padded, higher dims packed relative to `nb[1]`.
    pub fn is_contiguous_1(&self) -> bool {
        self.is_contiguous_n(1)
    }

    /// Dimension 0 packed, `nb[1]` and `nb[2]` arbitrary, the rest packed.
    pub fn is_contiguous_2(&self) -> bool {
        self.is_contiguous_n(2)
    }

    /// GGML's `ggml_is_contiguous_n`: dimensions above `n` are packed relative to the one below;
    /// dimension 0 is always packed; dimensions of size one never break contiguity.
    fn is_contiguous_n(&self, n: usize) -> bool {
        let (ne, nb, ty) = (self.ne(), self.nb(), self.ty());
        let mut next = ty.type_size();
        if ne[0] != ty.blck_size() as i64 && nb[0] != next {
            return false;
        }
        next *= ne[0] as usize / ty.blck_size();
        for i in 1..MAX_DIMS {
            if ne[i] != 1 {
                if i > n {
                    if nb[i] != next {
                        return false;
                    }
                    next *= ne[i] as usize;
                } else {
                    // this dimension may have any stride; what follows is relative to it
                    next = ne[i] as usize * nb[i];
                }
            }
        }
        true
    }

    /// Whether the elements of each row are packed: `nb[0]` is the type size, or a row is a
    /// single block (`ggml_is_contiguous_rows`); the higher strides are arbitrary.
    pub fn is_contiguous_rows(&self) -> bool {
        self.ne()[0] == self.ty().blck_size() as i64 || self.nb()[0] == self.ty().type_size()
    }

    /// Whether the bytes spanned equal the bytes of the elements (a permutation is allowed).
    pub fn is_contiguously_allocated(&self) -> bool {
        self.nbytes() == self.nelements() as usize * self.ty().type_size() / self.ty().blck_size()
    }

    /// Same `ne` in every dimension.
    pub fn are_same_shape(&self, other: &Tensor) -> bool {
        self.ne() == other.ne()
    }

    /// Same `nb` in every dimension.
    pub fn are_same_stride(&self, other: &Tensor) -> bool {
        self.nb() == other.nb()
    }

    /// Same type, shape and strides (GGML's internal `ggml_are_same_layout`).
    pub fn are_same_layout(&self, other: &Tensor) -> bool {
        self.ty() == other.ty() && self.are_same_shape(other) && self.are_same_stride(other)
    }

    /// Whether `other` is a whole tiling of `self` (`ggml_can_repeat(self, other)`).
    pub fn can_repeat(&self, other: &Tensor) -> bool {
        if self.is_empty() {
            return other.is_empty();
        }
        let (a, b) = (self.ne(), other.ne());
        (0..MAX_DIMS).all(|i| b[i] % a[i] == 0)
    }

    // ---- memory ---------------------------------------------------------------------------

    /// The buffer and offset holding this tensor's bytes, following views to their source.
    pub(crate) fn binding(&self) -> Option<Binding> {
        if let Some(b) = lock(&self.0.binding).clone() {
            return Some(b);
        }
        let src = self.view_src()?;
        let b = lock(&src.0.binding).clone()?;
        Some(Binding {
            buffer: b.buffer,
            offset: b.offset + self.view_offs(),
        })
    }

    pub(crate) fn binding_slot(&self) -> MutexGuard<'_, Option<Binding>> {
        lock(&self.0.binding)
    }

    /// Whether the tensor's bytes exist somewhere (its own, or its view source's).
    pub fn is_allocated(&self) -> bool {
        self.binding().is_some()
    }

    /// The buffer holding the tensor's bytes, if allocated.
    pub fn buffer(&self) -> Option<Buffer> {
        self.binding().map(|b| b.buffer)
    }

    /// Byte offset of the tensor's first byte from the start of [`Tensor::buffer`] (GGML's
    /// `tensor->data - ggml_backend_buffer_get_base(tensor->buffer)`), if allocated. A backend
    /// implemented outside this crate finds a node's memory with it: the buffer's base (or its
    /// own device address for that buffer) plus this offset.
    pub fn data_offset(&self) -> Option<usize> {
        self.binding().map(|b| b.offset)
    }

    /// The allocation, or an error naming the tensor.
    pub(crate) fn require_binding(&self, what: &str) -> Result<Binding> {
        self.binding().ok_or_else(|| {
            Error::invalid(format!(
                "{what}: tensor {:?} has no memory (allocate its context or buffer first)",
                self.name()
            ))
        })
    }

    /// Copies `data` into the tensor's bytes at `offset`, waiting for queued work on its buffer
    /// (`ggml_backend_tensor_set`).
    pub fn set_bytes(&self, data: &[u8], offset: usize) -> Result<()> {
        self.check_range("tensor_set", offset, data.len())?;
        if data.is_empty() {
            return Ok(());
        }
        let b = self.require_binding("tensor_set")?;
        b.buffer.host_write(self, b.offset, offset, data)
    }

    /// Copies bytes of the tensor from `offset` into `out` (`ggml_backend_tensor_get`).
    pub fn get_bytes(&self, out: &mut [u8], offset: usize) -> Result<()> {
        self.check_range("tensor_get", offset, out.len())?;
        if out.is_empty() {
            return Ok(());
        }
        let b = self.require_binding("tensor_get")?;
        b.buffer.host_read(self, b.offset, offset, out)
    }

    /// All the tensor's bytes (its `nbytes` span).
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut v = vec![0u8; self.nbytes()];
        self.get_bytes(&mut v, 0)?;
        Ok(v)
    }

    pub(crate) fn check_range(&self, what: &str, offset: usize, size: usize) -> Result<()> {
        let n = self.nbytes();
        if offset.checked_add(size).is_none_or(|end| end > n) {
            return Err(Error::invalid(format!(
                "{what}: offset {offset} + size {size} is past the end of tensor {:?} ({n} bytes)",
                self.name()
            )));
        }
        Ok(())
    }

    /// Writes `values` into a contiguous F32, F16, BF16 or I32 tensor, converting each value;
    /// the length must equal the element count.
    pub fn set_f32(&self, values: &[f32]) -> Result<()> {
        let bytes = self.encode_values("set_f32", values.len(), |i| values[i] as f64)?;
        self.set_bytes(&bytes, 0)
    }

    /// Reads a contiguous F32, F16, BF16 or I32 tensor as f32 values.
    pub fn get_f32(&self) -> Result<Vec<f32>> {
        Ok(self
            .decode_values("get_f32")?
            .into_iter()
            .map(|v| v as f32)
            .collect())
    }

    /// Writes `values` into a contiguous I32, I16, I8, F32, F16 or BF16 tensor.
    pub fn set_i32(&self, values: &[i32]) -> Result<()> {
        let bytes = self.encode_values("set_i32", values.len(), |i| values[i] as f64)?;
        self.set_bytes(&bytes, 0)
    }

    /// Reads a contiguous integer or float tensor as i32 values (floats truncated).
    pub fn get_i32(&self) -> Result<Vec<i32>> {
        Ok(self
            .decode_values("get_i32")?
            .into_iter()
            .map(|v| v as i32)
            .collect())
    }

    /// Checks that the tensor is contiguous, of a type with a per-element conversion, and of `n`
    /// elements, before any byte is read or converted.
    fn check_plain(&self, what: &str, n: usize) -> Result<()> {
        use Type::*;
        if !matches!(self.ty(), F32 | F64 | F16 | BF16 | I8 | I16 | I32 | I64) {
            return Err(unconvertible(what, self));
        }
        if !self.is_contiguous() {
            return Err(Error::invalid(format!(
                "{what}: tensor {:?} is not contiguous; make it so with cont() first",
                self.name()
            )));
        }
        if n != self.nelements() as usize {
            return Err(Error::invalid(format!(
                "{what}: {n} values given for tensor {:?} of {} elements",
                self.name(),
                self.nelements()
            )));
        }
        Ok(())
    }

    fn encode_values(&self, what: &str, n: usize, value: impl Fn(usize) -> f64) -> Result<Vec<u8>> {
        self.check_plain(what, n)?;
        let ty = self.ty();
        let size = ty.type_size();
        let mut out = vec![0u8; n * size];
        for (i, chunk) in out.chunks_exact_mut(size).enumerate() {
            let v = value(i);
            match ty {
                Type::F32 => chunk.copy_from_slice(&(v as f32).to_le_bytes()),
                Type::F64 => chunk.copy_from_slice(&v.to_le_bytes()),
                Type::F16 => chunk.copy_from_slice(&f32_to_f16(v as f32).to_le_bytes()),
                Type::BF16 => chunk.copy_from_slice(&f32_to_bf16(v as f32).to_le_bytes()),
                Type::I8 => chunk.copy_from_slice(&(v as i8).to_le_bytes()),
                Type::I16 => chunk.copy_from_slice(&(v as i16).to_le_bytes()),
                Type::I32 => chunk.copy_from_slice(&(v as i32).to_le_bytes()),
                Type::I64 => chunk.copy_from_slice(&(v as i64).to_le_bytes()),
                _ => return Err(unconvertible(what, self)),
            }
        }
        Ok(out)
    }

    fn decode_values(&self, what: &str) -> Result<Vec<f64>> {
        let n = self.nelements() as usize;
        self.check_plain(what, n)?;
        let bytes = self.to_bytes()?;
        let size = self.ty().type_size();
        bytes
            .chunks_exact(size)
            .map(|c| self.decode_one(what, c))
            .collect()
    }

    /// One element of the tensor's type, from its little-endian bytes `c`.
    fn decode_one(&self, what: &str, c: &[u8]) -> Result<f64> {
        Ok(match self.ty() {
            Type::F32 => f32::from_le_bytes(c.try_into().unwrap()) as f64,
            Type::F64 => f64::from_le_bytes(c.try_into().unwrap()),
            Type::F16 => f16_to_f32(crate::f16::from_le_bytes([c[0], c[1]])) as f64,
            Type::BF16 => bf16_to_f32(crate::bf16::from_le_bytes([c[0], c[1]])) as f64,
            Type::I8 => c[0] as i8 as f64,
            Type::I16 => i16::from_le_bytes([c[0], c[1]]) as f64,
            Type::I32 => i32::from_le_bytes(c.try_into().unwrap()) as f64,
            Type::I64 => i64::from_le_bytes(c.try_into().unwrap()) as f64,
            _ => return Err(unconvertible(what, self)),
        })
    }

    /// Reads a contiguous F32, F16, BF16 or integer tensor as f32 values into `out`, whose
    /// length must equal the element count. Unlike [`Tensor::get_f32`] it allocates nothing:
    /// F32 bytes are copied straight into `out`, other types are converted through a small
    /// buffer on the stack, so a caller can reuse one `out` (logits, say) from run to run.
    pub fn get_f32_into(&self, out: &mut [f32]) -> Result<()> {
        const WHAT: &str = "get_f32_into";
        self.check_plain(WHAT, out.len())?;
        if self.ty() == Type::F32 {
            return self.get_bytes(bytemuck::cast_slice_mut(out), 0);
        }
        let size = self.ty().type_size();
        let mut chunk = [0u8; 4096];
        let per_chunk = chunk.len() / size;
        for (k, dst) in out.chunks_mut(per_chunk).enumerate() {
            let bytes = &mut chunk[..dst.len() * size];
            self.get_bytes(bytes, k * per_chunk * size)?;
            for (v, c) in dst.iter_mut().zip(bytes.chunks_exact(size)) {
                *v = self.decode_one(WHAT, c)? as f32;
            }
        }
        Ok(())
    }
}

fn unconvertible(what: &str, t: &Tensor) -> Error {
    Error::unsupported(format!(
        "{what}: tensor {:?} has type {}, which has no per-element conversion (dequantize it first)",
        t.name(),
        t.ty()
    ))
}

/// Locks a mutex, recovering the data if a panicking thread poisoned it (the data it guards is
/// always left consistent).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
