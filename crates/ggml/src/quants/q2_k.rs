//! Q2_K: 2-bit levels in 16 groups of 16, each group with a 4-bit scale and a 4-bit minimum
//! relative to the super-block's f16 `d` and `dmin`.

use bytemuck::{Pod, Zeroable};

use super::block::{block_layout, with_weights, Dequantize, QuantizeImatrix, QuantizeRef};
use super::common::{imatrix_weights, nearest_int, PackedF16};
use super::kquants::{pack_2bit, sigma2, unpack_2bit};
use super::search::{make_qkx_quants, make_qp_quants, ScaleSteps, QKX3_STEPS};
use crate::QK_K;

/// One Q2_K super-block: value = `d·scale − dmin·min` per group of 16.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ2K {
    /// Per group: scale in the low nibble, minimum in the high nibble.
    pub scales: [u8; QK_K / 16],
    /// Levels, packed as described in the k-quants' 2-bit layout.
    pub qs: [u8; QK_K / 4],
    /// Super-block scale of the group scales.
    pub d: PackedF16,
    /// Super-block scale of the group minimums.
    pub dmin: PackedF16,
}

block_layout!(BlockQ2K, values: QK_K, bytes: 84);

/// Re-derives the levels from the stored (rounded) scales and minimums, as GGML does before
/// packing.
fn requantize(x: &[f32], y: &BlockQ2K, levels: &mut [u8; QK_K]) {
    let (dall, mall) = (y.d.to_f32(), y.dmin.to_f32());
    for ((xg, lg), &sc) in x
        .chunks_exact(16)
        .zip(levels.chunks_exact_mut(16))
        .zip(&y.scales)
    {
        let d = dall * (sc & 0xf) as f32;
        if d == 0.0 {
            continue;
        }
        let m = mall * (sc >> 4) as f32;
        for (l, &v) in lg.iter_mut().zip(xg) {
            *l = nearest_int((v + m) / d).clamp(0, 3) as u8;
        }
    }
}

const REF_STEPS: ScaleSteps = ScaleSteps {
    rmin: -0.5,
    rdelta: 0.1,
    nstep: 15,
    use_mad: true,
};

impl QuantizeRef for BlockQ2K {
    #[inline(always)]
    fn quantize_ref(x: &[f32], y: &mut Self) {
        const Q4SCALE: f32 = 15.0;
        let mut levels = [0u8; QK_K];
        let (mut scales, mut mins) = ([0.0f32; 16], [0.0f32; 16]);
        let (mut max_scale, mut max_min) = (0.0f32, 0.0f32);
        for (j, (xg, lg)) in x
            .chunks_exact(16)
            .zip(levels.chunks_exact_mut(16))
            .enumerate()
        {
            let mut weights = [0.0f32; 16];
            for (w, &v) in weights.iter_mut().zip(xg) {
                *w = v.abs();
            }
            (scales[j], mins[j]) = make_qkx_quants::<16>(3, xg, &weights, lg, REF_STEPS);
            if scales[j] > max_scale {
                max_scale = scales[j];
            }
            if mins[j] > max_min {
                max_min = mins[j];
            }
        }
        if max_scale > 0.0 {
            let iscale = Q4SCALE / max_scale;
            for (s, &scale) in y.scales.iter_mut().zip(&scales) {
                *s = nearest_int(iscale * scale) as u8;
            }
            y.d = PackedF16::from_f32(max_scale / Q4SCALE);
        } else {
            y.scales = [0; 16];
            y.d = PackedF16::from_f32(0.0);
        }
        if max_min > 0.0 {
            let iscale = Q4SCALE / max_min;
            for (s, &min) in y.scales.iter_mut().zip(&mins) {
                *s |= (nearest_int(iscale * min) << 4) as u8;
            }
            y.dmin = PackedF16::from_f32(max_min / Q4SCALE);
        } else {
            y.dmin = PackedF16::from_f32(0.0);
        }
        requantize(x, y, &mut levels);
        pack_2bit(&levels, &mut y.qs);
    }
}

impl QuantizeImatrix for BlockQ2K {
    fn quantize_row_imatrix(row: &[f32], out: &mut [Self], qw: &[f32]) {
        let mut levels = [0u8; QK_K];
        for (x, qw, y) in with_weights(row, qw, out) {
            let sigma2 = sigma2(x, 1.0);
            let (mut scales, mut mins, mut sw) = ([0.0f32; 16], [0.0f32; 16], [0.0f32; 16]);
            let groups = x.chunks_exact(16).zip(qw.chunks_exact(16));
            for (j, ((xg, qg), lg)) in groups.zip(levels.chunks_exact_mut(16)).enumerate() {
                let weights: [f32; 16] = imatrix_weights(xg, qg, sigma2);
                sw[j] = weights.iter().fold(0.0, |s, &w| s + w);
                (scales[j], mins[j]) = make_qkx_quants::<16>(3, xg, &weights, lg, QKX3_STEPS);
            }
            let (mut ls, mut lm) = ([0u8; 16], [0u8; 16]);
            let dm = make_qp_quants(15, &scales, &mut ls, &sw);
            let mm = make_qp_quants(15, &mins, &mut lm, &sw);
            y.d = PackedF16::from_f32(dm);
            y.dmin = PackedF16::from_f32(mm);
            for ((s, &l), &m) in y.scales.iter_mut().zip(&ls).zip(&lm) {
                *s = l | (m << 4);
            }
            requantize(x, y, &mut levels);
            pack_2bit(&levels, &mut y.qs);
        }
    }
}

impl Dequantize for BlockQ2K {
    #[inline(always)]
    fn dequantize(&self, y: &mut [f32]) {
        let (d, min) = (self.d.to_f32(), self.dmin.to_f32());
        let levels = unpack_2bit(&self.qs);
        for ((yg, lg), &sc) in y
            .chunks_exact_mut(16)
            .zip(levels.chunks_exact(16))
            .zip(&self.scales)
        {
            let dl = d * (sc & 0xf) as f32;
            let ml = min * (sc >> 4) as f32;
            for (y, &l) in yg.iter_mut().zip(lg) {
                *y = dl * l as f32 - ml;
            }
        }
    }
}
