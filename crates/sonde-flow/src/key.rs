//! Flow identity: a bidirectional 5-tuple, stored in a canonical order so that both directions
//! of a conversation map to the same key (and the same hash, which the dispatcher relies on).

use std::hash::{Hash, Hasher};
use std::net::IpAddr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowKey {
    pub protocol: u8,
    /// The lower (address, port) endpoint.
    pub lo: (IpAddr, u16),
    /// The higher (address, port) endpoint.
    pub hi: (IpAddr, u16),
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

    /// A 64-bit hash, equal for both directions by construction (the key is canonical).
    pub fn hash64(&self) -> u64 {
        let mut h = rustc_hash::FxHasher::default();
        self.hash(&mut h);
        // Fx leaves weak low bits for table indexing; fold the high half in.
        let x = h.finish();
        x ^ (x >> 29) ^ (x >> 47)
    }
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
