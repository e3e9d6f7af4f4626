//! HTTP/1.x over TCP: requests and responses counted over the bytes a flow hands on, the first
//! request's method, target, Host and User-Agent, the first response's status (RFC 9112).
//!
//! Recognition: a direction whose first bytes are a known method and a space (`GET `, `POST `,
//! ... see [`METHODS`]) sends requests; one whose first bytes are `HTTP/1.` sends responses.
//! Anything else is not HTTP/1.x (`NotMine` before the flow is claimed; `http_malformed` and
//! that direction stops once it is).
//!
//! Heads are parsed with `httparse` (lenient settings: obsolete line folding, repeated spaces and
//! invalid header lines in responses are accepted, as browsers do). A request line httparse
//! refuses is read as Zeek and Wireshark read it ([`lax_request`]): a version cut short or
//! longer (`HTTP/1.`, `HTTP/1.0.8`), a target empty or with spaces; a line without a version is
//! an HTTP/0.9 request (RFC 1945 §4.1, "Simple-Request"), whose headless answer (when that
//! direction has not spoken HTTP/1.x yet) is a response without status to the connection's
//! close. A head that spans segments is buffered, at most [`HEAD_LIMIT_BYTES`] (8 KiB) per direction: a longer head counts
//! `over_limit` and stops the direction. Bodies are skipped without buffering, by Content-Length
//! or by the chunked framing (RFC 9112 §6.3, §7.1), so the heads of persistent and pipelined
//! messages that follow are read too; a response delimited by the connection's close, a
//! `101 Switching Protocols` or a successful CONNECT end the direction's reading.
//!
//! Facts are strings as sent: Host keeps its case and port (as tshark's `http.host` and Tstat's
//! `http_hostname`), the target is the request line's, non-UTF-8 bytes become U+FFFD. The first
//! response's status may be an interim one (`100 Continue`), as tshark's first
//! `http.response.code`.

use crate::{Facts, HttpFacts, Problems, Segment, Verdict};

/// Bytes of one message head (start line and header fields) buffered per direction, at most.
pub(crate) const HEAD_LIMIT_BYTES: usize = 8 * 1024;

/// Header fields read in one head, at most (more: `over_limit`).
const MAX_HEADERS: usize = 128;

/// Bytes of one chunk-size or trailer line, at most.
const LINE_LIMIT_BYTES: u32 = 1024;

/// Methods that start a request (RFC 9110 §9, PATCH (RFC 5789), WebDAV (RFC 4918) and the
/// UPnP/GENA ones seen on TCP).
pub(crate) const METHODS: &[&[u8]] = &[
    b"GET",
    b"POST",
    b"HEAD",
    b"PUT",
    b"DELETE",
    b"OPTIONS",
    b"CONNECT",
    b"TRACE",
    b"PATCH",
    b"PROPFIND",
    b"PROPPATCH",
    b"MKCOL",
    b"COPY",
    b"MOVE",
    b"LOCK",
    b"UNLOCK",
    b"REPORT",
    b"SEARCH",
    b"SUBSCRIBE",
    b"UNSUBSCRIBE",
    b"NOTIFY",
];

/// Requests waiting for their response, remembered at most (for HEAD and CONNECT, whose
/// responses frame differently); older ones are forgotten, which only matters for HEAD.
const PENDING_LIMIT: usize = 32;

/// What a direction sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Requests,
    Responses,
}

/// Where a direction is in its stream of messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Its first bytes have not come yet.
    Fresh,
    /// Reading a head (possibly buffered in `head`).
    Head,
    /// Skipping a body of this many more bytes.
    Body(u64),
    /// Inside a chunked body.
    Chunked(Chunk),
    /// Nothing more will be read from this direction.
    Stopped,
}

/// The chunked framing (RFC 9112 §7.1), byte by byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    /// Reading a chunk-size line: the size so far, whether a digit was seen, whether the
    /// extension (after `;` or a space) has begun, the line's length.
    Size { size: u64, digit: bool, ext: bool, len: u32 },
    /// Skipping chunk data.
    Data(u64),
    /// The CRLF after chunk data.
    DataEnd,
    /// Trailer lines after the last chunk, until an empty one; the current line's length.
    Trailer { len: u32 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pending {
    Head,
    Connect,
    /// An HTTP/0.9 request: its answer has no head.
    Simple,
    Other,
}

#[derive(Debug)]
struct Direction {
    role: Option<Role>,
    state: State,
    /// A head cut across segments, until complete.
    head: Vec<u8>,
    /// Packet time of the segment where the message being read began.
    start_ns: u64,
}

impl Default for Direction {
    fn default() -> Self {
        Direction { role: None, state: State::Fresh, head: Vec::new(), start_ns: 0 }
    }
}

pub(crate) struct HttpParser {
    dirs: [Direction; 2],
    /// Methods of requests not answered yet, oldest first.
    pending: std::collections::VecDeque<Pending>,
}

/// What one head said, copied out of the buffer it was parsed from.
struct Head {
    role: Role,
    method: Option<String>,
    target: Option<String>,
    host: Option<String>,
    user_agent: Option<String>,
    status: Option<u16>,
    /// An HTTP/0.9 request line (no version).
    simple: bool,
    framing: Framing,
}

/// How the body after a head is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    None,
    Length(u64),
    Chunked,
    /// Until the connection closes (or a tunnel, an upgrade): nothing more to read.
    Close,
}

/// Why a head could not be read.
enum HeadError {
    Malformed,
    OverLimit,
}

impl HttpParser {
    pub(crate) fn new() -> Self {
        HttpParser { dirs: Default::default(), pending: Default::default() }
    }

    pub(crate) fn segment(&mut self, segment: &Segment<'_>, facts: &mut Facts) -> Verdict {
        let dir = segment.dir.min(1);
        if facts.http.is_none() {
            // Not claimed yet: only a start line of ours claims the flow.
            if role_of(segment.bytes).is_none() {
                return Verdict::NotMine;
            }
            facts.http = Some(Box::default());
        }
        self.feed(dir, segment.ts_ns, segment.bytes, facts);
        if self.dirs.iter().all(|d| d.state == State::Stopped) {
            Verdict::Done
        } else {
            Verdict::More
        }
    }

    /// Takes a direction's bytes through its states until they are used up or it stops: each
    /// state's step uses what it can and hands on the rest (None: the bytes are used, or held).
    fn feed(&mut self, dir: usize, ts_ns: u64, mut input: &[u8], facts: &mut Facts) {
        while !input.is_empty() {
            let d = &mut self.dirs[dir];
            let rest = match d.state {
                State::Stopped => return,
                State::Fresh => self.fresh(dir, ts_ns, input, facts),
                State::Body(n) => Some(body(d, n, input)),
                State::Chunked(c) => Some(chunks(d, c, input, &mut facts.problems)),
                State::Head => self.head(dir, ts_ns, input, facts),
            };
            match rest {
                Some(rest) => input = rest,
                None => return,
            }
        }
    }

    /// A direction's first bytes say what it sends; a few may come alone (held in `head`).
    #[inline(always)]
    fn fresh<'i>(&mut self, dir: usize, ts_ns: u64, input: &'i [u8], facts: &mut Facts) -> Option<&'i [u8]> {
        let d = &mut self.dirs[dir];
        if d.head.is_empty() {
            d.start_ns = ts_ns;
        }
        let mut peek = [0u8; START_PEEK_BYTES];
        let have = d.head.len().min(START_PEEK_BYTES);
        peek[..have].copy_from_slice(&d.head[..have]);
        let add = input.len().min(START_PEEK_BYTES - have);
        peek[have..have + add].copy_from_slice(&input[..add]);
        match start_of(&peek[..have + add]) {
            Start::Role(role) => {
                // What was held is the head's beginning: the Head state goes on from it.
                d.role = Some(role);
                d.state = State::Head;
            }
            Start::NeedMore => {
                d.head.extend_from_slice(input);
                return None;
            }
            Start::Other if self.pending.front() == Some(&Pending::Simple) => {
                // The answer to an HTTP/0.9 request: no head, a body to the close.
                d.role = Some(Role::Responses);
                d.head = Vec::new();
                let head = Head::simple_response();
                self.message(dir, head, ts_ns, facts);
                return None;
            }
            Start::Other => {
                facts.problems.http_malformed += 1;
                d.state = State::Stopped;
                d.head = Vec::new();
            }
        }
        Some(input)
    }

    /// A message head: parsed from the segment's bytes, or from what was held of it with them;
    /// one that ends here starts its message and hands on its body.
    #[inline(always)]
    fn head<'i>(&mut self, dir: usize, ts_ns: u64, mut input: &'i [u8], facts: &mut Facts) -> Option<&'i [u8]> {
        let d = &mut self.dirs[dir];
        let role = d.role.unwrap_or(Role::Requests);
        if d.head.is_empty() {
            d.start_ns = ts_ns;
            // Blank lines between messages are tolerated (RFC 9112 §2.2).
            let skip = input.iter().take_while(|&&b| b == b'\r' || b == b'\n').count();
            input = &input[skip..];
            if input.is_empty() {
                return None;
            }
        }
        let old = d.head.len();
        let parsed = if old == 0 {
            parse_head(role, input)
        } else {
            let take = input.len().min(HEAD_LIMIT_BYTES.saturating_sub(old) + 1);
            d.head.extend_from_slice(&input[..take]);
            parse_head(role, &d.head)
        };
        match parsed {
            Ok(Some((len, head))) => {
                // The head ends in this segment's bytes: what follows is the body.
                let used = len.saturating_sub(old);
                d.head.clear();
                let start_ns = d.start_ns;
                self.message(dir, head, start_ns, facts);
                Some(input.get(used..).unwrap_or(&[]))
            }
            Ok(None) => {
                let have = if old == 0 { input.len() } else { d.head.len() };
                if have > HEAD_LIMIT_BYTES {
                    facts.problems.over_limit += 1;
                    d.state = State::Stopped;
                    d.head = Vec::new();
                } else if old == 0 {
                    d.head.extend_from_slice(input);
                }
                None
            }
            Err(e) => {
                match e {
                    HeadError::Malformed => facts.problems.http_malformed += 1,
                    HeadError::OverLimit => facts.problems.over_limit += 1,
                }
                d.state = State::Stopped;
                d.head = Vec::new();
                None
            }
        }
    }
    /// A complete head: counts it, keeps the first one's facts, decides how its body ends.
    fn message(&mut self, dir: usize, head: Head, start_ns: u64, facts: &mut Facts) {
        let http: &mut HttpFacts = facts.http.get_or_insert_with(Box::default);
        let mut framing = head.framing;
        match head.role {
            Role::Requests => {
                http.requests = http.requests.saturating_add(1);
                if http.first_request_ns.is_none() {
                    http.first_request_ns = Some(start_ns);
                    http.method = head.method.clone();
                    http.target = head.target;
                    http.host = head.host;
                    http.user_agent = head.user_agent;
                }
                if self.pending.len() < PENDING_LIMIT {
                    self.pending.push_back(match head.method.as_deref() {
                        _ if head.simple => Pending::Simple,
                        Some("HEAD") => Pending::Head,
                        Some("CONNECT") => Pending::Connect,
                        _ => Pending::Other,
                    });
                }
            }
            Role::Responses => {
                http.responses = http.responses.saturating_add(1);
                let status = head.status.unwrap_or(0);
                if http.first_response_ns.is_none() {
                    http.first_response_ns = Some(start_ns);
                    http.status = head.status;
                }
                // RFC 9112 §6.3: no body for 1xx, 204, 304 and answers to HEAD; a 2xx to
                // CONNECT and a 101 turn the connection into something else.
                if (100..200).contains(&status) {
                    framing = if status == 101 { Framing::Close } else { Framing::None };
                } else {
                    let asked = self.pending.pop_front();
                    if status == 204 || status == 304 || asked == Some(Pending::Head) {
                        framing = Framing::None;
                    } else if asked == Some(Pending::Connect) && (200..300).contains(&status) {
                        framing = Framing::Close;
                    }
                }
            }
        }
        let d = &mut self.dirs[dir];
        d.state = match framing {
            Framing::None | Framing::Length(0) => State::Head,
            Framing::Length(n) => State::Body(n),
            Framing::Chunked => State::Chunked(Chunk::Size { size: 0, digit: false, ext: false, len: 0 }),
            Framing::Close => State::Stopped,
        };
        if framing == Framing::Close {
            // A tunnel or an upgrade: the other direction stops speaking HTTP too.
            for d in &mut self.dirs {
                d.state = State::Stopped;
                d.head = Vec::new();
            }
        }
    }
}

/// Bytes of a direction's start enough to tell its role: the longest method and a space.
const START_PEEK_BYTES: usize = 12;

/// `n` bytes of a body with a length: what of them is in `input` is passed over, the rest is
/// handed on.
#[inline(always)]
fn body<'i>(d: &mut Direction, n: u64, input: &'i [u8]) -> &'i [u8] {
    let k = usize::try_from(n).unwrap_or(usize::MAX).min(input.len());
    let left = n - k as u64;
    d.state = if left == 0 { State::Head } else { State::Body(left) };
    &input[k..]
}

/// A chunked body, from the chunk state `c`: its chunks are passed over, and what follows the
/// last is handed on; a malformed or oversized chunk line stops the direction.
#[inline(always)]
fn chunks<'i>(d: &mut Direction, c: Chunk, input: &'i [u8], problems: &mut Problems) -> &'i [u8] {
    let (used, next) = chunked(c, input);
    d.state = match next {
        Ok(Some(c)) => State::Chunked(c),
        Ok(None) => State::Head,
        Err(HeadError::Malformed) => {
            problems.http_malformed += 1;
            State::Stopped
        }
        Err(HeadError::OverLimit) => {
            problems.over_limit += 1;
            State::Stopped
        }
    };
    input.get(used..).unwrap_or(&[])
}

/// What a direction's first bytes announce.
enum Start {
    Role(Role),
    /// A prefix of a method or of `HTTP/1.`: the next bytes will tell.
    NeedMore,
    /// Not HTTP/1.x.
    Other,
}

fn start_of(bytes: &[u8]) -> Start {
    const STATUS: &[u8] = b"HTTP/1.";
    if bytes.starts_with(STATUS) {
        return Start::Role(Role::Responses);
    }
    match bytes.iter().take(START_PEEK_BYTES).position(|&b| b == b' ') {
        Some(sp) if METHODS.contains(&&bytes[..sp]) => Start::Role(Role::Requests),
        Some(_) => Start::Other,
        None if bytes.len() < START_PEEK_BYTES
            && (STATUS.starts_with(bytes) || METHODS.iter().any(|m| m.starts_with(bytes))) =>
        {
            Start::NeedMore
        }
        None => Start::Other,
    }
}

/// The role a flow's first segment announces, if it is HTTP/1.x (recognition reads that one
/// segment: it must hold a method and its space, or `HTTP/1.`).
fn role_of(bytes: &[u8]) -> Option<Role> {
    match start_of(bytes) {
        Start::Role(r) => Some(r),
        Start::NeedMore | Start::Other => None,
    }
}

fn config() -> httparse::ParserConfig {
    let mut c = httparse::ParserConfig::default();
    c.allow_obsolete_multiline_headers_in_responses(true)
        .allow_multiple_spaces_in_request_line_delimiters(true)
        .allow_multiple_spaces_in_response_status_delimiters(true)
        .allow_spaces_after_header_name_in_responses(true)
        .ignore_invalid_headers_in_responses(true);
    c
}

/// Parses a head at the start of `buf`: its length and content once complete, `None` while
/// more bytes are needed.
fn parse_head(role: Role, buf: &[u8]) -> Result<Option<(usize, Head)>, HeadError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let cfg = config();
    let (status, fields, head) = match role {
        Role::Requests => {
            let mut req = httparse::Request::new(&mut headers);
            let status = match cfg.parse_request(&mut req, buf) {
                Ok(status) => status,
                Err(e) => match lax_request(buf, req.headers, e)? {
                    Some(found) => return Ok(Some(found)),
                    None => return Ok(None),
                },
            };
            let httparse::Status::Complete(len) = status else { return Ok(None) };
            let head = Head {
                role,
                method: req.method.map(str::to_owned),
                target: req.path.map(str::to_owned),
                host: None,
                user_agent: None,
                status: None,
                simple: false,
                framing: Framing::None,
            };
            (len, req.headers, head)
        }
        Role::Responses => {
            let mut resp = httparse::Response::new(&mut headers);
            let status = cfg.parse_response(&mut resp, buf).map_err(head_error)?;
            let httparse::Status::Complete(len) = status else { return Ok(None) };
            let head = Head {
                role,
                method: None,
                target: None,
                host: None,
                user_agent: None,
                status: resp.code,
                simple: false,
                framing: Framing::Close,
            };
            (len, resp.headers, head)
        }
    };
    read_fields(role, head, fields).map(|head| Some((status, head)))
}

/// Takes what a head's header fields say into it: Host, User-Agent and how its body is framed.
fn read_fields(role: Role, mut head: Head, fields: &[httparse::Header<'_>]) -> Result<Head, HeadError> {
    let mut length: Option<u64> = None;
    let mut chunked = false;
    let mut other_coding = false;
    for h in fields.iter() {
        if h.name.eq_ignore_ascii_case("host") {
            if head.host.is_none() {
                head.host = Some(text(h.value));
            }
        } else if h.name.eq_ignore_ascii_case("user-agent") {
            if head.user_agent.is_none() {
                head.user_agent = Some(text(h.value));
            }
        } else if h.name.eq_ignore_ascii_case("content-length") {
            // RFC 9110 §8.6: a list of identical values is the value; differing ones are an error.
            for v in h.value.split(|&b| b == b',') {
                let n = decimal(v.trim_ascii()).ok_or(HeadError::Malformed)?;
                if length.is_some_and(|l| l != n) {
                    return Err(HeadError::Malformed);
                }
                length = Some(n);
            }
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            // RFC 9112 §6.3: chunked must be the final coding.
            let last = h.value.rsplit(|&b| b == b',').next().unwrap_or(&[]).trim_ascii();
            chunked = last.eq_ignore_ascii_case(b"chunked");
            other_coding = !chunked;
        }
    }
    head.framing = if chunked {
        Framing::Chunked
    } else if other_coding {
        // A request with a coding other than chunked cannot be framed (RFC 9112 §6.3 item 4).
        if role == Role::Requests {
            return Err(HeadError::Malformed);
        }
        Framing::Close
    } else if let Some(n) = length {
        Framing::Length(n)
    } else if role == Role::Requests {
        Framing::None
    } else {
        Framing::Close
    };
    Ok(head)
}

impl Head {
    /// The answer to an HTTP/0.9 request: no status, the body until the connection closes.
    fn simple_response() -> Head {
        Head {
            role: Role::Responses,
            method: None,
            target: None,
            host: None,
            user_agent: None,
            status: None,
            simple: true,
            framing: Framing::Close,
        }
    }
}

/// A request head `httparse` refuses for its request line, read as Zeek and Wireshark read it
/// (the header fields after the line must still parse):
/// - a method of ours, a target and a last word that begins with `HTTP/1.` (or `HTTP/0.`)
///   however it goes on (`HTTP/1.`, `HTTP/1.0.8`); the target is what lies between, spaces
///   kept, maybe empty (a version of another major, `HTTP/3.0`, stays malformed on TCP);
/// - a method and one target without a version: an HTTP/0.9 request (RFC 1945 §4.1's
///   Simple-Request), whose line is the whole request unless header fields follow it.
///
/// No control bytes in the line. `Ok(None)` while the line or its fields are incomplete.
fn lax_request<'b>(
    buf: &'b [u8],
    headers: &mut [httparse::Header<'b>],
    refused: httparse::Error,
) -> Result<Option<(usize, Head)>, HeadError> {
    let Some(end) = buf.iter().position(|&b| b == b'\n') else {
        return Ok(None);
    };
    let line = &buf[..end];
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let words: Vec<&[u8]> = line.split(|&b| b == b' ').filter(|w| !w.is_empty()).collect();
    let bad = || Err(head_error(refused));
    let Some((&method, rest)) = words.split_first() else { return bad() };
    if !METHODS.contains(&method) || line.iter().any(|&b| b.is_ascii_control() && b != b'\t') {
        return bad();
    }
    let (target, simple) = match rest {
        [target] if !target.starts_with(b"HTTP/") => (*target, true),
        [between @ .., version] if version.starts_with(b"HTTP/1.") || version.starts_with(b"HTTP/0.") => {
            // The target's bytes as sent, from its first word to its last.
            let target = match (between.first(), between.last()) {
                (Some(first), Some(last)) => {
                    let from = first.as_ptr() as usize - line.as_ptr() as usize;
                    let to = last.as_ptr() as usize - line.as_ptr() as usize + last.len();
                    &line[from..to]
                }
                _ => &[][..],
            };
            (target, false)
        }
        _ => return bad(),
    };
    let head = Head {
        role: Role::Requests,
        method: Some(text(method)),
        target: Some(text(target)),
        host: None,
        user_agent: None,
        status: None,
        simple,
        framing: Framing::None,
    };
    let after = &buf[end + 1..];
    if simple && (after.is_empty() || after.starts_with(b"\r\n") || after.starts_with(b"\n")) {
        // HTTP/0.9: no fields; a blank line after it is skipped as between messages.
        return Ok(Some((end + 1, head)));
    }
    match httparse::parse_headers(after, headers) {
        Ok(httparse::Status::Complete((len, fields))) => {
            read_fields(Role::Requests, head, fields).map(|head| Some((end + 1 + len, head)))
        }
        Ok(httparse::Status::Partial) => Ok(None),
        Err(_) if simple => Ok(Some((end + 1, head))),
        Err(e) => Err(head_error(e)),
    }
}

#[cold]
fn head_error(e: httparse::Error) -> HeadError {
    match e {
        httparse::Error::TooManyHeaders => HeadError::OverLimit,
        _ => HeadError::Malformed,
    }
}

fn text(v: &[u8]) -> String {
    String::from_utf8_lossy(v.trim_ascii()).into_owned()
}

fn decimal(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 19 {
        return None;
    }
    v.iter().try_fold(0u64, |n, &b| b.is_ascii_digit().then(|| n * 10 + u64::from(b - b'0')))
}

/// Advances the chunked framing over `input`: the bytes used and the next state (`None`: the
/// message ended, the head of the next follows).
fn chunked(mut c: Chunk, input: &[u8]) -> (usize, Result<Option<Chunk>, HeadError>) {
    let mut i = 0;
    while i < input.len() {
        match c {
            Chunk::Data(n) => {
                let k = usize::try_from(n).unwrap_or(usize::MAX).min(input.len() - i);
                i += k;
                let left = n - k as u64;
                c = if left == 0 { Chunk::DataEnd } else { Chunk::Data(left) };
                continue;
            }
            Chunk::DataEnd => {
                let b = input[i];
                i += 1;
                match b {
                    b'\r' => {}
                    b'\n' => c = Chunk::Size { size: 0, digit: false, ext: false, len: 0 },
                    _ => return (i, Err(HeadError::Malformed)),
                }
            }
            Chunk::Size { size, digit, ext, len } => {
                let b = input[i];
                i += 1;
                if len >= LINE_LIMIT_BYTES {
                    return (i, Err(HeadError::OverLimit));
                }
                let len = len + 1;
                match b {
                    b'\n' => {
                        if !digit {
                            return (i, Err(HeadError::Malformed));
                        }
                        c = if size == 0 { Chunk::Trailer { len: 0 } } else { Chunk::Data(size) };
                    }
                    b'\r' => c = Chunk::Size { size, digit, ext: true, len },
                    _ if ext => c = Chunk::Size { size, digit, ext, len },
                    b';' | b' ' | b'\t' => c = Chunk::Size { size, digit, ext: true, len },
                    _ => {
                        let v = match (b as char).to_digit(16) {
                            Some(v) => u64::from(v),
                            None => return (i, Err(HeadError::Malformed)),
                        };
                        let size = match size.checked_mul(16).and_then(|s| s.checked_add(v)) {
                            Some(s) => s,
                            None => return (i, Err(HeadError::Malformed)),
                        };
                        c = Chunk::Size { size, digit: true, ext, len };
                    }
                }
            }
            Chunk::Trailer { len } => {
                let b = input[i];
                i += 1;
                match b {
                    b'\n' if len == 0 => return (i, Ok(None)),
                    b'\n' => c = Chunk::Trailer { len: 0 },
                    b'\r' => {}
                    _ if len >= LINE_LIMIT_BYTES => return (i, Err(HeadError::OverLimit)),
                    _ => c = Chunk::Trailer { len: len + 1 },
                }
            }
        }
    }
    (i, Ok(Some(c)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Dir, Problems, CLIENT, SERVER};

    struct Run {
        parser: HttpParser,
        facts: Facts,
        last: Verdict,
    }

    impl Run {
        fn new() -> Run {
            Run { parser: HttpParser::new(), facts: Facts::default(), last: Verdict::More }
        }
        fn send(&mut self, dir: Dir, ts_ns: u64, bytes: &[u8]) -> Verdict {
            let seg = Segment { dir, ts_ns, bytes, cut: false, wire_len: bytes.len() as u32 };
            self.last = self.parser.segment(&seg, &mut self.facts);
            self.last
        }
        fn http(&self) -> &HttpFacts {
            self.facts.http.as_deref().expect("http facts")
        }
    }

    #[test]
    fn not_mine_quickly() {
        for first in [
            &b"\x16\x03\x01\x02\x00"[..],
            b"SSH-2.0-OpenSSH_9.0\r\n",
            b"GETX / HTTP/1.1\r\n",
            b"get / HTTP/1.1",
            b"HTTP/2 200",
            b"",
        ] {
            let mut r = Run::new();
            assert_eq!(r.send(CLIENT, 1, first), Verdict::NotMine, "{first:?}");
            assert_eq!(r.facts, Facts::default(), "NotMine leaves the facts alone");
        }
    }

    #[test]
    fn a_request_and_its_response() {
        let mut r = Run::new();
        let req =
            b"GET /index.html?q=1 HTTP/1.1\r\nHost: Example.ORG:8080\r\nUser-Agent: curl/8.5.0\r\nAccept: */*\r\n\r\n";
        assert_eq!(r.send(CLIENT, 10, req), Verdict::More);
        let resp = b"HTTP/1.1 404 Not Found\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\nnope!";
        assert_eq!(r.send(SERVER, 20, resp), Verdict::More);
        let h = r.http();
        assert_eq!((h.requests, h.responses), (1, 1));
        assert_eq!(h.method.as_deref(), Some("GET"));
        assert_eq!(h.target.as_deref(), Some("/index.html?q=1"));
        assert_eq!(h.host.as_deref(), Some("Example.ORG:8080"), "as sent");
        assert_eq!(h.user_agent.as_deref(), Some("curl/8.5.0"));
        assert_eq!(h.status, Some(404));
        assert_eq!((h.first_request_ns, h.first_response_ns), (Some(10), Some(20)));
        assert_eq!(r.facts.problems, Problems::default());
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    /// arkime's tests/pcap/http-simple-get.pcap: frame 4's request and the start of frame 6's
    /// response (`tshark -e tcp.payload`), whose 5039-byte body continues in later frames.
    const CURL_GET: &str = "474554202f20485454502f312e310d0a557365722d4167656e743a206375726c2f372e32342e3020287838365f36342d6170706c652d64617277696e31322e3029206c69626375726c2f372e32342e30204f70656e53534c2f302e392e3879207a6c69622f312e322e350d0a486f73743a20787878787878787878787878782e7878782e636f6d0d0a4163636570743a202a2f2a0d0a0d0a";
    const APACHE_403: &str = "485454502f312e312034303320466f7262696464656e0d0a446174653a204d6f6e2c203235204e6f7620323031332031343a35353a353220474d540d0a5365727665723a204170616368652f322e322e3135202843656e744f53290d0a4163636570742d52616e6765733a2062797465730d0a436f6e74656e742d4c656e6774683a20353033390d0a436f6e6e656374696f6e3a20636c6f73650d0a436f6e74656e742d547970653a20746578742f68746d6c3b20636861727365743d5554462d380d0a0d0a3c21444f43545950452068746d6c";

    #[test]
    fn a_real_exchange() {
        let mut r = Run::new();
        assert_eq!(r.send(CLIENT, 4, &hex(CURL_GET)), Verdict::More);
        assert_eq!(r.send(SERVER, 6, &hex(APACHE_403)), Verdict::More);
        let h = r.http();
        assert_eq!((h.method.as_deref(), h.target.as_deref()), (Some("GET"), Some("/")));
        assert_eq!(h.host.as_deref(), Some("xxxxxxxxxxxxx.xxx.com"));
        assert_eq!(
            h.user_agent.as_deref(),
            Some("curl/7.24.0 (x86_64-apple-darwin12.0) libcurl/7.24.0 OpenSSL/0.9.8y zlib/1.2.5")
        );
        assert_eq!((h.status, h.requests, h.responses), (Some(403), 1, 1));
        assert_eq!(r.parser.dirs[SERVER].state, State::Body(5039 - 14), "the body is skipped by its length");
    }

    #[test]
    fn persistent_connection_with_bodies_split_anywhere() {
        // Two requests (the first with a body), three responses (one chunked, one to HEAD with a
        // length but no body, one with a length), fed one byte at a time and in one piece.
        let client = b"POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n\r\nbodyHEAD /b HTTP/1.1\r\nHost: h2\r\n\r\nGET /c HTTP/1.1\r\nHost: h3\r\n\r\n";
        let server = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n4;x=y\r\nwiki\r\n5\r\npedia\r\n0\r\nExpires: never\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nHTTP/1.1 304 Not Modified\r\nContent-Length: 12\r\n\r\n";
        for step in [1, 7, usize::MAX] {
            // A first segment carries at least a method (recognition reads one segment).
            let mut r = Run::new();
            r.send(CLIENT, 1, &client[..8]);
            for part in client[8..].chunks(step.min(client.len())) {
                r.send(CLIENT, 1, part);
            }
            for part in server.chunks(step.min(server.len())) {
                r.send(SERVER, 2, part);
            }
            let h = r.http();
            assert_eq!((h.requests, h.responses), (3, 3), "step {step}");
            assert_eq!(h.method.as_deref(), Some("POST"));
            assert_eq!(h.host.as_deref(), Some("h"));
            assert_eq!(h.status, Some(200));
            assert_eq!(r.facts.problems, Problems::default(), "step {step}");
        }
    }

    #[test]
    fn interim_responses_and_until_close() {
        let mut r = Run::new();
        r.send(CLIENT, 1, b"PUT /up HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n");
        r.send(SERVER, 2, b"HTTP/1.1 100 Continue\r\n\r\n");
        r.send(CLIENT, 3, b"abc");
        r.send(SERVER, 4, b"HTTP/1.0 200 OK\r\n\r\nbody until close HTTP/1.1 200 OK\r\n\r\n");
        let h = r.http();
        assert_eq!((h.requests, h.responses), (1, 2), "the body read until close is not parsed");
        assert_eq!(h.status, Some(100));
    }

    #[test]
    fn switching_protocols_stops_both_directions() {
        let mut r = Run::new();
        r.send(CLIENT, 1, b"GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n");
        assert_eq!(
            r.send(SERVER, 2, b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n\x81\x05hello"),
            Verdict::Done
        );
        assert_eq!(r.http().responses, 1);
    }

    #[test]
    fn head_spanning_segments_and_the_limit() {
        let mut r = Run::new();
        r.send(CLIENT, 5, b"GET / HTTP/1.1\r\nHo");
        r.send(CLIENT, 6, b"st: split.example\r\n");
        assert_eq!(r.http().requests, 0);
        r.send(CLIENT, 7, b"\r\n");
        assert_eq!(r.http().host.as_deref(), Some("split.example"));
        assert_eq!(r.http().first_request_ns, Some(5), "the time the request began");

        let mut r = Run::new();
        r.send(CLIENT, 1, b"GET / HTTP/1.1\r\n");
        let filler = format!("X-Filler: {}\r\n", "a".repeat(1000));
        for _ in 0..9 {
            r.send(CLIENT, 1, filler.as_bytes());
        }
        r.send(CLIENT, 1, b"\r\n");
        assert_eq!(r.facts.problems.over_limit, 1);
        assert_eq!(r.http().requests, 0);
        assert!(r.parser.dirs[CLIENT].head.capacity() == 0, "the buffer is given back");
    }

    #[test]
    fn malformed_heads_and_framing() {
        let cases: &[(&[u8], &[u8])] = &[
            (b"GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 1, 2\r\n\r\n", b""),
            (b"GET / HTTP/1.1\r\nHost: h\r\nContent-Length: -1\r\n\r\n", b""),
            (b"GET / HTTP/1.1\r\nBad Header\r\n\r\n", b""),
            (b"GET / HTTP/3.0\r\n\r\n", b""),
            (b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", b""),
            (b"GET / HTTP/1.1\r\n\r\n", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"),
            (b"GET / HTTP/1.1\r\n\r\n", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\n"),
            (b"GET / HTTP/1.1\r\n\r\n", b"\x00\x01garbage"),
        ];
        for (c, s) in cases {
            let mut r = Run::new();
            r.send(CLIENT, 1, c);
            if !s.is_empty() {
                r.send(SERVER, 2, s);
            }
            assert_eq!(
                r.facts.problems.http_malformed,
                1,
                "{:?} / {:?}",
                String::from_utf8_lossy(c),
                String::from_utf8_lossy(s)
            );
        }
    }

    #[test]
    fn response_first_and_lone_directions() {
        // A capture that missed the request: the server's response claims the flow.
        let mut r = Run::new();
        assert_eq!(
            r.send(SERVER, 1, b"HTTP/1.1 301 Moved Permanently\r\nLocation: /x\r\nContent-Length: 0\r\n\r\n"),
            Verdict::More
        );
        assert_eq!(r.http().status, Some(301));
        assert_eq!(r.http().method, None);
    }

    #[test]
    fn never_panics_on_noise() {
        // Every prefix of a valid exchange, and bytes flipped in it.
        let c = b"GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n";
        for cut in 0..c.len() {
            let mut r = Run::new();
            r.send(CLIENT, 1, &c[..cut]);
            r.send(CLIENT, 1, &c[cut..]);
        }
        let mut x = 0x1234_5678u32;
        for _ in 0..2000 {
            let mut b = c.to_vec();
            for _ in 0..3 {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                let at = x as usize % b.len();
                b[at] = (x >> 8) as u8;
            }
            let mut r = Run::new();
            r.send(CLIENT, 1, &b);
            r.send(SERVER, 1, &b);
        }
    }

    #[test]
    fn http_09_requests() {
        // Zeek's http_09.pcap: a request line without a version, and a body without a head.
        let mut r = Run::new();
        assert_eq!(r.send(CLIENT, 10, b"GET /zeek.html\r\n"), Verdict::More);
        assert_eq!(r.send(SERVER, 20, b"<html>\n  The Zeek Network Security Monitor\n</html>\n"), Verdict::Done);
        let h = r.http();
        assert_eq!((h.requests, h.responses), (1, 1));
        assert_eq!((h.method.as_deref(), h.target.as_deref()), (Some("GET"), Some("/zeek.html")));
        assert_eq!((h.status, h.first_request_ns, h.first_response_ns), (None, Some(10), Some(20)));
        assert_eq!(r.facts.problems, Problems::default());
        // A line cut before its end waits; a bare LF ends it; blank lines after it are skipped.
        let mut r = Run::new();
        assert_eq!(r.send(CLIENT, 1, b"POST /zeek."), Verdict::More);
        assert_eq!(r.send(CLIENT, 2, b"html\n\r\n"), Verdict::More);
        assert_eq!((r.http().requests, r.http().target.as_deref()), (1, Some("/zeek.html")));
        assert_eq!(r.facts.problems, Problems::default());
        // A server that answers with a head answers as HTTP/1.x.
        assert_eq!(r.send(SERVER, 3, b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok"), Verdict::More);
        assert_eq!((r.http().responses, r.http().status), (1, Some(200)));
        // Zeek's http-09-content-length-confusion.pcap: the server speaks first, then the
        // client's simple request; the server's direction is HTTP/1.x already.
        let mut r = Run::new();
        r.send(SERVER, 1, b"HTTP/1.1 200 OK\r\n");
        r.send(SERVER, 2, b"Content-Length: 4\r\n");
        r.send(SERVER, 3, b"\r\n");
        r.send(CLIENT, 4, b"GET /\r\n");
        r.send(CLIENT, 5, b"\r\n");
        r.send(SERVER, 6, b"this is too much.\n");
        let h = r.http();
        assert_eq!((h.requests, h.responses, h.method.as_deref(), h.status), (1, 1, Some("GET"), Some(200)));
        assert_eq!(r.facts.problems.http_malformed, 1, "the cruft after the 4-byte body");
        // Not requests: a third word that is no version, a control byte, an unknown method.
        for line in [&b"GET / HTTP/1.1 x\r\n"[..], b"GET /\x01\r\n", b"GET  \r\n"] {
            let mut r = Run::new();
            r.send(CLIENT, 1, line);
            assert_eq!((r.http().requests, r.facts.problems.http_malformed), (0, 1), "{line:?}");
        }
        // Request lines Zeek and Wireshark read and httparse refuses: a version cut short, no
        // target, a target with a space (Zeek's methods.pcap, http-connect.pcap), a versionless
        // line with header fields after it.
        for (head, target) in [
            (&b"GET / HTTP/1.\r\nHost: h\r\n\r\n"[..], "/"),
            (b"OPTIONS HTTP/1.1\r\nHost: h\r\n\r\n", ""),
            (b"GET /HTTP/1.1\r\nHost: h\r\n\r\n", "/HTTP/1.1"),
            (b"PUT /x HTTP/1.0.8\r\nHost: h\r\nContent-Length: 3\r\n\r\nabcGET / HTTP/1.1\r\n\r\n", "/x"),
        ] {
            let mut r = Run::new();
            r.send(CLIENT, 1, head);
            let h = r.http();
            assert_eq!((h.target.as_deref(), h.host.as_deref()), (Some(target), Some("h")), "{head:?}");
            assert_eq!(r.facts.problems, Problems::default(), "{head:?}");
            assert_eq!(h.requests, 1 + u32::from(head.len() > 60), "{head:?}: the body is skipped by its length");
        }
        let mut r = Run::new();
        r.send(CLIENT, 1, b"CONNECT mailin03.sul.t-online.de:25 / HTTP/1.0\r\n\r\n");
        assert_eq!(r.http().target.as_deref(), Some("mailin03.sul.t-online.de:25 /"));
        assert_eq!(r.send(SERVER, 2, b"HTTP/1.0 200 OK\r\n\r\n"), Verdict::Done, "a tunnel");
        // Cut inside the line and inside its fields: it waits for the rest.
        let mut r = Run::new();
        r.send(CLIENT, 1, b"GET / HTT");
        r.send(CLIENT, 2, b"P/1.\r\nHost: ");
        r.send(CLIENT, 3, b"h\r\n\r\n");
        assert_eq!((r.http().requests, r.http().host.as_deref()), (1, Some("h")));
        // A bad field after a lax line is still malformed.
        let mut r = Run::new();
        r.send(CLIENT, 1, b"GET / HTTP/1.\r\nHo st: h\r\n\r\n");
        assert_eq!((r.http().requests, r.facts.problems.http_malformed), (0, 1));
        // A body without a head answers only a simple request.
        let mut r = Run::new();
        r.send(CLIENT, 1, b"GET / HTTP/1.1\r\nHost: h\r\n\r\n");
        r.send(SERVER, 2, b"<html>");
        assert_eq!((r.http().responses, r.facts.problems.http_malformed), (0, 1));
    }
}
