//! Streams: asynchronous calls return before their work is done and the work runs in queue
//! order; synchronize reports the first error once; host access and drops wait for queued work;
//! copies and events order work across streams; graph plans; thread settings.
//!
//! "Before the work is done" is shown deterministically: the stream is held still (it waits on
//! an event recorded after a gated job on another stream, see `common_backend::Hold`), so queued
//! work cannot have run when the test looks.

mod common_backend;

use std::sync::atomic::Ordering;

use common_backend::{
    assert_close, bytes_f32, expect_err, f32_bytes, input, relu_mul_add, relu_mul_add_ref,
    test_buft, Hold, TestDevice,
};
use ggml::backend::{self, alloc_ctx_tensors, alloc_ctx_tensors_from_buft};
use ggml::{Backend, Context, Event, Graph, Tensor, Type};

const TOL: f64 = 1e-6;

/// Sets x and w of a [`relu_mul_add`] graph to the inputs for `seed`; returns them.
fn fill(x: &Tensor, w: &Tensor, seed: u32) -> (Vec<f32>, Vec<f32>) {
    let n = x.nelements() as usize;
    let (xv, wv) = (input(n, seed), input(n, seed + 1000));
    x.set_f32(&xv).unwrap();
    w.set_f32(&wv).unwrap();
    (xv, wv)
}

#[test]
fn async_calls_return_at_once_and_run_in_queue_order() {
    let cpu = backend::cpu_init().unwrap();
    let (_ctx, x, w, y, g) = relu_mul_add(64);
    let (_, wv) = fill(&x, &w, 1);
    let x2 = input(64, 2);
    let x3 = input(64, 3);

    let hold = Hold::new(&cpu);
    cpu.tensor_set_async(&x, f32_bytes(&x2), 0).unwrap();
    cpu.graph_compute_async(&g).unwrap();
    let got = cpu.tensor_get_async(&y, 0, 64 * 4).unwrap();
    let x_after = cpu.tensor_get_async(&x, 0, 64 * 4).unwrap();
    cpu.tensor_set_async(&x, f32_bytes(&x3), 0).unwrap();
    // every call returned while the stream cannot run anything
    assert!(!got.is_ready() && !x_after.is_ready());
    assert_eq!(cpu.n_pending(), 6, "the wait and five jobs are queued");

    hold.release();
    // set x2, then compute, then read y and x, then set x3: in that order
    assert_close(
        &bytes_f32(&got.wait().unwrap()),
        &relu_mul_add_ref(&x2, &wv),
        TOL,
    );
    assert_eq!(bytes_f32(&x_after.wait().unwrap()), x2);
    cpu.synchronize().unwrap();
    assert_eq!(cpu.n_pending(), 0);
    assert_eq!(x.get_f32().unwrap(), x3);
    assert_close(&y.get_f32().unwrap(), &relu_mul_add_ref(&x2, &wv), TOL);

    // partial async transfers at an offset
    cpu.tensor_set_async(&x, f32_bytes(&[9.0, 8.0]), 8).unwrap();
    let part = cpu.tensor_get_async(&x, 4, 12).unwrap().wait().unwrap();
    assert_eq!(bytes_f32(&part), vec![x3[1], 9.0, 8.0]);
}

#[test]
fn graph_compute_async_seed_example() {
    let cpu = backend::cpu_init().unwrap();
    let ctx = Context::init(16 * 1024 * 1024, false).unwrap();
    let a = ctx.new_tensor_1d(Type::F32, 100).unwrap();
    let b = ctx.relu(&a).unwrap();
    let graph = ctx.build_forward_expand(&b).unwrap();
    let input: Vec<f32> = (0..100).map(|i| (i as f32 - 50.0) * 0.25).collect();
    a.set_f32(&input).unwrap();
    cpu.graph_compute_async(&graph).unwrap();
    cpu.synchronize().unwrap();
    let out = b.get_f32().unwrap();
    let want: Vec<f32> = input.iter().map(|v| v.max(0.0)).collect();
    assert_eq!(out, want);
}

/// A no_alloc context with a, b and the named results of `ops` (ADD or MUL of a and b),
/// allocated on `stream`'s device; a and b hold inputs 1 and 2.
fn test_device_graphs(
    stream: &Backend,
    names: &[&str],
) -> (Context, Vec<f32>, Vec<f32>, Vec<Tensor>) {
    let ctx = Context::init(1 << 20, true).unwrap();
    let a = ctx.new_tensor_1d(Type::F32, 16).unwrap();
    let b = ctx.new_tensor_1d(Type::F32, 16).unwrap();
    let outs: Vec<Tensor> = names
        .iter()
        .map(|n| {
            let t = ctx.add(&a, &b).unwrap();
            t.set_name(n);
            t
        })
        .collect();
    alloc_ctx_tensors(&ctx, stream).unwrap();
    let (av, bv) = (input(16, 1), input(16, 2));
    a.set_f32(&av).unwrap();
    b.set_f32(&bv).unwrap();
    (ctx, av, bv, outs)
}

fn graph_of(t: &Tensor) -> Graph {
    let ctx = Context::init(1 << 20, true).unwrap();
    ctx.build_forward_expand(t).unwrap()
}

#[test]
fn synchronize_reports_the_first_error_once() {
    let dev = TestDevice::builder("Failing").build();
    let stream = dev.init(None).unwrap();
    let (_ctx, av, bv, outs) = test_device_graphs(&stream, &["fail_first", "fail_second", "ok"]);
    let graphs: Vec<Graph> = outs.iter().map(graph_of).collect();

    for g in &graphs {
        stream.graph_compute_async(g).unwrap(); // errors of running work are not known yet
    }
    let e = expect_err(
        stream.synchronize(),
        &["Failing", "\"fail_first\"", "on purpose"],
    );
    assert!(matches!(e, ggml::Error::Compute(_)));
    assert!(
        !e.to_string().contains("fail_second"),
        "only the first error"
    );
    stream.synchronize().unwrap(); // reported once
                                   // work queued after a failing job still ran
    let sum: Vec<f64> = av.iter().zip(&bv).map(|(a, b)| (a + b) as f64).collect();
    assert_close(&outs[2].get_f32().unwrap(), &sum, TOL);

    // the blocking form returns the error of its own graph
    expect_err(stream.graph_compute(&graphs[1]), &["\"fail_second\""]);
    stream.synchronize().unwrap();

    // an event recorded after failing work reports it to the host
    let ev = Event::new(&dev).unwrap();
    stream.graph_compute_async(&graphs[0]).unwrap();
    ev.record(&stream).unwrap();
    expect_err(ev.synchronize(), &["\"fail_first\""]);
    expect_err(stream.synchronize(), &["\"fail_first\""]);
    ev.record(&stream).unwrap();
    ev.synchronize().unwrap();
    stream.synchronize().unwrap();
}

#[test]
fn a_job_that_panics_is_an_error_not_a_hang() {
    let (buft, probe) = test_buft("Panicky", usize::MAX, false);
    let dev = TestDevice::builder("Panicky").buft(buft).build();
    let stream = dev.init(None).unwrap();
    let (_ctx, av, _bv, outs) = test_device_graphs(&stream, &["sum"]);
    let a = outs[0].src(0).unwrap();
    probe.panic_on_read.store(true, Ordering::SeqCst);
    let pending = stream.tensor_get_async(a, 0, 64).unwrap();
    expect_err(pending.wait(), &["tensor_get_async"]);
    expect_err(stream.synchronize(), &["panicked", "on purpose"]);
    probe.panic_on_read.store(false, Ordering::SeqCst);
    // the stream survives
    let again = stream.tensor_get_async(a, 0, 64).unwrap().wait().unwrap();
    assert_eq!(bytes_f32(&again), av);
    stream.synchronize().unwrap();
}

#[test]
fn host_access_waits_for_queued_work() {
    let cpu = backend::cpu_init().unwrap();
    let (_ctx, x, w, y, g) = relu_mul_add(256);
    let (xv, wv) = fill(&x, &w, 4);
    let want = relu_mul_add_ref(&xv, &wv);

    // a read right after queuing returns computed values, never stale ones
    y.set_f32(&[-123.0; 256]).unwrap();
    let hold = Hold::new(&cpu);
    cpu.graph_compute_async(&g).unwrap();
    let opener = hold.release_after(50);
    assert_close(&y.get_f32().unwrap(), &want, TOL);
    opener.join().unwrap();

    // a write waits too: the queued computation sees the old input
    let hold = Hold::new(&cpu);
    cpu.graph_compute_async(&g).unwrap();
    let opener = hold.release_after(50);
    x.set_f32(&input(256, 99)).unwrap();
    opener.join().unwrap();
    assert_close(&y.get_f32().unwrap(), &want, TOL);
    assert_eq!(x.get_f32().unwrap(), input(256, 99));

    // clear waits: it happens after the computation, so y ends up all clear bytes
    let (_ctx2, x2, w2, y2, g2) = relu_mul_add(256);
    fill(&x2, &w2, 5);
    let buf = y2.buffer().unwrap();
    let hold = Hold::new(&cpu);
    cpu.graph_compute_async(&g2).unwrap();
    let opener = hold.release_after(50);
    buf.clear(0x3F).unwrap();
    opener.join().unwrap();
    assert!(y2.to_bytes().unwrap().iter().all(|&b| b == 0x3F));
    cpu.synchronize().unwrap();
}

#[test]
fn dropping_a_backend_waits_for_its_queued_work() {
    let (_ctx, x, w, y, g) = relu_mul_add(128);
    let (xv, wv) = fill(&x, &w, 6);
    let stream = backend::cpu_init().unwrap();
    let hold = Hold::new(&stream);
    stream.graph_compute_async(&g).unwrap();
    let got = stream.tensor_get_async(&y, 0, 128 * 4).unwrap();
    assert!(!got.is_ready());
    let opener = hold.release_after(30);
    drop(stream);
    assert!(
        got.is_ready(),
        "drop returned only after the queued work ran"
    );
    assert_close(
        &bytes_f32(&got.wait().unwrap()),
        &relu_mul_add_ref(&xv, &wv),
        TOL,
    );
    opener.join().unwrap();

    // free() is the same as dropping the last handle
    let stream = backend::cpu_init().unwrap();
    let hold = Hold::new(&stream);
    let got = stream.tensor_get_async(&x, 0, 16).unwrap();
    let opener = hold.release_after(30);
    stream.free();
    assert!(got.is_ready());
    assert_eq!(bytes_f32(&got.wait().unwrap()), xv[..4].to_vec());
    opener.join().unwrap();
}

#[test]
fn dropping_buffers_and_contexts_with_queued_work_keeps_the_memory_until_it_ran() {
    let cpu = backend::cpu_init().unwrap();
    let (buft, probe) = test_buft("Counted", usize::MAX, true);
    let (pending, want) = {
        let ctx = Context::init(1 << 20, true).unwrap();
        let x = ctx.new_tensor_1d(Type::F32, 64).unwrap();
        let w = ctx.new_tensor_1d(Type::F32, 64).unwrap();
        let y = ctx
            .add(&ctx.mul(&ctx.relu(&x).unwrap(), &w).unwrap(), &x)
            .unwrap();
        let g = ctx.build_forward_expand(&y).unwrap();
        let buf = alloc_ctx_tensors_from_buft(&ctx, &buft).unwrap();
        let (xv, wv) = fill(&x, &w, 7);
        let hold = Hold::new(&cpu);
        cpu.graph_compute_async(&g).unwrap();
        let pending = cpu.tensor_get_async(&y, 0, 64 * 4).unwrap();
        drop((buf, g, x, w, y, ctx)); // every handle of the memory but the queued work's
        assert_eq!(
            probe.drops.load(Ordering::SeqCst),
            0,
            "memory kept for queued work"
        );
        assert!(!pending.is_ready());
        hold.release();
        (pending, relu_mul_add_ref(&xv, &wv))
    };
    assert_close(&bytes_f32(&pending.wait().unwrap()), &want, TOL);
    cpu.synchronize().unwrap();
    assert_eq!(
        probe.drops.load(Ordering::SeqCst),
        1,
        "released once the work ran"
    );

    // Buffer::free with queued work waits for it, then refuses further use
    let (_ctx, x, w, y, g) = relu_mul_add(64);
    let (xv, wv) = fill(&x, &w, 8);
    let ctx = Context::init(1 << 20, true).unwrap();
    let y2 = ctx.dup_tensor(&y).unwrap();
    let buf2 = alloc_ctx_tensors(&ctx, &cpu).unwrap();
    let hold = Hold::new(&cpu);
    cpu.graph_compute_async(&g).unwrap();
    backend::tensor_copy_async(&cpu, &cpu, &y, &y2).unwrap();
    let got = cpu.tensor_get_async(&y2, 0, 64 * 4).unwrap();
    let opener = hold.release_after(30);
    buf2.clone().free();
    assert!(
        got.is_ready(),
        "free returned only after the queued work on the buffer ran"
    );
    assert_close(
        &bytes_f32(&got.wait().unwrap()),
        &relu_mul_add_ref(&xv, &wv),
        TOL,
    );
    expect_err(y2.get_f32(), &["freed"]);
    opener.join().unwrap();

    // a context that owns its data: dropping it with work queued loses nothing
    let (ctx, x, w, y, g) = relu_mul_add(64);
    let (xv, wv) = fill(&x, &w, 9);
    let hold = Hold::new(&cpu);
    cpu.graph_compute_async(&g).unwrap();
    let got = cpu.tensor_get_async(&y, 0, 64 * 4).unwrap();
    drop((ctx, x, w, y, g));
    hold.release();
    assert_close(
        &bytes_f32(&got.wait().unwrap()),
        &relu_mul_add_ref(&xv, &wv),
        TOL,
    );
    cpu.synchronize().unwrap();
}

#[test]
fn tensor_copy_async_orders_between_two_cpu_streams() {
    let b_src = backend::cpu_init().unwrap();
    let b_dst = backend::cpu_init().unwrap();
    let (_ctx, x, w, y, g) = relu_mul_add(64);
    let (xv, wv) = fill(&x, &w, 10);
    let ctx = Context::init(1 << 20, false).unwrap();
    let d = ctx.new_tensor_1d(Type::F32, 64).unwrap();
    let k = ctx.new_tensor_1d(Type::F32, 1).unwrap();
    let e = ctx.mul(&d, &k).unwrap();
    let ge = ctx.build_forward_expand(&e).unwrap();
    d.set_f32(&[-7.0; 64]).unwrap();
    k.set_f32(&[3.0]).unwrap();

    let hold = Hold::new(&b_src);
    b_src.graph_compute_async(&g).unwrap();
    backend::tensor_copy_async(&b_src, &b_dst, &y, &d).unwrap();
    b_dst.graph_compute_async(&ge).unwrap();
    let got = b_dst.tensor_get_async(&e, 0, 64 * 4).unwrap();
    // b_dst is not held itself, but the copy waits for b_src's queued work
    assert!(!got.is_ready());
    assert!(b_dst.n_pending() >= 3);
    hold.release();
    let want: Vec<f64> = relu_mul_add_ref(&xv, &wv).iter().map(|v| v * 3.0).collect();
    assert_close(&bytes_f32(&got.wait().unwrap()), &want, 1e-5);
    b_src.synchronize().unwrap();
    b_dst.synchronize().unwrap();
    assert_eq!(d.get_f32().unwrap(), y.get_f32().unwrap());

    // on one stream the copy is simply queued in order
    let d2 = ctx.dup_tensor(&d).unwrap();
    b_dst
        .tensor_set_async(&d, f32_bytes(&[1.5; 64]), 0)
        .unwrap();
    backend::tensor_copy_async(&b_dst, &b_dst, &d, &d2).unwrap();
    b_dst
        .tensor_set_async(&d, f32_bytes(&[2.5; 64]), 0)
        .unwrap();
    b_dst.synchronize().unwrap();
    assert_eq!(d2.get_f32().unwrap(), vec![1.5; 64]);
    assert_eq!(d.get_f32().unwrap(), vec![2.5; 64]);
    // copying a tensor onto itself does nothing
    backend::tensor_copy_async(&b_src, &b_dst, &d, &d).unwrap();
    // the synchronous copy
    backend::tensor_copy(&y, &d2).unwrap();
    assert_eq!(d2.get_f32().unwrap(), y.get_f32().unwrap());
}

#[test]
fn events_order_two_streams_and_can_be_recorded_again() {
    let b1 = backend::cpu_init().unwrap();
    let b2 = backend::cpu_init().unwrap();
    let (_ctx, x, w, y, g) = relu_mul_add(32);
    let (xv, wv) = fill(&x, &w, 11);
    let ctx = Context::init(1 << 20, false).unwrap();
    let z = ctx.scale(&y, 0.5).unwrap();
    let gz = ctx.build_forward_expand(&z).unwrap();

    let ev = Event::new(&b1.get_device()).unwrap();
    assert_eq!(ev.device(), b1.get_device());
    assert!(ev.is_signalled(), "never recorded counts as signalled");
    ev.synchronize().unwrap();

    for round in 0..3u32 {
        let xr = input(32, 20 + round);
        x.set_f32(&xr).unwrap();
        let hold = Hold::new(&b1);
        b1.graph_compute_async(&g).unwrap();
        ev.record(&b1).unwrap(); // again on later rounds: moves the marker
        assert!(!ev.is_signalled());
        b2.event_wait(&ev).unwrap(); // returns at once: the host does not block
        b2.graph_compute_async(&gz).unwrap();
        let got = b2.tensor_get_async(&z, 0, 32 * 4).unwrap();
        assert!(!got.is_ready());
        hold.release();
        ev.synchronize().unwrap();
        assert!(ev.is_signalled());
        let want: Vec<f64> = relu_mul_add_ref(&xr, &wv).iter().map(|v| v * 0.5).collect();
        assert_close(&bytes_f32(&got.wait().unwrap()), &want, TOL);
    }
    let _ = xv;
    b1.synchronize().unwrap();
    b2.synchronize().unwrap();
    ev.free();
}

/// A CPU stream with fewer threads than cores spins for a moment between jobs
/// (`BackendImpl::spins_when_idle`), and so does `synchronize`: graphs submitted back to back
/// (its worker polling), after it went to sleep, and from another thread all run, in order,
/// with their values; dropping it right after an asynchronous submission (its worker busy or
/// polling) waits for that job and returns.
#[test]
fn a_stream_that_spins_between_jobs_runs_every_job_and_stops() {
    let cpu = backend::cpu_init().unwrap();
    cpu.set_n_threads(1).unwrap();
    let (_ctx, x, w, y, g) = relu_mul_add(100);
    for seed in 0..50 {
        let (xv, wv) = fill(&x, &w, seed);
        cpu.graph_compute(&g).unwrap();
        assert_close(&y.get_f32().unwrap(), &relu_mul_add_ref(&xv, &wv), TOL);
    }
    // past the poll window: the worker sleeps on its condvar and is woken
    std::thread::sleep(std::time::Duration::from_millis(20));
    let (xv, wv) = fill(&x, &w, 60);
    cpu.graph_compute(&g).unwrap();
    assert_close(&y.get_f32().unwrap(), &relu_mul_add_ref(&xv, &wv), TOL);
    // submitted from another thread while this one waits in synchronize
    let (xv, wv) = fill(&x, &w, 61);
    std::thread::scope(|s| {
        s.spawn(|| cpu.graph_compute_async(&g).unwrap());
    });
    cpu.synchronize().unwrap();
    assert_close(&y.get_f32().unwrap(), &relu_mul_add_ref(&xv, &wv), TOL);
    // the last handle dropped while the job may still run: the drop waits for it
    let (xv, wv) = fill(&x, &w, 62);
    cpu.graph_compute_async(&g).unwrap();
    drop(cpu);
    assert_close(&y.get_f32().unwrap(), &relu_mul_add_ref(&xv, &wv), TOL);
}

#[test]
fn graph_plans_compute_many_times() {
    let cpu = backend::cpu_init().unwrap();
    let (_ctx, x, w, y, g) = relu_mul_add(100);
    let plan = cpu.graph_plan_create(&g).unwrap();
    for seed in 0..5 {
        let (xv, wv) = fill(&x, &w, 30 + seed);
        cpu.graph_plan_compute(&plan).unwrap();
        assert_close(&y.get_f32().unwrap(), &relu_mul_add_ref(&xv, &wv), TOL);
    }
    // the plan survives a thread-count change
    cpu.set_n_threads(1).unwrap();
    let (xv, wv) = fill(&x, &w, 40);
    cpu.graph_plan_compute(&plan).unwrap();
    assert_close(&y.get_f32().unwrap(), &relu_mul_add_ref(&xv, &wv), TOL);
    cpu.graph_plan_free(plan.clone());

    // another backend's plan, and a plan whose backend is gone
    let other = backend::cpu_init().unwrap();
    expect_err(
        other.graph_plan_compute(&plan),
        &["graph_plan_compute", "another backend", "CPU"],
    );
    let gone = backend::cpu_init().unwrap();
    let orphan = gone.graph_plan_create(&g).unwrap();
    drop(gone);
    expect_err(cpu.graph_plan_compute(&orphan), &["another backend"]);

    // a device with the trait's default plan
    let dev = TestDevice::builder("Planner").build();
    let stream = dev.init(None).unwrap();
    let (_c, av, bv, outs) = test_device_graphs(&stream, &["p"]);
    let tplan = stream.graph_plan_create(&graph_of(&outs[0])).unwrap();
    let a = outs[0].src(0).unwrap();
    for k in 0..3 {
        let ak: Vec<f32> = av.iter().map(|v| v + k as f32).collect();
        a.set_f32(&ak).unwrap();
        stream.graph_plan_compute(&tplan).unwrap();
        let want: Vec<f64> = ak.iter().zip(&bv).map(|(a, b)| (a + b) as f64).collect();
        assert_close(&outs[0].get_f32().unwrap(), &want, TOL);
    }
    stream.graph_plan_free(tplan);

    // a plan over a freed buffer
    let ctx = Context::init(1 << 20, true).unwrap();
    let p = ctx.new_tensor_1d(Type::F32, 4).unwrap();
    let q = ctx.neg(&p).unwrap();
    let buf = alloc_ctx_tensors(&ctx, &cpu).unwrap();
    let gq = ctx.build_forward_expand(&q).unwrap();
    let fplan = cpu.graph_plan_create(&gq).unwrap();
    buf.free();
    expect_err(
        cpu.graph_plan_compute(&fplan),
        &["graph_plan_compute", "freed"],
    );
}

#[test]
fn set_n_threads_gives_the_same_results() {
    let cpu = backend::cpu_init().unwrap();
    let ctx = Context::init(1 << 22, false).unwrap();
    let (k, m, n) = (64usize, 48usize, 40usize);
    let a = ctx.new_tensor_2d(Type::F32, k as i64, m as i64).unwrap();
    let b = ctx.new_tensor_2d(Type::F32, k as i64, n as i64).unwrap();
    let c = ctx.mul_mat(&a, &b).unwrap();
    let g = ctx.build_forward_expand(&c).unwrap();
    let (av, bv) = (input(k * m, 50), input(k * n, 51));
    a.set_f32(&av).unwrap();
    b.set_f32(&bv).unwrap();
    // c[j][i] = sum_l a[i][l] * b[j][l]
    let want: Vec<f64> = (0..n)
        .flat_map(|j| {
            let (av, bv) = (&av, &bv);
            (0..m).map(move |i| {
                (0..k)
                    .map(|l| av[i * k + l] as f64 * bv[j * k + l] as f64)
                    .sum::<f64>()
            })
        })
        .collect();
    for threads in [1, 2, 3, 4, 1] {
        cpu.set_n_threads(threads).unwrap();
        c.set_f32(&vec![0.0; m * n]).unwrap();
        cpu.graph_compute(&g).unwrap();
        assert_close(&c.get_f32().unwrap(), &want, 1e-4);
    }
    expect_err(cpu.set_n_threads(0), &["set_n_threads", "n = 0"]);
    let stream = TestDevice::builder("NoThreads").build().init(None).unwrap();
    let e = expect_err(stream.set_n_threads(2), &["NoThreads", "2"]);
    assert!(matches!(e, ggml::Error::Unsupported(_)));
}

#[test]
fn tensor_copy_async_between_overlapping_views_copies_the_old_values() {
    let cpu = backend::cpu_init().unwrap();
    let ctx = Context::init(1 << 20, false).unwrap();
    let x = ctx.new_tensor_1d(Type::F32, 8).unwrap();
    let xv: Vec<f32> = (0..8).map(|i| i as f32).collect();
    for (src_off, dst_off, want) in [
        (0, 2, [0., 1., 0., 1., 2., 3., 4., 5.]),
        (2, 0, [2., 3., 4., 5., 6., 7., 6., 7.]),
    ] {
        x.set_f32(&xv).unwrap();
        let src = ctx.view_1d(&x, 6, src_off * 4).unwrap();
        let dst = ctx.view_1d(&x, 6, dst_off * 4).unwrap();
        backend::tensor_copy_async(&cpu, &cpu, &src, &dst).unwrap();
        cpu.synchronize().unwrap();
        assert_eq!(x.get_f32().unwrap(), want, "from {src_off} to {dst_off}");
        // the synchronous copy agrees
        x.set_f32(&xv).unwrap();
        backend::tensor_copy(&src, &dst).unwrap();
        assert_eq!(x.get_f32().unwrap(), want);
    }
}

/// A synchronous `graph_compute` on an idle stream runs on the calling thread (as GGML's CPU
/// backend computes: no hand-off to the stream's thread and back); one called while work is
/// queued before it waits its turn and runs on the stream's thread, after that work.
#[test]
fn graph_compute_on_an_idle_stream_runs_on_the_calling_thread() {
    use std::sync::{Arc, Mutex};
    let cpu = backend::cpu_init().unwrap();
    cpu.set_n_threads(1).unwrap();
    let ctx = Context::init(1 << 20, false).unwrap();
    let a = ctx.new_tensor_1d(Type::F32, 4).unwrap();
    a.set_f32(&[1.0; 4]).unwrap();
    let threads = Arc::new(Mutex::new(Vec::new()));
    let log = threads.clone();
    let out = ctx
        .map_custom1(
            &a,
            move |d, a, _, _| {
                log.lock().unwrap().push(std::thread::current().id());
                for r in d.rows() {
                    let src = a.row(r).unwrap().to_vec();
                    for (o, x) in d.row_mut(r).unwrap().iter_mut().zip(src) {
                        *o = x + 1.0;
                    }
                }
            },
            1,
        )
        .unwrap();
    let g = ctx.build_forward_expand(&out).unwrap();
    let me = std::thread::current().id();

    cpu.graph_compute(&g).unwrap();
    assert_eq!(*threads.lock().unwrap(), [me]);
    assert_eq!(out.get_f32().unwrap(), [2.0; 4]);

    let hold = Hold::new(&cpu);
    cpu.tensor_set_async(&a, f32_bytes(&[5.0; 4]), 0).unwrap();
    let releaser = hold.release_after(20);
    cpu.graph_compute(&g).unwrap();
    releaser.join().unwrap();
    let seen = threads.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    assert_ne!(
        seen[1], me,
        "queued behind other work: the stream's thread runs it"
    );
    assert_eq!(out.get_f32().unwrap(), [6.0; 4], "after the queued write");
    assert_eq!(cpu.n_pending(), 0);

    cpu.graph_compute(&g).unwrap();
    assert_eq!(
        threads.lock().unwrap()[2],
        me,
        "idle again: the caller's thread"
    );
    assert_eq!(out.get_f32().unwrap(), [6.0; 4]);
}
