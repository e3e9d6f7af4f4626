//! A trace stopped by a signal ([`crate::stop_on_signals_and_hangup`], `sonde analyze`):
//! SIGINT, SIGTERM or SIGHUP end the input where it is, like the end of the trace, so every
//! output is written and the summary says which signal came
//! (`interrupted_by`). A second signal of the same kind ends the process at once (what it
//! leaves on disk is whole or named `.part`: docs/faults.md).

use std::sync::atomic::{AtomicBool, Ordering};

use sonde_capture::{BoxedSource, CaptureError, Frame, PacketSource};

/// A source that ends when `stop` rises.
pub struct UntilStopped<'a> {
    pub inner: &'a mut BoxedSource,
    pub stop: &'static AtomicBool,
}

impl PacketSource for UntilStopped<'_> {
    fn next_frame(&mut self) -> Result<Option<Frame<'_>>, CaptureError> {
        // One relaxed load per frame: nothing against reading the frame itself.
        if self.stop.load(Ordering::Relaxed) {
            // Let go of the source now: a compressed trace's other readers may wait for it.
            *self.inner = sonde_capture::ended(&**self.inner);
            return Ok(None);
        }
        self.inner.next_frame()
    }

    fn position(&self) -> u64 {
        self.inner.position()
    }

    fn size_hint(&self) -> Option<u64> {
        self.inner.size_hint()
    }

    fn format(&self) -> &str {
        self.inner.format()
    }

    fn compression(&self) -> Option<&str> {
        self.inner.compression()
    }

    fn tick(&mut self) -> Option<u64> {
        if self.stop.load(Ordering::Relaxed) {
            return None;
        }
        self.inner.tick()
    }
}
