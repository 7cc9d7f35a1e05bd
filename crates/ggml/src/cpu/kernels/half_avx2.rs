//! MUL_MAT with F16 or BF16 weights on the AVX2 path (AVX2, FMA, F16C), in the float order
//! of GGML's CPU backend built for such a CPU (no AVX-512): the tiles the driver of
//! [`matmul_f16`](super::matmul_f16) runs there. `b` is rounded to the weights' type as on the
//! AVX-512 path; every product of two F16 or two BF16 values is exact in f32 (subnormal ones
//! included: nothing is flushed on this path), so a fused multiply-add rounds as a multiply
//! then an add would. The sums go as GGML's kernels for AVX2 make them:
//!
//! - against two columns of `b` or more (the cases [`order`](super::matmul_f16::order) gives
//!   to llamafile's tinyBLAS, which on AVX2 takes F16 and BF16 weights alike as
//!   `tinyBLAS<8, __m256, __m256, …>`): one accumulator of 8 lanes per output over steps of 8
//!   values (both operands widened to f32, `vfmadd`), the last `k % 8` as one step of
//!   zero-padded loads, the lanes reduced by tinyBLAS's `hsum` ([`hsum`]);
//! - otherwise (matrix-vector products): four accumulators of 8 lanes over steps of 32 values
//!   (values `8q..8q + 8` of a step into accumulator `q`), accumulator 0 + 2 and 1 + 3, then
//!   those two; the lanes reduced as `ggml_vec_dot_f16`'s `GGML_F32x8_REDUCE` does for F16
//!   (the two halves, then two `hadd`s) and as `ggml_vec_dot_bf16`'s own AVX2 code does for
//!   BF16 ([`hsum`]'s order, added to a zero f64 sum; its multiply and add are contracted
//!   to a fused multiply-add by GCC in GGML's build); then the last `k % 32` products (in
//!   f32) added one by one in f64, the sum rounded to f32 last.
//!
//! AVX2 has 16 vector registers: a tinyBLAS tile is 4 weight rows × [`BF16_RN`] columns for
//! BF16 (12 accumulators, 3 vectors of `b`, one weight vector) and × [`F16_RN`] for F16; a
//! dot-product tile takes two weight rows at a time (8 accumulators). The tile's shape does
//! not change any output: each is one accumulator's sum in tinyBLAS's order.

use super::matmul_bf16::Bf16Weights;
use super::matmul_f16::{half_tiles, BOf, F16Weights, HalfTiles};
use crate::cpu::quant_dot::{isa, Isa};
use std::arch::x86_64::*;

/// Columns of `b` per BF16 tile (tinyBLAS's own for 16 registers).
const BF16_RN: usize = 3;

/// Columns of `b` per F16 tile: two, where tinyBLAS takes three. With three, LLVM keeps one of
/// the twelve accumulators on the stack (its F16 conversions want a register more than the
/// sixteen), a store-to-load chain every step. Measured (session 12, AMD EPYC Zen 5,
/// `GGML_CPU_FORCE=avx2`, 4096² × 32, 1 thread, interleaved, loaded): 81–90 GFLOP/s against
/// 47–52 with three (GGML's AVX2 build: 95 idle); BF16, widened by shifts, is faster with
/// three (68–74 against 44–66 with two).
const F16_RN: usize = 2;

/// F16 weights on the AVX2 path: the tiles of [`f16_tiles`].
pub(super) struct F16Avx2;

half_tiles!(F16Avx2: F16Weights, F16_RN, isa() == Isa::Avx2, f16_tiles);

/// BF16 weights on the AVX2 path: the tiles of [`bf16_tiles`].
pub(super) struct Bf16Avx2;

half_tiles!(Bf16Avx2: Bf16Weights, BF16_RN, isa() == Isa::Avx2, bf16_tiles);

/// The 8 lanes of `v` summed as tinyBLAS's `hsum(__m256)` (and `ggml_vec_dot_bf16` on AVX2)
/// sums them: the upper 4 lanes onto the lower, then lanes 2 and 3 onto 0 and 1, then lane 1
/// onto lane 0.
///
/// # Safety
/// The caller has AVX.
#[inline(always)]
unsafe fn hsum(v: __m256) -> f32 {
    // SAFETY: register operations; the caller has AVX.
    unsafe {
        let h4 = _mm_add_ps(_mm256_extractf128_ps::<1>(v), _mm256_castps256_ps128(v));
        let h2 = _mm_add_ps(h4, _mm_movehl_ps(h4, h4));
        _mm_cvtss_f32(_mm_add_ss(h2, _mm_movehdup_ps(h2)))
    }
}

/// The first `n` (< 8) 16-bit values at `p`, zeros after them (only those `n` are read).
///
/// # Safety
/// `2 · n` readable bytes at `p`; the caller has SSE2.
#[inline(always)]
unsafe fn part16(p: *const u16, n: usize) -> __m128i {
    let mut buf = [0u16; 8];
    // SAFETY: n < 8 values read at p (forwarded), written into the local buffer.
    unsafe {
        std::ptr::copy_nonoverlapping(p, buf.as_mut_ptr(), n);
        _mm_loadu_si128(buf.as_ptr() as *const __m128i)
    }
}

/// Eight bf16 values (`v`'s 16-bit lanes) widened to f32.
///
/// # Safety
/// The caller has AVX2.
#[inline(always)]
unsafe fn widen_bf16(v: __m128i) -> __m256 {
    // SAFETY: register operations; the caller has AVX2.
    unsafe { _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(v))) }
}

/// Eight 16-bit values at `p`.
///
/// # Safety
/// 16 readable bytes at `p`; the caller has SSE2.
#[inline(always)]
unsafe fn load8(p: *const u16) -> __m128i {
    // SAFETY: forwarded.
    unsafe { _mm_loadu_si128(p as *const __m128i) }
}

/// Defines `vec_rows`, the dot product's order for F16 and BF16 weights alike (see the
/// module documentation), with the attributes given: per pair of weight rows, four
/// accumulators of 8 lanes each over steps of 32 values, the vectors of `b` being
/// `$load_b(b + l)` and of a row `$load_a(row + l)`; the four accumulators reduced to an f64
/// sum by `$reduce`, then the last `k % 32` products, each `$tail(row + e, b + e)` (an f32),
/// added one by one in f64. An odd last row is paired with itself. The loads are closures
/// written inside the function, so that they take its target features and are inlined.
macro_rules! vec_rows_fn {
    ($(#[$attr:meta])* $b:ty, $load_a:expr, $load_b:expr, $reduce:expr, $tail:expr) => {
        $(#[$attr])*
        // (the indices name registers of a fixed tile, as in GGML's loops)
        #[allow(clippy::needless_range_loop)]
        pub(super) unsafe fn vec_rows<const R: usize>(
            a: [*const u16; R],
            b: *const $b,
            k: usize,
            out: &mut [f32; R],
        ) {
            let (load_a, load_b, reduce, tail) = ($load_a, $load_b, $reduce, $tail);
            let np = k / 32 * 32;
            for t in (0..R).step_by(2) {
                let rows = [a[t], a[(t + 1).min(R - 1)]];
                let mut acc = [[_mm256_setzero_ps(); 4]; 2];
                let mut l = 0;
                // SAFETY: l + 32 <= np <= k in the loop, and every row holds k values.
                unsafe {
                    while l < np {
                        if l % 64 == 0 {
                            prefetch(rows, l);
                        }
                        for q in 0..4 {
                            let bv = load_b(b.add(l + 8 * q));
                            for r in 0..2 {
                                let av = load_a(rows[r].add(l + 8 * q));
                                acc[r][q] = _mm256_fmadd_ps(av, bv, acc[r][q]);
                            }
                        }
                        l += 32;
                    }
                    for r in 0..2.min(R - t) {
                        let mut sum: f64 = reduce(acc[r]);
                        for e in np..k {
                            let p: f32 = tail(rows[r].add(e), b.add(e));
                            sum += p as f64;
                        }
                        out[t + r] = sum as f32;
                    }
                }
            }
        }
    };
}

/// `(s0 + s2) + (s1 + s3)`, the first step of both dot products' reductions.
///
/// # Safety
/// The caller has AVX.
#[inline(always)]
unsafe fn fold4(s: [__m256; 4]) -> __m256 {
    // SAFETY: register operations; the caller has AVX.
    unsafe { _mm256_add_ps(_mm256_add_ps(s[0], s[2]), _mm256_add_ps(s[1], s[3])) }
}

mod f16_tiles {
    //! The tiles for F16 weights (`b` as f16 bits), both operands widened to f32.
    use super::super::matmul_f16::avx512::prefetch;
    use super::super::matmul_f16::tiny_tile_fn;
    use super::{fold4, hsum, load8, part16};
    use crate::types::f16;
    use std::arch::x86_64::*;

    tiny_tile_fn!(
        /// `out[t][u] = Σ a[t][l] · b[u][l]` for `l < k` in tinyBLAS's order: one
        /// accumulator of 8 lanes per output, steps of 8, the rest as one zero-padded step,
        /// [`hsum`].
        ///
        /// # Safety
        /// The CPU must have AVX2, FMA and F16C; every row must hold `k` f16 values.
        #[target_feature(enable = "avx2,fma,f16c")]
        u16,
        _mm256_setzero_ps(),
        8,
        |p: *const u16| _mm256_cvtph_ps(load8(p)),
        |p: *const u16| _mm256_cvtph_ps(load8(p)),
        |p: *const u16, n: usize| _mm256_cvtph_ps(part16(p, n)),
        |p: *const u16, n: usize| _mm256_cvtph_ps(part16(p, n)),
        |c: __m256, x: __m256, y: __m256| _mm256_fmadd_ps(x, y, c)
    );

    vec_rows_fn!(
        /// `out[t] = Σ a[t][l] · b[l]` for `l < k` in `ggml_vec_dot_f16`'s order for AVX2:
        /// four accumulators of 8 lanes over steps of 32, reduced (0 + 2) + (1 + 3), then
        /// the halves added and two horizontal adds (`GGML_F32x8_REDUCE`), then the last
        /// `k % 32` products one by one in f64.
        ///
        /// # Safety
        /// As [`tiny_tile`], with one row `b` of `k` f16 values.
        #[target_feature(enable = "avx2,fma,f16c")]
        u16,
        |p: *const u16| _mm256_cvtph_ps(load8(p)),
        |p: *const u16| _mm256_cvtph_ps(load8(p)),
        |s: [__m256; 4]| {
            let v = fold4(s);
            let h4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
            let h2 = _mm_hadd_ps(h4, h4);
            _mm_cvtss_f32(_mm_hadd_ps(h2, h2)) as f64
        },
        |x: *const u16, y: *const u16| {
            f16::from_bits(x.read_unaligned()).to_f32() * f16::from_bits(y.read_unaligned()).to_f32()
        }
    );
}

mod bf16_tiles {
    //! The tiles for BF16 weights (`b` as bf16 bits), both operands widened to f32.
    use super::super::matmul_f16::avx512::prefetch;
    use super::super::matmul_f16::tiny_tile_fn;
    use super::{fold4, hsum, load8, part16, widen_bf16};
    use std::arch::x86_64::*;

    /// The bf16 value at `p` widened to f32.
    ///
    /// # Safety
    /// 2 readable bytes at `p`.
    #[inline(always)]
    unsafe fn widen(p: *const u16) -> f32 {
        // SAFETY: forwarded.
        f32::from_bits((unsafe { p.read_unaligned() } as u32) << 16)
    }

    tiny_tile_fn!(
        /// `out[t][u] = Σ a[t][l] · b[u][l]` for `l < k` in tinyBLAS's order: one
        /// accumulator of 8 lanes per output, steps of 8, the rest as one zero-padded step,
        /// [`hsum`].
        ///
        /// # Safety
        /// The CPU must have AVX2 and FMA; every row must hold `k` bf16 values.
        #[target_feature(enable = "avx2,fma,f16c")]
        u16,
        _mm256_setzero_ps(),
        8,
        |p: *const u16| widen_bf16(load8(p)),
        |p: *const u16| widen_bf16(load8(p)),
        |p: *const u16, n: usize| widen_bf16(part16(p, n)),
        |p: *const u16, n: usize| widen_bf16(part16(p, n)),
        |c: __m256, x: __m256, y: __m256| _mm256_fmadd_ps(x, y, c)
    );

    vec_rows_fn!(
        /// `out[t] = Σ a[t][l] · b[l]` for `l < k` in `ggml_vec_dot_bf16`'s order for AVX2:
        /// four accumulators of 8 lanes over steps of 32, reduced (0 + 2) + (1 + 3), then
        /// [`hsum`] added to a zero f64 sum, then the last `k % 32` products one by one in
        /// f64.
        ///
        /// # Safety
        /// As [`tiny_tile`], with one row `b` of `k` bf16 values.
        #[target_feature(enable = "avx2,fma,f16c")]
        u16,
        |p: *const u16| widen_bf16(load8(p)),
        |p: *const u16| widen_bf16(load8(p)),
        |s: [__m256; 4]| 0f64 + hsum(fold4(s)) as f64,
        |x: *const u16, y: *const u16| widen(x) * widen(y)
    );
}

#[cfg(test)]
mod tests {
    use super::super::matmul_bf16::tests::values;
    use super::super::matmul_f16::tests::{check_tiles, f16_operands, uniform, wide_f16_bits};
    use super::super::matmul_f16::{RM, RN};
    use super::*;
    use crate::types::f16;

    /// tinyBLAS's `hsum(__m256)` on 8 lanes, one scalar add at a time.
    fn hsum_model(l: &[f32; 8]) -> f32 {
        let h: [f32; 4] = std::array::from_fn(|i| l[i + 4] + l[i]);
        (h[0] + h[2]) + (h[1] + h[3])
    }

    /// tinyBLAS's sum of the widened operands, scalar: lane `l % 8` takes product `l`; a
    /// zero-padded last step adds 0 · 0 to the lanes it does not cover.
    fn tiny_model(a: &[f32], b: &[f32]) -> f32 {
        let mut acc = [0f32; 8];
        for (l, (x, y)) in a.iter().zip(b).enumerate() {
            acc[l % 8] = x.mul_add(*y, acc[l % 8]);
        }
        if a.len() % 8 != 0 {
            for lane in acc.iter_mut().skip(a.len() % 8) {
                *lane = 0f32.mul_add(0.0, *lane);
            }
        }
        hsum_model(&acc)
    }

    /// The dot products' sum of the widened operands, scalar: four accumulators of 8 lanes
    /// over steps of 32, folded (0 + 2) + (1 + 3), reduced by `reduce` to f64, then the
    /// rest in f64.
    fn vec_model(a: &[f32], b: &[f32], reduce: fn(&[f32; 8]) -> f64) -> f32 {
        let np = a.len() / 32 * 32;
        let mut acc = [[0f32; 8]; 4];
        for l in 0..np {
            let (q, lane) = (l / 8 % 4, l % 8);
            acc[q][lane] = a[l].mul_add(b[l], acc[q][lane]);
        }
        let s: [f32; 8] =
            std::array::from_fn(|i| (acc[0][i] + acc[2][i]) + (acc[1][i] + acc[3][i]));
        let mut sum = reduce(&s);
        for l in np..a.len() {
            sum += (a[l] * b[l]) as f64;
        }
        sum as f32
    }

    /// `GGML_F32x8_REDUCE`'s last steps: the halves added, then two horizontal adds.
    fn f16_reduce(s: &[f32; 8]) -> f64 {
        let h: [f32; 4] = std::array::from_fn(|i| s[i] + s[i + 4]);
        ((h[0] + h[1]) + (h[2] + h[3])) as f64
    }

    /// `ggml_vec_dot_bf16`'s on AVX2: [`hsum_model`] added to a zero f64 sum.
    fn bf16_reduce(s: &[f32; 8]) -> f64 {
        0f64 + hsum_model(s) as f64
    }

    /// f16 values widened.
    fn wide_f16(a: &[f16]) -> Vec<f32> {
        a.iter().map(|x| x.to_f32()).collect()
    }

    /// bf16 bits widened.
    fn wide_bf16(a: &[u16]) -> Vec<f32> {
        a.iter()
            .map(|&x| f32::from_bits((x as u32) << 16))
            .collect()
    }

    /// The tail lengths: every remainder of 8 and of 32, several steps.
    const KS: [usize; 15] = [0, 1, 7, 8, 9, 31, 32, 33, 63, 64, 65, 100, 127, 257, 1000];

    /// Both F16 tiles give every output the scalar model's bits, for every tile shape and
    /// tail length.
    #[test]
    fn f16_tiles_follow_ggml_order_bit_for_bit() {
        if !Isa::Avx2.available() {
            return;
        }
        let mut next = uniform();
        for k in KS {
            let (a, b) = f16_operands(k, &mut next);
            // SAFETY: the CPU runs the tiles; every row holds k values.
            unsafe {
                check_tiles::<F16Avx2, _>(
                    &a,
                    &b,
                    |a, b| tiny_model(&wide_f16(a), &wide_f16_bits(b)),
                    |a, b| vec_model(&wide_f16(a), &wide_f16_bits(b), f16_reduce),
                )
            };
        }
    }

    /// Both BF16 tiles give every output the scalar model's bits, for every tile shape and
    /// tail length, with subnormal values and products among them.
    #[test]
    fn bf16_tiles_follow_ggml_order_bit_for_bit() {
        if !Isa::Avx2.available() {
            return;
        }
        let mut next = values(123_456_789);
        for k in KS {
            let a: Vec<Vec<u16>> = (0..RM).map(|_| (0..k).map(|_| next()).collect()).collect();
            let b: Vec<Vec<u16>> = (0..RN).map(|_| (0..k).map(|_| next()).collect()).collect();
            // SAFETY: the CPU runs the tiles; every row holds k values.
            unsafe {
                check_tiles::<Bf16Avx2, _>(
                    &a,
                    &b,
                    |a, b| tiny_model(&wide_bf16(a), &wide_bf16(b)),
                    |a, b| vec_model(&wide_bf16(a), &wide_bf16(b), bf16_reduce),
                )
            };
        }
    }
}
