//! Unit tests on literal frames. Each case builds a packet with correct checksums from its
//! addresses, and expects the rewrite of it to equal the same packet built from the mapped
//! addresses: that checks the addresses, every checksum and every other byte at once.

use super::*;
use sonde_anon::{Key, Mode};

const V4_A: [u8; 4] = [192, 0, 2, 1];
const V4_B: [u8; 4] = [198, 51, 100, 7];
const V4_C: [u8; 4] = [203, 0, 113, 9];
const V4_D: [u8; 4] = [10, 1, 2, 3];
const V6_A: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
const V6_B: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 0, 0, 0, 0, 0, 0xab, 0xcd, 0, 2];

fn anonymizer() -> Anonymizer {
    Anonymizer::new(Mode::CryptoPan, &Key::from_bytes(std::array::from_fn(|i| i as u8 * 7 + 1)))
}

fn m4(a: [u8; 4]) -> [u8; 4] {
    anonymizer().ipv4(a)
}

fn m6(a: [u8; 16]) -> [u8; 16] {
    anonymizer().ipv6(a)
}

/// The naive Internet checksum (word by word), independent of the crate's.
fn cksum(parts: &[&[u8]]) -> u16 {
    let bytes: Vec<u8> = parts.concat();
    let mut acc: u32 = 0;
    for w in bytes.chunks(2) {
        acc += u32::from(w[0]) << 8 | u32::from(*w.get(1).unwrap_or(&0));
    }
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    !(acc as u16)
}

fn tcp(payload: &[u8]) -> Vec<u8> {
    let mut h = vec![0x9c, 0x40, 0x01, 0xbb, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x18, 0xff, 0xff, 0, 0, 0, 0];
    h.extend_from_slice(payload);
    h
}

fn udp(src_port: u16, dst_port: u16, payload: &[u8]) -> Vec<u8> {
    let mut h = Vec::new();
    h.extend_from_slice(&src_port.to_be_bytes());
    h.extend_from_slice(&dst_port.to_be_bytes());
    h.extend_from_slice(&(8 + payload.len() as u16).to_be_bytes());
    h.extend_from_slice(&[0, 0]);
    h.extend_from_slice(payload);
    h
}

/// Where a protocol's checksum is, and whether it has a pseudo-header (IPv4 / IPv6).
fn check_at(protocol: u8, v6: bool) -> Option<(usize, bool)> {
    match protocol {
        6 => Some((16, true)),
        17 => Some((6, true)),
        1 if !v6 => Some((2, false)),
        58 if v6 => Some((2, true)),
        _ => None,
    }
}

fn fill_l4(seg: &mut [u8], protocol: u8, pseudo: &[u8]) {
    if let Some((at, with_pseudo)) = check_at(protocol, pseudo.len() > 12) {
        seg[at..at + 2].fill(0);
        let ck = if with_pseudo { cksum(&[pseudo, seg]) } else { cksum(&[seg]) };
        let ck = if protocol == 17 && ck == 0 { 0xffff } else { ck };
        seg[at..at + 2].copy_from_slice(&ck.to_be_bytes());
    }
}

fn ipv4(src: [u8; 4], dst: [u8; 4], protocol: u8, mut seg: Vec<u8>) -> Vec<u8> {
    let len = seg.len() as u16;
    let pseudo = [&src[..], &dst, &[0, protocol], &len.to_be_bytes()].concat();
    fill_l4(&mut seg, protocol, &pseudo);
    let mut h = vec![0x45, 0, 0, 0, 0x12, 0x34, 0x40, 0, 64, protocol, 0, 0];
    h[2..4].copy_from_slice(&(20 + len).to_be_bytes());
    h.extend_from_slice(&src);
    h.extend_from_slice(&dst);
    let ck = cksum(&[&h]);
    h[10..12].copy_from_slice(&ck.to_be_bytes());
    h.extend_from_slice(&seg);
    h
}

fn ipv6(src: [u8; 16], dst: [u8; 16], next: u8, mut seg: Vec<u8>) -> Vec<u8> {
    let len = seg.len() as u32;
    let pseudo = [&src[..], &dst, &len.to_be_bytes(), &[0, 0, 0, next]].concat();
    fill_l4(&mut seg, next, &pseudo);
    let mut h = vec![0x60, 0, 0, 0];
    h.extend_from_slice(&(len as u16).to_be_bytes());
    h.extend_from_slice(&[next, 64]);
    h.extend_from_slice(&src);
    h.extend_from_slice(&dst);
    h.extend_from_slice(&seg);
    h
}

fn eth(ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11];
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// Rewrites `frame` (Ethernet) and returns it with the counters.
fn rewrite(frame: &[u8]) -> (Vec<u8>, RewriteStats) {
    rewrite_link(LinkType::ETHERNET, frame, frame.len())
}

fn rewrite_link(link: LinkType, frame: &[u8], wire_len: usize) -> (Vec<u8>, RewriteStats) {
    let mut rw = Rewriter::new(anonymizer());
    let mut out = frame.to_vec();
    rw.rewrite(link, &mut out, wire_len as u32);
    assert_eq!(out.len(), frame.len());
    (out, rw.stats())
}

#[test]
fn ipv4_tcp() {
    let frame = eth(0x0800, &ipv4(V4_A, V4_B, 6, tcp(b"hello, world")));
    let (out, stats) = rewrite(&frame);
    assert_eq!(out, eth(0x0800, &ipv4(m4(V4_A), m4(V4_B), 6, tcp(b"hello, world"))));
    assert_ne!(&out[26..34], &frame[26..34]);
    assert_eq!((stats.ipv4_addresses, stats.checksums_recomputed, stats.checksums_fixed), (2, 2, 0));
}

#[test]
fn wrong_checksums_are_fixed_and_counted() {
    // A transmit-offload capture: the TCP checksum holds only the pseudo-header's partial sum.
    let mut frame = eth(0x0800, &ipv4(V4_A, V4_B, 6, tcp(b"offloaded")));
    frame[14 + 20 + 16..14 + 20 + 18].copy_from_slice(&[0x12, 0x34]);
    let (out, stats) = rewrite(&frame);
    assert_eq!(out, eth(0x0800, &ipv4(m4(V4_A), m4(V4_B), 6, tcp(b"offloaded"))));
    assert_eq!((stats.checksums_recomputed, stats.checksums_fixed), (2, 1));
}

#[test]
fn ipv6_udp_and_udp_zero_checksum() {
    let frame = eth(0x86dd, &ipv6(V6_A, V6_B, 17, udp(5353, 53, b"query")));
    let (out, stats) = rewrite(&frame);
    assert_eq!(out, eth(0x86dd, &ipv6(m6(V6_A), m6(V6_B), 17, udp(5353, 53, b"query"))));
    assert_eq!((stats.ipv6_addresses, stats.checksums_recomputed), (2, 1));
    // RFC 768: an IPv4 UDP checksum of 0 means none, and stays 0.
    let mut frame = eth(0x0800, &ipv4(V4_A, V4_B, 17, udp(1, 2, b"x")));
    frame[14 + 20 + 6..14 + 20 + 8].fill(0);
    let (out, stats) = rewrite(&frame);
    assert_eq!(&out[14 + 20 + 6..14 + 20 + 8], &[0, 0]);
    assert_eq!(stats.checksums_recomputed, 1);
}

#[test]
fn arp_over_vlan_and_sll() {
    let arp = |spa: [u8; 4], tpa: [u8; 4]| {
        let mut a = vec![0, 1, 0x08, 0x00, 6, 4, 0, 1, 0xa, 0xb, 0xc, 0xd, 0xe, 0xf];
        a.extend_from_slice(&spa);
        a.extend_from_slice(&[0; 6]);
        a.extend_from_slice(&tpa);
        a
    };
    let tagged = |payload: &[u8]| eth(0x8100, &[&[0x00, 0x05, 0x08, 0x06][..], payload, &[0; 18]].concat());
    let (out, stats) = rewrite(&tagged(&arp(V4_A, V4_C)));
    assert_eq!(out, tagged(&arp(m4(V4_A), m4(V4_C))));
    assert_eq!((stats.arp_packets, stats.ipv4_addresses), (1, 2));
    // Linux cooked capture: 16-byte header, protocol at 14.
    let sll = |payload: &[u8]| [&[0, 0, 0, 1, 0, 6, 1, 2, 3, 4, 5, 6, 0, 0, 0x08, 0x06][..], payload].concat();
    let frame = sll(&arp(V4_B, V4_D));
    let (out, _) = rewrite_link(LinkType::LINUX_SLL, &frame, frame.len());
    assert_eq!(out, sll(&arp(m4(V4_B), m4(V4_D))));
}

/// IEEE 802.3 frames with LLC/SNAP (RFC 1042): the IP and ARP they carry are rewritten as in
/// Ethernet II frames (until LLC/SNAP was decoded they left the anonymiser as they came).
#[test]
fn llc_snap_ip_and_arp() {
    let snap = |ty: u16, payload: &[u8]| {
        let len = (8 + payload.len()) as u16;
        let head = [0xaa, 0xaa, 0x03, 0, 0, 0, (ty >> 8) as u8, ty as u8];
        eth(len, &[&head[..], payload].concat())
    };
    let frame = snap(0x0800, &ipv4(V4_A, V4_B, 17, udp(1, 2, b"x")));
    let (out, stats) = rewrite(&frame);
    assert_eq!(out, snap(0x0800, &ipv4(m4(V4_A), m4(V4_B), 17, udp(1, 2, b"x"))));
    assert_eq!(stats.ipv4_addresses, 2);
    let arp = [&[0, 1, 0x08, 0x00, 6, 4, 0, 1, 0xa, 0xb, 0xc, 0xd, 0xe, 0xf][..], &V4_A, &[0; 6], &V4_C].concat();
    let mapped = [&arp[..14], &m4(V4_A), &[0; 6], &m4(V4_C)].concat();
    let (out, stats) = rewrite(&snap(0x0806, &arp));
    assert_eq!(out, snap(0x0806, &mapped));
    assert_eq!((stats.arp_packets, stats.ipv4_addresses), (1, 2));
}

#[test]
fn icmp_error_quoting_udp() {
    // A router's time exceeded for a UDP datagram A → B, quoting its IP header and 8 bytes.
    let quoted = |a, b| ipv4(a, b, 17, udp(40000, 33434, &[7; 32]))[..28].to_vec();
    let icmp = |a, b| [&[11, 0, 0, 0, 0, 0, 0, 0][..], &quoted(a, b)].concat();
    let frame = eth(0x0800, &ipv4(V4_C, V4_A, 1, icmp(V4_A, V4_B)));
    let (out, stats) = rewrite(&frame);
    assert_eq!(out, eth(0x0800, &ipv4(m4(V4_C), m4(V4_A), 1, icmp(m4(V4_A), m4(V4_B)))));
    assert_eq!(stats.icmp_quotes, 1);
    assert_eq!(stats.ipv4_addresses, 4);
    // Outer IP and ICMP recomputed; the quoted IP header and UDP checksum updated.
    assert_eq!((stats.checksums_recomputed, stats.checksums_adjusted, stats.checksums_fixed), (2, 2, 0));
}

#[test]
fn icmp_redirect_gateway() {
    let redirect = |gw: [u8; 4], a, b| [&[5, 1, 0, 0][..], &gw, &ipv4(a, b, 6, tcp(b"data"))[..28]].concat();
    let frame = eth(0x0800, &ipv4(V4_D, V4_A, 1, redirect(V4_C, V4_A, V4_B)));
    let (out, _) = rewrite(&frame);
    assert_eq!(out, eth(0x0800, &ipv4(m4(V4_D), m4(V4_A), 1, redirect(m4(V4_C), m4(V4_A), m4(V4_B)))));
}

#[test]
fn icmpv6_error_quoting_tcp_and_neighbour_discovery() {
    let quoted = |a, b| ipv6(a, b, 6, tcp(&[1; 100]))[..40 + 20].to_vec();
    let too_big = |a, b| [&[2, 0, 0, 0, 0, 0, 5, 0xdc][..], &quoted(a, b)].concat();
    let frame = eth(0x86dd, &ipv6(V6_B, V6_A, 58, too_big(V6_A, V6_B)));
    let (out, stats) = rewrite(&frame);
    assert_eq!(out, eth(0x86dd, &ipv6(m6(V6_B), m6(V6_A), 58, too_big(m6(V6_A), m6(V6_B)))));
    assert_eq!((stats.icmp_quotes, stats.ipv6_addresses), (1, 4));
    // Neighbour solicitation: the target address.
    let ns = |target: [u8; 16]| [&[135, 0, 0, 0, 0, 0, 0, 0][..], &target].concat();
    let frame = eth(0x86dd, &ipv6(V6_A, V6_B, 58, ns(V6_B)));
    let (out, _) = rewrite(&frame);
    assert_eq!(out, eth(0x86dd, &ipv6(m6(V6_A), m6(V6_B), 58, ns(m6(V6_B)))));
}

#[test]
fn vxlan_outer_and_inner() {
    let inner = |a, b| eth(0x0800, &ipv4(a, b, 6, tcp(b"inner")));
    let vxlan = |o1, o2, i1, i2| {
        let payload = [&[0x08, 0, 0, 0, 0, 0, 42, 0][..], &inner(i1, i2)].concat();
        eth(0x0800, &ipv4(o1, o2, 17, udp(51000, 4789, &payload)))
    };
    let (out, stats) = rewrite(&vxlan(V4_C, V4_D, V4_A, V4_B));
    assert_eq!(out, vxlan(m4(V4_C), m4(V4_D), m4(V4_A), m4(V4_B)));
    assert_eq!((stats.tunnels, stats.ipv4_addresses, stats.checksums_recomputed), (1, 4, 4));
}

#[test]
fn gre_with_checksum_and_ip_in_ip() {
    let gre = |inner: Vec<u8>| {
        let mut g = [&[0x80, 0, 0x08, 0x00, 0, 0, 0, 0][..], &inner].concat();
        let ck = cksum(&[&g]);
        g[4..6].copy_from_slice(&ck.to_be_bytes());
        g
    };
    let frame = |o1, o2, i1, i2| eth(0x0800, &ipv4(o1, o2, 47, gre(ipv4(i1, i2, 17, udp(1, 2, b"in gre")))));
    let (out, stats) = rewrite(&frame(V4_C, V4_D, V4_A, V4_B));
    assert_eq!(out, frame(m4(V4_C), m4(V4_D), m4(V4_A), m4(V4_B)));
    assert_eq!((stats.tunnels, stats.checksums_recomputed), (1, 4));
    // IPv4 in IPv6.
    let frame = |o1, o2, i1, i2| eth(0x86dd, &ipv6(o1, o2, 4, ipv4(i1, i2, 6, tcp(b"4in6"))));
    let (out, stats) = rewrite(&frame(V6_A, V6_B, V4_A, V4_B));
    assert_eq!(out, frame(m6(V6_A), m6(V6_B), m4(V4_A), m4(V4_B)));
    assert_eq!((stats.tunnels, stats.ipv4_addresses, stats.ipv6_addresses), (1, 2, 2));
}

#[test]
fn snaplen_cut_updates_incrementally() {
    // Rewriting a cut frame gives the cut of the rewritten frame, wherever the cut falls after
    // the outer addresses, but for cuts that split a checksum field (the half captured cannot be
    // updated alone) or a tunnel's inner headers, listed with each frame.
    let vxlan_inner = eth(0x0800, &ipv4(V4_A, V4_B, 6, tcp(&[5; 80])));
    let cases = [
        (eth(0x0800, &ipv4(V4_A, V4_B, 6, tcp(&[3; 200]))), vec![51]),
        (eth(0x86dd, &ipv6(V6_A, V6_B, 17, udp(9, 10, &[4; 99]))), vec![61]),
        (
            eth(0x0800, &ipv4(V4_C, V4_D, 17, udp(5, 4789, &[&[8, 0, 0, 0, 0, 0, 1, 0][..], &vxlan_inner].concat()))),
            // The outer UDP checksum covers the inner addresses and checksums: a cut before the
            // last of them leaves it matching inner bytes the capture does not hold.
            (41..102).collect(),
        ),
    ];
    for (frame, skipped) in cases {
        let (full, _) = rewrite(&frame);
        for cut in (34..frame.len()).filter(|c| !skipped.contains(c)) {
            let (out, stats) = rewrite_link(LinkType::ETHERNET, &frame[..cut], frame.len());
            assert_eq!(out, full[..cut], "cut at {cut}");
            assert_eq!(stats.checksums_fixed, 0);
        }
    }
}

#[test]
fn cut_addresses_map_to_the_prefix_of_the_mapped_address() {
    let frame = eth(0x0800, &ipv4(V4_A, V4_B, 6, tcp(b"")));
    let (full, _) = rewrite(&frame);
    for cut in 14..14 + 20 {
        let (out, stats) = rewrite_link(LinkType::ETHERNET, &frame[..cut], 60);
        assert_eq!(out[cut.min(26)..], full[cut.min(26)..cut], "cut at {cut}");
        assert_eq!(stats.headers_unreadable, 1);
    }
}

#[test]
fn fragments() {
    // A UDP datagram of 64 payload bytes sent as two fragments of 40 and 32 bytes.
    let datagram = |a, b| ipv4(a, b, 17, udp(7, 8, &[9; 64]));
    let fragments = |a, b| {
        let d: Vec<u8> = datagram(a, b);
        let mut first = d[..20 + 40].to_vec();
        first[2..4].copy_from_slice(&60u16.to_be_bytes());
        first[6..8].copy_from_slice(&0x2000u16.to_be_bytes());
        let mut second = [&d[..20], &d[60..]].concat();
        second[2..4].copy_from_slice(&52u16.to_be_bytes());
        second[6..8].copy_from_slice(&5u16.to_be_bytes());
        for f in [&mut first, &mut second] {
            f[10..12].fill(0);
            let ck = cksum(&[&f[..20]]);
            f[10..12].copy_from_slice(&ck.to_be_bytes());
        }
        (first, second)
    };
    let (first, second) = fragments(V4_A, V4_B);
    let (want_first, want_second) = fragments(m4(V4_A), m4(V4_B));
    let (out, stats) = rewrite_link(LinkType::RAW, &first, first.len());
    // The UDP checksum (of the whole datagram) is updated for the addresses only.
    assert_eq!(out, want_first);
    assert_eq!((stats.checksums_recomputed, stats.checksums_adjusted), (1, 1));
    let (out, stats) = rewrite_link(LinkType::RAW, &second, second.len());
    assert_eq!(out, want_second);
    assert_eq!((stats.checksums_recomputed, stats.checksums_adjusted), (1, 0));
}

#[test]
fn ipv6_routing_header_final_destination() {
    // A type-2 routing header (Mobile IPv6) with one segment left: the pseudo-header holds the
    // home address, its final destination.
    let packet = |src: [u8; 16], dst: [u8; 16], home: [u8; 16]| {
        let seg = udp(1, 2, b"mip6");
        let len = (24 + seg.len()) as u16;
        let pseudo = [&src[..], &home, &(seg.len() as u32).to_be_bytes(), &[0, 0, 0, 17]].concat();
        let mut seg = seg;
        fill_l4(&mut seg, 17, &pseudo);
        let mut p = vec![0x60, 0, 0, 0];
        p.extend_from_slice(&len.to_be_bytes());
        p.extend_from_slice(&[43, 64]);
        p.extend_from_slice(&src);
        p.extend_from_slice(&dst);
        p.extend_from_slice(&[17, 2, 2, 1, 0, 0, 0, 0]);
        p.extend_from_slice(&home);
        p.extend_from_slice(&seg);
        p
    };
    let frame = eth(0x86dd, &packet(V6_A, V6_B, V6_A));
    let (out, stats) = rewrite(&frame);
    assert_eq!(out, eth(0x86dd, &packet(m6(V6_A), m6(V6_B), m6(V6_A))));
    assert_eq!((stats.routing_headers, stats.ipv6_addresses, stats.checksums_fixed), (1, 3, 0));
}

#[test]
fn non_ip_and_unknown_links_are_left_alone() {
    let lldp = eth(0x88cc, &[1, 2, 3, 4]);
    let (out, stats) = rewrite(&lldp);
    assert_eq!((out, stats.non_ip_frames), (lldp, 1));
    let (out, stats) = rewrite_link(LinkType(147), &[0x45; 40], 40);
    assert_eq!((out, stats.unsupported_link_frames), (vec![0x45; 40], 1));
    let (_, stats) = rewrite(&[0; 10]);
    assert_eq!(stats.unreadable_link_frames, 1);
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    fn seeds() -> Vec<Vec<u8>> {
        vec![
            eth(0x0800, &ipv4(V4_A, V4_B, 6, tcp(&[3; 40]))),
            eth(
                0x86dd,
                &ipv6(
                    V6_A,
                    V6_B,
                    58,
                    [&[1, 0, 0, 0, 0, 0, 0, 0][..], &ipv6(V6_B, V6_A, 17, udp(1, 2, &[0; 8]))].concat(),
                ),
            ),
            eth(
                0x0800,
                &ipv4(
                    V4_C,
                    V4_D,
                    17,
                    udp(
                        5,
                        4789,
                        &[
                            &[8, 0, 0, 0, 0, 0, 1, 0][..],
                            &eth(0x0800, &ipv4(V4_A, V4_B, 1, vec![3, 1, 0, 0, 0, 0, 0, 0])),
                        ]
                        .concat(),
                    ),
                ),
            ),
            eth(
                0x0800,
                &ipv4(
                    V4_C,
                    V4_D,
                    47,
                    [&[0x80, 0, 0x86, 0xdd, 0, 0, 0, 0][..], &ipv6(V6_A, V6_B, 6, tcp(b""))].concat(),
                ),
            ),
        ]
    }

    proptest! {
        /// Any cut of a seed frame, with any bytes scrambled, on any link type: the frame keeps
        /// its length and nothing panics.
        #[test]
        fn cut_and_scrambled_frames(seed in 0usize..4, cut in 0usize..200, flips in proptest::collection::vec((0usize..200, any::<u8>()), 0..8), link in prop_oneof![Just(1u32), Just(101), Just(113), Just(276), Just(0), Just(9)], mode in 0u8..3) {
            let mut frame = seeds()[seed].clone();
            frame.truncate(cut);
            for (at, byte) in flips {
                if let Some(b) = frame.get_mut(at) {
                    *b = byte;
                }
            }
            let anon = match mode {
                0 => anonymizer(),
                1 => Anonymizer::new(Mode::KeyedHash, &Key::from_bytes([9; 32])),
                _ => Anonymizer::zero(),
            };
            let mut rw = Rewriter::new(anon);
            let mut out = frame.clone();
            rw.rewrite(LinkType(link), &mut out, 1500);
            prop_assert_eq!(out.len(), frame.len());
        }

        /// Random bytes.
        #[test]
        fn random_frames(frame in proptest::collection::vec(any::<u8>(), 0..300), link in prop_oneof![Just(1u32), Just(101), Just(113), Just(12)]) {
            let mut rw = Rewriter::new(anonymizer());
            let mut out = frame.clone();
            rw.rewrite(LinkType(link), &mut out, frame.len() as u32);
            prop_assert_eq!(out.len(), frame.len());
        }
    }
}
