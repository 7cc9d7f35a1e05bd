//! IQ2_XXS (2.06 bits per weight), IQ2_XS (2.31) and IQ2_S (2.56): groups of 8 magnitudes on an
//! E8-lattice grid of 256, 512 or 1024 points, with per-group signs and 4-bit block scales.

use std::sync::OnceLock;

use bytemuck::{Pod, Zeroable};

use super::iq_common::{
    block_weights, f16_le_to_f32, f32_to_f16_bits, fmax, fmax_slice, fold_signs, fold_signs_even,
    imatrix_weights, nearest_int, pack_scale_nibbles, put_signed, quantize_blocks, read_u32,
    scale_code, sum_squares, UNIT_IMPORTANCE,
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

/// Quantizes to IQ2_XXS (`quantize_iq2_xxs`); GGML requires `imatrix` (see [`UNIT_IMPORTANCE`]).
pub(crate) fn quantize_iq2_xxs(
    src: &[f32],
    dst: &mut [u8],
    n_rows: usize,
    n_per_row: usize,
    imatrix: Option<&[f32]>,
) -> usize {
    let search = ScaleSearch {
        table: iq2xxs_table(),
        kmax: 3,
        steps: 6,
        step: 0.1,
        refine: Refine::AllGroups,
    };
    quantize_blocks(src, dst, n_rows, n_per_row, imatrix, 66, |xbl, qw, out| {
        quantize_block_iq2_xxs(&search, xbl, qw.unwrap_or(&UNIT_IMPORTANCE), out)
    })
}

/// One IQ2_XXS super-block (`quantize_row_iq2_xxs_impl`).
fn quantize_block_iq2_xxs(search: &ScaleSearch<8>, xbl: &[f32], qw: &[f32], out: &mut [u8]) {
    let mut q2 = [0u32; QK_K / 16];
    let mut scales = [0f32; QK_K / 32];
    let mut max_scale = 0f32;
    let sigma2 = sum_squares(xbl) / QK_K as f32;
    for (ib, (xb, qwb)) in xbl.chunks_exact(32).zip(qw.chunks_exact(32)).enumerate() {
        let mut weight = [0f32; 32];
        imatrix_weights(xb, qwb, sigma2, &mut weight);
        let waux = weight.map(f32::sqrt);
        let (mut xval, mut signs) = ([0f32; 32], [0u8; 4]);
        fold_signs_even(xb, &weight, &mut xval, &mut signs);
        if fmax_slice(&xval) < GROUP_MAX_EPS {
            continue;
        }
        let first = make_qp_quants(3 + 1, &xval, &mut [0u8; 32], &weight);
        let eff_max = first * 3.0;
        if eff_max <= 0.0 {
            continue;
        }
        let (mut l, mut index) = ([0i8; 32], [0u16; 4]);
        let mut scale = search.run(&xval, &weight, &waux, eff_max, first, &mut l, &mut index);
        if scale < 0.0 {
            scale = -scale;
            signs.iter_mut().for_each(|s| *s = !*s & 127);
        }
        q2[2 * ib] = index
            .iter()
            .enumerate()
            .fold(0, |a, (k, &i)| a | (i as u32) << (8 * k));
        q2[2 * ib + 1] = signs
            .iter()
            .enumerate()
            .fold(0, |a, (k, &s)| a | (s as u32) << (7 * k));
        scales[ib] = scale;
        max_scale = fmax(max_scale, scale);
    }
    out.fill(0);
    if max_scale == 0.0 {
        return;
    }
    let d = max_scale / 31.0;
    out[..2].copy_from_slice(&f32_to_f16_bits(d).to_le_bytes());
    let id = 1.0 / d;
    for (ib, &s) in scales.iter().enumerate() {
        q2[2 * ib + 1] |= (scale_code(id, s, 15) as u32) << 28;
    }
    for (o, w) in out[2..].chunks_exact_mut(4).zip(q2) {
        o.copy_from_slice(&w.to_le_bytes());
    }
}

/// How IQ2_XS and IQ2_S weight and sign a group of 16 values.
#[derive(Clone, Copy)]
enum Iq2Variant {
    /// IQ2_XS: imatrix weights with σ² = Σx²/256, 7 stored sign bits per 8 values.
    Xs,
    /// IQ2_S: imatrix weights with σ² = 2Σx²/256 (or σ²/4 + x² without one), 8 sign bits.
    S,
}

/// The scale, grid indices and sign bytes of a group of 16 values of IQ2_XS or IQ2_S.
fn quantize_group16(
    variant: Iq2Variant,
    search: &ScaleSearch<8>,
    xb: &[f32],
    qw: Option<&[f32]>,
    sigma2: f32,
) -> Option<(f32, [u16; 2], [u8; 2])> {
    let mut weight = [0f32; 16];
    block_weights(xb, qw, sigma2, |v| 0.25 * sigma2 + v * v, &mut weight);
    let waux = weight.map(f32::sqrt);
    let (mut xval, mut signs) = ([0f32; 16], [0u8; 2]);
    let eps = match variant {
        Iq2Variant::Xs => {
            fold_signs_even(xb, &weight, &mut xval, &mut signs);
            GROUP_MAX_EPS
        }
        Iq2Variant::S => {
            fold_signs(xb, &mut xval, &mut signs);
            GROUP_MAX_EPS_IQ2_S
        }
    };
    let max = fmax_slice(&xval);
    if max < eps {
        return None;
    }
    let (mut l, mut index) = ([0i8; 16], [0u16; 2]);
    let mut scale = search.run(&xval, &weight, &waux, max, max / 5.0, &mut l, &mut index);
    if scale < 0.0 {
        scale = -scale;
        let keep = match variant {
            Iq2Variant::Xs => 127,
            Iq2Variant::S => 255,
        };
        signs.iter_mut().for_each(|s| *s = !*s & keep);
    }
    Some((scale, index, signs))
}

/// Quantizes to IQ2_XS (`quantize_iq2_xs`); GGML requires `imatrix` (see [`UNIT_IMPORTANCE`]).
pub(crate) fn quantize_iq2_xs(
    src: &[f32],
    dst: &mut [u8],
    n_rows: usize,
    n_per_row: usize,
    imatrix: Option<&[f32]>,
) -> usize {
    let search = ScaleSearch {
        table: iq2xs_table(),
        kmax: 3,
        steps: 9,
        step: 0.1,
        refine: Refine::OffGridGroups,
    };
    quantize_blocks(src, dst, n_rows, n_per_row, imatrix, 74, |xbl, qw, out| {
        let qw = qw.unwrap_or(&UNIT_IMPORTANCE);
        let sigma2 = sum_squares(xbl) / QK_K as f32;
        let mut q2 = [0u16; QK_K / 8];
        let mut scales = [0f32; QK_K / 16];
        let mut max_scale = 0f32;
        for (ib, (xb, qwb)) in xbl.chunks_exact(16).zip(qw.chunks_exact(16)).enumerate() {
            let group = quantize_group16(Iq2Variant::Xs, &search, xb, Some(qwb), sigma2);
            if let Some((scale, index, signs)) = group {
                for k in 0..2 {
                    q2[2 * ib + k] = index[k] | (signs[k] as u16) << 9;
                }
                scales[ib] = scale;
                max_scale = fmax(max_scale, scale);
            }
        }
        out.fill(0);
        if max_scale == 0.0 {
            return;
        }
        let block: &mut BlockIq2Xs = bytemuck::from_bytes_mut(out);
        let d = max_scale / 31.0;
        block.d = f32_to_f16_bits(d).to_le_bytes();
        let id = 1.0 / d;
        pack_scale_nibbles(id, &scales, &mut block.scales);
        for (o, q) in block.qs.chunks_exact_mut(2).zip(q2) {
            o.copy_from_slice(&q.to_le_bytes());
        }
    })
}

/// Quantizes to IQ2_S (`quantize_iq2_s`), with or without `imatrix`.
pub(crate) fn quantize_iq2_s(
    src: &[f32],
    dst: &mut [u8],
    n_rows: usize,
    n_per_row: usize,
    imatrix: Option<&[f32]>,
) -> usize {
    let search = ScaleSearch {
        table: iq2s_table(),
        kmax: 3,
        steps: 9,
        step: 0.1,
        refine: Refine::OffGridGroups,
    };
    quantize_blocks(src, dst, n_rows, n_per_row, imatrix, 82, |xbl, qw, out| {
        out.fill(0);
        let block: &mut BlockIq2S = bytemuck::from_bytes_mut(out);
        let sigma2 = 2.0 * sum_squares(xbl) / QK_K as f32;
        let mut scales = [0f32; QK_K / 16];
        let mut max_scale = 0f32;
        for (ib, xb) in xbl.chunks_exact(16).enumerate() {
            let qwb = qw.map(|w| &w[16 * ib..16 * ib + 16]);
            let group = quantize_group16(Iq2Variant::S, &search, xb, qwb, sigma2);
            if let Some((scale, index, signs)) = group {
                for k in 0..2 {
                    let i8 = 2 * ib + k;
                    block.qs[i8] = index[k] as u8;
                    block.qh[i8 / 4] |= ((index[k] >> 8) as u8) << (2 * (i8 % 4));
                    block.qs[QK_K / 8 + i8] = signs[k];
                }
                scales[ib] = scale;
                max_scale = fmax(max_scale, scale);
            }
        }
        if max_scale == 0.0 {
            return;
        }
        let d = max_scale / 31.0;
        block.d = f32_to_f16_bits(d * 0.9875).to_le_bytes();
        let id = 1.0 / d;
        pack_scale_nibbles(id, &scales, &mut block.scales);
    })
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
