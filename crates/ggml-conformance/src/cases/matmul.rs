//! MUL_MAT (GGML's `test_mul_mat`): every weight type × F32 (and F16) activations, odd sizes,
//! broadcasting over the batch dimensions, permuted operands.

use ggml::Type;

use crate::case::{Case, Input, Layout, Metric, Vars, NMSE_MATMUL};
use crate::reference::mul_mat;

/// Every quantized type GGML can both quantize and dequantize.
pub fn quantized_types() -> Vec<Type> {
    Type::ALL
        .into_iter()
        .filter(|&t| {
            t.is_quantized() && ggml::quants::has_quantizer(t) && ggml::quants::has_to_float(t)
        })
        .collect()
}

/// One mul_mat case: `a` `[k, m, bs0, bs1]` (weights), `b` `[k, n, bs0·nr0, bs1·nr1]`, both
/// laid out through permutation `per` of their dimensions (GGML's `per`).
#[allow(clippy::too_many_arguments)]
fn case(
    type_a: Type,
    type_b: Type,
    m: i64,
    n: i64,
    k: i64,
    bs: [i64; 2],
    nr: [i64; 2],
    per: [usize; 4],
) -> Case {
    let a_ne = [k, m, bs[0], bs[1]];
    let b_ne = [k, n, bs[0] * nr[0], bs[1] * nr[1]];
    let layout = if per == [0, 1, 2, 3] {
        Layout::Contiguous
    } else {
        Layout::Permuted(per)
    };
    Case::new(
        "MUL_MAT",
        Vars::new()
            .ty("type_a", type_a)
            .ty("type_b", type_b)
            .val("m", m)
            .val("n", n)
            .val("k", k)
            .list("bs", &bs)
            .list("nr", &nr)
            .list("per", &per),
        vec![
            Input::new(type_a, &a_ne).layout(layout),
            Input::new(type_b, &b_ne).layout(layout),
        ],
        |ctx, x| ctx.mul_mat(&x[0], &x[1]),
        |x| mul_mat(&x[0], &x[1]),
    )
    .metric(Metric::Nmse(NMSE_MATMUL))
}

/// The mul_mat cases.
pub fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    let id = [0, 1, 2, 3];
    let floats = [Type::F32, Type::F16, Type::BF16];
    // Every weight type, a few batch sizes.
    for ty in floats.into_iter().chain(quantized_types()) {
        for n in [1, 5, 9] {
            out.push(case(ty, Type::F32, 16, n, 256, [1, 1], [1, 1], id));
        }
    }
    // Float weights: odd K, broadcasting, F16 activations.
    for ta in floats {
        for tb in [Type::F32, Type::F16] {
            for k in [7, 65] {
                for bs in [[1, 1], [3, 2]] {
                    for nr in [[1, 1], [2, 2]] {
                        for n in [1, 9] {
                            out.push(case(ta, tb, 11, n, k, bs, nr, id));
                        }
                    }
                }
            }
        }
    }
    // Quantized weights broadcast over batches.
    for ta in [Type::Q4_0, Type::Q8_0, Type::Q4_K, Type::Q6_K] {
        for nr in [[2, 1], [1, 2]] {
            out.push(case(ta, Type::F32, 16, 4, 256, [3, 1], nr, id));
        }
    }
    // Permuted operands (non-contiguous in dimensions 1..3).
    for ta in [Type::F32, Type::F16, Type::Q4_0, Type::Q8_0] {
        for per in [[0, 2, 1, 3], [0, 1, 3, 2], [0, 3, 2, 1]] {
            out.push(case(ta, Type::F32, 16, 8, 64, [2, 3], [1, 1], per));
        }
    }
    // Padded views (rows longer than K, planes longer than M, at an offset: GGML's k_v).
    for ta in [Type::F32, Type::F16, Type::Q8_0] {
        let (m, n, k) = (9i64, 5i64, 64i64);
        out.push(
            Case::new(
                "MUL_MAT",
                Vars::new()
                    .ty("type_a", ta)
                    .ty("type_b", Type::F32)
                    .val("m", m)
                    .val("n", n)
                    .val("k", k)
                    .flag("v", true),
                vec![
                    Input::new(ta, &[k, m, 2, 1]).layout(Layout::Padded),
                    Input::new(Type::F32, &[k, n, 2, 3]).layout(Layout::Padded),
                ],
                |ctx, x| ctx.mul_mat(&x[0], &x[1]),
                |x| mul_mat(&x[0], &x[1]),
            )
            .metric(Metric::Nmse(NMSE_MATMUL)),
        );
    }
    // Five dimensions (ggmlR's): the weights broadcast over b's fifth dimension too.
    out.push(
        Case::new(
            "MUL_MAT",
            Vars::new()
                .ty("type_a", Type::F32)
                .ty("type_b", Type::F32)
                .list("ne_a", &[8, 3, 2, 1, 2])
                .list("ne_b", &[8, 4, 2, 3, 4]),
            vec![
                Input::new(Type::F32, &[8, 3, 2, 1, 2]),
                Input::new(Type::F32, &[8, 4, 2, 3, 4]),
            ],
            |ctx, x| ctx.mul_mat(&x[0], &x[1]),
            |x| mul_mat(&x[0], &x[1]),
        )
        .metric(Metric::Nmse(NMSE_MATMUL)),
    );
    out
}
