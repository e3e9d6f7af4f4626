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

    /// A 64-bit hash, equal for both directions by construction (the key is canonical).
    pub fn hash64(&self) -> u64 {
        let mut h = rustc_hash::FxHasher::default();
        self.hash(&mut h);
        // Fx leaves weak low bits for table indexing; fold the high half in.
        let x = h.finish();
        x ^ (x >> 29) ^ (x >> 47)
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
}
