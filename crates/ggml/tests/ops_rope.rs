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

/// ROPE_BACK (`rope_ext_back`) rotates by the opposite angles: for NORMAL and NEOX rows of
/// F32 and F16, with frequency factors, scaling and an offset span, the result matches an
/// f64 rotation by `−θ` (θ = position · freq_scale · base^(−2i/n_dims) / factor, cos and sin
/// times attn_factor); the node is ROPE_BACK with ROPE's op parameters.
#[test]
fn rope_ext_back_rotates_by_the_opposite_angles() {
    for ty in [Type::F32, Type::F16] {
        for mode in [ROPE_TYPE_NORMAL, ROPE_TYPE_NEOX] {
            let (ne0, n_dims, heads, tokens) = (10usize, 8usize, 3usize, 4usize);
            let (base, fs, af) = (10000f64, 0.5f64, 0.75f64);
            let name = format!("rope_ext_back {ty} mode {mode}");
            let tol = if ty == Type::F16 { 1e-5 } else { 1e-10 };
            check(&name, tol, |ctx, rng| {
                let (a, ha) = input(
                    ctx,
                    ty,
                    &[ne0 as i64, heads as i64, tokens as i64],
                    Layout::Contiguous,
                    rng,
                    -1.0,
                    1.0,
                )?;
                let pos = [3i32, 0, 17, 250];
                let b = ctx.new_tensor_1d(Type::I32, tokens as i64)?;
                let ff = [1.0f32, 2.0, 0.5, 4.0];
                let c = ctx.new_tensor_1d(Type::F32, 4)?;
                let fwd = ctx.rope_ext(
                    &a,
                    &b,
                    Some(&c),
                    n_dims as i32,
                    mode,
                    0,
                    base as f32,
                    fs as f32,
                    0.0,
                    af as f32,
                    1.0,
                    1.0,
                )?;
                let out = ctx.rope_ext_back(
                    &a,
                    &b,
                    Some(&c),
                    n_dims as i32,
                    mode,
                    0,
                    base as f32,
                    fs as f32,
                    0.0,
                    af as f32,
                    1.0,
                    1.0,
                )?;
                assert_eq!(out.op(), Op::RopeBack);
                assert_eq!(out.op_params(), fwd.op_params());
                b.set_bytes(
                    &pos.iter().flat_map(|p| p.to_le_bytes()).collect::<Vec<_>>(),
                    0,
                )?;
                c.set_f32(&ff)?;
                let want = ha.map_rows(ne0, |r, x| {
                    let mut y = x.to_vec();
                    let p = pos[r[1]] as f64;
                    for (i, &f) in ff.iter().enumerate().take(n_dims / 2) {
                        let theta = p * fs * base.powf(-2.0 * i as f64 / n_dims as f64) / f as f64;
                        let (c, s) = (theta.cos() * af, -theta.sin() * af);
                        let (j0, j1) = if mode == ROPE_TYPE_NORMAL {
                            (2 * i, 2 * i + 1)
                        } else {
                            (i, i + n_dims / 2)
                        };
                        y[j0] = x[j0] * c - x[j1] * s;
                        y[j1] = x[j0] * s + x[j1] * c;
                    }
                    y
                });
                Ok((out, want))
            });
        }
    }
}

/// ROPE_BACK of the multi-section modes (`rope_multi_back`, MROPE and VISION) undoes ROPE:
/// rotating back what `rope_multi` rotated gives the input again (within f32 rounding).
#[test]
fn rope_multi_back_undoes_rope_multi() {
    for (mode, n_dims) in [(ROPE_TYPE_MROPE, 8), (ROPE_TYPE_VISION, 6)] {
        let name = format!("rope_multi_back mode {mode}");
        check(&name, 1e-10, |ctx, rng| {
            let (a, ha) = input(
                ctx,
                Type::F32,
                &[12, 2, 3],
                Layout::Contiguous,
                rng,
                -1.0,
                1.0,
            )?;
            let b = ctx.new_tensor_1d(Type::I32, 12)?;
            let pos: Vec<u8> = (0..12i32)
                .flat_map(|i| (i * 7 % 19).to_le_bytes())
                .collect();
            b.set_bytes(&pos, 0)?;
            let sections = [2, 1, 1, 0];
            let fwd = ctx.rope_multi(
                &a, &b, None, n_dims, sections, mode, 0, 1e4, 1.0, 0.0, 1.0, 0.0, 0.0,
            )?;
            let back = ctx.rope_multi_back(
                &fwd, &b, None, n_dims, sections, mode, 0, 1e4, 1.0, 0.0, 1.0, 0.0, 0.0,
            )?;
            assert_eq!(back.op(), Op::RopeBack);
            Ok((back, ha))
        });
    }
}
