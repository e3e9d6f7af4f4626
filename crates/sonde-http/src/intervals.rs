//! sonde-stats' `Report` turned into the snapshot's intervals, with the same numbers and units
//! intervals.tsv, quantiles.tsv and histograms.tsv write.

use sonde_stats::{Net, Proto, Report, Unit};

use crate::snapshot::{HistogramRow, IntervalData, IntervalHistograms, Intervals, QuantileRow, TrafficRow};

/// Base-unit value in the unit written out (ns → ms, ppm → %).
fn scaled(unit: Unit, value: f64) -> f64 {
    match unit {
        Unit::Ms => value / 1e6,
        Unit::Percent => value / 1e4,
        _ => value,
    }
}

/// Every interval of `report` with its traffic, quantiles and histograms.
pub fn from_report(report: &Report) -> Intervals {
    let interval_ns = report.interval_ns;
    let active = report.active_flows();
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
        for proto in Proto::ALL {
            for net in Net::ALL {
                let t = interval.traffic(proto, net);
                let (opened, closed, act) = match proto {
                    Proto::Tcp | Proto::Udp => {
                        let (p, n) = (proto as usize, net as usize);
                        let act = active.get(&index).map_or(0, |a| a[p][n]);
                        (interval.flows.opened[p][n], interval.flows.closed[p][n], act)
                    }
                    _ => (0, 0, 0),
                };
                // The rows intervals.tsv leaves out (nothing at all) are left out here too.
                if t.packets == 0 && opened == 0 && closed == 0 && act == 0 {
                    continue;
                }
                data.traffic.push(TrafficRow {
                    proto: proto.name().into(),
                    net: net.name().into(),
                    packets: t.packets,
                    bytes: t.bytes,
                    flows_opened: opened,
                    flows_closed: closed,
                    flows_active: act,
                });
            }
        }
        let mut histograms = IntervalHistograms { index, start_s, histograms: Vec::new() };
        for ((metric, dir, net), d) in interval.dists() {
            let unit = metric.unit();
            let pct = |p| scaled(unit, d.percentile(p).unwrap_or(0) as f64);
            data.quantiles.push(QuantileRow {
                metric: metric.name().into(),
                dir: dir.name().into(),
                net: net.name().into(),
                unit: unit.name().into(),
                count: d.count,
                mean: scaled(unit, d.mean().unwrap_or(0.0)),
                min: scaled(unit, d.min as f64),
                p50: pct(50),
                p95: pct(95),
                p99: pct(99),
                max: scaled(unit, d.max as f64),
            });
            let bins = d
                .sorted_bins()
                .into_iter()
                .map(|(bin, n)| {
                    let (lo, hi) = d.binning.range(bin);
                    [scaled(unit, lo as f64), scaled(unit, hi as f64), n as f64]
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
