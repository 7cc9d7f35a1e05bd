//! AVX2 and AVX-512 VNNI row dot products of the 32-value block types (Q4_0, Q4_1, Q5_0,
//! Q5_1, Q8_0, IQ4_NL) against Q8_0 / Q8_1 activations: each block's 32 levels unpacked into
//! one 256-bit register of bytes, multiplied with the activation's bytes into eight i32 sums
//! (`maddubs` + `madd` on AVX2, one `vpdpbusd` with VNNI), converted and accumulated with the
//! block's scale into eight f32 lanes, reduced once per row. The tile kernels take four weight
//! rows at once in the same order per output (token generation's matrix-vector products read
//! four weight streams from memory together, and prefetch the rows after them); with VNNI the
//! four rows' blocks share 512-bit registers ([`tile_512`]).

// AVX-512 intrinsics are stable since Rust 1.89, above the workspace's declared 1.85 (as in
// kquant_avx512.rs).
#![allow(clippy::incompatible_msrv)]

use std::arch::x86_64::*;

use super::DotBlock;
use crate::quants::{
    BlockIq4Nl, BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0, BlockQ8_1, PackedF16,
    IQ4_NL_VALUES,
};

/// An activation block of 32 levels with one scale (Q8_0, Q8_1).
pub(super) trait Act32 {
    /// The scale and the levels.
    fn parts(&self) -> (PackedF16, &[i8; 32]);
}

impl Act32 for BlockQ8_0 {
    fn parts(&self) -> (PackedF16, &[i8; 32]) {
        (self.d, &self.qs)
    }
}

impl Act32 for BlockQ8_1 {
    fn parts(&self) -> (PackedF16, &[i8; 32]) {
        (self.d, &self.qs)
    }
}

/// A 32-value weight block whose levels fit one register of bytes.
pub(super) trait Simd32: DotBlock<Act: Act32> {
    /// Whether the levels are unsigned (0..32, the types with a minimum and Q8_1
    /// activations); else signed.
    const UNSIGNED: bool;
    /// For a signed type whose levels plus `BIAS` are below 32 (Q4_0: 8, Q5_0: 16), that
    /// bias; else 0 (the AVX2 band products multiply the biased levels as unsigned bytes).
    const BIAS: u8;
    /// The 32 levels as bytes in value order.
    ///
    /// # Safety
    /// The CPU must have AVX2.
    unsafe fn levels(&self) -> __m256i;
    /// The 32 levels plus [`Self::BIAS`] as bytes in value order: unsigned where the bias is
    /// not 0 (the unpacked bits as they are), else the levels.
    ///
    /// # Safety
    /// The CPU must have AVX2.
    unsafe fn biased(&self) -> __m256i;
    /// The levels of four blocks (one per weight row of a tile, [`tile_512`]) plus
    /// [`Self::BIAS`] as bytes in value order, two blocks per register ([`pairs`]).
    ///
    /// # Safety
    /// The CPU must have AVX-512 F and BW.
    unsafe fn pairs4(b: [&Self; TILE_ROWS]) -> [__m512i; 2];
    /// The block's scale.
    fn d(&self) -> PackedF16;
    /// The term added per block besides the scaled integer sum (`m · s` for Q8_1 pairs).
    ///
    /// # Safety
    /// The CPU must have F16C.
    unsafe fn extra(&self, y: &Self::Act) -> f32;
    /// [`Simd32::extra`] of four blocks in the four lanes (the same f32 products).
    ///
    /// # Safety
    /// The CPU must have F16C.
    unsafe fn extra4(b: [&Self; TILE_ROWS], y: &Self::Act) -> __m128;
}

/// Implements [`Simd32`] for a block type with a `d` field: its levels from `$levels` (given
/// the block), and `m · s` as the extra term when the type has a minimum.
macro_rules! simd32 {
    ($t:ty, signed($bias:expr), |$b:ident| $biased:expr, |$b4:ident| $pairs4:expr) => {
        // SAFETY: `extra4`'s caller has SSE.
        simd32!(@impl $t, false, $bias, |$b| $biased, |$b4| $pairs4, |_b, _y| 0.0,
            |_b, _y| unsafe { _mm_setzero_ps() });
    };
    ($t:ty, with_min, |$b:ident| $levels:expr, |$b4:ident| $levels4:expr) => {
        // SAFETY: `extra`'s and `extra4`'s callers have F16C.
        simd32!(@impl $t, true, 0, |$b| $levels, |$b4| $levels4,
            |b, y| unsafe { half(b.m) * half(y.s) },
            |b, y| unsafe { _mm_mul_ps(halves4(b.map(|b| b.m)), _mm_set1_ps(half(y.s))) });
    };
    (@impl $t:ty, $unsigned:expr, $bias:expr, |$b:ident| $biased:expr,
     |$b4:ident| $pairs4:expr, |$x:ident, $y:ident| $extra:expr,
     |$x4:ident, $y4:ident| $extra4:expr) => {
        impl Simd32 for $t {
            const UNSIGNED: bool = $unsigned;
            const BIAS: u8 = $bias;
            #[inline(always)]
            unsafe fn levels(&self) -> __m256i {
                // SAFETY: the caller has AVX2.
                unsafe {
                    if Self::BIAS > 0 {
                        _mm256_sub_epi8(self.biased(), _mm256_set1_epi8(Self::BIAS as i8))
                    } else {
                        self.biased()
                    }
                }
            }
            #[inline(always)]
            unsafe fn biased(&self) -> __m256i {
                let $b = self;
                // SAFETY: the caller has AVX2; the loads read the block's own bytes.
                unsafe { $biased }
            }
            #[inline(always)]
            unsafe fn pairs4($b4: [&Self; TILE_ROWS]) -> [__m512i; 2] {
                // SAFETY: the caller has AVX-512 F and BW; the loads read the blocks' own
                // bytes.
                unsafe { $pairs4 }
            }
            fn d(&self) -> PackedF16 {
                self.d
            }
            #[inline(always)]
            unsafe fn extra(&self, $y: &<$t as DotBlock>::Act) -> f32 {
                let $x = self;
                $extra
            }
            #[inline(always)]
            unsafe fn extra4($x4: [&Self; TILE_ROWS], $y4: &<$t as DotBlock>::Act) -> __m128 {
                $extra4
            }
        }
    };
}

/// The eight lanes of `v` summed.
///
/// # Safety
/// The CPU must have AVX.
#[inline(always)]
pub(super) unsafe fn hsum(v: __m256) -> f32 {
    // SAFETY: register operations; the caller has AVX.
    unsafe {
        hsum4(_mm_add_ps(
            _mm256_castps256_ps128(v),
            _mm256_extractf128_ps(v, 1),
        ))
    }
}

/// The eight i32 lanes of `v` summed (wrapping).
///
/// # Safety
/// The CPU must have AVX2.
#[inline(always)]
pub(super) unsafe fn hsum_i32(v: __m256i) -> i32 {
    // SAFETY: register operations; the caller has AVX2.
    unsafe {
        let h = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
        let h = _mm_add_epi32(h, _mm_shuffle_epi32::<0b01_00_11_10>(h));
        let h = _mm_add_epi32(h, _mm_shuffle_epi32::<0b10_11_00_01>(h));
        _mm_cvtsi128_si32(h)
    }
}

/// The four lanes of `h` summed as [`hsum`] sums its two halves' sum: lanes 0 + 2 and 1 + 3,
/// then those two.
///
/// # Safety
/// The CPU must have SSE3 (implied by AVX).
#[inline(always)]
unsafe fn hsum4(h: __m128) -> f32 {
    // SAFETY: register operations; the caller has SSE3.
    unsafe {
        let h = _mm_add_ps(h, _mm_movehl_ps(h, h));
        let h = _mm_add_ss(h, _mm_movehdup_ps(h));
        _mm_cvtss_f32(h)
    }
}

/// Bytes ahead of the block being read that the one-activation-row kernels prefetch, along
/// their weight row and on into the next rows (contiguous in a weight matrix).
pub(super) const PREFETCH_BYTES: usize = 2048;

/// Prefetches the cache lines of `len` bytes `ahead` bytes past `p`, into L1 (token
/// generation reads every weight once, from memory, and the hardware prefetcher stops at each
/// 4 KiB page). Prefetches never fault: the address is only computed, never dereferenced, so
/// one past the end of the weights is harmless.
///
/// # Safety
/// The CPU must have SSE (every x86-64 CPU).
#[inline(always)]
pub(super) unsafe fn prefetch(p: *const u8, ahead: usize, len: usize) {
    prefetch_into::<_MM_HINT_T0>(p.wrapping_add(ahead), len)
}

/// Prefetches the cache lines of the `len` bytes at `p` into the cache level `HINT` names
/// (`_MM_HINT_T0`: L1, `_MM_HINT_T1`: L2). Prefetches never fault: the address is only
/// computed, never dereferenced, so any address is harmless.
#[inline(always)]
pub(super) fn prefetch_into<const HINT: i32>(p: *const u8, len: usize) {
    for line in (0..len).step_by(64) {
        // SAFETY: a prefetch hint, valid for any address; SSE is in every x86-64 CPU.
        unsafe { _mm_prefetch::<HINT>(p.wrapping_add(line) as *const i8) };
    }
}

/// A half widened with F16C (one instruction; the software conversion takes a dozen).
///
/// # Safety
/// The CPU must have F16C.
#[inline(always)]
pub(super) unsafe fn half(h: PackedF16) -> f32 {
    // SAFETY: register operations; the caller has F16C.
    unsafe { _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h.to_bits() as i32))) }
}

/// A half widened with F16C into all eight lanes: the 16 bits broadcast (`vpbroadcastw`), then
/// converted. Unlike [`half`] then a broadcast, nothing merges into a register another
/// instruction wrote (a 16-bit insert into a live register made each block wait on the
/// previous block's FMA).
///
/// # Safety
/// The CPU must have AVX2 and F16C.
#[inline(always)]
pub(super) unsafe fn half8(h: PackedF16) -> __m256 {
    // SAFETY: register operations; the caller has AVX2 and F16C.
    unsafe { _mm256_cvtph_ps(_mm_set1_epi16(h.to_bits() as i16)) }
}

/// Value j of the low nibbles of `qs` in byte j, value j + 16 of the high ones in byte j + 16.
#[inline(always)]
unsafe fn nibbles(qs: &[u8; 16]) -> __m256i {
    // SAFETY: 16 readable bytes; the caller has AVX2.
    unsafe {
        // the 16 bytes in both halves (one load), the upper half shifted down a nibble
        let b = _mm256_broadcastsi128_si256(_mm_loadu_si128(qs.as_ptr() as *const __m128i));
        let b = _mm256_srlv_epi64(b, _mm256_set_epi64x(4, 4, 0, 0));
        _mm256_and_si256(b, _mm256_set1_epi8(0xf))
    }
}

/// Byte j all ones where bit j of the little-endian `qh` is set, else zero.
#[inline(always)]
pub(super) unsafe fn bits_to_bytes(qh: [u8; 4]) -> __m256i {
    // SAFETY: register operations only; the caller has AVX2.
    unsafe {
        let spread = _mm256_shuffle_epi8(
            _mm256_set1_epi32(i32::from_le_bytes(qh)),
            _mm256_set_epi64x(
                0x0303_0303_0303_0303,
                0x0202_0202_0202_0202,
                0x0101_0101_0101_0101,
                0,
            ),
        );
        // every bit of byte j set but bit j % 8, so the byte is all ones iff that bit was set
        let others = _mm256_set1_epi64x(0x7fbf_dfef_f7fb_fdfe);
        _mm256_cmpeq_epi8(_mm256_or_si256(spread, others), _mm256_set1_epi64x(-1))
    }
}

/// The five-bit levels of `qs` (low four bits) and `qh` (fifth bit) in value order.
#[inline(always)]
unsafe fn five_bits(qs: &[u8; 16], qh: [u8; 4]) -> __m256i {
    // SAFETY: register operations and 16 readable bytes; the caller has AVX2.
    unsafe {
        let high = _mm256_and_si256(bits_to_bytes(qh), _mm256_set1_epi8(0x10));
        _mm256_or_si256(nibbles(qs), high)
    }
}

/// Four blocks' 32 bytes in two registers: block 0 in the low 256 bits of the first, block 1
/// in its high 256 bits, blocks 2 and 3 likewise in the second (one insert per register).
///
/// # Safety
/// The CPU must have AVX-512 F.
#[inline(always)]
unsafe fn pairs(v: [__m256i; TILE_ROWS]) -> [__m512i; 2] {
    // SAFETY: register operations; the caller has AVX-512 F.
    unsafe { [0, 2].map(|t| _mm512_inserti64x4::<1>(_mm512_castsi256_si512(v[t]), v[t + 1])) }
}

/// [`nibbles`] of four blocks' `qs`, two blocks per register ([`pairs`]): each block's 16
/// bytes in both of its 128-bit lanes, the upper one shifted down a nibble.
///
/// # Safety
/// The CPU must have AVX-512 F and BW.
#[inline(always)]
unsafe fn nibble_pairs(qs: [&[u8; 16]; TILE_ROWS]) -> [__m512i; 2] {
    // SAFETY: 16 readable bytes per block; the caller has AVX-512 F and BW.
    unsafe {
        let raw =
            qs.map(|q| _mm256_broadcastsi128_si256(_mm_loadu_si128(q.as_ptr() as *const __m128i)));
        let shifts = _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0);
        let m = _mm512_set1_epi8(0xf);
        pairs(raw).map(|b| _mm512_and_si512(_mm512_srlv_epi64(b, shifts), m))
    }
}

/// [`five_bits`] of four blocks, two blocks per register ([`pairs`]): [`nibble_pairs`] plus
/// 16 where the block's bit of `qh` is set (the two blocks' `qh` as the 64 mask bits of one
/// masked add per register).
///
/// # Safety
/// The CPU must have AVX-512 F and BW.
#[inline(always)]
unsafe fn five_bit_pairs(qs: [&[u8; 16]; TILE_ROWS], qh: [[u8; 4]; TILE_ROWS]) -> [__m512i; 2] {
    // SAFETY: register operations and 16 readable bytes per block; the caller has AVX-512 F
    // and BW.
    unsafe {
        let n = nibble_pairs(qs);
        let bits = |t: usize| u32::from_le_bytes(qh[t]) as u64;
        let high = _mm512_set1_epi8(0x10);
        [0, 1].map(|p| {
            let k = bits(2 * p) | bits(2 * p + 1) << 32;
            _mm512_mask_add_epi8(n[p], k, n[p], high)
        })
    }
}

/// The IQ4_NL levels of a register of nibbles (`vpshufb` in the 16-entry table).
///
/// # Safety
/// The CPU must have AVX-512 F and BW.
#[inline(always)]
unsafe fn iq4nl_levels(n: __m512i) -> __m512i {
    // SAFETY: 16 readable bytes of the table; the caller has AVX-512 F and BW.
    unsafe {
        let t = _mm_loadu_si128(IQ4_NL_VALUES.as_ptr() as *const __m128i);
        _mm512_shuffle_epi8(_mm512_broadcast_i32x4(t), n)
    }
}

simd32!(BlockQ4_0, signed(8), |b| nibbles(&b.qs), |b| nibble_pairs(
    b.map(|b| &b.qs)
));
simd32!(BlockQ4_1, with_min, |b| nibbles(&b.qs), |b| nibble_pairs(
    b.map(|b| &b.qs)
));
simd32!(BlockQ5_0, signed(16), |b| five_bits(&b.qs, b.qh), |b| {
    five_bit_pairs(b.map(|b| &b.qs), b.map(|b| b.qh))
});
simd32!(BlockQ5_1, with_min, |b| five_bits(&b.qs, b.qh), |b| {
    five_bit_pairs(b.map(|b| &b.qs), b.map(|b| b.qh))
});
simd32!(
    BlockQ8_0,
    signed(0),
    |b| _mm256_loadu_si256(b.qs.as_ptr() as *const __m256i),
    |b| pairs(b.map(|b| _mm256_loadu_si256(b.qs.as_ptr() as *const __m256i)))
);
simd32!(
    BlockIq4Nl,
    signed(0),
    |b| {
        let t = _mm_loadu_si128(IQ4_NL_VALUES.as_ptr() as *const __m128i);
        _mm256_shuffle_epi8(_mm256_set_m128i(t, t), nibbles(&b.qs))
    },
    |b| nibble_pairs(b.map(|b| &b.qs)).map(|n| iq4nl_levels(n))
);

/// Whether [`block_dots`] multiplies `B`'s biased levels (unsigned, below 32) by the
/// activations and takes `BIAS · Σ y` off each pair's sum, instead of moving the levels'
/// signs onto the activations: AVX2 only (VNNI has no per-pair sign work to save), and only
/// for a bias small enough that no `maddubs` pair saturates (`2 · 31 · 128` < 2^15; Q8_0 and
/// IQ4_NL levels offset by 128 would).
const fn biased<B: Simd32, const VNNI: bool>() -> bool {
    !VNNI && !B::UNSIGNED && B::BIAS > 0
}

/// Activation block `i` of a row as each weight row's step ([`block_dots`]) takes it,
/// computed once for all weight rows: the levels, the scale in eight lanes and, where
/// [`biased`], `BIAS · (y[2j] + y[2j + 1])` in i16 lane j.
#[derive(Clone, Copy)]
struct ActBlock<'a, A> {
    y: &'a A,
    q: __m256i,
    d: __m256,
    seed: __m256i,
}

/// [`ActBlock`] of `y`.
///
/// # Safety
/// The CPU must have AVX2 and F16C.
#[inline(always)]
unsafe fn act_block<B: Simd32, const VNNI: bool>(y: &B::Act) -> ActBlock<'_, B::Act> {
    // SAFETY: the caller has AVX2 and F16C; the load reads the block's 32 levels.
    unsafe {
        let (d, q) = y.parts();
        let q = _mm256_loadu_si256(q.as_ptr() as *const __m256i);
        let seed = if biased::<B, VNNI>() {
            _mm256_maddubs_epi16(_mm256_set1_epi8(B::BIAS as i8), q)
        } else {
            _mm256_setzero_si256()
        };
        ActBlock {
            y,
            q,
            d: half8(d),
            seed,
        }
    }
}

/// Weight block `x` against the same block of each of the `R` activation rows `ys`: each
/// row's integer sum scaled by `d · yd` into its eight lanes `acc[r]`, the extra term into
/// `extra[r]` ([`dots_r`]'s step, and the AVX2 tile's for each of its rows). The sums are
/// GGML's lane by lane: `Σ x·y` over each four bytes, exact in i32 whichever way the signs
/// are handled (the biased form's pairs and seeds stay within i16), then converted, scaled
/// by the f32 product of the two scales and added with one FMA.
///
/// # Safety
/// As [`dots_r`].
#[inline(always)]
unsafe fn block_dots<B: Simd32, const VNNI: bool, const R: usize>(
    x: &B,
    ys: &[ActBlock<'_, B::Act>; R],
    acc: &mut [__m256; R],
    extra: &mut [f32; R],
) {
    // SAFETY: the callers' target features include AVX2, FMA and F16C (and AVX-512 VL and
    // VNNI with `VNNI`); the levels' loads read the block's own bytes.
    unsafe {
        let ones = _mm256_set1_epi16(1);
        let plain = B::UNSIGNED || biased::<B, VNNI>();
        let xv = if biased::<B, VNNI>() {
            x.biased()
        } else {
            x.levels()
        };
        // maddubs multiplies unsigned by signed bytes: signed levels' signs move onto y.
        let ux = if plain { xv } else { _mm256_sign_epi8(xv, xv) };
        let xd = half8(x.d());
        for (r, y) in ys.iter().enumerate() {
            let sy = if plain {
                y.q
            } else {
                _mm256_sign_epi8(y.q, xv)
            };
            let sum = if VNNI {
                _mm256_dpbusd_epi32(_mm256_setzero_si256(), ux, sy)
            } else {
                let pairs = _mm256_maddubs_epi16(ux, sy);
                let pairs = if biased::<B, VNNI>() {
                    _mm256_sub_epi16(pairs, y.seed)
                } else {
                    pairs
                };
                _mm256_madd_epi16(pairs, ones)
            };
            // the scales' f32 product in every lane, as GGML's scalar one broadcast
            let d = _mm256_mul_ps(xd, y.d);
            acc[r] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sum), acc[r]);
            // (only for the types with one: adding 0.0 is not free, nor removable)
            if B::UNSIGNED {
                extra[r] += x.extra(y.y);
            }
        }
    }
}

/// `out[r] = dot(w, activation row r)` for `R` rows of `a`, each `stride` bytes, each block
/// of `w` unpacked once for all `R`; `VNNI` selects `vpdpbusd` for the byte products.
#[inline(always)]
unsafe fn dots_r<B: Simd32, const VNNI: bool, const R: usize>(
    w: &[B],
    a: &[u8],
    stride: usize,
    out: &mut [f32],
) {
    // (each row as long as `w`, so the loop's indexing needs no checks)
    let ys: [&[B::Act]; R] = std::array::from_fn(|r| {
        &bytemuck::cast_slice::<u8, B::Act>(&a[r * stride..(r + 1) * stride])[..w.len()]
    });
    // SAFETY: the callers' target features include AVX2, FMA and F16C (and AVX-512 VL and
    // VNNI with `VNNI`); every load reads 32 bytes of a block's levels.
    unsafe {
        let mut acc = [_mm256_setzero_ps(); R];
        let mut extra = [0f32; R];
        for (i, x) in w.iter().enumerate() {
            if R == 1 {
                prefetch(x as *const B as *const u8, PREFETCH_BYTES, size_of::<B>());
            }
            let acts = std::array::from_fn(|r| act_block::<B, VNNI>(&ys[r][i]));
            block_dots::<B, VNNI, R>(x, &acts, &mut acc, &mut extra);
        }
        for r in 0..R {
            out[r] = hsum(acc[r]) + extra[r];
        }
    }
}

/// [`dots_r`] over every activation row of `a`, up to four per pass over `w` (eight with
/// `VNNI`, whose AVX-512 target has the registers for them).
///
/// # Safety
/// As [`super::RowDot`], on a CPU with the features `VNNI` needs.
#[inline(always)]
unsafe fn row_dots<B: Simd32, const VNNI: bool>(w: &[u8], a: &[u8], out: &mut [f32]) {
    let wb: &[B] = bytemuck::cast_slice(w);
    let stride = wb.len() * std::mem::size_of::<B::Act>();
    if VNNI {
        by_fours!(8; a, stride, out, |N, a, o| dots_r::<B, true, N>(wb, a, stride, o));
    } else {
        by_fours!(a, stride, out, |N, a, o| dots_r::<B, false, N>(
            wb, a, stride, o
        ));
    }
}

/// [`row_dots`] with AVX2.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn row_dots_avx2<B: Simd32>(w: &[u8], a: &[u8], out: &mut [f32]) {
    // SAFETY: forwarded.
    unsafe { row_dots::<B, false>(w, a, out) }
}

/// [`row_dots`] with AVX-512 VNNI on 256-bit registers.
///
/// # Safety
/// The CPU must have [`super::Isa::Avx512`]'s features.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(super) unsafe fn row_dots_vnni<B: Simd32>(w: &[u8], a: &[u8], out: &mut [f32]) {
    // SAFETY: forwarded.
    unsafe { row_dots::<B, true>(w, a, out) }
}

/// Weight rows of one [`row_tiles_vnni`] / [`row_tiles_avx2`] pass.
pub(super) const TILE_ROWS: usize = 4;

/// How many tiles ahead [`tile_r`] and [`tile_512`] prefetch the weights when they have one
/// activation row.
pub(super) const PREFETCH_TILES: usize = 2;

/// [`tile_operands`]'s result: the blocks per row, the weight rows, the activation rows.
type TileOperands<'a, B, const R: usize> =
    (usize, [&'a [B]; TILE_ROWS], [&'a [<B as DotBlock>::Act]; R]);

/// A tile's operands: the blocks per row `n`, the [`TILE_ROWS`] weight rows and the `R`
/// activation rows of `a` (each `stride` bytes), every row cut to `n` blocks (so that a tile's
/// loop indexing needs no checks).
#[inline(always)]
fn tile_operands<'a, B: Simd32, const R: usize>(
    w: [&'a [B]; TILE_ROWS],
    a: &'a [u8],
    stride: usize,
) -> TileOperands<'a, B, R> {
    let n = w[0].len();
    let ys = std::array::from_fn(|r| {
        &bytemuck::cast_slice::<u8, B::Act>(&a[r * stride..(r + 1) * stride])[..n]
    });
    (n, w.map(|row| &row[..n]), ys)
}

/// `out[t][r0 + r] = dot(w[t], activation row r)` for [`TILE_ROWS`] weight rows and `R`
/// activation rows in one pass, with AVX2: each activation block is loaded once for all
/// weight rows, and with one activation row (token generation) the four weight rows give
/// four independent chains of FMAs where [`dots_r`] has one (each block's FMA waits on the
/// previous one's). Each weight row's blocks take [`block_dots`], as in [`dots_r`], so each
/// output is bit for bit what [`dots_r`] gives it.
#[inline(always)]
unsafe fn tile_r<B: Simd32, const R: usize>(
    w: [&[B]; TILE_ROWS],
    a: &[u8],
    stride: usize,
    out: &mut [&mut [f32]; TILE_ROWS],
    r0: usize,
) {
    let (n, w, ys) = tile_operands::<B, R>(w, a, stride);
    // SAFETY: the caller's target features include AVX2, FMA and F16C; every load reads 32
    // bytes of a block's levels.
    unsafe {
        let mut acc = [[_mm256_setzero_ps(); R]; TILE_ROWS];
        let mut extra = [[0f32; R]; TILE_ROWS];
        // With one activation row (token generation), the rows [`PREFETCH_TILES`] tiles on
        // (the weight rows after these) are fetched ahead ([`prefetch`]).
        let ahead = PREFETCH_TILES * TILE_ROWS * std::mem::size_of_val(w[0]);
        for i in 0..n {
            // AVX2's 16 registers: one weight row's block at a time, against every
            // activation row (each activation block's part done once for all four), so only
            // the accumulators stay live across weight rows
            let acts = std::array::from_fn(|r| act_block::<B, false>(&ys[r][i]));
            for t in 0..TILE_ROWS {
                let x = &w[t][i];
                if R == 1 {
                    prefetch(x as *const B as *const u8, ahead, size_of::<B>());
                }
                block_dots::<B, false, R>(x, &acts, &mut acc[t], &mut extra[t]);
            }
        }
        for t in 0..TILE_ROWS {
            for r in 0..R {
                out[t][r0 + r] = hsum(acc[t][r]) + extra[t][r];
            }
        }
    }
}

/// Four halves widened with F16C into four lanes (one conversion for the four rows of a
/// tile).
///
/// # Safety
/// The CPU must have F16C.
#[inline(always)]
unsafe fn halves4(h: [PackedF16; TILE_ROWS]) -> __m128 {
    let bits = h
        .iter()
        .enumerate()
        .fold(0u64, |b, (t, h)| b | (h.to_bits() as u64) << (16 * t));
    // SAFETY: register operations; the caller has F16C.
    unsafe { _mm_cvtph_ps(_mm_cvtsi64_si128(bits as i64)) }
}

/// [`tile_r`] with AVX-512 VNNI on 512-bit registers: block i of the four weight rows in two
/// registers ([`Simd32::pairs4`]: the 32 levels of rows 0 and 1 in the halves of the first,
/// of rows 2 and 3 in the second), against the activation block broadcast to both halves, so
/// each instruction does two rows' work (two `vpdpbusd`, two conversions, one scale product,
/// two permutes and two FMAs per four blocks, where the row kernel takes one of each per
/// block; the offset's correction below once for all four). Lanes 0..8 and 8..16 of
/// accumulator p are rows 2p and 2p + 1's eight lanes of [`dots_r`]'s accumulator, each with
/// the same integers (signed levels offset to unsigned bytes, `x + o`, their `o · Σ y` taken
/// off by seeding each sum with it: exact in i32 either way), scaled by the same f32 product
/// and added in the same order, and summed by [`hsum`], so each output is bit for bit what
/// [`dots_r`] gives it. (Four rows' 128-bit quarters per register took six inserts per
/// block where two rows' halves take two: Q8_0 at 9.0 ns per 256 values in the L2, 6.2 so,
/// on a Zen 4.)
#[inline(always)]
unsafe fn tile_512<B: Simd32, const R: usize>(
    w: [&[B]; TILE_ROWS],
    a: &[u8],
    stride: usize,
    out: &mut [&mut [f32]; TILE_ROWS],
    r0: usize,
) {
    let (n, w, ys) = tile_operands::<B, R>(w, a, stride);
    // the offset that makes the levels unsigned bytes: the bias, else 128 (an XOR) for the
    // signed types, none for the unsigned ones
    let (offset, flip) = match (B::UNSIGNED, B::BIAS) {
        (true, _) => (0u8, false),
        (false, 0) => (0x80, true),
        (false, bias) => (bias, false),
    };
    // SAFETY: the caller's target features include AVX2, FMA, F16C, AVX-512 F, BW and VNNI;
    // every load reads a block's own bytes.
    unsafe {
        let mut acc = [[_mm512_setzero_ps(); 2]; R];
        // lane t: row t's extra terms, added in the row kernel's order
        let mut extra = [_mm_setzero_ps(); R];
        let offsets = _mm512_set1_epi8(offset as i8);
        // for register p: lanes 0..8 take scale 2p of four, lanes 8..16 scale 2p + 1
        let spread = [0, 2].map(|p| {
            let (a, b) = (p, p + 1);
            _mm512_set_epi32(b, b, b, b, b, b, b, b, a, a, a, a, a, a, a, a)
        });
        // With one activation row (token generation), the rows [`PREFETCH_TILES`] tiles on
        // (the weight rows after these) are fetched ahead ([`prefetch`]).
        let ahead = PREFETCH_TILES * TILE_ROWS * std::mem::size_of_val(w[0]);
        for i in 0..n {
            let x: [&B; TILE_ROWS] = std::array::from_fn(|t| &w[t][i]);
            if R == 1 {
                for xt in x {
                    prefetch(xt as *const B as *const u8, ahead, size_of::<B>());
                }
            }
            let ux = B::pairs4(x).map(|v| {
                if flip {
                    _mm512_xor_si512(v, offsets)
                } else {
                    v
                }
            });
            let xd = halves4(x.map(|x| x.d()));
            for r in 0..R {
                let y = &ys[r][i];
                let (yd, yq) = y.parts();
                let yv = _mm512_broadcast_i64x4(_mm256_loadu_si256(yq.as_ptr() as *const __m256i));
                // the row kernel's product for each of the four rows
                let d = _mm512_castps128_ps512(_mm_mul_ps(
                    xd,
                    _mm_cvtph_ps(_mm_set1_epi16(yd.to_bits() as i16)),
                ));
                let seed = if offset == 0 {
                    _mm512_setzero_si512()
                } else {
                    let corr = _mm512_dpbusd_epi32(_mm512_setzero_si512(), offsets, yv);
                    _mm512_sub_epi32(_mm512_setzero_si512(), corr)
                };
                for p in 0..2 {
                    let sum = _mm512_dpbusd_epi32(seed, ux[p], yv);
                    let dp = _mm512_permutexvar_ps(spread[p], d);
                    acc[r][p] = _mm512_fmadd_ps(dp, _mm512_cvtepi32_ps(sum), acc[r][p]);
                }
                if B::UNSIGNED {
                    extra[r] = _mm_add_ps(extra[r], B::extra4(x, y));
                }
            }
        }
        for r in 0..R {
            let mut extra_r = [0f32; TILE_ROWS];
            _mm_storeu_ps(extra_r.as_mut_ptr(), extra[r]);
            for (p, &v) in acc[r].iter().enumerate() {
                let high = _mm512_extracti64x4_epi64::<1>(_mm512_castps_si512(v));
                let rows = [_mm512_castps512_ps256(v), _mm256_castsi256_ps(high)];
                for (k, h) in rows.into_iter().enumerate() {
                    let t = 2 * p + k;
                    out[t][r0 + r] = hsum(h) + extra_r[t];
                }
            }
        }
    }
}

/// [`tile_512`] (with `VNNI`) or [`tile_r`] over every activation row of `a`, up to four per
/// pass ([`super::TileDot`]).
///
/// # Safety
/// The CPU must have the features `VNNI` needs (see [`tile_512`]); every row of `w` has as
/// many blocks, `a` holds `out[t].len()` activation rows of as many blocks, and every
/// `out[t]` is as long.
#[inline(always)]
unsafe fn row_tiles<B: Simd32, const VNNI: bool>(
    w: [&[u8]; TILE_ROWS],
    a: &[u8],
    out: &mut [&mut [f32]; TILE_ROWS],
) {
    let wb: [&[B]; TILE_ROWS] = w.map(|r| bytemuck::cast_slice(r));
    let stride = wb[0].len() * std::mem::size_of::<B::Act>();
    let a = |r0: usize| &a[r0 * stride..];
    if VNNI {
        by_tiles!(out[0].len(), |N, r0| tile_512::<B, N>(
            wb,
            a(r0),
            stride,
            out,
            r0
        ));
    } else {
        by_tiles!(out[0].len(), |N, r0| tile_r::<B, N>(
            wb,
            a(r0),
            stride,
            out,
            r0
        ));
    }
}

/// [`row_tiles`] with AVX-512 VNNI on 512-bit registers.
///
/// # Safety
/// The CPU must have [`super::Isa::Avx512`]'s features; see [`row_tiles`] for the lengths.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(super) unsafe fn row_tiles_vnni<B: Simd32>(
    w: [&[u8]; TILE_ROWS],
    a: &[u8],
    out: &mut [&mut [f32]; TILE_ROWS],
) {
    // SAFETY: forwarded.
    unsafe { row_tiles::<B, true>(w, a, out) }
}

/// [`row_tiles`] with AVX2.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C; see [`row_tiles`] for the lengths.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn row_tiles_avx2<B: Simd32>(
    w: [&[u8]; TILE_ROWS],
    a: &[u8],
    out: &mut [&mut [f32]; TILE_ROWS],
) {
    // SAFETY: forwarded.
    unsafe { row_tiles::<B, false>(w, a, out) }
}
