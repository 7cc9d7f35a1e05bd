//! ADD, SUB, MUL, DIV (with every broadcast pattern), ADD1 and SCALE against an f64 reference.

mod common;

use common::*;
use ggml::{Context, Tensor, Type};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Bin {
    Add,
    Sub,
    Mul,
    Div,
}

const BINS: [Bin; 4] = [Bin::Add, Bin::Sub, Bin::Mul, Bin::Div];

impl Bin {
    fn eval(self, x: f64, y: f64) -> f64 {
        match self {
            Bin::Add => x + y,
            Bin::Sub => x - y,
            Bin::Mul => x * y,
            Bin::Div => x / y,
        }
    }

    fn build(self, ctx: &Context, a: &Tensor, b: &Tensor, inplace: bool) -> ggml::Result<Tensor> {
        match (self, inplace) {
            (Bin::Add, false) => ctx.add(a, b),
            (Bin::Add, true) => ctx.add_inplace(a, b),
            (Bin::Sub, false) => ctx.sub(a, b),
            (Bin::Sub, true) => ctx.sub_inplace(a, b),
            (Bin::Mul, false) => ctx.mul(a, b),
            (Bin::Mul, true) => ctx.mul_inplace(a, b),
            (Bin::Div, false) => ctx.div(a, b),
            (Bin::Div, true) => ctx.div_inplace(a, b),
        }
    }

    /// Range of the second operand (kept away from zero for DIV).
    fn b_range(self) -> (f64, f64) {
        match self {
            Bin::Div => (0.5, 2.0),
            _ => (-1.0, 1.0),
        }
    }
}

/// The reference: `a op b[i mod b.ne]` over a's shape.
fn reference(op: Bin, a: &Host, b: &Host) -> Host {
    common::reference::broadcast(a, b, |x, y| op.eval(x, y))
}

struct Case<'a> {
    op: Bin,
    types: (Type, Type),
    ne: (&'a [i64], &'a [i64]),
    layouts: (Layout, Layout),
    inplace: bool,
}

fn run(c: Case<'_>) {
    let name = format!(
        "{:?}{} a {} {:?} {:?} b {} {:?} {:?}",
        c.op,
        if c.inplace { "_inplace" } else { "" },
        c.types.0,
        c.ne.0,
        c.layouts.0,
        c.types.1,
        c.ne.1,
        c.layouts.1
    );
    check(&name, TOL, |ctx, rng| {
        let (a, ha) = input(ctx, c.types.0, c.ne.0, c.layouts.0, rng, -1.0, 1.0)?;
        let (lo, hi) = c.op.b_range();
        let (b, hb) = input(ctx, c.types.1, c.ne.1, c.layouts.1, rng, lo, hi)?;
        let out = c.op.build(ctx, &a, &b, c.inplace)?;
        assert_eq!(out.ty(), a.ty());
        if c.inplace {
            assert_aliases(&out, &a);
        }
        Ok((out, reference(c.op, &ha, &hb)))
    });
}

fn simple(op: Bin, a_ne: &[i64], b_ne: &[i64]) {
    run(Case {
        op,
        types: (Type::F32, Type::F32),
        ne: (a_ne, b_ne),
        layouts: (Layout::Contiguous, Layout::Contiguous),
        inplace: false,
    });
}

#[test]
fn every_broadcast_pattern() {
    let a = [5i64, 4, 3, 2];
    for op in BINS {
        // b of size 1 in every subset of the four dimensions.
        for mask in 0..16 {
            let b: Vec<i64> = (0..4)
                .map(|d| if mask & (1 << d) != 0 { 1 } else { a[d] })
                .collect();
            simple(op, &a, &b);
        }
        // Proper divisors (b tiled more than once, not just repeated once).
        simple(op, &[6, 4, 6, 2], &[3, 2, 2, 1]);
        simple(op, &[6, 4, 6, 2], &[2, 4, 3, 2]);
    }
}

#[test]
fn five_dimensions() {
    for op in BINS {
        simple(op, &[3, 2, 2, 2, 3], &[3, 2, 2, 2, 3]);
        simple(op, &[3, 2, 2, 2, 3], &[3, 1, 2, 1, 3]);
        simple(op, &[3, 2, 2, 2, 4], &[1, 2, 1, 2, 2]);
        simple(op, &[3, 2, 2, 2, 3], &[1]);
    }
}

#[test]
fn odd_sizes() {
    for op in BINS {
        for (a, b) in [
            (&[1i64][..], &[1i64][..]),
            (&[33, 17], &[33, 1]),
            (&[1, 100], &[1, 100]),
            (&[129, 1, 3], &[129, 1, 1]),
            (&[7, 5, 3, 2], &[7, 5, 3, 2]),
            (&[1000], &[1000]),
        ] {
            simple(op, a, b);
        }
    }
}

#[test]
fn type_combinations() {
    for op in BINS {
        for ta in FLOATS {
            for tb in FLOATS {
                run(Case {
                    op,
                    types: (ta, tb),
                    ne: (&[7, 3, 2], &[7, 1, 2]),
                    layouts: (Layout::Contiguous, Layout::Contiguous),
                    inplace: false,
                });
            }
        }
    }
}

#[test]
fn non_contiguous_operands() {
    for op in BINS {
        for la in LAYOUTS {
            for lb in LAYOUTS {
                run(Case {
                    op,
                    types: (Type::F32, Type::F32),
                    ne: (&[6, 5, 4, 3], &[6, 5, 4, 3]),
                    layouts: (la, lb),
                    inplace: false,
                });
            }
            // Broadcast b while a is strided.
            run(Case {
                op,
                types: (Type::F16, Type::F32),
                ne: (&[6, 5, 4, 3], &[6, 1, 4, 1]),
                layouts: (la, Layout::Padded),
                inplace: false,
            });
        }
    }
}

#[test]
fn inplace_forms() {
    for op in BINS {
        for ty in FLOATS {
            for la in [
                Layout::Contiguous,
                Layout::Permuted([2, 0, 3, 1]),
                Layout::Padded,
            ] {
                run(Case {
                    op,
                    types: (ty, Type::F32),
                    ne: (&[6, 5, 4, 3], &[6, 1, 4, 1]),
                    layouts: (la, Layout::Contiguous),
                    inplace: true,
                });
            }
        }
    }
}

#[test]
fn add1_all_forms() {
    for ta in FLOATS {
        for tb in [Type::F32, Type::F16] {
            for la in LAYOUTS {
                for inplace in [false, true] {
                    let name = format!("add1 a {ta} {la:?} b {tb} inplace {inplace}");
                    check(&name, TOL, |ctx, rng| {
                        let (a, ha) = input(ctx, ta, &[9, 4, 3, 2], la, rng, -1.0, 1.0)?;
                        let (b, hb) =
                            input(ctx, tb, &[1, 1, 1], Layout::Contiguous, rng, -2.0, 2.0)?;
                        let out = if inplace {
                            ctx.add1_inplace(&a, &b)?
                        } else {
                            ctx.add1(&a, &b)?
                        };
                        if inplace {
                            assert_aliases(&out, &a);
                        }
                        let y = hb.v[0];
                        Ok((out, Host::from_fn(ha.ne, |i| ha.at(i) + y)))
                    });
                }
            }
        }
    }
}

#[test]
fn scale_and_scale_bias() {
    for ty in FLOATS {
        for la in LAYOUTS {
            for (s, b) in [(0.5f32, 0.0f32), (-3.25, 0.0), (2.0, -1.5), (0.0, 7.0)] {
                for inplace in [false, true] {
                    let name = format!("scale {ty} {la:?} s {s} b {b} inplace {inplace}");
                    check(&name, TOL, |ctx, rng| {
                        let (a, ha) = input(ctx, ty, &[11, 3, 2, 2], la, rng, -4.0, 4.0)?;
                        let out = match (b == 0.0, inplace) {
                            (true, false) => ctx.scale(&a, s)?,
                            (true, true) => ctx.scale_inplace(&a, s)?,
                            (false, false) => ctx.scale_bias(&a, s, b)?,
                            (false, true) => ctx.scale_bias_inplace(&a, s, b)?,
                        };
                        if inplace {
                            assert_aliases(&out, &a);
                        }
                        let want = Host::from_fn(ha.ne, |i| ha.at(i) * s as f64 + b as f64);
                        Ok((out, want))
                    });
                }
            }
        }
    }
}

#[test]
fn infinities_propagate() {
    // 1/0 = inf, -1/0 = -inf: the harness requires them at the same places.
    check("div by zero", TOL, |ctx, _| {
        let (a, ha) = input_values(ctx, Type::F32, &[4], &[1.0, -1.0, 2.0, 3.0])?;
        let (b, hb) = input_values(ctx, Type::F32, &[4], &[0.0, 0.0, 4.0, 1.0])?;
        let out = ctx.div(&a, &b)?;
        Ok((out, reference(Bin::Div, &ha, &hb)))
    });
}

/// Packed F32 tensors long enough that threads split the flattened tensor into several
/// pieces, with `b` tiled at a period that does not divide a piece (the same shape, one row,
/// one element, a leading 2-D block, short rows), out of place and in place: exact, and the
/// same bits at every thread count.
#[test]
fn packed_tiles_across_pieces() {
    let cases: [(&[i64], &[i64]); 6] = [
        (&[4099, 13], &[4099, 13]),
        (&[4099, 13], &[4099, 1]),
        (&[4099, 13], &[1]),
        (&[4099, 13, 3], &[4099, 13, 1]),
        (&[64, 2000], &[64, 1]),
        (&[3, 20000], &[3, 1]),
    ];
    for op in BINS {
        for (a_ne, b_ne) in cases {
            for inplace in [false, true] {
                let name = format!("{op:?} packed {a_ne:?} b {b_ne:?} inplace {inplace}");
                check_mem(&name, 0.0, 8 << 20, |ctx, rng| {
                    let (a, ha) = input(ctx, Type::F32, a_ne, Layout::Contiguous, rng, -1.0, 1.0)?;
                    let (lo, hi) = op.b_range();
                    let (b, hb) = input(ctx, Type::F32, b_ne, Layout::Contiguous, rng, lo, hi)?;
                    let out = op.build(ctx, &a, &b, inplace)?;
                    Ok((out, reference(op, &ha, &hb)))
                });
            }
        }
    }
}
