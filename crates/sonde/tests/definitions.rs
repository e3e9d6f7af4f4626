//! Flow definitions in `sonde analyze` (issue 5): per-definition counts equal tshark's for the
//! equivalent display filter (tshark is installed by `make deps`), on the demo trace and ground
//! truth; per-FID counts equal tshark's per-field counts; a refused definition names its file,
//! line and column, and nothing is written.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::*;

/// Each definition and the tshark display filter that selects the same packets.
const DEFINITIONS: &[(&str, &str, &str)] = &[
    ("web", "ip.proto == 6 and tcp.dport in 80..88", "tcp.dstport >= 80 && tcp.dstport <= 88"),
    ("syn", "tcp.flags & 0x12 == 0x02", "tcp.flags.syn == 1 && tcp.flags.ack == 0"),
    ("push", "l4[13:1] & 0x08 == 0x08 and ip.proto == 6", "tcp.flags.push == 1"),
    ("dns", "udp.dport == 53", "udp.dstport == 53"),
    ("hiport", "tcp.sport >= 1024 and tcp.dport < 1024", "tcp.srcport >= 1024 && tcp.dstport < 1024"),
    ("big4", "ip4.len >= 1000", "ip.len >= 1000"),
    ("v6", "ip.version == 6", "ipv6"),
    ("net", "ip.src in 10.77.0.0/31", "ip.src == 10.77.0.0/31"),
    ("ll6", "ip.dst in fe80::/10", "ipv6.dst == fe80::/10"),
    ("ttl", "ip.ttl <= 63 and ip.version == 4", "ip.ttl <= 63"),
    // Link fields read Ethernet frames only: none on a Linux cooked capture.
    ("arp", "eth.type == 0x0806", "eth.type == 0x0806"),
    ("eth4", "eth.type == 0x0800", "eth.type == 0x0800"),
];

fn traces() -> Vec<PathBuf> {
    let mut traces = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/demo.pcap")];
    if let Some(shared) = shared_dir() {
        for name in ["mixed", "lossy", "ipv6"] {
            traces.push(shared.join(format!("groundtruth/{name}.pcap")));
        }
        // A Linux cooked capture (no Ethernet header) and one with ARP.
        let real = shared.join("traces/realistic");
        for rel in [
            "CESNET+ipfixprobe/tests/functional/inputs/mqtt.pcap",
            "CESNET+ipfixprobe/tests/functional/inputs/arp.pcap",
        ] {
            traces.push(real.join(rel));
        }
    }
    traces
}

/// The frames and bytes (frame.len) each of `filters` selects in `trace`, counted by tshark in
/// one pass (`-z io,stat,0,…`: one interval, a Frames and a Bytes column per filter).
fn tshark_counts(trace: &Path, filters: &[&str]) -> Vec<(u64, u64)> {
    assert!(filters.iter().all(|f| !f.contains(',')), "io,stat separates its filters by commas");
    let out = std::process::Command::new("tshark")
        .args(["-n", "-q", "-r"])
        .arg(trace)
        .args(["-z", &format!("io,stat,0,{}", filters.join(","))])
        .output()
        .unwrap_or_else(|e| panic!("tshark: {e} (make deps installs it)"));
    assert!(out.status.success(), "tshark io,stat: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    // The one interval's row: `| 0.000 <> 5.915 |    115 | 11818 | …`.
    let row = text.lines().find(|l| l.contains("<>")).unwrap_or_else(|| panic!("no io,stat row:\n{text}"));
    let cells: Vec<u64> = row.split('|').skip(2).filter_map(|c| c.trim().parse().ok()).collect();
    assert_eq!(cells.len(), 2 * filters.len(), "{row}");
    cells.chunks(2).map(|c| (c[0], c[1])).collect()
}

fn run(
    trace: &Path,
    defs: &str,
    extra: &[&str],
) -> (tempfile::TempDir, Vec<std::collections::HashMap<String, String>>) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("defs.txt");
    std::fs::write(&file, defs).unwrap();
    let mut args = vec!["--definitions", file.to_str().unwrap()];
    args.extend(extra);
    let (out, o) = analyze(trace, &args);
    assert!(o.status.success(), "{}: {}", trace.display(), String::from_utf8_lossy(&o.stderr));
    let rows = read_tsv(&out.path().join("definitions.tsv"));
    (out, rows)
}

#[test]
fn counts_equal_tsharks_for_the_same_filters() {
    let text: String = DEFINITIONS.iter().map(|(name, def, _)| format!("{name} = {def}\n")).collect();
    let mut compared = 0;
    let filters: Vec<&str> = DEFINITIONS.iter().map(|(_, _, filter)| *filter).collect();
    for trace in traces() {
        let (out, rows) = run(&trace, &text, &["--interval", "1"]);
        let summary: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.path().join("summary.json")).unwrap()).unwrap();
        let counts = tshark_counts(&trace, &filters);
        for (i, ((name, _, filter), &want)) in DEFINITIONS.iter().zip(&counts).enumerate() {
            let mine = rows.iter().filter(|r| r["definition"] == *name);
            let got = mine.fold((0, 0), |(p, b), r| (p + int(r, "packets"), b + int(r, "bytes")));
            assert_eq!(got, want, "{} {name} ({filter})", trace.display());
            let total = &summary["definitions"][i];
            assert_eq!((total["packets"].as_u64(), total["bytes"].as_u64()), (Some(want.0), Some(want.1)));
            compared += usize::from(want.0 > 0);
        }
    }
    // The demo alone gives a few; the shared corpus a dozen and more.
    let least = if shared_dir().is_some() { 12 } else { 3 };
    assert!(compared >= least, "only {compared} non-empty comparisons");
}

#[test]
fn counts_per_fid_equal_tsharks_per_value() {
    for trace in traces() {
        let (_, rows) = run(&trace, "ports = ip.proto == 6 key tcp.dport\nsrc = ip.version == 4 key ip4.src\n", &[]);
        for (name, field, filter) in [("ports", "tcp.dstport", "tcp"), ("src", "ip.src", "ip")] {
            let mut want: BTreeMap<String, u64> = BTreeMap::new();
            for v in tshark(&trace, filter, &[field]) {
                *want.entry(v).or_default() += 1;
            }
            let mut got: BTreeMap<String, u64> = BTreeMap::new();
            for r in rows.iter().filter(|r| r["definition"] == name) {
                *got.entry(r["fid"].clone()).or_default() += int(r, "packets");
            }
            assert_eq!(got, want, "{} {name}", trace.display());
        }
    }
}

#[test]
fn a_full_fid_table_counts_the_rest_in_its_overflow_row() {
    let trace = traces().remove(0);
    let (out, rows) = run(&trace, "ports = ip.proto == 6 key tcp.dport\n", &["--definition-fids", "3"]);
    // One 5-minute interval in the demo trace, 16 destination ports: 3 rows and the overflow.
    assert_eq!(rows.iter().filter(|r| r["fid"] != "overflow").count(), 3);
    assert_eq!(rows.iter().filter(|r| r["fid"] == "overflow").count(), 1);
    let all: u64 = rows.iter().map(|r| int(r, "packets")).sum();
    assert_eq!(all as usize, tshark(&trace, "tcp", &["frame.len"]).len(), "overflow loses nothing");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("summary.json")).unwrap()).unwrap();
    assert!(summary["definitions"][0]["overflow_packets"].as_u64().unwrap() > 0);
}

/// `analyze` of the first trace with `defs` as its definitions file, which it must refuse (exit
/// 1, no output directory made): the file's path and stderr.
fn refused_definitions(dir: &Path, defs: &str) -> (PathBuf, String) {
    let file = dir.join("defs.txt");
    std::fs::write(&file, defs).unwrap();
    let out = dir.join("out");
    let o = sonde()
        .args(["analyze", "-q", "-r"])
        .arg(traces().remove(0))
        .arg("-o")
        .arg(&out)
        .arg("--definitions")
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(!out.exists());
    (file, String::from_utf8_lossy(&o.stderr).into_owned())
}

#[test]
fn a_refused_definition_names_file_line_and_column_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (file, stderr) = refused_definitions(dir.path(), "ok = tcp.dport == 80\nbad = tcp.dprt == 80\n");
    assert!(stderr.contains(&format!("{}: line 2, column 7: unknown field `tcp.dprt`", file.display())), "{stderr}");
    assert!(stderr.contains("bad = tcp.dprt == 80\n        ^"), "{stderr}");
}

/// Issue 38: a name over `--definition-name-max` (128 bytes by default) is refused naming the
/// file, line and column; a larger limit takes it, and it reaches definitions.tsv whole.
#[test]
fn a_name_over_the_limit_is_refused_unless_the_limit_is_raised() {
    let dir = tempfile::tempdir().unwrap();
    let name = "n".repeat(200);
    let (file, stderr) = refused_definitions(dir.path(), &format!("ok = tcp.dport == 80\n{name} = ip.version == 4\n"));
    assert!(
        stderr.contains(&format!(
            "{}: line 2, column 1: a name of 200 bytes: at most 128 (--definition-name-max)",
            file.display()
        )),
        "{stderr}"
    );
    let (_, rows) = run(&traces().remove(0), &format!("{name} = ip.version == 4\n"), &["--definition-name-max", "200"]);
    assert!(!rows.is_empty() && rows.iter().all(|r| r["definition"] == name));
}

/// Epoch seconds with up to nine decimals, as tshark prints them, in ns.
fn epoch_ns(text: &str) -> u64 {
    sonde_types::time::parse_seconds(text).unwrap()
}

#[test]
fn gaps_and_flows_per_fid_equal_those_computed_from_tsharks_times() {
    for trace in traces() {
        let (out, _) = run(&trace, "ports = ip.proto == 6 key tcp.dport measure gap,length idle 1s\n", &[]);
        // Packet times and lengths per destination port, in input order, from tshark.
        let mut per_port: BTreeMap<String, Vec<(u64, u64)>> = BTreeMap::new();
        for line in tshark(&trace, "tcp", &["frame.time_epoch", "tcp.dstport", "frame.len"]) {
            let f: Vec<&str> = line.split('\t').collect();
            per_port.entry(f[1].to_string()).or_default().push((epoch_ns(f[0]), f[2].parse().unwrap()));
        }
        let gaps = read_tsv(&out.path().join("definition_gaps.tsv"));
        assert_eq!(gaps.len(), per_port.len(), "{}", trace.display());
        let mut want_flows = Vec::new();
        for row in &gaps {
            let times = &per_port[&row["fid"]];
            let deltas: Vec<u64> = times.windows(2).map(|w| w[1].0.saturating_sub(w[0].0)).collect();
            let what = format!("{} port {}", trace.display(), row["fid"]);
            assert_eq!(int(row, "gaps"), deltas.len() as u64, "{what}");
            if let (Some(min), Some(max)) = (deltas.iter().min(), deltas.iter().max()) {
                assert_eq!(row["min_ms"], format!("{:.6}", *min as f64 / 1e6), "{what}");
                assert_eq!(row["max_ms"], format!("{:.6}", *max as f64 / 1e6), "{what}");
                let mean = deltas.iter().sum::<u64>() as f64 / deltas.len() as f64 / 1e6;
                assert!((num(row, "mean_ms") - mean).abs() < 1e-5, "{what}");
            }
            // Flows: split where packets are more than 1 s apart.
            let mut flow = (times[0].0, times[0].0, 0u64, 0u64);
            for (i, &(t, len)) in times.iter().enumerate() {
                if i > 0 && t.saturating_sub(times[i - 1].0) > 1_000_000_000 {
                    want_flows.push((row["fid"].clone(), flow.2, flow.3));
                    flow = (t, t, 0, 0);
                }
                flow = (flow.0, flow.1.max(t), flow.2 + 1, flow.3 + len);
            }
            want_flows.push((row["fid"].clone(), flow.2, flow.3));
        }
        let mut got_flows: Vec<(String, u64, u64)> = read_tsv(&out.path().join("definition_flows.tsv"))
            .iter()
            .map(|r| (r["fid"].clone(), int(r, "packets"), int(r, "bytes")))
            .collect();
        got_flows.sort();
        want_flows.sort();
        assert_eq!(got_flows, want_flows, "{}", trace.display());
        let histogram: u64 =
            read_tsv(&out.path().join("definition_gap_histogram.tsv")).iter().map(|r| int(r, "gaps")).sum();
        assert_eq!(histogram, gaps.iter().map(|r| int(r, "gaps")).sum::<u64>());
    }
}

#[test]
fn a_definition_counts_at_its_own_interval() {
    let trace = traces().remove(0);
    let (_, rows) = run(&trace, "fine = ip.proto == 6 every 10ms\ncoarse = ip.proto == 6\n", &["--interval", "60"]);
    let span = |r: &std::collections::HashMap<String, String>| num(r, "end") - num(r, "start");
    let fine: Vec<_> = rows.iter().filter(|r| r["definition"] == "fine").collect();
    let coarse: Vec<_> = rows.iter().filter(|r| r["definition"] == "coarse").collect();
    assert!(fine.iter().all(|r| (span(r) - 0.01).abs() < 1e-5) && fine.len() > 20);
    assert!(coarse.iter().all(|r| (span(r) - 60.0).abs() < 1e-5));
    let total =
        |rows: &[&std::collections::HashMap<String, String>]| rows.iter().map(|r| int(r, "packets")).sum::<u64>();
    assert_eq!(total(&fine), total(&coarse));
    assert_eq!(total(&fine) as usize, tshark(&trace, "tcp", &["frame.len"]).len());
}

/// The ready-made associations of `definitions/tcp-rtt.defs`, and a client-side variant.
fn ready_made() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../definitions/tcp-rtt.defs")).unwrap()
}

/// Client data (to the ground truth's server ports, all below 10000) answered by the server's
/// ACK: with the probe at the client, one whole round trip.
const CLIENT_RTT: &str = "\
cdata = ip.version == 4 and tcp.dport < 10000 and payload[0:1] >= 0 key ip4.src, ip4.dst, tcp.sport, tcp.dport, tcp.nxt
sack  = ip.version == 4 and tcp.sport < 10000 and tcp.flags & 0x10 == 0x10 key ip4.dst, ip4.src, tcp.dport, tcp.sport, tcp.ack
crtt  = assoc cdata -> sack within 10s
cdata6 = ip.version == 6 and tcp.dport < 10000 and payload[0:1] >= 0 key l3[20:4], l3[36:4], tcp.sport, tcp.dport, tcp.nxt
sack6  = ip.version == 6 and tcp.sport < 10000 and tcp.flags & 0x10 == 0x10 key l3[36:4], l3[20:4], tcp.dport, tcp.sport, tcp.ack
crtt6  = assoc cdata6 -> sack6 within 10s
";

#[test]
fn the_data_to_ack_association_agrees_with_the_flow_analyser_and_the_kernel() {
    let Some(shared) = shared_dir() else { return };
    // The IPv6 trace through the IPv6 associations (names ending in 6).
    for (name, v) in [("mixed", ""), ("lossy", ""), ("clean", ""), ("ipv6", "6")] {
        let trace = shared.join(format!("groundtruth/{name}.pcap"));
        let (out, _) = run(&trace, &format!("{}\n{CLIENT_RTT}", ready_made()), &[]);
        let assoc: BTreeMap<String, std::collections::HashMap<String, String>> =
            read_tsv(&out.path().join("definition_associations.tsv"))
                .into_iter()
                .map(|r| (r["association"].clone(), r))
                .collect();
        // Every data→ACK sample against the flow analyser's (same rule: the ACK of exactly the
        // segment, Karn's rule): as many within 5 %, the same minimum, the mean within 5 %.
        let flows = read_tsv(&out.path().join("tcp_flows.tsv"));
        let (mut n, mut sum, mut min) = (0u64, 0.0, f64::MAX);
        for f in &flows {
            for side in ["c", "s"] {
                let count = int(f, &format!("{side}_rtt_cnt"));
                if count > 0 {
                    n += count;
                    sum += num(f, &format!("{side}_rtt_avg")) * count as f64;
                    min = min.min(num(f, &format!("{side}_rtt_min")));
                }
            }
        }
        let rtt = &assoc[&format!("rtt{v}")];
        let what = format!("{name}: association {rtt:?}, analyser {n} samples, mean {}", sum / n as f64);
        assert!((int(rtt, "samples") as f64 - n as f64).abs() <= 0.05 * n as f64, "{what}");
        assert!((num(rtt, "mean_ms") - sum / n as f64).abs() <= 0.05 * sum / n as f64, "{what}");
        assert!((num(rtt, "min_ms") - min).abs() < 1e-9, "{what}");
        // The client's round trips against the kernel's smoothed RTT of the same connections.
        let truth: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(shared.join(format!("groundtruth/{name}.truth.json"))).unwrap(),
        )
        .unwrap();
        let mut srtt: Vec<f64> = truth["flows"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|f| f["rtt_ms"]["kernel_client_srtt"].as_f64())
            .collect();
        srtt.sort_by(f64::total_cmp);
        let kernel = srtt[srtt.len() / 2];
        let crtt = num(&assoc[&format!("crtt{v}")], "p50_ms");
        assert!(
            (crtt - kernel).abs() <= 0.1 * kernel,
            "{name}: client data→ACK p50 {crtt} ms, kernel srtt median {kernel} ms"
        );
        // `above`: every segment an ACK reaches is answered, so (the transfers completed) no
        // arm is left, there are more samples than exact ones, and the least is the same.
        let cumulative = &assoc[&format!("rtt{v}_cumulative")];
        assert!(int(cumulative, "unanswered") * 100 <= int(cumulative, "samples"), "{name}: {cumulative:?}");
        assert!(int(cumulative, "samples") > int(rtt, "samples"), "{name}: {cumulative:?}");
        assert_eq!(cumulative["min_ms"], rtt["min_ms"], "{name}");
        assert!(num(cumulative, "mean_ms") >= num(rtt, "mean_ms"), "{name}: delayed ACKs only add");
        // SYN→FIN: one sample per connection the client closed.
        let closed = flows.iter().filter(|f| int(f, "c_fin_cnt") > 0).count() as u64;
        let connection = &assoc[&format!("connection{v}")];
        assert!(
            int(connection, "samples") <= closed && int(connection, "samples") * 10 >= closed * 7,
            "{name}: {connection:?} vs {closed} closed"
        );
    }
}

#[test]
fn changes_at_packet_times_are_versioned_and_lose_no_counts() {
    let trace = traces().remove(0);
    let defs = "tcp = ip.proto == 6\nweb = tcp.dport in 80..88\n";
    // Between two packets of the demo trace (…597.519656 and …597.534378; …599.084357 and
    // …599.084366).
    let (t1, t2) = ("1795307597.525", "1795307599.08436");
    let dir = tempfile::tempdir().unwrap();
    let changes = dir.path().join("changes.txt");
    std::fs::write(
        &changes,
        format!(
            "# time version change\n\
             {t1} 1 add syn = tcp.flags & 0x12 == 0x02\n\
             {t1} 1 remove web\n\
             {t2} 2 remove web\n\
             {t2} 3 add oops = tcp.dprt == 1\n"
        ),
    )
    .unwrap();
    let (out, rows) = run(&trace, defs, &["--definition-changes", changes.to_str().unwrap()]);
    let (_, unchanged) = run(&trace, defs, &[]);
    let of = |rows: &[std::collections::HashMap<String, String>], name: &str| -> Vec<(String, u64)> {
        rows.iter().filter(|r| r["definition"] == name).map(|r| (r["fid"].clone(), int(r, "packets"))).collect()
    };
    // A definition no change touched counts exactly as without changes.
    assert_eq!(of(&rows, "tcp"), of(&unchanged, "tcp"));
    let packets = |name: &str| of(&rows, name).iter().map(|r| r.1).sum::<u64>() as usize;
    let syn = tshark(
        &trace,
        &format!("tcp.flags.syn == 1 && tcp.flags.ack == 0 && frame.time_epoch >= {t1}"),
        &["frame.len"],
    );
    assert_eq!(packets("syn"), syn.len());
    assert!(!syn.is_empty());
    let web =
        tshark(&trace, &format!("tcp.dstport >= 80 && tcp.dstport <= 88 && frame.time_epoch < {t2}"), &["frame.len"]);
    assert_eq!(packets("web"), web.len());
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("summary.json")).unwrap()).unwrap();
    let results: Vec<&str> =
        summary["definition_changes"].as_array().unwrap().iter().map(|c| c["result"].as_str().unwrap()).collect();
    assert_eq!(
        results[..3],
        ["applied", "conflict: the change was made against version 1, the set is at version 2", "applied"]
    );
    assert!(results[3].contains("unknown field `tcp.dprt`"), "{}", results[3]);
    let web_total = summary["definitions"].as_array().unwrap().iter().find(|d| d["name"] == "web").unwrap().clone();
    assert_eq!((web_total["retired"].as_bool(), web_total["version"].as_u64()), (Some(true), Some(1)));
}
