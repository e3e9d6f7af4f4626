//! Changes to the set of definitions at run time (sonde-define): a change file
//! (`--definition-changes`) and the HTTP API's edits (`POST /api/definitions`,
//! `PUT|DELETE /api/definitions/{name}`), applied between packets as the engine applies them.
//!
//! Input, in parts split by 0 bytes: the starting definitions, the change file, the HTTP
//! edits (one a line: `POST BODY`, `PUT NAME BODY` or `DELETE NAME VERSION`, BODY being the
//! API's JSON `{"version": N, "definition": "LINE"}`), then packet times (one byte each: a
//! step of that many 100 ms). Asserts: the set's version is 1 plus the changes accepted
//! (scheduled and immediate); a refused change leaves the version alone; the counter's
//! matcher after each change matches what a fresh compile of the active lines matches; every
//! output can be written.

use serde::Deserialize;
use sonde_define::{parse_change_file, parse_definitions, Change, Compiled, Counter, Layers, MAX_NAME_BYTES};
use sonde_wire::{decode_with_offsets, LinkType, PacketSummary};

/// The HTTP API's change body (sonde-http's `ChangeBody`).
#[derive(Deserialize)]
struct ChangeBody {
    version: u64,
    definition: String,
}

/// A few frames the definitions can tell apart: a TCP SYN, a data segment, an ACK, a UDP datagram.
fn frames() -> Vec<Vec<u8>> {
    let ip = |proto: u8, l4: &[u8]| {
        let mut v = vec![0x45, 0, 0, 0, 0, 1, 0x40, 0, 64, proto, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
        v[2..4].copy_from_slice(&((20 + l4.len()) as u16).to_be_bytes());
        v.extend_from_slice(l4);
        v
    };
    let tcp = |flags: u8, payload: &[u8]| {
        let mut v = vec![0xc3, 0x50, 0, 80, 0, 0, 0, 1, 0, 0, 0, 9, 0x50, flags, 0xff, 0xff, 0, 0, 0, 0];
        v.extend_from_slice(payload);
        ip(6, &v)
    };
    vec![
        tcp(0x02, b""),
        tcp(0x18, b"GET / HTTP/1.1\r\n"),
        tcp(0x10, b""),
        ip(17, &[0x9c, 0x40, 0, 53, 0, 12, 0, 0, 1, 2, 3, 4]),
    ]
}

fn main() {
    let frames = frames();
    afl::fuzz!(|data: &[u8]| {
        let mut parts = data.split(|&b| b == 0);
        let mut text = || std::str::from_utf8(parts.next().unwrap_or(&[])).ok().map(str::to_owned);
        let (Some(start), Some(changes), Some(edits)) = (text(), text(), text()) else { return };
        let times = data.rsplit(|&b| b == 0).next().unwrap_or(&[]);
        let Ok(defs) = parse_definitions(&start, MAX_NAME_BYTES) else { return };
        let mut counter = Counter::new(defs, Some(1_000_000_000), 4);
        let mut accepted = 0u64;
        if let Ok(scheduled) = parse_change_file(&changes) {
            counter.schedule(scheduled);
        }
        let mut edits = edits.lines();
        let mut ts_ns = 1_700_000_000_000_000_000u64;
        let mut logged = 0;
        for (i, &step) in times.iter().enumerate() {
            ts_ns += u64::from(step) * 100_000_000;
            // An operator's edit, as the engine applies it: at the packet time reached.
            if let Some(change) = edits.next().and_then(http_edit) {
                let (change, expected) = change;
                let before = counter.version();
                let expected = expected.unwrap_or(before);
                match counter.change_now(ts_ns, expected, change) {
                    Ok(set_change) => {
                        counter.settle(set_change);
                        accepted += 1;
                        assert_eq!(counter.version(), before + 1);
                    }
                    Err(_) => assert_eq!(counter.version(), before, "a refused change moved the version"),
                }
                logged += 1;
            }
            let frame = &frames[i % frames.len()];
            let mut s = PacketSummary::EMPTY;
            let off = decode_with_offsets(LinkType::RAW, frame, frame.len() as u32, &mut s).unwrap();
            let layers = Layers::of(LinkType::RAW, frame, &s, &off);
            counter.packet(ts_ns, &layers, frame.len() as u32);
            // The live matcher matches as the active lines compiled afresh.
            let active: Vec<String> = counter.totals().into_iter().filter(|t| !t.retired).map(|t| t.text).collect();
            if let Ok(defs) = parse_definitions(&active.join("\n"), MAX_NAME_BYTES) {
                let (mut a, mut b) = (Vec::new(), Vec::new());
                counter.matcher().matches(&layers, &mut a);
                Compiled::new(&defs).matches(&layers, &mut b);
                assert_eq!(a.len(), b.len(), "the live matcher and a fresh compile disagree");
            }
        }
        let log = counter.change_log();
        assert!(log.len() >= logged);
        // The log holds the scheduled changes and the immediate ones alike.
        let ok = log.iter().filter(|o| o.result.is_ok()).count() as u64;
        assert!(accepted <= ok);
        assert_eq!(counter.version(), 1 + ok, "version != 1 + changes accepted");
        let mut out = String::new();
        counter.write_tsv(&mut out);
        counter.gaps_table().write_tsv(&mut out);
        counter.flows_table().write_tsv(&mut out);
        counter.associations_table().write_tsv(&mut out);
    });
}

/// One line of edits as the HTTP API reads it; None: the API refuses it before the engine
/// sees it (bad JSON, a name that is not the line's).
fn http_edit(line: &str) -> Option<(Change, Option<u64>)> {
    let (verb, rest) = line.split_once(' ')?;
    match verb {
        "POST" => {
            let b: ChangeBody = serde_json::from_str(rest).ok()?;
            Some((Change::Add(b.definition), Some(b.version)))
        }
        "PUT" => {
            let (name, body) = rest.split_once(' ')?;
            let b: ChangeBody = serde_json::from_str(body).ok()?;
            let named = b.definition.split(|c: char| c.is_whitespace() || c == ':' || c == '=').next().unwrap_or("");
            (named == name).then_some((Change::Replace(b.definition), Some(b.version)))
        }
        "DELETE" => {
            let (name, version) = rest.split_once(' ')?;
            Some((Change::Remove(name.to_owned()), Some(version.trim().parse().ok()?)))
        }
        _ => None,
    }
}
