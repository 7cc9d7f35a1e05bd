//! A stream's engine: work goes to the device's queue and is tracked by submission index; graph
//! computations are one command buffer each.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use ggml::backend::{BackendImpl, EventImpl, Place, PlacedGraph};
use ggml::{Error, Result};

use crate::buffer::{self, StagedRead, WgpuBuffer};
use crate::Gpu;

/// A read queued by `get_tensor_async`, finished by the next `synchronize`.
struct PendingRead {
    read: StagedRead,
    out: *mut u8,
    len: usize,
}

// SAFETY: `out` is only written by `Engine::synchronize`, on the thread that owns the engine;
// the stream keeps the bytes it points to allocated and untouched until that call returns (the
// contract of `BackendImpl::get_tensor_async`).
unsafe impl Send for PendingRead {}

/// The engine of one stream on a device.
pub(crate) struct Engine {
    gpu: Arc<Gpu>,
    /// The last submission this stream made.
    last: Option<wgpu::SubmissionIndex>,
    reads: Vec<PendingRead>,
    /// The index-fault slots of the graphs submitted since the last `synchronize`.
    faults: Vec<crate::ops::FaultCheck>,
}

impl Engine {
    pub(crate) fn new(gpu: Arc<Gpu>) -> Engine {
        Engine {
            gpu,
            last: None,
            reads: Vec::new(),
            faults: Vec::new(),
        }
    }

    /// The buffer of `place` when it is one of this device's, else `Err` naming `what`.
    fn own<'a>(&self, place: &Place<'a>, what: &str) -> Result<&'a WgpuBuffer> {
        place
            .downcast::<WgpuBuffer>()
            .filter(|(b, _)| b.gpu.id == self.gpu.id)
            .map(|(b, _)| b)
            .ok_or_else(|| {
                Error::unsupported(format!(
                    "{} {what}: the bytes are not in this device's memory",
                    self.gpu.name
                ))
            })
    }

    /// Makes everything queued so far (staged writes included) a submission, and returns it.
    fn flush(&mut self) -> wgpu::SubmissionIndex {
        let index = self.gpu.queue.submit(std::iter::empty());
        self.last = Some(index.clone());
        index
    }
}

impl BackendImpl for Engine {
    fn name(&self) -> String {
        self.gpu.name.clone()
    }

    fn graph_compute(&mut self, graph: &PlacedGraph<'_>) -> Result<()> {
        if let Some((index, faults)) = crate::ops::record(&self.gpu, graph)? {
            self.last = Some(index);
            self.faults.extend(faults);
        }
        self.gpu.peek_error("graph_compute")
    }

    fn has_own_queue(&self) -> bool {
        true
    }

    fn synchronize(&mut self) -> Result<()> {
        let waited = self.gpu.wait(self.last.take(), "synchronize");
        let mut first = waited.err();
        for r in std::mem::take(&mut self.reads) {
            // SAFETY: the stream keeps `out` (`len` bytes) allocated and unread until this call
            // returns (see `PendingRead`).
            let out = unsafe { std::slice::from_raw_parts_mut(r.out, r.len) };
            if let Err(e) = r.read.finish(&self.gpu, out) {
                first.get_or_insert(e);
            }
        }
        for f in std::mem::take(&mut self.faults) {
            if let Err(e) = f.finish(&self.gpu) {
                first.get_or_insert(e);
            }
        }
        if let Err(e) = self.gpu.take_error("synchronize") {
            first.get_or_insert(e);
        }
        first.map_or(Ok(()), Err)
    }

    fn set_tensor_async(&mut self, dst: Place<'_>, data: &[u8]) -> Result<()> {
        let b = self.own(&dst, "set_tensor_async")?;
        buffer::write_bytes(&self.gpu, &b.buf, dst.offset(), data)
    }

    fn get_tensor_async(&mut self, src: Place<'_>, out: &mut [u8]) -> Result<()> {
        let b = self.own(&src, "get_tensor_async")?;
        if out.len() != src.size() {
            return Err(Error::invalid(format!(
                "{} get_tensor_async: {} bytes for a place of {}",
                self.gpu.name,
                out.len(),
                src.size()
            )));
        }
        if out.is_empty() {
            return Ok(());
        }
        let read = buffer::stage_read(&self.gpu, &b.buf, src.offset(), out.len());
        self.reads.push(PendingRead {
            read,
            out: out.as_mut_ptr(),
            len: out.len(),
        });
        Ok(())
    }

    fn cpy_tensor_async(&mut self, src: Place<'_>, dst: Place<'_>) -> Result<bool> {
        let (Ok(s), Ok(d)) = (self.own(&src, "copy"), self.own(&dst, "copy")) else {
            return Ok(false);
        };
        if !buffer::word_aligned(src.offset(), dst.size()) || !dst.offset().is_multiple_of(4) {
            return Ok(false);
        }
        let index = buffer::copy(
            &self.gpu,
            &s.buf,
            src.offset(),
            &d.buf,
            dst.offset(),
            dst.size(),
        );
        self.last = Some(index);
        Ok(true)
    }

    fn event_record(&mut self) -> Result<Option<Arc<dyn EventImpl>>> {
        let index = self.flush();
        let reached = Arc::new(AtomicBool::new(false));
        let flag = reached.clone();
        self.gpu.queue.on_submitted_work_done(move || {
            flag.store(true, Ordering::SeqCst);
        });
        Ok(Some(Arc::new(Marker {
            gpu: self.gpu.clone(),
            index,
            reached,
        })))
    }

    fn event_wait(&mut self, event: &dyn EventImpl) -> Result<bool> {
        // One queue per device: work submitted after this point runs after the marker,
        // whichever stream of the device recorded it.
        Ok(event
            .downcast_ref::<Marker>()
            .is_some_and(|m| m.gpu.id == self.gpu.id))
    }
}

/// A marker in a device's queue: the submission made when it was recorded.
struct Marker {
    gpu: Arc<Gpu>,
    index: wgpu::SubmissionIndex,
    /// Set by the queue once the work before the marker is done.
    reached: Arc<AtomicBool>,
}

impl EventImpl for Marker {
    fn synchronize(&self) -> Result<()> {
        self.gpu.wait(Some(self.index.clone()), "event")?;
        self.gpu.peek_error("event")
    }
    fn is_reached(&self) -> bool {
        if !self.reached.load(Ordering::SeqCst) {
            // Lets wgpu run the callbacks of finished work, without blocking.
            let _ = self.gpu.device.poll(wgpu::PollType::Poll);
        }
        self.reached.load(Ordering::SeqCst)
    }
}
