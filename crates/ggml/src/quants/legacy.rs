//! The legacy 32-element formats: Q4_0, Q4_1, Q5_0, Q5_1 (4/5-bit, symmetric or with a
//! minimum), Q8_0 and Q8_1 (8-bit).

use bytemuck::{Pod, Zeroable};

use super::common::{
    assert_block_size, blocks, blocks_mut, imatrix_weights, max_abs_macro, min_max, quantize_rows,
    round_i32, signed_absmax, sum_squares, trunc_low_byte, PackedF16,
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

assert_block_size!(BlockQ4_0, 18);
assert_block_size!(BlockQ4_1, 20);
assert_block_size!(BlockQ5_0, 22);
assert_block_size!(BlockQ5_1, 24);
assert_block_size!(BlockQ8_0, 34);
assert_block_size!(BlockQ8_1, 36);

/// `MIN(max, (int8_t) x)` stored as a byte, as GGML's reference quantizers compute it.
#[inline(always)]
fn level_i8(x: f32, max: i8) -> u8 {
    (trunc_low_byte(x) as i8).min(max) as u8
}

#[inline(always)]
fn inverse(d: f32) -> f32 {
    if d != 0.0 {
        1.0 / d
    } else {
        0.0
    }
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

/// Packs 32 four-bit levels: value j in the low nibble of byte j, value j + 16 in the high one.
#[inline(always)]
fn pack_q4(levels: &[u8; QK], qs: &mut [u8; QK / 2]) {
    let (lo, hi) = levels.split_at(QK / 2);
    for ((q, &a), &b) in qs.iter_mut().zip(lo).zip(hi) {
        *q = a | (b << 4);
    }
}

/// Packs 32 five-bit levels: low nibbles into `qs`, fifth bits into the returned `qh` bytes.
#[inline(always)]
fn pack_q5(levels: &[u8; QK], qs: &mut [u8; QK / 2]) -> [u8; 4] {
    let (lo, hi) = levels.split_at(QK / 2);
    for ((q, &a), &b) in qs.iter_mut().zip(lo).zip(hi) {
        *q = (a & 0x0f) | ((b & 0x0f) << 4);
    }
    let qh = levels
        .iter()
        .enumerate()
        .fold(0u32, |qh, (j, &l)| qh | ((((l & 0x10) >> 4) as u32) << j));
    qh.to_le_bytes()
}

/// The two 5-bit level offsets of byte j (`xh_0`, `xh_1` in GGML).
#[inline(always)]
fn q5_high_bits(qh: u32, j: usize) -> (u8, u8) {
    (
        (((qh >> j) << 4) & 0x10) as u8,
        ((qh >> (j + 12)) & 0x10) as u8,
    )
}

/// Mean square of a row (GGML's σ² of the imatrix quantizers).
#[inline(always)]
fn row_sigma2(row: &[f32]) -> f32 {
    sum_squares(row) / row.len() as f32
}

// ---------------------------------------------------------------------------------------------
// Q4_0

fn q4_0_ref(src: &[f32], dst: &mut [BlockQ4_0]) {
    for (x, y) in src.chunks_exact(QK).zip(dst) {
        let (max, _) = signed_absmax(x);
        let d = max / -8.0;
        let id = inverse(d);
        y.d = PackedF16::from_f32(d);
        pack_q4(&map_levels(x, |v| level_i8(v * id + 8.5, 15)), &mut y.qs);
    }
}

pub(crate) fn quantize_row_q4_0_ref(src: &[f32], dst: &mut [u8]) {
    q4_0_ref(src, blocks_mut(dst));
}

pub(crate) fn dequantize_row_q4_0(src: &[u8], dst: &mut [f32]) {
    for (b, y) in blocks::<BlockQ4_0>(src)
        .iter()
        .zip(dst.chunks_exact_mut(QK))
    {
        let d = b.d.to_f32();
        for (j, &q) in b.qs.iter().enumerate() {
            y[j] = ((q & 0x0f) as i32 - 8) as f32 * d;
            y[j + 16] = ((q >> 4) as i32 - 8) as f32 * d;
        }
    }
}

fn q4_0_imatrix_row(row: &[f32], out: &mut [BlockQ4_0], qw: &[f32]) {
    let sigma2 = row_sigma2(row);
    let mut levels = [0i8; QK];
    for ((x, qw), y) in row.chunks_exact(QK).zip(qw.chunks_exact(QK)).zip(out) {
        let w: [f32; QK] = imatrix_weights(x, qw, sigma2);
        let d = make_qx_quants::<QK>(8, x, &mut levels, 1, Some(&w));
        y.d = PackedF16::from_f32(d);
        pack_q4(bytemuck::cast_ref(&levels), &mut y.qs);
    }
}

pub(crate) fn quantize_q4_0(
    src: &[f32],
    dst: &mut [u8],
    _n_rows: usize,
    n_per_row: usize,
    imatrix: Option<&[f32]>,
) -> usize {
    quantize_rows(src, dst, n_per_row, imatrix, q4_0_ref, q4_0_imatrix_row)
}

// ---------------------------------------------------------------------------------------------
// Q4_1

fn q4_1_ref(src: &[f32], dst: &mut [BlockQ4_1]) {
    for (x, y) in src.chunks_exact(QK).zip(dst) {
        let (min, max) = min_max(x);
        let d = (max - min) / 15.0;
        let id = inverse(d);
        y.d = PackedF16::from_f32(d);
        y.m = PackedF16::from_f32(min);
        pack_q4(
            &map_levels(x, |v| level_i8((v - min) * id + 0.5, 15)),
            &mut y.qs,
        );
    }
}

pub(crate) fn quantize_row_q4_1_ref(src: &[f32], dst: &mut [u8]) {
    q4_1_ref(src, blocks_mut(dst));
}

pub(crate) fn dequantize_row_q4_1(src: &[u8], dst: &mut [f32]) {
    for (b, y) in blocks::<BlockQ4_1>(src)
        .iter()
        .zip(dst.chunks_exact_mut(QK))
    {
        let (d, m) = (b.d.to_f32(), b.m.to_f32());
        for (j, &q) in b.qs.iter().enumerate() {
            y[j] = (q & 0x0f) as f32 * d + m;
            y[j + 16] = (q >> 4) as f32 * d + m;
        }
    }
}

/// One row of the imatrix quantizer shared by Q4_1 and Q5_1: per block, the asymmetric search
/// with levels `0 ..= nmax`, then `store(block, d, m, levels)`.
fn asym_imatrix_row<B>(
    row: &[f32],
    out: &mut [B],
    qw: &[f32],
    nmax: i32,
    store: impl Fn(&mut B, f32, f32, &[u8; QK]),
) {
    let sigma2 = row_sigma2(row);
    let mut levels = [0u8; QK];
    for ((x, qw), y) in row.chunks_exact(QK).zip(qw.chunks_exact(QK)).zip(out) {
        let w: [f32; QK] = imatrix_weights(x, qw, sigma2);
        let (d, min) = make_qkx_quants::<QK>(nmax, x, &w, &mut levels, QKX3_STEPS);
        store(y, d, -min, &levels);
    }
}

fn q4_1_imatrix_row(row: &[f32], out: &mut [BlockQ4_1], qw: &[f32]) {
    asym_imatrix_row(row, out, qw, 15, |y, d, m, levels| {
        y.d = PackedF16::from_f32(d);
        y.m = PackedF16::from_f32(m);
        pack_q4(levels, &mut y.qs);
    });
}

pub(crate) fn quantize_q4_1(
    src: &[f32],
    dst: &mut [u8],
    _n_rows: usize,
    n_per_row: usize,
    imatrix: Option<&[f32]>,
) -> usize {
    quantize_rows(src, dst, n_per_row, imatrix, q4_1_ref, q4_1_imatrix_row)
}

// ---------------------------------------------------------------------------------------------
// Q5_0

fn q5_0_ref(src: &[f32], dst: &mut [BlockQ5_0]) {
    for (x, y) in src.chunks_exact(QK).zip(dst) {
        let (max, _) = signed_absmax(x);
        let d = max / -16.0;
        let id = inverse(d);
        y.d = PackedF16::from_f32(d);
        y.qh = pack_q5(&map_levels(x, |v| level_i8(v * id + 16.5, 31)), &mut y.qs);
    }
}

pub(crate) fn quantize_row_q5_0_ref(src: &[f32], dst: &mut [u8]) {
    q5_0_ref(src, blocks_mut(dst));
}

pub(crate) fn dequantize_row_q5_0(src: &[u8], dst: &mut [f32]) {
    for (b, y) in blocks::<BlockQ5_0>(src)
        .iter()
        .zip(dst.chunks_exact_mut(QK))
    {
        let d = b.d.to_f32();
        let qh = u32::from_le_bytes(b.qh);
        for (j, &q) in b.qs.iter().enumerate() {
            let (h0, h1) = q5_high_bits(qh, j);
            y[j] = (((q & 0x0f) | h0) as i32 - 16) as f32 * d;
            y[j + 16] = (((q >> 4) | h1) as i32 - 16) as f32 * d;
        }
    }
}

fn q5_0_imatrix_row(row: &[f32], out: &mut [BlockQ5_0], qw: &[f32]) {
    let sigma2 = row_sigma2(row);
    let mut levels = [0i8; QK];
    for ((x, qw), y) in row.chunks_exact(QK).zip(qw.chunks_exact(QK)).zip(out) {
        let w: [f32; QK] = imatrix_weights(x, qw, sigma2);
        let d = make_qx_quants::<QK>(16, x, &mut levels, 1, Some(&w));
        y.d = PackedF16::from_f32(d);
        y.qh = pack_q5(bytemuck::cast_ref(&levels), &mut y.qs);
    }
}

pub(crate) fn quantize_q5_0(
    src: &[f32],
    dst: &mut [u8],
    _n_rows: usize,
    n_per_row: usize,
    imatrix: Option<&[f32]>,
) -> usize {
    quantize_rows(src, dst, n_per_row, imatrix, q5_0_ref, q5_0_imatrix_row)
}

// ---------------------------------------------------------------------------------------------
// Q5_1

fn q5_1_ref(src: &[f32], dst: &mut [BlockQ5_1]) {
    for (x, y) in src.chunks_exact(QK).zip(dst) {
        let (min, max) = min_max(x);
        let d = (max - min) / 31.0;
        let id = inverse(d);
        y.d = PackedF16::from_f32(d);
        y.m = PackedF16::from_f32(min);
        y.qh = pack_q5(
            &map_levels(x, |v| trunc_low_byte((v - min) * id + 0.5)),
            &mut y.qs,
        );
    }
}

pub(crate) fn quantize_row_q5_1_ref(src: &[f32], dst: &mut [u8]) {
    q5_1_ref(src, blocks_mut(dst));
}

pub(crate) fn dequantize_row_q5_1(src: &[u8], dst: &mut [f32]) {
    for (b, y) in blocks::<BlockQ5_1>(src)
        .iter()
        .zip(dst.chunks_exact_mut(QK))
    {
        let (d, m) = (b.d.to_f32(), b.m.to_f32());
        let qh = u32::from_le_bytes(b.qh);
        for (j, &q) in b.qs.iter().enumerate() {
            let (h0, h1) = q5_high_bits(qh, j);
            y[j] = ((q & 0x0f) | h0) as f32 * d + m;
            y[j + 16] = ((q >> 4) | h1) as f32 * d + m;
        }
    }
}

fn q5_1_imatrix_row(row: &[f32], out: &mut [BlockQ5_1], qw: &[f32]) {
    asym_imatrix_row(row, out, qw, 31, |y, d, m, levels| {
        y.d = PackedF16::from_f32(d);
        y.m = PackedF16::from_f32(m);
        y.qh = pack_q5(levels, &mut y.qs);
    });
}

pub(crate) fn quantize_q5_1(
    src: &[f32],
    dst: &mut [u8],
    _n_rows: usize,
    n_per_row: usize,
    imatrix: Option<&[f32]>,
) -> usize {
    quantize_rows(src, dst, n_per_row, imatrix, q5_1_ref, q5_1_imatrix_row)
}

// ---------------------------------------------------------------------------------------------
// Q8_0 and Q8_1

/// `(int8_t) roundf(v)`, as GGML's 8-bit quantizers store it.
#[inline(always)]
fn round_i8(v: f32) -> i8 {
    round_i32(v) as i8
}

fn q8_0_ref(src: &[f32], dst: &mut [BlockQ8_0]) {
    for (x, y) in src.chunks_exact(QK).zip(dst) {
        let d = max_abs_macro(x) / 127.0;
        let id = inverse(d);
        y.d = PackedF16::from_f32(d);
        for (q, &v) in y.qs.iter_mut().zip(x) {
            *q = round_i8(v * id);
        }
    }
}

pub(crate) fn quantize_row_q8_0_ref(src: &[f32], dst: &mut [u8]) {
    q8_0_ref(src, blocks_mut(dst));
}

pub(crate) fn dequantize_row_q8_0(src: &[u8], dst: &mut [f32]) {
    for (b, y) in blocks::<BlockQ8_0>(src)
        .iter()
        .zip(dst.chunks_exact_mut(QK))
    {
        let d = b.d.to_f32();
        for (y, &q) in y.iter_mut().zip(&b.qs) {
            *y = q as f32 * d;
        }
    }
}

/// Q8_0 ignores the imatrix.
pub(crate) fn quantize_q8_0(
    src: &[f32],
    dst: &mut [u8],
    _: usize,
    _: usize,
    _: Option<&[f32]>,
) -> usize {
    q8_0_ref(src, blocks_mut(dst));
    dst.len()
}

pub(crate) fn quantize_row_q8_1_ref(src: &[f32], dst: &mut [u8]) {
    for (x, y) in src.chunks_exact(QK).zip(blocks_mut::<BlockQ8_1>(dst)) {
        let d = max_abs_macro(x) / 127.0;
        let id = inverse(d);
        y.d = PackedF16::from_f32(d);
        let mut sum = 0i32;
        for (q, &v) in y.qs.iter_mut().zip(x) {
            *q = round_i8(v * id);
            sum += *q as i32;
        }
        y.s = PackedF16::from_f32(sum as f32 * d);
    }
}
