//! REPEAT_BACK, ADD_ID, ACC, SET, DIAG, DIAG_MASK_INF/ZERO, CLAMP, LEAKY_RELU, FILL, PAD (zero and
//! circular), PAD_REFLECT_1D, ROLL, ARANGE, TIMESTEP_EMBEDDING, TRI, CROSS_ENTROPY_LOSS.

use ggml::ops::TriType;
use ggml::Type;

use crate::case::{Case, Init, Input, Layout, Metric, Vars};
use crate::host::{indices, shape, Host};

/// `a` with the window's elements (byte strides `nb`, element size 4, from byte `offset`)
/// replaced by `f(a, b)`.
fn window(a: &Host, b: &Host, nb: [usize; 3], offset: usize, f: fn(f64, f64) -> f64) -> Host {
    let mut out = a.clone();
    for i in indices(b.ne) {
        let k = (offset + i[0] * 4 + i[1] * nb[0] + i[2] * nb[1] + i[3] * nb[2]) / 4;
        out.v[k] = f(a.v[k], b.at(i));
    }
    out
}

fn repeat_back(out: &mut Vec<Case>) {
    let pairs: [([i64; 4], [i64; 4]); 4] = [
        ([8, 6, 4, 2], [4, 3, 2, 1]),
        ([10, 5, 4, 3], [10, 5, 4, 3]),
        ([6, 4, 1, 1], [1, 1, 1, 1]),
        ([9, 2, 3, 2], [3, 2, 1, 2]),
    ];
    for (ane, bne) in pairs {
        for (layout, lname) in [
            (Layout::Contiguous, "contiguous"),
            (Layout::Padded, "padded"),
        ] {
            out.push(Case::new(
                "REPEAT_BACK",
                Vars::new()
                    .ty("type", Type::F32)
                    .list("ne", &ane)
                    .list("ne_b", &bne)
                    .val("layout", lname),
                vec![
                    Input::new(Type::F32, &ane).layout(layout),
                    Input::new(Type::F32, &bne),
                ],
                |ctx, x| ctx.repeat_back(&x[0], &x[1]),
                |x| {
                    let (a, b) = (&x[0], &x[1]);
                    let mut out = Host::from_fn(b.ne, |_| 0.0);
                    for i in indices(a.ne) {
                        let j: [usize; 5] = std::array::from_fn(|d| i[d] % b.ne[d]);
                        let k = out.offset(j);
                        out.v[k] += a.at(i);
                    }
                    out
                },
            ));
        }
    }
}

fn add_id(out: &mut Vec<Case>) {
    for (layout, lname) in [
        (Layout::Contiguous, "contiguous"),
        (Layout::Padded, "padded"),
    ] {
        for (n, used, tokens, experts) in [(8i64, 3i64, 2i64, 5i64), (33, 1, 4, 2), (5, 4, 1, 7)] {
            out.push(Case::new(
                "ADD_ID",
                Vars::new()
                    .ty("type", Type::F32)
                    .list("ne", &[n, used, tokens])
                    .val("n_expert", experts)
                    .val("layout", lname),
                vec![
                    Input::new(Type::F32, &[n, used, tokens]).layout(layout),
                    Input::new(Type::F32, &[n, experts]),
                    Input::new(Type::I32, &[used, tokens]).init(Init::Ints(0, experts - 1)),
                ],
                |ctx, x| ctx.add_id(&x[0], &x[1], &x[2]),
                |x| {
                    Host::from_fn(x[0].ne, |i| {
                        let e = x[2].at([i[1], i[2], 0, 0, 0]) as usize;
                        x[0].at(i) + x[1].at([i[0], e, 0, 0, 0])
                    })
                },
            ));
        }
    }
    // An id outside the experts fails the computation, naming it (GGML asserts).
    out.push(Case::fails(
        "ADD_ID",
        Vars::new().ty("type", Type::F32).val("oob", 1),
        vec![
            Input::new(Type::F32, &[8, 2, 3]),
            Input::new(Type::F32, &[8, 4]),
            Input::new(Type::I32, &[2, 3]).init(Init::Custom(std::sync::Arc::new(|_, i| {
                if i == [1, 2, 0, 0, 0] {
                    4.0
                } else {
                    0.0
                }
            }))),
        ],
        |ctx, x| ctx.add_id(&x[0], &x[1], &x[2]),
        "src2 index 4 at [1, 2, 0] is outside 0..4",
    ));
}

fn acc_set(out: &mut Vec<Case>) {
    // (a shape, b shape, window strides in elements, offset in elements)
    type Window = ([i64; 3], [i64; 3], [usize; 3], usize);
    let windows: [Window; 4] = [
        ([10, 6, 3], [4, 3, 2], [10, 60, 180], 12),
        ([10, 6, 3], [10, 6, 3], [10, 60, 180], 0),
        ([7, 5, 1], [3, 2, 1], [14, 70, 70], 1),
        ([16, 4, 2], [5, 1, 1], [16, 64, 128], 100),
    ];
    for (ane, bne, nbe, off) in windows {
        let nb = nbe.map(|x| x * 4);
        let offset = off * 4;
        for inplace in [false, true] {
            let vars = || {
                Vars::new()
                    .list("a", &ane)
                    .list("b", &bne)
                    .list("nb", &nb)
                    .val("offset", offset)
                    .flag("inplace", inplace)
            };
            out.push(Case::new(
                "ACC",
                vars(),
                vec![Input::new(Type::F32, &ane), Input::new(Type::F32, &bne)],
                move |ctx, x| {
                    if inplace {
                        ctx.acc_inplace(&x[0], &x[1], nb[0], nb[1], nb[2], offset)
                    } else {
                        ctx.acc(&x[0], &x[1], nb[0], nb[1], nb[2], offset)
                    }
                },
                move |x| window(&x[0], &x[1], nb, offset, |a, b| a + b),
            ));
            for ty in [Type::F32, Type::I32] {
                let init = if ty == Type::I32 {
                    Init::Ints(-50, 50)
                } else {
                    Init::Uniform(-1.0, 1.0)
                };
                out.push(
                    Case::new(
                        "SET",
                        vars().ty("type", ty),
                        vec![
                            Input::new(ty, &ane).init(init.clone()),
                            Input::new(ty, &bne).init(init),
                        ],
                        move |ctx, x| {
                            if inplace {
                                ctx.set_inplace(&x[0], &x[1], nb[0], nb[1], nb[2], offset)
                            } else {
                                ctx.set(&x[0], &x[1], nb[0], nb[1], nb[2], offset)
                            }
                        },
                        move |x| window(&x[0], &x[1], nb, offset, |_, b| b),
                    )
                    .metric(Metric::Exact),
                );
            }
        }
    }
    out.push(
        Case::new(
            "SET",
            Vars::new()
                .val("form", "1d")
                .list("a", &[12])
                .list("b", &[5])
                .val("offset", 12),
            vec![Input::new(Type::F32, &[12]), Input::new(Type::F32, &[5])],
            |ctx, x| ctx.set_1d(&x[0], &x[1], 12),
            |x| window(&x[0], &x[1], [48, 48, 48], 12, |_, b| b),
        )
        .metric(Metric::Exact),
    );
    out.push(
        Case::new(
            "SET",
            Vars::new()
                .val("form", "2d")
                .list("a", &[6, 5])
                .list("b", &[2, 3])
                .val("nb1", 24)
                .val("offset", 4),
            vec![
                Input::new(Type::F32, &[6, 5]),
                Input::new(Type::F32, &[2, 3]),
            ],
            |ctx, x| ctx.set_2d(&x[0], &x[1], 24, 4),
            |x| window(&x[0], &x[1], [24, 120, 120], 4, |_, b| b),
        )
        .metric(Metric::Exact),
    );
}

fn masks(out: &mut Vec<Case>) {
    for ne in [[5i64, 1, 3], [1, 1, 2], [9, 1, 1]] {
        out.push(
            Case::new(
                "DIAG",
                Vars::new().ty("type", Type::F32).list("ne", &ne),
                vec![Input::new(Type::F32, &ne)],
                |ctx, x| ctx.diag(&x[0]),
                |x| {
                    let a = &x[0];
                    Host::from_fn(
                        shape(&[a.ne[0] as i64, a.ne[0] as i64, a.ne[2] as i64]),
                        |i| {
                            if i[0] == i[1] {
                                a.at([i[0], 0, i[2], 0, 0])
                            } else {
                                0.0
                            }
                        },
                    )
                },
            )
            .metric(Metric::Exact),
        );
    }
    for (ne, n_past) in [
        ([7i64, 5, 3], 0),
        ([7, 5, 3], 2),
        ([4, 6, 1], 1),
        ([3, 3, 2], 9),
    ] {
        for (op, value) in [
            ("DIAG_MASK_INF", f64::NEG_INFINITY),
            ("DIAG_MASK_ZERO", 0.0),
        ] {
            for inplace in [false, true] {
                out.push(Case::new(
                    op,
                    Vars::new()
                        .ty("type", Type::F32)
                        .list("ne", &ne)
                        .val("n_past", n_past)
                        .flag("inplace", inplace),
                    vec![Input::new(Type::F32, &ne)],
                    move |ctx, x| match (op, inplace) {
                        ("DIAG_MASK_INF", false) => ctx.diag_mask_inf(&x[0], n_past),
                        ("DIAG_MASK_INF", true) => ctx.diag_mask_inf_inplace(&x[0], n_past),
                        (_, false) => ctx.diag_mask_zero(&x[0], n_past),
                        (_, true) => ctx.diag_mask_zero_inplace(&x[0], n_past),
                    },
                    move |x| {
                        Host::from_fn(x[0].ne, |i| {
                            if i[0] > n_past as usize + i[1] {
                                value
                            } else {
                                x[0].at(i)
                            }
                        })
                    },
                ));
            }
        }
    }
    for tri in [
        TriType::UpperDiag,
        TriType::Upper,
        TriType::LowerDiag,
        TriType::Lower,
    ] {
        for ne in [[6i64, 6, 2], [1, 1, 1], [5, 5, 3]] {
            out.push(
                Case::new(
                    "TRI",
                    Vars::new()
                        .ty("type", Type::F32)
                        .list("ne", &ne)
                        .val("tri_type", tri as i32),
                    vec![Input::new(Type::F32, &ne)],
                    move |ctx, x| ctx.tri(&x[0], tri),
                    move |x| {
                        Host::from_fn(x[0].ne, |i| {
                            if tri.keeps(i[0], i[1]) {
                                x[0].at(i)
                            } else {
                                0.0
                            }
                        })
                    },
                )
                .metric(Metric::Exact),
            );
        }
    }
}

fn element_wise(out: &mut Vec<Case>) {
    for ty in [Type::F32, Type::F16] {
        for (layout, lname) in [
            (Layout::Contiguous, "contiguous"),
            (Layout::Padded, "padded"),
        ] {
            for inplace in [false, true] {
                let vars = || {
                    Vars::new()
                        .ty("type", ty)
                        .list("ne", &[13, 7, 3])
                        .val("layout", lname)
                        .flag("inplace", inplace)
                };
                let input = || {
                    Input::new(ty, &[13, 7, 3])
                        .layout(layout)
                        .uniform(-2.0, 2.0)
                };
                out.push(Case::new(
                    "CLAMP",
                    vars().float("min", -0.5).float("max", 0.7),
                    vec![input()],
                    move |ctx, x| {
                        if inplace {
                            ctx.clamp_inplace(&x[0], -0.5, 0.7)
                        } else {
                            ctx.clamp(&x[0], -0.5, 0.7)
                        }
                    },
                    |x| Host::from_fn(x[0].ne, |i| x[0].at(i).clamp(-0.5, 0.7)),
                ));
                out.push(Case::new(
                    "LEAKY_RELU",
                    vars().float("negative_slope", 0.1),
                    vec![input()],
                    move |ctx, x| ctx.leaky_relu(&x[0], 0.1, inplace),
                    |x| {
                        Host::from_fn(x[0].ne, |i| {
                            let v = x[0].at(i);
                            if v > 0.0 {
                                v
                            } else {
                                0.1f32 as f64 * v
                            }
                        })
                    },
                ));
            }
        }
        for inplace in [false, true] {
            out.push(
                Case::new(
                    "FILL",
                    Vars::new()
                        .ty("type", ty)
                        .list("ne", &[9, 4, 2])
                        .float("c", 2.5)
                        .flag("inplace", inplace),
                    vec![Input::new(ty, &[9, 4, 2])],
                    move |ctx, x| {
                        if inplace {
                            ctx.fill_inplace(&x[0], 2.5)
                        } else {
                            ctx.fill(&x[0], 2.5)
                        }
                    },
                    |x| Host::from_fn(x[0].ne, |_| 2.5),
                )
                .metric(Metric::Exact),
            );
        }
    }
}

fn padding(out: &mut Vec<Case>) {
    let pads: [([usize; 4], [usize; 4]); 4] = [
        ([0, 0, 0, 0], [3, 1, 0, 2]),
        ([2, 1, 1, 0], [1, 0, 2, 1]),
        ([0, 0, 0, 0], [0, 0, 0, 0]),
        ([4, 3, 0, 0], [6, 2, 1, 0]),
    ];
    let layouts = [
        (Layout::Contiguous, "contiguous"),
        (Layout::Permuted([1, 0, 2, 3]), "permuted"),
        (Layout::Padded, "padded"),
    ];
    for (layout, lname) in layouts {
        for (lp, rp) in pads {
            for circular in [false, true] {
                out.push(
                    Case::new(
                        "PAD",
                        Vars::new()
                            .list("ne", &[5, 4, 3, 2])
                            .list("lp", &lp)
                            .list("rp", &rp)
                            .flag("circular", circular)
                            .val("layout", lname),
                        vec![Input::new(Type::F32, &[5, 4, 3, 2]).layout(layout)],
                        move |ctx, x| {
                            let [l0, l1, l2, l3] = lp.map(|v| v as i32);
                            let [r0, r1, r2, r3] = rp.map(|v| v as i32);
                            if circular {
                                ctx.pad_ext_circular(&x[0], l0, r0, l1, r1, l2, r2, l3, r3)
                            } else {
                                ctx.pad_ext(&x[0], l0, r0, l1, r1, l2, r2, l3, r3)
                            }
                        },
                        move |x| pad_ref(&x[0], lp, rp, circular),
                    )
                    .metric(Metric::Exact),
                );
            }
        }
    }
    for (ne, p0, p1) in [
        ([9i64, 3, 2], 3i64, 5i64),
        ([4, 1, 1], 0, 3),
        ([6, 2, 1], 5, 0),
    ] {
        out.push(
            Case::new(
                "PAD_REFLECT_1D",
                Vars::new().list("ne", &ne).val("p0", p0).val("p1", p1),
                vec![Input::new(Type::F32, &ne)],
                move |ctx, x| ctx.pad_reflect_1d(&x[0], p0 as i32, p1 as i32),
                move |x| {
                    let n = x[0].ne[0] as i64;
                    x[0].map_rows((n + p0 + p1) as usize, |_, row| {
                        (0..n + p0 + p1)
                            .map(|i| {
                                let j = (i - p0).abs();
                                let j = if j >= n { 2 * (n - 1) - j } else { j };
                                row[j as usize]
                            })
                            .collect()
                    })
                },
            )
            .metric(Metric::Exact),
        );
    }
    for shifts in [[2, -1, 1, 0], [-6, 4, -2, 1], [0, 0, 0, 0], [3, 0, 2, -1]] {
        for (layout, lname) in [
            (Layout::Contiguous, "contiguous"),
            (Layout::Padded, "padded"),
        ] {
            out.push(
                Case::new(
                    "ROLL",
                    Vars::new()
                        .list("ne", &[7, 5, 3, 2])
                        .list("shift", &shifts)
                        .val("layout", lname),
                    vec![Input::new(Type::F32, &[7, 5, 3, 2]).layout(layout)],
                    move |ctx, x| ctx.roll(&x[0], shifts[0], shifts[1], shifts[2], shifts[3]),
                    move |x| {
                        let a = &x[0];
                        Host::from_fn(a.ne, |i| {
                            let mut j = i;
                            for d in 0..4 {
                                j[d] = (i[d] as i64 - shifts[d] as i64).rem_euclid(a.ne[d] as i64)
                                    as usize;
                            }
                            a.at(j)
                        })
                    },
                )
                .metric(Metric::Exact),
            );
        }
    }
}

/// PAD's f64 reference: zeros or the periodic continuation.
fn pad_ref(a: &Host, lp: [usize; 4], rp: [usize; 4], circular: bool) -> Host {
    let dim = |d: usize| (a.ne[d] + lp[d] + rp[d]) as i64;
    Host::from_fn(shape(&[dim(0), dim(1), dim(2), dim(3)]), |i| {
        let mut j = [0usize; 5];
        for d in 0..4 {
            let k = i[d] as i64 - lp[d] as i64;
            let n = a.ne[d] as i64;
            if circular {
                j[d] = k.rem_euclid(n) as usize;
            } else if (0..n).contains(&k) {
                j[d] = k as usize;
            } else {
                return 0.0;
            }
        }
        a.at(j)
    })
}

fn generators(out: &mut Vec<Case>) {
    let ranges = [
        (0.5f32, 10.0f32, 0.7f32),
        (-3.0, 3.0, 1.0),
        (0.0, 1.0, 0.3),
        (2.0, 2.5, 1.0),
    ];
    for (start, stop, step) in ranges {
        out.push(Case::new(
            "ARANGE",
            Vars::new()
                .float("start", start)
                .float("stop", stop)
                .float("step", step),
            vec![],
            move |ctx, _| ctx.arange(start, stop, step),
            move |_| {
                let n = ((stop - start) / step).ceil() as i64;
                Host::from_fn(shape(&[n]), |i| (start + step * i[0] as f32) as f64)
            },
        ));
    }
    for (n, dim, max_period) in [(6i64, 16i32, 10000i32), (3, 15, 10000), (5, 2, 100)] {
        out.push(Case::new(
            "TIMESTEP_EMBEDDING",
            Vars::new()
                .list("ne", &[n, 1, 1, 1])
                .val("dim", dim)
                .val("max_period", max_period),
            vec![Input::new(Type::F32, &[n]).uniform(0.0, 100.0)],
            move |ctx, x| ctx.timestep_embedding(&x[0], dim, max_period),
            move |x| {
                let half = (dim / 2) as usize;
                Host::from_fn(shape(&[dim as i64, n]), |i| {
                    let (ts, j) = (x[0].at([i[1], 0, 0, 0, 0]), i[0]);
                    if j >= 2 * half {
                        return 0.0;
                    }
                    let freq = (-(max_period as f64).ln() * (j % half) as f64 / half as f64).exp();
                    if j < half {
                        (ts * freq).cos()
                    } else {
                        (ts * freq).sin()
                    }
                })
            },
        ));
    }
}

fn losses(out: &mut Vec<Case>) {
    for (nc, nr) in [(10i64, 4i64), (3, 1), (33, 7)] {
        out.push(Case::new(
            "CROSS_ENTROPY_LOSS",
            Vars::new()
                .ty("type", Type::F32)
                .list("ne", &[nc, nr, 1, 1]),
            vec![
                Input::new(Type::F32, &[nc, nr]).uniform(-2.0, 2.0),
                Input::new(Type::F32, &[nc, nr]).uniform(0.0, 1.0),
            ],
            // The targets are made probabilities inside the graph: each row a softmax.
            |ctx, x| {
                let p = ctx.soft_max(&x[1])?;
                ctx.cross_entropy_loss(&x[0], &p)
            },
            |x| {
                let (a, b) = (&x[0], &x[1]);
                let mut total = 0.0;
                for r in 0..a.ne[1] {
                    let (ar, br) = (a.row([0, r, 0, 0, 0]), b.row([0, r, 0, 0, 0]));
                    let bmax = br.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                    let bsum: f64 = br.iter().map(|v| (v - bmax).exp()).sum();
                    let max = ar.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                    let lse = ar.iter().map(|v| (v - max).exp()).sum::<f64>().ln();
                    total += ar
                        .iter()
                        .zip(br)
                        .map(|(v, p)| (v - max - lse) * (p - bmax).exp() / bsum)
                        .sum::<f64>();
                }
                Host::from_fn([1; 5], |_| -total / a.ne[1] as f64)
            },
        ));
    }
}

/// The cases of this family.
pub fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    repeat_back(&mut out);
    add_id(&mut out);
    acc_set(&mut out);
    masks(&mut out);
    element_wise(&mut out);
    padding(&mut out);
    generators(&mut out);
    losses(&mut out);
    out
}
