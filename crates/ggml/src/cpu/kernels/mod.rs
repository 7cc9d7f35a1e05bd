//! CPU kernels, one file per op family. [`plan`] picks a node's kernel and its scratch size
//! once, at planning time, in one exhaustive `match` over [`Op`] (an op added to the op table
//! without an arm here does not compile), and fails there (not while computing) for
//! combinations of types no kernel handles. Kernels are then `unsafe fn`s of resolved
//! addresses whose preconditions — every operand and the result lie in reserved memory with
//! the shapes the op's shape rule accepted — the planner and the stream establish.
//!
//! These are plain loops (correct for any strides, multi-threaded by rows); SIMD paths chosen
//! at run time come later, each beside the scalar loop it must agree with.

mod arith;
mod backward;
mod binary;
mod conv;
mod copy;
mod custom;
mod dsv4;
mod fault;
mod flash_attn;
mod glu;
#[cfg(target_arch = "x86_64")]
mod half_avx2;
mod matmul;
#[cfg(target_arch = "x86_64")]
mod matmul_bf16;
#[cfg(target_arch = "x86_64")]
mod matmul_f16;
mod matmul_quant;
mod mul_mat_id;
mod norm;
mod out_prod;
mod pool;
mod reduce;
mod rope;
mod rows;
mod rwkv;
mod scan;
mod set_rows;
mod softmax;
mod sort;
mod ssm;
mod unary;
mod upscale;
pub(crate) mod vec;
mod window;

use std::cell::Cell;
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::repack::RepackBuffer;
use super::threadpool::SpinBarrier;
use crate::backend::{Place, PlacedGraph};
use crate::error::{Error, Result};
use crate::ops::Op;
use crate::tensor::{Tensor, MAX_DIMS, MAX_OP_PARAMS, MAX_SRC};
use crate::types::{bf16, bf16_to_f32, f16, f32_to_bf16, Type};
pub(crate) use fault::{Faults, IndexFault};
pub(crate) use matmul_quant::Matvec;
pub(crate) use norm::rms_norm_mul;

/// A tensor's address and layout, resolved for one run.
#[derive(Clone, Copy)]
pub(crate) struct TensorPtr {
    pub data: *mut u8,
    pub ty: Type,
    pub ne: [i64; MAX_DIMS],
    pub nb: [usize; MAX_DIMS],
}

impl TensorPtr {
    /// No tensor (an empty operand slot).
    pub(crate) const NULL: TensorPtr = TensorPtr {
        data: std::ptr::null_mut(),
        ty: Type::F32,
        ne: [0; MAX_DIMS],
        nb: [0; MAX_DIMS],
    };

    /// `t`'s address from its place in the job (`None`: no such operand).
    fn resolve(t: &Tensor, place: Option<Place<'_>>) -> Result<TensorPtr> {
        let data = place.and_then(|p| p.host_ptr()).ok_or_else(|| {
            Error::unsupported(format!(
                "graph_compute: tensor {:?} is not in host memory",
                t.name()
            ))
        })?;
        // A weight in a repack buffer is seen as the contiguous tensor of its layout's type
        // that the buffer holds there (checked to fit in it when it was placed and here).
        if let Some((buf, at)) = place.and_then(|p| p.downcast::<RepackBuffer>()) {
            let (ty, _) = buf.placed(t, at)?;
            let ne = t.ne();
            let mut nb = [0; MAX_DIMS];
            nb[0] = ty.type_size();
            nb[1] = ty.row_size(ne[0])?;
            for d in 2..MAX_DIMS {
                nb[d] = nb[d - 1] * ne[d - 1] as usize;
            }
            return Ok(TensorPtr {
                data: data.as_ptr(),
                ty,
                ne,
                nb,
            });
        }
        Ok(TensorPtr {
            // The place holds the tensor's `nbytes` (checked when the job was queued).
            data: data.as_ptr(),
            ty: t.ty(),
            ne: t.ne(),
            nb: t.nb(),
        })
    }

    /// Whether two elements (blocks, for quantized types) of this tensor share bytes. Taking
    /// the dimensions by increasing stride, each stride must clear every byte the smaller ones
    /// reach; this is a sufficient test for distinct elements, which every contiguous,
    /// permuted, transposed or padded layout passes.
    fn self_overlapping(&self) -> bool {
        let mut dims: [(usize, usize); MAX_DIMS] = std::array::from_fn(|d| {
            let n = self.ne[d].max(0) as usize;
            let units = if d == 0 { n / self.ty.blck_size() } else { n };
            (self.nb[d], units)
        });
        dims.sort_unstable();
        let mut reach = self.ty.type_size();
        for (stride, n) in dims {
            if n > 1 {
                if stride < reach {
                    return true;
                }
                reach = stride.saturating_mul(n - 1).saturating_add(reach);
            }
        }
        false
    }

    /// Whether the bytes of `self` and `other` intersect.
    pub(super) fn overlaps(&self, other: &TensorPtr) -> bool {
        let span =
            |t: &TensorPtr| crate::tensor::span_bytes(t.ty, &t.ne, &t.nb).unwrap_or(usize::MAX);
        let (a, sa) = (self.data as usize, span(self));
        let (b, sb) = (other.data as usize, span(other));
        sa > 0 && sb > 0 && a < b.saturating_add(sb) && b < a.saturating_add(sa)
    }

    /// Whether `other` is exactly this tensor: same address, type, shape and strides.
    fn same_elements(&self, other: &TensorPtr) -> bool {
        self.data == other.data && self.ty == other.ty && self.ne == other.ne && self.nb == other.nb
    }

    /// Rows: the product of dimensions 1.. .
    pub fn nrows(&self) -> usize {
        self.ne[1..].iter().product::<i64>() as usize
    }

    pub fn nelements(&self) -> usize {
        self.ne.iter().product::<i64>() as usize
    }

    /// Splits a flat row index into indices of dimensions 1..5.
    pub fn unravel_row(&self, mut r: usize) -> [usize; MAX_DIMS - 1] {
        let mut idx = [0usize; MAX_DIMS - 1];
        for (d, slot) in idx.iter_mut().enumerate() {
            let n = self.ne[d + 1] as usize;
            *slot = r % n;
            r /= n;
        }
        idx
    }

    /// Address of the first element of the row with indices `idx` (dimensions 1..5). Only
    /// computes it (with wrapping arithmetic, so any `idx` is sound here); the callers' later
    /// accesses need `idx` within `ne`, which keeps the address inside the tensor's span.
    pub fn row(&self, idx: [usize; MAX_DIMS - 1]) -> *mut u8 {
        let off: usize = (0..MAX_DIMS - 1).map(|d| idx[d] * self.nb[d + 1]).sum();
        self.data.wrapping_add(off)
    }

    /// Address of the row with flat index `r`.
    pub fn row_at(&self, r: usize) -> *mut u8 {
        self.row(self.unravel_row(r))
    }

    /// Reads element `i` of the row at `row` as f32 (float types only).
    ///
    /// # Safety
    /// `row` must be a row of this tensor and `i < ne[0]`.
    #[inline]
    pub unsafe fn get(&self, row: *const u8, i: usize) -> f32 {
        // SAFETY: forwarded from the caller.
        unsafe { load(row.add(i * self.nb[0]), self.ty) }
    }

    /// Writes element `i` of the row at `row` from f32 (float types only).
    ///
    /// # Safety
    /// `row` must be a row of this tensor and `i < ne[0]`.
    #[inline]
    pub unsafe fn set(&self, row: *mut u8, i: usize, v: f32) {
        // SAFETY: forwarded from the caller.
        unsafe { store(row.add(i * self.nb[0]), self.ty, v) }
    }

    /// Reads element `[i0, i1, i2, i3]` (dimension 4 at index 0) as f32 (float types only).
    ///
    /// # Safety
    /// The index must be inside the tensor's shape.
    #[inline]
    pub unsafe fn get4(&self, i: [usize; 4]) -> f32 {
        // SAFETY: forwarded from the caller.
        unsafe { self.get(self.row([i[1], i[2], i[3], 0]), i[0]) }
    }

    /// Writes element `[i0, i1, i2, i3]` (dimension 4 at index 0) from f32 (float types only).
    ///
    /// # Safety
    /// The index must be inside the tensor's shape.
    #[inline]
    pub unsafe fn set4(&self, i: [usize; 4], v: f32) {
        // SAFETY: forwarded from the caller.
        unsafe { self.set(self.row([i[1], i[2], i[3], 0]), i[0], v) }
    }

    /// Whether elements of a row are packed (`nb[0]` is the type size).
    pub fn rows_packed(&self) -> bool {
        self.nb[0] == self.ty.type_size()
    }

    /// Reads the row at `row` into `out` as f32 (a byte copy for packed F32 rows, the F16C
    /// conversion for packed F16 rows).
    ///
    /// # Safety
    /// `row` must be a row of this tensor and `out.len() == ne[0]`.
    pub unsafe fn read_row(&self, row: *const u8, out: &mut [f32]) {
        // SAFETY: a packed F32 (F16) row holds out.len() elements; otherwise forwarded.
        unsafe {
            if self.f32_rows() {
                std::ptr::copy_nonoverlapping(row, out.as_mut_ptr() as *mut u8, out.len() * 4);
            } else if self.f16_rows() {
                vec::f16_to_f32_row(row, out.as_mut_ptr() as *mut u8, out.len());
            } else {
                for (i, v) in out.iter_mut().enumerate() {
                    *v = self.get(row, i);
                }
            }
        }
    }

    /// Writes `src` into the row at `row` (a byte copy for packed F32 rows, the F16C
    /// conversion, rounding to nearest even, for packed F16 rows).
    ///
    /// # Safety
    /// `row` must be a row of this tensor, `src.len() == ne[0]`, and `src` must not overlap
    /// the row.
    pub unsafe fn write_row(&self, row: *mut u8, src: &[f32]) {
        // SAFETY: as for `read_row`; the caller guarantees no overlap.
        unsafe {
            if self.f32_rows() {
                std::ptr::copy_nonoverlapping(src.as_ptr() as *const u8, row, src.len() * 4);
            } else if self.f16_rows() {
                vec::f32_to_f16_row(src.as_ptr() as *const u8, row, src.len());
            } else {
                for (i, &v) in src.iter().enumerate() {
                    self.set(row, i, v);
                }
            }
        }
    }

    /// Whether rows are packed F32, the case the kernels' fast paths handle.
    pub fn f32_rows(&self) -> bool {
        self.ty == Type::F32 && self.rows_packed()
    }

    /// Whether the whole tensor is packed F32 (every stride the product of the dimensions
    /// below it), so element `i` of the flattened tensor is at `data + 4·i`.
    pub fn f32_packed(&self) -> bool {
        let mut stride = 4;
        for d in 0..MAX_DIMS {
            if self.ne[d] > 1 && self.nb[d] != stride {
                return false;
            }
            stride *= self.ne[d].max(0) as usize;
        }
        self.ty == Type::F32
    }

    /// Whether rows are packed F16.
    pub fn f16_rows(&self) -> bool {
        self.ty == Type::F16 && self.rows_packed()
    }

    /// Steps the row indices `idx` (dimensions 1..5, as [`TensorPtr::unravel_row`] gives) to
    /// the next row, dimension 1 fastest: what `unravel_row(r + 1)` gives, without divisions.
    #[inline(always)]
    pub fn next_row(&self, idx: &mut [usize; MAX_DIMS - 1]) {
        for (d, i) in idx.iter_mut().enumerate() {
            *i += 1;
            if *i < self.ne[d + 1] as usize {
                return;
            }
            *i = 0;
        }
    }

    /// Writes zero bits (0 in every type) to element `i` of the row at `row`.
    ///
    /// # Safety
    /// `row` must be a row of this tensor and `i < ne[0]`.
    #[inline]
    pub unsafe fn zero(&self, row: *mut u8, i: usize) {
        // SAFETY: forwarded from the caller.
        unsafe { std::ptr::write_bytes(row.add(i * self.nb[0]), 0, self.ty.type_size()) }
    }

    /// Copies element `j` of the row `srow` of `src` into element `i` of the row `drow` of
    /// this tensor: bit for bit when the types are equal, else converted through f32 (the
    /// pair must satisfy [`copyable`]).
    ///
    /// # Safety
    /// `drow` must be a row of this tensor and `i < ne[0]`; `srow` a row of `src`, `j` below
    /// its `ne[0]`.
    #[inline]
    pub unsafe fn copy_from(
        &self,
        drow: *mut u8,
        i: usize,
        src: &TensorPtr,
        srow: *const u8,
        j: usize,
    ) {
        // SAFETY: forwarded from the caller; a same-type copy moves one element's bytes.
        unsafe {
            if self.ty == src.ty {
                std::ptr::copy(
                    srow.add(j * src.nb[0]),
                    drow.add(i * self.nb[0]),
                    self.ty.type_size(),
                );
            } else {
                self.set(drow, i, src.get(srow, j));
            }
        }
    }
}

impl TensorPtr {
    /// Copies `n` elements from `src` (row `srow`, from element `j0`) into this tensor (row
    /// `drow`, from element `i0`): between packed rows a byte copy for equal types and an
    /// F16C conversion between F16 and F32 (when the runs do not overlap), else element by
    /// element ([`Self::copy_from`]).
    ///
    /// # Safety
    /// Both rows must belong to their tensors and hold the `n` elements from those positions,
    /// and the pair of types must satisfy [`copyable`].
    #[inline]
    pub unsafe fn copy_run(
        &self,
        drow: *mut u8,
        i0: usize,
        src: &TensorPtr,
        srow: *const u8,
        j0: usize,
        n: usize,
    ) {
        let (dsize, ssize) = (self.ty.type_size(), src.ty.type_size());
        if self.rows_packed() && src.rows_packed() {
            // SAFETY: forwarded from the caller: n packed elements from each start.
            unsafe {
                let (to, from) = (drow.add(i0 * dsize), srow.add(j0 * ssize));
                let apart = from as usize >= to as usize + n * dsize
                    || to as usize >= from as usize + n * ssize;
                match (src.ty, self.ty) {
                    (s, d) if s == d && (apart || std::ptr::eq(to, from)) => {
                        return std::ptr::copy(from, to, n * dsize)
                    }
                    (Type::F16, Type::F32) if apart => return vec::f16_to_f32_row(from, to, n),
                    (Type::F32, Type::F16) if apart => return vec::f32_to_f16_row(from, to, n),
                    _ => {}
                }
            }
        }
        for k in 0..n {
            // SAFETY: forwarded from the caller.
            unsafe { self.copy_from(drow, i0 + k, src, srow, j0 + k) }
        }
    }
}

/// Whether rows of `ty` are block-quantized and can be dequantized to f32.
pub(crate) fn dequantizable(ty: Type) -> bool {
    ty.is_quantized() && crate::quants::has_to_float(ty)
}

/// Dequantizes the row of quantized tensor `t` that starts at `row` into `out` (`ne[0]` values).
///
/// # Safety
/// `row` must be the start of a row of `t` (rows of quantized tensors are packed blocks), and
/// `out.len() == t.ne[0]`.
pub(crate) unsafe fn dequantize_into(t: &TensorPtr, row: *const u8, out: &mut [f32]) {
    let bytes = out.len() / t.ty.blck_size() * t.ty.type_size();
    // SAFETY: forwarded from the caller: a row of `bytes` packed blocks.
    let src = unsafe { std::slice::from_raw_parts(row, bytes) };
    // The planner accepted the type (`dequantizable`) and the lengths agree, so this cannot
    // fail; were it to, the output keeps NaNs rather than stale values.
    if crate::quants::dequantize_row(t.ty, src, out).is_err() {
        out.fill(f32::NAN);
    }
}

/// Whether element copies from `src` to `dst` are supported: equal non-quantized types (bit
/// copies), or any pair of F32, F16 and BF16 (conversions).
pub(crate) fn copyable(src: Type, dst: Type) -> bool {
    let f32_i32 = matches!((src, dst), (Type::F32, Type::I32) | (Type::I32, Type::F32));
    (src == dst && !src.is_quantized()) || (is_float(src) && is_float(dst)) || f32_i32
}

/// Reads one F32/F16/BF16/I32 element as f32.
///
/// # Safety
/// `p` must point at a readable element of type `ty`.
#[inline]
pub(crate) unsafe fn load(p: *const u8, ty: Type) -> f32 {
    // SAFETY (all arms): the caller guarantees an element of `ty` at `p`; reads are unaligned.
    unsafe {
        match ty {
            Type::F32 => (p as *const f32).read_unaligned(),
            Type::F16 => (p as *const f16).read_unaligned().to_f32(),
            Type::BF16 => bf16_to_f32((p as *const bf16).read_unaligned()),
            Type::I32 => (p as *const i32).read_unaligned() as f32,
            _ => f32::NAN,
        }
    }
}

/// Reads element `i` of a packed F32 row (any alignment).
///
/// # Safety
/// `row` must point at a packed F32 row of more than `i` elements.
#[inline(always)]
pub(crate) unsafe fn ld(row: *const u8, i: usize) -> f32 {
    // SAFETY: forwarded from the caller.
    unsafe { (row as *const f32).add(i).read_unaligned() }
}

/// Writes element `i` of a packed F32 row (any alignment).
///
/// # Safety
/// `row` must point at a writable packed F32 row of more than `i` elements.
#[inline(always)]
pub(crate) unsafe fn st(row: *mut u8, i: usize, v: f32) {
    // SAFETY: forwarded from the caller.
    unsafe { (row as *mut f32).add(i).write_unaligned(v) }
}

/// Writes one F32/F16/BF16/I32 element from f32.
///
/// # Safety
/// `p` must point at a writable element of type `ty`.
#[inline]
pub(crate) unsafe fn store(p: *mut u8, ty: Type, v: f32) {
    // SAFETY (all arms): the caller guarantees an element of `ty` at `p`; writes are unaligned.
    unsafe {
        match ty {
            Type::F32 => (p as *mut f32).write_unaligned(v),
            Type::F16 => (p as *mut f16).write_unaligned(f16::from_f32(v)),
            Type::BF16 => (p as *mut bf16).write_unaligned(f32_to_bf16(v)),
            Type::I32 => (p as *mut i32).write_unaligned(f32_to_i32(v)),
            _ => {}
        }
    }
}

/// `v` as an i32 as GGML's CPU converts it on x86 (C's conversion, `cvttss2si`): toward zero,
/// and `i32::MIN` for a NaN or a value outside i32's range (where C leaves it undefined and
/// the instruction gives that "indefinite" value), not Rust's saturating `as`.
#[inline]
pub(crate) fn f32_to_i32(v: f32) -> i32 {
    // 2^31 is exactly representable; every f32 below it and at or above −2^31 fits.
    if v.is_nan() || !(-2_147_483_648.0..2_147_483_648.0).contains(&v) {
        i32::MIN
    } else {
        v as i32
    }
}

/// Σ f(x) over `x` in f64 (GGML's `ggml_float` accumulator); see [`sums_f64`].
#[inline(always)]
pub(crate) fn sum_f64(x: &[f32], f: impl Fn(f64) -> f64) -> f64 {
    sums_f64(x, |v| [f(v)])[0]
}

/// The `K` sums Σ f(x)[k] over `x` in f64, each with 16 partial sums (lane `l` takes the
/// elements `≡ l` mod 16, the tail goes to lane 0 onwards) added pairwise at the end: the loop
/// vectorises on every ISA path (two zmm or four ymm chains per sum) instead of waiting on
/// one chain of additions.
#[inline(always)]
pub(crate) fn sums_f64<const K: usize>(x: &[f32], f: impl Fn(f64) -> [f64; K]) -> [f64; K] {
    const L: usize = 16;
    let mut acc = [[0f64; L]; K];
    let mut chunks = x.chunks_exact(L);
    for c in &mut chunks {
        for l in 0..L {
            let v = f(c[l] as f64);
            for k in 0..K {
                acc[k][l] += v[k];
            }
        }
    }
    for (l, &x) in chunks.remainder().iter().enumerate() {
        let v = f(x as f64);
        for k in 0..K {
            acc[k][l] += v[k];
        }
    }
    acc.map(|mut a| {
        let mut w = L;
        while w > 1 {
            w /= 2;
            for l in 0..w {
                a[l] += a[l + w];
            }
        }
        a[0]
    })
}

/// A node's addresses and parameters, resolved for one run.
pub(crate) struct NodePtrs {
    pub dst: TensorPtr,
    pub src: [TensorPtr; MAX_SRC],
    pub op_params: [i32; MAX_OP_PARAMS / 4],
    /// The closure of a custom op node.
    pub custom: Option<crate::ops::custom::CustomFn>,
}

// SAFETY: the pointers refer to buffers the running job has reserved; threads write disjoint
// parts of `dst` and only read the sources.
unsafe impl Send for NodePtrs {}
// SAFETY: as above.
unsafe impl Sync for NodePtrs {}

impl NodePtrs {
    /// Node `i` of `graph`'s addresses, from the places the job holds.
    pub(crate) fn resolve(graph: &PlacedGraph<'_>, i: usize) -> Result<NodePtrs> {
        let t = graph.nodes().get(i).ok_or_else(|| {
            Error::invalid(format!(
                "graph_compute: no node {i} in a graph of {}",
                graph.len()
            ))
        })?;
        let mut src = [TensorPtr::NULL; MAX_SRC];
        for (j, slot) in src.iter_mut().enumerate() {
            if let Some(s) = t.src(j) {
                *slot = TensorPtr::resolve(s, graph.src_place(i, j))?;
            }
        }
        Ok(NodePtrs {
            dst: TensorPtr::resolve(t, graph.place(i))?,
            src,
            op_params: t.op_params(),
            custom: t.custom_fn().cloned(),
        })
    }

    /// Whether threads splitting this node could touch the same bytes while one of them
    /// writes: the result's elements overlap one another (a view with a zero or short stride),
    /// or an operand overlaps the result other than as the very same elements (the in-place
    /// case, where each thread reads and writes only its own rows). Such a node runs on one
    /// thread, which gives what GGML gives with one thread, without a data race.
    pub(crate) fn needs_one_thread(&self) -> bool {
        let d = &self.dst;
        d.self_overlapping()
            || self
                .src
                .iter()
                .any(|s| s.overlaps(d) && !s.same_elements(d))
    }

    /// The op's parameters as its typed struct (GGML's `op_params` layout).
    pub fn params<P: bytemuck::Pod>(&self) -> P {
        crate::ops::read_params(&self.op_params)
    }
}

/// What the threads of one node share besides its tensors (GGML's `wdata` and
/// `current_chunk`): a work area every thread of the node reads and writes, the barrier the
/// threads meet at inside the node ([`Params::sync`]), and chunk counters for each phase of the
/// node, one per thread ([`Params::chunks`]). The engine gives a node these when its
/// [`Planned`] asks for them ([`Planned::shared`]); a kernel that declares `syncs` barriers
/// works in `syncs + 1` phases, each with its own counters, reset to 0 before the graph runs.
pub(crate) struct NodeShared<'a> {
    /// The shared work area, at a multiple of 64 bytes.
    pub data: *mut u8,
    /// Its size in bytes.
    pub size: usize,
    /// The barrier of the run's threads.
    pub barrier: &'a SpinBarrier,
    /// The node's chunk counters: for each phase, [`NodeShared::per_phase`] of them (one per
    /// thread the plan has, at least the node's thread count).
    pub chunks: &'a [AtomicUsize],
    /// Counters per phase in [`NodeShared::chunks`].
    pub per_phase: usize,
}

/// A thread's share of one run: its index, the thread count, its private scratch, what the
/// node's threads share, and where it reports an out-of-range index.
pub(crate) struct Params<'a> {
    pub ith: usize,
    pub nth: usize,
    pub wdata: *mut u8,
    pub wsize: usize,
    pub faults: &'a Faults,
    /// The node's position among the planned nodes (named by a fault).
    pub node: usize,
    /// The node's shared work area, barrier and chunk counters.
    pub shared: &'a NodeShared<'a>,
    /// The barriers this thread has passed in this node (its phase).
    phase: Cell<usize>,
}

impl<'a> Params<'a> {
    /// Thread `ith` of `nth`'s share of node `node`, in phase 0.
    pub(crate) fn new(
        (ith, nth): (usize, usize),
        (wdata, wsize): (*mut u8, usize),
        faults: &'a Faults,
        node: usize,
        shared: &'a NodeShared<'a>,
    ) -> Params<'a> {
        Params {
            ith,
            nth,
            wdata,
            wsize,
            faults,
            node,
            shared,
            phase: Cell::new(0),
        }
    }

    /// The barriers this thread has passed in this node.
    pub(crate) fn phase(&self) -> usize {
        self.phase.get()
    }

    /// Waits until every thread of the node has reached this point (a no-op on one thread);
    /// what any thread wrote to the shared area before is visible to all after. Every thread
    /// of the node must call it the same number of times, at most the `syncs` the kernel's
    /// plan declared; more panics (failing the run) instead of waiting for a barrier the
    /// others never reach. A thread that panics or skips the node is waited for by the engine,
    /// which passes the barriers the thread did not.
    pub fn sync(&self) {
        let phase = self.phase.get();
        let phases = self.shared.chunks.len() / self.shared.per_phase.max(1);
        assert!(
            phase + 1 < phases,
            "a kernel passed more barriers than its plan declared ({})",
            phases.saturating_sub(1)
        );
        if self.nth > 1 {
            self.shared.barrier.wait();
        }
        self.phase.set(phase + 1);
    }

    /// The chunks of `0..n` of the current phase's work this thread computes, claimed one by
    /// one from atomic counters so that a thread that starts late or loses its core takes
    /// fewer instead of holding the others at the next barrier (GGML's
    /// `ggml_threadpool_chunk_add`). Each thread has a home range, its balanced contiguous
    /// share of `0..n`, which it claims from the front; when that is done it claims what is
    /// left of the others' ranges (the next thread's first). So where every thread keeps
    /// pace, each streams through one contiguous part of the tensors, as GGML's static
    /// splits do. Which thread gets which chunk varies from run to run: a chunk's result
    /// must not depend on it. Every thread of the node sees the same `n` in a phase.
    pub fn chunks(&self, n: usize) -> impl Iterator<Item = usize> + '_ {
        let nth = self.nth;
        let phase = &self.shared.chunks[self.phase.get() * self.shared.per_phase..][..nth];
        let mut owner = 0;
        std::iter::from_fn(move || {
            while owner < nth {
                let t = (self.ith + owner) % nth;
                let (start, end) = (t * n / nth, (t + 1) * n / nth);
                let c = start + phase[t].fetch_add(1, Ordering::Relaxed);
                if c < end {
                    return Some(c);
                }
                owner += 1;
            }
            None
        })
    }

    /// The start of the node's shared work area, checked to hold `len` bytes (a panic, which
    /// fails the run, if the plan gave less). Its users must not make overlapping slices of
    /// it, one of them mutable, between two barriers ([`Params::sync`]), nor keep slices past
    /// the kernel call.
    pub fn shared_ptr(&self, len: usize) -> *mut u8 {
        assert!(
            len <= self.shared.size,
            "shared work area of {} bytes, {len} wanted",
            self.shared.size
        );
        self.shared.data
    }

    /// Reports index `value` at position `at` of operand slot `operand` as outside `0..limit`
    /// (the run fails after this node; see [`fault`]).
    #[cold]
    pub fn index_fault(&self, operand: usize, at: [usize; 3], value: i64, limit: i64) {
        self.faults.record(IndexFault {
            node: self.node,
            operand,
            at,
            value,
            limit,
        });
    }

    /// The pieces of `rows` rows of `len` elements this thread computes, as `(row, elements)`,
    /// claimed in chunks ([`Params::chunks`]), so a thread that starts late or loses its core
    /// does fewer instead of holding the others: whole rows, about [`CHUNKS_PER_THREAD`]
    /// chunks per thread, where there are at least [`ROWS_PER_THREAD`] rows per thread;
    /// otherwise each row cut into segments of [`SEGMENT`] elements, so a few long rows (or
    /// one) are shared too. Which thread gets which piece varies from run to run.
    pub fn row_pieces(
        &self,
        rows: usize,
        len: usize,
    ) -> impl Iterator<Item = (usize, Range<usize>)> + '_ {
        let segs = if rows >= ROWS_PER_THREAD * self.nth {
            1
        } else {
            len.div_ceil(SEGMENT).max(1)
        };
        let seg_len = if segs == 1 { len } else { SEGMENT };
        let units = rows * segs;
        let per_chunk = (units / (self.nth * CHUNKS_PER_THREAD)).max(1);
        self.chunks(units.div_ceil(per_chunk)).flat_map(move |c| {
            (c * per_chunk..((c + 1) * per_chunk).min(units)).map(move |u| {
                let s = u % segs;
                (u / segs, s * seg_len..((s + 1) * seg_len).min(len))
            })
        })
    }

    /// The pieces of `0..n` (the elements of a flattened tensor) this thread computes,
    /// claimed in chunks ([`Params::chunks`]) as [`Params::row_pieces`] claims rows: about
    /// [`CHUNKS_PER_THREAD`] per thread, each a contiguous run of a multiple of 64 elements
    /// and at least [`SEGMENT`] (so a small tensor stays on one thread), the last one shorter.
    pub fn flat_pieces(&self, n: usize) -> impl Iterator<Item = Range<usize>> + '_ {
        let per = n
            .div_ceil(self.nth * CHUNKS_PER_THREAD)
            .next_multiple_of(64)
            .max(SEGMENT);
        self.chunks(n.div_ceil(per))
            .map(move |c| c * per..((c + 1) * per).min(n))
    }

    /// This thread's part of `0..n` (contiguous, balanced).
    pub fn range(&self, n: usize) -> Range<usize> {
        let per = n.div_ceil(self.nth);
        let start = (self.ith * per).min(n);
        start..(start + per).min(n)
    }

    /// This thread's scratch as `len` f32 values. Panics (which fails the run) if the plan's
    /// [`work_size`] gave less, rather than handing out memory past the scratch.
    ///
    /// # Safety
    /// The slice must not outlive the kernel call, and a kernel takes it at most once.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn scratch_f32(&self, len: usize) -> &mut [f32] {
        assert!(
            len <= self.wsize / 4,
            "scratch of {} bytes, {len} f32 wanted",
            self.wsize
        );
        // SAFETY: `wdata` is this thread's private `wsize` bytes (checked above to hold `len`
        // f32) of the plan's `u64` storage, at a multiple of 64 bytes, so 8-byte aligned.
        unsafe { std::slice::from_raw_parts_mut(self.wdata as *mut f32, len) }
    }
}

/// [`Params::row_pieces`]: rows per thread below which rows are cut into segments.
const ROWS_PER_THREAD: usize = 4;
/// [`Params::row_pieces`]: elements per segment of a cut row (32 KiB of f32).
const SEGMENT: usize = 8192;
/// [`Params::row_pieces`]: chunks per thread to claim.
const CHUNKS_PER_THREAD: usize = 8;

/// A kernel: computes this thread's share of a node.
///
/// # Safety
/// The node's pointers must address reserved memory holding tensors of the recorded types,
/// shapes and strides, which the op's shape rule accepted and [`plan`] chose this kernel for;
/// the result may share memory with an operand only as the very same elements (in place) or
/// when the node runs on one thread ([`NodePtrs::needs_one_thread`]).
pub(crate) type KernelFn = unsafe fn(&NodePtrs, &Params<'_>);

/// A node's kernel, the scratch bytes one thread needs for it, and what its threads share:
/// the bytes of a work area all of them use and the barriers the kernel passes inside the
/// node ([`Params::sync`]).
#[derive(Clone, Copy)]
pub(crate) struct Planned {
    pub kernel: KernelFn,
    pub work: usize,
    /// Bytes of the node's shared work area ([`Params::shared_ptr`]).
    pub shared: usize,
    /// Barriers every thread passes inside the node.
    pub syncs: usize,
}

impl Planned {
    /// `kernel` with `work` scratch bytes per thread, nothing shared.
    pub(crate) fn new(kernel: KernelFn, work: usize) -> Planned {
        Planned {
            kernel,
            work,
            shared: 0,
            syncs: 0,
        }
    }

    /// This plan with a shared work area of `bytes` and `syncs` barriers inside the node.
    pub(crate) fn with_shared(self, bytes: usize, syncs: usize) -> Planned {
        Planned {
            shared: bytes,
            syncs,
            ..self
        }
    }
}

/// The kernel of ops that compute nothing (views, leaves).
unsafe fn nothing(_: &NodePtrs, _: &Params) {}

pub(crate) fn is_float(t: Type) -> bool {
    matches!(t, Type::F32 | Type::F16 | Type::BF16)
}

pub(crate) fn unsupported(t: &Tensor) -> Error {
    let srcs: Vec<String> = t.srcs().map(|s| s.ty().to_string()).collect();
    Error::unsupported(format!(
        "CPU: no kernel for {} with result {} and operands [{}] (node {:?})",
        t.op().name(),
        t.ty(),
        srcs.join(", "),
        t.name()
    ))
}

/// The operand in slot `i`, which the op's shape rule requires; `Err` for a node missing it.
pub(crate) fn operand(t: &Tensor, i: usize) -> Result<&Tensor> {
    t.src(i).ok_or_else(|| {
        Error::invalid(format!(
            "CPU: {} node {:?} has no operand in slot {i}",
            t.op().name(),
            t.name()
        ))
    })
}

/// `Err` for an op that has no CPU kernel in this version, saying why.
fn no_kernel(t: &Tensor, why: &str) -> Result<Planned> {
    Err(Error::unsupported(format!(
        "CPU: {} (node {:?}) has no kernel: {why}",
        t.op().name(),
        t.name()
    )))
}

/// The kernel and scratch size for node `t`, or `Err` when no kernel handles its types;
/// a quantized matrix-vector product takes its weight rows as `matvec` says (the graph's
/// choice).
pub(crate) fn plan(t: &Tensor, matvec: Matvec) -> Result<Planned> {
    const TRAINING: &str = "backward and optimizer ops come with training support";
    const F32_F16: &[Type] = &[Type::F32, Type::F16];
    crate::cpu::repack::check_operands(t)?;
    match t.op() {
        Op::None | Op::Reshape | Op::View | Op::Permute | Op::Transpose => {
            Ok(Planned::new(nothing, 0))
        }
        Op::Dup | Op::Cpy | Op::Cont => copy::plan(t),
        Op::Add => binary::plan(t, binary::add),
        Op::Sub => binary::plan(t, binary::sub),
        Op::Mul => binary::plan(t, binary::mul),
        Op::Div => binary::plan(t, binary::div),
        // ADD1's `b` has one element: ADD broadcasts it.
        Op::Add1 => binary::plan(t, binary::add),
        Op::Sqr => unary::plan(t, unary::sqr),
        Op::Sqrt => unary::plan(t, unary::sqrt),
        Op::Log => unary::plan(t, unary::log),
        Op::Sin => unary::plan(t, unary::sin),
        Op::Cos => unary::plan(t, unary::cos),
        Op::Scale => unary::plan(t, unary::scale),
        Op::Unary => unary::plan_unary(t),
        Op::Sum => reduce::plan(t, reduce::sum, None),
        Op::SumRows => reduce::plan(t, reduce::sum_rows, None),
        Op::Mean => reduce::plan(t, reduce::mean, None),
        Op::Argmax => reduce::plan(t, reduce::argmax, Some(Type::I32)),
        Op::Norm => norm::plan(t, norm::norm),
        Op::RmsNorm => norm::plan(t, norm::rms_norm),
        Op::SoftMax => softmax::plan(t),
        Op::MulMat => matmul::plan(t, matvec),
        Op::GetRows => rows::plan_get_rows(t),
        Op::Repeat => rows::plan_copies(t, rows::repeat),
        Op::Concat => rows::plan_concat(t),
        Op::Rope | Op::RopeBack => rope::plan(t),
        Op::FlashAttnExt => flash_attn::plan(t),
        Op::SetRows => set_rows::plan(t),

        Op::Glu => glu::plan(t),
        Op::GroupNorm => norm::plan_group_norm(t),
        Op::L2Norm => norm::plan(t, norm::l2_norm),
        Op::MulMatId => mul_mat_id::plan(t),
        Op::OutProd => out_prod::plan(t),
        Op::Argsort => sort::plan(t, sort::argsort),
        Op::TopK => sort::plan(t, sort::top_k),
        Op::Cumsum => scan::plan(t, scan::cumsum, Type::F32, &[Type::F32]),
        Op::CountEqual => scan::plan(t, scan::count_equal, Type::I64, &[Type::I32, Type::I32]),
        Op::SolveTri => scan::plan(t, scan::solve_tri, Type::F32, &[Type::F32, Type::F32]),

        Op::Im2col => conv::plan_im2col(t, false),
        Op::Im2col3d => conv::plan_im2col(t, true),
        Op::Col2im1d => conv::plan_col2im_1d(t),
        Op::Conv2d => conv::plan_conv(t, false),
        Op::Conv3d => conv::plan_conv(t, true),
        Op::Conv2dDw => conv::plan_conv_2d_dw(t),
        Op::ConvTranspose1d => conv::plan_conv_transpose(t, false),
        Op::ConvTranspose2d => conv::plan_conv_transpose(t, true),
        Op::Pool1d => pool::plan(t, false),
        Op::Pool2d => pool::plan(t, true),
        Op::Upscale => upscale::plan(t),

        // Arithmetic, masks, padding and generators.
        Op::RepeatBack => arith::plan(t, arith::repeat_back, 1, &[Type::F32], 0),
        Op::AddId => arith::plan(t, arith::add_id, 2, &[Type::F32], 0),
        Op::Acc => arith::plan(t, arith::acc, 2, &[Type::F32], 0),
        Op::Set => arith::plan_set(t),
        Op::Diag => arith::plan(t, arith::diag, 1, &[Type::F32], 0),
        Op::DiagMaskInf => arith::plan(t, arith::diag_mask_inf, 1, &[Type::F32], 0),
        Op::DiagMaskZero => arith::plan(t, arith::diag_mask_zero, 1, &[Type::F32], 0),
        Op::Clamp => arith::plan(t, arith::clamp, 1, F32_F16, 0),
        Op::LeakyRelu => arith::plan(t, arith::leaky_relu, 1, F32_F16, 0),
        Op::Fill => arith::plan(t, arith::fill, 1, F32_F16, 0),
        Op::Tri => arith::plan(t, arith::tri, 1, &[Type::F32], 0),
        Op::Pad => arith::plan(t, arith::pad, 1, &[Type::F32], 0),
        Op::PadReflect1d => arith::plan(t, arith::pad_reflect_1d, 1, &[Type::F32], 0),
        Op::Roll => arith::plan(t, arith::roll, 1, &[Type::F32], 0),
        Op::Arange => arith::plan(t, arith::arange, 0, &[], 0),
        Op::TimestepEmbedding => arith::plan(t, arith::timestep_embedding, 1, &[Type::F32], 0),
        Op::CrossEntropyLoss => {
            let row = t.src(0).map_or(0, |a| a.ne()[0] as usize * 4);
            arith::plan(t, arith::cross_entropy_loss, 2, &[Type::F32], row)
        }

        // Sequence models, windows, relative positions and custom ops.
        Op::SsmConv | Op::SsmScan => ssm::plan(t),
        Op::WinPart | Op::WinUnpart | Op::GetRelPos => window::plan(t),
        Op::AddRelPos => window::plan_add_rel_pos(t),
        Op::RwkvWkv6 | Op::GatedLinearAttn | Op::RwkvWkv7 | Op::GatedDeltaNet => rwkv::plan(t),
        Op::LightningIndexer | Op::Dsv4HcComb | Op::Dsv4HcPre | Op::Dsv4HcPost => dsv4::plan(t),
        Op::MapCustom1 | Op::MapCustom2 | Op::MapCustom3 | Op::Custom => custom::plan(t),
        Op::SiluBack
        | Op::RmsNormBack
        | Op::SoftMaxBack
        | Op::GetRowsBack
        | Op::CrossEntropyLossBack
        | Op::OptStepAdamw
        | Op::OptStepSgd => backward::plan(t),
        Op::Im2colBack | Op::Pool2dBack | Op::FlashAttnBack => no_kernel(t, TRAINING),
    }
}

/// `graph` computed on a fresh CPU backend with `threads` threads; `d`'s values after (for the
/// kernels' unit tests that run whole graphs).
#[cfg(test)]
fn computed_on(graph: &crate::graph::Graph, d: &Tensor, threads: usize) -> Vec<f32> {
    let be = crate::backend::cpu_init().unwrap();
    be.set_n_threads(threads).unwrap();
    be.graph_compute(graph).unwrap();
    d.get_f32().unwrap()
}

#[cfg(test)]
mod tests {
    use super::{Faults, NodePtrs, NodeShared, Params, SpinBarrier, TensorPtr};
    use crate::tensor::{MAX_OP_PARAMS, MAX_SRC};
    use crate::types::Type;
    use std::sync::atomic::AtomicUsize;

    /// An F32 tensor at address `at` (never dereferenced) with shape `ne` and strides `nb`.
    fn f32_at(at: usize, ne: [i64; 5], nb: [usize; 5]) -> TensorPtr {
        TensorPtr {
            data: at as *mut u8,
            ty: Type::F32,
            ne,
            nb,
        }
    }

    fn node(dst: TensorPtr, srcs: &[TensorPtr]) -> NodePtrs {
        let mut src = [TensorPtr::NULL; MAX_SRC];
        src[..srcs.len()].copy_from_slice(srcs);
        NodePtrs {
            dst,
            src,
            op_params: [0; MAX_OP_PARAMS / 4],
            custom: None,
        }
    }

    /// Which layouts make a node run on one thread.
    #[test]
    fn overlapping_results_run_on_one_thread() {
        const BASE: usize = 0x1000;
        let contiguous = f32_at(BASE, [4, 8, 1, 1, 1], [4, 16, 128, 128, 128]);
        let transposed = f32_at(BASE, [8, 4, 1, 1, 1], [16, 4, 128, 128, 128]);
        let shared_rows = f32_at(BASE, [4, 8, 1, 1, 1], [4, 0, 0, 0, 0]);
        let short_rows = f32_at(BASE, [4, 8, 1, 1, 1], [4, 8, 64, 64, 64]);
        let row0 = f32_at(BASE, [4, 1, 1, 1, 1], [4, 16, 16, 16, 16]);
        let shifted = f32_at(BASE + 4, [4, 8, 1, 1, 1], [4, 16, 128, 128, 128]);
        let elsewhere = f32_at(BASE + 128, [4, 8, 1, 1, 1], [4, 16, 128, 128, 128]);
        // In place over distinct elements, or no overlap at all: split over threads.
        assert!(!node(contiguous, &[contiguous, elsewhere]).needs_one_thread());
        assert!(!node(transposed, &[transposed]).needs_one_thread());
        assert!(!node(contiguous, &[]).needs_one_thread());
        // The result's rows share bytes, or an operand overlaps it in another layout.
        assert!(node(shared_rows, &[shared_rows]).needs_one_thread());
        assert!(node(short_rows, &[elsewhere]).needs_one_thread());
        assert!(node(contiguous, &[contiguous, row0]).needs_one_thread());
        assert!(node(shifted, &[contiguous]).needs_one_thread());
        assert!(node(contiguous, &[transposed]).needs_one_thread());
    }

    /// Each thread claims its home range (its contiguous share) from the front, then what is
    /// left of the others' ranges, the next thread's first; together the threads get every
    /// chunk exactly once, also when one of them never claims.
    #[test]
    fn threads_claim_their_home_range_then_the_others() {
        let faults = Faults::default();
        let barrier = SpinBarrier::new(3);
        let chunks: Vec<AtomicUsize> = (0..6).map(|_| AtomicUsize::new(0)).collect();
        let shared = NodeShared {
            data: std::ptr::null_mut(),
            size: 0,
            barrier: &barrier,
            // two phases of three counters
            chunks: &chunks,
            per_phase: 3,
        };
        let params = |ith| Params::new((ith, 3), (std::ptr::null_mut(), 0), &faults, 0, &shared);
        let (p0, p1, p2) = (params(0), params(1), params(2));
        // 10 chunks: homes 0..3, 3..6, 6..10
        let mut first: Vec<usize> = p1.chunks(10).take(2).collect();
        assert_eq!(first, [3, 4]);
        let mut c0 = p0.chunks(10);
        assert_eq!(c0.next(), Some(0));
        // thread 1 finishes its home, then takes thread 2's range (thread 2 never claims)
        // and the rest of thread 0's
        first.extend(p1.chunks(10));
        assert_eq!(first, [3, 4, 5, 6, 7, 8, 9, 1, 2]);
        assert_eq!(c0.next(), None);
        assert_eq!(p2.chunks(10).next(), None);
        // the next phase has counters of its own (one thread: no barrier to wait at)
        let alone = Params::new((0, 1), (std::ptr::null_mut(), 0), &faults, 0, &shared);
        alone.sync();
        assert_eq!(alone.chunks(4).collect::<Vec<_>>(), [0, 1, 2, 3]);
    }

    /// Asking for more scratch than the plan gave is a panic (the run fails), never an
    /// out-of-bounds slice.
    #[test]
    #[should_panic(expected = "scratch of 8 bytes")]
    fn scratch_larger_than_planned_panics() {
        let mut storage = [0u64; 1];
        let faults = Faults::default();
        let barrier = SpinBarrier::new(1);
        let chunks = [AtomicUsize::new(0)];
        let shared = NodeShared {
            data: std::ptr::null_mut(),
            size: 0,
            barrier: &barrier,
            chunks: &chunks,
            per_phase: 1,
        };
        let p = Params::new(
            (0, 1),
            (storage.as_mut_ptr() as *mut u8, 8),
            &faults,
            0,
            &shared,
        );
        // SAFETY: the slice is not kept; the call panics before making it.
        let _ = unsafe { p.scratch_f32(3) };
    }
}
