//! Arithmetic, windows, masks, padding and generators against plain f64 references: ADD_ID,
//! ACC, SET, DIAG, DIAG_MASK_INF/ZERO, CLAMP, LEAKY_RELU, PAD (zero and circular),
//! PAD_REFLECT_1D, ROLL, ARANGE, TIMESTEP_EMBEDDING, TRI, FILL, CROSS_ENTROPY_LOSS.
//!
//! Each case is a name in GGML's `OP(var=value,…)` style, a builder that makes the inputs and
//! the node, and a reference computed from the inputs' values as read back.

mod common;

use common::{
    assert_aliases, assert_err, check, input, input_values, shape, Host, Layout, EXACT, TOL,
};
use ggml::ops::{Meta, NodeMeta, TriType};
use ggml::{Context, Tensor, Type};

/// A window of byte strides `nb` (element size 4) at byte `offset` over a flat host tensor:
/// the flat element index of window element `i`.
fn window_index(i: [usize; 5], nb: [usize; 3], offset: usize) -> usize {
    (offset + i[0] * 4 + i[1] * nb[0] + i[2] * nb[1] + i[3] * nb[2]) / 4
}

/// `a` with the window's elements replaced by `f(a, b)`.
fn window_ref(
    a: &Host,
    b: &Host,
    nb: [usize; 3],
    offset: usize,
    f: impl Fn(f64, f64) -> f64,
) -> Host {
    let mut out = a.clone();
    for i in common::indices(b.ne) {
        let k = window_index(i, nb, offset);
        out.v[k] = f(a.v[k], b.at(i));
    }
    out
}

#[test]
fn add_id() {
    for layout in [Layout::Contiguous, Layout::Padded] {
        for (n, used, tokens, experts) in [(8, 3, 2, 5), (33, 1, 4, 2), (5, 4, 1, 7)] {
            let name = format!("ADD_ID(ne=[{n},{used},{tokens}],n_expert={experts},v={layout:?})");
            check(&name, TOL, |ctx, rng| {
                let (a, ah) = input(ctx, Type::F32, &[n, used, tokens], layout, rng, -1.0, 1.0)?;
                let (b, bh) = input(
                    ctx,
                    Type::F32,
                    &[n, experts],
                    Layout::Contiguous,
                    rng,
                    -1.0,
                    1.0,
                )?;
                let ids: Vec<f64> = (0..used * tokens)
                    .map(|_| rng.below(experts as usize) as f64)
                    .collect();
                let (idt, idh) = input_values(ctx, Type::I32, &[used, tokens], &ids)?;
                let want = Host::from_fn(ah.ne, |i| {
                    let e = idh.at([i[1], i[2], 0, 0, 0]) as usize;
                    ah.at(i) + bh.at([i[0], e, 0, 0, 0])
                });
                Ok((ctx.add_id(&a, &b, &idt)?, want))
            });
        }
    }
}

#[test]
fn add_id_out_of_range_gives_nan_rows_not_a_crash() {
    let ctx = Context::init(1 << 20, false).unwrap();
    let (a, _) = input_values(&ctx, Type::F32, &[2, 2, 1], &[1.0, 2.0, 3.0, 4.0]).unwrap();
    let (b, _) = input_values(&ctx, Type::F32, &[2, 1], &[10.0, 20.0]).unwrap();
    let (ids, _) = input_values(&ctx, Type::I32, &[2, 1], &[0.0, 5.0]).unwrap();
    let out = ctx.add_id(&a, &b, &ids).unwrap();
    let cpu = ggml::backend::cpu_init().unwrap();
    cpu.graph_compute(&ctx.build_forward_expand(&out).unwrap())
        .unwrap();
    let v = out.get_f32().unwrap();
    assert_eq!(&v[..2], &[11.0, 22.0]);
    assert!(v[2].is_nan() && v[3].is_nan());
}

#[test]
fn acc_and_set() {
    // (a shape, b shape, window strides in elements, offset in elements)
    type Window = ([i64; 3], [i64; 3], [usize; 3], usize);
    let cases: [Window; 4] = [
        ([10, 6, 3], [4, 3, 2], [10, 60, 180], 12),
        ([10, 6, 3], [10, 6, 3], [10, 60, 180], 0),
        ([7, 5, 1], [3, 2, 1], [14, 70, 70], 1),
        ([16, 4, 2], [5, 1, 1], [16, 64, 128], 100),
    ];
    for (ane, bne, nbe, off) in cases {
        let nb = nbe.map(|x| x * 4);
        let offset = off * 4;
        for inplace in [false, true] {
            for op in ["ACC", "SET"] {
                let name = format!(
                    "{op}(a={ane:?},b={bne:?},nb={nb:?},offset={offset},inplace={inplace})"
                );
                check(&name, if op == "ACC" { TOL } else { EXACT }, |ctx, rng| {
                    let (a, ah) = input(ctx, Type::F32, &ane, Layout::Contiguous, rng, -1.0, 1.0)?;
                    let (b, bh) = input(ctx, Type::F32, &bne, Layout::Contiguous, rng, -1.0, 1.0)?;
                    let (out, want) = if op == "ACC" {
                        let out = if inplace {
                            ctx.acc_inplace(&a, &b, nb[0], nb[1], nb[2], offset)?
                        } else {
                            ctx.acc(&a, &b, nb[0], nb[1], nb[2], offset)?
                        };
                        (out, window_ref(&ah, &bh, nb, offset, |x, y| x + y))
                    } else {
                        let out = if inplace {
                            ctx.set_inplace(&a, &b, nb[0], nb[1], nb[2], offset)?
                        } else {
                            ctx.set(&a, &b, nb[0], nb[1], nb[2], offset)?
                        };
                        (out, window_ref(&ah, &bh, nb, offset, |_, y| y))
                    };
                    if inplace {
                        assert_aliases(&out, &a);
                    }
                    Ok((out, want))
                });
            }
        }
    }
}

#[test]
fn set_1d_2d_and_i32() {
    check(
        "SET_1D(type=i32,a=[12],b=[5],offset=12)",
        EXACT,
        |ctx, rng| {
            let av: Vec<f64> = (0..12).map(|_| rng.range(-50, 50) as f64).collect();
            let bv: Vec<f64> = (0..5).map(|_| rng.range(-50, 50) as f64).collect();
            let (a, ah) = input_values(ctx, Type::I32, &[12], &av)?;
            let (b, bh) = input_values(ctx, Type::I32, &[5], &bv)?;
            let want = window_ref(&ah, &bh, [48, 48, 48], 12, |_, y| y);
            Ok((ctx.set_1d(&a, &b, 12)?, want))
        },
    );
    check(
        "SET_2D(type=f32,a=[6,5],b=[2,3],nb1=24,offset=4)",
        EXACT,
        |ctx, rng| {
            let (a, ah) = input(ctx, Type::F32, &[6, 5], Layout::Contiguous, rng, -1.0, 1.0)?;
            let (b, bh) = input(ctx, Type::F32, &[2, 3], Layout::Contiguous, rng, -1.0, 1.0)?;
            let want = window_ref(&ah, &bh, [24, 120, 120], 4, |_, y| y);
            Ok((ctx.set_2d(&a, &b, 24, 4)?, want))
        },
    );
}

#[test]
fn diag() {
    for ne in [[5i64, 1, 3], [1, 1, 2], [9, 1, 1]] {
        check(&format!("DIAG(ne={ne:?})"), EXACT, |ctx, rng| {
            let (a, ah) = input(ctx, Type::F32, &ne, Layout::Contiguous, rng, -1.0, 1.0)?;
            let out_ne = shape(&[ne[0], ne[0], ne[2]]);
            let want = Host::from_fn(out_ne, |i| {
                if i[0] == i[1] {
                    ah.at([i[0], 0, i[2], 0, 0])
                } else {
                    0.0
                }
            });
            Ok((ctx.diag(&a)?, want))
        });
    }
}

#[test]
fn diag_masks() {
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
                let name = format!("{op}(ne={ne:?},n_past={n_past},inplace={inplace})");
                check(&name, TOL, |ctx, rng| {
                    let (a, ah) = input(ctx, Type::F32, &ne, Layout::Contiguous, rng, -1.0, 1.0)?;
                    let want = Host::from_fn(ah.ne, |i| {
                        if i[0] > n_past as usize + i[1] {
                            value
                        } else {
                            ah.at(i)
                        }
                    });
                    let out = match (op, inplace) {
                        ("DIAG_MASK_INF", false) => ctx.diag_mask_inf(&a, n_past)?,
                        ("DIAG_MASK_INF", true) => ctx.diag_mask_inf_inplace(&a, n_past)?,
                        (_, false) => ctx.diag_mask_zero(&a, n_past)?,
                        (_, true) => ctx.diag_mask_zero_inplace(&a, n_past)?,
                    };
                    Ok((out, want))
                });
            }
        }
    }
}

#[test]
fn clamp_leaky_relu_fill() {
    for ty in [Type::F32, Type::F16] {
        for layout in [Layout::Contiguous, Layout::Padded] {
            for inplace in [false, true] {
                let name =
                    format!("CLAMP(type={ty},min=-0.5,max=0.7,v={layout:?},inplace={inplace})");
                check(&name, TOL, |ctx, rng| {
                    let (a, ah) = input(ctx, ty, &[13, 7, 3], layout, rng, -2.0, 2.0)?;
                    let want = Host::from_fn(ah.ne, |i| ah.at(i).clamp(-0.5, 0.7));
                    let out = if inplace {
                        ctx.clamp_inplace(&a, -0.5, 0.7)?
                    } else {
                        ctx.clamp(&a, -0.5, 0.7)?
                    };
                    Ok((out, want))
                });
                let name =
                    format!("LEAKY_RELU(type={ty},slope=0.1,v={layout:?},inplace={inplace})");
                check(&name, TOL, |ctx, rng| {
                    let (a, ah) = input(ctx, ty, &[13, 7, 3], layout, rng, -2.0, 2.0)?;
                    let want = Host::from_fn(ah.ne, |i| {
                        let x = ah.at(i);
                        if x > 0.0 {
                            x
                        } else {
                            0.1f32 as f64 * x
                        }
                    });
                    Ok((ctx.leaky_relu(&a, 0.1, inplace)?, want))
                });
            }
            let name = format!("FILL(type={ty},c=2.5)");
            check(&name, EXACT, |ctx, rng| {
                let (a, ah) = input(ctx, ty, &[9, 4, 2], Layout::Contiguous, rng, -1.0, 1.0)?;
                Ok((ctx.fill(&a, 2.5)?, Host::from_fn(ah.ne, |_| 2.5)))
            });
        }
        check(
            &format!("FILL(type={ty},c=-1,inplace=true)"),
            EXACT,
            |ctx, rng| {
                let (a, ah) = input(ctx, ty, &[5, 3], Layout::Contiguous, rng, -1.0, 1.0)?;
                let out = ctx.fill_inplace(&a, -1.0)?;
                assert_aliases(&out, &a);
                Ok((out, Host::from_fn(ah.ne, |_| -1.0)))
            },
        );
    }
}

#[test]
fn clamp_maps_nan_to_max_as_ggml() {
    let ctx = Context::init(1 << 20, false).unwrap();
    let (a, _) = input_values(&ctx, Type::F32, &[3], &[f64::NAN, -9.0, 9.0]).unwrap();
    let out = ctx.clamp(&a, -1.0, 2.0).unwrap();
    let cpu = ggml::backend::cpu_init().unwrap();
    cpu.graph_compute(&ctx.build_forward_expand(&out).unwrap())
        .unwrap();
    assert_eq!(out.get_f32().unwrap(), vec![2.0, -1.0, 2.0]);
}

/// The f64 reference of PAD: zeros or the periodic continuation.
fn pad_ref(a: &Host, lp: [usize; 4], rp: [usize; 4], circular: bool) -> Host {
    let ne = shape(&[
        (a.ne[0] + lp[0] + rp[0]) as i64,
        (a.ne[1] + lp[1] + rp[1]) as i64,
        (a.ne[2] + lp[2] + rp[2]) as i64,
        (a.ne[3] + lp[3] + rp[3]) as i64,
    ]);
    Host::from_fn(ne, |i| {
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

#[test]
fn pad() {
    let grids: [([usize; 4], [usize; 4]); 4] = [
        ([0, 0, 0, 0], [3, 1, 0, 2]),
        ([2, 1, 1, 0], [1, 0, 2, 1]),
        ([0, 0, 0, 0], [0, 0, 0, 0]),
        ([4, 3, 0, 0], [6, 2, 1, 0]),
    ];
    for layout in [
        Layout::Contiguous,
        Layout::Permuted([1, 0, 2, 3]),
        Layout::Padded,
    ] {
        for (lp, rp) in grids {
            for circular in [false, true] {
                let name = format!(
                    "PAD(ne=[5,4,3,2],lp={lp:?},rp={rp:?},circular={circular},v={layout:?})"
                );
                check(&name, EXACT, |ctx, rng| {
                    let (a, ah) = input(ctx, Type::F32, &[5, 4, 3, 2], layout, rng, -1.0, 1.0)?;
                    let [l0, l1, l2, l3] = lp.map(|x| x as i32);
                    let [r0, r1, r2, r3] = rp.map(|x| x as i32);
                    let out = if circular {
                        ctx.pad_ext_circular(&a, l0, r0, l1, r1, l2, r2, l3, r3)?
                    } else if lp == [0; 4] {
                        ctx.pad(&a, r0, r1, r2, r3)?
                    } else {
                        ctx.pad_ext(&a, l0, r0, l1, r1, l2, r2, l3, r3)?
                    };
                    Ok((out, pad_ref(&ah, lp, rp, circular)))
                });
            }
        }
    }
}

#[test]
fn pad_reflect_1d() {
    for (ne, p0, p1) in [([9i64, 3, 2], 3, 5), ([4, 1, 1], 0, 3), ([6, 2, 1], 5, 0)] {
        check(
            &format!("PAD_REFLECT_1D(ne={ne:?},p0={p0},p1={p1})"),
            EXACT,
            |ctx, rng| {
                let (a, ah) = input(ctx, Type::F32, &ne, Layout::Contiguous, rng, -1.0, 1.0)?;
                let n = ne[0];
                let want = ah.map_rows((n + p0 + p1) as usize, |_, row| {
                    (0..n + p0 + p1)
                        .map(|i| {
                            let j = i - p0;
                            let j = if j < 0 {
                                -j
                            } else if j >= n {
                                2 * (n - 1) - j
                            } else {
                                j
                            };
                            row[j as usize]
                        })
                        .collect()
                });
                Ok((ctx.pad_reflect_1d(&a, p0 as i32, p1 as i32)?, want))
            },
        );
    }
}

#[test]
fn roll() {
    for shifts in [[2, -1, 1, 0], [-6, 4, -2, 1], [0, 0, 0, 0], [3, 0, 2, -1]] {
        for layout in [Layout::Contiguous, Layout::Padded] {
            check(
                &format!("ROLL(ne=[7,5,3,2],shift={shifts:?},v={layout:?})"),
                EXACT,
                |ctx, rng| {
                    let (a, ah) = input(ctx, Type::F32, &[7, 5, 3, 2], layout, rng, -1.0, 1.0)?;
                    let want = Host::from_fn(ah.ne, |i| {
                        let mut j = i;
                        for d in 0..4 {
                            j[d] = (i[d] as i64 - shifts[d] as i64).rem_euclid(ah.ne[d] as i64)
                                as usize;
                        }
                        ah.at(j)
                    });
                    Ok((
                        ctx.roll(&a, shifts[0], shifts[1], shifts[2], shifts[3])?,
                        want,
                    ))
                },
            );
        }
    }
}

#[test]
fn arange() {
    for (start, stop, step) in [
        (0.5f32, 10.0f32, 0.7f32),
        (-3.0, 3.0, 1.0),
        (0.0, 1.0, 0.3),
        (2.0, 2.5, 1.0),
    ] {
        check(
            &format!("ARANGE(start={start},stop={stop},step={step})"),
            TOL,
            |ctx, _| {
                let n = ((stop - start) / step).ceil() as usize;
                let want =
                    Host::from_fn(shape(&[n as i64]), |i| (start + step * i[0] as f32) as f64);
                Ok((ctx.arange(start, stop, step)?, want))
            },
        );
    }
}

#[test]
fn timestep_embedding() {
    for (n, dim, max_period) in [(6i64, 16i32, 10000i32), (3, 15, 10000), (5, 2, 100)] {
        let name = format!("TIMESTEP_EMBEDDING(n={n},dim={dim},max_period={max_period})");
        check(&name, TOL, |ctx, rng| {
            let (t, th) = input(ctx, Type::F32, &[n], Layout::Contiguous, rng, 0.0, 100.0)?;
            let half = (dim / 2) as usize;
            let want = Host::from_fn(shape(&[dim as i64, n]), |i| {
                let ts = th.at([i[1], 0, 0, 0, 0]);
                let j = i[0];
                if j >= 2 * half {
                    return 0.0;
                }
                let jj = j % half;
                let freq = (-(max_period as f64).ln() * jj as f64 / half as f64).exp();
                if j < half {
                    (ts * freq).cos()
                } else {
                    (ts * freq).sin()
                }
            });
            Ok((ctx.timestep_embedding(&t, dim, max_period)?, want))
        });
    }
}

#[test]
fn tri() {
    for tri in [
        TriType::UpperDiag,
        TriType::Upper,
        TriType::LowerDiag,
        TriType::Lower,
    ] {
        for ne in [[6i64, 6, 2], [1, 1, 1], [5, 5, 3]] {
            check(
                &format!("TRI(type={tri:?},ne={ne:?})"),
                EXACT,
                |ctx, rng| {
                    let (a, ah) = input(ctx, Type::F32, &ne, Layout::Contiguous, rng, -1.0, 1.0)?;
                    let want =
                        Host::from_fn(
                            ah.ne,
                            |i| if tri.keeps(i[0], i[1]) { ah.at(i) } else { 0.0 },
                        );
                    Ok((ctx.tri(&a, tri)?, want))
                },
            );
        }
    }
}

#[test]
fn cross_entropy_loss() {
    for (nc, nr) in [(10i64, 4i64), (3, 1), (33, 7)] {
        check(
            &format!("CROSS_ENTROPY_LOSS(ne=[{nc},{nr}])"),
            TOL,
            |ctx, rng| {
                let (a, ah) = input(
                    ctx,
                    Type::F32,
                    &[nc, nr],
                    Layout::Contiguous,
                    rng,
                    -2.0,
                    2.0,
                )?;
                // Target probabilities: each row a softmax of random values.
                let raw: Vec<f64> = (0..nc * nr).map(|_| rng.uniform(-1.0, 1.0)).collect();
                let mut probs = raw.clone();
                for row in probs.chunks_mut(nc as usize) {
                    let s: f64 = row.iter().map(|x| x.exp()).sum();
                    row.iter_mut().for_each(|x| *x = x.exp() / s);
                }
                let (b, bh) = input_values(ctx, Type::F32, &[nc, nr], &probs)?;
                let mut total = 0.0;
                for r in 0..nr as usize {
                    let (ar, br) = (ah.row([r, 0, 0, 0]), bh.row([r, 0, 0, 0]));
                    let max = ar.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                    let lse = ar.iter().map(|x| (x - max).exp()).sum::<f64>().ln();
                    total += ar
                        .iter()
                        .zip(br)
                        .map(|(x, p)| (x - max - lse) * p)
                        .sum::<f64>();
                }
                let want = Host::from_fn(shape(&[1]), |_| -total / nr as f64);
                Ok((ctx.cross_entropy_loss(&a, &b)?, want))
            },
        );
    }
}

/// The node's own description as `Op::validate` would receive it from outside.
fn validates(t: &Tensor) {
    let src: Vec<Option<Meta>> = (0..t.n_src_slots())
        .map(|i| t.src(i).map(Meta::of))
        .collect();
    let params = t.op_params();
    let node = NodeMeta {
        dst: Meta::of(t),
        view_offs: t.view_src().map(|_| t.view_offs()),
        src: &src,
        op_params: &params,
    };
    t.op()
        .validate(&node)
        .unwrap_or_else(|e| panic!("{} refused: {e}", t.op().name()));
}

#[test]
fn built_nodes_validate() {
    let ctx = Context::init(1 << 20, true).unwrap();
    let a = ctx.new_tensor_3d(Type::F32, 8, 6, 2).unwrap();
    let v = ctx.new_tensor_1d(Type::F32, 8).unwrap();
    let b = ctx.new_tensor_2d(Type::F32, 8, 3).unwrap();
    let ids = ctx.new_tensor_2d(Type::I32, 6, 2).unwrap();
    let w = ctx.new_tensor_2d(Type::F32, 4, 2).unwrap();
    let sq = ctx.new_tensor_2d(Type::F32, 6, 6).unwrap();
    let nb = a.nb();
    for t in [
        ctx.add_id(&a, &b, &ids).unwrap(),
        ctx.acc(&a, &w, nb[1], nb[2], nb[3], 16).unwrap(),
        ctx.set_inplace(&a, &w, nb[1], nb[2], nb[3], 0).unwrap(),
        ctx.diag(&ctx.new_tensor_2d(Type::F32, 5, 1).unwrap())
            .unwrap(),
        ctx.diag_mask_inf(&a, 1).unwrap(),
        ctx.diag_mask_zero_inplace(&a, 0).unwrap(),
        ctx.clamp(&a, -1.0, 1.0).unwrap(),
        ctx.leaky_relu(&a, 0.2, true).unwrap(),
        ctx.pad_ext(&a, 1, 2, 0, 1, 0, 0, 0, 0).unwrap(),
        ctx.pad_reflect_1d(&a, 2, 3).unwrap(),
        ctx.roll(&a, 1, -2, 1, 0).unwrap(),
        ctx.arange(0.0, 5.0, 0.5).unwrap(),
        ctx.timestep_embedding(&v, 9, 1000).unwrap(),
        ctx.tri(&sq, TriType::Lower).unwrap(),
        ctx.fill(&a, 3.0).unwrap(),
        ctx.cross_entropy_loss(&a, &a).unwrap(),
    ] {
        validates(&t);
    }
}

#[test]
fn shape_rules_refuse_bad_input() {
    let ctx = Context::init(1 << 20, true).unwrap();
    let a = ctx.new_tensor_3d(Type::F32, 8, 6, 2).unwrap();
    let h = ctx.new_tensor_3d(Type::F16, 8, 6, 2).unwrap();
    let b = ctx.new_tensor_2d(Type::F32, 8, 3).unwrap();
    let ids = ctx.new_tensor_2d(Type::I32, 6, 2).unwrap();
    let fids = ctx.new_tensor_2d(Type::F32, 6, 2).unwrap();
    let w = ctx.new_tensor_2d(Type::F32, 4, 2).unwrap();
    let nb = a.nb();
    assert_err(ctx.add_id(&a, &b, &fids), &["ADD_ID", "ids", "i32"]);
    assert_err(
        ctx.add_id(&a, &ctx.new_tensor_2d(Type::F32, 7, 3).unwrap(), &ids),
        &["ADD_ID", "8 elements"],
    );
    // the window must lie inside a: offset past the end, strides reaching past it
    assert_err(
        ctx.acc(&a, &w, nb[1], nb[2], nb[3], a.nbytes()),
        &["ACC", "past the end"],
    );
    assert_err(
        ctx.set(&a, &w, 1 << 20, nb[2], nb[3], 0),
        &["SET", "past the end"],
    );
    assert_err(ctx.acc(&h, &w, nb[1], nb[2], nb[3], 0), &["ACC", "f32"]);
    assert_err(
        ctx.set(
            &a,
            &ctx.new_tensor_1d(Type::I32, 2).unwrap(),
            nb[1],
            nb[2],
            nb[3],
            0,
        ),
        &["SET", "type"],
    );
    assert_err(
        ctx.acc(&a, &w, usize::MAX, nb[2], nb[3], 0),
        &["ACC", "nb1", "i32"],
    );
    assert_err(ctx.diag(&a), &["DIAG", "ne1"]);
    assert_err(ctx.diag_mask_inf(&a, -1), &["DIAG_MASK_INF", "n_past = -1"]);
    assert_err(
        ctx.clamp(&ctx.new_tensor_1d(Type::I32, 3).unwrap(), 0.0, 1.0),
        &["CLAMP", "type"],
    );
    assert_err(ctx.pad(&a, -1, 0, 0, 0), &["PAD", "negative"]);
    assert_err(ctx.pad(&h, 1, 0, 0, 0), &["PAD", "f32"]);
    assert_err(ctx.pad_reflect_1d(&a, 8, 0), &["PAD_REFLECT_1D", "p0 = 8"]);
    assert_err(
        ctx.pad_reflect_1d(&a, 0, -1),
        &["PAD_REFLECT_1D", "p1 = -1"],
    );
    assert_err(ctx.roll(&a, 8, 0, 0, 0), &["ROLL", "shift0 = 8"]);
    assert_err(ctx.arange(1.0, 0.0, 1.0), &["ARANGE", "stop > start"]);
    assert_err(ctx.arange(0.0, 1.0, 0.0), &["ARANGE", "step > 0"]);
    assert_err(ctx.arange(0.0, f32::INFINITY, 1.0), &["ARANGE", "finite"]);
    assert_err(
        ctx.timestep_embedding(&a, 8, 100),
        &["TIMESTEP_EMBEDDING", "vector"],
    );
    assert_err(ctx.timestep_embedding(&w, 8, 0), &["TIMESTEP_EMBEDDING"]);
    assert_err(ctx.tri(&a, TriType::Lower), &["TRI", "square"]);
    assert_err(
        ctx.fill(&ctx.transpose(&a).unwrap(), 1.0),
        &["FILL", "contiguous"],
    );
    assert_err(
        ctx.cross_entropy_loss(&a, &b),
        &["CROSS_ENTROPY_LOSS", "shape"],
    );
    // the in-place forms keep the operand's layout and refuse what the plain forms refuse
    assert_err(
        ctx.leaky_relu(&ctx.new_tensor_1d(Type::BF16, 4).unwrap(), 0.1, true),
        &["LEAKY_RELU"],
    );
}
