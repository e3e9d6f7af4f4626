//! Fuzz-style robustness test: random bytes, random mutations and every truncation of realistic
//! seed frames, for every supported link type. Checks that decoding never panics and that the
//! summary's invariants hold. Deterministic (fixed-seed xorshift), no extra dependencies.

use sonde_wire::{decode, flow_tuple, DecodeProblem, Fragment, LinkType, PacketSummary, Transport, Tunnel};

const LINKS: [LinkType; 13] = [
    LinkType::NULL,
    LinkType::ETHERNET,
    LinkType::RAW,
    LinkType::RAW_OPENBSD,
    LinkType::RAW_14,
    LinkType::LOOP,
    LinkType::LINUX_SLL,
    LinkType::IPV4,
    LinkType::IPV6,
    LinkType::LINUX_SLL2,
    LinkType::PPP,
    LinkType::PPP_HDLC,
    LinkType::C_HDLC,
];

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn ipv4(proto: u8, payload: &[u8]) -> Vec<u8> {
    let total = (20 + payload.len()) as u16;
    let mut v = vec![0x45, 0, 0, 0, 0x12, 0x34, 0x40, 0, 64, proto, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
    v[2..4].copy_from_slice(&total.to_be_bytes());
    v.extend_from_slice(payload);
    v
}

fn ipv6(next: u8, payload: &[u8]) -> Vec<u8> {
    let mut v = vec![0x60, 0, 0, 0, 0, 0, next, 64];
    v[4..6].copy_from_slice(&(payload.len() as u16).to_be_bytes());
    v.extend_from_slice(&[0x20, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    v.extend_from_slice(&[0x20, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    v.extend_from_slice(payload);
    v
}

fn tcp(payload_len: usize) -> Vec<u8> {
    let mut v = vec![0xc3, 0x50, 0x01, 0xbb, 0, 0, 0, 1, 0, 0, 0, 0, 0xa0, 0x12, 0xff, 0xff, 0, 0, 0, 0];
    v.extend_from_slice(&[2, 4, 5, 0xb4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 1, 3, 3, 7]);
    v.resize(v.len() + payload_len, 0xaa);
    v
}

fn udp(dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut v = vec![0x9c, 0x40, 0, 0, 0, 0, 0, 0];
    v[2..4].copy_from_slice(&dport.to_be_bytes());
    v[4..6].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    v.extend_from_slice(payload);
    v
}

fn ether(ty: u16, payload: &[u8]) -> Vec<u8> {
    let mut v = vec![0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11];
    v.extend_from_slice(&ty.to_be_bytes());
    v.extend_from_slice(payload);
    v
}

/// Realistic network-layer packets (IP first byte).
fn ip_seeds() -> Vec<Vec<u8>> {
    tunnel_seeds().into_iter().map(|(ip, _)| ip).collect()
}

/// The seeds with the tunnel each one is expected to decode through.
fn tunnel_seeds() -> Vec<(Vec<u8>, Option<Tunnel>)> {
    let inner4 = ipv4(6, &tcp(30));
    let inner6 = ipv6(17, &udp(53, &[1, 2, 3, 4]));
    let mut gre = vec![0xb0, 0, 0x08, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2];
    gre.extend_from_slice(&inner4);
    let mut teb = vec![0, 0, 0x65, 0x58];
    teb.extend_from_slice(&ether(0x86dd, &inner6));
    let mut vx = vec![0x08, 0, 0, 0, 0, 0, 1, 0];
    vx.extend_from_slice(&ether(0x8100, &[&[0, 5, 0x08, 0][..], &inner4].concat()));
    let mut gtp = vec![0x34, 0xff, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0x85, 1, 0, 1, 0];
    let gl = (gtp.len() - 8 + inner6.len()) as u16;
    gtp[2..4].copy_from_slice(&gl.to_be_bytes());
    gtp.extend_from_slice(&inner6);
    let mut ext = vec![44, 0, 1, 4, 0, 0, 0, 0, 6, 0, 0, 1, 0, 0, 0, 7];
    ext.extend_from_slice(&tcp(10));
    vec![
        (inner4.clone(), None),
        (inner6.clone(), None),
        (ipv4(1, &[8, 0, 0, 0, 0, 1, 0, 1]), None),
        (ipv6(58, &[128, 0, 0, 0, 0, 1, 0, 1]), None),
        (ipv4(47, &gre), Some(Tunnel::Gre)),
        (ipv4(47, &teb), Some(Tunnel::Gre)),
        (ipv4(17, &udp(4789, &vx)), Some(Tunnel::Vxlan)),
        (ipv4(17, &udp(2152, &gtp)), Some(Tunnel::GtpU)),
        (ipv4(4, &inner4), Some(Tunnel::IpInIp)),
        (ipv6(41, &inner6), Some(Tunnel::IpInIp)),
        (ipv6(0, &ext), None),
    ]
}

/// Puts a network-layer packet behind the given link layer.
fn framed(link: LinkType, ip: &[u8]) -> Vec<u8> {
    let v6 = ip.first().is_some_and(|b| b >> 4 == 6);
    let ty: u16 = if v6 { 0x86dd } else { 0x0800 };
    let mut head: Vec<u8> = match link {
        LinkType::ETHERNET => return ether(ty, ip),
        LinkType::NULL => (if v6 { 24u32 } else { 2 }).to_le_bytes().to_vec(),
        LinkType::LOOP => (if v6 { 30u32 } else { 2 }).to_be_bytes().to_vec(),
        LinkType::LINUX_SLL => {
            let mut h = vec![0, 0, 0, 1, 0, 6, 1, 2, 3, 4, 5, 6, 0, 0];
            h.extend_from_slice(&ty.to_be_bytes());
            h
        }
        LinkType::LINUX_SLL2 => {
            let mut h = ty.to_be_bytes().to_vec();
            h.extend_from_slice(&[0, 0, 0, 0, 0, 1, 0, 1, 0, 6, 1, 2, 3, 4, 5, 6, 0, 0]);
            h
        }
        LinkType::PPP | LinkType::PPP_HDLC => vec![0xff, 0x03, 0, if v6 { 0x57 } else { 0x21 }],
        LinkType::C_HDLC => {
            let mut h = vec![0x0f, 0];
            h.extend_from_slice(&ty.to_be_bytes());
            h
        }
        _ => Vec::new(),
    };
    head.extend_from_slice(ip);
    head
}

fn check(link: LinkType, frame: &[u8], wire_len: u32) -> PacketSummary {
    let s = decode(link, frame, wire_len).expect("supported link type");
    if s.non_ip.is_some() {
        assert!(s.ip.is_none() && s.transport.is_none() && s.problem.is_none(), "{s:?}");
    }
    if s.transport.is_some() || s.tunnel.is_some() {
        assert!(s.ip.is_some(), "{s:?}");
    }
    if let Some(ip) = s.ip {
        match s.transport {
            Some(Transport::Tcp(t)) => {
                assert!(t.payload_len <= ip.total_len, "{s:?}");
                if s.problem.is_none() {
                    assert!(t.payload_len + u32::from(t.header_len) <= ip.total_len, "{s:?}");
                    assert!(t.header_len >= 20 && t.header_len <= 60, "{s:?}");
                }
                assert!(t.options.sack_count <= 4);
            }
            Some(Transport::Udp(u)) => assert!(u.payload_len + 8 <= ip.total_len.max(8), "{s:?}"),
            _ => {}
        }
    }
    if matches!(s.problem, Some(DecodeProblem::Truncated(_))) {
        assert!(frame.len() < wire_len as usize, "truncated without a snaplen cut: {s:?}");
    }
    // Readers that split the flows pass over other readers' packets by this tuple alone: it
    // must be the walk's, and only for a whole, untunnelled TCP or UDP packet.
    if let Some(t) = flow_tuple(link, frame, wire_len) {
        let ports = match s.transport {
            Some(Transport::Tcp(p)) => Some((6, p.src_port, p.dst_port)),
            Some(Transport::Udp(p)) => Some((17, p.src_port, p.dst_port)),
            _ => None,
        };
        let ip = s.ip.map(|ip| (ip.src, ip.dst, ip.fragment));
        assert_eq!(
            (ports, ip, s.tunnel),
            (Some((t.protocol, t.src_port, t.dst_port)), Some((t.ip(t.src), t.ip(t.dst), Fragment::No)), None),
            "{link:?} {frame:02x?}: {t:?} against {s:?}"
        );
    }
    s
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut buf = [0u8; 256];
    for _ in 0..200_000 {
        let len = rng.below(buf.len() + 1);
        for b in buf.iter_mut().take(len) {
            *b = rng.next() as u8;
        }
        let link = LINKS[rng.below(LINKS.len())];
        let wire = len as u32 + if rng.below(2) == 0 { 0 } else { rng.below(2000) as u32 };
        check(link, &buf[..len], wire);
    }
    // Some unsupported types.
    for t in [2u32, 105, 127, 147, 65535] {
        assert!(decode(LinkType(t), &buf, 256).is_err());
    }
}

#[test]
fn every_truncation_of_seed_frames() {
    for link in LINKS {
        for (ip, tunnel) in tunnel_seeds() {
            let frame = framed(link, &ip);
            let full = check(link, &frame, frame.len() as u32);
            assert!(full.ip.is_some(), "{link:?}: {full:?}");
            assert_eq!(full.problem, None, "{link:?}: {full:?}");
            assert_eq!(full.tunnel, tunnel, "{link:?}: {full:?}");
            assert!(matches!(full.transport, Some(Transport::Tcp(_) | Transport::Udp(_) | Transport::Icmp { .. })));
            for cut in 0..frame.len() {
                // Snaplen cut: byte counts unchanged whenever the same packet is reported.
                let s = check(link, &frame[..cut], frame.len() as u32);
                if let (Some(a), Some(b)) = (s.ip, full.ip) {
                    if s.tunnel == full.tunnel && a.src == b.src {
                        assert_eq!(a.total_len, b.total_len, "{link:?} cut {cut}");
                    }
                }
                if let (Some(Transport::Tcp(a)), Some(Transport::Tcp(b))) = (s.transport, full.transport) {
                    if s.problem.is_none() {
                        assert_eq!(a.payload_len, b.payload_len, "{link:?} cut {cut}");
                    }
                }
                // Broken capture of the same prefix.
                check(link, &frame[..cut], cut as u32);
            }
        }
    }
}

#[test]
fn mutated_seed_frames() {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut tuples = 0u32;
    let seeds: Vec<(LinkType, Vec<u8>)> =
        LINKS.iter().flat_map(|&l| ip_seeds().into_iter().map(move |ip| (l, framed(l, &ip)))).collect();
    for _ in 0..300_000 {
        let (link, seed) = &seeds[rng.below(seeds.len())];
        let mut f = seed.clone();
        for _ in 0..1 + rng.below(4) {
            let at = rng.below(f.len());
            match rng.below(3) {
                0 => f[at] ^= 1 << rng.below(8),
                1 => f[at] = rng.next() as u8,
                _ => f[at] = [0, 0xff, 0x45, 0x60, 0x81, 0x88][rng.below(6)],
            }
        }
        let cut = if rng.below(3) == 0 { rng.below(f.len() + 1) } else { f.len() };
        let wire = if rng.below(2) == 0 { f.len() } else { cut } as u32;
        check(*link, &f[..cut], wire);
        tuples += u32::from(flow_tuple(*link, &f[..cut], wire).is_some());
    }
    // `check` compares the flow tuple with the walk: on many frames, the rest not plain.
    assert!((20_000..200_000).contains(&tuples), "{tuples} flow tuples in 300,000 frames");
}
