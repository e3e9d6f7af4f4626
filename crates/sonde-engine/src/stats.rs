//! What a run counted: the figures of the run summary. Plain data, serialisable, with ordered
//! maps so the same trace gives the same summary.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Serialize;
use sonde_flow::{EndReason, FlowRecord, FlowSink, RttSample, TableStats};
use sonde_wire::{DecodeProblem, Layer, NonIp, PacketSummary, Transport, Tunnel};

#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct PacketCounts {
    /// Frames read from the input (before the filter).
    pub read: u64,
    /// Sum of captured lengths (at most the snaplen each).
    pub captured_bytes: u64,
    /// Sum of original lengths on the wire.
    pub wire_bytes: u64,
    /// Frames the BPF filter dropped.
    pub filtered_out: u64,
    /// Frames that passed the filter and were decoded.
    pub analysed: u64,
    /// Frames whose timestamp is earlier than the latest one seen before.
    pub time_went_backwards: u64,
    /// Frames timed on or after 2261-01-01 (no capture's time: a garbage timestamp, a wrong
    /// resolution): analysed as if timed at the last nanosecond of 2260.
    pub time_out_of_range: u64,
}

/// Packets and bytes of one kind; here the bytes are original lengths on the wire.
pub use sonde_types::Traffic;

#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ProtocolCounts {
    /// IPv4 packets (the outermost IP header).
    pub ipv4: Traffic,
    /// IPv6 packets (the outermost IP header).
    pub ipv6: Traffic,
    /// Frames that carry no IP.
    pub non_ip: Traffic,
    /// TCP segments (in the analysed, innermost IP packet).
    pub tcp: Traffic,
    /// UDP datagrams.
    pub udp: Traffic,
    /// ICMP messages.
    pub icmp: Traffic,
    /// ICMPv6 messages.
    pub icmpv6: Traffic,
    /// IP packets of any other protocol.
    pub other_ip: Traffic,
    /// IPv4 and IPv6 fragments: the first is analysed, the later ones only counted.
    pub fragments_first: u64,
    /// Later fragments: counted, not analysed.
    pub fragments_later: u64,
    /// ICMP messages by "v4:type" / "v6:type".
    pub icmp_types: BTreeMap<String, u64>,
    /// Packets whose analysed flow was carried in a tunnel, by tunnel kind.
    pub tunnelled: BTreeMap<String, u64>,
    /// Non-IP frames by EtherType ("0x0806"), by LLC service access points with Wireshark's
    /// names ("llc 0x42/0x42 (Spanning Tree BPDU)"), SNAP organisation and protocol
    /// ("snap 00000c/0x2000"), "raw 802.3 (IPX)" or "other".
    pub non_ip_types: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct FlowCounts {
    /// TCP flows logged.
    pub tcp: u64,
    /// TCP flows whose SYN and SYN/ACK were both seen.
    pub tcp_complete: u64,
    /// TCP flows without the SYN or the SYN/ACK.
    pub tcp_incomplete: u64,
    /// UDP flows logged.
    pub udp: u64,
    /// Open flows ended early because the flow table was full.
    pub evicted: u64,
    /// Flows by why they ended.
    pub end_reasons: BTreeMap<&'static str, u64>,
    /// Interim records of flows still open at their active timeout (`--active-timeout`), sent
    /// to the exporters; not in the flow logs.
    pub interim_records: u64,
    /// What the application readers found in the flows logged (null when off).
    pub app: Option<AppCounts>,
    /// ICMP and ICMPv6 entries logged (icmp_flows) and errors counted on flows (docs/icmp.md).
    pub icmp: IcmpCounts,
    /// The owners' lookups (`--geoip`, `--asn`; null when off; docs/owners.md).
    pub owners: Option<OwnerCounts>,
}

/// The lookups of the flows' owners: two a record (client, server), each worker's cache in
/// front of the databases. `cached` and `cache_resets` depend on how the flows are shared
/// between workers (one cache each), so they vary with `--threads`; the answers do not.
#[derive(Debug, Clone, Copy, Default, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct OwnerCounts {
    /// Addresses asked for.
    pub lookups: u64,
    /// Of them, answered from a worker's cache.
    pub cached: u64,
    /// Times a worker's cache was full (`--owner-cache`) and emptied.
    pub cache_resets: u64,
}

/// The ICMP side of the flows.
#[derive(Debug, Clone, Copy, Default, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct IcmpCounts {
    /// Entries logged: echo sessions and other message kinds (lines of icmp_flows).
    pub flows: u64,
    /// Of which echo sessions.
    pub echo_sessions: u64,
    /// Entries ended early because the ICMP table was full.
    pub evicted: u64,
    /// Errors quoting a TCP or UDP packet of a flow open then: counted on it (`icmp_errors`).
    pub errors_matched: u64,
    /// Errors quoting a TCP or UDP packet of no open flow.
    pub errors_unmatched: u64,
    /// Errors whose quote gives no TCP or UDP packet: cut short, garbled, or another protocol.
    pub errors_unquoted: u64,
}

/// The application facts of the flows logged (docs/l7.md).
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct AppCounts {
    /// Flows whose payload was read.
    pub flows_read: u64,
    /// Flows by application label, told by their payload.
    pub labels: BTreeMap<&'static str, u64>,
    /// Flows by application label told by a well-known port only (no payload told).
    pub labels_by_port: BTreeMap<&'static str, u64>,
    /// Payloads that could not be read, by problem: the fact is left empty.
    pub problems: AppProblems,
    /// What the reader sent the application readers, and DN-Hunter's cache.
    pub reader: AppReaderCounts,
}

/// [`sonde_l7::Problems`], summed over the flows.
#[derive(Debug, Clone, Copy, Default, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct AppProblems {
    /// TLS records or handshake messages that could not be parsed.
    pub tls_malformed: u64,
    /// QUIC Initials that did not decrypt or parse.
    pub quic_malformed: u64,
    /// HTTP heads or body framing that could not be parsed.
    pub http_malformed: u64,
    /// DNS messages that could not be parsed (bad lengths, compression loops).
    pub dns_malformed: u64,
    /// RTP or RTCP packets that could not be parsed after the stream was recognised.
    pub rtp_malformed: u64,
    /// A gap in a TCP direction's first bytes (lost or not captured): reading stopped there.
    pub stream_gaps: u64,
    /// A message over its parser's size limit: left unread.
    pub over_limit: u64,
}

impl AppProblems {
    fn add(&mut self, p: &sonde_l7::Problems) {
        self.tls_malformed += u64::from(p.tls_malformed);
        self.quic_malformed += u64::from(p.quic_malformed);
        self.http_malformed += u64::from(p.http_malformed);
        self.dns_malformed += u64::from(p.dns_malformed);
        self.rtp_malformed += u64::from(p.rtp_malformed);
        self.stream_gaps += u64::from(p.stream_gaps);
        self.over_limit += u64::from(p.over_limit);
    }

    fn sum(&mut self, o: &AppProblems) {
        self.tls_malformed += o.tls_malformed;
        self.quic_malformed += o.quic_malformed;
        self.http_malformed += o.http_malformed;
        self.dns_malformed += o.dns_malformed;
        self.rtp_malformed += o.rtp_malformed;
        self.stream_gaps += o.stream_gaps;
        self.over_limit += o.over_limit;
    }
}

/// [`crate::AppReaderStats`] in the summary.
#[derive(Debug, Clone, Copy, Default, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct AppReaderCounts {
    /// Payloads sent whole (a flow direction's first packets).
    pub payloads: u64,
    /// Later UDP payloads sent as their first bytes (RTP headers).
    pub udp_heads: u64,
    /// DNS answers read for DN-Hunter.
    pub dns_answers: u64,
    /// The (client, address) entries they gave.
    pub dns_entries: u64,
    /// Entries dropped from the full cache (`--dns-cache`), the oldest first.
    pub dns_evicted: u64,
}

impl From<crate::AppReaderStats> for AppReaderCounts {
    fn from(s: crate::AppReaderStats) -> Self {
        AppReaderCounts {
            payloads: s.payloads,
            udp_heads: s.udp_heads,
            dns_answers: s.dns_answers,
            dns_entries: s.dns_entries,
            dns_evicted: s.dns_evicted,
        }
    }
}

impl AppCounts {
    fn add(&mut self, o: &AppCounts) {
        self.flows_read += o.flows_read;
        for (label, n) in &o.labels {
            *self.labels.entry(label).or_default() += n;
        }
        for (label, n) in &o.labels_by_port {
            *self.labels_by_port.entry(label).or_default() += n;
        }
        self.problems.sum(&o.problems);
        let (r, q) = (&mut self.reader, &o.reader);
        r.payloads += q.payloads;
        r.udp_heads += q.udp_heads;
        r.dns_answers += q.dns_answers;
        r.dns_entries += q.dns_entries;
        r.dns_evicted += q.dns_evicted;
    }

    /// Counts one flow logged.
    fn flow(&mut self, record: &FlowRecord) {
        let e = record.endpoints();
        let (transport, facts) = match record {
            FlowRecord::Tcp(t) => (sonde_l7::Transport::Tcp, t.app.as_deref()),
            FlowRecord::Udp(u) => (sonde_l7::Transport::Udp, u.app.as_deref()),
        };
        let empty = sonde_l7::Facts::default();
        if let Some(f) = facts {
            self.flows_read += 1;
            self.problems.add(&f.problems);
        }
        let label = sonde_l7::label(facts.unwrap_or(&empty), transport, e.client_port, e.server_port);
        let labels = if label.by_port { &mut self.labels_by_port } else { &mut self.labels };
        *labels.entry(label.name).or_default() += 1;
    }
}

impl FlowCounts {
    pub(crate) fn add(&mut self, other: &FlowCounts) {
        self.tcp += other.tcp;
        self.tcp_complete += other.tcp_complete;
        self.tcp_incomplete += other.tcp_incomplete;
        self.udp += other.udp;
        self.evicted += other.evicted;
        self.interim_records += other.interim_records;
        self.icmp.flows += other.icmp.flows;
        self.icmp.echo_sessions += other.icmp.echo_sessions;
        self.icmp.evicted += other.icmp.evicted;
        self.icmp.errors_matched += other.icmp.errors_matched;
        self.icmp.errors_unmatched += other.icmp.errors_unmatched;
        self.icmp.errors_unquoted += other.icmp.errors_unquoted;
        match (&mut self.app, &other.app) {
            (Some(a), Some(b)) => a.add(b),
            (None, Some(b)) => self.app = Some(b.clone()),
            _ => {}
        }
        for (reason, n) in &other.end_reasons {
            *self.end_reasons.entry(reason).or_default() += n;
        }
        if let Some(o) = other.owners {
            self.owners.get_or_insert_with(Default::default).add(o);
        }
    }
}

impl OwnerCounts {
    pub(crate) fn add(&mut self, o: OwnerCounts) {
        self.lookups += o.lookups;
        self.cached += o.cached;
        self.cache_resets += o.cache_resets;
    }
}

impl From<sonde_flow::OwnerStats> for OwnerCounts {
    fn from(o: sonde_flow::OwnerStats) -> OwnerCounts {
        OwnerCounts { lookups: o.lookups, cached: o.cached, cache_resets: o.cache_resets }
    }
}

#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct TableLoad {
    /// The most flows open at once.
    pub peak_live_flows: u64,
    /// Slots probed per lookup, on average.
    pub mean_probe_len: f64,
    /// Flow table lookups.
    pub lookups: u64,
}

/// Everything a run counted.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct RunStats {
    /// Frames read, filtered and analysed.
    pub packets: PacketCounts,
    /// Frames and bytes per link type ("EN10MB(1)"), as read.
    pub link_types: BTreeMap<String, Traffic>,
    /// Frames of link types sonde cannot decode, counted per type and not analysed.
    pub unsupported_link_types: BTreeMap<String, u64>,
    /// Packets and bytes per network and transport protocol.
    pub protocols: ProtocolCounts,
    /// Malformed or broken packets by kind ("malformed.tcp": n); analysis went on with what
    /// could be read.
    pub decode_problems: BTreeMap<String, u64>,
    /// Packets cut by the snaplen (normal, not errors), by the layer where the cut fell.
    pub snaplen_cuts: BTreeMap<String, u64>,
    /// Flows logged, and how they ended.
    pub flows: FlowCounts,
    /// How the flow table fared.
    pub table: TableLoad,
    /// What `--thin` dropped; null when off.
    pub thinning: Option<crate::ThinningReport>,
    /// First and last packet timestamps (ns since the epoch), 0 when no packet.
    pub first_ts_ns: u64,
    /// Last packet timestamp (ns since the epoch), 0 when no packet.
    pub last_ts_ns: u64,
    /// Tallies kept by number in the packet path (no string per packet), named by `finish`.
    #[serde(skip)]
    raw: RawTallies,
}

#[derive(Debug, Clone, Default)]
struct RawTallies {
    link_types: BTreeMap<u32, Traffic>,
    /// The latest frames' link type and what they carried, not yet in `link_types`: a trace
    /// rarely changes link type, so the map is touched per change, not per frame.
    link_run: Option<(u32, Traffic)>,
    unsupported: BTreeMap<u32, u64>,
    problems: BTreeMap<DecodeProblem, u64>,
    non_ip: BTreeMap<NonIp, u64>,
    tunnels: BTreeMap<Tunnel, u64>,
    /// (is ICMPv6, type)
    icmp: BTreeMap<(bool, u8), u64>,
}

impl RawTallies {
    /// Moves the current link-type run into `link_types`.
    fn end_link_run(&mut self) {
        if let Some((lt, traffic)) = self.link_run.take() {
            self.link_types.entry(lt).or_default().merge(&traffic);
        }
    }
}

impl RunStats {
    pub fn trace_duration_s(&self) -> f64 {
        self.last_ts_ns.saturating_sub(self.first_ts_ns) as f64 / 1e9
    }

    /// Every frame: kept inline in the reader's loop.
    #[inline(always)]
    pub(crate) fn count_frame(&mut self, link_type: u32, captured: usize, wire_len: u32, ts_ns: u64) {
        let p = &mut self.packets;
        p.read += 1;
        p.captured_bytes += captured as u64;
        p.wire_bytes += u64::from(wire_len);
        if self.first_ts_ns == 0 || ts_ns < self.first_ts_ns {
            self.first_ts_ns = ts_ns;
        }
        if ts_ns < self.last_ts_ns {
            p.time_went_backwards += 1;
        }
        self.last_ts_ns = self.last_ts_ns.max(ts_ns);
        let raw = &mut self.raw;
        match &mut raw.link_run {
            Some((lt, traffic)) if *lt == link_type => traffic.add(u64::from(wire_len)),
            _ => {
                raw.end_link_run();
                raw.link_run = Some((link_type, Traffic { packets: 1, bytes: u64::from(wire_len) }));
            }
        }
    }

    pub(crate) fn count_unsupported(&mut self, link_type: u32) {
        *self.raw.unsupported.entry(link_type).or_default() += 1;
    }

    pub(crate) fn count_packet(&mut self, p: &PacketSummary, wire_len: u32) {
        let raw = &mut self.raw;
        let c = &mut self.protocols;
        if let Some(problem) = p.problem {
            *raw.problems.entry(problem).or_default() += 1;
        }
        let Some(ip) = p.ip else {
            if let Some(non_ip) = p.non_ip {
                c.non_ip.add(u64::from(wire_len));
                *raw.non_ip.entry(non_ip).or_default() += 1;
            }
            return;
        };
        let v6 = ip.src.is_ipv6();
        if v6 {
            c.ipv6.add(u64::from(wire_len));
        } else {
            c.ipv4.add(u64::from(wire_len));
        }
        match ip.fragment {
            sonde_wire::Fragment::First => c.fragments_first += 1,
            sonde_wire::Fragment::Later => c.fragments_later += 1,
            sonde_wire::Fragment::No => {}
        }
        if let Some(t) = p.tunnel {
            *raw.tunnels.entry(t).or_default() += 1;
        }
        match p.transport {
            Some(Transport::Tcp(_) | Transport::Truncated { protocol: 6 }) => c.tcp.add(u64::from(wire_len)),
            Some(Transport::Udp(_) | Transport::Truncated { protocol: 17 }) => c.udp.add(u64::from(wire_len)),
            Some(Transport::Icmp { icmp_type, .. }) => {
                if v6 {
                    c.icmpv6.add(u64::from(wire_len));
                } else {
                    c.icmp.add(u64::from(wire_len));
                }
                *raw.icmp.entry((v6, icmp_type)).or_default() += 1;
            }
            _ => c.other_ip.add(u64::from(wire_len)),
        }
    }

    /// Names the numeric tallies for the summary. Call once, at the end of a run.
    pub(crate) fn finish(&mut self) {
        let mut raw = std::mem::take(&mut self.raw);
        raw.end_link_run();
        self.link_types = raw.link_types.into_iter().map(|(lt, t)| (link_type_name(lt), t)).collect();
        self.unsupported_link_types = raw.unsupported.into_iter().map(|(lt, n)| (link_type_name(lt), n)).collect();
        for (problem, n) in raw.problems {
            let (map, kind, layer) = match problem {
                DecodeProblem::Truncated(l) => (&mut self.snaplen_cuts, "", l),
                DecodeProblem::Malformed(l) => (&mut self.decode_problems, "malformed.", l),
                DecodeProblem::TooShort(l) => (&mut self.decode_problems, "too_short.", l),
            };
            *map.entry(format!("{kind}{}", layer_name(layer))).or_default() += n;
        }
        let c = &mut self.protocols;
        c.non_ip_types = raw.non_ip.into_iter().map(|(t, n)| (t.to_string(), n)).collect();
        c.tunnelled = raw.tunnels.into_iter().map(|(t, n)| (t.name().to_string(), n)).collect();
        c.icmp_types =
            raw.icmp.into_iter().map(|((v6, ty), n)| (format!("{}:{ty}", if v6 { "v6" } else { "v4" }), n)).collect();
    }

    /// Adds the counts of another reader of the same capture (`monitor --readers`: each reads
    /// its share of the flows); both finished.
    pub fn merge(&mut self, o: RunStats) {
        let had_packets = self.packets.read > 0;
        let (p, q) = (&mut self.packets, &o.packets);
        p.read += q.read;
        p.captured_bytes += q.captured_bytes;
        p.wire_bytes += q.wire_bytes;
        p.filtered_out += q.filtered_out;
        p.analysed += q.analysed;
        p.time_went_backwards += q.time_went_backwards;
        p.time_out_of_range += q.time_out_of_range;
        for (k, t) in &o.link_types {
            self.link_types.entry(k.clone()).or_default().merge(t);
        }
        add_counts(&mut self.unsupported_link_types, o.unsupported_link_types);
        let (a, b) = (&mut self.protocols, o.protocols);
        for (mine, theirs) in [
            (&mut a.ipv4, b.ipv4),
            (&mut a.ipv6, b.ipv6),
            (&mut a.non_ip, b.non_ip),
            (&mut a.tcp, b.tcp),
            (&mut a.udp, b.udp),
            (&mut a.icmp, b.icmp),
            (&mut a.icmpv6, b.icmpv6),
            (&mut a.other_ip, b.other_ip),
        ] {
            mine.merge(&theirs);
        }
        a.fragments_first += b.fragments_first;
        a.fragments_later += b.fragments_later;
        add_counts(&mut a.icmp_types, b.icmp_types);
        add_counts(&mut a.tunnelled, b.tunnelled);
        add_counts(&mut a.non_ip_types, b.non_ip_types);
        add_counts(&mut self.decode_problems, o.decode_problems);
        add_counts(&mut self.snaplen_cuts, o.snaplen_cuts);
        self.flows.add(&o.flows);
        let lookups = self.table.lookups + o.table.lookups;
        if lookups > 0 {
            self.table.mean_probe_len = (self.table.mean_probe_len * self.table.lookups as f64
                + o.table.mean_probe_len * o.table.lookups as f64)
                / lookups as f64;
        }
        self.table.lookups = lookups;
        self.table.peak_live_flows += o.table.peak_live_flows;
        if o.packets.read > 0 {
            self.first_ts_ns = if had_packets { self.first_ts_ns.min(o.first_ts_ns) } else { o.first_ts_ns };
            self.last_ts_ns = self.last_ts_ns.max(o.last_ts_ns);
        }
        self.thinning = self.thinning.take().or(o.thinning);
    }

    pub(crate) fn set_table(&mut self, t: TableStats) {
        self.table = TableLoad { peak_live_flows: t.peak_live, mean_probe_len: t.mean_probe_len(), lookups: t.lookups };
        self.flows.evicted = t.evicted;
    }

    /// The reader's side of the application facts.
    pub(crate) fn set_app_reader(&mut self, s: crate::AppReaderStats) {
        if let Some(app) = self.flows.app.as_mut() {
            app.reader = s.into();
        }
    }
}

fn add_counts<K: Ord>(mine: &mut BTreeMap<K, u64>, theirs: BTreeMap<K, u64>) {
    for (k, n) in theirs {
        *mine.entry(k).or_default() += n;
    }
}

fn layer_name(l: Layer) -> &'static str {
    match l {
        Layer::Link => "link",
        Layer::Ipv4 => "ipv4",
        Layer::Ipv6 => "ipv6",
        Layer::Tcp => "tcp",
        Layer::Udp => "udp",
        Layer::Icmp => "icmp",
        Layer::Tunnel => "tunnel",
    }
}

/// tcpdump's name for a link type, with the number ("EN10MB(1)", as capinfos prints it).
pub fn link_type_name(lt: u32) -> String {
    let name = match lt {
        0 => "NULL",
        1 => "EN10MB",
        9 => "PPP",
        12 | 14 | 101 => "RAW",
        50 => "PPP_SERIAL",
        104 => "C_HDLC",
        105 => "IEEE802_11",
        108 => "LOOP",
        113 => "LINUX_SLL",
        127 => "IEEE802_11_RADIO",
        197 => "ERF",
        228 => "IPV4",
        229 => "IPV6",
        276 => "LINUX_SLL2",
        _ => "LINKTYPE",
    };
    format!("{name}({lt})")
}

/// A sink in front of another that counts the flows passing through.
pub struct CountingSink<'a, S: FlowSink> {
    pub inner: &'a mut S,
    pub counts: &'a mut FlowCounts,
}

impl<S: FlowSink> FlowSink for CountingSink<'_, S> {
    fn flow(&mut self, record: &FlowRecord) {
        let c = &mut self.counts;
        match record {
            FlowRecord::Tcp(t) => {
                c.tcp += 1;
                if t.complete {
                    c.tcp_complete += 1;
                } else {
                    c.tcp_incomplete += 1;
                }
            }
            FlowRecord::Udp(_) => c.udp += 1,
        }
        let reason: EndReason = record.end();
        *c.end_reasons.entry(reason.name()).or_default() += 1;
        if let Some(app) = c.app.as_mut() {
            app.flow(record);
        }
        self.inner.flow(record);
    }
    fn rtt_sample(&mut self, sample: &RttSample) {
        self.inner.rtt_sample(sample);
    }
    fn interim(&mut self, record: &FlowRecord) {
        self.counts.interim_records += 1;
        self.inner.interim(record);
    }
    fn icmp(&mut self, record: &sonde_flow::IcmpRecord) {
        self.counts.icmp.flows += 1;
        self.counts.icmp.echo_sessions += u64::from(matches!(record.key.kind, sonde_flow::IcmpKind::Echo { .. }));
        self.inner.icmp(record);
    }
}
