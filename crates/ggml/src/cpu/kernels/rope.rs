//! ROPE: rows rotated pair by pair by angles from the token's position, computed in f32 with
//! GGML's recurrences (the angle of pair `i + 1` is that of pair `i` times
//! `freq_base^(−2/n_dims)`), YaRN's ramp and the optional frequency factors.

use super::vec::wide_fn;
use super::{operand, unsupported, NodePtrs, Params, Planned, TensorPtr};
use crate::error::Result;
use crate::ops::{rope_yarn_corr_dims, RopeParams, ROPE_TYPE_IMROPE, ROPE_TYPE_MROPE};
use crate::ops::{ROPE_TYPE_NORMAL, ROPE_TYPE_VISION};
use crate::tensor::Tensor;
use crate::types::Type;

/// F32 and F16 rows; scratch: the row and its cos/sin cache (`ne0` f32 each, rounded up to
/// whole pairs).
pub(super) fn plan(t: &Tensor) -> Result<Planned> {
    let a = operand(t, 0)?.ty();
    if !matches!(a, Type::F32 | Type::F16) || t.ty() != a {
        return Err(unsupported(t));
    }
    let ne0 = t.ne()[0] as usize;
    Ok(Planned::new(rope, (ne0 + ne0.next_multiple_of(2)) * 4))
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

/// Rotates the interleaved pairs `(x[2i], x[2i + 1])` of `x` by the cache's `(cos, sin)`
/// pairs in order (NORMAL mode): both slices are walked in whole pairs, so the loop vectorises
/// (pairs de-interleaved by shuffles).
#[inline(always)]
fn rotate_interleaved(x: &mut [f32], cache: &[f32]) {
    let n = x.len().min(cache.len()) / 2 * 2;
    let (x, cache) = (&mut x[..n], &cache[..n]);
    for (xp, cs) in x.chunks_exact_mut(2).zip(cache.chunks_exact(2)) {
        let (x0, x1) = (xp[0], xp[1]);
        xp[0] = x0 * cs[0] - x1 * cs[1];
        xp[1] = x0 * cs[1] + x1 * cs[0];
    }
}

/// Rotates `x[i]` with `x[i + stride]` for `i` in `0..pairs` by the cache's `(cos, sin)`
/// pairs in order (NEOX, MROPE and VISION modes): the two halves as separate slices, so the
/// loop vectorises.
#[inline(always)]
fn rotate_split(x: &mut [f32], pairs: usize, stride: usize, cache: &[f32]) {
    let (lo, hi) = x.split_at_mut(stride);
    let n = pairs.min(lo.len()).min(hi.len()).min(cache.len() / 2);
    let (lo, hi, cache) = (&mut lo[..n], &mut hi[..n], &cache[..2 * n]);
    for ((a, b), cs) in lo.iter_mut().zip(hi.iter_mut()).zip(cache.chunks_exact(2)) {
        let (x0, x1) = (*a, *b);
        *a = x0 * cs[0] - x1 * cs[1];
        *b = x0 * cs[1] + x1 * cs[0];
    }
}

/// ROPE over this thread's rows (dimensions 1..5 of a, positions indexed by dimension 2).
pub(super) unsafe fn rope(n: &NodePtrs, p: &Params) {
    rope_wide(n, p)
}

wide_fn!(
    /// [`rope_rows`] compiled for the CPU's ISA path.
    fn rope_wide(n: &NodePtrs, p: &Params) = rope_rows
);

/// Each row is loaded as f32 into scratch (F16 rows converted), rotated there and stored; the
/// cos/sin cache is filled once per token (dimension 2), as GGML does, and shared by the
/// token's heads.
#[inline(always)]
fn rope_rows(n: &NodePtrs, p: &Params) {
    let prm: RopeParams = n.params();
    let (d, a, b, c) = (&n.dst, &n.src[0], &n.src[1], &n.src[2]);
    let ne0 = a.ne[0] as usize;
    let n_dims = prm.n_dims as usize;
    let n_offs = prm.n_offs as usize;
    let ne2 = a.ne[2] as usize;
    let vision = prm.mode == ROPE_TYPE_VISION;
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
    // The vision mode rotates ne0 / 2 pairs, the others n_dims / 2.
    let pairs = if vision { ne0 / 2 } else { n_dims / 2 };
    // SAFETY: the plan sized each thread's scratch for the row and a cache of ne0 rounded up.
    let scratch = unsafe { p.scratch_f32(ne0 + ne0.next_multiple_of(2)) };
    let (buf, rest) = scratch.split_at_mut(ne0);
    let cache = &mut rest[..2 * pairs];
    let rows = p.range(a.nrows());
    let mut idx = a.unravel_row(rows.start);
    let mut last_i2 = usize::MAX;
    for _ in rows {
        if idx[1] != last_i2 {
            // SAFETY: the shape rule sized b (positions per token) and c (factors per pair).
            unsafe { fill_cache(&prm, &ang, b, c, idx[1], ne2, cache) };
            last_i2 = idx[1];
        }
        // SAFETY: rows of a and dst (same shape) with ne0 elements; the row is read whole
        // before the result row is written, so an in-place node is fine.
        unsafe { a.read_row(a.row(idx), buf) };
        let x = &mut buf[n_offs..];
        match prm.mode {
            ROPE_TYPE_NORMAL => rotate_interleaved(&mut x[..n_dims], cache),
            _ if vision => rotate_split(x, pairs, n_dims, cache),
            _ => rotate_split(x, pairs, n_dims / 2, cache),
        }
        // SAFETY: as above; buf is scratch, not the result's memory.
        unsafe { d.write_row(d.row(idx), buf) };
        a.next_row(&mut idx);
    }
}
