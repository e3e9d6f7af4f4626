//! sonde-l7: what a flow carries above layer 4, read from its first packets.
//!
//! A [`Session`] sits beside one TCP or UDP flow's layer-4 state. The flow layer hands it the
//! payload of the flow's first packets ([`Session::on_payload`]); it puts TCP segments back in
//! order (no more than [`STREAM_LIMIT_BYTES`] per direction, nothing held across a gap),
//! recognises the protocol and lets that protocol's parser fill the flow's [`Facts`]: TLS
//! (SNI, ALPN, versions, JA3, JA4, the server certificate's name), QUIC Initials, HTTP/1.x, DNS,
//! RTP. It does no I/O, never reads the clock, and never panics on what it is given: a malformed
//! or cut message leaves its fact empty and is counted in [`Problems`].
//!
//! ```
//! use sonde_l7::{Session, Transport, CLIENT};
//! let mut s = Session::new(Transport::Tcp, 51000, 80);
//! let get = b"GET / HTTP/1.1\r\nHost: example.org\r\n\r\n";
//! s.on_payload(CLIENT, 1_000, Some(1), get, get.len() as u32);
//! assert_eq!(s.facts().http.as_ref().and_then(|h| h.host.as_deref()), Some("example.org"));
//! ```

mod cert;
mod community_id;
mod dn_hunter;
mod dns;
mod hello;
mod http;
mod ja;
mod label;
mod quic;
mod rtp;
mod stream;
mod tls;
mod tstat;
mod uid;

pub use community_id::{community_id, community_id_icmp, CommunityId};
pub use dn_hunter::DnsCache;
pub use dns::{dns_question_as_written, dns_response_addresses};
pub use ja::{Fingerprint, Ja3, Ja4};
pub use label::{label, ndpi_name};
pub use quic::CRYPTO_LIMIT_BYTES;
pub use stream::STREAM_LIMIT_BYTES;
pub use tls::HANDSHAKE_LIMIT_BYTES;
pub use tstat::{TstatL7, TstatPacket, CON_HTTP, CON_IMAP, CON_MSE, CON_OBF, CON_POP3, CON_SMTP, CON_SSH, CON_TLS};
pub use uid::{uid, Uid};

/// The direction of a payload: from the flow's client, or from its server.
pub type Dir = usize;
pub const CLIENT: Dir = 0;
pub const SERVER: Dir = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Tcp,
    Udp,
}

/// Everything learnt about one flow's application. Facts not seen stay `None`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Facts {
    pub tls: Option<Box<TlsFacts>>,
    pub quic: Option<Box<QuicFacts>>,
    pub http: Option<Box<HttpFacts>>,
    pub dns: Option<Box<DnsFacts>>,
    pub rtp: Option<Box<RtpFacts>>,
    /// DN-Hunter: the name the client resolved to the server's address before the flow began.
    /// Shared with DN-Hunter's cache and every flow it labels.
    pub resolved: Option<std::sync::Arc<Resolved>>,
    /// A TCP flow as Tstat's classifier reads it, packet by packet (`--layout tstat` only:
    /// [`Session::enable_tstat`]).
    pub tstat: Option<Box<TstatL7>>,
    /// What went wrong reading this flow's payload.
    pub problems: Problems,
}

/// A DNS answer that gave the client the server's address (Tstat's `fqdn`, `dns_rslv`).
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    /// The name asked for (lower case, no trailing dot).
    pub name: Box<str>,
    /// The DNS server that answered.
    pub resolver: std::net::IpAddr,
    /// Packet time of the answer.
    pub answer_ns: u64,
    /// Packet time of the client's last query to the resolver from the same port before the
    /// answer (Tstat's `req_tm`); 0: not kept (only the Tstat layout keeps it) or none seen.
    pub query_ns: u64,
}

/// TLS over TCP (and the TLS inside a QUIC Initial: `QuicFacts::tls`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TlsFacts {
    /// The ClientHello's server_name.
    pub sni: Option<Box<str>>,
    /// ALPN protocols the client offered, in its order.
    pub alpn_offered: Box<[Box<str>]>,
    /// The ALPN protocol the server selected (ServerHello, or EncryptedExtensions: unseen).
    pub alpn: Option<Box<str>>,
    /// The ClientHello's legacy_version (0x0303 for TLS 1.2 and 1.3).
    pub client_version: Option<u16>,
    /// The versions the client offered (supported_versions), GREASE removed.
    pub versions_offered: Box<[u16]>,
    /// The version the server chose (supported_versions, else the ServerHello's version).
    pub version: Option<u16>,
    /// JA3 (Salesforce): the MD5 hex of the ClientHello's fields.
    pub ja3: Option<Ja3>,
    /// JA3S: the MD5 hex of the ServerHello's fields.
    pub ja3s: Option<Ja3>,
    /// JA4 (FoxIO), e.g. `t13d1516h2_8daaf6152771_02713d6af862`.
    pub ja4: Option<Ja4>,
    /// The server certificate's subject common name (clear only up to TLS 1.2).
    pub cert_subject: Option<Box<str>>,
    /// Packet time of each side's last handshake record (Tstat's `c_last_handshakeT`).
    pub last_handshake_ns: [Option<u64>; 2],
    /// Packet time of each side's first application-data record (Tstat's `c_appdataT`).
    pub first_appdata_ns: [Option<u64>; 2],
    /// Bytes of application data records seen in each direction (Tstat's `c_appdataB`).
    pub appdata_bytes: [u64; 2],
    /// The ClientHello offered a session to resume (session id, or a ticket).
    pub resumption_offered: bool,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct QuicFacts {
    /// The version of the client's first Initial (0x00000001 v1, 0x6b3343cf v2, others kept).
    pub client_version: Option<u32>,
    /// The version of the server's first long-header packet.
    pub server_version: Option<u32>,
    /// What the client's Initial carried (SNI, ALPN, JA4 with `q`).
    pub tls: TlsFacts,
    /// A 0-RTT packet was seen from the client.
    pub zero_rtt: bool,
    /// The ClientHello carried encrypted_client_hello.
    pub ech: bool,
    /// The user agent from Google's QUIC transport parameter, when sent.
    pub user_agent: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct HttpFacts {
    /// Requests and responses seen (within the first packets only).
    pub requests: u32,
    pub responses: u32,
    /// The first request's method, target and Host header.
    pub method: Option<String>,
    pub target: Option<String>,
    pub host: Option<String>,
    pub user_agent: Option<String>,
    /// The first response's status code.
    pub status: Option<u16>,
    /// Packet times of the first request and the first response.
    pub first_request_ns: Option<u64>,
    pub first_response_ns: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct DnsFacts {
    /// The first query's name (lower case, no trailing dot) and type.
    pub query: Option<String>,
    pub qtype: Option<u16>,
    /// The first response's code (0 NOERROR, 3 NXDOMAIN, ...).
    pub rcode: Option<u8>,
    /// Addresses in the first response's answers (A and AAAA), in order.
    pub answers: Vec<std::net::IpAddr>,
    pub queries: u32,
    pub responses: u32,
}

/// RTP on one UDP flow, per direction (client to server, server to client).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RtpFacts {
    pub dirs: [Option<RtpStream>; 2],
    /// RTCP packets seen: datagrams (a compound packet is one), both directions.
    pub rtcp_packets: u64,
    /// Each direction's RTCP: what its sender and receiver reports said.
    pub rtcp: [RtcpDir; 2],
    /// STUN and DTLS datagrams sharing the flow (RFC 7983: ICE checks, DTLS-SRTP), skipped.
    pub demuxed_packets: u64,
}

/// One direction's RTP stream (its first SSRC).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RtpStream {
    pub ssrc: u32,
    pub payload_type: u8,
    pub packets: u64,
    pub payload_bytes: u64,
    /// Expected minus received, from the extended highest sequence number (RFC 3550 A.3).
    pub lost: i64,
    pub out_of_sequence: u64,
    pub duplicates: u64,
    /// The interarrival jitter estimate (RFC 3550 §6.4.1 / A.8), in timestamp units, at the end,
    /// and its largest value.
    pub jitter: f64,
    pub jitter_max: f64,
    /// The clock rate used to turn timestamp units into time (from the payload type), 0 if unknown.
    pub clock_hz: u32,
    /// The jitter estimate's smallest value and its mean over the packets after the first
    /// (Tstat's `jitter_min`, `jitter_avg`; Wireshark's "Mean Jitter"), in timestamp units.
    pub jitter_min: f64,
    pub jitter_mean: f64,
    /// Packet times of the stream's first and last packets (Tstat's `starttime`, `duration`).
    pub first_ns: u64,
    pub last_ns: u64,
    /// The smallest and largest payload of a packet, in bytes (Tstat's `rtp_min_payload`,
    /// `rtp_max_payload`; the mean is `payload_bytes / packets`).
    pub payload_bytes_min: u32,
    pub payload_bytes_max: u32,
    /// Packets with the marker bit set (a talkspurt's or a video frame's edge).
    pub marker_packets: u64,
    /// Packets of this SSRC with another payload type than the first (RFC 4733 events, comfort
    /// noise): counted in `packets`, left out of the jitter unless their clock is the same.
    pub other_pt_packets: u64,
    /// Packets of this direction carrying another SSRC than the stream's: not in the other
    /// counts.
    pub other_ssrc_packets: u64,
}

/// One direction's RTCP (RFC 3550 §6.4): the last values its reports carried.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RtcpDir {
    /// RTCP datagrams from this direction.
    pub packets: u64,
    /// Of them, cut by the capture before their end (Tstat's `rtcp_trunc`).
    pub cut_packets: u64,
    /// Of them, with only the first packet readable: SRTCP, whose packets after the first 8
    /// bytes are encrypted and followed by an index and a tag (RFC 3711 §3.4).
    pub opaque_packets: u64,
    /// The last sender report's sender packet and octet counts (Tstat's `rtcp_lenpack`,
    /// `rtcp_lenbytes`).
    pub sender_packets: Option<u32>,
    pub sender_octets: Option<u32>,
    /// The last report block's cumulative number of packets lost and fraction lost in 1/256
    /// (Tstat's `rtcp_losses`, `rtcp_fraclost`).
    pub reported_lost: Option<i32>,
    pub fraction_lost: Option<u8>,
    /// Round trips from this side's report blocks: the time from the other side's sender report
    /// passing the probe to this report passing it, less the delay since that sender report
    /// (DLSR): the round trip between the probe and this side (Tstat's `rtt_*`).
    pub rtt_samples: u64,
    pub rtt_sum_ns: u64,
    pub rtt_min_ns: Option<u64>,
    pub rtt_max_ns: u64,
}

/// Problems met reading payloads: counted per flow, summed in summary.json.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Problems {
    /// A TLS record or handshake message that could not be parsed.
    pub tls_malformed: u32,
    /// A QUIC Initial that did not decrypt or parse.
    pub quic_malformed: u32,
    pub http_malformed: u32,
    /// A DNS message that could not be parsed (bad lengths, compression loops).
    pub dns_malformed: u32,
    pub rtp_malformed: u32,
    /// A gap in a TCP direction's bytes (a lost or uncaptured segment): parsing of that
    /// direction stopped there.
    pub stream_gaps: u32,
    /// A message larger than the parser's limit: left unparsed.
    pub over_limit: u32,
}

impl Problems {
    pub fn add(&mut self, o: &Problems) {
        self.tls_malformed += o.tls_malformed;
        self.quic_malformed += o.quic_malformed;
        self.http_malformed += o.http_malformed;
        self.dns_malformed += o.dns_malformed;
        self.rtp_malformed += o.rtp_malformed;
        self.stream_gaps += o.stream_gaps;
        self.over_limit += o.over_limit;
    }
}

/// A run of bytes handed to a protocol parser: a UDP datagram, or the next in-order bytes of a
/// TCP direction.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Segment<'a> {
    pub dir: Dir,
    pub ts_ns: u64,
    pub bytes: &'a [u8],
    /// The packet carried more than was captured (snap length): `bytes` is its start only, and
    /// a TCP direction stops after it.
    pub cut: bool,
    /// The payload's length on the wire (a UDP datagram's whole length even when `cut`); for
    /// TCP, the length of `bytes`.
    pub wire_len: u32,
}

/// What a parser says after a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Give me the next segments.
    More,
    /// Nothing more to learn from this flow.
    Done,
    /// This is not my protocol (only said on a flow's first segments): try the others.
    NotMine,
}

/// The protocol a flow speaks, once recognised, with its parser's state.
enum App {
    /// Not known yet: the first segments are tried on each parser.
    Unknown {
        tries: u8,
    },
    Tls(tls::TlsParser),
    Quic(quic::QuicParser),
    /// Boxed: the largest reader (144 bytes), which the others would pay for in every session.
    Http(Box<http::HttpParser>),
    Dns(dns::DnsParser),
    Rtp(rtp::RtpParser),
    /// Recognised as nothing we read, or done: no more payload is wanted.
    Done,
}

/// Payload segments of a flow tried for recognition before giving up.
const RECOGNITION_TRIES: u8 = 4;

/// One flow's application reader.
pub struct Session {
    transport: Transport,
    ports: [u16; 2],
    streams: [stream::Stream; 2],
    app: App,
    facts: Facts,
    /// `facts.resolved` came from the client's side.
    resolved_by_client: bool,
}

impl Session {
    pub fn new(transport: Transport, client_port: u16, server_port: u16) -> Session {
        Session {
            transport,
            ports: [client_port, server_port],
            streams: Default::default(),
            app: App::Unknown { tries: 0 },
            facts: Facts::default(),
            resolved_by_client: false,
        }
    }

    /// Hands over one packet's captured payload (`payload`, of `wire_len` bytes on the wire).
    /// `tcp_seq` is the TCP sequence number of its first byte (None for UDP).
    pub fn on_payload(&mut self, dir: Dir, ts_ns: u64, tcp_seq: Option<u32>, payload: &[u8], wire_len: u32) {
        if matches!(self.app, App::Done) || dir > 1 {
            return;
        }
        let cut = (payload.len() as u64) < u64::from(wire_len);
        let bytes = match (self.transport, tcp_seq) {
            (Transport::Tcp, Some(seq)) => {
                match self.streams[dir].accept(seq, payload, wire_len, &mut self.facts.problems) {
                    Some(b) => b,
                    None => return,
                }
            }
            _ => payload,
        };
        if bytes.is_empty() {
            return;
        }
        let seg_wire_len = match self.transport {
            Transport::Udp => wire_len,
            Transport::Tcp => u32::try_from(bytes.len()).unwrap_or(u32::MAX),
        };
        let segment = Segment { dir, ts_ns, bytes, cut, wire_len: seg_wire_len };
        let verdict = match &mut self.app {
            App::Unknown { tries } => {
                *tries += 1;
                let tries = *tries;
                match self.recognise(&segment) {
                    Some(v) => v,
                    None if tries >= RECOGNITION_TRIES => Verdict::Done,
                    None => Verdict::More,
                }
            }
            App::Tls(p) => p.segment(&segment, &mut self.facts),
            App::Quic(p) => p.segment(&segment, &mut self.facts),
            App::Http(p) => p.segment(&segment, &mut self.facts),
            App::Dns(p) => p.segment(&segment, &mut self.facts),
            App::Rtp(p) => p.segment(&segment, &mut self.facts),
            App::Done => Verdict::Done,
        };
        if verdict != Verdict::More {
            self.app = App::Done;
        }
    }

    /// Tries the segment on each parser that could speak on this transport and these ports;
    /// the first that does not say `NotMine` keeps the flow. None: nobody took it.
    fn recognise(&mut self, segment: &Segment<'_>) -> Option<Verdict> {
        let ports = self.ports;
        let facts = &mut self.facts;
        let take = |app: App, verdict: Verdict| -> Option<(App, Verdict)> {
            (verdict != Verdict::NotMine).then_some((app, verdict))
        };
        let found = match self.transport {
            Transport::Tcp => {
                let mut tls = tls::TlsParser::new();
                let v = tls.segment(segment, facts);
                take(App::Tls(tls), v)
                    .or_else(|| {
                        let mut http = http::HttpParser::new();
                        let v = http.segment(segment, facts);
                        (v != Verdict::NotMine).then(|| (App::Http(Box::new(http)), v))
                    })
                    .or_else(|| {
                        let mut dns = dns::DnsParser::new(Transport::Tcp, ports);
                        let v = dns.segment(segment, facts);
                        take(App::Dns(dns), v)
                    })
            }
            Transport::Udp => {
                let mut dns = dns::DnsParser::new(Transport::Udp, ports);
                let v = dns.segment(segment, facts);
                take(App::Dns(dns), v)
                    .or_else(|| {
                        let mut quic = quic::QuicParser::new();
                        let v = quic.segment(segment, facts);
                        take(App::Quic(quic), v)
                    })
                    .or_else(|| {
                        let mut rtp = rtp::RtpParser::new();
                        let v = rtp.segment(segment, facts);
                        take(App::Rtp(rtp), v)
                    })
            }
        };
        let (app, verdict) = found?;
        self.app = app;
        Some(verdict)
    }

    /// DN-Hunter: the DNS answer that gave the sender of a packet of direction `dir` the
    /// address it talks to. The client's first one labels the flow (the server's, when the
    /// client sent nothing of the kind).
    pub fn resolved(&mut self, dir: Dir, resolved: &std::sync::Arc<Resolved>) {
        if self.facts.resolved.is_none() || (dir == CLIENT && !self.resolved_by_client) {
            self.facts.resolved = Some(std::sync::Arc::clone(resolved));
            self.resolved_by_client = dir == CLIENT;
        }
    }

    /// Reads the flow's packets as Tstat does too (its layout's columns: [`TstatL7`]).
    pub fn enable_tstat(&mut self) {
        if self.transport == Transport::Tcp {
            self.facts.tstat.get_or_insert_with(Default::default);
        }
    }

    /// One TCP packet with payload for Tstat's reading (if enabled), whatever the parsers
    /// want: hand it before [`Session::on_payload`]. `p.data` may be the payload's first bytes.
    pub fn tstat_packet(&mut self, p: &TstatPacket<'_>) {
        if let Some(t) = self.facts.tstat.as_deref_mut() {
            t.packet(p);
        }
    }

    /// Whether more payload could still add facts (false once the parser is done or gave up).
    pub fn wants_more(&self) -> bool {
        !matches!(self.app, App::Done)
    }

    pub fn facts(&self) -> &Facts {
        &self.facts
    }

    pub fn into_facts(self) -> Facts {
        self.facts
    }
}

/// A flow's application, in sonde's taxonomy (docs/l7.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Label {
    /// e.g. `tls`, `quic`, `http`, `dns`, `rtp`; `unknown` when nothing told.
    pub name: &'static str,
    /// Told by a well-known port only, not by the payload.
    pub by_port: bool,
}
/// The reader's layout (issue 33: memory per flow): every reader but HTTP's within 56 bytes.
#[cfg(test)]
#[test]
fn a_session_keeps_its_size() {
    use std::mem::size_of;
    assert_eq!(size_of::<stream::Stream>(), 12);
    assert!(size_of::<tls::TlsParser>() <= 56 && size_of::<quic::QuicParser>() <= 56);
    assert!(size_of::<dns::DnsParser>() <= 56 && size_of::<rtp::RtpParser>() <= 56);
    assert_eq!(size_of::<App>(), 56);
    // 176 with `Facts::tstat` (8 bytes: Tstat's layout's reading, boxed, None otherwise).
    assert_eq!(size_of::<Session>(), 176);
    // Tstat's reading, per TCP flow in its layout only: 232 bytes, and 128 of nibble counts.
    assert!(size_of::<tstat::TstatL7>() <= 232);
}
