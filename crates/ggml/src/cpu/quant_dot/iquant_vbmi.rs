//! The i-quants decoded in 512-bit registers on AVX-512 with VBMI and GFNI ([`SignedZmm`]):
//! the grid types (IQ2_XXS, IQ2_XS, IQ3_XXS, IQ3_S) by byte permutes, a whole super-block at
//! once, where the 256-bit decoders ([`iquant_x86`](super::iquant_x86)) read each grid point
//! and each sign pattern by a scalar load; IQ4_XS by one byte shuffle per 64 values.
//!
//! - The grid points are stored compactly as GGML's `kgrid` codes (two or three bits per
//!   coordinate, 16 bits per point: IQ2_XXS's 256 points in eight registers): the indices go
//!   to 16-bit lanes (one `vpermb`, a mask, or a widening), `vpermi2w` per 64 entries and
//!   blends by the higher index bits look up 32 codes at once ([`codes_of`]), and per 64
//!   values a `vpermw` (each point's code into its bytes), a `vpmultishiftqb` (each
//!   coordinate's bits to the bottom of its byte) and a `vpermb` (the level bytes) give the
//!   magnitudes ([`expand`]).
//! - The signs: one `vpmultishiftqb` moves each group's four patterns into four bytes, one
//!   `gf2p8affineqb` completes each byte with its parity bit (GGML's `ksigns`: the eighth sign
//!   makes the count of negative values even), and group g's 32 sign bits are the low half of
//!   qword g ([`pattern_masks`]), which negate the activations under a mask.
//! - The scales: their codes in 16-bit lanes, `2s + 1`, one `vpermw` per 64 values.
//! - IQ4_XS: two groups' 32 index bytes doubled to [A, A, B, B], one `gf2p8affineqb` keeps
//!   the low nibbles in one copy and moves the high ones down in the other (values in order),
//!   a `vpshufb` looks up the levels' magnitudes; the sign is bit 3 of the index (the levels
//!   ascend), one `vptestnmb`; the scales' two fields by one `vpmultishiftqb`.
//!
//! `maddubs` and `vpdpwssd` with the scales then make the same pair sums and i32 lanes as
//! GGML's AVX2 dot (lane k of each half: values 4k..4k + 4 of its group; the halves added),
//! so the dots are its bits.

// the AVX-512 intrinsics, as in the crate's other AVX-512 kernels (stable since Rust 1.89)
#![allow(clippy::incompatible_msrv)]

use std::arch::x86_64::*;

use super::iquant_x86::SignedGroups;
use super::kquant_avx512::{qwords, HIGH_NIBBLE, LOW_NIBBLE};
use super::kquant_x86::{combine, KAcc, KCombine, KDecode};
use super::x86::half;
use crate::quants::IQ4_NL_VALUES;
use crate::quants::{BlockIq2Xs, BlockIq2Xxs, BlockIq3S, BlockIq3Xxs, BlockIq4Xs, BlockQ8K};
use crate::quants::{IQ2_LEVEL_BYTES, IQ3S_LEVEL_BYTES, IQ3XXS_LEVEL_BYTES};
use crate::quants::{KGRID_2BIT_256, KGRID_2BIT_512, KGRID_3BIT_256, KGRID_3BIT_512};
use crate::QK_K;

/// The 512-bit kernels of the i-quants on AVX-512 VBMI and GFNI ([`KDecode`]).
pub(super) struct SignedZmm;

/// Whether this CPU has what [`SignedZmm`] needs beyond the AVX-512 path's features.
pub(super) fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx512vbmi") && std::arch::is_x86_feature_detected!("gfni")
}

/// The `gf2p8affineqb` matrix that keeps a byte's seven low bits and sets bit 7 to their
/// parity: output bit i is the parity of the input ANDed with byte 7 − i of the matrix (bit
/// i alone for i < 7, the seven low bits for bit 7).
const WITH_PARITY: i64 = 0x0102_0408_1020_407f;

/// One super-block decoded for [`SignedZmm`]'s dot: per 64 values (two groups of 32), their
/// magnitudes, their signs as a mask, and the scale of each i16 pair sum.
pub(super) struct ZmmGroups {
    /// Values 64m..64m + 64 in register m.
    magnitudes: [__m512i; 4],
    /// Bit v of mask m: value 64m + v is negative.
    signs: [u64; 4],
    /// Register m: group 2m's scale in the low 16 i16 elements, 2m + 1's in the high ones.
    scales: [__m512i; 4],
    /// The super-block scale.
    d: f32,
}

// the grids' codes, for `codes_of`
static IQ2XXS_CODES: [u16; 256] = KGRID_2BIT_256;
static IQ2XS_CODES: [u16; 512] = KGRID_2BIT_512;
static IQ3XXS_CODES: [u16; 256] = KGRID_3BIT_256;
static IQ3S_CODES: [u16; 512] = KGRID_3BIT_512;

/// A `vpermb` table giving byte i the level of its `bits` low bits (`vpermb` reads six).
const fn level_table(levels: &[u8], bits: u32) -> [u8; 64] {
    let mut t = [0u8; 64];
    let mut i = 0;
    while i < 64 {
        let level = i & ((1 << bits) - 1);
        if level < levels.len() {
            t[i] = levels[level];
        }
        i += 1;
    }
    t
}
const IQ2_LEVELS: [u8; 64] = level_table(&IQ2_LEVEL_BYTES, 2);
const IQ3XXS_LEVELS: [u8; 64] = level_table(&IQ3XXS_LEVEL_BYTES, 3);
const IQ3S_LEVELS: [u8; 64] = level_table(&IQ3S_LEVEL_BYTES, 3);

/// `vpermb` control: 16-bit lane p takes byte `8·(p / 4) + p % 4` (IQ2_XXS's index l of
/// group g sits at byte 8g + l); the high bytes are zeroed by the mask.
const IQ2XXS_INDEX_BYTES: [u8; 64] = {
    let mut t = [0u8; 64];
    let mut p = 0;
    while p < 32 {
        t[2 * p] = (8 * (p / 4) + p % 4) as u8;
        p += 1;
    }
    t
};

/// `vpermw` controls, one per register m of 64 values: 16-bit lane w takes the code of point
/// `8m + w / 4` (four lanes, eight bytes, per point of eight values: IQ2_XXS, IQ2_XS).
const POINT8_WORDS: [[u16; 32]; 4] = point_words(4, 8);
/// As [`POINT8_WORDS`] for points of four values (IQ3_XXS, IQ3_S): lane w of register m takes
/// point `16m + w / 2` of the 32 in its register of codes (`16 · (m % 2) + w / 2`).
const POINT4_WORDS: [[u16; 32]; 4] = point_words(2, 16);

/// `vpermw` controls: lane w of register m takes code `(per · m + w / lanes) % 32`.
const fn point_words(lanes: usize, per: usize) -> [[u16; 32]; 4] {
    let mut t = [[0u16; 32]; 4];
    let mut m = 0;
    while m < 4 {
        let mut w = 0;
        while w < 32 {
            t[m][w] = ((per * m + w / lanes) % 32) as u16;
            w += 1;
        }
        m += 1;
    }
    t
}

/// `vpermw` controls for scales per 32 values, their codes one per qword (group g's in i16
/// element 4g): lanes 0..16 of register m take group 2m's, lanes 16..32 group 2m + 1's.
const PER32_SCALE_WORDS: [[u16; 32]; 4] = scale_words(4, false);
/// The same with group g's code in element g.
const DENSE32_SCALE_WORDS: [[u16; 32]; 4] = scale_words(1, false);
/// `vpermw` controls for scales per 16 values, their codes in i16 elements 0..16: lane w of
/// register m (pair sum w % 16 of group 2m + w / 16) takes code `4m + 2 · (w / 16) + (w % 16) / 8`.
const PER16_SCALE_WORDS: [[u16; 32]; 4] = scale_words(2, true);

/// `vpermw` controls: lane w of register m takes the code of group g = 2m + w / 16 at element
/// `stride · g`, plus 1 for the second half of the group where the scales are `per16`.
const fn scale_words(stride: usize, per16: bool) -> [[u16; 32]; 4] {
    let mut t = [[0u16; 32]; 4];
    let mut m = 0;
    while m < 4 {
        let mut w = 0;
        while w < 32 {
            let second = if per16 { (w % 16) / 8 } else { 0 };
            t[m][w] = (stride * (2 * m + w / 16) + second) as u16;
            w += 1;
        }
        m += 1;
    }
    t
}

/// `vpmultishiftqb` control moving bits 2j..2j + 2 of each qword to the bottom of byte j
/// (one point of eight 2-bit coordinates per qword).
const TWO_BIT_FIELDS: i64 = i64::from_le_bytes([0, 2, 4, 6, 8, 10, 12, 14]);
/// The same for two points of four 3-bit coordinates, at bits 0 and 32 of each qword.
const THREE_BIT_FIELDS: i64 = i64::from_le_bytes([0, 3, 6, 9, 32, 35, 38, 41]);

/// A register from 64 bytes.
///
/// # Safety
/// The CPU must have AVX-512 F.
#[inline(always)]
unsafe fn bytes64<T>(v: &T) -> __m512i {
    const { assert!(size_of::<T>() == 64) };
    // SAFETY: the load reads the 64 bytes of `v`.
    unsafe { _mm512_loadu_si512(v as *const T as *const __m512i) }
}

/// The codes of 32 points (u16 lanes of `index`, below `N`) in an `N`-entry table (`N` a
/// power of two from 128 to 1024): the entries of each 64 by the index's six low bits
/// (`vpermi2w`), then the results picked by its higher bits.
///
/// # Safety
/// The CPU must have AVX-512 F and BW.
#[inline(always)]
unsafe fn codes_of<const N: usize>(table: &[u16; N], index: __m512i) -> __m512i {
    const { assert!(N.is_power_of_two() && N >= 128 && N <= 1024) };
    // SAFETY: the loads read the table's 2N bytes; the caller has the features.
    unsafe {
        let mut q = [_mm512_setzero_si512(); 16];
        for (i, q) in q.iter_mut().take(N / 64).enumerate() {
            let t = table.as_ptr().add(64 * i);
            let (a, b) = (t as *const __m512i, t.add(32) as *const __m512i);
            *q = _mm512_permutex2var_epi16(_mm512_loadu_si512(a), index, _mm512_loadu_si512(b));
        }
        let (mut n, mut bit) = (N / 64, 0x40);
        while n > 1 {
            let high = _mm512_test_epi16_mask(index, _mm512_set1_epi16(bit));
            for i in 0..n / 2 {
                q[i] = _mm512_mask_blend_epi16(high, q[2 * i], q[2 * i + 1]);
            }
            (n, bit) = (n / 2, bit << 1);
        }
        q[0]
    }
}

/// The level bytes of 64 values from the 16-bit `codes` of their points: each point's code
/// into its bytes (`words`), each coordinate's bits to the bottom of its byte (`fields`), the
/// bytes looked up in `levels`.
///
/// # Safety
/// The CPU must have AVX-512 F, BW and VBMI.
#[inline(always)]
unsafe fn expand(codes: __m512i, words: &[u16; 32], fields: i64, levels: &[u8; 64]) -> __m512i {
    // SAFETY: the loads read constant tables; the caller has the features.
    unsafe {
        let points = _mm512_permutexvar_epi16(bytes64(words), codes);
        let fields = _mm512_multishift_epi64_epi8(_mm512_set1_epi64(fields), points);
        _mm512_permutexvar_epi8(fields, bytes64(levels))
    }
}

/// The magnitudes of 32 IQ2 points (eight 2-bit coordinates each) from their codes.
///
/// # Safety
/// The CPU must have AVX-512 F, BW and VBMI.
#[inline(always)]
unsafe fn expand_iq2(codes: __m512i) -> [__m512i; 4] {
    let mut m = [codes; 4];
    for (i, m) in m.iter_mut().enumerate() {
        // SAFETY: forwarded from the caller.
        *m = unsafe { expand(codes, &POINT8_WORDS[i], TWO_BIT_FIELDS, &IQ2_LEVELS) };
    }
    m
}

/// The magnitudes of 64 IQ3 points (four 3-bit coordinates each) from their codes, 32 in
/// each register, with level bytes `levels`.
///
/// # Safety
/// The CPU must have AVX-512 F, BW and VBMI.
#[inline(always)]
unsafe fn expand_iq3(codes: [__m512i; 2], levels: &[u8; 64]) -> [__m512i; 4] {
    let mut m = [codes[0]; 4];
    for (i, m) in m.iter_mut().enumerate() {
        // SAFETY: forwarded from the caller.
        *m = unsafe { expand(codes[i / 2], &POINT4_WORDS[i], THREE_BIT_FIELDS, levels) };
    }
    m
}

/// An i-quant that [`SignedZmm`] decodes (as magnitudes and sign masks).
pub(super) trait ZmmSigned: SignedGroups {
    /// Mask m: the signs of values 64m..64m + 64 (bit v set: value 64m + v is negative).
    ///
    /// # Safety
    /// The CPU must have AVX-512 F and BW, VBMI and GFNI.
    unsafe fn sign_masks(&self) -> [u64; 4];
    /// The magnitudes of values 64m..64m + 64 in register m.
    ///
    /// # Safety
    /// The CPU must have AVX-512 F, BW and VBMI.
    unsafe fn magnitudes(&self) -> [__m512i; 4];
    /// Where [`ZmmSigned::scale_values`] holds each pair sum's scale: the `vpermw` control of
    /// each register m.
    const SCALE_WORDS: &'static [[u16; 32]; 4];
    /// The scales as i16 elements (the grid types' `2s + 1` of their 4-bit codes s).
    ///
    /// # Safety
    /// The CPU must have AVX-512 F, BW and VBMI.
    unsafe fn scale_values(&self) -> __m512i;
}

impl ZmmSigned for BlockIq2Xxs {
    /// Each group's eight bytes: four grid indices, then the patterns in bits 0..28 of a u32.
    #[inline(always)]
    unsafe fn sign_masks(&self) -> [u64; 4] {
        // SAFETY: the caller has the features; `bytes64` reads the 64 bytes of `qs`.
        unsafe { pattern_masks(bytes64(&self.qs), [32, 39, 46, 53]) }
    }
    const SCALE_WORDS: &'static [[u16; 32]; 4] = &PER32_SCALE_WORDS;
    /// 32 points of eight 2-bit coordinates, a byte index each at bytes 8g..8g + 4.
    #[inline(always)]
    unsafe fn magnitudes(&self) -> [__m512i; 4] {
        // SAFETY: the caller has the features; `bytes64` reads the 64 bytes of `qs`.
        unsafe {
            let index = _mm512_maskz_permutexvar_epi8(
                0x5555_5555_5555_5555,
                bytes64(&IQ2XXS_INDEX_BYTES),
                bytes64(&self.qs),
            );
            let codes = codes_of(&IQ2XXS_CODES, index);
            expand_iq2(codes)
        }
    }
    #[inline(always)]
    unsafe fn scale_values(&self) -> __m512i {
        // SAFETY: as above; s in the top four bits of each group's qword.
        unsafe { odd(_mm512_srli_epi64::<60>(bytes64(&self.qs))) }
    }
}

/// IQ3_XXS's u32 after the 64 grid indices, one per group (sign patterns in bits 0..28, the
/// scale code in 28..32), widened to qwords.
///
/// # Safety
/// The CPU must have AVX-512 F.
#[inline(always)]
unsafe fn iq3xxs_aux(x: &BlockIq3Xxs) -> __m512i {
    // SAFETY: the load reads the 32 bytes after the indices; the caller has AVX-512 F.
    unsafe { _mm512_cvtepu32_epi64(_mm256_loadu_si256(x.qs.as_ptr().add(64) as *const __m256i)) }
}

impl ZmmSigned for BlockIq3Xxs {
    #[inline(always)]
    unsafe fn sign_masks(&self) -> [u64; 4] {
        // SAFETY: forwarded from the caller.
        unsafe { pattern_masks(iq3xxs_aux(self), [0, 7, 14, 21]) }
    }
    const SCALE_WORDS: &'static [[u16; 32]; 4] = &PER32_SCALE_WORDS;
    /// 64 points of four 3-bit coordinates, one index byte each in `qs[..64]`.
    #[inline(always)]
    unsafe fn magnitudes(&self) -> [__m512i; 4] {
        // SAFETY: the caller has the features; `bytes64` reads the 64 index bytes.
        unsafe {
            let q = _mm512_loadu_si512(self.qs.as_ptr() as *const __m512i);
            let low = _mm512_cvtepu8_epi16(_mm512_castsi512_si256(q));
            let high = _mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64::<1>(q));
            let codes = [codes_of(&IQ3XXS_CODES, low), codes_of(&IQ3XXS_CODES, high)];
            expand_iq3(codes, &IQ3XXS_LEVELS)
        }
    }
    #[inline(always)]
    unsafe fn scale_values(&self) -> __m512i {
        // SAFETY: forwarded from the caller; s in the top four bits of each group's u32.
        unsafe { odd(_mm512_srli_epi64::<28>(iq3xxs_aux(self))) }
    }
}

impl ZmmSigned for BlockIq2Xs {
    /// Each group's four 16-bit codes: a 9-bit grid index, then the pattern.
    #[inline(always)]
    unsafe fn sign_masks(&self) -> [u64; 4] {
        // SAFETY: the caller has the features; `bytes64` reads the 64 bytes of `qs`.
        unsafe { pattern_masks(bytes64(&self.qs), [9, 25, 41, 57]) }
    }
    const SCALE_WORDS: &'static [[u16; 32]; 4] = &PER16_SCALE_WORDS;
    /// 32 points of eight 2-bit coordinates, a 9-bit index each in the low bits of its u16.
    #[inline(always)]
    unsafe fn magnitudes(&self) -> [__m512i; 4] {
        // SAFETY: the caller has the features; `bytes64` reads the 64 bytes of `qs`.
        unsafe {
            let index = _mm512_and_si512(bytes64(&self.qs), _mm512_set1_epi16(511));
            let codes = codes_of(&IQ2XS_CODES, index);
            expand_iq2(codes)
        }
    }
    /// The low nibble of scale byte i for values 32i..32i + 16, its high one for the next 16.
    #[inline(always)]
    unsafe fn scale_values(&self) -> __m512i {
        // SAFETY: forwarded from the caller.
        unsafe { odd(nibbles(u64::from_le_bytes(self.scales))) }
    }
}

impl ZmmSigned for BlockIq3S {
    const SCALE_WORDS: &'static [[u16; 32]; 4] = &DENSE32_SCALE_WORDS;
    /// 64 points of four 3-bit coordinates, each index a byte of `qs` and a bit of `qh`
    /// (bit p of the eight `qh` bytes read as one u64: bit 8 of index p).
    #[inline(always)]
    unsafe fn magnitudes(&self) -> [__m512i; 4] {
        // SAFETY: the caller has the features; `bytes64` reads the 64 bytes of `qs`.
        unsafe {
            let q = bytes64(&self.qs);
            let high = u64::from_le_bytes(self.qh);
            let bit8 = _mm512_set1_epi16(0x100);
            let low = _mm512_cvtepu8_epi16(_mm512_castsi512_si256(q));
            let low = _mm512_mask_add_epi16(low, high as u32, low, bit8);
            let top = _mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64::<1>(q));
            let top = _mm512_mask_add_epi16(top, (high >> 32) as u32, top, bit8);
            let codes = [codes_of(&IQ3S_CODES, low), codes_of(&IQ3S_CODES, top)];
            expand_iq3(codes, &IQ3S_LEVELS)
        }
    }
    /// One sign bit per value, eight per byte.
    #[inline(always)]
    unsafe fn sign_masks(&self) -> [u64; 4] {
        std::array::from_fn(|m| u64::from_le_bytes(std::array::from_fn(|b| self.signs[8 * m + b])))
    }
    /// Nibble g of the four scale bytes (low nibble first) for group g: [`nibbles`]' steps in
    /// 128 bits (with the 256-bit helper this dot measured 4% slower on the Zen 4).
    #[inline(always)]
    unsafe fn scale_values(&self) -> __m512i {
        // SAFETY: register operations on the four scale bytes; the caller has the features.
        unsafe {
            let v = _mm_cvtepu8_epi32(_mm_cvtsi32_si128(i32::from_le_bytes(self.scales)));
            let codes = _mm_or_si128(v, _mm_slli_epi32::<12>(v));
            odd(_mm512_castsi128_si512(_mm_and_si128(
                codes,
                _mm_set1_epi32(0x000f_000f),
            )))
        }
    }
}

/// IQ4_NL's levels' magnitudes, in every 128-bit lane (a `vpshufb` table). The levels
/// ascend, so indices 0..8 are the negative ones.
const IQ4_MAGNITUDES: [u8; 64] = {
    let mut t = [0u8; 64];
    let mut i = 0;
    while i < 64 {
        t[i] = IQ4_NL_VALUES[i % 16].unsigned_abs();
        i += 1;
    }
    t
};

/// `gf2p8affineqb` matrices, one per qword, for a register of IQ4_XS index bytes laid out
/// [A, A, B, B] (A and B two groups' 16 bytes): the low nibbles kept in 128-bit lanes 0 and
/// 2, the high ones moved down in lanes 1 and 3 (output bit i is input bit i or i + 4).
const IQ4_NIBBLES: [i64; 8] = {
    const LOW: i64 = LOW_NIBBLE;
    const HIGH: i64 = HIGH_NIBBLE;
    [LOW, LOW, HIGH, HIGH, LOW, LOW, HIGH, HIGH]
};

/// Per lane of the same layout, bit 3 of the lane's nibble: clear for the negative levels.
const IQ4_POSITIVE: [u8; 64] = {
    let mut t = [0u8; 64];
    let mut i = 0;
    while i < 64 {
        t[i] = if (i / 16) % 2 == 0 { 0x08 } else { 0x80 };
        i += 1;
    }
    t
};

/// `vpmultishiftqb` controls for IQ4_XS's scales from the block's first eight bytes read as
/// a u64 (`d`, `scales_h`, `scales_l`): byte 2g takes bits from 32 + 4g (group g's low
/// nibble), byte 2g + 1 from 16 + 2g (its top two bits).
const IQ4XS_SCALE_FIELDS: [i64; 2] = {
    let mut c = [0u8; 16];
    let mut g = 0;
    while g < 8 {
        c[2 * g] = 32 + 4 * g as u8;
        c[2 * g + 1] = 16 + 2 * g as u8;
        g += 1;
    }
    qwords(c)
};

/// IQ4_XS register m's index bytes, `qs[32m..32m + 32]` (groups 2m and 2m + 1), laid out
/// [A, A, B, B] as [`IQ4_NIBBLES`] takes them.
///
/// # Safety
/// The CPU must have AVX-512 F.
#[inline(always)]
unsafe fn iq4xs_bytes(x: &BlockIq4Xs, m: usize) -> __m512i {
    // SAFETY: the load reads 32 of `qs`'s 128 bytes; the caller has AVX-512 F.
    unsafe {
        let q = _mm256_loadu_si256(x.qs.as_ptr().add(32 * m) as *const __m256i);
        let q = _mm512_castsi256_si512(q);
        _mm512_shuffle_i64x2::<0b0101_0000>(q, q)
    }
}

impl ZmmSigned for BlockIq4Xs {
    /// Group g's 16 bytes hold its values 0..16 in their low nibbles, 16..32 in their high
    /// ones: a value is negative where bit 3 of its nibble is clear.
    #[inline(always)]
    unsafe fn sign_masks(&self) -> [u64; 4] {
        // SAFETY: forwarded from the caller.
        unsafe {
            let positive = bytes64(&IQ4_POSITIVE);
            std::array::from_fn(|m| _mm512_testn_epi8_mask(iq4xs_bytes(self, m), positive))
        }
    }
    /// The nibbles of each 32 bytes in value order, looked up in [`IQ4_MAGNITUDES`].
    #[inline(always)]
    unsafe fn magnitudes(&self) -> [__m512i; 4] {
        // SAFETY: forwarded from the caller.
        unsafe {
            let matrices = bytes64(&IQ4_NIBBLES);
            std::array::from_fn(|m| {
                let nibbles = _mm512_gf2p8affine_epi64_epi8::<0>(iq4xs_bytes(self, m), matrices);
                _mm512_shuffle_epi8(bytes64(&IQ4_MAGNITUDES), nibbles)
            })
        }
    }
    const SCALE_WORDS: &'static [[u16; 32]; 4] = &DENSE32_SCALE_WORDS;
    /// `(low | high << 4) − 32` per group: the two fields of each by one `vpmultishiftqb`,
    /// masked, joined by `maddubs` with (1, 16).
    #[inline(always)]
    unsafe fn scale_values(&self) -> __m512i {
        let high = (self.scales_h.get() as u64) << 16;
        let head = high | (u32::from_le_bytes(self.scales_l) as u64) << 32;
        // SAFETY: register operations; the caller has the features.
        unsafe {
            let [lo, hi] = IQ4XS_SCALE_FIELDS;
            let fields =
                _mm_multishift_epi64_epi8(_mm_set_epi64x(hi, lo), _mm_set1_epi64x(head as i64));
            let fields = _mm_and_si128(fields, _mm_set1_epi16(0x030f));
            let codes = _mm_maddubs_epi16(fields, _mm_set1_epi16(0x1001));
            _mm512_castsi128_si512(_mm_sub_epi16(codes, _mm_set1_epi16(32)))
        }
    }
}

/// The 16 nibbles of `bytes` as i16 elements: element 2i the low nibble of byte i, 2i + 1
/// its high one.
///
/// # Safety
/// The CPU must have AVX2.
#[inline(always)]
unsafe fn nibbles(bytes: u64) -> __m512i {
    // SAFETY: register operations; the caller has the features.
    unsafe {
        let v = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(bytes as i64));
        // the high nibble to bits 16..20 (the low one's copy at 12..16 masked off)
        let codes = _mm256_or_si256(v, _mm256_slli_epi32::<12>(v));
        _mm512_castsi256_si512(_mm256_and_si256(codes, _mm256_set1_epi32(0x000f_000f)))
    }
}

/// The grid types' scales `2s + 1` of i16 codes s.
///
/// # Safety
/// The CPU must have AVX-512 F and BW.
#[inline(always)]
unsafe fn odd(codes: __m512i) -> __m512i {
    // SAFETY: register operations; the caller has the features.
    unsafe { _mm512_add_epi16(_mm512_add_epi16(codes, codes), _mm512_set1_epi16(1)) }
}

/// `x` decoded.
///
/// # Safety
/// The CPU must have AVX-512 F, BW and VBMI, GFNI and F16C.
#[inline(always)]
unsafe fn decode<B: ZmmSigned>(x: &B) -> ZmmGroups {
    // SAFETY: forwarded from the caller.
    unsafe {
        let s = x.scale_values();
        let mut scales = [s; 4];
        for (m, sc) in scales.iter_mut().enumerate() {
            *sc = _mm512_permutexvar_epi16(bytes64(&B::SCALE_WORDS[m]), s);
        }
        ZmmGroups {
            magnitudes: x.magnitudes(),
            signs: x.sign_masks(),
            scales,
            d: half(x.d()),
        }
    }
}

/// The sign masks of a super-block whose group g has its four 7-bit patterns at bit
/// `offsets[l]` of qword g of `words`: each pattern moved to a byte, its parity appended,
/// each qword's low half taken (group 2m's 32 bits and 2m + 1's in mask m).
///
/// # Safety
/// The CPU must have AVX-512 F and BW, VBMI and GFNI.
#[inline(always)]
unsafe fn pattern_masks(words: __m512i, offsets: [u8; 4]) -> [u64; 4] {
    let [a, b, c, d] = offsets;
    let control = _mm512_set1_epi64(i64::from_le_bytes([a, b, c, d, 0, 0, 0, 0]));
    // SAFETY: register operations; the caller has the features.
    unsafe {
        let patterns = _mm512_multishift_epi64_epi8(control, words);
        let signs = _mm512_gf2p8affine_epi64_epi8::<0>(patterns, _mm512_set1_epi64(WITH_PARITY));
        std::mem::transmute::<__m256i, [u64; 4]>(_mm512_cvtepi64_epi32(signs))
    }
}

/// `sumi` plus the products of `x`'s values 64m..64m + 64 with `y`'s, weighed by their
/// scales.
///
/// # Safety
/// The CPU must have AVX-512 F, BW and VNNI.
#[inline(always)]
unsafe fn group_pair(sumi: __m512i, x: &ZmmGroups, y: &BlockQ8K, m: usize) -> __m512i {
    // SAFETY: the load reads 64 of y's 256 levels; the caller has the features.
    unsafe {
        let q = _mm512_loadu_si512(y.qs.as_ptr().add(64 * m) as *const __m512i);
        let q = _mm512_mask_sub_epi8(q, x.signs[m], _mm512_setzero_si512(), q);
        let pairs = _mm512_maddubs_epi16(x.magnitudes[m], q);
        _mm512_dpwssd_epi32(sumi, pairs, x.scales[m])
    }
}

/// `acc` plus the decoded super-block `x` dotted with `y`: per register, the activations
/// negated under the signs, `maddubs` with the magnitudes, `vpdpwssd` with the scales (two
/// chains), the halves and chains added, then [`combine`].
///
/// # Safety
/// The CPU must have AVX-512 F, BW and VNNI, and FMA.
#[inline(always)]
unsafe fn dot_groups<B: KCombine>(x: &ZmmGroups, y: &BlockQ8K, acc: KAcc) -> KAcc {
    // SAFETY: the caller has the features; the loads read 64 of y's 256 levels each.
    unsafe {
        let (mut even, mut odd) = (_mm512_setzero_si512(), _mm512_setzero_si512());
        for m in (0..QK_K / 64).step_by(2) {
            even = group_pair(even, x, y, m);
            odd = group_pair(odd, x, y, m + 1);
        }
        let sumi = _mm512_add_epi32(even, odd);
        let sumi = _mm256_add_epi32(
            _mm512_castsi512_si256(sumi),
            _mm512_extracti64x4_epi64::<1>(sumi),
        );
        combine::<B>(x.d, 0.0, y.d.get(), sumi, _mm256_setzero_si256(), acc)
    }
}

impl<B: ZmmSigned> KDecode<B> for SignedZmm {
    type Unpacked = ZmmGroups;
    #[inline(always)]
    unsafe fn unpack(x: &B) -> ZmmGroups {
        // SAFETY: forwarded from the caller.
        unsafe { decode(x) }
    }
    #[inline(always)]
    unsafe fn dot(x: &ZmmGroups, y: &BlockQ8K, acc: KAcc) -> KAcc {
        // SAFETY: forwarded from the caller.
        unsafe { dot_groups::<B>(x, y, acc) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quants::KSIGNS_IQ2XS;

    /// `v`'s bytes through `gf2p8affineqb` with [`WITH_PARITY`].
    #[target_feature(enable = "avx512f,avx512bw,gfni")]
    unsafe fn with_parity(v: [u8; 64]) -> [u8; 64] {
        // SAFETY: a register operation; the caller has the features.
        unsafe {
            let v = std::mem::transmute::<[u8; 64], __m512i>(v);
            let m = _mm512_set1_epi64(WITH_PARITY);
            std::mem::transmute(_mm512_gf2p8affine_epi64_epi8::<0>(v, m))
        }
    }

    /// The matrix gives GGML's `ksigns` for every 7-bit pattern, whatever bit 7 holds.
    #[test]
    fn parity_matrix_completes_every_pattern_as_ksigns() {
        if !(available() && super::super::Isa::Avx512.available()) {
            eprintln!("skipped: no AVX-512 VBMI and GFNI");
            return;
        }
        for half in 0..2 {
            // every pattern once, bit 7 set on the odd ones
            let input: [u8; 64] =
                std::array::from_fn(|i| (64 * half + i) as u8 | (0x80 * (i as u8 & 1)));
            // SAFETY: the CPU has the features (checked above).
            let out = unsafe { with_parity(input) };
            for (i, o) in input.iter().zip(out) {
                assert_eq!(o, KSIGNS_IQ2XS[(i & 0x7f) as usize], "pattern {i:#x}");
            }
        }
    }
}
