//! SET_ROWS (GGML's `test_set_rows`): rows of `b` written into `a` at distinct indices `c`
//! (broadcast over b's dimensions 2 and 3), the rest of `a` kept; every float destination and
//! source type, I32 and I64 indices, strided operands, and out-of-range indices (a compute
//! error here; GGML asserts). Duplicate indices (which GGML does not define) are tested in
//! `crates/ggml/tests/ops_set_rows.rs`.

use ggml::Type;

use crate::case::{Case, Init, Input, Layout, Metric, Vars};
use crate::host::Host;

/// `a` with row `c[i, j % C1, k % C2]` of plane `(j, k)` replaced by row `i` of `b`.
fn set_rows_ref(a: &Host, b: &Host, c: &Host) -> Host {
    let mut out = a.clone();
    for i3 in 0..b.ne[3] {
        for i2 in 0..b.ne[2] {
            for i in 0..b.ne[1] {
                let r = c.at([i, i2 % c.ne[1], i3 % c.ne[2], 0, 0]) as usize;
                for k in 0..b.ne[0] {
                    let at = out.offset([k, r, i2, i3, 0]);
                    out.v[at] = b.at([k, i, i2, i3, 0]);
                }
            }
        }
    }
    out
}

/// One case: `a` `[ne0, ne1, ne2, ne3]` of `a_ty`, `b` `[ne0, n, ne2, ne3]` of `b_ty`, indices
/// `[n, c_planes…]` of `c_ty`.
fn case(
    (a_ty, b_ty, c_ty): (Type, Type, Type),
    a_ne: [i64; 4],
    n: i64,
    c_planes: [i64; 2],
    (layout, lname): (Layout, &str),
) -> Case {
    let [ne0, ne1, ne2, ne3] = a_ne;
    let b_layout = match layout {
        Layout::Padded => Layout::Padded,
        _ => Layout::Permuted([0, 2, 1, 3]),
    };
    // Exact for equal types; one rounding of the source value otherwise.
    let metric = if a_ty == b_ty || a_ty == Type::F32 {
        Metric::Exact
    } else {
        Metric::Nmse(1e-7)
    };
    Case::new(
        "SET_ROWS",
        Vars::new()
            .ty("type", a_ty)
            .ty("type_src", b_ty)
            .ty("type_idx", c_ty)
            .list("ne", &a_ne)
            .val("nr23", format_args!("[{},{}]", c_planes[0], c_planes[1]))
            .val("r", n)
            .val("layout", lname),
        vec![
            Input::new(a_ty, &a_ne).layout(layout),
            Input::new(b_ty, &[ne0, n, ne2, ne3])
                .layout(b_layout)
                .uniform(-2.0, 2.0),
            Input::new(c_ty, &[n, c_planes[0], c_planes[1]]).init(Init::Distinct(0.0, ne1 as f64)),
        ],
        |ctx, x| ctx.set_rows(&x[0], &x[1], &x[2]),
        |x| set_rows_ref(&x[0], &x[1], &x[2]),
    )
    .metric(metric)
}

/// The SET_ROWS cases.
pub fn cases() -> Vec<Case> {
    let floats = [Type::F32, Type::F16, Type::BF16];
    let contiguous = (Layout::Contiguous, "contiguous");
    let mut out = Vec::new();
    for a_ty in floats {
        for b_ty in floats {
            for c_ty in [Type::I32, Type::I64] {
                for (a_ne, n, c_planes) in [
                    ([7, 9, 1, 1], 5, [1, 1]),
                    ([16, 5, 3, 2], 4, [3, 2]),
                    ([16, 5, 6, 2], 5, [3, 1]),
                    ([3, 40, 2, 3], 12, [1, 3]),
                ] {
                    out.push(case((a_ty, b_ty, c_ty), a_ne, n, c_planes, contiguous));
                }
            }
        }
    }
    for layout in [
        (Layout::Padded, "padded"),
        (Layout::Permuted([0, 2, 1, 3]), "permuted"),
    ] {
        out.push(case(
            (Type::F32, Type::F16, Type::I64),
            [10, 6, 4, 2],
            5,
            [2, 2],
            layout,
        ));
    }
    // An index outside `a` fails the computation, naming it (GGML asserts).
    for (c_ty, bad) in [(Type::I32, -1.0), (Type::I64, 9.0)] {
        out.push(Case::fails(
            "SET_ROWS",
            Vars::new()
                .ty("type", Type::F32)
                .ty("type_idx", c_ty)
                .val("oob", bad),
            vec![
                Input::new(Type::F32, &[4, 9]),
                Input::new(Type::F32, &[4, 3]),
                Input::new(c_ty, &[3]).init(Init::Custom(std::sync::Arc::new(move |_, i| {
                    [1.0, 8.0, bad][i[0]]
                }))),
            ],
            |ctx, x| ctx.set_rows(&x[0], &x[1], &x[2]),
            if c_ty == Type::I32 {
                "src1 index -1 at [2, 0, 0] is outside 0..9"
            } else {
                "src1 index 9 at [2, 0, 0] is outside 0..9"
            },
        ));
    }
    out
}
