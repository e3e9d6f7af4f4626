//! Agreement with Zeek's connection vocabulary: sonde's `conn_state` and `history` columns
//! against the conn.log Zeek's own tests expect for their captures (../shared/oracles/zeek, Zeek
//! 9.1.0-dev). Flows are paired by their endpoints (Zeek's baselines mask the times); where one
//! tuple has several flows they pair in order. Counted over TCP and UDP flows that pair (Zeek
//! also logs the tunnels sonde decapsulates, and ICMP, which sonde keeps in its own log).
//!
//! `SONDE_ZEEK_LIST=1 cargo test -p sonde --test zeek_agreement -- --nocapture` prints every
//! disagreement.

mod common;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use common::{analyze, read_tsv, shared_dir};

/// Shares of `conn_state` and `history` measured on the oracle's captures (docs/zeek.md, with
/// the reason of every disagreement), rounded down, in %: a regression fails. With sonde's
/// flow lifetimes, and with Zeek's (`--zeek-lifetimes`).
const DEFAULT_FLOORS: (f64, f64) = (93.0, 89.0);
const ZEEK_LIFETIMES_FLOORS: (f64, f64) = (98.0, 95.0);

/// One flow as a log gives it: the tuple (originator first), its state and history.
#[derive(Debug, Clone)]
struct Conn {
    proto: String,
    orig: (String, u16),
    resp: (String, u16),
    state: String,
    history: String,
}

impl Conn {
    /// The tuple in a fixed order, so that both orientations pair.
    fn key(&self) -> (String, (String, u16), (String, u16)) {
        let (a, b) = if self.orig <= self.resp { (&self.orig, &self.resp) } else { (&self.resp, &self.orig) };
        (self.proto.clone(), a.clone(), b.clone())
    }
}

/// The rows of a Zeek log (its columns named by the `#fields` line), as field maps.
fn zeek_rows(text: &str) -> Vec<HashMap<String, String>> {
    let mut fields: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for line in text.lines() {
        if let Some(h) = line.strip_prefix("#fields\t") {
            fields = h.split('\t').map(str::to_string).collect();
        } else if !line.starts_with('#') {
            out.push(fields.iter().cloned().zip(line.split('\t').map(str::to_string)).collect());
        }
    }
    out
}

fn zeek_conns(conn_log: &str) -> Option<Vec<Conn>> {
    let rows = zeek_rows(conn_log);
    let need = ["id.orig_h", "id.orig_p", "id.resp_h", "id.resp_p", "proto", "conn_state", "history"];
    if rows.first().is_none_or(|r| !need.iter().all(|f| r.contains_key(*f))) {
        return None;
    }
    Some(
        rows.into_iter()
            .filter(|r| matches!(r["proto"].as_str(), "tcp" | "udp"))
            .map(|r| Conn {
                proto: r["proto"].clone(),
                orig: (r["id.orig_h"].clone(), r["id.orig_p"].parse().unwrap()),
                resp: (r["id.resp_h"].clone(), r["id.resp_p"].parse().unwrap()),
                state: r["conn_state"].clone(),
                history: if r["history"] == "-" { String::new() } else { r["history"].clone() },
            })
            .collect(),
    )
}

fn sonde_conns(dir: &Path) -> Vec<Conn> {
    let mut out = Vec::new();
    for (file, proto) in [("tcp_flows.tsv", "tcp"), ("udp_flows.tsv", "udp")] {
        let mut rows = read_tsv(&dir.join(file));
        rows.sort_by(|a, b| a["first"].partial_cmp(&b["first"]).unwrap());
        for r in rows {
            out.push(Conn {
                proto: proto.to_string(),
                orig: (r["c_ip"].clone(), r["c_port"].parse().unwrap()),
                resp: (r["s_ip"].clone(), r["s_port"].parse().unwrap()),
                state: r["conn_state"].clone(),
                history: if r["history"] == "-" { String::new() } else { r["history"].clone() },
            });
        }
    }
    out
}

#[derive(Default)]
struct Tally {
    paired: usize,
    state: usize,
    history: usize,
    unpaired_zeek: usize,
    /// Paired flows that sonde orients the other way (Zeek's "likely server port" rule).
    reversed: usize,
}

/// Runs every oracle capture with `extra` options; the tallies by capture.
fn agreement(shared: &Path, extra: &[&str]) -> BTreeMap<String, Tally> {
    let oracles = shared.join("oracles/zeek");
    let index = std::fs::read_to_string(oracles.join("INDEX.tsv")).expect("oracle index");
    let list = std::env::var_os("SONDE_ZEEK_LIST").is_some();
    let mut seen = HashSet::new();
    let mut by_capture: BTreeMap<String, Tally> = BTreeMap::new();
    for line in index.lines().skip(1) {
        let f: Vec<&str> = line.split('\t').collect();
        let (test, capture, logs) = (f[0], f[1], f[2]);
        if !logs.split(',').any(|l| l == "conn.log") || !seen.insert(capture.to_string()) {
            continue;
        }
        let Ok(conn_log) = std::fs::read_to_string(oracles.join(test).join("conn.log")) else { continue };
        let Some(zeek) = zeek_conns(&conn_log) else {
            seen.remove(capture);
            continue;
        };
        let trace = shared.join("traces").join(capture);
        if !trace.is_file() {
            continue;
        }
        let args: Vec<&str> = ["--outputs", "tcp_flows,udp_flows"].iter().chain(extra).copied().collect();
        let (dir, output) = analyze(&trace, &args);
        assert!(output.status.success(), "{capture}: {}", String::from_utf8_lossy(&output.stderr));
        let mut ours: HashMap<_, Vec<Conn>> = HashMap::new();
        for c in sonde_conns(dir.path()) {
            ours.entry(c.key()).or_default().push(c);
        }
        let tally = by_capture.entry(capture.to_string()).or_default();
        let mut used: HashMap<_, usize> = HashMap::new();
        for z in &zeek {
            let key = z.key();
            let next = used.entry(key.clone()).or_default();
            let Some(s) = ours.get(&key).and_then(|v| v.get(*next)) else {
                tally.unpaired_zeek += 1;
                continue;
            };
            *next += 1;
            tally.paired += 1;
            tally.reversed += usize::from(s.orig != z.orig);
            tally.state += usize::from(s.state == z.state);
            tally.history += usize::from(s.history == z.history);
            if list && (s.state != z.state || s.history != z.history) {
                eprintln!(
                    "{extra:?} {capture}: {} {:?} -> {:?}: zeek {} {:?}, sonde {} {:?}{}",
                    z.proto,
                    z.orig,
                    z.resp,
                    z.state,
                    z.history,
                    s.state,
                    s.history,
                    if s.orig != z.orig { " (oriented the other way)" } else { "" }
                );
            }
        }
    }
    by_capture
}

/// The shares of paired flows whose state and history agree, in %, printed with the table.
fn shares(by_capture: &BTreeMap<String, Tally>, what: &str) -> (f64, f64) {
    let mut total = Tally::default();
    eprintln!("{what}:");
    eprintln!("{:<90} {:>6} {:>6} {:>6} {:>8} {:>8}", "capture", "paired", "state", "hist", "reversed", "unpaired");
    for (capture, t) in by_capture {
        eprintln!(
            "{capture:<90} {:>6} {:>6} {:>6} {:>8} {:>8}",
            t.paired, t.state, t.history, t.reversed, t.unpaired_zeek
        );
        total.paired += t.paired;
        total.state += t.state;
        total.history += t.history;
        total.reversed += t.reversed;
        total.unpaired_zeek += t.unpaired_zeek;
    }
    let share = |n: usize| 100.0 * n as f64 / total.paired.max(1) as f64;
    eprintln!(
        "{what}: {} captures, {} flows paired ({} oriented the other way, {} of Zeek's unpaired): conn_state {}, {:.1} %, history {}, {:.1} %",
        by_capture.len(),
        total.paired,
        total.reversed,
        total.unpaired_zeek,
        total.state,
        share(total.state),
        total.history,
        share(total.history)
    );
    assert!(total.paired >= 100, "{what}: too few flows paired: {}", total.paired);
    (share(total.state), share(total.history))
}

#[test]
fn conn_state_and_history_agree_with_zeeks_baselines() {
    let Some(shared) = shared_dir() else { return };
    let (state, history) = shares(&agreement(&shared, &[]), "sonde's lifetimes");
    assert!(state >= DEFAULT_FLOORS.0, "conn_state agrees on {state:.1} %");
    assert!(history >= DEFAULT_FLOORS.1, "history agrees on {history:.1} %");
    let (state, history) = shares(&agreement(&shared, &["--zeek-lifetimes"]), "--zeek-lifetimes");
    assert!(state >= ZEEK_LIFETIMES_FLOORS.0, "--zeek-lifetimes: conn_state agrees on {state:.1} %");
    assert!(history >= ZEEK_LIFETIMES_FLOORS.1, "--zeek-lifetimes: history agrees on {history:.1} %");
}
