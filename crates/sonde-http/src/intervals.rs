//! sonde-stats' `Report` turned into the snapshot's intervals, with the same numbers and units
//! intervals.tsv, quantiles.tsv and histograms.tsv write.

use sonde_stats::Report;

use crate::snapshot::{HistogramRow, IntervalData, IntervalHistograms, Intervals, QuantileRow};

/// Every interval of `report` with its traffic, quantiles and histograms.
pub fn from_report(report: &Report) -> Intervals {
    let interval_ns = report.interval_ns;
    let mut traffic = report.traffic_rows().into_iter().peekable();
    let mut out = Intervals { interval_s: interval_ns as f64 / 1e9, ..Intervals::default() };
    for (&index, interval) in &report.intervals {
        let start_ns = index * interval_ns;
        let start_s = start_ns as f64 / 1e9;
        let mut data = IntervalData {
            index,
            start_s,
            end_s: start_ns.saturating_add(interval_ns) as f64 / 1e9,
            ..IntervalData::default()
        };
        // The rows intervals.tsv writes, in the same order.
        while let Some((_, r)) = traffic.next_if(|(i, _)| *i == index) {
            data.traffic.push(r);
        }
        let mut histograms = IntervalHistograms { index, start_s, histograms: Vec::new() };
        for ((metric, dir, net), d) in interval.dists() {
            let unit = metric.unit();
            let [p50, p95, p99] = d.percentiles([50, 95, 99]).unwrap_or_default().map(|p| unit.scaled(p as f64));
            data.quantiles.push(QuantileRow {
                metric: metric.name().into(),
                dir: dir.name().into(),
                net: net.name().into(),
                unit: unit.name().into(),
                count: d.count,
                mean: unit.scaled(d.mean().unwrap_or(0.0)),
                min: unit.scaled(d.min as f64),
                p50,
                p95,
                p99,
                max: unit.scaled(d.max as f64),
            });
            let bins = d
                .sorted_bins()
                .into_iter()
                .map(|(bin, n)| {
                    let (lo, hi) = d.binning.range(bin);
                    [unit.scaled(lo as f64), unit.scaled(hi as f64), n as f64]
                })
                .collect();
            histograms.histograms.push(HistogramRow {
                metric: metric.name().into(),
                dir: dir.name().into(),
                net: net.name().into(),
                unit: unit.name().into(),
                bins,
            });
        }
        out.items.push(data);
        out.histograms.push(histograms);
    }
    out
}
