//! What `analyze` and `monitor` share: the settings from the flags, the run through the engine
//! and every output. Only where the packets come from differs.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use sonde_arrow::arrow::record_batch::RecordBatch;
use sonde_arrow::{ArrowSink, FlowBatches, TypedFormat};
use sonde_capture::PacketSource;
use sonde_define::Counter;
use sonde_engine::{settings, Controls, DrainObserver, Drains, Filter, Pipeline, Run};
use sonde_flow::FlowConfig;
use sonde_http::RunState;
use sonde_output::summary::{self, ChangeSummary, Monitoring, SortSummary, Summary};
use sonde_output::{FlowLines, Format, LineSink, OutputDir, OutputFile, Outputs, SortBuffer, Spilled};
use sonde_spool::Rotation;
use sonde_stats::Report;

use crate::flags::{AnalysisArgs, FormatArg, LayoutArg};
use crate::{anon, export, store, thin, EXIT_INPUT_DAMAGED};

/// Packet time between two drains of a live run.
const DRAIN_NS: u64 = 500_000_000;
/// The live throughput's bin: the finest resolution the dashboard offers.
pub const BIN_NS: u64 = 10_000_000;
/// Open flows each worker shows at a drain, at most.
const OPEN_FLOWS: usize = 2_000;

/// A run ready to read its first packet: settings checked, definitions loaded, the output
/// directory prepared.
pub struct Prepared {
    run: Run,
    interval_cfg: Option<sonde_stats::Config>,
    store_spec: Option<sonde_rrd::Spec>,
    format: Format,
    /// `--format parquet|arrow`: every output typed (then `format` is what a live view shows).
    typed: Option<TypedFormat>,
    anonymization: Option<(sonde_anon::Anonymizer, summary::AnonSummary)>,
    out: OutputDir,
    /// `--layout`: the flow logs' columns and files.
    layout: sonde_output::Layout,
    /// `--sort-buffer` in bytes, shared by every reader's workers (`Run::workers` each).
    sort_bytes: usize,
    /// `--ipfix`: where the flow records go, and how the messages are made.
    ipfix: Option<(sonde_ipfix::Target, sonde_ipfix::EncoderConfig, sonde_ipfix::ExportOptions)>,
    /// `--kafka`: the producer, connected before the output directory is made.
    kafka: Option<sonde_kafka::Exporter>,
    /// `--probe-id` or the host name (none: a host name that cannot name a probe, without
    /// --kafka).
    probe: Option<String>,
}

/// Checks the settings of `args`, then opens the input with `open` (before anything is
/// created, so an input that cannot be read leaves no output behind), then loads the
/// definitions and prepares the output directory.
pub fn prepare<T>(args: &AnalysisArgs, open: impl FnOnce() -> Result<T>) -> Result<(Prepared, T)> {
    let workers = settings::workers(args.threads, "--threads")?;
    if args.anonymize == Some(sonde_anon::Mode::Tcpdpriv) && args.app_packets > 0 && workers > 1 && !args.quiet {
        eprintln!(
            "sonde: note: --anonymize tcpdpriv with application facts runs one thread: addresses read from payloads take their images in input order"
        );
    }
    anyhow::ensure!(args.tcpdpriv_max_addresses > 0, "--tcpdpriv-max-addresses must be at least 1");
    settings::max_flows(args.max_flows, "--max-flows")?;
    anyhow::ensure!((1..=1 << 20).contains(&args.sort_buffer), "--sort-buffer (MiB) must be from 1 to 1048576 (1 TiB)");
    let internal_nets = args.internal_nets()?;
    let interval_ns = args.interval_ns()?;
    let outputs = match &args.outputs {
        // `--outputs ""` names no output: only summary.json.
        Some(list) => {
            let list: Vec<&String> = list.iter().filter(|s| !s.trim().is_empty()).collect();
            Outputs::only(&list).map_err(|e| anyhow::anyhow!("--outputs: {e}"))?
        }
        None => Outputs::all(),
    };
    let plan = Plan::of(args, &outputs);
    let store_spec = match &args.store {
        Some(path) => {
            let spec = store::spec(interval_ns, args.store_archives.as_deref())?;
            store::check_existing(path, &spec, args.store_archives.is_some())?;
            store::check_new_size(path, &spec, args.store_max_mb, args.quiet)?;
            Some(spec)
        }
        None if args.store_archives.is_some() => anyhow::bail!("--store-archives needs --store"),
        None => None,
    };
    let interval_cfg = interval_ns.filter(|_| plan.intervals).map(|interval_ns| sonde_stats::Config {
        interval_ns,
        internal_nets: internal_nets.clone(),
        tables: args.tables && plan.tables,
        table_cap: args.table_size.max(1),
        top_n: args.top,
    });
    let flow_cfg = FlowConfig {
        tcp_idle_ns: AnalysisArgs::timeout_ns(args.tcp_timeout, "--tcp-timeout")?,
        udp_idle_ns: AnalysisArgs::timeout_ns(args.udp_timeout, "--udp-timeout")?,
        tcp_closed_linger_ns: AnalysisArgs::timeout_ns(args.closed_linger, "--closed-linger")?,
        max_flows: args.max_flows,
        internal_nets,
        active_timeout_ns: args.active_timeout_ns(if args.live { DEFAULT_LIVE_ACTIVE_TIMEOUT_S } else { 0.0 })?,
        app_facts: plan.app_packets > 0,
        ..FlowConfig::default()
    };
    let app = sonde_engine::AppConfig {
        packets: plan.app_packets,
        dns_cache: args.dns_cache,
        udp_idle_ns: flow_cfg.udp_idle_ns,
    };
    let thin = thin::for_analyze(args.thin, &args.thin_params)?;
    let ipfix = match &args.ipfix {
        Some(target) => {
            let target = sonde_ipfix::Target::parse(target).map_err(anyhow::Error::msg)?;
            let cfg = sonde_ipfix::EncoderConfig {
                domain: args.ipfix_domain,
                mtu: args.ipfix_mtu,
                ..sonde_ipfix::EncoderConfig::default()
            };
            sonde_ipfix::Encoder::new(cfg.clone()).map_err(|e| anyhow::anyhow!("--ipfix-mtu: {e}"))?;
            // The file is created when the run starts; a missing directory is caught before
            // the output directory is made.
            if let sonde_ipfix::Target::File(path) = &target {
                let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
                anyhow::ensure!(dir.is_dir(), "--ipfix {}: no directory {}", path.display(), dir.display());
            }
            let options = sonde_ipfix::ExportOptions {
                udp_rate: (args.ipfix_rate > 0).then_some(args.ipfix_rate),
                // A trace waits for the exporter as well as it is read; live capture cannot.
                full_queue: if args.live {
                    sonde_ipfix::FullQueue::DropAfterWait
                } else {
                    sonde_ipfix::FullQueue::Wait
                },
            };
            Some((target, cfg, options))
        }
        None => None,
    };
    let kafka_config = match &args.kafka {
        Some(brokers) => Some(export::kafka_config(args, brokers)?),
        None => None,
    };
    let probe = match export::probe_id(args) {
        Ok(id) => Some(id),
        Err(e) if args.probe_id.is_some() => return Err(e),
        Err(_) => None,
    };
    // Checked now: the run compiles it again for each reader.
    if let Some(expr) = args.filter_expression() {
        Filter::new(&expr)?;
    }
    let (format, typed) = match args.format {
        FormatArg::Tsv => (Format::Tsv, None),
        FormatArg::Jsonl => (Format::Jsonl, None),
        FormatArg::Parquet => (Format::Tsv, Some(TypedFormat::Parquet)),
        FormatArg::Arrow => (Format::Tsv, Some(TypedFormat::Arrow)),
    };
    anyhow::ensure!(
        args.layout == LayoutArg::Sonde || matches!(args.format, FormatArg::Tsv),
        "--layout tstat writes Tstat's space-separated text logs: it takes --format tsv"
    );
    let layout = sonde_output::Layout::from(args.layout);
    // Open the input first, so an input that cannot be read leaves no output behind; then
    // check the output directory before reading a single packet.
    let input = open()?;
    let mut counter = match &args.definitions {
        Some(path) => Some(settings::load_definitions(path, interval_ns, args.definition_fids)?),
        None if args.definition_changes.is_some() => anyhow::bail!("--definition-changes needs --definitions"),
        None => None,
    };
    if let Some(counter) = counter.as_mut() {
        counter.set_written_samples(args.association_samples);
    }
    if let (Some(counter), Some(path)) = (counter.as_mut(), &args.definition_changes) {
        counter.schedule(settings::load_changes(path)?);
    }
    anyhow::ensure!(args.key.is_none() || args.anonymize.is_some(), "--key needs --anonymize");
    let anonymization = match args.anonymize {
        Some(mode) => Some(anon::anonymizer(mode, args.key.as_deref(), args.tcpdpriv_max_addresses, args.quiet)?),
        None => None,
    };
    let run = Run::new()
        .pipeline(Pipeline { flow: flow_cfg, workers, thin, app, ..Pipeline::default() })
        .filter(args.filter_expression())
        .intervals(interval_cfg.clone())
        .definitions(counter)
        .anonymize(anonymization.as_ref().map(|a| a.0.clone()))?;
    let typed_names = typed.map(TypedFormat::all_names).unwrap_or_default();
    let others: Vec<&str> = typed_names.iter().map(String::as_str).collect();
    // A broker that does not answer stops the run here, before any output exists.
    let kafka = match kafka_config {
        Some(cfg) => Some(sonde_kafka::Exporter::connect(cfg).map_err(anyhow::Error::msg)?),
        None => None,
    };
    let out =
        OutputDir::prepare_with(&args.out, format, args.force, &others)?.with_layout(layout).with_outputs(outputs);
    let sort_bytes = args.sort_buffer << 20;
    Ok((
        Prepared {
            run,
            interval_cfg,
            store_spec,
            format,
            typed,
            anonymization,
            out,
            layout,
            sort_bytes,
            ipfix,
            kafka,
            probe,
        },
        input,
    ))
}

impl Prepared {
    /// Workers per reader (`monitor --readers`: one each unless --threads says).
    pub fn set_workers(&mut self, workers: usize) {
        self.run = std::mem::take(&mut self.run).workers_per_reader(workers);
    }

    /// How many readers read the trace file at `path` ([`Run::readers_for_file`]).
    pub fn readers_for_file(&mut self, path: &std::path::Path) -> usize {
        self.run.readers_for_file(path)
    }

    /// How a chunk of the outputs is made (`monitor --spool`).
    pub fn chunk_shape(&self) -> sonde_spool::ChunkShape {
        sonde_spool::ChunkShape {
            cfg: self.interval_cfg.clone(),
            format: self.format,
            anonymizer: self.anonymization.as_ref().map(|a| a.0.clone()),
        }
    }

    /// `monitor --kafka-control`: the control topic's newest definitions replace those of
    /// `--definitions` (`None`: nothing published; the file's set, or an empty one that later
    /// versions add to).
    pub fn start_definitions(
        &mut self,
        args: &AnalysisArgs,
        defs: Option<Vec<sonde_define::Definition>>,
    ) -> Result<()> {
        if let Some(defs) = defs {
            let mut counter = Counter::new(defs, args.interval_ns()?, args.definition_fids);
            counter.set_written_samples(args.association_samples);
            self.run = std::mem::take(&mut self.run).definitions(Some(counter));
        }
        self.count_definitions(args)
    }

    /// A live run with an editor counts definitions even when it starts with none: the
    /// operator may add some.
    pub fn count_definitions(&mut self, args: &AnalysisArgs) -> Result<()> {
        if !self.run.counts_definitions() {
            let mut counter = Counter::new(Vec::new(), args.interval_ns()?, args.definition_fids);
            counter.set_written_samples(args.association_samples);
            self.run = std::mem::take(&mut self.run).definitions(Some(counter));
        }
        Ok(())
    }
}

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
    /// The caller may complete it (its optional parts) before [`finish`] writes it.
    pub report: Summary,
    /// The intervals as written (anonymised if the run was), for `--http`.
    pub intervals: Option<Report>,
    pub definitions: Option<Counter>,
    /// The flow logs' lines, for `--http`.
    pub flows: Vec<FlowLines>,
    pub format: Format,
    /// `--spool`: where the chunks went; the outputs in the directory are the last one.
    pub rotation: Option<Rotation>,
    out: OutputDir,
}

/// Analyses `sources` to their end (one: a trace or a capture; several: the sockets of a
/// PACKET_FANOUT group) and writes every output but the summary.
pub fn run(
    args: &AnalysisArgs,
    prepared: Prepared,
    sources: &mut [&mut (dyn PacketSource + Send)],
    input: (&str, Option<&str>),
    live: Option<LiveOptions>,
) -> Result<Finished> {
    let (input_name, compression) = input;
    let Prepared {
        mut run,
        interval_cfg,
        store_spec,
        format,
        typed,
        anonymization,
        out,
        layout,
        sort_bytes,
        ipfix,
        kafka,
        probe,
    } = prepared;
    // Each worker's sink and a live run's collector hold a share of the budget.
    let holders = sources.len() * run.workers() + 1;
    let sort = Arc::new(SortBuffer { dir: out.dir().to_path_buf(), bytes: sort_bytes / holders });
    let anonymizer = anonymization.as_ref().map(|a| a.0.clone());
    let (mut rotation, mut publisher, mut kafka_intervals) = (None, None, None);
    // `/metrics` of a live run reads the exporters' counters as they move.
    let metrics_state = live.as_ref().and_then(|l| l.state.clone());
    if let Some(live) = live {
        let every_ns = live.rotation.as_ref().map_or(DRAIN_NS, |r| r.span_ns().min(DRAIN_NS));
        let view = live.state.is_some();
        run = run.drains(Some(Drains {
            every_ns,
            view,
            fine_bin_ns: BIN_NS,
            open_flows: OPEN_FLOWS,
            recent_flows: sonde_http::RECENT_FLOWS,
        }));
        run = run.controls(live.controls);
        rotation = live.rotation;
        // A live run's intervals go to Kafka as they close.
        if let (Some(exporter), Some(cfg)) = (kafka.as_ref(), interval_cfg.as_ref()) {
            let config = exporter.config();
            let wanted = config.interval_topic.is_some() || config.histogram_topic.is_some();
            kafka_intervals = wanted.then(|| export::IntervalPublisher {
                exporter,
                live: sonde_kafka::LiveIntervals::new(cfg.interval_ns, sources.len()),
            });
        }
        publisher = live.state.map(|state| {
            let settings = sonde_http::LiveSettings {
                input: live.input.clone(),
                started_unix_s: live.started_unix_s,
                intervals: interval_cfg.clone(),
                format,
                anonymizer: anonymizer.clone(),
                bin_ns: BIN_NS,
            };
            sonde_http::LivePublisher::new(settings, state, sources.len())
        });
    }
    if !args.quiet && std::io::stderr().is_terminal() {
        run = run.progress(progress_bar());
    }
    // Started before the first packet: a file that cannot be created stops the run now.
    let exporter = match &ipfix {
        Some((target, cfg, options)) => {
            Some(sonde_ipfix::Exporter::start_with(target, cfg.clone(), *options).map_err(anyhow::Error::msg)?)
        }
        None => None,
    };
    if let Some(state) = &metrics_state {
        if let Some(e) = &exporter {
            state.add_export_counters(export::ipfix_metrics(e.live()));
        }
        if let Some(k) = &kafka {
            state.add_export_counters(export::kafka_metrics(k));
        }
    }
    let feed = || exporter.as_ref().map(|e| export::IpfixFeed { sink: e.sink(), anon: anonymizer.clone() });
    // Each worker enqueues its flows itself: the producer is shared and never waits.
    let kafka_feed = || kafka.as_ref().map(|k| k.sink(anonymizer.clone()));
    let new_sink = || {
        let lines = LineSink::new(format).layout(layout).only(out.outputs()).anonymized(anonymizer.clone());
        ((lines.sorted_in(Some(sort.clone())), feed()), kafka_feed())
    };
    let mut observers: Vec<&mut (dyn DrainObserver<FlowLines> + Send)> = Vec::new();
    // Before the rotation, which takes the intervals held.
    if let Some(k) = kafka_intervals.as_mut() {
        observers.push(k);
    }
    if let Some(r) = rotation.as_mut() {
        observers.push(r);
    }
    if let Some(p) = publisher.as_mut() {
        observers.push(p);
    }
    let mut outputs = Vec::new();
    // An output that cannot be written (a full disk) is named here and the others are still
    // attempted, summary.json last: the run then ends with exit status 1 (docs/faults.md).
    let mut failed: Vec<String> = Vec::new();
    let mut typed_spilled = Spilled::default();
    let result = match typed {
        None => {
            let result = run.analyze_observed(sources, &new_sink, &mut observers)?;
            clear_progress_bar();
            for (file, written) in out.write_flow_logs(&result.flows) {
                note(&mut outputs, &mut failed, file.name().to_string(), written.map_err(|e| e.to_string()));
            }
            outputs.push(OutputFile::Summary.name().to_string());
            result
        }
        Some(typed) => {
            anyhow::ensure!(
                observers.is_empty(),
                "--format {} writes its files when the run ends: --spool and --http take --format tsv or jsonl",
                typed.extension()
            );
            let new_sink = || {
                let rows = ArrowSink::new().only(out.outputs()).anonymized(anonymizer.clone());
                ((rows.sorted_in(Some(sort.clone())), feed()), kafka_feed())
            };
            let (result, parts) = run.analyze(sources, &new_sink)?.swap_flows(Vec::new());
            clear_progress_bar();
            let mut all = FlowBatches::default();
            parts.into_iter().for_each(|p| all.absorb(p));
            use sonde_arrow::Protocol;
            let logs = [
                (OutputFile::TcpFlows(format), Protocol::Tcp),
                (OutputFile::UdpFlows(format), Protocol::Udp),
                (OutputFile::IcmpFlows(format), Protocol::Icmp),
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
            typed_spilled = all.spilled().clone();
            for ((name, _), written) in logs.into_iter().zip([tcp, udp, icmp]) {
                if let Some(written) = written {
                    note(&mut outputs, &mut failed, name, written);
                }
            }
            outputs.push(OutputFile::Summary.name().to_string());
            result
        }
    };
    // Every worker's sink is done: what is queued goes out, then the counters come back.
    let ipfix_summary = exporter.map(|e| {
        let target = ipfix.as_ref().map(|(t, ..)| t.to_string()).unwrap_or_default();
        export::ipfix_summary(&target, args.ipfix_domain, e.finish())
    });
    // A trace's intervals go out now (analyze has them only at its end; a live run published
    // its own as they closed), then the queue drains within --kafka-flush-timeout and the
    // counters come back.
    drop(observers);
    let live_published = kafka_intervals.take().is_some();
    let kafka_summary = match kafka {
        Some(exporter) => {
            let topics = exporter.config().interval_topic.is_some() || exporter.config().histogram_topic.is_some();
            if let (Some(report), false, true) = (&result.intervals, live_published, topics) {
                exporter.publish(&sonde_kafka::Contributions::of_report(report));
            }
            let cfg = exporter.config().clone();
            Some(export::kafka_summary(&cfg, exporter.finish()))
        }
        None => None,
    };
    let mut monitoring = None;
    if let (Some(cfg), Some(report)) = (&interval_cfg, &result.intervals) {
        match typed {
            None => {
                let rendered = report.render().context("rendering the interval outputs")?;
                let files = rendered
                    .into_iter()
                    .map(|(name, text)| {
                        let file =
                            OutputFile::from_name(name).with_context(|| format!("{name}: not an output file"))?;
                        Ok((file, text))
                    })
                    .collect::<Result<Vec<_>>>()?;
                for (file, written) in out.write_each(files) {
                    note(&mut outputs, &mut failed, file.name().to_string(), written.map_err(|e| e.to_string()));
                }
            }
            Some(typed) => write_typed(&out, typed, sonde_arrow::interval_tables(report)?, &mut outputs, &mut failed),
        }
        let store = match (&args.store, &store_spec) {
            (Some(path), Some(spec)) => {
                match store::add_intervals(path, spec, args.store_archives.is_some(), report) {
                    Ok(report) => Some(report),
                    // The store is left as it was (updated as a copy).
                    Err(e) => {
                        failed.push(format!("{e:#}"));
                        None
                    }
                }
            }
            _ => None,
        };
        monitoring = Some(Monitoring::new(cfg, report, store));
    }
    let mut defined = None;
    if let Some(counter) = &result.definitions {
        match typed {
            None => {
                for (file, written) in out.write_each(sonde_output::definition_files(counter)) {
                    note(&mut outputs, &mut failed, file.name().to_string(), written.map_err(|e| e.to_string()));
                }
            }
            Some(typed) => {
                write_typed(&out, typed, sonde_arrow::definition_tables(counter)?, &mut outputs, &mut failed)
            }
        }
        defined = Some(summary::definition_summaries(counter));
    }
    let input = summary::Input {
        name: input_name.to_string(),
        format: sources[0].format().to_string(),
        compression: compression.map(str::to_string),
        filter: args.filter_expression(),
    };
    let outcome = sonde_engine::Outcome { stats: result.stats, input_error: result.input_error };
    let mut summary = Summary::new(input, outcome, result.timing.into());
    summary.probe = probe;
    summary.filter_uncompilable_frames = result.filter_uncompilable_frames;
    // Bytes of the files written (summary.json, written last, aside).
    summary.output_bytes =
        outputs.iter().filter_map(|name| std::fs::metadata(out.path(name)).ok()).map(|m| m.len()).sum();
    summary.outputs = outputs;
    summary.monitoring = monitoring;
    summary.definitions = defined;
    summary.anonymization = anonymization.map(|(anonymizer, mut s)| {
        s.tcpdpriv = anon::table_summary(&anonymizer, args.quiet);
        s
    });
    let mut spilled = typed_spilled;
    result.flows.iter().for_each(|f| spilled.add(f.spilled()));
    summary.sorted_runs = SortSummary::of(&spilled);
    summary.ipfix = ipfix_summary;
    summary.kafka = kafka_summary;
    summary.definition_changes =
        result.definitions.as_ref().filter(|_| args.definition_changes.is_some()).map(ChangeSummary::log);
    summary.output_errors = failed;
    Ok(Finished {
        report: summary,
        intervals: result.intervals,
        definitions: result.definitions,
        flows: result.flows,
        format,
        rotation,
        out,
    })
}

/// What the run computes for the outputs it writes (`--outputs`): a fact no output shows is not
/// computed. With every output (the default) this is what the options ask for.
struct Plan {
    /// Interval statistics: an interval output is written, or the store, Kafka or a live
    /// run's views take them.
    intervals: bool,
    /// The RMON2 tables (`--tables`): a table is written, or a live run shows them.
    tables: bool,
    /// Payload packets read for application facts: `--app-packets` if an output shows the
    /// facts (a flow log, a table by application, Kafka's flows, a live run's flow table), else 0.
    app_packets: u8,
}

impl Plan {
    fn of(args: &AnalysisArgs, outputs: &Outputs) -> Plan {
        // A live run's dashboard, spool and reloads show what the run computes: all of it.
        let elsewhere = args.live || args.kafka.is_some();
        Plan {
            intervals: elsewhere || args.store.is_some() || outputs.wants_any(&OutputFile::INTERVALS) || {
                args.tables && outputs.wants_any(&OutputFile::TABLES)
            },
            tables: elsewhere || outputs.wants_any(&OutputFile::TABLES),
            app_packets: if elsewhere || outputs.shows_application() { args.app_packets } else { 0 },
        }
    }
}

/// `monitor`'s active timeout unless --active-timeout says: a collector sees a long flow within
/// a minute. A trace's analysis sends none unless asked: its flows are all reported at its end.
const DEFAULT_LIVE_ACTIVE_TIMEOUT_S: f64 = 60.0;

/// An output written (its name goes to `outputs`) or not (its error to `failed`).
fn note(outputs: &mut Vec<String>, failed: &mut Vec<String>, name: String, result: Result<(), String>) {
    match result {
        Ok(()) => outputs.push(name),
        Err(e) => failed.push(e),
    }
}

/// Writes each table as its file in `typed`, noting each as written or failed.
fn write_typed(
    out: &OutputDir,
    typed: TypedFormat,
    tables: Vec<(OutputFile, RecordBatch)>,
    outputs: &mut Vec<String>,
    failed: &mut Vec<String>,
) {
    for (file, table) in tables.into_iter().filter(|(file, _)| out.outputs().wants(*file)) {
        let name = typed.file_name(file);
        let written =
            sonde_arrow::write_batches(&out.path(&name), typed, &table.schema(), std::slice::from_ref(&table));
        note(outputs, failed, name, written.map_err(|e| format!("{e:#}")));
    }
}

impl Finished {
    /// The output directory, for the outputs the caller adds (`capture.tsv`).
    pub fn out(&self) -> &OutputDir {
        &self.out
    }
}

/// Writes summary.json and the human summary; the exit status says whether an output could
/// not be written (1, each named) or the input ended early (3).
pub fn finish(args: &AnalysisArgs, finished: &Finished) -> Result<ExitCode> {
    let run = &finished.report;
    let summary_written = finished.out.write_run_summary(run);
    if !run.output_errors.is_empty() || summary_written.is_err() {
        let errors = run.output_errors.iter().cloned().chain(summary_written.err().map(|e| e.to_string()));
        for e in errors {
            eprintln!("sonde: {e}");
        }
        eprintln!(
            "sonde: some outputs could not be written; the others in {} are whole (docs/faults.md)",
            args.out.display()
        );
        return Ok(ExitCode::FAILURE);
    }
    if !args.quiet {
        // A closed pipe is not an error.
        let _ = std::io::Write::write_all(&mut std::io::stderr(), run.human(&args.out).as_bytes());
    }
    if let Some(e) = &run.input_error {
        eprintln!("sonde: warning: {}: {}; results cover the input before that point", run.input, e.message);
        return Ok(ExitCode::from(EXIT_INPUT_DAMAGED));
    }
    Ok(ExitCode::SUCCESS)
}

/// The progress bar of a long run on a terminal: it appears once the run has lasted a second.
static BAR: Mutex<Option<ProgressBar>> = Mutex::new(None);

fn progress_bar() -> impl FnMut(sonde_engine::Progress) + Send + 'static {
    let started = Instant::now();
    move |p| {
        if started.elapsed().as_secs_f64() < 1.0 {
            return;
        }
        let mut bar = BAR.lock().unwrap_or_else(|e| e.into_inner());
        let b = bar.get_or_insert_with(|| new_bar(p.size));
        match p.size {
            Some(_) => b.set_position(p.position),
            None => b.set_position(p.packets),
        }
    }
}

fn clear_progress_bar() {
    if let Some(b) = BAR.lock().unwrap_or_else(|e| e.into_inner()).take() {
        b.finish_and_clear();
    }
}

fn new_bar(size: Option<u64>) -> ProgressBar {
    match size {
        Some(total) => ProgressBar::new(total).with_style(
            ProgressStyle::with_template("{spinner} {bytes}/{total_bytes} [{bar:40}] {eta} left")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        ),
        None => ProgressBar::new_spinner().with_style(
            ProgressStyle::with_template("{spinner} {pos} packets")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        ),
    }
}
