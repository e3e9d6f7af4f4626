//! Community ID v1 (<https://github.com/corelight/community-id-spec>): one string per flow, the
//! same in both directions and across tools (Zeek, Suricata, Wireshark's `communityid` field,
//! NFStream), so a sonde record can be joined with their logs.
//!
//! The hash input, all in network byte order: the 2-byte seed, the source then the destination
//! address (4 or 16 bytes), the IP protocol (1 byte), a zero byte, and for TCP, UDP, SCTP, ICMP
//! and ICMPv6 the source then the destination port (2 bytes each). The endpoints are ordered
//! first: the smaller address first, the smaller port first when the addresses are equal. The
//! result is `1:` and the base64 of the SHA-1 of that input.
//!
//! ICMP has no ports: the spec takes the type and code instead, with a twist (Zeek's
//! `ICMP4_counterpart`/`ICMP6_counterpart`): a request/reply type's "destination port" is its
//! counterpart type, so request and reply get one ID; other types are one-way, keep the code as
//! destination port, and are not reordered. See [`community_id_icmp`].

use std::net::IpAddr;

use base64::Engine as _;
use sha1::{Digest, Sha1};

/// IP protocol numbers whose flows carry ports in the hash.
const ICMP: u8 = 1;
const TCP: u8 = 6;
const UDP: u8 = 17;
const ICMPV6: u8 = 58;
const SCTP: u8 = 132;

/// The Community ID v1 of a flow (`1:` and the base64 of a SHA-1), with `seed` (0 by default).
///
/// `src` and `dst` are the endpoints as seen in one packet (either direction gives the same
/// ID). Ports are hashed for TCP (6), UDP (17) and SCTP (132) and ignored for protocols other
/// than these and the ICMPs. For ICMP (1) and ICMPv6 (58) pass the packet's **type as the source
/// port and its code as the destination port**: the spec's type/code mapping is applied here
/// (as [`community_id_icmp`] does). An IPv4 source with an IPv6 destination (no real packet has
/// that) is hashed as given.
pub fn community_id(protocol: u8, src: (IpAddr, u16), dst: (IpAddr, u16), seed: u16) -> CommunityId {
    match protocol {
        ICMP | ICMPV6 => community_id_icmp(protocol == ICMPV6, src.0, dst.0, src.1 as u8, dst.1 as u8, seed),
        TCP | UDP | SCTP => {
            let (a, b) = if ordered(src, dst) { (src, dst) } else { (dst, src) };
            hash(seed, a.0, b.0, protocol, Some((a.1, b.1)))
        }
        _ => {
            let (a, b) = if ordered((src.0, 0), (dst.0, 0)) { (src.0, dst.0) } else { (dst.0, src.0) };
            hash(seed, a, b, protocol, None)
        }
    }
}

/// The Community ID v1 of an ICMP (`v6` false) or ICMPv6 packet of type `icmp_type` and code
/// `code` from `src` to `dst`.
///
/// Spec: a type with a counterpart (echo request/reply, timestamp, information, address mask,
/// router solicitation → advertisement; for ICMPv6 echo, router and neighbor solicitation /
/// advertisement, MLD query/report, node information, home agent address discovery) hashes as
/// ports (type, counterpart) and is ordered like TCP, so both directions share an ID; any other
/// type is one-way: ports (type, code), never reordered. As in the reference implementation,
/// an ICMPv4 router advertisement (9) has no counterpart.
pub fn community_id_icmp(v6: bool, src: IpAddr, dst: IpAddr, icmp_type: u8, code: u8, seed: u16) -> CommunityId {
    let (protocol, counterpart) =
        if v6 { (ICMPV6, icmp6_counterpart(icmp_type)) } else { (ICMP, icmp4_counterpart(icmp_type)) };
    let (sport, dport, one_way) = match counterpart {
        Some(c) => (u16::from(icmp_type), u16::from(c), false),
        None => (u16::from(icmp_type), u16::from(code), true),
    };
    let (a, b) = if one_way || ordered((src, sport), (dst, dport)) {
        ((src, sport), (dst, dport))
    } else {
        ((dst, dport), (src, sport))
    };
    hash(seed, a.0, b.0, protocol, Some((a.1, b.1)))
}

/// Zeek's ICMP4_counterpart: the reply type of a request and the reverse.
fn icmp4_counterpart(t: u8) -> Option<u8> {
    Some(match t {
        8 => 0,   // echo → echo reply
        0 => 8,   // echo reply → echo
        13 => 14, // timestamp
        14 => 13,
        15 => 16, // information request
        16 => 15,
        10 => 9,  // router solicitation → advertisement (not the reverse)
        17 => 18, // address mask
        18 => 17,
        _ => return None,
    })
}

/// Zeek's ICMP6_counterpart.
fn icmp6_counterpart(t: u8) -> Option<u8> {
    Some(match t {
        128 => 129, // echo request
        129 => 128,
        133 => 134, // router solicitation
        134 => 133,
        135 => 136, // neighbor solicitation
        136 => 135,
        130 => 131, // MLD listener query
        131 => 130,
        139 => 140, // node information (who are you)
        140 => 139,
        144 => 145, // home agent address discovery
        145 => 144,
        _ => return None,
    })
}

/// The spec's order: the smaller address first; with equal addresses, the smaller port first.
fn ordered(a: (IpAddr, u16), b: (IpAddr, u16)) -> bool {
    let (aa, ba) = (addr_octets(a.0), addr_octets(b.0));
    aa.as_slice() < ba.as_slice() || (aa.as_slice() == ba.as_slice() && a.1 < b.1)
}

/// An address's bytes in network order (4 or 16 of them) without allocating.
fn addr_octets(a: IpAddr) -> AddrBytes {
    match a {
        IpAddr::V4(v4) => AddrBytes {
            buf: {
                let mut b = [0; 16];
                b[..4].copy_from_slice(&v4.octets());
                b
            },
            len: 4,
        },
        IpAddr::V6(v6) => AddrBytes { buf: v6.octets(), len: 16 },
    }
}

struct AddrBytes {
    buf: [u8; 16],
    len: usize,
}

impl AddrBytes {
    fn as_slice(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

fn hash(seed: u16, a: IpAddr, b: IpAddr, protocol: u8, ports: Option<(u16, u16)>) -> CommunityId {
    // The hashed bytes laid out once (at most 2 + 16 + 16 + 2 + 4) and hashed in one call: a
    // digest update per field cost ~400 instructions a flow more.
    let mut input = [0u8; 40];
    let mut len = 0;
    let mut put = |bytes: &[u8]| {
        input[len..len + bytes.len()].copy_from_slice(bytes);
        len += bytes.len();
    };
    put(&seed.to_be_bytes());
    put(addr_octets(a).as_slice());
    put(addr_octets(b).as_slice());
    put(&[protocol, 0]);
    if let Some((sp, dp)) = ports {
        put(&sp.to_be_bytes());
        put(&dp.to_be_bytes());
    }
    let digest = Sha1::digest(&input[..len]);
    let mut text = [0u8; CommunityId::LEN];
    text[..2].copy_from_slice(b"1:");
    base64::engine::general_purpose::STANDARD
        .encode_slice(digest, &mut text[2..])
        .expect("a SHA-1 digest's base64 is 28 bytes");
    CommunityId(text)
}

/// A Community ID v1: `1:` and the 28 characters of a SHA-1's base64, kept inline (a flow's is
/// made without allocating, and copied as a value).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct CommunityId([u8; CommunityId::LEN]);

impl CommunityId {
    /// Its length in bytes: every v1 ID has 30.
    pub const LEN: usize = 30;

    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).expect("`1:` and base64 are ASCII")
    }

    /// The text's bytes (ASCII), without [`CommunityId::as_str`]'s check.
    pub fn as_bytes(&self) -> &[u8; CommunityId::LEN] {
        &self.0
    }
}

impl std::fmt::Display for CommunityId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Debug for CommunityId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

impl PartialEq<&str> for CommunityId {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    /// The spec's baseline (baseline/baseline_deflt.json and baseline_seed1.json of
    /// corelight/community-id-spec): protocol, source, destination, ports (for the ICMPs: the
    /// packet's type and code), ID with seed 0, ID with seed 1.
    const BASELINE: &[(u8, &str, &str, u16, u16, &str, &str)] = &[
        (
            58,
            "fe80::200:86ff:fe05:80da",
            "fe80::260:97ff:fe07:69ea",
            135,
            0,
            "1:dGHyGvjMfljg6Bppwm3bg0LO8TY=",
            "1:kHa1FhMYIT6Ym2Vm2AOtoOARDzY=",
        ),
        (
            58,
            "fe80::260:97ff:fe07:69ea",
            "fe80::200:86ff:fe05:80da",
            136,
            0,
            "1:dGHyGvjMfljg6Bppwm3bg0LO8TY=",
            "1:kHa1FhMYIT6Ym2Vm2AOtoOARDzY=",
        ),
        (
            58,
            "fe80::260:97ff:fe07:69ea",
            "fe80::200:86ff:fe05:80da",
            135,
            0,
            "1:zavyT/cezQr1fmImYCwYnMXbgck=",
            "1:2hSqmsDZ2kdcY9kbiUzOEBic0iM=",
        ),
        (
            58,
            "fe80::200:86ff:fe05:80da",
            "fe80::260:97ff:fe07:69ea",
            136,
            0,
            "1:zavyT/cezQr1fmImYCwYnMXbgck=",
            "1:2hSqmsDZ2kdcY9kbiUzOEBic0iM=",
        ),
        (
            58,
            "3ffe:501:1800:2345::2",
            "3ffe:507:0:1:200:86ff:fe05:80da",
            3,
            0,
            "1:2ObVBgIn28oZvibYZhZMBgh7WdQ=",
            "1:lVEtCZpYu84Xqaa++3lXFyuu2n4=",
        ),
        (
            58,
            "3ffe:501:410:0:2c0:dfff:fe47:33e",
            "3ffe:507:0:1:200:86ff:fe05:80da",
            1,
            4,
            "1:hLZd0XGWojozrvxqE0dWB1iM6R0=",
            "1:W8MHwXpWzpoSTD+cGcaJr4u0ys8=",
        ),
        (
            58,
            "3ffe:507:0:1:200:86ff:fe05:80da",
            "3ffe:501:0:1001::2",
            128,
            0,
            "1:+TW+HtLHvV1xnGhV1lv7XoJrqQg=",
            "1:GfZxjAkDk2MkegpBYHV6tadtFXQ=",
        ),
        (
            58,
            "3ffe:501:0:1001::2",
            "3ffe:507:0:1:200:86ff:fe05:80da",
            129,
            0,
            "1:+TW+HtLHvV1xnGhV1lv7XoJrqQg=",
            "1:GfZxjAkDk2MkegpBYHV6tadtFXQ=",
        ),
        (
            58,
            "fe80::200:86ff:fe05:80da",
            "ff02::2",
            133,
            0,
            "1:hO+sN4H+MG5MY/8hIrXPqc4ZQz0=",
            "1:L7Ka0ZMYu+J3bL4ulW2PrqyXNo8=",
        ),
        (
            58,
            "fe80::260:97ff:fe07:69ea",
            "ff02::1",
            134,
            0,
            "1:pkvHqCL88/tg1k4cPigmZXUtL00=",
            "1:K/ee5UCqAMAQXDorP5nSa2CGLjc=",
        ),
        (1, "192.168.0.89", "192.168.0.1", 8, 0, "1:X0snYXpgwiv9TZtqg64sgzUn6Dk=", "1:03g6IloqVBdcZlPyX8r0hgoE7kA="),
        (1, "192.168.0.1", "192.168.0.89", 0, 0, "1:X0snYXpgwiv9TZtqg64sgzUn6Dk=", "1:03g6IloqVBdcZlPyX8r0hgoE7kA="),
        (1, "10.0.0.1", "10.0.0.2", 11, 0, "1:YHxtAirCG//0OzkcVAukqKQN9xM=", "1:XjUibYHaafLQ3pxQeiMI8g25q20="),
        (
            6,
            "2001:470:e5bf:dead:4957:2174:e82c:4887",
            "2607:f8b0:400c:c03::1a",
            63943,
            25,
            "1:/qFaeAR+gFe1KYjMzVDsMv+wgU4=",
            "1:eJYTW6AOzFLlSUoESovMjnu7rMw=",
        ),
        (
            6,
            "2607:f8b0:400c:c03::1a",
            "2001:470:e5bf:dead:4957:2174:e82c:4887",
            25,
            63943,
            "1:/qFaeAR+gFe1KYjMzVDsMv+wgU4=",
            "1:eJYTW6AOzFLlSUoESovMjnu7rMw=",
        ),
        (
            132,
            "192.168.170.8",
            "192.168.170.56",
            7,
            7,
            "1:MP2EtRCAUIZvTw6MxJHLV7N7JDs=",
            "1:5w3ZRjeKBzqT3zsaEECDGjUbYeg=",
        ),
        (
            132,
            "192.168.170.56",
            "192.168.170.8",
            7,
            7,
            "1:MP2EtRCAUIZvTw6MxJHLV7N7JDs=",
            "1:5w3ZRjeKBzqT3zsaEECDGjUbYeg=",
        ),
        (
            6,
            "128.232.110.120",
            "66.35.250.204",
            34855,
            80,
            "1:LQU9qZlK+B5F3KDmev6m5PMibrg=",
            "1:3V71V58M3Ksw/yuFALMcW0LAHvc=",
        ),
        (
            6,
            "66.35.250.204",
            "128.232.110.120",
            80,
            34855,
            "1:LQU9qZlK+B5F3KDmev6m5PMibrg=",
            "1:3V71V58M3Ksw/yuFALMcW0LAHvc=",
        ),
        (17, "192.168.1.52", "8.8.8.8", 54585, 53, "1:d/FP5EW3wiY1vCndhwleRRKHowQ=", "1:Q9We8WO3piVF8yEQBNJF4uiSVrI="),
        (17, "8.8.8.8", "192.168.1.52", 53, 54585, "1:d/FP5EW3wiY1vCndhwleRRKHowQ=", "1:Q9We8WO3piVF8yEQBNJF4uiSVrI="),
        // RSVP: no ports; whatever is passed is ignored.
        (46, "10.1.12.1", "10.1.12.2", 1, 2, "1:KHlLkgoJW7ifUTyTSgyVfkFHzKw=", "1:rYir8gphR31noO9iDRQmF/BteEI="),
        (46, "10.1.12.2", "10.1.12.1", 0, 0, "1:KHlLkgoJW7ifUTyTSgyVfkFHzKw=", "1:rYir8gphR31noO9iDRQmF/BteEI="),
    ];

    #[test]
    fn the_specs_baseline() {
        for &(proto, s, d, sp, dp, id0, id1) in BASELINE {
            assert_eq!(community_id(proto, (ip(s), sp), (ip(d), dp), 0), id0, "{proto} {s}:{sp} -> {d}:{dp}");
            assert_eq!(community_id(proto, (ip(s), sp), (ip(d), dp), 1), id1, "{proto} {s}:{sp} -> {d}:{dp} seed 1");
            if proto == 1 || proto == 58 {
                let icmp = community_id_icmp(proto == 58, ip(s), ip(d), sp as u8, dp as u8, 0);
                assert_eq!(icmp, id0);
            }
        }
    }

    #[test]
    fn one_way_icmp_is_not_reordered() {
        // Destination unreachable from the larger address: (type, code) kept as sent.
        let a = community_id_icmp(false, ip("10.0.0.2"), ip("10.0.0.1"), 3, 1, 0);
        let b = community_id_icmp(false, ip("10.0.0.1"), ip("10.0.0.2"), 3, 1, 0);
        assert_ne!(a, b);
        // A router advertisement has no counterpart in v4, one in v6.
        let adv = community_id_icmp(false, ip("10.0.0.1"), ip("10.0.0.2"), 9, 0, 0);
        let sol = community_id_icmp(false, ip("10.0.0.2"), ip("10.0.0.1"), 10, 0, 0);
        assert_ne!(adv, sol);
        let adv6 = community_id_icmp(true, ip("fe80::1"), ip("fe80::2"), 134, 0, 0);
        let sol6 = community_id_icmp(true, ip("fe80::2"), ip("fe80::1"), 133, 0, 0);
        assert_eq!(adv6, sol6);
    }

    #[test]
    fn equal_addresses_order_by_port() {
        let a = community_id(6, (ip("127.0.0.1"), 5000), (ip("127.0.0.1"), 80), 0);
        let b = community_id(6, (ip("127.0.0.1"), 80), (ip("127.0.0.1"), 5000), 0);
        assert_eq!(a, b);
        assert_eq!(a.as_str().len(), CommunityId::LEN);
    }
}
