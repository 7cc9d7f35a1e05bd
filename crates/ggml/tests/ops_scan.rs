//! CUMSUM, COUNT_EQUAL and SOLVE_TRI: shape rules and errors (their values are the
//! conformance suite's, `ggml-conformance` family `scan`).

mod common;

use common::nodes::assert_valid;
use common::*;
use ggml::{Context, Type};

#[test]
fn shape_rules() {
    let ctx = Context::init(1 << 20, true).unwrap();
    let f = ctx.new_tensor_2d(Type::F32, 6, 3).unwrap();
    let h = ctx.new_tensor_2d(Type::F16, 6, 3).unwrap();
    let c = ctx.cumsum(&f).unwrap();
    assert_eq!((c.ty(), c.ne()), (Type::F32, f.ne()));
    assert_valid(&c);
    assert_err(ctx.cumsum(&h), &["CUMSUM", "a", "f32"]);

    let i = ctx.new_tensor_2d(Type::I32, 6, 3).unwrap();
    let j = ctx.new_tensor_2d(Type::I32, 3, 6).unwrap();
    let e = ctx.count_equal(&i, &i).unwrap();
    assert_eq!((e.ty(), e.ne()), (Type::I64, [1; 5]));
    assert_valid(&e);
    assert_err(ctx.count_equal(&i, &j), &["COUNT_EQUAL", "b", "shape of a"]);
    assert_err(ctx.count_equal(&f, &i), &["COUNT_EQUAL", "a", "i32"]);
    assert_err(ctx.count_equal(&i, &f), &["COUNT_EQUAL", "b", "i32"]);

    let a = ctx.new_tensor_3d(Type::F32, 4, 4, 2).unwrap();
    let b = ctx.new_tensor_3d(Type::F32, 3, 4, 2).unwrap();
    let x = ctx.solve_tri(&a, &b, true, true, false).unwrap();
    assert_eq!((x.ty(), x.ne()), (Type::F32, b.ne()));
    assert_valid(&x);
    for (left, lower, uni) in [
        (false, true, false),
        (true, false, false),
        (true, true, true),
    ] {
        assert_err(
            ctx.solve_tri(&a, &b, left, lower, uni),
            &[
                "SOLVE_TRI",
                &format!("left = {left}, lower = {lower}, uni = {uni}"),
            ],
        );
    }
    let rect = ctx.new_tensor_3d(Type::F32, 4, 3, 2).unwrap();
    let b_rows = ctx.new_tensor_3d(Type::F32, 3, 5, 2).unwrap();
    let b_batch = ctx.new_tensor_3d(Type::F32, 3, 4, 1).unwrap();
    let a16 = ctx.new_tensor_3d(Type::F16, 4, 4, 2).unwrap();
    assert_err(
        ctx.solve_tri(&rect, &b, true, true, false),
        &["SOLVE_TRI", "a", "square"],
    );
    assert_err(
        ctx.solve_tri(&a, &b_rows, true, true, false),
        &["b", "ne1", "4"],
    );
    assert_err(
        ctx.solve_tri(&a, &b_batch, true, true, false),
        &["b", "batch"],
    );
    assert_err(ctx.solve_tri(&a16, &b, true, true, false), &["a", "f32"]);
}
