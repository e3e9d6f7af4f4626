//! The fixed-size result of decoding one frame: everything the flow layer needs, copied out of
//! the borrowed header views so that it can cross a thread boundary without the frame's bytes.

use std::net::IpAddr;

/// A link-layer type as numbered by tcpdump.org's LINKTYPE_ registry (pcap and pcapng share it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LinkType(pub u32);

impl LinkType {
    pub const NULL: LinkType = LinkType(0);
    pub const ETHERNET: LinkType = LinkType(1);
    pub const RAW: LinkType = LinkType(101);
    /// OpenBSD's DLT_RAW value, seen in old captures.
    pub const RAW_OPENBSD: LinkType = LinkType(12);
    /// DLT_RAW on some BSDs (14).
    pub const RAW_14: LinkType = LinkType(14);
    pub const LOOP: LinkType = LinkType(108);
    pub const LINUX_SLL: LinkType = LinkType(113);
    pub const IPV4: LinkType = LinkType(228);
    pub const IPV6: LinkType = LinkType(229);
    pub const LINUX_SLL2: LinkType = LinkType(276);
    /// PPP, starting with the (optional) address/control bytes or directly with the protocol.
    pub const PPP: LinkType = LinkType(9);
    /// PPP in HDLC-like framing (RFC 1662), also known as DLT_PPP_SERIAL.
    pub const PPP_HDLC: LinkType = LinkType(50);
    /// Cisco HDLC: address, control, then an EtherType.
    pub const C_HDLC: LinkType = LinkType(104);
}

/// Which tunnel, if any, the analysed (inner) packet was carried in. The outermost one wins
/// when tunnels nest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Tunnel {
    Gre,
    Vxlan,
    IpInIp,
    GtpU,
}

impl Tunnel {
    pub fn name(self) -> &'static str {
        match self {
            Tunnel::Gre => "gre",
            Tunnel::Vxlan => "vxlan",
            Tunnel::IpInIp => "ipip",
            Tunnel::GtpU => "gtpu",
        }
    }
}

/// TCP header flags, as the low byte of the flags field (plus NS in bit 8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TcpFlags(pub u16);

impl TcpFlags {
    pub const FIN: u16 = 0x01;
    pub const SYN: u16 = 0x02;
    pub const RST: u16 = 0x04;
    pub const PSH: u16 = 0x08;
    pub const ACK: u16 = 0x10;
    pub const URG: u16 = 0x20;
    pub const ECE: u16 = 0x40;
    pub const CWR: u16 = 0x80;
    pub fn fin(self) -> bool {
        self.0 & Self::FIN != 0
    }
    pub fn syn(self) -> bool {
        self.0 & Self::SYN != 0
    }
    pub fn rst(self) -> bool {
        self.0 & Self::RST != 0
    }
    pub fn ack(self) -> bool {
        self.0 & Self::ACK != 0
    }
}

/// The TCP options a flow analyzer needs, parsed from the options area. Options cut by the
/// snaplen are simply absent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TcpOptions {
    /// RFC 9293 §3.7.1: Maximum Segment Size option (kind 2).
    pub mss: Option<u16>,
    /// RFC 7323 §2.2: window scale shift count (kind 3), as sent (not clamped).
    pub window_scale: Option<u8>,
    /// RFC 2018: SACK-permitted (kind 4).
    pub sack_permitted: bool,
    /// RFC 2018: SACK blocks (kind 5), left/right edges; only `sack_count` are valid.
    pub sack_blocks: [(u32, u32); 4],
    pub sack_count: u8,
    /// RFC 7323 §3: timestamps (kind 8), TSval and TSecr.
    pub timestamp: Option<(u32, u32)>,
}

/// The TCP header fields, copied out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TcpSummary {
    pub src_port: u16,
    pub dst_port: u16,
    pub seq: u32,
    pub ack: u32,
    pub flags: TcpFlags,
    /// The raw (unscaled) window field.
    pub window: u16,
    /// Header length in bytes (data offset × 4).
    pub header_len: u16,
    /// Payload length as the IP header declares it (not as captured): IP payload length minus
    /// the TCP header. Snaplen cuts do not shrink it.
    pub payload_len: u32,
    pub options: TcpOptions,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UdpSummary {
    pub src_port: u16,
    pub dst_port: u16,
    /// Payload length as the headers declare it (UDP length − 8, bounded by the IP length).
    pub payload_len: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Tcp(TcpSummary),
    Udp(UdpSummary),
    /// ICMP (v4 or v6, told apart by the network layer) with type and code.
    Icmp {
        icmp_type: u8,
        code: u8,
    },
    /// Any other IP protocol number, or a non-first fragment (whose transport header is absent).
    Other {
        protocol: u8,
    },
    /// The transport header was cut by the snaplen before its fixed part was complete. Also
    /// used when the fixed part is missing for another reason (frame too short, IP payload
    /// shorter than the header); `PacketSummary::problem` then says which.
    Truncated {
        protocol: u8,
    },
}

/// IP-layer facts about the (inner, if tunnelled) packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpSummary {
    pub src: IpAddr,
    pub dst: IpAddr,
    /// Total length as the header declares it (IPv4 total length; IPv6 payload length + 40).
    pub total_len: u32,
    /// IPv4 TTL or IPv6 hop limit.
    pub ttl: u8,
    /// IPv4 identification, or the fragment header's identification for IPv6 (0 otherwise).
    pub ident: u32,
    /// The final protocol number after IPv6 extension headers.
    pub protocol: u8,
    pub fragment: Fragment,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fragment {
    #[default]
    No,
    /// Offset 0 with more-fragments set: analysed like a whole packet.
    First,
    /// Offset > 0: counted, not analysed (no transport header).
    Later,
}

/// Why decoding stopped early. Small, `Copy`, never allocates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DecodeProblem {
    /// A header claims to be longer than what its own length fields allow, or a field holds an
    /// impossible value (IHL < 5, TCP data offset < 5, IP version mismatch, …).
    Malformed(Layer),
    /// The frame (captured bytes) ended inside a header although wire_len says the packet was
    /// longer: a snaplen cut. Normal; not an error.
    Truncated(Layer),
    /// The frame is shorter than its own headers claim and wire_len agrees: a broken packet.
    TooShort(Layer),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Layer {
    Link,
    Ipv4,
    Ipv6,
    Tcp,
    Udp,
    Icmp,
    Tunnel,
}

/// What the frame's network-layer payload was, when it was not IP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NonIp {
    /// An EtherType (or SLL protocol) that is not IP: ARP, LLDP, …
    EtherType(u16),
    /// An 802.3 frame whose 802.2 LLC header is not SNAP: its service access points as sent.
    Llc { dsap: u8, ssap: u8 },
    /// An 802.3 frame with SNAP for an organisation whose protocol ids are not EtherTypes.
    Snap { oui: u32, pid: u16 },
    /// A "raw 802.3" frame: Novell's IPX without an LLC header.
    NovellRaw,
    /// Another non-IP encapsulation.
    Other,
}

impl std::fmt::Display for NonIp {
    /// The run summary's name: `0x0806` for an EtherType; an LLC frame by its DSAP and SSAP as
    /// sent (tshark's `llc.dsap`, `llc.ssap`) and Wireshark's names of their service access
    /// points, `llc 0x42/0x42 (Spanning Tree BPDU)`; `snap 00000c/0x2000` for SNAP of another
    /// organisation; `raw 802.3 (IPX)`; `other`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use crate::ethernet::llc::sap_name;
        match *self {
            NonIp::EtherType(t) => write!(f, "0x{t:04x}"),
            NonIp::Llc { dsap, ssap } => {
                write!(f, "llc 0x{dsap:02x}/0x{ssap:02x}")?;
                match (sap_name(dsap), sap_name(ssap)) {
                    (Some(dn), Some(sn)) if dn == sn => write!(f, " ({dn})"),
                    (Some(dn), Some(sn)) => write!(f, " ({dn}/{sn})"),
                    (Some(n), None) | (None, Some(n)) => write!(f, " ({n})"),
                    (None, None) => Ok(()),
                }
            }
            NonIp::Snap { oui, pid } => write!(f, "snap {oui:06x}/0x{pid:04x}"),
            NonIp::NovellRaw => f.write_str("raw 802.3 (IPX)"),
            NonIp::Other => f.write_str("other"),
        }
    }
}

/// The decoded packet. `ip` is `None` for non-IP frames and for frames whose link layer could
/// not be read; `problem` then says why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketSummary {
    pub ip: Option<IpSummary>,
    pub transport: Option<Transport>,
    pub tunnel: Option<Tunnel>,
    /// Set when the frame was not IP at all.
    pub non_ip: Option<NonIp>,
    /// The first problem met, if any; layers read before it are still filled in.
    pub problem: Option<DecodeProblem>,
}

impl PacketSummary {
    pub const EMPTY: PacketSummary =
        PacketSummary { ip: None, transport: None, tunnel: None, non_ip: None, problem: None };
}
