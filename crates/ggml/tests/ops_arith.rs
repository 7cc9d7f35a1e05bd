//! Arithmetic, windows, masks, padding and generators: what the conformance suite's value cases
//! (`crates/ggml-conformance/src/cases/arith.rs`) do not cover — out-of-range ids (a compute error), GGML's NaN
//! handling of CLAMP, every shape-rule refusal, and `Op::validate` on built nodes.

mod common;

use common::{assert_err, input_values};
use ggml::ops::{Meta, NodeMeta, TriType};
use ggml::{Context, Tensor, Type};

#[test]
fn add_id_out_of_range_fails_the_compute_naming_the_id() {
    let ctx = Context::init(1 << 20, false).unwrap();
    let (a, _) = input_values(&ctx, Type::F32, &[2, 2, 1], &[1.0, 2.0, 3.0, 4.0]).unwrap();
    let (b, _) = input_values(&ctx, Type::F32, &[2, 1], &[10.0, 20.0]).unwrap();
    let (ids, _) = input_values(&ctx, Type::I32, &[2, 1], &[0.0, 5.0]).unwrap();
    let out = ctx.add_id(&a, &b, &ids).unwrap();
    let cpu = ggml::backend::cpu_init().unwrap();
    let r = cpu.graph_compute(&ctx.build_forward_expand(&out).unwrap());
    assert_err(r, &["ADD_ID", "src2 index 5 at [1, 0, 0] is outside 0..1"]);
    // The rows with a valid id were still computed; the bad one reads nothing outside `b`.
    let v = out.get_f32().unwrap();
    assert_eq!(&v[..2], &[11.0, 22.0]);
}

#[test]
fn clamp_maps_nan_to_max_as_ggml() {
    let ctx = Context::init(1 << 20, false).unwrap();
    let (a, _) = input_values(&ctx, Type::F32, &[3], &[f64::NAN, -9.0, 9.0]).unwrap();
    let out = ctx.clamp(&a, -1.0, 2.0).unwrap();
    let cpu = ggml::backend::cpu_init().unwrap();
    cpu.graph_compute(&ctx.build_forward_expand(&out).unwrap())
        .unwrap();
    assert_eq!(out.get_f32().unwrap(), vec![2.0, -1.0, 2.0]);
}

/// The node's own description as `Op::validate` would receive it from outside.
fn validates(t: &Tensor) {
    let src: Vec<Option<Meta>> = (0..t.n_src_slots())
        .map(|i| t.src(i).map(Meta::of))
        .collect();
    let params = t.op_params();
    let node = NodeMeta {
        dst: Meta::of(t),
        view_offs: t.view_src().map(|_| t.view_offs()),
        src: &src,
        op_params: &params,
    };
    t.op()
        .validate(&node)
        .unwrap_or_else(|e| panic!("{} refused: {e}", t.op().name()));
}

#[test]
fn built_nodes_validate() {
    let ctx = Context::init(1 << 20, true).unwrap();
    let a = ctx.new_tensor_3d(Type::F32, 8, 6, 2).unwrap();
    let v = ctx.new_tensor_1d(Type::F32, 8).unwrap();
    let b = ctx.new_tensor_2d(Type::F32, 8, 3).unwrap();
    let ids = ctx.new_tensor_2d(Type::I32, 6, 2).unwrap();
    let w = ctx.new_tensor_2d(Type::F32, 4, 2).unwrap();
    let sq = ctx.new_tensor_2d(Type::F32, 6, 6).unwrap();
    let nb = a.nb();
    for t in [
        ctx.repeat_back(&a, &ctx.new_tensor_3d(Type::F32, 4, 3, 1).unwrap())
            .unwrap(),
        ctx.add_id(&a, &b, &ids).unwrap(),
        ctx.acc(&a, &w, nb[1], nb[2], nb[3], 16).unwrap(),
        ctx.set_inplace(&a, &w, nb[1], nb[2], nb[3], 0).unwrap(),
        ctx.diag(&ctx.new_tensor_2d(Type::F32, 5, 1).unwrap())
            .unwrap(),
        ctx.diag_mask_inf(&a, 1).unwrap(),
        ctx.diag_mask_zero_inplace(&a, 0).unwrap(),
        ctx.clamp(&a, -1.0, 1.0).unwrap(),
        ctx.leaky_relu(&a, 0.2, true).unwrap(),
        ctx.pad_ext(&a, 1, 2, 0, 1, 0, 0, 0, 0).unwrap(),
        ctx.pad_reflect_1d(&a, 2, 3).unwrap(),
        ctx.roll(&a, 1, -2, 1, 0).unwrap(),
        ctx.arange(0.0, 5.0, 0.5).unwrap(),
        ctx.timestep_embedding(&v, 9, 1000).unwrap(),
        ctx.tri(&sq, TriType::Lower).unwrap(),
        ctx.fill(&a, 3.0).unwrap(),
        ctx.cross_entropy_loss(&a, &a).unwrap(),
    ] {
        validates(&t);
    }
}

#[test]
fn shape_rules_refuse_bad_input() {
    let ctx = Context::init(1 << 20, true).unwrap();
    let a = ctx.new_tensor_3d(Type::F32, 8, 6, 2).unwrap();
    let h = ctx.new_tensor_3d(Type::F16, 8, 6, 2).unwrap();
    let b = ctx.new_tensor_2d(Type::F32, 8, 3).unwrap();
    let ids = ctx.new_tensor_2d(Type::I32, 6, 2).unwrap();
    let fids = ctx.new_tensor_2d(Type::F32, 6, 2).unwrap();
    let w = ctx.new_tensor_2d(Type::F32, 4, 2).unwrap();
    let nb = a.nb();
    assert_err(ctx.add_id(&a, &b, &fids), &["ADD_ID", "ids", "i32"]);
    assert_err(
        ctx.repeat_back(&a, &ctx.new_tensor_1d(Type::F32, 3).unwrap()),
        &["REPEAT_BACK", "tiling"],
    );
    assert_err(
        ctx.add_id(&a, &ctx.new_tensor_2d(Type::F32, 7, 3).unwrap(), &ids),
        &["ADD_ID", "8 elements"],
    );
    // the window must lie inside a: offset past the end, strides reaching past it
    assert_err(
        ctx.acc(&a, &w, nb[1], nb[2], nb[3], a.nbytes()),
        &["ACC", "past the end"],
    );
    assert_err(
        ctx.set(&a, &w, 1 << 20, nb[2], nb[3], 0),
        &["SET", "past the end"],
    );
    assert_err(ctx.acc(&h, &w, nb[1], nb[2], nb[3], 0), &["ACC", "f32"]);
    assert_err(
        ctx.set(
            &a,
            &ctx.new_tensor_1d(Type::I32, 2).unwrap(),
            nb[1],
            nb[2],
            nb[3],
            0,
        ),
        &["SET", "type"],
    );
    assert_err(
        ctx.acc(&a, &w, usize::MAX, nb[2], nb[3], 0),
        &["ACC", "nb1", "i32"],
    );
    assert_err(ctx.diag(&a), &["DIAG", "ne1"]);
    assert_err(ctx.diag_mask_inf(&a, -1), &["DIAG_MASK_INF", "n_past = -1"]);
    assert_err(
        ctx.clamp(&ctx.new_tensor_1d(Type::I32, 3).unwrap(), 0.0, 1.0),
        &["CLAMP", "type"],
    );
    assert_err(ctx.pad(&a, -1, 0, 0, 0), &["PAD", "negative"]);
    assert_err(ctx.pad(&h, 1, 0, 0, 0), &["PAD", "f32"]);
    assert_err(ctx.pad_reflect_1d(&a, 8, 0), &["PAD_REFLECT_1D", "p0 = 8"]);
    assert_err(
        ctx.pad_reflect_1d(&a, 0, -1),
        &["PAD_REFLECT_1D", "p1 = -1"],
    );
    assert_err(ctx.roll(&a, 8, 0, 0, 0), &["ROLL", "shift0 = 8"]);
    assert_err(ctx.arange(1.0, 0.0, 1.0), &["ARANGE", "stop > start"]);
    assert_err(ctx.arange(0.0, 1.0, 0.0), &["ARANGE", "step > 0"]);
    assert_err(ctx.arange(0.0, f32::INFINITY, 1.0), &["ARANGE", "finite"]);
    assert_err(
        ctx.timestep_embedding(&a, 8, 100),
        &["TIMESTEP_EMBEDDING", "vector"],
    );
    assert_err(ctx.timestep_embedding(&w, 8, 0), &["TIMESTEP_EMBEDDING"]);
    assert_err(ctx.tri(&a, TriType::Lower), &["TRI", "square"]);
    assert_err(
        ctx.fill(&ctx.transpose(&a).unwrap(), 1.0),
        &["FILL", "contiguous"],
    );
    assert_err(
        ctx.cross_entropy_loss(&a, &b),
        &["CROSS_ENTROPY_LOSS", "shape"],
    );
    // the in-place forms keep the operand's layout and refuse what the plain forms refuse
    assert_err(
        ctx.leaky_relu(&ctx.new_tensor_1d(Type::BF16, 4).unwrap(), 0.1, true),
        &["LEAKY_RELU"],
    );
}
