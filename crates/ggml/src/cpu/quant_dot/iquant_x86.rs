//! IQ4_XS and IQ3_S against Q8_K on x86, through the k-quants' row and tile loops
//! ([`kquant_x86`](super::kquant_x86)): each super-block decodes once into eight registers of
//! signed bytes, one per group of 32 values ([`SignedGroups`]: IQ4_XS's indices looked up in
//! the IQ4_NL table by byte shuffles, IQ3_S's eight grid points per group with their sign
//! bits), however many activation rows it is dotted with; per activation row and group,
//! `maddubs` of the values' magnitudes with the activations carrying the values' signs gives
//! the pair sums, `madd` with the group's scale eight i32 lanes. These are the steps of GGML's
//! AVX2 `ggml_vec_dot_iq4_xs_q8_K` and `ggml_vec_dot_iq3_s_q8_K` (which puts the signs on
//! the activations and multiplies the grid's magnitudes: the same pair sums): lane k sums
//! values 4k..4k + 4 of every group (exact integers: a pair sum is at most 2 · 127 · 128 <
//! 2^15), then `acc = fma(d·yd, lane, acc)` per super-block and `hsum_float_8` at the end
//! ([`Combine::Plain`]), so these dots give GGML's x86 bits.
//!
//! For batches on AVX-512 VNNI the super-block also unpacks as the k-quants' band products
//! take it ([`KUnpack`], `kquant_tile.rs`): the values offset by 128 as unsigned bytes, the
//! level offset taken off through the activations' group sums, as GGML's tiled MUL_MAT does
//! for IQ4_XS and IQ3_S (its codes are the same biased bytes), so those outputs are its bits.

use std::arch::x86_64::*;

use super::kquant_x86::{combine, k_dots_avx512, k_tiles_avx512, Combine, KAcc, KCombine};
use super::kquant_x86::{KDecode, KUnpack, Unpacked};
use super::x86::half;
use crate::quants::{BlockIq3S, BlockIq4Xs, BlockQ8K, PackedF16, IQ3S_GRID, IQ4_NL_VALUES};

/// A super-block of 256 values that decodes to signed bytes with one scale per group of 32,
/// dotted by [`SignedYmm`].
pub(super) trait SignedGroups: KCombine {
    /// Values 32g..32g + 32 as signed bytes in register g.
    ///
    /// # Safety
    /// The CPU must have AVX2.
    unsafe fn values(&self) -> [__m256i; 8];
    /// The eight group scales.
    fn scales(&self) -> [i16; 8];
    /// The super-block scale.
    fn d(&self) -> PackedF16;
}

impl KCombine for BlockIq4Xs {
    const COMBINE: Combine = Combine::Plain;
}

impl SignedGroups for BlockIq4Xs {
    #[inline(always)]
    unsafe fn values(&self) -> [__m256i; 8] {
        // SAFETY: forwarded from the caller.
        unsafe { group_values(self) }
    }
    #[inline(always)]
    fn scales(&self) -> [i16; 8] {
        self.group_scales()
    }
    #[inline(always)]
    fn d(&self) -> PackedF16 {
        self.d
    }
}

impl KCombine for BlockIq3S {
    const COMBINE: Combine = Combine::Plain;
}

impl SignedGroups for BlockIq3S {
    #[inline(always)]
    unsafe fn values(&self) -> [__m256i; 8] {
        // SAFETY: forwarded from the caller.
        unsafe { iq3s_values(self) }
    }
    #[inline(always)]
    fn scales(&self) -> [i16; 8] {
        self.group_scales()
    }
    #[inline(always)]
    fn d(&self) -> PackedF16 {
        self.d
    }
}

/// Values 32g..32g + 32 of IQ3_S block `x` (the grid points' magnitudes with their signs)
/// in register g. (A function of its own with the CPU features, so that the intrinsics in it
/// are inlined: a trait method cannot take them.)
///
/// # Safety
/// The CPU must have AVX2.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn iq3s_values(x: &BlockIq3S) -> [__m256i; 8] {
    // byte k of a group: the sign byte k / 8 of the group's four, then bit k % 8
    let which = _mm256_setr_epi64x(
        0,
        0x0101_0101_0101_0101,
        0x0202_0202_0202_0202,
        0x0303_0303_0303_0303,
    );
    let bit = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
    let mut out = [_mm256_setzero_si256(); 8];
    for (g, out) in out.iter_mut().enumerate() {
        // grid point j: values 4j..4j + 4
        let point = |j: usize| IQ3S_GRID[x.grid_index(g, j)] as i32;
        let grid = _mm256_setr_epi32(
            point(0),
            point(1),
            point(2),
            point(3),
            point(4),
            point(5),
            point(6),
            point(7),
        );
        let signs = [0, 1, 2, 3].map(|b| x.signs[4 * g + b]);
        let spread = _mm256_shuffle_epi8(_mm256_set1_epi32(i32::from_le_bytes(signs)), which);
        let negative = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
        *out = _mm256_sub_epi8(_mm256_xor_si256(grid, negative), negative);
    }
    out
}

/// Values 32g..32g + 32 of IQ4_XS block `x` (signed table values) in register g.
///
/// # Safety
/// The CPU must have AVX2.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn group_values(x: &BlockIq4Xs) -> [__m256i; 8] {
    // SAFETY: the loads read the table's 16 bytes and 16 of `qs`'s 128 per group.
    unsafe {
        let table = _mm_loadu_si128(IQ4_NL_VALUES.as_ptr() as *const __m128i);
        let low4 = _mm_set1_epi8(0x0f);
        let mut out = [_mm256_setzero_si256(); 8];
        for (g, out) in out.iter_mut().enumerate() {
            let q = _mm_loadu_si128(x.qs.as_ptr().add(16 * g) as *const __m128i);
            // byte i: value i in its low nibble, value i + 16 in its high one
            let lo = _mm_shuffle_epi8(table, _mm_and_si128(q, low4));
            let hi = _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16::<4>(q), low4));
            *out = _mm256_set_m128i(hi, lo);
        }
        out
    }
}

/// `x` unpacked for the band products ([`KUnpack`]).
///
/// # Safety
/// The CPU must have AVX2 and F16C.
#[target_feature(enable = "avx2,f16c")]
#[inline]
unsafe fn band_unpack<B: SignedGroups>(x: &B) -> Unpacked {
    let sc = x.scales();
    // SAFETY: the load reads the 16 bytes of `sc`; the caller has the features.
    unsafe {
        let offset = _mm256_set1_epi8(0x80u8 as i8);
        let scales = _mm_loadu_si128(sc.as_ptr() as *const __m128i);
        // groups of 16: the even ones (first halves) low, the odd ones high
        let pairs = _mm_unpacklo_epi16(scales, scales);
        let pairs_hi = _mm_unpackhi_epi16(scales, scales);
        let d = half(x.d());
        let mut levels = x.values();
        for l in &mut levels {
            *l = _mm256_xor_si256(*l, offset);
        }
        Unpacked {
            levels,
            scales: _mm256_set_m128i(scales, scales),
            corr: _mm256_set_m128i(pairs_hi, pairs),
            d,
            corr_d: -128.0 * d,
        }
    }
}

/// `impl KUnpack` for [`SignedGroups`] type `$t`, for the band products only: levels are
/// the values offset by 128 (1..=241, too large for the row kernels' `maddubs`, which
/// [`SignedYmm`] replaces), one scale per 32 values, the offset corrected through the scales
/// and the activations' group sums (GGML's tiled codes and steps for IQ4_XS and IQ3_S).
macro_rules! band_unpack {
    ($($t:ty),*) => {$(
        impl KUnpack for $t {
            const PAIRED: bool = true;
            const LEVEL_OFFSET: i32 = 128;
            const MAX_LEVEL: u8 = 241;
            const AVX512: (super::RowDot, super::TileDot) =
                (k_dots_avx512::<Self, SignedYmm>, k_tiles_avx512::<Self, SignedYmm>);
            #[inline(always)]
            unsafe fn unpack(&self) -> Unpacked {
                // SAFETY: forwarded from the caller.
                unsafe { band_unpack(self) }
            }
        }
    )*};
}
band_unpack!(BlockIq4Xs, BlockIq3S);

/// `x` decoded for [`SignedYmm`]'s dot.
///
/// # Safety
/// The CPU must have AVX2 and F16C.
#[target_feature(enable = "avx2,f16c")]
#[inline]
unsafe fn signed_unpack<B: SignedGroups>(x: &B) -> SignedUnpacked {
    // SAFETY: the caller has the features.
    unsafe {
        let values = x.values();
        let mut magnitudes = values;
        for m in &mut magnitudes {
            *m = _mm256_abs_epi8(*m);
        }
        SignedUnpacked {
            values,
            magnitudes,
            scales: x.scales(),
            d: half(x.d()),
        }
    }
}

/// The 256-bit kernels of the [`SignedGroups`] types (on the AVX2 and AVX-512 paths alike).
pub(super) struct SignedYmm;

/// One super-block decoded for [`SignedYmm`]'s dot.
pub(super) struct SignedUnpacked {
    /// Values 32g..32g + 32 (signed bytes) in register g.
    values: [__m256i; 8],
    /// Their magnitudes.
    magnitudes: [__m256i; 8],
    /// The eight group scales.
    scales: [i16; 8],
    /// The super-block scale.
    d: f32,
}

impl<B: SignedGroups> KDecode<B> for SignedYmm {
    type Unpacked = SignedUnpacked;

    #[inline(always)]
    unsafe fn unpack(x: &B) -> SignedUnpacked {
        // SAFETY: forwarded from the caller (AVX2 and F16C).
        unsafe { signed_unpack(x) }
    }

    #[inline(always)]
    unsafe fn dot(x: &SignedUnpacked, y: &BlockQ8K, acc: KAcc) -> KAcc {
        // SAFETY: the caller has AVX2 and FMA; each load reads 32 of y's 256 levels.
        unsafe {
            let mut sumi = _mm256_setzero_si256();
            for g in 0..8 {
                let q = _mm256_loadu_si256(y.qs.as_ptr().add(32 * g) as *const __m256i);
                let signed = _mm256_sign_epi8(q, x.values[g]);
                let pairs = _mm256_maddubs_epi16(x.magnitudes[g], signed);
                let scaled = _mm256_madd_epi16(pairs, _mm256_set1_epi16(x.scales[g]));
                sumi = _mm256_add_epi32(sumi, scaled);
            }
            let zero = _mm256_setzero_si256();
            combine::<B>(x.d, 0.0, y.d.get(), sumi, zero, acc)
        }
    }
}
