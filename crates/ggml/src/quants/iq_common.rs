//! Small helpers shared by the grid i-quants (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S,
//! IQ1_M): GGML's rounding, f16 and little-endian access, sign handling and importance weights.
//!
//! Every floating-point expression evaluates the same operations in the same order as GGML's C
//! code, in `f32`, so results are bit-identical.

use super::iq_grids::KMASK_IQ2XS;
use crate::types::{f16, f16_to_f32, f32_to_f16, QK_K};

/// Rounds to the nearest integer, ties to even, with GGML's `nearest_int` trick: adding 1.5·2²³
/// leaves the integer in the low mantissa bits. Exact for |x| < 2²²; beyond that it yields the
/// same wrapped value GGML does.
#[inline]
pub(crate) fn nearest_int(x: f32) -> i32 {
    let bits = (x + 12_582_912.0).to_bits() as i32;
    (bits & 0x007f_ffff) - 0x0040_0000
}

/// An f16 stored little-endian, as f32.
#[inline]
pub(crate) fn f16_le_to_f32(b: [u8; 2]) -> f32 {
    f16_to_f32(f16::from_bits(u16::from_le_bytes(b)))
}

/// f32 → f16 bits (round to nearest even, GGML's `GGML_FP32_TO_FP16`).
#[inline]
pub(crate) fn f32_to_f16_bits(x: f32) -> u16 {
    f32_to_f16(x).to_bits()
}

/// The `i`-th little-endian `u32` of `bytes`.
#[inline]
pub(crate) fn read_u32(bytes: &[u8], i: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&bytes[4 * i..4 * i + 4]);
    u32::from_le_bytes(w)
}

/// Σ x² over a super-block, summed in order as GGML does.
pub(crate) fn sum_squares(x: &[f32]) -> f32 {
    x.iter().fold(0.0f32, |acc, &v| acc + v * v)
}

/// GGML's importance weights `qw[i]·√(σ² + x[i]²)`.
pub(crate) fn imatrix_weights(x: &[f32], qw: &[f32], sigma2: f32, weight: &mut [f32]) {
    for ((w, &q), &v) in weight.iter_mut().zip(qw).zip(x) {
        *w = q * (sigma2 + v * v).sqrt();
    }
}

/// Importance weights of a block: [`imatrix_weights`] when the imatrix entries `qw` are given,
/// else `plain(x[i])` (the format's own weighting).
pub(crate) fn block_weights(
    x: &[f32],
    qw: Option<&[f32]>,
    sigma2: f32,
    plain: impl Fn(f32) -> f32,
    weight: &mut [f32],
) {
    match qw {
        Some(qw) => imatrix_weights(x, qw, sigma2, weight),
        None => {
            for (w, &v) in weight.iter_mut().zip(x) {
                *w = plain(v);
            }
        }
    }
}

/// Packs 4-bit block scale codes (relative to `id` = 1/d) two per byte, low nibble first.
pub(crate) fn pack_scale_nibbles(id: f32, scales: &[f32], out: &mut [u8]) {
    for (ib, &s) in scales.iter().enumerate() {
        out[ib / 2] |= scale_code(id, s, 15) << (4 * (ib % 2));
    }
}

/// Writes the magnitudes of `x` to `xval` and one sign byte per group of 8 values to `signs`
/// (bit `i` set where value `i` is not `>= 0`).
pub(crate) fn fold_signs(x: &[f32], xval: &mut [f32], signs: &mut [u8]) {
    for ((xg, vg), s) in x.chunks_exact(8).zip(xval.chunks_exact_mut(8)).zip(signs) {
        *s = 0;
        for (i, (&v, out)) in xg.iter().zip(vg.iter_mut()).enumerate() {
            if v >= 0.0 {
                *out = v;
            } else {
                *out = -v;
                *s |= 1 << i;
            }
        }
    }
}

/// As [`fold_signs`], for formats that store only 7 sign bits per group (the eighth is implied
/// by even parity): where a group has an odd number of negative values, the value with the
/// smallest `weight·x²` keeps the wrong sign (its magnitude is negated in `xval`). `signs` gets
/// the 7 stored bits.
pub(crate) fn fold_signs_even(x: &[f32], weight: &[f32], xval: &mut [f32], signs: &mut [u8]) {
    fold_signs(x, xval, signs);
    for (k, s) in signs.iter_mut().enumerate() {
        let g = 8 * k..8 * k + 8;
        if s.count_ones() % 2 == 1 {
            let (xg, wg) = (&x[g.clone()], &weight[g.clone()]);
            let mut imin = 0;
            let mut min = wg[0] * xg[0] * xg[0];
            for i in 1..8 {
                let ax = wg[i] * xg[i] * xg[i];
                if ax < min {
                    min = ax;
                    imin = i;
                }
            }
            xval[8 * k + imin] = -xval[8 * k + imin];
            *s ^= 1 << imin;
        }
        *s &= 127;
    }
}

/// The largest value of a slice, folded left with [`fmax`] as GGML does.
pub(crate) fn fmax_slice(x: &[f32]) -> f32 {
    x[1..].iter().fold(x[0], |m, &v| fmax(m, v))
}

/// Writes `scale · grid[j] · (±1)` for the 8 values of a group, negated where bit `j` of `signs`
/// is set (GGML multiplies by `-1.f`, so a zero scale gives `-0.0` there).
#[inline]
pub(crate) fn put_signed(y: &mut [f32], scale: f32, grid: &[u8; 8], signs: u8) {
    for (j, out) in y[..8].iter_mut().enumerate() {
        let sign = if signs & KMASK_IQ2XS[j] != 0 {
            -1.0
        } else {
            1.0
        };
        *out = scale * grid[j] as f32 * sign;
    }
}

/// The 4-bit code of a block scale relative to the super-block scale, `(2c+1)·d ≈ scale`.
pub(crate) fn scale_code(id: f32, scale: f32, max: i32) -> u8 {
    nearest_int(0.5 * (id * scale - 1.0)).clamp(0, max) as u8
}

/// GGML's `MAX(a, b)` (`a > b ? a : b`).
#[inline]
pub(crate) fn fmax(a: f32, b: f32) -> f32 {
    if a > b {
        a
    } else {
        b
    }
}

/// Importance of every value when a quantizer that needs an imatrix is given none: GGML
/// asserts there; the callers are expected to refuse, and this neutral weighting keeps the
/// quantizer total.
pub(crate) const UNIT_IMPORTANCE: [f32; QK_K] = [1.0; QK_K];

/// Drives a super-block quantizer over `n_rows` rows of `n_per_row` values (GGML's
/// `quantize_<type>` loop): `block` gets each super-block's 256 values, the matching 256
/// entries of `imatrix` (if any) and the block's `type_size` output bytes. Returns the bytes
/// written. The caller guarantees `n_per_row % 256 == 0`, `src.len() >= n_rows·n_per_row`,
/// `dst.len() >= n_rows·n_per_row/256·type_size` and `imatrix.len() == n_per_row`; rows or
/// blocks that do not fit are left out rather than read or written out of bounds.
pub(crate) fn quantize_blocks(
    src: &[f32],
    dst: &mut [u8],
    n_rows: usize,
    n_per_row: usize,
    imatrix: Option<&[f32]>,
    type_size: usize,
    mut block: impl FnMut(&[f32], Option<&[f32]>, &mut [u8]),
) -> usize {
    debug_assert!(n_per_row % QK_K == 0 && imatrix.is_none_or(|w| w.len() == n_per_row));
    if n_per_row == 0 || n_per_row % QK_K != 0 {
        return 0;
    }
    let row_size = n_per_row / QK_K * type_size;
    let rows = src
        .chunks_exact(n_per_row)
        .zip(dst.chunks_exact_mut(row_size));
    let mut written = 0;
    for (x, y) in rows.take(n_rows) {
        let blocks = x.chunks_exact(QK_K).zip(y.chunks_exact_mut(type_size));
        for (ibl, (xbl, out)) in blocks.enumerate() {
            let qw = imatrix.and_then(|w| w.get(QK_K * ibl..QK_K * (ibl + 1)));
            block(xbl, qw, out);
        }
        written += row_size;
    }
    written
}
