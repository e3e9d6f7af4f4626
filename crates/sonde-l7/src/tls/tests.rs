//! The record walk on literal handshakes: records and messages split anywhere, certificates,
//! times and application data, limits, and damaged input that never panics.

use super::*;
use crate::hello::ext;
use crate::hello::tests::{client_hello, sni};
use crate::{Problems, Session, Transport};

fn record(ty: u8, body: &[u8]) -> Vec<u8> {
    let mut r = vec![ty, 3, 3];
    r.extend_from_slice(&(body.len() as u16).to_be_bytes());
    r.extend_from_slice(body);
    r
}

fn message(ty: u8, body: &[u8]) -> Vec<u8> {
    let mut m = vec![ty];
    m.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
    m.extend_from_slice(body);
    m
}

fn u24(n: usize) -> [u8; 3] {
    let b = (n as u32).to_be_bytes();
    [b[1], b[2], b[3]]
}

/// A DER certificate whose subject is CN=`cn` (the minimum `cert` walks).
fn certificate(cn: &str) -> Vec<u8> {
    fn der(tag: u8, content: &[u8]) -> Vec<u8> {
        let mut v = vec![tag, 0x82];
        v.extend_from_slice(&(content.len() as u16).to_be_bytes());
        v.extend_from_slice(content);
        v
    }
    let name = |s: &str| {
        der(0x30, &der(0x31, &der(0x30, &[&der(0x06, &[0x55, 4, 3])[..], &der(0x0c, s.as_bytes())].concat())))
    };
    let tbs = [der(0x02, &[1]), der(0x30, &[]), name("CA"), der(0x30, &[]), name(cn), der(0x30, &[0; 300])].concat();
    der(0x30, &[der(0x30, &tbs), der(0x30, &[]), der(0x03, &[0])].concat())
}

/// A TLS 1.2 handshake: the client's and the server's bytes.
fn tls12() -> (Vec<u8>, Vec<u8>) {
    let ch = client_hello(
        0x0303,
        &[],
        &[0xc02f, 0x009c],
        &[
            (ext::SERVER_NAME, sni("example.org")),
            (ext::ALPN, vec![0, 3, 2, b'h', b'2']),
            (ext::EC_POINT_FORMATS, vec![1, 0]),
        ],
    );
    let mut client = record(22, &message(1, &ch));
    client.extend(record(20, &[1]));
    client.extend(record(22, &[0x99; 40])); // encrypted Finished
    client.extend(record(23, &[0x77; 100]));
    let mut sh = vec![3, 3];
    sh.extend_from_slice(&[5; 32]);
    sh.extend_from_slice(&[0, 0xc0, 0x2f, 0]);
    sh.extend_from_slice(&[0, 9, 0, 0x10, 0, 5, 0, 3, 2, b'h', b'2']);
    let cert = certificate("www.example.org");
    let mut list = u24(cert.len()).to_vec();
    list.extend_from_slice(&cert);
    let mut certs = u24(list.len()).to_vec();
    certs.extend_from_slice(&list);
    // ServerHello and Certificate in one record run split over two records.
    let flight = [message(2, &sh), message(11, &certs), message(14, &[])].concat();
    let (a, b) = flight.split_at(60);
    let mut server = record(22, a);
    server.extend(record(22, b));
    server.extend(record(20, &[1]));
    server.extend(record(22, &[0x98; 40]));
    server.extend(record(23, &[0x66; 200]));
    (client, server)
}

/// Feeds a handshake through a session: each side's bytes cut at `cut` into two segments.
fn run(client: &[u8], server: &[u8], cut: usize) -> Facts {
    let mut s = Session::new(Transport::Tcp, 50000, 443);
    let (c1, c2) = client.split_at(cut.min(client.len()));
    let (s1, s2) = server.split_at(cut.min(server.len()));
    let mut seq = [1000u32, 9000u32];
    let mut ts = 0;
    for (dir, part) in [(CLIENT, c1), (SERVER, s1), (CLIENT, c2), (SERVER, s2)] {
        ts += 1_000;
        if part.is_empty() {
            continue;
        }
        s.on_payload(dir, ts, Some(seq[dir]), part, part.len() as u32);
        seq[dir] = seq[dir].wrapping_add(part.len() as u32);
    }
    s.into_facts()
}

#[test]
fn a_tls12_handshake_split_anywhere() {
    let (client, server) = tls12();
    let whole = run(&client, &server, usize::MAX);
    let tls = whole.tls.as_deref().expect("TLS");
    assert_eq!(tls.sni.as_deref(), Some("example.org"));
    assert_eq!(tls.alpn_offered, ["h2".into()].into());
    assert_eq!(tls.alpn.as_deref(), Some("h2"));
    assert_eq!((tls.client_version, tls.version), (Some(0x0303), Some(0x0303)));
    assert!(tls.versions_offered.is_empty());
    assert_eq!(tls.cert_subject.as_deref(), Some("www.example.org"));
    assert_eq!(tls.ja4.as_deref().map(|j| &j[..10]), Some("t12d0203h2"));
    assert_eq!(tls.ja3.as_deref().map(str::len), Some(32));
    assert_eq!(tls.ja3s.as_deref().map(str::len), Some(32));
    assert_eq!(tls.appdata_bytes, [100, 200]);
    assert_eq!(tls.first_appdata_ns, [Some(1_000), Some(2_000)]);
    assert_eq!(tls.last_handshake_ns, [Some(1_000), Some(2_000)]);
    assert!(!tls.resumption_offered);
    assert_eq!(whole.problems, Problems::default());
    let longest = client.len().max(server.len());
    for cut in 1..longest {
        let f = run(&client, &server, cut);
        let t = f.tls.as_deref().unwrap();
        // Everything but the times (which depend on where the records fell) is the same.
        assert_eq!((&t.sni, &t.ja3, &t.ja4, &t.ja3s), (&tls.sni, &tls.ja3, &tls.ja4, &tls.ja3s), "cut {cut}");
        assert_eq!(
            (&t.cert_subject, t.appdata_bytes, t.version),
            (&tls.cert_subject, tls.appdata_bytes, tls.version),
            "cut {cut}"
        );
        assert_eq!(f.problems, Problems::default(), "cut {cut}");
    }
}

#[test]
fn tls13_server_handshake_is_not_read_after_its_hello() {
    let ch = client_hello(0x0303, &[3; 32], &[0x1301], &[(ext::SUPPORTED_VERSIONS, vec![4, 0x0a, 0x0a, 3, 4])]);
    let client = record(22, &message(1, &ch));
    let mut sh = vec![3, 3];
    sh.extend_from_slice(&[5; 32]);
    sh.extend_from_slice(&[0, 0x13, 0x01, 0, 0, 6, 0, 0x2b, 0, 2, 3, 4]);
    // After a TLS 1.3 ServerHello a clear "Certificate" would be nonsense: it is not read.
    let mut server = record(22, &[message(2, &sh), message(11, &[0, 0, 0])].concat());
    server.extend(record(23, &[1; 50]));
    let f = run(&client, &server, usize::MAX);
    let tls = f.tls.as_deref().unwrap();
    assert_eq!(tls.version, Some(0x0304));
    assert_eq!(*tls.versions_offered, [0x0304]);
    assert!(!tls.resumption_offered, "a TLS 1.3 compatibility session id");
    assert_eq!(tls.cert_subject, None);
    assert!(tls.ja4.as_deref().unwrap().starts_with("t13i0101"));
    assert_eq!(f.problems, Problems::default());
}

#[test]
fn not_tls() {
    for first in [&b"GET / HTTP/1.1\r\n"[..], &[0x16, 2, 0, 0, 1], &[0x17, 3, 3, 0, 1], &[0x16, 3, 9]] {
        let mut s = Session::new(Transport::Tcp, 50000, 443);
        s.on_payload(CLIENT, 1, Some(1), first, first.len() as u32);
        assert!(s.facts().tls.is_none(), "{first:02x?}");
    }
}

#[test]
fn a_broken_record_header_is_counted() {
    let (client, _) = tls12();
    let mut bad = client[..client.len() - 105].to_vec(); // up to the application data
    bad.extend_from_slice(&[0x42, 3, 3, 0, 5, 1, 2, 3, 4, 5]);
    let f = run(&bad, &[], usize::MAX);
    assert_eq!(f.problems.tls_malformed, 1);
    assert!(f.tls.as_deref().unwrap().ja4.is_some(), "what came before is kept");
}

#[test]
fn a_handshake_message_over_the_limit() {
    // A ClientHello claiming 100 000 bytes.
    let mut client = record(22, &[1, 0x01, 0x86, 0xa0, 3, 3]);
    client.extend(record(23, &[0; 10]));
    let f = run(&client, &[], usize::MAX);
    assert_eq!(f.problems.over_limit, 1);
    let tls = f.tls.as_deref().unwrap();
    assert!(tls.ja3.is_none());
    assert_eq!(tls.appdata_bytes[CLIENT], 10, "records are still walked");
}

#[test]
fn a_long_chain_gives_the_first_certificate_before_it_ends() {
    let cert = certificate("first.example");
    let mut certs = u24(cert.len() + 3 + 50_000).to_vec();
    certs.extend_from_slice(&u24(cert.len()));
    certs.extend_from_slice(&cert);
    certs.extend_from_slice(&u24(50_000));
    let msg = [&[11u8][..], &u24(certs.len() + 50_000), &certs].concat();
    let server = record(22, &msg);
    let ch = record(22, &message(1, &client_hello(0x0303, &[], &[0x2f], &[])));
    let f = run(&ch, &server, usize::MAX);
    assert_eq!(f.tls.as_deref().unwrap().cert_subject.as_deref(), Some("first.example"));
}

/// The RFC 9001 A.2 ClientHello (a real one, from a QUIC stack) in a TLS record.
fn real_client_hello() -> Vec<u8> {
    let hex = crate::quic::tests::rfc_client_hello();
    record(22, &hex)
}

#[test]
fn mutated_client_hellos_never_panic() {
    let base = real_client_hello();
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut parsed = 0;
    for round in 0..2000 {
        let mut b = base.clone();
        for _ in 0..(1 + next() % 3) {
            let at = 3 + (next() as usize) % (b.len() - 3); // keep it recognisable as TLS
            b[at] = next() as u8;
        }
        if round % 4 == 0 {
            b.truncate(3 + (next() as usize) % (b.len() - 3));
        }
        let f = run(&b, &[], 1 + (next() as usize) % b.len());
        let Some(tls) = f.tls.as_deref() else { continue };
        // Invariants: the fingerprints and the version come together or not at all, and a
        // JA4 has its shape.
        assert_eq!(tls.ja3.is_some(), tls.ja4.is_some(), "round {round}");
        assert_eq!(tls.ja3.is_some(), tls.client_version.is_some(), "round {round}");
        if let Some(ja4) = &tls.ja4 {
            parsed += 1;
            assert_eq!(ja4.len(), 36, "{ja4}");
            assert!(ja4.starts_with('t') && ja4.is_ascii());
        }
        assert!(tls.appdata_bytes == [0, 0]);
    }
    assert!(parsed > 100, "most single-byte mutations leave a parsable hello: {parsed}");
}

#[test]
fn mutated_server_flights_never_panic() {
    let (client, server) = tls12();
    let mut seed = 0x1234_5678_9abc_def1u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for round in 0..1000 {
        let mut b = server.clone();
        for _ in 0..(1 + next() % 3) {
            let at = (next() as usize) % b.len();
            b[at] = next() as u8;
        }
        let f = run(&client, &b, 1 + (next() as usize) % b.len());
        let tls = f.tls.as_deref().unwrap();
        // Invariants: the client's side is untouched by the server's bytes, JA3S comes with a
        // version, and a malformed server flight is counted, never more than once a message.
        assert!(tls.ja4.is_some(), "round {round}");
        assert_eq!(tls.ja3s.is_some(), tls.version.is_some(), "round {round}");
        assert!(f.problems.tls_malformed <= 3, "round {round}");
        assert_eq!(tls.appdata_bytes[CLIENT], 100, "round {round}");
    }
}
