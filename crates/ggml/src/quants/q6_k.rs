//! Q6_K: 6-bit signed levels in 16 groups of 16, each group with an 8-bit signed scale relative
//! to the super-block's f16 `d`.

use bytemuck::{Pod, Zeroable};

use super::block::{block_layout, with_weights, Dequantize, QuantizeImatrix, QuantizeRef};
use super::common::{nearest_int, PackedF16, GROUP_MAX_EPS};
use super::search::make_qx_quants;
use crate::QK_K;

/// One Q6_K super-block: value = `d·scale·(level − 32)` per group of 16.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ6K {
    /// Low four bits of the levels: in each half of 128 values, byte `l` holds values `l` and
    /// `l + 64`, byte `l + 32` values `l + 32` and `l + 96`.
    pub ql: [u8; QK_K / 2],
    /// High two bits: in each half, byte `l` holds those of values `l`, `l + 32`, `l + 64` and
    /// `l + 96` from the low bits up.
    pub qh: [u8; QK_K / 4],
    /// Group scales.
    pub scales: [i8; QK_K / 16],
    /// Super-block scale.
    pub d: PackedF16,
}

block_layout!(BlockQ6K, values: QK_K, bytes: 210);

fn pack_levels(levels: &[u8; QK_K], y: &mut BlockQ6K) {
    let halves = levels.chunks_exact(128);
    for ((half, ql), qh) in halves
        .zip(y.ql.chunks_exact_mut(64))
        .zip(y.qh.chunks_exact_mut(32))
    {
        for l in 0..32 {
            let (q1, q2, q3, q4) = (half[l], half[l + 32], half[l + 64], half[l + 96]);
            ql[l] = (q1 & 0xf) | ((q3 & 0xf) << 4);
            ql[l + 32] = (q2 & 0xf) | ((q4 & 0xf) << 4);
            qh[l] = (q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6);
        }
    }
}

/// GGML's Q6_K quantizer for one super-block: `weights`, when given, are its imatrix entries;
/// without them each group's error is weighted by x².
fn quantize_block(x: &[f32], y: &mut BlockQ6K, weights: Option<&[f32]>) {
    let mut levels = [0i8; QK_K];
    let mut scales = [0.0f32; 16];
    let (mut max_scale, mut max_abs_scale) = (0.0f32, 0.0f32);
    for (ib, (xg, lg)) in x
        .chunks_exact(16)
        .zip(levels.chunks_exact_mut(16))
        .enumerate()
    {
        let qw = weights.map(|w| &w[16 * ib..16 * ib + 16]);
        let scale = make_qx_quants::<16>(32, xg, lg, 1, qw);
        scales[ib] = scale;
        if scale.abs() > max_abs_scale {
            max_abs_scale = scale.abs();
            max_scale = scale;
        }
    }
    if max_abs_scale < GROUP_MAX_EPS {
        *y = BlockQ6K::zeroed();
        y.d = PackedF16::from_f32(0.0);
        return;
    }
    let iscale = -128.0 / max_scale;
    y.d = PackedF16::from_f32(1.0 / iscale);
    for (s, &scale) in y.scales.iter_mut().zip(&scales) {
        *s = nearest_int(iscale * scale).min(127) as i8;
    }
    let d_all = y.d.to_f32();
    let groups = x.chunks_exact(16).zip(levels.chunks_exact_mut(16));
    for ((xg, lg), &s) in groups.zip(&y.scales) {
        let d = d_all * s as f32;
        if d == 0.0 {
            continue;
        }
        for (l, &v) in lg.iter_mut().zip(xg) {
            *l = (nearest_int(v / d).clamp(-32, 31) + 32) as i8;
        }
    }
    pack_levels(bytemuck::cast_ref(&levels), y);
}

impl QuantizeRef for BlockQ6K {
    #[inline(always)]
    fn quantize_ref(x: &[f32], y: &mut Self) {
        quantize_block(x, y, None);
    }
}

impl QuantizeImatrix for BlockQ6K {
    fn quantize_row_imatrix(row: &[f32], out: &mut [Self], qw: &[f32]) {
        for (x, qw, y) in with_weights(row, qw, out) {
            quantize_block(x, y, Some(qw));
        }
    }
}

impl Dequantize for BlockQ6K {
    #[inline(always)]
    fn dequantize(&self, y: &mut [f32]) {
        let d = self.d.to_f32();
        let halves = y.chunks_exact_mut(128).zip(self.ql.chunks_exact(64));
        for (n, ((y, ql), qh)) in halves.zip(self.qh.chunks_exact(32)).enumerate() {
            let sc = &self.scales[8 * n..8 * n + 8];
            for l in 0..32 {
                let is = l / 16;
                let q1 = ((ql[l] & 0xf) | ((qh[l] & 3) << 4)) as i8 - 32;
                let q2 = ((ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4)) as i8 - 32;
                let q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i8 - 32;
                let q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i8 - 32;
                y[l] = d * sc[is] as f32 * q1 as f32;
                y[l + 32] = d * sc[is + 2] as f32 * q2 as f32;
                y[l + 64] = d * sc[is + 4] as f32 * q3 as f32;
                y[l + 96] = d * sc[is + 6] as f32 * q4 as f32;
            }
        }
    }
}
