//! POOL_1D and POOL_2D against plain f64 references: max and average, odd sizes, strides,
//! paddings, F32/F16/BF16 inputs, non-contiguous layouts, 1 to 3 threads; shape-rule errors.

mod common;

use common::*;
use ggml::ops::PoolOp;
use ggml::{Context, Type};

/// The pooled size as GGML defines it (computed in f32, truncated toward zero).
fn pooled(ins: usize, k: i32, s: i32, p: i32) -> usize {
    ((ins as f32 + 2.0 * p as f32 - k as f32) / s as f32 + 1.0) as usize
}

/// The window starting at `o·s − p` of length `k`, limited to `0..len`.
fn window(o: usize, k: i32, s: i32, p: i32, len: usize) -> impl Iterator<Item = usize> {
    let start = o as i64 * s as i64 - p as i64;
    (start..start + k as i64)
        .filter(move |&j| (0..len as i64).contains(&j))
        .map(|j| j as usize)
}

mod reference {
    use super::{pooled, window, Host, PoolOp};

    /// Max (−f32::MAX over an empty window) or the mean of the elements inside the row.
    pub fn pool_1d(a: &Host, op: PoolOp, k: i32, s: i32, p: i32) -> Host {
        let mut ne = a.ne;
        ne[0] = pooled(a.ne[0], k, s, p);
        Host::from_fn(ne, |i| {
            let vals: Vec<f64> = window(i[0], k, s, p, a.ne[0])
                .map(|j| a.at([j, i[1], i[2], i[3], 0]))
                .collect();
            match op {
                PoolOp::Max => vals.iter().copied().fold(-f32::MAX as f64, f64::max),
                PoolOp::Avg if vals.is_empty() => 0.0,
                PoolOp::Avg => vals.iter().sum::<f64>() / vals.len() as f64,
            }
        })
    }

    /// Max, or the sum of the elements inside the plane divided by `k0·k1`.
    pub fn pool_2d(a: &Host, op: PoolOp, k: [i32; 2], s: [i32; 2], p: [i32; 2]) -> Host {
        let mut ne = a.ne;
        ne[0] = pooled(a.ne[0], k[0], s[0], p[0]);
        ne[1] = pooled(a.ne[1], k[1], s[1], p[1]);
        Host::from_fn(ne, |i| {
            let mut vals = Vec::new();
            for y in window(i[1], k[1], s[1], p[1], a.ne[1]) {
                for x in window(i[0], k[0], s[0], p[0], a.ne[0]) {
                    vals.push(a.at([x, y, i[2], i[3], 0]));
                }
            }
            match op {
                PoolOp::Max => vals.iter().copied().fold(-f32::MAX as f64, f64::max),
                PoolOp::Avg => vals.iter().sum::<f64>() / (k[0] * k[1]) as f64,
            }
        })
    }
}

const LAYOUTS_4D: [Layout; 3] = [
    Layout::Contiguous,
    Layout::Permuted([2, 0, 3, 1]),
    Layout::Padded,
];

#[test]
fn pool_1d_cases() {
    for ty in FLOATS {
        for op in [PoolOp::Max, PoolOp::Avg] {
            for (k, s, p) in [
                (2, 2, 0),
                (3, 1, 1),
                (3, 2, 1),
                (5, 3, 2),
                (1, 1, 0),
                (4, 4, 3),
            ] {
                for layout in LAYOUTS_4D {
                    let name = format!(
                        "POOL_1D(type={ty},op={op:?},k0={k},s0={s},p0={p},layout={layout:?})"
                    );
                    check(&name, TOL, |ctx, rng| {
                        let (a, ha) = input(ctx, ty, &[11, 3, 2, 2], layout, rng, -1.0, 1.0)?;
                        let out = ctx.pool_1d(&a, op, k, s, p)?;
                        Ok((out, reference::pool_1d(&ha, op, k, s, p)))
                    });
                }
            }
        }
    }
}

#[test]
fn pool_2d_cases() {
    for ty in FLOATS {
        for op in [PoolOp::Max, PoolOp::Avg] {
            for (k, s, p) in [
                ([2, 2], [2, 2], [0, 0]),
                ([3, 2], [1, 2], [1, 0]),
                ([3, 3], [2, 1], [1, 1]),
                ([5, 1], [3, 1], [2, 0]),
                ([4, 4], [4, 3], [3, 3]),
            ] {
                for layout in LAYOUTS_4D {
                    let name = format!(
                        "POOL_2D(type={ty},op={op:?},k={k:?},s={s:?},p={p:?},layout={layout:?})"
                    );
                    check(&name, TOL, |ctx, rng| {
                        let (a, ha) = input(ctx, ty, &[9, 7, 3, 2], layout, rng, -1.0, 1.0)?;
                        let out =
                            ctx.pool_2d(&a, op, k[0], k[1], s[0], s[1], p[0] as f32, p[1] as f32)?;
                        Ok((out, reference::pool_2d(&ha, op, k, s, p)))
                    });
                }
            }
        }
    }
}

#[test]
fn shape_errors() {
    let ctx = Context::init(1 << 20, true).unwrap();
    let a = ctx.new_tensor_3d(Type::F32, 6, 5, 2).unwrap();
    assert_err(
        ctx.pool_1d(&a, PoolOp::Max, 0, 1, 0),
        &["POOL_1D", "k0 = 0"],
    );
    assert_err(
        ctx.pool_1d(&a, PoolOp::Max, 2, 0, 0),
        &["POOL_1D", "s0 = 0"],
    );
    assert_err(
        ctx.pool_1d(&a, PoolOp::Avg, 9, 1, 1),
        &["POOL_1D", "too small", "window 9"],
    );
    assert_err(
        ctx.pool_2d(&a, PoolOp::Max, 2, 7, 1, 1, 0.0, 0.0),
        &["POOL_2D", "axis 1", "window 7"],
    );
    assert_err(
        ctx.pool_2d(&a, PoolOp::Max, 2, 2, 1, 1, 0.5, 0.0),
        &["POOL_2D", "p0 = 0.5", "whole number"],
    );
    assert_err(
        ctx.pool_2d(&a, PoolOp::Max, 2, 2, 1, -1, 0.0, 0.0),
        &["POOL_2D", "s1 = -1"],
    );
    let i = ctx.new_tensor_2d(Type::I32, 6, 5).unwrap();
    assert_err(ctx.pool_1d(&i, PoolOp::Max, 2, 1, 0), &["POOL_1D", "i32"]);
    let five = ctx.new_tensor(Type::F32, &[6, 5, 1, 1, 2]).unwrap();
    assert_err(
        ctx.pool_1d(&five, PoolOp::Max, 2, 1, 0),
        &["POOL_1D", "ne4"],
    );
}
