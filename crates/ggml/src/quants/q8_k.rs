//! Q8_K: 8-bit levels with an f32 scale and per-16 sums, the activation format the k-quant and
//! i-quant dot products use.

use bytemuck::{Pod, Zeroable};

use super::common::{
    assert_block_size, blocks, blocks_mut, nearest_int, signed_absmax, PackedF32, PackedI16,
};
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

assert_block_size!(BlockQ8K, 292);

/// GGML's `quantize_row_q8_K_ref`. For an all-zero block GGML leaves `bsums` as they were; this
/// writes zeros there (what GGML leaves in a zeroed buffer), so the output never depends on the
/// buffer's previous contents.
pub(crate) fn quantize_row_q8_k_ref(src: &[f32], dst: &mut [u8]) {
    for (x, y) in src.chunks_exact(QK_K).zip(blocks_mut::<BlockQ8K>(dst)) {
        let (max, amax) = signed_absmax(x);
        if amax == 0.0 {
            *y = BlockQ8K::zeroed();
            continue;
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

pub(crate) fn dequantize_row_q8_k(src: &[u8], dst: &mut [f32]) {
    for (b, y) in blocks::<BlockQ8K>(src)
        .iter()
        .zip(dst.chunks_exact_mut(QK_K))
    {
        let d = b.d.get();
        for (y, &q) in y.iter_mut().zip(&b.qs) {
            *y = d * q as f32;
        }
    }
}
