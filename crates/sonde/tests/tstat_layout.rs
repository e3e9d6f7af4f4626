//! `--layout tstat` against Tstat 3.3's own logs of the same captures (../shared/tstat): the
//! same flows in each of log_tcp_complete, log_tcp_nocomplete and log_udp_complete (matched
//! by 4-tuple and first packet's time), the columns that must agree exactly, and awk scripts
//! keyed on positions reading the fields Tstat's header names there.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use common::{analyze, shared_dir, tstat_run, TstatLog, TSTAT_LAYOUT_ARGS};

const LOGS: [&str; 3] = ["log_tcp_complete", "log_tcp_nocomplete", "log_udp_complete"];

/// TCP columns that must agree on every flow both logs hold (where the log has them).
const EXACT_TCP: [&str; 45] = [
    "c_ip",
    "c_port",
    "s_ip",
    "s_port",
    "c_bytes_uniq",
    "s_bytes_uniq",
    "c_pkts_data",
    "s_pkts_data",
    "c_bytes_all",
    "s_bytes_all",
    "c_pkts_retx",
    "c_syn_cnt",
    "s_syn_cnt",
    "c_fin_cnt",
    "s_fin_cnt",
    "first",
    "c_first",
    "s_first",
    "c_last",
    "s_last",
    "c_first_ack",
    "s_first_ack",
    "c_isint",
    "s_isint",
    "c_iscrypto",
    "s_iscrypto",
    "p2p_t",
    "c_ttl_min",
    "c_ttl_max",
    "s_ttl_min",
    "s_ttl_max",
    "c_f1323_opt",
    "c_tm_opt",
    "c_win_scl",
    "c_sack_opt",
    "c_mss",
    "c_mss_max",
    "c_mss_min",
    "c_win_max",
    "s_f1323_opt",
    "s_tm_opt",
    "s_win_scl",
    "s_sack_opt",
    "s_mss",
    "s_win_max",
];

/// Columns that agree as well where no packet follows a flow's close or its first RST (Tstat
/// stops counting there; sonde counts a closed flow's late packets for --closed-linger).
const EXACT_TCP_NO_LATE_PACKETS: [&str; 12] = [
    "c_pkts_all",
    "s_pkts_all",
    "c_rst_cnt",
    "s_rst_cnt",
    "c_ack_cnt",
    "s_ack_cnt",
    "c_ack_cnt_p",
    "s_ack_cnt_p",
    "last",
    "durat",
    "c_win_min",
    "s_win_min",
];

/// UDP columns that must agree on every flow.
const EXACT_UDP: [&str; 16] = [
    "c_ip",
    "c_port",
    "c_first_abs",
    "c_durat",
    "c_bytes_all",
    "c_pkts_all",
    "c_isint",
    "c_iscrypto",
    "s_ip",
    "s_port",
    "s_first_abs",
    "s_durat",
    "s_bytes_all",
    "s_pkts_all",
    "s_isint",
    "s_iscrypto",
];

impl TstatLog {
    /// Rows by (c_ip, c_port, s_ip, s_port, first time).
    fn by_flow(&self) -> BTreeMap<[String; 5], &Vec<String>> {
        let first = self.col("first").or_else(|| self.col("c_first_abs")).expect("a first-time column");
        let at = |n: &str| self.col(n).unwrap_or_else(|| panic!("no {n}"));
        let (ci, cp, si, sp) = (at("c_ip"), at("c_port"), at("s_ip"), at("s_port"));
        let mut out = BTreeMap::new();
        for row in &self.rows {
            let key = [row[ci].clone(), row[cp].clone(), row[si].clone(), row[sp].clone(), row[first].clone()];
            assert!(out.insert(key.clone(), row).is_none(), "two flows {key:?}");
        }
        out
    }
}

/// Runs sonde with `--layout tstat` on `trace`; checks the files it writes.
fn run_tstat_layout(trace: &Path) -> tempfile::TempDir {
    let (out, output) = analyze(trace, &TSTAT_LAYOUT_ARGS);
    assert!(output.status.success(), "sonde failed: {}", String::from_utf8_lossy(&output.stderr));
    for log in LOGS {
        assert!(out.path().join(log).is_file(), "no {log}");
    }
    for sonde_log in ["tcp_flows.tsv", "udp_flows.tsv"] {
        assert!(!out.path().join(sonde_log).exists(), "{sonde_log} written beside Tstat's logs");
    }
    let summary = std::fs::read_to_string(out.path().join("summary.json")).expect("summary.json");
    for log in LOGS {
        assert!(summary.contains(&format!("\"{log}\"")), "summary.json's outputs lack {log}");
    }
    out
}

/// Per log: flows in both, only in sonde's, only in Tstat's; per column, how many agree.
struct Agreement {
    both: usize,
    only_sonde: Vec<[String; 5]>,
    only_tstat: Vec<[String; 5]>,
    columns: Vec<ColumnAgreement>,
}

/// One column over the flows both logs hold.
struct ColumnAgreement {
    name: String,
    /// Flows on which the values are equal.
    agree: usize,
    /// A disagreement: sonde's value, Tstat's.
    example: Option<(String, String)>,
}

fn compare(ours: &TstatLog, theirs: &TstatLog, log: &str) -> Agreement {
    assert_eq!(ours.names, theirs.names, "{log}: header names");
    let (a, b) = (ours.by_flow(), theirs.by_flow());
    let keys_a: BTreeSet<_> = a.keys().cloned().collect();
    let keys_b: BTreeSet<_> = b.keys().cloned().collect();
    let both: Vec<_> = keys_a.intersection(&keys_b).collect();
    let columns = ours
        .names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let mut agree = 0;
            let mut example = None;
            for k in &both {
                if a[*k][i] == b[*k][i] {
                    agree += 1;
                } else if example.is_none() {
                    example = Some((a[*k][i].clone(), b[*k][i].clone()));
                }
            }
            ColumnAgreement { name: name.clone(), agree, example }
        })
        .collect();
    Agreement {
        both: both.len(),
        only_sonde: keys_a.difference(&keys_b).cloned().collect(),
        only_tstat: keys_b.difference(&keys_a).cloned().collect(),
        columns,
    }
}

fn report(name: &str, log: &str, ag: &Agreement) {
    eprintln!("{name} {log}: both {} only sonde {} only tstat {}", ag.both, ag.only_sonde.len(), ag.only_tstat.len());
    for c in &ag.columns {
        if c.agree < ag.both {
            let (ours, theirs) = c.example.clone().unwrap_or_default();
            eprintln!("  {}: {}/{} agree (e.g. sonde {ours}, Tstat {theirs})", c.name, c.agree, ag.both);
        }
    }
}

/// Runs a capture both ways and checks: the same flows in each log, the exact columns equal.
fn check_capture(trace_rel: &str, tstat_rel: &str, late_packets: bool) -> tempfile::TempDir {
    let Some(shared) = shared_dir() else { panic!("the shared corpus is required") };
    let trace = shared.join(trace_rel);
    assert!(trace.is_file(), "no capture {}", trace.display());
    let out = run_tstat_layout(&trace);
    let tstat = tstat_run(&shared, tstat_rel);
    for log in LOGS {
        let ours = TstatLog::read(&out.path().join(log));
        let theirs = TstatLog::read(&tstat.join(log));
        let ag = compare(&ours, &theirs, log);
        report(trace_rel, log, &ag);
        assert!(
            ag.only_sonde.is_empty() && ag.only_tstat.is_empty(),
            "{trace_rel} {log}: flows differ: only sonde {:?}, only Tstat {:?}",
            ag.only_sonde,
            ag.only_tstat
        );
        assert_eq!(ag.both, theirs.rows.len(), "{log}: every flow matched");
        let exact = |col: &str| match log {
            "log_udp_complete" => EXACT_UDP.contains(&col),
            _ => EXACT_TCP.contains(&col) || (!late_packets && EXACT_TCP_NO_LATE_PACKETS.contains(&col)),
        };
        for c in &ag.columns {
            if exact(&c.name) {
                assert_eq!(
                    c.agree, ag.both,
                    "{trace_rel} {log}: {} differs, e.g. (sonde, Tstat) {:?}",
                    c.name, c.example
                );
            }
        }
        // Names sonde read from the traffic are Tstat's where sonde has one.
        for name in ["c_tls_SNI", "s_tls_SCN", "http_hostname", "fqdn", "quic_SNI"] {
            let Some(i) = ours.col(name) else { continue };
            let (a, b) = (ours.by_flow(), theirs.by_flow());
            for (key, row) in &a {
                if row[i] != "-" {
                    assert_eq!(row[i], b[key][i], "{trace_rel} {log}: {name} of {key:?}");
                }
            }
        }
    }
    out
}

/// Runs `awk '<program>'` on `file`.
fn awk(program: &str, file: &Path) -> Vec<String> {
    let output = Command::new("awk").arg(program).arg(file).output().expect("awk (required by this test)");
    assert!(output.status.success(), "awk {program}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).expect("UTF-8").lines().map(str::to_string).collect()
}

/// An awk script written for Tstat's logs reads each field at the position Tstat's own header
/// gives it: `$45` is c_rtt_avg, `$116` c_tls_SNI…
fn check_awk_positions(out: &Path, tstat: &Path) {
    let positions: [(&str, &str); 12] = [
        ("log_tcp_complete", "c_rtt_avg"),
        ("log_tcp_complete", "c_tls_SNI"),
        ("log_tcp_complete", "http_hostname"),
        ("log_tcp_complete", "con_t"),
        ("log_tcp_complete", "s_pkts_all"),
        ("log_tcp_complete", "c_TLSvers"),
        ("log_tcp_complete", "dns_enc"),
        ("log_tcp_nocomplete", "http_t"),
        ("log_tcp_nocomplete", "first"),
        ("log_udp_complete", "c_type"),
        ("log_udp_complete", "s_bytes_all"),
        ("log_udp_complete", "quic_ech"),
    ];
    for (log, name) in positions {
        let theirs = TstatLog::read(&tstat.join(log));
        let ours = TstatLog::read(&out.join(log));
        // The position Tstat's header gives the name, and sonde's row values by name.
        let position = theirs.col(name).unwrap_or_else(|| panic!("Tstat's {log} has no {name}")) + 1;
        let by_name: Vec<String> = ours.rows.iter().map(|r| r[ours.col(name).expect("our column")].clone()).collect();
        let by_awk = awk(&format!("NR > 1 {{ print ${position} }}"), &out.join(log));
        assert_eq!(by_awk, by_name, "{log}: awk ${position} is not {name}");
        // And awk counts as many fields on every line as the header has.
        let widths = awk("{ print NF }", &out.join(log));
        assert!(widths.iter().all(|w| *w == theirs.names.len().to_string()), "{log}: field counts {widths:?}");
    }
}

#[test]
fn mixed_groundtruth_matches_tstat() {
    let out = check_capture("groundtruth/mixed.pcap", "groundtruth/mixed.pcap", false);
    let shared = shared_dir().expect("shared");
    check_awk_positions(out.path(), &tstat_run(&shared, "groundtruth/mixed.pcap"));
}

#[test]
fn ipv6_groundtruth_matches_tstat() {
    // One flow has a server packet after its close.
    check_capture("groundtruth/ipv6.pcap", "groundtruth/ipv6.pcap", true);
}

/// A real capture with TLS and HTTP flows (30 complete TCP flows in Tstat's log, 13 TLS and 17
/// HTTP, DNS over UDP).
#[test]
fn netflix_capture_matches_tstat() {
    let rel = "realistic/ntop+nDPI/tests/cfgs/default/pcap/netflix.pcap";
    // 13 flows have packets after their first RST.
    let out = check_capture(&format!("traces/{rel}"), rel, true);
    let shared = shared_dir().expect("shared");
    check_awk_positions(out.path(), &tstat_run(&shared, rel));
}

#[test]
fn tstat_layout_takes_tsv_only() {
    let Some(shared) = shared_dir() else { panic!("the shared corpus is required") };
    let (_out, output) = analyze(&shared.join("groundtruth/mixed.pcap"), &["--layout", "tstat", "--format", "jsonl"]);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("--format tsv"), "{output:?}");
}

/// `--anonymize`: every address of the Tstat logs is the plain run's through the key, the
/// `*_iscrypto` columns say so, and nothing else changes.
#[test]
fn anonymized_tstat_logs_are_the_plain_ones_mapped() {
    use sonde_anon::{Anonymizer, Key, Mode};
    let Some(shared) = shared_dir() else { panic!("the shared corpus is required") };
    let trace = shared.join("groundtruth/mixed.pcap");
    let plain = run_tstat_layout(&trace);
    let dir = tempfile::tempdir().expect("temp dir");
    let key = dir.path().join("key");
    let (anonymized, output) = analyze(
        &trace,
        &["--layout", "tstat", "--interval", "0", "--anonymize", "cryptopan", "--key", key.to_str().expect("UTF-8")],
    );
    assert!(output.status.success(), "{output:?}");
    let mut anon = Anonymizer::new(Mode::CryptoPan, &Key::load(&key).expect("the key").key);
    for log in LOGS {
        let (ours, theirs) = (TstatLog::read(&plain.path().join(log)), TstatLog::read(&anonymized.path().join(log)));
        assert!(!ours.rows.is_empty(), "{log}: no flows");
        let at = |n: &str| ours.col(n).unwrap_or_else(|| panic!("{log}: no {n}"));
        let mut want: Vec<Vec<String>> = ours
            .rows
            .iter()
            .map(|row| {
                let mut row = row.clone();
                for col in ["c_ip", "s_ip"] {
                    row[at(col)] = anon.ip(row[at(col)].parse().expect("an address")).to_string();
                }
                // Names that are address literals are mapped too (docs/anonymization.md).
                for col in ["http_hostname", "c_tls_SNI", "s_tls_SCN", "fqdn", "quic_SNI"] {
                    if let Some(i) = ours.col(col) {
                        if let Some(name) = anon.host(&row[i]) {
                            row[i] = name;
                        }
                    }
                }
                // The plain run was told every address is internal.
                for col in ["c_isint", "s_isint"] {
                    row[at(col)] = "0".into();
                }
                for col in ["c_iscrypto", "s_iscrypto"] {
                    row[at(col)] = "1".into();
                }
                row
            })
            .collect();
        let mut got = theirs.rows.clone();
        want.sort();
        got.sort();
        assert_eq!(got, want, "{log}");
    }
}
