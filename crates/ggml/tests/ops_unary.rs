//! Every UNARY sub-op and SQR, SQRT, LOG, SIN, COS against f64 formulas written here (GGML's
//! definitions from `ggml-cpu/unary-ops.cpp` and `vec.h`), over [-10, 10] and [-150, 150].

mod common;

use common::reference::erf;
use common::*;
use ggml::{Context, Tensor, Type, UnaryOp};

type Builder = fn(&Context, &Tensor) -> ggml::Result<Tensor>;

/// One op: its name, the named builder and its in-place form, the generic sub-op (for
/// UNARY), the reference, the domain (`Positive`: inputs are kept above zero) and whether
/// GGML's CPU reads it from an F16 table (see [`Op::reference`]).
struct Op {
    name: &'static str,
    build: Builder,
    inplace: Builder,
    sub: Option<UnaryOp>,
    f: fn(f64) -> f64,
    domain: Domain,
    table: Option<Table>,
}

/// GGML's CPU computes GELU and GELU_QUICK of F32 and F16 through a table of F16 values
/// (`GGML_GELU_FP16`, `GGML_GELU_QUICK_FP16` in `ggml-cpu/vec.h`): the function at `x` rounded
/// to F16, rounded to F16; its F32 GELU takes 0 at or below −10 and `x` at or above 10
/// instead (where the exact function is that, to 1e-22). BF16 is computed directly.
#[derive(Clone, Copy)]
struct Table {
    /// From this |x| up, F32 inputs get the exact function (GELU's clamps); ∞ for none.
    exact_from: f64,
}

impl Op {
    /// The f64 reference at `x` (an input value of type `ty`): the function, through F16 on
    /// each side where GGML uses its table, so the bound stays GGML's 1e-7 (the table's own
    /// F16 rounding leaves ~1e-7..1e-6).
    fn reference(&self, ty: Type, x: f64) -> f64 {
        match self.table {
            Some(t) if ty != Type::BF16 && !(ty == Type::F32 && x.abs() >= t.exact_from) => {
                round_to(Type::F16, (self.f)(round_to(Type::F16, x)))
            }
            _ => (self.f)(x),
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Domain {
    All,
    Positive,
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

fn ops() -> Vec<Op> {
    use Domain::*;
    macro_rules! unary {
        ($name:literal, $m:ident, $mi:ident, $sub:ident, $f:expr) => {
            Op {
                name: $name,
                build: Context::$m,
                inplace: Context::$mi,
                sub: Some(UnaryOp::$sub),
                f: $f,
                domain: All,
                table: None,
            }
        };
    }
    macro_rules! plain {
        ($name:literal, $m:ident, $mi:ident, $f:expr, $d:expr) => {
            Op {
                name: $name,
                build: Context::$m,
                inplace: Context::$mi,
                sub: None,
                f: $f,
                domain: $d,
                table: None,
            }
        };
    }
    vec![
        unary!("abs", abs, abs_inplace, Abs, f64::abs),
        unary!("sgn", sgn, sgn_inplace, Sgn, |x| if x > 0.0 {
            1.0
        } else if x < 0.0 {
            -1.0
        } else {
            0.0
        }),
        unary!("neg", neg, neg_inplace, Neg, |x| -x),
        unary!("step", step, step_inplace, Step, |x| if x > 0.0 {
            1.0
        } else {
            0.0
        }),
        unary!("tanh", tanh, tanh_inplace, Tanh, f64::tanh),
        unary!("elu", elu, elu_inplace, Elu, |x| if x > 0.0 {
            x
        } else {
            x.exp_m1()
        }),
        unary!("relu", relu, relu_inplace, Relu, |x| if x > 0.0 {
            x
        } else {
            0.0
        }),
        unary!("sigmoid", sigmoid, sigmoid_inplace, Sigmoid, sigmoid),
        // GGML: 0.5·x·(1 + tanh(√(2/π)·x·(1 + 0.044715·x²))), through its F16 table.
        Op {
            table: Some(Table { exact_from: 10.0 }),
            ..unary!("gelu", gelu, gelu_inplace, Gelu, |x| {
                let c = (2.0 / std::f64::consts::PI).sqrt();
                0.5 * x * (1.0 + (c * x * (1.0 + 0.044715 * x * x)).tanh())
            })
        },
        // GGML: x·σ(1.702·x), through its F16 table (no clamps).
        Op {
            table: Some(Table {
                exact_from: f64::INFINITY,
            }),
            ..unary!(
                "gelu_quick",
                gelu_quick,
                gelu_quick_inplace,
                GeluQuick,
                |x| x * sigmoid(1.702 * x)
            )
        },
        unary!("silu", silu, silu_inplace, Silu, |x| x * sigmoid(x)),
        unary!("hardswish", hardswish, hardswish_inplace, Hardswish, |x| x
            * ((x + 3.0) / 6.0).clamp(0.0, 1.0)),
        unary!(
            "hardsigmoid",
            hardsigmoid,
            hardsigmoid_inplace,
            Hardsigmoid,
            |x| { ((x + 3.0) / 6.0).clamp(0.0, 1.0) }
        ),
        unary!("exp", exp, exp_inplace, Exp, f64::exp),
        unary!("expm1", expm1, expm1_inplace, Expm1, f64::exp_m1),
        // ln(1 + eˣ), written stably (GGML returns x itself above 20, within 2e-9 of this).
        unary!("softplus", softplus, softplus_inplace, Softplus, |x| x
            .max(0.0)
            + (-x.abs()).exp().ln_1p()),
        unary!("gelu_erf", gelu_erf, gelu_erf_inplace, GeluErf, |x| 0.5
            * x
            * (1.0 + erf(x / std::f64::consts::SQRT_2))),
        unary!("floor", floor, floor_inplace, Floor, f64::floor),
        unary!("ceil", ceil, ceil_inplace, Ceil, f64::ceil),
        // roundf: halves away from zero.
        unary!("round", round, round_inplace, Round, f64::round),
        unary!("trunc", trunc, trunc_inplace, Trunc, f64::trunc),
        plain!("sqr", sqr, sqr_inplace, |x| x * x, All),
        plain!("sqrt", sqrt, sqrt_inplace, f64::sqrt, Positive),
        plain!("log", log, log_inplace, f64::ln, Positive),
        plain!("sin", sin, sin_inplace, f64::sin, All),
        plain!("cos", cos, cos_inplace, f64::cos, All),
    ]
}

fn run(op: &Op, ty: Type, ne: &[i64], layout: Layout, bound: f64, inplace: bool) {
    let (lo, hi) = match op.domain {
        Domain::All => (-bound, bound),
        Domain::Positive => (0.01, bound),
    };
    let name = format!(
        "{} {ty} {ne:?} {layout:?} [{lo}, {hi}] inplace {inplace}",
        op.name
    );
    check(&name, TOL, |ctx, rng| {
        let (a, ha) = input(ctx, ty, ne, layout, rng, lo, hi)?;
        let out = if inplace {
            let out = (op.inplace)(ctx, &a)?;
            assert_aliases(&out, &a);
            out
        } else {
            (op.build)(ctx, &a)?
        };
        if let Some(sub) = op.sub {
            assert_eq!(out.op_params()[0], sub as i32, "{name}: sub-op id");
        }
        assert_eq!(out.ty(), ty);
        Ok((out, Host::from_fn(ha.ne, |i| op.reference(ty, ha.at(i)))))
    });
}

#[test]
fn every_op_every_type_and_layout() {
    for op in ops() {
        for ty in FLOATS {
            for layout in LAYOUTS {
                run(&op, ty, &[17, 6, 3, 2], layout, 10.0, false);
            }
        }
    }
}

#[test]
fn large_inputs_stay_finite_where_the_math_is() {
    for op in ops() {
        for ty in FLOATS {
            run(&op, ty, &[257, 9], Layout::Contiguous, 150.0, false);
        }
    }
}

#[test]
fn inplace_forms() {
    for op in ops() {
        for ty in [Type::F32, Type::F16] {
            for layout in [
                Layout::Contiguous,
                Layout::Permuted([2, 0, 3, 1]),
                Layout::Padded,
            ] {
                run(&op, ty, &[9, 5, 4, 2], layout, 10.0, true);
            }
        }
    }
}

/// Packed F32 tensors long enough that threads split the flattened tensor into several
/// pieces (a length that is no multiple of a vector or of a row), out of place and in place:
/// the same bits at every thread count (checked by `check`), within the bound.
#[test]
fn packed_tensors_across_pieces() {
    for op in ops() {
        for inplace in [false, true] {
            run(
                &op,
                Type::F32,
                &[4099, 13],
                Layout::Contiguous,
                10.0,
                inplace,
            );
        }
    }
}

#[test]
fn odd_and_five_dimensional_shapes() {
    for op in ops() {
        for ne in [&[1i64][..], &[1, 1, 1, 7], &[3, 2, 2, 2, 3], &[1001]] {
            run(&op, Type::F32, ne, Layout::Contiguous, 10.0, false);
        }
    }
}

#[test]
fn generic_unary_builder_matches_named_ones() {
    for op in ops() {
        let Some(sub) = op.sub else { continue };
        let name = format!("unary({}) generic", sub.name());
        check(&name, TOL, |ctx, rng| {
            let (a, ha) = input(
                ctx,
                Type::F32,
                &[13, 7],
                Layout::Contiguous,
                rng,
                -10.0,
                10.0,
            )?;
            let out = ctx.unary(&a, sub)?;
            Ok((
                out,
                Host::from_fn(ha.ne, |i| op.reference(Type::F32, ha.at(i))),
            ))
        });
        let name = format!("unary_inplace({}) generic", sub.name());
        check(&name, TOL, |ctx, rng| {
            let (a, ha) = input(
                ctx,
                Type::BF16,
                &[13, 7],
                Layout::Transposed,
                rng,
                -10.0,
                10.0,
            )?;
            let out = ctx.unary_inplace(&a, sub)?;
            Ok((
                out,
                Host::from_fn(ha.ne, |i| op.reference(Type::BF16, ha.at(i))),
            ))
        });
    }
}

#[test]
fn rounding_of_halves_and_special_values() {
    let values = [-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, -0.0, 0.0, 3.0, -7.75];
    for op in ops().iter().filter(|o| o.domain == Domain::All) {
        let name = format!("{} special values", op.name);
        check(&name, TOL, |ctx, _| {
            let (a, ha) = input_values(ctx, Type::F32, &[values.len() as i64], &values)?;
            let out = (op.build)(ctx, &a)?;
            Ok((
                out,
                Host::from_fn(ha.ne, |i| op.reference(Type::F32, ha.at(i))),
            ))
        });
    }
}

#[test]
fn xielu_needs_parameters() {
    let ctx = Context::init(1 << 20, true).unwrap();
    let a = ctx.new_tensor_1d(Type::F32, 4).unwrap();
    assert_err(ctx.unary(&a, UnaryOp::Xielu), &["XIELU"]);
}

#[test]
fn reference_erf_is_accurate() {
    // Known values of erf (Abramowitz & Stegun, table 7.1).
    for (x, want) in [
        (0.5, 0.520_499_877_813_046_5),
        (1.0, 0.842_700_792_949_714_9),
        (2.0, 0.995_322_265_018_952_7),
        (-1.5, -0.966_105_146_475_310_7),
    ] {
        assert!((erf(x) - want).abs() < 1e-9, "erf({x}) = {}", erf(x));
    }
}

#[test]
fn extreme_finite_inputs() {
    // Where the function is finite (or the f32 result overflows to the same infinity), no
    // NaN may appear: silu, sigmoid, softplus, gelu, … at ±150 and at the ends of f32. Not
    // GELU_QUICK beyond F16's range, where GGML's table gives NaN (next test).
    let values = [
        -150.0, 150.0, -88.8, 88.8, -1e4, 1e4, -3e38, 3e38, -1e-30, 1e-30,
    ];
    for op in ops().iter().filter(|o| o.domain == Domain::All) {
        let name = format!("{} extreme values", op.name);
        let values: Vec<f64> = match op.sub {
            Some(UnaryOp::GeluQuick) => values.into_iter().filter(|&x| x > -65520.0).collect(),
            _ => values.to_vec(),
        };
        check(&name, TOL, |ctx, _| {
            let (a, ha) = input_values(ctx, Type::F32, &[values.len() as i64], &values)?;
            let out = (op.build)(ctx, &a)?;
            Ok((
                out,
                Host::from_fn(ha.ne, |i| op.reference(Type::F32, ha.at(i))),
            ))
        });
    }
}

/// GELU_QUICK of F32 as GGML's CPU gives it beyond F16's range: its table is read at `x`
/// rounded to F16, which is ±∞ from 65520 up, and −∞·σ(−∞) is NaN; so NaN at or below
/// −65520 (and at −∞), +∞ at or above 65520, −0 just inside (−60000).
#[test]
fn gelu_quick_beyond_f16_range_as_ggml() {
    let ctx = Context::init(1 << 20, false).unwrap();
    let values = [
        -3e38f32,
        f32::NEG_INFINITY,
        -65520.0,
        -60000.0,
        65520.0,
        3e38,
    ];
    let a = ctx.new_tensor_1d(Type::F32, values.len() as i64).unwrap();
    a.set_f32(&values).unwrap();
    let out = ctx.gelu_quick(&a).unwrap();
    let graph = ctx.build_forward_expand(&out).unwrap();
    backends()[0].1.graph_compute(&graph).unwrap();
    let got = out.get_f32().unwrap();
    assert!(got[..3].iter().all(|v| v.is_nan()), "{got:?}");
    assert_eq!(got[3].to_bits(), (-0.0f32).to_bits(), "{got:?}");
    assert_eq!(&got[4..], &[f32::INFINITY; 2], "{got:?}");
}
