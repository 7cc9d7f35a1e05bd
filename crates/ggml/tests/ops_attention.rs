//! FLASH_ATTN_EXT and SOFT_MAX with attention sinks: node validation, op parameters and
//! errors (their values are the conformance suite's, `ggml-conformance` family `attention`).

mod common;

use common::*;
use ggml::ops::{Meta, NodeMeta, Prec};
use ggml::{Context, Op, Tensor, Type};

#[test]
fn flash_attn_node_validates() {
    let ctx = Context::init(1 << 20, true).unwrap();
    let q = ctx.new_tensor_4d(Type::F32, 16, 3, 4, 1).unwrap();
    let k = ctx.new_tensor_4d(Type::F16, 16, 9, 2, 1).unwrap();
    let v = ctx.new_tensor_4d(Type::F16, 8, 9, 2, 1).unwrap();
    let m = ctx.new_tensor_4d(Type::F16, 9, 4, 1, 1).unwrap();
    let s = ctx.new_tensor_1d(Type::F32, 4).unwrap();
    let fa = ctx
        .flash_attn_ext(&q, &k, &v, Some(&m), 0.25, 0.0, 0.0)
        .unwrap();
    assert_eq!(fa.ne(), [8, 4, 3, 1, 1]);
    let fa = ctx.flash_attn_ext_add_sinks(&fa, Some(&s)).unwrap();
    assert_eq!(fa.src(4), Some(&s));
    fa.flash_attn_ext_set_prec(Prec::F32).unwrap();
    let p = fa.op_params();
    assert_eq!(f32::from_bits(p[0] as u32), 0.25);
    assert_eq!(p[3], 10);
    let src: Vec<Option<Meta>> = (0..fa.n_src_slots())
        .map(|i| fa.src(i).map(Meta::of))
        .collect();
    let node = NodeMeta {
        dst: Meta::of(&fa),
        view_offs: None,
        src: &src,
        op_params: &p,
    };
    Op::FlashAttnExt.validate(&node).unwrap();
    let mut bad = p;
    bad[3] = 3;
    assert_err(
        Op::FlashAttnExt.validate(&NodeMeta {
            op_params: &bad,
            ..node
        }),
        &["FLASH_ATTN_EXT", "prec = 3"],
    );
    // Sinks go once; removing them gives the node without.
    assert_err(ctx.flash_attn_ext_add_sinks(&fa, Some(&s)), &["already"]);
    let none = ctx.flash_attn_ext_add_sinks(&fa, None).unwrap();
    assert!(none.src(4).is_none() && none.src(3).is_some());
    let sum = ctx.add(&q, &q).unwrap();
    assert_err(ctx.flash_attn_ext_add_sinks(&sum, Some(&s)), &["ADD"]);
    assert_err(sum.flash_attn_ext_set_prec(Prec::F32), &["ADD"]);
    assert_err(sum.flash_attn_ext_get_prec(), &["ADD"]);
}

#[test]
fn flash_attn_bad_arguments_are_refused() {
    let ctx = Context::init(1 << 20, true).unwrap();
    let t = |ty, ne: &[i64]| ctx.new_tensor(ty, ne).unwrap();
    let q = t(Type::F32, &[16, 3, 4, 2]);
    let k = t(Type::F16, &[16, 9, 2, 2]);
    let v = t(Type::F16, &[8, 9, 2, 2]);
    let fa = |q: &Tensor, k: &Tensor, v: &Tensor, m: Option<&Tensor>, mb: f32| {
        ctx.flash_attn_ext(q, k, v, m, 1.0, mb, 0.0)
    };
    fa(&q, &k, &v, None, 0.0).unwrap();
    assert_err(
        fa(&t(Type::F16, &[16, 3, 4, 2]), &k, &v, None, 0.0),
        &["q", "f32"],
    );
    assert_err(
        fa(&q, &t(Type::I32, &[16, 9, 2, 2]), &v, None, 0.0),
        &["k", "type"],
    );
    assert_err(
        fa(&q, &t(Type::F16, &[15, 9, 2, 2]), &v, None, 0.0),
        &["k", "k.ne0"],
    );
    assert_err(
        fa(&q, &t(Type::F16, &[16, 9, 3, 2]), &v, None, 0.0),
        &["k", "divide"],
    );
    assert_err(
        fa(&q, &t(Type::F16, &[16, 9, 2, 1]), &v, None, 0.0),
        &["k", "k.ne3"],
    );
    assert_err(
        fa(&q, &k, &t(Type::F16, &[8, 8, 2, 2]), None, 0.0),
        &["v", "v.ne1"],
    );
    assert_err(
        fa(&q, &k, &t(Type::F16, &[8, 9, 3, 2]), None, 0.0),
        &["v", "v.ne2"],
    );
    let kt = ctx.transpose(&t(Type::F16, &[9, 16, 2, 2])).unwrap();
    assert_err(fa(&q, &kt, &v, None, 0.0), &["k", "packed"]);
    assert_err(
        fa(&q, &k, &v, Some(&t(Type::F32, &[9, 3])), 0.0),
        &["mask", "f16"],
    );
    assert_err(
        fa(&q, &k, &v, Some(&t(Type::F16, &[8, 3])), 0.0),
        &["mask", "n_kv = 9"],
    );
    assert_err(
        fa(&q, &k, &v, Some(&t(Type::F16, &[9, 2])), 0.0),
        &["mask", "n_q = 3"],
    );
    assert_err(
        fa(&q, &k, &v, Some(&t(Type::F16, &[9, 3, 3])), 0.0),
        &["mask", "divide"],
    );
    assert_err(fa(&q, &k, &v, None, 8.0), &["max_bias = 8", "mask"]);
    assert_err(fa(&q, &k, &v, None, -1.0), &["max_bias = -1"]);
    assert_err(
        ctx.flash_attn_ext(&q, &k, &v, None, f32::NAN, 0.0, 0.0),
        &["scale = NaN"],
    );
    assert_err(
        ctx.flash_attn_ext(&q, &k, &v, None, 1.0, 0.0, f32::INFINITY),
        &["logit_softcap = inf"],
    );
    let q5 = t(Type::F32, &[16, 3, 4, 2, 2]);
    assert_err(fa(&q5, &k, &v, None, 0.0), &["q", "4 dimensions"]);
    let node = fa(&q, &k, &v, None, 0.0).unwrap();
    assert_err(
        ctx.flash_attn_ext_add_sinks(&node, Some(&t(Type::F32, &[3]))),
        &["sinks", "q.ne2 = 4"],
    );
    assert_err(
        ctx.flash_attn_ext_add_sinks(&node, Some(&t(Type::F16, &[4]))),
        &["sinks", "f32"],
    );
}

#[test]
fn soft_max_sinks_bad_arguments() {
    let ctx = Context::init(1 << 20, true).unwrap();
    let a = ctx.new_tensor_3d(Type::F32, 8, 4, 6).unwrap();
    let sm = ctx.soft_max(&a).unwrap();
    let s = ctx.new_tensor_1d(Type::F32, 6).unwrap();
    let with = ctx.soft_max_add_sinks(&sm, Some(&s)).unwrap();
    assert_eq!(with.src(2), Some(&s));
    assert!(with.src(1).is_none());
    assert_err(ctx.soft_max_add_sinks(&with, Some(&s)), &["already"]);
    assert_err(
        ctx.soft_max_add_sinks(&sm, Some(&ctx.new_tensor_1d(Type::F32, 5).unwrap())),
        &["SOFT_MAX", "sinks", "a.ne2 = 6"],
    );
    assert_err(
        ctx.soft_max_add_sinks(&sm, Some(&ctx.new_tensor_1d(Type::F16, 6).unwrap())),
        &["sinks", "f32"],
    );
    assert_err(ctx.soft_max_add_sinks(&a, Some(&s)), &["NONE"]);
    let src: Vec<Option<Meta>> = (0..3).map(|i| with.src(i).map(Meta::of)).collect();
    let p = with.op_params();
    Op::SoftMax
        .validate(&NodeMeta {
            dst: Meta::of(&with),
            view_offs: None,
            src: &src,
            op_params: &p,
        })
        .unwrap();
}
