//! SUM, SUM_ROWS, MEAN and ARGMAX against f64 references.

mod common;

use common::reference;
use common::*;
use ggml::{Context, Type};

const SHAPES: [&[i64]; 6] = [
    &[1],
    &[7],
    &[33, 5],
    &[6, 5, 4, 3],
    &[3, 2, 2, 2, 3],
    &[1000, 3],
];

#[test]
fn sum_all_elements() {
    for ty in FLOATS {
        for ne in SHAPES {
            for layout in layouts_for(ne) {
                let name = format!("sum {ty} {ne:?} {layout:?}");
                check(&name, TOL, |ctx, rng| {
                    let (a, ha) = input(ctx, ty, ne, layout, rng, -1.0, 1.0)?;
                    let out = ctx.sum(&a)?;
                    assert_eq!((out.ty(), out.ne()), (ty, [1, 1, 1, 1, 1]));
                    Ok((
                        out,
                        Host {
                            ne: [1; 5],
                            v: vec![ha.v.iter().sum()],
                        },
                    ))
                });
            }
        }
    }
}

#[test]
fn sum_rows_and_mean() {
    for ty in FLOATS {
        for ne in SHAPES {
            for layout in layouts_for(ne) {
                let name = format!("sum_rows {ty} {ne:?} {layout:?}");
                check(&name, TOL, |ctx, rng| {
                    let (a, ha) = input(ctx, ty, ne, layout, rng, -1.0, 1.0)?;
                    let out = ctx.sum_rows(&a)?;
                    assert_eq!(out.ty(), ty);
                    Ok((out, reference::row_sums(&ha)))
                });
                let name = format!("mean {ty} {ne:?} {layout:?}");
                check(&name, TOL, |ctx, rng| {
                    let (a, ha) = input(ctx, ty, ne, layout, rng, -1.0, 3.0)?;
                    let out = ctx.mean(&a)?;
                    assert_eq!(out.ty(), Type::F32);
                    let n = ha.ne[0] as f64;
                    Ok((
                        out,
                        ha.map_rows(1, |_, row| vec![row.iter().sum::<f64>() / n]),
                    ))
                });
            }
        }
    }
}

/// GGML's argmax: the last index holding the row's maximum.
fn argmax_ref(h: &Host) -> Host {
    let rows = h.map_rows(1, |_, row| {
        let max = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        vec![row.iter().rposition(|&v| v == max).unwrap_or(0) as f64]
    });
    Host {
        ne: [h.ne[1], 1, 1, 1, 1],
        v: rows.v,
    }
}

#[test]
fn argmax_random_rows() {
    for ty in FLOATS {
        for ne in [&[1i64, 1][..], &[7, 1], &[33, 5], &[1000, 12], &[5, 300]] {
            for layout in [Layout::Contiguous, Layout::Transposed, Layout::Padded] {
                let name = format!("argmax {ty} {ne:?} {layout:?}");
                check(&name, EXACT, |ctx, rng| {
                    let (a, ha) = input(ctx, ty, ne, layout, rng, -1.0, 1.0)?;
                    let out = ctx.argmax(&a)?;
                    assert_eq!((out.ty(), out.ne()[0]), (Type::I32, ne[1]));
                    Ok((out, argmax_ref(&ha)))
                });
            }
        }
    }
}

#[test]
fn argmax_ties_take_the_last_index() {
    let inf = f64::INFINITY;
    let rows: [[f64; 5]; 5] = [
        [1.0, 3.0, 3.0, 0.0, 3.0],
        [5.0, 1.0, 1.0, 1.0, 1.0],
        [-inf, -inf, -inf, -inf, -inf],
        [0.0, -0.0, 0.0, -1.0, -2.0],
        [-1.0, inf, 2.0, inf, -inf],
    ];
    check("argmax ties", EXACT, |ctx, _| {
        let flat: Vec<f64> = rows.iter().flatten().copied().collect();
        let (a, ha) = input_values(ctx, Type::F32, &[5, 5], &flat)?;
        let out = ctx.argmax(&a)?;
        let want = argmax_ref(&ha);
        assert_eq!(want.v, vec![4.0, 0.0, 4.0, 2.0, 3.0]);
        Ok((out, want))
    });
}

#[test]
fn argmax_needs_a_matrix() {
    let ctx = Context::init(1 << 20, true).unwrap();
    let a = ctx.new_tensor_3d(Type::F32, 4, 3, 2).unwrap();
    assert_err(ctx.argmax(&a), &["ARGMAX", "[4, 3, 2, 1, 1]"]);
}

/// Padded views are at most 4-D.
fn layouts_for(ne: &[i64]) -> Vec<Layout> {
    LAYOUTS
        .into_iter()
        .filter(|&l| ne.len() < 5 || l != Layout::Padded)
        .collect()
}
