//! `quantiles.tsv` and the figure of TCP RTT percentiles over time made from it: per interval,
//! the p50, p95 and p99 of the handshake RTT (`tcp_hs_rtt`) and of the per-flow average RTT
//! (`tcp_rtt_avg`), one panel per metric and direction, one colour per `net`.
//!
//! Percentiles of different nets cannot be merged from this file, so each net keeps its own
//! lines. They cannot be re-binned either: the figure is drawn at the file's own interval only.
//! An interval with no row (no flow with that RTT closed in it) is a gap, not a zero.

use std::path::Path;

use crate::error::PlotError;
use crate::figures::{Line, LineFigure, LinePanel};
use crate::intervals::{resolutions, Align, Net, Span};
use crate::table::Tsv;

/// The percentiles of one metric, direction and net in one interval: the part of a
/// `quantiles.tsv` row the figure draws (the whole row, as the HTTP API serves it, is
/// `sonde_http::QuantileRow`).
#[derive(Debug, Clone, PartialEq)]
pub struct PercentileRow {
    pub start_s: f64,
    pub end_s: f64,
    pub metric: String,
    pub dir: String,
    pub net: Net,
    /// p50, p95, p99 (NaN for `-`).
    pub percentiles: [f64; 3],
    /// The mean (NaN for `-`, or when the file has no `mean` column).
    pub mean: f64,
}

/// The metrics of the RTT figure, with the panel captions.
pub const RTT_METRICS: [(&str, &str); 2] =
    [("tcp_hs_rtt", "Handshake RTT (tcp_hs_rtt)"), ("tcp_rtt_avg", "Per-flow average RTT (tcp_rtt_avg)")];
/// The names of [`RTT_METRICS`], for [`read_quantiles`].
pub const RTT_METRIC_NAMES: [&str; 2] = [RTT_METRICS[0].0, RTT_METRICS[1].0];
const PERCENTILES: [&str; 3] = ["p50", "p95", "p99"];

/// Reads the rows of `metrics` from `quantiles.tsv` (any column order; other rows skipped).
pub fn read_quantiles(path: &Path, metrics: &[&str]) -> Result<Vec<PercentileRow>, PlotError> {
    parse_quantiles(Tsv::open(path)?, metrics)
}

pub(crate) fn parse_quantiles<R: std::io::Read>(
    tsv: Tsv<R>,
    metrics: &[&str],
) -> Result<Vec<PercentileRow>, PlotError> {
    let (start, end, metric, dir, net) =
        (tsv.column("start")?, tsv.column("end")?, tsv.column("metric")?, tsv.column("dir")?, tsv.column("net")?);
    let pcts = [tsv.column("p50")?, tsv.column("p95")?, tsv.column("p99")?];
    let mean_col = tsv.optional_column("mean");
    let mut rows = Vec::new();
    tsv.for_each_row(|r| {
        if !metrics.contains(&r.text(metric)) {
            return Ok(());
        }
        let (start_s, end_s) = (r.number(start, "start")?, r.number(end, "end")?);
        if end_s <= start_s {
            return Err(r.error(format!("end {end_s} is not after start {start_s}")));
        }
        let n = r.text(net);
        let mut percentiles = [f64::NAN; 3];
        for (v, (&c, name)) in percentiles.iter_mut().zip(pcts.iter().zip(PERCENTILES)) {
            *v = r.optional_number(c, name)?.unwrap_or(f64::NAN);
        }
        let mean = match mean_col {
            Some(c) => r.optional_number(c, "mean")?.unwrap_or(f64::NAN),
            None => f64::NAN,
        };
        rows.push(PercentileRow {
            mean,
            start_s,
            end_s,
            metric: r.text(metric).to_string(),
            dir: r.text(dir).to_string(),
            net: Net::from_name(n).ok_or_else(|| r.error(format!("column `net`: `{n}` is not in, out, loc or ext")))?,
            percentiles,
        });
        Ok(())
    })?;
    Ok(rows)
}

/// The bins of a figure at the file's own interval: the edges and the bin of a row's start;
/// or why there is none (`what` names the rows, for the message).
fn native_bins(rows: &[PercentileRow], what: &str) -> Result<(Vec<f64>, impl Fn(f64) -> usize, String), String> {
    let Some(span) = Span::of_intervals(rows.iter().map(|r| (r.start_s, r.end_s))) else {
        return Err(format!("quantiles.tsv has no {what} row"));
    };
    let (chosen, skipped) = resolutions(&span);
    let Some(native) = chosen.into_iter().find(|r| r.align == Align::TraceStart) else {
        return Err(skipped.first().cloned().unwrap_or_default());
    };
    let bins = (span.length_s() / native.bin_s).round().max(1.0) as usize;
    let edges: Vec<f64> = (0..=bins).map(|i| (span.start_s + i as f64 * native.bin_s).min(span.end_s)).collect();
    let (start, bin_s) = (span.start_s, native.bin_s);
    // A microsecond of slack (the file's precision), as the traffic bins.
    let bin_of = move |t: f64| (((t - start) / bin_s) + 1e-6 / bin_s).floor() as usize;
    Ok((edges, bin_of, native.tag))
}

/// The RTT percentiles at the file's interval, or why there is no such figure.
pub fn rtt_time_figure(rows: &[PercentileRow], dir_label: &str) -> Result<LineFigure, String> {
    let rows: Vec<PercentileRow> =
        rows.iter().filter(|r| RTT_METRIC_NAMES.contains(&r.metric.as_str())).cloned().collect();
    let rows = rows.as_slice();
    let (edges, bin_of, tag) =
        native_bins(rows, "tcp_hs_rtt or tcp_rtt_avg").map_err(|e| format!("no RTT time figure: {e}"))?;
    let bins = edges.len() - 1;
    let mut panels = Vec::new();
    for (metric, caption) in RTT_METRICS {
        for dir in ["c2s", "s2c"] {
            let of = |r: &&PercentileRow| r.metric == metric && r.dir == dir;
            let mut lines = Vec::new();
            for net in Net::ALL.into_iter().filter(|n| rows.iter().filter(of).any(|r| r.net == *n)) {
                for (k, pct) in PERCENTILES.iter().enumerate() {
                    let mut values = vec![f64::NAN; bins];
                    for r in rows.iter().filter(of).filter(|r| r.net == net) {
                        if let Some(v) = values.get_mut(bin_of(r.start_s)) {
                            *v = r.percentiles[k];
                        }
                    }
                    let label = format!("{} {pct}", net.name());
                    lines.push(Line { label, color: net as usize, weight: k, values, band: None, below: false });
                }
            }
            if !lines.is_empty() {
                panels.push(LinePanel { caption: format!("{caption}, {dir}"), unit: "ms", lines, mirrored: false });
            }
        }
    }
    Ok(LineFigure {
        title: format!("{dir_label}: TCP RTT percentiles per {} interval", interval_label(&edges)),
        file_stem: format!("time-rtt-{tag}"),
        edges,
        panels,
        legend: "quantiles.tsv; one colour per net; thick p50, medium p95, thin p99; gaps: no value in the interval"
            .to_string(),
    })
}

/// The metric of Tstat's Fig. 1: per-flow TCP throughput, per direction.
pub const THRU_METRIC: &str = "tcp_thru";

/// Tstat's Fig. 1: the per-flow TCP throughput's mean, p95 and p99 per interval (the flows
/// closed in it), client→server above the axis and server→client below, one colour per `net`;
/// at the file's interval (percentiles cannot be re-binned); or why there is none.
pub fn thru_time_figure(rows: &[PercentileRow], dir_label: &str) -> Result<LineFigure, String> {
    let rows: Vec<PercentileRow> = rows.iter().filter(|r| r.metric == THRU_METRIC).cloned().collect();
    let (edges, bin_of, tag) =
        native_bins(&rows, THRU_METRIC).map_err(|e| format!("no TCP throughput time figure: {e}"))?;
    let bins = edges.len() - 1;
    let mut lines = Vec::new();
    for net in Net::ALL.into_iter().filter(|n| rows.iter().any(|r| r.net == *n)) {
        for (dir, below) in [("c2s", false), ("s2c", true)] {
            // mean, p95, p99: Tstat's three.
            for (k, (stat, pick)) in [
                ("mean", (|r: &PercentileRow| r.mean) as fn(&PercentileRow) -> f64),
                ("p95", |r: &PercentileRow| r.percentiles[1]),
                ("p99", |r: &PercentileRow| r.percentiles[2]),
            ]
            .into_iter()
            .enumerate()
            {
                let mut values = vec![f64::NAN; bins];
                let mut any = false;
                for r in rows.iter().filter(|r| r.net == net && r.dir == dir) {
                    if let Some(v) = values.get_mut(bin_of(r.start_s)) {
                        *v = pick(r);
                        any = true;
                    }
                }
                if any {
                    let label = format!("{} {stat}", net.name());
                    lines.push(Line { label, color: net as usize, weight: k, values, band: None, below });
                }
            }
        }
    }
    Ok(LineFigure {
        title: format!("{dir_label}: per-flow TCP throughput per {} interval (Tstat's Fig. 1)", interval_label(&edges)),
        file_stem: format!("time-thru-{tag}"),
        edges,
        panels: vec![LinePanel {
            caption: "Per-flow throughput (tcp_thru)   ↑ c2s   ↓ s2c".to_string(),
            unit: "bit/s",
            lines,
            mirrored: true,
        }],
        legend: "quantiles.tsv, flows closed in each interval; one colour per net; thick mean, medium p95, thin p99; \
                 gaps: no value"
            .to_string(),
    })
}

/// "60 s": the length of the figure's first bin.
fn interval_label(edges: &[f64]) -> String {
    crate::intervals::duration_label(edges.get(1).zip(edges.first()).map_or(0.0, |(b, a)| b - a))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "start\tend\tmetric\tdir\tnet\tunit\tcount\tmean\tmin\tp50\tp95\tp99\tmax\n";

    fn parse(text: &str) -> Result<Vec<PercentileRow>, PlotError> {
        parse_quantiles(Tsv::new(Path::new("q.tsv"), text.as_bytes()).unwrap(), &RTT_METRIC_NAMES)
    }

    #[test]
    fn rows_of_the_rtt_metrics_give_lines_per_net_with_gaps() {
        // Intervals of 60 s from 600: 600 and 720 have RTTs, 660 none (a gap), 780 only ip_len.
        let text = format!(
            "{HEADER}600\t660\ttcp_rtt_avg\tc2s\tout\tms\t3\t20\t10\t15\t30\t40\t40\n\
             600\t660\ttcp_rtt_avg\tc2s\tin\tms\t1\t1\t1\t1\t1\t1\t1\n\
             600\t660\tip_len\t-\tout\tbytes\t9\t60\t40\t52\t1500\t1500\t1500\n\
             720\t780\ttcp_rtt_avg\tc2s\tout\tms\t2\t22\t11\t16\t31\t41\t41\n\
             720\t780\ttcp_hs_rtt\ts2c\tout\tms\t2\t2\t1\t2\t3\t-\t3\n\
             780\t840\tip_len\t-\tout\tbytes\t9\t60\t40\t52\t1500\t1500\t1500\n"
        );
        let rows = parse(&text).unwrap();
        assert_eq!(rows.len(), 4, "ip_len rows skipped");
        let fig = rtt_time_figure(&rows, "t").unwrap();
        assert_eq!(fig.file_stem, "time-rtt-native-60s");
        // The RTT rows span 600..780: three bins.
        assert_eq!(fig.edges, [600.0, 660.0, 720.0, 780.0]);
        let captions: Vec<&str> = fig.panels.iter().map(|p| p.caption.as_str()).collect();
        assert_eq!(captions, ["Handshake RTT (tcp_hs_rtt), s2c", "Per-flow average RTT (tcp_rtt_avg), c2s"]);
        let avg = &fig.panels[1];
        let labels: Vec<&str> = avg.lines.iter().map(|l| l.label.as_str()).collect();
        assert_eq!(labels, ["in p50", "in p95", "in p99", "out p50", "out p95", "out p99"]);
        let out_p95 = &avg.lines[4].values;
        assert_eq!((out_p95[0], out_p95[2]), (30.0, 31.0));
        assert!(out_p95[1].is_nan(), "an interval without a row is a gap");
        assert!(avg.lines[0].values[2].is_nan());
        // `-` is unknown, not zero.
        assert!(fig.panels[0].lines[2].values[2].is_nan());
        assert_eq!(fig.panels[0].lines[1].values[2], 3.0);
    }

    #[test]
    fn no_rtt_rows_or_one_interval_is_no_figure_and_bad_rows_are_errors() {
        let only_len = format!("{HEADER}600\t660\tip_len\t-\tout\tbytes\t9\t60\t40\t52\t1500\t1500\t1500\n");
        let e = rtt_time_figure(&parse(&only_len).unwrap(), "t").unwrap_err();
        assert!(e.contains("no tcp_hs_rtt or tcp_rtt_avg row"), "{e}");
        let one = format!("{HEADER}600\t660\ttcp_rtt_avg\tc2s\tout\tms\t3\t20\t10\t15\t30\t40\t40\n");
        let e = rtt_time_figure(&parse(&one).unwrap(), "t").unwrap_err();
        assert!(e.contains("fewer than 2 intervals"), "{e}");
        let bad = format!("{HEADER}600\t660\ttcp_rtt_avg\tc2s\tout\tms\t3\t20\t10\tx\t30\t40\t40\n");
        assert_eq!(parse(&bad).unwrap_err().to_string(), "q.tsv:2: column `p50`: `x` is not a non-negative number");
        let e = parse("start\tend\tmetric\tdir\tnet\n").unwrap_err().to_string();
        assert_eq!(e, "q.tsv: the header has no column `p50`");
    }
}
