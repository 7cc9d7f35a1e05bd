//! CUMSUM, COUNT_EQUAL (exact) and SOLVE_TRI (forward substitution), from their definitions.

use std::cmp::Ordering;
use std::sync::Arc;

use ggml::Type;

use crate::case::{Case, Init, Input, Layout, Metric, Vars};
use crate::host::{indices, Host};
use crate::rng::Rng;

fn cumsum(out: &mut Vec<Case>) {
    let grid: [(&[i64], Layout, &str); 8] = [
        (&[1], Layout::Contiguous, "contiguous"),
        (&[10, 5, 4, 3], Layout::Contiguous, "contiguous"),
        (&[127, 5, 4, 3], Layout::Contiguous, "contiguous"),
        (&[1025, 3, 1, 1], Layout::Contiguous, "contiguous"),
        (&[9, 5, 3, 2], Layout::Padded, "padded"),
        (&[9, 5, 3, 2], Layout::Permuted([2, 0, 3, 1]), "permuted"),
        (&[9, 5, 3, 2], Layout::Transposed, "transposed"),
        (&[4, 3, 2, 2, 2], Layout::Contiguous, "contiguous"),
    ];
    for (ne, layout, lname) in grid {
        out.push(Case::new(
            "CUMSUM",
            Vars::new()
                .ty("type", Type::F32)
                .list("ne", ne)
                .val("layout", lname),
            vec![Input::new(Type::F32, ne).layout(layout).uniform(-1.0, 1.5)],
            |ctx, x| ctx.cumsum(&x[0]),
            |x| {
                x[0].map_rows(x[0].ne[0], |_, row| {
                    let mut acc = 0.0;
                    row.iter()
                        .map(|&v| {
                            acc += v;
                            acc
                        })
                        .collect()
                })
            },
        ));
    }
}

fn count_equal(out: &mut Vec<Case>) {
    let grid: [(&[i64], Layout, &str, i64); 7] = [
        (&[1], Layout::Contiguous, "contiguous", 2),
        (&[4, 500, 1, 1], Layout::Contiguous, "contiguous", 3),
        (&[10, 7], Layout::Contiguous, "contiguous", 1),
        (
            &[33, 5, 3, 2],
            Layout::Permuted([2, 0, 3, 1]),
            "permuted",
            2,
        ),
        (&[6, 5, 3, 2], Layout::Transposed, "transposed", 2),
        (&[6, 5, 3, 2], Layout::Padded, "padded", 2),
        (&[3, 2, 2, 2, 3], Layout::Contiguous, "contiguous", 2),
    ];
    for (ne, layout, lname, hi) in grid {
        out.push(
            Case::new(
                "COUNT_EQUAL",
                Vars::new()
                    .ty("type", Type::I32)
                    .list("ne", ne)
                    .val("values", format_args!("0..={hi}"))
                    .val("layout", lname),
                vec![
                    Input::new(Type::I32, ne)
                        .layout(layout)
                        .init(Init::Ints(0, hi)),
                    Input::new(Type::I32, ne).init(Init::Ints(0, hi)),
                ],
                |ctx, x| ctx.count_equal(&x[0], &x[1]),
                |x| {
                    let n = x[0].v.iter().zip(&x[1].v).filter(|(a, b)| a == b).count();
                    Host::from_fn([1; crate::host::DIMS], |_| n as f64)
                },
            )
            .metric(Metric::Exact),
        );
    }
}

/// `x[c, i] = (b[c, i] − Σ_{t<i} a[t, i]·x[c, t]) / a[i, i]` in each batch.
fn solve_tri_ref(a: &Host, b: &Host) -> Host {
    let mut x = Host::from_fn(b.ne, |_| 0.0);
    for batch in indices([1, 1, b.ne[2], b.ne[3], b.ne[4]]) {
        let at = |i0: usize, i1: usize| [i0, i1, batch[2], batch[3], batch[4]];
        for c in 0..b.ne[0] {
            for i in 0..b.ne[1] {
                let sum: f64 = (0..i).map(|t| a.at(at(t, i)) * x.at(at(c, t))).sum();
                let k = x.offset(at(c, i));
                x.v[k] = (b.at(at(c, i)) - sum) / a.at(at(i, i));
            }
        }
    }
    x
}

fn solve_tri(out: &mut Vec<Case>) {
    let grid: [([i64; 4], i64, Layout, &str); 7] = [
        ([1, 1, 1, 1], 1, Layout::Contiguous, "contiguous"),
        ([10, 10, 4, 3], 3, Layout::Contiguous, "contiguous"),
        ([11, 11, 1, 1], 5, Layout::Contiguous, "contiguous"),
        ([17, 17, 2, 4], 9, Layout::Padded, "padded"),
        ([16, 16, 1, 1], 8, Layout::Transposed, "transposed"),
        ([64, 64, 2, 1], 10, Layout::Contiguous, "contiguous"),
        ([4, 4, 2, 2], 5, Layout::Contiguous, "contiguous"),
    ];
    for (lhs, k, layout, lname) in grid {
        let n = lhs[0] as usize;
        let rhs = [k, lhs[1], lhs[2], lhs[3]];
        // Above the diagonal NaN (never read); the diagonal away from zero.
        let tril = Init::Custom(Arc::new(move |rng: &mut Rng, i| match i[0].cmp(&i[1]) {
            Ordering::Greater => f64::NAN,
            Ordering::Equal => {
                let sign = if rng.int(0, 1) == 0 { -1.0 } else { 1.0 };
                sign * rng.uniform(1.0, 2.0)
            }
            Ordering::Less => rng.uniform(-1.0, 1.0) / n as f64,
        }));
        out.push(Case::new(
            "SOLVE_TRI",
            Vars::new()
                .ty("type", Type::F32)
                .list("ne_lhs", &lhs)
                .list("ne_rhs", &rhs)
                .val("layout_rhs", lname),
            vec![
                Input::new(Type::F32, &lhs).init(tril),
                Input::new(Type::F32, &rhs).layout(layout),
            ],
            |ctx, x| ctx.solve_tri(&x[0], &x[1], true, true, false),
            |x| solve_tri_ref(&x[0], &x[1]),
        ));
    }
}

/// The CUMSUM, COUNT_EQUAL and SOLVE_TRI cases.
pub fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    cumsum(&mut out);
    count_equal(&mut out);
    solve_tri(&mut out);
    out
}
