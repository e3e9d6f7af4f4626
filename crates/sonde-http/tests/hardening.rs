//! The server under attack, faults and bad input (issue 20), over real TCP on 127.0.0.1: idle
//! crowds beyond the connection cap, slow and idle clients, oversized heads and bodies, bad JSON,
//! foreign `Host` names without a token, stream and definition caps, big sorts beside
//! `/api/status`, and the security headers. No assertion is on a duration: where the server acts
//! later (a timeout), the test waits for the outcome, with a generous guard.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{finished, snapshot, TCP_LOG};
use serde_json::Value;
use sonde_http::{
    router_with, serve_in_background, Access, Background, ChangeRefused, ConnectionStats, DefinitionChange,
    DefinitionEditor, Limits, Phase, RunState, Table,
};

/// A guard against a hang, never an expectation of speed.
const GUARD: Duration = Duration::from_secs(60);

struct Server {
    addr: SocketAddr,
    stats: Arc<ConnectionStats>,
    bg: Option<Background>,
}

impl Server {
    fn start(state: Arc<RunState>, access: Access, limits: Limits) -> Server {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let stats = Arc::new(ConnectionStats::default());
        state.add_export_counters(stats.counters());
        let app = router_with(state, access, &limits);
        let bg = serve_in_background(listener, app, limits, stats.clone()).unwrap();
        Server { addr, stats, bg: Some(bg) }
    }

    fn connect(&self) -> TcpStream {
        let s = TcpStream::connect(self.addr).unwrap();
        s.set_read_timeout(Some(GUARD)).unwrap();
        s
    }

    /// Sends `head` (without the blank line) and `body` with `Connection: close`; the answer's
    /// status, head and body.
    fn send(&self, head: &str, body: &[u8]) -> (u16, String, String) {
        let mut s = self.connect();
        let host = if head.to_ascii_lowercase().contains("\r\nhost:") { String::new() } else { self.host() };
        let req = format!("{head}\r\n{host}connection: close\r\ncontent-length: {}\r\n\r\n", body.len());
        s.write_all(req.as_bytes()).unwrap();
        s.write_all(body).unwrap();
        let mut answer = Vec::new();
        s.read_to_end(&mut answer).expect("the answer, then the connection closed");
        parse(&answer)
    }

    fn host(&self) -> String {
        format!("host: {}\r\n", self.addr)
    }

    fn get(&self, path: &str) -> (u16, String, String) {
        self.send(&format!("GET {path} HTTP/1.1"), b"")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(bg) = self.bg.take() {
            let _ = bg.stop();
        }
    }
}

fn parse(answer: &[u8]) -> (u16, String, String) {
    let text = String::from_utf8_lossy(answer);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let code = head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (code, head.to_ascii_lowercase(), body.to_string())
}

fn error_code(body: &str) -> String {
    let v: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body:?}"));
    v["error"].as_str().unwrap_or_else(|| panic!("no error code: {body}")).to_string()
}

/// Waits until `done` holds (the server acts on its own clock), at most [`GUARD`].
fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !done() {
        assert!(start.elapsed() < GUARD, "never: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Lets this process hold the crowd's sockets (2,000 clients beside the server's): the soft
/// descriptor limit raised towards the hard one (a default of 1,024 would not do).
fn raise_descriptor_limit(wanted: u64) {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit with a valid pointer to an rlimit.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < wanted {
            lim.rlim_cur = wanted.min(lim.rlim_max);
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

fn open_descriptors() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}

/// Issue 20: ~20,000 idle connections exhausted the descriptors and kept token holders out.
/// Here 2,000 idle sockets (40× the cap of 50) connect; the server holds at most 50 of them, the
/// rest are evicted (they never passed the token check), and a token holder is answered.
#[test]
fn an_idle_crowd_beyond_the_cap_never_keeps_a_token_holder_out() {
    raise_descriptor_limit(8192);
    // The trusted connection waits out the crowd between two requests: hyper's header timeout
    // runs while a kept-alive connection waits for its next request, and the crowd takes 5–15 s
    // on a loaded machine, so it must not be the default 10 s (the test failed when it was).
    let limits = Limits { max_connections: 50, header_timeout: GUARD, ..Limits::default() };
    let server = Server::start(finished(), Access::Token("s3cret".into()), limits);
    // A connection that has passed the check is trusted: it keeps its slot.
    let mut trusted = server.connect();
    let keep_alive = format!("GET /api/status HTTP/1.1\r\n{}authorization: Bearer s3cret\r\n\r\n", server.host());
    trusted.write_all(keep_alive.as_bytes()).unwrap();
    let mut first = [0u8; 12];
    trusted.read_exact(&mut first).unwrap();
    assert_eq!(&first, b"HTTP/1.1 200");
    let before = open_descriptors();
    let crowd: Vec<TcpStream> = (0..2000).map(|_| TcpStream::connect(server.addr).unwrap()).collect();
    let (code, _, body) = server.send("GET /api/status HTTP/1.1\r\nauthorization: bearer s3cret", b"");
    assert_eq!(code, 200, "{body}");
    // The token holder's connection came after the crowd: every one of them has been taken and
    // all but 50 let go (the server's side of the evicted sockets is closed).
    let evicted = server.stats.evicted.load(Ordering::Relaxed);
    assert!(evicted >= 2000 - 50, "evicted {evicted}");
    eventually("the server's side of evicted sockets closed", || open_descriptors() <= before + crowd.len() + 60);
    // The evicted ones see their connection closed.
    let mut oldest = &crowd[0];
    oldest.set_read_timeout(Some(GUARD)).unwrap();
    assert_eq!(oldest.read(&mut [0u8; 16]).unwrap_or(0), 0);
    // The trusted connection kept its slot through the crowd.
    let mut rest = vec![0u8; 4096];
    let _ = trusted.read(&mut rest).unwrap();
    trusted.write_all(keep_alive.as_bytes()).unwrap();
    trusted.read_exact(&mut first).unwrap();
    assert_eq!(&first, b"HTTP/1.1 200");
    let (_, _, metrics) = server.send("GET /metrics HTTP/1.1\r\nauthorization: Bearer s3cret", b"");
    assert!(metrics.contains("sonde_http_connections_total{outcome=\"evicted\"}"), "{metrics}");
    drop(crowd);
}

/// When every slot holds a trusted connection, a new one is answered 503 and closed.
#[test]
fn beyond_a_cap_of_trusted_connections_a_new_one_is_refused() {
    let server = Server::start(finished(), Access::Open, Limits { max_connections: 2, ..Limits::default() });
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut s = server.connect();
        write!(s, "GET /api/status HTTP/1.1\r\n{}\r\n", server.host()).unwrap();
        let mut first = [0u8; 12];
        s.read_exact(&mut first).unwrap();
        assert_eq!(&first, b"HTTP/1.1 200");
        held.push(s);
    }
    let (code, head, body) = server.get("/api/status");
    assert_eq!((code, error_code(&body).as_str()), (503, "too_many_connections"), "{head}");
    assert_eq!(server.stats.refused.load(Ordering::Relaxed), 1);
    drop(held);
    eventually("a slot is free again", || server.get("/api/status").0 == 200);
}

/// A client that sends its headers slowly is cut off by the header-read timeout.
#[test]
fn a_slow_header_is_cut_off() {
    let limits = Limits { header_timeout: Duration::from_millis(300), ..Limits::default() };
    let server = Server::start(finished(), Access::Open, limits);
    let mut s = server.connect();
    write!(s, "GET /api/status HTTP/1.1\r\n{}", server.host()).unwrap();
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).expect("closed by the server, not by the guard");
    eventually("counted", || server.stats.timed_out.load(Ordering::Relaxed) == 1);
}

/// A connection on which nothing moves (no request ever, or none after the first) is closed by
/// the idle timeout.
#[test]
fn an_idle_connection_is_closed() {
    let limits = Limits { idle_timeout: Duration::from_millis(300), header_timeout: GUARD * 2, ..Limits::default() };
    let server = Server::start(finished(), Access::Open, limits);
    let mut silent = server.connect();
    let mut rest = Vec::new();
    silent.read_to_end(&mut rest).expect("closed by the server, not by the guard");
    assert!(rest.is_empty());
    let mut kept = server.connect();
    write!(kept, "GET /api/status HTTP/1.1\r\n{}\r\n", server.host()).unwrap();
    kept.read_to_end(&mut rest).expect("answered, then closed when idle");
    assert!(rest.starts_with(b"HTTP/1.1 200"));
    eventually("counted", || server.stats.timed_out.load(Ordering::Relaxed) == 2);
}

#[test]
fn an_oversized_head_is_431_and_an_oversized_body_413() {
    let server = Server::start(running(), Access::Open, Limits::default());
    let big = "x".repeat(20_000);
    let (code, _, _) = server.send(&format!("GET /api/status HTTP/1.1\r\nx-filler: {big}"), b"");
    assert_eq!(code, 431);
    let line = format!("{{\"version\": 1, \"definition\": \"w = tcp.dport == 80 {}\"}}", " ".repeat(70_000));
    let (code, _, body) =
        server.send("POST /api/definitions HTTP/1.1\r\ncontent-type: application/json", line.as_bytes());
    assert_eq!((code, error_code(&body).as_str()), (413, "too_large"), "{body}");
}

/// Malformed JSON, the wrong type, a wrong shape, bad queries: each a 4xx with a JSON message,
/// never a 5xx.
#[test]
fn bad_bodies_and_queries_are_4xx_with_a_message() {
    let server = Server::start(running(), Access::Open, Limits::default());
    let json = "content-type: application/json";
    let cases: [(&str, &str, &[u8], u16, &str); 10] = [
        ("POST", json, b"{not json", 400, "bad_json"),
        ("POST", json, b"", 400, "bad_json"),
        ("POST", json, b"\xff\xfe", 400, "bad_json"),
        ("POST", "content-type: text/plain", b"{\"version\":1,\"definition\":\"a = tcp\"}", 415, "bad_json"),
        ("POST", json, b"{\"version\":\"one\",\"definition\":\"a = tcp\"}", 422, "bad_json"),
        ("POST", json, b"[]", 422, "bad_json"),
        ("POST", json, b"{\"version\":-1,\"definition\":\"a\"}", 422, "bad_json"),
        ("POST", json, b"{\"version\":1,\"definition\":\"nonsense\"}", 422, "invalid_definition"),
        ("PUT", json, b"{\"version\":1}", 422, "bad_json"),
        ("PUT", json, b"{\"version\":1,\"definition\":\"other = tcp\"}", 400, "name_mismatch"),
    ];
    for (method, ctype, body, want, code) in cases {
        let path = if method == "PUT" { "/api/definitions/web" } else { "/api/definitions" };
        let (got, _, answer) = server.send(&format!("{method} {path} HTTP/1.1\r\n{ctype}"), body);
        assert_eq!((got, error_code(&answer).as_str()), (want, code), "{method} {:?}", String::from_utf8_lossy(body));
    }
    for path in [
        "/api/definitions/web?version=abc",
        "/api/flows?limit=-1",
        "/api/flows?port=99999",
        "/api/intervals?since=soon",
        "/api/stream?resolution_ms=x",
    ] {
        let method = if path.starts_with("/api/definitions/") { "DELETE" } else { "GET" };
        let (got, _, answer) = server.send(&format!("{method} {path} HTTP/1.1"), b"");
        assert_eq!((got, error_code(&answer).as_str()), (400, "bad_query"), "{path}");
    }
    // A path parameter that is not UTF-8 once decoded.
    let (got, _, answer) = server.get("/api/tables/%FF");
    assert_eq!((got, error_code(&answer).as_str()), (400, "bad_path"));
}

/// DNS rebinding: without a token, a `Host` that is not loopback is refused (421); with a token
/// the name does not matter.
#[test]
fn without_a_token_only_loopback_names_are_answered() {
    let server = Server::start(finished(), Access::Open, Limits::default());
    let port = server.addr.port();
    for host in [format!("evil.example:{port}"), "evil.example".into(), format!("10.1.2.3:{port}")] {
        for path in ["/api/status", "/", "/metrics"] {
            let (code, _, body) = server.send(&format!("GET {path} HTTP/1.1\r\nhost: {host}"), b"");
            assert_eq!((code, error_code(&body).as_str()), (421, "bad_host"), "{host} {path}");
        }
    }
    for host in [format!("localhost:{port}"), format!("127.0.0.1:{port}"), format!("[::1]:{port}"), "localhost".into()]
    {
        assert_eq!(server.send(&format!("GET /api/status HTTP/1.1\r\nhost: {host}"), b"").0, 200, "{host}");
    }
    let token = Server::start(finished(), Access::Token("s3cret".into()), Limits::default());
    let (code, _, _) =
        token.send("GET /api/status HTTP/1.1\r\nhost: probe.example\r\nauthorization: Bearer s3cret", b"");
    assert_eq!(code, 200);
    // Two Host headers (issue 38): refused whatever their order, with a token or without. Before,
    // the first one's check decided: loopback first, then any name, was answered.
    let two = [
        format!("host: localhost:{port}\r\nhost: evil.example"),
        format!("host: evil.example\r\nhost: localhost:{port}"),
    ];
    for hosts in &two {
        let (code, _, body) = server.send(&format!("GET /api/status HTTP/1.1\r\n{hosts}"), b"");
        assert_eq!((code, error_code(&body).as_str()), (400, "bad_host"), "{hosts}");
    }
    let (code, _, body) = token.send(
        "GET /api/status HTTP/1.1\r\nhost: probe.example\r\nhost: other.example\r\nauthorization: Bearer s3cret",
        b"",
    );
    assert_eq!((code, error_code(&body).as_str()), (400, "bad_host"));
}

#[test]
fn every_answer_carries_the_security_headers() {
    let server = Server::start(finished(), Access::Token("s3cret".into()), Limits::default());
    for path in ["/", "/assets/app.js", "/api/status", "/api/nope", "/api/status?token=wrong"] {
        let (code, head, _) = server.get(path);
        assert!(code > 0, "{path}");
        for needed in [
            "content-security-policy: default-src 'self'",
            "frame-ancestors 'none'",
            "x-frame-options: deny",
            "x-content-type-options: nosniff",
            "referrer-policy: no-referrer",
        ] {
            assert!(head.contains(needed), "{path} ({code}) lacks {needed}: {head}");
        }
    }
}

/// Beyond `max_streams` live-stream clients, 503; a client that leaves gives its place back.
#[test]
fn stream_clients_are_capped() {
    let limits = Limits { max_streams: 2, idle_timeout: Duration::from_secs(4), ..Limits::default() };
    let server = Server::start(finished(), Access::Open, limits);
    let open = || {
        let mut s = server.connect();
        write!(s, "GET /api/stream HTTP/1.1\r\n{}\r\n", server.host()).unwrap();
        let mut first = [0u8; 12];
        s.read_exact(&mut first).unwrap();
        (s, first)
    };
    let (a, first) = open();
    assert_eq!(&first, b"HTTP/1.1 200");
    let (_b, first) = open();
    assert_eq!(&first, b"HTTP/1.1 200");
    let (code, _, body) = server.get("/api/stream");
    assert_eq!((code, error_code(&body).as_str()), (503, "too_many_streams"));
    drop(a);
    // The server learns that the client left at its next keep-alive.
    eventually("a stream place is free again", || {
        let (mut s, first) = open();
        let ok = &first == b"HTTP/1.1 200";
        if ok {
            let _ = s.flush();
        }
        ok
    });
}

/// An engine stand-in that accepts every change it can read.
struct Accepting(Mutex<u64>);

impl DefinitionEditor for Accepting {
    fn apply(&self, expected: u64, change: DefinitionChange) -> Result<u64, ChangeRefused> {
        if matches!(&change, DefinitionChange::Add(l) if !l.contains('=')) {
            return Err(ChangeRefused::Invalid("line 1, column 1: expected =".into()));
        }
        let mut v = self.0.lock().unwrap();
        if expected != *v {
            return Err(ChangeRefused::StaleVersion { current: *v });
        }
        *v += 1;
        Ok(*v)
    }
}

fn running() -> Arc<RunState> {
    RunState::with_editor(snapshot(Phase::Running), Some(Box::new(Accepting(Mutex::new(1)))))
}

/// Issue 20: the API took any number of definitions (1,182 made a monitor render 4.2 GB every
/// drain). The snapshot counts 2 (a definition and an association); with a limit of 3, one more
/// is taken, the next refused, and a removal makes room — even before the engine's next
/// snapshot shows the changes.
#[test]
fn definitions_beyond_the_limit_are_refused() {
    let server = Server::start(running(), Access::Open, Limits { max_definitions: 3, ..Limits::default() });
    let add = |version: u64, name: &str| {
        let body = format!("{{\"version\": {version}, \"definition\": \"{name} = tcp.dport == 80\"}}");
        server.send("POST /api/definitions HTTP/1.1\r\ncontent-type: application/json", body.as_bytes())
    };
    assert_eq!(add(1, "a").0, 200);
    let (code, _, body) = add(2, "b");
    assert_eq!((code, error_code(&body).as_str()), (409, "too_many_definitions"), "{body}");
    assert_eq!(server.send("DELETE /api/definitions/a?version=2 HTTP/1.1", b"").0, 200);
    assert_eq!(add(3, "b").0, 200);
}

/// Issue 20: eight sorts of a 2 M-flow log kept `/api/status` waiting 18 s. Sorts now run off
/// the async workers: with six big sorts in flight, `/api/status` is answered before any of
/// them (on the old server, a worker had to finish a sort first).
#[test]
fn big_sorts_leave_status_answered() {
    let header = TCP_LOG.lines().next().unwrap();
    let mut log = format!("{header}\n");
    for i in 0..1_000_000u64 {
        let b = (i * 7919) % 100_003;
        log.push_str(&format!(
            "10.{}.{}.{}\t{}\t10.9.9.9\t80\t{b}\t{}.5\t1\n",
            i >> 16,
            (i >> 8) & 255,
            i & 255,
            i % 60_000,
            i % 97
        ));
    }
    let mut snap = snapshot(Phase::Finished);
    snap.flows.tcp = Table::from_tsv(&log);
    drop(log);
    let server = Arc::new(Server::start(RunState::new(snap), Access::Open, Limits::default()));
    let done = Arc::new(AtomicUsize::new(0));
    let sorts: Vec<_> = (0..6)
        .map(|i| {
            let (server, done) = (server.clone(), done.clone());
            std::thread::spawn(move || {
                let order = if i % 2 == 0 { "asc" } else { "desc" };
                let asked = std::time::Instant::now();
                let (code, _, _) = server.get(&format!("/api/flows?sort=c_bytes_all&order={order}&limit=10"));
                done.fetch_add(1, Ordering::SeqCst);
                eprintln!("sort {i}: {:?}", asked.elapsed());
                code
            })
        })
        .collect();
    // The sorts' requests go first (this orders them; it asserts nothing about speed). Not
    // longer: an optimised build sorts a million rows in about 100 ms, and a sort done before
    // /api/status is asked would count as one it waited for.
    std::thread::sleep(Duration::from_millis(20));
    let asked = std::time::Instant::now();
    let (code, _, _) = server.get("/api/status");
    let finished_sorts = done.load(Ordering::SeqCst);
    // Reported, not asserted.
    eprintln!("/api/status beside the sorts: {:?}", asked.elapsed());
    assert_eq!(code, 200);
    for s in sorts {
        assert_eq!(s.join().unwrap(), 200);
    }
    assert_eq!(finished_sorts, 0, "/api/status waited for a sort");
}
