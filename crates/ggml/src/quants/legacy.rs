//! The legacy 32-element formats: Q4_0, Q4_1, Q5_0, Q5_1 (4/5-bit, symmetric or with a
//! minimum), Q8_0 and Q8_1 (8-bit).

use bytemuck::{Pod, Zeroable};

use super::block::{block_layout, forward_kernels, with_weights, Block, Dequantize, QuantizeRef};
use super::common::{
    imatrix_weights, inverse_or_zero, max_abs_macro, min_max, round_i32, signed_absmax,
    sum_squares, trunc_low_byte, PackedF16,
};
use super::search::{make_qkx_quants, make_qx_quants, QKX3_STEPS};

/// Elements per block of every legacy format.
const QK: usize = 32;

/// Q4_0: 32 values `d · (q - 8)`, q in 0..16.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ4_0 {
    /// Scale.
    pub d: PackedF16,
    /// Nibbles: value j in the low nibble of byte j, value j + 16 in the high nibble.
    pub qs: [u8; QK / 2],
}

/// Q4_1: 32 values `d · q + m`, q in 0..16.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ4_1 {
    /// Scale.
    pub d: PackedF16,
    /// Minimum.
    pub m: PackedF16,
    /// Nibbles, laid out as in [`BlockQ4_0`].
    pub qs: [u8; QK / 2],
}

/// Q5_0: 32 values `d · (q - 16)`, q in 0..32.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ5_0 {
    /// Scale.
    pub d: PackedF16,
    /// Fifth bits: bit j of this little-endian u32 is the high bit of value j.
    pub qh: [u8; 4],
    /// Low nibbles, laid out as in [`BlockQ4_0`].
    pub qs: [u8; QK / 2],
}

/// Q5_1: 32 values `d · q + m`, q in 0..32.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ5_1 {
    /// Scale.
    pub d: PackedF16,
    /// Minimum.
    pub m: PackedF16,
    /// Fifth bits, as in [`BlockQ5_0`].
    pub qh: [u8; 4],
    /// Low nibbles, as in [`BlockQ4_0`].
    pub qs: [u8; QK / 2],
}

/// Q8_0: 32 values `d · q`, q an i8.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ8_0 {
    /// Scale.
    pub d: PackedF16,
    /// Values.
    pub qs: [i8; QK],
}

/// Q8_1: Q8_0 plus `s = d · Σ q` (an activation format for dot products).
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ8_1 {
    /// Scale.
    pub d: PackedF16,
    /// `d` times the sum of the values.
    pub s: PackedF16,
    /// Values.
    pub qs: [i8; QK],
}

block_layout!(BlockQ4_0, values: QK, bytes: 18);
block_layout!(BlockQ4_1, values: QK, bytes: 20);
block_layout!(BlockQ5_0, values: QK, bytes: 22);
block_layout!(BlockQ5_1, values: QK, bytes: 24);
block_layout!(BlockQ8_0, values: QK, bytes: 34);
block_layout!(BlockQ8_1, values: QK, bytes: 36);

/// `MIN(max, (int8_t) x)` stored as a byte, as GGML's reference quantizers compute it.
#[inline(always)]
fn level_i8(x: f32, max: u8) -> u8 {
    (trunc_low_byte(x) as i8).min(max as i8) as u8
}

/// `level(v)` for each value of a block.
#[inline(always)]
fn map_levels(x: &[f32], level: impl Fn(f32) -> u8) -> [u8; QK] {
    let mut levels = [0u8; QK];
    for (l, &v) in levels.iter_mut().zip(x) {
        *l = level(v);
    }
    levels
}

/// Mean square of a row (GGML's σ² of the imatrix quantizers).
#[inline(always)]
fn row_sigma2(row: &[f32]) -> f32 {
    sum_squares(row) / row.len() as f32
}

/// Runs `block(x, w, y)` on each block of a row with its importance weights `w`.
#[inline(always)]
fn for_each_weighted_block<B: Block>(
    row: &[f32],
    out: &mut [B],
    qw: &[f32],
    mut block: impl FnMut(&[f32], &[f32; QK], &mut B),
) {
    let sigma2 = row_sigma2(row);
    for (x, qw, y) in with_weights(row, qw, out) {
        block(x, &imatrix_weights(x, qw, sigma2), y);
    }
}

// ---------------------------------------------------------------------------------------------
// Level packing: Q4 (nibbles) and Q5 (nibbles plus a word of fifth bits)

/// Packs 32 four-bit levels: value j in the low nibble of byte j, value j + 16 in the high one
/// (`lo | hi << 4` unmasked, as GGML's Q4 quantizers store them).
#[inline(always)]
fn pack_nibbles(levels: &[u8; QK], qs: &mut [u8; QK / 2]) {
    let (lo, hi) = levels.split_at(QK / 2);
    for ((q, &a), &b) in qs.iter_mut().zip(lo).zip(hi) {
        *q = a | (b << 4);
    }
}

/// Inverse of [`pack_nibbles`].
#[inline(always)]
fn unpack_nibbles(qs: &[u8; QK / 2]) -> [u8; QK] {
    let mut levels = [0u8; QK];
    for (j, &q) in qs.iter().enumerate() {
        levels[j] = q & 0x0f;
        levels[j + 16] = q >> 4;
    }
    levels
}

/// Packs 32 five-bit levels: low nibbles into `qs`, fifth bits into the returned `qh` bytes.
#[inline(always)]
fn pack_q5(levels: &[u8; QK], qs: &mut [u8; QK / 2]) -> [u8; 4] {
    pack_nibbles(&levels.map(|l| l & 0x0f), qs);
    let qh = levels
        .iter()
        .enumerate()
        .fold(0u32, |qh, (j, &l)| qh | ((((l & 0x10) >> 4) as u32) << j));
    qh.to_le_bytes()
}

/// Inverse of [`pack_q5`].
#[inline(always)]
fn unpack_q5(qh: [u8; 4], qs: &[u8; QK / 2]) -> [u8; QK] {
    let qh = u32::from_le_bytes(qh);
    let mut levels = [0u8; QK];
    for (j, &q) in qs.iter().enumerate() {
        levels[j] = (q & 0x0f) | (((qh >> j) << 4) & 0x10) as u8;
        levels[j + 16] = (q >> 4) | ((qh >> (j + 12)) & 0x10) as u8;
    }
    levels
}

/// The scale, minimum (for Q4_1 and Q5_1) and levels of a 4- or 5-bit block.
trait Nibbles: Block {
    /// Largest level (15 or 31).
    const NMAX: u8;
    fn d(&mut self) -> &mut PackedF16;
    fn levels(&self) -> [u8; QK];
    fn set_levels(&mut self, levels: &[u8; QK]);
}

/// Q4_1 and Q5_1 (`d · level + m`).
trait WithMin: Nibbles {
    fn m(&mut self) -> &mut PackedF16;
    /// The reference quantizer's level of `x = (v − min)·id + 0.5`.
    fn ref_level(x: f32) -> u8;
}

/// Implements [`Nibbles`] for blocks with a scale `d` and levels in `qs` (4 bits, NMAX 15) or
/// in `qs` and `qh` (5 bits, NMAX 31).
macro_rules! nibbles {
    ($nmax:literal, $levels:expr, $set_levels:expr => $($block:ty),+) => {$(
        impl Nibbles for $block {
            const NMAX: u8 = $nmax;
            #[inline(always)]
            fn d(&mut self) -> &mut PackedF16 {
                &mut self.d
            }
            #[inline(always)]
            fn levels(&self) -> [u8; QK] {
                $levels(self)
            }
            #[inline(always)]
            fn set_levels(&mut self, levels: &[u8; QK]) {
                $set_levels(self, levels)
            }
        }
    )+};
}

nibbles!(15, |b: &Self| unpack_nibbles(&b.qs), |b: &mut Self, l| pack_nibbles(l, &mut b.qs)
    => BlockQ4_0, BlockQ4_1);
nibbles!(31, |b: &Self| unpack_q5(b.qh, &b.qs), |b: &mut Self, l| b.qh = pack_q5(l, &mut b.qs)
    => BlockQ5_0, BlockQ5_1);

impl WithMin for BlockQ4_1 {
    #[inline(always)]
    fn m(&mut self) -> &mut PackedF16 {
        &mut self.m
    }
    #[inline(always)]
    fn ref_level(x: f32) -> u8 {
        level_i8(x, 15)
    }
}

impl WithMin for BlockQ5_1 {
    #[inline(always)]
    fn m(&mut self) -> &mut PackedF16 {
        &mut self.m
    }
    /// GGML's Q5_1 reference quantizer stores `(uint8_t) x` without a cap.
    #[inline(always)]
    fn ref_level(x: f32) -> u8 {
        trunc_low_byte(x)
    }
}

// ---------------------------------------------------------------------------------------------
// Q4_0 and Q5_0: `d · (level − half)`, half = (NMAX + 1) / 2

/// The kernels of the centred formats.
mod centred {
    use super::*;

    #[inline(always)]
    fn half<B: Nibbles>() -> i32 {
        (B::NMAX as i32 + 1) / 2
    }

    pub(super) fn dequantize<B: Nibbles>(b: &B, y: &mut [f32]) {
        let (mut b, levels) = (*b, b.levels());
        let d = b.d().to_f32();
        for (y, &l) in y.iter_mut().zip(&levels) {
            *y = (l as i32 - half::<B>()) as f32 * d;
        }
    }

    #[inline(always)]
    pub(super) fn quantize_ref<B: Nibbles>(x: &[f32], y: &mut B) {
        let (max, _) = signed_absmax(x);
        let d = max / -(half::<B>() as f32);
        let id = inverse_or_zero(d);
        *y.d() = PackedF16::from_f32(d);
        let offset = half::<B>() as f32 + 0.5;
        y.set_levels(&map_levels(x, |v| level_i8(v * id + offset, B::NMAX)));
    }

    pub(super) fn quantize_row_imatrix<B: Nibbles>(row: &[f32], out: &mut [B], qw: &[f32]) {
        let mut levels = [0i8; QK];
        for_each_weighted_block(row, out, qw, |x, w, y| {
            let d = make_qx_quants::<QK>(half::<B>(), x, &mut levels, 1, Some(w));
            *y.d() = PackedF16::from_f32(d);
            y.set_levels(bytemuck::cast_ref(&levels));
        });
    }
}

// ---------------------------------------------------------------------------------------------
// Q4_1 and Q5_1: `d · level + m`

/// The kernels of the formats with a minimum.
mod with_min {
    use super::*;

    pub(super) fn dequantize<B: WithMin>(b: &B, y: &mut [f32]) {
        let (mut b, levels) = (*b, b.levels());
        let (d, m) = (b.d().to_f32(), b.m().to_f32());
        for (y, &l) in y.iter_mut().zip(&levels) {
            *y = l as f32 * d + m;
        }
    }

    #[inline(always)]
    pub(super) fn quantize_ref<B: WithMin>(x: &[f32], y: &mut B) {
        let (min, max) = min_max(x);
        let d = (max - min) / B::NMAX as f32;
        let id = inverse_or_zero(d);
        *y.d() = PackedF16::from_f32(d);
        *y.m() = PackedF16::from_f32(min);
        y.set_levels(&map_levels(x, |v| B::ref_level((v - min) * id + 0.5)));
    }

    pub(super) fn quantize_row_imatrix<B: WithMin>(row: &[f32], out: &mut [B], qw: &[f32]) {
        let mut levels = [0u8; QK];
        for_each_weighted_block(row, out, qw, |x, w, y| {
            let (d, min) = make_qkx_quants::<QK>(B::NMAX as i32, x, w, &mut levels, QKX3_STEPS);
            *y.d() = PackedF16::from_f32(d);
            *y.m() = PackedF16::from_f32(-min);
            y.set_levels(&levels);
        });
    }
}

forward_kernels!(centred => BlockQ4_0, BlockQ5_0);
forward_kernels!(with_min => BlockQ4_1, BlockQ5_1);

// ---------------------------------------------------------------------------------------------
// Q8_0 and Q8_1

/// The scale `amax/127` of an 8-bit block (GGML's `MAX(amax, fabsf(v))`), its inverse, and the
/// levels `(int8_t) roundf(v·id)`.
#[inline(always)]
fn q8_levels(x: &[f32], qs: &mut [i8; QK]) -> f32 {
    let d = max_abs_macro(x) / 127.0;
    let id = inverse_or_zero(d);
    for (q, &v) in qs.iter_mut().zip(x) {
        *q = round_i32(v * id) as i8;
    }
    d
}

impl QuantizeRef for BlockQ8_0 {
    #[inline(always)]
    fn quantize_ref(x: &[f32], y: &mut Self) {
        y.d = PackedF16::from_f32(q8_levels(x, &mut y.qs));
    }
}

impl Dequantize for BlockQ8_0 {
    #[inline(always)]
    fn dequantize(&self, y: &mut [f32]) {
        let d = self.d.to_f32();
        for (y, &q) in y.iter_mut().zip(&self.qs) {
            *y = q as f32 * d;
        }
    }
}

impl QuantizeRef for BlockQ8_1 {
    #[inline(always)]
    fn quantize_ref(x: &[f32], y: &mut Self) {
        let d = q8_levels(x, &mut y.qs);
        y.d = PackedF16::from_f32(d);
        let sum = y.qs.iter().fold(0i32, |s, &q| s + q as i32);
        y.s = PackedF16::from_f32(sum as f32 * d);
    }
}
