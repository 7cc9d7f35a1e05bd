//! `graph_plan_compute` runs a prepared graph again and again without allocating: counted with
//! a global allocator that tallies every allocation of the process (worker threads included).
//!
//! A plain binary (`harness = false`), its checks run one after another by `main`: under
//! libtest, the harness's own thread allocated now and then (reporting a finished test) while
//! another test was counting, which made the counts flaky on a loaded machine.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use ggml::ops::GluOp;
use ggml::{backend, Context, Graph, Tensor, Type};

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

/// Allocations made by `f`.
fn allocations_of(f: impl FnOnce()) -> usize {
    let before = ALLOCATIONS.load(Ordering::SeqCst);
    f();
    ALLOCATIONS.load(Ordering::SeqCst) - before
}

/// Fills `t` with a deterministic pattern in [-1, 1).
fn fill(t: &Tensor, salt: usize) {
    let n = t.nelements() as usize;
    let v: Vec<f32> = (0..n)
        .map(|i| ((i * 7919 + salt * 104_729) % 2003) as f32 / 1001.5 - 1.0)
        .collect();
    t.set_f32(&v).unwrap();
}

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

    let allocated = allocations_of(|| {
        for _ in 0..50 {
            cpu.graph_plan_compute(&plan).unwrap();
        }
    });
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

/// The op set of one Llama-style layer with a KV cache and a mixture of experts: GET_ROWS,
/// RMS_NORM × MUL (fused), MUL_MAT (F16 weights), ROPE, SET_ROWS and CPY into F16 caches,
/// SOFT_MAX with an F16 mask, GLU, MUL_MAT_ID, ADD.
fn llama_layer(ctx: &Context) -> (Graph, Tensor) {
    const D: i64 = 64;
    const HD: i64 = 16;
    const T: i64 = 8;
    const CTX: i64 = 16;
    const FFN: i64 = 96;
    let t2 = |ty, a, b, salt| {
        let t = ctx.new_tensor_2d(ty, a, b).unwrap();
        fill(&t, salt);
        t
    };
    let ints = |ne: &[i64], v: &[i32]| {
        let t = ctx.new_tensor(Type::I32, ne).unwrap();
        t.set_i32(v).unwrap();
        t
    };
    let emb = t2(Type::F32, D, 32, 1);
    let tokens = ints(&[T], &[3, 1, 4, 1, 5, 9, 2, 6]);
    let pos = ints(&[T], &(0..T as i32).collect::<Vec<_>>());
    let slots = ints(&[T], &(4..4 + T as i32).collect::<Vec<_>>());
    let experts = ints(&[2, T], &[0, 3, 1, 2, 2, 0, 3, 1, 0, 1, 2, 3, 1, 0, 3, 2]);
    let norm_w = ctx.new_tensor_1d(Type::F32, D).unwrap();
    fill(&norm_w, 2);
    let (wq, wk, wv) = (
        t2(Type::F16, D, D, 3),
        t2(Type::F16, D, D, 4),
        t2(Type::F16, D, D, 5),
    );
    let k_cache = t2(Type::F16, D, CTX, 6);
    let v_cache = t2(Type::F16, D, CTX, 7);
    let mask = t2(Type::F16, CTX, T, 8);
    let wo = t2(Type::F16, CTX, D, 9);
    let w_gate_up = t2(Type::F16, D, 2 * FFN, 10);
    let w_down = t2(Type::F16, FFN, D, 11);
    let moe = ctx.new_tensor_3d(Type::F16, D, D, 4).unwrap();
    fill(&moe, 12);

    let x = ctx.get_rows(&emb, &tokens).unwrap();
    let h = ctx.mul(&ctx.rms_norm(&x, 1e-5).unwrap(), &norm_w).unwrap();
    let rope = |w: &Tensor| {
        let y = ctx
            .reshape_3d(&ctx.mul_mat(w, &h).unwrap(), HD, D / HD, T)
            .unwrap();
        let y = ctx
            .rope_ext(
                &y,
                &pos,
                None,
                HD as i32,
                ggml::ROPE_TYPE_NEOX,
                64,
                1e4,
                1.0,
                0.0,
                1.0,
                32.0,
                1.0,
            )
            .unwrap();
        ctx.reshape_2d(&y, D, T).unwrap()
    };
    let (q, k) = (rope(&wq), rope(&wk));
    let k_stored = ctx.set_rows(&k_cache, &k, &slots).unwrap();
    let v = ctx.mul_mat(&wv, &h).unwrap();
    let v_stored = ctx
        .cpy(
            &v,
            &ctx.view_2d(&v_cache, D, T, v_cache.nb()[1], 0).unwrap(),
        )
        .unwrap();
    let scores = ctx.mul_mat(&k_stored, &q).unwrap();
    let probs = ctx.soft_max_ext(&scores, Some(&mask), 0.25, 0.0).unwrap();
    let x2 = ctx.add(&x, &ctx.mul_mat(&wo, &probs).unwrap()).unwrap();
    let h2 = ctx.mul(&ctx.rms_norm(&x2, 1e-5).unwrap(), &norm_w).unwrap();
    let act = ctx
        .glu(&ctx.mul_mat(&w_gate_up, &h2).unwrap(), GluOp::Swiglu, false)
        .unwrap();
    let down = ctx.mul_mat(&w_down, &act).unwrap();
    let routed = ctx
        .mul_mat_id(&moe, &ctx.reshape_3d(&h2, D, 1, T).unwrap(), &experts)
        .unwrap();
    let slot0 = ctx.view_2d(&routed, D, T, routed.nb()[2], 0).unwrap();
    let out = ctx.add(&x2, &ctx.add(&down, &slot0).unwrap()).unwrap();
    let graph = ctx.new_graph().unwrap();
    for t in [&v_stored, &out] {
        graph.build_forward_expand(t).unwrap();
    }
    (graph, out)
}

fn a_llama_layer_plan_allocates_nothing() {
    let cpu = backend::cpu_init().unwrap();
    cpu.set_n_threads(2).unwrap();
    let ctx = Context::init(16 << 20, false).unwrap();
    let (graph, out) = llama_layer(&ctx);
    let plan = cpu.graph_plan_create(&graph).unwrap();
    cpu.graph_plan_compute(&plan).unwrap();
    let mut first = vec![0f32; out.nelements() as usize];
    out.get_f32_into(&mut first).unwrap();
    assert!(first.iter().all(|v| v.is_finite()), "{first:?}");

    let mut again = vec![0f32; first.len()];
    let allocated = allocations_of(|| {
        for _ in 0..20 {
            cpu.graph_plan_compute(&plan).unwrap();
        }
        out.get_f32_into(&mut again).unwrap();
    });
    assert_eq!(
        allocated, 0,
        "20 runs of the layer allocated {allocated} times"
    );
    assert_eq!(again, first, "each run computes the same values");
}

/// get_f32_into reads what get_f32 reads, for F32 and for converted types, without
/// allocating; a wrong length or type is an error naming the function.
fn get_f32_into_reads_without_allocating() {
    let ctx = Context::init(1 << 20, false).unwrap();
    for ty in [Type::F32, Type::F16, Type::BF16, Type::I32] {
        // more elements than one conversion chunk, so the chunking is exercised
        let t = ctx.new_tensor_2d(ty, 1500, 3).unwrap();
        fill(&t, 13);
        let want = t.get_f32().unwrap();
        let mut got = vec![f32::NAN; want.len()];
        let allocated = allocations_of(|| t.get_f32_into(&mut got).unwrap());
        assert_eq!(allocated, 0, "{ty}: {allocated} allocations");
        assert_eq!(got, want, "{ty}");
        let err = t.get_f32_into(&mut got[1..]).unwrap_err().to_string();
        assert!(
            err.contains("get_f32_into") && err.contains("4499"),
            "{err}"
        );
    }
    let q = ctx.new_tensor_1d(Type::Q8_0, 64).unwrap();
    let err = q.get_f32_into(&mut [0.0; 64]).unwrap_err().to_string();
    assert!(
        err.contains("get_f32_into") && err.contains("q8_0"),
        "{err}"
    );
}

/// Quantized MUL_MATs (activations quantized once into the node's shared area, chunks claimed
/// by the threads): Q4_K with Q8_K activations, Q8_0 with Q8_0, one and several columns.
fn quantized_mul_mats(ctx: &Context) -> (Graph, Vec<Tensor>) {
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
    (graph, outs)
}

/// Runs `compute` once (the warm-up: queues and scratch reach their sizes), then `n` times
/// more, which must allocate nothing and give `outs` the same values.
fn assert_repeats_allocate_nothing(what: &str, outs: &[Tensor], n: usize, compute: impl Fn()) {
    compute();
    let first: Vec<Vec<f32>> = outs.iter().map(|o| o.get_f32().unwrap()).collect();
    assert!(first.iter().flatten().any(|v| *v != 0.0), "{what}");
    assert!(first.iter().flatten().all(|v| v.is_finite()), "{what}");
    let allocated = allocations_of(|| (0..n).for_each(|_| compute()));
    assert_eq!(
        allocated, 0,
        "{n} runs of {what} allocated {allocated} times"
    );
    for (o, f) in outs.iter().zip(&first) {
        assert_eq!(
            &o.get_f32().unwrap(),
            f,
            "{what}: each run computes the same values"
        );
    }
}

/// `graph_plan_compute` of quantized MUL_MATs allocates nothing after the first run.
fn quantized_mul_mat_plan_allocates_nothing() {
    let cpu = backend::cpu_init().unwrap();
    cpu.set_n_threads(2).unwrap();
    let ctx = Context::init(8 << 20, false).unwrap();
    let (graph, outs) = quantized_mul_mats(&ctx);
    let plan = cpu.graph_plan_create(&graph).unwrap();
    assert_repeats_allocate_nothing("the quantized plan", &outs, 50, || {
        cpu.graph_plan_compute(&plan).unwrap()
    });
}

/// `graph_compute` (a stream's own path, no plan: the stream keeps its last job's storage,
/// the CPU engine its plan storage) of the same graph allocates nothing after the first run,
/// for the Llama-style layer and for quantized MUL_MATs, on 1 and 2 threads.
fn graph_compute_allocates_nothing_after_the_first_run() {
    for threads in [1, 2] {
        let cpu = backend::cpu_init().unwrap();
        cpu.set_n_threads(threads).unwrap();
        let ctx = Context::init(24 << 20, false).unwrap();
        let (layer, out) = llama_layer(&ctx);
        assert_repeats_allocate_nothing(
            &format!("the layer, {threads} threads"),
            &[out],
            20,
            || cpu.graph_compute(&layer).unwrap(),
        );
        let (graph, outs) = quantized_mul_mats(&ctx);
        assert_repeats_allocate_nothing(
            &format!("quantized, {threads} threads"),
            &outs,
            20,
            || cpu.graph_compute(&graph).unwrap(),
        );
    }
}

/// Runs the checks in order (or those whose name contains an argument that is not a flag, as
/// `cargo test --test plan_no_alloc -- NAME` asks); a failed one panics, failing the binary.
fn main() {
    let checks: [(&str, fn()); 5] = [
        (
            "plan_compute_allocates_nothing",
            plan_compute_allocates_nothing,
        ),
        (
            "a_llama_layer_plan_allocates_nothing",
            a_llama_layer_plan_allocates_nothing,
        ),
        (
            "get_f32_into_reads_without_allocating",
            get_f32_into_reads_without_allocating,
        ),
        (
            "quantized_mul_mat_plan_allocates_nothing",
            quantized_mul_mat_plan_allocates_nothing,
        ),
        (
            "graph_compute_allocates_nothing_after_the_first_run",
            graph_compute_allocates_nothing_after_the_first_run,
        ),
    ];
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    for (name, check) in checks {
        if filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str())) {
            check();
            println!("test {name} ... ok");
        }
    }
}
