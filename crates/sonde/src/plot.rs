//! `sonde plot`: figures from an output directory of `sonde analyze` (see docs/monitoring.md ("Plots")).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::ValueEnum;
use sonde_plot::{plot_dir, ImageFormat, PlotRequest, Selection};

#[derive(Debug, clap::Args)]
pub struct PlotArgs {
    /// Output directory of `sonde analyze` to read.
    #[arg(value_name = "DIR", required_unless_present = "store")]
    pub dir: Option<PathBuf>,
    /// Also (or only) draw the time figures of a round-robin store (`sonde analyze --store`),
    /// one per resolution it keeps.
    #[arg(long, value_name = "FILE")]
    pub store: Option<PathBuf>,
    /// Where to write the figures (created if missing) [default: DIR/plots, or plots/ next to
    /// the store].
    #[arg(short = 'o', long = "out", value_name = "OUTDIR")]
    pub out: Option<PathBuf>,
    /// Image format.
    #[arg(long, value_enum, default_value = "png")]
    pub format: ImageFormatArg,
    /// Which figures: time plots (intervals.tsv, quantiles.tsv: traffic, RTT, Tstat's Fig. 1),
    /// distributions (flow logs, histograms.tsv: sizes, durations, RTT, Tstat's Fig. 2; and the
    /// associations' phase plots), or both.
    #[arg(long, value_enum, default_value = "all")]
    pub what: WhatArg,
    /// Print nothing but errors.
    #[arg(short, long)]
    pub quiet: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ImageFormatArg {
    Png,
    Svg,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum WhatArg {
    Time,
    Dist,
    All,
}

pub fn run(args: &PlotArgs) -> Result<ExitCode> {
    let default_out = match (&args.dir, &args.store) {
        (Some(dir), _) => dir.join("plots"),
        (None, Some(store)) => store.parent().unwrap_or(std::path::Path::new(".")).join("plots"),
        (None, None) => anyhow::bail!("give an output directory of sonde analyze, --store FILE, or both"),
    };
    let request = PlotRequest {
        input: args.dir.clone(),
        store: args.store.clone(),
        output: args.out.clone().unwrap_or(default_out),
        format: match args.format {
            ImageFormatArg::Png => ImageFormat::Png,
            ImageFormatArg::Svg => ImageFormat::Svg,
        },
        selection: match args.what {
            WhatArg::Time => Selection::Time,
            WhatArg::Dist => Selection::Distributions,
            WhatArg::All => Selection::All,
        },
    };
    let report = plot_dir(&request)?;
    if !args.quiet {
        for note in &report.notes {
            eprintln!("sonde plot: {note}");
        }
        for path in &report.written {
            println!("{}", path.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}
