//! `sonde serve --merged DIR`: the merged view of several probes (the Spark merge job's Parquet
//! changelogs, read by sonde-merged) served as a monitor serves its run: dashboard, API, stream
//! and /metrics, with the probes table (docs/merged.md). The directory is looked at again every
//! `--reload` seconds; what changed is published whole.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use sonde_http::RunState;
use sonde_merged::{Limits, Source};

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// The merge job's output directory (`python -m sonde.spark merge … OUT`): its intervals/,
    /// quantiles/, histograms/ and probes/ changelogs of Parquet files (they may appear later).
    #[arg(long, value_name = "DIR")]
    pub merged: PathBuf,
    /// Serve on ADDR (port 0: any free one; the address is printed).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
    pub http: SocketAddr,
    /// File holding the bearer token the HTTP API requires (needed when ADDR is not loopback;
    /// default: the SONDE_HTTP_TOKEN environment variable).
    #[arg(long, value_name = "FILE")]
    pub http_token: Option<PathBuf>,
    #[command(flatten)]
    pub http_limits: sonde_analysis::serve::HttpLimits,
    /// Seconds between two looks at the directory for new files (0.05 to 3600).
    #[arg(long, value_name = "SECS", default_value_t = 2.0)]
    pub reload: f64,
    /// Intervals kept, the newest (older ones stay in the /metrics totals only).
    #[arg(long, value_name = "N", default_value_t = Limits::default().max_intervals)]
    pub max_intervals: usize,
    /// Probes in the probes table; rows of a new probe beyond are left out and counted.
    #[arg(long, value_name = "N", default_value_t = Limits::default().max_probes)]
    pub max_probes: usize,
    /// Hosts, and host pairs, kept per interval of the merged flow tables: the largest by bytes;
    /// the others are let go and counted (`table_rows_let_go`).
    #[arg(long, value_name = "N", default_value_t = Limits::default().max_table_rows)]
    pub max_table_rows: usize,
    /// Ranks of the merged `top` table per interval, of hosts and of host pairs.
    #[arg(long, value_name = "N", default_value_t = Limits::default().top)]
    pub top: usize,
    /// Print only the address served.
    #[arg(short, long)]
    pub quiet: bool,
}

fn wall_s() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

pub fn run(args: &ServeArgs) -> Result<std::process::ExitCode> {
    anyhow::ensure!(
        args.reload.is_finite() && (0.05..=3600.0).contains(&args.reload),
        "--reload is 0.05 to 3600 seconds"
    );
    anyhow::ensure!(args.max_intervals >= 1, "--max-intervals must be at least 1");
    anyhow::ensure!(args.max_probes >= 1, "--max-probes must be at least 1");
    anyhow::ensure!(args.max_table_rows >= 1, "--max-table-rows must be at least 1");
    let limits = Limits {
        max_intervals: args.max_intervals,
        max_probes: args.max_probes,
        max_table_rows: args.max_table_rows,
        top: args.top,
    };
    let mut source =
        Source::open(&args.merged, limits).with_context(|| format!("--merged {}", args.merged.display()))?;
    let server = sonde_analysis::serve::prepare(args.http, args.http_token.as_deref(), &args.http_limits)?;
    let dir = args.merged.display().to_string();
    let started = server.started_unix_s();
    source.reload();
    let state = RunState::new(source.view().snapshot(&dir, started, wall_s()));
    if !args.quiet {
        let c = &source.view().counters;
        eprintln!(
            "sonde: merged view of {dir}: {} files read, {} unreadable, {} intervals",
            c.files_read,
            c.files_unreadable,
            source.view().held_intervals()
        );
    }
    let every = Duration::from_secs_f64(args.reload);
    let publish = state.clone();
    // Never joined: it sleeps between looks, and ends with the process once the server stops.
    std::thread::Builder::new()
        .name("sonde-merged".into())
        .spawn(move || loop {
            std::thread::sleep(every);
            if source.reload() {
                publish.publish(source.view().snapshot(&dir, started, wall_s()));
            }
        })
        .context("starting the reader")?;
    server.serve_state(state, args.quiet, "a merged view; Ctrl-C or SIGTERM stops")?;
    Ok(std::process::ExitCode::SUCCESS)
}
