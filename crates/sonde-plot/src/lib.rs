//! sonde-plot: figures from the files `sonde analyze` writes, after the pipeline has run.
//!
//! Reads an output directory (`intervals.tsv`, `tcp_flows.tsv`, `udp_flows.tsv`,
//! `histograms.tsv`; columns found by their header names) and draws, as PNG or SVG:
//! - time figures from `intervals.tsv`: throughput, new flows and active flows per protocol,
//!   inbound above the axis and outbound below (as Tstat's RRD plots), at the file's own
//!   interval and re-aggregated to 5 min, 30 min, 2 h and 1 day where the trace spans at least
//!   two such bins; and TCP RTT percentiles per interval from `quantiles.tsv` ([`quantiles`]);
//! - distributions from the flow logs: CDF and log-log CCDF of flow duration and of payload
//!   bytes per direction, and the RTT pdf (from `histograms.tsv`'s `tcp_rtt_sample` rows when
//!   present, else from the flows' average RTTs).
//!
//! - time figures from a round-robin store (`sonde analyze --store`): traffic and RTT
//!   percentiles, one of each per resolution it keeps ([`store`]).
//!
//! Reading never panics on a malformed file: errors name the file and line. The series are
//! computed in [`figures`] as plain numbers and only drawn by [`Figure::render`], which needs no
//! system library or font (DejaVu Sans is embedded).
//!
//! ```
//! use sonde_plot::{figures, ImageFormat, Figure};
//! let flows = [sonde_plot::flows::FlowSample {
//!     duration_s: 1.5, c2s_bytes: 300.0, s2c_bytes: 5428.0, c2s_rtt_ms: Some(40.0), s2c_rtt_ms: None,
//! }];
//! let figs = figures::flow_figures(&flows, &[], "demo");
//! assert_eq!(figs[0].file_stem, "flow-duration");
//! let svg = Figure::Dist(figs[0].clone()).render(ImageFormat::Svg).unwrap();
//! assert!(String::from_utf8(svg).unwrap().starts_with("<svg"));
//! ```

#![forbid(unsafe_code)]

pub mod axis;
pub mod dist;
mod error;
pub mod figures;
pub mod flows;
pub mod histograms;
pub mod intervals;
pub mod quantiles;
mod render;
pub mod store;
mod table;

use std::path::{Path, PathBuf};

pub use error::PlotError;
pub use render::{Figure, ImageFormat};

use error::io_error;

/// Which figures to make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selection {
    /// Time figures (from `intervals.tsv` and `quantiles.tsv`).
    Time,
    /// Distributions (from the flow logs and `histograms.tsv`).
    Distributions,
    All,
}

/// What [`plot_dir`] does.
#[derive(Debug, Clone)]
pub struct PlotRequest {
    /// A `sonde analyze` output directory.
    pub input: Option<PathBuf>,
    /// A time-series store (`sonde analyze --store`): one time figure per resolution.
    pub store: Option<PathBuf>,
    /// Where the figures go (created if missing; figures of the same name are replaced).
    pub output: PathBuf,
    pub format: ImageFormat,
    pub selection: Selection,
}

/// What [`plot_dir`] did.
#[derive(Debug, Default)]
pub struct PlotReport {
    /// The files written, in order.
    pub written: Vec<PathBuf>,
    /// Figures not made and why (a resolution the trace is too short for, a missing input).
    pub notes: Vec<String>,
}

/// Builds the figures a selection asks for from the files in `dir`; notes say what was left out.
/// An error when the selection has nothing at all to draw from.
/// Titles name the trace the directory was made from (its summary's input, file name only),
/// else the directory's own name: never the path it happens to have.
pub fn figures_for(dir: &Path, selection: Selection) -> Result<(Vec<Figure>, Vec<String>), PlotError> {
    let label = sonde_output::read::input_name(dir).unwrap_or_else(|| file_name(dir));
    figures_titled(dir, &label, selection)
}

/// The last component of `path` (the whole path when it has none, as `/` or `..`).
fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned())
}

/// As [`figures_for`], the titles naming the directory `label`.
pub fn figures_titled(dir: &Path, label: &str, selection: Selection) -> Result<(Vec<Figure>, Vec<String>), PlotError> {
    let mut figs = Vec::new();
    let mut notes = Vec::new();
    let mut found_input = false;
    if matches!(selection, Selection::Time | Selection::All) {
        let path = dir.join("intervals.tsv");
        if path.is_file() {
            found_input = true;
            let rows = intervals::read_intervals(&path)?;
            let (time, skipped) = figures::time_figures(&rows, label);
            figs.extend(time.into_iter().map(|f| Figure::Time(Box::new(f))));
            notes.extend(skipped);
        } else {
            notes.push(format!("no time figures: {} not found", path.display()));
        }
        let path = dir.join("quantiles.tsv");
        if path.is_file() {
            found_input = true;
            match quantiles::rtt_time_figure(&quantiles::read_quantiles(&path, &quantiles::RTT_METRIC_NAMES)?, label) {
                Ok(fig) => figs.push(Figure::Lines(Box::new(fig))),
                Err(note) => notes.push(note),
            }
        }
    }
    if matches!(selection, Selection::Distributions | Selection::All) {
        let mut missing = Vec::new();
        let mut read = |name: &str| -> Result<Vec<flows::FlowSample>, PlotError> {
            let path = dir.join(format!("{name}.tsv"));
            if path.is_file() {
                found_input = true;
                return flows::read_flows(&path);
            }
            if dir.join(format!("{name}.jsonl")).is_file() {
                notes.push(format!("{name}.jsonl not read: the distributions read the TSV flow logs (--format tsv)"));
            } else {
                missing.push(format!("{name}.tsv"));
            }
            Ok(Vec::new())
        };
        let (tcp, udp) = (read("tcp_flows")?, read("udp_flows")?);
        let logs_found = missing.len() < 2;
        if !missing.is_empty() {
            notes.push(format!("{} not found in {}", missing.join(" and "), dir.display()));
        }
        let hist_path = dir.join("histograms.tsv");
        let samples = if hist_path.is_file() {
            found_input = true;
            Some(histograms::read_histograms(&hist_path, "tcp_rtt_sample")?)
        } else {
            None
        };
        let dists = figures::flow_figures(&tcp, &udp, label);
        if dists.is_empty() && logs_found {
            notes.push("no flow duration or size figure: the flow logs hold no flow".to_string());
        }
        figs.extend(dists.into_iter().map(Figure::Dist));
        match figures::rtt_figure(&tcp, samples.as_deref(), label) {
            Some(f) => figs.push(Figure::Pdf(f)),
            None if logs_found || samples.is_some() => {
                notes.push("no RTT figure: no TCP flow with RTT samples, no tcp_rtt_sample histogram".to_string())
            }
            None => {}
        }
    }
    if !found_input {
        let wanted = match selection {
            Selection::Time => "intervals.tsv or quantiles.tsv",
            Selection::Distributions => "flow log (tcp_flows.tsv, udp_flows.tsv) or histograms.tsv",
            Selection::All => "intervals.tsv, quantiles.tsv, flow log or histograms.tsv",
        };
        return Err(PlotError::NoInput { dir: dir.to_path_buf(), wanted: wanted.to_string() });
    }
    Ok((figs, notes))
}

/// Reads `req.input` (and `req.store`), draws the selected figures and writes them into
/// `req.output`.
pub fn plot_dir(req: &PlotRequest) -> Result<PlotReport, PlotError> {
    let (mut figs, mut notes) = match &req.input {
        Some(dir) => figures_for(dir, req.selection)?,
        None => (Vec::new(), Vec::new()),
    };
    if let Some(path) = &req.store {
        let (time, skipped) = store::read_store_figures(path, &file_name(path))?;
        figs.extend(time);
        notes.extend(skipped.into_iter().map(|s| format!("{}: {s}", path.display())));
    }
    if figs.is_empty() {
        return Err(PlotError::NothingToDraw { notes });
    }
    std::fs::create_dir_all(&req.output).map_err(|e| io_error(&req.output, e))?;
    let mut report = PlotReport { written: Vec::new(), notes };
    for fig in &figs {
        let path = req.output.join(format!("{}.{}", fig.file_stem(), req.format.extension()));
        let bytes = fig.render(req.format).map_err(|reason| PlotError::Render { path: path.clone(), reason })?;
        // Whole or not at all (`NAME.part`, then renamed); a link there is replaced, not followed.
        sonde_output::write_atomic(&path, |w| w.write_all(&bytes)).map_err(|e| io_error(&path, e))?;
        report.written.push(path);
    }
    Ok(report)
}
