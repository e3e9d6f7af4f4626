//! RTP/RTCP: hand-built packets through `Session` (recognition, RFC 3550's sequence, loss and
//! jitter arithmetic worked by hand, cut and malformed datagrams), and real captures compared
//! with tshark's RTP stream analysis.

use sonde_l7::{RtpFacts, RtpStream, Session, Transport, CLIENT, SERVER};

const PCMU: u8 = 0;
const MS: u64 = 1_000_000;

/// An RTP packet (RFC 3550 §5.1) with `payload_len` zero bytes of payload.
fn rtp(seq: u16, ts: u32, ssrc: u32, pt: u8, marker: bool, payload_len: usize) -> Vec<u8> {
    let mut p = vec![0x80, pt | if marker { 0x80 } else { 0 }];
    p.extend_from_slice(&seq.to_be_bytes());
    p.extend_from_slice(&ts.to_be_bytes());
    p.extend_from_slice(&ssrc.to_be_bytes());
    p.resize(12 + payload_len, 0);
    p
}

/// An RTCP sender report (§6.4.1) with one report block, followed by an SDES with no chunks.
fn rtcp_sr(ssrc: u32, ntp_mid: u32, pkts: u32, octets: u32, block: Option<(u8, i32, u32, u32)>) -> Vec<u8> {
    let blocks = usize::from(block.is_some());
    let mut p = vec![0x80 | blocks as u8, 200];
    let words = (28 + 24 * blocks) / 4 - 1;
    p.extend_from_slice(&(words as u16).to_be_bytes());
    p.extend_from_slice(&ssrc.to_be_bytes());
    p.extend_from_slice(&(ntp_mid >> 16).to_be_bytes()); // NTP seconds (its low half is the mid's top)
    p.extend_from_slice(&(ntp_mid << 16).to_be_bytes()); // NTP fraction
    p.extend_from_slice(&1234u32.to_be_bytes()); // RTP timestamp
    p.extend_from_slice(&pkts.to_be_bytes());
    p.extend_from_slice(&octets.to_be_bytes());
    if let Some(b) = block {
        push_block(&mut p, b);
    }
    p.extend_from_slice(&[0x80, 202, 0, 0]);
    p
}

/// An RTCP receiver report (§6.4.2) with one report block.
fn rtcp_rr(ssrc: u32, block: (u8, i32, u32, u32)) -> Vec<u8> {
    let mut p = vec![0x81, 201, 0, 7];
    p.extend_from_slice(&ssrc.to_be_bytes());
    push_block(&mut p, block);
    p
}

fn push_block(p: &mut Vec<u8>, (fraction, lost, lsr, dlsr): (u8, i32, u32, u32)) {
    p.extend_from_slice(&0xdead_beefu32.to_be_bytes());
    p.push(fraction);
    p.extend_from_slice(&lost.to_be_bytes()[1..]);
    p.extend_from_slice(&[0; 8]); // extended highest seq, jitter
    p.extend_from_slice(&lsr.to_be_bytes());
    p.extend_from_slice(&dlsr.to_be_bytes());
}

fn udp() -> Session {
    Session::new(Transport::Udp, 40000, 50000)
}

fn send(s: &mut Session, dir: usize, ts_ns: u64, p: &[u8]) {
    s.on_payload(dir, ts_ns, None, p, p.len() as u32);
}

/// Sends a PCMU stream of `seqs` (20 ms, 160 samples apart by sequence number) on a new session.
fn stream_of(seqs: &[u16]) -> Session {
    let mut s = udp();
    for (i, &seq) in seqs.iter().enumerate() {
        let ts = u32::from(seq).wrapping_mul(160);
        send(&mut s, CLIENT, i as u64 * 20 * MS, &rtp(seq, ts, 7, PCMU, false, 160));
    }
    s
}

fn rtp_facts(s: &Session) -> &RtpFacts {
    s.facts().rtp.as_deref().expect("the flow should be claimed as RTP")
}

fn client(s: &Session) -> &RtpStream {
    rtp_facts(s).dirs[CLIENT].as_ref().expect("a client stream")
}

#[test]
fn claimed_only_after_two_confirmations_and_counts_from_the_first_packet() {
    let mut s = udp();
    send(&mut s, CLIENT, 0, &rtp(10, 0, 7, PCMU, true, 160));
    assert!(s.facts().rtp.is_none(), "one packet claims nothing");
    send(&mut s, CLIENT, 20 * MS, &rtp(11, 160, 7, PCMU, false, 160));
    assert!(s.facts().rtp.is_none(), "one confirmation is not enough");
    send(&mut s, CLIENT, 40 * MS, &rtp(12, 320, 7, PCMU, false, 160));
    let st = client(&s);
    assert_eq!((st.packets, st.payload_bytes, st.ssrc, st.payload_type, st.clock_hz), (3, 480, 7, 0, 8000));
    assert_eq!((st.first_ns, st.last_ns, st.marker_packets), (0, 40 * MS, 1));
    assert!(s.wants_more(), "RTP counts every packet of the flow");
}

#[test]
fn two_directions_confirm_each_other() {
    let mut s = udp();
    send(&mut s, CLIENT, 0, &rtp(1, 0, 7, PCMU, false, 160));
    send(&mut s, SERVER, MS, &rtp(900, 0, 9, 8, false, 160));
    send(&mut s, CLIENT, 20 * MS, &rtp(2, 160, 7, PCMU, false, 160));
    assert!(s.facts().rtp.is_none());
    send(&mut s, SERVER, 21 * MS, &rtp(901, 160, 9, 8, false, 160));
    let r = rtp_facts(&s);
    assert_eq!(r.dirs[CLIENT].as_ref().map(|d| (d.ssrc, d.packets)), Some((7, 2)));
    assert_eq!(r.dirs[SERVER].as_ref().map(|d| (d.ssrc, d.packets, d.payload_type)), Some((9, 2, 8)));
}

#[test]
fn not_rtp_is_refused_at_once() {
    for first in [
        b"GET / HTTP/1.1\r\n".as_slice(),
        &[0x00, 0x01, 0x00, 0x00, 0x21, 0x12, 0xa4, 0x42, 1, 2, 3, 4, 5, 6, 7, 8], // STUN
        &[0x16, 0xfe, 0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],                // DTLS
        &[0x80, 0x00, 0x00],                                                       // too short for RTP
        &[0x8f, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0],                   // 15 CSRCs in 16 bytes
        &[0x80, 0xc8, 0, 6, 0, 0, 0, 7],                                           // SR longer than the datagram
    ] {
        let mut s = udp();
        send(&mut s, CLIENT, 0, first);
        // Later RTP packets get a fresh chance (recognition retries), so only the first is lost.
        for i in 1..5u16 {
            send(&mut s, CLIENT, u64::from(i) * 20 * MS, &rtp(i, u32::from(i) * 160, 7, PCMU, false, 160));
        }
        assert_eq!(client(&s).packets, 4, "first datagram {first:02x?}");
    }
}

/// A STUN binding request (RFC 5389 §6) with one 4-byte attribute.
fn stun() -> Vec<u8> {
    let mut p = vec![0x00, 0x01, 0x00, 0x08, 0x21, 0x12, 0xa4, 0x42];
    p.extend_from_slice(&[7; 12]); // transaction id
    p.extend_from_slice(&[0x80, 0x22, 0x00, 0x04, b'a', b'b', b'c', b'd']);
    p
}

#[test]
fn ice_flow_stun_then_dtls_then_srtp_rfc7983() {
    let mut s = udp();
    for i in 0..10u64 {
        send(&mut s, (i % 2) as usize, i * MS, &stun());
    }
    assert!(s.facts().rtp.is_none() && s.wants_more(), "STUN opens an ICE flow: keep listening");
    send(&mut s, CLIENT, 20 * MS, &[22, 0xfe, 0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    for i in 0..3u16 {
        send(&mut s, CLIENT, u64::from(30 + i) * 20 * MS, &rtp(i, u32::from(i) * 960, 7, 111, false, 80));
    }
    let r = rtp_facts(&s);
    assert_eq!((r.demuxed_packets, client(&s).packets), (11, 3));
    assert_eq!(s.facts().problems.rtp_malformed, 0);
}

#[test]
fn stun_alone_is_given_up_and_dtls_first_is_not_ours() {
    let mut s = udp();
    for i in 0..300u64 {
        send(&mut s, CLIENT, i * MS, &stun());
    }
    assert!(s.facts().rtp.is_none() && !s.wants_more());
    let mut s = udp();
    send(&mut s, CLIENT, 0, &[22, 0xfe, 0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    for i in 1..4u16 {
        send(&mut s, CLIENT, u64::from(i) * 20 * MS, &rtp(i, u32::from(i) * 160, 7, PCMU, false, 160));
    }
    assert_eq!(client(&s).packets, 3, "the DTLS datagram was refused, RTP taken from the next");
}

#[test]
fn unconfirmed_version_2_traffic_gives_up_without_facts() {
    let mut s = udp();
    // Version 2 headers with new SSRCs and sequence numbers every time: never a stream.
    for i in 0..20u32 {
        let p = rtp((i * 7919) as u16, i.wrapping_mul(2_654_435_761), i * 31 + 1, 96, false, 40);
        send(&mut s, (i % 2) as usize, u64::from(i) * MS, &p);
    }
    assert!(s.facts().rtp.is_none());
    assert!(!s.wants_more(), "gave up within the probe");
    assert_eq!(s.facts().problems.rtp_malformed, 0, "not ours: nothing counted");
}

#[test]
fn sequence_wrap_at_65535_is_neither_loss_nor_reorder() {
    let s = stream_of(&[65533, 65534, 65535, 0, 1, 2]);
    let st = client(&s);
    assert_eq!((st.packets, st.lost, st.out_of_sequence, st.duplicates), (6, 0, 0, 0));
}

#[test]
fn loss_across_the_wrap() {
    // 65535 and 1 missing: expected = (65536 + 2) - 65533 + 1 = 6, received 4.
    let s = stream_of(&[65533, 65534, 0, 2]);
    assert_eq!(client(&s).lost, 2);
}

#[test]
fn reorder_is_out_of_sequence_not_loss() {
    let s = stream_of(&[1, 2, 3, 5, 4, 6]);
    let st = client(&s);
    assert_eq!((st.packets, st.lost, st.out_of_sequence, st.duplicates), (6, 0, 1, 0));
}

#[test]
fn duplicates_are_counted_and_make_loss_negative() {
    // RFC 3550 A.3: received counts duplicates, so expected 4 - received 6 = -2.
    let s = stream_of(&[1, 2, 3, 3, 2, 4]);
    let st = client(&s);
    assert_eq!((st.packets, st.lost, st.out_of_sequence, st.duplicates), (6, -2, 0, 2));
}

#[test]
fn late_packet_after_a_loss_repairs_the_count() {
    let s = stream_of(&[1, 2, 3, 6, 7, 4]);
    let st = client(&s);
    // 5 never came; 4 came late.
    assert_eq!((st.lost, st.out_of_sequence), (1, 1));
}

#[test]
fn large_jump_restarts_the_count_rfc3550_a1() {
    // 40000 is held as a possible restart; 40001 confirms it; the old run lost nothing.
    let s = stream_of(&[1, 2, 3, 40000, 40001, 40002, 40004]);
    let st = client(&s);
    assert_eq!((st.packets, st.lost), (7, 1));
}

#[test]
fn jitter_worked_by_hand() {
    // PCMU, 8000 Hz: 160 units per 20 ms packet. Arrivals 0, 20, 45, 60 ms.
    // D2 = 160 - 160 = 0           J = 0
    // D3 = 200 - 160 = 40          J = 0 + (40 - 0)/16 = 2.5
    // D4 = 120 - 160 = -40, |D|=40 J = 2.5 + (40 - 2.5)/16 = 4.84375
    let mut s = udp();
    for (i, at) in [0u64, 20, 45, 60].into_iter().enumerate() {
        send(&mut s, CLIENT, at * MS, &rtp(i as u16, i as u32 * 160, 7, PCMU, false, 160));
    }
    let st = client(&s);
    assert_eq!(st.jitter, 4.84375);
    assert_eq!(st.jitter_max, 4.84375);
    assert_eq!(st.jitter_min, 0.0);
    assert!((st.jitter_mean - (0.0 + 2.5 + 4.84375) / 3.0).abs() < 1e-12);
}

#[test]
fn jitter_with_timestamp_wrap_and_video_clock() {
    // H.263 (90 kHz): 3000 units per 33.333 ms frame, timestamps wrapping past 2^32.
    let mut s = udp();
    let t0 = u32::MAX - 4000;
    let arrivals_ns = [0u64, 33_333_333, 66_666_667, 110_000_000];
    for (i, at) in arrivals_ns.into_iter().enumerate() {
        send(&mut s, CLIENT, at, &rtp(i as u16, t0.wrapping_add(i as u32 * 3000), 7, 34, false, 500));
    }
    let st = client(&s);
    assert_eq!(st.clock_hz, 90000);
    // D: 2999.99997 - 3000, 3000.00003 - 3000, 3900 - 3000 = 900 (units).
    let mut j = 0.0f64;
    for pair in arrivals_ns.windows(2) {
        let d = (pair[1] - pair[0]) as f64 * 90000.0 / 1e9 - 3000.0;
        j += (d.abs() - j) / 16.0;
    }
    assert!((st.jitter - j).abs() < 1e-9, "{} vs {j}", st.jitter);
    assert!((st.jitter - 56.25).abs() < 0.01);
}

#[test]
fn dynamic_payload_type_has_no_clock_and_no_jitter() {
    let mut s = udp();
    for (i, at) in [0u64, 20, 45, 60].into_iter().enumerate() {
        send(&mut s, CLIENT, at * MS, &rtp(i as u16, i as u32 * 960, 7, 111, false, 80));
    }
    let st = client(&s);
    assert_eq!((st.clock_hz, st.jitter, st.jitter_max, st.packets), (0, 0.0, 0.0, 4));
}

#[test]
fn events_of_another_payload_type_stay_out_of_the_jitter() {
    let mut s = udp();
    let mut seq = 0u16;
    for i in 0..6u32 {
        send(&mut s, CLIENT, u64::from(i) * 20 * MS, &rtp(seq, i * 160, 7, PCMU, false, 160));
        seq += 1;
        if i == 3 {
            // RFC 4733 event with its start timestamp, sent late: would give |D| large.
            send(&mut s, CLIENT, u64::from(i) * 20 * MS + 5 * MS, &rtp(seq, 0, 7, 101, true, 4));
            seq += 1;
        }
    }
    let st = client(&s);
    assert_eq!((st.packets, st.other_pt_packets, st.lost), (7, 1, 0));
    assert_eq!(st.jitter_max, 0.0, "perfectly paced audio, the event left out");
}

#[test]
fn cut_datagrams_still_count_headers_and_wire_payload() {
    let mut s = udp();
    for i in 0..10u16 {
        let p = rtp(i, u32::from(i) * 160, 7, PCMU, false, 160);
        // As the flow layer does after the first packets: the first 16 bytes only.
        let captured = if i < 3 { &p[..] } else { &p[..16] };
        s.on_payload(CLIENT, u64::from(i) * 20 * MS, None, captured, p.len() as u32);
    }
    let st = client(&s);
    assert_eq!((st.packets, st.payload_bytes, st.payload_bytes_min, st.payload_bytes_max), (10, 1600, 160, 160));
    assert_eq!(s.facts().problems.rtp_malformed, 0);
}

#[test]
fn extension_and_padding_are_not_payload() {
    let mut s = udp();
    for i in 0..4u16 {
        // X: one extension word after a 4-byte extension header; P: 4 bytes of padding.
        let mut p = rtp(i, u32::from(i) * 160, 7, PCMU, false, 0);
        p[0] |= 0x30;
        p.extend_from_slice(&[0xbe, 0xde, 0, 1, 1, 2, 3, 4]);
        p.extend_from_slice(&[0xaa; 100]);
        p.extend_from_slice(&[0, 0, 0, 4]);
        send(&mut s, CLIENT, u64::from(i) * 20 * MS, &p);
    }
    assert_eq!(client(&s).payload_bytes, 4 * 100);
}

#[test]
fn srtp_padding_flag_with_an_impossible_count_is_payload() {
    // SRTP (RFC 3711 §3.1): the padding is encrypted; the last byte is the tag's.
    let mut s = udp();
    for i in 0..3u16 {
        let mut p = rtp(i, u32::from(i) * 160, 7, PCMU, false, 20);
        p[0] |= 0x20;
        p.push(250);
        send(&mut s, CLIENT, u64::from(i) * 20 * MS, &p);
    }
    assert_eq!((client(&s).packets, client(&s).payload_bytes), (3, 63));
    assert_eq!(s.facts().problems.rtp_malformed, 0);
}

#[test]
fn rtcp_multiplexed_with_rtp_and_round_trip() {
    let mut s = udp();
    for i in 0..3u16 {
        send(&mut s, CLIENT, u64::from(i) * 20 * MS, &rtp(i, u32::from(i) * 160, 7, PCMU, false, 160));
    }
    // The client's SR passes the probe at 100 ms; the server's RR answers at 180 ms after
    // holding it 50 ms (DLSR 0.5 * 65536 / 10): round trip probe-server 30 ms.
    send(&mut s, CLIENT, 100 * MS, &rtcp_sr(7, 0x1234_5678, 3, 480, None));
    send(&mut s, SERVER, 180 * MS, &rtcp_rr(9, (25, 2, 0x1234_5678, 3277)));
    let r = rtp_facts(&s);
    assert_eq!(r.rtcp_packets, 2);
    assert_eq!(client(&s).packets, 3, "RTCP is not RTP");
    assert_eq!((r.rtcp[CLIENT].sender_packets, r.rtcp[CLIENT].sender_octets), (Some(3), Some(480)));
    let srv = &r.rtcp[SERVER];
    assert_eq!((srv.fraction_lost, srv.reported_lost, srv.rtt_samples), (Some(25), Some(2), 1));
    // 3277 / 65536 s = 50.003 ms.
    let rtt = srv.rtt_min_ns.expect("one round trip");
    assert!((29_990_000..30_000_000).contains(&rtt), "{rtt}");
    assert_eq!(s.facts().problems.rtp_malformed, 0);
}

#[test]
fn rtcp_only_flow_and_negative_cumulative_loss() {
    let mut s = udp();
    send(&mut s, CLIENT, 0, &rtcp_sr(7, 1, 10, 1600, Some((0, -3, 0, 0))));
    assert!(s.facts().rtp.is_none(), "one RTCP datagram is one confirmation");
    send(&mut s, CLIENT, 5000 * MS, &rtcp_sr(7, 2, 20, 3200, Some((0, -3, 0, 0))));
    let r = rtp_facts(&s);
    assert!(r.dirs.iter().all(Option::is_none));
    assert_eq!((r.rtcp_packets, r.rtcp[CLIENT].reported_lost, r.rtcp[CLIENT].sender_packets), (2, Some(-3), Some(20)));
}

#[test]
fn malformed_and_foreign_datagrams_after_the_claim() {
    let mut s = stream_of(&[1, 2, 3]);
    send(&mut s, CLIENT, 100 * MS, &[0x40, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 7]); // version 1
    send(&mut s, CLIENT, 120 * MS, &[0x8f, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0]); // CSRCs overflow
    send(&mut s, CLIENT, 140 * MS, &[0x90, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 7, 0xbe, 0xde, 0, 16]); // extension overflows
    send(&mut s, CLIENT, 160 * MS, &rtp(4, 640, 8, PCMU, false, 160)); // another SSRC
    let st = client(&s);
    assert_eq!(s.facts().problems.rtp_malformed, 3);
    assert_eq!((st.packets, st.other_ssrc_packets), (3, 1));
}

/// xorshift64*: deterministic bytes for the robustness tests.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// Every datagram accounted for at most once, whatever it was.
fn check_invariants(s: &Session, datagrams: u64, wire_bytes: u64) {
    let Some(r) = s.facts().rtp.as_deref() else { return };
    let mut counted = r.rtcp_packets;
    for st in r.dirs.iter().flatten() {
        counted += st.packets + st.other_ssrc_packets;
        assert!(st.payload_bytes <= wire_bytes);
        assert!(st.payload_bytes_min <= st.payload_bytes_max);
        assert!(st.jitter >= 0.0 && st.jitter <= st.jitter_max && st.jitter_min <= st.jitter_max);
        assert!(st.first_ns <= st.last_ns || st.packets == 0);
    }
    assert!(counted + u64::from(s.facts().problems.rtp_malformed) <= datagrams);
    assert_eq!(r.rtcp_packets, r.rtcp[0].packets + r.rtcp[1].packets);
}

#[test]
fn truncated_and_mutated_input_never_panics() {
    let mut valid =
        vec![rtp(1, 160, 7, PCMU, false, 20), rtcp_sr(7, 9, 1, 2, Some((1, 2, 3, 4))), rtcp_rr(9, (1, -1, 9, 4))];
    let mut x = rtp(2, 320, 7, PCMU, false, 10);
    x[0] |= 0x3f; // P, X, 15 CSRCs
    valid.push(x);
    // Every truncation point of every valid datagram, each as the third datagram of a claimed
    // flow and as a first datagram, both whole-datagram and cut.
    for v in &valid {
        for cut in 0..=v.len() {
            for wire in [cut, v.len()] {
                let mut s = stream_of(&[1, 2, 3]);
                s.on_payload(CLIENT, 100 * MS, None, &v[..cut], wire as u32);
                check_invariants(&s, 4, 3 * 172 + wire as u64);
                let mut s = udp();
                s.on_payload(SERVER, 0, None, &v[..cut], wire as u32);
                check_invariants(&s, 1, wire as u64);
            }
        }
    }
    // Mutations: random bytes flipped in valid datagrams, random lengths, both directions.
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for round in 0..3000u64 {
        let mut s = stream_of(&[1, 2, 3]);
        let (mut datagrams, mut wire_bytes) = (3u64, 3 * 172u64);
        for k in 0..8u64 {
            let mut p = valid[(rng.next() % valid.len() as u64) as usize].clone();
            for _ in 0..(rng.next() % 4) {
                let at = (rng.next() % p.len() as u64) as usize;
                p[at] ^= rng.next() as u8;
            }
            p.truncate((rng.next() % (p.len() as u64 + 1)) as usize);
            let wire = p.len() as u32 + if rng.next().is_multiple_of(3) { (rng.next() % 2000) as u32 } else { 0 };
            s.on_payload((k % 2) as usize, round * 1000 + k, None, &p, wire);
            datagrams += 1;
            wire_bytes += u64::from(wire);
        }
        check_invariants(&s, datagrams, wire_bytes);
    }
}

// ---- Real captures against tshark's RTP analysis -------------------------------------------

mod tshark {
    use super::*;
    use std::collections::HashMap;
    use std::net::IpAddr;
    use std::path::PathBuf;
    use std::process::Command;

    /// One row of `tshark -z rtp,streams`.
    #[derive(Debug, Clone)]
    pub struct Row {
        pub src: IpAddr,
        pub sport: u16,
        pub dst: IpAddr,
        pub dport: u16,
        pub ssrc: u32,
        /// The payload types' names, e.g. `g711A, CN`.
        pub payload: String,
        pub packets: u64,
        pub lost: i64,
        pub max_jitter_ms: f64,
        pub mean_jitter_ms: f64,
    }

    pub fn traces_dir() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces")
    }

    /// Runs tshark's RTP stream statistics (heuristic RTP on every UDP port) over a capture.
    pub fn rtp_streams(path: &std::path::Path) -> Vec<Row> {
        let out = Command::new("tshark")
            .arg("-r")
            .arg(path)
            .args(["-q", "-o", "rtp.heuristic_rtp:TRUE", "-z", "rtp,streams"])
            .output()
            .unwrap_or_else(|e| panic!("tshark could not run ({e}): install it (make test does)"));
        assert!(out.status.success(), "tshark failed on {}: {}", path.display(), String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8_lossy(&out.stdout);
        text.lines().filter_map(parse_row).collect()
    }

    /// `start end src sport dst dport 0xSSRC payload... pkts lost (pct%) min_delta mean_delta
    /// max_delta min_jitter mean_jitter max_jitter [X]`.
    fn parse_row(line: &str) -> Option<Row> {
        let mut t: Vec<&str> = line.split_whitespace().collect();
        if t.len() < 16 || !t[6].starts_with("0x") {
            return None;
        }
        if t.last() == Some(&"X") {
            t.pop();
        }
        let n = t.len();
        let num = |s: &str| s.parse::<f64>().ok();
        let row = Row {
            src: t[2].parse().ok()?,
            sport: t[3].parse().ok()?,
            dst: t[4].parse().ok()?,
            dport: t[5].parse().ok()?,
            ssrc: u32::from_str_radix(&t[6][2..], 16).ok()?,
            payload: t[7..n - 9].join(" "),
            packets: t[n - 9].parse().ok()?,
            lost: t[n - 8].parse().ok()?,
            max_jitter_ms: num(t[n - 1])?,
            mean_jitter_ms: num(t[n - 2])?,
        };
        assert!(t[n - 7].ends_with("%)"), "unexpected tshark row layout: {line}");
        Some(row)
    }

    /// Datagrams from `src` to `dst` that tshark did not dissect as RTP although they are RTP
    /// version 2 with `ssrc` (byte 1 outside RTCP's 192-223).
    pub fn not_rtp(path: &std::path::Path, src: (IpAddr, u16), dst: (IpAddr, u16), ssrc: u32) -> u64 {
        let ip = if src.0.is_ipv4() { "ip" } else { "ipv6" };
        let filter = format!(
            "{ip}.src=={} && {ip}.dst=={} && udp.srcport=={} && udp.dstport=={} && !rtp.ssrc",
            src.0, dst.0, src.1, dst.1
        );
        let out = Command::new("tshark")
            .arg("-r")
            .arg(path)
            .args(["-o", "rtp.heuristic_rtp:TRUE", "-Y", &filter, "-T", "fields", "-e", "udp.payload"])
            .output()
            .unwrap_or_else(|e| panic!("tshark could not run ({e})"));
        assert!(out.status.success(), "tshark failed: {}", String::from_utf8_lossy(&out.stderr));
        let want = format!("{ssrc:08x}");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|hex| {
                let hex = hex.replace(':', "");
                let v2 = hex.get(0..1).and_then(|b| u8::from_str_radix(b, 16).ok()).is_some_and(|b| b >> 2 == 2);
                let pt = hex.get(2..4).and_then(|b| u8::from_str_radix(b, 16).ok());
                v2 && pt.is_some_and(|pt| !(192..=223).contains(&pt)) && hex.get(16..24) == Some(want.as_str())
            })
            .count() as u64
    }

    /// An address and port.
    type End = (IpAddr, u16);

    /// One UDP flow of a capture: its ends (client = first sender) and its session.
    pub struct Flow {
        pub ends: [(IpAddr, u16); 2],
        pub session: Session,
    }

    /// Payload packets of each direction handed over whole before the flow layer cuts them.
    pub const FULL_PACKETS: u32 = 8;
    /// Bytes kept of a later datagram.
    pub const CUT_BYTES: usize = 16;

    /// Reads a capture and feeds each UDP flow's datagrams to a `Session`, as the flow layer
    /// does when `cut` (whole payloads for the first [`FULL_PACKETS`] of each direction, then
    /// [`CUT_BYTES`]), or whole throughout.
    pub fn flows(path: &std::path::Path, cut: bool) -> Vec<Flow> {
        let mut src = sonde_capture::open(path).unwrap_or_else(|e| panic!("{}: {e:?}", path.display()));
        let mut index: HashMap<(End, End), usize> = HashMap::new();
        let mut flows: Vec<(Flow, [u32; 2])> = Vec::new();
        let mut summary = sonde_wire::PacketSummary::EMPTY;
        while let Some(frame) = src.next_frame().unwrap_or_else(|e| panic!("{}: {e:?}", path.display())) {
            let Ok(offsets) = sonde_wire::decode_with_offsets(
                sonde_wire::LinkType(frame.link_type),
                frame.data,
                frame.wire_len,
                &mut summary,
            ) else {
                continue;
            };
            let (Some(ip), Some(sonde_wire::Transport::Udp(u)), Some(at)) =
                (summary.ip, summary.transport, offsets.payload)
            else {
                continue;
            };
            if u.payload_len == 0 {
                continue;
            }
            let at = at as usize;
            let end = frame.data.len().min(at + u.payload_len as usize);
            let payload = frame.data.get(at..end).unwrap_or(&[]);
            let (a, b) = ((ip.src, u.src_port), (ip.dst, u.dst_port));
            let key = if a <= b { (a, b) } else { (b, a) };
            let i = *index.entry(key).or_insert_with(|| {
                let session = Session::new(Transport::Udp, a.1, b.1);
                flows.push((Flow { ends: [a, b], session }, [0, 0]));
                flows.len() - 1
            });
            let (flow, seen) = &mut flows[i];
            let dir = if flow.ends[0] == a { CLIENT } else { SERVER };
            seen[dir] += 1;
            let given =
                if cut && seen[dir] > FULL_PACKETS { &payload[..payload.len().min(CUT_BYTES)] } else { payload };
            flow.session.on_payload(dir, frame.ts_ns, None, given, u.payload_len);
        }
        flows.into_iter().map(|(f, _)| f).collect()
    }
}

const NDPI: &str = "realistic/ntop+nDPI/tests/cfgs/default/pcap/";

/// Captures holding real RTP (SIP and Skinny voice, video, WebRTC behind STUN and DTLS, GTP
/// tunnelled VoLTE, GeForce NOW), with the number of streams compared in each (94 in all when
/// written).
/// Every capture of ../shared/traces where tshark's heuristic finds RTP that we claim is here.
const RTP_TRACES: &[(&str, usize)] = &[
    ("realistic/arkime+arkime/tests/pcap/gtp-iphone.pcap", 2),
    ("realistic/irontec+sngrep/tests/aaa.pcap", 1),
    ("realistic/nfstream+nfstream/tests/pcaps/wa_video.pcap", 4),
    ("FAX-Call-t38-CA-TDM-SIP-FB-1.pcap", 2),
    ("KakaoTalk_talk.pcap", 4),
    ("discord.pcap", 21),
    ("false_positives.pcapng", 7),
    ("geforcenow.pcapng", 1),
    ("i3d.pcap", 4),
    ("rtp.pcapng", 4),
    ("sip.pcap", 1),
    ("skinny.pcap", 6),
    ("skype-conference-call.pcap", 1),
    ("stun.pcap", 1),
    ("stun_classic.pcap", 2),
    ("stun_dtls_rtp.pcapng", 1),
    ("stun_google_meet.pcapng", 5),
    ("stun_signal.pcapng", 4),
    ("stun_wa_call.pcapng", 6),
    ("teams.pcap", 1),
    ("wa_video.pcap", 4),
    ("wa_voice.pcap", 4),
    ("whatsapp_login_call.pcap", 8),
];

/// Captures where tshark's heuristic RTP dissector finds streams in traffic that is not RTP
/// (a VPN, peer-to-peer and game protocols).
const NOT_RTP_TRACES: &[&str] = &[
    "tinc.pcap",
    "gnutella.pcap",
    "ethereum.pcap",
    "raknet.pcap",
    "crynet.pcap",
    "epicgames.pcapng",
    "riotgames.pcap",
    "genshin-impact.pcap",
];

fn trace_path(name: &str) -> std::path::PathBuf {
    let rel = if name.contains('/') { name.to_string() } else { format!("{NDPI}{name}") };
    let path = tshark::traces_dir().join(rel);
    assert!(path.is_file(), "missing trace {} (../shared/traces)", path.display());
    path
}

#[test]
fn tshark_heuristic_false_positives_are_not_claimed() {
    let mut tshark_streams = 0;
    for name in NOT_RTP_TRACES {
        let path = trace_path(name);
        tshark_streams += tshark::rtp_streams(&path).len();
        for f in tshark::flows(&path, true) {
            assert!(f.session.facts().rtp.is_none(), "{name}: flow {:?} claimed as RTP", f.ends);
        }
    }
    // The captures do make tshark's heuristic fire, so they test recognition.
    assert!(tshark_streams >= 50, "tshark found only {tshark_streams} streams");
    eprintln!("tshark's heuristic: {tshark_streams} streams in captures without RTP; ours: none");
}

#[test]
fn real_captures_agree_with_tshark() {
    let verbose = std::env::var_os("RTP_VERBOSE").is_some();
    let list: Vec<(String, usize)> = match std::env::var("RTP_TRACES") {
        Ok(v) => v.split(',').map(|s| (s.to_string(), 0)).collect(),
        Err(_) => RTP_TRACES.iter().map(|&(n, w)| (n.to_string(), w)).collect(),
    };
    let mut compared_total = 0;
    let mut jitter_compared = 0;
    let mut bad = Vec::new();
    let mut explained = Vec::new();
    for (name, want) in &list {
        let path = trace_path(name);
        let rows = tshark::rtp_streams(&path);
        let cut = tshark::flows(&path, true);
        let whole = tshark::flows(&path, false);
        let mut compared = 0;
        let mut claimed = 0;
        for (fc, fw) in cut.iter().zip(&whole) {
            // The flow layer's cut datagrams give the same RTP statistics as whole ones (RTCP
            // reports past the first 16 bytes are lost to the cut, so only RTCP's count).
            // Nor does the padding count, the datagram's last byte: payload bytes may differ.
            let rtp_part = |f: &tshark::Flow| {
                f.session.facts().rtp.as_deref().map(|r| {
                    let dirs = r.dirs.clone().map(|d| {
                        d.map(|s| RtpStream { payload_bytes: 0, payload_bytes_min: 0, payload_bytes_max: 0, ..s })
                    });
                    (dirs, r.rtcp_packets, r.demuxed_packets)
                })
            };
            let padding_counted = |(c, w): (&Option<RtpStream>, &Option<RtpStream>)| match (c, w) {
                (Some(c), Some(w)) => c.payload_bytes >= w.payload_bytes,
                _ => true,
            };
            let padding_ok = match (fc.session.facts().rtp.as_deref(), fw.session.facts().rtp.as_deref()) {
                (Some(c), Some(w)) => c.dirs.iter().zip(&w.dirs).all(padding_counted),
                _ => true,
            };
            if rtp_part(fc) != rtp_part(fw) || !padding_ok {
                bad.push(format!(
                    "{name}: cut vs whole, flow {:?}\n{:?}\n{:?}",
                    fc.ends,
                    fc.session.facts().rtp,
                    fw.session.facts().rtp
                ));
            }
            let Some(r) = fc.session.facts().rtp.as_deref() else { continue };
            claimed += 1;
            for (d, st) in r.dirs.iter().enumerate() {
                let Some(st) = st else { continue };
                let (src, dst) = (fc.ends[d], fc.ends[1 - d]);
                let Some(row) =
                    rows.iter().find(|r| (r.src, r.sport) == src && (r.dst, r.dport) == dst && r.ssrc == st.ssrc)
                else {
                    bad.push(format!("{name}: tshark has no stream {src:?} -> {dst:?} ssrc {:#x}", st.ssrc));
                    continue;
                };
                let ms = if st.clock_hz != 0 { 1000.0 / f64::from(st.clock_hz) } else { 0.0 };
                let (max, mean) = (st.jitter_max * ms, st.jitter_mean * ms);
                if verbose {
                    eprintln!("{name}: {row:?}\n  ours pkts {} lost {} oos {} dup {} max {max:.3} mean {mean:.3} markers {} otherpt {} clock {}", st.packets, st.lost, st.out_of_sequence, st.duplicates, st.marker_packets, st.other_pt_packets, st.clock_hz);
                }
                // Datagrams of the stream (version 2, its SSRC) that tshark's dissectors gave to
                // another protocol or refused: T.38 set up by SDP on the port, SRTP packets whose
                // last byte (the tag's) is not a possible padding count.
                let missed = if st.packets != row.packets { tshark::not_rtp(&path, src, dst, st.ssrc) } else { 0 };
                if missed > 0 {
                    explained.push(format!(
                        "{name}: {src:?} -> {dst:?} ssrc {:#x}: ours {} packets, lost {}; tshark {} + {missed} it did not take as RTP, lost {}",
                        st.ssrc, st.packets, st.lost, row.packets, row.lost
                    ));
                }
                if st.packets != row.packets + missed || st.lost.abs_diff(row.lost) > missed {
                    bad.push(format!(
                        "{name}: packets/lost {}/{} vs {row:?} (+{missed} not RTP to tshark)",
                        st.packets, st.lost
                    ));
                }
                if st.clock_hz != 0 {
                    jitter_compared += 1;
                    if (max - row.max_jitter_ms).abs() > 0.01 + 0.05 * row.max_jitter_ms {
                        bad.push(format!("{name}: max jitter {max} ms vs tshark {row:?}"));
                    }
                    // tshark leaves packets with the marker bit out of its mean (and divides by
                    // all packets): the means may differ when markers follow the first packet.
                    if (mean - row.mean_jitter_ms).abs() <= 0.01 + 0.05 * row.mean_jitter_ms {
                    } else if st.marker_packets > 1 {
                        explained.push(format!(
                            "{name}: {src:?} -> {dst:?} ssrc {:#x} ({}): {} marker packets, mean jitter {mean:.3} ms vs tshark's {:.3}",
                            st.ssrc, row.payload, st.marker_packets, row.mean_jitter_ms
                        ));
                    } else {
                        bad.push(format!("{name}: mean jitter {mean} ms vs tshark {row:?}"));
                    }
                }
                compared += 1;
            }
        }
        let mut other_ssrc = 0;
        let mut unclaimed = Vec::new();
        for row in &rows {
            let (src, dst) = ((row.src, row.sport), (row.dst, row.dport));
            let flow = cut.iter().find(|f| f.ends == [src, dst] || f.ends == [dst, src]);
            let d = flow.map(|f| if f.ends[0] == src { CLIENT } else { SERVER });
            let ours = flow.and_then(|f| f.session.facts().rtp.as_deref());
            match (ours, d) {
                (Some(r), Some(d)) if r.dirs[d].as_ref().is_some_and(|s| s.ssrc == row.ssrc) => {}
                (Some(_), _) => other_ssrc += 1,
                _ => unclaimed.push(row),
            }
        }
        if verbose {
            for row in &unclaimed {
                eprintln!("{name}: not claimed: {row:?}");
            }
        }
        eprintln!(
            "{name}: tshark streams {}, flows claimed {claimed}, streams compared {compared}, other SSRCs {other_ssrc}, on flows not claimed {}",
            rows.len(),
            unclaimed.len()
        );
        if compared < *want {
            bad.push(format!("{name}: compared {compared} streams, expected at least {want}"));
        }
        compared_total += compared;
    }
    eprintln!("compared {compared_total} RTP streams with tshark, {jitter_compared} of them with a clock (jitter)");
    for e in &explained {
        eprintln!("explained: {e}");
    }
    assert!(bad.is_empty(), "{} disagreements:\n{}", bad.len(), bad.join("\n"));
}
