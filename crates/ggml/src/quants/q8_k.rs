//! Q8_K: 8-bit levels with an f32 scale and per-16 sums, the activation format the k-quant and
//! i-quant dot products use.

use bytemuck::{Pod, Zeroable};

use super::block::{block_layout, Dequantize, QuantizeRef};
use super::common::{nearest_int, signed_absmax, PackedF32, PackedI16};
use crate::QK_K;

/// One Q8_K super-block: value = `d·q`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ8K {
    /// Scale.
    pub d: PackedF32,
    /// Levels.
    pub qs: [i8; QK_K],
    /// Sum of each group of 16 levels.
    pub bsums: [PackedI16; QK_K / 16],
}

block_layout!(BlockQ8K, values: QK_K, bytes: 292);

impl QuantizeRef for BlockQ8K {
    /// GGML's `quantize_row_q8_K_ref`. For an all-zero block GGML leaves `bsums` as they were; this
    /// writes zeros there (what GGML leaves in a zeroed buffer), so the output never depends on the
    /// buffer's previous contents.
    #[inline(always)]
    fn quantize_ref(x: &[f32], y: &mut Self) {
        let (max, amax) = signed_absmax(x);
        if amax == 0.0 {
            *y = BlockQ8K::zeroed();
            return;
        }
        let iscale = -127.0 / max;
        for (q, &v) in y.qs.iter_mut().zip(x) {
            *q = nearest_int(iscale * v).min(127) as i8;
        }
        for (s, g) in y.bsums.iter_mut().zip(y.qs.chunks_exact(16)) {
            s.set(g.iter().map(|&q| q as i32).sum::<i32>() as i16);
        }
        y.d.set(1.0 / iscale);
    }
}

impl Dequantize for BlockQ8K {
    #[inline(always)]
    fn dequantize(&self, y: &mut [f32]) {
        let d = self.d.get();
        for (y, &q) in y.iter_mut().zip(&self.qs) {
            *y = d * q as f32;
        }
    }
}
