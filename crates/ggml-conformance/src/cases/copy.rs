//! CPY (type conversions, permuted sources), DUP and CONT (GGML's `test_cpy`, `test_dup`,
//! `test_cont`).

use ggml::Type;

use crate::case::{Case, Input, Layout, Metric, Vars};

/// GGML's threshold for a copy from `src` to `dst` over `n` elements: exact between equal
/// types; for the 4/5/8-bit block types, the NMSE of one quantized value off by one step for
/// values in [-150, 150]; 1e-6 otherwise.
fn cpy_metric(src: Type, dst: Type, n: i64) -> Metric {
    if src == dst {
        return Metric::Exact;
    }
    let step = match dst {
        Type::Q4_0 | Type::Q4_1 => 150.0 / 8.0,
        Type::IQ4_NL => 150.0 / 4.0,
        Type::Q5_0 | Type::Q5_1 => 150.0 / 16.0,
        Type::Q8_0 => 150.0 / 64.0,
        _ => return Metric::Nmse(1e-6),
    };
    Metric::Nmse(step * step / (150.0 * 150.0 * 0.25 * n as f64))
}

type CopyBuilder = fn(&ggml::Context, &ggml::Tensor) -> ggml::Result<ggml::Tensor>;

/// Exact copies (`op`'s builder) of inputs of every type and named layout; the layout is the
/// case's `var`.
fn layout_copies(
    (op, var, build): (&str, &str, CopyBuilder),
    types: &[Type],
    layouts: &[(&str, Layout)],
    ne: [i64; 4],
) -> Vec<Case> {
    let mut out = Vec::new();
    for &ty in types {
        for &(lname, layout) in layouts {
            out.push(
                Case::new(
                    op,
                    Vars::new().ty("type", ty).list("ne", &ne).val(var, lname),
                    vec![Input::new(ty, &ne).layout(layout)],
                    move |ctx, x| build(ctx, &x[0]),
                    |x| x[0].clone(),
                )
                .metric(Metric::Exact),
            );
        }
    }
    out
}

/// GGML's first three CPY vars: `type_src=…,type_dst=…,ne_src=[…]`.
fn cpy_vars(src: Type, dst: Type, ne: &[i64]) -> Vars {
    Vars::new()
        .ty("type_src", src)
        .ty("type_dst", dst)
        .list("ne_src", ne)
}

/// The copy cases.
pub fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    let floats = [Type::F32, Type::F16, Type::BF16];
    // Every destination type that can be read back, as GGML's grid (the types without a
    // quantizer from f32 are reported not supported).
    let dsts: Vec<Type> = floats
        .into_iter()
        .chain(
            Type::ALL
                .into_iter()
                .filter(|&t| t.is_quantized() && ggml::quants::has_to_float(t)),
        )
        .collect();
    for src in floats {
        for &dst in &dsts {
            for permute in [[0usize, 1, 2, 3], [0, 2, 1, 3]] {
                let ne = if dst.blck_size() > 64 {
                    [256i64, 2, 3, 1]
                } else {
                    [64, 3, 2, 2]
                };
                let layout = if permute == [0, 1, 2, 3] {
                    Layout::Contiguous
                } else {
                    Layout::Permuted(permute)
                };
                let n: i64 = ne.iter().product();
                out.push(
                    Case::new(
                        "CPY",
                        cpy_vars(src, dst, &ne).list("permute_src", &permute),
                        vec![Input::new(src, &ne).uniform(-150.0, 150.0).layout(layout)],
                        move |ctx, x| ctx.cpy(&x[0], &ctx.new_tensor(dst, &ne)?),
                        |x| x[0].clone(),
                    )
                    .metric(cpy_metric(src, dst, n)),
                );
            }
        }
    }
    // Into a permuted destination (strided writes), as GGML's permute_dst.
    for (src, dst) in [
        (Type::F32, Type::F32),
        (Type::F32, Type::F16),
        (Type::F16, Type::F32),
        (Type::BF16, Type::F32),
    ] {
        let ne = [5i64, 4, 3, 2];
        let p = [0usize, 2, 1, 3];
        // The destination's own shape, so that its permutation has shape `ne`.
        let dst_ne = [ne[p[0]], ne[p[1]], ne[p[2]], ne[p[3]]];
        out.push(
            Case::new(
                "CPY",
                cpy_vars(src, dst, &ne).list("permute_dst", &p),
                vec![Input::new(src, &ne).uniform(-150.0, 150.0)],
                move |ctx, x| {
                    let d = ctx.new_tensor(dst, &dst_ne)?;
                    ctx.cpy(&x[0], &ctx.permute(&d, p[0], p[1], p[2], p[3])?)
                },
                |x| x[0].clone(),
            )
            .metric(cpy_metric(src, dst, ne.iter().product())),
        );
    }
    // Cast: a new tensor of another type.
    for (src, dst) in [
        (Type::F32, Type::F16),
        (Type::F16, Type::BF16),
        (Type::BF16, Type::F32),
    ] {
        let ne = [33i64, 3, 2, 1];
        out.push(
            Case::new(
                "CPY",
                cpy_vars(src, dst, &ne).val("cast", 1),
                vec![Input::new(src, &ne).layout(Layout::Transposed)],
                move |ctx, x| ctx.cast(&x[0], dst),
                |x| x[0].clone(),
            )
            .metric(cpy_metric(src, dst, ne.iter().product())),
        );
    }
    // Quantized to F32 (dequantization).
    for src in crate::cases::matmul::quantized_types() {
        let ne = [256i64, 3, 1, 1];
        out.push(
            Case::new(
                "CPY",
                cpy_vars(src, Type::F32, &ne),
                vec![Input::new(src, &ne)],
                move |ctx, x| ctx.cpy(&x[0], &ctx.new_tensor(Type::F32, &ne)?),
                |x| x[0].clone(),
            )
            .metric(cpy_metric(src, Type::F32, 768)),
        );
    }
    // Quantized to the same type: blocks copied, rows from a permuted source too. The copy is
    // read through a second CPY to F32: a quantized output would have its reference
    // re-quantized, which is not exact for every type.
    for ty in crate::cases::matmul::quantized_types() {
        let ne = [ty.blck_size() as i64 * 2, 3, 2, 1];
        for (pname, layout) in [
            ("[0,1,2,3]", Layout::Contiguous),
            ("[0,2,1,3]", Layout::Permuted([0, 2, 1, 3])),
        ] {
            out.push(
                Case::new(
                    "CPY",
                    cpy_vars(ty, ty, &ne).val("permute_src", pname),
                    vec![Input::new(ty, &ne).layout(layout)],
                    move |ctx, x| {
                        let same = ctx.cpy(&x[0], &ctx.new_tensor(ty, &ne)?)?;
                        ctx.cpy(&same, &ctx.new_tensor(Type::F32, &ne)?)
                    },
                    |x| x[0].clone(),
                )
                .metric(Metric::Exact),
            );
        }
    }
    let dup: CopyBuilder = ggml::Context::dup;
    let cont: CopyBuilder = ggml::Context::cont;
    let p0213 = ("permuted", Layout::Permuted([0, 2, 1, 3]));
    let transposed = ("transposed", Layout::Transposed);
    out.extend(layout_copies(
        ("DUP", "layout", dup),
        &[Type::F32, Type::F16, Type::BF16, Type::I32],
        &[("contiguous", Layout::Contiguous), p0213, transposed],
        [10, 10, 5, 1],
    ));
    out.extend(layout_copies(
        ("CONT", "permute", cont),
        &[Type::F32, Type::F16, Type::BF16],
        &[
            p0213,
            ("permuted2", Layout::Permuted([2, 0, 3, 1])),
            transposed,
            ("padded", Layout::Padded),
        ],
        [7, 5, 3, 2],
    ));
    // Contiguous copy with a new shape (cont_2d of a transposed matrix).
    for ty in [Type::F32, Type::F16] {
        let ne = [6i64, 4, 1, 1];
        out.push(
            Case::new(
                "CONT",
                Vars::new()
                    .ty("type", ty)
                    .list("ne", &ne)
                    .list("ne_out", &[12, 2]),
                vec![Input::new(ty, &ne).layout(Layout::Transposed)],
                |ctx, x| ctx.cont_2d(&x[0], 12, 2),
                |x| crate::host::Host {
                    ne: [12, 2, 1, 1, 1],
                    v: x[0].v.clone(),
                },
            )
            .metric(Metric::Exact),
        );
    }
    out
}
