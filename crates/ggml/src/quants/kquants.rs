//! Pieces shared by the k-quants (super-blocks of 256 values).

use crate::QK_K;

/// Packs 256 two-bit levels the way Q2_K and Q3_K store them: in each half of 128 values, byte
/// `l` holds values `l`, `l + 32`, `l + 64` and `l + 96` from the low bits up.
pub(crate) fn pack_2bit(levels: &[u8; QK_K], qs: &mut [u8; QK_K / 4]) {
    for (half, q) in levels.chunks_exact(128).zip(qs.chunks_exact_mut(32)) {
        for (l, q) in q.iter_mut().enumerate() {
            *q = half[l] | (half[l + 32] << 2) | (half[l + 64] << 4) | (half[l + 96] << 6);
        }
    }
}

/// Inverse of [`pack_2bit`].
#[inline(always)]
pub(crate) fn unpack_2bit(qs: &[u8; QK_K / 4]) -> [u8; QK_K] {
    let mut levels = [0u8; QK_K];
    for (half, q) in levels.chunks_exact_mut(128).zip(qs.chunks_exact(32)) {
        for (l, &b) in q.iter().enumerate() {
            half[l] = b & 3;
            half[l + 32] = (b >> 2) & 3;
            half[l + 64] = (b >> 4) & 3;
            half[l + 96] = b >> 6;
        }
    }
    levels
}

/// Mean square of a super-block times `factor` (GGML's σ²: `factor·Σx²/QK_K`).
#[inline(always)]
pub(crate) fn sigma2(x: &[f32], factor: f32) -> f32 {
    factor * super::common::sum_squares(x) / QK_K as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_bit_round_trip() {
        let mut levels = [0u8; QK_K];
        for (i, l) in levels.iter_mut().enumerate() {
            *l = (i * 7 % 4) as u8;
        }
        let mut qs = [0u8; QK_K / 4];
        pack_2bit(&levels, &mut qs);
        assert_eq!(unpack_2bit(&qs), levels);
    }
}
