//! The whole run's intervals, merged from the reader's packet statistics and every worker's flow
//! statistics, and written as TSV files.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::net::IpAddr;
use std::path::Path;

use rustc_hash::FxHashMap;
use sonde_anon::Anonymizer;

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
        type Body = fn(&Report, &mut String) -> io::Result<()>;
        let mut bodies: Vec<(&'static str, Body)> = vec![
            (FILES[0], Report::write_intervals),
            (FILES[1], Report::write_quantiles),
            (FILES[2], Report::write_histograms),
        ];
        if self
            .intervals
            .values()
            .any(|i| i.packets.as_ref().is_some_and(|p| p.tables.is_some()) || i.flows.apps.is_some())
        {
            bodies.extend([
                (TABLE_FILES[0], Report::write_hosts as Body),
                (TABLE_FILES[1], Report::write_matrix),
                (TABLE_FILES[2], Report::write_protocols),
                (TABLE_FILES[3], Report::write_top),
                (TABLE_FILES[4], Report::write_al_hosts),
                (TABLE_FILES[5], Report::write_al_matrix),
                (TABLE_FILES[6], Report::write_protocol_dir),
                (TABLE_FILES[7], Report::write_al_top),
            ]);
        }
        bodies
            .into_iter()
            .map(|(name, body)| {
                let mut text = String::new();
                body(self, &mut text)?;
                Ok((name, text))
            })
            .collect()
    }

    /// "start\tend\t" of interval `i`.
    fn span(&self, i: u64) -> String {
        let start = i * self.interval_ns;
        format!("{}\t{}\t", seconds(start), seconds(start.saturating_add(self.interval_ns)))
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

    fn write_intervals(&self, out: &mut String) -> io::Result<()> {
        out.push_str("start\tend\tproto\tnet\tpackets\tbytes\tflows_opened\tflows_closed\tflows_active\n");
        let mut span = (u64::MAX, String::new());
        for (i, r) in self.traffic_rows() {
            if span.0 != i {
                span = (i, self.span(i));
            }
            out.push_str(&span.1);
            let _ = writeln!(
                out,
                "{}\t{}\t{}\t{}\t{}\t{}\t{}",
                r.proto, r.net, r.packets, r.bytes, r.flows_opened, r.flows_closed, r.flows_active
            );
        }
        Ok(())
    }

    fn write_quantiles(&self, out: &mut String) -> io::Result<()> {
        out.push_str("start\tend\tmetric\tdir\tnet\tunit\tcount\tmean\tmin\tp50\tp95\tp99\tmax\n");
        for (&i, interval) in &self.intervals {
            let span = self.span(i);
            for ((metric, dir, net), d) in interval.dists() {
                let unit = metric.unit();
                out.push_str(&span);
                let _ = write!(out, "{}\t{}\t{}\t{}\t{}", metric.name(), dir.name(), net.name(), unit.name(), d.count);
                out.push('\t');
                unit.format_mean(d.mean().unwrap_or(0.0), out);
                let percentiles = [50, 95, 99].map(|p| d.percentile(p).unwrap_or(0));
                for v in [d.min].into_iter().chain(percentiles).chain([d.max]) {
                    out.push('\t');
                    unit.format(v, out);
                }
                out.push('\n');
            }
        }
        Ok(())
    }

    fn write_histograms(&self, out: &mut String) -> io::Result<()> {
        out.push_str("start\tend\tmetric\tdir\tnet\tbin_lo\tbin_hi\tcount\n");
        for (&i, interval) in &self.intervals {
            let span = self.span(i);
            for ((metric, dir, net), d) in interval.dists() {
                let unit = metric.unit();
                for (bin, n) in d.sorted_bins() {
                    let (lo, hi) = d.binning.range(bin);
                    out.push_str(&span);
                    let _ = write!(out, "{}\t{}\t{}\t", metric.name(), dir.name(), net.name());
                    unit.format(lo, out);
                    out.push('\t');
                    unit.format(hi, out);
                    let _ = writeln!(out, "\t{n}");
                }
            }
        }
        Ok(())
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

    fn write_hosts(&self, out: &mut String) -> io::Result<()> {
        out.push_str("start\tend\taddr\tinternal\tpkts_in\tbytes_in\tpkts_out\tbytes_out\tflows\n");
        for (i, t) in self.tables() {
            let span = self.span(i);
            // In the order of the addresses shown (the real ones' order would leak through).
            let mut rows: Vec<_> = t.hosts.rows.iter().map(|(addr, h)| (self.show(*addr), addr, h)).collect();
            rows.sort_unstable_by_key(|&(shown, addr, _)| (shown, *addr));
            for (shown, addr, h) in rows {
                out.push_str(&span);
                push_ip(out, shown);
                out.push_str(if self.internal.contains(addr) { "\t1" } else { "\t0" });
                host_counts(out, h);
            }
            if t.hosts.refused > 0 {
                out.push_str(&span);
                out.push_str("overflow\t-");
                host_counts(out, &t.hosts.overflow);
            }
        }
        Ok(())
    }

    fn write_matrix(&self, out: &mut String) -> io::Result<()> {
        out.push_str("start\tend\tsrc\tdst\tpackets\tbytes\n");
        for (i, t) in self.tables() {
            let span = self.span(i);
            let mut rows: Vec<_> = t
                .pairs
                .rows
                .iter()
                .map(|(&(src, dst), tr)| ((self.show(src), self.show(dst)), (src, dst), tr))
                .collect();
            rows.sort_unstable_by_key(|&(shown, pair, _)| (shown, pair));
            for ((src, dst), _, tr) in rows {
                out.push_str(&span);
                push_ip(out, src);
                out.push('\t');
                push_ip(out, dst);
                push_numbers(out, &[tr.packets, tr.bytes]);
            }
            if t.pairs.refused > 0 {
                out.push_str(&span);
                let _ = writeln!(out, "overflow\toverflow\t{}\t{}", t.pairs.overflow.packets, t.pairs.overflow.bytes);
            }
        }
        Ok(())
    }

    fn write_protocols(&self, out: &mut String) -> io::Result<()> {
        out.push_str("start\tend\tip_proto\tprotocol\tport\tservice\tpackets\tbytes\tflows\n");
        for (i, t) in self.tables() {
            let span = self.span(i);
            let mut rows: Vec<_> = t.protocols.rows.iter().collect();
            rows.sort_unstable_by_key(|(k, _)| **k);
            for (k, r) in rows {
                out.push_str(&span);
                let port = if k.port == 0 { "-".to_string() } else { k.port.to_string() };
                let _ = writeln!(
                    out,
                    "{}\t{}\t{port}\t{}\t{}\t{}\t{}",
                    k.ip_protocol,
                    k.protocol_name(),
                    k.service_name(),
                    r.traffic.packets,
                    r.traffic.bytes,
                    r.flows
                );
            }
            if t.protocols.refused > 0 {
                out.push_str(&span);
                let o = &t.protocols.overflow;
                let _ = writeln!(out, "-\toverflow\t-\t-\t{}\t{}\t{}", o.traffic.packets, o.traffic.bytes, o.flows);
            }
        }
        Ok(())
    }

    fn write_top(&self, out: &mut String) -> io::Result<()> {
        out.push_str("start\tend\tby\trank\taddr\tvalue\n");
        for (i, t) in self.tables() {
            let span = self.span(i);
            let by_bytes = |h: &HostRow| h.sent.bytes + h.received.bytes;
            let by_flows = |h: &HostRow| h.flows;
            for (name, value) in [("bytes", &by_bytes as &dyn Fn(&HostRow) -> u64), ("flows", &by_flows)] {
                let mut rows: Vec<_> =
                    t.hosts.rows.iter().map(|(a, h)| (value(h), self.show(*a))).filter(|r| r.0 > 0).collect();
                // Largest first; equal values by address, so the order is the same in every run.
                rows.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
                for (rank, (v, addr)) in rows.iter().take(self.top_n).enumerate() {
                    out.push_str(&span);
                    let _ = write!(out, "{name}\t{}\t", rank + 1);
                    push_ip(out, *addr);
                    push_numbers(out, &[*v]);
                }
            }
        }
        Ok(())
    }
}

/// The application layer's files (docs/rmon2.md).
impl Report {
    fn write_al_hosts(&self, out: &mut String) -> io::Result<()> {
        out.push_str("start\tend\taddr\tinternal\tapp\tby_port\tpkts_in\tbytes_in\tpkts_out\tbytes_out\tflows\n");
        for (i, t) in self.apps() {
            let span = self.span(i);
            let mut rows: Vec<_> =
                t.hosts.rows.iter().map(|(&(addr, app), h)| ((self.show(addr), addr, app), h)).collect();
            rows.sort_unstable_by_key(|&(key, _)| key);
            for ((shown, addr, app), h) in rows {
                out.push_str(&span);
                push_ip(out, shown);
                out.push_str(if self.internal.contains(&addr) { "\t1\t" } else { "\t0\t" });
                push_app(out, app);
                host_counts(out, h);
            }
            if t.hosts.refused > 0 {
                out.push_str(&span);
                out.push_str("overflow\t-\t-\t-");
                host_counts(out, &t.hosts.overflow);
            }
        }
        Ok(())
    }

    fn write_al_matrix(&self, out: &mut String) -> io::Result<()> {
        out.push_str("start\tend\tsrc\tdst\tapp\tby_port\tpackets\tbytes\tflows\n");
        for (i, t) in self.apps() {
            let span = self.span(i);
            let mut rows: Vec<_> = t
                .pairs
                .rows
                .iter()
                .map(|(&(src, dst, app), r)| ((self.show(src), self.show(dst), app, src, dst), r))
                .collect();
            rows.sort_unstable_by_key(|&(key, _)| key);
            for ((src, dst, app, _, _), r) in rows {
                out.push_str(&span);
                push_ip(out, src);
                out.push('\t');
                push_ip(out, dst);
                out.push('\t');
                push_app(out, app);
                push_numbers(out, &[r.traffic.packets, r.traffic.bytes, r.flows]);
            }
            if t.pairs.refused > 0 {
                out.push_str(&span);
                out.push_str("overflow\toverflow\t-\t-");
                let o = &t.pairs.overflow;
                push_numbers(out, &[o.traffic.packets, o.traffic.bytes, o.flows]);
            }
        }
        Ok(())
    }

    fn write_protocol_dir(&self, out: &mut String) -> io::Result<()> {
        out.push_str("start\tend\tpath\tby_port\tpackets\tbytes\tflows\town_packets\town_bytes\town_flows\n");
        for (i, t) in self.apps() {
            let span = self.span(i);
            for node in t.directory() {
                out.push_str(&span);
                out.push_str(&node.path);
                out.push_str(if node.by_port { "\t1" } else { "\t0" });
                let (all, own) = (&node.total, &node.own);
                push_numbers(
                    out,
                    &[
                        all.traffic.packets,
                        all.traffic.bytes,
                        all.flows,
                        own.traffic.packets,
                        own.traffic.bytes,
                        own.flows,
                    ],
                );
            }
        }
        Ok(())
    }

    /// The `--top` largest by bytes of three kinds: alHost rows (`hosts`: a host and an
    /// application, bytes in and out), alMatrix rows (`matrix`) and applications over every
    /// network and transport (`apps`, `unknown` included). Overflow rows are not ranked.
    fn write_al_top(&self, out: &mut String) -> io::Result<()> {
        out.push_str("start\tend\ttable\trank\taddr\tpeer\tapp\tby_port\tpackets\tbytes\tflows\n");
        let unknown = App { name: App::UNKNOWN, by_port: false };
        for (i, t) in self.apps() {
            let span = self.span(i);
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
                    out.push_str(&span);
                    let _ = write!(out, "{table}\t{}\t", rank + 1);
                    for ip in [addr, peer] {
                        match ip {
                            Some(ip) => push_ip(out, ip),
                            None => out.push('-'),
                        }
                        out.push('\t');
                    }
                    push_app(out, app);
                    push_numbers(out, &[packets, bytes, flows]);
                }
            }
        }
        Ok(())
    }
}

/// An application's name and whether its port alone told it, tab-separated.
fn push_app(out: &mut String, app: App) {
    out.push_str(app.name);
    out.push_str(if app.by_port { "\t1" } else { "\t0" });
}

fn add_flows(t: &mut Tables, f: &FlowInterval) {
    for (addr, n) in &f.host_flows {
        t.hosts.existing(addr).flows += n;
    }
    for (key, n) in &f.proto_flows {
        t.protocols.existing(key).flows += n;
    }
}

/// A host row's counts, each after a tab, and the line's end.
fn host_counts(out: &mut String, h: &HostRow) {
    push_numbers(out, &[h.received.packets, h.received.bytes, h.sent.packets, h.sent.bytes, h.flows]);
}

/// Each number after a tab, then the line's end (tables have ~10⁵ rows: no `fmt` machinery).
fn push_numbers(out: &mut String, numbers: &[u64]) {
    let mut digits = itoa::Buffer::new();
    for &n in numbers {
        out.push('\t');
        out.push_str(digits.format(n));
    }
    out.push('\n');
}

/// An address as `Display` writes it; the dotted quad by hand (std's is slow).
fn push_ip(out: &mut String, ip: IpAddr) {
    match ip {
        IpAddr::V4(v4) => {
            let mut digits = itoa::Buffer::new();
            for (i, octet) in v4.octets().into_iter().enumerate() {
                if i > 0 {
                    out.push('.');
                }
                out.push_str(digits.format(octet));
            }
        }
        IpAddr::V6(v6) => {
            let _ = write!(out, "{v6}");
        }
    }
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
                let stats = [all.mean(), all.percentile(50).map(|v| v as f64)]
                    .into_iter()
                    .chain([95, 99].map(|p| all.percentile(p).map(|v| v as f64)));
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

    #[test]
    fn addresses_and_numbers_are_written_as_display_writes_them() {
        for text in ["0.0.0.0", "10.0.0.1", "192.168.100.255", "255.255.255.255", "::", "2001:db8::1", "::ffff:1.2.3.4"]
        {
            let ip: IpAddr = text.parse().unwrap();
            let mut out = String::new();
            push_ip(&mut out, ip);
            assert_eq!(out, ip.to_string());
        }
        let mut out = String::new();
        push_numbers(&mut out, &[0, 7, u64::MAX]);
        assert_eq!(out, format!("\t0\t7\t{}\n", u64::MAX));
    }

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
