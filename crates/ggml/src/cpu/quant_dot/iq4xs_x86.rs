//! IQ4_XS against Q8_K on x86, through the k-quants' row and tile loops
//! ([`kquant_x86`](super::kquant_x86)): each super-block's eight groups of 32 indices are looked
//! up in the IQ4_NL table once (one byte shuffle per 16 values) however many activation rows
//! they are dotted with; per activation row and group, `maddubs` of the levels' magnitudes with
//! the activations carrying the levels' signs gives the pair sums, `madd` with the group's
//! scale eight i32 lanes. These are the steps of GGML's AVX2 `ggml_vec_dot_iq4_xs_q8_K`: lane
//! k sums values 4k..4k + 4 of every group (exact integers: a pair sum is at most
//! 2 · 127 · 128 < 2^15), then `acc = fma(d·yd, lane, acc)` per super-block and
//! `hsum_float_8` at the end ([`Combine::Plain`]), so these dots give GGML's x86 bits.

use std::arch::x86_64::*;

use super::kquant_x86::{combine, Combine, KAcc, KCombine, KDecode};
use super::x86::half;
use crate::quants::{BlockIq4Xs, BlockQ8K, IQ4_NL_VALUES};

impl KCombine for BlockIq4Xs {
    const COMBINE: Combine = Combine::Plain;
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
        let sh = x.scales_h.get();
        let scales = std::array::from_fn(|g| {
            let low = (x.scales_l[g / 2] >> (4 * (g % 2))) & 0xf;
            let high = ((sh >> (2 * g)) & 3) as u8;
            (low | (high << 4)) as i16 - 32
        });
        // SAFETY: the caller has AVX2 and F16C; the loads read the table's 16 bytes and 16 of
        // `qs`'s 128 per group.
        unsafe {
            let table = _mm_loadu_si128(IQ4_NL_VALUES.as_ptr() as *const __m128i);
            let low4 = _mm_set1_epi8(0x0f);
            let values: [__m256i; 8] = std::array::from_fn(|g| {
                let q = _mm_loadu_si128(x.qs.as_ptr().add(16 * g) as *const __m128i);
                // byte i: value i in its low nibble, value i + 16 in its high one
                let lo = _mm_shuffle_epi8(table, _mm_and_si128(q, low4));
                let hi = _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16::<4>(q), low4));
                _mm256_set_m128i(hi, lo)
            });
            Iq4Unpacked {
                magnitudes: values.map(|v| _mm256_abs_epi8(v)),
                values,
                scales,
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
