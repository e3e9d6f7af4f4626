//! `sonde analyze --kafka` against a real Apache Kafka 4.3.1 broker (KRaft, one node), started
//! here from Maven Central jars (tests/kafka/fetch.sh; `make test` fetches them first) and
//! killed at the end, panic or not. The messages read back must be the flow log's records,
//! and the intervals' and histograms' contributions must add up to the interval files.
//! Without java or the jars the test fails: it never passes without a broker.

mod common;
mod kafka_broker;
mod netns;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kafka_broker::{free_port, repo, Broker};
use serde_json::Value;

fn jsonl(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect()
}

/// `start` as intervals.tsv writes it (six decimals).
fn start_of(v: &Value) -> String {
    format!("{:.6}", v.as_f64().expect("a number"))
}

fn cell(row: &std::collections::HashMap<String, String>, col: &str) -> String {
    row[col].clone()
}

/// A number as the TSV writes it, for keys (`{:.6}` of the parsed value).
fn six(text: &str) -> String {
    format!("{:.6}", text.parse::<f64>().unwrap_or_else(|_| panic!("a number: {text}")))
}

/// (start, metric, dir, net).
type HistKey = (String, String, String, String);

/// One histogram summed from its contributions.
#[derive(Default, Debug)]
struct Summed {
    count: u64,
    sum: f64,
    min: f64,
    max: f64,
    /// bin_lo → (bin_hi, count).
    bins: BTreeMap<String, (String, u64)>,
}

/// Reads both topics until what they hold adds up to the interval files of `dir` (or 60 s):
/// sums the contributions per key and checks them against intervals.tsv, histograms.tsv and
/// quantiles.tsv — counters, bins, counts, minima and maxima exactly, means within rounding —
/// and that every message is keyed by the probe and names it. Returns the interval messages in
/// the order read, and how many histogram messages.
fn read_contributions(
    broker: &Broker,
    interval_topic: &str,
    histogram_topic: &str,
    dir: &Path,
) -> (Vec<(String, Value)>, u64) {
    let summary: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    let probe = summary["probe"].as_str().expect("summary.json names the probe").to_string();
    let sent = (summary["kafka"]["intervals"].as_u64().unwrap(), summary["kafka"]["histograms"].as_u64().unwrap());
    let intervals = broker.read_topic(interval_topic, sent.0 as usize);
    let histograms = broker.read_topic(histogram_topic, sent.1 as usize);
    assert_eq!((intervals.len() as u64, histograms.len() as u64), sent, "every message sent arrived, once");
    for (key, m) in intervals.iter().chain(&histograms) {
        assert_eq!((key.as_str(), m["probe"].as_str()), (probe.as_str(), Some(probe.as_str())), "{m}");
    }

    // intervals.tsv
    let mut rows: BTreeMap<(String, String, String), [u64; 5]> = BTreeMap::new();
    const COUNTERS: [&str; 5] = ["packets", "bytes", "flows_opened", "flows_closed", "flows_active"];
    for (_, m) in &intervals {
        let key = (start_of(&m["start"]), m["proto"].as_str().unwrap().into(), m["net"].as_str().unwrap().into());
        assert!(m["end"].as_f64() > m["start"].as_f64(), "{m}");
        let row = rows.entry(key).or_default();
        for (sum, col) in row.iter_mut().zip(COUNTERS) {
            *sum += m[col].as_u64().unwrap_or_else(|| panic!("{col} in {m}"));
        }
        assert!(COUNTERS.iter().any(|c| m[*c] != 0), "an all-zero contribution: {m}");
    }
    let tsv = common::read_tsv(&dir.join("intervals.tsv"));
    assert!(!tsv.is_empty());
    let want: BTreeMap<(String, String, String), [u64; 5]> = tsv
        .iter()
        .map(|r| ((six(&r["start"]), cell(r, "proto"), cell(r, "net")), COUNTERS.map(|c| common::int(r, c))))
        .collect();
    assert_eq!(rows, want, "intervals summed from their contributions");

    // histograms.tsv and quantiles.tsv
    let mut sums: BTreeMap<HistKey, Summed> = BTreeMap::new();
    for (_, m) in &histograms {
        let key = (
            start_of(&m["start"]),
            m["metric"].as_str().unwrap().into(),
            m["dir"].as_str().unwrap().into(),
            m["net"].as_str().unwrap().into(),
        );
        let h = sums.entry(key).or_insert(Summed { min: f64::MAX, ..Summed::default() });
        h.count += m["count"].as_u64().unwrap();
        h.sum += m["sum"].as_f64().unwrap();
        h.min = h.min.min(m["min"].as_f64().unwrap());
        h.max = h.max.max(m["max"].as_f64().unwrap());
        for bin in m["bins"].as_array().expect("bins") {
            let (lo, hi, n) = (start_of(&bin[0]), start_of(&bin[1]), bin[2].as_u64().unwrap());
            let entry = h.bins.entry(lo).or_insert((hi.clone(), 0));
            assert_eq!(entry.0, hi, "a bin's edges: {m}");
            entry.1 += n;
        }
    }
    let mut bins: BTreeMap<HistKey, BTreeMap<String, (String, u64)>> = BTreeMap::new();
    for r in common::read_tsv(&dir.join("histograms.tsv")) {
        let key = (six(&r["start"]), cell(&r, "metric"), cell(&r, "dir"), cell(&r, "net"));
        bins.entry(key).or_default().insert(six(&r["bin_lo"]), (six(&r["bin_hi"]), common::int(&r, "count")));
    }
    let got: BTreeMap<_, _> = sums.iter().map(|(k, h)| (k.clone(), h.bins.clone())).collect();
    assert_eq!(got, bins, "histograms summed from their contributions");
    let quantiles = common::read_tsv(&dir.join("quantiles.tsv"));
    assert_eq!(quantiles.len(), sums.len());
    for q in &quantiles {
        let key = (six(&q["start"]), cell(q, "metric"), cell(q, "dir"), cell(q, "net"));
        let h = &sums[&key];
        assert_eq!(h.count, common::int(q, "count"), "{key:?}");
        assert_eq!((h.min, h.max), (common::num(q, "min"), common::num(q, "max")), "{key:?}");
        let mean = h.sum / h.count as f64;
        let tsv_mean = common::num(q, "mean");
        assert!((mean - tsv_mean).abs() <= 5e-4 + 1e-9 * mean.abs(), "{key:?}: mean {mean}, quantiles.tsv {tsv_mean}");
    }
    (intervals, histograms.len() as u64)
}

#[test]
fn analyze_publishes_the_flow_logs_records() {
    let broker = Broker::start();
    let t = Instant::now();
    let trace = repo().join("testdata/demo.pcap");
    let (out, run) = common::analyze(
        &trace,
        &[
            "--format",
            "jsonl",
            "--interval",
            "1",
            "--kafka",
            &broker.address(),
            "--kafka-topic",
            "flows-test",
            "--probe-id",
            "demo-probe",
        ],
    );
    assert!(run.status.success(), "sonde failed: {}\n{}", String::from_utf8_lossy(&run.stderr), broker.log());
    eprintln!("sonde analyze --kafka: {:.1} s", t.elapsed().as_secs_f64());

    let tcp = jsonl(&out.path().join("tcp_flows.jsonl"));
    let udp = jsonl(&out.path().join("udp_flows.jsonl"));
    let icmp = jsonl(&out.path().join("icmp_flows.jsonl"));
    assert!(!tcp.is_empty() && !udp.is_empty() && !icmp.is_empty(), "the demo has TCP, UDP and ICMP flows");
    let want = tcp.len() + udp.len() + icmp.len();
    let got = broker.read_topic("flows-test", want);
    assert_eq!(got.len(), want, "one message per flow and ICMP entry, no more");

    // Each message is its log's record plus "probe" and "proto" (an ICMP record has its own
    // "proto", icmp or icmpv6); its key names the flow.
    let mut expected = BTreeSet::new();
    for (proto, records) in [("tcp", &tcp), ("udp", &udp), ("icmp", &icmp)] {
        for r in records.iter() {
            let mut m = r.clone();
            if proto != "icmp" {
                m.as_object_mut().expect("an object").insert("proto".into(), proto.into());
            }
            m.as_object_mut().expect("an object").insert("probe".into(), "demo-probe".into());
            expected.insert(m.to_string());
        }
    }
    let mut received = BTreeSet::new();
    for (key, m) in &got {
        let s = |k: &str| m[k].as_str().map(str::to_string).unwrap_or_else(|| m[k].to_string());
        let prefix = match s("proto").as_str() {
            "icmp" | "icmpv6" => format!("{} {} {} ", s("proto"), s("c_ip"), s("s_ip")),
            _ => format!("{} {}:{} {}:{} ", s("proto"), s("c_ip"), s("c_port"), s("s_ip"), s("s_port")),
        };
        assert!(key.starts_with(&prefix), "key {key:?} does not name the flow {prefix:?}");
        received.insert(m.to_string());
    }
    assert_eq!(received.len(), want, "every message a different flow");
    assert_eq!(received, expected, "the messages are the flow logs' records");

    // Intervals and histograms: contributions that add up to the interval files.
    let (intervals, histograms) = read_contributions(&broker, "sonde-intervals", "sonde-histograms", out.path());
    let intervals = intervals.len() as u64;
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["probe"], "demo-probe");
    let k = &summary["kafka"];
    assert_eq!(k["flows"], want);
    assert_eq!((k["intervals"].as_u64(), k["histograms"].as_u64()), (Some(intervals), Some(histograms)));
    assert_eq!(k["sent"], want as u64 + intervals + histograms);
    assert_eq!(k["delivered"], k["sent"]);
    assert_eq!((k["dropped_queue_full"].as_u64(), k["failed"].as_u64()), (Some(0), Some(0)));

    // A real capture (the ground truth's mixed traffic), on topics of its own.
    if let Some(shared) = common::shared_dir() {
        let (out, run) = common::analyze(
            &shared.join("groundtruth/mixed.pcap"),
            &[
                "--interval",
                "1",
                "--kafka",
                &broker.address(),
                "--kafka-topic",
                "flows-mixed",
                "--kafka-interval-topic",
                "intervals-mixed",
                "--kafka-histogram-topic",
                "histograms-mixed",
                "--probe-id",
                "mixed",
            ],
        );
        assert!(run.status.success(), "sonde failed: {}", String::from_utf8_lossy(&run.stderr));
        let (intervals, histograms) = read_contributions(&broker, "intervals-mixed", "histograms-mixed", out.path());
        eprintln!("mixed.pcap: {} interval and {histograms} histogram messages add up", intervals.len());
    }

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
        // A flow's key names ports (`0.0.0.0:53`), an ICMP entry's none (`:: ::`).
        let anonymised = [" 0.0.0.0:", " :::", " 0.0.0.0 0.0.0.0 ", " :: :: "].iter().any(|a| key.contains(a));
        assert!(anonymised, "anonymised key: {key}");
    }
}

/// `sonde monitor --kafka` on a veth pair fed by tcpreplay, the broker on this machine's side
/// of a second veth pair: intervals are published as they close, and flows that end later
/// (idle timeouts of a second, after the replay) add to intervals published before; what the
/// topics hold adds up to the interval files the monitor writes when it stops.
#[test]
fn monitor_contributions_add_up_to_its_interval_files() {
    let Some(ns) = netns::Netns::new(&["tcpreplay"]) else { return };
    let (host_if, subnet) = (format!("sk{}", std::process::id()), format!("10.201.{}", std::process::id() % 250));
    assert!(
        netns::run_ok(Command::new("ip").args([
            "link",
            "add",
            &host_if,
            "type",
            "veth",
            "peer",
            "name",
            "kn",
            "netns",
            ns.name()
        ])),
        "a veth pair to the namespace"
    );
    for args in [format!("addr add {subnet}.1/30 dev {host_if}"), format!("link set {host_if} up")] {
        assert!(netns::run_ok(Command::new("ip").args(args.split(' '))), "ip {args}");
    }
    ns.ip(&format!("addr add {subnet}.2/30 dev kn"));
    ns.ip("link set kn up");
    let broker = Broker::start_at(&format!("{subnet}.1"));
    // One reader, then two on a fanout group (an interval is published once both passed it).
    for readers in ["1", "2"] {
        let live = tempfile::tempdir().unwrap();
        let topics = ["flows", "intervals", "histograms"].map(|t| format!("{t}-live-{readers}"));
        let monitor = netns::Monitor::start(
            &ns,
            live.path(),
            &[
                "--readers",
                readers,
                "--threads",
                "2",
                "--interval",
                "0.5",
                "--tcp-timeout",
                "1",
                "--udp-timeout",
                "1",
                "--kafka",
                &broker.address(),
                "--kafka-topic",
                &topics[0],
                "--kafka-interval-topic",
                &topics[1],
                "--kafka-histogram-topic",
                &topics[2],
                "--probe-id",
                "live-probe",
            ],
        );
        ns.replay(&repo().join("testdata/demo.pcap"), 300);
        // The flows idle out a second after their last packet, after their intervals closed.
        std::thread::sleep(Duration::from_secs(2));
        monitor.stop();
        let summary: Value =
            serde_json::from_str(&std::fs::read_to_string(live.path().join("summary.json")).unwrap()).unwrap();
        assert_eq!(summary["probe"], "live-probe");
        assert!(summary["packets"]["read"].as_u64() > Some(400), "the demo was captured: {}", summary["packets"]);
        if readers == "2" {
            let split = &summary["capture"]["readers_received_pkts"];
            assert!(split.as_array().is_some_and(|r| r.iter().all(|n| n.as_u64() > Some(0))), "readers {split}");
        }
        let (intervals, histograms) = read_contributions(&broker, &topics[1], &topics[2], live.path());
        // One key, one partition: the messages in the order sent. Flows that ended after their
        // interval was published added to it later.
        let mut newest = f64::MIN;
        let mut late = 0;
        for (_, m) in &intervals {
            let start = m["start"].as_f64().unwrap();
            late += usize::from(start < newest);
            newest = newest.max(start);
        }
        assert!(
            late > 0,
            "{readers} readers: no contribution to an interval published before: the test proves nothing"
        );
        eprintln!(
            "monitor, {readers} readers: {} interval messages ({late} to intervals published before), \
             {histograms} histogram messages",
            intervals.len()
        );
    }
    let _ = Command::new("ip").args(["link", "del", &host_if]).status();
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
    let icmp = jsonl(&out.path().join("icmp_flows.jsonl"));
    let flows = tcp.len() + udp.len() + icmp.len();
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
    // The probe id by default: the host name.
    let probe = summary["probe"].as_str().expect("a probe id");
    for (proto, records) in [("tcp", &tcp), ("udp", &udp), ("icmp", &icmp)] {
        for r in records.iter() {
            let mut m = r.clone();
            if proto != "icmp" {
                m.as_object_mut().expect("an object").insert("proto".into(), proto.into());
            }
            m.as_object_mut().expect("an object").insert("probe".into(), probe.into());
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
        (vec!["--kafka", "127.0.0.1:1", "--probe-id", "a b"], "--probe-id"),
        (vec!["--probe-id", &"p".repeat(65)], "--probe-id"),
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
    let want = ["tcp", "udp", "icmp"].map(|p| jsonl(&dir.join(format!("{p}_flows.jsonl"))).len()).iter().sum();
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
