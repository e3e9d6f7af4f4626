//! `sonde analyze --kafka` against a real Apache Kafka 4.3.1 broker (KRaft, one node), started
//! here from Maven Central jars (tests/kafka/fetch.sh; `make test` fetches them first) and
//! killed at the end, panic or not. The messages read back must be the flow log's records.
//! Without java or the jars the test fails: it never passes without a broker.

mod common;
mod kafka_broker;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use kafka_broker::{free_port, repo, Broker};
use serde_json::Value;

fn jsonl(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect()
}

#[test]
fn analyze_publishes_the_flow_logs_records() {
    let broker = Broker::start();
    let t = Instant::now();
    let trace = repo().join("testdata/demo.pcap");
    let (out, run) = common::analyze(
        &trace,
        &["--format", "jsonl", "--interval", "1", "--kafka", &broker.address(), "--kafka-topic", "flows-test"],
    );
    assert!(run.status.success(), "sonde failed: {}\n{}", String::from_utf8_lossy(&run.stderr), broker.log());
    eprintln!("sonde analyze --kafka: {:.1} s", t.elapsed().as_secs_f64());

    let tcp = jsonl(&out.path().join("tcp_flows.jsonl"));
    let udp = jsonl(&out.path().join("udp_flows.jsonl"));
    assert!(!tcp.is_empty() && !udp.is_empty(), "the demo has TCP and UDP flows");
    let want = tcp.len() + udp.len();
    let got = broker.read_topic("flows-test", want);
    assert_eq!(got.len(), want, "one message per flow, no more");

    // Each message is its log's record plus "proto"; its key names the flow.
    let mut expected = BTreeSet::new();
    for (proto, records) in [("tcp", &tcp), ("udp", &udp)] {
        for r in records.iter() {
            let mut m = r.clone();
            m.as_object_mut().expect("an object").insert("proto".into(), proto.into());
            expected.insert(m.to_string());
        }
    }
    let mut received = BTreeSet::new();
    for (key, m) in &got {
        let s = |k: &str| m[k].as_str().map(str::to_string).unwrap_or_else(|| m[k].to_string());
        let prefix = format!("{} {}:{} {}:{} ", s("proto"), s("c_ip"), s("c_port"), s("s_ip"), s("s_port"));
        assert!(key.starts_with(&prefix), "key {key:?} does not name the flow {prefix:?}");
        received.insert(m.to_string());
    }
    assert_eq!(received.len(), want, "every message a different flow");
    assert_eq!(received, expected, "the messages are the flow logs' records");

    // Intervals: one message per row of intervals.tsv, its columns by name.
    let rows = common::read_tsv(&out.path().join("intervals.tsv"));
    assert!(!rows.is_empty());
    let intervals = broker.read_topic("sonde-intervals", rows.len());
    assert_eq!(intervals.len(), rows.len());
    for ((_, m), row) in intervals.iter().zip(&rows) {
        for (col, cell) in row {
            let v = &m[col.as_str()];
            let same = match v {
                Value::Null => cell == "-",
                Value::String(s) => s == cell,
                // A number as written (serde_json shows 1.000000 as 1.0).
                n => n.as_f64() == cell.parse::<f64>().ok(),
            };
            assert!(same, "{col}: {cell} published as {v}");
        }
    }

    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("summary.json")).unwrap()).unwrap();
    let k = &summary["kafka"];
    assert_eq!(k["flows"], want);
    assert_eq!(k["intervals"], rows.len());
    assert_eq!(k["sent"], want + rows.len());
    assert_eq!(k["delivered"], k["sent"]);
    assert_eq!((k["dropped_queue_full"].as_u64(), k["failed"].as_u64()), (Some(0), Some(0)));

    // A queue of one message that lingers a second (a librdkafka property passed through): the
    // flows ending together at the trace's end overflow it, are dropped and counted; what was
    // queued is delivered. Addresses anonymised as the logs are.
    let (out, run) = common::analyze(
        &trace,
        &[
            "--interval",
            "0",
            "--anonymize",
            "zero",
            "--kafka",
            &broker.address(),
            "--kafka-topic",
            "flows-small",
            "--kafka-queue",
            "1",
            "--kafka-option",
            "linger.ms=1000",
        ],
    );
    assert!(run.status.success(), "sonde failed: {}", String::from_utf8_lossy(&run.stderr));
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("summary.json")).unwrap()).unwrap();
    let k = &summary["kafka"];
    let (sent, dropped) = (k["sent"].as_u64().unwrap(), k["dropped_queue_full"].as_u64().unwrap());
    assert_eq!(sent + dropped, want as u64, "{k}");
    assert!(dropped > 0, "a queue of one overflows: {k}");
    assert_eq!(k["delivered"], sent, "{k}");
    let got = broker.read_topic("flows-small", sent as usize);
    assert_eq!(got.len() as u64, sent);
    for (key, m) in &got {
        assert!(["0.0.0.0", "::"].contains(&m["c_ip"].as_str().unwrap()), "anonymised: {m}");
        assert!(key.contains(" 0.0.0.0:") || key.contains(" :::"), "anonymised key: {key}");
    }
}

#[test]
fn interim_records_precede_each_long_flows_final_record() {
    let broker = Broker::start();
    let trace = repo().join("testdata/demo.pcap");
    let (out, run) = common::analyze(
        &trace,
        &[
            "--format",
            "jsonl",
            "--interval",
            "0",
            "--active-timeout",
            "1",
            "--kafka",
            &broker.address(),
            "--kafka-topic",
            "flows-interim",
        ],
    );
    assert!(run.status.success(), "sonde failed: {}\n{}", String::from_utf8_lossy(&run.stderr), broker.log());
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("summary.json")).unwrap()).unwrap();
    let interim = summary["flows"]["interim_records"].as_u64().unwrap();
    assert!(interim > 0, "the demo has flows longer than a second");
    assert_eq!(summary["kafka"]["interim"], interim);
    let tcp = jsonl(&out.path().join("tcp_flows.jsonl"));
    let udp = jsonl(&out.path().join("udp_flows.jsonl"));
    let flows = tcp.len() + udp.len();
    let got = broker.read_topic("flows-interim", flows + interim as usize);
    assert_eq!(got.len(), flows + interim as usize);
    assert_eq!(got.iter().filter(|(_, m)| m["end_reason"] == "open").count() as u64, interim);
    // Per key (one partition, in order), the last message is the flow's record in the log.
    let mut last: std::collections::BTreeMap<&str, &Value> = Default::default();
    for (key, m) in &got {
        if let Some(before) = last.insert(key, m) {
            assert_eq!(before["end_reason"], "open", "{key}: a record after the final one");
            assert!(before["c_pkts_all"].as_u64() <= m["c_pkts_all"].as_u64(), "{key}: counts go down");
        }
    }
    let mut finals: Vec<String> = last.values().map(|m| m.to_string()).collect();
    let mut logged: Vec<String> = Vec::new();
    for (proto, records) in [("tcp", &tcp), ("udp", &udp)] {
        for r in records.iter() {
            let mut m = r.clone();
            m.as_object_mut().expect("an object").insert("proto".into(), proto.into());
            logged.push(m.to_string());
        }
    }
    finals.sort();
    logged.sort();
    assert_eq!(finals, logged, "each flow's last message is its logged record");
}

#[test]
fn absent_broker_is_one_line_and_no_output() {
    let out = tempfile::tempdir().expect("temp dir");
    let dir = out.path().join("run");
    let broker = format!("127.0.0.1:{}", free_port());
    let run = common::sonde()
        .args(["analyze", "-q", "-r"])
        .arg(repo().join("testdata/demo.pcap"))
        .arg("-o")
        .arg(&dir)
        .args(["--kafka", &broker])
        .output()
        .expect("run sonde");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "one line: {stderr}");
    assert!(stderr.contains(&format!("no broker answered at {broker}")), "{stderr}");
    assert!(!dir.exists(), "no output directory");
}

#[test]
fn bad_kafka_option_is_one_line() {
    let out = tempfile::tempdir().expect("temp dir");
    for (args, says) in [
        (vec!["--kafka", "127.0.0.1:1", "--kafka-option", "nonsense"], "KEY=VALUE"),
        (vec!["--kafka", "127.0.0.1:1", "--kafka-option", "no.such.property=1"], "no.such.property"),
        (vec!["--kafka", "127.0.0.1:1", "--kafka-queue", "0"], "--kafka-queue"),
    ] {
        let run = common::sonde()
            .args(["analyze", "-q", "-r"])
            .arg(repo().join("testdata/demo.pcap"))
            .arg("-o")
            .arg(out.path().join("run"))
            .args(&args)
            .output()
            .expect("run sonde");
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(matches!(run.status.code(), Some(1 | 2)), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(!out.path().join("run").exists());
    }
}

/// The broker is killed while sonde runs (reading the demo from a pipe, half of it sent) and
/// restarted after the flows ended into the queue: every flow still arrives, once or more
/// (at-least-once), and the summary counts them delivered.
#[test]
fn broker_killed_and_restarted_mid_run_loses_nothing_queued() {
    let mut broker = Broker::start();
    let trace = std::fs::read(repo().join("testdata/demo.pcap")).expect("demo.pcap");
    let out = tempfile::tempdir().expect("temp dir");
    let mut sonde = common::sonde()
        .args(["analyze", "-q", "--format", "jsonl", "-r", "-", "-o"])
        .arg(out.path().join("run"))
        .args(["--kafka", &broker.address(), "--kafka-topic", "flows-restart", "--kafka-flush-timeout", "120"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run sonde");
    let mut stdin = sonde.stdin.take().expect("stdin");
    let half = trace.len() / 2;
    std::io::Write::write_all(&mut stdin, &trace[..half]).expect("first half");
    // sonde has checked the broker once its output directory exists.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !out.path().join("run").exists() {
        assert!(Instant::now() < deadline, "sonde did not start");
        std::thread::sleep(Duration::from_millis(100));
    }
    broker.kill();
    std::io::Write::write_all(&mut stdin, &trace[half..]).expect("second half");
    drop(stdin);
    // The flows end at the trace's end, into the queue, while no broker runs.
    std::thread::sleep(Duration::from_secs(3));
    let t = Instant::now();
    broker.restart();
    eprintln!("broker restarted in {:.1} s", t.elapsed().as_secs_f64());
    let run = sonde.wait_with_output().expect("sonde");
    assert!(run.status.success(), "sonde failed: {}", String::from_utf8_lossy(&run.stderr));

    let dir = out.path().join("run");
    let want = jsonl(&dir.join("tcp_flows.jsonl")).len() + jsonl(&dir.join("udp_flows.jsonl")).len();
    let got = broker.read_topic("flows-restart", want);
    let distinct: BTreeSet<String> = got.iter().map(|(_, m)| m.to_string()).collect();
    assert_eq!(
        distinct.len(),
        want,
        "every flow arrived ({} messages, {} duplicates)",
        got.len(),
        got.len() - distinct.len()
    );
    eprintln!("{} messages for {want} flows", got.len());
    let summary: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    let k = &summary["kafka"];
    assert_eq!(k["delivered"], k["sent"], "{k}");
    assert_eq!((k["dropped_queue_full"].as_u64(), k["failed"].as_u64()), (Some(0), Some(0)), "{k}");
}
