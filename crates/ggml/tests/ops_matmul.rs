//! MUL_MAT against an f64 reference: `c[i, j, …] = Σₖ a[k, i, …] · b[k, j, …]`, with F32, F16
//! and BF16 weights, batch broadcasting and non-contiguous operands.

mod common;

use common::reference;
use common::*;
use ggml::{Context, Type};

struct Case<'a> {
    a: (Type, &'a [i64], Layout),
    b: (Type, &'a [i64], Layout),
}

fn run(c: Case<'_>) {
    let name = format!(
        "mul_mat a {:?} b {:?}",
        (c.a.0.name(), c.a.1, c.a.2),
        (c.b.0.name(), c.b.1, c.b.2)
    );
    check_mem(&name, TOL_MATMUL, 16 << 20, |ctx, rng| {
        let (a, ha) = input(ctx, c.a.0, c.a.1, c.a.2, rng, -1.0, 1.0)?;
        let (b, hb) = input(ctx, c.b.0, c.b.1, c.b.2, rng, -1.0, 1.0)?;
        let out = ctx.mul_mat(&a, &b)?;
        assert_eq!(out.ty(), Type::F32);
        Ok((out, reference::mul_mat(&ha, &hb)))
    });
}

fn plain(ta: Type, a: &[i64], b: &[i64]) {
    run(Case {
        a: (ta, a, Layout::Contiguous),
        b: (Type::F32, b, Layout::Contiguous),
    });
}

#[test]
fn shapes_and_weight_types() {
    for ta in FLOATS {
        for (k, m, n) in [
            (1, 1, 1),
            (16, 8, 4),
            (33, 17, 5),
            (7, 1, 9),
            (256, 64, 16),
            (1024, 48, 3),
        ] {
            plain(ta, &[k, m], &[k, n]);
        }
    }
}

#[test]
fn activation_types() {
    for ta in FLOATS {
        for tb in FLOATS {
            run(Case {
                a: (ta, &[40, 12, 2], Layout::Contiguous),
                b: (tb, &[40, 5, 2], Layout::Contiguous),
            });
        }
    }
}

#[test]
fn batch_broadcast() {
    for ta in FLOATS {
        for (a, b) in [
            (&[24i64, 8, 1, 1][..], &[24i64, 5, 3, 2][..]),
            (&[24, 8, 2, 1], &[24, 5, 6, 1]),
            (&[24, 8, 2, 3], &[24, 5, 4, 6]),
            (&[24, 8, 3, 2], &[24, 5, 3, 2]),
            (&[24, 8, 1, 1, 2], &[24, 5, 2, 1, 4]),
            (&[24, 8, 2, 2, 1], &[24, 5, 2, 2, 3]),
        ] {
            plain(ta, a, b);
        }
    }
}

#[test]
fn non_contiguous_operands() {
    // a may be permuted or strided but not transposed (nb0 <= nb1).
    let a_layouts = [
        Layout::Contiguous,
        Layout::Permuted([0, 2, 1, 3]),
        Layout::Padded,
    ];
    for ta in FLOATS {
        for la in a_layouts {
            for lb in LAYOUTS {
                run(Case {
                    a: (ta, &[20, 6, 3, 2], la),
                    b: (Type::F32, &[20, 7, 3, 2], lb),
                });
            }
        }
    }
}

#[test]
fn empty_inner_dimension_gives_zeros() {
    plain(Type::F32, &[0, 3], &[0, 4]);
}

#[test]
fn larger_product_with_many_threads() {
    // Rows of a are split between threads; several batches and an odd row count.
    plain(Type::F16, &[512, 131, 2], &[512, 9, 4]);
}

#[test]
fn shape_errors() {
    let ctx = Context::init(1 << 20, true).unwrap();
    let a = ctx.new_tensor_2d(Type::F32, 8, 4).unwrap();
    let b = ctx.new_tensor_2d(Type::F32, 9, 4).unwrap();
    assert_err(ctx.mul_mat(&a, &b), &["MUL_MAT", "K = 8", "K = 9"]);
    let a3 = ctx.new_tensor_3d(Type::F32, 8, 4, 3).unwrap();
    let b3 = ctx.new_tensor_3d(Type::F32, 8, 4, 4).unwrap();
    assert_err(
        ctx.mul_mat(&a3, &b3),
        &["MUL_MAT", "[3, 1, 1]", "[4, 1, 1]"],
    );
    let a0 = ctx.new_tensor_3d(Type::F32, 8, 4, 0).unwrap();
    assert_err(ctx.mul_mat(&a0, &b3), &["MUL_MAT", "[0, 1, 1]"]);
    let sq = ctx.new_tensor_2d(Type::F32, 8, 8).unwrap();
    let t = ctx.transpose(&sq).unwrap();
    let b8 = ctx.new_tensor_2d(Type::F32, 8, 2).unwrap();
    assert_err(ctx.mul_mat(&t, &b8), &["MUL_MAT", "transposed"]);
}
