//! ICMP (RFC 792) and ICMPv6 (RFC 4443): the common header view, and [`IcmpMessage`]: what a
//! message says beyond its type and code — an echo's identifier and sequence number, or the
//! transport ports of the packet an error message quotes. Reading a message never panics and
//! never allocates; a quote cut short or garbled is reported, not guessed at.

use std::net::IpAddr;

use crate::bytes::{be16, tail, u8_at};
use crate::ipv4::Ipv4Header;
use crate::ipv6::{walk_extensions, ExtEnd, Ipv6Header};
use crate::{Fragment, Transport, WireError};

/// IP protocol number of ICMP.
pub const PROTOCOL_V4: u8 = 1;
/// IPv6 next-header number of ICMPv6.
pub const PROTOCOL_V6: u8 = 58;

mod field {
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: usize = 2;
    pub const HEADER_LEN: usize = 4;
}

/// The type/code/checksum part shared by every ICMP and ICMPv6 message.
#[derive(Debug, Clone, Copy)]
pub struct IcmpHeader<'a> {
    buf: &'a [u8],
}

impl<'a> IcmpHeader<'a> {
    pub const LEN: usize = field::HEADER_LEN;
    // Where fields are, for code that rewrites them in place (sonde-rewrite).
    pub const CHECKSUM_OFFSET: usize = field::CHECKSUM;

    pub fn new_checked(buf: &'a [u8]) -> Result<Self, WireError> {
        if buf.len() < field::HEADER_LEN {
            return Err(WireError::Truncated);
        }
        Ok(IcmpHeader { buf })
    }

    pub fn icmp_type(&self) -> u8 {
        u8_at(self.buf, field::TYPE)
    }

    pub fn code(&self) -> u8 {
        u8_at(self.buf, field::CODE)
    }

    pub fn checksum(&self) -> u16 {
        be16(self.buf, field::CHECKSUM)
    }
}

/// What an ICMP or ICMPv6 message says that the flow layer uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IcmpMessage {
    /// RFC 792 (types 8/0), RFC 4443 §4.1–4.2 (128/129): echo request or reply.
    Echo { request: bool, ident: u16, seq: u16 },
    /// An error message (v4: destination unreachable 3, time exceeded 11, parameter problem 12;
    /// v6: destination unreachable 1, packet too big 2, time exceeded 3, parameter problem 4),
    /// with the TCP or UDP packet it quotes, or why that could not be read.
    Error(Result<Quote, QuoteProblem>),
    /// Any other message (the header's type and code are all there is to it here).
    Other,
}

/// The TCP or UDP packet an ICMP error quotes: it went from `src` to `dst`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quote {
    pub src: IpAddr,
    pub dst: IpAddr,
    /// 6 or 17.
    pub protocol: u8,
    pub src_port: u16,
    pub dst_port: u16,
}

/// Why an error message's quote gives no TCP or UDP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QuoteProblem {
    /// The captured bytes end before the quoted ports (a snaplen cut or a short quote).
    Truncated,
    /// The quoted header is not IP of the message's family, or its lengths are impossible.
    Malformed,
    /// The quoted packet is not TCP or UDP, or is a later fragment (no ports).
    NotTcpUdp,
}

/// Whether `icmp_type` is an error message that quotes the packet that caused it.
pub fn is_error(v6: bool, icmp_type: u8) -> bool {
    if v6 {
        matches!(icmp_type, 1..=4)
    } else {
        matches!(icmp_type, 3 | 11 | 12)
    }
}

/// Bytes before the quoted packet: type, code, checksum and 4 bytes (unused, MTU, pointer).
const QUOTE_AT: usize = 8;
/// Bytes before an echo's data: type, code, checksum, identifier, sequence number.
const ECHO_LEN: usize = 8;

impl IcmpMessage {
    /// Reads the message that starts at `bytes` (the captured ICMP header and what follows), of
    /// ICMPv6 when `v6`.
    pub fn parse(bytes: &[u8], v6: bool) -> IcmpMessage {
        let Ok(h) = IcmpHeader::new_checked(bytes) else { return IcmpMessage::Other };
        let t = h.icmp_type();
        let echo = if v6 { [128, 129] } else { [8, 0] };
        if t == echo[0] || t == echo[1] {
            if bytes.len() < ECHO_LEN {
                return IcmpMessage::Other;
            }
            return IcmpMessage::Echo { request: t == echo[0], ident: be16(bytes, 4), seq: be16(bytes, 6) };
        }
        if is_error(v6, t) {
            return IcmpMessage::Error(quote(tail(bytes, QUOTE_AT), v6));
        }
        IcmpMessage::Other
    }
}

/// Reads the IP header and the ports of the packet quoted in `bytes`.
fn quote(bytes: &[u8], v6: bool) -> Result<Quote, QuoteProblem> {
    let (src, dst, protocol, rest) = if v6 {
        let ip = Ipv6Header::new_checked(bytes).map_err(|_| QuoteProblem::Truncated)?;
        if ip.version() != 6 {
            return Err(QuoteProblem::Malformed);
        }
        let payload = tail(bytes, Ipv6Header::LEN);
        let walk = walk_extensions(ip.next_header(), payload, usize::from(ip.payload_len()));
        match walk.end {
            ExtEnd::Done => {}
            ExtEnd::Cut => return Err(QuoteProblem::Truncated),
            ExtEnd::Malformed => return Err(QuoteProblem::Malformed),
        }
        if walk.fragment == Fragment::Later {
            return Err(QuoteProblem::NotTcpUdp);
        }
        (IpAddr::V6(ip.src()), IpAddr::V6(ip.dst()), walk.protocol, tail(payload, walk.offset))
    } else {
        let ip = Ipv4Header::new_checked(bytes).map_err(|e| match e {
            WireError::Truncated => QuoteProblem::Truncated,
            WireError::Malformed => QuoteProblem::Malformed,
        })?;
        if ip.version() != 4 || ip.header_len() < Ipv4Header::LEN_MIN {
            return Err(QuoteProblem::Malformed);
        }
        if ip.frag_offset() > 0 {
            return Err(QuoteProblem::NotTcpUdp);
        }
        (IpAddr::V4(ip.src()), IpAddr::V4(ip.dst()), ip.protocol(), tail(bytes, ip.header_len()))
    };
    if !matches!(protocol, 6 | 17) {
        return Err(QuoteProblem::NotTcpUdp);
    }
    // RFC 792: the quote holds the IP header and at least 64 bits of its data: both ports.
    if rest.len() < 4 {
        return Err(QuoteProblem::Truncated);
    }
    Ok(Quote { src, dst, protocol, src_port: be16(rest, 0), dst_port: be16(rest, 2) })
}

pub(crate) fn summarize(bytes: &[u8], declared: usize, protocol: u8) -> (Transport, Option<WireError>) {
    match IcmpHeader::new_checked(bytes) {
        Ok(h) => {
            let err = (declared < field::HEADER_LEN).then_some(WireError::Malformed);
            (Transport::Icmp { icmp_type: h.icmp_type(), code: h.code() }, err)
        }
        Err(_) => {
            let err = if declared < field::HEADER_LEN { WireError::Malformed } else { WireError::Truncated };
            (Transport::Truncated { protocol }, Some(err))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::Frame;

    /// An ICMP error of `icmp_type` quoting `quoted` (IP header onwards).
    fn error(icmp_type: u8, quoted: &[u8]) -> Vec<u8> {
        let mut m = vec![icmp_type, 1, 0, 0, 0, 0, 0, 0];
        m.extend_from_slice(quoted);
        m
    }

    #[test]
    fn echoes_v4_and_v6() {
        let b = [8, 0, 0xf7, 0xff, 0x12, 0x34, 0xff, 0xfe, 1, 2];
        assert_eq!(IcmpMessage::parse(&b, false), IcmpMessage::Echo { request: true, ident: 0x1234, seq: 0xfffe });
        let b = [129, 0, 0, 0, 0, 7, 0, 9];
        assert_eq!(IcmpMessage::parse(&b, true), IcmpMessage::Echo { request: false, ident: 7, seq: 9 });
        // Type 0 is an echo reply only in ICMPv4; 129 only in ICMPv6.
        assert_eq!(IcmpMessage::parse(&[0, 0, 0, 0, 0, 7, 0, 9], true), IcmpMessage::Other);
        assert_eq!(IcmpMessage::parse(&b, false), IcmpMessage::Other);
        // Cut before the sequence number: nothing to match with.
        for cut in 0..ECHO_LEN {
            assert_eq!(IcmpMessage::parse(&b[..cut], true), IcmpMessage::Other);
        }
    }

    #[test]
    fn error_quoting_tcp_v4() {
        let mut f = Frame::new();
        f.ipv4(6, 20, [10, 0, 0, 1], [10, 0, 0, 2]).tcp(40000, 80, 1, 0x02, &[]);
        let m = error(3, f.bytes());
        let quote = Quote {
            src: "10.0.0.1".parse().unwrap(),
            dst: "10.0.0.2".parse().unwrap(),
            protocol: 6,
            src_port: 40000,
            dst_port: 80,
        };
        assert_eq!(IcmpMessage::parse(&m, false), IcmpMessage::Error(Ok(quote)));
        // RFC 792's minimum quote: the IP header and 8 bytes; the ports are the first 4.
        assert_eq!(IcmpMessage::parse(&m[..8 + 20 + 4], false), IcmpMessage::Error(Ok(quote)));
        // Every cut before the ports is told, never guessed at.
        for cut in 8..8 + 20 + 4 {
            assert_eq!(IcmpMessage::parse(&m[..cut], false), IcmpMessage::Error(Err(QuoteProblem::Truncated)), "{cut}");
        }
        // An ICMPv4 error quoting IPv6, or an IHL below 5: malformed.
        let mut bad = m.clone();
        bad[8] = 0x65;
        assert_eq!(IcmpMessage::parse(&bad, false), IcmpMessage::Error(Err(QuoteProblem::Malformed)));
        bad[8] = 0x44;
        assert_eq!(IcmpMessage::parse(&bad, false), IcmpMessage::Error(Err(QuoteProblem::Malformed)));
        // A later fragment has no ports; an ICMP packet quoted is not a flow's.
        let mut later = m.clone();
        later[8 + 6..8 + 8].copy_from_slice(&[0x00, 0x10]);
        assert_eq!(IcmpMessage::parse(&later, false), IcmpMessage::Error(Err(QuoteProblem::NotTcpUdp)));
        let mut icmp = m;
        icmp[8 + 9] = 1;
        assert_eq!(IcmpMessage::parse(&icmp, false), IcmpMessage::Error(Err(QuoteProblem::NotTcpUdp)));
    }

    #[test]
    fn error_quoting_udp_v6_through_extension_headers() {
        let mut f = Frame::new();
        // Hop-by-hop options (8 bytes), then UDP.
        f.ipv6(0, 16, 1, 2).push(&[17, 0, 0, 0, 0, 0, 0, 0]).udp(5353, 53, 0);
        for t in [1, 2, 3, 4] {
            let m = error(t, f.bytes());
            let IcmpMessage::Error(Ok(q)) = IcmpMessage::parse(&m, true) else { panic!("{t}") };
            assert_eq!((q.protocol, q.src_port, q.dst_port), (17, 5353, 53));
            assert!(q.src.is_ipv6() && q.dst.is_ipv6());
            // The same types are not errors in ICMPv4 (4 is source quench there).
            assert!(!matches!(IcmpMessage::parse(&m, false), IcmpMessage::Error(Ok(_))));
        }
        let m = error(1, f.bytes());
        for cut in 0..8 + 40 + 8 + 4 {
            let parsed = IcmpMessage::parse(&m[..cut], true);
            let expected = if cut < 8 {
                if cut < 4 {
                    IcmpMessage::Other
                } else {
                    IcmpMessage::Error(Err(QuoteProblem::Truncated))
                }
            } else {
                IcmpMessage::Error(Err(QuoteProblem::Truncated))
            };
            assert_eq!(parsed, expected, "{cut}");
        }
    }

    /// Garbage of every length gives a message, never a panic.
    #[test]
    fn garbage_never_panics() {
        let mut state = 0x1234_5678u32;
        for len in 0..200 {
            for _ in 0..50 {
                let bytes: Vec<u8> = (0..len)
                    .map(|_| {
                        state ^= state << 13;
                        state ^= state >> 17;
                        state ^= state << 5;
                        state as u8
                    })
                    .collect();
                for v6 in [false, true] {
                    let _ = IcmpMessage::parse(&bytes, v6);
                    let mut err = bytes.clone();
                    if let Some(b) = err.first_mut() {
                        *b = if v6 { 1 } else { 3 };
                    }
                    let _ = IcmpMessage::parse(&err, v6);
                }
            }
        }
    }

    #[test]
    fn echo_request() {
        let b = [8, 0, 0xf7, 0xff, 0, 1, 0, 1];
        let h = IcmpHeader::new_checked(&b).unwrap();
        assert_eq!((h.icmp_type(), h.code(), h.checksum()), (8, 0, 0xf7ff));
        assert_eq!(summarize(&b, 8, 1), (Transport::Icmp { icmp_type: 8, code: 0 }, None));
    }

    #[test]
    fn cuts() {
        let b = [3, 3, 0, 0];
        for cut in 0..4 {
            assert_eq!(summarize(&b[..cut], 36, 1), (Transport::Truncated { protocol: 1 }, Some(WireError::Truncated)));
        }
        assert_eq!(summarize(&b[..2], 2, 58), (Transport::Truncated { protocol: 58 }, Some(WireError::Malformed)));
    }
}
