//! `analyze --http ADDR`: after the run, its results served by sonde-http (API, stream, metrics,
//! dashboard) until Ctrl-C. The address and token are checked, and the port bound, before the
//! analysis starts, so a refused server costs no run.

use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use sonde_http::{Access, Phase, RunState, Snapshot, Status};

use sonde_analysis::Finished;

/// The token's environment variable, read when `--http-token` is not given.
pub const TOKEN_ENV: &str = "SONDE_HTTP_TOKEN";

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
pub fn prepare(addr: SocketAddr, token_file: Option<&Path>, limits: &crate::flags::HttpLimitArgs) -> Result<Prepared> {
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
        state.add_export_counters(sonde_analysis::export::final_metrics(&finished.report));
        let app = self.announce(state, quiet, "Ctrl-C stops")?;
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
    pub fn starting(&self, input: &str) -> Snapshot {
        let status = Status {
            state: Phase::Running,
            input: input.to_string(),
            started_unix_s: self.started_unix_s,
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
    })?;
    Ok(snapshot)
}
