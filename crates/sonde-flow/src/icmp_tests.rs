//! Scenario tests of the ICMP side of the tracker: echo sessions and their RTT, other
//! messages, and errors counted on the TCP or UDP flow they quote.

use std::net::IpAddr;

use sonde_wire::{Fragment, IpSummary, PacketSummary, Transport, UdpSummary};

use crate::*;

const C: &str = "10.0.0.1";
const S: &str = "10.0.0.2";
const R: &str = "192.0.2.9";
const MS: u64 = 1_000_000;

#[derive(Default)]
struct Kept {
    flows: Vec<FlowRecord>,
    icmp: Vec<IcmpRecord>,
}

impl FlowSink for Kept {
    fn flow(&mut self, record: &FlowRecord) {
        self.flows.push(record.clone());
    }
    fn rtt_sample(&mut self, _: &RttSample) {}
    fn interim(&mut self, _: &FlowRecord) {}
    fn icmp(&mut self, record: &IcmpRecord) {
        self.icmp.push(record.clone());
    }
}

fn addr(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn icmp_packet(src: &str, dst: &str, total_len: u32, icmp_type: u8, code: u8) -> PacketSummary {
    let v6 = addr(src).is_ipv6();
    PacketSummary {
        ip: Some(IpSummary {
            src: addr(src),
            dst: addr(dst),
            total_len,
            ttl: 64,
            ident: 0,
            protocol: if v6 { 58 } else { 1 },
            fragment: Fragment::No,
        }),
        transport: Some(Transport::Icmp { icmp_type, code }),
        ..PacketSummary::EMPTY
    }
}

fn echo(t: &mut FlowTracker, sink: &mut Kept, ts_ns: u64, request: bool, ident: u16, seq: u16) {
    let (src, dst, ty) = if request { (C, S, 8) } else { (S, C, 0) };
    let p = icmp_packet(src, dst, 84, ty, 0);
    t.on_icmp(ts_ns, ts_ns, &p, IcmpInput::Echo { request, ident, seq }, sink);
}

fn udp(src: &str, dst: &str, sport: u16, dport: u16) -> PacketSummary {
    PacketSummary {
        ip: Some(IpSummary {
            src: addr(src),
            dst: addr(dst),
            total_len: 128,
            ttl: 64,
            ident: 0,
            protocol: 17,
            fragment: Fragment::No,
        }),
        transport: Some(Transport::Udp(UdpSummary { src_port: sport, dst_port: dport, payload_len: 100 })),
        ..PacketSummary::EMPTY
    }
}

#[test]
fn echo_replies_are_matched_by_sequence_number() {
    let mut t = FlowTracker::new(FlowConfig::default());
    let mut sink = Kept::default();
    echo(&mut t, &mut sink, 1000 * MS, true, 7, 1);
    echo(&mut t, &mut sink, 1010 * MS, false, 7, 1);
    echo(&mut t, &mut sink, 2000 * MS, true, 7, 2);
    echo(&mut t, &mut sink, 3000 * MS, true, 7, 3);
    // Replies out of order: each to its own request.
    echo(&mut t, &mut sink, 3005 * MS, false, 7, 3);
    echo(&mut t, &mut sink, 3030 * MS, false, 7, 2);
    // Another identifier is another session.
    echo(&mut t, &mut sink, 3100 * MS, true, 8, 1);
    t.finish(&mut sink);
    assert_eq!(sink.icmp.len(), 2);
    let r = &sink.icmp[0];
    assert_eq!(r.key, IcmpKey { client: addr(C), server: addr(S), kind: IcmpKind::Echo { ident: 7 } });
    assert_eq!((r.client.pkts, r.server.pkts, r.client.ip_bytes, r.server.ip_bytes), (3, 3, 252, 252));
    assert_eq!((r.rtt.count, r.rtt.min_ns, r.rtt.max_ns), (3, 5 * MS, 1030 * MS));
    assert_eq!(r.rtt.mean_ns(), (10 + 5 + 1030) as f64 * MS as f64 / 3.0);
    assert_eq!((r.first_ns, r.last_ns, r.end, r.replies_unmatched), (1000 * MS, 3030 * MS, EndReason::Eof, 0));
    let r = &sink.icmp[1];
    assert_eq!((r.key.kind, r.client.pkts, r.server.pkts, r.rtt.count), (IcmpKind::Echo { ident: 8 }, 1, 0, 0));
}

#[test]
fn sequence_numbers_wrap_and_duplicates_give_one_sample() {
    let mut t = FlowTracker::new(FlowConfig::default());
    let mut sink = Kept::default();
    echo(&mut t, &mut sink, 0, true, 1, 65535);
    echo(&mut t, &mut sink, 2 * MS, false, 1, 65535);
    echo(&mut t, &mut sink, 1000 * MS, true, 1, 0);
    echo(&mut t, &mut sink, 1003 * MS, false, 1, 0);
    // A duplicated reply: counted, no second sample.
    echo(&mut t, &mut sink, 1004 * MS, false, 1, 0);
    // A request sent again before its reply: the reply answers the latest (as Wireshark).
    echo(&mut t, &mut sink, 2000 * MS, true, 1, 1);
    echo(&mut t, &mut sink, 3000 * MS, true, 1, 1);
    echo(&mut t, &mut sink, 3001 * MS, false, 1, 1);
    t.finish(&mut sink);
    let r = &sink.icmp[0];
    assert_eq!((r.client.pkts, r.server.pkts), (4, 4));
    assert_eq!((r.rtt.count, r.rtt.min_ns, r.rtt.max_ns, r.replies_unmatched), (3, MS, 3 * MS, 1));
}

#[test]
fn requests_never_answered_are_bounded() {
    let mut t = FlowTracker::new(FlowConfig::default());
    let mut sink = Kept::default();
    for seq in 0..1000u16 {
        echo(&mut t, &mut sink, u64::from(seq) * MS, true, 1, seq);
    }
    // The oldest requests were forgotten: their late replies match nothing.
    echo(&mut t, &mut sink, 2000 * MS, false, 1, 0);
    echo(&mut t, &mut sink, 2000 * MS, false, 1, 999);
    t.finish(&mut sink);
    let r = &sink.icmp[0];
    assert_eq!((r.rtt.count, r.rtt.min_ns, r.replies_unmatched), (1, 1001 * MS, 1));
}

#[test]
fn other_messages_are_keyed_by_source_destination_type_and_code() {
    let cfg = FlowConfig { udp_idle_ns: 100 * MS, ..FlowConfig::default() };
    let mut t = FlowTracker::new(cfg);
    let mut sink = Kept::default();
    let unreachable = |ts: u64, code: u8, t: &mut FlowTracker, sink: &mut Kept| {
        let p = icmp_packet(R, C, 56, 3, code);
        t.on_icmp(ts, ts, &p, IcmpInput::Message { icmp_type: 3, code }, sink);
    };
    unreachable(0, 3, &mut t, &mut sink);
    unreachable(10 * MS, 3, &mut t, &mut sink);
    unreachable(20 * MS, 1, &mut t, &mut sink);
    // Idle past the timeout: both end, and the next message starts a new entry.
    unreachable(500 * MS, 3, &mut t, &mut sink);
    assert_eq!(sink.icmp.len(), 2);
    assert!(sink.icmp.iter().all(|r| r.end == EndReason::Idle));
    assert_eq!(sink.icmp[0].key.kind, IcmpKind::Message { icmp_type: 3, code: 3 });
    assert_eq!((sink.icmp[0].client.pkts, sink.icmp[0].client.ip_bytes, sink.icmp[0].server.pkts), (2, 112, 0));
    assert_eq!(sink.icmp[0].key.client, addr(R));
    t.finish_at(550 * MS, &mut sink);
    assert_eq!((sink.icmp.len(), sink.icmp[2].end, sink.icmp[2].first_ns), (3, EndReason::Eof, 500 * MS));
}

#[test]
fn the_table_is_bounded_and_evicts_the_longest_idle() {
    let cfg = FlowConfig { max_flows: 2, ..FlowConfig::default() };
    let mut t = FlowTracker::new(cfg);
    let mut sink = Kept::default();
    for ident in 1..=3 {
        echo(&mut t, &mut sink, u64::from(ident) * MS, true, ident, 1);
    }
    assert_eq!(t.live_icmp(), 2);
    assert_eq!(t.icmp_stats().evicted, 1);
    assert_eq!((sink.icmp[0].key.kind, sink.icmp[0].end), (IcmpKind::Echo { ident: 1 }, EndReason::Evicted));
}

#[test]
fn an_error_quoting_a_flow_is_counted_on_it() {
    let mut t = FlowTracker::new(FlowConfig::default());
    let mut sink = Kept::default();
    let dns = udp(C, S, 5353, 53);
    t.on_packet(0, &dns, &mut sink);
    // The router's error quotes the client's packet: the key is built from the quote.
    let quoted = PacketKey::new(17, (addr(C), 5353), (addr(S), 53));
    assert!(t.on_icmp_error(MS, MS, &quoted, 11, 0, &mut sink));
    assert!(t.on_icmp_error(2 * MS, 2 * MS, &quoted, 3, 3, &mut sink));
    // One quoting a flow never seen is unmatched.
    let other = PacketKey::new(6, (addr(C), 40000), (addr(S), 80));
    assert!(!t.on_icmp_error(3 * MS, 3 * MS, &other, 3, 1, &mut sink));
    t.finish(&mut sink);
    let FlowRecord::Udp(u) = &sink.flows[0] else { panic!() };
    assert_eq!(u.icmp_errors, IcmpErrors { count: 2, last: Some((3, 3)) });
    // An error is not activity of the flow.
    assert_eq!(u.last_ns, 0);
    let s = t.icmp_stats();
    assert_eq!((s.errors_matched, s.errors_unmatched), (2, 1));
}

#[test]
fn a_flow_ended_leaves_its_errors_behind() {
    let cfg = FlowConfig { udp_idle_ns: 10 * MS, ..FlowConfig::default() };
    let mut t = FlowTracker::new(cfg);
    let mut sink = Kept::default();
    t.on_packet(0, &udp(C, S, 5353, 53), &mut sink);
    let quoted = PacketKey::new(17, (addr(S), 53), (addr(C), 5353));
    assert!(t.on_icmp_error(MS, MS, &quoted, 3, 3, &mut sink));
    // The flow idles out; the same tuple starts again, in the same slot, without errors.
    t.on_packet(100 * MS, &udp(C, S, 5353, 53), &mut sink);
    t.finish(&mut sink);
    let errors: Vec<u64> = sink
        .flows
        .iter()
        .map(|f| match f {
            FlowRecord::Udp(u) => u.icmp_errors.count,
            FlowRecord::Tcp(_) => panic!(),
        })
        .collect();
    assert_eq!(errors, [1, 0]);
}

#[test]
fn icmpv6_echo_sessions_too() {
    let mut t = FlowTracker::new(FlowConfig::default());
    let mut sink = Kept::default();
    let req = icmp_packet("fd00::1", "fd00::2", 104, 128, 0);
    let rep = icmp_packet("fd00::2", "fd00::1", 104, 129, 0);
    t.on_icmp(0, 0, &req, IcmpInput::Echo { request: true, ident: 3, seq: 9 }, &mut sink);
    t.on_icmp(250_000, 250_000, &rep, IcmpInput::Echo { request: false, ident: 3, seq: 9 }, &mut sink);
    t.finish(&mut sink);
    let r = &sink.icmp[0];
    assert_eq!((r.key.client, r.rtt.count, r.rtt.min_ns), (addr("fd00::1"), 1, 250_000));
}
