//! Tunnel headers: GRE (RFC 2784/2890, plus the PPTP enhanced GRE of RFC 2637), ERSPAN type
//! I/II/III, VXLAN (RFC 7348) and GTP-U (3GPP TS 29.281). Each `walk_*` function returns where
//! the inner packet starts, relative to the start of the tunnel header.

use crate::bytes::{be16, be32, tail, u8_at};
use crate::ethernet::{ethertype, walk_ethertype};
use crate::link::{walk_ppp, LinkEnd};
use crate::{NonIp, Tunnel, WireError};

/// IP protocol number of GRE.
pub const GRE_PROTOCOL: u8 = 47;
/// IP protocol numbers of IPv4-in-IP and IPv6-in-IP.
pub const IPIP_PROTOCOL: u8 = 4;
pub const IPV6_IN_IP_PROTOCOL: u8 = 41;
/// IANA UDP port of VXLAN.
pub const VXLAN_PORT: u16 = 4789;
/// UDP port of GTP-U.
pub const GTPU_PORT: u16 = 2152;
/// The tunnel a UDP datagram carries, told by its ports as the decoding walk tells it: VXLAN
/// on the destination port, GTP-U on either. The one place this rule is written; the walk,
/// [`crate::flow_tuple`] and trace rewriting all ask here.
#[inline]
pub fn udp_tunnel(src_port: u16, dst_port: u16) -> Option<Tunnel> {
    if dst_port == VXLAN_PORT {
        Some(Tunnel::Vxlan)
    } else if dst_port == GTPU_PORT || src_port == GTPU_PORT {
        Some(Tunnel::GtpU)
    } else {
        None
    }
}

/// Where the inner packet of a UDP tunnel starts, relative to the UDP payload `buf` (the
/// `walk_*` function of the tunnel [`udp_tunnel`] names).
pub fn walk_udp_tunnel(tunnel: Tunnel, buf: &[u8]) -> LinkEnd {
    match tunnel {
        Tunnel::Vxlan => walk_vxlan(buf),
        Tunnel::GtpU => walk_gtpu(buf),
        Tunnel::Gre | Tunnel::IpInIp => LinkEnd::NonIp(NonIp::Other),
    }
}

/// PPTP's GRE payload type (PPP).
pub const GRE_PPP: u16 = 0x880b;

mod field {
    pub const GRE_FLAGS: usize = 0;
    pub const GRE_PROTOCOL: usize = 2;
    pub const GRE_LEN: usize = 4;

    pub const VXLAN_FLAGS: usize = 0;
    pub const VXLAN_VNI: usize = 4;
    pub const VXLAN_LEN: usize = 8;

    pub const GTP_FLAGS: usize = 0;
    pub const GTP_TYPE: usize = 1;
    pub const GTP_LENGTH: usize = 2;
    pub const GTP_TEID: usize = 4;
    pub const GTP_LEN: usize = 8;
    pub const GTP_OPT_LEN: usize = 4;
    pub const GTP_NEXT_EXT: usize = 11;

    pub const ERSPAN2_LEN: usize = 8;
    pub const ERSPAN3_LEN: usize = 12;
    pub const ERSPAN3_FLAGS: usize = 11;
    pub const ERSPAN3_SUBHEADER_LEN: usize = 8;
}

const GRE_C: u16 = 0x8000;
const GRE_R: u16 = 0x4000;
const GRE_K: u16 = 0x2000;
const GRE_S: u16 = 0x1000;
const GRE_A: u16 = 0x0080;
const GRE_VERSION: u16 = 0x0007;

/// A GRE header view.
#[derive(Debug, Clone, Copy)]
pub struct GreHeader<'a> {
    buf: &'a [u8],
}

impl<'a> GreHeader<'a> {
    pub const MIN_LEN: usize = field::GRE_LEN;
    /// Where the checksum is when the C bit says it is present (RFC 2784 §2.5).
    pub const CHECKSUM_OFFSET: usize = field::GRE_LEN;

    pub fn new_checked(buf: &'a [u8]) -> Result<Self, WireError> {
        if buf.len() < field::GRE_LEN {
            return Err(WireError::Truncated);
        }
        Ok(GreHeader { buf })
    }

    fn flags(&self) -> u16 {
        be16(self.buf, field::GRE_FLAGS)
    }

    pub fn has_checksum(&self) -> bool {
        self.flags() & GRE_C != 0
    }

    pub fn has_routing(&self) -> bool {
        self.flags() & GRE_R != 0
    }

    pub fn has_key(&self) -> bool {
        self.flags() & GRE_K != 0
    }

    pub fn has_sequence(&self) -> bool {
        self.flags() & GRE_S != 0
    }

    /// Version 1 (PPTP) only: an acknowledgment number is present.
    pub fn has_ack(&self) -> bool {
        self.flags() & GRE_A != 0
    }

    pub fn version(&self) -> u8 {
        (self.flags() & GRE_VERSION) as u8
    }

    pub fn protocol(&self) -> u16 {
        be16(self.buf, field::GRE_PROTOCOL)
    }

    /// Header length implied by the flags (routing, which RFC 2784 deprecates, is not counted).
    pub fn header_len(&self) -> usize {
        let mut n = field::GRE_LEN;
        if self.version() == 0 && (self.has_checksum() || self.has_routing()) {
            n += 4;
        }
        if self.has_key() {
            n += 4;
        }
        if self.has_sequence() {
            n += 4;
        }
        if self.version() == 1 && self.has_ack() {
            n += 4;
        }
        n
    }

    /// The key (version 0) or payload length + call ID (version 1), when present.
    pub fn key(&self) -> Option<u32> {
        if !self.has_key() {
            return None;
        }
        let at = if self.version() == 0 && (self.has_checksum() || self.has_routing()) { 8 } else { 4 };
        self.buf.get(at..at + 4).map(|b| be32(b, 0))
    }

    /// The sequence number, when present.
    pub fn sequence(&self) -> Option<u32> {
        if !self.has_sequence() {
            return None;
        }
        let mut at = 4;
        if self.version() == 0 && (self.has_checksum() || self.has_routing()) {
            at += 4;
        }
        if self.has_key() {
            at += 4;
        }
        self.buf.get(at..at + 4).map(|b| be32(b, 0))
    }
}

/// Walks a GRE header to the inner packet.
pub fn walk_gre(buf: &[u8]) -> LinkEnd {
    let Ok(gre) = GreHeader::new_checked(buf) else {
        return LinkEnd::Cut;
    };
    let len = gre.header_len();
    match gre.version() {
        0 if !gre.has_routing() => {}
        1 if gre.protocol() == GRE_PPP && gre.has_key() => {
            if buf.len() < len {
                return LinkEnd::Cut;
            }
            return match walk_ppp(tail(buf, len)) {
                // A GRE packet with only an acknowledgment carries no PPP frame at all.
                LinkEnd::Cut if buf.len() == len => LinkEnd::NonIp(NonIp::Other),
                net => net.shift(len),
            };
        }
        _ => return LinkEnd::NonIp(NonIp::Other),
    }
    if buf.len() < len {
        return LinkEnd::Cut;
    }
    match gre.protocol() {
        ethertype::TEB => LinkEnd::Ethernet(len),
        ethertype::ERSPAN_II if !gre.has_sequence() => LinkEnd::Ethernet(len), // ERSPAN type I
        ethertype::ERSPAN_II => walk_erspan2(tail(buf, len)).shift(len),
        ethertype::ERSPAN_III => walk_erspan3(tail(buf, len)).shift(len),
        ty => walk_ethertype(buf, len, ty),
    }
}

/// ERSPAN type II: an 8-byte header (version 1), then the mirrored Ethernet frame.
pub fn walk_erspan2(buf: &[u8]) -> LinkEnd {
    if buf.len() < field::ERSPAN2_LEN {
        return LinkEnd::Cut;
    }
    match u8_at(buf, 0) >> 4 {
        1 => LinkEnd::Ethernet(field::ERSPAN2_LEN),
        _ => LinkEnd::NonIp(NonIp::Other),
    }
}

/// ERSPAN type III: a 12-byte header (version 2), an optional 8-byte platform sub-header (O
/// flag), then the mirrored frame when the frame type is Ethernet (0).
pub fn walk_erspan3(buf: &[u8]) -> LinkEnd {
    if buf.len() < field::ERSPAN3_LEN {
        return LinkEnd::Cut;
    }
    let flags = u8_at(buf, field::ERSPAN3_FLAGS);
    let frame_type = (be16(buf, 10) >> 10) & 0x1f;
    if u8_at(buf, 0) >> 4 != 2 || frame_type != 0 {
        return LinkEnd::NonIp(NonIp::Other);
    }
    let mut len = field::ERSPAN3_LEN;
    if flags & 0x01 != 0 {
        len += field::ERSPAN3_SUBHEADER_LEN;
    }
    if buf.len() < len {
        return LinkEnd::Cut;
    }
    LinkEnd::Ethernet(len)
}

/// A VXLAN header view.
#[derive(Debug, Clone, Copy)]
pub struct VxlanHeader<'a> {
    buf: &'a [u8],
}

impl<'a> VxlanHeader<'a> {
    pub const LEN: usize = field::VXLAN_LEN;

    pub fn new_checked(buf: &'a [u8]) -> Result<Self, WireError> {
        if buf.len() < field::VXLAN_LEN {
            return Err(WireError::Truncated);
        }
        Ok(VxlanHeader { buf })
    }

    pub fn flags(&self) -> u8 {
        u8_at(self.buf, field::VXLAN_FLAGS)
    }

    /// The I flag: the VNI is valid.
    pub fn vni_valid(&self) -> bool {
        self.flags() & 0x08 != 0
    }

    pub fn vni(&self) -> u32 {
        be32(self.buf, field::VXLAN_VNI) >> 8
    }
}

/// Walks a VXLAN header to the inner Ethernet frame.
pub fn walk_vxlan(buf: &[u8]) -> LinkEnd {
    match VxlanHeader::new_checked(buf) {
        Ok(h) if h.vni_valid() => LinkEnd::Ethernet(VxlanHeader::LEN),
        Ok(_) => LinkEnd::NonIp(NonIp::Other),
        Err(_) => LinkEnd::Cut,
    }
}

/// A GTP-U (GTPv1) header view.
#[derive(Debug, Clone, Copy)]
pub struct GtpuHeader<'a> {
    buf: &'a [u8],
}

/// GTP message type of a G-PDU (user data).
pub const GTP_G_PDU: u8 = 255;

impl<'a> GtpuHeader<'a> {
    pub const MIN_LEN: usize = field::GTP_LEN;

    pub fn new_checked(buf: &'a [u8]) -> Result<Self, WireError> {
        if buf.len() < field::GTP_LEN {
            return Err(WireError::Truncated);
        }
        Ok(GtpuHeader { buf })
    }

    fn flags(&self) -> u8 {
        u8_at(self.buf, field::GTP_FLAGS)
    }

    pub fn version(&self) -> u8 {
        self.flags() >> 5
    }

    /// Protocol type: 1 for GTP, 0 for GTP'.
    pub fn protocol_type(&self) -> bool {
        self.flags() & 0x10 != 0
    }

    pub fn has_extension(&self) -> bool {
        self.flags() & 0x04 != 0
    }

    pub fn has_sequence(&self) -> bool {
        self.flags() & 0x02 != 0
    }

    pub fn has_npdu(&self) -> bool {
        self.flags() & 0x01 != 0
    }

    pub fn message_type(&self) -> u8 {
        u8_at(self.buf, field::GTP_TYPE)
    }

    /// Length of everything after the mandatory 8 bytes.
    pub fn length(&self) -> u16 {
        be16(self.buf, field::GTP_LENGTH)
    }

    pub fn teid(&self) -> u32 {
        be32(self.buf, field::GTP_TEID)
    }

    /// The first next-extension-header type (0 without one).
    pub fn next_extension(&self) -> u8 {
        if self.has_extension() {
            u8_at(self.buf, field::GTP_NEXT_EXT)
        } else {
            0
        }
    }
}

/// Walks a GTP-U header (and its extension headers) to the inner IP packet. Messages other
/// than a G-PDU (echo, end marker, …) are not IP.
pub fn walk_gtpu(buf: &[u8]) -> LinkEnd {
    let Ok(h) = GtpuHeader::new_checked(buf) else {
        return LinkEnd::Cut;
    };
    if h.version() != 1 || !h.protocol_type() || h.message_type() != GTP_G_PDU {
        return LinkEnd::NonIp(NonIp::Other);
    }
    let mut off = field::GTP_LEN;
    if h.has_extension() || h.has_sequence() || h.has_npdu() {
        off += field::GTP_OPT_LEN;
        if buf.len() < off {
            return LinkEnd::Cut;
        }
        let mut next = h.next_extension();
        // Each extension header: length in 4-byte units, contents, next type in its last byte.
        for _ in 0..16 {
            if next == 0 {
                break;
            }
            let Some(&units) = buf.get(off) else {
                return LinkEnd::Cut;
            };
            if units == 0 {
                return LinkEnd::Malformed;
            }
            let len = usize::from(units) * 4;
            let Some(&n) = buf.get(off + len - 1) else {
                return LinkEnd::Cut;
            };
            next = n;
            off += len;
        }
        if next != 0 {
            return LinkEnd::Malformed;
        }
    }
    match buf.get(off) {
        None if usize::from(h.length()) + field::GTP_LEN <= off => LinkEnd::NonIp(NonIp::Other),
        None => LinkEnd::Cut,
        Some(b) if b >> 4 == 4 || b >> 4 == 6 => LinkEnd::Ip(off),
        Some(_) => LinkEnd::NonIp(NonIp::Other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn udp_tunnel_by_port() {
        assert_eq!(udp_tunnel(50000, VXLAN_PORT), Some(Tunnel::Vxlan));
        // VXLAN is told by the destination port only; GTP-U by either.
        assert_eq!(udp_tunnel(VXLAN_PORT, 50000), None);
        assert_eq!(udp_tunnel(GTPU_PORT, 50000), Some(Tunnel::GtpU));
        assert_eq!(udp_tunnel(50000, GTPU_PORT), Some(Tunnel::GtpU));
        assert_eq!(udp_tunnel(53, 53), None);
    }

    #[test]
    fn gre_plain() {
        let b = [0x00, 0x00, 0x08, 0x00, 0x45];
        let h = GreHeader::new_checked(&b).unwrap();
        assert_eq!((h.version(), h.protocol(), h.header_len(), h.key(), h.sequence()), (0, 0x0800, 4, None, None));
        assert_eq!(walk_gre(&b), LinkEnd::Ipv4(4));
        for cut in 0..4 {
            assert_eq!(walk_gre(&b[..cut]), LinkEnd::Cut);
        }
    }

    #[test]
    fn gre_optional_fields() {
        // C, K, S: checksum + reserved, key 0x01020304, sequence 7, then IPv6.
        let b = [0xb0, 0x00, 0x86, 0xdd, 0xaa, 0xbb, 0, 0, 1, 2, 3, 4, 0, 0, 0, 7, 0x60];
        let h = GreHeader::new_checked(&b).unwrap();
        assert!(h.has_checksum() && h.has_key() && h.has_sequence() && !h.has_routing());
        assert_eq!((h.header_len(), h.key(), h.sequence()), (16, Some(0x01020304), Some(7)));
        assert_eq!(walk_gre(&b), LinkEnd::Ipv6(16));
        for cut in 4..16 {
            assert_eq!(walk_gre(&b[..cut]), LinkEnd::Cut);
        }
        // Key only.
        let b = [0x20, 0x00, 0x65, 0x58, 0, 0, 0, 9];
        assert_eq!(GreHeader::new_checked(&b).unwrap().key(), Some(9));
        assert_eq!(walk_gre(&b), LinkEnd::Ethernet(8));
        // Routing present, or an unknown version: not followed.
        assert_eq!(walk_gre(&[0x40, 0x00, 0x08, 0x00, 0, 0, 0, 0]), LinkEnd::NonIp(NonIp::Other));
        assert_eq!(walk_gre(&[0x00, 0x02, 0x08, 0x00]), LinkEnd::NonIp(NonIp::Other));
        // MPLS over GRE.
        assert_eq!(walk_gre(&[0, 0, 0x88, 0x47, 0, 0, 0x11, 0x40, 0x45]), LinkEnd::Ipv4(8));
        // Something else.
        assert_eq!(walk_gre(&[0, 0, 0x08, 0x06]), LinkEnd::NonIp(NonIp::EtherType(0x0806)));
    }

    #[test]
    fn gre_pptp() {
        // Version 1, K + S: payload length, call id, sequence; PPP with FF 03, IPv4.
        let b = [0x30, 0x01, 0x88, 0x0b, 0, 40, 0, 5, 0, 0, 0, 1, 0xff, 0x03, 0x00, 0x21, 0x45];
        let h = GreHeader::new_checked(&b).unwrap();
        assert_eq!((h.version(), h.header_len()), (1, 12));
        assert_eq!(walk_gre(&b), LinkEnd::Ipv4(16));
        // Compressed address/control and protocol.
        let b = [0x30, 0x81, 0x88, 0x0b, 0, 40, 0, 5, 0, 0, 0, 1, 0, 0, 0, 1, 0x21, 0x45];
        assert_eq!(walk_gre(&b), LinkEnd::Ipv4(17));
        // Acknowledgment only.
        assert_eq!(walk_gre(&b[..16]), LinkEnd::NonIp(NonIp::Other));
        assert_eq!(walk_gre(&b[..10]), LinkEnd::Cut);
    }

    #[test]
    fn erspan() {
        // Type II: GRE with S, then 8-byte ERSPAN header (version 1).
        let mut b = [0u8; 16];
        b[..4].copy_from_slice(&[0x10, 0x00, 0x88, 0xbe]);
        b[8] = 0x10;
        assert_eq!(walk_gre(&b), LinkEnd::Ethernet(16));
        assert_eq!(walk_gre(&b[..12]), LinkEnd::Cut);
        // Type I: no sequence number, Ethernet right away.
        assert_eq!(walk_gre(&[0x00, 0x00, 0x88, 0xbe]), LinkEnd::Ethernet(4));
        // Type III without and with the platform sub-header.
        let mut b = [0u8; 36];
        b[..4].copy_from_slice(&[0x10, 0x00, 0x22, 0xeb]);
        b[8] = 0x20;
        assert_eq!(walk_gre(&b[..24]), LinkEnd::Ethernet(20));
        b[8 + 11] = 0x01;
        assert_eq!(walk_gre(&b), LinkEnd::Ethernet(28));
        assert_eq!(walk_gre(&b[..27]), LinkEnd::Cut);
        // Type III with a non-Ethernet frame type.
        b[8 + 10] = 0x08;
        assert_eq!(walk_gre(&b), LinkEnd::NonIp(NonIp::Other));
    }

    #[test]
    fn vxlan() {
        let b = [0x08, 0, 0, 0, 0x00, 0x12, 0x34, 0x00];
        let h = VxlanHeader::new_checked(&b).unwrap();
        assert!(h.vni_valid());
        assert_eq!((h.flags(), h.vni()), (0x08, 0x1234));
        assert_eq!(walk_vxlan(&b), LinkEnd::Ethernet(8));
        assert_eq!(walk_vxlan(&[0, 0, 0, 0, 0, 0, 0, 0]), LinkEnd::NonIp(NonIp::Other));
        for cut in 0..8 {
            assert_eq!(walk_vxlan(&b[..cut]), LinkEnd::Cut);
        }
    }

    #[test]
    fn gtpu_plain() {
        let b = [0x30, 0xff, 0x00, 0x14, 0x11, 0x22, 0x33, 0x44, 0x45];
        let h = GtpuHeader::new_checked(&b).unwrap();
        assert_eq!((h.version(), h.protocol_type(), h.message_type()), (1, true, 255));
        assert_eq!((h.length(), h.teid(), h.next_extension()), (20, 0x11223344, 0));
        assert_eq!(walk_gtpu(&b), LinkEnd::Ip(8));
        for cut in 0..9 {
            assert_eq!(walk_gtpu(&b[..cut]), LinkEnd::Cut);
        }
        // Echo request: not user data.
        assert_eq!(walk_gtpu(&[0x32, 0x01, 0, 4, 0, 0, 0, 0, 0, 1, 0, 0]), LinkEnd::NonIp(NonIp::Other));
        // GTP version 2 / GTP'.
        assert_eq!(walk_gtpu(&[0x40, 0xff, 0, 0, 0, 0, 0, 0]), LinkEnd::NonIp(NonIp::Other));
        assert_eq!(walk_gtpu(&[0x20, 0xff, 0, 0, 0, 0, 0, 0]), LinkEnd::NonIp(NonIp::Other));
    }

    #[test]
    fn gtpu_extensions() {
        // E + S: seq, npdu, next ext 0x85 (PDU session container, 1 unit), then 0x40 (2 units),
        // then IPv6.
        let b = [
            0x36, 0xff, 0x00, 0x20, 0, 0, 0, 1, // mandatory part
            0x00, 0x05, 0x00, 0x85, // seq 5, npdu, next 0x85
            0x01, 0x10, 0x09, 0x40, // ext: 1 unit, next 0x40
            0x02, 0, 0, 0, 0, 0, 0, 0x00, // ext: 2 units, next none
            0x60,
        ];
        let h = GtpuHeader::new_checked(&b).unwrap();
        assert!(h.has_extension() && h.has_sequence() && !h.has_npdu());
        assert_eq!(h.next_extension(), 0x85);
        assert_eq!(walk_gtpu(&b), LinkEnd::Ip(24));
        for cut in 0..24 {
            assert_eq!(walk_gtpu(&b[..cut]), LinkEnd::Cut, "cut {cut}");
        }
        let mut bad = b;
        bad[16] = 0;
        assert_eq!(walk_gtpu(&bad), LinkEnd::Malformed);
        // Sequence flag only: 4 optional bytes, next extension ignored.
        let b = [0x32, 0xff, 0, 8, 0, 0, 0, 1, 0, 9, 0, 0x85, 0x45];
        assert_eq!(walk_gtpu(&b), LinkEnd::Ip(12));
    }
}
