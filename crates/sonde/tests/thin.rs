//! NATRA thinning (issue 6): `sonde thin` drops exactly the pure ACKs that do not complete a
//! handshake (counted independently with tshark), `sonde analyze --thin natra` equals the
//! analysis of the thinned trace for any thread count, and every complete flow stays complete
//! with its handshake RTTs unchanged.

mod common;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use common::*;

/// tshark's pure ACK as NATRA's Pseudocode 1 has it: ACK, no payload, not SYN or FIN (a RST+ACK
/// is one). ICMP errors are left out: tshark dissects the TCP header they quote, sonde sees ICMP.
const PURE_ACK: &str = "tcp.flags.ack==1 && tcp.len==0 && tcp.flags.syn==0 && tcp.flags.fin==0 && !icmp && !icmpv6";
/// Its RST+ACKs.
const RST_ACK: &str =
    "tcp.flags.ack==1 && tcp.len==0 && tcp.flags.syn==0 && tcp.flags.fin==0 && tcp.flags.reset==1 && !icmp && !icmpv6";

fn traces() -> Vec<PathBuf> {
    let mut traces = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/demo.pcap")];
    if let Some(shared) = shared_dir() {
        traces.extend(
            [
                "groundtruth/clean.pcap",
                "groundtruth/lossy.pcap",
                "groundtruth/mixed.pcap",
                "groundtruth/ipv6.pcap",
                "traces/realistic/nfstream+nfstream/tests/pcaps/skype.pcap",
                "traces/realistic/ntop+nDPI/tests/cfgs/default/pcap/alexa-app.pcapng",
                "traces/realistic/ntop+nDPI/tests/cfgs/default/pcap/KakaoTalk_talk.pcap",
                "traces/realistic/ntop+nDPI/tests/cfgs/default/pcap/synscan.pcap",
                "traces/realistic/arkime+arkime/tests/pcap/gtp-iphone.pcap",
            ]
            .iter()
            .map(|rel| shared.join(rel))
            .filter(|p| p.exists()),
        );
    }
    traces
}

/// Runs `sonde thin` on `trace` into `dir`; returns the output and the JSON report.
fn thin(trace: &Path, dir: &Path, extra: &[&str]) -> (PathBuf, serde_json::Value) {
    let out = dir.join(format!("thin.{}", trace.extension().unwrap().to_string_lossy()));
    let report = dir.join("report.json");
    let o = sonde()
        .args(["thin", "-q", "--force", "-r"])
        .arg(trace)
        .arg("-w")
        .arg(&out)
        .arg("--report")
        .arg(&report)
        .args(extra)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}: {}", trace.display(), String::from_utf8_lossy(&o.stderr));
    (out, serde_json::from_str(&std::fs::read_to_string(report).unwrap()).unwrap())
}

/// The handshake ACKs of `trace`, by tshark's fields: a client's SYN awaits its next segment
/// (same direction, sequence number ISN + 1), and so does the SYN/ACK that acknowledges ISN + 1
/// (its SYN may not have been captured); the first pure ACK that fits is it.
fn handshake_acks(trace: &Path) -> (u64, u64) {
    let fields = [
        "ip.src",
        "ip.dst",
        "ipv6.src",
        "ipv6.dst",
        "tcp.srcport",
        "tcp.dstport",
        "tcp.seq_raw",
        "tcp.ack_raw",
        "tcp.flags",
        "tcp.len",
    ];
    let mut cmd = std::process::Command::new("tshark");
    cmd.args(["-n", "-r"]).arg(trace).args(["-Y", "tcp && !icmp && !icmpv6", "-T", "fields", "-E", "occurrence=l"]);
    for f in fields {
        cmd.args(["-e", f]);
    }
    let out = cmd.output().expect("tshark (make deps installs it)");
    let mut awaited: HashSet<(String, String, String, String, u64)> = HashSet::new();
    let (mut found, mut found_rst) = (0, 0);
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let f: Vec<&str> = line.split('\t').collect();
        // The inner packet of a tunnel: tshark gives the last occurrence of each field.
        let (src, dst) = if f[2].is_empty() { (f[0], f[1]) } else { (f[2], f[3]) };
        let (sport, dport) = (f[4].to_string(), f[5].to_string());
        let (Ok(seq), Ok(ack)) = (f[6].parse::<u64>(), f[7].parse::<u64>()) else { continue };
        let flags = u16::from_str_radix(f[8].trim_start_matches("0x"), 16).unwrap();
        let len: u64 = f[9].parse().unwrap_or(0);
        let (syn, ack_flag, fin) = (flags & 2 != 0, flags & 0x10 != 0, flags & 1 != 0);
        if syn && ack_flag {
            awaited.insert((dst.into(), src.into(), dport, sport, ack));
        } else if syn {
            awaited.insert((src.into(), dst.into(), sport, dport, (seq + 1) % (1 << 32)));
        } else if ack_flag && !fin && len == 0 {
            let matched = awaited.remove(&(src.into(), dst.into(), sport, dport, seq));
            found += u64::from(matched);
            found_rst += u64::from(matched && flags & 4 != 0);
        }
    }
    (found, found_rst)
}

/// In one tshark pass over `trace`: `fields` of every frame that is not a pure ACK, and the
/// numbers of pure ACKs and of RST+ACKs among them (an io,stat tap, which sees every frame
/// whatever `-Y` shows).
fn others_and_pure_acks(trace: &Path, fields: &[&str]) -> (Vec<String>, u64, u64) {
    let mut cmd = std::process::Command::new("tshark");
    cmd.args(["-n", "-r"]).arg(trace).args(["-Y", &format!("!({PURE_ACK})"), "-T", "fields"]);
    for f in fields {
        cmd.args(["-e", f]);
    }
    cmd.args(["-z", &format!("io,stat,0,{PURE_ACK},{RST_ACK}")]);
    let out = cmd.output().expect("tshark (make deps installs it)");
    assert!(out.status.success(), "tshark: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let table = lines.iter().position(|l| l.starts_with("=====")).unwrap_or_else(|| panic!("no io,stat: {text}"));
    // The one interval's row: `| 0.000 <> 5.915 |    115 | 11818 |   7 |  378 |`.
    let row = lines[table..].iter().find(|l| l.contains("<>")).unwrap_or_else(|| panic!("no io,stat row: {text}"));
    let column = |n| row.split('|').nth(n).and_then(|c| c.trim().parse().ok()).unwrap_or_else(|| panic!("{row}"));
    (lines[..table].iter().map(|l| l.to_string()).collect(), column(2), column(4))
}

#[test]
fn thin_drops_the_pure_acks_but_each_handshakes_first() {
    for trace in traces() {
        let dir = tempfile::tempdir().unwrap();
        // The SYN scan opens 2,000 handshakes (up to 336 a second) that no ACK answers: some
        // meet in a slot, whatever the size (P is per handshake), and a collided slot lets
        // every pure ACK mapping to it pass. The count is then exact up to those passes.
        if trace.ends_with("synscan.pcap") {
            let (_, report) = thin(&trace, dir.path(), &[]);
            let t = &report["thinning"];
            let passes = t["table"]["collided_passes"].as_u64().unwrap();
            assert!(
                t["table"]["collisions"].as_u64().unwrap() > 0 && t["table"]["resizes"].as_u64().unwrap() > 0,
                "{t}"
            );
            let (_, pure, _) = others_and_pure_acks(&trace, &["frame.number"]);
            let (handshakes, _) = handshake_acks(&trace);
            let matched = t["handshakes"]["matched"].as_u64().unwrap();
            assert_eq!(t["dropped"]["packets"].as_u64().unwrap(), pure - matched - passes, "{t}");
            assert!(matched <= handshakes && handshakes <= matched + passes, "{t}");
            continue;
        }
        let (out, report) = thin(&trace, dir.path(), &[]);
        let name = trace.display();
        // Every frame that is not a pure ACK is kept, in order.
        let others = ["frame.time_epoch", "frame.len", "frame.cap_len", "tcp.flags"];
        let (kept, pure_kept, _) = others_and_pure_acks(&out, &others);
        let (before, pure, rst_acks) = others_and_pure_acks(&trace, &others);
        assert_eq!(before.len(), kept.len(), "{name}");
        if let Some(i) = (0..kept.len()).find(|&i| before[i] != kept[i]) {
            panic!("{name}: frame {i} of the others: {} became {}", before[i], kept[i]);
        }
        let (handshakes, handshake_rsts) = handshake_acks(&trace);
        let t = &report["thinning"];
        assert_eq!(t["table"]["collisions"], 0, "{name}");
        assert_eq!(t["dropped"]["packets"], pure - handshakes, "{name}: {pure} pure ACKs, {handshakes} handshakes");
        assert_eq!(t["dropped"]["rst_packets"], rst_acks - handshake_rsts, "{name}: {rst_acks} RST+ACKs");
        assert_eq!(pure_kept, handshakes, "{name}");
        assert_eq!(report["frames_written"].as_u64().unwrap() + pure - handshakes, report["frames_read"], "{name}");
        eprintln!(
            "{name}: {} frames, {pure} pure ACKs ({rst_acks} RST+ACK), {handshakes} handshake ACKs kept",
            report["frames_read"]
        );
    }
}

/// The outputs that must not depend on whether the thinning ran in the reader or before.
const SAME: [&str; 5] = ["tcp_flows.tsv", "udp_flows.tsv", "intervals.tsv", "quantiles.tsv", "histograms.tsv"];

#[test]
fn analyze_thin_equals_the_analysis_of_the_thinned_trace() {
    for trace in traces() {
        let dir = tempfile::tempdir().unwrap();
        let (thinned, report) = thin(&trace, dir.path(), &[]);
        for threads in ["1", "3"] {
            let (inline, o) = analyze(&trace, &["--thin", "natra", "--threads", threads, "--interval", "1"]);
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            let (before, o) = analyze(&thinned, &["--threads", threads, "--interval", "1"]);
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            for file in SAME {
                let a = std::fs::read(inline.path().join(file)).unwrap();
                let b = std::fs::read(before.path().join(file)).unwrap();
                assert!(a == b, "{} {file}, {threads} threads", trace.display());
            }
            let summary: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(inline.path().join("summary.json")).unwrap()).unwrap();
            assert_eq!(summary["thinning"]["dropped"], report["thinning"]["dropped"], "{}", trace.display());
            assert_eq!(summary["packets"]["read"], report["frames_read"]);
            let dropped = summary["thinning"]["dropped"]["packets"].as_u64().unwrap();
            assert_eq!(summary["packets"]["analysed"].as_u64().unwrap() + dropped, summary["packets"]["read"]);
        }
    }
}

#[test]
fn complete_flows_stay_complete_with_their_handshake_rtts() {
    for trace in traces() {
        let (plain, o) = analyze(&trace, &[]);
        assert!(o.status.success());
        let (thinned, o) = analyze(&trace, &["--thin", "natra"]);
        assert!(o.status.success());
        let key = |r: &HashMap<String, String>| (tuple(r), r["first"].clone());
        let after: HashMap<_, _> =
            read_tsv(&thinned.path().join("tcp_flows.tsv")).into_iter().map(|r| (key(&r), r)).collect();
        let mut complete = 0;
        for row in read_tsv(&plain.path().join("tcp_flows.tsv")).iter().filter(|r| r["complete"] == "1") {
            let other = after.get(&key(row)).unwrap_or_else(|| panic!("{}: {:?} gone", trace.display(), key(row)));
            for col in ["complete", "c_hs_rtt", "s_hs_rtt"] {
                assert_eq!(row[col], other[col], "{}: {col} of {:?}", trace.display(), key(row));
            }
            complete += 1;
        }
        eprintln!("{}: {complete} complete flows", trace.display());
    }
}

#[test]
fn thin_refuses_to_overwrite_and_bad_settings() {
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/demo.pcap");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.pcap");
    std::fs::write(&out, b"keep me").unwrap();
    let o = sonde().args(["thin", "-q", "-r"]).arg(&demo).arg("-w").arg(&out).output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--force"));
    assert_eq!(std::fs::read(&out).unwrap(), b"keep me");
    let o = sonde()
        .args(["thin", "-q", "--force", "--thin-collision", "1.5", "-r"])
        .arg(&demo)
        .arg("-w")
        .arg(&out)
        .output();
    let o = o.unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("collision probability"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let (_, o) = analyze(&demo, &["--thin-rate", "10"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("need --thin"));
    let (out_dir, o) = analyze(&demo, &[]);
    assert!(o.status.success());
    let summary = std::fs::read_to_string(out_dir.path().join("summary.json")).unwrap();
    assert!(summary.contains("\"thinning\": null"));
}

/// Issue 23: `-w -` writes the thinned trace to standard output (as `anon` does), the same bytes
/// as to a file, and no file named `-`; a reader that stops early (`| head`) is no error.
#[test]
fn thin_writes_to_standard_output_with_w_dash() {
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/demo.pcap");
    let dir = tempfile::tempdir().unwrap();
    let (file, _) = thin(&demo, dir.path(), &[]);
    let o = sonde().current_dir(dir.path()).args(["thin", "-r"]).arg(&demo).args(["-w", "-"]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(o.stdout, std::fs::read(&file).unwrap());
    assert!(String::from_utf8_lossy(&o.stderr).contains("→ standard output"), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!dir.path().join("-").exists());
    let mut child = sonde()
        .args(["thin", "-q", "-r"])
        .arg(&demo)
        .args(["-w", "-"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    assert!(child.wait().unwrap().success(), "a closed pipe ends the run quietly");
}

#[test]
fn a_truncated_input_keeps_what_was_thinned_and_exits_3() {
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/demo.pcap");
    let dir = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(&demo).unwrap();
    let cut = dir.path().join("cut.pcap");
    std::fs::write(&cut, &bytes[..bytes.len() / 2 + 7]).unwrap();
    let out = dir.path().join("out.pcap");
    let o = sonde().args(["thin", "-r"]).arg(&cut).arg("-w").arg(&out).output().unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", String::from_utf8_lossy(&o.stderr));
    let (thinned, o) = analyze(&out, &[]);
    assert!(o.status.success(), "the output is a whole trace");
    let (inline, _) = analyze(&cut, &["--thin", "natra"]);
    for file in ["tcp_flows.tsv", "udp_flows.tsv"] {
        assert_eq!(std::fs::read(thinned.path().join(file)).unwrap(), std::fs::read(inline.path().join(file)).unwrap());
    }
    // No temporary file is left beside the output.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
}

#[test]
fn frames_sonde_cannot_decode_pass_unchanged() {
    // A pcap of link type 147 (user-defined): two frames that would be pure ACKs as raw IP.
    let mut ack = vec![0x45, 0, 0, 40, 0, 0, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
    ack.extend_from_slice(&[0x9c, 0x40, 0, 80, 0, 0, 0x03, 0xe9, 0, 0, 0x13, 0x89, 0x50, 0x10, 0xff, 0xff, 0, 0, 0, 0]);
    let mut pcap = vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 0, 147, 0, 0, 0];
    for i in 0..2u32 {
        for v in [1_700_000_000 + i, 0, 40, 40] {
            pcap.extend_from_slice(&v.to_le_bytes());
        }
        pcap.extend_from_slice(&ack);
    }
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.pcap");
    std::fs::write(&input, &pcap).unwrap();
    let (out, report) = thin(&input, dir.path(), &[]);
    assert_eq!(report["frames_undecoded"], 2);
    assert_eq!(report["frames_written"], 2);
    // The same frames, byte for byte, after the header.
    assert_eq!(std::fs::read(out).unwrap()[24..], pcap[24..]);
}

/// The fields pure ACKs feed, so thinning may change them; docs/thinning.md ("Accuracy") gives
/// the reason for each. A field outside this list changing in any flow fails the test. Listed
/// without their `c_`/`s_` prefix.
const MAY_CHANGE: &[&str] = &[
    // The flow's extent: its first or last packet may have been a pure ACK; the relative times
    // count from the first packet, and an idle gap closed only by pure ACKs now ends the flow.
    "first",
    "last",
    "durat",
    "first_pkt",
    "last_pkt",
    "end_reason",
    // The dropped packets themselves (a RST+ACK without payload is one).
    "rst_cnt",
    "pkts_all",
    "ack_cnt",
    "ack_cnt_p",
    "bytes_ip",
    "first_ack",
    // Zeek's history has a letter for a pure ACK (and so its state, for a flow whose only
    // packets from one side were pure ACKs); the UID hashes the first packet's time.
    "conn_state",
    "history",
    "uid",
    // What only ACKs carry: RTT samples, announced windows, SACK blocks, TTLs, in-flight bytes.
    "rtt_avg",
    "rtt_min",
    "rtt_max",
    "rtt_std",
    "rtt_cnt",
    "win_max",
    "win_min",
    "win_0",
    "sack_cnt",
    "ttl_min",
    "ttl_max",
    "cwin_max",
    "cwin_min",
    "cwin_ini",
    // Anomaly causes: duplicate ACKs and the RTT estimate decide between them.
    "pkts_rto",
    "pkts_fs",
    "pkts_reor",
    "pkts_dup",
    "pkts_unk",
    "pkts_fc",
    "pkts_unrto",
    "pkts_unfs",
];

/// Relative times that count from the flow's first packet: they move only when `first` does.
const RELATIVE_TO_FIRST: &[&str] = &["c_first", "s_first", "c_last", "s_last"];

fn may_change(field: &str) -> bool {
    let bare = field.strip_prefix("c_").or_else(|| field.strip_prefix("s_")).unwrap_or(field);
    MAY_CHANGE.contains(&bare)
}

#[test]
fn a_thinned_trace_changes_only_the_documented_fields() {
    for trace in traces() {
        let dir = tempfile::tempdir().unwrap();
        let (thinned, _) = thin(&trace, dir.path(), &[]);
        let (full, _) = analyze(&trace, &["--interval", "0"]);
        let (thin, _) = analyze(&thinned, &["--interval", "0"]);
        let output = sonde().arg("compare").arg(full.path()).arg(thin.path()).arg("--json").output().unwrap();
        assert!(output.status.success(), "{output:?}");
        let c: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        let (tcp, name) = (&c["tcp"], trace.display());
        let changed = |field: &str| {
            tcp["fields"].as_array().unwrap().iter().find(|f| f["name"] == field).unwrap()["changed"].as_u64().unwrap()
        };
        for f in tcp["fields"].as_array().unwrap() {
            let field = f["name"].as_str().unwrap();
            let n = f["changed"].as_u64().unwrap();
            if RELATIVE_TO_FIRST.contains(&field) {
                assert!(n <= changed("first"), "{name}: {field} changed in {n} flows, first in fewer");
            } else {
                assert!(n == 0 || may_change(field), "{name}: {field} changed in {n} flows");
            }
        }
        // Payload, handshake and options are untouched (not in MAY_CHANGE, so checked above);
        // flows lost are those made of pure ACKs only, and a flow gained is one whose roles
        // swapped (its first packet was the other side's pure ACK).
        assert_eq!(tcp["only_b"], tcp["swapped_roles"], "{name}: thinning made a flow");
        let udp = &c["udp"];
        assert_eq!((udp["only_a"].as_u64(), udp["only_b"].as_u64()), (Some(0), Some(0)), "{name}: UDP flows");
        for f in udp["fields"].as_array().unwrap() {
            assert_eq!(f["changed"], 0, "{name}: UDP {}", f["name"]);
        }
    }
}

/// A pcap of raw IPv4 (link type 101) SYNs: `rate` new connections a second (each from its own
/// client port) for each `(seconds, rate)` phase in turn, from 1,700,000,000 s.
fn syn_trace(phases: &[(u32, u32)]) -> Vec<u8> {
    let mut pcap = vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 0, 101, 0, 0, 0];
    let (mut second, mut n) = (1_700_000_000u32, 0u32);
    for &(seconds, rate) in phases {
        for _ in 0..seconds {
            for i in 0..rate {
                n += 1;
                let mut syn = vec![0x45, 0, 0, 40, 0, 0, 0x40, 0, 64, 6, 0, 0, 10, 1, (n >> 16) as u8, (n >> 8) as u8];
                syn.extend_from_slice(&[192, 0, 2, 80]);
                let port = (n as u16).to_be_bytes();
                syn.extend_from_slice(&[port[0], port[1], 0, 80, 0, 0, 0x03, 0xe8, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff]);
                syn.extend_from_slice(&[0, 0, 0, 0]);
                for v in [second, i * (1_000_000 / rate), 40, 40] {
                    pcap.extend_from_slice(&v.to_le_bytes());
                }
                pcap.extend_from_slice(&syn);
            }
            second += 1;
        }
    }
    pcap
}

#[test]
fn the_table_grows_when_the_connection_rate_triples() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("syns.pcap");
    // 200 connections a second for 90 s, then 600 a second for 90 s.
    std::fs::write(&input, syn_trace(&[(90, 200), (90, 600)])).unwrap();
    let (_, report) = thin(&input, dir.path(), &[]);
    let t = &report["thinning"];
    assert_eq!(t["parameters"]["rate_source"], "measured");
    assert_eq!(t["handshakes"]["connections"], 90 * 200 + 90 * 600);
    assert_eq!(t["rate"]["latest_per_s"], 600.0);
    let slots = |rate: f64| {
        let open = rate * 1.0;
        ((open + 2.326 * open.sqrt()) * 19.0).ceil()
    };
    let events = t["table"]["resize_events"].as_array().unwrap();
    // Up to 200/s at the first second, then in steps once the rate triples.
    assert_eq!(events[0]["slots"].as_f64(), Some(slots(200.0)), "{events:?}");
    assert!(events.len() >= 3, "{events:?}");
    for e in events {
        assert_eq!(e["slots"].as_f64(), Some(slots(e["rate_per_s"].as_f64().unwrap())), "{e}");
    }
    let last = events.last().unwrap();
    assert!(last["at_s"].as_f64().unwrap() > 1_700_000_090.0 && last["rate_per_s"].as_f64().unwrap() > 480.0);
    assert_eq!(t["table"]["slots"], last["slots"]);
    assert_eq!(t["table"]["resizes"].as_u64(), Some(events.len() as u64));
    // With a rate given, the table keeps its size.
    let (_, report) = thin(&input, dir.path(), &["--thin-rate", "200"]);
    assert_eq!(report["thinning"]["table"]["resizes"], 0);
    assert_eq!(report["thinning"]["table"]["slots"].as_f64(), Some(slots(200.0)));
}

#[test]
fn the_report_gives_five_minute_intervals_against_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("syns.pcap");
    // 400 s at 50 connections a second: the trace starts at 1,700,000,000 s = 300·5,666,666 + 200,
    // so its first interval covers 100 s, the second 300 s (less its last second's tail).
    std::fs::write(&input, syn_trace(&[(400, 50)])).unwrap();
    let (_, report) = thin(&input, dir.path(), &[]);
    let intervals = report["thinning"]["intervals"].as_array().unwrap();
    assert_eq!(intervals.len(), 2, "{intervals:?}");
    let (a, b) = (&intervals[0], &intervals[1]);
    assert_eq!((a["start_s"].as_u64(), b["start_s"].as_u64()), (Some(1_699_999_800), Some(1_700_000_100)));
    assert_eq!((a["connections"].as_u64(), b["connections"].as_u64()), (Some(100 * 50), Some(300 * 50)));
    assert_eq!(a["span_s"], 100.0);
    assert_eq!(a["rate_per_s"], 50.0);
    // Eq. 1 at 50/s with the 1 s lifetime: 50 + 2.326·√50.
    assert!((a["open_model"].as_f64().unwrap() - (50.0 + 2.326 * 50f64.sqrt())).abs() < 1e-9);
    // Nothing answers these SYNs: each entry lives 1 s, so about 50 are open at a time.
    let p99 = a["open_p99"].as_u64().unwrap();
    assert!((48..=51).contains(&p99), "{a}");
    assert!(a["open_max"].as_u64().unwrap() >= p99);
}
