//! The scheduler over the wgpu device and the CPU: the GPU takes the nodes it supports (here
//! the matrix product next to its weights, the activation and the norm), the CPU the rest (an
//! ARGMAX, which the device refuses), and the results equal the CPU's alone.

mod common;

use ggml::{backend, Backend, Context, Tensor, Type};

/// Weights `[k, m]` (Q8_0) and an input `[k, n]`, and the graph `argmax(rms_norm(silu(w·x)))`,
/// with its nodes (product, norm, argmax).
struct Model {
    _wctx: Context,
    ctx: Context,
    w: Tensor,
    x: Tensor,
    nodes: [Tensor; 3],
    graph: ggml::Graph,
}

const K: usize = 64;
const M: usize = 48;
const N: usize = 5;

fn model(weights_on: &Backend) -> Model {
    let wctx = Context::init(1 << 16, true).unwrap();
    let w = wctx.new_tensor_2d(Type::Q8_0, K as i64, M as i64).unwrap();
    backend::alloc_ctx_tensors(&wctx, weights_on).unwrap();
    let vals: Vec<f32> = (0..K * M)
        .map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0)
        .collect();
    let mut bytes = vec![0u8; w.nbytes()];
    ggml::quantize_chunk(Type::Q8_0, &vals, &mut bytes, 0, M, K, None).unwrap();
    w.set_bytes(&bytes, 0).unwrap();
    let ctx = Context::init(1 << 20, true).unwrap();
    let x = ctx.new_tensor_2d(Type::F32, K as i64, N as i64).unwrap();
    x.set_input();
    let y = ctx.mul_mat(&w, &x).unwrap();
    let norm = ctx.rms_norm(&ctx.silu(&y).unwrap(), 1e-6).unwrap();
    let order = ctx.argmax(&norm).unwrap();
    // Outputs keep their memory (the scheduler reuses that of intermediate results).
    for t in [&y, &norm, &order] {
        t.set_output();
    }
    let graph = ctx.build_forward_expand(&order).unwrap();
    Model {
        _wctx: wctx,
        ctx,
        w,
        x,
        nodes: [y, norm, order],
        graph,
    }
}

fn input() -> Vec<f32> {
    (0..K * N)
        .map(|i| ((i * 13 % 29) as f32 - 14.0) / 7.0)
        .collect()
}

#[test]
fn the_scheduler_splits_a_graph_between_the_gpu_and_the_cpu() {
    let Some(dev) = common::device() else {
        return;
    };
    let gpu = dev.init(None).unwrap();
    let cpu = backend::cpu_init().unwrap();

    let on_cpu = model(&cpu);
    backend::alloc_ctx_tensors(&on_cpu.ctx, &cpu).unwrap();
    on_cpu.x.set_f32(&input()).unwrap();
    cpu.graph_compute(&on_cpu.graph).unwrap();

    let split = model(&gpu);
    assert!(
        split.w.buffer().unwrap().get_base().is_none(),
        "weights in device memory"
    );
    let sched = backend::sched_new(std::slice::from_ref(&gpu), 64, false).unwrap();
    assert_eq!(sched.get_n_backends(), 2, "the CPU is appended");
    sched.alloc_graph(&split.graph).unwrap();
    split.x.set_f32(&input()).unwrap();
    sched.graph_compute(&split.graph).unwrap();
    let [y, norm, order] = &split.nodes;
    let on = |t: &Tensor| sched.get_tensor_backend(t).map(|b| b.name());
    assert_eq!(on(y), Some(gpu.name()));
    assert_eq!(on(norm), Some(gpu.name()));
    assert_eq!(on(order), Some(cpu.name()));
    assert!(sched.get_n_splits() >= 2);

    // The CPU multiplies Q8_0 weights by activations quantized to Q8_0 (as GGML's CPU does),
    // the GPU by the f32 activations: they agree to the quantization's error.
    let nmse = |a: &[f32], b: &[f32]| {
        assert_eq!(a.len(), b.len());
        let err: f64 = a.iter().zip(b).map(|(p, q)| f64::from(p - q).powi(2)).sum();
        err / b.iter().map(|q| f64::from(*q).powi(2)).sum::<f64>()
    };
    let [cy, cnorm, _] = &on_cpu.nodes;
    let e = nmse(&y.get_f32().unwrap(), &cy.get_f32().unwrap());
    assert!(e < 1e-4, "product: nmse {e:.3e}");
    let got = norm.get_f32().unwrap();
    let e = nmse(&got, &cnorm.get_f32().unwrap());
    assert!(e < 1e-4, "norm: nmse {e:.3e}");
    // The CPU found the largest of the GPU's values, row by row.
    let order = order.get_i32().unwrap();
    assert_eq!(order.len(), N);
    for (row, &i) in got.chunks(M).zip(&order) {
        let max = row.iter().copied().fold(f32::MIN, f32::max);
        assert_eq!(row[i as usize], max, "{row:?}");
    }
}
