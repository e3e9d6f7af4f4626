//! sonde-http: the HTTP side of a run. The engine (an offline `sonde analyze` when it has
//! finished, or a live monitor every interval) publishes whole [`Snapshot`]s and [`Update`]s into
//! a [`RunState`]; the server answers from the latest snapshot: a JSON API under `/api`
//! (docs/openapi.json), Server-Sent Events at `/api/stream`, Prometheus text at `/metrics`, and
//! the dashboard at `/`. Publishing never waits for a client: a snapshot is swapped in whole
//! (an atomic pointer), updates go through a bounded broadcast whose slow readers skip.
//!
//! Off loopback a bearer token is required ([`access_for`]). [`router`] is separate from
//! [`serve`], so tests call the handlers without a socket:
//!
//! ```
//! use sonde_http::{router, Access, RunState, Snapshot};
//! let state = RunState::new(Snapshot::default());
//! let app = router(state, Access::Open); // serve with sonde_http::serve(listener, app, shutdown)
//! # let _ = app;
//! ```

#![forbid(unsafe_code)]

mod api;
mod auth;
mod dashboard;
mod flows;
mod intervals;
mod metrics;
mod publish;
mod server;
mod snapshot;
mod state;
mod store;
mod stream;

use std::future::Future;

pub use api::{api_routes, router, router_with, NOT_IN_MERGED_VIEW};
/// The server's routes, as [`router`] makes them.
pub type App = axum::Router;
pub use auth::{access_for, Access, AccessError};
pub use dashboard::PATHS as DASHBOARD_PATHS;
pub use flows::{FlowPage, FlowQuery, MAX_LIMIT};
pub use intervals::from_report as intervals_from_report;
pub use metrics::render as render_metrics;
pub use publish::{finished as finished_snapshot, Editor, FinishedRun, LivePublisher, LiveSettings, RECENT_FLOWS};
pub use snapshot::{
    AssociationSamples, DefinitionSummary, Definitions, Flows, HistogramRow, IntervalData, IntervalHistograms,
    Intervals, LiveSeries, MergedStatus, Phase, ProbeRow, QuantileRow, Snapshot, Status, Table, TableFiles, TrafficBin,
    TrafficRow,
};
// The names these had before they were told apart from sonde-define's `Definition` and
// sonde-stats' `Tables`; kept so callers written against them compile unchanged.
pub use server::{serve_with, ConnectionStats, Limits, MIN_HEADER_BYTES};
pub use snapshot::{DefinitionSummary as Definition, TableFiles as Tables};
pub use state::{
    ChangeRefused, ControlReader, DefinitionChange, DefinitionEditor, ExportCounter, ExportCounters, RunState, Update,
    UpdateKind, UPDATE_BACKLOG,
};
pub use store::{ArchiveListing, SeriesAnswer, SeriesQuery, StoreListing};
pub use stream::MIN_RESOLUTION_MS;

/// Serves `app` on `listener` with the default [`Limits`] until `shutdown` completes.
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_with(listener, app, &Limits::default(), Default::default(), shutdown).await
}

/// Serves `app` on an already bound listener until SIGINT (Ctrl-C) or SIGTERM (a service
/// manager's stop), in a runtime of its own
/// (two worker threads: the server is light, and the machine's cores belong to the analysis).
pub fn serve_until_interrupted(
    listener: std::net::TcpListener,
    app: axum::Router,
    limits: &Limits,
    stats: std::sync::Arc<ConnectionStats>,
) -> std::io::Result<()> {
    listener.set_nonblocking(true)?;
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let interrupted = std::sync::Arc::new(tokio::sync::Notify::new());
        let signal = interrupted.clone();
        let server = serve_with(listener, app, limits, stats, async move {
            stop_signal().await;
            signal.notify_one();
        });
        // An open stream never ends by itself: after the signal, connections get a short grace
        // to finish their answers, then the server stops regardless.
        tokio::select! {
            result = server => result,
            () = async {
                interrupted.notified().await;
                tokio::time::sleep(SHUTDOWN_GRACE).await;
            } => Ok(()),
        }
    })
}

/// Returns at the first SIGINT or SIGTERM.
async fn stop_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        // No SIGTERM handler to be had: SIGINT still stops, SIGTERM kills as by default.
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// A server running in a thread of its own until [`Background::stop`].
pub struct Background {
    stop: std::sync::Arc<tokio::sync::Notify>,
    thread: Option<std::thread::JoinHandle<std::io::Result<()>>>,
}

/// Serves `app` on an already bound listener in a thread of its own (a live run serves while it
/// analyses); no signal handling: the run stops it.
pub fn serve_in_background(
    listener: std::net::TcpListener,
    app: axum::Router,
    limits: Limits,
    stats: std::sync::Arc<ConnectionStats>,
) -> std::io::Result<Background> {
    listener.set_nonblocking(true)?;
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let stop = std::sync::Arc::new(tokio::sync::Notify::new());
    let stopped = stop.clone();
    let thread = std::thread::Builder::new().name("sonde-http".into()).spawn(move || {
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener)?;
            let asked = std::sync::Arc::new(tokio::sync::Notify::new());
            let told = asked.clone();
            let server = serve_with(listener, app, &limits, stats, async move { told.notified().await });
            tokio::select! {
                result = server => result,
                () = async {
                    stopped.notified().await;
                    asked.notify_one();
                    // Open streams never end by themselves: a short grace, then stop regardless.
                    tokio::time::sleep(SHUTDOWN_GRACE).await;
                } => Ok(()),
            }
        })
    })?;
    Ok(Background { stop, thread: Some(thread) })
}

impl Background {
    /// Stops accepting, lets answers in progress finish (at most [`SHUTDOWN_GRACE`]), and waits.
    pub fn stop(mut self) -> std::io::Result<()> {
        self.stop.notify_one();
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(result)) => result,
            Some(Err(_)) => Err(std::io::Error::other("the http server thread panicked")),
            None => Ok(()),
        }
    }
}

/// How long answers in progress may take after SIGINT.
pub const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(2);
