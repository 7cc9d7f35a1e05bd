//! GROUP_NORM and L2_NORM against f64 references (GGML: groups of `⌈ne2 / n_groups⌉`
//! channels normalised to zero mean and unit variance, `eps` inside the root; rows divided by
//! `max(‖x‖₂, eps)`).

mod common;

use common::nodes::{assert_valid, validate_with};
use common::*;
use ggml::{Context, Type};

/// GROUP_NORM over shape `h.ne`: statistics per (group, i3, i4) over dims 0, 1 and the
/// group's channels.
fn group_norm_ref(h: &Host, n_groups: usize, eps: f64) -> Host {
    let channels = h.ne[2];
    let per = channels.div_ceil(n_groups);
    let group_of = |c: usize| c / per;
    let members = |g: usize, i3: usize, i4: usize| {
        indices(h.ne).filter(move |i| group_of(i[2]) == g && i[3] == i3 && i[4] == i4)
    };
    Host::from_fn(h.ne, |i| {
        let g = group_of(i[2]);
        let vals: Vec<f64> = members(g, i[3], i[4]).map(|j| h.at(j)).collect();
        let n = vals.len() as f64;
        let mean = vals.iter().sum::<f64>() / n;
        let var = vals.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
        (h.at(i) - mean) / (var + eps).sqrt()
    })
}

fn l2_norm_ref(h: &Host, eps: f64) -> Host {
    h.map_rows(h.ne[0], |_, row| {
        let norm = row.iter().map(|x| x * x).sum::<f64>().sqrt();
        row.iter().map(|x| x / norm.max(eps)).collect()
    })
}

#[test]
fn group_norm_groups_types_layouts() {
    // (shape, n_groups): groups that divide the channels, that do not (a short last group),
    // more groups than channels (empty groups), one group, 5-D.
    let cases: [(&[i64], i32); 6] = [
        (&[5, 3, 8], 4),
        (&[4, 3, 10], 4),
        (&[6, 2, 3], 5),
        (&[7, 5, 6, 2], 1),
        (&[3, 2, 6, 2, 2], 3),
        (&[16, 1, 32], 32),
    ];
    for (ne, groups) in cases {
        for eps in [1e-6f32, 0.25] {
            let name = format!("GROUP_NORM(ne={ne:?},n_groups={groups},eps={eps})");
            check(&name, TOL, |ctx, rng| {
                let (a, ha) = input(ctx, Type::F32, ne, Layout::Contiguous, rng, -1.0, 3.0)?;
                let out = ctx.group_norm(&a, groups, eps)?;
                Ok((out, group_norm_ref(&ha, groups as usize, eps as f64)))
            });
        }
    }
    for ty in FLOATS {
        for layout in LAYOUTS {
            for inplace in [false, true] {
                let name =
                    format!("GROUP_NORM(type={ty},layout={layout:?},inplace={inplace},n_groups=3)");
                check(&name, TOL, |ctx, rng| {
                    let (a, ha) = input(ctx, ty, &[6, 5, 6, 2], layout, rng, -2.0, 2.0)?;
                    let out = if inplace {
                        let out = ctx.group_norm_inplace(&a, 3, 1e-5)?;
                        assert_aliases(&out, &a);
                        out
                    } else {
                        ctx.group_norm(&a, 3, 1e-5)?
                    };
                    Ok((out, group_norm_ref(&ha, 3, 1e-5)))
                });
            }
        }
    }
}

#[test]
fn l2_norm_types_layouts_eps() {
    for ty in FLOATS {
        for layout in LAYOUTS {
            for inplace in [false, true] {
                let name = format!("L2_NORM(type={ty},layout={layout:?},inplace={inplace})");
                check(&name, TOL, |ctx, rng| {
                    let (a, ha) = input(ctx, ty, &[13, 5, 3, 2], layout, rng, -2.0, 2.0)?;
                    let out = if inplace {
                        let out = ctx.l2_norm_inplace(&a, 1e-6)?;
                        assert_aliases(&out, &a);
                        out
                    } else {
                        ctx.l2_norm(&a, 1e-6)?
                    };
                    Ok((out, l2_norm_ref(&ha, 1e-6)))
                });
            }
        }
    }
    // eps larger than some rows' norms: those rows are divided by eps.
    for ne in [&[1i64, 7][..], &[4, 3, 2, 1, 2], &[300, 2]] {
        let name = format!("L2_NORM(ne={ne:?},eps=0.5)");
        check(&name, TOL, |ctx, rng| {
            let (a, ha) = input(ctx, Type::F32, ne, Layout::Contiguous, rng, -0.4, 0.4)?;
            Ok((ctx.l2_norm(&a, 0.5)?, l2_norm_ref(&ha, 0.5)))
        });
    }
}

#[test]
fn shape_rules() {
    let ctx = Context::init(1 << 20, true).unwrap();
    let a = ctx.new_tensor_3d(Type::F32, 4, 3, 6).unwrap();
    for eps in [-1.0f32, f32::NAN, f32::INFINITY] {
        assert_err(ctx.l2_norm(&a, eps), &["L2_NORM", "eps"]);
        assert_err(ctx.group_norm(&a, 2, eps), &["GROUP_NORM", "eps"]);
    }
    for groups in [0, -3] {
        assert_err(
            ctx.group_norm_inplace(&a, groups, 1e-5),
            &["GROUP_NORM", "n_groups", &groups.to_string()],
        );
    }
    let g = ctx.group_norm(&a, 4, 1e-5).unwrap();
    let l = ctx.l2_norm_inplace(&a, 1e-5).unwrap();
    assert_eq!(g.op_params()[..2], [4, 1e-5f32.to_bits() as i32]);
    assert_eq!(l.op_params()[0], 1e-5f32.to_bits() as i32);
    assert_valid(&g);
    assert_valid(&l);
    assert_err(
        validate_with(&g, |p| p[0] = 0),
        &["GROUP_NORM", "n_groups = 0"],
    );
}

#[test]
fn group_norm_with_far_more_groups_than_channels() {
    // Every group past the channels is empty; the kernel must not walk them all.
    check(
        "GROUP_NORM(ne=[4,3,5],n_groups=2147483647)",
        TOL,
        |ctx, rng| {
            let (a, ha) = input(
                ctx,
                Type::F32,
                &[4, 3, 5],
                Layout::Contiguous,
                rng,
                -1.0,
                1.0,
            )?;
            Ok((
                ctx.group_norm(&a, i32::MAX, 1e-6)?,
                group_norm_ref(&ha, 5, 1e-6),
            ))
        },
    );
}
