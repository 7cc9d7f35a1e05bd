//! The arithmetic of FLASH_ATTN_EXT, written once over a [`Build`]: the GGML CPU build whose
//! roundings a path reproduces (portable C, AVX2, AVX-512, AVX-512 with native FP16). Every
//! function here is `#[inline(always)]`, so that inside the `#[target_feature]` entry points
//! of `mod.rs` it is compiled with those features (fused multiply-adds, wide vectors).

use crate::types::{bf16_to_f32, f32_to_bf16};

/// How `a·b + c` is computed.
pub(super) trait Fma {
    /// `a·b + c`.
    fn fma(a: f32, b: f32, c: f32) -> f32;
}

/// One rounding: the FMA instruction of GGML's SIMD builds (and GCC's contraction of scalar
/// `a*b + c`, which `-ffp-contract=fast`, GCC's default in GNU mode, allows).
pub(super) struct Fused;

/// Two roundings, product then sum: GGML's portable C build on a target without FMA.
pub(super) struct Unfused;

impl Fma for Fused {
    #[inline(always)]
    fn fma(a: f32, b: f32, c: f32) -> f32 {
        a.mul_add(b, c)
    }
}

impl Fma for Unfused {
    #[inline(always)]
    fn fma(a: f32, b: f32, c: f32) -> f32 {
        a * b + c
    }
}

/// Which `expf` the tiled path's softmax uses.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Exp {
    /// The C library's `expf`, one value at a time (GGML without SIMD).
    Libm,
    /// GGML's 8-lane `ggml_v_expf` (AVX2 with FMA).
    Avx2,
    /// GGML's 16-lane `ggml_v_expf` (AVX-512 F and DQ: `scalef` for the power of two).
    Avx512,
}

/// A GGML CPU build: the parameters of its vector routines that decide rounding.
pub(super) trait Build {
    /// Fused or separate multiply-add.
    type F: Fma;
    /// Lanes of each of the four partial sums of `ggml_vec_dot_f16` / `_f32` (0: no SIMD,
    /// one f64 sum over the products).
    const DOT_LANES: usize;
    /// Whether the dot product's last 8 lanes are folded with `hadd` (AVX2) instead of
    /// halving (AVX-512's `_mm512_reduce_add_ps`).
    const DOT_HADD: bool;
    /// The softmax's exponential, and its lanes (summed in f32, then added to an f64 sum).
    const EXP: Exp;
    /// Whether F16 vectors are native FP16 arithmetic (`__AVX512FP16__`): `ggml_vec_mad_f16`
    /// and `ggml_vec_scale_f16` then round their scalar to F16 and the result once, over
    /// whole steps of 128 values.
    const HALF_NATIVE: bool;
    /// `c[i][j] += Σ_k a[i][k]·b[k][j]`, each element one chain of [`Fma::fma`] in order of
    /// `k` (GGML's `simd_gemm`), for `shape = [m, n, k]`: `m` rows, `n` columns, depth `k`;
    /// each matrix is given with its leading dimension.
    fn gemm(c: (&mut [f32], usize), a: (&[f32], usize), b: (&[f32], usize), shape: [usize; 3]);
}

/// Declares a [`Build`].
macro_rules! build {
    ($(#[$doc:meta])* $name:ident, $f:ty, $lanes:expr, $hadd:expr, $exp:expr, $half:expr, $rm:expr, $cb:expr) => {
        $(#[$doc])*
        pub(super) struct $name;
        impl Build for $name {
            type F = $f;
            const DOT_LANES: usize = $lanes;
            const DOT_HADD: bool = $hadd;
            const EXP: Exp = $exp;
            const HALF_NATIVE: bool = $half;
            #[inline(always)]
            fn gemm(c: (&mut [f32], usize), a: (&[f32], usize), b: (&[f32], usize), shape: [usize; 3]) {
                gemm::<$f, $rm, $cb>(c, a, b, shape)
            }
        }
    };
}

build!(
    /// GGML built without SIMD.
    Portable, Unfused, 0, false, Exp::Libm, false, 4, 16
);
build!(
    /// GGML built for AVX2 and FMA.
    Avx2, Fused, 8, true, Exp::Avx2, false, 6, 16
);
build!(
    /// GGML built for AVX-512 without FP16.
    Avx512, Fused, 16, false, Exp::Avx512, false, 6, 64
);
build!(
    /// GGML built for AVX-512 with FP16 (`-march=native` on CPUs that have it).
    Avx512Fp16, Fused, 16, false, Exp::Avx512, true, 6, 64
);

/// `c += a·b` (see [`Build::gemm`]) with micro tiles of up to `RM` rows by `CB` columns
/// (`RM × CB` accumulators, the `CB` values of `b` of each step loaded once for the rows);
/// columns past the last whole `CB` one output at a time.
#[inline(always)]
fn gemm<F: Fma, const RM: usize, const CB: usize>(
    (c, ldc): (&mut [f32], usize),
    (a, lda): (&[f32], usize),
    (b, ldb): (&[f32], usize),
    [m, n, k]: [usize; 3],
) {
    // the row counts `micro` is instantiated for
    const { assert!(RM >= 1 && RM <= 6) };
    assert!(
        m == 0 || n == 0 || c.len() >= (m - 1) * ldc + n,
        "gemm: c too short"
    );
    assert!(
        m == 0 || k == 0 || a.len() >= (m - 1) * lda + k,
        "gemm: a too short"
    );
    assert!(
        k == 0 || n == 0 || b.len() >= (k - 1) * ldb + n,
        "gemm: b too short"
    );
    let whole = n / CB * CB;
    let mut i = 0;
    while i < m {
        let rows = RM.min(m - i);
        for j in (0..whole).step_by(CB) {
            // SAFETY: rows i..i + rows of c and a and the columns j..j + CB of c and b are
            // inside the slices (checked above: j + CB <= n).
            unsafe {
                let (cp, ap, bp) = (
                    c.as_mut_ptr().add(i * ldc + j),
                    a.as_ptr().add(i * lda),
                    b.as_ptr().add(j),
                );
                match rows {
                    6.. => micro::<F, 6, CB>(cp, ldc, ap, lda, bp, ldb, k),
                    5 => micro::<F, 5, CB>(cp, ldc, ap, lda, bp, ldb, k),
                    4 => micro::<F, 4, CB>(cp, ldc, ap, lda, bp, ldb, k),
                    3 => micro::<F, 3, CB>(cp, ldc, ap, lda, bp, ldb, k),
                    2 => micro::<F, 2, CB>(cp, ldc, ap, lda, bp, ldb, k),
                    _ => micro::<F, 1, CB>(cp, ldc, ap, lda, bp, ldb, k),
                }
            }
        }
        for r in i..i + rows {
            for x in whole..n {
                let mut s = c[r * ldc + x];
                for kk in 0..k {
                    s = F::fma(a[r * lda + kk], b[kk * ldb + x], s);
                }
                c[r * ldc + x] = s;
            }
        }
        i += rows;
    }
}

/// One micro tile of [`gemm`]: `c[r][x] += Σ_k a[r][k]·b[k][x]` for `r < R`, `x < CB`, each
/// one chain of [`Fma::fma`] in order of `k`.
///
/// # Safety
/// `c` (`R` rows `ldc` apart), `a` (`R` rows of `k`, `lda` apart) and `b` (`k` rows `ldb`
/// apart) hold `CB`, `k` and `CB` values per row; `R <= 6` (the generic `R` gives `gemm` one
/// copy per row count, all within the registers of the builds' `CB`).
#[inline(always)]
unsafe fn micro<F: Fma, const R: usize, const CB: usize>(
    c: *mut f32,
    ldc: usize,
    a: *const f32,
    lda: usize,
    b: *const f32,
    ldb: usize,
    k: usize,
) {
    // SAFETY: every access is inside the rows the caller vouches for.
    unsafe {
        let mut acc: [[f32; CB]; R] =
            std::array::from_fn(|r| (c.add(r * ldc) as *const [f32; CB]).read_unaligned());
        for kk in 0..k {
            let bv = (b.add(kk * ldb) as *const [f32; CB]).read_unaligned();
            for (r, row) in acc.iter_mut().enumerate() {
                let av = *a.add(r * lda + kk);
                for (x, &y) in row.iter_mut().zip(&bv) {
                    *x = F::fma(av, y, *x);
                }
            }
        }
        for (r, row) in acc.iter().enumerate() {
            (c.add(r * ldc) as *mut [f32; CB]).write_unaligned(*row);
        }
    }
}

/// An F16 value (bits) as f32 (exact; bit operations, so it vectorises).
#[inline(always)]
pub(super) fn f16_to_f32(h: u16) -> f32 {
    let h = h as u32;
    let em = h & 0x7fff;
    // Normal and subnormal values: the bits shifted into place are the value times 2^-112.
    let finite = f32::from_bits(em << 13) * f32::from_bits(0x7780_0000);
    let v = if em >= 0x7c00 {
        f32::from_bits(0x7f80_0000 | (em << 13))
    } else {
        finite
    };
    f32::from_bits(v.to_bits() | ((h & 0x8000) << 16))
}

/// `x` rounded to the nearest F16 value, ties to even (as F16C's `vcvtps2ph` with rounding
/// mode 0 and the `half` crate), returned as f32.
#[inline(always)]
pub(super) fn round_f16(x: f32) -> f32 {
    let b = x.to_bits() & 0x7fff_ffff;
    let a = f32::from_bits(b);
    // Normal range: drop 13 mantissa bits, ties to even (a carry moves into the exponent).
    let rn = (b + 0x0fff + ((b >> 13) & 1)) & !0x1fff;
    // Subnormal range: a multiple of 2^-24, rounded by an f32 addition at that scale.
    const MAGIC: f32 = 8_388_608.0;
    let sub = ((a * 16_777_216.0 + MAGIC) - MAGIC) * f32::from_bits(0x3380_0000);
    let r = if b >= 0x7f80_0000 {
        a
    } else if b < 0x3880_0000 {
        sub
    } else if rn > 0x477f_e000 {
        f32::INFINITY
    } else {
        f32::from_bits(rn)
    };
    f32::from_bits(r.to_bits() | (x.to_bits() & 0x8000_0000))
}

/// `x` rounded to BF16 as GGML does (`GGML_FP32_TO_BF16`), returned as f32.
#[inline(always)]
pub(super) fn round_bf16(x: f32) -> f32 {
    bf16_to_f32(f32_to_bf16(x))
}

/// `x·v + y` for F16 values `x`, `v`, `y` rounded once to F16 (`vfmadd…ph`). The product is
/// exact in f32; the sum's rounding error comes from Knuth's two-sum, and the f32 sum is moved
/// to round-to-odd before it is rounded to F16, which is then the correctly rounded result
/// (24 bits ≥ 11 + 2).
#[inline(always)]
pub(super) fn fma_f16_exact(x: f32, v: f32, y: f32) -> f32 {
    let p = x * v;
    let s = p + y;
    let bb = s - p;
    let e = (p - (s - bb)) + (y - bb);
    let bits = s.to_bits();
    let odd = if e != 0.0 && bits & 1 == 0 {
        if (e > 0.0) == (s > 0.0) {
            bits + 1
        } else {
            bits - 1
        }
    } else {
        bits
    };
    round_f16(f32::from_bits(odd))
}

/// Folds lanes `0..n` of `a` (a power of two) by halving: lane `i` += lane `i + n/2`, …
#[inline(always)]
fn fold_halving(a: &mut [f32; 16], n: usize) -> f32 {
    let mut w = n / 2;
    while w > 0 {
        for i in 0..w {
            a[i] += a[i + w];
        }
        w /= 2;
    }
    a[0]
}

/// `ggml_vec_dot_f16` / `ggml_vec_dot_f32` of the build: four partial sums of
/// [`Build::DOT_LANES`] lanes over whole steps of four vectors, folded as GGML folds them,
/// then the rest added one product at a time in f64.
#[inline(always)]
pub(super) fn dot<B: Build>(x: &[f32], y: &[f32]) -> f32 {
    let n = x.len().min(y.len());
    let l = B::DOT_LANES;
    let mut sum = 0f64;
    let mut np = 0;
    if l > 0 {
        np = n / (4 * l) * (4 * l);
        let mut acc = [[0f32; 16]; 4];
        for i in (0..np).step_by(4 * l) {
            for (a, part) in acc.iter_mut().enumerate() {
                let (xs, ys) = (&x[i + a * l..][..l], &y[i + a * l..][..l]);
                for ((s, &u), &v) in part.iter_mut().zip(xs).zip(ys) {
                    *s = B::F::fma(u, v, *s);
                }
            }
        }
        let [mut a, mut b, c, d] = acc;
        for i in 0..l {
            a[i] += c[i];
            b[i] += d[i];
            a[i] += b[i];
        }
        let a = &mut a;
        sum = if B::DOT_HADD {
            let t: [f32; 4] = std::array::from_fn(|i| a[i] + a[i + 4]);
            (t[0] + t[1]) + (t[2] + t[3])
        } else {
            fold_halving(a, l)
        } as f64;
    }
    for i in np..n {
        sum += (x[i] * y[i]) as f64;
    }
    sum as f32
}

/// `y += x·v` on an F16 accumulator (held as f32 values that are F16 values):
/// `ggml_vec_mad_f16`.
#[inline(always)]
pub(super) fn mad_f16<B: Build>(y: &mut [f32], x: &[f32], v: f32) {
    let exact = if B::HALF_NATIVE { y.len() & !127 } else { 0 };
    let v16 = round_f16(v);
    for (a, &b) in y[..exact].iter_mut().zip(x) {
        *a = fma_f16_exact(b, v16, *a);
    }
    for (a, &b) in y[exact..].iter_mut().zip(&x[exact..]) {
        *a = round_f16(B::F::fma(b, v, *a));
    }
}

/// `y *= v` on an F16 accumulator: `ggml_vec_scale_f16`.
#[inline(always)]
pub(super) fn scale_f16<B: Build>(y: &mut [f32], v: f32) {
    let exact = if B::HALF_NATIVE { y.len() & !127 } else { 0 };
    let v16 = round_f16(v);
    for a in &mut y[..exact] {
        *a = round_f16(*a * v16);
    }
    for a in &mut y[exact..] {
        *a = round_f16(*a * v);
    }
}

/// `y += x·v` in f32: `ggml_vec_mad_f32`.
#[inline(always)]
pub(super) fn mad_f32<B: Build>(y: &mut [f32], x: &[f32], v: f32) {
    for (a, &b) in y.iter_mut().zip(x) {
        *a = B::F::fma(b, v, *a);
    }
}

/// `y *= v`: `ggml_vec_scale_f32`.
#[inline(always)]
pub(super) fn scale_f32(y: &mut [f32], v: f32) {
    for a in y {
        *a *= v;
    }
}

const LOG2E: u32 = 0x3fb8_aa3b;
const LN2_HI: u32 = 0x3f31_7200;
const LN2_LO: u32 = 0x35bf_be8e;
const C1: u32 = 0x3f7f_fff6;
const C2: u32 = 0x3eff_fedb;
const C3: u32 = 0x3e2a_af33;
const C4: u32 = 0x3d2b_9f17;
const C5: u32 = 0x3c07_2010;

/// `2^k` for `k` in -126..=127.
#[inline(always)]
fn pow2(k: i32) -> f32 {
    f32::from_bits(((k + 127) as u32) << 23)
}

/// GGML's `ggml_v_expf` for one lane: `n = round(x·log2 e)`, `b = x − n·ln 2` in two parts,
/// a degree-5 polynomial, and `2^n` applied (AVX-512: `scalef`; AVX2: through the exponent
/// bits, with a split for |n| > 126). |n| > 192 gives 0 or ∞.
#[inline(always)]
pub(super) fn v_expf<B: Build>(x: f32) -> f32 {
    let f = |a: u32, b: f32, c: f32| B::F::fma(f32::from_bits(a), b, c);
    const R: f32 = 12_582_912.0; // 1.5 · 2^23
    let z = B::F::fma(x, f32::from_bits(LOG2E), R);
    let n = z - R;
    let b = B::F::fma(
        -n,
        f32::from_bits(LN2_LO),
        B::F::fma(-n, f32::from_bits(LN2_HI), x),
    );
    let u = b * b;
    let poly = B::F::fma(
        f(C5, b, f32::from_bits(C4)),
        u,
        f(C3, b, f32::from_bits(C2)),
    );
    if B::EXP == Exp::Avx512 {
        if n.abs() > 192.0 {
            return if n <= 0.0 { 0.0 } else { f32::INFINITY };
        }
        let j = B::F::fma(poly, u, f(C1, b, 1.0));
        // scalef(j, n) with one rounding: 2^n in one or two exact factors.
        let k = n as i32;
        if k > 127 {
            (j * pow2(127)) * pow2(k - 127)
        } else if k < -126 {
            (j * pow2(k + 100)) * pow2(-100)
        } else {
            j * pow2(k)
        }
    } else {
        let e = z.to_bits() << 23;
        let kk = f32::from_bits(e.wrapping_add(1f32.to_bits()));
        let j = B::F::fma(poly, u, f32::from_bits(C1) * b);
        if n.abs() <= 126.0 || n.is_nan() {
            return B::F::fma(j, kk, kk);
        }
        let g: u32 = if n <= 0.0 { 0x8200_0000 } else { 0 };
        let s1 = f32::from_bits(g.wrapping_add(0x7f00_0000));
        let s2 = f32::from_bits(e.wrapping_sub(g));
        if n.abs() > 192.0 {
            s1 * s1
        } else {
            B::F::fma(s2, j, s2) * s1
        }
    }
}

/// `ggml_vec_soft_max_f32` over one row of scores: each replaced by `e^(x − max)`; returns
/// their sum, accumulated in f64 one vector (lanes folded by halving in f32) or, without
/// SIMD, one value at a time.
#[inline(always)]
pub(super) fn soft_max_row<B: Build>(row: &mut [f32], max: f32) -> f64 {
    let lanes = match B::EXP {
        Exp::Libm => 0,
        Exp::Avx2 => 8,
        Exp::Avx512 => 16,
    };
    let mut sum = 0f64;
    let mut i = 0;
    if lanes > 0 {
        while i + lanes <= row.len() {
            let mut v = [0f32; 16];
            for (o, x) in v.iter_mut().zip(&mut row[i..i + lanes]) {
                *x = v_expf::<B>(*x - max);
                *o = *x;
            }
            sum += fold_halving(&mut v, lanes) as f64;
            i += lanes;
        }
    }
    for x in &mut row[i..] {
        *x = (*x - max).exp();
        sum += *x as f64;
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::f16;

    /// Every F16 value converts as the `half` crate converts it; rounding to F16 agrees with
    /// `half` on every F16 value, the midpoints between neighbours and values around them.
    /// `gemm` gives every output the bits of one chain of `fma` in order of `k` from its old
    /// value, for each build's tile shape, with whole and partial row groups and columns past
    /// the last whole `CB` (as the tiled path's products and its odd head sizes take them).
    #[test]
    fn gemm_outputs_are_single_fma_chains() {
        fn check<F: Fma, const RM: usize, const CB: usize>() {
            let (m, n, k) = (2 * RM + 1, 2 * CB + 3, 37);
            let (ldc, lda, ldb) = (n + 5, k + 2, n + 1);
            let mut state = 12_345u32;
            let mut next = move || {
                state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (state >> 8) as f32 / (1u32 << 23) as f32 - 1.0
            };
            let a: Vec<f32> = (0..m * lda).map(|_| next()).collect();
            let b: Vec<f32> = (0..k * ldb).map(|_| next()).collect();
            let c0: Vec<f32> = (0..m * ldc).map(|_| next()).collect();
            let mut c = c0.clone();
            gemm::<F, RM, CB>((&mut c, ldc), (&a, lda), (&b, ldb), [m, n, k]);
            for i in 0..m {
                for j in 0..ldc {
                    let mut want = c0[i * ldc + j];
                    if j < n {
                        for kk in 0..k {
                            want = F::fma(a[i * lda + kk], b[kk * ldb + j], want);
                        }
                    }
                    assert_eq!(
                        c[i * ldc + j].to_bits(),
                        want.to_bits(),
                        "({i}, {j}) of {RM}x{CB}"
                    );
                }
            }
        }
        check::<Unfused, 4, 16>();
        check::<Fused, 6, 16>();
        check::<Fused, 6, 64>();
    }

    #[test]
    fn f16_conversions_agree_with_half() {
        for h in 0..=u16::MAX {
            let want = f16::from_bits(h).to_f32();
            let got = f16_to_f32(h);
            assert!(got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()));
        }
        let mut x = 1e-9f32;
        let mut probes = vec![0.0, -0.0, f32::INFINITY, 65504.0, 65519.99, 65520.0, 7e4];
        while x < 1e6 {
            probes.extend([x, -x, x * 1.000_001, x * 0.999_999]);
            x *= 1.000_37;
        }
        for h in 0..0x7c00u16 {
            let (a, b) = (f16_to_f32(h), f16_to_f32(h + 1));
            let mid = (a as f64 + b as f64) / 2.0;
            probes.extend([mid as f32, f32::from_bits((mid as f32).to_bits() + 1)]);
        }
        for p in probes.into_iter().filter(|p| !p.is_nan()) {
            let want = f16::from_f32(p).to_f32();
            assert_eq!(round_f16(p).to_bits(), want.to_bits(), "{p:e}");
        }
        assert!(round_f16(f32::NAN).is_nan());
    }

    /// `x` (f64) rounded to the nearest F16 value, ties to even, in f64 arithmetic.
    fn f64_to_f16(x: f64) -> f32 {
        let e = x.abs().log2().floor().max(-14.0);
        let ulp = (e - 10.0).exp2();
        let r = (x / ulp).round_ties_even() * ulp;
        if r.abs() > 65504.0 {
            f32::INFINITY.copysign(x as f32)
        } else {
            r as f32
        }
    }

    /// The single-rounding F16 multiply-add equals the product and sum done in f64 (exact
    /// for these magnitudes) rounded once to F16, on values where rounding through f32 first
    /// would differ.
    #[test]
    fn fma_f16_rounds_once() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut double_rounding_cases = 0;
        for _ in 0..200_000 {
            let r = next();
            let h = |bits: u64| {
                round_f16(f16_to_f32(
                    (bits & 0x7bff) as u16 | ((bits >> 4) & 0x8000) as u16,
                ))
            };
            let (x, v, y) = (h(r), h(r >> 16), h(r >> 32));
            let exact = x as f64 * v as f64 + y as f64;
            let want = f64_to_f16(exact);
            let got = fma_f16_exact(x, v, y);
            assert_eq!(got.to_bits(), want.to_bits(), "{x:e}·{v:e} + {y:e}");
            double_rounding_cases += usize::from(round_f16(x.mul_add(v, y)) != want);
        }
        // The test exercises what it is for.
        assert!(double_rounding_cases > 0);
    }

    /// Both of GGML's vector exponentials are within 2 ulp of `exp` over the softmax range,
    /// 0 far below it, and the AVX2 and AVX-512 forms differ (as GGML's builds do).
    #[test]
    fn v_expf_is_close_to_exp() {
        let ulps = |a: f32, b: f32| (a.to_bits() as i64 - b.to_bits() as i64).abs();
        let mut differ = 0;
        let mut x = -87.0f32;
        while x <= 0.0 {
            let want = (x as f64).exp() as f32;
            let (a, b) = (v_expf::<Avx2>(x), v_expf::<Avx512>(x));
            assert!(
                ulps(a, want) <= 2 && ulps(b, want) <= 2,
                "{x}: {a:e} {b:e} {want:e}"
            );
            differ += usize::from(a != b);
            x += 0.000_731;
        }
        assert!(differ > 0);
        for x in [-200.0, -1e6, f32::NEG_INFINITY] {
            assert_eq!(v_expf::<Avx2>(x), 0.0);
            assert_eq!(v_expf::<Avx512>(x), 0.0);
        }
        // Results below the normal range keep their single rounding.
        let tiny = v_expf::<Avx512>(-100.0);
        assert!(tiny > 0.0 && ulps(tiny, (-100f64).exp() as f32) <= 2);
    }

    /// The dot products hold an f64 dot product to f32 rounding, for every build's layout.
    #[test]
    fn dots_agree_with_f64() {
        let x: Vec<f32> = (0..300)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 17.0)
            .collect();
        let y: Vec<f32> = (0..300)
            .map(|i| ((i * 53 % 89) as f32 - 44.0) / 13.0)
            .collect();
        for n in [1, 31, 64, 100, 256, 300] {
            let want: f64 = (0..n).map(|i| x[i] as f64 * y[i] as f64).sum();
            let bound = 1e-5
                * (0..n)
                    .map(|i| (x[i] as f64 * y[i] as f64).abs())
                    .sum::<f64>();
            for got in [
                dot::<Portable>(&x[..n], &y[..n]),
                dot::<Avx2>(&x[..n], &y[..n]),
                dot::<Avx512>(&x[..n], &y[..n]),
            ] {
                assert!(
                    (got as f64 - want).abs() <= bound,
                    "n = {n}: {got} vs {want}"
                );
            }
        }
    }
}
