//! Golden outputs: a trace's tcp_flows.tsv, udp_flows.tsv, its interval outputs (intervals,
//! quantiles; protocols, top and the application layer's tables where the case has --tables)
//! and the deterministic part of summary.json, committed under testdata/golden/<name>/. Any
//! change in what sonde writes shows up here as a diff; if the change is intended, regenerate with
//! `UPDATE_GOLDEN=1 cargo test -p sonde --test golden` and review the diff in git.

mod common;
mod jsonl;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use common::*;
use serde_json::Value;

/// Where a golden trace comes from.
enum Source {
    /// A path relative to the repository root: always present.
    Repo(&'static str),
    /// A path below ../shared/traces: only checked when the shared corpus is present.
    Shared(&'static str),
}

struct Case {
    name: &'static str,
    source: Source,
    /// Extra arguments to `sonde analyze`.
    args: &'static [&'static str],
    /// What it is there to exercise.
    why: &'static str,
}

const DEMO: Case = Case {
    name: "demo",
    source: Source::Repo("testdata/demo.pcap"),
    // One internal address per family, so that c_isint and s_isint both take both values.
    args: &["--internal", "10.77.0.1/32,fd77::2/128", "--tables"],
    why: "IPv4+IPv6, HTTP and bulk over a lossy link, UDP, refused and unanswered connections, \
          --internal",
};

const SHARED: &[Case] = &[
    Case {
        name: "arkime_synthetic",
        args: &[],
        source: Source::Shared("realistic/arkime+arkime/tests/pcap/arkime_synthetic.pcap"),
        why: "VLAN, QinQ, MPLS, PPPoE, GRE, GTP, VXLAN, IP-in-IP, IPv6 extension headers, ICMP",
    },
    Case {
        name: "sll_snaplen128",
        args: &[],
        source: Source::Shared("robustness/LibtraceTeam+libtrace/test/traces/sll.pcap"),
        why: "Linux cooked capture (SLL), IPv4 and IPv6, snaplen 128 cuts",
    },
    Case {
        name: "tcp_retransmissions",
        args: &[],
        source: Source::Shared("realistic/ntop+nDPI/tests/cfgs/default/pcap/heuristic_tcp_ack_payload.pcap"),
        why: "retransmissions of both sides, duplicates, zero windows",
    },
    Case {
        name: "tcp_in_gtp_qinq",
        args: &[],
        source: Source::Shared("realistic/ntop+nDPI/tests/cfgs/default/pcap/rtmp.pcap"),
        why: "TCP inside GTP-U over QinQ: the tunnel column",
    },
    Case {
        name: "weibo",
        args: &[],
        source: Source::Shared("realistic/ntop+nDPI/tests/cfgs/default/pcap/weibo.pcap"),
        why: "reordering and unneeded fast retransmissions by servers, two-way UDP",
    },
    Case {
        name: "client_retransmissions",
        args: &[],
        source: Source::Shared("realistic/arkime+arkime/tests/pcap/wireshark-retrans.pcap"),
        why: "client-side retransmissions and out-of-sequence data, fast retransmits",
    },
    Case {
        name: "tls_appdata",
        args: &[],
        source: Source::Shared("realistic/ntop+nDPI/tests/cfgs/default/pcap/tls-appdata.pcap"),
        why: "TLS bulk transfer with a server zero window",
    },
    Case {
        name: "tls12",
        args: &[],
        source: Source::Shared("realistic/FoxIO-LLC+ja4/pcap/tls12.pcap"),
        why: "TLS 1.2 in clear: SNI, certificate name, ALPN, versions, JA3, JA3S, JA4, handshake and \
              application-data times",
    },
    Case {
        name: "quic",
        args: &[],
        source: Source::Shared("realistic/FoxIO-LLC+ja4/pcap/quic-tls-handshake.pcapng"),
        why: "QUIC v1 Initials decrypted: SNI, ALPN, versions, JA4, user agent",
    },
    Case {
        name: "http1",
        args: &[],
        source: Source::Shared("realistic/FoxIO-LLC+ja4/pcap/http1-with-cookies.pcapng"),
        why: "HTTP/1.1 requests and responses: method, host, user agent, status, counts",
    },
    Case {
        name: "dns",
        args: &[],
        source: Source::Shared("realistic/arkime+arkime/tests/pcap/dns-wiresharkrepo.pcap"),
        why: "DNS queries and answers over UDP and TCP, response codes",
    },
    Case {
        name: "rtp",
        args: &[],
        source: Source::Shared("realistic/ntop+nDPI/tests/cfgs/default/pcap/rtp.pcapng"),
        why: "RTP streams: payload type, packets, losses, jitter",
    },
    Case {
        name: "icmp",
        // The echo server internal: s_isint of icmp_flows.
        args: &["--internal", "192.168.40.1/32"],
        source: Source::Shared("realistic/appneta+tcpreplay/test/test.pcap"),
        why: "pings and port unreachables quoting DNS queries: icmp_flows and the flows' icmp_errors",
    },
    Case {
        name: "truncated_dns",
        args: &[],
        source: Source::Shared("robustness/kbandla+dpkt/examples/data/truncated_dns_2.pcap"),
        why: "a damaged file: exit 3, input_error in the summary, the flow before the damage",
    },
];

/// Output columns that no golden trace gives a non-default value, and why.
const NEVER_EXERCISED: &[(&str, &str)] = &[
    ("c_pkts_fc", "no golden trace has a window probe into a zero window (none of the corpus has)"),
    ("s_pkts_fc", "no golden trace has a window probe into a zero window (none of the corpus has)"),
    ("c_iscrypto", "1 only under --anonymize, which no golden case uses (tests/anonymize.rs checks it)"),
    ("s_iscrypto", "1 only under --anonymize, which no golden case uses (tests/anonymize.rs checks it)"),
    // SYNs retransmitted with a *new* ISN; same-ISN SYN retransmissions (the demo's unanswered
    // connection) count in c_pkts_retx/c_pkts_rto.
    ("c_syn_retx", "no golden trace (and none of the corpus) re-sends a SYN with a new ISN"),
    ("s_syn_retx", "no golden trace (and none of the corpus) re-sends a SYN/ACK with a new ISN"),
    ("c_pkts_unfs", "no golden trace has an unnecessary client fast retransmission"),
    ("c_pkts_reor", "no golden trace has client-side reordering"),
    // Application facts the golden captures do not hold; the sonde-l7 tests compare each with
    // tshark on real captures (crates/sonde-l7/tests) and tests/l7.rs end to end.
    ("c_appdataB", "no golden TLS flow sends application data in its first packets after a clear handshake"),
    ("s_appdataB", "no golden TLS flow sends application data in its first packets after a clear handshake"),
    ("c_appdataT", "no golden TLS flow sends application data in its first packets after a clear handshake"),
    ("s_appdataT", "no golden TLS flow sends application data in its first packets after a clear handshake"),
    ("s_npnalpn", "the golden TLS 1.2 server selects no ALPN"),
    ("c_rtcp_pkts", "the golden RTP capture carries no RTCP"),
    ("s_rtcp_pkts", "the golden RTP capture carries no RTCP"),
    ("c_rtp_dup", "the golden RTP capture has no duplicate"),
    ("s_rtp_dup", "the golden RTP capture has no duplicate"),
    ("c_rtp_lost", "the golden RTP capture loses nothing"),
    ("s_rtp_lost", "the golden RTP capture loses nothing"),
    ("c_rtp_oos", "the golden RTP capture has no reordering"),
    ("s_rtp_oos", "the golden RTP capture has no reordering"),
    ("s_rtp_jitter_avg", "the golden RTP capture's server side has a dynamic payload type (no clock)"),
    ("s_rtp_jitter_max", "the golden RTP capture's server side has a dynamic payload type (no clock)"),
    ("dns_rcode", "no golden capture carries DNS over TCP (UDP flows have it)"),
    ("dns_rslv", "no golden UDP flow follows a DNS answer for its server (TCP flows have it)"),
    ("fqdn", "no golden UDP flow follows a DNS answer for its server (TCP flows have it)"),
    ("quic_UA", "the golden QUIC client sends no user agent parameter"),
    ("quic_s_vers", "the golden QUIC capture's server packets are not in it"),
    ("quic_zero_rtt", "the golden QUIC client sends no 0-RTT"),
    // The golden ICMP errors quote UDP packets; tests/icmp.rs and sonde-flow's unit tests cover TCP.
    ("icmp_errors", "no golden trace has an ICMP error quoting a TCP packet of an open flow"),
    ("icmp_error_last", "no golden trace has an ICMP error quoting a TCP packet of an open flow"),
    ("replies_unmatched", "no golden trace has a duplicated echo reply (sonde-flow's icmp_tests cover it)"),
    // The golden runs take no MaxMind database; tests/owners.rs runs MaxMind's test databases.
    ("c_country", "the golden runs look no owner up (tests/owners.rs does)"),
    ("s_country", "the golden runs look no owner up (tests/owners.rs does)"),
    ("c_asn", "the golden runs look no owner up (tests/owners.rs does)"),
    ("s_asn", "the golden runs look no owner up (tests/owners.rs does)"),
    ("c_as_org", "the golden runs look no owner up (tests/owners.rs does)"),
    ("s_as_org", "the golden runs look no owner up (tests/owners.rs does)"),
];

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn golden_dir(name: &str) -> PathBuf {
    repo_root().join("testdata/golden").join(name)
}

fn updating() -> bool {
    std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1")
}

/// summary.json without what changes from run to run or machine to machine (`table` describes
/// the per-worker flow tables, whose number defaults to the machine's cores).
fn deterministic_summary(summary: &str) -> String {
    let mut v: Value = serde_json::from_str(summary).expect("summary.json is JSON");
    let obj = v.as_object_mut().expect("summary.json is an object");
    for volatile in ["timing", "rates", "input", "sonde_version", "table"] {
        obj.remove(volatile);
    }
    let mut s = serde_json::to_string_pretty(&v).unwrap();
    s.push('\n');
    s
}

/// The first few lines where `got` differs from `expected`; for TSV, the differing columns.
fn first_differences(file: &str, expected: &str, got: &str) -> Option<String> {
    if expected == got {
        return None;
    }
    let (exp, new): (Vec<&str>, Vec<&str>) = (expected.lines().collect(), got.lines().collect());
    let header: Vec<&str> =
        if file.ends_with(".tsv") { exp.first().map_or(vec![], |h| h.split('\t').collect()) } else { vec![] };
    let mut out = vec![format!("{file}: {} lines expected, {} written; first differences:", exp.len(), new.len())];
    for i in 0..exp.len().max(new.len()) {
        let (e, g) = (exp.get(i).copied(), new.get(i).copied());
        if e == g {
            continue;
        }
        match (e, g) {
            (Some(e), Some(g)) if i > 0 && !header.is_empty() => {
                let cols: Vec<String> = header
                    .iter()
                    .zip(e.split('\t').zip(g.split('\t')))
                    .filter(|(_, (a, b))| a != b)
                    .map(|(h, (a, b))| format!("{h}: {a} -> {b}"))
                    .collect();
                out.push(format!("  line {}: {}", i + 1, cols.join(", ")));
            }
            _ => {
                out.push(format!("  line {}:\n    - {}\n    + {}", i + 1, e.unwrap_or("<none>"), g.unwrap_or("<none>")))
            }
        }
        if out.len() > 8 {
            out.push("  ...".to_string());
            break;
        }
    }
    Some(out.join("\n"))
}

/// Runs one golden trace and compares (or, with UPDATE_GOLDEN=1, rewrites) its outputs; also
/// checks that the JSON Lines run says the same as the TSV one. Returns the differences.
fn check_case(case: &Case, trace: &Path, source_label: &str) -> Vec<String> {
    // A probe id of its own: the default, the host name, differs from machine to machine.
    let args: Vec<&str> = case.args.iter().copied().chain(["--probe-id", "golden"]).collect();
    let (out, o) = analyze(trace, &args);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(matches!(o.status.code(), Some(0) | Some(3)), "{}: exit {:?}: {stderr}", case.name, o.status.code());
    let read = |name: &str| std::fs::read_to_string(out.path().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    let summary = deterministic_summary(&read("summary.json"));
    let damaged = !serde_json::from_str::<Value>(&summary).unwrap()["input_error"].is_null();
    assert_eq!(o.status.code() == Some(3), damaged, "{}: exit 3 exactly when input_error is set", case.name);
    let mut outputs = vec![
        ("tcp_flows.tsv", read("tcp_flows.tsv")),
        ("udp_flows.tsv", read("udp_flows.tsv")),
        ("icmp_flows.tsv", read("icmp_flows.tsv")),
        ("summary.golden.json", summary),
        // The interval outputs (one 5-minute interval for most traces); histograms, hosts and
        // matrix are checked against these in tests/monitoring.rs rather than kept here.
        ("intervals.tsv", read("intervals.tsv")),
        ("quantiles.tsv", read("quantiles.tsv")),
        (
            "SOURCE",
            format!(
                "{}\n{}\n",
                [source_label].iter().chain(case.args).copied().collect::<Vec<_>>().join(" "),
                case.why
            ),
        ),
    ];
    // The tables, where the case asks for them.
    for table in ["protocols.tsv", "top.tsv", "al_hosts.tsv", "al_matrix.tsv", "protocol_dir.tsv", "al_top.tsv"] {
        if out.path().join(table).exists() {
            outputs.push((table, read(table)));
        }
    }

    let jsonl_args: Vec<&str> = args.iter().copied().chain(["--format", "jsonl"]).collect();
    let (jsonl_out, o) = analyze(trace, &jsonl_args);
    assert!(
        matches!(o.status.code(), Some(0) | Some(3)),
        "{} jsonl: {}",
        case.name,
        String::from_utf8_lossy(&o.stderr)
    );
    for log in ["tcp_flows", "udp_flows", "icmp_flows"] {
        jsonl::assert_same(&out.path().join(format!("{log}.tsv")), &jsonl_out.path().join(format!("{log}.jsonl")));
    }

    let dir = golden_dir(case.name);
    if updating() {
        std::fs::create_dir_all(&dir).unwrap();
        for (name, text) in &outputs {
            std::fs::write(dir.join(name), text).unwrap();
        }
        eprintln!("updated {}", dir.display());
        return Vec::new();
    }
    outputs
        .iter()
        .filter_map(|(name, got)| {
            let path = dir.join(name);
            match std::fs::read_to_string(&path) {
                Ok(expected) => first_differences(&format!("{}/{name}", case.name), &expected, got),
                Err(e) => Some(format!("{}: {e} (run with UPDATE_GOLDEN=1 to create it)", path.display())),
            }
        })
        .collect()
}

fn assert_no_differences(diffs: Vec<String>) {
    assert!(
        diffs.is_empty(),
        "outputs differ from testdata/golden (if intended: UPDATE_GOLDEN=1 cargo test -p sonde --test golden)\n{}",
        diffs.join("\n")
    );
}

#[test]
fn demo_trace_outputs_match_golden() {
    let Source::Repo(path) = DEMO.source else { unreachable!() };
    assert_no_differences(check_case(&DEMO, &repo_root().join(path), path));
}

#[test]
fn shared_captures_outputs_match_golden() {
    let Some(shared) = shared_dir() else { return };
    let mut diffs = Vec::new();
    for case in SHARED {
        let Source::Shared(path) = case.source else { unreachable!() };
        diffs.extend(check_case(case, &shared.join("traces").join(path), &format!("../shared/traces/{path}")));
    }
    assert_no_differences(diffs);
}

/// Columns of the committed golden flow logs that hold only default values (0, -, 0.000).
fn columns_never_set() -> BTreeMap<String, BTreeSet<String>> {
    let mut seen: BTreeMap<String, bool> = BTreeMap::new();
    for entry in std::fs::read_dir(repo_root().join("testdata/golden")).expect("testdata/golden") {
        let dir = entry.unwrap().path();
        for log in ["tcp_flows.tsv", "udp_flows.tsv", "icmp_flows.tsv"] {
            let path = dir.join(log);
            if !path.exists() {
                continue;
            }
            for row in read_tsv(&path) {
                for (col, v) in row {
                    let set = !matches!(v.as_str(), "0" | "-" | "0.000" | "");
                    *seen.entry(format!("{log}:{col}")).or_default() |= set;
                }
            }
        }
    }
    let mut never: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (key, set) in seen {
        if !set {
            let (log, col) = key.split_once(':').unwrap();
            never.entry(col.to_string()).or_default().insert(log.to_string());
        }
    }
    never
}

#[test]
fn every_output_column_is_exercised_by_some_golden_trace() {
    if updating() {
        return; // the golden files are being rewritten by the other tests
    }
    let never = columns_never_set();
    let known: BTreeSet<&str> = NEVER_EXERCISED.iter().map(|(c, _)| *c).collect();
    let new_gaps: Vec<String> =
        never.iter().filter(|(c, _)| !known.contains(c.as_str())).map(|(c, logs)| format!("{c} ({logs:?})")).collect();
    let now_exercised: Vec<&str> = known.iter().copied().filter(|c| !never.contains_key(*c)).collect();
    eprintln!("columns never set in any golden trace: {:?}", never.keys().collect::<Vec<_>>());
    assert!(new_gaps.is_empty(), "columns no golden trace exercises (add a trace, or list them): {new_gaps:?}");
    assert!(now_exercised.is_empty(), "now exercised, remove from NEVER_EXERCISED: {now_exercised:?}");
}
