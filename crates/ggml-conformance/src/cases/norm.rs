//! NORM and RMS_NORM (GGML's `test_norm`, `test_rms_norm`).

use ggml::Type;

use crate::case::{Case, Input, Vars};

fn norm_row(r: &[f64], eps: f64) -> Vec<f64> {
    let n = r.len() as f64;
    let mean = r.iter().sum::<f64>() / n;
    let var = r.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
    r.iter().map(|x| (x - mean) / (var + eps).sqrt()).collect()
}

fn rms_norm_row(r: &[f64], eps: f64) -> Vec<f64> {
    let n = r.len() as f64;
    let ms = r.iter().map(|x| x * x).sum::<f64>() / n;
    r.iter().map(|x| x / (ms + eps).sqrt()).collect()
}

/// The normalisation cases.
pub fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    type Norm = fn(&ggml::Context, &ggml::Tensor, f32) -> ggml::Result<ggml::Tensor>;
    type RowRef = fn(&[f64], f64) -> Vec<f64>;
    let ops: [(&str, Norm, RowRef); 2] = [
        ("NORM", ggml::Context::norm, norm_row),
        ("RMS_NORM", ggml::Context::rms_norm, rms_norm_row),
    ];
    for (name, build, f) in ops {
        for eps in [0.0f32, 1e-6, 1e-4, 1e-1] {
            for n in [64i64, 1025, 33] {
                for v in [false, true] {
                    let ne = [n, 5, 2, 1];
                    out.push(Case::new(
                        name,
                        Vars::new()
                            .ty("type", Type::F32)
                            .list("ne", &ne)
                            .flag("v", v)
                            .float("eps", eps),
                        vec![Input::new(Type::F32, &ne).padded_if(v)],
                        move |ctx, x| build(ctx, &x[0], eps),
                        move |x| x[0].map_rows(x[0].ne[0], |_, r| f(r, eps as f64)),
                    ));
                }
            }
        }
    }
    for (name, f) in [("NORM", norm_row as RowRef), ("RMS_NORM", rms_norm_row)] {
        let ne = [17i64, 3, 2, 1];
        let eps = 1e-5f32;
        out.push(Case::new(
            name,
            Vars::new()
                .ty("type", Type::F32)
                .list("ne", &ne)
                .float("eps", eps)
                .flag("inplace", true),
            vec![Input::new(Type::F32, &ne)],
            move |ctx, x| {
                if name == "NORM" {
                    ctx.norm_inplace(&x[0], eps)
                } else {
                    ctx.rms_norm_inplace(&x[0], eps)
                }
            },
            move |x| x[0].map_rows(x[0].ne[0], |_, r| f(r, eps as f64)),
        ));
    }
    out
}
