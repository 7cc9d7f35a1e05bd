//! The grid i-quants (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M) as the integer dot
//! products read them ([`GridGroups`]): per group of 32 values, 32 small signed integers
//! (levels), one integer scale per 16 values, and one f32 factor per super-block, so that
//! value = `d · FACTOR · scale · level`. The levels come from the grids in one of two forms
//! ([`GroupBytes`]): grid magnitudes with their signs (the IQ2 and IQ3 types), or ternary grid
//! points shifted by ±1/8 (the IQ1 types, whose levels are `8 · point ± 1` and whose factor
//! carries the 1/8).
//!
//! The bit layouts are GGML's (`ggml-common.h`), as the dequantizers in `iq1.rs`, `iq2.rs`
//! and `iq3.rs` read them; these readers give the same values as integers (a unit test holds
//! them to the dequantizers).

use super::common::PackedF16;
use super::iq1::{BlockIq1M, BlockIq1S};
use super::iq2::{BlockIq2S, BlockIq2Xs, BlockIq2Xxs};
use super::iq3::{BlockIq3S, BlockIq3Xxs};
use super::iq_common::read_u32;
use super::iq_grids::{
    IQ1S_GRID, IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID, IQ3S_GRID, IQ3XXS_GRID, KEVEN_SIGNS,
};
use crate::QK_K;

/// The 32 levels of one group, as stored. Bytes come eight per `u64`, values 8j..8j + 8 in
/// word j, little-endian.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GroupBytes {
    /// Magnitudes and one sign bit per value (bit v set: value v is negative).
    SignBits([u64; 4], u32),
    /// Magnitudes and one sign byte per value (−1 or +1; [`KEVEN_SIGNS`]' entries).
    SignBytes([u64; 4], [u64; 4]),
    /// Ternary grid points (bytes −1, 0, +1) and the shifts: level = `8 · point ± 1`, −1
    /// for values 8j..8j + 8 where bit 4j + 3 of the `u16` is set ([`SHIFT_BITS`]).
    Shifted([u64; 4], u16),
}

/// The bits of [`GroupBytes::Shifted`]'s shifts (bit 4j + 3 for values 8j..8j + 8: IQ1_M's
/// layout).
const SHIFT_BITS: u16 = 0x8888;

/// Byte `v` of four words of bytes, as signed.
#[inline(always)]
fn byte(words: &[u64; 4], v: usize) -> i8 {
    (words[v / 8] >> (8 * (v % 8))) as u8 as i8
}

impl GroupBytes {
    /// The 32 levels as signed bytes.
    #[inline(always)]
    pub(crate) fn levels(self) -> [i8; 32] {
        match self {
            GroupBytes::SignBits(magnitudes, signs) => std::array::from_fn(|v| {
                let m = byte(&magnitudes, v);
                if (signs >> v) & 1 != 0 {
                    -m
                } else {
                    m
                }
            }),
            GroupBytes::SignBytes(magnitudes, signs) => {
                std::array::from_fn(|v| byte(&magnitudes, v) * byte(&signs, v))
            }
            GroupBytes::Shifted(points, shifts) => std::array::from_fn(|v| {
                let negative = (shifts >> (4 * (v / 8) + 3)) & 1 != 0;
                8 * byte(&points, v) + if negative { -1 } else { 1 }
            }),
        }
    }
}

/// A grid i-quant super-block read as integers: value `32g + v` is
/// `d · FACTOR · scales16()[(32g + v) / 16] · group(g).levels()[v]`.
pub(crate) trait GridGroups: bytemuck::Pod {
    /// The power of two every value carries besides `d` and its scale (GGML's dots multiply
    /// by it at the end: 1/8 for IQ2_XXS, IQ2_XS and IQ2_S, 1/4 for IQ3_XXS; the 1/8 of the
    /// IQ1 types' `8 · point ± 1` levels).
    const FACTOR: f32;
    /// Whether the scales come one per 32 values (so [`GridGroups::scales16`] repeats each).
    const PAIRED: bool;
    /// The super-block scale.
    fn d(&self) -> PackedF16;
    /// The integer scale of each 16 values (`2s + 1`), in order.
    fn scales16(&self) -> [i16; QK_K / 16];
    /// The levels of values 32g..32g + 32.
    fn group(&self, g: usize) -> GroupBytes;
}

/// Per-32 scales `2s + 1` from 4-bit codes `code(g)`, each given for both of its 16s.
#[inline(always)]
fn paired(code: impl Fn(usize) -> u32) -> [i16; QK_K / 16] {
    std::array::from_fn(|h| 2 * code(h / 2) as i16 + 1)
}

/// Per-16 scales `2s + 1` from 4-bit codes two per byte, low nibble first (IQ2_XS, IQ2_S).
#[inline(always)]
fn per16(codes: &[u8; QK_K / 32]) -> [i16; QK_K / 16] {
    std::array::from_fn(|h| 2 * ((codes[h / 2] >> (4 * (h % 2))) & 0xf) as i16 + 1)
}

/// The sign bytes of four 7-bit patterns `pattern(l)`, each completed to even parity.
#[inline(always)]
pub(crate) fn even_signs(pattern: impl Fn(usize) -> u32) -> [u64; 4] {
    std::array::from_fn(|l| KEVEN_SIGNS[(pattern(l) & 127) as usize])
}

/// Two 4-value IQ3 grid points side by side as 8 bytes.
#[inline(always)]
fn two_points(grid: &[u32], a: usize, b: usize) -> u64 {
    grid[a] as u64 | (grid[b] as u64) << 32
}

impl GridGroups for BlockIq2Xxs {
    const FACTOR: f32 = 0.125;
    const PAIRED: bool = true;
    #[inline(always)]
    fn d(&self) -> PackedF16 {
        self.d
    }
    #[inline(always)]
    fn scales16(&self) -> [i16; QK_K / 16] {
        paired(|g| read_u32(&self.qs, 2 * g + 1) >> 28)
    }
    #[inline(always)]
    fn group(&self, g: usize) -> GroupBytes {
        let aux = read_u32(&self.qs, 2 * g + 1);
        let points = std::array::from_fn(|l| IQ2XXS_GRID[self.qs[8 * g + l] as usize]);
        GroupBytes::SignBytes(points, even_signs(|l| aux >> (7 * l)))
    }
}

impl GridGroups for BlockIq2Xs {
    const FACTOR: f32 = 0.125;
    const PAIRED: bool = false;
    #[inline(always)]
    fn d(&self) -> PackedF16 {
        self.d
    }
    #[inline(always)]
    fn scales16(&self) -> [i16; QK_K / 16] {
        per16(&self.scales)
    }
    #[inline(always)]
    fn group(&self, g: usize) -> GroupBytes {
        let q: [u16; 4] = std::array::from_fn(|l| self.qs[4 * g + l].get());
        let points = q.map(|q| IQ2XS_GRID[(q & 511) as usize]);
        GroupBytes::SignBytes(points, even_signs(|l| q[l] as u32 >> 9))
    }
}

impl GridGroups for BlockIq2S {
    const FACTOR: f32 = 0.125;
    const PAIRED: bool = false;
    #[inline(always)]
    fn d(&self) -> PackedF16 {
        self.d
    }
    #[inline(always)]
    fn scales16(&self) -> [i16; QK_K / 16] {
        per16(&self.scales)
    }
    #[inline(always)]
    fn group(&self, g: usize) -> GroupBytes {
        let qh = self.qh[g] as usize;
        let points = std::array::from_fn(|l| {
            IQ2S_GRID[self.qs[4 * g + l] as usize | ((qh << (8 - 2 * l)) & 0x300)]
        });
        GroupBytes::SignBits(points, read_u32(&self.qs[QK_K / 8..], g))
    }
}

impl GridGroups for BlockIq3Xxs {
    const FACTOR: f32 = 0.25;
    const PAIRED: bool = true;
    #[inline(always)]
    fn d(&self) -> PackedF16 {
        self.d
    }
    #[inline(always)]
    fn scales16(&self) -> [i16; QK_K / 16] {
        paired(|g| read_u32(&self.qs[QK_K / 4..], g) >> 28)
    }
    #[inline(always)]
    fn group(&self, g: usize) -> GroupBytes {
        let qs = &self.qs[8 * g..8 * g + 8];
        let points = std::array::from_fn(|l| {
            two_points(&IQ3XXS_GRID, qs[2 * l] as usize, qs[2 * l + 1] as usize)
        });
        let aux = read_u32(&self.qs[QK_K / 4..], g);
        GroupBytes::SignBytes(points, even_signs(|l| aux >> (7 * l)))
    }
}

impl GridGroups for BlockIq3S {
    const FACTOR: f32 = 1.0;
    const PAIRED: bool = true;
    #[inline(always)]
    fn d(&self) -> PackedF16 {
        self.d
    }
    #[inline(always)]
    fn scales16(&self) -> [i16; QK_K / 16] {
        paired(|g| ((self.scales[g / 2] >> (4 * (g % 2))) & 0xf) as u32)
    }
    #[inline(always)]
    fn group(&self, g: usize) -> GroupBytes {
        // point j: a byte of qs and, as its ninth bit, bit j of the group's qh byte
        let index = |j: usize| self.qs[8 * g + j] as usize | ((self.qh[g] as usize >> j) & 1) << 8;
        let points =
            std::array::from_fn(|l| two_points(&IQ3S_GRID, index(2 * l), index(2 * l + 1)));
        GroupBytes::SignBits(points, read_u32(&self.signs, g))
    }
}

impl GridGroups for BlockIq1S {
    const FACTOR: f32 = 0.125;
    const PAIRED: bool = true;
    #[inline(always)]
    fn d(&self) -> PackedF16 {
        self.d
    }
    #[inline(always)]
    fn scales16(&self) -> [i16; QK_K / 16] {
        paired(|g| (self.qh[g].get() as u32 >> 12) & 7)
    }
    #[inline(always)]
    fn group(&self, g: usize) -> GroupBytes {
        let qh = self.qh[g].get() as usize;
        let points = std::array::from_fn(|l| {
            IQ1S_GRID[self.qs[4 * g + l] as usize | ((qh >> (3 * l)) & 7) << 8]
        });
        // one shift for all 32: its sign bit (15) spread over every group of 8
        GroupBytes::Shifted(points, ((qh as u16 as i16) >> 15) as u16 & SHIFT_BITS)
    }
}

impl BlockIq1M {
    /// The super-block scale, spread over the top nibbles of the four scale words.
    #[inline(always)]
    pub(crate) fn d(&self) -> PackedF16 {
        let sc = self.scales.map(|w| w.get());
        let bits =
            (sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000);
        PackedF16(bits.to_le_bytes())
    }
}

impl GridGroups for BlockIq1M {
    const FACTOR: f32 = 0.125;
    const PAIRED: bool = false;
    #[inline(always)]
    fn d(&self) -> PackedF16 {
        BlockIq1M::d(self)
    }
    #[inline(always)]
    fn scales16(&self) -> [i16; QK_K / 16] {
        // three bits per 16 values, four 16s per word
        std::array::from_fn(|h| 2 * ((self.scales[h / 4].get() >> (3 * (h % 4))) & 7) as i16 + 1)
    }
    #[inline(always)]
    fn group(&self, g: usize) -> GroupBytes {
        // per 8 values a nibble: bits 8..11 of the grid index, then the shift's sign
        let qh = u16::from_le_bytes([self.qh[2 * g], self.qh[2 * g + 1]]) as usize;
        let points = std::array::from_fn(|l| {
            IQ1S_GRID[self.qs[4 * g + l] as usize | ((qh >> (4 * l)) & 7) << 8]
        });
        GroupBytes::Shifted(points, qh as u16 & SHIFT_BITS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quants::{dequantize_row, quantize_chunk};
    use crate::Type;

    /// Every type's integers times its factors give its dequantized values (to f32 rounding:
    /// the dequantizers round `d · scale` first).
    #[test]
    fn integer_groups_give_the_dequantized_values() {
        fn check<B: GridGroups>(ty: Type) {
            let k = 4 * QK_K;
            let x: Vec<f32> = (0..k)
                .map(|i| ((i * 7919 % 1013) as f32 - 506.0) / 300.0)
                .collect();
            let mut q = vec![0u8; ty.row_size(k as i64).unwrap()];
            let imatrix = vec![1.0f32; k];
            quantize_chunk(ty, &x, &mut q, 0, 1, k, Some(&imatrix)).unwrap();
            let mut want = vec![0f32; k];
            dequantize_row(ty, &q, &mut want).unwrap();
            let mut nonzero = 0;
            for (b, want) in bytemuck::cast_slice::<u8, B>(&q)
                .iter()
                .zip(want.chunks_exact(QK_K))
            {
                let (d, scales) = (b.d().to_f32(), b.scales16());
                for g in 0..QK_K / 32 {
                    for (v, &level) in b.group(g).levels().iter().enumerate() {
                        let e = 32 * g + v;
                        let got = d * B::FACTOR * scales[e / 16] as f32 * level as f32;
                        let w = want[e];
                        assert!(
                            (got - w).abs() <= 1e-6 * w.abs(),
                            "{ty} value {e}: {got} vs {w}"
                        );
                        nonzero += (level != 0) as usize;
                    }
                }
            }
            assert!(nonzero > k / 2, "{ty}: {nonzero} of {k} levels nonzero");
        }
        check::<BlockIq2Xxs>(Type::IQ2_XXS);
        check::<BlockIq2Xs>(Type::IQ2_XS);
        check::<BlockIq2S>(Type::IQ2_S);
        check::<BlockIq3Xxs>(Type::IQ3_XXS);
        check::<BlockIq3S>(Type::IQ3_S);
        check::<BlockIq1S>(Type::IQ1_S);
        check::<BlockIq1M>(Type::IQ1_M);
    }
}
