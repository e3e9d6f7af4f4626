//! Issue 22: `sonde serve --merged DIR` over a merge job's output written here as Spark writes it
//! (docs/merged.md): the demo trace's intervals.tsv, quantiles.tsv and histograms.tsv turned into
//! the four Parquet changelogs over several micro-batches, an older batch superseded by a newer
//! one, Spark's hidden and temporary files beside them, a probe with its clock off. The API
//! answers exactly the newest rows; a file added while the server runs shows after a reload; a
//! damaged file is skipped and counted, never fatal.

mod common;

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use serde_json::Value;
use sonde_arrow::arrow::array::{ArrayRef, BooleanArray, Float64Array, Int32Array, Int64Array, StringArray};
use sonde_arrow::arrow::record_batch::RecordBatch;

type Row = HashMap<String, String>;

/// The contract's columns: D double, L long, I int, S string, B boolean.
const INTERVALS: &[(&str, char)] = &[
    ("start", 'D'),
    ("end", 'D'),
    ("proto", 'S'),
    ("net", 'S'),
    ("packets", 'L'),
    ("bytes", 'L'),
    ("flows_opened", 'L'),
    ("flows_closed", 'L'),
    ("flows_active", 'L'),
    ("probes", 'I'),
    ("batch", 'L'),
];
const QUANTILES: &[(&str, char)] = &[
    ("start", 'D'),
    ("end", 'D'),
    ("metric", 'S'),
    ("dir", 'S'),
    ("net", 'S'),
    ("unit", 'S'),
    ("count", 'L'),
    ("mean", 'D'),
    ("min", 'D'),
    ("p50", 'D'),
    ("p95", 'D'),
    ("p99", 'D'),
    ("max", 'D'),
    ("probes", 'I'),
    ("batch", 'L'),
];
const HISTOGRAMS: &[(&str, char)] = &[
    ("start", 'D'),
    ("end", 'D'),
    ("metric", 'S'),
    ("dir", 'S'),
    ("net", 'S'),
    ("bin_lo", 'D'),
    ("bin_hi", 'D'),
    ("count", 'L'),
    ("batch", 'L'),
];
const HOSTS: &[(&str, char)] = &[
    ("start", 'D'),
    ("end", 'D'),
    ("addr", 'S'),
    ("pkts_in", 'L'),
    ("bytes_in", 'L'),
    ("pkts_out", 'L'),
    ("bytes_out", 'L'),
    ("flows", 'L'),
    ("batch", 'L'),
];
const PAIRS: &[(&str, char)] = &[
    ("start", 'D'),
    ("end", 'D'),
    ("src", 'S'),
    ("dst", 'S'),
    ("packets", 'L'),
    ("bytes", 'L'),
    ("flows", 'L'),
    ("batch", 'L'),
];
const PROBES: &[(&str, char)] = &[
    ("probe", 'S'),
    ("last_start", 'D'),
    ("last_end", 'D'),
    ("seen_at", 'D'),
    ("interval_s", 'D'),
    ("lag_s", 'D'),
    ("offset_s", 'D'),
    ("clock_off", 'B'),
    ("batch", 'L'),
];

/// Writes `rows` as one Parquet file of `columns` at `path` (snappy, Spark's default, or none).
fn write_parquet(path: &Path, columns: &[(&str, char)], rows: &[Row], snappy: bool) {
    let arrays: Vec<(&str, ArrayRef)> = columns
        .iter()
        .map(|&(name, kind)| {
            let text = |r: &Row| r.get(name).unwrap_or_else(|| panic!("no {name} in {r:?}")).clone();
            let array: ArrayRef = match kind {
                'D' => Arc::new(rows.iter().map(|r| text(r).parse::<f64>().unwrap()).collect::<Float64Array>()),
                'L' => Arc::new(rows.iter().map(|r| text(r).parse::<i64>().unwrap()).collect::<Int64Array>()),
                'I' => Arc::new(rows.iter().map(|r| text(r).parse::<i32>().unwrap()).collect::<Int32Array>()),
                'B' => Arc::new(rows.iter().map(|r| Some(text(r) == "true")).collect::<BooleanArray>()),
                _ => Arc::new(rows.iter().map(text).map(Some).collect::<StringArray>()),
            };
            (name, array)
        })
        .collect();
    let batch = RecordBatch::try_from_iter(arrays).unwrap();
    let props = WriterProperties::builder()
        .set_compression(if snappy { Compression::SNAPPY } else { Compression::UNCOMPRESSED })
        .build();
    let mut w = ArrowWriter::try_new(File::create(path).unwrap(), batch.schema(), Some(props)).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
}

/// `rows` with `column` set to `value` (or changed by `f`).
fn with(rows: &[Row], set: &[(&str, &str)]) -> Vec<Row> {
    rows.iter()
        .map(|r| {
            let mut r = r.clone();
            for (k, v) in set {
                r.insert(k.to_string(), v.to_string());
            }
            r
        })
        .collect()
}

fn changed(rows: &[Row], column: &str, f: impl Fn(i64) -> i64) -> Vec<Row> {
    rows.iter()
        .map(|r| {
            let mut r = r.clone();
            let v: i64 = r[column].parse().unwrap();
            r.insert(column.into(), f(v).to_string());
            r
        })
        .collect()
}

/// The demo trace analysed with 1 s intervals: its intervals, quantiles and histograms rows.
struct Run {
    intervals: Vec<Row>,
    quantiles: Vec<Row>,
    histograms: Vec<Row>,
}

impl Run {
    fn demo() -> Run {
        let trace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/demo.pcap");
        let (dir, out) = common::analyze(&trace, &["--interval", "1"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let read = |name: &str| common::read_tsv(&dir.path().join(name));
        Run { intervals: read("intervals.tsv"), quantiles: read("quantiles.tsv"), histograms: read("histograms.tsv") }
    }

    /// The interval starts, oldest first.
    fn starts(&self) -> Vec<String> {
        let mut s: Vec<String> = self.intervals.iter().map(|r| r["start"].clone()).collect();
        s.dedup();
        s
    }
}

fn rows_of(rows: &[Row], starts: &[String]) -> Vec<Row> {
    rows.iter().filter(|r| starts.contains(&r["start"])).cloned().collect()
}

fn probe(name: &str, last_start: f64, offset_s: f64, clock_off: bool, batch: u32) -> Row {
    let seen_at = last_start + 1.0 + 0.5 + offset_s;
    [
        ("probe", name.to_string()),
        ("last_start", last_start.to_string()),
        ("last_end", (last_start + 1.0).to_string()),
        ("seen_at", seen_at.to_string()),
        ("interval_s", "1".into()),
        ("lag_s", (0.5 + offset_s).to_string()),
        ("offset_s", offset_s.to_string()),
        ("clock_off", clock_off.to_string()),
        ("batch", batch.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// A `sonde serve --merged` child, ended by its id when dropped.
struct Server {
    child: Child,
    addr: SocketAddr,
}

impl Server {
    fn start(dir: &Path) -> Server {
        Server::start_with(dir, &[])
    }

    /// `sonde serve --merged dir` with `options` too.
    fn start_with(dir: &Path, options: &[&str]) -> Server {
        let mut child = common::sonde()
            .args(["serve", "-q"])
            .args(options)
            .arg("--merged")
            .arg(dir)
            .args(["--http", "127.0.0.1:0", "--reload", "0.2"])
            .env_remove("SONDE_HTTP_TOKEN")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("run sonde");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let url = line.split("http://").nth(1).unwrap_or_else(|| panic!("no URL in {line:?}"));
        let addr: SocketAddr = url.split('/').next().unwrap().parse().unwrap();
        Server { child, addr }
    }

    fn get(&self, path: &str) -> (u16, String) {
        let mut s = TcpStream::connect(self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        write!(s, "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or_else(|| panic!("not HTTP: {text:?}"));
        (head[9..12].parse().unwrap(), body.to_string())
    }

    fn json(&self, path: &str) -> Value {
        let (code, body) = self.get(path);
        assert_eq!(code, 200, "{path}: {body}");
        serde_json::from_str(&body).unwrap()
    }

    /// SIGTERM, as a service manager stops it; the exit status (within 20 s).
    fn terminate(mut self) -> std::process::ExitStatus {
        common::stop_with(&mut self.child, "TERM")
    }

    /// Waits (at most 20 s) until `/api/status` satisfies `done`; the status then.
    fn status_until(&self, what: &str, done: impl Fn(&Value) -> bool) -> Value {
        let started = Instant::now();
        loop {
            let status = self.json("/api/status");
            if done(&status) {
                return status;
            }
            assert!(started.elapsed() < Duration::from_secs(20), "never {what}: {status}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The rows of intervals.tsv for `starts`, as text comparable with the API's.
fn expected_traffic(run: &Run, starts: &[String]) -> Vec<String> {
    let mut out: Vec<String> = rows_of(&run.intervals, starts)
        .iter()
        .map(|r| {
            let f = |c: &str| r[c].parse::<f64>().unwrap();
            format!(
                "{} {} {} {} {} {} {} {} {}",
                f("start"),
                f("end"),
                r["proto"],
                r["net"],
                r["packets"],
                r["bytes"],
                r["flows_opened"],
                r["flows_closed"],
                r["flows_active"]
            )
        })
        .collect();
    out.sort();
    out
}

fn served_traffic(intervals: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for i in intervals["items"].as_array().unwrap() {
        for t in i["traffic"].as_array().unwrap() {
            out.push(format!(
                "{} {} {} {} {} {} {} {} {}",
                i["start_s"].as_f64().unwrap(),
                i["end_s"].as_f64().unwrap(),
                t["proto"].as_str().unwrap(),
                t["net"].as_str().unwrap(),
                t["packets"],
                t["bytes"],
                t["flows_opened"],
                t["flows_closed"],
                t["flows_active"]
            ));
        }
    }
    out.sort();
    out
}

const QUANTILE_FIELDS: [&str; 7] = ["count", "mean", "min", "p50", "p95", "p99", "max"];

fn expected_quantiles(run: &Run, starts: &[String]) -> Vec<String> {
    let mut out: Vec<String> = rows_of(&run.quantiles, starts)
        .iter()
        .map(|r| {
            let values: Vec<String> =
                QUANTILE_FIELDS.iter().map(|c| r[*c].parse::<f64>().unwrap().to_string()).collect();
            let start = r["start"].parse::<f64>().unwrap();
            format!("{start} {} {} {} {} {}", r["metric"], r["dir"], r["net"], r["unit"], values.join(" "))
        })
        .collect();
    out.sort();
    out
}

fn served_quantiles(intervals: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for i in intervals["items"].as_array().unwrap() {
        for q in i["quantiles"].as_array().unwrap() {
            let values: Vec<String> = QUANTILE_FIELDS.iter().map(|c| q[*c].as_f64().unwrap().to_string()).collect();
            let s = |c: &str| q[c].as_str().unwrap().to_string();
            out.push(format!(
                "{} {} {} {} {} {}",
                i["start_s"].as_f64().unwrap(),
                s("metric"),
                s("dir"),
                s("net"),
                s("unit"),
                values.join(" ")
            ));
        }
    }
    out.sort();
    out
}

fn expected_bins(run: &Run, starts: &[String]) -> Vec<String> {
    let mut out: Vec<String> = rows_of(&run.histograms, starts)
        .iter()
        .map(|r| {
            let f = |c: &str| r[c].parse::<f64>().unwrap();
            format!(
                "{} {} {} {} {} {} {}",
                f("start"),
                r["metric"],
                r["dir"],
                r["net"],
                f("bin_lo"),
                f("bin_hi"),
                f("count")
            )
        })
        .collect();
    out.sort();
    out
}

fn served_bins(histograms: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for i in histograms["items"].as_array().unwrap() {
        for h in i["histograms"].as_array().unwrap() {
            for b in h["bins"].as_array().unwrap() {
                let b: Vec<f64> = b.as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
                let s = |c: &str| h[c].as_str().unwrap().to_string();
                out.push(format!(
                    "{} {} {} {} {} {} {}",
                    i["start_s"].as_f64().unwrap(),
                    s("metric"),
                    s("dir"),
                    s("net"),
                    b[0],
                    b[1],
                    b[2]
                ));
            }
        }
    }
    out.sort();
    out
}

/// A merged directory of `run`'s intervals but its last: batch 1 stale, batch 2 (two files)
/// the true values; Spark's `_SUCCESS`, `_temporary/` and a hidden `.part-…` beside them. The
/// starts written.
fn merged_dir(run: &Run, dir: &Path) -> Vec<String> {
    let starts = run.starts();
    let early = &starts[..starts.len() - 1];
    let (half_a, half_b) = early.split_at(early.len() / 2);
    for log in ["intervals", "quantiles", "histograms", "probes"] {
        std::fs::create_dir_all(dir.join(log).join("_temporary/0")).unwrap();
        std::fs::write(dir.join(log).join("_SUCCESS"), b"").unwrap();
    }
    let two = [("probes", "2")];
    let part = |log: &str, n: u32| dir.join(log).join(format!("part-{n:05}-6f1c-c000.snappy.parquet"));
    // Batch 1: every count off (it is superseded everywhere by batch 2).
    let all = rows_of(&run.intervals, early);
    write_parquet(
        &part("intervals", 0),
        INTERVALS,
        &changed(&with(&all, &[("probes", "1"), ("batch", "1")]), "packets", |v| v + 1000),
        false,
    );
    let q = rows_of(&run.quantiles, early);
    write_parquet(
        &part("quantiles", 0),
        QUANTILES,
        &changed(&with(&q, &[("probes", "1"), ("batch", "1")]), "count", |v| v + 5),
        false,
    );
    let h = rows_of(&run.histograms, early);
    write_parquet(
        &part("histograms", 0),
        HISTOGRAMS,
        &changed(&with(&h, &[("batch", "1")]), "count", |v| v * 3),
        false,
    );
    // Batch 2, in two files each (as two Spark tasks write them).
    for (n, half) in [(1, half_a), (2, half_b)] {
        let set = [two[0], ("batch", "2")];
        write_parquet(&part("intervals", n), INTERVALS, &with(&rows_of(&run.intervals, half), &set), true);
        write_parquet(&part("quantiles", n), QUANTILES, &with(&rows_of(&run.quantiles, half), &set), true);
        write_parquet(
            &part("histograms", n),
            HISTOGRAMS,
            &with(&rows_of(&run.histograms, half), &[("batch", "2")]),
            true,
        );
    }
    // What Spark leaves while writing, and a hidden file: never read (batch 9 would win).
    let bogus = changed(&with(&all, &[("probes", "1"), ("batch", "9")]), "packets", |_| 7);
    write_parquet(&dir.join("intervals/.part-00003-6f1c-c000.snappy.parquet"), INTERVALS, &bogus, false);
    write_parquet(&dir.join("intervals/_temporary/0/part-00003-6f1c-c000.snappy.parquet"), INTERVALS, &bogus, false);
    write_parquet(&dir.join("intervals/_part-00004.parquet"), INTERVALS, &bogus, false);
    let last: f64 = early.last().unwrap().parse().unwrap();
    write_parquet(&part("probes", 0), PROBES, &[probe("p1", last, 0.0, true, 1)], false);
    let probes =
        [probe("p1", last, 0.1, false, 2), probe("p2", last, -0.1, false, 2), probe("p3", last - 4.0, 3.2, true, 2)];
    write_parquet(&part("probes", 1), PROBES, &probes, false);
    early.to_vec()
}

#[test]
fn the_merged_view_serves_the_newest_rows_and_follows_the_directory() {
    let run = Run::demo();
    let starts = run.starts();
    assert!(starts.len() >= 4, "the demo has {} intervals", starts.len());
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("merged");
    let early = merged_dir(&run, &dir);
    let server = Server::start(&dir);

    // The newest batch of every key, none of the stale, hidden or temporary rows.
    let intervals = server.json("/api/intervals");
    assert_eq!(served_traffic(&intervals), expected_traffic(&run, &early));
    assert_eq!(intervals["interval_s"], 1.0);
    assert_eq!(served_quantiles(&intervals), expected_quantiles(&run, &early));
    assert_eq!(served_bins(&server.json("/api/histograms")), expected_bins(&run, &early));
    // In sonde's own order (by start, then protocol and direction as intervals.tsv has them).
    let first: Vec<String> = intervals["items"][1]["traffic"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| format!("{}/{}", t["proto"].as_str().unwrap(), t["net"].as_str().unwrap()))
        .collect();
    let in_file: Vec<String> =
        rows_of(&run.intervals, &early[1..2]).iter().map(|r| format!("{}/{}", r["proto"], r["net"])).collect();
    assert_eq!(first, in_file);

    // The probes table and the flagged probe, in the status too.
    let probes = server.json("/api/probes");
    assert_eq!(probes["merged"], true);
    let flags: Vec<(String, bool)> = probes["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["probe"].as_str().unwrap().to_string(), p["clock_off"].as_bool().unwrap()))
        .collect();
    assert_eq!(flags, [("p1".into(), false), ("p2".into(), false), ("p3".into(), true)]);
    assert_eq!(probes["items"][2]["offset_s"], 3.2);
    let status = server.json("/api/status");
    let merged = &status["merged"];
    assert_eq!(merged["clock_off"], serde_json::json!(["p3"]));
    assert_eq!(merged["probes"], 3);
    let newest: f64 = early.last().unwrap().parse().unwrap();
    assert_eq!(merged["newest_start_s"].as_f64(), Some(newest));
    assert_eq!(merged["files_unreadable"], 0);
    assert_eq!(merged["files_read"], 3 * 3 + 2);
    let packets: u64 = rows_of(&run.intervals, &early).iter().map(|r| common::int(r, "packets")).sum();
    assert_eq!(status["packets"], packets);

    // What a merged view has not: a clear 501.
    for path in ["/api/definitions", "/api/store", "/api/summary"] {
        let (code, body) = server.get(path);
        assert_eq!(code, 501, "{path}: {body}");
        assert!(body.contains("not_in_merged_view"), "{path}: {body}");
    }
    // The dashboard is served, with its probes panel.
    let (code, page) = server.get("/");
    assert_eq!(code, 200);
    assert!(page.contains("probes-panel"));

    // The last interval arrives as batch 3, renamed into place as Spark does; a damaged file
    // arrives with it.
    let last_start = starts.last().unwrap().clone();
    let last = [last_start.clone()];
    for (log, columns, rows) in [
        ("intervals", INTERVALS, with(&rows_of(&run.intervals, &last), &[("probes", "2"), ("batch", "3")])),
        ("quantiles", QUANTILES, with(&rows_of(&run.quantiles, &last), &[("probes", "2"), ("batch", "3")])),
        ("histograms", HISTOGRAMS, with(&rows_of(&run.histograms, &last), &[("batch", "3")])),
    ] {
        let temp = dir.join(log).join("_temporary/0/part-00007-9a2e-c000.snappy.parquet");
        write_parquet(&temp, columns, &rows, true);
        std::fs::rename(&temp, dir.join(log).join("part-00007-9a2e-c000.snappy.parquet")).unwrap();
    }
    std::fs::write(dir.join("quantiles/part-00008-dead-c000.snappy.parquet"), b"PAR1 not a parquet file").unwrap();
    let last_s: f64 = last_start.parse().unwrap();
    let status = server.status_until("the new interval and the damaged file", |s| {
        s["merged"]["newest_start_s"].as_f64() == Some(last_s) && s["merged"]["files_unreadable"] == 1
    });
    assert!(status["merged"]["last_failure"].as_str().unwrap().contains("part-00008-dead"), "{status}");
    let intervals = server.json("/api/intervals");
    assert_eq!(served_traffic(&intervals), expected_traffic(&run, &starts));
    assert_eq!(served_quantiles(&intervals), expected_quantiles(&run, &starts));
    assert_eq!(served_bins(&server.json("/api/histograms")), expected_bins(&run, &starts));

    // Tried again at every reload, counted each time; the rest still served.
    server.status_until("a second failed read", |s| s["merged"]["read_failures"].as_u64() >= Some(2));
    let (code, metrics) = server.get("/metrics");
    assert_eq!(code, 200);
    assert!(metrics.lines().any(|l| l == "sonde_merged_files_unreadable 1"), "{metrics}");
    assert!(metrics.lines().any(|l| l == "sonde_probe_clock_off{probe=\"p3\"} 1"), "{metrics}");
    let total: u64 = run.intervals.iter().map(|r| common::int(r, "packets")).sum();
    assert!(metrics.lines().any(|l| l == format!("sonde_packets_total {total}")), "{metrics}");

    // Once the damaged file is whole, it is read and the count goes back to 0.
    let whole = with(&rows_of(&run.quantiles, &last), &[("probes", "2"), ("batch", "3")]);
    write_parquet(&dir.join("quantiles/part-00008-dead-c000.snappy.parquet"), QUANTILES, &whole, true);
    server.status_until("no file unreadable", |s| s["merged"]["files_unreadable"] == 0);
    assert_eq!(served_quantiles(&server.json("/api/intervals")), expected_quantiles(&run, &starts));
}

/// The dashboard draws the merged view (tests/browser/merged.mjs; SKIPPED without node, chromium
/// or `npm ci` in tests/browser).
#[test]
fn the_dashboard_draws_the_merged_view_in_a_real_browser() {
    let Some((browser_dir, chromium)) = common::browser() else { return };
    let run = Run::demo();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("merged");
    merged_dir(&run, &dir);
    let server = Server::start(&dir);
    let artifacts = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/browser-artifacts");
    let out = std::process::Command::new("node")
        .current_dir(&browser_dir)
        .arg("merged.mjs")
        .arg(format!("http://{}/", server.addr))
        .arg(&artifacts)
        .env("CHROMIUM", chromium)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the browser test merged.mjs failed");
    assert!(stdout.lines().any(|l| l.ends_with(" passed, 0 failed")), "{stdout}");
    assert!(std::fs::metadata(artifacts.join("merged.png")).is_ok_and(|m| m.len() > 10_000));
}

#[test]
fn at_most_max_intervals_are_kept_and_a_missing_directory_is_refused() {
    let run = Run::demo();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("merged");
    let early = merged_dir(&run, &dir);
    let server = Server::start_with(&dir, &["--max-intervals", "2"]);
    let intervals = server.json("/api/intervals");
    let kept: Vec<f64> =
        intervals["items"].as_array().unwrap().iter().map(|i| i["start_s"].as_f64().unwrap()).collect();
    let newest: Vec<f64> = early[early.len() - 2..].iter().map(|s| s.parse().unwrap()).collect();
    assert_eq!(kept, newest);
    // With their newest rows, whichever file was read first.
    let newest_starts = &early[early.len() - 2..];
    assert_eq!(served_traffic(&intervals), expected_traffic(&run, newest_starts));
    assert_eq!(served_quantiles(&intervals), expected_quantiles(&run, newest_starts));
    drop(server);

    let out = common::sonde()
        .args(["serve", "--merged"])
        .arg(tmp.path().join("absent"))
        .args(["--http", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--merged"), "{}", String::from_utf8_lossy(&out.stderr));
}

fn row(pairs: &[(&str, String)]) -> Row {
    pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
}

fn host(start: u32, addr: &str, bytes_in: u32, bytes_out: u32, flows: u32, batch: u32) -> Row {
    let n = |v: u32| v.to_string();
    row(&[
        ("start", n(start)),
        ("end", n(start + 60)),
        ("addr", addr.into()),
        ("pkts_in", n(bytes_in / 100)),
        ("bytes_in", n(bytes_in)),
        ("pkts_out", n(bytes_out / 100)),
        ("bytes_out", n(bytes_out)),
        ("flows", n(flows)),
        ("batch", n(batch)),
    ])
}

fn pair(start: u32, src: &str, dst: &str, bytes: u32, batch: u32) -> Row {
    let n = |v: u32| v.to_string();
    row(&[
        ("start", n(start)),
        ("end", n(start + 60)),
        ("src", src.into()),
        ("dst", dst.into()),
        ("packets", n(bytes / 100)),
        ("bytes", n(bytes)),
        ("flows", "1".into()),
        ("batch", n(batch)),
    ])
}

/// Issue 34: the flow query's changelogs (`hosts/`, `pairs/`) served as `/api/tables` and
/// `/api/flows`: the newest row of each key, per interval the largest `--max-table-rows` kept
/// (the rest let go, counted, their bound stated), the top `--top` ranked with `exact` flags.
#[test]
fn the_merged_flow_tables_are_served_as_tables_and_flows() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("merged");
    for d in ["hosts", "pairs"] {
        std::fs::create_dir_all(dir.join(d)).unwrap();
    }
    // Batch 1; batch 2 supersedes 10.0.0.1 and 10.0.0.9 of the first interval, adds a fourth host
    // (of three kept: the smallest, 10.0.0.3 with 300 bytes, is let go) and a second interval.
    let batch1 = [
        host(60, "10.0.0.1", 100, 100, 1, 1),
        host(60, "10.0.0.3", 200, 100, 1, 1),
        host(60, "10.0.0.9", 500, 0, 1, 1),
    ];
    let batch2 = [
        host(60, "10.0.0.1", 1000, 2000, 3, 2),
        host(60, "10.0.0.9", 400, 0, 2, 2),
        host(60, "fd00::7", 600, 600, 1, 2),
        host(120, "10.0.0.1", 50, 50, 1, 2),
    ];
    write_parquet(&dir.join("hosts/part-00000001-000.parquet"), HOSTS, &batch1, false);
    write_parquet(&dir.join("hosts/part-00000002-000.parquet"), HOSTS, &batch2, true);
    let pairs = [
        pair(60, "10.0.0.1", "10.0.0.9", 900, 1),
        pair(60, "10.0.0.1", "10.0.0.9", 2000, 2),
        pair(60, "10.0.0.9", "10.0.0.1", 400, 2),
        pair(60, "fd00::7", "10.0.0.1", 600, 2),
        pair(120, "10.0.0.1", "10.0.0.3", 50, 2),
    ];
    write_parquet(&dir.join("pairs/part-00000002-compact-000.parquet"), PAIRS, &pairs, true);
    let server = Server::start_with(&dir, &["--max-table-rows", "3", "--top", "2"]);
    let status = server.status_until("the flow tables read", |s| s["merged"]["files_read"] == 3);
    assert_eq!(status["merged"]["flow_intervals"], 2);
    assert_eq!(status["merged"]["max_table_rows"], 3);
    assert_eq!(status["merged"]["table_rows_let_go"], 1);

    let list = server.json("/api/tables");
    let rows: HashMap<String, u64> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| (i["name"].as_str().unwrap().to_string(), i["rows"].as_u64().unwrap()))
        .collect();
    assert_eq!((rows["hosts"], rows["matrix"], rows["top"]), (4, 4, 6));

    // Hosts: newest rows, per interval by bytes (in + out), largest first.
    let hosts = server.json("/api/tables/hosts");
    let cols: Vec<&str> = hosts["columns"].as_array().unwrap().iter().map(|c| c.as_str().unwrap()).collect();
    assert_eq!(cols, ["start", "end", "addr", "pkts_in", "bytes_in", "pkts_out", "bytes_out", "flows"]);
    let got: Vec<(f64, String, u64, u64)> = hosts["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (r[0].as_f64().unwrap(), r[2].as_str().unwrap().to_string(), r[4].as_u64().unwrap(), r[7].as_u64().unwrap())
        })
        .collect();
    let want = [
        (60.0, "10.0.0.1".to_string(), 1000, 3),
        (60.0, "fd00::7".to_string(), 600, 1),
        (60.0, "10.0.0.9".to_string(), 400, 2),
        (120.0, "10.0.0.1".to_string(), 50, 1),
    ];
    assert_eq!(got, want);
    let later = server.json("/api/tables/hosts?since=100");
    assert_eq!(later["rows"].as_array().unwrap().len(), 1);

    // Top 2 per interval and table; the hosts of interval 60 let one go (300 bytes): ranks above
    // that are exact.
    let top = server.json("/api/tables/top");
    let ranked: Vec<String> = top["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| format!("{} {} {} {} {} {} {}", r[0], r[2], r[3], r[4], r[7], r[9], r[10]))
        .collect();
    assert_eq!(
        ranked,
        [
            "60.0 \"hosts\" 1 \"10.0.0.1\" 3000 true 300",
            "60.0 \"hosts\" 2 \"fd00::7\" 1200 true 300",
            "60.0 \"matrix\" 1 \"10.0.0.1\" 2000 true 0",
            "60.0 \"matrix\" 2 \"fd00::7\" 600 true 0",
            "120.0 \"hosts\" 1 \"10.0.0.1\" 100 true 0",
            "120.0 \"matrix\" 1 \"10.0.0.1\" 50 true 0",
        ]
    );

    // Flows: the host pairs, filtered, sorted and paged as a flow log.
    let page = server.json("/api/flows?addr=10.0.0.9&sort=bytes&order=asc");
    assert_eq!((page["proto"].as_str(), page["total"].as_u64()), (Some("pairs"), Some(2)));
    let bytes: Vec<u64> = page["rows"].as_array().unwrap().iter().map(|r| r[5].as_u64().unwrap()).collect();
    assert_eq!(bytes, [400, 2000]);
    assert_eq!(server.json("/api/flows?proto=pairs&limit=1")["rows"].as_array().unwrap().len(), 1);
    for bad in ["/api/flows?proto=tcp", "/api/flows?port=80"] {
        let (code, body) = server.get(bad);
        assert_eq!(code, 400, "{bad}: {body}");
    }
    // Stopped as a service manager stops it: a clean exit.
    let status = server.terminate();
    assert!(status.success(), "{status}");
}
