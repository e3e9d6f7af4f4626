//! The encoder's messages read back by the decoder, field by field, and the exporting process
//! over a file, UDP and TCP sockets of the test's own.

use std::io::Read;
use std::net::{TcpListener, UdpSocket};
use std::time::{Duration, Instant};

use sonde_flow::{
    EndReason, Endpoints, FlowRecord, FlowSink, IcmpDirStats, IcmpKey, IcmpKind, IcmpRecord, RttStats, TcpDirStats,
    TcpRecord, UdpDirStats, UdpRecord,
};
use sonde_ipfix::decode::{split_stream, DataRecord, Decoder, Message};
use sonde_ipfix::elements::{
    self, TEMPLATE_ICMP4, TEMPLATE_ICMP6, TEMPLATE_TCP4, TEMPLATE_TCP6, TEMPLATE_UDP4, TEMPLATE_UDP6,
};
use sonde_ipfix::encoder::{is_template_message, HEADER_LEN, SET_HEADER_LEN};
use sonde_ipfix::export::UDP_BURST;
use sonde_ipfix::{Encoder, EncoderConfig, ExportOptions, Exporter, FullQueue, Target, REVERSE_PEN, SONDE_PEN};

const T0: u64 = 1_700_000_000_123_456_789;

fn endpoints(c: &str, s: &str, i: u16) -> Endpoints {
    Endpoints {
        client_ip: c.parse().unwrap(),
        client_port: 40_000 + i,
        server_ip: s.parse().unwrap(),
        server_port: 443,
        client_internal: false,
        server_internal: false,
        tunnel: None,
    }
}

fn tcp(i: u16, v6: bool, last_ns: u64) -> FlowRecord {
    let (c, s) = if v6 { ("2001:db8::1", "2001:db8::2") } else { ("10.0.0.1", "192.0.2.7") };
    let mut rtt = RttStats::default();
    for x in [1_000_000, 3_000_000, 2_000_001] {
        rtt.add(x + u64::from(i));
    }
    let client = TcpDirStats {
        pkts: 10 + u64::from(i),
        ip_bytes: 1000 + u64::from(i),
        syn_cnt: 1,
        fin_cnt: 1,
        flags: 0x1b, // ACK, PSH, SYN, FIN
        mss_opt: 1460,
        win_max: 1 << 33, // beyond unsigned32: saturates
        win_min: 29_200,
        retx_pkts: 2,
        retx_bytes: 2896,
        ooo_pkts: 1,
        rtt,
        ..TcpDirStats::default()
    };
    let mut server = TcpDirStats {
        pkts: 7,
        ip_bytes: 90_000,
        syn_cnt: 1,
        rst_cnt: 1,
        flags: 0x16,
        win_max: 65_535,
        ..TcpDirStats::default()
    };
    server.anomalies.rto = 3;
    FlowRecord::Tcp(TcpRecord {
        endpoints: endpoints(c, s, i),
        complete: true,
        end: EndReason::Fin,
        first_ns: T0,
        last_ns,
        hs_syn_synack_ns: Some(12_345_678),
        hs_synack_ack_ns: None,
        zeek: None,
        tstat: None,
        features: None,
        client,
        server,
        icmp_errors: Default::default(),
        app: None,
        owners: None,
    })
}

fn udp(i: u16, v6: bool, last_ns: u64) -> FlowRecord {
    let (c, s) = if v6 { ("2001:db8::3", "2001:db8::4") } else { ("10.0.0.3", "198.51.100.1") };
    FlowRecord::Udp(UdpRecord {
        endpoints: endpoints(c, s, i),
        end: EndReason::Idle,
        first_ns: T0,
        last_ns,
        client: UdpDirStats { pkts: 1, ip_bytes: 60, ..UdpDirStats::default() },
        server: UdpDirStats { pkts: 2, ip_bytes: 300, ..UdpDirStats::default() },
        features: None,
        icmp_errors: Default::default(),
        app: None,
        owners: None,
    })
}

/// An echo session (`ident`) or a message (`kind`'s type and code) between two addresses.
fn icmp(c: &str, s: &str, kind: IcmpKind, last_ns: u64) -> IcmpRecord {
    let echo = matches!(kind, IcmpKind::Echo { .. });
    IcmpRecord {
        key: IcmpKey { client: c.parse().unwrap(), server: s.parse().unwrap(), kind },
        client_internal: false,
        server_internal: false,
        tunnel: None,
        end: if echo { EndReason::Eof } else { EndReason::Evicted },
        first_ns: T0,
        last_ns,
        client: IcmpDirStats { pkts: 5, ip_bytes: 420 },
        server: if echo { IcmpDirStats { pkts: 4, ip_bytes: 336 } } else { IcmpDirStats::default() },
        rtt: RttStats::default(),
        replies_unmatched: 0,
    }
}

fn encode(cfg: EncoderConfig, records: &[FlowRecord]) -> Vec<Vec<u8>> {
    let mut enc = Encoder::new(cfg).unwrap();
    let mut out = Vec::new();
    records.iter().for_each(|r| enc.push(r, &mut out));
    enc.flush(&mut out);
    out
}

fn decode_all(msgs: &[Vec<u8>]) -> Vec<Message> {
    let mut d = Decoder::new();
    msgs.iter().map(|m| d.message(m).unwrap()).collect()
}

fn no_refresh() -> EncoderConfig {
    EncoderConfig { refresh_messages: None, refresh_ns: None, ..EncoderConfig::default() }
}

#[test]
fn header_and_template_set() {
    let msgs = encode(EncoderConfig { domain: 77, ..no_refresh() }, &[tcp(0, false, T0 + 5_000_000_000)]);
    assert_eq!(msgs.len(), 2, "one template message, one data message");
    assert!(is_template_message(&msgs[0]) && !is_template_message(&msgs[1]));
    let decoded = decode_all(&msgs);
    for (m, raw) in decoded.iter().zip(&msgs) {
        assert_eq!(&raw[0..2], &[0, 10], "version 10");
        assert_eq!(usize::from(m.header.length), raw.len());
        assert_eq!(m.header.domain, 77);
        // The export time is the record's end, in seconds: packet time, not the wall clock.
        assert_eq!(u64::from(m.header.export_s), (T0 + 5_000_000_000) / 1_000_000_000);
        assert_eq!(HEADER_LEN + m.set_lengths.iter().sum::<usize>(), raw.len(), "no bytes beyond the sets");
    }
    let templates = elements::templates();
    // The sizes docs/ipfix.md gives.
    assert_eq!(templates.iter().map(|t| t.record_len).collect::<Vec<_>>(), [333, 357, 71, 95, 61, 85]);
    assert_eq!(
        decoded[0].templates,
        vec![TEMPLATE_TCP4, TEMPLATE_TCP6, TEMPLATE_UDP4, TEMPLATE_UDP6, TEMPLATE_ICMP4, TEMPLATE_ICMP6]
    );
    assert_eq!(decoded[0].set_lengths, vec![SET_HEADER_LEN + templates.iter().map(|t| t.spec_len()).sum::<usize>()]);
    // Field count and enterprise bit of the first template, read from the raw bytes.
    let t = &templates[0];
    let raw = &msgs[0][HEADER_LEN + SET_HEADER_LEN..];
    assert_eq!(u16::from_be_bytes([raw[0], raw[1]]), TEMPLATE_TCP4);
    assert_eq!(usize::from(u16::from_be_bytes([raw[2], raw[3]])), t.elements.len());
    let enterprise = t.elements.iter().filter(|e| e.pen != 0).count();
    assert_eq!(t.spec_len(), 4 + 4 * t.elements.len() + 4 * enterprise);
    // The data set: one record of the template's length, no padding.
    assert_eq!(decoded[1].set_lengths, vec![SET_HEADER_LEN + t.record_len]);
    assert_eq!(decoded[1].records.len(), 1);
}

#[test]
fn values_round_trip() {
    let records = [tcp(1, false, T0 + 2_500_000), tcp(2, true, T0 + 9), udp(3, false, T0 + 1), udp(4, true, T0 + 2)];
    let msgs = encode(no_refresh(), &records);
    let got: Vec<DataRecord> = decode_all(&msgs).into_iter().flat_map(|m| m.records).collect();
    assert_eq!(got.len(), 4);
    for (r, d) in records.iter().zip(&got) {
        let e = r.endpoints();
        let (src, dst) = if e.client_ip.is_ipv4() { (8, 12) } else { (27, 28) };
        assert_eq!(d.addr(src), Some(e.client_ip));
        assert_eq!(d.addr(dst), Some(e.server_ip));
        assert_eq!(d.uint(0, 7), Some(u64::from(e.client_port)));
        assert_eq!(d.uint(0, 11), Some(443));
        assert_eq!(d.uint(0, 152), Some(T0 / 1_000_000));
        assert_eq!(d.uint(0, 239), Some(1));
        match r {
            FlowRecord::Tcp(t) => {
                assert_eq!(d.uint(0, 4), Some(6));
                assert_eq!(d.uint(0, 153), Some(t.last_ns / 1_000_000));
                assert_eq!(d.uint(0, 1), Some(t.client.ip_bytes));
                assert_eq!(d.uint(0, 2), Some(t.client.pkts));
                assert_eq!(d.uint(REVERSE_PEN, 1), Some(90_000));
                assert_eq!(d.uint(REVERSE_PEN, 2), Some(7));
                assert_eq!(d.uint(0, 136), Some(3), "fin: end of flow detected");
                assert_eq!(d.uint(REVERSE_PEN, 220), Some(1));
                assert_eq!(d.uint(0, 6), Some(0x1f), "tcpControlBits: both directions' flags");
                assert_eq!(d.uint(REVERSE_PEN, 6), None, "no reverse element: nfdump would show it instead");
                assert_eq!(d.uint(SONDE_PEN, 1), Some(12_345_678));
                assert_eq!(d.uint(SONDE_PEN, 2), Some(0), "no handshake sample: 0");
                assert_eq!(d.uint(SONDE_PEN, 10), Some(t.client.rtt.min_ns));
                assert_eq!(d.uint(SONDE_PEN, 12), Some(t.client.rtt.mean_ns().round() as u64));
                assert_eq!(d.uint(SONDE_PEN, 14), Some(t.client.rtt.max_ns));
                assert_eq!(d.uint(SONDE_PEN, 16), Some(3));
                assert_eq!(d.uint(SONDE_PEN, 11), Some(0), "no server sample: 0");
                assert_eq!(d.uint(SONDE_PEN, 20), Some(2));
                assert_eq!(d.uint(SONDE_PEN, 22), Some(2896));
                assert_eq!(d.uint(SONDE_PEN, 24), Some(1));
                assert_eq!(d.uint(SONDE_PEN, 27), Some(3));
                assert_eq!(d.uint(SONDE_PEN, 40), Some(1460));
                assert_eq!(d.uint(SONDE_PEN, 42), Some(u64::from(u32::MAX)), "saturated");
                assert_eq!(d.uint(SONDE_PEN, 43), Some(65_535));
            }
            FlowRecord::Udp(u) => {
                assert_eq!(d.uint(0, 4), Some(17));
                assert_eq!(d.uint(0, 153), Some(u.last_ns / 1_000_000));
                assert_eq!((d.uint(0, 1), d.uint(0, 2)), (Some(60), Some(1)));
                assert_eq!((d.uint(REVERSE_PEN, 1), d.uint(REVERSE_PEN, 2)), (Some(300), Some(2)));
                assert_eq!(d.uint(0, 136), Some(1), "idle timeout");
                assert_eq!(d.bytes(SONDE_PEN, 1), None, "UDP carries no TCP metrics");
            }
        }
    }
    // Four templates in a row: four data sets in the one data message.
    assert_eq!(msgs.len(), 2);
    assert_eq!(decode_all(&msgs)[1].set_lengths.len(), 4);
}

/// ICMP entries: their own templates by family, protocol 1 or 58, type and code in
/// icmpTypeCodeIPv4 (32) or icmpTypeCodeIPv6 (139) (an echo session's: its request's), counts
/// both ways, times and end reason, and no port.
#[test]
fn icmp_values_round_trip() {
    let records = [
        icmp("10.0.0.1", "192.0.2.7", IcmpKind::Echo { ident: 715 }, T0 + 3_000_000_000),
        icmp("2001:db8::1", "2001:db8::2", IcmpKind::Echo { ident: 9 }, T0 + 7),
        icmp("192.0.2.7", "10.0.0.1", IcmpKind::Message { icmp_type: 3, code: 3 }, T0 + 1),
        icmp("2001:db8::2", "2001:db8::1", IcmpKind::Message { icmp_type: 1, code: 4 }, T0 + 2),
    ];
    let mut enc = Encoder::new(no_refresh()).unwrap();
    let mut msgs = Vec::new();
    records.iter().for_each(|r| enc.push_icmp(r, &mut msgs));
    // A flow after them: a set of its own in the same message.
    enc.push(&udp(1, false, T0), &mut msgs);
    enc.flush(&mut msgs);
    let got: Vec<DataRecord> = decode_all(&msgs).into_iter().flat_map(|m| m.records).collect();
    assert_eq!(got.len(), 5);
    assert_eq!(
        got.iter().map(|d| d.template).collect::<Vec<_>>()[..4],
        [TEMPLATE_ICMP4, TEMPLATE_ICMP6, TEMPLATE_ICMP4, TEMPLATE_ICMP6]
    );
    let type_codes = [8 << 8, 128 << 8, 3 << 8 | 3, 1 << 8 | 4];
    for ((r, d), type_code) in records.iter().zip(&got).zip(type_codes) {
        let v6 = r.key.client.is_ipv6();
        let (src, dst, type_code_id) = if v6 { (27, 28, 139) } else { (8, 12, 32) };
        assert_eq!((d.addr(src), d.addr(dst)), (Some(r.key.client), Some(r.key.server)));
        assert_eq!(d.uint(0, 4), Some(if v6 { 58 } else { 1 }));
        assert_eq!(d.uint(0, type_code_id), Some(type_code), "{:?}", r.key);
        assert_eq!(d.bytes(0, if v6 { 32 } else { 139 }), None, "one type-code element, the family's");
        assert_eq!((d.uint(0, 152), d.uint(0, 153)), (Some(T0 / 1_000_000), Some(r.last_ns / 1_000_000)));
        assert_eq!((d.uint(0, 2), d.uint(0, 1)), (Some(5), Some(420)));
        assert_eq!((d.uint(REVERSE_PEN, 2), d.uint(REVERSE_PEN, 1)), (Some(r.server.pkts), Some(r.server.ip_bytes)));
        assert_eq!(d.uint(0, 136), Some(if r.server.pkts > 0 { 4 } else { 5 }), "eof, evicted");
        assert_eq!(d.uint(0, 239), Some(1));
        assert_eq!((d.bytes(0, 7), d.bytes(0, 11)), (None, None), "no port");
    }
    assert_eq!(got[4].uint(0, 4), Some(17));
    // The export time is the latest end, an ICMP entry's as a flow's.
    assert_eq!(u64::from(decode_all(&msgs)[1].header.export_s), (T0 + 3_000_000_000) / 1_000_000_000);
}

/// The exporter's sink queues ICMP entries as it does flows: they reach the file and count.
#[test]
fn the_sink_exports_icmp_entries() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("icmp.ipfix");
    let exporter = Exporter::start(&Target::File(file.clone()), no_refresh()).unwrap();
    let mut sink = exporter.sink();
    sink.icmp(&icmp("10.0.0.1", "192.0.2.7", IcmpKind::Echo { ident: 1 }, T0));
    sink.flow(&udp(1, false, T0));
    let stats = exporter.finish();
    assert_eq!(stats.records, 2, "{stats:?}");
    let bytes = std::fs::read(&file).unwrap();
    let msgs: Vec<Vec<u8>> = split_stream(&bytes).unwrap().into_iter().map(<[u8]>::to_vec).collect();
    let templates: Vec<u16> = decode_all(&msgs).iter().flat_map(|m| m.records.iter().map(|r| r.template)).collect();
    assert_eq!(templates, [TEMPLATE_ICMP4, TEMPLATE_UDP4]);
}

#[test]
fn mtu_split_and_sequence_numbers() {
    let records: Vec<FlowRecord> = (0..300)
        .map(|i| if i % 7 == 0 { udp(i, i % 2 == 0, T0 + u64::from(i)) } else { tcp(i, i % 3 == 0, T0 + u64::from(i)) })
        .collect();
    for mtu in [512, 1400, 9000] {
        let msgs = encode(EncoderConfig { mtu, ..no_refresh() }, &records);
        let decoded = decode_all(&msgs);
        let mut before = 0u64;
        let mut got = 0;
        for (i, (m, raw)) in decoded.iter().zip(&msgs).enumerate() {
            assert!(raw.len() <= mtu, "message {i} is {} bytes, MTU {mtu}", raw.len());
            assert_eq!(u64::from(m.header.sequence), before, "message {i}: records sent before it");
            before += m.records.len() as u64;
            got += m.records.len();
            if i + 1 < msgs.len() && !m.records.is_empty() {
                // The next record did not fit: a full message leaves less than a record's room.
                let largest = elements::templates().iter().map(|t| t.record_len).max().unwrap();
                assert!(raw.len() + largest + SET_HEADER_LEN > mtu, "message {i} closed early");
            }
        }
        assert_eq!(got, records.len(), "mtu {mtu}");
        // Templates once, at the start, in as many messages as the MTU needs.
        let n = Encoder::new(EncoderConfig { mtu, ..no_refresh() }).unwrap().template_messages(0).len();
        assert_eq!(n, if mtu < 1000 { 3 } else { 1 }, "mtu {mtu}");
        let kinds: Vec<bool> = msgs.iter().map(|m| is_template_message(m)).collect();
        assert!(kinds[..n].iter().all(|t| *t) && !kinds[n..].iter().any(|t| *t), "mtu {mtu}: {kinds:?}");
        assert_eq!(decoded[..n].iter().map(|m| m.templates.len()).sum::<usize>(), 6);
    }
}

#[test]
fn templates_refresh_by_messages_and_packet_time() {
    let records: Vec<FlowRecord> = (0..40).map(|i| tcp(i, false, T0)).collect();
    // At 512 bytes the templates take three messages.
    let msgs = encode(
        EncoderConfig { mtu: 512, refresh_messages: Some(3), refresh_ns: None, ..EncoderConfig::default() },
        &records,
    );
    let kinds: Vec<bool> = msgs.iter().map(|m| is_template_message(m)).collect();
    // Templates, then three data messages, then templates again…
    for (i, t) in kinds.iter().enumerate() {
        assert_eq!(*t, i % 6 < 3, "message {i}: {kinds:?}");
    }
    assert!(kinds.len() > 10);
    // Template messages carry the sequence number of the data message they precede.
    for w in msgs.windows(2).filter(|w| is_template_message(&w[0])) {
        assert_eq!(w[0][8..12], w[1][8..12]);
    }

    // By packet time: a record 601 s later brings the templates back (600 s default).
    let later = [tcp(0, false, T0), tcp(1, false, T0 + 601_000_000_000)];
    let mut enc = Encoder::new(EncoderConfig { refresh_messages: None, ..EncoderConfig::default() }).unwrap();
    let mut out = Vec::new();
    enc.push(&later[0], &mut out);
    enc.flush(&mut out);
    enc.push(&later[1], &mut out);
    enc.flush(&mut out);
    let kinds: Vec<bool> = out.iter().map(|m| is_template_message(m)).collect();
    assert_eq!(kinds, [true, false, true, false]);
    // 599 s later: no refresh.
    let mut enc = Encoder::new(EncoderConfig { refresh_messages: None, ..EncoderConfig::default() }).unwrap();
    let mut out = Vec::new();
    enc.push(&later[0], &mut out);
    enc.flush(&mut out);
    enc.push(&tcp(1, false, T0 + 599_000_000_000), &mut out);
    enc.flush(&mut out);
    assert_eq!(out.iter().filter(|m| is_template_message(m)).count(), 1);
}

#[test]
fn bad_mtu_and_bad_input() {
    assert!(Encoder::new(EncoderConfig { mtu: 100, ..EncoderConfig::default() }).is_err());
    assert!(Encoder::new(EncoderConfig { mtu: 70_000, ..EncoderConfig::default() }).is_err());
    // Every truncation and a flipped byte anywhere: the decoder errs or reads, never panics.
    let msgs = encode(no_refresh(), &[tcp(0, false, T0), udp(1, true, T0)]);
    let stream: Vec<u8> = msgs.concat();
    for cut in 0..stream.len() {
        let _ = split_stream(&stream[..cut]).map(|ms| {
            let mut d = Decoder::new();
            ms.iter().for_each(|m| drop(d.message(m)));
        });
        let mut bad = stream.clone();
        bad[cut] ^= 0xff;
        if let Ok(ms) = split_stream(&bad) {
            let mut d = Decoder::new();
            ms.iter().for_each(|m| drop(d.message(m)));
        }
    }
    assert!(split_stream(&stream[..stream.len() - 1]).is_err());
}

#[test]
fn target_parsing() {
    assert_eq!(Target::parse("udp://127.0.0.1:9995"), Ok(Target::Udp("127.0.0.1:9995".parse().unwrap())));
    assert_eq!(Target::parse("tcp://[::1]:4739"), Ok(Target::Tcp("[::1]:4739".parse().unwrap())));
    assert_eq!(Target::parse("out.ipfix"), Ok(Target::File("out.ipfix".into())));
    for bad in ["udp://127.0.0.1", "tcp://:x", "sctp://127.0.0.1:4739", "", "udp://"] {
        assert!(Target::parse(bad).is_err(), "{bad}");
    }
}

fn feed(exporter: &Exporter, records: &[FlowRecord]) {
    let mut sink = exporter.sink();
    records.iter().for_each(|r| sink.flow(r));
}

fn some_records(n: u16) -> Vec<FlowRecord> {
    (0..n)
        .map(|i| if i % 2 == 0 { tcp(i, false, T0 + u64::from(i)) } else { udp(i, false, T0 + u64::from(i)) })
        .collect()
}

fn data_records(msgs: &[Message]) -> Vec<DataRecord> {
    msgs.iter().flat_map(|m| m.records.clone()).collect()
}

#[test]
fn export_to_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("flows.ipfix");
    let records = some_records(500);
    let exporter = Exporter::start(&Target::File(path.clone()), EncoderConfig::default()).unwrap();
    feed(&exporter, &records);
    // The live counters move while the run goes on (`/metrics`): full messages are sent as
    // they fill, before the end.
    let live = exporter.live();
    let started = Instant::now();
    while live.stats().records == 0 && started.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(5));
    }
    let before_end = live.stats();
    assert!(before_end.records > 0 && before_end.records < 500, "{before_end:?}");
    let stats = exporter.finish();
    assert_eq!(live.stats(), stats, "after the end, the final counters");
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(stats.bytes, bytes.len() as u64);
    assert_eq!((stats.records, stats.dropped_records, stats.failed_messages), (500, 0, 0));
    let msgs = split_stream(&bytes).unwrap();
    assert_eq!(stats.messages, msgs.len() as u64);
    let mut d = Decoder::new();
    let decoded: Vec<Message> = msgs.iter().map(|m| d.message(m).unwrap()).collect();
    // A file keeps the templates once, at the start.
    assert_eq!(decoded.iter().filter(|m| !m.templates.is_empty()).count(), 1);
    let got = data_records(&decoded);
    assert_eq!(got.len(), 500);
    let ports: Vec<u64> = got.iter().map(|r| r.uint(0, 7).unwrap()).collect();
    assert_eq!(ports, (0..500).map(|i| 40_000 + i).collect::<Vec<u64>>(), "every record once, in order");
}

#[test]
fn export_over_udp() {
    let collector = UdpSocket::bind("127.0.0.1:0").unwrap();
    collector.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let target = Target::Udp(collector.local_addr().unwrap());
    let exporter = Exporter::start(&target, EncoderConfig { mtu: 1400, ..EncoderConfig::default() }).unwrap();
    feed(&exporter, &some_records(200));
    let stats = exporter.finish();
    let mut d = Decoder::new();
    let mut msgs = Vec::new();
    let mut buf = [0u8; 65_536];
    for _ in 0..stats.messages {
        let n = collector.recv(&mut buf).unwrap();
        assert!(n <= 1400);
        msgs.push(d.message(&buf[..n]).unwrap());
    }
    assert_eq!(stats.records, 200);
    assert_eq!(data_records(&msgs).len(), 200);
    let seqs: Vec<u32> = msgs.iter().filter(|m| !m.records.is_empty()).map(|m| m.header.sequence).collect();
    let mut expect = 0;
    for (m, s) in msgs.iter().filter(|m| !m.records.is_empty()).zip(&seqs) {
        assert_eq!(*s, expect);
        expect += m.records.len() as u32;
    }
}

#[test]
fn export_over_tcp_and_to_nobody() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let target = Target::Tcp(listener.local_addr().unwrap());
    let reader = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut bytes = Vec::new();
        s.read_to_end(&mut bytes).unwrap();
        bytes
    });
    let exporter = Exporter::start(&target, EncoderConfig::default()).unwrap();
    feed(&exporter, &some_records(300));
    let stats = exporter.finish();
    let bytes = reader.join().unwrap();
    assert_eq!(stats.bytes, bytes.len() as u64);
    let mut d = Decoder::new();
    let msgs: Vec<Message> = split_stream(&bytes).unwrap().iter().map(|m| d.message(m).unwrap()).collect();
    assert!(!msgs[0].templates.is_empty(), "templates first");
    assert_eq!(data_records(&msgs).len(), 300);

    // A refusing collector: every message fails, counted, and finish returns.
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let exporter = Exporter::start(&Target::Tcp(port), EncoderConfig::default()).unwrap();
    feed(&exporter, &some_records(300));
    let stats = exporter.finish();
    assert_eq!((stats.messages, stats.records), (0, 0));
    assert_eq!(stats.failed_records, 300);
    assert!(stats.failed_messages > 0 && stats.last_error.is_some(), "{stats:?}");

    // An absent UDP collector: sends fail once the ICMP refusals come back; nothing blocks.
    let port = UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let exporter = Exporter::start(&Target::Udp(port), EncoderConfig::default()).unwrap();
    feed(&exporter, &some_records(300));
    let stats = exporter.finish();
    assert_eq!(stats.records + stats.failed_records + stats.dropped_records, 300, "{stats:?}");
    assert!(stats.failed_messages > 0, "{stats:?}");
}

#[test]
fn docs_list_every_element() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/ipfix.md")).unwrap();
    let mut seen = std::collections::HashSet::new();
    for t in elements::templates() {
        for e in t.elements {
            if !seen.insert((e.pen, e.id)) {
                continue;
            }
            let row = format!("| {} | {} | {} |", e.id, e.pen, e.name);
            assert!(doc.contains(&row), "docs/ipfix.md lacks the row starting {row}");
            let line = doc.lines().find(|l| l.starts_with(&row)).unwrap();
            assert!(
                line.contains(e.data_type) && line.contains(e.column),
                "{line}: want {} and {}",
                e.data_type,
                e.column
            );
        }
    }
}

#[test]
fn a_stuck_collector_costs_drops_not_time() {
    // A TCP collector that accepts (the kernel's backlog does) but never reads: once the socket
    // buffers are full, the exporter's writes block until their 2 s timeout.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let target = Target::Tcp(listener.local_addr().unwrap());
    let exporter = Exporter::start(&target, EncoderConfig::default()).unwrap();
    let records = some_records(1000);
    let started = std::time::Instant::now();
    let mut sink = exporter.sink();
    for _ in 0..200 {
        records.iter().for_each(|r| sink.flow(r));
    }
    let feeding = started.elapsed();
    let stats = exporter.finish();
    // 200,000 records (about 40 MB) cannot all fit in the socket buffers: the queue filled and
    // records were dropped, counted, without holding the feeder for each.
    assert!(stats.dropped_records > 0, "{stats:?}");
    assert_eq!(stats.records + stats.failed_records + stats.dropped_records, 200_000, "{stats:?}");
    // Waiting 10 ms per dropped record would take minutes.
    assert!(feeding < Duration::from_secs(3), "feeding took {feeding:?}: {stats:?}");
    eprintln!("fed in {feeding:?}: {stats:?}");
    drop(listener);
}

#[test]
fn udp_is_paced_and_a_trace_run_waits_for_room() {
    // 30,000 records (about 5,000 messages) at 2,000 messages a second: the exporter drains the
    // queue far slower than the feeder fills it, so the feeder waits (FullQueue::Wait) and
    // nothing is dropped; with FullQueue::DropAfterWait most of them would be.
    let collector = UdpSocket::bind("127.0.0.1:0").unwrap();
    let target = Target::Udp(collector.local_addr().unwrap());
    let rate = 2_000;
    let options = ExportOptions { udp_rate: Some(rate), full_queue: FullQueue::Wait };
    let exporter = Exporter::start_with(&target, EncoderConfig::default(), options).unwrap();
    let started = Instant::now();
    let records = some_records(1_000);
    let mut sink = exporter.sink();
    for _ in 0..30 {
        records.iter().for_each(|r| sink.flow(r));
    }
    let stats = exporter.finish();
    let took = started.elapsed();
    assert_eq!((stats.records, stats.dropped_records, stats.failed_messages), (30_000, 0, 0), "{stats:?}");
    // No faster than the rate, less the burst the pacing allows at the start.
    let least = Duration::from_secs(1) * (stats.messages - u64::from(UDP_BURST)) as u32 / rate;
    assert!(took >= least, "{} messages in {took:?}: want at least {least:?}", stats.messages);

    // The same at no limit: no wait.
    let options = ExportOptions { udp_rate: None, full_queue: FullQueue::Wait };
    let exporter = Exporter::start_with(&target, EncoderConfig::default(), options).unwrap();
    let started = Instant::now();
    feed(&exporter, &records);
    let stats = exporter.finish();
    assert_eq!(stats.records, 1_000);
    assert!(started.elapsed() < Duration::from_secs(1), "{:?}", started.elapsed());
    assert!(Exporter::start_with(&target, EncoderConfig::default(), ExportOptions { udp_rate: Some(0), ..options })
        .is_err());
}
