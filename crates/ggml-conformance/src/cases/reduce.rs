//! SUM, SUM_ROWS, MEAN and ARGMAX.

use ggml::Type;

use crate::case::{Case, Init, Input, Layout, Metric, Vars};
use crate::host::{indices, Host};

/// The reduction cases.
pub fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    let layouts = [
        ("contiguous", Layout::Contiguous),
        ("permuted", Layout::Permuted([0, 2, 1, 3])),
        ("padded", Layout::Padded),
    ];
    for (ne, (lname, layout)) in [[10i64, 5, 4, 3], [33, 1, 1, 1], [1, 7, 3, 2]]
        .into_iter()
        .flat_map(|ne| layouts.map(|l| (ne, l)))
    {
        let vars = || {
            Vars::new()
                .ty("type", Type::F32)
                .list("ne", &ne)
                .val("layout", lname)
        };
        out.push(Case::new(
            "SUM",
            vars(),
            vec![Input::new(Type::F32, &ne).layout(layout)],
            |ctx, x| ctx.sum(&x[0]),
            |x| Host {
                ne: [1; 5],
                v: vec![x[0].v.iter().sum()],
            },
        ));
        out.push(Case::new(
            "SUM_ROWS",
            vars(),
            vec![Input::new(Type::F32, &ne).layout(layout)],
            |ctx, x| ctx.sum_rows(&x[0]),
            |x| x[0].map_rows(1, |_, r| vec![r.iter().sum()]),
        ));
        out.push(Case::new(
            "MEAN",
            vars(),
            vec![Input::new(Type::F32, &ne).layout(layout)],
            |ctx, x| ctx.mean(&x[0]),
            |x| x[0].map_rows(1, |_, r| vec![r.iter().sum::<f64>() / r.len() as f64]),
        ));
    }
    for ty in [Type::F32, Type::F16] {
        for ne in [[32i64, 1], [100, 10], [1024, 12], [5, 7]] {
            out.push(
                Case::new(
                    "ARGMAX",
                    Vars::new().ty("type", ty).list("ne", &[ne[0], ne[1], 1, 1]),
                    vec![Input::new(ty, &ne).init(Init::Distinct(-100.0, 100.0))],
                    |ctx, x| ctx.argmax(&x[0]),
                    |x| {
                        let a = &x[0];
                        Host::from_fn([a.ne[1], 1, 1, 1, 1], |i| {
                            let row = a.row([0, i[0], 0, 0, 0]);
                            let mut best = 0;
                            for (k, &v) in row.iter().enumerate() {
                                if v > row[best] {
                                    best = k;
                                }
                            }
                            best as f64
                        })
                    },
                )
                .metric(Metric::Exact),
            );
        }
    }
    // Sums must see every element once: a tensor of ones over a 5-D shape.
    let ne = [3i64, 2, 2, 2, 3];
    out.push(Case::new(
        "SUM",
        Vars::new()
            .ty("type", Type::F32)
            .list("ne", &ne)
            .val("layout", "ones"),
        vec![Input::new(Type::F32, &ne).init(Init::Ints(1, 1))],
        |ctx, x| ctx.sum(&x[0]),
        |x| Host {
            ne: [1; 5],
            v: vec![indices(x[0].ne).count() as f64],
        },
    ));
    out
}
