//! GLU (all six gates; fused, swapped and split; every float type; strided inputs) and XIELU
//! against f64 formulas written from GGML's definitions (`ggml-cpu/ops.cpp`, `vec.h`,
//! `unary-ops.cpp`).

mod common;

use common::nodes::{assert_valid, validate_with};
use common::reference::erf;
use common::*;
use ggml::ops::GluOp;
use ggml::{Context, Tensor, Type};

/// SWIGLU_OAI's constants in the cases (gpt-oss uses alpha 1.702, limit 7).
const OAI_ALPHA: f32 = 1.702;
const OAI_LIMIT: f32 = 7.0;

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// `act(x)·g` for `op` (with SWIGLU_OAI's constants).
fn glu_ref(op: GluOp, x: f64, g: f64, alpha: f64, limit: f64) -> f64 {
    use std::f64::consts::{FRAC_2_PI, SQRT_2};
    match op {
        GluOp::Reglu => {
            if x > 0.0 {
                x * g
            } else {
                0.0
            }
        }
        GluOp::Geglu => {
            0.5 * x * (1.0 + (FRAC_2_PI.sqrt() * x * (1.0 + 0.044715 * x * x)).tanh()) * g
        }
        GluOp::Swiglu => x * sigmoid(x) * g,
        GluOp::SwigluOai => {
            let x = x.min(limit);
            let g = g.clamp(-limit, limit);
            x * sigmoid(alpha * x) * (g + 1.0)
        }
        GluOp::GegluErf => 0.5 * x * (1.0 + erf(x / SQRT_2)) * g,
        GluOp::GegluQuick => x * sigmoid(1.702 * x) * g,
    }
}

/// How the gate's two inputs are given.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Form {
    /// Halves of each row: x first.
    Fused,
    /// Halves of each row: g first.
    Swapped,
    /// Two tensors.
    Split,
}

/// The node for `op` in `form`, through the named builders where GGML has them.
fn build(ctx: &Context, op: GluOp, form: Form, a: &Tensor, b: &Tensor) -> ggml::Result<Tensor> {
    type Named = fn(&Context, &Tensor) -> ggml::Result<Tensor>;
    type NamedSplit = fn(&Context, &Tensor, &Tensor) -> ggml::Result<Tensor>;
    let named: Option<(Named, Named, NamedSplit)> = match op {
        GluOp::Reglu => Some((Context::reglu, Context::reglu_swapped, Context::reglu_split)),
        GluOp::Geglu => Some((Context::geglu, Context::geglu_swapped, Context::geglu_split)),
        GluOp::Swiglu => Some((
            Context::swiglu,
            Context::swiglu_swapped,
            Context::swiglu_split,
        )),
        GluOp::GegluErf => Some((
            Context::geglu_erf,
            Context::geglu_erf_swapped,
            Context::geglu_erf_split,
        )),
        GluOp::GegluQuick => Some((
            Context::geglu_quick,
            Context::geglu_quick_swapped,
            Context::geglu_quick_split,
        )),
        GluOp::SwigluOai => None,
    };
    match (named, form) {
        (Some((f, _, _)), Form::Fused) => f(ctx, a),
        (Some((_, f, _)), Form::Swapped) => f(ctx, a),
        (Some((_, _, f)), Form::Split) => f(ctx, a, b),
        (None, Form::Split) => ctx.swiglu_oai(a, Some(b), OAI_ALPHA, OAI_LIMIT),
        (None, Form::Fused) => ctx.swiglu_oai(a, None, OAI_ALPHA, OAI_LIMIT),
        // GGML has no swapped SWIGLU_OAI builder: the generic one (alpha = limit = 0).
        (None, Form::Swapped) => ctx.glu(a, op, true),
    }
}

/// The reference of `op` in `form` over `a` (and `b` for the split form).
fn reference(op: GluOp, form: Form, ha: &Host, hb: &Host) -> Host {
    let (alpha, limit) = match (op, form) {
        (GluOp::SwigluOai, Form::Swapped) => (0.0, 0.0),
        _ => (OAI_ALPHA as f64, OAI_LIMIT as f64),
    };
    let nc = ha.ne[0] / 2;
    match form {
        Form::Split => Host::from_fn(ha.ne, |i| glu_ref(op, ha.at(i), hb.at(i), alpha, limit)),
        Form::Fused | Form::Swapped => ha.map_rows(nc, |_, row| {
            let (x, g) = row.split_at(nc);
            let (x, g) = if form == Form::Swapped {
                (g, x)
            } else {
                (x, g)
            };
            (0..nc)
                .map(|j| glu_ref(op, x[j], g[j], alpha, limit))
                .collect()
        }),
    }
}

fn run(op: GluOp, form: Form, ty: Type, ne: &[i64], layout: Layout) {
    let name = format!(
        "GLU(op={},form={form:?},type={ty},ne={ne:?},layout={layout:?})",
        op.name()
    );
    check(&name, TOL, |ctx, rng| {
        let (a, ha) = input(ctx, ty, ne, layout, rng, -9.0, 9.0)?;
        let (b, hb) = input(ctx, ty, ne, layout, rng, -9.0, 9.0)?;
        let out = build(ctx, op, form, &a, &b)?;
        Ok((out, reference(op, form, &ha, &hb)))
    });
}

#[test]
fn every_gate_form_and_type() {
    for op in GluOp::ALL {
        for form in [Form::Fused, Form::Swapped, Form::Split] {
            for ty in FLOATS {
                run(op, form, ty, &[10, 5, 3], Layout::Contiguous);
            }
        }
    }
}

#[test]
fn strided_inputs_and_odd_shapes() {
    for op in [GluOp::Swiglu, GluOp::Geglu, GluOp::SwigluOai] {
        for form in [Form::Fused, Form::Swapped, Form::Split] {
            for layout in LAYOUTS {
                run(op, form, Type::F32, &[8, 6, 3, 2], layout);
            }
            // An odd row (its last element unused in the fused forms), a 5-D tensor.
            run(op, form, Type::F32, &[7, 3], Layout::Contiguous);
            run(op, form, Type::F16, &[6, 2, 3, 2, 2], Layout::Contiguous);
        }
    }
}

#[test]
fn glu_generic_builder_matches_op_params() {
    let ctx = Context::init(1 << 20, true).unwrap();
    let a = ctx.new_tensor_2d(Type::F32, 8, 3).unwrap();
    let b = ctx.new_tensor_2d(Type::F32, 8, 3).unwrap();
    let t = ctx.swiglu_oai(&a, Some(&b), 1.5, 6.0).unwrap();
    let p = t.op_params();
    assert_eq!(
        (
            p[0],
            p[1],
            f32::from_bits(p[2] as u32),
            f32::from_bits(p[3] as u32)
        ),
        (3, 0, 1.5, 6.0)
    );
    let t = ctx.geglu_quick_swapped(&a).unwrap();
    assert_eq!(
        (t.op_params()[0], t.op_params()[1], t.ne()),
        (5, 1, [4, 3, 1, 1, 1])
    );
    assert_eq!(ctx.glu_split(&a, &b, GluOp::Reglu).unwrap().ne(), a.ne());
    for n in [t, ctx.swiglu_split(&a, &b).unwrap(), ctx.reglu(&a).unwrap()] {
        assert_valid(&n);
    }
}

#[test]
fn glu_shape_rule_errors() {
    let ctx = Context::init(1 << 20, true).unwrap();
    let a = ctx.new_tensor_2d(Type::F32, 8, 3).unwrap();
    let b_shape = ctx.new_tensor_2d(Type::F32, 8, 2).unwrap();
    let b_type = ctx.new_tensor_2d(Type::F16, 8, 3).unwrap();
    let ints = ctx.new_tensor_2d(Type::I32, 8, 3).unwrap();
    assert_err(ctx.swiglu_split(&a, &b_shape), &["GLU", "b", "shape of a"]);
    assert_err(ctx.swiglu_split(&a, &b_type), &["GLU", "b", "type of a"]);
    assert_err(ctx.swiglu(&ints), &["GLU", "a", "i32"]);
    let node = ctx.swiglu(&a).unwrap();
    assert_err(
        validate_with(&node, |p| p[0] = 6),
        &["GLU", "op_params[0] = 6"],
    );
    assert_err(validate_with(&node, |p| p[1] = 2), &["GLU", "swapped", "2"]);
}

/// xIELU with GGML's stored constants (`αₙ = β + softplus(alpha_n)`, `αₚ = softplus(alpha_p)`).
fn xielu_ref(x: f64, alpha_n: f64, alpha_p: f64, beta: f64, eps: f64) -> f64 {
    let softplus = |v: f64| v.exp().ln_1p();
    let (an, ap) = (beta + softplus(alpha_n), softplus(alpha_p));
    if x > 0.0 {
        ap * x * x + beta * x
    } else {
        (x.min(eps).exp_m1() - x) * an + beta * x
    }
}

#[test]
fn xielu_types_layouts_and_constants() {
    let constants = [(0.8f32, 0.8f32, 0.5f32, -1e-6f32), (-1.0, 2.0, 0.1, 0.2)];
    for (alpha_n, alpha_p, beta, eps) in constants {
        for ty in FLOATS {
            for layout in [Layout::Contiguous, Layout::Transposed, Layout::Padded] {
                let name = format!(
                    "UNARY(op=XIELU,type={ty},layout={layout:?},alpha_n={alpha_n},\
                     alpha_p={alpha_p},beta={beta},eps={eps})"
                );
                check(&name, TOL, |ctx, rng| {
                    let (a, ha) = input(ctx, ty, &[9, 7, 2], layout, rng, -6.0, 4.0)?;
                    let out = ctx.xielu(&a, alpha_n, alpha_p, beta, eps)?;
                    let want = Host::from_fn(ha.ne, |i| {
                        let c = [alpha_n, alpha_p, beta, eps].map(|v| v as f64);
                        xielu_ref(ha.at(i), c[0], c[1], c[2], c[3])
                    });
                    Ok((out, want))
                });
            }
        }
    }
    let ctx = Context::init(1 << 20, true).unwrap();
    let a = ctx.new_tensor_1d(Type::F32, 4).unwrap();
    let node = ctx.xielu(&a, 0.8, 0.8, 0.5, -1e-6).unwrap();
    assert_valid(&node);
    let p: Vec<f32> = node.op_params()[1..5]
        .iter()
        .map(|&v| f32::from_bits(v as u32))
        .collect();
    let sp = |v: f64| v.exp().ln_1p();
    assert!((p[0] as f64 - (0.5 + sp(0.8))).abs() < 1e-6 && (p[1] as f64 - sp(0.8)).abs() < 1e-6);
    assert_eq!((p[2], p[3]), (0.5, -1e-6));
}
