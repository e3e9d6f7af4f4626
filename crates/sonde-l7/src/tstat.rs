//! Tstat 3.3's reading of a TCP flow's application, for `--layout tstat` only.
//!
//! Tstat does not put a TCP stream back in order: its classifier (`tcpL7_flow_stat` in its
//! tcpL7.c) and its HTTP counter (`http_flow_stat`, http.c) look at each packet's payload as it
//! comes, its first bytes most of all, and keep a small state per flow. The columns they fill
//! (`con_t`, `http_t`, the HTTP counts, status and host name, the TLS names, NPN/ALPN bits,
//! session bits, versions, handshake and application-data times and bytes) follow from what
//! the packets start with, so sonde reads them the same way here: [`TstatL7::packet`] takes one
//! packet's captured payload (or its first bytes), in capture order, retransmissions included,
//! and updates [`TstatL7`], which is both the state and the facts. The rules are Tstat's, in
//! sonde's words (docs/tstat-layout.md); a few that look like slips in Tstat are kept, as the
//! layout's point is to print what Tstat prints:
//!
//! * the certificate's name is the first `CN` attribute in the packet that carries the
//!   ServerHello whose value looks like a domain name (`[A-Za-z0-9]+\.[A-Za-z0-9]{2,24}\.?$`),
//!   searched in that packet's bytes only (a certificate in a later segment is not seen), and
//!   read again from a later server packet starting with a Certificate record only if one was
//!   found already;
//! * after a ClientHello, any packet but the ServerHello that comes past the flow's 10th
//!   packet (pure ACKs included) sends the flow back to "unknown": its ServerHello is then not
//!   looked for, and the flow is not TLS for Tstat;
//! * the application-data byte count is the direction's highest sequence number so far minus
//!   its ISN minus the packet's payload: the stream offset of the first application-data record
//!   plus one (the SYN's sequence number).
//!
//! Nothing here is computed unless the session was made with Tstat's reading on (the flow
//! layer does so only when the Tstat layout is the output). No input panics; the state is a
//! fixed size plus three names of at most 80 bytes.

use crate::{Dir, CLIENT, SERVER};

/// Tstat's `con_t` bits this reading sets (its protocol.h).
pub const CON_HTTP: u32 = 1;
pub const CON_SMTP: u32 = 1024;
pub const CON_POP3: u32 = 2048;
pub const CON_IMAP: u32 = 4096;
pub const CON_TLS: u32 = 8192;
pub const CON_SSH: u32 = 32768;
/// eMule's obfuscated protocol, by sequences of segment sizes.
pub const CON_OBF: u32 = 16384;
/// BitTorrent's Message Stream Encryption, by its first messages' sizes and their entropy.
pub const CON_MSE: u32 = 131072;

/// Tstat's NPN/ALPN bits (`enum npnalpn`, struct.h).
mod bits {
    pub(super) const NPN_EMPTY: u8 = 1;
    pub(super) const NPN_HTTP: u8 = 2;
    pub(super) const NPN_SPDY: u8 = 4;
    pub(super) const NPN_H2: u8 = 8;
    pub(super) const ALPN_EMPTY: u8 = 16;
    pub(super) const ALPN_HTTP: u8 = 32;
    pub(super) const ALPN_SPDY: u8 = 64;
    pub(super) const ALPN_H2: u8 = 128;
}

/// Tstat's packet limits (its tcpL7.h), counted on the flow's packets of both directions.
const MAX_PACKETS_CON: u64 = 50;
const MAX_UNKNOWN_PACKETS: u64 = 40;
const MAX_HTTP_COMMAND_PACKETS: u64 = 20;
const MAX_SSL_HANDSHAKE_PACKETS: u64 = 10;

/// Tstat's entropy test (its param.h): the first bytes of the flow's first packets, and the
/// entropy in bits both nibbles must pass.
const ENTROPY_SAMPLE: usize = 60;
const ENTROPY_PACKETS: u8 = 4;
const ENTROPY_THRESHOLD: f64 = 3.7;

/// Tstat keeps names in buffers of 80 bytes: 79 characters.
const NAME_MAX: usize = 79;

/// TLS 1.3's HelloRetryRequest: the ServerHello's random is this (RFC 8446 §4.1.3).
const HRR_RANDOM: [u8; 32] = [
    0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11, 0xbe, 0x1d, 0x8c, 0x02, 0x1e, 0x65, 0xb8, 0x91, 0xc2, 0xa2, 0x11,
    0x16, 0x7a, 0xbb, 0x8c, 0x5e, 0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c,
];

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum State {
    #[default]
    Unknown,
    HttpCommand,
    HttpResponse,
    SslHandshake,
    SslData,
    SmtpOpening,
    Pop3Opening,
    ImapOpening,
    ImapCommand,
    SshServer,
    /// Tstat's IGNORE_FURTHER_PACKETS.
    Ignore,
}

/// One flow as Tstat's classifier and HTTP counter read it: the state and the facts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TstatL7 {
    state: State,
    /// `con_t`'s bits: [`CON_HTTP`], [`CON_TLS`].
    pub con_t: u32,
    /// The first request was a POST (Tstat's `http_data`: `http_t` is 2, else 1).
    pub http_post: bool,
    /// The first response's status as Tstat copies it: up to three digits (`000` if none).
    pub http_status: [u8; 3],
    pub http_status_len: u8,
    /// Packets starting with a request method (client), with `HTTP` (server).
    pub http_requests: u32,
    pub http_responses: u32,
    /// The first `Host:` header's value of a request packet.
    pub http_host: Option<Box<str>>,
    /// The ClientHello's server name, the certificate's name (see the module's rules).
    pub sni: Option<Box<str>>,
    pub scn: Option<Box<str>>,
    /// NPN/ALPN bits of the ClientHello and the ServerHello.
    pub npnalpn: [u8; 2],
    /// Bit 0: session id offered; 1: client PSK; 2: early data; 3: server PSK; 4: HelloRetry.
    pub session_bits: u8,
    /// The versions as Tstat lists them: the client's supported_versions (`0304,0303`) or its
    /// hello's version; the server's selected version or its hello's.
    pub versions: [Option<Box<str>>; 2],
    /// Per direction: the last packet before its first application-data record (Tstat's
    /// "last handshake"), the first application-data record's packet, and the bytes before it.
    pub before_data_ns: [u64; 2],
    pub data_ns: [Option<u64>; 2],
    pub data_bytes: [u64; 2],
    /// Per direction: the highest sequence number sent (a segment's end), to tell the bytes
    /// before a packet as Tstat does.
    max_end: [Option<u32>; 2],
    /// Per direction, Tstat's messages (split at PSH or FIN): the end of the last new data,
    /// where the last message ended, how many there were and the first two's sizes.
    seq: [u32; 2],
    msg_last_seq: [u32; 2],
    msg_count: [u32; 2],
    msg_size: [[u32; 2]; 2],
    /// Nibble counts of the flow's first payloads (high, low), and the packets counted.
    nibbles: Box<[[u32; 16]; 2]>,
    nibble_packets: u8,
    /// Tstat's eMule size sequences seen (bits: 11, 11 then 83, 22, 6).
    ed2k: u8,
}

/// One packet for [`TstatL7::packet`].
#[derive(Debug, Clone, Copy)]
pub struct TstatPacket<'a> {
    pub dir: Dir,
    pub ts_ns: u64,
    /// The captured payload (or its first bytes).
    pub data: &'a [u8],
    /// The payload's length on the wire.
    pub payload_len: u32,
    /// The TCP sequence number of the first byte, and the direction's ISN (its SYN's).
    pub seq: u32,
    pub isn: Option<u32>,
    /// The flow's packets so far, this one included, both directions, pure ACKs included.
    pub flow_packets: u64,
    /// The segment's ACK, PSH and FIN flags.
    pub ack: bool,
    pub push: bool,
    pub fin: bool,
}

impl TstatL7 {
    /// Reads one packet with payload.
    pub fn packet(&mut self, p: &TstatPacket<'_>) {
        let d = p.dir.min(SERVER);
        if p.payload_len == 0 {
            return;
        }
        // Tstat's highest sequence number is updated by the packet before its classifier runs.
        let end = p.seq.wrapping_add(p.payload_len);
        match self.max_end[d] {
            Some(m) if (end.wrapping_sub(m) as i32) <= 0 => {}
            _ => self.max_end[d] = Some(end),
        }
        // Tstat's `seq`: the end of the last segment that was not a retransmission.
        if end.wrapping_sub(self.seq[d]) as i32 > 0 || self.seq[d] == 0 {
            self.seq[d] = end;
        }
        if p.ack && (p.push || p.fin) && self.msg_last_seq[d] < self.seq[d] {
            let size = if self.msg_last_seq[d] == 0 {
                self.seq[d].wrapping_sub(p.isn.unwrap_or(0)).wrapping_sub(1)
            } else {
                self.seq[d].wrapping_sub(self.msg_last_seq[d])
            };
            if let Some(slot) = self.msg_size[d].get_mut(self.msg_count[d] as usize) {
                *slot = size;
            }
            if size > 0 {
                self.msg_count[d] = self.msg_count[d].saturating_add(1);
            }
            self.msg_last_seq[d] = self.seq[d];
        }
        if p.data.is_empty() {
            return;
        }
        self.http_count(d, p.data);
        self.classify(d, p);
    }

    /// Tstat's ed2k_obfuscate_check: segments (ACK and PSH) of 11, 83 and 55 bytes, or 11 and
    /// 55, 22 and 18, 6 and 46, in that order, make the flow eMule's obfuscated protocol.
    fn ed2k_check(&mut self, len: u32) {
        const S11: u8 = 1;
        const S11_83: u8 = 2;
        const S22: u8 = 4;
        const S6: u8 = 8;
        let obf = match len {
            11 => {
                self.ed2k |= S11;
                false
            }
            83 => {
                if self.ed2k & S11 != 0 {
                    self.ed2k |= S11_83;
                }
                false
            }
            55 => self.ed2k & (S11 | S11_83) != 0,
            22 => {
                self.ed2k |= S22;
                false
            }
            18 => self.ed2k & S22 != 0,
            6 => {
                self.ed2k |= S6;
                false
            }
            46 => self.ed2k & S6 != 0,
            _ => false,
        };
        if obf {
            self.con_t |= CON_OBF;
        }
    }

    /// Tstat's nibble counts over the first bytes of the flow's first payloads.
    fn count_nibbles(&mut self, b: &[u8]) {
        if self.nibble_packets >= ENTROPY_PACKETS {
            return;
        }
        for &c in &b[..b.len().min(ENTROPY_SAMPLE)] {
            self.nibbles[0][usize::from(c >> 4)] += 1;
            self.nibbles[1][usize::from(c & 0x0f)] += 1;
        }
        self.nibble_packets += 1;
    }

    /// Tstat's mse_protocol_check: the first message of each direction (or the first two
    /// together) of 96 to 608 bytes, and both nibbles' entropy above 3.7 bits.
    fn mse_check(&mut self) {
        if self.msg_count[CLIENT] == 0 || self.msg_count[SERVER] == 0 {
            return;
        }
        let fits = |x: u64| (96..=608).contains(&x);
        let first = |d: Dir| u64::from(self.msg_size[d][0]);
        let two = |d: Dir| first(d) + u64::from(self.msg_size[d][1]);
        let server = fits(first(SERVER)) || fits(two(SERVER));
        if !((fits(first(CLIENT)) || fits(two(CLIENT))) && server) {
            return;
        }
        let entropy = |counts: &[u32; 16]| {
            let total: u32 = counts.iter().sum();
            if total == 0 {
                return 0.0;
            }
            let h: f64 = counts
                .iter()
                .filter(|&&n| n > 0)
                .map(|&n| {
                    let p = f64::from(n) / f64::from(total);
                    -p * p.ln()
                })
                .sum();
            h / std::f64::consts::LN_2
        };
        if entropy(&self.nibbles[0]) > ENTROPY_THRESHOLD && entropy(&self.nibbles[1]) > ENTROPY_THRESHOLD {
            self.con_t |= CON_MSE;
        }
    }

    /// Whether the classifier still reads packets (the HTTP counter reads them all).
    pub fn classifying(&self) -> bool {
        self.state != State::Ignore
    }

    /// Tstat's http_flow_stat: every packet starting with a request method (client) or
    /// `HTTP` (server) counts, retransmissions included; the first request's `Host:` is kept.
    fn http_count(&mut self, d: Dir, b: &[u8]) {
        if b.len() < 5 {
            return;
        }
        let head = &b[..4];
        let request = match head {
            b"GET " | b"POST" | b"HEAD" | b"PUT " => true,
            b"PATC" | b"DELE" | b"OPTI" => long_method(b),
            _ => false,
        };
        if request && d == CLIENT {
            self.http_requests = self.http_requests.saturating_add(1);
            if self.http_host.is_none() {
                self.http_host = host_header(b);
            }
        } else if head == b"HTTP" && d == SERVER {
            self.http_responses = self.http_responses.saturating_add(1);
        }
    }

    /// Tstat's tcpL7_flow_stat, for the states that give the columns sonde prints.
    fn classify(&mut self, d: Dir, p: &TstatPacket<'_>) {
        if self.state == State::Ignore {
            return;
        }
        let b = p.data;
        let n = p.flow_packets;
        self.count_nibbles(b);
        if p.ack && p.push {
            self.ed2k_check(p.payload_len);
        }
        if self.con_t == 0 {
            self.mse_check();
        }
        // At least 7 bytes: Tstat's `pdata + 6 <= plast`.
        let six = b.len() >= 7;
        match self.state {
            State::Unknown => {
                if b.len() < 5 {
                    return;
                }
                match &b[..4] {
                    b"GET " | b"POST" | b"HEAD" | b"PUT " if d == CLIENT => {
                        self.state = State::HttpCommand;
                        self.http_post = &b[..4] == b"POST";
                    }
                    b"PATC" | b"DELE" | b"OPTI" if d == CLIENT && long_method(b) => {
                        self.state = State::HttpCommand;
                    }
                    // Servers that speak first: SMTP's greeting, POP3's, IMAP's, SSH's version.
                    b"220 " if d == SERVER => self.state = State::SmtpOpening,
                    b"+OK " | b"-ERR" if d == SERVER => self.state = State::Pop3Opening,
                    b"* OK" if d == SERVER => self.state = State::ImapOpening,
                    b"SSH-" if d == SERVER && b.len() >= 8 && ssh_version(b) => self.state = State::SshServer,
                    // Tstat's other protocols (RTSP, messengers) are matched on these first
                    // four bytes before TLS is tried; sonde does not classify them, and a
                    // ClientHello does not start like them.
                    _ if d == CLIENT && six && self.client_hello(b, p.payload_len) => {
                        self.session_bits &= !1;
                        if b.len() >= 44 && b[43] != 0 {
                            self.session_bits |= 1;
                        }
                    }
                    _ => {
                        if n > MAX_UNKNOWN_PACKETS {
                            self.state = State::Ignore;
                        }
                    }
                }
            }
            State::HttpCommand => {
                if d == SERVER && b.len() >= 5 {
                    if &b[..4] == b"HTTP" {
                        self.con_t = (self.con_t | CON_HTTP) & !(CON_MSE | CON_OBF);
                        self.state = State::HttpResponse;
                        self.http_status = *b"000";
                        self.http_status_len = 3;
                        if b.len() >= 14 {
                            let digits = b[9..12].iter().take_while(|c| c.is_ascii_digit()).count();
                            if digits > 0 {
                                self.http_status[..digits].copy_from_slice(&b[9..9 + digits]);
                                self.http_status_len = digits as u8;
                            }
                        }
                    }
                    if n > MAX_HTTP_COMMAND_PACKETS {
                        self.state = State::Ignore;
                    }
                }
            }
            State::HttpResponse => {}
            State::SmtpOpening | State::Pop3Opening if d == CLIENT && b.len() >= 5 => {
                let bit = match (self.state, &b[..4]) {
                    (State::SmtpOpening, b"HELO" | b"EHLO" | b"helo" | b"ehlo") => CON_SMTP,
                    (State::Pop3Opening, b"USER" | b"QUIT" | b"APOP") => CON_POP3,
                    _ => 0,
                };
                if bit != 0 {
                    self.con_t = (self.con_t | bit) & !(CON_MSE | CON_OBF);
                    self.state = State::Ignore;
                }
                if n > MAX_HTTP_COMMAND_PACKETS {
                    self.state = State::Ignore;
                }
            }
            State::ImapOpening if d == CLIENT && six => {
                if imap_tag(b) {
                    self.state = State::ImapCommand;
                } else if n > MAX_HTTP_COMMAND_PACKETS {
                    self.state = State::Ignore;
                }
            }
            State::ImapCommand if d == SERVER && six => {
                if b.starts_with(b"* ") || imap_tag(b) {
                    self.con_t = (self.con_t | CON_IMAP) & !(CON_MSE | CON_OBF);
                    self.state = State::Ignore;
                } else if n > MAX_HTTP_COMMAND_PACKETS {
                    self.state = State::Ignore;
                }
            }
            State::SshServer if d == CLIENT && b.len() >= 8 => {
                if b.starts_with(b"SSH-") && ssh_version(b) {
                    self.con_t = (self.con_t | CON_SSH) & !(CON_MSE | CON_OBF);
                    self.state = State::Ignore;
                } else if n > MAX_HTTP_COMMAND_PACKETS {
                    self.state = State::Ignore;
                }
            }
            State::SmtpOpening | State::Pop3Opening | State::ImapOpening | State::ImapCommand | State::SshServer => {}
            State::SslHandshake => {
                if d == SERVER && six && self.server_hello(b, p.payload_len) {
                    self.certificate_name(b);
                    self.con_t = (self.con_t | CON_TLS) & !(CON_MSE | CON_OBF);
                    self.state = State::SslData;
                } else if n > MAX_SSL_HANDSHAKE_PACKETS {
                    self.state = State::Unknown;
                }
            }
            State::SslData => {
                if six {
                    if d == SERVER && self.scn.is_some() && b[0] == 0x16 && b[5] == 0x0b {
                        self.certificate_name(b);
                    }
                    if self.data_ns[d].is_none() && b[0] == 0x17 && b[1] == 3 && b[2] <= 3 {
                        self.data_ns[d] = Some(p.ts_ns);
                        let isn = p.isn.unwrap_or(0);
                        let max = self.max_end[d].unwrap_or(0);
                        self.data_bytes[d] = u64::from(max.wrapping_sub(isn).wrapping_sub(p.payload_len));
                    }
                }
                if self.data_ns[CLIENT].is_some() && self.data_ns[SERVER].is_some() {
                    self.state = State::Ignore;
                }
            }
            State::Ignore => {}
        }
        if n > MAX_PACKETS_CON {
            self.state = State::Ignore;
        }
        if self.state != State::Ignore && self.data_ns[d].is_none() {
            self.before_data_ns[d] = p.ts_ns;
        }
    }

    /// Tstat's ssl_client_check: a ClientHello (SSL 3 to TLS 1.x) at the packet's start, read
    /// within the packet and the hello's record; or an SSL 2 ClientHello. True: TLS-like.
    fn client_hello(&mut self, b: &[u8], payload_len: u32) -> bool {
        let at = |i: usize| b.get(i).copied().unwrap_or(0);
        let u16_at = |i: usize| u16::from_be_bytes([at(i), at(i + 1)]) as usize;
        if b[0] == 0x16 && b[1] == 3 && b[2] <= 3 && b[3] <= 0x39 && b[5] == 1 {
            self.state = State::SslHandshake;
            if self.versions[CLIENT].is_none() {
                self.versions[CLIENT] = Some(format!("{:04x}", u16_at(9)).into());
            }
            let limit = b.len().min(5 + u16_at(3));
            let Some(mut idx) = skip_hello_prefix(b, limit) else { return true };
            if idx + 2 > limit {
                return true;
            }
            let all_ext = u16_at(idx);
            idx += 2;
            let mut ii = 0usize;
            while ii < all_ext && idx + ii < limit {
                if idx + ii + 2 > limit {
                    return true;
                }
                let ty = u16_at(idx + ii);
                ii += 2;
                if idx + ii + 2 > limit {
                    return true;
                }
                let mut len = u16_at(idx + ii);
                ii += 2;
                match ty {
                    0x0000 => {
                        if idx + ii + 2 > limit {
                            return true;
                        }
                        let next = ii + len;
                        ii += 3;
                        if idx + ii + 2 > limit {
                            return true;
                        }
                        let name_len = u16_at(idx + ii);
                        ii += 2;
                        if idx + ii > limit {
                            return true;
                        }
                        let start = idx + ii;
                        let stop = start + name_len.min(NAME_MAX).min(limit - start);
                        if let Some(name) = domain_like(&b[start..stop]) {
                            self.sni = Some(name);
                        }
                        ii = next;
                    }
                    0x3374 => {
                        self.npnalpn[CLIENT] |=
                            if len == 0 { bits::NPN_EMPTY } else { protocols(b, idx + ii, limit, len, true) };
                        ii += len;
                    }
                    0x0010 => {
                        if len == 0 {
                            self.npnalpn[CLIENT] |= bits::ALPN_EMPTY;
                        } else {
                            if idx + ii + 2 > limit {
                                return true;
                            }
                            len = u16_at(idx + ii);
                            ii += 2;
                            self.npnalpn[CLIENT] |= protocols(b, idx + ii, limit, len, false);
                        }
                        ii += len;
                    }
                    0x002b => {
                        if len != 0 {
                            if idx + ii + 2 >= limit {
                                return true;
                            }
                            // Tstat reads the list's length as a C char.
                            let list = at(idx + ii) as i8;
                            if list < 0 || idx + ii + 1 + list as usize >= limit {
                                return true;
                            }
                            let mut s = String::new();
                            for j in (0..list as usize).step_by(2) {
                                let v = u16_at(idx + ii + 1 + j);
                                if j == 0 {
                                    s = format!("{v:04x}");
                                } else if s.len() < 74 {
                                    s.push_str(&format!(",{v:04x}"));
                                }
                            }
                            self.versions[CLIENT] = Some(s.into());
                        }
                        ii += len;
                    }
                    0x0029 => {
                        self.session_bits |= 2;
                        ii += len;
                    }
                    0x002a => {
                        self.session_bits |= 4;
                        ii += len;
                    }
                    _ => ii += len,
                }
            }
            return true;
        }
        if b[2] == 1 && b[3] == 3 && b[4] <= 3 {
            // SSL 2: the record length in the first two bytes is the rest of the payload.
            let record = (usize::from(b[0] & 0x7f) << 8) | usize::from(b[1]);
            if record + 2 == payload_len as usize {
                self.state = State::SslHandshake;
                return true;
            }
        }
        false
    }

    /// Tstat's ssl_server_check: a ServerHello at the packet's start.
    fn server_hello(&mut self, b: &[u8], payload_len: u32) -> bool {
        if !(payload_len >= 5 && b[0] == 0x16 && b[1] == 3 && b[2] <= 3 && b[3] <= 0x39 && b[5] == 2) {
            return false;
        }
        let at = |i: usize| b.get(i).copied().unwrap_or(0);
        let u16_at = |i: usize| u16::from_be_bytes([at(i), at(i + 1)]) as usize;
        if self.versions[SERVER].is_none() {
            self.versions[SERVER] = Some(format!("{:04x}", u16_at(9)).into());
        }
        if payload_len > 43 && b.get(11..43) == Some(&HRR_RANDOM[..]) {
            self.session_bits |= 16;
        }
        let limit = b.len().min(5 + u16_at(3));
        let mut idx = 43usize;
        if idx >= payload_len as usize {
            return true;
        }
        // The session id (its length as a C char).
        idx += if at(idx) == 0 { 1 } else { (at(idx) as i8 as isize + 1).max(0) as usize };
        if idx + 2 >= limit {
            return true;
        }
        idx += 2;
        idx += if at(idx) != 0 { u16_at(idx) + 2 } else { 1 };
        if idx + 2 >= limit {
            return true;
        }
        let all_ext = u16_at(idx);
        idx += 2;
        let mut ii = 0usize;
        while ii < all_ext && idx < limit {
            let ty = u16_at(idx + ii);
            ii += 2;
            if idx + ii + 2 >= limit {
                break;
            }
            let mut len = u16_at(idx + ii);
            ii += 2;
            match ty {
                0x3374 if idx + ii < limit => {
                    self.npnalpn[SERVER] |= protocols(b, idx + ii, limit, len, true);
                }
                0x0010 => {
                    if idx + ii + 2 >= limit {
                        return true;
                    }
                    len = u16_at(idx + ii);
                    ii += 2;
                    self.npnalpn[SERVER] |= protocols(b, idx + ii, limit, len, false);
                }
                0x002b if len != 0 => {
                    if idx + ii + 1 >= limit {
                        return true;
                    }
                    self.versions[SERVER] = Some(format!("{:04x}", u16_at(idx + ii)).into());
                }
                0x0029 => self.session_bits |= 8,
                _ => {}
            }
            ii += len;
        }
        true
    }

    /// Tstat's ssl_certificate_check: the first `CN` attribute (OID 2.5.4.3) in the packet whose
    /// value looks like a domain name.
    fn certificate_name(&mut self, b: &[u8]) {
        if b.len() < 30 {
            return;
        }
        for i in 0..b.len() - 7 {
            if b[i..i + 5] != [0x06, 0x03, 0x55, 0x04, 0x03] {
                continue;
            }
            // The value's length as a C char: a long form (0x81…) reads as negative, no name.
            let max = (b[i + 6] as i8).max(0) as usize;
            let start = i + 7;
            let stop = (start + max.min(NAME_MAX)).min(b.len());
            if let Some(name) = b.get(start..stop).and_then(domain_like) {
                self.scn = Some(name);
                return;
            }
        }
    }
}

/// The index of a ClientHello's extensions' length field, after its session id, cipher suites
/// and compression methods, as Tstat walks them (lengths of one byte read as C chars); None
/// when the walk leaves `limit`.
fn skip_hello_prefix(b: &[u8], limit: usize) -> Option<usize> {
    let at = |i: usize| b.get(i).copied().unwrap_or(0);
    let mut idx = 43usize;
    if idx > limit {
        return None;
    }
    idx = idx.checked_add_signed(1 + isize::from(at(idx) as i8))?;
    if idx + 2 > limit {
        return None;
    }
    idx += 2 + usize::from(u16::from_be_bytes([at(idx), at(idx + 1)]));
    if idx > limit {
        return None;
    }
    idx = idx.checked_add_signed(1 + isize::from(at(idx) as i8))?;
    Some(idx)
}

/// Tstat's NPN/ALPN list reader: the bits of the protocols named in `len` bytes at `from`
/// (`npn`: NPN's bits, else ALPN's); an empty name makes the result the "empty" bit alone.
fn protocols(b: &[u8], from: usize, limit: usize, len: usize, npn: bool) -> u8 {
    let at = |i: usize| b.get(i).copied().unwrap_or(0);
    let mut res = 0u8;
    let mut i = 0usize;
    let mut safety = 20;
    while i < len && from + i < limit && safety > 0 {
        let l = usize::from(at(from + i));
        safety -= 1;
        if l == 0 {
            res = if npn { bits::NPN_EMPTY } else { bits::ALPN_EMPTY };
            break;
        }
        i += 1;
        let p = from + i;
        if p + l > limit {
            break;
        }
        let starts = |s: &[u8]| s.iter().enumerate().all(|(k, c)| at(p + k) == *c);
        if starts(b"spdy/") {
            res |= if npn { bits::NPN_SPDY } else { bits::ALPN_SPDY };
        } else if at(p) == b'h' && at(p + 1) == b'2' && (at(p - 1) == 2 || at(p + 2) == b'-') {
            res |= if npn { bits::NPN_H2 } else { bits::ALPN_H2 };
        } else if starts(b"http/") {
            res |= if npn { bits::NPN_HTTP } else { bits::ALPN_HTTP };
        }
        i += l;
    }
    res
}

/// Tstat's SSH version check: `SSH-1.` or `SSH-2.` and a digit.
fn ssh_version(b: &[u8]) -> bool {
    matches!(b.get(4..7), Some([b'1' | b'2', b'.', b'0'..=b'9']))
}

/// Tstat's IMAP tag: a space after a letter or digit within the first six bytes.
fn imap_tag(b: &[u8]) -> bool {
    (1..6).any(|i| b.get(i) == Some(&b' ') && b[i - 1].is_ascii_alphanumeric())
}

/// DELETE, PATCH and OPTIONS count only with the whole method and a space (Tstat:
/// `verify_long_method`).
fn long_method(b: &[u8]) -> bool {
    b.starts_with(b"DELETE ") || b.starts_with(b"PATCH ") || b.starts_with(b"OPTIONS ")
}

/// Tstat's `Host: ([^[:cntrl:][:space:]]+)` on the packet as a C string (up to its first NUL):
/// the value after the first `Host: ` followed by at least one such character.
fn host_header(b: &[u8]) -> Option<Box<str>> {
    let b = &b[..b.iter().position(|&c| c == 0).unwrap_or(b.len())];
    let plain = |c: &u8| !(c.is_ascii_control() || c.is_ascii_whitespace() || *c == 0x0b);
    let mut from = 0;
    while let Some(at) = b[from..].windows(6).position(|w| w == b"Host: ") {
        let start = from + at + 6;
        let len = b[start..].iter().take_while(|c| plain(c)).count();
        if len > 0 {
            // Tstat's buffer for it holds 255 characters.
            let v = &b[start..start + len.min(255)];
            return Some(String::from_utf8_lossy(v).into());
        }
        from = start;
    }
    None
}

/// A name that passes Tstat's check (`[A-Za-z0-9]+\.[A-Za-z0-9]{2,24}\.?$` on it as a C
/// string, and at least one character neither a control nor a space): the name (up to a NUL).
fn domain_like(raw: &[u8]) -> Option<Box<str>> {
    let s = &raw[..raw.iter().position(|&c| c == 0).unwrap_or(raw.len())];
    let t = s.strip_suffix(b".").unwrap_or(s);
    let label = t.iter().rev().take_while(|c| c.is_ascii_alphanumeric()).count();
    if !(2..=24).contains(&label) {
        return None;
    }
    let rest = &t[..t.len() - label];
    let ok = rest.len() >= 2 && rest[rest.len() - 1] == b'.' && rest[rest.len() - 2].is_ascii_alphanumeric();
    ok.then(|| String::from_utf8_lossy(s).into())
}

#[cfg(test)]
mod tests;
