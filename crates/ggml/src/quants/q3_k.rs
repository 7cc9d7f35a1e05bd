//! Q3_K: 3-bit signed levels (two low bits plus a high-bit mask) in 16 groups of 16, each group
//! with a 6-bit signed scale relative to the super-block's f16 `d`.

use bytemuck::{Pod, Zeroable};

use super::block::{block_layout, with_weights, Dequantize, QuantizeImatrix, QuantizeRef};
use super::common::{imatrix_weights, nearest_int, PackedF16};
use super::kquants::{pack_2bit, sigma2, unpack_2bit};
use super::search::{make_q3_quants, make_qx_quants};
use crate::QK_K;

/// One Q3_K super-block: value = `d·(scale − 32)·(level − 4)` per group of 16.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ3K {
    /// High bit of each level: value `e` in bit `e / 32` of byte `e % 32`, set when the level
    /// is at least 4.
    pub hmask: [u8; QK_K / 8],
    /// Low two bits of each level, in the k-quants' 2-bit layout.
    pub qs: [u8; QK_K / 4],
    /// Sixteen 6-bit scales: low nibbles in bytes 0..8 (groups 0..8 low, 8..16 high), top two
    /// bits in bytes 8..12.
    pub scales: [u8; 12],
    /// Super-block scale.
    pub d: PackedF16,
}

block_layout!(BlockQ3K, values: QK_K, bytes: 110);

/// Stores sixteen 6-bit scales (0..64) in Q3_K's 12-byte layout.
fn pack_scales(scales6: impl Fn(usize) -> u8) -> [u8; 12] {
    let mut sc = [0u8; 12];
    for j in 0..16 {
        let l = scales6(j);
        if j < 8 {
            sc[j] = l & 0xf;
        } else {
            sc[j - 8] |= (l & 0xf) << 4;
        }
        sc[j % 4 + 8] |= (l >> 4) << (2 * (j / 4));
    }
    sc
}

/// The 6-bit scale of group `j`, minus 32.
#[inline(always)]
pub(crate) fn scale(sc: &[u8; 12], j: usize) -> i8 {
    let low = if j < 8 { sc[j] & 0xf } else { sc[j - 8] >> 4 };
    let high = (sc[8 + j % 4] >> (2 * (j / 4))) & 3;
    (low | (high << 4)) as i8 - 32
}

/// Requantizes with the stored scales, then fills the high-bit mask and the 2-bit levels.
fn finish_block(x: &[f32], y: &mut BlockQ3K, levels: &mut [i8; QK_K]) {
    let d_all = y.d.to_f32();
    for (j, (xg, lg)) in x
        .chunks_exact(16)
        .zip(levels.chunks_exact_mut(16))
        .enumerate()
    {
        let d = d_all * scale(&y.scales, j) as f32;
        if d == 0.0 {
            continue;
        }
        for (l, &v) in lg.iter_mut().zip(xg) {
            *l = (nearest_int(v / d).clamp(-4, 3) + 4) as i8;
        }
    }
    y.hmask = [0; QK_K / 8];
    let mut low = [0u8; QK_K];
    for (e, (&l, lo)) in levels.iter().zip(low.iter_mut()).enumerate() {
        if l > 3 {
            y.hmask[e % 32] |= 1 << (e / 32);
            *lo = (l - 4) as u8;
        } else {
            *lo = l as u8;
        }
    }
    pack_2bit(&low, &mut y.qs);
}

impl QuantizeRef for BlockQ3K {
    #[inline(always)]
    fn quantize_ref(x: &[f32], y: &mut Self) {
        let mut levels = [0i8; QK_K];
        let mut scales = [0.0f32; 16];
        let (mut max_scale, mut amax) = (0.0f32, 0.0f32);
        for (j, (xg, lg)) in x
            .chunks_exact(16)
            .zip(levels.chunks_exact_mut(16))
            .enumerate()
        {
            scales[j] = make_q3_quants(4, xg, lg, true);
            if scales[j].abs() > amax {
                amax = scales[j].abs();
                max_scale = scales[j];
            }
        }
        if max_scale != 0.0 {
            let iscale = -32.0 / max_scale;
            y.scales = pack_scales(|j| {
                let l = nearest_int(iscale * scales[j]) as i8 as i32;
                (l.clamp(-32, 31) + 32) as u8
            });
            y.d = PackedF16::from_f32(1.0 / iscale);
        } else {
            y.scales = [0; 12];
            y.d = PackedF16::from_f32(0.0);
        }
        finish_block(x, y, &mut levels);
    }
}

impl QuantizeImatrix for BlockQ3K {
    fn quantize_row_imatrix(row: &[f32], out: &mut [Self], qw: &[f32]) {
        let mut levels = [0i8; QK_K];
        for (x, qw, y) in with_weights(row, qw, out) {
            let sigma2 = sigma2(x, 2.0);
            let (mut scales, mut sw) = ([0.0f32; 16], [0.0f32; 16]);
            let groups = x.chunks_exact(16).zip(qw.chunks_exact(16));
            for (j, ((xg, qg), lg)) in groups.zip(levels.chunks_exact_mut(16)).enumerate() {
                let weights: [f32; 16] = imatrix_weights(xg, qg, sigma2);
                sw[j] = weights.iter().fold(0.0, |s, &w| s + w);
                scales[j] = make_qx_quants::<16>(4, xg, lg, 1, Some(&weights));
            }
            let mut ls = [0i8; 16];
            let d_block = make_qx_quants::<16>(32, &scales, &mut ls, 1, Some(&sw));
            y.scales = pack_scales(|j| ls[j] as u8);
            y.d = PackedF16::from_f32(d_block);
            finish_block(x, y, &mut levels);
        }
    }
}

impl Dequantize for BlockQ3K {
    #[inline(always)]
    fn dequantize(&self, y: &mut [f32]) {
        let d_all = self.d.to_f32();
        let low = unpack_2bit(&self.qs);
        for (j, (yg, lg)) in y.chunks_exact_mut(16).zip(low.chunks_exact(16)).enumerate() {
            let dl = d_all * scale(&self.scales, j) as f32;
            for (i, (y, &l)) in yg.iter_mut().zip(lg).enumerate() {
                let e = 16 * j + i;
                let high = self.hmask[e % 32] & (1 << (e / 32)) != 0;
                *y = dl * (l as i8 - if high { 0 } else { 4 }) as f32;
            }
        }
    }
}
