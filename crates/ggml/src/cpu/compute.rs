//! The CPU compute engine: plans a graph (a kernel and a scratch size per node), resolves
//! tensor addresses, and runs every node on the thread pool with a barrier between nodes.
//!
//! A node's threads may also share work ([`Planned::with_shared`]): one work area for the
//! whole node (placed before the threads' private scratch in the plan's buffer), barriers
//! inside the node ([`Params::sync`]: the same spinning barrier as between nodes, which every
//! thread of the node passes the declared number of times: the engine passes the ones a thread
//! skipped, panicked before or did not run), and chunk counters per phase and thread between
//! those barriers ([`Params::chunks`]), all reset before each run. The quantized MUL_MAT
//! quantizes its activations once into the shared area, meets at a barrier, then claims
//! chunks of the product.

use std::any::Any;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::backend::{BackendImpl, PlacedGraph};
use crate::error::{Error, Result};
use crate::ops::Op;
use crate::tensor::{flags, Tensor};

use super::fusion::{self, Fusion};
use super::kernels::{self, Faults, KernelFn, Matvec, NodePtrs, NodeShared, Params};
use super::profile::{self, Profile};
use super::threadpool::{SpinBarrier, ThreadPool};

/// The threads this process may run at once (`available_parallelism`, 1 if unknown).
static CORES: std::sync::LazyLock<usize> = std::sync::LazyLock::new(|| {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
});

/// Threads a new CPU stream computes with: the processor's parallelism, at most 8 (GGML's
/// default is a fixed 4; `set_n_threads` changes it).
pub static DEFAULT_N_THREADS: std::sync::LazyLock<usize> =
    std::sync::LazyLock::new(|| (*CORES).min(8));

/// The most threads one CPU stream computes with (`GGML_MAX_N_THREADS`).
pub const MAX_N_THREADS: usize = 512;

/// Bytes between threads' scratch areas, so they never share a cache line.
const CACHE_LINE: usize = 64;

struct PlannedNode {
    tensor: Tensor,
    /// The node's index in the graph (where its places are).
    index: usize,
    kernel: KernelFn,
    /// The node this one computes too ([`fusion`]).
    fused: Option<usize>,
    /// Barriers the kernel passes inside the node ([`Params::sync`]).
    syncs: usize,
    /// The node's first chunk counter in [`CpuPlan::chunks`] (it has `syncs + 1` phases of
    /// the plan's thread count).
    chunk_base: usize,
}

/// What a graph needs, computed once (`ggml_cplan`): the nodes to run with their kernels, the
/// scratch size per thread, and storage reused by every run.
pub(crate) struct CpuPlan {
    nodes: Vec<PlannedNode>,
    n_threads: usize,
    /// Scratch bytes per thread, a multiple of the cache line.
    work_per_thread: usize,
    /// Bytes of the work area a node's threads share (the largest any node asks for), a
    /// multiple of the cache line, at the start of `work`.
    work_shared: usize,
    work: Vec<u64>,
    /// Every node's chunk counters, one per phase and thread ([`Params::chunks`]).
    chunks: Vec<AtomicUsize>,
    /// Every node's addresses for the current run, and whether it must run on one thread
    /// ([`NodePtrs::needs_one_thread`]).
    resolved: Vec<(NodePtrs, bool)>,
    /// The (id, bytes) of the weights of the graph's matrix products, kept for the next
    /// plan ([`CpuPlan::weight_bytes`]).
    weights: Vec<(u64, usize)>,
}

impl CpuPlan {
    /// A plan with no storage yet.
    fn empty(n_threads: usize) -> CpuPlan {
        CpuPlan {
            nodes: Vec::new(),
            n_threads,
            work_per_thread: 0,
            work_shared: 0,
            work: Vec::new(),
            chunks: Vec::new(),
            resolved: Vec::new(),
            weights: Vec::new(),
        }
    }

    fn new(graph: &[Tensor], n_threads: usize) -> Result<CpuPlan> {
        let mut plan = CpuPlan::empty(n_threads);
        plan.rebuild(graph, n_threads)?;
        Ok(plan)
    }

    /// Plans `graph` for `n_threads`, reusing this plan's storage: once it has seen a graph as
    /// large as this one, planning allocates nothing (the scratch only ever grows, as the
    /// work buffer of GGML's CPU backend). Its quantized matrix-vector products take their
    /// weight rows as [`Matvec::for_weights`] chooses for the graph's weights, fixed in the
    /// plan.
    fn rebuild(&mut self, graph: &[Tensor], n_threads: usize) -> Result<()> {
        let matvec = Matvec::for_weights(self.weight_bytes(graph));
        self.plan_nodes(graph, n_threads, matvec)
    }

    /// The bytes of the distinct weights (first operands, each tensor counted once) of the
    /// MUL_MAT and MUL_MAT_ID nodes of `graph` that compute: what a run reads of them.
    fn weight_bytes(&mut self, graph: &[Tensor]) -> usize {
        self.weights.clear();
        let products = graph.iter().filter(|t| {
            matches!(t.op(), Op::MulMat | Op::MulMatId) && t.flags() & flags::COMPUTE != 0
        });
        let weights = products.filter_map(|t| t.src(0));
        self.weights.extend(weights.map(|w| (w.id(), w.nbytes())));
        self.weights.sort_unstable();
        self.weights.dedup_by_key(|w| w.0);
        self.weights.iter().map(|w| w.1).sum()
    }

    /// [`CpuPlan::rebuild`] with the matrix-vector products taken as `matvec` says.
    fn plan_nodes(&mut self, graph: &[Tensor], n_threads: usize, matvec: Matvec) -> Result<()> {
        self.nodes.clear();
        self.resolved.clear();
        let (mut work_per_thread, mut work_shared, mut n_chunks) = (0, 0, 0);
        for (index, t) in graph.iter().enumerate() {
            if t.op().is_empty() || t.flags() & flags::COMPUTE == 0 || t.is_empty() {
                continue;
            }
            let (planned, fused) = match fusion::fusion(graph, index) {
                Fusion::Alone => (kernels::plan(t, matvec)?, None),
                Fusion::Absorbed => continue,
                Fusion::With { first, planned } => (planned, Some(first)),
            };
            work_per_thread = work_per_thread.max(planned.work);
            work_shared = work_shared.max(planned.shared);
            self.nodes.push(PlannedNode {
                tensor: t.clone(),
                index,
                kernel: planned.kernel,
                fused,
                syncs: planned.syncs,
                chunk_base: n_chunks,
            });
            n_chunks += (planned.syncs + 1) * n_threads.max(1);
        }
        self.n_threads = n_threads;
        self.work_per_thread = work_per_thread.div_ceil(CACHE_LINE) * CACHE_LINE;
        self.work_shared = work_shared.div_ceil(CACHE_LINE) * CACHE_LINE;
        if self.chunks.len() < n_chunks {
            self.chunks.resize_with(n_chunks, AtomicUsize::default);
        }
        let words = (self.work_shared + self.work_per_thread * n_threads).div_ceil(8);
        if self.work.len() < words {
            self.work.resize(words, 0);
        }
        self.resolved.reserve(self.nodes.len());
        Ok(())
    }

    /// Runs the plan over `graph` (the planned graph, placed); allocates nothing (but for
    /// the profile's records, when `profile` is given).
    fn execute(
        &mut self,
        pool: &mut ThreadPool,
        graph: &PlacedGraph<'_>,
        mut profile: Option<&mut Profile>,
    ) -> Result<()> {
        self.resolved.clear();
        for n in &self.nodes {
            if graph.nodes().get(n.index) != Some(&n.tensor) {
                return Err(Error::invalid(format!(
                    "graph_plan_compute: the graph's node {} is not the planned node {:?}",
                    n.index,
                    n.tensor.name()
                )));
            }
            let ptrs = fusion::resolve(graph, n.index, n.fused)?;
            let one_thread = ptrs.needs_one_thread();
            self.resolved.push((ptrs, one_thread));
        }
        let n = self.n_threads.min(pool.n_threads()).max(1);
        let barrier = SpinBarrier::new(n);
        for c in &self.chunks {
            c.store(0, Ordering::Relaxed);
        }
        let nodes = &self.nodes;
        let resolved = &self.resolved;
        let chunks = &self.chunks;
        let per_phase = self.n_threads.max(1);
        // The shared area first, then each thread's scratch.
        let shared = self.work.as_mut_ptr() as usize;
        let (shared_size, per_thread) = (self.work_shared, self.work_per_thread);
        let work = shared + shared_size;
        // A panicking kernel must not leave the other threads at the barrier: every thread
        // catches its kernel's panic, still reaches every barrier, and skips the nodes after it.
        let failed = AtomicBool::new(false);
        // An out-of-range index stops the run after its node: every thread sees the fault
        // after that node's barrier and skips the rest (a fault of a later node, recorded by
        // a thread that ran ahead, does not stop the slower ones short of it).
        let faults = Faults::default();
        let t0 = profile.as_mut().map(|p| p.start(nodes.len()));
        let clock = t0.zip(profile.as_deref());
        let ok = pool.run(n, &|ith, nth| {
            // SAFETY: each thread gets its own disjoint `per_thread` slice of `work`, which was
            // sized for `n_threads >= nth` threads.
            let wdata = (work + ith * per_thread) as *mut u8;
            for (k, (node, (ptrs, one_thread))) in nodes.iter().zip(resolved).enumerate() {
                let stopped = failed.load(Ordering::Acquire) || faults.before(k);
                let node_nth = if *one_thread { 1 } else { nth };
                let node_shared = NodeShared {
                    data: shared as *mut u8,
                    size: shared_size,
                    barrier: &barrier,
                    chunks: &chunks[node.chunk_base..][..(node.syncs + 1) * per_phase],
                    per_phase,
                };
                let p = &Params::new(
                    (ith, node_nth),
                    (wdata, per_thread),
                    &faults,
                    k,
                    &node_shared,
                );
                if !stopped && (ith == 0 || !one_thread) {
                    // SAFETY: the plan chose this kernel for the node's types and shapes, and
                    // `ptrs` addresses the node's tensors in the buffers this job reserved;
                    // overlapping layouts run on one thread (`needs_one_thread`).
                    let run = || unsafe { (node.kernel)(ptrs, p) };
                    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)).is_err() {
                        failed.store(true, Ordering::Release);
                    }
                }
                // The node's barriers this thread did not pass (it skipped the node, or its
                // kernel panicked), so the others are not left waiting inside the node.
                if node_nth > 1 {
                    for _ in p.phase()..node.syncs {
                        barrier.wait();
                    }
                }
                barrier.wait();
                if let (0, Some((t0, p))) = (ith, clock) {
                    p.end(k, t0.elapsed().as_nanos() as u64);
                }
            }
        });
        if let (Some(t0), Some(p)) = (t0, profile) {
            let planned = nodes.iter().map(|n| (&n.tensor, n.fused.is_some()));
            p.record(planned, t0.elapsed().as_nanos() as u64);
        }
        if !ok || failed.load(Ordering::Acquire) {
            return Err(Error::Compute("a CPU kernel panicked".into()));
        }
        match faults.first() {
            Some(fault) => {
                let node = &nodes[fault.node];
                Err(fault.error(&node.tensor, node.index))
            }
            None => Ok(()),
        }
    }
}

/// The CPU stream's compute engine.
pub(crate) struct CpuBackend {
    n_threads: usize,
    pool: ThreadPool,
    /// The plan storage `graph_compute` reuses from graph to graph.
    scratch: CpuPlan,
    /// Time per op, when `GGML_CPU_PROFILE` asks for it ([`profile`]).
    profile: Option<Profile>,
}

impl CpuBackend {
    pub(crate) fn new() -> CpuBackend {
        let n = *DEFAULT_N_THREADS;
        CpuBackend {
            n_threads: n,
            pool: ThreadPool::new(n),
            scratch: CpuPlan::empty(n),
            profile: profile::enabled().then(Profile::default),
        }
    }
}

impl Drop for CpuBackend {
    fn drop(&mut self) {
        if let Some(p) = self.profile.as_ref().filter(|p| !p.is_empty()) {
            eprint!("{}", p.report(self.n_threads, 30));
        }
    }
}

impl BackendImpl for CpuBackend {
    fn name(&self) -> String {
        "CPU".into()
    }

    fn graph_compute(&mut self, graph: &PlacedGraph<'_>) -> Result<()> {
        let result = self.scratch.rebuild(graph.nodes(), self.n_threads);
        let profile = self.profile.as_mut();
        let result = result.and_then(|()| self.scratch.execute(&mut self.pool, graph, profile));
        // Keep the storage, not the graph: the plan must not hold its tensors alive.
        self.scratch.nodes.clear();
        self.scratch.resolved.clear();
        result
    }

    fn set_n_threads(&mut self, n: usize) -> Result<()> {
        // A plan sizes its scratch for `n` threads and runs at least one, so 0 is refused here
        // too, not only by the stream's front end.
        if !(1..=MAX_N_THREADS).contains(&n) {
            return Err(Error::invalid(format!(
                "set_n_threads: n = {n}; a CPU stream computes with 1 to {MAX_N_THREADS} threads"
            )));
        }
        if n != self.n_threads {
            self.n_threads = n;
            self.pool = ThreadPool::new(n);
        }
        Ok(())
    }

    /// Yes when the stream computes with fewer threads than the cores: the stream's thread and
    /// the caller then spin on cores the workers leave free.
    fn spins_when_idle(&self) -> bool {
        self.n_threads < *CORES
    }

    fn graph_plan_create(&mut self, nodes: &[Tensor]) -> Result<Box<dyn Any + Send>> {
        Ok(Box::new(CpuPlan::new(nodes, self.n_threads)?))
    }

    fn graph_plan_compute(
        &mut self,
        plan: &mut (dyn Any + Send),
        graph: &PlacedGraph<'_>,
    ) -> Result<()> {
        let plan = plan.downcast_mut::<CpuPlan>().ok_or_else(|| {
            Error::invalid("graph_plan_compute: the plan was not made by a CPU backend")
        })?;
        if plan.n_threads > self.pool.n_threads() {
            plan.n_threads = self.pool.n_threads();
        }
        plan.execute(&mut self.pool, graph, self.profile.as_mut())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::job::with_placed;
    use crate::{Context, Type};
    use std::sync::mpsc;
    use std::time::Duration;

    unsafe fn panics_on_thread_1(_: &NodePtrs, p: &Params) {
        if p.ith == 1 {
            panic!("kernel panicked on purpose");
        }
    }

    unsafe fn writes_seven(n: &NodePtrs, p: &Params) {
        for i in p.range(n.dst.nelements()) {
            // SAFETY: dst is a contiguous F32 vector and i < its element count.
            unsafe { n.dst.set(n.dst.data, i, 7.0) };
        }
    }

    /// A kernel that panics on one thread must make the run fail, not leave the other threads
    /// waiting at the node's barrier forever; the nodes after it do not run.
    #[test]
    fn a_panicking_kernel_fails_the_run_without_deadlock() {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let ctx = Context::init(1 << 16, false).unwrap();
            let a = ctx.new_tensor_1d(Type::F32, 64).unwrap();
            let b = ctx.relu(&a).unwrap();
            b.set_f32(&[0.0; 64]).unwrap();
            let mut pool = ThreadPool::new(2);
            let planned = |kernel: KernelFn| PlannedNode {
                tensor: b.clone(),
                index: 0,
                kernel,
                fused: None,
                syncs: 0,
                chunk_base: 0,
            };
            let mut plan = CpuPlan {
                nodes: vec![planned(panics_on_thread_1), planned(writes_seven)],
                chunks: vec![AtomicUsize::new(0), AtomicUsize::new(0)],
                ..CpuPlan::empty(2)
            };
            let run = |plan: &mut CpuPlan, pool: &mut ThreadPool| {
                with_placed(vec![b.clone()], |g| plan.execute(pool, g, None))
            };
            let failed = run(&mut plan, &mut pool);
            // the pool still works afterwards
            let mut ok_plan = CpuPlan {
                nodes: vec![planned(writes_seven)],
                ..plan
            };
            let ok = run(&mut ok_plan, &mut pool);
            tx.send((failed, ok, b.get_f32().unwrap())).unwrap();
        });
        let (failed, ok, values) = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("the run deadlocked");
        assert!(matches!(failed, Err(Error::Compute(_))));
        ok.unwrap();
        assert_eq!(values, vec![7.0; 64]);
    }

    /// Writes its thread index into the shared area, meets the others at a barrier, then claims
    /// chunks: chunk c of dst gets the sum of every thread's index plus c, so a missing write,
    /// a barrier passed early or a chunk claimed twice or never shows in the values.
    unsafe fn shares_and_claims(n: &NodePtrs, p: &Params) {
        let shared = p.shared_ptr(8 * p.nth) as *mut u64;
        // SAFETY: slot ith of the shared area, written only by this thread before the barrier.
        unsafe { shared.add(p.ith).write(p.ith as u64 + 1) };
        p.sync();
        // SAFETY: every slot was written before the barrier; only read now.
        let total: u64 = (0..p.nth).map(|t| unsafe { shared.add(t).read() }).sum();
        for c in p.chunks(n.dst.nelements()) {
            // SAFETY: dst is a contiguous F32 vector; chunk c is claimed by this thread only.
            unsafe { n.dst.set(n.dst.data, c, (total + c as u64) as f32) };
        }
    }

    /// Panics on thread 1 before the node's barrier, which thread 0 waits at.
    unsafe fn panics_before_sync(_: &NodePtrs, p: &Params) {
        if p.ith == 1 {
            panic!("kernel panicked before its barrier on purpose");
        }
        p.sync();
    }

    /// A plan of `kernels` (each with one barrier) over `b`, run twice on `pool` (the second
    /// time after a first run, so the chunk counters must have been reset).
    fn run_with_one_sync(
        b: &Tensor,
        kernels: &[KernelFn],
        pool: &mut ThreadPool,
    ) -> (Result<()>, Result<()>) {
        let mut plan = CpuPlan {
            nodes: kernels
                .iter()
                .enumerate()
                .map(|(i, &kernel)| PlannedNode {
                    tensor: b.clone(),
                    index: 0,
                    kernel,
                    fused: None,
                    syncs: 1,
                    chunk_base: 2 * i * pool.n_threads(),
                })
                .collect(),
            work_shared: 64,
            work: vec![0; 8],
            chunks: (0..2 * kernels.len() * pool.n_threads())
                .map(|_| AtomicUsize::new(0))
                .collect(),
            ..CpuPlan::empty(pool.n_threads())
        };
        let first = with_placed(vec![b.clone()], |g| plan.execute(pool, g, None));
        let second = with_placed(vec![b.clone()], |g| plan.execute(pool, g, None));
        (first, second)
    }

    /// The shared area, the barrier inside a node and chunk claiming, on 1, 2 and 3 threads:
    /// every chunk written once with every thread's contribution seen.
    #[test]
    fn threads_share_a_node_work_area_and_claim_chunks() {
        let ctx = Context::init(1 << 16, false).unwrap();
        let a = ctx.new_tensor_1d(Type::F32, 37).unwrap();
        let b = ctx.relu(&a).unwrap();
        for n in [1, 2, 3] {
            b.set_f32(&[-1.0; 37]).unwrap();
            let mut pool = ThreadPool::new(n);
            let (first, second) = run_with_one_sync(&b, &[shares_and_claims], &mut pool);
            first.unwrap();
            second.unwrap();
            let total = (n * (n + 1) / 2) as f32;
            let want: Vec<f32> = (0..37).map(|c| total + c as f32).collect();
            assert_eq!(b.get_f32().unwrap(), want, "{n} threads");
        }
    }

    /// A thread that panics before a barrier inside its node does not leave the others there:
    /// the run fails, the node after it is skipped by every thread, and the pool still works.
    #[test]
    fn a_panic_before_a_node_barrier_fails_the_run_without_deadlock() {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let ctx = Context::init(1 << 16, false).unwrap();
            let a = ctx.new_tensor_1d(Type::F32, 16).unwrap();
            let b = ctx.relu(&a).unwrap();
            let mut pool = ThreadPool::new(2);
            let failed = run_with_one_sync(&b, &[panics_before_sync, shares_and_claims], &mut pool);
            let ok = run_with_one_sync(&b, &[shares_and_claims], &mut pool);
            tx.send((failed, ok, b.get_f32().unwrap())).unwrap();
        });
        let ((f1, f2), (ok1, ok2), values) = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("the run deadlocked");
        assert!(matches!(f1, Err(Error::Compute(_))));
        assert!(matches!(f2, Err(Error::Compute(_))));
        ok1.unwrap();
        ok2.unwrap();
        let want: Vec<f32> = (0..16).map(|c| 3.0 + c as f32).collect();
        assert_eq!(values, want);
    }

    /// `rows` rows of `k` scattered values in [-0.5, 0.5) (a pattern shifted by `seed`)
    /// quantized to `ty`, as a tensor of `ctx`.
    fn quantized(ctx: &Context, ty: Type, k: usize, rows: usize, seed: usize) -> Tensor {
        let values: Vec<f32> = (0..k * rows)
            .map(|i| ((i + seed) * 7919 % 1000) as f32 / 1000.0 - 0.5)
            .collect();
        let mut bytes = vec![0u8; ty.row_size(k as i64).unwrap() * rows];
        crate::quants::quantize_chunk(ty, &values, &mut bytes, 0, rows, k, None).unwrap();
        let t = ctx.new_tensor_2d(ty, k as i64, rows as i64).unwrap();
        t.set_bytes(&bytes, 0).unwrap();
        t
    }

    /// Quantized matrix-vector products give the same bits with their weight rows taken one
    /// at a time and four at a time (with rows after the last whole tile), on 1 and 2
    /// threads.
    #[test]
    fn matvec_rows_and_tiles_give_the_same_bits() {
        let ctx = Context::init(8 << 20, false).unwrap();
        let (k, m) = (4096, 70); // rows of 2,304 bytes or more: the tiles take them
        let x = ctx.new_tensor_2d(Type::F32, k as i64, 1).unwrap();
        let xs: Vec<f32> = (0..k)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 64.0)
            .collect();
        x.set_f32(&xs).unwrap();
        for ty in [Type::Q4_0, Type::Q4_1, Type::Q8_0, Type::Q4_K, Type::Q6_K] {
            let w = quantized(&ctx, ty, k, m, 11);
            let y = ctx.mul_mat(&w, &x).unwrap();
            let nodes = ctx.build_forward_expand(&y).unwrap().nodes();
            let mut results = Vec::new();
            for matvec in [Matvec::Rows, Matvec::Tiles] {
                for threads in [1, 2] {
                    let mut plan = CpuPlan::empty(threads);
                    plan.plan_nodes(&nodes, threads, matvec).unwrap();
                    assert_eq!(plan.nodes.len(), 1);
                    let mut pool = ThreadPool::new(threads);
                    y.set_f32(&[f32::NAN; 70]).unwrap();
                    with_placed(nodes.clone(), |g| plan.execute(&mut pool, g, None)).unwrap();
                    let bits: Vec<u32> = y.get_f32().unwrap().iter().map(|v| v.to_bits()).collect();
                    results.push(((matvec, threads), bits));
                }
            }
            for (how, bits) in &results[1..] {
                assert!(
                    bits == &results[0].1,
                    "{ty}: {how:?} differs from {:?}",
                    results[0].0
                );
            }
        }
    }

    /// The weights a plan weighs its matrix-vector choice by: the first operands of the
    /// MUL_MAT and MUL_MAT_ID nodes, each tensor once however many nodes read it.
    #[test]
    fn the_weights_of_a_graph_are_counted_once_each() {
        let ctx = Context::init(4 << 20, false).unwrap();
        let (w1, w2) = (
            quantized(&ctx, Type::Q8_0, 256, 8, 1),
            quantized(&ctx, Type::Q4_K, 256, 4, 2),
        );
        let experts = ctx.new_tensor_3d(Type::F32, 256, 16, 3).unwrap();
        let x = ctx.new_tensor_2d(Type::F32, 256, 2).unwrap();
        let ids = ctx.new_tensor_2d(Type::I32, 1, 2).unwrap();
        let y1 = ctx.mul_mat(&w1, &x).unwrap();
        let y2 = ctx.mul_mat(&w2, &x).unwrap();
        let y3 = ctx.mul_mat(&w1, &ctx.relu(&x).unwrap()).unwrap();
        let x3 = ctx.new_tensor_3d(Type::F32, 256, 1, 2).unwrap();
        let y4 = ctx.mul_mat_id(&experts, &x3, &ids).unwrap();
        let sum = ctx.add(&ctx.add(&y1, &y3).unwrap(), &y2).unwrap();
        let graph = ctx.build_forward_expand(&sum).unwrap();
        graph.build_forward_expand(&y4).unwrap();
        let want = w1.nbytes() + w2.nbytes() + experts.nbytes();
        assert_eq!(CpuPlan::empty(1).weight_bytes(&graph.nodes()), want);
    }

    /// Zero threads would plan no scratch yet still run one thread, so the engine refuses it
    /// itself (the stream refuses it too, before it gets here).
    #[test]
    fn zero_threads_are_refused_by_the_engine() {
        let mut cpu = CpuBackend::new();
        let err = cpu.set_n_threads(0).unwrap_err();
        assert!(err.to_string().contains("n = 0"), "{err}");
        assert!(cpu.set_n_threads(MAX_N_THREADS + 1).is_err());
        cpu.set_n_threads(1).unwrap();
    }
}
