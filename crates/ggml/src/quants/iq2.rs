//! IQ2_XXS (2.06 bits per weight), IQ2_XS (2.31) and IQ2_S (2.56): groups of 8 magnitudes on an
//! E8-lattice grid of 256, 512 or 1024 points, with per-group signs and 4-bit block scales.

use bytemuck::{Pod, Zeroable};

use super::block::{block_layout, Dequantize, QuantizeBlock};
use super::common::{imatrix_weights, sum_squares, PackedF16, PackedU16, GROUP_MAX_EPS};
use super::iq_common::{
    block_weights, pack_scale_nibbles, put_signed, read_u32, scale_code, UNIT_IMPORTANCE,
};
use super::iq_grids::{
    IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID, KGRID_2BIT_1024, KGRID_2BIT_256, KGRID_2BIT_512,
    KSIGNS_IQ2XS,
};
use super::iq_search::{
    quantize_groups, super_block_scale, GridTable, LazyGrid, Refine, ScaleSearch, SignBits,
};
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

/// The grids' tables (GGML's `iq2_data`).
static IQ2XXS_TABLE: LazyGrid<8> = LazyGrid::new(&KGRID_2BIT_256, 2, IQ2_MAP_SIZE, 2);
static IQ2XS_TABLE: LazyGrid<8> = LazyGrid::new(&KGRID_2BIT_512, 2, IQ2_MAP_SIZE, 2);
static IQ2S_TABLE: LazyGrid<8> = LazyGrid::new(&KGRID_2BIT_1024, 2, IQ2_MAP_SIZE, 1);

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

impl QuantizeBlock for BlockIq2Xxs {
    /// Quantizes to IQ2_XXS (`quantize_iq2_xxs`); GGML requires `imatrix` (see [`UNIT_IMPORTANCE`]).
    fn quantize_block(xbl: &[f32], qw: Option<&[f32]>, y: &mut Self) {
        let search = ScaleSearch {
            table: IQ2XXS_TABLE.get(),
            kmax: 3,
            steps: 6,
            step: 0.1,
            refine: Refine::AllGroups,
        };

        let qw = qw.unwrap_or(&UNIT_IMPORTANCE);
        let sigma2 = sum_squares(xbl) / QK_K as f32;
        // Per 32 values: four grid indices, then the sign patterns (and later the scale code).
        let mut q2 = [0u32; QK_K / 16];
        let (scales, max_scale) = quantize_groups::<32, { QK_K / 32 }>(xbl, |ib, xb| {
            let weight = imatrix_weights::<32>(xb, &qw[32 * ib..32 * ib + 32], sigma2);
            let g = search.quantize_group(
                xb,
                &weight,
                SignBits::EvenParity,
                GROUP_MAX_EPS,
                |xval, _| {
                    let first = make_qp_quants(3 + 1, xval, &mut [0u8; 32], &weight);
                    let eff_max = first * 3.0;
                    if eff_max <= 0.0 {
                        None
                    } else {
                        Some((eff_max, first))
                    }
                },
            )?;
            q2[2 * ib] = pack_bits(&g.index[..4], 8);
            q2[2 * ib + 1] = pack_bits(&g.signs, 7);
            Some(g.scale)
        });
        *y = BlockIq2Xxs::zeroed();
        let Some((d, id)) = super_block_scale(max_scale, 31.0, 1.0) else {
            return;
        };
        y.d = d;
        for (ib, &s) in scales.iter().enumerate() {
            q2[2 * ib + 1] |= (scale_code(id, s, 15) as u32) << 28;
        }
        for (o, w) in y.qs.chunks_exact_mut(4).zip(q2) {
            o.copy_from_slice(&w.to_le_bytes());
        }
    }
}

/// The fields `v[k]` of `width` bits each, packed from the low bits up.
fn pack_bits<T: Copy + Into<u32>>(v: &[T], width: u32) -> u32 {
    v.iter()
        .enumerate()
        .fold(0, |a, (k, &x)| a | x.into() << (width * k as u32))
}

/// The importance of 16 values of IQ2_XS and IQ2_S: from the imatrix if given, else
/// `σ²/4 + x²`.
fn weights16(xb: &[f32], qw: Option<&[f32]>, ib: usize, sigma2: f32) -> [f32; 16] {
    let qwb = qw.map(|w| &w[16 * ib..16 * ib + 16]);
    block_weights::<16>(xb, qwb, sigma2, |v| 0.25 * sigma2 + v * v)
}

/// The search of IQ2_XS and IQ2_S on `table`, from `(max, max/5)`.
fn search16(table: &GridTable<8>) -> ScaleSearch<'_, 8> {
    ScaleSearch {
        table,
        kmax: 3,
        steps: 9,
        step: 0.1,
        refine: Refine::OffGridGroups,
    }
}

impl QuantizeBlock for BlockIq2Xs {
    /// Quantizes to IQ2_XS (`quantize_iq2_xs`); GGML requires `imatrix` (see [`UNIT_IMPORTANCE`]).
    fn quantize_block(xbl: &[f32], qw: Option<&[f32]>, y: &mut Self) {
        let search = search16(IQ2XS_TABLE.get());

        let qw = Some(qw.unwrap_or(&UNIT_IMPORTANCE));
        let sigma2 = sum_squares(xbl) / QK_K as f32;
        *y = BlockIq2Xs::zeroed();
        let (scales, max_scale) = quantize_groups::<16, { QK_K / 16 }>(xbl, |ib, xb| {
            let weight = weights16(xb, qw, ib, sigma2);
            let g = search.quantize_group(
                xb,
                &weight,
                SignBits::EvenParity,
                GROUP_MAX_EPS,
                |_, max| Some((max, max / 5.0)),
            )?;
            for k in 0..2 {
                y.qs[2 * ib + k].set(g.index[k] | (g.signs[k] as u16) << 9);
            }
            Some(g.scale)
        });
        match super_block_scale(max_scale, 31.0, 1.0) {
            Some((d, id)) => {
                y.d = d;
                pack_scale_nibbles(id, &scales, &mut y.scales);
            }
            None => *y = BlockIq2Xs::zeroed(),
        }
    }
}

impl QuantizeBlock for BlockIq2S {
    /// Quantizes to IQ2_S (`quantize_iq2_s`), with or without `imatrix`.
    fn quantize_block(xbl: &[f32], qw: Option<&[f32]>, y: &mut Self) {
        let search = search16(IQ2S_TABLE.get());

        *y = BlockIq2S::zeroed();
        let sigma2 = 2.0 * sum_squares(xbl) / QK_K as f32;
        let (scales, max_scale) = quantize_groups::<16, { QK_K / 16 }>(xbl, |ib, xb| {
            let weight = weights16(xb, qw, ib, sigma2);
            let g = search.quantize_group(
                xb,
                &weight,
                SignBits::All,
                GROUP_MAX_EPS_IQ2_S,
                |_, max| Some((max, max / 5.0)),
            )?;
            for k in 0..2 {
                let i8 = 2 * ib + k;
                y.qs[i8] = g.index[k] as u8;
                y.qh[i8 / 4] |= ((g.index[k] >> 8) as u8) << (2 * (i8 % 4));
                y.qs[QK_K / 8 + i8] = g.signs[k];
            }
            Some(g.scale)
        });
        if let Some((d, id)) = super_block_scale(max_scale, 31.0, 0.9875) {
            y.d = d;
            pack_scale_nibbles(id, &scales, &mut y.scales);
        }
    }
}
