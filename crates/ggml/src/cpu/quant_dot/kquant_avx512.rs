//! AVX-512 row dots of the k-quants against Q8_K activations: a super-block's 256 levels
//! unpacked into four 512-bit registers (register m holds the 32-value chunks 2m and 2m + 1
//! of [`Unpacked::levels`](super::kquant_x86::Unpacked), one per 256-bit half), each dotted
//! with 64 activation bytes by one `maddubs` and one VNNI `vpdpwssd` (the group scales'
//! multiply and the sum folded into one instruction), against two 256-bit `maddubs`, `madd`
//! and `add` each in the 256-bit kernels: half the instructions per super-block. The sums run
//! in two chains of `vpdpwssd`.
//!
//! Q4_K and Q6_K unpack so on every AVX-512 CPU ([`Zmm<false>`](Zmm)). Where the CPU has GFNI
//! (and VBMI: the kernels' shared entry), `gf2p8affineqb` moves the bit fields into place, one
//! instruction for each shift-and-mask, a different field per 256-bit half where the halves
//! take different ones ([`Zmm<true>`](Zmm): Q2_K, Q3_K, Q4_K, Q5_K, Q6_K). On the Zen 4, one
//! thread, weights in L2, ns per super-block: Q4_K 7.0 → 6.3 and Q6_K 6.5 → 6.1 (from
//! `Zmm<false>`), Q2_K 6.7 → 5.8, Q3_K 10.3 → 8.5 (its scales by two `vpmultishiftqb`
//! besides) and Q5_K 7.8 → 7.65 (from the 256-bit kernels). Q4_K's and Q5_K's scales and
//! minimums by `vpmultishiftqb` the same way were slower (Q4_K 6.25 → 7.75) and are decoded in
//! general registers.
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
use crate::quants::{BlockQ2K, BlockQ3K, BlockQ4K, BlockQ5K, BlockQ6K, BlockQ8K};

/// The 512-bit kernels ([`KDecode`] for Q4_K and Q6_K; with `GFNI`, on CPUs that have it, also
/// for Q2_K, Q3_K and Q5_K): with `GFNI` the bit fields are moved into place by
/// `gf2p8affineqb`, one instruction for a shift and a mask (and a different shift per half
/// where the halves take different fields).
pub(super) struct Zmm<const GFNI: bool>;

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

impl ZUnpacked {
    /// A super-block of `levels` stored `offset` above their values, with a signed scale per
    /// 16 values (the i8 bytes of `s`) and super-block scale `d` (Q3_K, Q6_K): the offset is
    /// taken off through the activations' group sums.
    ///
    /// # Safety
    /// The CPU must have AVX-512F.
    #[inline(always)]
    unsafe fn offset(levels: [__m512i; 4], s: __m128i, d: f32, offset: f32) -> ZUnpacked {
        // SAFETY: register operations; the caller has AVX-512F.
        unsafe {
            ZUnpacked {
                levels,
                scales: both(even_odd(s, true)),
                corr: _mm256_cvtepi8_epi16(s),
                d,
                corr_d: -offset * d,
            }
        }
    }
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

/// The `gf2p8affineqb` matrix that moves bits `from..from + n` of each byte to bits
/// `to..to + n` and clears the others (output bit i is the parity of the input ANDed with the
/// matrix's byte 7 − i).
const fn bit_field(from: u32, to: u32, n: u32) -> i64 {
    let mut m = 0i64;
    let mut k = 0;
    while k < n {
        m |= (1i64 << (from + k)) << (8 * (7 - (to + k)));
        k += 1;
    }
    m
}

/// `gf2p8affineqb` matrices: a byte's low nibble kept, its high nibble moved down.
pub(super) const LOW_NIBBLE: i64 = bit_field(0, 0, 4);
/// See [`LOW_NIBBLE`].
pub(super) const HIGH_NIBBLE: i64 = bit_field(4, 0, 4);

/// `v`'s bytes through `gf2p8affineqb` with matrix `lo` in the low 256 bits, `hi` in the
/// high ones.
#[inline(always)]
unsafe fn affine_halves(v: __m512i, lo: i64, hi: i64) -> __m512i {
    // SAFETY: a register operation; the caller has AVX-512F and GFNI.
    unsafe {
        _mm512_gf2p8affine_epi64_epi8::<0>(v, _mm512_set_epi64(hi, hi, hi, hi, lo, lo, lo, lo))
    }
}

/// `(v AND m in every byte) OR w`, in one `vpternlogd`.
#[inline(always)]
unsafe fn and8_or(v: __m512i, m: u8, w: __m512i) -> __m512i {
    // SAFETY: a register operation; the caller has AVX-512F.
    unsafe { _mm512_ternarylogic_epi32::<0xea>(v, _mm512_set1_epi8(m as i8), w) }
}

/// `v` AND a byte mask of `m` in every byte.
#[inline(always)]
unsafe fn and8(v: __m512i, m: u8) -> __m512i {
    // SAFETY: register operations; the caller has AVX-512F.
    unsafe { _mm512_and_si512(v, _mm512_set1_epi8(m as i8)) }
}

/// A k-quant that [`Zmm<GFNI>`](Zmm) unpacks.
pub(super) trait ZUnpack<const GFNI: bool>: KUnpack {
    /// The super-block unpacked.
    ///
    /// # Safety
    /// The CPU must have AVX-512F/BW, F16C, and GFNI if `GFNI`.
    unsafe fn unpack_z(&self) -> ZUnpacked;
}

impl<B: ZUnpack<GFNI>, const GFNI: bool> KDecode<B> for Zmm<GFNI> {
    type Unpacked = ZUnpacked;
    #[inline(always)]
    unsafe fn unpack(x: &B) -> ZUnpacked {
        // SAFETY: forwarded from the caller.
        unsafe { x.unpack_z() }
    }
    #[inline(always)]
    unsafe fn dot(x: &ZUnpacked, y: &BlockQ8K, acc: KAcc) -> KAcc {
        // SAFETY: forwarded from the caller.
        unsafe { dot_z::<B>(x, y, acc) }
    }
}

impl<const GFNI: bool> ZUnpack<GFNI> for BlockQ4K {
    /// Byte l of `qs[32m..]` holds value 64m + l in its low nibble (chunk 2m) and 64m + 32 + l
    /// in its high one (chunk 2m + 1): the 32 bytes in both halves, the low nibbles kept in
    /// the low half, the high ones moved down in the high half.
    #[inline(always)]
    unsafe fn unpack_z(&self) -> ZUnpacked {
        // SAFETY: the caller has AVX-512F/BW, F16C and GFNI if `GFNI`; every load reads 32
        // bytes of `qs`.
        unsafe {
            let (scales, corr) = scale_min_regs(&self.scales);
            let levels = std::array::from_fn(|m| {
                let q = both(load(&self.qs[32 * m..]));
                if GFNI {
                    affine_halves(q, LOW_NIBBLE, HIGH_NIBBLE)
                } else {
                    and8(_mm512_mask_srli_epi16::<4>(q, 0xffff_0000, q), 0xf)
                }
            });
            ZUnpacked {
                levels,
                scales: both(scales),
                corr,
                d: half(self.d),
                corr_d: -half(self.dmin),
            }
        }
    }
}

impl<const GFNI: bool> ZUnpack<GFNI> for BlockQ6K {
    /// For n = 0, 1: the 64 bytes `ql[64n..]` give chunks 4n, 4n + 1 in their low nibbles and
    /// 4n + 2, 4n + 3 in their high ones; chunk 4n + s takes bits 2s, 2s + 1 of `qh[32n..]`'s
    /// bytes as its bits 4 and 5 (moved there per half by a variable 16-bit shift, or with
    /// `GFNI` by `gf2p8affineqb`).
    #[inline(always)]
    unsafe fn unpack_z(&self) -> ZUnpacked {
        // SAFETY: the caller has AVX-512F/BW and GFNI if `GFNI`; loads read 64 bytes inside
        // `ql`, 32 of `qh` and the 16 of `scales`.
        unsafe {
            let mut levels = [_mm512_setzero_si512(); 4];
            for n in 0..2 {
                let l = _mm512_loadu_si512(self.ql.as_ptr().add(64 * n) as *const __m512i);
                let h = both(load(&self.qh[32 * n..]));
                // bits (0, 1) → (4, 5) in the low half, bits (2, 3) in the high one; then
                // bits (4, 5) and (6, 7)
                let (h01, h23, high) = if GFNI {
                    (
                        affine_halves(h, bit_field(0, 4, 2), bit_field(2, 4, 2)),
                        affine_halves(h, bit_field(4, 4, 2), bit_field(6, 4, 2)),
                        affine_halves(l, HIGH_NIBBLE, HIGH_NIBBLE),
                    )
                } else {
                    (
                        and8(_mm512_sllv_epi16(h, halves16(4, 2)), 0x30),
                        and8(_mm512_srlv_epi16(h, halves16(0, 2)), 0x30),
                        and8(_mm512_srli_epi16::<4>(l), 0xf),
                    )
                };
                levels[2 * n] = and8_or(l, 0xf, h01);
                levels[2 * n + 1] = _mm512_or_si512(high, h23);
            }
            let s = _mm_loadu_si128(self.scales.as_ptr() as *const __m128i);
            ZUnpacked::offset(levels, s, half(self.d), 32.0)
        }
    }
}

/// Q5_K with GFNI: Q4_K's nibbles, and bit c of `qh`'s bytes as bit 4 of chunk c's levels.
impl ZUnpack<true> for BlockQ5K {
    #[inline(always)]
    unsafe fn unpack_z(&self) -> ZUnpacked {
        // SAFETY: the caller has AVX-512F/BW, F16C and GFNI; the loads read 32 bytes of `qs`
        // each and the 32 of `qh`.
        unsafe {
            let (scales, corr) = scale_min_regs(&self.scales);
            let qh = both(load(&self.qh));
            let levels = std::array::from_fn(|m| {
                let low = affine_halves(both(load(&self.qs[32 * m..])), LOW_NIBBLE, HIGH_NIBBLE);
                let c = 2 * m as u32;
                let high = affine_halves(qh, bit_field(c, 4, 1), bit_field(c + 1, 4, 1));
                _mm512_or_si512(low, high)
            });
            ZUnpacked {
                levels,
                scales: both(scales),
                corr,
                d: half(self.d),
                corr_d: -half(self.dmin),
            }
        }
    }
}

/// Register m of a super-block whose 32-value chunk c = 4n + s takes bits 2s, 2s + 1 of the
/// bytes `qs[32n..32n + 32]` (Q2_K's and Q3_K's two low bits): chunks 2m and 2m + 1, as
/// levels below 4.
///
/// # Safety
/// The CPU must have AVX-512F and GFNI; `qs` holds 64 bytes.
#[inline(always)]
unsafe fn two_bit_pairs(qs: &[u8], m: usize) -> __m512i {
    let (n, s) = (m / 2, 2 * (m % 2) as u32);
    // SAFETY: the load reads 32 bytes of `qs`; the caller has the features.
    unsafe {
        let q = both(load(&qs[32 * n..]));
        affine_halves(q, bit_field(2 * s, 0, 2), bit_field(2 * s + 2, 0, 2))
    }
}

/// Q2_K with GFNI: its 2-bit levels by [`two_bit_pairs`], its scales and minimums from the low
/// and high nibbles of its 16 scale bytes.
impl ZUnpack<true> for BlockQ2K {
    #[inline(always)]
    unsafe fn unpack_z(&self) -> ZUnpacked {
        // SAFETY: the caller has AVX-512F/BW, F16C and GFNI; the load reads the 16 scale
        // bytes.
        unsafe {
            let sm = _mm_loadu_si128(self.scales.as_ptr() as *const __m128i);
            let low4 = _mm_set1_epi8(0xf);
            let scales = _mm_and_si128(sm, low4);
            let mins = _mm_and_si128(_mm_srli_epi16::<4>(sm), low4);
            ZUnpacked {
                levels: std::array::from_fn(|m| two_bit_pairs(&self.qs, m)),
                scales: both(even_odd(scales, false)),
                corr: _mm256_cvtepu8_epi16(mins),
                d: half(self.d),
                corr_d: -half(self.dmin),
            }
        }
    }
}

/// `vpmultishiftqb` controls for Q3_K's scales: byte g takes, from bytes 0..8 of the scales
/// read as a u64, the bits from `8·(g % 8) + 4·(g / 8)` (its low nibble: a nibble of byte g % 8)
/// and, from bytes 8..12, the bits from `8·(g % 4) + 2·(g / 4) − 4` (its top two bits, brought
/// to bits 4 and 5: the control rotates within the qword).
const Q3K_SCALE_FIELDS: [[i64; 2]; 2] = {
    let (mut low, mut high) = ([0u8; 16], [0u8; 16]);
    let mut g = 0;
    while g < 16 {
        low[g] = (8 * (g % 8) + 4 * (g / 8)) as u8;
        high[g] = ((8 * (g % 4) + 2 * (g / 4) + 60) % 64) as u8;
        g += 1;
    }
    [qwords(low), qwords(high)]
};

/// Sixteen bytes as two little-endian qwords (for `_mm_set_epi64x(hi, lo)`).
pub(super) const fn qwords(b: [u8; 16]) -> [i64; 2] {
    let (mut lo, mut hi) = (0i64, 0i64);
    let mut i = 0;
    while i < 8 {
        lo |= (b[i] as i64) << (8 * i);
        hi |= (b[8 + i] as i64) << (8 * i);
        i += 1;
    }
    [lo, hi]
}

/// Q3_K's 16 six-bit scales minus 32 (i8, group order) by two `vpmultishiftqb`, as
/// `kquant_x86::q3k_scales` gives them.
///
/// # Safety
/// The CPU must have AVX-512 VBMI and VL.
#[inline(always)]
unsafe fn q3k_scales_vbmi(sc: &[u8; 12]) -> __m128i {
    let low = u64::from_le_bytes([sc[0], sc[1], sc[2], sc[3], sc[4], sc[5], sc[6], sc[7]]);
    let high = u32::from_le_bytes([sc[8], sc[9], sc[10], sc[11]]) as u64;
    let [[l0, l1], [h0, h1]] = Q3K_SCALE_FIELDS;
    // SAFETY: register operations; the caller has the features.
    unsafe {
        let low = _mm_multishift_epi64_epi8(_mm_set_epi64x(l1, l0), _mm_set1_epi64x(low as i64));
        let high = _mm_multishift_epi64_epi8(_mm_set_epi64x(h1, h0), _mm_set1_epi64x(high as i64));
        let high = _mm_and_si128(high, _mm_set1_epi8(0x30));
        // (low AND 0x0f) OR high
        let s = _mm_ternarylogic_epi32::<0xea>(low, _mm_set1_epi8(0x0f), high);
        _mm_sub_epi8(s, _mm_set1_epi8(32))
    }
}

/// Q3_K with GFNI: the two low bits by [`two_bit_pairs`], bit c of `hmask`'s bytes as bit 2
/// of chunk c's levels (stored as low + 4·high, the value level − 4).
impl ZUnpack<true> for BlockQ3K {
    #[inline(always)]
    unsafe fn unpack_z(&self) -> ZUnpacked {
        // SAFETY: the caller has AVX-512F/BW, F16C and GFNI; the load reads the 32 bytes of
        // `hmask`.
        unsafe {
            let hm = both(load(&self.hmask));
            let levels = std::array::from_fn(|m| {
                let c = 2 * m as u32;
                let high = affine_halves(hm, bit_field(c, 2, 1), bit_field(c + 1, 2, 1));
                _mm512_or_si512(two_bit_pairs(&self.qs, m), high)
            });
            ZUnpacked::offset(levels, q3k_scales_vbmi(&self.scales), half(self.d), 4.0)
        }
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
        // two chains (even and odd m): one would wait on each vpdpwssd's latency
        let mut sums = [_mm512_setzero_si512(); 2];
        for (m, &lv) in x.levels.iter().enumerate() {
            let q = _mm512_loadu_si512(y.qs.as_ptr().add(64 * m) as *const __m512i);
            // i16 element 2m of the low half's lanes, 2m + 1 of the high half's
            let e = |i: usize| ((2 * i as i16 + 1) << 8) | (2 * i as i16);
            let sc = _mm512_shuffle_epi8(x.scales, halves16(e(2 * m), e(2 * m + 1)));
            sums[m % 2] = _mm512_dpwssd_epi32(sums[m % 2], _mm512_maddubs_epi16(lv, q), sc);
        }
        let sumi = _mm512_add_epi32(sums[0], sums[1]);
        let sumi = _mm256_add_epi32(
            _mm512_castsi512_si256(sumi),
            _mm512_extracti64x4_epi64::<1>(sumi),
        );
        add_block::<B>(sumi, x.corr, x.d, x.corr_d, y, acc)
    }
}
