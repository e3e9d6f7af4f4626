use super::*;

/// A ClientHello record: session id of 32 bytes, two suites, no compression, SNI
/// `www.Example.com`, ALPN h2 and http/1.1, supported_versions 1.3 and 1.2, a PSK extension.
fn client_hello() -> Vec<u8> {
    let mut ext = Vec::new();
    let name = b"www.Example.com";
    ext.extend_from_slice(&[0, 0]);
    ext.extend_from_slice(&((name.len() + 5) as u16).to_be_bytes());
    ext.extend_from_slice(&((name.len() + 3) as u16).to_be_bytes());
    ext.push(0);
    ext.extend_from_slice(&(name.len() as u16).to_be_bytes());
    ext.extend_from_slice(name);
    let alpn = b"\x02h2\x08http/1.1";
    ext.extend_from_slice(&[0, 0x10]);
    ext.extend_from_slice(&((alpn.len() + 2) as u16).to_be_bytes());
    ext.extend_from_slice(&(alpn.len() as u16).to_be_bytes());
    ext.extend_from_slice(alpn);
    ext.extend_from_slice(&[0, 0x2b, 0, 5, 4, 3, 4, 3, 3]);
    ext.extend_from_slice(&[0, 0x29, 0, 0]);
    let mut body = vec![3, 3];
    body.extend_from_slice(&[0x11; 32]);
    body.push(32);
    body.extend_from_slice(&[0x22; 32]);
    body.extend_from_slice(&[0, 4, 0x13, 1, 0xc0, 0x2f, 1, 0]);
    body.extend_from_slice(&(ext.len() as u16).to_be_bytes());
    body.extend_from_slice(&ext);
    let mut hs = vec![1];
    hs.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
    hs.extend_from_slice(&body);
    let mut rec = vec![0x16, 3, 1];
    rec.extend_from_slice(&(hs.len() as u16).to_be_bytes());
    rec.extend_from_slice(&hs);
    rec
}

/// A ServerHello record (TLS 1.2 layout, ALPN h2), followed in the same packet by a
/// certificate whose issuer CN is `R3` and subject CN `example.org`.
fn server_flight() -> Vec<u8> {
    let alpn = b"\x02h2";
    let mut ext = vec![0, 0x10];
    ext.extend_from_slice(&((alpn.len() + 2) as u16).to_be_bytes());
    ext.extend_from_slice(&(alpn.len() as u16).to_be_bytes());
    ext.extend_from_slice(alpn);
    let mut body = vec![3, 3];
    body.extend_from_slice(&[0x33; 32]);
    body.push(0);
    body.extend_from_slice(&[0xc0, 0x2f, 0]);
    body.extend_from_slice(&(ext.len() as u16).to_be_bytes());
    body.extend_from_slice(&ext);
    let mut hs = vec![2];
    hs.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
    hs.extend_from_slice(&body);
    let mut rec = vec![0x16, 3, 3];
    rec.extend_from_slice(&(hs.len() as u16).to_be_bytes());
    rec.extend_from_slice(&hs);
    // A Certificate record's bytes: only the CN attributes matter to Tstat's search.
    rec.extend_from_slice(&[0x16, 3, 3, 0, 60, 0x0b, 0, 0, 56]);
    rec.extend_from_slice(&[0x30, 0x09, 0x06, 0x03, 0x55, 0x04, 0x03, 0x0c, 0x02]);
    rec.extend_from_slice(b"R3");
    rec.extend_from_slice(&[0x30, 0x12, 0x06, 0x03, 0x55, 0x04, 0x03, 0x0c, 0x0b]);
    rec.extend_from_slice(b"example.org");
    rec.extend_from_slice(&[0; 16]);
    rec
}

fn pkt(dir: Dir, ts_ns: u64, data: &[u8], seq: u32, n: u64) -> TstatPacket<'_> {
    TstatPacket {
        dir,
        ts_ns,
        data,
        payload_len: data.len() as u32,
        seq,
        isn: Some(1000),
        flow_packets: n,
        ack: true,
        push: true,
        fin: false,
    }
}

#[test]
fn a_tls_flow_as_tstat_reads_it() {
    let (ch, sf) = (client_hello(), server_flight());
    let mut t = TstatL7::default();
    t.packet(&TstatPacket { isn: Some(999), ..pkt(CLIENT, 10, &ch, 1000, 4) });
    assert_eq!(t.sni.as_deref(), Some("www.Example.com"), "case kept");
    assert_eq!(t.npnalpn[CLIENT], bits::ALPN_H2 | bits::ALPN_HTTP);
    assert_eq!(t.versions[CLIENT].as_deref(), Some("0304,0303"));
    assert_eq!(t.session_bits, 1 | 2, "session id and PSK");
    t.packet(&TstatPacket { isn: Some(4999), ..pkt(SERVER, 20, &sf, 5000, 6) });
    assert_eq!(t.con_t, CON_TLS);
    assert_eq!(t.scn.as_deref(), Some("example.org"), "R3 does not look like a domain");
    assert_eq!(t.npnalpn[SERVER], bits::ALPN_H2);
    assert_eq!(t.versions[SERVER].as_deref(), Some("0303"));
    // The client's Finished flight, then its first application data.
    let fin = [0x14, 3, 3, 0, 1, 1, 0x16, 3, 3, 0, 2, 0, 0];
    let seq = 1000 + ch.len() as u32;
    t.packet(&TstatPacket { isn: Some(999), ..pkt(CLIENT, 30, &fin, seq, 8) });
    let data = [0x17, 3, 3, 0, 3, 1, 2, 3];
    let seq2 = seq + fin.len() as u32;
    t.packet(&TstatPacket { isn: Some(999), ..pkt(CLIENT, 40, &data, seq2, 9) });
    assert_eq!((t.before_data_ns[CLIENT], t.data_ns[CLIENT]), (30, Some(40)));
    assert_eq!(t.data_bytes[CLIENT], u64::from(seq2 - 999), "the stream offset plus one");
    assert_eq!(t.before_data_ns[SERVER], 20);
    assert!(t.classifying());
}

#[test]
fn a_packet_past_the_tenth_before_the_server_hello_ends_the_wait() {
    let (ch, sf) = (client_hello(), server_flight());
    let mut t = TstatL7::default();
    t.packet(&pkt(CLIENT, 10, &ch, 1001, 4));
    let mut late = t.clone();
    late.packet(&pkt(SERVER, 20, &sf, 5001, 11));
    assert_eq!(late.con_t, CON_TLS, "the ServerHello itself may come late");
    t.packet(&pkt(CLIENT, 15, b"\x16\x03\x03\x00\x01\x10\x00", 1600, 11));
    t.packet(&pkt(SERVER, 20, &sf, 5001, 12));
    assert_eq!(t.con_t, 0, "another packet past the 10th sent the flow back to unknown");
    assert!(t.scn.is_none() && t.versions[SERVER].is_none());
}

#[test]
fn http_counts_every_request_and_response_packet() {
    let mut t = TstatL7::default();
    let get = b"HEAD /a HTTP/1.1\r\nHost: Example.org\r\nAccept: */*\r\n\r\n";
    t.packet(&pkt(CLIENT, 1, get, 1, 4));
    t.packet(&pkt(SERVER, 2, b"HTTP/1.1 204 No Content\r\n\r\n", 1, 5));
    t.packet(&pkt(CLIENT, 3, b"GET /b HTTP/1.1\r\nHost: other\r\n\r\n", 1, 6));
    t.packet(&pkt(CLIENT, 4, b"GET /b HTTP/1.1\r\nHost: other\r\n\r\n", 1, 7));
    t.packet(&pkt(CLIENT, 5, b"DELETE /c HTTP/1.1\r\n\r\n", 1, 8));
    t.packet(&pkt(CLIENT, 6, b"DELEX", 1, 9));
    assert_eq!(t.con_t, CON_HTTP);
    assert!(!t.http_post, "HEAD is Tstat's unclassified GET: http_t 1");
    assert_eq!(&t.http_status[..usize::from(t.http_status_len)], b"204");
    assert_eq!((t.http_requests, t.http_responses), (4, 1), "retransmissions count too");
    assert_eq!(t.http_host.as_deref(), Some("Example.org"));
}

#[test]
fn names_as_tstat_checks_them() {
    assert_eq!(domain_like(b"a.bc").as_deref(), Some("a.bc"));
    assert_eq!(domain_like(b"a.bc.").as_deref(), Some("a.bc."));
    assert!(domain_like(b"R3").is_none());
    assert!(domain_like(b"a.b").is_none());
    assert!(domain_like(b".bc").is_none());
    assert!(domain_like(b"a.abcdefghijklmnopqrstuvwxyz").is_none());
    assert_eq!(domain_like(b"x.co\0junk").as_deref(), Some("x.co"));
    assert_eq!(host_header(b"GET / HTTP/1.1\r\nHost: \r\nHost: h.x\r\n").as_deref(), Some("h.x"));
    assert_eq!(protocols(b"\x00", 0, 1, 1, false), bits::ALPN_EMPTY);
}

#[test]
fn no_input_panics() {
    let mut t = TstatL7::default();
    let ch = client_hello();
    for cut in 0..ch.len() {
        let mut t2 = TstatL7::default();
        t2.packet(&pkt(CLIENT, 1, &ch[..cut], 1, 1));
        for i in 0..cut.min(64) {
            let mut b = ch[..cut].to_vec();
            b[i] = 0xff;
            t.packet(&pkt(CLIENT, 1, &b, 1, 1));
            t.packet(&pkt(SERVER, 1, &b, 1, 2));
        }
    }
    let sf = server_flight();
    for cut in 0..sf.len() {
        let mut t2 = TstatL7 { state: State::SslHandshake, ..TstatL7::default() };
        t2.packet(&pkt(SERVER, 1, &sf[..cut], 1, 2));
    }
}
