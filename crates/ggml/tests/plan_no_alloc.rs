//! `graph_plan_compute` runs a prepared graph again and again without allocating: counted with
//! a global allocator that tallies every allocation of the process (worker threads included).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use ggml::{backend, Context, Type};

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator, only counting calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::SeqCst);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::SeqCst);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// One test function: the counter is the whole process's, so a second test running beside
/// this one would count its own allocations here.
#[test]
fn plan_compute_allocates_nothing() {
    float_graph();
    quantized_mul_mat_graph();
}

fn float_graph() {
    let cpu = backend::cpu_init().unwrap();
    cpu.set_n_threads(2).unwrap();
    let ctx = Context::init(8 << 20, false).unwrap();
    let w = ctx.new_tensor_2d(Type::F16, 64, 32).unwrap();
    let x = ctx.new_tensor_2d(Type::F32, 64, 8).unwrap();
    let ids = ctx.new_tensor_1d(Type::I32, 4).unwrap();
    let y = ctx.mul_mat(&w, &x).unwrap();
    let y = ctx.rms_norm(&y, 1e-6).unwrap();
    let y = ctx.soft_max(&ctx.scale(&y, 0.5).unwrap()).unwrap();
    let rows = ctx.get_rows(&ctx.transpose(&y).unwrap(), &ids).unwrap();
    let rows = ctx.cont(&rows).unwrap();
    let out = ctx
        .add(&ctx.sum_rows(&rows).unwrap(), &ctx.mean(&rows).unwrap())
        .unwrap();
    let graph = ctx.build_forward_expand(&out).unwrap();
    w.set_f32(
        &(0..64 * 32)
            .map(|i| (i % 7) as f32 * 0.1)
            .collect::<Vec<_>>(),
    )
    .unwrap();
    x.set_f32(
        &(0..64 * 8)
            .map(|i| (i % 5) as f32 * 0.2)
            .collect::<Vec<_>>(),
    )
    .unwrap();
    ids.set_i32(&[0, 3, 7, 1]).unwrap();

    let plan = cpu.graph_plan_create(&graph).unwrap();
    cpu.graph_plan_compute(&plan).unwrap(); // warm-up: queues and scratch reach their sizes
    let first = out.get_f32().unwrap();

    let before = ALLOCATIONS.load(Ordering::SeqCst);
    for _ in 0..50 {
        cpu.graph_plan_compute(&plan).unwrap();
    }
    let allocated = ALLOCATIONS.load(Ordering::SeqCst) - before;
    assert_eq!(
        allocated, 0,
        "50 plan computations allocated {allocated} times"
    );
    assert_eq!(
        out.get_f32().unwrap(),
        first,
        "each run computes the same values"
    );
}

/// `graph_plan_compute` of quantized MUL_MATs (activations quantized once into the node's
/// shared area, chunks claimed by the threads: Q4_K with Q8_K activations, Q8_0 with Q8_0,
/// one and several columns) allocates nothing after the first run, and gives the same values.
fn quantized_mul_mat_graph() {
    let cpu = backend::cpu_init().unwrap();
    cpu.set_n_threads(2).unwrap();
    let ctx = Context::init(8 << 20, false).unwrap();
    let k = 512;
    let values = |n: usize, m: usize| (0..n).map(move |i| (i % m) as f32 * 0.05 - 0.3);
    let mut outs = Vec::new();
    for (ty, rows, cols) in [
        (Type::Q4_K, 48, 9),
        (Type::Q8_0, 40, 1),
        (Type::Q8_0, 24, 70),
    ] {
        let w = ctx.new_tensor_2d(ty, k, rows).unwrap();
        let f: Vec<f32> = values(k as usize * rows as usize, 13).collect();
        let mut q = vec![0u8; ty.row_size(k).unwrap() * rows as usize];
        ggml::quants::quantize_chunk(ty, &f, &mut q, 0, rows as usize, k as usize, None).unwrap();
        w.set_bytes(&q, 0).unwrap();
        let x = ctx.new_tensor_2d(Type::F32, k, cols).unwrap();
        x.set_f32(&values(k as usize * cols as usize, 11).collect::<Vec<_>>())
            .unwrap();
        outs.push(ctx.mul_mat(&w, &x).unwrap());
    }
    let graph = ctx.new_graph().unwrap();
    for o in &outs {
        graph.build_forward_expand(o).unwrap();
    }
    let plan = cpu.graph_plan_create(&graph).unwrap();
    cpu.graph_plan_compute(&plan).unwrap(); // warm-up
    let first: Vec<Vec<f32>> = outs.iter().map(|o| o.get_f32().unwrap()).collect();
    assert!(first.iter().flatten().any(|v| *v != 0.0));

    let before = ALLOCATIONS.load(Ordering::SeqCst);
    for _ in 0..50 {
        cpu.graph_plan_compute(&plan).unwrap();
    }
    let allocated = ALLOCATIONS.load(Ordering::SeqCst) - before;
    assert_eq!(
        allocated, 0,
        "50 quantized plan computations allocated {allocated} times"
    );
    for (o, f) in outs.iter().zip(&first) {
        assert_eq!(
            &o.get_f32().unwrap(),
            f,
            "each run computes the same values"
        );
    }
}
