//! Small link layers: BSD NULL/LOOP, PPP (plain and HDLC-framed), Cisco HDLC, and the result
//! type every link walk returns.

use crate::bytes::{be16, u8_at};
use crate::{NonIp, WireError};

/// Where the link layer ends and what follows it, as a link-layer walk found it: the offset of
/// the network header (or of an inner Ethernet frame), or why there is none. (Not a direction:
/// that is `sonde_types::Net`.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkEnd {
    /// An IPv4 header at this offset.
    Ipv4(usize),
    /// An IPv6 header at this offset.
    Ipv6(usize),
    /// An IP header of either version at this offset: the first nibble decides.
    Ip(usize),
    /// An Ethernet frame at this offset (GRE transparent bridging, ERSPAN, VXLAN).
    Ethernet(usize),
    /// Not IP.
    NonIp(NonIp),
    /// The buffer ended inside a link-layer header.
    Cut,
    /// A link-layer header holds an impossible value.
    Malformed,
}

impl LinkEnd {
    /// The same result with its offset moved by `by` (for walks over a sub-slice).
    pub fn shift(self, by: usize) -> LinkEnd {
        match self {
            LinkEnd::Ipv4(o) => LinkEnd::Ipv4(o + by),
            LinkEnd::Ipv6(o) => LinkEnd::Ipv6(o + by),
            LinkEnd::Ip(o) => LinkEnd::Ip(o + by),
            LinkEnd::Ethernet(o) => LinkEnd::Ethernet(o + by),
            other => other,
        }
    }
}

/// PPP protocol numbers the decoder follows.
pub mod ppp_protocol {
    pub const IPV4: u16 = 0x0021;
    pub const IPV6: u16 = 0x0057;
    pub const MPLS_UNICAST: u16 = 0x0281;
    pub const MPLS_MULTICAST: u16 = 0x0283;
}

/// BSD address families seen in NULL/LOOP headers.
pub mod family {
    pub const INET: u32 = 2;
    /// NetBSD, OpenBSD (and others) AF_INET6.
    pub const INET6_BSD: u32 = 24;
    /// FreeBSD, DragonFly BSD.
    pub const INET6_FREEBSD: u32 = 28;
    /// macOS / Darwin.
    pub const INET6_DARWIN: u32 = 30;
}

/// The 4-byte BSD NULL / LOOP header: an address family.
#[derive(Debug, Clone, Copy)]
pub struct NullHeader<'a> {
    buf: &'a [u8],
}

impl<'a> NullHeader<'a> {
    pub const LEN: usize = 4;

    pub fn new_unchecked(buf: &'a [u8]) -> Self {
        NullHeader { buf }
    }

    pub fn new_checked(buf: &'a [u8]) -> Result<Self, WireError> {
        if buf.len() < Self::LEN {
            return Err(WireError::Truncated);
        }
        Ok(Self::new_unchecked(buf))
    }

    fn raw(&self) -> [u8; 4] {
        crate::bytes::array(self.buf, 0)
    }

    /// The family read in network byte order (LOOP).
    pub fn family_be(&self) -> u32 {
        u32::from_be_bytes(self.raw())
    }

    /// The family read in little-endian order (NULL written by a little-endian host).
    pub fn family_le(&self) -> u32 {
        u32::from_le_bytes(self.raw())
    }
}

/// What a BSD address family means to the decoder.
pub fn family_net(family: u32, offset: usize) -> Option<LinkEnd> {
    match family {
        family::INET => Some(LinkEnd::Ipv4(offset)),
        family::INET6_BSD | family::INET6_FREEBSD | family::INET6_DARWIN => Some(LinkEnd::Ipv6(offset)),
        _ => None,
    }
}

/// NULL: the family is in the capturing host's byte order, so both orders are tried.
pub fn walk_null(buf: &[u8]) -> LinkEnd {
    let Ok(h) = NullHeader::new_checked(buf) else {
        return LinkEnd::Cut;
    };
    family_net(h.family_le(), NullHeader::LEN)
        .or_else(|| family_net(h.family_be(), NullHeader::LEN))
        .unwrap_or(LinkEnd::NonIp(NonIp::Other))
}

/// LOOP: the family is in network byte order.
pub fn walk_loop(buf: &[u8]) -> LinkEnd {
    let Ok(h) = NullHeader::new_checked(buf) else {
        return LinkEnd::Cut;
    };
    family_net(h.family_be(), NullHeader::LEN).unwrap_or(LinkEnd::NonIp(NonIp::Other))
}

/// The network layer after a PPP protocol field that ends at `offset`.
pub fn ppp_net(protocol: u16, buf: &[u8], offset: usize) -> LinkEnd {
    match protocol {
        ppp_protocol::IPV4 => LinkEnd::Ipv4(offset),
        ppp_protocol::IPV6 => LinkEnd::Ipv6(offset),
        ppp_protocol::MPLS_UNICAST | ppp_protocol::MPLS_MULTICAST => crate::ethernet::walk_mpls(buf, offset),
        _ => LinkEnd::NonIp(NonIp::Other),
    }
}

/// PPP (LINKTYPE_PPP and LINKTYPE_PPP_HDLC): optional 0xFF 0x03 address/control, then a
/// protocol field of two bytes, or one when protocol-field compression left an odd first byte.
pub fn walk_ppp(buf: &[u8]) -> LinkEnd {
    let mut off = 0;
    if u8_at(buf, 0) == 0xff && buf.len() >= 2 {
        if u8_at(buf, 1) != 0x03 {
            return LinkEnd::Malformed;
        }
        off = 2;
    }
    if buf.len() <= off {
        return LinkEnd::Cut;
    }
    let first = u8_at(buf, off);
    if first & 1 == 1 {
        // Compressed (one-byte) protocol field.
        return ppp_net(u16::from(first), buf, off + 1);
    }
    if buf.len() < off + 2 {
        return LinkEnd::Cut;
    }
    ppp_net(be16(buf, off), buf, off + 2)
}

/// Cisco HDLC: address (0x0F unicast, 0x8F broadcast), control 0, then an EtherType.
pub fn walk_chdlc(buf: &[u8]) -> LinkEnd {
    if buf.len() < 4 {
        return LinkEnd::Cut;
    }
    crate::ethernet::walk_ethertype(buf, 4, be16(buf, 2))
}

/// Raw IP: the version nibble decides.
pub fn walk_raw(buf: &[u8]) -> LinkEnd {
    match buf.first() {
        None => LinkEnd::Cut,
        Some(b) if b >> 4 == 4 || b >> 4 == 6 => LinkEnd::Ip(0),
        Some(_) => LinkEnd::Malformed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn null_accepts_both_byte_orders() {
        assert_eq!(walk_null(&[2, 0, 0, 0, 0x45]), LinkEnd::Ipv4(4));
        assert_eq!(walk_null(&[0, 0, 0, 2, 0x45]), LinkEnd::Ipv4(4));
        assert_eq!(walk_null(&[24, 0, 0, 0]), LinkEnd::Ipv6(4));
        assert_eq!(walk_null(&[0, 0, 0, 28]), LinkEnd::Ipv6(4));
        assert_eq!(walk_null(&[30, 0, 0, 0]), LinkEnd::Ipv6(4));
        assert_eq!(walk_null(&[7, 0, 0, 0]), LinkEnd::NonIp(NonIp::Other));
        assert_eq!(walk_null(&[2, 0, 0]), LinkEnd::Cut);
        assert_eq!(walk_null(&[]), LinkEnd::Cut);
    }

    #[test]
    fn loop_is_network_order_only() {
        assert_eq!(walk_loop(&[0, 0, 0, 2]), LinkEnd::Ipv4(4));
        assert_eq!(walk_loop(&[0, 0, 0, 30]), LinkEnd::Ipv6(4));
        assert_eq!(walk_loop(&[2, 0, 0, 0]), LinkEnd::NonIp(NonIp::Other));
        assert_eq!(walk_loop(&[0, 0]), LinkEnd::Cut);
    }

    #[test]
    fn null_header_fields() {
        let h = NullHeader::new_checked(&[0x1e, 0, 0, 0]).unwrap();
        assert_eq!(h.family_le(), 30);
        assert_eq!(h.family_be(), 0x1e00_0000);
        assert_eq!(NullHeader::new_checked(&[1]).unwrap_err(), WireError::Truncated);
    }

    #[test]
    fn ppp_variants() {
        assert_eq!(walk_ppp(&[0xff, 0x03, 0x00, 0x21, 0x45]), LinkEnd::Ipv4(4));
        assert_eq!(walk_ppp(&[0xff, 0x03, 0x00, 0x57]), LinkEnd::Ipv6(4));
        assert_eq!(walk_ppp(&[0x00, 0x21]), LinkEnd::Ipv4(2));
        assert_eq!(walk_ppp(&[0x21, 0x45]), LinkEnd::Ipv4(1));
        assert_eq!(walk_ppp(&[0x57]), LinkEnd::Ipv6(1));
        assert_eq!(walk_ppp(&[0xff, 0x03, 0xc0, 0x21]), LinkEnd::NonIp(NonIp::Other));
        assert_eq!(walk_ppp(&[0xff, 0x05, 0x00, 0x21]), LinkEnd::Malformed);
        assert_eq!(walk_ppp(&[0xff, 0x03, 0x00]), LinkEnd::Cut);
        assert_eq!(walk_ppp(&[0xff, 0x03]), LinkEnd::Cut);
        assert_eq!(walk_ppp(&[]), LinkEnd::Cut);
        // MPLS over PPP: one label, bottom of stack, then IPv4.
        assert_eq!(walk_ppp(&[0xff, 0x03, 0x02, 0x81, 0, 0x01, 0x01, 0x40, 0x45]), LinkEnd::Ipv4(8));
    }

    #[test]
    fn chdlc() {
        assert_eq!(walk_chdlc(&[0x0f, 0x00, 0x08, 0x00, 0x45]), LinkEnd::Ipv4(4));
        assert_eq!(walk_chdlc(&[0x8f, 0x00, 0x86, 0xdd]), LinkEnd::Ipv6(4));
        assert_eq!(walk_chdlc(&[0x8f, 0x00, 0x80, 0x35]), LinkEnd::NonIp(NonIp::EtherType(0x8035)));
        assert_eq!(walk_chdlc(&[0x0f, 0x00, 0x08]), LinkEnd::Cut);
    }

    #[test]
    fn raw() {
        assert_eq!(walk_raw(&[0x45]), LinkEnd::Ip(0));
        assert_eq!(walk_raw(&[0x60]), LinkEnd::Ip(0));
        assert_eq!(walk_raw(&[0x55]), LinkEnd::Malformed);
        assert_eq!(walk_raw(&[]), LinkEnd::Cut);
    }
}
