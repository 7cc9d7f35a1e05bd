//! Events: markers queued on a stream, signalled when everything queued before them is done.
//! Every backend has them (GGML's CPU backend has none); the host can wait on one, and another
//! stream can be made to wait on one without blocking the host. A stream whose engine has a
//! queue of its own may signal with a marker of its device ([`super::EventImpl`]): the event is
//! then reached when the device passes it, and another stream of a device that understands it
//! waits for it on the device.

use std::sync::{Arc, Condvar, Mutex};

use crate::error::{Error, Result};
use crate::tensor::lock;

use super::stream::Job;
use super::traits::EventImpl;
use super::{Backend, Device};

#[derive(Default)]
struct State {
    /// Generation of the latest `record`.
    recorded: u64,
    /// Highest generation signalled so far.
    signalled: u64,
    /// The stream's first error at the time the latest generation was signalled.
    error: Option<Error>,
    /// The device's own marker for the latest generation signalled, if the stream gave one.
    native: Option<Arc<dyn EventImpl>>,
}

pub(crate) struct EventInner {
    device: Device,
    state: Mutex<State>,
    cv: Condvar,
}

impl EventInner {
    pub(crate) fn recorded(&self) -> u64 {
        lock(&self.state).recorded
    }

    /// Marks `generation` as signalled by its stream: done, or handed to the device as
    /// `native`.
    pub(crate) fn signal(
        &self,
        generation: u64,
        error: Option<Error>,
        native: Option<Arc<dyn EventImpl>>,
    ) {
        let mut s = lock(&self.state);
        if generation > s.signalled {
            s.signalled = generation;
            s.error = error;
            s.native = native;
        }
        drop(s);
        self.cv.notify_all();
    }

    /// Whether the stream has signalled `generation` (its device may not have reached it yet).
    pub(crate) fn is_signalled(&self, generation: u64) -> bool {
        lock(&self.state).signalled >= generation
    }

    /// Blocks until the stream has signalled `generation`; the stream's error by then and the
    /// device's marker, if any (wait for that to know the device has passed it).
    pub(crate) fn wait_for(&self, generation: u64) -> (Option<Error>, Option<Arc<dyn EventImpl>>) {
        let mut s = lock(&self.state);
        while s.signalled < generation {
            s = self.cv.wait(s).unwrap_or_else(|e| e.into_inner());
        }
        (s.error.clone(), s.native.clone())
    }
}

/// A synchronisation marker (`ggml_backend_event_t`). Cheap to clone; clones share the event.
#[derive(Clone)]
pub struct Event(pub(crate) Arc<EventInner>);

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = lock(&self.0.state);
        write!(
            f,
            "Event(recorded {}, signalled {})",
            s.recorded, s.signalled
        )
    }
}

impl Event {
    /// A new event for streams of `dev` (`ggml_backend_event_new`). Never recorded, it counts
    /// as signalled.
    pub fn new(dev: &Device) -> Result<Event> {
        Ok(Event::for_device(dev.clone()))
    }

    pub(crate) fn for_device(device: Device) -> Event {
        Event(Arc::new(EventInner {
            device,
            state: Mutex::new(State::default()),
            cv: Condvar::new(),
        }))
    }

    /// The device the event was made for.
    pub fn device(&self) -> Device {
        self.0.device.clone()
    }

    /// Queues the event on `backend`: it is signalled when all work queued there before it is
    /// done (`ggml_backend_event_record`). Recording again moves the marker.
    pub fn record(&self, backend: &Backend) -> Result<()> {
        // Queue the signal under the event's lock: a concurrent `event_wait` on the same stream
        // then never reads a generation whose signal is queued behind its wait (a deadlock).
        let mut s = lock(&self.0.state);
        s.recorded += 1;
        backend.enqueue(Job::Signal(self.0.clone(), s.recorded));
        Ok(())
    }

    /// Blocks the host until the latest record is signalled; returns the first error the
    /// recording stream had raised by then (`ggml_backend_event_synchronize`).
    pub fn synchronize(&self) -> Result<()> {
        let target = self.0.recorded();
        let (error, native) = self.0.wait_for(target);
        if let Some(e) = error {
            return Err(e);
        }
        native.map_or(Ok(()), |n| n.synchronize())
    }

    /// Whether the latest record has been signalled (never blocks).
    pub fn is_signalled(&self) -> bool {
        let s = lock(&self.0.state);
        s.signalled >= s.recorded && s.native.as_ref().is_none_or(|n| n.is_reached())
    }

    /// Releases the event (`ggml_backend_event_free`); the same as dropping it.
    pub fn free(self) {}
}
