//! `--ipfix` against a real collector: nfcapd (Debian's nfdump, installed by `make deps`)
//! started on 127.0.0.1 by the test receives sonde's export of the demo trace and a ground-truth
//! capture; `nfdump -o csv` must show, per 5-tuple, the packets and IP bytes of each direction
//! the flow logs show, and per ICMP entry of icmp_flows.tsv its protocol, addresses, type and
//! code. GoFlow2 (`make goflow2` installs it; its absence fails the test) decodes
//! the same stream with docs/goflow2-mapping.yaml to JSON that must hold every exported field of
//! the flow logs, sonde's enterprise metrics by name included. A file export is read back with
//! sonde-ipfix's decoder. A collector that is absent or refuses never stops the run.

mod common;

use std::collections::HashMap;
use std::io::Read;
use std::net::{IpAddr, TcpListener, UdpSocket};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;
use sonde_ipfix::decode::{split_stream, DataRecord, Decoder};
use sonde_ipfix::elements::{TEMPLATE_ICMP4, TEMPLATE_ICMP6};
use sonde_ipfix::{REVERSE_PEN, SONDE_PEN};

fn demo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/demo.pcap")
}

/// A port nobody listens on (bound, read, released).
fn free_udp_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn free_tcp_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// nfcapd listening on 127.0.0.1, killed when dropped.
struct Nfcapd {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
    log: PathBuf,
}

impl Nfcapd {
    /// With an 8 MB socket buffer (`-B`; Linux caps it at twice net.core.rmem_max).
    fn start() -> Option<Nfcapd> {
        Nfcapd::start_with(&["-B", "8000000"])
    }

    /// None (and a SKIPPED line) when nfcapd is not installed. Without `-B`, its socket gets the
    /// kernel's default receive buffer (net.core.rmem_default).
    fn start_with(options: &[&str]) -> Option<Nfcapd> {
        let dir = tempfile::tempdir().unwrap();
        let flows = dir.path().join("flows");
        std::fs::create_dir(&flows).unwrap();
        let log = dir.path().join("nfcapd.log");
        let port = free_udp_port();
        let spawned = Command::new("nfcapd")
            .args(["-b", "127.0.0.1", "-p", &port.to_string()])
            .args(options)
            .arg("-w")
            .arg(&flows)
            .stdout(Stdio::from(std::fs::File::create(&log).unwrap()))
            .stderr(Stdio::from(std::fs::File::create(dir.path().join("nfcapd.err")).unwrap()))
            .spawn();
        let child = match spawned {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                eprintln!("SKIPPED: nfcapd not installed (apt-get install nfdump, or make deps)");
                return None;
            }
            Err(e) => panic!("nfcapd: {e}"),
        };
        let n = Nfcapd { child, port, dir, log };
        // Listening once it says its socket is bound (its stdout is a file: later lines wait
        // in its buffer, this one comes first on stderr or stdout).
        let until = Instant::now() + Duration::from_secs(10);
        while !(n.output() + &n.errors()).contains("Bound to") {
            assert!(Instant::now() < until, "nfcapd did not start: {}{}", n.output(), n.errors());
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(Duration::from_millis(200));
        Some(n)
    }

    fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn errors(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("nfcapd.err")).unwrap_or_default()
    }

    /// SIGTERM (nfcapd writes its last file), then the flows as nfdump prints them, and its
    /// statistics (`nfdump -I`: flows, packets and bytes by protocol).
    fn stop_and_read(mut self) -> (Vec<NfFlow>, String, HashMap<String, u64>) {
        terminate(&mut self.child, "nfcapd");
        let nfdump = |args: &[&str]| {
            let out = Command::new("nfdump").arg("-R").arg(self.dir.path().join("flows")).args(args).output().unwrap();
            assert!(out.status.success(), "nfdump: {}", String::from_utf8_lossy(&out.stderr));
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        let stat = nfdump(&["-I"])
            .lines()
            .filter_map(|l| l.split_once(": "))
            .filter_map(|(k, v)| Some((k.to_string(), v.trim().parse().ok()?)))
            .collect();
        (parse_csv(&nfdump(&["-o", "csv"])), self.output() + &self.errors(), stat)
    }
}

impl Drop for Nfcapd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// SIGTERM to a collector this test started, and waits up to 10 s for it to exit.
fn terminate(child: &mut Child, what: &str) {
    // SAFETY: kill(2) on the pid of a child this test spawned and has not reaped.
    let rc = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    assert_eq!(rc, 0);
    let until = Instant::now() + Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < until, "{what} did not stop");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A flow as nfdump shows it: tuple, protocol, packets and bytes in (source → destination)
/// and out (the reverse), and its TCP flags (`flg`, e.g. `...AP.SF`; empty in the logs' flows,
/// which have none: check_against compares the rest).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct NfFlow {
    tuple: (IpAddr, u64, IpAddr, u64, String),
    counts: [u64; 4],
    flags: String,
}

fn parse_csv(text: &str) -> Vec<NfFlow> {
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().expect("a csv header").split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap_or_else(|| panic!("no {name} in {header:?}"));
    let (sa, da, sp, dp, pr) = (col("sa"), col("da"), col("sp"), col("dp"), col("pr"));
    let (ipkt, ibyt, opkt, obyt, flg) = (col("ipkt"), col("ibyt"), col("opkt"), col("obyt"), col("flg"));
    // The flows end at the summary block.
    lines
        .take_while(|l| !l.is_empty() && !l.starts_with("Summary"))
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            let n = |i: usize| f[i].trim().parse::<u64>().unwrap_or_else(|_| panic!("{l}"));
            NfFlow {
                tuple: (f[sa].parse().unwrap(), n(sp), f[da].parse().unwrap(), n(dp), f[pr].trim().to_string()),
                counts: [n(ipkt), n(ibyt), n(opkt), n(obyt)],
                flags: f[flg].trim().to_string(),
            }
        })
        .collect()
}

/// An icmp_flows.tsv line's type and code as icmpTypeCodeIPv4/IPv6 carry them (type × 256 +
/// code): a message's own, an echo session's request's (ICMP 8, ICMPv6 128; docs/ipfix.md).
fn icmp_type_code(row: &HashMap<String, String>) -> u64 {
    match (row["kind"].as_str(), row["proto"].as_str()) {
        ("echo", "icmpv6") => 128 << 8,
        ("echo", _) => 8 << 8,
        _ => int(row, "icmp_type") << 8 | int(row, "icmp_code"),
    }
}

/// The flow logs' flows as nfdump should show them: an ICMP entry with source port 0 and its
/// type and code as the destination port (nfdump's place for icmpTypeCodeIPv4/IPv6).
fn logged(out: &Path) -> Vec<NfFlow> {
    let mut flows = Vec::new();
    for (file, proto) in [("tcp_flows.tsv", "TCP"), ("udp_flows.tsv", "UDP"), ("icmp_flows.tsv", "")] {
        for r in read_tsv(&out.join(file)) {
            let (c, cp, s, sp, proto) = match proto {
                "" => {
                    let proto = if r["proto"] == "icmpv6" { "ICMP6" } else { "ICMP" };
                    (r["c_ip"].clone(), 0, r["s_ip"].clone(), icmp_type_code(&r), proto)
                }
                _ => {
                    let (c, cp, s, sp) = tuple(&r);
                    (c, cp, s, sp, proto)
                }
            };
            flows.push(NfFlow {
                tuple: (c.parse().unwrap(), cp, s.parse().unwrap(), sp, proto.to_string()),
                counts: [int(&r, "c_pkts_all"), int(&r, "c_bytes_ip"), int(&r, "s_pkts_all"), int(&r, "s_bytes_ip")],
                flags: String::new(),
            });
        }
    }
    flows.sort();
    flows
}

fn summary(out: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap()
}

/// Exports `trace` to a fresh nfcapd and compares nfdump's flows with the flow logs.
fn check_against_nfcapd(trace: &Path) {
    check_against(Nfcapd::start(), trace, &[]);
}

/// Runs `analyze` with `extra` arguments exporting to `nfcapd`, compares nfdump's flows with
/// the flow logs, and returns nfdump's (none without nfcapd).
fn check_against(nfcapd: Option<Nfcapd>, trace: &Path, extra: &[&str]) -> Vec<NfFlow> {
    let Some(nfcapd) = nfcapd else { return Vec::new() };
    let target = format!("udp://127.0.0.1:{}", nfcapd.port);
    let (out, o) = analyze(trace, &[&["--ipfix", &target][..], extra].concat());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (mut got, log, stat) = nfcapd.stop_and_read();
    got.sort();
    let want = logged(out.path());
    assert!(!want.is_empty());
    let s = summary(out.path());
    let x = &s["ipfix"];
    assert_eq!(x["target"], target.as_str());
    assert_eq!(x["records"].as_u64(), Some(want.len() as u64), "{x}");
    assert_eq!((x["dropped_records"].as_u64(), x["failed_messages"].as_u64()), (Some(0), Some(0)), "{x}");
    assert_eq!(got.len(), want.len(), "{}: nfdump has {} flows, the logs {}", trace.display(), got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert_eq!((&g.tuple, g.counts), (&w.tuple, w.counts), "{}: [in/out packets/bytes]", trace.display());
    }
    // `nfdump -I`: the flows of each protocol, as the logs have them.
    for (key, protos) in [("Flows_tcp", &["TCP"][..]), ("Flows_udp", &["UDP"]), ("Flows_icmp", &["ICMP", "ICMP6"])] {
        let n = want.iter().filter(|f| protos.contains(&f.tuple.4.as_str())).count() as u64;
        assert_eq!(stat.get(key), Some(&n), "{}: nfdump -I {stat:?}", trace.display());
    }
    // nfcapd checks the sequence numbers: none missing, none repeated.
    assert!(log.contains("Sequence Errors: 0"), "{log}");
    assert!(log.contains(&format!("Flows: {}", want.len())), "{log}");
    got
}

#[test]
fn nfcapd_receives_the_demo() {
    check_against_nfcapd(&demo());
}

/// Ground-truth captures of both families and both protocols (below the shared corpus).
const GROUND_TRUTH: [&str; 2] = ["groundtruth/mixed.pcap", "groundtruth/ipv6.pcap"];

/// The corpus's traces with the most TCP flows (a SYN scan: nearly 2000 one-sided flows) and with
/// TCP and UDP over fragments, from an ERF capture.
const REAL_TRACES: [&str; 2] = [
    "traces/realistic/ntop+nDPI/tests/cfgs/default/pcap/synscan.pcap",
    "traces/robustness/LibtraceTeam+libtrace/test/traces/fragtest.erf",
];

/// Runs `check` on each of `traces` (paths in the shared corpus) that is there.
fn each_shared_trace(traces: &[&str], check: fn(&Path)) {
    let Some(shared) = shared_dir() else { return };
    for name in traces {
        let trace = shared.join(name);
        if trace.exists() {
            check(&trace);
        } else {
            eprintln!("SKIPPED: no {}", trace.display());
        }
    }
}

#[test]
fn nfcapd_receives_a_ground_truth_capture() {
    each_shared_trace(&GROUND_TRUTH, check_against_nfcapd);
}

#[test]
fn nfcapd_receives_real_traces() {
    each_shared_trace(&REAL_TRACES, check_against_nfcapd);
}

/// Issue 18: every record arrives at a collector that keeps the kernel's default socket buffer
/// (nfcapd without -B: net.core.rmem_default, 208 KiB, about 90 of sonde's messages).
/// synscan.pcap's ~2000 flows end together at the end of the trace, 500 messages at once:
/// unpaced, nfcapd kept 366 to 1142 of its 1994 flows; paced (--ipfix-rate), all of them.
#[test]
fn issue_18_a_collector_with_the_default_socket_buffer_gets_every_record() {
    each_shared_trace(&REAL_TRACES[..1], |trace| {
        check_against(Nfcapd::start_with(&[]), trace, &[]);
    });
}

/// Real captures with ICMP and ICMPv6: echo sessions answered, unanswered and replies without
/// their requests (and the same pair with two entries), destination unreachable (3/0, 3/3,
/// ICMPv6 1/4), neighbour discovery and MLD; entries that end idle and at the end.
const ICMP_TRACES: [&str; 4] = [
    "traces/realistic/CESNET+ipfixprobe/tests/functional/inputs/mixed.pcap",
    "traces/realistic/arkime+arkime/tests/pcap/v6.pcap",
    "traces/robustness/kbandla+dpkt/examples/data/dns_icmp.pcap",
    "traces/realistic/appneta+tcpreplay/test/test.pcap",
];

/// Issue 35: nfdump users saw no ICMP. Each ICMP entry of icmp_flows.tsv reaches nfcapd as one
/// record that nfdump shows with protocol ICMP or ICMP6, the entry's addresses, its type and code
/// (nfdump's `dp`: type × 256 + code) and packets and bytes both ways, beside the TCP and UDP
/// flows (check_against compares every record).
#[test]
fn issue_35_nfdump_shows_the_icmp_entries() {
    let Some(shared) = shared_dir() else { return };
    let mut seen = Vec::new();
    for name in ICMP_TRACES {
        let trace = shared.join(name);
        assert!(trace.exists(), "no {}", trace.display());
        seen.extend(check_against(Nfcapd::start(), &trace, &[]));
    }
    if seen.is_empty() {
        return; // SKIPPED: no nfcapd
    }
    let icmp = |proto: &str, type_code: u64, replies: bool| {
        seen.iter().any(|f| f.tuple.4 == proto && f.tuple.3 == type_code && (f.counts[2] > 0) == replies)
    };
    // What the traces hold, so that the comparison above covers it: v4 and v6 echo sessions
    // answered and not, and errors of both families.
    assert!(icmp("ICMP", 8 << 8, true) && icmp("ICMP", 8 << 8, false), "{seen:?}");
    assert!(icmp("ICMP6", 128 << 8, true) && icmp("ICMP6", 128 << 8, false), "{seen:?}");
    assert!(icmp("ICMP", 3 << 8 | 3, false) && icmp("ICMP6", 1 << 8 | 4, false), "{seen:?}");
}

/// A connection's endpoints, the lower first, so that both directions give one key.
type Conn = ((IpAddr, u64), (IpAddr, u64));

fn conn(a: (IpAddr, u64), b: (IpAddr, u64)) -> Conn {
    (a.min(b), a.max(b))
}

/// tshark's OR of the TCP flags (the header's low byte) of every segment of each connection,
/// both directions: the oracle of tcpControlBits.
fn tshark_flags(trace: &Path) -> HashMap<Conn, u8> {
    let out = Command::new("tshark")
        .arg("-r")
        .arg(trace)
        .args(["-Y", "tcp", "-T", "fields", "-E", "occurrence=l"])
        .args(["-e", "ip.src", "-e", "ipv6.src", "-e", "tcp.srcport", "-e", "ip.dst", "-e", "ipv6.dst"])
        .args(["-e", "tcp.dstport", "-e", "tcp.flags"])
        .output()
        .expect("tshark (make test-packages)");
    assert!(out.status.success(), "tshark: {}", String::from_utf8_lossy(&out.stderr));
    let mut flags = HashMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let addr = |v4: &str, v6: &str| if v4.is_empty() { v6 } else { v4 }.parse::<IpAddr>().unwrap();
        let port = |p: &str| p.parse::<u64>().unwrap();
        let key = conn((addr(f[0], f[1]), port(f[2])), (addr(f[3], f[4]), port(f[5])));
        let bits = u16::from_str_radix(f[6].trim_start_matches("0x"), 16).unwrap();
        *flags.entry(key).or_insert(0) |= bits as u8;
    }
    flags
}

/// Flags as nfdump's `flg` shows them: CWR, ECE, URG, ACK, PSH, RST, SYN, FIN, `.` when not set.
fn nfdump_flags(bits: u8) -> String {
    "CEUAPRSF".chars().enumerate().map(|(i, c)| if bits & (0x80 >> i) != 0 { c } else { '.' }).collect()
}

/// Issue 35: nfdump showed `tcp flags = 0x00` on every TCP flow. A TCP record's tcpControlBits
/// is the OR of its segments' flags, both directions: nfdump's `flg` equals tshark's OR of the
/// connection's segments for every flow that is its tuple's only one (a reused tuple's flows
/// split the segments between them: each shows a part of the OR, never nothing).
#[test]
fn issue_35_nfdump_shows_the_tcp_flags() {
    let mut traces = vec![demo()];
    if let Some(shared) = shared_dir() {
        traces.extend(GROUND_TRUTH.iter().chain(&REAL_TRACES[..1]).map(|name| shared.join(name)));
    }
    for trace in traces {
        let got = check_against(Nfcapd::start(), &trace, &[]);
        if got.is_empty() {
            return; // SKIPPED: no nfcapd
        }
        let want = tshark_flags(&trace);
        let tcp: Vec<&NfFlow> = got.iter().filter(|f| f.tuple.4 == "TCP").collect();
        let key = |f: &NfFlow| conn((f.tuple.0, f.tuple.1), (f.tuple.2, f.tuple.3));
        let mut flows_of = HashMap::new();
        for f in &tcp {
            *flows_of.entry(key(f)).or_insert(0) += 1;
        }
        let mut whole = 0;
        for f in &tcp {
            let all = want.get(&key(f)).unwrap_or_else(|| panic!("{}: tshark has no {f:?}", trace.display()));
            if flows_of[&key(f)] == 1 {
                assert_eq!(f.flags, nfdump_flags(*all), "{}: {f:?}", trace.display());
                whole += 1;
            } else {
                let part =
                    u8::try_from((0..8).filter(|i| f.flags.as_bytes()[*i] != b'.').map(|i| 0x80u32 >> i).sum::<u32>())
                        .unwrap();
                assert!(part != 0 && part & !all == 0, "{}: {f:?} against {}", trace.display(), nfdump_flags(*all));
            }
        }
        assert!(
            !tcp.is_empty() && whole * 10 >= tcp.len() * 9,
            "{}: {whole} of {} flows compared whole",
            trace.display(),
            tcp.len()
        );
        eprintln!("{}: {whole} of {} TCP flows' flags equal tshark's", trace.display(), tcp.len());
    }
}

/// Under `--anonymize`, an ICMP record's addresses are the anonymised ones of icmp_flows.tsv,
/// as a TCP or UDP record's are of their logs (check_against compares them).
#[test]
fn anonymized_icmp_records_carry_the_logs_addresses() {
    let Some(shared) = shared_dir() else { return };
    let trace = shared.join(ICMP_TRACES[0]);
    let (plain, _) = analyze(&trace, &[]);
    let plain: Vec<NfFlow> = logged(plain.path()).into_iter().filter(|f| f.tuple.4.starts_with("ICMP")).collect();
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("site.key");
    std::fs::write(&key, "0123456789abcdef".repeat(4)).unwrap();
    let got = check_against(Nfcapd::start(), &trace, &["--anonymize", "cryptopan", "--key", key.to_str().unwrap()]);
    if got.is_empty() {
        return; // SKIPPED: no nfcapd
    }
    let anonymized: Vec<&NfFlow> = got.iter().filter(|f| f.tuple.4.starts_with("ICMP")).collect();
    assert_eq!(anonymized.len(), plain.len());
    for f in &anonymized {
        assert!(!plain.iter().any(|p| p.tuple.0 == f.tuple.0 || p.tuple.2 == f.tuple.2), "not anonymised: {f:?}");
    }
}

/// Milliseconds in the flow log (3 decimals) against nanoseconds in the export.
fn same_ms(log: &str, ns: u64, what: &str) {
    let want = if log == "-" { 0.0 } else { log.parse::<f64>().unwrap_or_else(|_| panic!("{what}: {log}")) };
    assert!((want - ns as f64 / 1e6).abs() <= 0.001, "{what}: log {log} ms, export {ns} ns");
}

/// RFC 5102 flowEndReason for a flow log's `end_reason` (docs/ipfix.md).
fn end_reason_code(end_reason: &str, what: &str) -> u64 {
    match end_reason {
        "idle" => 1,
        "fin" | "rst" | "reused" => 3,
        "eof" => 4,
        "evicted" => 5,
        other => panic!("{what}: end_reason {other}"),
    }
}

#[test]
fn a_file_export_holds_the_flow_logs_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("demo.ipfix");
    let (out, o) = analyze(&demo(), &["--ipfix", file.to_str().unwrap(), "--ipfix-domain", "42"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let bytes = std::fs::read(&file).unwrap();
    let mut d = Decoder::new();
    let msgs: Vec<_> = split_stream(&bytes).unwrap().iter().map(|m| d.message(m).unwrap()).collect();
    assert!(msgs.iter().all(|m| m.header.domain == 42));
    assert_eq!(summary(out.path())["ipfix"]["bytes"].as_u64(), Some(bytes.len() as u64));
    let icmp = msgs.iter().flat_map(|m| m.records.iter()).filter(|r| is_icmp(r)).count();
    assert_eq!(icmp, read_tsv(&out.path().join("icmp_flows.tsv")).len(), "one ICMP record per icmp_flows line");
    let records: HashMap<(IpAddr, u64, IpAddr, u64), _> = msgs
        .iter()
        .flat_map(|m| m.records.iter())
        .filter(|r| !is_icmp(r))
        .map(|r| {
            let (c, s) = (r.addr(8).or(r.addr(27)).unwrap(), r.addr(12).or(r.addr(28)).unwrap());
            ((c, r.uint(0, 7).unwrap(), s, r.uint(0, 11).unwrap()), r.clone())
        })
        .collect();
    let tcp = read_tsv(&out.path().join("tcp_flows.tsv"));
    let udp = read_tsv(&out.path().join("udp_flows.tsv"));
    assert_eq!(records.len(), tcp.len() + udp.len());
    for (row, is_tcp) in tcp.iter().map(|r| (r, true)).chain(udp.iter().map(|r| (r, false))) {
        let (c, cp, s, sp) = tuple(row);
        let r = &records[&(c.parse().unwrap(), cp, s.parse().unwrap(), sp)];
        let what = format!("{c}:{cp} {s}:{sp}");
        assert_eq!(r.uint(0, 4), Some(if is_tcp { 6 } else { 17 }), "{what}");
        assert_eq!(r.uint(0, 2), Some(int(row, "c_pkts_all")), "{what}");
        assert_eq!(r.uint(0, 1), Some(int(row, "c_bytes_ip")), "{what}");
        assert_eq!(r.uint(REVERSE_PEN, 2), Some(int(row, "s_pkts_all")), "{what}");
        assert_eq!(r.uint(REVERSE_PEN, 1), Some(int(row, "s_bytes_ip")), "{what}");
        // flowStartMilliseconds: the log's first time, truncated to the millisecond.
        let first: f64 = row["first"].parse().unwrap();
        assert_eq!(r.uint(0, 152), Some(first.floor() as u64), "{what}: first {first}");
        assert_eq!(r.uint(0, 136), Some(end_reason_code(&row["end_reason"], &what)), "{what}");
        if !is_tcp {
            continue;
        }
        for (col, id) in [("c_hs_rtt", 1), ("s_hs_rtt", 2), ("c_rtt_min", 10), ("s_rtt_min", 11), ("c_rtt_avg", 12)] {
            same_ms(&row[col], r.uint(SONDE_PEN, id).unwrap(), &format!("{what} {col}"));
        }
        for (col, id) in [("s_rtt_avg", 13), ("c_rtt_max", 14), ("s_rtt_max", 15)] {
            same_ms(&row[col], r.uint(SONDE_PEN, id).unwrap(), &format!("{what} {col}"));
        }
        for (col, id) in [
            ("c_rtt_cnt", 16),
            ("s_rtt_cnt", 17),
            ("c_pkts_retx", 20),
            ("s_pkts_retx", 21),
            ("c_bytes_retx", 22),
            ("s_bytes_retx", 23),
            ("c_pkts_ooo", 24),
            ("s_pkts_ooo", 25),
            ("c_pkts_rto", 26),
            ("s_pkts_rto", 27),
            ("c_win_max", 42),
            ("s_win_max", 43),
        ] {
            assert_eq!(r.uint(SONDE_PEN, id), Some(int(row, col)), "{what} {col}");
        }
        for (col, id) in [("c_mss", 40), ("s_mss", 41)] {
            let want = if row[col] == "-" { 0 } else { int(row, col) };
            assert_eq!(r.uint(SONDE_PEN, id), Some(want), "{what} {col}");
        }
    }
}

fn is_icmp(r: &DataRecord) -> bool {
    [TEMPLATE_ICMP4, TEMPLATE_ICMP6].contains(&r.template)
}

/// Every element of an ICMP record against its icmp_flows.tsv line: template and protocol by
/// family, icmpTypeCodeIPv4 (32) or icmpTypeCodeIPv6 (139), packets and bytes both ways, start
/// and end, end reason; no port element.
#[test]
fn a_file_export_holds_the_icmp_log() {
    let Some(shared) = shared_dir() else { return };
    let dir = tempfile::tempdir().unwrap();
    for name in &ICMP_TRACES[..2] {
        let trace = shared.join(name);
        let file = dir.path().join("icmp.ipfix");
        let (out, o) = analyze(&trace, &["--ipfix", file.to_str().unwrap()]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let bytes = std::fs::read(&file).unwrap();
        let mut d = Decoder::new();
        let mut records: Vec<DataRecord> =
            split_stream(&bytes).unwrap().iter().flat_map(|m| d.message(m).unwrap().records).filter(is_icmp).collect();
        let rows = read_tsv(&out.path().join("icmp_flows.tsv"));
        assert!(!rows.is_empty(), "{name}: no ICMP");
        assert_eq!(records.len(), rows.len(), "{name}: one record per icmp_flows line");
        for row in &rows {
            let v6 = row["proto"] == "icmpv6";
            let (c, s): (IpAddr, IpAddr) = (row["c_ip"].parse().unwrap(), row["s_ip"].parse().unwrap());
            // flowStart/EndMilliseconds: the log's times (rounded to the µs) truncated to the ms.
            let ms = |col: &str, r: &DataRecord, id: u16| {
                let below = row[col].parse::<f64>().unwrap() - r.uint(0, id).unwrap_or(0) as f64;
                (0.0..1.001).contains(&below)
            };
            let what = format!("{name}: {c} {s} {} {} {}", row["kind"], row["icmp_type"], row["echo_id"]);
            // The entry's record: its addresses, type and code, and times (an echo session's
            // identifier is not exported, so two sessions of a pair differ by their times).
            let at = records
                .iter()
                .position(|r| {
                    r.addr(if v6 { 27 } else { 8 }) == Some(c)
                        && r.addr(if v6 { 28 } else { 12 }) == Some(s)
                        && r.uint(0, if v6 { 139 } else { 32 }) == Some(icmp_type_code(row))
                        && ms("first", r, 152)
                        && ms("last", r, 153)
                })
                .unwrap_or_else(|| panic!("{what}: no record"));
            let r = records.swap_remove(at);
            assert_eq!(r.template, if v6 { TEMPLATE_ICMP6 } else { TEMPLATE_ICMP4 }, "{what}");
            assert_eq!(r.uint(0, 4), Some(if v6 { 58 } else { 1 }), "{what}");
            assert_eq!(r.uint(0, 2), Some(int(row, "c_pkts_all")), "{what}");
            assert_eq!(r.uint(0, 1), Some(int(row, "c_bytes_ip")), "{what}");
            assert_eq!(r.uint(REVERSE_PEN, 2), Some(int(row, "s_pkts_all")), "{what}");
            assert_eq!(r.uint(REVERSE_PEN, 1), Some(int(row, "s_bytes_ip")), "{what}");
            assert_eq!(r.uint(0, 136), Some(end_reason_code(&row["end_reason"], &what)), "{what}");
            assert_eq!(r.uint(0, 239), Some(1), "{what}");
            assert!(r.bytes(0, 7).is_none() && r.bytes(0, 11).is_none(), "{what}: ports in an ICMP record");
        }
    }
}

#[test]
fn absent_or_refusing_collectors_do_not_stop_the_run() {
    let flows = logged_count();
    for target in [format!("udp://127.0.0.1:{}", free_udp_port()), format!("tcp://127.0.0.1:{}", free_tcp_port())] {
        let (out, o) = analyze(&demo(), &["--ipfix", &target]);
        assert_eq!(o.status.code(), Some(0), "{target}: {}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(logged(out.path()).len(), flows, "{target}: the flow logs are written");
        let x = &summary(out.path())["ipfix"];
        let n = |k: &str| x[k].as_u64().unwrap_or_else(|| panic!("{k} in {x}"));
        assert!(n("failed_messages") > 0 && x["last_error"].is_string(), "{target}: {x}");
        assert_eq!(n("records") + n("failed_records") + n("dropped_records"), flows as u64, "{target}: {x}");
        if target.starts_with("tcp") {
            assert_eq!((n("messages"), n("failed_records")), (0, flows as u64), "{target}: {x}");
        }
    }
}

fn logged_count() -> usize {
    let (out, o) = analyze(&demo(), &[]);
    assert!(o.status.success());
    logged(out.path()).len()
}

#[test]
fn bad_ipfix_values_are_one_line_errors() {
    for args in [
        &["--ipfix", "sctp://127.0.0.1:4739"][..],
        &["--ipfix", "udp://127.0.0.1"],
        &["--ipfix", "udp://127.0.0.1:9995", "--ipfix-mtu", "64"],
        &["--ipfix", "/nonexistent-dir/x.ipfix"],
    ] {
        let out = tempfile::tempdir().unwrap();
        let dir = out.path().join("run");
        let o = sonde().args(["analyze", "-q", "-r"]).arg(demo()).arg("-o").arg(&dir).args(args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!dir.exists(), "{args:?}: no output directory made");
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains("ipfix"), "{args:?}: {err}");
    }
}

/// `msgs` as a pcap of IPv4/UDP datagrams from 127.0.0.1:50000 to 127.0.0.1:4739, one message
/// each: what a capture of the UDP export would hold, for tshark to read.
fn udp_pcap(msgs: &[&[u8]]) -> Vec<u8> {
    let mut pcap = Vec::new();
    for x in [0xa1b2_c3d4u32.to_le_bytes(), [2, 0, 4, 0], [0; 4], [0; 4], 65_535u32.to_le_bytes(), 1u32.to_le_bytes()] {
        pcap.extend_from_slice(&x);
    }
    for (i, m) in msgs.iter().enumerate() {
        let (udp_len, ip_len) = (8 + m.len(), 28 + m.len());
        let frame_len = (14 + ip_len) as u32;
        pcap.extend_from_slice(&(1_700_000_000 + i as u32).to_le_bytes());
        pcap.extend_from_slice(&0u32.to_le_bytes());
        pcap.extend_from_slice(&frame_len.to_le_bytes());
        pcap.extend_from_slice(&frame_len.to_le_bytes());
        pcap.extend_from_slice(&[0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 2, 0x08, 0x00]);
        let mut ip = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 127, 0, 0, 1, 127, 0, 0, 1];
        ip[2..4].copy_from_slice(&(ip_len as u16).to_be_bytes());
        let sum = ip.chunks(2).map(|w| u32::from(u16::from_be_bytes([w[0], w[1]]))).sum::<u32>();
        let sum = !(((sum & 0xffff) + (sum >> 16)) as u16);
        ip[10..12].copy_from_slice(&sum.to_be_bytes());
        pcap.extend_from_slice(&ip);
        pcap.extend_from_slice(&50_000u16.to_be_bytes());
        pcap.extend_from_slice(&4739u16.to_be_bytes());
        pcap.extend_from_slice(&(udp_len as u16).to_be_bytes());
        pcap.extend_from_slice(&[0, 0]);
        pcap.extend_from_slice(m);
    }
    pcap
}

#[test]
fn tshark_decodes_every_message() {
    if Command::new("tshark").arg("-v").output().is_err() {
        eprintln!("SKIPPED: tshark not installed (make deps)");
        return;
    }
    let Some(shared) = shared_dir() else { return };
    let dir = tempfile::tempdir().unwrap();
    for trace in [demo(), shared.join("groundtruth/mixed.pcap"), shared.join(ICMP_TRACES[0])] {
        let file = dir.path().join("x.ipfix");
        // A small MTU: many messages, sets of every template split across them.
        let (out, o) = analyze(&trace, &["--ipfix", file.to_str().unwrap(), "--ipfix-mtu", "700"]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let bytes = std::fs::read(&file).unwrap();
        let msgs = split_stream(&bytes).unwrap();
        let pcap = dir.path().join("x.pcap");
        std::fs::write(&pcap, udp_pcap(&msgs)).unwrap();
        let fields = |filter: &str, field: &str| {
            let o = Command::new("tshark")
                .args(["-n", "-r"])
                .arg(&pcap)
                .args(["-d", "udp.port==4739,cflow", "-Y", filter, "-T", "fields", "-e", field])
                .output()
                .unwrap();
            assert!(o.status.success(), "tshark: {}", String::from_utf8_lossy(&o.stderr));
            String::from_utf8_lossy(&o.stdout).into_owned()
        };
        // Every frame is IPFIX, and none malformed or with a warning.
        assert_eq!(fields("cflow.version == 10", "frame.number").lines().count(), msgs.len());
        let bad = fields("_ws.malformed || _ws.expert.severity >= \"warning\"", "frame.number");
        assert!(bad.trim().is_empty(), "{}: frames tshark flags: {bad}", trace.display());
        // tshark finds every flow, with the logs' client ports.
        let mut ports: Vec<u64> = fields("cflow", "cflow.srcport")
            .split([',', '\n'])
            .filter(|p| !p.is_empty())
            .map(|p| p.parse().unwrap())
            .collect();
        let flows = logged(out.path());
        let (icmp, flows): (Vec<_>, Vec<_>) = flows.iter().partition(|f| f.tuple.4.starts_with("ICMP"));
        let mut want: Vec<u64> = flows.iter().map(|f| f.tuple.1).collect();
        ports.sort();
        want.sort();
        assert_eq!(ports, want, "{}", trace.display());
        // … and every ICMP entry with its type and code: IE 32 as one hex number, IE 139 as a
        // type and a code.
        let values = |field: &str| -> Vec<u64> {
            let text = fields("cflow", field);
            let values = text.split([',', '\n']).filter(|p| !p.is_empty());
            let value = |p: &str| match p.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16),
                None => p.parse(),
            };
            values.map(|p| value(p).unwrap_or_else(|e| panic!("{field}: {p}: {e}"))).collect()
        };
        let v6 = values("cflow.icmp_ipv6_type").into_iter().zip(values("cflow.icmp_ipv6_code"));
        let mut codes: Vec<(&str, u64)> =
            values("cflow.icmp_type_code_ipv4").into_iter().map(|c| ("ICMP", c)).collect();
        codes.extend(v6.map(|(t, c)| ("ICMP6", t << 8 | c)));
        let mut want: Vec<(&str, u64)> = icmp.iter().map(|f| (f.tuple.4.as_str(), f.tuple.3)).collect();
        codes.sort();
        want.sort();
        assert_eq!(codes, want, "{}", trace.display());
    }
}

/// GoFlow2's binary: `$GOFLOW2`, else where `make goflow2` installs it. Missing, the test fails:
/// `make test` installs it from the Go module proxy, which CI reaches.
fn goflow2_bin() -> PathBuf {
    let bin = std::env::var_os("GOFLOW2")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/tmp/go-bin/goflow2"));
    assert!(
        bin.is_file(),
        "no GoFlow2 at {}: run `make goflow2` (go install github.com/netsampler/goflow2/v2/cmd/goflow2@v2.2.6)",
        bin.display()
    );
    bin
}

/// Whether a UDP socket is bound to 127.0.0.1:`port` (/proc/net/udp shows both in hex, the
/// address in host byte order).
fn udp_bound_on_loopback(port: u16) -> bool {
    let want = format!("{:08X}:{port:04X}", u32::from_ne_bytes([127, 0, 0, 1]));
    let table = std::fs::read_to_string("/proc/net/udp").unwrap_or_default();
    table.lines().skip(1).any(|l| l.split_whitespace().nth(1) == Some(want.as_str()))
}

/// GoFlow2 listening on 127.0.0.1 with sonde's mapping file, one JSON flow per line into a file;
/// killed when dropped.
struct GoFlow2 {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl GoFlow2 {
    fn start() -> GoFlow2 {
        let bin = goflow2_bin();
        let dir = tempfile::tempdir().unwrap();
        let port = free_udp_port();
        let mapping = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/goflow2-mapping.yaml");
        let child = Command::new(&bin)
            // One decoding worker: messages are decoded in arrival order, so a template is
            // known before the data that needs it.
            .arg(format!("-listen=netflow://127.0.0.1:{port}?workers=1"))
            // No HTTP server (its default, :8080, binds every interface).
            .arg("-addr=")
            .arg(format!("-mapping={}", mapping.display()))
            .args(["-format=json", "-transport=file"])
            .arg(format!("-transport.file={}", dir.path().join("flows.json").display()))
            .stdout(Stdio::null())
            .stderr(Stdio::from(std::fs::File::create(dir.path().join("goflow2.log")).unwrap()))
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
        let mut g = GoFlow2 { child, port, dir };
        let until = Instant::now() + Duration::from_secs(10);
        while !udp_bound_on_loopback(port) {
            assert!(g.child.try_wait().unwrap().is_none(), "GoFlow2 exited: {}", g.log());
            assert!(Instant::now() < until, "GoFlow2 did not bind 127.0.0.1:{port}: {}", g.log());
            std::thread::sleep(Duration::from_millis(50));
        }
        g
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("goflow2.log")).unwrap_or_default()
    }

    fn output(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("flows.json")).unwrap_or_default()
    }

    /// Sends `msgs` to GoFlow2 unchanged and in order, each once GoFlow2 has written all but
    /// [`PACE_RECORDS`] of the records sent before it, so no more wait in its socket than its
    /// buffer holds.
    fn replay(&self, msgs: &[Vec<u8>]) {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut output = std::fs::File::open(self.dir.path().join("flows.json")).unwrap();
        let (mut decoder, mut new) = (Decoder::new(), Vec::new());
        let (mut sent, mut written) = (0, 0);
        for m in msgs {
            let until = Instant::now() + Duration::from_secs(10);
            while written + PACE_RECORDS < sent && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(5));
                new.clear();
                output.read_to_end(&mut new).unwrap();
                written += new.iter().filter(|&&b| b == b'\n').count();
            }
            sock.send_to(m, ("127.0.0.1", self.port)).unwrap();
            sent += decoder.message(m).unwrap().records.len();
        }
    }

    /// Waits (up to 10 s) for `flows` lines, as GoFlow2 writes each flow once it decoded it,
    /// stops it, and returns the flows and its log.
    fn stop_and_read(mut self, flows: usize) -> (Vec<Value>, String) {
        let until = Instant::now() + Duration::from_secs(10);
        while self.output().lines().count() < flows && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(50));
        }
        // Any flow beyond the logs' would arrive with the last ones.
        std::thread::sleep(Duration::from_millis(200));
        terminate(&mut self.child, "GoFlow2");
        let out = self.output();
        let log = self.log();
        let parsed = out
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("GoFlow2's JSON: {e}: {l}")))
            .collect();
        (parsed, log)
    }
}

impl Drop for GoFlow2 {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How many records GoFlow2 may have still to decode when the next message is sent to it: 64
/// TCP records are 16 messages, far below the ~90 of sonde's messages its socket holds.
const PACE_RECORDS: usize = 64;

/// A UDP socket on 127.0.0.1 whose receive buffer (4 MiB asked; the kernel caps it at
/// net.core.rmem_max) holds a whole export of the test traces until [`GoFlow2::replay`] sends it on.
fn relay_socket() -> UdpSocket {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let size: libc::c_int = 4 << 20;
    // SAFETY: setsockopt(2) on a socket this test owns, reading one c_int of the length given.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&size as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "SO_RCVBUF: {}", std::io::Error::last_os_error());
    sock
}

/// The datagrams waiting in `sock`.
fn drain(sock: &UdpSocket) -> Vec<Vec<u8>> {
    sock.set_nonblocking(true).unwrap();
    let mut buf = vec![0; 65_536];
    let mut msgs = Vec::new();
    loop {
        match sock.recv(&mut buf) {
            Ok(n) => msgs.push(buf[..n].to_vec()),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return msgs,
            Err(e) => panic!("relay: {e}"),
        }
    }
}

/// How sonde's export reaches GoFlow2.
#[derive(Clone, Copy, PartialEq)]
enum Delivery {
    /// sonde sends to GoFlow2's socket.
    Direct,
    /// sonde sends to the test's [`relay_socket`]; the test then replays the datagrams to
    /// GoFlow2 at its pace. GoFlow2 keeps the kernel's default socket buffer
    /// (net.core.rmem_default, 208 KiB: ~90 of sonde's messages), and a trace exports hundreds
    /// of messages in a burst: the kernel would drop the rest (docs/ipfix.md).
    Paced,
}

/// A flow log time (ms, 3 decimals) against GoFlow2's time: flowStart/EndMilliseconds in ns,
/// so the log's time truncated to the millisecond (the log rounds to the microsecond).
fn same_ms_truncated(log: &str, ns: u64, what: &str) {
    assert_eq!(ns % 1_000_000, 0, "{what}: {ns} ns is not whole milliseconds");
    let log: f64 = log.parse().unwrap_or_else(|_| panic!("{what}: {log}"));
    let below = log - (ns / 1_000_000) as f64;
    assert!((0.0..1.001).contains(&below), "{what}: log {log} ms, GoFlow2 {ns} ns");
}

/// TCP fields in GoFlow2's JSON (named by docs/goflow2-mapping.yaml) equal to a flow log column.
const GOFLOW2_TCP_COUNTS: [(&str, &str); 26] = [
    ("tcp_syn_total_count", "c_syn_cnt"),
    ("reverse_tcp_syn_total_count", "s_syn_cnt"),
    ("tcp_fin_total_count", "c_fin_cnt"),
    ("reverse_tcp_fin_total_count", "s_fin_cnt"),
    ("tcp_rst_total_count", "c_rst_cnt"),
    ("reverse_tcp_rst_total_count", "s_rst_cnt"),
    ("c_rtt_cnt", "c_rtt_cnt"),
    ("s_rtt_cnt", "s_rtt_cnt"),
    ("c_pkts_retx", "c_pkts_retx"),
    ("s_pkts_retx", "s_pkts_retx"),
    ("c_bytes_retx", "c_bytes_retx"),
    ("s_bytes_retx", "s_bytes_retx"),
    ("c_pkts_ooo", "c_pkts_ooo"),
    ("s_pkts_ooo", "s_pkts_ooo"),
    ("c_pkts_rto", "c_pkts_rto"),
    ("s_pkts_rto", "s_pkts_rto"),
    ("c_pkts_fs", "c_pkts_fs"),
    ("s_pkts_fs", "s_pkts_fs"),
    ("c_pkts_reor", "c_pkts_reor"),
    ("s_pkts_reor", "s_pkts_reor"),
    ("c_pkts_dup", "c_pkts_dup"),
    ("s_pkts_dup", "s_pkts_dup"),
    ("c_win_max", "c_win_max"),
    ("s_win_max", "s_win_max"),
    ("c_win_min", "c_win_min"),
    ("s_win_min", "s_win_min"),
];

/// Flow log columns in ms that GoFlow2's JSON has in ns, as `<column>_ns`.
const GOFLOW2_TCP_TIMES: [&str; 8] =
    ["c_hs_rtt", "s_hs_rtt", "c_rtt_min", "s_rtt_min", "c_rtt_avg", "s_rtt_avg", "c_rtt_max", "s_rtt_max"];

/// Exports `trace` to a fresh GoFlow2 and compares its JSON, flow by flow, with the flow logs.
fn check_against_goflow2(trace: &Path, delivery: Delivery) {
    let goflow2 = GoFlow2::start();
    let relay = (delivery == Delivery::Paced).then(relay_socket);
    let port = relay.as_ref().map_or(goflow2.port, |r| r.local_addr().unwrap().port());
    let target = format!("udp://127.0.0.1:{port}");
    let (out, o) = analyze(trace, &["--ipfix", &target, "--ipfix-domain", "7"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let x = &summary(out.path())["ipfix"];
    assert_eq!((x["dropped_records"].as_u64(), x["failed_messages"].as_u64()), (Some(0), Some(0)), "{x}");
    if let Some(relay) = relay {
        let msgs = drain(&relay);
        assert_eq!(Some(msgs.len() as u64), x["messages"].as_u64(), "the relay lost messages: {x}");
        goflow2.replay(&msgs);
    }
    let tcp = read_tsv(&out.path().join("tcp_flows.tsv"));
    let udp = read_tsv(&out.path().join("udp_flows.tsv"));
    let icmp = read_tsv(&out.path().join("icmp_flows.tsv"));
    let n = tcp.len() + udp.len() + icmp.len();
    let (flows, log) = goflow2.stop_and_read(n);
    let name = trace.display();
    assert_eq!(flows.len(), n, "{name}: GoFlow2 has {} flows, the logs {n}; its log: {log}", flows.len());
    let (icmp_flows, flows): (Vec<&Value>, Vec<&Value>) =
        flows.iter().partition(|f| matches!(f["proto"].as_str(), Some("ICMP" | "IPv6-ICMP")));
    check_icmp_against_goflow2(&icmp, icmp_flows, &name.to_string());
    // A trace may reuse a tuple (CESNET's mixed.pcap: DHCP): the flows of a tuple, told apart
    // by their start.
    let mut by_tuple: HashMap<_, Vec<&Value>> = HashMap::new();
    for f in flows {
        let text = |k: &str| f[k].as_str().unwrap_or_else(|| panic!("{name}: no {k} in {f}")).to_string();
        let port = |k: &str| f[k].as_u64().unwrap_or_else(|| panic!("{name}: no {k} in {f}"));
        let key = (text("src_addr"), port("src_port"), text("dst_addr"), port("dst_port"), text("proto"));
        by_tuple.entry(key).or_default().push(f);
    }
    for (row, is_tcp) in tcp.iter().map(|r| (r, true)).chain(udp.iter().map(|r| (r, false))) {
        let (c, cp, s, sp) = tuple(row);
        let what = format!("{name}: {c}:{cp} {s}:{sp}");
        let proto = if is_tcp { "TCP" } else { "UDP" };
        let same_tuple = by_tuple.get_mut(&(c.clone(), cp, s.clone(), sp, proto.to_string()));
        let f = same_tuple
            .and_then(|fs| {
                let at = fs.iter().position(|f| starts_as_logged(&row["first"], &f["time_flow_start_ns"]))?;
                Some(fs.swap_remove(at))
            })
            .unwrap_or_else(|| panic!("{what}: not in GoFlow2's flows"));
        let u = |k: &str| f[k].as_u64().unwrap_or_else(|| panic!("{what}: no {k} in {f}"));
        assert_eq!((f["type"].as_str(), u("observation_domain_id")), (Some("IPFIX"), 7), "{what}");
        assert_eq!(f["etype"].as_str(), Some(if c.contains(':') { "IPv6" } else { "IPv4" }), "{what}");
        assert_eq!(u("packets"), int(row, "c_pkts_all"), "{what}: packets");
        assert_eq!(u("bytes"), int(row, "c_bytes_ip"), "{what}: bytes");
        assert_eq!(u("reverse_packets"), int(row, "s_pkts_all"), "{what}: reverse_packets");
        assert_eq!(u("reverse_bytes"), int(row, "s_bytes_ip"), "{what}: reverse_bytes");
        same_ms_truncated(&row["first"], u("time_flow_start_ns"), &format!("{what} first"));
        same_ms_truncated(&row["last"], u("time_flow_end_ns"), &format!("{what} last"));
        assert_eq!(u("flow_end_reason"), end_reason_code(&row["end_reason"], &what), "{what}");
        assert_eq!(u("bi_flow_direction"), 1, "{what}");
        if !is_tcp {
            assert!(f.get("c_rtt_cnt").is_none(), "{what}: TCP fields in a UDP flow: {f}");
            continue;
        }
        for (key, col) in GOFLOW2_TCP_COUNTS {
            assert_eq!(u(key), int(row, col), "{what}: {key} against {col}");
        }
        // tcpControlBits: SYN, FIN and RST set where either direction counted one.
        for (bit, flag) in [(0x02, "syn"), (0x01, "fin"), (0x04, "rst")] {
            let counted = int(row, &format!("c_{flag}_cnt")) + int(row, &format!("s_{flag}_cnt")) > 0;
            assert_eq!(u("tcp_flags") & bit != 0, counted, "{what}: tcp_flags {:#x}, {flag}", u("tcp_flags"));
        }
        for col in GOFLOW2_TCP_TIMES {
            same_ms(&row[col], u(&format!("{col}_ns")), &format!("{what} {col}"));
        }
        for col in ["c_mss", "s_mss"] {
            let want = if row[col] == "-" { 0 } else { int(row, col) };
            assert_eq!(u(col), want, "{what}: {col}");
        }
    }
}

/// Whether a flow log's `first` (ms, rounded to the µs) is GoFlow2's start (whole ms, in ns).
fn starts_as_logged(first: &str, start_ns: &Value) -> bool {
    let below = first.parse::<f64>().unwrap() - (start_ns.as_u64().unwrap_or(0) / 1_000_000) as f64;
    (0.0..1.001).contains(&below)
}

/// icmp_flows.tsv's lines against GoFlow2's ICMP flows: protocol, addresses, `icmp_type` and
/// `icmp_code` (from icmpTypeCodeIPv4/IPv6), no ports, packets and bytes both ways, times, end
/// reason.
fn check_icmp_against_goflow2(rows: &[HashMap<String, String>], mut flows: Vec<&Value>, name: &str) {
    assert_eq!(flows.len(), rows.len(), "{name}: GoFlow2's ICMP flows against icmp_flows.tsv");
    let u = |f: &Value, k: &str| f[k].as_u64().unwrap_or_else(|| panic!("{name}: no {k} in {f}"));
    let addr = |f: &Value, k: &str| f[k].as_str().and_then(|a| a.parse::<IpAddr>().ok());
    for row in rows {
        let proto = if row["proto"] == "icmpv6" { "IPv6-ICMP" } else { "ICMP" };
        let what = format!("{name}: {} {} {} {}", row["c_ip"], row["s_ip"], row["kind"], row["icmp_type"]);
        let at = flows
            .iter()
            .position(|f| {
                f["proto"].as_str() == Some(proto)
                    && addr(f, "src_addr") == row["c_ip"].parse().ok()
                    && addr(f, "dst_addr") == row["s_ip"].parse().ok()
                    && u(f, "icmp_type") << 8 | u(f, "icmp_code") == icmp_type_code(row)
                    && starts_as_logged(&row["first"], &f["time_flow_start_ns"])
            })
            .unwrap_or_else(|| panic!("{what}: not in GoFlow2's flows"));
        let f = flows.swap_remove(at);
        assert_eq!((u(f, "src_port"), u(f, "dst_port")), (0, 0), "{what}");
        assert_eq!(u(f, "packets"), int(row, "c_pkts_all"), "{what}: packets");
        assert_eq!(u(f, "bytes"), int(row, "c_bytes_ip"), "{what}: bytes");
        assert_eq!(u(f, "reverse_packets"), int(row, "s_pkts_all"), "{what}: reverse_packets");
        assert_eq!(u(f, "reverse_bytes"), int(row, "s_bytes_ip"), "{what}: reverse_bytes");
        same_ms_truncated(&row["last"], u(f, "time_flow_end_ns"), &format!("{what} last"));
        assert_eq!(u(f, "flow_end_reason"), end_reason_code(&row["end_reason"], &what), "{what}");
    }
}

#[test]
fn goflow2_decodes_the_demo() {
    check_against_goflow2(&demo(), Delivery::Direct);
}

#[test]
fn goflow2_decodes_a_ground_truth_capture() {
    each_shared_trace(&GROUND_TRUTH, |trace| check_against_goflow2(trace, Delivery::Paced));
}

#[test]
fn goflow2_decodes_real_traces() {
    each_shared_trace(&REAL_TRACES, |trace| check_against_goflow2(trace, Delivery::Paced));
}

#[test]
fn goflow2_decodes_icmp_entries() {
    each_shared_trace(&ICMP_TRACES[..2], |trace| check_against_goflow2(trace, Delivery::Paced));
}
