//! Convolutions (IM2COL, IM2COL_3D, COL2IM_1D, CONV_TRANSPOSE_1D/2D, CONV_2D, CONV_3D,
//! CONV_2D_DW and GGML's composite builders) against plain f64 references written from the
//! definitions, over odd sizes, strides, paddings, dilations, types, layouts and thread counts;
//! the shape rules' errors; `Op::validate` on the nodes the builders make (this file also
//! validates POOL and UPSCALE nodes).

mod common;

use common::*;
use ggml::ops::{Meta, NodeMeta, PoolOp, ScaleMode};
use ggml::{Context, Op, Tensor, Type};

/// GGML's threshold for convolutions.
const TOL_CONV: f64 = 5e-4;

/// A test case: a GGML-style name, its threshold, and a builder that makes the inputs and the
/// node and returns the f64 reference computed from the inputs' values.
struct Case {
    name: String,
    tol: f64,
    build: Box<Build>,
}

type Build = dyn Fn(&Context, &mut Rng) -> ggml::Result<(Tensor, Host)>;

fn case(
    name: String,
    tol: f64,
    build: impl Fn(&Context, &mut Rng) -> ggml::Result<(Tensor, Host)> + 'static,
) -> Case {
    Case {
        name,
        tol,
        build: Box::new(build),
    }
}

/// A tensor of `ty`, shape `ne` and `layout` holding uniform values in [−1, 1).
fn uni(
    ctx: &Context,
    ty: Type,
    ne: &[i64],
    layout: Layout,
    rng: &mut Rng,
) -> ggml::Result<(Tensor, Host)> {
    input(ctx, ty, ne, layout, rng, -1.0, 1.0)
}

fn run(cases: Vec<Case>) {
    assert!(!cases.is_empty());
    for c in cases {
        check_mem(&c.name, c.tol, 8 << 20, &*c.build);
    }
}

// ---- references ------------------------------------------------------------------------------

/// Stride, padding and dilation per spatial axis (x, y, z).
#[derive(Clone, Copy, Debug)]
struct Geo {
    s: [i32; 3],
    p: [i32; 3],
    d: [i32; 3],
}

impl Geo {
    fn out(&self, axis: usize, ins: usize, k: usize) -> usize {
        let (s, p, d) = (
            self.s[axis] as i64,
            self.p[axis] as i64,
            self.d[axis] as i64,
        );
        ((ins as i64 + 2 * p - d * (k as i64 - 1) - 1) / s + 1) as usize
    }

    /// The input index tap `k` of output `o` reads along `axis`, if inside `0..len`.
    fn tap(&self, axis: usize, o: usize, k: usize, len: usize) -> Option<usize> {
        let i =
            o as i64 * self.s[axis] as i64 + k as i64 * self.d[axis] as i64 - self.p[axis] as i64;
        (0..len as i64).contains(&i).then_some(i as usize)
    }
}

mod reference {
    use super::{Geo, Host};

    /// 2-D patches of `b [W, H, IC, N]` under a `kw × kh` kernel: `[IC·KH·KW, OW, OH, N]`.
    pub fn im2col_2d(kw: usize, kh: usize, b: &Host, g: Geo) -> Host {
        let [w, h, ic, n, _] = b.ne;
        let (ow, oh) = (g.out(0, w, kw), g.out(1, h, kh));
        Host::from_fn([kw * kh * ic, ow, oh, n, 1], |i| {
            let (kx, ky, c) = (i[0] % kw, i[0] / kw % kh, i[0] / (kw * kh));
            match (g.tap(0, i[1], kx, w), g.tap(1, i[2], ky, h)) {
                (Some(x), Some(y)) => b.at([x, y, c, i[3], 0]),
                _ => 0.0,
            }
        })
    }

    /// 1-D patches of `b [W, IC, N]` under a kernel of `k` taps: `[IC·K, OW, N]`.
    pub fn im2col_1d(k: usize, b: &Host, g: Geo) -> Host {
        let [w, ic, n, _, _] = b.ne;
        Host::from_fn([k * ic, g.out(0, w, k), n, 1, 1], |i| {
            let (kx, c) = (i[0] % k, i[0] / k);
            g.tap(0, i[1], kx, w)
                .map_or(0.0, |x| b.at([x, c, i[2], 0, 0]))
        })
    }

    /// 3-D patches of `b [W, H, D, N·IC]`: `[IC·KD·KH·KW, OW, OH, OD·N]`.
    pub fn im2col_3d(k: [usize; 3], ic: usize, b: &Host, g: Geo) -> Host {
        let [w, h, dd, nic, _] = b.ne;
        let [kw, kh, kd] = k;
        let (ow, oh, od) = (g.out(0, w, kw), g.out(1, h, kh), g.out(2, dd, kd));
        Host::from_fn([kw * kh * kd * ic, ow, oh, od * (nic / ic), 1], |i| {
            let j = i[0];
            let (kx, ky, kz, c) = (j % kw, j / kw % kh, j / (kw * kh) % kd, j / (kw * kh * kd));
            let (oz, n) = (i[3] % od, i[3] / od);
            match (
                g.tap(0, i[1], kx, w),
                g.tap(1, i[2], ky, h),
                g.tap(2, oz, kz, dd),
            ) {
                (Some(x), Some(y), Some(z)) => b.at([x, y, z, n * ic + c, 0]),
                _ => 0.0,
            }
        })
    }

    /// `Σ a[kx, ky, c, oc]·b[x, y, c, n]`: `[OW, OH, OC, N]`.
    pub fn conv_2d(a: &Host, b: &Host, g: Geo) -> Host {
        let [kw, kh, ic, oc, _] = a.ne;
        let [w, h, _, n, _] = b.ne;
        Host::from_fn([g.out(0, w, kw), g.out(1, h, kh), oc, n, 1], |i| {
            let mut sum = 0.0;
            for c in 0..ic {
                for ky in 0..kh {
                    for kx in 0..kw {
                        if let (Some(x), Some(y)) = (g.tap(0, i[0], kx, w), g.tap(1, i[1], ky, h)) {
                            sum += a.at([kx, ky, c, i[2], 0]) * b.at([x, y, c, i[3], 0]);
                        }
                    }
                }
            }
            sum
        })
    }

    /// `Σ a[k, c, oc]·b[x, c, n]`: the true 1-D convolution `[OW, OC, N]`.
    pub fn conv_1d(a: &Host, b: &Host, g: Geo) -> Host {
        let [k, ic, oc, _, _] = a.ne;
        let [w, _, n, _, _] = b.ne;
        Host::from_fn([g.out(0, w, k), oc, n, 1, 1], |i| {
            (0..ic)
                .flat_map(|c| (0..k).map(move |kx| (c, kx)))
                .filter_map(|(c, kx)| {
                    g.tap(0, i[0], kx, w)
                        .map(|x| a.at([kx, c, i[1], 0, 0]) * b.at([x, c, i[2], 0, 0]))
                })
                .sum()
        })
    }

    /// GGML's `conv_1d` result: the product `[N·OW, OC]` read as `[OW, OC, N]`.
    pub fn conv_1d_as_ggml(conv: &Host) -> Host {
        let [ow, oc, n, _, _] = conv.ne;
        Host::from_fn(conv.ne, |i| {
            let f = i[0] + ow * (i[1] + oc * i[2]);
            let (m, o) = (f % (n * ow), f / (n * ow));
            conv.at([m % ow, o, m / ow, 0, 0])
        })
    }

    /// Depthwise: `Σ a[kx, ky, 0, c]·b[x, y, c, n]`: `[OW, OH, C, N]`.
    pub fn conv_2d_dw(a: &Host, b: &Host, g: Geo) -> Host {
        let [kw, kh, _, _, _] = a.ne;
        let [w, h, c, n, _] = b.ne;
        Host::from_fn([g.out(0, w, kw), g.out(1, h, kh), c, n, 1], |i| {
            let mut sum = 0.0;
            for ky in 0..kh {
                for kx in 0..kw {
                    if let (Some(x), Some(y)) = (g.tap(0, i[0], kx, w), g.tap(1, i[1], ky, h)) {
                        sum += a.at([kx, ky, 0, i[2], 0]) * b.at([x, y, i[2], i[3], 0]);
                    }
                }
            }
            sum
        })
    }

    /// Depthwise 1-D: `Σ a[k, 0, c]·b[x, c]`: `[OW, C]`.
    pub fn conv_1d_dw(a: &Host, b: &Host, g: Geo) -> Host {
        let k = a.ne[0];
        let [w, c, _, _, _] = b.ne;
        Host::from_fn([g.out(0, w, k), c, 1, 1, 1], |i| {
            (0..k)
                .filter_map(|kx| {
                    g.tap(0, i[0], kx, w)
                        .map(|x| a.at([kx, 0, i[1], 0, 0]) * b.at([x, i[1], 0, 0, 0]))
                })
                .sum()
        })
    }

    /// 3-D: `Σ a[kx, ky, kz, oc·IC + c]·b[x, y, z, n·IC + c]` at channel `n·OC + oc` of
    /// `[OW, OH, OD, OC·N]`.
    pub fn conv_3d(a: &Host, b: &Host, ic: usize, g: Geo) -> Host {
        let [kw, kh, kd, ocic, _] = a.ne;
        let [w, h, dd, nic, _] = b.ne;
        let (oc, n) = (ocic / ic, nic / ic);
        let ne = [
            g.out(0, w, kw),
            g.out(1, h, kh),
            g.out(2, dd, kd),
            oc * n,
            1,
        ];
        Host::from_fn(ne, |i| {
            let (o, bn) = (i[3] % oc, i[3] / oc);
            let mut sum = 0.0;
            for c in 0..ic {
                for kz in 0..kd {
                    for ky in 0..kh {
                        for kx in 0..kw {
                            let taps = (
                                g.tap(0, i[0], kx, w),
                                g.tap(1, i[1], ky, h),
                                g.tap(2, i[2], kz, dd),
                            );
                            if let (Some(x), Some(y), Some(z)) = taps {
                                sum += a.at([kx, ky, kz, o * ic + c, 0])
                                    * b.at([x, y, z, bn * ic + c, 0]);
                            }
                        }
                    }
                }
            }
            sum
        })
    }

    /// `Σ_{l, c} b[l, c]·a[t − l·s, oc, c]`: `[(L − 1)·s + K, OC]`.
    pub fn conv_transpose_1d(a: &Host, b: &Host, s: usize) -> Host {
        let [k, oc, ic, _, _] = a.ne;
        let l = b.ne[0];
        Host::from_fn([(l - 1) * s + k, oc, 1, 1, 1], |i| {
            let mut sum = 0.0;
            for li in 0..l {
                for c in 0..ic {
                    if i[0] >= li * s && i[0] - li * s < k {
                        sum += b.at([li, c, 0, 0, 0]) * a.at([i[0] - li * s, i[1], c, 0, 0]);
                    }
                }
            }
            sum
        })
    }

    /// `Σ b[ix, iy, c, n]·a[x − ix·s, y − iy·s, oc, c]`: `[(W−1)s + KW, (H−1)s + KH, OC, N]`.
    pub fn conv_transpose_2d(a: &Host, b: &Host, s: usize) -> Host {
        let [kw, kh, oc, ic, _] = a.ne;
        let [w, h, _, n, _] = b.ne;
        Host::from_fn([(w - 1) * s + kw, (h - 1) * s + kh, oc, n, 1], |i| {
            let mut sum = 0.0;
            for iy in 0..h {
                for ix in 0..w {
                    let inside = i[0] >= ix * s
                        && i[0] - ix * s < kw
                        && i[1] >= iy * s
                        && i[1] - iy * s < kh;
                    if inside {
                        for c in 0..ic {
                            sum += b.at([ix, iy, c, i[3], 0])
                                * a.at([i[0] - ix * s, i[1] - iy * s, i[2], c, 0]);
                        }
                    }
                }
            }
            sum
        })
    }

    /// `value[t, oc] = Σ a[oc·K + k, j]` over `j·s + k = t + p`: `[(T−1)s + K − 2p, OC]`.
    pub fn col2im_1d(a: &Host, s: usize, oc: usize, p: usize) -> Host {
        let (k, t_in) = (a.ne[0] / oc, a.ne[1]);
        Host::from_fn([(t_in - 1) * s + k - 2 * p, oc, 1, 1, 1], |i| {
            let mut sum = 0.0;
            for j in 0..t_in {
                for kk in 0..k {
                    if j * s + kk == i[0] + p {
                        sum += a.at([i[1] * k + kk, j, 0, 0, 0]);
                    }
                }
            }
            sum
        })
    }
}

// ---- cases -----------------------------------------------------------------------------------

const B_LAYOUTS: [Layout; 3] = [
    Layout::Contiguous,
    Layout::Permuted([1, 0, 2, 3]),
    Layout::Padded,
];

/// Geometries of 2-D cases: unit, strided, padded, dilated, all at once.
fn geos_2d() -> Vec<Geo> {
    let g = |s0, s1, p0, p1, d0, d1| Geo {
        s: [s0, s1, 1],
        p: [p0, p1, 0],
        d: [d0, d1, 1],
    };
    vec![
        g(1, 1, 0, 0, 1, 1),
        g(2, 1, 1, 0, 1, 1),
        g(1, 2, 0, 2, 2, 1),
        g(3, 2, 2, 1, 1, 2),
    ]
}

#[test]
fn im2col_2d_and_1d() {
    let mut cases = Vec::new();
    for dst in [Type::F32, Type::F16] {
        for bt in [Type::F32, Type::F16, Type::BF16] {
            for (gi, g) in geos_2d().into_iter().enumerate() {
                for lb in B_LAYOUTS {
                    let name = format!(
                        "IM2COL(type_input={bt},dst_type={dst},ne_input=[7,6,3,2],ne_kernel=[3,2,3,4],geo={gi},layout={lb:?})"
                    );
                    cases.push(case(name, EXACT, move |ctx, rng| {
                        let a = ctx.new_tensor_4d(Type::F16, 3, 2, 3, 4)?;
                        let (b, hb) = uni(ctx, bt, &[7, 6, 3, 2], lb, rng)?;
                        let out = ctx.im2col(
                            &a, &b, g.s[0], g.s[1], g.p[0], g.p[1], g.d[0], g.d[1], true, dst,
                        )?;
                        assert_eq!(out.ty(), dst);
                        Ok((out, reference::im2col_2d(3, 2, &hb, g)))
                    }));
                }
                let name = format!(
                    "IM2COL(type_input={bt},dst_type={dst},ne_input=[9,3,2],ne_kernel=[4,3,5],geo={gi},is_2D=0)"
                );
                cases.push(case(name, EXACT, move |ctx, rng| {
                    let a = ctx.new_tensor_3d(Type::F32, 4, 3, 5)?;
                    let (b, hb) = uni(ctx, bt, &[9, 3, 2], Layout::Padded, rng)?;
                    let out = ctx.im2col(&a, &b, g.s[0], 0, g.p[0], 0, g.d[0], 0, false, dst)?;
                    Ok((out, reference::im2col_1d(4, &hb, g)))
                }));
            }
        }
    }
    run(cases);
}

#[test]
fn im2col_3d_cases() {
    let mut cases = Vec::new();
    let geos = [
        Geo {
            s: [1, 1, 1],
            p: [0, 0, 0],
            d: [1, 1, 1],
        },
        Geo {
            s: [2, 1, 2],
            p: [1, 0, 1],
            d: [1, 2, 1],
        },
    ];
    for dst in [Type::F32, Type::F16] {
        for (gi, g) in geos.into_iter().enumerate() {
            for lb in [Layout::Contiguous, Layout::Padded] {
                let name = format!(
                    "IM2COL_3D(dst_type={dst},ne_input=[6,5,4,6],ne_kernel=[3,2,2,6],IC=3,geo={gi},layout={lb:?})"
                );
                cases.push(case(name, EXACT, move |ctx, rng| {
                    let a = ctx.new_tensor_4d(Type::F32, 3, 2, 2, 6)?;
                    let (b, hb) = uni(ctx, Type::F32, &[6, 5, 4, 6], lb, rng)?;
                    let out = ctx.im2col_3d(
                        &a, &b, 3, g.s[0], g.s[1], g.s[2], g.p[0], g.p[1], g.p[2], g.d[0], g.d[1],
                        g.d[2], dst,
                    )?;
                    Ok((out, reference::im2col_3d([3, 2, 2], 3, &hb, g)))
                }));
            }
        }
    }
    run(cases);
}

/// `conv_2d` (composite) and `conv_2d_direct` (CONV_2D) give the same convolution.
#[test]
fn conv_2d_composite_and_direct() {
    let mut cases = Vec::new();
    for kt in [Type::F32, Type::F16, Type::BF16] {
        for (gi, g) in geos_2d().into_iter().enumerate() {
            for lb in B_LAYOUTS {
                for direct in [false, true] {
                    if direct && kt == Type::BF16 {
                        continue;
                    }
                    let op = if direct { "CONV_2D" } else { "conv_2d" };
                    let name = format!(
                        "{op}(type_kernel={kt},ne_input=[9,8,3,2],ne_kernel=[3,3,3,5],geo={gi},layout={lb:?})"
                    );
                    cases.push(case(name, TOL_CONV, move |ctx, rng| {
                        let (a, ha) = uni(ctx, kt, &[3, 3, 3, 5], Layout::Contiguous, rng)?;
                        let (b, hb) = uni(ctx, Type::F32, &[9, 8, 3, 2], lb, rng)?;
                        let (s, p, d) = (g.s, g.p, g.d);
                        let out = if direct {
                            ctx.conv_2d_direct(&a, &b, s[0], s[1], p[0], p[1], d[0], d[1])?
                        } else {
                            ctx.conv_2d(&a, &b, s[0], s[1], p[0], p[1], d[0], d[1])?
                        };
                        Ok((out, reference::conv_2d(&ha, &hb, g)))
                    }));
                }
            }
        }
    }
    // A 1x1 kernel, a kernel as large as the input, and more channels than one block.
    for (kne, bne) in [
        ([1, 1, 4, 3], [5, 4, 4, 1]),
        ([4, 3, 2, 2], [4, 3, 2, 3]),
        ([2, 2, 20, 9], [5, 5, 20, 1]),
    ] {
        let name = format!("CONV_2D(ne_input={bne:?},ne_kernel={kne:?})");
        cases.push(case(name, TOL_CONV, move |ctx, rng| {
            let (a, ha) = uni(ctx, Type::F32, &kne, Layout::Contiguous, rng)?;
            let (b, hb) = uni(ctx, Type::F32, &bne, Layout::Contiguous, rng)?;
            let g = geos_2d()[0];
            Ok((
                ctx.conv_2d_direct(&a, &b, 1, 1, 0, 0, 1, 1)?,
                reference::conv_2d(&ha, &hb, g),
            ))
        }));
    }
    run(cases);
}

/// CONV_2D on test-backend-ops' `cwhn=1` layout: kernel and input made channel-most-contiguous
/// (`cont(permute)`) and permuted back. A 1x1 kernel with one output channel stays contiguous
/// that way, but its size-1 dimensions carry the permuted strides (`nb[0]` of 100 bytes): the
/// kernel must be read packed, not with `nb[0]` (which read far past it: test-backend-ops
/// FAILed these cases against our server).
#[test]
fn conv_2d_direct_cwhn() {
    let mut cases = Vec::new();
    for kt in [Type::F32, Type::F16] {
        for (w, h) in [(1, 133), (141, 133), (141, 1), (7, 9)] {
            for kne in [[1, 1, 25, 1], [1, 1, 3, 1]] {
                let bne = [w, h, kne[2], 2];
                let name = format!(
                    "CONV_2D(ne_input={bne:?},ne_kernel={kne:?},type_kernel={kt},stride0=1,\
                     stride1=5,padding0=5,padding1=2,dilation0=2,dilation1=4,cwhn=1)"
                );
                cases.push(case(name, TOL_CONV, move |ctx, rng| {
                    let (a, ha) = uni(ctx, kt, &kne, Layout::Contiguous, rng)?;
                    let (b, hb) = uni(ctx, Type::F32, &bne, Layout::Contiguous, rng)?;
                    let b = ctx.permute(&ctx.cont(&ctx.permute(&b, 1, 2, 0, 3)?)?, 2, 0, 1, 3)?;
                    let a = ctx.permute(&ctx.cont(&ctx.permute(&a, 2, 3, 1, 0)?)?, 3, 2, 0, 1)?;
                    assert!(a.is_contiguous() && a.nb()[0] != kt.type_size());
                    let g = Geo {
                        s: [1, 5, 1],
                        p: [5, 2, 0],
                        d: [2, 4, 1],
                    };
                    Ok((
                        ctx.conv_2d_direct(&a, &b, 1, 5, 5, 2, 2, 4)?,
                        reference::conv_2d(&ha, &hb, g),
                    ))
                }));
            }
        }
    }
    run(cases);
}

#[test]
fn conv_2d_shorthands() {
    let cases = vec![
        case(
            "conv_2d_sk_p0(ne_input=[8,6,2,1],ne_kernel=[2,3,2,3])".into(),
            TOL_CONV,
            |ctx, rng| {
                let (a, ha) = uni(ctx, Type::F16, &[2, 3, 2, 3], Layout::Contiguous, rng)?;
                let (b, hb) = uni(ctx, Type::F32, &[8, 6, 2, 1], Layout::Contiguous, rng)?;
                let g = Geo {
                    s: [2, 3, 1],
                    p: [0; 3],
                    d: [1; 3],
                };
                Ok((ctx.conv_2d_sk_p0(&a, &b)?, reference::conv_2d(&ha, &hb, g)))
            },
        ),
        case(
            "conv_2d_s1_ph(ne_input=[7,5,2,2],ne_kernel=[3,5,2,2])".into(),
            TOL_CONV,
            |ctx, rng| {
                let (a, ha) = uni(ctx, Type::F32, &[3, 5, 2, 2], Layout::Contiguous, rng)?;
                let (b, hb) = uni(ctx, Type::F32, &[7, 5, 2, 2], Layout::Contiguous, rng)?;
                let g = Geo {
                    s: [1; 3],
                    p: [1, 2, 0],
                    d: [1; 3],
                };
                Ok((ctx.conv_2d_s1_ph(&a, &b)?, reference::conv_2d(&ha, &hb, g)))
            },
        ),
    ];
    run(cases);
}

#[test]
fn conv_1d_cases() {
    let mut cases = Vec::new();
    for kt in [Type::F32, Type::F16, Type::BF16] {
        for (gi, g) in geos_2d().into_iter().enumerate() {
            for n in [1usize, 2] {
                let name = format!(
                    "conv_1d(type_kernel={kt},ne_input=[11,3,{n}],ne_kernel=[3,3,4],geo={gi})"
                );
                cases.push(case(name, TOL_CONV, move |ctx, rng| {
                    let (a, ha) = uni(ctx, kt, &[3, 3, 4], Layout::Contiguous, rng)?;
                    let (b, hb) = uni(ctx, Type::F32, &[11, 3, n as i64], Layout::Contiguous, rng)?;
                    let out = ctx.conv_1d(&a, &b, g.s[0], g.p[0], g.d[0])?;
                    let conv = reference::conv_1d(&ha, &hb, g);
                    Ok((out, reference::conv_1d_as_ggml(&conv)))
                }));
            }
            let name =
                format!("conv_1d_dw(type_kernel={kt},ne_input=[10,4],ne_kernel=[3,1,4],geo={gi})");
            cases.push(case(name, TOL_CONV, move |ctx, rng| {
                let (a, ha) = uni(ctx, kt, &[3, 1, 4], Layout::Contiguous, rng)?;
                let (b, hb) = uni(ctx, Type::F32, &[10, 4], Layout::Contiguous, rng)?;
                let out = ctx.conv_1d_dw(&a, &b, g.s[0], g.p[0], g.d[0])?;
                Ok((out, reference::conv_1d_dw(&ha, &hb, g)))
            }));
        }
    }
    cases.push(case(
        "conv_1d_ph(ne_input=[8,2,1],ne_kernel=[5,2,3])".into(),
        TOL_CONV,
        |ctx, rng| {
            let (a, ha) = uni(ctx, Type::F32, &[5, 2, 3], Layout::Contiguous, rng)?;
            let (b, hb) = uni(ctx, Type::F32, &[8, 2, 1], Layout::Contiguous, rng)?;
            let g = Geo {
                s: [2, 1, 1],
                p: [2, 0, 0],
                d: [1; 3],
            };
            Ok((
                ctx.conv_1d_ph(&a, &b, 2, 1)?,
                reference::conv_1d(&ha, &hb, g),
            ))
        },
    ));
    cases.push(case(
        "conv_1d_dw_ph(ne_input=[9,3],ne_kernel=[3,1,3])".into(),
        TOL_CONV,
        |ctx, rng| {
            let (a, ha) = uni(ctx, Type::F32, &[3, 1, 3], Layout::Contiguous, rng)?;
            let (b, hb) = uni(ctx, Type::F32, &[9, 3], Layout::Contiguous, rng)?;
            let g = Geo {
                s: [1; 3],
                p: [1, 0, 0],
                d: [2, 1, 1],
            };
            Ok((
                ctx.conv_1d_dw_ph(&a, &b, 1, 2)?,
                reference::conv_1d_dw(&ha, &hb, g),
            ))
        },
    ));
    run(cases);
}

/// `conv_2d_dw` (composite) and `conv_2d_dw_direct` (CONV_2D_DW), the latter also with the
/// input's channels innermost, where the result keeps that layout.
#[test]
fn conv_2d_dw_composite_and_direct() {
    let mut cases = Vec::new();
    for kt in [Type::F32, Type::F16] {
        for (gi, g) in geos_2d().into_iter().enumerate() {
            for (lb, direct) in [
                (Layout::Contiguous, false),
                (Layout::Contiguous, true),
                (Layout::Permuted([2, 0, 1, 3]), true),
                (Layout::Padded, true),
            ] {
                let op = if direct { "CONV_2D_DW" } else { "conv_2d_dw" };
                let name = format!(
                    "{op}(type_kernel={kt},ne_input=[8,7,5,2],ne_kernel=[3,2,1,5],geo={gi},layout={lb:?})"
                );
                cases.push(case(name, TOL_CONV, move |ctx, rng| {
                    let (a, ha) = uni(ctx, kt, &[3, 2, 1, 5], Layout::Contiguous, rng)?;
                    let (b, hb) = uni(ctx, Type::F32, &[8, 7, 5, 2], lb, rng)?;
                    let (s, p, d) = (g.s, g.p, g.d);
                    let out = if direct {
                        ctx.conv_2d_dw_direct(&a, &b, s[0], s[1], p[0], p[1], d[0], d[1])?
                    } else {
                        ctx.conv_2d_dw(&a, &b, s[0], s[1], p[0], p[1], d[0], d[1])?
                    };
                    if lb == Layout::Permuted([2, 0, 1, 3]) {
                        // Channels innermost in the result too.
                        assert_eq!(out.nb()[2], 4, "{:?}", out.nb());
                    }
                    Ok((out, reference::conv_2d_dw(&ha, &hb, g)))
                }));
            }
        }
    }
    run(cases);
}

#[test]
fn conv_3d_composite_and_direct() {
    let mut cases = Vec::new();
    let geos = [
        Geo {
            s: [1; 3],
            p: [0; 3],
            d: [1; 3],
        },
        Geo {
            s: [2, 1, 1],
            p: [1, 1, 0],
            d: [1, 1, 2],
        },
    ];
    for kt in [Type::F32, Type::F16] {
        for (gi, g) in geos.into_iter().enumerate() {
            for direct in [false, true] {
                let op = if direct { "CONV_3D" } else { "conv_3d" };
                // IC = 2, OC = 3, N = 2.
                let name = format!(
                    "{op}(type_kernel={kt},ne_input=[6,5,5,4],ne_kernel=[3,2,2,6],IC=2,geo={gi})"
                );
                cases.push(case(name, TOL_CONV, move |ctx, rng| {
                    let (a, ha) = uni(ctx, kt, &[3, 2, 2, 6], Layout::Contiguous, rng)?;
                    let (b, hb) = uni(ctx, Type::F32, &[6, 5, 5, 4], Layout::Padded, rng)?;
                    let (s, p, d) = (g.s, g.p, g.d);
                    let out = if direct {
                        ctx.conv_3d_direct(
                            &a, &b, s[0], s[1], s[2], p[0], p[1], p[2], d[0], d[1], d[2], 2, 2, 3,
                        )?
                    } else {
                        ctx.conv_3d(
                            &a, &b, 2, s[0], s[1], s[2], p[0], p[1], p[2], d[0], d[1], d[2],
                        )?
                    };
                    Ok((out, reference::conv_3d(&ha, &hb, 2, g)))
                }));
            }
        }
    }
    run(cases);
}

#[test]
fn conv_transpose_cases() {
    let mut cases = Vec::new();
    for kt in [Type::F32, Type::F16] {
        for s in [1usize, 2, 3] {
            for (k, oc, ic, l) in [
                (3usize, 2usize, 3usize, 7usize),
                (1, 1, 1, 1),
                (5, 3, 10, 4),
            ] {
                let name = format!("CONV_TRANSPOSE_1D(type_kernel={kt},ne_input=[{l},{ic}],ne_kernel=[{k},{oc},{ic}],s0={s})");
                cases.push(case(name, TOL_CONV, move |ctx, rng| {
                    let (a, ha) = uni(
                        ctx,
                        kt,
                        &[k as i64, oc as i64, ic as i64],
                        Layout::Contiguous,
                        rng,
                    )?;
                    let (b, hb) = uni(ctx, Type::F32, &[l as i64, ic as i64], Layout::Padded, rng)?;
                    let out = ctx.conv_transpose_1d(&a, &b, s as i32, 0, 1)?;
                    Ok((out, reference::conv_transpose_1d(&ha, &hb, s)))
                }));
            }
            for (lb, n) in [
                (Layout::Contiguous, 1i64),
                (Layout::Permuted([1, 0, 2, 3]), 2),
            ] {
                let name = format!("CONV_TRANSPOSE_2D(type_kernel={kt},ne_input=[5,4,3,{n}],ne_kernel=[3,2,2,3],stride={s},layout={lb:?})");
                cases.push(case(name, TOL_CONV, move |ctx, rng| {
                    let (a, ha) = uni(ctx, kt, &[3, 2, 2, 3], Layout::Contiguous, rng)?;
                    let (b, hb) = uni(ctx, Type::F32, &[5, 4, 3, n], lb, rng)?;
                    let out = ctx.conv_transpose_2d_p0(&a, &b, s as i32)?;
                    Ok((out, reference::conv_transpose_2d(&ha, &hb, s)))
                }));
            }
        }
    }
    run(cases);
}

/// The convolutions through the packed GEMM on sizes that leave partial tiles everywhere:
/// more output positions than one block of rows (and not a multiple of any path's tile),
/// patches longer than one slice of the shared dimension (256), output channel counts that
/// are no multiple of a tile's columns, several batches, strided, padded and dilated
/// geometries, and (transposed) more channels and positions than one block of products.
#[test]
fn conv_gemm_partial_tiles() {
    let mut cases = Vec::new();
    let geos = geos_2d();
    for kt in [Type::F32, Type::F16] {
        // 17 x 15 positions per image, K = 3·3·40 = 360, 19 output channels, 2 images
        for (gi, g) in [(0, geos[0]), (3, geos[3])] {
            for lb in [Layout::Contiguous, Layout::Padded] {
                let name = format!("CONV_2D(type_kernel={kt},ne_input=[19,17,40,2],ne_kernel=[3,3,40,19],geo={gi},layout={lb:?})");
                cases.push(case(name, TOL_CONV, move |ctx, rng| {
                    let (a, ha) = uni(ctx, kt, &[3, 3, 40, 19], Layout::Contiguous, rng)?;
                    let (b, hb) = uni(ctx, Type::F32, &[19, 17, 40, 2], lb, rng)?;
                    let (s, p, d) = (g.s, g.p, g.d);
                    let out = ctx.conv_2d_direct(&a, &b, s[0], s[1], p[0], p[1], d[0], d[1])?;
                    Ok((out, reference::conv_2d(&ha, &hb, g)))
                }));
            }
        }
        // 38 x 28 positions per image (several blocks of the GEMM's rows), 2 images, 11
        // output channels, a padded input
        let name = format!("CONV_2D(type_kernel={kt},ne_input=[40,30,3,2],ne_kernel=[3,3,3,11])");
        cases.push(case(name, TOL_CONV, move |ctx, rng| {
            let (a, ha) = uni(ctx, kt, &[3, 3, 3, 11], Layout::Contiguous, rng)?;
            let (b, hb) = uni(ctx, Type::F32, &[40, 30, 3, 2], Layout::Padded, rng)?;
            let out = ctx.conv_2d_direct(&a, &b, 1, 1, 0, 0, 1, 1)?;
            Ok((out, reference::conv_2d(&ha, &hb, geos_2d()[0])))
        }));
        // K = 3·3·3·12 = 324, 10 output channels, 2 batches
        let name =
            format!("CONV_3D(type_kernel={kt},ne_input=[9,8,5,24],ne_kernel=[3,3,3,120],IC=12)");
        cases.push(case(name, TOL_CONV, move |ctx, rng| {
            let (a, ha) = uni(ctx, kt, &[3, 3, 3, 120], Layout::Contiguous, rng)?;
            let (b, hb) = uni(ctx, Type::F32, &[9, 8, 5, 24], Layout::Contiguous, rng)?;
            let g = Geo {
                s: [1, 2, 1],
                p: [1, 0, 1],
                d: [1, 1, 2],
            };
            let (s, p, d) = (g.s, g.p, g.d);
            let out = ctx.conv_3d_direct(
                &a, &b, s[0], s[1], s[2], p[0], p[1], p[2], d[0], d[1], d[2], 12, 2, 10,
            )?;
            Ok((out, reference::conv_3d(&ha, &hb, 12, g)))
        }));
        // a vocoder-like stage (IC past one slice), and many channels and positions (several
        // blocks of output channels and of input positions)
        for (k, oc, ic, l, s) in [(16i64, 20i64, 300i64, 37i64, 8usize), (3, 100, 5, 700, 2)] {
            let name = format!("CONV_TRANSPOSE_1D(type_kernel={kt},ne_input=[{l},{ic}],ne_kernel=[{k},{oc},{ic}],s0={s})");
            cases.push(case(name, TOL_CONV, move |ctx, rng| {
                let (a, ha) = uni(ctx, kt, &[k, oc, ic], Layout::Contiguous, rng)?;
                let (b, hb) = uni(ctx, Type::F32, &[l, ic], Layout::Contiguous, rng)?;
                let out = ctx.conv_transpose_1d(&a, &b, s as i32, 0, 1)?;
                Ok((out, reference::conv_transpose_1d(&ha, &hb, s)))
            }));
        }
        let name = format!("CONV_TRANSPOSE_2D(type_kernel={kt},ne_input=[9,7,20,2],ne_kernel=[3,3,30,20],stride=2)");
        cases.push(case(name, TOL_CONV, move |ctx, rng| {
            let (a, ha) = uni(
                ctx,
                kt,
                &[3, 3, 30, 20],
                Layout::Permuted([1, 0, 2, 3]),
                rng,
            )?;
            let (b, hb) = uni(ctx, Type::F32, &[9, 7, 20, 2], Layout::Padded, rng)?;
            let out = ctx.conv_transpose_2d_p0(&a, &b, 2)?;
            Ok((out, reference::conv_transpose_2d(&ha, &hb, 2)))
        }));
    }
    run(cases);
}

#[test]
fn col2im_1d_cases() {
    let mut cases = Vec::new();
    for ty in [Type::F32, Type::F16, Type::BF16] {
        for (k, oc, t, s, p) in [
            (4usize, 3usize, 5usize, 2usize, 1usize),
            (3, 1, 6, 1, 0),
            (5, 2, 4, 3, 2),
            (2, 2, 1, 4, 0),
        ] {
            let name = format!("COL2IM_1D(type={ty},K={k},OC={oc},T={t},s0={s},p0={p})");
            let tol = if ty == Type::F32 { TOL } else { 1e-5 };
            cases.push(case(name, tol, move |ctx, rng| {
                let (a, ha) = uni(
                    ctx,
                    ty,
                    &[(k * oc) as i64, t as i64],
                    Layout::Contiguous,
                    rng,
                )?;
                let out = ctx.col2im_1d(&a, s as i32, oc as i32, p as i32)?;
                assert_eq!(out.ty(), ty);
                Ok((out, reference::col2im_1d(&ha, s, oc, p)))
            }));
        }
    }
    run(cases);
}

// ---- shape rules -----------------------------------------------------------------------------

#[test]
fn shape_errors() {
    let ctx = Context::init(1 << 20, true).unwrap();
    let t = |ne: &[i64]| ctx.new_tensor(Type::F32, ne).unwrap();
    let k = t(&[3, 3, 2, 4]);
    let img = t(&[8, 8, 2, 1]);
    let img3 = t(&[8, 8, 3, 1]);
    // IM2COL
    assert_err(
        ctx.im2col(&k, &img3, 1, 1, 0, 0, 1, 1, true, Type::F32),
        &["IM2COL", "channels", "2"],
    );
    assert_err(
        ctx.im2col(&k, &img, 1, 1, 0, 0, 1, 1, true, Type::BF16),
        &["IM2COL", "bf16", "f16 or f32"],
    );
    assert_err(
        ctx.im2col(&k, &img, 0, 1, 0, 0, 1, 1, true, Type::F32),
        &["IM2COL", "s0 = 0"],
    );
    assert_err(
        ctx.im2col(&k, &img, 1, 1, 0, 0, 1, -1, true, Type::F32),
        &["IM2COL", "d1 = -1"],
    );
    assert_err(
        ctx.im2col(&k, &t(&[2, 8, 2]), 1, 1, 0, 0, 1, 1, true, Type::F32),
        &["IM2COL", "too small", "axis 0"],
    );
    let k1 = t(&[3, 2, 4]);
    assert_err(
        ctx.im2col(&k1, &t(&[8, 3]), 1, 0, 0, 0, 1, 0, false, Type::F32),
        &["IM2COL", "1-D", "2"],
    );
    let i32_img = ctx.new_tensor_4d(Type::I32, 8, 8, 2, 1).unwrap();
    assert_err(
        ctx.im2col(&k, &i32_img, 1, 1, 0, 0, 1, 1, true, Type::F32),
        &["IM2COL", "i32"],
    );
    let five = t(&[8, 8, 2, 1, 2]);
    assert_err(
        ctx.im2col(&k, &five, 1, 1, 0, 0, 1, 1, true, Type::F32),
        &["IM2COL", "ne4"],
    );
    // IM2COL_3D
    let k3 = t(&[2, 2, 2, 6]);
    // As in GGML, N = ne3 / IC rounds down: 4 channels with IC = 3 are one batch.
    let one_batch = ctx
        .im2col_3d(
            &k3,
            &t(&[5, 5, 5, 4]),
            3,
            1,
            1,
            1,
            0,
            0,
            0,
            1,
            1,
            1,
            Type::F32,
        )
        .unwrap();
    assert_eq!(one_batch.ne(), [24, 4, 4, 4, 1]);
    assert_err(
        ctx.im2col_3d(
            &k3,
            &t(&[5, 5, 5, 4]),
            0,
            1,
            1,
            1,
            0,
            0,
            0,
            1,
            1,
            1,
            Type::F32,
        ),
        &["IM2COL_3D", "IC = 0"],
    );
    assert_err(
        ctx.im2col_3d(
            &k3,
            &t(&[5, 5, 5, 4]),
            1 << 40,
            1,
            1,
            1,
            0,
            0,
            0,
            1,
            1,
            1,
            Type::F32,
        ),
        &["IM2COL_3D", "i32"],
    );
    assert_err(
        ctx.im2col_3d(
            &k3,
            &t(&[5, 5, 1, 4]),
            2,
            1,
            1,
            1,
            0,
            0,
            0,
            1,
            1,
            1,
            Type::F32,
        ),
        &["IM2COL_3D", "axis 2"],
    );
    // COL2IM_1D
    assert_err(
        ctx.col2im_1d(&t(&[7, 3]), 1, 2, 0),
        &["COL2IM_1D", "oc = 2"],
    );
    assert_err(
        ctx.col2im_1d(&t(&[6, 3, 2]), 1, 2, 0),
        &["COL2IM_1D", "matrix"],
    );
    assert_err(
        ctx.col2im_1d(&t(&[6, 3]), 0, 2, 0),
        &["COL2IM_1D", "s0 = 0"],
    );
    assert_err(
        ctx.col2im_1d(&t(&[6, 3]), 1, 2, -1),
        &["COL2IM_1D", "p0 = -1"],
    );
    assert_err(
        ctx.col2im_1d(&t(&[4, 1]), 1, 2, 1),
        &["COL2IM_1D", "output samples"],
    );
    assert_err(
        ctx.col2im_1d(&ctx.transpose(&t(&[3, 6])).unwrap(), 1, 2, 0),
        &["COL2IM_1D", "contiguous"],
    );
    // CONV_TRANSPOSE_1D
    let kt1 = t(&[3, 2, 4]);
    assert_err(
        ctx.conv_transpose_1d(&kt1, &t(&[5, 3]), 1, 0, 1),
        &["CONV_TRANSPOSE_1D", "channels"],
    );
    assert_err(
        ctx.conv_transpose_1d(&kt1, &t(&[5, 4, 2]), 1, 0, 1),
        &["CONV_TRANSPOSE_1D", "matrix"],
    );
    assert_err(
        ctx.conv_transpose_1d(&kt1, &t(&[5, 4]), 1, 1, 1),
        &["CONV_TRANSPOSE_1D", "p0 = 1"],
    );
    assert_err(
        ctx.conv_transpose_1d(&kt1, &t(&[5, 4]), 1, 0, 2),
        &["CONV_TRANSPOSE_1D", "d0 = 2"],
    );
    assert_err(
        ctx.conv_transpose_1d(&kt1, &t(&[5, 4]), 0, 0, 1),
        &["CONV_TRANSPOSE_1D", "s0 = 0"],
    );
    // CONV_2D, CONV_2D_DW, CONV_3D, CONV_TRANSPOSE_2D
    assert_err(
        ctx.conv_2d_direct(&k, &img3, 1, 1, 0, 0, 1, 1),
        &["CONV_2D", "channels"],
    );
    assert_err(
        ctx.conv_2d_direct(&k, &img, 1, 1, 0, 0, 0, 1),
        &["CONV_2D", "d0 = 0"],
    );
    assert_err(
        ctx.conv_2d_dw_direct(&k, &img, 1, 1, 0, 0, 1, 1),
        &["CONV_2D_DW", "[KW, KH, 1, C]"],
    );
    assert_err(
        ctx.conv_3d_direct(&k3, &t(&[5, 5, 5, 4]), 1, 1, 1, 0, 0, 0, 1, 1, 1, 2, 2, 2),
        &["CONV_3D", "c·oc = 4"],
    );
    assert_err(
        ctx.conv_3d_direct(&k3, &t(&[5, 5, 5, 5]), 1, 1, 1, 0, 0, 0, 1, 1, 1, 2, 2, 3),
        &["CONV_3D", "c·n = 4"],
    );
    assert_err(
        ctx.conv_3d_direct(&k3, &t(&[5, 5, 5, 4]), 1, 1, 1, 0, 0, 0, 1, 1, 1, 0, 2, 3),
        &["CONV_3D", "c = 0"],
    );
    assert_err(
        ctx.conv_3d(&k3, &t(&[5, 5, 5, 4]), 4, 1, 1, 1, 0, 0, 0, 1, 1, 1),
        &["CONV_3D", "IC = 4"],
    );
    assert_err(
        ctx.conv_transpose_2d_p0(&k, &img3, 1),
        &["CONV_TRANSPOSE_2D", "channels"],
    );
    assert_err(
        ctx.conv_transpose_2d_p0(&t(&[3, 3, 4, 2]), &img, 0),
        &["CONV_TRANSPOSE_2D", "stride = 0"],
    );
}

// ---- validate --------------------------------------------------------------------------------

fn node_meta_check(t: &Tensor, edit: impl FnOnce(&mut Meta, &mut [i32; 16])) -> ggml::Result<()> {
    let mut dst = Meta::of(t);
    let src: Vec<Option<Meta>> = (0..t.n_src_slots())
        .map(|i| t.src(i).map(Meta::of))
        .collect();
    let mut params = t.op_params();
    edit(&mut dst, &mut params);
    let node = NodeMeta {
        dst,
        view_offs: t.view_src().map(|_| t.view_offs()),
        src: &src,
        op_params: &params,
    };
    t.op().validate(&node)
}

/// Every node the builders of this family make validates, composites included; tampered
/// types, shapes, strides and parameters do not.
#[test]
fn nodes_validate() {
    let ctx = Context::init(1 << 20, true).unwrap();
    let t = |ty: Type, ne: &[i64]| ctx.new_tensor(ty, ne).unwrap();
    let k = t(Type::F16, &[3, 3, 2, 4]);
    let img = t(Type::F32, &[8, 8, 2, 1]);
    let cwhn = ctx
        .permute(&t(Type::F32, &[4, 8, 8, 2]), 2, 0, 1, 3)
        .unwrap();
    let kdw = t(Type::F32, &[3, 3, 1, 4]);
    let nodes = vec![
        ctx.im2col(&k, &img, 2, 1, 1, 0, 1, 2, true, Type::F32)
            .unwrap(),
        ctx.im2col(
            &t(Type::F32, &[3, 2, 4]),
            &t(Type::F32, &[9, 2]),
            1,
            0,
            0,
            0,
            1,
            0,
            false,
            Type::F16,
        )
        .unwrap(),
        ctx.im2col_3d(
            &t(Type::F32, &[2, 2, 2, 6]),
            &t(Type::F32, &[5, 5, 5, 4]),
            2,
            1,
            1,
            1,
            0,
            0,
            0,
            1,
            1,
            1,
            Type::F16,
        )
        .unwrap(),
        ctx.col2im_1d(&t(Type::F32, &[6, 3]), 2, 3, 0).unwrap(),
        ctx.conv_transpose_1d(&t(Type::F16, &[3, 2, 4]), &t(Type::F32, &[5, 4]), 2, 0, 1)
            .unwrap(),
        ctx.conv_2d(&k, &img, 1, 1, 1, 1, 1, 1).unwrap(),
        ctx.conv_2d_direct(&k, &img, 1, 1, 1, 1, 1, 1).unwrap(),
        ctx.conv_2d_dw(&kdw, &t(Type::F32, &[8, 8, 4, 2]), 1, 1, 1, 1, 1, 1)
            .unwrap(),
        ctx.conv_2d_dw_direct(&kdw, &cwhn, 1, 1, 1, 1, 1, 1)
            .unwrap(),
        ctx.conv_2d_dw_direct(&kdw, &t(Type::F32, &[8, 8, 4, 2]), 2, 2, 0, 0, 1, 1)
            .unwrap(),
        ctx.conv_3d(
            &t(Type::F32, &[2, 2, 2, 6]),
            &t(Type::F32, &[5, 5, 5, 4]),
            2,
            1,
            1,
            1,
            0,
            0,
            0,
            1,
            1,
            1,
        )
        .unwrap(),
        ctx.conv_1d(&t(Type::F32, &[3, 2, 4]), &t(Type::F32, &[9, 2]), 1, 1, 1)
            .unwrap(),
        ctx.conv_1d_dw(&t(Type::F32, &[3, 1, 4]), &t(Type::F32, &[9, 4]), 1, 1, 1)
            .unwrap(),
        ctx.conv_transpose_2d_p0(&t(Type::F32, &[3, 3, 4, 2]), &img, 2)
            .unwrap(),
        ctx.pool_1d(&img, PoolOp::Avg, 3, 2, 1).unwrap(),
        ctx.pool_2d(&img, PoolOp::Max, 3, 2, 2, 1, 1.0, 0.0)
            .unwrap(),
        ctx.upscale(&img, 2, ScaleMode::Bilinear).unwrap(),
        ctx.interpolate(
            &img,
            5,
            11,
            2,
            1,
            ScaleMode::Bicubic as u32 | ggml::ops::SCALE_FLAG_ALIGN_CORNERS,
        )
        .unwrap(),
    ];
    // Walk each composite down to its sources, validating every node on the way.
    let mut seen = 0;
    let mut stack = nodes.clone();
    while let Some(n) = stack.pop() {
        if n.op() == Op::None {
            continue;
        }
        seen += 1;
        node_meta_check(&n, |_, _| {}).unwrap_or_else(|e| panic!("{:?} {:?}: {e}", n.op(), n.ne()));
        stack.extend((0..n.n_src_slots()).filter_map(|i| n.src(i).cloned()));
    }
    assert!(seen > nodes.len());
    // The CONV_2D_DW node over a channels-innermost input has that layout; as contiguous it
    // is refused.
    let dw = &nodes[8];
    assert_err(
        node_meta_check(dw, |d, _| d.nb = Meta::contiguous(d.ty, d.ne).nb),
        &["CONV_2D_DW", "strides"],
    );
    // IM2COL: another result type, or one the op cannot give.
    assert!(node_meta_check(&nodes[0], |d, _| *d = Meta::contiguous(Type::F16, d.ne)).is_ok());
    assert_err(
        node_meta_check(&nodes[0], |d, _| *d = Meta::contiguous(Type::BF16, d.ne)),
        &["IM2COL", "f16 or f32"],
    );
    assert_err(
        node_meta_check(&nodes[0], |_, p| p[6] = 2),
        &["IM2COL", "is_2D = 2"],
    );
    assert_err(node_meta_check(&nodes[0], |_, p| p[0] = 5), &["IM2COL"]);
    assert_err(
        node_meta_check(&nodes[6], |_, p| p[4] = 0),
        &["CONV_2D", "d0 = 0"],
    );
    assert_err(
        node_meta_check(&nodes[14], |_, p| p[0] = 2),
        &["POOL_1D", "op = 2"],
    );
    assert_err(
        node_meta_check(&nodes[16], |_, p| p[0] = 3),
        &["UPSCALE", "mode"],
    );
    assert_err(
        node_meta_check(&nodes[16], |_, p| p[0] = 0x200),
        &["UPSCALE", "ANTIALIAS"],
    );
}
