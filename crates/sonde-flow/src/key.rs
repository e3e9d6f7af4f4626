//! Flow identity: a bidirectional 5-tuple, stored in a canonical order so that both directions
//! of a conversation map to the same key (and the same hash, which the dispatcher relies on).

use std::net::{IpAddr, Ipv4Addr};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowKey {
    pub protocol: u8,
    /// The lower (address, port) endpoint.
    pub lo: (IpAddr, u16),
    /// The higher (address, port) endpoint.
    pub hi: (IpAddr, u16),
}

/// A packet's flow identity, computed once per packet: the dispatcher needs the hash to pick a
/// worker, and the worker's table the key, the hash and the direction.
#[derive(Debug, Clone, Copy)]
pub struct PacketKey {
    pub(crate) key: FlowKey,
    pub(crate) order: KeyOrder,
    pub(crate) hash: u64,
}

impl PacketKey {
    /// A placeholder (for buffers filled later).
    pub const EMPTY: PacketKey = PacketKey {
        key: FlowKey {
            protocol: 0,
            lo: (IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0),
            hi: (IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0),
        },
        order: KeyOrder::LoToHi,
        hash: 0,
    };

    pub fn new(protocol: u8, src: (IpAddr, u16), dst: (IpAddr, u16)) -> PacketKey {
        let (key, order) = FlowKey::new(protocol, src, dst);
        PacketKey { key, order, hash: key.hash64() }
    }

    pub fn hash(&self) -> u64 {
        self.hash
    }
}

/// Which way a packet travels relative to the key's canonical order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyOrder {
    /// The packet goes from `lo` to `hi`.
    LoToHi,
    HiToLo,
}

impl FlowKey {
    pub fn new(protocol: u8, src: (IpAddr, u16), dst: (IpAddr, u16)) -> (FlowKey, KeyOrder) {
        if src <= dst {
            (FlowKey { protocol, lo: src, hi: dst }, KeyOrder::LoToHi)
        } else {
            (FlowKey { protocol, lo: dst, hi: src }, KeyOrder::HiToLo)
        }
    }

    /// The key as plain integers, ordered exactly as `FlowKey`'s `Ord` (IPv4 before IPv6, then
    /// by address and port), and much cheaper to sort by.
    pub fn order_key(&self) -> (u8, (u8, u128), u16, (u8, u128), u16) {
        (self.protocol, ip_order_key(self.lo.0), self.lo.1, ip_order_key(self.hi.0), self.hi.1)
    }

    /// A 64-bit hash, equal for both directions by construction (the key is canonical). Two
    /// folded multiplications over the addresses, ports and protocol: a few cycles, and good
    /// low bits for indexing the table.
    pub fn hash64(&self) -> u64 {
        let fold = |ip: IpAddr| {
            let (_, bits) = ip_order_key(ip);
            (bits as u64) ^ (bits >> 64) as u64
        };
        let ports = u64::from(self.lo.1) << 32 | u64::from(self.hi.1) << 16 | u64::from(self.protocol);
        mix(mix(fold(self.lo.0), fold(self.hi.0)), ports)
    }
}

/// wyhash's folded multiply: the 128-bit product's halves xored.
fn mix(a: u64, b: u64) -> u64 {
    let m = u128::from(a ^ 0xa076_1d64_78bd_642f).wrapping_mul(u128::from(b ^ 0xe703_7ed1_a0b4_28db));
    (m as u64) ^ (m >> 64) as u64
}

/// An address as (family, value), ordered as `IpAddr`'s `Ord`.
pub fn ip_order_key(ip: IpAddr) -> (u8, u128) {
    match ip {
        IpAddr::V4(a) => (4, u128::from(u32::from(a))),
        IpAddr::V6(a) => (6, u128::from(a)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_directions_give_one_key_and_hash() {
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let (k1, o1) = FlowKey::new(6, (a, 40000), (b, 80));
        let (k2, o2) = FlowKey::new(6, (b, 80), (a, 40000));
        assert_eq!(k1, k2);
        assert_eq!(k1.hash64(), k2.hash64());
        assert_ne!(o1, o2);
    }

    #[test]
    fn order_key_orders_as_the_key() {
        let ips = ["10.0.0.1", "10.0.0.2", "9.255.255.255", "::1", "fd77::2", "255.255.255.255"];
        let mut keys = Vec::new();
        for a in ips {
            for b in ips {
                for (pa, pb) in [(1, 2), (80, 40000)] {
                    keys.push(FlowKey::new(6, (a.parse().unwrap(), pa), (b.parse().unwrap(), pb)).0);
                }
            }
        }
        let mut by_key = keys.clone();
        by_key.sort();
        keys.sort_by_key(|k| k.order_key());
        assert_eq!(keys, by_key);
    }
}
