//! ARGSORT and TOP_K where the conformance suite does not look: the reference sorts
//! `(value, index)` pairs of each row (so ties keep index order, NaN above every number), over
//! float types and strided inputs with ties, infinities and NaN; and the shape rules.

mod common;

use std::cmp::Ordering;

use common::nodes::{assert_valid, validate_with};
use common::*;
use ggml::ops::SortOrder;
use ggml::{Context, Type};

/// The indices of `row` ordered by value (ascending or descending), ties by index.
fn sorted_indices(row: &[f64], desc: bool) -> Vec<f64> {
    let key = |v: f64| if v.is_nan() { (1, 0.0) } else { (0, v) };
    let mut idx: Vec<usize> = (0..row.len()).collect();
    idx.sort_by(|&i, &j| {
        let (a, b) = (key(row[i]), key(row[j]));
        let by_value = a.partial_cmp(&b).unwrap_or(Ordering::Equal);
        let by_value = if desc { by_value.reverse() } else { by_value };
        by_value.then(i.cmp(&j))
    });
    idx.into_iter().map(|i| i as f64).collect()
}

fn argsort_ref(h: &Host, order: SortOrder) -> Host {
    h.map_rows(h.ne[0], |_, row| {
        sorted_indices(row, order == SortOrder::Desc)
    })
}

/// The `k` largest, largest first, with the first two swapped (GGML's CPU kernel).
fn top_k_ref(h: &Host, k: usize) -> Host {
    h.map_rows(k, |_, row| {
        let mut top = sorted_indices(row, true);
        top.truncate(k);
        if k > 1 {
            top.swap(0, 1);
        }
        top
    })
}

/// How a case fills its input.
#[derive(Clone, Copy, Debug)]
enum Fill {
    /// Values from {−1, 0, 1, 2}: many ties.
    Ties,
    /// Random values with infinities and NaN among them.
    Special,
}

fn value(fill: Fill, rng: &mut Rng) -> f64 {
    match fill {
        Fill::Ties => rng.range(-1, 2) as f64,
        Fill::Special => match rng.below(8) {
            0 => f64::NAN,
            1 => f64::INFINITY,
            2 => f64::NEG_INFINITY,
            _ => rng.uniform(-1.0, 1.0),
        },
    }
}

// Rows of distinct values are the conformance suite's (`ggml-conformance`, family `sort`);
// here the orders GGML's metric leaves open: ties keep index order, NaN sorts above every
// number, infinities at the ends.

#[test]
fn argsort_ties_and_special_values() {
    for order in [SortOrder::Asc, SortOrder::Desc] {
        for ty in FLOATS {
            for layout in LAYOUTS {
                for fill in [Fill::Ties, Fill::Special] {
                    let name = format!(
                        "ARGSORT(order={order:?},type={ty},layout={layout:?},fill={fill:?})"
                    );
                    check(&name, EXACT, |ctx, rng| {
                        let (a, ha) =
                            input_with(ctx, ty, &[12, 5, 3, 2], layout, |_| value(fill, rng))?;
                        Ok((ctx.argsort(&a, order)?, argsort_ref(&ha, order)))
                    });
                }
            }
        }
    }
}

#[test]
fn top_k_ties_and_special_values() {
    for ty in FLOATS {
        for layout in LAYOUTS {
            for fill in [Fill::Ties, Fill::Special] {
                let name = format!("TOP_K(type={ty},layout={layout:?},fill={fill:?},k=5)");
                check(&name, EXACT, |ctx, rng| {
                    let (a, ha) =
                        input_with(ctx, ty, &[12, 5, 3, 2], layout, |_| value(fill, rng))?;
                    Ok((ctx.top_k(&a, 5)?, top_k_ref(&ha, 5)))
                });
            }
        }
    }
}

#[test]
fn shape_rules() {
    let ctx = Context::init(1 << 20, true).unwrap();
    let a = ctx.new_tensor_3d(Type::F32, 10, 3, 2).unwrap();
    let s = ctx.argsort(&a, SortOrder::Desc).unwrap();
    assert_eq!((s.ty(), s.ne(), s.op_params()[0]), (Type::I32, a.ne(), 1));
    let t = ctx.top_k(&a, 4).unwrap();
    assert_eq!((t.ty(), t.ne()), (Type::I32, [4, 3, 2, 1, 1]));
    assert_eq!(ctx.top_k(&a, 0).unwrap().ne(), [0, 3, 2, 1, 1]);
    assert_valid(&s);
    assert_valid(&t);
    assert_err(validate_with(&s, |p| p[0] = 2), &["ARGSORT", "order", "2"]);
    let ints = ctx.new_tensor_1d(Type::I32, 4).unwrap();
    assert_err(ctx.argsort(&ints, SortOrder::Asc), &["ARGSORT", "a", "i32"]);
    assert_err(ctx.top_k(&ints, 1), &["TOP_K", "a", "i32"]);
    for k in [11, -1] {
        assert_err(ctx.top_k(&a, k), &["TOP_K", &format!("k = {k}"), "0..=10"]);
    }
}
