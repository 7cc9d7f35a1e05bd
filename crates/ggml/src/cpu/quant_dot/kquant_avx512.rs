//! AVX-512 row dots of Q4_K and Q6_K against Q8_K activations: a super-block's 256 levels
//! unpacked into four 512-bit registers (register m holds the 32-value chunks 2m and 2m + 1
//! of [`Unpacked::levels`](super::kquant_x86::Unpacked), one per 256-bit half), each dotted
//! with 64 activation bytes by one `maddubs` and one VNNI `vpdpwssd` (the group scales'
//! multiply and the sum folded into one instruction), against two 256-bit `maddubs`, `madd`
//! and `add` each in the 256-bit kernels: half the instructions per super-block.
//!
//! The two halves' i32 lanes are added at the end of the super-block, so lane k holds the
//! same exact integer Σ scale·level·y over values 4k..4k + 4 of every 32 as the 256-bit
//! kernels' lane k; from there the f32 steps are [`combine`](super::kquant_x86::combine)'s,
//! so the dots are bit for bit the 256-bit kernels' (GGML's x86 order).

// the AVX-512 intrinsics, as in the crate's other AVX-512 kernels (stable since Rust 1.89)
#![allow(clippy::incompatible_msrv)]

use std::arch::x86_64::*;

use super::kquant_x86::{add_block, even_odd, load, scale_min_regs, KAcc, KDecode, KUnpack};
use super::x86::half;
use crate::quants::{BlockQ4K, BlockQ6K, BlockQ8K};

/// The 512-bit kernels ([`KDecode`] for Q4_K and Q6_K).
pub(super) struct Zmm;

/// One super-block unpacked for [`Zmm`]'s dot.
pub(super) struct ZUnpacked {
    /// Levels 64m..64m + 64 in register m, as unsigned bytes below 64: 32-value chunk 2m in
    /// the low 256 bits, chunk 2m + 1 in the high ones.
    levels: [__m512i; 4],
    /// [`Unpacked::scales`](super::kquant_x86::Unpacked) in both 256-bit halves.
    scales: __m512i,
    /// The per-group weights of the activations' group sums (i16, group order).
    corr: __m256i,
    /// The super-block scale.
    d: f32,
    /// The factor of the correction sum.
    corr_d: f32,
}

/// `v` with both 256-bit halves `h`.
#[inline(always)]
unsafe fn both(h: __m256i) -> __m512i {
    // SAFETY: register operations; the caller has AVX-512F.
    unsafe { _mm512_broadcast_i64x4(h) }
}

/// A 512-bit register of 16-bit lanes: `lo` in the low 256 bits, `hi` in the high ones.
#[inline(always)]
unsafe fn halves16(lo: i16, hi: i16) -> __m512i {
    let rep = |v: i16| (v as u16 as u64) * 0x0001_0001_0001_0001;
    let (l, h) = (rep(lo) as i64, rep(hi) as i64);
    // SAFETY: register operations; the caller has AVX-512F.
    unsafe { _mm512_set_epi64(h, h, h, h, l, l, l, l) }
}

/// `v` AND a byte mask of `m` in every byte.
#[inline(always)]
unsafe fn and8(v: __m512i, m: u8) -> __m512i {
    // SAFETY: register operations; the caller has AVX-512F.
    unsafe { _mm512_and_si512(v, _mm512_set1_epi8(m as i8)) }
}

impl KDecode<BlockQ4K> for Zmm {
    type Unpacked = ZUnpacked;
    /// Byte l of `qs[32m..]` holds value 64m + l in its low nibble (chunk 2m) and 64m + 32 + l
    /// in its high one (chunk 2m + 1): the 32 bytes in both halves, the high half shifted
    /// down a nibble.
    #[inline(always)]
    unsafe fn unpack(x: &BlockQ4K) -> ZUnpacked {
        // SAFETY: the caller has AVX-512F/BW and F16C; every load reads 32 bytes of `qs`.
        unsafe {
            let (scales, corr) = scale_min_regs(&x.scales);
            let levels = std::array::from_fn(|m| {
                let q = both(load(&x.qs[32 * m..]));
                and8(_mm512_mask_srli_epi16::<4>(q, 0xffff_0000, q), 0xf)
            });
            ZUnpacked {
                levels,
                scales: both(scales),
                corr,
                d: half(x.d),
                corr_d: -half(x.dmin),
            }
        }
    }
    #[inline(always)]
    unsafe fn dot(x: &ZUnpacked, y: &BlockQ8K, acc: KAcc) -> KAcc {
        // SAFETY: forwarded from the caller.
        unsafe { dot_z::<BlockQ4K>(x, y, acc) }
    }
}

impl KDecode<BlockQ6K> for Zmm {
    type Unpacked = ZUnpacked;
    /// For n = 0, 1: the 64 bytes `ql[64n..]` give chunks 4n, 4n + 1 in their low nibbles and
    /// 4n + 2, 4n + 3 in their high ones; chunk 4n + s takes bits 2s, 2s + 1 of `qh[32n..]`'s
    /// bytes as its bits 4 and 5 (shifted there per half by a variable 16-bit shift).
    #[inline(always)]
    unsafe fn unpack(x: &BlockQ6K) -> ZUnpacked {
        // SAFETY: the caller has AVX-512F/BW; loads read 64 bytes inside `ql`, 32 of `qh` and
        // the 16 of `scales`.
        unsafe {
            let mut levels = [_mm512_setzero_si512(); 4];
            for n in 0..2 {
                let l = _mm512_loadu_si512(x.ql.as_ptr().add(64 * n) as *const __m512i);
                let h = both(load(&x.qh[32 * n..]));
                // bits (0, 1) → (4, 5) in the low half, bits (2, 3) in the high one; then
                // bits (4, 5) and (6, 7)
                let h01 = and8(_mm512_sllv_epi16(h, halves16(4, 2)), 0x30);
                let h23 = and8(_mm512_srlv_epi16(h, halves16(0, 2)), 0x30);
                levels[2 * n] = _mm512_or_si512(and8(l, 0xf), h01);
                levels[2 * n + 1] = _mm512_or_si512(and8(_mm512_srli_epi16::<4>(l), 0xf), h23);
            }
            let s = _mm_loadu_si128(x.scales.as_ptr() as *const __m128i);
            let d = half(x.d);
            ZUnpacked {
                levels,
                scales: both(even_odd(s, true)),
                corr: _mm256_cvtepi8_epi16(s),
                d,
                corr_d: -32.0 * d,
            }
        }
    }
    #[inline(always)]
    unsafe fn dot(x: &ZUnpacked, y: &BlockQ8K, acc: KAcc) -> KAcc {
        // SAFETY: forwarded from the caller.
        unsafe { dot_z::<BlockQ6K>(x, y, acc) }
    }
}

/// `acc` plus super-block `x` dotted with `y`: per register m, the pair sums of levels ×
/// activations (`maddubs`) times the scales of groups 4m..4m + 4 (one per 128-bit lane,
/// picked from [`ZUnpacked::scales`]' even/odd layout) added into 16 i32 lanes
/// (`vpdpwssd`), the halves added, then [`add_block`].
///
/// # Safety
/// The CPU must have AVX-512F/BW/VNNI and FMA.
#[inline(always)]
unsafe fn dot_z<B: KUnpack>(x: &ZUnpacked, y: &BlockQ8K, acc: KAcc) -> KAcc {
    // SAFETY: the caller has the features; loads read 64 of y's 256 levels each.
    unsafe {
        let mut sumi = _mm512_setzero_si512();
        for (m, &lv) in x.levels.iter().enumerate() {
            let q = _mm512_loadu_si512(y.qs.as_ptr().add(64 * m) as *const __m512i);
            // i16 element 2m of the low half's lanes, 2m + 1 of the high half's
            let e = |i: usize| ((2 * i as i16 + 1) << 8) | (2 * i as i16);
            let sc = _mm512_shuffle_epi8(x.scales, halves16(e(2 * m), e(2 * m + 1)));
            sumi = _mm512_dpwssd_epi32(sumi, _mm512_maddubs_epi16(lv, q), sc);
        }
        let sumi = _mm256_add_epi32(
            _mm512_castsi512_si256(sumi),
            _mm512_extracti64x4_epi64::<1>(sumi),
        );
        add_block::<B>(sumi, x.corr, x.d, x.corr_d, y, acc)
    }
}
