//! AVX2 and AVX-512 VNNI row dot products of the 32-value block types (Q4_0, Q4_1, Q5_0,
//! Q5_1, Q8_0, IQ4_NL) against Q8_0 / Q8_1 activations: each block's 32 levels unpacked into
//! one 256-bit register of bytes, multiplied with the activation's bytes into eight i32 sums
//! (`maddubs` + `madd` on AVX2, one `vpdpbusd` with VNNI), converted and accumulated with the
//! block's scale into eight f32 lanes, reduced once per row. The tile kernels take four weight
//! rows at once in the same order per output (token generation's matrix-vector products read
//! four weight streams from memory together, and prefetch the rows after them).

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
    /// The block's scale.
    fn d(&self) -> PackedF16;
    /// The term added per block besides the scaled integer sum (`m · s` for Q8_1 pairs).
    ///
    /// # Safety
    /// The CPU must have F16C.
    unsafe fn extra(&self, y: &Self::Act) -> f32;
}

/// Implements [`Simd32`] for a block type with a `d` field: its levels from `$levels` (given
/// the block), and `m · s` as the extra term when the type has a minimum.
macro_rules! simd32 {
    ($t:ty, signed($bias:expr), |$b:ident| $biased:expr) => {
        simd32!(@impl $t, false, $bias, |$b| $biased, |_b, _y| 0.0);
    };
    ($t:ty, with_min, |$b:ident| $levels:expr) => {
        // SAFETY: `extra`'s caller has F16C.
        simd32!(@impl $t, true, 0, |$b| $levels, |b, y| unsafe { half(b.m) * half(y.s) });
    };
    (@impl $t:ty, $unsigned:expr, $bias:expr, |$b:ident| $biased:expr,
     |$x:ident, $y:ident| $extra:expr) => {
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
            fn d(&self) -> PackedF16 {
                self.d
            }
            #[inline(always)]
            unsafe fn extra(&self, $y: &<$t as DotBlock>::Act) -> f32 {
                let $x = self;
                $extra
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
        let h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
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
    for line in (0..len).step_by(64) {
        // SAFETY: a prefetch hint, valid for any address.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(ahead + line) as *const i8) };
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
unsafe fn bits_to_bytes(qh: [u8; 4]) -> __m256i {
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

simd32!(BlockQ4_0, signed(8), |b| nibbles(&b.qs));
simd32!(BlockQ4_1, with_min, |b| nibbles(&b.qs));
simd32!(BlockQ5_0, signed(16), |b| five_bits(&b.qs, b.qh));
simd32!(BlockQ5_1, with_min, |b| five_bits(&b.qs, b.qh));
simd32!(BlockQ8_0, signed(0), |b| _mm256_loadu_si256(
    b.qs.as_ptr() as *const __m256i
));
simd32!(BlockIq4Nl, signed(0), |b| {
    let t = _mm_loadu_si128(IQ4_NL_VALUES.as_ptr() as *const __m128i);
    _mm256_shuffle_epi8(_mm256_set_m128i(t, t), nibbles(&b.qs))
});

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
#[allow(clippy::incompatible_msrv)]
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
// AVX-512 target features and intrinsics are stable since Rust 1.89, so this path needs 1.89
// while the workspace still declares 1.85 (raising it turns on newer lints workspace-wide,
// left to the lead).
#[allow(clippy::incompatible_msrv)]
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

/// How many tiles ahead [`tile_r`] prefetches the weights when it has one activation row.
pub(super) const PREFETCH_TILES: usize = 2;

/// `out[t][r0 + r] = dot(w[t], activation row r)` for [`TILE_ROWS`] weight rows and `R`
/// activation rows in one pass: each activation block is loaded once for all weight rows, and
/// with one activation row (token generation) the four weight rows give four independent
/// chains of FMAs where [`dots_r`] has one (each block's FMA waits on the previous one's).
/// With `VNNI` the signs need no per-pair work: signed levels `x` are offset to the unsigned
/// `x + 128` (one XOR per weight block), and `128 · Σ y` (one `vpdpbusd` per activation
/// block) seeds every pair's sum, which so comes out as `Σ x·y` lane by lane; without, the
/// pairs take [`dots_r`]'s `sign` + `maddubs` + `madd`. Either way the same integers as
/// [`dots_r`]'s, scaled and accumulated in the same order, so each output is bit for bit what
/// [`dots_r`] gives it.
#[allow(clippy::incompatible_msrv)]
#[inline(always)]
unsafe fn tile_r<B: Simd32, const VNNI: bool, const R: usize>(
    w: [&[B]; TILE_ROWS],
    a: &[u8],
    stride: usize,
    out: &mut [&mut [f32]; TILE_ROWS],
    r0: usize,
) {
    // (every row as long as the first weight row, so the loop's indexing needs no checks)
    let n = w[0].len();
    let w = w.map(|row| &row[..n]);
    let ys: [&[B::Act]; R] = std::array::from_fn(|r| {
        &bytemuck::cast_slice::<u8, B::Act>(&a[r * stride..(r + 1) * stride])[..n]
    });
    // SAFETY: the caller's target features include AVX2, FMA, F16C (and AVX-512 VL and VNNI
    // with `VNNI`); every load reads 32 bytes of a block's levels.
    unsafe {
        let mut acc = [[_mm256_setzero_ps(); R]; TILE_ROWS];
        let mut extra = [[0f32; R]; TILE_ROWS];
        let offset = _mm256_set1_epi8(0x80u8 as i8);
        let mut ux = [_mm256_setzero_si256(); TILE_ROWS];
        let mut xd = [_mm256_setzero_ps(); TILE_ROWS];
        // With one activation row (token generation), the rows [`PREFETCH_TILES`] tiles on
        // (the weight rows after these) are fetched ahead ([`prefetch`]).
        let ahead = PREFETCH_TILES * TILE_ROWS * std::mem::size_of_val(w[0]);
        for i in 0..n {
            if !VNNI {
                // AVX2's 16 registers: one weight row's block at a time, against every
                // activation row (each activation block's part done once for all four), so
                // only the accumulators stay live across weight rows
                let acts = std::array::from_fn(|r| act_block::<B, false>(&ys[r][i]));
                for t in 0..TILE_ROWS {
                    let x = &w[t][i];
                    if R == 1 {
                        prefetch(x as *const B as *const u8, ahead, size_of::<B>());
                    }
                    block_dots::<B, false, R>(x, &acts, &mut acc[t], &mut extra[t]);
                }
                continue;
            }
            for t in 0..TILE_ROWS {
                if R == 1 {
                    prefetch(w[t][i..].as_ptr() as *const u8, ahead, size_of::<B>());
                }
                let levels = w[t][i].levels();
                ux[t] = if B::UNSIGNED {
                    levels
                } else {
                    _mm256_xor_si256(levels, offset)
                };
                xd[t] = _mm256_set1_ps(half(w[t][i].d()));
            }
            for r in 0..R {
                let y = &ys[r][i];
                let (yd, yq) = y.parts();
                let yv = _mm256_loadu_si256(yq.as_ptr() as *const __m256i);
                let seed = if B::UNSIGNED {
                    _mm256_setzero_si256()
                } else {
                    let corr = _mm256_dpbusd_epi32(_mm256_setzero_si256(), offset, yv);
                    _mm256_sub_epi32(_mm256_setzero_si256(), corr)
                };
                let yd = _mm256_set1_ps(half(yd));
                for t in 0..TILE_ROWS {
                    let sum = _mm256_dpbusd_epi32(seed, ux[t], yv);
                    // the same product as the row kernel's scalar one, in every lane
                    let d = _mm256_mul_ps(xd[t], yd);
                    acc[t][r] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sum), acc[t][r]);
                    if B::UNSIGNED {
                        extra[t][r] += w[t][i].extra(y);
                    }
                }
            }
        }
        for t in 0..TILE_ROWS {
            for r in 0..R {
                out[t][r0 + r] = hsum(acc[t][r]) + extra[t][r];
            }
        }
    }
}

/// [`tile_r`] over every activation row of `a`, up to four per pass ([`super::TileDot`]).
///
/// # Safety
/// The CPU must have the features `VNNI` needs (see [`tile_r`]); every row of `w` has as
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
    by_tiles!(out[0].len(), |N, r0| tile_r::<B, VNNI, N>(
        wb,
        &a[r0 * stride..],
        stride,
        out,
        r0
    ));
}

/// [`row_tiles`] with AVX-512 VNNI on 256-bit registers.
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
