//! Nodes whose result overlaps itself or an operand other than element for element (views
//! with a zero stride, in-place ops reading another part of their own result, copies onto a
//! shifted view of the source). The CPU runs such a node on one thread, so every thread count
//! gives what a plain sequential loop gives (GGML with one thread) and no thread writes bytes
//! another one reads. References are those sequential loops, in f64.

mod common;

use common::*;
use ggml::{Context, Tensor, Type};

/// Builds a graph with `build` over a fresh F32 tensor `x` of `n` elements holding 1, 2, 3, …,
/// computes it with every thread count, and compares `x` afterwards with `want(x)`.
fn check_x(
    name: &str,
    n: usize,
    build: impl Fn(&Context, &Tensor) -> ggml::Result<Tensor>,
    want: impl Fn(&mut [f64]),
) {
    let start: Vec<f64> = (1..=n).map(|v| v as f64).collect();
    let mut expected = start.clone();
    want(&mut expected);
    for (threads, be) in backends() {
        let ctx = Context::init(MEM, false).unwrap();
        let x = ctx.new_tensor_1d(Type::F32, n as i64).unwrap();
        write(&x, &start);
        let out = build(&ctx, &x).unwrap();
        let graph = ctx.build_forward_expand(&out).unwrap();
        be.graph_compute(&graph).unwrap();
        assert_eq!(read(&x).v, expected, "{name} ({threads} threads)");
    }
}

/// Eight rows that are all the same four elements (row stride 0), doubled in place: each
/// row's pass doubles them again.
#[test]
fn inplace_op_on_rows_that_share_memory() {
    check_x(
        "scale_inplace over nb1 = 0",
        32,
        |ctx, x| {
            let rows = ctx.view_2d(x, 4, 8, 0, 0)?;
            ctx.scale_inplace(&rows, 2.0)
        },
        |x| x[..4].iter_mut().for_each(|v| *v *= 256.0),
    );
}

/// `a += a[0]` over the rows of a 4 × 8 matrix, with `a[0]` a view of the first row: the
/// first row doubles, and the later rows add the doubled one.
#[test]
fn inplace_add_of_a_row_of_the_result() {
    check_x(
        "add_inplace(a, a row 0)",
        32,
        |ctx, x| {
            let a = ctx.view_2d(x, 4, 8, 16, 0)?;
            let row0 = ctx.view_1d(x, 4, 0)?;
            ctx.add_inplace(&a, &row0)
        },
        |x| {
            for r in 0..8 {
                for i in 0..4 {
                    x[4 * r + i] += x[i];
                }
            }
        },
    );
}

/// A copy onto the same memory one element further on, in logical order: every element
/// becomes the first one (large enough that threads splitting the rows would overlap in time).
#[test]
fn copy_onto_a_shifted_view_of_the_source() {
    const ROWS: usize = 1024;
    check_x(
        "cpy(x[0..], x[1..])",
        64 * ROWS + 1,
        |ctx, x| {
            let src = ctx.view_2d(x, 64, ROWS as i64, 256, 0)?;
            let dst = ctx.view_2d(x, 64, ROWS as i64, 256, 4)?;
            ctx.cpy(&src, &dst)
        },
        |x| {
            for k in 0..64 * ROWS {
                x[k + 1] = x[k];
            }
        },
    );
}

/// Layouts whose elements are distinct (here a permuted in-place op) still split over
/// threads and give the same result as before.
#[test]
fn inplace_op_on_a_permuted_view_is_unaffected() {
    check_x(
        "scale_inplace over a transposed view",
        32,
        |ctx, x| {
            let m = ctx.view_2d(x, 4, 8, 16, 0)?;
            ctx.scale_inplace(&ctx.transpose(&m)?, 3.0)
        },
        |x| x.iter_mut().for_each(|v| *v *= 3.0),
    );
}
