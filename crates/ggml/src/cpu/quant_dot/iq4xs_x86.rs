//! IQ4_XS against Q8_K on x86, through the k-quants' row and tile loops
//! ([`kquant_x86`](super::kquant_x86)): each super-block's eight groups of 32 indices are looked
//! up in the IQ4_NL table once (one byte shuffle per 16 values) however many activation rows
//! they are dotted with; per activation row and group, `maddubs` of the levels' magnitudes with
//! the activations carrying the levels' signs gives the pair sums, `madd` with the group's
//! scale eight i32 lanes. These are the steps of GGML's AVX2 `ggml_vec_dot_iq4_xs_q8_K`: lane
//! k sums values 4k..4k + 4 of every group (exact integers: a pair sum is at most
//! 2 · 127 · 128 < 2^15), then `acc = fma(d·yd, lane, acc)` per super-block and
//! `hsum_float_8` at the end ([`Combine::Plain`]), so these dots give GGML's x86 bits.
//!
//! For batches on AVX-512 VNNI the super-block also unpacks as the k-quants' band products
//! take it ([`KUnpack`], `kquant_tile.rs`): the table values offset by 128 as unsigned bytes,
//! the level offset taken off through the activations' group sums, as GGML's tiled MUL_MAT
//! does for IQ4_XS (its codes are the same biased bytes), so those outputs are its bits.

use std::arch::x86_64::*;

use super::kquant_x86::{combine, k_dots_avx512, k_tiles_avx512, Combine, KAcc, KCombine};
use super::kquant_x86::{KDecode, KUnpack, Unpacked};
use super::x86::half;
use crate::quants::{BlockIq4Xs, BlockQ8K, IQ4_NL_VALUES};

impl KCombine for BlockIq4Xs {
    const COMBINE: Combine = Combine::Plain;
}

/// The eight group scales of `x` (−32..32), group order.
#[inline(always)]
fn group_scales(x: &BlockIq4Xs) -> [i16; 8] {
    let sh = x.scales_h.get();
    std::array::from_fn(|g| {
        let low = (x.scales_l[g / 2] >> (4 * (g % 2))) & 0xf;
        let high = ((sh >> (2 * g)) & 3) as u8;
        (low | (high << 4)) as i16 - 32
    })
}

/// Values 32g..32g + 32 of `x` (signed table values) in register g.
///
/// # Safety
/// The CPU must have AVX2.
#[inline(always)]
unsafe fn group_values(x: &BlockIq4Xs) -> [__m256i; 8] {
    // SAFETY: the caller has AVX2; the loads read the table's 16 bytes and 16 of `qs`'s 128
    // per group.
    unsafe {
        let table = _mm_loadu_si128(IQ4_NL_VALUES.as_ptr() as *const __m128i);
        let low4 = _mm_set1_epi8(0x0f);
        std::array::from_fn(|g| {
            let q = _mm_loadu_si128(x.qs.as_ptr().add(16 * g) as *const __m128i);
            // byte i: value i in its low nibble, value i + 16 in its high one
            let lo = _mm_shuffle_epi8(table, _mm_and_si128(q, low4));
            let hi = _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16::<4>(q), low4));
            _mm256_set_m128i(hi, lo)
        })
    }
}

/// For the band products only: levels are the values offset by 128 (1..=241, too large for
/// the row kernels' `maddubs`, which [`Iq4Ymm`] replaces), one scale per 32 values, the
/// offset corrected through the scales and the activations' group sums.
impl KUnpack for BlockIq4Xs {
    const PAIRED: bool = true;
    const LEVEL_OFFSET: i32 = 128;
    const MAX_LEVEL: u8 = 241;
    const AVX512: (super::RowDot, super::TileDot) = (
        k_dots_avx512::<Self, Iq4Ymm>,
        k_tiles_avx512::<Self, Iq4Ymm>,
    );
    #[inline(always)]
    unsafe fn unpack(&self) -> Unpacked {
        let sc = group_scales(self);
        // SAFETY: forwarded from the caller (AVX2 and F16C); register operations.
        unsafe {
            let offset = _mm256_set1_epi8(0x80u8 as i8);
            let scales = _mm_loadu_si128(sc.as_ptr() as *const __m128i);
            // groups of 16: the even ones (first halves) low, the odd ones high
            let pairs = _mm_unpacklo_epi16(scales, scales);
            let pairs_hi = _mm_unpackhi_epi16(scales, scales);
            let d = half(self.d);
            Unpacked {
                levels: group_values(self).map(|v| _mm256_xor_si256(v, offset)),
                scales: _mm256_set_m128i(scales, scales),
                corr: _mm256_set_m128i(pairs_hi, pairs),
                d,
                corr_d: -128.0 * d,
            }
        }
    }
}

/// The 256-bit IQ4_XS kernels (on the AVX2 and AVX-512 paths alike).
pub(super) struct Iq4Ymm;

/// One super-block looked up for [`Iq4Ymm::dot`].
pub(super) struct Iq4Unpacked {
    /// Values 32g..32g + 32 (signed table values) in register g.
    values: [__m256i; 8],
    /// Their magnitudes.
    magnitudes: [__m256i; 8],
    /// The eight group scales (−32..32).
    scales: [i16; 8],
    /// The super-block scale.
    d: f32,
}

impl KDecode<BlockIq4Xs> for Iq4Ymm {
    type Unpacked = Iq4Unpacked;

    #[inline(always)]
    unsafe fn unpack(x: &BlockIq4Xs) -> Iq4Unpacked {
        // SAFETY: forwarded from the caller (AVX2 and F16C).
        unsafe {
            let values = group_values(x);
            Iq4Unpacked {
                magnitudes: values.map(|v| _mm256_abs_epi8(v)),
                values,
                scales: group_scales(x),
                d: half(x.d),
            }
        }
    }

    #[inline(always)]
    unsafe fn dot(x: &Iq4Unpacked, y: &BlockQ8K, acc: KAcc) -> KAcc {
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
            combine::<BlockIq4Xs>(x.d, 0.0, y.d.get(), sumi, zero, acc)
        }
    }
}
