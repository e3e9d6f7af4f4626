//! `intervals.tsv` and the time series made from it: per time bin and traffic direction, the bit
//! rate, the rate of new flows and the mean number of active flows, per protocol, at the file's
//! own interval or re-aggregated to a coarser resolution.
//!
//! The file has one row per interval × protocol × direction; rows that would be all zeros are
//! left out, so the trace is taken to cover `[first start, last end)` and a bin without rows is
//! a bin of zeros. A coarse bin is aligned on the epoch (a day bin starts at 00:00 UTC, as an RRD
//! consolidates) and its rates divide by the part of it the trace covers, so a half-covered first
//! or last bin is not shown at half its rate.

use std::path::Path;

use crate::error::PlotError;
use crate::table::Tsv;

pub use sonde_types::{Net, Proto};

/// Protocols, in the order they are stacked: those of `intervals.tsv`.
pub const PROTOS: [Proto; 4] = Proto::ALL;

/// One row of `intervals.tsv`.
#[derive(Debug, Clone, PartialEq)]
pub struct IntervalRow {
    /// Epoch seconds.
    pub start_s: f64,
    pub end_s: f64,
    /// Index into [`PROTOS`]; a protocol name this reader does not know counts as `other`.
    pub proto: usize,
    pub net: Net,
    pub bytes: f64,
    pub flows_opened: f64,
    pub flows_active: f64,
}

/// Reads `intervals.tsv` (any column order; extra columns are ignored).
pub fn read_intervals(path: &Path) -> Result<Vec<IntervalRow>, PlotError> {
    parse_intervals(Tsv::open(path)?)
}

pub(crate) fn parse_intervals<R: std::io::Read>(tsv: Tsv<R>) -> Result<Vec<IntervalRow>, PlotError> {
    let (start, end, proto, net) = (tsv.column("start")?, tsv.column("end")?, tsv.column("proto")?, tsv.column("net")?);
    let (bytes, opened, active) = (tsv.column("bytes")?, tsv.column("flows_opened")?, tsv.column("flows_active")?);
    let mut rows = Vec::new();
    tsv.for_each_row(|r| {
        let start_s = r.number(start, "start")?;
        let end_s = r.number(end, "end")?;
        if end_s <= start_s {
            return Err(r.error(format!("end {end_s} is not after start {start_s}")));
        }
        let p = r.text(proto);
        let n = r.text(net);
        rows.push(IntervalRow {
            start_s,
            end_s,
            proto: PROTOS.iter().position(|x| x.name() == p).unwrap_or(PROTOS.len() - 1),
            net: Net::from_name(n).ok_or_else(|| r.error(format!("column `net`: `{n}` is not in, out, loc or ext")))?,
            bytes: r.number(bytes, "bytes")?,
            flows_opened: r.number(opened, "flows_opened")?,
            flows_active: r.number(active, "flows_active")?,
        });
        Ok(())
    })?;
    Ok(rows)
}

/// The time covered by the rows and the length of their intervals.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Span {
    pub start_s: f64,
    pub end_s: f64,
    /// The most common interval length (the last interval of a run may be shorter).
    pub interval_s: f64,
}

impl Span {
    pub fn of(rows: &[IntervalRow]) -> Option<Span> {
        Span::of_intervals(rows.iter().map(|r| (r.start_s, r.end_s)))
    }

    /// The span of any rows with a start and an end, e.g. those of `quantiles.tsv`.
    pub fn of_intervals(intervals: impl Iterator<Item = (f64, f64)> + Clone) -> Option<Span> {
        let start_s = intervals.clone().map(|r| r.0).reduce(f64::min)?;
        let end_s = intervals.clone().map(|r| r.1).reduce(f64::max)?;
        // Lengths in whole microseconds (the file's precision), the most frequent wins; ties go
        // to the longer.
        let mut lengths: Vec<i64> = intervals.map(|(start, end)| ((end - start) * 1e6).round() as i64).collect();
        lengths.sort_unstable();
        let (mut best, mut best_n, mut i) = (lengths[0], 0, 0);
        while i < lengths.len() {
            let j = lengths[i..].iter().take_while(|&&l| l == lengths[i]).count();
            if j >= best_n {
                (best, best_n) = (lengths[i], j);
            }
            i += j;
        }
        Some(Span { start_s, end_s, interval_s: best as f64 / 1e6 })
    }

    pub fn length_s(&self) -> f64 {
        self.end_s - self.start_s
    }
}

/// Where bins start: at the trace's first interval (the native resolution) or at multiples of
/// the bin length since the epoch (coarser resolutions).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Align {
    TraceStart,
    Epoch,
}

/// What one direction carried in one bin, per protocol (index as [`PROTOS`]): rates, not the
/// packet and byte counts of `sonde_types::Traffic`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Rates {
    pub bit_rate: [f64; 4],
    /// New flows per second.
    pub flows_opened_rate: [f64; 4],
    /// Time-weighted mean of the active-flow count over the covered part of the bin.
    pub flows_active: [f64; 4],
}

/// One time bin of a series.
#[derive(Debug, Clone, PartialEq)]
pub struct Bin {
    pub start_s: f64,
    pub end_s: f64,
    /// Seconds of the bin inside the trace: the divisor of every rate.
    pub covered_s: f64,
    /// Indexed by [`Net`] as `in, out, loc, ext`.
    pub net: [Rates; 4],
}

/// Sums the rows into bins of `bin_s` seconds. A row counts wholly in the bin holding its start
/// (the native intervals nest in every coarser bin when the file's intervals are aligned on
/// the epoch, as RRD steps are).
pub fn aggregate(rows: &[IntervalRow], span: &Span, bin_s: f64, align: Align) -> Vec<Bin> {
    let origin = match align {
        Align::TraceStart => span.start_s,
        Align::Epoch => 0.0,
    };
    // A microsecond of slack (the file's precision) so float noise does not move a time on a
    // bin boundary into the wrong bin.
    let slack = 1e-6 / bin_s;
    let index = |t: f64| ((t - origin) / bin_s + slack).floor() as i64;
    let first = index(span.start_s);
    let last = (((span.end_s - origin) / bin_s - slack).ceil() as i64 - 1).max(first);
    let mut bins: Vec<Bin> = (first..=last)
        .map(|i| {
            let start_s = origin + i as f64 * bin_s;
            let end_s = start_s + bin_s;
            let covered_s = end_s.min(span.end_s) - start_s.max(span.start_s);
            Bin { start_s, end_s, covered_s, net: [Rates::default(); 4] }
        })
        .collect();
    for r in rows {
        let Some(bin) = usize::try_from(index(r.start_s) - first).ok().and_then(|i| bins.get_mut(i)) else {
            continue;
        };
        let t = &mut bin.net[r.net as usize];
        t.bit_rate[r.proto] += r.bytes * 8.0;
        t.flows_opened_rate[r.proto] += r.flows_opened;
        t.flows_active[r.proto] += r.flows_active * (r.end_s - r.start_s);
    }
    for bin in &mut bins {
        let covered = bin.covered_s.max(1e-9);
        for t in &mut bin.net {
            for v in t.bit_rate.iter_mut().chain(&mut t.flows_opened_rate).chain(&mut t.flows_active) {
                *v /= covered;
            }
        }
    }
    bins
}

/// The resolutions of the time figures beyond the native one: Tstat's daily, weekly, monthly
/// and yearly RRD plots use these steps.
pub const COARSE_RESOLUTIONS: [(f64, &str); 4] = [
    (300.0, "5 min (daily view)"),
    (1800.0, "30 min (weekly view)"),
    (7200.0, "2 h (monthly view)"),
    (86400.0, "1 day (yearly view)"),
];

/// The most bins a time figure draws (a year at 5 min is 105,120): a finer resolution over a
/// longer span is skipped, which also bounds the memory a malformed file can ask for.
pub const MAX_BINS: usize = 200_000;

/// A resolution to draw, or why not.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolution {
    pub bin_s: f64,
    pub align: Align,
    /// For titles, e.g. "30 min (weekly view)".
    pub label: String,
    /// For file names, e.g. "30min".
    pub tag: String,
}

/// The native resolution and each coarser one the span fills at least twice; the others are
/// returned with the reason they were skipped.
pub fn resolutions(span: &Span) -> (Vec<Resolution>, Vec<String>) {
    let mut chosen = Vec::new();
    let mut skipped = Vec::new();
    let native = Resolution {
        bin_s: span.interval_s,
        align: Align::TraceStart,
        label: format!("{} (native interval)", duration_label(span.interval_s)),
        tag: format!("native-{}", duration_tag(span.interval_s)),
    };
    let too_many = |bin_s: f64| span.length_s() / bin_s > MAX_BINS as f64;
    if too_many(span.interval_s) {
        skipped.push(format!(
            "native {}: the trace spans {}, more than {MAX_BINS} intervals",
            duration_label(span.interval_s),
            duration_label(span.length_s())
        ));
    } else if span.length_s() < 2.0 * span.interval_s - 1e-6 {
        skipped.push(format!(
            "native {}: the trace spans {}, fewer than 2 intervals",
            duration_label(span.interval_s),
            duration_label(span.length_s())
        ));
    } else {
        chosen.push(native);
    }
    for (bin_s, label) in COARSE_RESOLUTIONS {
        if bin_s <= span.interval_s + 1e-6 {
            skipped.push(format!("{label}: not coarser than the native {} interval", duration_label(span.interval_s)));
        } else if too_many(bin_s) {
            skipped.push(format!(
                "{label}: the trace spans {}, more than {MAX_BINS} bins",
                duration_label(span.length_s())
            ));
        } else if span.length_s() < 2.0 * bin_s {
            skipped.push(format!("{label}: the trace spans {}, less than 2 bins", duration_label(span.length_s())));
        } else {
            chosen.push(Resolution { bin_s, align: Align::Epoch, label: label.to_string(), tag: duration_tag(bin_s) });
        }
    }
    (chosen, skipped)
}

/// "90 s", "5 min", "2 h", "1.5 d".
pub fn duration_label(s: f64) -> String {
    let (v, unit) = if s < 120.0 {
        (s, "s")
    } else if s < 7200.0 {
        (s / 60.0, "min")
    } else if s < 86400.0 {
        (s / 3600.0, "h")
    } else {
        (s / 86400.0, "d")
    };
    format!("{} {unit}", crate::axis::trim_number(v, 3))
}

/// "60s", "5min", "2h", "1d": a file-name-safe [`duration_label`].
pub fn duration_tag(s: f64) -> String {
    duration_label(s).replace(' ', "").replace('.', "_")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(start_s: f64, len: f64, proto: usize, net: Net, bytes: f64, opened: f64, active: f64) -> IntervalRow {
        IntervalRow { start_s, end_s: start_s + len, proto, net, bytes, flows_opened: opened, flows_active: active }
    }

    #[test]
    fn reads_columns_in_any_order_and_rejects_bad_rows() {
        let text = "net\tproto\tend\tstart\tbytes\tflows_active\tflows_opened\tpackets\tflows_closed\n\
                    in\ttcp\t60.5\t0.5\t1000\t3\t2\t10\t1\n\
                    out\tsctp\t120.5\t60.5\t10\t0\t0\t1\t0\n";
        let rows = parse_intervals(Tsv::new(Path::new("i.tsv"), text.as_bytes()).unwrap()).unwrap();
        assert_eq!(rows, [row(0.5, 60.0, 0, Net::In, 1000.0, 2.0, 3.0), row(60.5, 60.0, 3, Net::Out, 10.0, 0.0, 0.0)]);
        let bad = "start\tend\tproto\tnet\tbytes\tflows_opened\tflows_active\n0\t60\ttcp\tup\t1\t1\t1\n";
        let e = parse_intervals(Tsv::new(Path::new("i.tsv"), bad.as_bytes()).unwrap()).unwrap_err();
        assert_eq!(e.to_string(), "i.tsv:2: column `net`: `up` is not in, out, loc or ext");
        let bad = "start\tend\tproto\tnet\tbytes\tflows_opened\tflows_active\n60\t60\ttcp\tin\t1\t1\t1\n";
        let e = parse_intervals(Tsv::new(Path::new("i.tsv"), bad.as_bytes()).unwrap()).unwrap_err();
        assert_eq!(e.to_string(), "i.tsv:2: end 60 is not after start 60");
    }

    #[test]
    fn span_takes_the_most_common_interval() {
        let rows = [
            row(100.0, 60.0, 0, Net::In, 1.0, 0.0, 0.0),
            row(160.0, 60.0, 0, Net::In, 1.0, 0.0, 0.0),
            row(220.0, 7.5, 0, Net::In, 1.0, 0.0, 0.0),
        ];
        assert_eq!(Span::of(&rows), Some(Span { start_s: 100.0, end_s: 227.5, interval_s: 60.0 }));
        assert_eq!(Span::of(&[]), None);
    }

    #[test]
    fn native_bins_fill_gaps_with_zero() {
        // Intervals of 60 s from t = 1000; the one at 1060 has no row (all zero).
        let rows = [row(1000.0, 60.0, 0, Net::In, 7500.0, 6.0, 4.0), row(1120.0, 60.0, 1, Net::Out, 750.0, 0.0, 2.0)];
        let span = Span::of(&rows).unwrap();
        let bins = aggregate(&rows, &span, span.interval_s, Align::TraceStart);
        assert_eq!(bins.len(), 3);
        assert_eq!((bins[0].start_s, bins[2].end_s), (1000.0, 1180.0));
        // 7500 B × 8 / 60 s = 1000 bit/s; 6 flows / 60 s = 0.1 flows/s.
        assert_eq!(bins[0].net[Net::In as usize].bit_rate, [1000.0, 0.0, 0.0, 0.0]);
        assert_eq!(bins[0].net[Net::In as usize].flows_opened_rate[0], 0.1);
        assert_eq!(bins[0].net[Net::In as usize].flows_active[0], 4.0);
        assert_eq!(bins[1].net, [Rates::default(); 4]);
        assert_eq!(bins[2].net[Net::Out as usize].bit_rate[1], 100.0);
    }

    #[test]
    fn coarse_bins_align_on_the_epoch_and_divide_by_the_covered_time() {
        // 60 s intervals from 240 to 900 s; 5-min bins: [0,300) covers 60 s of trace, [300,600)
        // all 300 s, [600,900) all 300 s.
        let mut rows = Vec::new();
        for i in 0..11 {
            rows.push(row(240.0 + 60.0 * i as f64, 60.0, 0, Net::In, 1500.0, 1.0, i as f64));
        }
        let span = Span::of(&rows).unwrap();
        let bins = aggregate(&rows, &span, 300.0, Align::Epoch);
        let starts: Vec<f64> = bins.iter().map(|b| b.start_s).collect();
        assert_eq!(starts, [0.0, 300.0, 600.0]);
        let covered: Vec<f64> = bins.iter().map(|b| b.covered_s).collect();
        assert_eq!(covered, [60.0, 300.0, 300.0]);
        // Every interval carries 1500 B = 12 000 bit in 60 s: 200 bit/s in every bin.
        for b in &bins {
            assert!((b.net[0].bit_rate[0] - 200.0).abs() < 1e-9, "{b:?}");
            assert!((b.net[0].flows_opened_rate[0] - 1.0 / 60.0).abs() < 1e-12);
        }
        // Active flows: the mean of 0; of 1..=5 (3); of 6..=10 (8).
        let active: Vec<f64> = bins.iter().map(|b| b.net[0].flows_active[0]).collect();
        assert_eq!(active, [0.0, 3.0, 8.0]);
    }

    #[test]
    fn resolutions_skip_what_the_span_cannot_fill() {
        let span = Span { start_s: 0.0, end_s: 3.0 * 3600.0, interval_s: 60.0 };
        let (chosen, skipped) = resolutions(&span);
        let tags: Vec<&str> = chosen.iter().map(|r| r.tag.as_str()).collect();
        assert_eq!(tags, ["native-60s", "5min", "30min"]);
        assert_eq!(
            skipped,
            [
                "2 h (monthly view): the trace spans 3 h, less than 2 bins",
                "1 day (yearly view): the trace spans 3 h, less than 2 bins"
            ]
        );
        // A microsecond interval over a day, or a start near the end of time: not a billion bins.
        let span = Span { start_s: 0.0, end_s: 86400.0, interval_s: 1e-6 };
        let (chosen, skipped) = resolutions(&span);
        assert_eq!(chosen.len(), 3);
        assert_eq!(skipped[0], "native 0.000001 s: the trace spans 1 d, more than 200000 intervals");
        let span = Span { start_s: 0.0, end_s: 1e300, interval_s: 60.0 };
        assert!(resolutions(&span).0.is_empty());
        let span = Span { start_s: 0.0, end_s: 500.0, interval_s: 300.0 };
        let (chosen, skipped) = resolutions(&span);
        assert!(chosen.is_empty());
        assert_eq!(skipped[0], "native 5 min: the trace spans 8.33 min, fewer than 2 intervals");
        assert_eq!(skipped[1], "5 min (daily view): not coarser than the native 5 min interval");
    }
}
