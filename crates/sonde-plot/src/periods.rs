//! Tstat's Fig. 2: the survival function of the TCP flow lifetime, `P(duration > x)` on
//! log-log axes, beside the pdf of the per-flow throughput; over the whole trace
//! (`flow-lifetime`), and for its busy hours against its off-peak ones (`busy-offpeak`).
//!
//! **Busy and off-peak hours.** The hours are the UTC clock hours `[h, h + 1 h)` in which
//! `intervals.tsv` has traffic, each weighed by its bytes (every protocol and direction; an
//! interval counts wholly in the hour its start falls in). Ranked by bytes (ties: the earlier
//! hour first), the top quarter of them (rounded up) are the busy hours and the bottom quarter
//! the off-peak ones, so the two never share an hour once there are two. (Tstat's paper takes
//! 10:00–15:00 against 22:00–06:00 of a month: the 5 busiest and 8 quietest hours of its
//! link's day, chosen by eye from Fig. 1; this rule picks them by volume, from the trace or
//! run itself.) A flow belongs to the hour of its first packet (`first`).

use std::collections::BTreeMap;

use crate::dist::{log_histogram, HistBin};
use crate::figures::PdfSeries;
use crate::flows::FlowSample;
use crate::intervals::{IntervalRow, Span};

/// Bins per decade of the throughput pdf.
pub const THRU_BINS_PER_DECADE: u32 = 10;
const HOUR_S: f64 = 3600.0;

/// `(x, P(X > x))` at each distinct value `x`, ascending: the survival function (1 − CDF),
/// which is 0 at the largest value.
pub fn survival(values: &[f64]) -> Vec<(f64, f64)> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    let n = v.len() as f64;
    let mut out: Vec<(f64, f64)> = Vec::new();
    for (i, &x) in v.iter().enumerate() {
        let above = (v.len() - i - 1) as f64 / n;
        match out.last_mut() {
            Some(last) if last.0 == x => last.1 = above,
            _ => out.push((x, above)),
        }
    }
    out
}

/// One set of flows of a [`PeriodFigure`].
#[derive(Debug, Clone, PartialEq)]
pub struct SurvivalSeries {
    pub label: String,
    /// [`survival`] of the flows' durations in seconds.
    pub points: Vec<(f64, f64)>,
}

/// Tstat's Fig. 2: per set of flows, the lifetime's survival function and the throughput pdf.
#[derive(Debug, Clone, PartialEq)]
pub struct PeriodFigure {
    pub title: String,
    pub file_stem: String,
    /// Under the panels: which flows and hours.
    pub note: String,
    pub survival: Vec<SurvivalSeries>,
    /// Per set: the share of the TCP directions' throughputs (c2s and s2c together, bit/s) per
    /// bin, [`THRU_BINS_PER_DECADE`] per decade; zeros left out (counted in the label).
    pub thru: Vec<PdfSeries>,
}

/// The two panels' series for one set of flows; `None` when it has no flow.
fn series(name: &str, flows: &[&FlowSample]) -> Option<(SurvivalSeries, Option<PdfSeries>)> {
    if flows.is_empty() {
        return None;
    }
    let durations: Vec<f64> = flows.iter().map(|f| f.duration_s).collect();
    let zeros = durations.iter().filter(|d| **d <= 0.0).count();
    let label = match zeros {
        0 => format!("{name} (n={})", flows.len()),
        z => format!("{name} (n={}, {z} of 0 s not shown)", flows.len()),
    };
    let thru: Vec<f64> = flows.iter().flat_map(|f| f.throughputs_bps()).collect();
    let thru_zeros = thru.iter().filter(|t| **t <= 0.0).count();
    let pdf = (thru.len() > thru_zeros).then(|| PdfSeries {
        label: match thru_zeros {
            0 => format!("{name} (n={})", thru.len()),
            z => format!("{name} (n={}, {z} at 0 not shown)", thru.len()),
        },
        bins: positive_shares(&thru),
    });
    Some((SurvivalSeries { label, points: survival(&durations) }, pdf))
}

/// [`log_histogram`] of the positive values, as shares of all of them (zeros included), so a
/// set with many empty directions does not look like one without.
fn positive_shares(values: &[f64]) -> Vec<HistBin> {
    let positive = values.iter().filter(|v| **v > 0.0).count() as f64;
    let all = values.len() as f64;
    log_histogram(values, THRU_BINS_PER_DECADE)
        .into_iter()
        .map(|b| HistBin { fraction: b.fraction * positive / all, ..b })
        .collect()
}

fn figure(
    title: String,
    file_stem: &str,
    note: String,
    sets: Vec<(SurvivalSeries, Option<PdfSeries>)>,
) -> PeriodFigure {
    let (survival, thru): (Vec<_>, Vec<_>) = sets.into_iter().unzip();
    PeriodFigure { title, file_stem: file_stem.to_string(), note, survival, thru: thru.into_iter().flatten().collect() }
}

/// Every TCP flow of the log: `flow-lifetime`; `None` without TCP flows.
pub fn lifetime_figure(tcp: &[FlowSample], dir_label: &str) -> Option<PeriodFigure> {
    let all: Vec<&FlowSample> = tcp.iter().collect();
    let set = series("all TCP flows", &all)?;
    Some(figure(
        format!("{dir_label}: TCP flow lifetime and per-flow throughput (Tstat's Fig. 2)"),
        "flow-lifetime",
        "tcp_flows.tsv: lifetime = durat; throughput = payload bits ÷ durat per direction that sent a packet \
         (c2s and s2c together, as histograms.tsv's tcp_thru)"
            .to_string(),
        vec![set],
    ))
}

/// Bytes per UTC clock hour (by the hour's index since the epoch) from `intervals.tsv`'s rows;
/// an error when its intervals are longer than an hour (hours cannot be told apart).
pub fn hourly_bytes(rows: &[IntervalRow]) -> Result<BTreeMap<i64, f64>, String> {
    let Some(span) = Span::of(rows) else { return Err("intervals.tsv has no rows".to_string()) };
    if span.interval_s > HOUR_S + 1e-6 {
        return Err(format!(
            "the intervals are {} long: hours cannot be told apart (run sonde analyze with --interval 3600 or less)",
            crate::intervals::duration_label(span.interval_s)
        ));
    }
    let mut hours = BTreeMap::new();
    for r in rows {
        // A microsecond of slack (the file's precision) for a start on the hour.
        *hours.entry(((r.start_s + 1e-6) / HOUR_S).floor() as i64).or_insert(0.0) += r.bytes;
    }
    Ok(hours)
}

/// The busy and off-peak hours (indexes since the epoch, ascending) by the rule of the module
/// doc: the top and bottom quarter of the hours with traffic, by bytes.
pub fn busy_and_off_peak(hours: &BTreeMap<i64, f64>) -> Result<(Vec<i64>, Vec<i64>), String> {
    let with_traffic: Vec<(i64, f64)> = hours.iter().filter(|(_, b)| **b > 0.0).map(|(h, b)| (*h, *b)).collect();
    if with_traffic.len() < 2 {
        return Err(format!(
            "the trace has traffic in {} clock hour{}: busy and off-peak hours need 2 or more",
            with_traffic.len(),
            if with_traffic.len() == 1 { "" } else { "s" }
        ));
    }
    let k = with_traffic.len().div_ceil(4);
    let mut ranked = with_traffic;
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut busy: Vec<i64> = ranked[..k].iter().map(|h| h.0).collect();
    let mut quiet: Vec<i64> = ranked[ranked.len() - k..].iter().map(|h| h.0).collect();
    busy.sort_unstable();
    quiet.sort_unstable();
    Ok((busy, quiet))
}

/// "10–11, 14–15 UTC on 2026-11-20" style list of hours, at most `most` of them then "…".
fn hours_text(hours: &[i64], most: usize) -> String {
    let mut parts: Vec<String> = hours
        .iter()
        .take(most)
        .map(|h| {
            let t = h * 3600;
            let s = sonde_types::time::utc(t);
            // "YYYY-MM-DD HH:MM:SS UTC" → "YYYY-MM-DD HH h"
            format!("{} {}h", &s[..10], &s[11..13])
        })
        .collect();
    if hours.len() > most {
        parts.push(format!("… ({} in all)", hours.len()));
    }
    parts.join(", ")
}

/// Busy hours against off-peak: `busy-offpeak`; or why not (too few hours, no `first`
/// column, no TCP flow in one of the two).
pub fn busy_figure(tcp: &[FlowSample], hours: &BTreeMap<i64, f64>, dir_label: &str) -> Result<PeriodFigure, String> {
    let (busy, quiet) = busy_and_off_peak(hours)?;
    if tcp.iter().any(|f| f.start_s.is_none()) {
        return Err("tcp_flows.tsv has no `first` column: flows cannot be put in hours".to_string());
    }
    let hour_of = |f: &FlowSample| f.start_s.map_or(i64::MIN, |s| ((s + 1e-6) / HOUR_S).floor() as i64);
    let of = |set: &[i64]| tcp.iter().filter(|f| set.binary_search(&hour_of(f)).is_ok()).collect::<Vec<_>>();
    let (busy_flows, quiet_flows) = (of(&busy), of(&quiet));
    let mut sets = Vec::new();
    for (name, flows, set) in [("busy", &busy_flows, &busy), ("off-peak", &quiet_flows, &quiet)] {
        let hours = set.len();
        let name = format!("{name}, {hours} h");
        match series(&name, flows) {
            Some(s) => sets.push(s),
            None => return Err(format!("no TCP flow started in the {name} hours")),
        }
    }
    let note = format!(
        "busy: the top quarter of the {} clock hours with traffic by bytes (intervals.tsv): {}; off-peak: the bottom \
         quarter: {}; a flow counts in the hour of its first packet",
        hours.values().filter(|b| **b > 0.0).count(),
        hours_text(&busy, 4),
        hours_text(&quiet, 4)
    );
    Ok(figure(
        format!("{dir_label}: busy hours against off-peak, TCP flow lifetime and throughput (Tstat's Fig. 2)"),
        "busy-offpeak",
        note,
        sets,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::intervals::Net;

    fn flow(start_s: f64, duration_s: f64, c2s: f64, s2c: f64) -> FlowSample {
        FlowSample {
            duration_s,
            c2s_bytes: c2s,
            s2c_bytes: s2c,
            c2s_rtt_ms: None,
            s2c_rtt_ms: None,
            start_s: Some(start_s),
            c2s_sent: true,
            s2c_sent: s2c > 0.0,
        }
    }

    fn row(start_s: f64, bytes: f64) -> IntervalRow {
        IntervalRow {
            start_s,
            end_s: start_s + 300.0,
            proto: 0,
            net: Net::Ext,
            bytes,
            flows_opened: 0.0,
            flows_active: 0.0,
        }
    }

    #[test]
    fn survival_by_hand() {
        // Sorted 1, 2, 2, 5: P(X > 1) = 3/4, P(X > 2) = 1/4, P(X > 5) = 0.
        assert_eq!(survival(&[2.0, 5.0, 1.0, 2.0]), [(1.0, 0.75), (2.0, 0.25), (5.0, 0.0)]);
        assert!(survival(&[]).is_empty());
    }

    #[test]
    fn busy_and_off_peak_are_the_top_and_bottom_quarter_of_the_hours_by_bytes() {
        // Hours 0..8 (5-min rows): hour h carries (h + 1) × 1000 bytes, hour 5 nothing at all.
        let mut rows = Vec::new();
        for h in 0..8 {
            if h != 5 {
                rows.push(row(h as f64 * 3600.0, 400.0 * (h + 1) as f64));
                rows.push(row(h as f64 * 3600.0 + 1800.0, 600.0 * (h + 1) as f64));
            }
        }
        let hours = hourly_bytes(&rows).unwrap();
        assert_eq!(hours.len(), 7);
        assert_eq!(hours[&3], 4000.0);
        // 7 hours with traffic: a quarter, rounded up, is 2.
        assert_eq!(busy_and_off_peak(&hours).unwrap(), (vec![6, 7], vec![0, 1]));
        let one: BTreeMap<i64, f64> = [(4, 10.0), (5, 0.0)].into_iter().collect();
        assert!(busy_and_off_peak(&one).unwrap_err().contains("traffic in 1 clock hour:"));
        let mut daily = rows.clone();
        for r in &mut daily {
            r.end_s = r.start_s + 7200.0;
        }
        assert!(hourly_bytes(&daily).unwrap_err().contains("2 h long"));
    }

    #[test]
    fn flows_go_to_the_hour_of_their_first_packet() {
        let rows: Vec<IntervalRow> = (0..4).map(|h| row(h as f64 * 3600.0, if h == 2 { 9e6 } else { 1e3 })).collect();
        let hours = hourly_bytes(&rows).unwrap();
        let flows = [
            flow(2.0 * 3600.0 + 5.0, 2.0, 1000.0, 0.0), // busy: 4000 bit/s, s2c sent nothing
            flow(2.0 * 3600.0 + 9.0, 0.5, 0.0, 500.0),  // busy: c2s 0 bit/s, s2c 8000 bit/s
            flow(3.0 * 3600.0, 10.0, 125.0, 125.0),     // hour 3: off-peak (of the tied hours, the latest)
            flow(3600.0 * 1.5, 1.0, 1.0, 1.0),          // hour 1: neither
        ];
        let fig = busy_figure(&flows, &hours, "t").unwrap();
        assert_eq!(fig.file_stem, "busy-offpeak");
        let labels: Vec<&str> = fig.survival.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(labels, ["busy, 1 h (n=2)", "off-peak, 1 h (n=1)"]);
        assert_eq!(fig.survival[0].points, [(0.5, 0.5), (2.0, 0.0)]);
        // Busy throughputs: 4000, 0 and 8000 bit/s; the zero is left out of the bins but not
        // out of the shares.
        assert_eq!(fig.thru[0].label, "busy, 1 h (n=3, 1 at 0 not shown)");
        let total: f64 = fig.thru[0].bins.iter().map(|b| b.fraction).sum();
        assert!((total - 2.0 / 3.0).abs() < 1e-12, "{total}");
        assert_eq!(fig.thru[1].label, "off-peak, 1 h (n=2)");
        let all = lifetime_figure(&flows, "t").unwrap();
        assert_eq!(all.survival[0].label, "all TCP flows (n=4)");
        // Without a start, flows cannot be put in hours.
        let mut no_start = flows.clone();
        no_start[0].start_s = None;
        assert!(busy_figure(&no_start, &hours, "t").unwrap_err().contains("no `first` column"));
    }
}
