//! Where a run's results go as they happen. Each worker has its own [`WorkerSink`], which gets
//! every flow record as the flow ends, in the worker's thread (so formatting runs in parallel);
//! at a drain (a live run's, every so often of packet time) and at the end it hands over what
//! it gathered as a [`Part`]. A live run's drains reach [`DrainObserver`]s whole: every
//! worker's part and the reader's, typed.

use std::collections::BTreeMap;

use sonde_define::{Counter, DefinitionTotal};
use sonde_flow::{FlowRecord, FlowSink};
use sonde_stats::{FineBin, FlowIntervals, PacketInterval};
use sonde_types::table::Rows;

/// What a worker's sink hands over: parts of one run add up (`absorb`) to what one sink would
/// have gathered.
pub trait Part: Send + Default + 'static {
    fn absorb(&mut self, other: Self);
    fn is_empty(&self) -> bool;
}

/// A worker's sink of finished flows.
pub trait WorkerSink: FlowSink + Send {
    type Part: Part;
    /// What the sink gathered since the last call (it goes on gathering).
    fn take(&mut self) -> Self::Part;
}

/// Makes each worker's sink (called once per worker, in any thread).
pub trait Sinks: Sync {
    type Worker: WorkerSink;
    fn worker(&self) -> Self::Worker;
}

impl<W: WorkerSink, F: Fn() -> W + Sync> Sinks for F {
    type Worker = W;
    fn worker(&self) -> W {
        self()
    }
}

impl Part for Vec<FlowRecord> {
    fn absorb(&mut self, other: Self) {
        self.extend(other);
    }
    fn is_empty(&self) -> bool {
        Vec::is_empty(self)
    }
}

/// The records themselves: what a library user who wants the flows in memory takes.
impl WorkerSink for Vec<FlowRecord> {
    type Part = Vec<FlowRecord>;
    fn take(&mut self) -> Vec<FlowRecord> {
        std::mem::take(self)
    }
}

/// A worker's sink and a forwarder that sees every record too (an exporter): the pair hands
/// over the sink's part.
impl<S: WorkerSink, F: FlowSink + Send> WorkerSink for (S, F) {
    type Part = S::Part;
    fn take(&mut self) -> S::Part {
        self.0.take()
    }
}

/// One reader's part of a drain, and its workers': what a live view shows.
pub struct Drain {
    /// Which reader (several: one per fanout socket).
    pub reader: usize,
    /// 0, 1, 2… per reader, in order.
    pub seq: u64,
    /// Packet time of the drain (the latest packet's, or a tick's).
    pub clock_ns: u64,
    pub status: ReaderStatus,
    /// Traffic in short bins per direction since the last drain (with [`Drains::view`]).
    ///
    /// [`Drains::view`]: crate::Drains::view
    pub fine: Vec<FineBin>,
    /// Flows still open in the workers, up to [`Drains::open_flows`] per worker.
    ///
    /// [`Drains::open_flows`]: crate::Drains::open_flows
    pub open: Vec<FlowRecord>,
    /// Flows ended since the last drain, the most recent [`Drains::recent_flows`] per worker.
    ///
    /// [`Drains::recent_flows`]: crate::Drains::recent_flows
    pub ended: Vec<FlowRecord>,
    /// The definitions and their counts so far (with a view and definitions).
    pub definitions: Option<DefinitionsView>,
}

/// What a reader has read so far.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReaderStatus {
    pub packets: u64,
    pub wire_bytes: u64,
    /// First packet time, `None` before any packet.
    pub first_ts_ns: Option<u64>,
}

/// The definitions as a live view lists them.
#[derive(Debug, Clone, Default)]
pub struct DefinitionsView {
    pub version: u64,
    pub totals: Vec<DefinitionTotal>,
    /// definitions.tsv's rows as of the drain (typed: the HTTP view serves them as JSON).
    pub counts: Rows,
    /// Per association: its latest samples (time answered, gap in ns).
    pub samples: Vec<(String, Vec<(u64, u64)>)>,
}

/// Intervals of counts a live view shows per definition ([`DefinitionsView::recent`]).
pub const LIVE_COUNT_INTERVALS: u64 = 120;
/// Rows of counts a live view shows at most, the newest intervals first.
pub const LIVE_COUNT_ROWS: usize = 20_000;

impl DefinitionsView {
    /// The whole run's view: every interval's counts.
    pub fn of(counter: &Counter) -> DefinitionsView {
        Self::with_counts(counter, counter.totals(), counter.counts_table().collect())
    }

    /// A live drain's view: the counts of the latest [`LIVE_COUNT_INTERVALS`] intervals only, at
    /// most [`LIVE_COUNT_ROWS`] rows, so that each drain's cost stays bounded however long the
    /// run, its history of changes and its definitions' FID tables.
    pub fn recent(counter: &Counter) -> DefinitionsView {
        let counts = counter.recent_counts_table(LIVE_COUNT_INTERVALS, LIVE_COUNT_ROWS).collect();
        Self::with_counts(counter, counter.listing(), counts)
    }

    fn with_counts(counter: &Counter, totals: Vec<DefinitionTotal>, counts: Rows) -> DefinitionsView {
        DefinitionsView { version: counter.version(), totals, counts, samples: counter.recent_samples() }
    }
}

/// Packets, bytes, flows opened and flows closed, by [`sonde_stats::Proto`] and
/// [`sonde_stats::Net`].
pub type Totals = [[[u64; 4]; 4]; 4];

/// What the drains brought and no observer has taken yet: with what the run holds at its end,
/// the run's whole outputs. An observer writing chunks takes it ([`Held::take_chunk`]).
pub struct Held<P> {
    /// Closed packet intervals, in the order they closed.
    pub packets: Vec<PacketInterval>,
    /// Flow statistics per interval, `None` without intervals.
    pub flows: Option<FlowIntervals>,
    /// The workers' parts.
    pub part: P,
    /// The totals of what observers took: with `totals(held)`, the run's totals so far.
    pub taken: Totals,
    /// Flows opened so far by protocol (TCP, UDP) and direction, counted as each started (the
    /// interval statistics count a flow when it ends): never taken.
    pub opened: [[u64; 4]; 2],
    /// How many of the last of `packets` this drain brought (an observer that takes the chunk
    /// goes after one that reads them).
    pub new_packets: usize,
    /// The flow statistics brought since the last drain reached the observers (counters and
    /// distributions, no tables; also in `flows`): what changed, for a feed of additive
    /// contributions (Kafka's intervals). Emptied after each drain's observers; kept only when
    /// an observer asks for it ([`DrainObserver::wants_new_flows`]).
    pub new_flows: BTreeMap<u64, sonde_stats::FlowInterval>,
    pub(crate) keep_new_flows: bool,
    cfg: Option<sonde_stats::Config>,
}

impl<P: Part> Held<P> {
    pub(crate) fn new(cfg: Option<sonde_stats::Config>) -> Held<P> {
        Held {
            packets: Vec::new(),
            flows: cfg.as_ref().map(FlowIntervals::new),
            part: P::default(),
            taken: Totals::default(),
            opened: [[0; 4]; 2],
            new_packets: 0,
            new_flows: BTreeMap::new(),
            keep_new_flows: false,
            cfg,
        }
    }

    /// Takes everything held (a chunk of the outputs), counting it in `taken`.
    pub fn take_chunk(&mut self) -> (Vec<PacketInterval>, Option<FlowIntervals>, P) {
        let totals = self.totals();
        add_totals(&mut self.taken, &totals);
        let flows = std::mem::replace(&mut self.flows, self.cfg.as_ref().map(FlowIntervals::new));
        (std::mem::take(&mut self.packets), flows, std::mem::take(&mut self.part))
    }

    /// The totals of what is held now: closed intervals' traffic and flows.
    pub fn totals(&self) -> Totals {
        let mut t = Totals::default();
        for p in &self.packets {
            for (proto, nets) in p.traffic.iter().enumerate() {
                for (net, traffic) in nets.iter().enumerate() {
                    t[proto][net][0] += traffic.packets;
                    t[proto][net][1] += traffic.bytes;
                }
            }
        }
        for f in self.flows.iter().flat_map(|f| f.intervals.values()) {
            for (proto, nets) in t.iter_mut().take(2).enumerate() {
                for (net, sums) in nets.iter_mut().enumerate() {
                    sums[2] += f.opened[proto][net];
                    sums[3] += f.closed[proto][net];
                }
            }
        }
        t
    }

    /// The run's totals so far: what was taken and what is held.
    pub fn run_totals(&self) -> Totals {
        let mut all = self.totals();
        add_totals(&mut all, &self.taken);
        all
    }

    pub(crate) fn absorb(&mut self, part: P, flows: Option<BTreeMap<u64, sonde_stats::FlowInterval>>) {
        self.part.absorb(part);
        if let (Some(mine), Some(theirs)) = (self.flows.as_mut(), flows) {
            if self.keep_new_flows {
                for (i, f) in &theirs {
                    self.new_flows.entry(*i).or_default().merge(&f.without_tables());
                }
            }
            mine.absorb(theirs);
        }
    }
}

fn add_totals(into: &mut Totals, more: &Totals) {
    for (a, b) in into.iter_mut().flatten().flatten().zip(more.iter().flatten().flatten()) {
        *a += b;
    }
}

/// Hears a live run's drains, in the collector's thread, each drain whole (every worker's part
/// and the reader's), a reader's drains in order. `held` is what all drains brought and no
/// observer took; observers are called in the order given, so one that takes a chunk goes
/// first.
pub trait DrainObserver<P>: Send {
    fn drained(&mut self, drain: &Drain, held: &mut Held<P>);

    /// Whether it reads [`Held::new_flows`]: the copy is made at each drain only then.
    fn wants_new_flows(&self) -> bool {
        false
    }

    /// The run ended: what no drain brought, before it is merged into the run's report.
    fn finished(&mut self, _rest: &Undrained<'_>) {}
}

/// What a live run's drains did not bring to the observers: the intervals the readers closed
/// at the end (or after their last drain) and the flow statistics of the flows that ended
/// after the last drain. With what the drains brought, the run's whole report.
pub struct Undrained<'a> {
    pub packets: &'a [PacketInterval],
    /// Per interval index; several maps (one per worker) may hold the same index.
    pub flows: Vec<&'a BTreeMap<u64, sonde_stats::FlowInterval>>,
}
