//! MXFP4 and NVFP4: 4-bit E2M1 floats. MXFP4 blocks of 32 share an E8M0 (power of two) scale;
//! NVFP4 blocks of 64 have four UE4M3 (unsigned 8-bit float) scales, one per 16 values.

use bytemuck::{Pod, Zeroable};

use super::block::{block_layout, Dequantize, QuantizeRef};
use super::common::{max_abs, trunc_i32};

/// E2M1 values, doubled so that they are integers (GGML's `kvalues_mxfp4`); scales are halved
/// to compensate.
const E2M1_X2: [i8; 16] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

/// Values per MXFP4 block.
const QK_MXFP4: usize = 32;
/// Values per NVFP4 block, and per NVFP4 scale.
const QK_NVFP4: usize = 64;
const QK_NVFP4_SUB: usize = 16;

/// One MXFP4 block: value = `2^(e − 127) · E2M1[index]`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockMxfp4 {
    /// E8M0 shared exponent.
    pub e: u8,
    /// Indices: value j in the low nibble of byte j, value j + 16 in the high nibble.
    pub qs: [u8; QK_MXFP4 / 2],
}

/// One NVFP4 block: value = `UE4M3(d[s]) · E2M1[index]` for sub-block `s` of 16.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockNvfp4 {
    /// UE4M3 scale of each sub-block of 16.
    pub d: [u8; QK_NVFP4 / QK_NVFP4_SUB],
    /// Indices: sub-block s in bytes `8s..8s+8`, value j in the low nibble of byte j, j + 8 high.
    pub qs: [u8; QK_NVFP4 / 2],
}

block_layout!(BlockMxfp4, values: QK_MXFP4, bytes: 17);
block_layout!(BlockNvfp4, values: QK_NVFP4, bytes: 36);

/// 2^k for k in the normal f32 exponent range.
#[inline(always)]
fn pow2(k: i32) -> f32 {
    f32::from_bits(((k + 127) as u32) << 23)
}

/// Half of an E8M0 scale, `2^(x − 128)` (GGML's `ggml_e8m0_to_fp32_half`).
#[inline(always)]
fn e8m0_to_fp32_half(x: u8) -> f32 {
    if x < 2 {
        f32::from_bits(0x0020_0000 << x)
    } else {
        f32::from_bits(((x - 1) as u32) << 23)
    }
}

/// Half of a UE4M3 scale (GGML's `ggml_ue4m3_to_fp32`; 0 and 0x7f decode to zero).
#[inline(always)]
fn ue4m3_to_fp32_half(x: u8) -> f32 {
    if x == 0 || x == 0x7f {
        return 0.0;
    }
    let exp = ((x >> 3) & 0xf) as i32;
    let man = (x & 0x7) as f32;
    let raw = if exp == 0 {
        man * pow2(-9)
    } else {
        (1.0 + man / 8.0) * pow2(exp - 7)
    };
    raw * 0.5
}

/// The UE4M3 code GGML chooses for a positive scale `x` (`ggml_fp32_to_ue4m3`: saturating at
/// 448, rounding the mantissa half up).
fn fp32_to_ue4m3(x: f32) -> u8 {
    if x.is_nan() || x <= 0.0 {
        return 0;
    }
    let x = if x > 448.0 { 448.0 } else { x };
    let bits = x.to_bits();
    let fp32_exp = ((bits >> 23) & 0xff) as i32 - 127;
    let fp32_man = ((bits >> 20) & 0x7) as i32;
    let mut exp = fp32_exp + 7;
    if exp <= 0 {
        let man = trunc_i32(x * 512.0 + 0.5).min(7);
        return if man < 1 { 0 } else { man as u8 };
    }
    if exp >= 15 {
        return 0x7e;
    }
    let mut man = fp32_man + ((bits >> 19) & 1) as i32;
    if man > 7 {
        man = 0;
        exp += 1;
        if exp >= 15 {
            return 0x7e;
        }
    }
    ((exp << 3) | man) as u8
}

/// For each value, the index of the E2M1 value nearest to it at scale `e` (the first one on
/// ties), as GGML's `best_index_mxfp4` picks it; computed for all values at once so that the
/// comparisons vectorize.
#[inline(always)]
fn best_indices<const N: usize>(x: &[f32; N], e: f32) -> [u8; N] {
    let mut best = [0u32; N];
    let mut best_err = [0.0f32; N];
    let v0 = E2M1_X2[0] as f32 * e;
    for j in 0..N {
        best_err[j] = (v0 - x[j]).abs();
    }
    for (i, &q) in E2M1_X2.iter().enumerate().skip(1) {
        let v = q as f32 * e;
        for j in 0..N {
            // Branch-free select: all-ones where this level is strictly better.
            let err = (v - x[j]).abs();
            let m = u32::from(err < best_err[j]).wrapping_neg();
            best_err[j] = f32::from_bits((best_err[j].to_bits() & !m) | (err.to_bits() & m));
            best[j] = (best[j] & !m) | (i as u32 & m);
        }
    }
    let mut out = [0u8; N];
    for (o, &b) in out.iter_mut().zip(&best) {
        *o = b as u8;
    }
    out
}

/// Indices of the `N` values of `x` at scale `d`, value j in the low nibble of byte j and value
/// `j + N/2` in the high nibble.
#[inline(always)]
fn pack_indices<const N: usize>(x: &[f32], d: f32, qs: &mut [u8]) {
    let Some(x) = x.first_chunk::<N>() else {
        return;
    };
    let idx = best_indices(x, d);
    let (lo, hi) = idx.split_at(N / 2);
    for ((q, &a), &b) in qs.iter_mut().zip(lo).zip(hi) {
        *q = a | (b << 4);
    }
}

#[inline(always)]
fn unpack_indices(qs: &[u8], d: f32, y: &mut [f32]) {
    let half = qs.len();
    for (j, &q) in qs.iter().enumerate() {
        y[j] = E2M1_X2[(q & 0xf) as usize] as f32 * d;
        y[j + half] = E2M1_X2[(q >> 4) as usize] as f32 * d;
    }
}

impl QuantizeRef for BlockMxfp4 {
    #[inline(always)]
    fn quantize_ref(x: &[f32], y: &mut Self) {
        let amax = max_abs(x);
        y.e = if amax > 0.0 {
            trunc_i32(amax.log2().floor() - 2.0 + 127.0) as u8
        } else {
            0
        };
        pack_indices::<QK_MXFP4>(x, e8m0_to_fp32_half(y.e), &mut y.qs);
    }
}

impl Dequantize for BlockMxfp4 {
    #[inline(always)]
    fn dequantize(&self, y: &mut [f32]) {
        unpack_indices(&self.qs, e8m0_to_fp32_half(self.e), y);
    }
}

impl QuantizeRef for BlockNvfp4 {
    #[inline(always)]
    fn quantize_ref(x: &[f32], y: &mut Self) {
        let subs = x
            .chunks_exact(QK_NVFP4_SUB)
            .zip(y.qs.chunks_exact_mut(QK_NVFP4_SUB / 2));
        for ((xb, qs), d) in subs.zip(y.d.iter_mut()) {
            *d = fp32_to_ue4m3(max_abs(xb) / 6.0);
            pack_indices::<QK_NVFP4_SUB>(xb, ue4m3_to_fp32_half(*d), qs);
        }
    }
}

impl Dequantize for BlockNvfp4 {
    #[inline(always)]
    fn dequantize(&self, y: &mut [f32]) {
        let subs = y
            .chunks_exact_mut(QK_NVFP4_SUB)
            .zip(self.qs.chunks_exact(QK_NVFP4_SUB / 2));
        for ((yb, qs), &d) in subs.zip(&self.d) {
            unpack_indices(qs, ue4m3_to_fp32_half(d), yb);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ue4m3_round_trip() {
        // Every code below exponent 15 decodes to a value that encodes back to itself; GGML's
        // encoder sends everything from 2^8 up to its saturation code 0x7e (448).
        for code in 1u8..0x78 {
            let v = ue4m3_to_fp32_half(code) * 2.0;
            assert_eq!(fp32_to_ue4m3(v), code, "code {code:#04x} = {v}");
        }
        assert_eq!(fp32_to_ue4m3(256.0), 0x7e);
        assert_eq!(fp32_to_ue4m3(1e9), 0x7e);
        assert_eq!(fp32_to_ue4m3(-1.0), 0);
    }

    #[test]
    fn e8m0_half() {
        assert_eq!(e8m0_to_fp32_half(128), 1.0);
        assert_eq!(e8m0_to_fp32_half(0), 2f32.powi(-128));
        assert_eq!(e8m0_to_fp32_half(1), 2f32.powi(-127));
    }
}
