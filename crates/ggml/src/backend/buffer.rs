//! Buffer types and buffers, and the bookkeeping that makes asynchronous work on them sound.
//!
//! Every buffer counts the queued jobs that will touch it (`pending`) and which stream holds it
//! now (`holder`, with a count of its holds). Host reads and writes wait until both are clear and
//! run under the buffer's lock; jobs take a hold on all their buffers (in id order, so two
//! streams never deadlock) before they run, and give it back when their work is done — when the
//! engine returns, or, for an engine with its own queue, when it has synchronized. One stream may
//! hold a buffer several times over (its queue orders its own work). `free` refuses new work and
//! waits for queued work before releasing the memory.

use std::alloc::Layout;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, RwLock};

use crate::error::{Error, Result};
use crate::tensor::{lock, Tensor};

use super::traits::{BufferImpl, BufferTypeImpl};

static NEXT_BUFFER_ID: AtomicU64 = AtomicU64::new(1);

/// Alignment of tensors in host buffers (GGML's `TENSOR_ALIGNMENT`).
const HOST_TENSOR_ALIGN: usize = 32;

/// The holder id of host-side accesses that claim buffers like a job (synchronous copies);
/// streams are numbered from 1.
const HOST_HOLDER: u64 = 0;

/// What a buffer is for (`enum ggml_backend_buffer_usage`); a tag read by the scheduler.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum BufferUsage {
    /// No particular use (the default).
    #[default]
    Any = 0,
    /// Model weights.
    Weights = 1,
    /// Intermediate results of a graph.
    Compute = 2,
}

impl BufferUsage {
    fn from_u8(v: u8) -> BufferUsage {
        match v {
            1 => BufferUsage::Weights,
            2 => BufferUsage::Compute,
            _ => BufferUsage::Any,
        }
    }
}

handle!(
    /// A kind of memory (`ggml_backend_buffer_type_t`). Cheap to clone; compares by identity.
    BufferType: BufferTypeImpl
);

impl BufferType {
    /// Name (`ggml_backend_buft_name`).
    pub fn name(&self) -> String {
        self.0.name()
    }

    /// Alignment of tensor addresses (`ggml_backend_buft_get_alignment`).
    pub fn get_alignment(&self) -> usize {
        self.0.alignment()
    }

    /// Largest single buffer (`ggml_backend_buft_get_max_size`).
    pub fn get_max_size(&self) -> usize {
        self.0.max_size()
    }

    /// Bytes `t` needs in a buffer of this type (`ggml_backend_buft_get_alloc_size`).
    pub fn get_alloc_size(&self, t: &Tensor) -> usize {
        self.0.alloc_size(t).max(t.nbytes())
    }

    /// Whether buffers of this type are host memory in standard layout.
    pub fn is_host(&self) -> bool {
        self.0.is_host()
    }

    /// Whether this buffer type's implementation is a `T` (a device recognising its own
    /// buffer types, e.g. the CPU its repack type).
    pub fn is<T: BufferTypeImpl>(&self) -> bool {
        (*self.0).as_any().is::<T>()
    }

    /// Allocates a buffer of `size` bytes (`ggml_backend_buft_alloc_buffer`); size 0 gives an
    /// empty buffer without asking the implementation.
    pub fn alloc_buffer(&self, size: usize) -> Result<Buffer> {
        let imp: Box<dyn BufferImpl> = if size == 0 {
            Box::new(HostMemory::new(0)?)
        } else {
            self.0.alloc_buffer(size)?
        };
        if imp.size() < size {
            return Err(Error::AllocFailed(format!(
                "buffer type {} returned {} bytes for a request of {size}",
                self.name(),
                imp.size()
            )));
        }
        Ok(Buffer::from_parts(
            self.clone(),
            Kind::Plain(RwLock::new(Some(imp))),
            size,
            None,
        ))
    }
}

enum Kind {
    Plain(RwLock<Option<Box<dyn BufferImpl>>>),
    Multi(Vec<Buffer>),
}

#[derive(Default)]
struct State {
    /// Jobs queued (not yet finished) that touch this buffer.
    pending: usize,
    /// The stream whose jobs hold the buffer now, and how many of them (0: nobody holds it).
    holder: u64,
    holds: usize,
    freed: bool,
}

pub(crate) struct Inner {
    id: u64,
    buft: BufferType,
    size: usize,
    usage: AtomicU8,
    kind: Kind,
    name: Option<String>,
    state: Mutex<State>,
    cv: Condvar,
}

/// A block of device memory holding tensors (`ggml_backend_buffer_t`). Cheap to clone; clones
/// share the buffer. Tensors placed in a buffer keep it alive, so dropping the last handle while
/// tensors still use it does not free it; [`Buffer::free`] does, and later use is an `Err`.
#[derive(Clone)]
pub struct Buffer(pub(crate) Arc<Inner>);

impl PartialEq for Buffer {
    fn eq(&self, other: &Buffer) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}
impl Eq for Buffer {}

impl std::fmt::Debug for Buffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Buffer")
            .field("name", &self.name())
            .field("size", &self.0.size)
            .field("usage", &self.get_usage())
            .field("multi", &self.is_multi_buffer())
            .finish()
    }
}

impl Buffer {
    fn from_parts(buft: BufferType, kind: Kind, size: usize, name: Option<String>) -> Buffer {
        Buffer(Arc::new(Inner {
            id: NEXT_BUFFER_ID.fetch_add(1, Ordering::Relaxed),
            buft,
            size,
            usage: AtomicU8::new(BufferUsage::Any as u8),
            kind,
            name,
            state: Mutex::new(State::default()),
            cv: Condvar::new(),
        }))
    }

    /// A buffer over memory an implementation already holds (host pointers, mapped files).
    pub(crate) fn wrap(buft: BufferType, imp: Box<dyn BufferImpl>, name: &str) -> Buffer {
        let size = imp.size();
        Buffer::from_parts(
            buft,
            Kind::Plain(RwLock::new(Some(imp))),
            size,
            Some(name.to_string()),
        )
    }

    /// A multi-buffer owning `parts` (see [`super::multi_buffer_alloc_buffer`]).
    pub(crate) fn multi(parts: Vec<Buffer>) -> Buffer {
        let buft = parts[0].0.buft.clone();
        let size = parts.iter().map(|p| p.0.size).sum();
        Buffer::from_parts(buft, Kind::Multi(parts), size, None)
    }

    pub(crate) fn id(&self) -> u64 {
        self.0.id
    }

    /// Name of the buffer's type (`ggml_backend_buffer_name`).
    pub fn name(&self) -> String {
        self.0.name.clone().unwrap_or_else(|| self.0.buft.name())
    }

    /// Size in bytes (`ggml_backend_buffer_get_size`); a multi-buffer's is the sum of its parts.
    pub fn get_size(&self) -> usize {
        self.0.size
    }

    /// The buffer's type (`ggml_backend_buffer_get_type`).
    pub fn get_type(&self) -> BufferType {
        self.0.buft.clone()
    }

    /// Alignment of tensor addresses (`ggml_backend_buffer_get_alignment`).
    pub fn get_alignment(&self) -> usize {
        self.0.buft.get_alignment()
    }

    /// Largest buffer of this buffer's type (`ggml_backend_buffer_get_max_size`).
    pub fn get_max_size(&self) -> usize {
        self.0.buft.get_max_size()
    }

    /// Bytes `t` needs in a buffer of this type (`ggml_backend_buffer_get_alloc_size`).
    pub fn get_alloc_size(&self, t: &Tensor) -> usize {
        self.0.buft.get_alloc_size(t)
    }

    /// Whether the memory is host memory in standard layout (`ggml_backend_buffer_is_host`).
    pub fn is_host(&self) -> bool {
        self.0.buft.is_host()
    }

    /// Whether this buffer wraps several others (`ggml_backend_buffer_is_multi_buffer`).
    pub fn is_multi_buffer(&self) -> bool {
        matches!(self.0.kind, Kind::Multi(_))
    }

    /// The parts of a multi-buffer (empty for a plain buffer).
    pub fn parts(&self) -> &[Buffer] {
        match &self.0.kind {
            Kind::Multi(parts) => parts,
            Kind::Plain(_) => &[],
        }
    }

    /// Whether the memory may not be written (a read-only mapping, see
    /// [`super::Device::buffer_from_host_bytes`]).
    pub fn is_read_only(&self) -> bool {
        match &self.0.kind {
            Kind::Plain(imp) => imp
                .read()
                .ok()
                .and_then(|i| i.as_ref().map(|i| i.read_only()))
                .unwrap_or(false),
            Kind::Multi(parts) => parts.iter().any(Buffer::is_read_only),
        }
    }

    /// Whether [`Buffer::free`] was called.
    pub fn is_freed(&self) -> bool {
        lock(&self.0.state).freed
    }

    /// The host address of byte 0, for a live plain buffer of host-addressable memory
    /// (`ggml_backend_buffer_get_base`); `None` for device memory, multi-buffers, freed and
    /// empty buffers. Dereferencing it is up to the caller's `unsafe` code.
    pub fn get_base(&self) -> Option<NonNull<u8>> {
        if self.0.size == 0 {
            return None; // as GGML: an empty buffer has no base
        }
        match &self.0.kind {
            Kind::Plain(imp) => imp.read().ok()?.as_ref()?.host_ptr(),
            Kind::Multi(_) => None,
        }
    }

    /// The usage tag (`ggml_backend_buffer_get_usage`).
    pub fn get_usage(&self) -> BufferUsage {
        BufferUsage::from_u8(self.0.usage.load(Ordering::Acquire))
    }

    /// Sets the usage tag; a multi-buffer passes it to every part
    /// (`ggml_backend_buffer_set_usage`).
    pub fn set_usage(&self, usage: BufferUsage) {
        self.0.usage.store(usage as u8, Ordering::Release);
        for p in self.parts() {
            p.set_usage(usage);
        }
    }

    /// Sets the usage of every part of a multi-buffer (`ggml_backend_multi_buffer_set_usage`);
    /// `Err` for a plain buffer.
    pub fn multi_buffer_set_usage(&self, usage: BufferUsage) -> Result<()> {
        if !self.is_multi_buffer() {
            return Err(Error::invalid(format!(
                "multi_buffer_set_usage: buffer {} ({} bytes) is not a multi-buffer",
                self.name(),
                self.0.size
            )));
        }
        self.set_usage(usage);
        Ok(())
    }

    /// Sets every byte to `value`, after queued work on it (`ggml_backend_buffer_clear`); a
    /// multi-buffer clears every part.
    pub fn clear(&self, value: u8) -> Result<()> {
        match &self.0.kind {
            Kind::Multi(parts) => parts.iter().try_for_each(|p| p.clear(value)),
            Kind::Plain(_) if self.0.size == 0 => self.check_live("clear"),
            // SAFETY: the whole buffer is in bounds; `with_idle` excludes every other access.
            Kind::Plain(_) => {
                self.with_idle("clear", |imp| unsafe { imp.fill(0, self.0.size, value) })
            }
        }
    }

    /// Drops per-tensor state the implementation keeps (`ggml_backend_buffer_reset`).
    pub fn reset(&self) -> Result<()> {
        match &self.0.kind {
            Kind::Multi(parts) => parts.iter().try_for_each(Buffer::reset),
            Kind::Plain(_) => self.with_idle("reset", |imp| {
                imp.reset();
                Ok(())
            }),
        }
    }

    /// Frees the memory now (`ggml_backend_buffer_free`), after any queued work on it; a
    /// multi-buffer frees its parts. Tensors in it can no longer be read, written or computed
    /// (that is an `Err`, never a dangling access).
    pub fn free(self) {
        self.release();
    }

    pub(crate) fn release(&self) {
        match &self.0.kind {
            Kind::Multi(parts) => {
                lock(&self.0.state).freed = true;
                parts.iter().for_each(Buffer::release);
            }
            Kind::Plain(imp) => {
                let mut s = lock(&self.0.state);
                s.freed = true;
                while s.pending > 0 || s.holds > 0 {
                    s = wait(&self.0.cv, s);
                }
                drop(s);
                let mut imp = imp.write().unwrap_or_else(|e| e.into_inner());
                *imp = None;
            }
        }
    }

    fn check_live(&self, what: &str) -> Result<()> {
        if lock(&self.0.state).freed {
            return Err(self.freed_error(what));
        }
        Ok(())
    }

    fn freed_error(&self, what: &str) -> Error {
        Error::Freed(format!(
            "{what}: buffer {} ({} bytes) was freed",
            self.name(),
            self.0.size
        ))
    }

    /// Runs `f` on the implementation once no queued work touches the buffer, holding the lock
    /// so no job and no other host access starts meanwhile.
    fn with_idle<R>(&self, what: &str, f: impl FnOnce(&dyn BufferImpl) -> Result<R>) -> Result<R> {
        let Kind::Plain(imp) = &self.0.kind else {
            return Err(Error::invalid(format!(
                "{what}: buffer {} is a multi-buffer; its tensors live in its parts",
                self.name()
            )));
        };
        let mut s = lock(&self.0.state);
        while !s.freed && (s.pending > 0 || s.holds > 0) {
            s = wait(&self.0.cv, s);
        }
        if s.freed {
            return Err(self.freed_error(what));
        }
        let imp = imp.read().unwrap_or_else(|e| e.into_inner());
        let imp = imp.as_ref().ok_or_else(|| self.freed_error(what))?;
        let r = f(imp.as_ref());
        drop(s);
        r
    }

    fn check_bounds(&self, what: &str, offset: usize, len: usize) -> Result<()> {
        if offset.checked_add(len).is_none_or(|end| end > self.0.size) {
            return Err(Error::invalid(format!(
                "{what}: bytes {offset}..{} are outside buffer {} of {} bytes",
                offset.saturating_add(len),
                self.name(),
                self.0.size
            )));
        }
        Ok(())
    }

    /// Host write of `data` into `t` (placed at `at`) from byte `offset` of the tensor,
    /// ordered after queued work.
    pub(crate) fn host_write(
        &self,
        t: &Tensor,
        at: usize,
        offset: usize,
        data: &[u8],
    ) -> Result<()> {
        self.check_bounds("tensor_set", at + offset, data.len())?;
        // SAFETY: in bounds (checked above); `with_idle` excludes every other access.
        self.with_idle("tensor_set", |imp| unsafe {
            imp.set_tensor(t, at, offset, data)
        })
    }

    /// Host read of `t`'s bytes (placed at `at`) from byte `offset`, ordered after queued work.
    pub(crate) fn host_read(
        &self,
        t: &Tensor,
        at: usize,
        offset: usize,
        out: &mut [u8],
    ) -> Result<()> {
        self.check_bounds("tensor_get", at + offset, out.len())?;
        // SAFETY: in bounds (checked above); `with_idle` excludes every other access.
        self.with_idle("tensor_get", |imp| unsafe {
            imp.get_tensor(t, at, offset, out)
        })
    }

    /// Host fill of `size` bytes of `t` (placed at `at`) from byte `offset`, ordered after
    /// queued work.
    pub(crate) fn host_fill(
        &self,
        t: &Tensor,
        at: usize,
        offset: usize,
        size: usize,
        value: u8,
    ) -> Result<()> {
        self.check_bounds("tensor_memset", at + offset, size)?;
        // SAFETY: in bounds (checked above); `with_idle` excludes every other access.
        self.with_idle("tensor_memset", |imp| unsafe {
            imp.memset_tensor(t, at, offset, size, value)
        })
    }

    /// Calls the implementation's `init_tensor` for a tensor placed at `offset`.
    pub(crate) fn init_tensor(&self, t: &Tensor, offset: usize) -> Result<()> {
        self.with_idle("init_tensor", |imp| imp.init_tensor(t, offset))
    }

    /// A pointer to the implementation, for a job that has reserved this buffer (see
    /// [`ImplPtr`]); `None` for a multi-buffer and once freed.
    fn impl_ptr(&self) -> Option<ImplPtr> {
        match &self.0.kind {
            Kind::Plain(imp) => {
                let imp = imp.read().unwrap_or_else(|e| e.into_inner());
                imp.as_deref().map(|i| ImplPtr(NonNull::from(i)))
            }
            Kind::Multi(_) => None,
        }
    }
}

/// A buffer's implementation as a queued job sees it: taken after the job's [`Reservation`]
/// (which keeps the buffer from being freed until the reservation is dropped), used only while
/// the job runs (its reservation running makes the accesses exclusive). Taking it when the job
/// is queued, not when it runs, lets a job run without allocating.
#[derive(Clone, Copy)]
pub(crate) struct ImplPtr(NonNull<dyn BufferImpl>);

// SAFETY: the pointee is `Send + Sync` (`BufferImpl`'s bounds); the pointer is only
// dereferenced under `ImplPtr::get`'s contract.
unsafe impl Send for ImplPtr {}
// SAFETY: as above.
unsafe impl Sync for ImplPtr {}

impl ImplPtr {
    /// The implementation.
    ///
    /// # Safety
    /// The reservation this pointer was taken under must still be alive, and the reference must
    /// not outlive it.
    pub(crate) unsafe fn get<'a>(self) -> &'a dyn BufferImpl {
        // SAFETY: a live reservation keeps the buffer's implementation from being dropped
        // (`release` waits for it), so the pointer is valid (the caller's contract).
        unsafe { self.0.as_ref() }
    }
}

/// The host buffer type (aligned host memory in GGML's standard layout, named `"CPU"` as GGML
/// names host memory): what a context's own memory is made of, and what the CPU device
/// allocates. Every device that can read host memory can use it.
pub fn host_buffer_type() -> BufferType {
    static BUFT: OnceLock<BufferType> = OnceLock::new();
    BUFT.get_or_init(|| BufferType::new(HostBufferType)).clone()
}

struct HostBufferType;

impl BufferTypeImpl for HostBufferType {
    fn name(&self) -> String {
        "CPU".into()
    }
    fn alloc_buffer(&self, size: usize) -> Result<Box<dyn BufferImpl>> {
        Ok(Box::new(HostMemory::new(size)?))
    }
    fn alignment(&self) -> usize {
        HOST_TENSOR_ALIGN
    }
    fn is_host(&self) -> bool {
        true
    }
}

fn wait<'a>(cv: &Condvar, g: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
    cv.wait(g).unwrap_or_else(|e| e.into_inner())
}

/// A claim by one queued job on the buffers it touches. Taken when the job is queued (so host
/// access and `free` wait for it), made exclusive while the job runs, released when it ends.
pub(crate) struct Reservation {
    buffers: Arc<[Buffer]>,
    running: bool,
}

impl Reservation {
    /// Claims `buffers` (deduplicated and sorted by the caller via [`buffer_set`]); `Err` if any
    /// was freed.
    pub(crate) fn new(buffers: Arc<[Buffer]>, what: &str) -> Result<Reservation> {
        for (i, b) in buffers.iter().enumerate() {
            let mut s = lock(&b.0.state);
            if s.freed {
                drop(s);
                for earlier in &buffers[..i] {
                    let mut s = lock(&earlier.0.state);
                    s.pending -= 1;
                    earlier.0.cv.notify_all();
                }
                return Err(b.freed_error(what));
            }
            s.pending += 1;
        }
        Ok(Reservation {
            buffers,
            running: false,
        })
    }

    /// Takes a hold on every buffer for stream `holder` if no other stream holds any of them;
    /// `false` (and nothing held) otherwise.
    pub(crate) fn try_start(&mut self, holder: u64) -> bool {
        for (i, b) in self.buffers.iter().enumerate() {
            let mut s = lock(&b.0.state);
            if s.holds > 0 && s.holder != holder {
                drop(s);
                self.buffers[..i].iter().for_each(unhold);
                return false;
            }
            s.holder = holder;
            s.holds += 1;
        }
        self.running = true;
        true
    }

    /// Waits until no other stream holds these buffers, then holds them for `holder`.
    pub(crate) fn start(&mut self, holder: u64) {
        for b in self.buffers.iter() {
            let mut s = lock(&b.0.state);
            while s.holds > 0 && s.holder != holder {
                s = wait(&b.0.cv, s);
            }
            s.holder = holder;
            s.holds += 1;
        }
        self.running = true;
    }

    /// The buffers, sorted by id.
    pub(crate) fn buffers(&self) -> &Arc<[Buffer]> {
        &self.buffers
    }

    /// The implementation of reserved buffer `i` (in id order), valid while this reservation
    /// lives; `Err` naming `what` for a multi-buffer.
    pub(crate) fn impl_ptr(&self, i: usize, what: &str) -> Result<ImplPtr> {
        self.buffers[i].impl_ptr().ok_or_else(|| {
            Error::invalid(format!(
                "{what}: buffer {} is a multi-buffer; its tensors live in its parts",
                self.buffers[i].name()
            ))
        })
    }

    /// A running claim by the host on `buffers` (sorted by id), taken once none has queued or
    /// running work, all at the same moment: a synchronous operation on several buffers,
    /// ordered after the work queued on them. Waits without holding anything, so no job can
    /// wait for it.
    pub(crate) fn claim_idle(buffers: Arc<[Buffer]>, what: &str) -> Result<Reservation> {
        loop {
            let mut guards = Vec::with_capacity(buffers.len());
            let mut busy = None;
            for b in buffers.iter() {
                let s = lock(&b.0.state);
                if s.freed {
                    return Err(b.freed_error(what));
                }
                if s.pending > 0 || s.holds > 0 {
                    busy = Some((b, s));
                    break;
                }
                guards.push(s);
            }
            let Some((b, s)) = busy else {
                for s in guards.iter_mut() {
                    s.pending += 1;
                    s.holder = HOST_HOLDER;
                    s.holds = 1;
                }
                break;
            };
            drop(guards);
            drop(wait(&b.0.cv, s));
        }
        Ok(Reservation {
            buffers,
            running: true,
        })
    }
}

/// Gives back one hold on `b` (taken by [`Reservation::try_start`] or [`Reservation::start`]).
fn unhold(b: &Buffer) {
    let mut s = lock(&b.0.state);
    s.holds -= 1;
    drop(s);
    b.0.cv.notify_all();
}

impl Drop for Reservation {
    fn drop(&mut self) {
        for b in self.buffers.iter() {
            let mut s = lock(&b.0.state);
            s.pending -= 1;
            if self.running {
                s.holds -= 1;
            }
            drop(s);
            b.0.cv.notify_all();
        }
    }
}

/// The distinct buffers holding `tensors`, sorted by id; `Err` naming the first unallocated one.
pub(crate) fn buffer_set<'a>(
    tensors: impl IntoIterator<Item = &'a Tensor>,
    what: &str,
) -> Result<Arc<[Buffer]>> {
    let mut v: Vec<Buffer> = Vec::new();
    for t in tensors {
        let b = t.require_binding(what)?.buffer;
        if !v.contains(&b) {
            v.push(b);
        }
    }
    v.sort_by_key(Buffer::id);
    Ok(v.into())
}

/// Host memory allocated with a given alignment: the storage of CPU buffers, and a ready-made
/// [`BufferImpl`] for any backend whose device computes on host memory.
///
/// Its [`BufferImpl`] accessors are `unsafe`: a direct caller must keep each access in bounds
/// and exclusive (a [`Buffer`] does both), so safe code cannot reach past the end or race:
///
/// ```compile_fail
/// use ggml::backend::{BufferImpl, HostMemory};
/// let m = HostMemory::new(4).unwrap();
/// m.write(100, &[1]).unwrap(); // error: call to unsafe function
/// ```
pub struct HostMemory {
    ptr: NonNull<u8>,
    size: usize,
    layout: Option<Layout>,
}

// SAFETY: HostMemory owns its allocation; the Buffer wrapper serialises every access to it.
unsafe impl Send for HostMemory {}
// SAFETY: shared references only hand out the address; every access to the bytes is an `unsafe`
// method or pointer use whose caller must exclude concurrent accesses.
unsafe impl Sync for HostMemory {}

/// Alignment of [`HostMemory`] allocations (a cache line; GGML's CPU buffers need 32).
pub const HOST_ALIGN: usize = 64;

impl HostMemory {
    /// Allocates `size` zeroed bytes aligned to [`HOST_ALIGN`]; `Err` if the system refuses.
    pub fn new(size: usize) -> Result<HostMemory> {
        if size == 0 {
            return Ok(HostMemory {
                ptr: NonNull::dangling(),
                size: 0,
                layout: None,
            });
        }
        let layout = Layout::from_size_align(size, HOST_ALIGN)
            .map_err(|_| Error::AllocFailed(format!("host buffer of {size} bytes is too large")))?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(ptr).ok_or_else(|| {
            Error::AllocFailed(format!("the system refused a host buffer of {size} bytes"))
        })?;
        Ok(HostMemory {
            ptr,
            size,
            layout: Some(layout),
        })
    }

    /// Memory someone else owns (a mapped file, a caller's allocation); never freed by us.
    ///
    /// # Safety
    /// `ptr` must be valid for reads and writes of `size` bytes while the result lives, and
    /// nothing else may access those bytes meanwhile (see [`BufferImpl`]'s contract).
    pub unsafe fn borrowed(ptr: NonNull<u8>, size: usize) -> HostMemory {
        HostMemory {
            ptr,
            size,
            layout: None,
        }
    }
}

impl Drop for HostMemory {
    fn drop(&mut self) {
        if let Some(layout) = self.layout {
            // SAFETY: allocated in `new` with this layout and not freed before.
            unsafe { std::alloc::dealloc(self.ptr.as_ptr(), layout) }
        }
    }
}

// SAFETY: `ptr` addresses `size` bytes that this value owns (allocated in `new`) or that the
// caller of `borrowed` vouched for, for as long as it lives.
unsafe impl BufferImpl for HostMemory {
    fn size(&self) -> usize {
        self.size
    }

    fn host_ptr(&self) -> Option<NonNull<u8>> {
        Some(self.ptr)
    }

    unsafe fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        debug_assert!(offset + data.len() <= self.size);
        // SAFETY: in bounds and not concurrent with other accesses (the caller's contract).
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.as_ptr().add(offset), data.len())
        };
        Ok(())
    }

    unsafe fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        debug_assert!(offset + out.len() <= self.size);
        // SAFETY: in bounds and not concurrent with writes (the caller's contract).
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.ptr.as_ptr().add(offset),
                out.as_mut_ptr(),
                out.len(),
            )
        };
        Ok(())
    }

    unsafe fn fill(&self, offset: usize, size: usize, value: u8) -> Result<()> {
        debug_assert!(offset + size <= self.size);
        // SAFETY: in bounds and not concurrent with other accesses (the caller's contract).
        unsafe { std::ptr::write_bytes(self.ptr.as_ptr().add(offset), value, size) };
        Ok(())
    }
}

/// Host memory that someone else owns and that must not be written: wraps a device's
/// host-pointer buffer and keeps the owner (a mapped file) alive as long as the buffer.
pub(crate) struct ReadOnlyHost {
    pub(crate) inner: Box<dyn BufferImpl>,
    pub(crate) _owner: Arc<dyn std::any::Any + Send + Sync>,
}

impl ReadOnlyHost {
    fn refuse(&self) -> Result<()> {
        Err(Error::unsupported(
            "this buffer is read-only (it maps a file); load with a copy to modify its tensors",
        ))
    }
}

// SAFETY: the memory is `inner`'s, which upholds the contract; this wrapper only refuses writes.
unsafe impl BufferImpl for ReadOnlyHost {
    fn size(&self) -> usize {
        self.inner.size()
    }
    fn host_ptr(&self) -> Option<NonNull<u8>> {
        self.inner.host_ptr()
    }
    unsafe fn write(&self, _offset: usize, _data: &[u8]) -> Result<()> {
        self.refuse()
    }
    unsafe fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        // SAFETY: forwarded from this method's contract.
        unsafe { self.inner.read(offset, out) }
    }
    unsafe fn fill(&self, _offset: usize, _size: usize, _value: u8) -> Result<()> {
        self.refuse()
    }
    fn init_tensor(&self, t: &Tensor, offset: usize) -> Result<()> {
        self.inner.init_tensor(t, offset)
    }
    fn read_only(&self) -> bool {
        true
    }
}
