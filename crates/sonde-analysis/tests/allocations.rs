//! No heap allocation per packet in steady state, counted by a counting global allocator over
//! whole runs of real traces: the bare pipeline (a `Vec` sink, no facts, no intervals) allocates
//! per run and per shard only; the CLI's default run — every application fact, the intervals,
//! the host and matrix tables, the flow logs written — per run, per interval and per flow. One
//! test function, so that no other test allocates while the counter is read.

use std::path::{Path, PathBuf};

use sonde_analysis::{Analysis, AnalysisConfig};
use sonde_engine::{Pipeline, Run, ThinConfig, Thinner};
use sonde_flow::FlowRecord;

#[global_allocator]
static ALLOC: sonde_heap::Counting = sonde_heap::Counting;

struct Counted {
    allocations: u64,
    packets: u64,
    flows: u64,
    intervals: u64,
}

/// One default run over `trace` (the output directory made before counting starts).
fn count(trace: &Path, threads: usize) -> Counted {
    let out = std::env::temp_dir().join(format!("sonde-allocations-{}-{threads}", std::process::id()));
    let config =
        AnalysisConfig { out: out.clone(), force: true, quiet: true, threads: Some(threads), ..Default::default() };
    let open = || sonde_capture::open(trace).map_err(anyhow::Error::from);
    let (mut analysis, mut source) = Analysis::prepare(config, open).expect("prepare");
    analysis.create_outputs().expect("output directory");
    let before = sonde_heap::allocations();
    let finished = analysis.write(&mut [source.as_mut()], ("trace", None), None, None).expect("run");
    let allocations = sonde_heap::allocations() - before;
    let s = &finished.report.stats;
    let counted = Counted {
        allocations,
        packets: s.packets.read,
        flows: s.flows.tcp + s.flows.udp + s.flows.icmp.flows,
        // Intervals of the default 60 s the trace's span touches.
        intervals: s.last_ts_ns.saturating_sub(s.first_ts_ns) / 60_000_000_000 + 2,
    };
    drop(finished);
    std::fs::remove_dir_all(&out).ok();
    counted
}

/// Allocations of one bare pipeline run (opening excluded), with its packet and flow counts.
fn count_pipeline(trace: &Path, workers: usize, thin: bool) -> (u64, u64, u64) {
    let mut source = sonde_capture::open(trace).expect("open trace");
    let thin = thin.then(|| Thinner::new(&ThinConfig::default()).expect("default thinning"));
    let pipeline = Pipeline { workers, thin, ..Pipeline::default() };
    let run = Run::new().pipeline(pipeline);
    let new_sink = || Vec::<FlowRecord>::with_capacity(1 << 16);
    let before = sonde_heap::allocations();
    let result = run.analyze(&mut [source.as_mut()], &new_sink).expect("run");
    let allocations = sonde_heap::allocations() - before;
    let s = result.stats;
    (allocations, s.packets.read, s.flows.tcp + s.flows.udp)
}

fn traces() -> Vec<PathBuf> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut v = vec![repo.join("testdata/demo.pcap")];
    let shared = std::env::var_os("SONDE_SHARED").map_or_else(|| repo.join("../shared"), PathBuf::from);
    for rel in [
        "groundtruth/clean.pcap",
        "groundtruth/lossy.pcap",
        "groundtruth/mixed.pcap",
        "groundtruth/ipv6.pcap",
        "traces/realistic/nfstream+nfstream/tests/pcaps/alexa-app.pcapng",
        "traces/realistic/nfstream+nfstream/tests/pcaps/instagram.pcap",
        "traces/realistic/nfstream+nfstream/tests/pcaps/quic_t51.pcap",
        "traces/realistic/nfstream+nfstream/tests/pcaps/skype.pcap",
    ] {
        let p = shared.join(rel);
        if p.exists() {
            v.push(p);
        }
    }
    v
}

/// The bare pipeline, per run: threads, channels, batches, the stats maps; per shard of the flows
/// (256 by default) its tracker's table, slabs and pools. Per flow: its record and the growth of
/// its sequence and RTT state (amortised doubling). None grows with packets.
const PIPELINE_PER_RUN: u64 = 256;
const PIPELINE_PER_SHARD: u64 = 8;
const PIPELINE_PER_FLOW: u64 = 8;

/// The default run, beyond what a run of the small demo trace allocates (threads, channels, batches, per-shard
/// tables, the outputs' writers, the summary): per interval its report's maps and rows; per flow
/// its record, its application session and facts (names, fingerprints), the growth of its
/// sequence and RTT state, its rows in the host and matrix tables (9-36 measured on these
/// traces). Per packet: nothing — one allocation in fifty packets fails the test (one per
/// packet would add 27,355 on clean.pcap, where the run allocates ~1,100 beyond the demo's).
const PER_INTERVAL: u64 = 400;
const PER_FLOW: u64 = 40;
const PACKETS_PER_ALLOCATION: u64 = 50;

#[test]
fn steady_state_allocates_per_flow_never_per_packet() {
    let traces = traces();
    for trace in &traces {
        // Thinning (its table is made before the run) adds nothing per packet either.
        for (workers, thin) in [(1, false), (2, false), (1, true), (2, true)] {
            let (allocations, packets, flows) = count_pipeline(trace, workers, thin);
            eprintln!(
                "{}: {packets} packets, {flows} flows, {allocations} allocations in the bare pipeline with {workers} worker(s), thinning {thin}",
                trace.display()
            );
            let bound =
                PIPELINE_PER_RUN + PIPELINE_PER_SHARD * sonde_engine::MAX_WORKERS as u64 + PIPELINE_PER_FLOW * flows;
            assert!(allocations <= bound, "{}: {allocations} allocations for {packets} packets", trace.display());
        }
    }
    for threads in [1, 2] {
        let base = count(&traces[0], threads);
        for trace in &traces[1..] {
            let c = count(trace, threads);
            eprintln!(
                "{}: {} packets, {} flows, {} allocations with {threads} thread(s), {} beyond the demo's",
                trace.display(),
                c.packets,
                c.flows,
                c.allocations,
                c.allocations.saturating_sub(base.allocations),
            );
            let bound = base.allocations
                + PER_INTERVAL * c.intervals.saturating_sub(base.intervals)
                + PER_FLOW * c.flows
                + c.packets / PACKETS_PER_ALLOCATION;
            assert!(c.allocations <= bound, "{}: {} allocations, bound {bound}", trace.display(), c.allocations);
        }
    }
}
