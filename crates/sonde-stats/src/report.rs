//! The whole run's intervals, merged from the reader's packet statistics and every worker's flow
//! statistics, and written as TSV files.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::net::IpAddr;
use std::path::Path;

use rustc_hash::FxHashMap;
use sonde_anon::Anonymizer;
use sonde_types::table::{Cell, Column, Decimal, Kind, Table};

use crate::apps::{App, AppTables};
use crate::bins::Dist;
use crate::class::{Dir, Internal, Metric, Net, Proto};
use crate::flows::{FlowInterval, FlowIntervals};
use crate::packets::PacketInterval;
use crate::tables::{HostRow, ProtoRow, Row, Tables, Traffic};
use crate::Config;

/// The files [`Report::write`] creates, tables last.
pub const FILES: [&str; 3] = ["intervals.tsv", "quantiles.tsv", "histograms.tsv"];
pub const TABLE_FILES: [&str; 8] = [
    "hosts.tsv",
    "matrix.tsv",
    "protocols.tsv",
    "top.tsv",
    "al_hosts.tsv",
    "al_matrix.tsv",
    "protocol_dir.tsv",
    "al_top.tsv",
];

const fn col(name: &'static str, kind: Kind) -> Column {
    Column::new(name, kind)
}

/// Each interval file's columns (docs/monitoring.md and docs/rmon2.md describe them).
const INTERVALS: &[Column] = &[
    col("start", Kind::Time),
    col("end", Kind::Time),
    col("proto", Kind::Label),
    col("net", Kind::Label),
    col("packets", Kind::Count),
    col("bytes", Kind::Count),
    col("flows_opened", Kind::Count),
    col("flows_closed", Kind::Count),
    col("flows_active", Kind::Count),
];
const QUANTILES: &[Column] = &[
    col("start", Kind::Time),
    col("end", Kind::Time),
    col("metric", Kind::Label),
    col("dir", Kind::Label),
    col("net", Kind::Label),
    col("unit", Kind::Label),
    col("count", Kind::Count),
    col("mean", Kind::Float),
    col("min", Kind::Float),
    col("p50", Kind::Float),
    col("p95", Kind::Float),
    col("p99", Kind::Float),
    col("max", Kind::Float),
];
const HISTOGRAMS: &[Column] = &[
    col("start", Kind::Time),
    col("end", Kind::Time),
    col("metric", Kind::Label),
    col("dir", Kind::Label),
    col("net", Kind::Label),
    col("bin_lo", Kind::Float),
    col("bin_hi", Kind::Float),
    col("count", Kind::Count),
];
/// Packets and bytes in and out, and flows, of a host.
const HOST_COUNTS: [Column; 5] = [
    col("pkts_in", Kind::Count),
    col("bytes_in", Kind::Count),
    col("pkts_out", Kind::Count),
    col("bytes_out", Kind::Count),
    col("flows", Kind::Count),
];
const HOSTS: &[Column] = &[
    col("start", Kind::Time),
    col("end", Kind::Time),
    col("addr", Kind::Address),
    col("internal", Kind::Flag),
    HOST_COUNTS[0],
    HOST_COUNTS[1],
    HOST_COUNTS[2],
    HOST_COUNTS[3],
    HOST_COUNTS[4],
];
const MATRIX: &[Column] = &[
    col("start", Kind::Time),
    col("end", Kind::Time),
    col("src", Kind::Address),
    col("dst", Kind::Address),
    col("packets", Kind::Count),
    col("bytes", Kind::Count),
];
const PROTOCOLS: &[Column] = &[
    col("start", Kind::Time),
    col("end", Kind::Time),
    col("ip_proto", Kind::Count),
    col("protocol", Kind::Label),
    col("port", Kind::Count),
    col("service", Kind::Label),
    col("packets", Kind::Count),
    col("bytes", Kind::Count),
    col("flows", Kind::Count),
];
const TOP: &[Column] = &[
    col("start", Kind::Time),
    col("end", Kind::Time),
    col("by", Kind::Label),
    col("rank", Kind::Count),
    col("addr", Kind::Address),
    col("value", Kind::Count),
];
const AL_HOSTS: &[Column] = &[
    col("start", Kind::Time),
    col("end", Kind::Time),
    col("addr", Kind::Address),
    col("internal", Kind::Flag),
    col("app", Kind::Label),
    col("by_port", Kind::Flag),
    HOST_COUNTS[0],
    HOST_COUNTS[1],
    HOST_COUNTS[2],
    HOST_COUNTS[3],
    HOST_COUNTS[4],
];
const AL_MATRIX: &[Column] = &[
    col("start", Kind::Time),
    col("end", Kind::Time),
    col("src", Kind::Address),
    col("dst", Kind::Address),
    col("app", Kind::Label),
    col("by_port", Kind::Flag),
    col("packets", Kind::Count),
    col("bytes", Kind::Count),
    col("flows", Kind::Count),
];
const PROTOCOL_DIR: &[Column] = &[
    col("start", Kind::Time),
    col("end", Kind::Time),
    col("path", Kind::Label),
    col("by_port", Kind::Flag),
    col("packets", Kind::Count),
    col("bytes", Kind::Count),
    col("flows", Kind::Count),
    col("own_packets", Kind::Count),
    col("own_bytes", Kind::Count),
    col("own_flows", Kind::Count),
];
const AL_TOP: &[Column] = &[
    col("start", Kind::Time),
    col("end", Kind::Time),
    col("table", Kind::Label),
    col("rank", Kind::Count),
    col("addr", Kind::Address),
    col("peer", Kind::Address),
    col("app", Kind::Label),
    col("by_port", Kind::Flag),
    col("packets", Kind::Count),
    col("bytes", Kind::Count),
    col("flows", Kind::Count),
];

/// One interval, everything merged.
#[derive(Debug, Clone, Default)]
pub struct Interval {
    pub packets: Option<PacketInterval>,
    pub flows: FlowInterval,
}

impl Interval {
    /// Traffic of a protocol and direction.
    pub fn traffic(&self, proto: Proto, net: Net) -> Traffic {
        self.packets.as_ref().map_or_else(Traffic::default, |p| p.traffic[proto as usize][net as usize])
    }

    /// Every distribution of the interval, packet and flow metrics together, in metric order.
    pub fn dists(&self) -> BTreeMap<(Metric, Dir, Net), &Dist> {
        let mut all: BTreeMap<_, _> = self.flows.dists().collect();
        if let Some(p) = &self.packets {
            for net in Net::ALL {
                for (metric, dist) in
                    [(Metric::IpLen, &p.ip_len[net as usize]), (Metric::IpTtl, &p.ip_ttl[net as usize])]
                {
                    if dist.count > 0 {
                        all.insert((metric, Dir::Both, net), dist);
                    }
                }
            }
        }
        all
    }
}

pub use sonde_types::TrafficRow;

/// Every interval of a run, by index (start time ÷ interval length).
#[derive(Debug, Clone)]
pub struct Report {
    pub interval_ns: u64,
    pub intervals: BTreeMap<u64, Interval>,
    top_n: usize,
    internal: Internal,
    /// The address the tables show for each one counted, when anonymised.
    shown: Option<FxHashMap<IpAddr, IpAddr>>,
}

/// Totals for the run summary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReportSummary {
    pub intervals: u64,
    /// Updates that found their table full and went to its overflow row.
    pub table_overflows: u64,
}

impl Report {
    pub fn new(cfg: &Config, packets: Vec<PacketInterval>, workers: Vec<FlowIntervals>) -> Report {
        let mut intervals: BTreeMap<u64, Interval> = BTreeMap::new();
        for p in packets {
            // The same index twice: taken in parts by a live run, time having stepped back.
            match &mut intervals.entry(p.index).or_default().packets {
                Some(earlier) => earlier.merge(p),
                slot => *slot = Some(p),
            }
        }
        for w in &workers {
            for (i, f) in &w.intervals {
                intervals.entry(*i).or_default().flows.merge(f);
            }
        }
        // Flows per host and protocol go to rows the packets made (a flow's first packet is in
        // the interval it is counted in), so the tables' bounds hold whatever the worker split.
        for interval in intervals.values_mut() {
            if let Some(t) = interval.packets.as_mut().and_then(|p| p.tables.as_mut()) {
                add_flows(t, &interval.flows);
            }
        }
        Report {
            interval_ns: cfg.interval_ns.max(1),
            intervals,
            top_n: cfg.top_n,
            internal: Internal::new(cfg.internal_nets.clone()),
            shown: None,
        }
    }

    pub fn summary(&self) -> ReportSummary {
        let mut s = ReportSummary { intervals: self.intervals.len() as u64, ..Default::default() };
        for t in self.intervals.values().filter_map(|i| i.packets.as_ref()?.tables.as_ref()) {
            s.table_overflows += t.hosts.refused + t.pairs.refused + t.protocols.refused;
        }
        for (_, t) in self.apps() {
            s.table_overflows += t.hosts.refused + t.pairs.refused;
        }
        s
    }

    /// Flows active in each interval (one packet at or before its end and one at or after its
    /// start), by protocol (TCP, UDP) and direction. Only for the intervals the report has (those
    /// with packets or flow events): a silent interval has no row.
    pub fn active_flows(&self) -> BTreeMap<u64, [[u64; 4]; 2]> {
        let mut open = [[0u64; 4]; 2];
        let mut closed_before = [[0u64; 4]; 2];
        let mut active = BTreeMap::new();
        for (&i, interval) in &self.intervals {
            let f = &interval.flows;
            let mut now = [[0u64; 4]; 2];
            for p in 0..2 {
                for n in 0..4 {
                    open[p][n] += f.opened[p][n];
                    now[p][n] = open[p][n] - closed_before[p][n];
                    closed_before[p][n] += f.closed[p][n];
                }
            }
            active.insert(i, now);
        }
        active
    }

    /// Writes the interval files into `dir`; returns their names. Superseded by sonde-output's
    /// `OutputDir::write_intervals` (the same bytes, each file written atomically): kept until
    /// the binary calls that.
    pub fn write(&self, dir: &Path) -> io::Result<Vec<&'static str>> {
        let files = self.render()?;
        for (name, text) in &files {
            let mut file = BufWriter::new(File::create(dir.join(name))?);
            file.write_all(text.as_bytes())?;
            file.into_inner().map_err(|e| e.into_error())?.sync_data()?;
        }
        Ok(files.into_iter().map(|(name, _)| name).collect())
    }

    /// The interval files' names and texts (the tables' only when the run kept them).
    pub fn render(&self) -> io::Result<Vec<(&'static str, String)>> {
        Ok(self.outputs().into_iter().map(|(name, table)| (name, table.tsv())).collect())
    }

    /// The interval outputs as typed tables, by file name, in the order written (the tables'
    /// only when the run kept them): what every format renders.
    pub fn outputs(&self) -> Vec<(&'static str, Table<'_>)> {
        type Rows = fn(&Report, &mut dyn FnMut(&[Cell<'_>]));
        let mut outputs: Vec<(&'static str, &'static [Column], Rows)> = vec![
            (FILES[0], INTERVALS, Report::interval_rows),
            (FILES[1], QUANTILES, Report::quantile_rows),
            (FILES[2], HISTOGRAMS, Report::histogram_rows),
        ];
        if self
            .intervals
            .values()
            .any(|i| i.packets.as_ref().is_some_and(|p| p.tables.is_some()) || i.flows.apps.is_some())
        {
            outputs.extend([
                (TABLE_FILES[0], HOSTS, Report::host_rows as Rows),
                (TABLE_FILES[1], MATRIX, Report::matrix_rows),
                (TABLE_FILES[2], PROTOCOLS, Report::protocol_rows),
                (TABLE_FILES[3], TOP, Report::top_rows),
                (TABLE_FILES[4], AL_HOSTS, Report::al_host_rows),
                (TABLE_FILES[5], AL_MATRIX, Report::al_matrix_rows),
                (TABLE_FILES[6], PROTOCOL_DIR, Report::protocol_dir_rows),
                (TABLE_FILES[7], AL_TOP, Report::al_top_rows),
            ]);
        }
        outputs
            .into_iter()
            .map(|(name, columns, rows)| (name, Table::new(columns, move |row| rows(self, row))))
            .collect()
    }

    /// The start and end cells of interval `i`.
    fn span(&self, i: u64) -> [Cell<'static>; 2] {
        let start = i * self.interval_ns;
        [
            Cell::Decimal(Decimal::seconds(start)),
            Cell::Decimal(Decimal::seconds(start.saturating_add(self.interval_ns))),
        ]
    }

    /// The rows of intervals.tsv, in interval order: per interval index, protocol and network,
    /// its traffic and flows; rows with nothing at all are left out.
    pub fn traffic_rows(&self) -> Vec<(u64, TrafficRow)> {
        let active = self.active_flows();
        let mut rows = Vec::new();
        for (&i, interval) in &self.intervals {
            for proto in Proto::ALL {
                for net in Net::ALL {
                    let traffic = interval.traffic(proto, net);
                    let (opened, closed, active) = match proto {
                        Proto::Tcp | Proto::Udp => {
                            let (p, n) = (proto as usize, net as usize);
                            (
                                interval.flows.opened[p][n],
                                interval.flows.closed[p][n],
                                active.get(&i).map_or(0, |a| a[p][n]),
                            )
                        }
                        _ => (0, 0, 0),
                    };
                    if traffic.packets == 0 && opened == 0 && closed == 0 && active == 0 {
                        continue;
                    }
                    rows.push((
                        i,
                        TrafficRow {
                            proto: proto.name().into(),
                            net: net.name().into(),
                            packets: traffic.packets,
                            bytes: traffic.bytes,
                            flows_opened: opened,
                            flows_closed: closed,
                            flows_active: active,
                        },
                    ));
                }
            }
        }
        rows
    }

    fn interval_rows(&self, row: &mut dyn FnMut(&[Cell<'_>])) {
        for (i, r) in self.traffic_rows() {
            let [start, end] = self.span(i);
            row(&[
                start,
                end,
                Cell::text(&r.proto),
                Cell::text(&r.net),
                Cell::Count(r.packets),
                Cell::Count(r.bytes),
                Cell::Count(r.flows_opened),
                Cell::Count(r.flows_closed),
                Cell::Count(r.flows_active),
            ]);
        }
    }

    fn quantile_rows(&self, row: &mut dyn FnMut(&[Cell<'_>])) {
        for (&i, interval) in &self.intervals {
            for ((metric, dir, net), d) in interval.dists() {
                let unit = metric.unit();
                let [start, end] = self.span(i);
                let value = |v: u64| Cell::Decimal(unit.decimal(v));
                let [p50, p95, p99] = d.percentiles([50, 95, 99]).unwrap_or_default();
                row(&[
                    start,
                    end,
                    Cell::text(metric.name()),
                    dir_cell(dir),
                    Cell::text(net.name()),
                    Cell::text(unit.name()),
                    Cell::Count(d.count),
                    unit.mean(d.mean().unwrap_or(0.0)).map_or(Cell::Null, Cell::Decimal),
                    value(d.min),
                    value(p50),
                    value(p95),
                    value(p99),
                    value(d.max),
                ]);
            }
        }
    }

    fn histogram_rows(&self, row: &mut dyn FnMut(&[Cell<'_>])) {
        for (&i, interval) in &self.intervals {
            for ((metric, dir, net), d) in interval.dists() {
                let unit = metric.unit();
                for (bin, n) in d.sorted_bins() {
                    let (lo, hi) = d.binning.range(bin);
                    let [start, end] = self.span(i);
                    row(&[
                        start,
                        end,
                        Cell::text(metric.name()),
                        dir_cell(dir),
                        Cell::text(net.name()),
                        Cell::Decimal(unit.decimal(lo)),
                        Cell::Decimal(unit.decimal(hi)),
                        Cell::Count(n),
                    ]);
                }
            }
        }
    }

    /// Shows every address of the tables through `anon` (rows stay as counted: under `hash`
    /// or `zero` two hosts may show the same address in two rows). Whether a host is internal
    /// is still decided on its real address.
    pub fn anonymize(&mut self, anon: &mut Anonymizer) {
        let mut shown = FxHashMap::default();
        for (_, t) in self.tables() {
            let pairs = t.pairs.rows.keys().flat_map(|&(a, b)| [a, b]);
            for addr in t.hosts.rows.keys().copied().chain(pairs) {
                shown.entry(addr).or_insert_with(|| anon.ip(addr));
            }
        }
        for (_, t) in self.apps() {
            let pairs = t.pairs.rows.keys().flat_map(|&(a, b, _)| [a, b]);
            for addr in t.hosts.rows.keys().map(|&(a, _)| a).chain(pairs) {
                shown.entry(addr).or_insert_with(|| anon.ip(addr));
            }
        }
        self.shown = Some(shown);
    }

    /// The address a table shows for `addr`.
    fn show(&self, addr: IpAddr) -> IpAddr {
        self.shown.as_ref().and_then(|m| m.get(&addr).copied()).unwrap_or(addr)
    }

    fn tables(&self) -> impl Iterator<Item = (u64, &Tables)> {
        self.intervals.iter().filter_map(|(i, x)| Some((*i, x.packets.as_ref()?.tables.as_ref()?)))
    }

    fn apps(&self) -> impl Iterator<Item = (u64, &AppTables)> {
        self.intervals.iter().filter_map(|(i, x)| Some((*i, x.flows.apps.as_ref()?)))
    }

    fn host_rows(&self, row: &mut dyn FnMut(&[Cell<'_>])) {
        for (i, t) in self.tables() {
            let [start, end] = self.span(i);
            // In the order of the addresses shown (the real ones' order would leak through).
            let mut rows: Vec<_> = t.hosts.rows.iter().map(|(addr, h)| (self.show(*addr), addr, h)).collect();
            rows.sort_unstable_by_key(|&(shown, addr, _)| (shown, *addr));
            for (shown, addr, h) in rows {
                let [a, b, c, d, e] = host_counts(h);
                let internal = Cell::Flag(self.internal.contains(addr));
                row(&[start.clone(), end.clone(), Cell::Address(shown), internal, a, b, c, d, e]);
            }
            if t.hosts.refused > 0 {
                let [a, b, c, d, e] = host_counts(&t.hosts.overflow);
                row(&[start, end, Cell::text(OVERFLOW), Cell::Null, a, b, c, d, e]);
            }
        }
    }

    fn matrix_rows(&self, row: &mut dyn FnMut(&[Cell<'_>])) {
        for (i, t) in self.tables() {
            let [start, end] = self.span(i);
            let mut rows: Vec<_> = t
                .pairs
                .rows
                .iter()
                .map(|(&(src, dst), tr)| ((self.show(src), self.show(dst)), (src, dst), tr))
                .collect();
            rows.sort_unstable_by_key(|&(shown, pair, _)| (shown, pair));
            for ((src, dst), _, tr) in rows {
                let (src, dst) = (Cell::Address(src), Cell::Address(dst));
                row(&[start.clone(), end.clone(), src, dst, Cell::Count(tr.packets), Cell::Count(tr.bytes)]);
            }
            if t.pairs.refused > 0 {
                let o = &t.pairs.overflow;
                let overflow = Cell::text(OVERFLOW);
                row(&[start, end, overflow.clone(), overflow, Cell::Count(o.packets), Cell::Count(o.bytes)]);
            }
        }
    }

    fn protocol_rows(&self, row: &mut dyn FnMut(&[Cell<'_>])) {
        for (i, t) in self.tables() {
            let [start, end] = self.span(i);
            let mut rows: Vec<_> = t.protocols.rows.iter().collect();
            rows.sort_unstable_by_key(|(k, _)| **k);
            for (k, r) in rows {
                let [packets, bytes, flows] = proto_counts(r);
                let port = if k.port == 0 { Cell::Null } else { Cell::Count(k.port.into()) };
                let service = match k.service_name() {
                    "-" => Cell::Null,
                    name => Cell::text(name),
                };
                let (ip_protocol, protocol) = (Cell::Count(k.ip_protocol.into()), Cell::Text(k.protocol_name().into()));
                row(&[start.clone(), end.clone(), ip_protocol, protocol, port, service, packets, bytes, flows]);
            }
            if t.protocols.refused > 0 {
                let [packets, bytes, flows] = proto_counts(&t.protocols.overflow);
                row(&[start, end, Cell::Null, Cell::text(OVERFLOW), Cell::Null, Cell::Null, packets, bytes, flows]);
            }
        }
    }

    fn top_rows(&self, row: &mut dyn FnMut(&[Cell<'_>])) {
        for (i, t) in self.tables() {
            let [start, end] = self.span(i);
            let by_bytes = |h: &HostRow| h.sent.bytes + h.received.bytes;
            let by_flows = |h: &HostRow| h.flows;
            for (name, value) in [("bytes", &by_bytes as &dyn Fn(&HostRow) -> u64), ("flows", &by_flows)] {
                let mut rows: Vec<_> =
                    t.hosts.rows.iter().map(|(a, h)| (value(h), self.show(*a))).filter(|r| r.0 > 0).collect();
                // Largest first; equal values by address, so the order is the same in every run.
                rows.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
                for (rank, (v, addr)) in rows.iter().take(self.top_n).enumerate() {
                    let rank = Cell::Count(rank as u64 + 1);
                    row(&[start.clone(), end.clone(), Cell::text(name), rank, Cell::Address(*addr), Cell::Count(*v)]);
                }
            }
        }
    }
}

/// The application layer's files (docs/rmon2.md).
impl Report {
    fn al_host_rows(&self, row: &mut dyn FnMut(&[Cell<'_>])) {
        for (i, t) in self.apps() {
            let [start, end] = self.span(i);
            let mut rows: Vec<_> =
                t.hosts.rows.iter().map(|(&(addr, app), h)| ((self.show(addr), addr, app), h)).collect();
            rows.sort_unstable_by_key(|&(key, _)| key);
            for ((shown, addr, app), h) in rows {
                let [a, b, c, d, e] = host_counts(h);
                let internal = Cell::Flag(self.internal.contains(&addr));
                let [name, by_port] = app_cells(app);
                row(&[start.clone(), end.clone(), Cell::Address(shown), internal, name, by_port, a, b, c, d, e]);
            }
            if t.hosts.refused > 0 {
                let [a, b, c, d, e] = host_counts(&t.hosts.overflow);
                row(&[start, end, Cell::text(OVERFLOW), Cell::Null, Cell::Null, Cell::Null, a, b, c, d, e]);
            }
        }
    }

    fn al_matrix_rows(&self, row: &mut dyn FnMut(&[Cell<'_>])) {
        for (i, t) in self.apps() {
            let [start, end] = self.span(i);
            let mut rows: Vec<_> = t
                .pairs
                .rows
                .iter()
                .map(|(&(src, dst, app), r)| ((self.show(src), self.show(dst), app, src, dst), r))
                .collect();
            rows.sort_unstable_by_key(|&(key, _)| key);
            for ((src, dst, app, _, _), r) in rows {
                let [packets, bytes, flows] = proto_counts(r);
                let [name, by_port] = app_cells(app);
                let (src, dst) = (Cell::Address(src), Cell::Address(dst));
                row(&[start.clone(), end.clone(), src, dst, name, by_port, packets, bytes, flows]);
            }
            if t.pairs.refused > 0 {
                let [packets, bytes, flows] = proto_counts(&t.pairs.overflow);
                let overflow = Cell::text(OVERFLOW);
                row(&[start, end, overflow.clone(), overflow, Cell::Null, Cell::Null, packets, bytes, flows]);
            }
        }
    }

    fn protocol_dir_rows(&self, row: &mut dyn FnMut(&[Cell<'_>])) {
        for (i, t) in self.apps() {
            let [start, end] = self.span(i);
            for node in t.directory() {
                let [packets, bytes, flows] = proto_counts(&node.total);
                let [own_packets, own_bytes, own_flows] = proto_counts(&node.own);
                row(&[
                    start.clone(),
                    end.clone(),
                    Cell::text(&node.path),
                    Cell::Flag(node.by_port),
                    packets,
                    bytes,
                    flows,
                    own_packets,
                    own_bytes,
                    own_flows,
                ]);
            }
        }
    }

    /// The `--top` largest by bytes of three kinds: alHost rows (`hosts`: a host and an
    /// application, bytes in and out), alMatrix rows (`matrix`) and applications over every
    /// network and transport (`apps`, `unknown` included). Overflow rows are not ranked.
    fn al_top_rows(&self, row: &mut dyn FnMut(&[Cell<'_>])) {
        let unknown = App { name: App::UNKNOWN, by_port: false };
        for (i, t) in self.apps() {
            let [start, end] = self.span(i);
            // (bytes, addr, peer, app, packets, flows), largest first, equal ones by the rest.
            type Ranked = (u64, Option<IpAddr>, Option<IpAddr>, App, u64, u64);
            let hosts: Vec<Ranked> = t
                .hosts
                .rows
                .iter()
                .map(|(&(addr, app), h)| {
                    let (packets, bytes) = (h.sent.packets + h.received.packets, h.sent.bytes + h.received.bytes);
                    (bytes, Some(self.show(addr)), None, app, packets, h.flows)
                })
                .collect();
            let pairs: Vec<Ranked> = t
                .pairs
                .rows
                .iter()
                .map(|(&(src, dst, app), r)| {
                    (r.traffic.bytes, Some(self.show(src)), Some(self.show(dst)), app, r.traffic.packets, r.flows)
                })
                .collect();
            let mut by_app: BTreeMap<App, ProtoRow> = BTreeMap::new();
            for (key, row) in &t.directory {
                by_app.entry(key.app.unwrap_or(unknown)).or_default().add(row);
            }
            let apps: Vec<Ranked> = by_app
                .into_iter()
                .map(|(app, r)| (r.traffic.bytes, None, None, app, r.traffic.packets, r.flows))
                .collect();
            for (table, mut rows) in [("hosts", hosts), ("matrix", pairs), ("apps", apps)] {
                rows.retain(|r| r.0 > 0);
                rows.sort_unstable_by(|a, b| b.0.cmp(&a.0).then_with(|| (a.1, a.2, a.3).cmp(&(b.1, b.2, b.3))));
                for (rank, (bytes, addr, peer, app, packets, flows)) in rows.into_iter().take(self.top_n).enumerate() {
                    let [name, by_port] = app_cells(app);
                    let ip = |ip: Option<IpAddr>| ip.map_or(Cell::Null, Cell::Address);
                    row(&[
                        start.clone(),
                        end.clone(),
                        Cell::text(table),
                        Cell::Count(rank as u64 + 1),
                        ip(addr),
                        ip(peer),
                        name,
                        by_port,
                        Cell::Count(packets),
                        Cell::Count(bytes),
                        Cell::Count(flows),
                    ]);
                }
            }
        }
    }
}

/// What a table shows for the rows it could not hold.
const OVERFLOW: &str = "overflow";

/// A distribution's direction; none (`-`) for one over both.
fn dir_cell(dir: Dir) -> Cell<'static> {
    match dir {
        Dir::Both => Cell::Null,
        _ => Cell::text(dir.name()),
    }
}

/// An application's name and whether its port alone told it.
fn app_cells(app: App) -> [Cell<'static>; 2] {
    [Cell::text(app.name), Cell::Flag(app.by_port)]
}

fn add_flows(t: &mut Tables, f: &FlowInterval) {
    for (addr, n) in &f.host_flows {
        t.hosts.existing(addr).flows += n;
    }
    for (key, n) in &f.proto_flows {
        t.protocols.existing(key).flows += n;
    }
}

/// A host row's counts: packets and bytes in, out, and flows.
fn host_counts(h: &HostRow) -> [Cell<'static>; 5] {
    [h.received.packets, h.received.bytes, h.sent.packets, h.sent.bytes, h.flows].map(Cell::Count)
}

/// A protocol row's packets, bytes and flows.
fn proto_counts(r: &ProtoRow) -> [Cell<'static>; 3] {
    [r.traffic.packets, r.traffic.bytes, r.flows].map(Cell::Count)
}

/// Packet time in seconds with microseconds, as every interval file writes it (the old name of
/// [`sonde_types::time::seconds_6`], kept for its callers).
pub use sonde_types::time::seconds_6 as seconds;

/// The distributions kept as time series (their mean and percentiles), all directions merged.
const SERIES_METRICS: [(Metric, &str); 9] = [
    (Metric::TcpRttAvg, "rtt_avg"),
    (Metric::TcpRttMin, "rtt_min"),
    (Metric::TcpRttSample, "rtt_sample"),
    (Metric::TcpHsRtt, "hs_rtt"),
    (Metric::TcpDuration, "tcp_dur"),
    (Metric::TcpBytes, "tcp_bytes"),
    (Metric::TcpThroughput, "tcp_thru"),
    (Metric::TcpRetxRate, "tcp_retx"),
    (Metric::IpLen, "ip_len"),
];

/// One interval's values of [`Report::series_names`].
#[derive(Debug, Clone, PartialEq)]
pub struct SeriesRow {
    pub index: u64,
    pub values: Vec<f64>,
}

impl Report {
    /// The time series of the round-robin store, in order: packets and bytes per protocol and
    /// direction (`tcp_in_pkts`, `tcp_in_bytes`, …), active flows per protocol and direction
    /// (`tcp_in_flows`, …), then the mean, p50, p95 and p99 of the main distributions over all
    /// directions (`rtt_avg_mean`, `rtt_avg_p50`, …) in the unit of the quantiles file.
    pub fn series_names() -> Vec<String> {
        let mut names = Vec::new();
        for proto in Proto::ALL {
            for net in Net::ALL {
                names.push(format!("{}_{}_pkts", proto.name(), net.name()));
                names.push(format!("{}_{}_bytes", proto.name(), net.name()));
            }
        }
        for proto in [Proto::Tcp, Proto::Udp] {
            for net in Net::ALL {
                names.push(format!("{}_{}_flows", proto.name(), net.name()));
            }
        }
        for (_, name) in SERIES_METRICS {
            for stat in ["mean", "p50", "p95", "p99"] {
                names.push(format!("{name}_{stat}"));
            }
        }
        names
    }

    /// Every interval from `from_index` (or the report's first) to the report's last, silent
    /// ones included (no traffic: counters 0, distributions unknown, NaN), as rows of
    /// [`Report::series_names`].
    pub fn series(&self, from_index: u64) -> Vec<SeriesRow> {
        let (Some(&first), Some(&last)) = (self.intervals.keys().next(), self.intervals.keys().next_back()) else {
            return Vec::new();
        };
        let active = self.active_flows();
        let mut rows = Vec::new();
        let mut open_now = [[0u64; 4]; 2];
        let width = Self::series_names().len();
        for i in first..=last {
            let mut values = Vec::with_capacity(width);
            let interval = self.intervals.get(&i);
            for proto in Proto::ALL {
                for net in Net::ALL {
                    let t = interval.map_or_else(Traffic::default, |x| x.traffic(proto, net));
                    values.extend([t.packets as f64, t.bytes as f64]);
                }
            }
            // A silent interval has the flows still open after the last one with events.
            if let (Some(a), Some(x)) = (active.get(&i), interval) {
                for p in 0..2 {
                    for n in 0..4 {
                        open_now[p][n] = a[p][n] - x.flows.closed[p][n];
                    }
                }
                values.extend(a.iter().flatten().map(|&n| n as f64));
            } else {
                values.extend(open_now.iter().flatten().map(|&n| n as f64));
            }
            for (metric, _) in SERIES_METRICS {
                let mut all = Dist::new(metric.binning());
                if let Some(x) = interval {
                    x.dists().into_iter().filter(|((m, _, _), _)| *m == metric).for_each(|(_, d)| all.merge(d));
                }
                let unit = metric.unit();
                let percentiles = all.percentiles([50, 95, 99]).map(|p| p.map(|v| v as f64));
                let stats = [all.mean()].into_iter().chain((0..3).map(|i| percentiles.map(|p| p[i])));
                values.extend(stats.map(|v| v.map_or(f64::NAN, |v| unit.scaled(v))));
            }
            if i >= from_index {
                rows.push(SeriesRow { index: i, values });
            }
        }
        rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A report of hand-made application tables: 2 s intervals, a cap of 2 rows and a top 2.
    fn app_report() -> Report {
        use crate::apps::AppFlow;
        let cfg = Config { interval_ns: 2_000_000_000, tables: true, table_cap: 2, top_n: 2, ..Config::default() };
        let flow = |client: &str, server: &str, name, by_port, sent: (u64, u64), received: (u64, u64)| AppFlow {
            client: client.parse().unwrap(),
            server: server.parse().unwrap(),
            ip_protocol: 6,
            app: App { name, by_port },
            client_sent: Traffic { packets: sent.0, bytes: sent.1 },
            server_sent: Traffic { packets: received.0, bytes: received.1 },
        };
        let mut t = AppTables::new(cfg.table_cap);
        t.flow(&flow("10.0.0.1", "10.0.0.2", "tls", false, (3, 300), (2, 2000)));
        t.flow(&flow("10.0.0.1", "10.0.0.3", "dns", true, (1, 100), (1, 100)));
        t.flow(&flow("10.0.0.4", "10.0.0.2", App::UNKNOWN, false, (1, 40), (0, 0)));
        let mut worker = FlowIntervals::new(&cfg);
        worker.intervals.entry(3).or_default().apps = Some(t);
        Report::new(&cfg, Vec::new(), vec![worker])
    }

    fn file(report: &Report, name: &str) -> String {
        report.render().unwrap().into_iter().find(|(n, _)| *n == name).unwrap_or_else(|| panic!("{name}")).1
    }

    #[test]
    fn application_files_are_bounded_ranked_and_add_up() {
        let report = app_report();
        let names: Vec<_> = report.render().unwrap().into_iter().map(|(n, _)| n).collect();
        assert_eq!(names[3..], TABLE_FILES, "the tables are written when only the flows kept some");
        for name in &TABLE_FILES[4..] {
            let text = file(&report, name);
            let width = text.lines().next().unwrap().split('\t').count();
            assert!(text.lines().all(|l| l.split('\t').count() == width), "{name}:\n{text}");
        }
        let hosts = file(&report, "al_hosts.tsv");
        let lines: Vec<&str> = hosts.lines().skip(1).collect();
        assert_eq!(lines.len(), 3, "two rows and the overflow:\n{hosts}");
        assert!(lines[2].starts_with("6.000000\t8.000000\toverflow\t-\t-\t-\t"), "{hosts}");
        // Rows and overflow hold the 3 flows' 8 packets both as sent and as received.
        let column =
            |i: usize| lines.iter().map(|l| l.split('\t').nth(i).unwrap().parse::<u64>().unwrap()).sum::<u64>();
        assert_eq!((column(6), column(8), column(10)), (8, 8, 6));
        let overflow_flows = |name| -> u64 {
            let text = file(&report, name);
            text.lines()
                .filter(|l| l.contains("\toverflow\t"))
                .map(|l| l.rsplit('\t').next().unwrap().parse::<u64>().unwrap())
                .sum()
        };
        assert!(overflow_flows("al_hosts.tsv") > 0);
        assert_eq!(report.summary().table_overflows, overflow_flows("al_hosts.tsv") + overflow_flows("al_matrix.tsv"));
        let dir = file(&report, "protocol_dir.tsv");
        assert_eq!(
            dir,
            "start\tend\tpath\tby_port\tpackets\tbytes\tflows\town_packets\town_bytes\town_flows\n\
             6.000000\t8.000000\tether2\t0\t8\t2540\t3\t0\t0\t0\n\
             6.000000\t8.000000\tether2.ip\t0\t8\t2540\t3\t0\t0\t0\n\
             6.000000\t8.000000\tether2.ip.tcp\t0\t8\t2540\t3\t1\t40\t1\n\
             6.000000\t8.000000\tether2.ip.tcp.dns\t1\t2\t200\t1\t2\t200\t1\n\
             6.000000\t8.000000\tether2.ip.tcp.tls\t0\t5\t2300\t1\t5\t2300\t1\n"
        );
        let top = file(&report, "al_top.tsv");
        let apps: Vec<&str> = top.lines().filter(|l| l.contains("\tapps\t")).collect();
        assert_eq!(
            apps,
            [
                "6.000000\t8.000000\tapps\t1\t-\t-\ttls\t0\t5\t2300\t1",
                "6.000000\t8.000000\tapps\t2\t-\t-\tdns\t1\t2\t200\t1"
            ]
        );
        for table in ["hosts", "matrix"] {
            let ranked: Vec<u64> = top
                .lines()
                .filter(|l| l.split('\t').nth(2) == Some(table))
                .map(|l| l.split('\t').nth(9).unwrap().parse().unwrap())
                .collect();
            assert!(ranked.len() <= 2 && ranked.windows(2).all(|w| w[0] >= w[1]), "{table}: {top}");
        }
    }

    #[test]
    fn anonymised_application_tables_show_no_real_address() {
        let mut report = app_report();
        report.anonymize(&mut Anonymizer::new(sonde_anon::Mode::CryptoPan, &sonde_anon::Key::from_bytes([7; 32])));
        for name in ["al_hosts.tsv", "al_matrix.tsv", "al_top.tsv"] {
            let text = file(&report, name);
            assert!(text.lines().count() > 1, "{name}");
            for real in ["10.0.0.1\t", "10.0.0.2\t", "10.0.0.3\t", "10.0.0.4\t"] {
                assert!(!text.contains(real), "{name} shows {real}:\n{text}");
            }
        }
    }
}
