//! The reader's side of the application facts (sonde-l7): which packets' payload travels to the
//! workers, and DN-Hunter's cache of DNS answers.
//!
//! Copying every payload to the workers would cost more than the analysis, and the readers
//! need only a flow's first packets. A direct-mapped table, by flow and direction, counts the
//! payload packets sent so far: the first `packets` of each direction go whole, later UDP ones
//! bring their first [`UDP_HEAD_BYTES`] (RTP's header, for its loss and jitter), later TCP ones
//! nothing. Two flows that share an entry reset each other's count: a flow may then send more
//! than `packets`, never fewer. The table is cut in one part per shard of the flows, so a flow
//! only ever shares an entry with a flow of its own shard: readers that split the shards
//! between them each keep their own shards' parts, and what goes is the same as with one
//! reader, for any number of workers (each part sees its flows' packets in input order).
//!
//! DN-Hunter (Bermudez et al.): DNS answers seen by the reader, as (client, address) → name;
//! the first packets of each flow direction look up (sender, receiver), so a flow is labelled
//! with the last name its client resolved to the server's address before the flow began.

use std::net::IpAddr;
use std::sync::Arc;

use sonde_flow::key::KeyOrder;
use sonde_flow::PacketKey;
use sonde_l7::{DnsCache, Resolved};
use sonde_wire::{PacketSummary, Transport};

/// Bytes of a UDP payload sent after a flow's first packets: an RTP header and its first CSRC.
pub const UDP_HEAD_BYTES: usize = 16;
/// Entries in the table of payload packets sent per flow direction (about: a power of two per
/// shard).
const GATE_ENTRIES: usize = 1 << 16;
/// The UDP port DNS answers come from.
pub(crate) const DNS_PORT: u16 = 53;

/// The application facts' settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppConfig {
    /// Payload packets of each flow direction handed whole to the readers.
    pub packets: u8,
    /// DNS answers (client, address) kept for DN-Hunter; the oldest go first.
    pub dns_cache: usize,
    /// A UDP flow direction idle this long starts its count again (the tracker's UDP timeout:
    /// a new flow on the same tuple).
    pub udp_idle_ns: u64,
    /// The Tstat layout is written: later TCP payloads bring their first
    /// [`TCP_HEAD_BYTES`] (Tstat's classifier reads every packet's start), and DNS queries'
    /// times and names as written are kept for DN-Hunter (Tstat's `req_tm`, `fqdn`).
    pub tstat: bool,
}

impl Default for AppConfig {
    fn default() -> Self {
        AppConfig { packets: 8, dns_cache: 100_000, udp_idle_ns: 200_000_000_000, tstat: false }
    }
}

/// Bytes of a TCP payload sent after a flow's first packets when the Tstat layout is written:
/// what Tstat's classifier and HTTP counter read of a later packet (a method, `HTTP/1.1 206`'s
/// status at bytes 9-11, a TLS record's header). The flow layer gives them to Tstat's reading
/// only.
pub const TCP_HEAD_BYTES: usize = sonde_flow::TSTAT_HEAD_BYTES;

/// What the reader counted for the application facts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AppReaderStats {
    /// Payload packets sent whole, and later UDP packets sent as their first bytes.
    pub payloads: u64,
    pub udp_heads: u64,
    /// DNS answers read (DN-Hunter), the (client, address) entries they gave, and entries
    /// dropped from the full cache.
    pub dns_answers: u64,
    pub dns_entries: u64,
    pub dns_evicted: u64,
}

impl AppReaderStats {
    /// The payload counts only.
    pub(crate) fn without_dns(self) -> AppReaderStats {
        AppReaderStats { payloads: self.payloads, udp_heads: self.udp_heads, ..AppReaderStats::default() }
    }
}

/// What goes with a packet to its worker.
#[derive(Debug, Default)]
pub(crate) struct Attach<'f> {
    pub payload: &'f [u8],
    pub resolved: Option<Arc<Resolved>>,
}

pub(crate) struct AppReader {
    packets: u64,
    /// `shards` parts of `per_shard` entries each (one cache line holds both words).
    gate: Box<[GateEntry]>,
    per_shard: usize,
    udp_idle_ns: u64,
    /// TCP payload bytes sent after the first `packets` (Tstat's layout), else 0.
    tcp_head: usize,
    dns: DnsCache,
    /// Tstat's layout: the last DNS query's time per (client, port, resolver), direct-mapped
    /// ([`QUERY_ENTRIES`] entries: tag and time), for `req_tm`; empty otherwise.
    queries: Box<[(u64, u64)]>,
    pub stats: AppReaderStats,
}

/// Entries of the DNS query times kept for Tstat's `req_tm` (64 KiB): a query whose entry was
/// taken by another socket's before its answer came gets the answer's time.
const QUERY_ENTRIES: usize = 4096;

/// One flow direction's entry.
#[derive(Clone, Copy, Default)]
struct GateEntry {
    /// The flow direction's tag (high bits of its hash) above 8 bits of count.
    tag_sent: u64,
    /// The packet time it was last used (UDP has no SYN to start a count again).
    last_ns: u64,
}

impl AppReader {
    /// For flows split into `shards` shards.
    pub fn new(cfg: AppConfig, shards: u32) -> AppReader {
        let shards = shards.max(1) as usize;
        let per_shard = (GATE_ENTRIES / shards).next_power_of_two();
        AppReader {
            packets: u64::from(cfg.packets),
            gate: vec![GateEntry::default(); per_shard * shards].into_boxed_slice(),
            per_shard,
            udp_idle_ns: cfg.udp_idle_ns,
            tcp_head: if cfg.tstat { TCP_HEAD_BYTES } else { 0 },
            dns: DnsCache::new(cfg.dns_cache),
            queries: if cfg.tstat { vec![(0, 0); QUERY_ENTRIES].into_boxed_slice() } else { Box::default() },
            stats: AppReaderStats::default(),
        }
    }

    /// Reads the DNS answer a flow packet may be: every reader reads every answer, so a flow
    /// of any reader finds the names its client resolved. `payload`: its captured payload.
    pub fn watch_dns(&mut self, ts_ns: u64, p: &PacketSummary, payload: &[u8]) {
        if let (Some(ip), Some(Transport::Udp(u))) = (p.ip, p.transport) {
            if u.src_port == DNS_PORT && !payload.is_empty() {
                let query_ns = match self.queries.is_empty() {
                    true => None,
                    false => self.query_entry(ip.dst, u.dst_port, ip.src).and_then(|(tag, e)| {
                        let (t, ns) = self.queries[e];
                        (t == tag).then_some(ns)
                    }),
                };
                self.dns_answer(ts_ns, ip.src, ip.dst, payload, query_ns.unwrap_or(0));
            } else if u.dst_port == DNS_PORT && !self.queries.is_empty() {
                if let Some((tag, e)) = self.query_entry(ip.src, u.src_port, ip.dst) {
                    self.queries[e] = (tag, ts_ns);
                }
            }
        }
    }

    /// What of a flow packet of shard `shard` goes to its worker (after [`AppReader::watch_dns`]).
    pub fn attach<'f>(
        &mut self,
        ts_ns: u64,
        p: &PacketSummary,
        key: &PacketKey,
        shard: u32,
        payload: &'f [u8],
    ) -> Attach<'f> {
        let (Some(ip), Some(transport)) = (p.ip, p.transport) else { return Attach::default() };
        let (udp, opening) = match transport {
            Transport::Tcp(t) => (false, t.flags.syn() && !t.flags.ack()),
            Transport::Udp(_) => (true, false),
            _ => return Attach::default(),
        };
        // The two directions of a flow share its hash: the order tells them apart.
        let h = key.hash() ^ u64::from(key.order() == KeyOrder::LoToHi).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let slot = shard as usize * self.per_shard + (h as usize & (self.per_shard - 1));
        let Some(entry) = self.gate.get_mut(slot) else { return Attach::default() };
        // A UDP direction idle past the timeout is a new flow on the tuple: so is a TCP one
        // opened by a SYN. Their count starts again.
        let last_ns = std::mem::replace(&mut entry.last_ns, ts_ns);
        let opening = opening || (udp && ts_ns.saturating_sub(last_ns) >= self.udp_idle_ns);
        let tag = h >> 16 << 8;
        let sent = if entry.tag_sent & !0xff == tag && !opening { entry.tag_sent & 0xff } else { 0 };
        let mut out = Attach::default();
        if payload.is_empty() {
            if opening {
                entry.tag_sent = tag;
            }
        } else if sent < self.packets {
            entry.tag_sent = tag | (sent + 1);
            out.payload = payload;
            self.stats.payloads += 1;
        } else if udp {
            out.payload = &payload[..payload.len().min(UDP_HEAD_BYTES)];
            self.stats.udp_heads += 1;
        } else if self.tcp_head > 0 {
            out.payload = &payload[..payload.len().min(self.tcp_head)];
        }
        // Tstat looks a TCP flow's name up once, at the client's SYN that opens it: an answer
        // that comes later does not label it (in its layout, neither does sonde).
        if sent == 0 && (opening || (!payload.is_empty() && (udp || self.tcp_head == 0))) {
            out.resolved = self.dns.lookup(ip.src, ip.dst);
        }
        out
    }

    /// Whether DNS queries' times are kept (Tstat's layout): every reader must see them.
    pub fn keeps_queries(&self) -> bool {
        !self.queries.is_empty()
    }

    /// The tag and entry of a (client, port, resolver)'s query time (Tstat's layout only).
    fn query_entry(&self, client: IpAddr, port: u16, resolver: IpAddr) -> Option<(u64, usize)> {
        if self.queries.is_empty() {
            return None;
        }
        use std::hash::{BuildHasher, BuildHasherDefault};
        let h = BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default()
            .hash_one((client, port, resolver))
            | 1;
        Some((h, (h >> 32) as usize % self.queries.len()))
    }

    fn dns_answer(&mut self, ts_ns: u64, resolver: IpAddr, client: IpAddr, payload: &[u8], query_ns: u64) {
        let Some((mut name, addresses)) = sonde_l7::dns_response_addresses(payload) else { return };
        self.stats.dns_answers += 1;
        // Tstat's layout prints the name as it was asked (Tstat keeps its case).
        if !self.queries.is_empty() {
            if let Some(written) = sonde_l7::dns_question_as_written(payload) {
                name = written;
            }
        }
        let resolved = Arc::new(Resolved { name: name.into_boxed_str(), resolver, answer_ns: ts_ns, query_ns });
        for address in addresses {
            self.stats.dns_entries += 1;
            self.stats.dns_evicted += u64::from(self.dns.insert(client, address, Arc::clone(&resolved)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_udp_direction_idle_past_the_timeout_counts_again() {
        let cfg = AppConfig { packets: 2, dns_cache: 0, udp_idle_ns: 1_000, tstat: false };
        let mut r = AppReader::new(cfg, 256);
        let src: IpAddr = "10.0.0.1".parse().unwrap();
        let dst: IpAddr = "10.0.0.2".parse().unwrap();
        let key = PacketKey::new(17, (src, 5000), (dst, 6000));
        let mut p = PacketSummary::EMPTY;
        p.ip = Some(sonde_wire::IpSummary {
            src,
            dst,
            total_len: 60,
            ttl: 64,
            ident: 0,
            protocol: 17,
            fragment: sonde_wire::Fragment::No,
        });
        p.transport = Some(Transport::Udp(sonde_wire::UdpSummary { src_port: 5000, dst_port: 6000, payload_len: 32 }));
        let payload = [7u8; 32];
        let sent = |r: &mut AppReader, ts| r.attach(ts, &p, &key, 7, &payload).payload.len();
        assert_eq!([sent(&mut r, 10), sent(&mut r, 20), sent(&mut r, 30)], [32, 32, UDP_HEAD_BYTES]);
        assert_eq!(sent(&mut r, 500), UDP_HEAD_BYTES, "within the timeout: the same flow");
        assert_eq!(sent(&mut r, 2_000), 32, "idle past the timeout: a new flow, whole again");
    }
}
