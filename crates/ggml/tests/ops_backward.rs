//! The backward ops SILU_BACK, RMS_NORM_BACK, SOFT_MAX_BACK, GET_ROWS_BACK and
//! CROSS_ENTROPY_LOSS_BACK against f64 gradients written here from the forward ops'
//! definitions (not from GGML's rearranged formulas), the optimizer steps OPT_STEP_ADAMW and
//! OPT_STEP_SGD against their update rules in f64, their op parameters, node validation and
//! errors.

mod common;

use common::*;
use ggml::{Context, Op, Tensor, Type};

const NE: [i64; 4] = [37, 5, 3, 2];

/// I32 indices tensor holding `v`.
fn rows(ctx: &Context, v: &[i32]) -> ggml::Result<Tensor> {
    let t = ctx.new_tensor_1d(Type::I32, v.len() as i64)?;
    t.set_bytes(
        &v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<_>>(),
        0,
    )?;
    Ok(t)
}

/// SILU_BACK: `dy · d/dx (x · σ(x))`, `dy` in slot 0 and `x` in slot 1 (GGML's CPU order),
/// over contiguous and permuted inputs.
#[test]
fn silu_back_is_the_derivative_of_silu() {
    for layout in [Layout::Contiguous, Layout::Permuted([0, 2, 1, 3])] {
        check(&format!("silu_back {layout:?}"), 1e-12, |ctx, rng| {
            let (dy, hdy) = input(ctx, Type::F32, &NE, Layout::Contiguous, rng, -2.0, 2.0)?;
            let (x, hx) = input(ctx, Type::F32, &NE, layout, rng, -6.0, 6.0)?;
            let out = ctx.silu_back(&dy, &x)?;
            assert_eq!(out.op(), Op::SiluBack);
            let want = Host::from_fn(hx.ne, |i| {
                let (x, s) = (hx.at(i), 1.0 / (1.0 + (-hx.at(i)).exp()));
                hdy.at(i) * (s + x * s * (1.0 - s))
            });
            Ok((out, want))
        });
    }
}

/// RMS_NORM_BACK: the gradient of `y = x / rms(x)`, `rms = √(mean(x²) + eps)`, per row:
/// `dz / rms − x · Σ(x·dz) / (n · rms³)`; `eps` stored as RMS_NORM's parameter.
#[test]
fn rms_norm_back_is_the_gradient_of_rms_norm() {
    for eps in [1e-6f32, 1e-1] {
        check(&format!("rms_norm_back eps {eps}"), 1e-10, |ctx, rng| {
            let (dz, hdz) = input(ctx, Type::F32, &NE, Layout::Contiguous, rng, -1.0, 1.0)?;
            let (x, hx) = input(ctx, Type::F32, &NE, Layout::Contiguous, rng, -3.0, 3.0)?;
            let out = ctx.rms_norm_back(&dz, &x, eps)?;
            assert_eq!(out.op_params()[0], eps.to_bits() as i32);
            let mut v = Vec::new();
            for r in 0..hx.nrows() {
                let n = hx.ne[0];
                let (x, dz) = (&hx.v[r * n..(r + 1) * n], &hdz.v[r * n..(r + 1) * n]);
                let ms = x.iter().map(|v| v * v).sum::<f64>() / n as f64;
                let rms = (ms + eps as f64).sqrt();
                let xdz: f64 = x.iter().zip(dz).map(|(a, b)| a * b).sum();
                v.extend((0..n).map(|k| dz[k] / rms - x[k] * xdz / (n as f64 * rms.powi(3))));
            }
            Ok((out, Host { ne: hx.ne, v }))
        });
    }
}

/// SOFT_MAX_BACK: the gradient of `y = softmax(scale · x)` given `y`: per row
/// `scale · y_k · (dy_k − Σ y_i · dy_i)`; in place too.
#[test]
fn soft_max_back_is_the_gradient_of_soft_max() {
    for (scale, inplace) in [(1.0f32, false), (0.1, false), (0.5, true)] {
        check(
            &format!("soft_max_back {scale} {inplace}"),
            1e-10,
            |ctx, rng| {
                let (dy, hdy) = input(ctx, Type::F32, &NE, Layout::Contiguous, rng, -1.0, 1.0)?;
                // A soft max's rows: positive, summing to 1.
                let (logits, hl) = input(ctx, Type::F32, &NE, Layout::Contiguous, rng, -2.0, 2.0)?;
                let y = ctx.soft_max_ext(&logits, None, scale, 0.0)?;
                let hy = hl.map_rows(hl.ne[0], |_, x| {
                    let m = x.iter().cloned().fold(f64::MIN, f64::max);
                    let e: Vec<f64> = x.iter().map(|v| ((v - m) * scale as f64).exp()).collect();
                    let s: f64 = e.iter().sum();
                    e.iter().map(|v| v / s).collect()
                });
                let out = if inplace {
                    let o = ctx.soft_max_ext_back_inplace(&dy, &y, scale, 0.0)?;
                    assert_aliases(&o, &dy);
                    o
                } else {
                    ctx.soft_max_ext_back(&dy, &y, scale, 0.0)?
                };
                let mut v = Vec::new();
                for r in 0..hy.nrows() {
                    let n = hy.ne[0];
                    let (y, dy) = (&hy.v[r * n..(r + 1) * n], &hdy.v[r * n..(r + 1) * n]);
                    let dot: f64 = y.iter().zip(dy).map(|(a, b)| a * b).sum();
                    v.extend((0..n).map(|k| scale as f64 * y[k] * (dy[k] - dot)));
                }
                Ok((out, Host { ne: hy.ne, v }))
            },
        );
    }
}

/// GET_ROWS_BACK: row `r` of the result is the sum of the gradient rows `i` with
/// `rows[i] = r` (zero for rows never gathered), F32 from F32 and F16 gradients, with more
/// gradient rows than indices (test-backend-ops' view of the indices).
#[test]
fn get_rows_back_sums_gradient_rows_into_their_sources() {
    for ty in [Type::F32, Type::F16] {
        check(&format!("get_rows_back {ty}"), 1e-12, |ctx, rng| {
            let idx = [4, 0, 4, 6, 4];
            let (g, hg) = input(ctx, ty, &[9, 6], Layout::Contiguous, rng, -1.0, 1.0)?;
            let fwd = ctx.new_tensor_2d(Type::F32, 9, 7)?;
            let b = rows(ctx, &idx)?;
            let out = ctx.get_rows_back(&g, &b, &fwd)?;
            assert_eq!((out.ty(), out.ne()), (Type::F32, [9, 7, 1, 1, 1]));
            let want = Host::from_fn(shape(&[9, 7]), |i| {
                idx.iter()
                    .enumerate()
                    .filter(|(_, &r)| r as usize == i[1])
                    .map(|(k, _)| hg.at([i[0], k, 0, 0, 0]))
                    .sum()
            });
            Ok((out, want))
        });
    }
    check_compute_fails(
        "get_rows_back out of range",
        &["GET_ROWS_BACK", "7"],
        |ctx, rng| {
            let (g, _) = input(ctx, Type::F32, &[4, 2], Layout::Contiguous, rng, -1.0, 1.0)?;
            let fwd = ctx.new_tensor_2d(Type::F32, 4, 7)?;
            let b = rows(ctx, &[1, 7])?;
            ctx.get_rows_back(&g, &b, &fwd)
        },
    );
}

/// CROSS_ENTROPY_LOSS_BACK: the gradient of `−(1/rows) Σ c·log softmax(b)` with respect to
/// the logits `b`, times the loss's gradient `a`: `a · (softmax(b) − c) / rows`.
#[test]
fn cross_entropy_loss_back_is_the_gradient_of_the_loss() {
    check("cross_entropy_loss_back", 1e-10, |ctx, rng| {
        let (g, hg) = input(ctx, Type::F32, &[1], Layout::Contiguous, rng, 0.5, 2.0)?;
        let (b, hb) = input(ctx, Type::F32, &NE, Layout::Contiguous, rng, -3.0, 3.0)?;
        let (c, hc) = input(ctx, Type::F32, &NE, Layout::Contiguous, rng, 0.0, 1.0)?;
        let out = ctx.cross_entropy_loss_back(&g, &b, &c)?;
        let rows = hb.nrows() as f64;
        let sm = hb.map_rows(hb.ne[0], |_, x| {
            let e: Vec<f64> = x.iter().map(|v| v.exp()).collect();
            let s: f64 = e.iter().sum();
            e.iter().map(|v| v / s).collect()
        });
        let want = Host::from_fn(hb.ne, |i| hg.v[0] * (sm.at(i) - hc.at(i)) / rows);
        Ok((out, want))
    });
}

/// Runs `out` on the CPU backend.
fn compute(ctx: &Context, out: &Tensor) {
    let cpu = ggml::backend::cpu_init().unwrap();
    cpu.graph_compute(&ctx.build_forward_expand(out).unwrap())
        .unwrap();
}

/// The F32 values of `t`.
fn f64s(t: &Tensor) -> Vec<f64> {
    t.get_f32().unwrap().iter().map(|&v| v as f64).collect()
}

/// `n` values of a fixed pattern in about [-1, 1].
fn pattern(n: usize, k: usize) -> Vec<f32> {
    (0..n)
        .map(|i| (((i * 7 + k * 13) % 23) as f32 - 11.0) / 11.0)
        .collect()
}

/// Asserts `got` is within `tol` (relative to the largest magnitude) of `want`.
fn near(what: &str, got: &[f64], want: &[f64], tol: f64) {
    let scale = want.iter().fold(1e-30f64, |m, v| m.max(v.abs()));
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= tol * scale, "{what}[{k}]: {g} vs {w}");
    }
}

/// OPT_STEP_ADAMW updates the parameters and both moments in place by AdamW's rule (f64
/// reference), the result a view of the parameters; OPT_STEP_SGD likewise by SGD's; both
/// refuse a tensor not marked as a parameter.
#[test]
fn optimizer_steps_update_in_place() {
    let n = NE.iter().product::<i64>() as usize;
    let ctx = Context::init(1 << 22, false).unwrap();
    let new = |k| {
        let t = ctx.new_tensor(Type::F32, &NE).unwrap();
        t.set_f32(&pattern(n, k)).unwrap();
        t
    };
    let (w, g) = (new(1), new(2));
    let m = new(3);
    let v = ctx.new_tensor(Type::F32, &NE).unwrap();
    v.set_f32(&pattern(n, 4).iter().map(|x| x * x).collect::<Vec<_>>())
        .unwrap();
    let hp = [
        0.01f32,
        0.9,
        0.999,
        1e-8,
        0.1,
        1.0 / (1.0 - 0.9),
        1.0 / (1.0 - 0.999),
    ];
    let h = ctx.new_tensor_1d(Type::F32, 7).unwrap();
    h.set_f32(&hp).unwrap();
    assert_err(
        ctx.opt_step_adamw(&w, &g, &m, &v, &h),
        &["OPT_STEP_ADAMW", "set_param"],
    );
    w.set_param().unwrap();
    let (w0, g0, m0, v0) = (f64s(&w), f64s(&g), f64s(&m), f64s(&v));
    let out = ctx.opt_step_adamw(&w, &g, &m, &v, &h).unwrap();
    assert_aliases(&out, &w);
    validate_node(&out).unwrap();
    compute(&ctx, &out);
    let [alpha, b1, b2, eps, wd, b1h, b2h] = hp.map(|x| x as f64);
    let m1: Vec<f64> = (0..n).map(|i| m0[i] * b1 + g0[i] * (1.0 - b1)).collect();
    let v1: Vec<f64> = (0..n)
        .map(|i| v0[i] * b2 + g0[i] * g0[i] * (1.0 - b2))
        .collect();
    let w1: Vec<f64> = (0..n)
        .map(|i| w0[i] * (1.0 - alpha * wd) - alpha * m1[i] * b1h / ((v1[i] * b2h).sqrt() + eps))
        .collect();
    near("adamw m", &f64s(&m), &m1, 1e-6);
    near("adamw v", &f64s(&v), &v1, 1e-6);
    near("adamw w", &f64s(&w), &w1, 1e-6);

    let s = ctx.new_tensor(Type::F32, &NE).unwrap();
    s.set_f32(&pattern(n, 5)).unwrap();
    let sp = ctx.new_tensor_1d(Type::F32, 2).unwrap();
    sp.set_f32(&[0.1, 0.01]).unwrap();
    assert_err(
        ctx.opt_step_sgd(&s, &g, &sp),
        &["OPT_STEP_SGD", "set_param"],
    );
    s.set_param().unwrap();
    let s0 = f64s(&s);
    let out = ctx.opt_step_sgd(&s, &g, &sp).unwrap();
    assert_aliases(&out, &s);
    compute(&ctx, &out);
    let want: Vec<f64> = (0..n)
        .map(|i| s0[i] * (1.0 - 0.1f32 as f64 * 0.01f32 as f64) - 0.1f32 as f64 * g0[i])
        .collect();
    near("sgd", &f64s(&s), &want, 1e-6);
    let seven = ctx.new_tensor_1d(Type::F32, 7).unwrap();
    assert_err(
        ctx.opt_step_sgd(&s, &g, &seven),
        &["OPT_STEP_SGD", "2 packed values"],
    );
}

/// Nodes built here pass validation as if received from outside; bad operands and
/// parameters are refused naming the op and the argument.
#[test]
fn backward_nodes_validate_and_bad_arguments_are_refused() {
    let ctx = Context::init(1 << 20, true).unwrap();
    let a = ctx.new_tensor_2d(Type::F32, 8, 3).unwrap();
    let b = ctx.new_tensor_2d(Type::F32, 8, 3).unwrap();
    let h = ctx.new_tensor_2d(Type::F16, 8, 3).unwrap();
    let c = ctx.new_tensor_2d(Type::F32, 8, 4).unwrap();
    let idx = ctx.new_tensor_1d(Type::I32, 3).unwrap();
    for n in [
        ctx.silu_back(&a, &b).unwrap(),
        ctx.rms_norm_back(&a, &b, 1e-5).unwrap(),
        ctx.soft_max_ext_back(&a, &b, 0.5, 0.0).unwrap(),
        ctx.get_rows_back(&a, &idx, &c).unwrap(),
        ctx.cross_entropy_loss_back(&ctx.new_tensor_1d(Type::F32, 1).unwrap(), &a, &b)
            .unwrap(),
    ] {
        validate_node(&n).unwrap();
    }
    assert_err(ctx.silu_back(&a, &c), &["SILU_BACK", "shape"]);
    assert_err(ctx.rms_norm_back(&h, &h, 1e-5), &["RMS_NORM_BACK", "f32"]);
    assert_err(
        ctx.rms_norm_back(&a, &b, -1.0),
        &["RMS_NORM_BACK", "eps = -1"],
    );
    assert_err(
        ctx.soft_max_ext_back(&a, &b, 1.0, 8.0),
        &["SOFT_MAX_BACK", "max_bias = 8"],
    );
    let long = ctx.new_tensor_1d(Type::I32, 4).unwrap();
    assert_err(
        ctx.get_rows_back(&a, &long, &c),
        &["GET_ROWS_BACK", "at most a.ne1 = 3"],
    );
    assert_err(
        ctx.cross_entropy_loss_back(&a, &a, &b),
        &["CROSS_ENTROPY_LOSS_BACK", "one element"],
    );
    let wide = ctx.new_tensor_2d(Type::F32, 9, 4).unwrap();
    assert_err(
        ctx.get_rows_back(&a, &idx, &wide),
        &["GET_ROWS_BACK", "a.ne0 = 8"],
    );
}
