//! DNS (RFC 1035), with mDNS (RFC 6762) and LLMNR (RFC 4795) which share its message format:
//! over UDP on port 53, 5353 or 5355 of either side, or over TCP port 53 with the 2-byte
//! length prefix of each message (RFC 1035 §4.2.2).
//!
//! Recognition needs both the port and a plausible header (opcode 0–6, at most 16 questions,
//! 1024 records per section, something in it, and a question that parses); anything else is
//! `NotMine`. Once claimed, each message counts as a query or a response; the first message
//! with a question gives the name (lower case, no trailing dot; a label of printable UTF-8 as it
//! is, as tshark shows mDNS names; in other labels RFC 4343 `\DDD` escapes for bytes outside
//! printable ASCII; `.` and `\` inside a label escaped) and type, the first response
//! its rcode (the header's 4 bits) and the A/AAAA records of its answer section.
//!
//! A hand parser, not `hickory-proto`: we need the header, one question and the A/AAAA answers,
//! read in one pass that allocates only the name; hickory decodes every record of every section
//! into owned values (and refuses a whole message for one record it dislikes, where tshark
//! still shows the answers), which [`dns_response_addresses`], run on every DNS response of a
//! link, cannot afford. Owner names of records are skipped up to their first compression
//! pointer, not followed (as tshark does: one bad name does not hide the records after it).
//! The question's name is read with compression pointers that must point backwards
//! (RFC 1035 §4.1.4: to a prior occurrence), at most [`MAX_POINTERS`] of them and
//! [`MAX_NAME_BYTES`] of name: a loop, a pointer out of the message or a forward one is
//! `dns_malformed`, never a hang or a panic. A datagram cut by the capture is read as far as it
//! goes and is not malformed for that. Over TCP at most [`TCP_MESSAGE_LIMIT_BYTES`] of a message
//! are buffered; a longer one is read from its first bytes as if cut, and counts `over_limit`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::{DnsFacts, Facts, Segment, Transport, Verdict};

/// UDP ports of DNS, mDNS and LLMNR; TCP is recognised on port 53 only.
const UDP_PORTS: [u16; 3] = [53, 5353, 5355];

/// Bytes of one TCP DNS message buffered, at most.
pub(crate) const TCP_MESSAGE_LIMIT_BYTES: usize = 8 * 1024;

/// Compression pointers followed in one name, at most.
pub(crate) const MAX_POINTERS: u32 = 64;

/// RFC 1035 §2.3.4: a name is at most 255 bytes on the wire.
pub(crate) const MAX_NAME_BYTES: usize = 255;

const HEADER_BYTES: usize = 12;
const TYPE_A: u16 = 1;
const TYPE_AAAA: u16 = 28;
const CLASS_IN: u16 = 1;

pub(crate) struct DnsParser {
    transport: Transport,
    ports: [u16; 2],
    /// TCP: each direction's message being reassembled (after its length prefix).
    /// Boxed at the first TCP message: few flows are DNS over TCP.
    tcp: Option<Box<[TcpFraming; 2]>>,
}

#[derive(Debug, Default)]
struct TcpFraming {
    /// The length prefix's bytes seen (0, 1 or 2) and its value.
    prefix: [u8; 2],
    prefix_len: u8,
    /// The message's bytes so far (at most `TCP_MESSAGE_LIMIT_BYTES`).
    message: Vec<u8>,
    /// Bytes of the current message still to come (buffered or skipped).
    left: usize,
    /// The current message is longer than the buffer.
    over: bool,
    stopped: bool,
}

/// What a message's header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Header {
    response: bool,
    opcode: u8,
    rcode: u8,
    qd: u16,
    an: u16,
    ns: u16,
    ar: u16,
}

impl Header {
    fn read(m: &[u8]) -> Option<Header> {
        let h = m.get(..HEADER_BYTES)?;
        let be = |at: usize| u16::from_be_bytes([h[at], h[at + 1]]);
        Some(Header {
            response: h[2] & 0x80 != 0,
            opcode: (h[2] >> 3) & 0x0f,
            rcode: h[3] & 0x0f,
            qd: be(4),
            an: be(6),
            ns: be(8),
            ar: be(10),
        })
    }

    /// Counts a real DNS message could carry.
    fn plausible(&self) -> bool {
        self.opcode <= 6
            && self.qd <= 16
            && self.an <= 1024
            && self.ns <= 1024
            && self.ar <= 1024
            && (self.qd > 0 || self.an > 0 || self.ns > 0 || self.ar > 0)
    }
}

/// Why a message could not be read to its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// The bytes ended (a cut datagram, or a message longer than the TCP buffer): not an error
    /// when the capture or our limit cut it.
    End,
    /// A bad label, a pointer loop or out of range, a record past the message's end.
    Malformed,
}

/// A message's facts, as far as it could be read.
#[derive(Debug, Default)]
struct Message {
    question: Option<(String, u16)>,
    addresses: Vec<IpAddr>,
    stop: Option<Stop>,
}

impl DnsParser {
    pub(crate) fn new(transport: Transport, ports: [u16; 2]) -> Self {
        DnsParser { transport, ports, tcp: None }
    }

    pub(crate) fn segment(&mut self, segment: &Segment<'_>, facts: &mut Facts) -> Verdict {
        let claimed = facts.dns.is_some();
        match self.transport {
            Transport::Udp => {
                if !claimed {
                    if !self.ports.iter().any(|p| UDP_PORTS.contains(p))
                        || !recognised(segment.bytes, segment.cut, self.ports.contains(&5353))
                    {
                        return Verdict::NotMine;
                    }
                    facts.dns = Some(Box::default());
                }
                message(segment.bytes, segment.cut, facts);
                Verdict::More
            }
            Transport::Tcp => {
                if !claimed {
                    let framed = segment.bytes.get(2..).unwrap_or(&[]);
                    let len = segment.bytes.get(..2).map_or(0, |b| u16::from_be_bytes([b[0], b[1]]));
                    // Some resolvers write the length prefix in a segment of its own.
                    let prefix_alone = segment.bytes.len() == 2;
                    if !self.ports.contains(&53)
                        || usize::from(len) < HEADER_BYTES
                        || !(prefix_alone || recognised(framed, framed.len() < usize::from(len), false))
                    {
                        return Verdict::NotMine;
                    }
                    facts.dns = Some(Box::default());
                }
                self.tcp_bytes(segment.dir.min(1), segment.bytes, segment.cut, facts);
                if self.tcp.as_ref().is_some_and(|tcp| tcp.iter().all(|t| t.stopped)) {
                    Verdict::Done
                } else {
                    Verdict::More
                }
            }
        }
    }

    /// Splits a TCP direction's bytes into messages by their length prefixes.
    fn tcp_bytes(&mut self, dir: usize, mut input: &[u8], cut: bool, facts: &mut Facts) {
        let t = &mut self.tcp.get_or_insert_with(Default::default)[dir];
        while !input.is_empty() && !t.stopped {
            if t.left == 0 {
                // Reading the 2-byte length prefix.
                t.prefix[usize::from(t.prefix_len)] = input[0];
                t.prefix_len += 1;
                input = &input[1..];
                if t.prefix_len == 2 {
                    t.prefix_len = 0;
                    t.left = usize::from(u16::from_be_bytes(t.prefix));
                    t.over = t.left > TCP_MESSAGE_LIMIT_BYTES;
                    t.message.clear();
                    if t.left < HEADER_BYTES {
                        facts.problems.dns_malformed += 1;
                        t.stopped = true;
                    }
                }
                continue;
            }
            let k = t.left.min(input.len());
            let room = TCP_MESSAGE_LIMIT_BYTES - t.message.len().min(TCP_MESSAGE_LIMIT_BYTES);
            t.message.extend_from_slice(&input[..k.min(room)]);
            input = &input[k..];
            t.left -= k;
            if t.left == 0 {
                if t.over {
                    facts.problems.over_limit += 1;
                }
                message(&t.message, t.over, facts);
                t.message.clear();
            }
        }
        if cut && t.left > 0 && !t.stopped {
            // The capture cut this segment: read what came of the message, nothing follows.
            message(&t.message, true, facts);
            t.stopped = true;
        }
        if t.stopped {
            t.message = Vec::new();
        }
    }
}

/// A plausible first DNS message: its header, and its first question (as far as it goes when
/// `partial`: the message's bytes end early). Only mDNS (`mdns`: its announcements), inverse
/// queries (opcode 1, RFC 1035 §6.4.1: an answer, no question) and DSO (opcode 6, RFC 8490)
/// send messages without a question.
fn recognised(m: &[u8], partial: bool, mdns: bool) -> bool {
    let Some(h) = Header::read(m) else { return false };
    if !h.plausible() {
        return false;
    }
    (h.qd == 0 && (mdns || h.opcode == 1 || h.opcode == 6))
        || h.qd > 0
            && match Name::check(m, HEADER_BYTES) {
                Ok(_) => true,
                Err(Stop::End) => partial,
                Err(Stop::Malformed) => false,
            }
}

/// Reads one message into the flow's facts. `cut`: the bytes are only the message's start.
fn message(m: &[u8], cut: bool, facts: &mut Facts) {
    let Some(h) = Header::read(m) else {
        if !cut {
            facts.problems.dns_malformed += 1;
        }
        return;
    };
    let dns: &mut DnsFacts = facts.dns.get_or_insert_with(Box::default);
    if h.response {
        dns.responses = dns.responses.saturating_add(1);
    } else {
        dns.queries = dns.queries.saturating_add(1);
    }
    let first_response = h.response && dns.rcode.is_none();
    let want_question = dns.query.is_none();
    if !want_question && !first_response {
        // Nothing more to learn from this message's body; its header was plausible enough.
        return;
    }
    let msg = read(m, &h, first_response);
    if let (true, Some((name, qtype))) = (want_question, msg.question) {
        dns.query = Some(name);
        dns.qtype = Some(qtype);
    }
    if first_response {
        dns.rcode = Some(h.rcode);
        dns.answers = msg.addresses;
    }
    match msg.stop {
        Some(Stop::Malformed) => facts.problems.dns_malformed += 1,
        Some(Stop::End) if !cut => facts.problems.dns_malformed += 1,
        _ => {}
    }
}

/// Reads the first question and, with `answers`, the A/AAAA records of the answer section.
fn read(m: &[u8], h: &Header, answers: bool) -> Message {
    let mut out = Message::default();
    let mut at = HEADER_BYTES;
    for i in 0..h.qd {
        let name = if i == 0 { Name::read(m, at) } else { Name::skip(m, at).map(|end| (String::new(), end)) };
        let (name, end) = match name {
            Ok(v) => v,
            Err(e) => {
                out.stop = Some(e);
                return out;
            }
        };
        let Some(fixed) = m.get(end..end + 4) else {
            out.stop = Some(Stop::End);
            return out;
        };
        if i == 0 {
            out.question = Some((name, u16::from_be_bytes([fixed[0], fixed[1]])));
        }
        at = end + 4;
    }
    if !answers {
        return out;
    }
    for _ in 0..h.an {
        let end = match Name::skip(m, at) {
            Ok(end) => end,
            Err(e) => {
                out.stop = Some(e);
                return out;
            }
        };
        // TYPE, CLASS, TTL, RDLENGTH (RFC 1035 §4.1.3).
        let Some(fixed) = m.get(end..end + 10) else {
            out.stop = Some(Stop::End);
            return out;
        };
        let rtype = u16::from_be_bytes([fixed[0], fixed[1]]);
        // mDNS: the top bit of the class is the cache-flush flag (RFC 6762 §10.2).
        let class = u16::from_be_bytes([fixed[2], fixed[3]]) & 0x7fff;
        let rdlen = usize::from(u16::from_be_bytes([fixed[8], fixed[9]]));
        let rdata_at = end + 10;
        let Some(rdata) = m.get(rdata_at..rdata_at + rdlen) else {
            out.stop = Some(Stop::End);
            return out;
        };
        if class == CLASS_IN {
            match (rtype, rdata) {
                (TYPE_A, &[a, b, c, d]) => out.addresses.push(IpAddr::V4(Ipv4Addr::new(a, b, c, d))),
                (TYPE_AAAA, r) if r.len() == 16 => {
                    let mut o = [0u8; 16];
                    o.copy_from_slice(r);
                    out.addresses.push(IpAddr::V6(Ipv6Addr::from(o)));
                }
                (TYPE_A | TYPE_AAAA, _) => {
                    out.stop = Some(Stop::Malformed);
                    return out;
                }
                _ => {}
            }
        }
        at = rdata_at + rdlen;
    }
    out
}

/// Domain names on the wire (RFC 1035 §3.1, §4.1.4).
struct Name;

impl Name {
    /// Where the name at `at` ends in the message: after its root label, or after its first
    /// compression pointer, which is not followed (a name is skipped as tshark does, so a bad
    /// name elsewhere does not hide the records after it).
    /// Its length is not checked either: each step advances, so the message's end bounds it.
    fn skip(m: &[u8], mut pos: usize) -> Result<usize, Stop> {
        loop {
            let Some(&len) = m.get(pos) else { return Err(Stop::End) };
            match len & 0xc0 {
                0x00 if len == 0 => return Ok(pos + 1),
                0x00 => pos += 1 + usize::from(len),
                0xc0 => return if pos + 2 <= m.len() { Ok(pos + 2) } else { Err(Stop::End) },
                _ => return Err(Stop::Malformed),
            }
        }
    }

    /// Whether the name at `at` reads whole, pointers followed (as [`Name::read`], without
    /// building it).
    fn check(m: &[u8], at: usize) -> Result<usize, Stop> {
        Name::walk(m, at, |_| {})
    }

    /// The name at `at` in presentation form (lower case, no trailing dot; the root is ""), and
    /// where it ends. A label that is printable UTF-8 (mDNS service names are) is kept as is,
    /// with `.` and `\` escaped; in any other label, bytes outside printable ASCII become
    /// `\DDD` (RFC 4343 §2.1, the byte in decimal).
    fn read(m: &[u8], at: usize) -> Result<(String, usize), Stop> {
        let mut name = String::new();
        let end = Name::walk(m, at, |label| {
            if !name.is_empty() {
                name.push('.');
            }
            match std::str::from_utf8(label) {
                Ok(text) if !text.chars().any(char::is_control) => {
                    for c in text.chars() {
                        if c == '.' || c == '\\' {
                            name.push('\\');
                        }
                        name.push(c.to_ascii_lowercase());
                    }
                }
                _ => {
                    for &b in label {
                        match b {
                            b'.' | b'\\' => {
                                name.push('\\');
                                name.push(b as char);
                            }
                            0x20..=0x7e => name.push(b.to_ascii_lowercase() as char),
                            _ => {
                                name.push('\\');
                                name.push((b'0' + b / 100) as char);
                                name.push((b'0' + b / 10 % 10) as char);
                                name.push((b'0' + b % 10) as char);
                            }
                        }
                    }
                }
            }
        })?;
        Ok((name, end))
    }

    /// Visits each label of the name at `at`; returns where the name ends at its first place.
    fn walk(m: &[u8], at: usize, mut label: impl FnMut(&[u8])) -> Result<usize, Stop> {
        let mut pos = at;
        let mut end = None;
        let mut pointers = 0u32;
        let mut wire_len = 0usize;
        // The lowest offset reached: every pointer must point before it, so none can loop.
        let mut floor = at;
        loop {
            let Some(&len) = m.get(pos) else { return Err(Stop::End) };
            match len & 0xc0 {
                0x00 => {
                    wire_len += usize::from(len) + 1;
                    if wire_len > MAX_NAME_BYTES {
                        return Err(Stop::Malformed);
                    }
                    if len == 0 {
                        return Ok(end.unwrap_or(pos + 1));
                    }
                    let Some(bytes) = m.get(pos + 1..pos + 1 + usize::from(len)) else {
                        return Err(Stop::End);
                    };
                    label(bytes);
                    pos += 1 + usize::from(len);
                }
                0xc0 => {
                    let Some(&low) = m.get(pos + 1) else { return Err(Stop::End) };
                    let target = usize::from(u16::from_be_bytes([len & 0x3f, low]));
                    pointers += 1;
                    if target >= floor || pointers > MAX_POINTERS {
                        return Err(Stop::Malformed);
                    }
                    if end.is_none() {
                        end = Some(pos + 2);
                    }
                    floor = target;
                    pos = target;
                }
                // 0x40 (extended label types, RFC 6891 §5) and 0x80: not in use.
                _ => return Err(Stop::Malformed),
            }
        }
    }
}

/// DN-Hunter: the question name and the A/AAAA addresses of the answer section of a DNS
/// response datagram (`payload`: a UDP payload, no TCP length prefix). None for a query, a
/// message with no question, or one that cannot be read to the end of its answer section.
/// One pass over the message; it allocates the name and the address list only.
pub fn dns_response_addresses(payload: &[u8]) -> Option<(String, Vec<IpAddr>)> {
    let h = Header::read(payload)?;
    if !h.response || h.qd == 0 || !h.plausible() {
        return None;
    }
    let msg = read(payload, &h, true);
    if msg.stop.is_some() {
        return None;
    }
    let (name, _) = msg.question?;
    Some((name, msg.addresses))
}

/// The first question's name of a DNS message as it was written (Tstat's `fqdn`): its labels'
/// bytes joined by dots, case kept, no trailing dot; a comma ends it (Tstat cuts names there).
/// None: no question, or it does not read.
pub fn dns_question_as_written(payload: &[u8]) -> Option<String> {
    let h = Header::read(payload)?;
    if h.qd == 0 {
        return None;
    }
    let mut raw = Vec::new();
    Name::walk(payload, HEADER_BYTES, |label| {
        if !raw.is_empty() {
            raw.push(b'.');
        }
        raw.extend_from_slice(label);
    })
    .ok()?;
    if let Some(comma) = raw.iter().position(|&b| b == b',') {
        raw.truncate(comma);
    }
    Some(String::from_utf8_lossy(&raw).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Problems, CLIENT, SERVER};

    #[test]
    fn a_question_as_written_keeps_its_case() {
        assert_eq!(dns_question_as_written(QUERY).as_deref(), Some("www.Example.com"));
        assert_eq!(dns_question_as_written(&response()).as_deref(), Some("www.Example.com"));
        assert_eq!(dns_question_as_written(&QUERY[..20]), None);
    }

    /// A query for www.example.com A (id 0x1234, RD).
    const QUERY: &[u8] =
        b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x03www\x07Example\x03com\x00\x00\x01\x00\x01";

    /// Its response: a CNAME to a.example.com (compressed), two A records and one AAAA for it.
    fn response() -> Vec<u8> {
        let mut r = b"\x12\x34\x81\x80\x00\x01\x00\x04\x00\x00\x00\x00".to_vec();
        r.extend_from_slice(&QUERY[12..]);
        // www.example.com CNAME a.example.com (a + pointer to example.com at 16).
        r.extend_from_slice(b"\xc0\x0c\x00\x05\x00\x01\x00\x00\x0e\x10\x00\x04\x01a\xc0\x10");
        let a_name = 12 + 21 + 12; // the "a" label in the CNAME's RDATA
        let p = [0xc0, a_name as u8];
        for (t, rdata) in [
            (1u8, &[93u8, 184, 216, 34][..]),
            (1, &[93, 184, 216, 35]),
            (28, &[0x26, 6, 0x28, 0, 2, 0x20, 0, 1, 2, 0x48, 0x18, 0x93, 0x25, 0xc8, 0x19, 0x46]),
        ] {
            r.extend_from_slice(&p);
            r.extend_from_slice(&[0, t, 0, 1, 0, 0, 0, 60, 0, rdata.len() as u8]);
            r.extend_from_slice(rdata);
        }
        r
    }

    fn udp(ports: [u16; 2], segs: &[(usize, &[u8], bool)]) -> (Facts, Vec<Verdict>) {
        let mut p = DnsParser::new(Transport::Udp, ports);
        let mut f = Facts::default();
        let v = segs
            .iter()
            .map(|&(dir, bytes, cut)| {
                p.segment(&Segment { dir, ts_ns: 1, bytes, cut, wire_len: bytes.len() as u32 }, &mut f)
            })
            .collect();
        (f, v)
    }

    #[test]
    fn query_and_response() {
        let resp = response();
        let (f, v) = udp([40000, 53], &[(CLIENT, QUERY, false), (SERVER, &resp, false)]);
        assert_eq!(v, [Verdict::More, Verdict::More]);
        let d = f.dns.as_deref().unwrap();
        assert_eq!(d.query.as_deref(), Some("www.example.com"));
        assert_eq!(d.qtype, Some(1));
        assert_eq!(d.rcode, Some(0));
        let want: Vec<IpAddr> = vec![
            "93.184.216.34".parse().unwrap(),
            "93.184.216.35".parse().unwrap(),
            "2606:2800:220:1:248:1893:25c8:1946".parse().unwrap(),
        ];
        assert_eq!(d.answers, want);
        assert_eq!((d.queries, d.responses), (1, 1));
        assert_eq!(f.problems, Problems::default());
        assert_eq!(dns_response_addresses(&resp), Some(("www.example.com".to_string(), want)));
        assert_eq!(dns_response_addresses(QUERY), None);
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    /// A real response (arkime's tests/pcap/dns-udp.pcap, frame 2, `tshark -e udp.payload`):
    /// www.github.com CNAME github.com A 192.30.252.128, four NS records and their glue in the
    /// additional section (10.2.95.12 four times, which tshark's `dns.a` lists too).
    const GITHUB: &str = "e03981800001000200040004037777770667697468756203636f6d0000010001c00c00050001000007bc0002c010c01000010001000000040004c01efc80c01000020001000001480014036e7333037031360664796e656374036e657400c01000020001000001480006036e7332c04ec01000020001000001480006036e7334c04ec01000020001000001480006036e7331c04ec06a0001000100000e1000040a025f0cc04a0001000100000e1000040a025f0cc08e0001000100000e1000040a025f0cc07c0001000100000e1000040a025f0c";

    #[test]
    fn a_real_response_answers_only() {
        let m = hex(GITHUB);
        let want: Vec<IpAddr> = vec!["192.30.252.128".parse().unwrap()];
        assert_eq!(dns_response_addresses(&m), Some(("www.github.com".to_string(), want.clone())));
        let (f, _) = udp([53, 60012], &[(SERVER, &m, false)]);
        let d = f.dns.as_deref().unwrap();
        assert_eq!(
            (d.query.as_deref(), d.qtype, d.rcode, &d.answers),
            (Some("www.github.com"), Some(1), Some(0), &want)
        );
        assert_eq!(f.problems, Problems::default());
        // Every cut of it: read as far as it goes, never malformed.
        for cut in 0..m.len() {
            let (f, _) = udp([53, 60012], &[(SERVER, &m[..cut], true)]);
            assert_eq!(f.problems, Problems::default(), "cut at {cut}");
        }
    }

    #[test]
    fn recognition_needs_port_and_header() {
        assert_eq!(udp([40000, 5000], &[(CLIENT, QUERY, false)]).1, [Verdict::NotMine], "port");
        let mut bad = QUERY.to_vec();
        bad[5] = 200; // 200 questions
        assert_eq!(udp([40000, 53], &[(CLIENT, &bad, false)]).1, [Verdict::NotMine]);
        assert_eq!(udp([40000, 53], &[(CLIENT, &QUERY[..11], false)]).1, [Verdict::NotMine]);
        // No question: refused on port 53, except for an inverse query (RFC 1035 §6.4.1).
        let answer_only = b"\x00\x07\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x01\x00\x01\x00\x00\x00\x3c\x00\x04\x0a\x00\x00\x01";
        assert_eq!(udp([40000, 53], &[(CLIENT, answer_only, false)]).1, [Verdict::NotMine]);
        let mut inverse = answer_only.to_vec();
        inverse[2] = 0x08; // opcode 1
        assert_eq!(udp([40000, 53], &[(CLIENT, &inverse, false)]).1, [Verdict::More]);
        let (f, v) = udp([5353, 5353], &[(CLIENT, QUERY, false)]);
        assert_eq!(v, [Verdict::More]);
        assert_eq!(f.dns.unwrap().query.as_deref(), Some("www.example.com"));
    }

    #[test]
    fn cut_datagrams_count_without_complaint() {
        // The flow layer hands later datagrams' first 16 bytes only.
        let resp = response();
        let (f, _) = udp(
            [40000, 53],
            &[
                (CLIENT, QUERY, false),
                (CLIENT, &QUERY[..16], true),
                (SERVER, &resp[..16], true),
                (SERVER, &resp, false),
            ],
        );
        let d = f.dns.as_deref().unwrap();
        assert_eq!((d.queries, d.responses), (2, 2));
        assert_eq!(d.rcode, Some(0));
        assert!(d.answers.is_empty(), "the first response was cut before its answers");
        assert_eq!(f.problems, Problems::default());
    }

    #[test]
    fn malformed_names_and_records() {
        let resp = response();
        let mut cases: Vec<Vec<u8>> = Vec::new();
        // A pointer to itself, a forward pointer, a pointer out of the message.
        for ptr in [[0xc0u8, 12], [0xc0, 40], [0xff, 0xff]] {
            let mut m = QUERY[..12].to_vec();
            m[2] = 0x81; // a response with one question whose name is that pointer
            m.extend_from_slice(&ptr);
            m.extend_from_slice(&[0, 1, 0, 1]);
            cases.push(m);
        }
        // A label type 0x40; an A record with 3 bytes; a record past the end (not cut).
        let mut m = QUERY.to_vec();
        m[12] = 0x43;
        cases.push(m);
        let mut m = resp.clone();
        let last_a = resp.len() - 16 - 12 - 4 - 12 + 11;
        m[last_a] = 3;
        cases.push(m);
        cases.push(resp[..resp.len() - 3].to_vec());
        // A name longer than 255 bytes through a chain of labels.
        let mut m = QUERY[..12].to_vec();
        for _ in 0..5 {
            m.push(63);
            m.extend_from_slice(&[b'a'; 63]);
        }
        m.extend_from_slice(&[0, 0, 1, 0, 1]);
        cases.push(m);
        for (i, m) in cases.iter_mut().enumerate() {
            m[2] |= 0x80; // a response: the first one is read to its answers
            let (f, v) = udp([40000, 53], &[(CLIENT, QUERY, false), (SERVER, m, false)]);
            assert_eq!(v[1], Verdict::More);
            assert_eq!(f.problems.dns_malformed, 1, "case {i}");
            assert_eq!(dns_response_addresses(m), None, "case {i}");
        }
    }

    #[test]
    fn pointer_chains_end() {
        // Each pointer points to the one before it: allowed, and bounded by MAX_POINTERS.
        let mut m = b"\x00\x00\x81\x80\x00\x01\x00\x00\x00\x00\x00\x00".to_vec();
        m.extend_from_slice(b"\x01x\x00");
        let mut prev = 12u16;
        for _ in 0..100 {
            let here = m.len() as u16;
            m.extend_from_slice(&(0xc000 | prev).to_be_bytes());
            prev = here;
        }
        assert_eq!(Name::read(&m, 12 + 3 + 2).map(|(n, _)| n), Ok("x".to_string()));
        assert_eq!(Name::read(&m, m.len() - 2), Err(Stop::Malformed), "too many pointers");
    }

    #[test]
    fn escapes_in_names() {
        let m = b"\x00\x00\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x04a.B\\\x02\x00\xff\x00\x00\x01\x00\x01";
        assert_eq!(Name::read(m, 12).map(|(n, _)| n), Ok("a\\.b\\\\.\\000\\255".to_string()));
        let root = b"\x00\x00\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\x01";
        assert_eq!(Name::read(root, 12), Ok((String::new(), 13)));
    }

    fn tcp(segs: &[(usize, &[u8])]) -> (Facts, Vec<Verdict>) {
        let mut p = DnsParser::new(Transport::Tcp, [40000, 53]);
        let mut f = Facts::default();
        let v = segs
            .iter()
            .map(|&(dir, bytes)| {
                p.segment(&Segment { dir, ts_ns: 1, bytes, cut: false, wire_len: bytes.len() as u32 }, &mut f)
            })
            .collect();
        (f, v)
    }

    #[test]
    fn tcp_framing_across_segments() {
        let resp = response();
        let mut c = (QUERY.len() as u16).to_be_bytes().to_vec();
        c.extend_from_slice(QUERY);
        c.extend_from_slice(&c.clone()); // two queries back to back
        let mut s = (resp.len() as u16).to_be_bytes().to_vec();
        s.extend_from_slice(&resp);
        let mut segs: Vec<(usize, &[u8])> = vec![(CLIENT, &c[..20])];
        segs.push((CLIENT, &c[20..]));
        for piece in s.chunks(5) {
            segs.push((SERVER, piece));
        }
        let (f, _) = tcp(&segs);
        let d = f.dns.as_deref().unwrap();
        assert_eq!((d.queries, d.responses), (2, 1));
        assert_eq!(d.answers.len(), 3);
        assert_eq!(f.problems, Problems::default());
        assert_eq!(tcp(&[(CLIENT, QUERY)]).1, [Verdict::NotMine], "no length prefix");
    }

    #[test]
    fn tcp_message_over_the_limit() {
        let mut big = response();
        big[7] = 4;
        let pad = TCP_MESSAGE_LIMIT_BYTES + 100 - big.len();
        // An additional record (a TXT-like blob) to make the message long.
        big[11] = 1;
        big.extend_from_slice(&[0, 0, 16, 0, 1, 0, 0, 0, 0]);
        big.extend_from_slice(&((pad - 11) as u16).to_be_bytes());
        big.resize(TCP_MESSAGE_LIMIT_BYTES + 100, b'x');
        let mut s = (big.len() as u16).to_be_bytes().to_vec();
        s.extend_from_slice(&big);
        let mut c = (QUERY.len() as u16).to_be_bytes().to_vec();
        c.extend_from_slice(QUERY);
        let (f, _) = tcp(&[(CLIENT, &c), (SERVER, &s)]);
        assert_eq!(f.problems.over_limit, 1);
        assert_eq!(f.problems.dns_malformed, 0);
        assert_eq!(f.dns.unwrap().answers.len(), 3, "the answers were in the first 8 KiB");
    }

    #[test]
    fn never_panics_on_noise() {
        let resp = response();
        let mut x = 0x9e37_79b9u32;
        for _ in 0..5000 {
            let mut m = resp.clone();
            for _ in 0..4 {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                let at = x as usize % m.len();
                m[at] = (x >> 8) as u8;
            }
            let cut = (x >> 20) as usize % (m.len() + 1);
            let _ = dns_response_addresses(&m[..cut]);
            udp([53, 53], &[(CLIENT, &m[..cut], cut < m.len()), (SERVER, &m, false)]);
            tcp(&[(CLIENT, &m), (SERVER, &m[..cut])]);
        }
    }
}
