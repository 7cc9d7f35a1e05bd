//! `Op::validate`: a node that no builder made is checked by the same shape rule the builder
//! used — nodes the builders make pass, and every kind of tampering is an `Err` naming it.

use ggml::ops::{Meta, NodeMeta, UnaryOp, UnaryParams};
use ggml::{Context, Op, Tensor, Type, MAX_SRC};

fn srcs_of(t: &Tensor) -> Vec<Option<Meta>> {
    (0..t.n_src_slots())
        .map(|i| t.src(i).map(Meta::of))
        .collect()
}

/// Validates `t` as if it had come from outside, with `edit` applied to its description.
fn validate_edited(
    t: &Tensor,
    edit: impl FnOnce(&mut Meta, &mut Vec<Option<Meta>>, &mut [i32; 16]),
) -> ggml::Result<()> {
    let mut dst = Meta::of(t);
    let mut src = srcs_of(t);
    let mut params = t.op_params();
    edit(&mut dst, &mut src, &mut params);
    let node = NodeMeta {
        dst,
        view_offs: t.view_src().map(|_| t.view_offs()),
        src: &src,
        op_params: &params,
    };
    t.op().validate(&node)
}

fn validate(t: &Tensor) -> ggml::Result<()> {
    validate_edited(t, |_, _, _| {})
}

#[test]
fn nodes_made_by_builders_validate() {
    let ctx = Context::init(1 << 20, true).unwrap();
    let a = ctx.new_tensor_2d(Type::F32, 8, 6).unwrap();
    let b = ctx.new_tensor_2d(Type::F32, 8, 1).unwrap();
    let w = ctx.new_tensor_2d(Type::Q8_0, 32, 4).unwrap();
    let x = ctx.new_tensor_2d(Type::F32, 32, 3).unwrap();
    let idx = ctx.new_tensor_1d(Type::I32, 2).unwrap();
    let h = ctx.new_tensor_2d(Type::F16, 8, 6).unwrap();
    let nodes = vec![
        ctx.add(&a, &b).unwrap(),
        ctx.mul_inplace(&a, &b).unwrap(),
        ctx.relu(&a).unwrap(),
        ctx.scale_bias(&a, 2.0, 1.0).unwrap(),
        ctx.sum_rows(&a).unwrap(),
        ctx.argmax(&a).unwrap(),
        ctx.rms_norm(&a, 1e-6).unwrap(),
        ctx.soft_max_ext(&a, Some(&h), 0.5, 0.0).unwrap(),
        ctx.mul_mat(&w, &x).unwrap(),
        ctx.get_rows(&a, &idx).unwrap(),
        ctx.repeat(&b, &a).unwrap(),
        ctx.concat(&a, &b, 1).unwrap(),
        ctx.cpy(&a, &h).unwrap(),
        ctx.cont_2d(&ctx.transpose(&a).unwrap(), 12, 4).unwrap(),
        ctx.transpose(&a).unwrap(),
        ctx.permute(&a, 1, 0, 2, 3).unwrap(),
        ctx.reshape_2d(&a, 4, 12).unwrap(),
        ctx.view_2d(&a, 4, 3, 32, 16).unwrap(),
        ctx.dup(&a).unwrap(),
    ];
    for n in &nodes {
        validate(n).unwrap_or_else(|e| panic!("{} refused: {e}", n.op().name()));
    }
}

#[test]
fn tampered_nodes_are_refused() {
    let ctx = Context::init(1 << 20, true).unwrap();
    let a = ctx.new_tensor_2d(Type::F32, 8, 6).unwrap();
    let b = ctx.new_tensor_2d(Type::F32, 8, 1).unwrap();
    let sum = ctx.add(&a, &b).unwrap();
    let wrong_shape = validate_edited(&sum, |d, _, _| {
        *d = Meta::contiguous(Type::F32, [8, 5, 1, 1, 1])
    });
    assert!(wrong_shape.unwrap_err().to_string().contains("ADD"));
    let wrong_type = validate_edited(&sum, |d, _, _| *d = Meta::contiguous(Type::F16, d.ne));
    assert!(wrong_type.is_err());
    // b no longer tiles a
    let e = validate_edited(&sum, |_, s, _| {
        s[1] = Some(Meta::contiguous(Type::F32, [3, 1, 1, 1, 1]))
    })
    .unwrap_err();
    assert!(e.to_string().contains("broadcast"), "{e}");
    // a required operand missing, or one slot too many
    let e = validate_edited(&sum, |_, s, _| s[1] = None).unwrap_err();
    assert!(e.to_string().contains("required"), "{e}");
    let e = validate_edited(&sum, |_, s, _| s.push(Some(Meta::of(&a)))).unwrap_err();
    assert!(e.to_string().contains("slots"), "{e}");
    // strides that are not the result's own layout
    let e = validate_edited(&sum, |d, _, _| d.nb[1] = 64).unwrap_err();
    assert!(e.to_string().contains("contiguous"), "{e}");
    // a unary sub-op id that does not exist
    let r = ctx.relu(&a).unwrap();
    let e = validate_edited(&r, |_, _, p| p[0] = 99).unwrap_err();
    assert!(e.to_string().contains("99"), "{e}");
    // a CPY whose result is not its destination's memory
    let h = ctx.new_tensor_2d(Type::F16, 8, 6).unwrap();
    let c = ctx.cpy(&a, &h).unwrap();
    let e = validate_edited(&c, |d, _, _| d.ty = Type::F32).unwrap_err();
    assert!(e.to_string().contains("view of operand 1"), "{e}");
    // an op this version cannot build
    let node = NodeMeta {
        dst: Meta::of(&a),
        view_offs: None,
        src: &[Some(Meta::of(&a))],
        op_params: &[0; 16],
    };
    assert!(Op::FlashAttnBack.validate(&node).is_err());
    assert_eq!(Op::Add.slots().len(), 2);
    assert!(Op::Add.has_inplace_form() && !Op::MulMat.has_inplace_form());
    assert!(Op::None.slots().len() <= MAX_SRC);
}

#[test]
fn typed_params_round_trip_through_op_params() {
    let ctx = Context::init(1 << 20, true).unwrap();
    let a = ctx.new_tensor_1d(Type::F32, 4).unwrap();
    let g = ctx.gelu(&a).unwrap();
    let p: UnaryParams = ggml::ops::read_params(&g.op_params());
    assert_eq!(p.op, UnaryOp::Gelu as i32);
    let s = ctx.scale_bias(&a, 0.25, -3.0).unwrap();
    assert_eq!(s.get_op_params_f32(0).unwrap(), 0.25);
    assert_eq!(s.get_op_params_f32(1).unwrap(), -3.0);
    assert!(s.get_op_params_i32(16).is_err());
    // setting a parameter is checked against the op's rule
    assert!(g.set_op_params_i32(0, 1234).is_err());
    g.set_op_params_i32(0, UnaryOp::Silu as i32).unwrap();
    assert_eq!(g.op_params()[0], UnaryOp::Silu as i32);
    let w = ctx.new_tensor_2d(Type::F32, 4, 2).unwrap();
    let m = ctx
        .mul_mat(&w, &ctx.new_tensor_2d(Type::F32, 4, 3).unwrap())
        .unwrap();
    m.mul_mat_set_prec(ggml::ops::Prec::F32).unwrap();
    assert_eq!(m.op_params()[0], 10);
    assert!(g.mul_mat_set_prec(ggml::ops::Prec::F32).is_err());
}

#[test]
fn builders_refuse_operand_types_no_device_computes() {
    let ctx = Context::init(1 << 20, true).unwrap();
    let w = ctx.new_tensor_2d(Type::Q4_0, 32, 4).unwrap();
    let x = ctx.new_tensor_2d(Type::F32, 32, 3).unwrap();
    // swapped operands: quantized activations
    let e = ctx.mul_mat(&x, &w).unwrap_err();
    assert!(e.to_string().contains("first operand"), "{e}");
    let i = ctx.new_tensor_2d(Type::I32, 32, 3).unwrap();
    assert!(ctx.mul_mat(&i, &x).is_err());
    assert!(ctx.mul_mat(&w, &i).is_err());
}
