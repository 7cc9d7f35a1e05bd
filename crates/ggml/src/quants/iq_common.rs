//! Helpers shared by the grid i-quants (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M):
//! sign folding, importance weights, block-scale codes and the dequantized group writer.
//!
//! Every floating-point expression evaluates the same operations in the same order as GGML's C
//! code, in `f32`, so results are bit-identical.

use super::common::{imatrix_weights, nearest_int};
use super::iq_grids::KMASK_IQ2XS;
use crate::QK_K;

/// The `i`-th little-endian `u32` of `bytes`.
#[inline]
pub(crate) fn read_u32(bytes: &[u8], i: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&bytes[4 * i..4 * i + 4]);
    u32::from_le_bytes(w)
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

/// The largest value of a slice, folded left with [`fmax`] as GGML does.
pub(crate) fn fmax_slice(x: &[f32]) -> f32 {
    x[1..].iter().fold(x[0], |m, &v| fmax(m, v))
}

/// Importance weights of a block of `N` values: [`imatrix_weights`] when the imatrix entries `qw`
/// are given, else `plain(x[i])` (the format's own weighting).
pub(crate) fn block_weights<const N: usize>(
    x: &[f32],
    qw: Option<&[f32]>,
    sigma2: f32,
    plain: impl Fn(f32) -> f32,
) -> [f32; N] {
    match qw {
        Some(qw) => imatrix_weights::<N>(x, qw, sigma2),
        None => std::array::from_fn(|i| plain(x[i])),
    }
}

/// Importance of every value when a quantizer that needs an imatrix is given none: GGML
/// asserts there and the dispatcher refuses; this neutral weighting keeps the kernel total.
pub(crate) const UNIT_IMPORTANCE: [f32; QK_K] = [1.0; QK_K];

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

/// The code `c` of a block scale relative to the super-block scale, `(2c+1)·d ≈ scale`, clamped
/// to `0..=max`; `id` is `1/d`.
pub(crate) fn scale_code(id: f32, scale: f32, max: i32) -> u8 {
    nearest_int(0.5 * (id * scale - 1.0)).clamp(0, max) as u8
}

/// Packs 4-bit block scale codes two per byte, low nibble first, into `out` (zeroed).
pub(crate) fn pack_scale_nibbles(id: f32, scales: &[f32], out: &mut [u8]) {
    for (ib, &s) in scales.iter().enumerate() {
        out[ib / 2] |= scale_code(id, s, 15) << (4 * (ib % 2));
    }
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
