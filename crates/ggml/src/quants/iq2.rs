//! IQ2_XXS (2.06 bits per weight), IQ2_XS (2.31) and IQ2_S (2.56): groups of 8 magnitudes on an
//! E8-lattice grid of 256, 512 or 1024 points, with per-group signs and 4-bit block scales.

use std::sync::OnceLock;

use bytemuck::{Pod, Zeroable};

use super::iq_common::{
    f16_le_to_f32, f32_to_f16_bits, fmax_slice, fold_signs, fold_signs_even, imatrix_weights,
    nearest_int, put_signed, read_u32, scale_code, sum_squares,
};
use super::iq_grids::{
    IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID, KGRID_2BIT_1024, KGRID_2BIT_256, KGRID_2BIT_512,
    KSIGNS_IQ2XS,
};
use super::iq_search::{GridTable, Refine, ScaleSearch};

use crate::types::QK_K;

/// Size of the packed-level map of the 2-bit grids (largest packed vector + 2).
pub(crate) const IQ2_MAP_SIZE: usize = 43692;
/// Below this magnitude a group is quantized to zero (GGML's `GROUP_MAX_EPS`).
const GROUP_MAX_EPS: f32 = 1e-15;
/// As [`GROUP_MAX_EPS`], for IQ2_S (`GROUP_MAX_EPS_IQ2_S`).
const GROUP_MAX_EPS_IQ2_S: f32 = 1e-8;

/// One IQ2_XXS super-block (`block_iq2_xxs`, 66 bytes).
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub(crate) struct BlockIq2Xxs {
    /// Super-block scale, f16 little-endian.
    pub(crate) d: [u8; 2],
    /// Per 32 values, two little-endian `u32`: four grid indices (one byte each), then four
    /// 7-bit sign patterns in bits 0..28 and the block scale code in bits 28..32.
    pub(crate) qs: [u8; QK_K / 4],
}

/// One IQ2_XS super-block (`block_iq2_xs`, 74 bytes).
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub(crate) struct BlockIq2Xs {
    /// Super-block scale, f16 little-endian.
    pub(crate) d: [u8; 2],
    /// Per 8 values a little-endian `u16`: grid index in bits 0..9, 7-bit signs in 9..16.
    pub(crate) qs: [u8; QK_K / 4],
    /// Two 4-bit scale codes per 32 values (low nibble: first 16).
    pub(crate) scales: [u8; QK_K / 32],
}

/// One IQ2_S super-block (`block_iq2_s`, 82 bytes).
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub(crate) struct BlockIq2S {
    /// Super-block scale, f16 little-endian.
    pub(crate) d: [u8; 2],
    /// Low 8 bits of the 32 grid indices, then the 32 sign bytes.
    pub(crate) qs: [u8; QK_K / 4],
    /// Bits 8..10 of the grid indices, four indices per byte.
    pub(crate) qh: [u8; QK_K / 32],
    /// Two 4-bit scale codes per 32 values.
    pub(crate) scales: [u8; QK_K / 32],
}

const _: () = assert!(std::mem::size_of::<BlockIq2Xxs>() == 66);
const _: () = assert!(std::mem::size_of::<BlockIq2Xs>() == 74);
const _: () = assert!(std::mem::size_of::<BlockIq2S>() == 82);

/// Grid tables, built on first use (GGML's `iq2_data`, set up by `ggml_quantize_init`).
fn iq2xxs_table() -> &'static GridTable<8> {
    static T: OnceLock<GridTable<8>> = OnceLock::new();
    T.get_or_init(|| GridTable::new(&KGRID_2BIT_256, 2, IQ2_MAP_SIZE, 2))
}

fn iq2xs_table() -> &'static GridTable<8> {
    static T: OnceLock<GridTable<8>> = OnceLock::new();
    T.get_or_init(|| GridTable::new(&KGRID_2BIT_512, 2, IQ2_MAP_SIZE, 2))
}

fn iq2s_table() -> &'static GridTable<8> {
    static T: OnceLock<GridTable<8>> = OnceLock::new();
    T.get_or_init(|| GridTable::new(&KGRID_2BIT_1024, 2, IQ2_MAP_SIZE, 1))
}

/// The `(0.5 + code)·d/4` scale of a 4-bit block scale code.
#[inline]
fn block_scale(d: f32, code: u32) -> f32 {
    d * (0.5 + code as f32) * 0.25
}

/// Dequantizes IQ2_XXS blocks (`dequantize_row_iq2_xxs`).
pub(crate) fn dequantize_row_iq2_xxs(src: &[u8], dst: &mut [f32]) {
    for (raw, out) in src.chunks_exact(66).zip(dst.chunks_exact_mut(QK_K)) {
        let b: &BlockIq2Xxs = bytemuck::from_bytes(raw);
        let d = f16_le_to_f32(b.d);
        for (ib, out32) in out.chunks_exact_mut(32).enumerate() {
            let aux = read_u32(&b.qs, 2 * ib + 1);
            let db = block_scale(d, aux >> 28);
            for (l, y) in out32.chunks_exact_mut(8).enumerate() {
                let grid = IQ2XXS_GRID[b.qs[8 * ib + l] as usize].to_le_bytes();
                let signs = KSIGNS_IQ2XS[((aux >> (7 * l)) & 127) as usize];
                put_signed(y, db, &grid, signs);
            }
        }
    }
}

/// Dequantizes IQ2_XS blocks (`dequantize_row_iq2_xs`).
pub(crate) fn dequantize_row_iq2_xs(src: &[u8], dst: &mut [f32]) {
    for (raw, out) in src.chunks_exact(74).zip(dst.chunks_exact_mut(QK_K)) {
        let b: &BlockIq2Xs = bytemuck::from_bytes(raw);
        let d = f16_le_to_f32(b.d);
        for (ib, out32) in out.chunks_exact_mut(32).enumerate() {
            let sc = b.scales[ib] as u32;
            let db = [block_scale(d, sc & 0xf), block_scale(d, sc >> 4)];
            for (l, y) in out32.chunks_exact_mut(8).enumerate() {
                let at = 2 * (4 * ib + l);
                let q = u16::from_le_bytes([b.qs[at], b.qs[at + 1]]) as usize;
                let grid = IQ2XS_GRID[q & 511].to_le_bytes();
                put_signed(y, db[l / 2], &grid, KSIGNS_IQ2XS[q >> 9]);
            }
        }
    }
}

/// Dequantizes IQ2_S blocks (`dequantize_row_iq2_s`).
pub(crate) fn dequantize_row_iq2_s(src: &[u8], dst: &mut [f32]) {
    for (raw, out) in src.chunks_exact(82).zip(dst.chunks_exact_mut(QK_K)) {
        let b: &BlockIq2S = bytemuck::from_bytes(raw);
        let d = f16_le_to_f32(b.d);
        for (ib, out32) in out.chunks_exact_mut(32).enumerate() {
            let sc = b.scales[ib] as u32;
            let db = [block_scale(d, sc & 0xf), block_scale(d, sc >> 4)];
            for (l, y) in out32.chunks_exact_mut(8).enumerate() {
                let high = ((b.qh[ib] as usize) << (8 - 2 * l)) & 0x300;
                let grid = IQ2S_GRID[b.qs[4 * ib + l] as usize | high].to_le_bytes();
                put_signed(y, db[l / 2], &grid, b.qs[QK_K / 8 + 4 * ib + l]);
            }
        }
    }
}

/// GGML's `make_qp_quants` (non-negative levels 0..=nmax with a weighted least-squares scale),
/// which IQ2_XXS uses for its first scale estimate. Levels are kept as `u8` exactly as GGML keeps
/// them, wrap-around of a negative rounding included, since they feed the arithmetic.
fn make_qp_quants(nmax: i32, x: &[f32], l: &mut [u8], w: &[f32]) -> f32 {
    let max = x.iter().fold(0.0f32, |m, &v| if m > v { m } else { v });
    if max < GROUP_MAX_EPS {
        l.fill(0);
        return 0.0;
    }
    let mut iscale = nmax as f32 / max;
    for (q, &v) in l.iter_mut().zip(x) {
        *q = nearest_int(iscale * v) as u8;
    }
    let scale = 1.0 / iscale;
    let mut best_mse = 0.0f32;
    for ((&q, &v), &wi) in l.iter().zip(x).zip(w) {
        let diff = v - scale * q as f32;
        best_mse += wi * diff * diff;
    }
    for is in (-4..=4).filter(|&is| is != 0) {
        let iscale_is = (0.1 * is as f32 + nmax as f32) / max;
        let scale_is = 1.0 / iscale_is;
        let mut mse = 0.0f32;
        for (&v, &wi) in x.iter().zip(w) {
            let q = nearest_int(iscale_is * v).min(nmax);
            let diff = v - scale_is * q as f32;
            mse += wi * diff * diff;
        }
        if mse < best_mse {
            best_mse = mse;
            iscale = iscale_is;
        }
    }
    let (mut sumlx, mut suml2) = (0.0f32, 0.0f32);
    for ((q, &v), &wi) in l.iter_mut().zip(x).zip(w) {
        let li = nearest_int(iscale * v).min(nmax);
        *q = li as u8;
        sumlx += wi * v * li as f32;
        suml2 += wi * li as f32 * li as f32;
    }
    for _ in 0..5 {
        let mut changed = false;
        for ((q, &v), &wi) in l.iter_mut().zip(x).zip(w) {
            let cur = *q as f32;
            let mut slx = sumlx - wi * v * cur;
            let mut sl2 = suml2 - wi * cur * cur;
            if slx > 0.0 && sl2 > 0.0 {
                let new_l = nearest_int(v * sl2 / slx).min(nmax);
                if new_l != *q as i32 {
                    slx += wi * v * new_l as f32;
                    sl2 += wi * new_l as f32 * new_l as f32;
                    if slx * slx * suml2 > sumlx * sumlx * sl2 {
                        *q = new_l as u8;
                        sumlx = slx;
                        suml2 = sl2;
                        changed = true;
                    }
                }
            }
        }
        if !changed {
            break;
        }
    }
    if suml2 > 0.0 {
        sumlx / suml2
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Type;

    #[test]
    fn block_sizes_match_type_table() {
        assert_eq!(size_of::<BlockIq2Xxs>(), Type::IQ2_XXS.type_size());
        assert_eq!(size_of::<BlockIq2Xs>(), Type::IQ2_XS.type_size());
        assert_eq!(size_of::<BlockIq2S>(), Type::IQ2_S.type_size());
    }
}
