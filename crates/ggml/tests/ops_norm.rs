//! NORM and RMS_NORM against f64 references (GGML: `(x − mean)/√(var + eps)` and
//! `x/√(mean(x²) + eps)`, eps inside the root).

mod common;

use common::*;
use ggml::{Context, Tensor, Type};

fn norm_ref(h: &Host, eps: f64) -> Host {
    let n = h.ne[0] as f64;
    h.map_rows(h.ne[0], |_, row| {
        let mean = row.iter().sum::<f64>() / n;
        let var = row.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
        row.iter()
            .map(|x| (x - mean) / (var + eps).sqrt())
            .collect()
    })
}

fn rms_norm_ref(h: &Host, eps: f64) -> Host {
    let n = h.ne[0] as f64;
    h.map_rows(h.ne[0], |_, row| {
        let ms = row.iter().map(|x| x * x).sum::<f64>() / n;
        row.iter().map(|x| x / (ms + eps).sqrt()).collect()
    })
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    Norm,
    Rms,
}

fn run(kind: Kind, ty: Type, ne: &[i64], layout: Layout, eps: f32, inplace: bool) {
    let name = format!("{kind:?} {ty} {ne:?} {layout:?} eps {eps} inplace {inplace}");
    check(&name, TOL, |ctx, rng| {
        // An offset keeps the mean away from zero, so NORM really has to subtract it.
        let (a, ha) = input(ctx, ty, ne, layout, rng, -1.0, 3.0)?;
        let build: fn(&Context, &Tensor, f32) -> ggml::Result<Tensor> = match (kind, inplace) {
            (Kind::Norm, false) => Context::norm,
            (Kind::Norm, true) => Context::norm_inplace,
            (Kind::Rms, false) => Context::rms_norm,
            (Kind::Rms, true) => Context::rms_norm_inplace,
        };
        let out = build(ctx, &a, eps)?;
        if inplace {
            assert_aliases(&out, &a);
        }
        let want = match kind {
            Kind::Norm => norm_ref(&ha, eps as f64),
            Kind::Rms => rms_norm_ref(&ha, eps as f64),
        };
        Ok((out, want))
    });
}

#[test]
fn shapes_and_eps() {
    for kind in [Kind::Norm, Kind::Rms] {
        for ne in [
            &[2i64][..],
            &[7, 3],
            &[64, 5, 2],
            &[4096, 3],
            &[5, 4, 3, 2, 2],
            &[33, 1, 1, 5],
        ] {
            for eps in [0.0f32, 1e-6, 1e-5, 0.5] {
                run(kind, Type::F32, ne, Layout::Contiguous, eps, false);
            }
        }
    }
}

#[test]
fn types_layouts_inplace() {
    for kind in [Kind::Norm, Kind::Rms] {
        for ty in FLOATS {
            for layout in LAYOUTS {
                for inplace in [false, true] {
                    run(kind, ty, &[24, 5, 3, 2], layout, 1e-5, inplace);
                }
            }
        }
    }
}

#[test]
fn single_element_rows_with_eps() {
    // A row of one element: x − mean = 0, so NORM gives 0 and RMS_NORM x/√(x² + eps).
    for kind in [Kind::Norm, Kind::Rms] {
        run(kind, Type::F32, &[1, 9], Layout::Contiguous, 1e-3, false);
    }
}

#[test]
fn bad_eps_is_refused() {
    let ctx = Context::init(1 << 20, true).unwrap();
    let a = ctx.new_tensor_2d(Type::F32, 4, 3).unwrap();
    for eps in [-1e-5f32, f32::NAN, f32::INFINITY] {
        assert_err(ctx.norm(&a, eps), &["NORM", &eps.to_string()]);
        assert_err(ctx.rms_norm(&a, eps), &["RMS_NORM", &eps.to_string()]);
        assert_err(ctx.norm_inplace(&a, eps), &["NORM"]);
        assert_err(ctx.rms_norm_inplace(&a, eps), &["RMS_NORM"]);
    }
}
