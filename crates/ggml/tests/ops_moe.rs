//! MUL_MAT_ID and OUT_PROD: shape rules and errors (their values, out-of-range expert ids
//! included, are the conformance suite's, `ggml-conformance` family `moe`).

mod common;

use common::nodes::assert_valid;
use common::*;
use ggml::{Context, Tensor, Type};

#[test]
fn mul_mat_id_shape_rules() {
    let ctx = Context::init(1 << 20, true).unwrap();
    let w = ctx.new_tensor_3d(Type::F32, 8, 4, 3).unwrap();
    let b = ctx.new_tensor_3d(Type::F32, 8, 2, 5).unwrap();
    let ids = ctx.new_tensor_2d(Type::I32, 2, 5).unwrap();
    let ok = ctx.mul_mat_id(&w, &b, &ids).unwrap();
    assert_eq!((ok.ty(), ok.ne()), (Type::F32, [4, 2, 5, 1, 1]));
    assert_valid(&ok);
    let q = ctx.new_tensor_3d(Type::Q8_0, 32, 4, 3).unwrap();
    let bq = ctx.new_tensor_3d(Type::F32, 32, 1, 5).unwrap();
    assert_valid(&ctx.mul_mat_id(&q, &bq, &ids).unwrap());
    let w4 = ctx.new_tensor_4d(Type::F32, 8, 4, 3, 2).unwrap();
    let b4 = ctx.new_tensor_4d(Type::F32, 8, 2, 5, 2).unwrap();
    let ids_f = ctx.new_tensor_2d(Type::F32, 2, 5).unwrap();
    let ids_3d = ctx.new_tensor_3d(Type::I32, 2, 5, 2).unwrap();
    let ids_tokens = ctx.new_tensor_2d(Type::I32, 2, 4).unwrap();
    let ids_used = ctx.new_tensor_2d(Type::I32, 3, 5).unwrap();
    let b_k = ctx.new_tensor_3d(Type::F32, 7, 2, 5).unwrap();
    let b_int = ctx.new_tensor_3d(Type::I32, 8, 2, 5).unwrap();
    let wt = ctx.transpose(&w).unwrap();
    let cases: Vec<(ggml::Result<Tensor>, &[&str])> = vec![
        (ctx.mul_mat_id(&w4, &b, &ids), &["MUL_MAT_ID", "as", "3-D"]),
        (ctx.mul_mat_id(&w, &b4, &ids), &["MUL_MAT_ID", "b", "3-D"]),
        (ctx.mul_mat_id(&w, &b, &ids_f), &["ids", "i32"]),
        (ctx.mul_mat_id(&w, &b, &ids_3d), &["ids", "2-D"]),
        (ctx.mul_mat_id(&w, &b, &ids_tokens), &["ids", "b's ne2 = 5"]),
        (ctx.mul_mat_id(&w, &b, &ids_used), &["b", "divide", "3"]),
        (ctx.mul_mat_id(&w, &b_k, &ids), &["b", "K = 7", "K = 8"]),
        (ctx.mul_mat_id(&w, &b_int, &ids), &["b", "i32"]),
        (ctx.mul_mat_id(&wt, &b, &ids), &["as", "transposed"]),
        (ctx.mul_mat_id(&ids, &b, &ids), &["as", "quantized"]),
    ];
    for (r, needles) in cases {
        assert_err(r, needles);
    }
}

#[test]
fn out_prod_shape_rules() {
    let ctx = Context::init(1 << 20, true).unwrap();
    let a = ctx.new_tensor_3d(Type::F32, 6, 4, 2).unwrap();
    let b = ctx.new_tensor_3d(Type::F32, 5, 4, 4).unwrap();
    let ok = ctx.out_prod(&a, &b).unwrap();
    assert_eq!((ok.ty(), ok.ne()), (Type::F32, [6, 5, 4, 1, 1]));
    assert_valid(&ok);
    let b_k = ctx.new_tensor_3d(Type::F32, 5, 3, 4).unwrap();
    let b_batch = ctx.new_tensor_3d(Type::F32, 5, 4, 3).unwrap();
    let b_int = ctx.new_tensor_3d(Type::I32, 5, 4, 4).unwrap();
    let a_int = ctx.new_tensor_3d(Type::I32, 6, 4, 2).unwrap();
    let at = ctx.transpose(&a).unwrap();
    let bt = ctx.new_tensor_3d(Type::F32, 5, 6, 2).unwrap();
    assert_err(
        ctx.out_prod(&a, &b_k),
        &["OUT_PROD", "b", "ne1 = 3", "ne1 = 4"],
    );
    assert_err(ctx.out_prod(&a, &b_batch), &["OUT_PROD", "b", "multiples"]);
    assert_err(ctx.out_prod(&a, &b_int), &["OUT_PROD", "b", "i32"]);
    assert_err(ctx.out_prod(&a_int, &b), &["OUT_PROD", "a", "quantized"]);
    assert_err(ctx.out_prod(&at, &bt), &["OUT_PROD", "a", "transposed"]);
}
