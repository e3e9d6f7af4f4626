//! QUIC Initial decryption against the RFCs' samples; coalesced packets, CRYPTO frames out of
//! order and across datagrams, 0-RTT; damaged and cut datagrams never panic.

use super::*;
use crate::{Session, Transport};
use aes_gcm::aead::AeadInPlace;

mod vectors;

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

const DCID: [u8; 8] = [0x83, 0x94, 0xc8, 0xf0, 0x3e, 0x51, 0x57, 0x08];

/// Encrypts and header-protects a long-header packet (the inverse of `open`): `header` ends
/// with a packet number of `pn_len` bytes whose length field already counts the tag.
fn protect(keys: &InitialKeys, header: &[u8], pn_len: usize, payload: &[u8]) -> Vec<u8> {
    let pn_offset = header.len() - pn_len;
    let mut pn = 0u64;
    for b in &header[pn_offset..] {
        pn = (pn << 8) | u64::from(*b);
    }
    let mut nonce = keys.iv;
    for (n, p) in nonce[4..].iter_mut().zip(pn.to_be_bytes()) {
        *n ^= p;
    }
    let mut body = payload.to_vec();
    let tag = keys.aead.encrypt_in_place_detached(Nonce::from_slice(&nonce), header, &mut body).unwrap();
    let mut packet = header.to_vec();
    packet.extend_from_slice(&body);
    packet.extend_from_slice(&tag);
    let mut mask = GenericArray::clone_from_slice(&packet[pn_offset + 4..pn_offset + 20]);
    keys.hp.encrypt_block(&mut mask);
    packet[0] ^= mask[0] & 0x0f;
    for i in 0..pn_len {
        packet[pn_offset + i] ^= mask[1 + i];
    }
    packet
}

/// A client Initial (packet number `pn`) carrying `frames`, padded to `size` bytes.
fn initial(version: u32, pn: u8, frames: &[u8], size: usize) -> Vec<u8> {
    initial_to(&DCID, version, pn, frames, size)
}

/// The same to another destination connection id (of 8 bytes), keyed from it.
fn initial_to(dcid: &[u8], version: u32, pn: u8, frames: &[u8], size: usize) -> Vec<u8> {
    let keys = InitialKeys::client(version, dcid).unwrap();
    let first = if version == V2 { 0xd1 } else { 0xc1 }; // Initial, 2-byte packet number
    let mut header = vec![first];
    header.extend_from_slice(&version.to_be_bytes());
    header.push(dcid.len() as u8);
    header.extend_from_slice(dcid);
    header.extend_from_slice(&[0, 0]); // no source id, no token
    let header_len = header.len() + 2 + 2;
    let payload_len = size - header_len - 2 - 16;
    header.extend_from_slice(&(0x4000u16 | (payload_len + 2 + 16) as u16).to_be_bytes());
    header.extend_from_slice(&[0, pn]);
    let mut payload = frames.to_vec();
    payload.resize(payload_len, 0);
    protect(&keys, &header, 2, &payload)
}

/// A CRYPTO frame with 2-byte varints.
fn crypto(offset: usize, data: &[u8]) -> Vec<u8> {
    let mut f = vec![0x06];
    f.extend_from_slice(&(0x4000 | offset as u16).to_be_bytes());
    f.extend_from_slice(&(0x4000 | data.len() as u16).to_be_bytes());
    f.extend_from_slice(data);
    f
}

/// The ClientHello (handshake message with header) of RFC 9001 A.2.
pub(crate) fn rfc_client_hello() -> Vec<u8> {
    unhex(vectors::V1_CRYPTO_FRAME)[4..].to_vec()
}

fn session() -> Session {
    Session::new(Transport::Udp, 50000, 443)
}

#[test]
fn rfc9001_a2_client_initial_decrypts() {
    let mut packet = unhex(vectors::V1_CLIENT_INITIAL);
    assert_eq!(packet.len(), 1200);
    let keys = InitialKeys::client(V1, &DCID).unwrap();
    let plain = keys.open(&mut packet, 18).expect("the RFC's sample authenticates");
    assert_eq!(packet[..22], unhex("c300000001088394c8f03e5157080000449e00000002")[..], "unprotected header");
    assert_eq!(plain.len(), 1162);
    let frame = unhex(vectors::V1_CRYPTO_FRAME);
    assert_eq!(packet[plain.clone()][..frame.len()], frame[..]);
    assert!(packet[plain][frame.len()..].iter().all(|&b| b == 0), "PADDING");
}

#[test]
fn rfc9369_a2_v2_client_initial_decrypts() {
    let mut packet = unhex(vectors::V2_CLIENT_INITIAL);
    let keys = InitialKeys::client(V2, &DCID).unwrap();
    let plain = keys.open(&mut packet, 18).expect("the RFC's sample authenticates");
    assert_eq!(packet[..22], unhex("d36b3343cf088394c8f03e5157080000449e00000002")[..]);
    let frame = unhex(vectors::V1_CRYPTO_FRAME);
    assert_eq!(packet[plain][..frame.len()], frame[..]);
    // v1 keys do not open a v2 packet.
    let mut packet = unhex(vectors::V2_CLIENT_INITIAL);
    assert!(InitialKeys::client(V1, &DCID).unwrap().open(&mut packet, 18).is_none());
}

#[test]
fn protect_reproduces_the_rfc_sample() {
    let keys = InitialKeys::client(V1, &DCID).unwrap();
    let mut payload = unhex(vectors::V1_CRYPTO_FRAME);
    payload.resize(1162, 0);
    let header = unhex("c300000001088394c8f03e5157080000449e00000002");
    assert_eq!(protect(&keys, &header, 4, &payload), unhex(vectors::V1_CLIENT_INITIAL));
}

#[test]
fn the_parser_reads_the_rfc_client_hello() {
    for (version, sample) in [(V1, vectors::V1_CLIENT_INITIAL), (V2, vectors::V2_CLIENT_INITIAL)] {
        let mut s = session();
        let d = unhex(sample);
        s.on_payload(CLIENT, 1_000, None, &d, d.len() as u32);
        let quic = s.facts().quic.as_deref().expect("recognised as QUIC");
        assert_eq!(quic.client_version, Some(version));
        assert_eq!(quic.tls.sni.as_deref(), Some("example.com"));
        assert_eq!(quic.tls.alpn_offered, ["alpn".into()].into());
        assert_eq!(*quic.tls.versions_offered, [0x0304]);
        let ja4 = quic.tls.ja4.as_deref().unwrap();
        // 2 ciphers; extensions 0, ff01, a, 10, 5, 33, 2b, d, 2d, 1c, 39: 11; ALPN "alpn": "an".
        assert!(ja4.starts_with("q13d0211an_"), "{ja4}");
        assert!(!quic.ech && !quic.zero_rtt && quic.user_agent.is_none());
        assert_eq!(s.facts().problems, Problems::default());
        assert!(s.wants_more(), "the server's version is still to come");
        // The server's Initial (RFC 9001 A.3's header) gives its version: done.
        let server = unhex("cf000000010008f067a5502a4262b5004075c0d95a482cd0991cd25b0aac406a");
        s.on_payload(SERVER, 2_000, None, &server, server.len() as u32);
        assert_eq!(s.facts().quic.as_deref().unwrap().server_version, Some(V1));
        assert!(!s.wants_more());
    }
}

#[test]
fn crypto_frames_out_of_order_across_datagrams() {
    let hello = rfc_client_hello();
    let (a, b) = hello.split_at(100);
    // The second half first (with a PING and an ACK before it), then the first half.
    let mut frames = vec![0x01, 0x02, 0x00, 0x00, 0x00, 0x00];
    frames.extend(crypto(100, b));
    let d1 = initial(V1, 0, &frames, 1200);
    let d2 = initial(V1, 1, &crypto(0, a), 1200);
    let mut s = session();
    s.on_payload(CLIENT, 1, None, &d1, 1200);
    assert!(s.facts().quic.as_deref().unwrap().tls.sni.is_none(), "half a ClientHello");
    s.on_payload(CLIENT, 2, None, &d2, 1200);
    let quic = s.facts().quic.as_deref().unwrap();
    assert_eq!(quic.tls.sni.as_deref(), Some("example.com"));
    assert_eq!(s.facts().problems, Problems::default());
}

#[test]
fn coalesced_initial_and_zero_rtt() {
    let hello = rfc_client_hello();
    let mut d = initial(V2, 0, &crypto(0, &hello), 600);
    // A v2 0-RTT packet (type bits 2) after it, its body left opaque.
    d.extend_from_slice(&[0xe1, 0x6b, 0x33, 0x43, 0xcf, 8]);
    d.extend_from_slice(&DCID);
    d.extend_from_slice(&[0, 0x40, 40]);
    d.extend_from_slice(&[0x55; 40]);
    let mut s = session();
    s.on_payload(CLIENT, 1, None, &d, d.len() as u32);
    let quic = s.facts().quic.as_deref().unwrap();
    assert!(quic.zero_rtt);
    assert_eq!(quic.tls.sni.as_deref(), Some("example.com"));
}

#[test]
fn ech_and_google_user_agent() {
    // RFC 9001's ClientHello with two more extensions: ECH, and transport parameters with
    // google_user_agent (0x3129, two-byte varint 0x7129).
    let mut hello = rfc_client_hello();
    let mut extra = vec![0xfe, 0x0d, 0, 2, 0xaa, 0xbb];
    let params = [&[0x71, 0x29, 4][..], b"test"].concat();
    extra.extend_from_slice(&[0x00, 0x39, 0, params.len() as u8]);
    extra.extend_from_slice(&params);
    // Drop the original transport parameters (the last extension, 0x39, 0x32 bytes long).
    let tp_len = 4 + 0x32;
    hello.truncate(hello.len() - tp_len);
    hello.extend_from_slice(&extra);
    let ext_len_at = 4 + 2 + 32 + 1 + 2 + 4 + 2; // header, version, random, session id, ciphers, compression
    let exts = u16::from_be_bytes([hello[ext_len_at], hello[ext_len_at + 1]]) as usize - tp_len + extra.len();
    hello[ext_len_at..ext_len_at + 2].copy_from_slice(&(exts as u16).to_be_bytes());
    let body = hello.len() - 4;
    hello[1..4].copy_from_slice(&(body as u32).to_be_bytes()[1..]);
    let d = initial(V1, 0, &crypto(0, &hello), 1200);
    let mut s = session();
    s.on_payload(CLIENT, 1, None, &d, 1200);
    let quic = s.facts().quic.as_deref().unwrap();
    assert_eq!(s.facts().problems, Problems::default());
    assert!(quic.ech);
    assert_eq!(quic.user_agent.as_deref(), Some("test"));
}

#[test]
fn a_damaged_initial_is_counted() {
    let mut d = unhex(vectors::V1_CLIENT_INITIAL);
    d[600] ^= 1;
    let mut s = session();
    s.on_payload(CLIENT, 1, None, &d, 1200);
    assert_eq!(s.facts().problems.quic_malformed, 1);
    assert!(s.facts().quic.as_deref().unwrap().tls.ja4.is_none());
}

#[test]
fn other_versions_are_recorded_not_decrypted() {
    // Google QUIC T051 and a draft-29 Initial: versions kept, nothing counted as malformed.
    for version in [0x5430_3531u32, 0xff00_001d] {
        let mut d = vec![0xc3];
        d.extend_from_slice(&version.to_be_bytes());
        d.push(8);
        d.extend_from_slice(&DCID);
        d.extend_from_slice(&[0; 1200]);
        let mut s = session();
        s.on_payload(CLIENT, 1, None, &d, d.len() as u32);
        let quic = s.facts().quic.as_deref().unwrap();
        assert_eq!(quic.client_version, Some(version));
        assert_eq!(s.facts().problems, Problems::default());
    }
    // Not QUIC: a short header first, an unknown version, a connection id over 20 bytes.
    for d in [&[0x40u8, 1, 2, 3, 4, 5, 6][..], &[0xc0, 0x12, 0x34, 0x56, 0x78, 8, 0], &[0xc0, 0, 0, 0, 1, 21, 0]] {
        let mut s = session();
        s.on_payload(CLIENT, 1, None, d, d.len() as u32);
        assert!(s.facts().quic.is_none(), "{d:02x?}");
    }
}

#[test]
fn cut_truncated_and_mutated_datagrams_never_panic() {
    let whole = unhex(vectors::V1_CLIENT_INITIAL);
    for cut in 0..whole.len() {
        let mut s = session();
        s.on_payload(CLIENT, 1, None, &whole[..cut], 1200);
        // A cut Initial cannot be opened, and that is not malformation.
        assert_eq!(s.facts().problems, Problems::default(), "cut at {cut}");
        assert!(s.facts().quic.as_ref().is_none_or(|q| q.tls.sni.is_none()));
    }
    // Mutated plaintext inside a valid protection: frames and ClientHello parsing see garbage.
    let hello = rfc_client_hello();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for round in 0..400 {
        let mut frame = crypto(0, &hello);
        for _ in 0..(1 + next() % 4) {
            let at = (next() as usize) % frame.len();
            frame[at] = next() as u8;
        }
        if round % 5 == 0 {
            frame.truncate((next() as usize) % frame.len());
        }
        let d = initial(V1, 0, &frame, 1200);
        let mut s = session();
        s.on_payload(CLIENT, 1, None, &d, 1200);
        let f = s.facts();
        let quic = f.quic.as_deref().unwrap();
        let problems = f.problems.quic_malformed + f.problems.over_limit;
        // Invariant: a fingerprint only when nothing went wrong, and every fingerprint is
        // JA4-shaped.
        if let Some(ja4) = &quic.tls.ja4 {
            assert_eq!(problems, 0, "round {round}");
            assert_eq!(ja4.len(), 36, "{ja4}");
            assert!(ja4.starts_with('q'));
        }
    }
}

#[test]
fn after_a_retry_the_client_hello_is_read_with_the_new_id_keys() {
    let hello = rfc_client_hello();
    let new_id = [0x11u8, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88];
    let mut s = session();
    // Half a ClientHello under the first id's keys, then a Retry giving `new_id`.
    let d1 = initial(V1, 0, &crypto(0, &hello[..100]), 1200);
    s.on_payload(CLIENT, 1, None, &d1, 1200);
    let mut retry = vec![0xf0, 0, 0, 0, 1, 0, 8];
    retry.extend_from_slice(&new_id);
    retry.extend_from_slice(&[0xab; 16 + 16]); // token and integrity tag
    s.on_payload(SERVER, 2, None, &retry, retry.len() as u32);
    // The client starts over: the whole ClientHello to the new id, keyed from it.
    let d2 = initial_to(&new_id, V1, 1, &crypto(0, &hello), 1200);
    s.on_payload(CLIENT, 3, None, &d2, 1200);
    let quic = s.facts().quic.as_deref().unwrap();
    assert_eq!(quic.tls.sni.as_deref(), Some("example.com"));
    assert_eq!(quic.server_version, Some(V1));
    assert_eq!(s.facts().problems, Problems::default());
}
