//! What `analyze` and `monitor` share: the settings from the flags, the run through the engine
//! and every output. Only where the packets come from differs.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use sonde_capture::PacketSource;
use sonde_define::Counter;
use sonde_engine::{analyze_live, resources, Filter, Live, Pipeline, Progress};
use sonde_flow::FlowConfig;
use sonde_output::{FlowLines, Format, LineSink, OutputDir};
use sonde_stats::{FlowIntervals, PacketIntervals, Report};

use crate::flags::{AnalysisArgs, FormatArg};
use crate::live::{Collector, LiveOptions};
use crate::{anon, definitions, live, report, store, thin, EXIT_INPUT_DAMAGED};

/// A run ready to read its first packet: settings checked, definitions loaded, the output
/// directory prepared.
pub struct Prepared {
    pipeline: Pipeline,
    monitor_cfg: Option<sonde_stats::Config>,
    store_spec: Option<sonde_rrd::Spec>,
    filter: Option<Filter>,
    format: Format,
    counter: Option<Counter>,
    anonymization: Option<(sonde_anon::Anonymizer, anon::AnonSummary)>,
    out: OutputDir,
}

/// Checks the settings of `args`, then opens the input with `open` (before anything is
/// created, so an input that cannot be read leaves no output behind), then loads the
/// definitions and prepares the output directory.
pub fn prepare<T>(args: &AnalysisArgs, open: impl FnOnce() -> Result<T>) -> Result<(Prepared, T)> {
    let workers = match args.threads {
        Some(0) => anyhow::bail!("--threads must be at least 1"),
        Some(n) => n,
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let internal_nets = args.internal_nets()?;
    let interval_ns = args.interval_ns()?;
    let store_spec = match &args.store {
        Some(path) => {
            let spec = store::spec(interval_ns, args.store_archives.as_deref())?;
            store::check_existing(path, &spec, args.store_archives.is_some())?;
            Some(spec)
        }
        None if args.store_archives.is_some() => anyhow::bail!("--store-archives needs --store"),
        None => None,
    };
    let monitor_cfg = interval_ns.map(|interval_ns| sonde_stats::Config {
        interval_ns,
        internal_nets: internal_nets.clone(),
        tables: args.tables,
        table_cap: args.table_size.max(1),
        top_n: args.top,
    });
    let flow_cfg = FlowConfig {
        tcp_idle_ns: AnalysisArgs::timeout_ns(args.tcp_timeout, "--tcp-timeout")?,
        udp_idle_ns: AnalysisArgs::timeout_ns(args.udp_timeout, "--udp-timeout")?,
        tcp_closed_linger_ns: AnalysisArgs::timeout_ns(args.closed_linger, "--closed-linger")?,
        max_flows: args.max_flows.max(1),
        internal_nets,
        ..FlowConfig::default()
    };
    let thin = thin::for_analyze(args.thin, &args.thin_params)?;
    let filter = match args.filter_expression() {
        Some(expr) => Some(Filter::new(&expr)?),
        None => None,
    };
    let format = match args.format {
        FormatArg::Tsv => Format::Tsv,
        FormatArg::Jsonl => Format::Jsonl,
    };
    // Open the input first, so an input that cannot be read leaves no output behind; then
    // check the output directory before reading a single packet.
    let input = open()?;
    let mut counter = match &args.definitions {
        Some(path) => Some(definitions::load(path, interval_ns, args.definition_fids)?),
        None if args.definition_changes.is_some() => anyhow::bail!("--definition-changes needs --definitions"),
        None => None,
    };
    if let (Some(counter), Some(path)) = (counter.as_mut(), &args.definition_changes) {
        counter.schedule(definitions::load_changes(path)?);
    }
    anyhow::ensure!(args.key.is_none() || args.anonymize.is_some(), "--key needs --anonymize");
    let anonymization = match args.anonymize {
        Some(mode) => Some(anon::anonymizer(mode, args.key.as_deref(), args.quiet)?),
        None => None,
    };
    if let (Some(counter), Some((anon, _))) = (counter.as_mut(), &anonymization) {
        counter.anonymize(anon.clone()).map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    let monitor_files: Vec<&str> = sonde_stats::report::FILES
        .iter()
        .chain(&sonde_stats::report::TABLE_FILES)
        .chain(&[definitions::FILE, definitions::GAP_FILES[0], definitions::GAP_FILES[1], definitions::FLOWS_FILE])
        .chain(&[definitions::ASSOC_FILE, crate::monitor::FILE])
        .copied()
        .collect();
    let out = OutputDir::prepare_with(&args.out, format, args.force, &monitor_files)?;
    let pipeline = Pipeline { flow: flow_cfg, workers, thin, ..Pipeline::default() };
    let prepared = Prepared { pipeline, monitor_cfg, store_spec, filter, format, counter, anonymization, out };
    Ok((prepared, input))
}

impl Prepared {
    /// A live run with an editor counts definitions even when it starts with none: the
    /// operator may add some.
    /// Workers per reader (`monitor --readers`: one each unless --threads says).
    pub fn set_workers(&mut self, workers: usize) {
        self.pipeline.workers = workers.max(1);
    }

    pub fn count_definitions(&mut self, args: &AnalysisArgs) -> Result<()> {
        if self.counter.is_none() {
            self.counter = Some(Counter::new(Vec::new(), args.interval_ns()?, args.definition_fids));
        }
        Ok(())
    }
}

/// A run whose outputs are written but for the summary.
pub struct Finished {
    /// The caller may complete it (its optional parts) before [`finish`] writes it.
    pub report: report::RunReport,
    /// The intervals as written (anonymised if the run was), for `--http`.
    pub intervals: Option<Report>,
    /// The definition set's version at the end (0 without definitions).
    pub definitions_version: u64,
    /// Per association: its latest samples (time answered, gap in ns), for `--http`.
    pub association_samples: Vec<(String, Vec<(u64, u64)>)>,
    pub format: Format,
    /// `--spool`: where the chunks went; the outputs in the directory are the last one.
    pub rotation: Option<crate::rotate::Rotation>,
    out: OutputDir,
}

/// Analyses `sources` to their end (one: a trace or a capture; several: the sockets of a
/// PACKET_FANOUT group, each read by its own reader and workers, results merged) and writes every
/// output but the summary.
pub fn run(
    args: &AnalysisArgs,
    mut prepared: Prepared,
    sources: &mut [&mut (dyn PacketSource + Send)],
    input_name: &str,
    compression: Option<&str>,
    mut live: Option<&mut LiveOptions>,
) -> Result<Finished> {
    anyhow::ensure!(!sources.is_empty(), "no input");
    anyhow::ensure!(
        sources.len() == 1 || prepared.counter.is_none(),
        "flow definitions are counted in input order by one reader: they cannot be used with several readers"
    );
    let rotation = live.as_mut().and_then(|l| l.rotation.take());
    // Drains come at least as often as chunks end.
    let drain_every_ns = rotation.as_ref().map_or(live::PUBLISH_NS, |r| r.span_ns().min(live::PUBLISH_NS));
    let live = live.map(|l| &*l);
    let started = Instant::now();
    let cpu_before = resources::cpu_seconds();
    let show_progress = !args.quiet && std::io::stderr().is_terminal();
    let mut bar: Option<ProgressBar> = None;
    let (format, monitor_cfg) = (prepared.format, &prepared.monitor_cfg);
    let anonymizer = prepared.anonymization.as_ref().map(|a| a.0.clone());
    // Each worker formats its flows' lines as they end (the lines are sorted and written after)
    // and adds the flows to its interval statistics.
    let new_sink =
        || (LineSink::new(format).anonymized(anonymizer.clone()), monitor_cfg.as_ref().map(FlowIntervals::new));
    // Only a run with an HTTP state shows the live view: the fine bins and open flows are for it.
    let publishing = live.is_some_and(LiveOptions::publishing);
    let new_intervals = || {
        monitor_cfg.as_ref().map(|cfg| {
            let intervals = PacketIntervals::new(cfg);
            if publishing {
                intervals.with_fine_bins(live::BIN_NS)
            } else {
                intervals
            }
        })
    };
    // A live run drains the workers into a collector thread as it goes (published to the HTTP
    // state); what it drained joins what the run holds at its end.
    let (parts_tx, parts_rx) = crossbeam_channel::unbounded();
    let drain = |source: usize| {
        let (worker_parts, shown_anon) = (parts_tx.clone(), anonymizer.clone());
        move |sink: &mut live::Sink, open: Vec<sonde_flow::FlowRecord>, seq: u64| {
            let shown = LineSink::new(format).anonymized(shown_anon.clone());
            live::drain_sink(&worker_parts, source, sink, open, shown, seq)
        }
    };
    let collector = live.map(|l| {
        let c = Collector::new(
            prepared.pipeline.workers,
            sources.len(),
            monitor_cfg.clone(),
            format,
            anonymizer.clone(),
            l.state.clone(),
            rotation,
        );
        let rx = parts_rx.clone();
        std::thread::Builder::new().name("sonde-publish".into()).spawn(move || c.run(rx))
    });
    drop(parts_rx);
    let collector = collector.transpose().context("starting the publishing thread")?;
    let open_flows = if publishing { live::OPEN_FLOWS } else { 0 };
    // One reader's whole run: its packet statistics, outcome and workers' sinks.
    let read = |source: &mut (dyn PacketSource + Send),
                index: usize,
                filter: Option<&mut Filter>,
                counter: Option<&mut Counter>,
                progress: &mut dyn FnMut(Progress)| {
        let mut intervals = new_intervals();
        let mut hooks = live.map(|l| live::Hooks::new(l, parts_tx.clone(), index));
        let drain = drain(index);
        let live_run = hooks.as_mut().map(|hooks| Live {
            every_ns: drain_every_ns,
            drain_sink: &drain,
            open_flows,
            hooks: hooks as &mut dyn sonde_engine::LiveHooks,
        });
        let pipeline = &prepared.pipeline;
        let (outcome, sinks) =
            analyze_live(source, filter, pipeline, &new_sink, intervals.as_mut(), counter, live_run, progress);
        (outcome, sinks, intervals)
    };
    let mut progress = |p: Progress| {
        // The bar appears only once a run has lasted a second.
        if !show_progress || started.elapsed().as_secs_f64() < 1.0 {
            return;
        }
        let b = bar.get_or_insert_with(|| new_bar(p.size));
        match p.size {
            Some(_) => b.set_position(p.position),
            None => b.set_position(p.packets),
        }
    };
    let mut readings = Vec::with_capacity(sources.len());
    if let [source] = sources {
        readings.push(read(&mut **source, 0, prepared.filter.as_mut(), prepared.counter.as_mut(), &mut progress));
    } else {
        // Each fanout socket's reader in a thread of its own, its own compiled filter.
        let filters = sources
            .iter()
            .map(|_| args.filter_expression().map(|e| Filter::new(&e)).transpose())
            .collect::<Result<Vec<_>, _>>()?;
        let read = &read;
        readings = std::thread::scope(|scope| {
            let handles: Vec<_> = sources
                .iter_mut()
                .zip(filters)
                .enumerate()
                .map(|(i, (source, mut filter))| {
                    let source: &mut (dyn PacketSource + Send) = &mut **source;
                    std::thread::Builder::new()
                        .name(format!("sonde-reader-{i}"))
                        .spawn_scoped(scope, move || read(source, i, filter.as_mut(), None, &mut |_| {}))
                        .expect("spawn a reader thread")
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect()
        });
    }
    if let Some(b) = bar.take() {
        b.finish_and_clear();
    }
    let elapsed_s = started.elapsed().as_secs_f64();
    let cpu_s = resources::cpu_seconds() - cpu_before;

    drop(parts_tx);
    let (drained, rotation) = match collector {
        Some(c) => c.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
        None => (live::Drained::default(), None),
    };
    // The readers' results as one run's.
    let mut outcome: Option<sonde_engine::Outcome> = None;
    let (mut sinks, mut packet_intervals) = (Vec::new(), None::<Vec<sonde_stats::PacketInterval>>);
    for (o, s, intervals) in readings {
        match outcome.as_mut() {
            None => outcome = Some(o),
            Some(all) => {
                all.stats.merge(o.stats);
                all.input_error = all.input_error.take().or(o.input_error);
            }
        }
        sinks.extend(s);
        if let Some(i) = intervals {
            packet_intervals.get_or_insert_with(Vec::new).extend(i.finish());
        }
    }
    let outcome = outcome.expect("one reader at least");
    let (line_sinks, mut flow_intervals): (Vec<_>, Vec<_>) = sinks.into_iter().unzip();
    // (Nothing drained: not a part of its own, so one worker's logs are still written in turn.)
    let drained_lines = Some(drained.lines).filter(|l| !l.is_empty());
    let lines = drained_lines.into_iter().chain(line_sinks.into_iter().map(FlowLines::from)).collect();
    prepared.out.write_flow_lines(lines)?;
    flow_intervals.push(drained.flows);
    let mut outputs = OutputDir::file_names(format).to_vec();
    let mut monitoring = None;
    let mut intervals = None;
    if let (Some(cfg), Some(packets)) = (monitor_cfg, packet_intervals) {
        let mut all_packets = drained.packets;
        all_packets.extend(packets);
        let mut report = Report::new(cfg, all_packets, flow_intervals.into_iter().flatten().collect());
        if let Some(anon) = &anonymizer {
            report.anonymize(&mut anon.clone());
        }
        let names =
            report.write(&args.out).with_context(|| format!("writing interval outputs in {}", args.out.display()))?;
        outputs.extend(names.iter().map(|n| n.to_string()));
        let store = match (&args.store, &prepared.store_spec) {
            (Some(path), Some(spec)) => Some(store::add_intervals(path, spec, args.store_archives.is_some(), &report)?),
            _ => None,
        };
        monitoring = Some(report::Monitoring::new(cfg, &report, store));
        intervals = Some(report);
    }
    let mut defined = None;
    if let Some(counter) = &prepared.counter {
        let (names, totals) = definitions::write(counter, &args.out)?;
        outputs.extend(names.iter().map(|n| n.to_string()));
        defined = Some(totals);
    }
    let mut run = report::RunReport::new(
        input_name,
        sources[0].format(),
        compression,
        args.filter_expression(),
        outcome,
        prepared.filter.as_ref().map_or(0, |f| f.uncompilable_frames),
        report::Timing { elapsed_s, cpu_s, peak_rss_bytes: resources::peak_rss_bytes() },
        outputs,
        monitoring,
    );
    run.definitions = defined;
    run.anonymization = prepared.anonymization.map(|a| a.1);
    run.definition_changes =
        prepared.counter.as_ref().filter(|_| args.definition_changes.is_some()).map(definitions::change_log);
    let definitions_version = prepared.counter.as_ref().map_or(0, |c| c.version());
    let association_samples = prepared.counter.as_ref().map_or_else(Vec::new, Counter::recent_samples);
    Ok(Finished {
        report: run,
        intervals,
        definitions_version,
        association_samples,
        format,
        rotation,
        out: prepared.out,
    })
}

/// Writes summary.json and the human summary; the exit status says whether the input ended
/// early.
pub fn finish(args: &AnalysisArgs, finished: &Finished) -> Result<ExitCode> {
    let run = &finished.report;
    finished.out.write_summary(&run.to_json())?;
    if !args.quiet {
        report::print_human(run, &args.out);
    }
    if let Some(e) = &run.input_error {
        eprintln!("sonde: warning: {}: {}; results cover the input before that point", run.input, e.message);
        return Ok(ExitCode::from(EXIT_INPUT_DAMAGED));
    }
    Ok(ExitCode::SUCCESS)
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
