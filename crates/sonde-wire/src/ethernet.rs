//! Ethernet II and what can follow an EtherType before the network layer: 802.1Q / 802.1ad
//! VLAN tags (stacked), MPLS label stacks and PPPoE sessions; and IEEE 802.3 frames (a length
//! where the EtherType would be) with an 802.2 LLC header: SNAP with an EtherType (RFC 1042,
//! 802.1H) is followed like Ethernet II, other LLC frames are non-IP by their SAPs.

use crate::bytes::{array, be16, be32, u8_at};
use crate::link::{ppp_net, LinkEnd};
use crate::{NonIp, WireError};

/// EtherTypes the decoder follows.
pub mod ethertype {
    pub const IPV4: u16 = 0x0800;
    pub const ARP: u16 = 0x0806;
    pub const IPV6: u16 = 0x86dd;
    pub const VLAN: u16 = 0x8100;
    pub const QINQ: u16 = 0x88a8;
    pub const QINQ_OLD: u16 = 0x9100;
    pub const MPLS_UNICAST: u16 = 0x8847;
    pub const MPLS_MULTICAST: u16 = 0x8848;
    pub const PPPOE_DISCOVERY: u16 = 0x8863;
    pub const PPPOE_SESSION: u16 = 0x8864;
    /// GRE: transparent Ethernet bridging.
    pub const TEB: u16 = 0x6558;
    /// GRE: ERSPAN type I/II.
    pub const ERSPAN_II: u16 = 0x88be;
    /// GRE: ERSPAN type III.
    pub const ERSPAN_III: u16 = 0x22eb;
    /// Values up to this one are 802.3 lengths, not EtherTypes.
    pub const MAX_8023_LEN: u16 = 0x05ff;
}

/// At most this many VLAN tags / MPLS labels are walked before the frame is called malformed.
pub const MAX_TAGS: usize = 16;

mod field {
    use core::ops::Range;
    pub const DST: Range<usize> = 0..6;
    pub const SRC: Range<usize> = 6..12;
    pub const ETHERTYPE: usize = 12;
    pub const HEADER_LEN: usize = 14;

    pub const VLAN_TCI: usize = 0;
    pub const VLAN_NEXT: usize = 2;
    pub const VLAN_LEN: usize = 4;

    pub const MPLS_LEN: usize = 4;

    pub const PPPOE_VER_TYPE: usize = 0;
    pub const PPPOE_CODE: usize = 1;
    pub const PPPOE_SESSION: usize = 2;
    pub const PPPOE_LENGTH: usize = 4;
    pub const PPPOE_PROTOCOL: usize = 6;
    pub const PPPOE_LEN: usize = 8;

    pub const LLC_DSAP: usize = 0;
    pub const LLC_SSAP: usize = 1;
    pub const LLC_CONTROL: usize = 2;
    /// DSAP, SSAP and a one-byte (unnumbered) control field.
    pub const LLC_U_LEN: usize = 3;
    /// DSAP, SSAP and a two-byte (information or supervisory) control field.
    pub const LLC_IS_LEN: usize = 4;
    pub const SNAP_OUI: usize = 3;
    pub const SNAP_PID: usize = 6;
    /// LLC (unnumbered) and SNAP's OUI and protocol id.
    pub const SNAP_LEN: usize = 8;
}

/// 802.2 LLC values the decoder reads.
pub mod llc {
    /// The SNAP SAP (DSAP and SSAP of an RFC 1042 header).
    pub const SAP_SNAP: u8 = 0xaa;
    /// Unnumbered Information, the control field of every SNAP frame.
    pub const CONTROL_UI: u8 = 0x03;
    /// SNAP organisation codes whose protocol id is an EtherType: RFC 1042 encapsulation and
    /// 802.1H bridge tunnelling.
    pub const OUI_ETHERTYPE: u32 = 0x00_0000;
    pub const OUI_BRIDGE_TUNNEL: u32 = 0x00_00f8;
    /// A "raw 802.3" frame (Novell's IPX before 802.2) starts with a checksum field of 0xFFFF
    /// where LLC's SAPs would be.
    pub const NOVELL_RAW: u16 = 0xffff;

    /// Wireshark's name of a service access point (the I/G or C/R bit masked off), if it has one.
    pub fn sap_name(sap: u8) -> Option<&'static str> {
        Some(match sap & 0xfe {
            0x00 => "NULL LSAP",
            0x02 => "LLC Sub-Layer Management",
            0x04 => "SNA Path Control",
            0x06 => "TCP/IP",
            0x08 | 0x0c => "SNA",
            0x0e => "PROWAY (IEC955) Network Management and Initialization",
            0x10 => "NetWare (unofficial?)",
            0x14 => "ISO Network Layer (OSLAN 1)",
            0x18 => "Texas Instruments",
            0x20 | 0x34 => "ISO Network Layer (unofficial?)",
            0x42 => "Spanning Tree BPDU",
            0x4e => "EIA RS-511 Manufacturing Message Service",
            0x54 => "ISO Network Layer (OSLAN 2)",
            0x7e => "ISO 8208 (X.25 over 802.2)",
            0x80 => "XNS",
            0x82 => "BACnet",
            0x86 => "Nestar",
            0x8e => "PROWAY (IEC955) Active Station List Maintenance",
            0x98 => "ARP",
            0xaa => "SNAP",
            0xb4 => "HP JetDirect Printer",
            0xba | 0xbc => "Banyan Vines",
            0xe0 => "NetWare",
            0xf0 => "NetBIOS",
            0xf4 => "IBM Net Management",
            0xf8 => "HP Extended LLC",
            0xfa => "Ungermann-Bass",
            0xfc => "Remote Program Load",
            0xfe if sap == 0xff => "Global LSAP",
            0xfe => "ISO Network Layer",
            _ => return None,
        })
    }
}

/// An Ethernet II header view.
#[derive(Debug, Clone, Copy)]
pub struct EthernetFrame<'a> {
    buf: &'a [u8],
}

impl<'a> EthernetFrame<'a> {
    pub const HEADER_LEN: usize = field::HEADER_LEN;

    pub fn new_unchecked(buf: &'a [u8]) -> Self {
        EthernetFrame { buf }
    }

    pub fn new_checked(buf: &'a [u8]) -> Result<Self, WireError> {
        if buf.len() < field::HEADER_LEN {
            return Err(WireError::Truncated);
        }
        Ok(Self::new_unchecked(buf))
    }

    pub fn dst(&self) -> [u8; 6] {
        array(self.buf, field::DST.start)
    }

    pub fn src(&self) -> [u8; 6] {
        array(self.buf, field::SRC.start)
    }

    /// The EtherType, or the 802.3 length when ≤ 0x05FF.
    pub fn ethertype(&self) -> u16 {
        be16(self.buf, field::ETHERTYPE)
    }

    pub fn payload(&self) -> &'a [u8] {
        crate::bytes::tail(self.buf, field::HEADER_LEN)
    }
}

/// An 802.1Q / 802.1ad tag (the 4 bytes after its TPID).
#[derive(Debug, Clone, Copy)]
pub struct VlanTag<'a> {
    buf: &'a [u8],
}

impl<'a> VlanTag<'a> {
    pub const LEN: usize = field::VLAN_LEN;

    pub fn new_checked(buf: &'a [u8]) -> Result<Self, WireError> {
        if buf.len() < field::VLAN_LEN {
            return Err(WireError::Truncated);
        }
        Ok(VlanTag { buf })
    }

    pub fn pcp(&self) -> u8 {
        u8_at(self.buf, field::VLAN_TCI) >> 5
    }

    pub fn vid(&self) -> u16 {
        be16(self.buf, field::VLAN_TCI) & 0x0fff
    }

    pub fn next_ethertype(&self) -> u16 {
        be16(self.buf, field::VLAN_NEXT)
    }
}

/// One MPLS label stack entry.
#[derive(Debug, Clone, Copy)]
pub struct MplsLabel<'a> {
    buf: &'a [u8],
}

impl<'a> MplsLabel<'a> {
    pub const LEN: usize = field::MPLS_LEN;

    pub fn new_checked(buf: &'a [u8]) -> Result<Self, WireError> {
        if buf.len() < field::MPLS_LEN {
            return Err(WireError::Truncated);
        }
        Ok(MplsLabel { buf })
    }

    fn word(&self) -> u32 {
        be32(self.buf, 0)
    }

    pub fn label(&self) -> u32 {
        self.word() >> 12
    }

    pub fn traffic_class(&self) -> u8 {
        ((self.word() >> 9) & 0x7) as u8
    }

    pub fn bottom_of_stack(&self) -> bool {
        self.word() & 0x100 != 0
    }

    pub fn ttl(&self) -> u8 {
        (self.word() & 0xff) as u8
    }
}

/// A PPPoE session header (RFC 2516) plus the PPP protocol field that follows it.
#[derive(Debug, Clone, Copy)]
pub struct PppoeSession<'a> {
    buf: &'a [u8],
}

impl<'a> PppoeSession<'a> {
    /// Six bytes of PPPoE plus two of PPP protocol.
    pub const LEN: usize = field::PPPOE_LEN;

    pub fn new_checked(buf: &'a [u8]) -> Result<Self, WireError> {
        if buf.len() < field::PPPOE_LEN {
            return Err(WireError::Truncated);
        }
        Ok(PppoeSession { buf })
    }

    pub fn version(&self) -> u8 {
        u8_at(self.buf, field::PPPOE_VER_TYPE) >> 4
    }

    pub fn pppoe_type(&self) -> u8 {
        u8_at(self.buf, field::PPPOE_VER_TYPE) & 0x0f
    }

    pub fn code(&self) -> u8 {
        u8_at(self.buf, field::PPPOE_CODE)
    }

    pub fn session_id(&self) -> u16 {
        be16(self.buf, field::PPPOE_SESSION)
    }

    /// PPPoE payload length (includes the PPP protocol field).
    pub fn length(&self) -> u16 {
        be16(self.buf, field::PPPOE_LENGTH)
    }

    pub fn ppp_protocol(&self) -> u16 {
        be16(self.buf, field::PPPOE_PROTOCOL)
    }
}

/// Walks an Ethernet II frame to its network layer.
#[inline]
pub fn walk(buf: &[u8]) -> LinkEnd {
    match EthernetFrame::new_checked(buf) {
        // Untagged IP, most frames: no call into the walk through tags.
        Ok(eth) if eth.ethertype() == ethertype::IPV4 => LinkEnd::Ipv4(field::HEADER_LEN),
        Ok(eth) if eth.ethertype() == ethertype::IPV6 => LinkEnd::Ipv6(field::HEADER_LEN),
        Ok(eth) => walk_ethertype(buf, field::HEADER_LEN, eth.ethertype()),
        Err(_) => LinkEnd::Cut,
    }
}

/// Follows `ethertype`, whose payload starts at `offset` in `buf`, through VLAN tags, LLC/SNAP,
/// MPLS and PPPoE to the network layer.
pub fn walk_ethertype(buf: &[u8], offset: usize, ty: u16) -> LinkEnd {
    let (ty, offset) = match skip_to_ethertype(buf, offset, ty) {
        Ok(found) => found,
        Err(net) => return net,
    };
    match ty {
        ethertype::IPV4 => LinkEnd::Ipv4(offset),
        ethertype::IPV6 => LinkEnd::Ipv6(offset),
        ethertype::MPLS_UNICAST | ethertype::MPLS_MULTICAST => walk_mpls(buf, offset),
        ethertype::PPPOE_SESSION => {
            let Ok(s) = PppoeSession::new_checked(crate::bytes::tail(buf, offset)) else {
                return LinkEnd::Cut;
            };
            match ppp_net(s.ppp_protocol(), buf, offset + PppoeSession::LEN) {
                LinkEnd::NonIp(_) => LinkEnd::NonIp(NonIp::EtherType(ethertype::PPPOE_SESSION)),
                net => net,
            }
        }
        t => LinkEnd::NonIp(NonIp::EtherType(t)),
    }
}

/// Follows 802.1Q / 802.1ad tags and an 802.3 length with its LLC/SNAP header from `ethertype`
/// (whose payload starts at `offset`) to the first EtherType that is neither, and where its
/// payload starts; `Err` holds the walk's result when the headers are cut or too many, or when
/// the frame carries no EtherType (an LLC frame for another SAP, SNAP of another organisation).
/// (Callers that rewrite a non-IP payload, such as ARP, need its offset, which
/// [`LinkEnd::NonIp`] does not carry.)
#[inline]
pub fn skip_to_ethertype(buf: &[u8], offset: usize, ty: u16) -> Result<(u16, usize), LinkEnd> {
    let (ty, offset) = skip_vlan_tags(buf, offset, ty)?;
    if ty > ethertype::MAX_8023_LEN {
        return Ok((ty, offset));
    }
    // A length: the payload is an LLC header, and SNAP may name an EtherType, behind which
    // VLAN tags may follow again (802.1Q over SNAP), but no second LLC header.
    let (ty, offset) = skip_llc(buf, offset)?;
    match skip_vlan_tags(buf, offset, ty)? {
        (ty, _) if ty <= ethertype::MAX_8023_LEN => Err(LinkEnd::NonIp(NonIp::Other)),
        found => Ok(found),
    }
}

/// Follows 802.1Q / 802.1ad tags only (see [`skip_to_ethertype`]).
#[inline]
pub fn skip_vlan_tags(buf: &[u8], mut offset: usize, mut ty: u16) -> Result<(u16, usize), LinkEnd> {
    for _ in 0..MAX_TAGS {
        if !matches!(ty, ethertype::VLAN | ethertype::QINQ | ethertype::QINQ_OLD) {
            return Ok((ty, offset));
        }
        let Ok(tag) = VlanTag::new_checked(crate::bytes::tail(buf, offset)) else {
            return Err(LinkEnd::Cut);
        };
        ty = tag.next_ethertype();
        offset += VlanTag::LEN;
    }
    Err(LinkEnd::Malformed)
}

/// Reads the 802.2 LLC header at `offset` (the payload of an 802.3 frame): the EtherType a SNAP
/// header names and where its payload starts, or what the frame is when it names none.
fn skip_llc(buf: &[u8], offset: usize) -> Result<(u16, usize), LinkEnd> {
    let hdr = crate::bytes::tail(buf, offset);
    if hdr.len() < 2 {
        return Err(LinkEnd::Cut);
    }
    if be16(hdr, field::LLC_DSAP) == llc::NOVELL_RAW {
        return Err(LinkEnd::NonIp(NonIp::NovellRaw));
    }
    let (dsap, ssap) = (u8_at(hdr, field::LLC_DSAP), u8_at(hdr, field::LLC_SSAP));
    let Some(&control) = hdr.get(field::LLC_CONTROL) else {
        return Err(LinkEnd::Cut);
    };
    let u_format = control & 0x03 == 0x03;
    if hdr.len() < if u_format { field::LLC_U_LEN } else { field::LLC_IS_LEN } {
        return Err(LinkEnd::Cut);
    }
    if dsap != llc::SAP_SNAP || ssap & 0xfe != llc::SAP_SNAP || control != llc::CONTROL_UI {
        return Err(LinkEnd::NonIp(NonIp::Llc { dsap, ssap }));
    }
    if hdr.len() < field::SNAP_LEN {
        return Err(LinkEnd::Cut);
    }
    let oui = be32(hdr, field::SNAP_OUI - 1) & 0x00ff_ffff;
    let pid = be16(hdr, field::SNAP_PID);
    match oui {
        llc::OUI_ETHERTYPE | llc::OUI_BRIDGE_TUNNEL => Ok((pid, offset + field::SNAP_LEN)),
        _ => Err(LinkEnd::NonIp(NonIp::Snap { oui, pid })),
    }
}

/// Walks an MPLS label stack starting at `offset` and guesses the payload from its first nibble,
/// as tcpdump does.
pub fn walk_mpls(buf: &[u8], mut offset: usize) -> LinkEnd {
    for _ in 0..MAX_TAGS {
        let Ok(label) = MplsLabel::new_checked(crate::bytes::tail(buf, offset)) else {
            return LinkEnd::Cut;
        };
        offset += MplsLabel::LEN;
        if label.bottom_of_stack() {
            return match buf.get(offset) {
                None => LinkEnd::Cut,
                Some(b) if b >> 4 == 4 => LinkEnd::Ipv4(offset),
                Some(b) if b >> 4 == 6 => LinkEnd::Ipv6(offset),
                Some(_) => LinkEnd::NonIp(NonIp::Other),
            };
        }
    }
    LinkEnd::Malformed
}

#[cfg(test)]
mod tests {
    use super::*;

    const MACS: [u8; 12] = [0, 1, 2, 3, 4, 5, 0xa, 0xb, 0xc, 0xd, 0xe, 0xf];

    fn frame(rest: &[u8]) -> ([u8; 64], usize) {
        let mut f = [0u8; 64];
        f[..12].copy_from_slice(&MACS);
        f[12..12 + rest.len()].copy_from_slice(rest);
        (f, 12 + rest.len())
    }

    #[test]
    fn ethernet_fields() {
        let (f, n) = frame(&[0x08, 0x00, 0x45]);
        let e = EthernetFrame::new_checked(&f[..n]).unwrap();
        assert_eq!(e.dst(), [0, 1, 2, 3, 4, 5]);
        assert_eq!(e.src(), [0xa, 0xb, 0xc, 0xd, 0xe, 0xf]);
        assert_eq!(e.ethertype(), 0x0800);
        assert_eq!(e.payload(), &[0x45]);
        assert_eq!(walk(&f[..n]), LinkEnd::Ipv4(14));
        for cut in 0..14 {
            assert_eq!(EthernetFrame::new_checked(&f[..cut]).unwrap_err(), WireError::Truncated);
            assert_eq!(walk(&f[..cut]), LinkEnd::Cut);
        }
    }

    #[test]
    fn ethertypes() {
        let (f, n) = frame(&[0x86, 0xdd]);
        assert_eq!(walk(&f[..n]), LinkEnd::Ipv6(14));
        let (f, n) = frame(&[0x08, 0x06]);
        assert_eq!(walk(&f[..n]), LinkEnd::NonIp(NonIp::EtherType(0x0806)));
        let (f, n) = frame(&[0x88, 0xcc]);
        assert_eq!(walk(&f[..n]), LinkEnd::NonIp(NonIp::EtherType(0x88cc)));
        // 802.3 with a length field and LLC (spanning tree).
        let (f, n) = frame(&[0x00, 0x26, 0x42, 0x42, 0x03]);
        assert_eq!(walk(&f[..n]), LinkEnd::NonIp(NonIp::Llc { dsap: 0x42, ssap: 0x42 }));
    }

    #[test]
    fn llc_snap() {
        // RFC 1042: 802.3 length, LLC AA AA 03, OUI 000000, EtherType IPv4.
        let snap = [0x00, 0x2e, 0xaa, 0xaa, 0x03, 0, 0, 0, 0x08, 0x00, 0x45];
        let (f, n) = frame(&snap);
        assert_eq!(walk(&f[..n]), LinkEnd::Ipv4(22));
        // Every cut inside LLC/SNAP is a cut, never a guess.
        for cut in 14..22 {
            assert_eq!(walk(&f[..cut]), LinkEnd::Cut, "cut at {cut}");
        }
        // IPv6, 802.1H bridge tunnel OUI; ARP behind SNAP keeps its EtherType.
        let (f, n) = frame(&[0x00, 0x2e, 0xaa, 0xaa, 0x03, 0, 0, 0xf8, 0x86, 0xdd, 0x60]);
        assert_eq!(walk(&f[..n]), LinkEnd::Ipv6(22));
        let (f, n) = frame(&[0x00, 0x2e, 0xaa, 0xaa, 0x03, 0, 0, 0, 0x08, 0x06, 0x00]);
        assert_eq!(walk(&f[..n]), LinkEnd::NonIp(NonIp::EtherType(0x0806)));
        assert_eq!(skip_to_ethertype(&f[..n], 14, 0x002e), Ok((0x0806, 22)));
        // A VLAN tag outside (802.1Q, then a length) and inside (SNAP naming 0x8100).
        let (f, n) = frame(&[0x81, 0x00, 0x00, 0x07, 0x00, 0x2e, 0xaa, 0xaa, 0x03, 0, 0, 0, 0x08, 0x00, 0x45]);
        assert_eq!(walk(&f[..n]), LinkEnd::Ipv4(26));
        let (f, n) = frame(&[0x00, 0x2e, 0xaa, 0xaa, 0x03, 0, 0, 0, 0x81, 0x00, 0x00, 0x07, 0x86, 0xdd, 0x60]);
        assert_eq!(walk(&f[..n]), LinkEnd::Ipv6(26));
        // SNAP naming a length again: no second LLC header is read.
        let (f, n) = frame(&[0x00, 0x2e, 0xaa, 0xaa, 0x03, 0, 0, 0, 0x00, 0x2e, 0xaa, 0xaa, 0x03]);
        assert_eq!(walk(&f[..n]), LinkEnd::NonIp(NonIp::Other));
        // Cisco's OUI (CDP): not an EtherType.
        let (f, n) = frame(&[0x00, 0x2e, 0xaa, 0xaa, 0x03, 0x00, 0x00, 0x0c, 0x20, 0x00, 0x02]);
        assert_eq!(walk(&f[..n]), LinkEnd::NonIp(NonIp::Snap { oui: 0x00000c, pid: 0x2000 }));
        // SNAP SAPs with an I-format control field are plain LLC, as are other SAPs; a
        // response's SSAP carries the C/R bit.
        let (f, n) = frame(&[0x00, 0x2e, 0xaa, 0xaa, 0x00, 0x00, 0x08, 0x00]);
        assert_eq!(walk(&f[..n]), LinkEnd::NonIp(NonIp::Llc { dsap: 0xaa, ssap: 0xaa }));
        let (f, n) = frame(&[0x00, 0x2e, 0xaa, 0xab, 0x03, 0, 0, 0, 0x08, 0x00, 0x45]);
        assert_eq!(walk(&f[..n]), LinkEnd::Ipv4(22));
        let (f, n) = frame(&[0x00, 0x2e, 0xf0, 0xf1, 0x03]);
        assert_eq!(walk(&f[..n]), LinkEnd::NonIp(NonIp::Llc { dsap: 0xf0, ssap: 0xf1 }));
        // An I-format control field needs its second byte.
        let (f, n) = frame(&[0x00, 0x2e, 0xf0, 0xf0, 0x00]);
        assert_eq!(walk(&f[..n]), LinkEnd::Cut);
        // Novell's raw 802.3 (IPX without LLC).
        let (f, n) = frame(&[0x00, 0x2e, 0xff, 0xff, 0x00, 0x2e]);
        assert_eq!(walk(&f[..n]), LinkEnd::NonIp(NonIp::NovellRaw));
        assert_eq!(llc::sap_name(0x42), Some("Spanning Tree BPDU"));
        assert_eq!(llc::sap_name(0xf1), Some("NetBIOS"));
        assert_eq!((llc::sap_name(0xff), llc::sap_name(0xfe)), (Some("Global LSAP"), Some("ISO Network Layer")));
        assert_eq!(llc::sap_name(0x44), None);
    }

    #[test]
    fn vlan_stack() {
        // QinQ: 0x88a8 vid 100, 0x8100 vid 200 pcp 5, then IPv4.
        let (f, n) = frame(&[0x88, 0xa8, 0x00, 0x64, 0x81, 0x00, 0xa0, 0xc8, 0x08, 0x00, 0x45]);
        assert_eq!(walk(&f[..n]), LinkEnd::Ipv4(22));
        let tag = VlanTag::new_checked(&f[14..]).unwrap();
        assert_eq!(tag.vid(), 100);
        assert_eq!(tag.next_ethertype(), 0x8100);
        let tag = VlanTag::new_checked(&f[18..]).unwrap();
        assert_eq!(tag.vid(), 200);
        assert_eq!(tag.pcp(), 5);
        // 0x9100 outer tag, ARP inside.
        let (f, n) = frame(&[0x91, 0x00, 0x00, 0x01, 0x08, 0x06]);
        assert_eq!(walk(&f[..n]), LinkEnd::NonIp(NonIp::EtherType(0x0806)));
        // Cut inside a tag.
        for cut in 14..22 {
            assert_eq!(walk(&f[..cut.min(n)]), if cut >= 18 { walk(&f[..n]) } else { LinkEnd::Cut });
        }
        assert_eq!(VlanTag::new_checked(&[1, 2, 3]).unwrap_err(), WireError::Truncated);
    }

    #[test]
    fn endless_vlan_tags_are_malformed() {
        let mut f = [0u8; 14 + 4 * 20];
        f[12] = 0x81;
        for i in 0..20 {
            f[14 + 4 * i + 2] = 0x81;
        }
        assert_eq!(walk(&f), LinkEnd::Malformed);
    }

    #[test]
    fn mpls() {
        // Two labels (16, 17 bottom), then IPv6.
        let (f, n) = frame(&[0x88, 0x47, 0x00, 0x01, 0x00, 0x40, 0x00, 0x01, 0x11, 0x3f, 0x60]);
        assert_eq!(walk(&f[..n]), LinkEnd::Ipv6(22));
        let l = MplsLabel::new_checked(&f[14..]).unwrap();
        assert_eq!((l.label(), l.bottom_of_stack(), l.ttl()), (16, false, 64));
        let l = MplsLabel::new_checked(&f[18..]).unwrap();
        assert_eq!((l.label(), l.bottom_of_stack(), l.ttl(), l.traffic_class()), (17, true, 63, 0));
        // Multicast, IPv4 payload.
        let (f, n) = frame(&[0x88, 0x48, 0x00, 0x01, 0x01, 0x40, 0x45]);
        assert_eq!(walk(&f[..n]), LinkEnd::Ipv4(18));
        // Pseudowire control word: not IP.
        let (f, n) = frame(&[0x88, 0x47, 0x00, 0x01, 0x01, 0x40, 0x00]);
        assert_eq!(walk(&f[..n]), LinkEnd::NonIp(NonIp::Other));
        // Cut right after the stack and inside it.
        assert_eq!(walk(&f[..n - 1]), LinkEnd::Cut);
        assert_eq!(walk(&f[..n - 3]), LinkEnd::Cut);
        // A stack that never ends.
        let mut f = [0u8; 14 + 4 * 20];
        f[12] = 0x88;
        f[13] = 0x47;
        assert_eq!(walk(&f), LinkEnd::Malformed);
    }

    #[test]
    fn pppoe() {
        let (f, n) = frame(&[0x88, 0x64, 0x11, 0x00, 0x12, 0x34, 0x00, 0x2a, 0x00, 0x21, 0x45]);
        assert_eq!(walk(&f[..n]), LinkEnd::Ipv4(22));
        let s = PppoeSession::new_checked(&f[14..]).unwrap();
        assert_eq!((s.version(), s.pppoe_type(), s.code()), (1, 1, 0));
        assert_eq!((s.session_id(), s.length(), s.ppp_protocol()), (0x1234, 42, 0x21));
        let (f, n) = frame(&[0x88, 0x64, 0x11, 0x00, 0x12, 0x34, 0x00, 0x2a, 0x00, 0x57, 0x60]);
        assert_eq!(walk(&f[..n]), LinkEnd::Ipv6(22));
        // LCP inside a session.
        let (f, n) = frame(&[0x88, 0x64, 0x11, 0x00, 0x12, 0x34, 0x00, 0x2a, 0xc0, 0x21]);
        assert_eq!(walk(&f[..n]), LinkEnd::NonIp(NonIp::EtherType(0x8864)));
        assert_eq!(walk(&f[..n - 1]), LinkEnd::Cut);
        // Discovery stage.
        let (f, n) = frame(&[0x88, 0x63, 0x11, 0x09]);
        assert_eq!(walk(&f[..n]), LinkEnd::NonIp(NonIp::EtherType(0x8863)));
    }
}
