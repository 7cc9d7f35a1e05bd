//! GLU and XIELU: op parameters, shape rules and errors (their values are the conformance
//! suite's, `ggml-conformance` family `glu`).

mod common;

use common::nodes::{assert_valid, validate_with};
use common::*;
use ggml::ops::GluOp;
use ggml::{Context, Type};

#[test]
fn glu_generic_builder_matches_op_params() {
    let ctx = Context::init(1 << 20, true).unwrap();
    let a = ctx.new_tensor_2d(Type::F32, 8, 3).unwrap();
    let b = ctx.new_tensor_2d(Type::F32, 8, 3).unwrap();
    let t = ctx.swiglu_oai(&a, Some(&b), 1.5, 6.0).unwrap();
    let p = t.op_params();
    assert_eq!(
        (
            p[0],
            p[1],
            f32::from_bits(p[2] as u32),
            f32::from_bits(p[3] as u32)
        ),
        (3, 0, 1.5, 6.0)
    );
    let t = ctx.geglu_quick_swapped(&a).unwrap();
    assert_eq!(
        (t.op_params()[0], t.op_params()[1], t.ne()),
        (5, 1, [4, 3, 1, 1, 1])
    );
    assert_eq!(ctx.glu_split(&a, &b, GluOp::Reglu).unwrap().ne(), a.ne());
    for n in [t, ctx.swiglu_split(&a, &b).unwrap(), ctx.reglu(&a).unwrap()] {
        assert_valid(&n);
    }
}

#[test]
fn glu_shape_rule_errors() {
    let ctx = Context::init(1 << 20, true).unwrap();
    let a = ctx.new_tensor_2d(Type::F32, 8, 3).unwrap();
    let b_shape = ctx.new_tensor_2d(Type::F32, 8, 2).unwrap();
    let b_type = ctx.new_tensor_2d(Type::F16, 8, 3).unwrap();
    let ints = ctx.new_tensor_2d(Type::I32, 8, 3).unwrap();
    assert_err(ctx.swiglu_split(&a, &b_shape), &["GLU", "b", "shape of a"]);
    assert_err(ctx.swiglu_split(&a, &b_type), &["GLU", "b", "type of a"]);
    assert_err(ctx.swiglu(&ints), &["GLU", "a", "i32"]);
    let node = ctx.swiglu(&a).unwrap();
    assert_err(
        validate_with(&node, |p| p[0] = 7),
        &["GLU", "op_params[0] = 7"],
    );
    assert_err(validate_with(&node, |p| p[1] = 2), &["GLU", "swapped", "2"]);
}

#[test]
fn xielu_stores_its_constants() {
    let ctx = Context::init(1 << 20, true).unwrap();
    let a = ctx.new_tensor_1d(Type::F32, 4).unwrap();
    let node = ctx.xielu(&a, 0.8, 0.8, 0.5, -1e-6).unwrap();
    assert_valid(&node);
    let p: Vec<f32> = node.op_params()[1..5]
        .iter()
        .map(|&v| f32::from_bits(v as u32))
        .collect();
    let sp = |v: f64| v.exp().ln_1p();
    assert!((p[0] as f64 - (0.5 + sp(0.8))).abs() < 1e-6 && (p[1] as f64 - sp(0.8)).abs() < 1e-6);
    assert_eq!((p[2], p[3]), (0.5, -1e-6));
}
