//! Flow identity: a bidirectional 5-tuple, stored in a canonical order so that both directions
//! of a conversation map to the same key (and the same hash, which the dispatcher relies on).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A bidirectional 5-tuple. Addresses are kept as plain integers (IPv4 in the low 32 bits,
/// `v6` telling the families apart), so building, comparing and hashing a key is a few integer
/// operations; the derived order is `IpAddr`'s (IPv4 first, then by address and port).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowKey {
    pub protocol: u8,
    v6: bool,
    lo_ip: Addr,
    lo_port: u16,
    hi_ip: Addr,
    hi_port: u16,
}

/// An address as a 128-bit integer in two halves (8-byte aligned, unlike `u128`, which keeps
/// the key at 40 bytes); ordered as the integer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Addr {
    high: u64,
    low: u64,
}

impl Addr {
    fn of(ip: IpAddr) -> Addr {
        let (_, (high, low)) = ip_order_key(ip);
        Addr { high, low }
    }

    fn of_bits(bits: u128) -> Addr {
        Addr { high: (bits >> 64) as u64, low: bits as u64 }
    }

    fn bits(self) -> u128 {
        u128::from(self.high) << 64 | u128::from(self.low)
    }

    fn ip(self, v6: bool) -> IpAddr {
        if v6 {
            IpAddr::V6(Ipv6Addr::from(u128::from(self.high) << 64 | u128::from(self.low)))
        } else {
            IpAddr::V4(Ipv4Addr::from(self.low as u32))
        }
    }
}

/// A packet's flow identity, computed once per packet: the dispatcher needs the hash to pick a
/// worker, and the worker's table the key, the hash and the direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketKey {
    pub(crate) key: FlowKey,
    pub(crate) order: KeyOrder,
    pub(crate) hash: u64,
    /// Where the flow table looks for the key: [`FlowKey::place`].
    pub(crate) place: u64,
}

impl PacketKey {
    /// A placeholder (for buffers filled later).
    pub const EMPTY: PacketKey = PacketKey {
        key: FlowKey {
            protocol: 0,
            v6: false,
            lo_ip: Addr { high: 0, low: 0 },
            lo_port: 0,
            hi_ip: Addr { high: 0, low: 0 },
            hi_port: 0,
        },
        order: KeyOrder::LoToHi,
        hash: 0,
        place: 0,
    };

    pub fn new(protocol: u8, src: (IpAddr, u16), dst: (IpAddr, u16)) -> PacketKey {
        let (key, order) = FlowKey::new(protocol, src, dst);
        PacketKey { key, order, hash: key.hash64(), place: key.place() }
    }

    /// As [`PacketKey::new`], given the key and order ([`FlowKey::of_integers`]) and the
    /// [`FlowKey::hash64`] already found (a reader that splits the flows hashes every packet's
    /// key to tell whose it is, and places only its own).
    pub fn of_hashed(key: FlowKey, order: KeyOrder, hash: u64) -> PacketKey {
        debug_assert_eq!(hash, key.hash64());
        PacketKey { key, order, hash, place: key.place() }
    }

    pub fn hash(&self) -> u64 {
        self.hash
    }

    /// Which way the packet goes relative to its key.
    pub fn order(&self) -> KeyOrder {
        self.order
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
    /// The key of a packet from `src` to `dst` (both of one family, as in any IP header), and
    /// which way the packet goes.
    pub fn new(protocol: u8, src: (IpAddr, u16), dst: (IpAddr, u16)) -> (FlowKey, KeyOrder) {
        let v6 = src.0.is_ipv6() || dst.0.is_ipv6();
        FlowKey::of_integers(protocol, v6, (Addr::of(src.0).bits(), src.1), (Addr::of(dst.0).bits(), dst.1))
    }

    /// As [`FlowKey::new`], from addresses given as integers (IPv4 in the low 32 bits).
    #[inline]
    pub fn of_integers(protocol: u8, v6: bool, src: (u128, u16), dst: (u128, u16)) -> (FlowKey, KeyOrder) {
        let (lo, hi, order) = if src <= dst { (src, dst, KeyOrder::LoToHi) } else { (dst, src, KeyOrder::HiToLo) };
        let (lo_ip, hi_ip) = (Addr::of_bits(lo.0), Addr::of_bits(hi.0));
        (FlowKey { protocol, v6, lo_ip, lo_port: lo.1, hi_ip, hi_port: hi.1 }, order)
    }

    /// The lower (address, port) endpoint.
    pub fn lo(&self) -> (IpAddr, u16) {
        (self.lo_ip.ip(self.v6), self.lo_port)
    }

    /// The (client, server) endpoints of a flow whose client is the lower endpoint or not.
    pub fn client_server(&self, client_is_lo: bool) -> ((IpAddr, u16), (IpAddr, u16)) {
        if client_is_lo {
            (self.lo(), self.hi())
        } else {
            (self.hi(), self.lo())
        }
    }

    /// The higher (address, port) endpoint.
    pub fn hi(&self) -> (IpAddr, u16) {
        (self.hi_ip.ip(self.v6), self.hi_port)
    }

    /// A 64-bit hash, equal for both directions by construction (the key is canonical). Two
    /// folded multiplications over the addresses, ports and protocol: a few cycles, and good
    /// low bits for indexing the table.
    pub fn hash64(&self) -> u64 {
        let (lo, hi) = (self.lo_ip.high ^ self.lo_ip.low, self.hi_ip.high ^ self.hi_ip.low);
        let ports = u64::from(self.lo_port) << 32 | u64::from(self.hi_port) << 16 | u64::from(self.protocol);
        mix(mix(lo, hi), ports)
    }

    /// The key's position hash in the flow tables: keyed by a secret drawn once per run, over
    /// every half of both addresses, so that a flood cannot be crafted to share a probe
    /// sequence (with [`FlowKey::hash64`], which folds each address's halves together and is
    /// the same in every run, any IPv6 addresses with equal folds collide). Where a flow sits
    /// in a table never shows in an output; the workers, which do (their order of work), are
    /// picked by `hash64`.
    #[inline]
    pub fn place(&self) -> u64 {
        let seed = run_seed();
        let ports = u64::from(self.lo_port) << 32 | u64::from(self.hi_port) << 16 | u64::from(self.protocol);
        let lo = mix(self.lo_ip.high ^ seed[0], self.lo_ip.low ^ seed[1]);
        let hi = mix(self.hi_ip.high ^ seed[2], self.hi_ip.low ^ seed[3]);
        mix(lo ^ ports, hi ^ u64::from(self.v6))
    }
}

/// This run's secret for [`FlowKey::place`], from the operating system's random source (std's
/// `RandomState`, which SipHash's keys come from too).
fn run_seed() -> &'static [u64; 4] {
    use std::hash::BuildHasher as _;
    static SEED: std::sync::OnceLock<[u64; 4]> = std::sync::OnceLock::new();
    SEED.get_or_init(|| {
        let random = std::hash::RandomState::new();
        [0u64, 1, 2, 3].map(|i| random.hash_one(i))
    })
}

/// wyhash's folded multiply: the 128-bit product's halves xored.
fn mix(a: u64, b: u64) -> u64 {
    let m = u128::from(a ^ 0xa076_1d64_78bd_642f).wrapping_mul(u128::from(b ^ 0xe703_7ed1_a0b4_28db));
    (m as u64) ^ (m >> 64) as u64
}

/// An address as (family, value as high and low 64 bits), ordered as `IpAddr`'s `Ord`: a cheap
/// sort key, 8-byte aligned (a `u128` would align a struct holding it to 16).
pub fn ip_order_key(ip: IpAddr) -> (u8, (u64, u64)) {
    let (family, bits) = match ip {
        IpAddr::V4(a) => (4, u128::from(u32::from(a))),
        IpAddr::V6(a) => (6, u128::from(a)),
    };
    (family, ((bits >> 64) as u64, bits as u64))
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
    fn keys_order_and_give_back_their_endpoints_as_ip_addr_does() {
        let families =
            [&["10.0.0.1", "10.0.0.2", "9.255.255.255", "255.255.255.255"][..], &["::1", "fd77::2", "::ffff:10.0.0.1"]];
        let mut keys = Vec::new();
        for ips in families {
            for a in ips {
                for b in ips {
                    for (pa, pb) in [(1, 2), (80, 40000)] {
                        let (a, b): (IpAddr, IpAddr) = (a.parse().unwrap(), b.parse().unwrap());
                        let (key, order) = FlowKey::new(6, (a, pa), (b, pb));
                        let bits = |ip: IpAddr| match ip {
                            IpAddr::V4(v4) => u128::from(u32::from(v4)),
                            IpAddr::V6(v6) => u128::from(v6),
                        };
                        let v6 = a.is_ipv6();
                        assert_eq!(FlowKey::of_integers(6, v6, (bits(a), pa), (bits(b), pb)), (key, order));
                        let expected = if (a, pa) <= (b, pb) { ((a, pa), (b, pb)) } else { ((b, pb), (a, pa)) };
                        assert_eq!((key.lo(), key.hi()), expected);
                        keys.push(key);
                    }
                }
            }
        }
        let mut by_endpoints = keys.clone();
        by_endpoints.sort_by_key(|k| (k.lo(), k.hi()));
        keys.sort();
        assert_eq!(keys, by_endpoints);
    }
}
