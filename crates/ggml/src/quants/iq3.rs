//! IQ3_XXS (3.06 bits per weight) and IQ3_S (3.44): groups of 4 magnitudes on a D4-lattice grid
//! of 256 or 512 points, with signs per 8 values and 4-bit block scales.

use bytemuck::{Pod, Zeroable};

use super::iq_common::{f16_le_to_f32, put_signed, read_u32};
use super::iq_grids::{IQ3S_GRID, IQ3XXS_GRID, KSIGNS_IQ2XS};
use crate::types::QK_K;

/// One IQ3_XXS super-block (`block_iq3_xxs`, 98 bytes).
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub(crate) struct BlockIq3Xxs {
    /// Super-block scale, f16 little-endian.
    pub(crate) d: [u8; 2],
    /// 64 grid indices (one byte per 4 values), then per 32 values a little-endian `u32` of
    /// four 7-bit sign patterns (bits 0..28) and the block scale code (bits 28..32).
    pub(crate) qs: [u8; 3 * QK_K / 8],
}

/// One IQ3_S super-block (`block_iq3_s`, 110 bytes).
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub(crate) struct BlockIq3S {
    /// Super-block scale, f16 little-endian.
    pub(crate) d: [u8; 2],
    /// Low 8 bits of the 64 grid indices.
    pub(crate) qs: [u8; QK_K / 4],
    /// Bit 8 of the grid indices, one byte per 32 values.
    pub(crate) qh: [u8; QK_K / 32],
    /// One sign byte per 8 values.
    pub(crate) signs: [u8; QK_K / 8],
    /// Two 4-bit scale codes per 64 values.
    pub(crate) scales: [u8; QK_K / 64],
}

const _: () = assert!(std::mem::size_of::<BlockIq3Xxs>() == 98);
const _: () = assert!(std::mem::size_of::<BlockIq3S>() == 110);

/// Two 4-value grid points side by side, as the 8 values of one sign group.
#[inline]
fn pair(grid: &[u32], a: usize, b: usize) -> [u8; 8] {
    let mut out = [0u8; 8];
    out[..4].copy_from_slice(&grid[a].to_le_bytes());
    out[4..].copy_from_slice(&grid[b].to_le_bytes());
    out
}

/// Dequantizes IQ3_XXS blocks (`dequantize_row_iq3_xxs`).
pub(crate) fn dequantize_row_iq3_xxs(src: &[u8], dst: &mut [f32]) {
    for (raw, out) in src.chunks_exact(98).zip(dst.chunks_exact_mut(QK_K)) {
        let b: &BlockIq3Xxs = bytemuck::from_bytes(raw);
        let d = f16_le_to_f32(b.d);
        for (ib, out32) in out.chunks_exact_mut(32).enumerate() {
            let aux = read_u32(&b.qs[QK_K / 4..], ib);
            let db = d * (0.5 + (aux >> 28) as f32) * 0.5;
            let qs = &b.qs[8 * ib..8 * ib + 8];
            for (l, y) in out32.chunks_exact_mut(8).enumerate() {
                let signs = KSIGNS_IQ2XS[((aux >> (7 * l)) & 127) as usize];
                let grid = pair(&IQ3XXS_GRID, qs[2 * l] as usize, qs[2 * l + 1] as usize);
                put_signed(y, db, &grid, signs);
            }
        }
    }
}

/// Dequantizes IQ3_S blocks (`dequantize_row_iq3_s`).
pub(crate) fn dequantize_row_iq3_s(src: &[u8], dst: &mut [f32]) {
    for (raw, out) in src.chunks_exact(110).zip(dst.chunks_exact_mut(QK_K)) {
        let b: &BlockIq3S = bytemuck::from_bytes(raw);
        let d = f16_le_to_f32(b.d);
        for (ib, out32) in out.chunks_exact_mut(32).enumerate() {
            let code = (b.scales[ib / 2] >> (4 * (ib % 2))) & 0xf;
            let db = d * (1 + 2 * code as i32) as f32;
            let qh = b.qh[ib] as usize;
            let qs = &b.qs[8 * ib..8 * ib + 8];
            for (l, y) in out32.chunks_exact_mut(8).enumerate() {
                let i1 = qs[2 * l] as usize | ((qh << (8 - 2 * l)) & 256);
                let i2 = qs[2 * l + 1] as usize | ((qh << (7 - 2 * l)) & 256);
                put_signed(y, db, &pair(&IQ3S_GRID, i1, i2), b.signs[4 * ib + l]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Type;

    #[test]
    fn block_sizes_match_type_table() {
        assert_eq!(size_of::<BlockIq3Xxs>(), Type::IQ3_XXS.type_size());
        assert_eq!(size_of::<BlockIq3S>(), Type::IQ3_S.type_size());
    }
}
