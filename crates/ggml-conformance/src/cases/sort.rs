//! ARGSORT (exact, on rows of distinct values) and TOP_K (the same set of indices per row,
//! GGML's metric: its CPU kernel does not order the `k` indices it returns).

use ggml::ops::SortOrder;
use ggml::Type;

use crate::case::{Case, Init, Input, Layout, Metric, Vars};
use crate::host::Host;

/// The `k` largest values' indices of each row of `a`.
fn top_k_ref(a: &Host, k: usize) -> Host {
    a.map_rows(k, |_, row| {
        let mut top = sorted_indices(row, SortOrder::Desc);
        top.truncate(k);
        top
    })
}

/// The indices of `row` by value, ascending or descending (the values are distinct).
fn sorted_indices(row: &[f64], order: SortOrder) -> Vec<f64> {
    let mut idx: Vec<usize> = (0..row.len()).collect();
    idx.sort_by(|&i, &j| row[i].total_cmp(&row[j]));
    if order == SortOrder::Desc {
        idx.reverse();
    }
    idx.into_iter().map(|i| i as f64).collect()
}

fn argsort(out: &mut Vec<Case>) {
    // (type, shape, layout): F16/BF16 rows short enough that their distinct values stay
    // distinct after rounding; the permuted input draws uniform F32 values (no ties in practice).
    let grid: [(Type, [i64; 4], Layout, &str); 9] = [
        (Type::F32, [1, 1, 1, 1], Layout::Contiguous, "contiguous"),
        (Type::F32, [2, 3, 1, 1], Layout::Contiguous, "contiguous"),
        (Type::F32, [16, 3, 2, 2], Layout::Contiguous, "contiguous"),
        (Type::F32, [60, 3, 2, 1], Layout::Padded, "padded"),
        (Type::F32, [1025, 2, 1, 3], Layout::Contiguous, "contiguous"),
        (
            Type::F32,
            [12, 5, 3, 2],
            Layout::Permuted([1, 0, 2, 3]),
            "permuted",
        ),
        (Type::F32, [7, 5, 3, 2], Layout::Transposed, "transposed"),
        (Type::F16, [33, 4, 2, 1], Layout::Padded, "padded"),
        (Type::BF16, [12, 5, 3, 2], Layout::Contiguous, "contiguous"),
    ];
    for order in [SortOrder::Asc, SortOrder::Desc] {
        for (ty, ne, layout, lname) in grid {
            let init = match layout {
                Layout::Contiguous | Layout::Padded => Init::Distinct(-1.0, 1.0),
                _ => Init::Uniform(-1.0, 1.0),
            };
            out.push(
                Case::new(
                    "ARGSORT",
                    Vars::new()
                        .ty("type", ty)
                        .list("ne", &ne)
                        .val("order", order as i32)
                        .val("layout", lname),
                    vec![Input::new(ty, &ne).layout(layout).init(init)],
                    move |ctx, x| ctx.argsort(&x[0], order),
                    move |x| x[0].map_rows(x[0].ne[0], |_, row| sorted_indices(row, order)),
                )
                .metric(Metric::Exact),
            );
        }
    }
}

fn top_k(out: &mut Vec<Case>) {
    let grid: [([i64; 4], i32); 10] = [
        ([1, 1, 1, 1], 1),
        ([2, 2, 1, 3], 2),
        ([7, 2, 1, 3], 3),
        ([16, 1, 1, 1], 16),
        ([27, 1, 2, 1], 1),
        ([27, 1, 2, 1], 9),
        ([60, 3, 2, 2], 4),
        ([100, 4, 2, 1], 20),
        ([1025, 2, 1, 3], 40),
        ([1024, 1, 1, 1], 1024),
    ];
    for (ne, k) in grid {
        for ty in [Type::F32, Type::F16] {
            if ty == Type::F16 && ne[0] > 100 {
                continue;
            }
            out.push(
                Case::new(
                    "TOP_K",
                    Vars::new()
                        .ty("type", ty)
                        .list("ne", &ne)
                        .val("k", k)
                        .flag("ties", false),
                    vec![Input::new(ty, &ne).init(Init::Distinct(-1.0, 1.0))],
                    move |ctx, x| ctx.top_k(&x[0], k),
                    move |x| top_k_ref(&x[0], k as usize),
                )
                .metric(Metric::IndexSet),
            );
        }
    }
    // A padded view.
    out.push(
        Case::new(
            "TOP_K",
            Vars::new()
                .ty("type", Type::F32)
                .list("ne", &[12, 5, 3, 2])
                .val("k", 5)
                .flag("ties", false)
                .val("layout", "padded"),
            vec![Input::new(Type::F32, &[12, 5, 3, 2])
                .layout(Layout::Padded)
                .init(Init::Distinct(-1.0, 1.0))],
            |ctx, x| ctx.top_k(&x[0], 5),
            |x| top_k_ref(&x[0], 5),
        )
        .metric(Metric::IndexSet),
    );
}

/// The ARGSORT and TOP_K cases.
pub fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    argsort(&mut out);
    top_k(&mut out);
    out
}
