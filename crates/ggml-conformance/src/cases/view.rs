//! Views made by the graph and computed on: CONT of `view_2d`/`view_3d` windows at offsets, of
//! `reshape`s and of chained permutations, and DUP in place (GGML's views carry no compute;
//! these check the shapes, strides and offsets the builders give them).

use ggml::{Context, Tensor, Type};

use crate::case::{Case, Input, Metric, Vars};
use crate::host::{shape, Host};

/// One exact CONT case of `view(ctx, a)` for an input of shape `ne`; `want` maps the input's
/// values to the view's.
fn case(
    what: &str,
    ty: Type,
    ne: &[i64],
    view: impl Fn(&Context, &Tensor) -> ggml::Result<Tensor> + Send + Sync + 'static,
    want: impl Fn(&Host) -> Host + Send + Sync + 'static,
) -> Case {
    Case::new(
        "CONT",
        Vars::new().ty("type", ty).list("ne", ne).val("view", what),
        vec![Input::new(ty, ne)],
        move |ctx, x| ctx.cont(&view(ctx, &x[0])?),
        move |x| want(&x[0]),
    )
    .metric(Metric::Exact)
}

/// The view cases.
pub fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    for ty in [Type::F32, Type::F16, Type::I32] {
        let ts = ty.type_size();
        // Rows 1..4 and columns 2..7 of a 9×5 matrix.
        out.push(case(
            "view_2d",
            ty,
            &[9, 5],
            move |ctx, a| ctx.view_2d(a, 5, 3, a.nb()[1], a.nb()[1] + 2 * ts),
            |a| Host::from_fn(shape(&[5, 3]), |i| a.at([i[0] + 2, i[1] + 1, 0, 0, 0])),
        ));
        // Every other row of each plane, planes 1..3 of a 4×6×3 tensor.
        out.push(case(
            "view_3d",
            ty,
            &[4, 6, 3],
            |ctx, a| {
                let nb = a.nb();
                ctx.view_3d(a, 4, 3, 2, 2 * nb[1], nb[2], nb[2])
            },
            |a| {
                Host::from_fn(shape(&[4, 3, 2]), |i| {
                    a.at([i[0], 2 * i[1], i[2] + 1, 0, 0])
                })
            },
        ));
        // A reshape is the same bytes in a new shape.
        out.push(case(
            "reshape",
            ty,
            &[6, 4, 2],
            |ctx, a| ctx.reshape_3d(a, 4, 3, 4),
            |a| Host {
                ne: shape(&[4, 3, 4]),
                v: a.v.clone(),
            },
        ));
        // Two permutations in a row and a transpose of the result.
        out.push(case(
            "permute_permute_transpose",
            ty,
            &[2, 3, 4, 5],
            |ctx, a| {
                let p = ctx.permute(a, 1, 2, 3, 0)?;
                ctx.transpose(&ctx.permute(&p, 2, 0, 1, 3)?)
            },
            |a| {
                // Source dim d goes to position ax[d]: first (1,2,3,0), then (2,0,1,3), then
                // dims 0 and 1 swap; compose where each source dimension ends up.
                let first = [1usize, 2, 3, 0];
                let second = [2usize, 0, 1, 3];
                let swap = [1usize, 0, 2, 3];
                let dest: [usize; 4] = std::array::from_fn(|d| swap[second[first[d]]]);
                let mut ne = [1usize; 5];
                for d in 0..4 {
                    ne[dest[d]] = a.ne[d];
                }
                Host::from_fn(ne, |i| {
                    a.at([i[dest[0]], i[dest[1]], i[dest[2]], i[dest[3]], 0])
                })
            },
        ));
    }
    // DUP in place: a node that copies a onto itself.
    let ne = [7i64, 3, 2];
    out.push(
        Case::new(
            "DUP",
            Vars::new()
                .ty("type", Type::F32)
                .list("ne", &ne)
                .flag("inplace", true),
            vec![Input::new(Type::F32, &ne)],
            |ctx, x| ctx.dup_inplace(&x[0]),
            |x| x[0].clone(),
        )
        .metric(Metric::Exact),
    );
    out
}
