//! Decisions on literal packets.

use std::net::IpAddr;

use sonde_wire::{DecodeProblem, Fragment, IpSummary, Layer, PacketSummary, TcpFlags, TcpSummary, Transport};

use super::*;

const SYN: u16 = TcpFlags::SYN;
const ACK: u16 = TcpFlags::ACK;
const FIN: u16 = TcpFlags::FIN;
const RST: u16 = TcpFlags::RST;
const PSH: u16 = TcpFlags::PSH;
const MS: u64 = 1_000_000;

const C: &str = "10.0.0.1";
const S: &str = "192.0.2.80";

/// A TCP segment `src:sport → dst:dport`.
fn seg(
    src: &str,
    sport: u16,
    dst: &str,
    dport: u16,
    (seq, ack): (u32, u32),
    flags: u16,
    payload_len: u32,
) -> PacketSummary {
    let src: IpAddr = src.parse().unwrap();
    let dst: IpAddr = dst.parse().unwrap();
    let header = if src.is_ipv6() { 40 } else { 20 };
    PacketSummary {
        ip: Some(IpSummary {
            src,
            dst,
            total_len: header + 20 + payload_len,
            ttl: 64,
            ident: 0,
            protocol: 6,
            fragment: Fragment::No,
        }),
        transport: Some(Transport::Tcp(TcpSummary {
            src_port: sport,
            dst_port: dport,
            seq,
            ack,
            flags: TcpFlags(flags),
            header_len: 20,
            payload_len,
            ..TcpSummary::default()
        })),
        ..PacketSummary::EMPTY
    }
}

/// Client 10.0.0.1:40000 → server :80, client ISN 1000, server ISN 5000.
fn c2s(seq: u32, ack: u32, flags: u16, len: u32) -> PacketSummary {
    seg(C, 40000, S, 80, (seq, ack), flags, len)
}
fn s2c(seq: u32, ack: u32, flags: u16, len: u32) -> PacketSummary {
    seg(S, 80, C, 40000, (seq, ack), flags, len)
}

fn thinner() -> Thinner {
    Thinner::new(&Config::default()).unwrap()
}

/// The decisions of `thinner` on `packets`, 1 ms apart.
fn decide(thinner: &mut Thinner, packets: &[PacketSummary]) -> Vec<bool> {
    packets.iter().enumerate().map(|(i, p)| thinner.keep(i as u64 * MS, p, 60)).collect()
}

#[test]
fn sizing_follows_the_formula() {
    // Eq. 1–2 by hand with the paper's P = 0.05 and 1/μ = 0.2 s, for three rates:
    // λ = 100: (20 + 2.326·√20)·19 = 30.402·19 = 577.64
    assert_eq!(table_slots(100.0, 0.2, 0.05), 578.0);
    // λ = 1,000: (200 + 2.326·√200)·19 = 232.895·19 = 4,424.998
    assert_eq!(table_slots(1_000.0, 0.2, 0.05), 4_425.0);
    // λ = 10,000: (2,000 + 2.326·√2,000)·19 = 2,104.022·19 = 39,976.42
    assert_eq!(table_slots(10_000.0, 0.2, 0.05), 39_977.0);
    // Other settings: (200 + 2.326·√200)·99 = 23,056.57; (1 + 2.326)·1 = 3.326.
    assert_eq!(table_slots(1_000.0, 0.2, 0.01), 23_057.0);
    assert_eq!(table_slots(1.0, 1.0, 0.5), 4.0);
    assert_eq!(load::open_handshakes_model(1_000.0, 0.2), 200.0 + 2.326 * 200f64.sqrt());
    // A measured table starts at λ = 100 (with the default 1 s: (100 + 23.26)·19 = 2,341.9);
    // a given rate sizes it once.
    assert_eq!(Config::default().slots(), Ok(2_342));
    let paper = Config { hold_s: 0.2, ..Config::default() };
    assert_eq!(paper.slots(), Ok(578));
    assert_eq!(Config { rate_per_s: Some(10_000.0), ..paper }.slots(), Ok(39_977));
}

#[test]
fn settings_out_of_range_are_refused() {
    let bad = [
        Config { rate_per_s: Some(0.0), ..Config::default() },
        Config { hold_s: f64::NAN, ..Config::default() },
        Config { collision_p: 1.0, ..Config::default() },
        Config { collision_p: 0.0, ..Config::default() },
        Config { max_slots: 0, ..Config::default() },
        Config { max_slots: MAX_SLOTS + 1, ..Config::default() },
    ];
    for config in bad {
        assert!(matches!(config.slots(), Err(ConfigError::OutOfRange { .. })), "{config:?}");
    }
    let huge = Config { rate_per_s: Some(1e9), hold_s: 1.0, collision_p: 1e-6, ..Config::default() };
    assert!(matches!(huge.slots(), Err(ConfigError::TooLarge { .. })));
    let capped = Config { rate_per_s: Some(10_000.0), max_slots: 1000, hold_s: 0.2, ..Config::default() };
    assert_eq!(capped.slots(), Err(ConfigError::TooLarge { slots: 39_977.0, max: 1000 }));
}

#[test]
fn the_handshake_ack_is_kept_and_later_pure_acks_dropped() {
    let mut t = thinner();
    let kept = decide(
        &mut t,
        &[
            c2s(1000, 0, SYN, 0),
            s2c(5000, 1001, SYN | ACK, 0),
            c2s(1001, 5001, ACK, 0),         // the handshake's ACK
            c2s(1001, 5001, ACK | PSH, 100), // data
            s2c(5001, 1101, ACK, 0),         // pure ACK of the data
            s2c(5001, 1101, ACK | PSH, 500),
            c2s(1101, 5501, ACK, 0),
            c2s(1101, 5501, ACK, 0), // a duplicate ACK: pure too
        ],
    );
    assert_eq!(kept, [true, true, true, true, false, true, false, false]);
    let s = t.stats();
    assert_eq!((s.packets, s.tcp_packets, s.dropped_packets, s.dropped_bytes), (8, 8, 3, 180));
    assert_eq!((s.handshakes_tracked, s.handshakes_matched, s.collisions), (1, 1, 0));
    assert_eq!(s.peak_occupancy, 1);
}

#[test]
fn syn_fin_rst_and_data_are_kept_but_not_a_bare_rst_ack() {
    let mut t = thinner();
    let kept = decide(
        &mut t,
        &[
            c2s(1, 0, SYN, 0),
            c2s(1, 0, SYN | ACK, 0),
            c2s(1, 9, FIN | ACK, 0),
            c2s(7, 9, RST, 0),
            c2s(7, 9, ACK | RST, 1),
            c2s(7, 9, ACK, 1),
            c2s(7, 9, 0, 0), // no flag at all: not an ACK
            // Pseudocode 1, line 17: ACK, no SYN, no FIN, no data: a RST+ACK is a pure ACK.
            c2s(7, 9, RST | ACK, 0),
        ],
    );
    assert_eq!(kept, [true, true, true, true, true, true, true, false]);
    let s = t.stats();
    assert_eq!((s.dropped_packets, s.dropped_rst), (1, 1));
}

#[test]
fn what_cannot_be_read_whole_and_non_tcp_pass() {
    let mut t = thinner();
    let mut cut = c2s(7, 9, ACK, 0);
    cut.problem = Some(DecodeProblem::Truncated(Layer::Tcp));
    let mut short = c2s(7, 9, ACK, 0);
    short.transport = Some(Transport::Truncated { protocol: 6 });
    let mut fragment = c2s(7, 9, ACK, 0);
    fragment.ip.as_mut().unwrap().fragment = Fragment::First;
    let mut udp = c2s(7, 9, ACK, 0);
    udp.transport = Some(Transport::Udp(sonde_wire::UdpSummary { src_port: 1, dst_port: 2, payload_len: 0 }));
    let kept = decide(&mut t, &[cut, short, fragment, udp, PacketSummary::EMPTY]);
    assert!(kept.iter().all(|&k| k));
    let s = t.stats();
    assert_eq!((s.packets, s.tcp_packets, s.dropped_packets), (5, 3, 0));
}

#[test]
fn a_retransmitted_syn_ack_keeps_one_handshake() {
    let mut t = thinner();
    let kept = decide(
        &mut t,
        &[
            c2s(1000, 0, SYN, 0),
            s2c(5000, 1001, SYN | ACK, 0),
            s2c(5000, 1001, SYN | ACK, 0),
            c2s(1001, 5001, ACK, 0),
            c2s(1001, 5001, ACK, 0), // the ACK of the second SYN/ACK: a duplicate
        ],
    );
    assert_eq!(kept, [true, true, true, true, false]);
    let s = t.stats();
    // The SYN opened the entry, each SYN/ACK renewed it.
    assert_eq!((s.handshakes_tracked, s.renewed, s.handshakes_matched, s.connections), (1, 2, 1, 1));
}

#[test]
fn a_syn_ack_whose_syn_was_not_seen_opens_the_entry() {
    let mut t = thinner();
    let kept = decide(&mut t, &[s2c(5000, 1001, SYN | ACK, 0), c2s(1001, 5001, ACK, 0), c2s(1001, 5001, ACK, 0)]);
    assert_eq!(kept, [true, true, false]);
    let s = t.stats();
    assert_eq!((s.handshakes_tracked, s.tracked_from_syn_ack, s.connections), (1, 1, 0));
}

#[test]
fn an_ack_with_other_numbers_is_not_the_handshakes() {
    // Not the client's ISN + 1: not the handshake's ACK.
    let kept = decide(&mut thinner(), &[c2s(1000, 0, SYN, 0), c2s(1002, 5001, ACK, 0), c2s(1001, 5001, ACK, 0)]);
    assert_eq!(kept, [true, false, true]);
    // Nor one in the other direction.
    let kept = decide(&mut thinner(), &[c2s(1000, 0, SYN, 0), s2c(1001, 1001, ACK, 0)]);
    assert_eq!(kept, [true, false]);
}

/// As the paper keys it: the handshake's ACK is the client's segment with sequence number
/// ISN + 1. A crafted ACK at another sequence number (the bench mix has one) is dropped, and the
/// flow then has no handshake RTT — the cost of following Pseudocode 1 (docs/thinning.md).
#[test]
fn the_handshake_ack_is_known_by_its_sequence_number() {
    let mut t = thinner();
    let kept = decide(
        &mut t,
        &[
            c2s(6000, 0, SYN, 0),
            s2c(10000, 6001, SYN | ACK, 0),
            c2s(555_555, 10001, ACK, 0),
            c2s(6001, 10001, ACK, 0),
            c2s(6001, 10001, ACK, 0),
        ],
    );
    assert_eq!(kept, [true, true, false, true, false]);
    assert_eq!(t.stats().handshakes_matched, 1);
}

#[test]
fn ipv6_handshakes_are_tracked() {
    let mut t = thinner();
    let (c, s) = ("2001:db8::1", "2001:db8::80");
    let kept = decide(
        &mut t,
        &[
            seg(c, 5555, s, 443, (77, 0), SYN, 0),
            seg(s, 443, c, 5555, (900, 78), SYN | ACK, 0),
            seg(c, 5555, s, 443, (78, 901), ACK, 0),
            seg(c, 5555, s, 443, (78, 901), ACK, 0),
        ],
    );
    assert_eq!(kept, [true, true, true, false]);
    // An IPv6 address holding an IPv4 address's bits is another flow.
    assert_ne!(
        ack_hash("::a00:1".parse().unwrap(), "::a00:2".parse().unwrap(), 1, 2, 4),
        ack_hash("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap(), 1, 2, 4)
    );
}

#[test]
fn simultaneous_open_keeps_the_first_ack_each_way() {
    // RFC 9293 §3.5 figure 8: both send SYN, then SYN/ACK.
    let mut t = thinner();
    let kept = decide(
        &mut t,
        &[
            c2s(100, 0, SYN, 0),
            s2c(300, 0, SYN, 0),
            c2s(100, 301, SYN | ACK, 0),
            s2c(300, 101, SYN | ACK, 0),
            c2s(101, 301, ACK, 0),
            s2c(301, 101, ACK, 0),
            c2s(101, 301, ACK, 0),
        ],
    );
    assert_eq!(kept, [true, true, true, true, true, true, false]);
    assert_eq!(t.stats().handshakes_matched, 2);
}

#[test]
fn collisions_never_lose_a_handshake() {
    // Four slots (rate 1/s, 1 s, P = 0.5): forty handshakes open at once must collide.
    let config = Config { rate_per_s: Some(1.0), hold_s: 1.0, collision_p: 0.5, ..Config::default() };
    let mut t = Thinner::new(&config).unwrap();
    assert_eq!(t.slots(), 4);
    let client = |i: u16| seg(C, 40000 + i, S, 80, (1001, 5001), ACK, 0);
    for i in 0..40u16 {
        assert!(t.keep(u64::from(i) * MS, &seg(C, 40000 + i, S, 80, (1000, 0), SYN, 0), 60));
    }
    for i in 0..40u16 {
        assert!(t.keep(100 * MS + u64::from(i) * MS, &client(i), 60), "handshake {i} lost");
    }
    let s = t.stats();
    assert!(s.collisions >= 36, "{s:?}");
    assert_eq!((s.handshakes_tracked, s.connections), (40, 40));
    assert_eq!(s.dropped_packets, 0);
    // Once the collided slots expire, pure ACKs are dropped again.
    assert!(!t.keep(4_000 * MS, &client(0), 60));
}

#[test]
fn entries_expire_after_their_lifetime() {
    let mut t = Thinner::new(&Config { hold_s: 3.0, ..Config::default() }).unwrap();
    let syn_ack = |i: u16| seg(S, 80, C, 40000 + i, (5000, 1001), SYN | ACK, 0);
    let ack = |i: u16| seg(C, 40000 + i, S, 80, (1001, 5001), ACK, 0);
    let data = seg(C, 1, S, 1, (1, 1), ACK | PSH, 10);
    // Sweeps run at each lifetime (3 s) and each new second of packet time when a packet
    // comes: here at 0, 3 s and 6 s.
    assert!(t.keep(0, &data, 60));
    assert!(t.keep(500 * MS, &syn_ack(1), 60));
    assert!(t.keep(500 * MS, &syn_ack(2), 60));
    assert!(t.keep(3_000 * MS, &data, 60));
    // A late ACK (3.1 s) whose entry is still in its slot passes, and is counted late.
    assert!(t.keep(3_600 * MS, &ack(1), 60));
    assert_eq!(t.stats().late_matches, 1);
    // The sweep at 6 s frees handshake 2's entry: its ACK is then any pure ACK.
    assert!(t.keep(6_000 * MS, &data, 60));
    assert!(!t.keep(6_001 * MS, &ack(2), 60));
    let s = t.stats();
    assert_eq!((s.handshakes_tracked, s.handshakes_expired, s.handshakes_matched), (2, 1, 1));
}

#[test]
fn time_going_backwards_does_not_revive_expiry() {
    let mut t = thinner();
    assert!(t.keep(10_000 * MS, &s2c(5000, 1001, SYN | ACK, 0), 60));
    // An earlier timestamp (a reordered capture) is taken as the latest time seen.
    assert!(t.keep(5 * MS, &c2s(1001, 5001, ACK, 0), 60));
    assert_eq!(t.stats().late_matches, 0);
}

#[test]
fn a_decoded_frame_is_thinned_like_its_summary() {
    // Ethernet + IPv4 + TCP pure ACK 10.0.0.1:40000 → 192.0.2.80:80, seq 1001, ack 5001.
    let mut frame = vec![0u8; 12];
    frame.extend_from_slice(&[0x08, 0x00]);
    frame.extend_from_slice(&[0x45, 0, 0, 40, 0, 0, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 192, 0, 2, 80]);
    frame.extend_from_slice(&[
        0x9c, 0x40, 0, 80, 0, 0, 0x03, 0xe9, 0, 0, 0x13, 0x89, 0x50, 0x10, 0xff, 0xff, 0, 0, 0, 0,
    ]);
    let ack = sonde_wire::decode(sonde_wire::LinkType::ETHERNET, &frame, frame.len() as u32).unwrap();
    assert_eq!(ack, c2s(1001, 5001, ACK, 0).with_window(0xffff));
    let mut t = thinner();
    assert!(!t.keep(0, &ack, 54));
    assert!(t.keep(MS, &s2c(5000, 1001, SYN | ACK, 0), 60));
    assert!(t.keep(2 * MS, &ack, 54));
}

trait WithWindow {
    fn with_window(self, window: u16) -> Self;
}

impl WithWindow for PacketSummary {
    fn with_window(mut self, window: u16) -> Self {
        if let Some(Transport::Tcp(t)) = self.transport.as_mut() {
            t.window = window;
        }
        self
    }
}

/// `n` connections opening evenly within second `second`, each on its own client port.
fn syns(t: &mut Thinner, second: u64, n: u64, port: &mut u32) {
    for i in 0..n {
        *port += 1;
        let p = seg(C, (*port % 60_000) as u16, S, (*port / 60_000) as u16, (7, 0), SYN, 0);
        t.keep(second * 1_000 * MS + i * 1_000 * MS / n, &p, 60);
    }
}

#[test]
fn the_table_follows_the_measured_connection_rate() {
    let mut t = thinner();
    let mut port = 0;
    // 200 connections a second for two minutes: over the starting 100/s by more than 25 %.
    for second in 0..120 {
        syns(&mut t, second, 200, &mut port);
    }
    assert_eq!(t.measured_rate(), Some(200.0));
    assert_eq!(t.sized_for_rate(), 200.0);
    assert_eq!(t.slots() as f64, table_slots(200.0, 1.0, 0.05));
    let (resizes, _) = t.resizes();
    // The rate triples: the table grows in steps as the minute's rate climbs.
    for second in 120..240 {
        syns(&mut t, second, 600, &mut port);
    }
    assert_eq!(t.measured_rate(), Some(600.0));
    let (after, events) = t.resizes();
    assert!(after >= resizes + 2, "{resizes} → {after}");
    let last = events.last().unwrap();
    assert_eq!(last.slots, t.slots() as u64);
    assert_eq!(last.slots as f64, table_slots(last.rate_per_s, 1.0, 0.05));
    assert!(t.sized_for_rate() * GROW_ABOVE >= 600.0 && t.slots() > 2 * table_slots(200.0, 1.0, 0.05) as usize);
    assert!(last.at_ns > 120 * 1_000 * MS);
    // Quiet for two minutes: the table shrinks back to its least size.
    for second in 240..360 {
        syns(&mut t, second, 1, &mut port);
    }
    assert_eq!(t.sized_for_rate(), START_RATE_PER_S);
    assert_eq!(t.slots(), 2_342);
    assert_eq!(t.peak_rate(), 600.0);
    // A given rate is never re-sized.
    let mut fixed = Thinner::new(&Config { rate_per_s: Some(100.0), ..Config::default() }).unwrap();
    for second in 0..120 {
        syns(&mut fixed, second, 600, &mut port);
    }
    assert_eq!((fixed.slots(), fixed.resizes().0), (2_342, 0));
}

#[test]
fn intervals_give_the_reduction_and_the_open_handshakes_against_the_model() {
    let mut t = thinner();
    let mut kept = 0;
    // Second 0 to 599 (two 5-minute intervals): each second, 10 handshakes whose ACK comes
    // 50 ms after the SYN, then 2 pure ACKs each. In the second interval also a RST+ACK.
    for second in 0..600u64 {
        for i in 0..10u64 {
            let (port, t0) = (1000 + (second * 10 + i) as u16 % 60_000, second * 1_000 * MS + i * 90 * MS);
            let c = |seq, ack, flags| seg(C, port, S, 80, (seq, ack), flags, 0);
            let s = |seq, ack, flags| seg(S, 80, C, port, (seq, ack), flags, 0);
            for (dt, p) in [
                (0, c(1, 0, SYN)),
                (20, s(9, 2, SYN | ACK)),
                (50, c(2, 10, ACK)),
                (60, s(10, 2, ACK)),
                (70, c(2, 10, ACK)),
            ] {
                kept += usize::from(t.keep(t0 + dt * MS, &p, 60));
            }
            if second >= 300 && i == 0 {
                kept += usize::from(t.keep(t0 + 80 * MS, &c(2, 10, RST | ACK), 60));
            }
        }
    }
    assert_eq!(kept, 600 * 10 * 3);
    let (intervals, omitted) = t.intervals();
    assert_eq!((intervals.len(), omitted), (2, 0));
    let (a, b) = (&intervals[0], &intervals[1]);
    assert_eq!((a.start_s, b.start_s), (0, 300));
    assert_eq!((a.packets, a.dropped_packets, b.packets, b.dropped_packets), (15_000, 6_000, 15_300, 6_300));
    assert_eq!((a.connections, b.connections), (3_000, 3_000));
    // The first interval spans 300 s; the last ends at its last packet (599.88 s).
    assert_eq!((a.span_s, a.rate_per_s), (300.0, 10.0));
    assert!((b.span_s - 299.88).abs() < 1e-9, "{}", b.span_s);
    assert_eq!(a.open_model, load::open_handshakes_model(10.0, 1.0));
    // At most one handshake is open at a second's start (none: each closes within 50 ms).
    assert!(a.open_max <= 1 && a.open_p99 <= a.open_max);
    assert_eq!(t.stats().dropped_rst, 300);
}
