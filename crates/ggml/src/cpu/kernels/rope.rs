//! ROPE: rows rotated pair by pair by angles from the token's position, computed in f32 with
//! GGML's recurrences (the angle of pair `i + 1` is that of pair `i` times
//! `freq_base^(−2/n_dims)`), YaRN's ramp and the optional frequency factors.

use super::{operand, unsupported, NodePtrs, Params, Planned, TensorPtr};
#[cfg(target_arch = "x86_64")]
use crate::cpu::quant_dot::{isa, Isa};
use crate::error::Result;
use crate::ops::{rope_yarn_corr_dims, RopeParams, ROPE_TYPE_IMROPE, ROPE_TYPE_MROPE};
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
    Ok(Planned::new(rope, (ne0 + 2 * ne0.next_multiple_of(2)) * 4))
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
    /// cos and sin of pair `i0 / 2` at angle `theta_extrap` (GGML's `rope_yarn`).
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
            theta = theta_interp * (1.0 - mix) + theta_extrap * mix;
            mscale *= 1.0 + 0.1 * (1.0 / self.freq_scale).ln();
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
/// by the cache's `(cos, sin)` pairs (NORMAL mode): `x0·cos − x1·sin`, `x0·sin + x1·cos`,
/// each product rounded, no FMA, so every ISA path gives the same bits.
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
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `isa` returns a path only when this CPU has its features; forwarded.
    let done = unsafe {
        match isa() {
            Isa::Avx512 => x86::interleaved_avx512(src, dst, cache.as_ptr(), pairs),
            Isa::Avx2 => x86::interleaved_avx2(src, dst, cache.as_ptr(), pairs),
            Isa::Scalar => 0,
        }
    };
    #[cfg(not(target_arch = "x86_64"))]
    let done = 0;
    for i in done..pairs {
        // SAFETY: 2i + 1 < 2·pairs; each pair is read before it is written.
        unsafe {
            let (x0, x1) = (*src.add(2 * i), *src.add(2 * i + 1));
            let (c, s) = (cache[2 * i], cache[2 * i + 1]);
            *dst.add(2 * i) = x0 * c - x1 * s;
            *dst.add(2 * i + 1) = x0 * s + x1 * c;
        }
    }
}

/// Rotates `x[i]` with `x[i + stride]` of the row at `src` into `dst` for `i` in
/// `0..cos.len()` by `cos[i]`, `sin[i]` (NEOX, MROPE and VISION modes), the same operations
/// as [`rotate_interleaved`].
///
/// # Safety
/// `src` and `dst` must hold `stride + cos.len()` F32 values (`cos.len() <= stride`) and be
/// the same memory or not overlap; `sin.len() == cos.len()`.
unsafe fn rotate_split(src: *const f32, dst: *mut f32, stride: usize, cos: &[f32], sin: &[f32]) {
    let n = cos.len().min(sin.len());
    #[cfg(target_arch = "x86_64")]
    // SAFETY: as in `rotate_interleaved`.
    let done = unsafe {
        let (c, s) = (cos.as_ptr(), sin.as_ptr());
        match isa() {
            Isa::Avx512 => x86::split_avx512(src, dst, stride, c, s, n),
            Isa::Avx2 => x86::split_avx2(src, dst, stride, c, s, n),
            Isa::Scalar => 0,
        }
    };
    #[cfg(not(target_arch = "x86_64"))]
    let done = 0;
    for i in done..n {
        // SAFETY: i + stride < stride + n; each pair is read before it is written.
        unsafe {
            let (x0, x1) = (*src.add(i), *src.add(i + stride));
            *dst.add(i) = x0 * cos[i] - x1 * sin[i];
            *dst.add(i + stride) = x0 * sin[i] + x1 * cos[i];
        }
    }
}

#[cfg(target_arch = "x86_64")]
// AVX-512 target features and intrinsics are stable since Rust 1.89, so these paths need 1.89
// while the workspace still declares 1.85 (as gemm's and quant_dot's AVX-512 paths).
#[allow(clippy::incompatible_msrv)]
mod x86 {
    //! The rotations 16 or 8 values at a time; each returns how many pairs it did (whole
    //! vectors), the caller does the rest. Safety, for all: as the caller's, and the CPU has
    //! the enabled features.
    use std::arch::x86_64::*;

    /// NORMAL pairs, 8 per zmm: the cache's cos and sin duplicated into both lanes of each
    /// pair, the pair swapped, and `x·cos + swap(x)·(∓sin)` (the sign flipped on even lanes).
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma")]
    pub(super) unsafe fn interleaved_avx512(
        src: *const f32,
        dst: *mut f32,
        cache: *const f32,
        pairs: usize,
    ) -> usize {
        let whole = pairs / 8 * 8;
        let even_neg = _mm512_set1_epi64(0x8000_0000);
        for i in (0..2 * whole).step_by(16) {
            // SAFETY: i + 16 <= 2·pairs values on every side.
            unsafe {
                let x = _mm512_loadu_ps(src.add(i));
                let cs = _mm512_loadu_ps(cache.add(i));
                let c = _mm512_moveldup_ps(cs);
                let s = _mm512_castps_si512(_mm512_movehdup_ps(cs));
                let s = _mm512_castsi512_ps(_mm512_xor_si512(s, even_neg));
                let sw = _mm512_permute_ps::<0xB1>(x);
                let y = _mm512_add_ps(_mm512_mul_ps(x, c), _mm512_mul_ps(sw, s));
                _mm512_storeu_ps(dst.add(i), y);
            }
        }
        whole
    }

    /// NORMAL pairs, 4 per ymm, as [`interleaved_avx512`] with `vaddsubps`.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn interleaved_avx2(
        src: *const f32,
        dst: *mut f32,
        cache: *const f32,
        pairs: usize,
    ) -> usize {
        let whole = pairs / 4 * 4;
        for i in (0..2 * whole).step_by(8) {
            // SAFETY: i + 8 <= 2·pairs values on every side.
            unsafe {
                let x = _mm256_loadu_ps(src.add(i));
                let cs = _mm256_loadu_ps(cache.add(i));
                let (c, s) = (_mm256_moveldup_ps(cs), _mm256_movehdup_ps(cs));
                let sw = _mm256_permute_ps::<0xB1>(x);
                let y = _mm256_addsub_ps(_mm256_mul_ps(x, c), _mm256_mul_ps(sw, s));
                _mm256_storeu_ps(dst.add(i), y);
            }
        }
        whole
    }

    /// Split pairs, 16 per iteration.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma")]
    pub(super) unsafe fn split_avx512(
        src: *const f32,
        dst: *mut f32,
        stride: usize,
        cos: *const f32,
        sin: *const f32,
        n: usize,
    ) -> usize {
        let whole = n / 16 * 16;
        for i in (0..whole).step_by(16) {
            // SAFETY: i + 16 <= n; i + stride + 16 <= stride + n.
            unsafe {
                let x0 = _mm512_loadu_ps(src.add(i));
                let x1 = _mm512_loadu_ps(src.add(i + stride));
                let (c, s) = (_mm512_loadu_ps(cos.add(i)), _mm512_loadu_ps(sin.add(i)));
                let y0 = _mm512_sub_ps(_mm512_mul_ps(x0, c), _mm512_mul_ps(x1, s));
                let y1 = _mm512_add_ps(_mm512_mul_ps(x0, s), _mm512_mul_ps(x1, c));
                _mm512_storeu_ps(dst.add(i), y0);
                _mm512_storeu_ps(dst.add(i + stride), y1);
            }
        }
        whole
    }

    /// Split pairs, 8 per iteration.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn split_avx2(
        src: *const f32,
        dst: *mut f32,
        stride: usize,
        cos: *const f32,
        sin: *const f32,
        n: usize,
    ) -> usize {
        let whole = n / 8 * 8;
        for i in (0..whole).step_by(8) {
            // SAFETY: i + 8 <= n; i + stride + 8 <= stride + n.
            unsafe {
                let x0 = _mm256_loadu_ps(src.add(i));
                let x1 = _mm256_loadu_ps(src.add(i + stride));
                let (c, s) = (_mm256_loadu_ps(cos.add(i)), _mm256_loadu_ps(sin.add(i)));
                let y0 = _mm256_sub_ps(_mm256_mul_ps(x0, c), _mm256_mul_ps(x1, s));
                let y1 = _mm256_add_ps(_mm256_mul_ps(x0, s), _mm256_mul_ps(x1, c));
                _mm256_storeu_ps(dst.add(i), y0);
                _mm256_storeu_ps(dst.add(i + stride), y1);
            }
        }
        whole
    }
}

/// ROPE over this thread's rows (dimensions 1..5 of a, positions indexed by dimension 2).
/// The cos/sin cache is filled once per token (dimension 2), as GGML does, and shared by the
/// token's heads; for the split modes it is also laid out as a cos run and a sin run. Packed
/// F32 rows are rotated from a into dst directly; other rows go through the thread's f32
/// scratch row (F16 rows converted with F16C).
pub(super) unsafe fn rope(n: &NodePtrs, p: &Params) {
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
