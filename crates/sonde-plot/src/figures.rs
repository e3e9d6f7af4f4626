//! What each figure shows, computed from the inputs: the series are plain numbers here, so tests
//! check them by hand; `render` only draws them.

use crate::dist::{ccdf, cdf, log_histogram, HistBin};
use crate::flows::FlowSample;
use crate::histograms::Histogram;
use crate::intervals::{aggregate, Bin, IntervalRow, Net, Resolution, Span, PROTOS};

/// Which directions go above and below the time axis.
#[derive(Debug, Clone, PartialEq)]
pub enum Layout {
    /// Inbound above, outbound below (Tstat's plots). `hidden_share` is the share of the bytes
    /// between internal hosts or between external hosts, which neither side shows.
    InOut { hidden_share: f64 },
    /// No in/out traffic (no internal networks were given): all traffic above the axis.
    AllAbove,
}

/// One quantity of a time figure, per bin: the stacked protocol values above and below the axis.
#[derive(Debug, Clone, PartialEq)]
pub struct Panel {
    pub caption: &'static str,
    pub unit: &'static str,
    /// `[bin][proto]`, protocols as [`PROTOS`].
    pub above: Vec<[f64; 4]>,
    pub below: Vec<[f64; 4]>,
}

/// Throughput, new flows and active flows over time at one resolution.
#[derive(Debug, Clone, PartialEq)]
pub struct TimeFigure {
    pub title: String,
    /// What is above and below the axis, for the legend.
    pub directions: String,
    pub file_stem: String,
    pub layout: Layout,
    /// Bin edges: bin `i` spans `edges[i]..edges[i + 1]`, clipped to the trace's span.
    pub edges: Vec<f64>,
    pub panels: [Panel; 3],
}

/// Values over time drawn as lines (percentiles), in panels sharing the time axis; unlike a
/// [`TimeFigure`] nothing is stacked, as percentiles do not add up.
#[derive(Debug, Clone, PartialEq)]
pub struct LineFigure {
    pub title: String,
    pub file_stem: String,
    /// Bin edges, as [`TimeFigure::edges`].
    pub edges: Vec<f64>,
    pub panels: Vec<LinePanel>,
    /// Under the panels: what the lines and bands are.
    pub legend: String,
}

/// One quantity of a [`LineFigure`], on a log axis (RTTs span decades), or mirrored: on a
/// linear axis, the lines marked [`Line::below`] under it (Tstat's two directions in one plot).
#[derive(Debug, Clone, PartialEq)]
pub struct LinePanel {
    pub caption: String,
    pub unit: &'static str,
    pub lines: Vec<Line>,
    pub mirrored: bool,
}

/// One series of a [`LinePanel`]: a value per bin, NaN where unknown (drawn as a gap).
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub label: String,
    /// Lines of one colour belong together (one direction and net).
    pub color: usize,
    /// Thicker for the central percentile: 0 is p50, 1 p95, 2 p99.
    pub weight: usize,
    pub values: Vec<f64>,
    /// A shaded range per bin around the line (the lowest and highest of a coarse row's steps).
    pub band: Option<Vec<(f64, f64)>>,
    /// In a mirrored panel: drawn below the axis (the values stay positive here).
    pub below: bool,
}

/// Builds the time figures: the native resolution and the coarser ones the span fills; the
/// notes say which resolutions were skipped and why.
pub fn time_figures(rows: &[IntervalRow], dir_label: &str) -> (Vec<TimeFigure>, Vec<String>) {
    let Some(span) = Span::of(rows) else {
        return (Vec::new(), vec!["intervals.tsv has no rows: no time figure".to_string()]);
    };
    let layout = layout(rows);
    let (resolutions, skipped) = crate::intervals::resolutions(&span);
    let figures = resolutions.iter().map(|r| time_figure(rows, &span, r, &layout, dir_label)).collect();
    let notes = skipped.into_iter().map(|s| format!("time figure skipped: {s}")).collect();
    (figures, notes)
}

fn layout(rows: &[IntervalRow]) -> Layout {
    let bytes = |f: &dyn Fn(Net) -> bool| rows.iter().filter(|r| f(r.net)).map(|r| r.bytes).sum::<f64>();
    let in_out = bytes(&|n| matches!(n, Net::In | Net::Out));
    let all = bytes(&|_| true);
    if in_out > 0.0 {
        Layout::InOut { hidden_share: (all - in_out) / all }
    } else {
        Layout::AllAbove
    }
}

fn time_figure(rows: &[IntervalRow], span: &Span, res: &Resolution, layout: &Layout, dir_label: &str) -> TimeFigure {
    let bins = aggregate(rows, span, res.bin_s, res.align);
    // Bins are drawn over the part the trace covers: a coarse first or last bin only partly.
    let mut edges: Vec<f64> = bins.iter().map(|b| b.start_s.max(span.start_s)).collect();
    edges.extend(bins.last().map(|b| b.end_s.min(span.end_s)));
    let side = |b: &Bin, pick: fn(&crate::intervals::Rates) -> [f64; 4], nets: &[Net]| {
        let mut v = [0.0; 4];
        for &n in nets {
            for (acc, x) in v.iter_mut().zip(pick(&b.net[n as usize])) {
                *acc += x;
            }
        }
        v
    };
    let (up, down): (&[Net], &[Net]) = match layout {
        Layout::InOut { .. } => (&[Net::In], &[Net::Out]),
        Layout::AllAbove => (&[Net::In, Net::Out, Net::Loc, Net::Ext], &[]),
    };
    let panel = |caption, unit, pick: fn(&crate::intervals::Rates) -> [f64; 4]| Panel {
        caption,
        unit,
        above: bins.iter().map(|b| side(b, pick, up)).collect(),
        below: bins.iter().map(|b| side(b, pick, down)).collect(),
    };
    let panels = [
        panel("Throughput", "bit/s", |t| t.bit_rate),
        panel("New flows", "flows/s", |t| t.flows_opened_rate),
        panel("Active flows", "flows (mean)", |t| t.flows_active),
    ];
    let directions = match layout {
        Layout::InOut { hidden_share } if *hidden_share > 0.0 => format!(
            "above the axis: in (towards internal hosts); below: out; not shown: local and external, {} of bytes",
            percent(*hidden_share)
        ),
        Layout::InOut { .. } => {
            "above the axis: in (towards internal hosts); below: out (from internal hosts)".to_string()
        }
        Layout::AllAbove => "all traffic above the axis: no in/out traffic (no internal networks given)".to_string(),
    };
    TimeFigure {
        title: format!("{dir_label}: traffic per {} bin", res.label),
        directions,
        file_stem: format!("time-{}", res.tag),
        layout: layout.clone(),
        edges,
        panels,
    }
}

/// "12.5 %", or "< 0.1 %" for a share too small to show at that precision.
fn percent(share: f64) -> String {
    if share > 0.0 && share < 0.001 {
        "< 0.1 %".to_string()
    } else {
        format!("{:.1} %", share * 100.0)
    }
}

/// One distribution of a CDF/CCDF figure.
#[derive(Debug, Clone, PartialEq)]
pub struct DistSeries {
    pub label: String,
    /// `(x, P(X ≤ x))` and `(x, P(X ≥ x))` at each distinct value, zeros included (a log axis
    /// cannot show them, but they count in every share).
    pub cdf: Vec<(f64, f64)>,
    pub ccdf: Vec<(f64, f64)>,
}

/// What the x values of a distribution are, for labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quantity {
    /// Seconds.
    Duration,
    Bytes,
}

/// CDF (left) and CCDF (right, log-log) of one quantity, several series.
#[derive(Debug, Clone, PartialEq)]
pub struct DistFigure {
    pub title: String,
    pub file_stem: String,
    pub quantity: Quantity,
    pub x_desc: String,
    pub series: Vec<DistSeries>,
}

/// A probability mass per bin: the RTT figure.
#[derive(Debug, Clone, PartialEq)]
pub struct PdfSeries {
    pub label: String,
    pub bins: Vec<HistBin>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PdfFigure {
    pub title: String,
    pub file_stem: String,
    pub x_desc: String,
    pub y_desc: String,
    pub series: Vec<PdfSeries>,
}

fn dist_series(label: &str, values: &[f64]) -> Option<DistSeries> {
    if values.is_empty() {
        return None;
    }
    let zeros = values.iter().filter(|&&v| v <= 0.0).count();
    let label = match zeros {
        0 => format!("{label} (n={})", values.len()),
        z => format!("{label} (n={}, {z} at 0 not shown)", values.len()),
    };
    Some(DistSeries { label, cdf: cdf(values), ccdf: ccdf(values) })
}

/// Flow duration and flow size (payload bytes per direction) from the TCP and UDP logs.
pub fn flow_figures(tcp: &[FlowSample], udp: &[FlowSample], dir_label: &str) -> Vec<DistFigure> {
    let col = |flows: &[FlowSample], f: fn(&FlowSample) -> f64| flows.iter().map(f).collect::<Vec<f64>>();
    let durations: Vec<DistSeries> = [("TCP", tcp), ("UDP", udp)]
        .iter()
        .filter_map(|(name, flows)| dist_series(name, &col(flows, |f| f.duration_s)))
        .collect();
    let mut sizes = Vec::new();
    for (name, flows) in [("TCP", tcp), ("UDP", udp)] {
        sizes.extend(dist_series(&format!("{name} c2s"), &col(flows, |f| f.c2s_bytes)));
        sizes.extend(dist_series(&format!("{name} s2c"), &col(flows, |f| f.s2c_bytes)));
    }
    let mut out = Vec::new();
    if !durations.is_empty() {
        out.push(DistFigure {
            title: format!("{dir_label}: flow duration (first to last packet)"),
            file_stem: "flow-duration".to_string(),
            quantity: Quantity::Duration,
            x_desc: "flow duration (durat)".to_string(),
            series: durations,
        });
    }
    if !sizes.is_empty() {
        out.push(DistFigure {
            title: format!("{dir_label}: flow size, payload bytes per direction"),
            file_stem: "flow-size".to_string(),
            quantity: Quantity::Bytes,
            x_desc: "payload bytes (c_bytes_all, s_bytes_all)".to_string(),
            series: sizes,
        });
    }
    out
}

/// Bins per decade of the RTT histogram made from the flow logs.
pub const RTT_BINS_PER_DECADE: u32 = 10;

/// The RTT pdf: from `histograms.tsv`'s `tcp_rtt_sample` rows (every RTT sample) when given,
/// otherwise from the flows' average RTT per direction (one value per flow with samples).
pub fn rtt_figure(tcp: &[FlowSample], samples: Option<&[Histogram]>, dir_label: &str) -> Option<PdfFigure> {
    let (series, what, y_desc) = match samples {
        Some(hists) if !hists.is_empty() => {
            let series = hists
                .iter()
                .map(|h| PdfSeries { label: format!("{} (n={})", h.dir, h.count), bins: h.bins.clone() })
                .collect();
            (series, "every RTT sample (histograms.tsv, tcp_rtt_sample)", "share of samples per bin")
        }
        _ => {
            let mut series = Vec::new();
            for (label, pick) in [
                ("c2s (c_rtt_avg)", (|f: &FlowSample| f.c2s_rtt_ms) as fn(&FlowSample) -> Option<f64>),
                ("s2c (s_rtt_avg)", |f: &FlowSample| f.s2c_rtt_ms),
            ] {
                let values: Vec<f64> = tcp.iter().filter_map(pick).collect();
                if !values.is_empty() {
                    let bins = log_histogram(&values, RTT_BINS_PER_DECADE);
                    series.push(PdfSeries { label: format!("{label} (n={})", values.len()), bins });
                }
            }
            (series, "average RTT per TCP flow with samples (tcp_flows.tsv)", "share of flows per bin (10 per decade)")
        }
    };
    (!series.is_empty()).then(|| PdfFigure {
        title: format!("{dir_label}: RTT pdf, {what}"),
        file_stem: "rtt-pdf".to_string(),
        x_desc: "RTT (ms)".to_string(),
        y_desc: y_desc.to_string(),
        series,
    })
}

/// The protocols that carry something in a time figure, for its legend.
pub fn protos_present(fig: &TimeFigure) -> [bool; 4] {
    let mut present = [false; 4];
    for panel in &fig.panels {
        for v in panel.above.iter().chain(&panel.below) {
            for (p, x) in present.iter_mut().zip(v) {
                *p |= *x > 0.0;
            }
        }
    }
    present
}

/// Names of [`PROTOS`] for legends.
pub const PROTO_LABELS: [&str; 4] = ["TCP", "UDP", "ICMP", "other"];
const _: () = assert!(PROTOS.len() == PROTO_LABELS.len());
