//! Scenario tests of the tracker on hand-made packets: each one a small TCP or UDP exchange
//! whose right answer is known.

use std::net::IpAddr;

use sonde_wire::{Fragment, IpSummary, PacketSummary, TcpFlags, TcpOptions, TcpSummary, Transport, UdpSummary};

use crate::*;

const C: &str = "10.0.0.1";
const S: &str = "10.0.0.2";
const MS: u64 = 1_000_000;

fn ip(src: &str, dst: &str, total_len: u32, ident: u32) -> IpSummary {
    IpSummary {
        src: src.parse::<IpAddr>().unwrap(),
        dst: dst.parse::<IpAddr>().unwrap(),
        total_len,
        ttl: 64,
        ident,
        protocol: 6,
        fragment: Fragment::No,
    }
}

/// A TCP segment; `from_client` picks the direction.
fn seg(from_client: bool, flags: u16, seq: u32, ack: u32, len: u32, ident: u32) -> PacketSummary {
    let (src, dst, sp, dp) = if from_client { (C, S, 40000, 80) } else { (S, C, 80, 40000) };
    let mut options = TcpOptions::default();
    if flags & TcpFlags::SYN != 0 {
        options.mss = Some(1460);
        options.window_scale = Some(7);
        options.sack_permitted = true;
    }
    PacketSummary {
        ip: Some(ip(src, dst, 40 + len, ident)),
        transport: Some(Transport::Tcp(TcpSummary {
            src_port: sp,
            dst_port: dp,
            seq,
            ack,
            flags: TcpFlags(flags),
            window: 1000,
            header_len: 20,
            payload_len: len,
            options,
        })),
        ..PacketSummary::EMPTY
    }
}

const SYN: u16 = TcpFlags::SYN;
const SYNACK: u16 = TcpFlags::SYN | TcpFlags::ACK;
const ACK: u16 = TcpFlags::ACK;
const FINACK: u16 = TcpFlags::FIN | TcpFlags::ACK;

fn run(packets: &[(u64, PacketSummary)]) -> Vec<FlowRecord> {
    run_with(FlowConfig::default(), packets)
}

fn run_with(cfg: FlowConfig, packets: &[(u64, PacketSummary)]) -> Vec<FlowRecord> {
    let mut t = FlowTracker::new(cfg);
    let mut out = Vec::new();
    for (ts, p) in packets {
        t.on_packet(*ts, p, &mut out);
    }
    t.finish(&mut out);
    out
}

fn only_tcp(records: &[FlowRecord]) -> &TcpRecord {
    assert_eq!(records.len(), 1, "{records:#?}");
    match &records[0] {
        FlowRecord::Tcp(t) => t,
        other => panic!("not TCP: {other:?}"),
    }
}

/// Handshake at the client side (client close to the probe), 3 data segments, FIN exchange.
fn clean_exchange() -> Vec<(u64, PacketSummary)> {
    vec![
        (1000 * MS, seg(true, SYN, 100, 0, 0, 1)),
        (1020 * MS, seg(false, SYNACK, 5000, 101, 0, 1)),
        (1021 * MS, seg(true, ACK, 101, 5001, 0, 2)),
        (1022 * MS, seg(true, ACK, 101, 5001, 200, 3)),
        (1042 * MS, seg(false, ACK, 5001, 301, 1000, 2)),
        (1043 * MS, seg(false, ACK, 6001, 301, 1000, 3)),
        (1044 * MS, seg(true, ACK, 301, 7001, 0, 4)),
        (1050 * MS, seg(true, FINACK, 301, 7001, 0, 5)),
        (1070 * MS, seg(false, FINACK, 7001, 302, 0, 4)),
        (1071 * MS, seg(true, ACK, 302, 7002, 0, 6)),
    ]
}

#[test]
fn clean_connection_counts_and_rtts() {
    let records = run(&clean_exchange());
    let r = only_tcp(&records);
    assert!(r.complete);
    assert_eq!(r.end, EndReason::Fin);
    assert_eq!(r.endpoints.client_port, 40000);
    assert_eq!((r.client.pkts, r.server.pkts), (6, 4));
    assert_eq!((r.client.unique_bytes, r.server.unique_bytes), (200, 2000));
    assert_eq!((r.client.data_pkts, r.server.data_pkts), (1, 2));
    assert_eq!(r.client.pure_ack_pkts, 3);
    assert_eq!(r.hs_syn_synack_ns, Some(20 * MS));
    assert_eq!(r.hs_synack_ack_ns, Some(MS));
    // Client data at 1022 acked at 1042: 20 ms. Server data acked together at 1044: the ACK
    // matches the second segment exactly (1 ms); the first is acked cumulatively, no sample.
    assert_eq!((r.client.rtt.count, r.client.rtt.min_ns), (1, 20 * MS));
    assert_eq!((r.server.rtt.count, r.server.rtt.min_ns), (1, MS));
    assert_eq!((r.client.retx_pkts, r.client.ooo_pkts, r.server.retx_pkts, r.server.ooo_pkts), (0, 0, 0, 0));
    // Window scale 7 on both SYNs: later windows are scaled, the SYNs' are not.
    assert_eq!((r.client.win_min, r.client.win_max), (1000, 1000 << 7));
    assert_eq!(r.server.inflight_initial, 2000);
    assert_eq!(r.client.first_ack_ns, 1021 * MS);
}

#[test]
fn retransmission_and_hole_fill_are_told_apart() {
    let p = vec![
        (1000 * MS, seg(true, SYN, 100, 0, 0, 1)),
        (1020 * MS, seg(false, SYNACK, 5000, 101, 0, 1)),
        (1021 * MS, seg(true, ACK, 101, 5001, 0, 2)),
        (1022 * MS, seg(true, ACK, 101, 5001, 200, 3)),
        // 5001..6001 is lost before the probe; 6001..7001 arrives.
        (1043 * MS, seg(false, ACK, 6001, 301, 1000, 3)),
        (1044 * MS, seg(true, ACK, 301, 5001, 0, 4)),
        // Retransmitted after a timeout: it fills the hole (out of sequence, not a repeat).
        (1340 * MS, seg(false, ACK, 5001, 301, 1000, 4)),
        (1341 * MS, seg(true, ACK, 301, 7001, 0, 5)),
        // Then 6001..7001 again, although it was acknowledged: a needless retransmission.
        (1600 * MS, seg(false, ACK, 6001, 301, 1000, 5)),
    ];
    let records = run(&p);
    let r = only_tcp(&records);
    assert_eq!(r.server.unique_bytes, 2000);
    assert_eq!(r.server.ooo_pkts, 1);
    assert_eq!(r.server.retx_pkts, 1);
    assert_eq!(r.server.retx_bytes, 1000);
    let a = r.server.anomalies;
    // 297 ms after the highest segment, with a 1 ms handshake RTT: past the 200 ms RTO floor.
    assert_eq!((a.rto, a.unneeded_rto), (1, 1), "{a:?}");
    let classified = a.rto
        + a.fast_retx
        + a.reordering
        + a.net_dup
        + a.flow_control
        + a.unneeded_rto
        + a.unneeded_fast_retx
        + a.unknown;
    assert_eq!(classified, r.server.ooo_pkts + r.server.retx_pkts);
}

#[test]
fn network_duplicate_is_recognised_by_ip_ident() {
    let mut p = clean_exchange();
    let dup = p[3].1;
    p.insert(4, (1022 * MS + 50_000, dup));
    let records = run(&p);
    let r = only_tcp(&records);
    assert_eq!(r.client.retx_pkts, 1);
    assert_eq!(r.client.anomalies.net_dup, 1);
    assert_eq!(r.client.unique_bytes, 200);
}

#[test]
fn karn_rule_drops_samples_of_retransmitted_segments() {
    let mut p = clean_exchange();
    // Retransmit the client's request before its ACK arrives: the ACK is ambiguous.
    p.insert(4, (1030 * MS, seg(true, ACK, 101, 5001, 200, 30)));
    let records = run(&p);
    let r = only_tcp(&records);
    assert_eq!(r.client.retx_pkts, 1);
    assert_eq!(r.client.rtt.count, 0);
}

#[test]
fn a_new_syn_after_close_starts_a_new_flow() {
    let mut p = clean_exchange();
    let mut second: Vec<_> = clean_exchange()
        .into_iter()
        .map(|(t, mut s)| {
            if let Some(Transport::Tcp(t)) = &mut s.transport {
                // Another ISN on each side.
                if t.src_port == 40000 {
                    t.seq = t.seq.wrapping_add(1_000_000);
                    t.ack = t.ack.wrapping_add(2_000_000);
                } else {
                    t.seq = t.seq.wrapping_add(2_000_000);
                    t.ack = t.ack.wrapping_add(1_000_000);
                }
            }
            (t + 2000 * MS, s)
        })
        .collect();
    p.append(&mut second);
    let records = run(&p);
    assert_eq!(records.len(), 2);
    for r in &records {
        let FlowRecord::Tcp(t) = r else { panic!() };
        assert!(t.complete);
        assert_eq!(t.client.unique_bytes, 200);
        assert_eq!(t.client.syn_cnt, 1);
    }
}

#[test]
fn flow_seen_from_its_syn_ack_keeps_the_client_role() {
    let p: Vec<_> = clean_exchange().into_iter().skip(1).collect();
    let records = run(&p);
    let r = only_tcp(&records);
    assert!(!r.complete);
    assert_eq!(r.endpoints.client_port, 40000);
    assert_eq!(r.client.unique_bytes, 200);
}

#[test]
fn sequence_numbers_wrap() {
    let isn = u32::MAX - 50;
    let p = vec![
        (0, seg(true, SYN, isn, 0, 0, 1)),
        (MS, seg(false, SYNACK, 7, isn.wrapping_add(1), 0, 1)),
        (2 * MS, seg(true, ACK, isn.wrapping_add(1), 8, 100, 2)),
        (3 * MS, seg(true, ACK, isn.wrapping_add(101), 8, 100, 3)),
        (4 * MS, seg(false, ACK, 8, isn.wrapping_add(201), 0, 2)),
    ];
    let records = run(&p);
    let r = only_tcp(&records);
    assert_eq!(r.client.unique_bytes, 200);
    assert_eq!(r.client.retx_pkts + r.client.ooo_pkts, 0);
    assert_eq!(r.client.rtt.count, 1);
}

/// A 10-byte DNS query from the client's port `sport`.
fn udp(sport: u16) -> PacketSummary {
    PacketSummary {
        ip: Some(ip(C, S, 28 + 10, 0)),
        transport: Some(Transport::Udp(UdpSummary { src_port: sport, dst_port: 53, payload_len: 10 })),
        ..PacketSummary::EMPTY
    }
}

#[test]
fn idle_timeout_and_eviction_end_flows() {
    let cfg = FlowConfig { max_flows: 2, udp_idle_ns: 10 * MS, ..FlowConfig::default() };
    let mut t = FlowTracker::new(cfg);
    let mut out = Vec::new();
    t.on_packet(0, &udp(1), &mut out);
    t.on_packet(MS, &udp(2), &mut out);
    t.on_packet(2 * MS, &udp(3), &mut out); // table full: flow 1 (idlest) is evicted
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].end(), EndReason::Evicted);
    t.on_packet(11 * MS + MS / 2, &udp(3), &mut out); // flow 2 idle 10.5 ms ≥ 10 ms
    assert_eq!(out.len(), 2);
    assert_eq!(out[1].end(), EndReason::Idle);
    assert_eq!(out[1].endpoints().client_port, 2);
    t.finish(&mut out);
    assert_eq!(out.len(), 3);
    assert_eq!(out[2].end(), EndReason::Eof);
    let FlowRecord::Udp(u) = &out[2] else { panic!() };
    assert_eq!((u.client.pkts, u.client.payload_bytes, u.client.ip_bytes), (2, 20, 76));
    assert_eq!(t.table_stats().evicted, 1);
}

#[test]
fn a_fin_on_a_sequence_number_data_already_took_is_not_subtracted() {
    // Seen in webex.pcap: data 3999:5353, then a FIN with seq 3999.
    let mut p = clean_exchange();
    p.insert(8, (1060 * MS, seg(false, FINACK, 6001, 302, 0, 8)));
    let records = run(&p);
    let r = only_tcp(&records);
    assert_eq!(r.server.unique_bytes, 2000);
    assert_eq!(r.server.retx_pkts, 1);
}

#[test]
fn an_ack_released_by_a_later_hole_fill_gives_no_sample() {
    let p = vec![
        (0, seg(true, SYN, 100, 0, 0, 1)),
        (20 * MS, seg(false, SYNACK, 5000, 101, 0, 1)),
        (21 * MS, seg(true, ACK, 101, 5001, 0, 2)),
        // The server's 5001..6001 is lost before the probe; 6001..7001 passes at 30 ms.
        (30 * MS, seg(false, ACK, 6001, 101, 1000, 2)),
        (31 * MS, seg(true, ACK, 101, 5001, 0, 3)),
        // The retransmission fills the hole at 330 ms; the ACK for everything follows.
        (330 * MS, seg(false, ACK, 5001, 101, 1000, 3)),
        (331 * MS, seg(true, ACK, 101, 7001, 0, 4)),
    ];
    let records = run(&p);
    let r = only_tcp(&records);
    // The ACK matches 6001..7001 exactly, but 301 ms after it was sent is the retransmission's
    // delay, not a round trip.
    assert_eq!(r.server.rtt.count, 0, "{:?}", r.server.rtt);
}

#[test]
fn timestamps_stepping_back_do_not_split_flows() {
    // kday3.pcap-like: a flow starts while the trace's clock has jumped back an hour.
    let hour = 3_600_000 * MS;
    let mut p: Vec<_> = clean_exchange().into_iter().map(|(t, s)| (t + hour, s)).collect();
    p[0].0 = 1000 * MS;
    let udp = PacketSummary {
        ip: Some(ip(C, S, 38, 0)),
        transport: Some(Transport::Udp(UdpSummary { src_port: 1, dst_port: 53, payload_len: 10 })),
        ..PacketSummary::EMPTY
    };
    p.insert(0, (hour, udp));
    let records = run(&p);
    let tcp: Vec<_> = records.iter().filter(|r| matches!(r, FlowRecord::Tcp(_))).collect();
    assert_eq!(tcp.len(), 1, "{tcp:#?}");
    let FlowRecord::Tcp(r) = tcp[0] else { unreachable!() };
    assert!(r.complete);
    assert_eq!((r.client.pkts, r.server.pkts), (6, 4));
}

#[test]
fn a_network_duplicate_is_judged_against_its_latest_copy() {
    // A capture that sees each frame several times (wireshark-retrans.pcap): the third copy is
    // 1.2 ms after the first but 0.7 ms after the second, within the 1 ms probe→client RTT.
    let mut p = clean_exchange();
    let copy = p[3].1;
    p.insert(4, (1022 * MS + 500_000, copy));
    p.insert(5, (1023 * MS + 200_000, copy));
    let records = run(&p);
    let r = only_tcp(&records);
    assert_eq!(r.client.retx_pkts, 2);
    assert_eq!(r.client.anomalies.net_dup, 2, "{:?}", r.client.anomalies);
}

/// The retransmission scenario of `retransmission_and_hole_fill_are_told_apart`, from `t0`.
fn lossy_exchange(t0: u64) -> Vec<(u64, PacketSummary)> {
    [
        (0, seg(true, SYN, 100, 0, 0, 1)),
        (20, seg(false, SYNACK, 5000, 101, 0, 1)),
        (21, seg(true, ACK, 101, 5001, 0, 2)),
        (22, seg(true, ACK, 101, 5001, 200, 3)),
        (43, seg(false, ACK, 6001, 301, 1000, 3)),
        (44, seg(true, ACK, 301, 5001, 0, 4)),
        (340, seg(false, ACK, 5001, 301, 1000, 4)),
        (341, seg(true, ACK, 301, 7001, 0, 5)),
        (600, seg(false, ACK, 6001, 301, 1000, 5)),
    ]
    .into_iter()
    .map(|(ms, p)| (t0 + ms * MS, p))
    .collect()
}

#[test]
fn rare_event_counters_start_from_zero_in_every_flow() {
    // Two lossy flows on one tuple, the second after the first went idle: the second reuses
    // the first's out-of-line counter block and must count only its own events.
    let mut packets = lossy_exchange(1000 * MS);
    packets.extend(lossy_exchange(1000 * MS + 400_000 * MS));
    let records = run(&packets);
    assert_eq!(records.len(), 2);
    let [FlowRecord::Tcp(a), FlowRecord::Tcp(b)] = &records[..] else { panic!("{records:#?}") };
    assert_eq!((a.server.retx_pkts, a.server.ooo_pkts, a.server.retx_bytes), (1, 1, 1000));
    for (x, y) in [(&a.client, &b.client), (&a.server, &b.server)] {
        assert_eq!(
            (x.retx_pkts, x.ooo_pkts, x.retx_bytes, x.win_zero),
            (y.retx_pkts, y.ooo_pkts, y.retx_bytes, y.win_zero)
        );
        assert_eq!(x.anomalies, y.anomalies);
    }
}

/// `p` with the client's port set to `port`.
fn on_port(mut p: PacketSummary, port: u16) -> PacketSummary {
    if let Some(Transport::Tcp(t)) = &mut p.transport {
        if t.src_port == 80 {
            t.dst_port = port;
        } else {
            t.src_port = port;
        }
    }
    p
}

#[test]
fn a_closed_flow_ends_after_its_linger_even_behind_longer_lived_flows() {
    let mut t = FlowTracker::new(FlowConfig::default());
    let mut out = Vec::new();
    // A stays open (300 s idle timeout); B opens after it and closes at once (60 s linger).
    t.on_packet(0, &on_port(seg(true, SYN, 1, 0, 0, 1), 1111), &mut out);
    for (ts, p) in clean_exchange() {
        t.on_packet(ts, &on_port(p, 2222), &mut out);
    }
    assert!(out.is_empty());
    // 61 s after B's last packet, a packet of A: B has lingered long enough, A has not.
    t.on_packet(1071 * MS + 61_000 * MS, &on_port(seg(true, SYN, 1, 0, 0, 2), 1111), &mut out);
    assert_eq!(out.len(), 1, "{out:#?}");
    let r = only_tcp(&out);
    assert_eq!((r.endpoints.client_port, r.end), (2222, EndReason::Fin));
}

/// Byte and in-flight counts are kept in 32 bits per direction while the flow lives, continued
/// out of line past them: a direction that sends more than 4 GiB, never acknowledged, still gets
/// its exact 64-bit counts.
#[test]
fn byte_counts_go_past_4_gib() {
    const LEN: u32 = 60_000;
    let segments: u32 = 80_000; // 4.8 GB of payload
    let mut t = FlowTracker::new(FlowConfig::default());
    let mut out = Vec::new();
    t.on_packet(MS, &seg(true, SYN, 0, 0, 0, 1), &mut out);
    t.on_packet(2 * MS, &seg(false, SYNACK, 9, 1, 0, 1), &mut out);
    for i in 0..segments {
        let seq = 1u32.wrapping_add(i.wrapping_mul(LEN));
        t.on_packet(3 * MS + u64::from(i), &seg(true, ACK, seq, 10, LEN, i), &mut out);
    }
    t.finish(&mut out);
    let r = only_tcp(&out);
    let payload = u64::from(segments) * u64::from(LEN);
    assert_eq!(r.client.payload_bytes, payload);
    assert_eq!(r.client.ip_bytes, payload + 40 * (u64::from(segments) + 1));
    assert_eq!(r.client.unique_bytes, payload);
    let inflight = (r.client.inflight_min, r.client.inflight_max, r.client.inflight_initial);
    assert_eq!(inflight, (u64::from(LEN), payload, payload));
}

/// Issue 21: the SYN, FIN and RST counts keep a byte inline and carry past 255 out of line;
/// the SACK blocks are counted out of line. The counts stay exact.
#[test]
fn flag_counts_go_past_a_byte_and_sack_blocks_add_up() {
    let mut p = Vec::new();
    let mut ts = MS;
    let mut at = |p: &mut Vec<(u64, PacketSummary)>, s: PacketSummary| {
        ts += MS;
        p.push((ts, s));
    };
    for _ in 0..300 {
        at(&mut p, seg(true, SYN, 100, 0, 0, 1));
    }
    at(&mut p, seg(false, SYNACK, 5000, 101, 0, 1));
    at(&mut p, seg(true, ACK, 101, 5001, 0, 2));
    for _ in 0..2 {
        let mut sacked = seg(false, ACK, 5001, 101, 0, 2);
        if let Some(Transport::Tcp(t)) = &mut sacked.transport {
            t.options.sack_count = 3;
        }
        at(&mut p, sacked);
    }
    for _ in 0..260 {
        at(&mut p, seg(true, FINACK, 101, 5001, 0, 3));
    }
    at(&mut p, seg(false, TcpFlags::RST, 5001, 0, 0, 3));
    let r = run(&p);
    let r = only_tcp(&r);
    assert_eq!((r.client.syn_cnt, r.client.fin_cnt, r.client.rst_cnt), (300, 260, 0));
    assert_eq!((r.server.syn_cnt, r.server.fin_cnt, r.server.rst_cnt), (1, 0, 1));
    assert_eq!((r.client.sack_blocks, r.server.sack_blocks), (0, 6));
}

/// Records ended and interim, in order.
#[derive(Default)]
struct Both {
    ended: Vec<FlowRecord>,
    interim: Vec<FlowRecord>,
}

impl FlowSink for Both {
    fn flow(&mut self, record: &FlowRecord) {
        self.ended.push(record.clone());
    }
    fn rtt_sample(&mut self, _: &RttSample) {}
    fn interim(&mut self, record: &FlowRecord) {
        self.interim.push(record.clone());
    }
}

#[test]
fn active_timeout_sends_interim_records_of_long_flows() {
    let cfg = FlowConfig { active_timeout_ns: Some(100 * MS), ..FlowConfig::default() };
    let mut t = FlowTracker::new(cfg);
    let mut out = Both::default();
    // Flow 1 sends every 30 ms for 350 ms; flow 2 sends once at 10 ms, then stays quiet.
    t.on_packet(0, &udp(1), &mut out);
    t.on_packet(10 * MS, &udp(2), &mut out);
    for i in 1..=11 {
        t.on_packet(i * 30 * MS, &udp(1), &mut out);
    }
    // Due at 100, 200, 300 ms: flow 1 each time with its counts so far; flow 2 once (at 110 ms:
    // active since its start), never again (no packet since). The packet at 300 ms comes after
    // the record due then.
    let seen: Vec<(u16, u64)> = out
        .interim
        .iter()
        .map(|r| match r {
            FlowRecord::Udp(u) => (r.endpoints().client_port, u.client.pkts),
            _ => panic!("not UDP"),
        })
        .collect();
    assert_eq!(seen, [(1, 4), (2, 1), (1, 7), (1, 10)]);
    assert!(out.interim.iter().all(|r| r.end() == EndReason::Open));
    assert!(out.ended.is_empty());
    t.finish(&mut out);
    assert_eq!(out.ended.len(), 2);
    assert_eq!(out.interim.len(), 4);

    // A closed TCP flow lingering for its last ACKs gives no interim record; an open one does.
    let cfg = FlowConfig { active_timeout_ns: Some(40 * MS), ..FlowConfig::default() };
    let mut t = FlowTracker::new(cfg);
    let mut out = Both::default();
    for (ts, p) in clean_exchange() {
        t.on_packet(ts, &p, &mut out);
    }
    assert_eq!(out.interim.len(), 1, "due at 1040 ms, open: {:?}", out.interim);
    assert_eq!(out.interim[0].end(), EndReason::Open);
    t.on_packet(1200 * MS, &udp(9), &mut out);
    assert_eq!(out.interim.len(), 1, "closed at 1071 ms, lingering");
}

#[test]
fn interim_schedule_stays_bounded_by_the_live_flows() {
    let cfg = FlowConfig { max_flows: 100, active_timeout_ns: Some(1_000_000 * MS), ..FlowConfig::default() };
    let mut t = FlowTracker::new(cfg);
    let mut out = Both::default();
    for i in 0..60_000u64 {
        t.on_packet(i * MS, &udp((i % 60_000) as u16), &mut out); // every flow evicted soon
    }
    let entries = t.interim.as_ref().map(|i| i.due.len()).unwrap();
    assert!(entries <= 2 * 100 + 1024 + 1, "{entries}");
    assert_eq!(out.ended.len(), 60_000 - 100);
}

#[test]
fn flows_are_counted_as_opened_when_they_start_by_direction() {
    let mut t = FlowTracker::new(FlowConfig::default());
    let mut out = Vec::new();
    // No internal networks: every flow is external.
    t.on_packet(0, &udp(1), &mut out);
    assert_eq!(t.opened(), [[0; 4], [0, 0, 0, 1]]);
    // The client 10.0.0.1 internal: outbound. A TCP flow first seen at its SYN/ACK keeps the
    // client's role (the SYN/ACK's receiver), so it is outbound too.
    t.set_internal_nets(vec!["10.0.0.1/32".parse().unwrap()]);
    let exchange = clean_exchange();
    t.on_packet(MS, &exchange[1].1, &mut out);
    t.on_packet(2 * MS, &udp(2), &mut out);
    t.on_packet(2 * MS, &udp(2), &mut out);
    assert_eq!(t.opened(), [[0, 1, 0, 0], [0, 1, 0, 1]]);
    // Counted once, before anything ended.
    assert!(out.is_empty());
    t.finish(&mut out);
    assert_eq!((out.len(), t.opened()), (3, [[0, 1, 0, 0], [0, 1, 0, 1]]));
}

/// The open flow's layout (issue 33: memory per flow); `tests/memory.rs` measures the whole.
#[test]
fn tcp_state_keeps_its_size() {
    use std::mem::size_of;
    assert_eq!(size_of::<seq::SeenRanges>(), 24);
    assert_eq!(size_of::<seq::SeqUnwrapper>(), 12);
    assert_eq!(size_of::<sent::SentList>(), 10);
    assert_eq!(size_of::<counters::DirCounters>(), 112);
    assert_eq!(size_of::<tcp::Half>(), 232);
    assert_eq!(size_of::<tcp::TcpConn>(), 488);
}

/// The records' end, Zeek state and history of `packets`, with `FlowConfig::history` on and
/// `zeek_lifetimes` as given.
fn zeek_flows(packets: &[(u64, PacketSummary)], zeek_lifetimes: bool) -> Vec<(&'static str, &'static str, String)> {
    let cfg = FlowConfig { history: true, orient_by_port: true, zeek_lifetimes, ..FlowConfig::default() };
    run_with(cfg, packets)
        .iter()
        .map(|r| match r {
            FlowRecord::Tcp(r) => {
                let z = r.zeek.expect("followed");
                (r.end.name(), z.state.name(), z.history.as_str().to_string())
            }
            FlowRecord::Udp(_) => panic!("TCP only"),
        })
        .collect()
}

/// `zeek_flows` without the end, with sonde's lifetimes.
fn zeek_of(packets: &[(u64, PacketSummary)]) -> Vec<(&'static str, String)> {
    zeek_flows(packets, false).into_iter().map(|(_, state, history)| (state, history)).collect()
}

#[test]
fn zeek_states_and_histories_of_whole_connections() {
    // The server's first data comes before any pure ACK of its own: no `a`.
    assert_eq!(zeek_of(&clean_exchange()), [("SF", "ShADdFf".to_string())]);
    // A SYN refused.
    let rej = [(0, seg(true, SYN, 100, 0, 0, 1)), (MS, seg(false, TcpFlags::RST | ACK, 0, 101, 0, 2))];
    assert_eq!(zeek_of(&rej), [("REJ", "Sr".to_string())]);
    // A SYN unanswered, sent again with the same ISN: one letter.
    let s0 = [(0, seg(true, SYN, 100, 0, 0, 1)), (3000 * MS, seg(true, SYN, 100, 0, 0, 2))];
    assert_eq!(zeek_of(&s0), [("S0", "S".to_string())]);
    // Data sent twice: the retransmission's letter; RST from the client after establishment.
    let rsto = [
        (0, seg(true, SYN, 100, 0, 0, 1)),
        (MS, seg(false, SYNACK, 500, 101, 0, 2)),
        (2 * MS, seg(true, ACK, 101, 501, 0, 3)),
        (3 * MS, seg(true, ACK, 101, 501, 10, 4)),
        (300 * MS, seg(true, ACK, 101, 501, 10, 5)),
        (400 * MS, seg(true, TcpFlags::RST, 111, 0, 0, 6)),
    ];
    assert_eq!(zeek_of(&rsto), [("RSTO", "ShADTR".to_string())]);
}

#[test]
fn zeek_flips_a_flow_first_seen_from_its_server() {
    // Mid-stream, the server's data first: its port says server, so it is on `s_`, and the
    // history starts with `^`.
    let mid = [(0, seg(false, ACK, 500, 101, 10, 1)), (MS, seg(true, ACK, 101, 510, 0, 2))];
    assert_eq!(zeek_of(&mid), [("OTH", "^dA".to_string())]);
    // A SYN/ACK from port 80 answered by its ACK: flipped from the start, then established.
    let synack = [(0, seg(false, SYNACK, 500, 101, 0, 1)), (MS, seg(true, ACK, 101, 501, 0, 2))];
    assert_eq!(zeek_of(&synack), [("S1", "^hA".to_string())]);
    // …answered by a RST.
    let backscatter = [(0, seg(false, SYNACK, 500, 101, 0, 1)), (MS, seg(true, TcpFlags::RST, 101, 0, 0, 2))];
    assert_eq!(zeek_of(&backscatter), [("RSTO", "^hR".to_string())]);
    // From a port that says nothing, Zeek keeps the SYN/ACK's sender as originator ("Hr"):
    // seen from sonde's client (the other end) that is `^hR`, its states mirrored too.
    let odd = |mut p: PacketSummary| {
        if let Some(Transport::Tcp(t)) = &mut p.transport {
            for port in [&mut t.src_port, &mut t.dst_port] {
                *port = if *port == 80 { 4321 } else { *port };
            }
        }
        p
    };
    let backscatter = [(0, odd(seg(false, SYNACK, 500, 101, 0, 1))), (MS, odd(seg(true, TcpFlags::RST, 101, 0, 0, 2)))];
    assert_eq!(zeek_of(&backscatter), [("RSTO", "^hR".to_string())]);
}

#[test]
fn zeek_lifetimes_end_flows_where_zeeks_timers_end_connections() {
    let run = |packets: &[(u64, PacketSummary)]| zeek_flows(packets, true);
    // The server never answers: 5 s after the SYN the connection is an attempt (S0); the
    // client's later data is another.
    let half = [
        (0, seg(true, SYN, 100, 0, 0, 1)),
        (100 * MS, seg(true, ACK, 101, 501, 0, 2)),
        (200 * MS, seg(true, ACK, 101, 501, 10, 3)),
        (6000 * MS, seg(true, ACK, 111, 501, 10, 4)),
    ];
    assert_eq!(
        run(&half),
        [("expired", "S0", "SAD".to_string()), ("eof", "OTH", "D".to_string())],
        "the attempt timer"
    );
    // Before the 5 s, the same flow.
    let mut soon = half;
    soon[3].0 = 4000 * MS;
    assert_eq!(run(&soon), [("eof", "S0", "SAD".to_string())]);
    // A RST completes the close: a packet 5 s later starts over (the server's ACK, its port
    // saying server: `^a`).
    let reset = [
        (0, seg(true, SYN, 100, 0, 0, 1)),
        (MS, seg(false, SYNACK, 500, 101, 0, 2)),
        (2 * MS, seg(true, ACK, 101, 501, 0, 3)),
        (1000 * MS, seg(true, TcpFlags::RST, 101, 0, 0, 4)),
        (7000 * MS, seg(false, ACK, 501, 101, 0, 5)),
    ];
    assert_eq!(run(&reset), [("rst", "RSTO", "ShAR".to_string()), ("eof", "OTH", "^a".to_string())]);
    // Without Zeek's lifetimes the late ACK joins the reset flow (sonde's 60 s linger).
    assert_eq!(zeek_of(&reset), [("RSTO", "ShARa".to_string())]);
}

/// The TCP records of `packets` with Tstat's rules followed (`FlowConfig::tstat`).
fn tstat_flows(packets: &[(u64, PacketSummary)]) -> Vec<TcpRecord> {
    let cfg = FlowConfig { tstat: true, ..FlowConfig::default() };
    let mut records: Vec<TcpRecord> = run_with(cfg, packets)
        .into_iter()
        .map(|r| match r {
            FlowRecord::Tcp(r) => r,
            FlowRecord::Udp(_) => panic!("TCP only"),
        })
        .collect();
    records.sort_by_key(|r| r.first_ns);
    records
}

fn tstat_of(r: &TcpRecord) -> &tstat::TstatTcp {
    r.tstat.as_deref().expect("followed")
}

/// `p` with its TCP options (and window) changed.
fn with_tcp(mut p: PacketSummary, f: impl FnOnce(&mut TcpSummary)) -> PacketSummary {
    if let Some(Transport::Tcp(t)) = p.transport.as_mut() {
        f(t);
    }
    p
}

#[test]
fn tstat_times_syn_data_and_fin_and_ends_at_the_last_ack() {
    let mut packets = clean_exchange();
    // A RST after the close: Tstat has no flow for it any more.
    packets.push((1100 * MS, seg(true, TcpFlags::RST, 302, 0, 0, 7)));
    let records = tstat_flows(&packets);
    assert_eq!(records.len(), 2);
    let (r, late) = (&records[0], &records[1]);
    let t = tstat_of(r);
    assert!(t.opened && t.complete(false));
    assert_eq!(t.end, Some(tstat::TstatEnd::Complete));
    assert_eq!(r.end, EndReason::Fin);
    assert_eq!((t.dirs[0].packets, t.dirs[1].packets, t.dirs[0].reset_count), (6, 4, 0));
    assert_eq!(t.last_ns, 1071 * MS);
    // Client: SYN → SYN/ACK 20 ms, data → ACK 20 ms, FIN → FIN/ACK 20 ms.
    let c = &t.dirs[0];
    assert_eq!((c.rtt_count, c.rtt_min, c.rtt_max), (3, 20_000, 20_000));
    // Server: SYN/ACK → ACK 1 ms; two segments acknowledged together, the later one timed
    // (1 ms); FIN → ACK 1 ms.
    let s = &t.dirs[1];
    assert_eq!((s.rtt_count, s.rtt_sum), (3, 3_000.0));
    assert_eq!((c.unique_bytes, s.unique_bytes, s.data_pkts), (200, 2000, 2));
    // Both offered scaling (7): windows scaled after the SYN/ACK (the SYNs' own are read before
    // their option: unscaled).
    assert_eq!((c.window_scale, c.win_max, c.win_min, s.win_max, s.win_min), (7, 128_000, 1000, 128_000, 1000));
    // The late RST: a flow Tstat never opened.
    assert!(!tstat_of(late).opened);
}

#[test]
fn tstat_ends_at_the_first_rst_and_drops_what_follows() {
    let packets = [
        (0, seg(true, SYN, 100, 0, 0, 1)),
        (MS, seg(false, SYNACK, 500, 101, 0, 1)),
        (2 * MS, seg(true, ACK, 101, 501, 10, 2)),
        (3 * MS, with_tcp(seg(true, TcpFlags::RST | ACK, 111, 501, 0, 3), |t| t.window = 5000)),
        (4 * MS, seg(false, ACK, 501, 111, 20, 2)),
        (5 * MS, seg(true, TcpFlags::RST, 111, 0, 0, 4)),
    ];
    let records = tstat_flows(&packets);
    assert_eq!(records.len(), 2);
    let t = tstat_of(&records[0]);
    assert_eq!(t.end, Some(tstat::TstatEnd::Reset));
    assert!(t.complete(false), "both SYNs seen");
    assert_eq!((t.dirs[0].packets, t.dirs[0].reset_count, t.dirs[0].ack_pkts), (3, 1, 2));
    assert_eq!((t.dirs[1].packets, t.dirs[1].data_bytes), (1, 0));
    // The RST's window (5000 << 7) is not read.
    assert_eq!(t.dirs[0].win_max, 128_000);
    assert!(!tstat_of(&records[1]).opened);
}

#[test]
fn tstat_closes_a_half_duplex_flow_at_the_clients_data() {
    let packets = [
        (0, seg(true, SYN, 100, 0, 0, 1)),
        (MS, seg(true, TcpFlags::FIN | ACK, 101, 501, 10, 2)),
        (2 * MS, seg(true, ACK, 112, 501, 0, 3)),
    ];
    let records = tstat_flows(&packets);
    assert_eq!(records.len(), 2);
    let t = tstat_of(&records[0]);
    assert_eq!(t.end, Some(tstat::TstatEnd::HalfDuplex));
    assert!(!t.complete(false));
    // The data packet's FIN is counted before the close, not its bytes; its time is the flow's.
    assert_eq!((t.dirs[0].packets, t.dirs[0].fin_count, t.dirs[0].data_bytes), (1, 1, 0));
    assert_eq!(t.last_ns, MS);
    assert!(!tstat_of(&records[1]).opened);
}

#[test]
fn tstat_scale_mss_and_sack_as_tstat_keeps_them() {
    let packets = [
        (0, with_tcp(seg(true, SYN, 100, 0, 0, 1), |t| t.options.mss = Some(65495))),
        // The server offers no scaling: neither side scales.
        (MS, with_tcp(seg(false, SYNACK, 500, 101, 0, 1), |t| t.options.window_scale = None)),
        (2 * MS, seg(true, ACK, 101, 501, 0, 2)),
        (3 * MS, with_tcp(seg(true, ACK, 101, 501, 0, 3), |t| t.options.sack_count = 3)),
    ];
    let records = tstat_flows(&packets);
    let t = tstat_of(&records[0]);
    assert_eq!((t.dirs[0].window_scale, t.dirs[1].window_scale), (0, 0));
    assert!(t.dirs[0].f1323_ws && !t.dirs[1].f1323_ws);
    assert_eq!((t.dirs[0].mss, t.dirs[0].sacks_sent, t.dirs[0].win_max), (-41, 1, 1000));
    assert!(!t.complete(true), "still open at the end of the input");
}

#[test]
fn tstat_classifies_retransmissions_and_survives_wrapping_sequence_numbers() {
    // The client's data wraps past 2^32 (its first segment ends at 2^32 - 1, its second starts
    // at 0), and the second is sent again after 1 s.
    let isn = u32::MAX - 100;
    let d = isn.wrapping_add(1);
    let packets = [
        (0, seg(true, SYN, isn, 0, 0, 1)),
        (10 * MS, seg(false, SYNACK, 500, d, 0, 1)),
        (20 * MS, seg(true, ACK, d, 501, 0, 2)),
        (21 * MS, seg(true, ACK, d, 501, 100, 3)),
        (22 * MS, seg(true, ACK, d.wrapping_add(100), 501, 100, 4)),
        (32 * MS, seg(false, ACK, 501, d.wrapping_add(100), 0, 2)),
        (1100 * MS, seg(true, ACK, d.wrapping_add(100), 501, 100, 5)),
        (1110 * MS, seg(false, ACK, 501, d.wrapping_add(200), 0, 3)),
    ];
    let records = tstat_flows(&packets);
    let c = &tstat_of(&records[0]).dirs[0];
    assert_eq!((c.rexmit_pkts, c.rexmit_bytes, c.unique_bytes), (1, 100, 200));
    assert_eq!(c.rtx_rto, 1, "sent again after more than the RTO");
    // The SYN's sample (10 ms) only: the first segment's ACK number (0) is in the next quarter
    // of the sequence space, whose pass over the quarter before marks segments acknowledged
    // without timing them (tcptrace's `ack_in`); the one sent twice gives none (Karn).
    assert_eq!((c.rtt_count, c.rtt_min), (1, 10_000));
}

#[test]
fn tstat_collects_idle_flows_only_when_a_flow_opens() {
    let s = 1_000 * MS;
    let mut packets = vec![
        (0, seg(true, SYN, 100, 0, 0, 1)),
        (MS, seg(false, SYNACK, 500, 101, 0, 1)),
        (2 * MS, seg(true, ACK, 101, 501, 10, 2)),
        // 400 s later, no SYN in between: Tstat still has the flow.
        (400 * s, seg(true, ACK, 111, 501, 10, 3)),
    ];
    let records = tstat_flows(&packets);
    assert_eq!(records.len(), 1);
    assert_eq!(tstat_of(&records[0]).dirs[0].data_bytes, 20);
    // Another flow opening 400 s after the last packet collects it first.
    let other = with_tcp(seg(true, SYN, 900, 0, 0, 4), |t| t.src_port = 40001);
    packets.push((800 * s, other));
    packets.push((801 * s, seg(true, ACK, 121, 501, 10, 5)));
    let records = tstat_flows(&packets);
    assert_eq!(records.len(), 3);
    assert_eq!((records[0].end, tstat_of(&records[0]).dirs[0].data_bytes), (EndReason::Idle, 20));
    assert!(tstat_of(&records[0]).complete(false));
    // The late packet of the collected flow: not Tstat's.
    assert!(tstat_of(&records[1]).opened && !tstat_of(&records[2]).opened);
}

#[test]
fn flow_features_follow_the_first_sender_and_stay_off_unless_asked() {
    assert!(only_tcp(&run(&clean_exchange())).features.is_none());
    let cfg = FlowConfig { features: Some(crate::features::FeaturesConfig { splt: 4 }), ..FlowConfig::default() };
    let records = run_with(cfg.clone(), &clean_exchange());
    let f = only_tcp(&records).features.as_deref().expect("features asked for");
    assert!(f.src_is_client);
    assert_eq!((f.ps[0].n, f.ps[1].n, f.ps[2].n), (10, 6, 4));
    // on_packet gives the IP length as the size: 40 + payload.
    assert_eq!((f.ps[0].min, f.ps[0].max, f.ps[1].max), (40, 1040, 240));
    assert_eq!((f.piat[0].min, f.piat[0].max), (1, 20));
    assert_eq!((f.flags[0][0], f.flags[1][0], f.flags[2][0]), (2, 1, 1)); // SYN
    assert_eq!((f.flags[0][7], f.flags[0][4]), (2, 9)); // FIN, ACK
    assert_eq!(f.splt_list(|p| i64::from(p.direction)), [0, 1, 0, 0]);
    assert_eq!(f.splt_list(|p| p.piat_ms as i64), [0, 20, 1, 1]);
    // A flow first seen from its server (mid-stream, server port first): src is the server.
    let late: Vec<_> = clean_exchange().into_iter().skip(4).collect();
    let cfg = FlowConfig { orient_by_port: true, ..cfg };
    let records = run_with(cfg, &late);
    let f = only_tcp(&records).features.as_deref().unwrap();
    assert!(!f.src_is_client);
    assert_eq!((f.ps[1].n, f.ps[2].n), (3, 3));
    // UDP: no flags, the SPLT padded.
    let cfg = FlowConfig { features: Some(crate::features::FeaturesConfig { splt: 3 }), ..FlowConfig::default() };
    let records = run_with(cfg, &[(1000 * MS, udp(5353))]);
    let FlowRecord::Udp(u) = &records[0] else { panic!("not UDP") };
    let f = u.features.as_deref().unwrap();
    assert_eq!((f.ps[0].n, f.flags[0], f.ps[0].stddev()), (1, [0; 8], 0.0));
    assert_eq!(f.splt_list(|p| i64::from(p.size)), [38, -1, -1]);
}
