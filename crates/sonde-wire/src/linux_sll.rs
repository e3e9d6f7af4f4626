//! Linux "cooked" capture headers: SLL (LINKTYPE_LINUX_SLL, 16 bytes) and SLL2
//! (LINKTYPE_LINUX_SLL2, 20 bytes).

use crate::bytes::{be16, be32, u8_at};
use crate::ethernet::walk_ethertype;
use crate::link::LinkEnd;
use crate::{NonIp, WireError};

mod field {
    pub const SLL_PACKET_TYPE: usize = 0;
    pub const SLL_HATYPE: usize = 2;
    pub const SLL_HALEN: usize = 4;
    pub const SLL_ADDR: usize = 6;
    pub const SLL_PROTOCOL: usize = 14;
    pub const SLL_LEN: usize = 16;

    pub const SLL2_PROTOCOL: usize = 0;
    pub const SLL2_IFINDEX: usize = 4;
    pub const SLL2_HATYPE: usize = 8;
    pub const SLL2_PACKET_TYPE: usize = 10;
    pub const SLL2_HALEN: usize = 11;
    pub const SLL2_ADDR: usize = 12;
    pub const SLL2_LEN: usize = 20;
}

/// Protocol values below 0x0600 that Linux puts in the protocol field for non-Ethernet
/// payloads (`ETH_P_802_3`, `ETH_P_802_2`, CAN, …): IP only behind LLC/SNAP.
const MAX_LINUX_PSEUDO_PROTOCOL: u16 = 0x05ff;

/// `ETH_P_802_3`: a raw 802.3 payload (Novell's IPX); `ETH_P_802_2`: an 802.2 LLC header. Both
/// are walked as the payload of an 802.3 length field.
const ETH_P_802_3: u16 = 0x0001;
const ETH_P_802_2: u16 = 0x0004;

/// ARPHRD_NETLINK: the payload is a netlink message.
pub const ARPHRD_NETLINK: u16 = 824;

/// A Linux SLL header view.
#[derive(Debug, Clone, Copy)]
pub struct SllHeader<'a> {
    buf: &'a [u8],
}

impl<'a> SllHeader<'a> {
    pub const LEN: usize = field::SLL_LEN;

    pub fn new_checked(buf: &'a [u8]) -> Result<Self, WireError> {
        if buf.len() < field::SLL_LEN {
            return Err(WireError::Truncated);
        }
        Ok(SllHeader { buf })
    }

    /// 0 to us, 1 broadcast, 2 multicast, 3 to someone else, 4 sent by us.
    pub fn packet_type(&self) -> u16 {
        be16(self.buf, field::SLL_PACKET_TYPE)
    }

    /// The ARPHRD_ device type.
    pub fn hatype(&self) -> u16 {
        be16(self.buf, field::SLL_HATYPE)
    }

    pub fn addr_len(&self) -> u16 {
        be16(self.buf, field::SLL_HALEN)
    }

    /// The first (up to) 8 bytes of the link-layer source address.
    pub fn addr(&self) -> [u8; 8] {
        crate::bytes::array(self.buf, field::SLL_ADDR)
    }

    pub fn protocol(&self) -> u16 {
        be16(self.buf, field::SLL_PROTOCOL)
    }
}

/// A Linux SLL2 header view.
#[derive(Debug, Clone, Copy)]
pub struct Sll2Header<'a> {
    buf: &'a [u8],
}

impl<'a> Sll2Header<'a> {
    pub const LEN: usize = field::SLL2_LEN;

    pub fn new_checked(buf: &'a [u8]) -> Result<Self, WireError> {
        if buf.len() < field::SLL2_LEN {
            return Err(WireError::Truncated);
        }
        Ok(Sll2Header { buf })
    }

    pub fn protocol(&self) -> u16 {
        be16(self.buf, field::SLL2_PROTOCOL)
    }

    pub fn interface_index(&self) -> u32 {
        be32(self.buf, field::SLL2_IFINDEX)
    }

    pub fn hatype(&self) -> u16 {
        be16(self.buf, field::SLL2_HATYPE)
    }

    pub fn packet_type(&self) -> u8 {
        u8_at(self.buf, field::SLL2_PACKET_TYPE)
    }

    pub fn addr_len(&self) -> u8 {
        u8_at(self.buf, field::SLL2_HALEN)
    }

    pub fn addr(&self) -> [u8; 8] {
        crate::bytes::array(self.buf, field::SLL2_ADDR)
    }
}

fn sll_net(buf: &[u8], offset: usize, hatype: u16, protocol: u16) -> LinkEnd {
    if hatype == ARPHRD_NETLINK
        || (protocol <= MAX_LINUX_PSEUDO_PROTOCOL && !matches!(protocol, ETH_P_802_3 | ETH_P_802_2))
    {
        return LinkEnd::NonIp(NonIp::Other);
    }
    walk_ethertype(buf, offset, protocol)
}

/// Walks a Linux SLL frame to its network layer.
pub fn walk_sll(buf: &[u8]) -> LinkEnd {
    match SllHeader::new_checked(buf) {
        Ok(h) => sll_net(buf, SllHeader::LEN, h.hatype(), h.protocol()),
        Err(_) => LinkEnd::Cut,
    }
}

/// Walks a Linux SLL2 frame to its network layer.
pub fn walk_sll2(buf: &[u8]) -> LinkEnd {
    match Sll2Header::new_checked(buf) {
        Ok(h) => sll_net(buf, Sll2Header::LEN, h.hatype(), h.protocol()),
        Err(_) => LinkEnd::Cut,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SLL_V4: [u8; 17] = [
        0x00, 0x04, // sent by us
        0x00, 0x01, // ARPHRD_ETHER
        0x00, 0x06, // address length
        0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 0x00, 0x00, // address + padding
        0x08, 0x00, // IPv4
        0x45,
    ];

    const SLL2_V6: [u8; 21] = [
        0x86, 0xdd, // IPv6
        0x00, 0x00, // reserved
        0x00, 0x00, 0x00, 0x03, // ifindex 3
        0x00, 0x01, // ARPHRD_ETHER
        0x00, // to us
        0x06, // address length
        0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 0x00, 0x00, //
        0x60,
    ];

    #[test]
    fn sll_fields() {
        let h = SllHeader::new_checked(&SLL_V4).unwrap();
        assert_eq!(h.packet_type(), 4);
        assert_eq!(h.hatype(), 1);
        assert_eq!(h.addr_len(), 6);
        assert_eq!(h.addr(), [0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 0, 0]);
        assert_eq!(h.protocol(), 0x0800);
        assert_eq!(walk_sll(&SLL_V4), LinkEnd::Ipv4(16));
        for cut in 0..16 {
            assert_eq!(walk_sll(&SLL_V4[..cut]), LinkEnd::Cut);
        }
    }

    #[test]
    fn sll2_fields() {
        let h = Sll2Header::new_checked(&SLL2_V6).unwrap();
        assert_eq!(h.protocol(), 0x86dd);
        assert_eq!(h.interface_index(), 3);
        assert_eq!(h.hatype(), 1);
        assert_eq!(h.packet_type(), 0);
        assert_eq!(h.addr_len(), 6);
        assert_eq!(h.addr()[..6], [0x52, 0x54, 0x00, 0x12, 0x34, 0x56]);
        assert_eq!(walk_sll2(&SLL2_V6), LinkEnd::Ipv6(20));
        for cut in 0..20 {
            assert_eq!(walk_sll2(&SLL2_V6[..cut]), LinkEnd::Cut);
        }
    }

    #[test]
    fn sll_non_ip() {
        let mut f = SLL_V4;
        f[14..16].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(walk_sll(&f), LinkEnd::NonIp(NonIp::EtherType(0x0806)));
        f[14..16].copy_from_slice(&[0x00, 0x0c]); // ETH_P_CAN
        assert_eq!(walk_sll(&f), LinkEnd::NonIp(NonIp::Other));
        let mut f = [0u8; 19];
        f[..14].copy_from_slice(&SLL_V4[..14]);
        f[14..16].copy_from_slice(&[0x00, 0x04]); // ETH_P_802_2: LLC, here spanning tree
        f[16..19].copy_from_slice(&[0x42, 0x42, 0x03]);
        assert_eq!(walk_sll(&f), LinkEnd::NonIp(NonIp::Llc { dsap: 0x42, ssap: 0x42 }));
        let mut snap = [0u8; 25];
        snap[..16].copy_from_slice(&f[..16]);
        snap[16..25].copy_from_slice(&[0xaa, 0xaa, 0x03, 0, 0, 0, 0x08, 0x00, 0x45]);
        assert_eq!(walk_sll(&snap), LinkEnd::Ipv4(24));
        f[14..16].copy_from_slice(&[0x00, 0x01]); // ETH_P_802_3: raw IPX
        f[16..18].copy_from_slice(&[0xff, 0xff]);
        assert_eq!(walk_sll(&f), LinkEnd::NonIp(NonIp::NovellRaw));
        let mut f = SLL_V4;
        f[2..4].copy_from_slice(&ARPHRD_NETLINK.to_be_bytes());
        assert_eq!(walk_sll(&f), LinkEnd::NonIp(NonIp::Other));
    }

    #[test]
    fn sll_vlan() {
        let mut f = [0u8; 21];
        f[..14].copy_from_slice(&SLL_V4[..14]);
        f[14..21].copy_from_slice(&[0x81, 0x00, 0x00, 0x05, 0x86, 0xdd, 0x60]);
        assert_eq!(walk_sll(&f), LinkEnd::Ipv6(20));
    }
}
