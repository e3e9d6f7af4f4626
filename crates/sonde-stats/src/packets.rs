//! What the reader counts per interval from every packet: traffic per protocol and direction,
//! the packet length and TTL distributions, and the tables.

use std::collections::BTreeMap;

use sonde_wire::{PacketSummary, Transport};

use crate::bins::{DenseDist, Dist};
use crate::class::{Internal, Net, Proto};
use crate::tables::{ProtoKey, Tables, Traffic};
use crate::Config;

/// One finished interval of packet statistics.
#[derive(Debug, Clone)]
pub struct PacketInterval {
    pub index: u64,
    /// By [`Proto`], then [`Net`].
    pub traffic: [[Traffic; 4]; 4],
    /// By [`Net`].
    pub ip_len: [Dist; 4],
    pub ip_ttl: [Dist; 4],
    pub tables: Option<Tables>,
}

impl PacketInterval {
    /// Adds a later part of the same interval.
    pub fn merge(&mut self, other: PacketInterval) {
        for (mine, theirs) in self.traffic.iter_mut().flatten().zip(other.traffic.iter().flatten()) {
            mine.merge(theirs);
        }
        for n in 0..4 {
            self.ip_len[n].merge(&other.ip_len[n]);
            self.ip_ttl[n].merge(&other.ip_ttl[n]);
        }
        match (&mut self.tables, other.tables) {
            (Some(mine), Some(theirs)) => mine.merge(theirs),
            // Counted apart from the counters (readers that split the flows).
            (mine @ None, theirs) => *mine = theirs,
            (Some(_), None) => {}
        }
    }
}

/// Packet statistics interval by interval, fed in packet-time order by the reader.
#[derive(Debug)]
pub struct PacketIntervals {
    interval_ns: u64,
    internal: Internal,
    table_cap: usize,
    current: Option<u64>,
    /// The current interval's packet times: `[start, end)`.
    current_ns: (u64, u64),
    traffic: [[Traffic; 4]; 4],
    ip_len: [DenseDist; 4],
    ip_ttl: [DenseDist; 4],
    tables: Option<Tables>,
    done: BTreeMap<u64, PacketInterval>,
    /// Traffic in short bins of packet time, for a live view (off unless asked for).
    fine: Option<FineBins>,
}

/// Traffic per direction ([`Net`]) in bins much shorter than the interval: what a live
/// throughput chart plots at a resolution the operator picks.
#[derive(Debug, Clone)]
pub struct FineBins {
    pub bin_ns: u64,
    current: Option<FineBin>,
    done: Vec<FineBin>,
}

/// One fine bin: its index (start ÷ `bin_ns`) and traffic by [`Net`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FineBin {
    pub index: u64,
    pub traffic: [Traffic; 4],
}

impl PacketIntervals {
    pub fn new(cfg: &Config) -> Self {
        PacketIntervals {
            interval_ns: cfg.interval_ns.max(1),
            internal: Internal::new(cfg.internal_nets.clone()),
            table_cap: cfg.table_cap,
            current: None,
            current_ns: (0, 0),
            traffic: Default::default(),
            ip_len: std::array::from_fn(|_| DenseDist::new(1 << 16)),
            ip_ttl: std::array::from_fn(|_| DenseDist::new(256)),
            tables: cfg.tables.then(|| Tables::new(cfg.table_cap)),
            done: BTreeMap::new(),
            fine: None,
        }
    }

    /// Also counts traffic per direction in bins of `bin_ns`, taken with [`Self::take_fine`].
    pub fn with_fine_bins(mut self, bin_ns: u64) -> Self {
        self.fine = Some(FineBins { bin_ns: bin_ns.max(1), current: None, done: Vec::new() });
        self
    }

    /// Directions are told by `nets` from now on (a live monitor's SIGHUP).
    pub fn set_internal_nets(&mut self, nets: Vec<ipnet::IpNet>) {
        self.internal = Internal::new(nets);
    }

    /// The intervals closed since the last call (a live run hands them on as it goes; what
    /// [`Self::finish`] returns then is the rest).
    pub fn take_closed(&mut self) -> Vec<PacketInterval> {
        std::mem::take(&mut self.done).into_values().collect()
    }

    /// The fine bins ended since the last call, oldest first.
    pub fn take_fine(&mut self) -> Vec<FineBin> {
        self.fine.as_mut().map_or_else(Vec::new, |f| std::mem::take(&mut f.done))
    }

    #[inline]
    fn fine(&mut self, ts_ns: u64, net: Net, bytes: u64) {
        let Some(f) = self.fine.as_mut() else { return };
        let index = ts_ns / f.bin_ns;
        match &mut f.current {
            Some(bin) if bin.index == index => bin.traffic[net as usize].add(bytes),
            current => {
                let mut bin = FineBin { index, ..FineBin::default() };
                bin.traffic[net as usize].add(bytes);
                if let Some(ended) = current.replace(bin) {
                    f.done.push(ended);
                }
            }
        }
    }

    /// Counts one analysed packet in the interval of its timestamp (as the flow records count
    /// it: a trace whose time steps back adds to an earlier interval again). `in_flow` says whether a TCP or UDP flow counts it; `wire_len` is its length on
    /// the wire, used for packets that are not IP.
    #[inline]
    pub fn packet(&mut self, ts_ns: u64, p: &PacketSummary, in_flow: bool, wire_len: u32) {
        self.enter(ts_ns);
        let Some(ip) = &p.ip else {
            self.traffic[Proto::Other as usize][Net::Ext as usize].add(u64::from(wire_len));
            self.fine(ts_ns, Net::Ext, u64::from(wire_len));
            return;
        };
        let proto = match p.transport {
            Some(Transport::Tcp(_)) if in_flow => Proto::Tcp,
            Some(Transport::Udp(_)) if in_flow => Proto::Udp,
            Some(Transport::Icmp { .. }) => Proto::Icmp,
            _ => Proto::Other,
        };
        let net = self.internal.net(&ip.src, &ip.dst);
        let bytes = u64::from(ip.total_len);
        self.fine(ts_ns, net, bytes);
        let net = net as usize;
        self.traffic[proto as usize][net].add(bytes);
        self.ip_len[net].add(bytes);
        self.ip_ttl[net].add(u64::from(ip.ttl));
        if let Some(t) = &mut self.tables {
            t.packet(ip.src, ip.dst, ProtoKey::of_packet(p, ip.protocol), bytes);
        }
    }

    /// Counts a packet in the tables only: its counters are counted by another
    /// `PacketIntervals` (readers that split the flows each count their own flows' packets, and
    /// one of them keeps the tables of every packet, so that they hold the same first keys).
    #[inline]
    pub fn table_packet(&mut self, ts_ns: u64, p: &PacketSummary) {
        let (Some(ip), true) = (&p.ip, self.tables.is_some()) else { return };
        self.enter(ts_ns);
        if let Some(t) = &mut self.tables {
            t.packet(ip.src, ip.dst, ProtoKey::of_packet(p, ip.protocol), u64::from(ip.total_len));
        }
    }

    /// Makes the interval of `ts_ns` the current one.
    #[inline]
    fn enter(&mut self, ts_ns: u64) {
        if ts_ns >= self.current_ns.1 || ts_ns < self.current_ns.0 {
            self.close();
            let index = ts_ns / self.interval_ns;
            self.current = Some(index);
            self.current_ns = (index * self.interval_ns, (index * self.interval_ns).saturating_add(self.interval_ns));
        }
    }

    /// Packet time reached `now_ns` with no packet (a live capture's tick): the current interval
    /// closes if `now_ns` is past its end, as the next packet would close it.
    pub fn tick(&mut self, now_ns: u64) {
        if self.current.is_some() && now_ns >= self.current_ns.1 {
            self.close();
            self.current_ns = (0, 0);
        }
        if let Some(f) = self.fine.as_mut() {
            if f.current.is_some_and(|bin| now_ns / f.bin_ns > bin.index) {
                f.done.extend(f.current.take());
            }
        }
    }

    /// Ends the current interval, if any.
    fn close(&mut self) {
        let Some(index) = self.current.take() else { return };
        let tables = self.tables.as_mut().map(|t| std::mem::replace(t, Tables::new(self.table_cap)));
        let closed = PacketInterval {
            index,
            traffic: std::mem::take(&mut self.traffic),
            ip_len: std::array::from_fn(|n| self.ip_len[n].take()),
            ip_ttl: std::array::from_fn(|n| self.ip_ttl[n].take()),
            tables,
        };
        match self.done.get_mut(&index) {
            // Time stepped back into this interval and forward again.
            Some(earlier) => earlier.merge(closed),
            None => {
                self.done.insert(index, closed);
            }
        }
    }

    /// Every interval, the last one closed.
    pub fn finish(mut self) -> Vec<PacketInterval> {
        self.close();
        self.done.into_values().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tick_closes_the_interval_it_has_passed() {
        const S: u64 = 1_000_000_000;
        let mut p = PacketIntervals::new(&Config { interval_ns: S, ..Config::default() });
        p.packet(S / 2, &PacketSummary::EMPTY, false, 60);
        p.tick(S - 1);
        assert_eq!((p.current, p.done.len()), (Some(0), 0), "a tick inside the interval leaves it open");
        p.tick(S);
        assert_eq!((p.current, p.done.len()), (None, 1), "a tick at its end closes it");
        assert_eq!(p.done[&0].traffic[Proto::Other as usize][Net::Ext as usize].bytes, 60);
        p.tick(3 * S);
        p.packet(3 * S + 1, &PacketSummary::EMPTY, false, 40);
        let done = p.finish();
        assert_eq!(done.iter().map(|i| i.index).collect::<Vec<_>>(), [0, 3]);
    }

    /// Readers that split the flows: each counts its own packets, one of them also puts every
    /// packet in the tables; merged, the intervals are those of one counter of every packet.
    #[test]
    fn counts_split_by_packet_with_the_tables_apart_merge_into_those_of_one() {
        const S: u64 = 1_000_000_000;
        let cfg = Config { interval_ns: S, tables: true, table_cap: 2, ..Config::default() };
        let packet = |i: u8| PacketSummary {
            ip: Some(sonde_wire::IpSummary {
                src: [10, 0, 0, i % 5].into(),
                dst: [192, 0, 2, i % 3].into(),
                total_len: 40 + u32::from(i),
                ttl: 64 - i % 7,
                ident: 0,
                protocol: 17,
                fragment: sonde_wire::Fragment::No,
            }),
            ..PacketSummary::EMPTY
        };
        // Time steps back once (packet 12), as a trace's may.
        let ts = |i: u8| u64::from(i) * S / 4 - if i == 12 { 2 * S } else { 0 };
        let mut one = PacketIntervals::new(&cfg);
        let (mut first, mut second) =
            (PacketIntervals::new(&cfg), PacketIntervals::new(&Config { tables: false, ..cfg.clone() }));
        for i in 0..20 {
            one.packet(ts(i), &packet(i), false, 0);
            if i % 3 == 0 {
                second.packet(ts(i), &packet(i), false, 0);
                first.table_packet(ts(i), &packet(i));
            } else {
                first.packet(ts(i), &packet(i), false, 0);
            }
        }
        let render = |packets| crate::Report::new(&cfg, packets, Vec::new()).render().unwrap();
        let split = render([second.finish(), first.finish()].concat());
        assert!(split.iter().any(|(name, text)| *name == "hosts.tsv" && text.contains("overflow")), "{split:?}");
        assert_eq!(render(one.finish()), split);
    }
}
