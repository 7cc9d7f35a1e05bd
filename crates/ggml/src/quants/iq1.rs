//! IQ1_S (1.56 bits per weight) and IQ1_M (1.75): groups of 8 ternary values (−1, 0, +1) on a
//! grid of 2048 points, shifted by ±1/8, with 3-bit block scales.

use bytemuck::{Pod, Zeroable};

use super::block::{block_layout, Dequantize, QuantizeBlock};
use super::common::{imatrix_weights, sum_squares, PackedF16, PackedU16};
use super::iq2::IQ2_MAP_SIZE;
use super::iq_common::{block_weights, fmax, scale_code, UNIT_IMPORTANCE};
use super::iq_grids::{IQ1M_DELTA, IQ1S_DELTA, IQ1S_GRID, KGRID_1BIT_2048};
use super::iq_search::{quantize_groups, super_block_scale, LazyGrid, Lookup};
use crate::QK_K;

/// Below this magnitude an IQ1_S block is quantized to zero (`GROUP_MAX_EPS_IQ1_S`).
const GROUP_MAX_EPS_IQ1_S: f32 = 1e-12;
/// Below this magnitude an IQ1_M block is quantized to zero (`GROUP_MAX_EPS_IQ1_M`).
const GROUP_MAX_EPS_IQ1_M: f32 = 1e-7;

/// One IQ1_S super-block (`block_iq1_s`): value = `d·(2s + 1) · (grid ± 1/8)` with a 3-bit `s`
/// and a shift sign per 32 values.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockIq1S {
    /// Super-block scale.
    pub d: PackedF16,
    /// Low 8 bits of the 32 grid indices.
    pub qs: [u8; QK_K / 8],
    /// Per 32 values: bits 8..11 of the four grid indices (3 bits each, bits 0..12), `s` (bits
    /// 12..15) and the sign of the shift (bit 15).
    pub qh: [PackedU16; QK_K / 32],
}

/// One IQ1_M super-block (`block_iq1_m`): value = `d·(2s + 1) · (grid ± 1/8)` with a 3-bit `s`
/// per 16 values and a shift sign per 8.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockIq1M {
    /// Low 8 bits of the 32 grid indices.
    pub qs: [u8; QK_K / 8],
    /// Per 8 values a nibble: bits 8..11 of the grid index (bits 0..3) and the shift sign (bit 3).
    pub qh: [u8; QK_K / 16],
    /// The codes `s` (3 bits per 16 values, 12 bits per word) and the f16 super-block scale `d`,
    /// spread over the top nibbles of the four words.
    pub scales: [PackedU16; QK_K / 64],
}

block_layout!(BlockIq1S, values: QK_K, bytes: 50);
block_layout!(BlockIq1M, values: QK_K, bytes: 56);

/// Writes `scale · (grid[j] + delta)` for the 8 values of a group (grid bytes are `int8_t`).
#[inline]
fn put_shifted(y: &mut [f32], scale: f32, index: usize, delta: f32) {
    let grid = IQ1S_GRID[index].to_le_bytes();
    for (out, &g) in y[..8].iter_mut().zip(&grid) {
        *out = scale * (g as i8 as f32 + delta);
    }
}

/// The shift of a group: `-delta` when its sign bit is set.
#[inline]
fn shift(negative: bool, delta: f32) -> f32 {
    if negative {
        -delta
    } else {
        delta
    }
}

impl Dequantize for BlockIq1S {
    /// Dequantizes IQ1_S blocks (`dequantize_row_iq1_s`).
    #[inline(always)]
    fn dequantize(&self, out: &mut [f32]) {
        let d = self.d.to_f32();
        for (ib, out32) in out.chunks_exact_mut(32).enumerate() {
            let qh = self.qh[ib].get() as usize;
            let dl = d * (2 * ((qh >> 12) & 7) + 1) as f32;
            let delta = shift(qh & 0x8000 != 0, IQ1S_DELTA);
            for (l, y) in out32.chunks_exact_mut(8).enumerate() {
                let index = self.qs[4 * ib + l] as usize | (((qh >> (3 * l)) & 7) << 8);
                put_shifted(y, dl, index, delta);
            }
        }
    }
}

impl Dequantize for BlockIq1M {
    /// Dequantizes IQ1_M blocks (`dequantize_row_iq1_m`).
    #[inline(always)]
    fn dequantize(&self, out: &mut [f32]) {
        let sc = self.scales.map(PackedU16::get);
        let d = self.d().to_f32();
        for (ib, out32) in out.chunks_exact_mut(32).enumerate() {
            let s = sc[ib / 2] as usize >> (6 * (ib % 2));
            let dl = [
                d * (2 * (s & 7) + 1) as f32,
                d * (2 * ((s >> 3) & 7) + 1) as f32,
            ];
            for (l, y) in out32.chunks_exact_mut(8).enumerate() {
                let qh = self.qh[2 * ib + l / 2] as usize;
                let nibble = if l % 2 == 0 { qh & 0xf } else { qh >> 4 };
                let index = self.qs[4 * ib + l] as usize | ((nibble & 7) << 8);
                put_shifted(y, dl[l / 2], index, shift(nibble & 8 != 0, IQ1M_DELTA));
            }
        }
    }
}

/// The IQ1 grid table, built on first use (shared by IQ1_S and IQ1_M, as in GGML's `iq2_data`).
static IQ1_TABLE: LazyGrid<8> = LazyGrid::new(&KGRID_1BIT_2048, 2, IQ2_MAP_SIZE, 3);

/// The values a level 0, 1, 2 stands for with a positive or negative shift `delta`.
fn shifted_levels(delta: f32) -> [[f32; 3]; 2] {
    [
        [-1.0 + delta, delta, 1.0 + delta],
        [-1.0 - delta, -delta, 1.0 - delta],
    ]
}

/// Indices of `xb` in ascending order of value; ties (−0 and +0 included) keep their order, as
/// glibc's `qsort` (a merge sort) leaves them in GGML. NaNs, which GGML's comparison leaves
/// unordered, go last so that the order stays total.
///
/// Each value is turned into an unsigned key that orders as the value does (−0 and +0 equal,
/// NaN above everything), with the index in the low bits, so that an unstable sort of the keys
/// is the stable sort of the values.
fn sorted_order<const N: usize>(xb: &[f32]) -> [usize; N] {
    let mut keys: [u64; N] = std::array::from_fn(|i| {
        let v = xb[i] + 0.0; // −0 becomes +0
        let bits = v.to_bits();
        let ordered = if v.is_nan() {
            u32::MAX
        } else if bits >> 31 == 1 {
            !bits
        } else {
            bits | 0x8000_0000
        };
        (u64::from(ordered) << 32) | i as u64
    });
    keys.sort_unstable();
    keys.map(|k| (k & 0xffff_ffff) as usize)
}

/// The largest magnitude of a block (GGML's `MAX` over `fabsf`).
fn max_abs(xb: &[f32]) -> f32 {
    xb[1..].iter().fold(xb[0].abs(), |m, &v| fmax(m, v.abs()))
}

/// Levels from the best split of the sorted values: the first `i1` get 0, up to `i2` get 1,
/// the rest 2; mirrored (`2 − l`) when the fitted scale came out negative.
fn split_levels(order: &[usize], i1: usize, i2: usize, mirror: bool, l: &mut [i8]) {
    for (j, &i) in order.iter().enumerate() {
        let level = if j < i1 {
            0
        } else if j < i2 {
            1
        } else {
            2
        };
        l[i] = if mirror { 2 - level } else { level };
    }
}

/// Moves each group of 8 levels onto the grid (group `k` valued with `xx[k]`), writing the
/// grid indices; when any group was off the grid, refits the scale to the chosen points.
fn snap_and_refit(
    xb: &[f32],
    weight: &[f32],
    mut scale: f32,
    xx: &[&[f32; 3]],
    l: &mut [i8],
    index: &mut [u16],
) -> f32 {
    let table = IQ1_TABLE.get();
    let mut all_on_grid = true;
    for (k, ix) in index.iter_mut().enumerate() {
        let g = 8 * k..8 * k + 8;
        *ix = match table.lookup(&l[g.clone()]) {
            Lookup::OnGrid(i) => i as u16,
            Lookup::Off(neighbours) => {
                all_on_grid = false;
                let (x, w) = (&xb[g.clone()], &weight[g.clone()]);
                table.best_neighbour(neighbours, x, w, scale, xx[k], &mut l[g]) as u16
            }
        };
    }
    if !all_on_grid {
        let (mut sumqx, mut sumq2) = (0.0f32, 0.0f32);
        for (k, &ix) in index.iter().enumerate() {
            for (j, &level) in table.levels(ix as usize).iter().enumerate() {
                let w = weight[8 * k + j];
                let q = xx[k][level as usize];
                sumqx += w * q * xb[8 * k + j];
                sumq2 += w * q * q;
            }
        }
        if sumqx > 0.0 && sumq2 > 0.0 {
            scale = sumqx / sumq2;
        }
    }
    scale
}

/// IQ1_S's search for the best split of a block of 32 sorted values into levels 0, 1, 2 (the
/// first `i1` values, up to `i2`, the rest) and shift (`xs[0]` positive, `xs[1]` negative), from
/// the prefix sums of `w·x` and `w` in sorted order. Returns `(i1, i2, negative shift, scale)`
/// of the best weighted least-squares fit, `None` when no split has a positive Σ w·q².
///
/// GGML tries every `(i1, i2)` in order, positive shift before negative, and keeps a candidate
/// when `sumqx² > best·sumq2`. The sums of one row of candidates (fixed `i1`) do not depend on
/// the outcome, so they are computed together (vectorizable, each with GGML's operations), and
/// the row is scanned in order only when one of its candidates beats the best so far.
fn best_split(
    sumx: &[f32; 33],
    sumw: &[f32; 33],
    xs: [&[f32; 3]; 2],
) -> Option<(usize, usize, bool, f32)> {
    /// 33 candidates `i2` per row, padded to whole vectors.
    const W: usize = 36;
    let pad = |s: &[f32; 33]| -> [f32; W] { std::array::from_fn(|i| s[i.min(32)]) };
    let (sx, sw) = (pad(sumx), pad(sumw));
    let mut best_score = -f32::MAX;
    let mut best = None;
    let (mut qx, mut q2) = ([[0f32; W]; 2], [[0f32; W]; 2]);
    for i1 in 0..=32 {
        // Bit i2 of hits[s]: candidate (i1, i2, s) beats the best so far.
        let mut hits = [0u64; 2];
        for (((qx, q2), x), hits) in qx.iter_mut().zip(q2.iter_mut()).zip(xs).zip(&mut hits) {
            let ax = (sumx[i1] - sumx[0]) * x[0];
            let aw = (sumw[i1] - sumw[0]) * x[0] * x[0];
            // Only i2 >= i1 is a candidate: start at the vector holding i1.
            let lo = i1 & !3;
            for i2 in lo..W {
                qx[i2] = ax + (sx[i2] - sumx[i1]) * x[1] + (sumx[32] - sx[i2]) * x[2];
                q2[i2] = aw + (sw[i2] - sumw[i1]) * x[1] * x[1] + (sumw[32] - sw[i2]) * x[2] * x[2];
            }
            // Candidates outside `i1..=32` get Σ w·q² = 0, which never wins.
            q2[lo..i1].fill(0.0);
            q2[33..].fill(0.0);
            let beats = |i2: usize| (q2[i2] > 0.0) & (qx[i2] * qx[i2] > best_score * q2[i2]);
            if (lo..W).fold(false, |any, i2| any | beats(i2)) {
                *hits = (lo..W).fold(0, |h, i2| h | u64::from(beats(i2)) << i2);
            }
        }
        // Judge the hits in GGML's order (by i2, positive shift first). A candidate that did not
        // beat the best at the start of the row cannot beat a larger one; should a new best
        // come out smaller (rounding), every later candidate of the row is judged again.
        let mut judge = |s: usize, i2: usize| {
            let (sqx, sq2) = (qx[s][i2], q2[s][i2]);
            let previous = best_score;
            if sq2 > 0.0 && sqx * sqx > best_score * sq2 {
                let scale = sqx / sq2;
                best_score = scale * sqx;
                best = Some((i1, i2, s == 1, scale));
            }
            best_score < previous
        };
        let mut judge_all_from = None;
        while hits[0] | hits[1] != 0 {
            let (p, m) = (hits[0].trailing_zeros(), hits[1].trailing_zeros());
            let (s, i2) = (usize::from(m < p), p.min(m) as usize);
            hits[s] &= hits[s] - 1;
            if judge(s, i2) {
                judge_all_from = Some(2 * i2 + s + 1);
                break;
            }
        }
        for c in judge_all_from.map_or(0..0, |from| from..2 * 33) {
            judge(c % 2, c / 2);
        }
    }
    best
}

impl QuantizeBlock for BlockIq1S {
    /// Quantizes to IQ1_S (`quantize_iq1_s`); GGML requires `imatrix` (see [`UNIT_IMPORTANCE`]).
    fn quantize_block(xbl: &[f32], qw: Option<&[f32]>, block: &mut Self) {
        let [x_p, x_m] = shifted_levels(IQ1S_DELTA);

        let qw = qw.unwrap_or(&UNIT_IMPORTANCE);
        *block = BlockIq1S::zeroed();
        let mut negative = [false; QK_K / 32];
        let sigma2 = 2.0 * sum_squares(xbl) / QK_K as f32;
        let (scales, max_scale) = quantize_groups::<32, { QK_K / 32 }>(xbl, |ib, xb| {
            let weight = imatrix_weights::<32>(xb, &qw[32 * ib..32 * ib + 32], sigma2);
            let max = max_abs(xb);
            if max < GROUP_MAX_EPS_IQ1_S {
                return None;
            }
            let order = sorted_order::<32>(xb);
            let (mut sumx, mut sumw) = ([0f32; 33], [0f32; 33]);
            for (j, &i) in order.iter().enumerate() {
                sumx[j + 1] = sumx[j] + weight[i] * xb[i];
                sumw[j + 1] = sumw[j] + weight[i];
            }
            let (i1, i2, mut neg, mut scale) = best_split(&sumx, &sumw, [&x_p, &x_m])?;
            let mut l = [0i8; 32];
            split_levels(&order, i1, i2, scale < 0.0, &mut l);
            if scale < 0.0 {
                scale = -scale;
                neg = !neg;
            }
            let xx = if neg { &x_m } else { &x_p };
            let mut index = [0u16; 4];
            let scale = snap_and_refit(xb, &weight, scale, &[xx; 4], &mut l, &mut index);
            let mut h = 0u16;
            for (k, &ix) in index.iter().enumerate() {
                block.qs[4 * ib + k] = ix as u8;
                h |= (ix >> 8) << (3 * k);
            }
            block.qh[ib].set(h);
            negative[ib] = neg;
            Some(scale)
        });
        let Some((d, id)) = super_block_scale(max_scale, 15.0, 1.125) else {
            return;
        };
        block.d = d;
        for (qh, (&s, &neg)) in block.qh.iter_mut().zip(scales.iter().zip(&negative)) {
            let code = scale_code(id, s, 7) | if neg { 8 } else { 0 };
            qh.set(qh.get() | (code as u16) << 12);
        }
    }
}

impl QuantizeBlock for BlockIq1M {
    /// Quantizes to IQ1_M (`quantize_iq1_m`), with or without `imatrix`.
    fn quantize_block(xbl: &[f32], qw: Option<&[f32]>, block: &mut Self) {
        let [x_p, x_m] = shifted_levels(IQ1M_DELTA);
        // Shift combination k: bit 1 negates the first 8 values' shift, bit 0 the second 8's.
        let xx_of = |k: usize| -> [&[f32; 3]; 2] {
            [
                if k < 2 { &x_p } else { &x_m },
                if k % 2 == 0 { &x_p } else { &x_m },
            ]
        };
        let weights_of = |xb: &[f32], qw: Option<&[f32]>, ib: usize, sigma2: f32| -> [f32; 16] {
            let qwb = qw.map(|w| &w[16 * ib..16 * ib + 16]);
            block_weights::<16>(xb, qwb, sigma2, |v| v * v)
        };

        *block = BlockIq1M::zeroed();
        let mut scales = [0f32; QK_K / 16];
        let mut shifts = [0usize; QK_K / 16];
        let mut max_scale = 0f32;
        let sigma2 = 2.0 * sum_squares(xbl) / QK_K as f32;
        for (ib, xb) in xbl.chunks_exact(16).enumerate() {
            let weight = weights_of(xb, qw, ib, sigma2);
            let max = max_abs(xb);
            if max < GROUP_MAX_EPS_IQ1_M {
                continue;
            }
            let order = sorted_order::<16>(xb);
            let mut best_score = -f32::MAX;
            let mut scale = max;
            let mut best: Option<(usize, usize, usize)> = None;
            for i1 in 0..=16 {
                for i2 in i1..=16 {
                    let (mut sumqx, mut sumq2) = ([0f32; 4], [0f32; 4]);
                    for (j, &i) in order.iter().enumerate() {
                        let level = if j < i1 {
                            0
                        } else if j < i2 {
                            1
                        } else {
                            2
                        };
                        for k in 0..4 {
                            let x = xx_of(k)[i / 8][level];
                            sumqx[k] += weight[i] * x * xb[i];
                            sumq2[k] += weight[i] * x * x;
                        }
                    }
                    for k in 0..4 {
                        if sumq2[k] > 0.0 && sumqx[k] * sumqx[k] > best_score * sumq2[k] {
                            scale = sumqx[k] / sumq2[k];
                            best_score = scale * sumqx[k];
                            best = Some((i1, i2, k));
                        }
                    }
                }
            }
            let Some((i1, i2, mut k)) = best else {
                continue;
            };
            let mut l = [0i8; 16];
            split_levels(&order, i1, i2, scale < 0.0, &mut l);
            if scale < 0.0 {
                scale = -scale;
                k = 3 - k;
            }
            let mut index = [0u16; 2];
            let scale = snap_and_refit(xb, &weight, scale, &xx_of(k), &mut l, &mut index);
            block.qs[2 * ib] = index[0] as u8;
            block.qs[2 * ib + 1] = index[1] as u8;
            block.qh[ib] = ((index[0] >> 8) | ((index[1] >> 8) << 4)) as u8;
            scales[ib] = scale;
            shifts[ib] = k;
            max_scale = fmax(max_scale, scale);
        }
        if max_scale == 0.0 {
            return;
        }
        // Block scale codes, then the super-block scale refitted to the coded scales.
        const SHIFT_BITS: [u8; 4] = [0x00, 0x80, 0x08, 0x88];
        let table = IQ1_TABLE.get();
        let mut sc = [0u16; 4];
        let mut d = max_scale / 15.0;
        let id = 1.0 / d;
        let (mut sumqx, mut sumq2) = (0.0f32, 0.0f32);
        for (ib, xb) in xbl.chunks_exact(16).enumerate() {
            let code = scale_code(id, scales[ib], 7);
            sc[ib / 4] |= (code as u16) << (3 * (ib % 4));
            block.qh[ib] |= SHIFT_BITS[shifts[ib]];
            let weight = weights_of(xb, qw, ib, sigma2);
            let xx = xx_of(shifts[ib]);
            for k in 0..2 {
                let high = ((block.qh[ib] as usize) << (8 - 4 * k)) & 0x700;
                let levels = table.levels(block.qs[2 * ib + k] as usize | high);
                for (j, &level) in levels.iter().enumerate() {
                    let w = weight[8 * k + j];
                    let q = xx[k][level as usize] * (2 * code as i32 + 1) as f32;
                    sumqx += w * q * xb[8 * k + j];
                    sumq2 += w * q * q;
                }
            }
        }
        if sumq2 > 0.0 {
            d = sumqx / sumq2;
        }
        let s = PackedF16::from_f32(d * 1.1125).to_bits();
        sc[0] |= (s & 0x000f) << 12;
        sc[1] |= (s & 0x00f0) << 8;
        sc[2] |= (s & 0x0f00) << 4;
        sc[3] |= s & 0xf000;
        for (o, w) in block.scales.iter_mut().zip(sc) {
            o.set(w);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The key sort orders as a stable sort by value does: ±0 tie, NaNs last, ties in index
    /// order.
    #[test]
    fn sorted_order_is_the_stable_value_order() {
        let pool = [
            0.0,
            -0.0,
            1.5,
            -1.5,
            f32::NAN,
            f32::INFINITY,
            -f32::INFINITY,
            1e-40,
            -1e-40,
        ];
        let mut seed = 99u32;
        for _ in 0..2000 {
            let x: [f32; 16] = std::array::from_fn(|_| {
                seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12345);
                pool[(seed >> 16) as usize % pool.len()]
            });
            let mut want: Vec<usize> = (0..16).collect();
            want.sort_by(|&a, &b| match (x[a].is_nan(), x[b].is_nan()) {
                (false, false) => x[a].partial_cmp(&x[b]).unwrap(),
                (na, nb) => na.cmp(&nb),
            });
            assert_eq!(sorted_order::<16>(&x).to_vec(), want, "{x:?}");
        }
    }

    /// GGML's split search as written there: every (i1, i2), positive shift then negative.
    fn best_split_in_order(
        sumx: &[f32; 33],
        sumw: &[f32; 33],
        xs: [&[f32; 3]; 2],
    ) -> Option<(usize, usize, bool, f32)> {
        let mut best_score = -f32::MAX;
        let mut best = None;
        for i1 in 0..=32 {
            for i2 in i1..=32 {
                for (s, x) in xs.iter().enumerate() {
                    let sumqx = (sumx[i1] - sumx[0]) * x[0]
                        + (sumx[i2] - sumx[i1]) * x[1]
                        + (sumx[32] - sumx[i2]) * x[2];
                    let sumq2 = (sumw[i1] - sumw[0]) * x[0] * x[0]
                        + (sumw[i2] - sumw[i1]) * x[1] * x[1]
                        + (sumw[32] - sumw[i2]) * x[2] * x[2];
                    if sumq2 > 0.0 && sumqx * sumqx > best_score * sumq2 {
                        let scale = sumqx / sumq2;
                        best_score = scale * sumqx;
                        best = Some((i1, i2, s == 1, scale));
                    }
                }
            }
        }
        best
    }

    /// The row-at-a-time search picks exactly what GGML's candidate-at-a-time loop picks, on
    /// sorted blocks with ties, zero weights, zeros and non-finite values.
    #[test]
    fn best_split_matches_the_sequential_search() {
        let [x_p, x_m] = shifted_levels(IQ1S_DELTA);
        let mut seed = 0x1234_5678u32;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            seed
        };
        for case in 0..3000 {
            let mut x: [f32; 32] = std::array::from_fn(|_| match case % 4 {
                0 => (next() % 5) as f32 * 0.5 - 1.0,
                1 => (next() % 2000) as f32 / 1000.0 - 1.0,
                2 => [0.0, -0.0, 1e-30, 3.0][next() as usize % 4],
                _ => [f32::INFINITY, 1.0, -2.0, f32::NAN][next() as usize % 4],
            });
            x.sort_by(f32::total_cmp);
            let w: [f32; 32] = std::array::from_fn(|_| [0.0, 0.5, 1.0, 7.0][next() as usize % 4]);
            let (mut sumx, mut sumw) = ([0f32; 33], [0f32; 33]);
            for j in 0..32 {
                sumx[j + 1] = sumx[j] + w[j] * x[j];
                sumw[j + 1] = sumw[j] + w[j];
            }
            let got = best_split(&sumx, &sumw, [&x_p, &x_m]);
            let want = best_split_in_order(&sumx, &sumw, [&x_p, &x_m]);
            let bits =
                |r: Option<(usize, usize, bool, f32)>| r.map(|(a, b, c, d)| (a, b, c, d.to_bits()));
            assert_eq!(bits(got), bits(want), "case {case}: {x:?} {w:?}");
        }
    }
}
