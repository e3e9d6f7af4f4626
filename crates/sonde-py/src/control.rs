//! How a run goes on beside Python: in a thread of its own, the caller waiting with the GIL
//! released and looking at Python's signals every [`POLL`]; Ctrl-C raises KeyboardInterrupt at
//! once and tells the run to stop (a trace's reader sees the end of input at its next frame, a
//! live source at its next wake-up).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pyo3::prelude::*;
use sonde_capture::{CaptureError, Frame, PacketSource};

/// How often a waiting caller looks at Python's signals.
pub const POLL: Duration = Duration::from_millis(100);

/// A run's stop flag: a trace's own, or a live source's (which sonde-live wants `'static`).
#[derive(Clone)]
pub enum Stop {
    Trace(Arc<AtomicBool>),
    Live(&'static AtomicBool),
}

impl Stop {
    pub fn new() -> Stop {
        Stop::Trace(Arc::new(AtomicBool::new(false)))
    }

    /// A flag for a live source, which keeps it for the life of the process. One per
    /// `sonde.monitor` call: a byte each, never freed.
    pub fn live() -> (Stop, &'static AtomicBool) {
        let flag = Box::leak(Box::new(AtomicBool::new(false)));
        (Stop::Live(flag), flag)
    }

    pub fn flag(&self) -> &AtomicBool {
        match self {
            Stop::Trace(flag) => flag,
            Stop::Live(flag) => flag,
        }
    }

    pub fn stop(&self) {
        self.flag().store(true, Ordering::Relaxed);
    }

    pub fn stopped(&self) -> bool {
        self.flag().load(Ordering::Relaxed)
    }
}

/// A trace that ends where it is when its run is stopped: the reader sees a clean end of input,
/// and the run ends as at the end of the file. One relaxed load per frame.
pub struct Stoppable {
    pub source: sonde_capture::BoxedSource,
    pub stop: Stop,
}

impl PacketSource for Stoppable {
    fn next_frame(&mut self) -> Result<Option<Frame<'_>>, CaptureError> {
        if self.stop.stopped() {
            // Let go of the source now: a compressed trace's other readers may wait for it.
            self.source = sonde_capture::ended(&*self.source);
            return Ok(None);
        }
        self.source.next_frame()
    }
    fn position(&self) -> u64 {
        self.source.position()
    }
    fn size_hint(&self) -> Option<u64> {
        self.source.size_hint()
    }
    fn format(&self) -> &str {
        self.source.format()
    }
    fn compression(&self) -> Option<&str> {
        self.source.compression()
    }
    fn tick(&mut self) -> Option<u64> {
        self.source.tick()
    }
}

/// What a wait brought.
pub enum Waited<T> {
    Got(T),
    /// Every sender is gone.
    Ended,
}

/// Waits for the next message on `rx` with the GIL released, looking at Python's signals
/// every [`POLL`]: a KeyboardInterrupt (or an exception a signal handler raised) stops the run
/// and is raised at once. Past `deadline` the run is told to stop (and the wait goes on).
pub fn wait<T: Send>(
    py: Python<'_>,
    rx: &mut Receiver<T>,
    stop: &Stop,
    deadline: Option<Instant>,
) -> PyResult<Waited<T>> {
    loop {
        // Moved in as `&mut`: a `Receiver` may go to another thread but not be shared.
        let receiver = &mut *rx;
        match py.detach(move || receiver.recv_timeout(POLL)) {
            Ok(message) => return Ok(Waited::Got(message)),
            Err(RecvTimeoutError::Disconnected) => return Ok(Waited::Ended),
            Err(RecvTimeoutError::Timeout) => {
                if let Err(e) = py.check_signals() {
                    stop.stop();
                    return Err(e);
                }
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    stop.stop();
                }
            }
        }
    }
}
