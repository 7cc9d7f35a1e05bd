//! IQ2_XXS (2.06 bits per weight), IQ2_XS (2.31) and IQ2_S (2.56): groups of 8 magnitudes on an
//! E8-lattice grid of 256, 512 or 1024 points, with per-group signs and 4-bit block scales.

use std::sync::OnceLock;

use bytemuck::{Pod, Zeroable};

use super::block::{block_layout, quantize_each_block, Dequantize};
use super::common::{imatrix_weights, sum_squares, PackedF16, PackedU16, GROUP_MAX_EPS};
use super::iq_common::{
    block_weights, fmax, fmax_slice, fold_signs, fold_signs_even, pack_scale_nibbles, put_signed,
    read_u32, scale_code, UNIT_IMPORTANCE,
};
use super::iq_grids::{
    IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID, KGRID_2BIT_1024, KGRID_2BIT_256, KGRID_2BIT_512,
    KSIGNS_IQ2XS,
};
use super::iq_search::{GridTable, Refine, ScaleSearch};
use super::search::make_qp_quants;
use crate::QK_K;

/// Size of the packed-level map of the 2-bit grids (largest packed vector + 2).
pub(crate) const IQ2_MAP_SIZE: usize = 43692;
/// Below this magnitude an IQ2_S group is quantized to zero (`GROUP_MAX_EPS_IQ2_S`).
const GROUP_MAX_EPS_IQ2_S: f32 = 1e-8;

/// One IQ2_XXS super-block (`block_iq2_xxs`): value = `d·(0.5 + s)/4 · grid · sign` with a
/// 4-bit `s` per 32 values.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockIq2Xxs {
    /// Super-block scale.
    pub d: PackedF16,
    /// GGML's `uint16_t qs[32]`, read as two little-endian `u32` per 32 values: four grid
    /// indices (one byte each), then four 7-bit sign patterns (bits 0..28) and `s` (28..32).
    pub qs: [u8; QK_K / 4],
}

/// One IQ2_XS super-block (`block_iq2_xs`): value = `d·(0.5 + s)/4 · grid · sign` with a 4-bit
/// `s` per 16 values.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockIq2Xs {
    /// Super-block scale.
    pub d: PackedF16,
    /// Per 8 values: grid index in bits 0..9, 7-bit sign pattern in bits 9..16.
    pub qs: [PackedU16; QK_K / 8],
    /// The scale codes `s`, two per byte (low nibble first).
    pub scales: [u8; QK_K / 32],
}

/// One IQ2_S super-block (`block_iq2_s`): value = `d·(0.5 + s)/4 · grid · sign` with a 4-bit `s`
/// per 16 values.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockIq2S {
    /// Super-block scale.
    pub d: PackedF16,
    /// Low 8 bits of the 32 grid indices, then the 32 sign bytes (one bit per value).
    pub qs: [u8; QK_K / 4],
    /// Bits 8..10 of the grid indices, four indices per byte.
    pub qh: [u8; QK_K / 32],
    /// The scale codes `s`, two per byte (low nibble first).
    pub scales: [u8; QK_K / 32],
}

block_layout!(BlockIq2Xxs, values: QK_K, bytes: 66);
block_layout!(BlockIq2Xs, values: QK_K, bytes: 74);
block_layout!(BlockIq2S, values: QK_K, bytes: 82);

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

/// The `d·(0.5 + code)/4` scale of a 4-bit block scale code.
#[inline]
fn block_scale(d: f32, code: u32) -> f32 {
    d * (0.5 + code as f32) * 0.25
}

impl Dequantize for BlockIq2Xxs {
    /// Dequantizes IQ2_XXS blocks (`dequantize_row_iq2_xxs`).
    #[inline(always)]
    fn dequantize(&self, out: &mut [f32]) {
        let d = self.d.to_f32();
        for (ib, out32) in out.chunks_exact_mut(32).enumerate() {
            let aux = read_u32(&self.qs, 2 * ib + 1);
            let db = block_scale(d, aux >> 28);
            for (l, y) in out32.chunks_exact_mut(8).enumerate() {
                let grid = IQ2XXS_GRID[self.qs[8 * ib + l] as usize].to_le_bytes();
                let signs = KSIGNS_IQ2XS[((aux >> (7 * l)) & 127) as usize];
                put_signed(y, db, &grid, signs);
            }
        }
    }
}

impl Dequantize for BlockIq2Xs {
    /// Dequantizes IQ2_XS blocks (`dequantize_row_iq2_xs`).
    #[inline(always)]
    fn dequantize(&self, out: &mut [f32]) {
        let d = self.d.to_f32();
        for (ib, out32) in out.chunks_exact_mut(32).enumerate() {
            let sc = self.scales[ib] as u32;
            let db = [block_scale(d, sc & 0xf), block_scale(d, sc >> 4)];
            for (l, y) in out32.chunks_exact_mut(8).enumerate() {
                let q = self.qs[4 * ib + l].get() as usize;
                let grid = IQ2XS_GRID[q & 511].to_le_bytes();
                put_signed(y, db[l / 2], &grid, KSIGNS_IQ2XS[q >> 9]);
            }
        }
    }
}

impl Dequantize for BlockIq2S {
    /// Dequantizes IQ2_S blocks (`dequantize_row_iq2_s`).
    #[inline(always)]
    fn dequantize(&self, out: &mut [f32]) {
        let d = self.d.to_f32();
        for (ib, out32) in out.chunks_exact_mut(32).enumerate() {
            let sc = self.scales[ib] as u32;
            let db = [block_scale(d, sc & 0xf), block_scale(d, sc >> 4)];
            for (l, y) in out32.chunks_exact_mut(8).enumerate() {
                let high = ((self.qh[ib] as usize) << (8 - 2 * l)) & 0x300;
                let grid = IQ2S_GRID[self.qs[4 * ib + l] as usize | high].to_le_bytes();
                put_signed(y, db[l / 2], &grid, self.qs[QK_K / 8 + 4 * ib + l]);
            }
        }
    }
}

/// Quantizes to IQ2_XXS (`quantize_iq2_xxs`); GGML requires `imatrix` (see [`UNIT_IMPORTANCE`]).
pub(crate) fn quantize_iq2_xxs(
    src: &[f32],
    dst: &mut [u8],
    _n_rows: usize,
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
    quantize_each_block(src, dst, n_per_row, imatrix, |xbl, qw, block| {
        quantize_block_iq2_xxs(&search, xbl, qw.unwrap_or(&UNIT_IMPORTANCE), block)
    })
}

/// One IQ2_XXS super-block (`quantize_row_iq2_xxs_impl`).
fn quantize_block_iq2_xxs(search: &ScaleSearch<8>, xbl: &[f32], qw: &[f32], y: &mut BlockIq2Xxs) {
    let mut q2 = [0u32; QK_K / 16];
    let mut scales = [0f32; QK_K / 32];
    let mut max_scale = 0f32;
    let sigma2 = sum_squares(xbl) / QK_K as f32;
    for (ib, (xb, qwb)) in xbl.chunks_exact(32).zip(qw.chunks_exact(32)).enumerate() {
        let weight = imatrix_weights::<32>(xb, qwb, sigma2);
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
    *y = BlockIq2Xxs::zeroed();
    if max_scale == 0.0 {
        return;
    }
    let d = max_scale / 31.0;
    y.d = PackedF16::from_f32(d);
    let id = 1.0 / d;
    for (ib, &s) in scales.iter().enumerate() {
        q2[2 * ib + 1] |= (scale_code(id, s, 15) as u32) << 28;
    }
    for (o, w) in y.qs.chunks_exact_mut(4).zip(q2) {
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

/// The scale, grid indices and sign bytes of a group of 16 values of IQ2_XS or IQ2_S; `None`
/// for a group of (near) zeros.
fn quantize_group16(
    variant: Iq2Variant,
    search: &ScaleSearch<8>,
    xb: &[f32],
    qw: Option<&[f32]>,
    sigma2: f32,
) -> Option<(f32, [u16; 2], [u8; 2])> {
    let weight = block_weights::<16>(xb, qw, sigma2, |v| 0.25 * sigma2 + v * v);
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
    _n_rows: usize,
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
    quantize_each_block(
        src,
        dst,
        n_per_row,
        imatrix,
        |xbl, qw, y: &mut BlockIq2Xs| {
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
            *y = BlockIq2Xs::zeroed();
            if max_scale == 0.0 {
                return;
            }
            let d = max_scale / 31.0;
            y.d = PackedF16::from_f32(d);
            pack_scale_nibbles(1.0 / d, &scales, &mut y.scales);
            for (o, q) in y.qs.iter_mut().zip(q2) {
                o.set(q);
            }
        },
    )
}

/// Quantizes to IQ2_S (`quantize_iq2_s`), with or without `imatrix`.
pub(crate) fn quantize_iq2_s(
    src: &[f32],
    dst: &mut [u8],
    _n_rows: usize,
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
    quantize_each_block(
        src,
        dst,
        n_per_row,
        imatrix,
        |xbl, qw, y: &mut BlockIq2S| {
            *y = BlockIq2S::zeroed();
            let sigma2 = 2.0 * sum_squares(xbl) / QK_K as f32;
            let mut scales = [0f32; QK_K / 16];
            let mut max_scale = 0f32;
            for (ib, xb) in xbl.chunks_exact(16).enumerate() {
                let qwb = qw.map(|w| &w[16 * ib..16 * ib + 16]);
                let group = quantize_group16(Iq2Variant::S, &search, xb, qwb, sigma2);
                if let Some((scale, index, signs)) = group {
                    for k in 0..2 {
                        let i8 = 2 * ib + k;
                        y.qs[i8] = index[k] as u8;
                        y.qh[i8 / 4] |= ((index[k] >> 8) as u8) << (2 * (i8 % 4));
                        y.qs[QK_K / 8 + i8] = signs[k];
                    }
                    scales[ib] = scale;
                    max_scale = fmax(max_scale, scale);
                }
            }
            if max_scale == 0.0 {
                return;
            }
            let d = max_scale / 31.0;
            y.d = PackedF16::from_f32(d * 0.9875);
            pack_scale_nibbles(1.0 / d, &scales, &mut y.scales);
        },
    )
}
