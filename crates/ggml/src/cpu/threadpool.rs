//! A persistent pool of worker threads for one CPU stream. The thread running the graph is
//! worker 0 ("the main thread is a work thread too", as in GGML): the stream's thread, or the
//! caller's where it computes on an idle stream; `n - 1` more threads wait between
//! graphs: first spinning on an atomic generation number for up to
//! [`POLL`](crate::backend::stream::POLL) (as GGML's threadpool polls), so a graph that
//! follows another starts on every thread at once, then parked on a condvar. The caller waits
//! for the workers the same way. Starting a graph allocates nothing.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use crate::backend::stream::{poll, POLL};
use crate::tensor::lock;

/// The task of one run: called once per thread with (thread index, thread count).
type Task<'a> = dyn Fn(usize, usize) + Sync + 'a;

/// A borrowed task with its lifetime erased; valid only while `run` waits for the workers.
#[derive(Clone, Copy)]
struct TaskPtr(*const Task<'static>);
// SAFETY: the pointee is `Sync`, and `run` keeps it alive until every worker is done with it.
unsafe impl Send for TaskPtr {}

#[derive(Default)]
struct State {
    task: Option<TaskPtr>,
    n_active: usize,
    quit: bool,
}

struct Shared {
    state: Mutex<State>,
    start: Condvar,
    done: Condvar,
    /// Bumped (under `state`'s lock) when a task is published or the pool quits.
    generation: AtomicU64,
    /// Workers of the current run still to finish.
    remaining: AtomicUsize,
    panicked: AtomicBool,
}

pub(crate) struct ThreadPool {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
}

impl ThreadPool {
    /// A pool running tasks on `n` threads (the caller plus `n - 1` workers).
    pub(crate) fn new(n: usize) -> ThreadPool {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            start: Condvar::new(),
            done: Condvar::new(),
            generation: AtomicU64::new(0),
            remaining: AtomicUsize::new(0),
            panicked: AtomicBool::new(false),
        });
        let workers = (1..n.max(1))
            .filter_map(|i| {
                let shared = shared.clone();
                std::thread::Builder::new()
                    .name(format!("ggml-cpu-{i}"))
                    .spawn(move || worker(&shared, i))
                    .ok()
            })
            .collect();
        ThreadPool { shared, workers }
    }

    /// Threads available, the caller included.
    pub(crate) fn n_threads(&self) -> usize {
        self.workers.len() + 1
    }

    /// Runs `task(i, n)` on threads `0..n` (`n` clamped to the pool) and returns when all are
    /// done. Returns false if a worker panicked. Takes `&mut self`: the pool holds one task at
    /// a time, and a second run started beside the first would replace the task the first
    /// one's workers are still to call, and let it return while they use it.
    pub(crate) fn run(&mut self, n: usize, task: &Task<'_>) -> bool {
        let n = n.clamp(1, self.n_threads());
        if n == 1 {
            task(0, 1);
            return true;
        }
        // SAFETY: only the lifetime is erased; we wait below until `remaining == 0`, i.e. until
        // no worker can touch `task` any more, before returning.
        let erased: TaskPtr =
            TaskPtr(unsafe { std::mem::transmute::<&Task<'_>, &'static Task<'static>>(task) });
        let sh = &*self.shared;
        {
            let mut s = lock(&sh.state);
            s.task = Some(erased);
            s.n_active = n;
            sh.remaining.store(n - 1, Ordering::Relaxed);
            sh.panicked.store(false, Ordering::Relaxed);
            sh.generation.fetch_add(1, Ordering::Release);
        }
        sh.start.notify_all();
        let caller_ok =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| task(0, n))).is_ok();
        let finished = || sh.remaining.load(Ordering::Acquire) == 0;
        let mut s = lock(&sh.state);
        if !finished() {
            drop(s);
            poll(POLL, finished);
            s = lock(&sh.state);
            while !finished() {
                s = sh.done.wait(s).unwrap_or_else(|e| e.into_inner());
            }
        }
        s.task = None;
        caller_ok && !sh.panicked.load(Ordering::Acquire)
    }
}

fn worker(shared: &Shared, index: usize) {
    let mut seen = 0u64;
    loop {
        let published = || shared.generation.load(Ordering::Acquire) != seen;
        poll(POLL, published);
        let (task, n) = {
            let mut s = lock(&shared.state);
            loop {
                if s.quit {
                    return;
                }
                let generation = shared.generation.load(Ordering::Acquire);
                if generation != seen {
                    seen = generation;
                    if index < s.n_active {
                        if let Some(t) = s.task {
                            break (t, s.n_active);
                        }
                    }
                }
                s = shared.start.wait(s).unwrap_or_else(|e| e.into_inner());
            }
        };
        // SAFETY: `run` keeps the task alive until this worker decrements `remaining`.
        let task = unsafe { &*task.0 };
        let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| task(index, n))).is_ok();
        if !ok {
            shared.panicked.store(true, Ordering::Release);
        }
        // The lock orders this decrement with the caller's check before it sleeps, so the
        // last worker's notification cannot fall between the two.
        let _s = lock(&shared.state);
        if shared.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            shared.done.notify_all();
        }
    }
}

/// A barrier for the threads of one run, between nodes: an arrival counter and a generation
/// number, both atomics; waiters spin (with the CPU's spin hint) for a short while, then yield
/// their core between checks, so an oversubscribed machine still makes progress. Replaces a
/// Mutex/Condvar barrier, whose wake-up costs a system call per thread per node.
pub(crate) struct SpinBarrier {
    n: usize,
    arrived: AtomicUsize,
    generation: AtomicUsize,
}

/// Spins before a waiter starts yielding.
const SPINS: u32 = 1 << 12;

impl SpinBarrier {
    /// A barrier for `n` threads (at least one).
    pub(crate) fn new(n: usize) -> SpinBarrier {
        SpinBarrier {
            n: n.max(1),
            arrived: AtomicUsize::new(0),
            generation: AtomicUsize::new(0),
        }
    }

    /// Waits until all `n` threads have called `wait` for this generation. Everything a thread
    /// wrote before its `wait` is visible to every thread after theirs.
    pub(crate) fn wait(&self) {
        let generation = self.generation.load(Ordering::Acquire);
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.n {
            self.arrived.store(0, Ordering::Relaxed);
            self.generation
                .store(generation.wrapping_add(1), Ordering::Release);
            return;
        }
        let mut spins = 0u32;
        while self.generation.load(Ordering::Acquire) == generation {
            if spins < SPINS {
                spins += 1;
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }
}

impl Drop for ThreadPool {
    fn drop(&mut self) {
        {
            let mut s = lock(&self.shared.state);
            s.quit = true;
            self.shared.generation.fetch_add(1, Ordering::Release);
        }
        self.shared.start.notify_all();
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// No thread passes the barrier before every thread has reached it: each thread adds to a
    /// counter, waits, and must then see every thread's addition, over many rounds.
    #[test]
    fn spin_barrier_holds_every_thread() {
        let n = 3;
        let rounds = 200;
        let barrier = SpinBarrier::new(n);
        let count = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..n {
                s.spawn(|| {
                    for r in 0..rounds {
                        count.fetch_add(1, Ordering::SeqCst);
                        barrier.wait();
                        assert!(count.load(Ordering::SeqCst) >= n * (r + 1));
                        barrier.wait();
                    }
                });
            }
        });
        assert_eq!(count.load(Ordering::SeqCst), n * rounds);
    }

    #[test]
    fn runs_every_index_once() {
        let mut pool = ThreadPool::new(4);
        for n in [1, 2, 4, 9] {
            let hits: Vec<AtomicUsize> = (0..4).map(|_| AtomicUsize::new(0)).collect();
            assert!(pool.run(n, &|i, nth| {
                assert_eq!(nth, n.min(4));
                hits[i].fetch_add(1, Ordering::SeqCst);
            }));
            let total: usize = hits.iter().map(|h| h.load(Ordering::SeqCst)).sum();
            assert_eq!(total, n.min(4));
        }
    }
}
