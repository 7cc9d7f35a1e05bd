//! The 7-bit sign patterns of IQ2_XXS, IQ2_XS and IQ3_XXS decoded for a whole super-block in
//! three vector instructions, on AVX-512 with VBMI and GFNI ([`SignPatterns`]): one
//! `vpmultishiftqb` moves each group's four patterns into four bytes, one `gf2p8affineqb`
//! completes each byte with its parity bit (GGML's `ksigns` table: the eighth sign makes the
//! count of negative values even), and group g's 32 sign bits are then the low half of
//! qword g, which [`SignedYmm`](super::iquant_x86::SignedYmm) applies as a mask. Per group
//! that replaces four table lookups and a dozen shifts, masks and ORs in general registers
//! (the [`SignMask`](super::iquant_x86::SignMask) and
//! [`SignBytes`](super::iquant_x86::SignBytes) decoders); the grid points are read as there.
//! The products are the same, so the dots are too.

// the AVX-512 intrinsics, as in the crate's other AVX-512 kernels (stable since Rust 1.89)
#![allow(clippy::incompatible_msrv)]

use std::arch::x86_64::*;

use super::iquant_x86::{negate_under, points8, words, SignApply, SignedGroups};
use crate::quants::{BlockIq2Xs, BlockIq2Xxs, BlockIq3Xxs};
use crate::quants::{IQ2XS_GRID, IQ2XXS_GRID, IQ3XXS_GRID};

/// Whether this CPU has what [`SignPatterns`] needs beyond the AVX-512 path's features.
pub(super) fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx512vbmi") && std::arch::is_x86_feature_detected!("gfni")
}

/// The `gf2p8affineqb` matrix that keeps a byte's bits 0..7 and sets bit 7 to the parity of
/// bits 0..7: output bit i is the parity of the input ANDed with byte 7 − i of the matrix
/// (bit i alone for i < 7, the seven low bits for bit 7).
const WITH_PARITY: i64 = 0x0102_0408_1020_407f;

/// A grid i-quant whose signs are four 7-bit patterns per group of 32 values, completed to
/// even parity ([`SignPatterns`]).
pub(super) trait PatternGroups: SignedGroups {
    /// The bit offsets of group g's four patterns in qword g of [`PatternGroups::pattern_words`].
    const OFFSETS: [u8; 4];
    /// Qword g: the 64 bits holding group g's patterns.
    ///
    /// # Safety
    /// The CPU must have AVX-512 F.
    unsafe fn pattern_words(&self) -> __m512i;
    /// The magnitudes of values 32g..32g + 32 (the grid points).
    ///
    /// # Safety
    /// The CPU must have AVX2.
    unsafe fn points(&self, g: usize) -> __m256i;
}

impl PatternGroups for BlockIq2Xxs {
    /// Each group's eight bytes: four grid indices, then the patterns in bits 0..28 of a u32.
    const OFFSETS: [u8; 4] = [32, 39, 46, 53];
    #[inline(always)]
    unsafe fn pattern_words(&self) -> __m512i {
        // SAFETY: the load reads the 64 bytes of `qs`; the caller has AVX-512 F.
        unsafe { _mm512_loadu_si512(self.qs.as_ptr() as *const __m512i) }
    }
    #[inline(always)]
    unsafe fn points(&self, g: usize) -> __m256i {
        let q = &self.qs[8 * g..8 * g + 4];
        // SAFETY: the caller has AVX2.
        unsafe { words(std::array::from_fn(|l| IQ2XXS_GRID[q[l] as usize])) }
    }
}

impl PatternGroups for BlockIq2Xs {
    /// Each group's four 16-bit codes: a 9-bit grid index, then the pattern.
    const OFFSETS: [u8; 4] = [9, 25, 41, 57];
    #[inline(always)]
    unsafe fn pattern_words(&self) -> __m512i {
        // SAFETY: the load reads the 64 bytes of `qs`; the caller has AVX-512 F.
        unsafe { _mm512_loadu_si512(self.qs.as_ptr() as *const __m512i) }
    }
    #[inline(always)]
    unsafe fn points(&self, g: usize) -> __m256i {
        let q = &self.qs[4 * g..4 * g + 4];
        // SAFETY: the caller has AVX2.
        unsafe {
            words(std::array::from_fn(|l| {
                IQ2XS_GRID[(q[l].get() & 511) as usize]
            }))
        }
    }
}

impl PatternGroups for BlockIq3Xxs {
    /// The patterns in bits 0..28 of each group's u32 after the 64 grid indices, widened
    /// to a qword.
    const OFFSETS: [u8; 4] = [0, 7, 14, 21];
    #[inline(always)]
    unsafe fn pattern_words(&self) -> __m512i {
        // SAFETY: the load reads the 32 bytes after the indices; the caller has AVX-512 F.
        unsafe {
            let aux = _mm256_loadu_si256(self.qs.as_ptr().add(64) as *const __m256i);
            _mm512_cvtepu32_epi64(aux)
        }
    }
    #[inline(always)]
    unsafe fn points(&self, g: usize) -> __m256i {
        let q = &self.qs[8 * g..8 * g + 8];
        // SAFETY: the caller has AVX2.
        unsafe { points8(&IQ3XXS_GRID, std::array::from_fn(|j| q[j] as usize)) }
    }
}

/// The signs of all eight groups of `x` as bits: group g's 32 in the low half of qword g.
///
/// # Safety
/// The CPU must have AVX-512 F and BW, VBMI and GFNI.
#[inline(always)]
pub(super) unsafe fn pattern_signs<B: PatternGroups>(x: &B) -> __m512i {
    let [a, b, c, d] = B::OFFSETS;
    let control = _mm512_set1_epi64(i64::from_le_bytes([a, b, c, d, 0, 0, 0, 0]));
    // SAFETY: register operations; the caller has the features.
    unsafe {
        let patterns = _mm512_multishift_epi64_epi8(control, x.pattern_words());
        _mm512_gf2p8affine_epi64_epi8::<0>(patterns, _mm512_set1_epi64(WITH_PARITY))
    }
}

/// Signs from 7-bit patterns, decoded per super-block ([`pattern_signs`]) and applied as a mask:
/// AVX-512 BW and VL, VBMI and GFNI.
pub(super) struct SignPatterns;

impl<B: PatternGroups> SignApply<B> for SignPatterns {
    type Signs = u32;
    type Shared = [u32; 16];
    #[inline(always)]
    unsafe fn shared(x: &B) -> [u32; 16] {
        // SAFETY: forwarded from the caller.
        unsafe { std::mem::transmute::<__m512i, [u32; 16]>(pattern_signs(x)) }
    }
    #[inline(always)]
    unsafe fn decode(x: &B, shared: &[u32; 16], g: usize) -> (__m256i, u32) {
        // SAFETY: forwarded from the caller.
        (unsafe { x.points(g) }, shared[2 * g])
    }
    #[inline(always)]
    unsafe fn apply(q: __m256i, s: u32) -> __m256i {
        // SAFETY: forwarded from the caller.
        unsafe { negate_under(q, s) }
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
