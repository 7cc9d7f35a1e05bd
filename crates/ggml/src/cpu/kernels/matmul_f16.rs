//! MUL_MAT with F16 weights on the AVX-512 path, in the float order of GGML's CPU backend
//! built for this CPU, and the driver it shares with [`super::matmul_bf16`] (BF16 weights)
//! and with the AVX2 path's tiles of [`super::half_avx2`] (F16 and BF16 weights in the order
//! of GGML built for an AVX2 CPU; see there):
//! `b` is rounded to the weights' type once per node (GGML's dot type for F16 and BF16
//! weights), every output is a sum of products of two such values, and the sums go as
//! GGML's kernels make them. For F16 weights on the AVX-512 path (`b` kept as f16 bits, as
//! GGML keeps it, and widened where it is loaded; the products are exact in f32, so a fused
//! multiply-add rounds as a multiply then an add would):
//!
//! - against two columns of `b` or more per batch, weights with a multiple of 4 rows, and
//!   `b` in F32 or contiguous F16 (where GGML hands the product to llamafile's tinyBLAS):
//!   one accumulator of 16 lanes per output over steps of 16 values, the last `k % 16` as
//!   one masked step, its lanes reduced by [`hsum`](avx512::hsum);
//! - otherwise (matrix-vector products, where GGML's `ggml_vec_dot_f16` runs): four
//!   accumulators of 16 lanes over steps of 64 values, accumulator 0 + 2 and 1 + 3, then
//!   those two, the lanes reduced by [`hsum`](avx512::hsum), and the last `k % 64` products
//!   added one by one in f64, the sum rounded to f32 last.
//!
//! Each output is so computed alone, whatever tile or thread it falls in. The threads round
//! their share of `b`'s rows into the node's shared area (each all of them into its own
//! scratch when there are at most [`PRIVATE_ROWS`]: no barrier), then claim chunks — a block
//! of weight rows × a block of [`COLS`] columns of one batch — from an atomic counter. A
//! chunk goes [`RM`] weight rows at a time: in tinyBLAS's order each against [`RN`] columns
//! in one pass over `k` (every weight row's values loaded once for all columns), in the
//! dot product's order against one column. What differs between F16 and BF16 weights (the
//! rounding of `b`) is a [`HalfWeights`] implementation, what differs between the paths (the
//! two tiles, [`HalfTiles::RN`]) a [`HalfTiles`] one: [`plan`] tries the AVX-512 tiles, then
//! the AVX2 ones.

use std::ops::Range;

use super::half_avx2::F16Avx2;
use super::matmul::{batch_count, batch_index, mul_mat, JB};
use super::vec::f32_to_f16_row;
use super::{st, NodePtrs, Params, Planned, TensorPtr};
use crate::cpu::quant_dot::{isa, Isa};
use crate::tensor::Tensor;
use crate::types::{f16, Type};

/// Rows of `b` (all batches together) up to which every thread rounds all of them itself.
const PRIVATE_ROWS: usize = 4;
/// Weight rows per tile.
pub(super) const RM: usize = 4;
/// Columns of `b` per tile in tinyBLAS's order (4 × 6 accumulators, 4 weight vectors and
/// one of `b` fill 29 of the 32 registers).
pub(super) const RN: usize = 6;
/// Columns of `b` per chunk (the chunk's rows of `b`, 48 × k values, stay in L2 while its
/// weight rows pass).
const COLS: usize = 48;

/// What the driver needs of a weight type whose rows are 16-bit floats (F16, BF16): how `b`
/// is rounded into the node's area.
pub(super) trait HalfWeights {
    /// The weights' type.
    const TY: Type;
    /// One value of `b` in the area, rounded to the weights' type.
    type B: Copy;
    /// Writes row `row` of `b` into `out` (`b.ne[0]` values), rounded to the weights' type.
    ///
    /// # Safety
    /// `row` must be a row of `b`, and nothing may write it meanwhile.
    unsafe fn round_row(b: &TensorPtr, row: *const u8, out: &mut [Self::B]);
}

/// The values of `b` in the area for tiles `T`.
pub(super) type BOf<T> = <<T as HalfTiles>::W as HalfWeights>::B;

/// The two tiles for weights [`HalfTiles::W`] on one CPU path (tinyBLAS's order, the dot
/// product's order, as GGML built for that path makes them), which [`HalfTiles::available`]
/// checks is selected and runs on this CPU.
pub(super) trait HalfTiles {
    /// The weights.
    type W: HalfWeights;
    /// Columns of `b` per tile in tinyBLAS's order (at most [`RN`]).
    const RN: usize;
    /// Whether the selected CPU path is this one and the CPU runs the tiles.
    fn available() -> bool;
    /// `out[t][u] = Σ a[t][l] · b[u][l]` for `l < k` in tinyBLAS's order, asking meanwhile
    /// for the first `k` weights of each row of `next` (if any) into L2.
    ///
    /// # Safety
    /// [`HalfTiles::available`]; `a[t]` must hold `k` weights, `b[u]` `k` values.
    unsafe fn tiny_tile<const R: usize, const C: usize>(
        a: [*const u16; R],
        b: [*const BOf<Self>; C],
        next: Option<[*const u16; R]>,
        k: usize,
        out: &mut [[f32; C]; R],
    );
    /// `out[t] = Σ a[t][l] · b[l]` for `l < k` in GGML's dot product's order.
    ///
    /// # Safety
    /// As [`HalfTiles::tiny_tile`], with one row `b`.
    unsafe fn vec_rows<const R: usize>(
        a: [*const u16; R],
        b: *const BOf<Self>,
        k: usize,
        out: &mut [f32; R],
    );
}

/// `half_tiles!(T: W, RN, available, m)` is `impl HalfTiles for T`: weights `W`, `RN` columns
/// per tinyBLAS tile, available where the expression `available` holds, the tiles the
/// functions `tiny_tile` and `vec_rows` of module `m` (which take the same arguments and need
/// the features `available` checks).
macro_rules! half_tiles {
    ($t:ty: $w:ty, $rn:expr, $available:expr, $m:ident) => {
        impl HalfTiles for $t {
            type W = $w;
            const RN: usize = $rn;

            fn available() -> bool {
                $available
            }

            #[inline(always)]
            unsafe fn tiny_tile<const R: usize, const C: usize>(
                a: [*const u16; R],
                b: [*const BOf<Self>; C],
                next: Option<[*const u16; R]>,
                k: usize,
                out: &mut [[f32; C]; R],
            ) {
                // SAFETY: forwarded from the caller (the path is selected and `available`).
                unsafe { $m::tiny_tile(a, b, next, k, out) }
            }

            #[inline(always)]
            unsafe fn vec_rows<const R: usize>(
                a: [*const u16; R],
                b: *const BOf<Self>,
                k: usize,
                out: &mut [f32; R],
            ) {
                // SAFETY: as above.
                unsafe { $m::vec_rows(a, b, k, out) }
            }
        }
    };
}
pub(super) use half_tiles;

/// F16 weights: `b` as f16 bits (GGML's dot type for them), widened where the tiles load
/// it: half the bytes of f32 values, so that a chunk's columns stay in L2 beside the weight
/// rows streaming past (the same f32 values either way: a widened f16 is exact); on the
/// AVX-512 path, the tiles of [`avx512`].
pub(super) struct F16Weights;

impl HalfWeights for F16Weights {
    const TY: Type = Type::F16;
    type B = u16;

    unsafe fn round_row(b: &TensorPtr, row: *const u8, out: &mut [u16]) {
        let packed = b.rows_packed();
        if packed && b.ty == Type::F16 {
            // SAFETY: a packed row of out.len() f16 values (any alignment: bytes copied).
            unsafe {
                std::ptr::copy_nonoverlapping(row, out.as_mut_ptr() as *mut u8, 2 * out.len())
            };
        } else if packed && b.ty == Type::F32 {
            // SAFETY: a packed row of out.len() f32 values (any alignment), not written
            // meanwhile; out has room for as many f16 values.
            unsafe { f32_to_f16_row(row, out.as_mut_ptr() as *mut u8, out.len()) };
        } else {
            for (i, v) in out.iter_mut().enumerate() {
                // SAFETY: forwarded from the caller (element i of the row).
                *v = f16::from_f32(unsafe { b.get(row, i) }).to_bits();
            }
        }
    }
}

half_tiles!(F16Weights: Self, RN, isa() == Isa::Avx512, avx512);

/// Whose order the outputs of a node follow (see the module documentation).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Order {
    /// GGML's dot product's (`ggml_vec_dot_f16`, `ggml_vec_dot_bf16`).
    VecDot,
    /// tinyBLAS's.
    Tiny,
}

/// The order of a product of `m` weight rows with `cols` columns of `b` per batch; `b_dot`
/// tells whether `b` already is of the weights' type and `b_contiguous` whether it is
/// contiguous (GGML hands such a `b` to tinyBLAS only if it is contiguous, and never
/// converts it).
pub(super) fn order(m: usize, cols: usize, b_dot: bool, b_contiguous: bool) -> Order {
    if cols >= 2 && m % RM == 0 && (!b_dot || b_contiguous) {
        Order::Tiny
    } else {
        Order::VecDot
    }
}

/// Whether a tensor of element size `ts` with shape `ne` and strides `nb` is contiguous
/// (dimensions of size 1 aside, as GGML counts it).
fn contiguous(ts: usize, ne: &[i64], nb: &[usize]) -> bool {
    let mut next = ts;
    for (&n, &s) in ne.iter().zip(nb) {
        if n != 1 {
            if s != next {
                return false;
            }
            next = s * n as usize;
        }
    }
    true
}

/// The plan of MUL_MAT node `t` (weights `a`, activations `b`) through this module, where it
/// applies: F16 weights with packed rows, the AVX-512 or the AVX2 path, a result with packed
/// f32 rows.
pub(super) fn plan(t: &Tensor, a: &Tensor, b: &Tensor) -> Option<Planned> {
    plan_for::<F16Weights>(t, a, b).or_else(|| plan_for::<F16Avx2>(t, a, b))
}

/// The plan of MUL_MAT node `t` through the driver with tiles `T`, where it applies: weights
/// of `T::W`'s type with packed rows, `T`'s path selected (and its features), a result with
/// packed f32 rows. The scratch also holds what [`mul_mat`] needs, which the kernel falls
/// back to when the result overlaps an operand.
pub(super) fn plan_for<T: HalfTiles>(t: &Tensor, a: &Tensor, b: &Tensor) -> Option<Planned> {
    if a.ty() != T::W::TY || !T::available() {
        return None;
    }
    if a.nb()[0] != 2 || t.nb()[0] != 4 {
        return None;
    }
    let k = a.ne()[0] as usize;
    let b_rows = b.ne()[1..].iter().product::<i64>() as usize;
    let fallback = (1 + JB) * k * 4;
    let rows_bytes = b_rows * k * size_of::<BOf<T>>();
    Some(if b_rows <= PRIVATE_ROWS {
        Planned::new(mul_mat_half::<T, false>, rows_bytes.max(fallback))
    } else {
        Planned::new(mul_mat_half::<T, true>, fallback).with_shared(rows_bytes, 1)
    })
}

/// Weight rows per chunk: as quantized MUL_MAT's chunks, in whole tiles.
fn rows_per_chunk(m: usize, blocks: usize, nth: usize) -> usize {
    super::matmul_quant::rows_per_chunk(m, blocks, nth).next_multiple_of(RM)
}

/// The kernel ([`plan_for`] gave it its scratch and shared area): `b` rounded into the
/// shared area when `SHARED`, else by every thread into its scratch.
///
/// # Safety
/// As [`KernelFn`](super::KernelFn), with the plan [`plan_for`] made for the node.
unsafe fn mul_mat_half<T: HalfTiles, const SHARED: bool>(n: &NodePtrs, p: &Params) {
    let (d, a, b) = (&n.dst, &n.src[0], &n.src[1]);
    if d.overlaps(a) || d.overlaps(b) {
        // SAFETY: forwarded; the plan reserved the dot path's scratch too (and no thread
        // passes the barrier the plan declared: at most that many are allowed).
        return unsafe { mul_mat(n, p) };
    }
    let k = a.ne[0] as usize;
    let (m, cols, batches) = (a.ne[1] as usize, b.ne[1] as usize, batch_count(b));
    let b_rows = cols * batches;
    let bytes = b_rows * k * size_of::<BOf<T>>();
    let base = if SHARED {
        p.shared_ptr(bytes) as *mut BOf<T>
    } else {
        // SAFETY: the plan sized the scratch for b_rows rows of k values.
        unsafe { p.scratch_f32(bytes.div_ceil(4)) }.as_mut_ptr() as *mut BOf<T>
    };
    let mine = if SHARED { p.range(b_rows) } else { 0..b_rows };
    // Phase 0: this thread's rows of b, rounded. Every read of b ends before any write of
    // the result (shared: before the barrier), which overlaps neither operand.
    for r in mine {
        let (j, batch) = (r % cols, r / cols);
        let (_, bi) = batch_index(a, b, batch);
        // SAFETY: row r of the area (b_rows rows of k values, at most 4-byte aligned
        // values, and the area is 4-byte aligned), which only this thread touches before
        // the barrier.
        let out = unsafe { std::slice::from_raw_parts_mut(base.add(r * k), k) };
        // SAFETY: j < b.ne[1], bi within b's batch dimensions; nothing writes b.
        unsafe { T::W::round_row(b, b.row([j, bi[0], bi[1], bi[2]]), out) };
    }
    if SHARED {
        p.sync();
    }

    let b_dot = b.ty == T::W::TY;
    let ord = order(m, cols, b_dot, contiguous(2, &b.ne, &b.nb));
    let col_blocks = cols.div_ceil(COLS);
    let rows = rows_per_chunk(m, col_blocks * batches, p.nth);
    let row_blocks = m.div_ceil(rows);
    for c in p.chunks(row_blocks * col_blocks * batches) {
        let (rb, rest) = (c % row_blocks, c / row_blocks);
        let (cb, batch) = (rest % col_blocks, rest / col_blocks);
        let (ai, bi) = batch_index(a, b, batch);
        let arow = |i: usize| a.row([i, ai[0], ai[1], ai[2]]) as *const u16;
        // SAFETY (of the pointers below): rows of the area, all written before the barrier
        // (or by this thread), only read from here on.
        let brow = |j: usize| unsafe { base.add((batch * cols + j) * k) } as *const BOf<T>;
        let drow = |j: usize| d.row([j, bi[0], bi[1], bi[2]]);
        let (r0, r1) = (rb * rows, m.min((rb + 1) * rows));
        let (c0, c1) = (cb * COLS, cols.min((cb + 1) * COLS));
        let mut i = r0;
        while i < r1 {
            let nr = RM.min(r1 - i);
            match ord {
                Order::Tiny => {
                    let mut j = c0;
                    while j < c1 {
                        let cols = j..c1.min(j + T::RN);
                        // the first column tile asks for the next weight tile into L2, which
                        // then arrives while the other column tiles reuse this one
                        let next = (j == c0 && i + 2 * RM <= m).then_some(i + RM);
                        j = cols.end;
                        // SAFETY: the path T's tiles need (plan); rows i..i + RM of a (m is
                        // a multiple of RM in this order) and the columns of the area hold k
                        // values; the result rows are packed f32 with m values, written only
                        // by the thread that claimed the chunk; `next` is a tile of a.
                        unsafe { tiny::<T>((arow, i, next), brow, drow, cols, k) };
                    }
                }
                Order::VecDot => {
                    for j in c0..c1 {
                        // SAFETY: as above, rows i..i + nr.
                        unsafe { vec_dot::<T>(arow, brow(j), drow(j), i, nr, k) };
                    }
                }
            }
            i += nr;
        }
    }
}

/// Results `(i..i + RM) × cols` in tinyBLAS's order, where `(arow, i, next)` gives the
/// weight rows, the tile's first row and the first row of the tile to prefetch into L2
/// (none when `None`).
///
/// # Safety
/// The CPU must run `T`'s tiles; `arow(i + t)` (and `arow(next + t)`) for `t < RM` must be
/// rows of `k` weights, `brow(j)` for `j` in `cols` rows of `k` values, `drow(j)` writable
/// packed f32 rows of more than `i + RM - 1` values; `cols` holds 1 to `T::RN` columns.
#[inline(always)]
unsafe fn tiny<T: HalfTiles>(
    (arow, i, next): (impl Fn(usize) -> *const u16, usize, Option<usize>),
    brow: impl Fn(usize) -> *const BOf<T>,
    drow: impl Fn(usize) -> *mut u8,
    cols: Range<usize>,
    k: usize,
) {
    let (j, nc) = (cols.start, cols.len());
    let ws: [*const u16; RM] = std::array::from_fn(|t| arow(i + t));
    let next: Option<[*const u16; RM]> = next.map(|n| std::array::from_fn(|t| arow(n + t)));
    let mut out = [[0f32; RN]; RM];
    macro_rules! go {
        ($c:literal) => {{
            let bs: [*const BOf<T>; $c] = std::array::from_fn(|u| brow(j + u));
            let mut o = [[0f32; $c]; RM];
            // SAFETY: forwarded from the caller.
            unsafe { T::tiny_tile::<RM, $c>(ws, bs, next, k, &mut o) };
            for (dst, src) in out.iter_mut().zip(&o) {
                dst[..$c].copy_from_slice(src);
            }
        }};
    }
    match nc {
        6 => go!(6),
        5 => go!(5),
        4 => go!(4),
        3 => go!(3),
        2 => go!(2),
        _ => go!(1),
    }
    for (t, row) in out.iter().enumerate() {
        for (u, &v) in row.iter().enumerate().take(nc) {
            // SAFETY: forwarded from the caller.
            unsafe { st(drow(j + u), i + t, v) };
        }
    }
}

/// Results `(i..i + nr) × j` in GGML's dot product's order, `bj` being column `j`'s row of
/// the area and `dj` its result row.
///
/// # Safety
/// As [`tiny`], for `nr` (1..=[`RM`]) weight rows and one column.
#[inline(always)]
unsafe fn vec_dot<T: HalfTiles>(
    arow: impl Fn(usize) -> *const u16,
    bj: *const BOf<T>,
    dj: *mut u8,
    i: usize,
    nr: usize,
    k: usize,
) {
    if nr == RM {
        let ws: [*const u16; RM] = std::array::from_fn(|t| arow(i + t));
        let mut o = [0f32; RM];
        // SAFETY: forwarded from the caller.
        unsafe { T::vec_rows::<RM>(ws, bj, k, &mut o) };
        for (t, &v) in o.iter().enumerate() {
            // SAFETY: forwarded from the caller.
            unsafe { st(dj, i + t, v) };
        }
    } else {
        for t in 0..nr {
            let mut o = [0f32; 1];
            // SAFETY: forwarded from the caller.
            unsafe { T::vec_rows::<1>([arow(i + t)], bj, k, &mut o) };
            // SAFETY: forwarded from the caller.
            unsafe { st(dj, i + t, o[0]) };
        }
    }
}

/// Defines `tiny_tile`, a tile in tinyBLAS's order for F16 and BF16 weights alike, with the
/// attributes given (docs, `#[target_feature]`): `R × C` accumulators of f32 lanes (each
/// `$zero`) over steps of `$step` values of the shared dimension `k`, the vectors of step `l` being
/// `$load_a(a[t] + l)` and `$load_b(b[u] + l)`, each added by `acc = $madd(acc, va, vb)`; the
/// last `k % $step` values as one step of `$part_a(a[t] + l, k - l)` and `$part_b(…)` (which
/// must give zeros past them); then `out[t][u]` = the lanes of each accumulator reduced by
/// the `hsum` in scope where the macro is used. `b` holds values of type `$b`. Where `next`
/// holds `R` rows, each cache line of them is asked for into L2 at the step that reads the
/// same line of `a` (one line per 32 values). The loads and products are closures written
/// inside the function, so that they take its target features and are inlined.
macro_rules! tiny_tile_fn {
    ($(#[$attr:meta])* $b:ty, $zero:expr, $step:expr, $load_a:expr, $load_b:expr,
     $part_a:expr, $part_b:expr, $madd:expr) => {
        $(#[$attr])*
        pub(super) unsafe fn tiny_tile<const R: usize, const C: usize>(
            a: [*const u16; R],
            b: [*const $b; C],
            next: Option<[*const u16; R]>,
            k: usize,
            out: &mut [[f32; C]; R],
        ) {
            let (load_a, load_b, part_a, part_b, madd) =
                ($load_a, $load_b, $part_a, $part_b, $madd);
            let mut acc = [[$zero; C]; R];
            let whole = k / $step * $step;
            let mut l = 0;
            // SAFETY: l + $step <= k in the loop, the partial loads read only the k - l
            // values left, and the caller vouches for k values in every row.
            unsafe {
                while l < whole {
                    if let (Some(next), 0) = (next, l % 32) {
                        for row in next {
                            // a hint, valid for any address (never dereferenced)
                            let at = row.wrapping_add(l) as *const i8;
                            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T1 }>(
                                at,
                            );
                        }
                    }
                    // the smaller side's vectors held, the other's loaded one by one: R·C
                    // accumulators + min(R, C) + 1 vectors (16 for AVX2's 4 × 3 tile; holding
                    // the 4 weight vectors took 17, and three accumulators went through the
                    // stack every step); each accumulator's sum is the same either way
                    if C <= R {
                        let bv: [_; C] = std::array::from_fn(|u| load_b(b[u].add(l)));
                        for t in 0..R {
                            let av = load_a(a[t].add(l));
                            for u in 0..C {
                                acc[t][u] = madd(acc[t][u], av, bv[u]);
                            }
                        }
                    } else {
                        let av: [_; R] = std::array::from_fn(|t| load_a(a[t].add(l)));
                        for u in 0..C {
                            let bv = load_b(b[u].add(l));
                            for t in 0..R {
                                acc[t][u] = madd(acc[t][u], av[t], bv);
                            }
                        }
                    }
                    l += $step;
                }
                if l < k {
                    let av: [_; R] = std::array::from_fn(|t| part_a(a[t].add(l), k - l));
                    for u in 0..C {
                        let bv = part_b(b[u].add(l), k - l);
                        for t in 0..R {
                            acc[t][u] = madd(acc[t][u], av[t], bv);
                        }
                    }
                }
                for t in 0..R {
                    for u in 0..C {
                        out[t][u] = hsum(acc[t][u]);
                    }
                }
            }
        }
    };
}
pub(super) use tiny_tile_fn;

#[allow(clippy::incompatible_msrv)]
pub(super) mod avx512 {
    //! The tiles with AVX-512 intrinsics (stable since Rust 1.89, above the workspace's
    //! declared 1.85, as in `quant_dot::x86`).
    use crate::types::f16;
    use std::arch::x86_64::*;

    /// Bytes ahead along each weight row that [`prefetch`] fetches into L1 (matrix-vector
    /// products read each weight once, from L3 or memory): two cache lines per row and step.
    const PREFETCH: usize = 2048;

    /// Prefetches into L1, [`PREFETCH`] bytes ahead of element `l` of each row of 16-bit
    /// weights in `rows`, the two cache lines a step of 64 values reads there.
    #[inline(always)]
    pub(in super::super) fn prefetch<const R: usize>(rows: [*const u16; R], l: usize) {
        for row in rows {
            // a hint, valid for any address (never dereferenced)
            let ahead = row.wrapping_add(l + PREFETCH / 2) as *const i8;
            // SAFETY: a prefetch never faults, whatever the address.
            unsafe {
                _mm_prefetch::<_MM_HINT_T0>(ahead);
                _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(64));
            }
        }
    }

    /// The 16 lanes of `v` summed as GCC's `_mm512_reduce_add_ps` sums them (GGML's build):
    /// the upper 8 lanes onto the lower, then the upper 4 of those, then lanes 2 and 3 onto
    /// 0 and 1, then lane 1 onto lane 0.
    #[inline(always)]
    pub(in super::super) unsafe fn hsum(v: __m512) -> f32 {
        // SAFETY: register operations; the caller has AVX-512 F.
        unsafe {
            let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v)));
            let h8 = _mm256_add_ps(_mm512_castps512_ps256(v), hi);
            let h4 = _mm_add_ps(_mm256_castps256_ps128(h8), _mm256_extractf128_ps::<1>(h8));
            let h2 = _mm_add_ps(h4, _mm_movehl_ps(h4, h4));
            _mm_cvtss_f32(_mm_add_ss(h2, _mm_movehdup_ps(h2)))
        }
    }

    /// Sixteen f16 values at `p`, widened.
    ///
    /// # Safety
    /// 32 readable bytes at `p`; the caller has AVX-512 F.
    #[inline(always)]
    unsafe fn load16(p: *const u16) -> __m512 {
        // SAFETY: forwarded.
        unsafe { _mm512_cvtph_ps(_mm256_loadu_si256(p as *const __m256i)) }
    }

    /// The first `n` (< 16) f16 values at `p`, widened, zeros after them (masked-off
    /// elements are neither read nor faulted on).
    ///
    /// # Safety
    /// `2 · n` readable bytes at `p`; the caller has AVX-512 F and BW.
    #[inline(always)]
    unsafe fn part16(p: *const u16, n: usize) -> __m512 {
        let mask: __mmask16 = (1u16 << n) - 1;
        // SAFETY: forwarded (the masked load reads only the n values).
        unsafe { _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, p as *const i16)) }
    }

    tiny_tile_fn!(
        /// `out[t][u] = Σ a[t][l] · b[u][l]` for `l < k` in tinyBLAS's order: one
        /// accumulator of 16 lanes per output, steps of 16, the rest as one masked step
        /// (masked-off elements are neither read nor faulted on), [`hsum`].
        ///
        /// # Safety
        /// The CPU must have AVX-512 F, BW and VL; every row must hold `k` f16 values.
        #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl")]
        u16,
        _mm512_setzero_ps(),
        16,
        |p: *const u16| load16(p),
        |p: *const u16| load16(p),
        |p: *const u16, n: usize| part16(p, n),
        |p: *const u16, n: usize| part16(p, n),
        |c: __m512, x: __m512, y: __m512| _mm512_fmadd_ps(x, y, c)
    );

    /// `out[t] = Σ a[t][l] · b[l]` for `l < k` in `ggml_vec_dot_f16`'s order: four
    /// accumulators of 16 lanes over steps of 64, reduced (0 + 2) + (1 + 3), [`hsum`], then
    /// the last `k % 64` products one by one in f64.
    ///
    /// # Safety
    /// As [`tiny_tile`], with one row `b` of `k` f16 values.
    // (the indices name registers of a fixed tile, as in GGML's loops)
    #[allow(clippy::needless_range_loop)]
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl")]
    pub(super) unsafe fn vec_rows<const R: usize>(
        a: [*const u16; R],
        b: *const u16,
        k: usize,
        out: &mut [f32; R],
    ) {
        let mut acc = [[_mm512_setzero_ps(); 4]; R];
        let np = k / 64 * 64;
        let mut l = 0;
        // SAFETY: l + 64 <= np <= k in the loop, and every row holds k values.
        unsafe {
            while l < np {
                prefetch(a, l);
                for q in 0..4 {
                    let bv = load16(b.add(l + 16 * q));
                    for t in 0..R {
                        acc[t][q] = _mm512_fmadd_ps(load16(a[t].add(l + 16 * q)), bv, acc[t][q]);
                    }
                }
                l += 64;
            }
            for t in 0..R {
                let [s0, s1, s2, s3] = acc[t];
                let s = _mm512_add_ps(_mm512_add_ps(s0, s2), _mm512_add_ps(s1, s3));
                let mut sum = hsum(s) as f64;
                for e in np..k {
                    let x = f16::from_bits(a[t].add(e).read_unaligned()).to_f32();
                    let y = f16::from_bits(b.add(e).read_unaligned()).to_f32();
                    sum += (x * y) as f64;
                }
                out[t] = sum as f32;
            }
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::types::f16;

    /// Pseudo-random values in [-1, 1) from a fixed seed.
    pub(in super::super) fn uniform() -> impl FnMut() -> f32 {
        let mut state = 987_654_321u32;
        move || {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (state >> 8) as f32 / (1u32 << 23) as f32 - 1.0
        }
    }

    /// A tile's operands of `k` values from `next`: [`RM`] rows of F16 weights (in ±3) and
    /// [`RN`] rows of `b` rounded to f16 (as the bits the tiles take).
    pub(in super::super) fn f16_operands(
        k: usize,
        next: &mut impl FnMut() -> f32,
    ) -> (Vec<Vec<f16>>, Vec<Vec<u16>>) {
        let a = (0..RM)
            .map(|_| (0..k).map(|_| f16::from_f32(next() * 3.0)).collect())
            .collect();
        let b = (0..RN)
            .map(|_| (0..k).map(|_| f16::from_f32(next()).to_bits()).collect())
            .collect();
        (a, b)
    }

    /// f16 bits widened.
    pub(in super::super) fn wide_f16_bits(b: &[u16]) -> Vec<f32> {
        b.iter().map(|&x| f16::from_bits(x).to_f32()).collect()
    }

    /// The order follows GGML's choice of kernel.
    #[test]
    fn order_as_ggml_chooses() {
        assert_eq!(order(4096, 1, false, true), Order::VecDot);
        assert_eq!(order(4096, 2, false, false), Order::Tiny);
        assert_eq!(order(4098, 32, false, true), Order::VecDot);
        assert_eq!(order(64, 8, true, true), Order::Tiny);
        assert_eq!(order(64, 8, true, false), Order::VecDot);
        assert!(contiguous(2, &[8, 1, 3], &[2, 100, 16]));
        assert!(!contiguous(2, &[8, 2, 3], &[2, 32, 64]));
    }

    /// Chunks of whole tiles, at most 128 rows.
    #[test]
    fn chunk_rows_are_whole_tiles() {
        assert_eq!(rows_per_chunk(4096, 1, 2), 128);
        assert_eq!(rows_per_chunk(100, 1, 2), 16);
        assert_eq!(rows_per_chunk(1000, 1, 1), 128);
        assert_eq!(rows_per_chunk(400, 1, 2) % RM, 0);
    }

    /// GCC's `_mm512_reduce_add_ps` on 16 lanes, one scalar add at a time.
    pub(in super::super) fn hsum_model(l: &[f32; 16]) -> f32 {
        let h8: [f32; 8] = std::array::from_fn(|i| l[i] + l[i + 8]);
        let h4: [f32; 4] = std::array::from_fn(|i| h8[i] + h8[i + 4]);
        (h4[0] + h4[2]) + (h4[1] + h4[3])
    }

    /// tinyBLAS's sum, scalar: lane `l % 16` takes product `l`; a masked last step adds
    /// 0 · 0 to the lanes it does not cover.
    fn tiny_model(a: &[f16], b: &[u16]) -> f32 {
        let mut acc = [0f32; 16];
        for (l, (x, y)) in a.iter().zip(&wide_f16_bits(b)).enumerate() {
            acc[l % 16] = x.to_f32().mul_add(*y, acc[l % 16]);
        }
        if a.len() % 16 != 0 {
            for lane in acc.iter_mut().skip(a.len() % 16) {
                *lane = 0f32.mul_add(0.0, *lane);
            }
        }
        hsum_model(&acc)
    }

    /// `ggml_vec_dot_f16`'s sum, scalar.
    fn vec_model(a: &[f16], b: &[u16]) -> f32 {
        let b = wide_f16_bits(b);
        let np = a.len() / 64 * 64;
        let mut acc = [[0f32; 16]; 4];
        for l in 0..np {
            let (q, lane) = (l / 16 % 4, l % 16);
            acc[q][lane] = a[l].to_f32().mul_add(b[l], acc[q][lane]);
        }
        let s: [f32; 16] =
            std::array::from_fn(|i| (acc[0][i] + acc[2][i]) + (acc[1][i] + acc[3][i]));
        let mut sum = hsum_model(&s) as f64;
        for l in np..a.len() {
            sum += (a[l].to_f32() * b[l]) as f64;
        }
        sum as f32
    }

    /// `T`'s tiles give the [`RM`] weight rows `a` and [`RN`] rows `b` (of the same length)
    /// the bits of the models: `tiny_model` for tinyBLAS's order, `vec_model` for the dot
    /// product's against `b[3]`; each tile shape alike (the 1 × 1 tile and single rows too).
    ///
    /// # Safety
    /// `T`'s tiles must run on this CPU.
    pub(in super::super) unsafe fn check_tiles<T: HalfTiles, A>(
        a: &[Vec<A>],
        b: &[Vec<BOf<T>>],
        tiny_model: fn(&[A], &[BOf<T>]) -> f32,
        vec_model: fn(&[A], &[BOf<T>]) -> f32,
    ) {
        assert_eq!(size_of::<A>(), 2, "16-bit weights");
        let k = b[0].len();
        let ap: [*const u16; RM] = std::array::from_fn(|t| a[t].as_ptr() as *const u16);
        let bp: [*const BOf<T>; RN] = std::array::from_fn(|u| b[u].as_ptr());
        let tiny = |t: usize, u: usize| tiny_model(&a[t], &b[u]);
        let vec = |t: usize| vec_model(&a[t], &b[3]);
        let mut o = [[0f32; RN]; RM];
        let mut o1 = [[0f32; 1]; 1];
        let mut v = [0f32; RM];
        // SAFETY: forwarded from the caller.
        unsafe {
            T::tiny_tile::<RM, RN>(ap, bp, None, k, &mut o);
            T::tiny_tile::<1, 1>([ap[1]], [bp[2]], None, k, &mut o1);
            T::vec_rows::<RM>(ap, bp[3], k, &mut v);
        }
        assert_eq!(o1[0][0].to_bits(), o[1][2].to_bits(), "k {k}");
        for (t, (row, &vt)) in o.iter().zip(&v).enumerate() {
            for (u, x) in row.iter().enumerate() {
                assert_eq!(x.to_bits(), tiny(t, u).to_bits(), "k {k} ({t}, {u})");
            }
            let mut v1 = [0f32; 1];
            // SAFETY: forwarded from the caller.
            unsafe { T::vec_rows::<1>([ap[t]], bp[3], k, &mut v1) };
            assert_eq!(vt.to_bits(), vec(t).to_bits(), "k {k} row {t}");
            assert_eq!(v1[0].to_bits(), vec(t).to_bits(), "k {k} row {t} alone");
        }
    }

    /// Both tiles give every output the scalar model's bits, for every tile shape and tail
    /// length (where the CPU runs the AVX-512 path).
    #[test]
    fn tiles_follow_ggml_order_bit_for_bit() {
        if !Isa::Avx512.available() {
            return;
        }
        let mut next = uniform();
        for k in [0usize, 1, 15, 16, 17, 63, 64, 65, 100, 257, 1000] {
            let (a, b) = f16_operands(k, &mut next);
            // SAFETY: the CPU runs the tiles; every row holds k values.
            unsafe { check_tiles::<F16Weights, _>(&a, &b, tiny_model, vec_model) };
        }
    }
}
