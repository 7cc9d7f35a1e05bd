//! Backends as real streams: every [`Backend`] has a worker thread that runs its queued jobs in
//! order. Unlike GGML's CPU backend, which blocks, `graph_compute_async` and the `*_async`
//! transfers return at once on every backend, the CPU included. A synchronous call on an idle
//! stream (`graph_compute`, say) runs its job on the caller's thread, as GGML does, instead of
//! handing it to the worker and sleeping until it is done.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::tensor::{lock, Tensor};

use super::buffer::{ImplPtr, Reservation};
use super::event::EventInner;
use super::job::Resolved;
use super::traits::{BackendImpl, Place};
use super::{Buffer, Device};

/// What runs after the next synchronization of the engine, with its result: the completion
/// of work an engine with its own queue may still be doing (a read's reply, freeing the bytes
/// a write was given).
pub(crate) type After = Vec<Box<dyn FnOnce(&Result<()>) + Send>>;

/// A job's work: the engine, and the list of what must wait for the engine's next
/// synchronization. It runs while the job's reservation holds its buffers.
pub(crate) type Work = Box<dyn FnOnce(&mut dyn BackendImpl, &mut After) -> Result<()> + Send>;

/// A backend's prepared plan and its nodes' places, shared by the handle and the jobs that run
/// it.
pub(crate) struct PlanInner {
    engine: Box<dyn std::any::Any + Send>,
    resolved: Resolved,
}

pub(crate) type PlanState = Arc<Mutex<PlanInner>>;

pub(crate) enum Job {
    /// Run `work` once the reserved buffers are free of other streams.
    Run(Work, Option<Reservation>),
    /// Run a plan over the places resolved when it was queued (no boxed closure: computing a
    /// plan allocates nothing).
    Plan(PlanState, Reservation),
    /// Compute a graph's resolved nodes (`graph_compute`); the storage goes back to the
    /// stream's [`Shared::graph_storage`] afterwards, so the next graph reuses it.
    Graph(Resolved, Reservation),
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
    /// Bumped (under `q`'s lock) when a job is queued or the stream quits: what an idle worker
    /// spins on before it sleeps on `work_cv`.
    posted: AtomicU64,
    /// `Queue::completed`, stored (under `q`'s lock) when it changes: what `synchronize`
    /// spins on before it sleeps on `done_cv`.
    completed: AtomicU64,
    /// [`BackendImpl::spins_when_idle`], as of the last job run: whether the worker and
    /// `synchronize` spin (for [`POLL`] and [`WAIT_POLL`]) before they sleep.
    spin: AtomicBool,
    /// The storage of the last `graph_compute` job, released ([`Resolved::release`]): taken by
    /// the next one, so computing the same graph again allocates nothing.
    graph_storage: Mutex<Option<Resolved>>,
    /// When the running graph job (`Job::Graph` or `Job::Plan`) started, in ns after `epoch`,
    /// or [`NOT_RUNNING`].
    graph_started: AtomicU64,
    /// How long the last graph job took, in ns: what a waiting caller expects of the next.
    graph_ns: AtomicU64,
    /// The origin of `graph_started`.
    epoch: Instant,
    /// The engine and what its work still holds: locked by the worker for each job, and by a
    /// caller running its own job on an idle stream ([`Backend::run_or_queue`]).
    runner: Mutex<Runner>,
}

/// [`Shared::graph_started`] while no graph job runs.
const NOT_RUNNING: u64 = u64::MAX;

impl Shared {
    /// Nanoseconds since `epoch`.
    fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// How much longer the running graph job should take, judged by the last one's time
    /// (zero where no graph job runs or it has run longer than that).
    fn graph_left(&self) -> Duration {
        let started = self.graph_started.load(Ordering::Relaxed);
        if started == NOT_RUNNING {
            return Duration::ZERO;
        }
        let ran = self.now_ns().saturating_sub(started);
        Duration::from_nanos(self.graph_ns.load(Ordering::Relaxed).saturating_sub(ran))
    }
}

/// How long an idle stream worker spins before it sleeps (a caller waiting in `synchronize`:
/// [`WAIT_POLL`]), where the engine [spins when idle](BackendImpl::spins_when_idle): a
/// thread woken from sleep starts tens of microseconds later (more in a virtual machine), as
/// long as a small graph takes to compute.
pub(crate) const POLL: Duration = Duration::from_millis(1);

/// How long a caller waiting in `synchronize` spins before it sleeps: shorter than [`POLL`],
/// because it spins while the worker computes, and where another process keeps a core busy
/// (as on a small virtual machine) that spin takes the worker's core: a one-thread MUL_MAT ran
/// at half speed so beside a one-thread build on a 2-core guest, and at full speed with this
/// limit. A graph job expected to run longer (judged by the last one) is slept through
/// instead until this long plus a sixteenth of it before its expected end, then spun for
/// (`Backend::synchronize_quiet`): a thread woken at the end would start tens of microseconds
/// late (6–8% of a 0.45 ms MUL_MAT at one thread on that guest).
const WAIT_POLL: Duration = Duration::from_micros(100);

/// Spins until `ready()` or `limit` has passed (checking the clock every 64 spins); whether
/// `ready()` became true.
pub(crate) fn poll(limit: Duration, ready: impl Fn() -> bool) -> bool {
    let t0 = Instant::now();
    loop {
        for _ in 0..64 {
            if ready() {
                return true;
            }
            std::hint::spin_loop();
        }
        if t0.elapsed() >= limit {
            return ready();
        }
    }
}

/// Stream ids, the holders of buffer reservations (0 is the host's).
static NEXT_STREAM_ID: AtomicU64 = AtomicU64::new(1);

pub(crate) struct Inner {
    shared: Arc<Shared>,
    worker: Mutex<Option<JoinHandle<()>>>,
    device: Device,
    name: String,
}

impl Drop for Inner {
    fn drop(&mut self) {
        let mut q = lock(&self.shared.q);
        q.quit = true;
        self.shared.posted.fetch_add(1, Ordering::Release);
        drop(q);
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
        let name = imp.name();
        let shared = Arc::new(Shared {
            q: Mutex::new(Queue::default()),
            work_cv: Condvar::new(),
            done_cv: Condvar::new(),
            posted: AtomicU64::new(0),
            completed: AtomicU64::new(0),
            spin: AtomicBool::new(false),
            graph_storage: Mutex::new(None),
            graph_started: AtomicU64::new(NOT_RUNNING),
            graph_ns: AtomicU64::new(0),
            epoch: Instant::now(),
            runner: Mutex::new(Runner::new(imp)),
        });
        let worker = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name(format!("ggml-{name}-stream"))
                .spawn(move || work(&shared))
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
        self.0.shared.posted.fetch_add(1, Ordering::Release);
        drop(q);
        self.0.shared.work_cv.notify_one();
    }

    /// Runs `job` on the caller's thread where the stream is idle (nothing queued, nothing
    /// unfinished), else queues it: for callers that wait for the job at once
    /// (`graph_compute`, `graph_plan_compute`, synchronous calls). The stream's order holds
    /// either way — a job queued meanwhile by another thread waits for the runner — and so
    /// does every error path; what changes is that the job starts without a hand-off to the
    /// worker and its completion needs no wake-up of the caller, as GGML's CPU backend
    /// computes on the caller's thread.
    pub(crate) fn run_or_queue(&self, job: Job) {
        let sh = &*self.0.shared;
        let idle = |q: &Queue| q.jobs.is_empty() && q.completed == q.submitted && !q.quit;
        if idle(&lock(&sh.q)) {
            // The runner's lock before the queue's, as the worker takes them. An idle
            // stream's worker may still hold it for the moment after its last job completed.
            let mut runner = lock(&sh.runner);
            let mut q = lock(&sh.q);
            if idle(&q) {
                q.submitted += 1;
                // A worker spinning for its next job stops, and sleeps: this job is not its
                // to run.
                sh.posted.fetch_add(1, Ordering::Release);
                drop(q);
                runner.run_job(sh, job);
                runner.settle(sh);
                return;
            }
        }
        self.enqueue(job)
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
        self.run_or_queue(Job::Run(
            Box::new(move |imp, _| {
                *lock(&out) = Some(f(imp));
                Ok(())
            }),
            None,
        ));
        self.synchronize_quiet();
        let r = lock(&slot).take();
        r.unwrap_or_else(|| {
            Err(Error::Compute(format!(
                "backend {}: the stream stopped before the call ran",
                self.name()
            )))
        })
    }

    /// Waits until every job queued so far has finished, without consuming errors. Where the
    /// engine spins, a caller waiting for one graph job that should run past [`WAIT_POLL`]
    /// (judged by the last one's time) sleeps through most of it and spins for its end, so
    /// that it is awake when the job ends (a thread woken from sleep starts tens of
    /// microseconds later) without spinning beside it all along.
    fn synchronize_quiet(&self) {
        let sh = &self.0.shared;
        let mut q = lock(&sh.q);
        let target = q.submitted;
        if sh.spin.load(Ordering::Relaxed) && q.completed < target {
            let one_job = q.jobs.is_empty() && q.completed + 1 == target;
            let left = if one_job {
                sh.graph_left()
            } else {
                Duration::ZERO
            };
            let margin = WAIT_POLL + left / 16;
            let spin = if left > 2 * margin {
                q = sh
                    .done_cv
                    .wait_timeout_while(q, left - margin, |q| q.completed < target)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
                2 * margin
            } else {
                WAIT_POLL.max(left)
            };
            drop(q);
            poll(spin, || sh.completed.load(Ordering::Acquire) >= target);
            q = lock(&sh.q);
        }
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

/// The stream's worker thread: takes queued jobs in order and runs each under the runner's
/// lock, settling when the queue runs dry, so that idle streams hold nothing.
fn work(sh: &Shared) {
    while let Some(job) = next_job(sh) {
        let mut runner = lock(&sh.runner);
        runner.run_job(sh, job);
        if !runner.own_queue || lock(&sh.q).jobs.is_empty() {
            runner.settle(sh);
        }
    }
}

/// The next queued job, or `None` once the stream quits with its queue empty. Where the
/// engine [spins when idle](BackendImpl::spins_when_idle), an idle worker spins for [`POLL`]
/// before it sleeps, so that the next job of a caller submitting one after another starts
/// without a thread wake-up.
fn next_job(sh: &Shared) -> Option<Job> {
    let mut polled = false;
    loop {
        let mut q = lock(&sh.q);
        if let Some(j) = q.jobs.pop_front() {
            return Some(j);
        }
        if q.quit {
            return None;
        }
        if !polled && sh.spin.load(Ordering::Relaxed) {
            polled = true;
            let seen = sh.posted.load(Ordering::Relaxed);
            drop(q);
            poll(POLL, || sh.posted.load(Ordering::Acquire) != seen);
            continue;
        }
        q = sh.work_cv.wait(q).unwrap_or_else(|e| e.into_inner());
        drop(q);
    }
}

/// What runs a stream's jobs: the engine, and the reservations of work an engine with its own
/// queue may still be doing until that engine has synchronized. Used by one thread at a time,
/// under [`Shared::runner`]'s lock: the worker, or a caller running its own job.
struct Runner {
    imp: Box<dyn BackendImpl>,
    /// This stream's id as a holder of buffers.
    id: u64,
    own_queue: bool,
    /// Reservations of finished calls whose device work may still run.
    inflight: Vec<Reservation>,
    /// What waits for the next synchronization.
    after: After,
    /// Jobs run but not yet counted as completed (they complete at the next synchronization).
    unsettled: u64,
}

impl Runner {
    fn new(imp: Box<dyn BackendImpl>) -> Runner {
        let own_queue = imp.has_own_queue();
        Runner {
            imp,
            id: NEXT_STREAM_ID.fetch_add(1, Ordering::Relaxed),
            own_queue,
            inflight: Vec::new(),
            after: Vec::new(),
            unsettled: 0,
        }
    }

    /// Runs one job, timing graph jobs (what a waiting caller expects of the next one) and
    /// keeping its first error for `synchronize`; it completes at the next [`Runner::settle`].
    fn run_job(&mut self, sh: &Shared, job: Job) {
        let graph = matches!(job, Job::Plan(..) | Job::Graph(..));
        if graph {
            sh.graph_started.store(sh.now_ns(), Ordering::Relaxed);
        }
        let result = match job {
            Job::Run(work, reservation) => self.run_work(sh, work, reservation),
            Job::Plan(state, reservation) => self.run_plan(sh, &state, reservation),
            Job::Graph(resolved, reservation) => self.run_graph(sh, resolved, reservation),
            Job::Signal(ev, generation) => self.signal(sh, &ev, generation),
            Job::Wait(ev, generation) => self.wait(sh, &ev, generation),
        };
        if graph {
            let started = sh.graph_started.swap(NOT_RUNNING, Ordering::Relaxed);
            let took = sh.now_ns().saturating_sub(started);
            sh.graph_ns.store(took, Ordering::Relaxed);
        }
        self.unsettled += 1;
        sh.spin.store(self.imp.spins_when_idle(), Ordering::Relaxed);
        if let Err(e) = result {
            lock(&sh.q).error.get_or_insert(e);
        }
    }

    /// Synchronizes the engine, completes what waited for it, gives back the reservations of
    /// work done, and counts the jobs run so far as completed.
    fn settle(&mut self, sh: &Shared) {
        let r = if self.own_queue {
            catch(|| self.imp.synchronize())
        } else {
            Ok(())
        };
        for f in self.after.drain(..) {
            f(&r);
        }
        self.inflight.clear();
        // The reservations are given back: the stored graph storage lets go of its buffers.
        if let Some(stored) = lock(&sh.graph_storage).as_mut() {
            stored.park();
        }
        let mut q = lock(&sh.q);
        q.completed += std::mem::take(&mut self.unsettled);
        sh.completed.store(q.completed, Ordering::Release);
        if let Err(e) = r {
            q.error.get_or_insert(e);
        }
        drop(q);
        sh.done_cv.notify_all();
    }

    /// Holds `res`'s buffers for this stream, giving back what it holds first if it must wait.
    fn start(&mut self, sh: &Shared, res: &mut Reservation) {
        if !res.try_start(self.id) {
            // Another stream holds a buffer: give back ours before blocking, so that stream
            // never waits for us while we wait for it.
            self.settle(sh);
            res.start(self.id);
        }
    }

    /// Runs `work` once its reservation (if any) holds its buffers for this stream; a panic
    /// becomes an error.
    fn run_work(
        &mut self,
        sh: &Shared,
        work: Work,
        reservation: Option<Reservation>,
    ) -> Result<()> {
        let mut res = reservation;
        if let Some(r) = res.as_mut() {
            self.start(sh, r);
        }
        let (imp, after) = (self.imp.as_mut(), &mut self.after);
        let r = catch(move || work(imp, after));
        self.inflight.extend(res);
        r
    }

    /// Runs a plan once its reservation holds its buffers.
    fn run_plan(
        &mut self,
        sh: &Shared,
        state: &Mutex<PlanInner>,
        mut res: Reservation,
    ) -> Result<()> {
        self.start(sh, &mut res);
        let mut plan = lock(state);
        let r = if plan.resolved.is_covered_by(&res) {
            let PlanInner { engine, resolved } = &mut *plan;
            let imp = self.imp.as_mut();
            // SAFETY: `res` (under which the places were captured) is running until it is
            // pushed to `inflight` below, after the view's last use.
            catch(|| imp.graph_plan_compute(engine.as_mut(), &unsafe { resolved.view() }))
        } else {
            Err(Error::Compute(
                "graph_plan_compute: the plan was queued again, with its tensors in other \
                 buffers, before this computation ran; compute it again"
                    .into(),
            ))
        };
        drop(plan);
        self.inflight.push(res);
        r
    }

    /// Computes resolved nodes once their reservation holds their buffers, then gives their
    /// storage back to the stream.
    fn run_graph(
        &mut self,
        sh: &Shared,
        mut resolved: Resolved,
        mut res: Reservation,
    ) -> Result<()> {
        self.start(sh, &mut res);
        let imp = self.imp.as_mut();
        // SAFETY: `res` (under which the places were captured) is running until it is pushed to
        // `inflight` below, after the view's last use.
        let r = catch(|| imp.graph_compute(&unsafe { resolved.view() }));
        resolved.release();
        let mut storage = lock(&sh.graph_storage);
        if storage.is_none() {
            *storage = Some(resolved);
        }
        drop(storage);
        self.inflight.push(res);
        r
    }

    fn signal(&mut self, sh: &Shared, ev: &EventInner, generation: u64) -> Result<()> {
        let native = if self.own_queue {
            catch(|| self.imp.event_record())
        } else {
            Ok(None)
        };
        let (native, r) = match native {
            Ok(n) => (n, Ok(())),
            Err(e) => (None, Err(e)),
        };
        if native.is_none() {
            // The stream signals the event itself: everything before it must be done.
            self.settle(sh);
        }
        let error = lock(&sh.q).error.clone().or_else(|| r.clone().err());
        ev.signal(generation, error, native);
        r
    }

    fn wait(&mut self, sh: &Shared, ev: &EventInner, generation: u64) -> Result<()> {
        if !ev.is_signalled(generation) {
            self.settle(sh); // about to block: hold nothing meanwhile
        }
        // The recording stream's errors are its own to report; here only the order matters.
        let (_, native) = ev.wait_for(generation);
        if let Some(native) = native {
            let queued = self.own_queue && catch(|| self.imp.event_wait(native.as_ref()))?;
            if !queued {
                self.settle(sh);
                let _ = native.synchronize();
            }
        }
        Ok(())
    }
}

/// Runs `f`, turning a panic into an error.
fn catch<R>(f: impl FnOnce() -> Result<R>) -> Result<R> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .unwrap_or_else(|p| Err(Error::Compute(panic_message(p))))
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
/// Each computation resolves the plan's nodes to their buffers again when it is queued.
#[derive(Clone)]
pub struct GraphPlan {
    backend: std::sync::Weak<Inner>,
    state: PlanState,
}

impl std::fmt::Debug for GraphPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let backend = self.backend.upgrade().map(|b| b.name.clone());
        f.debug_struct("GraphPlan")
            .field("backend", &backend)
            .field("n_nodes", &lock(&self.state).resolved.nodes().len())
            .finish()
    }
}

impl Backend {
    /// Checks resolved nodes against this backend: every buffer of a type the device can use,
    /// every op supported, no node computed into a read-only buffer.
    fn check_resolved(&self, r: &Resolved, what: &str) -> Result<()> {
        let dev = &self.0.device;
        for b in r.buffers().iter() {
            if !dev.supports_buft(&b.get_type()) {
                return Err(Error::unsupported(format!(
                    "{what}: backend {} cannot use tensors in buffer type {}",
                    self.name(),
                    b.get_type().name()
                )));
            }
        }
        self.check_supported(r.nodes())?;
        for (i, n) in r.nodes().iter().enumerate() {
            let b = r.node_buffer(i);
            if !n.op().is_empty() && b.is_read_only() {
                return Err(Error::invalid(format!(
                    "{what}: node {:?} ({}) would write into read-only buffer {}",
                    n.name(),
                    n.op().name(),
                    b.name()
                )));
            }
        }
        Ok(())
    }

    /// Checks `r` ([`Backend::check_resolved`]), reserves its buffers and captures its places
    /// under that reservation: what every job over resolved nodes holds while it runs.
    fn reserve_resolved(&self, r: &mut Resolved, what: &str) -> Result<Reservation> {
        self.check_resolved(r, what)?;
        let reservation = Reservation::new(r.buffers().clone(), what)?;
        r.capture(&reservation, what)?;
        Ok(reservation)
    }

    /// The job running `run` over resolved nodes, holding their buffers.
    fn graph_work(
        &self,
        mut r: Resolved,
        what: &str,
        run: impl FnOnce(&mut dyn BackendImpl, &super::PlacedGraph<'_>) -> Result<()> + Send + 'static,
    ) -> Result<Job> {
        let reservation = self.reserve_resolved(&mut r, what)?;
        Ok(Job::Run(
            // SAFETY: the work runs while the job's reservation, under which the places were
            // captured, is running.
            Box::new(move |imp, _| run(imp, &unsafe { r.view() })),
            Some(reservation),
        ))
    }

    /// Queues the computation of `graph` and returns at once (`ggml_backend_graph_compute_async`).
    /// Errors found before queuing (unallocated tensors, unsupported ops, freed buffers) are
    /// returned here; errors while computing are returned by [`Backend::synchronize`].
    ///
    /// The stream reuses the storage of its last computation (holding neither its tensors nor
    /// its buffers once it ran), so computing the same graph again allocates nothing.
    pub fn graph_compute_async(&self, graph: &crate::Graph) -> Result<()> {
        let job = self.graph_job(graph)?;
        self.enqueue(job);
        Ok(())
    }

    /// The job computing `graph`, in the stream's stored storage.
    fn graph_job(&self, graph: &crate::Graph) -> Result<Job> {
        let what = "graph_compute";
        let stored = lock(&self.0.shared.graph_storage).take();
        let mut r = stored.unwrap_or_else(Resolved::empty);
        graph.with_nodes(|nodes| r.reset(nodes, what))?;
        let reservation = self.reserve_resolved(&mut r, what)?;
        Ok(Job::Graph(r, reservation))
    }

    /// Computes `graph` and waits for it (`ggml_backend_graph_compute`). On an idle stream
    /// the calling thread computes it (as GGML's CPU backend does), without a hand-off to
    /// the stream's worker thread.
    pub fn graph_compute(&self, graph: &crate::Graph) -> Result<()> {
        let job = self.graph_job(graph)?;
        self.run_or_queue(job);
        self.synchronize()
    }

    /// Computes `nodes` (in order, as a graph's nodes) with their bytes where `place` says —
    /// a buffer and a byte offset for each node and operand, in place of the tensors' own
    /// memory — and waits for it. For code that keeps copies of other memory: a device that
    /// computes on a host mirror of its own memory, a server computing a client's graph.
    /// `Err` when `place` gives no place for a tensor (`None`), or a place its bytes do not
    /// fit in, and for everything [`Backend::graph_compute`] refuses.
    pub fn graph_compute_at(
        &self,
        nodes: &[Tensor],
        mut place: impl FnMut(&Tensor) -> Option<(Buffer, usize)>,
    ) -> Result<()> {
        let what = "graph_compute_at";
        let r = Resolved::new(nodes, what, |t| {
            place(t).ok_or_else(|| {
                Error::invalid(format!(
                    "{what}: no place was given for tensor {:?}",
                    t.name()
                ))
            })
        })?;
        let job = self.graph_work(r, what, |imp, g| imp.graph_compute(g))?;
        self.run_or_queue(job);
        self.synchronize()
    }

    /// Computes once what repeated computations of `graph` need
    /// (`ggml_backend_graph_plan_create`). The graph's tensors must be allocated.
    pub fn graph_plan_create(&self, graph: &crate::Graph) -> Result<GraphPlan> {
        let resolved = Resolved::bound(&graph.nodes(), "graph_plan_create")?;
        self.check_resolved(&resolved, "graph_plan_create")?;
        let nodes = resolved.nodes().to_vec();
        let engine = self.call(move |imp| imp.graph_plan_create(&nodes))?;
        Ok(GraphPlan {
            backend: Arc::downgrade(&self.0),
            state: Arc::new(Mutex::new(PlanInner { engine, resolved })),
        })
    }

    /// Runs a plan and waits for it (`ggml_backend_graph_plan_compute`). The plan's nodes are
    /// resolved to their buffers again, so it follows tensors that moved. On an idle stream
    /// the calling thread computes it, as [`Backend::graph_compute`] does.
    pub fn graph_plan_compute(&self, plan: &GraphPlan) -> Result<()> {
        let what = "graph_plan_compute";
        if !plan
            .backend
            .upgrade()
            .is_some_and(|b| Arc::ptr_eq(&b, &self.0))
        {
            return Err(Error::invalid(format!(
                "{what}: the plan was made by another backend than {}",
                self.name()
            )));
        }
        let reservation = {
            let mut p = lock(&plan.state);
            p.resolved.rebind(what)?;
            self.reserve_resolved(&mut p.resolved, what)?
        };
        self.run_or_queue(Job::Plan(plan.state.clone(), reservation));
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
        let reservation = Reservation::new(Arc::from([b.buffer]), "tensor_set_async")?;
        let buf = reservation.impl_ptr(0, "tensor_set_async")?;
        // In bounds: the range lies in the tensor, which lies in the buffer.
        let at = b.offset + offset;
        self.enqueue_work(
            Box::new(move |imp, after| {
                // SAFETY: the work runs while the reservation `buf` was taken under runs.
                let place = Place::new(unsafe { buf.get() }, at, data.len());
                let r = imp.set_tensor_async(place, &data);
                // The engine may read the bytes until it synchronizes.
                after.push(Box::new(move |_| drop(data)));
                r
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
        let reservation = Reservation::new(Arc::from([b.buffer]), "tensor_get_async")?;
        let buf = reservation.impl_ptr(0, "tensor_get_async")?;
        let (pending, promise) = Pending::new("tensor_get_async");
        // In bounds: the range lies in the tensor, which lies in the buffer.
        let at = b.offset + offset;
        self.enqueue_work(
            Box::new(move |imp, after| {
                let mut out = vec![0u8; size];
                // SAFETY: the work runs while the reservation `buf` was taken under runs.
                let place = Place::new(unsafe { buf.get() }, at, size);
                match imp.get_tensor_async(place, &mut out) {
                    Ok(()) => {
                        // The bytes are final once the engine has synchronized.
                        after.push(Box::new(move |r| promise.fulfil(r.clone().map(|_| out))));
                        Ok(())
                    }
                    Err(e) => {
                        promise.fulfil(Err(e.clone()));
                        Err(e)
                    }
                }
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

/// A checked copy between two tensors of one layout: the buffers (sorted by id), and each
/// side's buffer index and offset.
struct CopyPlan {
    buffers: Arc<[Buffer]>,
    src: (usize, usize),
    dst: (usize, usize),
    size: usize,
}

impl CopyPlan {
    /// `None` when there is nothing to copy (`src` is `dst`).
    fn new(src: &Tensor, dst: &Tensor, what: &str) -> Result<Option<CopyPlan>> {
        if !src.are_same_layout(dst) {
            return Err(Error::invalid(format!(
                "{what}: src {:?} ({} {:?}) and dst {:?} ({} {:?}) differ in type, shape or \
                 strides",
                src.name(),
                src.ty(),
                src.ne(),
                dst.name(),
                dst.ty(),
                dst.ne()
            )));
        }
        if src == dst {
            return Ok(None);
        }
        let s = src.require_binding(&format!("{what} (src)"))?;
        let d = dst.require_binding(&format!("{what} (dst)"))?;
        let buffers = super::buffer::buffer_set([src, dst], what)?;
        let index = |b: &Buffer| buffers.iter().position(|e| e == b).unwrap_or(0);
        Ok(Some(CopyPlan {
            src: (index(&s.buffer), s.offset),
            dst: (index(&d.buffer), d.offset),
            buffers,
            size: src.nbytes(),
        }))
    }

    /// Both sides' buffer implementations, under `res` (made from [`CopyPlan::buffers`]).
    fn ptrs(&self, res: &Reservation, what: &str) -> Result<(ImplPtr, ImplPtr)> {
        Ok((
            res.impl_ptr(self.src.0, what)?,
            res.impl_ptr(self.dst.0, what)?,
        ))
    }

    /// Both sides' places.
    ///
    /// # Safety
    /// The reservation `ptrs` were taken under must be running while the places are used.
    unsafe fn places<'a>(&self, (s, d): (ImplPtr, ImplPtr)) -> (Place<'a>, Place<'a>) {
        // In bounds: bound tensors lie in their buffers.
        // SAFETY: the caller's contract.
        let (s, d) = unsafe { (s.get(), d.get()) };
        (
            Place::new(s, self.src.1, self.size),
            Place::new(d, self.dst.1, self.size),
        )
    }

    fn same_buffer(&self) -> bool {
        self.src.0 == self.dst.0
    }
}

/// Copies `src` into `dst` synchronously, after the work queued on their buffers
/// (`ggml_backend_tensor_copy`): directly between the devices when the destination buffer can
/// ([`BufferImpl::cpy_tensor`]), else through host memory.
pub(crate) fn tensor_copy(src: &Tensor, dst: &Tensor) -> Result<()> {
    let Some(c) = CopyPlan::new(src, dst, "tensor_copy")? else {
        return Ok(());
    };
    let claim = Reservation::claim_idle(c.buffers.clone(), "tensor_copy")?;
    let ptrs = c.ptrs(&claim, "tensor_copy")?;
    // SAFETY: `claim` is a running claim on both buffers until the end of this function.
    let (s, d) = unsafe { c.places(ptrs) };
    copy_places(s, d, c.same_buffer())
}

/// Copies `src` into `dst` after all work queued so far on `b_src`, and before any work queued
/// later on `b_dst` (`ggml_backend_tensor_copy_async`). Returns at once. The copy runs on
/// `b_dst`: its engine's own copy if it has one ([`BackendImpl::cpy_tensor_async`]), else a
/// direct copy between the buffers, else through host memory.
pub(crate) fn tensor_copy_async(
    b_src: &Backend,
    b_dst: &Backend,
    src: &Tensor,
    dst: &Tensor,
) -> Result<()> {
    let Some(c) = CopyPlan::new(src, dst, "tensor_copy_async")? else {
        return Ok(());
    };
    // Claim the buffers first: if one was freed, nothing may have been queued anywhere.
    let reservation = Reservation::new(c.buffers.clone(), "tensor_copy_async")?;
    let ptrs = c.ptrs(&reservation, "tensor_copy_async")?;
    if b_src != b_dst {
        let ev = super::Event::for_device(b_src.get_device());
        ev.record(b_src)?;
        b_dst.event_wait(&ev)?;
    }
    b_dst.enqueue_work(
        Box::new(move |imp, _| {
            // SAFETY: the work runs while the reservation `ptrs` were taken under runs.
            let (s, d) = unsafe { c.places(ptrs) };
            if !c.same_buffer() && imp.cpy_tensor_async(s, d)? {
                return Ok(());
            }
            imp.synchronize()?;
            copy_places(s, d, c.same_buffer())
        }),
        Some(reservation),
    );
    Ok(())
}

/// Copies between two places the caller holds exclusively: directly when the destination
/// buffer can copy from the source's, else straight from the source's host memory when it has
/// some, else staged through a host copy. Within one buffer the ranges may overlap, so that
/// copy is always staged (a slice of the source must not alias the bytes being written).
fn copy_places(s: Place<'_>, d: Place<'_>, same_buffer: bool) -> Result<()> {
    let size = s.size();
    if !same_buffer {
        // SAFETY: both places lie in their buffers, which differ; the caller's running
        // reservation (or claim) excludes every other access to both.
        if unsafe {
            d.buffer()
                .cpy_tensor(s.buffer(), s.offset(), d.offset(), size)?
        } {
            return Ok(());
        }
        if let Some(p) = s.host_ptr() {
            // SAFETY: as above: the source's `size` bytes are host memory nobody writes now,
            // and the destination is another buffer.
            let bytes = unsafe { std::slice::from_raw_parts(p.as_ptr(), size) };
            // SAFETY: as above.
            return unsafe { d.buffer().write(d.offset(), bytes) };
        }
    }
    let mut tmp = vec![0u8; size];
    // SAFETY: as above.
    unsafe { s.buffer().read(s.offset(), &mut tmp)? };
    // SAFETY: as above.
    unsafe { d.buffer().write(d.offset(), &tmp) }
}
