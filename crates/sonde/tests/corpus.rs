//! Every capture of the shared corpus (../shared/traces/INDEX.tsv) through the whole command:
//! no crash, the packet count capinfos gives, damaged files reported and still written, and
//! flow counts compared with the index.

mod common;
mod jsonl;

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use common::*;
use serde_json::Value;

/// Files whose packet count differs from INDEX.tsv on purpose.
const PACKET_COUNT_EXCEPTIONS: &[(&str, u64)] = &[
    // Its SHB option is longer than the block: libpcap rejects the file at byte 0 (Corrupt),
    // and so do we, while capinfos still counts its packets.
    ("robustness/the-tcpdump-group+libpcap/tests/shb-option-too-long.pcapng", 0),
];

/// Plain Ethernet/IPv4 captures whose flow counts differ from INDEX.tsv, and why.
const FLOW_COUNT_EXCEPTIONS: &[(&str, &str)] = &[
    // IPv4 total length 19, shorter than its own header: malformed, so no flow; INDEX counts a
    // UDP flow from the bytes after it.
    ("robustness/the-tcpdump-group+tcpdump/tests/ipv4_invalid_total_length_2.pcap", "malformed IPv4"),
    // Frame cut 4 bytes into the UDP header: ports but no length, so no flow here.
    ("robustness/the-tcpdump-group+tcpdump/tests/udp-length-heapoverflow.pcap", "partial UDP header"),
    // tshark's conversation table has the same 4 TCP 5-tuples as sonde; INDEX says 5.
    ("robustness/the-tcpdump-group+tcpdump/tests/kday3.pcap", "INDEX counts one more than tshark"),
];

/// One row of INDEX.tsv: what we check against.
#[derive(Debug, Clone)]
struct Entry {
    file: String,
    packets: Option<u64>,
    linktype: String,
    features: String,
    tcp_flows: Option<u64>,
    udp_flows: Option<u64>,
}

fn read_index(traces: &Path) -> Vec<Entry> {
    let text = std::fs::read_to_string(traces.join("INDEX.tsv")).expect("INDEX.tsv");
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().expect("header").split('\t').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap_or_else(|| panic!("no column {name}"));
    let (file, packets, linktype, features) = (col("file"), col("packets"), col("linktype"), col("features"));
    let (tcp, udp) = (col("tcp_flows"), col("udp_flows"));
    lines
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            let n = |i: usize| f.get(i).and_then(|s| s.parse().ok());
            Entry {
                file: f[file].to_string(),
                packets: n(packets),
                linktype: f[linktype].to_string(),
                features: f.get(features).unwrap_or(&"").to_string(),
                tcp_flows: n(tcp),
                udp_flows: n(udp),
            }
        })
        .collect()
}

/// What one run produced.
#[derive(Debug)]
struct Run {
    entry: Entry,
    /// Exit code, or None when killed by a signal.
    code: Option<i32>,
    stderr: String,
    summary: Option<Value>,
    /// Distinct (unordered) address/port pairs in each flow log.
    tcp_tuples: Option<usize>,
    udp_tuples: Option<usize>,
}

fn distinct_tuples(path: &Path) -> Option<usize> {
    if !path.exists() {
        return None;
    }
    let set: HashSet<_> = read_tsv(path)
        .iter()
        .map(|r| {
            let (a, b) = ((r["c_ip"].clone(), int(r, "c_port")), (r["s_ip"].clone(), int(r, "s_port")));
            if a <= b {
                (a, b)
            } else {
                (b, a)
            }
        })
        .collect();
    Some(set.len())
}

fn run_one(traces: &Path, entry: &Entry) -> Run {
    let (out, output) = analyze(&traces.join(&entry.file), &[]);
    let summary =
        std::fs::read_to_string(out.path().join("summary.json")).ok().and_then(|s| serde_json::from_str(&s).ok());
    Run {
        entry: entry.clone(),
        code: output.status.code(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        summary,
        tcp_tuples: distinct_tuples(&out.path().join("tcp_flows.tsv")),
        udp_tuples: distinct_tuples(&out.path().join("udp_flows.tsv")),
    }
}

/// Runs every entry, on as many threads as there are CPUs.
fn run_all(traces: &Path, entries: &[Entry]) -> Vec<Run> {
    let next = AtomicUsize::new(0);
    let runs = Mutex::new(Vec::with_capacity(entries.len()));
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(e) = entries.get(i) else { break };
                let run = run_one(traces, e);
                runs.lock().unwrap().push(run);
            });
        }
    });
    let mut runs = runs.into_inner().unwrap();
    runs.sort_by(|a, b| a.entry.file.cmp(&b.entry.file));
    runs
}

fn traces_dir() -> Option<PathBuf> {
    shared_dir().map(|d| d.join("traces")).filter(|d| d.join("INDEX.tsv").is_file())
}

/// Plain Ethernet, IPv4 only, no VLAN, tunnel, fragment or IPv6 in the way: flow counts must
/// agree with the index exactly.
fn is_plain_ethernet_ipv4(e: &Entry) -> bool {
    e.linktype == "EN10MB(1)" && e.features == "ipv4"
}

#[test]
fn every_corpus_file_is_read_without_crash_and_to_the_indexed_packet_count() {
    let Some(traces) = traces_dir() else { return };
    let entries = read_index(&traces);
    assert!(entries.len() > 1000, "INDEX.tsv has only {} rows", entries.len());
    let started = Instant::now();
    let runs = run_all(&traces, &entries);
    let elapsed = started.elapsed().as_secs_f64();

    let mut failures = Vec::new();
    let mut codes: BTreeMap<String, usize> = BTreeMap::new();
    for r in &runs {
        let file = &r.entry.file;
        let code = r.code.map_or("signal".to_string(), |c| c.to_string());
        *codes.entry(code.clone()).or_default() += 1;
        if !matches!(r.code, Some(0) | Some(3)) {
            failures.push(format!("{file}: exit {code}: {}", r.stderr.trim()));
            continue;
        }
        let Some(summary) = &r.summary else {
            failures.push(format!("{file}: no readable summary.json"));
            continue;
        };
        let read = summary["packets"]["read"].as_u64();
        let expected = PACKET_COUNT_EXCEPTIONS.iter().find(|(f, _)| f == file).map(|&(_, n)| n).or(r.entry.packets);
        if let Some(expected) = expected {
            if read != Some(expected) {
                failures.push(format!("{file}: read {read:?} packets, INDEX says {expected}"));
            }
        }
        let damaged = r.code == Some(3);
        let has_input_error = !summary["input_error"].is_null();
        if damaged != has_input_error {
            failures.push(format!("{file}: exit {code} but input_error = {}", summary["input_error"]));
        }
        if damaged && (r.tcp_tuples.is_none() || r.udp_tuples.is_none()) {
            failures.push(format!("{file}: damaged, and the flow logs were not written"));
        }
    }
    eprintln!("{} files in {elapsed:.1} s; exit codes {codes:?}", runs.len());
    flow_counts_against_index(&runs, &mut failures);
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

/// Compares distinct TCP/UDP 5-tuples with INDEX.tsv; prints the agreement and the
/// disagreements, and fails only for plain Ethernet/IPv4 captures.
fn flow_counts_against_index(runs: &[Run], failures: &mut Vec<String>) {
    let (mut compared, mut agree, mut plain, mut plain_agree) = (0, 0, 0, 0);
    let mut off = Vec::new();
    for r in runs {
        let (Some(want_t), Some(want_u), Some(got_t), Some(got_u)) =
            (r.entry.tcp_flows, r.entry.udp_flows, r.tcp_tuples, r.udp_tuples)
        else {
            continue;
        };
        compared += 1;
        let same = want_t == got_t as u64 && want_u == got_u as u64;
        agree += usize::from(same);
        if is_plain_ethernet_ipv4(&r.entry) {
            plain += 1;
            plain_agree += usize::from(same);
            let excepted = FLOW_COUNT_EXCEPTIONS.iter().any(|(f, _)| *f == r.entry.file);
            if !same && !excepted {
                failures.push(format!(
                    "{}: plain Ethernet/IPv4 flows TCP {got_t} UDP {got_u}, INDEX TCP {want_t} UDP {want_u}",
                    r.entry.file
                ));
            }
        }
        if !same {
            off.push(format!(
                "  {} [{}; {}]: TCP {got_t} vs {want_t}, UDP {got_u} vs {want_u}",
                r.entry.file, r.entry.linktype, r.entry.features
            ));
        }
    }
    eprintln!(
        "flow counts agree with INDEX for {agree}/{compared} files (plain Ethernet/IPv4: {plain_agree}/{plain}); \
         disagreements (sonde vs INDEX):\n{}",
        off.join("\n")
    );
}

// ---- The command's contract on bad inputs, outputs and input forms (needs only testdata/). ----

fn demo_pcap() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/demo.pcap")
}

/// `sonde analyze -q -r input -o out extra...`, with what it printed.
fn run_into(input: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    sonde().args(["analyze", "-q", "-r"]).arg(input).arg("-o").arg(out).args(extra).output().expect("run sonde")
}

fn stderr_of(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Exit 1, exactly one line on stderr that names `name` and contains `reason`.
fn assert_one_line_error(o: &std::process::Output, name: &str, reason: &str) {
    let err = stderr_of(o);
    assert_eq!(o.status.code(), Some(1), "exit status; stderr: {err}");
    assert_eq!(err.lines().count(), 1, "one line on stderr: {err:?}");
    assert!(err.contains(name), "stderr names {name}: {err:?}");
    assert!(err.to_lowercase().contains(reason), "stderr gives the reason ({reason}): {err:?}");
}

#[test]
fn unreadable_inputs_fail_with_one_line_and_leave_no_outputs() {
    let tmp = tempfile::tempdir().unwrap();
    let empty = tmp.path().join("empty.pcap");
    std::fs::write(&empty, b"").unwrap();
    let cargo_toml = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    let missing = tmp.path().join("no-such-file.pcap");
    for (input, reason) in [(&cargo_toml, "not a capture"), (&empty, "not a capture"), (&missing, "no such file")] {
        let out = tmp.path().join("out");
        let o = run_into(input, &out, &[]);
        assert_one_line_error(&o, &input.display().to_string(), reason);
        assert!(!out.exists(), "{}: an output directory was created", input.display());
    }
}

#[test]
fn unusable_output_directory_fails_before_reading_the_input() {
    let tmp = tempfile::tempdir().unwrap();
    let a_file = tmp.path().join("a-file");
    std::fs::write(&a_file, b"x").unwrap();
    for out in [Path::new("/proc/sonde-cannot-create-this"), a_file.as_path()] {
        // The input is stdin, kept open: a command that read packets before checking the
        // output directory would wait for more input, not fail.
        let mut child = sonde()
            .args(["analyze", "-q", "-r", "-", "-o"])
            .arg(out)
            .stdin(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let writer = std::thread::spawn(move || {
            use std::io::Write;
            let _ = stdin.write_all(&std::fs::read(demo_pcap()).unwrap());
            std::thread::sleep(std::time::Duration::from_secs(20));
        });
        let deadline = Instant::now() + std::time::Duration::from_secs(10);
        while child.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("{}: still running with stdin open: the output dir was not checked first", out.display());
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let o = child.wait_with_output().unwrap();
        assert_one_line_error(
            &o,
            &out.display().to_string(),
            if out == a_file { "directory" } else { "cannot create" },
        );
        drop(writer); // detached: it ends on its own
    }
}

#[test]
fn second_run_into_the_same_dir_needs_force() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    assert_eq!(run_into(&demo_pcap(), &out, &[]).status.code(), Some(0));
    let again = run_into(&demo_pcap(), &out, &[]);
    assert_eq!(again.status.code(), Some(1), "{}", stderr_of(&again));
    assert!(stderr_of(&again).contains("--force"), "the error says how to overwrite: {}", stderr_of(&again));
    let forced = run_into(&demo_pcap(), &out, &["--force"]);
    assert_eq!(forced.status.code(), Some(0), "{}", stderr_of(&forced));
}

/// Offsets of the records of a classic pcap file: (start of record header, end of record).
fn pcap_records(bytes: &[u8]) -> Vec<(usize, usize)> {
    let le = bytes[..4] == [0xd4, 0xc3, 0xb2, 0xa1] || bytes[..4] == [0x4d, 0x3c, 0xb2, 0xa1];
    let u32_at = |i: usize| {
        let b = [bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]];
        if le {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        }
    };
    let mut records = Vec::new();
    let mut at = 24;
    while at + 16 <= bytes.len() {
        let end = at + 16 + u32_at(at + 8) as usize;
        records.push((at, end));
        at = end;
    }
    records
}

#[test]
fn truncated_trace_exits_3_names_the_offset_and_keeps_the_flows_before_the_cut() {
    let tmp = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(demo_pcap()).unwrap();
    let records = pcap_records(&bytes);
    // Cut in the middle of a record's data, about half-way through the trace.
    let (start, end) = records[records.len() / 2];
    let cut = start + 16 + (end - start - 16) / 2;
    let truncated = tmp.path().join("truncated.pcap");
    std::fs::write(&truncated, &bytes[..cut]).unwrap();
    // The same records, ending cleanly before the damaged one.
    let clean = tmp.path().join("clean-prefix.pcap");
    std::fs::write(&clean, &bytes[..start]).unwrap();

    let (out, o) = analyze(&truncated, &[]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr_of(&o));
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("summary.json")).unwrap()).unwrap();
    let offset = summary["input_error"]["offset"].as_u64().expect("input_error.offset");
    assert!((start as u64..=cut as u64).contains(&offset), "offset {offset} outside the damaged record {start}..{cut}");
    let err = stderr_of(&o);
    assert!(err.contains("warning") && err.contains(&offset.to_string()), "a warning naming offset {offset}: {err:?}");
    assert_eq!(summary["packets"]["read"].as_u64(), Some((records.len() / 2) as u64));

    let (clean_out, clean_o) = analyze(&clean, &[]);
    assert_eq!(clean_o.status.code(), Some(0), "{}", stderr_of(&clean_o));
    for file in ["tcp_flows.tsv", "udp_flows.tsv"] {
        let got = std::fs::read_to_string(out.path().join(file)).unwrap();
        assert_eq!(got, std::fs::read_to_string(clean_out.path().join(file)).unwrap(), "{file}");
        assert!(got.lines().count() > 1, "{file} holds the flows before the cut");
    }
}

#[test]
fn stdin_and_compressed_inputs_give_the_same_tcp_flows_as_the_plain_file() {
    use std::io::Write;
    let tmp = tempfile::tempdir().unwrap();
    let plain = std::fs::read(demo_pcap()).unwrap();
    let (out, o) = analyze(&demo_pcap(), &[]);
    assert!(o.status.success(), "{}", stderr_of(&o));
    let expected = std::fs::read(out.path().join("tcp_flows.tsv")).unwrap();

    let gz = tmp.path().join("demo.pcap.gz");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(&plain).unwrap();
    std::fs::write(&gz, enc.finish().unwrap()).unwrap();
    let zst = tmp.path().join("demo.pcap.zst");
    std::fs::write(&zst, zstd::encode_all(&plain[..], 3).unwrap()).unwrap();
    for (input, compression) in [(&gz, "gzip"), (&zst, "zstd")] {
        let (out, o) = analyze(input, &[]);
        assert!(o.status.success(), "{}: {}", input.display(), stderr_of(&o));
        assert!(std::fs::read(out.path().join("tcp_flows.tsv")).unwrap() == expected, "{compression} copy differs");
        let summary = std::fs::read_to_string(out.path().join("summary.json")).unwrap();
        let summary: Value = serde_json::from_str(&summary).unwrap();
        assert!(summary["compression"].as_str().is_some_and(|c| c.contains(compression)), "{}", summary["compression"]);
    }

    let out = tmp.path().join("stdin-out");
    let mut child = sonde()
        .args(["analyze", "-q", "-r", "-", "-o"])
        .arg(&out)
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(&plain));
    let o = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(o.status.success(), "stdin: {}", stderr_of(&o));
    assert!(std::fs::read(out.join("tcp_flows.tsv")).unwrap() == expected, "stdin run differs");
}

#[test]
fn bpf_filter_keeps_only_port_80_flows() {
    let (all, o) = analyze(&demo_pcap(), &[]);
    assert!(o.status.success(), "{}", stderr_of(&o));
    let (out, o) = analyze(&demo_pcap(), &["tcp", "port", "80"]);
    assert!(o.status.success(), "{}", stderr_of(&o));
    let tcp = read_tsv(&out.path().join("tcp_flows.tsv"));
    let all_tcp = read_tsv(&all.path().join("tcp_flows.tsv"));
    let port_80 = all_tcp.iter().filter(|r| int(r, "c_port") == 80 || int(r, "s_port") == 80).count();
    assert!(port_80 > 0 && port_80 < all_tcp.len(), "the demo has port-80 and other flows");
    assert_eq!(tcp.len(), port_80, "filtered run keeps exactly the port-80 flows");
    assert!(tcp.iter().all(|r| int(r, "c_port") == 80 || int(r, "s_port") == 80));
    assert!(read_tsv(&out.path().join("udp_flows.tsv")).is_empty(), "no UDP passes `tcp port 80`");
}

#[test]
fn jsonl_format_has_one_object_per_line_with_the_tsv_values() {
    let (tsv, o) = analyze(&demo_pcap(), &[]);
    assert!(o.status.success(), "{}", stderr_of(&o));
    let (jsonl, o) = analyze(&demo_pcap(), &["--format", "jsonl"]);
    assert!(o.status.success(), "{}", stderr_of(&o));
    for name in ["tcp_flows", "udp_flows"] {
        jsonl::assert_same(&tsv.path().join(format!("{name}.tsv")), &jsonl.path().join(format!("{name}.jsonl")));
    }
}

/// Options out of range are refused up front, in one line, before anything is written (they
/// used to panic, abort on a 32 TB allocation, or split every flow).
#[test]
fn options_out_of_range_are_refused_up_front() {
    let tmp = tempfile::tempdir().unwrap();
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/demo.pcap");
    for (args, name) in [
        (&["--threads", "100000"][..], "--threads"),
        (&["--threads", "0"][..], "--threads"),
        (&["--max-flows", "0"][..], "--max-flows"),
        (&["--max-flows", "1000000000000"][..], "--max-flows"),
        (&["--sort-buffer", "0"][..], "--sort-buffer"),
    ] {
        let out = tmp.path().join("out");
        let o = run_into(&demo, &out, args);
        assert_one_line_error(&o, name, "must be from 1");
        assert!(!out.join("tcp_flows.tsv").exists(), "{args:?}");
    }
}
