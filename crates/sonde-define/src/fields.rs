//! The named fields of the language: where each is and what it implies about the packet.

use crate::pattern::{Anchor, Pattern};

/// Offsets into [`crate::Layers::meta`].
pub mod meta {
    /// IP version of the (inner) packet: 4, 6, or 0 when it is not IP (the decoder writes no
    /// other value). The other IP facts are 0 when it is not IP.
    pub const IP_VERSION: u32 = 0;
    /// The IP protocol: IPv4's protocol field, or IPv6's last next-header after extensions.
    pub const IP_PROTO: u32 = 1;
    /// IPv4 TTL or IPv6 hop limit.
    pub const TTL: u32 = 2;
    /// IPv4 type of service or IPv6 traffic class.
    pub const TOS: u32 = 3;
    /// TCP: the sequence number after this segment (seq + payload + SYN + FIN, 32 bits): what
    /// the ACK of exactly this segment carries.
    pub const TCP_NEXT: u32 = 4;
    /// The IP packet's length as its header declares it (32 bits): IPv4's total length, IPv6's
    /// payload length + 40.
    pub const IP_LEN: u32 = 8;
    /// 1 when the captured frame starts with an Ethernet header (link type 1), else 0: the
    /// link fields are read only then.
    pub const ETHERNET: u32 = 12;
    pub const LEN: usize = 13;
}

/// What a named field needs to be true of the packet before it can be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    Nothing,
    /// The packet is IP (either version): the decoder's facts are zeros otherwise, which a
    /// condition admitting 0 would match.
    Ip,
    IpVersion(u8),
    IpProto(u8),
    /// The frame starts with an Ethernet header (not Linux cooked, raw IP, …).
    Ethernet,
    /// An Ethernet frame with this type at link offset 12 (an 802.1Q tag: 0x8100).
    EthType(u16),
}

impl Needs {
    /// The patterns that check it.
    pub fn patterns(self) -> impl Iterator<Item = Pattern> {
        let ethernet = matches!(self, Needs::EthType(_)).then(|| Needs::Ethernet.pattern()).flatten();
        ethernet.into_iter().chain(self.pattern())
    }

    /// The pattern that checks it (an Ethernet type also needs [`Needs::Ethernet`]: see
    /// [`Needs::patterns`]).
    pub fn pattern(self) -> Option<Pattern> {
        let byte = |at: u32, v: u8| Pattern {
            anchor: Anchor::Meta,
            offset_bits: at * 8,
            bits: 8,
            mask: 0xff,
            lo: u128::from(v),
            hi: u128::from(v),
        };
        match self {
            Needs::Nothing => None,
            Needs::Ip => Some(Pattern { hi: 6, ..byte(meta::IP_VERSION, 4) }),
            Needs::IpVersion(v) => Some(byte(meta::IP_VERSION, v)),
            Needs::IpProto(p) => Some(byte(meta::IP_PROTO, p)),
            Needs::Ethernet => Some(byte(meta::ETHERNET, 1)),
            Needs::EthType(t) => Some(Pattern {
                anchor: Anchor::Link,
                offset_bits: 96,
                bits: 16,
                mask: 0xffff,
                lo: u128::from(t),
                hi: u128::from(t),
            }),
        }
    }
}

/// A named field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    pub name: &'static str,
    pub anchor: Anchor,
    pub offset_bits: u32,
    pub bits: u32,
    pub needs: Needs,
    /// An address field: values may be written as addresses and prefixes.
    pub address: bool,
}

const fn field(name: &'static str, anchor: Anchor, offset_bits: u32, bits: u32, needs: Needs) -> Field {
    Field { name, anchor, offset_bits, bits, needs, address: false }
}

const fn addr(name: &'static str, offset_bits: u32, bits: u32, version: u8) -> Field {
    Field { name, anchor: Anchor::Net, offset_bits, bits, needs: Needs::IpVersion(version), address: true }
}

const TCP: Needs = Needs::IpProto(6);
const VLAN: Needs = Needs::EthType(0x8100);
const IP: Needs = Needs::Ip;
const UDP: Needs = Needs::IpProto(17);

/// Every named field. `ip.src` and `ip.dst` are not here: they stand for the IPv4 or the IPv6
/// field by the family of the address they are compared with (see [`by_name`]).
pub const FIELDS: &[Field] = &[
    field("eth.dst", Anchor::Link, 0, 48, Needs::Ethernet),
    field("eth.src", Anchor::Link, 48, 48, Needs::Ethernet),
    field("eth.type", Anchor::Link, 96, 16, Needs::Ethernet),
    // The first (outer) 802.1Q tag, right after the addresses.
    field("vlan.pcp", Anchor::Link, 112, 3, VLAN),
    field("vlan.id", Anchor::Link, 116, 12, VLAN),
    field("vlan.type", Anchor::Link, 128, 16, VLAN),
    field("ip.version", Anchor::Meta, meta::IP_VERSION * 8, 8, Needs::Nothing),
    field("ip.proto", Anchor::Meta, meta::IP_PROTO * 8, 8, IP),
    field("ip.ttl", Anchor::Meta, meta::TTL * 8, 8, IP),
    field("ip.hlim", Anchor::Meta, meta::TTL * 8, 8, IP),
    field("ip.tos", Anchor::Meta, meta::TOS * 8, 8, IP),
    field("ip.dscp", Anchor::Meta, meta::TOS * 8, 6, IP),
    field("ip.len", Anchor::Meta, meta::IP_LEN * 8, 32, IP),
    field("ip4.len", Anchor::Net, 16, 16, Needs::IpVersion(4)),
    field("ip4.id", Anchor::Net, 32, 16, Needs::IpVersion(4)),
    addr("ip4.src", 96, 32, 4),
    addr("ip4.dst", 128, 32, 4),
    field("ip6.flow", Anchor::Net, 12, 20, Needs::IpVersion(6)),
    field("ip6.plen", Anchor::Net, 32, 16, Needs::IpVersion(6)),
    addr("ip6.src", 64, 128, 6),
    addr("ip6.dst", 192, 128, 6),
    field("tcp.sport", Anchor::Transport, 0, 16, TCP),
    field("tcp.dport", Anchor::Transport, 16, 16, TCP),
    field("tcp.seq", Anchor::Transport, 32, 32, TCP),
    field("tcp.ack", Anchor::Transport, 64, 32, TCP),
    field("tcp.nxt", Anchor::Meta, meta::TCP_NEXT * 8, 32, TCP),
    field("tcp.hlen", Anchor::Transport, 96, 4, TCP),
    field("tcp.flags", Anchor::Transport, 104, 8, TCP),
    field("tcp.win", Anchor::Transport, 112, 16, TCP),
    field("udp.sport", Anchor::Transport, 0, 16, UDP),
    field("udp.dport", Anchor::Transport, 16, 16, UDP),
    field("udp.len", Anchor::Transport, 32, 16, UDP),
];

/// The named field `name`; `family` (4 or 6) resolves `ip.src` and `ip.dst`.
pub fn by_name(name: &str, family: Option<u8>) -> Option<Field> {
    let name = match (name, family) {
        ("ip.src", Some(4)) => "ip4.src",
        ("ip.dst", Some(4)) => "ip4.dst",
        ("ip.src", Some(6)) => "ip6.src",
        ("ip.dst", Some(6)) => "ip6.dst",
        (n, _) => n,
    };
    FIELDS.iter().find(|f| f.name == name).copied()
}
