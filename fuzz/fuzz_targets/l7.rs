//! The application readers (sonde-l7) through their `Session` API: TLS hellos and
//! certificates, QUIC Initials (decrypted), HTTP/1.x, DNS, RTP/RTCP, with TCP reassembly.
//!
//! Input: byte 0 picks TCP or UDP and the ports (so that every parser gets its chance), then
//! segments as `[control][length: 2 bytes][bytes…]`; the control byte gives the direction,
//! whether the capture cut the packet, and a jump of the TCP sequence number (a gap, an
//! overlap, a retransmission). TCP sessions also read the segments as Tstat does
//! (`Session::enable_tstat`, its layout's reading). Asserts: no panic; the same segments give the same facts twice
//! (no hidden state); labelling and DNS answer extraction
//! take any input.

use sonde_l7::{dns_response_addresses, label, ndpi_name, Facts, Session, Transport, TstatPacket};

const PORTS: [u16; 8] = [443, 80, 53, 5353, 5004, 8080, 853, 40000];

fn run(transport: Transport, ports: (u16, u16), mut data: &[u8]) -> Facts {
    let mut s = Session::new(transport, ports.0, ports.1);
    s.enable_tstat();
    let mut seq = [1000u32, 500_000];
    let mut packets = 2u64;
    let mut ts_ns = 1_000_000_000u64;
    while let [ctl, a, b, rest @ ..] = data {
        let n = usize::from(u16::from_be_bytes([*a, *b])).min(rest.len());
        let (payload, tail) = rest.split_at(n);
        data = tail;
        let dir = usize::from(ctl & 1);
        let wire_len = n as u32 + if ctl & 2 != 0 { 100 } else { 0 };
        let jump = i32::from((*ctl as i8) >> 2);
        let tcp_seq = (transport == Transport::Tcp).then(|| seq[dir].wrapping_add_signed(jump * 97));
        ts_ns += 1_000_000;
        if let Some(at) = tcp_seq {
            packets += 1 + u64::from(ctl >> 7);
            s.tstat_packet(&TstatPacket {
                dir,
                ts_ns,
                data: payload,
                payload_len: wire_len,
                seq: at,
                isn: Some(999 + dir as u32 * 499_000),
                flow_packets: packets,
                ack: true,
                push: ctl & 4 != 0,
                fin: ctl & 8 != 0,
            });
        }
        s.on_payload(dir, ts_ns, tcp_seq, payload, wire_len);
        if let Some(at) = tcp_seq {
            seq[dir] = at.wrapping_add(wire_len);
        }
        if let Some((name, addrs)) = dns_response_addresses(payload) {
            assert!(addrs.len() <= payload.len() / 4, "{name}: more addresses than bytes");
        }
        if !s.wants_more() {
            break;
        }
    }
    s.into_facts()
}

fn main() {
    afl::fuzz!(|data: &[u8]| {
        let [sel, rest @ ..] = data else { return };
        let transport = if sel & 1 == 0 { Transport::Tcp } else { Transport::Udp };
        let ports = (PORTS[7], PORTS[usize::from(sel >> 1) & 7]);
        let facts = run(transport, ports, rest);
        assert_eq!(facts, run(transport, ports, rest), "the same segments gave other facts");
        let l = label(&facts, transport, ports.0, ports.1);
        let _ = ndpi_name(l.name);
    });
}
