//! The grid i-quants decoded by byte permutes on AVX-512 with VBMI and GFNI ([`GridZmm`]):
//! a whole super-block at once, in vector registers, where the 256-bit decoders
//! ([`iquant_x86`](super::iquant_x86)) read each grid point by a scalar load.
//!
//! The grid's points are stored compactly as GGML's `kgrid` codes (two bits per coordinate,
//! IQ2_XXS's 256 points in 512 bytes, eight registers): one `vpermb` gathers the super-block's
//! 32 indices into 16-bit lanes, four `vpermi2w` and three blends look up their codes, and per
//! 64 values a `vpermw` (each point's code into its eight bytes), a `vpmultishiftqb` (each
//! coordinate's two bits to the bottom of its byte) and a `vpermb` (the level bytes) give the
//! magnitudes. The signs come from the 7-bit patterns as in [`sign_patterns`](super::sign_patterns)
//! and negate the activations under a mask; `maddubs` and `vpdpwssd` with the scales then
//! make the same pair sums and i32 lanes as GGML's AVX2 dot (lane k of each half: values
//! 4k..4k + 4 of its group; the halves added), so the dots are its bits.

// the AVX-512 intrinsics, as in the crate's other AVX-512 kernels (stable since Rust 1.89)
#![allow(clippy::incompatible_msrv)]

use std::arch::x86_64::*;

use super::kquant_x86::{combine, KAcc, KDecode};
use super::sign_patterns::{pattern_signs, PatternGroups};
use super::x86::half;
use crate::quants::{BlockIq2Xxs, BlockQ8K, IQ2_LEVEL_BYTES, KGRID_2BIT_256};
use crate::QK_K;

/// The 512-bit kernels of the grid i-quants on AVX-512 VBMI and GFNI ([`KDecode`]).
pub(super) struct GridZmm;

/// One super-block decoded for [`GridZmm`]'s dot: per 64 values (two groups of 32), their
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

/// IQ2_XXS's grid codes, for [`codes256`].
static IQ2XXS_CODES: [u16; 256] = KGRID_2BIT_256;

/// A `vpermb` table giving byte i the level of its two low bits (IQ2's three level bytes).
const IQ2_LEVELS: [u8; 64] = {
    let mut t = [0u8; 64];
    let mut i = 0;
    while i < 64 {
        if i % 4 < 3 {
            t[i] = IQ2_LEVEL_BYTES[i % 4];
        }
        i += 1;
    }
    t
};

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
/// `8m + w / 4` (four lanes, eight bytes, per point).
const POINT_WORDS: [[u16; 32]; 4] = {
    let mut t = [[0u16; 32]; 4];
    let mut m = 0;
    while m < 4 {
        let mut w = 0;
        while w < 32 {
            t[m][w] = (8 * m + w / 4) as u16;
            w += 1;
        }
        m += 1;
    }
    t
};

/// `vpermw` controls for the scales: lanes 0..16 take i16 element `4 · 2m` (group 2m's scale
/// in the low element of its qword), lanes 16..32 element `4 · (2m + 1)`.
const SCALE_WORDS: [[u16; 32]; 4] = {
    let mut t = [[0u16; 32]; 4];
    let mut m = 0;
    while m < 4 {
        let mut w = 0;
        while w < 32 {
            t[m][w] = (4 * (2 * m + w / 16)) as u16;
            w += 1;
        }
        m += 1;
    }
    t
};

/// `vpmultishiftqb` control moving bits 2j..2j + 2 of each qword to the bottom of byte j.
const TWO_BIT_FIELDS: i64 = i64::from_le_bytes([0, 2, 4, 6, 8, 10, 12, 14]);

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

/// The codes of 32 points (u16 lanes of `index`, below 256) in a 256-entry table.
///
/// # Safety
/// The CPU must have AVX-512 F and BW.
#[inline(always)]
unsafe fn codes256(table: &[u16; 256], index: __m512i) -> __m512i {
    // SAFETY: the loads read the table's 512 bytes; the caller has the features.
    unsafe {
        let mut t = [_mm512_setzero_si512(); 8];
        for (r, t) in t.iter_mut().enumerate() {
            *t = _mm512_loadu_si512(table.as_ptr().add(32 * r) as *const __m512i);
        }
        // entries 64q..64q + 64 by the index's six low bits
        let mut q = [_mm512_setzero_si512(); 4];
        for (i, q) in q.iter_mut().enumerate() {
            *q = _mm512_permutex2var_epi16(t[2 * i], index, t[2 * i + 1]);
        }
        let bit6 = _mm512_test_epi16_mask(index, _mm512_set1_epi16(0x40));
        let bit7 = _mm512_test_epi16_mask(index, _mm512_set1_epi16(0x80));
        let low = _mm512_mask_blend_epi16(bit6, q[0], q[1]);
        let high = _mm512_mask_blend_epi16(bit6, q[2], q[3]);
        _mm512_mask_blend_epi16(bit7, low, high)
    }
}

/// The level bytes of 64 values, points `8m..8m + 8` of `codes` (two bits per coordinate).
///
/// # Safety
/// The CPU must have AVX-512 F, BW and VBMI.
#[inline(always)]
unsafe fn expand2(codes: __m512i, m: usize) -> __m512i {
    // SAFETY: the loads read constant tables; the caller has the features.
    unsafe {
        let points = _mm512_permutexvar_epi16(bytes64(&POINT_WORDS[m]), codes);
        let fields = _mm512_multishift_epi64_epi8(_mm512_set1_epi64(TWO_BIT_FIELDS), points);
        _mm512_permutexvar_epi8(fields, bytes64(&IQ2_LEVELS))
    }
}

/// IQ2_XXS's super-block decoded.
///
/// # Safety
/// The CPU must have AVX-512 F, BW and VBMI, GFNI and F16C.
#[inline(always)]
unsafe fn iq2xxs_decode(x: &BlockIq2Xxs) -> ZmmGroups {
    // SAFETY: the caller has the features; `bytes64` reads the 64 bytes of `qs`.
    unsafe {
        let qs = bytes64(&x.qs);
        let index =
            _mm512_maskz_permutexvar_epi8(0x5555_5555_5555_5555, bytes64(&IQ2XXS_INDEX_BYTES), qs);
        let codes = codes256(&IQ2XXS_CODES, index);
        // each group's scale 2s + 1, s in the top four bits of its qword
        let s = _mm512_srli_epi64::<60>(qs);
        let s = _mm512_or_si512(_mm512_add_epi64(s, s), _mm512_set1_epi64(1));
        let (mut magnitudes, mut scales) = ([_mm512_setzero_si512(); 4], [s; 4]);
        for m in 0..4 {
            magnitudes[m] = expand2(codes, m);
            scales[m] = _mm512_permutexvar_epi16(bytes64(&SCALE_WORDS[m]), s);
        }
        ZmmGroups {
            magnitudes,
            signs: sign_masks(x),
            scales,
            d: half(x.d),
        }
    }
}

/// The sign masks of `x`'s four pairs of groups: group 2m's 32 bits, then 2m + 1's.
///
/// # Safety
/// The CPU must have AVX-512 F and BW, VBMI and GFNI.
#[inline(always)]
unsafe fn sign_masks<B: PatternGroups>(x: &B) -> [u64; 4] {
    // SAFETY: forwarded from the caller; a register operation.
    unsafe {
        let signs = pattern_signs(x);
        // each qword's low half, in order
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
unsafe fn dot_groups(x: &ZmmGroups, y: &BlockQ8K, acc: KAcc) -> KAcc {
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
        combine::<BlockIq2Xxs>(x.d, 0.0, y.d.get(), sumi, _mm256_setzero_si256(), acc)
    }
}

impl KDecode<BlockIq2Xxs> for GridZmm {
    type Unpacked = ZmmGroups;
    #[inline(always)]
    unsafe fn unpack(x: &BlockIq2Xxs) -> ZmmGroups {
        // SAFETY: forwarded from the caller.
        unsafe { iq2xxs_decode(x) }
    }
    #[inline(always)]
    unsafe fn dot(x: &ZmmGroups, y: &BlockQ8K, acc: KAcc) -> KAcc {
        // SAFETY: forwarded from the caller.
        unsafe { dot_groups(x, y, acc) }
    }
}
