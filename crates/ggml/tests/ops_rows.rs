//! GET_ROWS, REPEAT and CONCAT against references written with explicit indices.

mod common;

use common::reference;
use common::*;
use ggml::{Context, Type};

const ROW_TYPES: [Type; 4] = [Type::F32, Type::F16, Type::BF16, Type::I32];

/// Integer-valued data for I32 tensors, uniform values for float ones.
fn data_range(ty: Type) -> (f64, f64) {
    if ty == Type::I32 {
        (-1000.0, 1000.0)
    } else {
        (-1.0, 1.0)
    }
}

fn int_input(
    ctx: &Context,
    ne: &[i64],
    layout: Layout,
    rng: &mut Rng,
    lo: i64,
    hi: i64,
) -> ggml::Result<(ggml::Tensor, Host)> {
    input_with(ctx, Type::I32, ne, layout, |_| rng.range(lo, hi) as f64)
}

#[test]
fn get_rows_types_shapes_layouts() {
    for ty in ROW_TYPES {
        for (a_ne, b_ne) in [
            (&[5i64, 7][..], &[4i64][..]),
            (&[16, 10, 3], &[6, 3]),
            (&[3, 4, 2, 3], &[5, 2, 3]),
            (&[1, 9], &[20]),
        ] {
            for la in [
                Layout::Contiguous,
                Layout::Permuted([0, 2, 1, 3]),
                Layout::Padded,
            ] {
                for lb in [Layout::Contiguous, Layout::Padded] {
                    let name = format!("get_rows {ty} {a_ne:?} {la:?} idx {b_ne:?} {lb:?}");
                    check(&name, EXACT, |ctx, rng| {
                        let (lo, hi) = data_range(ty);
                        let (a, ha) = input(ctx, ty, a_ne, la, rng, lo, hi)?;
                        let (b, hb) = int_input(ctx, b_ne, lb, rng, 0, a_ne[1] - 1)?;
                        let out = ctx.get_rows(&a, &b)?;
                        let want_ty = if ty == Type::I32 {
                            Type::I32
                        } else {
                            Type::F32
                        };
                        assert_eq!(out.ty(), want_ty);
                        Ok((out, reference::get_rows(&ha, &hb)))
                    });
                }
            }
        }
    }
}

/// Every index outside the source's rows fails the computation with an error naming the node,
/// the value and its position; a valid index before it does not.
#[test]
fn get_rows_out_of_range_indices_fail_the_compute() {
    for (ty, bad) in ROW_TYPES
        .iter()
        .flat_map(|&t| [-1.0, 4.0, 1000.0, -2147483648.0, 2147483647.0].map(|b| (t, b)))
    {
        let name = format!("get_rows out of range {ty} {bad}");
        let want = format!("src1 index {bad} at [1, 1, 0] is outside 0..4");
        check_compute_fails(&name, &["GET_ROWS", &want], |ctx, rng| {
            let (lo, hi) = data_range(ty);
            let (a, _) = input(ctx, ty, &[6, 4, 2], Layout::Contiguous, rng, lo, hi)?;
            let idx = [0.0, 3.0, 2.0, 1.0, 3.0, bad, 2.0, 0.0];
            let (b, _) = input_values(ctx, Type::I32, &[4, 2], &idx)?;
            ctx.get_rows(&a, &b)
        });
    }
}

#[test]
fn repeat_tiles_every_dimension() {
    for ty in ROW_TYPES {
        for (a_ne, b_ne) in [
            (&[1i64][..], &[5i64, 3][..]),
            (&[3, 2], &[6, 4]),
            (&[2, 3, 1, 2], &[4, 6, 3, 4]),
            (&[3, 1, 2], &[3, 5, 2]),
            (&[2, 1, 1, 1, 2], &[4, 2, 3, 1, 4]),
        ] {
            for la in [Layout::Contiguous, Layout::Permuted([1, 0, 2, 3])] {
                let name = format!("repeat {ty} {a_ne:?} {la:?} -> {b_ne:?}");
                check(&name, EXACT, |ctx, rng| {
                    let (lo, hi) = data_range(ty);
                    let (a, ha) = input(ctx, ty, a_ne, la, rng, lo, hi)?;
                    let b = ctx.new_tensor(Type::F32, b_ne)?;
                    let out = ctx.repeat(&a, &b)?;
                    assert_eq!(out.ty(), ty);
                    Ok((out, reference::repeat(&ha, shape(b_ne))))
                });
            }
        }
    }
}

#[test]
fn concat_along_every_dimension() {
    for ty in ROW_TYPES {
        for dim in 0..5 {
            for (la, lb) in [
                (Layout::Contiguous, Layout::Contiguous),
                (Layout::Permuted([2, 0, 3, 1]), Layout::Contiguous),
                (Layout::Contiguous, Layout::Permuted([1, 0, 2, 3])),
            ] {
                let mut a_ne = vec![4i64, 3, 2, 2, 2];
                let mut b_ne = a_ne.clone();
                a_ne[dim] = 2;
                b_ne[dim] = 3;
                let name = format!("concat {ty} dim {dim} {la:?} {lb:?}");
                check(&name, EXACT, |ctx, rng| {
                    let (lo, hi) = data_range(ty);
                    let (a, ha) = input(ctx, ty, &a_ne, la, rng, lo, hi)?;
                    let (b, hb) = input(ctx, ty, &b_ne, lb, rng, lo, hi)?;
                    Ok((ctx.concat(&a, &b, dim)?, reference::concat(&ha, &hb, dim)))
                });
            }
        }
    }
}

#[test]
fn concat_with_an_empty_part() {
    check("concat empty a", EXACT, |ctx, rng| {
        let (a, _) = input(ctx, Type::F32, &[0, 3], Layout::Contiguous, rng, 0.0, 1.0)?;
        let (b, hb) = input(ctx, Type::F32, &[4, 3], Layout::Contiguous, rng, 0.0, 1.0)?;
        Ok((ctx.concat(&a, &b, 0)?, hb))
    });
}

#[test]
fn shape_errors() {
    let ctx = Context::init(1 << 20, true).unwrap();
    let a = ctx.new_tensor_3d(Type::F32, 4, 5, 2).unwrap();
    let f_idx = ctx.new_tensor_2d(Type::F32, 3, 2).unwrap();
    assert_err(ctx.get_rows(&a, &f_idx), &["GET_ROWS", "f32", "i32"]);
    let bad = ctx.new_tensor_2d(Type::I32, 3, 3).unwrap();
    assert_err(
        ctx.get_rows(&a, &bad),
        &["GET_ROWS", "[3, 3, 1, 1, 1]", "[4, 5, 2, 1, 1]"],
    );
    let bad3 = ctx.new_tensor_3d(Type::I32, 3, 2, 2).unwrap();
    assert_err(ctx.get_rows(&a, &bad3), &["GET_ROWS", "[3, 2, 2, 1, 1]"]);
    let b = ctx.new_tensor_2d(Type::F32, 6, 4).unwrap();
    assert_err(
        ctx.repeat(&a, &b),
        &["REPEAT", "[4, 5, 2, 1, 1]", "[6, 4, 1, 1, 1]"],
    );
    let c = ctx.new_tensor_3d(Type::F32, 4, 6, 2).unwrap();
    assert_err(ctx.concat(&a, &c, 0), &["CONCAT", "ne[1]", "5", "6"]);
    assert_err(ctx.concat(&a, &c, 5), &["CONCAT", "dim = 5"]);
    let h = ctx.new_tensor_3d(Type::F16, 4, 5, 2).unwrap();
    assert_err(ctx.concat(&a, &h, 2), &["CONCAT", "f32", "f16"]);
}

/// In a longer graph the error names the faulting node by its graph position, and the
/// position reported does not depend on the thread count (the earliest bad index).
#[test]
fn an_index_fault_names_its_node_in_a_longer_graph() {
    check_compute_fails(
        "get_rows fault in a chain",
        &[
            "GET_ROWS (graph node 1",
            "src1 index 7 at [0, 0, 0] is outside 0..3",
        ],
        |ctx, rng| {
            let (a, _) = input(ctx, Type::F32, &[5, 3], Layout::Contiguous, rng, -1.0, 1.0)?;
            let (b, _) = input_values(ctx, Type::I32, &[4], &[7.0, 1.0, -1.0, 9.0])?;
            let doubled = ctx.add(&a, &a)?;
            let picked = ctx.get_rows(&doubled, &b)?;
            ctx.scale(&picked, 2.0)
        },
    );
}
