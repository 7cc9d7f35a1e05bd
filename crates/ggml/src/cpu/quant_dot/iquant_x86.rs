//! The i-quants (IQ4_XS and the grid types IQ3_S, IQ3_XXS, IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S,
//! IQ1_M) against Q8_K on x86, through the k-quants' row and tile loops
//! ([`kquant_x86`](super::kquant_x86)): each super-block decodes once into eight registers of
//! signed bytes, one per group of 32 values ([`SignedGroups`]: IQ4_XS's indices looked up in
//! the IQ4_NL table by byte shuffles, the grid types' points gathered from their grids with
//! their sign bits, or for IQ1_S and IQ1_M their ternary points times 8 plus their ±1
//! shifts), however many activation rows it is dotted with; per activation row and group,
//! `maddubs` of the values' magnitudes with the activations carrying the values' signs gives
//! the pair sums, `madd` with the scales of its two halves eight i32 lanes. These are the
//! steps of GGML's AVX2 `ggml_vec_dot_<type>_q8_K` (which put the signs on the activations
//! and multiply the grid's magnitudes: the same pair sums): lane k sums values 4k..4k + 4 of
//! every group (exact integers: a pair sum is at most 2 · 127 · 128 < 2^15), then
//! `acc = fma(d·yd, lane, acc)` per super-block, `hsum_float_8` at the end and the type's
//! factor (1/8 or 1/4 for some; [`Combine::Plain`]), so these dots give GGML's x86 bits.
//! IQ1_S's and IQ1_M's GGML dots sum the grid points and the shifts in two sets of lanes;
//! here their levels `8 · point ± 1` are summed at once, with one rounding fewer.
//! On the AVX-512 path IQ2_XXS and IQ2_S give the activations their signs by a masked
//! negation under the values' sign bits ([`SignMask`]) instead of `vpsignb` with sign bytes
//! ([`SignBytes`]); the products are the same. Where the CPU also has VBMI and GFNI,
//! IQ4_XS, IQ2_XXS, IQ2_XS, IQ3_XXS and IQ3_S decode in 512-bit registers instead
//! ([`iquant_vbmi`](super::iquant_vbmi)). The one-row dot keeps two chains of i32 lanes (even
//! and odd groups): with VNNI the `madd` and the add fuse into a `vpdpwssd`, whose latency
//! would otherwise chain all eight groups.
//!
//! For batches on AVX-512 VNNI the super-block also unpacks as the k-quants' band products
//! take it ([`KUnpack`], `kquant_tile.rs`): the values offset by 128 as unsigned bytes, the
//! level offset taken off through the activations' group sums, `d` times the factor, as
//! GGML's tiled MUL_MAT does for every i-quant (its codes are the same biased bytes, its
//! IQ1 codes the same `8 · point ± 1`), so those outputs are its bits.

use std::arch::x86_64::*;

use super::kquant_x86::{combine, k_dots_avx512, k_tiles_avx512, Combine, KAcc, KCombine};
use super::kquant_x86::{KDecode, KUnpack, Unpacked};
use super::x86::{bits_to_bytes, half};
use crate::quants::{even_signs, read_u32, IQ1_SHIFTED, IQ4_NL_VALUES};
use crate::quants::{BlockIq1M, BlockIq1S, BlockIq2S, BlockIq2Xs, BlockIq2Xxs, BlockIq3S};
use crate::quants::{BlockIq3Xxs, BlockIq4Xs, BlockQ8K, GridGroups, GroupBytes, PackedF16};
use crate::quants::{IQ2S_GRID, IQ2XXS_GRID, IQ3S_GRID, IQ3XXS_GRID, KSIGNS_IQ2XS};
use crate::QK_K;

/// A super-block of 256 values that decodes to signed bytes with one scale per 16 values,
/// dotted by [`SignedYmm`]: value = `d · FACTOR · scale · byte`.
pub(super) trait SignedGroups: KCombine {
    /// Whether the scales come one per 32 values (equal pairs in [`SignedGroups::scales`]).
    const PAIRED: bool;
    /// The power of two every value carries besides `d` and its scale, which the dots
    /// multiply by at the end, as GGML's do ([`GridGroups::FACTOR`]).
    const FACTOR: f32;
    /// Values 32g..32g + 32: their magnitudes, and bytes with their signs (no value is 0).
    ///
    /// # Safety
    /// The CPU must have AVX2.
    unsafe fn decode_group(&self, g: usize) -> (__m256i, __m256i);
    /// Values 32g..32g + 32 as i8 (for the band products' unpacking).
    ///
    /// # Safety
    /// The CPU must have AVX2.
    #[inline(always)]
    unsafe fn values(&self, g: usize) -> __m256i {
        // SAFETY: forwarded from the caller.
        unsafe {
            let (magnitudes, signs) = self.decode_group(g);
            _mm256_sign_epi8(magnitudes, signs)
        }
    }
    /// The scale of each 16 values.
    fn scales(&self) -> [i16; QK_K / 16];
    /// The scales as the row dots take them.
    ///
    /// # Safety
    /// The CPU must have AVX2.
    unsafe fn row_scales(&self) -> RowScales;
    /// The super-block scale.
    fn d(&self) -> PackedF16;
}

/// A [`SignedGroups`] type whose signs are bits (or 7-bit patterns completed to even
/// parity, GGML's `ksigns`), decoded for [`SignMask`].
pub(super) trait SignBitGroups: SignedGroups {
    /// Values 32g..32g + 32: their magnitudes, and their signs as bits (bit v set: value v
    /// is negative).
    ///
    /// # Safety
    /// The CPU must have AVX2.
    unsafe fn decode_bits(&self, g: usize) -> (__m256i, u32);
}

/// `impl SignBitGroups` for `$t` by its decoder `$decode`.
macro_rules! sign_bit_groups {
    ($($t:ty: $decode:ident),*) => {$(
        impl SignBitGroups for $t {
            #[inline(always)]
            unsafe fn decode_bits(&self, g: usize) -> (__m256i, u32) {
                // SAFETY: forwarded from the caller.
                unsafe { $decode(self, g) }
            }
        }
    )*};
}
sign_bit_groups!(
    BlockIq2Xxs: iq2xxs_bits,
    BlockIq2S: iq2s_bits
);

/// IQ2_XXS's group `g` for [`SignMask`]: four grid points of a byte's index each, the signs
/// from four 7-bit patterns.
///
/// # Safety
/// The CPU must have AVX2.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn iq2xxs_bits(x: &BlockIq2Xxs, g: usize) -> (__m256i, u32) {
    let points: [u64; 4] = std::array::from_fn(|l| IQ2XXS_GRID[x.qs[8 * g + l] as usize]);
    let aux = read_u32(&x.qs, 2 * g + 1) as usize;
    let s: [u32; 4] = std::array::from_fn(|l| KSIGNS_IQ2XS[(aux >> (7 * l)) & 127] as u32);
    (words(points), s[0] | s[1] << 8 | s[2] << 16 | s[3] << 24)
}

/// IQ2_S's group `g` for [`SignMask`]: its grid points ([`iq2s_points`]) and sign bits.
///
/// # Safety
/// The CPU must have AVX2.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn iq2s_bits(x: &BlockIq2S, g: usize) -> (__m256i, u32) {
    (iq2s_points(x, g), read_u32(&x.qs[QK_K / 8..], g))
}

impl SignedGroups for BlockIq4Xs {
    const PAIRED: bool = true;
    const FACTOR: f32 = 1.0;
    #[inline(always)]
    unsafe fn decode_group(&self, g: usize) -> (__m256i, __m256i) {
        // SAFETY: forwarded from the caller.
        unsafe {
            let values = iq4xs_values(self, g);
            (_mm256_abs_epi8(values), values)
        }
    }
    #[inline(always)]
    unsafe fn values(&self, g: usize) -> __m256i {
        // SAFETY: forwarded from the caller.
        unsafe { iq4xs_values(self, g) }
    }
    #[inline(always)]
    fn scales(&self) -> [i16; QK_K / 16] {
        let per32 = self.group_scales();
        std::array::from_fn(|h| per32[h / 2])
    }
    #[inline(always)]
    unsafe fn row_scales(&self) -> RowScales {
        RowScales::Pairs(self.scales())
    }
    #[inline(always)]
    fn d(&self) -> PackedF16 {
        self.d
    }
}

/// `impl SignedGroups` for grid i-quant `$t`, from its [`GridGroups`] reading: its groups
/// decoded by `$decode` where given (else from [`GridGroups::group`]), its scales per 16
/// values in one register built by `$lanes` in order `$order` where given (else in pairs).
macro_rules! grid_groups {
    ($($t:ty { $(decode: $decode:ident,)? $(lanes: $lanes:ident, $order:expr,)? }),*) => {$(
        impl SignedGroups for $t {
            const PAIRED: bool = <$t as GridGroups>::PAIRED;
            const FACTOR: f32 = <$t as GridGroups>::FACTOR;
            #[inline(always)]
            unsafe fn decode_group(&self, g: usize) -> (__m256i, __m256i) {
                grid_groups!(@decode self, g $(, $decode)?)
            }
            #[inline(always)]
            unsafe fn row_scales(&self) -> RowScales {
                grid_groups!(@scales self $(, $lanes, $order)?)
            }
            #[inline(always)]
            fn scales(&self) -> [i16; QK_K / 16] {
                self.scales16()
            }
            #[inline(always)]
            fn d(&self) -> PackedF16 {
                GridGroups::d(self)
            }
        }
    )*};
    (@decode $x:ident, $g:ident) => {
        // SAFETY: forwarded from the caller.
        unsafe { grid_group($x.group($g)) }
    };
    (@decode $x:ident, $g:ident, $decode:ident) => {
        // SAFETY: forwarded from the caller.
        unsafe { $decode($x, $g) }
    };
    (@scales $x:ident) => {{
        const { assert!(<Self as GridGroups>::PAIRED, "scales per 16 need a register of them") };
        RowScales::Pairs($x.scales16())
    }};
    (@scales $x:ident, $lanes:ident, $order:expr) => {{
        const PICK: [i16; 8] = pick_controls($order);
        // SAFETY: forwarded from the caller.
        RowScales::Lanes(unsafe { $lanes($x) }, &PICK)
    }};
}
grid_groups!(
    BlockIq2Xxs {},
    BlockIq2Xs { lanes: nibble_scales, [0, 1, 2, 3, 4, 5, 6, 7], },
    BlockIq2S { decode: iq2s_group, lanes: nibble_scales, [0, 1, 2, 3, 4, 5, 6, 7], },
    BlockIq3Xxs { decode: iq3xxs_group, },
    BlockIq3S { decode: iq3s_group, },
    BlockIq1S { decode: iq1s_group, lanes: iq1s_scales, [0, 1, 2, 3, 4, 5, 6, 7], },
    BlockIq1M { decode: iq1m_group, lanes: iq1m_scales, [0, 4, 1, 5, 2, 6, 3, 7], }
);

/// Eight 4-value points of an IQ3 grid, `grid[index[j]]` for values 4j..4j + 4.
///
/// # Safety
/// The CPU must have AVX.
#[target_feature(enable = "avx")]
#[inline]
unsafe fn points8(grid: &[u32], index: [usize; 8]) -> __m256i {
    let p = |j: usize| grid[index[j]] as i32;
    _mm256_setr_epi32(p(0), p(1), p(2), p(3), p(4), p(5), p(6), p(7))
}

/// The first `N` i32 lanes of `v` as indices below `n` (a power of two).
///
/// # Safety
/// The CPU must have AVX.
#[target_feature(enable = "avx")]
#[inline]
unsafe fn lanes<const N: usize>(v: __m256i, n: usize) -> [usize; N] {
    let mut all = [0u32; 8];
    // SAFETY: the store writes the 32 bytes of `all`.
    unsafe { _mm256_storeu_si256(all.as_mut_ptr() as *mut __m256i, v) };
    std::array::from_fn(|j| all[j] as usize & (n - 1))
}

/// IQ3_XXS's group `g` ([`SignedGroups::decode_group`]): eight grid indices of a byte each,
/// the signs through GGML's sign bytes.
///
/// # Safety
/// The CPU must have AVX2.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn iq3xxs_group(x: &BlockIq3Xxs, g: usize) -> (__m256i, __m256i) {
    let q = &x.qs[8 * g..8 * g + 8];
    let aux = read_u32(&x.qs[QK_K / 4..], g);
    let magnitudes = points8(&IQ3XXS_GRID, std::array::from_fn(|j| q[j] as usize));
    (magnitudes, words(even_signs(|l| aux >> (7 * l))))
}

/// IQ3_S's group `g`: eight grid indices of 9 bits (a byte of `qs`, and bit j of the
/// group's `qh` byte for index j), put together in one register as GGML's AVX2 dot does.
///
/// # Safety
/// The CPU must have AVX2.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn iq3s_group(x: &BlockIq3S, g: usize) -> (__m256i, __m256i) {
    // SAFETY: the load reads 8 of `qs`'s 64 bytes.
    let low = unsafe { _mm_loadl_epi64(x.qs.as_ptr().add(8 * g) as *const __m128i) };
    let high = _mm256_sllv_epi32(
        _mm256_set1_epi32(x.qh[g] as i32),
        _mm256_setr_epi32(8, 7, 6, 5, 4, 3, 2, 1),
    );
    let index = _mm256_or_si256(
        _mm256_cvtepu8_epi32(low),
        _mm256_and_si256(high, _mm256_set1_epi32(256)),
    );
    let magnitudes = points8(&IQ3S_GRID, lanes::<8>(index, 512));
    (magnitudes, sign_bits(read_u32(&x.signs, g)))
}

/// IQ2_S's group `g`: four 10-bit grid indices (a byte of `qs` and two bits of the group's
/// `qh` byte each), the signs as bits spread over bytes.
///
/// # Safety
/// The CPU must have AVX2.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn iq2s_group(x: &BlockIq2S, g: usize) -> (__m256i, __m256i) {
    (iq2s_points(x, g), sign_bits(read_u32(&x.qs[QK_K / 8..], g)))
}

/// IQ2_S's group `g`'s four grid points, the indices in general registers.
///
/// # Safety
/// The CPU must have AVX.
#[target_feature(enable = "avx")]
#[inline]
unsafe fn iq2s_points(x: &BlockIq2S, g: usize) -> __m256i {
    let qh = x.qh[g] as usize;
    // bits 2l, 2l + 1 of qh to bits 8, 9
    let index: [usize; 4] =
        std::array::from_fn(|l| x.qs[4 * g + l] as usize | ((qh << 8) >> (2 * l)) & 0x300);
    words(index.map(|i| IQ2S_GRID[i]))
}

/// IQ1_S's group `g`: four 12-bit indices into [`IQ1_SHIFTED`] (a byte of `qs` and three bits
/// of the group's `qh` word each, the word's top bit, the shift's sign, for all four), as
/// (magnitudes, levels). The indices are computed in general registers, beside the vector
/// work.
///
/// # Safety
/// The CPU must have AVX2.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn iq1s_group(x: &BlockIq1S, g: usize) -> (__m256i, __m256i) {
    let qh = x.qh[g].get() as usize;
    let shift = (qh >> 15) << 11;
    let index: [usize; 4] =
        std::array::from_fn(|l| x.qs[4 * g + l] as usize | ((qh >> (3 * l)) & 7) << 8 | shift);
    shifted_levels(index)
}

/// IQ1_M's group `g`: four 12-bit indices into [`IQ1_SHIFTED`] (a byte of `qs` and a nibble
/// of the group's two `qh` bytes each: three index bits, then the shift's sign), as
/// (magnitudes, levels).
///
/// # Safety
/// The CPU must have AVX2.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn iq1m_group(x: &BlockIq1M, g: usize) -> (__m256i, __m256i) {
    let qh = u16::from_le_bytes([x.qh[2 * g], x.qh[2 * g + 1]]) as usize;
    let index: [usize; 4] =
        std::array::from_fn(|l| x.qs[4 * g + l] as usize | ((qh >> (4 * l)) & 0xf) << 8);
    shifted_levels(index)
}

/// The levels `8 · point ± 1` of four [`IQ1_SHIFTED`] entries as (magnitudes, levels).
///
/// # Safety
/// The CPU must have AVX2.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn shifted_levels(index: [usize; 4]) -> (__m256i, __m256i) {
    let levels = words(index.map(|i| IQ1_SHIFTED[i & (IQ1_SHIFTED.len() - 1)]));
    (_mm256_abs_epi8(levels), levels)
}

/// Blocks with a 4-bit scale code per 16 values, two per byte (low nibble first).
trait NibbleScales {
    /// The eight bytes of codes.
    fn codes(&self) -> &[u8; 8];
}

impl NibbleScales for BlockIq2Xs {
    fn codes(&self) -> &[u8; 8] {
        &self.scales
    }
}

impl NibbleScales for BlockIq2S {
    fn codes(&self) -> &[u8; 8] {
        &self.scales
    }
}

/// [`RowScales::Lanes`] of the IQ2_XS and IQ2_S scales `2·code + 1`: the low
/// nibbles (the first 16 of each group) in the low lane, the high nibbles in the high one.
///
/// # Safety
/// The CPU must have AVX2.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn nibble_scales<B: NibbleScales>(x: &B) -> __m256i {
    // SAFETY: the load reads the 8 bytes of codes.
    unsafe {
        let codes = _mm_loadl_epi64(x.codes().as_ptr() as *const __m128i);
        let low4 = _mm_set1_epi8(0x0f);
        let first = _mm_and_si128(codes, low4);
        let second = _mm_and_si128(_mm_srli_epi16::<4>(codes), low4);
        let v = _mm256_cvtepu8_epi16(_mm_unpacklo_epi64(first, second));
        _mm256_add_epi16(_mm256_add_epi16(v, v), _mm256_set1_epi16(1))
    }
}

/// [`RowScales::Lanes`] of IQ1_S: the scale `2·code + 1` of group g (its code in bits
/// 12..15 of its `qh` word) at i16 element g of both lanes.
///
/// # Safety
/// The CPU must have AVX2.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn iq1s_scales(x: &BlockIq1S) -> __m256i {
    // SAFETY: the load reads the 16 bytes of `qh`.
    unsafe {
        let qh = _mm_loadu_si128(x.qh.as_ptr() as *const __m128i);
        let codes = _mm_and_si128(_mm_srli_epi16::<12>(qh), _mm_set1_epi16(7));
        let scales = _mm_add_epi16(_mm_add_epi16(codes, codes), _mm_set1_epi16(1));
        _mm256_broadcastsi128_si256(scales)
    }
}

/// [`RowScales::Lanes`] of IQ1_M (3-bit codes at bits 0, 3, 6, 9 of each of its four
/// words, the 16s in order): the words shifted by 0 and 6 in the low lane (codes 4w and
/// 4w + 2, group 2w's and 2w + 1's first), by 3 and 9 in the high one, as GGML's AVX2 dot
/// does.
///
/// # Safety
/// The CPU must have AVX2.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn iq1m_scales(x: &BlockIq1M) -> __m256i {
    let words = u64::from_le_bytes(bytemuck::cast(x.scales));
    let v = _mm256_srlv_epi64(
        _mm256_set1_epi64x(words as i64),
        _mm256_setr_epi64x(0, 6, 3, 9),
    );
    let v = _mm256_and_si256(v, _mm256_set1_epi16(7));
    _mm256_add_epi16(_mm256_add_epi16(v, v), _mm256_set1_epi16(1))
}

/// Four words of eight bytes as one register, word j in bytes 8j..8j + 8.
///
/// # Safety
/// The CPU must have AVX.
#[target_feature(enable = "avx")]
#[inline]
unsafe fn words(w: [u64; 4]) -> __m256i {
    _mm256_setr_epi64x(w[0] as i64, w[1] as i64, w[2] as i64, w[3] as i64)
}

/// One group of a grid i-quant decoded ([`SignedGroups::decode_group`]): the grid's
/// magnitudes with their signs, or for the ternary grid its points times 8 plus their shifts
/// ([`GroupBytes`]). (A function of its own with the CPU features, so that the intrinsics in
/// it are inlined: a trait method cannot take them.)
///
/// # Safety
/// The CPU must have AVX2.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn grid_group(group: GroupBytes) -> (__m256i, __m256i) {
    match group {
        GroupBytes::SignBits(magnitudes, bits) => (words(magnitudes), sign_bits(bits)),
        GroupBytes::SignBytes(magnitudes, signs) => (words(magnitudes), words(signs)),
        GroupBytes::Shifted(points, shifts) => shifted(points, shifts),
    }
}

/// Sign bytes (−1, +1) of 32 values from one bit each (set: negative).
///
/// # Safety
/// The CPU must have AVX2.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn sign_bits(bits: u32) -> __m256i {
    // SAFETY: register operations; the caller has AVX2.
    unsafe { _mm256_or_si256(bits_to_bytes(bits.to_le_bytes()), _mm256_set1_epi8(1)) }
}

/// The levels `8 · point ± 1` of 32 values from their ternary grid points and shifts
/// ([`GroupBytes::Shifted`]), as (magnitudes, signs).
///
/// # Safety
/// The CPU must have AVX2.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn shifted(points: [u64; 4], shifts: u16) -> (__m256i, __m256i) {
    // qword j all ones where bit 4j + 3 of the shifts is set
    let bits = _mm256_setr_epi64x(0x8, 0x80, 0x800, 0x8000);
    let negative = _mm256_cmpeq_epi64(
        _mm256_and_si256(_mm256_set1_epi64x(shifts as i64), bits),
        bits,
    );
    let shifts = _mm256_or_si256(negative, _mm256_set1_epi8(1));
    let values = _mm256_add_epi8(_mm256_sign_epi8(_mm256_set1_epi8(8), words(points)), shifts);
    (_mm256_abs_epi8(values), values)
}

/// Group `g` of IQ4_XS block `x`: its table values ([`SignedGroups::values`]).
///
/// # Safety
/// The CPU must have AVX2.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn iq4xs_values(x: &BlockIq4Xs, g: usize) -> __m256i {
    // SAFETY: the loads read the table's 16 bytes and 16 of `qs`'s 128.
    unsafe {
        let table = _mm_loadu_si128(IQ4_NL_VALUES.as_ptr() as *const __m128i);
        let low4 = _mm_set1_epi8(0x0f);
        let q = _mm_loadu_si128(x.qs.as_ptr().add(16 * g) as *const __m128i);
        // byte i: value i in its low nibble, value i + 16 in its high one
        let lo = _mm_shuffle_epi8(table, _mm_and_si128(q, low4));
        let hi = _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16::<4>(q), low4));
        _mm256_set_m128i(hi, lo)
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
    let even: [i16; 8] = std::array::from_fn(|c| sc[2 * c]);
    let odd: [i16; 8] = std::array::from_fn(|c| sc[2 * c + 1]);
    // SAFETY: the loads read the 32 bytes of `sc` and the 16 of `even` and `odd`; the caller
    // has the features.
    unsafe {
        let offset = _mm256_set1_epi8(0x80u8 as i8);
        let d = half(x.d()) * B::FACTOR;
        let mut levels = [_mm256_setzero_si256(); 8];
        for (g, l) in levels.iter_mut().enumerate() {
            *l = _mm256_xor_si256(x.values(g), offset);
        }
        Unpacked {
            levels,
            // the even groups of 16 in the low lane, the odd ones in the high lane
            scales: _mm256_set_m128i(
                _mm_loadu_si128(odd.as_ptr() as *const __m128i),
                _mm_loadu_si128(even.as_ptr() as *const __m128i),
            ),
            corr: _mm256_loadu_si256(sc.as_ptr() as *const __m256i),
            d,
            corr_d: -128.0 * d,
        }
    }
}

/// `impl KCombine` and `impl KUnpack` for [`SignedGroups`] type `$t`, its AVX-512 row and
/// tile dots applying the signs by `$signs` ([`SignApply`]). The row dots'
/// combination is GGML's: eight lanes, multiplied by the factor at the end. Its unpacking is
/// for the band products only: levels are the values offset by 128 (too large for the row
/// kernels' `maddubs`, which [`SignedYmm`] replaces), one scale per 16 values (in equal
/// pairs for the types with one per 32), the offset corrected through the scales and the
/// activations' group sums, `d` times the factor: GGML's tiled codes and steps for the
/// i-quants.
macro_rules! signed_kquant {
    ($($t:ty: $signs:ty),*) => {$(
        impl KCombine for $t {
            const COMBINE: Combine = Combine::Plain(<$t as SignedGroups>::FACTOR);
        }
        impl KUnpack for $t {
            const PAIRED: bool = <$t as SignedGroups>::PAIRED;
            const LEVEL_OFFSET: i32 = 128;
            const MAX_LEVEL: u8 = 255;
            const SIGNED: bool = true;
            const AVX512: (super::RowDot, super::TileDot) = (
                k_dots_avx512::<Self, SignedYmm<$signs>>,
                k_tiles_avx512::<Self, SignedYmm<$signs>>,
            );
            #[inline(always)]
            unsafe fn unpack(&self) -> Unpacked {
                // SAFETY: forwarded from the caller.
                unsafe { band_unpack(self) }
            }
        }
    )*};
}
signed_kquant!(
    BlockIq4Xs: SignBytes,
    BlockIq2Xxs: SignMask,
    BlockIq2Xs: SignBytes,
    BlockIq2S: SignMask,
    BlockIq3Xxs: SignBytes,
    BlockIq3S: SignBytes,
    BlockIq1S: SignBytes,
    BlockIq1M: SignBytes
);

/// How [`SignedYmm`] gives the activations the signs of the weight values it multiplies
/// them by (`maddubs` takes the values' magnitudes, unsigned).
pub(super) trait SignApply<B> {
    /// The signs of one group of 32 values.
    type Signs: Copy;
    /// Group `g` of `x`: the values' magnitudes and their signs.
    ///
    /// # Safety
    /// The CPU must have the implementation's features (AVX2 at least).
    unsafe fn decode(x: &B, g: usize) -> (__m256i, Self::Signs);
    /// The 32 activations `q` with the signs `s`.
    ///
    /// # Safety
    /// As [`SignApply::decode`].
    unsafe fn apply(q: __m256i, s: Self::Signs) -> __m256i;
}

/// Signs as bytes (−1, +1), applied by `vpsignb` ([`SignedGroups::decode_group`]): AVX2.
pub(super) struct SignBytes;

impl<B: SignedGroups> SignApply<B> for SignBytes {
    type Signs = __m256i;
    #[inline(always)]
    unsafe fn decode(x: &B, g: usize) -> (__m256i, __m256i) {
        // SAFETY: forwarded from the caller.
        unsafe { x.decode_group(g) }
    }
    #[inline(always)]
    unsafe fn apply(q: __m256i, s: __m256i) -> __m256i {
        // SAFETY: a register operation; the caller has AVX2.
        unsafe { _mm256_sign_epi8(q, s) }
    }
}

/// Signs as one bit per value ([`SignBitGroups::decode_bits`]), the activations negated
/// under them as a mask: AVX-512 BW and VL. The bits come from the weights' own sign bits
/// (or sign patterns) by integer arithmetic, which runs beside the vector work, where
/// [`SignBytes`] spreads them over bytes in vector registers.
pub(super) struct SignMask;

impl<B: SignBitGroups> SignApply<B> for SignMask {
    type Signs = u32;
    #[inline(always)]
    unsafe fn decode(x: &B, g: usize) -> (__m256i, u32) {
        // SAFETY: forwarded from the caller.
        unsafe { x.decode_bits(g) }
    }
    #[allow(clippy::incompatible_msrv)]
    #[inline(always)]
    unsafe fn apply(q: __m256i, s: u32) -> __m256i {
        // SAFETY: a register operation; the caller has AVX-512 BW and VL. The activations
        // are within ±127 (Q8_K), so none overflows when negated.
        unsafe { _mm256_mask_sub_epi8(q, s, _mm256_setzero_si256(), q) }
    }
}

/// `x` decoded for [`SignedYmm`]'s dot.
///
/// # Safety
/// The CPU must have AVX2 and F16C, and `S`'s features.
#[inline(always)]
unsafe fn signed_unpack<B: SignedGroups, S: SignApply<B>>(x: &B) -> SignedUnpacked<S::Signs> {
    // SAFETY: the caller has the features. (Loops, not closures: a closure would not take
    // the caller's features, and the intrinsics in it would not be inlined.)
    unsafe {
        let (m0, s0) = S::decode(x, 0);
        let (mut magnitudes, mut signs) = ([m0; 8], [s0; 8]);
        for g in 1..8 {
            (magnitudes[g], signs[g]) = S::decode(x, g);
        }
        let sc = x.row_scales();
        let mut scales = [_mm256_setzero_si256(); 8];
        for (g, s) in scales.iter_mut().enumerate() {
            *s = sc.group(g);
        }
        SignedUnpacked {
            signs,
            magnitudes,
            scales,
            d: half(x.d()),
        }
    }
}

/// A super-block's scales as the row dots take them ([`SignedGroups::row_scales`]).
pub(super) enum RowScales {
    /// Per 16 values, in equal pairs (one scale per 32).
    Pairs([i16; QK_K / 16]),
    /// All 16 in one register, group g's first (values 32g..32g + 16) and second at the
    /// same i16 element of the low and the high lane, and per group the `pshufb` control
    /// that picks that element ([`pick_controls`]).
    Lanes(__m256i, &'static [i16; 8]),
}

/// The `pshufb` controls (as i16, both bytes of one element) that pick i16 element
/// `order[g]` of each lane.
const fn pick_controls(order: [u8; 8]) -> [i16; 8] {
    let mut pick = [0i16; 8];
    let mut g = 0;
    while g < 8 {
        let e = order[g] as i16;
        pick[g] = ((2 * e + 1) << 8) | (2 * e);
        g += 1;
    }
    pick
}

impl RowScales {
    /// The scales of group `g`'s 16 pair sums: those of values 32g..32g + 16 in the low lane,
    /// of the next 16 in the high one.
    ///
    /// # Safety
    /// The CPU must have AVX2.
    #[inline(always)]
    unsafe fn group(&self, g: usize) -> __m256i {
        // SAFETY: register operations; the caller has AVX2.
        unsafe {
            match self {
                RowScales::Pairs(per16) => _mm256_set1_epi16(per16[2 * g]),
                RowScales::Lanes(lanes, pick) => {
                    _mm256_shuffle_epi8(*lanes, _mm256_set1_epi16(pick[g]))
                }
            }
        }
    }
}

/// The 256-bit kernels of the [`SignedGroups`] types, the signs applied by `S` ([`SignBytes`]
/// on the AVX2 path and for the types without sign bits, [`SignMask`] on the AVX-512 path).
pub(super) struct SignedYmm<S = SignBytes>(std::marker::PhantomData<S>);

/// One super-block decoded for [`SignedYmm`]'s dot.
pub(super) struct SignedUnpacked<S> {
    /// The magnitudes of values 32g..32g + 32 in register g.
    magnitudes: [__m256i; 8],
    /// The values' signs, group by group.
    signs: [S; 8],
    /// Register g: the scale of each of its 16 i16 pair sums.
    scales: [__m256i; 8],
    /// The super-block scale.
    d: f32,
}

/// Group `g`'s 32 products weighed by their scales `sc`, added into the eight lanes `sumi`.
///
/// # Safety
/// The CPU must have AVX2 and `S`'s features.
#[inline(always)]
unsafe fn signed_group<B, S: SignApply<B>>(
    sumi: __m256i,
    (magnitudes, signs): (__m256i, S::Signs),
    sc: __m256i,
    y: &BlockQ8K,
    g: usize,
) -> __m256i {
    // SAFETY: the load reads 32 of y's 256 levels; the caller has the features.
    unsafe {
        let q = _mm256_loadu_si256(y.qs.as_ptr().add(32 * g) as *const __m256i);
        let pairs = _mm256_maddubs_epi16(magnitudes, S::apply(q, signs));
        _mm256_add_epi32(sumi, _mm256_madd_epi16(pairs, sc))
    }
}

impl<B: SignedGroups, S: SignApply<B>> KDecode<B> for SignedYmm<S> {
    type Unpacked = SignedUnpacked<S::Signs>;

    #[inline(always)]
    unsafe fn unpack(x: &B) -> Self::Unpacked {
        // SAFETY: forwarded from the caller (AVX2 and F16C, and S's features).
        unsafe { signed_unpack::<B, S>(x) }
    }

    #[inline(always)]
    unsafe fn dot(x: &Self::Unpacked, y: &BlockQ8K, acc: KAcc) -> KAcc {
        // SAFETY: the caller has AVX2 and FMA (and S's features).
        unsafe {
            let mut sumi = _mm256_setzero_si256();
            for g in 0..8 {
                let group = (x.magnitudes[g], x.signs[g]);
                sumi = signed_group::<B, S>(sumi, group, x.scales[g], y, g);
            }
            let zero = _mm256_setzero_si256();
            combine::<B>(x.d, 0.0, y.d.get(), sumi, zero, acc)
        }
    }

    /// One activation row (token generation) takes each group as it is decoded, the
    /// super-block never leaving the registers; more unpack it once for all.
    #[inline(always)]
    unsafe fn dot_rows<const R: usize>(x: &B, ys: [&BlockQ8K; R], acc: &mut [KAcc; R]) {
        // SAFETY: forwarded from the caller (AVX2, FMA and F16C, and S's features).
        unsafe {
            if R != 1 {
                let u = signed_unpack::<B, S>(x);
                for r in 0..R {
                    acc[r] = <Self as KDecode<B>>::dot(&u, ys[r], acc[r]);
                }
                return;
            }
            // two chains of exact integer sums (the module's documentation says why)
            let (y, sc) = (ys[0], x.row_scales());
            let (mut even, mut odd) = (_mm256_setzero_si256(), _mm256_setzero_si256());
            for g in (0..8).step_by(2) {
                even = signed_group::<B, S>(even, S::decode(x, g), sc.group(g), y, g);
                odd = signed_group::<B, S>(odd, S::decode(x, g + 1), sc.group(g + 1), y, g + 1);
            }
            let sumi = _mm256_add_epi32(even, odd);
            let zero = _mm256_setzero_si256();
            acc[0] = combine::<B>(half(x.d()), 0.0, y.d.get(), sumi, zero, acc[0]);
        }
    }
}

/// What the bit-for-bit tests of the i-quant dots model them from.
#[cfg(test)]
pub(super) mod model {
    use crate::quants::{BlockIq1M, BlockIq1S, BlockIq2S, BlockIq2Xs, BlockIq2Xxs, BlockIq3S};
    use crate::quants::{BlockIq3Xxs, GridGroups, IQ4_NL_VALUES};
    use crate::types::Type;
    use crate::QK_K;

    /// The i-quants with integer dots.
    pub(crate) const TYPES: [Type; 8] = [
        Type::IQ4_XS,
        Type::IQ3_S,
        Type::IQ3_XXS,
        Type::IQ2_XXS,
        Type::IQ2_XS,
        Type::IQ2_S,
        Type::IQ1_S,
        Type::IQ1_M,
    ];

    /// One super-block as integers: value e = `d · factor · scales[e / 16] · levels[e]`.
    pub(crate) struct Block {
        pub(crate) levels: [i32; QK_K],
        pub(crate) scales: [i32; QK_K / 16],
        pub(crate) d: f32,
        pub(crate) factor: f32,
    }

    /// Super-block `x` of `ty` (one of [`TYPES`]) as integers: IQ4_XS read from its bytes
    /// here, the grid types through [`GridGroups`] (which a test in `quants` holds to their
    /// dequantizers).
    pub(crate) fn block(ty: Type, x: &[u8]) -> Block {
        fn grid<B: GridGroups>(x: &[u8]) -> Block {
            let b: &B = bytemuck::from_bytes(x);
            let mut levels = [0; QK_K];
            for g in 0..QK_K / 32 {
                for (v, l) in b.group(g).levels().iter().enumerate() {
                    levels[32 * g + v] = *l as i32;
                }
            }
            Block {
                levels,
                scales: b.scales16().map(i32::from),
                d: b.d().to_f32(),
                factor: B::FACTOR,
            }
        }
        match ty {
            // d (2 bytes), scales_h (2), scales_l (4), qs (128)
            Type::IQ4_XS => {
                let sh = u16::from_le_bytes([x[2], x[3]]) as i32;
                let scale = |g: usize| {
                    let low = (x[4 + g / 2] >> (4 * (g % 2))) as i32 & 0xf;
                    (low | ((sh >> (2 * g)) & 3) << 4) - 32
                };
                Block {
                    levels: std::array::from_fn(|e| {
                        let (g, v) = (e / 32, e % 32);
                        let q = x[8 + 16 * g + v % 16] >> (4 * (v / 16)) & 0xf;
                        IQ4_NL_VALUES[q as usize] as i32
                    }),
                    scales: std::array::from_fn(|h| scale(h / 2)),
                    d: half::f16::from_bits(u16::from_le_bytes([x[0], x[1]])).to_f32(),
                    factor: 1.0,
                }
            }
            Type::IQ3_S => grid::<BlockIq3S>(x),
            Type::IQ3_XXS => grid::<BlockIq3Xxs>(x),
            Type::IQ2_XXS => grid::<BlockIq2Xxs>(x),
            Type::IQ2_XS => grid::<BlockIq2Xs>(x),
            Type::IQ2_S => grid::<BlockIq2S>(x),
            Type::IQ1_S => grid::<BlockIq1S>(x),
            Type::IQ1_M => grid::<BlockIq1M>(x),
            _ => panic!("{ty} is not an i-quant with integer dots"),
        }
    }
}
