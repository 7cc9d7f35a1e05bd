//! GET_ROWS (GGML's `test_get_rows`), REPEAT (`test_repeat`) and CONCAT (`test_concat`).

use ggml::Type;

use crate::case::{Case, Init, Input, Layout, Vars};
use crate::host::{shape, Host};
use crate::reference::{concat, repeat};

/// Values for an input of `ty`: integers for integer types, GGML's uniform otherwise.
fn values(ty: Type, ne: &[i64]) -> Input {
    let i = Input::new(ty, ne);
    if ty == Type::I32 {
        i.init(Init::Ints(-1000, 1000))
    } else {
        i
    }
}

/// The row-gathering and tiling cases.
pub fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    let plain = [Type::F32, Type::F16, Type::BF16, Type::I32];
    let quant = crate::cases::matmul::quantized_types();
    for ty in plain.into_iter().chain(quant) {
        let n = if ty.is_quantized() {
            ty.blck_size() as i64
        } else {
            10
        };
        for (be1, be2) in [(1i64, 1i64), (3, 2)] {
            for v in [false, true] {
                if v && ty.is_quantized() {
                    continue;
                }
                let (m, r) = (5i64, 3i64);
                out.push(Case::new(
                    "GET_ROWS",
                    Vars::new()
                        .ty("type", ty)
                        .val("n", n)
                        .val("m", m)
                        .val("r", r)
                        .val("be1", be1)
                        .val("be2", be2)
                        .flag("v", v),
                    vec![
                        values(ty, &[n, m, be1, be2]),
                        Input::new(Type::I32, &[r, be1, be2])
                            .init(Init::Ints(0, m - 1))
                            .padded_if(v),
                    ],
                    |ctx, x| ctx.get_rows(&x[0], &x[1]),
                    |x| {
                        let (a, idx) = (&x[0], &x[1]);
                        Host::from_fn([a.ne[0], idx.ne[0], idx.ne[1], idx.ne[2], 1], |i| {
                            let row = idx.at([i[1], i[2], i[3], 0, 0]) as usize;
                            a.at([i[0], row, i[2], i[3], 0])
                        })
                    },
                ));
            }
        }
    }
    // An index outside `a` fails the computation, naming it (GGML asserts).
    out.push(Case::fails(
        "GET_ROWS",
        Vars::new()
            .ty("type", Type::F32)
            .val("n", 10)
            .val("m", 5)
            .val("r", 4)
            .val("oob", 1),
        vec![
            Input::new(Type::F32, &[10, 5]),
            Input::new(Type::I32, &[4]).init(Init::Custom(std::sync::Arc::new(|_, i| {
                [2.0, -1.0, 5.0, 0.0][i[0]]
            }))),
        ],
        |ctx, x| ctx.get_rows(&x[0], &x[1]),
        "src1 index -1 at [1, 0, 0] is outside 0..5",
    ));
    for ty in [Type::F32, Type::F16, Type::I32] {
        for nr in [
            [2i64, 1, 1, 1],
            [1, 2, 1, 1],
            [1, 1, 2, 1],
            [1, 1, 1, 2],
            [2, 2, 2, 2],
            [3, 1, 2, 3],
        ] {
            let ne = [10i64, 5, 4, 1];
            let target: Vec<i64> = (0..4).map(|d| ne[d] * nr[d]).collect();
            out.push(Case::new(
                "REPEAT",
                Vars::new().ty("type", ty).list("ne", &ne).list("nr", &nr),
                vec![values(ty, &ne)],
                move |ctx, x| ctx.repeat(&x[0], &ctx.new_tensor(ty, &target)?),
                move |x| {
                    repeat(
                        &x[0],
                        shape(&[ne[0] * nr[0], ne[1] * nr[1], ne[2] * nr[2], ne[3] * nr[3]]),
                    )
                },
            ));
        }
    }
    for ty in [Type::F32, Type::F16, Type::BF16, Type::I32] {
        for dim in 0..4usize {
            for v in 0..3u8 {
                let ne_a = [11i64, 4, 3, 2];
                let ne_b_d = 5i64;
                let mut ne_b = ne_a;
                ne_b[dim] = ne_b_d;
                let (mut a, mut b) = (values(ty, &ne_a), values(ty, &ne_b));
                match v {
                    1 => a = a.layout(Layout::Padded),
                    2 => b = b.layout(Layout::Permuted([0, 2, 1, 3])),
                    _ => {}
                }
                out.push(Case::new(
                    "CONCAT",
                    Vars::new()
                        .ty("type", ty)
                        .list("ne_a", &ne_a)
                        .val("ne_b_d", ne_b_d)
                        .val("dim", dim)
                        .val("v", v),
                    vec![a, b],
                    move |ctx, x| ctx.concat(&x[0], &x[1], dim),
                    move |x| concat(&x[0], &x[1], dim),
                ));
            }
        }
    }
    out
}
