//! What the workers count per interval from the flows they end: flows opened, closed and their
//! metrics' distributions, and every TCP RTT sample. A flow is counted as opened in the interval of its first packet and
//! closed — with its metrics — in the interval of its last, so the result depends only on the
//! records, never on when or in which worker a flow ended.

use std::collections::BTreeMap;
use std::net::IpAddr;

use rustc_hash::FxHashMap;
use sonde_flow::{Endpoints, FlowRecord, FlowSink, RttSample, TcpDirStats, TcpRecord, UdpRecord};

use crate::bins::Dist;
use crate::class::{Dir, Internal, Metric, Net};
use crate::tables::ProtoKey;
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
}

impl FlowInterval {
    pub fn add(&mut self, metric: Metric, dir: Dir, net: Net, value: u64) {
        self.dist_mut(metric, dir, net).add(value);
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
    }
}

/// A flow sink that keeps per-interval flow statistics.
#[derive(Debug, Clone)]
pub struct FlowIntervals {
    interval_ns: u64,
    internal: Internal,
    /// Whether to count flows per host and protocol (for the tables).
    tables: bool,
    pub intervals: BTreeMap<u64, FlowInterval>,
}

impl FlowIntervals {
    pub fn new(cfg: &Config) -> Self {
        FlowIntervals {
            interval_ns: cfg.interval_ns.max(1),
            internal: Internal::new(cfg.internal_nets.clone()),
            tables: cfg.tables,
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
    f.add(Metric::TcpWinMax, dir, net, s.win_max);
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
