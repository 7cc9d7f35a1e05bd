//! AVX-512 VNNI tiled products of the k-quants (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) with Q8_K
//! activations, for batches of columns: [`BAND`] weight rows × up to [`super::BAND_COLS`]
//! activation columns per call, as outer products.
//!
//! The row kernels of `kquant_x86.rs` multiply 32 levels by 32 activations per `maddubs` and
//! need two more instructions to weigh and add the pair sums, for every weight row and column.
//! Here the activations of [`GROUP`] columns are laid out once (per thread and column block)
//! so that one 512-bit register holds four consecutive values of each of the 16 columns; four
//! levels of one weight row, broadcast, and one `vpdpbusd` give the 16 columns' sums of those
//! four products — 64 multiply-adds per instruction, the rows of a band sharing each
//! activation load. A pass takes half the band against two column groups, so that each
//! broadcast serves two `vpdpbusd` (a pass of eight rows against one group is bound by the
//! broadcast loads, not the multiply-adds); an odd last group takes the whole band in one
//! pass. While the first pass runs, the next band's weight rows are prefetched into L2. The
//! weight rows are unpacked once per band into bytes (the levels, less the level offset for
//! the types with one, times the scales for Q2_K) with their group scales as i32; per group
//! of 16 (or 32, for Q4_K and Q5_K, whose scales come in equal pairs) values the integer sums
//! are weighed by the group's scale (`vpmulld`, but for Q2_K). The minimums' terms
//! come from one `vpdpwssd` per pair of groups with the activations' group sums (Q8_K's
//! `bsums`); the types with a level offset (Q3_K, Q6_K, the i-quants) multiply signed levels
//! by the activations plus 128 instead and take off one sum per row and super-block
//! ([`band_group`]). Per super-block the integer sums are scaled in f32, as the row kernels
//! do:
//!
//! `dot = fma(r, yd, dot)`, `r` the super-block's sums scaled by the weight's factors.
//!
//! The integer sums are exact; each output lane is computed by the same instructions whatever
//! the band's other rows and the group's other columns are, so an element's value does not
//! depend on how the rows and columns are grouped (nor, so, on the thread count). The f32
//! steps are GGML's for batches ([`band_group`]): GGML computes k-quant batches of 8 columns
//! or more with its tiled MUL_MAT, whose float order differs from its one-column dot's (which
//! the row kernels of `kquant_x86.rs` follow), so these outputs are GGML's bits and differ
//! from the row kernels' by f32 rounding.

use std::arch::x86_64::*;

use super::kquant_x86::{KUnpack, Unpacked};
use super::x86::{hsum_i32, prefetch_into};
use crate::quants::BlockQ8K;
use crate::QK_K;

/// Weight rows per band (one accumulator register each, per column group).
pub(crate) const BAND: usize = 8;

/// Activation columns per group: the 16 i32 lanes of a 512-bit register.
pub(crate) const GROUP: usize = 16;

/// Groups of four values in a super-block.
pub(super) const QUADS: usize = QK_K / 4;

/// The activation tile of one super-block and one column group: the levels as `QUADS` rows of
/// [`GROUP`] little-endian u32 (four levels of each column; offset by 128 in the tiles of
/// [`pack_act_biased`]), then the group sums as 8 rows of [`GROUP`] pairs of i16 (groups 2p
/// and 2p + 1 of each column), the sums of 32 values as 4 rows of [`GROUP`] pairs of i16
/// (values 64q..64q + 32 and 64q + 32..64q + 64), then the columns' scales as f32.
pub(super) const ACT_BLOCK: usize = ACT_D + GROUP * 4;
/// Offset of the group-sum pairs in an activation tile.
pub(super) const ACT_BSUMS: usize = QUADS * GROUP * 4;
/// Offset of the pairs of 32-value sums in an activation tile.
const ACT_BSUMS32: usize = ACT_BSUMS + 8 * GROUP * 4;
/// Offset of the scales in an activation tile.
pub(super) const ACT_D: usize = ACT_BSUMS32 + 4 * GROUP * 4;

/// The band's unpacked super-block `i`: each row's levels as `QK_K` bytes (less the type's
/// level offset, as i8, for the types with one), then each row's 16 group scales as i32 in
/// [`Unpacked::scales`](super::kquant_x86::Unpacked)'s order (see [`scale_lane`]), each row's
/// 8 correction pairs (i16 pairs, groups 2p and 2p + 1, as `Unpacked::corr` holds them; for
/// the types with one minimum per 32 values, 4 pairs of those), the rows' `d`, their `corr_d`
/// as f32, and their bias sums (see [`band_group`]) as i32.
const BAND_BLOCK: usize = BAND_BIAS + BAND * 4;
/// Offset of the group scales in a band's super-block.
const BAND_SC: usize = BAND * QK_K;
/// Offset of the correction pairs.
const BAND_CP: usize = BAND_SC + BAND * 16 * 4;
/// Offset of the super-block scales.
const BAND_D: usize = BAND_CP + 8 * BAND * 4;
/// Offset of the correction factors.
const BAND_CD: usize = BAND_D + BAND * 4;
/// Offset of the bias sums.
const BAND_BIAS: usize = BAND_CD + BAND * 4;

/// Where group `g`'s scale is among a row's 16: the even groups first.
pub(super) const fn scale_lane(g: usize) -> usize {
    (g % 2) * 8 + g / 2
}

/// Bytes of the activation tiles of `cols` columns of `k` values (whole super-blocks).
pub(crate) fn act_tile_bytes(k: usize, cols: usize) -> usize {
    k / QK_K * cols.div_ceil(GROUP) * ACT_BLOCK
}

/// Bytes of an unpacked band of rows of `k` values.
pub(crate) fn band_bytes(k: usize) -> usize {
    k / QK_K * BAND_BLOCK
}

/// Lays out `cols` activation rows `a` (Q8_K, back to back, whole rows) as the tiles the
/// band products of the types with minimums read, column group by column group, super-block
/// by super-block (also those of the AVX2 and AMX kernels); the columns past `cols` in the
/// last group are zero (they give zero, and are not read back).
///
/// # Panics
/// If `tile` is shorter than [`act_tile_bytes`] (a planning error).
pub(crate) fn pack_act(a: &[u8], cols: usize, tile: &mut [u8]) {
    pack_levels::<0>(a, cols, tile);
}

/// [`pack_act`] with every level offset by 128 (unsigned, for `vpdpbusd`): the tiles that
/// [`band_dots`] reads for the types with a level offset (the zero columns past `cols` give
/// values that are not read back).
///
/// # Panics
/// If `tile` is shorter than [`act_tile_bytes`] (a planning error).
pub(crate) fn pack_act_biased(a: &[u8], cols: usize, tile: &mut [u8]) {
    pack_levels::<0x80>(a, cols, tile);
}

/// [`pack_act`] with every level byte XORed with `FLIP`.
fn pack_levels<const FLIP: u8>(a: &[u8], cols: usize, tile: &mut [u8]) {
    let nb = a.len() / cols.max(1) / size_of::<BlockQ8K>();
    let blocks: &[BlockQ8K] = bytemuck::cast_slice(&a[..cols * nb * size_of::<BlockQ8K>()]);
    let tiles = tile[..act_tile_bytes(nb * QK_K, cols)].chunks_exact_mut(ACT_BLOCK);
    for (n, t) in tiles.enumerate() {
        let (g, i) = (n / nb, n % nb);
        t.fill(0);
        for j in 0..GROUP.min(cols.saturating_sub(g * GROUP)) {
            let y = &blocks[(g * GROUP + j) * nb + i];
            put_column_levels::<FLIP>(t, j, bytemuck::cast_slice(&y.qs));
            let bs = y.bsums.map(|b| b.get());
            let pair = |t: &mut [u8], at: usize, lo: i16, hi: i16| {
                t[at + 4 * j..][..2].copy_from_slice(&lo.to_le_bytes());
                t[at + 4 * j + 2..][..2].copy_from_slice(&hi.to_le_bytes());
            };
            for p in 0..8 {
                pair(t, ACT_BSUMS + p * GROUP * 4, bs[2 * p], bs[2 * p + 1]);
            }
            for q in 0..4 {
                // at most 32 · 128 in magnitude
                let (lo, hi) = (bs[4 * q] + bs[4 * q + 1], bs[4 * q + 2] + bs[4 * q + 3]);
                pair(t, ACT_BSUMS32 + q * GROUP * 4, lo, hi);
            }
            t[ACT_D + 4 * j..][..4].copy_from_slice(&y.d.get().to_le_bytes());
        }
    }
}

/// Puts the levels `qs` of column `j` into activation tile `t` (from its start), four
/// consecutive levels of each of [`GROUP`] columns per row of 16 u32, every byte XORed with
/// `FLIP`: the level rows of this file's and `band32.rs`'s tiles.
pub(super) fn put_column_levels<const FLIP: u8>(t: &mut [u8], j: usize, qs: &[u8]) {
    for (q, four) in qs.chunks_exact(4).enumerate() {
        for (dst, &v) in t[(q * GROUP + j) * 4..][..4].iter_mut().zip(four) {
            *dst = v ^ FLIP;
        }
    }
}

/// Unpacks [`BAND`] weight rows into `band` as [`BAND_BLOCK`] describes.
///
/// # Safety
/// The CPU must have [`super::Isa::Avx512`]'s features; every row holds
/// `band.len() / BAND_BLOCK` super-blocks.
#[inline(always)]
unsafe fn unpack_band<B: KUnpack>(w: [&[u8]; BAND], band: &mut [u8]) {
    let offset = B::LEVEL_OFFSET != 0;
    for (t, row) in w.iter().enumerate() {
        let blocks: &[B] = bytemuck::cast_slice(row);
        for (x, out) in blocks.iter().zip(band.chunks_exact_mut(BAND_BLOCK)) {
            // SAFETY: forwarded from the caller; the stores write 32 bytes inside the row's
            // QK_K levels, its 64 bytes of scales and its 32 of correction pairs.
            let (d, corr_d, bias) = unsafe {
                let u = x.unpack();
                // the level offset as a byte (128 wraps to −128: the same subtraction)
                let off = _mm256_set1_epi8(B::LEVEL_OFFSET as u8 as i8);
                for (c, lv) in u.levels.iter().enumerate() {
                    let dst = out[t * QK_K + 32 * c..][..32].as_mut_ptr() as *mut __m256i;
                    let lv = if offset {
                        _mm256_sub_epi8(*lv, off)
                    } else if B::SCALED_LEVELS {
                        // groups 2c and 2c + 1's scales (i16) in the low and high lanes: each
                        // byte's product fits in it, so the 16-bit multiply is two byte ones
                        let pick = _mm256_set1_epi16((((2 * c + 1) << 8) | (2 * c)) as i16);
                        _mm256_mullo_epi16(*lv, _mm256_shuffle_epi8(u.scales, pick))
                    } else {
                        *lv
                    };
                    _mm256_storeu_si256(dst, lv);
                }
                let sc = out[BAND_SC + t * 64..][..64].as_mut_ptr() as *mut __m256i;
                _mm256_storeu_si256(sc, _mm256_cvtepi16_epi32(_mm256_castsi256_si128(u.scales)));
                let hi = _mm256_extracti128_si256::<1>(u.scales);
                _mm256_storeu_si256(sc.add(1), _mm256_cvtepi16_epi32(hi));
                let cp = out[BAND_CP + t * 32..][..32].as_mut_ptr() as *mut __m256i;
                let bias = if offset {
                    bias_sum::<B>(&u)
                } else {
                    // the types with one minimum per 32 values: their 8 minimums (every other
                    // group's) as 4 pairs in the first 16 bytes
                    let corr = if B::PAIRED {
                        every_other_i16(u.corr)
                    } else {
                        u.corr
                    };
                    _mm256_storeu_si256(cp, corr);
                    0
                };
                (u.d, u.corr_d, bias)
            };
            out[BAND_D + 4 * t..][..4].copy_from_slice(&d.to_le_bytes());
            out[BAND_CD + 4 * t..][..4].copy_from_slice(&corr_d.to_le_bytes());
            out[BAND_BIAS + 4 * t..][..4].copy_from_slice(&bias.to_le_bytes());
        }
    }
}

/// The bias sum of super-block `u` of a type with a level offset: `128 · Σ scale·(level −
/// offset)` over its 256 values, what the activations' offset of 128 ([`pack_act_biased`])
/// adds to the scaled sums. Its group scales fit in i8.
///
/// # Safety
/// The CPU must have [`super::Isa::Avx512`]'s features.
#[allow(clippy::incompatible_msrv)]
#[inline(always)]
unsafe fn bias_sum<B: KUnpack>(u: &Unpacked) -> i32 {
    // SAFETY: register operations; the caller has the features.
    let (level_dot, scale_sum) = unsafe {
        debug_assert!(
            std::mem::transmute::<__m256i, [i16; 16]>(u.scales)
                .iter()
                .all(|&s| s == s as i8 as i16),
            "a group scale outside i8"
        );
        // four chains: one would wait on each vpdpbusd's latency
        let mut dot = [_mm256_setzero_si256(); 4];
        for (c, lv) in u.levels.iter().enumerate() {
            // bytes 0..16 of register c are group 2c's values, bytes 16..32 group 2c + 1's;
            // i16 lane c of the scales' low half is group 2c's scale, of the high half group
            // 2c + 1's, and the scale is its low byte (one in-lane shuffle, no permute)
            let scales = _mm256_shuffle_epi8(u.scales, _mm256_set1_epi8(2 * c as i8));
            dot[c % 4] = _mm256_dpbusd_epi32(dot[c % 4], *lv, scales);
        }
        let dot = _mm256_add_epi32(
            _mm256_add_epi32(dot[0], dot[1]),
            _mm256_add_epi32(dot[2], dot[3]),
        );
        let sum16 = _mm256_madd_epi16(u.scales, _mm256_set1_epi16(1));
        (hsum_i32(dot), hsum_i32(sum16))
    };
    // |Σ scale·(level − offset)| ≤ 256 · 128 · 128: the product fits in i32
    128 * (level_dot - 16 * B::LEVEL_OFFSET * scale_sum)
}

/// i16 lanes 0, 2, 4, .., 14 of `v` in its first 16 bytes (the rest undefined).
///
/// # Safety
/// The CPU must have AVX2.
#[inline(always)]
unsafe fn every_other_i16(v: __m256i) -> __m256i {
    // SAFETY: register operations; the caller has AVX2.
    unsafe {
        let pick = _mm256_set_epi8(
            -1, -1, -1, -1, -1, -1, -1, -1, 13, 12, 9, 8, 5, 4, 1, 0, //
            -1, -1, -1, -1, -1, -1, -1, -1, 13, 12, 9, 8, 5, 4, 1, 0,
        );
        _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_shuffle_epi8(v, pick))
    }
}

/// `out[g][r0 + t][j] = dot(row r0 + t of the band, column j of group g)` for the `R` rows
/// from `r0` and the `G` column groups of `tiles`, over the `nb` super-blocks of `band` and
/// `tiles`; `B::PAIRED` weighs groups of 32 values (the scales of groups 2c and 2c + 1 are
/// equal), else of 16. Each broadcast weight word serves the `G` groups: with `R·G` = 8
/// accumulator chains, `G` = 2 takes a broadcast load per two `vpdpbusd` (the loads, not the
/// multiply-adds, bound one group's pass). The f32 steps per super-block are those of GGML's
/// tiled k-quant MUL_MAT (`ggml-cpu/tiled`, its AVX-512 VNNI micro tile, which GGML takes for
/// batches of 8 columns or more): `r = f32(Σ scale·(level − offset)·y) · d` for the types
/// with a level offset, `r = fma(−dmin, f32(Σ min·bsum), f32(Σ scale·level·y) · d)` for those
/// with minimums, then `acc = fma(r, yd, acc)` — so every output is GGML's bits.
///
/// The types with a level offset multiply their levels less the offset (signed) by the
/// activations plus 128 (unsigned, [`pack_act_biased`]), and take off the row's bias sum
/// (`128 · Σ scale·(level − offset)`, [`bias_sum`]) once per super-block, where the
/// offset would need a correction through the activations' group sums per row and column
/// (a `vpdpwssd` per two groups). The types with minimums take those through the group sums:
/// of 32 values where one minimum weighs 32 (a `vpdpwssd` per 64 values), else of 16.
///
/// With `next`, super-block `i` of each of those rows (the next band's weights) is prefetched
/// into L2 with super-block `i` of this band.
///
/// # Safety
/// The CPU must have [`super::Isa::Avx512`]'s features; `r0 + R <= BAND`; `band` holds `nb`
/// unpacked super-blocks, each of `tiles` `nb` activation tiles.
#[allow(clippy::incompatible_msrv)]
#[inline(always)]
unsafe fn band_group<B: KUnpack, const R: usize, const G: usize>(
    band: &[u8],
    r0: usize,
    tiles: [&[u8]; G],
    nb: usize,
    out: &mut [[[f32; GROUP]; BAND]; G],
    next: Option<[*const u8; BAND]>,
) {
    debug_assert!(r0 + R <= BAND && band.len() >= nb * BAND_BLOCK);
    debug_assert!(tiles.iter().all(|t| t.len() >= nb * ACT_BLOCK));
    let quads_per_group = if B::PAIRED { 8 } else { 4 };
    let offset = B::LEVEL_OFFSET != 0;
    // SAFETY: every read is inside super-block i's BAND_BLOCK bytes of `band` (rows r0..r0 +
    // R, within the band) or ACT_BLOCK bytes of a tile (unaligned loads); the caller has the
    // CPU features.
    unsafe {
        let mut acc = [[_mm512_setzero_ps(); G]; R];
        for i in 0..nb {
            let bb = band.as_ptr().add(i * BAND_BLOCK);
            let tb = tiles.map(|t| t.as_ptr().add(i * ACT_BLOCK));
            if let Some(rows) = next {
                for row in &rows[r0..r0 + R] {
                    // the next band's weights, read once this band's column groups are done (the
                    // hardware prefetcher stops at each band's end)
                    prefetch_into::<_MM_HINT_T1>(
                        row.wrapping_add(i * size_of::<B>()),
                        size_of::<B>(),
                    );
                }
            }
            let word = |p: *const u8, n: usize| (p.add(4 * n) as *const i32).read_unaligned();
            let mut sums = [[_mm512_setzero_si512(); G]; R];
            for g in 0..QUADS / quads_per_group {
                let mut part = [[_mm512_setzero_si512(); G]; R];
                for q in g * quads_per_group..(g + 1) * quads_per_group {
                    let y =
                        tb.map(|tb| _mm512_loadu_si512(tb.add(q * GROUP * 4) as *const __m512i));
                    for (t, p) in part.iter_mut().enumerate() {
                        let x = _mm512_set1_epi32(word(bb, (r0 + t) * QUADS + q));
                        for (p, y) in p.iter_mut().zip(y) {
                            *p = if offset {
                                _mm512_dpbusd_epi32(*p, y, x)
                            } else {
                                _mm512_dpbusd_epi32(*p, x, y)
                            };
                        }
                    }
                }
                if B::SCALED_LEVELS {
                    for (s, p) in sums.iter_mut().zip(part) {
                        for (s, p) in s.iter_mut().zip(p) {
                            *s = _mm512_add_epi32(*s, p);
                        }
                    }
                    continue;
                }
                // group g's scale (for PAIRED, that of its first group of 16)
                let lane = scale_lane(if B::PAIRED { 2 * g } else { g });
                for (t, (s, p)) in sums.iter_mut().zip(part).enumerate() {
                    let sc = _mm512_set1_epi32(word(bb.add(BAND_SC), (r0 + t) * 16 + lane));
                    for (s, p) in s.iter_mut().zip(p) {
                        *s = _mm512_add_epi32(*s, _mm512_mullo_epi32(p, sc));
                    }
                }
            }
            let yd = tb.map(|tb| _mm512_loadu_ps(tb.add(ACT_D) as *const f32));
            let factor = |off: usize, t: usize| {
                _mm512_set1_ps((bb.add(off + 4 * (r0 + t)) as *const f32).read_unaligned())
            };
            if offset {
                for (t, (a, s)) in acc.iter_mut().zip(sums).enumerate() {
                    let bias = _mm512_set1_epi32(word(bb.add(BAND_BIAS), r0 + t));
                    for (a, (s, yd)) in a.iter_mut().zip(s.into_iter().zip(yd)) {
                        let s = _mm512_cvtepi32_ps(_mm512_sub_epi32(s, bias));
                        *a = _mm512_fmadd_ps(_mm512_mul_ps(s, factor(BAND_D, t)), yd, *a);
                    }
                }
                continue;
            }
            // the group-sum pairs and their count
            let (at, pairs) = if B::PAIRED {
                (ACT_BSUMS32, 4)
            } else {
                (ACT_BSUMS, 8)
            };
            let mut corr = [[_mm512_setzero_si512(); G]; R];
            for p in 0..pairs {
                let y =
                    tb.map(|tb| _mm512_loadu_si512(tb.add(at + p * GROUP * 4) as *const __m512i));
                for (t, c) in corr.iter_mut().enumerate() {
                    let w = _mm512_set1_epi32(word(bb.add(BAND_CP), (r0 + t) * 8 + p));
                    for (c, y) in c.iter_mut().zip(y) {
                        *c = _mm512_dpwssd_epi32(*c, w, y);
                    }
                }
            }
            for (t, (a, (s, c))) in acc.iter_mut().zip(sums.into_iter().zip(corr)).enumerate() {
                for (g, a) in a.iter_mut().enumerate() {
                    let m = _mm512_mul_ps(_mm512_cvtepi32_ps(s[g]), factor(BAND_D, t));
                    let r = _mm512_fmadd_ps(factor(BAND_CD, t), _mm512_cvtepi32_ps(c[g]), m);
                    *a = _mm512_fmadd_ps(r, yd[g], *a);
                }
            }
        }
        for (t, a) in acc.iter().enumerate() {
            for (o, a) in out.iter_mut().zip(a) {
                _mm512_storeu_ps(o[r0 + t].as_mut_ptr(), *a);
            }
        }
    }
}

/// The band products ([`super::BandDot`]): unpacks the [`BAND`] weight rows `w` into
/// `scratch`, then dots them with the column groups of `tile` (made for `out[t].len()`
/// columns by [`pack_act_biased`] for the types with a level offset, else by [`pack_act`]),
/// setting `out[t][j]`: two groups at a time in two passes of half the rows
/// ([`band_group`]), a last odd group in one pass of the whole band.
///
/// # Safety
/// The CPU must have [`super::Isa::Avx512`]'s features; the rows of `w` have equal lengths of
/// whole super-blocks; `tile` holds [`act_tile_bytes`] for their length and `out[t].len()`
/// columns, `scratch` [`band_bytes`].
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(super) unsafe fn band_dots<B: KUnpack>(
    w: [&[u8]; BAND],
    tile: &[u8],
    scratch: &mut [u8],
    out: &mut [&mut [f32]; BAND],
) {
    let nb = w[0].len() / size_of::<B>();
    let cols = out[0].len();
    let band = &mut scratch[..nb * BAND_BLOCK];
    // SAFETY: forwarded from the caller (AVX2 and F16C are among the features).
    unsafe { unpack_band::<B>(w, band) };
    // the rows after these (the next band's, where the weight rows lie back to back)
    let ahead = BAND * size_of_val(w[0]);
    let next = w.map(|row| row.as_ptr().wrapping_add(ahead));
    let tiles = &tile[..act_tile_bytes(nb * QK_K, cols)];
    let mut pairs = tiles.chunks_exact(2 * nb * ACT_BLOCK);
    for (p, t) in pairs.by_ref().enumerate() {
        let (t0, t1) = t.split_at(nb * ACT_BLOCK);
        let mut o = [[[0f32; GROUP]; BAND]; 2];
        let next = Some(next).filter(|_| p == 0);
        for r0 in [0, BAND / 2] {
            // SAFETY: rows r0..r0 + BAND / 2 of the band; the band and the groups' tiles hold
            // nb super-blocks; the CPU features are forwarded from the caller.
            unsafe { band_group::<B, { BAND / 2 }, 2>(band, r0, [t0, t1], nb, &mut o, next) }
        }
        store_group(out, 2 * p, &o[0]);
        store_group(out, 2 * p + 1, &o[1]);
    }
    let last = pairs.remainder();
    if !last.is_empty() {
        let g = tiles.len() / (nb * ACT_BLOCK) - 1;
        let mut o = [[[0f32; GROUP]; BAND]];
        let next = Some(next).filter(|_| g == 0);
        // SAFETY: as above, for the whole band and one group.
        unsafe { band_group::<B, BAND, 1>(band, 0, [last], nb, &mut o, next) }
        store_group(out, g, &o[0]);
    }
}

/// Copies the results `o` of column group `g` into `out` (as many of its columns as `out`
/// has).
pub(super) fn store_group(out: &mut [&mut [f32]; BAND], g: usize, o: &[[f32; GROUP]; BAND]) {
    for (dst, src) in out.iter_mut().zip(o) {
        let j0 = g * GROUP;
        let n = GROUP.min(dst.len() - j0);
        dst[j0..j0 + n].copy_from_slice(&src[..n]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::quant_dot::iquant_x86::model;
    use crate::cpu::quant_dot::tests::{quantize_weights, values};
    use crate::cpu::quant_dot::{quant_dot, Isa, KBlock, BAND_ROWS};
    use crate::quants::{quantize_row_ref, BlockQ2K, BlockQ3K, BlockQ4K, BlockQ5K, BlockQ6K};
    use crate::types::Type;

    /// GGML's tiled k-quant MUL_MAT (its AVX-512 VNNI micro tile) for one row and column, in
    /// scalar code: per super-block `s1 = Σ scale·(level − offset)·y`, `s2 = Σ min·bsum`,
    /// `r = f32(s1)·d`, minus `dmin·f32(s2)` fused, then `acc = fma(r, yd, acc)`.
    fn ggml_tiled<K: KBlock>(x: &[K], y: &[BlockQ8K]) -> f32 {
        let mut acc = 0f32;
        for (b, y) in x.iter().zip(y) {
            let dec = b.decode();
            let mut s1 = 0i32;
            for (e, (&l, &q)) in dec.levels.iter().zip(&y.qs).enumerate() {
                s1 += dec.scales[e / 16] as i32 * (l as i32 - dec.offset) * q as i32;
            }
            let s2: i32 = (0..16)
                .map(|g| dec.mins[g] as i32 * y.bsums[g].get() as i32)
                .sum();
            let r = (-dec.dmin).mul_add(s2 as f32, s1 as f32 * dec.d);
            acc = r.mul_add(y.d.get(), acc);
        }
        acc
    }

    /// GGML's tiled MUL_MAT for the i-quants (codes `level + 128`, offset 128, a scale per 16
    /// or 32 values, no minimum, `d` times the type's factor) for one row `x` of `ty` and one
    /// column, from the blocks' integers (`iquant_x86::model`).
    fn ggml_tiled_signed(ty: Type, x: &[u8], y: &[BlockQ8K]) -> f32 {
        let bytes = ty.row_size(QK_K as i64).unwrap();
        let mut acc = 0f32;
        for (x, y) in x.chunks_exact(bytes).zip(y) {
            let b = model::block(ty, x);
            // the codes less the offset, exact
            let s1: i32 = (0..QK_K / 16)
                .map(|h| {
                    let e = 16 * h..16 * h + 16;
                    let raw: i32 = e.map(|e| b.levels[e] * y.qs[e] as i32).sum();
                    b.scales[h] * raw
                })
                .sum();
            let r = s1 as f32 * (b.d * b.factor);
            acc = r.mul_add(y.d.get(), acc);
        }
        acc
    }

    /// The band products of every k-quant and i-quant give the bits of GGML's tiled MUL_MAT,
    /// for every column count of a group, in the passes of two groups and of one.
    #[test]
    fn band_products_are_ggml_tiled_bit_for_bit() {
        if !Isa::Avx512.available() {
            eprintln!("skipped: no AVX-512 VNNI");
            return;
        }
        let k = 3 * QK_K;
        let types = [Type::Q2_K, Type::Q3_K, Type::Q4_K, Type::Q5_K, Type::Q6_K]
            .into_iter()
            .chain(model::TYPES);
        for ty in types {
            let kq = quant_dot(ty, Isa::Avx512).unwrap();
            let bd = kq.band.unwrap();
            let rows: Vec<Vec<u8>> = (0..BAND_ROWS as u32)
                .map(|s| quantize_weights(ty, &values(k, 60 + s)))
                .collect();
            for cols in [21, 40] {
                let qbytes = Type::Q8_K.row_size(k as i64).unwrap();
                let mut xq = vec![0u8; cols * qbytes];
                for (j, q) in xq.chunks_exact_mut(qbytes).enumerate() {
                    quantize_row_ref(Type::Q8_K, &values(k, 900 + j as u32), q).unwrap();
                }
                let mut tile = vec![0u8; (bd.tile_bytes)(k, cols)];
                (bd.pack)(&xq, cols, &mut tile);
                let mut scratch = vec![0u8; (bd.scratch_bytes)(k)];
                let mut got = vec![vec![0f32; cols]; BAND_ROWS];
                let mut outs: [&mut [f32]; BAND_ROWS] = {
                    let mut it = got.iter_mut();
                    std::array::from_fn(|_| &mut it.next().unwrap()[..])
                };
                let ws = std::array::from_fn(|t| &rows[t][..]);
                // SAFETY: AVX-512 VNNI checked above; the tile and scratch have the sizes asked for.
                unsafe { (bd.dots)(ws, &tile, &mut scratch, &mut outs) };
                for (t, row) in rows.iter().enumerate() {
                    for j in 0..cols {
                        let y: &[BlockQ8K] =
                            bytemuck::cast_slice(&xq[j * qbytes..(j + 1) * qbytes]);
                        let want = match ty {
                            Type::Q2_K => ggml_tiled::<BlockQ2K>(bytemuck::cast_slice(row), y),
                            Type::Q3_K => ggml_tiled::<BlockQ3K>(bytemuck::cast_slice(row), y),
                            Type::Q4_K => ggml_tiled::<BlockQ4K>(bytemuck::cast_slice(row), y),
                            Type::Q5_K => ggml_tiled::<BlockQ5K>(bytemuck::cast_slice(row), y),
                            Type::Q6_K => ggml_tiled::<BlockQ6K>(bytemuck::cast_slice(row), y),
                            _ => ggml_tiled_signed(ty, row, y),
                        };
                        let g = got[t][j];
                        assert_eq!(
                            g.to_bits(),
                            want.to_bits(),
                            "{ty} row {t} col {j}: {g} vs {want}"
                        );
                    }
                }
            }
        }
    }
}
