//! HTTP/1.x facts from real captures, connection by connection, against Zeek's own http.log
//! baselines (`../shared/oracles/zeek/*/http.log`, Zeek 9.1-dev's btest outputs for the
//! captures of `../shared/traces/`).
//!
//! Each TCP connection of a capture (the client is the SYN's sender, else the first sender, as
//! in `http_dns.rs`) gets a `Session` fed every payload. Zeek writes one http.log line per
//! transaction; for each connection of the log (its four-tuple, `id.orig_*` the client) the first
//! transaction with a method gives the method, the URI and the Host, the first with a status code
//! the status (Zeek's `0` for an HTTP/0.9 answer is no status), and the lines with a method the
//! request count (compared where each direction carried no more than `STREAM_LIMIT_BYTES`).
//! Every disagreement must be listed in `KNOWN` with its reason, and every entry must still occur.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use common::{for_each_frame, traces_dir, Ends};
use sonde_l7::{Session, Transport, CLIENT, SERVER, STREAM_LIMIT_BYTES};
use sonde_wire::Transport as Wire;

/// Disagreements explained: (Zeek test name, the connection's client port (0: every
/// connection of the test), field ("*": every field), reason).
const KNOWN: &[(&str, u16, &str, &str)] = &[
    // Connections sonde-wire does not reach: the HTTP inside is never seen.
    ("core.nflog", 0, "*", "NFLOG (link type 239) is not a link type sonde-wire reads"),
    ("core.tunnels.ayiya", 0, "*", "sonde-wire does not open AYIYA (UDP 5072)"),
    ("core.tunnels.gre-over-udp", 0, "*", "sonde-wire does not open GRE over UDP (RFC 8086, port 4754)"),
    ("core.tunnels.teredo", 0, "*", TEREDO),
    ("core.tunnels.teredo_bubble_with_payload", 0, "*", TEREDO),
    (
        "core.tunnels.gtp.outer_ip_frag",
        1923,
        "*",
        "the GTP-U packet holding the request is an outer IP fragment: no IP reassembly",
    ),
    // Zeek's methods.pcap probes request lines. CCM_POST is no method of HTTP's registry: a
    // flow is claimed only by a method sonde knows.
    ("scripts.base.protocols.http.http-methods", 46577, "*", CCM_POST),
    ("scripts.base.protocols.http.http-methods", 46578, "*", CCM_POST),
    ("scripts.base.protocols.http.http-methods", 46581, "*", CCM_POST),
    // A versionless request line with header fields (`GET /HTTP/1.1`) answered by an HTTP/1.0
    // head: Zeek takes the answer for an HTTP/0.9 body (status 0); sonde, as tshark, reads its
    // status.
    ("scripts.base.protocols.http.http-methods", 46568, "status", ANSWERED_09),
    ("scripts.base.protocols.http.http-methods", 46583, "status", ANSWERED_09),
    ("scripts.base.protocols.http.http-methods", 46588, "status", ANSWERED_09),
    ("scripts.base.protocols.http.http-methods", 46593, "status", ANSWERED_09),
    ("scripts.base.protocols.http.http-methods", 46598, "status", ANSWERED_09),
    ("scripts.base.protocols.http.http-methods", 46603, "status", ANSWERED_09),
    ("scripts.base.protocols.http.http-methods", 46608, "status", ANSWERED_09),
    // `Mozilla 4.0 (compatible; ...)` alone on a line of the CONNECT request's head: not a header
    // field (no colon), and the head is refused; Zeek passes over the line.
    ("scripts.base.protocols.http.http-connect", 3378, "*", "an invalid header line refuses the request head"),
];

const TEREDO: &str = "sonde-wire does not open Teredo (IPv6 in UDP 3544)";
const CCM_POST: &str = "CCM_POST is not a method sonde recognises";
const ANSWERED_09: &str = "Zeek reads the HTTP/1.0 answer to a versionless request as an HTTP/0.9 body";

/// What Zeek's http.log says of one connection.
#[derive(Debug, Default)]
struct Theirs {
    method: Option<String>,
    target: Option<String>,
    host: Option<String>,
    status: Option<u16>,
    requests: u32,
}

/// The client and server of a connection.
type Conn = ((IpAddr, u16), (IpAddr, u16));

fn oracles_dir() -> PathBuf {
    traces_dir().join("../oracles/zeek")
}

/// (test name, capture) of every baseline with an http.log whose capture is in the corpus.
fn baselines() -> Vec<(String, String)> {
    let index = std::fs::read_to_string(oracles_dir().join("INDEX.tsv")).expect("read the Zeek oracles' INDEX.tsv");
    index
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            let (test, capture, logs) = (*f.first()?, *f.get(1)?, *f.get(2)?);
            let has_log = logs.split(',').any(|l| l == "http.log");
            (has_log && traces_dir().join(capture).is_file()).then(|| (test.to_owned(), capture.to_owned()))
        })
        .collect()
}

/// Zeek's http.log, by connection.
fn read_http_log(path: &Path) -> BTreeMap<Conn, Theirs> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let mut fields: Vec<&str> = Vec::new();
    let mut conns: BTreeMap<Conn, Theirs> = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("#fields\t") {
            fields = rest.split('\t').collect();
            continue;
        }
        if line.starts_with('#') || fields.is_empty() {
            continue;
        }
        let vals: Vec<&str> = line.split('\t').collect();
        // `-` is unset, `(empty)` the empty string.
        let get = |name: &str| {
            let v = fields.iter().position(|f| *f == name).and_then(|i| vals.get(i)).copied().unwrap_or("-");
            (v != "-").then_some(if v == "(empty)" { "" } else { v })
        };
        let addr = |name: &str| get(name).and_then(|v| v.parse::<IpAddr>().ok());
        let port = |name: &str| get(name).and_then(|v| v.parse::<u16>().ok());
        let (Some(oh), Some(op), Some(rh), Some(rp)) =
            (addr("id.orig_h"), port("id.orig_p"), addr("id.resp_h"), port("id.resp_p"))
        else {
            panic!("{}: a line without its connection: {line}", path.display());
        };
        let t = conns.entry(((oh, op), (rh, rp))).or_default();
        if let Some(m) = get("method") {
            t.requests += 1;
            if t.method.is_none() {
                t.method = Some(m.to_owned());
                t.target = get("uri").map(unescape);
                t.host = get("host").map(unescape);
            }
        }
        if t.status.is_none() {
            t.status = get("status_code").and_then(|s| s.parse().ok()).filter(|&s| s != 0);
        }
    }
    conns
}

/// Zeek's log escaping (`\x20` for bytes it will not print as they are).
fn unescape(v: &str) -> String {
    let b = v.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && b.get(i + 1) == Some(&b'x') && i + 4 <= b.len() {
            if let Ok(x) = u8::from_str_radix(&v[i + 2..i + 4], 16) {
                out.push(x);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `%XX` decoded, as Zeek's http.log writes a URI; non-UTF-8 bytes become U+FFFD (as Zeek's
/// `\xXX` escapes, once unescaped, do).
fn percent_decoded(v: &str) -> String {
    let b = v.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex =
            b.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok()).and_then(|h| u8::from_str_radix(h, 16).ok());
        match (b[i], hex) {
            (b'%', Some(x)) => {
                out.push(x);
                i += 3;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

struct Flow {
    session: Session,
    client: (IpAddr, u16),
    server: (IpAddr, u16),
    bytes: [u64; 2],
}

/// Every TCP connection of a capture, fed to a Session.
fn ours(path: &Path) -> HashMap<Ends, Flow> {
    let mut flows: HashMap<Ends, Flow> = HashMap::new();
    for_each_frame(path, |d| {
        let Some(ends) = Ends::of(&d.summary) else { return };
        let Some(Wire::Tcp(t)) = d.summary.transport else { return };
        let flow = flows.entry(ends.key()).or_insert_with(|| {
            let client = if t.flags.syn() && t.flags.ack() { ends.dst } else { ends.src };
            let server = if client == ends.src { ends.dst } else { ends.src };
            Flow { session: Session::new(Transport::Tcp, client.1, server.1), client, server, bytes: [0; 2] }
        });
        let dir = if ends.src == flow.client { CLIENT } else { SERVER };
        let payload = d.payload.get(..d.payload.len().min(t.payload_len as usize)).unwrap_or(&[]);
        flow.bytes[dir] += u64::from(t.payload_len);
        if t.payload_len > 0 {
            let seq = t.seq.wrapping_add(u32::from(t.flags.syn()));
            flow.session.on_payload(dir, d.ts_ns, Some(seq), payload, t.payload_len);
        }
    });
    flows
}

#[test]
fn http_facts_agree_with_zeek_http_log() {
    let tests = baselines();
    assert!(tests.len() >= 20, "only {} Zeek baselines with an http.log and their capture", tests.len());
    let mut found: Vec<(String, u16, String, String)> = Vec::new();
    let (mut conns, mut fields) = (0usize, 0usize);
    for (test, capture) in &tests {
        let theirs = read_http_log(&oracles_dir().join(test).join("http.log"));
        let flows = ours(&traces_dir().join(capture));
        let by_conn: HashMap<Conn, &Flow> = flows.values().map(|f| ((f.client, f.server), f)).collect();
        for (conn, t) in &theirs {
            conns += 1;
            let flow = by_conn.get(conn);
            let h = flow.and_then(|f| f.session.facts().http.as_deref());
            let mut check = |field: &str, ours: String, zeek: String| {
                fields += 1;
                if ours != zeek {
                    found.push((test.clone(), conn.0 .1, field.to_owned(), format!("ours {ours}, Zeek {zeek}")));
                }
            };
            check("method", format!("{:?}", h.and_then(|h| h.method.as_deref())), format!("{:?}", t.method));
            // Zeek logs the URI percent-decoded; sonde keeps it as sent.
            let target = h.and_then(|h| h.target.as_deref()).map(percent_decoded);
            check("target", format!("{target:?}"), format!("{:?}", t.target));
            check("host", format!("{:?}", h.and_then(|h| h.host.as_deref())), format!("{:?}", t.host));
            check("status", format!("{:?}", h.and_then(|h| h.status)), format!("{:?}", t.status));
            if flow.is_some_and(|f| f.bytes.iter().all(|&b| b <= u64::from(STREAM_LIMIT_BYTES))) {
                check("requests", format!("{}", h.map_or(0, |h| h.requests)), format!("{}", t.requests));
            }
        }
    }
    let mut unexplained = Vec::new();
    for (test, port, field, what) in &found {
        match KNOWN.iter().find(|k| k.0 == test && (k.1 == *port || k.1 == 0) && (k.2 == field || k.2 == "*")) {
            Some(k) => eprintln!("known: {test} :{port} {field}: {what} ({})", k.3),
            None => unexplained.push(format!("{test} :{port} {field}: {what}")),
        }
    }
    let stale: Vec<_> = KNOWN
        .iter()
        .filter(|k| !found.iter().any(|f| f.0 == k.0 && (f.1 == k.1 || k.1 == 0) && (f.2 == k.2 || k.2 == "*")))
        .collect();
    eprintln!(
        "{} Zeek http.log baselines, {conns} connections, {fields} fields compared, {} disagreements ({} known)",
        tests.len(),
        found.len(),
        found.len() - unexplained.len()
    );
    assert!(conns >= 40, "too few connections compared: {conns}");
    assert!(unexplained.is_empty(), "{} unexplained disagreements:\n{}", unexplained.len(), unexplained.join("\n"));
    assert!(stale.is_empty(), "KNOWN entries that no longer occur: {stale:?}");
}
