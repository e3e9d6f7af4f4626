//! The `sonde` command: argument handling, progress and summary printing around the library.

mod anon;
mod anon_trace;
mod compare;
mod definitions;
mod flags;
mod http;
mod plot;
mod report;
mod store;
mod thin;
mod ts;

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};
use sonde_engine::{analyze_monitored, resources, Filter, Pipeline, Progress};
use sonde_flow::FlowConfig;
use sonde_output::{Format, LineSink, OutputDir};
use sonde_stats::{FlowIntervals, PacketIntervals, Report};

use flags::{AnalyzeArgs, Cli, Command, FormatArg};

/// Exit status when the input ended early but what came before was analysed and written.
pub(crate) const EXIT_INPUT_DAMAGED: u8 = 3;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Analyze(args) => run_analyze(&args),
        Command::Ts(cmd) => ts::run(&cmd),
        Command::Plot(args) => plot::run(&args),
        Command::Compare(args) => compare::run(&args),
        Command::Anon(args) => anon_trace::run(&args),
        Command::Thin(args) => thin::run(&args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("sonde: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run_analyze(args: &AnalyzeArgs) -> Result<ExitCode> {
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
        tcp_idle_ns: AnalyzeArgs::timeout_ns(args.tcp_timeout, "--tcp-timeout")?,
        udp_idle_ns: AnalyzeArgs::timeout_ns(args.udp_timeout, "--udp-timeout")?,
        tcp_closed_linger_ns: AnalyzeArgs::timeout_ns(args.closed_linger, "--closed-linger")?,
        max_flows: args.max_flows.max(1),
        internal_nets,
        ..FlowConfig::default()
    };
    let thin = thin::for_analyze(args.thin, &args.thin_params)?;
    let mut filter = match args.filter_expression() {
        Some(expr) => Some(Filter::new(&expr)?),
        None => None,
    };
    let format = match args.format {
        FormatArg::Tsv => Format::Tsv,
        FormatArg::Jsonl => Format::Jsonl,
    };
    // Open the input (its header only) first, so a file that is not a capture leaves no
    // output behind; then check the output directory before reading a single packet.
    let input_name = args.read.display().to_string();
    let mut source = sonde_capture::open(&args.read).with_context(|| input_name.clone())?;
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
    let anonymizer = anonymization.as_ref().map(|a| a.0.clone());
    if let (Some(counter), Some(anon)) = (counter.as_mut(), &anonymizer) {
        counter.anonymize(anon.clone()).map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    let monitor_files: Vec<&str> = sonde_stats::report::FILES
        .iter()
        .chain(&sonde_stats::report::TABLE_FILES)
        .chain(&[definitions::FILE, definitions::GAP_FILES[0], definitions::GAP_FILES[1], definitions::FLOWS_FILE])
        .chain(&[definitions::ASSOC_FILE])
        .copied()
        .collect();
    let server = args.http.map(|addr| http::prepare(addr, args.http_token.as_deref())).transpose()?;
    let out = OutputDir::prepare_with(&args.out, format, args.force, &monitor_files)?;

    let started = Instant::now();
    let cpu_before = resources::cpu_seconds();
    let show_progress = !args.quiet && std::io::stderr().is_terminal();
    let mut bar: Option<ProgressBar> = None;
    // The bar appears only once a run has lasted a second.
    let pipeline = Pipeline { flow: flow_cfg, workers, thin, ..Pipeline::default() };
    // Each worker formats its flows' lines as they end (the lines are sorted and written after)
    // and adds the flows to its interval statistics.
    let new_sink =
        || (LineSink::new(format).anonymized(anonymizer.clone()), monitor_cfg.as_ref().map(FlowIntervals::new));
    let mut packet_intervals = monitor_cfg.as_ref().map(PacketIntervals::new);
    let (outcome, sinks) = analyze_monitored(
        source.as_mut(),
        filter.as_mut(),
        &pipeline,
        &new_sink,
        packet_intervals.as_mut(),
        counter.as_mut(),
        &mut |p: Progress| {
            if !show_progress || started.elapsed().as_secs_f64() < 1.0 {
                return;
            }
            let b = bar.get_or_insert_with(|| new_bar(p.size));
            match p.size {
                Some(_) => b.set_position(p.position),
                None => b.set_position(p.packets),
            }
        },
    );
    if let Some(b) = bar.take() {
        b.finish_and_clear();
    }
    let elapsed_s = started.elapsed().as_secs_f64();
    let cpu_s = resources::cpu_seconds() - cpu_before;

    let (line_sinks, flow_intervals): (Vec<_>, Vec<_>) = sinks.into_iter().unzip();
    out.write_lines(line_sinks)?;
    let mut outputs = OutputDir::file_names(format).to_vec();
    let mut monitoring = None;
    let mut kept_report = None;
    if let (Some(cfg), Some(packets)) = (&monitor_cfg, packet_intervals) {
        let mut report = Report::new(cfg, packets.finish(), flow_intervals.into_iter().flatten().collect());
        if let Some(anon) = &anonymizer {
            report.anonymize(&mut anon.clone());
        }
        let names =
            report.write(&args.out).with_context(|| format!("writing interval outputs in {}", args.out.display()))?;
        outputs.extend(names.iter().map(|n| n.to_string()));
        let store = match (&args.store, &store_spec) {
            (Some(path), Some(spec)) => Some(store::add_intervals(path, spec, args.store_archives.is_some(), &report)?),
            _ => None,
        };
        monitoring = Some(report::Monitoring::new(cfg, &report, store));
        kept_report = Some(report);
    }
    let mut defined = None;
    if let Some(counter) = &counter {
        let (names, totals) = definitions::write(counter, &args.out)?;
        outputs.extend(names.iter().map(|n| n.to_string()));
        defined = Some(totals);
    }
    let mut run = report::RunReport::new(
        &input_name,
        source.format(),
        source.compression(),
        args.filter_expression(),
        outcome,
        filter.as_ref().map_or(0, |f| f.uncompilable_frames),
        report::Timing { elapsed_s, cpu_s, peak_rss_bytes: resources::peak_rss_bytes() },
        outputs,
        monitoring,
    );
    run.definitions = defined;
    run.anonymization = anonymization.map(|a| a.1);
    run.definition_changes =
        counter.as_ref().filter(|_| args.definition_changes.is_some()).map(definitions::change_log);
    out.write_summary(&run.to_json())?;
    if !args.quiet {
        report::print_human(&run, &args.out);
    }
    if let Some(e) = &run.input_error {
        eprintln!("sonde: warning: {input_name}: {}; results cover the input before that point", e.message);
    }
    if let Some(server) = server {
        let definitions_version = counter.as_ref().map_or(0, |c| c.version());
        let outputs = http::RunOutputs {
            run: &run,
            report: kept_report.as_ref(),
            definitions_version,
            out_dir: &args.out,
            flow_ext: format.extension(),
        };
        server.serve(&outputs, args.quiet)?;
    }
    if run.input_error.is_some() {
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
