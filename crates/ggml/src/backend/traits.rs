//! The traits a backend implements. A crate outside `ggml` implements these to add a device;
//! the handles in this module ([`super::Buffer`], [`super::Backend`], …) wrap them and add what
//! every backend shares: error checking, usage tags, a real asynchronous stream with its own
//! worker thread, events, and the ordering that keeps asynchronous work sound.
//!
//! Memory need not be host memory: every job hands the engine the [`Place`] of each tensor it
//! touches — the buffer's own implementation (downcast it with `<dyn BufferImpl>::downcast_ref`
//! to reach the device's handle) and the byte offset in it — resolved when the job was queued.
//! A device with a queue of its own overrides the asynchronous hooks of [`BackendImpl`]; a
//! simple device needs none of them.

use std::any::Any;
use std::ptr::NonNull;

use crate::error::Result;
use crate::tensor::Tensor;

use super::{BufferType, DeviceCaps, DeviceType, PlacedGraph};

/// Gives a concrete implementation as [`Any`], so a backend can reach its own type behind a
/// `dyn` trait object. Implemented for every type; use it through
/// `<dyn BufferImpl>::downcast_ref` or `<dyn EventImpl>::downcast_ref`.
pub trait AsAny: Any {
    /// `self` as [`Any`].
    fn as_any(&self) -> &dyn Any;
}

impl<T: Any> AsAny for T {
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A kind of memory a device can allocate (`ggml_backend_buffer_type_i`). A device recognises
/// its own buffer types through [`AsAny`] (see [`super::BufferType::is`]).
pub trait BufferTypeImpl: AsAny + Send + Sync + 'static {
    /// Short name, e.g. `"CPU"`.
    fn name(&self) -> String;
    /// Allocates `size` bytes (never called with 0).
    fn alloc_buffer(&self, size: usize) -> Result<Box<dyn BufferImpl>>;
    /// Alignment of tensor addresses in such buffers, a power of two.
    fn alignment(&self) -> usize;
    /// Largest single allocation; larger requests are split by callers that can.
    fn max_size(&self) -> usize {
        usize::MAX
    }
    /// Bytes a tensor needs in such a buffer (at least its `nbytes`).
    fn alloc_size(&self, t: &Tensor) -> usize {
        t.nbytes()
    }
    /// Whether the memory is host memory in GGML's standard layout.
    fn is_host(&self) -> bool {
        false
    }
}

/// One allocation of a buffer type (`ggml_backend_buffer_i`). Offsets are bytes from the start
/// of the buffer. The [`super::Buffer`] wrapper guarantees that no two calls that touch the
/// memory overlap in time, and that nothing touches it after the implementation is dropped.
///
/// # Safety
/// Backends that compute on host memory (the CPU one) read and write through
/// [`BufferImpl::host_ptr`] without further checks. An implementation that returns `Some(p)`
/// promises that `p` is valid for reads and writes of [`BufferImpl::size`] bytes for as long as
/// the implementation lives, and that nothing accesses those bytes except through this
/// implementation (its methods and that pointer).
pub unsafe trait BufferImpl: AsAny + Send + Sync + 'static {
    /// Size in bytes.
    fn size(&self) -> usize;
    /// The address of byte 0 when the memory is host-addressable, else `None`.
    fn host_ptr(&self) -> Option<NonNull<u8>>;
    /// Copies `data` into the buffer at `offset`.
    ///
    /// # Safety
    /// `offset + data.len() <= self.size()`, and no other access to the buffer's memory (a
    /// method call or an access through [`BufferImpl::host_ptr`]) runs at the same time.
    unsafe fn write(&self, offset: usize, data: &[u8]) -> Result<()>;
    /// Copies bytes at `offset` into `out`.
    ///
    /// # Safety
    /// `offset + out.len() <= self.size()`, and no write to the buffer's memory runs at the
    /// same time.
    unsafe fn read(&self, offset: usize, out: &mut [u8]) -> Result<()>;
    /// Sets `size` bytes at `offset` to `value`.
    ///
    /// # Safety
    /// As for [`BufferImpl::write`], with `offset + size <= self.size()`.
    unsafe fn fill(&self, offset: usize, size: usize, value: u8) -> Result<()>;
    /// Prepares a tensor just placed at `offset` (`init_tensor`); most buffers need nothing.
    fn init_tensor(&self, _t: &Tensor, _offset: usize) -> Result<()> {
        Ok(())
    }
    /// Host write of `data` into tensor `t`, whose bytes start at `at` in this buffer, from
    /// byte `offset` of the tensor (`set_tensor`). The default writes the bytes at
    /// `at + offset`; a buffer that keeps its tensors' bytes in its own layout (a meta
    /// device's, which splits each tensor over its members) overrides it.
    ///
    /// # Safety
    /// As for [`BufferImpl::write`], with `at + offset + data.len() <= self.size()`.
    unsafe fn set_tensor(&self, _t: &Tensor, at: usize, offset: usize, data: &[u8]) -> Result<()> {
        // SAFETY: forwarded from this method's contract.
        unsafe { self.write(at + offset, data) }
    }
    /// Host read of tensor `t`'s bytes from byte `offset` into `out` (`get_tensor`); see
    /// [`BufferImpl::set_tensor`]. The default reads the bytes at `at + offset`.
    ///
    /// # Safety
    /// As for [`BufferImpl::read`], with `at + offset + out.len() <= self.size()`.
    unsafe fn get_tensor(
        &self,
        _t: &Tensor,
        at: usize,
        offset: usize,
        out: &mut [u8],
    ) -> Result<()> {
        // SAFETY: forwarded from this method's contract.
        unsafe { self.read(at + offset, out) }
    }
    /// Sets `size` bytes of tensor `t` from byte `offset` to `value` (`memset_tensor`); see
    /// [`BufferImpl::set_tensor`]. The default fills the bytes at `at + offset`.
    ///
    /// # Safety
    /// As for [`BufferImpl::fill`], with `at + offset + size <= self.size()`.
    unsafe fn memset_tensor(
        &self,
        _t: &Tensor,
        at: usize,
        offset: usize,
        size: usize,
        value: u8,
    ) -> Result<()> {
        // SAFETY: forwarded from this method's contract.
        unsafe { self.fill(at + offset, size, value) }
    }
    /// Drops per-tensor state (`reset`); most buffers have none.
    fn reset(&self) {}
    /// Whether the memory must never be written (e.g. a file mapped read-only): writes are
    /// refused, and no graph may compute into it.
    fn read_only(&self) -> bool {
        false
    }
    /// Copies `size` bytes from `src` at `src_offset` into this buffer at `offset` without
    /// going through host memory, when the two buffers' devices can (`cpy_tensor`); `Ok(false)`
    /// when they cannot, and the caller copies through host memory instead. `src` may be a
    /// buffer of any device: downcast it to see whether it is one of yours. The default cannot.
    ///
    /// # Safety
    /// Both ranges lie in their buffers; `src` is another buffer than `self`; no other access to
    /// either buffer's memory runs at the same time (reads of `src` excepted).
    unsafe fn cpy_tensor(
        &self,
        _src: &dyn BufferImpl,
        _src_offset: usize,
        _offset: usize,
        _size: usize,
    ) -> Result<bool> {
        Ok(false)
    }
}

impl dyn BufferImpl {
    /// The implementation as its concrete type `T`, if it is one (e.g. a backend finding its
    /// own buffers among a graph's [`Place`]s).
    pub fn downcast_ref<T: BufferImpl>(&self) -> Option<&T> {
        self.as_any().downcast_ref::<T>()
    }
}

/// Where some bytes a job touches live: a buffer's implementation, a byte offset in it and a
/// length, with `offset + size <= buffer.size()` (checked when the job was queued). Only the
/// library makes places; the job that receives one holds the buffer reserved while it runs.
#[derive(Clone, Copy)]
pub struct Place<'a> {
    buffer: &'a dyn BufferImpl,
    offset: usize,
    size: usize,
}

impl std::fmt::Debug for Place<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Place")
            .field("offset", &self.offset)
            .field("size", &self.size)
            .field("host", &self.buffer.host_ptr().is_some())
            .finish()
    }
}

impl<'a> Place<'a> {
    /// A place the caller has checked: `offset + size <= buffer.size()`.
    pub(crate) fn new(buffer: &'a dyn BufferImpl, offset: usize, size: usize) -> Place<'a> {
        debug_assert!(offset + size <= buffer.size());
        Place {
            buffer,
            offset,
            size,
        }
    }

    /// The buffer's implementation (downcast it with `<dyn BufferImpl>::downcast_ref`).
    pub fn buffer(&self) -> &'a dyn BufferImpl {
        self.buffer
    }

    /// Byte offset from the start of the buffer.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Number of bytes (a tensor's `nbytes` for graph nodes).
    pub fn size(&self) -> usize {
        self.size
    }

    /// The place of `size` bytes starting `back` bytes before this one in the same buffer
    /// (what a view's bytes are a part of, say); `None` unless it lies inside the buffer.
    pub fn before(&self, back: usize, size: usize) -> Option<Place<'a>> {
        let offset = self.offset.checked_sub(back)?;
        (offset.checked_add(size)? <= self.buffer.size()).then_some(Place {
            buffer: self.buffer,
            offset,
            size,
        })
    }

    /// The buffer as `T` and the offset, when the buffer is a `T`.
    pub fn downcast<T: BufferImpl>(&self) -> Option<(&'a T, usize)> {
        self.buffer.downcast_ref::<T>().map(|b| (b, self.offset))
    }

    /// The host address of the first byte, when the memory is host-addressable.
    pub fn host_ptr(&self) -> Option<NonNull<u8>> {
        let base = self.buffer.host_ptr()?;
        // SAFETY: `offset <= size() of the buffer` (the place's invariant), so the address is
        // within the allocation or one past its end.
        Some(unsafe { base.add(self.offset) })
    }
}

/// A device (`ggml_backend_device_i`).
pub trait DeviceImpl: Send + Sync + 'static {
    /// Short id, e.g. `"CPU"`, `"Vulkan0"`.
    fn name(&self) -> String;
    /// Longer description, e.g. the processor's model name.
    fn description(&self) -> String;
    /// (free, total) bytes of memory; 0 = unknown.
    fn memory(&self) -> (usize, usize);
    /// The kind of device.
    fn dev_type(&self) -> DeviceType;
    /// A stable id such as a PCI bus id, if the device has one.
    fn device_id(&self) -> Option<String> {
        None
    }
    /// The device's capabilities. The default ([`DeviceCaps::default`]) has asynchronous
    /// compute and events (every stream of this library has them, through its worker thread)
    /// and neither a host buffer type nor host-pointer buffers.
    fn caps(&self) -> DeviceCaps {
        DeviceCaps::default()
    }
    /// Creates the compute engine of a new stream on this device.
    fn init_backend(&self, params: Option<&str>) -> Result<Box<dyn BackendImpl>>;
    /// The device's preferred buffer type. Must return the same buffer type every time.
    fn buffer_type(&self) -> BufferType;
    /// A pinned host buffer type, if the device has one.
    fn host_buffer_type(&self) -> Option<BufferType> {
        None
    }
    /// The device's extra buffer types (`ggml_backend_dev_get_extra_bufts`): memory in a
    /// layout of the device's own that some ops compute on faster (the CPU's repack type).
    /// The default has none.
    fn extra_buffer_types(&self) -> Vec<BufferType> {
        Vec::new()
    }
    /// Wraps `size` bytes of host memory at `ptr` (see [`super::Device::buffer_from_host_ptr`]).
    /// Only called when [`DeviceCaps::buffer_from_host_ptr`] is set. The implementation
    /// must not write the memory on its own (only through `write`/`fill` when asked): a caller
    /// may wrap read-only memory and refuse every write (see
    /// [`super::Device::buffer_from_host_bytes`]).
    ///
    /// # Safety
    /// `ptr` must be valid for reads of `size` bytes — and for writes, unless the caller never
    /// lets a write reach the buffer — for as long as the returned buffer lives.
    unsafe fn buffer_from_host_ptr(
        &self,
        _ptr: NonNull<u8>,
        _size: usize,
        _max_tensor_size: usize,
    ) -> Result<Box<dyn BufferImpl>> {
        Err(crate::Error::unsupported(format!(
            "device {} cannot wrap host memory",
            self.name()
        )))
    }
    /// Whether a backend of this device can compute `op` as it is (types, layouts, buffers).
    fn supports_op(&self, op: &Tensor) -> bool;
    /// Whether a backend of this device can read tensors in buffers of `buft`.
    fn supports_buft(&self, buft: &BufferType) -> bool;
    /// Whether it is worth moving weights to this device to compute `op` here.
    fn offload_op(&self, _op: &Tensor) -> bool {
        false
    }
    /// `(name, value)` pairs of features the device was built with or detected.
    fn features(&self) -> Vec<(String, String)> {
        Vec::new()
    }
    /// Sums `tensors` in place across devices (`ggml_backend_comm_allreduce_tensor`): one
    /// tensor per stream of `backends` (the same shape and type, each in memory of its
    /// stream's device), every one holding the total afterwards. Queue the work on the streams
    /// and return at once; `Ok(false)` when the device has no all-reduce of its own, and the
    /// caller (a meta device, whose first member is asked) uses a butterfly of copies and
    /// adds instead. The default has none.
    fn all_reduce(&self, _backends: &[super::Backend], _tensors: &[Tensor]) -> Result<bool> {
        Ok(false)
    }
}

/// A device's own marker in its queue (`ggml_backend_event_t` of a device with events), made
/// by [`BackendImpl::event_record`]. An [`super::Event`] keeps it and waits for it.
pub trait EventImpl: AsAny + Send + Sync + 'static {
    /// Blocks until the device has passed the marker; `Err` if the device failed on the way.
    fn synchronize(&self) -> Result<()>;
    /// Whether the device has passed the marker (never blocks).
    fn is_reached(&self) -> bool;
}

impl dyn EventImpl {
    /// The marker as its concrete type `T`, if it is one (a backend recognising its own).
    pub fn downcast_ref<T: EventImpl>(&self) -> Option<&T> {
        self.as_any().downcast_ref::<T>()
    }
}

/// `Err` naming `what` unless a transfer of `len` bytes matches `place`'s size.
fn check_len(what: &str, len: usize, place: &Place<'_>) -> Result<()> {
    if len != place.size() {
        return Err(crate::Error::invalid(format!(
            "{what}: {len} bytes for a place of {}",
            place.size()
        )));
    }
    Ok(())
}

/// The plan of [`BackendImpl::graph_plan_create`]'s default: nothing prepared.
struct NoPlan;

/// The compute engine of one stream (`ggml_backend_i`). The stream calls it one job at a time,
/// in order: on the stream's worker thread, or on the thread of a caller that waits for its job
/// at once (`graph_compute` on an idle stream), so it must not rely on the calling thread. Each job's buffers are reserved for this stream
/// from before the call until the job's work is done: until the call returns, or — for an
/// engine with a queue of its own ([`BackendImpl::has_own_queue`]) — until the next
/// [`BackendImpl::synchronize`] returns. So a simple engine is plain synchronous code that
/// overrides nothing but [`BackendImpl::graph_compute`], and a device with its own queue
/// overrides the asynchronous hooks (`*_async`, `synchronize`, `event_*`) and returns from
/// them as soon as the work is queued.
pub trait BackendImpl: Send + 'static {
    /// Short name, e.g. `"CPU"`.
    fn name(&self) -> String;

    /// Computes the graph's nodes in order (`graph_compute`). Every node and operand has a
    /// [`Place`] in a buffer of a type the device supports; nodes without
    /// [`crate::tensor::flags::COMPUTE`] and empty ops may be skipped.
    fn graph_compute(&mut self, graph: &PlacedGraph<'_>) -> Result<()>;

    /// Sets the number of threads used to compute; `Err` if the backend has no such setting.
    fn set_n_threads(&mut self, n: usize) -> Result<()> {
        Err(crate::Error::unsupported(format!(
            "backend {} has no thread setting (asked for {n})",
            self.name()
        )))
    }

    /// Prepares what repeated computations of `nodes` need, without touching memory (the
    /// places come with each [`BackendImpl::graph_plan_compute`]). The default prepares
    /// nothing and computes with [`BackendImpl::graph_compute`].
    fn graph_plan_create(&mut self, _nodes: &[Tensor]) -> Result<Box<dyn Any + Send>> {
        Ok(Box::new(NoPlan))
    }

    /// Runs a plan made by [`BackendImpl::graph_plan_create`] over `graph`: the plan's nodes,
    /// resolved to their places when this computation was queued.
    fn graph_plan_compute(
        &mut self,
        plan: &mut (dyn Any + Send),
        graph: &PlacedGraph<'_>,
    ) -> Result<()> {
        if plan.downcast_ref::<NoPlan>().is_none() {
            return Err(crate::Error::invalid(format!(
                "graph_plan_compute: the plan was not made by backend {}",
                self.name()
            )));
        }
        self.graph_compute(graph)
    }

    /// Whether the hooks hand work to a queue of the device's own and may return before it is
    /// done (a GPU stream, a remote server). The stream then keeps every job's buffers
    /// reserved until [`BackendImpl::synchronize`] returns, and calls it before it blocks. Read
    /// once, when the stream starts. The default: no, every hook finishes its work before it
    /// returns.
    fn has_own_queue(&self) -> bool {
        false
    }

    /// Whether the stream's thread, between jobs, and a caller waiting for the stream may
    /// spin for a moment (a millisecond; the caller 100 µs, or near the expected end of a
    /// graph job that repeats) before they sleep, so that work submitted one job after
    /// another, and its completion, are seen without a thread wake-up (tens of
    /// microseconds, more in a virtual machine). Say yes only where the device's work leaves
    /// processor cores free for both. Read after every job. The default: no.
    fn spins_when_idle(&self) -> bool {
        false
    }

    /// Waits for all work handed to the device's queue (`synchronize`); `Err` if any of it
    /// failed. The default has nothing to wait for.
    fn synchronize(&mut self) -> Result<()> {
        Ok(())
    }

    /// Writes `data` (`dst.size()` bytes) to `dst` (`set_tensor_async`). The bytes stay
    /// allocated and unchanged until the next [`BackendImpl::synchronize`] returns, so a queue
    /// may read them later. The default synchronizes, then writes through the buffer.
    fn set_tensor_async(&mut self, dst: Place<'_>, data: &[u8]) -> Result<()> {
        self.synchronize()?;
        check_len("set_tensor_async", data.len(), &dst)?;
        // SAFETY: the place lies in its buffer (its invariant) and `data` has its size; the
        // job's reservation excludes other streams and the host, and `synchronize` above
        // finished this stream's own queued work.
        unsafe { dst.buffer().write(dst.offset(), data) }
    }

    /// Reads `src` (`src.size()` bytes) into `out` (`get_tensor_async`). `out` stays allocated
    /// until the next [`BackendImpl::synchronize`] returns, and is read only after it, so a
    /// queue may fill it later. The default synchronizes, then reads through the buffer.
    fn get_tensor_async(&mut self, src: Place<'_>, out: &mut [u8]) -> Result<()> {
        self.synchronize()?;
        check_len("get_tensor_async", out.len(), &src)?;
        // SAFETY: as for `set_tensor_async`.
        unsafe { src.buffer().read(src.offset(), out) }
    }

    /// Copies `src` to `dst` (same size; `dst` is on this engine's device, `src` may be on any)
    /// on the device's queue (`cpy_tensor_async`); `Ok(false)` when this engine cannot, and the
    /// stream synchronizes and copies through [`BufferImpl::cpy_tensor`] or host memory. The
    /// default cannot.
    fn cpy_tensor_async(&mut self, _src: Place<'_>, _dst: Place<'_>) -> Result<bool> {
        Ok(false)
    }

    /// Puts a marker of the device's own in its queue after the work queued so far
    /// (`event_record`); `Ok(None)` when the device has none, and the stream synchronizes and
    /// signals the event itself. Only called when [`BackendImpl::has_own_queue`] is true. The
    /// default has none.
    fn event_record(&mut self) -> Result<Option<std::sync::Arc<dyn EventImpl>>> {
        Ok(None)
    }

    /// Makes the device's queue wait for `event` (recorded by any stream, of any device) before
    /// later work, without blocking (`event_wait`); `Ok(false)` when it cannot, and the stream
    /// synchronizes and blocks until the event is reached. Only called when
    /// [`BackendImpl::has_own_queue`] is true. The default cannot.
    fn event_wait(&mut self, _event: &dyn EventImpl) -> Result<bool> {
        Ok(false)
    }
}

/// A set of devices (`ggml_backend_reg_i`).
pub trait RegistryImpl: Send + Sync + 'static {
    /// The registry's name, e.g. `"CPU"`.
    fn name(&self) -> String;
    /// Its devices.
    fn devices(&self) -> Vec<super::Device>;
    /// `(name, value)` feature pairs (`ggml_backend_get_features`).
    fn features(&self) -> Vec<(String, String)> {
        Vec::new()
    }
}
