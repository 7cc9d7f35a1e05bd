//! IQ3_XXS (3.06 bits per weight) and IQ3_S (3.44): groups of 4 magnitudes on a D4-lattice grid
//! of 256 or 512 points, with signs per 8 values and 4-bit block scales.

use bytemuck::{Pod, Zeroable};

use super::block::{block_layout, Dequantize, QuantizeBlock};
use super::common::{sum_squares, PackedF16};
use super::iq_common::{block_weights, pack_scale_nibbles, put_signed, read_u32, scale_code};
use super::iq_grids::{IQ3S_GRID, IQ3XXS_GRID, KGRID_3BIT_256, KGRID_3BIT_512, KSIGNS_IQ2XS};
use super::iq_search::{
    quantize_groups, super_block_scale, LazyGrid, Refine, ScaleSearch, SignBits,
};
use crate::QK_K;

/// Size of the packed-level map of the 3-bit grids (4 levels of 3 bits).
const IQ3_MAP_SIZE: usize = 4096;
/// Below this magnitude an IQ3_XXS block is quantized to zero (`GROUP_MAX_EPS_IQ3_XXS`).
const GROUP_MAX_EPS_IQ3_XXS: f32 = 1e-8;
/// IQ3_S leaves a block at zero when its largest magnitude is exactly 0; for magnitudes (never
/// negative, ±0 included) that is the same test as being below the smallest subnormal.
const GROUP_MAX_EPS_IQ3_S: f32 = f32::from_bits(1);

/// One IQ3_XXS super-block (`block_iq3_xxs`): value = `d·(0.5 + s)/2 · grid · sign` with a 4-bit
/// `s` per 32 values.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockIq3Xxs {
    /// Super-block scale.
    pub d: PackedF16,
    /// 64 grid indices (one byte per 4 values), then per 32 values a little-endian `u32` of
    /// four 7-bit sign patterns (bits 0..28) and `s` (bits 28..32).
    pub qs: [u8; 3 * QK_K / 8],
}

/// One IQ3_S super-block (`block_iq3_s`): value = `d·(1 + 2s) · grid · sign` with a 4-bit `s`
/// per 32 values.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockIq3S {
    /// Super-block scale.
    pub d: PackedF16,
    /// Low 8 bits of the 64 grid indices.
    pub qs: [u8; QK_K / 4],
    /// Bit 8 of the grid indices, one byte per 32 values.
    pub qh: [u8; QK_K / 32],
    /// One sign byte per 8 values.
    pub signs: [u8; QK_K / 8],
    /// The scale codes `s`, two per byte (low nibble first).
    pub scales: [u8; QK_K / 64],
}

block_layout!(BlockIq3Xxs, values: QK_K, bytes: 98);
block_layout!(BlockIq3S, values: QK_K, bytes: 110);

/// Two 4-value grid points side by side, as the 8 values of one sign group.
#[inline]
fn pair(grid: &[u32], a: usize, b: usize) -> [u8; 8] {
    let mut out = [0u8; 8];
    out[..4].copy_from_slice(&grid[a].to_le_bytes());
    out[4..].copy_from_slice(&grid[b].to_le_bytes());
    out
}

impl Dequantize for BlockIq3Xxs {
    /// Dequantizes IQ3_XXS blocks (`dequantize_row_iq3_xxs`).
    #[inline(always)]
    fn dequantize(&self, out: &mut [f32]) {
        let d = self.d.to_f32();
        for (ib, out32) in out.chunks_exact_mut(32).enumerate() {
            let aux = read_u32(&self.qs[QK_K / 4..], ib);
            let db = d * (0.5 + (aux >> 28) as f32) * 0.5;
            let qs = &self.qs[8 * ib..8 * ib + 8];
            for (l, y) in out32.chunks_exact_mut(8).enumerate() {
                let signs = KSIGNS_IQ2XS[((aux >> (7 * l)) & 127) as usize];
                let grid = pair(&IQ3XXS_GRID, qs[2 * l] as usize, qs[2 * l + 1] as usize);
                put_signed(y, db, &grid, signs);
            }
        }
    }
}

impl Dequantize for BlockIq3S {
    /// Dequantizes IQ3_S blocks (`dequantize_row_iq3_s`).
    #[inline(always)]
    fn dequantize(&self, out: &mut [f32]) {
        let d = self.d.to_f32();
        for (ib, out32) in out.chunks_exact_mut(32).enumerate() {
            let code = (self.scales[ib / 2] >> (4 * (ib % 2))) & 0xf;
            let db = d * (1 + 2 * code as i32) as f32;
            let qh = self.qh[ib] as usize;
            let qs = &self.qs[8 * ib..8 * ib + 8];
            for (l, y) in out32.chunks_exact_mut(8).enumerate() {
                let i1 = qs[2 * l] as usize | ((qh << (8 - 2 * l)) & 256);
                let i2 = qs[2 * l + 1] as usize | ((qh << (7 - 2 * l)) & 256);
                put_signed(y, db, &pair(&IQ3S_GRID, i1, i2), self.signs[4 * ib + l]);
            }
        }
    }
}

/// The grids' tables (GGML's `iq3_data`).
static IQ3XXS_TABLE: LazyGrid<4> = LazyGrid::new(&KGRID_3BIT_256, 3, IQ3_MAP_SIZE, 2);
static IQ3S_TABLE: LazyGrid<4> = LazyGrid::new(&KGRID_3BIT_512, 3, IQ3_MAP_SIZE, 3);

/// The weights of block `ib` (32 values) of a super-block: from the imatrix with σ² = 2Σx²/256,
/// else x².
fn weights32(xb: &[f32], qw: Option<&[f32]>, ib: usize, sigma2: f32) -> [f32; 32] {
    let qwb = qw.map(|w| &w[32 * ib..32 * ib + 32]);
    block_weights::<32>(xb, qwb, sigma2, |v| v * v)
}

impl QuantizeBlock for BlockIq3Xxs {
    /// Quantizes to IQ3_XXS (`quantize_iq3_xxs`; without `imatrix` also GGML's
    /// `quantize_row_iq3_xxs_ref`).
    fn quantize_block(xbl: &[f32], qw: Option<&[f32]>, y: &mut Self) {
        let search = ScaleSearch {
            table: IQ3XXS_TABLE.get(),
            kmax: 8,
            steps: 15,
            step: 0.2,
            refine: Refine::OffGridGroups,
        };

        *y = BlockIq3Xxs::zeroed();
        let sigma2 = 2.0 * sum_squares(xbl) / QK_K as f32;
        let (scales, max_scale) = quantize_groups::<32, { QK_K / 32 }>(xbl, |ib, xb| {
            let weight = weights32(xb, qw, ib, sigma2);
            let g = search.quantize_group(
                xb,
                &weight,
                SignBits::EvenParity,
                GROUP_MAX_EPS_IQ3_XXS,
                |_, max| Some((max, max / 15.0)),
            )?;
            for (q, &i) in y.qs[8 * ib..8 * ib + 8].iter_mut().zip(&g.index) {
                *q = i as u8;
            }
            let packed = g
                .signs
                .iter()
                .enumerate()
                .fold(0u32, |a, (k, &s)| a | (s as u32) << (7 * k));
            y.qs[QK_K / 4 + 4 * ib..QK_K / 4 + 4 * ib + 4].copy_from_slice(&packed.to_le_bytes());
            Some(g.scale)
        });
        match super_block_scale(max_scale, 31.0, 1.0125) {
            Some((d, id)) => {
                y.d = d;
                for (ib, &s) in scales.iter().enumerate() {
                    y.qs[QK_K / 4 + 4 * ib + 3] |= scale_code(id, s, 15) << 4;
                }
            }
            None => *y = BlockIq3Xxs::zeroed(),
        }
    }
}

impl QuantizeBlock for BlockIq3S {
    /// Quantizes to IQ3_S (`quantize_iq3_s`; without `imatrix` also GGML's
    /// `quantize_row_iq3_s_ref`).
    fn quantize_block(xbl: &[f32], qw: Option<&[f32]>, y: &mut Self) {
        let search = ScaleSearch {
            table: IQ3S_TABLE.get(),
            kmax: 8,
            steps: 9,
            step: 0.2,
            refine: Refine::AllGroupsIfAnyOffGrid,
        };

        *y = BlockIq3S::zeroed();
        let sigma2 = 2.0 * sum_squares(xbl) / QK_K as f32;
        // GGML advances its `qs` and `signs` write positions only past blocks it quantizes: a
        // block of exact zeros is skipped without moving them (while `qh` and the scales stay
        // indexed by block), which shifts the following blocks' bytes. Kept for identical output.
        let mut at = 0;
        let (scales, max_scale) = quantize_groups::<32, { QK_K / 32 }>(xbl, |ib, xb| {
            let weight = weights32(xb, qw, ib, sigma2);
            let g = search.quantize_group(
                xb,
                &weight,
                SignBits::All,
                GROUP_MAX_EPS_IQ3_S,
                |_, max| Some((max, max / 15.0)),
            )?;
            for (k, &i) in g.index.iter().enumerate() {
                y.qs[8 * at + k] = i as u8;
                y.qh[ib] |= ((i >> 8) as u8) << k;
            }
            y.signs[4 * at..4 * at + 4].copy_from_slice(&g.signs);
            at += 1;
            Some(g.scale)
        });
        if let Some((d, id)) = super_block_scale(max_scale, 31.0, 1.033) {
            y.d = d;
            pack_scale_nibbles(id, &scales, &mut y.scales);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// GGML's IQ3_S does not advance its `qs`/`signs` write positions past an all-zero block of
    /// 32 (checked against GGML on inputs with such blocks while this was written). Without an
    /// imatrix a block's indices and signs depend on its own values only, so zeroing block 0
    /// must shift the other blocks' `qs` and `signs` down by one block, `qh` staying in place.
    #[test]
    fn iq3_s_zero_block_shifts_following_blocks() {
        let mut x: Vec<f32> = (0..QK_K)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 17.0)
            .collect();
        let (mut a, mut b) = (BlockIq3S::zeroed(), BlockIq3S::zeroed());
        BlockIq3S::quantize_block(&x, None, &mut a);
        x[..32].fill(0.0);
        BlockIq3S::quantize_block(&x, None, &mut b);
        assert_eq!(b.qs[..56], a.qs[8..]);
        assert_eq!(b.qs[56..], [0; 8]);
        assert_eq!(b.signs[..28], a.signs[4..]);
        assert_eq!(b.qh[0], 0);
        assert_eq!(b.qh[1..], a.qh[1..]);
    }
}
