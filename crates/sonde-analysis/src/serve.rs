//! `--http ADDR`: a run served by sonde-http (API, stream, metrics, dashboard), live while it
//! captures (`monitor`) or its results after it (`analyze`, `serve`) until Ctrl-C or SIGTERM. The address
//! and token are checked, and the port bound, before the analysis starts, so a refused server
//! costs no run.

use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use sonde_http::{Access, Phase, RunState, Snapshot, Status};

use crate::Finished;

/// The token's environment variable, read when `--http-token` is not given.
pub const TOKEN_ENV: &str = "SONDE_HTTP_TOKEN";

/// The HTTP server's bounds (docs/security.md): what one client, and all of them together, may
/// hold.
#[derive(Debug, Clone, clap::Args)]
pub struct HttpLimits {
    /// Connections the HTTP server keeps open at once; beyond, a new one takes the place of the
    /// oldest that has not passed the token (or Host) check, or is answered 503.
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub http_max_connections: usize,
    /// Live stream (/api/stream) clients at once; beyond, 503.
    #[arg(long, value_name = "N", default_value_t = 32)]
    pub http_max_streams: usize,
    /// Seconds a client has to send a request's headers whole.
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    pub http_header_timeout: f64,
    /// Seconds without a byte read or written after which a connection is closed.
    #[arg(long, value_name = "SECS", default_value_t = 60.0)]
    pub http_idle_timeout: f64,
    /// Largest request head (request line and headers; at least 8192); beyond, 431.
    #[arg(long, value_name = "BYTES", default_value_t = 16384)]
    pub http_max_header_bytes: usize,
    /// Largest request body; beyond, 413.
    #[arg(long, value_name = "BYTES", default_value_t = 65536)]
    pub http_max_body_bytes: usize,
    /// Definitions a live monitor counts at once; an addition through the API beyond is refused
    /// (409), and so is a control topic's version that holds more (--kafka-control).
    #[arg(long, value_name = "N", default_value_t = 64)]
    pub http_max_definitions: usize,
    /// Points one answer of the long-term store's API (/api/store/series) holds at most;
    /// beyond, 413 (ask a shorter range or a coarser resolution).
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    pub http_max_store_points: usize,
}

impl HttpLimits {
    /// The server's limits, checked.
    pub fn limits(&self) -> anyhow::Result<sonde_http::Limits> {
        let secs = |name: &str, v: f64| {
            anyhow::ensure!(v.is_finite() && (0.001..=86_400.0).contains(&v), "{name} is 0.001 to 86400 seconds");
            Ok(std::time::Duration::from_secs_f64(v))
        };
        anyhow::ensure!(self.http_max_connections >= 1, "--http-max-connections must be at least 1");
        anyhow::ensure!(
            self.http_max_header_bytes >= sonde_http::MIN_HEADER_BYTES,
            "--http-max-header-bytes must be at least {}",
            sonde_http::MIN_HEADER_BYTES
        );
        Ok(sonde_http::Limits {
            max_connections: self.http_max_connections,
            max_streams: self.http_max_streams,
            header_timeout: secs("--http-header-timeout", self.http_header_timeout)?,
            idle_timeout: secs("--http-idle-timeout", self.http_idle_timeout)?,
            max_header_bytes: self.http_max_header_bytes,
            max_body_bytes: self.http_max_body_bytes,
            max_definitions: self.http_max_definitions,
            max_store_points: self.http_max_store_points,
            ..sonde_http::Limits::default()
        })
    }
}

/// A bound server waiting for the run's results.
pub struct Prepared {
    listener: TcpListener,
    access: Access,
    started_unix_s: f64,
    limits: sonde_http::Limits,
    connections: std::sync::Arc<sonde_http::ConnectionStats>,
}

/// Binds `addr` after checking who may read (a token off loopback: `token_file`, else the
/// environment).
pub fn prepare(addr: SocketAddr, token_file: Option<&Path>, limits: &HttpLimits) -> Result<Prepared> {
    let limits = limits.limits()?;
    let token = match token_file {
        Some(path) => Some(std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?),
        None => std::env::var(TOKEN_ENV).ok(),
    };
    let access = sonde_http::access_for(addr, token.as_deref())?;
    let listener = TcpListener::bind(addr).with_context(|| format!("--http {addr}"))?;
    let started_unix_s = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
    Ok(Prepared { listener, access, started_unix_s, limits, connections: Default::default() })
}

impl Prepared {
    /// Publishes the finished run (and its long-term `store`, if any) and serves it until SIGINT.
    pub fn serve(self, finished: &Finished, store: Option<&Path>, quiet: bool) -> Result<()> {
        let snapshot = finished_snapshot(finished, self.started_unix_s)?;
        let state = RunState::new(snapshot);
        if let Some(store) = store {
            state.set_store(store.to_path_buf());
        }
        state.add_export_counters(crate::export::final_metrics(&finished.report));
        let app = self.announce(state, quiet, "Ctrl-C or SIGTERM stops")?;
        sonde_http::serve_until_interrupted(self.listener, app, &self.limits, self.connections).context("http server")
    }

    /// Serves `state` (another thread publishes into it) until SIGINT.
    pub fn serve_state(self, state: std::sync::Arc<RunState>, quiet: bool, how: &str) -> Result<()> {
        let app = self.announce(state, quiet, how)?;
        sonde_http::serve_until_interrupted(self.listener, app, &self.limits, self.connections).context("http server")
    }

    /// Serves `state` (a live run publishes into it) in a thread of its own until stopped.
    pub fn serve_live(self, state: std::sync::Arc<RunState>, quiet: bool) -> Result<sonde_http::Background> {
        let app = self.announce(state, quiet, "while capturing")?;
        sonde_http::serve_in_background(self.listener, app, self.limits, self.connections).context("http server")
    }

    /// A live run's first snapshot: running, nothing read yet.
    pub fn starting(&self, input: &str, internal_networks: usize) -> Snapshot {
        let status = Status {
            state: Phase::Running,
            input: input.to_string(),
            started_unix_s: self.started_unix_s,
            internal_networks,
            ..Status::default()
        };
        Snapshot { status, ..Snapshot::default() }
    }

    pub fn started_unix_s(&self) -> f64 {
        self.started_unix_s
    }

    fn announce(&self, state: std::sync::Arc<RunState>, quiet: bool, how: &str) -> Result<sonde_http::App> {
        let addr = self.listener.local_addr()?;
        state.add_export_counters(self.connections.counters());
        let app = sonde_http::router_with(state, self.access.clone(), &self.limits);
        // Printed even with -q: it is the only way to learn a port 0 picked.
        println!("sonde: serving http://{addr}/ ({how})");
        if !quiet && self.access != Access::Open {
            eprintln!("sonde: API calls need 'Authorization: Bearer TOKEN'; the dashboard takes #token=TOKEN");
        }
        Ok(app)
    }
}

/// The finished run's snapshot, from its results in memory.
pub fn finished_snapshot(finished: &Finished, started_unix_s: f64) -> Result<Snapshot> {
    let run = &finished.report;
    let snapshot = sonde_http::finished_snapshot(&sonde_http::FinishedRun {
        input: &run.input,
        started_unix_s,
        elapsed_s: run.timing.elapsed_s,
        stats: &run.stats,
        summary: serde_json::to_value(run)?,
        intervals: finished.intervals.as_ref(),
        definitions: finished.definitions.as_ref(),
        flows: &finished.flows,
        format: finished.format,
        internal_networks: finished.internal_networks,
    })?;
    Ok(snapshot)
}
