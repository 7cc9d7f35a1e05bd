//! UPSCALE (F32): nearest, bilinear (optionally antialiased) and bicubic resizing, with the
//! sampling positions computed in f32 exactly as GGML's CPU does. Source indices are clamped
//! into the source (GGML's nearest mode relies on float rounding for that).

use super::{operand, unsupported, NodePtrs, Params, Planned};
use crate::error::Result;
use crate::ops::{ScaleMode, UpscaleParams, SCALE_FLAG_ALIGN_CORNERS, SCALE_FLAG_ANTIALIAS};
use crate::tensor::Tensor;
use crate::types::Type;

/// The kernel for an F32 source, with scratch for one plane of it.
pub(super) fn plan(t: &Tensor) -> Result<Planned> {
    if operand(t, 0)?.ty() != Type::F32 || t.ty() != Type::F32 {
        return Err(unsupported(t));
    }
    let ne = operand(t, 0)?.ne();
    Ok(Planned::new(upscale, (ne[0] * ne[1]) as usize * 4))
}

/// The source index `i / sf` truncated and clamped into `0..n`.
#[inline(always)]
fn nearest(i: usize, sf: f32, n: i64) -> usize {
    ((i as f32 / sf) as i64).clamp(0, n - 1) as usize
}

/// A plane of the source as f32, `w` elements per row.
struct Plane<'a> {
    v: &'a [f32],
    w: i64,
    h: i64,
}

impl Plane<'_> {
    /// Element `(x, y)` with both clamped into the plane.
    #[inline(always)]
    fn at(&self, x: i64, y: i64) -> f32 {
        let x = x.clamp(0, self.w - 1);
        let y = y.clamp(0, self.h - 1);
        self.v[(y * self.w + x) as usize]
    }
}

/// Bicubic convolution weights (a = −0.75) of the four taps around fraction `t`.
fn cubic_weights(t: f32) -> [f32; 4] {
    const A: f32 = -0.75;
    let near = |x: f32| ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0;
    let far = |x: f32| ((A * x - 5.0 * A) * x + 8.0 * A) * x - 4.0 * A;
    [far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)]
}

/// The triangle filter of antialiased bilinear resizing.
fn triangle(x: f32) -> f32 {
    (1.0 - x.abs()).max(0.0)
}

unsafe fn upscale(n: &NodePtrs, p: &Params) {
    let UpscaleParams { mode } = n.params();
    let (a, d) = (&n.src[0], &n.dst);
    let flags = mode as u32;
    let (ne00, ne01) = (a.ne[0], a.ne[1]);
    let mut sf: [f32; 4] = std::array::from_fn(|i| d.ne[i] as f32 / a.ne[i] as f32);
    let mut offset = 0.5f32;
    if flags & SCALE_FLAG_ALIGN_CORNERS != 0 {
        offset = 0.0;
        for (i, f) in sf.iter_mut().enumerate().take(2) {
            if d.ne[i] > 1 && a.ne[i] > 1 {
                *f = (d.ne[i] - 1) as f32 / (a.ne[i] - 1) as f32;
            }
        }
    }
    let low = flags & 0xFF;
    let antialias = flags & SCALE_FLAG_ANTIALIAS != 0;
    let rows = p.range(d.nrows());
    if rows.is_empty() {
        return;
    }
    let w = ne00 as usize;
    // SAFETY: the plan sized the scratch for one plane of the source.
    let buf = unsafe { p.scratch_f32(w * ne01 as usize) };
    let mut loaded = None;
    for r in rows {
        let idx = d.unravel_row(r);
        let i1 = idx[0];
        let src = (
            nearest(idx[1], sf[2], a.ne[2]),
            nearest(idx[2], sf[3], a.ne[3]),
        );
        if loaded != Some(src) {
            loaded = Some(src);
            for (y, row) in buf.chunks_exact_mut(w.max(1)).enumerate() {
                // SAFETY: row (y, i2, i3) of the source holds ne00 elements.
                unsafe { a.read_row(a.row([y, src.0, src.1, 0]), &mut row[..w]) };
            }
        }
        let plane = Plane {
            v: buf,
            w: ne00,
            h: ne01,
        };
        let drow = d.row(idx);
        for i0 in 0..d.ne[0] as usize {
            let v = if low == ScaleMode::Nearest as u32 {
                plane.at(
                    nearest(i0, sf[0], ne00) as i64,
                    nearest(i1, sf[1], ne01) as i64,
                )
            } else if low == ScaleMode::Bilinear as u32 && antialias {
                let y = (i1 as f32 + offset) / sf[1];
                let x = (i0 as f32 + offset) / sf[0];
                let support = [1.0f32.max(1.0 / sf[0]), 1.0f32.max(1.0 / sf[1])];
                let inv = [1.0 / support[0], 1.0 / support[1]];
                let x0 = ((x - support[0] + offset) as i64).max(0);
                let x1 = ((x + support[0] + offset) as i64).min(ne00);
                let y0 = ((y - support[1] + offset) as i64).max(0);
                let y1 = ((y + support[1] + offset) as i64).min(ne01);
                let (mut val, mut total) = (0f32, 0f32);
                for sy in y0..y1 {
                    let wy = triangle((sy as f32 - y + offset) * inv[1]);
                    for sx in x0..x1 {
                        let w = triangle((sx as f32 - x + offset) * inv[0]) * wy;
                        if w > 0.0 {
                            val += plane.at(sx, sy) * w;
                            total += w;
                        }
                    }
                }
                if total > 0.0 {
                    val / total
                } else {
                    val
                }
            } else {
                let y = (i1 as f32 + offset) / sf[1] - offset;
                let x = (i0 as f32 + offset) / sf[0] - offset;
                let (fy, fx) = (y.floor(), x.floor());
                let (y0, x0) = (fy as i64, fx as i64);
                if low == ScaleMode::Bilinear as u32 {
                    let yc = y0.clamp(0, ne01 - 1);
                    let xc = x0.clamp(0, ne00 - 1);
                    let dy = (y - yc as f32).clamp(0.0, 1.0);
                    let dx = (x - xc as f32).clamp(0.0, 1.0);
                    let (y1, x1) = ((y0 + 1).clamp(0, ne01 - 1), (x0 + 1).clamp(0, ne00 - 1));
                    plane.at(xc, yc) * (1.0 - dx) * (1.0 - dy)
                        + plane.at(x1, yc) * dx * (1.0 - dy)
                        + plane.at(xc, y1) * (1.0 - dx) * dy
                        + plane.at(x1, y1) * dx * dy
                } else {
                    let (wx, wy) = (cubic_weights(x - fx), cubic_weights(y - fy));
                    let mut val = 0f32;
                    for (j, wyj) in wy.iter().enumerate() {
                        let yy = y0 + j as i64 - 1;
                        let row: f32 = (0..4)
                            .map(|i| plane.at(x0 + i as i64 - 1, yy) * wx[i])
                            .fold(0.0, |acc, v| acc + v);
                        val += row * wyj;
                    }
                    val
                }
            };
            // SAFETY: i0 < ne0 of a result row owned by this thread.
            unsafe { d.set(drow, i0, v) };
        }
    }
}
