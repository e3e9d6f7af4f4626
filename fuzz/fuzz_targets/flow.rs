//! The flow layer (sonde-flow): the flow table and the TCP/UDP analyzers, with the application
//! readers on, fed a sequence of packets built from the input.
//!
//! Input: 4 bytes of settings (table size 1–8, timeouts, active timeout), then 10 bytes per
//! packet (endpoints among a few hosts and ports so that flows meet, TCP flags, sequence and
//! acknowledgment steps, window, options, payload length, a time step that may go back), the
//! payload taken from the input after it. Each packet is a real IPv4/IPv6 frame decoded by
//! sonde-wire. Asserts after every packet: live flows ≤ the table size; flows ended + live =
//! flows opened; at the end (after `finish`): no flow left, and the ended flows' packets and IP
//! bytes add up to the packets and bytes counted in flows; each record's times in order, its
//! per-direction counts consistent; RTT samples sent = RTT samples in the records; evictions
//! counted ≤ flows ended as evicted.

use std::net::IpAddr;

use sonde_flow::{
    AppInput, Disposition, EndReason, FlowConfig, FlowRecord, FlowSink, FlowTracker, RttSample, TcpDirStats,
};
use sonde_wire::{decode, LinkType, Transport};

#[derive(Default)]
struct Sink {
    ended: Vec<FlowRecord>,
    interim: usize,
    samples: u64,
}

impl FlowSink for Sink {
    fn flow(&mut self, record: &FlowRecord) {
        if let FlowRecord::Tcp(r) = record {
            // Zeek's history: its letters only (`^` where a flip happened: first, or after a
            // SYN/SYN-ACK reversal's letters).
            if let Some(z) = r.zeek {
                let h = z.history.as_str();
                assert!(h.bytes().all(|b| b"^SsHhAaDdFfRrTtWwIiQq".contains(&b)), "history {h:?}");
                assert!(h.matches('^').count() <= 2, "history {h:?}");
            }
        }
        self.ended.push(record.clone());
    }
    fn rtt_sample(&mut self, s: &RttSample) {
        assert!(s.rtt_ns < u64::MAX);
        self.samples += 1;
    }
    fn interim(&mut self, record: &FlowRecord) {
        assert_eq!(record.end(), EndReason::Open, "an interim record of an ended flow");
        self.interim += 1;
    }
}

const MS: u64 = 1_000_000;
const PORTS: [u16; 4] = [80, 443, 53, 5004];

/// One IPv4 or IPv6 packet carrying TCP or UDP, as raw IP bytes.
fn build(b: &[u8; 10], seq: &mut [u32; 2], payload: &[u8]) -> Vec<u8> {
    let v6 = b[0] & 0x80 != 0;
    let tcp = b[0] & 0x40 == 0;
    let (client, server) = (b[0] & 0x03, (b[0] >> 2) & 0x01);
    let reverse = b[0] & 0x08 != 0;
    let (cport, sport) = (40000 + u16::from(b[0] >> 4 & 0x03), PORTS[usize::from(b[9] & 0x03)]);
    let (src, dst, sp, dp) =
        if reverse { (server + 100, client, sport, cport) } else { (client, server + 100, cport, sport) };
    let dir = usize::from(reverse);
    let flags = b[1];
    // Sequence numbers advance by what was sent, or jump (retransmission, reordering, garbage).
    let step = u16::from_be_bytes([b[2], b[3]]);
    seq[dir] = match step >> 14 {
        0 => seq[dir].wrapping_add(u32::from(step & 0x3fff)),
        1 => seq[dir].wrapping_sub(u32::from(step & 0x3fff)),
        _ => u32::from(step).wrapping_mul(0x9e37_79b9),
    };
    let ack = seq[1 - dir].wrapping_add(u32::from(b[4] & 0x7f)).wrapping_sub(u32::from(b[4] >> 7) * 1460);
    let mut l4 = Vec::with_capacity(60 + payload.len());
    if tcp {
        let mut opts = Vec::new();
        let o = b[5];
        if o & 1 != 0 {
            opts.extend_from_slice(&[2, 4, 5, 0xb4]);
        }
        if o & 2 != 0 {
            opts.extend_from_slice(&[1, 3, 3, o >> 4]);
        }
        if o & 4 != 0 {
            opts.extend_from_slice(&[1, 1, 4, 2]);
        }
        if o & 8 != 0 {
            let l = seq[1 - dir].wrapping_sub(3000).to_be_bytes();
            let r = seq[1 - dir].wrapping_sub(1500).to_be_bytes();
            opts.extend_from_slice(&[1, 1, 5, 10]);
            opts.extend_from_slice(&l);
            opts.extend_from_slice(&r);
        }
        if o & 0x80 != 0 && opts.len() <= 28 {
            opts.extend_from_slice(&[1, 1, 8, 10, 0, 0, 0, b[6], 0, 0, 0, b[7]]);
        }
        let hl = 20 + opts.len();
        l4.extend_from_slice(&sp.to_be_bytes());
        l4.extend_from_slice(&dp.to_be_bytes());
        l4.extend_from_slice(&seq[dir].to_be_bytes());
        l4.extend_from_slice(&ack.to_be_bytes());
        l4.push(((hl / 4) as u8) << 4);
        l4.push(flags);
        let win = if o & 0x40 != 0 { 0 } else { u16::from(b[6]) << 8 | 0xff };
        l4.extend_from_slice(&win.to_be_bytes());
        l4.extend_from_slice(&[0, 0, 0, 0]);
        l4.extend_from_slice(&opts);
    } else {
        l4.extend_from_slice(&sp.to_be_bytes());
        l4.extend_from_slice(&dp.to_be_bytes());
        l4.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        l4.extend_from_slice(&[0, 0]);
    }
    l4.extend_from_slice(payload);
    let mut ip = Vec::with_capacity(40 + l4.len());
    if v6 {
        ip.extend_from_slice(&[0x60, 0, 0, 0]);
        ip.extend_from_slice(&(l4.len() as u16).to_be_bytes());
        ip.extend_from_slice(&[if tcp { 6 } else { 17 }, 64]);
        for a in [src, dst] {
            ip.extend_from_slice(&[0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, a]);
        }
    } else {
        ip.extend_from_slice(&[0x45, 0]);
        ip.extend_from_slice(&((20 + l4.len()) as u16).to_be_bytes());
        ip.extend_from_slice(&[0, 1, 0x40, 0, 64 - (b[7] & 0x0f), if tcp { 6 } else { 17 }, 0, 0]);
        ip.extend_from_slice(&[10, 0, 0, src, 10, 0, 0, dst]);
    }
    ip.extend_from_slice(&l4);
    ip
}

fn dir_ok(d: &TcpDirStats) {
    assert!(d.data_pkts <= d.pkts && d.ack_pkts <= d.pkts && d.pure_ack_pkts <= d.ack_pkts, "{d:?}");
    assert!(d.syn_cnt <= d.pkts && d.fin_cnt <= d.pkts && d.rst_cnt <= d.pkts, "{d:?}");
    assert!(d.retx_pkts <= d.pkts, "{d:?}");
    if d.pkts > 0 {
        assert!(d.first_ns <= d.last_ns, "{d:?}");
        assert!(d.ttl_min <= d.ttl_max, "{d:?}");
    }
    if d.rtt.count > 0 {
        assert!(d.rtt.min_ns <= d.rtt.max_ns, "{:?}", d.rtt);
    }
}

fn main() {
    afl::fuzz!(|data: &[u8]| {
        let Some((&[cfg0, cfg1, cfg2, cfg3], mut rest)) = data.split_first_chunk::<4>() else { return };
        let max_flows = 1 + usize::from(cfg0 & 0x07);
        let cfg = FlowConfig {
            tcp_idle_ns: (1 + u64::from(cfg1)) * 100 * MS,
            udp_idle_ns: (1 + u64::from(cfg2)) * 100 * MS,
            tcp_closed_linger_ns: (1 + u64::from(cfg3 & 0x1f)) * 100 * MS,
            max_flows,
            initial_flows: 1,
            internal_nets: vec!["10.0.0.0/30".parse().unwrap()],
            active_timeout_ns: (cfg0 & 0x08 != 0).then_some((1 + u64::from(cfg3 >> 5)) * 500 * MS),
            app_facts: cfg0 & 0x10 == 0,
            // Owners are a pure lookup as a record is made (crates/sonde-owners' tests).
            owners: None,
            owner_cache: 1,
            history: cfg0 & 0x20 != 0,
            orient_by_port: cfg0 & 0x40 != 0,
            zeek_lifetimes: cfg0 & 0x80 != 0,
            // Tstat's rules (its segment lists, wrapping sequence numbers, its flow ends).
            tstat: cfg2 & 0x01 != 0,
            // Tstat's reading of TCP flows (sonde_l7::TstatL7) on half the inputs.
            tstat_l7: cfg1 & 1 != 0,
            features: (cfg1 & 2 != 0).then_some(sonde_flow::features::FeaturesConfig { splt: u16::from(cfg2 & 7) }),
        };
        let mut tracker = FlowTracker::new(cfg);
        let mut sink = Sink::default();
        let (mut ts_ns, mut seq) = (1_700_000_000 * 1_000 * MS, [1000u32, 90_000]);
        let (mut counted_pkts, mut counted_bytes) = (0u64, 0u64);
        while let Some((head, tail)) = rest.split_first_chunk::<10>() {
            let n = usize::from(head[8] & 0x7f).min(tail.len());
            let (payload, tail) = tail.split_at(n);
            rest = tail;
            let step = u64::from(head[7] >> 4);
            ts_ns = match head[9] >> 6 {
                0 => ts_ns + step * MS,
                1 => ts_ns + step * 100 * MS,
                2 => ts_ns + step * 10_000 * MS,
                _ => ts_ns.saturating_sub(step * MS), // time steps back
            };
            let frame = build(head, &mut seq, payload);
            // The capture may cut the payload (snaplen): the application readers get the start.
            let cut = if head[8] & 0x80 != 0 { frame.len() - payload.len() / 2 } else { frame.len() };
            let p = decode(LinkType::RAW, &frame[..cut], frame.len() as u32).unwrap();
            let app_payload = &payload[..payload.len() - (frame.len() - cut)];
            let d = tracker.on_packet_app(ts_ns, &p, AppInput { payload: app_payload, resolved: None }, &mut sink);
            if d == Disposition::Flow {
                counted_pkts += 1;
                counted_bytes += u64::from(p.ip.unwrap().total_len);
                assert!(matches!(p.transport, Some(Transport::Tcp(_) | Transport::Udp(_))));
            }
            let stats = tracker.table_stats();
            assert!(tracker.live_flows() <= max_flows, "{} flows in a table of {max_flows}", tracker.live_flows());
            assert_eq!(
                sink.ended.len() + tracker.live_flows(),
                stats.inserted as usize,
                "flows ended + live != flows opened"
            );
        }
        tracker.finish(&mut sink);
        let stats = tracker.table_stats();
        assert_eq!(tracker.live_flows(), 0, "flows left after finish");
        assert_eq!(sink.ended.len() as u64, stats.inserted, "flows lost");
        assert!(stats.peak_live <= max_flows as u64);
        let evicted = sink.ended.iter().filter(|r| r.end() == EndReason::Evicted).count() as u64;
        assert!(stats.evicted <= evicted, "{} evictions counted, {evicted} flows ended so", stats.evicted);
        let (mut pkts, mut bytes, mut rtt) = (0u64, 0u64, 0u64);
        for r in &sink.ended {
            match r {
                FlowRecord::Tcp(t) => {
                    assert!(t.first_ns <= t.last_ns, "{t:?}");
                    dir_ok(&t.client);
                    dir_ok(&t.server);
                    if let Some(ts) = t.tstat.as_deref() {
                        for (d, sonde) in ts.dirs.iter().zip([&t.client, &t.server]) {
                            assert!(d.packets <= sonde.pkts && d.data_pkts <= d.packets, "{ts:?}");
                            assert!(d.rtt_count == 0 || d.rtt_min <= d.rtt_max, "{ts:?}");
                        }
                    }
                    assert!(t.client.pkts + t.server.pkts > 0, "a flow without packets: {t:?}");
                    pkts += t.client.pkts + t.server.pkts;
                    bytes += t.client.ip_bytes + t.server.ip_bytes;
                    rtt += t.client.rtt.count + t.server.rtt.count;
                }
                FlowRecord::Udp(u) => {
                    assert!(u.first_ns <= u.last_ns, "{u:?}");
                    assert!(u.client.pkts + u.server.pkts > 0, "a flow without packets: {u:?}");
                    pkts += u.client.pkts + u.server.pkts;
                    bytes += u.client.ip_bytes + u.server.ip_bytes;
                }
            }
            let e = r.endpoints();
            assert!(matches!(e.client_ip, IpAddr::V4(_) | IpAddr::V6(_)));
        }
        assert_eq!(pkts, counted_pkts, "packets in records != packets counted in flows");
        assert_eq!(bytes, counted_bytes, "IP bytes in records != bytes counted in flows");
        assert_eq!(rtt, sink.samples, "RTT samples in records != samples sent");
    });
}
