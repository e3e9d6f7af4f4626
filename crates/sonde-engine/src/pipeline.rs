//! The reader → workers pipeline. The reader (the calling thread) reads, filters, decodes and
//! counts; workers track flows and match flow definitions. Batches travel in bounded channels
//! and come back to be refilled (bringing the definitions' matches), so steady state allocates
//! nothing per packet.

use std::sync::Arc;
use std::thread;

use crossbeam_channel::{bounded, Receiver, Sender};
use sonde_capture::{CaptureError, Frame, PacketSource};
use sonde_define::{ChangeError, Counter, Layers, Matcher, SetChange};
use sonde_filter::Filter;
use sonde_flow::{
    AppInput, FlowConfig, FlowRecord, FlowSink, FlowTracker, IcmpInput, IcmpKey, IcmpRecord, IcmpStats, PacketKey,
    TableStats,
};
use sonde_l7::Resolved;
use sonde_stats::{FlowIntervals, PacketIntervals};
use sonde_thin::Thinner;
use sonde_wire::icmp::IcmpMessage;
use sonde_wire::{Fragment, LinkType, PacketSummary, Transport};

use crate::app::{AppConfig, AppReader, Attach};
use crate::collector::{ReaderPart, ToCollector, WorkerPart};
use crate::controls::Controls;
use crate::defined::{DefBatch, Reorder};
use crate::sink::{DefinitionsView, ReaderStatus, Sinks, WorkerSink};
use crate::stats::{AppCounts, CountingSink, FlowCounts, RunStats};
use crate::ThinningReport;

/// How the work is split.
#[derive(Debug, Clone)]
pub struct Pipeline {
    pub flow: FlowConfig,
    /// Flow-tracking workers (threads), at least 1. `max_flows` is shared out among them.
    pub workers: usize,
    /// Packets per batch handed to a worker.
    pub batch_len: usize,
    /// Thin the decoded packets before anything analyses them (`--thin natra`): a fresh
    /// thinner, which each run clones.
    pub thin: Option<Thinner>,
    /// Read application facts (`flow.app_facts` turns them on in the workers).
    pub app: AppConfig,
}

impl Default for Pipeline {
    fn default() -> Self {
        Pipeline { flow: FlowConfig::default(), workers: 1, batch_len: 512, thin: None, app: AppConfig::default() }
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

/// `frame` decoded into `packet` as the run needs: with the layers the definitions match, or the
/// payload's offset the application facts read, and the transport header's when either was
/// wanted (`Ok((layers, payload_at, transport_at))`: an ICMP message is read from it). A macro,
/// not a function, so that the reader's loop keeps its code: the same as a function, even
/// inlined, cost 36 instructions a packet (callgrind, the reference mix).
macro_rules! decode {
    ($reader:ident, $link:expr, $frame:expr, $packet:expr) => {
        match (&$reader.definitions, &$reader.app) {
            (None, None) => {
                sonde_wire::decode_into($link, $frame.data, $frame.wire_len, $packet).map(|()| (None, None, None))
            }
            (None, Some(_)) => sonde_wire::decode_with_offsets($link, $frame.data, $frame.wire_len, $packet)
                .map(|offsets| (None, offsets.payload, offsets.transport)),
            (Some(_), _) => decode_layers($frame, $packet).map(|l| {
                let (payload, transport) = (l.payload, l.l4);
                (Some(l), payload, transport)
            }),
        }
    };
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
    /// What it brings for the application readers, in its batch's `AppData`.
    app: AppRef,
    /// An ICMP packet: for the ICMP table, or an error for the flow it quotes (`key`).
    icmp: Option<IcmpItem>,
    /// The flow's (or ICMP entry's) shard: which of its worker's trackers takes it.
    shard: u32,
    /// The frame's length on the wire (the flow features' packet size).
    wire_len: u32,
}

/// An ICMP packet's item: its message for the worker of its ICMP entry, or, for an error that
/// quotes a TCP or UDP packet, a second item for the worker of that packet's flow.
#[derive(Clone, Copy)]
enum IcmpItem {
    Message(IcmpInput),
    Quoted { icmp_type: u8, code: u8 },
}

/// Where an item's payload and DNS answer are in its batch's [`AppData`].
#[derive(Clone, Copy, Default)]
struct AppRef {
    payload_at: u32,
    payload_len: u32,
    /// 1 + the answer's index; 0: none.
    resolved: u32,
}

/// The payloads and DNS answers of a batch's items.
#[derive(Default)]
struct AppData {
    payload: Vec<u8>,
    resolved: Vec<Arc<Resolved>>,
}

impl AppData {
    /// Keeps what `attach` brings for an item, and says where.
    fn keep(&mut self, attach: Attach<'_>) -> AppRef {
        let mut r =
            AppRef { payload_at: self.payload.len() as u32, payload_len: attach.payload.len() as u32, resolved: 0 };
        self.payload.extend_from_slice(attach.payload);
        if let Some(resolved) = attach.resolved {
            self.resolved.push(resolved);
            r.resolved = self.resolved.len() as u32;
        }
        r
    }

    fn input(&self, r: AppRef) -> AppInput<'_> {
        let at = r.payload_at as usize;
        AppInput {
            payload: self.payload.get(at..at + r.payload_len as usize).unwrap_or(&[]),
            resolved: r.resolved.checked_sub(1).and_then(|i| self.resolved.get(i as usize)),
        }
    }

    fn clear(&mut self) {
        self.payload.clear();
        self.resolved.clear();
    }
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
    const EMPTY: Item = Item {
        ts_ns: 0,
        clock_ns: 0,
        key: PacketKey::EMPTY,
        packet: PacketSummary::EMPTY,
        app: AppRef { payload_at: 0, payload_len: 0, resolved: 0 },
        icmp: None,
        shard: 0,
        wire_len: 0,
    };
}

/// What travels to a worker and back: flow packets, and packets for the definitions' matcher.
#[derive(Default)]
struct Batch {
    items: Vec<Item>,
    app: AppData,
    defs: DefBatch,
}

impl Batch {
    fn with_capacity(n: usize) -> Batch {
        Batch { items: Vec::with_capacity(n), app: AppData::default(), defs: DefBatch::default() }
    }

    fn is_empty(&self) -> bool {
        self.items.is_empty() && self.defs.is_empty()
    }
}

enum Message {
    Batch(Batch),
    /// The definitions changed: packets from here on are matched with this.
    Matcher(Arc<Matcher>),
    /// Packet time moved on with no packet for this worker (a live source's tick): flows idle
    /// past their timeout by `clock_ns` end now.
    Tick {
        clock_ns: u64,
    },
    /// A live run's drain: hand over what the sink gathered, with this sequence number.
    Drain {
        seq: u64,
    },
    /// Tell sides by these internal networks from here on.
    InternalNets(Arc<Vec<ipnet::IpNet>>),
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
    icmp: IcmpStats,
    owners: Option<sonde_flow::OwnerStats>,
}

/// One reader's run: where its packets come from and where what it finds goes.
pub(crate) struct ReaderSetup<'a, K: Sinks> {
    pub pipeline: &'a Pipeline,
    pub sinks: &'a K,
    /// The packet statistics (fed here, in input order), and the flow statistics' settings
    /// (each worker keeps its own).
    pub intervals: Option<&'a mut PacketIntervals>,
    pub flow_stats: Option<&'a sonde_stats::Config>,
    pub definitions: Option<&'a mut Counter>,
    pub drains: Option<ReaderDrains<<K::Worker as WorkerSink>::Part>>,
    /// With several readers each reading the whole input: this one's part.
    pub share: Option<Share>,
    /// An order-dependent anonymizer (tcpdpriv): the reader gives it every analysed packet's
    /// addresses in input order, before the packet goes on, so that every output finds them
    /// mapped whatever the threads.
    pub order: Option<sonde_anon::Anonymizer>,
}

/// One reader's part of an input that several readers each read whole ([`crate::Run::split_flows`]):
/// the flows are split by shard over every reader's workers (`readers` × `Pipeline::workers`),
/// reader `reader` analyses those of its workers and counts their packets' statistics (the
/// interval counters and histograms add up exactly), and the first also counts every frame,
/// the packets of no flow and the interval tables (which keep one stream's first keys when
/// full). Every reader reads every frame: another reader's plain TCP or UDP packet is passed
/// over by its tuple alone (`sonde_wire::flow_tuple`), the rest is decoded; with the thinner
/// (whose state depends on every packet before) or the first reader's tables, every packet is.
/// Every reader reads the DNS answers; its application reader's gate holds its own shards'
/// flows only. Reading every frame is the cost of the split, against a single reader that
/// dispatches for all workers.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Share {
    pub reader: usize,
    pub readers: usize,
}

/// The workers a reader feeds: the global indices `first..first + count` (every worker of the
/// run unless several readers split the flows).
#[derive(Debug, Clone, Copy)]
struct Mine {
    first: usize,
    count: usize,
}

impl Mine {
    /// The reader's own index of global worker `worker`, if it is one of its.
    #[inline]
    fn local(self, worker: usize) -> Option<usize> {
        worker.checked_sub(self.first).filter(|&w| w < self.count)
    }
}

/// A live run's side of one reader.
pub(crate) struct ReaderDrains<P> {
    pub reader: usize,
    pub every_ns: u64,
    pub open_flows: usize,
    pub recent_flows: usize,
    /// Build the definitions' view at each drain.
    pub view: bool,
    pub to_collector: Sender<ToCollector<P>>,
    pub controls: Option<Box<dyn Controls>>,
}

/// What a worker hands over at the end: its sink's last part and its flow statistics.
pub(crate) struct WorkerOutput<P> {
    pub part: P,
    pub flows: Option<FlowIntervals>,
}

/// Reads one input to its end through the workers; returns what was counted and each worker's
/// output.
pub(crate) fn read_input<K: Sinks>(
    source: &mut dyn PacketSource,
    filter: Option<&mut Filter>,
    setup: ReaderSetup<'_, K>,
    progress: &mut dyn FnMut(Progress),
) -> (Outcome, Vec<WorkerOutput<<K::Worker as WorkerSink>::Part>>) {
    let pipeline = setup.pipeline;
    let share = setup.share.unwrap_or(Share { reader: 0, readers: 1 });
    let (shards, mine) = shards_of(pipeline, share);
    let workers = mine.count.max(1);
    let flow_cfg = &pipeline.flow;

    let mut stats = RunStats::default();
    let (worker_drain, live) = match setup.drains {
        Some(d) => split_drains(d),
        None => (None, None),
    };
    let new_worker = |worker: usize| {
        let sink = WorkerOutputs {
            sink: setup.sinks.worker(),
            flows: setup.flow_stats.map(FlowIntervals::new),
            recent: worker_drain.as_ref().filter(|d| d.recent_flows > 0).map(|d| Recent::new(d.recent_flows)),
        };
        // `worker` is the reader's own index; a reader with no worker of its own gets one
        // without shards.
        let trackers = if worker < mine.count {
            shards.owned(mine.first + worker).map(|shard| FlowTracker::new(shards.config(flow_cfg, shard))).collect()
        } else {
            Vec::new()
        };
        Worker::new(trackers, shards, flow_cfg.app_facts, sink, worker_drain.clone())
    };
    let mut reader = Reader {
        stats: &mut stats,
        clock_ns: 0,
        next_drain_ns: if live.is_some() { 0 } else { u64::MAX },
        live,
        shards,
        mine,
        primary: share.reader == 0,
        intervals: setup.intervals,
        definitions: setup.definitions,
        thinner: pipeline.thin.clone(),
        app: pipeline.flow.app_facts.then(|| AppReader::new(pipeline.app, shards.count)),
        icmp_unquoted: 0,
        order: setup.order,
        skim: share.readers > 1
            && pipeline.thin.is_none()
            && !(share.reader == 0 && setup.flow_stats.is_some_and(|cfg| cfg.tables)),
    };
    let (input_error, results) = if workers == 1 {
        // One worker runs in the reader's thread: no channel, no copy of the packet.
        let mut inline =
            Inline { worker: new_worker(0), batch: [Item::EMPTY; INLINE_BATCH], app: AppData::default(), len: 0 };
        let input_error = reader.read(source, filter, progress, &mut inline);
        inline.flush();
        (input_error, vec![inline.worker.finish(reader.clock_ns)])
    } else {
        let threads = Threads { batch_len: pipeline.batch_len.max(1), new_worker: &new_worker };
        run_threads(&mut reader, source, filter, progress, threads)
    };
    let thinning = reader.thinner.as_ref().map(ThinningReport::new);
    let reader_icmp_unquoted = reader.icmp_unquoted;
    // Readers that split the flows each read every DNS answer: the first counts them.
    let app_reader = reader.app.as_ref().map(|a| if share.reader == 0 { a.stats } else { a.stats.without_dns() });

    let (mut counts, table, outputs) = add_up(results, pipeline.flow.app_facts);
    counts.icmp.errors_unquoted = reader_icmp_unquoted;
    stats.flows = counts;
    stats.thinning = thinning;
    stats.finish();
    stats.set_table(table);
    if let Some(app) = app_reader {
        stats.set_app_reader(app);
    }
    (Outcome { stats, input_error }, outputs)
}

/// The shards of a run and the workers of them that reader `share.reader` feeds. A reader past
/// the last shard's worker (more readers than shards) feeds one worker with no shard: it only
/// reads.
fn shards_of(pipeline: &Pipeline, share: Share) -> (Shards, Mine) {
    let per_reader = pipeline.workers.max(1);
    let shards = Shards::new(pipeline.flow.max_flows, per_reader.saturating_mul(share.readers));
    let total = shards.workers as usize;
    let first = (share.reader * per_reader).min(total);
    (shards, Mine { first, count: (first + per_reader).min(total) - first })
}

/// A live run's drains as its workers and its reader take them.
fn split_drains<P>(d: ReaderDrains<P>) -> (Option<WorkerDrain<P>>, Option<ReaderLive<P>>) {
    let worker = WorkerDrain {
        reader: d.reader,
        open_flows: d.open_flows,
        recent_flows: d.recent_flows,
        to_collector: d.to_collector.clone(),
    };
    let reader = ReaderLive {
        reader: d.reader,
        every_ns: d.every_ns.max(1),
        seq: 0,
        view: d.view,
        to_collector: d.to_collector,
        controls: d.controls,
    };
    (Some(worker), Some(reader))
}

/// The workers' counts added up, and each worker's output.
fn add_up<S: WorkerSink>(
    results: Vec<WorkerResult<WorkerOutputs<S>>>,
    app_facts: bool,
) -> (FlowCounts, TableStats, Vec<WorkerOutput<S::Part>>) {
    let mut counts = FlowCounts { app: app_facts.then(AppCounts::default), ..FlowCounts::default() };
    let mut table = TableStats::default();
    let mut outputs = Vec::with_capacity(results.len());
    for r in results {
        counts.add(&r.counts);
        table.add(&r.table);
        counts.icmp.evicted += r.icmp.evicted;
        counts.icmp.errors_matched += r.icmp.errors_matched;
        counts.icmp.errors_unmatched += r.icmp.errors_unmatched;
        if let Some(o) = r.owners {
            counts.owners.get_or_insert_with(Default::default).add(o.into());
        }
        let WorkerOutputs { mut sink, flows, .. } = r.sink;
        outputs.push(WorkerOutput { part: sink.take(), flows });
    }
    (counts, table, outputs)
}

/// What the worker threads are made with.
struct Threads<'a, S, P> {
    batch_len: usize,
    new_worker: &'a (dyn Fn(usize) -> Worker<WorkerOutputs<S>, P> + Sync),
}

/// The reader in this thread, `reader.workers` workers in their own, batches between them.
fn run_threads<S: WorkerSink>(
    reader: &mut Reader<'_, '_, S::Part>,
    source: &mut dyn PacketSource,
    filter: Option<&mut Filter>,
    progress: &mut dyn FnMut(Progress),
    t: Threads<'_, S, S::Part>,
) -> (Option<CaptureError>, Vec<WorkerResult<WorkerOutputs<S>>>) {
    let (batch_len, new_worker) = (t.batch_len, t.new_worker);
    let workers = reader.mine.count.max(1);
    thread::scope(|scope| {
        let mut to_workers: Vec<Sender<Message>> = Vec::with_capacity(workers);
        // Every batch there is fits in the recycling channel: a worker never waits to return one.
        let (recycle_tx, recycle_rx) = bounded::<Batch>(workers * (BATCHES_PER_WORKER + 1));
        let matcher = reader.definitions.as_deref().map(Counter::matcher);
        let mut handles = Vec::with_capacity(workers);
        for i in 0..workers {
            let (tx, rx) = bounded::<Message>(BATCHES_PER_WORKER);
            to_workers.push(tx);
            let recycle = recycle_tx.clone();
            let matcher = matcher.clone();
            let worker = thread::Builder::new()
                .name(format!("sonde-worker-{i}"))
                .spawn_scoped(scope, move || work(new_worker(i), matcher, rx, recycle))
                .expect("spawn a worker thread");
            handles.push(worker);
        }
        for _ in 0..workers * BATCHES_PER_WORKER {
            let _ = recycle_tx.send(Batch::with_capacity(batch_len));
        }
        let mut threads = ToThreads {
            staged: Item::EMPTY,
            batches: (0..workers).map(|_| Batch::with_capacity(batch_len)).collect(),
            batch_len,
            to_workers: &to_workers,
            recycle: &recycle_rx,
            defs: matcher.map(|matcher| ThreadDefs {
                matcher,
                reorder: Reorder::new(workers),
                next_seq: 0,
                sent: vec![0; workers],
                next_worker: 0,
            }),
            dead: false,
        };
        let input_error = reader.read(source, filter, progress, &mut threads);
        let clock_ns = reader.clock_ns;
        for (worker, to_worker) in to_workers.iter().enumerate() {
            if !threads.batches[worker].is_empty() {
                threads.send(worker);
            }
            let _ = to_worker.send(Message::End { clock_ns });
        }
        let results = handles.into_iter().map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect();
        // Every batch is back: count the matches still out of order.
        if let (Some(defs), Some(counter)) = (threads.defs.as_mut(), reader.definitions.as_deref_mut()) {
            while let Ok(mut batch) = recycle_rx.try_recv() {
                defs.reorder.receive(&mut batch.defs);
            }
            defs.reorder.finish(counter);
        }
        drop(to_workers);
        (input_error, results)
    })
}

/// Where the reader puts packets: it decodes each into `slot()` and hands a flow packet on with
/// `commit(worker)`; a slot not committed is overwritten by the next packet. With definitions,
/// every analysed packet goes to `define` first (`flow_worker`: its flow's worker, if any).
trait Dispatch {
    /// A worker died (it panicked): reading on would only lose packets; its join reports it.
    fn failed(&self) -> bool {
        false
    }
    fn slot(&mut self) -> &mut Item;
    /// Keeps what the slot's packet brings for the application readers of `worker`.
    fn attach(&mut self, worker: usize, attach: Attach<'_>);
    fn commit(&mut self, worker: usize);
    /// The clock moved to `clock_ns` without a packet: every worker analyses what it was given
    /// and expires its idle flows.
    fn tick(&mut self, clock_ns: u64);
    /// Every worker analyses what it was given, then drains its sink (a live run).
    fn drain(&mut self, seq: u64);
    /// The definitions changed (`counter` has the new set): packets from here on are matched
    /// with it, and `change` settles when the counts reach them.
    fn change(&mut self, counter: &mut Counter, change: SetChange);
    /// Every worker tells sides by `nets` after the packets it was given.
    fn internal_nets(&mut self, nets: Arc<Vec<ipnet::IpNet>>);
    fn define(
        &mut self,
        counter: &mut Counter,
        ts_ns: u64,
        wire_len: u32,
        layers: &Layers<'_>,
        flow_worker: Option<usize>,
    );
}

/// The one worker, in the reader's thread: packets are decoded straight into its batch (no
/// copy), analysed `INLINE_BATCH` at a time.
struct Inline<S: WorkerSink> {
    worker: Worker<WorkerOutputs<S>, S::Part>,
    batch: [Item; INLINE_BATCH],
    app: AppData,
    len: usize,
}

impl<S: WorkerSink> Inline<S> {
    /// Analyses the packets collected so far (before a message that must come after them).
    fn flush(&mut self) {
        self.worker.packets(&self.batch[..self.len], &self.app);
        self.app.clear();
        self.len = 0;
    }
}

impl<S: WorkerSink> Dispatch for Inline<S> {
    fn slot(&mut self) -> &mut Item {
        &mut self.batch[self.len]
    }

    fn attach(&mut self, _: usize, attach: Attach<'_>) {
        self.batch[self.len].app = self.app.keep(attach);
    }

    fn commit(&mut self, _: usize) {
        self.len += 1;
        if self.len == INLINE_BATCH {
            self.flush();
        }
    }

    fn tick(&mut self, clock_ns: u64) {
        self.flush();
        self.worker.tick(clock_ns);
    }

    fn drain(&mut self, seq: u64) {
        self.flush();
        self.worker.drain(seq);
    }

    fn change(&mut self, counter: &mut Counter, change: SetChange) {
        counter.settle(change);
    }

    fn internal_nets(&mut self, nets: Arc<Vec<ipnet::IpNet>>) {
        self.flush();
        self.worker.internal_nets(&nets);
    }

    fn define(&mut self, counter: &mut Counter, ts_ns: u64, wire_len: u32, layers: &Layers<'_>, _: Option<usize>) {
        counter.packet(ts_ns, layers, wire_len);
    }
}

/// Worker threads: a packet is staged, then copied into its worker's batch, which is sent when
/// full.
struct ToThreads<'a> {
    staged: Item,
    batches: Vec<Batch>,
    batch_len: usize,
    to_workers: &'a [Sender<Message>],
    recycle: &'a Receiver<Batch>,
    defs: Option<ThreadDefs>,
    /// A worker's channel closed: it died.
    dead: bool,
}

/// The reader's side of definitions matched in the workers.
struct ThreadDefs {
    /// The set the workers match with now.
    matcher: Arc<Matcher>,
    reorder: Reorder,
    /// Sequence numbers count the packets defined so far.
    next_seq: u64,
    /// Per worker: `next_seq` when its last batch went.
    sent: Vec<u64>,
    /// Where the next packet of no flow goes (they go round).
    next_worker: usize,
}

/// Packets between checks for a worker whose answers lag; a worker lagging more than
/// `LAG_BATCHES` of everyone's batches gets its batch however full (a worker with little
/// traffic would hold the other workers' answers back, and their memory, without end).
const LAG_CHECK: u64 = 256;
const LAG_BATCHES: u64 = 4;

impl ToThreads<'_> {
    /// Sends `worker` its batch, taking an empty one (and the answers it brings) in its place.
    fn send(&mut self, worker: usize) {
        let mut empty = self.recycle.recv().unwrap_or_else(|_| Batch::with_capacity(self.batch_len));
        let full = &mut self.batches[worker];
        if let Some(defs) = self.defs.as_mut() {
            defs.reorder.receive(&mut empty.defs);
            full.defs.address(worker, defs.next_seq);
            defs.sent[worker] = defs.next_seq;
        }
        let full = std::mem::replace(full, empty);
        // A worker that died (panicked) drops its receiver; its join reports it.
        self.dead |= self.to_workers[worker].send(Message::Batch(full)).is_err();
    }

    /// Every worker gets its batch, then `message`.
    fn send_all(&mut self, message: impl Fn() -> Message) {
        for worker in 0..self.batches.len() {
            // Packets before the message are analysed before it.
            if !self.batches[worker].is_empty() {
                self.send(worker);
            }
            self.dead |= self.to_workers[worker].send(message()).is_err();
        }
    }

    /// The workers match with the counter's set from here on.
    fn new_matcher(&mut self, counter: &Counter) {
        let Some(defs) = self.defs.as_mut() else { return };
        defs.matcher = counter.matcher();
        let matcher = Arc::clone(&defs.matcher);
        for worker in 0..self.batches.len() {
            self.send(worker);
            let _ = self.to_workers[worker].send(Message::Matcher(Arc::clone(&matcher)));
        }
    }
}

impl Dispatch for ToThreads<'_> {
    fn failed(&self) -> bool {
        self.dead
    }

    fn slot(&mut self) -> &mut Item {
        &mut self.staged
    }

    fn attach(&mut self, worker: usize, attach: Attach<'_>) {
        self.staged.app = self.batches[worker].app.keep(attach);
    }

    fn commit(&mut self, worker: usize) {
        let batch = &mut self.batches[worker];
        batch.items.push(self.staged);
        if batch.items.len() >= self.batch_len {
            self.send(worker);
        }
    }

    fn tick(&mut self, clock_ns: u64) {
        self.send_all(|| Message::Tick { clock_ns });
    }

    fn drain(&mut self, seq: u64) {
        self.send_all(|| Message::Drain { seq });
    }

    fn internal_nets(&mut self, nets: Arc<Vec<ipnet::IpNet>>) {
        self.send_all(|| Message::InternalNets(Arc::clone(&nets)));
    }

    fn change(&mut self, counter: &mut Counter, change: SetChange) {
        let Some(defs) = self.defs.as_mut() else { return counter.settle(change) };
        defs.reorder.change(defs.next_seq, change);
        self.new_matcher(counter);
    }

    fn define(
        &mut self,
        counter: &mut Counter,
        ts_ns: u64,
        wire_len: u32,
        layers: &Layers<'_>,
        flow_worker: Option<usize>,
    ) {
        let Some(defs) = self.defs.as_mut() else { return counter.packet(ts_ns, layers, wire_len) };
        let seq = defs.next_seq;
        let mut changed = false;
        while let Some(change) = counter.next_due(ts_ns) {
            defs.reorder.change(seq, change);
            changed = true;
        }
        if changed {
            // Packets before this one are matched with the set they came under.
            self.new_matcher(counter);
        }
        let defs = self.defs.as_mut().expect("checked");
        counter.observe(ts_ns);
        let workers = self.batches.len();
        let worker = flow_worker.unwrap_or_else(|| {
            defs.next_worker = (defs.next_worker + 1) % workers;
            defs.next_worker
        });
        let prefix = defs.matcher.prefix_len(layers);
        let batch = &mut self.batches[worker].defs;
        batch.push(seq, ts_ns, wire_len, layers, prefix);
        defs.next_seq += 1;
        let full = batch.is_full(self.batch_len);
        let lag_check = defs.next_seq.is_multiple_of(LAG_CHECK);
        if defs.reorder.has_fresh() {
            defs.reorder.drain(counter);
        }
        if full {
            self.send(worker);
        }
        if lag_check {
            let defs = self.defs.as_ref().expect("checked");
            let max_lag = LAG_BATCHES * (self.batch_len * workers) as u64;
            let late: Vec<usize> = (0..workers).filter(|&w| defs.next_seq - defs.sent[w] > max_lag).collect();
            for w in late {
                self.send(w);
            }
        }
    }
}

/// A flow worker: a tracker per shard it owns, and the sinks of the flows they end.
struct Worker<S, P> {
    trackers: Vec<FlowTracker>,
    shards: Shards,
    /// Flows open in all its trackers, and the most at once (the trackers peak apart).
    live: usize,
    peak_live: usize,
    sink: S,
    counts: FlowCounts,
    /// A live run's drains.
    drain: Option<WorkerDrain<P>>,
    /// The trackers' flows opened as of the last drain (each drain hands on the difference).
    opened_drained: [[u64; 4]; 2],
}

/// A worker's side of a live run's drains.
struct WorkerDrain<P> {
    reader: usize,
    open_flows: usize,
    recent_flows: usize,
    to_collector: Sender<ToCollector<P>>,
}

impl<P> Clone for WorkerDrain<P> {
    fn clone(&self) -> Self {
        WorkerDrain { to_collector: self.to_collector.clone(), ..*self }
    }
}

/// What a worker's flows go to: the run's sink, the interval statistics, and for a live view the
/// flows ended lately.
struct WorkerOutputs<S> {
    sink: S,
    flows: Option<FlowIntervals>,
    recent: Option<Recent>,
}

impl<S: FlowSink> FlowSink for WorkerOutputs<S> {
    fn flow(&mut self, record: &FlowRecord) {
        self.sink.flow(record);
        self.flows.flow(record);
        if let Some(recent) = self.recent.as_mut() {
            recent.push(record);
        }
    }
    fn rtt_sample(&mut self, sample: &sonde_flow::RttSample) {
        self.sink.rtt_sample(sample);
        self.flows.rtt_sample(sample);
    }
    /// Only the run's sink (its exporters): interval statistics count flows as they end.
    fn interim(&mut self, record: &FlowRecord) {
        self.sink.interim(record);
    }
    fn internal_nets(&mut self, nets: &[ipnet::IpNet]) {
        self.sink.internal_nets(nets);
        self.flows.internal_nets(nets);
    }
    fn icmp(&mut self, record: &IcmpRecord) {
        self.sink.icmp(record);
    }
}

/// The latest records of flows ended, at most `limit` (a live view shows them).
struct Recent {
    limit: usize,
    records: std::collections::VecDeque<FlowRecord>,
}

impl Recent {
    fn new(limit: usize) -> Recent {
        Recent { limit, records: std::collections::VecDeque::new() }
    }

    #[cold]
    fn push(&mut self, record: &FlowRecord) {
        if self.records.len() == self.limit {
            self.records.pop_front();
        }
        self.records.push_back(record.clone());
    }
}

impl<S: WorkerSink> Worker<WorkerOutputs<S>, S::Part> {
    fn new(
        trackers: Vec<FlowTracker>,
        shards: Shards,
        app_facts: bool,
        sink: WorkerOutputs<S>,
        drain: Option<WorkerDrain<S::Part>>,
    ) -> Self {
        let counts = FlowCounts { app: app_facts.then(AppCounts::default), ..FlowCounts::default() };
        Worker { trackers, shards, live: 0, peak_live: 0, sink, counts, drain, opened_drained: [[0; 4]; 2] }
    }

    fn internal_nets(&mut self, nets: &[ipnet::IpNet]) {
        for tracker in &mut self.trackers {
            tracker.set_internal_nets(nets.to_vec());
        }
        self.sink.internal_nets(nets);
    }

    /// Hands the collector what the sinks gathered since the last drain, with the open flows.
    fn drain(&mut self, seq: u64) {
        let Some(open_flows) = self.drain.as_ref().map(|d| d.open_flows) else { return };
        let open = self.open_flows(open_flows);
        // The flows opened since the last drain, by protocol and direction.
        let mut opened = [[0u64; 4]; 2];
        for tracker in &self.trackers {
            for (sum, n) in opened.iter_mut().flatten().zip(tracker.opened().iter().flatten()) {
                *sum += n;
            }
        }
        for (now, before) in opened.iter_mut().flatten().zip(self.opened_drained.iter_mut().flatten()) {
            (*now, *before) = (*now - *before, *now);
        }
        let Some(d) = self.drain.as_ref() else { return };
        let part = WorkerPart {
            reader: d.reader,
            seq,
            part: self.sink.sink.take(),
            flows: self.sink.flows.as_mut().map(FlowIntervals::take),
            open,
            ended: self.sink.recent.as_mut().map_or_else(Vec::new, |r| r.records.drain(..).collect()),
            opened,
        };
        let _ = d.to_collector.send(ToCollector::Worker(part));
    }
}

impl<S: FlowSink, P> Worker<S, P> {
    /// The tracker of `item`'s shard.
    fn tracker(&mut self, item: &Item) -> &mut FlowTracker {
        &mut self.trackers[self.shards.local(item.shard)]
    }

    /// Records of up to `limit` open flows, shard by shard.
    fn open_flows(&mut self, limit: usize) -> Vec<FlowRecord> {
        let mut open = Vec::new();
        for tracker in &mut self.trackers {
            if open.len() >= limit {
                break;
            }
            open.extend(tracker.open_flows(limit - open.len()));
        }
        open
    }

    fn packets(&mut self, items: &[Item], app: &AppData) {
        for (i, item) in items.iter().enumerate() {
            if let Some(ahead) = items.get(i + PREFETCH_INDEX) {
                self.tracker(ahead).prefetch_index(&ahead.key);
            }
            if let Some(ahead) = items.get(i + PREFETCH_SLOT) {
                self.tracker(ahead).prefetch_slot(&ahead.key);
            }
            if let Some(ahead) = items.get(i + PREFETCH_STATE) {
                self.tracker(ahead).prefetch_state(&ahead.key);
            }
            if let Some(icmp) = item.icmp {
                self.icmp(item, icmp);
                continue;
            }
            let input =
                if item.app.payload_len == 0 && item.app.resolved == 0 { AppInput::NONE } else { app.input(item.app) };
            let mut sink = CountingSink { inner: &mut self.sink, counts: &mut self.counts };
            let tracker = &mut self.trackers[self.shards.local(item.shard)];
            let before = tracker.live_flows();
            tracker.on_flow_packet(item.ts_ns, item.clock_ns, &item.key, &item.packet, item.wire_len, input, &mut sink);
            self.live = self.live + tracker.live_flows() - before;
            self.peak_live = self.peak_live.max(self.live);
        }
    }

    #[cold]
    fn icmp(&mut self, item: &Item, icmp: IcmpItem) {
        let mut sink = CountingSink { inner: &mut self.sink, counts: &mut self.counts };
        let tracker = &mut self.trackers[self.shards.local(item.shard)];
        let before = tracker.live_flows();
        match icmp {
            IcmpItem::Message(input) => tracker.on_icmp(item.ts_ns, item.clock_ns, &item.packet, input, &mut sink),
            IcmpItem::Quoted { icmp_type, code } => {
                tracker.on_icmp_error(item.ts_ns, item.clock_ns, &item.key, icmp_type, code, &mut sink);
            }
        }
        self.live = self.live + tracker.live_flows() - before;
    }

    fn tick(&mut self, clock_ns: u64) {
        let mut sink = CountingSink { inner: &mut self.sink, counts: &mut self.counts };
        for tracker in &mut self.trackers {
            tracker.advance_to(clock_ns, &mut sink);
        }
        self.live = self.trackers.iter().map(FlowTracker::live_flows).sum();
    }

    fn finish(mut self, clock_ns: u64) -> WorkerResult<S> {
        let mut sink = CountingSink { inner: &mut self.sink, counts: &mut self.counts };
        let (mut table, mut icmp) = (TableStats::default(), IcmpStats::default());
        let mut owners: Option<sonde_flow::OwnerStats> = None;
        for tracker in &mut self.trackers {
            tracker.finish_at(clock_ns, &mut sink);
            table.add(&tracker.table_stats());
            icmp.add(&tracker.icmp_stats());
            if let Some(o) = tracker.owner_stats() {
                owners.get_or_insert_with(Default::default).add(&o);
            }
        }
        table.peak_live = self.peak_live as u64;
        WorkerResult { sink: self.sink, counts: self.counts, table, icmp, owners }
    }
}

/// A worker thread: tracks the flows of the batches it is sent, returning each for reuse.
fn work<S: WorkerSink>(
    mut worker: Worker<WorkerOutputs<S>, S::Part>,
    mut matcher: Option<Arc<Matcher>>,
    rx: Receiver<Message>,
    recycle: Sender<Batch>,
) -> WorkerResult<WorkerOutputs<S>> {
    while let Ok(message) = rx.recv() {
        match message {
            Message::Batch(mut batch) => {
                worker.packets(&batch.items, &batch.app);
                batch.items.clear();
                batch.app.clear();
                if let Some(m) = &matcher {
                    batch.defs.match_all(m);
                }
                let _ = recycle.send(batch);
            }
            Message::Matcher(m) => matcher = Some(m),
            Message::Tick { clock_ns } => worker.tick(clock_ns),
            Message::Drain { seq } => worker.drain(seq),
            Message::InternalNets(nets) => worker.internal_nets(&nets),
            Message::End { clock_ns } => return worker.finish(clock_ns),
        }
    }
    // The reader went away without an end (it panicked): report what was tracked.
    worker.finish(0)
}

/// Most shards the flows are split into (fewer when `--max-flows` is smaller).
const SHARDS: u32 = 256;
/// Most workers that can have flows: one per shard.
pub const MAX_WORKERS: usize = SHARDS as usize;

/// Flows are split into a fixed number of shards by hash, each tracked by its own table with its
/// share of `--max-flows`, and a worker owns every `workers`-th shard. The shards do not depend
/// on the number of workers, so a full table evicts the same flows, and every output is the
/// same, whatever `--threads` is (a table per worker would evict by each worker's share).
#[derive(Clone, Copy, Debug)]
struct Shards {
    count: u32,
    /// Workers used: at most one per shard.
    workers: u32,
}

impl Shards {
    fn new(max_flows: usize, workers: usize) -> Shards {
        let count = SHARDS.min(u32::try_from(max_flows.max(1)).unwrap_or(u32::MAX));
        Shards { count, workers: u32::try_from(workers).unwrap_or(u32::MAX).clamp(1, count) }
    }

    /// The shard of a flow with hash `hash`, by its high 32 bits: a table indexes by the low
    /// bits, and picking by those would leave a table only keys with the same low bits,
    /// crowding half of its home positions. A multiply, not a division.
    fn of(self, hash: u64) -> u32 {
        (((hash >> 32) * u64::from(self.count)) >> 32) as u32
    }

    fn worker(self, shard: u32) -> usize {
        (shard % self.workers) as usize
    }

    /// The index of `shard` among its worker's trackers.
    fn local(self, shard: u32) -> usize {
        (shard / self.workers) as usize
    }

    /// The shards `worker` owns, in the order of its trackers.
    fn owned(self, worker: usize) -> impl Iterator<Item = u32> {
        (worker as u32..self.count).step_by(self.workers as usize)
    }

    /// `cfg` for the tracker of `shard`: its share of the flows (the shares add up to the
    /// limit exactly).
    fn config(self, cfg: &FlowConfig, shard: u32) -> FlowConfig {
        let share = |n: usize| {
            let (count, shard) = (self.count as usize, shard as usize);
            (n / count + usize::from(shard < n % count)).max(1)
        };
        FlowConfig { max_flows: share(cfg.max_flows), initial_flows: share(cfg.initial_flows), ..cfg.clone() }
    }
}

struct Reader<'a, 'c, P> {
    stats: &'a mut RunStats,
    /// The latest packet time read so far.
    clock_ns: u64,
    /// A live run drains when the clock reaches this (never otherwise).
    next_drain_ns: u64,
    live: Option<ReaderLive<P>>,
    shards: Shards,
    mine: Mine,
    /// Counts every frame, the packets of no flow (their statistics too) and the interval
    /// tables: the only reader, or the first of those that split the flows.
    primary: bool,
    intervals: Option<&'c mut PacketIntervals>,
    definitions: Option<&'c mut Counter>,
    thinner: Option<Thinner>,
    /// With application facts: what of each packet goes to the workers' readers.
    app: Option<AppReader>,
    /// ICMP errors whose quote gives no TCP or UDP packet (cut, garbled, or another protocol).
    icmp_unquoted: u64,
    /// See [`ReaderSetup::order`].
    order: Option<sonde_anon::Anonymizer>,
    /// Pass over another reader's packets by their flow tuple, without decoding them: readers
    /// that split the flows, when nothing else needs every packet decoded (the thinner, the
    /// first reader's interval tables).
    skim: bool,
}

/// What a reader that splits the flows learns from a frame's flow tuple alone, before decoding.
#[derive(Clone, Copy)]
enum Skim {
    /// A plain TCP or UDP packet of another reader's flow, which this one only reads.
    Other,
    /// A plain TCP or UDP packet to decode, with its key and shard (computed once, here).
    Known(PacketKey, u32),
    /// No tuple (not plain TCP or UDP, a fragment, a tunnel): the decoded packet tells.
    Unknown,
}

/// Skims `frame` by its flow tuple. With application facts (`dns`), DNS answers are decoded by
/// every reader (DN-Hunter's names); with Tstat's layout (`queries`), DNS queries too (their
/// times, for `req_tm`).
#[inline]
fn skim_frame(
    shards: Shards,
    mine: Mine,
    (dns, queries): (bool, bool),
    link: LinkType,
    frame: &sonde_capture::Frame<'_>,
) -> Skim {
    let Some(t) = sonde_wire::flow_tuple(link, frame.data, frame.wire_len) else { return Skim::Unknown };
    let (key, order) = sonde_flow::FlowKey::of_integers(t.protocol, t.v6, (t.src, t.src_port), (t.dst, t.dst_port));
    let hash = key.hash64();
    let shard = shards.of(hash);
    let dns_answer = dns
        && t.protocol == 17
        && (t.src_port == crate::app::DNS_PORT || queries && t.dst_port == crate::app::DNS_PORT);
    if mine.local(shards.worker(shard)).is_none() && !dns_answer {
        return Skim::Other;
    }
    Skim::Known(PacketKey::of_hashed(key, order, hash), shard)
}

impl<P> Reader<'_, '_, P> {
    /// Reads the input to its end, handing each flow packet to `dispatch`.
    fn read(
        &mut self,
        source: &mut dyn PacketSource,
        mut filter: Option<&mut Filter>,
        progress: &mut dyn FnMut(Progress),
        dispatch: &mut impl Dispatch,
    ) -> Option<CaptureError> {
        let size = source.size_hint();
        // Decoded in place, handed over by reference: one copy at most (into a batch).
        loop {
            if self.clock_ns >= self.next_drain_ns {
                if let Some(live) = self.live.as_mut() {
                    self.next_drain_ns = live.drain(
                        self.clock_ns,
                        &*self.stats,
                        self.intervals.as_deref_mut(),
                        self.definitions.as_deref_mut(),
                        dispatch,
                    );
                }
            }
            let read = self.stats.packets.read;
            if read.is_multiple_of(PROGRESS_EVERY) && read > 0 {
                progress(Progress { packets: read, position: source.position(), size });
            }
            if dispatch.failed() {
                return None;
            }
            let frame = match source.next_frame() {
                Ok(Some(f)) => f,
                Ok(None) => match source.tick() {
                    Some(now_ns) => {
                        self.clock_ns = self.clock_ns.max(now_ns);
                        tick(self.clock_ns, self.intervals.as_deref_mut(), dispatch);
                        if let Some(live) = self.live.as_mut() {
                            live.apply_edits(self.clock_ns, self.definitions.as_deref_mut(), dispatch);
                        }
                        continue;
                    }
                    None => return None,
                },
                Err(e) => return Some(e),
            };
            self.packet(&frame, filter.as_deref_mut(), dispatch);
        }
    }

    /// One frame read: counted, filtered, decoded, [thinned,] counted in the intervals and the
    /// definitions, and handed to the worker of its flow (or its ICMP entry's). Inlined into
    /// [`Reader::read`]'s loop: it is that loop's body, apart for reading.
    #[inline(always)]
    fn packet(&mut self, frame: &Frame<'_>, filter: Option<&mut Filter>, dispatch: &mut impl Dispatch) {
        let (shards, mine, primary, skim) = (self.shards, self.mine, self.primary, self.skim);
        let stats = &mut *self.stats;
        // A time no capture has (a garbage timestamp, a wrong resolution: Wireshark reads such
        // files): the frame is analysed at the last time every output holds, and counted.
        let in_range;
        let frame = match frame.ts_ns < sonde_capture::TIME_LIMIT_NS {
            true => frame,
            false => {
                stats.packets.time_out_of_range += u64::from(primary);
                in_range = Frame { ts_ns: sonde_capture::TIME_LIMIT_NS - 1, ..*frame };
                &in_range
            }
        };
        if primary {
            stats.count_frame(frame.link_type, frame.data.len(), frame.wire_len, frame.ts_ns);
        }
        if filter.is_some_and(|f| !f.matches(frame.link_type, frame.data, frame.wire_len)) {
            stats.packets.filtered_out += u64::from(primary);
            return;
        }
        let link = LinkType(frame.link_type);
        let skimmed = if skim {
            let dns = (self.app.is_some(), self.app.as_ref().is_some_and(|a| a.keeps_queries()));
            skim_frame(shards, mine, dns, link, frame)
        } else {
            Skim::Unknown
        };
        if let Skim::Other = skimmed {
            self.clock_ns = self.clock_ns.max(frame.ts_ns);
            return;
        }
        let item = dispatch.slot();
        let decoded = decode!(self, link, frame, &mut item.packet);
        let (layers, payload_at, transport_at) = match decoded {
            Ok(decoded) => decoded,
            Err(unsupported) => {
                if primary {
                    stats.count_unsupported(unsupported.0 .0);
                }
                return;
            }
        };
        // Thinned before anything counts or analyses the packet: a dropped one was only read.
        if self.thinner.as_mut().is_some_and(|t| !t.keep(frame.ts_ns, &item.packet, frame.wire_len)) {
            return;
        }
        // Addresses take their order-dependent images here, in input order.
        if let (Some(anon), Some(ip)) = (self.order.as_mut(), item.packet.ip) {
            anon.ip(ip.src);
            anon.ip(ip.dst);
        }
        // Timers only move forward, even when the trace's timestamps step back.
        self.clock_ns = self.clock_ns.max(frame.ts_ns);
        // The trackers count only TCP and UDP flows; the rest only feed the counters. A
        // skimmed packet's key and shard are the tuple's (the same: the wire crate's fuzz
        // test holds the tuple to the walk).
        let (key, shard) = match skimmed {
            Skim::Known(key, shard) => {
                debug_assert_eq!(sonde_flow::flow_key(&item.packet).ok(), Some(key));
                (Ok(key), shard)
            }
            _ => {
                let key = sonde_flow::flow_key(&item.packet);
                (key, key.as_ref().map_or(0, |key| shards.of(key.hash())))
            }
        };
        let worker = key.ok().map(|key| {
            item.ts_ns = frame.ts_ns;
            item.clock_ns = self.clock_ns;
            item.wire_len = frame.wire_len;
            item.key = key;
            item.icmp = None;
            item.shard = shard;
            mine.local(shards.worker(shard))
        });
        // A flow's packet is counted by the reader of its flow, any other by the primary:
        // readers that split the flows split this work too, and the counts add up.
        let counts = worker.map_or(primary, |w| w.is_some());
        if counts {
            stats.packets.analysed += 1;
            stats.count_packet(&item.packet, frame.wire_len);
        }
        if let Some(m) = self.intervals.as_deref_mut() {
            if counts {
                m.packet(frame.ts_ns, &item.packet, key.is_ok(), frame.wire_len);
            } else if primary {
                // The tables keep the first keys of one stream: every packet's, here.
                m.table_packet(frame.ts_ns, &item.packet);
            }
        }
        // (Definitions are counted by a single reader, which feeds every worker.)
        if let (Some(layers), Some(counter)) = (layers, self.definitions.as_deref_mut()) {
            dispatch.define(counter, frame.ts_ns, frame.wire_len, &layers, worker.flatten());
        }
        if let Some(worker) = worker {
            // Every reader reads the DNS answers, another reader's flows' too, so that its
            // own flows find the names their clients resolved; the gate is its own flows'.
            let attach = self.app.as_mut().and_then(|app| {
                let item = dispatch.slot();
                let payload = payload_bytes(frame.data, &item.packet, payload_at);
                app.watch_dns(frame.ts_ns, &item.packet, payload);
                let (Some(_), Ok(key)) = (worker, key.as_ref()) else { return None };
                Some(app.attach(frame.ts_ns, &item.packet, key, item.shard, payload))
            });
            // Another reader's flow.
            let Some(worker) = worker else { return };
            if let Some(attach) = attach {
                dispatch.attach(worker, attach);
            }
            dispatch.commit(worker);
        } else if matches!(dispatch.slot().packet.transport, Some(Transport::Icmp { .. })) {
            let quoted = dispatch_icmp(link, frame, transport_at, self.clock_ns, (shards, mine), dispatch);
            self.icmp_unquoted += u64::from(primary && !quoted);
        }
    }
}

/// Hands the ICMP packet in the slot to the worker of its ICMP entry and, for an error that
/// quotes a TCP or UDP packet, to the worker of that packet's flow. Returns false for an error
/// whose quote gives no TCP or UDP packet. ICMP is rare: the layers are found again here rather
/// than on every packet's path.
#[cold]
fn dispatch_icmp(
    link: LinkType,
    frame: &sonde_capture::Frame<'_>,
    transport_at: Option<u32>,
    clock_ns: u64,
    (shards, mine): (Shards, Mine),
    dispatch: &mut impl Dispatch,
) -> bool {
    let ts_ns = frame.ts_ns;
    let item = dispatch.slot();
    let (Some(ip), Some(Transport::Icmp { icmp_type, code })) = (item.packet.ip, item.packet.transport) else {
        return true;
    };
    if ip.fragment == Fragment::Later {
        return true;
    }
    // The message's offset, from the first decode when it found offsets (the application facts
    // or definitions on), else from a second one (ICMP is rare next to TCP and UDP).
    let at = transport_at.or_else(|| {
        let mut again = PacketSummary::EMPTY;
        sonde_wire::decode_with_offsets(link, frame.data, frame.wire_len, &mut again).ok()?.transport
    });
    let bytes = at.and_then(|at| frame.data.get(at as usize..)).unwrap_or(&[]);
    let message = IcmpMessage::parse(bytes, ip.src.is_ipv6());
    let input = match message {
        IcmpMessage::Echo { request, ident, seq } => IcmpInput::Echo { request, ident, seq },
        _ => IcmpInput::Message { icmp_type, code },
    };
    item.ts_ns = ts_ns;
    item.clock_ns = clock_ns;
    item.key = PacketKey::EMPTY;
    item.icmp = Some(IcmpItem::Message(input));
    let shard = shards.of(IcmpKey::of(ip.src, ip.dst, input).hash64());
    item.shard = shard;
    let copy = *item;
    if let Some(worker) = mine.local(shards.worker(shard)) {
        dispatch.commit(worker);
    }
    match message {
        IcmpMessage::Error(Ok(q)) => {
            let key = PacketKey::new(q.protocol, (q.src, q.src_port), (q.dst, q.dst_port));
            let item = dispatch.slot();
            *item = copy;
            item.key = key;
            item.icmp = Some(IcmpItem::Quoted { icmp_type, code });
            let shard = shards.of(key.hash());
            item.shard = shard;
            if let Some(worker) = mine.local(shards.worker(shard)) {
                dispatch.commit(worker);
            }
            true
        }
        IcmpMessage::Error(Err(_)) => false,
        _ => true,
    }
}

/// The reader's side of a live run.
struct ReaderLive<P> {
    reader: usize,
    every_ns: u64,
    /// The next drain's sequence number.
    seq: u64,
    view: bool,
    to_collector: Sender<ToCollector<P>>,
    controls: Option<Box<dyn Controls>>,
}

impl<P> ReaderLive<P> {
    /// Drains the workers and sends the reader's part; applies the edits waiting. Returns the
    /// clock of the next drain.
    #[cold]
    fn drain(
        &mut self,
        clock_ns: u64,
        stats: &RunStats,
        mut intervals: Option<&mut PacketIntervals>,
        definitions: Option<&mut Counter>,
        dispatch: &mut impl Dispatch,
    ) -> u64 {
        if let Some(m) = intervals.as_deref_mut() {
            m.tick(clock_ns);
        }
        if let Some(nets) = self.controls.as_deref_mut().and_then(|c| c.next_internal_nets()) {
            if let Some(m) = intervals.as_deref_mut() {
                m.set_internal_nets(nets.clone());
            }
            dispatch.internal_nets(Arc::new(nets));
        }
        dispatch.drain(self.seq);
        if let Some(controls) = self.controls.as_deref_mut() {
            controls.at_drain(definitions.as_deref());
        }
        let (closed, fine) = match intervals {
            Some(m) => (m.take_closed(), m.take_fine()),
            None => (Vec::new(), Vec::new()),
        };
        let any = stats.packets.read > 0;
        let part = ReaderPart {
            reader: self.reader,
            seq: self.seq,
            clock_ns,
            status: ReaderStatus {
                packets: stats.packets.read,
                wire_bytes: stats.packets.wire_bytes,
                first_ts_ns: any.then_some(stats.first_ts_ns),
            },
            closed,
            fine,
            definitions: definitions.as_deref().filter(|_| self.view).map(DefinitionsView::recent),
        };
        let _ = self.to_collector.send(ToCollector::Reader(part));
        self.seq += 1;
        self.apply_edits(clock_ns, definitions, dispatch);
        (clock_ns / self.every_ns + 1).saturating_mul(self.every_ns)
    }

    /// Applies the operator's changes waiting, at packet time `clock_ns`.
    fn apply_edits(&mut self, clock_ns: u64, mut definitions: Option<&mut Counter>, dispatch: &mut impl Dispatch) {
        let Some(controls) = self.controls.as_deref_mut() else { return };
        while let Some(edit) = controls.next_edit() {
            let result = match definitions.as_deref_mut() {
                None => Err(ChangeError::NotCounting),
                Some(counter) => {
                    let expected = edit.expected_version.unwrap_or(counter.version());
                    counter.change_now(clock_ns, expected, edit.change).map(|change| {
                        dispatch.change(counter, change);
                        counter.version()
                    })
                }
            };
            (edit.reply)(result);
        }
    }
}

/// A live source's tick: the clock moved to `clock_ns` without a packet, so intervals close and
/// idle flows end on a quiet link. (The definitions' counter hears time only from packets: its
/// counts come back from the workers in input order, and a tick has no place in that order.)
#[cold]
fn tick(clock_ns: u64, intervals: Option<&mut PacketIntervals>, dispatch: &mut impl Dispatch) {
    if let Some(m) = intervals {
        m.tick(clock_ns);
    }
    dispatch.tick(clock_ns);
}

/// The captured bytes of a TCP or UDP packet's payload (its start when the capture cut it).
fn payload_bytes<'f>(frame: &'f [u8], p: &PacketSummary, at: Option<u32>) -> &'f [u8] {
    let len = match p.transport {
        Some(sonde_wire::Transport::Tcp(t)) => t.payload_len,
        Some(sonde_wire::Transport::Udp(u)) => u.payload_len,
        _ => 0,
    };
    let Some(at) = at.filter(|_| len > 0) else { return &[] };
    let rest = frame.get(at as usize..).unwrap_or(&[]);
    &rest[..rest.len().min(len as usize)]
}

/// Decodes `frame` with its layer offsets, for the flow definitions. Kept out of the reader's
/// loop, which runs without definitions at its usual speed.
#[inline(never)]
fn decode_layers<'f>(
    frame: &sonde_capture::Frame<'f>,
    out: &mut PacketSummary,
) -> Result<Layers<'f>, sonde_wire::UnsupportedLink> {
    let offsets = sonde_wire::decode_with_offsets(LinkType(frame.link_type), frame.data, frame.wire_len, out)?;
    Ok(Layers::of(LinkType(frame.link_type), frame.data, out, &offsets))
}

#[cfg(test)]
mod tests {
    use super::{FlowConfig, Shards};

    #[test]
    fn shards_are_picked_by_the_high_half_of_the_hash() {
        let shards = Shards::new(1_000_000, 4);
        assert_eq!(shards.of(u64::MAX), 255);
        assert_eq!(Shards::new(3, 1).of(u64::MAX), 2);
        // Hashes that share their low half still go to every worker.
        let mut used = [0u32; 4];
        for high in 0..1000u64 {
            used[shards.worker(shards.of(high.wrapping_mul(0x9e37_79b9_7f4a_7c15) & !0xffff_ffff | 0x1234))] += 1;
        }
        assert!(used.iter().all(|&n| n > 150), "{used:?}");
    }

    #[test]
    fn every_shard_has_one_worker_and_the_shares_add_up() {
        for (max_flows, workers) in [(1, 3), (5, 2), (1000, 3), (1_000_001, 7), (100, 1024)] {
            let shards = Shards::new(max_flows, workers);
            let cfg = FlowConfig { max_flows, ..FlowConfig::default() };
            let mut seen = vec![0; shards.count as usize];
            let mut total = 0;
            for w in 0..shards.workers as usize {
                for (local, shard) in shards.owned(w).enumerate() {
                    assert_eq!((shards.worker(shard), shards.local(shard)), (w, local));
                    seen[shard as usize] += 1;
                    total += shards.config(&cfg, shard).max_flows;
                }
            }
            assert!(seen.iter().all(|&n| n == 1), "{max_flows} {workers}");
            assert_eq!(total, max_flows);
        }
    }
}
