//! The scheduler over devices that compute only some ops, so that graphs really split: the
//! test devices' memory is not host memory (it lives in server threads), so every split input
//! is copied between devices. Results equal the CPU's alone bit for bit.

use std::sync::{Arc, Mutex};

use ggml::{backend, Backend, BufferUsage, Context, Graph, Op, Sched, Tensor, Type};
mod common;

use common::input;
use ggml_testdev::Server;

/// A two-layer MLP with soft-max: `w1` [32, 24], `w2` [24, 16], `x` [32, 5] (an input).
struct Mlp {
    _ctx: Context,
    w1: Tensor,
    w2: Tensor,
    x: Tensor,
    h: Tensor,
    out: Tensor,
    graph: Graph,
}

fn mlp(no_alloc: bool) -> Mlp {
    let ctx = Context::init(1 << 20, no_alloc).unwrap();
    let w1 = ctx.new_tensor_2d(Type::F32, 32, 24).unwrap();
    let w2 = ctx.new_tensor_2d(Type::F32, 24, 16).unwrap();
    let x = ctx.new_tensor_2d(Type::F32, 32, 5).unwrap();
    x.set_name("x");
    x.set_input();
    let h = ctx.mul_mat(&w1, &x).unwrap(); // [24, 5]
    let h = ctx.relu(&ctx.scale(&h, 0.25).unwrap()).unwrap();
    h.set_name("h");
    h.set_output();
    let y = ctx.mul_mat(&w2, &h).unwrap(); // [16, 5]
    let t = ctx.cont(&ctx.transpose(&y).unwrap()).unwrap(); // [5, 16]
    let out = ctx.soft_max(&t).unwrap();
    out.set_name("out");
    let graph = ctx.build_forward_expand(&out).unwrap();
    Mlp {
        _ctx: ctx,
        w1,
        w2,
        x,
        h,
        out,
        graph,
    }
}

/// The MLP's output and hidden layer on the CPU alone, for input seed `seed`.
fn reference(seed: u32) -> (Vec<f32>, Vec<f32>) {
    let m = mlp(false);
    m.w1.set_f32(&input(32 * 24, 1)).unwrap();
    m.w2.set_f32(&input(24 * 16, 2)).unwrap();
    m.x.set_f32(&input(32 * 5, seed)).unwrap();
    backend::cpu_init()
        .unwrap()
        .graph_compute(&m.graph)
        .unwrap();
    (m.out.get_f32().unwrap(), m.h.get_f32().unwrap())
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// The MLP's weights in a weights buffer of `stream`'s device.
fn mlp_on(stream: &Backend) -> Mlp {
    let m = mlp(true);
    let buf = stream
        .alloc_buffer(4 * (32 * 24 + 24 * 16) + 2 * 64)
        .unwrap();
    buf.set_usage(BufferUsage::Weights);
    backend::tensor_alloc(&buf, &m.w1, 0).unwrap();
    backend::tensor_alloc(&buf, &m.w2, 4 * 32 * 24 + 64).unwrap();
    m.w1.set_f32(&input(32 * 24, 1)).unwrap();
    m.w2.set_f32(&input(24 * 16, 2)).unwrap();
    m
}

fn only_mul_mat(t: &Tensor) -> bool {
    matches!(t.op(), Op::None | Op::MulMat)
}

/// A server and a stream of a device on it that computes only matrix products.
fn mul_mat_stream(name: &str) -> (Server, Backend) {
    let server = Server::start(name).unwrap();
    let stream = server
        .device_with_ops(&format!("{name}0"), only_mul_mat)
        .init(None)
        .unwrap();
    (server, stream)
}

#[test]
fn weights_on_a_mul_mat_device_split_the_graph_and_match_the_cpu() {
    let server = Server::start("sched-mm").unwrap();
    let dev = server.device_with_ops("SchedMM0", only_mul_mat);
    let gpu = dev.init(None).unwrap();
    let m = mlp_on(&gpu);
    let sched = backend::sched_new(std::slice::from_ref(&gpu), 64, false).unwrap();
    assert_eq!(sched.get_n_backends(), 2, "the CPU fallback is appended");
    let cpu = sched.get_backend(1).unwrap();
    sched.alloc_graph(&m.graph).unwrap();
    m.x.set_f32(&input(32 * 5, 7)).unwrap();
    sched.graph_compute(&m.graph).unwrap();

    let (want, want_h) = reference(7);
    assert_eq!(bits(&m.out.get_f32().unwrap()), bits(&want));
    assert_eq!(bits(&m.h.get_f32().unwrap()), bits(&want_h));
    // mul_mat, then scale/relu on the CPU, mul_mat, then the rest on the CPU.
    assert_eq!(sched.get_n_splits(), 4);
    let nodes = m.graph.nodes();
    let mm: Vec<&Tensor> = nodes.iter().filter(|n| n.op() == Op::MulMat).collect();
    assert_eq!(mm.len(), 2);
    for n in &mm {
        assert_eq!(sched.get_tensor_backend(n), Some(gpu.clone()));
    }
    assert_eq!(sched.get_tensor_backend(&m.out), Some(cpu.clone()));
    assert_eq!(
        sched.get_tensor_backend(&m.x),
        Some(cpu.clone()),
        "inputs live on the CPU"
    );
    // The graph's nodes are the user's: the output is in the CPU's compute buffer.
    assert_eq!(
        m.out.buffer().unwrap().get_type(),
        cpu.get_default_buffer_type()
    );
    assert!(sched.get_buffer_size(&gpu).unwrap() > 0);
    assert!(sched.get_buffer_size(&cpu).unwrap() > 0);
    let c = server.counts();
    assert!(c.computes >= 2, "both products ran on the device: {c:?}");
}

#[test]
fn the_same_graph_computes_again_and_a_new_one_after_reset() {
    let (_server, gpu) = mul_mat_stream("SchedAgain");
    let sched = backend::sched_new(std::slice::from_ref(&gpu), 64, false).unwrap();
    let m = mlp_on(&gpu);
    sched.alloc_graph(&m.graph).unwrap();
    assert!(
        sched.alloc_graph(&m.graph).is_err(),
        "allocated twice without reset"
    );
    for seed in [3, 4] {
        m.x.set_f32(&input(32 * 5, seed)).unwrap();
        sched.graph_compute(&m.graph).unwrap();
        assert_eq!(bits(&m.out.get_f32().unwrap()), bits(&reference(seed).0));
    }
    let other = mlp_on(&gpu);
    assert!(
        sched.graph_compute(&other.graph).is_err(),
        "another graph is allocated"
    );
    sched.reset();
    assert!(
        m.out.get_f32().is_err(),
        "memory of a reset graph is gone, never reused"
    );
    sched.alloc_graph(&other.graph).unwrap();
    other.x.set_f32(&input(32 * 5, 5)).unwrap();
    sched.graph_compute(&other.graph).unwrap();
    assert_eq!(bits(&other.out.get_f32().unwrap()), bits(&reference(5).0));
}

#[test]
fn pinned_nodes_and_two_devices_of_different_servers() {
    // Two devices on two servers: copies between them go through the host.
    let s1 = Server::start("sched-a").unwrap();
    let s2 = Server::start("sched-b").unwrap();
    let a = s1.device("SchedA0").init(None).unwrap();
    let b = s2
        .device_with_ops("SchedB0", |t| t.op() != Op::SoftMax)
        .init(None)
        .unwrap();
    let m = mlp_on(&a);
    let sched = backend::sched_new(&[a.clone(), b.clone()], 64, false).unwrap();
    assert_eq!(sched.get_n_backends(), 3);
    // The hidden layer's relu on b: the graph goes a -> b -> a.
    let relu = m.h.clone();
    sched.set_tensor_backend(&relu, &b).unwrap();
    m.x.set_input();
    sched.alloc_graph(&m.graph).unwrap();
    m.x.set_f32(&input(32 * 5, 9)).unwrap();
    sched.graph_compute(&m.graph).unwrap();
    assert_eq!(bits(&m.out.get_f32().unwrap()), bits(&reference(9).0));
    assert_eq!(sched.get_tensor_backend(&relu), Some(b.clone()));
    assert_eq!(sched.get_tensor_backend(&m.out), Some(a.clone()));
    assert_eq!(sched.get_n_splits(), 3);
    assert!(s2.counts().computes >= 1);
    // A stream the scheduler does not have is refused.
    let stranger = backend::cpu_init().unwrap();
    let e = sched.set_tensor_backend(&relu, &stranger).unwrap_err();
    assert!(e.to_string().contains("not one of the scheduler's"), "{e}");
}

#[test]
fn parallel_keeps_four_copies_and_pipelines_graphs() {
    let (_server, gpu) = mul_mat_stream("SchedPar");
    let sched = backend::sched_new(std::slice::from_ref(&gpu), 64, true).unwrap();
    assert_eq!(sched.get_n_copies(), 4);
    sched.reserve(&mlp_on(&gpu).graph).unwrap();
    // Six micro-batches, each a new graph: the copy index turns (0, 1, 2, 3, 0, 1), each
    // with its own input copies and events.
    let mut runs = Vec::new();
    for seed in 10..16 {
        let m = mlp_on(&gpu);
        sched.reset();
        sched.alloc_graph(&m.graph).unwrap();
        m.x.set_f32(&input(32 * 5, seed)).unwrap();
        sched.graph_compute_async(&m.graph).unwrap();
        // Read before the next graph reuses the compute buffers.
        sched.synchronize().unwrap();
        runs.push((seed, m.out.get_f32().unwrap()));
    }
    for (seed, got) in runs {
        assert_eq!(bits(&got), bits(&reference(seed).0), "seed {seed}");
    }
}

#[test]
fn the_eval_callback_observes_chosen_nodes_and_can_stop_a_split() {
    let (_server, gpu) = mul_mat_stream("SchedCb");
    let m = mlp_on(&gpu);
    let sched = backend::sched_new(std::slice::from_ref(&gpu), 64, false).unwrap();
    type Seen = Vec<(String, Vec<f32>)>;
    let seen: Arc<Mutex<Seen>> = Arc::default();
    let log = seen.clone();
    sched.set_eval_callback(Some(Arc::new(move |t: &Tensor, ask: bool| {
        if ask {
            return t.name() == "h";
        }
        log.lock().unwrap().push((t.name(), t.get_f32().unwrap()));
        true
    })));
    sched.alloc_graph(&m.graph).unwrap();
    m.x.set_f32(&input(32 * 5, 11)).unwrap();
    sched.graph_compute(&m.graph).unwrap();
    let (want, want_h) = reference(11);
    {
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0].0, "h");
        assert_eq!(bits(&seen[0].1), bits(&want_h));
    }
    assert_eq!(bits(&m.out.get_f32().unwrap()), bits(&want));

    // Returning false after the scale skips the rest of its split (the relu "h"); the
    // following splits still run, as in GGML.
    let asked: Arc<Mutex<Vec<String>>> = Arc::default();
    let log = asked.clone();
    sched.set_eval_callback(Some(Arc::new(move |t: &Tensor, ask: bool| {
        if ask {
            log.lock().unwrap().push(t.name());
            return t.op() == Op::Scale;
        }
        false
    })));
    sched.graph_compute(&m.graph).unwrap();
    let asked = asked.lock().unwrap();
    let scale = m.h.src(0).unwrap().name();
    assert!(asked.contains(&scale), "{asked:?}");
    assert!(
        !asked.contains(&"h".to_string()),
        "the split stopped: {asked:?}"
    );
    assert!(
        asked.contains(&"out".to_string()),
        "later splits ran: {asked:?}"
    );
}

#[test]
fn bad_arguments_are_errors() {
    let e = backend::sched_new(&[], 64, false).unwrap_err();
    assert!(e.to_string().contains("backends is empty"), "{e}");
    let cpu = backend::cpu_init().unwrap();
    let e = backend::sched_new(std::slice::from_ref(&cpu), 0, false).unwrap_err();
    assert!(e.to_string().contains("graph_size is 0"), "{e}");
    let e = backend::sched_new(&[cpu.clone(), cpu.clone()], 8, false).unwrap_err();
    assert!(e.to_string().contains("given twice"), "{e}");
    let sched: Sched = backend::sched_new(&[cpu], 4, false).unwrap();
    let m = mlp(true);
    let e = sched.alloc_graph(&m.graph).unwrap_err();
    assert!(e.to_string().contains("graph_size 4"), "{e}");
}

#[test]
fn the_scheduler_is_send_and_sync() {
    fn check<T: Send + Sync + Clone>(_: &T) {}
    let sched = backend::sched_new(&[backend::cpu_init().unwrap()], 8, false).unwrap();
    check(&sched);
    let other = sched.clone();
    assert_eq!(
        other.get_n_backends(),
        1,
        "a CPU stream alone gets no second CPU"
    );
    assert_eq!(other.get_n_copies(), 1);
}
