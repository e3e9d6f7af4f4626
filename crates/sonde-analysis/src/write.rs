//! [`Analysis::write`]: a run into its output directory: every worker's sinks and the live
//! run's observers wired from the plan, each output finished, the summary assembled.

use std::sync::Arc;

use anyhow::{Context, Result};
use sonde_arrow::arrow::record_batch::RecordBatch;
use sonde_arrow::{ArrowSink, FlowBatches, TypedFormat};
use sonde_capture::PacketSource;
use sonde_define::Counter;
use sonde_engine::{Controls, DrainObserver, Drains, Progress, RunResult};
use sonde_http::RunState;
use sonde_output::summary::{Monitoring, SortSummary, Summary};
use sonde_output::{FlowLines, Format, LineSink, OutputDir, OutputFile, SortBuffer, Spilled};
use sonde_spool::Rotation;
use sonde_stats::Report;

use crate::analysis::{summarize, Analysis, Files};
use crate::{export, store};

/// Packet time between two drains of a live run.
const DRAIN_NS: u64 = 500_000_000;
/// The live throughput's bin: the finest resolution the dashboard offers.
const BIN_NS: u64 = 10_000_000;
/// Open flows each worker shows at a drain, at most.
const OPEN_FLOWS: usize = 2_000;

/// What a live run is published to, and where changes come from.
pub struct LiveOptions {
    /// Where snapshots go (`--http`); without, the run still drains (for SIGHUP's reloads).
    pub state: Option<Arc<RunState>>,
    /// Per reader: its operators' changes.
    pub controls: Vec<Box<dyn Controls>>,
    pub input: String,
    pub started_unix_s: f64,
    /// `--spool`: the chunks the outputs go out in.
    pub rotation: Option<Rotation>,
}

/// A run whose outputs are written but for the summary.
pub struct Finished {
    /// The caller may complete it (its optional parts) before writing it.
    pub report: Summary,
    /// The intervals as written (anonymised if the run was), for `--http`.
    pub intervals: Option<Report>,
    pub definitions: Option<Counter>,
    /// The flow logs' lines, for `--http`.
    pub flows: Vec<FlowLines>,
    pub format: Format,
    /// How many internal networks the run classified traffic with.
    pub internal_networks: usize,
    /// `--spool`: where the chunks went; the outputs in the directory are the last one.
    pub rotation: Option<Rotation>,
    out: OutputDir,
}

impl Finished {
    /// The output directory, for the outputs the caller adds (`capture.tsv`).
    pub fn out(&self) -> &OutputDir {
        &self.out
    }

    /// Writes summary.json (last); then the errors of every output that could not be written,
    /// none if all were.
    pub fn write_summary(&self) -> Vec<String> {
        let written = self.out.write_run_summary(&self.report);
        self.report.output_errors.iter().cloned().chain(written.err().map(|e| e.to_string())).collect()
    }
}

/// The outputs written (by name) and those that could not be (their errors): an output that
/// cannot be written (a full disk) is named and the others are still attempted, summary.json
/// last (docs/faults.md).
#[derive(Default)]
struct Written {
    names: Vec<String>,
    failed: Vec<String>,
}

impl Written {
    fn note(&mut self, name: String, result: Result<(), String>) {
        match result {
            Ok(()) => self.names.push(name),
            Err(e) => self.failed.push(e),
        }
    }

    /// Writes each table as its file in `typed`.
    fn typed(&mut self, out: &OutputDir, typed: TypedFormat, tables: Vec<(OutputFile, RecordBatch)>) {
        for (file, table) in tables.into_iter().filter(|(file, _)| out.outputs().wants(*file)) {
            let name = typed.file_name(file);
            let written =
                sonde_arrow::write_batches(&out.path(&name), typed, &table.schema(), std::slice::from_ref(&table));
            self.note(name, written.map_err(|e| format!("{e:#}")));
        }
    }

    /// Writes each text file.
    fn text(&mut self, out: &OutputDir, files: Vec<(OutputFile, String)>) {
        for (file, written) in out.write_each(files) {
            self.note(file.name().to_string(), written.map_err(|e| e.to_string()));
        }
    }
}

/// The exporters a run feeds, started before its first packet.
struct Exports<'a> {
    ipfix: Option<sonde_ipfix::Exporter>,
    kafka: Option<&'a sonde_kafka::Exporter>,
    anonymizer: Option<sonde_anon::Anonymizer>,
}

impl Exports<'_> {
    fn ipfix_feed(&self) -> Option<export::IpfixFeed> {
        self.ipfix.as_ref().map(|e| export::IpfixFeed { sink: e.sink(), anon: self.anonymizer.clone() })
    }

    /// Each worker enqueues its flows itself: the producer is shared and never waits.
    fn kafka_feed(&self) -> Option<sonde_kafka::KafkaSink> {
        self.kafka.map(|k| k.sink(self.anonymizer.clone()))
    }
}

/// A live run's observers of each drain, and where its exporters' counters are shown.
struct LiveRun<'k> {
    /// `/metrics` of a live run reads the exporters' counters as they move.
    state: Option<Arc<RunState>>,
    /// The intervals to Kafka as they close; before the rotation, which takes the intervals held.
    kafka: Option<export::IntervalPublisher<'k>>,
    rotation: Option<Rotation>,
    publisher: Option<sonde_http::LivePublisher>,
}

impl LiveRun<'_> {
    fn observers(&mut self) -> Vec<&mut (dyn DrainObserver<FlowLines> + Send)> {
        let mut observers: Vec<&mut (dyn DrainObserver<FlowLines> + Send)> = Vec::new();
        if let Some(k) = self.kafka.as_mut() {
            observers.push(k);
        }
        if let Some(r) = self.rotation.as_mut() {
            observers.push(r);
        }
        if let Some(p) = self.publisher.as_mut() {
            observers.push(p);
        }
        observers
    }
}

impl Analysis {
    /// Analyses `sources` to their end (one: a trace or a capture; several: the sockets of a
    /// PACKET_FANOUT group) and writes every output in the directory [`Analysis::create_outputs`]
    /// made, but the summary ([`Finished::write_summary`]). `progress` sees the run go.
    pub fn write(
        mut self,
        sources: &mut [&mut (dyn PacketSource + Send)],
        input: (&str, Option<&str>),
        live: Option<LiveOptions>,
        progress: Option<Box<dyn FnMut(Progress) + Send>>,
    ) -> Result<Finished> {
        let input = self.input(sources, input);
        let Files { out, kafka } = self.files.take().context("the output directory is not made")?;
        let mut live_run = self.live_run(live, kafka.as_ref(), sources.len());
        if let Some(progress) = progress {
            self.run = std::mem::take(&mut self.run).progress(progress);
        }
        // Started before the first packet: a file that cannot be created stops the run now.
        let ipfix = match &self.ipfix {
            Some((target, cfg, options)) => {
                Some(sonde_ipfix::Exporter::start_with(target, cfg.clone(), *options).map_err(anyhow::Error::msg)?)
            }
            None => None,
        };
        if let Some(state) = &live_run.state {
            ipfix.iter().for_each(|e| state.add_export_counters(export::ipfix_metrics(e.live())));
            kafka.iter().for_each(|k| state.add_export_counters(export::kafka_metrics(k)));
        }
        let exports = Exports { ipfix, kafka: kafka.as_ref(), anonymizer: self.anonymizer() };
        // Each worker's sink and a live run's collector hold a share of the budget.
        let holders = sources.len() * self.run.workers() + 1;
        let sort = SortBuffer { dir: out.dir().to_path_buf(), bytes: (self.config.sort_buffer << 20) / holders };
        let sort = Arc::new(sort);
        let mut written = Written::default();
        let run = std::mem::take(&mut self.run);
        let (mut result, mut spilled) = match self.typed {
            None => {
                let result = self.write_text(run, sources, &out, &exports, &sort, &mut live_run, &mut written)?;
                (result, Spilled::default())
            }
            Some(typed) => {
                anyhow::ensure!(
                    live_run.observers().is_empty(),
                    "--format {} writes its files when the run ends: --spool and --http take --format tsv or jsonl",
                    typed.extension()
                );
                self.write_typed(run, typed, sources, &out, &exports, &sort, &mut written)?
            }
        };
        written.names.push(OutputFile::Summary.name().to_string());
        // Every worker's sink is done: what is queued goes out, then the counters come back.
        let Exports { ipfix, .. } = exports;
        let target = self.ipfix.as_ref().map(|(t, ..)| t.to_string()).unwrap_or_default();
        let ipfix = ipfix.map(|e| export::ipfix_summary(&target, self.config.ipfix_domain, e.finish()));
        let live_published = live_run.kafka.take().is_some();
        let rotation = live_run.rotation.take();
        drop(live_run);
        let kafka = kafka.map(|exporter| export::finish_kafka(exporter, result.intervals.as_ref(), live_published));
        let monitoring = self.write_intervals(&out, &result, &mut written);
        self.write_definitions(&out, &result, &mut written);
        result.flows.iter().for_each(|f| spilled.add(f.spilled()));
        let flows = std::mem::take(&mut result.flows);
        let intervals = result.intervals.take();
        let (mut report, definitions) = summarize(&self.config, self.anonymization.take(), input, result, monitoring);
        report.probe = self.probe.take();
        // Bytes of the files written (summary.json, written last, aside).
        report.output_bytes =
            written.names.iter().filter_map(|name| std::fs::metadata(out.path(name)).ok()).map(|m| m.len()).sum();
        report.outputs = written.names;
        report.output_errors = written.failed;
        report.sorted_runs = SortSummary::of(&spilled);
        report.ipfix = ipfix;
        report.kafka = kafka;
        Ok(Finished {
            report,
            intervals,
            definitions,
            flows,
            format: self.format,
            internal_networks: self.internal_networks,
            rotation,
            out,
        })
    }

    /// A live run's drains, controls and observers (none for a trace's).
    fn live_run<'k>(
        &mut self,
        live: Option<LiveOptions>,
        kafka: Option<&'k sonde_kafka::Exporter>,
        readers: usize,
    ) -> LiveRun<'k> {
        let Some(live) = live else { return LiveRun { state: None, kafka: None, rotation: None, publisher: None } };
        let every_ns = live.rotation.as_ref().map_or(DRAIN_NS, |r| r.span_ns().min(DRAIN_NS));
        let drains = Drains {
            every_ns,
            view: live.state.is_some(),
            fine_bin_ns: BIN_NS,
            open_flows: OPEN_FLOWS,
            recent_flows: sonde_http::RECENT_FLOWS,
        };
        self.run = std::mem::take(&mut self.run).drains(Some(drains)).controls(live.controls);
        // A live run's intervals go to Kafka as they close.
        let kafka = kafka.zip(self.interval_cfg.as_ref()).and_then(|(exporter, cfg)| {
            let config = exporter.config();
            let wanted = config.interval_topic.is_some() || config.histogram_topic.is_some();
            wanted.then(|| export::IntervalPublisher {
                exporter,
                live: sonde_kafka::LiveIntervals::new(cfg.interval_ns, readers),
            })
        });
        let publisher = live.state.clone().map(|state| {
            let settings = sonde_http::LiveSettings {
                input: live.input.clone(),
                started_unix_s: live.started_unix_s,
                intervals: self.interval_cfg.clone(),
                format: self.format,
                anonymizer: self.anonymizer(),
                bin_ns: BIN_NS,
                internal_networks: self.internal_networks,
            };
            sonde_http::LivePublisher::new(settings, state, readers)
        });
        LiveRun { state: live.state, kafka, rotation: live.rotation, publisher }
    }

    /// The flow logs as text (`--format tsv|jsonl`, `--layout`), each worker's lines sorted in
    /// `sort`, a live run's drains observed.
    #[allow(clippy::too_many_arguments)]
    fn write_text(
        &self,
        run: sonde_engine::Run,
        sources: &mut [&mut (dyn PacketSource + Send)],
        out: &OutputDir,
        exports: &Exports<'_>,
        sort: &Arc<SortBuffer>,
        live_run: &mut LiveRun<'_>,
        written: &mut Written,
    ) -> Result<RunResult<FlowLines>> {
        let (format, layout, features) = (self.format, self.config.layout.into(), self.features);
        let new_sink = || {
            let lines = LineSink::new(format)
                .layout(layout)
                .only(out.outputs())
                .anonymized(exports.anonymizer.clone())
                .features(features);
            ((lines.sorted_in(Some(sort.clone())), exports.ipfix_feed()), exports.kafka_feed())
        };
        let result = run.analyze_observed(sources, &new_sink, &mut live_run.observers())?;
        for (file, done) in out.write_flow_logs(&result.flows) {
            written.note(file.name().to_string(), done.map_err(|e| e.to_string()));
        }
        Ok(result)
    }

    /// The flow logs typed (`--format parquet|arrow`): every worker's rows merged in flow order,
    /// the two large logs written at the same time.
    #[allow(clippy::too_many_arguments)]
    fn write_typed(
        &self,
        run: sonde_engine::Run,
        typed: TypedFormat,
        sources: &mut [&mut (dyn PacketSource + Send)],
        out: &OutputDir,
        exports: &Exports<'_>,
        sort: &Arc<SortBuffer>,
        written: &mut Written,
    ) -> Result<(RunResult<FlowLines>, Spilled)> {
        let features = self.features;
        let new_sink = || {
            let rows = ArrowSink::new().only(out.outputs()).anonymized(exports.anonymizer.clone()).features(features);
            ((rows.sorted_in(Some(sort.clone())), exports.ipfix_feed()), exports.kafka_feed())
        };
        let (result, parts) = run.analyze(sources, &new_sink)?.swap_flows(Vec::new());
        let mut all = FlowBatches::default();
        parts.into_iter().for_each(|p| all.absorb(p));
        use sonde_arrow::Protocol;
        let logs = [
            (OutputFile::TcpFlows(self.format), Protocol::Tcp),
            (OutputFile::UdpFlows(self.format), Protocol::Udp),
            (OutputFile::IcmpFlows(self.format), Protocol::Icmp),
        ]
        .map(|(file, log)| (typed.file_name(file), log));
        let write = |(name, log): &(String, Protocol)| {
            out.outputs()
                .wants_name(name)
                .then(|| sonde_arrow::write_flow_log(&out.path(name), typed, &all, *log).map_err(|e| e.to_string()))
        };
        // The two large logs merge and compress at the same time; ICMP's is small.
        let (tcp, udp) = std::thread::scope(|scope| {
            let udp = scope.spawn(|| write(&logs[1]));
            (write(&logs[0]), udp.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
        });
        let icmp = write(&logs[2]);
        for ((name, _), done) in logs.into_iter().zip([tcp, udp, icmp]) {
            if let Some(done) = done {
                written.note(name, done);
            }
        }
        Ok((result, all.spilled().clone()))
    }

    /// The interval outputs (text or typed) and the store; what summary.json says of them.
    fn write_intervals<P>(&self, out: &OutputDir, result: &RunResult<P>, written: &mut Written) -> Option<Monitoring> {
        let (cfg, report) = self.interval_cfg.as_ref().zip(result.intervals.as_ref())?;
        let files = match self.typed {
            None => report
                .render()
                .context("rendering the interval outputs")
                .and_then(|rendered| {
                    rendered
                        .into_iter()
                        .map(|(name, text)| {
                            let file =
                                OutputFile::from_name(name).with_context(|| format!("{name}: not an output file"))?;
                            Ok((file, text))
                        })
                        .collect::<Result<Vec<_>>>()
                })
                .map(|files| written.text(out, files)),
            Some(typed) => {
                sonde_arrow::interval_tables(report).map(|tables| written.typed(out, typed, tables)).map_err(Into::into)
            }
        };
        if let Err(e) = files {
            written.failed.push(format!("{e:#}"));
        }
        let store = match (&self.config.store, &self.store_spec) {
            (Some(path), Some(spec)) => {
                match store::add_intervals(path, spec, self.config.store_archives.is_some(), report) {
                    Ok(report) => Some(report),
                    // The store is left as it was (updated as a copy).
                    Err(e) => {
                        written.failed.push(format!("{e:#}"));
                        None
                    }
                }
            }
            _ => None,
        };
        Some(Monitoring::new(cfg, report, store))
    }

    /// The definitions' outputs (text or typed).
    fn write_definitions<P>(&self, out: &OutputDir, result: &RunResult<P>, written: &mut Written) {
        let Some(counter) = &result.definitions else { return };
        match self.typed {
            None => written.text(out, sonde_output::definition_files(counter)),
            Some(typed) => match sonde_arrow::definition_tables(counter) {
                Ok(tables) => written.typed(out, typed, tables),
                Err(e) => written.failed.push(format!("definition tables: {e}")),
            },
        }
    }
}
