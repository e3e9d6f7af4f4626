//! `sonde monitor` on a veth pair in a network namespace made by the test: traces replayed with
//! tcpreplay into the capture give the flow logs `sonde analyze` gives for the same trace (but
//! for the fields that depend on packet times), with no packet dropped; and a quiet link still
//! times flows out (the idle tick). Needs root, `ip` (iproute2) and tcpreplay; SKIPPED without.
//!
//! What is compared and what is not: a replay at a fixed packet rate keeps the packets and
//! their order but not their times. So every field that is a time or derives from times is
//! left out (`time_dependent`): absolute and relative times (first, last, durations, first
//! ACK, first/last payload), RTT values (average, min, max, deviation, handshake RTTs) and
//! Tstat's classes of retransmissions and anomalies (`*_pkts_rto`, `_fs`, `_reor`, `_dup`,
//! `_unk`, `_fc`, `_unrto`, `_unfs`: they are told apart by RTT estimates and gaps between
//! packets). Everything else must be equal: packets, bytes, flags, windows, options, TTLs,
//! retransmitted and out-of-order counts (by sequence numbers), RTT sample counts, complete,
//! end reason.

mod common;
mod netns;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use netns::{run_ok, Monitor, Netns};

fn time_dependent(column: &str) -> bool {
    const CLASSES: [&str; 8] = ["rto", "fs", "reor", "dup", "unk", "fc", "unrto", "unfs"];
    // The UID hashes the first packet's time.
    column.contains("first")
        || column == "uid"
        || column.contains("last")
        || column.contains("durat")
        || column.ends_with("hs_rtt")
        || ["avg", "min", "max", "std"].iter().any(|s| column.ends_with(&format!("_rtt_{s}")))
        || CLASSES.iter().any(|c| column == format!("c_pkts_{c}") || column == format!("s_pkts_{c}"))
}

/// A flow log's rows without their time-dependent fields, sorted; and the columns kept.
fn timeless(path: &Path) -> (Vec<String>, Vec<Vec<String>>) {
    let rows = read_tsv(path);
    let mut kept: Vec<String> = rows.first().map(|r| r.keys().cloned().collect()).unwrap_or_default();
    kept.retain(|c| !time_dependent(c));
    kept.sort();
    let mut out: Vec<Vec<String>> = rows.iter().map(|r| kept.iter().map(|c| r[c].clone()).collect()).collect();
    out.sort();
    (kept, out)
}

fn summary(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).expect("summary.json")).unwrap()
}

/// Replays `trace` into `sonde monitor` (with `extra` options) and checks it against `sonde
/// analyze` of the same trace.
fn check_replay(trace: &Path, pps: u32, extra: &[&str]) {
    let Some(ns) = Netns::new(&["tcpreplay"]) else { return };
    let live = tempfile::tempdir().unwrap();
    let monitor = Monitor::start(&ns, live.path(), extra);
    ns.replay(trace, pps);
    // The last frames reach the ring's block within its 10 ms timeout.
    std::thread::sleep(Duration::from_millis(300));
    monitor.stop();
    let (offline, output) = analyze(trace, &["--threads", "2"]);
    assert!(output.status.success(), "analyze: {}", String::from_utf8_lossy(&output.stderr));

    let (live_sum, offline_sum) = (summary(live.path()), summary(offline.path()));
    let name = trace.display();
    assert_eq!(live_sum["capture"]["dropped_pkts"], 0, "{name}: kernel drops");
    assert_eq!(live_sum["packets"]["read"], offline_sum["packets"]["read"], "{name}: packets");
    assert_eq!(live_sum["capture"]["received_pkts"], offline_sum["packets"]["read"], "{name}: offered");
    assert_eq!(capture_intervals(live.path()), (live_sum["capture"]["received_pkts"].as_u64().unwrap(), 0));
    for log in ["tcp_flows.tsv", "udp_flows.tsv"] {
        let (columns, live_rows) = timeless(&live.path().join(log));
        let (_, offline_rows) = timeless(&offline.path().join(log));
        assert_eq!(live_rows.len(), offline_rows.len(), "{name} {log}: flows");
        for (l, o) in live_rows.iter().zip(&offline_rows) {
            let diff: Vec<String> = columns
                .iter()
                .zip(l.iter().zip(o))
                .filter(|(_, (a, b))| a != b)
                .map(|(c, (a, b))| format!("{c}: live {a}, offline {b}"))
                .collect();
            assert!(diff.is_empty(), "{name} {log}: {diff:?}");
        }
    }
    if let Some(readers) = live_sum["capture"]["readers_received_pkts"].as_array() {
        // The fanout split the packets: every reader got some.
        assert!(readers.len() > 1 && readers.iter().all(|n| n.as_u64() > Some(0)), "{name}: readers {readers:?}");
        eprintln!("{name}: per reader {readers:?}");
    }
    eprintln!("{name}: {} packets, flow logs equal but for time fields", live_sum["packets"]["read"]);
}

/// capture.tsv's packets offered and dropped, summed over its intervals.
fn capture_intervals(dir: &Path) -> (u64, u64) {
    let rows = read_tsv(&dir.join("capture.tsv"));
    (rows.iter().map(|r| int(r, "received_pkts")).sum(), rows.iter().map(|r| int(r, "dropped_pkts")).sum())
}

fn demo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/demo.pcap")
}

#[test]
fn a_replayed_demo_trace_gives_the_offline_flow_logs() {
    check_replay(&demo(), 5_000, &["--threads", "2"]);
}

#[test]
fn libpcap_gives_the_same() {
    check_replay(&demo(), 5_000, &["--capture", "pcap", "--ring-mb", "16"]);
}

#[test]
fn replayed_ground_truth_gives_the_offline_flow_logs() {
    let Some(shared) = shared_dir() else { return };
    // lossy: retransmissions, reordering and losses; ipv6: IPv6 and its extension headers.
    for trace in ["groundtruth/lossy.pcap", "groundtruth/ipv6.pcap"] {
        check_replay(&shared.join(trace), 10_000, &["--threads", "2"]);
    }
}

/// A pcap of `frames` (Ethernet) one millisecond apart.
fn pcap(frames: &[Vec<u8>]) -> Vec<u8> {
    let mut out = vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 1, 0, 0, 0];
    for (i, f) in frames.iter().enumerate() {
        for v in [1_700_000_000, i as u32 * 1000, f.len() as u32, f.len() as u32] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(f);
    }
    out
}

/// Ethernet + IPv4 + UDP 10.9.0.1:4000 → 10.9.0.2:53 with 4 payload bytes (checksums 0: the
/// analysis does not check them).
fn udp_frame() -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
    f.extend_from_slice(&[0x45, 0, 0, 32, 0, 1, 0, 0, 64, 17, 0, 0, 10, 9, 0, 1, 10, 9, 0, 2]);
    f.extend_from_slice(&[0x0f, 0xa0, 0, 53, 0, 12, 0, 0, 1, 2, 3, 4]);
    f
}

#[test]
fn a_quiet_link_times_a_udp_flow_out() {
    let Some(ns) = Netns::new(&["tcpreplay"]) else { return };
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("udp.pcap");
    std::fs::write(&trace, pcap(&[udp_frame(), udp_frame(), udp_frame()])).unwrap();
    let out = dir.path().join("out");
    let monitor = Monitor::start(&ns, &out, &["--udp-timeout", "1", "--interval", "1", "--threads", "2"]);
    ns.replay(&trace, 100);
    // No packet for 2.5 s: only the ticks move packet time past the flow's 1 s timeout.
    std::thread::sleep(Duration::from_millis(2500));
    monitor.stop();
    let rows = read_tsv(&out.join("udp_flows.tsv"));
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["end_reason"], "idle");
    assert_eq!(int(&rows[0], "c_pkts_all"), 3);
    // The interval of the packets closed, and the run went on over quiet seconds.
    let sum = summary(&out);
    assert_eq!(sum["flows"]["end_reasons"]["idle"], 1);
    assert_eq!(sum["capture"]["dropped_pkts"], 0);
    // The counters per 1 s interval (read at every tick; an interval where nothing changed
    // has no line): the three packets, no drop.
    assert_eq!(capture_intervals(&out), (3, 0));
}

#[test]
fn after_dropping_to_another_user_the_capture_goes_on() {
    let Some(ns) = Netns::new(&["tcpreplay"]) else { return };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    // The outputs are written as nobody: the directory must be theirs.
    assert!(run_ok(Command::new("chown").args(["nobody"]).arg(&out)), "chown nobody");
    let monitor = Monitor::start(&ns, &out, &["--user", "nobody", "--threads", "2"]);
    ns.replay(&demo(), 5_000);
    std::thread::sleep(Duration::from_millis(300));
    monitor.stop();
    let sum = summary(&out);
    assert_eq!(sum["capture"]["user"], "nobody");
    assert_eq!(sum["packets"]["read"], 443);
    assert_eq!(sum["capture"]["dropped_pkts"], 0);
}

/// The message of a `sonde monitor` that cannot start (exit status 1, no output left).
fn refusal(cmd: &mut Command, out: &Path) -> String {
    let output = cmd.arg("-o").arg(out).output().expect("run sonde");
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(!out.join("summary.json").exists());
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn errors_say_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let message = refusal(sonde().args(["monitor", "-i", "nosuch0"]), &out);
    assert!(message.contains("nosuch0: no such interface"), "{message}");
    let Some(ns) = Netns::new(&["tcpreplay"]) else { return };
    ns.ip("link set va down");
    let sonde_bin = Path::new(env!("CARGO_BIN_EXE_sonde"));
    let message = refusal(ns.exec(sonde_bin).args(["monitor", "-i", "va"]), &out);
    assert!(message.contains("va: interface is down (`ip link set va up`)"), "{message}");
    ns.ip("link set va up");
    // Unprivileged (setpriv, from util-linux): the message names both ways to capture.
    for capture in ["afpacket", "pcap"] {
        let mut cmd = ns.exec(Path::new("setpriv"));
        cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"]).arg(sonde_bin);
        let message = refusal(cmd.args(["monitor", "-i", "va", "--capture", capture]), &out);
        assert!(
            message.contains("va: no permission to capture") && message.contains("setcap cap_net_raw"),
            "{message}"
        );
    }
}

#[test]
fn two_interfaces_are_read_as_one_input() {
    let Some(ns) = Netns::new(&["tcpreplay"]) else { return };
    ns.add_pair();
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("udp.pcap");
    std::fs::write(&trace, pcap(&[udp_frame(), udp_frame(), udp_frame()])).unwrap();
    let out = dir.path().join("out");
    let monitor = Monitor::start(&ns, &out, &["-i", "vc", "--threads", "2"]);
    std::thread::scope(|s| {
        s.spawn(|| ns.replay(&demo(), 5_000));
        s.spawn(|| ns.replay_on("vd", &trace, 100));
    });
    std::thread::sleep(Duration::from_millis(300));
    monitor.stop();
    let sum = summary(&out);
    assert_eq!(sum["packets"]["read"], 443 + 3);
    let per_interface: Vec<(String, u64)> = sum["capture"]["interfaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| (i["interface"].as_str().unwrap().to_string(), i["received_pkts"].as_u64().unwrap()))
        .collect();
    assert_eq!(per_interface, [("va".to_string(), 443), ("vc".to_string(), 3)]);
    // The demo's flows and the UDP flow, as if from one link.
    assert_eq!(read_tsv(&out.join("tcp_flows.tsv")).len(), 13);
    assert_eq!(read_tsv(&out.join("udp_flows.tsv")).len(), 3);
}

#[test]
fn publishing_live_changes_no_output() {
    // The drains that feed the dashboard hand the flow lines and statistics on while the run
    // goes; given back at the end, the outputs are those of a run without them.
    check_replay(&demo(), 5_000, &["--threads", "2", "--http", "127.0.0.1:0", "--interval", "1"]);
    check_replay(&demo(), 5_000, &["--threads", "1", "--http", "127.0.0.1:0", "--interval", "0.05"]);
}

#[test]
fn intervals_drained_live_are_all_written() {
    let Some(ns) = Netns::new(&["tcpreplay"]) else { return };
    let out = tempfile::tempdir().unwrap();
    let monitor = Monitor::start(&ns, out.path(), &["--threads", "2", "--http", "127.0.0.1:0", "--interval", "0.05"]);
    ns.replay(&demo(), 2_000);
    std::thread::sleep(Duration::from_millis(300));
    monitor.stop();
    let rows = read_tsv(&out.path().join("intervals.tsv"));
    let packets: u64 = rows.iter().map(|r| int(r, "packets")).sum();
    let opened: u64 = rows.iter().map(|r| int(r, "flows_opened")).sum();
    assert_eq!(packets, 443, "every packet in some interval");
    assert_eq!(opened, 13 + 2, "every flow opened in some interval");
    // 443 packets at 2,000/s: about 0.22 s, so several 50 ms intervals, each once.
    let starts: Vec<&String> = rows.iter().map(|r| &r["start"]).collect();
    let mut unique = starts.clone();
    unique.dedup();
    assert!(unique.len() >= 4, "{} intervals", unique.len());
}

#[test]
fn sighup_reloads_the_definitions() {
    let Some(ns) = Netns::new(&["tcpreplay"]) else { return };
    let dir = tempfile::tempdir().unwrap();
    let defs = dir.path().join("defs");
    std::fs::write(&defs, "web = tcp.dport == 80\n").unwrap();
    let out = dir.path().join("out");
    let mut args = vec!["--threads", "2", "--interval", "1", "--definitions"];
    args.push(defs.to_str().unwrap());
    let monitor = Monitor::start(&ns, &out, &args);
    ns.replay(&demo(), 5_000);
    // The file changes: web replaced, udp7000 added; SIGHUP applies it to the packets after.
    std::fs::write(&defs, "web = tcp.dport == 8080\nudp7000 = udp.dport == 7000\n").unwrap();
    monitor.signal(libc::SIGHUP);
    // Applied at the next drain (a tick on the quiet link), before the second replay.
    std::thread::sleep(Duration::from_millis(1_500));
    ns.replay(&demo(), 5_000);
    std::thread::sleep(Duration::from_millis(300));
    monitor.stop();
    let sum = summary(&out);
    let defs: Vec<(String, u64, bool, u64)> = sum["definitions"]
        .as_array()
        .expect("definitions in summary.json")
        .iter()
        .map(|d| {
            let name = d["name"].as_str().unwrap().to_string();
            (name, d["version"].as_u64().unwrap(), d["retired"].as_bool().unwrap(), d["packets"].as_u64().unwrap())
        })
        .collect();
    // The first web counted the first replay's port-80 packets (109), the second the second
    // replay's port-8080 ones (75); udp7000 the second replay's 60.
    assert_eq!(
        defs,
        [("web".to_string(), 1, true, 109), ("web".to_string(), 2, false, 75), ("udp7000".to_string(), 3, false, 60)]
    );
}

/// common::browser_test with node in `ns`, against a monitor serving `url`.
fn browser_test(
    ns: &Netns,
    browser: &(PathBuf, String),
    script: &str,
    url: &str,
    args: &[&str],
    min_checks: u32,
) -> PathBuf {
    common::browser_test(ns.exec(Path::new("node")), browser, script, url, args, min_checks)
}

/// The demo trace, over and over at 300 packets/s, on `vb` (the monitor captures on `va`).
fn replay_loop(ns: &Netns) -> std::process::Child {
    ns.exec(Path::new("tcpreplay"))
        .args(["-q", "-i", "vb", "--pps", "300", "--loop", "60"])
        .arg(demo())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("tcpreplay")
}

#[test]
fn the_live_dashboard_in_a_real_browser() {
    let Some(browser) = browser() else { return };
    let Some(ns) = Netns::new(&["tcpreplay"]) else { return };
    // The server listens on the namespace's loopback (up); the browser runs there too.
    let out = tempfile::tempdir().unwrap();
    // The servers inside: traffic to them is "in", from them "out".
    let internal = ["--internal", "10.77.0.2/32", "--internal", "fd77::2/128"];
    let (monitor, url) =
        Monitor::start_serving(&ns, out.path(), &[&["--threads", "2", "--interval", "1"][..], &internal].concat());
    let mut replay = replay_loop(&ns);
    // The first view: in and out, as internal networks were given.
    let first = browser_test(&ns, &browser, "first-view.mjs", &url, &["split", "first-view-live-internal.png"], 20);
    let artifacts = browser_test(&ns, &browser, "live.mjs", &url, &[], 12);
    let _ = replay.kill();
    let _ = replay.wait();
    assert!(std::fs::metadata(first.join("first-view-live-internal.png")).is_ok_and(|m| m.len() > 10_000));
    for shot in ["live.png", "live-definition.png"] {
        assert!(std::fs::metadata(artifacts.join(shot)).is_ok_and(|m| m.len() > 10_000), "{shot}");
    }
    monitor.stop();
    // The definition added in the page is in the run's outputs, with the change logged.
    let sum = summary(out.path());
    assert_eq!(sum["definitions"][0]["name"], "web");
    assert!(sum["definitions"][0]["packets"].as_u64().unwrap() > 0);
}

/// Issue 35: a monitor given no internal network draws its throughput as one "all" series (no
/// in/out lines of zeros); its flow table shows dates, durations and RTTs with units, empty
/// where there is no sample; every panel says what it shows and its unit (tests/browser/
/// first-view.mjs).
#[test]
fn the_live_dashboards_first_view_without_internal_networks() {
    let Some(browser) = browser() else { return };
    let Some(ns) = Netns::new(&["tcpreplay"]) else { return };
    let out = tempfile::tempdir().unwrap();
    let (monitor, url) = Monitor::start_serving(&ns, out.path(), &["--threads", "2", "--interval", "1"]);
    let mut replay = replay_loop(&ns);
    let artifacts = browser_test(&ns, &browser, "first-view.mjs", &url, &["all", "first-view-live.png"], 20);
    let _ = replay.kill();
    let _ = replay.wait();
    assert!(std::fs::metadata(artifacts.join("first-view-live.png")).is_ok_and(|m| m.len() > 10_000));
    monitor.stop();
}

#[test]
fn spooled_chunks_hold_every_flow_and_interval() {
    let Some(ns) = Netns::new(&["tcpreplay"]) else { return };
    let dir = tempfile::tempdir().unwrap();
    let (a, b, out) = (dir.path().join("a"), dir.path().join("b"), dir.path().join("out"));
    // A small quota on a: the chunks continue in b once a is full.
    let spool_a = format!("{}:6K", a.display());
    let spool_b = b.display().to_string();
    let args = ["--threads", "2", "--interval", "0.05", "--rotate", "0.1", "--spool", &spool_a, "--spool", &spool_b];
    let monitor = Monitor::start(&ns, &out, &args);
    ns.replay(&demo(), 1_000);
    std::thread::sleep(Duration::from_millis(300));
    monitor.stop();
    let sum = summary(&out);
    let chunks = sum["spool"]["chunks"].as_u64().unwrap();
    assert!(chunks >= 4, "{chunks} chunks for 0.44 s at 0.1 s each");
    assert_eq!(sum["spool"]["over_quota_chunks"], 0);
    // The outputs left the directory for the spool; summary.json stays.
    assert!(out.join("summary.json").exists() && !out.join("tcp_flows.tsv").exists());
    // Every file a manifest lists is there, whole; both locations were used.
    let mut listed = Vec::new();
    for location in [&a, &b] {
        let manifest = read_tsv(&location.join("manifest.tsv"));
        assert!(!manifest.is_empty(), "{} unused", location.display());
        for row in manifest {
            let path = location.join(&row["chunk"]).join(&row["file"]);
            assert_eq!(std::fs::metadata(&path).unwrap().len(), int(&row, "bytes"), "{}", path.display());
            listed.push(path);
        }
    }
    // Together the chunks hold every flow and every packet, once.
    let rows = |name: &str| -> Vec<_> {
        listed.iter().filter(|p| p.file_name().unwrap() == name).flat_map(|p| read_tsv(p)).collect()
    };
    assert_eq!(rows("tcp_flows.tsv").len(), 13);
    assert_eq!(rows("udp_flows.tsv").len(), 2);
    assert_eq!(rows("intervals.tsv").iter().map(|r| int(r, "packets")).sum::<u64>(), 443);
}

#[test]
fn readers_on_a_fanout_group_give_the_offline_flow_logs() {
    // Two readers, each on its own socket of one PACKET_FANOUT group: the kernel spreads the
    // flows over them (both directions of a flow to one), and the merged run is the whole.
    check_replay(&demo(), 5_000, &["--readers", "2"]);
    check_replay(&demo(), 5_000, &["--readers", "2", "--threads", "2", "--http", "127.0.0.1:0", "--interval", "0.05"]);
    // Many flows, IPv6 and its extension headers.
    if let Some(shared) = shared_dir() {
        for trace in ["groundtruth/mixed.pcap", "groundtruth/ipv6.pcap"] {
            check_replay(&shared.join(trace), 10_000, &["--readers", "3"]);
        }
    }
}

#[test]
fn several_readers_refuse_what_they_cannot_do() {
    let Some(ns) = Netns::new(&["tcpreplay"]) else { return };
    let dir = tempfile::tempdir().unwrap();
    let defs = dir.path().join("defs");
    std::fs::write(&defs, "web = tcp.dport == 80\n").unwrap();
    let run = |extra: &[&str]| {
        let out = ns
            .exec(Path::new(env!("CARGO_BIN_EXE_sonde")))
            .args(["monitor", "-i", "va", "--readers", "2", "-o"])
            .arg(dir.path().join("out"))
            .args(extra)
            .output()
            .unwrap();
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let message = run(&["--capture", "pcap"]);
    assert!(message.contains("--capture afpacket"), "{message}");
    let message = run(&["--definitions", defs.to_str().unwrap()]);
    assert!(message.contains("one reader"), "{message}");
}

#[test]
fn sighup_reloads_the_internal_networks() {
    let Some(ns) = Netns::new(&["tcpreplay"]) else { return };
    let dir = tempfile::tempdir().unwrap();
    let nets = dir.path().join("internal");
    std::fs::write(&nets, "10.77.0.2/32\n").unwrap();
    let out = dir.path().join("out");
    let mut args = vec!["--threads", "2", "--interval", "0.1", "--internal-file"];
    args.push(nets.to_str().unwrap());
    let monitor = Monitor::start(&ns, &out, &args);
    ns.replay(&demo(), 5_000);
    // The IPv6 server becomes internal too: from the next drain, its TCP is in/out, not ext.
    std::fs::write(&nets, "10.77.0.2/32\nfd77::2/128\n").unwrap();
    monitor.signal(libc::SIGHUP);
    std::thread::sleep(Duration::from_millis(1_500));
    let second_replay = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
    ns.replay(&demo(), 5_000);
    std::thread::sleep(Duration::from_millis(300));
    monitor.stop();
    let rows = read_tsv(&out.join("intervals.tsv"));
    let ext_tcp = |after: bool| -> u64 {
        rows.iter()
            .filter(|r| r["proto"] == "tcp" && r["net"] == "ext" && (num(r, "start") >= second_replay) == after)
            .map(|r| int(r, "packets"))
            .sum()
    };
    assert!(ext_tcp(false) > 0, "the first replay's IPv6 TCP is external");
    assert_eq!(ext_tcp(true), 0, "after SIGHUP no TCP is external");
}

#[test]
fn a_monitor_exports_every_flow_as_ipfix() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("live.ipfix");
    // The replay at 5,000 packets/s lasts about 90 ms: an active timeout of 20 ms catches the
    // longer flows open.
    check_replay(&demo(), 5_000, &["--ipfix", file.to_str().unwrap(), "--active-timeout", "0.02"]);
    if !file.exists() {
        return; // SKIPPED above
    }
    let (offline, _) = analyze(&demo(), &[]);
    let flows = ["tcp_flows.tsv", "udp_flows.tsv", "icmp_flows.tsv"]
        .map(|f| read_tsv(&offline.path().join(f)).len())
        .iter()
        .sum::<usize>();
    let (finals, interim) = exported(&file);
    assert_eq!(finals.len(), flows, "the live export holds every flow once");
    assert!(!interim.is_empty(), "no interim record");
    check_interim(&finals, &interim);
}

type FlowId = (std::net::IpAddr, u64, std::net::IpAddr, u64, u64);

/// The final and the interim records of an IPFIX file, by flow (tuple and start; an ICMP entry's
/// type × 256 + code in the server port's place, 0 in the client's), with their client packet
/// counts.
fn exported(file: &Path) -> (HashMap<FlowId, u64>, Vec<(FlowId, u64)>) {
    let bytes = std::fs::read(file).unwrap();
    let mut decoder = sonde_ipfix::decode::Decoder::new();
    let (mut finals, mut interim) = (HashMap::new(), Vec::new());
    for m in sonde_ipfix::decode::split_stream(&bytes).unwrap() {
        for r in decoder.message(m).unwrap().records {
            let (c, s) = (r.addr(8).or(r.addr(27)).unwrap(), r.addr(12).or(r.addr(28)).unwrap());
            let (c_port, s_port) = match r.uint(0, 32).or(r.uint(0, 139)) {
                Some(icmp_type_code) => (0, icmp_type_code),
                None => (r.uint(0, 7).unwrap(), r.uint(0, 11).unwrap()),
            };
            let id = (c, c_port, s, s_port, r.uint(0, 152).unwrap());
            let pkts = r.uint(0, 2).unwrap();
            // flowEndReason 2: activeTimeout.
            if r.uint(0, 136) == Some(2) {
                interim.push((id, pkts));
            } else {
                assert!(finals.insert(id, pkts).is_none(), "{id:?} ended twice");
            }
        }
    }
    (finals, interim)
}

/// Each interim record belongs to a flow that ended later, with no more packets than it.
fn check_interim(finals: &HashMap<FlowId, u64>, interim: &[(FlowId, u64)]) {
    for (id, pkts) in interim {
        let last = finals.get(id).unwrap_or_else(|| panic!("interim record of {id:?}, which never ended"));
        assert!(pkts <= last, "{id:?}: interim {pkts} packets, final {last}");
    }
}

#[test]
fn an_active_timeout_sends_interim_records_the_same_at_any_thread_count() {
    let dir = tempfile::tempdir().unwrap();
    let mut seen = Vec::new();
    for threads in ["1", "2"] {
        let file = dir.path().join(format!("{threads}.ipfix"));
        let (out, o) =
            analyze(&demo(), &["--threads", threads, "--active-timeout", "1", "--ipfix", file.to_str().unwrap()]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let s = summary(out.path());
        let (finals, interim) = exported(&file);
        let ended = ["tcp", "udp"].map(|k| s["flows"][k].as_u64().unwrap()).iter().sum::<u64>()
            + s["flows"]["icmp"]["flows"].as_u64().unwrap();
        assert_eq!(finals.len() as u64, ended);
        assert_eq!(Some(interim.len() as u64), s["flows"]["interim_records"].as_u64());
        assert!(!interim.is_empty());
        check_interim(&finals, &interim);
        // The flow logs hold flows that ended, never a picture of one open.
        for log in ["tcp_flows.tsv", "udp_flows.tsv"] {
            assert!(read_tsv(&out.path().join(log)).iter().all(|r| r["end_reason"] != "open"));
        }
        let mut interim = interim;
        interim.sort();
        seen.push(interim);
    }
    assert_eq!(seen[0], seen[1], "the same interim records with 1 and 2 threads");
}

/// A SYN flood sent as fast as tcpreplay can (docs/reliability.md): the capture goes on, every
/// frame offered is read or counted as dropped by the kernel, each one read is a flow through a
/// full table, and the run stops when asked.
#[test]
fn a_flood_at_top_speed_is_read_or_counted_as_dropped() {
    let Some(ns) = Netns::new(&["tcpreplay"]) else { return };
    let dir = tempfile::tempdir().unwrap();
    let sent = 300_000;
    let trace = flood_pcap(dir.path(), "syn", sent);
    let live = tempfile::tempdir().unwrap();
    let monitor = Monitor::start(&ns, live.path(), &["--max-flows", "10000", "--interval", "0"]);
    let start = std::time::Instant::now();
    ns.replay(&trace, 0);
    let replay_s = start.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_millis(300));
    monitor.stop();
    let s = summary(live.path());
    let c = &s["capture"];
    let [received, dropped, unread] = ["received_pkts", "dropped_pkts", "unread_pkts"].map(|k| c[k].as_u64().unwrap());
    let read = s["packets"]["read"].as_u64().unwrap();
    eprintln!(
        "{sent} SYNs in {replay_s:.2} s ({:.0} kpps): {read} read, {dropped} dropped by the kernel, {unread} unread at \
         the stop, peak RSS {} MB",
        f64::from(sent) / replay_s / 1e3,
        s["timing"]["peak_rss_bytes"].as_u64().unwrap() >> 20
    );
    assert_eq!(received, u64::from(sent), "{c}");
    // A loaded machine may not read the ring empty in the drain: what is left is counted.
    assert_eq!(read + dropped + unread, received, "{c}");
    assert_eq!(s["flows"]["tcp"].as_u64(), Some(read));
    assert!(s["table"]["peak_live_flows"].as_u64().unwrap() <= 10_000);
}

#[test]
fn a_monitor_serves_its_store_as_ts_dump_reads_it() {
    let Some(ns) = Netns::new(&["tcpreplay", "curl"]) else { return };
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("link.rrd");
    // An earlier run's store (the demo trace, 1 s steps kept at 1 s and 1 min).
    let archives = ["--store", store.to_str().unwrap(), "--store-archives", "1s:1h,1m:1d"];
    let (_, o) = analyze(&demo(), &[&["--interval", "1"][..], &archives].concat());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let dump =
        |store: &Path| String::from_utf8(sonde().args(["ts", "dump"]).arg(store).output().unwrap().stdout).unwrap();
    let before = dump(&store);
    let out = tempfile::tempdir().unwrap();
    let (monitor, url) = Monitor::start_serving(&ns, out.path(), &[&["--interval", "1"][..], &archives].concat());
    let get = |path: &str| {
        let o = ns.exec(Path::new("curl")).args(["-s", &format!("{url}{}", path.trim_start_matches('/'))]).output();
        String::from_utf8(o.unwrap().stdout).unwrap()
    };
    // While capturing: the store as the earlier run left it, row for row as ts dump reads it.
    let listing: serde_json::Value = serde_json::from_str(&get("/api/store")).unwrap();
    assert_eq!(listing["resolutions_s"], serde_json::json!([1, 60]), "{listing}");
    let body = get("/api/store/series?name=tcp_ext_pkts&resolution_s=1");
    let served: Vec<(i64, Option<f64>)> = serde_json::from_str::<serde_json::Value>(&body).unwrap()["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p[0].as_i64().unwrap(), p[1].as_f64()))
        .collect();
    let mut lines = before.lines();
    let column = lines.next().unwrap().split(',').position(|c| c == "tcp_ext_pkts").unwrap();
    let dumped: Vec<(i64, Option<f64>)> = lines
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|f| f[0] == "0")
        .map(|f| (f[3].parse().unwrap(), f[column].parse().ok()))
        .collect();
    // (Packet counts: whole numbers, exact through any JSON parser.)
    let differ = served.iter().zip(&dumped).filter(|(a, b)| a != b).count();
    assert_eq!((served.len(), differ), (dumped.len(), 0), "rows served and rows that differ from ts dump");
    let known = dumped.iter().filter(|r| r.1.is_some_and(|v| v > 0.0)).count();
    assert!(known >= 3, "the demo's packets are in the store ({known} rows)");
    ns.replay(&demo(), 2_000);
    std::thread::sleep(Duration::from_millis(1500));
    monitor.stop();
    // The run added its intervals when it ended.
    assert!(dump(&store) != before, "the monitor's intervals are not in the store");
}

#[test]
fn a_live_run_counts_flows_when_they_open() {
    let Some(ns) = Netns::new(&["tcpreplay", "curl"]) else { return };
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("udp.pcap");
    std::fs::write(&trace, pcap(&[udp_frame(), udp_frame(), udp_frame()])).unwrap();
    let out = dir.path().join("out");
    let extra = ["--interval", "1", "--udp-timeout", "600", "--internal", "10.9.0.1/32", "--threads", "2"];
    let (monitor, url) = Monitor::start_serving(&ns, &out, &extra);
    let metric = |text: &str, name: &str| -> Option<f64> {
        let prefix = format!("{name}{{proto=\"udp\",net=\"out\"}} ");
        text.lines().find_map(|l| l.strip_prefix(&prefix)).and_then(|v| v.trim().parse().ok())
    };
    ns.replay(&trace, 100);
    // The flow stays open (600 s timeout): a live run counts it as opened all the same.
    let mut text = String::new();
    for _ in 0..50 {
        let o = ns.exec(Path::new("curl")).args(["-s", &format!("{url}metrics")]).output().unwrap();
        text = String::from_utf8(o.stdout).unwrap();
        if metric(&text, "sonde_flows_opened_total") == Some(1.0) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(metric(&text, "sonde_flows_opened_total"), Some(1.0), "{text}");
    assert_eq!(metric(&text, "sonde_flows_closed_total"), Some(0.0), "{text}");
    monitor.stop();
    // It ended with the run: the interval file counts it opened, as the live counter did.
    let rows = read_tsv(&out.join("intervals.tsv"));
    let opened: u64 = rows.iter().filter(|r| r["proto"] == "udp").map(|r| int(r, "flows_opened")).sum();
    assert_eq!(opened, 1);
}
