//! CUMSUM, COUNT_EQUAL and SOLVE_TRI against f64 references written from their definitions:
//! running sums along rows; the number of equal positions; forward substitution.

mod common;

use common::nodes::assert_valid;
use common::*;
use ggml::{Context, Type};

fn cumsum_ref(h: &Host) -> Host {
    h.map_rows(h.ne[0], |_, row| {
        row.iter()
            .scan(0.0, |acc, &x| {
                *acc += x;
                Some(*acc)
            })
            .collect()
    })
}

#[test]
fn cumsum_shapes_layouts() {
    for ne in [
        &[1i64][..],
        &[2, 3],
        &[17, 4, 3],
        &[1000, 2],
        &[4, 3, 2, 2, 2],
    ] {
        let name = format!("CUMSUM(ne={ne:?})");
        check(&name, TOL, |ctx, rng| {
            let (a, ha) = input(ctx, Type::F32, ne, Layout::Contiguous, rng, -1.0, 1.5)?;
            Ok((ctx.cumsum(&a)?, cumsum_ref(&ha)))
        });
    }
    for layout in LAYOUTS {
        let name = format!("CUMSUM(ne=[9,5,3,2],layout={layout:?})");
        check(&name, TOL, |ctx, rng| {
            let (a, ha) = input(ctx, Type::F32, &[9, 5, 3, 2], layout, rng, -1.0, 1.5)?;
            Ok((ctx.cumsum(&a)?, cumsum_ref(&ha)))
        });
    }
}

#[test]
fn count_equal_counts() {
    for (ne, layout) in [
        (&[1i64][..], Layout::Contiguous),
        (&[10, 7], Layout::Contiguous),
        (&[33, 5, 3, 2], Layout::Permuted([2, 0, 3, 1])),
        (&[6, 5, 3, 2], Layout::Transposed),
        (&[6, 5, 3, 2], Layout::Padded),
        (&[3, 2, 2, 2, 3], Layout::Contiguous),
    ] {
        let name = format!("COUNT_EQUAL(ne={ne:?},layout={layout:?})");
        check(&name, EXACT, |ctx, rng| {
            let (a, ha) = input_with(ctx, Type::I32, ne, layout, |_| rng.range(0, 3) as f64)?;
            let (b, hb) = input_with(ctx, Type::I32, ne, Layout::Contiguous, |_| {
                rng.range(0, 3) as f64
            })?;
            let n = ha.v.iter().zip(&hb.v).filter(|(x, y)| x == y).count();
            let want = Host {
                ne: [1; DIMS],
                v: vec![n as f64],
            };
            Ok((ctx.count_equal(&a, &b)?, want))
        });
    }
    // Equal tensors: every position counts.
    check("COUNT_EQUAL(same)", EXACT, |ctx, rng| {
        let (a, ha) = input_with(ctx, Type::I32, &[40, 3], Layout::Contiguous, |_| {
            rng.range(-1_000_000, 1_000_000) as f64
        })?;
        let want = Host {
            ne: [1; DIMS],
            v: vec![ha.v.len() as f64],
        };
        Ok((ctx.count_equal(&a, &a)?, want))
    });
}

/// `x[c, i] = (b[c, i] − Σ_{t<i} a[t, i]·x[c, t]) / a[i, i]` per batch.
fn solve_tri_ref(a: &Host, b: &Host) -> Host {
    let mut x = Host::from_fn(b.ne, |_| 0.0);
    for batch in indices([1, 1, b.ne[2], b.ne[3], b.ne[4]]) {
        for c in 0..b.ne[0] {
            for i in 0..b.ne[1] {
                let at = |i0: usize, i1: usize| [i0, i1, batch[2], batch[3], batch[4]];
                let sum: f64 = (0..i).map(|t| a.at(at(t, i)) * x.at(at(c, t))).sum();
                let v = (b.at(at(c, i)) - sum) / a.at(at(i, i));
                let k = flat(&x.ne, &at(c, i));
                x.v[k] = v;
            }
        }
    }
    x
}

#[test]
fn solve_tri_sizes_batches_layouts() {
    for (n, k, batch, bl) in [
        (1i64, 1i64, &[1i64][..], Layout::Contiguous),
        (5, 3, &[2, 3], Layout::Contiguous),
        (16, 8, &[1], Layout::Transposed),
        (64, 2, &[2], Layout::Contiguous),
        (7, 4, &[3, 2], Layout::Padded),
        (4, 5, &[2, 1, 2], Layout::Contiguous),
    ] {
        let name = format!("SOLVE_TRI(n={n},k={k},batch={batch:?},layout_b={bl:?})");
        check(&name, TOL, |ctx, rng| {
            let ane: Vec<i64> = [n, n].iter().chain(batch).copied().collect();
            let bne: Vec<i64> = [k, n].iter().chain(batch).copied().collect();
            let nn = n as usize;
            // Contiguous a: position p is element (p mod n, p / n mod n). Above the diagonal
            // NaN (never read); the diagonal away from zero.
            let (a, ha) = input_with(ctx, Type::F32, &ane, Layout::Contiguous, |p| {
                let (i0, i1) = (p % nn, p / nn % nn);
                match i0.cmp(&i1) {
                    std::cmp::Ordering::Greater => f64::NAN,
                    std::cmp::Ordering::Equal => rng.uniform(1.0, 2.0) * rng.pick(&[-1.0, 1.0]),
                    std::cmp::Ordering::Less => rng.uniform(-1.0, 1.0) / n as f64,
                }
            })?;
            let (b, hb) = input(ctx, Type::F32, &bne, bl, rng, -1.0, 1.0)?;
            let out = ctx.solve_tri(&a, &b, true, true, false)?;
            Ok((out, solve_tri_ref(&ha, &hb)))
        });
    }
}

#[test]
fn shape_rules() {
    let ctx = Context::init(1 << 20, true).unwrap();
    let f = ctx.new_tensor_2d(Type::F32, 6, 3).unwrap();
    let h = ctx.new_tensor_2d(Type::F16, 6, 3).unwrap();
    let c = ctx.cumsum(&f).unwrap();
    assert_eq!((c.ty(), c.ne()), (Type::F32, f.ne()));
    assert_valid(&c);
    assert_err(ctx.cumsum(&h), &["CUMSUM", "a", "f32"]);

    let i = ctx.new_tensor_2d(Type::I32, 6, 3).unwrap();
    let j = ctx.new_tensor_2d(Type::I32, 3, 6).unwrap();
    let e = ctx.count_equal(&i, &i).unwrap();
    assert_eq!((e.ty(), e.ne()), (Type::I64, [1; 5]));
    assert_valid(&e);
    assert_err(ctx.count_equal(&i, &j), &["COUNT_EQUAL", "b", "shape of a"]);
    assert_err(ctx.count_equal(&f, &i), &["COUNT_EQUAL", "a", "i32"]);
    assert_err(ctx.count_equal(&i, &f), &["COUNT_EQUAL", "b", "i32"]);

    let a = ctx.new_tensor_3d(Type::F32, 4, 4, 2).unwrap();
    let b = ctx.new_tensor_3d(Type::F32, 3, 4, 2).unwrap();
    let x = ctx.solve_tri(&a, &b, true, true, false).unwrap();
    assert_eq!((x.ty(), x.ne()), (Type::F32, b.ne()));
    assert_valid(&x);
    for (left, lower, uni) in [
        (false, true, false),
        (true, false, false),
        (true, true, true),
    ] {
        assert_err(
            ctx.solve_tri(&a, &b, left, lower, uni),
            &[
                "SOLVE_TRI",
                &format!("left = {left}, lower = {lower}, uni = {uni}"),
            ],
        );
    }
    let rect = ctx.new_tensor_3d(Type::F32, 4, 3, 2).unwrap();
    let b_rows = ctx.new_tensor_3d(Type::F32, 3, 5, 2).unwrap();
    let b_batch = ctx.new_tensor_3d(Type::F32, 3, 4, 1).unwrap();
    let a16 = ctx.new_tensor_3d(Type::F16, 4, 4, 2).unwrap();
    assert_err(
        ctx.solve_tri(&rect, &b, true, true, false),
        &["SOLVE_TRI", "a", "square"],
    );
    assert_err(
        ctx.solve_tri(&a, &b_rows, true, true, false),
        &["b", "ne1", "4"],
    );
    assert_err(
        ctx.solve_tri(&a, &b_batch, true, true, false),
        &["b", "batch"],
    );
    assert_err(ctx.solve_tri(&a16, &b, true, true, false), &["a", "f32"]);
}
