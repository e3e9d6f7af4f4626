//! Small link layers: BSD NULL/LOOP, PPP (plain and HDLC-framed), Cisco HDLC, and the result
//! type every link walk returns.

use crate::bytes::{be16, u8_at};
use crate::{NonIp, WireError};

/// Where the network layer starts, as a link-layer walk found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Net {
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

impl Net {
    /// The same result with its offset moved by `by` (for walks over a sub-slice).
    pub fn shift(self, by: usize) -> Net {
        match self {
            Net::Ipv4(o) => Net::Ipv4(o + by),
            Net::Ipv6(o) => Net::Ipv6(o + by),
            Net::Ip(o) => Net::Ip(o + by),
            Net::Ethernet(o) => Net::Ethernet(o + by),
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
pub fn family_net(family: u32, offset: usize) -> Option<Net> {
    match family {
        family::INET => Some(Net::Ipv4(offset)),
        family::INET6_BSD | family::INET6_FREEBSD | family::INET6_DARWIN => Some(Net::Ipv6(offset)),
        _ => None,
    }
}

/// NULL: the family is in the capturing host's byte order, so both orders are tried.
pub fn walk_null(buf: &[u8]) -> Net {
    let Ok(h) = NullHeader::new_checked(buf) else {
        return Net::Cut;
    };
    family_net(h.family_le(), NullHeader::LEN)
        .or_else(|| family_net(h.family_be(), NullHeader::LEN))
        .unwrap_or(Net::NonIp(NonIp::Other))
}

/// LOOP: the family is in network byte order.
pub fn walk_loop(buf: &[u8]) -> Net {
    let Ok(h) = NullHeader::new_checked(buf) else {
        return Net::Cut;
    };
    family_net(h.family_be(), NullHeader::LEN).unwrap_or(Net::NonIp(NonIp::Other))
}

/// The network layer after a PPP protocol field that ends at `offset`.
pub fn ppp_net(protocol: u16, buf: &[u8], offset: usize) -> Net {
    match protocol {
        ppp_protocol::IPV4 => Net::Ipv4(offset),
        ppp_protocol::IPV6 => Net::Ipv6(offset),
        ppp_protocol::MPLS_UNICAST | ppp_protocol::MPLS_MULTICAST => crate::ethernet::walk_mpls(buf, offset),
        _ => Net::NonIp(NonIp::Other),
    }
}

/// PPP (LINKTYPE_PPP and LINKTYPE_PPP_HDLC): optional 0xFF 0x03 address/control, then a
/// protocol field of two bytes, or one when protocol-field compression left an odd first byte.
pub fn walk_ppp(buf: &[u8]) -> Net {
    let mut off = 0;
    if u8_at(buf, 0) == 0xff && buf.len() >= 2 {
        if u8_at(buf, 1) != 0x03 {
            return Net::Malformed;
        }
        off = 2;
    }
    if buf.len() <= off {
        return Net::Cut;
    }
    let first = u8_at(buf, off);
    if first & 1 == 1 {
        // Compressed (one-byte) protocol field.
        return ppp_net(u16::from(first), buf, off + 1);
    }
    if buf.len() < off + 2 {
        return Net::Cut;
    }
    ppp_net(be16(buf, off), buf, off + 2)
}

/// Cisco HDLC: address (0x0F unicast, 0x8F broadcast), control 0, then an EtherType.
pub fn walk_chdlc(buf: &[u8]) -> Net {
    if buf.len() < 4 {
        return Net::Cut;
    }
    crate::ethernet::walk_ethertype(buf, 4, be16(buf, 2))
}

/// Raw IP: the version nibble decides.
pub fn walk_raw(buf: &[u8]) -> Net {
    match buf.first() {
        None => Net::Cut,
        Some(b) if b >> 4 == 4 || b >> 4 == 6 => Net::Ip(0),
        Some(_) => Net::Malformed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn null_accepts_both_byte_orders() {
        assert_eq!(walk_null(&[2, 0, 0, 0, 0x45]), Net::Ipv4(4));
        assert_eq!(walk_null(&[0, 0, 0, 2, 0x45]), Net::Ipv4(4));
        assert_eq!(walk_null(&[24, 0, 0, 0]), Net::Ipv6(4));
        assert_eq!(walk_null(&[0, 0, 0, 28]), Net::Ipv6(4));
        assert_eq!(walk_null(&[30, 0, 0, 0]), Net::Ipv6(4));
        assert_eq!(walk_null(&[7, 0, 0, 0]), Net::NonIp(NonIp::Other));
        assert_eq!(walk_null(&[2, 0, 0]), Net::Cut);
        assert_eq!(walk_null(&[]), Net::Cut);
    }

    #[test]
    fn loop_is_network_order_only() {
        assert_eq!(walk_loop(&[0, 0, 0, 2]), Net::Ipv4(4));
        assert_eq!(walk_loop(&[0, 0, 0, 30]), Net::Ipv6(4));
        assert_eq!(walk_loop(&[2, 0, 0, 0]), Net::NonIp(NonIp::Other));
        assert_eq!(walk_loop(&[0, 0]), Net::Cut);
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
        assert_eq!(walk_ppp(&[0xff, 0x03, 0x00, 0x21, 0x45]), Net::Ipv4(4));
        assert_eq!(walk_ppp(&[0xff, 0x03, 0x00, 0x57]), Net::Ipv6(4));
        assert_eq!(walk_ppp(&[0x00, 0x21]), Net::Ipv4(2));
        assert_eq!(walk_ppp(&[0x21, 0x45]), Net::Ipv4(1));
        assert_eq!(walk_ppp(&[0x57]), Net::Ipv6(1));
        assert_eq!(walk_ppp(&[0xff, 0x03, 0xc0, 0x21]), Net::NonIp(NonIp::Other));
        assert_eq!(walk_ppp(&[0xff, 0x05, 0x00, 0x21]), Net::Malformed);
        assert_eq!(walk_ppp(&[0xff, 0x03, 0x00]), Net::Cut);
        assert_eq!(walk_ppp(&[0xff, 0x03]), Net::Cut);
        assert_eq!(walk_ppp(&[]), Net::Cut);
        // MPLS over PPP: one label, bottom of stack, then IPv4.
        assert_eq!(walk_ppp(&[0xff, 0x03, 0x02, 0x81, 0, 0x01, 0x01, 0x40, 0x45]), Net::Ipv4(8));
    }

    #[test]
    fn chdlc() {
        assert_eq!(walk_chdlc(&[0x0f, 0x00, 0x08, 0x00, 0x45]), Net::Ipv4(4));
        assert_eq!(walk_chdlc(&[0x8f, 0x00, 0x86, 0xdd]), Net::Ipv6(4));
        assert_eq!(walk_chdlc(&[0x8f, 0x00, 0x80, 0x35]), Net::NonIp(NonIp::EtherType(0x8035)));
        assert_eq!(walk_chdlc(&[0x0f, 0x00, 0x08]), Net::Cut);
    }

    #[test]
    fn raw() {
        assert_eq!(walk_raw(&[0x45]), Net::Ip(0));
        assert_eq!(walk_raw(&[0x60]), Net::Ip(0));
        assert_eq!(walk_raw(&[0x55]), Net::Malformed);
        assert_eq!(walk_raw(&[]), Net::Cut);
    }
}
