//! The information elements sonde exports and the six templates built from them: TCP, UDP and
//! ICMP over IPv4 and IPv6. Every element says where its value comes from (the flow log column
//! it equals); docs/ipfix.md lists them.

use std::net::{IpAddr, Ipv6Addr};

use sonde_flow::{EndReason, FlowRecord, IcmpKind, IcmpRecord, TcpDirStats, TcpRecord};

/// RFC 5103: the enterprise number that marks an IANA element as the reverse (server → client)
/// direction of a biflow.
pub const REVERSE_PEN: u32 = 29305;

/// sonde's enterprise-specific elements live under this Private Enterprise Number.
/// PLACEHOLDER: 32473 is the number RFC 5612 reserves for documentation and examples; sonde has
/// no PEN of its own yet. Collectors decode the elements by (PEN, id), so a real PEN changes
/// only this constant.
pub const SONDE_PEN: u32 = 32473;

/// Template ids (data sets use them as set ids).
pub const TEMPLATE_TCP4: u16 = 256;
pub const TEMPLATE_TCP6: u16 = 257;
pub const TEMPLATE_UDP4: u16 = 258;
pub const TEMPLATE_UDP6: u16 = 259;
pub const TEMPLATE_ICMP4: u16 = 260;
pub const TEMPLATE_ICMP6: u16 = 261;

/// A record the exporter sends: a TCP or UDP flow's, or an ICMP entry's (icmp_flows.tsv's line).
#[derive(Debug, Clone, Copy)]
pub enum Record<'a> {
    Flow(&'a FlowRecord),
    Icmp(&'a IcmpRecord),
}

impl Record<'_> {
    /// The first packet's time, ns.
    pub fn first_ns(&self) -> u64 {
        match self {
            Record::Flow(r) => r.first_ns(),
            Record::Icmp(r) => r.first_ns,
        }
    }

    /// The last packet's time, ns.
    pub fn last_ns(&self) -> u64 {
        match self {
            Record::Flow(FlowRecord::Tcp(t)) => t.last_ns,
            Record::Flow(FlowRecord::Udp(u)) => u.last_ns,
            Record::Icmp(r) => r.last_ns,
        }
    }

    /// Both directions' packets and IP bytes, client → server first (an ICMP entry's
    /// requests or messages, then its replies).
    fn counts(&self) -> [u64; 4] {
        match self {
            Record::Flow(FlowRecord::Tcp(t)) => [t.client.ip_bytes, t.client.pkts, t.server.ip_bytes, t.server.pkts],
            Record::Flow(FlowRecord::Udp(u)) => [u.client.ip_bytes, u.client.pkts, u.server.ip_bytes, u.server.pkts],
            Record::Icmp(r) => [r.client.ip_bytes, r.client.pkts, r.server.ip_bytes, r.server.pkts],
        }
    }

    fn end(&self) -> EndReason {
        match self {
            Record::Flow(r) => r.end(),
            Record::Icmp(r) => r.end,
        }
    }
}

/// How a value is written.
#[derive(Debug, Clone, Copy)]
pub enum Encoding {
    /// An unsigned integer, big-endian in the element's length (saturated to it), of any record
    /// …
    Unsigned(fn(Record<'_>) -> u64),
    /// … of a TCP or UDP flow's only, or of an ICMP entry's only: templates() puts these in the
    /// templates of that kind of record.
    FlowUnsigned(fn(&FlowRecord) -> u64),
    IcmpUnsigned(fn(&IcmpRecord) -> u64),
    /// The client's (biflow source) or server's address, 4 or 16 bytes.
    ClientAddr,
    ServerAddr,
}

/// One information element as sonde exports it.
#[derive(Debug, Clone, Copy)]
pub struct Element {
    pub id: u16,
    /// 0 for IANA's, [`REVERSE_PEN`] for reverse IANA elements, [`SONDE_PEN`] for sonde's.
    pub pen: u32,
    /// Bytes in a data record (fixed: sonde sends no variable-length element).
    pub len: u16,
    pub name: &'static str,
    /// The IPFIX abstract data type (RFC 7012).
    pub data_type: &'static str,
    pub unit: &'static str,
    /// The flow log column(s) this element equals (same value, perhaps another unit).
    pub column: &'static str,
    pub encoding: Encoding,
}

impl Element {
    /// Bytes in a template record: id and length, plus the enterprise number.
    pub fn spec_len(&self) -> usize {
        if self.pen == 0 {
            4
        } else {
            8
        }
    }
}

fn tcp(r: &FlowRecord) -> Option<&TcpRecord> {
    match r {
        FlowRecord::Tcp(t) => Some(t),
        FlowRecord::Udp(_) => None,
    }
}

/// A TCP direction's field, 0 for a UDP record (never reached: UDP templates do not carry it).
fn tcp_dir(r: &FlowRecord, server: bool, f: fn(&TcpDirStats) -> u64) -> u64 {
    tcp(r).map_or(0, |t| f(if server { &t.server } else { &t.client }))
}

/// ns since the epoch to ms (dateTimeMilliseconds).
fn ms(t_ns: u64) -> u64 {
    t_ns / 1_000_000
}

/// RFC 5102 flowEndReason for sonde's end reasons.
pub fn end_reason_code(end: EndReason) -> u64 {
    match end {
        // Expired: Zeek's timers (an unanswered SYN, a close) ended it, by packet time.
        EndReason::Idle | EndReason::Expired => 1,
        // A live picture of an open flow is an interim record.
        EndReason::Open => 2,
        // FIN, RST, and a new SYN taking over the tuple: the flow's end was seen.
        EndReason::Fin | EndReason::Rst | EndReason::Reused => 3,
        EndReason::Eof => 4,
        EndReason::Evicted => 5,
    }
}

/// An RTT statistic in ns, 0 without a sample (the `*_rtt_cnt` element says how many).
fn rtt_mean_ns(d: &TcpDirStats) -> u64 {
    let m = d.rtt.mean_ns();
    if m.is_finite() && m > 0.0 {
        m.round() as u64
    } else {
        0
    }
}

macro_rules! el {
    ($id:expr, $pen:expr, $len:expr, $name:expr, $ty:expr, $unit:expr, $col:expr, $enc:expr) => {
        Element {
            id: $id,
            pen: $pen,
            len: $len,
            name: $name,
            data_type: $ty,
            unit: $unit,
            column: $col,
            encoding: $enc,
        }
    };
}

/// A TCP or UDP flow's elements after the addresses: its ports and protocol.
const PORTS: [Element; 3] = [
    el!(
        7,
        0,
        2,
        "sourceTransportPort",
        "unsigned16",
        "",
        "c_port",
        Encoding::FlowUnsigned(|r| u64::from(r.endpoints().client_port))
    ),
    el!(
        11,
        0,
        2,
        "destinationTransportPort",
        "unsigned16",
        "",
        "s_port",
        Encoding::FlowUnsigned(|r| u64::from(r.endpoints().server_port))
    ),
    el!(
        4,
        0,
        1,
        "protocolIdentifier",
        "unsigned8",
        "",
        "(6 TCP, 17 UDP)",
        Encoding::FlowUnsigned(|r| if tcp(r).is_some() { 6 } else { 17 })
    ),
];

/// A TCP or UDP flow's autonomous systems (`--asn`: the flow logs' `c_asn`, `s_asn`; 0 when
/// unknown or not looked up, as NetFlow exporters send them), after its ports.
const AS_NUMBERS: [Element; 2] = [
    el!(16, 0, 4, "bgpSourceAsNumber", "unsigned32", "", "c_asn", Encoding::FlowUnsigned(|r| asn(r, 0))),
    el!(17, 0, 4, "bgpDestinationAsNumber", "unsigned32", "", "s_asn", Encoding::FlowUnsigned(|r| asn(r, 1))),
];

/// The autonomous system of a flow's client (0) or server (1); 0 when unknown.
fn asn(r: &FlowRecord, side: usize) -> u64 {
    r.owners().and_then(|o| o[side].asn).map_or(0, u64::from)
}

/// The times and counts of a biflow, every template's, after the ports (ICMP: its type, code
/// and protocol).
const BIFLOW: [Element; 8] = [
    el!(
        152,
        0,
        8,
        "flowStartMilliseconds",
        "dateTimeMilliseconds",
        "ms",
        "first",
        Encoding::Unsigned(|r| ms(r.first_ns()))
    ),
    el!(
        153,
        0,
        8,
        "flowEndMilliseconds",
        "dateTimeMilliseconds",
        "ms",
        "last",
        Encoding::Unsigned(|r| ms(r.last_ns()))
    ),
    el!(1, 0, 8, "octetDeltaCount", "unsigned64", "octets", "c_bytes_ip", Encoding::Unsigned(|r| r.counts()[0])),
    el!(2, 0, 8, "packetDeltaCount", "unsigned64", "packets", "c_pkts_all", Encoding::Unsigned(|r| r.counts()[1])),
    el!(
        1,
        REVERSE_PEN,
        8,
        "reverseOctetDeltaCount",
        "unsigned64",
        "octets",
        "s_bytes_ip",
        Encoding::Unsigned(|r| r.counts()[2])
    ),
    el!(
        2,
        REVERSE_PEN,
        8,
        "reversePacketDeltaCount",
        "unsigned64",
        "packets",
        "s_pkts_all",
        Encoding::Unsigned(|r| r.counts()[3])
    ),
    el!(136, 0, 1, "flowEndReason", "unsigned8", "", "end_reason", Encoding::Unsigned(|r| end_reason_code(r.end()))),
    // 1 = initiator: the biflow source is the flow's client (sonde's c_ side).
    el!(239, 0, 1, "biflowDirection", "unsigned8", "", "(1: source is the client)", Encoding::Unsigned(|_| 1)),
];

const V4: [Element; 2] = [
    el!(8, 0, 4, "sourceIPv4Address", "ipv4Address", "", "c_ip", Encoding::ClientAddr),
    el!(12, 0, 4, "destinationIPv4Address", "ipv4Address", "", "s_ip", Encoding::ServerAddr),
];

const V6: [Element; 2] = [
    el!(27, 0, 16, "sourceIPv6Address", "ipv6Address", "", "c_ip", Encoding::ClientAddr),
    el!(28, 0, 16, "destinationIPv6Address", "ipv6Address", "", "s_ip", Encoding::ServerAddr),
];

/// TCP's IANA counters and sonde's TCP metrics (client side, then server side in reverse or at
/// the next enterprise id).
const TCP: [Element; 37] = [
    el!(
        6,
        0,
        2,
        "tcpControlBits",
        "unsigned16",
        "",
        "(the OR of every segment's flags, both directions)",
        Encoding::FlowUnsigned(|r| tcp_dir(r, false, |d| d.flags.into()) | tcp_dir(r, true, |d| d.flags.into()))
    ),
    el!(
        218,
        0,
        8,
        "tcpSynTotalCount",
        "unsigned64",
        "packets",
        "c_syn_cnt",
        Encoding::FlowUnsigned(|r| tcp_dir(r, false, |d| d.syn_cnt))
    ),
    el!(
        219,
        0,
        8,
        "tcpFinTotalCount",
        "unsigned64",
        "packets",
        "c_fin_cnt",
        Encoding::FlowUnsigned(|r| tcp_dir(r, false, |d| d.fin_cnt))
    ),
    el!(
        220,
        0,
        8,
        "tcpRstTotalCount",
        "unsigned64",
        "packets",
        "c_rst_cnt",
        Encoding::FlowUnsigned(|r| tcp_dir(r, false, |d| d.rst_cnt))
    ),
    el!(
        218,
        REVERSE_PEN,
        8,
        "reverseTcpSynTotalCount",
        "unsigned64",
        "packets",
        "s_syn_cnt",
        Encoding::FlowUnsigned(|r| tcp_dir(r, true, |d| d.syn_cnt))
    ),
    el!(
        219,
        REVERSE_PEN,
        8,
        "reverseTcpFinTotalCount",
        "unsigned64",
        "packets",
        "s_fin_cnt",
        Encoding::FlowUnsigned(|r| tcp_dir(r, true, |d| d.fin_cnt))
    ),
    el!(
        220,
        REVERSE_PEN,
        8,
        "reverseTcpRstTotalCount",
        "unsigned64",
        "packets",
        "s_rst_cnt",
        Encoding::FlowUnsigned(|r| tcp_dir(r, true, |d| d.rst_cnt))
    ),
    el!(
        1,
        SONDE_PEN,
        8,
        "sondeClientHandshakeRtt",
        "unsigned64",
        "ns",
        "c_hs_rtt (0: not seen)",
        Encoding::FlowUnsigned(|r| tcp(r).and_then(|t| t.hs_syn_synack_ns).unwrap_or(0))
    ),
    el!(
        2,
        SONDE_PEN,
        8,
        "sondeServerHandshakeRtt",
        "unsigned64",
        "ns",
        "s_hs_rtt (0: not seen)",
        Encoding::FlowUnsigned(|r| tcp(r).and_then(|t| t.hs_synack_ack_ns).unwrap_or(0))
    ),
    el!(
        10,
        SONDE_PEN,
        8,
        "sondeClientRttMin",
        "unsigned64",
        "ns",
        "c_rtt_min (0: no sample)",
        Encoding::FlowUnsigned(|r| tcp_dir(r, false, |d| if d.rtt.count > 0 { d.rtt.min_ns } else { 0 }))
    ),
    el!(
        11,
        SONDE_PEN,
        8,
        "sondeServerRttMin",
        "unsigned64",
        "ns",
        "s_rtt_min (0: no sample)",
        Encoding::FlowUnsigned(|r| tcp_dir(r, true, |d| if d.rtt.count > 0 { d.rtt.min_ns } else { 0 }))
    ),
    el!(
        12,
        SONDE_PEN,
        8,
        "sondeClientRttAvg",
        "unsigned64",
        "ns",
        "c_rtt_avg (0: no sample)",
        Encoding::FlowUnsigned(|r| tcp_dir(r, false, rtt_mean_ns))
    ),
    el!(
        13,
        SONDE_PEN,
        8,
        "sondeServerRttAvg",
        "unsigned64",
        "ns",
        "s_rtt_avg (0: no sample)",
        Encoding::FlowUnsigned(|r| tcp_dir(r, true, rtt_mean_ns))
    ),
    el!(
        14,
        SONDE_PEN,
        8,
        "sondeClientRttMax",
        "unsigned64",
        "ns",
        "c_rtt_max (0: no sample)",
        Encoding::FlowUnsigned(|r| tcp_dir(r, false, |d| d.rtt.max_ns))
    ),
    el!(
        15,
        SONDE_PEN,
        8,
        "sondeServerRttMax",
        "unsigned64",
        "ns",
        "s_rtt_max (0: no sample)",
        Encoding::FlowUnsigned(|r| tcp_dir(r, true, |d| d.rtt.max_ns))
    ),
    el!(
        16,
        SONDE_PEN,
        8,
        "sondeClientRttCount",
        "unsigned64",
        "samples",
        "c_rtt_cnt",
        Encoding::FlowUnsigned(|r| tcp_dir(r, false, |d| d.rtt.count))
    ),
    el!(
        17,
        SONDE_PEN,
        8,
        "sondeServerRttCount",
        "unsigned64",
        "samples",
        "s_rtt_cnt",
        Encoding::FlowUnsigned(|r| tcp_dir(r, true, |d| d.rtt.count))
    ),
    el!(
        20,
        SONDE_PEN,
        8,
        "sondeClientRetxPackets",
        "unsigned64",
        "packets",
        "c_pkts_retx",
        Encoding::FlowUnsigned(|r| tcp_dir(r, false, |d| d.retx_pkts))
    ),
    el!(
        21,
        SONDE_PEN,
        8,
        "sondeServerRetxPackets",
        "unsigned64",
        "packets",
        "s_pkts_retx",
        Encoding::FlowUnsigned(|r| tcp_dir(r, true, |d| d.retx_pkts))
    ),
    el!(
        22,
        SONDE_PEN,
        8,
        "sondeClientRetxOctets",
        "unsigned64",
        "octets",
        "c_bytes_retx",
        Encoding::FlowUnsigned(|r| tcp_dir(r, false, |d| d.retx_bytes))
    ),
    el!(
        23,
        SONDE_PEN,
        8,
        "sondeServerRetxOctets",
        "unsigned64",
        "octets",
        "s_bytes_retx",
        Encoding::FlowUnsigned(|r| tcp_dir(r, true, |d| d.retx_bytes))
    ),
    el!(
        24,
        SONDE_PEN,
        8,
        "sondeClientOutOfSequencePackets",
        "unsigned64",
        "packets",
        "c_pkts_ooo",
        Encoding::FlowUnsigned(|r| tcp_dir(r, false, |d| d.ooo_pkts))
    ),
    el!(
        25,
        SONDE_PEN,
        8,
        "sondeServerOutOfSequencePackets",
        "unsigned64",
        "packets",
        "s_pkts_ooo",
        Encoding::FlowUnsigned(|r| tcp_dir(r, true, |d| d.ooo_pkts))
    ),
    el!(
        26,
        SONDE_PEN,
        8,
        "sondeClientRtoPackets",
        "unsigned64",
        "packets",
        "c_pkts_rto",
        Encoding::FlowUnsigned(|r| tcp_dir(r, false, |d| d.anomalies.rto))
    ),
    el!(
        27,
        SONDE_PEN,
        8,
        "sondeServerRtoPackets",
        "unsigned64",
        "packets",
        "s_pkts_rto",
        Encoding::FlowUnsigned(|r| tcp_dir(r, true, |d| d.anomalies.rto))
    ),
    el!(
        28,
        SONDE_PEN,
        8,
        "sondeClientFastRetxPackets",
        "unsigned64",
        "packets",
        "c_pkts_fs",
        Encoding::FlowUnsigned(|r| tcp_dir(r, false, |d| d.anomalies.fast_retx))
    ),
    el!(
        29,
        SONDE_PEN,
        8,
        "sondeServerFastRetxPackets",
        "unsigned64",
        "packets",
        "s_pkts_fs",
        Encoding::FlowUnsigned(|r| tcp_dir(r, true, |d| d.anomalies.fast_retx))
    ),
    el!(
        30,
        SONDE_PEN,
        8,
        "sondeClientReorderingPackets",
        "unsigned64",
        "packets",
        "c_pkts_reor",
        Encoding::FlowUnsigned(|r| tcp_dir(r, false, |d| d.anomalies.reordering))
    ),
    el!(
        31,
        SONDE_PEN,
        8,
        "sondeServerReorderingPackets",
        "unsigned64",
        "packets",
        "s_pkts_reor",
        Encoding::FlowUnsigned(|r| tcp_dir(r, true, |d| d.anomalies.reordering))
    ),
    el!(
        32,
        SONDE_PEN,
        8,
        "sondeClientNetDupPackets",
        "unsigned64",
        "packets",
        "c_pkts_dup",
        Encoding::FlowUnsigned(|r| tcp_dir(r, false, |d| d.anomalies.net_dup))
    ),
    el!(
        33,
        SONDE_PEN,
        8,
        "sondeServerNetDupPackets",
        "unsigned64",
        "packets",
        "s_pkts_dup",
        Encoding::FlowUnsigned(|r| tcp_dir(r, true, |d| d.anomalies.net_dup))
    ),
    el!(
        40,
        SONDE_PEN,
        2,
        "sondeClientMss",
        "unsigned16",
        "octets",
        "c_mss (0: no option)",
        Encoding::FlowUnsigned(|r| tcp_dir(r, false, |d| u64::from(d.mss_opt)))
    ),
    el!(
        41,
        SONDE_PEN,
        2,
        "sondeServerMss",
        "unsigned16",
        "octets",
        "s_mss (0: no option)",
        Encoding::FlowUnsigned(|r| tcp_dir(r, true, |d| u64::from(d.mss_opt)))
    ),
    el!(
        42,
        SONDE_PEN,
        4,
        "sondeClientWindowMax",
        "unsigned32",
        "octets",
        "c_win_max",
        Encoding::FlowUnsigned(|r| tcp_dir(r, false, |d| d.win_max))
    ),
    el!(
        43,
        SONDE_PEN,
        4,
        "sondeServerWindowMax",
        "unsigned32",
        "octets",
        "s_win_max",
        Encoding::FlowUnsigned(|r| tcp_dir(r, true, |d| d.win_max))
    ),
    el!(
        44,
        SONDE_PEN,
        4,
        "sondeClientWindowMin",
        "unsigned32",
        "octets",
        "c_win_min",
        Encoding::FlowUnsigned(|r| tcp_dir(r, false, |d| d.win_min))
    ),
    el!(
        45,
        SONDE_PEN,
        4,
        "sondeServerWindowMin",
        "unsigned32",
        "octets",
        "s_win_min",
        Encoding::FlowUnsigned(|r| tcp_dir(r, true, |d| d.win_min))
    ),
];

/// RFC 7012 icmpTypeCodeIPv4/IPv6: type × 256 + code. An echo session's is its request's
/// (ICMP 8, ICMPv6 128, code 0), as an exporter keying ICMP by type and code gives the session's
/// first packet.
pub fn icmp_type_code(r: &IcmpRecord) -> u64 {
    match r.key.kind {
        IcmpKind::Echo { .. } if r.key.client.is_ipv6() => 128 << 8,
        IcmpKind::Echo { .. } => 8 << 8,
        IcmpKind::Message { icmp_type, code } => u64::from(icmp_type) << 8 | u64::from(code),
    }
}

const ICMP4_TYPE_CODE: [Element; 1] = [el!(
    32,
    0,
    2,
    "icmpTypeCodeIPv4",
    "unsigned16",
    "",
    "icmp_type × 256 + icmp_code (echo: 8 × 256)",
    Encoding::IcmpUnsigned(icmp_type_code)
)];

const ICMP6_TYPE_CODE: [Element; 1] = [el!(
    139,
    0,
    2,
    "icmpTypeCodeIPv6",
    "unsigned16",
    "",
    "icmp_type × 256 + icmp_code (echo: 128 × 256)",
    Encoding::IcmpUnsigned(icmp_type_code)
)];

/// An ICMP entry's protocol, after its type and code.
const ICMP_PROTO: [Element; 1] = [el!(
    4,
    0,
    1,
    "protocolIdentifier",
    "unsigned8",
    "",
    "proto (1 icmp, 58 icmpv6)",
    Encoding::IcmpUnsigned(|r| if r.key.client.is_ipv6() { 58 } else { 1 })
)];

/// A template: its id and elements in record order.
#[derive(Debug, Clone)]
pub struct Template {
    pub id: u16,
    pub elements: Vec<Element>,
    /// Bytes of one data record.
    pub record_len: usize,
}

impl Template {
    fn new(id: u16, parts: &[&[Element]]) -> Template {
        let elements: Vec<Element> = parts.iter().flat_map(|p| p.iter().copied()).collect();
        let record_len = elements.iter().map(|e| usize::from(e.len)).sum();
        Template { id, elements, record_len }
    }

    /// Bytes of the template record (RFC 7011 §3.4.1).
    pub fn spec_len(&self) -> usize {
        4 + self.elements.iter().map(Element::spec_len).sum::<usize>()
    }
}

/// The six templates: TCP, UDP and ICMP over IPv4 and IPv6.
pub fn templates() -> Vec<Template> {
    vec![
        Template::new(TEMPLATE_TCP4, &[&V4, &PORTS, &AS_NUMBERS, &BIFLOW, &TCP]),
        Template::new(TEMPLATE_TCP6, &[&V6, &PORTS, &AS_NUMBERS, &BIFLOW, &TCP]),
        Template::new(TEMPLATE_UDP4, &[&V4, &PORTS, &AS_NUMBERS, &BIFLOW]),
        Template::new(TEMPLATE_UDP6, &[&V6, &PORTS, &AS_NUMBERS, &BIFLOW]),
        Template::new(TEMPLATE_ICMP4, &[&V4, &ICMP4_TYPE_CODE, &ICMP_PROTO, &BIFLOW]),
        Template::new(TEMPLATE_ICMP6, &[&V6, &ICMP6_TYPE_CODE, &ICMP_PROTO, &BIFLOW]),
    ]
}

/// The template a record goes out in, and its addresses as that template writes them (a flow
/// whose sides differ in family, which sonde does not make, would go as IPv4-mapped IPv6).
pub fn template_for(r: Record<'_>) -> (u16, [IpAddr; 2]) {
    let (client, server, [id4, id6]) = match r {
        Record::Flow(f) => {
            let e = f.endpoints();
            let ids = if tcp(f).is_some() { [TEMPLATE_TCP4, TEMPLATE_TCP6] } else { [TEMPLATE_UDP4, TEMPLATE_UDP6] };
            (e.client_ip, e.server_ip, ids)
        }
        Record::Icmp(i) => (i.key.client, i.key.server, [TEMPLATE_ICMP4, TEMPLATE_ICMP6]),
    };
    match (client, server) {
        (c @ IpAddr::V4(_), s @ IpAddr::V4(_)) => (id4, [c, s]),
        (c, s) => (id6, [IpAddr::V6(v6(c)), IpAddr::V6(v6(s))]),
    }
}

fn v6(a: IpAddr) -> Ipv6Addr {
    match a {
        IpAddr::V4(a) => a.to_ipv6_mapped(),
        IpAddr::V6(a) => a,
    }
}

/// Appends `r`'s data record in `t` to `out`.
pub fn write_record(t: &Template, r: Record<'_>, addrs: [IpAddr; 2], out: &mut Vec<u8>) {
    for e in &t.elements {
        match e.encoding {
            Encoding::ClientAddr | Encoding::ServerAddr => {
                let a = addrs[usize::from(matches!(e.encoding, Encoding::ServerAddr))];
                match a {
                    IpAddr::V4(a) => out.extend_from_slice(&a.octets()),
                    IpAddr::V6(a) => out.extend_from_slice(&a.octets()),
                }
            }
            Encoding::Unsigned(_) | Encoding::FlowUnsigned(_) | Encoding::IcmpUnsigned(_) => {
                let v = match (e.encoding, r) {
                    (Encoding::Unsigned(f), r) => f(r),
                    (Encoding::FlowUnsigned(f), Record::Flow(r)) => f(r),
                    (Encoding::IcmpUnsigned(f), Record::Icmp(r)) => f(r),
                    // Not reached: templates() gives each kind of record its own elements.
                    _ => 0,
                };
                let len = usize::from(e.len);
                // Saturate rather than wrap: a window beyond 2^32 reads as the largest value.
                let max = if len >= 8 { u64::MAX } else { (1u64 << (8 * len)) - 1 };
                out.extend_from_slice(&v.min(max).to_be_bytes()[8 - len..]);
            }
        }
    }
}
