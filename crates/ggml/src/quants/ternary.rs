//! TQ1_0 and TQ2_0: ternary values {-1, 0, 1} times an f16 scale (BitNet b1.58 and TriLMs).
//! TQ1_0 packs five trits per byte (base 3, scaled to fill the byte), TQ2_0 four 2-bit values.

use bytemuck::{Pod, Zeroable};

use super::block::{block_layout, Dequantize, QuantizeRef};
use super::common::{inverse_or_zero, lround, max_abs_macro, PackedF16};
use crate::QK_K;

/// One TQ1_0 super-block.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockTq1_0 {
    /// Five trits per byte: bytes 0..32 hold values 0..160 (byte m: values m, m+32, ..., most
    /// significant trit first), bytes 32..48 values 160..240 likewise with stride 16.
    pub qs: [u8; (QK_K - 4 * QK_K / 64) / 5],
    /// Four trits per byte (the last 16 values, stride 4), in the top positions.
    pub qh: [u8; QK_K / 64],
    /// Scale.
    pub d: PackedF16,
}

/// One TQ2_0 super-block.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockTq2_0 {
    /// Two bits per value (level + 1): in each run of 128 values byte m holds values m, m+32,
    /// m+64, m+96 from the low bits up.
    pub qs: [u8; QK_K / 4],
    /// Scale.
    pub d: PackedF16,
}

block_layout!(BlockTq1_0, values: QK_K, bytes: 54);
block_layout!(BlockTq2_0, values: QK_K, bytes: 66);

/// GGML's `MAX(amax, fabsf(v))` over a super-block, and the inverse scale.
fn scale_of(x: &[f32]) -> (f32, f32) {
    let d = max_abs_macro(x);
    (d, inverse_or_zero(d))
}

/// The trit (0, 1 or 2 for -1, 0, 1) GGML computes for `v`: `lroundf(v·id) + 1` kept as an int.
#[inline(always)]
fn trit(v: f32, id: f32) -> u8 {
    (lround(v * id) + 1) as i32 as u8
}

/// Base-3 digits, most significant first, scaled so that the byte's top bits hold the first trit
/// (ceiling division by 3^5 after multiplying by 256).
#[inline(always)]
fn pack_trits(trits: impl Iterator<Item = u8>) -> u8 {
    let q = trits.fold(0u8, |q, t| q.wrapping_mul(3).wrapping_add(t));
    (q as u16 * 256).div_ceil(243) as u8
}

/// Trit `n` (0 = most significant) of a packed byte, as -1, 0 or 1.
#[inline(always)]
fn unpack_trit(byte: u8, n: usize) -> f32 {
    const POW3: [u8; 5] = [1, 3, 9, 27, 81];
    let q = byte.wrapping_mul(POW3[n]);
    (((q as u16 * 3) >> 8) as i16 - 1) as f32
}

impl QuantizeRef for BlockTq1_0 {
    #[inline(always)]
    fn quantize_ref(x: &[f32], y: &mut Self) {
        let (d, id) = scale_of(x);
        y.d = PackedF16::from_f32(d);
        let (x5a, rest) = x.split_at(160);
        let (x5b, x4) = rest.split_at(80);
        for (m, q) in y.qs[..32].iter_mut().enumerate() {
            *q = pack_trits((0..5).map(|n| trit(x5a[m + 32 * n], id)));
        }
        for (m, q) in y.qs[32..].iter_mut().enumerate() {
            *q = pack_trits((0..5).map(|n| trit(x5b[m + 16 * n], id)));
        }
        for (j, q) in y.qh.iter_mut().enumerate() {
            // Four trits, then a zero trit so that the first lands in the top position.
            let trits = (0..4).map(|m| trit(x4[j + 4 * m], id)).chain([0]);
            *q = pack_trits(trits);
        }
    }
}

impl Dequantize for BlockTq1_0 {
    #[inline(always)]
    fn dequantize(&self, y: &mut [f32]) {
        let d = self.d.to_f32();
        let (y5a, rest) = y.split_at_mut(160);
        let (y5b, y4) = rest.split_at_mut(80);
        for n in 0..5 {
            for m in 0..32 {
                y5a[32 * n + m] = unpack_trit(self.qs[m], n) * d;
            }
            for m in 0..16 {
                y5b[16 * n + m] = unpack_trit(self.qs[32 + m], n) * d;
            }
        }
        for n in 0..4 {
            for j in 0..4 {
                y4[4 * n + j] = unpack_trit(self.qh[j], n) * d;
            }
        }
    }
}

impl QuantizeRef for BlockTq2_0 {
    #[inline(always)]
    fn quantize_ref(x: &[f32], y: &mut Self) {
        let (d, id) = scale_of(x);
        y.d = PackedF16::from_f32(d);
        for (run, qs) in x.chunks_exact(128).zip(y.qs.chunks_exact_mut(32)) {
            for (m, q) in qs.iter_mut().enumerate() {
                *q = (0..4).fold(0u8, |q, n| {
                    q.wrapping_add((trit(run[m + 32 * n], id) & 3) << (2 * n))
                });
            }
        }
    }
}

impl Dequantize for BlockTq2_0 {
    #[inline(always)]
    fn dequantize(&self, y: &mut [f32]) {
        let d = self.d.to_f32();
        for (run, qs) in y.chunks_exact_mut(128).zip(self.qs.chunks_exact(32)) {
            for l in 0..4 {
                for (m, &q) in qs.iter().enumerate() {
                    run[32 * l + m] = (((q >> (2 * l)) & 3) as i32 - 1) as f32 * d;
                }
            }
        }
    }
}
