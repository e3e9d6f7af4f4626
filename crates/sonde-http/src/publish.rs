//! Snapshots made from a run's typed results: [`LivePublisher`] hears a live run's drains (the
//! engine's collector thread) and publishes the recent part of the run; [`finished`] is the
//! whole run once it has ended. Nothing here reads the files the run wrote.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;
use serde_json::Value;
use sonde_define::{Change, ChangeError, Counter};
use sonde_engine::{DefinitionsView, Drain, DrainObserver, Edit, Held, Part, RunStats};
use sonde_flow::FlowSink;
use sonde_output::{FlowLines, Format, LineSink};
use sonde_stats::{FlowIntervals, PacketInterval, Report};

use crate::snapshot::{
    AssociationSamples, DefinitionSummary as Definition, Definitions, Flows, LiveSeries, Phase, Snapshot, Status,
    Table, TableFiles as Tables, TrafficBin, TrafficRow,
};
use crate::state::{ChangeRefused, DefinitionChange, DefinitionEditor, RunState};

/// Intervals the live view shows (its "flows active" count flows opened within them).
const WINDOW_INTERVALS: u64 = 720;
/// Flows the live table keeps per protocol, the most recently ended.
pub const RECENT_FLOWS: usize = 5_000;
/// Bins kept for a newly opened dashboard (two minutes at 10 ms).
const MAX_BINS: usize = 12_000;
/// How long an API call waits for the reader to take its change.
const EDIT_WAIT: Duration = Duration::from_secs(10);

/// What a live view is made with.
pub struct LiveSettings {
    pub input: String,
    /// Wall-clock start (metadata only).
    pub started_unix_s: f64,
    pub intervals: Option<sonde_stats::Config>,
    /// The flow logs' format: the tables show the lines as the logs have them.
    pub format: Format,
    pub anonymizer: Option<sonde_anon::Anonymizer>,
    /// The short traffic bins' length.
    pub bin_ns: u64,
    /// How many internal networks the run started with (`Status::internal_networks`).
    pub internal_networks: usize,
}

/// Publishes each whole drain's view of the run into `state`.
pub struct LivePublisher {
    settings: LiveSettings,
    state: Arc<RunState>,
    started: Instant,
    /// The flows ended lately, as lines of the flow logs (TCP, UDP), shared with the tables
    /// published: a drain makes the lines of the flows it brings, not of every flow shown.
    recent: [VecDeque<Arc<str>>; 2],
    /// Per reader: the open flows of its latest whole drain as lines (TCP, UDP), and its status.
    open: Vec<[Vec<Arc<str>>; 2]>,
    /// The flow logs' headers (TCP, UDP).
    headers: [String; 2],
    status: Vec<Option<Status>>,
    /// By bin index (readers' bins of the same time add up).
    bins: BTreeMap<u64, TrafficBin>,
    definitions: Definitions,
    /// Formats the records a drain brings as the flow logs' lines (one column plan per run).
    lines: LineSink,
}

impl LivePublisher {
    pub fn new(settings: LiveSettings, state: Arc<RunState>, readers: usize) -> LivePublisher {
        LivePublisher {
            state,
            started: Instant::now(),
            recent: Default::default(),
            open: vec![Default::default(); readers],
            headers: [false, true].map(|udp| FlowLines::header(settings.format, udp)),
            status: vec![None; readers],
            bins: BTreeMap::new(),
            definitions: Definitions::default(),
            lines: LineSink::new(settings.format).anonymized(settings.anonymizer.clone()),
            settings,
        }
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
    fn recent_intervals(
        &self,
        packets: &[PacketInterval],
        flows: Option<&FlowIntervals>,
    ) -> (crate::Intervals, Tables) {
        let (Some(cfg), Some(flows)) = (&self.settings.intervals, flows) else { return Default::default() };
        let newest = packets.iter().map(|p| p.index).max().unwrap_or(0);
        let from = newest.saturating_sub(WINDOW_INTERVALS - 1);
        let packets: Vec<PacketInterval> =
            packets.iter().filter(|p| p.index >= from && p.index <= newest).cloned().collect();
        if packets.is_empty() {
            return Default::default();
        }
        let mut window = FlowIntervals::new(cfg);
        window.absorb(flows.intervals.range(from..=newest).map(|(i, f)| (*i, f.clone())).collect());
        let mut report = Report::new(cfg, packets, vec![window]);
        if let Some(anon) = &self.settings.anonymizer {
            report.anonymize(&mut anon.clone());
        }
        (crate::intervals_from_report(&report), tables_of(&report))
    }
}

impl<P: Part> DrainObserver<P> for LivePublisher {
    fn drained(&mut self, drain: &Drain, held: &mut Held<P>) {
        // The flows ended lately, as the logs show them.
        for record in &drain.ended {
            self.lines.flow(record);
        }
        let ended = self.lines.take();
        for (udp, recent) in self.recent.iter_mut().enumerate() {
            for line in ended.lines(udp == 1) {
                if recent.len() == RECENT_FLOWS {
                    recent.pop_front();
                }
                recent.push_back(shared_line(line));
            }
        }
        for record in &drain.open {
            self.lines.flow(record);
        }
        let open = self.lines.take();
        self.open[drain.reader] = [false, true].map(|udp| open.lines(udp).map(shared_line).collect());
        let bin_ns = self.settings.bin_ns;
        for bin in &drain.fine {
            let b = self
                .bins
                .entry(bin.index)
                .or_insert_with(|| TrafficBin { start_s: (bin.index * bin_ns) as f64 / 1e9, ..TrafficBin::default() });
            for (n, t) in bin.traffic.iter().enumerate() {
                b.packets[n] += t.packets;
                b.bytes[n] += t.bytes;
            }
        }
        while self.bins.len() > MAX_BINS {
            self.bins.pop_first();
        }
        let s = drain.status;
        self.status[drain.reader] = Some(Status {
            state: Phase::Running,
            input: self.settings.input.clone(),
            started_unix_s: self.settings.started_unix_s,
            packets: s.packets,
            bytes: s.wire_bytes,
            elapsed_s: self.started.elapsed().as_secs_f64(),
            first_packet_s: s.first_ts_ns.map(|ns| ns as f64 / 1e9),
            last_packet_s: s.first_ts_ns.map(|_| drain.clock_ns as f64 / 1e9),
            internal_networks: self.settings.internal_networks,
            merged: None,
        });
        if let Some(d) = drain.definitions.as_ref().filter(|_| drain.reader == 0) {
            self.definitions = definitions_view(d);
        }
        let (intervals, tables) = self.recent_intervals(&held.packets, held.flows.as_ref());
        // The flows ended lately, then those open now.
        let table = |udp: usize| {
            let open = self.open.iter().flat_map(|o| &o[udp]);
            Table::from_lines(self.settings.format, &self.headers[udp], self.recent[udp].iter().chain(open))
        };
        let all = held.run_totals();
        let totals = sonde_stats::Proto::ALL
            .iter()
            .flat_map(|&proto| sonde_stats::Net::ALL.iter().map(move |&net| (proto, net)))
            .map(|(proto, net)| {
                let [packets, bytes, _, flows_closed] = all[proto as usize][net as usize];
                // Live, a flow counts as opened when it starts, not when it ends.
                let flows_opened = held.opened.get(proto as usize).map_or(0, |o| o[net as usize]);
                TrafficRow {
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
            summary: Value::Null,
            intervals,
            tables,
            flows: Flows { tcp: table(0), udp: table(1) },
            definitions: self.definitions.clone(),
            live: LiveSeries { bin_s: bin_ns as f64 / 1e9, bins: self.bins.values().copied().collect() },
            probes: Vec::new(),
        };
        self.state.publish(snapshot);
    }
}

/// A flow log's line (its end trimmed) as the live view keeps it.
fn shared_line(line: &[u8]) -> Arc<str> {
    String::from_utf8_lossy(line).trim_end().into()
}

/// The RMON2-style tables of `report`.
fn tables_of(report: &Report) -> Tables {
    let mut tables = Tables::default();
    for (name, table) in report.outputs() {
        let slot = match name {
            "hosts.tsv" => &mut tables.hosts,
            "matrix.tsv" => &mut tables.matrix,
            "protocols.tsv" => &mut tables.protocols,
            "top.tsv" => &mut tables.top,
            _ => continue,
        };
        *slot = Table::from(table.collect());
    }
    tables
}

/// The definitions as the API lists them (not the associations), with their counts so far.
fn definitions_view(d: &DefinitionsView) -> Definitions {
    Definitions {
        version: d.version,
        items: d
            .totals
            .iter()
            .filter(|t| !t.association)
            .map(|t| Definition {
                name: t.name.clone(),
                definition: t.text.clone(),
                version: t.version,
                retired: t.retired,
                packets: t.traffic.packets,
                bytes: t.traffic.bytes,
            })
            .collect(),
        counts: Table::from(d.counts.clone()),
        associations: d.samples.iter().map(|(name, s)| AssociationSamples::from_ns(name.clone(), s)).collect(),
    }
}

/// A finished run, as its results are in memory.
pub struct FinishedRun<'a> {
    pub input: &'a str,
    pub started_unix_s: f64,
    pub elapsed_s: f64,
    pub stats: &'a RunStats,
    /// summary.json's value.
    pub summary: Value,
    pub intervals: Option<&'a Report>,
    pub definitions: Option<&'a Counter>,
    /// The flow logs' lines, and their format.
    pub flows: &'a [FlowLines],
    pub format: Format,
    /// How many internal networks the run classified traffic with.
    pub internal_networks: usize,
}

/// The snapshot of a finished run.
pub fn finished(run: &FinishedRun<'_>) -> std::io::Result<Snapshot> {
    let any = run.stats.packets.read > 0;
    let status = Status {
        state: Phase::Finished,
        input: run.input.to_string(),
        started_unix_s: run.started_unix_s,
        packets: run.stats.packets.read,
        bytes: run.stats.packets.wire_bytes,
        elapsed_s: run.elapsed_s,
        first_packet_s: any.then_some(run.stats.first_ts_ns as f64 / 1e9),
        last_packet_s: any.then_some(run.stats.last_ts_ns as f64 / 1e9),
        internal_networks: run.internal_networks,
        merged: None,
    };
    let parts: Vec<&FlowLines> = run.flows.iter().collect();
    let [(_, tcp), (_, udp)] = FlowLines::render(run.format, &parts)?;
    let log = |bytes: Vec<u8>| {
        let text = String::from_utf8_lossy(&bytes);
        match run.format {
            Format::Tsv => Table::from_tsv(&text),
            Format::Jsonl => Table::from_jsonl(&text),
        }
    };
    Ok(Snapshot {
        status,
        summary: run.summary.clone(),
        intervals: run.intervals.map(crate::intervals_from_report).unwrap_or_default(),
        tables: run.intervals.map(tables_of).unwrap_or_default(),
        flows: Flows { tcp: log(tcp), udp: log(udp) },
        definitions: run.definitions.map(|c| definitions_view(&DefinitionsView::of(c))).unwrap_or_default(),
        live: Default::default(),
        totals: Vec::new(),
        probes: Vec::new(),
    })
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
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Err(ChangeRefused::Busy(format!(
                "the monitor did not take the change within {EDIT_WAIT:?}; it may still: read /api/definitions"
            ))),
        }
    }
}
