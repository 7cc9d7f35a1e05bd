//! IQ4_NL and IQ4_XS: 4-bit indices into a fixed non-linear table of 16 levels. IQ4_NL has one
//! f16 scale per 32 values; IQ4_XS has 6-bit scales per 32 values under an f16 super-block
//! scale.

use bytemuck::{Pod, Zeroable};

use super::block::{block_layout, blocks_mut, Dequantize, QuantizeBlock};
use super::common::{
    inverse_or_zero, nearest_int, signed_absmax, sum_squares, PackedF16, PackedU16, GROUP_MAX_EPS,
};
use super::iq_common::block_weights;
use crate::QK_K;

/// The 16 levels of IQ4_NL and IQ4_XS (GGML's `kvalues_iq4nl`).
pub const IQ4_NL_VALUES: [i8; 16] = [
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
];

/// Values per IQ4_NL block, and per scale group of IQ4_XS.
const QK4_NL: usize = 32;

/// One IQ4_NL block: value = `d · IQ4_NL_VALUES[index]`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockIq4Nl {
    /// Scale.
    pub d: PackedF16,
    /// Indices: value j in the low nibble of byte j, value j + 16 in the high nibble.
    pub qs: [u8; QK4_NL / 2],
}

/// One IQ4_XS super-block: value = `d · (scale − 32) · IQ4_NL_VALUES[index]` per group of 32.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockIq4Xs {
    /// Super-block scale.
    pub d: PackedF16,
    /// Top two bits of the eight 6-bit group scales (group `ib` at bits `2·ib`).
    pub scales_h: PackedU16,
    /// Low four bits of the group scales (group `ib` in byte `ib / 2`, low nibble first).
    pub scales_l: [u8; QK_K / 64],
    /// Indices, laid out per group of 32 as in IQ4_NL.
    pub qs: [u8; QK_K / 2],
}

block_layout!(BlockIq4Nl, values: QK4_NL, bytes: 18);
block_layout!(BlockIq4Xs, values: QK_K, bytes: 136);

/// [`IQ4_NL_VALUES`] as f32.
const VALUES_F32: [f32; 16] = [
    -127.0, -104.0, -83.0, -65.0, -49.0, -35.0, -22.0, -10.0, 1.0, 13.0, 25.0, 38.0, 53.0, 69.0,
    89.0, 113.0,
];

/// Index of the table level nearest to `x`, as GGML's `best_index_int8` picks it: its bisection
/// ends on the largest level `ml` not above `x`, then takes `ml + 1` unless `x` is strictly
/// closer to `ml` (NaN gives 15). Here `ml` is found by counting, which has no branches.
#[inline(always)]
fn best_index(x: f32) -> u8 {
    let v = &VALUES_F32;
    if x <= v[0] {
        return 0;
    }
    if x >= v[15] || x.is_nan() {
        return 15;
    }
    let ml = v[1..15]
        .iter()
        .fold(0usize, |n, &l| n + usize::from(l <= x));
    if x - v[ml] < v[ml + 1] - x {
        ml as u8
    } else {
        (ml + 1) as u8
    }
}

/// Weighted sums Σ w·q·x and Σ w·q² of the levels chosen at inverse scale `id`.
#[inline(always)]
fn level_sums(xb: &[f32], weight: &[f32], id: f32, mut levels: Option<&mut [u8]>) -> (f32, f32) {
    let (mut sumqx, mut sumq2) = (0.0f32, 0.0f32);
    for (j, (&v, &w)) in xb.iter().zip(weight).enumerate() {
        let l = best_index(id * v);
        if let Some(levels) = levels.as_deref_mut() {
            levels[j] = l;
        }
        let q = IQ4_NL_VALUES[l as usize] as f32;
        sumqx += w * q * v;
        sumq2 += w * q * q;
    }
    (sumqx, sumq2)
}

/// The packed scale fields of an IQ4_XS super-block.
struct XsScales<'a> {
    h: &'a mut PackedU16,
    l: &'a mut [u8; QK_K / 64],
}

/// GGML's `quantize_row_iq4_nl_impl` for one super-block `x` of 32 (IQ4_NL, `xs = None`) or 256
/// (IQ4_XS) values. `levels` holds `x.len()` indices and keeps, for all-zero groups without
/// `ntry > 0`, whatever it held before (GGML leaves them too). Returns the f16 scale; the indices
/// go to `q4`.
fn quantize_super_block(
    x: &[f32],
    qw: Option<&[f32]>,
    ntry: i32,
    levels: &mut [u8],
    q4: &mut [u8],
    xs: Option<XsScales<'_>>,
) -> PackedF16 {
    let n = x.len();
    let sigma2 = sum_squares(x) * (2.0 / n as f32);
    let v0 = IQ4_NL_VALUES[0] as f32;
    let mut scales = [0.0f32; QK_K / QK4_NL];
    let (mut max_scale, mut amax_scale) = (0.0f32, 0.0f32);
    let groups = x.chunks_exact(QK4_NL).zip(levels.chunks_exact_mut(QK4_NL));
    for (ib, (xb, lb)) in groups.enumerate() {
        let qwb = qw.map(|qw| &qw[QK4_NL * ib..QK4_NL * (ib + 1)]);
        let weight = block_weights::<QK4_NL>(xb, qwb, sigma2, |v| v * v);
        let (max, amax) = signed_absmax(xb);
        if amax < GROUP_MAX_EPS {
            scales[ib] = 0.0;
            continue;
        }
        let mut d = if ntry > 0 { -max / v0 } else { max / v0 };
        let (sumqx, sumq2) = level_sums(xb, &weight, 1.0 / d, Some(lb));
        d = if sumq2 > 0.0 { sumqx / sumq2 } else { 0.0 };
        let mut best = d * sumqx;
        for itry in -ntry..=ntry {
            let id = (itry + IQ4_NL_VALUES[0] as i32) as f32 / max;
            let (sumqx, sumq2) = level_sums(xb, &weight, id, None);
            if sumq2 > 0.0 && sumqx * sumqx > best * sumq2 {
                d = sumqx / sumq2;
                best = d * sumqx;
            }
        }
        scales[ib] = d;
        if d.abs() > amax_scale {
            amax_scale = d.abs();
            max_scale = d;
        }
    }
    let dh = match xs {
        Some(XsScales { h, l }) => {
            let d = -max_scale / 32.0;
            let id = inverse_or_zero(d);
            let (mut sh, mut sl) = (0u16, [0u8; QK_K / 64]);
            let groups = x.chunks_exact(QK4_NL).zip(levels.chunks_exact_mut(QK4_NL));
            for (ib, (xb, lb)) in groups.enumerate() {
                let l = nearest_int(id * scales[ib]).clamp(-32, 31);
                let dl = d * l as f32;
                let idl = inverse_or_zero(dl);
                for (q, &v) in lb.iter_mut().zip(xb) {
                    *q = best_index(idl * v);
                }
                let l = (l + 32) as u8;
                sl[ib / 2] |= (l & 0xf) << (4 * (ib % 2));
                sh |= ((l >> 4) as u16) << (2 * (ib % 8));
            }
            h.set(sh);
            *l = sl;
            PackedF16::from_f32(d)
        }
        None => {
            if ntry > 0 {
                let id = inverse_or_zero(scales[0]);
                for (q, &v) in levels.iter_mut().zip(x) {
                    *q = best_index(id * v);
                }
            }
            PackedF16::from_f32(scales[0])
        }
    };
    for (q, lb) in q4.chunks_exact_mut(16).zip(levels.chunks_exact(QK4_NL)) {
        for (j, q) in q.iter_mut().enumerate() {
            *q = lb[j] | (lb[j + 16] << 4);
        }
    }
    dh
}

/// GGML's `quantize_row_iq4_nl_ref`: no imatrix, no scale search. Like GGML it keeps one level
/// buffer across blocks, so an all-zero block repeats the previous block's indices (GGML leaves
/// uninitialised memory there when the first block is all zero; this writes index 0).
pub(crate) fn quantize_row_iq4_nl_ref(src: &[f32], dst: &mut [u8]) {
    let mut levels = [0u8; QK4_NL];
    for (x, y) in src.chunks_exact(QK4_NL).zip(blocks_mut::<BlockIq4Nl>(dst)) {
        y.d = quantize_super_block(x, None, -1, &mut levels, &mut y.qs, None);
    }
}

/// GGML's `quantize_iq4_nl` (with its scale search; only the reference quantizer carries state
/// from block to block).
impl QuantizeBlock for BlockIq4Nl {
    fn quantize_block(x: &[f32], qw: Option<&[f32]>, y: &mut Self) {
        let mut levels = [0u8; QK4_NL];
        y.d = quantize_super_block(x, qw, 7, &mut levels, &mut y.qs, None);
    }
}

/// Writes `d · IQ4_NL_VALUES[index]` for the 32 indices of `qs` (value j in the low nibble of
/// byte j, value j + 16 in the high one).
#[inline(always)]
fn put_levels(y: &mut [f32], d: f32, qs: &[u8]) {
    for (j, &q) in qs.iter().enumerate() {
        y[j] = d * IQ4_NL_VALUES[(q & 0xf) as usize] as f32;
        y[j + 16] = d * IQ4_NL_VALUES[(q >> 4) as usize] as f32;
    }
}

impl Dequantize for BlockIq4Nl {
    #[inline(always)]
    fn dequantize(&self, y: &mut [f32]) {
        put_levels(y, self.d.to_f32(), &self.qs);
    }
}

/// GGML's `quantize_iq4_xs`; without an imatrix it is also the reference quantizer.
impl QuantizeBlock for BlockIq4Xs {
    fn quantize_block(x: &[f32], qw: Option<&[f32]>, y: &mut Self) {
        let mut levels = [0u8; QK_K];
        let xs = XsScales {
            h: &mut y.scales_h,
            l: &mut y.scales_l,
        };
        y.d = quantize_super_block(x, qw, 7, &mut levels, &mut y.qs, Some(xs));
    }
}

impl BlockIq4Xs {
    /// The eight group scales `ls − 32` (−32..32), one per 32 values, group order.
    #[inline(always)]
    pub(crate) fn group_scales(&self) -> [i16; 8] {
        let sh = self.scales_h.get();
        std::array::from_fn(|g| {
            let low = (self.scales_l[g / 2] >> (4 * (g % 2))) & 0xf;
            let high = ((sh >> (2 * g)) & 3) as u8;
            (low | (high << 4)) as i16 - 32
        })
    }
}

impl Dequantize for BlockIq4Xs {
    #[inline(always)]
    fn dequantize(&self, y: &mut [f32]) {
        let d = self.d.to_f32();
        let sh = self.scales_h.get();
        let groups = y.chunks_exact_mut(QK4_NL).zip(self.qs.chunks_exact(16));
        for (ib, (y, qs)) in groups.enumerate() {
            let ls = ((self.scales_l[ib / 2] >> (4 * (ib % 2))) & 0xf)
                | ((((sh >> (2 * ib)) & 3) as u8) << 4);
            put_levels(y, d * (ls as i32 - 32) as f32, qs);
        }
    }
}
