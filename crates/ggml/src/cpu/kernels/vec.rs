//! What the bandwidth-bound kernels share: [`wide_fn`], which compiles a kernel's loops once more
//! for each x86 ISA path (so the compiler vectorises them 8 or 16 lanes wide instead of the
//! baseline's 4) and runs the one [`isa`] chose; F16 row conversions with F16C; and the
//! element functions (SiLU, GELU, …) written without libm calls, so their loops vectorise.
//!
//! The wide copies are the same source as the portable loop and the compiler does not
//! contract `a * b + c` into FMAs, so every path gives the same bits.

#[cfg(target_arch = "x86_64")]
use crate::cpu::quant_dot::{isa, Isa};
use crate::ops::{GELU_COEF_A, GELU_QUICK_COEF, SQRT_2_OVER_PI};
use crate::types::f16;

/// Defines `fn NAME(args)`, which runs the `#[inline(always)]` function `BODY(args)`
/// compiled for the ISA path the CPU kernels take ([`isa`]): the body is inlined into one
/// copy per x86 path, each compiled with that path's features, so its loops (and the
/// element closure it is given, inlined into them) vectorise 8 or 16 lanes wide.
///
/// `wide_fn!(fn map<F: Fn(f32) -> f32>(n: &NodePtrs, p: &Params, f: F) = map_rows);`
macro_rules! wide_fn {
    ($(#[$m:meta])* fn $name:ident $(<$g:ident: $b:path>)? ($($arg:ident: $ty:ty),*) = $body:path) => {
        $(#[$m])*
        #[inline(always)]
        fn $name $(<$g: $b>)? ($($arg: $ty),*) {
            #[cfg(target_arch = "x86_64")]
            {
                use $crate::cpu::quant_dot::{isa, Isa};
                /// The body compiled with AVX-512 (the CPU must have it).
                #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
                unsafe fn avx512 $(<$g: $b>)? ($($arg: $ty),*) {
                    $body($($arg),*)
                }
                /// The body compiled with AVX2 (the CPU must have it).
                #[target_feature(enable = "avx2,fma,f16c")]
                unsafe fn avx2 $(<$g: $b>)? ($($arg: $ty),*) {
                    $body($($arg),*)
                }
                match isa() {
                    // SAFETY: `isa` returns a path only when this CPU has its features.
                    Isa::Avx512 => return unsafe { avx512($($arg),*) },
                    // SAFETY: as above.
                    Isa::Avx2 => return unsafe { avx2($($arg),*) },
                    Isa::Scalar => {}
                }
            }
            $body($($arg),*)
        }
    };
}
pub(crate) use wide_fn;

/// Converts `n` packed F16 values at `src` into packed F32 values at `dst`.
///
/// # Safety
/// `src` must hold `n` F16 values and `dst` room for `n` F32 values (any alignment); they must
/// not overlap.
pub(crate) unsafe fn f16_to_f32_row(src: *const u8, dst: *mut u8, n: usize) {
    // SAFETY: forwarded from the caller.
    unsafe { convert_row::<false>(src, dst, n) }
}

/// Converts `n` packed F32 values at `src` into packed F16 values at `dst` (round to nearest
/// even, as F16C and `f16::from_f32` do).
///
/// # Safety
/// `src` must hold `n` F32 values and `dst` room for `n` F16 values (any alignment); they must
/// not overlap.
pub(crate) unsafe fn f32_to_f16_row(src: *const u8, dst: *mut u8, n: usize) {
    // SAFETY: forwarded from the caller.
    unsafe { convert_row::<true>(src, dst, n) }
}

/// F32 → F16 (`TO_F16`) or F16 → F32 for `n` packed values: whole groups of 16 with
/// AVX-512 on its path, then of 8 with F16C where the ISA path has it, the rest one by one
/// (every way converts exactly, or rounds to nearest even, so the bits are the same).
///
/// # Safety
/// As [`f16_to_f32_row`] / [`f32_to_f16_row`].
#[inline(always)]
unsafe fn convert_row<const TO_F16: bool>(src: *const u8, dst: *mut u8, n: usize) {
    let mut done = 0;
    #[cfg(target_arch = "x86_64")]
    if isa() >= Isa::Avx2 {
        // SAFETY: the Avx512 path has AVX-512 F, the Avx2 path (and so it too) F16C;
        // forwarded from the caller.
        unsafe {
            if isa() == Isa::Avx512 {
                done = if TO_F16 {
                    x86::f32_to_f16_16(src, dst, n)
                } else {
                    x86::f16_to_f32_16(src, dst, n)
                };
            }
            done = if TO_F16 {
                x86::f32_to_f16(src, dst, done, n)
            } else {
                x86::f16_to_f32(src, dst, done, n)
            };
        }
    }
    for i in done..n {
        // SAFETY: forwarded from the caller; i < n.
        unsafe {
            if TO_F16 {
                let v = (src as *const f32).add(i).read_unaligned();
                (dst as *mut f16).add(i).write_unaligned(f16::from_f32(v));
            } else {
                let h = (src as *const f16).add(i).read_unaligned();
                (dst as *mut f32).add(i).write_unaligned(h.to_f32());
            }
        }
    }
}

/// log2(e), and ln 2 in two parts (`LN2_HI` the f32 nearest ln 2, `LN2_LO` the rest), so
/// that `x − n·ln 2` by two FMAs is exact enough for |n| ≤ 150.
const LOG2E: f32 = std::f32::consts::LOG2_E;
const LN2_HI: f32 = std::f32::consts::LN_2;
const LN2_LO: f32 = -1.904_654_3e-9;
/// The arguments are clamped to `[LO, HI]`: e^HI overflows to +∞ and e^LO rounds to 0,
/// and the clamp keeps ±∞ from making `x − n·ln 2` a NaN (NaN passes through).
const LO: f32 = -104.0;
const HI: f32 = 88.8;
/// e^r ≈ 1 + r·(C1 + r·(C2 + r·(C3 + r·(C4 + r·C5)))) on |r| ≤ ln 2 / 2: coefficients
/// from a Remez exchange for the least largest relative error with the constant term held
/// at 1 (9.5e-8 with these f32 values).
const C1: f32 = 0.999_999_7;
const C2: f32 = 0.499_991_5;
const C3: f32 = 0.166_676_36;
const C4: f32 = 0.041_897_93;
const C5: f32 = 0.008_290_315;

/// e^x as the AVX2 and AVX-512 paths compute it lane by lane, one element at a time, with
/// the same roundings: `n = round(x·log2 e)` (to even), `r = x − n·ln 2` by two fused
/// multiply-adds, the polynomial in Horner form by fused multiply-adds, and `2^n` applied in
/// two halves (the first product exact, the second rounding once, subnormal results too).
/// So SOFT_MAX gives the same bits on every path. `f32::mul_add` is one instruction where
/// the target has FMA (a libm call on x86 builds without it: correct, slower).
#[inline(always)]
pub(crate) fn exp_fma(x: f32) -> f32 {
    // 1.5·2^23: adding and subtracting it rounds to the nearest integer, ties to even.
    const ROUND: f32 = 12_582_912.0;
    let x = x.clamp(LO, HI);
    let n = (x * LOG2E + ROUND) - ROUND;
    let r = (-n).mul_add(LN2_HI, x);
    let r = (-n).mul_add(LN2_LO, r);
    let mut p = C5;
    for c in [C4, C3, C2, C1, 1.0] {
        p = p.mul_add(r, c);
    }
    // n is a whole number in [-150, 129] (NaN gives 0 here and a NaN p).
    let ni = n as i32;
    let n1 = ni >> 1;
    let s1 = f32::from_bits(((n1 + 127) as u32) << 23);
    let s2 = f32::from_bits(((ni - n1 + 127) as u32) << 23);
    p * s1 * s2
}

#[cfg(target_arch = "x86_64")]
// AVX-512 target features and intrinsics are stable since Rust 1.89, so these paths need 1.89
// while the workspace still declares 1.85 (as gemm's and quant_dot's AVX-512 paths).
#[allow(clippy::incompatible_msrv)]
mod x86 {
    use super::{C1, C2, C3, C4, C5, HI, LN2_HI, LN2_LO, LO, LOG2E};
    use std::arch::x86_64::*;

    /// AVX-512 conversion of the whole groups of 16 of `n` values; returns how many it
    /// converted.
    ///
    /// # Safety
    /// As [`super::f16_to_f32_row`], and the CPU must have AVX-512 F.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn f16_to_f32_16(src: *const u8, dst: *mut u8, n: usize) -> usize {
        let whole = n / 16 * 16;
        for i in (0..whole).step_by(16) {
            // SAFETY: i + 16 <= n values on both sides; unaligned loads and stores.
            unsafe {
                let h = _mm256_loadu_si256(src.add(2 * i) as *const __m256i);
                _mm512_storeu_ps(dst.add(4 * i) as *mut f32, _mm512_cvtph_ps(h));
            }
        }
        whole
    }

    /// AVX-512 conversion (round to nearest even) of the whole groups of 16 of `n` values;
    /// returns how many it converted.
    ///
    /// # Safety
    /// As [`super::f32_to_f16_row`], and the CPU must have AVX-512 F.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn f32_to_f16_16(src: *const u8, dst: *mut u8, n: usize) -> usize {
        let whole = n / 16 * 16;
        for i in (0..whole).step_by(16) {
            // SAFETY: i + 16 <= n values on both sides; unaligned loads and stores.
            unsafe {
                let v = _mm512_loadu_ps(src.add(4 * i) as *const f32);
                let h = _mm512_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(v);
                _mm256_storeu_si256(dst.add(2 * i) as *mut __m256i, h);
            }
        }
        whole
    }

    /// F16C conversion of values `start..` of `n` in whole groups of 8; returns where it
    /// stopped.
    ///
    /// # Safety
    /// As [`super::f16_to_f32_row`], and the CPU must have F16C and AVX.
    #[target_feature(enable = "avx,f16c")]
    pub(super) unsafe fn f16_to_f32(src: *const u8, dst: *mut u8, start: usize, n: usize) -> usize {
        let whole = start + (n - start) / 8 * 8;
        for i in (start..whole).step_by(8) {
            // SAFETY: i + 8 <= n values on both sides; unaligned loads and stores.
            unsafe {
                let h = _mm_loadu_si128(src.add(2 * i) as *const __m128i);
                _mm256_storeu_ps(dst.add(4 * i) as *mut f32, _mm256_cvtph_ps(h));
            }
        }
        whole
    }

    /// F16C conversion (round to nearest even) of values `start..` of `n` in whole groups of
    /// 8; returns where it stopped.
    ///
    /// # Safety
    /// As [`super::f32_to_f16_row`], and the CPU must have F16C and AVX.
    #[target_feature(enable = "avx,f16c")]
    pub(super) unsafe fn f32_to_f16(src: *const u8, dst: *mut u8, start: usize, n: usize) -> usize {
        let whole = start + (n - start) / 8 * 8;
        for i in (start..whole).step_by(8) {
            // SAFETY: i + 8 <= n values on both sides; unaligned loads and stores.
            unsafe {
                let v = _mm256_loadu_ps(src.add(4 * i) as *const f32);
                let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(v);
                _mm_storeu_si128(dst.add(2 * i) as *mut __m128i, h);
            }
        }
        whole
    }

    /// e^x in 16 lanes: `n = round(x·log2 e)`, `r = x − n·ln 2`, the polynomial, then
    /// `vscalefps` multiplies by 2^n (rounding subnormal results once, +∞ past the range).
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma")]
    fn exp_avx512(x: __m512) -> __m512 {
        // max/min return their second operand when either is NaN: x stays NaN.
        let x = _mm512_min_ps(_mm512_set1_ps(HI), _mm512_max_ps(_mm512_set1_ps(LO), x));
        let n = _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(
            _mm512_mul_ps(x, _mm512_set1_ps(LOG2E)),
        );
        let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_HI), x);
        let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_LO), r);
        let mut p = _mm512_set1_ps(C5);
        for c in [C4, C3, C2, C1, 1.0] {
            p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(c));
        }
        _mm512_scalef_ps(p, n)
    }

    /// e^x in 8 lanes: as [`exp_avx512`], with 2^n built in two halves of the exponent
    /// (`2^(n/2)·2^(n − n/2)`, each a normal number), so subnormal results round once and
    /// results past the range become +∞. Without `UPPER` the clamp at `HI` is left out, for
    /// callers whose arguments are never above 0 (SOFT_MAX's `x − max`), where it changes
    /// nothing: one constant fewer in AVX2's 16 registers, which the exponential's loop fills
    /// (1 thread, the F16-mask SOFT_MAX case: 9.3 → 12.9 GB/s median, ten alternations).
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn exp_avx2<const UPPER: bool>(x: __m256) -> __m256 {
        let x = _mm256_max_ps(_mm256_set1_ps(LO), x);
        let x = if UPPER {
            _mm256_min_ps(_mm256_set1_ps(HI), x)
        } else {
            x
        };
        let n = _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(
            _mm256_mul_ps(x, _mm256_set1_ps(LOG2E)),
        );
        let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(LN2_HI), x);
        let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(LN2_LO), r);
        let mut p = _mm256_set1_ps(C5);
        for c in [C4, C3, C2, C1, 1.0] {
            p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c));
        }
        // n is a whole number in [-150, 129] (NaN lanes give a NaN p anyway).
        let ni = _mm256_cvtps_epi32(n);
        let n1 = _mm256_srai_epi32::<1>(ni);
        let n2 = _mm256_sub_epi32(ni, n1);
        let bias = _mm256_set1_epi32(127);
        let s1 = _mm256_castsi256_ps(_mm256_slli_epi32::<23>(_mm256_add_epi32(n1, bias)));
        let s2 = _mm256_castsi256_ps(_mm256_slli_epi32::<23>(_mm256_add_epi32(n2, bias)));
        _mm256_mul_ps(_mm256_mul_ps(p, s1), s2)
    }

    /// `dst = f(x, g)` over `n` values 16 lanes at a time: whole vectors with plain loads
    /// and stores, the tail once under a mask (its lanes past `n` are zeros, neither read nor
    /// written). Each lane is computed the same way in both, so the bits do not depend on
    /// where a value falls. `g` is read only when `GATED` (`x` is passed in its place).
    ///
    /// # Safety
    /// `x`, `dst` (and `g` when `GATED`) must hold `n` F32 values (any alignment); `dst` may
    /// be `x` or `g` exactly, but must not overlap them otherwise. The caller has AVX-512 F.
    #[inline(always)]
    unsafe fn each16<const GATED: bool>(
        x: *const f32,
        g: *const f32,
        dst: *mut f32,
        n: usize,
        f: impl Fn(__m512, __m512) -> __m512,
    ) {
        let whole = n / 16 * 16;
        for i in (0..whole).step_by(16) {
            // SAFETY: i + 16 <= n values at x, g (when GATED) and dst; unaligned accesses.
            unsafe {
                let v = _mm512_loadu_ps(x.add(i));
                let gv = if GATED { _mm512_loadu_ps(g.add(i)) } else { v };
                _mm512_storeu_ps(dst.add(i), f(v, gv));
            }
        }
        if whole < n {
            let m: __mmask16 = (1 << (n - whole)) - 1;
            // SAFETY: the mask covers only the n - whole values left.
            unsafe {
                let v = _mm512_maskz_loadu_ps(m, x.add(whole));
                let gv = if GATED {
                    _mm512_maskz_loadu_ps(m, g.add(whole))
                } else {
                    v
                };
                _mm512_mask_storeu_ps(dst.add(whole), m, f(v, gv));
            }
        }
    }

    /// [`each16`] 8 lanes at a time with AVX2 (the tail under `vmaskmovps`).
    ///
    /// # Safety
    /// As [`each16`], the caller having AVX2.
    #[inline(always)]
    unsafe fn each8<const GATED: bool>(
        x: *const f32,
        g: *const f32,
        dst: *mut f32,
        n: usize,
        f: impl Fn(__m256, __m256) -> __m256,
    ) {
        let whole = n / 8 * 8;
        for i in (0..whole).step_by(8) {
            // SAFETY: i + 8 <= n values at x, g (when GATED) and dst; unaligned accesses.
            unsafe {
                let v = _mm256_loadu_ps(x.add(i));
                let gv = if GATED { _mm256_loadu_ps(g.add(i)) } else { v };
                _mm256_storeu_ps(dst.add(i), f(v, gv));
            }
        }
        if whole < n {
            let lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
            // Lanes below n - whole have their sign bit set: the ones loaded and stored.
            let m = _mm256_cmpgt_epi32(_mm256_set1_epi32((n - whole) as i32), lanes);
            // SAFETY: the mask covers only the n - whole values left.
            unsafe {
                let v = _mm256_maskload_ps(x.add(whole), m);
                let gv = if GATED {
                    _mm256_maskload_ps(g.add(whole), m)
                } else {
                    v
                };
                _mm256_maskstore_ps(dst.add(whole), m, f(v, gv));
            }
        }
    }

    /// `act(v)·g` (`·g` only when `GATED`) in 16 lanes, as [`super::act_row`] defines it.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma")]
    fn act16<const SIGMOID: bool, const GATED: bool>(v: __m512, g: __m512) -> __m512 {
        let one = _mm512_set1_ps(1.0);
        let e = exp_avx512(_mm512_sub_ps(_mm512_setzero_ps(), v));
        let y = _mm512_div_ps(if SIGMOID { one } else { v }, _mm512_add_ps(one, e));
        if GATED {
            _mm512_mul_ps(y, g)
        } else {
            y
        }
    }

    /// [`super::act_row`] 16 lanes at a time ([`each16`]; the exp and the division keep the
    /// vector ports busy, so the loop has no mask work).
    ///
    /// # Safety
    /// As [`super::act_row`], and the CPU must have AVX-512 F/BW/VL, AVX2 and FMA.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma")]
    pub(super) unsafe fn act_avx512<const SIGMOID: bool, const GATED: bool>(
        x: *const f32,
        g: *const f32,
        dst: *mut f32,
        n: usize,
    ) {
        // SAFETY: forwarded; the target has AVX-512 F.
        unsafe { each16::<GATED>(x, g, dst, n, |v, gv| act16::<SIGMOID, GATED>(v, gv)) }
    }

    /// [`super::lookup_row`]'s values of 16 lanes, as [`super::lookup`] computes one: F16
    /// rounding by `vcvtps2ph`, the entries gathered, GGML's F32 clamps by masks.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
    unsafe fn lookup16<const CLAMP: bool, const GATED: bool>(
        table: &[f32; 65536],
        v: __m512,
        g: __m512,
    ) -> __m512 {
        let h = _mm512_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(v);
        let idx = _mm512_cvtepu16_epi32(h);
        // SAFETY: every index is below 65536, the table's length.
        let mut t = unsafe { _mm512_i32gather_ps::<4>(idx, table.as_ptr()) };
        if CLAMP {
            let hi = _mm512_cmp_ps_mask::<_CMP_GE_OQ>(v, _mm512_set1_ps(10.0));
            t = _mm512_mask_mov_ps(t, hi, v);
        }
        if GATED {
            t = _mm512_mul_ps(t, g);
        }
        if CLAMP {
            let lo = _mm512_cmp_ps_mask::<_CMP_LE_OQ>(v, _mm512_set1_ps(-10.0));
            t = _mm512_maskz_mov_ps(!lo, t);
        }
        t
    }

    /// [`super::lookup_row`] 16 values at a time ([`each16`]).
    ///
    /// # Safety
    /// As [`super::lookup_row`], and the CPU must have AVX-512 F/BW/VL, AVX2, FMA and F16C.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
    pub(super) unsafe fn lookup_avx512<const CLAMP: bool, const GATED: bool>(
        table: &[f32; 65536],
        x: *const f32,
        g: *const f32,
        dst: *mut f32,
        n: usize,
    ) {
        // SAFETY: forwarded; the target has AVX-512 F (masked-off lanes look up entry 0).
        unsafe { each16::<GATED>(x, g, dst, n, |v, gv| lookup16::<CLAMP, GATED>(table, v, gv)) }
    }

    /// [`super::lookup_row`]'s values of 8 lanes, as [`lookup16`].
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn lookup8<const CLAMP: bool, const GATED: bool>(
        table: &[f32; 65536],
        v: __m256,
        g: __m256,
    ) -> __m256 {
        let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(v);
        let idx = _mm256_cvtepu16_epi32(h);
        // SAFETY: every index is below 65536, the table's length.
        let mut t = unsafe { _mm256_i32gather_ps::<4>(table.as_ptr(), idx) };
        if CLAMP {
            let hi = _mm256_cmp_ps::<_CMP_GE_OQ>(v, _mm256_set1_ps(10.0));
            t = _mm256_blendv_ps(t, v, hi);
        }
        if GATED {
            t = _mm256_mul_ps(t, g);
        }
        if CLAMP {
            let lo = _mm256_cmp_ps::<_CMP_LE_OQ>(v, _mm256_set1_ps(-10.0));
            t = _mm256_andnot_ps(lo, t);
        }
        t
    }

    /// [`super::lookup_row`] 8 values at a time ([`each8`]).
    ///
    /// # Safety
    /// As [`super::lookup_row`], and the CPU must have AVX2, FMA and F16C.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn lookup_avx2<const CLAMP: bool, const GATED: bool>(
        table: &[f32; 65536],
        x: *const f32,
        g: *const f32,
        dst: *mut f32,
        n: usize,
    ) {
        // SAFETY: forwarded; the target has AVX2 (masked-off lanes look up entry 0).
        unsafe { each8::<GATED>(x, g, dst, n, |v, gv| lookup8::<CLAMP, GATED>(table, v, gv)) }
    }

    /// [`super::logits_max`] 16 lanes at a time, the F16 mask widened by `vcvtph2ps`, the
    /// tail once under a mask (masked-off lanes are neither read nor written, and stay −∞ in
    /// the maximum).
    ///
    /// # Safety
    /// As [`super::logits_max`]; the CPU must have AVX-512 F/BW/VL and AVX2.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
    pub(super) unsafe fn logits_max_avx512(
        x: *const f32,
        mask: super::MaskRow,
        scale: f32,
        slope: f32,
        out: *mut f32,
        n: usize,
    ) -> f32 {
        let (sc, sl) = (_mm512_set1_ps(scale), _mm512_set1_ps(slope));
        let mut max = _mm512_set1_ps(f32::NEG_INFINITY);
        // SAFETY (of both closures' loads): the caller's rows hold n values; `k` covers only
        // indices below n.
        let logit = |i: usize, k: __mmask16| unsafe {
            let v = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x.add(i)), sc);
            match mask {
                super::MaskRow::None => v,
                super::MaskRow::F32(m) => {
                    _mm512_add_ps(v, _mm512_mul_ps(sl, _mm512_maskz_loadu_ps(k, m.add(i))))
                }
                super::MaskRow::F16(m) => {
                    let h = _mm256_maskz_loadu_epi16(k, m.add(i) as *const i16);
                    _mm512_add_ps(v, _mm512_mul_ps(sl, _mm512_cvtph_ps(h)))
                }
            }
        };
        let whole = n / 16 * 16;
        for i in (0..whole).step_by(16) {
            let v = logit(i, !0);
            // SAFETY: i + 16 <= n values at out.
            unsafe { _mm512_storeu_ps(out.add(i), v) };
            // the second operand when either is NaN: NaN logits are ignored
            max = _mm512_max_ps(v, max);
        }
        if whole < n {
            let k: __mmask16 = (1 << (n - whole)) - 1;
            let v = logit(whole, k);
            // SAFETY: the mask covers only the n - whole values left.
            unsafe { _mm512_mask_storeu_ps(out.add(whole), k, v) };
            max = _mm512_mask_max_ps(max, k, v, max);
        }
        _mm512_reduce_max_ps(max)
    }

    /// [`super::logits_max`] 8 lanes at a time, the F16 mask widened by F16C; the last
    /// `n mod 8` values one by one (as the portable path).
    ///
    /// # Safety
    /// As [`super::logits_max`]; the CPU must have AVX2 and F16C.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn logits_max_avx2(
        x: *const f32,
        mask: super::MaskRow,
        scale: f32,
        slope: f32,
        out: *mut f32,
        n: usize,
    ) -> f32 {
        let (sc, sl) = (_mm256_set1_ps(scale), _mm256_set1_ps(slope));
        let mut max = _mm256_set1_ps(f32::NEG_INFINITY);
        let whole = n / 8 * 8;
        for i in (0..whole).step_by(8) {
            // SAFETY: i + 8 <= n values in every row; unaligned accesses.
            unsafe {
                let v = _mm256_mul_ps(_mm256_loadu_ps(x.add(i)), sc);
                let v = match mask {
                    super::MaskRow::None => v,
                    super::MaskRow::F32(m) => {
                        _mm256_add_ps(v, _mm256_mul_ps(sl, _mm256_loadu_ps(m.add(i))))
                    }
                    super::MaskRow::F16(m) => {
                        let h = _mm_loadu_si128(m.add(i) as *const __m128i);
                        _mm256_add_ps(v, _mm256_mul_ps(sl, _mm256_cvtph_ps(h)))
                    }
                };
                _mm256_storeu_ps(out.add(i), v);
                max = _mm256_max_ps(v, max);
            }
        }
        let mut lanes = [0f32; 8];
        // SAFETY: eight f32 values to a local array.
        unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), max) };
        // SAFETY: forwarded: the values from `whole` on.
        let tail = unsafe {
            super::logits_max_portable(
                x.add(whole),
                mask.offset(whole),
                scale,
                slope,
                out.add(whole),
                n - whole,
            )
        };
        lanes.iter().fold(tail, |m, &v| if v > m { v } else { m })
    }

    /// [`super::exp_shifted`] 16 lanes at a time, the tail once under a mask; the values go
    /// to sixteen f64 lanes in two vectors (element `i` to lane `i` mod 16, the tail's from
    /// lane 0; masked-off lanes add 0) added pairwise at the end: `sum_f64`'s order.
    ///
    /// # Safety
    /// `x` must hold `n` F32 values (any alignment); the CPU must have AVX-512 F/BW/VL, AVX2
    /// and FMA.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma")]
    pub(super) unsafe fn exp_shifted_avx512(x: *mut f32, n: usize, max: f32) -> f64 {
        let m = _mm512_set1_ps(max);
        let mut sum = [_mm512_setzero_pd(); 2];
        let mut add = |e: __m512| {
            let lo = _mm512_cvtps_pd(_mm512_castps512_ps256(e));
            let hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(
                _mm512_castps_pd(e),
            )));
            sum[0] = _mm512_add_pd(sum[0], lo);
            sum[1] = _mm512_add_pd(sum[1], hi);
        };
        let whole = n / 16 * 16;
        for i in (0..whole).step_by(16) {
            // SAFETY: i + 16 <= n values at x; unaligned accesses.
            unsafe {
                let e = exp_avx512(_mm512_sub_ps(_mm512_loadu_ps(x.add(i)), m));
                _mm512_storeu_ps(x.add(i), e);
                add(e);
            }
        }
        if whole < n {
            let k: __mmask16 = (1 << (n - whole)) - 1;
            // SAFETY: the mask covers only the n - whole values left; masked-off lanes are
            // neither read nor written, and count as 0 in the sum.
            unsafe {
                let e = exp_avx512(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x.add(whole)), m));
                _mm512_mask_storeu_ps(x.add(whole), k, e);
                add(_mm512_maskz_mov_ps(k, e));
            }
        }
        // Lanes l + 8, l + 4, l + 2, l + 1 onto lane l in turn.
        let s = _mm512_add_pd(sum[0], sum[1]);
        let s = _mm256_add_pd(_mm512_castpd512_pd256(s), _mm512_extractf64x4_pd::<1>(s));
        let s = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd::<1>(s));
        _mm_cvtsd_f64(_mm_add_pd(s, _mm_unpackhi_pd(s, s)))
    }

    /// [`super::exp_shifted`] 16 values at a time in two vectors of 8, the tail in two
    /// masked ones; the values go to sixteen f64 lanes in four vectors (element `i` to lane
    /// `i` mod 16, the tail's from lane 0; masked-off lanes add 0) added pairwise at the end:
    /// `sum_f64`'s order.
    ///
    /// # Safety
    /// `x` must hold `n` F32 values (any alignment); the CPU must have AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn exp_shifted_avx2(x: *mut f32, n: usize, max: f32) -> f64 {
        let m = _mm256_set1_ps(max);
        let mut sum = [_mm256_setzero_pd(); 4];
        // The 8 values of lanes 8·half .. 8·half + 8.
        let mut add = |half: usize, e: __m256| {
            let lo = _mm256_cvtps_pd(_mm256_castps256_ps128(e));
            let hi = _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(e));
            sum[2 * half] = _mm256_add_pd(sum[2 * half], lo);
            sum[2 * half + 1] = _mm256_add_pd(sum[2 * half + 1], hi);
        };
        let whole = n / 16 * 16;
        for i in (0..whole).step_by(16) {
            for half in 0..2 {
                let at = i + 8 * half;
                // SAFETY: at + 8 <= n values at x; unaligned accesses.
                unsafe {
                    let e = exp_avx2::<false>(_mm256_sub_ps(_mm256_loadu_ps(x.add(at)), m));
                    _mm256_storeu_ps(x.add(at), e);
                    add(half, e);
                }
            }
        }
        let lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        for half in 0..2 {
            let at = whole + 8 * half;
            if at >= n {
                break;
            }
            // Lanes below the values left have their sign bit set: the ones loaded and stored.
            let k = _mm256_cmpgt_epi32(_mm256_set1_epi32((n - at).min(8) as i32), lanes);
            // SAFETY: the mask covers only values below n; masked-off lanes are neither read
            // nor written, and count as 0 in the sum.
            unsafe {
                let e = exp_avx2::<false>(_mm256_sub_ps(_mm256_maskload_ps(x.add(at), k), m));
                _mm256_maskstore_ps(x.add(at), k, e);
                add(half, _mm256_and_ps(e, _mm256_castsi256_ps(k)));
            }
        }
        // Lanes l + 8, l + 4, l + 2, l + 1 onto lane l in turn.
        let s = _mm256_add_pd(_mm256_add_pd(sum[0], sum[2]), _mm256_add_pd(sum[1], sum[3]));
        let s = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd::<1>(s));
        _mm_cvtsd_f64(_mm_add_pd(s, _mm_unpackhi_pd(s, s)))
    }

    /// `act(v)·g` (`·g` only when `GATED`) in 8 lanes, as [`super::act_row`] defines it.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn act8<const SIGMOID: bool, const GATED: bool>(v: __m256, g: __m256) -> __m256 {
        let one = _mm256_set1_ps(1.0);
        let e = exp_avx2::<true>(_mm256_sub_ps(_mm256_setzero_ps(), v));
        let y = _mm256_div_ps(if SIGMOID { one } else { v }, _mm256_add_ps(one, e));
        if GATED {
            _mm256_mul_ps(y, g)
        } else {
            y
        }
    }

    /// [`super::act_row`] 8 lanes at a time ([`each8`]).
    ///
    /// # Safety
    /// As [`super::act_row`], and the CPU must have AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn act_avx2<const SIGMOID: bool, const GATED: bool>(
        x: *const f32,
        g: *const f32,
        dst: *mut f32,
        n: usize,
    ) {
        // SAFETY: forwarded; the target has AVX2.
        unsafe { each8::<GATED>(x, g, dst, n, |v, gv| act8::<SIGMOID, GATED>(v, gv)) }
    }
}

/// `dst[i] = act(x[i])·g[i]` for `n` packed F32 values (`·g[i]` only when `GATED`), where
/// `act` is the sigmoid when `SIGMOID`, else SiLU. The AVX-512 and AVX2 paths evaluate e^x
/// with FMAs (a degree-5 polynomial after reduction by ln 2, scaled by `vscalefps` or by
/// building 2^n), 16 or 8 lanes at a time with masked tails, so they may differ from the
/// portable path ([`silu`], [`sigmoid`], with [`exp_f32`]) in the last bits.
///
/// # Safety
/// `x`, `dst` (and `g` when `GATED`) must hold `n` F32 values (any alignment); `dst` may be
/// `x` or `g` exactly, but must not overlap them otherwise.
#[inline]
pub(crate) unsafe fn act_row<const SIGMOID: bool, const GATED: bool>(
    x: *const f32,
    g: *const f32,
    dst: *mut f32,
    n: usize,
) {
    #[cfg(target_arch = "x86_64")]
    match isa() {
        // SAFETY: `isa` returns a path only when this CPU has its features; forwarded.
        Isa::Avx512 => return unsafe { x86::act_avx512::<SIGMOID, GATED>(x, g, dst, n) },
        // SAFETY: as above.
        Isa::Avx2 => return unsafe { x86::act_avx2::<SIGMOID, GATED>(x, g, dst, n) },
        Isa::Scalar => {}
    }
    // SAFETY: forwarded from the caller.
    unsafe { act_portable::<SIGMOID, GATED>(x, g, dst, n) }
}

/// `dst[i] = table[f16(x[i])]` (`·g[i]` when `GATED`) for `n` packed F32 values, `table` one
/// of [`GeluTable`]'s: `x` rounded to F16 (to nearest even) picks the entry, and with `CLAMP`
/// GGML's F32 GELU clamps apply (0 at or below −10, `x` at or above 10). The AVX-512 and AVX2
/// paths round with F16C and gather 16 or 8 entries at a time (the tail under a mask); the
/// portable path looks up one value at a time. Every path gives the same bits.
///
/// # Safety
/// `x`, `dst` (and `g` when `GATED`) must hold `n` F32 values (any alignment); `dst` may be
/// `x` or `g` exactly, but must not overlap them otherwise.
#[inline]
pub(crate) unsafe fn lookup_row<const CLAMP: bool, const GATED: bool>(
    table: &[f32; 65536],
    x: *const f32,
    g: *const f32,
    dst: *mut f32,
    n: usize,
) {
    #[cfg(target_arch = "x86_64")]
    match isa() {
        // SAFETY: `isa` returns a path only when this CPU has its features; forwarded.
        Isa::Avx512 => return unsafe { x86::lookup_avx512::<CLAMP, GATED>(table, x, g, dst, n) },
        // SAFETY: as above.
        Isa::Avx2 => return unsafe { x86::lookup_avx2::<CLAMP, GATED>(table, x, g, dst, n) },
        Isa::Scalar => {}
    }
    // SAFETY: forwarded from the caller.
    unsafe { lookup_portable::<CLAMP, GATED>(table, x, g, dst, n) }
}

/// [`lookup_row`]'s portable path: [`lookup`] value by value.
///
/// # Safety
/// As [`lookup_row`].
#[inline(always)]
unsafe fn lookup_portable<const CLAMP: bool, const GATED: bool>(
    table: &[f32; 65536],
    x: *const f32,
    g: *const f32,
    dst: *mut f32,
    n: usize,
) {
    for i in 0..n {
        // SAFETY: forwarded from the caller; i < n, each value read before it is written.
        unsafe {
            let v = x.add(i).read_unaligned();
            let gv = if GATED {
                g.add(i).read_unaligned()
            } else {
                1.0
            };
            dst.add(i)
                .write_unaligned(lookup::<CLAMP, GATED>(table, v, gv));
        }
    }
}

/// One value of [`lookup_row`]'s portable path (`·g` when `GATED`): with `CLAMP`, `x` at or
/// above 10 instead of the entry, and 0 at or below −10 whatever `g` is (GGML's F32 GEGLU).
#[inline(always)]
pub(crate) fn lookup<const CLAMP: bool, const GATED: bool>(
    table: &[f32; 65536],
    x: f32,
    g: f32,
) -> f32 {
    let t = table[f16_bits(x) as usize];
    let t = if CLAMP && x >= 10.0 { x } else { t };
    let y = if GATED { t * g } else { t };
    if CLAMP && x <= -10.0 {
        0.0
    } else {
        y
    }
}

/// A SOFT_MAX mask row as [`logits_max`] reads it: none, or `n` F32 or F16 values.
#[derive(Clone, Copy)]
pub(crate) enum MaskRow {
    /// No mask.
    None,
    /// F32 values.
    F32(*const f32),
    /// F16 values (their bits).
    F16(*const u16),
}

impl MaskRow {
    /// The same row from element `i` on.
    ///
    /// # Safety
    /// `i` must be within the row (or one past its end).
    unsafe fn offset(self, i: usize) -> MaskRow {
        // SAFETY: forwarded.
        unsafe {
            match self {
                MaskRow::None => MaskRow::None,
                MaskRow::F32(m) => MaskRow::F32(m.add(i)),
                MaskRow::F16(m) => MaskRow::F16(m.add(i)),
            }
        }
    }
}

/// SOFT_MAX's logits `out[i] = x[i]·scale + slope·mask[i]` (GGML's roundings: the two
/// products, then their sum; `x[i]·scale` without a mask) in one pass, the F16 mask widened
/// where it is read, returning their largest (−∞ for none; NaN logits ignored).
/// Every path gives the same values (the widening is exact; no fused operation).
///
/// # Safety
/// `x`, `out` and the mask's row must hold `out.len()` values; `out` must not overlap them.
#[inline]
pub(crate) unsafe fn logits_max(
    x: *const f32,
    mask: MaskRow,
    scale: f32,
    slope: f32,
    out: &mut [f32],
) -> f32 {
    let (o, n) = (out.as_mut_ptr(), out.len());
    #[cfg(target_arch = "x86_64")]
    match isa() {
        // SAFETY: `isa` returns a path only when this CPU has its features; forwarded.
        Isa::Avx512 => return unsafe { x86::logits_max_avx512(x, mask, scale, slope, o, n) },
        // SAFETY: as above.
        Isa::Avx2 => return unsafe { x86::logits_max_avx2(x, mask, scale, slope, o, n) },
        Isa::Scalar => {}
    }
    // SAFETY: forwarded.
    unsafe { logits_max_portable(x, mask, scale, slope, o, n) }
}

/// [`logits_max`] element by element.
///
/// # Safety
/// As [`logits_max`], with `n` values at `out`.
#[inline(always)]
unsafe fn logits_max_portable(
    x: *const f32,
    mask: MaskRow,
    scale: f32,
    slope: f32,
    out: *mut f32,
    n: usize,
) -> f32 {
    let mut max = f32::NEG_INFINITY;
    for i in 0..n {
        // SAFETY: forwarded; i < n.
        let v = unsafe {
            let v = x.add(i).read_unaligned() * scale;
            let v = match mask {
                MaskRow::None => v,
                MaskRow::F32(m) => v + slope * m.add(i).read_unaligned(),
                MaskRow::F16(m) => v + slope * f16::from_bits(m.add(i).read_unaligned()).to_f32(),
            };
            out.add(i).write(v);
            v
        };
        max = if v > max { v } else { max };
    }
    max
}

/// `x[i] = e^(x[i] − max)` over a row by [`exp_fma`], returning the sum of the results in f64
/// in [`sum_f64`](super::sum_f64)'s order (SOFT_MAX's numerator and denominator). The AVX-512
/// and AVX2 paths compute the same roundings 16 or 8 lanes at a time (the tail under a mask),
/// so every path gives the same bits.
#[inline]
pub(crate) fn exp_shifted(x: &mut [f32], max: f32) -> f64 {
    #[cfg(target_arch = "x86_64")]
    match isa() {
        // SAFETY: `isa` returns a path only when this CPU has its features; the pointer
        // holds x.len() values.
        Isa::Avx512 => return unsafe { x86::exp_shifted_avx512(x.as_mut_ptr(), x.len(), max) },
        // SAFETY: as above.
        Isa::Avx2 => return unsafe { x86::exp_shifted_avx2(x.as_mut_ptr(), x.len(), max) },
        Isa::Scalar => {}
    }
    for v in x.iter_mut() {
        *v = exp_fma(*v - max);
    }
    super::sum_f64(x, |v| v)
}

/// [`act_row`]'s portable path: [`sigmoid`] or [`silu`] element by element.
///
/// # Safety
/// As [`act_row`].
#[inline(always)]
unsafe fn act_portable<const SIGMOID: bool, const GATED: bool>(
    x: *const f32,
    g: *const f32,
    dst: *mut f32,
    n: usize,
) {
    for i in 0..n {
        // SAFETY: forwarded from the caller; i < n, each value read before it is written.
        unsafe {
            let v = x.add(i).read_unaligned();
            let y = if SIGMOID { sigmoid(v) } else { silu(v) };
            let y = if GATED {
                y * g.add(i).read_unaligned()
            } else {
                y
            };
            dst.add(i).write_unaligned(y);
        }
    }
}

/// e^x in f32 without a libm call or data-dependent branches, so loops over it vectorise
/// (the portable paths of the activations). `x = n·ln 2 + r` with `|r| ≤ ln 2 / 2` (ln 2 in
/// two parts so `r` is exact), e^r by its Taylor series to degree 7 (truncation error below
/// 5e-9 relative), and 2^n applied in two halves so that subnormal results round once.
/// Within 3 ulp of e^x for normal results; 0 below −104, +∞ above 88.73, NaN for NaN.
#[inline(always)]
pub(crate) fn exp_f32(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    // ln 2 = LN2_HI + LN2_LO, LN2_HI with few mantissa bits so n·LN2_HI is exact.
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // 1.5·2^23: adding and subtracting it rounds to the nearest integer.
    const ROUND: f32 = 12_582_912.0;
    let xc = x.clamp(-104.0, 88.8);
    let t = xc * LOG2E + ROUND;
    let n = t - ROUND;
    // t lies in [2^23, 2^24), where the float's low mantissa bits are the integer n itself
    // (no saturating float-to-int conversion, which would not vectorise).
    let ni = t.to_bits() as i32 - ROUND.to_bits() as i32;
    let r = (xc - n * LN2_HI) - n * LN2_LO;
    // Horner form of 1 + r + r²/2! + … + r⁷/7!.
    let mut p = 1.0 / 5040.0;
    for c in [
        1.0 / 720.0,
        1.0 / 120.0,
        1.0 / 24.0,
        1.0 / 6.0,
        0.5,
        1.0,
        1.0,
    ] {
        p = p * r + c;
    }
    let n1 = ni >> 1;
    let s1 = f32::from_bits(((n1 + 127) as u32) << 23);
    let s2 = f32::from_bits(((ni - n1 + 127) as u32) << 23);
    let y = p * s1 * s2;
    if x < -104.0 {
        0.0
    } else if x > 88.73 {
        f32::INFINITY
    } else {
        y
    }
}

/// σ(x) = 1/(1 + e^−x) with [`exp_f32`].
#[inline(always)]
pub(crate) fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + exp_f32(-x))
}

/// SiLU, x·σ(x), as x/(1 + e^−x) with [`exp_f32`].
#[inline(always)]
pub(crate) fn silu(x: f32) -> f32 {
    x / (1.0 + exp_f32(-x))
}

/// tanh(x) = 1 − 2/(e^2x + 1) with [`exp_f32`] (absolute error below 2e-7; ±1 beyond ±44).
#[inline(always)]
pub(crate) fn tanh(x: f32) -> f32 {
    1.0 - 2.0 / (exp_f32(2.0 * x) + 1.0)
}

/// GELU's tanh form, `0.5·x·(1 + tanh(√(2/π)·x·(1 + 0.044715·x²)))`, with [`tanh`] (GGML's
/// CPU computes BF16 GELU so; F32 and F16 through [`GeluTable`]).
#[inline(always)]
pub(crate) fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + tanh(SQRT_2_OVER_PI * x * (1.0 + GELU_COEF_A * x * x)))
}

/// GELU's quick form, `x·σ(1.702·x)` (BF16; F32 and F16 through [`GeluTable`]).
#[inline(always)]
pub(crate) fn gelu_quick(x: f32) -> f32 {
    x * (1.0 / (1.0 + exp_f32(GELU_QUICK_COEF * x)))
}

/// The F16 bits of `x`, rounded to nearest even as F16C and `f16::from_f32` round (NaN gives
/// a quiet NaN), without branches, so that loops of it vectorise.
#[inline(always)]
pub(crate) fn f16_bits(x: f32) -> u16 {
    let u = x.to_bits();
    let sign = (u >> 16) & 0x8000;
    let a = u & 0x7fff_ffff;
    // Normal results: rebias the exponent, round the 13 dropped bits to nearest even; past
    // 65504 (and for infinity) the sum reaches 0x7c00 or more, infinity.
    // (Wrapping: below 2⁻¹⁴ this value is not used.)
    let r = a.wrapping_sub(0x3800_0000);
    let normal = (r.wrapping_add(0x0fff + ((r >> 13) & 1)) >> 13).min(0x7c00);
    // Subnormal results (|x| < 2⁻¹⁴): adding 0.5, whose ULP is F16's 2⁻²⁴ quantum, rounds
    // |x| to a multiple of it, to nearest even, in the low bits.
    let sub = (f32::from_bits(a) + 0.5).to_bits() - 0x3f00_0000;
    let h = if a < 0x3880_0000 { sub } else { normal };
    (sign | if a > 0x7f80_0000 { 0x7e00 } else { h }) as u16
}

/// GGML's CPU tables of GELU and of its quick form (`GGML_GELU_FP16`, `GGML_GELU_QUICK_FP16`,
/// on by default): for each of the 65536 F16 values `h`, the F16 rounding of the function at
/// `h` as GGML computes it (libm's `tanhf`/`expf`, and the FMA its compiler makes of
/// `1 + 0.044715·x·x`), kept as f32 so that the lookups can be vector gathers. GGML's F32 and
/// F16 kernels of GELU, GELU_QUICK, GEGLU and GEGLU_QUICK read these at `x` rounded to F16;
/// built once, on first use.
pub(crate) struct GeluTable {
    gelu: Box<[f32; 65536]>,
    quick: Box<[f32; 65536]>,
}

impl GeluTable {
    /// The tables, built on first use.
    pub(crate) fn get() -> &'static GeluTable {
        static TABLE: std::sync::OnceLock<GeluTable> = std::sync::OnceLock::new();
        TABLE.get_or_init(|| {
            let build = |f: fn(f32) -> f32| {
                let mut t = Box::new([0f32; 65536]);
                for (b, v) in (0..=u16::MAX).zip(t.iter_mut()) {
                    *v = f16::from_f32(f(f16::from_bits(b).to_f32())).to_f32();
                }
                t
            };
            GeluTable {
                gelu: build(|x| {
                    let inner = SQRT_2_OVER_PI * x * (GELU_COEF_A * x).mul_add(x, 1.0);
                    0.5 * x * (1.0 + inner.tanh())
                }),
                quick: build(|x| x * (1.0 / (1.0 + (GELU_QUICK_COEF * x).exp()))),
            }
        })
    }

    /// The GELU table (indexed by F16 bits), for [`lookup_row`].
    pub(crate) fn gelu_table(&self) -> &[f32; 65536] {
        &self.gelu
    }

    /// The GELU_QUICK table (indexed by F16 bits), for [`lookup_row`].
    pub(crate) fn quick_table(&self) -> &[f32; 65536] {
        &self.quick
    }

    /// GELU of an F16 value (or of `x` rounded to F16): the table entry, without GGML's F32
    /// clamps (its F16 kernels have none).
    #[inline(always)]
    pub(crate) fn gelu_f16(&self, x: f32) -> f32 {
        lookup::<false, false>(&self.gelu, x, 1.0)
    }

    /// GELU_QUICK as GGML's F32 and F16 kernels compute it: the table at `x` rounded to F16,
    /// with no clamps (so NaN at −∞ and below −65520, where F16 rounds `x` to −∞, and +∞
    /// from 65520 up).
    #[inline(always)]
    pub(crate) fn quick(&self, x: f32) -> f32 {
        lookup::<false, false>(&self.quick, x, 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::UnaryOp;

    /// The x86 SIMD paths this CPU runs, named, each with its kernels: `avx2`'s, `avx512`'s.
    #[cfg(target_arch = "x86_64")]
    fn simd_paths<T>(avx2: T, avx512: T) -> Vec<(&'static str, T)> {
        let mut paths = Vec::new();
        if Isa::Avx2.available() {
            paths.push(("avx2", avx2));
        }
        if Isa::Avx512.available() {
            paths.push(("avx512", avx512));
        }
        paths
    }

    /// The F16C row conversions give the bits the portable ones give, tails included.
    #[test]
    fn f16_rows_match_the_portable_conversion() {
        let xs: Vec<f32> = (0..1037)
            .map(|i| ((i * 7919 % 2003) as f32 - 1001.0) * 0.37)
            .chain([0.0, -0.0, 65504.0, 1e6, -1e6, 1e-8, f32::INFINITY])
            .collect();
        // every split into groups of 16, of 8 and single values, and the whole row
        for n in (0..=40).chain([xs.len()]) {
            let xs = &xs[xs.len() - n..];
            let mut h = vec![0u8; n * 2];
            let mut back = vec![0f32; n];
            // SAFETY: the buffers hold n values of each type.
            unsafe {
                f32_to_f16_row(xs.as_ptr() as *const u8, h.as_mut_ptr(), n);
                f16_to_f32_row(h.as_ptr(), back.as_mut_ptr() as *mut u8, n);
            }
            for (i, &x) in xs.iter().enumerate() {
                let want = f16::from_f32(x);
                let got = f16::from_le_bytes([h[2 * i], h[2 * i + 1]]);
                assert_eq!(got.to_bits(), want.to_bits(), "f16 of {x} (length {n})");
                assert_eq!(back[i].to_bits(), want.to_f32().to_bits(), "f32 of {want}");
            }
        }
    }

    /// Every path of [`act_row`] (the portable loop, and the AVX2 and AVX-512 FMA exp where
    /// this CPU has them) against SiLU, sigmoid and SwiGLU in f64 over [−100, 100] (a length
    /// that is not a whole number of vectors, so the masked tails are checked too): within
    /// 4e-7 relative (measured: 2.2e-7 on AVX-512 and AVX2, 1.5e-7 portable) or 1e-36 absolute
    /// (SiLU below −88.7, where `1 + e^−x` overflows on every
    /// path, is −0 for at most 5e-37); the limits and NaN exact.
    #[test]
    fn act_rows_match_f64_on_every_path() {
        type Row = unsafe fn(*const f32, *const f32, *mut f32, usize);
        let mut paths: Vec<(&str, [Row; 3])> = vec![(
            "portable",
            [
                act_portable::<true, false>,
                act_portable::<false, false>,
                act_portable::<false, true>,
            ],
        )];
        #[cfg(target_arch = "x86_64")]
        paths.extend(simd_paths(
            [
                x86::act_avx2::<true, false>,
                x86::act_avx2::<false, false>,
                x86::act_avx2::<false, true>,
            ],
            [
                x86::act_avx512::<true, false>,
                x86::act_avx512::<false, false>,
                x86::act_avx512::<false, true>,
            ],
        ));
        let mut x: Vec<f32> = (0..20_003).map(|i| -100.0 + i as f32 * 0.01).collect();
        x.extend([
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            0.0,
            -0.0,
            1e-30,
            -1e-30,
        ]);
        let g: Vec<f32> = (0..x.len()).map(|i| 0.5 + (i % 7) as f32 * 0.25).collect();
        for (name, rows) in paths {
            let mut worst = 0f64;
            for (k, row) in rows.into_iter().enumerate() {
                let mut y = vec![0f32; x.len()];
                // SAFETY: the three vectors hold x.len() values; the path's features are
                // present (checked above).
                unsafe { row(x.as_ptr(), g.as_ptr(), y.as_mut_ptr(), x.len()) };
                for (i, (&xi, &yi)) in x.iter().zip(&y).enumerate() {
                    let v = xi as f64;
                    let s = 1.0 / (1.0 + (-v).exp());
                    let want = match k {
                        0 => s,
                        1 => v * s,
                        _ => v * s * g[i] as f64,
                    };
                    let got = yi as f64;
                    if want.is_nan() || !want.is_finite() || want == 0.0 {
                        let same = (got.is_nan() && want.is_nan()) || got == want;
                        assert!(same, "{name} {k}: f({xi}) = {got}, want {want}");
                        continue;
                    }
                    let err = (got - want).abs();
                    if err > 1e-36 {
                        worst = worst.max(err / want.abs());
                    }
                    assert!(
                        err <= 4e-7 * want.abs() || err <= 1e-36,
                        "{name} {k}: f({xi}) = {got}, want {want}"
                    );
                }
            }
            eprintln!("act_row {name}: largest relative error {worst:.2e}");
        }
    }

    /// exp_f32 against f64's exp: within 3 ulp over the whole range, exact at the edges.
    #[test]
    fn exp_f32_is_accurate() {
        let mut x = -110.0f32;
        while x < 90.0 {
            let got = exp_f32(x) as f64;
            let want = (x as f64).exp();
            let want32 = want as f32;
            if want32.is_infinite() {
                assert!(got.is_infinite(), "exp({x}) = {got}, want inf");
            } else if want32 < f32::MIN_POSITIVE {
                // Subnormal results: within a couple of the smallest steps.
                assert!(
                    (got - want).abs() <= 3.0 * 1.5e-45,
                    "exp({x}) = {got}, want {want}"
                );
            } else {
                let ulp = (want32.to_bits() + 1) as f64;
                let ulp = f32::from_bits(ulp as u32) as f64 - want32 as f64;
                assert!(
                    (got - want).abs() <= 3.0 * ulp,
                    "exp({x}) = {got}, want {want}"
                );
            }
            x += 0.0137;
        }
        assert_eq!(exp_f32(0.0), 1.0);
        assert_eq!(exp_f32(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp_f32(f32::INFINITY), f32::INFINITY);
        assert!(exp_f32(f32::NAN).is_nan());
    }

    /// [`exp_fma`] against f64's exp over its whole range: within 2 ulp of e^x where the
    /// result is normal, within one step of the subnormals' spacing below, 0 below −104
    /// (and for −∞), NaN for NaN.
    #[test]
    fn exp_fma_is_accurate() {
        let mut x = -110.0f32;
        while x <= 0.5 {
            let got = exp_fma(x);
            let want = (x as f64).exp();
            let ulp = if want < f32::MIN_POSITIVE as f64 {
                f64::from(f32::from_bits(1))
            } else {
                let w = want as f32;
                f64::from(f32::from_bits(w.to_bits() + 1) - w)
            };
            assert!(
                (got as f64 - want).abs() <= 2.0 * ulp,
                "exp_fma({x}) = {got:e}, want {want:e}"
            );
            x += 0.000_613;
        }
        assert_eq!(exp_fma(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp_fma(-104.5), 0.0);
        assert_eq!(exp_fma(0.0), 1.0);
        assert!(exp_fma(f32::NAN).is_nan());
    }

    /// Every path of [`exp_shifted`] gives the portable path's bits ([`exp_fma`] element by
    /// element, [`sum_f64`](super::super::sum_f64)'s order), for every tail length and down
    /// to where e^x is subnormal or 0 (−∞ among them); the sum is within 1e-6 of f64's.
    #[test]
    fn exp_shifted_gives_the_same_bits_on_every_path() {
        type Row = unsafe fn(*mut f32, usize, f32) -> f64;
        let portable: Row = |x, n, max| {
            // SAFETY: the caller passes a vector of n values.
            let row = unsafe { std::slice::from_raw_parts_mut(x, n) };
            for v in row.iter_mut() {
                *v = exp_fma(*v - max);
            }
            super::super::sum_f64(row, |v| v)
        };
        let mut paths: Vec<(&str, Row)> = vec![("portable", portable)];
        #[cfg(target_arch = "x86_64")]
        paths.extend(simd_paths::<Row>(
            x86::exp_shifted_avx2,
            x86::exp_shifted_avx512,
        ));
        let lengths = (0..=40).chain([45, 4099]);
        for n in lengths {
            let x: Vec<f32> = (0..n)
                .map(|i| match i % 11 {
                    3 => f32::NEG_INFINITY,
                    5 => -100.0 - (i % 7) as f32,
                    _ => (i * 7919 % 2003) as f32 * -0.0517,
                })
                .collect();
            let max = 3.5f32;
            let mut want = x.clone();
            // SAFETY: want holds n values.
            let want_sum = unsafe { portable(want.as_mut_ptr(), n, max) };
            let f64_sum: f64 = x.iter().map(|&v| ((v - max) as f64).exp()).sum();
            assert!(
                (want_sum - f64_sum).abs() <= 1e-6 * f64_sum,
                "n={n}: {want_sum}"
            );
            for &(name, row) in &paths {
                let mut y = x.clone();
                // SAFETY: y holds n values; the path's features are present (simd_paths).
                let sum = unsafe { row(y.as_mut_ptr(), n, max) };
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&y), bits(&want), "{name}, n={n}: values");
                assert_eq!(sum.to_bits(), want_sum.to_bits(), "{name}, n={n}: sum");
            }
        }
    }

    /// On every path [`act_row`] gives each value the bits it gets alone (a call of one
    /// element, which the masked tail computes): whole vectors and the tail agree, so a
    /// value's result does not depend on the row length or its place in the row.
    #[test]
    fn act_rows_agree_with_single_elements() {
        let x: Vec<f32> = (0..1003)
            .map(|i| ((i * 7919 % 2003) as f32 - 1001.0) * 0.05)
            .chain([
                f32::INFINITY,
                f32::NEG_INFINITY,
                f32::NAN,
                -0.0,
                100.0,
                -100.0,
            ])
            .collect();
        let g: Vec<f32> = (0..x.len()).map(|i| 0.25 + (i % 5) as f32 * 0.5).collect();
        type Row = unsafe fn(*const f32, *const f32, *mut f32, usize);
        let rows: [Row; 3] = [
            act_row::<true, false>,
            act_row::<false, false>,
            act_row::<false, true>,
        ];
        for (k, row) in rows.into_iter().enumerate() {
            let mut whole = vec![0f32; x.len()];
            // SAFETY: the vectors hold x.len() values.
            unsafe { row(x.as_ptr(), g.as_ptr(), whole.as_mut_ptr(), x.len()) };
            for i in 0..x.len() {
                let mut one = 0f32;
                // SAFETY: one value at each pointer.
                unsafe { row(&x[i], &g[i], &mut one, 1) };
                assert_eq!(whole[i].to_bits(), one.to_bits(), "{k}: f({})", x[i]);
            }
        }
    }

    /// The libm-free element functions stay within 2e-6 (relative, or absolute near 0) of the
    /// libm forms in [`UnaryOp::eval`].
    #[test]
    fn element_functions_match_libm() {
        type Element = fn(f32) -> f32;
        let table: [(UnaryOp, Element); 5] = [
            (UnaryOp::Sigmoid, sigmoid),
            (UnaryOp::Silu, silu),
            (UnaryOp::Tanh, tanh),
            (UnaryOp::Gelu, gelu),
            (UnaryOp::GeluQuick, gelu_quick),
        ];
        for (op, f) in table {
            let mut x = -60.0f32;
            while x < 60.0 {
                let (got, want) = (f(x), op.eval(x));
                let err = (got - want).abs() / want.abs().max(1.0);
                assert!(err < 2e-6, "{op:?}({x}) = {got}, want {want}");
                x += 0.0123;
            }
        }
    }

    /// Every path of [`logits_max`] writes each logit as `x·scale + slope·mask` computed
    /// alone in f32 (the two products, then their sum; the F16 mask widened exactly) and
    /// returns the largest, NaNs ignored (−∞ for none), for every tail length, without a
    /// mask and with F32 and F16 masks holding −∞.
    #[test]
    fn logits_max_gives_each_logit_and_the_largest_on_every_path() {
        type Row = unsafe fn(*const f32, MaskRow, f32, f32, *mut f32, usize) -> f32;
        let portable: Row = logits_max_portable;
        let mut paths: Vec<(&str, Row)> = vec![("portable", portable)];
        #[cfg(target_arch = "x86_64")]
        paths.extend(simd_paths::<Row>(
            x86::logits_max_avx2,
            x86::logits_max_avx512,
        ));
        let (scale, slope) = (0.125f32, 0.7f32);
        for n in (0..=40).chain([4099]) {
            let x: Vec<f32> = (0..n)
                .map(|i| match i % 13 {
                    4 if n > 20 => f32::NAN,
                    _ => ((i * 7919 % 2003) as f32 - 1001.0) * 0.37,
                })
                .collect();
            let m32: Vec<f32> = (0..n)
                .map(|i| match i % 7 {
                    2 => f32::NEG_INFINITY,
                    _ => ((i * 31 % 97) as f32 - 48.0) * 0.11,
                })
                .collect();
            let m16: Vec<u16> = m32.iter().map(|&v| f16::from_f32(v).to_bits()).collect();
            let masks = [
                (MaskRow::None, None),
                (MaskRow::F32(m32.as_ptr()), Some(m32.clone())),
                (
                    MaskRow::F16(m16.as_ptr()),
                    Some(m16.iter().map(|&h| f16::from_bits(h).to_f32()).collect()),
                ),
            ];
            for (mask, values) in masks {
                let want: Vec<f32> = (0..n)
                    .map(|i| match &values {
                        None => x[i] * scale,
                        Some(m) => x[i] * scale + slope * m[i],
                    })
                    .collect();
                let want_max = want
                    .iter()
                    .filter(|v| !v.is_nan())
                    .fold(f32::NEG_INFINITY, |a, &b| a.max(b));
                for &(name, row) in &paths {
                    let mut out = vec![0f32; n];
                    // SAFETY: every row holds n values; the path's features are present.
                    let max = unsafe { row(x.as_ptr(), mask, scale, slope, out.as_mut_ptr(), n) };
                    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&out), bits(&want), "{name}, n={n}: logits");
                    assert_eq!(max.to_bits(), want_max.to_bits(), "{name}, n={n}: max");
                }
            }
        }
    }

    /// The branch-free F16 rounding gives `f16::from_f32`'s bits (NaN: a quiet NaN of the same
    /// sign) over a sweep of every 241st f32 bit pattern and the edges of each F16 range.
    #[test]
    fn f16_bits_round_as_f16c() {
        let edges = [
            0u32,
            1,
            0x3300_0000,
            0x3300_0001,
            0x3380_0000,
            0x387f_e000,
            0x387f_f000,
            0x387f_ffff,
            0x3880_0000,
            0x3f80_1000,
            0x3f80_3000,
            0x477f_e000,
            0x477f_efff,
            0x477f_f000,
            0x7f7f_ffff,
            0x7f80_0000,
            0x7f80_0001,
            0x7fc0_0000,
            0x7fff_ffff,
        ];
        let sweep = (0..=u32::MAX / 241).map(|i| i * 241);
        for u in sweep.chain(edges).flat_map(|u| [u, u | 0x8000_0000]) {
            let x = f32::from_bits(u);
            let (got, want) = (f16_bits(x), f16::from_f32(x));
            if want.is_nan() {
                assert_eq!(got, 0x7e00 | (want.to_bits() & 0x8000), "{u:#x}");
            } else {
                assert_eq!(got, want.to_bits(), "{u:#x}");
            }
        }
    }

    /// Every path of [`lookup_row`] gives each value [`lookup`]'s bits, with and without the
    /// clamps and the gate, over values around the clamps, F16's range, ±∞ and NaN, gates of
    /// ±∞ and NaN (0 at or below −10 whatever the gate), and lengths with tails.
    #[test]
    fn lookup_rows_match_the_scalar_lookup_on_every_path() {
        type Row = unsafe fn(&[f32; 65536], *const f32, *const f32, *mut f32, usize);
        let mut paths: Vec<(&str, [Row; 4])> = vec![(
            "portable",
            [
                lookup_portable::<false, false>,
                lookup_portable::<true, false>,
                lookup_portable::<false, true>,
                lookup_portable::<true, true>,
            ],
        )];
        #[cfg(target_arch = "x86_64")]
        paths.extend(simd_paths(
            [
                x86::lookup_avx2::<false, false>,
                x86::lookup_avx2::<true, false>,
                x86::lookup_avx2::<false, true>,
                x86::lookup_avx2::<true, true>,
            ],
            [
                x86::lookup_avx512::<false, false>,
                x86::lookup_avx512::<true, false>,
                x86::lookup_avx512::<false, true>,
                x86::lookup_avx512::<true, true>,
            ],
        ));
        let special = [
            -10.0,
            -10.000_001,
            -9.999_999,
            10.0,
            9.999_999,
            65504.0,
            65520.0,
            -65520.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            -0.0,
        ];
        let x: Vec<f32> = (0..2003)
            .map(|i| ((i * 7919 % 2003) as f32 - 1001.0) * 0.013)
            .chain(special)
            .collect();
        let g: Vec<f32> = (0..x.len())
            .map(|i| match i % 13 {
                0 => f32::INFINITY,
                1 => f32::NAN,
                _ => 0.5 + (i % 5) as f32 * 0.25,
            })
            .collect();
        let t = GeluTable::get();
        for (name, rows) in paths {
            for (k, row) in rows.into_iter().enumerate() {
                let (clamp, gated) = (k % 2 == 1, k >= 2);
                let table = if clamp {
                    t.gelu_table()
                } else {
                    t.quick_table()
                };
                for n in [x.len(), 1, 7, 17, 40] {
                    let mut y = vec![0f32; n];
                    // SAFETY: x and g hold at least n values, y n; the path's features are
                    // present (checked above).
                    unsafe { row(table, x.as_ptr(), g.as_ptr(), y.as_mut_ptr(), n) };
                    for i in 0..n {
                        let want = match (clamp, gated) {
                            (false, false) => lookup::<false, false>(table, x[i], g[i]),
                            (true, false) => lookup::<true, false>(table, x[i], g[i]),
                            (false, true) => lookup::<false, true>(table, x[i], g[i]),
                            (true, true) => lookup::<true, true>(table, x[i], g[i]),
                        };
                        let same =
                            y[i].to_bits() == want.to_bits() || (y[i].is_nan() && want.is_nan());
                        assert!(
                            same,
                            "{name} {k}: f({}, {}) = {}, want {want}",
                            x[i], g[i], y[i]
                        );
                    }
                }
            }
        }
    }

    /// The tables hold GGML's values: spot checks against the exact function rounded to F16,
    /// GGML's clamps of F32 GELU, and GELU_QUICK's NaN and infinity where F16 overflows.
    #[test]
    fn gelu_tables_as_ggml() {
        let t = GeluTable::get();
        let gelu_f32 = |x| lookup::<true, false>(t.gelu_table(), x, 1.0);
        for x in [-9.99f32, -3.7, -0.3, 0.0, 0.25, 1.1, 7.9, 9.99] {
            let h = f16::from_f32(x).to_f32() as f64;
            let g = 0.5
                * h
                * (1.0
                    + ((2.0 / std::f64::consts::PI).sqrt() * h * (1.0 + 0.044715 * h * h)).tanh());
            let q = h / (1.0 + (-1.702 * h).exp());
            assert_eq!(gelu_f32(x), f16::from_f64(g).to_f32(), "gelu({x})");
            assert_eq!(t.quick(x), f16::from_f64(q).to_f32(), "gelu_quick({x})");
        }
        assert_eq!(gelu_f32(-10.0).to_bits(), 0);
        assert_eq!(t.gelu_f16(-10.0).to_bits(), (-0.0f32).to_bits());
        assert_eq!((gelu_f32(10.0), gelu_f32(1e30)), (10.0, 1e30));
        assert_eq!(t.gelu_f16(65504.0), 65504.0);
        assert!(t.quick(-65520.0).is_nan() && t.quick(f32::NEG_INFINITY).is_nan());
        assert_eq!(t.quick(65520.0), f32::INFINITY);
        assert_eq!(t.quick(-60000.0).to_bits(), (-0.0f32).to_bits());
        assert!(gelu_f32(f32::NAN).is_nan() && t.quick(f32::NAN).is_nan());
    }
}
