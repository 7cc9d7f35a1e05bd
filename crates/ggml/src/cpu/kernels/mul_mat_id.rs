//! MUL_MAT_ID: `dst[i, e, t] = dot(as row i of expert ids[e, t], b row (e mod n_b, t))`.
//! Every thread lists the (slot, token) pairs of each expert (the same list on every thread) by
//! a counting sort in its scratch (GGML's `matrix_row_counts` and `matrix_rows`), so a run
//! allocates nothing; threads split the rows of the experts. Pairs whose id is outside
//! `0..n_expert` get a zero row and read nothing.
//!
//! Float weights (F32, F16, BF16): an expert with [`GEMM_MIN_COLS`] pairs or more multiplies
//! its weights by all of them at once in the packed GEMM of [`crate::cpu::gemm`], which reads
//! the pairs' `b` rows where they lie and writes their result rows in place ([`Gathered`],
//! [`Scattered`]), this thread's rows in whole tiles; an expert with fewer takes its pairs'
//! `b` rows [`JB`] at a time into the thread's scratch and dots each of its rows with the whole
//! block (MUL_MAT's f32 dot products). Either way `b` is rounded to the weights' dot type (F16,
//! BF16) as GGML's CPU converts it. Quantized weights without a dot kernel are dequantized a
//! row at a time for the dot products.
//!
//! Weights with a quantized dot kernel ([`quant_dot`]) are multiplied in their blocks, as
//! GGML's CPU does: the pairs' `b` rows are quantized to the dot type once per node (GGML's x86
//! quantizers, [`quantize_act`]), in the order of the sorted list, so each expert's are one
//! run: by all threads into the node's shared work area, then a barrier (or, for at most
//! [`PRIVATE_PAIRS`] pairs, by every thread into its own scratch, with no barrier); every
//! output is the row dot kernel's for its one column, the value GGML's `vec_dot` gives it.

use super::TensorPtr;
use super::{dequantizable, is_float, matmul, operand, unsupported, NodePtrs, Params, Planned};
use crate::cpu::gemm::{self, Gathered, Kernel, Mat, Round, Scattered};
use crate::cpu::quant_dot::{isa, quant_dot, quantize_act};
use crate::error::Result;
use crate::tensor::Tensor;
use crate::types::Type;

/// Rows of `b` per block of the dot products.
const JB: usize = 8;

/// Pairs an expert needs for the GEMM: as MUL_MAT's threshold, below which packing the
/// expert's rows costs more than it saves.
const GEMM_MIN_COLS: usize = 5;

/// Pairs up to which every thread quantizes all of them itself (no barrier): token
/// generation's few.
const PRIVATE_PAIRS: usize = 4;

/// The kernel, with scratch per thread for the sort, and: for float weights (and quantized ones
/// without a dot kernel) one expert row and [`JB`] rows of `b` as f32, and the GEMM's panels
/// where the result takes them; for quantized weights with a dot kernel one row of `b` as f32,
/// the node's pairs quantized to the weights' dot type in a shared area (or, for at most
/// [`PRIVATE_PAIRS`] of them, in the scratch).
pub(super) fn plan(t: &Tensor) -> Result<Planned> {
    let (w, b, ids) = (operand(t, 0)?, operand(t, 1)?, operand(t, 2)?);
    let weights_ok = is_float(w.ty()) || dequantizable(w.ty());
    if t.ty() != Type::F32 || !weights_ok || !is_float(b.ty()) || ids.ty() != Type::I32 {
        return Err(unsupported(t));
    }
    let pairs = ids.ne()[0] as usize * ids.ne()[1] as usize;
    if u32::try_from(pairs).is_err() {
        return Err(crate::error::Error::invalid(format!(
            "MUL_MAT_ID: ids has {pairs} (slot, token) pairs; at most {} are supported",
            u32::MAX
        )));
    }
    let (k, sort) = (w.ne()[0] as usize, w.ne()[2] as usize + 1 + pairs);
    // a weight in the CPU repack buffer type computes as its layout's type
    let wty = crate::cpu::repack::kernel_type(t, 0, w)?;
    if let Some(qd) = quant_dot(wty, isa()) {
        let quantized = (pairs * qd.act.row_size(k as i64)?).next_multiple_of(4);
        let own = (k + sort) * 4;
        return Ok(if pairs > PRIVATE_PAIRS {
            Planned::new(mul_mat_id_quant::<true>, own).with_shared(quantized, 1)
        } else {
            Planned::new(mul_mat_id_quant::<false>, own + quantized)
        });
    }
    let nb = t.nb();
    let gemm = is_float(w.ty()) && nb[0] == 4 && nb[1] % 4 == 0 && nb[2] % 4 == 0;
    let panels = if gemm { gemm::scratch_len(pairs) } else { 0 };
    Ok(Planned::new(mul_mat_id, ((1 + JB) * k + sort + panels) * 4))
}

/// Sorts the (slot, token) pairs of `ids` by expert into `list` (each pair as
/// `token · n_used + slot`, in token order within an expert; ids outside `0..n_expert` sort
/// last, as expert `n_expert`), leaving in `ends[x]` the end of expert `x`'s run. Thread 0
/// reports the out-of-range ids.
///
/// # Safety
/// `ids` must be an I32 tensor of `[n_used, n_tokens]`; `ends` holds `n_expert + 1` values
/// and `list` `n_used · n_tokens`.
unsafe fn sort_by_expert(
    ids: &TensorPtr,
    n_expert: usize,
    p: &Params,
    ends: &mut [u32],
    list: &mut [u32],
) {
    let (n_used, n_tokens) = (ids.ne[0] as usize, ids.ne[1] as usize);
    // The expert of pair (e, t), n_expert for an id outside the experts.
    let expert = |e: usize, t: usize| {
        // SAFETY: (e, t) is inside ids (the caller's shape).
        let id =
            unsafe { (ids.row([t, 0, 0, 0]).add(e * ids.nb[0]) as *const i32).read_unaligned() };
        let x = usize::try_from(id).ok().filter(|&x| x < n_expert);
        (x.unwrap_or(n_expert), id)
    };
    ends.fill(0);
    for t in 0..n_tokens {
        for e in 0..n_used {
            let (x, id) = expert(e, t);
            if x == n_expert && p.ith == 0 {
                p.index_fault(2, [e, t, 0], id.into(), n_expert as i64);
            }
            ends[x] += 1;
        }
    }
    // Each expert's count becomes its start.
    let mut start = 0;
    for c in ends.iter_mut() {
        (*c, start) = (start, start + *c);
    }
    for t in 0..n_tokens {
        for e in 0..n_used {
            let x = expert(e, t).0;
            list[ends[x] as usize] = (t * n_used + e) as u32;
            ends[x] += 1;
        }
    }
}

/// The (slot, token) pairs of a node sorted by expert: the sorted list and the end of each
/// expert's run in it (the last run, expert `n_expert`, the ids outside the experts).
struct Routing<'a> {
    ends: &'a [u32],
    list: &'a [u32],
    n_used: usize,
}

impl Routing<'_> {
    /// The positions in the list of expert `x`'s pairs.
    fn span(&self, x: usize) -> std::ops::Range<usize> {
        let start = if x == 0 { 0 } else { self.ends[x - 1] as usize };
        start..self.ends[x] as usize
    }

    /// Pair `j` of the list as (slot, token).
    fn pair(&self, j: usize) -> (usize, usize) {
        let v = self.list[j] as usize;
        (v % self.n_used, v / self.n_used)
    }
}

/// Sorts the pairs of node `n` in `sort` (the thread's scratch of
/// `n_expert + 1 + n_used · n_tokens` values), then sets to zero this thread's `rows` of the
/// results of pairs whose id is outside the experts.
///
/// # Safety
/// `n` is a MUL_MAT_ID node as its plan checked it; `rows` are this thread's weight rows.
unsafe fn route<'a>(
    n: &NodePtrs,
    p: &Params,
    rows: std::ops::Range<usize>,
    sort: &'a mut [f32],
) -> Routing<'a> {
    let (d, w, ids) = (&n.dst, &n.src[0], &n.src[2]);
    let n_expert = w.ne[2] as usize;
    let (ends, list) = bytemuck::cast_slice_mut::<f32, u32>(sort).split_at_mut(n_expert + 1);
    // SAFETY: ids is I32 [n_used, n_tokens]; the slices have the sizes asked for.
    unsafe { sort_by_expert(ids, n_expert, p, ends, list) };
    let routing = Routing {
        ends,
        list,
        n_used: ids.ne[0] as usize,
    };
    for j in routing.span(n_expert) {
        let (e, t) = routing.pair(j);
        for i in rows.clone() {
            // SAFETY: dst is [M, n_used, n_tokens]; i < M, only this thread writes row i.
            unsafe { d.set(d.row([e, t, 0, 0]), i, 0.0) }
        }
    }
    routing
}

/// Sets result element `i` of pair `(e, t)` for each of `pairs` to its value in `vals`.
///
/// # Safety
/// `d` is the node's F32 result `[M, n_used, n_tokens]`, `i < M` a row of this thread's.
unsafe fn put(d: &TensorPtr, i: usize, pairs: &[(usize, usize)], vals: &[f32]) {
    for (&(e, t), &v) in pairs.iter().zip(vals) {
        // SAFETY: (e, t) is a pair of ids, inside dst; only this thread writes row i.
        unsafe { d.set(d.row([e, t, 0, 0]), i, v) }
    }
}

/// The kernel for float weights (and quantized ones without a dot kernel).
///
/// # Safety
/// As [`KernelFn`](super::KernelFn), with the plan [`plan`] made for the node.
unsafe fn mul_mat_id(n: &NodePtrs, p: &Params) {
    let (d, w, b, ids) = (&n.dst, &n.src[0], &n.src[1], &n.src[2]);
    let kern = Kernel::for_isa(isa());
    let rows = kern.band(w.ne[1] as usize, p.ith, p.nth);
    if rows.is_empty() {
        return;
    }
    let k = w.ne[0] as usize;
    let n_expert = w.ne[2] as usize;
    let (n_used, n_tokens, n_b) = (ids.ne[0] as usize, ids.ne[1] as usize, b.ne[1] as usize);
    let pairs = n_used * n_tokens;
    let planned_gemm = is_float(w.ty) && d.nb[0] == 4 && d.nb[1] % 4 == 0 && d.nb[2] % 4 == 0;
    let gemm_ok = planned_gemm && d.data as usize % 4 == 0 && !d.overlaps(w) && !d.overlaps(b);
    let panels_len = if planned_gemm {
        gemm::scratch_len(pairs)
    } else {
        0
    };
    // SAFETY: the plan sized each thread's scratch for (1 + JB)·K f32 values, the sort and
    // the GEMM's panels where it planned them.
    let scratch = unsafe { p.scratch_f32((1 + JB) * k + n_expert + 1 + pairs + panels_len) };
    let (bufs, rest) = scratch.split_at_mut((1 + JB) * k);
    let (sort, panels) = rest.split_at_mut(n_expert + 1 + pairs);
    let (wbuf, bbuf) = bufs.split_at_mut(k);
    let borrow_w = !d.overlaps(w);
    let round = Round::for_weights(w.ty);
    // SAFETY: the node as planned; `rows` are this thread's.
    let routing = unsafe { route(n, p, rows.clone(), sort) };
    let routing = &routing;
    // (e mod n_b, t) is a row of b: n_b divides n_used, so n_b > 0 here, and t < b.ne2
    let b_row = |(e, t): (usize, usize)| b.row([e % n_b, t, 0, 0]) as *const u8;
    let mut out = [0f32; JB];
    for x in 0..n_expert {
        let span = routing.span(x);
        if gemm_ok && span.len() >= GEMM_MIN_COLS {
            let weights = Mat {
                ptr: w.row([0, x, 0, 0]),
                ty: w.ty,
                row_stride: w.nb[1],
                elem_stride: w.nb[0],
            };
            let first = span.start;
            let acts = Gathered {
                row: |j: usize| b_row(routing.pair(first + j)),
                ty: b.ty,
                elem_stride: b.nb[0],
            };
            let results = Scattered(|j: usize| {
                let (e, t) = routing.pair(first + j);
                d.row([e, t, 0, 0]) as *mut f32
            });
            // SAFETY: rows of expert x of `as` (`rows` within M) and the pairs' b rows, K
            // elements each; the pairs' result rows are distinct packed, aligned f32 rows
            // overlapping neither operand, of which only this thread writes `rows`; `isa()`
            // chose a path this CPU runs; the panels hold scratch_len(pairs) values.
            unsafe {
                gemm::gemm(
                    &kern,
                    &weights,
                    &acts,
                    k,
                    round,
                    &results,
                    rows.clone(),
                    0..span.len(),
                    panels,
                )
            };
            continue;
        }
        for j0 in span.step_by(JB) {
            let nj = JB.min(routing.span(x).end - j0);
            let pairs: [(usize, usize); JB] =
                std::array::from_fn(|t| routing.pair(j0 + t.min(nj - 1)));
            let pairs = &pairs[..nj];
            for (&pair, buf) in pairs.iter().zip(bbuf.chunks_exact_mut(k.max(1))) {
                // SAFETY: a row of b (above), K elements; buf holds K values.
                unsafe { b.read_row(b_row(pair) as *mut u8, &mut buf[..k]) };
                round.slice(&mut buf[..k]);
            }
            let mut block: [&[f32]; JB] = [&[]; JB];
            for (slot, r) in block.iter_mut().zip(bbuf.chunks_exact(k.max(1))) {
                *slot = &r[..k];
            }
            for i in rows.clone() {
                // SAFETY: i < M and x < n_expert: a row of `as`; wbuf holds K values; i is a
                // row of this thread's.
                unsafe {
                    matmul::row_dots(
                        w,
                        w.row([i, x, 0, 0]),
                        wbuf,
                        borrow_w,
                        &block[..nj],
                        &mut out[..nj],
                    );
                    put(d, i, pairs, &out[..nj]);
                }
            }
        }
    }
}

/// The kernel for quantized weights with a dot kernel: every pair's `b` row quantized to the
/// dot type once (`SHARED`: by all threads into the shared area, then a barrier; else by each
/// thread into its scratch), in the sorted list's order, then each weight row's row dot with
/// each expert's pairs, [`JB`] at a time.
///
/// # Safety
/// As [`KernelFn`](super::KernelFn), with the plan [`plan`] made for the node.
unsafe fn mul_mat_id_quant<const SHARED: bool>(n: &NodePtrs, p: &Params) {
    let (d, w, b, ids) = (&n.dst, &n.src[0], &n.src[1], &n.src[2]);
    let simd = isa();
    let Some(qd) = quant_dot(w.ty, simd) else {
        unreachable!("planned for a type with a dot kernel")
    };
    let k = w.ne[0] as usize;
    let n_expert = w.ne[2] as usize;
    let wbytes = k / w.ty.blck_size() * w.ty.type_size();
    let qbytes = k / qd.act.blck_size() * qd.act.type_size();
    let (n_used, n_tokens, n_b) = (ids.ne[0] as usize, ids.ne[1] as usize, b.ne[1] as usize);
    let pairs = n_used * n_tokens;
    let sort_len = n_expert + 1 + pairs;
    let quantized = (pairs * qbytes).next_multiple_of(4);
    let private_len = if SHARED { 0 } else { quantized / 4 };
    // SAFETY: the plan sized each thread's scratch for K f32 values and the sort, and the
    // quantized pairs too when not SHARED.
    let scratch = unsafe { p.scratch_f32(k + sort_len + private_len) };
    let (fbuf, rest) = scratch.split_at_mut(k);
    let (sort, private) = rest.split_at_mut(sort_len);
    let rows = p.range(w.ne[1] as usize);
    // SAFETY: the node as planned; `rows` are this thread's.
    let routing = unsafe { route(n, p, rows.clone(), sort) };
    let qbase = if SHARED {
        p.shared_ptr(quantized)
    } else {
        private.as_mut_ptr() as *mut u8
    };
    // Phase 0: this thread's pairs (all of them when not SHARED) quantized, those of the
    // experts only. Every read of b ends before any write of the result (and, shared, before
    // the barrier), so a result placed over b cannot change what is read.
    let valid = routing.span(n_expert).start;
    let mine = if SHARED { p.range(valid) } else { 0..valid };
    for j in mine {
        let (e, t) = routing.pair(j);
        // SAFETY: (e mod n_b, t) is a row of b (n_b divides n_used, so n_b > 0 here), K
        // elements; fbuf holds K values; nothing writes b during this phase.
        unsafe { b.read_row(b.row([e % n_b, t, 0, 0]), fbuf) };
        // SAFETY: pair j's bytes of the area (sized for all pairs), which only this thread
        // touches before the barrier.
        let q = unsafe { std::slice::from_raw_parts_mut(qbase.add(j * qbytes), qbytes) };
        quantize_act(qd.act, simd, fbuf, q);
    }
    if SHARED {
        p.sync();
    }
    if rows.is_empty() {
        return;
    }
    // Phase 1. SAFETY: every valid pair's row is written (by this thread, or before the
    // barrier above); only read from here on.
    let all = unsafe { std::slice::from_raw_parts(qbase as *const u8, valid * qbytes) };
    let mut out = [0f32; JB];
    for x in 0..n_expert {
        let span = routing.span(x);
        for j0 in span.clone().step_by(JB) {
            let nj = JB.min(span.end - j0);
            let pairs: [(usize, usize); JB] =
                std::array::from_fn(|t| routing.pair(j0 + t.min(nj - 1)));
            let block = &all[j0 * qbytes..(j0 + nj) * qbytes];
            for i in rows.clone() {
                // SAFETY: i < M and x < n_expert: a row of `as`, wbytes of packed blocks not
                // written by this node; `isa()` chose a path this CPU runs; `block` holds nj
                // rows of the dot type; i is a row of this thread's.
                unsafe {
                    let wrow = std::slice::from_raw_parts(w.row([i, x, 0, 0]), wbytes);
                    (qd.dot)(wrow, block, &mut out[..nj]);
                    put(d, i, &pairs[..nj], &out[..nj]);
                }
            }
        }
    }
}
