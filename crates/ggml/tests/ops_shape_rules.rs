//! Shape rules of the builders: bad operands give an `Err` naming the op and the offending
//! value, and a property test over seeded random shapes: every builder call either returns
//! such an error or computes what the reference computes — it never panics.

mod common;

use common::reference;
use common::*;
use ggml::{Context, Tensor, Type};

#[test]
fn binary_broadcast_errors_name_op_and_shapes() {
    let ctx = Context::init(1 << 20, true).unwrap();
    let a = ctx.new_tensor_3d(Type::F32, 6, 4, 3).unwrap();
    let b = ctx.new_tensor_3d(Type::F32, 4, 4, 3).unwrap();
    type B = fn(&Context, &Tensor, &Tensor) -> ggml::Result<Tensor>;
    let ops: [(&str, B); 8] = [
        ("ADD", Context::add),
        ("ADD", Context::add_inplace),
        ("SUB", Context::sub),
        ("SUB", Context::sub_inplace),
        ("MUL", Context::mul),
        ("MUL", Context::mul_inplace),
        ("DIV", Context::div),
        ("DIV", Context::div_inplace),
    ];
    for (name, f) in ops {
        assert_err(
            f(&ctx, &a, &b),
            &[name, "[4, 4, 3, 1, 1]", "[6, 4, 3, 1, 1]"],
        );
        // The larger operand must come first: b = a's shape, a smaller is refused too.
        let small = ctx.new_tensor_1d(Type::F32, 6).unwrap();
        assert_err(f(&ctx, &small, &a), &[name, "[6, 4, 3, 1, 1]"]);
    }
    let v = ctx.new_tensor_1d(Type::F32, 2).unwrap();
    assert_err(ctx.add1(&a, &v), &["ADD1", "[2, 1, 1, 1, 1]"]);
    assert_err(ctx.add1_inplace(&a, &v), &["ADD1", "[2, 1, 1, 1, 1]"]);
}

#[test]
fn errors_are_invalid_argument_status_failed() {
    let ctx = Context::init(1 << 20, true).unwrap();
    let a = ctx.new_tensor_2d(Type::F32, 3, 2).unwrap();
    let b = ctx.new_tensor_2d(Type::F32, 2, 2).unwrap();
    let e = ctx.add(&a, &b).unwrap_err();
    assert_eq!(e.status(), ggml::Status::Failed);
}

// ---- property test ---------------------------------------------------------------------------

/// A random dimension: mostly 1..=5, sometimes 0 or larger.
fn dim(r: &mut Rng) -> i64 {
    match r.below(10) {
        0 => 0,
        1 => r.range(6, 9),
        _ => r.range(1, 5),
    }
}

fn dims(r: &mut Rng, n: usize) -> Vec<i64> {
    (0..n).map(|_| dim(r)).collect()
}

/// `x` or, half of the time, a divisor of it (a shape that broadcasts to x).
fn divisor(r: &mut Rng, x: i64) -> i64 {
    if x == 0 || r.below(2) == 0 {
        return x;
    }
    let ds: Vec<i64> = (1..=x).filter(|d| x % d == 0).collect();
    r.pick(&ds)
}

/// One random builder call with its shapes drawn by `r`: a closure building the op from
/// inputs (drawn from the harness's data generator) and its reference, plus the op's name.
type Case = Box<dyn Fn(&Context, &mut Rng) -> ggml::Result<(Tensor, Host)>>;

fn random_case(r: &mut Rng) -> (&'static str, f64, Case) {
    let rank = r.range(1, 4) as usize;
    let a_ne = dims(r, rank);
    let ty = r.pick(&FLOATS);
    match r.below(11) {
        0 => {
            // ADD/MUL with a b that broadcasts (mostly) or not.
            let b_ne: Vec<i64> = if r.below(4) > 0 {
                a_ne.iter().map(|&x| divisor(r, x)).collect()
            } else {
                dims(r, rank)
            };
            let mul = r.below(2) == 0;
            let inplace = r.below(3) == 0;
            let name = if mul { "MUL" } else { "ADD" };
            (
                name,
                TOL,
                Box::new(move |ctx, g| {
                    let (a, ha) = input(ctx, ty, &a_ne, Layout::Contiguous, g, -1.0, 1.0)?;
                    let (b, hb) = input(ctx, Type::F32, &b_ne, Layout::Contiguous, g, -1.0, 1.0)?;
                    let out = match (mul, inplace) {
                        (true, false) => ctx.mul(&a, &b)?,
                        (true, true) => ctx.mul_inplace(&a, &b)?,
                        (false, false) => ctx.add(&a, &b)?,
                        (false, true) => ctx.add_inplace(&a, &b)?,
                    };
                    let f = if mul {
                        |x: f64, y: f64| x * y
                    } else {
                        |x: f64, y: f64| x + y
                    };
                    Ok((out, reference::broadcast(&ha, &hb, f)))
                }),
            )
        }
        1 => {
            let b_ne = if r.below(2) == 0 {
                vec![1i64]
            } else {
                dims(r, 2)
            };
            (
                "ADD1",
                TOL,
                Box::new(move |ctx, g| {
                    let (a, ha) = input(ctx, ty, &a_ne, Layout::Contiguous, g, -1.0, 1.0)?;
                    let (b, hb) = input(ctx, Type::F32, &b_ne, Layout::Contiguous, g, -1.0, 1.0)?;
                    let out = ctx.add1(&a, &b)?;
                    let y = hb.v.first().copied().unwrap_or(0.0);
                    Ok((out, Host::from_fn(ha.ne, |i| ha.at(i) + y)))
                }),
            )
        }
        2 => {
            // MUL_MAT: K equal (mostly), b's batches multiples of a's (mostly).
            let a_ne = dims(r, 4);
            let mut b_ne = dims(r, 4);
            if r.below(5) > 0 {
                b_ne[0] = a_ne[0];
            }
            for d in 2..4 {
                if r.below(5) > 0 {
                    b_ne[d] = a_ne[d] * r.range(1, 2);
                }
            }
            let transposed = r.below(6) == 0;
            (
                "MUL_MAT",
                TOL_MATMUL,
                Box::new(move |ctx, g| {
                    let la = if transposed {
                        Layout::Transposed
                    } else {
                        Layout::Contiguous
                    };
                    let (a, ha) = input(ctx, ty, &a_ne, la, g, -1.0, 1.0)?;
                    let (b, hb) = input(ctx, Type::F32, &b_ne, Layout::Contiguous, g, -1.0, 1.0)?;
                    Ok((ctx.mul_mat(&a, &b)?, reference::mul_mat(&ha, &hb)))
                }),
            )
        }
        3 => {
            // GET_ROWS: indices of a fitting shape (mostly), I32 (mostly). (Out-of-range values fail
            // the compute: `ops_rows.rs`; so `a` has rows to pick.)
            let mut a_ne = dims(r, 4);
            a_ne[1] = a_ne[1].max(1);
            let mut b_ne = dims(r, 3);
            if r.below(5) > 0 {
                b_ne[1] = a_ne[2];
                b_ne[2] = a_ne[3];
            }
            let idx_ty = if r.below(8) > 0 { Type::I32 } else { Type::F32 };
            (
                "GET_ROWS",
                EXACT,
                Box::new(move |ctx, g| {
                    let (a, ha) = input(ctx, ty, &a_ne, Layout::Contiguous, g, -1.0, 1.0)?;
                    let rows = a_ne[1];
                    let (b, hb) = input_with(ctx, idx_ty, &b_ne, Layout::Contiguous, |_| {
                        g.range(0, rows - 1) as f64
                    })?;
                    Ok((ctx.get_rows(&a, &b)?, reference::get_rows(&ha, &hb)))
                }),
            )
        }
        4 => {
            let target: Vec<i64> = if r.below(4) > 0 {
                a_ne.iter().map(|&x| x * r.range(1, 3)).collect()
            } else {
                dims(r, rank)
            };
            (
                "REPEAT",
                EXACT,
                Box::new(move |ctx, g| {
                    let (a, ha) = input(ctx, ty, &a_ne, Layout::Contiguous, g, -1.0, 1.0)?;
                    let b = ctx.new_tensor(Type::F32, &target)?;
                    Ok((ctx.repeat(&a, &b)?, reference::repeat(&ha, shape(&target))))
                }),
            )
        }
        5 => {
            let dim = r.below(6);
            let mut b_ne = a_ne.clone();
            b_ne.resize(5, 1);
            if dim < 5 {
                b_ne[dim] = super_dim(r);
            }
            if r.below(5) == 0 {
                let d = r.below(5);
                b_ne[d] = dim_or_other(r, b_ne[d]);
            }
            (
                "CONCAT",
                EXACT,
                Box::new(move |ctx, g| {
                    let (a, ha) = input(ctx, ty, &a_ne, Layout::Contiguous, g, -1.0, 1.0)?;
                    let (b, hb) = input(ctx, ty, &b_ne, Layout::Contiguous, g, -1.0, 1.0)?;
                    let out = ctx.concat(&a, &b, dim)?;
                    Ok((out, reference::concat(&ha, &hb, dim)))
                }),
            )
        }
        6 => {
            // SOFT_MAX_EXT with a mask that fits (mostly), odd types and biases.
            let a_ne = dims(r, 4);
            let with_mask = r.below(4) > 0;
            let mut m_ne: Vec<i64> = a_ne.iter().map(|&x| divisor(r, x)).collect();
            m_ne[0] = a_ne[0];
            m_ne[1] = a_ne[1] + r.range(0, 2);
            if r.below(5) == 0 {
                let d = r.below(4);
                m_ne[d] = dim(r);
            }
            let m_ty = r.pick(&[Type::F32, Type::F16, Type::F16, Type::I32]);
            let max_bias = r.pick(&[0.0f32, 0.0, 8.0, -1.0]);
            let scale = r.pick(&[1.0f32, 0.25, f32::NAN]);
            (
                "SOFT_MAX",
                TOL_SOFTMAX,
                Box::new(move |ctx, g| {
                    let (a, ha) = input(ctx, ty, &a_ne, Layout::Contiguous, g, -3.0, 3.0)?;
                    let (m, hm) = if with_mask {
                        let (m, hm) = input(ctx, m_ty, &m_ne, Layout::Contiguous, g, -2.0, 2.0)?;
                        (Some(m), Some(hm))
                    } else {
                        (None, None)
                    };
                    let out = ctx.soft_max_ext(&a, m.as_ref(), scale, max_bias)?;
                    let want = reference::soft_max(&ha, hm.as_ref(), scale as f64, max_bias as f64);
                    Ok((out, want))
                }),
            )
        }
        7 => {
            // CPY into a tensor of the same count (mostly) and any float type.
            let b_ne: Vec<i64> = if r.below(4) > 0 {
                let mut v = a_ne.clone();
                v.reverse();
                v
            } else {
                dims(r, rank)
            };
            let to = r.pick(&FLOATS);
            (
                "CPY",
                EXACT,
                Box::new(move |ctx, g| {
                    let (a, ha) =
                        input(ctx, ty, &a_ne, Layout::Permuted([1, 0, 2, 3]), g, -1.0, 1.0)?;
                    let b = ctx.new_tensor(to, &b_ne)?;
                    Ok((
                        ctx.cpy(&a, &b)?,
                        Host {
                            ne: shape(&b_ne),
                            v: ha.v,
                        },
                    ))
                }),
            )
        }
        8 => {
            // RESHAPE of a contiguous (mostly) tensor to a shape of the same count (mostly).
            let n: i64 = a_ne.iter().product();
            let new_ne: Vec<i64> = if r.below(4) > 0 {
                vec![1, n, 1]
            } else {
                dims(r, 3)
            };
            let transposed = r.below(5) == 0;
            (
                "RESHAPE",
                EXACT,
                Box::new(move |ctx, g| {
                    let la = if transposed {
                        Layout::Transposed
                    } else {
                        Layout::Contiguous
                    };
                    let (a, ha) = input(ctx, ty, &a_ne, la, g, -1.0, 1.0)?;
                    let v = ctx.reshape_nd(&a, &new_ne)?;
                    Ok((
                        ctx.cont(&v)?,
                        Host {
                            ne: shape(&new_ne),
                            v: ha.v,
                        },
                    ))
                }),
            )
        }
        9 => {
            // PERMUTE with random (possibly repeated or out-of-range) axes.
            let a_ne = dims(r, 4);
            let ax: [usize; 4] = if r.below(3) > 0 {
                let mut p = [0usize, 1, 2, 3];
                for i in (1..4).rev() {
                    p.swap(i, r.below(i + 1));
                }
                p
            } else {
                std::array::from_fn(|_| r.below(5))
            };
            (
                "PERMUTE",
                EXACT,
                Box::new(move |ctx, g| {
                    let (a, ha) = input(ctx, ty, &a_ne, Layout::Contiguous, g, -1.0, 1.0)?;
                    let p = ctx.permute(&a, ax[0], ax[1], ax[2], ax[3])?;
                    let mut ne = [1usize; 5];
                    for d in 0..4 {
                        ne[ax[d]] = ha.ne[d];
                    }
                    let want =
                        Host::from_fn(ne, |j| ha.at([j[ax[0]], j[ax[1]], j[ax[2]], j[ax[3]], 0]));
                    Ok((ctx.cont(&p)?, want))
                }),
            )
        }
        _ => {
            // VIEW_2D of a 1-D F32 tensor at a random (possibly out-of-bounds) place.
            let n = r.range(1, 40);
            let (ne0, ne1) = (r.range(0, 8), r.range(0, 8));
            let nb1 = 4 * r.range(0, 10) as usize;
            let off = 4 * r.range(0, 40) as usize;
            (
                "VIEW",
                EXACT,
                Box::new(move |ctx, g| {
                    let (a, ha) = input(ctx, Type::F32, &[n], Layout::Contiguous, g, -1.0, 1.0)?;
                    let v = ctx.view_2d(&a, ne0, ne1, nb1, off)?;
                    let want =
                        Host::from_fn(shape(&[ne0, ne1]), |i| ha.v[(off + i[1] * nb1) / 4 + i[0]]);
                    Ok((ctx.cont(&v)?, want))
                }),
            )
        }
    }
}

fn super_dim(r: &mut Rng) -> i64 {
    r.range(0, 4)
}

fn dim_or_other(r: &mut Rng, x: i64) -> i64 {
    if r.below(2) == 0 {
        x
    } else {
        dim(r)
    }
}

#[test]
fn random_shapes_error_or_match_the_reference() {
    let mut shapes = Rng::new(20240611);
    let (mut ok, mut refused) = (0, 0);
    for iter in 0..400 {
        let (op, tol, build) = random_case(&mut shapes);
        let name = format!("property case {iter} ({op})");
        // First try: an error must name the op; success must match the reference.
        let ctx = Context::init(MEM, false).unwrap();
        match build(&ctx, &mut Rng::from_name(&name)) {
            Err(e) => {
                let msg = e.to_string();
                assert!(msg.contains(op), "{name}: error {msg:?} does not name {op}");
                refused += 1;
            }
            Ok(_) => {
                check(&name, tol, &build);
                ok += 1;
            }
        }
    }
    // Both outcomes are exercised.
    assert!(ok > 100 && refused > 40, "{ok} computed, {refused} refused");
}
