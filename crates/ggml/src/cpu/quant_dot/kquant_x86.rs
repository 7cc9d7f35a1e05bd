//! AVX2 row dot products of the k-quants (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) against Q8_K
//! activations, straight from the block format: each super-block's 256 levels are unpacked
//! into eight registers of unsigned bytes (0..64) and its 16 group scales into one register of
//! i16, once per super-block however many activation rows it is dotted with; per activation
//! row, `maddubs` gives the pair sums of levels × activations, `madd` with the group scales
//! eight i32 sums, and the groups' offsets and minimums come from one `madd` of per-group
//! weights with Q8_K's `bsums`:
//!
//! `dot = yd · (d · Σ scale·level·y + c · Σ w_g·bsum_g)`, with `(w, c)` = (minimums, −dmin)
//! for the types with a minimum and (scales, −offset·d) for the ones with a level offset.
//!
//! The integer sums are exact; the f32 steps per super-block are [`combine`]'s: for Q4_K and
//! Q6_K those of GGML's AVX2 `ggml_vec_dot_q4_K_q8_K` / `ggml_vec_dot_q6_K_q8_K` (the same
//! eight integer lanes, scaled and accumulated lane by lane, added at the end as its
//! `hsum_float_8`), so these dots give GGML's x86 bits; the other k-quants keep this crate's
//! order, which differs from GGML's and the portable path's by f32 rounding.

use std::arch::x86_64::*;

use super::kquant_avx512::{ZUnpack, Zmm};
use super::x86::half;
use super::x86::hsum;
use super::x86::{prefetch, PREFETCH_BYTES, PREFETCH_TILES, TILE_ROWS};
use crate::quants::{BlockQ2K, BlockQ3K, BlockQ4K, BlockQ5K, BlockQ6K, BlockQ8K, PackedF16};
use crate::QK_K;

/// One super-block unpacked for [`dot_decoded`].
pub(super) struct Unpacked {
    /// Levels 32c..32c + 32 in register c, as unsigned bytes up to [`KUnpack::MAX_LEVEL`].
    pub(super) levels: [__m256i; 8],
    /// The 16 group scales as i16: the even groups in the low 128-bit lane, the odd ones in
    /// the high lane (so that one in-lane shuffle gives register c the scales of groups 2c and
    /// 2c + 1).
    pub(super) scales: __m256i,
    /// The per-group weights of the activations' group sums (i16, group order).
    pub(super) corr: __m256i,
    /// The super-block scale.
    pub(super) d: f32,
    /// The factor of the correction sum.
    pub(super) corr_d: f32,
}

/// How a type's super-block sums become f32 (see [`combine`]).
#[derive(Clone, Copy, PartialEq, Debug)]
pub(crate) enum Combine {
    /// GGML's Q6_K: the correction folded into the eight integer lanes
    /// (`sumi + factor · corr`), then `acc = fma(yd·d, lane, acc)` lane by lane, the eight
    /// lanes added at the end as GGML's `hsum_float_8`.
    Folded(i32),
    /// GGML's Q4_K: `acc = fma(yd·d, sumi, acc)` in eight lanes and
    /// `acc_m = fma(yd·corr_d, corr pairs, acc_m)` in four (lane j = correction lanes 2j and
    /// 2j + 1 added as integers), then `hsum_float_8(acc) + hsum(acc_m)`.
    Mins4,
    /// This crate's own order (Q2_K, Q3_K, Q5_K; GGML's lanes for them differ):
    /// `acc += fma(yd·d, sumi, (yd·corr_d)·corr)` in eight lanes.
    Own,
    /// GGML's i-quants (no correction): `acc = fma(yd·d, sumi, acc)` in eight lanes, added
    /// at the end as `hsum_float_8` and multiplied by the factor (a power of two).
    Plain(f32),
}

/// A super-block type whose dot against Q8_K the row and tile loops ([`dots_r`], [`tile_r`])
/// take through a [`KDecode`]: how its integer lanes become f32.
pub(super) trait KCombine: bytemuck::Pod {
    /// How the row dots turn the super-block sums into f32.
    const COMBINE: Combine;
}

/// A k-quant super-block that unpacks for the AVX2 dot.
pub(super) trait KUnpack: KCombine {
    /// Whether the group scales come in equal pairs (one scale per 32 values: Q4_K, Q5_K).
    const PAIRED: bool;
    /// The level offset the correction takes off (32 for Q6_K, 4 for Q3_K), or 0 for the
    /// types with minimums instead (the band products' f32 steps differ between the two).
    const LEVEL_OFFSET: i32;
    /// A bound on the levels [`KUnpack::unpack`] gives (2^bits − 1 for the k-quants; below
    /// 64, as [`Ymm`]'s `maddubs` needs, but for the i-quants, which only the band products
    /// unpack so).
    const MAX_LEVEL: u8;
    /// Whether the levels are signed values offset by 128 (the i-quants): the AVX2 band
    /// products take their magnitudes with the activations' signs flipped instead, and need
    /// no correction.
    const SIGNED: bool = false;
    /// Whether every level times its group's scale fits in a byte (Q2_K: 3 · 15), so that the
    /// AVX-512 band products multiply the levels by their scales when they unpack them and
    /// need no multiply per group and column.
    const SCALED_LEVELS: bool = false;
    /// The block unpacked.
    ///
    /// # Safety
    /// The CPU must have AVX2 and F16C.
    unsafe fn unpack(&self) -> Unpacked;
    /// The AVX-512 row and tile dots: these 256-bit kernels compiled for AVX-512 unless the
    /// type has its own 512-bit unpacking ([`super::kquant_avx512`]).
    const AVX512: (super::RowDot, super::TileDot) =
        (k_dots_avx512::<Self, Ymm>, k_tiles_avx512::<Self, Ymm>);
    /// The AVX-512 row and tile dots where the CPU also has VBMI and GFNI, if the type has
    /// its own ([`super::kquant_avx512`]).
    const AVX512_GFNI: Option<(super::RowDot, super::TileDot)> = None;
}

/// [`KUnpack::AVX512_GFNI`] of a type that [`Zmm<true>`](Zmm) unpacks.
const fn zmm_gfni<B: ZUnpack<true>>() -> Option<(super::RowDot, super::TileDot)> {
    Some((
        k_dots_avx512_vbmi::<B, Zmm<true>>,
        k_tiles_avx512_vbmi::<B, Zmm<true>>,
    ))
}

/// How a row dot takes a k-quant super-block: unpacked once ([`KDecode::unpack`]), then
/// dotted with each activation row's Q8_K block ([`KDecode::dot`]). [`dots_r`] and
/// [`tile_r`] loop over the blocks the same way for every implementation.
pub(super) trait KDecode<B> {
    /// The unpacked super-block.
    type Unpacked;
    /// `x` unpacked.
    ///
    /// # Safety
    /// The CPU must have the implementation's features (AVX2 and F16C at least).
    unsafe fn unpack(x: &B) -> Self::Unpacked;
    /// `acc` plus the unpacked super-block `x` dotted with `y`, in [`combine`]'s f32 steps.
    ///
    /// # Safety
    /// The CPU must have the implementation's features (AVX2 and FMA at least).
    unsafe fn dot(x: &Self::Unpacked, y: &BlockQ8K, acc: KAcc) -> KAcc;
    /// `acc[r]` plus `x` dotted with `ys[r]`, for each of `R` activation rows: `x` unpacked
    /// once, then [`KDecode::dot`] row by row (unless an implementation knows better).
    ///
    /// # Safety
    /// As [`KDecode::unpack`] and [`KDecode::dot`].
    #[inline(always)]
    unsafe fn dot_rows<const R: usize>(x: &B, ys: [&BlockQ8K; R], acc: &mut [KAcc; R]) {
        // SAFETY: forwarded from the caller.
        unsafe {
            let u = Self::unpack(x);
            for r in 0..R {
                acc[r] = Self::dot(&u, ys[r], acc[r]);
            }
        }
    }
}

/// The 256-bit k-quant kernels: [`KUnpack::unpack`] and [`dot_decoded`].
pub(super) struct Ymm;

impl<B: KUnpack> KDecode<B> for Ymm {
    type Unpacked = Unpacked;
    #[inline(always)]
    unsafe fn unpack(x: &B) -> Unpacked {
        const {
            assert!(
                B::MAX_LEVEL < 64,
                "maddubs pair sums of larger levels saturate"
            )
        };
        // SAFETY: forwarded from the caller.
        unsafe { x.unpack() }
    }
    #[inline(always)]
    unsafe fn dot(x: &Unpacked, y: &BlockQ8K, acc: KAcc) -> KAcc {
        // SAFETY: forwarded from the caller.
        unsafe { dot_decoded::<B>(x, y, acc) }
    }
}

/// `v` AND a byte mask of `m` in every byte.
#[inline(always)]
unsafe fn and8(v: __m256i, m: u8) -> __m256i {
    // SAFETY: register operations; the caller has AVX2.
    unsafe { _mm256_and_si256(v, _mm256_set1_epi8(m as i8)) }
}

/// The 16-bit lanes of `v` shifted right by `n` bits.
#[inline(always)]
unsafe fn srl16(v: __m256i, n: u32) -> __m256i {
    // SAFETY: register operations; the caller has AVX2.
    unsafe { _mm256_srl_epi16(v, _mm_cvtsi32_si128(n as i32)) }
}

/// In every byte of `v`: the bits `mask` selects after a right shift by `from`, moved up to
/// bit `to` (the high bits of a level).
#[inline(always)]
unsafe fn bits_at(v: __m256i, from: u32, mask: u8, to: u32) -> __m256i {
    // SAFETY: register operations; the caller has AVX2.
    unsafe { _mm256_sll_epi16(and8(srl16(v, from), mask), _mm_cvtsi32_si128(to as i32)) }
}

/// 32 bytes from `p`.
///
/// # Safety
/// 32 readable bytes at `p`; the caller has AVX2.
#[inline(always)]
pub(super) unsafe fn load(p: &[u8]) -> __m256i {
    debug_assert!(p.len() >= 32);
    // SAFETY: forwarded from the caller.
    unsafe { _mm256_loadu_si256(p.as_ptr() as *const __m256i) }
}

/// 16 group scales (bytes, group order) as [`Unpacked::scales`]; `signed` widens them as i8.
#[inline(always)]
pub(super) unsafe fn even_odd(s: __m128i, signed: bool) -> __m256i {
    // SAFETY: register operations; the caller has AVX2.
    unsafe {
        let order = _mm_set_epi8(15, 13, 11, 9, 7, 5, 3, 1, 14, 12, 10, 8, 6, 4, 2, 0);
        let s = _mm_shuffle_epi8(s, order);
        if signed {
            _mm256_cvtepi8_epi16(s)
        } else {
            _mm256_cvtepu8_epi16(s)
        }
    }
}

/// `(scales, minimums)` of Q4_K and Q5_K: the 6-bit values of the 12-byte layout as eight
/// bytes each (little-endian u64), with 32-bit masks instead of a per-byte loop.
#[inline(always)]
fn scales_mins(sc: &[u8; 12]) -> (u64, u64) {
    let w = |i: usize| u32::from_le_bytes([sc[4 * i], sc[4 * i + 1], sc[4 * i + 2], sc[4 * i + 3]]);
    let (u0, u1, u2) = (w(0), w(1), w(2));
    const LOW6: u32 = 0x3f3f_3f3f;
    const LOW4: u32 = 0x0f0f_0f0f;
    const LOW2: u32 = 0x0303_0303;
    // groups 0..4: the low six bits of bytes 0..4 (scales) and 4..8 (minimums); groups 4..8:
    // a nibble of bytes 8..12 and the top two bits of bytes 0..4 (scales) or 4..8 (minimums)
    let scales_hi = (u2 & LOW4) | (((u0 >> 6) & LOW2) << 4);
    let mins_hi = ((u2 >> 4) & LOW4) | (((u1 >> 6) & LOW2) << 4);
    (
        (u0 & LOW6) as u64 | (scales_hi as u64) << 32,
        (u1 & LOW6) as u64 | (mins_hi as u64) << 32,
    )
}

/// Q4_K's and Q5_K's scales and minimums as [`Unpacked`] wants them: each scale of 32 values
/// serves both groups of 16 (so both lanes hold the eight scales), each minimum is repeated
/// for its two groups.
#[inline(always)]
pub(super) unsafe fn scale_min_regs(sc: &[u8; 12]) -> (__m256i, __m256i) {
    let (s, m) = scales_mins(sc);
    // SAFETY: register operations; the caller has AVX2.
    unsafe {
        let s = _mm_set1_epi64x(s as i64);
        let m = _mm_set1_epi64x(m as i64);
        (
            _mm256_cvtepu8_epi16(s),
            _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m, m)),
        )
    }
}

/// Q4_K's and Q5_K's super-block unpacked: levels from the nibbles of `qs` (value 64j + l in
/// the low nibble of byte 32j + l, value 64j + 32 + l in its high nibble), with bit c of
/// `qh`'s byte l as the fifth bit of value 32c + l when there is a `qh`.
///
/// # Safety
/// The CPU must have AVX2 and F16C.
#[inline(always)]
unsafe fn q45_unpack(
    qs: &[u8; 128],
    qh: Option<&[u8; 32]>,
    sc: &[u8; 12],
    d: PackedF16,
    dmin: PackedF16,
) -> Unpacked {
    // SAFETY: the caller has AVX2 and F16C; every load reads 32 bytes of `qs` or all of `qh`.
    unsafe {
        let (scales, corr) = scale_min_regs(sc);
        // not `Option::map`: a closure would not inherit the target features, and the load
        // in it would not be inlined
        #[allow(clippy::manual_map)]
        let qh = match qh {
            Some(h) => Some(load(h)),
            None => None,
        };
        let mut levels = [_mm256_setzero_si256(); 8];
        for j in 0..4 {
            let q = load(&qs[32 * j..]);
            levels[2 * j] = and8(q, 0xf);
            levels[2 * j + 1] = and8(srl16(q, 4), 0xf);
            if let Some(h) = qh {
                let c = 2 * j as u32;
                levels[2 * j] = _mm256_or_si256(levels[2 * j], bits_at(h, c, 1, 4));
                levels[2 * j + 1] = _mm256_or_si256(levels[2 * j + 1], bits_at(h, c + 1, 1, 4));
            }
        }
        Unpacked {
            levels,
            scales,
            corr,
            d: half(d),
            corr_d: -half(dmin),
        }
    }
}

impl KCombine for BlockQ4K {
    const COMBINE: Combine = Combine::Mins4;
}

impl KUnpack for BlockQ4K {
    const PAIRED: bool = true;
    const LEVEL_OFFSET: i32 = 0;
    const MAX_LEVEL: u8 = 15;
    const AVX512: (super::RowDot, super::TileDot) = (
        k_dots_avx512::<Self, Zmm<false>>,
        k_tiles_avx512::<Self, Zmm<false>>,
    );
    const AVX512_GFNI: Option<(super::RowDot, super::TileDot)> = zmm_gfni::<Self>();
    #[inline(always)]
    unsafe fn unpack(&self) -> Unpacked {
        // SAFETY: forwarded from the caller.
        unsafe { q45_unpack(&self.qs, None, &self.scales, self.d, self.dmin) }
    }
}

impl KCombine for BlockQ5K {
    const COMBINE: Combine = Combine::Own;
}

impl KUnpack for BlockQ5K {
    const PAIRED: bool = true;
    const LEVEL_OFFSET: i32 = 0;
    const MAX_LEVEL: u8 = 31;
    const AVX512_GFNI: Option<(super::RowDot, super::TileDot)> = zmm_gfni::<Self>();
    #[inline(always)]
    unsafe fn unpack(&self) -> Unpacked {
        // SAFETY: forwarded from the caller.
        unsafe { q45_unpack(&self.qs, Some(&self.qh), &self.scales, self.d, self.dmin) }
    }
}

impl KCombine for BlockQ6K {
    const COMBINE: Combine = Combine::Folded(-32);
}

impl KUnpack for BlockQ6K {
    const PAIRED: bool = false;
    const LEVEL_OFFSET: i32 = 32;
    const MAX_LEVEL: u8 = 63;
    const AVX512: (super::RowDot, super::TileDot) = (
        k_dots_avx512::<Self, Zmm<false>>,
        k_tiles_avx512::<Self, Zmm<false>>,
    );
    const AVX512_GFNI: Option<(super::RowDot, super::TileDot)> = zmm_gfni::<Self>();
    #[inline(always)]
    unsafe fn unpack(&self) -> Unpacked {
        // SAFETY: the caller has AVX2; loads read 32 bytes inside `ql`, `qh` and the 16 of
        // `scales`.
        unsafe {
            let mut levels = [_mm256_setzero_si256(); 8];
            for n in 0..2 {
                let l0 = load(&self.ql[64 * n..]);
                let l1 = load(&self.ql[64 * n + 32..]);
                let h = load(&self.qh[32 * n..]);
                levels[4 * n] = _mm256_or_si256(and8(l0, 0xf), bits_at(h, 0, 3, 4));
                levels[4 * n + 1] = _mm256_or_si256(and8(l1, 0xf), bits_at(h, 2, 3, 4));
                levels[4 * n + 2] = _mm256_or_si256(and8(srl16(l0, 4), 0xf), bits_at(h, 4, 3, 4));
                levels[4 * n + 3] = _mm256_or_si256(and8(srl16(l1, 4), 0xf), bits_at(h, 6, 3, 4));
            }
            let s = _mm_loadu_si128(self.scales.as_ptr() as *const __m128i);
            let d = half(self.d);
            Unpacked {
                levels,
                scales: even_odd(s, true),
                corr: _mm256_cvtepi8_epi16(s),
                d,
                corr_d: -32.0 * d,
            }
        }
    }
}

impl KCombine for BlockQ2K {
    const COMBINE: Combine = Combine::Own;
}

impl KUnpack for BlockQ2K {
    const PAIRED: bool = false;
    const LEVEL_OFFSET: i32 = 0;
    const MAX_LEVEL: u8 = 3;
    // levels below 4 times four-bit scales
    const SCALED_LEVELS: bool = true;
    const AVX512_GFNI: Option<(super::RowDot, super::TileDot)> = zmm_gfni::<Self>();
    #[inline(always)]
    unsafe fn unpack(&self) -> Unpacked {
        // SAFETY: the caller has AVX2; loads read 32 bytes inside `qs` and the 16 of `scales`.
        unsafe {
            let mut levels = [_mm256_setzero_si256(); 8];
            for n in 0..2 {
                let q = load(&self.qs[32 * n..]);
                for s in 0..4 {
                    levels[4 * n + s] = and8(srl16(q, 2 * s as u32), 3);
                }
            }
            let sm = _mm_loadu_si128(self.scales.as_ptr() as *const __m128i);
            let mask = _mm_set1_epi8(0xf);
            let s = _mm_and_si128(sm, mask);
            let m = _mm_and_si128(_mm_srli_epi16(sm, 4), mask);
            Unpacked {
                levels,
                scales: even_odd(s, false),
                corr: _mm256_cvtepu8_epi16(m),
                d: half(self.d),
                corr_d: -half(self.dmin),
            }
        }
    }
}

/// Q3_K's 16 six-bit scales (minus 32) from their 12-byte layout: the low nibbles of bytes
/// 0..8 (groups 0..8) and their high nibbles (groups 8..16), the top two bits from bytes
/// 8..12, two bits per group, four groups per shift.
#[inline(always)]
unsafe fn q3k_scales(sc: &[u8; 12]) -> __m128i {
    let lo = u64::from_le_bytes([sc[0], sc[1], sc[2], sc[3], sc[4], sc[5], sc[6], sc[7]]);
    let h = u32::from_le_bytes([sc[8], sc[9], sc[10], sc[11]]);
    const LOW4: u32 = 0x0f0f_0f0f;
    const LOW2: u32 = 0x0303_0303;
    let (l0, l1) = (lo as u32, (lo >> 32) as u32);
    let w = [
        (l0 & LOW4) | ((h & LOW2) << 4),
        (l1 & LOW4) | (((h >> 2) & LOW2) << 4),
        ((l0 >> 4) & LOW4) | (((h >> 4) & LOW2) << 4),
        ((l1 >> 4) & LOW4) | (((h >> 6) & LOW2) << 4),
    ];
    // SAFETY: register operations; the caller has AVX2.
    unsafe {
        let v = _mm_set_epi32(w[3] as i32, w[2] as i32, w[1] as i32, w[0] as i32);
        _mm_sub_epi8(v, _mm_set1_epi8(32))
    }
}

impl KCombine for BlockQ3K {
    const COMBINE: Combine = Combine::Own;
}

impl KUnpack for BlockQ3K {
    const PAIRED: bool = false;
    const LEVEL_OFFSET: i32 = 4;
    const MAX_LEVEL: u8 = 7;
    const AVX512_GFNI: Option<(super::RowDot, super::TileDot)> = zmm_gfni::<Self>();
    #[inline(always)]
    unsafe fn unpack(&self) -> Unpacked {
        // SAFETY: the caller has AVX2; loads read 32 bytes inside `qs` and all of `hmask`.
        unsafe {
            let hm = load(&self.hmask);
            let mut levels = [_mm256_setzero_si256(); 8];
            for n in 0..2 {
                let q = load(&self.qs[32 * n..]);
                for s in 0..4 {
                    let c = 4 * n + s;
                    // the level is stored as low + 4·high, so the value is level − 4
                    let high = bits_at(hm, c as u32, 1, 2);
                    levels[c] = _mm256_or_si256(and8(srl16(q, 2 * s as u32), 3), high);
                }
            }
            let s = q3k_scales(&self.scales);
            let d = half(self.d);
            Unpacked {
                levels,
                scales: even_odd(s, true),
                corr: _mm256_cvtepi8_epi16(s),
                d,
                corr_d: -4.0 * d,
            }
        }
    }
}

/// The f32 state of one k-quant dot: eight lanes, and four more for [`Combine::Mins4`].
#[derive(Clone, Copy)]
pub(crate) struct KAcc {
    acc: __m256,
    acc_m: __m128,
}

impl KAcc {
    /// Nothing summed yet.
    ///
    /// # Safety
    /// The CPU must have AVX.
    #[inline(always)]
    pub(crate) unsafe fn zero() -> KAcc {
        // SAFETY: register operations; the caller has AVX.
        unsafe {
            KAcc {
                acc: _mm256_setzero_ps(),
                acc_m: _mm_setzero_ps(),
            }
        }
    }
}

/// One super-block's integer lanes into `a` as type `B` combines them ([`Combine`]): `sumi`
/// lane k holds Σ scale·level·y over values 4k..4k + 4 of every 32 (GGML's `maddubs`/`madd`
/// lanes), `corr` lane k Σ corr·bsum over groups 2k and 2k + 1; `d` and `corr_d` the weight's
/// factors, `yd` the activation's scale. Every kernel of the k-quants (row dots, band
/// products) takes its f32 steps from here.
///
/// # Safety
/// The CPU must have AVX2 and FMA.
#[inline(always)]
pub(crate) unsafe fn combine<B: KCombine>(
    d: f32,
    corr_d: f32,
    yd: f32,
    sumi: __m256i,
    corr: __m256i,
    a: KAcc,
) -> KAcc {
    // SAFETY: register operations; the caller has AVX2 and FMA.
    unsafe {
        match B::COMBINE {
            Combine::Folded(f) => {
                let lanes = _mm256_add_epi32(sumi, _mm256_mullo_epi32(corr, _mm256_set1_epi32(f)));
                let acc = _mm256_fmadd_ps(_mm256_set1_ps(yd * d), _mm256_cvtepi32_ps(lanes), a.acc);
                KAcc { acc, ..a }
            }
            Combine::Mins4 => {
                let acc = _mm256_fmadd_ps(_mm256_set1_ps(yd * d), _mm256_cvtepi32_ps(sumi), a.acc);
                // lanes (0+1, 2+3) of each 128-bit half, then the halves' low pairs together
                let pairs = _mm256_hadd_epi32(corr, corr);
                let four = _mm_unpacklo_epi64(
                    _mm256_castsi256_si128(pairs),
                    _mm256_extracti128_si256::<1>(pairs),
                );
                let m = _mm_set1_ps(yd * corr_d);
                let acc_m = _mm_fmadd_ps(m, _mm_cvtepi32_ps(four), a.acc_m);
                KAcc { acc, acc_m }
            }
            Combine::Plain(_) => {
                let acc = _mm256_fmadd_ps(_mm256_set1_ps(yd * d), _mm256_cvtepi32_ps(sumi), a.acc);
                KAcc { acc, ..a }
            }
            Combine::Own => {
                let part = _mm256_mul_ps(_mm256_set1_ps(corr_d * yd), _mm256_cvtepi32_ps(corr));
                let part = _mm256_fmadd_ps(_mm256_set1_ps(d * yd), _mm256_cvtepi32_ps(sumi), part);
                KAcc {
                    acc: _mm256_add_ps(a.acc, part),
                    ..a
                }
            }
        }
    }
}

/// The dot product from its f32 state, as [`Combine`] says for `B`.
///
/// # Safety
/// The CPU must have AVX.
#[inline(always)]
pub(crate) unsafe fn finish<B: KCombine>(a: KAcc) -> f32 {
    // SAFETY: register operations; the caller has AVX.
    unsafe {
        let s = hsum(a.acc);
        match B::COMBINE {
            Combine::Mins4 => {
                let m = _mm_add_ps(a.acc_m, _mm_movehl_ps(a.acc_m, a.acc_m));
                s + _mm_cvtss_f32(_mm_add_ss(m, _mm_movehdup_ps(m)))
            }
            Combine::Plain(factor) => factor * s,
            Combine::Folded(_) | Combine::Own => s,
        }
    }
}

/// `acc` plus super-block `x` dotted with `y`: the integer lanes, then [`add_block`].
///
/// # Safety
/// The CPU must have AVX2 and FMA.
#[inline(always)]
unsafe fn dot_decoded<B: KUnpack>(x: &Unpacked, y: &BlockQ8K, acc: KAcc) -> KAcc {
    // SAFETY: the caller has AVX2 and FMA; loads read 32 of y's 256 levels each.
    unsafe {
        let mut sumi = _mm256_setzero_si256();
        for (c, &lv) in x.levels.iter().enumerate() {
            let q = _mm256_loadu_si256(y.qs.as_ptr().add(32 * c) as *const __m256i);
            // i16 elements c of each lane: the scales of groups 2c and 2c + 1
            let pick = _mm256_set1_epi16(((2 * c as i16 + 1) << 8) | (2 * c as i16));
            let sc = _mm256_shuffle_epi8(x.scales, pick);
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(_mm256_maddubs_epi16(lv, q), sc));
        }
        add_block::<B>(sumi, x.corr, x.d, x.corr_d, y, acc)
    }
}

/// `acc` plus one super-block from its integer lanes `sumi` (as [`combine`] takes them): the
/// correction lanes from the per-group weights `corr` (as [`Unpacked::corr`]) and `y`'s group
/// sums, then [`combine`] with the weight's factors `d`, `corr_d`.
///
/// # Safety
/// The CPU must have AVX2 and FMA.
#[inline(always)]
pub(super) unsafe fn add_block<B: KUnpack>(
    sumi: __m256i,
    corr: __m256i,
    d: f32,
    corr_d: f32,
    y: &BlockQ8K,
    acc: KAcc,
) -> KAcc {
    // SAFETY: the caller has AVX2 and FMA; the load reads y's 32 bytes of group sums.
    unsafe {
        let bsums = _mm256_loadu_si256(y.bsums.as_ptr() as *const __m256i);
        let corr = _mm256_madd_epi16(corr, bsums);
        combine::<B>(d, corr_d, y.d.get(), sumi, corr, acc)
    }
}

/// `out[r] = dot(w, activation row r)` for `R` rows of `a`, each `stride` bytes: every
/// super-block of `w` unpacked once for all `R`.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C; `a` holds `R` rows of as many Q8_K blocks as `w`
/// has super-blocks, `out` `R` values.
#[inline(always)]
unsafe fn dots_r<B: KCombine, K: KDecode<B>, const R: usize>(
    w: &[B],
    a: &[u8],
    stride: usize,
    out: &mut [f32],
) {
    let ys: [&[BlockQ8K]; R] =
        std::array::from_fn(|r| bytemuck::cast_slice(&a[r * stride..(r + 1) * stride]));
    // SAFETY: forwarded from the caller.
    unsafe {
        let mut acc = [KAcc::zero(); R];
        for (i, x) in w.iter().enumerate() {
            if R == 1 {
                prefetch(x as *const B as *const u8, PREFETCH_BYTES, size_of::<B>());
            }
            K::dot_rows(x, std::array::from_fn(|r| &ys[r][i]), &mut acc);
        }
        for r in 0..R {
            out[r] = finish::<B>(acc[r]);
        }
    }
}

/// The AVX2 k-quant row dots ([`super::RowDot`]): up to four activation rows per pass over
/// the weights.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C; see [`super::RowDot`] for the lengths.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn k_dots_avx2<B: KCombine, K: KDecode<B>>(w: &[u8], a: &[u8], out: &mut [f32]) {
    let wb: &[B] = bytemuck::cast_slice(w);
    let stride = wb.len() * std::mem::size_of::<BlockQ8K>();
    debug_assert_eq!(a.len(), stride * out.len());
    debug_assert_eq!(QK_K, 256);
    by_fours!(a, stride, out, |N, a, o| dots_r::<B, K, N>(
        wb, a, stride, o
    ));
}

/// The k-quant row dots of kernels `K` compiled for AVX-512 (its 32 vector registers hold a
/// super-block's levels and scales beside eight accumulators): up to eight activation rows
/// per pass.
///
/// # Safety
/// The CPU must have [`super::Isa::Avx512`]'s features; see [`super::RowDot`] for the lengths.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(super) unsafe fn k_dots_avx512<B: KCombine, K: KDecode<B>>(
    w: &[u8],
    a: &[u8],
    out: &mut [f32],
) {
    // SAFETY: forwarded.
    unsafe { k_dots_by_eights::<B, K>(w, a, out) }
}

/// The row dots of kernels `K` up to eight activation rows per pass, inlined into a caller
/// whose CPU features they take (32 vector registers).
///
/// # Safety
/// The CPU must have `K`'s features; see [`super::RowDot`] for the lengths.
#[inline(always)]
unsafe fn k_dots_by_eights<B: KCombine, K: KDecode<B>>(w: &[u8], a: &[u8], out: &mut [f32]) {
    let wb: &[B] = bytemuck::cast_slice(w);
    let stride = wb.len() * std::mem::size_of::<BlockQ8K>();
    debug_assert_eq!(a.len(), stride * out.len());
    by_fours!(8; a, stride, out, |N, a, o| dots_r::<B, K, N>(wb, a, stride, o));
}

/// [`k_dots_avx512`] with VBMI and GFNI besides (for kernels that use them:
/// [`super::iquant_vbmi`]).
///
/// # Safety
/// The CPU must have [`super::Isa::Avx512`]'s features, VBMI and GFNI; see
/// [`super::RowDot`] for the lengths.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi,gfni")]
pub(super) unsafe fn k_dots_avx512_vbmi<B: KCombine, K: KDecode<B>>(
    w: &[u8],
    a: &[u8],
    out: &mut [f32],
) {
    // SAFETY: forwarded.
    unsafe { k_dots_by_eights::<B, K>(w, a, out) }
}

/// `out[t][r0 + r] = dot(w[t], activation row r)` for [`TILE_ROWS`] weight rows and `R`
/// activation rows in one pass (token generation's matrix-vector products: one activation
/// row, four streams of weights from memory, and with one activation row the rows
/// [`PREFETCH_TILES`] tiles on prefetched at the same offset, as the 32-value tiles do; from
/// DRAM 1.2-1.5× the row dot's rate, in cache 5-15% below it). Each output takes
/// [`dots_r`]'s steps in its order ([`dot_decoded`] per super-block, then [`finish`]), so it
/// is bit for bit what [`dots_r`] gives it.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C; every row of `w` has as many super-blocks, `a` holds
/// `R` rows of as many Q8_K blocks (`stride` bytes each), every `out[t]` has `r0 + R` values.
#[inline(always)]
unsafe fn tile_r<B: KCombine, K: KDecode<B>, const R: usize>(
    w: [&[B]; TILE_ROWS],
    a: &[u8],
    stride: usize,
    out: &mut [&mut [f32]; TILE_ROWS],
    r0: usize,
) {
    let ys: [&[BlockQ8K]; R] =
        std::array::from_fn(|r| bytemuck::cast_slice(&a[r * stride..(r + 1) * stride]));
    // SAFETY: forwarded from the caller.
    unsafe {
        let mut acc = [[KAcc::zero(); R]; TILE_ROWS];
        let ahead = PREFETCH_TILES * TILE_ROWS * std::mem::size_of_val(w[0]);
        for i in 0..w[0].len() {
            for t in 0..TILE_ROWS {
                let x = &w[t][i];
                if R == 1 {
                    prefetch(x as *const B as *const u8, ahead, size_of::<B>());
                }
                K::dot_rows(x, std::array::from_fn(|r| &ys[r][i]), &mut acc[t]);
            }
        }
        for t in 0..TILE_ROWS {
            for r in 0..R {
                out[t][r0 + r] = finish::<B>(acc[t][r]);
            }
        }
    }
}

/// The k-quants' tile dots ([`super::TileDot`]): [`tile_r`] for one activation row (token
/// generation), else `dots` (the path's row dots) for each weight row, which unpack each
/// super-block once for up to four (AVX2) or eight (AVX-512) activation rows.
///
/// # Safety
/// As [`tile_r`], with `out[t].len()` activation rows in `a`, and `dots` a row dot of a path
/// this CPU runs.
#[inline(always)]
unsafe fn k_tiles<B: KCombine, K: KDecode<B>>(
    w: [&[u8]; TILE_ROWS],
    a: &[u8],
    out: &mut [&mut [f32]; TILE_ROWS],
    dots: super::RowDot,
) {
    if out[0].len() != 1 {
        for (w, o) in w.iter().zip(out.iter_mut()) {
            // SAFETY: forwarded from the caller.
            unsafe { dots(w, a, o) };
        }
        return;
    }
    let wb: [&[B]; TILE_ROWS] = w.map(|r| bytemuck::cast_slice(r));
    let stride = wb[0].len() * std::mem::size_of::<BlockQ8K>();
    debug_assert_eq!(a.len(), stride);
    // SAFETY: forwarded from the caller.
    unsafe { tile_r::<B, K, 1>(wb, a, stride, out, 0) };
}

/// [`k_tiles`] with AVX2.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C; see [`k_tiles`] for the lengths.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn k_tiles_avx2<B: KCombine, K: KDecode<B>>(
    w: [&[u8]; TILE_ROWS],
    a: &[u8],
    out: &mut [&mut [f32]; TILE_ROWS],
) {
    // SAFETY: forwarded.
    unsafe { k_tiles::<B, K>(w, a, out, k_dots_avx2::<B, K>) }
}

/// [`k_tiles`] of kernels `K` compiled for AVX-512 (32 vector registers).
///
/// # Safety
/// The CPU must have [`super::Isa::Avx512`]'s features; see [`k_tiles`] for the lengths.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(super) unsafe fn k_tiles_avx512<B: KCombine, K: KDecode<B>>(
    w: [&[u8]; TILE_ROWS],
    a: &[u8],
    out: &mut [&mut [f32]; TILE_ROWS],
) {
    // SAFETY: forwarded.
    unsafe { k_tiles::<B, K>(w, a, out, k_dots_avx512::<B, K>) }
}

/// [`k_tiles`] of kernels `K` compiled for AVX-512 with VBMI and GFNI.
///
/// # Safety
/// The CPU must have [`super::Isa::Avx512`]'s features, VBMI and GFNI; see [`k_tiles`] for
/// the lengths.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi,gfni")]
pub(super) unsafe fn k_tiles_avx512_vbmi<B: KCombine, K: KDecode<B>>(
    w: [&[u8]; TILE_ROWS],
    a: &[u8],
    out: &mut [&mut [f32]; TILE_ROWS],
) {
    // SAFETY: forwarded.
    unsafe { k_tiles::<B, K>(w, a, out, k_dots_avx512_vbmi::<B, K>) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::quant_dot::tests::values;
    use crate::cpu::quant_dot::{quant_dot, Isa, KBlock};
    use crate::quants::quantize_row_ref;
    use crate::types::Type;

    /// GGML's AVX2 `ggml_vec_dot_q4_K_q8_K` / `ggml_vec_dot_q6_K_q8_K` written out lane by
    /// lane in scalar f32: lane k of a super-block sums values 4k..4k + 4 of every 32 (scale ×
    /// level × y, levels unsigned), Q6_K subtracts 32 · (scale·bsum of groups 2k, 2k + 1) in
    /// integers, each lane is `fma(yd·d, lane, acc)`; Q4_K's minimums go to four lanes
    /// (groups 4j..4j + 4) with `−(yd·dmin)`; the lanes are added as `hsum_float_8`.
    fn ggml_order(x: &[impl KBlock], y: &[BlockQ8K], q6: bool) -> f32 {
        let (mut acc, mut acc_m) = ([0f32; 8], [0f32; 4]);
        for (b, y) in x.iter().zip(y) {
            let dec = b.decode();
            let mut lanes = [0i32; 8];
            for (e, (&l, &q)) in dec.levels.iter().zip(&y.qs).enumerate() {
                lanes[(e % 32) / 4] += dec.scales[e / 16] as i32 * l as i32 * q as i32;
            }
            let yd = y.d.get();
            let bs = |g: usize| y.bsums[g].get() as i32;
            if q6 {
                for (k, lane) in lanes.iter_mut().enumerate() {
                    let (s0, s1) = (dec.scales[2 * k] as i32, dec.scales[2 * k + 1] as i32);
                    *lane -= 32 * (s0 * bs(2 * k) + s1 * bs(2 * k + 1));
                }
            } else {
                for (j, m) in acc_m.iter_mut().enumerate() {
                    let s: i32 = (4 * j..4 * j + 4).map(|g| dec.mins[g] as i32 * bs(g)).sum();
                    *m = (-(yd * dec.dmin)).mul_add(s as f32, *m);
                }
            }
            for (a, &l) in acc.iter_mut().zip(&lanes) {
                *a = (yd * dec.d).mul_add(l as f32, *a);
            }
        }
        let r: Vec<f32> = (0..4).map(|i| acc[i] + acc[i + 4]).collect();
        let s = (r[0] + r[2]) + (r[1] + r[3]);
        if q6 {
            s
        } else {
            s + ((acc_m[0] + acc_m[2]) + (acc_m[1] + acc_m[3]))
        }
    }

    /// The AVX2 and AVX-512 row dots of Q4_K and Q6_K give GGML's bits.
    #[test]
    fn q4k_q6k_row_dots_are_ggml_bit_for_bit() {
        let k = 6 * QK_K;
        for (ty, q6) in [(Type::Q4_K, false), (Type::Q6_K, true)] {
            for seed in 0..20u32 {
                let mut wq = vec![0u8; ty.row_size(k as i64).unwrap()];
                let w = values(k, 7 + seed);
                crate::quants::quantize_chunk(ty, &w, &mut wq, 0, 1, k, None).unwrap();
                let mut xq = vec![0u8; Type::Q8_K.row_size(k as i64).unwrap()];
                quantize_row_ref(Type::Q8_K, &values(k, 300 + seed), &mut xq).unwrap();
                let ys: &[BlockQ8K] = bytemuck::cast_slice(&xq);
                let want = if q6 {
                    ggml_order(bytemuck::cast_slice::<_, BlockQ6K>(&wq), ys, true)
                } else {
                    ggml_order(bytemuck::cast_slice::<_, BlockQ4K>(&wq), ys, false)
                };
                for isa in [Isa::Avx2, Isa::Avx512] {
                    if !isa.available() {
                        continue;
                    }
                    let mut got = [0f32];
                    // SAFETY: the path is available; one row each of k values.
                    unsafe { (quant_dot(ty, isa).unwrap().dot)(&wq, &xq, &mut got) };
                    assert_eq!(
                        got[0].to_bits(),
                        want.to_bits(),
                        "{ty} {isa:?} seed {seed}: {} vs {want}",
                        got[0]
                    );
                }
            }
        }
    }
}
