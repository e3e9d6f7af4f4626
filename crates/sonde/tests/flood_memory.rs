//! Memory bounded by live state, not by the flows seen: flow logs beyond `--sort-buffer` wait in
//! sorted runs on disk and come out byte for byte as a run held in memory writes them.

mod common;

use std::io::Write;
use std::path::Path;

use common::analyze;

/// A flood: `n` packets, each a new flow (a SYN from a new source, every 8th a UDP datagram),
/// 10,000 per second.
fn flood(path: &Path, n: u32) {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    // pcap, µs, Ethernet.
    out.write_all(&[0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0]).unwrap();
    out.write_all(&[0; 8]).unwrap();
    out.write_all(&65535u32.to_le_bytes()).unwrap();
    out.write_all(&1u32.to_le_bytes()).unwrap();
    for i in 0..n {
        let udp = i % 8 == 7;
        let mut l4 = Vec::new();
        l4.extend_from_slice(&(1024 + (i % 60_000) as u16).to_be_bytes());
        if udp {
            l4.extend_from_slice(&53u16.to_be_bytes());
            l4.extend_from_slice(&12u16.to_be_bytes());
            l4.extend_from_slice(&[0, 0, b'q', b'?', 0, 0]);
        } else {
            l4.extend_from_slice(&80u16.to_be_bytes());
            l4.extend_from_slice(&i.to_be_bytes());
            l4.extend_from_slice(&[0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0]);
        }
        let mut frame = vec![0, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0x08, 0x00];
        let total = (20 + l4.len()) as u16;
        frame.extend_from_slice(&[0x45, 0]);
        frame.extend_from_slice(&total.to_be_bytes());
        frame.extend_from_slice(&(i as u16).to_be_bytes());
        frame.extend_from_slice(&[0, 0, 64, if udp { 17 } else { 6 }, 0, 0]);
        frame.extend_from_slice(&[10, (i >> 16) as u8, (i >> 8) as u8, i as u8, 192, 0, 2, 1]);
        frame.extend_from_slice(&l4);
        out.write_all(&(1_700_000_000 + i / 10_000).to_le_bytes()).unwrap();
        out.write_all(&((i % 10_000) * 100).to_le_bytes()).unwrap();
        out.write_all(&(frame.len() as u32).to_le_bytes()).unwrap();
        out.write_all(&(frame.len() as u32).to_le_bytes()).unwrap();
        out.write_all(&frame).unwrap();
    }
    out.flush().unwrap();
}

fn summary(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap()
}

/// Spilled or not, with one worker or three: the same bytes in every flow log, TSV, JSON Lines
/// and Parquet; the summary says what went to disk.
#[test]
fn logs_beyond_the_sort_buffer_are_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("flood.pcap");
    flood(&trace, 40_000);
    for (format, names) in [
        ("tsv", ["tcp_flows.tsv", "udp_flows.tsv"]),
        ("jsonl", ["tcp_flows.jsonl", "udp_flows.jsonl"]),
        ("parquet", ["tcp_flows.parquet", "udp_flows.parquet"]),
    ] {
        let held_args = ["--format", format, "--threads", "1", "--interval", "0", "--sort-buffer", "1024"];
        let (held, run) = analyze(&trace, &held_args);
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        assert!(summary(held.path()).get("sorted_runs").is_none(), "{format}: held in memory");
        let (spilled, run) =
            analyze(&trace, &["--format", format, "--threads", "3", "--interval", "0", "--sort-buffer", "1"]);
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        let s = summary(spilled.path());
        let runs = &s["sorted_runs"];
        assert!(runs["runs"].as_u64().unwrap() >= 4 && runs["failure"].is_null(), "{format}: {runs}");
        assert_eq!(s["flows"]["tcp"].as_u64(), Some(35_000), "{format}");
        for name in names {
            let (a, b) =
                (std::fs::read(held.path().join(name)).unwrap(), std::fs::read(spilled.path().join(name)).unwrap());
            assert!(a == b, "{format}: {name} differs when spilled ({} vs {} bytes)", a.len(), b.len());
        }
        let mut left: Vec<String> = std::fs::read_dir(spilled.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n != ".sonde.lock")
            .collect();
        left.sort();
        // The ICMP log beside them, in the same format; no run is left behind.
        let icmp = format!("icmp_flows.{format}");
        let mut want: Vec<String> = names.iter().map(|n| n.to_string()).chain([icmp]).collect();
        want.push("summary.json".into());
        want.sort();
        assert_eq!(left, want, "{format}: the logs and the summary, no run left behind");
    }
}

/// Ten times the flows through a table of 10,000: the peak memory stays within 1.5× (before the
/// sorted runs, every ended flow's line was held to the end: 186 MB against 29 MB).
#[test]
fn memory_follows_the_live_flows_not_the_flows_seen() {
    let dir = tempfile::tempdir().unwrap();
    let peak = |n: u32, format: &str| {
        let trace = dir.path().join(format!("flood-{n}.pcap"));
        if !trace.exists() {
            flood(&trace, n);
        }
        let args = ["--max-flows", "10000", "--sort-buffer", "4", "--threads", "2", "--format", format];
        let (out, run) = analyze(&trace, &args);
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        summary(out.path())["timing"]["peak_rss_bytes"].as_u64().unwrap()
    };
    for format in ["tsv", "parquet"] {
        let (small, large) = (peak(30_000, format), peak(300_000, format));
        eprintln!("{format}: peak RSS {} MB for 30,000 flows, {} MB for 300,000", small >> 20, large >> 20);
        assert!(large * 2 <= small * 3, "{format}: {} MB against {} MB", large >> 20, small >> 20);
    }
}

/// A full table evicts the same flows whatever the number of workers: the flows are split into
/// shards that do not depend on `--threads`, each with its share of `--max-flows` (a table per
/// worker evicted by each worker's share: 4 lines of 1 M UDP flows differed).
#[test]
fn a_full_table_evicts_the_same_flows_for_any_thread_count() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("flood.pcap");
    flood(&trace, 60_000);
    let mut first: Option<(Vec<Vec<u8>>, serde_json::Value)> = None;
    for threads in ["1", "2", "3"] {
        let (out, run) = analyze(&trace, &["--max-flows", "1000", "--threads", threads]);
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        let logs: Vec<Vec<u8>> =
            ["tcp_flows.tsv", "udp_flows.tsv"].iter().map(|f| std::fs::read(out.path().join(f)).unwrap()).collect();
        let table = summary(out.path())["flows"].clone();
        assert!(table["evicted"].as_u64().unwrap() > 50_000, "{table}");
        match &first {
            None => first = Some((logs, table)),
            Some((one, t)) => {
                assert!(one == &logs, "--threads {threads} differs from --threads 1");
                assert_eq!(t["evicted"], table["evicted"]);
            }
        }
    }
}
