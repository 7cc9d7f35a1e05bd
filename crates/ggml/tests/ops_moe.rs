//! MUL_MAT_ID (mixture of experts) and OUT_PROD against plain f64 sums over logical indices,
//! with float and quantized weights (the reference uses the dequantized weights), broadcast
//! activations, strided inputs and out-of-range expert ids.

mod common;

use common::nodes::assert_valid;
use common::*;
use ggml::{quants, Context, Tensor, Type};

/// A contiguous tensor of `ty` (float or quantized) with random values in [-1, 1), and its
/// values as stored (dequantized for quantized types).
fn weights(
    ctx: &Context,
    ty: Type,
    ne: &[i64],
    layout: Layout,
    rng: &mut Rng,
) -> ggml::Result<(Tensor, Host)> {
    if !ty.is_quantized() {
        return input(ctx, ty, ne, layout, rng, -1.0, 1.0);
    }
    assert_eq!(
        layout,
        Layout::Contiguous,
        "quantized weights are contiguous here"
    );
    let t = ctx.new_tensor(ty, ne)?;
    let k = ne[0] as usize;
    let rows = t.nrows() as usize;
    let src: Vec<f32> = (0..k * rows)
        .map(|_| rng.uniform(-1.0, 1.0) as f32)
        .collect();
    let imatrix: Vec<f32> = (0..k).map(|i| 1.0 + (i % 5) as f32 * 0.2).collect();
    let mut bytes = vec![0u8; t.nbytes()];
    quants::quantize_chunk(ty, &src, &mut bytes, 0, rows, k, Some(&imatrix))?;
    t.set_bytes(&bytes, 0)?;
    let mut deq = vec![0f32; k * rows];
    quants::dequantize_row(ty, &bytes, &mut deq)?;
    let host = Host {
        ne: shape(ne),
        v: deq.iter().map(|&v| v as f64).collect(),
    };
    Ok((t, host))
}

/// Every quantized type this library both quantizes and dequantizes.
fn quantized_types() -> Vec<Type> {
    Type::ALL
        .into_iter()
        .filter(|t| t.is_quantized() && quants::has_to_float(*t) && quants::has_quantizer(*t))
        .collect()
}

/// `out[i, e, t] = Σₖ w[k, i, ids[e, t]]·b[k, e mod n_b, t]`; zero for an id outside the
/// experts.
fn mul_mat_id_ref(w: &Host, b: &Host, ids: &Host) -> Host {
    let ne = [w.ne[1], ids.ne[0], b.ne[2], 1, 1];
    Host::from_fn(ne, |i| {
        let id = ids.at([i[1], i[2], 0, 0, 0]);
        if id < 0.0 || id >= w.ne[2] as f64 {
            return 0.0;
        }
        let x = id as usize;
        (0..w.ne[0])
            .map(|k| w.at([k, i[0], x, 0, 0]) * b.at([k, i[1] % b.ne[1], i[2], 0, 0]))
            .sum()
    })
}

/// One MUL_MAT_ID case: `n_expert` experts `[k, m]` of `wty`, `b` `[k, n_b, tokens]`,
/// ids `[n_used, tokens]` drawn from `lo..=hi` (values outside `0..n_expert` select nothing).
#[allow(clippy::too_many_arguments)]
fn mul_mat_id_case(
    wty: Type,
    bty: Type,
    (k, m, n_expert): (i64, i64, i64),
    (n_used, n_b, tokens): (i64, i64, i64),
    (lo, hi): (i64, i64),
    wl: Layout,
    bl: Layout,
    il: Layout,
) {
    let name = format!(
        "MUL_MAT_ID(type_a={wty},type_b={bty},k={k},m={m},n_expert={n_expert},n_used={n_used},\
         n_b={n_b},tokens={tokens},ids={lo}..={hi},layouts={wl:?}/{bl:?}/{il:?})"
    );
    check(&name, TOL_MATMUL, |ctx, rng| {
        let (w, hw) = weights(ctx, wty, &[k, m, n_expert], wl, rng)?;
        let (b, hb) = input(ctx, bty, &[k, n_b, tokens], bl, rng, -1.0, 1.0)?;
        let (ids, hi_) = input_with(ctx, Type::I32, &[n_used, tokens], il, |_| {
            rng.range(lo, hi) as f64
        })?;
        let out = ctx.mul_mat_id(&w, &b, &ids)?;
        Ok((out, mul_mat_id_ref(&hw, &hb, &hi_)))
    });
}

#[test]
fn mul_mat_id_float_weights_layouts_broadcast() {
    for wty in FLOATS {
        for bty in FLOATS {
            for n_b in [2, 1] {
                mul_mat_id_case(
                    wty,
                    bty,
                    (33, 5, 4),
                    (2, n_b, 3),
                    (0, 3),
                    Layout::Contiguous,
                    Layout::Contiguous,
                    Layout::Contiguous,
                );
            }
        }
    }
    // Strided weights (padded rows and planes), permuted activations, transposed ids.
    for (wl, bl, il) in [
        (
            Layout::Padded,
            Layout::Permuted([1, 0, 2, 3]),
            Layout::Transposed,
        ),
        (Layout::Contiguous, Layout::Padded, Layout::Contiguous),
        (
            Layout::Padded,
            Layout::Permuted([2, 0, 1, 3]),
            Layout::Padded,
        ),
    ] {
        mul_mat_id_case(
            Type::F32,
            Type::F32,
            (20, 7, 3),
            (4, 4, 5),
            (0, 2),
            wl,
            bl,
            il,
        );
    }
    // Many tokens and experts: more pairs per expert than one block of rows.
    mul_mat_id_case(
        Type::F16,
        Type::F32,
        (64, 9, 8),
        (4, 1, 19),
        (0, 7),
        Layout::Contiguous,
        Layout::Contiguous,
        Layout::Contiguous,
    );
}

#[test]
fn mul_mat_id_quantized_weights() {
    let types = quantized_types();
    assert!(types.len() >= 25, "only {} quantized types", types.len());
    for wty in types {
        let k = 2 * wty.blck_size() as i64;
        mul_mat_id_case(
            wty,
            Type::F32,
            (k, 3, 3),
            (2, 2, 3),
            (0, 2),
            Layout::Contiguous,
            Layout::Contiguous,
            Layout::Contiguous,
        );
    }
}

#[test]
fn mul_mat_id_out_of_range_ids_give_zero_rows() {
    for (lo, hi) in [(-3, 5), (4, 9), (-1, -1)] {
        mul_mat_id_case(
            Type::F32,
            Type::F32,
            (16, 6, 4),
            (3, 3, 4),
            (lo, hi),
            Layout::Contiguous,
            Layout::Contiguous,
            Layout::Contiguous,
        );
    }
}

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

/// `out[i, j, …] = Σₖ a[i, k, …/r]·b[j, k, …]`.
fn out_prod_ref(a: &Host, b: &Host) -> Host {
    let ne = [a.ne[0], b.ne[0], b.ne[2], b.ne[3], b.ne[4]];
    Host::from_fn(ne, |i| {
        let r: Vec<usize> = (2..DIMS).map(|d| i[d] / (b.ne[d] / a.ne[d])).collect();
        (0..a.ne[1])
            .map(|k| a.at([i[0], k, r[0], r[1], r[2]]) * b.at([i[1], k, i[2], i[3], i[4]]))
            .sum()
    })
}

fn out_prod_case(aty: Type, bty: Type, ane: &[i64], bne: &[i64], al: Layout, bl: Layout) {
    let name = format!(
        "OUT_PROD(type_a={aty},type_b={bty},ne_a={ane:?},ne_b={bne:?},layouts={al:?}/{bl:?})"
    );
    check(&name, TOL_MATMUL, |ctx, rng| {
        let (a, ha) = weights(ctx, aty, ane, al, rng)?;
        let (b, hb) = input(ctx, bty, bne, bl, rng, -1.0, 1.0)?;
        Ok((ctx.out_prod(&a, &b)?, out_prod_ref(&ha, &hb)))
    });
}

#[test]
fn out_prod_types_layouts_broadcast() {
    for aty in FLOATS {
        for bty in FLOATS {
            out_prod_case(
                aty,
                bty,
                &[7, 5, 2],
                &[4, 5, 4, 3],
                Layout::Contiguous,
                Layout::Contiguous,
            );
        }
    }
    for al in [
        Layout::Contiguous,
        Layout::Padded,
        Layout::Permuted([0, 2, 1, 3]),
    ] {
        for bl in LAYOUTS {
            out_prod_case(Type::F32, Type::F32, &[6, 9, 2, 1], &[5, 9, 2, 2], al, bl);
        }
    }
    // 5-D broadcasting, a single k, a long k.
    out_prod_case(
        Type::F32,
        Type::F32,
        &[3, 4, 1, 2, 1],
        &[2, 4, 3, 2, 2],
        Layout::Contiguous,
        Layout::Contiguous,
    );
    out_prod_case(
        Type::F32,
        Type::F32,
        &[8, 1],
        &[5, 1],
        Layout::Contiguous,
        Layout::Transposed,
    );
    out_prod_case(
        Type::F16,
        Type::F32,
        &[16, 300],
        &[3, 300],
        Layout::Contiguous,
        Layout::Contiguous,
    );
}

#[test]
fn out_prod_quantized_a() {
    for aty in [Type::Q4_0, Type::Q8_0, Type::Q4_K, Type::Q6_K, Type::IQ4_NL] {
        let m = 2 * aty.blck_size() as i64;
        out_prod_case(
            aty,
            Type::F32,
            &[m, 5, 2],
            &[3, 5, 2],
            Layout::Contiguous,
            Layout::Contiguous,
        );
        out_prod_case(
            aty,
            Type::F32,
            &[m, 4, 1, 2],
            &[3, 4, 3, 2],
            Layout::Contiguous,
            Layout::Transposed,
        );
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
