//! No heap allocation per packet in steady state: a counting global allocator watches a whole
//! run over real traces. What may allocate is per flow (its record, the growth of its state) or
//! per run (tables, batches, threads) — never per packet.

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use sonde_engine::{Pipeline, Run, ThinConfig, Thinner};
use sonde_flow::FlowRecord;

struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract for this call is the one GlobalAlloc gives System.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract for this call is the one GlobalAlloc gives System.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract for this call is the one GlobalAlloc gives System.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations of one whole run (opening excluded), with its packet and flow counts.
fn count(trace: &Path, workers: usize, thin: bool) -> (u64, u64, u64) {
    let mut source = sonde_capture::open(trace).expect("open trace");
    let thin = thin.then(|| Thinner::new(&ThinConfig::default()).expect("default thinning"));
    let pipeline = Pipeline { workers, thin, ..Pipeline::default() };
    let run = Run::new().pipeline(pipeline);
    let new_sink = || Vec::<FlowRecord>::with_capacity(1 << 16);
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    let result = run.analyze(&mut [source.as_mut()], &new_sink).expect("run");
    let allocations = ALLOCATIONS.load(Ordering::Relaxed) - before;
    let s = result.stats;
    (allocations, s.packets.read, s.flows.tcp + s.flows.udp)
}

fn traces() -> Vec<PathBuf> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut v = vec![repo.join("testdata/demo.pcap")];
    let shared = std::env::var_os("SONDE_SHARED").map_or_else(|| repo.join("../shared"), PathBuf::from);
    for rel in [
        "groundtruth/lossy.pcap",
        "groundtruth/mixed.pcap",
        "traces/realistic/nfstream+nfstream/tests/pcaps/alexa-app.pcapng",
        "traces/realistic/nfstream+nfstream/tests/pcaps/skype.pcap",
    ] {
        let p = shared.join(rel);
        if p.exists() {
            v.push(p);
        }
    }
    v
}

/// Per run: threads, channels, batches, the stats maps; per shard of the flows (256 by
/// default) its tracker's table, slabs and pools. Per flow: its record and the growth of its
/// sequence and RTT state (amortised doubling). None grows with packets.
const PER_RUN: u64 = 256;
const PER_SHARD: u64 = 8;
const PER_FLOW: u64 = 8;

#[test]
fn steady_state_allocates_nothing_per_packet() {
    for trace in traces() {
        // Thinning (its table is made before the run) adds nothing per packet either.
        for (workers, thin) in [(1, false), (2, false), (1, true), (2, true)] {
            let (allocations, packets, flows) = count(&trace, workers, thin);
            eprintln!(
                "{}: {packets} packets, {flows} flows, {allocations} allocations with {workers} worker(s), thinning {thin}",
                trace.display()
            );
            assert!(
                allocations <= PER_RUN + PER_SHARD * sonde_engine::MAX_WORKERS as u64 + PER_FLOW * flows,
                "{}: {allocations} allocations for {packets} packets and {flows} flows",
                trace.display()
            );
        }
    }
}
