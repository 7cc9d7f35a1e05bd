//! The custom ops MAP_CUSTOM1/2/3 and CUSTOM with Rust closures (GGML's `test_custom`-style
//! use): each closure computes a known element-wise function on the rows its task owns, so the
//! result checks the closure ran for every row exactly where the task split put it, for
//! `n_tasks` = all threads, one task, and more tasks than threads; the in-place forms too.
//! The closures are Rust code, so these cases are not exported to the GGML fixture.

use ggml::ops::{CustomDst, CustomSrc, N_TASKS_MAX};
use ggml::Type;

use crate::case::{Case, Input, Layout, Vars};
use crate::host::{shape, Host, DIMS};

/// The index of flat row `r` of shape `ne` (dimension 0 zero).
fn row_index(ne: [i64; DIMS], r: usize) -> [usize; DIMS] {
    let mut i = [0usize; DIMS];
    let mut k = r;
    for d in 1..DIMS {
        let n = ne[d].max(1) as usize;
        i[d] = k % n;
        k /= n;
    }
    i
}

/// Writes `f(index, operand values at index)` at every element of the task's rows; an
/// operand read that fails, or a task index out of range, writes NaN (which fails the case).
fn each_owned(
    dst: &mut CustomDst<'_>,
    srcs: &[&CustomSrc<'_>],
    ith: usize,
    nth: usize,
    f: impl Fn([usize; DIMS], &[f32]) -> f32,
) {
    let ne = dst.ne();
    let mut vals = vec![0f32; srcs.len()];
    for r in dst.rows() {
        for i0 in 0..ne[0] as usize {
            let mut i = row_index(ne, r);
            i[0] = i0;
            let mut ok = ith < nth;
            for (v, s) in vals.iter_mut().zip(srcs) {
                *v = s.get(i).unwrap_or_else(|_| {
                    ok = false;
                    0.0
                });
            }
            let y = if ok { f(i, &vals) } else { f32::NAN };
            // An index outside the owned rows would be a library bug: NaN stays there.
            let _ = dst.set(i, y);
        }
    }
}

fn tasks_name(n: i32) -> String {
    if n == N_TASKS_MAX {
        "max".into()
    } else {
        n.to_string()
    }
}

/// `x² − x/2`, `a·b + a`, `a + b·c`: the functions of the three map ops.
fn f1(x: f64) -> f64 {
    x * x - 0.5 * x
}

fn f2(a: f64, b: f64) -> f64 {
    a * b + a
}

fn f3(a: f64, b: f64, c: f64) -> f64 {
    a + b * c
}

fn map_custom(out: &mut Vec<Case>) {
    let shapes: [&[i64]; 3] = [&[10, 5, 4, 3], &[1, 1], &[33, 7, 1, 2]];
    for ne in shapes {
        for ty in [Type::F32, Type::F16] {
            for n_tasks in [N_TASKS_MAX, 1, 5] {
                for inplace in [false, true] {
                    let vars = || {
                        Vars::new()
                            .ty("type", ty)
                            .list("ne", ne)
                            .val("n_tasks", tasks_name(n_tasks))
                            .flag("inplace", inplace)
                    };
                    let input = || Input::new(ty, ne);
                    out.push(Case::new(
                        "MAP_CUSTOM1",
                        vars(),
                        vec![input()],
                        move |ctx, x| {
                            let f = |d: &mut CustomDst<'_>, a: &CustomSrc<'_>, i, n| {
                                each_owned(d, &[a], i, n, |_, v| f1(v[0] as f64) as f32)
                            };
                            if inplace {
                                ctx.map_custom1_inplace(&x[0], f, n_tasks)
                            } else {
                                ctx.map_custom1(&x[0], f, n_tasks)
                            }
                        },
                        |x| crate::reference::map(&x[0], f1),
                    ));
                    out.push(Case::new(
                        "MAP_CUSTOM2",
                        vars(),
                        vec![input(), input().layout(Layout::Padded)],
                        move |ctx, x| {
                            let f = |d: &mut CustomDst<'_>,
                                     a: &CustomSrc<'_>,
                                     b: &CustomSrc<'_>,
                                     i,
                                     n| {
                                each_owned(d, &[a, b], i, n, |_, v| {
                                    f2(v[0] as f64, v[1] as f64) as f32
                                })
                            };
                            if inplace {
                                ctx.map_custom2_inplace(&x[0], &x[1], f, n_tasks)
                            } else {
                                ctx.map_custom2(&x[0], &x[1], f, n_tasks)
                            }
                        },
                        |x| Host::from_fn(x[0].ne, |i| f2(x[0].at(i), x[1].at(i))),
                    ));
                    out.push(Case::new(
                        "MAP_CUSTOM3",
                        vars(),
                        vec![input(), input(), input().layout(Layout::Padded)],
                        move |ctx, x| {
                            let f = |d: &mut CustomDst<'_>,
                                     a: &CustomSrc<'_>,
                                     b: &CustomSrc<'_>,
                                     c: &CustomSrc<'_>,
                                     i,
                                     n| {
                                each_owned(d, &[a, b, c], i, n, |_, v| {
                                    f3(v[0] as f64, v[1] as f64, v[2] as f64) as f32
                                })
                            };
                            if inplace {
                                ctx.map_custom3_inplace(&x[0], &x[1], &x[2], f, n_tasks)
                            } else {
                                ctx.map_custom3(&x[0], &x[1], &x[2], f, n_tasks)
                            }
                        },
                        |x| Host::from_fn(x[0].ne, |i| f3(x[0].at(i), x[1].at(i), x[2].at(i))),
                    ));
                }
            }
        }
    }
}

fn custom(out: &mut Vec<Case>) {
    // ggml_custom_4d: a new [n, m, 3, 2] tensor whose element (i0, i1, i2, i3) is
    // `a[i0, i1] · (i2 + 1) + b[i1] − i3`; the operands are smaller than the result.
    for (n, m) in [(7i64, 5i64), (1, 1), (64, 9)] {
        for ty in [Type::F32, Type::F16, Type::I32] {
            for n_tasks in [N_TASKS_MAX, 1, 4] {
                let (a_ne, b_ne) = ([n, m], [m]);
                let in_ty = if ty == Type::I32 {
                    Type::I32
                } else {
                    Type::F32
                };
                let init = |i: Input| {
                    if ty == Type::I32 {
                        i.init(crate::case::Init::Ints(-20, 20))
                    } else {
                        i
                    }
                };
                out.push(Case::new(
                    "CUSTOM",
                    Vars::new()
                        .ty("type", ty)
                        .list("ne", &[n, m, 3, 2])
                        .val("n_tasks", tasks_name(n_tasks)),
                    vec![
                        init(Input::new(in_ty, &a_ne)),
                        init(Input::new(in_ty, &b_ne)),
                    ],
                    move |ctx, x| {
                        ctx.custom_4d(
                            ty,
                            n,
                            m,
                            3,
                            2,
                            &[&x[0], &x[1]],
                            |d: &mut CustomDst<'_>, s: &[CustomSrc<'_>], ith, nth| {
                                let ne = d.ne();
                                let mut ok = ith < nth && s.len() == 2;
                                let rows = d.rows();
                                for r in rows {
                                    let i = row_index(ne, r);
                                    for i0 in 0..ne[0] as usize {
                                        let a = s[0].get([i0, i[1], 0, 0, 0]);
                                        let b = s[1].get([i[1], 0, 0, 0, 0]);
                                        let y = match (a, b) {
                                            (Ok(a), Ok(b)) if ok => {
                                                a * (i[2] + 1) as f32 + b - i[3] as f32
                                            }
                                            _ => {
                                                ok = false;
                                                f32::NAN
                                            }
                                        };
                                        let _ = d.set([i0, i[1], i[2], i[3], 0], y);
                                    }
                                }
                            },
                            n_tasks,
                        )
                    },
                    move |x| {
                        Host::from_fn(shape(&[n, m, 3, 2]), |i| {
                            x[0].at([i[0], i[1], 0, 0, 0]) * (i[2] + 1) as f64
                                + x[1].at([i[1], 0, 0, 0, 0])
                                - i[3] as f64
                        })
                    },
                ));
            }
        }
    }
    // ggml_custom_inplace: a ← a − b (the closure reads a only on its own rows).
    for n_tasks in [N_TASKS_MAX, 3] {
        let ne = [9i64, 4, 3];
        out.push(Case::new(
            "CUSTOM",
            Vars::new()
                .ty("type", Type::F32)
                .list("ne", &ne)
                .val("n_tasks", tasks_name(n_tasks))
                .flag("inplace", true),
            vec![Input::new(Type::F32, &ne), Input::new(Type::F32, &ne)],
            move |ctx, x| {
                ctx.custom_inplace(
                    &x[0],
                    &[&x[1]],
                    |d: &mut CustomDst<'_>, s: &[CustomSrc<'_>], ith, nth| {
                        each_owned(d, &[&s[0], &s[1]], ith, nth, |_, v| v[0] - v[1])
                    },
                    n_tasks,
                )
            },
            |x| Host::from_fn(x[0].ne, |i| x[0].at(i) - x[1].at(i)),
        ));
    }
}

/// The custom-op cases.
pub fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    map_custom(&mut out);
    custom(&mut out);
    out
}
