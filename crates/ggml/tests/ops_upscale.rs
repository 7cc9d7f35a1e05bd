//! UPSCALE (`upscale`, `upscale_ext`, `interpolate`) against references written from GGML's
//! definition: sampling positions in f32 as GGML states them, the interpolation itself in f64.
//! Nearest, bilinear, bicubic, align-corners, antialiasing, growing and shrinking, every
//! dimension, non-contiguous inputs, 1 to 3 threads; shape-rule errors.

mod common;

use common::*;
use ggml::ops::{ScaleMode, SCALE_FLAG_ALIGN_CORNERS, SCALE_FLAG_ANTIALIAS};
use ggml::{Context, Type};

mod reference {
    use super::{Host, ScaleMode, SCALE_FLAG_ALIGN_CORNERS, SCALE_FLAG_ANTIALIAS};

    /// `a` clamped into its plane `(i2, i3)`.
    fn px(a: &Host, x: i64, y: i64, i2: usize, i3: usize) -> f64 {
        let x = x.clamp(0, a.ne[0] as i64 - 1) as usize;
        let y = y.clamp(0, a.ne[1] as i64 - 1) as usize;
        a.at([x, y, i2, i3, 0])
    }

    /// Keys' cubic convolution kernel with a = −0.75.
    fn keys(x: f64) -> f64 {
        let a = -0.75;
        let x = x.abs();
        if x <= 1.0 {
            (a + 2.0) * x * x * x - (a + 3.0) * x * x + 1.0
        } else if x < 2.0 {
            a * x * x * x - 5.0 * a * x * x + 8.0 * a * x - 4.0 * a
        } else {
            0.0
        }
    }

    /// `a` resized to `ne` by `mode` (a [`ScaleMode`] value with flags).
    pub fn upscale(a: &Host, ne: [usize; 5], mode: u32) -> Host {
        let mut sf: [f32; 4] = std::array::from_fn(|d| ne[d] as f32 / a.ne[d] as f32);
        let mut off = 0.5f32;
        if mode & SCALE_FLAG_ALIGN_CORNERS != 0 {
            off = 0.0;
            for d in 0..2 {
                if ne[d] > 1 && a.ne[d] > 1 {
                    sf[d] = (ne[d] - 1) as f32 / (a.ne[d] - 1) as f32;
                }
            }
        }
        let near = |i: usize, d: usize| ((i as f32 / sf[d]) as usize).min(a.ne[d] - 1);
        Host::from_fn(ne, |i| {
            let (i2, i3) = (near(i[2], 2), near(i[3], 3));
            let pos = |d: usize| (i[d] as f32 + off) / sf[d] - off;
            match mode & 0xFF {
                m if m == ScaleMode::Nearest as u32 => {
                    px(a, near(i[0], 0) as i64, near(i[1], 1) as i64, i2, i3)
                }
                m if m == ScaleMode::Bilinear as u32 && mode & SCALE_FLAG_ANTIALIAS != 0 => {
                    // Triangle filter as wide as 1/scale (at least 1) around the centre.
                    let c = [(i[0] as f32 + off) / sf[0], (i[1] as f32 + off) / sf[1]];
                    let support = [1f32.max(1.0 / sf[0]), 1f32.max(1.0 / sf[1])];
                    let range = |d: usize| {
                        let lo = ((c[d] - support[d] + off) as i64).max(0);
                        let hi = ((c[d] + support[d] + off) as i64).min(a.ne[d] as i64);
                        lo..hi
                    };
                    let w = |d: usize, s: i64| {
                        let t = (s as f64 - c[d] as f64 + off as f64) / support[d] as f64;
                        (1.0 - t.abs()).max(0.0)
                    };
                    let (mut v, mut total) = (0.0, 0.0);
                    for y in range(1) {
                        for x in range(0) {
                            let wt = w(0, x) * w(1, y);
                            if wt > 0.0 {
                                v += wt * px(a, x, y, i2, i3);
                                total += wt;
                            }
                        }
                    }
                    if total > 0.0 {
                        v / total
                    } else {
                        v
                    }
                }
                m if m == ScaleMode::Bilinear as u32 => {
                    let (x, y) = (pos(0), pos(1));
                    let (x0, y0) = (x.floor() as i64, y.floor() as i64);
                    let xc = x0.clamp(0, a.ne[0] as i64 - 1);
                    let yc = y0.clamp(0, a.ne[1] as i64 - 1);
                    let dx = (x as f64 - xc as f64).clamp(0.0, 1.0);
                    let dy = (y as f64 - yc as f64).clamp(0.0, 1.0);
                    (1.0 - dx) * (1.0 - dy) * px(a, xc, yc, i2, i3)
                        + dx * (1.0 - dy) * px(a, x0 + 1, yc, i2, i3)
                        + (1.0 - dx) * dy * px(a, xc, y0 + 1, i2, i3)
                        + dx * dy * px(a, x0 + 1, y0 + 1, i2, i3)
                }
                _ => {
                    let (x, y) = (pos(0), pos(1));
                    let (x0, y0) = (x.floor() as i64, y.floor() as i64);
                    let (tx, ty) = ((x - x.floor()) as f64, (y - y.floor()) as f64);
                    let mut v = 0.0;
                    for jy in -1..=2i64 {
                        for jx in -1..=2i64 {
                            v += keys(jx as f64 - tx)
                                * keys(jy as f64 - ty)
                                * px(a, x0 + jx, y0 + jy, i2, i3);
                        }
                    }
                    v
                }
            }
        })
    }
}

const MODES: [(&str, u32); 7] = [
    ("nearest", ScaleMode::Nearest as u32),
    ("bilinear", ScaleMode::Bilinear as u32),
    ("bicubic", ScaleMode::Bicubic as u32),
    (
        "nearest|align",
        ScaleMode::Nearest as u32 | SCALE_FLAG_ALIGN_CORNERS,
    ),
    (
        "bilinear|align",
        ScaleMode::Bilinear as u32 | SCALE_FLAG_ALIGN_CORNERS,
    ),
    (
        "bicubic|align",
        ScaleMode::Bicubic as u32 | SCALE_FLAG_ALIGN_CORNERS,
    ),
    (
        "bilinear|antialias",
        ScaleMode::Bilinear as u32 | SCALE_FLAG_ANTIALIAS,
    ),
];

#[test]
fn interpolate_every_mode_and_size() {
    for (mname, mode) in MODES {
        for (from, to) in [
            ([5i64, 4, 3, 2], [10i64, 8, 3, 2]),
            ([7, 5, 2, 1], [3, 11, 4, 3]),
            ([6, 6, 3, 2], [6, 2, 2, 1]),
            ([1, 3, 1, 1], [4, 1, 2, 1]),
            ([9, 8, 1, 1], [4, 3, 1, 1]),
        ] {
            for layout in [
                Layout::Contiguous,
                Layout::Permuted([1, 0, 3, 2]),
                Layout::Padded,
            ] {
                let name =
                    format!("UPSCALE(mode={mname},ne={from:?},ne_tgt={to:?},layout={layout:?})");
                check(&name, TOL, |ctx, rng| {
                    let (a, ha) = input(ctx, Type::F32, &from, layout, rng, -1.0, 1.0)?;
                    let out = ctx.interpolate(&a, to[0], to[1], to[2], to[3], mode)?;
                    Ok((out, reference::upscale(&ha, shape(&to), mode)))
                });
            }
        }
    }
}

#[test]
fn upscale_and_upscale_ext() {
    for mode in [ScaleMode::Nearest, ScaleMode::Bilinear, ScaleMode::Bicubic] {
        check(&format!("upscale(mode={mode:?},sf=3)"), TOL, |ctx, rng| {
            let (a, ha) = input(
                ctx,
                Type::F32,
                &[4, 3, 2],
                Layout::Contiguous,
                rng,
                -1.0,
                1.0,
            )?;
            let out = ctx.upscale(&a, 3, mode)?;
            Ok((out, reference::upscale(&ha, [12, 9, 2, 1, 1], mode as u32)))
        });
        check(&format!("upscale_ext(mode={mode:?})"), TOL, |ctx, rng| {
            let (a, ha) = input(
                ctx,
                Type::F32,
                &[4, 3, 2],
                Layout::Contiguous,
                rng,
                -1.0,
                1.0,
            )?;
            let out = ctx.upscale_ext(&a, 7, 5, 3, 2, mode)?;
            Ok((out, reference::upscale(&ha, [7, 5, 3, 2, 1], mode as u32)))
        });
    }
}

#[test]
fn shape_errors() {
    let ctx = Context::init(1 << 20, true).unwrap();
    let a = ctx.new_tensor_2d(Type::F32, 4, 3).unwrap();
    assert_err(
        ctx.upscale(&a, 1, ScaleMode::Nearest),
        &["UPSCALE", "scale_factor = 1"],
    );
    assert_err(
        ctx.interpolate(&a, 8, 6, 1, 1, 3),
        &["UPSCALE", "mode = 0x3"],
    );
    assert_err(
        ctx.interpolate(&a, 8, 6, 1, 1, 1 << 12),
        &["UPSCALE", "mode = 0x1000"],
    );
    assert_err(
        ctx.interpolate(
            &a,
            8,
            6,
            1,
            1,
            ScaleMode::Bicubic as u32 | SCALE_FLAG_ANTIALIAS,
        ),
        &["UPSCALE", "ANTIALIAS"],
    );
    assert_err(
        ctx.interpolate(&a, -1, 6, 1, 1, 0),
        &["UPSCALE", "non-negative"],
    );
    let h = ctx.new_tensor_2d(Type::F16, 4, 3).unwrap();
    assert_err(
        ctx.interpolate(&h, 8, 6, 1, 1, 0),
        &["UPSCALE", "f16", "f32"],
    );
    let empty = ctx.new_tensor_2d(Type::F32, 0, 3).unwrap();
    assert_err(
        ctx.interpolate(&empty, 8, 6, 1, 1, 0),
        &["UPSCALE", "empty"],
    );
    assert!(ctx.interpolate(&empty, 0, 6, 1, 1, 0).is_ok());
}
