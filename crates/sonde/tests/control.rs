//! One definition change, every probe (docs/kafka.md, "Control topic"): `sonde monitor
//! --kafka-control` probes on their own veth pairs in a test's network namespace, a real Kafka
//! broker in there too (tests/kafka_broker), `sonde control publish|status` run in there.
//! A version published once is applied by both probes running (status topic, /api/status,
//! /metrics, definitions.tsv from its time); a probe started afterwards starts with it; a
//! version a running set cannot take is refused by all and changes nothing; a stale
//! `--expect-version` and a file that does not parse publish nothing.
//! Needs root, `ip`, tcpreplay, curl and the broker (java); SKIPPED without root or the tools.

mod common;
mod kafka_broker;
mod netns;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::*;
use kafka_broker::Broker;
use netns::Netns;
use serde_json::Value;

fn demo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/demo.pcap")
}

/// A `sonde monitor --kafka-control` in the namespace, serving HTTP on its loopback; killed if
/// the test ends without stopping it.
struct Probe {
    child: Option<Child>,
    url: String,
    out: PathBuf,
    stderr: PathBuf,
}

impl Probe {
    /// Starts probe `id` on `interface` and waits until it captures.
    fn start(ns: &Netns, broker: &Broker, id: &str, interface: &str, dir: &Path) -> Probe {
        let out = dir.join(id);
        let stderr = dir.join(format!("{id}.stderr"));
        let mut child = ns
            .exec(Path::new(env!("CARGO_BIN_EXE_sonde")))
            .args(["monitor", "-i", interface, "--force", "--http", "127.0.0.1:0", "--interval", "1"])
            .args(["--threads", "1", "--kafka", &broker.address(), "--kafka-control", "--probe-id", id, "-o"])
            .arg(&out)
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .expect("start sonde monitor");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line).expect("read sonde's stdout");
        let url = line.split_whitespace().find(|w| w.starts_with("http://")).unwrap_or_default().to_string();
        let mut probe = Probe { child: Some(child), url, out, stderr };
        assert!(!probe.url.is_empty(), "{id}: no URL line: {line}{}", probe.stderr());
        let deadline = Instant::now() + Duration::from_secs(30);
        while !probe.stderr().contains(&format!("capturing on {interface}")) {
            let exited = probe.child.as_mut().unwrap().try_wait().unwrap();
            assert!(exited.is_none() && Instant::now() < deadline, "{id} did not start: {}", probe.stderr());
            std::thread::sleep(Duration::from_millis(100));
        }
        probe
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    fn get(&self, ns: &Netns, path: &str) -> String {
        let o = ns.exec(Path::new("curl")).args(["-s", &format!("{}{path}", self.url)]).output().unwrap();
        String::from_utf8(o.stdout).unwrap()
    }

    fn api_status(&self, ns: &Netns) -> Value {
        serde_json::from_str(&self.get(ns, "api/status")).expect("/api/status is JSON")
    }

    /// SIGINT; the exit status must be success. Returns summary.json.
    fn stop(mut self) -> Value {
        let mut child = self.child.take().unwrap();
        // SAFETY: kill(2) on our own child's pid.
        assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
        let status = child.wait().expect("wait for sonde");
        assert!(status.success(), "sonde monitor exited with {status}: {}", self.stderr());
        serde_json::from_str(&std::fs::read_to_string(self.out.join("summary.json")).unwrap()).unwrap()
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `sonde control ARGS… --kafka BROKER` in the namespace.
fn control(ns: &Netns, broker: &Broker, args: &[&str]) -> Output {
    ns.exec(Path::new(env!("CARGO_BIN_EXE_sonde")))
        .arg("control")
        .args(args)
        .args(["--kafka", &broker.address()])
        .output()
        .expect("run sonde control")
}

/// `sonde control status`: the topic's line, then per probe (version, error or none).
fn status(ns: &Netns, broker: &Broker) -> (String, Vec<(String, u64, Option<String>)>) {
    let o = control(ns, broker, &["status"]);
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "control status: {text}{}", String::from_utf8_lossy(&o.stderr));
    let mut lines = text.lines();
    let topic = lines.next().unwrap_or_default().to_string();
    let probes = lines
        .map(|l| {
            let rest = l.strip_prefix("probe ").unwrap_or_else(|| panic!("a probe's line: {l}"));
            let (id, rest) = rest.split_once(": version ").unwrap();
            let version = rest.split(' ').next().unwrap().parse().unwrap();
            let error = rest.split_once("; refused").map(|(_, e)| e.to_string());
            (id.to_string(), version, error)
        })
        .collect();
    (topic, probes)
}

/// Waits (up to 30 s) until `sonde control status` says what `done` wants.
fn wait_status(ns: &Netns, broker: &Broker, what: &str, done: impl Fn(&[(String, u64, Option<String>)]) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, probes) = status(ns, broker);
        if done(&probes) {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: the probes report {probes:?}");
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn publish(ns: &Netns, broker: &Broker, file: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["publish"];
    args.extend_from_slice(extra);
    args.push(file.to_str().unwrap());
    control(ns, broker, &args)
}

/// definitions.tsv's rows of `name`: (interval start, packets).
fn definition_rows(out: &Path, name: &str) -> Vec<(f64, u64)> {
    read_tsv(&out.join("definitions.tsv"))
        .iter()
        .filter(|r| r["definition"] == name)
        .map(|r| (num(r, "start"), int(r, "packets")))
        .collect()
}

const WEB: &str = "web = tcp.dport == 80\n\
    syn = ip.version == 4 and tcp.flags & 0x12 == 0x02 key ip4.src, ip4.dst, tcp.sport, tcp.dport measure none\n\
    fin = ip.version == 4 and tcp.flags & 0x01 == 0x01 key ip4.src, ip4.dst, tcp.sport, tcp.dport measure none\n\
    connection = assoc syn -> fin within 1h\n";

#[test]
fn a_change_published_once_is_applied_by_every_probe() {
    let Some(ns) = Netns::new(&["tcpreplay", "curl"]) else { return };
    ns.add_pair();
    for args in ["link add ve type veth peer name vf", "link set dev ve up", "link set dev vf up"] {
        ns.ip(args);
    }
    let broker = Broker::start_in(Some(ns.name()));
    let dir = tempfile::tempdir().unwrap();

    // Two probes on an empty control topic: no definitions, version 0.
    let p1 = Probe::start(&ns, &broker, "p1", "va", dir.path());
    let p2 = Probe::start(&ns, &broker, "p2", "vc", dir.path());
    // Reports are delivered a moment after they are sent.
    wait_status(&ns, &broker, "both at version 0", |p| p.len() == 2);
    let (topic, probes) = status(&ns, &broker);
    assert_eq!(topic, "sonde-control: nothing published");
    assert_eq!(probes, [("p1".into(), 0, None), ("p2".into(), 0, None)]);
    assert_eq!(p1.api_status(&ns)["control"]["version"], 0);

    // Published once, applied by both.
    let v1 = dir.path().join("v1.defs");
    std::fs::write(&v1, WEB).unwrap();
    let t = Instant::now();
    let o = publish(&ns, &broker, &v1, &["--expect-version", "0"]);
    assert!(o.status.success(), "publish: {}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "published version 1 (4 definitions) to sonde-control\n");
    wait_status(&ns, &broker, "version 1 applied", |p| {
        p.len() == 2 && p.iter().all(|(_, v, e)| *v == 1 && e.is_none())
    });
    eprintln!("version 1 published and reported applied by both probes in {:.2} s", t.elapsed().as_secs_f64());
    // As docs/openapi.json documents it.
    let openapi = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/openapi.json"));
    let openapi: Value = serde_json::from_str(&openapi.unwrap()).unwrap();
    // Status by reference, beside the components its own references point into.
    let status_schema = serde_json::json!({"$ref": "#/components/schemas/Status", "components": openapi["components"]});
    let documented = jsonschema::validator_for(&status_schema).unwrap();
    for p in [&p1, &p2] {
        let s = p.api_status(&ns);
        let invalid: Vec<String> = documented.iter_errors(&s).map(|e| format!("{e} at {}", e.instance_path)).collect();
        assert!(invalid.is_empty(), "/api/status against docs/openapi.json: {invalid:?}");
        let c = &s["control"];
        assert_eq!((c["version"].as_u64(), c["changes_applied"].as_u64()), (Some(1), Some(1)), "{s}");
        assert!(c["since"].as_f64().is_some(), "applied at a packet time: {s}");
        // Empty set (1), then web, syn, fin, connection added.
        assert_eq!(c["definitions_version"], 5, "{s}");
        assert!(p.get(&ns, "metrics").contains("\nsonde_control_version 1\n"));
    }
    let since: Vec<f64> = [&p1, &p2].iter().map(|p| p.api_status(&ns)["control"]["since"].as_f64().unwrap()).collect();
    ns.replay_on("vb", &demo(), 5_000);
    ns.replay_on("vd", &demo(), 5_000);

    // A third probe, started afterwards, starts with version 1 and counts from its start.
    let p3 = Probe::start(&ns, &broker, "p3", "ve", dir.path());
    let c3 = p3.api_status(&ns)["control"].clone();
    assert_eq!((c3["version"].as_u64(), c3["definitions_version"].as_u64()), (Some(1), Some(1)), "{c3}");
    assert_eq!(c3["changes_applied"], 0, "{c3}");
    wait_status(&ns, &broker, "p3 at version 1", |p| p.iter().any(|(id, v, _)| id == "p3" && *v == 1));
    ns.replay_on("vf", &demo(), 5_000);

    // A version the running sets cannot take (syn replaced while the association uses it):
    // refused by every probe, reported, nothing of it applied (udp7000 comes first in it).
    let v2 = dir.path().join("v2.defs");
    std::fs::write(&v2, format!("udp7000 = udp.dport == 7000\n{}", WEB.replace("0x12 == 0x02", "0x02 == 0x02")))
        .unwrap();
    let o = publish(&ns, &broker, &v2, &[]);
    assert!(o.status.success(), "publish: {}", String::from_utf8_lossy(&o.stderr));
    wait_status(&ns, &broker, "version 2 refused", |p| {
        p.len() == 3 && p.iter().all(|(_, v, e)| *v == 1 && e.as_deref().is_some_and(|e| e.contains("version 2")))
    });
    let (_, probes) = status(&ns, &broker);
    assert!(
        probes.iter().all(|(_, _, e)| e.as_deref().unwrap().contains("used by the association `connection`")),
        "{probes:?}"
    );
    for p in [&p1, &p2, &p3] {
        assert!(p.stderr().contains("version 2 refused"), "a line on stderr: {}", p.stderr());
    }
    // More definitions than a live monitor counts (--http-max-definitions, 64): refused too.
    let v3 = dir.path().join("v3.defs");
    let many: String = (0..65).map(|i| format!("port{i} = udp.dport == {}\n", 1000 + i)).collect();
    std::fs::write(&v3, many).unwrap();
    assert!(publish(&ns, &broker, &v3, &[]).status.success());
    wait_status(&ns, &broker, "version 3 refused", |p| {
        p.len() == 3
            && p.iter()
                .all(|(_, v, e)| *v == 1 && e.as_deref().is_some_and(|e| e.contains("version 3: 65 definitions")))
    });

    // A stale --expect-version conflicts, a file that does not parse is refused: nothing published.
    let o = publish(&ns, &broker, &v1, &["--expect-version", "1"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("conflict: --expect-version 1 but the control topic is at version 3"), "{err}");
    let bad = dir.path().join("bad.defs");
    std::fs::write(&bad, "web = tcp.dport ==\n").unwrap();
    let o = publish(&ns, &broker, &bad, &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.starts_with(&format!("sonde: {}:", bad.display())), "the CLI's message: {err}");
    let (topic, _) = status(&ns, &broker);
    assert!(topic.starts_with("sonde-control: version 3, published "), "{topic}");

    // The outputs: web counted from the time version 1 applied, the demo's 109 port-80 packets
    // on each probe; nothing of versions 2 and 3.
    let schema =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/schema/summary.schema.json"));
    let schema = jsonschema::validator_for(&serde_json::from_str(&schema.unwrap()).unwrap()).unwrap();
    for (p, since) in [(p1, Some(since[0])), (p2, Some(since[1])), (p3, None)] {
        let out = p.out.clone();
        let sum = p.stop();
        let invalid: Vec<String> = schema.iter_errors(&sum).map(|e| format!("{e} at {}", e.instance_path)).collect();
        assert!(invalid.is_empty(), "summary.json against the schema: {invalid:?}");
        let c = &sum["control"];
        assert_eq!((c["version"].as_u64(), c["changes_failed"].as_u64()), (Some(1), Some(2)), "{c}");
        let web: Vec<&Value> = sum["definitions"].as_array().unwrap().iter().filter(|d| d["name"] == "web").collect();
        assert_eq!(web.len(), 1);
        assert_eq!(web[0]["packets"], 109, "{}", out.display());
        let names: Vec<&str> =
            sum["definitions"].as_array().unwrap().iter().map(|d| d["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["web", "syn", "fin"], "nothing of the refused versions (associations are listed apart)");
        let rows = definition_rows(&out, "web");
        assert_eq!(rows.iter().map(|r| r.1).sum::<u64>(), 109);
        let from = since.unwrap_or_else(|| c["since"].as_f64().expect("p3's since: its first packet"));
        assert!(rows.iter().all(|(start, _)| *start >= from.floor()), "rows from {from}: {rows:?}");
    }
}

#[test]
fn control_without_kafka_or_with_readers_is_refused() {
    for (extra, says) in [
        (vec!["--kafka-control"], "--kafka-control needs --kafka"),
        (vec!["--kafka", "127.0.0.1:1", "--kafka-control", "--readers", "2"], "cannot follow --kafka-control"),
        (vec!["--kafka", "127.0.0.1:1", "--kafka-control", "--definition-changes", "x"], "not --definition-changes"),
    ] {
        let out = tempfile::tempdir().unwrap();
        let o = sonde().args(["monitor", "-i", "lo", "-o"]).arg(out.path().join("x")).args(&extra).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(err.contains(says), "{err}");
    }
    // No broker: one line; a monitor stops before its capture opens or any output exists.
    let out = tempfile::tempdir().unwrap();
    let x = out.path().join("x");
    let monitor =
        ["monitor", "-i", "lo", "--kafka", "127.0.0.1:1", "--kafka-control", "--kafka-control-timeout", "1", "-o"];
    let monitor: Vec<&str> = monitor.into_iter().chain([x.to_str().unwrap()]).collect();
    for args in [&["control", "status", "--kafka", "127.0.0.1:1", "--timeout", "1"][..], &monitor[..]] {
        let o = Command::new(env!("CARGO_BIN_EXE_sonde")).args(args).output();
        let o = o.unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(err.starts_with("sonde: kafka: no broker answered at 127.0.0.1:1"), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    assert!(!out.path().join("x").exists());
}
