//! The interval outputs (issue 4): counters add up exactly to the flow records, histogram
//! counts equal the numbers of samples, and percentiles are within the documented bound of an
//! exact computation, on the shipped demo trace, ground truth and real traces.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use common::*;
use sonde_engine::{Part, Pipeline, Run, WorkerSink};
use sonde_flow::{FlowRecord, FlowSink, RttSample};
use sonde_stats::{Binning, Config, Dir, Metric, Net, Report};

fn demo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/demo.pcap")
}

/// The demo trace, and ground-truth and real traces when the shared corpus is here.
fn traces() -> Vec<PathBuf> {
    let mut traces = vec![demo()];
    if let Some(shared) = shared_dir() {
        for rel in [
            "groundtruth/lossy.pcap",
            "groundtruth/mixed.pcap",
            "groundtruth/ipv6.pcap",
            "traces/realistic/ntop+nDPI/tests/cfgs/default/pcap/alexa-app.pcapng",
            "traces/realistic/arkime+arkime/tests/pcap/arkime_synthetic.pcap",
            "traces/robustness/the-tcpdump-group+tcpdump/tests/kday3.pcap",
        ] {
            let p = shared.join(rel);
            assert!(p.exists(), "{} is missing from the corpus", p.display());
            traces.push(p);
        }
    }
    traces
}

fn sum(rows: &[HashMap<String, String>], cols: &[&str]) -> u64 {
    rows.iter().map(|r| cols.iter().map(|c| num(r, c) as u64).sum::<u64>()).sum()
}

#[test]
fn interval_counters_add_up_to_the_flow_records() {
    for trace in traces() {
        for interval in ["0.01", "1", "300"] {
            let (out, output) = analyze(&trace, &["--interval", interval, "--internal", "10.0.0.0/8", "--tables"]);
            assert!(output.status.code().is_some_and(|c| c == 0 || c == 3), "{}: {output:?}", trace.display());
            let intervals = read_tsv(&out.path().join("intervals.tsv"));
            let of = |proto: &str| intervals.iter().filter(|r| r["proto"] == proto).cloned().collect::<Vec<_>>();
            for (proto, log) in [("tcp", "tcp_flows.tsv"), ("udp", "udp_flows.tsv")] {
                let flows = read_tsv(&out.path().join(log));
                let rows = of(proto);
                let what = format!("{} --interval {interval} {proto}", trace.display());
                assert_eq!(sum(&rows, &["packets"]), sum(&flows, &["c_pkts_all", "s_pkts_all"]), "{what} packets");
                assert_eq!(sum(&rows, &["bytes"]), sum(&flows, &["c_bytes_ip", "s_bytes_ip"]), "{what} bytes");
                assert_eq!(sum(&rows, &["flows_opened"]), flows.len() as u64, "{what} flows opened");
                assert_eq!(sum(&rows, &["flows_closed"]), flows.len() as u64, "{what} flows closed");
            }
            let summary: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(out.path().join("summary.json")).unwrap()).unwrap();
            assert_eq!(sum(&intervals, &["packets"]), summary["packets"]["analysed"].as_u64().unwrap());
        }
    }
}

#[test]
fn histogram_counts_equal_the_numbers_of_samples() {
    for trace in traces() {
        let (out, _) = analyze(&trace, &["--interval", "0.5"]);
        let quantiles = read_tsv(&out.path().join("quantiles.tsv"));
        let histograms = read_tsv(&out.path().join("histograms.tsv"));
        let key = |r: &HashMap<String, String>| ["start", "metric", "dir", "net"].map(|c| r[c].clone()).join(" ");
        let mut binned: BTreeMap<String, u64> = BTreeMap::new();
        for h in &histograms {
            *binned.entry(key(h)).or_default() += num(h, "count") as u64;
        }
        let counted: BTreeMap<String, u64> = quantiles.iter().map(|q| (key(q), num(q, "count") as u64)).collect();
        assert_eq!(binned, counted, "{}", trace.display());
        let tcp_flows = read_tsv(&out.path().join("tcp_flows.tsv")).len() as u64;
        let durations: u64 =
            quantiles.iter().filter(|q| q["metric"] == "tcp_duration").map(|q| num(q, "count") as u64).sum();
        assert_eq!(durations, tcp_flows, "{}: one duration per TCP flow", trace.display());
        let summary: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.path().join("summary.json")).unwrap()).unwrap();
        let ip = ["ipv4", "ipv6"].iter().map(|p| summary["protocols"][p]["packets"].as_u64().unwrap()).sum::<u64>();
        let lengths: u64 = quantiles.iter().filter(|q| q["metric"] == "ip_len").map(|q| num(q, "count") as u64).sum();
        assert_eq!(lengths, ip, "{}: one length per IP packet", trace.display());
    }
}

/// Nearest-rank percentile of sorted values.
fn exact(sorted: &[u64], percent: u64) -> u64 {
    let rank = (sorted.len() as u64 * percent).div_ceil(100).max(1);
    sorted[rank as usize - 1]
}

/// Runs the library on `trace`, returning the flow records and the merged report.
fn run(trace: &Path, cfg: &Config, workers: usize) -> (Vec<FlowRecord>, Report) {
    let run = Run::new().pipeline(Pipeline { workers, ..Pipeline::default() }).intervals(Some(cfg.clone()));
    let result = run.analyze_file(trace, &Vec::<FlowRecord>::new).unwrap();
    (result.flows.concat(), result.intervals.unwrap())
}

#[test]
fn percentiles_are_within_the_bound_of_the_exact_ones() {
    let cfg = Config { interval_ns: 2_000_000_000, ..Config::default() };
    let mut checked = 0;
    for trace in traces() {
        let (records, report) = run(&trace, &cfg, 1);
        // The exact samples, charged as the report charges them: to the interval of the flow's
        // last packet.
        let mut samples: BTreeMap<(u64, Metric, Dir), Vec<u64>> = BTreeMap::new();
        for r in &records {
            let FlowRecord::Tcp(t) = r else { continue };
            let i = t.last_ns / cfg.interval_ns;
            samples.entry((i, Metric::TcpDuration, Dir::Both)).or_default().push(t.last_ns - t.first_ns);
            for (dir, s) in [(Dir::C2s, &t.client), (Dir::S2c, &t.server)] {
                if s.rtt.count > 0 {
                    samples.entry((i, Metric::TcpRttMin, dir)).or_default().push(s.rtt.min_ns);
                    samples.entry((i, Metric::TcpRttAvg, dir)).or_default().push(s.rtt.mean_ns().round() as u64);
                }
                if s.pkts > 0 {
                    samples.entry((i, Metric::TcpBytes, dir)).or_default().push(s.payload_bytes);
                }
            }
        }
        for ((i, metric, dir), mut values) in samples {
            values.sort_unstable();
            let dist = report.intervals[&i].flows.dist(metric, dir, Net::Ext).unwrap();
            assert_eq!(dist.count, values.len() as u64);
            assert_eq!((dist.min, dist.max), (values[0], *values.last().unwrap()));
            let exact_sum: u128 = values.iter().map(|&v| u128::from(v)).sum();
            assert_eq!(dist.sum, exact_sum);
            for p in [50, 95, 99] {
                let (est, ex) = (dist.percentile(p as u32).unwrap(), exact(&values, p));
                let bound = match dist.binning {
                    Binning::Log => ex / 128,
                    Binning::Linear(w) => w / 2,
                };
                assert!(est.abs_diff(ex) <= bound, "{} {metric:?} {dir:?} p{p}: {est} vs {ex}", trace.display());
                checked += 1;
            }
        }
    }
    // Hundreds with the shared corpus; the demo alone gives a few dozen.
    assert!(checked > if shared_dir().is_some() { 100 } else { 10 }, "only {checked} percentiles checked");
}

/// Keeps every record and RTT sample the TCP analyzer hands the sinks.
#[derive(Default)]
struct Kept {
    records: Vec<FlowRecord>,
    samples: Vec<RttSample>,
}

impl FlowSink for Kept {
    fn flow(&mut self, r: &FlowRecord) {
        self.records.push(r.clone());
    }
    fn rtt_sample(&mut self, s: &RttSample) {
        self.samples.push(*s);
    }
    fn interim(&mut self, _: &FlowRecord) {}
}

impl WorkerSink for Kept {
    type Part = Kept;
    fn take(&mut self) -> Kept {
        std::mem::take(self)
    }
}

impl Part for Kept {
    fn absorb(&mut self, other: Kept) {
        self.records.extend(other.records);
        self.samples.extend(other.samples);
    }
    fn is_empty(&self) -> bool {
        self.records.is_empty() && self.samples.is_empty()
    }
}

#[test]
fn the_rtt_sample_histograms_hold_every_sample_of_the_flow_records() {
    let cfg = Config { interval_ns: 1_000_000_000, ..Config::default() };
    let mut checked = 0;
    for trace in traces() {
        let run = Run::new().pipeline(Pipeline { workers: 2, ..Pipeline::default() }).intervals(Some(cfg.clone()));
        let result = run.analyze_file(&trace, &Kept::default).unwrap();
        let report = result.intervals.unwrap();
        let (records, samples): (Vec<_>, Vec<_>) = result.flows.into_iter().map(|k| (k.records, k.samples)).unzip();
        let samples: Vec<RttSample> = samples.concat();
        // The samples handed out are the ones the records summarise: as many, same extremes.
        for client_data in [true, false] {
            let of_dir: Vec<u64> = samples.iter().filter(|s| s.client_data == client_data).map(|s| s.rtt_ns).collect();
            let stats: Vec<_> = records
                .iter()
                .flatten()
                .filter_map(|r| match r {
                    FlowRecord::Tcp(t) => Some(if client_data { t.client.rtt } else { t.server.rtt }),
                    FlowRecord::Udp(_) => None,
                })
                .filter(|r| r.count > 0)
                .collect();
            let what = format!("{} client_data={client_data}", trace.display());
            assert_eq!(of_dir.len() as u64, stats.iter().map(|r| r.count).sum::<u64>(), "{what}");
            assert_eq!(of_dir.iter().min(), stats.iter().map(|r| r.min_ns).min().as_ref(), "{what}");
            assert_eq!(of_dir.iter().max(), stats.iter().map(|r| r.max_ns).max().as_ref(), "{what}");
        }
        // Each interval's histogram is exactly the samples taken in it.
        let mut exact_samples: BTreeMap<(u64, Dir), Vec<u64>> = BTreeMap::new();
        for s in &samples {
            let dir = if s.client_data { Dir::C2s } else { Dir::S2c };
            exact_samples.entry((s.ts_ns / cfg.interval_ns, dir)).or_default().push(s.rtt_ns);
        }
        let dists = report.intervals.iter().flat_map(|(i, x)| {
            [Dir::C2s, Dir::S2c].map(|d| ((*i, d), x.flows.dist(Metric::TcpRttSample, d, Net::Ext).cloned()))
        });
        let in_report: BTreeMap<(u64, Dir), _> = dists.filter_map(|(k, d)| Some((k, d?))).collect();
        assert_eq!(in_report.keys().collect::<Vec<_>>(), exact_samples.keys().collect::<Vec<_>>());
        for (key, mut values) in exact_samples {
            values.sort_unstable();
            let dist = &in_report[&key];
            assert_eq!(dist.count, values.len() as u64);
            assert_eq!((dist.min, dist.max), (values[0], *values.last().unwrap()));
            assert_eq!(dist.sum, values.iter().map(|&v| u128::from(v)).sum::<u128>());
            for p in [50, 95, 99] {
                let (est, ex) = (dist.percentile(p).unwrap(), exact(&values, u64::from(p)));
                assert!(est.abs_diff(ex) <= ex / 128, "{} {key:?} p{p}: {est} vs {ex}", trace.display());
                checked += 1;
            }
        }
    }
    // Hundreds with the shared corpus; the demo alone gives a few dozen.
    assert!(checked > if shared_dir().is_some() { 100 } else { 10 }, "only {checked} percentiles checked");
}

#[test]
fn the_report_is_the_same_for_any_number_of_workers() {
    let cfg = Config { interval_ns: 500_000_000, tables: true, ..Config::default() };
    for trace in traces() {
        let one = run(&trace, &cfg, 1).1;
        let three = run(&trace, &cfg, 3).1;
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let names = one.write(a.path()).unwrap();
        assert_eq!(names, three.write(b.path()).unwrap());
        for name in names {
            let (x, y) = (std::fs::read(a.path().join(name)).unwrap(), std::fs::read(b.path().join(name)).unwrap());
            assert!(x == y, "{}: {name} differs between 1 and 3 workers", trace.display());
        }
    }
}

#[test]
fn tables_add_up_to_the_packets_and_flows() {
    for trace in traces() {
        let (out, _) = analyze(&trace, &["--interval", "1", "--tables", "--top", "3"]);
        let read = |name: &str| read_tsv(&out.path().join(name));
        let summary: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.path().join("summary.json")).unwrap()).unwrap();
        let ip = ["ipv4", "ipv6"].iter().map(|p| summary["protocols"][p]["packets"].as_u64().unwrap()).sum::<u64>();
        let flows = read("tcp_flows.tsv").len() + read("udp_flows.tsv").len();
        let what = trace.display();
        assert_eq!(sum(&read("hosts.tsv"), &["pkts_out"]), ip, "{what}: every IP packet has a sender");
        assert_eq!(sum(&read("hosts.tsv"), &["pkts_in"]), ip, "{what}: and a receiver");
        assert_eq!(sum(&read("matrix.tsv"), &["packets"]), ip, "{what}: matrix");
        assert_eq!(sum(&read("protocols.tsv"), &["packets"]), ip, "{what}: protocol directory");
        assert_eq!(sum(&read("protocols.tsv"), &["flows"]), flows as u64, "{what}: flows per protocol");
        let top = read("top.tsv");
        for by in ["bytes", "flows"] {
            let values: Vec<u64> = top.iter().filter(|r| r["by"] == by).map(|r| num(r, "value") as u64).collect();
            let per_interval = top.iter().filter(|r| r["by"] == by && r["rank"] == "1").count();
            assert!(values.len() <= 3 * per_interval, "{what}: at most --top rows per interval");
        }
    }
}

/// docs/rmon2.md: the application-layer tables hold every flow's packets and bytes (each in the
/// interval of its last packet), with a small bound as with none.
#[test]
fn application_tables_add_up_to_the_flow_records() {
    for trace in traces() {
        for size in ["100000", "3"] {
            let (out, _) = analyze(&trace, &["--interval", "1", "--tables", "--table-size", size]);
            let read = |name: &str| read_tsv(&out.path().join(name));
            let logs = [read("tcp_flows.tsv"), read("udp_flows.tsv")];
            let flows: u64 = logs.iter().map(|l| l.len() as u64).sum();
            let pkts: u64 = logs.iter().map(|l| sum(l, &["c_pkts_all", "s_pkts_all"])).sum();
            let bytes: u64 = logs.iter().map(|l| sum(l, &["c_bytes_ip", "s_bytes_ip"])).sum();
            let what = format!("{} --table-size {size}", trace.display());
            let hosts = read("al_hosts.tsv");
            assert_eq!((sum(&hosts, &["pkts_out"]), sum(&hosts, &["bytes_out"])), (pkts, bytes), "{what}: alHost sent");
            assert_eq!((sum(&hosts, &["pkts_in"]), sum(&hosts, &["bytes_in"])), (pkts, bytes), "{what}: received");
            let matrix = read("al_matrix.tsv");
            assert_eq!((sum(&matrix, &["packets"]), sum(&matrix, &["bytes"])), (pkts, bytes), "{what}: alMatrix");
            let dir = read("protocol_dir.tsv");
            let root: Vec<_> = dir.iter().filter(|r| r["path"] == "ether2").cloned().collect();
            assert_eq!(
                (sum(&root, &["packets"]), sum(&root, &["bytes"]), sum(&root, &["flows"])),
                (pkts, bytes, flows),
                "{what}: directory"
            );
            let own: u64 = sum(&dir, &["own_flows"]);
            assert_eq!(own, flows, "{what}: each flow is some node's own");
            if size == "3" {
                let mut rows: HashMap<&str, u64> = HashMap::new();
                for r in hosts.iter().filter(|r| r["addr"] != "overflow") {
                    *rows.entry(r["start"].as_str()).or_default() += 1;
                }
                assert!(rows.values().all(|&n| n <= 3), "{what}: at most --table-size rows");
            }
        }
    }
}

#[test]
fn a_full_table_sums_the_rest_in_its_overflow_row() {
    let (out, _) = analyze(&demo(), &["--tables", "--table-size", "2"]);
    let hosts = read_tsv(&out.path().join("hosts.tsv"));
    assert_eq!(hosts.iter().filter(|r| r["addr"] != "overflow").count(), 2);
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("summary.json")).unwrap()).unwrap();
    let ip = ["ipv4", "ipv6"].iter().map(|p| summary["protocols"][p]["packets"].as_u64().unwrap()).sum::<u64>();
    assert_eq!(sum(&hosts, &["pkts_out"]), ip, "nothing lost to the bound");
    assert!(summary["monitoring"]["table_overflows"].as_u64().unwrap() > 0);
}

#[test]
fn force_removes_outputs_the_new_run_does_not_write() {
    let out = tempfile::tempdir().unwrap();
    for extra in [&["--tables"][..], &["--interval", "0"][..]] {
        let status = sonde()
            .args(["analyze", "-q", "--force", "-r"])
            .arg(demo())
            .arg("-o")
            .arg(out.path())
            .args(extra)
            .status()
            .unwrap();
        assert!(status.success());
    }
    for stale in ["hosts.tsv", "intervals.tsv", "quantiles.tsv"] {
        assert!(!out.path().join(stale).exists(), "{stale} of the first run was left behind");
    }
    assert!(out.path().join("tcp_flows.tsv").exists());
}

/// The records of a little-endian microsecond pcap with their times moved `shift_s` seconds
/// later (the file header is kept only when `with_header`).
fn shifted_pcap(bytes: &[u8], shift_s: u32, with_header: bool) -> Vec<u8> {
    assert_eq!(&bytes[..4], &[0xd4, 0xc3, 0xb2, 0xa1], "a little-endian microsecond pcap");
    let mut out = if with_header { bytes[..24].to_vec() } else { Vec::new() };
    let mut at = 24;
    while at + 16 <= bytes.len() {
        let word = |i: usize| u32::from_le_bytes(bytes[at + i..at + i + 4].try_into().unwrap());
        let len = word(8) as usize;
        out.extend_from_slice(&(word(0) + shift_s).to_le_bytes());
        out.extend_from_slice(&bytes[at + 4..at + 16 + len]);
        at += 16 + len;
    }
    out
}

fn dump(store: &Path) -> String {
    let o = sonde().args(["ts", "dump"]).arg(store).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

#[test]
fn a_trace_analysed_in_two_halves_gives_the_same_store_as_one_run() {
    let demo = std::fs::read(demo()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    // The second half is the same traffic one 5-minute interval later; with 60-s timeouts every
    // flow of the first half has ended before it, so both runs see the same flows.
    let first = shifted_pcap(&demo, 0, true);
    let second = shifted_pcap(&demo, 300, true);
    let mut whole = first.clone();
    whole.extend(shifted_pcap(&demo, 300, false));
    for (name, bytes) in [("first.pcap", &first), ("second.pcap", &second), ("whole.pcap", &whole)] {
        std::fs::write(dir.path().join(name), bytes).unwrap();
    }
    let args = |store: &Path| {
        ["--store", store.to_str().unwrap(), "--tcp-timeout", "60", "--udp-timeout", "60"].map(str::to_string)
    };
    let run = |trace: &str, store: &Path| {
        let args = args(store);
        let (out, o) = analyze(&dir.path().join(trace), &args.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let summary = std::fs::read_to_string(out.path().join("summary.json")).unwrap();
        serde_json::from_str::<serde_json::Value>(&summary).unwrap()["monitoring"]["store"].clone()
    };
    let (halves, once) = (dir.path().join("halves.rrd"), dir.path().join("once.rrd"));
    assert_eq!(run("whole.pcap", &once)["updates"], 2);
    assert_eq!(run("first.pcap", &halves)["updates"], 1);
    let size = std::fs::metadata(&halves).unwrap().len();
    assert_eq!(run("second.pcap", &halves)["updates"], 1);
    assert_eq!(std::fs::metadata(&halves).unwrap().len(), size, "the store does not grow");
    let (a, b) = (dump(&once), dump(&halves));
    same_dump(&a, &b);
    // The rows hold the traffic: TCP packets in both intervals.
    let header: Vec<&str> = a.lines().next().unwrap().split(',').collect();
    let col = header.iter().position(|c| *c == "tcp_ext_pkts").unwrap();
    let tcp: Vec<&str> =
        a.lines().filter(|l| l.starts_with("0,AVERAGE")).map(|l| l.split(',').nth(col).unwrap()).collect();
    assert_eq!(tcp.iter().filter(|v| !v.is_empty()).count(), 2, "{tcp:?}");
    // Running the second half again adds nothing: its interval is already stored.
    let again = run("second.pcap", &halves);
    assert_eq!((again["updates"].as_u64(), again["already_stored"].as_u64()), (Some(0), Some(1)));
    same_dump(&dump(&halves), &b);
}

/// Two store dumps are equal (the first difference is shown, not megabytes of rows).
fn same_dump(a: &str, b: &str) {
    for (x, y) in a.lines().zip(b.lines()) {
        assert_eq!(x, y, "first different row");
    }
    assert_eq!(a.lines().count(), b.lines().count());
}

#[test]
fn the_store_refuses_an_interval_that_is_not_whole_seconds() {
    let (_, o) = analyze(&demo(), &["--interval", "0.5", "--store", "/tmp/never-made.rrd"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("whole number of seconds"));
}

/// Issue 23: `--interval 1 --store` with the default archives would silently create a 745 MB
/// store. A new store says its size; above `--store-max-mb` the run is refused before anything
/// is written, with the size and the ways out.
#[test]
fn a_new_store_says_its_size_and_one_too_large_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s.rrd");
    let store_arg = store.to_str().unwrap();
    let (out, o) = analyze(&demo(), &["--interval", "1", "--store", store_arg]);
    assert_eq!(o.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("would take 744.8 MB on disk") && stderr.contains("--store-max-mb 745"), "{stderr}");
    assert!(!store.exists() && !out.path().join("tcp_flows.tsv").exists());
    let (_, o) = analyze(&demo(), &["--interval", "1", "--store", store_arg, "--store-max-mb", "745"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::metadata(&store).unwrap().len().div_ceil(1_000_000), 745);
    // The size said at creation is the file's.
    let o = sonde()
        .args(["analyze", "-r", demo().to_str().unwrap(), "-o"])
        .arg(dir.path().join("second"))
        .args(["--interval", "300", "--store"])
        .arg(dir.path().join("t.rrd"))
        .output()
        .unwrap();
    let bytes = std::fs::metadata(dir.path().join("t.rrd")).unwrap().len();
    let said = format!("{:.1} MB on disk, fixed (a 300 s step, 4 resolutions)", bytes as f64 / 1e6);
    assert!(String::from_utf8_lossy(&o.stderr).contains(&said), "{said}: {o:?}");
    // An existing store is not measured again: it is already there.
    let (_, o) = analyze(&demo(), &["--interval", "1", "--store", store_arg]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn store_archives_are_chosen_at_creation_and_a_mismatch_is_refused_before_the_analysis() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s.rrd");
    let store_arg = store.to_str().unwrap();
    let (_, o) = analyze(&demo(), &["--interval", "1", "--store", store_arg, "--store-archives", "1s:1h,1m:1d"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let info = sonde().args(["ts", "info"]).arg(&store).output().unwrap();
    let info = String::from_utf8_lossy(&info.stdout);
    let archives: Vec<Vec<&str>> = info
        .lines()
        .filter(|l| l.contains("AVERAGE"))
        .map(|l| l.split_whitespace().skip(2).take(2).collect())
        .collect();
    assert_eq!(archives, [["1", "3600"], ["60", "1440"]], "{info}");
    // Later runs keep the store's archives without being told them again.
    let (_, o) = analyze(&demo(), &["--interval", "1", "--store", store_arg]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Another step, or other archives asked for, is refused before anything is written.
    let demo = demo();
    for extra in [&["--interval", "2"][..], &["--interval", "1", "--store-archives", "1s:2h"]] {
        let out = dir.path().join("refused");
        let mut args = vec!["analyze", "-r", demo.to_str().unwrap(), "-o", out.to_str().unwrap()];
        args.extend(["--store", store_arg]);
        args.extend(extra);
        let o = sonde().args(&args).output().unwrap();
        assert_eq!(o.status.code(), Some(1), "{extra:?}");
        assert!(String::from_utf8_lossy(&o.stderr).contains("the store was created with step 1 s"), "{o:?}");
        assert!(!out.exists(), "{extra:?}: outputs written although the store refused the run");
    }
}

#[test]
fn the_cwnd_anomaly_and_rtt_sample_histograms_hold_every_flow_direction() {
    // Issue 23: tcp_cwnd_max (Tstat's c_cwin_max, one value per direction that measured one),
    // tcp_anomaly (Tstat's tcp_anomalies: every data segment at its class) and tcp_rtt_sample
    // (every sample), against the flow log written by the same run.
    let classes = ["rto", "fs", "reor", "dup", "fc", "unrto", "unfs", "unk"];
    let mut anomalous = 0;
    for trace in traces().into_iter().take(4) {
        let (out, o) = analyze(&trace, &["--interval", "1"]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let flows = read_tsv(&out.path().join("tcp_flows.tsv"));
        let quantiles = read_tsv(&out.path().join("quantiles.tsv"));
        let histograms = read_tsv(&out.path().join("histograms.tsv"));
        for (dir, p) in [("c2s", "c"), ("s2c", "s")] {
            let what = format!("{} {dir}", trace.display());
            // The congestion-window estimate: count, extremes and sum of the measured ones.
            let cwnd: Vec<u64> = flows.iter().map(|f| int(f, &format!("{p}_cwin_max"))).filter(|&v| v > 0).collect();
            let rows: Vec<_> = quantiles.iter().filter(|q| q["metric"] == "tcp_cwnd_max" && q["dir"] == dir).collect();
            assert_eq!(rows.iter().map(|q| int(q, "count")).sum::<u64>(), cwnd.len() as u64, "{what}");
            assert!(rows.iter().all(|q| q["unit"] == "bytes"), "{what}");
            if let (Some(lo), Some(hi)) = (cwnd.iter().min(), cwnd.iter().max()) {
                assert_eq!(rows.iter().map(|q| num(q, "min") as u64).min(), Some(*lo), "{what}");
                assert_eq!(rows.iter().map(|q| num(q, "max") as u64).max(), Some(*hi), "{what}");
                let sum: f64 = rows.iter().map(|q| num(q, "mean") * num(q, "count")).sum();
                let exact: u64 = cwnd.iter().sum();
                assert!((sum - exact as f64).abs() <= 0.001 * cwnd.len() as f64, "{what}: {sum} vs {exact}");
            }
            // Each RTT sample, as the flow log counts them (`*_rtt_cnt`), in the written file too.
            let samples: u64 = flows.iter().map(|f| int(f, &format!("{p}_rtt_cnt"))).sum();
            let sampled = quantiles.iter().filter(|q| q["metric"] == "tcp_rtt_sample" && q["dir"] == dir);
            assert_eq!(sampled.map(|q| int(q, "count")).sum::<u64>(), samples, "{what}: RTT samples");
            // The anomaly classes: each class's bin holds the flows' segments of that class.
            let mut binned = [0u64; 9];
            for h in histograms.iter().filter(|h| h["metric"] == "tcp_anomaly" && h["dir"] == dir) {
                let class = int(h, "bin_lo") as usize;
                assert_eq!(int(h, "bin_hi") as usize, class + 1, "{what}: one class per bin");
                binned[class] += int(h, "count");
            }
            let mut expected = [0u64; 9];
            for f in &flows {
                let causes: Vec<u64> = classes.iter().map(|c| int(f, &format!("{p}_pkts_{c}"))).collect();
                expected[0] += int(f, &format!("{p}_pkts_data")).saturating_sub(causes.iter().sum());
                for (k, n) in causes.iter().enumerate() {
                    expected[k + 1] += n;
                }
            }
            assert_eq!(binned, expected, "{what}");
            anomalous += expected[1..].iter().sum::<u64>();
        }
    }
    // The lossy capture has retransmissions; the demo alone has none.
    assert!(shared_dir().is_none() || anomalous > 10, "only {anomalous} anomalous segments");
}
