//! Packet decoding (sonde-wire): every supported link type, tunnels, IP, TCP/UDP/ICMP.
//!
//! Input: byte 0 picks the link type, bytes 1–2 how much longer the packet was on the wire
//! than captured (0: not cut), the rest is the frame. Asserts the summary's invariants
//! (transport only with IP; declared lengths consistent; `Truncated` only on a snaplen cut);
//! that `decode_into` over a dirty summary and `decode_with_offsets` give the same summary as
//! `decode`, with offsets inside the frame and in layer order; and that a snaplen cut of the
//! same packet never changes the IP length the full frame reported.

use sonde_wire::{decode, decode_into, decode_with_offsets, DecodeProblem, LinkType, PacketSummary, Transport};

const LINKS: [LinkType; 14] = [
    LinkType::NULL,
    LinkType::ETHERNET,
    LinkType::RAW,
    LinkType::RAW_OPENBSD,
    LinkType::RAW_14,
    LinkType::LOOP,
    LinkType::LINUX_SLL,
    LinkType::IPV4,
    LinkType::IPV6,
    LinkType::LINUX_SLL2,
    LinkType::PPP,
    LinkType::PPP_HDLC,
    LinkType::C_HDLC,
    // An unsupported one: must be refused, not decoded.
    LinkType(147),
];

/// The summary of `frame` and where its (innermost) IP header starts.
fn check(link: LinkType, frame: &[u8], wire_len: u32) -> Option<(PacketSummary, Option<u32>)> {
    let Ok(s) = decode(link, frame, wire_len) else {
        assert_eq!(link, LinkType(147), "a supported link type refused");
        return None;
    };
    if s.non_ip.is_some() {
        assert!(s.ip.is_none() && s.transport.is_none() && s.problem.is_none(), "{s:?}");
    }
    if s.transport.is_some() || s.tunnel.is_some() {
        assert!(s.ip.is_some(), "{s:?}");
    }
    if let Some(ip) = s.ip {
        match s.transport {
            Some(Transport::Tcp(t)) => {
                assert!(t.payload_len <= ip.total_len, "{s:?}");
                if s.problem.is_none() {
                    assert!(t.payload_len + u32::from(t.header_len) <= ip.total_len, "{s:?}");
                    assert!(t.header_len >= 20 && t.header_len <= 60, "{s:?}");
                }
                assert!(t.options.sack_count <= 4, "{s:?}");
            }
            Some(Transport::Udp(u)) => assert!(u.payload_len + 8 <= ip.total_len.max(8), "{s:?}"),
            _ => {}
        }
    }
    if matches!(s.problem, Some(DecodeProblem::Truncated(_))) {
        assert!(frame.len() < wire_len as usize, "truncated without a snaplen cut: {s:?}");
    }

    // The other entry points agree.
    let mut dirty = PacketSummary::EMPTY;
    decode_into(LinkType::RAW, &[0x45, 0, 0, 40, 0, 0, 0, 0, 64, 6], 40, &mut dirty).unwrap();
    decode_into(link, frame, wire_len, &mut dirty).unwrap();
    assert_eq!(dirty, s, "decode_into over a used summary");
    let mut with = PacketSummary::EMPTY;
    let off = decode_with_offsets(link, frame, wire_len, &mut with).unwrap();
    assert_eq!(with, s, "decode_with_offsets");
    let len = frame.len() as u32;
    for at in [off.network, off.transport, off.payload].into_iter().flatten() {
        assert!(at <= len, "offset {at} past the frame ({len}): {off:?}");
    }
    if let (Some(n), Some(t)) = (off.network, off.transport) {
        assert!(n < t, "{off:?}");
    }
    if let (Some(t), Some(p)) = (off.transport, off.payload) {
        assert!(t < p, "{off:?}");
    }
    if off.transport.is_some() || off.network.is_some() {
        assert!(s.ip.is_some(), "offsets without IP: {off:?} {s:?}");
    }
    Some((s, off.network))
}

fn main() {
    afl::fuzz!(|data: &[u8]| {
        let [sel, a, b, frame @ ..] = data else { return };
        let link = LINKS[usize::from(*sel) % LINKS.len()];
        let extra = u32::from(u16::from_be_bytes([*a, *b]));
        let wire_len = frame.len() as u32 + extra;
        let Some((full, full_at)) = check(link, frame, wire_len) else { return };
        // Cut the frame where the selector's high bits say, as a short snaplen would.
        if !frame.is_empty() {
            let cut = usize::from(*sel) * frame.len() / 256;
            let (s, at) = check(link, &frame[..cut], wire_len).expect("same link type");
            // The same IP header: at the same place (nested tunnels can repeat a header's
            // addresses and identifier further in, which the cut may not reach).
            if let (Some(a), Some(b)) = (s.ip, full.ip) {
                if at == full_at && s.tunnel == full.tunnel && a.src == b.src && a.dst == b.dst && a.ident == b.ident {
                    assert_eq!(a.total_len, b.total_len, "a snaplen cut at {cut} changed the IP length");
                }
            }
        }
    });
}
