//! Flow records: what a flow leaves behind when it ends. Plain `Copy` data; the output crate
//! names and formats every field (docs/metrics.md defines them).

use std::net::IpAddr;

use sonde_wire::Tunnel;

/// Why a flow's record was emitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EndReason {
    /// TCP: FIN seen from both sides.
    Fin,
    /// TCP: a RST was seen.
    Rst,
    /// No packet for the idle timeout.
    Idle,
    /// The table was full and this was the longest-idle flow.
    Evicted,
    /// TCP: a new SYN with another ISN reused the tuple while the flow was still open.
    Reused,
    /// The input ended with the flow still open.
    Eof,
    /// TCP, with Zeek's lifetimes (`FlowConfig::zeek_lifetimes`): a later packet came after
    /// Zeek's timers would have removed the connection (5 s after an unanswered SYN, or after
    /// a close).
    Expired,
    /// Still open: a live view's picture of a flow or an interim record (the active timeout),
    /// never in the flow logs.
    Open,
}

impl EndReason {
    pub fn name(self) -> &'static str {
        match self {
            EndReason::Fin => "fin",
            EndReason::Rst => "rst",
            EndReason::Idle => "idle",
            EndReason::Evicted => "evicted",
            EndReason::Reused => "reused",
            EndReason::Open => "open",
            EndReason::Eof => "eof",
            EndReason::Expired => "expired",
        }
    }
}

/// Summary statistics of RTT samples, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RttStats {
    pub count: u64,
    pub min_ns: u64,
    pub max_ns: u64,
    pub sum_ns: f64,
    pub sum_sq_ns2: f64,
}

impl RttStats {
    pub fn add(&mut self, sample_ns: u64) {
        if self.count == 0 || sample_ns < self.min_ns {
            self.min_ns = sample_ns;
        }
        self.max_ns = self.max_ns.max(sample_ns);
        self.count += 1;
        let x = sample_ns as f64;
        self.sum_ns += x;
        self.sum_sq_ns2 += x * x;
    }

    pub fn mean_ns(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum_ns / self.count as f64
        }
    }

    /// Sample standard deviation (n − 1 in the denominator, as tcptrace); 0 below two samples.
    pub fn stdev_ns(&self) -> f64 {
        if self.count < 2 {
            return 0.0;
        }
        let n = self.count as f64;
        let var = (self.sum_sq_ns2 - self.sum_ns * self.sum_ns / n) / (n - 1.0);
        var.max(0.0).sqrt()
    }
}

/// Retransmissions and other out-of-sequence segments by cause, as Tstat classifies them
/// (Mellia et al., "Passive analysis of TCP anomalies"). Every segment counted in
/// `TcpDirStats::pkts_retx` or `pkts_ooo` lands in exactly one of these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AnomalyCounts {
    /// Retransmission after a retransmission timeout.
    pub rto: u64,
    /// Fast retransmission (three duplicate ACKs seen).
    pub fast_retx: u64,
    /// Reordering: new data arriving late, within an RTT.
    pub reordering: u64,
    /// Network duplicate: the same IP packet seen twice.
    pub net_dup: u64,
    /// Window probe (flow control) while the receiver's window was zero.
    pub flow_control: u64,
    /// Unnecessary retransmission by timeout: the data had already been acknowledged.
    pub unneeded_rto: u64,
    /// Unnecessary fast retransmission.
    pub unneeded_fast_retx: u64,
    /// Out of sequence, cause not determined.
    pub unknown: u64,
}

/// Per-direction TCP measurements. Times in ns since the epoch (0 = never), sizes in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct TcpDirStats {
    pub pkts: u64,
    pub ip_bytes: u64,
    /// Payload bytes including retransmissions.
    pub payload_bytes: u64,
    /// Distinct payload bytes (sequence space covered, SYN and FIN excluded).
    pub unique_bytes: u64,
    pub data_pkts: u64,
    pub ack_pkts: u64,
    /// ACK set, no payload, no SYN/FIN/RST.
    pub pure_ack_pkts: u64,
    pub syn_cnt: u64,
    pub fin_cnt: u64,
    pub rst_cnt: u64,
    /// The OR of the flags of every segment of this direction (the header's low byte: FIN 0x01
    /// … CWR 0x80), as RFC 7125's tcpControlBits.
    pub flags: u8,
    pub first_ns: u64,
    pub last_ns: u64,
    pub first_payload_ns: u64,
    pub last_payload_ns: u64,
    pub first_ack_ns: u64,
    pub ttl_min: u8,
    pub ttl_max: u8,
    /// MSS option value in this side's SYN (0 = none).
    pub mss_opt: u16,
    /// Window scale sent in SYN (None = not sent).
    pub win_scale: Option<u8>,
    pub sack_permitted: bool,
    pub timestamps: bool,
    pub sack_blocks: u64,
    pub seg_min: u32,
    pub seg_max: u32,
    /// Announced receive window, scaled when both sides negotiated scaling.
    pub win_min: u64,
    pub win_max: u64,
    pub win_zero: u64,
    pub rtt: RttStats,
    pub retx_pkts: u64,
    pub retx_bytes: u64,
    pub ooo_pkts: u64,
    pub anomalies: AnomalyCounts,
    /// SYNs retransmitted with a different ISN.
    pub syn_retx_new_isn: u64,
    pub inflight_min: u64,
    pub inflight_max: u64,
    pub inflight_initial: u64,
}

/// Tuple and role facts shared by TCP and UDP records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Endpoints {
    pub client_ip: IpAddr,
    pub client_port: u16,
    pub server_ip: IpAddr,
    pub server_port: u16,
    pub client_internal: bool,
    pub server_internal: bool,
    pub tunnel: Option<Tunnel>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TcpRecord {
    pub endpoints: Endpoints,
    /// SYN from the client and SYN/ACK from the server were both seen.
    pub complete: bool,
    pub end: EndReason,
    pub first_ns: u64,
    pub last_ns: u64,
    /// SYN (client) → SYN/ACK at the probe: the probe–server round trip.
    pub hs_syn_synack_ns: Option<u64>,
    /// SYN/ACK → client's first ACK at the probe: the probe–client round trip.
    pub hs_synack_ack_ns: Option<u64>,
    /// Zeek's state and history of the flow (None: not followed, `FlowConfig::history`).
    pub zeek: Option<crate::zeek::ZeekConn>,
    /// Tstat's view of the flow (None: not followed, `FlowConfig::tstat`).
    pub tstat: Option<Box<crate::tstat::TstatTcp>>,
    /// NFStream's flow features (None: not asked for, `FlowConfig::features`).
    pub features: Option<Box<crate::features::FlowFeatures>>,
    pub client: TcpDirStats,
    pub server: TcpDirStats,
    /// ICMP errors that quoted one of the flow's packets.
    pub icmp_errors: crate::IcmpErrors,
    /// What the flow's first packets told of its application (None: no payload was read).
    pub app: Option<Box<sonde_l7::Facts>>,
    /// Who the client and the server are (None: no owners were asked for).
    pub owners: Option<Box<crate::FlowOwners>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UdpDirStats {
    pub pkts: u64,
    pub ip_bytes: u64,
    pub payload_bytes: u64,
    pub first_ns: u64,
    pub last_ns: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct UdpRecord {
    pub endpoints: Endpoints,
    pub end: EndReason,
    pub first_ns: u64,
    pub last_ns: u64,
    pub client: UdpDirStats,
    pub server: UdpDirStats,
    /// NFStream's flow features (None: not asked for, `FlowConfig::features`).
    pub features: Option<Box<crate::features::FlowFeatures>>,
    /// ICMP errors that quoted one of the flow's packets.
    pub icmp_errors: crate::IcmpErrors,
    /// What the flow's first packets told of its application (None: no payload was read).
    pub app: Option<Box<sonde_l7::Facts>>,
    /// Who the client and the server are (None: no owners were asked for).
    pub owners: Option<Box<crate::FlowOwners>>,
}

/// A finished flow of either protocol. Sinks get it by reference, built on the stack: no
/// allocation per flow, so the TCP variant stays unboxed despite its size.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)]
pub enum FlowRecord {
    Tcp(TcpRecord),
    Udp(UdpRecord),
}

impl FlowRecord {
    pub fn first_ns(&self) -> u64 {
        match self {
            FlowRecord::Tcp(r) => r.first_ns,
            FlowRecord::Udp(r) => r.first_ns,
        }
    }
    pub fn endpoints(&self) -> &Endpoints {
        match self {
            FlowRecord::Tcp(r) => &r.endpoints,
            FlowRecord::Udp(r) => &r.endpoints,
        }
    }
    pub fn endpoints_mut(&mut self) -> &mut Endpoints {
        match self {
            FlowRecord::Tcp(r) => &mut r.endpoints,
            FlowRecord::Udp(r) => &mut r.endpoints,
        }
    }
    /// The application facts read from the flow's payload.
    pub fn app(&self) -> Option<&sonde_l7::Facts> {
        match self {
            FlowRecord::Tcp(r) => r.app.as_deref(),
            FlowRecord::Udp(r) => r.app.as_deref(),
        }
    }
    pub fn set_app(&mut self, facts: sonde_l7::Facts) {
        let app = Some(Box::new(facts));
        match self {
            FlowRecord::Tcp(r) => r.app = app,
            FlowRecord::Udp(r) => r.app = app,
        }
    }
    /// Who the client and the server are, when owners were asked for.
    pub fn owners(&self) -> Option<&crate::FlowOwners> {
        match self {
            FlowRecord::Tcp(r) => r.owners.as_deref(),
            FlowRecord::Udp(r) => r.owners.as_deref(),
        }
    }
    /// NFStream's flow features, when asked for.
    pub fn features(&self) -> Option<&crate::features::FlowFeatures> {
        match self {
            FlowRecord::Tcp(r) => r.features.as_deref(),
            FlowRecord::Udp(r) => r.features.as_deref(),
        }
    }
    pub fn end(&self) -> EndReason {
        match self {
            FlowRecord::Tcp(r) => r.end,
            FlowRecord::Udp(r) => r.end,
        }
    }
}

/// Where finished flows go. The engine passes records as flows end; a sink may buffer, sort,
/// write or forward them.
pub trait FlowSink {
    fn flow(&mut self, record: &FlowRecord);

    /// One data→ACK RTT sample, as the TCP analyzer takes it (the samples a record's `rtt`
    /// statistics summarise, one by one). No default: a wrapper must forward it.
    fn rtt_sample(&mut self, sample: &RttSample);

    /// A flow still open, as it stands after its active timeout (`FlowConfig::active_timeout_ns`):
    /// its end reason is `Open`, its counts cumulative. Exporters send it; the flow logs wait
    /// for the end. No default: a wrapper must forward it.
    fn interim(&mut self, record: &FlowRecord);

    /// The internal networks changed (a live monitor's SIGHUP): sides are told by these from
    /// now on.
    fn internal_nets(&mut self, _nets: &[ipnet::IpNet]) {}

    /// An ICMP entry (an echo session, other messages) that ended. The flow logs (text and
    /// typed), Kafka and IPFIX take them. A wrapper must forward it.
    fn icmp(&mut self, _record: &crate::IcmpRecord) {}
}

/// A TCP RTT sample: the time from a data segment to the ACK that acknowledged exactly it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RttSample {
    /// Time of the ACK.
    pub ts_ns: u64,
    pub rtt_ns: u64,
    /// Whether the timed data went from client to server.
    pub client_data: bool,
    pub client_ip: IpAddr,
    pub server_ip: IpAddr,
}

/// Both sinks get every record.
impl<A: FlowSink, B: FlowSink> FlowSink for (A, B) {
    fn flow(&mut self, record: &FlowRecord) {
        self.0.flow(record);
        self.1.flow(record);
    }
    fn rtt_sample(&mut self, sample: &RttSample) {
        self.0.rtt_sample(sample);
        self.1.rtt_sample(sample);
    }
    fn interim(&mut self, record: &FlowRecord) {
        self.0.interim(record);
        self.1.interim(record);
    }
    fn internal_nets(&mut self, nets: &[ipnet::IpNet]) {
        self.0.internal_nets(nets);
        self.1.internal_nets(nets);
    }
    fn icmp(&mut self, record: &crate::IcmpRecord) {
        self.0.icmp(record);
        self.1.icmp(record);
    }
}

/// A sink that may be absent (an output turned off).
impl<S: FlowSink> FlowSink for Option<S> {
    fn flow(&mut self, record: &FlowRecord) {
        if let Some(s) = self {
            s.flow(record);
        }
    }
    fn rtt_sample(&mut self, sample: &RttSample) {
        if let Some(s) = self {
            s.rtt_sample(sample);
        }
    }
    fn interim(&mut self, record: &FlowRecord) {
        if let Some(s) = self {
            s.interim(record);
        }
    }
    fn internal_nets(&mut self, nets: &[ipnet::IpNet]) {
        if let Some(s) = self {
            s.internal_nets(nets);
        }
    }
    fn icmp(&mut self, record: &crate::IcmpRecord) {
        if let Some(s) = self {
            s.icmp(record);
        }
    }
}

/// The flows that ended (interim records are not kept).
impl FlowSink for Vec<FlowRecord> {
    fn flow(&mut self, record: &FlowRecord) {
        self.push(record.clone());
    }
    fn rtt_sample(&mut self, _: &RttSample) {}
    fn interim(&mut self, _: &FlowRecord) {}
}
