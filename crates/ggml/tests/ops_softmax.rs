//! SOFT_MAX and SOFT_MAX_EXT (mask, scale, ALiBi max_bias) against an f64 reference.

mod common;

use common::reference;
use common::*;
use ggml::{Context, Type};

#[test]
fn plain_soft_max() {
    for ty in FLOATS {
        for ne in [
            &[1i64][..],
            &[7, 3],
            &[32, 4, 3, 2],
            &[1000, 4],
            &[5, 3, 2, 2, 2],
        ] {
            for inplace in [false, true] {
                let name = format!("soft_max {ty} {ne:?} inplace {inplace}");
                check(&name, TOL_SOFTMAX, |ctx, rng| {
                    let (a, ha) = input(ctx, ty, ne, Layout::Contiguous, rng, -5.0, 5.0)?;
                    let out = if inplace {
                        ctx.soft_max_inplace(&a)?
                    } else {
                        ctx.soft_max(&a)?
                    };
                    Ok((out, reference::soft_max(&ha, None, 1.0, 0.0)))
                });
            }
        }
    }
}

#[test]
fn large_logits_do_not_overflow() {
    check("soft_max [-100, 100]", TOL_SOFTMAX, |ctx, rng| {
        let (a, ha) = input(
            ctx,
            Type::F32,
            &[50, 20],
            Layout::Contiguous,
            rng,
            -100.0,
            100.0,
        )?;
        Ok((ctx.soft_max(&a)?, reference::soft_max(&ha, None, 1.0, 0.0)))
    });
}

#[test]
fn non_contiguous_inputs() {
    for layout in LAYOUTS {
        let name = format!("soft_max {layout:?}");
        check(&name, TOL_SOFTMAX, |ctx, rng| {
            let (a, ha) = input(ctx, Type::F32, &[9, 6, 4, 2], layout, rng, -5.0, 5.0)?;
            Ok((ctx.soft_max(&a)?, reference::soft_max(&ha, None, 1.0, 0.0)))
        });
    }
}

struct Ext<'a> {
    a_ty: Type,
    a_ne: &'a [i64],
    mask: Option<(Type, &'a [i64], Layout)>,
    scale: f32,
    max_bias: f32,
    inplace: bool,
    causal: bool,
}

fn run_ext(c: Ext<'_>) {
    let name = format!(
        "soft_max_ext a {} {:?} mask {:?} scale {} max_bias {} inplace {} causal {}",
        c.a_ty,
        c.a_ne,
        c.mask.map(|m| (m.0.name(), m.1, m.2)),
        c.scale,
        c.max_bias,
        c.inplace,
        c.causal
    );
    check(&name, TOL_SOFTMAX, |ctx, rng| {
        let (a, ha) = input(ctx, c.a_ty, c.a_ne, Layout::Contiguous, rng, -3.0, 3.0)?;
        let mask = match c.mask {
            Some((ty, ne, layout)) => {
                let full = shape(ne);
                let mut k = 0usize;
                // Random biases, or a causal mask: −inf above the diagonal (column > row),
                // which never masks a whole row.
                let (m, hm) = input_with(ctx, ty, ne, Layout::Contiguous, |_| {
                    let (col, row) = (k % full[0], (k / full[0]) % full[1]);
                    k += 1;
                    if c.causal && col > row {
                        f64::NEG_INFINITY
                    } else {
                        rng.uniform(-2.0, 2.0)
                    }
                })?;
                let (m, hm) = match layout {
                    Layout::Contiguous => (m, hm),
                    _ => {
                        // Same values, read through a padded view of a copy.
                        let (p, _) = input(
                            ctx,
                            ty,
                            &[ne[0] + 3, ne[1] + 1],
                            Layout::Contiguous,
                            rng,
                            0.0,
                            1.0,
                        )?;
                        let v = ctx.view_2d(
                            &p,
                            ne[0],
                            ne[1],
                            p.nb()[1],
                            p.nb()[1] + 2 * ty.type_size(),
                        )?;
                        let v = ctx.cpy(&m, &v)?;
                        (v, hm)
                    }
                };
                Some((m, hm))
            }
            None => None,
        };
        let out = if c.inplace {
            ctx.soft_max_ext_inplace(&a, mask.as_ref().map(|m| &m.0), c.scale, c.max_bias)?
        } else {
            ctx.soft_max_ext(&a, mask.as_ref().map(|m| &m.0), c.scale, c.max_bias)?
        };
        if c.inplace {
            assert_aliases(&out, &a);
        }
        let want = reference::soft_max(
            &ha,
            mask.as_ref().map(|m| &m.1),
            c.scale as f64,
            c.max_bias as f64,
        );
        Ok((out, want))
    });
}

#[test]
fn masks_scales_and_alibi() {
    // a: [n_kv, n_q, n_head, batch]; masks broadcast over heads and batches, with extra rows.
    let cases: [(&[i64], &[i64]); 5] = [
        (&[16, 4, 6, 2], &[16, 4]),
        (&[16, 4, 6, 2], &[16, 7, 1, 1]),
        (&[16, 4, 6, 2], &[16, 4, 6, 1]),
        (&[16, 4, 6, 2], &[16, 4, 3, 2]),
        (&[9, 3, 5, 1], &[9, 3, 5, 1]),
    ];
    for (a_ne, m_ne) in cases {
        for mty in [Type::F32, Type::F16] {
            for max_bias in [0.0f32, 8.0] {
                for scale in [1.0f32, 0.125] {
                    for causal in [false, true] {
                        run_ext(Ext {
                            a_ty: Type::F32,
                            a_ne,
                            mask: Some((mty, m_ne, Layout::Contiguous)),
                            scale,
                            max_bias,
                            inplace: false,
                            causal,
                        });
                    }
                }
            }
        }
    }
}

#[test]
fn ext_without_mask_and_inplace_and_types() {
    for ty in FLOATS {
        for inplace in [false, true] {
            run_ext(Ext {
                a_ty: ty,
                a_ne: &[12, 5, 3],
                mask: None,
                scale: 0.5,
                max_bias: 0.0,
                inplace,
                causal: false,
            });
            run_ext(Ext {
                a_ty: ty,
                a_ne: &[12, 5, 3],
                mask: Some((Type::F16, &[12, 8], Layout::Contiguous)),
                scale: 2.0,
                max_bias: 8.0,
                inplace,
                causal: true,
            });
        }
    }
}

#[test]
fn strided_mask() {
    for mty in [Type::F32, Type::F16] {
        run_ext(Ext {
            a_ty: Type::F32,
            a_ne: &[10, 6, 4],
            mask: Some((mty, &[10, 6], Layout::Padded)),
            scale: 1.0,
            max_bias: 8.0,
            inplace: false,
            causal: true,
        });
    }
}

#[test]
fn alibi_reference_slopes() {
    // 8 heads, max_bias 8: slopes 1/2, 1/4, …, 1/256 (the ALiBi paper's geometric sequence).
    for h in 0..8 {
        let want = 0.5f64.powi(h as i32 + 1);
        assert!((reference::alibi_slope(8.0, h, 8) - want).abs() < 1e-15);
    }
    // 6 heads: the first 4 from m0 = 2^-2, the rest interleaved from m1 = 2^-1.
    assert!((reference::alibi_slope(8.0, 3, 6) - 2f64.powi(-8)).abs() < 1e-15);
    assert!((reference::alibi_slope(8.0, 4, 6) - 0.5).abs() < 1e-15);
    assert!((reference::alibi_slope(8.0, 5, 6) - 0.125).abs() < 1e-15);
}

#[test]
fn bad_arguments_are_refused() {
    let ctx = Context::init(1 << 20, true).unwrap();
    let a = ctx.new_tensor_3d(Type::F32, 8, 4, 6).unwrap();
    let m_i32 = ctx.new_tensor_2d(Type::I32, 8, 4).unwrap();
    assert_err(
        ctx.soft_max_ext(&a, Some(&m_i32), 1.0, 0.0),
        &["SOFT_MAX", "mask", "i32"],
    );
    let m_short = ctx.new_tensor_2d(Type::F32, 8, 3).unwrap();
    assert_err(
        ctx.soft_max_ext(&a, Some(&m_short), 1.0, 0.0),
        &["SOFT_MAX", "[8, 3, 1, 1, 1]"],
    );
    let m_wide = ctx.new_tensor_2d(Type::F32, 9, 4).unwrap();
    assert_err(
        ctx.soft_max_ext(&a, Some(&m_wide), 1.0, 0.0),
        &["SOFT_MAX", "[9, 4, 1, 1, 1]"],
    );
    let m_heads = ctx.new_tensor_3d(Type::F32, 8, 4, 4).unwrap();
    assert_err(
        ctx.soft_max_ext(&a, Some(&m_heads), 1.0, 0.0),
        &["SOFT_MAX", "[8, 4, 4, 1, 1]"],
    );
    let m_zero = ctx.new_tensor_3d(Type::F32, 8, 4, 0).unwrap();
    assert_err(
        ctx.soft_max_ext(&a, Some(&m_zero), 1.0, 0.0),
        &["SOFT_MAX", "[8, 4, 0, 1, 1]"],
    );
    let m = ctx.new_tensor_2d(Type::F32, 8, 4).unwrap();
    assert_err(
        ctx.soft_max_ext(&a, Some(&m), 1.0, -1.0),
        &["SOFT_MAX", "max_bias = -1"],
    );
    assert_err(
        ctx.soft_max_ext(&a, Some(&m), 1.0, f32::NAN),
        &["SOFT_MAX", "max_bias = NaN"],
    );
    assert_err(
        ctx.soft_max_ext(&a, Some(&m), f32::INFINITY, 0.0),
        &["SOFT_MAX", "scale = inf"],
    );
    assert_err(
        ctx.soft_max_ext(&a, None, 1.0, 8.0),
        &["SOFT_MAX", "max_bias = 8", "mask"],
    );
}
