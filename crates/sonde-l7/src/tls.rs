//! TLS over TCP: the record layer of each direction, the hellos and the server's certificate.
//!
//! A flow is TLS when its first bytes are a handshake record (content type 22, version 3.x).
//! Each direction's records are walked as bytes arrive, without holding them: a record header
//! (5 bytes) may straddle segments, application data is counted and skipped, and only handshake
//! bytes are kept, until a whole handshake message is there (a message may span records and
//! segments). At most [`HANDSHAKE_LIMIT_BYTES`] are buffered per direction: a longer message
//! counts `Problems::over_limit` and that direction's handshake is not read further (its
//! records still are). The session's own limit (`STREAM_LIMIT_BYTES` per direction) comes
//! first in practice: a certificate chain longer than that is not seen whole, so the first
//! certificate is read as soon as it is complete, before the rest of the chain arrives.
//!
//! Read: the ClientHello (SNI, ALPN, versions, JA3, JA4, resumption), the ServerHello
//! (version, ALPN, JA3S), the first certificate's subject CN (TLS ≤ 1.2: TLS 1.3 encrypts it),
//! and per direction the time of the last handshake record, of the first application-data
//! record and the application data bytes. Handshake records after a direction's
//! ChangeCipherSpec are encrypted (TLS ≤ 1.2 Finished) and only timed. In TLS 1.3 the
//! encrypted handshake travels in application-data records (RFC 8446 §5.2), so there the first
//! "application data" record is the server's EncryptedExtensions flight and the client's
//! Finished: the record layer cannot tell them apart.
//!
//! The parser asks for more bytes as long as a direction can still be walked (the session's
//! limits end it), and says `Done` once neither can: application data bytes are counted over
//! everything the flow layer hands over.

use crate::hello::{ClientHello, Reader, ServerHello, TLS13};
use crate::{cert, ja, Dir, Facts, Segment, TlsFacts, Verdict, CLIENT, SERVER};

/// Handshake bytes buffered per direction, at most: a certificate chain fits in 64 KiB.
pub const HANDSHAKE_LIMIT_BYTES: usize = 64 * 1024;

/// RFC 8446 §5.1/§5.2 and RFC 5246 §6.2.3: a record body is at most 2^14 + 2048 bytes.
const RECORD_MAX_BYTES: u16 = (1 << 14) + 2048;

mod content {
    pub(super) const CHANGE_CIPHER_SPEC: u8 = 20;
    pub(super) const ALERT: u8 = 21;
    pub(super) const HANDSHAKE: u8 = 22;
    pub(super) const APPLICATION_DATA: u8 = 23;
    pub(super) const HEARTBEAT: u8 = 24;
}

mod handshake {
    pub(super) const CLIENT_HELLO: u8 = 1;
    pub(super) const SERVER_HELLO: u8 = 2;
    pub(super) const CERTIFICATE: u8 = 11;
}

/// Whether `b` starts like a TLS handshake record: type 22, version 3.0 to 3.4 (RFC 8446
/// §5.1: legacy_record_version; 3.0 is SSL 3). A first segment of one or two bytes that could
/// begin one is taken too: the record header is completed from the next.
pub(crate) fn looks_like_tls(b: &[u8]) -> bool {
    matches!(b, [content::HANDSHAKE] | [content::HANDSHAKE, 3] | [content::HANDSHAKE, 3, 0..=4, ..])
}

/// One direction's place in its record stream.
#[derive(Debug, Default)]
struct Direction {
    /// The current record header, while it is incomplete.
    header: [u8; 5],
    header_len: u8,
    /// Content type of the record being read, and its body bytes still to come.
    content_type: u8,
    body_left: u16,
    /// Handshake bytes not yet consumed: the start of an incomplete message.
    handshake: Pending,
    /// Handshake messages are no longer read (encrypted, over the limit, or malformed).
    handshake_closed: bool,
    /// The record stream is lost (malformed header): nothing more is read.
    stopped: bool,
}

pub(crate) struct TlsParser {
    dirs: [Direction; 2],
    client_hello_seen: bool,
    /// A final ServerHello was read (not a HelloRetryRequest).
    server_hello_seen: bool,
    certificate_seen: bool,
}

impl TlsParser {
    pub(crate) fn new() -> Self {
        TlsParser {
            dirs: Default::default(),
            client_hello_seen: false,
            server_hello_seen: false,
            certificate_seen: false,
        }
    }

    pub(crate) fn segment(&mut self, segment: &Segment<'_>, facts: &mut Facts) -> Verdict {
        let d = segment.dir;
        let started = self.dirs.iter().any(|x| x.header_len > 0 || x.content_type != 0);
        if !started && !looks_like_tls(segment.bytes) {
            return Verdict::NotMine;
        }
        if d > SERVER {
            return Verdict::More;
        }
        let tls = facts.tls.get_or_insert_with(Default::default);
        let mut bytes = segment.bytes;
        while !bytes.is_empty() && !self.dirs[d].stopped {
            let dir = &mut self.dirs[d];
            if dir.body_left == 0 {
                // A record header, perhaps split across segments.
                let at = usize::from(dir.header_len);
                let n = (dir.header.len() - at).min(bytes.len());
                dir.header[at..at + n].copy_from_slice(&bytes[..n]);
                dir.header_len += n as u8;
                bytes = &bytes[n..];
                if usize::from(dir.header_len) < dir.header.len() {
                    break;
                }
                dir.header_len = 0;
                let [ty, major, _, hi, lo] = dir.header;
                let len = u16::from_be_bytes([hi, lo]);
                if !(content::CHANGE_CIPHER_SPEC..=content::HEARTBEAT).contains(&ty)
                    || major != 3
                    || len > RECORD_MAX_BYTES
                {
                    dir.stopped = true;
                    facts.problems.tls_malformed += 1;
                    break;
                }
                dir.content_type = ty;
                dir.body_left = len;
                record_start(tls, dir, d, ty, segment.ts_ns);
                continue;
            }
            let n = usize::from(dir.body_left).min(bytes.len());
            let (body, rest) = bytes.split_at(n);
            bytes = rest;
            dir.body_left -= n as u16;
            match dir.content_type {
                content::APPLICATION_DATA => tls.appdata_bytes[d] = tls.appdata_bytes[d].saturating_add(n as u64),
                content::HANDSHAKE if !dir.handshake_closed => {
                    if dir.handshake.len() + body.len() > HANDSHAKE_LIMIT_BYTES {
                        facts.problems.over_limit += 1;
                        close_handshake(dir);
                    } else if dir.handshake.is_empty() {
                        // The common case: whole messages read in place, only a message's
                        // incomplete start kept.
                        let used = self.read_messages(d, body, tls, &mut facts.problems);
                        let dir = &mut self.dirs[d];
                        if !dir.handshake_closed {
                            dir.handshake.extend(&body[used..]);
                        }
                    } else {
                        dir.handshake.extend(body);
                        let mut buf = dir.handshake.take();
                        let used = self.read_messages(d, &buf, tls, &mut facts.problems);
                        let dir = &mut self.dirs[d];
                        // Emptied, the buffer goes: an open flow keeps no ClientHello's room.
                        if !dir.handshake_closed && used < buf.len() {
                            buf.drain(..used);
                            dir.handshake = Pending(Some(Box::new(buf)));
                        }
                    }
                }
                _ => {}
            }
        }
        if self.dirs.iter().all(|x| x.stopped) {
            Verdict::Done
        } else {
            Verdict::More
        }
    }

    /// Reads the complete handshake messages at the start of `all` (direction `d`'s handshake
    /// bytes not yet consumed); returns the bytes they took. The direction's handshake may close
    /// meanwhile (its buffer is then dropped, and what is left of `all` with it).
    fn read_messages(&mut self, d: Dir, all: &[u8], tls: &mut TlsFacts, problems: &mut crate::Problems) -> usize {
        let mut used = 0;
        loop {
            let dir = &mut self.dirs[d];
            let buf = &all[used..];
            let [ty, a, b, c, ..] = buf[..] else { return used };
            let len = u32::from_be_bytes([0, a, b, c]) as usize;
            if len > HANDSHAKE_LIMIT_BYTES - 4 {
                problems.over_limit += 1;
                close_handshake(dir);
                return used;
            }
            let Some(body) = buf.get(4..4 + len) else {
                // Incomplete: the first certificate may already be whole.
                if ty == handshake::CERTIFICATE && d == SERVER && !self.certificate_seen {
                    if let Some(cn) = first_certificate(&buf[4..]).and_then(cert::subject_common_name) {
                        tls.cert_subject = Some(cn.into());
                        self.certificate_seen = true;
                    }
                }
                return used;
            };
            let malformed = match (d, ty) {
                (CLIENT, handshake::CLIENT_HELLO) if !self.client_hello_seen => {
                    self.client_hello_seen = true;
                    match ClientHello::parse(body) {
                        Ok(h) => {
                            fill_client_hello(&h, tls, false);
                            false
                        }
                        Err(_) => true,
                    }
                }
                (SERVER, handshake::SERVER_HELLO) if !self.server_hello_seen => match ServerHello::parse(body) {
                    Ok(h) => {
                        self.server_hello_seen = !h.hello_retry;
                        fill_server_hello(&h, tls);
                        false
                    }
                    Err(_) => true,
                },
                (SERVER, handshake::CERTIFICATE) if !self.certificate_seen => {
                    self.certificate_seen = true;
                    // TLS 1.3's Certificate is encrypted; a clear one has TLS ≤ 1.2's layout.
                    if let Some(cn) = first_certificate(body).and_then(cert::subject_common_name) {
                        tls.cert_subject = Some(cn.into());
                    }
                    false
                }
                _ => false,
            };
            let dir = &mut self.dirs[d];
            if malformed {
                problems.tls_malformed += 1;
                close_handshake(dir);
                return used;
            }
            used += 4 + len;
            // RFC 8446 §2: after a TLS 1.3 ServerHello the server's handshake is encrypted.
            if d == SERVER && ty == handshake::SERVER_HELLO && self.server_hello_seen && tls.version == Some(TLS13) {
                close_handshake(dir);
                return used;
            }
        }
    }
}

/// Stops reading a direction's handshake messages (its records are still walked).
fn close_handshake(dir: &mut Direction) {
    dir.handshake_closed = true;
    dir.handshake = Pending::default();
}

/// A direction's handshake bytes kept across records: 8 bytes in the parser, the buffer only
/// while a message is incomplete (most directions never need one).
#[derive(Debug, Default)]
#[allow(clippy::box_collection)] // the point: 8 bytes inline where a `Vec` takes 24
struct Pending(Option<Box<Vec<u8>>>);

impl Pending {
    fn len(&self) -> usize {
        self.0.as_ref().map_or(0, |b| b.len())
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn extend(&mut self, bytes: &[u8]) {
        if !bytes.is_empty() {
            self.0.get_or_insert_with(Default::default).extend_from_slice(bytes);
        }
    }

    /// The bytes, leaving none.
    fn take(&mut self) -> Vec<u8> {
        self.0.take().map_or_else(Vec::new, |b| *b)
    }
}

/// At the start of a record: its times, and what a ChangeCipherSpec means.
fn record_start(tls: &mut TlsFacts, dir: &mut Direction, d: Dir, ty: u8, ts_ns: u64) {
    match ty {
        content::HANDSHAKE => tls.last_handshake_ns[d] = Some(ts_ns),
        content::APPLICATION_DATA => {
            tls.first_appdata_ns[d].get_or_insert(ts_ns);
        }
        // What follows in this direction is encrypted (RFC 5246 §7.1).
        content::CHANGE_CIPHER_SPEC => close_handshake(dir),
        content::ALERT | content::HEARTBEAT => {}
        _ => {}
    }
}

/// The first certificate of a TLS ≤ 1.2 Certificate message body (RFC 5246 §7.4.2: a
/// 3-byte-length list of 3-byte-length certificates); the list may be incomplete.
fn first_certificate(body: &[u8]) -> Option<&[u8]> {
    let mut r = Reader::new(body);
    r.take(3).ok()?;
    let len = r.take(3).ok()?;
    let len = u32::from_be_bytes([0, len[0], len[1], len[2]]) as usize;
    r.take(len).ok()
}

/// Fills the facts a ClientHello gives (over TCP, or in a QUIC Initial).
pub(crate) fn fill_client_hello(h: &ClientHello<'_>, tls: &mut TlsFacts, quic: bool) {
    tls.sni = h.sni.map(text);
    tls.alpn_offered = h.alpn.iter().map(|a| text(a)).collect();
    tls.client_version = Some(h.legacy_version);
    tls.versions_offered = h.versions_offered().into_boxed_slice();
    tls.resumption_offered = h.resumption_offered();
    tls.ja3 = Some(ja::ja3(h));
    tls.ja4 = Some(ja::ja4(h, quic));
}

/// A name from the wire as text (invalid UTF-8 replaced), no larger than it is.
fn text(bytes: &[u8]) -> Box<str> {
    String::from_utf8_lossy(bytes).into()
}

fn fill_server_hello(h: &ServerHello<'_>, tls: &mut TlsFacts) {
    tls.version = Some(h.version());
    tls.alpn = h.alpn.map(text);
    tls.ja3s = Some(ja::ja3s(h));
}

#[cfg(test)]
mod tests;
