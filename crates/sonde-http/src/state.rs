//! The meeting point of the engine and the server: the engine publishes whole snapshots and
//! updates; the server reads them. Publishing never waits for a reader (an atomic pointer swap and
//! a bounded broadcast that drops the oldest update for a slow subscriber).

use std::sync::Arc;

use arc_swap::ArcSwap;
use serde::Serialize;
use tokio::sync::broadcast;

use crate::snapshot::{IntervalData, Phase, Snapshot, Status, TrafficBin};

/// Updates a subscriber may fall behind by before it skips the oldest.
pub const UPDATE_BACKLOG: usize = 64;

/// One message of the live stream: the run's status and, when an interval ended, that interval.
#[derive(Debug, Clone, Serialize)]
pub struct Update {
    /// `interval` (an interval ended), `tick` (status only) or `final` (the run finished).
    pub kind: UpdateKind,
    pub status: Status,
    pub interval: Option<IntervalData>,
    /// A live run's traffic bins new since the previous update.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub bins: Vec<TrafficBin>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum UpdateKind {
    Interval,
    Tick,
    Final,
}

/// A change to the flow definitions, against the set's version the client last saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DefinitionChange {
    Add(String),
    Replace(String),
    Remove(String),
}

/// Why the engine refused a definition change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChangeRefused {
    /// The set is at another version than the one the change was made against.
    StaleVersion { current: u64 },
    /// The line does not parse, or names a definition that is not there.
    Invalid(String),
    /// The run ended before it could apply the change.
    Finished,
    /// The engine did not answer in time (it may still apply the change: read the version).
    Busy(String),
}

/// The engine side of definition changes (a live run wires it to the counter's `change`
/// mechanism); a finished run has none, and the API refuses changes.
pub trait DefinitionEditor: Send + Sync {
    /// Applies `change` if the set is at `expected_version`; returns the new version.
    fn apply(&self, expected_version: u64, change: DefinitionChange) -> Result<u64, ChangeRefused>;
}

/// One counter of the run's exporters (IPFIX, Kafka) for `/metrics`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportCounter {
    /// The family, e.g. `sonde_kafka_messages_total`.
    pub name: &'static str,
    pub help: &'static str,
    pub labels: Vec<(&'static str, &'static str)>,
    pub value: u64,
}

/// Reads the exporters' counters as they are now: called at each scrape, so that they move
/// between snapshots and stay after the run (its final values).
pub type ExportCounters = Box<dyn Fn() -> Vec<ExportCounter> + Send + Sync>;

/// Reads a live monitor's control state (`monitor --kafka-control`) as `/api/status` shows it
/// under `control`; its `version` is also `/metrics`' `sonde_control_version`.
pub type ControlReader = Box<dyn Fn() -> serde_json::Value + Send + Sync>;

/// What a run shares with its server.
pub struct RunState {
    snapshot: ArcSwap<Snapshot>,
    updates: broadcast::Sender<Arc<Update>>,
    editor: Option<Box<dyn DefinitionEditor>>,
    exports: std::sync::Mutex<Vec<ExportCounters>>,
    /// The long-term store the run writes (`--store`), served by `/api/store`.
    store: std::sync::OnceLock<std::path::PathBuf>,
    pub(crate) store_counters: crate::store::StoreCounters,
    control: std::sync::OnceLock<ControlReader>,
}

impl std::fmt::Debug for RunState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunState").field("editable", &self.editor.is_some()).finish_non_exhaustive()
    }
}

impl RunState {
    pub fn new(snapshot: Snapshot) -> Arc<RunState> {
        Self::with_editor(snapshot, None)
    }

    pub fn with_editor(snapshot: Snapshot, editor: Option<Box<dyn DefinitionEditor>>) -> Arc<RunState> {
        let (updates, _) = broadcast::channel(UPDATE_BACKLOG);
        Arc::new(RunState {
            snapshot: ArcSwap::from_pointee(snapshot),
            updates,
            editor,
            exports: Default::default(),
            store: Default::default(),
            store_counters: Default::default(),
            control: Default::default(),
        })
    }

    /// The latest snapshot (cheap: a reference count).
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshot.load_full()
    }

    /// Replaces the snapshot whole and tells the stream: `final` when the run is finished,
    /// otherwise `interval` with the newest interval.
    pub fn publish(&self, snapshot: Snapshot) {
        let kind = match snapshot.status.state {
            Phase::Finished => UpdateKind::Final,
            Phase::Running => UpdateKind::Interval,
        };
        let newest_before = self.snapshot.load().live.bins.back().map(|b| b.start_s);
        let bins = snapshot.live.bins.iter().filter(|b| newest_before.is_none_or(|t| b.start_s > t)).copied().collect();
        let update =
            Update { kind, status: snapshot.status.clone(), interval: snapshot.intervals.items.last().cloned(), bins };
        self.snapshot.store(Arc::new(snapshot));
        self.send(update);
    }

    /// Sends an update to the stream only (a tick between intervals). Never waits: with no
    /// subscriber it is dropped, and a subscriber that is behind skips the oldest.
    pub fn send(&self, update: Update) {
        let _ = self.updates.send(Arc::new(update));
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Update>> {
        self.updates.subscribe()
    }

    pub fn editor(&self) -> Option<&dyn DefinitionEditor> {
        self.editor.as_deref()
    }

    /// Adds an exporter's counters to `/metrics`.
    pub fn add_export_counters(&self, counters: ExportCounters) {
        self.exports.lock().unwrap_or_else(|e| e.into_inner()).push(counters);
    }

    /// Every exporter's counters, read now (and the store queries' when there is a store).
    pub fn export_counters(&self) -> Vec<ExportCounter> {
        let mut all: Vec<ExportCounter> =
            self.exports.lock().unwrap_or_else(|e| e.into_inner()).iter().flat_map(|read| read()).collect();
        if self.store.get().is_some() {
            all.extend(self.store_counters.counters());
        }
        all
    }

    /// Serves the long-term store at `path` under `/api/store` (read from the file at each
    /// request: it may not exist yet, and is seen once the run has written it). Set once: a
    /// second call is ignored and returns false.
    pub fn set_store(&self, path: std::path::PathBuf) -> bool {
        self.store.set(path).is_ok()
    }

    /// Shows the control topic's state in `/api/status` and `/metrics` (read at each request).
    /// Set once: a second call is ignored and returns false.
    pub fn set_control(&self, read: ControlReader) -> bool {
        self.control.set(read).is_ok()
    }

    /// The control state now, if the run follows a control topic.
    pub fn control(&self) -> Option<serde_json::Value> {
        self.control.get().map(|read| read())
    }

    /// The store `/api/store` serves, if any.
    pub fn store(&self) -> Option<&std::path::Path> {
        self.store.get().map(|p| p.as_path())
    }
}
