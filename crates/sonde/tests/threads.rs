//! The flow logs, the interval outputs and the flow definitions' outputs are byte-identical
//! whatever the number of worker threads.

mod common;

use std::path::{Path, PathBuf};

use common::*;

fn same_logs_for_any_thread_count(trace: &Path) {
    let defs = tempfile::NamedTempFile::new().unwrap();
    let ready_made = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../definitions/tcp-rtt.defs");
    let text = std::fs::read_to_string(ready_made).unwrap();
    std::fs::write(
        defs.path(),
        format!("ports = ip.proto == 6 key tcp.dport measure count,gap,length idle 1s\n{text}"),
    )
    .unwrap();
    let defs = defs.path().to_str().unwrap();
    let mut first: Option<Vec<Vec<u8>>> = None;
    for threads in ["1", "2", "3", "8"] {
        let args = ["--threads", threads, "--interval", "0.5", "--tables", "--definitions", defs];
        let (out, output) = analyze(trace, &args);
        assert!(output.status.code().is_some_and(|c| c == 0 || c == 3), "{}: {output:?}", trace.display());
        let files = ["tcp_flows.tsv", "udp_flows.tsv", "intervals.tsv", "quantiles.tsv", "histograms.tsv", "hosts.tsv"]
            .into_iter()
            .chain(["matrix.tsv", "protocols.tsv", "top.tsv", "definitions.tsv", "definition_gaps.tsv"])
            .chain(["definition_gap_histogram.tsv", "definition_flows.tsv", "definition_associations.tsv"]);
        let logs: Vec<Vec<u8>> = files.map(|f| std::fs::read(out.path().join(f)).unwrap()).collect();
        match &first {
            None => first = Some(logs),
            Some(one) => assert!(one == &logs, "{}: --threads {threads} differs from --threads 1", trace.display()),
        }
    }
}

#[test]
fn demo_trace_is_the_same_with_any_thread_count() {
    same_logs_for_any_thread_count(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/demo.pcap"));
}

#[test]
fn real_traces_are_the_same_with_any_thread_count() {
    let Some(shared) = shared_dir() else { return };
    let traces: Vec<PathBuf> = [
        "groundtruth/lossy.pcap",
        "groundtruth/mixed.pcap",
        "traces/realistic/ntop+nDPI/tests/cfgs/default/pcap/alexa-app.pcapng",
        "traces/realistic/arkime+arkime/tests/pcap/arkime_synthetic.pcap",
        "traces/realistic/nfstream+nfstream/tests/pcaps/skype.pcap",
        // Timestamps that step back: flows must not split differently per worker.
        "traces/robustness/the-tcpdump-group+tcpdump/tests/kday3.pcap",
    ]
    .iter()
    .map(|rel| shared.join(rel))
    .filter(|p| p.exists())
    .collect();
    assert!(traces.len() >= 4, "expected traces are missing from the corpus");
    for t in &traces {
        same_logs_for_any_thread_count(t);
    }
}
