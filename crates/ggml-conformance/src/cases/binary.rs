//! ADD, SUB, MUL, DIV with broadcasting (GGML's `test_bin_bcast`), their in-place forms, and
//! ADD1.

use ggml::{Context, Tensor, Type};

use crate::case::{Case, Input, Layout, Vars};
use crate::host::Host;
use crate::reference::broadcast;

type Builder = fn(&Context, &Tensor, &Tensor) -> ggml::Result<Tensor>;

/// (name, out-of-place builder, in-place builder, f64 op)
type BinaryOp = (&'static str, Builder, Builder, fn(f64, f64) -> f64);

const OPS: [BinaryOp; 4] = [
    ("ADD", Context::add, Context::add_inplace, |a, b| a + b),
    ("SUB", Context::sub, Context::sub_inplace, |a, b| a - b),
    ("MUL", Context::mul, Context::mul_inplace, |a, b| a * b),
    ("DIV", Context::div, Context::div_inplace, |a, b| a / b),
];

/// GGML's broadcast patterns: `b` has shape `ne`, `a` is `ne · nr`.
const PATTERNS: [([i64; 4], [i64; 4]); 14] = [
    ([1, 1, 8, 1], [1, 1, 1, 1]),
    ([1, 1, 1, 1], [32, 1, 1, 1]),
    ([1, 1, 65, 33], [1, 1, 1, 1]),
    ([10, 5, 1, 1], [1, 1, 1, 1]),
    ([10, 5, 4, 1], [1, 1, 1, 1]),
    ([10, 5, 4, 3], [1, 1, 1, 1]),
    ([10, 5, 4, 3], [2, 1, 1, 1]),
    ([10, 5, 4, 3], [1, 2, 1, 1]),
    ([10, 5, 4, 3], [1, 1, 2, 1]),
    ([10, 5, 4, 3], [1, 1, 1, 2]),
    ([10, 5, 4, 3], [1, 1, 2, 2]),
    ([10, 5, 4, 3], [1, 2, 2, 2]),
    ([10, 5, 4, 3], [2, 2, 2, 2]),
    ([7, 3, 1, 5], [3, 1, 3, 1]),
];

fn times(ne: [i64; 4], nr: [i64; 4]) -> [i64; 4] {
    std::array::from_fn(|d| ne[d] * nr[d])
}

/// The divisor's range keeps it away from zero.
fn b_input(name: &str, ty: Type, ne: &[i64]) -> Input {
    let i = Input::new(ty, ne);
    if name == "DIV" {
        i.uniform(0.5, 2.0)
    } else {
        i
    }
}

/// The binary cases.
pub fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    for (name, build, _, f) in OPS {
        for ty in [Type::F32, Type::F16, Type::BF16] {
            for (ne, nr) in PATTERNS {
                // GGML's perm1: b a permuted view; here also a as a padded view.
                for v in 0..3u8 {
                    if v > 0 && (ty != Type::F32 || nr != [2, 2, 2, 2] && nr != [1, 1, 1, 1]) {
                        continue;
                    }
                    let a_ne = times(ne, nr);
                    let mut a = Input::new(ty, &a_ne);
                    let mut b = b_input(name, ty, &ne);
                    match v {
                        1 => b = b.layout(Layout::Permuted([0, 2, 1, 3])),
                        2 => a = a.layout(Layout::Padded),
                        _ => {}
                    }
                    out.push(Case::new(
                        name,
                        Vars::new()
                            .ty("type", ty)
                            .list("ne", &ne)
                            .list("nr", &nr)
                            .val("v", v),
                        vec![a, b],
                        move |ctx, x| build(ctx, &x[0], &x[1]),
                        move |x| broadcast(&x[0], &x[1], f),
                    ));
                }
            }
        }
    }
    // In place: the result is a view of a.
    for (name, _, build, f) in OPS {
        for ty in [Type::F32, Type::F16] {
            let (ne, nr) = ([10, 5, 4, 3], [1, 1, 2, 1]);
            out.push(Case::new(
                name,
                Vars::new()
                    .ty("type", ty)
                    .list("ne", &ne)
                    .list("nr", &nr)
                    .flag("inplace", true),
                vec![Input::new(ty, &times(ne, nr)), b_input(name, ty, &ne)],
                move |ctx, x| build(ctx, &x[0], &x[1]),
                move |x| broadcast(&x[0], &x[1], f),
            ));
        }
    }
    // Five dimensions (ggmlR's): b broadcast along the fifth too.
    for (name, build, _, f) in OPS {
        let (ne, nr) = ([3i64, 2, 1, 2, 3], [2i64, 1, 3, 1, 2]);
        let a_ne: Vec<i64> = (0..5).map(|d| ne[d] * nr[d]).collect();
        out.push(Case::new(
            name,
            Vars::new()
                .ty("type", Type::F32)
                .list("ne", &ne)
                .list("nr", &nr),
            vec![Input::new(Type::F32, &a_ne), b_input(name, Type::F32, &ne)],
            move |ctx, x| build(ctx, &x[0], &x[1]),
            move |x| broadcast(&x[0], &x[1], f),
        ));
    }
    for ty in [Type::F32, Type::F16, Type::BF16] {
        for (ne, v) in [
            ([10, 5, 4, 3], false),
            ([33, 1, 1, 1], false),
            ([7, 3, 5, 2], true),
        ] {
            out.push(Case::new(
                "ADD1",
                Vars::new().ty("type", ty).list("ne", &ne).flag("v", v),
                vec![Input::new(ty, &ne).padded_if(v), Input::new(ty, &[1])],
                |ctx, x| ctx.add1(&x[0], &x[1]),
                |x| {
                    let s = x[1].v[0];
                    Host::from_fn(x[0].ne, |i| x[0].at(i) + s)
                },
            ));
        }
    }
    out
}
