//! MAP_CUSTOM1/2/3 and CUSTOM with Rust closures: results against f64 references, GGML's task
//! split, the closures' checked views of the tensors, and nodes from outside refused.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use common::*;
use ggml::ops::{CustomDst, CustomSrc, Meta, NodeMeta, N_TASKS_MAX};
use ggml::{backend, Context, Op, Type};

/// Index of element `i0` of flat row `r` of shape `ne`.
fn at(ne: [i64; 5], r: usize, i0: usize) -> [usize; 5] {
    let mut idx = [i0, 0, 0, 0, 0];
    let mut rest = r;
    for d in 1..5 {
        idx[d] = rest % ne[d] as usize;
        rest /= ne[d] as usize;
    }
    idx
}

/// Sets every element of the owned rows to `f(index)`.
fn fill_owned(d: &mut CustomDst<'_>, f: impl Fn([usize; 5]) -> f32) {
    let ne = d.ne();
    for r in d.rows() {
        for i0 in 0..ne[0] as usize {
            let idx = at(ne, r, i0);
            d.set(idx, f(idx)).unwrap();
        }
    }
}

/// `f(a, b, c)` elementwise through the views' element access, over the owned rows.
fn elementwise(d: &mut CustomDst<'_>, s: &[&CustomSrc<'_>], f: impl Fn(&[f32]) -> f32) {
    fill_owned(d, |idx| {
        let args: Vec<f32> = s.iter().map(|x| x.get(idx).unwrap()).collect();
        f(&args)
    })
}

#[test]
fn map_custom1_rows() {
    for n_tasks in [N_TASKS_MAX, 1, 2, 7] {
        for ne in [&[7i64, 5][..], &[16, 3, 2, 2]] {
            let name = format!("MAP_CUSTOM1(ne={ne:?},n_tasks={n_tasks})");
            check(&name, TOL, |ctx, rng| {
                let (a, ha) = input(ctx, Type::F32, ne, Layout::Contiguous, rng, -1.0, 1.0)?;
                let out = ctx.map_custom1(
                    &a,
                    |d, a, _ith, _nth| {
                        let mut buf = vec![0f32; d.ne()[0] as usize];
                        for r in d.rows() {
                            let src = a.row(r).unwrap();
                            buf.copy_from_slice(src);
                            let row = d.row_mut(r).unwrap();
                            for (o, &x) in row.iter_mut().zip(&buf) {
                                *o = 2.0 * x + 1.0;
                            }
                        }
                    },
                    n_tasks,
                )?;
                let want = Host {
                    ne: ha.ne,
                    v: ha.v.iter().map(|x| 2.0 * x + 1.0).collect(),
                };
                Ok((out, want))
            });
        }
    }
}

#[test]
fn map_custom2_and_3_strided_and_converted() {
    for ty in FLOATS {
        let name = format!("MAP_CUSTOM2(type={ty},layout=Padded)");
        check(&name, TOL, |ctx, rng| {
            let (a, ha) = input(ctx, ty, &[6, 5, 3], Layout::Padded, rng, -1.0, 1.0)?;
            let (b, hb) = input(
                ctx,
                Type::F32,
                &[6, 5, 3],
                Layout::Transposed,
                rng,
                -1.0,
                1.0,
            )?;
            let out = ctx.map_custom2(
                &a,
                &b,
                |d, a, b, _, _| elementwise(d, &[a, b], |x| x[0] - x[1]),
                N_TASKS_MAX,
            )?;
            let want = Host {
                ne: ha.ne,
                v: ha.v.iter().zip(&hb.v).map(|(x, y)| x - y).collect(),
            };
            Ok((out, want))
        });
        let name = format!("MAP_CUSTOM3(type={ty})");
        check(&name, TOL, |ctx, rng| {
            let l = Layout::Contiguous;
            let (a, ha) = input(ctx, ty, &[9, 4], l, rng, -1.0, 1.0)?;
            let (b, hb) = input(ctx, Type::F16, &[9, 4], l, rng, -1.0, 1.0)?;
            let (c, hc) = input(ctx, Type::F32, &[9, 4], l, rng, -1.0, 1.0)?;
            let out = ctx.map_custom3(
                &a,
                &b,
                &c,
                |d, a, b, c, _, _| elementwise(d, &[a, b, c], |x| x[0] * x[1] + x[2]),
                2,
            )?;
            let v = (0..ha.v.len())
                .map(|i| ha.v[i] * hb.v[i] + hc.v[i])
                .collect();
            Ok((out, Host { ne: ha.ne, v }))
        });
    }
}

#[test]
fn inplace_forms() {
    check("MAP_CUSTOM1_INPLACE(ne=[5,7])", TOL, |ctx, rng| {
        let (a, ha) = input(ctx, Type::F32, &[5, 7], Layout::Contiguous, rng, -1.0, 1.0)?;
        let out = ctx.map_custom1_inplace(
            &a,
            |d, a, _, _| elementwise(d, &[a], |x| x[0] * x[0]),
            N_TASKS_MAX,
        )?;
        assert_aliases(&out, &a);
        Ok((
            out,
            Host {
                ne: ha.ne,
                v: ha.v.iter().map(|x| x * x).collect(),
            },
        ))
    });
    check("MAP_CUSTOM2_INPLACE(ne=[5,7])", TOL, |ctx, rng| {
        let (a, ha) = input(ctx, Type::F32, &[5, 7], Layout::Contiguous, rng, -1.0, 1.0)?;
        let (b, hb) = input(ctx, Type::F32, &[5, 7], Layout::Contiguous, rng, -1.0, 1.0)?;
        let out = ctx.map_custom2_inplace(
            &a,
            &b,
            |d, a, b, _, _| elementwise(d, &[a, b], |x| x[0] + x[1]),
            3,
        )?;
        assert_aliases(&out, &a);
        Ok((
            out,
            Host {
                ne: ha.ne,
                v: ha.v.iter().zip(&hb.v).map(|(x, y)| x + y).collect(),
            },
        ))
    });
    check("MAP_CUSTOM3_INPLACE(ne=[4,3])", TOL, |ctx, rng| {
        let l = Layout::Contiguous;
        let (a, ha) = input(ctx, Type::F32, &[4, 3], l, rng, -1.0, 1.0)?;
        let (b, hb) = input(ctx, Type::F32, &[4, 3], l, rng, -1.0, 1.0)?;
        let (c, hc) = input(ctx, Type::F32, &[4, 3], l, rng, -1.0, 1.0)?;
        let out = ctx.map_custom3_inplace(
            &a,
            &b,
            &c,
            |d, a, b, c, _, _| elementwise(d, &[a, b, c], |x| x[0] - x[1] * x[2]),
            1,
        )?;
        let v = (0..ha.v.len())
            .map(|i| ha.v[i] - hb.v[i] * hc.v[i])
            .collect();
        Ok((out, Host { ne: ha.ne, v }))
    });
    check("CUSTOM_INPLACE(args=1)", TOL, |ctx, rng| {
        let (a, ha) = input(ctx, Type::F32, &[6, 4], Layout::Contiguous, rng, -1.0, 1.0)?;
        let (b, hb) = input(ctx, Type::F32, &[6, 1], Layout::Contiguous, rng, -1.0, 1.0)?;
        let out = ctx.custom_inplace(
            &a,
            &[&b],
            |d, s, _, _| {
                fill_owned(d, |i| {
                    s[0].get(i).unwrap() + s[1].get([i[0], 0, 0, 0, 0]).unwrap()
                })
            },
            N_TASKS_MAX,
        )?;
        assert_aliases(&out, &a);
        let want = Host::from_fn(ha.ne, |i| ha.at(i) + hb.at([i[0], 0, 0, 0, 0]));
        Ok((out, want))
    });
}

#[test]
fn custom_4d_reduces_its_args() {
    for n_args in [0usize, 1, 3, 9] {
        let name = format!("CUSTOM(type=f32,ne=[3,4,2,1],args={n_args})");
        check(&name, TOL, |ctx, rng| {
            let mut args = Vec::new();
            let mut hosts = Vec::new();
            for _ in 0..n_args {
                let (t, h) = input(
                    ctx,
                    Type::F32,
                    &[3, 4, 2],
                    Layout::Contiguous,
                    rng,
                    -1.0,
                    1.0,
                )?;
                args.push(t);
                hosts.push(h);
            }
            let refs: Vec<&ggml::Tensor> = args.iter().collect();
            let out = ctx.custom_4d(
                Type::F32,
                3,
                4,
                2,
                1,
                &refs,
                |d, s, _, _| {
                    fill_owned(d, |i| {
                        s.iter().map(|x| x.get(i).unwrap()).sum::<f32>() + i[1] as f32
                    })
                },
                N_TASKS_MAX,
            )?;
            let want = Host::from_fn(shape(&[3, 4, 2]), |i| {
                hosts.iter().map(|h| h.at(i)).sum::<f64>() + i[1] as f64
            });
            Ok((out, want))
        });
    }
}

/// GGML's split: N_TASKS_MAX runs one task per thread, a positive count at most that many.
#[test]
fn task_split() {
    let be = backend::cpu_init().unwrap();
    be.set_n_threads(3).unwrap();
    for (n_tasks, want_nth) in [(N_TASKS_MAX, 3usize), (1, 1), (2, 2), (5, 3)] {
        let ctx = Context::init(1 << 20, false).unwrap();
        let a = ctx.new_tensor_2d(Type::F32, 4, 10).unwrap();
        a.set_f32(&[0.0; 40]).unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let out = ctx
            .map_custom1(
                &a,
                move |d, _, ith, nth| {
                    log.lock().unwrap().push((ith, nth, d.rows()));
                    let other = (d.rows().end) % d.nrows();
                    if !d.rows().contains(&other) {
                        assert!(d.row_mut(other).is_err(), "row {other} is not this task's");
                    }
                    for r in d.rows() {
                        d.row_mut(r).unwrap().fill(ith as f32);
                    }
                },
                n_tasks,
            )
            .unwrap();
        be.graph_compute(&ctx.build_forward_expand(&out).unwrap())
            .unwrap();
        let mut calls = seen.lock().unwrap().clone();
        calls.sort_by_key(|c| c.0);
        let per = 10usize.div_ceil(want_nth);
        let expect: Vec<_> = (0..want_nth)
            .map(|i| (i, want_nth, (i * per).min(10)..((i + 1) * per).min(10)))
            .collect();
        assert_eq!(calls, expect, "n_tasks = {n_tasks}");
        let got = out.get_f32().unwrap();
        for (r, row) in got.chunks(4).enumerate() {
            assert!(
                row.iter().all(|&v| v == (r / per) as f32),
                "row {r}: {row:?}"
            );
        }
    }
}

/// The views refuse what is outside the shape or the task's share, and slices over memory the
/// result shares; a panicking closure fails the computation instead of aborting.
#[test]
fn views_are_checked() {
    let be = backend::cpu_init().unwrap();
    be.set_n_threads(2).unwrap();
    let ctx = Context::init(1 << 20, false).unwrap();
    let a = ctx.new_tensor_2d(Type::F32, 4, 6).unwrap();
    a.set_f32(&[1.0; 24]).unwrap();
    let errors = Arc::new(Mutex::new(Vec::<String>::new()));
    let log = errors.clone();
    let out = ctx
        .map_custom1_inplace(
            &a,
            move |d, a, ith, _| {
                let mut e = log.lock().unwrap();
                let other = if ith == 0 { d.rows().end } else { 0 };
                e.push(d.row_mut(d.rows().start).unwrap_err().to_string());
                e.push(d.set([0, other, 0, 0, 0], 0.0).unwrap_err().to_string());
                e.push(d.get([4, d.rows().start, 0, 0, 0]).unwrap_err().to_string());
                e.push(a.get([0, other, 0, 0, 0]).unwrap_err().to_string());
                e.push(a.row(d.rows().start).unwrap_err().to_string());
                e.push(
                    a.read_row(d.rows().start, &mut [0.0; 3])
                        .unwrap_err()
                        .to_string(),
                );
                let mut buf = [0f32; 4];
                a.read_row(d.rows().start, &mut buf).unwrap();
                assert_eq!(buf, [1.0; 4]);
            },
            N_TASKS_MAX,
        )
        .unwrap();
    be.graph_compute(&ctx.build_forward_expand(&out).unwrap())
        .unwrap();
    let e = errors.lock().unwrap();
    assert_eq!(e.len(), 12);
    for needle in [
        "shares the result's memory",
        "owns rows",
        "outside the shape",
        "may read rows",
        "result writes",
        "out has 3",
    ] {
        assert!(
            e.iter().any(|m| m.contains(needle)),
            "no error mentions {needle:?}: {e:?}"
        );
    }

    let ctx = Context::init(1 << 20, false).unwrap();
    let a = ctx.new_tensor_1d(Type::F32, 4).unwrap();
    let out = ctx
        .map_custom1(&a, |_, _, _, _| panic!("closure failed"), 1)
        .unwrap();
    let r = be.graph_compute(&ctx.build_forward_expand(&out).unwrap());
    assert!(r.is_err(), "a panicking closure must fail the computation");
}

#[test]
fn builders_refuse_bad_arguments() {
    let ctx = Context::init(1 << 20, true).unwrap();
    let a = ctx.new_tensor_1d(Type::F32, 4).unwrap();
    let f = |_: &mut CustomDst<'_>, _: &CustomSrc<'_>, _: usize, _: usize| {};
    assert_err(ctx.map_custom1(&a, f, 0), &["MAP_CUSTOM1", "n_tasks = 0"]);
    assert_err(
        ctx.map_custom1_inplace(&a, f, -2),
        &["MAP_CUSTOM1", "n_tasks = -2"],
    );
    let g = |_: &mut CustomDst<'_>, _: &[CustomSrc<'_>], _: usize, _: usize| {};
    let many: Vec<&ggml::Tensor> = std::iter::repeat_n(&a, 10).collect();
    assert_err(
        ctx.custom_4d(Type::F32, 1, 1, 1, 1, &many, g, 1),
        &["CUSTOM", "10 args"],
    );
    assert_err(
        ctx.custom_inplace(&a, &many[..9], g, 1),
        &["CUSTOM", "9 args"],
    );
    assert_err(
        ctx.custom_4d(Type::F32, 1, 1, 1, 1, &[], g, 0),
        &["CUSTOM", "n_tasks"],
    );
}

/// A custom node offered from outside is refused: its parameters would carry a pointer from
/// the wire, and no closure comes with it.
#[test]
fn validate_refuses_custom_nodes() {
    let ctx = Context::init(1 << 20, true).unwrap();
    let a = ctx.new_tensor_1d(Type::F32, 4).unwrap();
    let n = ctx.map_custom1(&a, |_, _, _, _| {}, 1).unwrap();
    let src = [Some(Meta::of(&a))];
    let params = n.op_params();
    assert_eq!(params[0], 1, "op_params hold only n_tasks");
    assert!(params[1..].iter().all(|&p| p == 0));
    for op in [Op::MapCustom1, Op::MapCustom2, Op::MapCustom3, Op::Custom] {
        let e = op.validate(&NodeMeta {
            dst: Meta::of(&n),
            view_offs: None,
            src: &src,
            op_params: &params,
        });
        assert_err(e, &[op.name(), "closure"]);
    }
    assert!(n.set_op_params_i32(0, 2).is_err());
}

/// The closure runs once per task and graph computation, from the backend's threads.
#[test]
fn closure_runs_once_per_task() {
    let be = backend::cpu_init().unwrap();
    be.set_n_threads(2).unwrap();
    let ctx = Context::init(1 << 20, false).unwrap();
    let a = ctx.new_tensor_1d(Type::F32, 8).unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let out = ctx
        .map_custom1(
            &a,
            move |_, _, _, _| {
                c.fetch_add(1, Ordering::Relaxed);
            },
            N_TASKS_MAX,
        )
        .unwrap();
    let g = ctx.build_forward_expand(&out).unwrap();
    be.graph_compute(&g).unwrap();
    be.graph_compute(&g).unwrap();
    assert_eq!(calls.load(Ordering::Relaxed), 4);
}
