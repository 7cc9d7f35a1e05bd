//! The backend interface with memory that is not host memory: a device whose bytes live in a
//! server thread (`ggml_testdev`), written against `ggml`'s public traits only, registered
//! from here, computing graphs, and exchanging tensors with the CPU through
//! `tensor_copy_async` and events. Every value is checked; the server's counts show which path
//! each transfer took.

use ggml::{backend, Backend, Context, Device, DeviceType, Event, Graph, Tensor, Type};
mod common;

use common::input;
use ggml_testdev::{Counts, Server};

/// A graph mixing op families (matrix product, broadcast add, norm, soft-max, a transposed
/// view made contiguous, row gathering): its inputs `w` [16, 8], `x` [16, 4], `bias` [8],
/// `ids` [3] and its output.
struct Mixed {
    _ctx: Context,
    w: Tensor,
    x: Tensor,
    bias: Tensor,
    ids: Tensor,
    out: Tensor,
    graph: Graph,
}

fn mixed(no_alloc: bool) -> Mixed {
    let ctx = Context::init(1 << 20, no_alloc).unwrap();
    let w = ctx.new_tensor_2d(Type::F32, 16, 8).unwrap();
    let x = ctx.new_tensor_2d(Type::F32, 16, 4).unwrap();
    let bias = ctx.new_tensor_1d(Type::F32, 8).unwrap();
    let ids = ctx.new_tensor_1d(Type::I32, 3).unwrap();
    let y = ctx.mul_mat(&w, &x).unwrap(); // [8, 4]
    let y = ctx.add(&y, &bias).unwrap();
    let y = ctx.rms_norm(&y, 1e-6).unwrap();
    let y = ctx.soft_max(&ctx.scale(&y, 0.5).unwrap()).unwrap();
    let t = ctx.cont(&ctx.transpose(&y).unwrap()).unwrap(); // [4, 8]
    let out = ctx.get_rows(&t, &ids).unwrap(); // [4, 3]
    let graph = ctx.build_forward_expand(&out).unwrap();
    Mixed {
        _ctx: ctx,
        w,
        x,
        bias,
        ids,
        out,
        graph,
    }
}

impl Mixed {
    fn fill(&self, seed: u32) {
        self.w.set_f32(&input(16 * 8, seed)).unwrap();
        self.x.set_f32(&input(16 * 4, seed + 1)).unwrap();
        self.bias.set_f32(&input(8, seed + 2)).unwrap();
        self.ids.set_i32(&[7, 0, 3]).unwrap();
    }
}

/// The mixed graph's output computed on the CPU for `seed`.
fn cpu_reference(seed: u32) -> Vec<f32> {
    let cpu = backend::cpu_init().unwrap();
    let m = mixed(false);
    m.fill(seed);
    cpu.graph_compute(&m.graph).unwrap();
    m.out.get_f32().unwrap()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// `b - a`, field by field.
fn delta(a: Counts, b: Counts) -> Counts {
    Counts {
        allocs: b.allocs - a.allocs,
        frees: b.frees - a.frees,
        writes: b.writes - a.writes,
        reads: b.reads - a.reads,
        fills: b.fills - a.fills,
        copies: b.copies - a.copies,
        computes: b.computes - a.computes,
        marks: b.marks - a.marks,
        syncs: b.syncs - a.syncs,
        native_waits: b.native_waits - a.native_waits,
        all_reduces: b.all_reduces - a.all_reduces,
    }
}

/// A 1-D F32 tensor of `n` values in a fresh `no_alloc` context, allocated on `stream`.
fn vector_on(stream: &Backend, n: i64) -> (Context, Tensor, ggml::Buffer) {
    let ctx = Context::init(1 << 16, true).unwrap();
    let t = ctx.new_tensor_1d(Type::F32, n).unwrap();
    let buf = backend::alloc_ctx_tensors(&ctx, stream).unwrap();
    (ctx, t, buf)
}

#[test]
fn remote_memory_has_no_host_address_and_is_reached_through_the_server() {
    let server = Server::start("memory").unwrap();
    let dev = server.device("TestDevMemory0");
    let buft = dev.buffer_type();
    assert!(!buft.is_host());
    assert_eq!(buft.get_alignment(), ggml_testdev::ALIGNMENT);
    let buf = buft.alloc_buffer(256).unwrap();
    assert!(buf.get_base().is_none(), "no host address");
    assert!(!buf.is_host());
    assert_eq!(server.counts().allocs, 1);

    let stream = dev.init(None).unwrap();
    let (_ctx, t, tbuf) = vector_on(&stream, 8);
    assert!(tbuf.get_base().is_none());
    let before = server.counts();
    t.set_f32(&[1.0, -2.0, 3.5, 0.0, 5.0, -6.0, 7.25, 8.0])
        .unwrap();
    assert_eq!(
        t.get_f32().unwrap(),
        vec![1.0, -2.0, 3.5, 0.0, 5.0, -6.0, 7.25, 8.0]
    );
    backend::tensor_memset(&t, 0, 4, 8).unwrap(); // elements 1 and 2
    assert_eq!(
        t.get_f32().unwrap(),
        vec![1.0, 0.0, 0.0, 0.0, 5.0, -6.0, 7.25, 8.0]
    );
    tbuf.clear(0).unwrap();
    assert_eq!(t.get_f32().unwrap(), vec![0.0; 8]);
    let d = delta(before, server.counts());
    assert_eq!((d.writes, d.reads, d.fills), (1, 3, 2), "{d:?}");

    // Asynchronous transfers go through the engine's queue.
    let before = server.counts();
    stream.tensor_set_async(&t, bytes(&[9.0, 10.0]), 8).unwrap();
    let got = stream.tensor_get_async(&t, 8, 8).unwrap().wait().unwrap();
    assert_eq!(floats(&got), vec![9.0, 10.0]);
    stream.synchronize().unwrap();
    let d = delta(before, server.counts());
    assert_eq!((d.writes, d.reads), (1, 1), "{d:?}");
    assert!(d.syncs >= 1, "{d:?}");

    // Freeing releases the server's memory (the free is unanswered; the allocation after it
    // is served after it).
    buf.free();
    let _probe = dev.buffer_type().alloc_buffer(1).unwrap();
    assert_eq!(server.counts().frees, 1);
}

fn bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn floats(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

#[test]
fn a_registered_remote_device_computes_graphs_bit_for_bit_as_the_cpu() {
    let (server, dev) = ggml_testdev::register("TestDevCompute0").unwrap();
    let found = backend::dev_by_name("testdevcompute0").expect("registered");
    assert_eq!(found, dev);
    let reg = backend::reg_by_name("TestDev").expect("its registry");
    assert!(reg.devices().contains(&dev));
    assert_eq!(
        backend::reg_get(backend::reg_count() - 1).unwrap().name(),
        "CPU",
        "the CPU registry stays last"
    );
    let first_cpu = (backend::devices().iter())
        .position(|d| d.dev_type() == DeviceType::Cpu)
        .unwrap();
    let pos = backend::devices().iter().position(|d| *d == dev).unwrap();
    assert!(pos < first_cpu, "the device goes before the CPU");
    let caps = dev.get_props().caps;
    assert!(caps.async_compute && caps.events);
    assert!(!caps.host_buffer && !caps.buffer_from_host_ptr);

    let stream = backend::init_by_name("TestDevCompute0", None).unwrap();
    let m = mixed(true);
    let buf = backend::alloc_ctx_tensors(&m._ctx, &stream).unwrap();
    assert!(buf.get_base().is_none());
    for seed in [1, 2] {
        m.fill(seed);
        let before = server.counts();
        stream.graph_compute(&m.graph).unwrap();
        assert_eq!(delta(before, server.counts()).computes, 1);
        assert_eq!(
            bits(&m.out.get_f32().unwrap()),
            bits(&cpu_reference(seed)),
            "seed {seed}"
        );
    }

    // A plan, computed twice over changed inputs.
    let plan = stream.graph_plan_create(&m.graph).unwrap();
    for seed in [3, 4] {
        m.fill(seed);
        stream.graph_plan_compute(&plan).unwrap();
        assert_eq!(
            bits(&m.out.get_f32().unwrap()),
            bits(&cpu_reference(seed)),
            "plan, seed {seed}"
        );
    }
}

#[test]
fn tensors_move_between_the_cpu_and_the_device_with_copy_async_and_events() {
    let server = Server::start("exchange").unwrap();
    let dev = server.device("TestDevExchange0");
    let cpu = backend::cpu_init().unwrap();
    let stream = dev.init(None).unwrap();
    let n = 64;

    // CPU side: x, h = relu(x); later f = o + x.
    let cctx = Context::init(1 << 20, false).unwrap();
    let x = cctx.new_tensor_1d(Type::F32, n).unwrap();
    let h = cctx.relu(&x).unwrap();
    let g1 = cctx.build_forward_expand(&h).unwrap();
    let o_cpu = cctx.new_tensor_1d(Type::F32, n).unwrap();
    let f = cctx.add(&o_cpu, &x).unwrap();
    let g3 = cctx.build_forward_expand(&f).unwrap();
    // Device side: o = 2 h - 1 (computed on the device).
    let dctx = Context::init(1 << 20, true).unwrap();
    let h_dev = dctx.new_tensor_1d(Type::F32, n).unwrap();
    let o = dctx.scale(&h_dev, 2.0).unwrap();
    let g2 = dctx.build_forward_expand(&o).unwrap();
    let _dbuf = backend::alloc_ctx_tensors(&dctx, &stream).unwrap();

    for seed in [5, 6, 7] {
        let xs = input(n as usize, seed);
        x.set_f32(&xs).unwrap();
        let before = server.counts();
        // Nothing waits on the host between these calls.
        cpu.graph_compute_async(&g1).unwrap();
        backend::tensor_copy_async(&cpu, &stream, &h, &h_dev).unwrap();
        stream.graph_compute_async(&g2).unwrap();
        backend::tensor_copy_async(&stream, &cpu, &o, &o_cpu).unwrap();
        cpu.graph_compute_async(&g3).unwrap();
        let done = Event::new(&cpu.get_device()).unwrap();
        done.record(&cpu).unwrap();
        done.synchronize().unwrap();
        let want: Vec<f32> = xs.iter().map(|&v| 2.0 * v.max(0.0) + v).collect();
        assert_eq!(f.get_f32().unwrap(), want, "seed {seed}");
        let d = delta(before, server.counts());
        // In: one write (from the CPU's host memory); out: one read; one graph; the copy out
        // waited for a marker of the device's queue.
        assert_eq!((d.writes, d.reads, d.computes), (1, 1, 1), "{d:?}");
        assert!(d.marks >= 1, "{d:?}");
    }

    // An event recorded on the device, waited for by the CPU stream: the CPU's next graph sees
    // the device's result.
    let xs = input(n as usize, 9);
    h_dev.set_f32(&xs).unwrap();
    stream.graph_compute_async(&g2).unwrap();
    let ev = Event::new(&dev).unwrap();
    ev.record(&stream).unwrap();
    cpu.event_wait(&ev).unwrap();
    backend::tensor_copy_async(&stream, &cpu, &o, &o_cpu).unwrap();
    x.set_f32(&vec![0.0; n as usize]).unwrap();
    cpu.graph_compute_async(&g3).unwrap();
    cpu.synchronize().unwrap();
    assert!(ev.is_signalled());
    ev.synchronize().unwrap();
    let want: Vec<f32> = xs.iter().map(|&v| 2.0 * v).collect();
    assert_eq!(f.get_f32().unwrap(), want);
}

#[test]
fn copies_between_devices_of_one_server_stay_on_the_server() {
    let server = Server::start("direct").unwrap();
    let (d0, d1) = (
        server.device("TestDevDirect0"),
        server.device("TestDevDirect1"),
    );
    let (s0, s1) = (d0.init(None).unwrap(), d1.init(None).unwrap());
    let (_c0, a, _b0) = vector_on(&s0, 16);
    let (_c1, b, _b1) = vector_on(&s1, 16);
    let (_c2, c, _b2) = vector_on(&s0, 16);
    let vals = input(16, 11);
    a.set_f32(&vals).unwrap();

    let before = server.counts();
    backend::tensor_copy_async(&s0, &s1, &a, &b).unwrap(); // the engine's own copy
    s1.synchronize().unwrap();
    backend::tensor_copy(&b, &c).unwrap(); // the buffers' direct copy
    let d = delta(before, server.counts());
    assert_eq!((d.copies, d.reads, d.writes), (2, 0, 0), "{d:?}");
    assert_eq!(b.get_f32().unwrap(), vals);
    assert_eq!(c.get_f32().unwrap(), vals);

    // An event between two streams of the server is waited for in the server's order, without
    // blocking the waiting stream; the work after it sees the work before it.
    let ctx = Context::init(1 << 20, true).unwrap();
    let bb = ctx.new_tensor_1d(Type::F32, 16).unwrap();
    let neg = ctx.neg(&bb).unwrap();
    let g = ctx.build_forward_expand(&neg).unwrap();
    let _buf = backend::alloc_ctx_tensors(&ctx, &s1).unwrap();
    let before = server.counts();
    backend::tensor_copy_async(&s0, &s1, &a, &bb).unwrap();
    s1.graph_compute_async(&g).unwrap();
    let ev = Event::new(&d1).unwrap();
    ev.record(&s1).unwrap();
    s0.event_wait(&ev).unwrap();
    backend::tensor_copy_async(&s1, &s0, &neg, &c).unwrap();
    s0.synchronize().unwrap();
    let d = delta(before, server.counts());
    assert!(d.native_waits >= 1, "{d:?}");
    assert_eq!(d.reads, 0, "{d:?}");
    let want: Vec<f32> = vals.iter().map(|v| -v).collect();
    assert_eq!(c.get_f32().unwrap(), want);
}

#[test]
fn host_reads_after_queued_device_work_see_its_results() {
    let server = Server::start("order").unwrap();
    let dev: Device = server.device("TestDevOrder0");
    let stream = dev.init(None).unwrap();
    let ctx = Context::init(1 << 20, true).unwrap();
    let x = ctx.new_tensor_1d(Type::F32, 32).unwrap();
    let y = ctx.scale(&x, 3.0).unwrap();
    let g = ctx.build_forward_expand(&y).unwrap();
    let _buf = backend::alloc_ctx_tensors(&ctx, &stream).unwrap();
    for i in 0..20 {
        stream
            .tensor_set_async(&x, bytes(&[i as f32; 32]), 0)
            .unwrap();
        stream.graph_compute_async(&g).unwrap();
        // No synchronize: the host read waits for the queued work on the buffer.
        assert_eq!(y.get_f32().unwrap(), vec![3.0 * i as f32; 32], "round {i}");
    }
    stream.synchronize().unwrap();
}

#[test]
fn a_cpu_buffer_is_refused_by_the_device_and_a_freed_one_is_an_error() {
    let server = Server::start("refuse").unwrap();
    let dev = server.device("TestDevRefuse0");
    let stream = dev.init(None).unwrap();
    let ctx = Context::init(1 << 20, false).unwrap(); // host memory
    let x = ctx.new_tensor_1d(Type::F32, 4).unwrap();
    let y = ctx.neg(&x).unwrap();
    let g = ctx.build_forward_expand(&y).unwrap();
    let e = stream.graph_compute(&g).unwrap_err();
    assert!(
        e.to_string()
            .contains("cannot use tensors in buffer type CPU"),
        "{e}"
    );
    assert!(dev.init(Some("fast")).is_err());

    let (_c, t, buf) = vector_on(&stream, 4);
    t.set_f32(&[1.0; 4]).unwrap();
    buf.free();
    let e = t.get_f32().unwrap_err();
    assert!(matches!(e, ggml::Error::Freed(_)), "{e}");
    // A request with a reply, served after the (unanswered) release.
    let _probe = dev.buffer_type().alloc_buffer(1).unwrap();
    assert_eq!(server.counts().frees, 1, "the server released the memory");
}

/// Several threads drive their own CPU and device streams over tensors that share one device
/// buffer, so their jobs contend for it (an engine with its own queue holds a buffer until it
/// synchronizes, and gives it back before it blocks): every round's values are right and
/// nothing deadlocks.
#[test]
fn streams_contending_for_one_device_buffer_neither_deadlock_nor_mix_results() {
    const THREADS: usize = 3;
    const ROUNDS: usize = 25;
    const N: i64 = 32;
    let server = Server::start("contend").unwrap();
    let dev = server.device("TestDevContend0");
    let setup = dev.init(None).unwrap();
    // One device context, one buffer: per thread an input and a result tensor.
    let dctx = Context::init(1 << 20, true).unwrap();
    let pairs: Vec<(Tensor, Tensor, Graph)> = (0..THREADS)
        .map(|k| {
            let h = dctx.new_tensor_1d(Type::F32, N).unwrap();
            let o = dctx.scale(&h, (k + 2) as f32).unwrap();
            let g = dctx.build_forward_expand(&o).unwrap();
            (h, o, g)
        })
        .collect();
    let _dbuf = backend::alloc_ctx_tensors(&dctx, &setup).unwrap();

    let (tx, rx) = std::sync::mpsc::channel();
    for (k, (h, o, g2)) in pairs.into_iter().enumerate() {
        let (dev, tx) = (dev.clone(), tx.clone());
        std::thread::spawn(move || {
            let cpu = backend::cpu_init().unwrap();
            let stream = dev.init(None).unwrap();
            let cctx = Context::init(1 << 20, false).unwrap();
            let x = cctx.new_tensor_1d(Type::F32, N).unwrap();
            let back = cctx.new_tensor_1d(Type::F32, N).unwrap();
            let f = cctx.add(&back, &x).unwrap();
            let g3 = cctx.build_forward_expand(&f).unwrap();
            let scale = (k + 2) as f32;
            let mut ok = true;
            for r in 0..ROUNDS {
                let xs = input(N as usize, (k * 1000 + r) as u32);
                x.set_f32(&xs).unwrap();
                backend::tensor_copy_async(&cpu, &stream, &x, &h).unwrap();
                stream.graph_compute_async(&g2).unwrap();
                backend::tensor_copy_async(&stream, &cpu, &o, &back).unwrap();
                cpu.graph_compute_async(&g3).unwrap();
                cpu.synchronize().unwrap();
                let want: Vec<f32> = xs.iter().map(|&v| scale * v + v).collect();
                ok &= f.get_f32().unwrap() == want;
            }
            stream.synchronize().unwrap();
            tx.send((k, ok)).unwrap();
        });
    }
    drop(tx);
    for _ in 0..THREADS {
        let (k, ok) = rx
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("a thread deadlocked");
        assert!(ok, "thread {k} saw a wrong value");
    }
}
