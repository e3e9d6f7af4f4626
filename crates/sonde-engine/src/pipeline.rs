//! The reader → workers pipeline. The reader (the calling thread) reads, filters, decodes and
//! counts; workers track flows. Batches travel in bounded channels and come back empty to be
//! refilled, so steady state allocates nothing per packet.

use std::thread;

use crossbeam_channel::{bounded, Receiver, Sender};
use sonde_capture::{CaptureError, PacketSource};
use sonde_define::{Counter, Layers};
use sonde_filter::Filter;
use sonde_flow::{FlowConfig, FlowSink, FlowTracker, PacketKey, TableStats};
use sonde_stats::PacketIntervals;
use sonde_wire::{LinkType, PacketSummary};

use crate::stats::{CountingSink, FlowCounts, RunStats};

/// How the work is split.
#[derive(Debug, Clone)]
pub struct Pipeline {
    pub flow: FlowConfig,
    /// Flow-tracking workers (threads), at least 1. `max_flows` is shared out among them.
    pub workers: usize,
    /// Packets per batch handed to a worker.
    pub batch_len: usize,
}

impl Default for Pipeline {
    fn default() -> Self {
        Pipeline { flow: FlowConfig::default(), workers: 1, batch_len: 512 }
    }
}

/// How far the run has got, for a progress bar.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    pub packets: u64,
    /// Bytes of the input consumed, and the input size when known.
    pub position: u64,
    pub size: Option<u64>,
}

/// Frames between progress callbacks.
const PROGRESS_EVERY: u64 = 1 << 16;
/// Batches in flight per worker: enough to keep a worker busy while the reader fills the next.
const BATCHES_PER_WORKER: usize = 4;

/// The result of a run: what was counted, and the error that ended the input early, if any.
#[derive(Debug)]
pub struct Outcome {
    pub stats: RunStats,
    pub input_error: Option<CaptureError>,
}

/// One packet for a worker: its time, the reader's clock when it was read, its flow and what it
/// is.
#[derive(Clone, Copy)]
struct Item {
    ts_ns: u64,
    clock_ns: u64,
    key: PacketKey,
    packet: PacketSummary,
}

/// How far ahead of the packet being analysed a worker prefetches its flow's index entry, table
/// slot and state: each stage finds the previous one's line in the cache.
const PREFETCH_INDEX: usize = 8;
const PREFETCH_SLOT: usize = 4;
const PREFETCH_STATE: usize = 2;
/// Packets the single worker running in the reader's thread collects before analysing them, so
/// that it can prefetch ahead.
const INLINE_BATCH: usize = 64;

impl Item {
    const EMPTY: Item = Item { ts_ns: 0, clock_ns: 0, key: PacketKey::EMPTY, packet: PacketSummary::EMPTY };
}

enum Message {
    Batch(Vec<Item>),
    /// End of input; the clock is the input's last packet time.
    End {
        clock_ns: u64,
    },
}

/// What a worker hands back when the input ends.
struct WorkerResult<S> {
    sink: S,
    counts: FlowCounts,
    table: TableStats,
}

/// Runs the whole analysis of one input; finished flows go to `sink` at the end.
pub fn analyze<S: FlowSink>(
    source: &mut dyn PacketSource,
    filter: Option<&mut Filter>,
    pipeline: &Pipeline,
    sink: &mut S,
    progress: &mut dyn FnMut(Progress),
) -> Outcome {
    let (outcome, per_worker) = analyze_with(source, filter, pipeline, &Vec::new, progress);
    for record in per_worker.into_iter().flatten() {
        sink.flow(&record);
    }
    outcome
}

/// Runs the whole analysis of one input with one sink per worker, made by `new_sink` and fed in
/// that worker's thread as its flows end; returns the sinks.
pub fn analyze_with<S: FlowSink + Send>(
    source: &mut dyn PacketSource,
    filter: Option<&mut Filter>,
    pipeline: &Pipeline,
    new_sink: &(dyn Fn() -> S + Sync),
    progress: &mut dyn FnMut(Progress),
) -> (Outcome, Vec<S>) {
    analyze_monitored(source, filter, pipeline, new_sink, None, None, progress)
}

/// [`analyze_with`], also feeding every analysed packet to `monitor` (in the reader's thread, in
/// input order) for the interval statistics, and its frame to `definitions` (the patterns read
/// the frame's bytes, which only the reader has).
pub fn analyze_monitored<S: FlowSink + Send>(
    source: &mut dyn PacketSource,
    filter: Option<&mut Filter>,
    pipeline: &Pipeline,
    new_sink: &(dyn Fn() -> S + Sync),
    monitor: Option<&mut PacketIntervals>,
    definitions: Option<&mut Counter>,
    progress: &mut dyn FnMut(Progress),
) -> (Outcome, Vec<S>) {
    let workers = pipeline.workers.max(1);
    let mut flow_cfg = pipeline.flow.clone();
    flow_cfg.max_flows = flow_cfg.max_flows.div_ceil(workers).max(1);
    flow_cfg.initial_flows = flow_cfg.initial_flows.div_ceil(workers).max(1);

    let mut stats = RunStats::default();
    let mut reader = Reader { stats: &mut stats, clock_ns: 0, workers, monitor, definitions };
    let (input_error, results) = if workers == 1 {
        // One worker runs in the reader's thread: no channel, no copy of the packet.
        let mut inline =
            Inline { worker: Worker::new(flow_cfg, new_sink()), batch: [Item::EMPTY; INLINE_BATCH], len: 0 };
        let input_error = reader.read(source, filter, progress, &mut inline);
        inline.worker.packets(&inline.batch[..inline.len]);
        (input_error, vec![inline.worker.finish(reader.clock_ns)])
    } else {
        run_threads(&mut reader, source, filter, progress, &flow_cfg, pipeline.batch_len.max(1), new_sink)
    };

    let mut counts = FlowCounts::default();
    let mut table = TableStats::default();
    let mut sinks = Vec::with_capacity(results.len());
    for r in results {
        counts.add(&r.counts);
        table.lookups += r.table.lookups;
        table.probes += r.table.probes;
        table.peak_live += r.table.peak_live;
        table.inserted += r.table.inserted;
        table.evicted += r.table.evicted;
        sinks.push(r.sink);
    }
    stats.flows = counts;
    stats.finish();
    stats.set_table(table);
    (Outcome { stats, input_error }, sinks)
}

/// The reader in this thread, `reader.workers` workers in their own, batches between them.
fn run_threads<S: FlowSink + Send>(
    reader: &mut Reader,
    source: &mut dyn PacketSource,
    filter: Option<&mut Filter>,
    progress: &mut dyn FnMut(Progress),
    flow_cfg: &FlowConfig,
    batch_len: usize,
    new_sink: &(dyn Fn() -> S + Sync),
) -> (Option<CaptureError>, Vec<WorkerResult<S>>) {
    let workers = reader.workers;
    thread::scope(|scope| {
        let mut to_workers: Vec<Sender<Message>> = Vec::with_capacity(workers);
        let (recycle_tx, recycle_rx) = bounded::<Vec<Item>>(workers * (BATCHES_PER_WORKER + 1));
        let mut handles = Vec::with_capacity(workers);
        for i in 0..workers {
            let (tx, rx) = bounded::<Message>(BATCHES_PER_WORKER);
            to_workers.push(tx);
            let cfg = flow_cfg.clone();
            let recycle = recycle_tx.clone();
            let worker = thread::Builder::new()
                .name(format!("sonde-worker-{i}"))
                .spawn_scoped(scope, move || work(Worker::new(cfg, new_sink()), rx, recycle))
                .expect("spawn a worker thread");
            handles.push(worker);
        }
        for _ in 0..workers * BATCHES_PER_WORKER {
            let _ = recycle_tx.send(Vec::with_capacity(batch_len));
        }
        let mut threads = ToThreads {
            staged: Item::EMPTY,
            batches: (0..workers).map(|_| Vec::with_capacity(batch_len)).collect(),
            batch_len,
            to_workers: &to_workers,
            recycle: &recycle_rx,
        };
        let input_error = reader.read(source, filter, progress, &mut threads);
        let clock_ns = reader.clock_ns;
        for (worker, batch) in threads.batches.into_iter().enumerate() {
            if !batch.is_empty() {
                let _ = to_workers[worker].send(Message::Batch(batch));
            }
            let _ = to_workers[worker].send(Message::End { clock_ns });
        }
        drop(to_workers);
        let results = handles.into_iter().map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect();
        (input_error, results)
    })
}

/// Where the reader puts packets: it decodes each into `slot()` and hands a flow packet on with
/// `commit(worker)`; a slot not committed is overwritten by the next packet.
trait Dispatch {
    fn slot(&mut self) -> &mut Item;
    fn commit(&mut self, worker: usize);
}

/// The one worker, in the reader's thread: packets are decoded straight into its batch (no
/// copy), analysed `INLINE_BATCH` at a time.
struct Inline<S> {
    worker: Worker<S>,
    batch: [Item; INLINE_BATCH],
    len: usize,
}

impl<S: FlowSink> Dispatch for Inline<S> {
    fn slot(&mut self) -> &mut Item {
        &mut self.batch[self.len]
    }

    fn commit(&mut self, _: usize) {
        self.len += 1;
        if self.len == INLINE_BATCH {
            self.worker.packets(&self.batch);
            self.len = 0;
        }
    }
}

/// Worker threads: a packet is staged, then copied into its worker's batch, which is sent when
/// full.
struct ToThreads<'a> {
    staged: Item,
    batches: Vec<Vec<Item>>,
    batch_len: usize,
    to_workers: &'a [Sender<Message>],
    recycle: &'a Receiver<Vec<Item>>,
}

impl Dispatch for ToThreads<'_> {
    fn slot(&mut self) -> &mut Item {
        &mut self.staged
    }

    fn commit(&mut self, worker: usize) {
        let batch = &mut self.batches[worker];
        batch.push(self.staged);
        if batch.len() >= self.batch_len {
            let empty = self.recycle.recv().unwrap_or_else(|_| Vec::with_capacity(self.batch_len));
            let full = std::mem::replace(batch, empty);
            // A worker that died (panicked) drops its receiver; its join reports it.
            let _ = self.to_workers[worker].send(Message::Batch(full));
        }
    }
}

/// A flow worker: a tracker and the sink of the flows it ends.
struct Worker<S> {
    tracker: FlowTracker,
    sink: S,
    counts: FlowCounts,
}

impl<S: FlowSink> Worker<S> {
    fn new(cfg: FlowConfig, sink: S) -> Self {
        Worker { tracker: FlowTracker::new(cfg), sink, counts: FlowCounts::default() }
    }

    fn packets(&mut self, items: &[Item]) {
        for (i, item) in items.iter().enumerate() {
            if let Some(ahead) = items.get(i + PREFETCH_INDEX) {
                self.tracker.prefetch_index(&ahead.key);
            }
            if let Some(ahead) = items.get(i + PREFETCH_SLOT) {
                self.tracker.prefetch_slot(&ahead.key);
            }
            if let Some(ahead) = items.get(i + PREFETCH_STATE) {
                self.tracker.prefetch_state(&ahead.key);
            }
            let mut sink = CountingSink { inner: &mut self.sink, counts: &mut self.counts };
            self.tracker.on_flow_packet(item.ts_ns, item.clock_ns, &item.key, &item.packet, &mut sink);
        }
    }

    fn finish(mut self, clock_ns: u64) -> WorkerResult<S> {
        let mut sink = CountingSink { inner: &mut self.sink, counts: &mut self.counts };
        self.tracker.finish_at(clock_ns, &mut sink);
        WorkerResult { sink: self.sink, counts: self.counts, table: self.tracker.table_stats() }
    }
}

/// A worker thread: tracks the flows of the batches it is sent, returning each for reuse.
fn work<S: FlowSink>(mut worker: Worker<S>, rx: Receiver<Message>, recycle: Sender<Vec<Item>>) -> WorkerResult<S> {
    while let Ok(message) = rx.recv() {
        match message {
            Message::Batch(mut batch) => {
                worker.packets(&batch);
                batch.clear();
                let _ = recycle.send(batch);
            }
            Message::End { clock_ns } => return worker.finish(clock_ns),
        }
    }
    // The reader went away without an end (it panicked): report what was tracked.
    worker.finish(0)
}

/// The worker of a flow with hash `hash`, by its high 32 bits: a worker's table indexes by the
/// low bits, and picking by those (`hash % workers`) would leave a worker only keys with the
/// same low bits, crowding half of its table's home positions. A multiply, not a division.
fn worker_of(hash: u64, workers: u64) -> usize {
    (((hash >> 32) * workers) >> 32) as usize
}

struct Reader<'a> {
    stats: &'a mut RunStats,
    /// The latest packet time read so far.
    clock_ns: u64,
    workers: usize,
    monitor: Option<&'a mut PacketIntervals>,
    definitions: Option<&'a mut Counter>,
}

impl Reader<'_> {
    /// Reads the input to its end, handing each flow packet to `dispatch`.
    fn read(
        &mut self,
        source: &mut dyn PacketSource,
        mut filter: Option<&mut Filter>,
        progress: &mut dyn FnMut(Progress),
        dispatch: &mut impl Dispatch,
    ) -> Option<CaptureError> {
        let workers = self.workers as u64;
        let size = source.size_hint();
        let stats = &mut *self.stats;
        // Decoded in place, handed over by reference: one copy at most (into a batch).
        loop {
            if stats.packets.read.is_multiple_of(PROGRESS_EVERY) && stats.packets.read > 0 {
                progress(Progress { packets: stats.packets.read, position: source.position(), size });
            }
            let frame = match source.next_frame() {
                Ok(Some(f)) => f,
                Ok(None) => return None,
                Err(e) => return Some(e),
            };
            stats.count_frame(frame.link_type, frame.data.len(), frame.wire_len, frame.ts_ns);
            if let Some(f) = filter.as_deref_mut() {
                if !f.matches(frame.link_type, frame.data, frame.wire_len) {
                    stats.packets.filtered_out += 1;
                    continue;
                }
            }
            let item = dispatch.slot();
            let link = LinkType(frame.link_type);
            let decoded = match self.definitions.as_deref_mut() {
                None => sonde_wire::decode_into(link, frame.data, frame.wire_len, &mut item.packet),
                Some(counter) => decode_and_count(counter, &frame, &mut item.packet),
            };
            if let Err(unsupported) = decoded {
                stats.count_unsupported(unsupported.0 .0);
                continue;
            }
            stats.packets.analysed += 1;
            stats.count_packet(&item.packet, frame.wire_len);
            // Timers only move forward, even when the trace's timestamps step back.
            self.clock_ns = self.clock_ns.max(frame.ts_ns);
            // The trackers count only TCP and UDP flows; the rest only feed the counters.
            let key = sonde_flow::flow_key(&item.packet);
            if let Some(m) = self.monitor.as_deref_mut() {
                m.packet(frame.ts_ns, &item.packet, key.is_ok(), frame.wire_len);
            }
            if let Ok(key) = key {
                item.ts_ns = frame.ts_ns;
                item.clock_ns = self.clock_ns;
                item.key = key;
                dispatch.commit(worker_of(key.hash(), workers));
            }
        }
    }
}

/// Decodes `frame` with its layer offsets and counts it for the flow definitions. Kept out of
/// the reader's loop, which runs without definitions at its usual speed.
#[inline(never)]
fn decode_and_count(
    counter: &mut Counter,
    frame: &sonde_capture::Frame<'_>,
    out: &mut PacketSummary,
) -> Result<(), sonde_wire::UnsupportedLink> {
    let offsets = sonde_wire::decode_with_offsets(LinkType(frame.link_type), frame.data, frame.wire_len, out)?;
    counter.packet(frame.ts_ns, &Layers::of(frame.data, out, &offsets), frame.wire_len);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::worker_of;

    #[test]
    fn workers_are_picked_by_the_high_half_of_the_hash() {
        assert_eq!(worker_of(u64::MAX, 1), 0);
        assert_eq!(worker_of(u64::MAX, 3), 2);
        // Hashes that share their low half still go to every worker.
        let mut used = [0u32; 4];
        for high in 0..1000u64 {
            used[worker_of(high.wrapping_mul(0x9e37_79b9_7f4a_7c15) & !0xffff_ffff | 0x1234, 4)] += 1;
        }
        assert!(used.iter().all(|&n| n > 150), "{used:?}");
    }
}
