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
    /// Drop pure TCP ACKs (ACK, no payload, not SYN/FIN/RST) except each handshake's first.
    Natra,
}

/// The thinner's settings (NATRA's table sizing and expiry); defaults in docs/thinning.md.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ThinParams {
    /// Expected new TCP connections per second (λ), for the handshake table's size [default: 1000].
    #[arg(long, value_name = "CONN_PER_S")]
    pub thin_rate: Option<f64>,
    /// Seconds a handshake holds its table entry, SYN/ACK to ACK (1/μ) [default: 0.2].
    #[arg(long, value_name = "SECS")]
    pub thin_hold: Option<f64>,
    /// Collision probability the table is sized for (P) [default: 0.01].
    #[arg(long, value_name = "P")]
    pub thin_collision: Option<f64>,
    /// Seconds after its SYN/ACK a handshake's entry expires: the longest handshake RTT
    /// expected [default: 3].
    #[arg(long, value_name = "SECS")]
    pub thin_max_rtt: Option<f64>,
}

impl ThinParams {
    fn given(&self) -> bool {
        self.thin_rate.is_some()
            || self.thin_hold.is_some()
            || self.thin_collision.is_some()
            || self.thin_max_rtt.is_some()
    }

    /// A fresh thinner with these settings, checked.
    pub fn thinner(&self) -> Result<Thinner> {
        let d = ThinConfig::default();
        let config = ThinConfig {
            rate_per_s: self.thin_rate.unwrap_or(d.rate_per_s),
            hold_s: self.thin_hold.unwrap_or(d.hold_s),
            collision_p: self.thin_collision.unwrap_or(d.collision_p),
            max_rtt_s: self.thin_max_rtt.unwrap_or(d.max_rtt_s),
        };
        Thinner::new(&config).context("thinning settings")
    }
}

/// The thinner `sonde analyze` runs with, if any.
pub fn for_analyze(mode: Option<ThinMode>, params: &ThinParams) -> Result<Option<Thinner>> {
    match mode {
        Some(ThinMode::Natra) => params.thinner().map(Some),
        None if params.given() => bail!("--thin-rate, --thin-hold, --thin-collision and --thin-max-rtt need --thin"),
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
