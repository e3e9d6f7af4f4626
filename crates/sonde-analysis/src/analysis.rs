//! [`Analysis`]: a run whose settings are checked, definitions loaded and anonymizer keyed,
//! ready to read its first packet; and the [`Plan`] of what it computes for its outputs.

use anyhow::Result;
use sonde_arrow::arrow::record_batch::RecordBatch;
use sonde_arrow::TypedFormat;
use sonde_capture::PacketSource;
use sonde_define::Counter;
use sonde_engine::{settings, Filter, Pipeline, Run, RunResult, Sinks};
use sonde_flow::FlowConfig;
use sonde_output::summary::{self, AnonSummary, ChangeSummary, Monitoring, Summary};
use sonde_output::{Format, OutputDir, OutputFile, Outputs};

use crate::config::{AnalysisConfig, FlowLayout, OutputFormat};
use crate::{anon, export, store};

/// `monitor`'s active timeout unless --active-timeout says: a collector sees a long flow within
/// a minute. A trace's analysis sends none unless asked: its flows are all reported at its end.
const DEFAULT_LIVE_ACTIVE_TIMEOUT_S: f64 = 60.0;

/// A run ready to read its first packet: its config checked, its definitions loaded, its
/// anonymizer keyed. [`Analysis::create_outputs`] then makes its output directory (the CLI);
/// [`Analysis::analyze`] runs it into the caller's sinks, keeping every other output in memory
/// (the Python package).
pub struct Analysis {
    pub(crate) config: AnalysisConfig,
    pub(crate) run: Run,
    pub(crate) interval_cfg: Option<sonde_stats::Config>,
    /// How many internal networks the run starts with (`--internal`, `--internal-file`): the
    /// HTTP status tells the dashboard whether in/out mean anything.
    pub(crate) internal_networks: usize,
    pub(crate) store_spec: Option<sonde_rrd::Spec>,
    /// The flow logs' text format (with `typed`: what a live view shows).
    pub(crate) format: Format,
    /// `--format parquet|arrow`: every output typed.
    pub(crate) typed: Option<TypedFormat>,
    pub(crate) anonymization: Option<(sonde_anon::Anonymizer, AnonSummary)>,
    pub(crate) outputs: Outputs,
    /// NFStream's flow features (`--features ml`): computed, and their columns in the logs.
    pub(crate) features: Option<sonde_flow::features::FeaturesConfig>,
    /// `--ipfix`: where the flow records go, and how the messages are made.
    pub(crate) ipfix: Option<(sonde_ipfix::Target, sonde_ipfix::EncoderConfig, sonde_ipfix::ExportOptions)>,
    pub(crate) kafka_config: Option<sonde_kafka::Config>,
    /// `--probe-id` or the host name (none: a host name that cannot name a probe, without
    /// --kafka).
    pub(crate) probe: Option<String>,
    /// What the caller should tell the user (notes and warnings, without `sonde: `).
    pub notes: Vec<String>,
    /// Made by [`Analysis::create_outputs`].
    pub(crate) files: Option<Files>,
}

/// Where a run's files go: the output directory, and the Kafka producer connected before it
/// was made.
pub(crate) struct Files {
    pub(crate) out: OutputDir,
    pub(crate) kafka: Option<sonde_kafka::Exporter>,
}

/// The settings checked before the input is opened.
struct Checked {
    workers: usize,
    interval_cfg: Option<sonde_stats::Config>,
    flow: FlowConfig,
    app: sonde_engine::AppConfig,
    thin: Option<sonde_engine::Thinner>,
    outputs: Outputs,
    store_spec: Option<sonde_rrd::Spec>,
    notes: Vec<String>,
}

impl Analysis {
    /// Checks `config`, then opens the input with `open` (before anything is created, so an
    /// input that cannot be read leaves nothing behind), then loads the definitions and the
    /// anonymizer's key. Every message names a setting as `config.names` says.
    pub fn prepare<T>(config: AnalysisConfig, open: impl FnOnce() -> Result<T>) -> Result<(Analysis, T)> {
        let mut checked = check(&config)?;
        let ipfix = ipfix(&config)?;
        let kafka_config = config.kafka.as_deref().map(|brokers| export::kafka_config(&config, brokers)).transpose()?;
        let probe = match export::probe_id(&config) {
            Ok(id) => Some(id),
            Err(e) if config.probe_id.is_some() => return Err(e),
            Err(_) => None,
        };
        // Checked now: the run compiles it again for each reader.
        if let Some(expr) = config.filter_expression() {
            Filter::new(&expr).map_err(|e| anyhow::anyhow!("{}: {e}", config.name("filter")))?;
        }
        let (format, typed) = match config.format {
            OutputFormat::Tsv => (Format::Tsv, None),
            OutputFormat::Jsonl => (Format::Jsonl, None),
            OutputFormat::Parquet => (Format::Tsv, Some(TypedFormat::Parquet)),
            OutputFormat::Arrow => (Format::Tsv, Some(TypedFormat::Arrow)),
        };
        anyhow::ensure!(
            config.layout == FlowLayout::Sonde || config.format == OutputFormat::Tsv,
            "--layout tstat writes Tstat's space-separated text logs: it takes --format tsv"
        );
        anyhow::ensure!(
            config.features.is_empty() || config.layout == FlowLayout::Sonde,
            "{} ml adds columns to sonde's flow logs: it takes --layout sonde",
            config.name("features")
        );
        anyhow::ensure!(
            config.features.is_empty() || !config.live,
            "{} ml is for traces (analyze, sonde.analyze): a live run's views and spool show the flow logs' own columns",
            config.name("features")
        );
        let input = open()?;
        let counter = definitions(&config)?;
        let mut notes = std::mem::take(&mut checked.notes);
        let anonymization = match config.anonymize {
            Some(mode) => Some(anon::anonymizer(&config, mode, &mut notes)?),
            None => None,
        };
        if config.anonymize == Some(sonde_anon::Mode::Tcpdpriv) && checked.app.packets > 0 && checked.workers > 1 {
            notes.push(format!("note: {} tcpdpriv with application facts runs one thread: addresses read from payloads take their images in input order", config.name("anonymize")));
        }
        let Checked { workers, interval_cfg, flow, app, thin, outputs, store_spec, .. } = checked;
        let internal_networks = flow.internal_nets.len();
        let features = flow.features;
        let run = Run::new()
            .pipeline(Pipeline { flow, workers, thin, app, ..Pipeline::default() })
            .filter(config.filter_expression())
            .intervals(interval_cfg.clone())
            .definitions(counter)
            .anonymize(anonymization.as_ref().map(|a| a.0.clone()))?;
        let analysis = Analysis {
            config,
            run,
            interval_cfg,
            internal_networks,
            store_spec,
            format,
            typed,
            anonymization,
            outputs,
            features,
            ipfix,
            kafka_config,
            probe,
            notes,
            files: None,
        };
        Ok((analysis, input))
    }

    /// Connects the Kafka producer (a broker that does not answer stops the run here, before
    /// any output exists), then prepares the output directory (`--out`, `--force`).
    pub fn create_outputs(&mut self) -> Result<()> {
        let kafka = match self.kafka_config.clone() {
            Some(cfg) => Some(sonde_kafka::Exporter::connect(cfg).map_err(anyhow::Error::msg)?),
            None => None,
        };
        let typed_names = self.typed.map(TypedFormat::all_names).unwrap_or_default();
        let others: Vec<&str> = typed_names.iter().map(String::as_str).collect();
        let out = OutputDir::prepare_with(&self.config.out, self.format, self.config.force, &others)?
            .with_layout(self.config.layout.into())
            .with_features(self.features)
            .with_outputs(self.outputs.clone());
        self.files = Some(Files { out, kafka });
        Ok(())
    }

    /// NFStream's flow features, when the run computes them (`--features ml`): the caller's
    /// sinks show their columns ([`sonde_output::LineSink::features`], `ArrowSink::features`).
    pub fn features(&self) -> Option<sonde_flow::features::FeaturesConfig> {
        self.features
    }

    /// The anonymizer every output's addresses go through, if any (a clone sharing tcpdpriv's
    /// table), for the caller's sinks.
    pub fn anonymizer(&self) -> Option<sonde_anon::Anonymizer> {
        self.anonymization.as_ref().map(|a| a.0.clone())
    }

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
        sonde_spool::ChunkShape { cfg: self.interval_cfg.clone(), format: self.format, anonymizer: self.anonymizer() }
    }

    /// `monitor --kafka-control`: the control topic's newest definitions replace those of
    /// `--definitions` (`None`: nothing published; the file's set, or an empty one that later
    /// versions add to).
    pub fn start_definitions(&mut self, defs: Option<Vec<sonde_define::Definition>>) -> Result<()> {
        if let Some(defs) = defs {
            let counter = self.counter(defs)?;
            self.run = std::mem::take(&mut self.run).definitions(Some(counter));
        }
        self.count_definitions()
    }

    /// A live run with an editor counts definitions even when it starts with none: the
    /// operator may add some.
    pub fn count_definitions(&mut self) -> Result<()> {
        if !self.run.counts_definitions() {
            let counter = self.counter(Vec::new())?;
            self.run = std::mem::take(&mut self.run).definitions(Some(counter));
        }
        Ok(())
    }

    fn counter(&self, defs: Vec<sonde_define::Definition>) -> Result<Counter> {
        let mut counter = Counter::new(defs, self.config.interval_ns()?, self.config.definition_fids);
        counter.set_written_samples(self.config.association_samples);
        counter.set_max_name_bytes(self.config.definition_name_max.into());
        Ok(counter)
    }

    /// Analyses `sources` to their end into `sinks` (the caller's: each worker's flows go there)
    /// and returns the flows' parts, the interval and definition outputs as typed tables by file
    /// stem, and the summary: every output but the flow logs, in memory.
    pub fn analyze<K: Sinks>(
        self,
        sources: &mut [&mut (dyn PacketSource + Send)],
        sinks: &K,
        input: (&str, Option<&str>),
    ) -> Result<Analyzed<sonde_engine::PartOf<K>>> {
        let input = self.input(sources, input);
        let mut result = self.run.analyze(sources, sinks)?;
        let mut tables = Vec::new();
        let mut named = |files: Vec<(OutputFile, RecordBatch)>| {
            tables.extend(files.into_iter().map(|(file, batch)| (file.stem().to_string(), batch)));
        };
        if let Some(report) = &result.intervals {
            named(sonde_arrow::interval_tables(report)?);
        }
        if let Some(counter) = &result.definitions {
            named(sonde_arrow::definition_tables(counter)?);
        }
        let monitoring = self.interval_cfg.as_ref().zip(result.intervals.as_ref());
        let monitoring = monitoring.map(|(cfg, report)| Monitoring::new(cfg, report, None));
        let flows = std::mem::take(&mut result.flows);
        let (summary, _) = summarize(&self.config, self.anonymization, input, result, monitoring);
        Ok(Analyzed { flows, tables, summary })
    }

    /// What summary.json says about the input: its name, format, compression and filter.
    pub(crate) fn input(
        &self,
        sources: &[&mut (dyn PacketSource + Send)],
        input: (&str, Option<&str>),
    ) -> summary::Input {
        summary::Input {
            name: input.0.to_string(),
            format: sources.first().map_or_else(String::new, |s| s.format().to_string()),
            compression: input.1.map(str::to_string),
            filter: self.config.filter_expression(),
        }
    }
}

/// A run analysed into the caller's sinks ([`Analysis::analyze`]).
pub struct Analyzed<P> {
    /// The workers' sinks' parts.
    pub flows: Vec<P>,
    /// The interval and definition outputs as typed tables, by file stem (`intervals`,
    /// `hosts`, `definitions`…).
    pub tables: Vec<(String, RecordBatch)>,
    pub summary: Summary,
}

/// The summary of `result` as far as the run's settings and results say (the outputs written
/// and the exports are the caller's to add); and the definitions, which the caller may still
/// need.
pub(crate) fn summarize<P>(
    config: &AnalysisConfig,
    anonymization: Option<(sonde_anon::Anonymizer, AnonSummary)>,
    input: summary::Input,
    result: RunResult<P>,
    monitoring: Option<Monitoring>,
) -> (Summary, Option<Counter>) {
    let outcome = sonde_engine::Outcome { stats: result.stats, input_error: result.input_error };
    let mut summary = Summary::new(input, outcome, result.timing.into());
    summary.filter_uncompilable_frames = result.filter_uncompilable_frames;
    summary.monitoring = monitoring;
    summary.definitions = result.definitions.as_ref().map(summary::definition_summaries);
    summary.definition_changes =
        result.definitions.as_ref().filter(|_| config.definition_changes.is_some()).map(ChangeSummary::log);
    summary.anonymization = anonymization.map(|(anonymizer, mut s)| {
        s.tcpdpriv = anon::table_summary(&anonymizer);
        s
    });
    (summary, result.definitions)
}

/// The checks that need nothing opened.
fn check(config: &AnalysisConfig) -> Result<Checked> {
    let name = |key| config.name(key);
    let workers = settings::workers(config.threads, &name("threads"))?;
    anyhow::ensure!(config.tcpdpriv_max_addresses > 0, "{} must be at least 1", name("tcpdpriv_max_addresses"));
    settings::max_flows(config.max_flows, &name("max_flows"))?;
    anyhow::ensure!(
        (1..=1 << 20).contains(&config.sort_buffer),
        "{} (MiB) must be from 1 to 1048576 (1 TiB)",
        name("sort_buffer")
    );
    anyhow::ensure!(config.key.is_none() || config.anonymize.is_some(), "{} needs {}", name("key"), name("anonymize"));
    let internal_nets = config.internal_nets()?;
    let interval_ns = config.interval_ns()?;
    let outputs = match &config.outputs {
        // `--outputs ""` names no output: only summary.json.
        Some(list) => {
            let list: Vec<&String> = list.iter().filter(|s| !s.trim().is_empty()).collect();
            Outputs::only(&list).map_err(|e| anyhow::anyhow!("{}: {e}", name("outputs")))?
        }
        None => Outputs::all(),
    };
    let plan = Plan::of(config, &outputs);
    let mut notes = Vec::new();
    let store_spec = match &config.store {
        Some(path) => {
            let (spec, note) = store::checked_spec(path, interval_ns, config)?;
            notes.extend(note);
            Some(spec)
        }
        None if config.store_archives.is_some() => anyhow::bail!("--store-archives needs --store"),
        None => None,
    };
    let interval_cfg = interval_ns.filter(|_| plan.intervals).map(|interval_ns| sonde_stats::Config {
        interval_ns,
        internal_nets: internal_nets.clone(),
        tables: config.tables && plan.tables,
        table_cap: config.table_size.max(1),
        top_n: config.top,
    });
    anyhow::ensure!(config.owner_cache > 0, "{} must be at least 1", name("owner_cache"));
    let owners = if plan.owners {
        sonde_owners::MaxMind::open(config.geoip.as_deref(), config.asn.as_deref())?
    } else {
        if config.geoip.is_some() || config.asn.is_some() {
            notes.push(format!(
                "{} and {}: no output shows the flows' owners (sonde's flow logs do; not --layout tstat): not looked up",
                name("geoip"),
                name("asn")
            ));
        }
        None
    };
    if !config.features.is_empty() && !plan.features {
        notes.push(format!(
            "{}: no output shows the flow features (sonde's flow logs do): not computed",
            name("features")
        ));
    }
    let live_default = if config.live { DEFAULT_LIVE_ACTIVE_TIMEOUT_S } else { 0.0 };
    let flow = FlowConfig {
        tcp_idle_ns: config.timeout_ns(config.tcp_timeout, "tcp_timeout")?,
        udp_idle_ns: config.timeout_ns(config.udp_timeout, "udp_timeout")?,
        tcp_closed_linger_ns: config.timeout_ns(config.closed_linger, "closed_linger")?,
        max_flows: config.max_flows,
        internal_nets,
        active_timeout_ns: config.active_timeout_ns(live_default)?,
        app_facts: plan.app_packets > 0,
        tstat_l7: plan.tstat_l7,
        owners: owners.map(|o| o as std::sync::Arc<dyn sonde_flow::Owners>),
        owner_cache: config.owner_cache,
        // Zeek's lifetimes read its states, shown or not.
        history: plan.history || config.zeek_lifetimes,
        zeek_lifetimes: config.zeek_lifetimes,
        features: plan.features.then_some(sonde_flow::features::FeaturesConfig { splt: config.splt_packets }),
        // Tstat's layout keeps Tstat's orientation (the first sender) as well as its rules.
        orient_by_port: config.layout == crate::config::FlowLayout::Sonde,
        // Tstat's counters and flow ends, kept only for its layout.
        tstat: config.layout == crate::config::FlowLayout::Tstat,
        ..FlowConfig::default()
    };
    let app = sonde_engine::AppConfig {
        packets: plan.app_packets,
        dns_cache: config.dns_cache,
        udp_idle_ns: flow.udp_idle_ns,
        tstat: plan.tstat_l7,
    };
    let thin = config.thin_params.for_run(config.thin)?;
    Ok(Checked { workers, interval_cfg, flow, app, thin, outputs, store_spec, notes })
}

/// `--ipfix`: the target and the messages' settings, checked.
fn ipfix(
    config: &AnalysisConfig,
) -> Result<Option<(sonde_ipfix::Target, sonde_ipfix::EncoderConfig, sonde_ipfix::ExportOptions)>> {
    let Some(target) = &config.ipfix else { return Ok(None) };
    let target = sonde_ipfix::Target::parse(target).map_err(anyhow::Error::msg)?;
    let cfg = sonde_ipfix::EncoderConfig {
        domain: config.ipfix_domain,
        mtu: config.ipfix_mtu,
        ..sonde_ipfix::EncoderConfig::default()
    };
    sonde_ipfix::Encoder::new(cfg.clone()).map_err(|e| anyhow::anyhow!("--ipfix-mtu: {e}"))?;
    // The file is created when the run starts; a missing directory is caught before the
    // output directory is made.
    if let sonde_ipfix::Target::File(path) = &target {
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
        anyhow::ensure!(dir.is_dir(), "--ipfix {}: no directory {}", path.display(), dir.display());
    }
    let options = sonde_ipfix::ExportOptions {
        udp_rate: (config.ipfix_rate > 0).then_some(config.ipfix_rate),
        // A trace waits for the exporter as well as it is read; live capture cannot.
        full_queue: if config.live { sonde_ipfix::FullQueue::DropAfterWait } else { sonde_ipfix::FullQueue::Wait },
    };
    Ok(Some((target, cfg, options)))
}

/// `--definitions` with `--definition-changes` scheduled, if given.
fn definitions(config: &AnalysisConfig) -> Result<Option<Counter>> {
    let Some(path) = &config.definitions else {
        anyhow::ensure!(
            config.definition_changes.is_none(),
            "{} needs {}",
            config.name("definition_changes"),
            config.name("definitions")
        );
        return Ok(None);
    };
    // The counter's intervals are the run's whether or not its interval outputs are written.
    let mut counter = settings::load_definitions(
        path,
        config.interval_ns()?,
        config.definition_fids,
        config.definition_name_max.into(),
    )?;
    counter.set_written_samples(config.association_samples);
    if let Some(path) = &config.definition_changes {
        counter.schedule(settings::load_changes(path)?);
    }
    Ok(Some(counter))
}

/// What the run computes for the outputs it writes (`--outputs`): a fact no output shows is not
/// computed. With every output (the default) this is what the options ask for.
pub(crate) struct Plan {
    /// Interval statistics: an interval output is written, or the store, Kafka or a live
    /// run's views take them.
    pub(crate) intervals: bool,
    /// The RMON2 tables (`--tables`): a table is written, or a live run shows them.
    pub(crate) tables: bool,
    /// Payload packets read for application facts: `--app-packets` if an output shows the
    /// facts (a flow log, a table by application, Kafka's flows, a live run's flow table), else 0.
    pub(crate) app_packets: u8,
    /// Owners looked up (`--geoip`, `--asn`): an output shows them (sonde's flow logs, Kafka's
    /// flows, a live run's flow table).
    pub(crate) owners: bool,
    /// Zeek's states and history followed: an output shows them (as `owners`).
    pub(crate) history: bool,
    /// TCP flows read as Tstat's classifier does (and DNS queries timed): Tstat's layout is
    /// written with the application facts.
    pub(crate) tstat_l7: bool,
    /// NFStream's flow features (`--features ml`): sonde's flow logs are written.
    pub(crate) features: bool,
}

impl Plan {
    pub(crate) fn of(config: &AnalysisConfig, outputs: &Outputs) -> Plan {
        // A live run's dashboard, spool and reloads show what the run computes: all of it.
        let elsewhere = config.live || config.kafka.is_some();
        let sonde_flows =
            config.layout == crate::config::FlowLayout::Sonde && (elsewhere || outputs.wants_sonde_flow_log());
        let app_packets = if elsewhere || outputs.shows_application() { config.app_packets } else { 0 };
        Plan {
            intervals: elsewhere || config.store.is_some() || outputs.wants_any(&OutputFile::INTERVALS) || {
                config.tables && outputs.wants_any(&OutputFile::TABLES)
            },
            tables: elsewhere || outputs.wants_any(&OutputFile::TABLES),
            app_packets,
            owners: (config.geoip.is_some() || config.asn.is_some()) && sonde_flows,
            history: sonde_flows,
            tstat_l7: config.layout == crate::config::FlowLayout::Tstat && app_packets > 0,
            features: config.features.contains(&crate::config::FeatureSet::Ml) && sonde_flows,
        }
    }
}
