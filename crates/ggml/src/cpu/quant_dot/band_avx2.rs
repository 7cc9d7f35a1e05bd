//! AVX2 band products ([`super::BandDot`]) for CPUs without VNNI: the 32-value signed types
//! (Q4_0, Q5_0, Q8_0, IQ4_NL) on `band32.rs`'s activation tiles and the k-quants (Q2_K..Q6_K)
//! and i-quants (IQ4_XS and the grid types) on `kquant_tile.rs`'s, with AVX2, FMA and F16C
//! only.
//!
//! The tiles hold four consecutive levels of each of 16 columns per 64 bytes; a 256-bit load
//! takes eight columns. Four levels of one weight row, broadcast (a load), times those eight
//! columns' four activations give, with one `vpmaddubsw`, each column's two pair sums as i16:
//! 32 multiply-adds per instruction, each activation load shared by [`ROWS`] weight rows.
//! The weight operand must be unsigned: the k-quants' levels are (0..64, offset corrected
//! through Q8_K's group sums, as the row kernels do); Q4_0's and Q5_0's are biased by 8 or 16
//! (`−bias · Σ y` from the tile's block sums seeds the sum); Q8_0's and IQ4_NL's are taken as
//! `|x|` with the activations' signs flipped where `x < 0` (`vpsignb`, as the row kernels),
//! and so are the i-quants' values ([`KUnpack::SIGNED`]; no correction then).
//! The i16 pair sums are added in i16 for as many quads as cannot overflow (the largest level
//! bounds them), then widened with `vpmaddwd` (by the group scale for the k-quants, by 1 for
//! the others), so every block's (group's) integer sum is exact.
//!
//! The float combine is one step per block (group) in block order: `acc += cvt(sum) · (yd ·
//! xd)` (k-quants: then `acc += cvt(Σ corr·bsum) · (yd · corr_d)`), from exact integers, so an
//! output differs from the row kernels' and from the AVX-512 band products' (which follow
//! GGML's x86 float order: eight lanes per block, or the tiled kernel's steps) by f32 rounding
//! only. GGML built for AVX2 computes batches with other kernels again (its repacked GEMMs), so
//! no AVX2 path is GGML's bit for bit.
//! An output does not depend on the band's other rows nor on the tile's other columns.

use std::arch::x86_64::*;

use super::band32;
use super::kquant_tile::{self, scale_lane, store_group, BAND, GROUP, QUADS};
use super::kquant_x86::KUnpack;
use super::x86::{half, Simd32};
use crate::QK_K;

/// Weight rows per pass over a column group's tiles (one accumulator register each).
const ROWS: usize = 4;

/// Columns per register: the eight i32 lanes of 256 bits.
const LANES: usize = 8;

/// Bytes per row of four levels of the [`GROUP`] columns in both tile layouts.
const QUAD_ROW: usize = GROUP * 4;

/// Quads per block of the 32-value types.
const QUADS32: usize = band32::QK / 4;

/// The band's unpacked 32-value block: each row's 32 unsigned operands (levels plus the bias,
/// or `|x|`), then each row's 32 signed levels (read only without a bias), then the rows'
/// scales as f32.
const B32_BLOCK: usize = B32_D + BAND * 4;
/// Offset of the signed levels.
const B32_SIGNED: usize = BAND * band32::QK;
/// Offset of the scales.
const B32_D: usize = 2 * B32_SIGNED;

/// The band's unpacked k-quant super-block: each row's `QK_K` levels (for the signed types,
/// [`KUnpack::SIGNED`], their magnitudes), each row's 16 group scales as i16 pairs `(s, s)`
/// (group order), each row's 8 correction pairs (groups 2p and 2p + 1, as
/// [`Unpacked::corr`](super::kquant_x86::Unpacked) holds them), the rows' `d` and their
/// `corr_d` as f32, then for the signed types each row's `QK_K` signed values.
const K_BLOCK: usize = K_SIGNED + BAND * QK_K;
/// Offset of the group scales.
const K_SC: usize = BAND * QK_K;
/// Offset of the correction pairs.
const K_CP: usize = K_SC + BAND * 16 * 4;
/// Offset of the super-block scales.
const K_D: usize = K_CP + BAND * 8 * 4;
/// Offset of the correction factors.
const K_CD: usize = K_D + BAND * 4;
/// Offset of the signed values.
const K_SIGNED: usize = K_CD + BAND * 4;

/// Bytes of an unpacked band of 32-value rows of `k` values.
pub(crate) fn band32_bytes(k: usize) -> usize {
    k / band32::QK * B32_BLOCK
}

/// Bytes of an unpacked band of k-quant rows of `k` values.
pub(crate) fn k_band_bytes(k: usize) -> usize {
    k / QK_K * K_BLOCK
}

/// The quads whose i16 pair sums can be added in i16 for levels up to `max` (against
/// activations of magnitude up to 127): a power of two, at most `per_group`.
const fn i16_quads(max: u8, per_group: usize) -> usize {
    let mut n = per_group;
    while n > 1 && n * 2 * 127 * max as usize > i16::MAX as usize {
        n /= 2;
    }
    n
}

/// Word `n` (four bytes) from `p`, in every i32 lane.
///
/// # Safety
/// Four readable bytes at `p + 4n`; the caller has AVX.
#[inline(always)]
unsafe fn word(p: *const u8, n: usize) -> __m256i {
    // SAFETY: forwarded from the caller (an unaligned read).
    unsafe { _mm256_set1_epi32((p.add(4 * n) as *const i32).read_unaligned()) }
}

/// The f32 `n` from `p`.
///
/// # Safety
/// Four readable bytes at `p + 4n`.
#[inline(always)]
unsafe fn f32_at(p: *const u8, n: usize) -> f32 {
    // SAFETY: forwarded from the caller (an unaligned read).
    unsafe { (p.add(4 * n) as *const f32).read_unaligned() }
}

/// 32 bytes from `p`.
///
/// # Safety
/// 32 readable bytes at `p`; the caller has AVX.
#[inline(always)]
unsafe fn load(p: *const u8) -> __m256i {
    // SAFETY: forwarded from the caller.
    unsafe { _mm256_loadu_si256(p as *const __m256i) }
}

/// `acc[r] += cvt(sums[r]) · (yd · f32 n = r0 + r at p)`, the band kernels' float combine.
///
/// # Safety
/// `p` holds the rows' factors; the caller has AVX2 and FMA.
#[inline(always)]
unsafe fn combine(
    acc: &mut [__m256; ROWS],
    sums: [__m256i; ROWS],
    yd: __m256,
    p: *const u8,
    r0: usize,
) {
    for (r, (a, s)) in acc.iter_mut().zip(sums).enumerate() {
        // SAFETY: forwarded from the caller.
        unsafe {
            let d = _mm256_mul_ps(yd, _mm256_set1_ps(f32_at(p, r0 + r)));
            *a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), d, *a);
        }
    }
}

/// Unpacks [`BAND`] rows of 32-value blocks `B` into `band` as [`B32_BLOCK`] describes.
///
/// # Safety
/// The CPU must have AVX2 and F16C; every row holds `band.len() / B32_BLOCK` blocks.
#[inline(always)]
unsafe fn unpack32<B: Simd32>(w: [&[u8]; BAND], band: &mut [u8]) {
    for (t, row) in w.iter().enumerate() {
        let blocks: &[B] = bytemuck::cast_slice(row);
        for (x, o) in blocks.iter().zip(band.chunks_exact_mut(B32_BLOCK)) {
            // SAFETY: forwarded from the caller; each store writes 32 bytes inside the row's
            // operands or signed levels.
            let d = unsafe {
                let v = x.levels();
                let u = if B::BIAS > 0 {
                    _mm256_add_epi8(v, _mm256_set1_epi8(B::BIAS as i8))
                } else {
                    _mm256_sign_epi8(v, v)
                };
                _mm256_storeu_si256(o[t * 32..][..32].as_mut_ptr() as *mut __m256i, u);
                let s = o[B32_SIGNED + t * 32..][..32].as_mut_ptr() as *mut __m256i;
                _mm256_storeu_si256(s, v);
                half(x.d())
            };
            o[B32_D + 4 * t..][..4].copy_from_slice(&d.to_le_bytes());
        }
    }
}

/// The dot products of band rows `r0..r0 + ROWS` with the eight columns `8h..8h + 8` of one
/// column group, over `nb` blocks of 32 values.
///
/// # Safety
/// The CPU must have AVX2 and FMA; `band` holds `nb` unpacked blocks, `tile` the group's `nb`
/// activation tiles; `r0 + ROWS <= BAND`, `h < 2`.
#[inline(always)]
unsafe fn pass32<B: Simd32>(
    band: &[u8],
    tile: &[u8],
    nb: usize,
    r0: usize,
    h: usize,
) -> [__m256; ROWS] {
    debug_assert!(band.len() >= nb * B32_BLOCK && tile.len() >= nb * band32::ACT_BLOCK);
    // −bias·Σy from the tile's −128·Σy, exactly (a multiple of 128, shifted right)
    let shift = 7 - B::BIAS.max(1).trailing_zeros() as i32;
    // the biased levels are below 2·bias
    let chunk = i16_quads(2 * B::BIAS.max(1) - 1, QUADS32);
    // SAFETY: every read is inside block i's B32_BLOCK bytes of `band` or the ACT_BLOCK bytes
    // of `tile` (columns 8h.. of each 16-column row); the caller has the CPU features.
    unsafe {
        let ones = _mm256_set1_epi16(1);
        let mut acc = [_mm256_setzero_ps(); ROWS];
        for i in 0..nb {
            let bb = band.as_ptr().add(i * B32_BLOCK);
            let tb = tile.as_ptr().add(i * band32::ACT_BLOCK + h * 4 * LANES);
            let mut sums = [_mm256_setzero_si256(); ROWS];
            if B::BIAS > 0 {
                let seed = load(tb.add(band32::ACT_SUM));
                sums = [_mm256_sra_epi32(seed, _mm_cvtsi32_si128(shift)); ROWS];
                for c in (0..QUADS32).step_by(chunk) {
                    let mut p = [_mm256_setzero_si256(); ROWS];
                    for q in c..c + chunk {
                        let y = load(tb.add(q * QUAD_ROW));
                        for (r, p) in p.iter_mut().enumerate() {
                            let x = word(bb.add((r0 + r) * band32::QK), q);
                            *p = _mm256_add_epi16(*p, _mm256_maddubs_epi16(x, y));
                        }
                    }
                    for (s, p) in sums.iter_mut().zip(p) {
                        *s = _mm256_add_epi32(*s, _mm256_madd_epi16(p, ones));
                    }
                }
            } else {
                for q in 0..QUADS32 {
                    let y = load(tb.add(q * QUAD_ROW));
                    for (r, s) in sums.iter_mut().enumerate() {
                        let row = (r0 + r) * band32::QK;
                        let sy = _mm256_sign_epi8(y, word(bb.add(B32_SIGNED + row), q));
                        let p = _mm256_maddubs_epi16(word(bb.add(row), q), sy);
                        *s = _mm256_add_epi32(*s, _mm256_madd_epi16(p, ones));
                    }
                }
            }
            let yd = _mm256_loadu_ps(tb.add(band32::ACT_D) as *const f32);
            combine(&mut acc, sums, yd, bb.add(B32_D), r0);
        }
        acc
    }
}

/// Unpacks [`BAND`] k-quant rows into `band` as [`K_BLOCK`] describes.
///
/// # Safety
/// The CPU must have AVX2 and F16C; every row holds `band.len() / K_BLOCK` super-blocks.
#[inline(always)]
unsafe fn unpack_k<B: KUnpack>(w: [&[u8]; BAND], band: &mut [u8]) {
    for (t, row) in w.iter().enumerate() {
        let blocks: &[B] = bytemuck::cast_slice(row);
        for (x, o) in blocks.iter().zip(band.chunks_exact_mut(K_BLOCK)) {
            let mut scales = [0i16; 16];
            // SAFETY: forwarded from the caller; the stores write 32 bytes inside the row's
            // levels, its correction pairs, and `scales`.
            let u = unsafe {
                let u = x.unpack();
                for (c, lv) in u.levels.iter().enumerate() {
                    let dst = o[t * QK_K + 32 * c..][..32].as_mut_ptr() as *mut __m256i;
                    if B::SIGNED {
                        // the values (levels less 128), and their magnitudes as the operands
                        let v = _mm256_xor_si256(*lv, _mm256_set1_epi8(0x80u8 as i8));
                        _mm256_storeu_si256(dst, _mm256_abs_epi8(v));
                        let signed = o[K_SIGNED + t * QK_K + 32 * c..][..32].as_mut_ptr();
                        _mm256_storeu_si256(signed as *mut __m256i, v);
                    } else {
                        _mm256_storeu_si256(dst, *lv);
                    }
                }
                _mm256_storeu_si256(scales.as_mut_ptr() as *mut __m256i, u.scales);
                let cp = o[K_CP + t * 32..][..32].as_mut_ptr() as *mut __m256i;
                _mm256_storeu_si256(cp, u.corr);
                u
            };
            for g in 0..16 {
                let s = scales[scale_lane(g)] as u16 as u32;
                o[K_SC + t * 64 + 4 * g..][..4].copy_from_slice(&(s | s << 16).to_le_bytes());
            }
            o[K_D + 4 * t..][..4].copy_from_slice(&u.d.to_le_bytes());
            o[K_CD + 4 * t..][..4].copy_from_slice(&u.corr_d.to_le_bytes());
        }
    }
}

/// The dot products of band rows `r0..r0 + ROWS` with the eight columns `8h..8h + 8` of one
/// column group, over `nb` super-blocks; groups of 32 values for the paired types, else 16.
///
/// # Safety
/// The CPU must have AVX2 and FMA; `band` holds `nb` unpacked super-blocks, `tile` the group's
/// `nb` activation tiles; `r0 + ROWS <= BAND`, `h < 2`.
#[inline(always)]
unsafe fn pass_k<B: KUnpack>(
    band: &[u8],
    tile: &[u8],
    nb: usize,
    r0: usize,
    h: usize,
) -> [__m256; ROWS] {
    debug_assert!(band.len() >= nb * K_BLOCK && tile.len() >= nb * kquant_tile::ACT_BLOCK);
    let per_group = if B::PAIRED { 8 } else { 4 };
    let chunk = i16_quads(B::MAX_LEVEL, per_group);
    // SAFETY: every read is inside super-block i's K_BLOCK bytes of `band` or ACT_BLOCK bytes
    // of `tile` (columns 8h.. of each 16-column row); the caller has the CPU features.
    unsafe {
        let mut acc = [_mm256_setzero_ps(); ROWS];
        for i in 0..nb {
            let bb = band.as_ptr().add(i * K_BLOCK);
            let tb = tile
                .as_ptr()
                .add(i * kquant_tile::ACT_BLOCK + h * 4 * LANES);
            let mut sums = [_mm256_setzero_si256(); ROWS];
            for g in 0..QUADS / per_group {
                // the group's scale (for the paired types, that of its first group of 16)
                let sg = if B::PAIRED { 2 * g } else { g };
                for c in (g * per_group..(g + 1) * per_group).step_by(chunk) {
                    let mut p = [_mm256_setzero_si256(); ROWS];
                    for q in c..c + chunk {
                        let y = load(tb.add(q * QUAD_ROW));
                        for (r, p) in p.iter_mut().enumerate() {
                            let x = word(bb.add((r0 + r) * QK_K), q);
                            // the signed types: the activations carry the values' signs
                            let y = if B::SIGNED {
                                _mm256_sign_epi8(y, word(bb.add(K_SIGNED + (r0 + r) * QK_K), q))
                            } else {
                                y
                            };
                            *p = _mm256_add_epi16(*p, _mm256_maddubs_epi16(x, y));
                        }
                    }
                    for (r, (s, p)) in sums.iter_mut().zip(p).enumerate() {
                        let sc = word(bb.add(K_SC + (r0 + r) * 64), sg);
                        *s = _mm256_add_epi32(*s, _mm256_madd_epi16(p, sc));
                    }
                }
            }
            let yd = _mm256_loadu_ps(tb.add(kquant_tile::ACT_D) as *const f32);
            combine(&mut acc, sums, yd, bb.add(K_D), r0);
            if B::SIGNED {
                continue;
            }
            let mut corr = [_mm256_setzero_si256(); ROWS];
            for p in 0..8 {
                let y = load(tb.add(kquant_tile::ACT_BSUMS + p * QUAD_ROW));
                for (r, c) in corr.iter_mut().enumerate() {
                    let w = word(bb.add(K_CP + (r0 + r) * 32), p);
                    *c = _mm256_add_epi32(*c, _mm256_madd_epi16(w, y));
                }
            }
            combine(&mut acc, corr, yd, bb.add(K_CD), r0);
        }
        acc
    }
}

/// Runs `pass(tile group, r0, h)` for every column group of `tile` (`groups` of them, the
/// last holding columns up to `cols`), every eight-column half that holds a column, and every
/// [`ROWS`] band rows, into `out`.
#[inline(always)]
fn by_group(
    tile: &[u8],
    group_bytes: usize,
    cols: usize,
    out: &mut [&mut [f32]; BAND],
    mut pass: impl FnMut(&[u8], usize, usize) -> [__m256; ROWS],
) {
    for (g, t) in tile.chunks_exact(group_bytes).enumerate() {
        let mut o = [[0f32; GROUP]; BAND];
        for h in 0..GROUP / LANES {
            if g * GROUP + h * LANES >= cols {
                break;
            }
            for r0 in (0..BAND).step_by(ROWS) {
                for (r, a) in pass(t, r0, h).into_iter().enumerate() {
                    // SAFETY: eight f32 from column 8h of a 16-column row; AVX is implied by
                    // the registers `pass` returned.
                    unsafe { _mm256_storeu_ps(o[r0 + r][h * LANES..].as_mut_ptr(), a) };
                }
            }
        }
        store_group(out, g, &o);
    }
}

/// The band products of a signed 32-value type `B` with AVX2: unpacks the [`BAND`] weight
/// rows `w` into `scratch`, then dots them with each column group of `tile` (made by
/// `band32::pack_act` for `out[t].len()` columns), setting `out[t][j]`.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C; `B` is a signed type; the rows of `w` have equal
/// lengths of whole blocks; `tile` holds `band32::act_tile_bytes` for their length and
/// `out[t].len()` columns, `scratch` [`band32_bytes`].
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn band32_dots<B: Simd32>(
    w: [&[u8]; BAND],
    tile: &[u8],
    scratch: &mut [u8],
    out: &mut [&mut [f32]; BAND],
) {
    debug_assert!(!B::UNSIGNED);
    let nb = w[0].len() / size_of::<B>();
    let cols = out[0].len();
    let band = &mut scratch[..nb * B32_BLOCK];
    // SAFETY: forwarded from the caller.
    unsafe { unpack32::<B>(w, band) };
    let tile = &tile[..band32::act_tile_bytes(nb * band32::QK, cols)];
    // SAFETY: the band and each group's tiles hold nb blocks; the features are the caller's.
    by_group(tile, nb * band32::ACT_BLOCK, cols, out, |t, r0, h| unsafe {
        pass32::<B>(band, t, nb, r0, h)
    });
}

/// The band products of a k-quant `B` with AVX2: unpacks the [`BAND`] weight rows `w` into
/// `scratch`, then dots them with each column group of `tile` (made by
/// `kquant_tile::pack_act` for `out[t].len()` columns), setting `out[t][j]`.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C; the rows of `w` have equal lengths of whole
/// super-blocks; `tile` holds `kquant_tile::act_tile_bytes` for their length and
/// `out[t].len()` columns, `scratch` [`k_band_bytes`].
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn k_band_dots<B: KUnpack>(
    w: [&[u8]; BAND],
    tile: &[u8],
    scratch: &mut [u8],
    out: &mut [&mut [f32]; BAND],
) {
    let nb = w[0].len() / size_of::<B>();
    let cols = out[0].len();
    let band = &mut scratch[..nb * K_BLOCK];
    // SAFETY: forwarded from the caller.
    unsafe { unpack_k::<B>(w, band) };
    let tile = &tile[..kquant_tile::act_tile_bytes(nb * QK_K, cols)];
    // SAFETY: the band and each group's tiles hold nb super-blocks; the features are the
    // caller's.
    by_group(
        tile,
        nb * kquant_tile::ACT_BLOCK,
        cols,
        out,
        |t, r0, h| unsafe { pass_k::<B>(band, t, nb, r0, h) },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The i16 chunks stay within i16 for every level bound the types have.
    #[test]
    fn i16_chunks_cannot_overflow() {
        for (max, per_group, want) in [(63, 4, 2), (31, 8, 4), (15, 8, 8), (7, 4, 4), (3, 4, 4)] {
            let n = i16_quads(max, per_group);
            assert_eq!(n, want, "levels up to {max}");
            assert!(n * 2 * 127 * max as usize <= i16::MAX as usize);
        }
        // Q4_0 (bias 8: 0..15) and Q5_0 (bias 16: 0..31) against 8 quads per block;
        // the sign path (|x| up to 127) one quad at a time
        assert_eq!(i16_quads(15, QUADS32), 8);
        assert_eq!(i16_quads(31, QUADS32), 4);
        assert_eq!(i16_quads(127, QUADS32), 1);
    }
}
