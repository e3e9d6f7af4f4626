//! `monitor --http`: the run published while it goes. Every `PUBLISH_NS` of packet time the
//! engine drains what the workers' sinks gathered (flow log lines, flow statistics) and what the
//! reader counted (closed intervals, fine traffic bins, the definitions); a collector thread
//! keeps it all for the final outputs and publishes a snapshot of the recent part to the HTTP
//! state. Operators' definition changes travel the other way, to the reader, which applies them
//! at the packet they reach; SIGHUP turns the definitions file into such changes.

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use sonde_define::{Change, ChangeError, Counter};
use sonde_engine::{DrainPoint, Edit, LiveHooks};
use sonde_flow::{FlowRecord, FlowSink};
use sonde_http::{
    ChangeRefused, DefinitionChange, DefinitionEditor, Definitions, Flows, Phase, RunState, Snapshot, Status, Table,
    Tables, TrafficBin,
};
use sonde_output::{FlowLines, Format, LineSink};
use sonde_stats::{FineBin, FlowInterval, FlowIntervals, PacketInterval, Report};

use crate::rotate::{ChunkShape, Rotation};

/// Packet time between two publications.
pub const PUBLISH_NS: u64 = 500_000_000;
/// The live throughput's bin: the finest resolution the dashboard offers.
pub const BIN_NS: u64 = 10_000_000;
/// Bins kept for a newly opened dashboard (two minutes at 10 ms).
const MAX_BINS: usize = 12_000;
/// Intervals the live view shows (its "flows active" count flows opened within them).
const WINDOW_INTERVALS: u64 = 720;
/// Flows the live table keeps per protocol, the most recently ended.
const RECENT_FLOWS: usize = 5_000;
/// Open flows each worker shows at a drain, at most.
pub const OPEN_FLOWS: usize = 2_000;
/// How long an API call waits for the reader to take its change.
const EDIT_WAIT: Duration = Duration::from_secs(10);

/// What a live run is published to, and where changes come from.
pub struct LiveOptions {
    /// Where snapshots go (`--http`); without, the run still drains (for SIGHUP's reloads).
    pub state: Option<Arc<RunState>>,
    pub edits: Receiver<Edit>,
    /// What SIGHUP reloads.
    pub reload: Option<Arc<Reloader>>,
    pub input: String,
    pub started_unix_s: f64,
    pub quiet: bool,
    /// `--spool`: the chunks the outputs go out in (taken by the run's collector).
    pub rotation: Option<Rotation>,
}

impl LiveOptions {
    /// Whether the run shows a live view (`--http`): without, nothing builds one.
    pub fn publishing(&self) -> bool {
        self.state.is_some()
    }
}

/// A worker's sink: its flow log lines and flow statistics.
pub type Sink = (LineSink, Option<FlowIntervals>);

/// What reaches the collector: each worker's part of a drain, and the reader's.
pub enum Part {
    /// The lines of the flows ended since the last drain, their statistics, and the worker's
    /// open flows as lines.
    Worker {
        source: usize,
        lines: FlowLines,
        flows: Option<BTreeMap<u64, FlowInterval>>,
        open: FlowLines,
    },
    Reader(ReaderPart),
}

/// The reader's part of a drain.
pub struct ReaderPart {
    /// Which reader (`monitor --readers`: one per fanout socket; else 0).
    source: usize,
    clock_ns: u64,
    status: Status,
    closed: Vec<PacketInterval>,
    fine: Vec<FineBin>,
    definitions: Option<Definitions>,
}

/// Takes a worker's part (in its thread), its open flows formatted by `shown`, and sends it to
/// the collector.
pub fn drain_sink(
    parts: &Sender<(u64, Part)>,
    source: usize,
    sink: &mut Sink,
    open: Vec<FlowRecord>,
    mut shown: LineSink,
    seq: u64,
) {
    for record in &open {
        shown.flow(record);
    }
    let (lines, flows) = (sink.0.take(), sink.1.as_mut().map(FlowIntervals::take));
    let part = Part::Worker { source, lines, flows, open: shown.take() };
    let _ = parts.send((seq, part));
}

/// Everything drained during the run: with what the run holds at its end, the whole.
#[derive(Default)]
pub struct Drained {
    pub packets: Vec<PacketInterval>,
    pub flows: Option<FlowIntervals>,
    pub lines: FlowLines,
}

/// The reader's side: sends its part of each drain, hands over the operators' changes.
pub struct Hooks {
    source: usize,
    parts: Sender<(u64, Part)>,
    edits: Receiver<Edit>,
    /// Changes a reload made, applied before the API's.
    queued: VecDeque<Edit>,
    reload: Option<Arc<Reloader>>,
    /// The reloads this reader has applied, and the internal networks one brought.
    reloads_seen: u64,
    new_nets: Option<Vec<ipnet::IpNet>>,
    input: String,
    started: Instant,
    started_unix_s: f64,
    quiet: bool,
    /// The definitions' view (their counts rendered) is built only for a live view.
    publishing: bool,
}

impl Hooks {
    pub fn new(opts: &LiveOptions, parts: Sender<(u64, Part)>, source: usize) -> Hooks {
        Hooks {
            source,
            parts,
            edits: opts.edits.clone(),
            queued: VecDeque::new(),
            reload: opts.reload.clone(),
            reloads_seen: 0,
            new_nets: None,
            input: opts.input.clone(),
            started: Instant::now(),
            started_unix_s: opts.started_unix_s,
            quiet: opts.quiet,
            publishing: opts.publishing(),
        }
    }

    /// After a SIGHUP (seen by any reader): the internal networks for the next drain, and the
    /// definitions file, read again, as changes against the set running now (the reader that
    /// counts them). A file that does not parse changes nothing (and says why).
    fn reload(&mut self, counter: Option<&Counter>) {
        let Some(reloader) = self.reload.clone() else { return };
        let (generation, nets) = reloader.poll(!self.quiet);
        if generation == self.reloads_seen {
            return;
        }
        self.reloads_seen = generation;
        self.new_nets = nets.map(|n| n.to_vec());
        let say = !self.quiet;
        let (Some(counter), Some(path)) = (counter, &reloader.definitions) else { return };
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) => return warn(say, format!("SIGHUP: reading {}: {e}; definitions unchanged", path.display())),
        };
        let wanted = match sonde_define::parse_definitions(&text) {
            Ok(defs) => defs,
            Err(e) => return warn(say, format!("SIGHUP: {}: {e}; definitions unchanged", path.display())),
        };
        let changes =
            reload_changes(counter, &wanted.iter().map(|d| (d.name.clone(), d.text.clone())).collect::<Vec<_>>());
        if changes.is_empty() {
            return warn(say, format!("SIGHUP: {} unchanged", path.display()));
        }
        for change in changes {
            let told = format!("{change:?}");
            self.queued.push_back(Edit {
                expected_version: None,
                change,
                reply: Box::new(move |result| match result {
                    Ok(v) => warn(say, format!("SIGHUP: {told}: now version {v}")),
                    Err(e) => warn(say, format!("SIGHUP: {told}: {e}")),
                }),
            });
        }
    }
}

/// What SIGHUP reloads: the definitions file and, with --internal-file, the internal networks.
/// Shared by every reader: the first to see the signal reads the files once.
pub struct Reloader {
    pub flag: &'static AtomicBool,
    pub definitions: Option<PathBuf>,
    /// Reads the internal networks again (`--internal` and `--internal-file`).
    pub internal_nets: Option<Box<dyn Fn() -> anyhow::Result<Vec<ipnet::IpNet>> + Send + Sync>>,
    /// Signals taken so far, and the networks the latest brought.
    taken: std::sync::Mutex<(u64, Option<Arc<Vec<ipnet::IpNet>>>)>,
}

impl Reloader {
    pub fn new(
        flag: &'static AtomicBool,
        definitions: Option<PathBuf>,
        internal_nets: Option<Box<dyn Fn() -> anyhow::Result<Vec<ipnet::IpNet>> + Send + Sync>>,
    ) -> Reloader {
        Reloader { flag, definitions, internal_nets, taken: Default::default() }
    }

    /// Takes a signal if one came (reading the internal networks then); returns how many have
    /// been taken and the networks of the latest (`None`: unchanged).
    fn poll(&self, say: bool) -> (u64, Option<Arc<Vec<ipnet::IpNet>>>) {
        let mut taken = self.taken.lock().unwrap_or_else(|p| p.into_inner());
        if self.flag.swap(false, Ordering::Relaxed) {
            taken.0 += 1;
            taken.1 = match self.internal_nets.as_ref().map(|read| read()) {
                Some(Ok(nets)) => {
                    warn(say, format!("SIGHUP: {} internal networks from the next drain on", nets.len()));
                    Some(Arc::new(nets))
                }
                Some(Err(e)) => {
                    warn(say, format!("SIGHUP: internal networks unchanged: {e:#}"));
                    None
                }
                None => None,
            };
        }
        taken.clone()
    }
}

fn warn(say: bool, message: String) {
    if say {
        eprintln!("sonde: {message}");
    }
}

/// The changes that turn the counter's active set into `wanted` (name, line): new and changed
/// lines in the file's order (an association after what it names), then removals.
fn reload_changes(counter: &Counter, wanted: &[(String, String)]) -> Vec<Change> {
    let active: BTreeMap<String, String> =
        counter.totals().into_iter().filter(|t| !t.retired).map(|t| (t.name, t.text)).collect();
    let mut changes = Vec::new();
    for (name, line) in wanted {
        match active.get(name) {
            None => changes.push(Change::Add(line.clone())),
            Some(old) if old.trim() != line.trim() => changes.push(Change::Replace(line.clone())),
            Some(_) => {}
        }
    }
    for name in active.keys().filter(|n| !wanted.iter().any(|(w, _)| w == *n)) {
        changes.push(Change::Remove(name.clone()));
    }
    changes
}

impl LiveHooks for Hooks {
    fn drained(&mut self, p: DrainPoint<'_>) {
        self.reload(p.definitions);
        let (closed, fine) = match p.intervals {
            Some(m) => (m.take_closed(), m.take_fine()),
            None => (Vec::new(), Vec::new()),
        };
        let s = p.stats;
        let any = s.packets.read > 0;
        let status = Status {
            state: Phase::Running,
            input: self.input.clone(),
            started_unix_s: self.started_unix_s,
            packets: s.packets.read,
            bytes: s.packets.wire_bytes,
            elapsed_s: self.started.elapsed().as_secs_f64(),
            first_packet_s: any.then_some(s.first_ts_ns as f64 / 1e9),
            last_packet_s: any.then_some(p.clock_ns as f64 / 1e9),
        };
        let definitions = p.definitions.filter(|_| self.publishing).map(definitions_view);
        let part = ReaderPart { source: self.source, clock_ns: p.clock_ns, status, closed, fine, definitions };
        let _ = self.parts.send((p.seq, Part::Reader(part)));
    }

    fn next_edit(&mut self) -> Option<Edit> {
        self.queued.pop_front().or_else(|| self.edits.try_recv().ok())
    }

    fn next_internal_nets(&mut self) -> Option<Vec<ipnet::IpNet>> {
        self.new_nets.take()
    }
}

/// The definitions as the API lists them, with their counts so far.
fn definitions_view(counter: &Counter) -> Definitions {
    let items = crate::definitions::summaries(counter).iter().map(crate::http::definition).collect();
    let mut counts = String::new();
    counter.write_tsv(&mut counts);
    let associations = counter
        .recent_samples()
        .into_iter()
        .map(|(name, s)| sonde_http::AssociationSamples::from_ns(name, &s))
        .collect();
    Definitions { version: counter.version(), items, counts: Table::from_tsv(&counts), associations }
}

/// The API's changes, handed to the reader; the answer comes back when it has applied them.
pub struct Editor {
    pub edits: Sender<Edit>,
}

impl DefinitionEditor for Editor {
    fn apply(&self, expected_version: u64, change: DefinitionChange) -> Result<u64, ChangeRefused> {
        let change = match change {
            DefinitionChange::Add(line) => Change::Add(line),
            DefinitionChange::Replace(line) => Change::Replace(line),
            DefinitionChange::Remove(name) => Change::Remove(name),
        };
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let reply = Box::new(move |r| {
            let _ = tx.send(r);
        });
        let edit = Edit { expected_version: Some(expected_version), change, reply };
        self.edits.send(edit).map_err(|_| ChangeRefused::Finished)?;
        match rx.recv_timeout(EDIT_WAIT) {
            Ok(Ok(version)) => Ok(version),
            Ok(Err(ChangeError::Conflict { current, .. })) => Err(ChangeRefused::StaleVersion { current }),
            Ok(Err(e)) => Err(ChangeRefused::Invalid(e.to_string())),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Err(ChangeRefused::Finished),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                Err(ChangeRefused::Invalid(format!("the monitor did not take the change within {EDIT_WAIT:?}")))
            }
        }
    }
}

/// The parts of a drain received so far.
#[derive(Default)]
struct Pending {
    workers: usize,
    reader: Option<ReaderPart>,
    open: FlowLines,
}

/// Gathers the drains' parts; when a drain is whole (every worker's part and the reader's),
/// publishes the recent part of the run.
pub struct Collector {
    /// Workers per reader.
    workers: usize,
    cfg: Option<sonde_stats::Config>,
    format: Format,
    anonymizer: Option<sonde_anon::Anonymizer>,
    state: Option<Arc<RunState>>,
    /// Per reader and drain not yet whole: the parts received.
    pending: BTreeMap<(usize, u64), Pending>,
    drained: Drained,
    recent: [VecDeque<Box<str>>; 2],
    /// Per reader: the open flows of its latest whole drain, and its status.
    open: Vec<FlowLines>,
    status: Vec<Option<Status>>,
    /// By bin index (readers' bins of the same time add up).
    bins: BTreeMap<u64, TrafficBin>,
    definitions: Definitions,
    rotation: Option<Rotation>,
    /// Traffic and flows of the chunks written, by protocol and direction: with what is drained
    /// since, the run's totals (Prometheus counters never go down).
    written: Totals,
}

/// Packets, bytes, flows opened and closed, by [`sonde_stats::Proto`] and [`sonde_stats::Net`].
type Totals = [[[u64; 4]; 4]; 4];

/// The totals of what `drained` holds: its closed intervals' traffic and its flows.
fn totals(drained: &Drained) -> Totals {
    let mut t = Totals::default();
    for p in &drained.packets {
        for (proto, nets) in p.traffic.iter().enumerate() {
            for (net, traffic) in nets.iter().enumerate() {
                t[proto][net][0] += traffic.packets;
                t[proto][net][1] += traffic.bytes;
            }
        }
    }
    for f in drained.flows.iter().flat_map(|f| f.intervals.values()) {
        for (proto, nets) in t.iter_mut().take(2).enumerate() {
            for (net, sums) in nets.iter_mut().enumerate() {
                sums[2] += f.opened[proto][net];
                sums[3] += f.closed[proto][net];
            }
        }
    }
    t
}

fn add_totals(into: &mut Totals, more: &Totals) {
    for (a, b) in into.iter_mut().flatten().flatten().zip(more.iter().flatten().flatten()) {
        *a += b;
    }
}

impl Collector {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        workers: usize,
        sources: usize,
        cfg: Option<sonde_stats::Config>,
        format: Format,
        anonymizer: Option<sonde_anon::Anonymizer>,
        state: Option<Arc<RunState>>,
        rotation: Option<Rotation>,
    ) -> Collector {
        let flows = cfg.as_ref().map(FlowIntervals::new);
        Collector {
            workers,
            cfg,
            format,
            anonymizer,
            state,
            pending: BTreeMap::new(),
            drained: Drained { flows, ..Drained::default() },
            recent: Default::default(),
            open: (0..sources).map(|_| FlowLines::default()).collect(),
            status: vec![None; sources],
            bins: BTreeMap::new(),
            definitions: Definitions::default(),
            rotation,
            written: Totals::default(),
        }
    }

    /// Runs until every sender is gone; returns everything drained (since the last chunk) and
    /// the rotation.
    pub fn run(mut self, parts: Receiver<(u64, Part)>) -> (Drained, Option<Rotation>) {
        while let Ok((seq, part)) = parts.recv() {
            let source = match &part {
                Part::Worker { source, .. } => *source,
                Part::Reader(r) => r.source,
            };
            let entry = self.pending.entry((source, seq)).or_default();
            match part {
                Part::Worker { lines, flows, open, .. } => {
                    entry.workers += 1;
                    entry.open.absorb(open);
                    self.absorb(lines, flows);
                }
                Part::Reader(r) => entry.reader = Some(r),
            }
            // A reader's drains complete in order.
            while let Some(key) = self.pending.range((source, 0)..=(source, u64::MAX)).next().map(|(k, _)| *k) {
                let entry = &self.pending[&key];
                if entry.workers < self.workers || entry.reader.is_none() {
                    break;
                }
                let done = self.pending.remove(&key).expect("just seen");
                self.open[source] = done.open;
                if let Some(reader) = done.reader {
                    self.publish(reader);
                }
            }
        }
        (self.drained, self.rotation)
    }

    fn absorb(&mut self, lines: FlowLines, flows: Option<BTreeMap<u64, FlowInterval>>) {
        // The live table's recent flows, kept only when there is a live view.
        let recent = if self.state.is_some() { &mut self.recent[..] } else { &mut [] };
        for (udp, recent) in recent.iter_mut().enumerate() {
            for line in lines.lines(udp == 1) {
                if recent.len() == RECENT_FLOWS {
                    recent.pop_front();
                }
                recent.push_back(String::from_utf8_lossy(line).trim_end().into());
            }
        }
        self.drained.lines.absorb(lines);
        if let (Some(mine), Some(theirs)) = (self.drained.flows.as_mut(), flows) {
            mine.absorb(theirs);
        }
    }

    fn publish(&mut self, r: ReaderPart) {
        self.drained.packets.extend(r.closed);
        if let Some(rotation) = self.rotation.as_mut() {
            let before = totals(&self.drained);
            let shape =
                ChunkShape { cfg: self.cfg.as_ref(), format: self.format, anonymizer: self.anonymizer.as_ref() };
            if rotation.after_drain(r.clock_ns, &mut self.drained, &shape) {
                add_totals(&mut self.written, &before);
            }
        }
        let Some(state) = self.state.clone() else { return };
        for bin in &r.fine {
            let b = self
                .bins
                .entry(bin.index)
                .or_insert_with(|| TrafficBin { start_s: (bin.index * BIN_NS) as f64 / 1e9, ..TrafficBin::default() });
            for (n, t) in bin.traffic.iter().enumerate() {
                b.packets[n] += t.packets;
                b.bytes[n] += t.bytes;
            }
        }
        while self.bins.len() > MAX_BINS {
            self.bins.pop_first();
        }
        self.status[r.source] = Some(r.status);
        if let Some(d) = r.definitions.filter(|_| r.source == 0) {
            self.definitions = d;
        }
        let (intervals, tables) = self.recent_intervals();
        // The flows ended lately, then those open now.
        let table = |udp: usize| {
            let open = self.open.iter().flat_map(|o| o.lines(udp == 1));
            let open = open.map(|l| std::str::from_utf8(l).unwrap_or("").trim_end());
            let lines: Vec<&str> = self.recent[udp].iter().map(|l| &**l).chain(open).collect();
            match self.format {
                Format::Tsv => {
                    Table::from_tsv(&format!("{}{}", FlowLines::header(self.format, udp == 1), lines.join("\n")))
                }
                Format::Jsonl => Table::from_jsonl(&lines.join("\n")),
            }
        };
        let mut all = totals(&self.drained);
        add_totals(&mut all, &self.written);
        let totals = sonde_stats::Proto::ALL
            .iter()
            .flat_map(|&proto| sonde_stats::Net::ALL.iter().map(move |&net| (proto, net)))
            .map(|(proto, net)| {
                let [packets, bytes, flows_opened, flows_closed] = all[proto as usize][net as usize];
                sonde_http::TrafficRow {
                    proto: proto.name().into(),
                    net: net.name().into(),
                    packets,
                    bytes,
                    flows_opened,
                    flows_closed,
                    flows_active: 0,
                }
            })
            .filter(|row| row.packets + row.flows_opened + row.flows_closed > 0)
            .collect();
        let snapshot = Snapshot {
            totals,
            status: self.status(),
            summary: serde_json::Value::Null,
            intervals,
            tables,
            flows: Flows { tcp: table(0), udp: table(1) },
            definitions: self.definitions.clone(),
            live: sonde_http::LiveSeries { bin_s: BIN_NS as f64 / 1e9, bins: self.bins.values().copied().collect() },
        };
        state.publish(snapshot);
    }

    /// Every reader's status, added up.
    fn status(&self) -> Status {
        let mut all = self.status.iter().flatten();
        let Some(first) = all.next() else { return Status::default() };
        let mut s = first.clone();
        for o in all {
            s.packets += o.packets;
            s.bytes += o.bytes;
            s.elapsed_s = s.elapsed_s.max(o.elapsed_s);
            s.first_packet_s = match (s.first_packet_s, o.first_packet_s) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            s.last_packet_s = match (s.last_packet_s, o.last_packet_s) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            };
        }
        s
    }

    /// The last `WINDOW_INTERVALS` closed intervals, packet and flow statistics merged.
    fn recent_intervals(&self) -> (sonde_http::Intervals, Tables) {
        let (Some(cfg), Some(flows)) = (&self.cfg, &self.drained.flows) else { return Default::default() };
        let newest = self.drained.packets.iter().map(|p| p.index).max().unwrap_or(0);
        let from = newest.saturating_sub(WINDOW_INTERVALS - 1);
        let packets: Vec<PacketInterval> =
            self.drained.packets.iter().filter(|p| p.index >= from && p.index <= newest).cloned().collect();
        if packets.is_empty() {
            return Default::default();
        }
        let mut window = FlowIntervals::new(cfg);
        window.absorb(flows.intervals.range(from..=newest).map(|(i, f)| (*i, f.clone())).collect());
        let mut report = Report::new(cfg, packets, vec![window]);
        if let Some(anon) = &self.anonymizer {
            report.anonymize(&mut anon.clone());
        }
        let mut tables = Tables::default();
        for (name, text) in report.render().unwrap_or_default() {
            let slot = match name {
                "hosts.tsv" => &mut tables.hosts,
                "matrix.tsv" => &mut tables.matrix,
                "protocols.tsv" => &mut tables.protocols,
                "top.tsv" => &mut tables.top,
                _ => continue,
            };
            *slot = Table::from_tsv(&text);
        }
        (sonde_http::intervals_from_report(&report), tables)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reload_adds_replaces_and_removes_by_name() {
        let defs = sonde_define::parse_definitions("web = tcp.dport == 80\ndns = udp.dport == 53\n").unwrap();
        let counter = Counter::new(defs, None, 10);
        let wanted = [
            ("web".to_string(), "web = tcp.dport == 8080".to_string()),
            ("ssh".to_string(), "ssh = tcp.dport == 22".to_string()),
        ];
        let changes = reload_changes(&counter, &wanted);
        assert_eq!(
            changes,
            [Change::Replace(wanted[0].1.clone()), Change::Add(wanted[1].1.clone()), Change::Remove("dns".to_string())]
        );
        let same: Vec<(String, String)> = counter.totals().into_iter().map(|t| (t.name, t.text)).collect();
        assert!(reload_changes(&counter, &same).is_empty());
    }
}
