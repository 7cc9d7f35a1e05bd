//! MUL_MAT_ID and OUT_PROD: shape rules and errors, float experts against an f64 reference
//! (experts routed 0, 1, 4 and 40 pairs: the dot products and the packed GEMM), and quantized
//! experts against MUL_MAT bit for bit (more values against references, out-of-range expert
//! ids included, are the conformance suite's, `ggml-conformance` family `moe`).

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

/// Quantized experts are multiplied in their blocks with the activations quantized, as GGML's
/// CPU does for MUL_MAT_ID: every output is bit for bit what MUL_MAT gives the same expert
/// matrix against that one activation row (GGML's `vec_dot` for one column, both ways), on
/// every thread count, for each type with a dot kernel, broadcast activations included.
#[test]
fn quantized_experts_give_mul_mats_bits_for_one_column() {
    use ggml::quants::quantize_chunk;
    let types = [
        Type::Q4_0,
        Type::Q4_1,
        Type::Q5_0,
        Type::Q5_1,
        Type::Q8_0,
        Type::Q2_K,
        Type::Q3_K,
        Type::Q4_K,
        Type::Q5_K,
        Type::Q6_K,
        Type::IQ4_NL,
        Type::IQ4_XS,
    ];
    let (k, m, n_expert, n_used, tokens) = (512i64, 37i64, 4i64, 3i64, 7i64);
    for ty in types {
        for n_b in [n_used, 1] {
            for (threads, be) in backends() {
                let ctx = Context::init(8 << 20, false).unwrap();
                let w = ctx.new_tensor_3d(ty, k, m, n_expert).unwrap();
                let rows = (m * n_expert) as usize;
                let vals = values(k as usize * rows, ty as u64);
                let mut bytes = vec![0u8; w.nbytes()];
                quantize_chunk(ty, &vals, &mut bytes, 0, rows, k as usize, None).unwrap();
                w.set_bytes(&bytes, 0).unwrap();
                let b = ctx.new_tensor_3d(Type::F32, k, n_b, tokens).unwrap();
                b.set_f32(&values((k * n_b * tokens) as usize, 5)).unwrap();
                let ids = ctx.new_tensor_2d(Type::I32, n_used, tokens).unwrap();
                let picks: Vec<i32> = (0..n_used * tokens)
                    .map(|j| ((j * 5 + j / n_used) % n_expert) as i32)
                    .collect();
                ids.set_i32(&picks).unwrap();
                let out = ctx.mul_mat_id(&w, &b, &ids).unwrap();
                let graph = ctx.build_forward_expand(&out).unwrap();
                // each pair's product by MUL_MAT: its expert's matrix and its activation row
                let mut singles = Vec::new();
                for (j, &x) in picks.iter().enumerate() {
                    let (e, t) = (j as i64 % n_used, j as i64 / n_used);
                    let wx = ctx
                        .view_2d(&w, k, m, w.nb()[1], x as usize * w.nb()[2])
                        .unwrap();
                    let off = (e % n_b) as usize * b.nb()[1] + t as usize * b.nb()[2];
                    let bx = ctx.view_2d(&b, k, 1, b.nb()[1], off).unwrap();
                    let y = ctx.mul_mat(&wx, &bx).unwrap();
                    graph.build_forward_expand(&y).unwrap();
                    singles.push(y);
                }
                be.graph_compute(&graph).unwrap();
                let got = out.get_f32().unwrap();
                for (j, y) in singles.iter().enumerate() {
                    let want = y.get_f32().unwrap();
                    let row = &got[j * m as usize..][..m as usize];
                    assert!(
                        row.iter()
                            .zip(&want)
                            .all(|(a, b)| a.to_bits() == b.to_bits()),
                        "{ty}, n_b {n_b}, {threads} threads: pair {j} (expert {}) differs \
                         from MUL_MAT: {row:?} vs {want:?}",
                        picks[j]
                    );
                }
            }
        }
    }
}

/// Float experts (F32, F16, BF16) against an f64 reference with `b` rounded to the weights'
/// type (as GGML converts it): five experts routed 0, 1, 4, 0 and 40 pairs (below the GEMM's
/// 5 columns the dot products, from there the packed GEMM), K = 300 (past one slice of the
/// GEMM's shared dimension), 53 rows (partial tiles, and bands of different lengths among 2
/// and 3 threads), `b` one row per slot and broadcast, packed and padded; 1, 2 and 3 threads
/// give the same bits.
#[test]
fn float_experts_against_f64() {
    let (k, m, n_expert, n_used, tokens) = (300i64, 53i64, 5i64, 3i64, 15i64);
    let picks: Vec<f64> = (0..n_used * tokens)
        .map(|j| match j {
            0 => 1.0,
            1..=4 => 2.0,
            _ => 4.0,
        })
        .collect();
    for wt in [Type::F32, Type::F16, Type::BF16] {
        for n_b in [n_used, 1] {
            for lb in [Layout::Contiguous, Layout::Padded] {
                let name = format!("MUL_MAT_ID(type_a={wt},n_b={n_b},layout={lb:?})");
                let picks = picks.clone();
                check(&name, 1e-7, move |ctx, rng| {
                    let (w, hw) = input(
                        ctx,
                        wt,
                        &[k, m, n_expert],
                        Layout::Contiguous,
                        rng,
                        -1.0,
                        1.0,
                    )?;
                    let (b, hb) = input(ctx, Type::F32, &[k, n_b, tokens], lb, rng, -1.0, 1.0)?;
                    let (ids, _) = input_values(ctx, Type::I32, &[n_used, tokens], &picks)?;
                    let out = ctx.mul_mat_id(&w, &b, &ids)?;
                    let dims = [m as usize, n_used as usize, tokens as usize, 1, 1];
                    let want = Host::from_fn(dims, |i| {
                        let x = picks[i[1] + i[2] * n_used as usize] as usize;
                        (0..k as usize)
                            .map(|p| {
                                let bv = hb.at([p, i[1] % n_b as usize, i[2], 0, 0]);
                                hw.at([p, i[0], x, 0, 0]) * round_to(wt, bv)
                            })
                            .sum()
                    });
                    Ok((out, want))
                });
            }
        }
    }
}
