//! icmp_flows.tsv and the `icmp_errors` of the flow logs on real captures, with tshark as the
//! oracle: each echo session's packets and its echo RTT (Wireshark's `icmp.resptime`: count,
//! min, mean, max), and each ICMP error quoting a TCP or UDP packet counted on that flow.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use common::*;

/// Captures with pings (v4 and v6) and ICMP errors quoting UDP, without IP-in-IP (tshark's
/// address fields would hold both headers).
const TRACES: &[&str] = &[
    "realistic/appneta+tcpreplay/test/test.pcap",
    "realistic/arkime+arkime/tests/pcap/v6.pcap",
    "realistic/CESNET+ipfixprobe/tests/functional/inputs/mixed.pcap",
    "robustness/seladb+PcapPlusPlus/Tests/ExamplesTest/pcap_examples/many-protocols.pcap",
    "robustness/seladb+PcapPlusPlus/Tests/Pcap++Test/PcapExamples/ICMPv6_echos.cap",
    "robustness/kbandla+dpkt/examples/data/dns_icmp.pcap",
];

fn traces() -> Vec<PathBuf> {
    let Some(shared) = shared_dir() else { return Vec::new() };
    let traces: Vec<PathBuf> = TRACES.iter().map(|t| shared.join("traces").join(t)).filter(|p| p.exists()).collect();
    assert!(traces.len() >= 4, "expected traces are missing from the corpus");
    traces
}

/// A number tshark prints in decimal or hex (`0x02cb`).
fn parse_num(s: &str) -> u64 {
    match s.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).unwrap(),
        None => s.parse().unwrap_or_else(|_| panic!("{s:?}")),
    }
}

/// The first non-empty of tshark's fields (the v4 or the v6 one).
fn either<'a>(a: &'a str, b: &'a str) -> &'a str {
    if a.is_empty() {
        b
    } else {
        a
    }
}

#[derive(Default, Debug)]
struct Session {
    requests: u64,
    replies: u64,
    rtt_ms: Vec<f64>,
}

/// tshark's echo sessions: (client, server, identifier) → packets and response times.
fn tshark_sessions(trace: &Path) -> BTreeMap<(String, String, u64), Session> {
    let fields = [
        "ip.src",
        "ipv6.src",
        "ip.dst",
        "ipv6.dst",
        "icmp.type",
        "icmpv6.type",
        "icmp.ident",
        "icmpv6.echo.identifier",
        "icmp.resptime",
        "icmpv6.resptime",
    ];
    // sonde does not decode Ethernet over MPLS with a pseudowire control word (test.pcap has it).
    let filter = "(icmp.type==8 || icmp.type==0 || icmpv6.type==128 || icmpv6.type==129) && !pwethcw";
    let mut sessions: BTreeMap<(String, String, u64), Session> = BTreeMap::new();
    for line in tshark(trace, filter, &fields) {
        let f: Vec<&str> = line.split('\t').collect();
        let (src, dst) = (either(f[0], f[1]).to_string(), either(f[2], f[3]).to_string());
        // Several values: an ICMP error quoting an echo, which is not an echo.
        if f[4..8].iter().any(|v| v.contains(',')) || src.contains(',') {
            continue;
        }
        let ty = parse_num(either(f[4], f[5]));
        let ident = parse_num(either(f[6], f[7]));
        let request = ty == 8 || ty == 128;
        let key = if request { (src, dst, ident) } else { (dst, src, ident) };
        let s = sessions.entry(key).or_default();
        if request {
            s.requests += 1;
        } else {
            s.replies += 1;
            let rtt = either(f[8], f[9]);
            if !rtt.is_empty() {
                s.rtt_ms.push(rtt.parse().unwrap());
            }
        }
    }
    sessions
}

#[test]
fn echo_sessions_and_rtt_match_tshark() {
    for trace in traces() {
        let (out, o) = analyze(&trace, &[]);
        assert!(o.status.success(), "{}: {}", trace.display(), String::from_utf8_lossy(&o.stderr));
        let rows = read_tsv(&out.path().join("icmp_flows.tsv"));
        let ours: HashMap<(String, String, u64), &HashMap<String, String>> = rows
            .iter()
            .filter(|r| r["kind"] == "echo")
            .map(|r| ((r["c_ip"].clone(), r["s_ip"].clone(), int(r, "echo_id")), r))
            .collect();
        let theirs = tshark_sessions(&trace);
        assert!(!theirs.is_empty(), "{}: no echo in tshark's view", trace.display());
        assert_eq!(ours.len(), theirs.len(), "{}: sessions {:?}", trace.display(), theirs.keys());
        for (key, s) in &theirs {
            let row = ours.get(key).unwrap_or_else(|| panic!("{}: no session {key:?}", trace.display()));
            let what = format!("{} {key:?}", trace.display());
            assert_eq!((int(row, "c_pkts_all"), int(row, "s_pkts_all")), (s.requests, s.replies), "{what}");
            assert_eq!(int(row, "rtt_cnt"), s.rtt_ms.len() as u64, "{what}");
            if s.rtt_ms.is_empty() {
                continue;
            }
            let min = s.rtt_ms.iter().copied().fold(f64::MAX, f64::min);
            let max = s.rtt_ms.iter().copied().fold(0.0, f64::max);
            let mean = s.rtt_ms.iter().sum::<f64>() / s.rtt_ms.len() as f64;
            // Ours are in ms with three decimals (µs); tshark's in ms with six.
            for (col, theirs) in [("rtt_min", min), ("rtt_max", max), ("rtt_avg", mean)] {
                let got = num(row, col);
                assert!((got - theirs).abs() <= 0.0005 + 1e-9, "{what}: {col} {got} vs tshark {theirs}");
            }
        }
    }
}

#[test]
fn errors_quoting_a_flow_are_counted_on_it() {
    let traces = traces();
    if traces.is_empty() {
        return; // no shared corpus: SKIPPED (said by shared_dir)
    }
    let mut matched_somewhere = 0;
    for trace in traces {
        let (out, o) = analyze(&trace, &[]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        // tshark's quoted UDP packets: (source, port, destination, port) as the quote has them.
        let filter = "(icmp.type==3 || icmp.type==11 || icmp.type==12 || (icmpv6.type>=1 && icmpv6.type<=4)) && udp";
        let mut quoted: BTreeMap<(String, u64, String, u64), u64> = BTreeMap::new();
        for line in tshark(&trace, filter, &["ip.src", "ipv6.src", "ip.dst", "ipv6.dst", "udp.srcport", "udp.dstport"])
        {
            let f: Vec<&str> = line.split('\t').collect();
            // The quoted header is the second of each address field.
            let inner = |s: &str| s.split(',').nth(1).map(str::to_string);
            let (Some(src), Some(dst)) = (inner(either(f[0], f[1])), inner(either(f[2], f[3]))) else { continue };
            let key = (src, parse_num(f[4]), dst, parse_num(f[5]));
            // A flow's errors, whichever way the quoted packet went.
            let key =
                if (key.0.as_str(), key.1) <= (key.2.as_str(), key.3) { key } else { (key.2, key.3, key.0, key.1) };
            *quoted.entry(key).or_default() += 1;
        }
        let summary: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.path().join("summary.json")).unwrap()).unwrap();
        let icmp = &summary["flows"]["icmp"];
        let mut on_flows = 0;
        for row in read_tsv(&out.path().join("udp_flows.tsv")) {
            let (c, cp, s, sp) = tuple(&row);
            let key = if (c.as_str(), cp) <= (s.as_str(), sp) { (c, cp, s, sp) } else { (s, sp, c, cp) };
            let errors = int(&row, "icmp_errors");
            on_flows += errors;
            if errors > 0 {
                assert_eq!(Some(&errors), quoted.get(&key), "{}: {key:?}", trace.display());
                assert!(row["icmp_error_last"].contains('/'), "{:?}", row["icmp_error_last"]);
            }
        }
        assert_eq!(on_flows, icmp["errors_matched"].as_u64().unwrap(), "{}", trace.display());
        // Every error tshark saw quoting UDP was counted, on a flow or as unmatched.
        let counted = icmp["errors_matched"].as_u64().unwrap() + icmp["errors_unmatched"].as_u64().unwrap();
        assert!(counted >= quoted.values().sum::<u64>(), "{}: {icmp}", trace.display());
        matched_somewhere += on_flows;
    }
    assert!(matched_somewhere > 0, "no trace had an error counted on its flow");
}

/// The JSON Lines log says what the TSV log says.
#[test]
fn jsonl_icmp_log_matches_tsv() {
    for trace in traces().into_iter().take(2) {
        let (tsv, _) = analyze(&trace, &[]);
        let (jsonl, _) = analyze(&trace, &["--format", "jsonl"]);
        let lines = std::fs::read_to_string(jsonl.path().join("icmp_flows.jsonl")).unwrap();
        let rows = read_tsv(&tsv.path().join("icmp_flows.tsv"));
        assert_eq!(lines.lines().count(), rows.len(), "{}", trace.display());
        for (line, row) in lines.lines().zip(&rows) {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            assert_eq!(v["c_ip"].as_str(), Some(row["c_ip"].as_str()));
            assert_eq!(v["c_pkts_all"].as_u64(), Some(int(row, "c_pkts_all")));
        }
    }
}
