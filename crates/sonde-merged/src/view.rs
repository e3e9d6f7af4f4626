//! The merged view: the newest row (highest `batch`) of every key of the four changelogs, for
//! the newest `max_intervals` intervals and at most `max_probes` probes.

use std::collections::BTreeMap;

use sonde_http::{
    HistogramRow, IntervalData, IntervalHistograms, Intervals, MergedStatus, Phase, ProbeRow, QuantileRow, Snapshot,
    Status, TrafficRow,
};

use crate::flows::FlowTables;
use crate::read::{self, Rows};

/// What the view keeps at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Intervals kept, the newest (as many as a monitor's dashboard shows by default).
    pub max_intervals: usize,
    /// Probes in the probes table; a new one beyond is left out (counted).
    pub max_probes: usize,
    /// Hosts, and host pairs, kept per interval of the flow tables (the largest by bytes; the
    /// others let go and counted): sonde's `--table-size`.
    pub max_table_rows: usize,
    /// Ranks of the `top` table per interval, of hosts and of pairs: sonde's `--top`.
    pub top: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits { max_intervals: 720, max_probes: 1024, max_table_rows: 100_000, top: 10 }
    }
}

/// A float key ordered totally (`-0.0` is `0.0`): the contract's keys hold interval starts and
/// bin bounds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Key(pub(crate) f64);

impl Eq for Key {}

impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Key {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.0 + 0.0).total_cmp(&(other.0 + 0.0))
    }
}

/// A name ordered as sonde writes its files (protocols, directions and metrics in their enum's
/// order), names sonde does not know after them by text.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Name(u8, String);

impl Name {
    fn new(known: &[&str], name: String) -> Name {
        let rank = known.iter().position(|k| *k == name).unwrap_or(known.len());
        Name(rank.min(u8::MAX as usize) as u8, name)
    }

    fn proto(name: String) -> Name {
        Name::new(&sonde_types::Proto::ALL.map(|p| p.name()), name)
    }

    fn net(name: String) -> Name {
        Name::new(&sonde_types::Net::ALL.map(|n| n.name()), name)
    }

    fn metric(name: String) -> Name {
        Name::new(&sonde_stats::Metric::ALL.map(|m| m.name()), name)
    }

    fn dir(name: String) -> Name {
        Name::new(&["c2s", "s2c", "-"], name)
    }
}

/// A value and the micro-batch it came from: a row replaces it only from a later batch.
#[derive(Debug, Clone)]
struct Versioned<T> {
    batch: i64,
    value: T,
}

/// Keeps `value` if `batch` is later than what `slot` holds; whether it did.
fn newest<K: Ord, T>(map: &mut BTreeMap<K, Versioned<T>>, key: K, batch: i64, value: T) -> bool {
    match map.get_mut(&key) {
        Some(v) if v.batch >= batch => false,
        Some(v) => {
            *v = Versioned { batch, value };
            true
        }
        None => {
            map.insert(key, Versioned { batch, value });
            true
        }
    }
}

/// A distribution's key within an interval: metric, dir, net.
type DistKey = (Name, Name, Name);

/// One bin: its upper bound and count.
type Bin = (f64, i64);

#[derive(Debug, Default)]
struct Interval {
    /// The newest row's end.
    end: f64,
    traffic: BTreeMap<(Name, Name), Versioned<read::IntervalRow>>,
    quantiles: BTreeMap<DistKey, Versioned<read::QuantileRow>>,
    bins: BTreeMap<DistKey, BTreeMap<Key, Versioned<Bin>>>,
}

/// Packets, bytes, flows opened and closed of one (proto, net).
type Sums = [u64; 4];

/// What reading has met so far (see [`MergedStatus`] for each).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters {
    pub files_read: u64,
    pub files_unreadable: u64,
    pub read_failures: u64,
    pub last_failure: Option<String>,
    pub rows_dropped: u64,
    pub reloads: u64,
}

/// The merged view of the newest intervals and the probes.
#[derive(Debug)]
pub struct MergedView {
    limits: Limits,
    intervals: BTreeMap<Key, Interval>,
    /// Intervals that left the view, added up by (proto, net): with the kept ones, the totals
    /// `/metrics` counts (they never go down).
    retired: BTreeMap<(Name, Name), Sums>,
    /// The newest interval that left the view: rows at or before it are dropped.
    floor: Option<f64>,
    /// The oldest interval start ever kept.
    first_start: Option<f64>,
    probes: BTreeMap<String, Versioned<read::ProbeRow>>,
    /// The flow query's hosts and pairs, by interval (intervals of their own length).
    flows: FlowTables,
    pub counters: Counters,
}

impl MergedView {
    pub fn new(limits: Limits) -> MergedView {
        MergedView {
            limits,
            intervals: BTreeMap::new(),
            retired: BTreeMap::new(),
            floor: None,
            first_start: None,
            probes: BTreeMap::new(),
            flows: FlowTables::default(),
            counters: Counters::default(),
        }
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Applies a file's rows; whether any changed the view. Applying a file twice changes nothing
    /// the second time (a key keeps its newest batch).
    pub fn apply(&mut self, rows: Rows) -> bool {
        let mut changed = false;
        match rows {
            Rows::Intervals(rows) => {
                for r in rows {
                    let Some(i) = self.interval(r.start, r.end) else { continue };
                    let key = (Name::proto(r.proto.clone()), Name::net(r.net.clone()));
                    let (batch, end) = (r.batch, r.end);
                    if newest(&mut i.traffic, key, batch, r) {
                        i.end = end;
                        changed = true;
                    }
                }
            }
            Rows::Quantiles(rows) => {
                for r in rows {
                    let Some(i) = self.interval(r.start, r.end) else { continue };
                    let key = (Name::metric(r.metric.clone()), Name::dir(r.dir.clone()), Name::net(r.net.clone()));
                    changed |= newest(&mut i.quantiles, key, r.batch, r);
                }
            }
            Rows::Histograms(rows) => {
                for r in rows {
                    if !r.bin_lo.is_finite() {
                        self.counters.rows_dropped += 1;
                        continue;
                    }
                    let Some(i) = self.interval(r.start, r.end) else { continue };
                    let key = (Name::metric(r.metric), Name::dir(r.dir), Name::net(r.net));
                    changed |= newest(i.bins.entry(key).or_default(), Key(r.bin_lo), r.batch, (r.bin_hi, r.count));
                }
            }
            Rows::Probes(rows) => {
                for r in rows {
                    if !self.probes.contains_key(&r.probe) && self.probes.len() >= self.limits.max_probes {
                        self.counters.rows_dropped += 1;
                        continue;
                    }
                    changed |= newest(&mut self.probes, r.probe.clone(), r.batch, r);
                }
            }
            Rows::Hosts(rows) => changed |= self.flows.hosts(rows, self.limits.max_table_rows),
            Rows::Pairs(rows) => changed |= self.flows.pairs(rows, self.limits.max_table_rows),
        }
        changed
    }

    /// The interval starting at `start`, made if new; `None` (the row dropped, counted) when it
    /// is not a finite time or is at or before an interval that already left the view.
    fn interval(&mut self, start: f64, end: f64) -> Option<&mut Interval> {
        if !start.is_finite() || !end.is_finite() || self.floor.is_some_and(|f| start <= f) {
            self.counters.rows_dropped += 1;
            return None;
        }
        self.first_start = Some(self.first_start.map_or(start, |f| f.min(start)));
        Some(self.intervals.entry(Key(start)).or_insert_with(|| Interval { end, ..Interval::default() }))
    }

    /// Lets the oldest intervals go until `max_intervals` are left (their counters stay in the
    /// totals); whether any went.
    pub fn evict(&mut self) -> bool {
        let mut any = false;
        while self.intervals.len() > self.limits.max_intervals {
            let Some((Key(start), gone)) = self.intervals.pop_first() else { break };
            for (key, row) in gone.traffic {
                add(self.retired.entry(key).or_default(), &row.value);
            }
            self.floor = Some(self.floor.map_or(start, |f| f.max(start)));
            any = true;
        }
        any |= self.flows.evict(self.limits.max_intervals);
        any
    }

    /// Intervals held now (before [`MergedView::evict`], possibly more than the limit): of the
    /// counters or of the flow tables, whichever holds more.
    pub fn held_intervals(&self) -> usize {
        self.intervals.len().max(self.flows.held())
    }

    /// The view as the HTTP server's snapshot: `dir` is what it reads, `started_unix_s` and
    /// `now_unix_s` the server's wall clock (metadata only).
    pub fn snapshot(&self, dir: &str, started_unix_s: f64, now_unix_s: f64) -> Snapshot {
        let mut totals: BTreeMap<(Name, Name), Sums> = self.retired.clone();
        let mut out = Intervals::default();
        for (&Key(start), i) in &self.intervals {
            let length = i.end - start;
            let index = if length > 0.0 { (start / length).round().max(0.0) as u64 } else { 0 };
            let mut data = IntervalData { index, start_s: start, end_s: i.end, ..IntervalData::default() };
            for (key, row) in &i.traffic {
                add(totals.entry(key.clone()).or_default(), &row.value);
                data.traffic.push(traffic_row(&row.value));
            }
            for row in i.quantiles.values() {
                let r = &row.value;
                data.quantiles.push(QuantileRow {
                    metric: r.metric.clone(),
                    dir: r.dir.clone(),
                    net: r.net.clone(),
                    unit: r.unit.clone(),
                    count: r.count.max(0) as u64,
                    mean: r.mean,
                    min: r.min,
                    p50: r.p50,
                    p95: r.p95,
                    p99: r.p99,
                    max: r.max,
                });
            }
            let mut histograms = IntervalHistograms { index, start_s: start, histograms: Vec::new() };
            for (key, bins) in &i.bins {
                let (Name(_, metric), Name(_, dir), Name(_, net)) = key;
                histograms.histograms.push(HistogramRow {
                    metric: metric.clone(),
                    dir: dir.clone(),
                    net: net.clone(),
                    unit: unit_of(metric, i.quantiles.get(key).map(|q| q.value.unit.as_str())),
                    bins: bins.iter().map(|(Key(lo), b)| [*lo, b.value.0, b.value.1 as f64]).collect(),
                });
            }
            out.interval_s = length;
            out.items.push(data);
            out.histograms.push(histograms);
        }
        let totals: Vec<TrafficRow> = totals
            .into_iter()
            .map(|((Name(_, proto), Name(_, net)), [packets, bytes, flows_opened, flows_closed])| TrafficRow {
                proto: proto.into(),
                net: net.into(),
                packets,
                bytes,
                flows_opened,
                flows_closed,
                flows_active: 0,
            })
            .collect();
        let probes: Vec<ProbeRow> = self.probes.values().map(|p| probe_row(&p.value)).collect();
        let newest = self.intervals.last_key_value();
        let c = &self.counters;
        let merged = MergedStatus {
            dir: dir.to_string(),
            probes: probes.len(),
            clock_off: probes.iter().filter(|p| p.clock_off).map(|p| p.probe.clone()).collect(),
            intervals: self.intervals.len(),
            max_intervals: self.limits.max_intervals,
            newest_start_s: newest.map(|(Key(s), _)| *s),
            newest_end_s: newest.map(|(_, i)| i.end),
            files_read: c.files_read,
            files_unreadable: c.files_unreadable,
            read_failures: c.read_failures,
            last_failure: c.last_failure.clone(),
            rows_dropped: c.rows_dropped + self.flows.rows_dropped,
            flow_intervals: self.flows.held(),
            max_table_rows: self.limits.max_table_rows,
            table_rows_let_go: self.flows.let_go(),
            reloads: c.reloads,
            reloaded_unix_s: now_unix_s,
        };
        let status = Status {
            state: Phase::Running,
            input: format!("merged:{dir}"),
            started_unix_s,
            // Saturating, as each total is: a file's LONGs can be anything, and three rows near
            // i64::MAX overflowed a plain sum (a panic with overflow checks, a wrapped count in
            // a release build). Found by fuzzing (fuzz/regressions/merged).
            packets: totals.iter().fold(0, |sum, t| sum.saturating_add(t.packets)),
            bytes: totals.iter().fold(0, |sum, t| sum.saturating_add(t.bytes)),
            elapsed_s: (now_unix_s - started_unix_s).max(0.0),
            first_packet_s: self.first_start,
            last_packet_s: merged.newest_end_s,
            // Each probe classifies with its own networks: the intervals tell (in, out or not).
            internal_networks: 0,
            merged: Some(merged),
        };
        let tables = self.flows.tables(self.limits.top);
        Snapshot { status, intervals: out, totals, probes, tables, ..Snapshot::default() }
    }
}

fn add(sums: &mut Sums, r: &read::IntervalRow) {
    let values = [r.packets, r.bytes, r.flows_opened, r.flows_closed];
    for (acc, v) in sums.iter_mut().zip(values) {
        *acc = acc.saturating_add(v.max(0) as u64);
    }
}

fn traffic_row(r: &read::IntervalRow) -> TrafficRow {
    let n = |v: i64| v.max(0) as u64;
    TrafficRow {
        proto: r.proto.clone().into(),
        net: r.net.clone().into(),
        packets: n(r.packets),
        bytes: n(r.bytes),
        flows_opened: n(r.flows_opened),
        flows_closed: n(r.flows_closed),
        flows_active: n(r.flows_active),
    }
}

fn probe_row(r: &read::ProbeRow) -> ProbeRow {
    ProbeRow {
        probe: r.probe.clone(),
        last_start_s: r.last_start,
        last_end_s: r.last_end,
        seen_at_s: r.seen_at,
        interval_s: r.interval_s,
        lag_s: r.lag_s,
        offset_s: r.offset_s,
        clock_off: r.clock_off,
        batch: r.batch,
    }
}

/// A histogram's unit: sonde's for its metrics, else the quantiles row's (histograms carry none).
fn unit_of(metric: &str, quantiles: Option<&str>) -> String {
    match sonde_stats::Metric::ALL.iter().find(|m| m.name() == metric) {
        Some(m) => m.unit().name().to_string(),
        None => quantiles.unwrap_or_default().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::{HistogramRow as H, IntervalRow as I, ProbeRow as P, QuantileRow as Q};

    fn traffic(start: f64, proto: &str, packets: i64, batch: i64) -> I {
        I {
            start,
            end: start + 1.0,
            proto: proto.into(),
            net: "in".into(),
            packets,
            bytes: packets * 100,
            flows_opened: 1,
            flows_closed: 1,
            flows_active: 2,
            probes: 2,
            batch,
        }
    }

    #[test]
    fn the_newest_batch_of_each_key_wins_whatever_the_order() {
        let mut view = MergedView::new(Limits::default());
        assert!(view.apply(Rows::Intervals(vec![traffic(10.0, "udp", 5, 2), traffic(10.0, "tcp", 7, 3)])));
        // An older batch read later changes nothing; a newer one replaces.
        assert!(!view.apply(Rows::Intervals(vec![traffic(10.0, "tcp", 1, 1), traffic(10.0, "tcp", 1, 3)])));
        assert!(view.apply(Rows::Intervals(vec![traffic(10.0, "udp", 9, 4)])));
        let snap = view.snapshot("d", 0.0, 1.0);
        let rows = &snap.intervals.items[0].traffic;
        // In sonde's order: tcp before udp.
        assert_eq!(rows.iter().map(|r| (r.proto.as_ref(), r.packets)).collect::<Vec<_>>(), [("tcp", 7), ("udp", 9)]);
        assert_eq!(snap.status.packets, 16);
        assert_eq!(snap.intervals.items[0].index, 10);
    }

    #[test]
    fn old_intervals_leave_the_view_but_stay_in_the_totals() {
        let mut view = MergedView::new(Limits { max_intervals: 2, max_probes: 1, ..Limits::default() });
        for start in [1.0, 2.0, 3.0] {
            view.apply(Rows::Intervals(vec![traffic(start, "tcp", 10, 1)]));
        }
        assert!(view.evict());
        let snap = view.snapshot("d", 0.0, 1.0);
        assert_eq!(snap.intervals.items.iter().map(|i| i.start_s).collect::<Vec<_>>(), [2.0, 3.0]);
        assert_eq!(snap.totals[0].packets, 30);
        // A row of the interval gone (or older) is dropped and counted; a newer one is kept.
        assert!(!view.apply(Rows::Intervals(vec![traffic(1.0, "tcp", 99, 2), traffic(0.0, "tcp", 1, 1)])));
        assert_eq!(view.counters.rows_dropped, 2);
        // Probes beyond the limit are left out and counted.
        let probe = |name: &str| P {
            probe: name.into(),
            last_start: 3.0,
            last_end: 4.0,
            seen_at: 5.0,
            interval_s: 1.0,
            lag_s: 1.0,
            offset_s: 0.0,
            clock_off: false,
            batch: 1,
        };
        view.apply(Rows::Probes(vec![probe("a"), probe("b")]));
        assert_eq!(view.snapshot("d", 0.0, 1.0).probes.len(), 1);
        assert_eq!(view.counters.rows_dropped, 3);
    }

    #[test]
    fn histograms_take_their_unit_and_keep_bins_by_their_lower_bound() {
        let mut view = MergedView::new(Limits::default());
        let bin = |lo: f64, count: i64, batch: i64| H {
            start: 0.0,
            end: 1.0,
            metric: "tcp_rtt_avg".into(),
            dir: "c2s".into(),
            net: "in".into(),
            bin_lo: lo,
            bin_hi: lo + 0.5,
            count,
            batch,
        };
        view.apply(Rows::Histograms(vec![bin(40.5, 1, 1), bin(40.0, 2, 1), bin(40.0, 3, 2), bin(f64::NAN, 1, 1)]));
        let q = Q {
            start: 0.0,
            end: 1.0,
            metric: "udp_custom".into(),
            dir: "-".into(),
            net: "in".into(),
            unit: "widgets".into(),
            count: 1,
            mean: 1.0,
            min: 1.0,
            p50: 1.0,
            p95: 1.0,
            p99: 1.0,
            max: 1.0,
            probes: 1,
            batch: 1,
        };
        view.apply(Rows::Quantiles(vec![q.clone()]));
        view.apply(Rows::Histograms(vec![H { metric: "udp_custom".into(), dir: "-".into(), ..bin(1.0, 1, 1) }]));
        let snap = view.snapshot("d", 0.0, 1.0);
        let h = &snap.intervals.histograms[0].histograms;
        assert_eq!((h[0].metric.as_str(), h[0].unit.as_str()), ("tcp_rtt_avg", "ms"));
        assert_eq!(h[0].bins, vec![[40.0, 40.5, 3.0], [40.5, 41.0, 1.0]]);
        assert_eq!((h[1].metric.as_str(), h[1].unit.as_str()), ("udp_custom", "widgets"));
        assert_eq!(view.counters.rows_dropped, 1);
        assert_eq!(snap.intervals.items[0].quantiles[0].unit, "widgets");
    }

    fn host(start: f64, addr: &str, bytes: i64, batch: i64) -> read::HostRow {
        read::HostRow {
            start,
            end: start + 60.0,
            addr: addr.into(),
            pkts_in: 1,
            bytes_in: bytes,
            pkts_out: 1,
            bytes_out: 0,
            flows: 1,
            batch,
        }
    }

    #[test]
    fn the_flow_tables_keep_the_largest_rows_and_state_their_bound() {
        let limits = Limits { max_intervals: 2, max_table_rows: 3, top: 2, ..Limits::default() };
        let mut view = MergedView::new(limits);
        let first = vec![host(0.0, "a", 10, 1), host(0.0, "b", 50, 1), host(0.0, "c", 30, 1)];
        assert!(view.apply(Rows::Hosts(first)));
        // Full: d (20) takes a's place (10); e (5) is refused; b's newer row replaces it; an older
        // row of c changes nothing.
        assert!(view.apply(Rows::Hosts(vec![host(0.0, "d", 20, 2), host(0.0, "e", 5, 2), host(0.0, "b", 60, 3)])));
        assert!(!view.apply(Rows::Hosts(vec![host(0.0, "c", 99, 0)])));
        let snap = view.snapshot("d", 0.0, 1.0);
        let hosts: Vec<(String, u64)> = (0..snap.tables.hosts.len())
            .map(|i| {
                let r = snap.tables.hosts.row(i);
                (r[2].as_str().unwrap().to_string(), r[4].as_u64().unwrap())
            })
            .collect();
        assert_eq!(hosts, [("b".to_string(), 60), ("c".into(), 30), ("d".into(), 20)]);
        let merged = snap.status.merged.as_ref().unwrap();
        assert_eq!((merged.table_rows_let_go, merged.flow_intervals), (2, 1));
        // Top 2: exact, both above the bound (10: the most bytes let go).
        let top: Vec<_> = (0..snap.tables.top.len()).map(|i| snap.tables.top.row(i)).collect();
        assert_eq!(top.len(), 2);
        assert_eq!(
            (top[0][4].as_str(), top[0][7].as_u64(), top[0][9].as_bool(), top[0][10].as_u64()),
            (Some("b"), Some(60), Some(true), Some(10))
        );
        // Old flow intervals leave with the counters' limit; rows for them later are dropped.
        for start in [60.0, 120.0] {
            view.apply(Rows::Hosts(vec![host(start, "a", 1, 1)]));
        }
        assert!(view.evict());
        assert!(view.apply(Rows::Hosts(vec![host(0.0, "z", 1, 9)])));
        let snap = view.snapshot("d", 0.0, 1.0);
        assert_eq!(snap.tables.hosts.len(), 2);
        assert_eq!(snap.status.merged.as_ref().unwrap().rows_dropped, 1);
    }
}
