//! NATRA thinning (issue 6): `sonde thin` drops exactly the pure ACKs that do not complete a
//! handshake (counted independently with tshark), `sonde analyze --thin natra` equals the
//! analysis of the thinned trace for any thread count, and every complete flow stays complete
//! with its handshake RTTs unchanged.

mod common;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use common::*;

/// tshark's pure ACK: ACK, no payload, not SYN, FIN or RST. ICMP errors are left out: tshark
/// dissects the TCP header they quote, sonde sees ICMP.
const PURE_ACK: &str =
    "tcp.flags.ack==1 && tcp.len==0 && tcp.flags.syn==0 && tcp.flags.fin==0 && tcp.flags.reset==0 && !icmp && !icmpv6";

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

/// The handshake ACKs of `trace`, by tshark's fields: a SYN/ACK awaits the ACK from its
/// receiver acknowledging its seq + 1 (whatever the ACK's own seq); the first pure ACK that fits
/// is it.
fn handshake_acks(trace: &Path) -> u64 {
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
    let mut found = 0;
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let f: Vec<&str> = line.split('\t').collect();
        // The inner packet of a tunnel: tshark gives the last occurrence of each field.
        let (src, dst) = if f[2].is_empty() { (f[0], f[1]) } else { (f[2], f[3]) };
        let (sport, dport) = (f[4].to_string(), f[5].to_string());
        let (Ok(seq), Ok(ack)) = (f[6].parse::<u64>(), f[7].parse::<u64>()) else { continue };
        let flags = u16::from_str_radix(f[8].trim_start_matches("0x"), 16).unwrap();
        let len: u64 = f[9].parse().unwrap_or(0);
        let (syn, ack_flag, fin, rst) = (flags & 2 != 0, flags & 0x10 != 0, flags & 1 != 0, flags & 4 != 0);
        if syn && ack_flag {
            awaited.insert((dst.into(), src.into(), dport, sport, (seq + 1) % (1 << 32)));
        } else if ack_flag && !syn && !fin && !rst && len == 0 {
            found += u64::from(awaited.remove(&(src.into(), dst.into(), sport, dport, ack)));
        }
    }
    found
}

/// In one tshark pass over `trace`: `fields` of every frame that is not a pure ACK, and the
/// number of pure ACKs (an io,stat tap, which sees every frame whatever `-Y` shows).
fn others_and_pure_acks(trace: &Path, fields: &[&str]) -> (Vec<String>, u64) {
    let mut cmd = std::process::Command::new("tshark");
    cmd.args(["-n", "-r"]).arg(trace).args(["-Y", &format!("!({PURE_ACK})"), "-T", "fields"]);
    for f in fields {
        cmd.args(["-e", f]);
    }
    cmd.args(["-z", &format!("io,stat,0,{PURE_ACK}")]);
    let out = cmd.output().expect("tshark (make deps installs it)");
    assert!(out.status.success(), "tshark: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let table = lines.iter().position(|l| l.starts_with("=====")).unwrap_or_else(|| panic!("no io,stat: {text}"));
    // The one interval's row: `| 0.000 <> 5.915 |    115 | 11818 |`.
    let row = lines[table..].iter().find(|l| l.contains("<>")).unwrap_or_else(|| panic!("no io,stat row: {text}"));
    let pure = row.split('|').nth(2).and_then(|c| c.trim().parse().ok()).unwrap_or_else(|| panic!("{row}"));
    (lines[..table].iter().map(|l| l.to_string()).collect(), pure)
}

#[test]
fn thin_drops_the_pure_acks_but_each_handshakes_first() {
    for trace in traces() {
        let dir = tempfile::tempdir().unwrap();
        let (out, report) = thin(&trace, dir.path(), &[]);
        let name = trace.display();
        // Every frame that is not a pure ACK is kept, in order.
        let others = ["frame.time_epoch", "frame.len", "frame.cap_len", "tcp.flags"];
        let (kept, pure_kept) = others_and_pure_acks(&out, &others);
        let (before, pure) = others_and_pure_acks(&trace, &others);
        assert_eq!(before.len(), kept.len(), "{name}");
        if let Some(i) = (0..kept.len()).find(|&i| before[i] != kept[i]) {
            panic!("{name}: frame {i} of the others: {} became {}", before[i], kept[i]);
        }
        let handshakes = handshake_acks(&trace);
        let t = &report["thinning"];
        assert_eq!(t["table"]["collisions"], 0, "{name}");
        assert_eq!(t["dropped"]["packets"], pure - handshakes, "{name}: {pure} pure ACKs, {handshakes} handshakes");
        assert_eq!(pure_kept, handshakes, "{name}");
        assert_eq!(report["frames_written"].as_u64().unwrap() + pure - handshakes, report["frames_read"], "{name}");
        eprintln!("{name}: {} frames, {pure} pure ACKs, {handshakes} handshake ACKs kept", report["frames_read"]);
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
    // The dropped packets themselves.
    "pkts_all",
    "ack_cnt",
    "ack_cnt_p",
    "bytes_ip",
    "first_ack",
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
