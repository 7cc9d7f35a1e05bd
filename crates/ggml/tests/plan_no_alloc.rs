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

#[test]
fn plan_compute_allocates_nothing() {
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
