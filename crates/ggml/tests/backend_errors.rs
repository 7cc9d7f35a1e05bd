//! Bad input to the backend API: every case is an `Err` (or `None` where the API says so) whose
//! message names the argument and the value, and the failed call changes nothing.

mod common_backend;

use common_backend::{expect_err, f32_bytes, Hold, TestDevice};
use ggml::backend::{self, alloc_ctx_tensors};
use ggml::{Context, Error, Status, Type};

#[test]
fn lookups_out_of_range_or_unknown_are_none() {
    assert!(backend::dev_get(backend::dev_count()).is_none());
    assert!(backend::reg_get(backend::reg_count()).is_none());
    assert!(backend::dev_by_name("no-such-device").is_none());
    assert!(backend::reg_by_name("no-such-registry").is_none());
    let reg = backend::reg_by_name("CPU").unwrap();
    assert!(reg.dev_get(reg.dev_count()).is_none());
    expect_err(
        backend::init_by_name("no-such-device", None),
        &["init_by_name", "\"no-such-device\""],
    );
}

#[test]
fn a_full_context_is_alloc_failed() {
    // 1024 bytes hold two tensors' metadata (368 each including the object header)
    let ctx = Context::init(1024, true).unwrap();
    ctx.new_tensor_1d(Type::F32, 10).unwrap();
    ctx.new_tensor_1d(Type::F32, 10).unwrap();
    let used = ctx.used_mem();
    let e = expect_err(
        ctx.new_tensor_1d(Type::F32, 10),
        &["context of 1024 bytes is full", "368 bytes"],
    );
    assert_eq!(e.status(), Status::AllocFailed);
    assert!(matches!(e, Error::AllocFailed(_)));
    assert_eq!(ctx.used_mem(), used, "the failed call used nothing");
    assert_eq!(ctx.tensors().len(), 2);

    // with data in the context: the data counts too
    let ctx = Context::init(4096, false).unwrap();
    let e = expect_err(ctx.new_tensor_1d(Type::F32, 1024), &["is full", "4096"]);
    assert_eq!(e.status(), Status::AllocFailed);
    ctx.new_tensor_1d(Type::F32, 16).unwrap();
}

#[test]
fn shape_mismatches() {
    let ctx = Context::init(1 << 20, false).unwrap();
    let a = ctx.new_tensor_2d(Type::F32, 4, 3).unwrap();
    a.set_name("a");
    let b = ctx.new_tensor_2d(Type::F32, 3, 3).unwrap();
    b.set_name("b");
    expect_err(
        ctx.add(&a, &b),
        &[
            "ADD",
            "\"b\"",
            "[3, 3, 1, 1, 1]",
            "\"a\"",
            "[4, 3, 1, 1, 1]",
        ],
    );
    expect_err(ctx.mul(&a, &b), &["MUL", "\"b\""]);
    expect_err(
        a.set_f32(&[0.0; 11]),
        &["set_f32", "11 values", "\"a\"", "12 elements"],
    );
    expect_err(
        backend::tensor_copy(&a, &b),
        &["tensor_copy", "\"a\"", "\"b\"", "differ"],
    );
    let cpu = backend::cpu_init().unwrap();
    expect_err(
        backend::tensor_copy_async(&cpu, &cpu, &a, &b),
        &[
            "tensor_copy_async",
            "\"a\"",
            "[4, 3, 1, 1, 1]",
            "\"b\"",
            "[3, 3, 1, 1, 1]",
        ],
    );
    let t = ctx.transpose(&a).unwrap();
    expect_err(t.get_f32(), &["get_f32", "not contiguous"]);
    let c = ctx.new_tensor_1d(Type::F32, 12).unwrap();
    expect_err(backend::tensor_copy(&a, &c), &["tensor_copy", "differ"]);
}

#[test]
fn unallocated_tensors_have_no_data() {
    let cpu = backend::cpu_init().unwrap();
    let ctx = Context::init(1 << 20, true).unwrap();
    let t = ctx.new_tensor_1d(Type::F32, 4).unwrap();
    t.set_name("bare");
    let needles = ["\"bare\"", "has no memory"];
    assert!(!t.is_allocated() && t.buffer().is_none() && t.data_offset().is_none());
    expect_err(t.get_f32(), &needles);
    expect_err(t.set_f32(&[1.0; 4]), &needles);
    expect_err(backend::tensor_get(&t, &mut [0u8; 4], 0), &needles);
    expect_err(backend::tensor_set(&t, &[0u8; 4], 0), &needles);
    expect_err(backend::tensor_memset(&t, 0, 0, 4), &needles);
    expect_err(cpu.tensor_get_async(&t, 0, 4), &needles);
    expect_err(cpu.tensor_set_async(&t, vec![0; 4], 0), &needles);
    let r = ctx.relu(&t).unwrap();
    let g = ctx.build_forward_expand(&r).unwrap();
    expect_err(
        cpu.graph_compute_async(&g),
        &["graph_compute", "has no memory"],
    );
    expect_err(cpu.graph_compute(&g), &["graph_compute", "has no memory"]);
    expect_err(
        cpu.graph_plan_create(&g),
        &["graph_plan_create", "has no memory"],
    );
    let ctx2 = Context::init(1 << 20, false).unwrap();
    let u = ctx2.new_tensor_1d(Type::F32, 4).unwrap();
    expect_err(
        backend::tensor_copy_async(&cpu, &cpu, &t, &u),
        &["tensor_copy_async (src)", "\"bare\""],
    );
    expect_err(
        backend::tensor_copy_async(&cpu, &cpu, &u, &t),
        &["tensor_copy_async (dst)", "\"bare\""],
    );
    expect_err(backend::tensor_copy(&t, &u), &["\"bare\"", "has no memory"]);
    assert_eq!(cpu.n_pending(), 0, "nothing was queued");
    cpu.synchronize().unwrap();
}

#[test]
fn every_use_of_a_freed_buffer_is_an_error() {
    let cpu = backend::cpu_init().unwrap();
    let ctx = Context::init(1 << 20, true).unwrap();
    let x = ctx.new_tensor_1d(Type::F32, 8).unwrap();
    x.set_name("x");
    let y = ctx.neg(&x).unwrap();
    let buf = alloc_ctx_tensors(&ctx, &cpu).unwrap();
    let live_ctx = Context::init(1 << 20, false).unwrap();
    let live = live_ctx.new_tensor_1d(Type::F32, 8).unwrap();
    live.set_f32(&[4.0; 8]).unwrap();
    let g = ctx.build_forward_expand(&y).unwrap();
    x.set_f32(&[1.0; 8]).unwrap();
    cpu.graph_compute(&g).unwrap();
    assert_eq!(y.get_f32().unwrap(), vec![-1.0; 8]);

    buf.clone().free();
    // Hold the streams still, so anything a failed call queued by mistake stays visible.
    let cpu2 = backend::cpu_init().unwrap();
    let (hold, hold2) = (Hold::new(&cpu), Hold::new(&cpu2));
    let (before, before2) = (cpu.n_pending(), cpu2.n_pending());
    let freed = |e: Error, what: &str| {
        assert!(matches!(e, Error::Freed(_)), "{e}");
        let msg = e.to_string();
        assert!(msg.contains(what), "{msg:?} names {what:?}");
        assert!(msg.contains("freed"), "{msg:?}");
    };
    freed(x.get_f32().unwrap_err(), "tensor_get");
    freed(x.set_f32(&[0.0; 8]).unwrap_err(), "tensor_set");
    freed(
        backend::tensor_get(&x, &mut [0; 4], 0).unwrap_err(),
        "tensor_get",
    );
    freed(
        backend::tensor_set(&x, &[0; 4], 0).unwrap_err(),
        "tensor_set",
    );
    freed(
        backend::tensor_memset(&x, 0, 0, 4).unwrap_err(),
        "tensor_memset",
    );
    freed(cpu.graph_compute_async(&g).unwrap_err(), "graph_compute");
    freed(cpu.graph_compute(&g).unwrap_err(), "graph_compute");
    freed(
        cpu.tensor_set_async(&x, f32_bytes(&[0.0]), 0).unwrap_err(),
        "tensor_set_async",
    );
    freed(
        cpu.tensor_get_async(&x, 0, 4).err().unwrap(),
        "tensor_get_async",
    );
    freed(
        backend::tensor_copy_async(&cpu, &cpu, &x, &live).unwrap_err(),
        "tensor_copy_async",
    );
    freed(
        backend::tensor_copy_async(&cpu, &cpu, &live, &x).unwrap_err(),
        "tensor_copy_async",
    );
    freed(
        backend::tensor_copy_async(&cpu2, &cpu, &live, &x).unwrap_err(),
        "tensor_copy_async",
    );
    freed(
        backend::tensor_copy_async(&cpu, &cpu2, &x, &live).unwrap_err(),
        "tensor_copy_async",
    );
    freed(backend::tensor_copy(&x, &live).unwrap_err(), "tensor_copy");
    freed(backend::tensor_copy(&live, &x).unwrap_err(), "tensor_copy");
    freed(buf.clear(0).unwrap_err(), "clear");
    freed(buf.reset().unwrap_err(), "reset");
    assert_eq!(
        (cpu.n_pending(), cpu2.n_pending()),
        (before, before2),
        "nothing was queued"
    );
    hold.release();
    hold2.release();
    cpu.synchronize().unwrap();
    cpu2.synchronize().unwrap();
    assert_eq!(
        live.get_f32().unwrap(),
        vec![4.0; 8],
        "the live tensor is untouched"
    );
    buf.free(); // freeing twice is harmless
}

#[test]
fn async_transfers_out_of_range() {
    let cpu = backend::cpu_init().unwrap();
    let ctx = Context::init(1 << 20, false).unwrap();
    let t = ctx.new_tensor_1d(Type::F32, 4).unwrap();
    t.set_name("t");
    expect_err(
        cpu.tensor_set_async(&t, vec![0; 8], 12),
        &[
            "tensor_set_async",
            "offset 12",
            "size 8",
            "\"t\"",
            "16 bytes",
        ],
    );
    expect_err(
        cpu.tensor_get_async(&t, 4, 13),
        &["tensor_get_async", "offset 4", "size 13", "16 bytes"],
    );
    expect_err(
        cpu.tensor_get_async(&t, usize::MAX, 2),
        &["tensor_get_async", "past the end"],
    );
    assert_eq!(cpu.n_pending(), 0);
}

#[test]
fn stream_setting_errors() {
    let cpu = backend::cpu_init().unwrap();
    let e = expect_err(cpu.set_n_threads(0), &["set_n_threads", "n = 0"]);
    assert!(matches!(e, Error::InvalidArgument(_)));
    cpu.set_n_threads(2).unwrap();

    let ctx = Context::init(1 << 20, false).unwrap();
    let a = ctx.new_tensor_1d(Type::F32, 4).unwrap();
    let g = ctx.build_forward_expand(&ctx.relu(&a).unwrap()).unwrap();
    let other = backend::cpu_init().unwrap();
    let plan = other.graph_plan_create(&g).unwrap();
    expect_err(
        cpu.graph_plan_compute(&plan),
        &["graph_plan_compute", "another backend"],
    );
    other.graph_plan_compute(&plan).unwrap();
}

#[test]
fn graph_errors() {
    let ctx = Context::init(1 << 22, false).unwrap();
    let a = ctx.new_tensor_1d(Type::F32, 4).unwrap();
    let b = ctx.relu(&a).unwrap();
    let c = ctx.neg(&b).unwrap();
    let g = ctx.build_forward_expand(&c).unwrap();
    assert_eq!(g.n_nodes(), 2);
    assert_eq!(g.node(0).unwrap(), b);
    assert_eq!(g.node(-1).unwrap(), c);
    assert_eq!(g.node(-2).unwrap(), b);
    for i in [2, 100, -3, i64::MIN] {
        expect_err(g.node(i), &["node", &format!("index {i}"), "2 nodes"]);
    }
    expect_err(g.graph_view(1, 3), &["graph_view", "1..3", "2 nodes"]);
    expect_err(
        ctx.new_graph_custom(0, false),
        &["new_graph_custom", "size 0"],
    );

    // a graph of 2 nodes is full with 3
    let small = ctx.new_graph_custom(2, false).unwrap();
    let d = ctx.sqr(&c).unwrap();
    expect_err(
        small.build_forward_expand(&d),
        &["build_forward_expand", "size 2", "full"],
    );
    assert_eq!(small.n_nodes(), 0, "nothing was added");
    small.build_forward_expand(&c).unwrap();
    assert_eq!(small.n_nodes(), 2);
    expect_err(small.add_node(&d), &["add_node", "size 2", "full"]);
}

#[test]
fn devices_refuse_what_they_cannot_compute() {
    let dev = TestDevice::builder("TestAccel").build();
    let stream = dev.init(None).unwrap();
    let ctx = Context::init(1 << 20, true).unwrap();
    let a = ctx.new_tensor_1d(Type::F32, 4).unwrap();
    let b = ctx.new_tensor_1d(Type::F32, 4).unwrap();
    let s = ctx.add(&a, &b).unwrap();
    let r = ctx.relu(&s).unwrap();
    r.set_name("r");
    alloc_ctx_tensors(&ctx, &stream).unwrap();
    assert!(dev.supports_op(&s));
    assert!(!dev.supports_op(&r));
    let g = ctx.build_forward_expand(&r).unwrap();
    let e = expect_err(
        stream.graph_compute(&g),
        &["TestAccel", "\"r\"", "UNARY", "not supported"],
    );
    assert!(matches!(e, Error::Unsupported(_)));
    expect_err(stream.graph_plan_create(&g), &["\"r\"", "not supported"]);
    assert_eq!(stream.n_pending(), 0, "refused before queuing");

    // tensors in memory the device cannot use
    let cpu_ctx = Context::init(1 << 20, false).unwrap();
    let p = cpu_ctx.new_tensor_1d(Type::F32, 4).unwrap();
    let q = cpu_ctx.add(&p, &p).unwrap();
    let gq = cpu_ctx.build_forward_expand(&q).unwrap();
    expect_err(
        stream.graph_compute_async(&gq),
        &["graph_compute", "TestAccel", "buffer type CPU"],
    );
    // and the CPU cannot use the device's memory
    let cpu = backend::cpu_init().unwrap();
    let gs = ctx.build_forward_expand(&s).unwrap();
    expect_err(
        cpu.graph_compute(&gs),
        &["graph_compute", "CPU", "buffer type TestAccel"],
    );
}

#[test]
fn huge_sizes_are_errors_not_overflows() {
    // a budget so large that padding it would overflow
    for size in [usize::MAX, usize::MAX - 3] {
        match Context::init(size, true) {
            Ok(ctx) => {
                ctx.new_tensor_1d(Type::F32, 4).unwrap();
            }
            Err(e) => assert!(e.to_string().contains(&size.to_string()), "{e}"),
        }
    }
    // tensors whose sizes add up past the address space
    let ctx = Context::init(1 << 20, true).unwrap();
    for _ in 0..5 {
        ctx.new_tensor_1d(Type::F32, 1 << 60).unwrap();
    }
    let cpu = backend::cpu_init().unwrap();
    let e = expect_err(alloc_ctx_tensors(&ctx, &cpu), &["bytes"]);
    assert_eq!(e.status(), Status::AllocFailed);
    assert!(ctx.tensors().iter().all(|t| !t.is_allocated()));
}

#[test]
fn thread_counts_are_bounded() {
    let cpu = backend::cpu_init().unwrap();
    for n in [513, 1 << 20, usize::MAX] {
        expect_err(
            cpu.set_n_threads(n),
            &["set_n_threads", &n.to_string(), "512"],
        );
    }
    cpu.set_n_threads(3).unwrap();
    let ctx = Context::init(1 << 20, false).unwrap();
    let a = ctx.new_tensor_1d(Type::F32, 64).unwrap();
    let b = ctx.abs(&a).unwrap();
    a.set_f32(&common_backend::input(64, 3)).unwrap();
    cpu.graph_compute(&ctx.build_forward_expand(&b).unwrap())
        .unwrap();
    let want: Vec<f32> = common_backend::input(64, 3)
        .iter()
        .map(|v| v.abs())
        .collect();
    assert_eq!(b.get_f32().unwrap(), want);
}

#[test]
fn huge_graphs_are_errors_not_overflows() {
    let ctx = Context::init(1 << 20, false).unwrap();
    for size in [usize::MAX, usize::MAX / 2, 1 << 60] {
        let e = expect_err(
            ctx.new_graph_custom(size, false),
            &["is full", &size.to_string()],
        );
        assert_eq!(e.status(), Status::AllocFailed);
        assert_eq!(ggml::graph_overhead_custom(size, true), usize::MAX);
    }
    assert_eq!(ggml::graph_overhead(), 82_608);
    ctx.new_graph_custom(16, true).unwrap();
}
