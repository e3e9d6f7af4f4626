//! [`Run`]: one analysis, whole — its settings checked once, its inputs read by one reader or
//! several (each with its own workers), its results pushed into sinks as they happen and
//! returned typed at the end.

use std::path::Path;
use std::time::Instant;

use sonde_anon::Anonymizer;
use sonde_capture::{CaptureError, PacketSource};
use sonde_define::Counter;
use sonde_filter::{Filter, FilterError};
use sonde_stats::{FlowIntervals, PacketIntervals, Report};

use crate::collector::{collect, ToCollector};
use crate::controls::Controls;
use crate::pipeline::{read_input, Outcome, Pipeline, Progress, ReaderDrains, ReaderSetup, Share, WorkerOutput};
use crate::resources;
use crate::sink::{DrainObserver, Held, Part, Sinks, Undrained, WorkerSink};
use crate::stats::RunStats;

/// One analysis: how packets are read and split, what is measured, and (for a live run) how
/// often what was found is handed over while it goes.
///
/// ```
/// use sonde_engine::Run;
/// use sonde_flow::FlowRecord;
/// let mut source = sonde_capture::open_bytes(vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0,
///     0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 1, 0, 0, 0]).unwrap();
/// let result = Run::new().analyze(&mut [source.as_mut()], &Vec::<FlowRecord>::new).unwrap();
/// assert_eq!(result.stats.packets.read, 0);
/// assert!(result.input_error.is_none() && result.flows.iter().all(Vec::is_empty));
/// ```
#[derive(Default)]
pub struct Run {
    pipeline: Pipeline,
    filter: Option<String>,
    intervals: Option<sonde_stats::Config>,
    definitions: Option<Counter>,
    anonymizer: Option<Anonymizer>,
    drains: Option<Drains>,
    controls: Vec<Box<dyn Controls>>,
    progress: Option<Box<dyn FnMut(Progress) + Send>>,
    split_flows: bool,
}

/// A live run's drains: every `every_ns` of packet time the workers hand over what their sinks
/// gathered (to the [`DrainObserver`]s) and the operators' changes are applied.
#[derive(Debug, Clone, Copy)]
pub struct Drains {
    pub every_ns: u64,
    /// Build what a live view shows: short traffic bins ([`Drains::fine_bin_ns`]), open flows,
    /// flows ended lately, the definitions' counts. Without, drains only move data.
    pub view: bool,
    pub fine_bin_ns: u64,
    /// Open flows each worker shows at a drain, at most.
    pub open_flows: usize,
    /// Flows ended since the last drain each worker shows, at most (the latest).
    pub recent_flows: usize,
}

/// Why a run could not start.
#[derive(Debug)]
pub enum RunError {
    /// No input was given.
    NoInput,
    /// The definitions are counted in input order by one reader.
    DefinitionsNeedOneReader {
        readers: usize,
    },
    Filter(FilterError),
    /// Readers that split the flows of one input cannot run what needs every packet in one
    /// place.
    SplitFlows(&'static str),
    /// The anonymizer cannot take the definitions (their address patterns), or an
    /// order-dependent one (tcpdpriv) cannot be fed in one fixed order.
    Anonymize(String),
    Open(CaptureError),
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::NoInput => write!(f, "no input"),
            RunError::DefinitionsNeedOneReader { readers } => write!(
                f,
                "{readers} readers cannot count flow definitions: they are counted in input order by one reader"
            ),
            RunError::Filter(e) => write!(f, "{e}"),
            RunError::SplitFlows(what) => write!(f, "readers that split the flows cannot {what}"),
            RunError::Anonymize(e) => write!(f, "{e}"),
            RunError::Open(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for RunError {}

/// What a run found.
pub struct RunResult<P> {
    /// Everything counted, every reader's added up.
    pub stats: RunStats,
    /// The damage that ended an input early (everything before it was analysed).
    pub input_error: Option<CaptureError>,
    /// The workers' sinks' parts: what the drains brought first, then each worker's last.
    pub flows: Vec<P>,
    /// The interval outputs (anonymised if the run is), with intervals on.
    pub intervals: Option<Report>,
    /// The definitions and their counts, with definitions.
    pub definitions: Option<Counter>,
    /// Frames of link types the filter cannot be compiled for (they never match).
    pub filter_uncompilable_frames: u64,
    pub timing: Timing,
}

impl<P> RunResult<P> {
    /// The result with `flows` in place of its flows, and the flows it had: for a caller that
    /// writes the parts of one kind of sink and hands on the rest.
    pub fn swap_flows<Q>(self, flows: Vec<Q>) -> (RunResult<Q>, Vec<P>) {
        let RunResult { stats, input_error, flows: had, intervals, definitions, filter_uncompilable_frames, timing } =
            self;
        (RunResult { stats, input_error, flows, intervals, definitions, filter_uncompilable_frames, timing }, had)
    }
}

/// What the run cost, read around it (never inside the analysis).
#[derive(Debug, Clone, Copy, Default)]
pub struct Timing {
    pub elapsed_s: f64,
    /// User + system CPU time of the process.
    pub cpu_s: f64,
    /// The whole resident set's high-water mark (`VmHWM`): mapped file pages included.
    pub peak_rss_bytes: u64,
    /// The peak of anonymous memory (heap, stacks), sampled ([`resources::PeakSampler`]).
    pub peak_anon_bytes: u64,
    /// The peak of mapped file and shared pages: a memory-mapped trace, a capture's ring.
    pub peak_file_bytes: u64,
    /// The mean of anonymous memory over the run's samples.
    pub mean_anon_bytes: u64,
    /// Threads that read the input (each with its workers), and flow workers in all.
    pub readers: usize,
    pub workers: usize,
}

impl Run {
    pub fn new() -> Run {
        Run::default()
    }

    /// Flow tracking, workers per reader and thinning.
    pub fn pipeline(mut self, pipeline: Pipeline) -> Run {
        self.pipeline = pipeline;
        self
    }

    /// A tcpdump filter (compiled with libpcap for each reader and link type).
    pub fn filter(mut self, expression: Option<String>) -> Run {
        self.filter = expression;
        self
    }

    /// The interval outputs: counters, distributions and tables per interval of packet time.
    pub fn intervals(mut self, cfg: Option<sonde_stats::Config>) -> Run {
        self.intervals = cfg;
        self
    }

    /// Flow definitions to count (with their scheduled changes).
    pub fn definitions(mut self, counter: Option<Counter>) -> Run {
        self.definitions = counter;
        self
    }

    /// Anonymise the addresses of the interval outputs and of the definitions given before
    /// (the flow sinks are given their own anonymizer). Refused when a definition's address
    /// pattern cannot be anonymised.
    pub fn anonymize(mut self, anonymizer: Option<Anonymizer>) -> Result<Run, RunError> {
        if let (Some(counter), Some(anon)) = (self.definitions.as_mut(), &anonymizer) {
            counter.anonymize(anon.clone()).map_err(RunError::Anonymize)?;
        }
        self.anonymizer = anonymizer;
        Ok(self)
    }

    /// Drain every so often of packet time (a live run).
    pub fn drains(mut self, drains: Option<Drains>) -> Run {
        self.drains = drains;
        self
    }

    /// Per reader: where its operators' changes come from (asked at every drain).
    pub fn controls(mut self, controls: Vec<Box<dyn Controls>>) -> Run {
        self.controls = controls;
        self
    }

    /// Hear how far the run has got (one reader only).
    pub fn progress(mut self, progress: impl FnMut(Progress) + Send + 'static) -> Run {
        self.progress = Some(Box::new(progress));
        self
    }

    /// The sources are the same input, one per reader (`sonde_capture::open_readers`: a
    /// compressed file is decompressed once for all): every reader reads it whole
    /// and analyses the flows of its own workers (their shards of the flow hash), the first
    /// also every packet's statistics (the interval outputs included) and the packets of no
    /// flow. Decoding is repeated, but no reader hands packets on for the others: a trace is
    /// read at the speed of every core. The outputs are those of one reader with as many
    /// workers. Thinning and the application reader see every packet in each reader, as in
    /// one. Not with definitions, counted in input order in one place, nor with drains.
    pub fn split_flows(mut self, split: bool) -> Run {
        self.split_flows = split;
        self
    }

    /// Whether readers may split the flows of one input ([`Run::split_flows`]).
    pub fn can_split_flows(&self) -> bool {
        self.definitions.is_none() && self.drains.is_none() && !self.order_dependent_anonymizer()
    }

    /// An anonymizer whose images depend on the order addresses are first seen (tcpdpriv): one
    /// reader gives it the analysed packets' addresses in input order, before any output asks.
    fn order_dependent_anonymizer(&self) -> bool {
        self.anonymizer.as_ref().is_some_and(|a| a.mode().order_dependent())
    }

    /// How many readers should read the trace file at `path`: one per worker when there are
    /// several, the run can split the flows, and the input is a file that can be opened again
    /// for them (a regular file, compressed or not; not a pipe); else 1. With more than one,
    /// the run is set for them: one worker each, flows split.
    pub fn readers_for_file(&mut self, path: &Path) -> usize {
        let readers = self.workers();
        let regular_file = path.metadata().is_ok_and(|m| m.is_file());
        if readers < 2 || !regular_file || !self.can_split_flows() {
            return 1;
        }
        self.pipeline.workers = 1;
        self.split_flows = true;
        readers
    }

    /// Flow-tracking workers per reader.
    pub fn workers_per_reader(mut self, workers: usize) -> Run {
        self.pipeline.workers = workers.max(1);
        self
    }

    /// Whether definitions are counted.
    pub fn counts_definitions(&self) -> bool {
        self.definitions.is_some()
    }

    /// Workers per reader.
    pub fn workers(&self) -> usize {
        self.pipeline.workers.max(1)
    }

    /// Analyses the trace at `path` (format and compression found from its content).
    pub fn analyze_file<K: Sinks>(self, path: &Path, sinks: &K) -> Result<RunResult<PartOf<K>>, RunError> {
        let mut source = sonde_capture::open(path).map_err(RunError::Open)?;
        self.analyze(&mut [source.as_mut()], sinks)
    }

    /// Analyses `sources` to their end: one, a trace or a capture; several, the sockets of a
    /// PACKET_FANOUT group, each read by its own reader and workers, results added up.
    pub fn analyze<K: Sinks>(
        self,
        sources: &mut [&mut (dyn PacketSource + Send)],
        sinks: &K,
    ) -> Result<RunResult<PartOf<K>>, RunError> {
        self.analyze_observed(sources, sinks, &mut [])
    }

    /// [`Run::analyze`], each drain handed to `observers` (in order) in a thread of its own.
    pub fn analyze_observed<K: Sinks>(
        mut self,
        sources: &mut [&mut (dyn PacketSource + Send)],
        sinks: &K,
        observers: &mut [&mut (dyn DrainObserver<PartOf<K>> + Send)],
    ) -> Result<RunResult<PartOf<K>>, RunError> {
        self.check_readers(sources.len())?;
        // Each reader its own compiled filter.
        let mut filters = Vec::with_capacity(sources.len());
        for _ in 0..sources.len() {
            filters.push(self.filter.as_deref().map(Filter::new).transpose().map_err(RunError::Filter)?);
        }
        let started = Instant::now();
        let cpu_before = resources::cpu_seconds();
        let memory = resources::PeakSampler::start();
        let workers = self.workers();
        let readers = sources.len();
        let mut controls: Vec<Option<Box<dyn Controls>>> =
            std::mem::take(&mut self.controls).into_iter().map(Some).collect();
        controls.resize_with(readers, || None);
        let mut progress = self.progress.take();
        let mut definitions = self.definitions.take();
        let (to_collector, from_readers) = crossbeam_channel::unbounded();
        let senders: Vec<_> = (0..readers).map(|_| to_collector.clone()).collect();
        drop(to_collector);
        let plan = ReaderPlan {
            pipeline: &self.pipeline,
            sinks,
            interval_cfg: self.intervals.as_ref(),
            drains: self.drains,
            split: self.split_flows && readers > 1,
            readers,
            order: self.anonymizer.clone().filter(|a| a.mode().order_dependent()),
        };
        let (readings, held) = std::thread::scope(|scope| {
            let collector = plan.drains.map(|_| {
                let held = Held::new(plan.interval_cfg.cloned());
                let observers = &mut *observers;
                std::thread::Builder::new()
                    .name("sonde-collect".into())
                    .spawn_scoped(scope, move || collect(from_readers, workers, held, observers))
                    .expect("spawn the collector thread")
            });
            let mut report = |p: Progress| {
                if let Some(progress) = progress.as_mut() {
                    progress(p)
                }
            };
            let inputs = ReaderInputs { sources, filters: &mut filters, controls, senders };
            let readings = plan.read_all(scope, inputs, definitions.as_mut(), &mut report);
            let held = match collector {
                Some(c) => c.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
                None => Held::new(plan.interval_cfg.cloned()),
            };
            (readings, held)
        });
        let timing = Timing {
            elapsed_s: started.elapsed().as_secs_f64(),
            cpu_s: resources::cpu_seconds() - cpu_before,
            peak_rss_bytes: resources::peak_rss_bytes(),
            readers,
            workers: readers * workers,
            ..Timing::default()
        };
        let memory = memory.finish();
        let timing = Timing {
            peak_anon_bytes: memory.peak.anon_bytes,
            peak_file_bytes: memory.peak.file_bytes,
            mean_anon_bytes: memory.mean_anon_bytes,
            ..timing
        };
        Ok(self.merge(readings, held, definitions, filters, timing, observers))
    }

    /// Refuses what `readers` readers cannot do; with an order-dependent anonymizer and
    /// application facts, one worker.
    fn check_readers(&mut self, readers: usize) -> Result<(), RunError> {
        if readers == 0 {
            return Err(RunError::NoInput);
        }
        if readers > 1 && self.definitions.is_some() {
            return Err(RunError::DefinitionsNeedOneReader { readers });
        }
        if self.split_flows && self.drains.is_some() {
            return Err(RunError::SplitFlows("drain (a live run)"));
        }
        if self.order_dependent_anonymizer() {
            // Its images depend on the order addresses are first seen: one reader gives the
            // analysed packets' addresses theirs, in input order.
            if readers > 1 {
                return Err(RunError::Anonymize(format!(
                    "--anonymize tcpdpriv takes one reader ({readers} given): its images follow the order addresses are first seen"
                )));
            }
            if self.pipeline.flow.app_facts {
                // The workers give images to the addresses of no packet header (DNS answers,
                // address literals in names) when their flows end: one worker, in the reader's
                // thread, does so in input order.
                self.pipeline.workers = 1;
            }
        }
        Ok(())
    }
    /// The readers' results, with what the drains brought, as one run's.
    fn merge<P: Part>(
        &self,
        readings: Vec<(Outcome, Vec<WorkerOutput<P>>, Option<PacketIntervals>)>,
        held: Held<P>,
        definitions: Option<Counter>,
        filters: Vec<Option<Filter>>,
        timing: Timing,
        observers: &mut [&mut (dyn DrainObserver<P> + Send)],
    ) -> RunResult<P> {
        let mut outcome: Option<Outcome> = None;
        let Held { packets: mut all_packets, flows: held_flows, part: held_part, new_flows, .. } = held;
        let drained_packets = all_packets.len();
        // (Nothing drained: not a part of its own, so one worker's logs are still written in turn.)
        let mut flows: Vec<P> = Some(held_part).filter(|p| !p.is_empty()).into_iter().collect();
        let mut flow_stats: Vec<FlowIntervals> = Vec::new();
        let mut packet_intervals = false;
        for (o, outputs, intervals) in readings {
            match outcome.as_mut() {
                None => outcome = Some(o),
                Some(all) => {
                    all.stats.merge(o.stats);
                    all.input_error = all.input_error.take().or(o.input_error);
                }
            }
            for output in outputs {
                flows.push(output.part);
                flow_stats.extend(output.flows);
            }
            if let Some(i) = intervals {
                packet_intervals = true;
                all_packets.extend(i.finish());
            }
        }
        if self.drains.is_some() {
            let mut flows: Vec<_> = flow_stats.iter().map(|f| &f.intervals).collect();
            flows.push(&new_flows);
            let rest = Undrained { packets: &all_packets[drained_packets..], flows };
            for observer in observers.iter_mut() {
                observer.finished(&rest);
            }
        }
        flow_stats.extend(held_flows);
        let outcome = outcome.expect("one reader at least");
        let intervals = match (&self.intervals, packet_intervals) {
            (Some(cfg), true) => {
                let mut report = Report::new(cfg, all_packets, flow_stats);
                if let Some(anon) = &self.anonymizer {
                    report.anonymize(&mut anon.clone());
                }
                Some(report)
            }
            _ => None,
        };
        RunResult {
            stats: outcome.stats,
            input_error: outcome.input_error,
            flows,
            intervals,
            definitions,
            filter_uncompilable_frames: filters.iter().flatten().map(|f| f.uncompilable_frames).sum(),
            timing,
        }
    }
}

/// The part a run's worker sinks hand over.
pub type PartOf<K> = <<K as Sinks>::Worker as WorkerSink>::Part;

/// What one reader of a run reads, one per source.
struct ReaderInputs<'s, 'd, K: Sinks> {
    sources: &'s mut [&'d mut (dyn PacketSource + Send)],
    filters: &'s mut [Option<Filter>],
    controls: Vec<Option<Box<dyn Controls>>>,
    senders: Vec<crossbeam_channel::Sender<ToCollector<PartOf<K>>>>,
}

/// How a run's readers are set up: the same for each but for its index.
struct ReaderPlan<'r, K: Sinks> {
    pipeline: &'r Pipeline,
    sinks: &'r K,
    interval_cfg: Option<&'r sonde_stats::Config>,
    drains: Option<Drains>,
    /// Readers that split the flows (more than one).
    split: bool,
    readers: usize,
    order: Option<Anonymizer>,
}

/// A reader's outcome, its workers' outputs, its packet statistics.
type Reading<P> = (Outcome, Vec<WorkerOutput<P>>, Option<PacketIntervals>);

impl<K: Sinks> ReaderPlan<'_, K> {
    /// Every reader's reading, in reader order. One source is read in this thread; readers that
    /// split the flows read the first here (it reports progress), the others in threads of their
    /// own; a live capture's readers each in its own.
    fn read_all<'scope, 'env>(
        &'scope self,
        scope: &'scope std::thread::Scope<'scope, 'env>,
        inputs: ReaderInputs<'scope, '_, K>,
        definitions: Option<&mut Counter>,
        report: &mut dyn FnMut(Progress),
    ) -> Vec<Reading<PartOf<K>>> {
        let ReaderInputs { sources, filters, mut controls, mut senders } = inputs;
        if let [source] = sources {
            let controls = controls[0].take();
            let (filter, sender) = (filters[0].as_mut(), senders.remove(0));
            return vec![self.read(0, &mut **source, filter, definitions, controls, sender, report)];
        }
        let mut readers: Vec<_> = sources
            .iter_mut()
            .zip(filters.iter_mut())
            .zip(controls.drain(..))
            .zip(senders.drain(..))
            .enumerate()
            .collect();
        let first = self.split.then(|| readers.remove(0));
        let handles: Vec<_> = readers
            .into_iter()
            .map(|(i, (((source, filter), controls), sender))| {
                let source: &mut (dyn PacketSource + Send) = &mut **source;
                std::thread::Builder::new()
                    .name(format!("sonde-reader-{i}"))
                    .spawn_scoped(scope, move || {
                        self.read(i, source, filter.as_mut(), None, controls, sender, &mut |_| {})
                    })
                    .expect("spawn a reader thread")
            })
            .collect();
        let mut readings = Vec::new();
        if let Some((_, (((source, filter), controls), sender))) = first {
            readings.push(self.read(0, &mut **source, filter.as_mut(), None, controls, sender, report));
        }
        readings.extend(handles.into_iter().map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))));
        readings
    }

    /// Reader `index`'s whole run.
    #[allow(clippy::too_many_arguments)]
    fn read(
        &self,
        index: usize,
        source: &mut (dyn PacketSource + Send),
        filter: Option<&mut Filter>,
        counter: Option<&mut Counter>,
        controls: Option<Box<dyn Controls>>,
        to_collector: crossbeam_channel::Sender<ToCollector<PartOf<K>>>,
        progress: &mut dyn FnMut(Progress),
    ) -> Reading<PartOf<K>> {
        let mut intervals = self.intervals(index);
        let drains = self.drains;
        let setup = ReaderSetup {
            pipeline: self.pipeline,
            sinks: self.sinks,
            intervals: intervals.as_mut(),
            flow_stats: self.interval_cfg,
            definitions: counter,
            drains: drains.map(|d| ReaderDrains {
                reader: index,
                every_ns: d.every_ns,
                open_flows: if d.view { d.open_flows } else { 0 },
                recent_flows: if d.view { d.recent_flows } else { 0 },
                view: d.view,
                to_collector,
                controls,
            }),
            share: self.split.then_some(Share { reader: index, readers: self.readers }),
            order: self.order.clone(),
        };
        let (outcome, outputs) = read_input(source, filter, setup, progress);
        (outcome, outputs, intervals)
    }

    /// Reader `index`'s packet statistics. Split flows: each reader counts its own flows'
    /// packets, the first also the packets of no flow and the tables of every packet.
    fn intervals(&self, index: usize) -> Option<PacketIntervals> {
        self.interval_cfg.map(|cfg| {
            let intervals = match self.split && index > 0 {
                true => PacketIntervals::new(&sonde_stats::Config { tables: false, ..cfg.clone() }),
                false => PacketIntervals::new(cfg),
            };
            match self.drains.filter(|d| d.view) {
                Some(d) => intervals.with_fine_bins(d.fine_bin_ns),
                None => intervals,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sonde_anon::{Key, Mode};

    fn demo() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/demo.pcap")
    }

    fn tcpdpriv_run() -> Run {
        let pipeline = Pipeline { workers: 2, ..Pipeline::default() };
        let anon = sonde_anon::Anonymizer::new(Mode::Tcpdpriv, &Key::from_bytes([1; 32]));
        Run::new().pipeline(pipeline).anonymize(Some(anon)).expect("no definitions")
    }

    /// tcpdpriv's images follow the order addresses are first seen: one reader feeds them.
    #[test]
    fn tcpdpriv_takes_one_reader() {
        let mut run = tcpdpriv_run();
        assert_eq!(run.readers_for_file(&demo()), 1, "a trace file is not split");
        assert_eq!(run.workers(), 2, "the workers stay");
        let (mut a, mut b) = (sonde_capture::open(&demo()).unwrap(), sonde_capture::open(&demo()).unwrap());
        let sink = || Vec::<sonde_flow::FlowRecord>::new();
        let refused = tcpdpriv_run().analyze(&mut [a.as_mut(), b.as_mut()], &sink);
        assert!(matches!(&refused, Err(RunError::Anonymize(e)) if e.contains("one reader")), "{:?}", refused.err());
        // Another mode splits as before.
        let mut cryptopan = Run::new()
            .pipeline(Pipeline { workers: 2, ..Pipeline::default() })
            .anonymize(Some(sonde_anon::Anonymizer::new(Mode::CryptoPan, &Key::from_bytes([1; 32]))))
            .unwrap();
        assert_eq!(cryptopan.readers_for_file(&demo()), 2);
    }
}
