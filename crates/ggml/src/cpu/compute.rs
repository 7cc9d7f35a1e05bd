//! The CPU compute engine: plans a graph (a kernel and a scratch size per node), resolves
//! tensor addresses, and runs every node on the thread pool with a barrier between nodes.

use std::any::Any;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::backend::{BackendImpl, PlacedGraph};
use crate::error::{Error, Result};
use crate::tensor::{flags, Tensor};

use super::fusion::{self, Fusion};
use super::kernels::{self, Faults, KernelFn, NodePtrs, Params};
use super::threadpool::{SpinBarrier, ThreadPool};

/// Threads a new CPU stream computes with: the processor's parallelism, at most 8 (GGML's
/// default is a fixed 4; `set_n_threads` changes it).
pub static DEFAULT_N_THREADS: std::sync::LazyLock<usize> = std::sync::LazyLock::new(|| {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(8)
});

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
}

/// What a graph needs, computed once (`ggml_cplan`): the nodes to run with their kernels, the
/// scratch size per thread, and storage reused by every run.
pub(crate) struct CpuPlan {
    nodes: Vec<PlannedNode>,
    n_threads: usize,
    /// Scratch bytes per thread, a multiple of the cache line.
    work_per_thread: usize,
    work: Vec<u64>,
    /// Every node's addresses for the current run, and whether it must run on one thread
    /// ([`NodePtrs::needs_one_thread`]).
    resolved: Vec<(NodePtrs, bool)>,
}

impl CpuPlan {
    /// A plan with no storage yet.
    fn empty(n_threads: usize) -> CpuPlan {
        CpuPlan {
            nodes: Vec::new(),
            n_threads,
            work_per_thread: 0,
            work: Vec::new(),
            resolved: Vec::new(),
        }
    }

    fn new(graph: &[Tensor], n_threads: usize) -> Result<CpuPlan> {
        let mut plan = CpuPlan::empty(n_threads);
        plan.rebuild(graph, n_threads)?;
        Ok(plan)
    }

    /// Plans `graph` for `n_threads`, reusing this plan's storage: once it has seen a graph as
    /// large as this one, planning allocates nothing (the scratch only ever grows, as the
    /// work buffer of GGML's CPU backend).
    fn rebuild(&mut self, graph: &[Tensor], n_threads: usize) -> Result<()> {
        self.nodes.clear();
        self.resolved.clear();
        let mut work_per_thread = 0;
        for (index, t) in graph.iter().enumerate() {
            if t.op().is_empty() || t.flags() & flags::COMPUTE == 0 || t.is_empty() {
                continue;
            }
            let (planned, fused) = match fusion::fusion(graph, index) {
                Fusion::Alone => (kernels::plan(t)?, None),
                Fusion::Absorbed => continue,
                Fusion::With { first, planned } => (planned, Some(first)),
            };
            work_per_thread = work_per_thread.max(planned.work);
            self.nodes.push(PlannedNode {
                tensor: t.clone(),
                index,
                kernel: planned.kernel,
                fused,
            });
        }
        self.n_threads = n_threads;
        self.work_per_thread = work_per_thread.div_ceil(CACHE_LINE) * CACHE_LINE;
        let words = (self.work_per_thread * n_threads).div_ceil(8);
        if self.work.len() < words {
            self.work.resize(words, 0);
        }
        self.resolved.reserve(self.nodes.len());
        Ok(())
    }

    /// Runs the plan over `graph` (the planned graph, placed); allocates nothing.
    fn execute(&mut self, pool: &mut ThreadPool, graph: &PlacedGraph<'_>) -> Result<()> {
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
        let nodes = &self.nodes;
        let resolved = &self.resolved;
        let work = self.work.as_mut_ptr() as usize;
        let per_thread = self.work_per_thread;
        // A panicking kernel must not leave the other threads at the barrier: every thread
        // catches its kernel's panic, still reaches every barrier, and skips the nodes after it.
        let failed = AtomicBool::new(false);
        // An out-of-range index stops the run after its node: every thread sees the fault
        // after that node's barrier and skips the rest (a fault of a later node, recorded by
        // a thread that ran ahead, does not stop the slower ones short of it).
        let faults = Faults::default();
        let ok = pool.run(n, &|ith, nth| {
            // SAFETY: each thread gets its own disjoint `per_thread` slice of `work`, which was
            // sized for `n_threads >= nth` threads.
            let wdata = (work + ith * per_thread) as *mut u8;
            for (k, (node, (ptrs, one_thread))) in nodes.iter().zip(resolved).enumerate() {
                let stopped = failed.load(Ordering::Acquire) || faults.before(k);
                if !stopped && (ith == 0 || !one_thread) {
                    let p = &Params {
                        ith,
                        nth: if *one_thread { 1 } else { nth },
                        wdata,
                        wsize: per_thread,
                        faults: &faults,
                        node: k,
                    };
                    // SAFETY: the plan chose this kernel for the node's types and shapes, and
                    // `ptrs` addresses the node's tensors in the buffers this job reserved;
                    // overlapping layouts run on one thread (`needs_one_thread`).
                    let run = || unsafe { (node.kernel)(ptrs, p) };
                    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)).is_err() {
                        failed.store(true, Ordering::Release);
                    }
                }
                barrier.wait();
            }
        });
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
}

impl CpuBackend {
    pub(crate) fn new() -> CpuBackend {
        let n = *DEFAULT_N_THREADS;
        CpuBackend {
            n_threads: n,
            pool: ThreadPool::new(n),
            scratch: CpuPlan::empty(n),
        }
    }
}

impl BackendImpl for CpuBackend {
    fn name(&self) -> String {
        "CPU".into()
    }

    fn graph_compute(&mut self, graph: &PlacedGraph<'_>) -> Result<()> {
        let result = self.scratch.rebuild(graph.nodes(), self.n_threads);
        let result = result.and_then(|()| self.scratch.execute(&mut self.pool, graph));
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
        plan.execute(&mut self.pool, graph)
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
            };
            let mut plan = CpuPlan {
                nodes: vec![planned(panics_on_thread_1), planned(writes_seven)],
                n_threads: 2,
                work_per_thread: 0,
                work: Vec::new(),
                resolved: Vec::new(),
            };
            let run = |plan: &mut CpuPlan, pool: &mut ThreadPool| {
                with_placed(vec![b.clone()], |g| plan.execute(pool, g))
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
