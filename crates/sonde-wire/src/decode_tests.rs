//! Whole-frame tests of the walk.

use crate::tcp::build::SYN_OPTS;
use crate::testutil::Frame;
use crate::*;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

const A: [u8; 4] = [10, 0, 0, 1];
const B: [u8; 4] = [10, 0, 0, 2];

fn dec(link: LinkType, f: &[u8]) -> PacketSummary {
    decode(link, f, f.len() as u32).unwrap()
}

fn tcp_of(s: &PacketSummary) -> TcpSummary {
    match s.transport {
        Some(Transport::Tcp(t)) => t,
        t => panic!("not TCP: {t:?} in {s:?}"),
    }
}

fn udp_of(s: &PacketSummary) -> UdpSummary {
    match s.transport {
        Some(Transport::Udp(u)) => u,
        t => panic!("not UDP: {t:?} in {s:?}"),
    }
}

fn v4(a: [u8; 4]) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(a))
}

fn v6(last: u8) -> IpAddr {
    IpAddr::V6(Ipv6Addr::new(0x2001, 0, 0, 0, 0, 0, 0, u16::from(last)))
}

/// Ethernet + 802.1Q + IPv4 + TCP SYN with options + 100 bytes of payload.
fn vlan_syn() -> Frame {
    let mut f = Frame::new();
    f.ethernet(0x8100).push(&[0x20, 0x0a, 0x08, 0x00]);
    f.ipv4(6, 40 + 100, A, B).tcp(40000, 443, 1000, 0x02, &SYN_OPTS).zeros(100);
    f
}

#[test]
fn ethernet_vlan_ipv4_tcp_with_options() {
    let f = vlan_syn();
    let s = dec(LinkType::ETHERNET, f.bytes());
    assert_eq!(s.problem, None);
    assert_eq!((s.tunnel, s.non_ip), (None, None));
    let ip = s.ip.unwrap();
    assert_eq!((ip.src, ip.dst, ip.total_len, ip.ttl, ip.ident), (v4(A), v4(B), 160, 64, 0x1234));
    assert_eq!((ip.protocol, ip.fragment), (6, Fragment::No));
    let t = tcp_of(&s);
    assert_eq!((t.src_port, t.dst_port, t.seq, t.ack), (40000, 443, 1000, 0));
    assert!(t.flags.syn() && !t.flags.ack());
    assert_eq!((t.window, t.header_len, t.payload_len), (65535, 40, 100));
    assert_eq!(t.options.mss, Some(1460));
    assert_eq!(t.options.window_scale, Some(7));
    assert!(t.options.sack_permitted);
    assert_eq!(t.options.timestamp, Some((1, 0)));
}

#[test]
fn snaplen_cuts_at_every_point() {
    let f = vlan_syn();
    let full = f.bytes();
    let wire = full.len() as u32;
    for cut in 0..full.len() {
        let s = decode(LinkType::ETHERNET, &full[..cut], wire).unwrap();
        match cut {
            0..=17 => {
                assert_eq!(s.problem, Some(DecodeProblem::Truncated(Layer::Link)), "cut {cut}");
                assert_eq!(s.ip, None);
            }
            18..=37 => {
                assert_eq!(s.problem, Some(DecodeProblem::Truncated(Layer::Ipv4)), "cut {cut}");
                assert_eq!(s.ip, None);
            }
            38..=57 => {
                assert_eq!(s.problem, Some(DecodeProblem::Truncated(Layer::Tcp)), "cut {cut}");
                assert_eq!(s.ip.unwrap().total_len, 160);
                assert_eq!(s.transport, Some(Transport::Truncated { protocol: 6 }));
            }
            58..=77 => {
                assert_eq!(s.problem, Some(DecodeProblem::Truncated(Layer::Tcp)), "cut {cut}");
                let t = tcp_of(&s);
                assert_eq!((t.src_port, t.seq, t.payload_len), (40000, 1000, 100));
            }
            _ => {
                // Payload cut: not a problem, byte counts unchanged.
                assert_eq!(s.problem, None, "cut {cut}");
                assert_eq!(tcp_of(&s).payload_len, 100);
                assert_eq!(tcp_of(&s).options.window_scale, Some(7));
            }
        }
    }
}

#[test]
fn too_short_without_snaplen() {
    let f = vlan_syn();
    let full = f.bytes();
    // The frame ends early but wire_len agrees with the capture: the packet is broken.
    let s = dec(LinkType::ETHERNET, &full[..60]);
    assert_eq!(s.problem, Some(DecodeProblem::TooShort(Layer::Ipv4)));
    assert_eq!(tcp_of(&s).payload_len, 100);
    let s = dec(LinkType::ETHERNET, &full[..30]);
    assert_eq!((s.problem, s.ip), (Some(DecodeProblem::TooShort(Layer::Ipv4)), None));
    let s = dec(LinkType::ETHERNET, &full[..16]);
    assert_eq!(s.problem, Some(DecodeProblem::TooShort(Layer::Link)));
    // A wire length larger than the capture but smaller than the IP length: still broken.
    let s = decode(LinkType::ETHERNET, &full[..60], 80).unwrap();
    assert_eq!(s.problem, Some(DecodeProblem::TooShort(Layer::Ipv4)));
}

#[test]
fn ethernet_padding_uses_ip_length() {
    let mut f = Frame::new();
    f.ethernet(0x0800).ipv4(6, 20, A, B).tcp(1, 2, 3, 0x10, &[]).zeros(6);
    let s = dec(LinkType::ETHERNET, f.bytes());
    assert_eq!(s.problem, None);
    assert_eq!(s.ip.unwrap().total_len, 40);
    assert_eq!(tcp_of(&s).payload_len, 0);
}

#[test]
fn ipv4_options_and_malformed_headers() {
    let mut f = Frame::new();
    f.ethernet(0x0800).ipv4(17, 4 + 8 + 2, A, B);
    f.buf[14] = 0x46;
    f.push(&[0x94, 0x04, 0, 0]).udp(5353, 5353, 2).zeros(2);
    let s = dec(LinkType::ETHERNET, f.bytes());
    assert_eq!(s.problem, None);
    assert_eq!(s.ip.unwrap().total_len, 34);
    assert_eq!(udp_of(&s), UdpSummary { src_port: 5353, dst_port: 5353, payload_len: 2 });
    // IHL 4.
    let mut g = Frame::new();
    g.push(f.bytes());
    g.buf[14] = 0x44;
    assert_eq!(dec(LinkType::ETHERNET, g.bytes()).problem, Some(DecodeProblem::Malformed(Layer::Ipv4)));
    // EtherType says IPv4, header says 6.
    g.buf[14] = 0x65;
    assert_eq!(dec(LinkType::ETHERNET, g.bytes()).problem, Some(DecodeProblem::Malformed(Layer::Ipv4)));
    // Total length below the header length.
    g.buf[14] = 0x45;
    g.buf[16..18].copy_from_slice(&[0, 10]);
    let s = dec(LinkType::ETHERNET, g.bytes());
    assert_eq!((s.problem, s.ip), (Some(DecodeProblem::Malformed(Layer::Ipv4)), None));
}

#[test]
fn ipv4_total_length_zero_is_offload() {
    let mut f = Frame::new();
    f.ethernet(0x0800).ipv4(6, 0, A, B).tcp(1, 2, 3, 0x18, &[]).zeros(1000);
    f.buf[16..18].fill(0);
    let s = decode(LinkType::ETHERNET, &f.bytes()[..100], 14 + 20 + 20 + 3000).unwrap();
    assert_eq!(s.problem, None);
    assert_eq!(s.ip.unwrap().total_len, 3040);
    assert_eq!(tcp_of(&s).payload_len, 3000);
}

#[test]
fn tcp_header_longer_than_ip_payload() {
    let mut f = Frame::new();
    f.ethernet(0x0800).ipv4(6, 30, A, B).tcp(1, 2, 3, 0x10, &SYN_OPTS);
    let s = dec(LinkType::ETHERNET, f.bytes());
    assert_eq!(s.problem, Some(DecodeProblem::Malformed(Layer::Tcp)));
    assert_eq!(tcp_of(&s).payload_len, 0);
}

#[test]
fn ipv4_fragments() {
    let mut f = Frame::new();
    f.ethernet(0x0800).ipv4(17, 8 + 100, A, B).udp(1, 2, 1000).zeros(100);
    f.buf[20..22].copy_from_slice(&0x2000u16.to_be_bytes()); // MF, offset 0
    let s = dec(LinkType::ETHERNET, f.bytes());
    assert_eq!(s.ip.unwrap().fragment, Fragment::First);
    // UDP length (1008) exceeds this fragment: bounded by the IP payload.
    assert_eq!(udp_of(&s).payload_len, 100);
    f.buf[20..22].copy_from_slice(&0x2010u16.to_be_bytes()); // MF, offset 128
    let s = dec(LinkType::ETHERNET, f.bytes());
    let ip = s.ip.unwrap();
    assert_eq!((ip.fragment, ip.ident, ip.protocol), (Fragment::Later, 0x1234, 17));
    assert_eq!((s.transport, s.problem), (Some(Transport::Other { protocol: 17 }), None));
}

#[test]
fn icmp_both_versions() {
    let mut f = Frame::new();
    f.ethernet(0x0800).ipv4(1, 8, A, B).push(&[0, 0, 0, 0, 0, 1, 0, 2]);
    let s = dec(LinkType::ETHERNET, f.bytes());
    assert_eq!((s.transport, s.problem), (Some(Transport::Icmp { icmp_type: 0, code: 0 }), None));
    let mut f = Frame::new();
    f.ethernet(0x86dd).ipv6(58, 8, 1, 2).push(&[135, 0, 0, 0, 0, 0, 0, 0]);
    let s = dec(LinkType::ETHERNET, f.bytes());
    assert_eq!(s.transport, Some(Transport::Icmp { icmp_type: 135, code: 0 }));
    // Other protocols.
    let mut f = Frame::new();
    f.ethernet(0x0800).ipv4(132, 12, A, B).zeros(12);
    assert_eq!(dec(LinkType::ETHERNET, f.bytes()).transport, Some(Transport::Other { protocol: 132 }));
}

#[test]
fn ipv6_hop_by_hop_and_fragment() {
    let mut f = Frame::new();
    f.ethernet(0x86dd).ipv6(0, 8 + 8 + 20 + 10, 1, 2);
    f.push(&[44, 0, 5, 2, 0, 0, 1, 0]); // hop-by-hop: router alert + PadN
    f.push(&[6, 0, 0, 1, 0xca, 0xfe, 0xba, 0xbe]); // fragment: offset 0, M
    f.tcp(80, 50000, 7, 0x10, &[]).zeros(10);
    let s = dec(LinkType::ETHERNET, f.bytes());
    assert_eq!(s.problem, None);
    let ip = s.ip.unwrap();
    assert_eq!((ip.src, ip.dst, ip.total_len, ip.ttl), (v6(1), v6(2), 86, 64));
    assert_eq!((ip.ident, ip.protocol, ip.fragment), (0xcafebabe, 6, Fragment::First));
    assert_eq!(tcp_of(&s).payload_len, 10);
    // A later fragment: no transport header.
    f.buf[14 + 40 + 8 + 2..14 + 40 + 8 + 4].copy_from_slice(&0x00b8u16.to_be_bytes());
    let s = dec(LinkType::ETHERNET, f.bytes());
    assert_eq!(s.ip.unwrap().fragment, Fragment::Later);
    assert_eq!(s.transport, Some(Transport::Other { protocol: 6 }));
    // Cut inside the extension headers by the snaplen.
    let s = decode(LinkType::ETHERNET, &f.bytes()[..14 + 40 + 10], f.len as u32).unwrap();
    assert_eq!(s.problem, Some(DecodeProblem::Truncated(Layer::Ipv6)));
    assert_eq!(s.ip.unwrap().protocol, 44);
    assert_eq!(s.transport, None);
}

#[test]
fn ipv6_esp_and_malformed_extension() {
    let mut f = Frame::new();
    f.ethernet(0x86dd).ipv6(50, 16, 1, 2).zeros(16);
    let s = dec(LinkType::ETHERNET, f.bytes());
    assert_eq!((s.transport, s.problem), (Some(Transport::Other { protocol: 50 }), None));
    // A destination options header claiming more than the payload length.
    let mut f = Frame::new();
    f.ethernet(0x86dd).ipv6(60, 16, 1, 2).push(&[6, 5, 0, 0, 0, 0, 0, 0]).zeros(8);
    let s = dec(LinkType::ETHERNET, f.bytes());
    assert_eq!(s.problem, Some(DecodeProblem::Malformed(Layer::Ipv6)));
    assert!(s.ip.is_some());
}

#[test]
fn ipv6_payload_length_zero_uses_what_is_there() {
    let mut f = Frame::new();
    f.ethernet(0x86dd).ipv6(17, 0, 1, 2).udp(1, 2, 0).zeros(30);
    f.buf[14 + 40 + 4..14 + 40 + 6].fill(0);
    let s = dec(LinkType::ETHERNET, f.bytes());
    assert_eq!(s.problem, None);
    assert_eq!(s.ip.unwrap().total_len, 78);
    assert_eq!(udp_of(&s).payload_len, 30);
}

#[test]
fn non_ip_frames() {
    let mut f = Frame::new();
    f.ethernet(0x0806).zeros(28);
    let s = dec(LinkType::ETHERNET, f.bytes());
    assert_eq!(s, PacketSummary { non_ip: Some(NonIp::EtherType(0x0806)), ..PacketSummary::EMPTY });
    // 802.3 with LLC: spanning tree, by its SAPs.
    let mut f = Frame::new();
    f.ethernet(0x0026).push(&[0x42, 0x42, 0x03]).zeros(35);
    let s = dec(LinkType::ETHERNET, f.bytes());
    assert_eq!(s, PacketSummary { non_ip: Some(NonIp::Llc { dsap: 0x42, ssap: 0x42 }), ..PacketSummary::EMPTY });
    assert_eq!(s.non_ip.unwrap().to_string(), "llc 0x42/0x42 (Spanning Tree BPDU)");
    let names = [
        (NonIp::Llc { dsap: 0xf0, ssap: 0xf1 }, "llc 0xf0/0xf1 (NetBIOS)"),
        (NonIp::Llc { dsap: 0x83, ssap: 0x1b }, "llc 0x83/0x1b (BACnet)"),
        (NonIp::Llc { dsap: 0x42, ssap: 0xe0 }, "llc 0x42/0xe0 (Spanning Tree BPDU/NetWare)"),
        (NonIp::Llc { dsap: 0x44, ssap: 0x44 }, "llc 0x44/0x44"),
        (NonIp::Snap { oui: 0x00000c, pid: 0x2000 }, "snap 00000c/0x2000"),
        (NonIp::NovellRaw, "raw 802.3 (IPX)"),
        (NonIp::EtherType(0x88cc), "0x88cc"),
        (NonIp::Other, "other"),
    ];
    for (n, name) in names {
        assert_eq!(n.to_string(), name);
    }
}

/// Zeek's snap-tcp.pcap in miniature: IEEE 802.3 (a length), LLC/SNAP (RFC 1042), IPv4, TCP;
/// under an 802.1Q tag too; the flow tuple's quick path agrees with the walk.
#[test]
fn ieee_802_3_llc_snap_tcp() {
    for tag in [&[][..], &[0x81, 0x00, 0x00, 0x2a]] {
        let mut f = Frame::new();
        f.push(&[0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb]).push(tag);
        f.push(&[0x00, 0x30, 0xaa, 0xaa, 0x03, 0x00, 0x00, 0x00, 0x08, 0x00]);
        f.ipv4(6, 40, A, B).tcp(1234, 80, 7, 0x02, &SYN_OPTS);
        let s = dec(LinkType::ETHERNET, f.bytes());
        assert_eq!((s.problem, s.non_ip, s.tunnel), (None, None, None));
        let t = tcp_of(&s);
        assert_eq!((s.ip.unwrap().src, t.src_port, t.dst_port, t.seq), (v4(A), 1234, 80, 7));
        let q = flow_tuple(LinkType::ETHERNET, f.bytes(), f.len as u32).expect("quick path");
        assert_eq!((q.protocol, q.src_port, q.dst_port), (6, 1234, 80));
        // Cut inside the SNAP header: a snaplen cut of the link layer.
        let cut = 12 + tag.len() + 6;
        let s = decode(LinkType::ETHERNET, &f.bytes()[..cut], f.len as u32).unwrap();
        assert_eq!((s.ip, s.problem), (None, Some(DecodeProblem::Truncated(Layer::Link))));
    }
}

#[test]
fn qinq_mpls_pppoe() {
    let mut f = Frame::new();
    f.ethernet(0x88a8).push(&[0, 100, 0x81, 0x00, 0, 200, 0x88, 0x47]);
    f.push(&[0, 0x01, 0x00, 0x40, 0, 0x02, 0x01, 0x40]); // two labels
    f.ipv4(17, 8, A, B).udp(53, 53, 0);
    let s = dec(LinkType::ETHERNET, f.bytes());
    assert_eq!((s.problem, udp_of(&s).dst_port), (None, 53));
    let mut f = Frame::new();
    f.ethernet(0x8864).push(&[0x11, 0, 0x12, 0x34, 0, 62, 0x00, 0x57]);
    f.ipv6(6, 20, 1, 2).tcp(1, 2, 3, 0x11, &[]);
    let s = dec(LinkType::ETHERNET, f.bytes());
    assert_eq!(s.problem, None);
    assert!(tcp_of(&s).flags.fin());
    assert_eq!(s.ip.unwrap().src, v6(1));
}

#[test]
fn linux_cooked() {
    let mut f = Frame::new();
    f.push(&[0, 0, 0, 1, 0, 6, 1, 2, 3, 4, 5, 6, 0, 0, 0x08, 0x00]);
    f.ipv4(6, 20, A, B).tcp(1, 2, 3, 0x10, &[]);
    let s = dec(LinkType::LINUX_SLL, f.bytes());
    assert_eq!((s.problem, tcp_of(&s).dst_port), (None, 2));
    let mut f = Frame::new();
    f.push(&[0x86, 0xdd, 0, 0, 0, 0, 0, 2, 0, 1, 4, 6, 1, 2, 3, 4, 5, 6, 0, 0]);
    f.ipv6(17, 8, 1, 2).udp(1, 2, 0);
    let s = dec(LinkType::LINUX_SLL2, f.bytes());
    assert_eq!((s.problem, udp_of(&s).payload_len), (None, 0));
}

#[test]
fn null_loop_raw_ppp() {
    let mut body = Frame::new();
    body.ipv4(6, 20, A, B).tcp(1, 2, 3, 0x10, &[]);
    for (link, head) in [
        (LinkType::NULL, &[2u8, 0, 0, 0][..]),
        (LinkType::NULL, &[0, 0, 0, 2][..]),
        (LinkType::LOOP, &[0, 0, 0, 2][..]),
        (LinkType::RAW, &[][..]),
        (LinkType::RAW_OPENBSD, &[][..]),
        (LinkType::RAW_14, &[][..]),
        (LinkType::IPV4, &[][..]),
        (LinkType::PPP, &[0xff, 0x03, 0x00, 0x21][..]),
        (LinkType::PPP_HDLC, &[0xff, 0x03, 0x00, 0x21][..]),
        (LinkType::C_HDLC, &[0x0f, 0x00, 0x08, 0x00][..]),
    ] {
        let mut f = Frame::new();
        f.push(head).push(body.bytes());
        let s = dec(link, f.bytes());
        assert_eq!(s.problem, None, "{link:?}");
        assert_eq!(tcp_of(&s).src_port, 1, "{link:?}");
    }
    let mut f = Frame::new();
    f.push(&[30, 0, 0, 0]).ipv6(59, 0, 1, 2);
    let s = dec(LinkType::NULL, f.bytes());
    assert_eq!((s.problem, s.transport), (None, Some(Transport::Other { protocol: 59 })));
    assert_eq!(s.ip.unwrap().total_len, 40);
    let mut f = Frame::new();
    f.ipv6(59, 0, 1, 2);
    assert!(dec(LinkType::IPV6, f.bytes()).ip.is_some());
    assert!(dec(LinkType::RAW, f.bytes()).ip.is_some());
    assert_eq!(dec(LinkType::RAW, &[0x50; 40]).problem, Some(DecodeProblem::Malformed(Layer::Link)));
    assert_eq!(decode(LinkType(147), &[], 0), Err(UnsupportedLink(LinkType(147))));
}

#[test]
fn gre_with_key_and_sequence() {
    let mut inner = Frame::new();
    inner.ipv4(6, 20 + 5, [192, 168, 0, 1], [192, 168, 0, 2]).tcp(1, 2, 3, 0x18, &[]).zeros(5);
    let mut f = Frame::new();
    f.ethernet(0x0800).ipv4(47, 12 + inner.len, A, B);
    f.push(&[0x30, 0x00, 0x08, 0x00, 0, 0, 0, 42, 0, 0, 0, 1]).push(inner.bytes());
    let s = dec(LinkType::ETHERNET, f.bytes());
    assert_eq!((s.tunnel, s.problem), (Some(Tunnel::Gre), None));
    let ip = s.ip.unwrap();
    assert_eq!((ip.src, ip.total_len), (v4([192, 168, 0, 1]), 45));
    assert_eq!(tcp_of(&s).payload_len, 5);
    // Inner packet cut by the snaplen inside TCP: inner reported, truncated.
    let s = decode(LinkType::ETHERNET, &f.bytes()[..14 + 20 + 12 + 20 + 10], f.len as u32).unwrap();
    assert_eq!((s.tunnel, s.problem), (Some(Tunnel::Gre), Some(DecodeProblem::Truncated(Layer::Tcp))));
    // Inner IP header cut: the outer GRE packet is reported with the problem.
    let s = decode(LinkType::ETHERNET, &f.bytes()[..14 + 20 + 12 + 10], f.len as u32).unwrap();
    assert_eq!(s.tunnel, None);
    assert_eq!(s.ip.unwrap().dst, v4(B));
    assert_eq!(s.transport, Some(Transport::Other { protocol: 47 }));
    assert_eq!(s.problem, Some(DecodeProblem::Truncated(Layer::Ipv4)));
    // GRE header itself cut.
    let s = decode(LinkType::ETHERNET, &f.bytes()[..14 + 20 + 6], f.len as u32).unwrap();
    assert_eq!((s.tunnel, s.problem), (None, Some(DecodeProblem::Truncated(Layer::Tunnel))));
}

#[test]
fn gre_transparent_ethernet_and_erspan() {
    let mut inner = Frame::new();
    inner.ethernet(0x86dd).ipv6(17, 8, 7, 8).udp(1000, 2000, 0);
    let mut f = Frame::new();
    f.ethernet(0x0800).ipv4(47, 4 + inner.len, A, B).push(&[0, 0, 0x65, 0x58]).push(inner.bytes());
    let s = dec(LinkType::ETHERNET, f.bytes());
    assert_eq!((s.tunnel, s.problem, udp_of(&s).dst_port), (Some(Tunnel::Gre), None, 2000));
    // ERSPAN type II.
    let mut f = Frame::new();
    f.ethernet(0x0800).ipv4(47, 8 + 8 + inner.len, A, B);
    f.push(&[0x10, 0, 0x88, 0xbe, 0, 0, 0, 1, 0x10, 0x01, 0, 0, 0, 0, 0, 0]).push(inner.bytes());
    let s = dec(LinkType::ETHERNET, f.bytes());
    assert_eq!((s.tunnel, s.ip.unwrap().src), (Some(Tunnel::Gre), v6(7)));
    // Inner ARP: the outer GRE packet is the one reported, no problem.
    let mut f = Frame::new();
    f.ethernet(0x0800).ipv4(47, 4 + 14 + 28, A, B).push(&[0, 0, 0x65, 0x58]).ethernet(0x0806).zeros(28);
    let s = dec(LinkType::ETHERNET, f.bytes());
    assert_eq!((s.tunnel, s.problem, s.non_ip), (None, None, None));
    assert_eq!(s.transport, Some(Transport::Other { protocol: 47 }));
}

#[test]
fn ip_in_ip() {
    let mut f = Frame::new();
    f.ethernet(0x0800).ipv4(41, 40 + 8, A, B).ipv6(17, 8, 1, 2).udp(9, 10, 0);
    let s = dec(LinkType::ETHERNET, f.bytes());
    assert_eq!((s.tunnel, s.problem, udp_of(&s).src_port), (Some(Tunnel::IpInIp), None, 9));
    assert_eq!(s.ip.unwrap().src, v6(1));
    let mut f = Frame::new();
    f.ethernet(0x86dd).ipv6(4, 20 + 8, 1, 2).ipv4(17, 8, A, B).udp(9, 10, 0);
    let s = dec(LinkType::ETHERNET, f.bytes());
    assert_eq!((s.tunnel, s.ip.unwrap().src), (Some(Tunnel::IpInIp), v4(A)));
}

#[test]
fn vxlan() {
    let mut inner = Frame::new();
    inner.ethernet(0x0800).ipv4(6, 20, [172, 16, 0, 1], [172, 16, 0, 2]).tcp(5, 6, 7, 0x02, &[]);
    let mut f = Frame::new();
    f.ethernet(0x0800).ipv4(17, 8 + 8 + inner.len, A, B).udp(51234, 4789, 8 + inner.len);
    f.push(&[0x08, 0, 0, 0, 0, 0, 0x2a, 0]).push(inner.bytes());
    let s = dec(LinkType::ETHERNET, f.bytes());
    assert_eq!((s.tunnel, s.problem), (Some(Tunnel::Vxlan), None));
    assert_eq!(s.ip.unwrap().src, v4([172, 16, 0, 1]));
    assert!(tcp_of(&s).flags.syn());
    // VXLAN header cut: outer UDP flow kept.
    let s = decode(LinkType::ETHERNET, &f.bytes()[..14 + 20 + 8 + 4], f.len as u32).unwrap();
    assert_eq!(udp_of(&s).dst_port, 4789);
    assert_eq!((s.tunnel, s.problem), (None, Some(DecodeProblem::Truncated(Layer::Tunnel))));
    // Inner Ethernet cut.
    let s = decode(LinkType::ETHERNET, &f.bytes()[..14 + 20 + 8 + 8 + 6], f.len as u32).unwrap();
    assert_eq!((s.tunnel, s.problem), (None, Some(DecodeProblem::Truncated(Layer::Tunnel))));
    // I flag clear: not decoded, no problem.
    f.buf[14 + 20 + 8] = 0;
    let s = dec(LinkType::ETHERNET, f.bytes());
    assert_eq!((s.tunnel, s.problem, udp_of(&s).dst_port), (None, None, 4789));
}

#[test]
fn gtpu_with_extension_headers() {
    let mut inner = Frame::new();
    inner.ipv4(17, 8 + 4, [100, 64, 0, 1], [8, 8, 8, 8]).udp(40000, 53, 4).zeros(4);
    let gtp_len = 4 + 4 + inner.len;
    let mut f = Frame::new();
    f.ethernet(0x0800).ipv4(17, 8 + 8 + gtp_len, A, B).udp(2152, 2152, 8 + gtp_len);
    f.push(&[0x34, 0xff]).push(&(gtp_len as u16).to_be_bytes()).push(&[0, 0, 0, 9]);
    f.push(&[0, 0, 0, 0x85, 0x01, 0x00, 0x01, 0x00]).push(inner.bytes());
    let s = dec(LinkType::ETHERNET, f.bytes());
    assert_eq!((s.tunnel, s.problem), (Some(Tunnel::GtpU), None));
    assert_eq!(s.ip.unwrap().src, v4([100, 64, 0, 1]));
    assert_eq!(udp_of(&s), UdpSummary { src_port: 40000, dst_port: 53, payload_len: 4 });
    // Cut in the middle of the extension header.
    let s = decode(LinkType::ETHERNET, &f.bytes()[..14 + 20 + 8 + 13], f.len as u32).unwrap();
    assert_eq!((s.tunnel, s.problem), (None, Some(DecodeProblem::Truncated(Layer::Tunnel))));
    assert_eq!(udp_of(&s).dst_port, 2152);
}

#[test]
fn nested_tunnels_report_the_outermost_kind() {
    // VXLAN carrying Ethernet + IPv4 + GRE + IPv4 + UDP.
    let mut inner = Frame::new();
    inner.ethernet(0x0800).ipv4(47, 4 + 28, A, B).push(&[0, 0, 0x08, 0x00]).ipv4(17, 8, B, A).udp(7, 7, 0);
    let mut f = Frame::new();
    f.ethernet(0x0800).ipv4(17, 16 + inner.len, A, B).udp(1, 4789, 8 + inner.len);
    f.push(&[0x08, 0, 0, 0, 0, 0, 1, 0]).push(inner.bytes());
    let s = dec(LinkType::ETHERNET, f.bytes());
    assert_eq!((s.tunnel, s.problem), (Some(Tunnel::Vxlan), None));
    assert_eq!((s.ip.unwrap().src, udp_of(&s).src_port), (v4(B), 7));
}

#[test]
fn tunnel_depth_is_limited() {
    // IPv4-in-IPv4 nested 10 deep.
    let mut f = Frame::new();
    for i in 0..10 {
        f.ipv4(4, 20 * (10 - i) + 8 - 20, A, B);
    }
    f.buf[9 * 20 + 9] = 17;
    f.udp(1, 2, 0);
    let s = dec(LinkType::RAW, f.bytes());
    assert_eq!((s.tunnel, s.problem), (Some(Tunnel::IpInIp), Some(DecodeProblem::Malformed(Layer::Tunnel))));
    assert_eq!(s.transport, Some(Transport::Other { protocol: 4 }));
}

#[test]
fn layer_offsets_point_at_the_analysed_headers() {
    let offsets = |f: &Frame, cut: usize| {
        let mut s = PacketSummary::EMPTY;
        let o = crate::decode_with_offsets(LinkType::ETHERNET, &f.bytes()[..cut], f.len as u32, &mut s).unwrap();
        (o.network, o.transport, o.payload)
    };
    let mut f = Frame::new();
    f.ethernet(0x0800).ipv4(6, 20 + 4, A, B).tcp(5, 6, 7, 0x18, &[]).push(b"data");
    assert_eq!(offsets(&f, f.len), (Some(14), Some(34), Some(54)));
    // Cut inside the TCP header: the transport starts, its payload is not captured.
    assert_eq!(offsets(&f, 40), (Some(14), Some(34), None));
    // The same decode as without offsets.
    let mut s = PacketSummary::EMPTY;
    crate::decode_with_offsets(LinkType::ETHERNET, f.bytes(), f.len as u32, &mut s).unwrap();
    assert_eq!(s, dec(LinkType::ETHERNET, f.bytes()));
    // IPv6 with a hop-by-hop header before UDP; UDP's payload after its 8 bytes.
    let mut f = Frame::new();
    f.ethernet(0x86dd).ipv6(0, 8 + 8 + 2, 1, 2).push(&[17, 0, 0, 0, 0, 0, 0, 0]).udp(9, 10, 2).zeros(2);
    assert_eq!(offsets(&f, f.len), (Some(14), Some(62), Some(70)));
    // ICMP: the transport header, no payload offset.
    let mut f = Frame::new();
    f.ethernet(0x0800).ipv4(1, 8, A, B).push(&[8, 0, 0, 0, 0, 1, 0, 1]);
    assert_eq!(offsets(&f, f.len), (Some(14), Some(34), None));
    // VXLAN: the inner packet's layers.
    let mut inner = Frame::new();
    inner.ethernet(0x0800).ipv4(6, 20 + 4, [172, 16, 0, 1], [172, 16, 0, 2]).tcp(5, 6, 7, 0x18, &[]).push(b"data");
    let mut f = Frame::new();
    f.ethernet(0x0800).ipv4(17, 8 + 8 + inner.len, A, B).udp(51234, 4789, 8 + inner.len);
    f.push(&[0x08, 0, 0, 0, 0, 0, 0x2a, 0]).push(inner.bytes());
    let outer = 14 + 20 + 8 + 8;
    assert_eq!(offsets(&f, f.len), (Some(outer + 14), Some(outer + 34), Some(outer + 54)));
    // Not IP: nothing.
    let mut f = Frame::new();
    f.ethernet(0x0806).zeros(28);
    assert_eq!(offsets(&f, f.len), (None, None, None));
}
