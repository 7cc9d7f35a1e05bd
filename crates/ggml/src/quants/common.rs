//! Scalar helpers shared by every format: GGML's rounding tricks, C's float→int conversions as
//! x86 performs them, the f16 conversions, and the unaligned little-endian field types the block
//! structs are made of.

use bytemuck::{Pod, Zeroable};

/// Groups whose largest magnitude is below this are treated as all zero (GGML's
/// `GROUP_MAX_EPS`).
pub(crate) const GROUP_MAX_EPS: f32 = 1e-15;

/// Round to nearest, ties to even, by GGML's magic-number trick (`nearest_int`).
///
/// Exact for |x| <= 2^22 - 1; outside that range it yields whatever the trick yields, as GGML's
/// does, so that even degenerate inputs quantize to the same bytes.
#[inline(always)]
pub(crate) fn nearest_int(x: f32) -> i32 {
    let v = x + 12_582_912.0;
    (v.to_bits() & 0x007f_ffff) as i32 - 0x0040_0000
}

/// `1/d`, or 0 when `d` is 0 (GGML's `d ? 1.0f/d : 0.0f`).
#[inline(always)]
pub(crate) fn inverse_or_zero(d: f32) -> f32 {
    if d != 0.0 {
        1.0 / d
    } else {
        0.0
    }
}

/// C's `(int) x` as x86 computes it (`cvttss2si`): truncation toward zero, and `i32::MIN` for NaN
/// and for values outside the `i32` range.
#[inline(always)]
pub(crate) fn trunc_i32(x: f32) -> i32 {
    if (-2_147_483_648.0..2_147_483_648.0).contains(&x) {
        x as i32
    } else {
        i32::MIN
    }
}

/// The low byte of [`trunc_i32`]`(x)`, which is all that C's `(int8_t) x` / `(uint8_t) x` keep:
/// out-of-range values and NaN give 0 (the low byte of `i32::MIN`).
#[inline(always)]
pub(crate) fn trunc_low_byte(x: f32) -> u8 {
    let in_range = (-2_147_483_648.0..2_147_483_648.0).contains(&x);
    let x = if in_range { x } else { 0.0 };
    // SAFETY: `x` is finite and within the i32 range (NaN and out-of-range values were replaced
    // by 0.0 above), which is all `to_int_unchecked` requires.
    unsafe { x.to_int_unchecked::<i32>() as u8 }
}

/// C's `(int) roundf(x)` as x86 computes it: round half away from zero, then `i32::MIN` for NaN
/// and values outside the `i32` range. Written without a libm call so that loops vectorize.
#[inline(always)]
pub(crate) fn round_i32(x: f32) -> i32 {
    let in_range = (-2_147_483_648.0..2_147_483_648.0).contains(&x);
    let x = if in_range { x } else { 0.0 };
    // SAFETY: `x` is finite and within the i32 range (see above).
    let t = unsafe { x.to_int_unchecked::<i32>() };
    // Exact: below 2^23 the fraction is representable, above it `x` is an integer and frac = 0.
    let frac = x - t as f32;
    let r = t + i32::from(frac >= 0.5) - i32::from(frac <= -0.5);
    if in_range {
        r
    } else {
        i32::MIN
    }
}

/// C's `lroundf` as glibc computes it on x86-64: round half away from zero, and `i64::MIN` for NaN
/// and out-of-range values.
#[inline(always)]
pub(crate) fn lround(x: f32) -> i64 {
    if (-2_147_483_648.0..2_147_483_648.0).contains(&x) {
        round_i32(x) as i64
    } else if (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&x) {
        x as i64 // already an integer at this magnitude
    } else {
        i64::MIN
    }
}

/// f32 → IEEE half bits, exactly as GGML's `ggml_compute_fp32_to_fp16` (round to nearest even,
/// overflow to infinity, NaN to the quiet NaN `0x7e00` with the sign kept).
#[inline(always)]
pub(crate) fn fp32_to_fp16(f: f32) -> u16 {
    let scale_to_inf = f32::from_bits(0x7780_0000); // 2^112
    let scale_to_zero = f32::from_bits(0x0880_0000); // 2^-110
    let base = (f.abs() * scale_to_inf) * scale_to_zero;
    let w = f.to_bits();
    let shl1_w = w.wrapping_add(w);
    let sign = w & 0x8000_0000;
    let bias = (shl1_w & 0xff00_0000).max(0x7100_0000);
    let bits = (f32::from_bits((bias >> 1) + 0x0780_0000) + base).to_bits();
    let nonsign = ((bits >> 13) & 0x7c00) + (bits & 0x0fff);
    let magnitude = if shl1_w > 0xff00_0000 {
        0x7e00
    } else {
        nonsign
    };
    ((sign >> 16) | magnitude) as u16
}

/// IEEE half bits → f32, exactly (GGML's `ggml_compute_fp16_to_fp32`).
#[inline(always)]
pub(crate) fn fp16_to_fp32(h: u16) -> f32 {
    let w = (h as u32) << 16;
    let sign = w & 0x8000_0000;
    let two_w = w.wrapping_add(w);
    const EXP_OFFSET: u32 = 0xe0 << 23;
    let exp_scale = f32::from_bits(0x0780_0000); // 2^-112
    let normalized = f32::from_bits((two_w >> 4) + EXP_OFFSET) * exp_scale;
    const MAGIC_MASK: u32 = 126 << 23;
    let denormalized = f32::from_bits((two_w >> 17) | MAGIC_MASK) - 0.5;
    let bits = if two_w < (1 << 27) {
        denormalized.to_bits()
    } else {
        normalized.to_bits()
    };
    f32::from_bits(sign | bits)
}

/// An IEEE half float stored as two little-endian bytes, so that blocks containing it have
/// alignment 1 and can be viewed in place over any byte buffer (GGML's `ggml_half`).
#[repr(transparent)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq, Hash, Pod, Zeroable)]
pub struct PackedF16(pub [u8; 2]);

impl PackedF16 {
    /// The half nearest to `x`, rounded as GGML rounds (`GGML_FP32_TO_FP16`).
    #[inline(always)]
    pub fn from_f32(x: f32) -> Self {
        PackedF16(fp32_to_fp16(x).to_le_bytes())
    }

    /// The stored half, widened exactly to f32.
    #[inline(always)]
    pub fn to_f32(self) -> f32 {
        fp16_to_fp32(u16::from_le_bytes(self.0))
    }

    /// The raw IEEE half bits.
    #[inline(always)]
    pub fn to_bits(self) -> u16 {
        u16::from_le_bytes(self.0)
    }
}

/// Declares a little-endian field type of alignment 1 holding a `$t` in `$n` bytes, with `get`
/// and `set`.
macro_rules! packed_le {
    ($(#[$doc:meta])* $name:ident($t:ty; $n:expr)) => {
        $(#[$doc])*
        #[repr(transparent)]
        #[derive(Clone, Copy, Default, Debug, PartialEq, Eq, Hash, Pod, Zeroable)]
        pub struct $name(pub [u8; $n]);

        impl $name {
            /// The stored value.
            #[inline(always)]
            pub fn get(self) -> $t {
                <$t>::from_le_bytes(self.0)
            }

            /// Store `v`.
            #[inline(always)]
            pub fn set(&mut self, v: $t) {
                self.0 = v.to_le_bytes();
            }
        }
    };
}

packed_le!(
    /// A `u16` stored as two little-endian bytes (alignment 1).
    PackedU16(u16; 2)
);
packed_le!(
    /// An `i16` stored as two little-endian bytes (alignment 1).
    PackedI16(i16; 2)
);
packed_le!(
    /// An f32 stored as four little-endian bytes (alignment 1).
    PackedF32(f32; 4)
);

/// Importance of each value of a group in the imatrix quantizers: `qw · √(σ² + x²)`.
#[inline(always)]
pub(crate) fn imatrix_weights<const N: usize>(x: &[f32], qw: &[f32], sigma2: f32) -> [f32; N] {
    let mut w = [0.0f32; N];
    for ((w, &v), &q) in w.iter_mut().zip(x).zip(qw) {
        *w = q * (sigma2 + v * v).sqrt();
    }
    w
}

/// Largest |v| ignoring NaN (GGML's `if (amax < fabsf(v)) amax = fabsf(v)` from 0), and
/// whether a NaN was seen. Computed in eight independent lanes, which is exact because `max` is
/// associative and commutative, and lets the loop vectorize.
#[inline(always)]
fn max_abs_lanes(x: &[f32]) -> (f32, bool) {
    let mut m = [0.0f32; 8];
    let mut nan = false;
    let chunks = x.chunks_exact(8);
    let tail = chunks.remainder();
    for c in chunks {
        for (m, &v) in m.iter_mut().zip(c) {
            *m = m.max(v.abs());
            nan |= v.is_nan();
        }
    }
    for &v in tail {
        m[0] = m[0].max(v.abs());
        nan |= v.is_nan();
    }
    (m.iter().fold(0.0f32, |a, &b| a.max(b)), nan)
}

/// Largest magnitude of `x`, NaN ignored (GGML's `if (amax < fabsf(v)) amax = fabsf(v)`).
#[inline(always)]
pub(crate) fn max_abs(x: &[f32]) -> f32 {
    max_abs_lanes(x).0
}

/// The first value of largest magnitude and that magnitude, `(max, amax)`, NaN ignored, both 0
/// when every value is 0 (GGML's `if (ax > amax) { amax = ax; max = x[i]; }` loop).
#[inline(always)]
pub(crate) fn signed_absmax(x: &[f32]) -> (f32, f32) {
    let amax = max_abs(x);
    if amax == 0.0 {
        return (0.0, 0.0);
    }
    let max = x.iter().copied().find(|v| v.abs() == amax).unwrap_or(0.0);
    (max, amax)
}

/// GGML's `amax = MAX(amax, fabsf(v))` over `x` from 0, with the C macro's NaN behaviour (a NaN
/// is kept until a later value replaces it).
#[inline(always)]
pub(crate) fn max_abs_macro(x: &[f32]) -> f32 {
    let (amax, nan) = max_abs_lanes(x);
    if !nan {
        return amax;
    }
    x.iter()
        .fold(0.0f32, |m, &v| if m > v.abs() { m } else { v.abs() })
}

/// `(min, max)` of `x` as GGML's `if (v < min) min = v; if (v > max) max = v;` loop from
/// `(FLT_MAX, -FLT_MAX)` computes them (NaN ignored, first of equal values kept).
#[inline(always)]
pub(crate) fn min_max(x: &[f32]) -> (f32, f32) {
    let sequential = || {
        let (mut min, mut max) = (f32::MAX, -f32::MAX);
        for &v in x {
            if v < min {
                min = v;
            }
            if v > max {
                max = v;
            }
        }
        (min, max)
    };
    if x.len() % 8 != 0 {
        return sequential();
    }
    // Eight independent lanes, then the lanes combined: exact except that, among values that
    // compare equal, another than the first may be kept. Only ±0 compare equal with different
    // bits, so a zero result is recomputed in order.
    let (mut lo, mut hi) = ([f32::MAX; 8], [-f32::MAX; 8]);
    for c in x.chunks_exact(8) {
        for k in 0..8 {
            lo[k] = if c[k] < lo[k] { c[k] } else { lo[k] };
            hi[k] = if c[k] > hi[k] { c[k] } else { hi[k] };
        }
    }
    let min = lo.iter().fold(f32::MAX, |m, &v| if v < m { v } else { m });
    let max = hi.iter().fold(-f32::MAX, |m, &v| if v > m { v } else { m });
    if min == 0.0 || max == 0.0 {
        return sequential();
    }
    (min, max)
}

/// Sum of squares, accumulated in order as GGML does.
#[inline(always)]
pub(crate) fn sum_squares(x: &[f32]) -> f32 {
    x.iter().fold(0.0, |acc, &v| acc + v * v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fp16_matches_half_crate_on_all_halves() {
        for h in 0..=u16::MAX {
            let a = fp16_to_fp32(h);
            let b = half::f16::from_bits(h).to_f32();
            if b.is_nan() {
                assert!(a.is_nan());
            } else {
                assert_eq!(a.to_bits(), b.to_bits(), "{h:#06x}");
                // Every finite half survives the round trip.
                assert_eq!(fp32_to_fp16(a), h, "{h:#06x}");
            }
        }
    }

    #[test]
    fn fp32_to_fp16_rounds_to_nearest_even() {
        let mut x = 1.0e-9f32;
        while x < 1.0e6 {
            for v in [x, -x, x * 1.000_123, x * 0.999_87] {
                assert_eq!(fp32_to_fp16(v), half::f16::from_f32(v).to_bits(), "{v:e}");
            }
            x *= 1.37;
        }
        assert_eq!(fp32_to_fp16(f32::NAN) & 0x7fff, 0x7e00);
        assert_eq!(fp32_to_fp16(1e10), 0x7c00);
    }

    #[test]
    fn nearest_int_ties_to_even() {
        assert_eq!(nearest_int(2.5), 2);
        assert_eq!(nearest_int(3.5), 4);
        assert_eq!(nearest_int(-2.5), -2);
        assert_eq!(nearest_int(-0.49), 0);
        assert_eq!(nearest_int(4_194_303.0), 4_194_303);
    }

    /// The lane-parallel reductions against GGML's sequential loops, on inputs with ties, signed
    /// zeros, NaN and infinities.
    #[test]
    fn reductions_match_sequential_loops() {
        let specials = [
            0.0,
            -0.0,
            f32::NAN,
            f32::INFINITY,
            -f32::INFINITY,
            1.5,
            -1.5,
            7.0,
        ];
        let mut seed = 12345u32;
        for case in 0..2000 {
            let n = [8, 16, 32, 13][case % 4];
            let x: Vec<f32> = (0..n)
                .map(|_| {
                    seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12345);
                    let r = seed >> 16;
                    if r % 5 == 0 {
                        specials[(r as usize / 5) % specials.len()]
                    } else {
                        (r % 7) as f32 - 3.0
                    }
                })
                .collect();
            // signed_absmax: `if (ax > amax) { amax = ax; max = x; }`
            let (mut max, mut amax) = (0.0f32, 0.0f32);
            for &v in &x {
                if v.abs() > amax {
                    amax = v.abs();
                    max = v;
                }
            }
            let got = signed_absmax(&x);
            assert_eq!(
                (got.0.to_bits(), got.1.to_bits()),
                (max.to_bits(), amax.to_bits())
            );
            // MAX(amax, fabsf(v))
            let m = x
                .iter()
                .fold(0.0f32, |m, &v| if m > v.abs() { m } else { v.abs() });
            assert_eq!(max_abs_macro(&x).to_bits(), m.to_bits(), "{x:?}");
            // min/max from (FLT_MAX, -FLT_MAX)
            let (mut lo, mut hi) = (f32::MAX, -f32::MAX);
            for &v in &x {
                if v < lo {
                    lo = v;
                }
                if v > hi {
                    hi = v;
                }
            }
            let (glo, ghi) = min_max(&x);
            assert_eq!(
                (glo.to_bits(), ghi.to_bits()),
                (lo.to_bits(), hi.to_bits()),
                "{x:?}"
            );
        }
    }

    #[test]
    fn c_conversions() {
        assert_eq!(trunc_i32(-1.9), -1);
        assert_eq!(trunc_i32(f32::NAN), i32::MIN);
        assert_eq!(trunc_i32(f32::INFINITY), i32::MIN);
        assert_eq!(trunc_i32(-2_147_483_648.0), i32::MIN);
        assert_eq!(lround(2.5), 3);
        assert_eq!(lround(-2.5), -3);
        assert_eq!(lround(f32::NAN), i64::MIN);
        assert_eq!(lround(3e9), 3_000_000_000);
        for x in [
            0.5f32,
            1.5,
            2.5,
            -0.5,
            -2.5,
            0.49999997,
            -7.7,
            1e7 + 1.0,
            8_388_609.0,
        ] {
            assert_eq!(round_i32(x), x.round() as i32, "{x}");
        }
        assert_eq!(round_i32(f32::INFINITY), i32::MIN);
        assert_eq!(round_i32(3e9), i32::MIN);
    }
}
