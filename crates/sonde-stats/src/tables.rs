//! RMON2-style tables of one interval: hosts, host pairs (the matrix) and the protocol
//! directory, each bounded; what does not fit is added to an overflow row and counted. Two
//! bounds: [`Bounded`] keeps the first keys (for tables filled by one stream, the reader's) and
//! [`Sampled`] keeps keys chosen by the key alone (for tables filled by several workers).

use std::collections::hash_map::Entry;
use std::collections::BinaryHeap;
use std::hash::{Hash, Hasher};
use std::net::IpAddr;

use rustc_hash::FxHashMap;
use sonde_wire::{PacketSummary, Transport};

pub use sonde_types::Traffic;

/// One host's traffic: what it sent and received, and the flows it took part in that started
/// in the interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HostRow {
    pub sent: Traffic,
    pub received: Traffic,
    pub flows: u64,
}

/// A protocol directory entry: traffic and flows started in the interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProtoRow {
    pub traffic: Traffic,
    pub flows: u64,
}

/// A protocol directory key: the IP protocol number and the service port (0 when none is
/// recognised or the protocol has no ports).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProtoKey {
    pub ip_protocol: u8,
    pub port: u16,
}

/// Ports named in the protocol directory: the IANA service names.
const SERVICES: &[(u16, &str)] = &[
    (20, "ftp-data"),
    (21, "ftp"),
    (22, "ssh"),
    (23, "telnet"),
    (25, "smtp"),
    (53, "domain"),
    (67, "bootps"),
    (68, "bootpc"),
    (69, "tftp"),
    (80, "http"),
    (110, "pop3"),
    (123, "ntp"),
    (137, "netbios-ns"),
    (138, "netbios-dgm"),
    (139, "netbios-ssn"),
    (143, "imap"),
    (161, "snmp"),
    (162, "snmptrap"),
    (179, "bgp"),
    (389, "ldap"),
    (443, "https"),
    (445, "microsoft-ds"),
    (465, "submissions"),
    (500, "isakmp"),
    (514, "syslog"),
    (520, "router"),
    (587, "submission"),
    (636, "ldaps"),
    (853, "domain-s"),
    (993, "imaps"),
    (995, "pop3s"),
    (1194, "openvpn"),
    (1812, "radius"),
    (1900, "ssdp"),
    (3306, "mysql"),
    (3389, "ms-wbt-server"),
    (3478, "stun"),
    (4500, "ipsec-nat-t"),
    (5060, "sip"),
    (5353, "mdns"),
    (5432, "postgresql"),
    (8080, "http-alt"),
    (8443, "https-alt"),
];

/// One bit per port up to the highest named one: whether [`SERVICES`] names it (a packet asks
/// twice; a bit test costs less than a binary search).
const NAMED: [u64; NAMED_WORDS] = {
    let mut bits = [0u64; NAMED_WORDS];
    let mut i = 0;
    while i < SERVICES.len() {
        let port = SERVICES[i].0 as usize;
        bits[port / 64] |= 1 << (port % 64);
        i += 1;
    }
    bits
};
const NAMED_WORDS: usize = SERVICES[SERVICES.len() - 1].0 as usize / 64 + 1;

fn named(port: u16) -> bool {
    NAMED.get(usize::from(port) / 64).is_some_and(|w| w & (1 << (port % 64)) != 0)
}

impl ProtoKey {
    /// The service of a TCP or UDP exchange between two ports: a named port if either is (the
    /// lower first), else a port below 1024, else none.
    #[inline]
    pub fn of_ports(ip_protocol: u8, a: u16, b: u16) -> ProtoKey {
        let (lo, hi) = (a.min(b), a.max(b));
        let port = if named(lo) {
            lo
        } else if named(hi) {
            hi
        } else if lo < 1024 {
            lo
        } else {
            0
        };
        ProtoKey { ip_protocol, port }
    }

    pub fn of_packet(p: &PacketSummary, ip_protocol: u8) -> ProtoKey {
        match p.transport {
            Some(Transport::Tcp(t)) => ProtoKey::of_ports(ip_protocol, t.src_port, t.dst_port),
            Some(Transport::Udp(u)) => ProtoKey::of_ports(ip_protocol, u.src_port, u.dst_port),
            _ => ProtoKey { ip_protocol, port: 0 },
        }
    }

    /// "tcp", "udp", "icmp", "ipv6-icmp", … or the number.
    pub fn protocol_name(self) -> String {
        match self.ip_protocol {
            1 => "icmp".into(),
            2 => "igmp".into(),
            4 => "ipencap".into(),
            6 => "tcp".into(),
            17 => "udp".into(),
            41 => "ipv6".into(),
            47 => "gre".into(),
            50 => "esp".into(),
            51 => "ah".into(),
            58 => "ipv6-icmp".into(),
            89 => "ospf".into(),
            112 => "vrrp".into(),
            132 => "sctp".into(),
            n => n.to_string(),
        }
    }

    pub fn service_name(self) -> &'static str {
        match SERVICES.binary_search_by_key(&self.port, |s| s.0) {
            Ok(i) => SERVICES[i].1,
            Err(_) => "-",
        }
    }
}

/// A map that holds at most `cap` keys; the rest is merged into `overflow`, and `refused` counts
/// the updates that went there.
#[derive(Debug, Clone)]
pub struct Bounded<K, V> {
    pub rows: FxHashMap<K, V>,
    pub overflow: V,
    pub refused: u64,
    cap: usize,
}

impl<K: Hash + Eq, V: Default> Bounded<K, V> {
    pub fn new(cap: usize) -> Self {
        Bounded { rows: FxHashMap::default(), overflow: V::default(), refused: 0, cap }
    }

    /// The row of `key`, or the overflow row when the table is full.
    #[inline]
    pub fn row(&mut self, key: K) -> &mut V {
        let full = self.rows.len() >= self.cap;
        match self.rows.entry(key) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) if !full => e.insert(V::default()),
            Entry::Vacant(_) => {
                self.refused += 1;
                &mut self.overflow
            }
        }
    }

    /// Adds `other`'s rows (in key order, so the bound keeps the same rows every run), overflow
    /// and refusals.
    pub fn merge(&mut self, other: Bounded<K, V>, add: impl Fn(&mut V, &V))
    where
        K: Ord,
    {
        let mut rows: Vec<(K, V)> = other.rows.into_iter().collect();
        rows.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        for (k, v) in rows {
            add(self.row(k), &v);
        }
        add(&mut self.overflow, &other.overflow);
        self.refused += other.refused;
    }

    /// The row of `key` if the table has it, else the overflow row (counted): for counts added
    /// after the interval, which must not take rows the packets did not.
    pub fn existing(&mut self, key: &K) -> &mut V {
        match self.rows.get_mut(key) {
            Some(v) => v,
            None => {
                self.refused += 1;
                &mut self.overflow
            }
        }
    }
}

/// What a [`Sampled`] table adds up: a row's counts, with the flows that made them.
pub trait Row: Default {
    fn add(&mut self, other: &Self);
    /// Flows counted in the row: how many additions it took.
    fn flows(&self) -> u64;
}

impl Row for HostRow {
    fn add(&mut self, o: &HostRow) {
        self.sent.merge(&o.sent);
        self.received.merge(&o.received);
        self.flows += o.flows;
    }
    fn flows(&self) -> u64 {
        self.flows
    }
}

impl Row for ProtoRow {
    fn add(&mut self, o: &ProtoRow) {
        self.traffic.merge(&o.traffic);
        self.flows += o.flows;
    }
    fn flows(&self) -> u64 {
        self.flows
    }
}

/// A map that holds at most `cap` keys, chosen by the keys alone: of all keys added, the `cap`
/// of lowest rank (a fixed hash of the key, ties by key order) have rows; the rest is summed in
/// `overflow`. A key that loses its row to a key of lower rank takes its counts to the overflow
/// row, and never gets a row again (`cap` keys of lower rank are there for good). So the rows,
/// the overflow and `refused` are the same whatever the order of the additions and however they
/// are split and merged: what tables filled by several workers need, where [`Bounded`]'s first
/// come, first kept would depend on the thread count. The kept keys are a pseudo-random sample
/// of the keys (by hash), not the largest.
#[derive(Debug, Clone)]
pub struct Sampled<K, V> {
    pub rows: FxHashMap<K, V>,
    pub overflow: V,
    /// Flows counted in the overflow row (added to it, or taken there with their row).
    pub refused: u64,
    cap: usize,
    /// The keys with rows by rank, the highest on top: the one to give up first.
    ranked: BinaryHeap<(u64, K)>,
}

impl<K: Hash + Ord + Copy, V: Row> Sampled<K, V> {
    pub fn new(cap: usize) -> Self {
        Sampled { rows: FxHashMap::default(), overflow: V::default(), refused: 0, cap, ranked: BinaryHeap::new() }
    }

    pub fn cap(&self) -> usize {
        self.cap
    }

    /// Adds `row`'s counts to the row of `key`, or to the overflow row.
    pub fn add(&mut self, key: K, row: &V) {
        if let Some(mine) = self.rows.get_mut(&key) {
            mine.add(row);
            return;
        }
        let ranked = (rank(&key), key);
        if self.rows.len() < self.cap {
            self.ranked.push(ranked);
        } else {
            match self.ranked.peek_mut() {
                Some(mut highest) if ranked < *highest => {
                    let (_, out) = std::mem::replace(&mut *highest, ranked);
                    let gone = self.rows.remove(&out).unwrap_or_default();
                    self.overflow.add(&gone);
                    self.refused += gone.flows();
                }
                _ => {
                    self.overflow.add(row);
                    self.refused += row.flows();
                    return;
                }
            }
        }
        self.rows.entry(key).or_default().add(row);
    }

    /// Adds `other`'s rows, overflow and refusals: the same table as if one had seen both's
    /// additions.
    pub fn merge(&mut self, other: &Sampled<K, V>) {
        for (k, v) in &other.rows {
            self.add(*k, v);
        }
        self.overflow.add(&other.overflow);
        self.refused += other.refused;
    }
}

/// A key's rank in a [`Sampled`] table: the same in every run and worker.
fn rank<K: Hash>(key: &K) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    key.hash(&mut h);
    // MurmurHash3's finaliser: FxHash's high bits depend little on the last bytes hashed.
    let mut x = h.finish();
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

/// One interval's tables.
#[derive(Debug, Clone)]
pub struct Tables {
    pub hosts: Bounded<IpAddr, HostRow>,
    pub pairs: Bounded<(IpAddr, IpAddr), Traffic>,
    pub protocols: Bounded<ProtoKey, ProtoRow>,
}

impl Tables {
    pub fn new(cap: usize) -> Self {
        Tables { hosts: Bounded::new(cap), pairs: Bounded::new(cap), protocols: Bounded::new(cap) }
    }

    /// Adds a later part of the same interval.
    pub fn merge(&mut self, other: Tables) {
        self.hosts.merge(other.hosts, |a, b| {
            a.sent.merge(&b.sent);
            a.received.merge(&b.received);
            a.flows += b.flows;
        });
        self.pairs.merge(other.pairs, Traffic::merge);
        self.protocols.merge(other.protocols, |a, b| {
            a.traffic.merge(&b.traffic);
            a.flows += b.flows;
        });
    }

    #[inline]
    pub fn packet(&mut self, src: IpAddr, dst: IpAddr, proto: ProtoKey, bytes: u64) {
        self.hosts.row(src).sent.add(bytes);
        self.hosts.row(dst).received.add(bytes);
        self.pairs.row((src, dst)).add(bytes);
        self.protocols.row(proto).traffic.add(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn services_are_sorted_for_binary_search() {
        assert!(SERVICES.windows(2).all(|w| w[0].0 < w[1].0));
    }

    #[test]
    fn the_port_bitmap_names_exactly_the_services() {
        for port in 0..=u16::MAX {
            assert_eq!(named(port), SERVICES.binary_search_by_key(&port, |s| s.0).is_ok(), "{port}");
        }
    }

    #[test]
    fn service_port_choice() {
        assert_eq!(ProtoKey::of_ports(6, 51234, 443).port, 443);
        assert_eq!(ProtoKey::of_ports(17, 5353, 5353).port, 5353);
        assert_eq!(ProtoKey::of_ports(6, 8080, 22).port, 22);
        assert_eq!(ProtoKey::of_ports(6, 40000, 999).port, 999);
        assert_eq!(ProtoKey::of_ports(6, 40000, 50000).port, 0);
        assert_eq!(ProtoKey::of_ports(6, 1, 443).service_name(), "https");
    }

    #[test]
    fn a_full_table_counts_the_rest_in_overflow() {
        let mut t: Bounded<u32, Traffic> = Bounded::new(2);
        for k in [1, 2, 3, 1, 4] {
            t.row(k).add(10);
        }
        assert_eq!(t.rows.len(), 2);
        assert_eq!(t.rows[&1].packets, 2);
        assert_eq!((t.overflow.packets, t.refused), (2, 2));
        t.existing(&5).add(1);
        assert_eq!((t.overflow.packets, t.refused), (3, 3));
    }

    fn one_flow(bytes: u64) -> ProtoRow {
        ProtoRow { traffic: Traffic { packets: 1, bytes }, flows: 1 }
    }

    /// Rows, overflow and refusals of a sampled table in a comparable form.
    fn picture(t: &Sampled<u32, ProtoRow>) -> (Vec<(u32, ProtoRow)>, ProtoRow, u64) {
        let mut rows: Vec<_> = t.rows.iter().map(|(k, v)| (*k, *v)).collect();
        rows.sort_unstable_by_key(|r| r.0);
        (rows, t.overflow, t.refused)
    }

    #[test]
    fn a_sampled_table_keeps_the_lowest_ranks_whatever_the_order() {
        let keys: Vec<u32> = (0..200).map(|i| (i * 7919) % 50).collect();
        let mut forward: Sampled<u32, ProtoRow> = Sampled::new(10);
        for (i, &k) in keys.iter().enumerate() {
            forward.add(k, &one_flow(i as u64));
        }
        let mut backward: Sampled<u32, ProtoRow> = Sampled::new(10);
        for (i, &k) in keys.iter().enumerate().rev() {
            backward.add(k, &one_flow(i as u64));
        }
        assert_eq!(picture(&forward), picture(&backward));
        assert_eq!(forward.rows.len(), 10, "the cap is respected");
        let mut by_rank: Vec<u32> = (0..50).collect();
        by_rank.sort_unstable_by_key(|k| (rank(k), *k));
        let mut kept: Vec<u32> = forward.rows.keys().copied().collect();
        kept.sort_unstable_by_key(|k| (rank(k), *k));
        assert_eq!(kept, by_rank[..10]);
        // Nothing lost: rows and overflow hold every flow; refusals are the overflow's flows.
        let total: u64 = forward.rows.values().map(|r| r.flows).sum::<u64>() + forward.overflow.flows;
        assert_eq!((total, forward.refused), (200, forward.overflow.flows));
        assert_eq!(
            forward.rows.values().map(|r| r.traffic.bytes).sum::<u64>() + forward.overflow.traffic.bytes,
            19_900
        );
    }

    #[test]
    fn merged_parts_of_a_sampled_table_equal_the_whole() {
        let mut whole: Sampled<u32, ProtoRow> = Sampled::new(8);
        let mut parts: [Sampled<u32, ProtoRow>; 3] = std::array::from_fn(|_| Sampled::new(8));
        for i in 0..300u64 {
            let key = (i * 31 % 97) as u32;
            whole.add(key, &one_flow(i));
            parts[(i * 13 % 3) as usize].add(key, &one_flow(i));
        }
        let [a, b, c] = parts;
        let mut merged = c;
        merged.merge(&a);
        merged.merge(&b);
        assert_eq!(picture(&merged), picture(&whole));
        let mut none: Sampled<u32, ProtoRow> = Sampled::new(0);
        none.add(1, &one_flow(5));
        assert_eq!((none.rows.len(), none.refused, none.overflow.traffic.bytes), (0, 1, 5));
    }
}
