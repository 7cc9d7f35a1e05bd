//! MUL_MAT_ID (mixture of experts, GGML's `test_mul_mat_id`) and OUT_PROD (`test_out_prod`):
//! float and quantized weights (the reference reads them dequantized), broadcast activations,
//! strided inputs, and expert ids outside the experts (a compute error here; an assert in GGML).

use ggml::Type;

use crate::case::{Case, Init, Input, Layout, Metric, Vars, NMSE_MATMUL};
use crate::cases::matmul::quantized_types;
use crate::host::{Host, DIMS};

const FLOATS: [Type; 3] = [Type::F32, Type::F16, Type::BF16];

/// `out[i, e, t] = Σₖ w[k, i, ids[e, t]]·b[k, e mod n_b, t]`.
fn mul_mat_id_ref(w: &Host, b: &Host, ids: &Host) -> Host {
    let ne = [w.ne[1], ids.ne[0], b.ne[2], 1, 1];
    Host::from_fn(ne, |i| {
        let x = ids.at([i[1], i[2], 0, 0, 0]) as usize;
        (0..w.ne[0])
            .map(|k| w.at([k, i[0], x, 0, 0]) * b.at([k, i[1] % b.ne[1], i[2], 0, 0]))
            .sum()
    })
}

/// The layouts of a MUL_MAT_ID case's weights, activations and ids, with their name.
type Layouts = ([Layout; 3], &'static str);

const CONTIGUOUS: Layouts = ([Layout::Contiguous; 3], "contiguous");

/// `n_expert` experts `[k, m]` of `wty`, `b` `[k, n_b, tokens]` of `bty`, ids
/// `[n_used, tokens]` from `ids`.
fn mul_mat_id(
    (wty, bty): (Type, Type),
    (k, m, n_expert): (i64, i64, i64),
    (n_used, n_b, tokens): (i64, i64, i64),
    ids: (i64, i64),
    (layouts, lname): Layouts,
) -> Case {
    Case::new(
        "MUL_MAT_ID",
        Vars::new()
            .ty("type_a", wty)
            .ty("type_b", bty)
            .val("n_mats", n_expert)
            .val("n_used", n_used)
            .val("b", n_b)
            .val("m", m)
            .val("n", tokens)
            .val("k", k)
            .val("ids", format_args!("{}..={}", ids.0, ids.1))
            .val("layout", lname),
        vec![
            Input::new(wty, &[k, m, n_expert]).layout(layouts[0]),
            Input::new(bty, &[k, n_b, tokens]).layout(layouts[1]),
            Input::new(Type::I32, &[n_used, tokens])
                .layout(layouts[2])
                .init(Init::Ints(ids.0, ids.1)),
        ],
        |ctx, x| ctx.mul_mat_id(&x[0], &x[1], &x[2]),
        |x| mul_mat_id_ref(&x[0], &x[1], &x[2]),
    )
    .metric(Metric::Nmse(NMSE_MATMUL))
}

fn mul_mat_id_cases(out: &mut Vec<Case>) {
    for wty in FLOATS {
        for bty in FLOATS {
            for n_b in [2, 1] {
                out.push(mul_mat_id(
                    (wty, bty),
                    (33, 5, 4),
                    (2, n_b, 3),
                    (0, 3),
                    CONTIGUOUS,
                ));
            }
        }
    }
    // Strided weights (padded rows and planes), permuted activations, transposed ids.
    let strided: [Layouts; 3] = [
        (
            [
                Layout::Padded,
                Layout::Permuted([1, 0, 2, 3]),
                Layout::Transposed,
            ],
            "padded/permuted/transposed",
        ),
        (
            [Layout::Contiguous, Layout::Padded, Layout::Contiguous],
            "contiguous/padded/contiguous",
        ),
        (
            [
                Layout::Padded,
                Layout::Permuted([2, 0, 1, 3]),
                Layout::Padded,
            ],
            "padded/permuted2/padded",
        ),
    ];
    for layouts in strided {
        out.push(mul_mat_id(
            (Type::F32, Type::F32),
            (20, 7, 3),
            (4, 4, 5),
            (0, 2),
            layouts,
        ));
    }
    // Many tokens and experts: more pairs per expert than one block of rows.
    out.push(mul_mat_id(
        (Type::F16, Type::F32),
        (64, 9, 8),
        (4, 1, 19),
        (0, 7),
        CONTIGUOUS,
    ));
    for wty in quantized_types() {
        let k = 2 * wty.blck_size() as i64;
        out.push(mul_mat_id(
            (wty, Type::F32),
            (k, 3, 3),
            (2, 2, 3),
            (0, 2),
            CONTIGUOUS,
        ));
    }
    // Ids outside the experts fail the computation, naming one (GGML asserts).
    for ids in [(-3, -1), (4, 9), (-1, -1)] {
        out.push(
            mul_mat_id(
                (Type::F32, Type::F32),
                (16, 6, 4),
                (3, 3, 4),
                ids,
                CONTIGUOUS,
            )
            .metric(Metric::ComputeFails("is outside 0..4")),
        );
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

fn out_prod(
    (aty, bty): (Type, Type),
    ane: &[i64],
    bne: &[i64],
    (al, bl): (Layout, Layout),
    lname: &str,
) -> Case {
    Case::new(
        "OUT_PROD",
        Vars::new()
            .ty("type_a", aty)
            .ty("type_b", bty)
            .list("ne_a", ane)
            .list("ne_b", bne)
            .val("layout", lname),
        vec![
            Input::new(aty, ane).layout(al),
            Input::new(bty, bne).layout(bl),
        ],
        |ctx, x| ctx.out_prod(&x[0], &x[1]),
        |x| out_prod_ref(&x[0], &x[1]),
    )
    .metric(Metric::Nmse(NMSE_MATMUL))
}

fn out_prod_cases(out: &mut Vec<Case>) {
    let plain = (Layout::Contiguous, Layout::Contiguous);
    for aty in FLOATS {
        for bty in FLOATS {
            out.push(out_prod(
                (aty, bty),
                &[7, 5, 2],
                &[4, 5, 4, 3],
                plain,
                "contiguous",
            ));
        }
    }
    let a_layouts = [
        (Layout::Contiguous, "contiguous"),
        (Layout::Padded, "padded"),
        (Layout::Permuted([0, 2, 1, 3]), "permuted"),
    ];
    let b_layouts = [
        (Layout::Contiguous, "contiguous"),
        (Layout::Permuted([1, 0, 2, 3]), "permuted"),
        (Layout::Transposed, "transposed"),
        (Layout::Padded, "padded"),
    ];
    for (al, an) in a_layouts {
        for (bl, bn) in b_layouts {
            out.push(out_prod(
                (Type::F32, Type::F32),
                &[6, 9, 2, 1],
                &[5, 9, 2, 2],
                (al, bl),
                &format!("{an}/{bn}"),
            ));
        }
    }
    // 5-D broadcasting, a single k, a long k.
    let f32s = (Type::F32, Type::F32);
    out.push(out_prod(
        f32s,
        &[3, 4, 1, 2, 1],
        &[2, 4, 3, 2, 2],
        plain,
        "contiguous",
    ));
    out.push(out_prod(
        f32s,
        &[8, 1],
        &[5, 1],
        (Layout::Contiguous, Layout::Transposed),
        "contiguous/transposed",
    ));
    out.push(out_prod(
        (Type::F16, Type::F32),
        &[16, 300],
        &[3, 300],
        plain,
        "contiguous",
    ));
    // Big enough for the CPU's packed GEMM to take whole panels and two slices of k: 100
    // rows (two 48-row panels and an edge), 20 columns, k = 300 (a slice is 256).
    for aty in FLOATS {
        out.push(out_prod(
            (aty, Type::F32),
            &[100, 300, 2],
            &[20, 300, 2, 2],
            plain,
            "contiguous",
        ));
    }
    out.push(out_prod(
        f32s,
        &[100, 300],
        &[20, 300],
        (Layout::Padded, Layout::Transposed),
        "padded/transposed",
    ));
    for aty in [Type::Q4_0, Type::Q8_0, Type::Q4_K, Type::Q6_K, Type::IQ4_NL] {
        let m = 2 * aty.blck_size() as i64;
        let q = (aty, Type::F32);
        out.push(out_prod(q, &[m, 5, 2], &[3, 5, 2], plain, "contiguous"));
        out.push(out_prod(
            q,
            &[m, 4, 1, 2],
            &[3, 4, 3, 2],
            (Layout::Contiguous, Layout::Transposed),
            "contiguous/transposed",
        ));
    }
}

/// The MUL_MAT_ID and OUT_PROD cases.
pub fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    mul_mat_id_cases(&mut out);
    out_prod_cases(&mut out);
    out
}
