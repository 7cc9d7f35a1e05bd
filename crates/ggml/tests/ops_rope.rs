//! ROPE: the builders' op parameters, node validation and errors (its values, every mode and
//! builder, are the conformance suite's, `ggml-conformance` family `rope`).

mod common;

use common::*;
use ggml::ops::{Meta, NodeMeta, RopeParams};
use ggml::{Context, Op, Tensor, Type};
use ggml::{ROPE_TYPE_MROPE, ROPE_TYPE_NEOX, ROPE_TYPE_NORMAL, ROPE_TYPE_VISION};

#[test]
#[allow(deprecated)]
fn rope_custom_is_rope_ext_without_factors() {
    let ctx = Context::init(1 << 20, true).unwrap();
    let a = ctx.new_tensor_3d(Type::F32, 8, 2, 3).unwrap();
    let b = ctx.new_tensor_1d(Type::I32, 3).unwrap();
    let args = (8, ROPE_TYPE_NEOX, 4096, 1e4, 0.5, 1.0, 1.0, 32.0, 1.0);
    let x = ctx
        .rope_custom(
            &a, &b, args.0, args.1, args.2, args.3, args.4, args.5, args.6, args.7, args.8,
        )
        .unwrap();
    let y = ctx
        .rope_ext(
            &a, &b, None, args.0, args.1, args.2, args.3, args.4, args.5, args.6, args.7, args.8,
        )
        .unwrap();
    assert_eq!(x.op_params(), y.op_params());
    let xi = ctx
        .rope_custom_inplace(
            &a, &b, args.0, args.1, args.2, args.3, args.4, args.5, args.6, args.7, args.8,
        )
        .unwrap();
    assert_aliases(&xi, &a);
}

#[test]
fn op_params_have_ggml_layout() {
    let ctx = Context::init(1 << 20, true).unwrap();
    let a = ctx.new_tensor_3d(Type::F32, 16, 2, 3).unwrap();
    let b = ctx.new_tensor_1d(Type::I32, 12).unwrap();
    let r = ctx
        .rope_multi(
            &a,
            &b,
            None,
            12,
            [4, 2, 2, 0],
            ROPE_TYPE_MROPE,
            2048,
            1e6,
            0.5,
            0.25,
            0.9,
            32.0,
            1.0,
        )
        .unwrap();
    let p = r.op_params();
    assert_eq!(&p[..5], &[0, 12, 8, 0, 2048]);
    let f: Vec<f32> = p[5..11].iter().map(|&x| f32::from_bits(x as u32)).collect();
    assert_eq!(f, [1e6, 0.5, 0.25, 0.9, 32.0, 1.0]);
    assert_eq!(&p[11..16], &[4, 2, 2, 0, 0]);
    let typed: RopeParams = ggml::ops::read_params(&p);
    assert_eq!(typed.sections, [4, 2, 2, 0]);
    r.rope_set_offset(2).unwrap();
    assert_eq!(r.op_params()[15], 2);
    // Sections are stored only for the multi-section modes (as GGML).
    let a2 = ctx.new_tensor_3d(Type::F32, 16, 2, 3).unwrap();
    let b2 = ctx.new_tensor_1d(Type::I32, 3).unwrap();
    let r2 = ctx
        .rope_multi(
            &a2,
            &b2,
            None,
            16,
            [4, 2, 2, 0],
            ROPE_TYPE_NEOX,
            0,
            1e4,
            1.0,
            0.0,
            1.0,
            0.0,
            0.0,
        )
        .unwrap();
    assert_eq!(&r2.op_params()[11..15], &[0; 4]);
    // The correction dimensions GGML computes for llama's YaRN defaults.
    let d = ggml::rope_yarn_corr_dims(128, 4096, 10000.0, 32.0, 1.0);
    assert_eq!(d, [20.0, 46.0]);
    let d = ggml::rope_yarn_corr_dims(64, 0, 10000.0, 1.0, 1.0);
    assert_eq!(d[0], 0.0);
    assert_eq!(d[1], f32::NEG_INFINITY);
}

#[test]
fn builder_nodes_validate() {
    let ctx = Context::init(1 << 20, true).unwrap();
    let a = ctx.new_tensor_3d(Type::F16, 16, 2, 3).unwrap();
    let b = ctx.new_tensor_1d(Type::I32, 3).unwrap();
    let b4 = ctx.new_tensor_1d(Type::I32, 12).unwrap();
    let f = ctx.new_tensor_1d(Type::F32, 8).unwrap();
    let nodes = [
        ctx.rope(&a, &b, 16, ROPE_TYPE_NORMAL).unwrap(),
        ctx.rope_inplace(&a, &b, 8, ROPE_TYPE_NEOX).unwrap(),
        ctx.rope_ext(&a, &b, Some(&f), 16, 2, 0, 1e4, 1.0, 0.0, 1.0, 0.0, 0.0)
            .unwrap(),
        ctx.rope_multi(
            &a,
            &b4,
            Some(&f),
            8,
            [4, 4, 0, 0],
            24,
            0,
            1e4,
            1.0,
            0.0,
            1.0,
            0.0,
            0.0,
        )
        .unwrap(),
    ];
    for n in &nodes {
        let src: Vec<Option<Meta>> = (0..n.n_src_slots())
            .map(|i| n.src(i).map(Meta::of))
            .collect();
        let params = n.op_params();
        let node = NodeMeta {
            dst: Meta::of(n),
            view_offs: n.view_src().map(|_| n.view_offs()),
            src: &src,
            op_params: &params,
        };
        Op::Rope.validate(&node).unwrap();
        // An odd n_dims received from outside is refused.
        let mut bad = params;
        bad[1] = 7;
        let node = NodeMeta {
            op_params: &bad,
            ..node
        };
        assert_err(Op::Rope.validate(&node), &["ROPE", "n_dims = 7"]);
    }
}

#[test]
fn bad_arguments_are_refused() {
    let ctx = Context::init(1 << 20, true).unwrap();
    let a = ctx.new_tensor_3d(Type::F32, 10, 2, 3).unwrap();
    let b = ctx.new_tensor_1d(Type::I32, 3).unwrap();
    let ext = |a: &Tensor, b: &Tensor, c: Option<&Tensor>, n_dims, mode| {
        ctx.rope_ext(a, b, c, n_dims, mode, 0, 1e4, 1.0, 0.0, 1.0, 0.0, 0.0)
    };
    assert_err(ext(&a, &b, None, 10, 1), &["ROPE", "mode = 1"]);
    assert_err(ext(&a, &b, None, 10, 4), &["ROPE", "mode = 4"]);
    assert_err(ext(&a, &b, None, 9, 0), &["n_dims = 9"]);
    assert_err(ext(&a, &b, None, 12, 0), &["n_dims = 12", "a.ne0 = 10"]);
    assert_err(ext(&a, &b, None, -2, 0), &["n_dims = -2"]);
    let b_f32 = ctx.new_tensor_1d(Type::F32, 3).unwrap();
    assert_err(ext(&a, &b_f32, None, 10, 0), &["ROPE", "b", "i32"]);
    let b_short = ctx.new_tensor_1d(Type::I32, 2).unwrap();
    assert_err(ext(&a, &b_short, None, 10, 0), &["b", "3 positions"]);
    let b_2d = ctx.new_tensor_2d(Type::I32, 3, 2).unwrap();
    assert_err(ext(&a, &b_2d, None, 10, 0), &["b", "vector"]);
    let c_f16 = ctx.new_tensor_1d(Type::F16, 5).unwrap();
    assert_err(ext(&a, &b, Some(&c_f16), 10, 0), &["c", "f32"]);
    let c_short = ctx.new_tensor_1d(Type::F32, 4).unwrap();
    assert_err(ext(&a, &b, Some(&c_short), 10, 0), &["c", "at least 5"]);
    let ai = ctx.new_tensor_3d(Type::I32, 10, 2, 3).unwrap();
    assert_err(ext(&ai, &b, None, 10, 0), &["a", "f32 or f16"]);
    let at = ctx.transpose(&a).unwrap();
    let bt = ctx.new_tensor_1d(Type::I32, 3).unwrap();
    assert_err(ext(&at, &bt, None, 2, 0), &["a", "packed"]);
    let multi = |sections, mode, n_dims| {
        let b4 = ctx.new_tensor_1d(Type::I32, 12).unwrap();
        ctx.rope_multi(
            &a, &b4, None, n_dims, sections, mode, 0, 1e4, 1.0, 0.0, 1.0, 0.0, 0.0,
        )
    };
    assert_err(multi([0, 0, 0, 4], ROPE_TYPE_MROPE, 8), &["sections"]);
    assert_err(multi([-1, 4, 0, 0], ROPE_TYPE_MROPE, 8), &["sections"]);
    assert_err(
        multi([8, 4, 0, 0], ROPE_TYPE_MROPE, 8),
        &["sections", "a.ne0 = 10"],
    );
    assert_err(
        multi([2, 2, 0, 0], ROPE_TYPE_VISION, 4),
        &["VISION", "n_dims = 4"],
    );
    // mrope wants four positions per token
    assert_err(
        ctx.rope_multi(
            &a,
            &b,
            None,
            8,
            [2, 2, 0, 0],
            ROPE_TYPE_MROPE,
            0,
            1e4,
            1.0,
            0.0,
            1.0,
            0.0,
            0.0,
        ),
        &["b", "12 positions"],
    );
    // offsets: checked when set, the node keeps its old value
    let r = ext(&a, &b, None, 6, 0).unwrap();
    assert_err(r.rope_set_offset(3), &["n_offs = 3"]);
    assert_err(r.rope_set_offset(6), &["n_offs = 6"]);
    assert_err(r.rope_set_offset(-2), &["n_offs = -2"]);
    r.rope_set_offset(4).unwrap();
    assert_eq!(r.op_params()[15], 4);
    let sum = ctx.add(&a, &a).unwrap();
    assert_err(sum.rope_set_offset(2), &["rope_set_offset", "ADD"]);
    let v = ctx.new_tensor_3d(Type::F32, 8, 2, 3).unwrap();
    let b4 = ctx.new_tensor_1d(Type::I32, 12).unwrap();
    let rv = ctx
        .rope_multi(
            &v,
            &b4,
            None,
            4,
            [2, 2, 0, 0],
            ROPE_TYPE_VISION,
            0,
            1e4,
            1.0,
            0.0,
            1.0,
            0.0,
            0.0,
        )
        .unwrap();
    assert_err(rv.rope_set_offset(2), &["VISION"]);
}
