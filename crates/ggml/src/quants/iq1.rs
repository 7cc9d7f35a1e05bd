//! IQ1_S (1.56 bits per weight) and IQ1_M (1.75): groups of 8 ternary values (−1, 0, +1) on a
//! grid of 2048 points, shifted by ±1/8, with 3-bit block scales.

use bytemuck::{Pod, Zeroable};

use super::iq_common::f16_le_to_f32;
use super::iq_grids::{IQ1M_DELTA, IQ1S_DELTA, IQ1S_GRID};
use crate::types::QK_K;

/// One IQ1_S super-block (`block_iq1_s`, 50 bytes).
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub(crate) struct BlockIq1S {
    /// Super-block scale, f16 little-endian.
    pub(crate) d: [u8; 2],
    /// Low 8 bits of the 32 grid indices.
    pub(crate) qs: [u8; QK_K / 8],
    /// Per 32 values a little-endian `u16`: bits 8..11 of the four grid indices (3 bits each),
    /// the block scale code in bits 12..15 and the sign of the shift in bit 15.
    pub(crate) qh: [u8; QK_K / 16],
}

/// One IQ1_M super-block (`block_iq1_m`, 56 bytes).
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub(crate) struct BlockIq1M {
    /// Low 8 bits of the 32 grid indices.
    pub(crate) qs: [u8; QK_K / 8],
    /// Per 8 values a nibble: bits 8..11 of the grid index and the sign of the shift (bit 3).
    pub(crate) qh: [u8; QK_K / 16],
    /// Four little-endian `u16`: 3-bit scale codes per 16 values in bits 0..12, and the f16
    /// super-block scale spread over their top nibbles.
    pub(crate) scales: [u8; QK_K / 32],
}

const _: () = assert!(std::mem::size_of::<BlockIq1S>() == 50);
const _: () = assert!(std::mem::size_of::<BlockIq1M>() == 56);

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

/// Dequantizes IQ1_S blocks (`dequantize_row_iq1_s`).
pub(crate) fn dequantize_row_iq1_s(src: &[u8], dst: &mut [f32]) {
    for (raw, out) in src.chunks_exact(50).zip(dst.chunks_exact_mut(QK_K)) {
        let b: &BlockIq1S = bytemuck::from_bytes(raw);
        let d = f16_le_to_f32(b.d);
        for (ib, out32) in out.chunks_exact_mut(32).enumerate() {
            let qh = u16::from_le_bytes([b.qh[2 * ib], b.qh[2 * ib + 1]]) as usize;
            let dl = d * (2 * ((qh >> 12) & 7) + 1) as f32;
            let delta = shift(qh & 0x8000 != 0, IQ1S_DELTA);
            for (l, y) in out32.chunks_exact_mut(8).enumerate() {
                let index = b.qs[4 * ib + l] as usize | (((qh >> (3 * l)) & 7) << 8);
                put_shifted(y, dl, index, delta);
            }
        }
    }
}

/// The four little-endian `u16` scale words of an IQ1_M block.
#[inline]
fn iq1m_scale_words(b: &BlockIq1M) -> [u16; 4] {
    std::array::from_fn(|k| u16::from_le_bytes([b.scales[2 * k], b.scales[2 * k + 1]]))
}

/// Dequantizes IQ1_M blocks (`dequantize_row_iq1_m`).
pub(crate) fn dequantize_row_iq1_m(src: &[u8], dst: &mut [f32]) {
    for (raw, out) in src.chunks_exact(56).zip(dst.chunks_exact_mut(QK_K)) {
        let b: &BlockIq1M = bytemuck::from_bytes(raw);
        let sc = iq1m_scale_words(b);
        let bits =
            (sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000);
        let d = f16_le_to_f32(bits.to_le_bytes());
        for (ib, out32) in out.chunks_exact_mut(32).enumerate() {
            let s = sc[ib / 2] as usize >> (6 * (ib % 2));
            let dl = [
                d * (2 * (s & 7) + 1) as f32,
                d * (2 * ((s >> 3) & 7) + 1) as f32,
            ];
            for (l, y) in out32.chunks_exact_mut(8).enumerate() {
                let qh = b.qh[2 * ib + l / 2] as usize;
                let nibble = if l % 2 == 0 { qh & 0xf } else { qh >> 4 };
                let index = b.qs[4 * ib + l] as usize | ((nibble & 7) << 8);
                put_shifted(y, dl[l / 2], index, shift(nibble & 8 != 0, IQ1M_DELTA));
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
        assert_eq!(size_of::<BlockIq1S>(), Type::IQ1_S.type_size());
        assert_eq!(size_of::<BlockIq1M>(), Type::IQ1_M.type_size());
    }
}
