//! The R thread: long calls that wait with Ctrl-C, and R functions the library calls.
//!
//! R may be entered only from its own thread, and only where a jump out of R (an error, an
//! interrupt) cannot cross Rust frames. So:
//!
//! * A long call ([`wait`]) runs its work on a helper thread, and the R thread waits for it in
//!   short steps, checking for Ctrl-C between them (inside `R_ToplevelExec`, which catches R's
//!   jump). On an interrupt the call returns an R error at once; the work cannot be stopped
//!   midway, so it finishes on its own (its handles stay valid, and reading its tensors or
//!   synchronizing waits for it, as for any queued work).
//! * While it waits, the R thread runs R functions on behalf of the library's threads
//!   ([`on_r_thread`]): a custom op's kernel on a backend's worker, or a meta device's split
//!   function, send the job to the waiting R thread and block until it is done. With no R
//!   thread waiting (after an interrupt, say) the job is refused and the caller falls back.
//! * While an R function runs for the library ([`call_r`]), the library may hold locks or wait
//!   for the very computation that called it: every handle of this package is refused then
//!   ([`in_callback`]), and handles the garbage collector frees meanwhile are dropped on another
//!   thread ([`defer_drop`]).

use std::cell::RefCell;
use std::collections::HashMap;
use std::mem::ManuallyDrop;
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::thread::ThreadId;
use std::time::Duration;

use extendr_api::prelude::*;
use extendr_api::{Error, Result};

/// How long the R thread waits between two looks for Ctrl-C.
const TICK: Duration = Duration::from_millis(10);

type Job = Box<dyn FnOnce() + Send>;

/// What the R thread receives while it waits.
enum Msg {
    /// A job to run on the R thread.
    Run(Job),
    /// The helper thread finished the work.
    Done,
}

/// The thread R runs on (the one that loaded the package).
static R_THREAD: OnceLock<ThreadId> = OnceLock::new();
/// Where jobs for the R thread go while it waits; `None` when it is not waiting.
static SERVICE: Mutex<Option<Sender<Msg>>> = Mutex::new(None);
/// Whether an R function called for the library is running.
static IN_CALLBACK: AtomicBool = AtomicBool::new(false);
/// An interrupt seen inside an R function, or injected by the tests, not yet reported.
static INTERRUPT: AtomicBool = AtomicBool::new(false);
/// Failures of R functions called for the library, reported by the next [`wait`] to finish.
static FAILURES: Mutex<Vec<String>> = Mutex::new(Vec::new());
/// Registered R functions whose last user was dropped (on any thread), to release on the R
/// thread.
static RELEASED: Mutex<Vec<u64>> = Mutex::new(Vec::new());
/// Handles freed by the garbage collector during an R callback, dropped afterwards.
static DEFERRED: Mutex<Vec<Box<dyn Send>>> = Mutex::new(Vec::new());
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// The registered R functions, by id; only the R thread touches it. Never dropped as a
    /// whole: at process exit R is gone, so its objects must not be released then.
    static FUNS: RefCell<ManuallyDrop<HashMap<u64, Robj>>> =
        RefCell::new(ManuallyDrop::new(HashMap::new()));
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Records the calling thread as R's (called when the package loads).
pub fn init() {
    let _ = R_THREAD.set(std::thread::current().id());
}

fn is_r_thread() -> bool {
    R_THREAD.get() == Some(&std::thread::current().id())
}

/// Whether an R function called for the library is running (handles are refused then).
pub fn in_callback() -> bool {
    IN_CALLBACK.load(Ordering::SeqCst)
}

/// Keeps `h` alive until the running R callback has returned, then drops it on another thread
/// (its drop may wait for work that waits for the callback).
pub fn defer_drop(h: Box<dyn Send>) {
    lock(&DEFERRED).push(h);
}

/// Makes the next look for Ctrl-C see one (the tests' stand-in for the key).
pub fn inject_interrupt() {
    INTERRUPT.store(true, Ordering::SeqCst);
}

/// Records the failure of an R function called for the library.
pub fn record_failure(msg: String) {
    lock(&FAILURES).push(msg);
}

extern "C" {
    fn R_ToplevelExec(fun: Option<unsafe extern "C" fn(*mut c_void)>, data: *mut c_void) -> c_int;
    fn R_CheckUserInterrupt();
}

unsafe extern "C" fn check_interrupt(_: *mut c_void) {
    // SAFETY: called by R_ToplevelExec on the R thread; on a pending interrupt R jumps back to
    // R_ToplevelExec, over this frame only, which owns nothing.
    unsafe { R_CheckUserInterrupt() }
}

/// Whether the user pressed Ctrl-C (or a test injected it) since the last look. R thread only.
fn interrupted() -> bool {
    if INTERRUPT.swap(false, Ordering::SeqCst) {
        return true;
    }
    // SAFETY: on the R thread (every caller is); R_ToplevelExec returns 0 when the function
    // it runs was left by a jump, here the interrupt's, and catches that jump.
    unsafe { R_ToplevelExec(Some(check_interrupt), std::ptr::null_mut()) == 0 }
}

/// Puts back the R thread's previous job queue when a [`wait`] ends, however it ends.
struct Serving(Option<Sender<Msg>>);

impl Drop for Serving {
    fn drop(&mut self) {
        *lock(&SERVICE) = self.0.take();
    }
}

/// Runs `work` on a helper thread while the R thread waits for it, running the jobs the
/// library sends ([`on_r_thread`]) and looking for Ctrl-C every few milliseconds. `Err` naming
/// `fname` on an interrupt (the work goes on to its end on its own), when an R function called
/// for the work failed, or when called from inside such an R function.
pub fn wait<T: Send + 'static>(
    fname: &str,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T> {
    if in_callback() {
        return Err(Error::Other(format!(
            "{fname}: cannot be called from inside an R function that the library is running"
        )));
    }
    // Failures left by an interrupted call's work belong to no call still waiting.
    lock(&FAILURES).clear();
    let (tx, rx) = mpsc::channel();
    let _serving = Serving(lock(&SERVICE).replace(tx.clone()));
    let slot = Arc::new(Mutex::new(None));
    let out = slot.clone();
    std::thread::Builder::new()
        .name("ggmlrs-call".into())
        .spawn(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work));
            *lock(&out) = Some(r.map_err(|_| "the call panicked".to_string()));
            let _ = tx.send(Msg::Done);
        })
        .map_err(|e| Error::Other(format!("{fname}: cannot start a thread: {e}")))?;
    loop {
        if interrupted() {
            return Err(Error::Other(format!(
                "{fname}: interrupted; the work already queued goes on in the background \
                 (synchronizing or reading its tensors waits for it)"
            )));
        }
        match rx.recv_timeout(TICK) {
            Ok(Msg::Run(job)) => job(),
            Ok(Msg::Done) | Err(RecvTimeoutError::Disconnected) => break,
            Err(RecvTimeoutError::Timeout) => {}
        }
    }
    let failures = std::mem::take(&mut *lock(&FAILURES));
    if let Some(first) = failures.first() {
        return Err(Error::Other(format!("{fname}: {first}")));
    }
    let r = lock(&slot).take();
    match r {
        Some(Ok(v)) => Ok(v),
        Some(Err(why)) => Err(Error::Other(format!("{fname}: {why}"))),
        None => Err(Error::Other(format!(
            "{fname}: the call ended without a result"
        ))),
    }
}

/// Runs `job` on the R thread: at once when called there, else by the R thread waiting in
/// [`wait`], blocking until it is done. `None` when the R thread is not waiting (the job is
/// dropped unrun).
pub fn on_r_thread<T: Send + 'static>(job: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    if is_r_thread() {
        return Some(job());
    }
    let tx = lock(&SERVICE).clone()?;
    let (rtx, rrx) = mpsc::channel();
    tx.send(Msg::Run(Box::new(move || {
        let _ = rtx.send(job());
    })))
    .ok()?;
    rrx.recv().ok()
}

/// An R function registered for the library's threads, by id; dropping the last one (on any
/// thread) releases the function on the R thread later.
pub struct RFun(u64);

impl RFun {
    /// Registers `fun` (an R function, else an error naming `arg`). R thread only.
    pub fn new(fun: &Robj, arg: &str) -> Result<RFun> {
        if !fun.is_function() {
            return Err(crate::args::bad(arg, "expected an R function"));
        }
        let released = std::mem::take(&mut *lock(&RELEASED));
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        FUNS.with(|f| {
            let mut f = f.borrow_mut();
            for r in released {
                f.remove(&r);
            }
            f.insert(id, fun.clone());
        });
        Ok(RFun(id))
    }

    /// The id to send to the R thread.
    pub fn id(&self) -> u64 {
        self.0
    }
}

impl Drop for RFun {
    fn drop(&mut self) {
        lock(&RELEASED).push(self.0);
    }
}

/// Puts back [`IN_CALLBACK`] and, leaving the outermost callback, hands the handles freed
/// meanwhile to a thread that drops them.
struct Callback(bool);

impl Drop for Callback {
    fn drop(&mut self) {
        IN_CALLBACK.store(self.0, Ordering::SeqCst);
        if self.0 {
            return;
        }
        let freed = std::mem::take(&mut *lock(&DEFERRED));
        if !freed.is_empty() {
            // Were no thread to start, spawn would drop them here, after the callback.
            let _ = std::thread::Builder::new().spawn(move || drop(freed));
        }
    }
}

/// Runs `f`, a job of the library's on R's thread that calls R (making its arguments, calling
/// [`call_r`], reading its value), as an R callback: handles are refused meanwhile, and those
/// the garbage collector frees are dropped afterwards.
pub fn as_callback<T>(f: impl FnOnce() -> T) -> T {
    let _done = Callback(IN_CALLBACK.swap(true, Ordering::SeqCst));
    f()
}

/// Calls the registered R function `id` with `args` (R thread only, from a job, inside
/// [`as_callback`]): its value, or its error's message; an empty message for an interrupt
/// inside it, which the waiting call reports as its own.
pub fn call_r(id: u64, args: Vec<Robj>) -> std::result::Result<Robj, String> {
    let fun = FUNS
        .with(|f| f.borrow().get(&id).cloned())
        .ok_or_else(|| "the R function was released".to_string())?;
    let helper = eval_string("ggmlrs:::rs_call_r").map_err(|e| e.to_string())?;
    let helper = helper
        .as_function()
        .ok_or_else(|| "rs_call_r is not a function".to_string())?;
    let res = helper
        .call(pairlist!(fun, List::from_values(args)))
        .map_err(|e| format!("the R function could not be called: {e}"))?;
    if res.dollar("interrupted").is_ok_and(|v| !v.is_null()) {
        // Reported as the waiting call's interrupt, not as a failure of the function.
        inject_interrupt();
        return Err(String::new());
    }
    match res.dollar("error") {
        Ok(m) if !m.is_null() => Err(m.as_str().unwrap_or("an R error").to_string()),
        _ => res.dollar("value").map_err(|e| e.to_string()),
    }
}
