//! QUIC over UDP: the versions each side speaks and the client's ClientHello, read from its
//! Initial packets.
//!
//! A flow is QUIC when its first datagram starts with a long header (RFC 8999 §5.1, the fixed
//! bit set, connection ids of at most 20 bytes) of a version we know of: v1, v2, the IETF
//! drafts, Google's and Facebook's. Every datagram is walked packet by packet (RFC 9000 §12.2:
//! packets may be coalesced) up to a short-header packet, which ends a datagram.
//!
//! Client Initials of v1 and v2 are decrypted with the keys anyone can derive from the
//! destination connection id (RFC 9001 §5.2, RFC 9369 §3.3): header protection with AES-128 in
//! ECB mode (§5.4.3), the payload with AES-128-GCM (§5.3). Their CRYPTO frames may come in any
//! order and span packets and datagrams: they are placed by offset into a buffer of at most
//! [`CRYPTO_LIMIT_BYTES`] (beyond it `Problems::over_limit`) until the ClientHello is whole,
//! which is then read by the same code as TLS over TCP (JA4 starting with `q`). Other
//! versions are only recorded. A packet that does not decrypt, or whose frames or ClientHello
//! do not parse, counts `Problems::quic_malformed`; a datagram cut by the capture is read as far
//! as it goes (its header still tells versions and 0-RTT).
//!
//! The parser is done once it has the ClientHello and the server's version: 0-RTT packets
//! travel with or right after the client's first Initial, before the server answers.

use aes::cipher::{generic_array::GenericArray, BlockEncrypt, KeyInit};
use aes::Aes128;
use aes_gcm::{AeadInPlace, Aes128Gcm, Nonce, Tag};
use hkdf::Hkdf;
use sha2::Sha256;

use crate::hello::{ClientHello, Reader};
use crate::{tls, Facts, Problems, QuicFacts, Segment, Verdict, CLIENT, SERVER};

/// CRYPTO bytes held for the client's ClientHello, at most. A ClientHello with post-quantum
/// key shares is about 2 KiB; one with many PSK identities or a large ECH a few more.
pub const CRYPTO_LIMIT_BYTES: usize = 16 * 1024;

pub(crate) const V1: u32 = 0x0000_0001;
pub(crate) const V2: u32 = 0x6b33_43cf;

/// RFC 9001 §5.2.
const V1_SALT: [u8; 20] = [
    0x38, 0x76, 0x2c, 0xf7, 0xf5, 0x59, 0x34, 0xb3, 0x4d, 0x17, 0x9a, 0xe6, 0xa4, 0xc8, 0x0c, 0xad, 0xcc, 0xbb, 0x7f,
    0x0a,
];
/// RFC 9369 §3.3.1.
const V2_SALT: [u8; 20] = [
    0x0d, 0xed, 0xe3, 0xde, 0xf7, 0x00, 0xa6, 0xdb, 0x81, 0x93, 0x81, 0xbe, 0x6e, 0x26, 0x9d, 0xcb, 0xf9, 0xbd, 0x2e,
    0xd9,
];

/// Google QUIC's transport parameter carrying the user agent (draft-ietf-quic-transport
/// registry, 0x3129 "google_user_agent").
const TP_GOOGLE_USER_AGENT: u64 = 0x3129;

/// Whether `version` is one a QUIC endpoint may send: v1, v2, an IETF draft (0xff0000xx),
/// Google's (`Q0xx`, `T0xx`), mvfst's (0xfaceb00x), or a reserved one (RFC 9000 §15:
/// 0x?a?a?a?a, sent to exercise version negotiation).
fn known_version(version: u32) -> bool {
    let [a, b, _, _] = version.to_be_bytes();
    version == V1
        || version == V2
        || version >> 8 == 0x00ff_0000
        || (matches!(a, b'Q' | b'T') && b == b'0')
        || version >> 4 == 0x0fac_eb00
        || version & 0x0f0f_0f0f == 0x0a0a_0a0a
}

/// The long-header packet types (RFC 9000 §17.2; v2 renumbers them, RFC 9369 §3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PacketType {
    Initial,
    ZeroRtt,
    Handshake,
    Retry,
}

fn packet_type(version: u32, first: u8) -> PacketType {
    let bits = (first >> 4) & 3;
    let bits = if version == V2 { bits.wrapping_sub(1) & 3 } else { bits };
    match bits {
        0 => PacketType::Initial,
        1 => PacketType::ZeroRtt,
        2 => PacketType::Handshake,
        _ => PacketType::Retry,
    }
}

/// A QUIC variable-length integer (RFC 9000 §16).
fn varint(r: &mut Reader<'_>) -> Option<u64> {
    let first = r.u8().ok()?;
    let len = 1usize << (first >> 6);
    let rest = r.take(len - 1).ok()?;
    Some(rest.iter().fold(u64::from(first & 0x3f), |acc, &b| (acc << 8) | u64::from(b)))
}

/// Whether a datagram starts like a QUIC long-header packet of a known version.
pub(crate) fn looks_like_quic(b: &[u8]) -> bool {
    match b {
        [first, v0, v1, v2, v3, dcid_len, ..] => {
            first & 0xc0 == 0xc0 && known_version(u32::from_be_bytes([*v0, *v1, *v2, *v3])) && *dcid_len <= 20
        }
        _ => false,
    }
}

/// The Initial keys of one direction.
pub(crate) struct InitialKeys {
    aead: Aes128Gcm,
    iv: [u8; 12],
    hp: Aes128,
}

/// HKDF-Expand-Label (RFC 8446 §7.1) with an empty context.
fn expand_label(hk: &Hkdf<Sha256>, label: &[u8], out: &mut [u8]) -> Option<()> {
    let mut info = Vec::with_capacity(4 + 6 + label.len());
    info.extend_from_slice(&u16::try_from(out.len()).ok()?.to_be_bytes());
    info.push(u8::try_from(6 + label.len()).ok()?);
    info.extend_from_slice(b"tls13 ");
    info.extend_from_slice(label);
    info.push(0);
    hk.expand(&info, out).ok()
}

impl InitialKeys {
    /// The client's Initial keys for `version` (v1 or v2) and the client's destination
    /// connection id. RFC 9001 §5.2, RFC 9369 §3.3.
    pub(crate) fn client(version: u32, dcid: &[u8]) -> Option<Self> {
        let (salt, labels): (&[u8], [&[u8]; 3]) = match version {
            V1 => (&V1_SALT, [b"quic key", b"quic iv", b"quic hp"]),
            V2 => (&V2_SALT, [b"quicv2 key", b"quicv2 iv", b"quicv2 hp"]),
            _ => return None,
        };
        let (initial, _) = Hkdf::<Sha256>::extract(Some(salt), dcid);
        let initial = Hkdf::<Sha256>::from_prk(&initial).ok()?;
        let mut secret = [0u8; 32];
        expand_label(&initial, b"client in", &mut secret)?;
        let hk = Hkdf::<Sha256>::from_prk(&secret).ok()?;
        let (mut key, mut iv, mut hp) = ([0u8; 16], [0u8; 12], [0u8; 16]);
        expand_label(&hk, labels[0], &mut key)?;
        expand_label(&hk, labels[1], &mut iv)?;
        expand_label(&hk, labels[2], &mut hp)?;
        Some(InitialKeys {
            aead: Aes128Gcm::new(GenericArray::from_slice(&key)),
            iv,
            hp: Aes128::new(GenericArray::from_slice(&hp)),
        })
    }

    /// Removes header protection and decrypts one long-header packet in place: `packet` is the
    /// whole packet, `pn_offset` where its packet number starts. Returns the plaintext range of
    /// `packet`, or None when it does not authenticate.
    pub(crate) fn open(&self, packet: &mut [u8], pn_offset: usize) -> Option<std::ops::Range<usize>> {
        // RFC 9001 §5.4.2: the sample starts 4 bytes after the packet number's start.
        let sample = packet.get(pn_offset + 4..pn_offset + 20)?;
        let mut mask = GenericArray::clone_from_slice(sample);
        self.hp.encrypt_block(&mut mask);
        let first = packet.first_mut()?;
        *first ^= mask[0] & 0x0f; // long header: the low four bits
        let pn_len = usize::from(*first & 3) + 1;
        let mut pn = 0u64;
        for i in 0..pn_len {
            let b = packet.get_mut(pn_offset + i)?;
            *b ^= mask[1 + i];
            pn = (pn << 8) | u64::from(*b);
        }
        // RFC 9001 §5.3: the nonce is the IV xored with the packet number (left-padded). The
        // truncated number is the full one while it is below 2^(8·pn_len): Initials count from 0.
        let mut nonce = self.iv;
        for (n, p) in nonce[4..].iter_mut().zip(pn.to_be_bytes()) {
            *n ^= p;
        }
        let body_start = pn_offset + pn_len;
        let tag_start = packet.len().checked_sub(16).filter(|&t| t >= body_start)?;
        let (header, rest) = packet.split_at_mut(body_start);
        let (body, tag) = rest.split_at_mut(tag_start - body_start);
        let tag = Tag::clone_from_slice(tag);
        self.aead.decrypt_in_place_detached(Nonce::from_slice(&nonce), header, body, &tag).ok()?;
        Some(body_start..tag_start)
    }
}

/// CRYPTO stream bytes placed by offset, with the ranges received.
#[derive(Default)]
struct CryptoStream {
    bytes: Vec<u8>,
    /// Received ranges, sorted and merged.
    have: Vec<(usize, usize)>,
}

impl CryptoStream {
    /// Places `data` at `offset`; false when it lies beyond [`CRYPTO_LIMIT_BYTES`].
    fn insert(&mut self, offset: u64, data: &[u8]) -> bool {
        let Some(end) = usize::try_from(offset).ok().and_then(|o| o.checked_add(data.len())) else { return false };
        if end > CRYPTO_LIMIT_BYTES {
            return false;
        }
        let start = end - data.len();
        if self.bytes.len() < end {
            self.bytes.resize(end, 0);
        }
        self.bytes[start..end].copy_from_slice(data);
        self.have.push((start, end));
        self.have.sort_unstable();
        let mut merged: Vec<(usize, usize)> = Vec::with_capacity(self.have.len());
        for &(s, e) in &self.have {
            match merged.last_mut() {
                Some(last) if s <= last.1 => last.1 = last.1.max(e),
                _ => merged.push((s, e)),
            }
        }
        self.have = merged;
        true
    }

    /// The bytes received without a hole from offset 0.
    fn contiguous(&self) -> &[u8] {
        match self.have.first() {
            Some(&(0, end)) => &self.bytes[..end],
            _ => &[],
        }
    }
}

pub(crate) struct QuicParser {
    /// Keys for the connection id they came from (the client's first Initial, or the one a
    /// Retry gave); boxed, the AES key schedules are large.
    keys: Option<Box<(u32, Vec<u8>, InitialKeys)>>,
    /// Boxed at the first CRYPTO frame: a UDP flow tried for QUIC and refused allocates nothing,
    /// and the reader stays small beside the others.
    crypto: Option<Box<CryptoStream>>,
    hello_done: bool,
}

impl QuicParser {
    pub(crate) fn new() -> Self {
        QuicParser { keys: None, crypto: None, hello_done: false }
    }

    pub(crate) fn segment(&mut self, segment: &Segment<'_>, facts: &mut Facts) -> Verdict {
        if facts.quic.is_none() {
            if !looks_like_quic(segment.bytes) {
                return Verdict::NotMine;
            }
            facts.quic = Some(Box::default());
        }
        let Some(quic) = facts.quic.as_deref_mut() else { return Verdict::Done };
        let mut rest = segment.bytes;
        // Each coalesced packet, until a short header or the datagram's end.
        while let [first, ..] = rest {
            if first & 0x80 == 0 {
                break; // short header: it runs to the end of the datagram
            }
            match self.packet(segment.dir, rest, quic, &mut facts.problems) {
                Some(len) => rest = rest.get(len..).unwrap_or(&[]),
                None => break,
            }
        }
        if self.hello_done && quic.server_version.is_some() {
            Verdict::Done
        } else {
            Verdict::More
        }
    }

    /// Reads one long-header packet at the start of `b`; returns its length, or None when the
    /// rest of the datagram cannot be split into packets.
    fn packet(&mut self, dir: usize, b: &[u8], quic: &mut QuicFacts, problems: &mut Problems) -> Option<usize> {
        let mut r = Reader::new(b);
        let first = r.u8().ok()?;
        let version = r.u16().ok().zip(r.u16().ok()).map(|(h, l)| (u32::from(h) << 16) | u32::from(l))?;
        if version == 0 {
            return None; // version negotiation: the rest is a list of versions
        }
        match dir {
            CLIENT => {
                quic.client_version.get_or_insert(version);
            }
            SERVER => {
                quic.server_version.get_or_insert(version);
            }
            _ => {}
        }
        if version != V1 && version != V2 {
            return None; // other versions' headers past the connection ids are their own
        }
        let dcid = r.vec8().ok().filter(|c| c.len() <= 20)?;
        r.vec8().ok().filter(|c| c.len() <= 20)?; // source connection id
        let ty = packet_type(version, first);
        if ty == PacketType::ZeroRtt && dir == CLIENT {
            quic.zero_rtt = true;
        }
        match ty {
            PacketType::Retry => {
                // The client's next Initial goes to the Retry's source id, keyed from it.
                self.keys = None;
                self.crypto = None;
                return None;
            }
            PacketType::Initial => {
                let token_len = varint(&mut r)?;
                r.take(usize::try_from(token_len).ok()?).ok()?;
            }
            PacketType::ZeroRtt | PacketType::Handshake => {}
        }
        let length = usize::try_from(varint(&mut r)?).ok()?;
        let pn_offset = b.len() - r.rest().len();
        let end = pn_offset.checked_add(length)?;
        // Cut by the capture (or a length past the datagram): nothing more to read.
        let packet = b.get(..end)?;
        if ty == PacketType::Initial && dir == CLIENT && !self.hello_done {
            self.client_initial(version, dcid, packet, pn_offset, quic, problems);
        }
        Some(end)
    }

    /// Decrypts a client Initial and takes its CRYPTO frames.
    fn client_initial(
        &mut self,
        version: u32,
        dcid: &[u8],
        packet: &[u8],
        pn_offset: usize,
        quic: &mut QuicFacts,
        problems: &mut Problems,
    ) {
        // RFC 9001 §5.2: the keys come from the client's first Initial's destination id (after
        // a Retry, from the id the Retry gave); later Initials may carry another id. When the
        // kept keys fail on an Initial with another id (the first was not seen), its own id's
        // keys are tried.
        let mut buf = packet.to_vec();
        let kept =
            self.keys.as_deref().filter(|(v, _, _)| *v == version).and_then(|(_, _, k)| k.open(&mut buf, pn_offset));
        let plain = match kept {
            Some(plain) => Some(plain),
            None if self.keys.as_deref().is_some_and(|(v, id, _)| *v == version && id.as_slice() == dcid) => None,
            None => {
                buf.copy_from_slice(packet);
                let keys = InitialKeys::client(version, dcid);
                let plain = keys.as_ref().and_then(|k| k.open(&mut buf, pn_offset));
                if let (Some(_), Some(k)) = (&plain, keys) {
                    self.keys = Some(Box::new((version, dcid.to_vec(), k)));
                }
                plain
            }
        };
        let Some(plain) = plain else {
            problems.quic_malformed += 1;
            return;
        };
        let Some(payload) = buf.get(plain) else { return };
        if self.frames(payload, problems).is_none() {
            problems.quic_malformed += 1;
        }
        let hello = self.crypto.as_deref().map_or(&[][..], CryptoStream::contiguous);
        let [1, a, b, c, ..] = *hello else {
            if hello.first().is_some_and(|&t| t != 1) {
                self.hello_done = true;
                problems.quic_malformed += 1;
            }
            return;
        };
        let len = u32::from_be_bytes([0, a, b, c]) as usize;
        let Some(body) = hello.get(4..4 + len) else {
            if 4 + len > CRYPTO_LIMIT_BYTES {
                self.hello_done = true;
                problems.over_limit += 1;
            }
            return;
        };
        self.hello_done = true;
        match ClientHello::parse(body) {
            Ok(h) => {
                tls::fill_client_hello(&h, &mut quic.tls, true);
                quic.ech = h.ech;
                quic.user_agent = h.quic_params.and_then(google_user_agent);
            }
            Err(_) => problems.quic_malformed += 1,
        }
        self.crypto = None;
    }

    /// Walks an Initial's frames (RFC 9000 §17.2.2: PADDING, PING, ACK, CRYPTO,
    /// CONNECTION_CLOSE), keeping CRYPTO data. None: a frame that cannot be in an Initial or
    /// does not parse.
    fn frames(&mut self, payload: &[u8], problems: &mut Problems) -> Option<()> {
        let mut r = Reader::new(payload);
        while !r.is_empty() {
            match varint(&mut r)? {
                0x00 | 0x01 => {}
                ty @ (0x02 | 0x03) => {
                    varint(&mut r)?; // largest acknowledged
                    varint(&mut r)?; // delay
                    let ranges = varint(&mut r)?;
                    varint(&mut r)?; // first range
                    for _ in 0..ranges {
                        varint(&mut r)?;
                        varint(&mut r)?;
                    }
                    if ty == 0x03 {
                        for _ in 0..3 {
                            varint(&mut r)?;
                        }
                    }
                }
                0x06 => {
                    let offset = varint(&mut r)?;
                    let len = usize::try_from(varint(&mut r)?).ok()?;
                    let data = r.take(len).ok()?;
                    if !self.crypto.get_or_insert_with(Default::default).insert(offset, data) {
                        problems.over_limit += 1;
                        self.hello_done = true;
                        return Some(());
                    }
                }
                ty @ (0x1c | 0x1d) => {
                    varint(&mut r)?; // error code
                    if ty == 0x1c {
                        varint(&mut r)?; // frame type
                    }
                    let len = usize::try_from(varint(&mut r)?).ok()?;
                    r.take(len).ok()?;
                }
                _ => return None,
            }
        }
        Some(())
    }
}

/// The google_user_agent transport parameter's value (RFC 9000 §18: id, length, value).
fn google_user_agent(params: &[u8]) -> Option<String> {
    let mut r = Reader::new(params);
    while !r.is_empty() {
        let id = varint(&mut r)?;
        let len = usize::try_from(varint(&mut r)?).ok()?;
        let value = r.take(len).ok()?;
        if id == TP_GOOGLE_USER_AGENT {
            return Some(String::from_utf8_lossy(value).into_owned());
        }
    }
    None
}

#[cfg(test)]
pub(crate) mod tests;
