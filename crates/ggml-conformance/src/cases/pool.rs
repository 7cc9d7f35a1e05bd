//! POOL_1D, POOL_2D (max and average; GGML's `test_pool1d`, `test_pool2d`) and UPSCALE in
//! every mode (nearest, bilinear, bicubic, with and without ALIGN_CORNERS, bilinear with
//! ANTIALIAS; GGML's `test_upscale`, `test_interpolate`).

use ggml::ops::{PoolOp, ScaleMode, SCALE_FLAG_ALIGN_CORNERS, SCALE_FLAG_ANTIALIAS};
use ggml::Type;

use crate::case::{Case, Input, Layout, Vars};
use crate::host::{shape, Host};

/// Max (−f32::MAX when the window holds no element) or the sum divided by `divisor` (the
/// number of elements inside the window, or the window's area for POOL_2D's average).
fn pool_value(op: PoolOp, vals: &[f64], area: Option<usize>) -> f64 {
    match op {
        PoolOp::Max => vals.iter().cloned().fold(-(f32::MAX as f64), f64::max),
        PoolOp::Avg => {
            let n = area.unwrap_or(vals.len());
            if n == 0 {
                0.0
            } else {
                vals.iter().sum::<f64>() / n as f64
            }
        }
    }
}

/// The window `[o·s − p, o·s − p + k)` of an axis of `n` elements, clipped to it.
fn window(o: usize, k: i32, s: i32, p: i32, n: usize) -> impl Iterator<Item = usize> {
    let start = o as i64 * s as i64 - p as i64;
    (start..start + k as i64).filter_map(move |j| (j >= 0 && j < n as i64).then_some(j as usize))
}

fn pool_out(n: i64, k: i32, s: i32, p: i32) -> i64 {
    (n + 2 * p as i64 - k as i64) / s as i64 + 1
}

fn op_name(op: PoolOp) -> &'static str {
    match op {
        PoolOp::Max => "max",
        PoolOp::Avg => "avg",
    }
}

fn pool_1d(out: &mut Vec<Case>) {
    // (ne, k0, s0, p0)
    let grid: [(&[i64], i32, i32, i32); 5] = [
        (&[10, 3, 2, 1], 3, 1, 0),
        (&[17, 5, 1, 1], 4, 2, 1),
        (&[9, 2, 3, 2], 2, 3, 1),
        (&[5, 3, 1, 1], 5, 1, 2),
        (&[1, 1, 1, 1], 1, 1, 0),
    ];
    for (ne, k0, s0, p0) in grid {
        for op in [PoolOp::Max, PoolOp::Avg] {
            for ty in [Type::F32, Type::F16, Type::BF16] {
                for layout in [Layout::Contiguous, Layout::Padded] {
                    if layout == Layout::Padded && (ty != Type::F32 || ne[2] > 1) {
                        continue;
                    }
                    let vars = Vars::new()
                        .ty("type", ty)
                        .list("ne", ne)
                        .val("op", op_name(op))
                        .val("k0", k0)
                        .val("s0", s0)
                        .val("p0", p0)
                        .flag("v", layout == Layout::Padded);
                    out.push(Case::new(
                        "POOL_1D",
                        vars,
                        vec![Input::new(ty, ne).layout(layout)],
                        move |ctx, x| ctx.pool_1d(&x[0], op, k0, s0, p0),
                        move |x| {
                            let ow = pool_out(x[0].ne[0] as i64, k0, s0, p0) as usize;
                            x[0].map_rows(ow, |_, row| {
                                (0..ow)
                                    .map(|o| {
                                        let vals: Vec<f64> = window(o, k0, s0, p0, row.len())
                                            .map(|j| row[j])
                                            .collect();
                                        pool_value(op, &vals, None)
                                    })
                                    .collect()
                            })
                        },
                    ));
                }
            }
        }
    }
}

fn pool_2d(out: &mut Vec<Case>) {
    // (ne, k, s, p)
    let grid: [([i64; 4], _, _, _); 5] = [
        ([10, 10, 3, 1], [3, 3], [1, 1], [0, 0]),
        ([13, 9, 2, 2], [3, 2], [2, 1], [1, 1]),
        ([8, 11, 1, 1], [2, 4], [2, 3], [1, 2]),
        ([5, 5, 4, 1], [5, 5], [1, 1], [2, 2]),
        ([1, 1, 2, 1], [1, 1], [1, 1], [0, 0]),
    ];
    for (ne, k, s, p) in grid {
        for op in [PoolOp::Max, PoolOp::Avg] {
            for ty in [Type::F32, Type::F16, Type::BF16] {
                let vars = Vars::new()
                    .ty("type", ty)
                    .list("ne", &ne)
                    .val("op", op_name(op))
                    .val("k0", k[0])
                    .val("k1", k[1])
                    .val("s0", s[0])
                    .val("s1", s[1])
                    .val("p0", p[0])
                    .val("p1", p[1]);
                out.push(Case::new(
                    "POOL_2D",
                    vars,
                    vec![Input::new(ty, &ne)],
                    move |ctx, x| {
                        ctx.pool_2d(&x[0], op, k[0], k[1], s[0], s[1], p[0] as f32, p[1] as f32)
                    },
                    move |x| {
                        let a = &x[0];
                        let ow = pool_out(a.ne[0] as i64, k[0], s[0], p[0]);
                        let oh = pool_out(a.ne[1] as i64, k[1], s[1], p[1]);
                        let ne = [ow, oh, a.ne[2] as i64, a.ne[3] as i64];
                        Host::from_fn(shape(&ne), |i| {
                            let mut vals = Vec::new();
                            for y in window(i[1], k[1], s[1], p[1], a.ne[1]) {
                                for xx in window(i[0], k[0], s[0], p[0], a.ne[0]) {
                                    vals.push(a.at([xx, y, i[2], i[3], 0]));
                                }
                            }
                            pool_value(op, &vals, Some((k[0] * k[1]) as usize))
                        })
                    },
                ));
            }
        }
    }
}

/// The source coordinate map of one axis, computed in f32 as GGML defines it.
#[derive(Clone, Copy)]
struct Axis {
    /// Scale factor `out / in` (or `(out − 1) / (in − 1)` with ALIGN_CORNERS).
    sf: f32,
    /// Half-pixel offset: ½, or 0 with ALIGN_CORNERS.
    off: f32,
    n_in: usize,
}

impl Axis {
    fn new(n_in: usize, n_out: usize, align: bool, spatial: bool) -> Axis {
        let mut sf = n_out as f32 / n_in as f32;
        if align && spatial && n_in > 1 && n_out > 1 {
            sf = (n_out - 1) as f32 / (n_in - 1) as f32;
        }
        Axis {
            sf,
            off: if align { 0.0 } else { 0.5 },
            n_in,
        }
    }

    /// Nearest: `⌊i / sf⌋`.
    fn nearest(&self, i: usize) -> usize {
        ((i as f32 / self.sf) as usize).min(self.n_in - 1)
    }

    /// The sampling position `(i + off)/sf − off`.
    fn pos(&self, i: usize) -> f64 {
        ((i as f32 + self.off) / self.sf - self.off) as f64
    }

    fn clamp(&self, j: i64) -> usize {
        j.clamp(0, self.n_in as i64 - 1) as usize
    }

    /// Bilinear: the two source indices and the weight of the second.
    fn linear(&self, i: usize) -> (usize, usize, f64) {
        let x = self.pos(i);
        let x0 = self.clamp(x.floor() as i64);
        let x1 = self.clamp(x.floor() as i64 + 1);
        (x0, x1, (x - x0 as f64).clamp(0.0, 1.0))
    }

    /// Bicubic (a = −0.75): four source indices (clamped) and their weights.
    fn cubic(&self, i: usize) -> [(usize, f64); 4] {
        let x = self.pos(i);
        let x0 = x.floor();
        let t = x - x0;
        let a = -0.75;
        let near = |d: f64| ((a + 2.0) * d - (a + 3.0)) * d * d + 1.0;
        let far = |d: f64| ((a * d - 5.0 * a) * d + 8.0 * a) * d - 4.0 * a;
        let w = [far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)];
        std::array::from_fn(|k| (self.clamp(x0 as i64 - 1 + k as i64), w[k]))
    }

    /// Antialiased bilinear: the triangle filter as wide as the scale when shrinking,
    /// normalised over the source elements it covers: (index, weight) pairs.
    /// The window's ends are computed in f32 as GGML does (`1/sf` rounds to a whole number
    /// there where f64 would stop just short of it).
    fn triangle(&self, i: usize) -> Vec<(usize, f64)> {
        let support = (1.0 / self.sf).max(1.0);
        let centre = (i as f32 + self.off) / self.sf;
        let lo = (centre - support + self.off).max(0.0) as usize;
        let hi = ((centre + support + self.off) as usize).min(self.n_in);
        (lo..hi)
            .map(|j| {
                let d = (j as f64 - centre as f64 + self.off as f64) / support as f64;
                (j, (1.0 - d.abs()).max(0.0))
            })
            .filter(|&(_, w)| w > 0.0)
            .collect()
    }
}

fn upscale_ref(a: &Host, ne: [i64; 4], mode: u32) -> Host {
    let align = mode & SCALE_FLAG_ALIGN_CORNERS != 0;
    let ax: [Axis; 4] = std::array::from_fn(|d| Axis::new(a.ne[d], ne[d] as usize, align, d < 2));
    Host::from_fn(shape(&ne), |i| {
        let (i2, i3) = (ax[2].nearest(i[2]), ax[3].nearest(i[3]));
        let src = |x: usize, y: usize| a.at([x, y, i2, i3, 0]);
        match mode & 0xFF {
            0 => src(ax[0].nearest(i[0]), ax[1].nearest(i[1])),
            1 if mode & SCALE_FLAG_ANTIALIAS != 0 => {
                let (wx, wy) = (ax[0].triangle(i[0]), ax[1].triangle(i[1]));
                let (mut sum, mut total) = (0.0, 0.0);
                for &(y, w1) in &wy {
                    for &(x, w0) in &wx {
                        sum += src(x, y) * w0 * w1;
                        total += w0 * w1;
                    }
                }
                if total > 0.0 {
                    sum / total
                } else {
                    0.0
                }
            }
            1 => {
                let (x0, x1, dx) = ax[0].linear(i[0]);
                let (y0, y1, dy) = ax[1].linear(i[1]);
                src(x0, y0) * (1.0 - dx) * (1.0 - dy)
                    + src(x1, y0) * dx * (1.0 - dy)
                    + src(x0, y1) * (1.0 - dx) * dy
                    + src(x1, y1) * dx * dy
            }
            _ => {
                let (wx, wy) = (ax[0].cubic(i[0]), ax[1].cubic(i[1]));
                wy.iter()
                    .map(|&(y, w1)| wx.iter().map(|&(x, w0)| src(x, y) * w0).sum::<f64>() * w1)
                    .sum()
            }
        }
    })
}

fn upscale(out: &mut Vec<Case>) {
    // (input, result) shapes: enlarging (whole and fractional factors), shrinking, mixed,
    // dimensions 2 and 3 resized too, one-element axes.
    let grid: [([i64; 4], [i64; 4]); 7] = [
        ([5, 4, 3, 2], [10, 8, 3, 2]),
        ([7, 5, 2, 1], [11, 13, 2, 1]),
        ([12, 9, 2, 1], [5, 4, 2, 1]),
        ([6, 6, 3, 2], [9, 4, 5, 3]),
        ([1, 3, 1, 1], [4, 1, 1, 1]),
        ([2, 2, 1, 1], [3, 3, 1, 1]),
        ([16, 15, 1, 1], [7, 31, 1, 1]),
    ];
    let modes: [(u32, &str); 8] = [
        (ScaleMode::Nearest as u32, "nearest"),
        (ScaleMode::Bilinear as u32, "bilinear"),
        (ScaleMode::Bicubic as u32, "bicubic"),
        (
            ScaleMode::Nearest as u32 | SCALE_FLAG_ALIGN_CORNERS,
            "nearest|align_corners",
        ),
        (
            ScaleMode::Bilinear as u32 | SCALE_FLAG_ALIGN_CORNERS,
            "bilinear|align_corners",
        ),
        (
            ScaleMode::Bicubic as u32 | SCALE_FLAG_ALIGN_CORNERS,
            "bicubic|align_corners",
        ),
        (
            ScaleMode::Bilinear as u32 | SCALE_FLAG_ANTIALIAS,
            "bilinear|antialias",
        ),
        (
            ScaleMode::Bilinear as u32 | SCALE_FLAG_ANTIALIAS | SCALE_FLAG_ALIGN_CORNERS,
            "bilinear|antialias|align_corners",
        ),
    ];
    for (ne, ne_out) in grid {
        for (mode, mname) in modes {
            for layout in [Layout::Contiguous, Layout::Transposed] {
                // GGML's test_interpolate grid: transposed input for the plain modes only.
                if layout == Layout::Transposed && mode > ScaleMode::Bicubic as u32 {
                    continue;
                }
                let vars = Vars::new()
                    .ty("type", Type::F32)
                    .list("ne", &ne)
                    .list("ne_tgt", &ne_out)
                    .val("mode", mname)
                    .flag("transpose", layout == Layout::Transposed);
                out.push(Case::new(
                    "UPSCALE",
                    vars,
                    vec![Input::new(Type::F32, &ne).layout(layout)],
                    move |ctx, x| {
                        let [a, b, c, d] = ne_out;
                        ctx.interpolate(&x[0], a, b, c, d, mode)
                    },
                    move |x| upscale_ref(&x[0], ne_out, mode),
                ));
            }
        }
    }
    // ggml_upscale (a whole factor in dimensions 0 and 1).
    for (factor, mode) in [(2, ScaleMode::Nearest), (3, ScaleMode::Bilinear)] {
        let ne = [4i64, 3, 2, 1];
        out.push(Case::new(
            "UPSCALE",
            Vars::new()
                .ty("type", Type::F32)
                .list("ne", &ne)
                .val("scale_factor", factor)
                .val("mode", format_args!("{mode:?}").to_string().to_lowercase()),
            vec![Input::new(Type::F32, &ne)],
            move |ctx, x| ctx.upscale(&x[0], factor, mode),
            move |x| {
                let t = [ne[0] * factor as i64, ne[1] * factor as i64, ne[2], ne[3]];
                upscale_ref(&x[0], t, mode as u32)
            },
        ));
    }
}

/// The pooling and resizing cases.
pub fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    pool_1d(&mut out);
    pool_2d(&mut out);
    upscale(&mut out);
    out
}
