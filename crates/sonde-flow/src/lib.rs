//! sonde-flow: the flow layer, between decoding and the sinks.
//!
//! A [`FlowTracker`] takes decoded packets ([`sonde_wire::PacketSummary`]) in packet-time order,
//! keeps one entry per bidirectional TCP or UDP 5-tuple in a bounded [`table::FlowTable`], runs
//! the TCP and UDP analyzers on it, and pushes a [`FlowRecord`] into a [`FlowSink`] when a flow
//! ends: FIN from both sides or RST (after a short linger for the last ACKs), idle timeout,
//! eviction of the longest-idle flow when the table is full, reuse of the tuple by a new SYN, or
//! end of input. It does no I/O and never reads the clock: packet timestamps drive every timer,
//! so the same packets give the same records.
//!
//! ```
//! use sonde_flow::{FlowConfig, FlowTracker, FlowRecord};
//! let mut tracker = FlowTracker::new(FlowConfig::default());
//! let mut records: Vec<FlowRecord> = Vec::new();
//! tracker.finish(&mut records);
//! assert!(records.is_empty());
//! ```

mod counters;
pub mod features;
pub mod icmp;
pub mod key;
pub mod owners;
pub mod record;
mod sent;
pub mod seq;
mod slab;
pub mod table;
pub mod tcp;
pub mod tstat;
pub mod udp;
pub mod zeek;

use ipnet::IpNet;
use sonde_l7::{Resolved, Session};
use sonde_types::Net;
use sonde_wire::{Fragment, PacketSummary, Transport, Tunnel};

pub use icmp::{IcmpDirStats, IcmpErrors, IcmpInput, IcmpKey, IcmpKind, IcmpRecord, IcmpStats};
pub use key::{FlowKey, PacketKey};
pub use owners::{FlowOwners, Owner, OwnerStats, Owners};
pub use record::*;
use slab::Slab;
pub use table::TableStats;
use table::{FlowTable, Lane};
use tcp::{TcpConn, TcpPools};
use tstat::{TstatEnd, TstatVerdict};
use udp::UdpConn;

const SECOND_NS: u64 = 1_000_000_000;

/// Flow-layer settings. Defaults follow Tstat.
#[derive(Debug, Clone)]
pub struct FlowConfig {
    /// TCP flows idle this long end (Tstat: 300 s).
    pub tcp_idle_ns: u64,
    /// UDP flows idle this long end (Tstat: 200 s).
    pub udp_idle_ns: u64,
    /// After both FINs or a RST, how long a flow waits for its last ACKs before it is written.
    pub tcp_closed_linger_ns: u64,
    /// Most flows held at once; when full, the longest-idle flow is evicted (and logged). The
    /// flow state's room is reserved for this many up front (address space: memory is used only
    /// as flows arrive).
    pub max_flows: usize,
    /// Flows the table's index is sized for up front (it doubles as flows arrive).
    pub initial_flows: usize,
    /// Internal networks (Tstat's net.conf): hosts inside are flagged internal.
    pub internal_nets: Vec<IpNet>,
    /// The active timeout: a flow still open this long after its start (or its last interim
    /// record) gives an interim record (`FlowSink::interim`), as NetFlow and IPFIX exporters do,
    /// if it had packets since. `None`: flows are reported only when they end.
    pub active_timeout_ns: Option<u64>,
    /// Read application facts (sonde-l7) from the payload the packets bring (`AppInput`).
    pub app_facts: bool,
    /// Look up each flow's two ends here when its record is made (`--geoip`, `--asn`).
    pub owners: Option<std::sync::Arc<dyn Owners>>,
    /// Addresses each tracker keeps the owners of (the cache in front of `owners`).
    pub owner_cache: usize,
    /// Follow each TCP flow's states and history as Zeek does (the records' `zeek`).
    pub history: bool,
    /// A flow first seen without a SYN is oriented by its ports as Zeek does
    /// ([`zeek::sender_is_server`]), not by its first packet (Tstat's rule).
    pub orient_by_port: bool,
    /// End TCP flows where Zeek's timers end its connections (needs `history`): a packet that
    /// comes 5 s after an unanswered SYN, or 5 s after a close Zeek calls complete, starts a
    /// new flow ([`zeek`], docs/zeek.md).
    pub zeek_lifetimes: bool,
    /// Follow each TCP flow as Tstat 3.3 does (the records' `tstat`, `--layout tstat`): its
    /// counters, RTT samples, windows and anomaly classes, and its ends: a flow ends at its
    /// first RST, at the packet acknowledging its second FIN, and at a client's data before any
    /// SYN/ACK; a later packet without SYN starts a flow Tstat does not track ([`tstat`]). TCP
    /// flows idle past `tcp_idle_ns` end only when a flow opens (a client SYN, a UDP flow) in
    /// their tracker, or at the end of the input, as Tstat collects them.
    pub tstat: bool,
    /// Read each TCP flow's packets as Tstat's classifier does too (`--layout tstat`:
    /// sonde_l7::TstatL7); needs `app_facts`.
    pub tstat_l7: bool,
    /// NFStream's flow features (`--features ml`; [`features`]): each record's `features`.
    pub features: Option<features::FeaturesConfig>,
}

impl Default for FlowConfig {
    fn default() -> Self {
        FlowConfig {
            tcp_idle_ns: 300 * SECOND_NS,
            udp_idle_ns: 200 * SECOND_NS,
            // Linux TIME_WAIT (2 MSL): FIN retransmissions with back-off fit in it.
            tcp_closed_linger_ns: 60 * SECOND_NS,
            max_flows: 1_000_000,
            initial_flows: 4096,
            internal_nets: Vec::new(),
            active_timeout_ns: None,
            app_facts: false,
            tstat_l7: false,
            owners: None,
            owner_cache: 65_536,
            history: false,
            orient_by_port: false,
            zeek_lifetimes: false,
            tstat: false,
            features: None,
        }
    }
}

/// One table entry's own part: which side is the client, the tunnel, and where the protocol's
/// own state is (in the TCP or UDP slab, by the key's protocol). Six bytes, aligned to two, so
/// that a table slot takes 64 (fields of a packed struct are only ever read by value).
#[derive(Debug, Clone, Copy)]
#[repr(C, packed(2))]
struct Flow {
    /// Whether the client is the key's `lo` endpoint.
    client_is_lo: bool,
    tunnel: Option<Tunnel>,
    /// Index in `FlowTracker::tcp` or `FlowTracker::udp`.
    conn: u32,
}

/// What the tracker did with a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    /// Counted in a TCP or UDP flow.
    Flow,
    /// A later IP fragment: no transport header to assign it to a flow.
    LaterFragment,
    /// Not TCP or UDP (ICMP, other protocols, non-IP).
    NotTcpUdp,
    /// The transport header was cut short.
    TruncatedTransport,
}

pub struct FlowTracker {
    cfg: FlowConfig,
    table: FlowTable<Flow>,
    tcp: Slab<TcpConn>,
    udp: Slab<UdpConn>,
    tcp_pools: TcpPools,
    /// The latest packet time seen: timers run on it, so a trace whose timestamps step back
    /// does not expire (and split) the flows it is in the middle of.
    clock_ns: u64,
    /// No flow expires before this packet time: the lanes' heads are checked only from then on.
    /// Activity only pushes a flow's expiry later, except a move to a lane with a shorter
    /// timeout, which lowers this bound.
    next_expiry_ns: u64,
    /// With `FlowConfig::tstat`: TCP flows idle past their timeout end only while this is set
    /// (Tstat's collector runs when a flow opens, and at the end of the input).
    tstat_collecting: bool,
    /// With an active timeout: when each open flow's next interim record is due.
    interim: Option<Interim>,
    /// With application facts: each table slot's application reader, made at its flow's first
    /// payload (8 bytes a slot; the reader's own size only for flows that carry payload).
    apps: Vec<Option<Box<Session>>>,
    /// ICMP and ICMPv6 entries (echo sessions, other messages).
    icmp: icmp::IcmpTable,
    /// The ICMP errors counted on open flows, by table slot (few flows have any).
    icmp_errors: rustc_hash::FxHashMap<u32, IcmpErrors>,
    /// Flows opened so far, by protocol (TCP, UDP) and direction ([`Net`], by the internal
    /// networks set when each opened): counted as each starts, for a live run's counters (the
    /// interval statistics count a flow when it ends).
    opened: [[u64; 4]; 2],
    /// With `FlowConfig::owners`: the lookups, behind their cache.
    owners: Option<owners::OwnerCache>,
    /// With `FlowConfig::features`: each table slot's flow features.
    features: Option<features::Features>,
}

/// What a packet brings for the application readers: the captured start of its payload, and
/// the DNS answer (DN-Hunter) that gave its sender the address it talks to.
#[derive(Debug, Clone, Copy, Default)]
pub struct AppInput<'a> {
    pub payload: &'a [u8],
    pub resolved: Option<&'a std::sync::Arc<Resolved>>,
}

/// With Tstat's reading (`FlowConfig::tstat_l7`), a TCP payload's first bytes only, at most
/// this many, are for that reading (the readers send them after a flow's first packets); the
/// parsers do not get them.
pub const TSTAT_HEAD_BYTES: usize = 16;

impl AppInput<'_> {
    pub const NONE: AppInput<'static> = AppInput { payload: &[], resolved: None };

    fn is_empty(&self) -> bool {
        self.payload.is_empty() && self.resolved.is_none()
    }
}

/// The interim records' schedule: a min-heap of (due time, flow id, slot). A slot's flow id
/// tells whether the entry still belongs to the flow in that slot (slots are reused).
struct Interim {
    timeout_ns: u64,
    due: std::collections::BinaryHeap<std::cmp::Reverse<(u64, u64, u32)>>,
    /// Per slot: the id of the flow in it (`TableStats::inserted` when it arrived).
    ids: Vec<u64>,
}

/// The flow key of a packet the tracker counts in a flow, or what else it is.
pub fn flow_key(p: &PacketSummary) -> Result<PacketKey, Disposition> {
    let Some(ip) = &p.ip else { return Err(Disposition::NotTcpUdp) };
    if ip.fragment == Fragment::Later {
        return Err(Disposition::LaterFragment);
    }
    let (protocol, sport, dport) = match &p.transport {
        Some(Transport::Tcp(t)) => (6, t.src_port, t.dst_port),
        Some(Transport::Udp(u)) => (17, u.src_port, u.dst_port),
        Some(Transport::Truncated { protocol: 6 | 17 }) => return Err(Disposition::TruncatedTransport),
        _ => return Err(Disposition::NotTcpUdp),
    };
    Ok(PacketKey::new(protocol, (ip.src, sport), (ip.dst, dport)))
}

/// The size `on_packet` and `on_packet_app` give a packet for the flow features, which take the
/// length on the wire (`on_flow_packet`): its IP length, as if it had no link header.
fn ip_len(p: &PacketSummary) -> u32 {
    p.ip.map_or(0, |ip| ip.total_len)
}

/// Asks the CPU to start loading the cache lines of `value` (a hint: it never faults, and a
/// wrong guess only costs the load).
pub(crate) fn prefetch<T>(value: &T) {
    let start = (value as *const T).cast::<i8>();
    for offset in (0..std::mem::size_of::<T>().max(1)).step_by(64) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: PREFETCHT0 is a hint that never faults, whatever the address.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(start.wrapping_add(offset));
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = start.wrapping_add(offset);
    }
}

impl Interim {
    fn schedule(&mut self, slot: u32, id: u64, now_ns: u64) {
        let i = slot as usize;
        if self.ids.len() <= i {
            self.ids.resize(i + 1, 0);
        }
        self.ids[i] = id;
        self.due.push(std::cmp::Reverse((now_ns.saturating_add(self.timeout_ns), id, slot)));
    }

    fn next_due(&self) -> u64 {
        self.due.peek().map_or(u64::MAX, |e| e.0 .0)
    }

    /// Whether `slot` still holds the flow `id` (it ends, and the slot may take another).
    fn holds(&self, table: &FlowTable<Flow>, slot: u32, id: u64) -> bool {
        table.is_live(slot) && self.ids[slot as usize] == id
    }
}

impl FlowTracker {
    pub fn new(cfg: FlowConfig) -> Self {
        let max_flows = cfg.max_flows.max(1);
        let interim = cfg.active_timeout_ns.filter(|&t| t > 0).map(|timeout_ns| Interim {
            timeout_ns,
            due: Default::default(),
            ids: Vec::new(),
        });
        FlowTracker {
            table: FlowTable::new(max_flows, cfg.initial_flows),
            tcp: Slab::with_capacity(max_flows),
            udp: Slab::with_capacity(max_flows),
            tcp_pools: TcpPools::for_flows(max_flows, cfg.history, cfg.tstat),
            clock_ns: 0,
            next_expiry_ns: u64::MAX,
            tstat_collecting: false,
            interim,
            apps: Vec::new(),
            icmp: icmp::IcmpTable::new(max_flows),
            icmp_errors: rustc_hash::FxHashMap::default(),
            opened: [[0; 4]; 2],
            owners: cfg.owners.clone().map(|o| owners::OwnerCache::new(o, cfg.owner_cache)),
            features: cfg.features.map(|f| features::Features::new(f, max_flows)),
            cfg,
        }
    }

    /// What the owners' lookups did (`None` without owners).
    pub fn owner_stats(&self) -> Option<OwnerStats> {
        self.owners.as_ref().map(|o| o.stats)
    }

    pub fn table_stats(&self) -> TableStats {
        self.table.stats
    }

    pub fn live_flows(&self) -> usize {
        self.table.len()
    }

    /// What the ICMP side counted.
    pub fn icmp_stats(&self) -> IcmpStats {
        self.icmp.stats
    }

    /// ICMP entries open.
    pub fn live_icmp(&self) -> usize {
        self.icmp.len()
    }

    /// Counts an ICMP or ICMPv6 packet (`p` has its addresses and length) in its entry. Entries
    /// that end by then go to `sink`. A packet that is not IP is ignored.
    pub fn on_icmp(
        &mut self,
        ts_ns: u64,
        clock_ns: u64,
        p: &PacketSummary,
        input: IcmpInput,
        sink: &mut impl FlowSink,
    ) {
        self.advance(ts_ns, clock_ns, sink);
        let Some(ip) = p.ip else { return };
        let (nets, clock_ns) = (&self.cfg.internal_nets, self.clock_ns);
        let is_internal = |ip: &std::net::IpAddr| nets.iter().any(|n| n.contains(ip));
        self.icmp.packet(ts_ns, clock_ns, ip.src, ip.dst, u64::from(ip.total_len), p.tunnel, input, |key, end, e| {
            sink.icmp(&e.record(key, end, is_internal))
        });
    }

    /// Counts an ICMP error of `icmp_type`/`code` that quotes a packet of the flow `quoted` on
    /// that flow, if it is open; says whether it was.
    pub fn on_icmp_error(
        &mut self,
        ts_ns: u64,
        clock_ns: u64,
        quoted: &PacketKey,
        icmp_type: u8,
        code: u8,
        sink: &mut impl FlowSink,
    ) -> bool {
        self.advance(ts_ns, clock_ns, sink);
        let Some(slot) = self.table.find(&quoted.key, quoted.place) else {
            self.icmp.stats.errors_unmatched += 1;
            return false;
        };
        self.icmp.stats.errors_matched += 1;
        let errors = self.icmp_errors.entry(slot).or_default();
        errors.count += 1;
        errors.last = Some((icmp_type, code));
        true
    }

    /// Heap bytes reserved up front and never written: address space that costs no memory, so
    /// what a count of allocated bytes must subtract to get the memory in use.
    pub fn untouched_bytes(&self) -> usize {
        self.table.untouched_bytes()
            + self.tcp.untouched_bytes()
            + self.udp.untouched_bytes()
            + self.tcp_pools.untouched_bytes()
    }

    /// Feeds one packet. Flows that the packet's time (or its arrival) ends go to `sink`.
    pub fn on_packet(&mut self, ts_ns: u64, p: &PacketSummary, sink: &mut impl FlowSink) -> Disposition {
        self.on_packet_at(ts_ns, ts_ns, p, sink)
    }

    /// Like `on_packet`, with the timers' clock given: a tracker that sees only some of a trace's
    /// packets (one worker of several) runs on the clock of the whole trace, so that its flows
    /// end exactly as they would in a tracker that saw everything.
    pub fn on_packet_at(
        &mut self,
        ts_ns: u64,
        clock_ns: u64,
        p: &PacketSummary,
        sink: &mut impl FlowSink,
    ) -> Disposition {
        match flow_key(p) {
            Ok(k) => self.on_flow_packet(ts_ns, clock_ns, &k, p, ip_len(p), AppInput::NONE, sink),
            Err(other) => {
                self.advance(ts_ns, clock_ns, sink);
                other
            }
        }
    }

    /// Moves the timers' clock and ends the flows idle past their timeout.
    fn advance(&mut self, ts_ns: u64, clock_ns: u64, sink: &mut impl FlowSink) {
        self.clock_ns = self.clock_ns.max(clock_ns).max(ts_ns);
        self.expire(self.clock_ns, sink);
        if self.icmp.oldest_active_ns().is_some_and(|t| self.clock_ns >= t.saturating_add(self.cfg.udp_idle_ns)) {
            self.expire_icmp(sink);
        }
    }

    #[cold]
    fn expire_icmp(&mut self, sink: &mut impl FlowSink) {
        let nets = &self.cfg.internal_nets;
        let is_internal = |ip: &std::net::IpAddr| nets.iter().any(|n| n.contains(ip));
        self.icmp
            .expire(self.clock_ns, self.cfg.udp_idle_ns, |key, end, e| sink.icmp(&e.record(key, end, is_internal)));
    }

    /// Starts loading the index entry of `k`'s flow into the cache, for a packet a few ahead
    /// of the one being analysed (the first of three prefetch stages; they only save time).
    pub fn prefetch_index(&self, k: &PacketKey) {
        self.table.prefetch_index(k.place);
    }

    /// The second stage: the flow's table slot (its index entry should be cached by now).
    pub fn prefetch_slot(&self, k: &PacketKey) {
        if let Some(slot) = self.table.peek(k.place) {
            self.table.prefetch_slot(slot);
        }
    }

    /// The third stage: the flow's TCP or UDP state (its slot should be cached by now).
    pub fn prefetch_state(&self, k: &PacketKey) {
        if let Some(slot) = self.table.peek(k.place) {
            self.prefetch_conn(slot);
        }
    }

    fn prefetch_conn(&self, slot: u32) {
        let flow = self.table.peek_value(slot);
        if self.table.key(slot).protocol == 6 {
            self.tcp.prefetch(flow.conn);
        } else {
            self.udp.prefetch(flow.conn);
        }
    }

    /// `on_packet` for a packet whose payload the application readers get (`app_facts`).
    pub fn on_packet_app(
        &mut self,
        ts_ns: u64,
        p: &PacketSummary,
        app: AppInput<'_>,
        sink: &mut impl FlowSink,
    ) -> Disposition {
        match flow_key(p) {
            Ok(k) => self.on_flow_packet(ts_ns, ts_ns, &k, p, ip_len(p), app, sink),
            Err(other) => {
                self.advance(ts_ns, ts_ns, sink);
                other
            }
        }
    }

    /// `on_packet_at` for a packet whose key was computed (by `flow_key`) already, with its
    /// length on the wire (the frame's original length: the flow features' packet size) and what
    /// it brings for the application readers.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub fn on_flow_packet(
        &mut self,
        ts_ns: u64,
        clock_ns: u64,
        k: &PacketKey,
        p: &PacketSummary,
        wire_len: u32,
        app: AppInput<'_>,
        sink: &mut impl FlowSink,
    ) -> Disposition {
        self.advance(ts_ns, clock_ns, sink);
        let PacketKey { key, order, place, .. } = *k;
        let protocol = key.protocol;
        let (Some(ip), Some(transport @ (Transport::Tcp(_) | Transport::Udp(_)))) = (p.ip, p.transport) else {
            return Disposition::NotTcpUdp;
        };
        if protocol != if matches!(transport, Transport::Tcp(_)) { 6 } else { 17 } {
            return Disposition::NotTcpUdp; // the key of another packet
        }
        let from_lo = order == key::KeyOrder::LoToHi;

        let mut slot = self.table.find(&key, place);
        // Tstat's view of the packet, once taken (`FlowConfig::tstat`).
        let mut tstat_verdict = None;
        if let (Some(s), Transport::Tcp(t)) = (slot, &transport) {
            let flow = *self.table.value(s);
            let dir = usize::from(from_lo != flow.client_is_lo);
            let conn = self.tcp.get(flow.conn);
            let ends = if let Some(tstat) = self.tcp_pools.tstat.as_mut() {
                // Tstat's rules alone split the packets of a tuple into flows.
                let state = tstat.of(flow.conn);
                match state.on_packet(dir, ts_ns, &ip, t) {
                    TstatVerdict::EndsBefore => {
                        Some(if state.half_duplex() { EndReason::Expired } else { EndReason::Reused })
                    }
                    verdict => {
                        tstat_verdict = Some(verdict);
                        None
                    }
                }
            } else if conn.starts_new_flow(dir, t) {
                Some(conn.closed.unwrap_or(EndReason::Reused))
            } else if self.cfg.zeek_lifetimes
                && self.tcp_pools.zeek.as_mut().is_some_and(|z| z.of(flow.conn).expired(ts_ns))
            {
                Some(conn.closed.unwrap_or(EndReason::Expired))
            } else {
                None
            };
            if let Some(reason) = ends {
                self.end_flow(s, reason, sink);
                slot = None;
            }
        }
        let new_flow = slot.is_none();
        let slot = match slot {
            Some(s) => s,
            None => {
                // Tstat collects when it opens a flow: a TCP one on a client SYN, or any UDP one.
                if self.cfg.tstat && !matches!(&transport, Transport::Tcp(t) if !t.flags.syn() || t.flags.ack()) {
                    self.tstat_collect(sink);
                }
                if self.table.is_full() {
                    if let Some(victim) = self.table.oldest_any() {
                        // A closed flow only lingering for late ACKs loses nothing by going early.
                        let v = *self.table.value(victim);
                        if !(self.table.key(victim).protocol == 6 && self.tcp.get(v.conn).closed.is_some()) {
                            self.table.stats.evicted += 1;
                        }
                        self.end_flow(victim, EndReason::Evicted, sink);
                    }
                }
                let lane = if protocol == 6 { Lane::TcpOpen } else { Lane::Udp };
                // The client is the SYN sender; a flow first seen at its SYN/ACK starts at the
                // server; any other starts at its first sender, or by its ports.
                let by_port = self.cfg.orient_by_port;
                let sender_is_client = match &transport {
                    Transport::Tcp(t) if t.flags.syn() && !t.flags.ack() => true,
                    Transport::Tcp(t) if TcpConn::first_sender_is_server(t) => false,
                    Transport::Tcp(t) => !(by_port && zeek::sender_is_server(true, false, t.src_port, t.dst_port)),
                    Transport::Udp(u) => !(by_port && zeek::sender_is_server(false, false, u.src_port, u.dst_port)),
                    _ => true,
                };
                let conn = if protocol == 6 { self.tcp.alloc() } else { self.udp.alloc() };
                let flow = Flow { client_is_lo: from_lo == sender_is_client, tunnel: p.tunnel, conn };
                let slot = self.table.insert(key, place, self.clock_ns, lane, flow);
                self.count_opened(&key, flow.client_is_lo);
                if let Some(interim) = self.interim.as_mut() {
                    interim.schedule(slot, self.table.stats.inserted, self.clock_ns);
                    // Entries of flows that ended stay until due: a flood of short flows would
                    // pile them up, so they go once they outnumber the live flows.
                    if interim.due.len() > 2 * self.table.len() + 1024 {
                        let mut due = std::mem::take(&mut interim.due);
                        due.retain(|&std::cmp::Reverse((_, id, slot))| interim.holds(&self.table, slot, id));
                        interim.due = due;
                    }
                }
                slot
            }
        };
        let flow = *self.table.value(slot);
        let dir = usize::from(from_lo != flow.client_is_lo);
        let lane = match &transport {
            Transport::Tcp(t) => {
                let conn = self.tcp.get(flow.conn);
                conn.on_packet(&mut self.tcp_pools, dir, ts_ns, &ip, t);
                if let Some(zeek) = self.tcp_pools.zeek.as_mut() {
                    zeek.of(flow.conn).on_packet(dir, ts_ns, t);
                }
                if let (Some(tstat), None) = (self.tcp_pools.tstat.as_mut(), tstat_verdict) {
                    tstat_verdict = Some(tstat.of(flow.conn).on_packet(dir, ts_ns, &ip, t));
                }
                // Under Tstat's rules a flow stays open until Tstat ends it (its FINs and RSTs
                // end it at once) or its idle timeout: no lingering.
                let closed = conn.closed.is_some() && self.tcp_pools.tstat.is_none();
                if !self.tcp_pools.new_samples.is_empty() {
                    let (client, server) = key.client_server(flow.client_is_lo);
                    for (data_dir, rtt_ns) in self.tcp_pools.new_samples.drain(..) {
                        let (client_ip, server_ip) = (client.0, server.0);
                        sink.rtt_sample(&RttSample { ts_ns, rtt_ns, client_data: data_dir == 0, client_ip, server_ip });
                    }
                }
                if closed {
                    Lane::TcpClosed
                } else {
                    Lane::TcpOpen
                }
            }
            Transport::Udp(u) => {
                self.udp.get(flow.conn).on_packet(dir, ts_ns, &ip, u);
                Lane::Udp
            }
            _ => unreachable!("only TCP and UDP reach the table"),
        };
        if let Some(features) = self.features.as_mut() {
            let flags = if let Transport::Tcp(t) = &transport { Some(t.flags) } else { None };
            features.on_packet(slot, new_flow, dir, self.clock_ns, wire_len, flags);
        }
        if self.cfg.app_facts && !app.is_empty() {
            self.feed_app(slot, flow, dir, ts_ns, &transport, app);
        }
        if let Some(TstatVerdict::EndsAfter(end)) = tstat_verdict {
            let reason = if end == TstatEnd::Complete { EndReason::Fin } else { EndReason::Rst };
            self.end_flow(slot, reason, sink);
            return Disposition::Flow;
        }
        self.table.touch(slot, self.clock_ns, lane);
        self.next_expiry_ns = self.next_expiry_ns.min(self.clock_ns.saturating_add(self.timeout_ns(lane)));
        Disposition::Flow
    }

    /// Tstat's idle collector (`trace_done_periodic`), which runs only when a flow opens (a TCP
    /// one on a client SYN, or a UDP one): the TCP flows idle past the timeout end now. A flow idle longer with no SYN after
    /// it stays open, and takes its next packets, as in Tstat. (Tstat spreads a pass over its
    /// table across 5 s of such calls; here it is whole.)
    #[cold]
    fn tstat_collect(&mut self, sink: &mut impl FlowSink) {
        self.tstat_collecting = true;
        self.next_expiry_ns = 0;
        self.expire(self.clock_ns, sink);
        self.tstat_collecting = false;
    }

    /// Hands a packet's payload to its flow's application reader (made at the first).
    #[cold]
    fn feed_app(&mut self, slot: u32, flow: Flow, dir: usize, ts_ns: u64, transport: &Transport, app: AppInput<'_>) {
        let i = slot as usize;
        if self.apps.len() <= i {
            self.apps.resize_with(i + 1, || None);
        }
        let key = *self.table.key(slot);
        // Tstat's reading takes every TCP packet with payload, with the flow's packet count and
        // the direction's ISN.
        let tstat = match transport {
            Transport::Tcp(t) if self.cfg.tstat_l7 && t.payload_len > 0 && !app.payload.is_empty() => {
                let conn = self.tcp.get(flow.conn);
                Some(sonde_l7::TstatPacket {
                    dir,
                    ts_ns,
                    data: app.payload,
                    payload_len: t.payload_len,
                    seq: t.seq,
                    isn: conn.half[dir].isn(),
                    flow_packets: u64::from(conn.half[0].stats.pkts) + u64::from(conn.half[1].stats.pkts),
                    ack: t.flags.ack(),
                    push: t.flags.0 & sonde_wire::TcpFlags::PSH != 0,
                    fin: t.flags.fin(),
                })
            }
            _ => None,
        };
        let session = self.apps[i].get_or_insert_with(|| {
            let (client, server) = key.client_server(flow.client_is_lo);
            let l4 = if key.protocol == 6 { sonde_l7::Transport::Tcp } else { sonde_l7::Transport::Udp };
            let mut s = Box::new(Session::new(l4, client.1, server.1));
            if self.cfg.tstat_l7 {
                s.enable_tstat();
            }
            s
        });
        if let Some(resolved) = app.resolved {
            session.resolved(dir, resolved);
        }
        if let Some(p) = tstat {
            session.tstat_packet(&p);
        }
        // Tstat's reading gets a later TCP payload's first bytes only: not for the parsers.
        let head = tstat.is_some_and(|p| p.data.len() < p.payload_len as usize && p.data.len() <= TSTAT_HEAD_BYTES);
        if app.payload.is_empty() || head || !session.wants_more() {
            return;
        }
        match transport {
            Transport::Tcp(t) if t.payload_len > 0 => {
                // A SYN's sequence number is its own; its data starts one on (TCP Fast Open).
                let seq = t.seq.wrapping_add(u32::from(t.flags.syn()));
                session.on_payload(dir, ts_ns, Some(seq), app.payload, t.payload_len);
            }
            Transport::Udp(u) if u.payload_len > 0 => session.on_payload(dir, ts_ns, None, app.payload, u.payload_len),
            _ => {}
        }
    }

    fn timeout_ns(&self, lane: Lane) -> u64 {
        match lane {
            Lane::TcpOpen => self.cfg.tcp_idle_ns,
            Lane::TcpClosed => self.cfg.tcp_closed_linger_ns,
            Lane::Udp => self.cfg.udp_idle_ns,
        }
    }

    /// Moves the clock to `clock_ns` with no packet (a live capture's tick on a quiet link) and
    /// ends the flows idle past their timeout by then.
    pub fn advance_to(&mut self, clock_ns: u64, sink: &mut impl FlowSink) {
        self.advance(clock_ns, clock_ns, sink);
    }

    /// Ends every flow idle past its timeout at packet time `now_ns` (and sends the interim
    /// records due by then).
    pub fn expire(&mut self, now_ns: u64, sink: &mut impl FlowSink) {
        if self.interim.as_ref().is_some_and(|i| i.next_due() <= now_ns) {
            self.send_interim(now_ns, sink);
        }
        if now_ns < self.next_expiry_ns {
            return;
        }
        let mut next = u64::MAX;
        for lane in table::LANES {
            if lane == Lane::TcpOpen && self.cfg.tstat && !self.tstat_collecting {
                continue;
            }
            let timeout = self.timeout_ns(lane);
            while let Some((slot, last)) = self.table.oldest(lane) {
                let expiry = last.saturating_add(timeout);
                if now_ns < expiry {
                    next = next.min(expiry);
                    break;
                }
                self.end_flow(slot, EndReason::Idle, sink);
            }
        }
        self.next_expiry_ns = next;
    }

    /// Sends the interim records due by `now_ns`: each flow open and active since its last one
    /// (or its start); a flow closed and only lingering for its last ACKs ends soon, whole.
    fn send_interim(&mut self, now_ns: u64, sink: &mut impl FlowSink) {
        let Some(mut interim) = self.interim.take() else { return };
        while let Some(&std::cmp::Reverse((due, id, slot))) = interim.due.peek() {
            if due > now_ns {
                break;
            }
            interim.due.pop();
            if !interim.holds(&self.table, slot, id) {
                continue;
            }
            let flow = *self.table.value(slot);
            let lingering = self.table.key(slot).protocol == 6 && self.tcp.get(flow.conn).closed.is_some();
            let active = self.table.last_ns(slot) >= due.saturating_sub(interim.timeout_ns);
            if active && !lingering {
                sink.interim(&self.record_open(slot, EndReason::Open));
            }
            // A late check (a gap in the packets) does not bunch the next ones up.
            let next = due.saturating_add(interim.timeout_ns);
            let next = if next <= now_ns { now_ns.saturating_add(interim.timeout_ns) } else { next };
            interim.due.push(std::cmp::Reverse((next, id, slot)));
        }
        self.interim = Some(interim);
    }

    /// Ends every flow still open (end of input), in a deterministic order. Flows already idle
    /// past their timeout at `clock_ns` (the last packet time of the whole input) end as idle.
    pub fn finish_at(&mut self, clock_ns: u64, sink: &mut impl FlowSink) {
        // Tstat's last collection (`trace_done`): flows idle past the timeout end as idle.
        self.tstat_collecting = self.cfg.tstat;
        self.next_expiry_ns = 0;
        self.advance(clock_ns, clock_ns, sink);
        self.finish(sink);
    }

    /// Ends every flow still open (end of input), in table-slot order: deterministic (the same
    /// packets fill the same slots) and sequential in memory. Sinks that need an order sort
    /// (the flow logs are sorted by start and tuple when written).
    pub fn finish(&mut self, sink: &mut impl FlowSink) {
        let slots = self.table.live_slots();
        // A flow's TCP or UDP state is not in slot order: load it a few flows ahead.
        const AHEAD: usize = 4;
        for (i, &slot) in slots.iter().enumerate() {
            if let Some(&ahead) = slots.get(i + AHEAD) {
                self.prefetch_conn(ahead);
            }
            self.end_flow(slot, EndReason::Eof, sink);
        }
        let nets = &self.cfg.internal_nets;
        let is_internal = |ip: &std::net::IpAddr| nets.iter().any(|n| n.contains(ip));
        self.icmp.finish(|key, end, e| sink.icmp(&e.record(key, end, is_internal)));
    }

    /// Sides are told by `nets` from now on (a flow's are decided when it ends).
    /// Flows opened so far, by protocol (0 TCP, 1 UDP) and [`Net`].
    pub fn opened(&self) -> [[u64; 4]; 2] {
        self.opened
    }

    #[inline]
    fn count_opened(&mut self, key: &FlowKey, client_is_lo: bool) {
        let nets = &self.cfg.internal_nets;
        let net = if nets.is_empty() {
            Net::Ext
        } else {
            let (client, server) = key.client_server(client_is_lo);
            let internal = |ip: &std::net::IpAddr| nets.iter().any(|n| n.contains(ip));
            Net::of(internal(&client.0), internal(&server.0))
        };
        self.opened[usize::from(key.protocol != 6)][net as usize] += 1;
    }

    pub fn set_internal_nets(&mut self, nets: Vec<ipnet::IpNet>) {
        self.cfg.internal_nets = nets;
    }

    /// Records of up to `limit` flows still open (a live view's picture; in table-slot order),
    /// their end reason `open` (or the FIN or RST of a closed flow lingering).
    pub fn open_flows(&mut self, limit: usize) -> Vec<FlowRecord> {
        let slots = self.table.live_slots();
        slots.into_iter().take(limit).map(|slot| self.record_open(slot, EndReason::Open)).collect()
    }

    fn end_flow(&mut self, slot: u32, reason: EndReason, sink: &mut impl FlowSink) {
        let mut record = self.record(slot, reason);
        if let Some(session) = self.apps.get_mut(slot as usize).and_then(Option::take) {
            record.set_app(session.into_facts());
        }
        let key = *self.table.key(slot);
        let flow = *self.table.value(slot);
        if key.protocol == 6 {
            self.tcp.get(flow.conn).release(&mut self.tcp_pools);
            if let Some(zeek) = self.tcp_pools.zeek.as_mut() {
                zeek.release(flow.conn);
            }
            if let Some(tstat) = self.tcp_pools.tstat.as_mut() {
                tstat.release(flow.conn);
            }
            self.tcp.free(flow.conn);
        } else {
            *self.udp.get(flow.conn) = UdpConn::default();
            self.udp.free(flow.conn);
        }
        self.table.remove(slot, key.place());
        if !self.icmp_errors.is_empty() {
            self.icmp_errors.remove(&slot);
        }
        sink.flow(&record);
    }

    /// The record of the flow in `slot` with its application facts so far, as if it ended now
    /// (an interim record, a live view's open flow).
    fn record_open(&mut self, slot: u32, reason: EndReason) -> FlowRecord {
        let mut record = self.record(slot, reason);
        if let Some(Some(session)) = self.apps.get(slot as usize) {
            record.set_app(session.facts().clone());
        }
        record
    }

    /// The record of the flow in `slot` (without its application facts), as if it ended now for
    /// `reason`. Inlined, so that the wide record is built where `end_flow` uses it, not copied
    /// out.
    #[inline(always)]
    fn record(&mut self, slot: u32, reason: EndReason) -> FlowRecord {
        let key = *self.table.key(slot);
        let cfg = &self.cfg;
        let flow = *self.table.value(slot);
        let (client, server) = key.client_server(flow.client_is_lo);
        let is_internal = |ip: &std::net::IpAddr| cfg.internal_nets.iter().any(|n| n.contains(ip));
        let endpoints = Endpoints {
            client_ip: client.0,
            client_port: client.1,
            server_ip: server.0,
            server_port: server.1,
            client_internal: is_internal(&client.0),
            server_internal: is_internal(&server.0),
            tunnel: flow.tunnel,
        };
        let owners = self.owners.as_mut().map(|o| o.pair(client.0, server.0));
        let icmp_errors = if self.icmp_errors.is_empty() {
            IcmpErrors::default()
        } else {
            self.icmp_errors.get(&slot).copied().unwrap_or_default()
        };
        if key.protocol == 6 {
            let c = self.tcp.get(flow.conn);
            // A closed flow that lingered ended by its FIN or RST, whatever removed it (Tstat's
            // rules end flows themselves: their records keep the tracker's reason).
            let end = match (c.closed.filter(|_| !cfg.tstat), reason) {
                (
                    Some(closed),
                    EndReason::Idle | EndReason::Eof | EndReason::Evicted | EndReason::Reused | EndReason::Open,
                ) => closed,
                _ => reason,
            };
            let [client, server] = c.stats(&self.tcp_pools);
            FlowRecord::Tcp(TcpRecord {
                endpoints,
                complete: c.client_syn && c.server_synack,
                end,
                first_ns: c.first_ns(),
                last_ns: c.last_ns(),
                hs_syn_synack_ns: c.hs_syn_synack_ns(),
                hs_synack_ack_ns: c.hs_synack_ack_ns(),
                zeek: self.tcp_pools.zeek.as_ref().and_then(|z| z.conn(flow.conn)),
                tstat: self.tcp_pools.tstat.as_ref().and_then(|t| t.record(flow.conn)),
                features: self.features.as_ref().and_then(|f| f.of(slot)),
                client,
                server,
                icmp_errors,
                app: None,
                owners,
            })
        } else {
            let u = self.udp.get(flow.conn);
            FlowRecord::Udp(UdpRecord {
                endpoints,
                end: reason,
                first_ns: u.first_ns,
                last_ns: u.last_ns,
                client: u.dirs[0],
                server: u.dirs[1],
                features: self.features.as_ref().and_then(|f| f.of(slot)),
                icmp_errors,
                app: None,
                owners,
            })
        }
    }
}

#[cfg(test)]
mod icmp_tests;
#[cfg(test)]
mod tests;
