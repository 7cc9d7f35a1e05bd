//! CPY, CONT, DUP and CAST between F32, F16 and BF16 (and I32 to I32, and F32 to and from
//! I32), and the views — VIEW_1D..4D, RESHAPE, PERMUTE, TRANSPOSE — read back through a copy.
//! References are written with explicit index arithmetic.

mod common;

use common::*;
use ggml::{Context, Type};

/// Copies and casts convert exactly (one rounding to the destination type).
#[test]
fn cpy_between_every_float_pair_and_layout() {
    for ts in FLOATS {
        for td in FLOATS {
            for ls in LAYOUTS {
                for ld in [
                    Layout::Contiguous,
                    Layout::Permuted([1, 0, 2, 3]),
                    Layout::Padded,
                ] {
                    let name = format!("cpy {ts} {ls:?} -> {td} {ld:?}");
                    check(&name, EXACT, |ctx, rng| {
                        let (a, ha) = input(ctx, ts, &[7, 5, 3, 2], ls, rng, -100.0, 100.0)?;
                        let (b, _) = input(ctx, td, &[7, 5, 3, 2], ld, rng, 0.0, 1.0)?;
                        let out = ctx.cpy(&a, &b)?;
                        assert_eq!(out.ty(), td);
                        Ok((out, ha))
                    });
                }
            }
        }
    }
}

#[test]
fn cpy_between_shapes_with_equal_counts() {
    for ts in FLOATS {
        for td in FLOATS {
            for (sne, dne, ls) in [
                (&[6i64, 4][..], &[24i64][..], Layout::Contiguous),
                (&[6, 4, 5], &[10, 12], Layout::Transposed),
                (&[3, 4, 2, 5], &[5, 2, 4, 3], Layout::Permuted([2, 0, 3, 1])),
                (&[2, 3, 2, 2, 3], &[9, 8], Layout::Contiguous),
                (&[7, 3, 2], &[2, 3, 7], Layout::Padded),
            ] {
                let name = format!("cpy {ts} {sne:?} {ls:?} -> {td} {dne:?}");
                check(&name, EXACT, |ctx, rng| {
                    let (a, ha) = input(ctx, ts, sne, ls, rng, -10.0, 10.0)?;
                    let b = ctx.new_tensor(td, dne)?;
                    let out = ctx.cpy(&a, &b)?;
                    // Logical order is kept: element k of a goes to element k of b.
                    Ok((
                        out,
                        Host {
                            ne: shape(dne),
                            v: ha.v,
                        },
                    ))
                });
            }
        }
    }
}

#[test]
fn cpy_i32_is_bit_exact() {
    check("cpy i32", EXACT, |ctx, rng| {
        let (a, ha) = input_with(ctx, Type::I32, &[5, 4], Layout::Transposed, |_| {
            rng.range(i32::MIN as i64, i32::MAX as i64) as f64
        })?;
        let b = ctx.new_tensor(Type::I32, &[20])?;
        Ok((
            ctx.cpy(&a, &b)?,
            Host {
                ne: [20, 1, 1, 1, 1],
                v: ha.v,
            },
        ))
    });
}

#[test]
fn cont_dup_cast() {
    for ty in FLOATS {
        for layout in LAYOUTS {
            let name = format!("cont {ty} {layout:?}");
            check(&name, EXACT, |ctx, rng| {
                let (a, ha) = input(ctx, ty, &[5, 4, 3, 2], layout, rng, -1.0, 1.0)?;
                let out = ctx.cont(&a)?;
                assert!(out.is_contiguous());
                Ok((out, ha))
            });
            let name = format!("cont_2d {ty} {layout:?}");
            check(&name, EXACT, |ctx, rng| {
                let (a, ha) = input(ctx, ty, &[5, 4, 3, 2], layout, rng, -1.0, 1.0)?;
                let out = ctx.cont_2d(&a, 12, 10)?;
                Ok((
                    out,
                    Host {
                        ne: [12, 10, 1, 1, 1],
                        v: ha.v,
                    },
                ))
            });
            let name = format!("dup {ty} {layout:?}");
            check(&name, EXACT, |ctx, rng| {
                let (a, ha) = input(ctx, ty, &[5, 4, 3, 2], layout, rng, -1.0, 1.0)?;
                Ok((ctx.dup(&a)?, ha))
            });
            let name = format!("dup_inplace {ty} {layout:?}");
            check(&name, EXACT, |ctx, rng| {
                let (a, ha) = input(ctx, ty, &[5, 4, 3, 2], layout, rng, -1.0, 1.0)?;
                let out = ctx.dup_inplace(&a)?;
                assert_aliases(&out, &a);
                Ok((out, ha))
            });
            for to in FLOATS {
                let name = format!("cast {ty} {layout:?} -> {to}");
                check(&name, EXACT, |ctx, rng| {
                    let (a, ha) = input(ctx, ty, &[5, 4, 3, 2], layout, rng, -1e4, 1e4)?;
                    let out = ctx.cast(&a, to)?;
                    assert_eq!((out.ty(), out.op()), (to, ggml::Op::Cpy));
                    Ok((out, ha))
                });
            }
        }
    }
}

#[test]
fn cont_1d_3d_4d() {
    check("cont_1d/3d/4d", EXACT, |ctx, rng| {
        let (a, ha) = input(ctx, Type::F32, &[4, 6], Layout::Transposed, rng, -1.0, 1.0)?;
        let c1 = ctx.cont_1d(&a, 24)?;
        let c3 = ctx.cont_3d(&c1, 2, 3, 4)?;
        let c4 = ctx.cont_4d(&c3, 3, 2, 2, 2)?;
        Ok((
            c4,
            Host {
                ne: [3, 2, 2, 2, 1],
                v: ha.v,
            },
        ))
    });
}

/// Float values of a contiguous base tensor, by flat element position.
fn base(ctx: &Context, rng: &mut Rng, n: i64) -> ggml::Result<(ggml::Tensor, Host)> {
    input(ctx, Type::F32, &[n], Layout::Contiguous, rng, -1.0, 1.0)
}

#[test]
fn views_read_the_right_elements() {
    // 120 floats; views by element offset and strides in elements (4 bytes each).
    check("view_1d", EXACT, |ctx, rng| {
        let (a, ha) = base(ctx, rng, 120)?;
        let v = ctx.view_1d(&a, 17, 4 * 9)?;
        Ok((
            ctx.cont(&v)?,
            Host::from_fn([17, 1, 1, 1, 1], |i| ha.v[9 + i[0]]),
        ))
    });
    check("view_2d", EXACT, |ctx, rng| {
        let (a, ha) = base(ctx, rng, 120)?;
        let v = ctx.view_2d(&a, 5, 7, 4 * 11, 4 * 3)?;
        Ok((
            ctx.cont(&v)?,
            Host::from_fn([5, 7, 1, 1, 1], |i| ha.v[3 + i[0] + 11 * i[1]]),
        ))
    });
    check("view_3d", EXACT, |ctx, rng| {
        let (a, ha) = base(ctx, rng, 120)?;
        let v = ctx.view_3d(&a, 3, 4, 5, 4 * 4, 4 * 23, 4)?;
        let want = Host::from_fn([3, 4, 5, 1, 1], |i| ha.v[1 + i[0] + 4 * i[1] + 23 * i[2]]);
        Ok((ctx.cont(&v)?, want))
    });
    check("view_4d", EXACT, |ctx, rng| {
        let (a, ha) = base(ctx, rng, 120)?;
        let v = ctx.view_4d(&a, [2, 3, 2, 2], 4 * 5, 4 * 16, 4 * 50, 4 * 2)?;
        let want = Host::from_fn([2, 3, 2, 2, 1], |i| {
            ha.v[2 + i[0] + 5 * i[1] + 16 * i[2] + 50 * i[3]]
        });
        Ok((ctx.cont(&v)?, want))
    });
    // A view of a view adds the offsets; a view of a permuted tensor uses the given strides.
    check("view of view", EXACT, |ctx, rng| {
        let (a, ha) = base(ctx, rng, 120)?;
        let v = ctx.view_2d(&a, 10, 10, 4 * 10, 4 * 20)?;
        let w = ctx.view_1d(&v, 6, 4 * 13)?;
        Ok((
            ctx.cont(&w)?,
            Host::from_fn([6, 1, 1, 1, 1], |i| ha.v[33 + i[0]]),
        ))
    });
    // Stride 0 repeats a row.
    check("view with zero stride", EXACT, |ctx, rng| {
        let (a, ha) = base(ctx, rng, 120)?;
        let v = ctx.view_2d(&a, 4, 3, 0, 0)?;
        Ok((
            ctx.cont(&v)?,
            Host::from_fn([4, 3, 1, 1, 1], |i| ha.v[i[0]]),
        ))
    });
}

#[test]
fn reshape_keeps_logical_order() {
    check("reshape chain", EXACT, |ctx, rng| {
        let (a, ha) = input(
            ctx,
            Type::F16,
            &[6, 4, 5],
            Layout::Contiguous,
            rng,
            -1.0,
            1.0,
        )?;
        let r1 = ctx.reshape_1d(&a, 120)?;
        let r2 = ctx.reshape_2d(&r1, 12, 10)?;
        let r3 = ctx.reshape_3d(&r2, 2, 30, 2)?;
        let r4 = ctx.reshape_4d(&r3, 3, 5, 4, 2)?;
        let like = ctx.new_tensor(Type::F32, &[10, 3, 4])?;
        let r = ctx.reshape(&r4, &like)?;
        // Viewed through a non-trivial copy so that the reshape is actually read.
        let out = ctx.scale(&r, 2.0)?;
        Ok((
            out,
            Host {
                ne: [10, 3, 4, 1, 1],
                v: ha.v.iter().map(|x| 2.0 * x).collect(),
            },
        ))
    });
}

#[test]
fn permute_and_transpose() {
    let ne = [2usize, 3, 4, 5];
    let perms = [
        [0, 1, 2, 3],
        [1, 0, 2, 3],
        [2, 0, 3, 1],
        [3, 2, 1, 0],
        [1, 2, 3, 0],
        [0, 3, 1, 2],
    ];
    for ax in perms {
        let name = format!("permute {ax:?}");
        check(&name, EXACT, |ctx, rng| {
            let (a, ha) = input(
                ctx,
                Type::F32,
                &[2, 3, 4, 5],
                Layout::Contiguous,
                rng,
                -1.0,
                1.0,
            )?;
            let p = ctx.permute(&a, ax[0], ax[1], ax[2], ax[3])?;
            // Source dimension d moves to position ax[d]: out[j] = a[i] with j[ax[d]] = i[d].
            let mut out_ne = [1usize; 5];
            for d in 0..4 {
                out_ne[ax[d]] = ne[d];
            }
            let want = Host::from_fn(out_ne, |j| {
                ha.at([j[ax[0]], j[ax[1]], j[ax[2]], j[ax[3]], 0])
            });
            Ok((ctx.cont(&p)?, want))
        });
    }
    check("transpose", EXACT, |ctx, rng| {
        let (a, ha) = input(
            ctx,
            Type::BF16,
            &[7, 3, 2],
            Layout::Contiguous,
            rng,
            -1.0,
            1.0,
        )?;
        let t = ctx.transpose(&a)?;
        let want = Host::from_fn([3, 7, 2, 1, 1], |j| ha.at([j[1], j[0], j[2], 0, 0]));
        Ok((ctx.cont(&t)?, want))
    });
}

#[test]
fn view_and_reshape_errors() {
    let ctx = Context::init(1 << 20, true).unwrap();
    let a = ctx.new_tensor_2d(Type::F32, 10, 12).unwrap(); // 480 bytes
    assert_err(ctx.view_1d(&a, 121, 0), &["VIEW", "out of bounds"]);
    assert_err(ctx.view_1d(&a, 10, 4 * 111), &["VIEW", "offset 444"]);
    assert_err(ctx.view_2d(&a, 10, 12, 44, 0), &["VIEW", "out of bounds"]);
    assert_err(ctx.view_1d(&a, 1, usize::MAX - 2), &["VIEW"]);
    assert_err(ctx.view_2d(&a, 2, 3, usize::MAX / 2, 0), &["VIEW"]);
    assert_err(ctx.view_1d(&a, -1, 0), &["VIEW", "ne[0] = -1"]);
    let v = ctx.view_1d(&a, 10, 4 * 100).unwrap();
    assert_err(ctx.view_1d(&v, 10, 4 * 20), &["VIEW", "out of bounds"]);
    let t = ctx.transpose(&a).unwrap();
    assert_err(ctx.reshape_1d(&t, 120), &["RESHAPE", "not contiguous"]);
    assert_err(ctx.reshape_2d(&a, 11, 11), &["RESHAPE", "121", "120"]);
    assert_err(
        ctx.reshape_nd(&a, &[i64::MAX, 4]),
        &["RESHAPE", "too many elements"],
    );
    assert_err(
        ctx.reshape_nd(&a, &[1, 1, 1, 1, 1, 120]),
        &["RESHAPE", "6 dimensions"],
    );
    assert_err(ctx.cont_2d(&a, 7, 7), &["CONT", "49", "120"]);
    assert_err(ctx.permute(&a, 0, 1, 1, 3), &["PERMUTE", "[0, 1, 1, 3]"]);
    assert_err(ctx.permute(&a, 0, 1, 2, 4), &["PERMUTE", "[0, 1, 2, 4]"]);
    let b = ctx.new_tensor_1d(Type::F32, 119).unwrap();
    assert_err(ctx.cpy(&a, &b), &["CPY", "120", "119"]);
}

/// CPY between F32 and I32 converts as GGML's CPU does on x86: F32 to I32 toward zero (C's
/// conversion), NaN and values outside i32 giving `i32::MIN` (the instruction's result where C
/// leaves it undefined); I32 to F32 rounded to nearest even. Both through a transposed
/// source too, on every thread count.
#[test]
fn cpy_between_f32_and_i32_converts_as_ggml_x86() {
    let floats = [
        1.5f32,
        -1.5,
        2.999_999_8,
        -0.7,
        -0.0,
        2_147_483_520.0,
        -2_147_483_648.0,
        2_147_483_648.0,
        1e10,
        -1e10,
        f32::NAN,
        f32::INFINITY,
    ];
    let ints = [
        1,
        -1,
        2,
        0,
        0,
        2_147_483_520,
        i32::MIN,
        i32::MIN,
        i32::MIN,
        i32::MIN,
        i32::MIN,
        i32::MIN,
    ];
    // 2^24 + 1 ties between two floats and goes to the even one; i32::MAX rounds up to 2^31
    let back = [
        16_777_217i32,
        -7,
        i32::MAX,
        i32::MIN,
        3,
        0,
        1 << 30,
        -123_456_789,
    ];
    let back_want: Vec<f32> = [16_777_216.0, -7.0, 2_147_483_648.0, -2_147_483_648.0, 3.0]
        .into_iter()
        .chain([0.0, 1_073_741_824.0, -123_456_792.0])
        .collect();
    for (threads, be) in backends() {
        let ctx = Context::init(1 << 20, false).unwrap();
        // [6, 2] stored transposed: the copy reads it in logical order
        let a = ctx.new_tensor_2d(Type::F32, 2, 6).unwrap();
        let transposed: Vec<f32> = (0..12).map(|i| floats[(i % 2) * 6 + i / 2]).collect();
        a.set_f32(&transposed).unwrap();
        let a = ctx.transpose(&a).unwrap();
        let to_int = ctx
            .cpy(&a, &ctx.new_tensor_2d(Type::I32, 6, 2).unwrap())
            .unwrap();
        let i = ctx.new_tensor_1d(Type::I32, back.len() as i64).unwrap();
        i.set_i32(&back).unwrap();
        let to_float = ctx
            .cpy(
                &i,
                &ctx.new_tensor_1d(Type::F32, back.len() as i64).unwrap(),
            )
            .unwrap();
        let graph = ctx.build_forward_expand(&to_int).unwrap();
        graph.build_forward_expand(&to_float).unwrap();
        be.graph_compute(&graph).unwrap();
        assert_eq!(
            to_int.get_i32().unwrap(),
            ints,
            "F32 -> I32, {threads} threads"
        );
        let got = to_float.get_f32().unwrap();
        assert_eq!(got, back_want, "I32 -> F32, {threads} threads");
    }
}
