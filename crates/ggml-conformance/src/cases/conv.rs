//! The convolution family (GGML's `test_im2col`, `test_im2col_3d`, `test_conv_1d`,
//! `test_conv_2d`, `test_conv_2d_dw`, `test_conv_3d`, `test_conv_transpose_1d`,
//! `test_conv_transpose_2d`): IM2COL and IM2COL_3D, COL2IM_1D, the direct CONV_2D,
//! CONV_2D_DW and CONV_3D, CONV_TRANSPOSE_1D and CONV_TRANSPOSE_2D, and GGML's composite
//! convolutions (`conv_1d`, `conv_1d_dw`, `conv_2d`, `conv_2d_dw`, `conv_3d`, built of im2col
//! and mul_mat; named after their IM2COL/IM2COL_3D node with `via=`). References: the
//! convolution sums from their definitions, an input position outside the image reading 0.

use ggml::{Context, Tensor, Type};

use crate::case::{Case, Input, Layout, Metric, Vars, NMSE_MATMUL};
use crate::host::{shape, Host, Shape};

/// Element `i` of `b` (logical, signed), 0 outside its shape.
fn tap(b: &Host, i: [i64; 4]) -> f64 {
    if (0..4).any(|d| i[d] < 0 || i[d] >= b.ne[d] as i64) {
        return 0.0;
    }
    b.at([
        i[0] as usize,
        i[1] as usize,
        i[2] as usize,
        i[3] as usize,
        0,
    ])
}

/// Output size of a convolution axis: `(n + 2p − d(k − 1) − 1) / s + 1`.
fn conv_out(n: i64, k: i64, s: i64, p: i64, d: i64) -> i64 {
    (n + 2 * p - d * (k - 1) - 1) / s + 1
}

/// Stride, padding and dilation of the (up to) three spatial axes.
#[derive(Clone, Copy, Debug)]
struct Geo {
    s: [i64; 3],
    p: [i64; 3],
    d: [i64; 3],
}

impl Geo {
    fn new(s: [i64; 3], p: [i64; 3], d: [i64; 3]) -> Geo {
        Geo { s, p, d }
    }

    /// The input position of output `o` under kernel tap `k` along `axis`.
    fn at(&self, axis: usize, o: usize, k: usize) -> i64 {
        o as i64 * self.s[axis] + k as i64 * self.d[axis] - self.p[axis]
    }

    fn vars(&self, v: Vars, axes: usize) -> Vars {
        let mut v = v;
        for (name, x) in [("s", &self.s), ("p", &self.p), ("d", &self.d)] {
            for (a, val) in x.iter().enumerate().take(axes) {
                v = v.val(&format!("{name}{a}"), val);
            }
        }
        v
    }

    fn i32s(&self) -> ([i32; 3], [i32; 3], [i32; 3]) {
        let c = |x: [i64; 3]| x.map(|v| v as i32);
        (c(self.s), c(self.p), c(self.d))
    }
}

/// 2-D convolution `out[ox, oy, oc, n] = Σ a[kx, ky, ic, oc]·b[x, y, ic, n]` of
/// `a [KW, KH, IC, OC]` over `b [W, H, IC, N]`.
fn conv_2d_ref(a: &Host, b: &Host, g: Geo) -> Host {
    let [kw, kh, ic, oc] = [a.ne[0], a.ne[1], a.ne[2], a.ne[3]];
    let ow = conv_out(b.ne[0] as i64, kw as i64, g.s[0], g.p[0], g.d[0]) as usize;
    let oh = conv_out(b.ne[1] as i64, kh as i64, g.s[1], g.p[1], g.d[1]) as usize;
    Host::from_fn(
        shape(&[ow as i64, oh as i64, oc as i64, b.ne[3] as i64]),
        |i| {
            let mut sum = 0.0;
            for c in 0..ic {
                for ky in 0..kh {
                    for kx in 0..kw {
                        let x = [g.at(0, i[0], kx), g.at(1, i[1], ky), c as i64, i[3] as i64];
                        sum += a.at([kx, ky, c, i[2], 0]) * tap(b, x);
                    }
                }
            }
            sum
        },
    )
}

/// Depthwise 2-D convolution of `a [KW, KH, 1, C]` over `b [W, H, C, N]`.
fn conv_2d_dw_ref(a: &Host, b: &Host, g: Geo) -> Host {
    let [kw, kh] = [a.ne[0], a.ne[1]];
    let ow = conv_out(b.ne[0] as i64, kw as i64, g.s[0], g.p[0], g.d[0]);
    let oh = conv_out(b.ne[1] as i64, kh as i64, g.s[1], g.p[1], g.d[1]);
    Host::from_fn(shape(&[ow, oh, b.ne[2] as i64, b.ne[3] as i64]), |i| {
        let mut sum = 0.0;
        for ky in 0..kh {
            for kx in 0..kw {
                let x = [
                    g.at(0, i[0], kx),
                    g.at(1, i[1], ky),
                    i[2] as i64,
                    i[3] as i64,
                ];
                sum += a.at([kx, ky, 0, i[2], 0]) * tap(b, x);
            }
        }
        sum
    })
}

/// IM2COL (2-D): `[IC·KH·KW, OW, OH, N]`, or 1-D `[IC·K, OW, N]` for `b [W, IC, N]`.
fn im2col_ref(kernel: Shape, b: &Host, g: Geo, is_2d: bool) -> Host {
    if is_2d {
        let [kw, kh, ic] = [kernel[0], kernel[1], kernel[2]];
        let ow = conv_out(b.ne[0] as i64, kw as i64, g.s[0], g.p[0], g.d[0]);
        let oh = conv_out(b.ne[1] as i64, kh as i64, g.s[1], g.p[1], g.d[1]);
        let rows = (ic * kh * kw) as i64;
        Host::from_fn(shape(&[rows, ow, oh, b.ne[3] as i64]), |i| {
            let (kx, ky, c) = (i[0] % kw, i[0] / kw % kh, i[0] / (kw * kh));
            tap(
                b,
                [g.at(0, i[1], kx), g.at(1, i[2], ky), c as i64, i[3] as i64],
            )
        })
    } else {
        let [k, ic] = [kernel[0], kernel[1]];
        let ow = conv_out(b.ne[0] as i64, k as i64, g.s[0], g.p[0], g.d[0]);
        Host::from_fn(shape(&[(ic * k) as i64, ow, b.ne[2] as i64]), |i| {
            let (kx, c) = (i[0] % k, i[0] / k);
            tap(b, [g.at(0, i[1], kx), c as i64, i[2] as i64, 0])
        })
    }
}

/// 3-D geometry: the kernel `[KW, KH, KD, OC·IC]`, the input `[W, H, D, N·IC]`.
struct Vol {
    k: [usize; 3],
    o: [usize; 3],
    ic: usize,
    n: usize,
}

fn vol(kernel: Shape, b: &Host, ic: usize, g: Geo) -> Vol {
    let k = [kernel[0], kernel[1], kernel[2]];
    let o = std::array::from_fn(|a| {
        conv_out(b.ne[a] as i64, k[a] as i64, g.s[a], g.p[a], g.d[a]) as usize
    });
    Vol {
        k,
        o,
        ic,
        n: b.ne[3] / ic,
    }
}

/// Input `b[x, y, z, n·IC + c]` at output `(ox, oy, oz)` under tap `(kx, ky, kz)`.
fn tap_3d(b: &Host, g: Geo, v: &Vol, o: [usize; 3], k: [usize; 3], n: usize, c: usize) -> f64 {
    let (x, y, z) = (
        g.at(0, o[0], k[0]),
        g.at(1, o[1], k[1]),
        g.at(2, o[2], k[2]),
    );
    let inside = [x, y, z]
        .iter()
        .zip(&b.ne[..3])
        .all(|(&p, &n)| p >= 0 && p < n as i64);
    if !inside {
        return 0.0;
    }
    b.at([x as usize, y as usize, z as usize, n * v.ic + c, 0])
}

/// IM2COL_3D: `[IC·KD·KH·KW, OW, OH, OD·N]`.
fn im2col_3d_ref(kernel: Shape, b: &Host, ic: usize, g: Geo) -> Host {
    let v = vol(kernel, b, ic, g);
    let [kw, kh, kd] = v.k;
    let ne = [
        (ic * kd * kh * kw) as i64,
        v.o[0] as i64,
        v.o[1] as i64,
        (v.o[2] * v.n) as i64,
    ];
    Host::from_fn(shape(&ne), |i| {
        let k = [i[0] % kw, i[0] / kw % kh, i[0] / (kw * kh) % kd];
        let c = i[0] / (kw * kh * kd);
        let (oz, n) = (i[3] % v.o[2], i[3] / v.o[2]);
        tap_3d(b, g, &v, [i[1], i[2], oz], k, n, c)
    })
}

/// 3-D convolution: `[OW, OH, OD, N·OC]`, channel `n·OC + oc` holding
/// `Σ a[kx, ky, kz, oc·IC + c]·b[x, y, z, n·IC + c]`.
fn conv_3d_ref(a: &Host, b: &Host, ic: usize, g: Geo) -> Host {
    let v = vol(a.ne, b, ic, g);
    let oc = a.ne[3] / ic;
    let ne = [
        v.o[0] as i64,
        v.o[1] as i64,
        v.o[2] as i64,
        (v.n * oc) as i64,
    ];
    Host::from_fn(shape(&ne), |i| {
        let (o, n) = (i[3] % oc, i[3] / oc);
        let mut sum = 0.0;
        for c in 0..ic {
            for kz in 0..v.k[2] {
                for ky in 0..v.k[1] {
                    for kx in 0..v.k[0] {
                        let w = a.at([kx, ky, kz, o * ic + c, 0]);
                        sum += w * tap_3d(b, g, &v, [i[0], i[1], i[2]], [kx, ky, kz], n, c);
                    }
                }
            }
        }
        sum
    })
}

/// COL2IM_1D: `result[t, oc] = Σ a[oc·K + k, j]` over `j·s0 + k = t + p0`.
fn col2im_1d_ref(a: &Host, s0: usize, oc: usize, p0: usize) -> Host {
    let (k, t) = (a.ne[0] / oc, a.ne[1]);
    let len = (t - 1) * s0 + k - 2 * p0;
    Host::from_fn(shape(&[len as i64, oc as i64]), |i| {
        let mut sum = 0.0;
        for j in 0..t {
            for kk in 0..k {
                if j * s0 + kk == i[0] + p0 {
                    sum += a.at([i[1] * k + kk, j, 0, 0, 0]);
                }
            }
        }
        sum
    })
}

/// CONV_TRANSPOSE_1D: `result[t, oc] = Σ_{l, ic} b[l, ic]·a[t − l·s0, oc, ic]`.
fn conv_transpose_1d_ref(a: &Host, b: &Host, s0: usize) -> Host {
    let (k, oc, ic, l) = (a.ne[0], a.ne[1], a.ne[2], b.ne[0]);
    Host::from_fn(shape(&[((l - 1) * s0 + k) as i64, oc as i64]), |i| {
        let mut sum = 0.0;
        for c in 0..ic {
            for j in 0..l {
                let t = i[0] as i64 - (j * s0) as i64;
                if (0..k as i64).contains(&t) {
                    sum += b.at([j, c, 0, 0, 0]) * a.at([t as usize, i[1], c, 0, 0]);
                }
            }
        }
        sum
    })
}

/// CONV_TRANSPOSE_2D (no padding): `Σ b[ix, iy, ic, n]·a[x − ix·s, y − iy·s, oc, ic]`.
fn conv_transpose_2d_ref(a: &Host, b: &Host, s: usize) -> Host {
    let [kw, kh, oc, ic] = [a.ne[0], a.ne[1], a.ne[2], a.ne[3]];
    let ne = [
        ((b.ne[0] - 1) * s + kw) as i64,
        ((b.ne[1] - 1) * s + kh) as i64,
        oc as i64,
        b.ne[3] as i64,
    ];
    Host::from_fn(shape(&ne), |i| {
        let mut sum = 0.0;
        for c in 0..ic {
            for iy in 0..b.ne[1] {
                for ix in 0..b.ne[0] {
                    let (kx, ky) = (i[0] as i64 - (ix * s) as i64, i[1] as i64 - (iy * s) as i64);
                    if (0..kw as i64).contains(&kx) && (0..kh as i64).contains(&ky) {
                        let w = a.at([kx as usize, ky as usize, i[2], c, 0]);
                        sum += b.at([ix, iy, c, i[3], 0]) * w;
                    }
                }
            }
        }
        sum
    })
}

/// The 1-D convolution `out[ox, oc, n] = Σ a[k, ic, oc]·b[ox·s0 + k·d0 − p0, ic, n]`, laid
/// out as GGML's `conv_1d` leaves it: the product `[OW·N, OC]` read as `[OW, OC, N]`.
fn conv_1d_ref(a: &Host, b: &Host, g: Geo) -> Host {
    let (k, ic, oc, n) = (a.ne[0], a.ne[1], a.ne[2], b.ne[2]);
    let ow = conv_out(b.ne[0] as i64, k as i64, g.s[0], g.p[0], g.d[0]) as usize;
    Host::from_fn(shape(&[ow as i64, oc as i64, n as i64]), |i| {
        // Flat position i0 + OW·(i1 + OC·i2) of the [OW·N, OC] product.
        let q = i[1] + oc * i[2];
        let (bn, o) = (q % n, q / n);
        let mut sum = 0.0;
        for c in 0..ic {
            for kk in 0..k {
                let x = [g.at(0, i[0], kk), c as i64, bn as i64, 0];
                sum += a.at([kk, c, o, 0, 0]) * tap(b, x);
            }
        }
        sum
    })
}

/// Depthwise 1-D convolution `out[ox, c] = Σ_k a[k, 0, c]·b[ox·s0 + k·d0 − p0, c]`.
fn conv_1d_dw_ref(a: &Host, b: &Host, g: Geo) -> Host {
    let k = a.ne[0];
    let ow = conv_out(b.ne[0] as i64, k as i64, g.s[0], g.p[0], g.d[0]);
    Host::from_fn(shape(&[ow, b.ne[1] as i64]), |i| {
        (0..k)
            .map(|kk| a.at([kk, 0, i[1], 0, 0]) * tap(b, [g.at(0, i[0], kk), i[1] as i64, 0, 0]))
            .sum()
    })
}

fn layout_name(l: Layout) -> &'static str {
    match l {
        Layout::Contiguous => "contiguous",
        Layout::Padded => "padded",
        Layout::Transposed => "transposed",
        Layout::Permuted(_) => "cwhn",
    }
}

fn im2col(out: &mut Vec<Case>) {
    // (input [W, H, IC, N], kernel [KW, KH, IC, OC], geometry, 2-D)
    let grid: [([i64; 4], [i64; 4], Geo, bool); 6] = [
        (
            [10, 10, 3, 1],
            [3, 3, 3, 1],
            Geo::new([1, 1, 1], [1, 1, 0], [1, 1, 1]),
            true,
        ),
        (
            [13, 9, 2, 2],
            [3, 2, 2, 1],
            Geo::new([2, 1, 1], [0, 1, 0], [1, 2, 1]),
            true,
        ),
        (
            [7, 5, 1, 1],
            [5, 5, 1, 1],
            Geo::new([1, 3, 1], [2, 2, 0], [1, 1, 1]),
            true,
        ),
        (
            [1, 1, 4, 1],
            [1, 1, 4, 1],
            Geo::new([1, 1, 1], [0, 0, 0], [1, 1, 1]),
            true,
        ),
        (
            [17, 3, 2, 1],
            [3, 3, 1, 1],
            Geo::new([2, 1, 1], [1, 0, 0], [2, 1, 1]),
            false,
        ),
        (
            [20, 4, 1, 1],
            [4, 4, 1, 1],
            Geo::new([3, 1, 1], [0, 0, 0], [1, 1, 1]),
            false,
        ),
    ];
    for (bne, kne, g, is_2d) in grid {
        let (bne, kne): (Vec<i64>, Vec<i64>) = if is_2d {
            (bne.to_vec(), kne.to_vec())
        } else {
            (bne[..3].to_vec(), kne[..3].to_vec())
        };
        for (tb, tk, dst) in [
            (Type::F32, Type::F16, Type::F16),
            (Type::F32, Type::F32, Type::F32),
            (Type::F16, Type::F16, Type::F16),
            (Type::BF16, Type::BF16, Type::F32),
        ] {
            for layout in [Layout::Contiguous, Layout::Padded] {
                if layout == Layout::Padded && tb != Type::F32 {
                    continue;
                }
                let (s, p, d) = g.i32s();
                let vars = Vars::new()
                    .ty("type_input", tb)
                    .ty("type_kernel", tk)
                    .ty("dst_type", dst)
                    .list("ne_input", &bne)
                    .list("ne_kernel", &kne);
                let vars = g.vars(vars, if is_2d { 2 } else { 1 }).flag("is_2D", is_2d);
                let kshape = shape(&kne);
                out.push(Case::new(
                    "IM2COL",
                    vars.val("layout", layout_name(layout)),
                    vec![Input::new(tk, &kne), Input::new(tb, &bne).layout(layout)],
                    move |ctx, x| {
                        ctx.im2col(&x[0], &x[1], s[0], s[1], p[0], p[1], d[0], d[1], is_2d, dst)
                    },
                    move |x| im2col_ref(kshape, &x[1], g, is_2d),
                ));
            }
        }
    }
}

fn im2col_3d(out: &mut Vec<Case>) {
    // (input [W, H, D, N·IC], kernel [KW, KH, KD, OC·IC], IC, geometry)
    let grid: [([i64; 4], [i64; 4], i64, Geo); 3] = [
        (
            [6, 5, 4, 2],
            [3, 2, 2, 2],
            2,
            Geo::new([1, 1, 1], [1, 0, 1], [1, 1, 1]),
        ),
        (
            [7, 7, 5, 6],
            [2, 3, 3, 3],
            3,
            Geo::new([2, 1, 2], [0, 1, 1], [1, 2, 1]),
        ),
        (
            [4, 3, 3, 1],
            [1, 1, 1, 4],
            1,
            Geo::new([1, 1, 1], [0, 0, 0], [1, 1, 1]),
        ),
    ];
    for (bne, kne, ic, g) in grid {
        for (tb, dst) in [
            (Type::F32, Type::F16),
            (Type::F32, Type::F32),
            (Type::F16, Type::F16),
        ] {
            let (s, p, d) = g.i32s();
            let vars = Vars::new()
                .ty("type_input", tb)
                .ty("dst_type", dst)
                .list("ne_input", &bne)
                .list("ne_kernel", &kne)
                .val("IC", ic);
            let kshape = shape(&kne);
            out.push(Case::new(
                "IM2COL_3D",
                g.vars(vars, 3),
                vec![Input::new(Type::F16, &kne), Input::new(tb, &bne)],
                move |ctx, x| {
                    ctx.im2col_3d(
                        &x[0], &x[1], ic, s[0], s[1], s[2], p[0], p[1], p[2], d[0], d[1], d[2], dst,
                    )
                },
                move |x| im2col_3d_ref(kshape, &x[1], ic as usize, g),
            ));
        }
    }
}

/// A case judged with GGML's convolution threshold.
fn conv_case(
    op: &str,
    vars: Vars,
    inputs: Vec<Input>,
    build: impl Fn(&Context, &[Tensor]) -> ggml::Result<Tensor> + Send + Sync + 'static,
    reference: impl Fn(&[Host]) -> Host + Send + Sync + 'static,
) -> Case {
    Case::new(op, vars, inputs, build, reference).metric(Metric::Nmse(NMSE_MATMUL))
}

fn conv_2d(out: &mut Vec<Case>) {
    // (input [W, H, IC, N], kernel [KW, KH, IC, OC], geometry)
    let grid: [([i64; 4], [i64; 4], Geo); 5] = [
        (
            [10, 8, 3, 2],
            [3, 3, 3, 4],
            Geo::new([1, 1, 1], [1, 1, 0], [1, 1, 1]),
        ),
        (
            [13, 11, 2, 1],
            [3, 5, 2, 3],
            Geo::new([2, 3, 1], [0, 2, 0], [1, 1, 1]),
        ),
        (
            [9, 9, 1, 3],
            [2, 2, 1, 5],
            Geo::new([1, 2, 1], [1, 0, 0], [3, 2, 1]),
        ),
        (
            [5, 4, 4, 1],
            [1, 1, 4, 2],
            Geo::new([1, 1, 1], [0, 0, 0], [1, 1, 1]),
        ),
        (
            [24, 7, 8, 1],
            [3, 3, 8, 6],
            Geo::new([1, 1, 1], [1, 1, 0], [1, 1, 1]),
        ),
    ];
    for (bne, kne, g) in grid {
        let (s, p, d) = g.i32s();
        for tk in [Type::F32, Type::F16] {
            for layout in [Layout::Contiguous, Layout::Padded] {
                let vars = Vars::new()
                    .ty("type_kernel", tk)
                    .list("ne_input", &bne)
                    .list("ne_kernel", &kne);
                let vars = g.vars(vars, 2).val("layout", layout_name(layout));
                out.push(conv_case(
                    "CONV_2D",
                    vars.clone(),
                    vec![
                        Input::new(tk, &kne),
                        Input::new(Type::F32, &bne).layout(layout),
                    ],
                    move |ctx, x| {
                        ctx.conv_2d_direct(&x[0], &x[1], s[0], s[1], p[0], p[1], d[0], d[1])
                    },
                    move |x| conv_2d_ref(&x[0], &x[1], g),
                ));
                if layout == Layout::Contiguous {
                    out.push(conv_case(
                        "IM2COL",
                        vars.val("via", "conv_2d"),
                        vec![Input::new(tk, &kne), Input::new(Type::F32, &bne)],
                        move |ctx, x| ctx.conv_2d(&x[0], &x[1], s[0], s[1], p[0], p[1], d[0], d[1]),
                        move |x| conv_2d_ref(&x[0], &x[1], g),
                    ));
                }
            }
        }
    }
}

fn conv_2d_dw(out: &mut Vec<Case>) {
    // (input [W, H, C, N], geometry, kernel size)
    let grid: [([i64; 4], [i64; 2], Geo); 4] = [
        (
            [10, 9, 3, 2],
            [3, 3],
            Geo::new([1, 1, 1], [1, 1, 0], [1, 1, 1]),
        ),
        (
            [17, 13, 5, 1],
            [5, 3],
            Geo::new([2, 1, 1], [2, 0, 0], [1, 2, 1]),
        ),
        (
            [7, 7, 4, 1],
            [2, 2],
            Geo::new([3, 2, 1], [0, 1, 0], [2, 1, 1]),
        ),
        (
            [32, 4, 16, 1],
            [3, 3],
            Geo::new([1, 1, 1], [1, 1, 0], [1, 1, 1]),
        ),
    ];
    for (bne, k, g) in grid {
        let (s, p, d) = g.i32s();
        let kne = [k[0], k[1], 1, bne[2]];
        for tk in [Type::F32, Type::F16] {
            // Direct: contiguous, channels innermost (a permutation of [C, W, H, N]), padded.
            for layout in [
                Layout::Contiguous,
                Layout::Permuted([2, 0, 1, 3]),
                Layout::Padded,
            ] {
                let vars = Vars::new()
                    .ty("type_kernel", tk)
                    .list("ne_input", &bne)
                    .list("ne_kernel", &kne);
                let vars = g.vars(vars, 2).val("layout", layout_name(layout));
                // Channels innermost: the kernel too ([KW, KH, 1, C] viewing [C, 1, KW, KH]),
                // as GGML's test builds it (its kernel asserts that layout).
                let klayout = match layout {
                    Layout::Permuted(_) => Layout::Permuted([3, 2, 0, 1]),
                    _ => Layout::Contiguous,
                };
                out.push(conv_case(
                    "CONV_2D_DW",
                    vars.clone(),
                    vec![
                        Input::new(tk, &kne).layout(klayout),
                        Input::new(Type::F32, &bne).layout(layout),
                    ],
                    move |ctx, x| {
                        ctx.conv_2d_dw_direct(&x[0], &x[1], s[0], s[1], p[0], p[1], d[0], d[1])
                    },
                    move |x| conv_2d_dw_ref(&x[0], &x[1], g),
                ));
                if layout == Layout::Contiguous {
                    out.push(conv_case(
                        "IM2COL",
                        vars.val("via", "conv_2d_dw"),
                        vec![Input::new(tk, &kne), Input::new(Type::F32, &bne)],
                        move |ctx, x| {
                            ctx.conv_2d_dw(&x[0], &x[1], s[0], s[1], p[0], p[1], d[0], d[1])
                        },
                        move |x| conv_2d_dw_ref(&x[0], &x[1], g),
                    ));
                }
            }
        }
    }
}

fn conv_3d(out: &mut Vec<Case>) {
    // (input [W, H, D, N·IC], kernel [KW, KH, KD, OC·IC], IC, N, geometry)
    let grid: [([i64; 4], [i64; 4], i64, Geo); 3] = [
        (
            [6, 5, 4, 2],
            [3, 3, 2, 6],
            2,
            Geo::new([1, 1, 1], [1, 1, 0], [1, 1, 1]),
        ),
        (
            [9, 7, 5, 3],
            [2, 3, 3, 6],
            3,
            Geo::new([2, 1, 2], [0, 1, 1], [1, 2, 1]),
        ),
        (
            [5, 5, 5, 4],
            [3, 1, 2, 2],
            2,
            Geo::new([1, 2, 1], [1, 0, 2], [2, 1, 1]),
        ),
    ];
    for (bne, kne, ic, g) in grid {
        let (s, p, d) = g.i32s();
        let (n, oc) = (bne[3] / ic, kne[3] / ic);
        for tk in [Type::F32, Type::F16] {
            let vars = Vars::new()
                .ty("type_kernel", tk)
                .list("ne_input", &bne)
                .list("ne_kernel", &kne)
                .val("IC", ic);
            let vars = g.vars(vars, 3);
            out.push(conv_case(
                "CONV_3D",
                vars.clone(),
                vec![Input::new(tk, &kne), Input::new(Type::F32, &bne)],
                move |ctx, x| {
                    ctx.conv_3d_direct(
                        &x[0], &x[1], s[0], s[1], s[2], p[0], p[1], p[2], d[0], d[1], d[2],
                        ic as i32, n as i32, oc as i32,
                    )
                },
                move |x| conv_3d_ref(&x[0], &x[1], ic as usize, g),
            ));
            out.push(conv_case(
                "IM2COL_3D",
                vars.val("via", "conv_3d"),
                vec![Input::new(tk, &kne), Input::new(Type::F32, &bne)],
                move |ctx, x| {
                    ctx.conv_3d(
                        &x[0], &x[1], ic, s[0], s[1], s[2], p[0], p[1], p[2], d[0], d[1], d[2],
                    )
                },
                move |x| conv_3d_ref(&x[0], &x[1], ic as usize, g),
            ));
        }
    }
}

fn conv_1d(out: &mut Vec<Case>) {
    // (input [W, IC, N], kernel [K, IC, OC], geometry)
    let grid: [([i64; 3], [i64; 3], Geo); 4] = [
        (
            [17, 3, 1],
            [3, 3, 4],
            Geo::new([1, 1, 1], [1, 0, 0], [1, 1, 1]),
        ),
        (
            [30, 2, 2],
            [5, 2, 3],
            Geo::new([2, 1, 1], [2, 0, 0], [2, 1, 1]),
        ),
        (
            [9, 1, 3],
            [2, 1, 2],
            Geo::new([3, 1, 1], [0, 0, 0], [1, 1, 1]),
        ),
        (
            [64, 4, 1],
            [7, 4, 5],
            Geo::new([1, 1, 1], [3, 0, 0], [1, 1, 1]),
        ),
    ];
    for (bne, kne, g) in grid {
        let (s, p, d) = g.i32s();
        for tk in [Type::F32, Type::F16] {
            let vars = Vars::new()
                .ty("type_kernel", tk)
                .list("ne_input", &bne)
                .list("ne_kernel", &kne);
            out.push(conv_case(
                "IM2COL",
                g.vars(vars, 1).val("via", "conv_1d"),
                vec![Input::new(tk, &kne), Input::new(Type::F32, &bne)],
                move |ctx, x| ctx.conv_1d(&x[0], &x[1], s[0], p[0], d[0]),
                move |x| conv_1d_ref(&x[0], &x[1], g),
            ));
        }
        // Depthwise over the input's channels (one batch).
        let dne = [bne[0], bne[1]];
        let dk = [kne[0], 1, bne[1]];
        for tk in [Type::F32, Type::F16] {
            let vars = Vars::new()
                .ty("type_kernel", tk)
                .list("ne_input", &dne)
                .list("ne_kernel", &dk);
            out.push(conv_case(
                "IM2COL",
                g.vars(vars, 1).val("via", "conv_1d_dw"),
                vec![Input::new(tk, &dk), Input::new(Type::F32, &dne)],
                move |ctx, x| ctx.conv_1d_dw(&x[0], &x[1], s[0], p[0], d[0]),
                move |x| conv_1d_dw_ref(&x[0], &x[1], g),
            ));
        }
    }
}

fn col2im_1d(out: &mut Vec<Case>) {
    // (K, OC, T, s0, p0)
    let grid: [(i64, i64, i64, i32, i32); 4] = [
        (3, 2, 7, 1, 0),
        (4, 3, 5, 2, 1),
        (5, 1, 9, 3, 2),
        (2, 4, 1, 1, 0),
    ];
    for (k, oc, t, s0, p0) in grid {
        for ty in [Type::F32, Type::F16, Type::BF16] {
            let ne = [k * oc, t];
            let metric = if ty == Type::F32 {
                Metric::Nmse(crate::case::NMSE_DEFAULT)
            } else {
                Metric::Nmse(NMSE_MATMUL)
            };
            out.push(
                Case::new(
                    "COL2IM_1D",
                    Vars::new()
                        .ty("type", ty)
                        .list("ne", &ne)
                        .val("s0", s0)
                        .val("oc", oc)
                        .val("p0", p0),
                    vec![Input::new(ty, &ne)],
                    move |ctx, x| ctx.col2im_1d(&x[0], s0, oc as i32, p0),
                    move |x| col2im_1d_ref(&x[0], s0 as usize, oc as usize, p0 as usize),
                )
                .metric(metric),
            );
        }
    }
}

fn conv_transpose(out: &mut Vec<Case>) {
    // 1-D: (kernel [K, OC, IC], input [L, IC], s0)
    let grid1: [([i64; 3], [i64; 2], i32); 4] = [
        ([3, 2, 2], [7, 2], 1),
        ([5, 3, 4], [9, 4], 2),
        ([2, 1, 1], [1, 1], 3),
        ([16, 5, 7], [20, 7], 4),
    ];
    for (kne, bne, s0) in grid1 {
        for tk in [Type::F32, Type::F16] {
            out.push(conv_case(
                "CONV_TRANSPOSE_1D",
                Vars::new()
                    .ty("type_kernel", tk)
                    .list("ne_input", &bne)
                    .list("ne_kernel", &kne)
                    .val("s0", s0)
                    .val("p0", 0)
                    .val("d0", 1),
                vec![Input::new(tk, &kne), Input::new(Type::F32, &bne)],
                move |ctx, x| ctx.conv_transpose_1d(&x[0], &x[1], s0, 0, 1),
                move |x| conv_transpose_1d_ref(&x[0], &x[1], s0 as usize),
            ));
        }
    }
    // 2-D: (input [W, H, IC, N], kernel [KW, KH, OC, IC], stride)
    let grid2: [([i64; 4], [i64; 4], i32); 4] = [
        ([3, 2, 3, 1], [2, 2, 2, 3], 1),
        ([5, 4, 2, 1], [3, 3, 3, 2], 2),
        ([4, 3, 1, 2], [3, 2, 2, 1], 2),
        ([7, 5, 4, 1], [4, 3, 5, 4], 3),
    ];
    for (bne, kne, s) in grid2 {
        for tk in [Type::F32, Type::F16] {
            out.push(conv_case(
                "CONV_TRANSPOSE_2D",
                Vars::new()
                    .ty("type_kernel", tk)
                    .list("ne_input", &bne)
                    .list("ne_kernel", &kne)
                    .val("stride", s),
                vec![Input::new(tk, &kne), Input::new(Type::F32, &bne)],
                move |ctx, x| ctx.conv_transpose_2d_p0(&x[0], &x[1], s),
                move |x| conv_transpose_2d_ref(&x[0], &x[1], s as usize),
            ));
        }
    }
}

/// The convolution cases.
pub fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    im2col(&mut out);
    im2col_3d(&mut out);
    conv_1d(&mut out);
    conv_2d(&mut out);
    conv_2d_dw(&mut out);
    conv_3d(&mut out);
    col2im_1d(&mut out);
    conv_transpose(&mut out);
    out
}
