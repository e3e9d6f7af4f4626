//! `--thin natra` for `sonde analyze`, and `sonde thin`: the thinned trace written for other
//! tools (docs/thinning.md).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::ValueEnum;
use serde::Serialize;
use sonde_capture::TraceFormat;
use sonde_engine::{ThinConfig, Thinner, ThinningReport};

use crate::EXIT_INPUT_DAMAGED;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ThinMode {
    /// Drop pure TCP ACKs (ACK, no payload, not SYN or FIN; RST+ACK included) except each
    /// handshake's (NATRA, as the paper's Pseudocode 1).
    Natra,
}

/// The thinner's settings (NATRA's table sizing and entry lifetime); docs/thinning.md.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ThinParams {
    /// New TCP connections per second (λ) to size the handshake table for, once
    /// [default: measured from the traffic over the latest minute, the table re-sized as it changes].
    #[arg(long, value_name = "CONN_PER_S")]
    pub thin_rate: Option<f64>,
    /// Seconds a handshake's entry lives, SYN to ACK (1/μ, a bound on the handshake RTT): the
    /// sizing's holding time and the expiry [default: 1; the paper's is 0.2].
    #[arg(long, value_name = "SECS")]
    pub thin_hold: Option<f64>,
    /// Collision probability the table is sized for (P) [default: 0.05].
    #[arg(long, value_name = "P")]
    pub thin_collision: Option<f64>,
    /// The most slots (16 bytes each) a table sized from the measured rate may take
    /// [default: 1048576].
    #[arg(long, value_name = "SLOTS")]
    pub thin_max_slots: Option<usize>,
}

impl ThinParams {
    fn given(&self) -> bool {
        self.thin_rate.is_some()
            || self.thin_hold.is_some()
            || self.thin_collision.is_some()
            || self.thin_max_slots.is_some()
    }

    /// A fresh thinner with these settings, checked.
    pub fn thinner(&self) -> Result<Thinner> {
        let d = ThinConfig::default();
        let config = ThinConfig {
            rate_per_s: self.thin_rate.or(d.rate_per_s),
            hold_s: self.thin_hold.unwrap_or(d.hold_s),
            collision_p: self.thin_collision.unwrap_or(d.collision_p),
            max_slots: self.thin_max_slots.unwrap_or(d.max_slots),
        };
        Thinner::new(&config).context("thinning settings")
    }
}

/// The thinner `sonde analyze` runs with, if any.
pub fn for_analyze(mode: Option<ThinMode>, params: &ThinParams) -> Result<Option<Thinner>> {
    match mode {
        Some(ThinMode::Natra) => params.thinner().map(Some),
        None if params.given() => bail!("--thin-rate, --thin-hold, --thin-collision and --thin-max-slots need --thin"),
        None => Ok(None),
    }
}

#[derive(Debug, clap::Args)]
pub struct ThinArgs {
    /// Trace to read; `-` reads standard input.
    #[arg(short = 'r', long = "read", value_name = "FILE")]
    pub read: PathBuf,
    /// Thinned trace to write, `-` for standard output (pcap stays pcap at its time resolution;
    /// other formats become pcapng).
    #[arg(short = 'w', long = "write", value_name = "FILE")]
    pub write: PathBuf,
    /// Overwrite the output if it exists.
    #[arg(long)]
    pub force: bool,
    /// No report on stderr.
    #[arg(short, long)]
    pub quiet: bool,
    /// Also write the report as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    #[command(flatten)]
    pub params: ThinParams,
}

/// `sonde thin --report`: the thinning report with the frames read and written.
#[derive(Debug, Serialize)]
struct Report<'a> {
    input: String,
    output: String,
    format: String,
    frames_read: u64,
    frames_written: u64,
    /// Frames of link types sonde cannot decode: written unchanged.
    frames_undecoded: u64,
    input_error: Option<String>,
    thinning: &'a ThinningReport,
}

pub fn run(args: &ThinArgs) -> Result<ExitCode> {
    let mut thinner = args.params.thinner()?;
    let input_name = args.read.display().to_string();
    let mut source = sonde_capture::open(&args.read).with_context(|| input_name.clone())?;
    let format = TraceFormat::matching(source.format());
    let write = |out| sonde_thin::thin_trace(source.as_mut(), &mut thinner, out);
    let Some(thinned) = crate::trace_out::write_trace(&args.write, args.force, format, write)? else {
        return Ok(ExitCode::SUCCESS);
    };

    let thinning = ThinningReport::new(&thinner);
    let report = Report {
        input: input_name.clone(),
        output: crate::trace_out::name(&args.write),
        format: source.format().to_string(),
        frames_read: thinned.frames_read,
        frames_written: thinned.frames_written,
        frames_undecoded: thinned.frames_undecoded,
        input_error: thinned.input_error.as_ref().map(|e| e.to_string()),
        thinning: &thinning,
    };
    if let Some(path) = &args.report {
        let mut json = serde_json::to_string_pretty(&report)?;
        json.push('\n');
        sonde_output::write_atomic(path, |w| w.write_all(json.as_bytes()))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    if !args.quiet {
        let text = format!(
            "sonde thin — {} → {}: {} frames read, {} written ({} undecoded, passed)\n  thinning  {}\n",
            report.input,
            report.output,
            report.frames_read,
            report.frames_written,
            report.frames_undecoded,
            thinning.human()
        );
        let _ = std::io::stderr().write_all(text.as_bytes());
    }
    if let Some(e) = &thinned.input_error {
        eprintln!("sonde: warning: {input_name}: {e}; the output holds the input before that point");
        return Ok(ExitCode::from(EXIT_INPUT_DAMAGED));
    }
    Ok(ExitCode::SUCCESS)
}
