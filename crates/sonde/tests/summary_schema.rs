//! Every summary.json the binary writes is valid against the published schema,
//! `docs/schema/summary.schema.json` (sonde-output's `Summary::schema`, checked there against
//! the types). Every object in the schema refuses unknown fields, so a field added to the
//! summary without regenerating the schema fails here. `sonde monitor`'s sections (capture,
//! spool) are checked in sonde-output's tests on a constructed summary: monitor needs root and
//! interfaces.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use serde_json::Value;

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(path)
}

fn validator() -> jsonschema::Validator {
    let text = std::fs::read_to_string(repo("docs/schema/summary.schema.json")).expect("the committed schema");
    jsonschema::validator_for(&serde_json::from_str(&text).unwrap()).expect("a valid JSON Schema")
}

/// Runs `sonde analyze` on `trace` with `args`, checks the exit status, and returns the
/// summary after checking it against the schema.
fn check(validator: &jsonschema::Validator, trace: &Path, args: &[&str], status: i32) -> Value {
    let (out, o) = analyze(trace, args);
    let what = format!("{} {}", trace.display(), args.join(" "));
    assert_eq!(o.status.code(), Some(status), "{what}: {}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(out.path().join("summary.json")).unwrap_or_else(|e| panic!("{what}: {e}"));
    let summary: Value = serde_json::from_str(&text).unwrap();
    let errors: Vec<String> = validator.iter_errors(&summary).map(|e| format!("{e} at {}", e.instance_path)).collect();
    assert!(
        errors.is_empty(),
        "{what}: summary.json does not match docs/schema/summary.schema.json:\n{}",
        errors.join("\n")
    );
    summary
}

#[test]
fn demo_summaries_match_the_schema() {
    let v = validator();
    let demo = repo("testdata/demo.pcap");
    let plain = check(&v, &demo, &[], 0);
    assert!(plain["monitoring"].is_object() && plain["thinning"].is_null());
    let tables = check(&v, &demo, &["--interval", "1", "--tables"], 0);
    assert_eq!(tables["monitoring"]["tables"], true);
    check(&v, &demo, &["--interval", "0"], 0);
    let filtered = check(&v, &demo, &["--format", "jsonl", "tcp"], 0);
    assert_eq!(filtered["filter"], "tcp");
    let thinned = check(&v, &demo, &["--thin", "natra"], 0);
    assert!(thinned["thinning"].is_object());
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("key");
    let anonymized = check(&v, &demo, &["--anonymize", "cryptopan", "--key", key.to_str().unwrap()], 0);
    assert_eq!(anonymized["anonymization"]["key_created"], true);
    check(&v, &demo, &["--anonymize", "zero"], 0);
    let file = dir.path().join("demo.ipfix");
    let exported = check(&v, &demo, &["--ipfix", file.to_str().unwrap()], 0);
    // One record per TCP and UDP flow and per ICMP entry.
    let flows = &plain["flows"];
    let ended = ["tcp", "udp"].map(|k| flows[k].as_u64().unwrap()).iter().sum::<u64>();
    assert_eq!(exported["ipfix"]["records"], ended + flows["icmp"]["flows"].as_u64().unwrap());
    assert!(exported["ipfix"]["last_error"].is_null());
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let refused = check(&v, &demo, &["--ipfix", &format!("tcp://127.0.0.1:{port}")], 0);
    assert!(refused["ipfix"]["last_error"].is_string());
}

#[test]
fn definitions_summaries_match_the_schema() {
    let v = validator();
    let demo = repo("testdata/demo.pcap");
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo("definitions"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "def" || e == "defs"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no definitions file in definitions/");
    for file in &files {
        let summary = check(&v, &demo, &["--definitions", file.to_str().unwrap()], 0);
        assert!(summary["definitions"].is_array(), "{}", file.display());
    }
    // gap and length (their files), and scheduled changes (definition_changes).
    let dir = tempfile::tempdir().unwrap();
    let defs = dir.path().join("measures.def");
    std::fs::write(&defs, "tcp = ip.proto == 6\nports = ip.proto == 6 key tcp.dport measure gap,length idle 1s\n")
        .unwrap();
    let changes = dir.path().join("changes.txt");
    std::fs::write(&changes, "1795307597.525 1 remove tcp\n1795307597.525 1 remove nothing\n").unwrap();
    let args = ["--definitions", defs.to_str().unwrap(), "--definition-changes", changes.to_str().unwrap()];
    let summary = check(&v, &demo, &args, 0);
    assert_eq!(summary["definition_changes"].as_array().map(Vec::len), Some(2));
    let outputs: Vec<&str> = summary["outputs"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert!(outputs.contains(&"definition_gaps.tsv") && outputs.contains(&"definition_flows.tsv"), "{outputs:?}");
}

/// A truncated trace: exit 3, `input_error` set, the summary still valid.
#[test]
fn a_truncated_trace_summary_matches_the_schema() {
    let v = validator();
    let bytes = std::fs::read(repo("testdata/demo.pcap")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cut = dir.path().join("cut.pcap");
    // Inside the last record's data.
    std::fs::write(&cut, &bytes[..bytes.len() - 10]).unwrap();
    let summary = check(&v, &cut, &["--interval", "1"], 3);
    assert!(summary["input_error"]["message"].is_string(), "{}", summary["input_error"]);
}

/// Real traces from the shared corpus (skipped without it): link types, tunnels, snaplen cuts
/// and decode problems fill the maps the demo leaves empty.
#[test]
fn shared_trace_summaries_match_the_schema() {
    let Some(shared) = shared_dir() else { return };
    let v = validator();
    let traces = [
        "realistic/arkime+arkime/tests/pcap/arkime_synthetic.pcap",
        "robustness/LibtraceTeam+libtrace/test/traces/sll.pcap",
        "realistic/ntop+nDPI/tests/cfgs/default/pcap/heuristic_tcp_ack_payload.pcap",
        "robustness/kbandla+dpkt/examples/data/truncated_dns_2.pcap",
    ];
    for (i, trace) in traces.iter().enumerate() {
        let path = shared.join("traces").join(trace);
        if !path.exists() {
            eprintln!("SKIPPED: {} is not in the shared corpus", path.display());
            continue;
        }
        let (out, o) = analyze(&path, &[]);
        let status = o.status.code().unwrap_or(-1);
        assert!(status == 0 || status == 3, "{}: {}", path.display(), String::from_utf8_lossy(&o.stderr));
        drop(out);
        check(&v, &path, &[], status);
        if i == 0 {
            check(&v, &path, &["--interval", "1", "--tables", "--thin", "natra"], status);
        }
    }
}

/// Issue 23: NetSniff's run figures in the summary — Mb/s, CPU %, mean and peak memory, the
/// outputs' bytes, readers and workers — each as its definition computes it from the others.
#[test]
fn the_summary_gives_netsniffs_run_figures() {
    let demo = repo("testdata/demo.pcap");
    let (out, o) = analyze(&demo, &["--threads", "2"]);
    assert!(o.status.success(), "{o:?}");
    let s: Value = serde_json::from_str(&std::fs::read_to_string(out.path().join("summary.json")).unwrap()).unwrap();
    let (t, r) = (&s["timing"], &s["rates"]);
    let f = |v: &Value| v.as_f64().unwrap();
    let elapsed = f(&t["elapsed_s"]);
    let wire_bits = f(&s["packets"]["wire_bytes"]) * 8.0;
    assert!((f(&r["megabits_per_s"]) - wire_bits / elapsed / 1e6).abs() < 1e-6 * f(&r["megabits_per_s"]).max(1.0));
    assert!((f(&r["cpu_percent"]) - 100.0 * f(&t["cpu_s"]) / elapsed).abs() < 1e-6 * f(&r["cpu_percent"]).max(1.0));
    let (mean, peak) = (t["mean_anon_bytes"].as_u64().unwrap(), t["peak_anon_bytes"].as_u64().unwrap());
    assert!(mean > 0 && mean <= peak, "mean {mean}, peak {peak}");
    assert_eq!((t["readers"].as_u64(), t["workers"].as_u64()), (Some(2), Some(2)));
    let written: u64 = s["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .filter(|n| *n != "summary.json")
        .map(|n| std::fs::metadata(out.path().join(n)).unwrap().len())
        .sum();
    assert_eq!(s["output_bytes"].as_u64(), Some(written));
    assert!(written > 0);
    let dir = tempfile::tempdir().unwrap();
    let run = sonde().arg("analyze").arg("-r").arg(&demo).arg("-o").arg(dir.path().join("o")).output().unwrap();
    let human = String::from_utf8_lossy(&run.stderr).into_owned();
    assert!(human.contains("b/s, ") && human.contains("memory mean ") && human.contains(" %), speed-up"), "{human}");
}
