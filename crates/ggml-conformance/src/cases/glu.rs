//! The seven GLU ops (GGML's `test_glu`, `test_glu_split`, `test_swiglu_oai`, named by the GLU
//! op) in fused, swapped and split forms, and XIELU (GGML's `test_xielu`, with its constants).

use std::f64::consts::{FRAC_2_PI, SQRT_2};

use ggml::ops::GluOp;
use ggml::{Context, Tensor, Type};

use crate::case::{Case, Input, Layout, Metric, Vars};
use crate::cases::unary::erf;
use crate::host::Host;

/// SWIGLU_OAI's constants in the cases (gpt-oss uses alpha 1.702, limit 7).
const OAI_ALPHA: f32 = 1.702;
const OAI_LIMIT: f32 = 7.0;

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// `act(x)·g` for `op` (SWIGLU_OAI with `alpha` and `limit`).
fn gate(op: GluOp, x: f64, g: f64, alpha: f64, limit: f64) -> f64 {
    match op {
        GluOp::Reglu => x.max(0.0) * g,
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
        GluOp::SwigluClamp => {
            let x = x.min(limit);
            x * sigmoid(x) * g.clamp(-limit, limit)
        }
    }
}

/// How the gate's two inputs are given.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Form {
    /// Halves of each row, x first.
    Fused,
    /// Halves of each row, g first.
    Swapped,
    /// Two tensors.
    Split,
}

/// The node for `op` in `form`, through the named builders where GGML has them.
fn build(ctx: &Context, op: GluOp, form: Form, x: &[Tensor]) -> ggml::Result<Tensor> {
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
        GluOp::SwigluOai | GluOp::SwigluClamp => None,
    };
    if op == GluOp::SwigluClamp {
        // GGML's only builder is the split one; the fused forms through the generic builder
        // take limit 0 (as GGML's `ggml_glu` would leave it).
        return match form {
            Form::Split => ctx.swiglu_clamp(&x[0], &x[1], OAI_LIMIT),
            Form::Fused => ctx.glu(&x[0], op, false),
            Form::Swapped => ctx.glu(&x[0], op, true),
        };
    }
    match (named, form) {
        (Some((f, _, _)), Form::Fused) => f(ctx, &x[0]),
        (Some((_, f, _)), Form::Swapped) => f(ctx, &x[0]),
        (Some((_, _, f)), Form::Split) => f(ctx, &x[0], &x[1]),
        (None, Form::Split) => ctx.swiglu_oai(&x[0], Some(&x[1]), OAI_ALPHA, OAI_LIMIT),
        (None, Form::Fused) => ctx.swiglu_oai(&x[0], None, OAI_ALPHA, OAI_LIMIT),
        // GGML has no swapped SWIGLU_OAI builder: the generic one (alpha = limit = 0).
        (None, Form::Swapped) => ctx.glu(&x[0], op, true),
    }
}

/// The reference of `op` in `form` over the inputs.
fn reference(op: GluOp, form: Form, x: &[Host]) -> Host {
    let (alpha, limit) = match (op, form) {
        (GluOp::SwigluOai, Form::Swapped) => (0.0, 0.0),
        (GluOp::SwigluClamp, Form::Split) => (0.0, OAI_LIMIT as f64),
        (GluOp::SwigluClamp, _) => (0.0, 0.0),
        _ => (OAI_ALPHA as f64, OAI_LIMIT as f64),
    };
    let a = &x[0];
    match form {
        Form::Split => Host::from_fn(a.ne, |i| gate(op, a.at(i), x[1].at(i), alpha, limit)),
        Form::Fused | Form::Swapped => {
            let nc = a.ne[0] / 2;
            a.map_rows(nc, |_, row| {
                let (lo, hi) = row.split_at(nc);
                let (v, g) = if form == Form::Swapped {
                    (hi, lo)
                } else {
                    (lo, hi)
                };
                (0..nc)
                    .map(|j| gate(op, v[j], g[j], alpha, limit))
                    .collect()
            })
        }
    }
}

fn glu_case(
    out: &mut Vec<Case>,
    op: GluOp,
    form: Form,
    ty: Type,
    ne: &[i64],
    layout: (Layout, &str),
) {
    let mut vars = Vars::new()
        .ty("type", ty)
        .list("ne_a", ne)
        .val("layout", layout.1);
    vars = match form {
        Form::Split => vars.flag("split", true),
        _ => vars.flag("swapped", form == Form::Swapped),
    };
    if op == GluOp::SwigluOai && form != Form::Swapped {
        vars = vars.float("alpha", OAI_ALPHA).float("limit", OAI_LIMIT);
    }
    if op == GluOp::SwigluClamp && form == Form::Split {
        vars = vars.float("limit", OAI_LIMIT);
    }
    let input = || Input::new(ty, ne).layout(layout.0).uniform(-9.0, 9.0);
    let inputs = match form {
        Form::Split => vec![input(), input()],
        _ => vec![input()],
    };
    let case = Case::new(
        op.name(),
        vars,
        inputs,
        move |ctx, x| build(ctx, op, form, x),
        move |x| reference(op, form, x),
    );
    // A BF16 result computed in f32 lands one BF16 step (2⁻⁸ relative) from the rounded f64
    // reference wherever the two straddle a rounding boundary, which alone exceeds 1e-7 in a
    // small case; GGML's grid has no BF16 GLU case to take a threshold from.
    out.push(if ty == Type::BF16 {
        case.metric(Metric::Nmse(BF16_NMSE))
    } else {
        case
    });
}

/// The threshold for BF16 results (see [`glu_case`]).
const BF16_NMSE: f64 = 1e-5;

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

/// The GLU and XIELU cases.
pub fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    let forms = [Form::Fused, Form::Swapped, Form::Split];
    let contiguous = (Layout::Contiguous, "contiguous");
    for op in GluOp::ALL {
        for form in forms {
            for ty in [Type::F32, Type::F16, Type::BF16] {
                glu_case(&mut out, op, form, ty, &[10, 5, 3], contiguous);
            }
        }
    }
    let layouts = [
        (Layout::Permuted([1, 0, 2, 3]), "permuted"),
        (Layout::Transposed, "transposed"),
        (Layout::Padded, "padded"),
    ];
    for op in [GluOp::Swiglu, GluOp::Geglu, GluOp::SwigluOai] {
        for form in forms {
            for layout in layouts {
                glu_case(&mut out, op, form, Type::F32, &[8, 6, 3, 2], layout);
            }
            // An odd row (its last element unused in the fused forms), a 5-D tensor.
            glu_case(&mut out, op, form, Type::F32, &[7, 3], contiguous);
            glu_case(&mut out, op, form, Type::F16, &[6, 2, 3, 2, 2], contiguous);
        }
    }
    let constants = [(0.8f32, 0.8f32, 0.5f32, -1e-6f32), (-1.0, 2.0, 0.1, 0.2)];
    for (alpha_n, alpha_p, beta, eps) in constants {
        for ty in [Type::F32, Type::F16, Type::BF16] {
            for layout in [
                contiguous,
                (Layout::Transposed, "transposed"),
                (Layout::Padded, "padded"),
            ] {
                out.push(Case::new(
                    "XIELU",
                    Vars::new()
                        .ty("type", ty)
                        .list("ne_a", &[9, 7, 2])
                        .val("layout", layout.1)
                        .float("alpha_n", alpha_n)
                        .float("alpha_p", alpha_p)
                        .float("beta", beta)
                        .float("eps", eps),
                    vec![Input::new(ty, &[9, 7, 2])
                        .layout(layout.0)
                        .uniform(-6.0, 4.0)],
                    move |ctx, x| ctx.xielu(&x[0], alpha_n, alpha_p, beta, eps),
                    move |x| {
                        let c = [alpha_n, alpha_p, beta, eps].map(f64::from);
                        Host::from_fn(x[0].ne, |i| xielu_ref(x[0].at(i), c[0], c[1], c[2], c[3]))
                    },
                ));
            }
        }
    }
    out
}
