//! The UNARY ops (GGML's `test_unary`, named by the unary op), SQR, SQRT, LOG, SIN, COS and
//! SCALE.

use ggml::{Type, UnaryOp};

use crate::case::{Case, Input, Vars};
use crate::reference::map;

/// The f64 definition of each unary op (GGML's formulas, evaluated without shortcuts).
fn unary_ref(op: UnaryOp, x: f64) -> f64 {
    let sigmoid = |z: f64| 1.0 / (1.0 + (-z).exp());
    // The piecewise-linear sigmoid: 0 below −3, 1 above 3, x/6 + 1/2 between.
    let hard_sigmoid = |z: f64| (z / 6.0 + 0.5).clamp(0.0, 1.0);
    match op {
        UnaryOp::Abs => x.abs(),
        // +1, −1, or 0 for zero (Rust's `signum` gives ±1 at ±0).
        UnaryOp::Sgn => f64::from(u8::from(x > 0.0)) - f64::from(u8::from(x < 0.0)),
        UnaryOp::Neg => -x,
        UnaryOp::Step => f64::from(u8::from(x > 0.0)),
        UnaryOp::Tanh => x.tanh(),
        // x for x > 0, eˣ − 1 otherwise: both branches at once, one of them always 0.
        UnaryOp::Elu => x.max(0.0) + (x.min(0.0).exp() - 1.0),
        UnaryOp::Relu => x.max(0.0),
        UnaryOp::Sigmoid => sigmoid(x),
        UnaryOp::Gelu => {
            let c = (2.0 / std::f64::consts::PI).sqrt();
            0.5 * x * (1.0 + (c * (x + 0.044715 * x * x * x)).tanh())
        }
        UnaryOp::GeluQuick => x * sigmoid(1.702 * x),
        UnaryOp::Silu => x * sigmoid(x),
        UnaryOp::Hardswish => x * hard_sigmoid(x),
        UnaryOp::Hardsigmoid => hard_sigmoid(x),
        UnaryOp::Exp => x.exp(),
        UnaryOp::Expm1 => x.exp_m1(),
        UnaryOp::Softplus => {
            if x > 20.0 {
                x
            } else {
                (1.0 + x.exp()).ln()
            }
        }
        UnaryOp::GeluErf => 0.5 * x * (1.0 + erf(x / std::f64::consts::SQRT_2)),
        UnaryOp::Floor => x.floor(),
        UnaryOp::Ceil => x.ceil(),
        // Half away from zero, as C's roundf.
        UnaryOp::Round => x.round(),
        UnaryOp::Trunc => x.trunc(),
        UnaryOp::Xielu => f64::NAN,
    }
}

/// `erf(x) = 2/√π ∫₀ˣ e^(−t²) dt` by composite Simpson's rule (1024 panels per unit of x,
/// accurate to about 1e-13), 1 beyond |x| = 6 where it is 1 to 17 digits.
pub fn erf(x: f64) -> f64 {
    let a = x.abs();
    if a == 0.0 || a >= 6.0 {
        return if a == 0.0 { x } else { 1f64.copysign(x) };
    }
    let n = ((a * 1024.0).ceil() as usize).max(2) & !1;
    let h = a / n as f64;
    let f = |t: f64| (-t * t).exp();
    let inner: f64 = (1..n)
        .map(|k| f(k as f64 * h) * if k % 2 == 1 { 4.0 } else { 2.0 })
        .sum();
    let integral = (f(0.0) + inner + f(a)) * h / 3.0;
    (integral * 2.0 / std::f64::consts::PI.sqrt()).copysign(x)
}

const UNARY_OPS: [UnaryOp; 21] = [
    UnaryOp::Abs,
    UnaryOp::Sgn,
    UnaryOp::Neg,
    UnaryOp::Step,
    UnaryOp::Tanh,
    UnaryOp::Elu,
    UnaryOp::Relu,
    UnaryOp::Sigmoid,
    UnaryOp::Gelu,
    UnaryOp::GeluQuick,
    UnaryOp::Silu,
    UnaryOp::Hardswish,
    UnaryOp::Hardsigmoid,
    UnaryOp::Exp,
    UnaryOp::Expm1,
    UnaryOp::Softplus,
    UnaryOp::GeluErf,
    UnaryOp::Floor,
    UnaryOp::Ceil,
    UnaryOp::Round,
    UnaryOp::Trunc,
];

type MapBuilder = fn(&ggml::Context, &ggml::Tensor) -> ggml::Result<ggml::Tensor>;

/// SQR, SQRT, LOG, SIN, COS: name, builder, f64 definition, input range (GGML's ranges).
type MapOp = (&'static str, MapBuilder, fn(f64) -> f64, f64, f64);

const MAP_OPS: [MapOp; 5] = [
    ("SQR", ggml::Context::sqr, |x| x * x, -10.0, 10.0),
    ("SQRT", ggml::Context::sqrt, f64::sqrt, 0.0, 10.0),
    ("LOG", ggml::Context::log, f64::ln, 0.1, 10.0),
    ("SIN", ggml::Context::sin, f64::sin, -6.5, 6.5),
    ("COS", ggml::Context::cos, f64::cos, -6.5, 6.5),
];

/// The unary cases.
pub fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    for op in UNARY_OPS {
        for ty in [Type::F32, Type::F16] {
            for v in [false, true] {
                for ne in [[128i64, 2, 2, 2], [5, 7, 11, 3]] {
                    out.push(Case::new(
                        op.name(),
                        Vars::new().ty("type", ty).list("ne_a", &ne).flag("v", v),
                        vec![Input::new(ty, &ne).uniform(-150.0, 150.0).padded_if(v)],
                        move |ctx, x| ctx.unary(&x[0], op),
                        move |x| map(&x[0], |a| unary_ref(op, a)),
                    ));
                }
            }
        }
    }
    // In place (the result is a view of the input).
    for op in [UnaryOp::Silu, UnaryOp::Neg, UnaryOp::Exp] {
        let ne = [9i64, 4, 3, 1];
        out.push(Case::new(
            op.name(),
            Vars::new()
                .ty("type", Type::F32)
                .list("ne_a", &ne)
                .flag("inplace", true),
            vec![Input::new(Type::F32, &ne).uniform(-10.0, 10.0)],
            move |ctx, x| ctx.unary_inplace(&x[0], op),
            move |x| map(&x[0], |a| unary_ref(op, a)),
        ));
    }
    for (name, build, f, lo, hi) in MAP_OPS {
        for ty in [Type::F32, Type::F16] {
            for (ne, v) in [([10i64, 2, 2, 2], false), ([17, 3, 5, 1], true)] {
                out.push(Case::new(
                    name,
                    Vars::new().ty("type", ty).list("ne", &ne).flag("v", v),
                    vec![Input::new(ty, &ne).uniform(lo, hi).padded_if(v)],
                    move |ctx, x| build(ctx, &x[0]),
                    move |x| map(&x[0], f),
                ));
            }
        }
    }
    for ty in [Type::F32, Type::F16] {
        for (ne, scale, bias) in [
            ([10i64, 10, 10, 10], 2.0f32, 0.0f32),
            ([7, 3, 5, 2], -0.3, 1.25),
        ] {
            out.push(Case::new(
                "SCALE",
                Vars::new()
                    .ty("type", ty)
                    .list("ne", &ne)
                    .float("scale", scale)
                    .float("bias", bias),
                vec![Input::new(ty, &ne)],
                move |ctx, x| ctx.scale_bias(&x[0], scale, bias),
                move |x| map(&x[0], |a| a * scale as f64 + bias as f64),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::erf;

    #[test]
    fn erf_known_values() {
        // erf(0.5), erf(1), erf(2) to 15 digits (Abramowitz & Stegun, table 7.1).
        for (x, want) in [
            (0.5, 0.520_499_877_813_047),
            (1.0, 0.842_700_792_949_715),
            (2.0, 0.995_322_265_018_953),
        ] {
            assert!((erf(x) - want).abs() < 1e-12, "erf({x}) = {}", erf(x));
            assert!((erf(-x) + want).abs() < 1e-12);
        }
        assert_eq!(erf(0.0), 0.0);
        assert_eq!(erf(40.0), 1.0);
    }
}
