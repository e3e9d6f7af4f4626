//! `sonde compare`: two runs of the same trace compare equal whatever their log format; a run
//! whose input lost its pure ACKs (a BPF filter standing in for thinning) changes exactly the
//! fields those packets feed, in exactly the flows that had them. Needs nothing outside the
//! repository.

mod common;

use std::path::{Path, PathBuf};

use serde_json::Value;

fn demo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/demo.pcap")
}

fn compare_json(a: &Path, b: &Path) -> Value {
    let output = common::sonde().arg("compare").arg(a).arg(b).arg("--json").output().expect("run sonde");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("JSON")
}

fn field<'v>(c: &'v Value, name: &str) -> &'v Value {
    c["fields"].as_array().unwrap().iter().find(|f| f["name"] == name).unwrap_or_else(|| panic!("no field {name}"))
}

#[test]
fn the_same_run_in_tsv_and_jsonl_compares_equal() {
    let (tsv, _) = common::analyze(&demo(), &[]);
    let (jsonl, _) = common::analyze(&demo(), &["--format", "jsonl"]);
    let c = compare_json(tsv.path(), jsonl.path());
    for kind in ["tcp", "udp"] {
        let k = &c[kind];
        assert_eq!(k["matched"], k["flows_a"], "{kind}");
        assert_eq!((k["only_a"].as_u64(), k["only_b"].as_u64()), (Some(0), Some(0)), "{kind}");
        for f in k["fields"].as_array().unwrap() {
            assert_eq!(f["changed"], 0, "{kind} {}", f["name"]);
        }
    }
    for d in c["tcp"]["distributions"].as_array().unwrap() {
        assert_eq!(d["a"], d["b"]);
        assert_eq!(d["ks_distance"], 0.0);
    }
}

#[test]
fn dropping_pure_acks_changes_the_ack_fields_of_the_flows_that_had_them() {
    let (full, _) = common::analyze(&demo(), &[]);
    // TCP, flags exactly ACK, no payload: IP total length = IP header + TCP header.
    let pure_ack = "tcp[13] == 16 and ip[2:2] == ((ip[0] & 0xf) << 2) + ((tcp[12] & 0xf0) >> 2)";
    let (thinned, output) = common::analyze(&demo(), &["not", "(", pure_ack, ")"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let c = &compare_json(full.path(), thinned.path())["tcp"];

    let rows = common::read_tsv(&full.path().join("tcp_flows.tsv"));
    let v4 = |r: &&std::collections::HashMap<String, String>| !r["c_ip"].contains(':');
    // The filter is IPv4-only (ip[...]): IPv6 flows keep every packet.
    for side in ["c", "s"] {
        let had_pure_acks = rows.iter().filter(v4).filter(|r| common::int(r, &format!("{side}_ack_cnt_p")) > 0).count();
        assert!(had_pure_acks > 0, "the demo has pure ACKs from {side}");
        let pkts = field(c, &format!("{side}_pkts_all"));
        assert_eq!(pkts["changed"].as_u64(), Some(had_pure_acks as u64), "{side}_pkts_all");
        assert_eq!(pkts["increased"], 0);
        assert_eq!(field(c, &format!("{side}_ack_cnt_p"))["changed"].as_u64(), Some(had_pure_acks as u64));
        for unchanged in ["bytes_all", "bytes_uniq", "pkts_data", "syn_cnt", "fin_cnt", "pkts_retx"] {
            assert_eq!(field(c, &format!("{side}_{unchanged}"))["changed"], 0, "{side}_{unchanged}");
        }
    }
    assert_eq!(c["matched"], c["flows_a"], "no flow is lost: every one has a SYN or data");
    let text = common::sonde().arg("compare").arg(full.path()).arg(thinned.path()).output().unwrap();
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.contains("c_pkts_all") && text.contains("value (ms)") && text.contains("durat"), "{text}");
}

#[test]
fn a_directory_without_flow_logs_is_an_error() {
    let empty = tempfile::tempdir().unwrap();
    let output = common::sonde().arg("compare").arg(empty.path()).arg(empty.path()).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("no flow log"), "{output:?}");
}
