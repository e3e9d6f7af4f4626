//! The link layer: from a frame (or a tunnel's inner frame) to its IP or ARP packet, using
//! sonde-wire's walks, so that exactly the packets sonde analyses are the ones rewritten.

use sonde_wire::ethernet::{self, ethertype, skip_to_ethertype};
use sonde_wire::link::LinkEnd;
use sonde_wire::{link_network, LinkType, NonIp, MAX_TUNNEL_DEPTH};

use crate::{FrameKind, Rewriter};

/// EtherType of RARP (RFC 903), which has ARP's layout.
const RARP: u16 = 0x8035;

/// ARP fields (RFC 826): hardware type, protocol type, lengths, operation; then the addresses.
mod arp_field {
    pub const PROTOCOL_TYPE: usize = 2;
    pub const HW_LEN: usize = 4;
    pub const PROTO_LEN: usize = 5;
    pub const ADDRESSES: usize = 8;
}

pub(crate) fn rewrite(rw: &mut Rewriter, link: LinkType, frame: &mut [u8], declared: usize) -> FrameKind {
    let net = match link_network(link, frame) {
        Ok(net) => net,
        Err(_) => return FrameKind::UnsupportedLink,
    };
    if let LinkEnd::NonIp(NonIp::EtherType(ty)) = net {
        if ty == ethertype::ARP || ty == RARP {
            return match arp_offset(link, frame) {
                Some(at) => arp(rw, sub(frame, at)),
                None => FrameKind::NonIp,
            };
        }
    }
    network(rw, net, frame, declared, 0)
}

/// Rewrites the network layer `net` found in `buf` (of which `declared` bytes exist).
pub(crate) fn network(rw: &mut Rewriter, net: LinkEnd, buf: &mut [u8], declared: usize, depth: u8) -> FrameKind {
    match net {
        LinkEnd::Ipv4(at) => rw.ipv4(sub(buf, at), declared.saturating_sub(at), depth, false),
        LinkEnd::Ipv6(at) => rw.ipv6(sub(buf, at), declared.saturating_sub(at), depth, false),
        LinkEnd::Ip(at) => rw.ip_any(sub(buf, at), declared.saturating_sub(at), depth, false),
        LinkEnd::Ethernet(at) => {
            let inner = sub(buf, at);
            match ethernet::walk(inner) {
                LinkEnd::NonIp(NonIp::EtherType(ty)) if ty == ethertype::ARP || ty == RARP => {
                    match arp_offset(LinkType::ETHERNET, inner) {
                        Some(o) => arp(rw, sub(inner, o)),
                        None => FrameKind::NonIp,
                    }
                }
                // The Ethernet walk never returns Ethernet: no unbounded recursion.
                LinkEnd::Ethernet(_) => FrameKind::UnreadableLink,
                net => network(rw, net, inner, declared.saturating_sub(at), depth),
            }
        }
        LinkEnd::NonIp(_) => FrameKind::NonIp,
        LinkEnd::Cut | LinkEnd::Malformed => FrameKind::UnreadableLink,
    }
}

/// Rewrites the packet inside a tunnel whose inner layer `net` starts in `buf`; counts it.
pub(crate) fn tunnel(rw: &mut Rewriter, net: LinkEnd, buf: &mut [u8], declared: usize, depth: u8) {
    if depth >= MAX_TUNNEL_DEPTH {
        // As the decoder: deeper tunnels are not entered.
        rw.stats.headers_unreadable += 1;
        return;
    }
    match network(rw, net, buf, declared, depth + 1) {
        FrameKind::Ip | FrameKind::Arp => rw.stats.tunnels += 1,
        FrameKind::UnreadableLink => rw.stats.headers_unreadable += 1,
        FrameKind::NonIp | FrameKind::UnsupportedLink => {}
    }
}

/// Where an ARP/RARP packet starts in a frame whose link walk said it is one.
fn arp_offset(link: LinkType, frame: &[u8]) -> Option<usize> {
    let (type_at, payload_at) = match link {
        LinkType::ETHERNET => (12, 14),
        LinkType::LINUX_SLL => (14, 16),
        LinkType::LINUX_SLL2 => (0, 20),
        LinkType::C_HDLC => (2, 4),
        _ => return None,
    };
    let ty = u16::from_be_bytes([*frame.get(type_at)?, *frame.get(type_at + 1)?]);
    match skip_to_ethertype(frame, payload_at, ty) {
        Ok((ty, at)) if ty == ethertype::ARP || ty == RARP => Some(at),
        _ => None,
    }
}

/// ARP/RARP carrying IPv4 (protocol type 0x0800, 4-byte addresses), any hardware type.
fn arp(rw: &mut Rewriter, buf: &mut [u8]) -> FrameKind {
    let (Some(ptype), Some(&hw_len), Some(&proto_len)) = (
        crate::checksum::field(buf, arp_field::PROTOCOL_TYPE),
        buf.get(arp_field::HW_LEN),
        buf.get(arp_field::PROTO_LEN),
    ) else {
        rw.stats.headers_unreadable += 1;
        return FrameKind::Arp;
    };
    if ptype != ethertype::IPV4 || proto_len != 4 {
        return FrameKind::NonIp;
    }
    let hw_len = usize::from(hw_len);
    let sender = arp_field::ADDRESSES + hw_len;
    let target = sender + 4 + hw_len;
    rw.map_v4(buf, sender);
    rw.map_v4(buf, target);
    if buf.len() < target + 4 {
        rw.stats.headers_unreadable += 1;
    }
    rw.stats.arp_packets += 1;
    FrameKind::Arp
}

/// `buf[at..]`, or an empty slice.
pub(crate) fn sub(buf: &mut [u8], at: usize) -> &mut [u8] {
    let at = at.min(buf.len());
    &mut buf[at..]
}
