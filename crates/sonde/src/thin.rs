//! `sonde thin`: the thinned trace written for other tools (docs/thinning.md).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use serde::Serialize;
use sonde_capture::TraceFormat;
use sonde_engine::ThinningReport;

use crate::EXIT_INPUT_DAMAGED;

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
    pub params: sonde_analysis::ThinParams,
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
