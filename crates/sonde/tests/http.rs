//! `sonde analyze --http`: the demo trace served over a real socket on loopback (its figures equal
//! the files the run wrote), SIGINT stops it, a public address without a token is refused before
//! the run, and the dashboard in a real browser (playwright-core + Debian's chromium; SKIPPED
//! when node, chromium or `npm ci` in tests/browser are missing).

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A `sonde analyze --http` child, ended by its id when dropped.
struct Server {
    child: Child,
    addr: SocketAddr,
    _out: tempfile::TempDir,
    out_dir: PathBuf,
}

impl Server {
    fn start(http: &str, extra: &[&str], token_file: Option<&Path>) -> Server {
        let out = tempfile::tempdir().unwrap();
        let out_dir = out.path().join("run");
        let defs = out.path().join("demo.defs");
        // With the ready-made data -> ack RTT association, for the phase plot of its samples.
        let rtt = std::fs::read_to_string(repo().join("definitions/tcp-rtt.defs")).unwrap();
        let rtt: String = rtt.lines().take_while(|l| !l.starts_with("syn")).map(|l| format!("{l}\n")).collect();
        std::fs::write(&defs, format!("web = tcp.dport == 80\nudp7000 = udp.dport == 7000\n{rtt}")).unwrap();
        let mut cmd = common::sonde();
        cmd.args(["analyze", "-q", "-r"])
            .arg(repo().join("testdata/demo.pcap"))
            .arg("-o")
            .arg(&out_dir)
            .args(["--interval", "0.1", "--tables", "--internal", "10.77.0.1/32,fd77::1/128", "--definitions"])
            .arg(&defs)
            .args(["--http", http])
            .args(extra)
            .env_remove("SONDE_HTTP_TOKEN")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        if let Some(t) = token_file {
            cmd.arg("--http-token").arg(t);
        }
        Server::launch(cmd, out, out_dir)
    }

    /// `sonde analyze -r TRACE -o DIR ARGS --http 127.0.0.1:0`.
    fn analyze(trace: &Path, args: &[&str]) -> Server {
        let out = tempfile::tempdir().unwrap();
        let out_dir = out.path().join("run");
        let mut cmd = common::sonde();
        cmd.args(["analyze", "-q", "-r"]).arg(trace).arg("-o").arg(&out_dir).args(args);
        cmd.args(["--http", "127.0.0.1:0"]).env_remove("SONDE_HTTP_TOKEN").stdout(Stdio::piped());
        Server::launch(cmd, out, out_dir)
    }

    fn launch(mut cmd: Command, out: tempfile::TempDir, out_dir: PathBuf) -> Server {
        let mut child = cmd.spawn().expect("run sonde");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let url = line.split("http://").nth(1).unwrap_or_else(|| panic!("no URL in {line:?}"));
        let addr: SocketAddr = url.split('/').next().unwrap().parse().unwrap();
        // A server bound to every address is reached on loopback only.
        let addr = SocketAddr::from(([127, 0, 0, 1], addr.port()));
        Server { child, addr, _out: out, out_dir }
    }

    /// GET `path`: status and body.
    fn get(&self, path: &str, token: Option<&str>) -> (u16, String) {
        get(self.addr, path, token)
    }

    fn json(&self, path: &str) -> Value {
        let (code, body) = self.get(path, None);
        assert_eq!(code, 200, "{path}: {body}");
        serde_json::from_str(&body).unwrap()
    }

    /// SIGINT, as Ctrl-C sends it; the exit status.
    fn interrupt(self) -> std::process::ExitStatus {
        self.stop_with("INT")
    }

    /// The signal `name` (INT, TERM); the exit status.
    fn stop_with(mut self, name: &str) -> std::process::ExitStatus {
        common::stop_with(&mut self.child, name)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// GET `path` from `addr` (HTTP/1.1, one request, the connection closed): status and body.
fn get(addr: SocketAddr, path: &str, token: Option<&str>) -> (u16, String) {
    try_get(addr, path, token).unwrap_or_else(|e| panic!("GET {path}: {e}"))
}

fn try_get(addr: SocketAddr, path: &str, token: Option<&str>) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    write!(s, "GET {path} HTTP/1.1\r\nHost: localhost\r\n{auth}Connection: close\r\n\r\n")?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    let bad = || std::io::Error::other(format!("not an HTTP response: {text:?}"));
    let (head, body) = text.split_once("\r\n\r\n").ok_or_else(bad)?;
    let code = head.get(9..12).and_then(|c| c.parse().ok()).ok_or_else(bad)?;
    Ok((code, body.to_string()))
}

/// Sum of a numeric column of a TSV output.
fn column_sum(path: &Path, col: &str) -> f64 {
    common::read_tsv(path).iter().map(|r| common::num(r, col)).sum()
}

#[test]
fn the_api_serves_what_the_run_wrote() {
    let server = Server::start("127.0.0.1:0", &[], None);
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(server.out_dir.join("summary.json")).unwrap()).unwrap();
    let status = server.json("/api/status");
    assert_eq!(status["state"], "finished");
    assert_eq!(status["packets"], summary["packets"]["read"]);
    assert_eq!(server.json("/api/summary"), summary);
    // Intervals: the same packets and flows as intervals.tsv, interval by interval in sum.
    let intervals = server.json("/api/intervals");
    let rows: Vec<&Value> =
        intervals["items"].as_array().unwrap().iter().flat_map(|i| i["traffic"].as_array().unwrap()).collect();
    let sum = |f: &str| rows.iter().map(|r| r[f].as_f64().unwrap()).sum::<f64>();
    let tsv = server.out_dir.join("intervals.tsv");
    assert_eq!(sum("packets"), column_sum(&tsv, "packets"));
    assert_eq!(sum("bytes"), column_sum(&tsv, "bytes"));
    assert_eq!(sum("flows_opened"), column_sum(&tsv, "flows_opened"));
    assert_eq!(
        intervals["items"].as_array().unwrap().len() as u64,
        summary["monitoring"]["intervals"].as_u64().unwrap()
    );
    // Quantiles as quantiles.tsv writes them (ms, to the microsecond).
    let q = common::read_tsv(&server.out_dir.join("quantiles.tsv"));
    let api_q: Vec<&Value> =
        intervals["items"].as_array().unwrap().iter().flat_map(|i| i["quantiles"].as_array().unwrap()).collect();
    assert_eq!(api_q.len(), q.len());
    for (a, f) in api_q.iter().zip(&q) {
        assert_eq!(a["metric"].as_str().unwrap(), f["metric"]);
        assert!((a["p95"].as_f64().unwrap() - common::num(f, "p95")).abs() < 1e-6, "{a} vs {f:?}");
    }
    // The flow log, whole and filtered.
    let tcp = common::read_tsv(&server.out_dir.join("tcp_flows.tsv"));
    let page = server.json("/api/flows?limit=1000");
    assert_eq!(page["total"].as_u64().unwrap() as usize, tcp.len());
    let port80 = tcp.iter().filter(|r| r["s_port"] == "80" || r["c_port"] == "80").count();
    assert_eq!(server.json("/api/flows?port=80")["total"].as_u64().unwrap() as usize, port80);
    let complete = tcp.iter().filter(|r| r["complete"] == "1").count();
    assert_eq!(server.json("/api/flows?complete=true")["total"].as_u64().unwrap() as usize, complete);
    // Tables and definitions.
    let top = common::read_tsv(&server.out_dir.join("top.tsv"));
    assert_eq!(server.json("/api/tables/top")["rows"].as_array().unwrap().len(), top.len());
    let defs = server.json("/api/definitions");
    assert_eq!(
        defs["items"],
        summary["definitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                serde_json::json!({"name": d["name"], "definition": d["definition"], "version": d["version"],
            "retired": d["retired"], "packets": d["packets"], "bytes": d["bytes"]})
            })
            .collect::<Value>()
    );
    // The association's samples, as definition_associations.tsv counts them.
    let assoc = common::read_tsv(&server.out_dir.join("definition_associations.tsv"));
    let rtt = assoc.iter().find(|r| r["association"] == "rtt").expect("rtt in definition_associations.tsv");
    let samples =
        defs["associations"].as_array().unwrap().iter().find(|a| a["name"] == "rtt").unwrap()["samples"].clone();
    assert_eq!(samples.as_array().unwrap().len() as u64, common::int(rtt, "samples").min(2_000));
    // Metrics: the run's totals.
    let (code, metrics) = server.get("/metrics", None);
    assert_eq!(code, 200);
    let packets = summary["packets"]["read"].as_u64().unwrap();
    assert!(metrics.lines().any(|l| l == format!("sonde_packets_total {packets}")), "{metrics}");
    let status = server.interrupt();
    assert!(status.success(), "{status}");
}

#[test]
fn a_public_address_needs_a_token() {
    let out = tempfile::tempdir().unwrap();
    let run = common::sonde()
        .args(["analyze", "-q", "-r"])
        .arg(repo().join("testdata/demo.pcap"))
        .arg("-o")
        .arg(out.path().join("run"))
        .args(["--http", "0.0.0.0:0"])
        .env_remove("SONDE_HTTP_TOKEN")
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(1));
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(err.contains("bearer token is required"), "{err}");
    // Refused before the analysis: nothing was written.
    assert!(!out.path().join("run/summary.json").exists());

    let token = out.path().join("token");
    std::fs::write(&token, "s3cret\n").unwrap();
    let server = Server::start("0.0.0.0:0", &[], Some(&token));
    assert_eq!(server.get("/api/status", None).0, 401);
    assert_eq!(server.get("/api/status", Some("wrong")).0, 401);
    assert_eq!(server.get("/api/status", Some("s3cret")).0, 200);
    assert_eq!(server.get("/metrics", Some("s3cret")).0, 200);
    assert_eq!(server.get("/", None).0, 200);
}

/// common::browser_test against `server`.
fn browser_test(browser: &(PathBuf, String), script: &str, server: &Server, args: &[&str], min_checks: u32) -> PathBuf {
    common::browser_test(Command::new("node"), browser, script, &format!("http://{}/", server.addr), args, min_checks)
}

#[test]
fn the_dashboard_in_a_real_browser() {
    let Some(browser) = common::browser() else { return };
    let server = Server::start("127.0.0.1:0", &[], None);
    let artifacts = browser_test(&browser, "dashboard.mjs", &server, &[], 20);
    for shot in ["dashboard.png", "flows-sorted.png", "flows-filtered.png", "definitions.png"] {
        assert!(std::fs::metadata(artifacts.join(shot)).is_ok_and(|m| m.len() > 10_000), "{shot}");
    }
}

/// Issue 35: the first view of a finished run. Without --internal, the throughput is one "all"
/// series (no in/out lines of zeros); with it, in and out. The flow table shows dates,
/// durations and RTTs with units, empty exactly where the API has no sample; every panel says
/// what it shows and its unit (tests/browser/first-view.mjs).
#[test]
fn the_dashboards_first_view_in_a_real_browser() {
    let Some(browser) = common::browser() else { return };
    let server = Server::analyze(&repo().join("testdata/demo.pcap"), &["--interval", "0.1", "--tables"]);
    assert_eq!(server.json("/api/status")["internal_networks"], 0);
    let artifacts = browser_test(&browser, "first-view.mjs", &server, &["all", "first-view.png"], 20);
    drop(server);
    let server = Server::start("127.0.0.1:0", &[], None);
    assert_eq!(server.json("/api/status")["internal_networks"], 2);
    browser_test(&browser, "first-view.mjs", &server, &["split", "first-view-internal.png"], 20);
    for shot in ["first-view.png", "first-view-internal.png"] {
        assert!(std::fs::metadata(artifacts.join(shot)).is_ok_and(|m| m.len() > 10_000), "{shot}");
    }
}

#[test]
fn metrics_carry_the_ipfix_exporters_counters() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("demo.ipfix");
    let server = Server::start("127.0.0.1:0", &["--ipfix", file.to_str().unwrap(), "--active-timeout", "1"], None);
    let (code, metrics) = server.get("/metrics", None);
    assert_eq!(code, 200);
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(server.out_dir.join("summary.json")).unwrap()).unwrap();
    let ipfix = &summary["ipfix"];
    let sample = |line: &str| -> u64 {
        let found = metrics.lines().find(|l| l.starts_with(line)).unwrap_or_else(|| panic!("no {line} in\n{metrics}"));
        found[line.len()..].trim().parse().unwrap()
    };
    assert_eq!(sample("sonde_ipfix_records_total{outcome=\"sent\"}"), ipfix["records"].as_u64().unwrap());
    assert_eq!(sample("sonde_ipfix_messages_total{outcome=\"sent\"}"), ipfix["messages"].as_u64().unwrap());
    assert_eq!(sample("sonde_ipfix_bytes_total"), std::fs::metadata(&file).unwrap().len());
    assert_eq!(sample("sonde_ipfix_records_total{outcome=\"dropped\"}"), 0);
    // The interim records are among those sent.
    let flows = &summary["flows"];
    let ended = ["tcp", "udp"].map(|k| flows[k].as_u64().unwrap()).iter().sum::<u64>()
        + flows["icmp"]["flows"].as_u64().unwrap();
    assert_eq!(ipfix["records"].as_u64().unwrap(), ended + flows["interim_records"].as_u64().unwrap());
    // A service manager stops it with SIGTERM: a clean exit too.
    let status = server.stop_with("TERM");
    assert!(status.success(), "{status}");
}

/// Issue 20: an unauthenticated client opening ~20,000 idle connections to `monitor --http`
/// exhausted the descriptors: token holders timed out, and at SIGTERM the run wrote no outputs.
/// Here a monitor capturing on `lo` with 512 descriptors (`ulimit -n`) and a cap of 64
/// connections gets 2,000 idle ones: a token holder is answered, and SIGTERM writes every output.
#[test]
fn an_idle_crowd_leaves_a_monitor_answering_and_its_outputs_written() {
    // SAFETY: geteuid(2) has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: capturing on lo needs root");
        return;
    }
    // This process holds the crowd's 2,000 sockets: the soft limit raised towards the hard one.
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit with a valid pointer to an rlimit.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < 8192 {
            lim.rlim_cur = lim.rlim_max.min(8192);
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let token = dir.path().join("token");
    std::fs::write(&token, "s3cret\n").unwrap();
    let mut child = Command::new("sh")
        .arg("-c")
        .arg("ulimit -n 512 && exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_sonde"))
        .args(["monitor", "-i", "lo", "--force", "--interval", "1", "-o"])
        .arg(&out)
        .args(["--http", "127.0.0.1:0", "--http-max-connections", "64", "--http-token"])
        .arg(&token)
        .env_remove("SONDE_HTTP_TOKEN")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("run sonde monitor");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let url = line.split("http://").nth(1).unwrap_or_else(|| panic!("no URL in {line:?}"));
    let addr: SocketAddr = url.split('/').next().unwrap().parse().unwrap();
    let server = Server { child, addr, _out: dir, out_dir: out };
    let crowd: Vec<TcpStream> = (0..2000).map(|_| TcpStream::connect(addr).unwrap()).collect();
    let (code, body) = server.get("/api/status", Some("s3cret"));
    assert_eq!(code, 200, "{body}");
    let (_, metrics) = server.get("/metrics", Some("s3cret"));
    let evicted = metrics
        .lines()
        .find_map(|l| l.strip_prefix("sonde_http_connections_total{outcome=\"evicted\"} "))
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no evicted count in {metrics}"));
    assert!(evicted >= 2000 - 64, "evicted {evicted}");
    // SIGTERM with the crowd still connected: the outputs are written, the exit is clean.
    let mut server = server;
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(server.child.id() as i32, libc::SIGTERM) }, 0);
    let status = server.child.wait().unwrap();
    assert!(status.success(), "sonde monitor exited with {status}");
    for file in ["summary.json", "tcp_flows.tsv", "udp_flows.tsv", "intervals.tsv"] {
        assert!(server.out_dir.join(file).is_file(), "{file} not written");
    }
    drop(crowd);
}

/// Issue 23: `/metrics` as Prometheus's own tools take it. `promtool check metrics` finds no
/// problem (it found 22: quantiles on gauges), and a real Prometheus server (Debian's, started
/// here on loopback) scrapes sonde: the target is up with no scrape error, and a query gives back
/// the run's packets and a summary's count.
#[test]
fn prometheus_checks_and_scrapes_the_metrics() {
    let server = Server::start("127.0.0.1:0", &[], None);
    let (code, text) = server.get("/metrics", None);
    assert_eq!(code, 200);
    let mut promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (Debian's prometheus package: make deps installs it)");
    promtool.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let checked = promtool.wait_with_output().unwrap();
    let problems = String::from_utf8_lossy(&checked.stdout) + String::from_utf8_lossy(&checked.stderr);
    assert!(checked.status.success() && problems.trim().is_empty(), "promtool check metrics:\n{problems}");

    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: sonde\n    static_configs:\n      - targets: ['{}']\n",
            server.addr
        ),
    )
    .unwrap();
    let mut prometheus = Command::new("prometheus")
        .arg(format!("--config.file={}", config.display()))
        .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("prometheus (Debian's prometheus package: make deps installs it)");
    let prometheus_addr = SocketAddr::from(([127, 0, 0, 1], port));
    let query = |q: &str| -> Option<Value> {
        let (code, body) = try_get(prometheus_addr, &format!("/api/v1/query?query={q}"), None).ok()?;
        let v: Value = serde_json::from_str(&body).ok().filter(|_| code == 200)?;
        v["data"]["result"].as_array().filter(|r| !r.is_empty())?.first().cloned()
    };
    let started = Instant::now();
    let packets = loop {
        if let Some(found) = query("sonde_packets_total") {
            break found;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "Prometheus scraped nothing in 60 s");
        std::thread::sleep(Duration::from_millis(250));
    };
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(server.out_dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(
        packets["value"][1].as_str().unwrap().parse::<u64>().unwrap(),
        summary["packets"]["read"].as_u64().unwrap()
    );
    assert_eq!(query("up").expect("the target's up")["value"][1].as_str(), Some("1"));
    let targets: Value = serde_json::from_str(&get(prometheus_addr, "/api/v1/targets", None).1).unwrap();
    let target = &targets["data"]["activeTargets"][0];
    assert_eq!((target["health"].as_str(), target["lastError"].as_str()), (Some("up"), Some("")), "{target}");
    // A summary as Prometheus stores it: the latest interval's packet lengths, counted.
    let lengths = query("sonde_ip_len_bytes_count").expect("the packet-length summary's count");
    assert!(lengths["value"][1].as_str().unwrap().parse::<f64>().unwrap() > 0.0, "{lengths}");
    let _ = prometheus.kill();
    let _ = prometheus.wait();
}

/// The `points` of a `/api/store/series` answer, numbers read by Rust's exact parser.
fn store_points(body: &str) -> Vec<(i64, Option<f64>)> {
    let list = body.split_once("\"points\":[").unwrap_or_else(|| panic!("no points in {body}")).1;
    let list = &list[..list.find("]]").map_or(0, |i| i + 1)];
    list.split("],[")
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (t, v) = p.trim_matches(['[', ']']).split_once(',').unwrap();
            (t.parse().unwrap(), (v != "null").then(|| v.parse().unwrap()))
        })
        .collect()
}

#[test]
fn the_store_served_equals_ts_dump_and_the_dashboard_draws_it() {
    let Some(shared) = common::shared_dir() else { return };
    let trace = shared.join("groundtruth/mixed.pcap");
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("link.rrd");
    let store_arg = store.to_str().unwrap();
    // 11 s of real traffic in 1 s steps, kept at 1 s, 2 s and 5 s for an hour; the client is
    // internal.
    let args = [
        "--interval",
        "1",
        "--store",
        store_arg,
        "--store-archives",
        "1s:1h,2s:1h,5s:1h",
        "--internal",
        "10.77.0.1/32,fd77::1/128",
    ];
    let server = Server::analyze(&trace, &args);
    let dump = common::sonde().args(["ts", "dump"]).arg(&store).output().unwrap();
    assert!(dump.status.success());
    let dump = String::from_utf8(dump.stdout).unwrap();
    let mut lines = dump.lines();
    let names: Vec<&str> = lines.next().unwrap().split(',').skip(4).collect();
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();

    let listing = server.json("/api/store");
    assert_eq!(listing["name"], "link.rrd");
    assert_eq!(listing["resolutions_s"], serde_json::json!([1, 2, 5]));
    assert_eq!(listing["series"].as_array().unwrap().len(), names.len());
    let (mut compared, mut known) = (0, 0);
    for archive in listing["archives"].as_array().unwrap() {
        let a = archive["archive"].as_u64().unwrap().to_string();
        let (cf, res) = (archive["cf"].as_str().unwrap(), archive["resolution_s"].as_u64().unwrap());
        for (s, name) in names.iter().enumerate() {
            let (code, body) = server.get(&format!("/api/store/series?name={name}&resolution_s={res}&cf={cf}"), None);
            assert_eq!(code, 200, "{body}");
            let served = store_points(&body);
            let dumped: Vec<(i64, Option<f64>)> = rows
                .iter()
                .filter(|r| r[0] == a)
                .map(|r| (r[3].parse().unwrap(), (!r[4 + s].is_empty()).then(|| r[4 + s].parse().unwrap())))
                .collect();
            assert_eq!(served, dumped, "{name}, archive {a} ({cf}, {res} s)");
            compared += served.len();
            known += served.iter().filter(|p| p.1.is_some()).count();
        }
    }
    // Every row of every archive, and the run's own seconds among them.
    assert_eq!(compared, rows.len() * names.len());
    assert!(known > 11 * 3 * names.len() / 2, "{known} known values of {compared}");

    let Some(browser) = common::browser() else { return };
    let artifacts = browser_test(&browser, "store.mjs", &server, &[], 8);
    assert!(std::fs::metadata(artifacts.join("store.png")).is_ok_and(|m| m.len() > 10_000));
}
