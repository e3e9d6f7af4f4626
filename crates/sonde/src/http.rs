//! `analyze --http ADDR`: after the run, its results served by sonde-http (API, stream, metrics,
//! dashboard) until Ctrl-C. The address and token are checked, and the port bound, before the
//! analysis starts, so a refused server costs no run.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use serde_json::Value;
use sonde_http::{Access, Definition, Definitions, Flows, Phase, RunState, Snapshot, Status, Table, Tables};
use sonde_stats::report::TABLE_FILES;
use sonde_stats::Report;

use crate::report::RunReport;

/// The token's environment variable, read when `--http-token` is not given.
pub const TOKEN_ENV: &str = "SONDE_HTTP_TOKEN";

/// A bound server waiting for the run's results.
pub struct Prepared {
    listener: TcpListener,
    access: Access,
    started_unix_s: f64,
}

/// Binds `addr` after checking who may read (a token off loopback: `token_file`, else the
/// environment).
pub fn prepare(addr: SocketAddr, token_file: Option<&Path>) -> Result<Prepared> {
    let token = match token_file {
        Some(path) => Some(std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?),
        None => std::env::var(TOKEN_ENV).ok(),
    };
    let access = sonde_http::access_for(addr, token.as_deref())?;
    let listener = TcpListener::bind(addr).with_context(|| format!("--http {addr}"))?;
    let started_unix_s = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
    Ok(Prepared { listener, access, started_unix_s })
}

/// What the finished run produced, as the server's snapshot.
pub struct RunOutputs<'a> {
    pub run: &'a RunReport,
    pub report: Option<&'a Report>,
    /// The definition set's version at the end (0 without definitions).
    pub definitions_version: u64,
    pub association_samples: &'a [(String, Vec<(u64, u64)>)],
    pub out_dir: &'a Path,
    pub flow_ext: &'a str,
}

impl<'a> RunOutputs<'a> {
    pub fn of(finished: &'a crate::analysis::Finished, out_dir: &'a Path) -> RunOutputs<'a> {
        RunOutputs {
            run: &finished.report,
            report: finished.intervals.as_ref(),
            definitions_version: finished.definitions_version,
            association_samples: &finished.association_samples,
            out_dir,
            flow_ext: finished.format.extension(),
        }
    }
}

/// A definition's summary as the API lists it.
pub fn definition(d: &sonde_types::DefinitionEntry) -> Definition {
    d.summary.clone()
}

impl Prepared {
    /// Publishes the finished run and serves it until SIGINT.
    pub fn serve(self, outputs: &RunOutputs<'_>, quiet: bool) -> Result<()> {
        let snapshot = finished_snapshot(outputs, self.started_unix_s)?;
        let state = RunState::new(snapshot);
        let app = self.announce(state, quiet, "Ctrl-C stops")?;
        sonde_http::serve_until_interrupted(self.listener, app).context("http server")
    }

    /// Serves `state` (a live run publishes into it) in a thread of its own until stopped.
    pub fn serve_live(self, state: std::sync::Arc<RunState>, quiet: bool) -> Result<sonde_http::Background> {
        let app = self.announce(state, quiet, "while capturing")?;
        sonde_http::serve_in_background(self.listener, app).context("http server")
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
        let app = sonde_http::router(state, self.access.clone());
        // Printed even with -q: it is the only way to learn a port 0 picked.
        println!("sonde: serving http://{addr}/ ({how})");
        if !quiet && self.access != Access::Open {
            eprintln!("sonde: API calls need 'Authorization: Bearer TOKEN'; the dashboard takes #token=TOKEN");
        }
        Ok(app)
    }
}

fn read_table(dir: &Path, name: &str) -> Result<Table> {
    let path: PathBuf = dir.join(name);
    if !path.exists() {
        return Ok(Table::default());
    }
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    Ok(if name.ends_with(".jsonl") { Table::from_jsonl(&text) } else { Table::from_tsv(&text) })
}

/// The finished run's snapshot, read from its outputs.
pub fn finished_snapshot(o: &RunOutputs<'_>, started_unix_s: f64) -> Result<Snapshot> {
    let summary = serde_json::to_value(o.run)?;
    let num = |path: &[&str]| path.iter().try_fold(&summary, |v, k| v.get(k)).and_then(Value::as_f64);
    let packets = num(&["packets", "read"]).unwrap_or(0.0) as u64;
    let status = Status {
        state: Phase::Finished,
        input: o.run.input.clone(),
        started_unix_s,
        packets,
        bytes: num(&["packets", "wire_bytes"]).unwrap_or(0.0) as u64,
        elapsed_s: o.run.timing.elapsed_s,
        first_packet_s: num(&["first_ts_ns"]).filter(|_| packets > 0).map(|ns| ns / 1e9),
        last_packet_s: num(&["last_ts_ns"]).filter(|_| packets > 0).map(|ns| ns / 1e9),
    };
    let dir = o.out_dir;
    let definitions = Definitions {
        version: o.definitions_version,
        items: o.run.definitions.iter().flatten().map(definition).collect(),
        counts: read_table(dir, crate::definitions::FILE)?,
        associations: o
            .association_samples
            .iter()
            .map(|(name, s)| sonde_http::AssociationSamples::from_ns(name.clone(), s))
            .collect(),
    };
    Ok(Snapshot {
        status,
        summary,
        intervals: o.report.map(sonde_http::intervals_from_report).unwrap_or_default(),
        tables: Tables {
            hosts: read_table(dir, TABLE_FILES[0])?,
            matrix: read_table(dir, TABLE_FILES[1])?,
            protocols: read_table(dir, TABLE_FILES[2])?,
            top: read_table(dir, TABLE_FILES[3])?,
        },
        flows: Flows {
            tcp: read_table(dir, &format!("tcp_flows.{}", o.flow_ext))?,
            udp: read_table(dir, &format!("udp_flows.{}", o.flow_ext))?,
        },
        definitions,
        live: Default::default(),
        totals: Vec::new(),
    })
}
