//! ROPE and ROPE_BACK (the same rotation by the opposite angles: every sine negated, as
//! GGML's CPU computes it): rows rotated pair by pair by angles from the token's position, computed in f32 with
//! GGML's recurrences (the angle of pair `i + 1` is that of pair `i` times
//! `freq_base^(−2/n_dims)`), YaRN's ramp and the optional frequency factors, in the roundings
//! of GGML's x86 build (whose compiler fuses the rotation's and YaRN's products into
//! multiply-adds), bit for bit on every path: one generic body per rotation, compiled for
//! 512- and 256-bit registers and for one value (or pair) at a time.

use super::{operand, unsupported, NodePtrs, Params, Planned, TensorPtr};
use crate::cpu::quant_dot::{isa, Isa};
use crate::error::Result;
use crate::ops::{rope_yarn_corr_dims, Op, RopeParams, ROPE_TYPE_IMROPE, ROPE_TYPE_MROPE};
use crate::ops::{ROPE_TYPE_NORMAL, ROPE_TYPE_VISION};
use crate::tensor::Tensor;
use crate::types::Type;

/// F32 and F16 rows; scratch: the row and two cos/sin caches (`ne0` f32, rounded up to whole
/// pairs, each).
pub(super) fn plan(t: &Tensor) -> Result<Planned> {
    let a = operand(t, 0)?.ty();
    if !matches!(a, Type::F32 | Type::F16) || t.ty() != a {
        return Err(unsupported(t));
    }
    let ne0 = t.ne()[0] as usize;
    let kernel = if t.op() == Op::RopeBack {
        rope_back
    } else {
        rope
    };
    Ok(Planned::new(
        kernel,
        (ne0 + 2 * ne0.next_multiple_of(2)) * 4,
    ))
}

/// What a row's angles depend on besides the position.
struct Angles {
    theta_scale: f32,
    freq_scale: f32,
    ext_factor: f32,
    attn_factor: f32,
    corr_dims: [f32; 2],
}

impl Angles {
    /// cos and sin of pair `i0 / 2` at angle `theta_extrap` (GGML's `rope_yarn`, in its
    /// roundings: `cosf`/`sinf` of the C library, which Rust's `f32::cos`/`sin` call).
    fn yarn(&self, theta_extrap: f32, i0: usize) -> (f32, f32) {
        let theta_interp = self.freq_scale * theta_extrap;
        let mut theta = theta_interp;
        let mut mscale = self.attn_factor;
        if self.ext_factor != 0.0 {
            let [low, high] = self.corr_dims;
            let span = high - low;
            let y = ((i0 / 2) as f32 - low) / if 0.001 > span { 0.001 } else { span };
            let clamped = if y > 0.0 { y } else { 0.0 };
            let ramp = 1.0 - if clamped < 1.0 { clamped } else { 1.0 };
            let mix = ramp * self.ext_factor;
            // GGML's build contracts both sums into fused multiply-adds
            theta = theta_interp.mul_add(1.0 - mix, theta_extrap * mix);
            mscale *= 0.1f32.mul_add((1.0 / self.freq_scale).ln(), 1.0);
        }
        (theta.cos() * mscale, theta.sin() * mscale)
    }
}

/// Reads element `i` of the I32 vector `b`.
///
/// # Safety
/// `i < b.ne[0]`.
unsafe fn position(b: &TensorPtr, i: usize) -> f32 {
    // SAFETY: forwarded from the caller.
    unsafe { (b.data.add(i * b.nb[0]) as *const i32).read_unaligned() as f32 }
}

/// Fills `cache` (cos, sin per pair) for token `i2` of `ne2`.
///
/// # Safety
/// `b` holds the positions the shape rule asked for (`ne2`, or `4 · ne2` with sections), and
/// `c`, when present, at least `cache.len() / 2` frequency factors.
unsafe fn fill_cache(
    p: &RopeParams,
    ang: &Angles,
    b: &TensorPtr,
    c: &TensorPtr,
    i2: usize,
    ne2: usize,
    cache: &mut [f32],
) {
    // SAFETY (the reads): i2 + k·ne2 is below b.ne0; pair indices below c.ne0.
    let ff = |pair: usize| unsafe {
        if c.data.is_null() {
            1.0
        } else {
            (c.data.add(pair * c.nb[0]) as *const f32).read_unaligned()
        }
    };
    if p.mode & ROPE_TYPE_MROPE == 0 {
        // SAFETY: see above.
        let mut theta = unsafe { position(b, i2) };
        for (pair, cs) in cache.chunks_exact_mut(2).enumerate() {
            (cs[0], cs[1]) = ang.yarn(theta / ff(pair), 2 * pair);
            theta *= ang.theta_scale;
        }
        return;
    }
    // SAFETY: see above.
    let base: [f32; 4] = std::array::from_fn(|k| unsafe { position(b, i2 + k * ne2) });
    let s = p.sections.map(|x| x as usize);
    let sect_dims = s.iter().sum::<usize>();
    let (sec_w, sec_e) = (s[0] + s[1], s[0] + s[1] + s[2]);
    let imrope = p.mode == ROPE_TYPE_IMROPE;
    let vision = p.mode == ROPE_TYPE_VISION;
    // Angles of the t, h, w and e positions.
    let mut th = base;
    for (pair, cs) in cache.chunks_exact_mut(2).enumerate() {
        let sector = pair % sect_dims;
        if vision {
            // Each section's exponent restarts at its first pair.
            for (k, start) in [0, s[0], sec_w, sec_e].into_iter().enumerate() {
                if sector == start {
                    th[k] = base[k];
                    break;
                }
            }
        }
        let which = if imrope {
            if sector % 3 == 1 && sector < 3 * s[1] {
                1
            } else if sector % 3 == 2 && sector < 3 * s[2] {
                2
            } else if sector % 3 == 0 && sector < 3 * s[0] {
                0
            } else {
                3
            }
        } else if sector < s[0] {
            0
        } else if sector < sec_w {
            1
        } else if sector < sec_e {
            2
        } else {
            3
        };
        (cs[0], cs[1]) = ang.yarn(th[which] / ff(pair), 2 * pair);
        for t in th.iter_mut() {
            *t *= ang.theta_scale;
        }
    }
}

/// Rotates the `pairs` interleaved pairs `(x[2i], x[2i + 1])` of the row at `src` into `dst`
/// by the cache's `(cos, sin)` pairs (NORMAL mode) as GGML's CPU build does it (its compiler
/// contracts `x0·cos − x1·sin` and `x0·sin + x1·cos` into fused multiply-adds):
/// `fma(x0, cos, −(x1·sin))` and `fma(x0, sin, x1·cos)`, the second product rounded, on
/// every path.
///
/// # Safety
/// `src` and `dst` must hold `2·pairs` F32 values and be the same memory or not overlap;
/// `cache.len() >= 2·pairs`.
unsafe fn rotate_interleaved(src: *const f32, dst: *mut f32, cache: &[f32], pairs: usize) {
    assert!(
        cache.len() >= 2 * pairs,
        "rope cache of {} for {pairs} pairs",
        cache.len()
    );
    let cache = cache.as_ptr();
    // SAFETY: `isa` returns a path only when this CPU has its features; forwarded.
    unsafe {
        match isa() {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => x86::interleaved_avx512(src, dst, cache, pairs),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => x86::interleaved_avx2(src, dst, cache, pairs),
            _ => interleaved::<[f32; 2]>(src, dst, cache, pairs),
        }
    }
}

/// Rotates `x[i]` with `x[i + stride]` of the row at `src` into `dst` for `i` in
/// `0..cos.len()` by `cos[i]`, `sin[i]` (NEOX, MROPE and VISION modes), with the roundings
/// of [`rotate_interleaved`].
///
/// # Safety
/// `src` and `dst` must hold `stride + cos.len()` F32 values (`cos.len() <= stride`) and be
/// the same memory or not overlap; `sin.len() == cos.len()`.
unsafe fn rotate_split(src: *const f32, dst: *mut f32, stride: usize, cos: &[f32], sin: &[f32]) {
    let n = cos.len().min(sin.len());
    let (c, s) = (cos.as_ptr(), sin.as_ptr());
    // SAFETY: as in `rotate_interleaved`.
    unsafe {
        match isa() {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => x86::split_avx512(src, dst, stride, c, s, n),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => x86::split_avx2(src, dst, stride, c, s, n),
            _ => split::<f32>(src, dst, stride, c, s, n),
        }
    }
}

/// A vector of `N` f32 lanes and the operations the rotations take, each lane rounded as
/// its scalar form (`f32` itself is the one-lane vector).
trait Lanes: Copy {
    /// Lanes.
    const N: usize;
    /// `N` values from `p`.
    ///
    /// # Safety
    /// `N` readable values at `p`; the CPU has the type's features.
    unsafe fn load(p: *const f32) -> Self;
    /// The lanes to `p`.
    ///
    /// # Safety
    /// `N` writable values at `p`; the CPU has the type's features.
    unsafe fn store(self, p: *mut f32);
    /// `self · b`, rounded.
    ///
    /// # Safety
    /// The CPU has the type's features.
    unsafe fn mul(self, b: Self) -> Self;
    /// `self · b + c`, rounded once.
    ///
    /// # Safety
    /// The CPU has the type's features.
    unsafe fn mul_add(self, b: Self, c: Self) -> Self;
    /// `self · b − c`, rounded once.
    ///
    /// # Safety
    /// The CPU has the type's features.
    unsafe fn mul_sub(self, b: Self, c: Self) -> Self;
}

/// A [`Lanes`] of whole pairs, with the in-pair operations of the NORMAL rotation.
trait PairLanes: Lanes {
    /// Each pair `(a, b)` as `(a, a)`.
    ///
    /// # Safety
    /// The CPU has the type's features.
    unsafe fn dup_even(self) -> Self;
    /// Each pair `(a, b)` as `(b, b)`.
    ///
    /// # Safety
    /// The CPU has the type's features.
    unsafe fn dup_odd(self) -> Self;
    /// Each pair `(a, b)` as `(b, a)`.
    ///
    /// # Safety
    /// The CPU has the type's features.
    unsafe fn swap_pairs(self) -> Self;
    /// `self · b − c` in the first lane of each pair, `self · b + c` in the second, each
    /// rounded once.
    ///
    /// # Safety
    /// The CPU has the type's features.
    unsafe fn mul_sub_add(self, b: Self, c: Self) -> Self;
}

impl Lanes for f32 {
    const N: usize = 1;
    #[inline(always)]
    unsafe fn load(p: *const f32) -> f32 {
        // SAFETY: forwarded from the caller.
        unsafe { p.read() }
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        // SAFETY: forwarded from the caller.
        unsafe { p.write(self) }
    }
    #[inline(always)]
    unsafe fn mul(self, b: f32) -> f32 {
        self * b
    }
    #[inline(always)]
    unsafe fn mul_add(self, b: f32, c: f32) -> f32 {
        f32::mul_add(self, b, c)
    }
    #[inline(always)]
    unsafe fn mul_sub(self, b: f32, c: f32) -> f32 {
        f32::mul_add(self, b, -c)
    }
}

impl Lanes for [f32; 2] {
    const N: usize = 2;
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        // SAFETY: forwarded from the caller.
        unsafe { [p.read(), p.add(1).read()] }
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        // SAFETY: forwarded from the caller.
        unsafe { (p.write(self[0]), p.add(1).write(self[1])) };
    }
    #[inline(always)]
    unsafe fn mul(self, b: Self) -> Self {
        [self[0] * b[0], self[1] * b[1]]
    }
    #[inline(always)]
    unsafe fn mul_add(self, b: Self, c: Self) -> Self {
        [self[0].mul_add(b[0], c[0]), self[1].mul_add(b[1], c[1])]
    }
    #[inline(always)]
    unsafe fn mul_sub(self, b: Self, c: Self) -> Self {
        [self[0].mul_add(b[0], -c[0]), self[1].mul_add(b[1], -c[1])]
    }
}

impl PairLanes for [f32; 2] {
    #[inline(always)]
    unsafe fn dup_even(self) -> Self {
        [self[0]; 2]
    }
    #[inline(always)]
    unsafe fn dup_odd(self) -> Self {
        [self[1]; 2]
    }
    #[inline(always)]
    unsafe fn swap_pairs(self) -> Self {
        [self[1], self[0]]
    }
    #[inline(always)]
    unsafe fn mul_sub_add(self, b: Self, c: Self) -> Self {
        [self[0].mul_add(b[0], -c[0]), self[1].mul_add(b[1], c[1])]
    }
}

/// The NORMAL rotation of [`rotate_interleaved`], `V::N / 2` pairs per step, the pairs past
/// the last whole vector one at a time: `fma(dup_even(x), cs, ∓ dup_odd(x) · swap(cs))`.
///
/// # Safety
/// As [`rotate_interleaved`]'s, `cache` holding `2·pairs` values; the CPU has `V`'s features.
#[inline(always)]
unsafe fn interleaved<V: PairLanes>(
    src: *const f32,
    dst: *mut f32,
    cache: *const f32,
    pairs: usize,
) {
    #[inline(always)]
    unsafe fn step<V: PairLanes>(src: *const f32, dst: *mut f32, cache: *const f32) {
        // SAFETY: V::N values at each pointer (the caller).
        unsafe {
            let (x, cs) = (V::load(src), V::load(cache));
            let cross = x.dup_odd().mul(cs.swap_pairs());
            x.dup_even().mul_sub_add(cs, cross).store(dst);
        }
    }
    let whole = 2 * pairs / V::N * V::N;
    // SAFETY: every step reads and writes V::N (or 2) values below 2·pairs; each is read
    // before it is written.
    unsafe {
        for i in (0..whole).step_by(V::N) {
            step::<V>(src.add(i), dst.add(i), cache.add(i));
        }
        for i in (whole..2 * pairs).step_by(2) {
            step::<[f32; 2]>(src.add(i), dst.add(i), cache.add(i));
        }
    }
}

/// The split rotation of [`rotate_split`], `V::N` pairs per step, the rest one at a time:
/// `fma(x0, cos, −(x1·sin))` and `fma(x0, sin, x1·cos)`.
///
/// # Safety
/// As [`rotate_split`]'s, `cos` and `sin` holding `n` values; the CPU has `V`'s features.
#[inline(always)]
unsafe fn split<V: Lanes>(
    src: *const f32,
    dst: *mut f32,
    stride: usize,
    cos: *const f32,
    sin: *const f32,
    n: usize,
) {
    #[inline(always)]
    unsafe fn step<V: Lanes>(src: *const f32, dst: *mut f32, stride: usize, c: V, s: V) {
        // SAFETY: V::N values at src, dst and stride values on (the caller).
        unsafe {
            let (x0, x1) = (V::load(src), V::load(src.add(stride)));
            x0.mul_sub(c, x1.mul(s)).store(dst);
            x0.mul_add(s, x1.mul(c)).store(dst.add(stride));
        }
    }
    let whole = n / V::N * V::N;
    // SAFETY: i + V::N <= n (or i < n), so every access is inside the row and the caches;
    // each pair is read before it is written.
    unsafe {
        for i in (0..whole).step_by(V::N) {
            let (c, s) = (V::load(cos.add(i)), V::load(sin.add(i)));
            step::<V>(src.add(i), dst.add(i), stride, c, s);
        }
        for i in whole..n {
            step::<f32>(src.add(i), dst.add(i), stride, *cos.add(i), *sin.add(i));
        }
    }
}

#[cfg(target_arch = "x86_64")]
// AVX-512 target features and intrinsics are stable since Rust 1.89, so these paths need 1.89
// while the workspace still declares 1.85 (as gemm's and quant_dot's AVX-512 paths).
#[allow(clippy::incompatible_msrv)]
mod x86 {
    //! [`Lanes`] and [`PairLanes`] for 256- and 512-bit registers, and the rotations compiled
    //! for each. Safety, for all: as the generic bodies', and the CPU has the enabled
    //! features.
    use std::arch::x86_64::*;

    use super::{interleaved, split, Lanes, PairLanes};

    /// Implements [`Lanes`] and [`PairLanes`] for one register type from its intrinsics.
    macro_rules! lanes {
        ($v:ty, $n:literal, $load:ident, $store:ident, $mul:ident, $fmadd:ident, $fmsub:ident,
         $ldup:ident, $hdup:ident, $permute:ident, $fmaddsub:ident) => {
            impl Lanes for $v {
                const N: usize = $n;
                #[inline(always)]
                unsafe fn load(p: *const f32) -> $v {
                    // SAFETY: forwarded from the caller.
                    unsafe { $load(p) }
                }
                #[inline(always)]
                unsafe fn store(self, p: *mut f32) {
                    // SAFETY: forwarded from the caller.
                    unsafe { $store(p, self) }
                }
                #[inline(always)]
                unsafe fn mul(self, b: $v) -> $v {
                    // SAFETY: the caller has the features.
                    unsafe { $mul(self, b) }
                }
                #[inline(always)]
                unsafe fn mul_add(self, b: $v, c: $v) -> $v {
                    // SAFETY: the caller has the features.
                    unsafe { $fmadd(self, b, c) }
                }
                #[inline(always)]
                unsafe fn mul_sub(self, b: $v, c: $v) -> $v {
                    // SAFETY: the caller has the features.
                    unsafe { $fmsub(self, b, c) }
                }
            }
            impl PairLanes for $v {
                #[inline(always)]
                unsafe fn dup_even(self) -> $v {
                    // SAFETY: the caller has the features.
                    unsafe { $ldup(self) }
                }
                #[inline(always)]
                unsafe fn dup_odd(self) -> $v {
                    // SAFETY: the caller has the features.
                    unsafe { $hdup(self) }
                }
                #[inline(always)]
                unsafe fn swap_pairs(self) -> $v {
                    // SAFETY: the caller has the features.
                    unsafe { $permute::<0xB1>(self) }
                }
                #[inline(always)]
                unsafe fn mul_sub_add(self, b: $v, c: $v) -> $v {
                    // SAFETY: the caller has the features.
                    unsafe { $fmaddsub(self, b, c) }
                }
            }
        };
    }

    lanes!(
        __m512,
        16,
        _mm512_loadu_ps,
        _mm512_storeu_ps,
        _mm512_mul_ps,
        _mm512_fmadd_ps,
        _mm512_fmsub_ps,
        _mm512_moveldup_ps,
        _mm512_movehdup_ps,
        _mm512_permute_ps,
        _mm512_fmaddsub_ps
    );
    lanes!(
        __m256,
        8,
        _mm256_loadu_ps,
        _mm256_storeu_ps,
        _mm256_mul_ps,
        _mm256_fmadd_ps,
        _mm256_fmsub_ps,
        _mm256_moveldup_ps,
        _mm256_movehdup_ps,
        _mm256_permute_ps,
        _mm256_fmaddsub_ps
    );

    /// [`interleaved`] on 512-bit registers.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma")]
    pub(super) unsafe fn interleaved_avx512(
        src: *const f32,
        dst: *mut f32,
        cache: *const f32,
        pairs: usize,
    ) {
        // SAFETY: forwarded.
        unsafe { interleaved::<__m512>(src, dst, cache, pairs) }
    }

    /// [`interleaved`] on 256-bit registers.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn interleaved_avx2(
        src: *const f32,
        dst: *mut f32,
        cache: *const f32,
        pairs: usize,
    ) {
        // SAFETY: forwarded.
        unsafe { interleaved::<__m256>(src, dst, cache, pairs) }
    }

    /// [`split`] on 512-bit registers.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma")]
    pub(super) unsafe fn split_avx512(
        src: *const f32,
        dst: *mut f32,
        stride: usize,
        cos: *const f32,
        sin: *const f32,
        n: usize,
    ) {
        // SAFETY: forwarded.
        unsafe { split::<__m512>(src, dst, stride, cos, sin, n) }
    }

    /// [`split`] on 256-bit registers.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn split_avx2(
        src: *const f32,
        dst: *mut f32,
        stride: usize,
        cos: *const f32,
        sin: *const f32,
        n: usize,
    ) {
        // SAFETY: forwarded.
        unsafe { split::<__m256>(src, dst, stride, cos, sin, n) }
    }
}

/// ROPE over this thread's rows (dimensions 1..5 of a, positions indexed by dimension 2).
/// The cos/sin cache is filled once per token (dimension 2), as GGML does, and shared by the
/// token's heads; for the split modes it is also laid out as a cos run and a sin run. Packed
/// F32 rows are rotated from a into dst directly; other rows go through the thread's f32
/// scratch row (F16 rows converted with F16C).
pub(super) unsafe fn rope(n: &NodePtrs, p: &Params) {
    // SAFETY: forwarded from the caller.
    unsafe { rotate_rows(n, p, false) }
}

/// ROPE_BACK: [`rope`] with every sine of the cache negated (GGML's `sin_sign = -1`).
pub(super) unsafe fn rope_back(n: &NodePtrs, p: &Params) {
    // SAFETY: forwarded from the caller.
    unsafe { rotate_rows(n, p, true) }
}

/// The rows of ROPE (`back == false`) or ROPE_BACK.
unsafe fn rotate_rows(n: &NodePtrs, p: &Params, back: bool) {
    let prm: RopeParams = n.params();
    let (d, a, b, c) = (&n.dst, &n.src[0], &n.src[1], &n.src[2]);
    let ne0 = a.ne[0] as usize;
    let n_dims = prm.n_dims as usize;
    let n_offs = prm.n_offs as usize;
    let ne2 = a.ne[2] as usize;
    let vision = prm.mode == ROPE_TYPE_VISION;
    let normal = prm.mode == ROPE_TYPE_NORMAL;
    let ang = Angles {
        theta_scale: prm.freq_base.powf(-2.0 / prm.n_dims as f32),
        freq_scale: prm.freq_scale,
        ext_factor: prm.ext_factor,
        attn_factor: prm.attn_factor,
        corr_dims: rope_yarn_corr_dims(
            prm.n_dims,
            prm.n_ctx_orig,
            prm.freq_base,
            prm.beta_fast,
            prm.beta_slow,
        ),
    };
    // The vision mode rotates ne0 / 2 pairs from 0 at a stride of n_dims, the others
    // n_dims / 2 from n_offs (at a stride of n_dims / 2 in the split modes).
    let (pairs, start, stride) = match () {
        _ if vision => (ne0 / 2, 0, n_dims),
        _ => (n_dims / 2, n_offs, n_dims / 2),
    };
    let fast = a.f32_rows() && d.f32_rows();
    let whole = ne0.next_multiple_of(2);
    // SAFETY: the plan sized each thread's scratch for the row and two caches of ne0
    // rounded up.
    let scratch = unsafe { p.scratch_f32(ne0 + 2 * whole) };
    let (buf, rest) = scratch.split_at_mut(ne0);
    let (cache, split) = rest.split_at_mut(whole);
    let (cache, (cos, sin)) = (
        &mut cache[..2 * pairs],
        split[..2 * pairs].split_at_mut(pairs),
    );
    let rows = p.range(a.nrows());
    let mut idx = a.unravel_row(rows.start);
    let mut last_i2 = usize::MAX;
    for _ in rows {
        if idx[1] != last_i2 {
            // SAFETY: the shape rule sized b (positions per token) and c (factors per pair).
            unsafe { fill_cache(&prm, &ang, b, c, idx[1], ne2, cache) };
            if back {
                for cs in cache.chunks_exact_mut(2) {
                    cs[1] = -cs[1];
                }
            }
            if !normal {
                for (i, cs) in cache.chunks_exact(2).enumerate() {
                    (cos[i], sin[i]) = (cs[0], cs[1]);
                }
            }
            last_i2 = idx[1];
        }
        let (arow, drow) = (a.row(idx), d.row(idx));
        let (src, dst) = if fast {
            if arow != drow {
                // SAFETY: distinct rows of ne0 F32 values: the values outside the rotated
                // span (before `start` and after its 2·pairs values) are copied.
                unsafe {
                    std::ptr::copy_nonoverlapping(arow, drow, 4 * start);
                    let end = 4 * (start + 2 * pairs);
                    std::ptr::copy_nonoverlapping(arow.add(end), drow.add(end), 4 * ne0 - end);
                }
            }
            (arow as *const f32, drow as *mut f32)
        } else {
            // SAFETY: a row of a with ne0 elements into private scratch.
            unsafe { a.read_row(arow, buf) };
            (buf.as_ptr(), buf.as_mut_ptr())
        };
        // SAFETY: src and dst hold ne0 values, start + 2·pairs <= ne0 (the shape rule), and
        // are the same memory or distinct rows.
        unsafe {
            let (src, dst) = (src.add(start), dst.add(start));
            if normal {
                rotate_interleaved(src, dst, cache, pairs)
            } else {
                rotate_split(src, dst, stride, cos, sin)
            }
        }
        if !fast {
            // SAFETY: as above; buf is scratch, not the result's memory.
            unsafe { d.write_row(drow, buf) };
        }
        a.next_row(&mut idx);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` pseudo-random values in [-2, 2).
    fn values(n: usize, seed: u32) -> Vec<f32> {
        let mut state = seed;
        (0..n)
            .map(|_| {
                state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (state >> 8) as f32 / (1u32 << 22) as f32 - 2.0
            })
            .collect()
    }

    /// GGML's rotation of one pair as its x86 build computes it (the C expressions
    /// `x0*c - x1*s` and `x0*s + x1*c` contracted by the compiler, the first product fused).
    fn ggml_pair(x0: f32, x1: f32, c: f32, s: f32) -> (f32, f32) {
        (x0.mul_add(c, -(x1 * s)), x0.mul_add(s, x1 * c))
    }

    /// The rotation paths this CPU runs: the portable bodies and, on x86, the AVX2 and
    /// AVX-512 ones.
    #[allow(clippy::type_complexity)]
    fn paths() -> Vec<(
        &'static str,
        unsafe fn(*const f32, *mut f32, *const f32, usize),
        unsafe fn(*const f32, *mut f32, usize, *const f32, *const f32, usize),
    )> {
        let mut all: Vec<(&str, unsafe fn(_, _, _, _), unsafe fn(_, _, _, _, _, _))> =
            vec![("portable", interleaved::<[f32; 2]>, split::<f32>)];
        #[cfg(target_arch = "x86_64")]
        {
            if Isa::Avx2.available() {
                all.push(("avx2", x86::interleaved_avx2, x86::split_avx2));
            }
            if Isa::Avx512.available() {
                all.push(("avx512", x86::interleaved_avx512, x86::split_avx512));
            }
        }
        all
    }

    /// Every path rotates bit for bit as GGML does, for every length (so every vector tail),
    /// in place and out of place; and the fused roundings matter: the unfused products give
    /// other bits on some of these values.
    #[test]
    fn rotations_are_ggml_bit_for_bit_on_every_path() {
        let mut unfused_differs = 0;
        for (name, inter, spl) in paths() {
            for pairs in 1..70 {
                let x = values(2 * pairs, pairs as u32);
                let cache: Vec<f32> = values(2 * pairs, 1000 + pairs as u32)
                    .iter()
                    .map(|v| v.sin())
                    .collect();
                // NORMAL: pairs interleaved, (cos, sin) interleaved in the cache
                let mut out = vec![0f32; 2 * pairs];
                // SAFETY: `paths` lists only what this CPU runs; 2·pairs values everywhere.
                unsafe { inter(x.as_ptr(), out.as_mut_ptr(), cache.as_ptr(), pairs) };
                let mut inplace = x.clone();
                let p = inplace.as_mut_ptr();
                // SAFETY: as above, the same memory in and out.
                unsafe { inter(p, p, cache.as_ptr(), pairs) };
                for i in 0..pairs {
                    let (c, s) = (cache[2 * i], cache[2 * i + 1]);
                    let (x0, x1) = (x[2 * i], x[2 * i + 1]);
                    let want = ggml_pair(x0, x1, c, s);
                    let got = (out[2 * i], out[2 * i + 1]);
                    assert_eq!(
                        (got.0.to_bits(), got.1.to_bits()),
                        (want.0.to_bits(), want.1.to_bits()),
                        "{name} NORMAL, {pairs} pairs, pair {i}"
                    );
                    assert_eq!(
                        inplace[2 * i].to_bits(),
                        want.0.to_bits(),
                        "{name} in place"
                    );
                    assert_eq!(inplace[2 * i + 1].to_bits(), want.1.to_bits(), "{name}");
                    unfused_differs += ((x0 * c - x1 * s) != want.0) as usize;
                }
                // split: x[i] with x[i + pairs], cos and sin as two runs
                let (cos, sin) = cache.split_at(pairs);
                let mut out = vec![0f32; 2 * pairs];
                // SAFETY: as above; stride + n = 2·pairs values.
                unsafe {
                    spl(
                        x.as_ptr(),
                        out.as_mut_ptr(),
                        pairs,
                        cos.as_ptr(),
                        sin.as_ptr(),
                        pairs,
                    )
                };
                for i in 0..pairs {
                    let want = ggml_pair(x[i], x[i + pairs], cos[i], sin[i]);
                    assert_eq!(
                        (out[i].to_bits(), out[i + pairs].to_bits()),
                        (want.0.to_bits(), want.1.to_bits()),
                        "{name} split, {pairs} pairs, pair {i}"
                    );
                }
            }
        }
        assert!(unfused_differs > 0, "no case tells fused from unfused");
    }

    /// The cache: pair i's angle is the position times `freq_base^(−2/n_dims)` i times over,
    /// in f32 (not a power), its cos and sin those of the C library; with YaRN's ramp
    /// (ext_factor ≠ 0) the angle mix and the magnitude factor in GGML's fused roundings.
    #[test]
    fn the_cache_follows_ggml_recurrence_and_yarn_roundings() {
        let n_dims = 128usize;
        for (ext_factor, freq_scale) in [(0.0f32, 1.0f32), (1.0, 0.25), (0.5, 0.125)] {
            let ang = Angles {
                theta_scale: 10000f32.powf(-2.0 / n_dims as f32),
                freq_scale,
                ext_factor,
                attn_factor: 0.9,
                corr_dims: [10.0, 40.0],
            };
            let prm = RopeParams {
                n_dims: n_dims as i32,
                mode: ROPE_TYPE_NORMAL,
                ..RopeParams::default()
            };
            let pos = [77i32];
            let b = TensorPtr {
                data: pos.as_ptr() as *mut u8,
                ty: Type::I32,
                ne: [1; crate::MAX_DIMS],
                nb: [4; crate::MAX_DIMS],
            };
            let c = TensorPtr::NULL;
            let mut cache = vec![0f32; n_dims];
            // SAFETY: one position, no factors, n_dims / 2 pairs.
            unsafe { fill_cache(&prm, &ang, &b, &c, 0, 1, &mut cache) };
            let mut theta = 77f32;
            for i in 0..n_dims / 2 {
                let interp = freq_scale * theta;
                let (mut t, mut m) = (interp, 0.9f32);
                if ext_factor != 0.0 {
                    let y = (i as f32 - 10.0) / 30.0;
                    let mix = (1.0 - y.clamp(0.0, 1.0)) * ext_factor;
                    t = interp.mul_add(1.0 - mix, theta * mix);
                    m *= 0.1f32.mul_add((1.0 / freq_scale).ln(), 1.0);
                }
                let want = (t.cos() * m, t.sin() * m);
                assert_eq!(
                    (cache[2 * i].to_bits(), cache[2 * i + 1].to_bits()),
                    (want.0.to_bits(), want.1.to_bits()),
                    "pair {i}, ext_factor {ext_factor}"
                );
                theta *= ang.theta_scale;
            }
        }
    }
}
