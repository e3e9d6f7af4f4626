//! `sonde.stream` and `sonde.monitor`: a run whose flows reach Python as record batches while
//! it goes. Each worker's [`StreamSink`] sends a batch every `rows` ended flows into a channel
//! of [`CHANNEL_BATCHES`] places; a worker waits when Python has not taken them yet, so memory
//! stays bounded whatever the input's size. When the input ends (or the run is stopped), the
//! remaining flows come, then the intervals, definitions and summary.

use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use arrow::pyarrow::ToPyArrow;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use sonde_analysis::Analysis;
use sonde_arrow::{FlowBatch, Protocol, StreamSink};
use sonde_capture::PacketSource;
use sonde_engine::Sinks;

use crate::control::{self, Stop, Stoppable, Waited};
use crate::errors::{internal_error, settings_error, CaptureError, SettingsError, SondeError};
use crate::result::Finished;
use crate::settings;

/// Batches waiting for Python, at most (each up to `rows` flows).
const CHANNEL_BATCHES: usize = 4;

/// The flows of a run as batches while it goes: iterate for `(protocol, pyarrow.RecordBatch)`
/// pairs; when the iteration ends, `result()` holds the rest of the run.
#[pyclass(module = "sonde._sonde")]
pub struct FlowStream {
    state: Mutex<State>,
    stop: Stop,
    deadline: Option<Instant>,
}

struct State {
    batches: Receiver<FlowBatch>,
    done: Receiver<Result<Finished, String>>,
    /// The run's results once the batches have ended.
    result: Option<Py<PyDict>>,
}

#[pymethods]
impl FlowStream {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// The next batch of ended flows, `("tcp" | "udp" | "icmp", pyarrow.RecordBatch)` (ICMP
    /// only when asked for).
    fn __next__(&self, py: Python<'_>) -> PyResult<Option<(&'static str, Py<PyAny>)>> {
        let Ok(mut state) = self.state.try_lock() else {
            return Err(PyRuntimeError::new_err("this stream is being read by another thread"));
        };
        if state.result.is_some() {
            return Ok(None);
        }
        match control::wait(py, &mut state.batches, &self.stop, self.deadline)? {
            Waited::Got(FlowBatch { protocol, batch }) => {
                let name = match protocol {
                    Protocol::Tcp => "tcp",
                    Protocol::Udp => "udp",
                    Protocol::Icmp => "icmp",
                };
                Ok(Some((name, batch.to_pyarrow(py)?.unbind())))
            }
            Waited::Ended => {
                let finished = match control::wait(py, &mut state.done, &self.stop, self.deadline)? {
                    Waited::Got(Ok(finished)) => finished,
                    Waited::Got(Err(message)) => return Err(SondeError::new_err(message)),
                    Waited::Ended => {
                        return Err(SondeError::new_err("the run ended without a result (see the panic on stderr)"));
                    }
                };
                state.result = Some(finished.into_py(py)?);
                Ok(None)
            }
        }
    }

    /// Ends the run where it is: a trace's reader stops at its next frame, a capture at its
    /// next wake-up; the flows still open end then and still come, then the iteration ends.
    fn stop(&self) {
        self.stop.stop();
    }

    /// The run's results (as `sonde.analyze`'s dict, without flow tables) once the iteration
    /// has ended, else None.
    fn result(&self, py: Python<'_>) -> Option<Py<PyDict>> {
        let state = self.state.try_lock().ok()?;
        state.result.as_ref().map(|r| r.clone_ref(py))
    }
}

impl Drop for FlowStream {
    /// A stream dropped before its end stops its run; the run's thread ends by itself (its
    /// sends find nobody and are dropped).
    fn drop(&mut self) {
        self.stop.stop();
    }
}

/// Starts the run over `sources` (named `input`) in a thread of its own and returns the stream
/// of its flows.
fn start<S>(
    analysis: Analysis,
    mut sources: S,
    input: String,
    shape: Shape,
    stop: Stop,
    deadline: Option<Instant>,
) -> PyResult<FlowStream>
where
    S: AsSources + Send + 'static,
{
    let (tx, batches) = mpsc::sync_channel(CHANNEL_BATCHES);
    let (done_tx, done) = mpsc::sync_channel(1);
    let sinks = StreamSinks { tx, shape };
    std::thread::Builder::new()
        .name("sonde-stream".into())
        .spawn(move || {
            let outcome = {
                let mut readers = sources.as_sources();
                analysis.analyze(&mut readers, &sinks, (&input, None))
            };
            // No more batches: the iteration moves on to the result.
            drop(sinks);
            let outcome = outcome.map_err(|e| format!("{e:#}")).map(|analyzed| Finished::of(analyzed, None));
            let _ = done_tx.send(outcome);
        })
        .map_err(|e| internal_error("starting the run's thread", &e))?;
    Ok(FlowStream { state: Mutex::new(State { batches, done, result: None }), stop, deadline })
}

/// What a stream's batches look like: up to `rows` flows, addresses through `anonymizer`.
struct Shape {
    rows: usize,
    anonymizer: Option<sonde_anon::Anonymizer>,
    /// ICMP entries streamed too.
    icmp: bool,
    /// NFStream's flow features' columns (`features="ml"`).
    features: Option<sonde_flow::features::FeaturesConfig>,
}

/// Each worker's [`StreamSink`], sending into one channel.
struct StreamSinks {
    tx: mpsc::SyncSender<FlowBatch>,
    shape: Shape,
}

impl Sinks for StreamSinks {
    type Worker = StreamSink;
    fn worker(&self) -> StreamSink {
        StreamSink::new(self.tx.clone(), self.shape.rows)
            .with_icmp(self.shape.icmp)
            .anonymized(self.shape.anonymizer.clone())
            .features(self.shape.features)
    }
}

/// What a stream's thread reads: a trace, or live sources.
trait AsSources {
    fn as_sources(&mut self) -> Vec<&mut (dyn PacketSource + Send)>;
}

impl AsSources for Stoppable {
    fn as_sources(&mut self) -> Vec<&mut (dyn PacketSource + Send)> {
        vec![self]
    }
}

impl AsSources for Vec<sonde_live::LiveSource> {
    fn as_sources(&mut self) -> Vec<&mut (dyn PacketSource + Send)> {
        self.iter_mut().map(|s| s as &mut (dyn PacketSource + Send)).collect()
    }
}

/// The flows of the trace at `path` as batches of up to `rows` flows while it is read.
#[pyfunction]
#[pyo3(signature = (path, options, rows, icmp = false))]
pub fn stream(path: PathBuf, options: &str, rows: usize, icmp: bool) -> PyResult<FlowStream> {
    let (analysis, (source, name)) = settings::prepare(settings::config(options)?, || crate::open_trace(&path))?;
    let (anonymizer, features) = (analysis.anonymizer(), analysis.features());
    let stop = Stop::new();
    let source = Stoppable { source, stop: stop.clone() };
    start(analysis, source, name, Shape { rows, anonymizer, icmp, features }, stop, None)
}

/// The live capture's settings (`sonde monitor`'s flags).
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct CaptureOptions {
    capture: String,
    ring_mb: usize,
    promisc: bool,
    tick_ms: u64,
    duration: Option<f64>,
}

/// The flows seen on the live `interfaces` (merged by timestamp) as batches while they end,
/// until `stop()`, `duration` seconds or Ctrl-C.
#[pyfunction]
#[pyo3(signature = (interfaces, options, capture, rows, icmp = false))]
pub fn monitor(
    interfaces: Vec<String>,
    options: &str,
    capture: CaptureOptions,
    rows: usize,
    icmp: bool,
) -> PyResult<FlowStream> {
    if interfaces.is_empty() {
        return Err(SettingsError::new_err("monitor needs an interface"));
    }
    let backend = match capture.capture.as_str() {
        "afpacket" => sonde_live::Backend::AfPacket,
        "pcap" => sonde_live::Backend::Pcap,
        other => return Err(SettingsError::new_err(format!("capture must be afpacket or pcap, not {other}"))),
    };
    if capture.ring_mb == 0 {
        return Err(SettingsError::new_err("ring_mb must be at least 1"));
    }
    if capture.tick_ms == 0 {
        return Err(SettingsError::new_err("tick_ms must be at least 1"));
    }
    let deadline = match capture.duration {
        Some(s) if !(s.is_finite() && s > 0.0) => {
            return Err(SettingsError::new_err("duration must be a positive number of seconds"));
        }
        Some(s) => Some(Instant::now() + Duration::from_secs_f64(s)),
        None => None,
    };
    let config = settings::config(options)?;
    let cfg = sonde_live::Config {
        interfaces: interfaces.clone(),
        backend,
        buffer_bytes: capture.ring_mb.saturating_mul(1 << 20),
        promisc: capture.promisc,
        tick_ns: capture.tick_ms.saturating_mul(1_000_000),
        interval_ns: config.interval_ns().map_err(|e| settings_error(e.to_string()))?,
    };
    let (stop, flag) = Stop::live();
    let open = || sonde_live::LiveSource::open(&cfg, flag).map_err(|e| CaptureError::new_err(e.to_string()));
    let (analysis, source) = settings::prepare(config, open)?;
    let (anonymizer, features) = (analysis.anonymizer(), analysis.features());
    start(analysis, vec![source], interfaces.join(","), Shape { rows, anonymizer, icmp, features }, stop, deadline)
}
