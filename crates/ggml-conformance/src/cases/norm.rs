//! NORM, RMS_NORM, GROUP_NORM and L2_NORM (GGML's `test_norm`, `test_rms_norm`,
//! `test_group_norm`, `test_l2_norm`).

use ggml::Type;

use crate::case::{Case, Input, Layout, Vars};
use crate::host::{indices, Host};

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

/// GROUP_NORM: statistics per (group of `⌈ne2 / n_groups⌉` channels, i3, i4) over dims 0,
/// 1 and the group's channels; zero mean, unit variance, `eps` inside the root.
fn group_norm_ref(h: &Host, n_groups: usize, eps: f64) -> Host {
    let per = h.ne[2].div_ceil(n_groups);
    Host::from_fn(h.ne, |i| {
        let vals: Vec<f64> = indices(h.ne)
            .filter(|j| j[2] / per == i[2] / per && j[3] == i[3] && j[4] == i[4])
            .map(|j| h.at(j))
            .collect();
        let n = vals.len() as f64;
        let mean = vals.iter().sum::<f64>() / n;
        let var = vals.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
        (h.at(i) - mean) / (var + eps).sqrt()
    })
}

/// L2_NORM: each row divided by `max(‖row‖₂, eps)`.
fn l2_norm_row(r: &[f64], eps: f64) -> Vec<f64> {
    let norm = r.iter().map(|x| x * x).sum::<f64>().sqrt();
    r.iter().map(|x| x / norm.max(eps)).collect()
}

const LAYOUTS: [(Layout, &str); 4] = [
    (Layout::Contiguous, "contiguous"),
    (Layout::Permuted([1, 0, 2, 3]), "permuted"),
    (Layout::Transposed, "transposed"),
    (Layout::Padded, "padded"),
];

fn group_norm(out: &mut Vec<Case>) {
    // Groups that divide the channels, that do not (a short last group), more groups than
    // channels (empty groups, up to i32::MAX: the kernel must not walk them), one group, 5-D.
    let grid: [(&[i64], i32); 7] = [
        (&[5, 3, 8], 4),
        (&[4, 3, 10], 4),
        (&[6, 2, 3], 5),
        (&[7, 5, 6, 2], 1),
        (&[3, 2, 6, 2, 2], 3),
        (&[16, 1, 32], 32),
        (&[4, 3, 5], i32::MAX),
    ];
    for (ne, groups) in grid {
        for eps in [1e-6f32, 0.25] {
            out.push(Case::new(
                "GROUP_NORM",
                Vars::new()
                    .ty("type", Type::F32)
                    .list("ne", ne)
                    .val("num_groups", groups)
                    .float("eps", eps),
                vec![Input::new(Type::F32, ne).uniform(-1.0, 3.0)],
                move |ctx, x| ctx.group_norm(&x[0], groups, eps),
                move |x| group_norm_ref(&x[0], groups as usize, eps as f64),
            ));
        }
    }
    for ty in [Type::F32, Type::F16, Type::BF16] {
        for (layout, lname) in LAYOUTS {
            for inplace in [false, true] {
                out.push(Case::new(
                    "GROUP_NORM",
                    Vars::new()
                        .ty("type", ty)
                        .list("ne", &[6, 5, 6, 2])
                        .val("num_groups", 3)
                        .float("eps", 1e-5)
                        .val("layout", lname)
                        .flag("inplace", inplace),
                    vec![Input::new(ty, &[6, 5, 6, 2])
                        .layout(layout)
                        .uniform(-2.0, 2.0)],
                    move |ctx, x| {
                        if inplace {
                            ctx.group_norm_inplace(&x[0], 3, 1e-5)
                        } else {
                            ctx.group_norm(&x[0], 3, 1e-5)
                        }
                    },
                    |x| group_norm_ref(&x[0], 3, 1e-5f32 as f64),
                ));
            }
        }
    }
}

fn l2_norm(out: &mut Vec<Case>) {
    for ty in [Type::F32, Type::F16, Type::BF16] {
        for (layout, lname) in LAYOUTS {
            for inplace in [false, true] {
                out.push(Case::new(
                    "L2_NORM",
                    Vars::new()
                        .ty("type", ty)
                        .list("ne", &[13, 5, 3, 2])
                        .float("eps", 1e-6)
                        .val("layout", lname)
                        .flag("inplace", inplace),
                    vec![Input::new(ty, &[13, 5, 3, 2])
                        .layout(layout)
                        .uniform(-2.0, 2.0)],
                    move |ctx, x| {
                        if inplace {
                            ctx.l2_norm_inplace(&x[0], 1e-6)
                        } else {
                            ctx.l2_norm(&x[0], 1e-6)
                        }
                    },
                    |x| x[0].map_rows(x[0].ne[0], |_, r| l2_norm_row(r, 1e-6f32 as f64)),
                ));
            }
        }
    }
    // eps larger than some rows' norms: those rows are divided by eps.
    for ne in [&[1i64, 7][..], &[4, 3, 2, 1, 2], &[300, 2]] {
        out.push(Case::new(
            "L2_NORM",
            Vars::new()
                .ty("type", Type::F32)
                .list("ne", ne)
                .float("eps", 0.5),
            vec![Input::new(Type::F32, ne).uniform(-0.4, 0.4)],
            |ctx, x| ctx.l2_norm(&x[0], 0.5),
            |x| x[0].map_rows(x[0].ne[0], |_, r| l2_norm_row(r, 0.5)),
        ));
    }
}

/// The normalisation cases.
pub fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    group_norm(&mut out);
    l2_norm(&mut out);
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
