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
//!   present, else from the flows' average RTTs);
//! - Tstat's Fig. 1 from `quantiles.tsv` (per-flow TCP throughput mean, p95 and p99 per
//!   interval, c2s above the axis and s2c below) and Fig. 2 from the TCP flow log ([`periods`]:
//!   lifetime survival function and throughput pdf, all flows and busy hours against off-peak);
//! - the phase plot of each association (gap n against gap n + 1, Kitatsuji's Fig. 11) from
//!   `definition_association_samples.tsv` ([`phase`]).
//!
//! - time figures from a round-robin store (`sonde analyze --store`): traffic, RTT percentiles
//!   and TCP throughput, one of each per resolution it keeps ([`store`]).
//!
//! Reading never panics on a malformed file: errors name the file and line. The series are
//! computed in [`figures`] as plain numbers and only drawn by [`Figure::render`], which needs no
//! system library or font (DejaVu Sans is embedded).
//!
//! ```
//! use sonde_plot::{figures, ImageFormat, Figure};
//! let flows = [sonde_plot::flows::FlowSample {
//!     duration_s: 1.5, c2s_bytes: 300.0, s2c_bytes: 5428.0, c2s_rtt_ms: Some(40.0), s2c_rtt_ms: None,
//!     start_s: Some(1_700_000_000.0), c2s_sent: true, s2c_sent: true,
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
pub mod periods;
pub mod phase;
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
    /// Time figures (from `intervals.tsv` and `quantiles.tsv`), Tstat's Fig. 1 among them.
    Time,
    /// Distributions (from the flow logs and `histograms.tsv`), Tstat's Fig. 2 (its busy hours
    /// from `intervals.tsv`), and the associations' phase plots.
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
            let metrics = [quantiles::RTT_METRIC_NAMES[0], quantiles::RTT_METRIC_NAMES[1], quantiles::THRU_METRIC];
            let rows = quantiles::read_quantiles(&path, &metrics)?;
            for fig in [quantiles::rtt_time_figure(&rows, label), quantiles::thru_time_figure(&rows, label)] {
                match fig {
                    Ok(fig) => figs.push(Figure::Lines(Box::new(fig))),
                    Err(note) => notes.push(note),
                }
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
        if logs_found {
            tstat_fig2(dir, &tcp, label, &mut figs, &mut notes)?;
        }
        found_input |= phase_figures(dir, label, &mut figs, &mut notes)?;
    }
    if !found_input {
        let wanted = match selection {
            Selection::Time => "intervals.tsv or quantiles.tsv",
            Selection::Distributions => {
                "flow log (tcp_flows.tsv, udp_flows.tsv), histograms.tsv or definition_association_samples.tsv"
            }
            Selection::All => "intervals.tsv, quantiles.tsv, flow log or histograms.tsv",
        };
        return Err(PlotError::NoInput { dir: dir.to_path_buf(), wanted: wanted.to_string() });
    }
    Ok((figs, notes))
}

/// Tstat's Fig. 2 from the TCP flow log: over every flow, and busy hours against off-peak
/// (the hours from `intervals.tsv`); notes say what was left out and why.
fn tstat_fig2(
    dir: &Path,
    tcp: &[flows::FlowSample],
    label: &str,
    figs: &mut Vec<Figure>,
    notes: &mut Vec<String>,
) -> Result<(), PlotError> {
    let Some(all) = periods::lifetime_figure(tcp, label) else {
        notes.push("no flow-lifetime or busy-offpeak figure: the TCP flow log holds no flow".to_string());
        return Ok(());
    };
    figs.push(Figure::Periods(Box::new(all)));
    let path = dir.join("intervals.tsv");
    if !path.is_file() {
        notes.push(format!("no busy-offpeak figure: {} not found (the hours are ranked by its bytes)", path.display()));
        return Ok(());
    }
    let busy = periods::hourly_bytes(&intervals::read_intervals(&path)?)
        .and_then(|hours| periods::busy_figure(tcp, &hours, label));
    match busy {
        Ok(fig) => figs.push(Figure::Periods(Box::new(fig))),
        Err(why) => notes.push(format!("no busy-offpeak figure: {why}")),
    }
    Ok(())
}

/// The associations' phase plots from `definition_association_samples.tsv`; whether the file
/// was there.
fn phase_figures(dir: &Path, label: &str, figs: &mut Vec<Figure>, notes: &mut Vec<String>) -> Result<bool, PlotError> {
    let path = dir.join("definition_association_samples.tsv");
    let totals_path = dir.join("definition_associations.tsv");
    if !path.is_file() {
        if totals_path.is_file() {
            notes.push(format!("no phase plot: {} not found", path.display()));
        }
        return Ok(false);
    }
    let totals = if totals_path.is_file() { phase::read_totals(&totals_path)? } else { Vec::new() };
    let written = phase::read_samples(&path)?;
    for a in &written {
        let taken = totals.iter().find(|t| t.0 == a.name).map(|t| (t.1, t.2));
        match phase::phase_figure(a, taken, label) {
            Ok(fig) => figs.push(Figure::Phase(Box::new(fig))),
            Err(why) => notes.push(why),
        }
    }
    // Associations with no row in the samples file: no sample taken, or none kept.
    for (name, taken, _) in totals.iter().filter(|t| !written.iter().any(|a| a.name == t.0)) {
        notes.push(match taken {
            0 => format!("no phase plot of association `{name}`: no sample taken"),
            n => format!(
                "no phase plot of association `{name}`: none of its {n} samples written (--association-samples)"
            ),
        });
    }
    Ok(true)
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
