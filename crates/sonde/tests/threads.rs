//! The flow logs, the interval outputs and the flow definitions' outputs are byte-identical
//! whatever the number of worker threads.

mod common;

use std::path::{Path, PathBuf};

use common::*;

fn same_logs_for_any_thread_count(trace: &Path) {
    let dir = tempfile::tempdir().unwrap();
    let ready_made = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../definitions/tcp-rtt.defs");
    let text = std::fs::read_to_string(ready_made).unwrap();
    // FIDs that span workers (ports, sources), packets of no flow (ICMP, ARP), tables that
    // fill (`--definition-fids 8`), and changes at a third and two thirds of the trace.
    let defs = dir.path().join("defs");
    std::fs::write(
        &defs,
        format!(
            "ports = ip.proto == 6 key tcp.dport measure count,gap,length idle 1s\n\
             sources = ip.version == 4 key ip.src measure count,gap,length idle 100ms every 10ms\n\
             other = ip.proto in 1..5 key ip.proto measure count,gap\n\
             arp = eth.type == 0x0806 measure count,gap,length\n{text}"
        ),
    )
    .unwrap();
    let (out, _) = analyze(trace, &["--threads", "1"]);
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("summary.json")).unwrap()).unwrap();
    let (first, last) = (summary["first_ts_ns"].as_u64().unwrap(), summary["last_ts_ns"].as_u64().unwrap());
    let at = |k: u64| {
        let ns = first + (last - first) * k / 3;
        format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
    };
    let changes = dir.path().join("changes");
    std::fs::write(
        &changes,
        format!(
            "{t1} 1 add udp = ip.proto == 17 key udp.dport measure count,gap,length idle 1s\n\
             {t1} 2 replace ports = tcp.sport < 1024 key tcp.sport measure count,gap\n\
             {t1} 3 add opening = ip.version == 4 and tcp.flags & 0x12 == 0x02 key ip4.src, ip4.dst, tcp.sport, tcp.dport, tcp.nxt\n\
             {t2} 4 add handshake = assoc opening -> ack\n\
             {t2} 5 remove rtt\n\
             {t2} 6 remove udp\n",
            t1 = at(1),
            t2 = at(2)
        ),
    )
    .unwrap();
    let mut first: Option<Vec<Vec<u8>>> = None;
    for threads in ["1", "2", "3", "8"] {
        let args = ["--threads", threads, "--interval", "0.5", "--tables", "--definitions"];
        let args = args.into_iter().chain([defs.to_str().unwrap(), "--definition-fids", "8"]);
        let args: Vec<&str> = args.chain(["--definition-changes", changes.to_str().unwrap()]).collect();
        let (out, output) = analyze(trace, &args);
        assert!(output.status.code().is_some_and(|c| c == 0 || c == 3), "{}: {output:?}", trace.display());
        let files = [
            "tcp_flows.tsv",
            "udp_flows.tsv",
            "icmp_flows.tsv",
            "intervals.tsv",
            "quantiles.tsv",
            "histograms.tsv",
            "hosts.tsv",
        ]
        .into_iter()
        .chain(["matrix.tsv", "protocols.tsv", "top.tsv", "definitions.tsv", "definition_gaps.tsv"])
        .chain(["al_hosts.tsv", "al_matrix.tsv", "protocol_dir.tsv", "al_top.tsv"])
        .chain(["definition_gap_histogram.tsv", "definition_flows.tsv", "definition_associations.tsv"])
        .chain(["definition_association_samples.tsv"]);
        let mut logs: Vec<Vec<u8>> = files.map(|f| std::fs::read(out.path().join(f)).unwrap()).collect();
        let summary: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.path().join("summary.json")).unwrap()).unwrap();
        let results = summary["definition_changes"].to_string();
        assert!(!results.contains("conflict") && !results.contains("refused"), "{results}");
        logs.push(summary["definitions"].to_string().into_bytes());
        match &first {
            None => first = Some(logs),
            Some(one) => assert!(one == &logs, "{}: --threads {threads} differs from --threads 1", trace.display()),
        }
    }
}

/// Issue 21: without definitions, `--threads N` on a trace file runs N readers that each read
/// it whole and analyse their share of the flows. Every output but the run's cost is that of one
/// reader: flows (evicted from a table far too small, timed out, left at the end), intervals,
/// tables, ICMP sessions and the errors counted on other readers' flows, the summary's counts.
/// With the tables, the first reader decodes every packet for them; without, each reader passes
/// over other readers' plain TCP and UDP packets by their addresses and ports alone.
fn split_readers_give_the_outputs_of_one(trace: &Path) {
    for tables in [true, false] {
        split_readers_give_the_outputs_of_one_with(trace, tables);
    }
}

fn split_readers_give_the_outputs_of_one_with(trace: &Path, tables: bool) {
    let mut first: Option<(Vec<Vec<u8>>, serde_json::Value)> = None;
    for threads in ["1", "2", "3", "8"] {
        let mut args = vec!["--threads", threads, "--interval", "0.5", "--max-flows", "40", "--udp-timeout", "2"];
        if tables {
            args.push("--tables");
        }
        let (out, output) = analyze(trace, &args);
        assert!(output.status.code().is_some_and(|c| c == 0 || c == 3), "{}: {output:?}", trace.display());
        let mut files: Vec<String> = std::fs::read_dir(out.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|f| f != "summary.json")
            .collect();
        files.sort();
        let logs: Vec<Vec<u8>> =
            files.iter().map(|f| [f.as_bytes(), b"\n", &std::fs::read(out.path().join(f)).unwrap()].concat()).collect();
        let mut summary: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.path().join("summary.json")).unwrap()).unwrap();
        let timing = summary.as_object_mut().unwrap().remove("timing").unwrap();
        assert_eq!(timing["readers"].as_u64(), Some(threads.parse().unwrap()), "one reader per thread");
        for varies in ["rates", "table"] {
            summary.as_object_mut().unwrap().remove(varies);
        }
        match &first {
            None => first = Some((logs, summary)),
            Some((one, s)) => {
                assert!(one == &logs, "{}: --threads {threads} differs from --threads 1", trace.display());
                assert_eq!(s, &summary, "{}: --threads {threads}", trace.display());
            }
        }
    }
}

#[test]
fn split_readers_give_the_outputs_of_one_reader() {
    split_readers_give_the_outputs_of_one(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/demo.pcap"));
    let Some(shared) = shared_dir() else { return };
    // Layers a reader that passes over other readers' packets must not misread: VLAN tags,
    // MPLS, PPPoE, fragments, and flows inside GRE, VXLAN and GTP tunnels.
    let layered = [
        "traces/realistic/CESNET+ipfixprobe/tests/functional/inputs/vlan.pcap",
        "traces/realistic/arkime+arkime/tests/pcap/mpls-basic.pcap",
        "traces/realistic/arkime+arkime/tests/pcap/pppoe.pcap",
        "traces/realistic/appneta+tcpreplay/test/test_fragroute.pcap",
        "traces/realistic/arkime+arkime/tests/pcap/gre-erspan-vxlan.pcap",
        "traces/realistic/arkime+arkime/tests/pcap/ipv6-gtp6.pcap",
    ]
    .map(|rel| shared.join(rel));
    for trace in real_traces().into_iter().chain(layered.into_iter().filter(|p| p.exists())) {
        split_readers_give_the_outputs_of_one(&trace);
    }
}

/// A compressed trace is decompressed once and handed to every reader: the same outputs as
/// one reader, also when the compressed stream is cut (the frames before the cut, the error
/// at the same byte).
#[test]
fn split_readers_of_a_compressed_trace_give_the_outputs_of_one_reader() {
    let dir = tempfile::tempdir().unwrap();
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/demo.pcap");
    let traces = std::iter::once(demo).chain(real_traces().into_iter().take(2));
    for (i, trace) in traces.enumerate() {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, &std::fs::read(&trace).unwrap()).unwrap();
        let gz = gz.finish().unwrap();
        let (whole, cut) = (dir.path().join(format!("{i}.pcap.gz")), dir.path().join(format!("{i}-cut.pcap.gz")));
        std::fs::write(&whole, &gz).unwrap();
        std::fs::write(&cut, &gz[..gz.len() * 3 / 4]).unwrap();
        split_readers_give_the_outputs_of_one(&whole);
        split_readers_give_the_outputs_of_one(&cut);
    }
}

/// docs/rmon2.md: full application-layer tables keep the same rows and overflow whatever the
/// number of workers filling them.
#[test]
fn full_application_tables_are_the_same_with_any_thread_count() {
    let trace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/demo.pcap");
    let files = ["al_hosts.tsv", "al_matrix.tsv", "protocol_dir.tsv", "al_top.tsv", "summary.json"];
    let mut first: Option<Vec<String>> = None;
    for threads in ["1", "2", "3"] {
        let (out, output) = analyze(&trace, &["--threads", threads, "--tables", "--table-size", "1", "--top", "2"]);
        assert!(output.status.success(), "{output:?}");
        let mut texts: Vec<String> = files.map(|f| std::fs::read_to_string(out.path().join(f)).unwrap()).to_vec();
        let summary: serde_json::Value = serde_json::from_str(&texts.pop().unwrap()).unwrap();
        assert!(summary["monitoring"]["table_overflows"].as_u64().unwrap() > 0);
        texts.push(summary["monitoring"]["table_overflows"].to_string());
        assert!(texts[0].contains("overflow"), "{}", texts[0]);
        match &first {
            None => first = Some(texts),
            Some(one) => assert!(one == &texts, "--threads {threads} differs from --threads 1"),
        }
    }
}

#[test]
fn demo_trace_is_the_same_with_any_thread_count() {
    same_logs_for_any_thread_count(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/demo.pcap"));
}

/// The shared corpus's traces these tests run on, those present (none without the corpus).
fn real_traces() -> Vec<PathBuf> {
    let Some(shared) = shared_dir() else { return Vec::new() };
    let traces: Vec<PathBuf> = [
        "groundtruth/lossy.pcap",
        "groundtruth/mixed.pcap",
        "traces/realistic/ntop+nDPI/tests/cfgs/default/pcap/alexa-app.pcapng",
        "traces/realistic/arkime+arkime/tests/pcap/arkime_synthetic.pcap",
        "traces/realistic/nfstream+nfstream/tests/pcaps/skype.pcap",
        // Echo sessions, and ICMP errors quoting UDP flows: counted on a flow of another worker.
        "traces/realistic/appneta+tcpreplay/test/test.pcap",
        "traces/realistic/arkime+arkime/tests/pcap/v6.pcap",
        // Timestamps that step back: flows must not split differently per worker.
        "traces/robustness/the-tcpdump-group+tcpdump/tests/kday3.pcap",
    ]
    .iter()
    .map(|rel| shared.join(rel))
    .filter(|p| p.exists())
    .collect();
    assert!(traces.len() >= 4, "expected traces are missing from the corpus");
    traces
}

#[test]
fn real_traces_are_the_same_with_any_thread_count() {
    for t in &real_traces() {
        same_logs_for_any_thread_count(t);
    }
}
