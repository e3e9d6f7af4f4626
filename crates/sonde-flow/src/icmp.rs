//! ICMP and ICMPv6 "flows": echo sessions keyed by (client, server, identifier), with the echo
//! round-trip time of each reply matched to its request by sequence number (as Wireshark's
//! `icmp.resptime`), and every other message keyed by (source, destination, type, code).
//!
//! ICMP is rare next to TCP and UDP: the table is a plain map with an ordered index of the
//! entries by last activity (for the idle timeout and eviction), allocating as entries come and
//! go. It holds at most the flow table's limit; the longest idle entry makes room.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;

use sonde_wire::Tunnel;

use crate::record::{EndReason, RttStats};

/// What an ICMP entry is keyed by besides its addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IcmpKind {
    /// Echo requests from the client and their replies from the server, by identifier.
    Echo { ident: u16 },
    /// Any other message, one way: from the client (its source) to the server (its
    /// destination).
    Message { icmp_type: u8, code: u8 },
}

/// An ICMP entry's identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IcmpKey {
    pub client: IpAddr,
    pub server: IpAddr,
    pub kind: IcmpKind,
}

/// What an ICMP packet brings to the table: an echo's fields, or nothing beyond its type and
/// code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IcmpInput {
    Echo { request: bool, ident: u16, seq: u16 },
    Message { icmp_type: u8, code: u8 },
}

impl IcmpKey {
    /// The protocol's name as the ICMP log writes it: `icmp` or `icmpv6`.
    pub fn proto(&self) -> &'static str {
        if self.client.is_ipv6() {
            "icmpv6"
        } else {
            "icmp"
        }
    }

    /// The key of a packet from `src` to `dst` bringing `input`.
    pub fn of(src: IpAddr, dst: IpAddr, input: IcmpInput) -> IcmpKey {
        match input {
            IcmpInput::Echo { request: true, ident, .. } => {
                IcmpKey { client: src, server: dst, kind: IcmpKind::Echo { ident } }
            }
            IcmpInput::Echo { request: false, ident, .. } => {
                IcmpKey { client: dst, server: src, kind: IcmpKind::Echo { ident } }
            }
            IcmpInput::Message { icmp_type, code } => {
                IcmpKey { client: src, server: dst, kind: IcmpKind::Message { icmp_type, code } }
            }
        }
    }

    /// A hash that does not vary between runs (the dispatcher picks a worker by it).
    pub fn hash64(&self) -> u64 {
        let (protocol, ports) = match self.kind {
            IcmpKind::Echo { ident } => (1, (ident, 0)),
            IcmpKind::Message { icmp_type, code } => (2, (u16::from(icmp_type) << 8 | u16::from(code), 1)),
        };
        crate::key::FlowKey::new(protocol, (self.client, ports.0), (self.server, ports.1)).0.hash64()
    }
}

/// One direction of an ICMP entry: requests (and other messages) go from the client, replies
/// from the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IcmpDirStats {
    pub pkts: u64,
    /// IP bytes, as the headers declare them.
    pub ip_bytes: u64,
}

/// An ICMP entry that ended.
#[derive(Debug, Clone, PartialEq)]
pub struct IcmpRecord {
    pub key: IcmpKey,
    pub client_internal: bool,
    pub server_internal: bool,
    /// The tunnel of the entry's first packet.
    pub tunnel: Option<Tunnel>,
    pub end: EndReason,
    pub first_ns: u64,
    pub last_ns: u64,
    pub client: IcmpDirStats,
    pub server: IcmpDirStats,
    /// Echo: request → reply times, one per reply matched to a request by sequence number.
    pub rtt: RttStats,
    /// Echo: replies with no request waiting for them (a duplicate, or its request not seen).
    pub replies_unmatched: u64,
}

/// Requests waiting for their reply, per echo session, at most: a session whose replies are
/// lost forgets its oldest requests.
pub const PENDING_MAX: usize = 64;

#[derive(Debug, Clone)]
pub(crate) struct Entry {
    /// Order of arrival: ties in the activity order are broken by it.
    id: u64,
    first_ns: u64,
    last_ns: u64,
    /// The timers' clock when last active (the idle timeout runs on it).
    active_ns: u64,
    tunnel: Option<Tunnel>,
    dirs: [IcmpDirStats; 2],
    rtt: RttStats,
    replies_unmatched: u64,
    /// (sequence number, request time) of requests not replied to yet, oldest first.
    pending: Vec<(u16, u64)>,
}

/// What the ICMP side of a tracker counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IcmpStats {
    /// Entries ended early because the table was full.
    pub evicted: u64,
    /// Errors quoting a TCP or UDP packet whose flow was open: counted on it.
    pub errors_matched: u64,
    /// Errors quoting a TCP or UDP packet of no open flow.
    pub errors_unmatched: u64,
}

impl IcmpStats {
    pub fn add(&mut self, other: &IcmpStats) {
        self.evicted += other.evicted;
        self.errors_matched += other.errors_matched;
        self.errors_unmatched += other.errors_unmatched;
    }
}

/// The ICMP entries of one tracker.
pub(crate) struct IcmpTable {
    entries: HashMap<IcmpKey, Entry>,
    /// The entries by (clock when last active, id): the oldest first.
    by_activity: BTreeMap<(u64, u64), IcmpKey>,
    next_id: u64,
    max_entries: usize,
    pub(crate) stats: IcmpStats,
}

impl IcmpTable {
    pub(crate) fn new(max_entries: usize) -> IcmpTable {
        IcmpTable {
            entries: HashMap::new(),
            by_activity: BTreeMap::new(),
            next_id: 0,
            max_entries: max_entries.max(1),
            stats: IcmpStats::default(),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The clock of the longest idle entry's last activity.
    pub(crate) fn oldest_active_ns(&self) -> Option<u64> {
        self.by_activity.first_key_value().map(|(&(t, _), _)| t)
    }

    /// Counts one packet of `ip_bytes` from `src` to `dst` at `ts_ns` (the timers' clock
    /// `clock_ns`); an entry that must make room for it is handed to `end` as evicted.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn packet(
        &mut self,
        ts_ns: u64,
        clock_ns: u64,
        src: IpAddr,
        dst: IpAddr,
        ip_bytes: u64,
        tunnel: Option<Tunnel>,
        input: IcmpInput,
        mut end: impl FnMut(IcmpKey, EndReason, &Entry),
    ) {
        let key = IcmpKey::of(src, dst, input);
        if !self.entries.contains_key(&key) && self.entries.len() >= self.max_entries {
            if let Some((_, victim)) = self.by_activity.first_key_value().map(|(k, v)| (*k, *v)) {
                self.stats.evicted += 1;
                self.end(victim, EndReason::Evicted, &mut end);
            }
        }
        let next_id = &mut self.next_id;
        let entry = self.entries.entry(key).or_insert_with(|| {
            *next_id += 1;
            Entry {
                id: *next_id,
                first_ns: ts_ns,
                last_ns: ts_ns,
                active_ns: clock_ns,
                tunnel,
                dirs: Default::default(),
                rtt: RttStats::default(),
                replies_unmatched: 0,
                pending: Vec::new(),
            }
        });
        self.by_activity.remove(&(entry.active_ns, entry.id));
        entry.active_ns = clock_ns;
        self.by_activity.insert((entry.active_ns, entry.id), key);
        entry.first_ns = entry.first_ns.min(ts_ns);
        entry.last_ns = entry.last_ns.max(ts_ns);
        let dir = usize::from(matches!(input, IcmpInput::Echo { request: false, .. }));
        entry.dirs[dir].pkts += 1;
        entry.dirs[dir].ip_bytes += ip_bytes;
        match input {
            IcmpInput::Echo { request: true, seq, .. } => {
                // A request sent again before its reply: the reply answers the latest.
                entry.pending.retain(|&(s, _)| s != seq);
                if entry.pending.len() == PENDING_MAX {
                    entry.pending.remove(0);
                }
                entry.pending.push((seq, ts_ns));
            }
            IcmpInput::Echo { request: false, seq, .. } => match entry.pending.iter().position(|&(s, _)| s == seq) {
                Some(i) => {
                    let (_, sent_ns) = entry.pending.remove(i);
                    entry.rtt.add(ts_ns.saturating_sub(sent_ns));
                }
                None => entry.replies_unmatched += 1,
            },
            IcmpInput::Message { .. } => {}
        }
    }

    /// Ends the entries idle for `idle_ns` by the clock `now_ns`.
    pub(crate) fn expire(&mut self, now_ns: u64, idle_ns: u64, mut end: impl FnMut(IcmpKey, EndReason, &Entry)) {
        while let Some((&(active_ns, _), &key)) = self.by_activity.first_key_value() {
            if now_ns < active_ns.saturating_add(idle_ns) {
                break;
            }
            self.end(key, EndReason::Idle, &mut end);
        }
    }

    /// Ends every entry, in order of arrival.
    pub(crate) fn finish(&mut self, mut end: impl FnMut(IcmpKey, EndReason, &Entry)) {
        let mut keys: Vec<(u64, IcmpKey)> = self.entries.iter().map(|(k, e)| (e.id, *k)).collect();
        keys.sort_unstable();
        for (_, key) in keys {
            self.end(key, EndReason::Eof, &mut end);
        }
    }

    fn end(&mut self, key: IcmpKey, reason: EndReason, end: &mut impl FnMut(IcmpKey, EndReason, &Entry)) {
        if let Some(entry) = self.entries.remove(&key) {
            self.by_activity.remove(&(entry.active_ns, entry.id));
            end(key, reason, &entry);
        }
    }
}

impl Entry {
    pub(crate) fn record(&self, key: IcmpKey, end: EndReason, is_internal: impl Fn(&IpAddr) -> bool) -> IcmpRecord {
        IcmpRecord {
            key,
            client_internal: is_internal(&key.client),
            server_internal: is_internal(&key.server),
            tunnel: self.tunnel,
            end,
            first_ns: self.first_ns,
            last_ns: self.last_ns,
            client: self.dirs[0],
            server: self.dirs[1],
            rtt: self.rtt,
            replies_unmatched: self.replies_unmatched,
        }
    }
}

/// The ICMP errors counted on a TCP or UDP flow: those that quoted one of its packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IcmpErrors {
    pub count: u64,
    /// The type and code of the latest.
    pub last: Option<(u8, u8)>,
}
