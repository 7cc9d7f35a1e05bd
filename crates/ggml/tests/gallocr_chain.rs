//! The acceptance test of the graph allocator: a chain of 100 element-wise ops on 1 MiB
//! tensors fits a compute buffer of a few MiB and computes what a graph whose every tensor has
//! its own memory computes.

mod gallocr_support;

use gallocr_support::{assert_same_values, data_ctx, graph_of, meta_ctx, Rng};
use ggml::alloc::Gallocr;
use ggml::{backend, BufferUsage, Context, Tensor, Type};

const N: i64 = 1 << 18; // 262 144 f32 = 1 MiB
const MIB: usize = 1 << 20;
const OPS: usize = 100;

/// a, b, and x_k = op_k(x_{k-1}) for k = 1..=100, cycling add b / mul b / scale 0.9 / relu.
fn build(ctx: &Context) -> (Tensor, Tensor, Vec<Tensor>) {
    let a = ctx.new_tensor_1d(Type::F32, N).unwrap();
    let b = ctx.new_tensor_1d(Type::F32, N).unwrap();
    a.set_input();
    b.set_input();
    let mut chain = Vec::with_capacity(OPS);
    let mut x = a.clone();
    for k in 0..OPS {
        x = match k % 4 {
            0 => ctx.add(&x, &b),
            1 => ctx.mul(&x, &b),
            2 => ctx.scale(&x, 0.9),
            _ => ctx.relu(&x),
        }
        .unwrap();
        chain.push(x.clone());
    }
    x.set_output();
    (a, b, chain)
}

#[test]
fn chain_of_100_ops_on_1_mib_tensors_needs_a_few_mib() {
    let mut rng = Rng::new(7);
    let va = rng.values(N as usize, -1.0, 1.0);
    let vb = rng.values(N as usize, 0.5, 1.5);
    let cpu = backend::cpu_init().unwrap();

    // Reference: every tensor has its own memory.
    let rctx = data_ctx((OPS + 2) * MIB + (OPS + 2) * ggml::tensor_overhead());
    let (ra, rb, rchain) = build(&rctx);
    ra.set_f32(&va).unwrap();
    rb.set_f32(&vb).unwrap();
    let rgraph = graph_of(&[rchain.last().unwrap()]);
    cpu.graph_compute(&rgraph).unwrap();
    let want = rchain.last().unwrap().get_f32().unwrap();

    // The same graph placed by the graph allocator.
    let ctx = meta_ctx();
    let (a, b, chain) = build(&ctx);
    let graph = graph_of(&[chain.last().unwrap()]);
    assert_eq!(graph.n_nodes(), OPS);
    assert_eq!(graph.n_leafs(), 2);
    let galloc = Gallocr::new(&backend::cpu_buffer_type()).unwrap();
    galloc.reserve(&graph).unwrap();
    let size = galloc.get_buffer_size(0);
    println!(
        "compute buffer for {OPS} element-wise ops on 1 MiB tensors: {size} bytes ({:.2} MiB)",
        size as f64 / MIB as f64
    );
    assert!(size <= 4 * MIB, "compute buffer of {size} bytes");
    // The two inputs must both live for the whole chain: at least 2 MiB.
    assert!(size >= 2 * MIB, "compute buffer of {size} bytes");

    galloc.alloc_graph(&graph).unwrap();
    assert_eq!(
        galloc.get_buffer_size(0),
        size,
        "alloc_graph kept the reserved buffer"
    );
    let out = chain.last().unwrap();
    assert_eq!(out.buffer().unwrap().get_usage(), BufferUsage::Compute);
    a.set_f32(&va).unwrap();
    b.set_f32(&vb).unwrap();
    cpu.graph_compute(&graph).unwrap();
    let got = out.get_f32().unwrap();
    assert_same_values("chain output", &got, &want);
    // Not a trivial result: most values are positive and grew.
    assert!(got.iter().filter(|v| **v > 1.0).count() > N as usize / 2);
}
