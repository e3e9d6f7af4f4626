//! What the workers count per interval from the flows they end: flows opened, closed and their
//! metrics' distributions, every TCP RTT sample, and (with the tables) the application-layer
//! tables. A flow is counted as opened in the interval of its first packet and closed — with
//! its metrics and its traffic by application — in the interval of its last, so the result
//! depends only on the records, never on when or in which worker a flow ended.

use std::collections::BTreeMap;
use std::net::IpAddr;

use rustc_hash::FxHashMap;
use sonde_flow::{Endpoints, FlowRecord, FlowSink, RttSample, TcpDirStats, TcpRecord, UdpRecord};

use crate::apps::{App, AppFlow, AppTables};
use crate::bins::Dist;
use crate::class::{Dir, Internal, Metric, Net};
use crate::tables::{ProtoKey, Traffic};
use crate::Config;

/// Distributions per interval: one per metric, direction and net.
const SLOTS: usize = Metric::ALL.len() * 3 * 4;

fn slot(metric: Metric, dir: Dir, net: Net) -> usize {
    (metric as usize * 3 + dir as usize) * 4 + net as usize
}

/// One interval's flow statistics (from one worker, or merged).
#[derive(Debug, Clone, Default)]
pub struct FlowInterval {
    /// By protocol (0 TCP, 1 UDP), then [`Net`].
    pub opened: [[u64; 4]; 2],
    pub closed: [[u64; 4]; 2],
    /// By [`slot`] (the order of `(Metric, Dir, Net)`); empty until the first flow ends here.
    dists: Vec<Option<Box<Dist>>>,
    /// Flows started in the interval per host and per protocol directory entry.
    pub host_flows: FxHashMap<IpAddr, u64>,
    pub proto_flows: FxHashMap<ProtoKey, u64>,
    /// The application-layer tables of the flows that ended in the interval (with the tables).
    pub apps: Option<AppTables>,
}

impl FlowInterval {
    pub fn add(&mut self, metric: Metric, dir: Dir, net: Net, value: u64) {
        self.dist_mut(metric, dir, net).add(value);
    }

    /// `n` values equal to `value` (none when `n` is 0: no empty distribution is made).
    pub fn add_n(&mut self, metric: Metric, dir: Dir, net: Net, value: u64, n: u64) {
        if n > 0 {
            self.dist_mut(metric, dir, net).add_n(value, n);
        }
    }

    fn dist_mut(&mut self, metric: Metric, dir: Dir, net: Net) -> &mut Dist {
        if self.dists.is_empty() {
            self.dists.resize_with(SLOTS, || None);
        }
        self.dists[slot(metric, dir, net)].get_or_insert_with(|| Box::new(Dist::new(metric.binning())))
    }

    pub fn dist(&self, metric: Metric, dir: Dir, net: Net) -> Option<&Dist> {
        self.dists.get(slot(metric, dir, net))?.as_deref()
    }

    /// Every distribution with samples, in `(Metric, Dir, Net)` order.
    pub fn dists(&self) -> impl Iterator<Item = ((Metric, Dir, Net), &Dist)> {
        let dirs = [Dir::C2s, Dir::S2c, Dir::Both];
        Metric::ALL
            .into_iter()
            .flat_map(move |m| dirs.into_iter().flat_map(move |d| Net::ALL.into_iter().map(move |n| (m, d, n))))
            .filter_map(|(m, d, n)| Some(((m, d, n), self.dist(m, d, n)?)))
    }

    /// The counters and distributions alone (no tables): what a feed of interval
    /// contributions needs, cheap to copy.
    pub fn without_tables(&self) -> FlowInterval {
        FlowInterval { opened: self.opened, closed: self.closed, dists: self.dists.clone(), ..FlowInterval::default() }
    }

    pub fn merge(&mut self, other: &FlowInterval) {
        for p in 0..2 {
            for n in 0..4 {
                self.opened[p][n] += other.opened[p][n];
                self.closed[p][n] += other.closed[p][n];
            }
        }
        for ((m, d, n), dist) in other.dists() {
            self.dist_mut(m, d, n).merge(dist);
        }
        for (k, n) in &other.host_flows {
            *self.host_flows.entry(*k).or_default() += n;
        }
        for (k, n) in &other.proto_flows {
            *self.proto_flows.entry(*k).or_default() += n;
        }
        if let Some(theirs) = &other.apps {
            self.apps.get_or_insert_with(|| AppTables::new(theirs.hosts.cap())).merge(theirs);
        }
    }
}

/// A flow sink that keeps per-interval flow statistics.
#[derive(Debug, Clone)]
pub struct FlowIntervals {
    interval_ns: u64,
    internal: Internal,
    /// Whether to count flows per host and protocol and keep the application tables.
    tables: bool,
    table_cap: usize,
    pub intervals: BTreeMap<u64, FlowInterval>,
}

impl FlowIntervals {
    pub fn new(cfg: &Config) -> Self {
        FlowIntervals {
            interval_ns: cfg.interval_ns.max(1),
            internal: Internal::new(cfg.internal_nets.clone()),
            tables: cfg.tables,
            table_cap: cfg.table_cap,
            intervals: BTreeMap::new(),
        }
    }

    /// The intervals counted since the last call (a live run hands them on as it goes).
    pub fn take(&mut self) -> BTreeMap<u64, FlowInterval> {
        std::mem::take(&mut self.intervals)
    }

    /// Adds intervals taken from another sink (or from this one earlier).
    pub fn absorb(&mut self, parts: BTreeMap<u64, FlowInterval>) {
        for (i, f) in parts {
            match self.intervals.get_mut(&i) {
                Some(mine) => mine.merge(&f),
                None => {
                    self.intervals.insert(i, f);
                }
            }
        }
    }

    fn at(&mut self, t_ns: u64) -> &mut FlowInterval {
        self.intervals.entry(t_ns / self.interval_ns).or_default()
    }

    /// Counts the flow opened and closed; returns its direction and the interval it closed in.
    fn open_close(
        &mut self,
        protocol: usize,
        e: &Endpoints,
        ip_protocol: u8,
        first_ns: u64,
        last_ns: u64,
    ) -> (Net, &mut FlowInterval) {
        let net = Net::of(self.internal.contains(&e.client_ip), self.internal.contains(&e.server_ip));
        let tables = self.tables;
        let opened = self.at(first_ns);
        opened.opened[protocol][net as usize] += 1;
        if tables {
            *opened.host_flows.entry(e.client_ip).or_default() += 1;
            if e.server_ip != e.client_ip {
                *opened.host_flows.entry(e.server_ip).or_default() += 1;
            }
            *opened.proto_flows.entry(ProtoKey::of_ports(ip_protocol, e.client_port, e.server_port)).or_default() += 1;
        }
        let closed = self.at(last_ns);
        closed.closed[protocol][net as usize] += 1;
        (net, closed)
    }

    fn tcp(&mut self, r: &TcpRecord) {
        let (net, f) = self.open_close(0, &r.endpoints, 6, r.first_ns, r.last_ns);
        let duration_ns = r.last_ns.saturating_sub(r.first_ns);
        f.add(Metric::TcpDuration, Dir::Both, net, duration_ns);
        for (dir, s, hs) in [(Dir::C2s, &r.client, r.hs_syn_synack_ns), (Dir::S2c, &r.server, r.hs_synack_ack_ns)] {
            tcp_dir(f, dir, net, s, duration_ns);
            if let Some(hs) = hs {
                f.add(Metric::TcpHsRtt, dir, net, hs);
            }
        }
    }

    fn udp(&mut self, r: &UdpRecord) {
        let (net, f) = self.open_close(1, &r.endpoints, 17, r.first_ns, r.last_ns);
        f.add(Metric::UdpDuration, Dir::Both, net, r.last_ns.saturating_sub(r.first_ns));
        for (dir, s) in [(Dir::C2s, &r.client), (Dir::S2c, &r.server)] {
            if s.pkts > 0 {
                f.add(Metric::UdpBytes, dir, net, s.payload_bytes);
            }
        }
    }

    /// Counts the flow in the application tables of the interval of its last packet.
    fn application(&mut self, record: &FlowRecord) {
        let (transport, ip_protocol, last_ns, client_sent, server_sent) = match record {
            FlowRecord::Tcp(r) => (
                sonde_l7::Transport::Tcp,
                6,
                r.last_ns,
                Traffic { packets: r.client.pkts, bytes: r.client.ip_bytes },
                Traffic { packets: r.server.pkts, bytes: r.server.ip_bytes },
            ),
            FlowRecord::Udp(r) => (
                sonde_l7::Transport::Udp,
                17,
                r.last_ns,
                Traffic { packets: r.client.pkts, bytes: r.client.ip_bytes },
                Traffic { packets: r.server.pkts, bytes: r.server.ip_bytes },
            ),
        };
        let e = record.endpoints();
        let none = sonde_l7::Facts::default();
        let label = sonde_l7::label(record.app().unwrap_or(&none), transport, e.client_port, e.server_port);
        let flow = AppFlow {
            client: e.client_ip,
            server: e.server_ip,
            ip_protocol,
            app: App::of(label),
            client_sent,
            server_sent,
        };
        let cap = self.table_cap;
        self.at(last_ns).apps.get_or_insert_with(|| AppTables::new(cap)).flow(&flow);
    }
}

/// One TCP direction's metrics. Rates and RTTs only where they are defined (data sent, samples
/// taken); sizes for every direction that sent a packet.
fn tcp_dir(f: &mut FlowInterval, dir: Dir, net: Net, s: &TcpDirStats, duration_ns: u64) {
    if s.pkts == 0 {
        return;
    }
    f.add(Metric::TcpBytes, dir, net, s.payload_bytes);
    if duration_ns > 0 {
        let bits_per_s = u128::from(s.payload_bytes) * 8 * 1_000_000_000 / u128::from(duration_ns);
        f.add(Metric::TcpThroughput, dir, net, bits_per_s.min(u128::from(u64::MAX)) as u64);
    }
    if s.rtt.count > 0 {
        f.add(Metric::TcpRttAvg, dir, net, s.rtt.mean_ns().round() as u64);
        f.add(Metric::TcpRttMin, dir, net, s.rtt.min_ns);
    }
    // Parts per million of the data packets.
    let ppm = |n: u64| (n.min(s.data_pkts) * 1_000_000).checked_div(s.data_pkts);
    if let (Some(retx), Some(ooo)) = (ppm(s.retx_pkts), ppm(s.ooo_pkts)) {
        f.add(Metric::TcpRetxRate, dir, net, retx);
        f.add(Metric::TcpOooRate, dir, net, ooo);
    }
    // Tstat's tcp_anomalies: each data segment at its class (in sequence, or the cause of its
    // being out of sequence), so the bins give the classes' shares.
    let a = &s.anomalies;
    let causes =
        [a.rto, a.fast_retx, a.reordering, a.net_dup, a.flow_control, a.unneeded_rto, a.unneeded_fast_retx, a.unknown];
    let in_sequence = s.data_pkts.saturating_sub(causes.iter().sum());
    for (class, n) in std::iter::once(in_sequence).chain(causes).enumerate() {
        f.add_n(Metric::TcpAnomaly, dir, net, class as u64, n);
    }
    f.add(Metric::TcpWinMax, dir, net, s.win_max);
    // Tstat's congestion-window estimate (`c_cwin_max`): measured on new in-order data only.
    if s.inflight_max > 0 {
        f.add(Metric::TcpCwndMax, dir, net, s.inflight_max);
    }
    if s.mss_opt > 0 {
        f.add(Metric::TcpMss, dir, net, u64::from(s.mss_opt));
    }
}

impl FlowSink for FlowIntervals {
    fn flow(&mut self, record: &FlowRecord) {
        match record {
            FlowRecord::Tcp(r) => self.tcp(r),
            FlowRecord::Udp(r) => self.udp(r),
        }
        if self.tables {
            self.application(record);
        }
    }

    fn internal_nets(&mut self, nets: &[ipnet::IpNet]) {
        self.internal = Internal::new(nets.to_vec());
    }

    /// Flows are counted as they end.
    fn interim(&mut self, _: &FlowRecord) {}

    /// Unlike a flow's metrics, a sample is charged to the interval it was taken in.
    fn rtt_sample(&mut self, s: &RttSample) {
        let net = Net::of(self.internal.contains(&s.client_ip), self.internal.contains(&s.server_ip));
        let dir = if s.client_data { Dir::C2s } else { Dir::S2c };
        self.at(s.ts_ns).add(Metric::TcpRttSample, dir, net, s.rtt_ns);
    }
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use sonde_flow::{EndReason, TcpRecord, UdpDirStats, UdpRecord};
    use sonde_l7::{Facts, TlsFacts};

    use super::*;
    use crate::apps::App;
    use crate::tables::HostRow;

    const S: u64 = 1_000_000_000;

    fn endpoints(client: &str, client_port: u16, server: &str, server_port: u16) -> Endpoints {
        Endpoints {
            client_ip: client.parse().unwrap(),
            client_port,
            server_ip: server.parse().unwrap(),
            server_port,
            client_internal: false,
            server_internal: false,
            tunnel: None,
        }
    }

    /// A UDP flow of `i` (varied hosts, ports, sizes and times), a TCP one every third.
    fn record(i: u64) -> FlowRecord {
        let client = format!("10.0.{}.{}", i % 3, i % 7);
        let server = if i.is_multiple_of(5) { format!("2001:db8::{}", i % 4) } else { format!("192.0.2.{}", i % 11) };
        let client = if i.is_multiple_of(5) { format!("2001:db8::1:{}", i % 3) } else { client };
        let server_port = [53, 443, 22, 5004, 40000][(i % 5) as usize];
        let e = endpoints(&client, 30_000 + (i % 9) as u16, &server, server_port);
        let (first_ns, last_ns) = (i * S / 4, i * S / 4 + (i % 6) * S);
        let (c, s) = ((1 + i % 4, 100 + i * 10), (i % 3, 60 * (i % 3)));
        if i.is_multiple_of(3) {
            let dir = |(pkts, ip_bytes)| TcpDirStats { pkts, ip_bytes, ..TcpDirStats::default() };
            // Some flows carry facts: the label decides what they say.
            let app = i.is_multiple_of(2).then(|| {
                Box::new(Facts {
                    tls: Some(Box::new(TlsFacts { sni: Some("example.org".into()), ..Default::default() })),
                    ..Default::default()
                })
            });
            FlowRecord::Tcp(TcpRecord {
                endpoints: e,
                complete: true,
                end: EndReason::Fin,
                first_ns,
                last_ns,
                hs_syn_synack_ns: None,
                hs_synack_ack_ns: None,
                zeek: None,
                tstat: None,
                features: None,
                client: dir(c),
                server: dir(s),
                app,
                owners: None,
                icmp_errors: Default::default(),
            })
        } else {
            let dir = |(pkts, ip_bytes)| UdpDirStats { pkts, ip_bytes, ..UdpDirStats::default() };
            FlowRecord::Udp(UdpRecord {
                endpoints: e,
                end: EndReason::Idle,
                first_ns,
                last_ns,
                client: dir(c),
                server: dir(s),
                app: None,
                owners: None,
                features: None,
                icmp_errors: Default::default(),
            })
        }
    }

    fn config(cap: usize) -> Config {
        Config { interval_ns: S, tables: true, table_cap: cap, ..Config::default() }
    }

    fn sent(r: &FlowRecord) -> (Traffic, Traffic) {
        match r {
            FlowRecord::Tcp(r) => (
                Traffic { packets: r.client.pkts, bytes: r.client.ip_bytes },
                Traffic { packets: r.server.pkts, bytes: r.server.ip_bytes },
            ),
            FlowRecord::Udp(r) => (
                Traffic { packets: r.client.pkts, bytes: r.client.ip_bytes },
                Traffic { packets: r.server.pkts, bytes: r.server.ip_bytes },
            ),
        }
    }

    /// Each interval's application tables in a comparable form.
    type Picture = Vec<(u64, Vec<((IpAddr, App), HostRow)>, HostRow, u64, Vec<crate::DirNode>)>;
    fn picture(f: &FlowIntervals) -> Picture {
        f.intervals
            .iter()
            .filter_map(|(i, x)| {
                let t = x.apps.as_ref()?;
                let mut hosts: Vec<_> = t.hosts.rows.iter().map(|(k, v)| (*k, *v)).collect();
                hosts.sort_unstable_by_key(|r| r.0);
                Some((*i, hosts, t.hosts.overflow, t.hosts.refused + t.pairs.refused, t.directory()))
            })
            .collect()
    }

    #[test]
    fn a_flow_is_counted_whole_in_the_interval_of_its_last_packet() {
        let mut f = FlowIntervals::new(&config(100));
        let r = record(4); // 1 s to 5 s: intervals 1 to 5
        f.flow(&r);
        let apps: Vec<u64> = f.intervals.iter().filter(|(_, x)| x.apps.is_some()).map(|(i, _)| *i).collect();
        assert_eq!(apps, [5]);
        let t = f.intervals[&5].apps.as_ref().unwrap();
        let (c, s) = sent(&r);
        let e = r.endpoints();
        let label = sonde_l7::label(&Facts::default(), sonde_l7::Transport::Udp, e.client_port, e.server_port);
        let client = t.hosts.rows[&(e.client_ip, App::of(label))];
        assert_eq!((client.sent, client.received, client.flows), (c, s, 1));
        // Without --tables, none.
        let mut off = FlowIntervals::new(&Config { tables: false, ..config(100) });
        off.flow(&r);
        assert!(off.intervals.values().all(|x| x.apps.is_none()));
    }

    /// Every flow's traffic is in alHost's rows and overflow (twice: sent by one host,
    /// received by the other), in the matrix once, and at the directory's root once.
    #[test]
    fn the_tables_add_up_to_the_flows_with_or_without_overflow() {
        for cap in [0, 3, 10_000] {
            let mut f = FlowIntervals::new(&config(cap));
            let records: Vec<FlowRecord> = (0..400).map(record).collect();
            let mut want: BTreeMap<u64, (Traffic, u64)> = BTreeMap::new();
            for r in &records {
                f.flow(r);
                let (c, s) = sent(r);
                let last = match r {
                    FlowRecord::Tcp(r) => r.last_ns,
                    FlowRecord::Udp(r) => r.last_ns,
                };
                let w = want.entry(last / S).or_default();
                w.0.merge(&c);
                w.0.merge(&s);
                w.1 += 1;
            }
            for (i, (traffic, flows)) in &want {
                let t = f.intervals[i].apps.as_ref().unwrap();
                let mut sent_total = t.hosts.overflow.sent;
                let mut received_total = t.hosts.overflow.received;
                for h in t.hosts.rows.values() {
                    sent_total.merge(&h.sent);
                    received_total.merge(&h.received);
                }
                assert_eq!((sent_total, received_total), (*traffic, *traffic), "cap {cap}, interval {i}: alHost");
                let mut matrix = t.pairs.overflow.traffic;
                t.pairs.rows.values().for_each(|r| matrix.merge(&r.traffic));
                assert_eq!(matrix, *traffic, "cap {cap}, interval {i}: alMatrix");
                let root = t.directory().into_iter().next().unwrap();
                assert_eq!((root.path.as_str(), root.total.traffic, root.total.flows), ("ether2", *traffic, *flows));
                assert!(t.hosts.rows.len() <= cap && t.pairs.rows.len() <= cap, "cap {cap}");
                assert_eq!(t.hosts.refused, t.hosts.overflow.flows);
                if cap == 0 {
                    assert_eq!(t.hosts.refused, 2 * flows, "every host addition refused");
                }
            }
        }
    }

    #[test]
    fn two_workers_merged_equal_one() {
        for cap in [2, 5, 10_000] {
            let mut one = FlowIntervals::new(&config(cap));
            let mut two = [FlowIntervals::new(&config(cap)), FlowIntervals::new(&config(cap))];
            for i in 0..300 {
                let r = record(i);
                one.flow(&r);
                two[(i * 7 % 2) as usize].flow(&r);
            }
            // In either order.
            let [a, b] = two;
            let (mut ab, mut ba) = (a.clone(), b.clone());
            ab.absorb(b.intervals);
            ba.absorb(a.intervals);
            assert!(picture(&one).iter().any(|i| i.3 > 0) || cap == 10_000, "cap {cap}: some overflow");
            assert_eq!(picture(&ab), picture(&one), "cap {cap}");
            assert_eq!(picture(&ba), picture(&one), "cap {cap}");
        }
    }
}
