//! Backends as real streams: every [`Backend`] has a worker thread that runs its queued jobs in
//! order. Unlike GGML's CPU backend, which blocks, `graph_compute_async` and the `*_async`
//! transfers return at once on every backend, the CPU included.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use crate::error::{Error, Result};
use crate::tensor::{lock, Tensor};

use super::buffer::Reservation;
use super::event::EventInner;
use super::traits::BackendImpl;
use super::Device;

pub(crate) type Work = Box<dyn FnOnce(&mut dyn BackendImpl) -> Result<()> + Send>;

/// A backend's prepared plan, shared by the handle and the jobs that run it.
pub(crate) type PlanState = Arc<Mutex<Box<dyn std::any::Any + Send>>>;

pub(crate) enum Job {
    /// Run `work` once the reserved buffers are free of other jobs.
    Run(Work, Option<Reservation>),
    /// Run a plan (no boxed closure: computing a plan allocates nothing).
    Plan(PlanState, Reservation),
    /// Signal an event: all work queued before it is done.
    Signal(Arc<EventInner>, u64),
    /// Hold later work until an event reaches a generation.
    Wait(Arc<EventInner>, u64),
}

#[derive(Default)]
struct Queue {
    jobs: VecDeque<Job>,
    submitted: u64,
    completed: u64,
    /// The first error of queued work since the last `synchronize`.
    error: Option<Error>,
    quit: bool,
}

struct Shared {
    q: Mutex<Queue>,
    work_cv: Condvar,
    done_cv: Condvar,
}

pub(crate) struct Inner {
    shared: Arc<Shared>,
    worker: Mutex<Option<JoinHandle<()>>>,
    device: Device,
    name: String,
}

impl Drop for Inner {
    fn drop(&mut self) {
        lock(&self.shared.q).quit = true;
        self.shared.work_cv.notify_all();
        if let Some(h) = lock(&self.worker).take() {
            // The worker finishes every queued job before it exits; a panic there was already
            // turned into an error.
            let _ = h.join();
        }
    }
}

/// A stream of work on a device (`ggml_backend_t`). Cheap to clone; clones share the stream.
/// Dropping the last handle waits for queued work.
#[derive(Clone)]
pub struct Backend(pub(crate) Arc<Inner>);

impl PartialEq for Backend {
    fn eq(&self, other: &Backend) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}
impl Eq for Backend {}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Backend({} on {})", self.0.name, self.0.device.name())
    }
}

impl Backend {
    /// Starts a stream running `imp` on its own worker thread.
    pub(crate) fn start(device: Device, imp: Box<dyn BackendImpl>) -> Result<Backend> {
        let shared = Arc::new(Shared {
            q: Mutex::new(Queue::default()),
            work_cv: Condvar::new(),
            done_cv: Condvar::new(),
        });
        let name = imp.name();
        let worker = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name(format!("ggml-{name}-stream"))
                .spawn(move || run_worker(&shared, imp))
                .map_err(|e| Error::AllocFailed(format!("cannot start a stream thread: {e}")))?
        };
        Ok(Backend(Arc::new(Inner {
            shared,
            worker: Mutex::new(Some(worker)),
            device,
            name,
        })))
    }

    /// Queues a job; it runs after everything queued before it.
    pub(crate) fn enqueue(&self, job: Job) {
        let mut q = lock(&self.0.shared.q);
        q.jobs.push_back(job);
        q.submitted += 1;
        drop(q);
        self.0.shared.work_cv.notify_one();
    }

    /// Queues `work` holding `reservation` on the buffers it touches.
    pub(crate) fn enqueue_work(&self, work: Work, reservation: Option<Reservation>) {
        self.enqueue(Job::Run(work, reservation));
    }

    /// Runs `f` on the worker after queued work and returns its result (a synchronous call).
    pub(crate) fn call<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut dyn BackendImpl) -> Result<R> + Send + 'static,
    ) -> Result<R> {
        let slot = Arc::new(Mutex::new(None));
        let out = slot.clone();
        self.enqueue_work(
            Box::new(move |imp| {
                *lock(&out) = Some(f(imp));
                Ok(())
            }),
            None,
        );
        self.synchronize_quiet();
        let r = lock(&slot).take();
        r.unwrap_or_else(|| {
            Err(Error::Compute(format!(
                "backend {}: the stream stopped before the call ran",
                self.name()
            )))
        })
    }

    /// Waits until every job queued so far has finished, without consuming errors.
    fn synchronize_quiet(&self) {
        let sh = &self.0.shared;
        let mut q = lock(&sh.q);
        let target = q.submitted;
        while q.completed < target {
            q = sh.done_cv.wait(q).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Waits for all queued work and returns the first error it raised, if any
    /// (`ggml_backend_synchronize`). The error is reported once.
    pub fn synchronize(&self) -> Result<()> {
        self.synchronize_quiet();
        match lock(&self.0.shared.q).error.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Name of the backend (`ggml_backend_name`), e.g. `"CPU"`.
    pub fn name(&self) -> String {
        self.0.name.clone()
    }

    /// The device this stream runs on (`ggml_backend_get_device`).
    pub fn get_device(&self) -> Device {
        self.0.device.clone()
    }

    /// The buffer type of the stream's device (`ggml_backend_get_default_buffer_type`).
    pub fn get_default_buffer_type(&self) -> super::BufferType {
        self.0.device.buffer_type()
    }

    /// Allocates a buffer of `size` bytes in the device's buffer type
    /// (`ggml_backend_alloc_buffer`).
    pub fn alloc_buffer(&self, size: usize) -> Result<super::Buffer> {
        self.get_default_buffer_type().alloc_buffer(size)
    }

    /// Alignment of tensors in the device's buffers (`ggml_backend_get_alignment`).
    pub fn get_alignment(&self) -> usize {
        self.get_default_buffer_type().get_alignment()
    }

    /// Largest buffer of the device's buffer type (`ggml_backend_get_max_size`).
    pub fn get_max_size(&self) -> usize {
        self.get_default_buffer_type().get_max_size()
    }

    /// Whether the stream's device computes `op` (`ggml_backend_supports_op`).
    pub fn supports_op(&self, op: &Tensor) -> bool {
        self.0.device.supports_op(op)
    }

    /// Whether the stream can use buffers of `buft` (`ggml_backend_supports_buft`).
    pub fn supports_buft(&self, buft: &super::BufferType) -> bool {
        self.0.device.supports_buft(buft)
    }

    /// Whether it pays to move weights to this stream's device for `op`
    /// (`ggml_backend_offload_op`).
    pub fn offload_op(&self, op: &Tensor) -> bool {
        self.0.device.offload_op(op)
    }

    /// Waits for queued work and releases the backend (`ggml_backend_free`); the same as
    /// dropping the last handle.
    pub fn free(self) {}

    /// Jobs queued and not yet finished.
    pub fn n_pending(&self) -> u64 {
        let q = lock(&self.0.shared.q);
        q.submitted - q.completed
    }

    pub(crate) fn check_supported(&self, nodes: &[Tensor]) -> Result<()> {
        let dev = &self.0.device;
        for n in nodes {
            if n.op().is_empty() {
                continue;
            }
            if !dev.supports_op(n) {
                let operands: Vec<String> = n.srcs().map(|s| s.ty().to_string()).collect();
                return Err(Error::unsupported(format!(
                    "backend {}: node {:?} ({} of {} from [{}]) is not supported by device {}",
                    self.name(),
                    n.name(),
                    n.op().name(),
                    n.ty(),
                    operands.join(", "),
                    dev.name()
                )));
            }
        }
        Ok(())
    }
}

fn run_worker(sh: &Shared, mut imp: Box<dyn BackendImpl>) {
    loop {
        let job = {
            let mut q = lock(&sh.q);
            loop {
                if let Some(j) = q.jobs.pop_front() {
                    break j;
                }
                if q.quit {
                    return;
                }
                q = sh.work_cv.wait(q).unwrap_or_else(|e| e.into_inner());
            }
        };
        let imp = imp.as_mut();
        let result = match job {
            Job::Run(work, reservation) => run_reserved(reservation, move || work(imp)),
            Job::Plan(state, reservation) => run_reserved(Some(reservation), move || {
                imp.graph_plan_compute(lock(&state).as_mut())
            }),
            Job::Signal(ev, generation) => {
                let error = lock(&sh.q).error.clone();
                ev.signal(generation, error);
                Ok(())
            }
            Job::Wait(ev, generation) => {
                ev.wait_for(generation);
                Ok(())
            }
        };
        let mut q = lock(&sh.q);
        q.completed += 1;
        if let Err(e) = result {
            q.error.get_or_insert(e);
        }
        drop(q);
        sh.done_cv.notify_all();
    }
}

/// Runs `f` once `reservation` (if any) holds its buffers exclusively; a panic becomes an error.
fn run_reserved(
    mut reservation: Option<Reservation>,
    f: impl FnOnce() -> Result<()>,
) -> Result<()> {
    if let Some(r) = reservation.as_mut() {
        r.start();
    }
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .unwrap_or_else(|p| Err(Error::Compute(panic_message(p))));
    drop(reservation);
    r
}

fn panic_message(p: Box<dyn std::any::Any + Send>) -> String {
    let msg = p
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string());
    format!("a job panicked: {msg}")
}

/// The result of an asynchronous read (`tensor_get_async`): wait for it with [`Pending::wait`].
pub struct Pending<T> {
    slot: Arc<Slot<T>>,
}

impl<T> std::fmt::Debug for Pending<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending")
            .field("ready", &self.is_ready())
            .finish()
    }
}

/// Where an asynchronous result lands: the value once it arrives, and a condvar to wait on.
type Slot<T> = (Mutex<Option<Result<T>>>, Condvar);

impl<T> Pending<T> {
    fn new(what: &'static str) -> (Pending<T>, Promise<T>) {
        let slot = Arc::new((Mutex::new(None), Condvar::new()));
        let promise = Promise {
            slot: Some(slot.clone()),
            what,
        };
        (Pending { slot }, promise)
    }

    /// Whether the value has arrived.
    pub fn is_ready(&self) -> bool {
        lock(&self.slot.0).is_some()
    }

    /// Blocks until the value arrives (or the work failed).
    pub fn wait(self) -> Result<T> {
        let (m, cv) = &*self.slot;
        let mut g = lock(m);
        loop {
            if let Some(r) = g.take() {
                return r;
            }
            g = cv.wait(g).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// The job's side of a [`Pending`]. Dropped without being fulfilled (the job panicked, or was
/// dropped unrun), it fulfils the [`Pending`] with an error, so [`Pending::wait`] never hangs.
struct Promise<T> {
    slot: Option<Arc<Slot<T>>>,
    what: &'static str,
}

impl<T> Promise<T> {
    fn fulfil(mut self, value: Result<T>) {
        if let Some(slot) = self.slot.take() {
            *lock(&slot.0) = Some(value);
            slot.1.notify_all();
        }
    }
}

impl<T> Drop for Promise<T> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            *lock(&slot.0) = Some(Err(Error::Compute(format!(
                "{}: the job ended without a result (it panicked or its stream stopped)",
                self.what
            ))));
            slot.1.notify_all();
        }
    }
}

/// A graph prepared for repeated computation on one backend (`ggml_backend_graph_plan_t`).
#[derive(Clone)]
pub struct GraphPlan {
    backend: std::sync::Weak<Inner>,
    state: PlanState,
    buffers: Arc<[super::Buffer]>,
}

impl std::fmt::Debug for GraphPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let backend = self.backend.upgrade().map(|b| b.name.clone());
        f.debug_struct("GraphPlan")
            .field("backend", &backend)
            .field("n_buffers", &self.buffers.len())
            .finish()
    }
}

impl Backend {
    /// Validates a graph for this backend and returns its nodes and the buffers it touches.
    fn prepare_graph(
        &self,
        graph: &crate::Graph,
        what: &str,
    ) -> Result<(Vec<Tensor>, Arc<[super::Buffer]>)> {
        let nodes = graph.nodes();
        let tensors = nodes
            .iter()
            .flat_map(|n| std::iter::once(n).chain(n.srcs()));
        let buffers = super::buffer::buffer_set(tensors, what)?;
        let dev = &self.0.device;
        for b in buffers.iter() {
            if !dev.supports_buft(&b.get_type()) {
                return Err(Error::unsupported(format!(
                    "{what}: backend {} cannot use tensors in buffer type {}",
                    self.name(),
                    b.get_type().name()
                )));
            }
        }
        self.check_supported(&nodes)?;
        for n in nodes.iter().filter(|n| !n.op().is_empty()) {
            if n.buffer().is_some_and(|b| b.is_read_only()) {
                return Err(Error::invalid(format!(
                    "{what}: node {:?} ({}) would write into read-only buffer {}",
                    n.name(),
                    n.op().name(),
                    n.buffer().map(|b| b.name()).unwrap_or_default()
                )));
            }
        }
        Ok((nodes, buffers))
    }

    /// Queues the computation of `graph` and returns at once (`ggml_backend_graph_compute_async`).
    /// Errors found before queuing (unallocated tensors, unsupported ops, freed buffers) are
    /// returned here; errors while computing are returned by [`Backend::synchronize`].
    pub fn graph_compute_async(&self, graph: &crate::Graph) -> Result<()> {
        let (nodes, buffers) = self.prepare_graph(graph, "graph_compute")?;
        let reservation = Reservation::new(buffers, "graph_compute")?;
        self.enqueue_work(
            Box::new(move |imp| imp.graph_compute(&nodes)),
            Some(reservation),
        );
        Ok(())
    }

    /// Computes `graph` and waits for it (`ggml_backend_graph_compute`).
    pub fn graph_compute(&self, graph: &crate::Graph) -> Result<()> {
        self.graph_compute_async(graph)?;
        self.synchronize()
    }

    /// Computes once what repeated computations of `graph` need
    /// (`ggml_backend_graph_plan_create`). The graph's tensors must be allocated.
    pub fn graph_plan_create(&self, graph: &crate::Graph) -> Result<GraphPlan> {
        let (nodes, buffers) = self.prepare_graph(graph, "graph_plan_create")?;
        let state = self.call(move |imp| imp.graph_plan_create(&nodes))?;
        Ok(GraphPlan {
            backend: Arc::downgrade(&self.0),
            state: Arc::new(Mutex::new(state)),
            buffers,
        })
    }

    /// Runs a plan and waits for it (`ggml_backend_graph_plan_compute`).
    pub fn graph_plan_compute(&self, plan: &GraphPlan) -> Result<()> {
        if !plan
            .backend
            .upgrade()
            .is_some_and(|b| Arc::ptr_eq(&b, &self.0))
        {
            return Err(Error::invalid(format!(
                "graph_plan_compute: the plan was made by another backend than {}",
                self.name()
            )));
        }
        let reservation = Reservation::new(plan.buffers.clone(), "graph_plan_compute")?;
        self.enqueue(Job::Plan(plan.state.clone(), reservation));
        self.synchronize()
    }

    /// Releases a plan (`ggml_backend_graph_plan_free`); the same as dropping it.
    pub fn graph_plan_free(&self, plan: GraphPlan) {
        drop(plan);
    }

    /// Sets the threads graphs are computed with (`ggml_backend_cpu_set_n_threads`); applies to
    /// work queued after this call. `Err` for 0 or for backends without the setting.
    pub fn set_n_threads(&self, n: usize) -> Result<()> {
        if n == 0 {
            return Err(Error::invalid(
                "set_n_threads: n = 0; at least one thread is needed",
            ));
        }
        self.call(move |imp| imp.set_n_threads(n))
    }

    /// Queues a copy of `data` into `t` at byte `offset` and returns at once
    /// (`ggml_backend_tensor_set_async`). The stream owns the bytes.
    pub fn tensor_set_async(&self, t: &Tensor, data: Vec<u8>, offset: usize) -> Result<()> {
        t.check_range("tensor_set_async", offset, data.len())?;
        let b = t.require_binding("tensor_set_async")?;
        let reservation = Reservation::new(Arc::from([b.buffer.clone()]), "tensor_set_async")?;
        self.enqueue_work(
            Box::new(move |_| {
                b.buffer
                    // SAFETY: in bounds (the range lies in the tensor, which lies in the
                    // buffer); the running reservation excludes every other access.
                    .with_reserved(|imp| unsafe { imp.write(b.offset + offset, &data) })
                    .unwrap_or_else(|| Err(Error::Freed("tensor_set_async: buffer freed".into())))
            }),
            Some(reservation),
        );
        Ok(())
    }

    /// Queues a read of `size` bytes of `t` from `offset` (`ggml_backend_tensor_get_async`).
    pub fn tensor_get_async(
        &self,
        t: &Tensor,
        offset: usize,
        size: usize,
    ) -> Result<Pending<Vec<u8>>> {
        t.check_range("tensor_get_async", offset, size)?;
        let b = t.require_binding("tensor_get_async")?;
        let reservation = Reservation::new(Arc::from([b.buffer.clone()]), "tensor_get_async")?;
        let (pending, promise) = Pending::new("tensor_get_async");
        self.enqueue_work(
            Box::new(move |_| {
                let mut out = vec![0u8; size];
                let r = b
                    .buffer
                    // SAFETY: in bounds (the range lies in the tensor, which lies in the
                    // buffer); the running reservation excludes every write.
                    .with_reserved(|imp| unsafe { imp.read(b.offset + offset, &mut out) })
                    .unwrap_or_else(|| Err(Error::Freed("tensor_get_async: buffer freed".into())));
                let reply = r.clone().map(|_| out);
                promise.fulfil(reply);
                r
            }),
            Some(reservation),
        );
        Ok(pending)
    }

    /// Makes later work on this stream wait until `ev` is signalled; the host does not block
    /// (`ggml_backend_event_wait`).
    pub fn event_wait(&self, ev: &super::Event) -> Result<()> {
        let target = ev.0.recorded();
        self.enqueue(Job::Wait(ev.0.clone(), target));
        Ok(())
    }
}

/// Copies `src` into `dst` after all work queued so far on `b_src`, and before any work queued
/// later on `b_dst` (`ggml_backend_tensor_copy_async`). Returns at once.
pub(crate) fn tensor_copy_async(
    b_src: &Backend,
    b_dst: &Backend,
    src: &Tensor,
    dst: &Tensor,
) -> Result<()> {
    if !src.are_same_layout(dst) {
        return Err(Error::invalid(format!(
            "tensor_copy_async: src {:?} ({} {:?}) and dst {:?} ({} {:?}) differ in layout",
            src.name(),
            src.ty(),
            src.ne(),
            dst.name(),
            dst.ty(),
            dst.ne()
        )));
    }
    if src == dst {
        return Ok(());
    }
    let s = src.require_binding("tensor_copy_async (src)")?;
    let d = dst.require_binding("tensor_copy_async (dst)")?;
    let size = src.nbytes();
    let buffers = super::buffer::buffer_set([src, dst], "tensor_copy_async")?;
    // Claim the buffers first: if one was freed, nothing may have been queued anywhere.
    let reservation = Reservation::new(buffers, "tensor_copy_async")?;
    if b_src != b_dst {
        let ev = super::Event::for_device(b_src.get_device());
        ev.record(b_src)?;
        b_dst.event_wait(&ev)?;
    }
    b_dst.enqueue_work(
        Box::new(move |_| copy_bytes(&s, &d, size)),
        Some(reservation),
    );
    Ok(())
}

/// Copies `size` bytes between two reserved bindings, directly when the source is host memory.
///
/// SAFETY (every access below): both ranges lie in their buffers (a bound tensor lies in its
/// buffer), and the job's running reservation on both buffers excludes every other access.
fn copy_bytes(s: &crate::tensor::Binding, d: &crate::tensor::Binding, size: usize) -> Result<()> {
    let freed = || Error::Freed("tensor copy: buffer freed".into());
    // Straight from the source's host memory when it has some, unless both tensors are in one
    // buffer: their ranges may overlap, and a slice of the source must not alias the bytes
    // being written (that copy is staged).
    if s.buffer != d.buffer {
        let direct = s
            .buffer
            .with_reserved(|src| {
                src.host_ptr().map(|p| {
                    // SAFETY: see above.
                    let bytes =
                        unsafe { std::slice::from_raw_parts(p.as_ptr().add(s.offset), size) };
                    d.buffer
                        // SAFETY: see above; `dst` is another buffer than `bytes` lies in.
                        .with_reserved(|dst| unsafe { dst.write(d.offset, bytes) })
                        .unwrap_or_else(|| Err(freed()))
                })
            })
            .ok_or_else(freed)?;
        if let Some(r) = direct {
            return r;
        }
    }
    let mut tmp = vec![0u8; size];
    s.buffer
        // SAFETY: see above.
        .with_reserved(|src| unsafe { src.read(s.offset, &mut tmp) })
        .ok_or_else(freed)??;
    d.buffer
        // SAFETY: see above.
        .with_reserved(|dst| unsafe { dst.write(d.offset, &tmp) })
        .ok_or_else(freed)?
}
