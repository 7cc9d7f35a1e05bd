//! MUL_MAT_ID: `dst[i, e, t] = dot(as row i of expert ids[e, t], b row (e mod n_b, t))`.
//! Every thread lists the (slot, token) pairs of each expert (the same list on every thread) by
//! a counting sort in its scratch, so a run allocates nothing; threads split the rows of the
//! experts. For each expert, its pairs' `b` rows are taken [`JB`] at a time into the thread's
//! scratch, and each row of the expert is dotted with the whole block. Pairs whose id is
//! outside `0..n_expert` get a zero row and read nothing.
//!
//! Weights with a quantized dot kernel ([`quant_dot`]) are multiplied in their blocks, as
//! GGML's CPU does: the block's `b` rows are quantized to the dot type (GGML's x86
//! quantizers, [`quantize_act`]) and every output is the row dot kernel's for its one column,
//! the value GGML's `vec_dot` gives it. Float weights (and quantized ones without a dot
//! kernel, dequantized once per block) go through MUL_MAT's f32 dot products.

use super::{dequantizable, is_float, matmul, operand, unsupported, NodePtrs, Params, Planned};
use crate::cpu::quant_dot::{isa, quant_dot, quantize_act};
use crate::error::Result;
use crate::tensor::Tensor;
use crate::types::Type;

/// Rows of `b` per block.
const JB: usize = 8;

/// The kernel, with scratch per thread for the sort and for one expert row and [`JB`] rows of
/// `b` as f32 (float weights), or for one row of `b` as f32 and [`JB`] quantized to the
/// weights' dot type (quantized weights with a dot kernel).
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
        let quantized = JB * qd.act.row_size(k as i64)?;
        return Ok(Planned::new(
            mul_mat_id_quant,
            (k + sort) * 4 + quantized.next_multiple_of(4),
        ));
    }
    Ok(Planned::new(mul_mat_id, ((1 + JB) * k + sort) * 4))
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
    ids: &super::TensorPtr,
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

/// The (slot, token) pairs of `ids` sorted by expert in `sort` (the thread's scratch of
/// `n_expert + 1 + n_used · n_tokens` values): calls `block(x, pairs)` for each expert `x` and
/// each run of up to [`JB`] of its pairs, in order, after setting to zero this thread's `rows`
/// of the results of pairs whose id is outside the experts.
///
/// # Safety
/// `n` is a MUL_MAT_ID node as its plan checked it; `rows` are this thread's weight rows.
unsafe fn by_expert(
    n: &NodePtrs,
    p: &Params,
    rows: std::ops::Range<usize>,
    sort: &mut [f32],
    mut block: impl FnMut(usize, &[(usize, usize)]),
) {
    let (d, w, ids) = (&n.dst, &n.src[0], &n.src[2]);
    let n_expert = w.ne[2] as usize;
    let n_used = ids.ne[0] as usize;
    let (ends, list) = bytemuck::cast_slice_mut::<f32, u32>(sort).split_at_mut(n_expert + 1);
    // SAFETY: ids is I32 [n_used, n_tokens]; the slices have the sizes asked for.
    unsafe { sort_by_expert(ids, n_expert, p, ends, list) };
    // The sorted pairs of expert x (x = n_expert: the invalid ids), and one pair as
    // (slot, token).
    let (ends, list) = (&*ends, &*list);
    let run = |x: usize| &list[if x == 0 { 0 } else { ends[x - 1] as usize }..ends[x] as usize];
    let pair = |j: u32| (j as usize % n_used, j as usize / n_used);
    for (e, t) in run(n_expert).iter().map(|&j| pair(j)) {
        for i in rows.clone() {
            // SAFETY: dst is [M, n_used, n_tokens]; i < M, only this thread writes row i.
            unsafe { d.set(d.row([e, t, 0, 0]), i, 0.0) }
        }
    }
    let mut pairs = [(0, 0); JB];
    for x in 0..n_expert {
        for chunk in run(x).chunks(JB) {
            for (slot, &j) in pairs.iter_mut().zip(chunk) {
                *slot = pair(j);
            }
            block(x, &pairs[..chunk.len()]);
        }
    }
}

/// Sets result element `i` of pair `(e, t)` for each of `pairs` to its value in `vals`.
///
/// # Safety
/// `d` is the node's F32 result `[M, n_used, n_tokens]`, `i < M` a row of this thread's.
unsafe fn put(d: &super::TensorPtr, i: usize, pairs: &[(usize, usize)], vals: &[f32]) {
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
    let rows = p.range(w.ne[1] as usize);
    if rows.is_empty() {
        return;
    }
    let k = w.ne[0] as usize;
    let n_expert = w.ne[2] as usize;
    let (n_used, n_tokens, n_b) = (ids.ne[0] as usize, ids.ne[1] as usize, b.ne[1] as usize);
    // SAFETY: the plan sized each thread's scratch for (1 + JB)·K f32 values and the sort.
    let scratch = unsafe { p.scratch_f32((1 + JB) * k + n_expert + 1 + n_used * n_tokens) };
    let (bufs, sort) = scratch.split_at_mut((1 + JB) * k);
    let (wbuf, bbuf) = bufs.split_at_mut(k);
    let borrow_w = !d.overlaps(w);
    let mut out = [0f32; JB];
    let each = |x: usize, pairs: &[(usize, usize)]| {
        for (&(e, t), buf) in pairs.iter().zip(bbuf.chunks_exact_mut(k.max(1))) {
            // SAFETY: e mod n_b < b.ne1 (n_b divides n_used, so n_b > 0 here), t < b.ne2.
            unsafe { b.read_row(b.row([e % n_b, t, 0, 0]), &mut buf[..k]) };
        }
        let mut block: [&[f32]; JB] = [&[]; JB];
        for (slot, r) in block.iter_mut().zip(bbuf.chunks_exact(k.max(1))) {
            *slot = &r[..k];
        }
        let block = &block[..pairs.len()];
        for i in rows.clone() {
            // SAFETY: i < M and x < n_expert: a row of `as`; wbuf holds K values; i is a
            // row of this thread's.
            unsafe {
                matmul::row_dots(
                    w,
                    w.row([i, x, 0, 0]),
                    wbuf,
                    borrow_w,
                    block,
                    &mut out[..pairs.len()],
                );
                put(d, i, pairs, &out[..pairs.len()]);
            }
        }
    };
    // SAFETY: the node as planned; `rows` are this thread's.
    unsafe { by_expert(n, p, rows.clone(), sort, each) };
}

/// The kernel for quantized weights with a dot kernel: each block of pairs' `b` rows
/// quantized to the dot type, then each weight row's row dot with them.
///
/// # Safety
/// As [`KernelFn`](super::KernelFn), with the plan [`plan`] made for the node.
unsafe fn mul_mat_id_quant(n: &NodePtrs, p: &Params) {
    let (d, w, b, ids) = (&n.dst, &n.src[0], &n.src[1], &n.src[2]);
    let rows = p.range(w.ne[1] as usize);
    if rows.is_empty() {
        return;
    }
    let simd = isa();
    let Some(qd) = quant_dot(w.ty, simd) else {
        unreachable!("planned for a type with a dot kernel")
    };
    let k = w.ne[0] as usize;
    let wbytes = k / w.ty.blck_size() * w.ty.type_size();
    let qbytes = k / qd.act.blck_size() * qd.act.type_size();
    let (n_used, n_tokens, n_b) = (ids.ne[0] as usize, ids.ne[1] as usize, b.ne[1] as usize);
    let sort_len = w.ne[2] as usize + 1 + n_used * n_tokens;
    // SAFETY: the plan sized each thread's scratch for K f32 values, the sort and JB
    // quantized rows.
    let scratch = unsafe { p.scratch_f32(k + sort_len + (JB * qbytes).div_ceil(4)) };
    let (fbuf, rest) = scratch.split_at_mut(k);
    let (sort, qbuf) = rest.split_at_mut(sort_len);
    let qbuf: &mut [u8] = bytemuck::cast_slice_mut(qbuf);
    let mut out = [0f32; JB];
    let each = |x: usize, pairs: &[(usize, usize)]| {
        for (&(e, t), q) in pairs.iter().zip(qbuf.chunks_exact_mut(qbytes.max(1))) {
            // SAFETY: e mod n_b < b.ne1 (n_b divides n_used, so n_b > 0 here), t < b.ne2.
            unsafe { b.read_row(b.row([e % n_b, t, 0, 0]), fbuf) };
            quantize_act(qd.act, simd, fbuf, q);
        }
        let block = &qbuf[..pairs.len() * qbytes];
        for i in rows.clone() {
            // SAFETY: i < M and x < n_expert: a row of `as`, wbytes of packed blocks not
            // written by this node; `isa()` chose a path this CPU runs; `block` holds
            // pairs.len() rows of the dot type; i is a row of this thread's.
            unsafe {
                let wrow = std::slice::from_raw_parts(w.row([i, x, 0, 0]), wbytes);
                (qd.dot)(wrow, block, &mut out[..pairs.len()]);
                put(d, i, pairs, &out[..pairs.len()]);
            }
        }
    };
    // SAFETY: the node as planned; `rows` are this thread's.
    unsafe { by_expert(n, p, rows.clone(), sort, each) };
}
