//! GROUP_NORM and L2_NORM: op parameters, shape rules and errors (their values are the
//! conformance suite's, `ggml-conformance` family `norm`).

mod common;

use common::nodes::{assert_valid, validate_with};
use common::*;
use ggml::{Context, Type};

#[test]
fn shape_rules() {
    let ctx = Context::init(1 << 20, true).unwrap();
    let a = ctx.new_tensor_3d(Type::F32, 4, 3, 6).unwrap();
    for eps in [-1.0f32, f32::NAN, f32::INFINITY] {
        assert_err(ctx.l2_norm(&a, eps), &["L2_NORM", "eps"]);
        assert_err(ctx.group_norm(&a, 2, eps), &["GROUP_NORM", "eps"]);
    }
    for groups in [0, -3] {
        assert_err(
            ctx.group_norm_inplace(&a, groups, 1e-5),
            &["GROUP_NORM", "n_groups", &groups.to_string()],
        );
    }
    let g = ctx.group_norm(&a, 4, 1e-5).unwrap();
    let l = ctx.l2_norm_inplace(&a, 1e-5).unwrap();
    assert_eq!(g.op_params()[..2], [4, 1e-5f32.to_bits() as i32]);
    assert_eq!(l.op_params()[0], 1e-5f32.to_bits() as i32);
    assert_valid(&g);
    assert_valid(&l);
    assert_err(
        validate_with(&g, |p| p[0] = 0),
        &["GROUP_NORM", "n_groups = 0"],
    );
}
