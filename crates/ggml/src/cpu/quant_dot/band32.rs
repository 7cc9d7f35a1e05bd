//! AVX-512 VNNI band products of the signed 32-value types (Q4_0, Q5_0, Q8_0, IQ4_NL) with
//! Q8_0 activations, as `kquant_tile.rs` does them for the k-quants: [`BAND`] weight rows ×
//! column groups of [`GROUP`], one `vpdpbusd` per four values of a weight row and 16 columns.
//!
//! `vpdpbusd` multiplies unsigned by signed bytes, so the activation levels are offset by 128
//! (one XOR when the tiles are packed, [`pack_act_biased`]) and the weight levels stay signed:
//! every four values' sum starts from `−128 · Σ x` over them, a seed the band's unpacking
//! computes once per weight row and block, which leaves `Σ x·y` exactly. (The offset on the
//! weights' side would need `−128 · Σ y`, a `vpdpbusd` per four values and column group more
//! in the inner loop.) The f32 steps are those of GGML's x86 dots
//! (`ggml_vec_dot_*_q8_0` and llamafile's `tinyBLAS_Q0_AVX`, which GGML uses for these types'
//! batches): per block the eight sums of four values are eight lanes, each
//! `fma(xd·yd, lane, acc)`, and the lanes are added at the end as `hsum_float_8` — so every
//! output is bit for bit the row kernels' (`x86.rs`) and GGML's. An output's value does not
//! depend on the other rows and columns it is computed with.
//!
//! Those eight lanes per (row, column) make a band's state 64 registers for one column group,
//! twice the 32 there are, so the band is computed [`PASS`] rows at a time with their lanes
//! in registers, over a [`SLICE`] of blocks whose activation tiles every pass reads from L1;
//! the lanes wait in memory between slices (the same f32 steps in the same order). While the
//! first column group is computed, the next band's weight rows are prefetched into L2 (as
//! `kquant_tile.rs` does): unpacking a band otherwise waited on its rows from memory.

use std::arch::x86_64::*;

use super::kquant_tile::{put_column_levels, store_group, BAND, GROUP};
use super::x86::{half, prefetch_into, Act32, Simd32};

/// Values per block.
pub(super) const QK: usize = 32;

/// The activation tile of one block and one column group: the levels as 8 rows of [`GROUP`]
/// little-endian u32 (four levels of each column), then each column's `−128 · Σ y` as i32 (for
/// the AVX2 band products, `band_avx2.rs`), then the columns' scales as f32.
pub(super) const ACT_BLOCK: usize = ACT_D + GROUP * 4;
/// Offset of the block sums.
pub(super) const ACT_SUM: usize = QK / 4 * GROUP * 4;
/// Offset of the scales.
pub(super) const ACT_D: usize = ACT_SUM + GROUP * 4;

/// The band's unpacked block: each row's 32 levels, the rows' scales as f32, then each row's
/// eight seeds `−128 · Σ x` over four values as i32.
const BAND_BLOCK: usize = BAND_SEED + BAND * LANES * 4;
/// Offset of the scales.
const BAND_D: usize = BAND * QK;
/// Offset of the seeds.
const BAND_SEED: usize = BAND_D + BAND * 4;

/// Bytes of the activation tiles of `cols` columns of `k` values (whole blocks).
pub(crate) fn act_tile_bytes(k: usize, cols: usize) -> usize {
    k / QK * cols.div_ceil(GROUP) * ACT_BLOCK
}

/// Bytes of an unpacked band of rows of `k` values.
pub(crate) fn band_bytes(k: usize) -> usize {
    k / QK * BAND_BLOCK
}

/// Lays out `cols` activation rows `a` (blocks of `A`, back to back, whole rows) as the tiles
/// the AVX2 band products read (`band_avx2.rs`); the columns past `cols` in the last group are
/// zero.
///
/// # Panics
/// If `tile` is shorter than [`act_tile_bytes`] (a planning error).
pub(crate) fn pack_act<A: Act32 + bytemuck::Pod>(a: &[u8], cols: usize, tile: &mut [u8]) {
    pack_levels::<A, 0>(a, cols, tile);
}

/// [`pack_act`] with every level offset by 128 (unsigned, for `vpdpbusd`), the tiles
/// [`band_dots`] reads; the columns past `cols` are zero bytes (their products are never
/// stored).
///
/// # Panics
/// If `tile` is shorter than [`act_tile_bytes`] (a planning error).
pub(crate) fn pack_act_biased<A: Act32 + bytemuck::Pod>(a: &[u8], cols: usize, tile: &mut [u8]) {
    pack_levels::<A, 0x80>(a, cols, tile);
}

/// [`pack_act`] with every level byte XORed with `FLIP`.
fn pack_levels<A: Act32 + bytemuck::Pod, const FLIP: u8>(a: &[u8], cols: usize, tile: &mut [u8]) {
    let blocks: &[A] = bytemuck::cast_slice(a);
    let nb = blocks.len() / cols.max(1);
    let tiles = tile[..act_tile_bytes(nb * QK, cols)].chunks_exact_mut(ACT_BLOCK);
    for (n, t) in tiles.enumerate() {
        let (g, i) = (n / nb, n % nb);
        t.fill(0);
        for j in 0..GROUP.min(cols.saturating_sub(g * GROUP)) {
            let (d, qs) = blocks[(g * GROUP + j) * nb + i].parts();
            put_column_levels::<FLIP>(t, j, bytemuck::cast_slice(qs));
            let sum: i32 = qs.iter().map(|&v| v as i32).sum();
            t[ACT_SUM + 4 * j..][..4].copy_from_slice(&(-128 * sum).to_le_bytes());
            t[ACT_D + 4 * j..][..4].copy_from_slice(&d.to_f32().to_le_bytes());
        }
    }
}

/// Eight f32 lanes (one register each, a column per register lane) added as GGML's
/// `hsum_float_8` adds a register's: `((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7))`.
///
/// # Safety
/// The CPU must have AVX-512 F.
#[allow(clippy::incompatible_msrv)]
#[inline(always)]
unsafe fn hsum8_lanes(l: &[__m512; 8]) -> __m512 {
    // SAFETY: register operations; the caller has AVX-512 F.
    unsafe {
        let pair = |x: usize, y: usize| _mm512_add_ps(l[x], l[y]);
        _mm512_add_ps(
            _mm512_add_ps(pair(0, 4), pair(2, 6)),
            _mm512_add_ps(pair(1, 5), pair(3, 7)),
        )
    }
}

/// The band products ([`super::BandDot`]) of a signed 32-value type `B`: unpacks the
/// [`BAND`] weight rows `w` into `scratch`, then dots them with each column group of `tile`
/// (made by [`pack_act_biased`] for `out[t].len()` columns), setting `out[t][j]`.
///
/// # Safety
/// The CPU must have [`super::Isa::Avx512`]'s features; `B` is a signed type; the rows of `w`
/// have equal lengths of whole blocks; `tile` holds [`act_tile_bytes`] for their length and
/// `out[t].len()` columns, `scratch` [`band_bytes`].
#[allow(clippy::incompatible_msrv)]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(super) unsafe fn band_dots<B: Simd32>(
    w: [&[u8]; BAND],
    tile: &[u8],
    scratch: &mut [u8],
    out: &mut [&mut [f32]; BAND],
) {
    debug_assert!(!B::UNSIGNED);
    let nb = w[0].len() / size_of::<B>();
    let cols = out[0].len();
    let band = &mut scratch[..nb * BAND_BLOCK];
    let offset = _mm256_set1_epi8(0x80u8 as i8);
    for (t, row) in w.iter().enumerate() {
        let blocks: &[B] = bytemuck::cast_slice(row);
        for (x, o) in blocks.iter().zip(band.chunks_exact_mut(BAND_BLOCK)) {
            // SAFETY: the caller has AVX2, F16C and AVX-512 VL/VNNI; the stores write the row's
            // 32 levels and its eight seeds.
            let d = unsafe {
                let v = x.levels();
                _mm256_storeu_si256(o[t * QK..][..QK].as_mut_ptr() as *mut __m256i, v);
                let sum = _mm256_dpbusd_epi32(_mm256_setzero_si256(), offset, v);
                let seed = _mm256_sub_epi32(_mm256_setzero_si256(), sum);
                let at = o[BAND_SEED + t * LANES * 4..][..LANES * 4].as_mut_ptr();
                _mm256_storeu_si256(at as *mut __m256i, seed);
                half(x.d())
            };
            o[BAND_D + 4 * t..][..4].copy_from_slice(&d.to_le_bytes());
        }
    }
    // the rows after these (the next band's, where the weight rows lie back to back)
    let ahead = BAND * size_of_val(w[0]);
    let next = w.map(|row| row.as_ptr().wrapping_add(ahead));
    let groups = tile[..act_tile_bytes(nb * QK, cols)].chunks_exact(nb * ACT_BLOCK);
    for (g, tg) in groups.enumerate() {
        // f32 lane q of every (row, column): GGML's lane of the block's values 4q..4q + 4,
        // carried from slice to slice in memory (the passes hold them in registers)
        let mut acc = [[[0f32; GROUP]; LANES]; BAND];
        for s0 in (0..nb).step_by(SLICE) {
            let blocks = s0..nb.min(s0 + SLICE);
            for t0 in (0..BAND).step_by(PASS) {
                // the next band's rows t0..t0 + PASS, with the first group's passes over
                // these rows
                let next = (g == 0).then(|| {
                    let rows: [*const u8; PASS] = std::array::from_fn(|r| next[t0 + r]);
                    (rows, size_of::<B>())
                });
                let acc = &mut acc[t0..t0 + PASS];
                // SAFETY: blocks s0.. of `band` and `tg` are inside them (nb blocks each);
                // rows t0..t0 + PASS are rows of the band; the caller has the CPU features.
                unsafe { pass::<PASS>(band, tg, blocks.clone(), t0, acc, next) };
            }
        }
        let mut o = [[0f32; GROUP]; BAND];
        for (dst, a) in o.iter_mut().zip(&acc) {
            // SAFETY: the caller has AVX-512 F; the loads read the row's eight lanes of
            // GROUP f32 each, the store writes GROUP f32.
            unsafe {
                let lanes = std::array::from_fn(|q| _mm512_loadu_ps(a[q].as_ptr()));
                _mm512_storeu_ps(dst.as_mut_ptr(), hsum8_lanes(&lanes));
            }
        }
        store_group(out, g, &o);
    }
}

/// The f32 lanes of a block (GGML's eight sums of four values).
const LANES: usize = QK / 4;

/// Band rows per register pass: `PASS` rows × [`LANES`] accumulators of [`GROUP`] columns,
/// with the activation values, their offset sums and the scales, fit in the 32 registers
/// (the whole band's 64 accumulators would not).
const PASS: usize = 2;
const _: () = assert!(BAND % PASS == 0);

/// Blocks per slice of a row: the slice's activation tiles of one column group (640 bytes a
/// block) and the band's unpacked blocks (288 bytes) stay in L1 while every pass reads them.
const SLICE: usize = 32;

/// Adds blocks `blocks` of band rows `t0..t0 + R` times one column group (`tile`) into the
/// rows' lane accumulators `acc` (f32, loaded and stored once per call): per four values of a
/// block, `fma(xd·yd, f32(Σ x·y), lane)` with `Σ x·y` from the row's seed plus the signed
/// levels times the offset activations, as [`band_dots`] describes. With `next` (`R` row
/// addresses and the bytes of a weight block), block `i` of each of those rows is prefetched
/// into L2 with block `i` here (a prefetch never faults, whatever the address).
///
/// # Safety
/// The CPU must have [`super::Isa::Avx512`]'s features; `band` holds the band's unpacked
/// blocks and `tile` the group's activation tiles, both at least up to `blocks.end`; `acc`
/// has `R` rows and `t0 + R <= BAND`.
#[allow(clippy::incompatible_msrv)]
#[inline(always)]
unsafe fn pass<const R: usize>(
    band: &[u8],
    tile: &[u8],
    blocks: std::ops::Range<usize>,
    t0: usize,
    acc: &mut [[[f32; GROUP]; LANES]],
    next: Option<([*const u8; R], usize)>,
) {
    debug_assert!(acc.len() == R && t0 + R <= BAND);
    debug_assert!(band.len() >= blocks.end * BAND_BLOCK && tile.len() >= blocks.end * ACT_BLOCK);
    // SAFETY: every read is inside block i's BAND_BLOCK bytes of `band` or ACT_BLOCK bytes
    // of `tile` (unaligned loads), every access to `acc` inside its R rows; the caller has
    // the CPU features.
    unsafe {
        let mut a: [[__m512; LANES]; R] =
            std::array::from_fn(|r| std::array::from_fn(|q| _mm512_loadu_ps(acc[r][q].as_ptr())));
        for i in blocks {
            let bb = band.as_ptr().add(i * BAND_BLOCK);
            let tb = tile.as_ptr().add(i * ACT_BLOCK);
            if let Some((rows, bytes)) = next {
                for row in rows {
                    prefetch_into::<_MM_HINT_T1>(row.wrapping_add(i * bytes), bytes);
                }
            }
            let yd = _mm512_loadu_ps(tb.add(ACT_D) as *const f32);
            let d: [__m512; R] = std::array::from_fn(|r| {
                let xd = (bb.add(BAND_D + 4 * (t0 + r)) as *const f32).read_unaligned();
                _mm512_mul_ps(yd, _mm512_set1_ps(xd))
            });
            for q in 0..LANES {
                let y = _mm512_loadu_si512(tb.add(q * GROUP * 4) as *const __m512i);
                for (r, ar) in a.iter_mut().enumerate() {
                    let x = (bb.add((t0 + r) * QK + 4 * q) as *const i32).read_unaligned();
                    let at = bb.add(BAND_SEED + ((t0 + r) * LANES + q) * 4);
                    let seed = _mm512_set1_epi32((at as *const i32).read_unaligned());
                    let s = _mm512_dpbusd_epi32(seed, y, _mm512_set1_epi32(x));
                    ar[q] = _mm512_fmadd_ps(d[r], _mm512_cvtepi32_ps(s), ar[q]);
                }
            }
        }
        for (dst, ar) in acc.iter_mut().zip(&a) {
            for (l, v) in dst.iter_mut().zip(ar) {
                _mm512_storeu_ps(l.as_mut_ptr(), *v);
            }
        }
    }
}
