//! The transport layer: TCP, UDP, ICMP, ICMPv6 and GRE checksums, what ICMP messages carry
//! (quoted packets, redirect and neighbour-discovery addresses) and the tunnels' inner packets.

use sonde_wire::icmp::{self, IcmpHeader};
use sonde_wire::link::LinkEnd;
use sonde_wire::tcp::{self, TcpHeader};
use sonde_wire::tunnel::{self, walk_gre, GreHeader};
use sonde_wire::udp::{self, UdpHeader};

use crate::checksum::{self, field, set_field, sum};
use crate::frame::{self, sub};
use crate::ip::Pseudo;
use crate::Rewriter;

/// An IP packet's payload as its header describes it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Segment {
    pub(crate) protocol: u8,
    /// Bytes of payload the IP header declares (the captured ones may be fewer).
    pub(crate) declared: usize,
    pub(crate) pseudo: Pseudo,
    /// Everything the transport checksum covers is captured (not cut, not a fragment).
    pub(crate) whole: bool,
    /// Inside an ICMP error: checksums only updated, nothing nested followed.
    pub(crate) quoted: bool,
    pub(crate) depth: u8,
}

/// One checksum field and what it covers.
#[derive(Debug, Clone, Copy)]
struct Check {
    /// Offset of the field in the segment.
    at: usize,
    /// Bytes covered (from the segment's start).
    len: usize,
    /// The pseudo-header's protocol, if the checksum has one.
    pseudo: Option<u8>,
    /// UDP: 0 means "no checksum" (RFC 768) and a computed 0 is sent as 0xffff.
    udp: bool,
    /// `len` is what the headers say and all of it is captured.
    whole: bool,
}

/// Where an ICMP error's quote starts: after type, code, checksum and four bytes (unused, or a
/// pointer, an MTU, a gateway).
const QUOTE_OFFSET: usize = 8;
/// ICMPv4 types quoting the datagram that caused them (RFC 792, RFC 1812 §4.3.2.3).
const ICMP4_ERRORS: [u8; 5] = [3, 4, 5, 11, 12];
const ICMP4_REDIRECT: u8 = 5;
/// ICMPv6 errors (RFC 4443 §3): destination unreachable, packet too big, time exceeded,
/// parameter problem.
const ICMP6_ERRORS: std::ops::RangeInclusive<u8> = 1..=4;
/// Neighbour solicitation and advertisement, redirect (RFC 4861 §4.3–4.5).
const ICMP6_NS: u8 = 135;
const ICMP6_NA: u8 = 136;
const ICMP6_REDIRECT: u8 = 137;
/// Their target address, and a redirect's destination.
const ND_TARGET: usize = 8;
const ND_REDIRECT_DESTINATION: usize = 24;
/// RFC 792: a redirect's gateway, in place of the unused word.
const REDIRECT_GATEWAY: usize = 4;

impl Rewriter {
    pub(crate) fn transport(&mut self, buf: &mut [u8], seg: Segment) {
        let full = |at, pseudo, udp| Check { at, len: seg.declared, pseudo, udp, whole: seg.whole };
        match seg.protocol {
            tcp::PROTOCOL => {
                self.checksum(buf, &seg, full(TcpHeader::CHECKSUM_OFFSET, Some(tcp::PROTOCOL), false), None)
            }
            udp::PROTOCOL => self.udp(buf, &seg),
            icmp::PROTOCOL_V4 if !seg.pseudo.v6 => {
                let old_body = (!seg.quoted).then(|| self.icmp_body(buf, &seg));
                self.checksum(buf, &seg, full(IcmpHeader::CHECKSUM_OFFSET, None, false), old_body.flatten());
            }
            icmp::PROTOCOL_V6 if seg.pseudo.v6 => {
                let old_body = (!seg.quoted).then(|| self.icmp_body(buf, &seg));
                self.checksum(
                    buf,
                    &seg,
                    full(IcmpHeader::CHECKSUM_OFFSET, Some(icmp::PROTOCOL_V6), false),
                    old_body.flatten(),
                );
            }
            _ if seg.quoted => {}
            tunnel::IPIP_PROTOCOL => frame::tunnel(self, LinkEnd::Ipv4(0), buf, seg.declared, seg.depth),
            tunnel::IPV6_IN_IP_PROTOCOL => frame::tunnel(self, LinkEnd::Ipv6(0), buf, seg.declared, seg.depth),
            tunnel::GRE_PROTOCOL => {
                // RFC 2784 §2.5: the checksum (version 0, C bit) covers the GRE header and payload.
                let checked = GreHeader::new_checked(buf).is_ok_and(|g| g.version() == 0 && g.has_checksum());
                let old_body = checked.then(|| sum(buf));
                let net = walk_gre(buf);
                frame::tunnel(self, net, buf, seg.declared, seg.depth);
                if checked {
                    self.checksum(buf, &seg, full(GreHeader::CHECKSUM_OFFSET, None, false), old_body);
                }
            }
            _ => {}
        }
    }

    fn udp(&mut self, buf: &mut [u8], seg: &Segment) {
        let Some(udp_len) = field(buf, UdpHeader::LENGTH_OFFSET) else {
            self.stats.checksums_not_captured += 1;
            self.stats.headers_unreadable += 1;
            return;
        };
        // The pseudo-header and the checksum use the UDP length; 0 is a jumbogram or GSO.
        let (len, sane) = match usize::from(udp_len) {
            0 => (seg.declared, true),
            n if (UdpHeader::LEN..=seg.declared).contains(&n) => (n, true),
            _ => (seg.declared, false),
        };
        let mut old_body = None;
        if !seg.quoted && sane && buf.len() >= UdpHeader::LEN {
            let src_port = field(buf, UdpHeader::SRC_PORT_OFFSET).unwrap_or(0);
            let dst_port = field(buf, UdpHeader::DST_PORT_OFFSET).unwrap_or(0);
            let inner = &buf[UdpHeader::LEN..len.min(buf.len())];
            let net = tunnel::udp_tunnel(src_port, dst_port).map(|t| tunnel::walk_udp_tunnel(t, inner));
            if let Some(net) = net {
                old_body = Some(sum(&buf[..len.min(buf.len())]));
                let end = len.min(buf.len());
                let inner = &mut buf[UdpHeader::LEN..end];
                frame::tunnel(self, net, inner, len - UdpHeader::LEN, seg.depth);
            }
        }
        let check = Check {
            at: UdpHeader::CHECKSUM_OFFSET,
            len,
            pseudo: Some(udp::PROTOCOL),
            udp: true,
            whole: seg.whole && sane,
        };
        self.checksum(buf, seg, check, old_body);
    }

    /// Rewrites the addresses an ICMP message carries; returns the sum of the message before,
    /// for its checksum.
    fn icmp_body(&mut self, buf: &mut [u8], seg: &Segment) -> Option<u16> {
        let &icmp_type = buf.first()?;
        let old_body = sum(&buf[..seg.declared.min(buf.len())]);
        let quote_words = |at: usize, unit: usize| buf.get(at).map_or(0, |&n| usize::from(n) * unit);
        // (Read before any rewrite: the closure borrows `buf`.)
        let (len4, len6) = (quote_words(5, 4), quote_words(4, 8));
        let quote_len = if seg.pseudo.v6 {
            match icmp_type {
                ICMP6_NS | ICMP6_NA => {
                    self.map_v6(buf, ND_TARGET);
                    return Some(old_body);
                }
                ICMP6_REDIRECT => {
                    self.map_v6(buf, ND_TARGET);
                    self.map_v6(buf, ND_REDIRECT_DESTINATION);
                    return Some(old_body);
                }
                // RFC 4884 §4.2: a length (in 64-bit words) when extensions follow the quote.
                1 | 3 => len6,
                t if ICMP6_ERRORS.contains(&t) => 0,
                _ => return None,
            }
        } else {
            if icmp_type == ICMP4_REDIRECT {
                self.map_v4(buf, REDIRECT_GATEWAY);
            }
            match icmp_type {
                // RFC 4884 §4.1: a length (in 32-bit words) when extensions follow the quote.
                3 | 11 | 12 => len4,
                t if ICMP4_ERRORS.contains(&t) => 0,
                _ => return None,
            }
        };
        let declared = seg.declared.saturating_sub(QUOTE_OFFSET);
        let declared = if quote_len > 0 { quote_len.min(declared) } else { declared };
        let quote = sub(buf, QUOTE_OFFSET);
        let end = declared.min(quote.len());
        if self.ip_any(&mut quote[..end], declared, seg.depth, true) == crate::FrameKind::Ip {
            self.stats.icmp_quotes += 1;
        }
        Some(old_body)
    }

    /// Recomputes or updates one checksum after the addresses (and anything nested, whose sum
    /// before was `old_body`) changed.
    fn checksum(&mut self, buf: &mut [u8], seg: &Segment, check: Check, old_body: Option<u16>) {
        let end = check.len.min(buf.len());
        let data = &mut buf[..end];
        let Some(old_ck) = field(data, check.at) else {
            self.stats.checksums_not_captured += 1;
            return;
        };
        if check.udp && old_ck == 0 {
            return;
        }
        let tail = check.pseudo.map(|p| checksum::pseudo_tail(seg.pseudo.v6, p, check.len));
        if check.whole && end == check.len {
            set_field(data, check.at, 0);
            let body = sum(data);
            let (p_old, p_new) = match tail {
                Some(t) => (checksum::add(seg.pseudo.old, t), checksum::add(seg.pseudo.new, t)),
                None => (0, 0),
            };
            let mut new_ck = !checksum::add(p_new, body);
            if check.udp && new_ck == 0 {
                new_ck = 0xffff;
            }
            set_field(data, check.at, new_ck);
            // The body is unchanged but for nested rewrites, whose old sum the caller took.
            let old_sum = old_body.unwrap_or_else(|| checksum::add(body, old_ck));
            self.count_recomputed(checksum::add(p_old, old_sum) == 0xffff);
            return;
        }
        if tail.is_none() && old_body.is_none() {
            return;
        }
        let mut new_ck = old_ck;
        if tail.is_some() {
            new_ck = checksum::update(new_ck, seg.pseudo.old, seg.pseudo.new);
        }
        if let Some(old) = old_body {
            new_ck = checksum::update(new_ck, old, sum(data));
        }
        if check.udp && new_ck == 0 {
            new_ck = 0xffff;
        }
        set_field(data, check.at, new_ck);
        self.stats.checksums_adjusted += 1;
    }

    pub(crate) fn count_recomputed(&mut self, was_valid: bool) {
        self.stats.checksums_recomputed += 1;
        if !was_valid {
            self.stats.checksums_fixed += 1;
        }
    }
}
