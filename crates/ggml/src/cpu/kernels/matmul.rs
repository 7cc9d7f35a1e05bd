//! MUL_MAT: `dst[i, j] = dot(a row i, b row j)` per batch, with `a` broadcast over the batch
//! dimensions of `b`. Weights `a` in F32, F16, BF16 or any quantized type with a dequantizer
//! (each row dequantized once per block of `b` rows, then dotted in f32: more precise than
//! GGML's integer dot against `b` quantized to Q8), activations `b` in F32, F16 or BF16;
//! result F32. Weight types with an integer dot kernel go to [`super::matmul_quant`] instead,
//! F16 weights on the AVX-512 and AVX2 paths to `matmul_f16`, and BF16 weights on the AVX2
//! path and on the AVX-512 path of a CPU with AVX-512 BF16 to `matmul_bf16` (GGML's float
//! orders for those CPUs, `vdpbf16ps` for BF16 on AVX-512; the AVX2 tiles in `half_avx2`).
//!
//! F32, F16 and BF16 weights against [`GEMM_MIN_COLS`] or more columns go through the packed
//! GEMM of [`crate::cpu::gemm`] (`b` rounded to the weights' dot type as GGML does; see there).
//! Fewer columns, and quantized weights without an integer dot kernel, take the dot products
//! below, with `b` rounded the same way for F16 and BF16 weights.
//!
//! In the dot products, threads claim chunks (a run of rows of `a` against a block of [`JB`]
//! rows of `b` of one batch) from the node's counter. The block's rows of `b` are converted
//! to f32 in the thread's scratch unless they already are packed, aligned f32 (or must be
//! rounded), and every row of `a` (likewise converted, or borrowed when packed, aligned F32)
//! is dotted with the whole block. On x86-64 CPUs with AVX2 and FMA an intrinsics path,
//! chosen at run time, does up to four `b` rows per pass over a row of `a`, and borrowed F32
//! weights go several rows per pass (four for a matrix-vector product), each prefetched
//! ahead, so that several weight streams come from memory at once. Every output has the same
//! order of operations whatever the pass, the chunk or the thread count; unit tests hold
//! both paths to an f64 dot product and to scalar models of their orders, bit for bit.

use super::{dequantizable, dequantize_into, is_float, unsupported, NodePtrs, Params, TensorPtr};
use super::{operand, Planned};
use crate::cpu::gemm;
use crate::cpu::quant_dot::{isa, quant_dot};
use crate::error::Result;
use crate::tensor::Tensor;
use crate::types::{bf16_to_f32, f16, Type};

/// Rows of `b` per block.
pub(super) const JB: usize = 8;
/// Lanes of the partial sums of one dot product.
const LANES: usize = 8;

/// The kernel: for weights with an integer dot kernel ([`quant_dot`]), the quantized one
/// ([`super::matmul_quant`], its matrix-vector products as `matvec` says); else the f32
/// one, with scratch for one row of `a` and [`JB`] rows of `b` as f32.
pub(super) fn plan(t: &Tensor, matvec: super::Matvec) -> Result<Planned> {
    let (a, b) = (operand(t, 0)?, operand(t, 1)?);
    let weights_ok = is_float(a.ty()) || dequantizable(a.ty());
    if t.ty() != Type::F32 || !weights_ok || !is_float(b.ty()) {
        return Err(unsupported(t));
    }
    let k = a.ne()[0] as usize;
    // a weight in the CPU repack buffer type computes as its layout's type
    let wty = crate::cpu::repack::kernel_type(t, 0, a)?;
    if let Some(qd) = quant_dot(wty, isa()) {
        return super::matmul_quant::plan(wty, a, b, qd, matvec);
    }
    // F16 weights on the AVX-512 or AVX2 path: GGML's float order
    #[cfg(target_arch = "x86_64")]
    if let Some(planned) = super::matmul_f16::plan(t, a, b) {
        return Ok(planned);
    }
    // BF16 weights on the AVX-512 path with AVX-512 BF16 (`vdpbf16ps`) or the AVX2 path:
    // likewise
    #[cfg(target_arch = "x86_64")]
    if let Some(planned) = super::matmul_bf16::plan(t, a, b) {
        return Ok(planned);
    }
    let dots_work = (1 + JB) * k * 4;
    let n = b.ne()[1] as usize;
    if is_float(a.ty()) && n >= GEMM_MIN_COLS && t.nb()[0] == 4 && t.nb()[1] % 4 == 0 {
        // the dot path's scratch too: the kernel falls back to it for a result it cannot
        // write as packed f32 rows or that overlaps an operand
        let work = (gemm::scratch_len(n) * 4).max(dots_work);
        return Ok(Planned::new(mul_mat_gemm, work));
    }
    Ok(Planned::new(mul_mat, dots_work))
}

/// Columns of `b` from which float weights go through the packed GEMM ([`gemm`]); fewer
/// take the dot products of [`mul_mat`], faster for matrix-vector products (where packing
/// `a` costs more than using it). Measured on 4096² F16 weights (Xeon, AVX-512): the dot
/// products ahead at 2 to 4 columns, the GEMM from 5 (1.2×) and 8 (1.4×).
const GEMM_MIN_COLS: usize = 5;

/// MUL_MAT with F32, F16 or BF16 weights through the packed GEMM: the products of all
/// batches split into rectangles of whole tiles ([`gemm::Split`]), each thread taking a
/// contiguous run of them, so each result element is computed by one thread in an order
/// that does not depend on the thread count.
///
/// # Safety
/// As [`KernelFn`](super::KernelFn), with the plan [`plan`] made for the node.
unsafe fn mul_mat_gemm(n: &NodePtrs, p: &Params) {
    let (d, a, b) = (&n.dst, &n.src[0], &n.src[1]);
    if d.overlaps(a) || d.overlaps(b) || d.data as usize % 4 != 0 {
        // SAFETY: forwarded; the plan reserved the dot path's scratch too.
        return unsafe { mul_mat(n, p) };
    }
    let dims = [a.ne[1] as usize, b.ne[1] as usize, a.ne[0] as usize];
    let round = gemm::Round::for_weights(a.ty);
    // SAFETY: forwarded; a holds ne1 rows and b ne1 rows of ne0 elements, as the GEMM reads
    // them with `RowsAlong::Nb1`; the result checked above.
    unsafe { gemm_batches(n, p, dims, gemm::RowsAlong::Nb1, round) }
}

/// The products `c[j][i] = Σₖ a[i][k] · round(b[j][k])` of every batch of `b` (`a`
/// broadcast), `[m, n, k] = dims`, through the packed GEMM: the batches split into rectangles
/// of whole tiles ([`gemm::Split`]), each thread taking a contiguous run of them, so each
/// result element is computed by one thread in an order that does not depend on the thread
/// count. Result row `j` of a batch is the result's row `j` (its `ne1` index).
///
/// # Safety
/// As [`KernelFn`](super::KernelFn); the plan reserved `scratch_len(n)` f32 values per thread;
/// `a` and `b` hold `m` and `n` rows of `k` elements along `rows`; the result holds packed,
/// 4-byte-aligned f32 rows of `m` values, `nb1` a multiple of 4, overlapping neither operand.
pub(super) unsafe fn gemm_batches(
    n: &NodePtrs,
    p: &Params,
    [m, ncols, k]: [usize; 3],
    rows_along: gemm::RowsAlong,
    round: gemm::Round,
) {
    let (d, a, b) = (&n.dst, &n.src[0], &n.src[1]);
    let kern = gemm::Kernel::for_isa(isa());
    let batches = batch_count(b);
    let split = gemm::Split::new(&kern, m, ncols, batches, p.nth);
    let units = p.range(split.units(batches));
    if units.is_empty() {
        return;
    }
    // SAFETY: the caller's plan sized each thread's scratch for `scratch_len(ncols)` values.
    let scratch = unsafe { p.scratch_f32(gemm::scratch_len(ncols)) };
    let mat =
        |t: &TensorPtr, i: [usize; 3]| rows_along.mat(t.row([0, i[0], i[1], i[2]]), t.ty, t.nb);
    for u in units {
        let (batch, rows, cols) = split.unit(u, m, ncols);
        let (ai, bi) = batch_index(a, b, batch);
        let out = gemm::Out {
            ptr: d.row([0, bi[0], bi[1], bi[2]]) as *mut f32,
            ld: d.nb[1] / 4,
        };
        // SAFETY: the operands' rows and the result as the caller guarantees; the units of
        // the threads are disjoint rectangles; `isa()` chose a path this CPU runs.
        unsafe {
            gemm::gemm(
                &kern,
                &mat(a, ai),
                &mat(b, bi),
                k,
                round,
                &out,
                rows,
                cols,
                scratch,
            )
        };
    }
}

/// Row `row` of `t` as f32: borrowed when `may_borrow` and it already is packed, aligned f32,
/// else converted into `out` (with the `half` crate's slice conversion for packed F16, which
/// uses F16C where the CPU has it).
///
/// # Safety
/// `row` must be a row of `t` and `out.len() == t.ne[0]`; with `may_borrow`, nothing may
/// write the row while the returned slice lives.
pub(super) unsafe fn row_f32<'a>(
    t: &TensorPtr,
    row: *const u8,
    out: &'a mut [f32],
    may_borrow: bool,
) -> &'a [f32] {
    let n = out.len();
    let packed = t.rows_packed();
    match t.ty {
        Type::F32 if may_borrow && packed && row as usize % std::mem::align_of::<f32>() == 0 => {
            // SAFETY: a packed, aligned f32 row of n elements, not written during this node.
            return unsafe { std::slice::from_raw_parts(row as *const f32, n) };
        }
        Type::F16 if packed && row as usize % std::mem::align_of::<f16>() == 0 => {
            // SAFETY: as above, for f16.
            let src = unsafe { std::slice::from_raw_parts(row as *const f16, n) };
            gemm::widen_f16(src, out);
        }
        q if q.is_quantized() => {
            // SAFETY: forwarded from the caller; rows of quantized tensors are packed blocks.
            unsafe { dequantize_into(t, row, out) };
        }
        Type::BF16 if packed => {
            for (i, v) in out.iter_mut().enumerate() {
                // SAFETY: element i < n of a packed bf16 row.
                *v =
                    bf16_to_f32(unsafe { (row.add(2 * i) as *const crate::bf16).read_unaligned() });
            }
        }
        _ => {
            for (i, v) in out.iter_mut().enumerate() {
                // SAFETY: forwarded from the caller.
                *v = unsafe { t.get(row, i) };
            }
        }
    }
    out
}

/// Sums the lanes pairwise (a fixed order).
#[inline(always)]
fn reduce(acc: [f32; LANES]) -> f32 {
    let h: [f32; 4] = std::array::from_fn(|l| acc[l] + acc[l + 4]);
    (h[0] + h[2]) + (h[1] + h[3])
}

/// The products of the elements past the last whole chunk of [`LANES`].
#[inline(always)]
fn tail_dot(a: &[f32], b: &[f32]) -> f32 {
    let t = a.len() / LANES * LANES;
    a[t..].iter().zip(&b[t..]).map(|(x, y)| x * y).sum()
}

/// Dot product with [`LANES`] partial sums (auto-vectorised).
pub(super) fn dot_portable(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; LANES];
    for (x, y) in a.chunks_exact(LANES).zip(b.chunks_exact(LANES)) {
        for l in 0..LANES {
            acc[l] += x[l] * y[l];
        }
    }
    reduce(acc) + tail_dot(a, b)
}

/// `out[t] = dot(a, bs[t])`, one row at a time.
fn dots_portable(a: &[f32], bs: &[&[f32]], out: &mut [f32]) {
    for (o, b) in out.iter_mut().zip(bs) {
        *o = dot_portable(a, b);
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    //! The block dot products with AVX2 and FMA intrinsics: four rows of `b` per pass over
    //! `a`, two independent accumulators per row (16 elements per step).
    use super::{reduce, tail_dot, LANES};
    use std::arch::x86_64::*;

    /// The lanes of `v`, reduced as the portable path reduces them.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn hsum(v: __m256) -> f32 {
        let mut lanes = [0f32; LANES];
        // SAFETY: `lanes` has room for eight f32.
        unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), v) };
        reduce(lanes)
    }

    /// Bytes ahead along each row of `a` that [`tile`] prefetches into L1 (matrix-vector
    /// products read each weight once, from L3 or memory): one cache line per row and step.
    const PREFETCH: usize = 2048;

    /// `out[r * C + c] = dot(a[r], bs[c])` for `RA` rows of `a` and `C` rows of `bs` in one
    /// pass, every output in the same order whatever `RA` and `C` (two accumulators of 8
    /// lanes over steps of 16, one more step of 8 into the first, their sum reduced by
    /// [`reduce`], plus [`tail_dot`]); several rows of `a` at once keep several weight
    /// streams in flight, and each row is prefetched [`PREFETCH`] bytes ahead.
    ///
    /// # Safety
    /// The CPU must have AVX2 and FMA; `a` must hold `RA` rows and `bs` `C` rows, all of
    /// the length of `a[0]`, and `out` `RA * C` values.
    #[inline(always)]
    unsafe fn tile<const RA: usize, const C: usize>(a: &[&[f32]], bs: &[&[f32]], out: &mut [f32]) {
        let k = a[0].len();
        let n16 = k / 16 * 16;
        let n8 = k / 8 * 8;
        let pa: [*const f32; RA] = std::array::from_fn(|r| a[r].as_ptr());
        let pb: [*const f32; C] = std::array::from_fn(|c| bs[c].as_ptr());
        let mut acc = [[[_mm256_setzero_ps(); 2]; C]; RA];
        let mut i = 0;
        // SAFETY: i + 16 <= k (resp. i + 8 <= k) and every row has k elements; a prefetch
        // never faults, whatever the address (it is never dereferenced).
        unsafe {
            while i < n16 {
                for r in 0..RA {
                    let ahead = pa[r].wrapping_add(i + PREFETCH / 4) as *const i8;
                    _mm_prefetch::<_MM_HINT_T0>(ahead);
                    let x0 = _mm256_loadu_ps(pa[r].add(i));
                    let x1 = _mm256_loadu_ps(pa[r].add(i + 8));
                    for c in 0..C {
                        let [s0, s1] = &mut acc[r][c];
                        *s0 = _mm256_fmadd_ps(x0, _mm256_loadu_ps(pb[c].add(i)), *s0);
                        *s1 = _mm256_fmadd_ps(x1, _mm256_loadu_ps(pb[c].add(i + 8)), *s1);
                    }
                }
                i += 16;
            }
            if i < n8 {
                for r in 0..RA {
                    let x0 = _mm256_loadu_ps(pa[r].add(i));
                    for c in 0..C {
                        let s0 = &mut acc[r][c][0];
                        *s0 = _mm256_fmadd_ps(x0, _mm256_loadu_ps(pb[c].add(i)), *s0);
                    }
                }
            }
            for r in 0..RA {
                for c in 0..C {
                    let v = _mm256_add_ps(acc[r][c][0], acc[r][c][1]);
                    out[r * C + c] = hsum(v) + tail_dot(a[r], bs[c]);
                }
            }
        }
    }

    /// `out[t] = dot(a, bs[t])`, up to four rows of `bs` per pass over `a`.
    ///
    /// # Safety
    /// The CPU must have AVX2 and FMA; every row of `bs` must be as long as `a`, and `out` as
    /// long as `bs`.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn dots(a: &[f32], bs: &[&[f32]], out: &mut [f32]) {
        let mut t = 0;
        while t < bs.len() {
            let rows = (bs.len() - t).min(4);
            let (b, o) = (&bs[t..t + rows], &mut out[t..t + rows]);
            // SAFETY: `rows` rows of `bs` and values of `out` from t on; forwarded otherwise.
            unsafe {
                match rows {
                    4 => tile::<1, 4>(&[a], b, o),
                    3 => tile::<1, 3>(&[a], b, o),
                    2 => tile::<1, 2>(&[a], b, o),
                    _ => tile::<1, 1>(&[a], b, o),
                }
            }
            t += rows;
        }
    }

    /// `out[r * bs.len() + t] = dot(a[r], bs[t])`: [`tile`]s of four rows of `a` against one
    /// row of `bs`, or two against two or three, where `a` and `bs` hold that many; else row
    /// by row as [`dots`]. Every output has the bits [`dots`] gives it.
    ///
    /// # Safety
    /// The CPU must have AVX2 and FMA; every row of `a` and `bs` as long as `a[0]`, `out`
    /// `a.len() * bs.len()` values.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn block_dots(a: &[&[f32]], bs: &[&[f32]], out: &mut [f32]) {
        // SAFETY: forwarded from the caller.
        unsafe {
            match (a.len(), bs.len()) {
                (4, 1) => tile::<4, 1>(a, bs, out),
                (2, 2) => tile::<2, 2>(a, bs, out),
                (2, 3) => tile::<2, 3>(a, bs, out),
                (_, nj) => {
                    for (row, o) in a.iter().zip(out.chunks_exact_mut(nj.max(1))) {
                        dots(row, bs, o);
                    }
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
fn dots_avx2_fma(a: &[f32], bs: &[&[f32]], out: &mut [f32]) {
    assert!(out.len() == bs.len() && bs.iter().all(|b| b.len() == a.len()));
    // SAFETY: only chosen by `dots_fn` after detecting AVX2 and FMA; lengths checked above.
    unsafe { avx2::dots(a, bs, out) }
}

#[cfg(target_arch = "x86_64")]
fn block_dots_avx2_fma(a: &[&[f32]], bs: &[&[f32]], out: &mut [f32]) {
    let k = a.first().map_or(0, |r| r.len());
    assert!(out.len() == a.len() * bs.len());
    assert!(a.iter().chain(bs).all(|r| r.len() == k));
    // SAFETY: only chosen by `block_dots_fn` after detecting AVX2 and FMA; lengths checked.
    unsafe { avx2::block_dots(a, bs, out) }
}

/// `out[r * bs.len() + t] = dot(a[r], bs[t])`, row by row.
fn block_dots_portable(a: &[&[f32]], bs: &[&[f32]], out: &mut [f32]) {
    for (row, o) in a.iter().zip(out.chunks_exact_mut(bs.len().max(1))) {
        dots_portable(row, bs, o);
    }
}

/// A block-dot routine: `out[t] = dot(a, bs[t])`.
pub(super) type DotsFn = fn(&[f32], &[&[f32]], &mut [f32]);

/// A block-dot routine over several rows of `a`: `out[r * bs.len() + t] = dot(a[r], bs[t])`,
/// each output with the bits the matching [`DotsFn`] gives it.
type BlockDotsFn = fn(&[&[f32]], &[&[f32]], &mut [f32]);

/// The block-dot routine over several rows of `a` matching [`dots_fn`].
fn block_dots_fn() -> BlockDotsFn {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        return block_dots_avx2_fma;
    }
    block_dots_portable
}

/// Rows of `a` per pass in [`mul_mat`] against `nj` rows of `b`, when the rows of `a` can be
/// borrowed (packed, aligned F32): the shapes of the AVX2 path's tiles (four rows for a
/// matrix-vector product, so that four weight streams are read at once).
fn rows_per_pass(nj: usize) -> usize {
    match nj {
        1 => 4,
        2 | 3 => 2,
        _ => 1,
    }
}

/// The fastest block-dot routine this CPU runs.
pub(super) fn dots_fn() -> DotsFn {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        return dots_avx2_fma;
    }
    dots_portable
}

/// `out[t] = dot(row arow of a, bs[t])` for a block `bs` of f32 rows of `a.ne0` elements: the
/// row converted (or borrowed) as MUL_MAT does, dotted with the fastest routine this CPU runs
/// (MUL_MAT_ID's entry into these routines).
///
/// # Safety
/// `arow` must be a row of `a`, `abuf.len() == a.ne[0]` and `out.len() == bs.len()`; with
/// `may_borrow`, nothing may write the row while this runs.
pub(super) unsafe fn row_dots(
    a: &TensorPtr,
    arow: *const u8,
    abuf: &mut [f32],
    may_borrow: bool,
    bs: &[&[f32]],
    out: &mut [f32],
) {
    // SAFETY: forwarded from the caller.
    let x = unsafe { row_f32(a, arow, abuf, may_borrow) };
    dots_fn()(x, bs, out);
}

/// The batches of `b` (its dimensions past the second, multiplied).
pub(super) fn batch_count(b: &TensorPtr) -> usize {
    b.ne[2..].iter().product::<i64>() as usize
}

/// The batch indices of `a` and of `b` for batch `batch` of `b`, `a` broadcast over `b`.
pub(super) fn batch_index(a: &TensorPtr, b: &TensorPtr, batch: usize) -> ([usize; 3], [usize; 3]) {
    let bi = [
        batch % b.ne[2] as usize,
        batch / b.ne[2] as usize % b.ne[3] as usize,
        batch / (b.ne[2] * b.ne[3]) as usize,
    ];
    let ratio: [usize; 3] = std::array::from_fn(|i| (b.ne[i + 2] / a.ne[i + 2]) as usize);
    (std::array::from_fn(|i| bi[i] / ratio[i]), bi)
}

/// MUL_MAT through the block dot products (see the module's comment): the thread's rows of
/// `a` against [`JB`] rows of `b` at a time.
///
/// # Safety
/// As [`KernelFn`](super::KernelFn), with scratch for `(1 + JB) * ne00` f32 values.
pub(super) unsafe fn mul_mat(n: &NodePtrs, p: &Params) {
    let (d, a, b) = (&n.dst, &n.src[0], &n.src[1]);
    let dots = block_dots_fn();
    // An operand the result overlaps (a result placed over it by hand) is copied row by row
    // instead of borrowed, so no slice over it lives while the result is written.
    let (borrow_a, borrow_b) = (!d.overlaps(a), !d.overlaps(b));
    // packed, aligned F32 weights are borrowed, several rows at a time
    let a_aligned = a.data as usize % 4 == 0 && a.nb[1..].iter().all(|nb| nb % 4 == 0);
    let multi = a.ty == Type::F32 && borrow_a && a.rows_packed() && a_aligned;
    let k = a.ne[0] as usize;
    // SAFETY: the plan sized each thread's scratch for (1 + JB) * ne00 f32 values.
    let scratch = unsafe { p.scratch_f32((1 + JB) * k) };
    let (abuf, bbuf) = scratch.split_at_mut(k);
    let nb1 = b.ne[1] as usize;
    let mut out = [0f32; MAX_ROWS * JB];
    let round = gemm::Round::for_weights(a.ty);
    // chunks of whole passes of rows of a × one block of b of one batch, claimed from the
    // node's counter, so that a thread that runs late takes fewer of them
    let m = a.ne[1] as usize;
    let col_blocks = nb1.div_ceil(JB);
    let blocks = batch_count(b) * col_blocks;
    let chunk_rows =
        super::matmul_quant::rows_per_chunk(m, blocks, p.nth).next_multiple_of(MAX_ROWS);
    let row_chunks = m.div_ceil(chunk_rows);
    for c in p.chunks(row_chunks * blocks) {
        let (rc, blk) = (c % row_chunks, c / row_chunks);
        let (j0, batch) = (blk % col_blocks * JB, blk / col_blocks);
        let rows = rc * chunk_rows..m.min((rc + 1) * chunk_rows);
        let (ai, bi) = batch_index(a, b, batch);
        let nj = JB.min(nb1 - j0);
        let mut block: [&[f32]; JB] = [&[]; JB];
        for ((t, slot), buf) in block
            .iter_mut()
            .enumerate()
            .take(nj)
            .zip(bbuf.chunks_exact_mut(k.max(1)))
        {
            let row = b.row([j0 + t, bi[0], bi[1], bi[2]]);
            // SAFETY: j0 + t < b.ne[1]; bi is within b's batch dimensions; buf holds ne00.
            *slot = if round == gemm::Round::F32 {
                unsafe { row_f32(b, row, &mut buf[..k], borrow_b) }
            } else {
                // rounded to the weights' dot type, as the GEMM and GGML do
                unsafe { row_f32(b, row, &mut buf[..k], false) };
                round.slice(&mut buf[..k]);
                let buf: &[f32] = buf;
                &buf[..k]
            };
        }
        let per_pass = if multi { rows_per_pass(nj) } else { 1 };
        let mut i = rows.start;
        while i < rows.end {
            // a whole pass, else the last rows one at a time
            let nr = if rows.end - i >= per_pass {
                per_pass
            } else {
                1
            };
            let mut arows: [&[f32]; MAX_ROWS] = [&[]; MAX_ROWS];
            let arow = |r: usize| a.row([r, ai[0], ai[1], ai[2]]);
            if multi {
                for (t, slot) in arows.iter_mut().enumerate().take(nr) {
                    // SAFETY: i + t < a.ne[1], ai within a's batch dimensions: a packed,
                    // 4-byte-aligned row of ne00 f32 values, which nothing writes.
                    *slot = unsafe { std::slice::from_raw_parts(arow(i + t) as *const f32, k) };
                }
            } else {
                // SAFETY: i < a.ne[1]; ai within a's batch dimensions; abuf holds ne00.
                arows[0] = unsafe { row_f32(a, arow(i), abuf, borrow_a) };
            }
            dots(&arows[..nr], &block[..nj], &mut out[..nr * nj]);
            for (r, o) in out[..nr * nj].chunks_exact(nj).enumerate() {
                for (t, &v) in o.iter().enumerate() {
                    // SAFETY: dst is [a.ne1, b.ne1, b.ne2, b.ne3, b.ne4]; (i + r, j0 + t,
                    // bi) is in range and only the thread that claimed the chunk writes
                    // it.
                    unsafe { d.set(d.row([j0 + t, bi[0], bi[1], bi[2]]), i + r, v) }
                }
            }
            i += nr;
        }
    }
}

/// The most rows of `a` per pass ([`rows_per_pass`]).
const MAX_ROWS: usize = 4;

#[cfg(test)]
mod tests {
    use super::super::computed_on;
    use super::*;
    use crate::Context;

    /// A generator of values in [-0.5, 0.5).
    fn values(seed: u32) -> impl FnMut() -> f32 {
        let mut state = seed;
        move || {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (state >> 8) as f32 / (1u32 << 24) as f32 - 0.5
        }
    }

    /// The AVX2 path's order, scalar: two accumulators of 8 lanes over steps of 16 (fused
    /// multiply-adds), one more step of 8 into the first, their sum reduced pairwise, plus
    /// the rest one by one.
    fn fma_model(a: &[f32], b: &[f32]) -> f32 {
        let (n16, n8) = (a.len() / 16 * 16, a.len() / 8 * 8);
        let mut acc = [[0f32; LANES]; 2];
        for i in (0..n16).step_by(16) {
            for (h, s) in acc.iter_mut().enumerate() {
                for (l, s) in s.iter_mut().enumerate() {
                    let e = i + 8 * h + l;
                    *s = a[e].mul_add(b[e], *s);
                }
            }
        }
        if n16 < n8 {
            for (l, s) in acc[0].iter_mut().enumerate() {
                *s = a[n16 + l].mul_add(b[n16 + l], *s);
            }
        }
        reduce(std::array::from_fn(|l| acc[0][l] + acc[1][l])) + tail_dot(a, b)
    }

    /// A scalar model of one dot product's order.
    type Model = fn(&[f32], &[f32]) -> f32;

    /// The model of the block-dot path [`block_dots_fn`] chose (its outputs' bits).
    fn model() -> Model {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            return fma_model;
        }
        dot_portable
    }

    /// The block dots over several rows of `a` (every tile shape and the row-by-row rest)
    /// give each output the bits of its path's scalar model, on every tail length.
    #[test]
    fn block_dots_match_the_model_bit_for_bit() {
        let mut next = values(777);
        let mut paths: Vec<(BlockDotsFn, Model)> = vec![(block_dots_portable, dot_portable)];
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            paths.push((block_dots_avx2_fma, fma_model));
        }
        for k in [0usize, 1, 7, 8, 9, 15, 16, 17, 31, 63, 65, 100, 257, 1000] {
            let rows: Vec<Vec<f32>> = (0..MAX_ROWS + JB)
                .map(|_| (0..k).map(|_| next()).collect())
                .collect();
            let (a, b) = rows.split_at(MAX_ROWS);
            for nr in 1..=MAX_ROWS {
                for nj in 1..=JB {
                    let ar: Vec<&[f32]> = a[..nr].iter().map(|r| r.as_slice()).collect();
                    let bs: Vec<&[f32]> = b[..nj].iter().map(|r| r.as_slice()).collect();
                    for (dots, model) in &paths {
                        let mut out = vec![0f32; nr * nj];
                        dots(&ar, &bs, &mut out);
                        for (idx, o) in out.iter().enumerate() {
                            let want = model(ar[idx / nj], bs[idx % nj]);
                            assert_eq!(o.to_bits(), want.to_bits(), "k {k} {nr}x{nj} #{idx}");
                        }
                    }
                }
            }
        }
    }

    /// MUL_MAT with F32 weights against 1 to 4 columns (the dot products' range), through the graph on 1 and
    /// 2 threads, odd row counts and lengths, batches with `a` broadcast: every output has
    /// the bits of the per-row dot product's model.
    #[test]
    fn f32_matvec_matches_the_row_dot_bit_for_bit() {
        let model = model();
        let mut next = values(4242);
        for (m, k, w, bb) in [
            (37i64, 1001i64, [1i64, 1i64], [1i64, 1i64]),
            (9, 100, [1, 1], [1, 1]),
            (42, 257, [2, 1], [4, 1]),
            (5, 33, [1, 1], [1, 1]),
        ] {
            for n in [1i64, 2, 3, 4] {
                let ctx = Context::init(64 << 20, false).unwrap();
                let a = ctx.new_tensor(Type::F32, &[k, m, w[0], w[1]]).unwrap();
                let av: Vec<f32> = (0..a.nelements()).map(|_| next()).collect();
                a.set_f32(&av).unwrap();
                let b = ctx.new_tensor(Type::F32, &[k, n, bb[0], bb[1]]).unwrap();
                let bv: Vec<f32> = (0..b.nelements()).map(|_| next()).collect();
                b.set_f32(&bv).unwrap();
                let d = ctx.mul_mat(&a, &b).unwrap();
                let graph = ctx.build_forward_expand(&d).unwrap();
                let (m, k, n) = (m as usize, k as usize, n as usize);
                for threads in [1, 2] {
                    let got = computed_on(&graph, &d, threads);
                    for (bi, got) in got.chunks_exact(m * n).enumerate() {
                        let wb = bi / (bb[0] / w[0]) as usize;
                        for j in 0..n {
                            let brow = &bv[(bi * n + j) * k..][..k];
                            for i in 0..m {
                                let want = model(&av[(wb * m + i) * k..][..k], brow);
                                assert_eq!(
                                    got[j * m + i].to_bits(),
                                    want.to_bits(),
                                    "m {m} k {k} n {n} batch {bi} ({i}, {j}) {threads} threads"
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    /// Both block-dot paths (the portable one and, where the CPU has them, AVX2+FMA) agree
    /// with an f64 dot product on every block size and tail length.
    #[test]
    fn dot_paths_agree_with_f64() {
        let mut state = 12345u32;
        let mut next = move || {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (state >> 8) as f32 / (1u32 << 24) as f32 - 0.5
        };
        let mut paths: Vec<DotsFn> = vec![dots_portable];
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            paths.push(dots_avx2_fma);
        }
        for k in [0usize, 1, 7, 8, 9, 31, 64, 257] {
            let a: Vec<f32> = (0..k).map(|_| next()).collect();
            let rows: Vec<Vec<f32>> = (0..JB).map(|_| (0..k).map(|_| next()).collect()).collect();
            for nj in 1..=JB {
                let bs: Vec<&[f32]> = rows[..nj].iter().map(|r| r.as_slice()).collect();
                for dots in &paths {
                    let mut out = vec![0f32; nj];
                    dots(&a, &bs, &mut out);
                    for (o, r) in out.iter().zip(&bs) {
                        let want: f64 = a.iter().zip(*r).map(|(x, y)| *x as f64 * *y as f64).sum();
                        assert!((*o as f64 - want).abs() < 1e-5, "k {k}: {o} vs {want}");
                    }
                }
            }
        }
    }
}
