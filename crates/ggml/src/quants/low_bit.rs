//! Q1_0 and Q2_0: 1-bit signs (blocks of 128) and 2-bit levels {-1, 0, 1, 2} (blocks of 64),
//! each with an f16 scale.

use bytemuck::{Pod, Zeroable};

use super::common::{assert_block_size, blocks, blocks_mut, max_abs, round_i32, PackedF16};

/// Values per Q1_0 block.
const QK1_0: usize = 128;
/// Values per Q2_0 block.
const QK2_0: usize = 64;

/// One Q1_0 block: value = `d` where the bit is set, `-d` where it is clear.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ1_0 {
    /// Scale: the mean magnitude of the block.
    pub d: PackedF16,
    /// Sign bits, value j at bit `j % 8` of byte `j / 8` (set = non-negative).
    pub qs: [u8; QK1_0 / 8],
}

/// One Q2_0 block: value = `d · (level − 1)`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ2_0 {
    /// Scale: the largest magnitude of the block.
    pub d: PackedF16,
    /// Levels 0..4, value j at bits `2·(j % 4)` of byte `j / 4`.
    pub qs: [u8; QK2_0 / 4],
}

assert_block_size!(BlockQ1_0, 18);
assert_block_size!(BlockQ2_0, 18);

pub(crate) fn quantize_row_q1_0_ref(src: &[f32], dst: &mut [u8]) {
    for (x, y) in src.chunks_exact(QK1_0).zip(blocks_mut::<BlockQ1_0>(dst)) {
        let sum_abs = x.iter().fold(0.0f32, |s, &v| s + v.abs());
        y.d = PackedF16::from_f32(sum_abs / QK1_0 as f32);
        for (q, x8) in y.qs.iter_mut().zip(x.chunks_exact(8)) {
            *q = x8
                .iter()
                .enumerate()
                .fold(0u8, |q, (b, &v)| q | (u8::from(v >= 0.0) << b));
        }
    }
}

pub(crate) fn dequantize_row_q1_0(src: &[u8], dst: &mut [f32]) {
    for (b, y) in blocks::<BlockQ1_0>(src)
        .iter()
        .zip(dst.chunks_exact_mut(QK1_0))
    {
        let d = b.d.to_f32();
        for (y8, &q) in y.chunks_exact_mut(8).zip(&b.qs) {
            for (bit, y) in y8.iter_mut().enumerate() {
                *y = if (q >> bit) & 1 != 0 { d } else { -d };
            }
        }
    }
}

pub(crate) fn quantize_row_q2_0_ref(src: &[f32], dst: &mut [u8]) {
    for (x, y) in src.chunks_exact(QK2_0).zip(blocks_mut::<BlockQ2_0>(dst)) {
        let d = max_abs(x);
        let id = if d > 0.0 { 1.0 / d } else { 0.0 };
        y.d = PackedF16::from_f32(d);
        for (q, x4) in y.qs.iter_mut().zip(x.chunks_exact(4)) {
            *q = x4.iter().enumerate().fold(0u8, |q, (k, &v)| {
                let level = round_i32(v * id).wrapping_add(1).clamp(0, 3);
                q | ((level as u8) << (2 * k))
            });
        }
    }
}

pub(crate) fn dequantize_row_q2_0(src: &[u8], dst: &mut [f32]) {
    for (b, y) in blocks::<BlockQ2_0>(src)
        .iter()
        .zip(dst.chunks_exact_mut(QK2_0))
    {
        let d = b.d.to_f32();
        for (y4, &q) in y.chunks_exact_mut(4).zip(&b.qs) {
            for (k, y) in y4.iter_mut().enumerate() {
                *y = (((q >> (2 * k)) & 3) as i32 - 1) as f32 * d;
            }
        }
    }
}

/// Q1_0 ignores the imatrix (GGML quantizes row by row with the reference quantizer, which is
/// the same as all rows at once).
pub(crate) fn quantize_q1_0(
    src: &[f32],
    dst: &mut [u8],
    _: usize,
    _: usize,
    _: Option<&[f32]>,
) -> usize {
    quantize_row_q1_0_ref(src, dst);
    dst.len()
}

/// Q2_0 ignores the imatrix, as Q1_0.
pub(crate) fn quantize_q2_0(
    src: &[f32],
    dst: &mut [u8],
    _: usize,
    _: usize,
    _: Option<&[f32]>,
) -> usize {
    quantize_row_q2_0_ref(src, dst);
    dst.len()
}
