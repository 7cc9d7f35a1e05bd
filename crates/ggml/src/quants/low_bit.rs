//! Q1_0 and Q2_0: 1-bit signs (blocks of 128) and 2-bit levels {-1, 0, 1, 2} (blocks of 64),
//! each with an f16 scale.

use bytemuck::{Pod, Zeroable};

use super::block::{block_layout, Dequantize, QuantizeRef};
use super::common::{max_abs, round_i32, PackedF16};

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

block_layout!(BlockQ1_0, values: QK1_0, bytes: 18);
block_layout!(BlockQ2_0, values: QK2_0, bytes: 18);

impl QuantizeRef for BlockQ1_0 {
    #[inline(always)]
    fn quantize_ref(x: &[f32], y: &mut Self) {
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

impl Dequantize for BlockQ1_0 {
    #[inline(always)]
    fn dequantize(&self, y: &mut [f32]) {
        let d = self.d.to_f32();
        for (y8, &q) in y.chunks_exact_mut(8).zip(&self.qs) {
            for (bit, y) in y8.iter_mut().enumerate() {
                *y = if (q >> bit) & 1 != 0 { d } else { -d };
            }
        }
    }
}

impl QuantizeRef for BlockQ2_0 {
    #[inline(always)]
    fn quantize_ref(x: &[f32], y: &mut Self) {
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

impl Dequantize for BlockQ2_0 {
    #[inline(always)]
    fn dequantize(&self, y: &mut [f32]) {
        let d = self.d.to_f32();
        for (y4, &q) in y.chunks_exact_mut(4).zip(&self.qs) {
            for (k, y) in y4.iter_mut().enumerate() {
                *y = (((q >> (2 * k)) & 3) as i32 - 1) as f32 * d;
            }
        }
    }
}
