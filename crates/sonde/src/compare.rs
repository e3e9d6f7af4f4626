//! `sonde compare A B`: two runs' flow logs side by side — per field, the share of flows whose
//! value changed, and the RTT distributions of each (docs/thinning.md, "Accuracy").

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use sonde_compare::{compare, render_text, Comparison, FlowLog};

#[derive(Debug, clap::Args)]
pub struct CompareArgs {
    /// The reference run: an output directory of `sonde analyze`, or one flow log file.
    #[arg(value_name = "A")]
    pub a: PathBuf,
    /// The run compared with it (e.g. of the thinned trace): a directory or a flow log file.
    #[arg(value_name = "B")]
    pub b: PathBuf,
    /// List every field, also those that changed in no flow.
    #[arg(long)]
    pub all: bool,
    /// Print the comparison as JSON (every field, the distributions) instead of text.
    #[arg(long)]
    pub json: bool,
}

/// The flow logs of a directory, by kind, in the order they are reported.
const LOGS: [(&str, &str); 2] = [("tcp", "tcp_flows"), ("udp", "udp_flows")];

pub fn run(args: &CompareArgs) -> Result<ExitCode> {
    let pairs: Vec<(&str, PathBuf, PathBuf)> = if args.a.is_dir() && args.b.is_dir() {
        let found: Vec<_> = LOGS
            .iter()
            .filter_map(|&(kind, stem)| Some((kind, flow_log(&args.a, stem)?, flow_log(&args.b, stem)?)))
            .collect();
        anyhow::ensure!(
            !found.is_empty(),
            "no flow log (tcp_flows or udp_flows, .tsv or .jsonl) in both {} and {}",
            args.a.display(),
            args.b.display()
        );
        found
    } else {
        anyhow::ensure!(
            !args.a.is_dir() && !args.b.is_dir(),
            "compare two output directories, or two flow log files, not one of each"
        );
        vec![("flows", args.a.clone(), args.b.clone())]
    };
    let mut results: Vec<(&str, Comparison)> = Vec::new();
    for (kind, a, b) in pairs {
        let read = |p: &Path| FlowLog::read(p).with_context(|| format!("reading {}", p.display()));
        let comparison = compare(&read(&a)?, &read(&b)?)?;
        results.push((kind, comparison));
    }
    let text = if args.json {
        let object: serde_json::Map<String, serde_json::Value> = results
            .into_iter()
            .map(|(kind, c)| Ok((kind.to_string(), serde_json::to_value(c)?)))
            .collect::<Result<_>>()?;
        format!("{}\n", serde_json::to_string_pretty(&object)?)
    } else {
        let mut text = format!("A: {}\nB: {}\n", args.a.display(), args.b.display());
        for (kind, c) in &results {
            text.push('\n');
            text.push_str(&render_text(&format!("{} flows", kind.to_uppercase()), c, args.all));
        }
        text
    };
    // A reader that stops early (`| head`) is not an error.
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => return Err(e).context("writing to standard output"),
        _ => {}
    }
    Ok(ExitCode::SUCCESS)
}

/// `dir/stem.tsv` or `dir/stem.jsonl`, whichever exists.
fn flow_log(dir: &Path, stem: &str) -> Option<PathBuf> {
    ["tsv", "jsonl"].iter().map(|ext| dir.join(format!("{stem}.{ext}"))).find(|p| p.is_file())
}
