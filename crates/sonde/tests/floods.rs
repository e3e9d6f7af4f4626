//! Floods an attacker sends (docs/reliability.md), written by `bench/flood.py`: memory stays
//! within the table's room whatever the flows seen, every flow is logged (the evicted ones too,
//! and counted), and the interval and definition tables stay within their limits.

mod common;

use std::path::Path;

use common::*;

/// Live state per flow the bound allows: docs/performance.md measures 725 B per live TCP flow
/// and 1,236 B per flow for a whole run at 1 M flows; the rest covers the index growing in
/// powers of two.
const BYTES_PER_FLOW: u64 = 2_000;

fn summary(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap()
}

fn peak_rss(s: &serde_json::Value) -> u64 {
    s["timing"]["peak_rss_bytes"].as_u64().unwrap()
}

/// Rows of a TSV file, its header left out.
fn rows(path: &Path) -> usize {
    std::fs::read_to_string(path).unwrap().lines().count() - 1
}

/// The intervals a TSV file has rows for (its first column, `start`).
fn intervals(path: &Path) -> usize {
    let text = std::fs::read_to_string(path).unwrap();
    let starts: std::collections::BTreeSet<&str> = text.lines().skip(1).filter_map(|l| l.split('\t').next()).collect();
    starts.len()
}

#[test]
fn floods_stay_within_the_table_and_every_flow_is_logged() {
    let dir = tempfile::tempdir().unwrap();
    let defs = dir.path().join("defs");
    std::fs::write(&defs, "sources = ip.version == 4 key ip.src measure count,gap\n").unwrap();
    let max_flows: u64 = 5_000;
    let max = max_flows.to_string();
    let args = ["--max-flows", &max, "--sort-buffer", "4", "--threads", "2", "--interval", "0.25", "--tables"];
    let args: Vec<&str> = args
        .into_iter()
        .chain(["--table-size", "1000", "--definitions", defs.to_str().unwrap(), "--definition-fids", "1000"])
        .collect();
    // What the process costs with next to no flows.
    let (out, run) = analyze(&flood_pcap(dir.path(), "udp", 100), &args);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let baseline = peak_rss(&summary(out.path()));
    // (kind, packets, flows it opens: every packet a new flow but for the later fragments, and
    // the second datagram of each concurrent flow evicted before it came back)
    for (kind, packets, flows) in [
        ("syn", 50_000, 50_000),
        ("udp", 50_000, 50_000),
        ("scan", 50_000, 50_000),
        ("frag", 50_000, 25_000),
        ("concurrent", 40_000, 40_000),
    ] {
        let trace = flood_pcap(dir.path(), kind, packets);
        let (out, run) = analyze(&trace, &args);
        assert!(run.status.success(), "{kind}: {}", String::from_utf8_lossy(&run.stderr));
        let s = summary(out.path());
        let f = &s["flows"];
        let (tcp, udp) = (f["tcp"].as_u64().unwrap(), f["udp"].as_u64().unwrap());
        assert_eq!(tcp + udp, flows, "{kind}: {f}");
        // Every flow is in a log, the evicted ones marked and counted.
        let (tcp_rows, udp_rows) =
            (read_tsv(&out.path().join("tcp_flows.tsv")), read_tsv(&out.path().join("udp_flows.tsv")));
        assert_eq!((tcp_rows.len() as u64, udp_rows.len() as u64), (tcp, udp), "{kind}");
        let evicted = tcp_rows.iter().chain(&udp_rows).filter(|r| r["end_reason"] == "evicted").count() as u64;
        assert_eq!(evicted, f["evicted"].as_u64().unwrap(), "{kind}");
        assert!(evicted >= flows - max_flows, "{kind}: {evicted} evicted of {flows}");
        assert!(s["table"]["peak_live_flows"].as_u64().unwrap() <= max_flows, "{kind}");
        // The interval tables and the definition's FIDs stay within their limits.
        let intervals = intervals(&out.path().join("intervals.tsv"));
        assert!(intervals <= 3, "{kind}: {intervals} intervals for half a second of traffic");
        for table in ["hosts.tsv", "matrix.tsv", "al_hosts.tsv", "al_matrix.tsv"] {
            let n = rows(&out.path().join(table));
            assert!(n <= intervals * 1_001, "{kind}: {table} has {n} rows");
        }
        let definition = &s["definitions"][0];
        assert!(definition["fid_rows"].as_u64().unwrap() <= intervals as u64 * 1_000, "{kind}: {definition}");
        // Random sources fill the FID table; a scanner is one source, the concurrent flows a few.
        let full = definition["overflow_packets"].as_u64().unwrap() > 0;
        assert_eq!(full, matches!(kind, "syn" | "udp" | "frag"), "{kind}: {definition}");
        // Memory: the table's room, the sort buffer and the tables over the process's own.
        let peak = peak_rss(&s);
        let bound = baseline + max_flows * BYTES_PER_FLOW + (4 << 20) + (16 << 20);
        eprintln!("{kind}: peak RSS {} MB (baseline {} MB, bound {} MB)", peak >> 20, baseline >> 20, bound >> 20);
        assert!(peak <= bound, "{kind}: peak RSS {} MB over {} MB", peak >> 20, bound >> 20);
    }
}

/// The figure: 2,000,000 flows through a table of 100,000 cost what 100,000 flows do
/// (before the sorted runs: 1.22 GB, the 752 MB flow log held whole).
#[test]
fn two_million_flows_cost_what_a_hundred_thousand_do() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["--max-flows", "100000", "--threads", "3", "--interval", "0"];
    let peak = |packets: u32| {
        let trace = flood_pcap(dir.path(), "syn", packets);
        let (out, run) = analyze(&trace, &args);
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        let s = summary(out.path());
        assert_eq!(s["flows"]["tcp"].as_u64(), Some(u64::from(packets)));
        std::fs::remove_file(trace).unwrap();
        peak_rss(&s)
    };
    let (small, large) = (peak(100_000), peak(2_000_000));
    eprintln!("peak RSS {} MB for 100,000 flows, {} MB for 2,000,000", small >> 20, large >> 20);
    assert!(large * 2 <= small * 3, "{} MB against {} MB", large >> 20, small >> 20);
}
