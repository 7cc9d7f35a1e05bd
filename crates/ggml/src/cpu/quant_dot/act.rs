//! Activations quantized to a dot type (Q8_0, Q8_1, Q8_K) for the integer dot kernels, bit for
//! bit what GGML's CPU quantizes them to on the same path (a unit test holds every path to it).
//!
//! The x86 path is GGML's x86 one (`ggml-cpu/arch/x86/quants.c`): Q8_0 and Q8_1 take the
//! levels as `v · (127 / amax)` rounded to nearest even (not the reference quantizer's
//! `roundf(v / d)`, which differs at about one value in a few thousand), Q8_K is the reference
//! (GGML's x86 Q8_K calls it: the same IEEE products `v · iscale` and magic-number
//! `nearest_int`); the magnitude maxima and integer sums in 256-bit registers. The portable
//! path computes the same (GGML's x86 formulas in plain code, not its generic quantizer's
//! `roundf(v / d)`), so that the paths (`GGML_CPU_FORCE`) differ only by the dot kernels'
//! float order, never by an activation level. A block holding a NaN or an infinity, or whose
//! inverse scale overflows (a maximum near the smallest normal), goes through the reference
//! quantizer instead.
//! (Quantizing is a small part of a MUL_MAT's work, so the AVX-512 path uses these 256-bit
//! routines as well.)

use crate::quants::{quantize_row_ref, BlockQ8K, BlockQ8_0, BlockQ8_1, PackedF16};
use crate::types::Type;

use super::Isa;

/// Quantizes `x` (whole blocks of `ty`, one of Q8_0, Q8_1, Q8_K) into `out` (`ty.row_size`
/// bytes of `x.len()` values) on path `isa`: the bytes [`quantize_row_ref`] writes.
///
/// # Panics
/// If `ty` is not a dot type or the lengths do not match (the planner sizes both).
pub(crate) fn quantize_act(ty: Type, isa: Isa, x: &[f32], out: &mut [u8]) {
    #[cfg(target_arch = "x86_64")]
    if isa >= Isa::Avx2 {
        let blocks = x.len() / ty.blck_size();
        assert_eq!(
            out.len(),
            blocks * ty.type_size(),
            "{ty} row of {}",
            x.len()
        );
        // SAFETY: `isa` is a path this CPU runs (AVX2, FMA and F16C at least); the lengths
        // are checked above (and `x` is whole blocks: the cast below and the chunks agree).
        unsafe {
            match ty {
                Type::Q8_0 => avx2::q8_0(x, bytemuck::cast_slice_mut(out)),
                Type::Q8_1 => avx2::q8_1(x, bytemuck::cast_slice_mut(out)),
                Type::Q8_K => avx2::q8_k(x, bytemuck::cast_slice_mut(out)),
                _ => panic!("{ty} is not a dot type"),
            }
        }
        return;
    }
    let _ = isa;
    match ty {
        Type::Q8_0 => {
            for (x, y) in x
                .chunks_exact(32)
                .zip(bytemuck::cast_slice_mut::<_, BlockQ8_0>(out))
            {
                match q8_levels(x, &mut y.qs) {
                    Some((d, _)) => y.d = PackedF16::from_f32(d),
                    None => reference(ty, x, y),
                }
            }
        }
        Type::Q8_1 => {
            for (x, y) in x
                .chunks_exact(32)
                .zip(bytemuck::cast_slice_mut::<_, BlockQ8_1>(out))
            {
                match q8_levels(x, &mut y.qs) {
                    Some((d, sum)) => {
                        y.d = PackedF16::from_f32(d);
                        y.s = PackedF16::from_f32(sum as f32 * d);
                    }
                    None => reference(ty, x, y),
                }
            }
        }
        _ => quantize_row_ref(ty, x, out).expect("a dot type's row of whole blocks"),
    }
}

/// GGML's x86 Q8_0/Q8_1 levels of a block of 32 in plain code: the scale `amax / 127`, the
/// levels `v · (127 / amax)` rounded to nearest even into `qs`, and their sum; `None` for a
/// block left to the reference (a non-finite value or inverse scale).
fn q8_levels(x: &[f32], qs: &mut [i8; 32]) -> Option<(f32, i32)> {
    if x.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let amax = x.iter().fold(0f32, |m, v| m.max(v.abs()));
    let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
    if !id.is_finite() {
        return None;
    }
    let mut sum = 0;
    for (q, v) in qs.iter_mut().zip(x) {
        *q = (v * id).round_ties_even() as i8;
        sum += *q as i32;
    }
    Some((amax / 127.0, sum))
}

/// One block through the reference quantizer (the fallback for non-finite values).
fn reference<B: bytemuck::Pod>(ty: Type, x: &[f32], y: &mut B) {
    quantize_row_ref(ty, x, bytemuck::bytes_of_mut(y)).expect("one whole block");
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::super::x86::hsum_i32;
    use super::{reference, BlockQ8K, BlockQ8_0, BlockQ8_1, Type};
    use crate::quants::PackedF16;
    use crate::QK_K;
    use std::arch::x86_64::*;

    /// The magnitudes of `v`, and whether any lane is a NaN or an infinity.
    #[inline(always)]
    unsafe fn abs_nonfinite(v: __m256) -> (__m256, __m256) {
        // SAFETY: register operations; the caller has AVX.
        unsafe {
            let a = _mm256_and_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fff_ffff)));
            (a, _mm256_cmp_ps::<_CMP_NLE_UQ>(a, _mm256_set1_ps(f32::MAX)))
        }
    }

    /// The largest lane of `v` (no NaN in it).
    #[inline(always)]
    unsafe fn hmax(v: __m256) -> f32 {
        // SAFETY: register operations; the caller has AVX.
        unsafe {
            let h = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
            let h = _mm_max_ps(h, _mm_movehl_ps(h, h));
            let h = _mm_max_ss(h, _mm_movehdup_ps(h));
            _mm_cvtss_f32(h)
        }
    }

    /// The reference's `nearest_int` in every lane (round half to even for |v| < 2^22, by the
    /// float magic number), then `min(127)`.
    #[inline(always)]
    unsafe fn nearest_min127(v: __m256) -> __m256i {
        // SAFETY: register operations; the caller has AVX2.
        unsafe {
            let m = _mm256_castps_si256(_mm256_add_ps(v, _mm256_set1_ps(12_582_912.0)));
            let q = _mm256_sub_epi32(
                _mm256_and_si256(m, _mm256_set1_epi32(0x007f_ffff)),
                _mm256_set1_epi32(0x0040_0000),
            );
            _mm256_min_epi32(q, _mm256_set1_epi32(127))
        }
    }

    /// Four registers of i32 levels in −128..=127 as 32 bytes in lane order at `out`.
    #[inline(always)]
    unsafe fn store_levels(q: [__m256i; 4], out: *mut i8) {
        // SAFETY: register operations and one 32-byte store the caller provides room for; the
        // caller has AVX2.
        unsafe {
            // packs interleaves 128-bit halves: (q0 lo, q1 lo, q0 hi, q1 hi), so the bytes
            // come out in the order 0 2 4 6 1 3 5 7 of eight groups of four, undone below.
            let w01 = _mm256_packs_epi32(q[0], q[1]);
            let w23 = _mm256_packs_epi32(q[2], q[3]);
            let b = _mm256_packs_epi16(w01, w23);
            let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
            _mm256_storeu_si256(out as *mut __m256i, _mm256_permutevar8x32_epi32(b, order));
        }
    }

    /// Q8_0's and Q8_1's shared part for a block of 32, as GGML's x86 `quantize_row_q8_0` /
    /// `_q8_1` compute it: the scale `amax / 127` and the levels `v · (127 / amax)` rounded to
    /// nearest even, stored into `qs`; `None` for the blocks left to the reference.
    #[inline(always)]
    unsafe fn q8_block(x: &[f32], qs: &mut [i8; 32]) -> Option<(f32, __m256i)> {
        debug_assert_eq!(x.len(), 32);
        // SAFETY: 32 readable values; 32 writable levels; the caller has AVX2.
        unsafe {
            // (plain loops, not closures: a closure would not inherit the caller's target
            // features, and the intrinsics in it would not be inlined)
            let mut v = [_mm256_setzero_ps(); 4];
            let mut m = _mm256_setzero_ps();
            let mut bad = _mm256_setzero_ps();
            for (i, v) in v.iter_mut().enumerate() {
                *v = _mm256_loadu_ps(x.as_ptr().add(8 * i));
                let (a, nf) = abs_nonfinite(*v);
                m = _mm256_max_ps(m, a);
                bad = _mm256_or_ps(bad, nf);
            }
            if _mm256_movemask_ps(bad) != 0 {
                return None;
            }
            let amax = hmax(m);
            let d = amax / 127.0;
            let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
            if !id.is_finite() {
                return None;
            }
            let idv = _mm256_set1_ps(id);
            let mut q = [_mm256_setzero_si256(); 4];
            for (q, v) in q.iter_mut().zip(v) {
                let r = _mm256_round_ps::<_MM_FROUND_TO_NEAREST_INT>(_mm256_mul_ps(v, idv));
                *q = _mm256_cvtps_epi32(r);
            }
            store_levels(q, qs.as_mut_ptr());
            let sum = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
            Some((d, sum))
        }
    }

    /// Q8_0 blocks of `x` into `out`.
    ///
    /// # Safety
    /// The CPU must have AVX2; `out` has `x.len() / 32` blocks.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn q8_0(x: &[f32], out: &mut [BlockQ8_0]) {
        for (x, y) in x.chunks_exact(32).zip(out) {
            // SAFETY: forwarded from the caller: a block of 32 values.
            match unsafe { q8_block(x, &mut y.qs) } {
                Some((d, _)) => y.d = PackedF16::from_f32(d),
                None => reference(Type::Q8_0, x, y),
            }
        }
    }

    /// Q8_1 blocks of `x` into `out`.
    ///
    /// # Safety
    /// The CPU must have AVX2; `out` has `x.len() / 32` blocks.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn q8_1(x: &[f32], out: &mut [BlockQ8_1]) {
        for (x, y) in x.chunks_exact(32).zip(out) {
            // SAFETY: forwarded from the caller: a block of 32 values.
            match unsafe { q8_block(x, &mut y.qs) } {
                Some((d, sum)) => {
                    y.d = PackedF16::from_f32(d);
                    // SAFETY: register operations; this function has AVX2.
                    let s = unsafe { hsum_i32(sum) };
                    y.s = PackedF16::from_f32(s as f32 * d);
                }
                None => reference(Type::Q8_1, x, y),
            }
        }
    }

    /// Q8_K super-blocks of `x` into `out`.
    ///
    /// # Safety
    /// The CPU must have AVX2; `out` has `x.len() / 256` blocks.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn q8_k(x: &[f32], out: &mut [BlockQ8K]) {
        for (x, y) in x.chunks_exact(QK_K).zip(out) {
            // SAFETY: forwarded from the caller: a block of 256 values.
            if !unsafe { q8_k_block(x, y) } {
                reference(Type::Q8_K, x, y);
            }
        }
    }

    /// One Q8_K super-block; false for the blocks left to the reference.
    #[inline(always)]
    unsafe fn q8_k_block(x: &[f32], y: &mut BlockQ8K) -> bool {
        // SAFETY: 256 readable values; the levels and sums of `y` are written in place; the
        // caller has AVX2.
        unsafe {
            let p = x.as_ptr();
            let mut m = _mm256_setzero_ps();
            let mut bad = _mm256_setzero_ps();
            for i in 0..QK_K / 8 {
                let (a, nf) = abs_nonfinite(_mm256_loadu_ps(p.add(8 * i)));
                m = _mm256_max_ps(m, a);
                bad = _mm256_or_ps(bad, nf);
            }
            if _mm256_movemask_ps(bad) != 0 {
                return false;
            }
            let amax = hmax(m);
            if amax == 0.0 {
                *y = bytemuck::Zeroable::zeroed();
                return true;
            }
            // the first value of largest magnitude, as the reference picks it
            let Some(&max) = x.iter().find(|v| v.abs() == amax) else {
                return false;
            };
            let iscale = -127.0 / max;
            if !iscale.is_finite() {
                return false;
            }
            let sv = _mm256_set1_ps(iscale);
            for g in 0..QK_K / 32 {
                let mut q = [_mm256_setzero_si256(); 4];
                for (i, q) in q.iter_mut().enumerate() {
                    *q = nearest_min127(_mm256_mul_ps(sv, _mm256_loadu_ps(p.add(32 * g + 8 * i))));
                }
                store_levels(q, y.qs.as_mut_ptr().add(32 * g));
                // groups of 16: registers 0 and 1, then 2 and 3
                for h in 0..2 {
                    let s = hsum_i32(_mm256_add_epi32(q[2 * h], q[2 * h + 1]));
                    y.bsums[2 * g + h].set(s as i16);
                }
            }
            y.d.set(1.0 / iscale);
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Blocks of `bs` values, by pattern: ties at every rounding step (half-integers under a
    /// maximum of 127, so the level spacing is 1), zeros, a NaN, maxima near the smallest
    /// normal, an infinity, negative zeros, plain values.
    fn hard_values(n: usize, seed: u32, bs: usize) -> Vec<f32> {
        let mut state = seed;
        let mut next = || {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            state >> 8
        };
        (0..n)
            .map(|i| {
                let (block, at) = (i / bs, i % bs);
                let r = next();
                match block % 8 {
                    0 if at == 0 => 127.0,
                    0 => (r % 255) as f32 - 126.5,
                    1 => 0.0,
                    2 => {
                        if at == 5 {
                            f32::NAN
                        } else {
                            1.0
                        }
                    }
                    3 => (r as f32 / (1 << 24) as f32 - 0.5) * 1e-39,
                    4 if at == 7 => f32::INFINITY,
                    5 => -0.0,
                    _ => (r as f32 / (1 << 24) as f32 - 0.5) * 3.0,
                }
            })
            .collect()
    }

    /// GGML's x86 Q8_0/Q8_1 quantizer, scalar: `d = amax/127`, levels `v · (127/amax)` to
    /// nearest even (Q8_1: `s = d · Σ levels`), over the reference's bytes, which it keeps
    /// for blocks with a non-finite value or inverse scale (as [`quantize_act`] does).
    fn ggml_x86(ty: Type, x: &[f32], out: &mut [u8]) {
        quantize_row_ref(ty, x, out).unwrap();
        let size = ty.type_size();
        for (x, y) in x.chunks_exact(32).zip(out.chunks_exact_mut(size)) {
            let amax = x.iter().fold(0f32, |m, v| m.max(v.abs()));
            let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
            if x.iter().any(|v| !v.is_finite()) || !id.is_finite() {
                continue;
            }
            let d = amax / 127.0;
            let q: Vec<i8> = x.iter().map(|v| (v * id).round_ties_even() as i8).collect();
            y[..2].copy_from_slice(&crate::types::f16::from_f32(d).to_le_bytes());
            let at = if ty == Type::Q8_1 {
                let s = d * q.iter().map(|&v| v as i32).sum::<i32>() as f32;
                y[2..4].copy_from_slice(&crate::types::f16::from_f32(s).to_le_bytes());
                4
            } else {
                2
            };
            y[at..].copy_from_slice(bytemuck::cast_slice(&q));
        }
    }

    /// Every path writes exactly the bytes of GGML's x86 quantizers for each dot type (the
    /// portable path too).
    #[test]
    fn every_path_matches_ggml_bit_for_bit() {
        let n = 8 * 256;
        for seed in [1, 2, 3] {
            for ty in [Type::Q8_0, Type::Q8_1, Type::Q8_K] {
                let mut x = hard_values(n, seed, ty.blck_size());
                if seed == 3 {
                    // plain values in every block, so the common case is covered throughout
                    x.iter_mut()
                        .enumerate()
                        .for_each(|(i, v)| *v = ((i * 37 % 101) as f32 - 50.0) * 0.013);
                }
                let bytes = ty.row_size(n as i64).unwrap();
                let mut reference = vec![0u8; bytes];
                quantize_row_ref(ty, &x, &mut reference).unwrap();
                let mut x86 = vec![0u8; bytes];
                match ty {
                    Type::Q8_K => x86.copy_from_slice(&reference),
                    _ => ggml_x86(ty, &x, &mut x86),
                }
                for isa in Isa::all_available() {
                    let mut got = vec![0xa5u8; bytes];
                    quantize_act(ty, isa, &x, &mut got);
                    assert!(got == x86, "{ty} on {isa:?}, seed {seed}");
                }
            }
        }
    }
}
