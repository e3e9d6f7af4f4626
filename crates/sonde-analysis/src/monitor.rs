//! `sonde monitor`: the analysis of `analyze`, fed by live interfaces (sonde-live) until SIGINT
//! or SIGTERM, then every open flow and interval flushed and every output written.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::ValueEnum;
use sonde_engine::Progress;
use sonde_live::{Backend, LiveSource};

use crate::serve::HttpLimits;
use crate::{controls, serve, Analysis, AnalysisConfig, Finished, FlowLayout, LiveOptions};

/// The capture's settings and counters, for summary.json.
use sonde_output::summary::{CaptureSummary, InterfaceCounters};

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Capture {
    /// Linux AF_PACKET with a TPACKET_V3 memory-mapped ring.
    Afpacket,
    /// libpcap.
    Pcap,
}

/// What `monitor` is told beyond the analysis: the capture, the live views and the spool.
#[derive(Debug, clap::Args)]
pub struct MonitorConfig {
    /// Interface to capture on; repeat for several (their frames are merged by timestamp).
    #[arg(short = 'i', long = "interface", value_name = "IFACE", required = true)]
    pub interfaces: Vec<String>,
    /// Capture mechanism.
    #[arg(long, value_enum, default_value = "afpacket")]
    pub capture: Capture,
    /// Per interface: the ring's size in MiB (afpacket), or libpcap's buffer (pcap).
    #[arg(long, value_name = "MIB", default_value_t = 64)]
    pub ring_mb: usize,
    /// Put the interfaces in promiscuous mode while capturing.
    #[arg(long)]
    pub promisc: bool,
    /// Once the capture is open, become this user (and its group) before reading a packet.
    #[arg(long, value_name = "NAME")]
    pub user: Option<String>,
    /// Milliseconds without a packet after which packet time moves on by itself (the idle tick:
    /// intervals close and flows time out on a quiet link).
    #[arg(long, value_name = "MS", default_value_t = 100)]
    pub tick_ms: u64,
    /// Readers, each with its own AF_PACKET socket of a PACKET_FANOUT group per interface: the
    /// kernel spreads the flows over them by a symmetric hash, and each reader analyses its share
    /// with its own workers (--threads per reader; default 1, in the reader's thread). Not with
    /// --definitions (counted in input order by one reader).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub readers: usize,
    /// While capturing, serve the live run (JSON API, stream, Prometheus /metrics, dashboard;
    /// docs/http.md) on ADDR, e.g. 127.0.0.1:8080 (port 0: any free one). Definitions can be
    /// added, replaced and removed there while the capture runs.
    #[arg(long, value_name = "ADDR")]
    pub http: Option<std::net::SocketAddr>,
    /// File holding the bearer token the HTTP API requires (needed when ADDR is not loopback;
    /// default: the SONDE_HTTP_TOKEN environment variable).
    #[arg(long, value_name = "FILE")]
    pub http_token: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub http_limits: HttpLimits,
    /// Write the outputs in chunks into this storage location, with an optional byte quota
    /// (K, M, G, T: powers of 1024), e.g. /data1:500G; repeat for more: when one is at its quota
    /// the chunks continue in the next. Each location's manifest.tsv lists the files complete
    /// and safe to move (docs/spool.md).
    #[arg(long, value_name = "PATH[:QUOTA]")]
    pub spool: Vec<sonde_spool::Location>,
    /// With --spool: seconds of packet time per chunk (aligned, as Tstat's hourly directories).
    #[arg(long, value_name = "SECONDS", default_value_t = 3600.0)]
    pub rotate: f64,
    /// With --spool: also end a chunk when its flow logs reach this many bytes (K, M, G, T).
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    pub rotate_size: Option<u64>,
    #[command(flatten)]
    pub control: KafkaControl,
    #[command(flatten)]
    pub analysis: AnalysisConfig,
}

/// `monitor --kafka-control`: the definitions follow the Kafka control topic (docs/kafka.md,
/// "Control topic").
#[derive(Debug, clap::Args)]
pub struct KafkaControl {
    /// With --kafka: start with the control topic's newest definitions (in place of
    /// --definitions') and apply each new version published (`sonde control publish`) at the
    /// next packet; report the version applied to --kafka-status-topic.
    #[arg(long)]
    pub kafka_control: bool,
    /// The control topic (compacted, one partition; created so if missing).
    #[arg(long, value_name = "TOPIC", default_value = "sonde-control")]
    pub kafka_control_topic: String,
    /// The topic the probe reports the version it applies to (compacted, keyed by probe id).
    #[arg(long, value_name = "TOPIC", default_value = "sonde-probes")]
    pub kafka_status_topic: String,
    /// Seconds the start may wait for the brokers (reading the control topic to its end).
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    pub kafka_control_timeout: f64,
}

fn parse_bytes(text: &str) -> Result<u64, String> {
    sonde_spool::parse_quota_bytes(text).map_err(|_| {
        format!("'{text}': expected a number of bytes, optionally followed by K, M, G or T (powers of 1024)")
    })
}

/// Captures on the interfaces of `args` until SIGINT or SIGTERM (the run's notes on stderr
/// unless `-q`, as a service logs), `progress` seeing it go, then writes every output but the
/// summary, which `finish` writes and says (its answer is the run's).
pub fn monitor<T>(
    args: &MonitorConfig,
    progress: Option<Box<dyn FnMut(Progress) + Send>>,
    finish: impl FnOnce(&Finished) -> Result<T>,
) -> Result<T> {
    check(args)?;
    let stop = sonde_live::stop_on_signals().context("installing the SIGINT/SIGTERM handlers")?;
    let reload = sonde_live::reload_on_sighup().context("installing the SIGHUP handler")?;
    // The address is checked and bound before the capture opens.
    let server =
        args.http.map(|addr| serve::prepare(addr, args.http_token.as_deref(), &args.http_limits)).transpose()?;
    let cfg = args.capture_config()?;
    let input_name = args.interfaces.join(",");
    // The control topic read to its end before the capture opens: a broker that does not
    // answer stops the run here.
    let control_start = match (args.control.kafka_control, &args.analysis.kafka) {
        (true, Some(brokers)) => Some(ControlStart::read(args, brokers)?),
        _ => None,
    };
    let analysis = AnalysisConfig { live: true, ..args.analysis.clone() };
    let (mut prepared, mut sources) = Analysis::prepare(analysis, || {
        Ok(match args.readers {
            1 => vec![LiveSource::open(&cfg, stop)?],
            n => LiveSource::open_fanout(&cfg, n, stop)?,
        })
    })?;
    if !args.analysis.quiet {
        prepared.notes.drain(..).for_each(|note| eprintln!("sonde: {note}"));
    }
    prepared.create_outputs()?;
    if args.readers > 1 {
        prepared.set_workers(args.analysis.threads.unwrap_or(1));
    }
    let control = match control_start {
        Some(start) => Some(start.follow(args, &mut prepared)?),
        None => None,
    };
    let (edits_tx, edits) = crossbeam_channel::unbounded();
    let mut opts = live_options(args, reload, edits, control.as_ref().map(|(link, _)| link), &input_name);
    if !args.spool.is_empty() {
        let every = sonde_spool::Every { span_ns: (args.rotate * 1e9).round() as u64, max_bytes: args.rotate_size };
        let shape = prepared.chunk_shape();
        opts.rotation = Some(
            sonde_spool::Rotation::open(args.spool.clone(), every, shape, args.analysis.quiet).context("--spool")?,
        );
    }
    let server = match server {
        Some(server) => {
            Some(serve_live(args, server, &mut prepared, &mut opts, edits_tx, control.as_ref(), &input_name)?)
        }
        None => None,
    };
    if let Some(user) = &args.user {
        sonde_live::drop_to_user(user)?;
        check_writable(&args.analysis.out, user)?;
    }
    if !args.analysis.quiet {
        eprintln!(
            "sonde: capturing on {input_name} ({}); SIGINT or SIGTERM ends and writes the outputs",
            sonde_capture::PacketSource::format(&sources[0])
        );
    }
    let mut readers: Vec<&mut (dyn sonde_capture::PacketSource + Send)> =
        sources.iter_mut().map(|s| s as &mut (dyn sonde_capture::PacketSource + Send)).collect();
    let state = opts.state.clone();
    let started_unix_s = opts.started_unix_s;
    let mut finished = prepared.write(&mut readers, (&input_name, None), Some(opts), progress)?;
    drop(readers);
    finished.report.interrupted_by = sonde_live::stopped_by().map(str::to_string);
    capture_outputs(args, &cfg, &sources, &mut finished);
    if let Some(rotation) = finished.rotation.take() {
        // The outputs in the directory are the last chunk: into the spool with the others.
        finished.report.spool = Some(rotation.finish(&args.analysis.out, &finished.report.outputs)?);
    }
    if let Some((link, follower)) = control {
        drop(follower);
        // Checked at start (ControlStart::read).
        link.flush(std::time::Duration::from_secs_f64(args.control.kafka_control_timeout));
        finished.report.control = Some(link.summary());
    }
    let done = finish(&finished)?;
    if let (Some(server), Some(state)) = (server, &state) {
        // The finished run, as `analyze --http` would serve it, then the server stops.
        let mut last = serve::finished_snapshot(&finished, started_unix_s)?;
        last.live = state.snapshot().live.clone();
        state.publish(last);
        server.stop().context("stopping the http server")?;
    }
    Ok(done)
}

/// The checks of `monitor`'s own settings (the analysis' are [`Analysis::prepare`]'s).
fn check(args: &MonitorConfig) -> Result<()> {
    anyhow::ensure!(args.ring_mb > 0, "--ring-mb must be at least 1");
    anyhow::ensure!(args.tick_ms > 0, "--tick-ms must be at least 1");
    anyhow::ensure!(args.readers >= 1, "--readers must be at least 1");
    anyhow::ensure!(
        args.analysis.layout == FlowLayout::Sonde || (args.http.is_none() && args.spool.is_empty()),
        "--http and --spool show and rotate sonde's flow logs: they take --layout sonde"
    );
    anyhow::ensure!(
        !args.spool.is_empty() || args.rotate_size.is_none(),
        "--rotate-size needs --spool (the locations the chunks go to)"
    );
    anyhow::ensure!(
        args.spool.is_empty() || (args.rotate.is_finite() && args.rotate >= 0.001),
        "--rotate must be at least 0.001 seconds"
    );
    anyhow::ensure!(
        args.readers == 1 || args.analysis.definitions.is_none(),
        "--readers {} cannot count --definitions: definitions are counted in input order by one reader",
        args.readers
    );
    anyhow::ensure!(
        !args.control.kafka_control || args.analysis.kafka.is_some(),
        "--kafka-control needs --kafka (the brokers of the control topic)"
    );
    anyhow::ensure!(
        args.readers == 1 || !args.control.kafka_control,
        "--readers {} cannot follow --kafka-control: definitions are counted in input order by one reader",
        args.readers
    );
    anyhow::ensure!(
        !args.control.kafka_control || args.analysis.definition_changes.is_none(),
        "--kafka-control takes the definitions' changes from the control topic, not --definition-changes"
    );
    Ok(())
}

impl MonitorConfig {
    /// The capture's settings.
    fn capture_config(&self) -> Result<sonde_live::Config> {
        Ok(sonde_live::Config {
            interfaces: self.interfaces.clone(),
            backend: match self.capture {
                Capture::Afpacket => Backend::AfPacket,
                Capture::Pcap => Backend::Pcap,
            },
            buffer_bytes: self.ring_mb.saturating_mul(1 << 20),
            promisc: self.promisc,
            tick_ns: self.tick_ms.saturating_mul(1_000_000),
            interval_ns: self.analysis.interval_ns()?,
        })
    }
}

/// Each reader's controls: the API's edits (`edits`), SIGHUP's reloads (definitions and the
/// networks of a file), the control topic's versions (`control`, to the first reader).
fn live_options(
    args: &MonitorConfig,
    reload: &'static std::sync::atomic::AtomicBool,
    edits: crossbeam_channel::Receiver<sonde_engine::Edit>,
    control: Option<&Arc<controls::ControlLink>>,
    input_name: &str,
) -> LiveOptions {
    // Always live: drains every half second feed the HTTP state (with --http) and let SIGHUP
    // reload the definitions at the packet it reaches.
    let reloader = Arc::new(controls::Reloader::new(reload, args.analysis.definitions.clone(), {
        // Networks in a file are the configuration SIGHUP reloads.
        let (list, file) = (args.analysis.internal.clone(), args.analysis.internal_file.clone());
        file.map(|file| {
            Box::new(move || Ok(sonde_engine::settings::internal_nets(&list, Some(&file), "--internal")?))
                as Box<dyn Fn() -> Result<Vec<ipnet::IpNet>> + Send + Sync>
        })
    }));
    let quiet = args.analysis.quiet;
    LiveOptions {
        state: None,
        controls: (0..args.readers)
            .map(|i| {
                let hooks = controls::Hooks::new(edits.clone(), Some(reloader.clone()), quiet);
                let hooks = match (control, i) {
                    (Some(link), 0) => hooks.with_control(link.clone()),
                    _ => hooks,
                };
                Box::new(hooks) as Box<dyn sonde_engine::Controls>
            })
            .collect(),
        input: input_name.to_string(),
        started_unix_s: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64()),
        rotation: None,
    }
}

/// `--http` while capturing: the live state (the API's editor, the control link's and the
/// store's views) served in a thread of its own.
fn serve_live(
    args: &MonitorConfig,
    server: serve::Prepared,
    prepared: &mut Analysis,
    opts: &mut LiveOptions,
    edits: crossbeam_channel::Sender<sonde_engine::Edit>,
    control: Option<&(Arc<controls::ControlLink>, sonde_kafka::control::Follower)>,
    input_name: &str,
) -> Result<sonde_http::Background> {
    if args.readers == 1 {
        prepared.count_definitions()?;
    }
    let editor = Box::new(sonde_http::Editor { edits });
    let state =
        sonde_http::RunState::with_editor(server.starting(input_name, prepared.internal_networks), Some(editor));
    opts.started_unix_s = server.started_unix_s();
    if let Some((link, _)) = control {
        let link = link.clone();
        state.set_control(Box::new(move || link.json()));
    }
    if let Some(store) = &args.analysis.store {
        // Read at each request: the store as the last run left it until this one ends.
        state.set_store(store.clone());
    }
    opts.state = Some(state.clone());
    server.serve_live(state, args.analysis.quiet)
}

/// `capture.tsv` (the kernel's counters per interval) and summary.json's `capture`, from the
/// fanout sockets' counters added up per interval and per interface.
fn capture_outputs(args: &MonitorConfig, cfg: &sonde_live::Config, sources: &[LiveSource], finished: &mut Finished) {
    // The fanout sockets' counters, added up per interval and per interface.
    let counters = sonde_live::CaptureCounters::of(sources);
    if let Some(interval_ns) = cfg.interval_ns {
        let per_interval: Vec<_> = counters.per_interval.iter().map(|&(start, c)| (start, shown(c))).collect();
        match finished.out().write_capture(&per_interval, interval_ns) {
            Ok(file) => finished.report.outputs.push(file.name().to_string()),
            Err(e) => finished.report.output_errors.push(e.to_string()),
        }
    }
    let total = shown(counters.total());
    finished.report.capture = Some(CaptureSummary {
        backend: match args.capture {
            Capture::Afpacket => "afpacket",
            Capture::Pcap => "pcap",
        },
        buffer_bytes: cfg.buffer_bytes as u64,
        promisc: cfg.promisc,
        user: args.user.clone(),
        received_pkts: total.received_pkts,
        dropped_pkts: total.dropped_pkts,
        if_dropped_pkts: total.if_dropped_pkts,
        unread_pkts: counters.total().unread_pkts,
        interfaces: counters
            .per_interface
            .into_iter()
            .map(|(interface, c)| InterfaceCounters {
                interface,
                received_pkts: c.received_pkts,
                dropped_pkts: c.dropped_pkts,
                if_dropped_pkts: c.if_dropped_pkts,
                unread_pkts: c.unread_pkts,
            })
            .collect(),
        readers_received_pkts: if sources.len() > 1 { counters.per_source_received } else { Vec::new() },
    });
}

/// `--kafka-control` at start: the control topic read to its end.
struct ControlStart {
    cfg: sonde_kafka::control::ControlConfig,
    newest: Option<sonde_kafka::control::ControlMessage>,
    /// Where the follower starts: after the newest.
    offset: i64,
}

impl ControlStart {
    fn read(args: &MonitorConfig, brokers: &str) -> Result<ControlStart> {
        let c = &args.control;
        let cfg = sonde_kafka::control::ControlConfig {
            brokers: brokers.to_string(),
            options: args.analysis.kafka_option.clone(),
            timeout: timeout(c.kafka_control_timeout, "--kafka-control-timeout")?,
        };
        anyhow::ensure!(
            !c.kafka_control_topic.is_empty() && !c.kafka_status_topic.is_empty(),
            "--kafka-control-topic and --kafka-status-topic cannot be empty"
        );
        // Created if missing, so that the follower has a partition to follow.
        sonde_kafka::control::ensure_compacted_topic(&cfg, &c.kafka_control_topic).map_err(anyhow::Error::msg)?;
        let (newest, offset) =
            sonde_kafka::control::latest(&cfg, &c.kafka_control_topic).map_err(anyhow::Error::msg)?;
        Ok(ControlStart { cfg, newest, offset })
    }

    /// The newest definitions become the run's starting set (one that does not parse is
    /// refused and reported: the run starts with --definitions' set or none); the probe reports
    /// and a thread follows the topic.
    fn follow(
        self,
        args: &MonitorConfig,
        prepared: &mut Analysis,
    ) -> Result<(Arc<controls::ControlLink>, sonde_kafka::control::Follower)> {
        let c = &args.control;
        let status = sonde_kafka::control::StatusSender::connect(&self.cfg, &c.kafka_status_topic)
            .map_err(anyhow::Error::msg)?;
        let link = Arc::new(controls::ControlLink::new(
            crate::export::probe_id(&args.analysis)?,
            c.kafka_control_topic.clone(),
            c.kafka_status_topic.clone(),
            status,
            controls::ControlState { definitions_version: 1, ..Default::default() },
            controls::VersionLimits {
                definitions: args.http_limits.http_max_definitions,
                name_bytes: args.analysis.definition_name_max.into(),
            },
            args.analysis.quiet,
        ));
        let defs = self.newest.as_ref().and_then(|m| link.check(&m.definitions).ok());
        let version = self.newest.as_ref().filter(|_| defs.is_some()).map_or(0, |m| m.version);
        link.start_at(version);
        prepared.start_definitions(defs)?;
        link.report(None);
        if let Some(m) = self.newest.filter(|_| version == 0) {
            // Refused, and said why.
            link.offer(sonde_kafka::control::Followed::Version(m));
        }
        if !args.analysis.quiet {
            eprintln!("sonde: following {} as probe {}: control version {version}", c.kafka_control_topic, link.probe);
        }
        let to_link = link.clone();
        let mut last_error = String::new();
        let follower = sonde_kafka::control::Follower::start(
            &self.cfg,
            &c.kafka_control_topic,
            self.offset,
            move |followed| to_link.offer(followed),
            move |e| {
                // librdkafka retries by itself: each new error once.
                if e != last_error {
                    eprintln!("sonde: control topic: {e}");
                    last_error = e;
                }
            },
        )
        .map_err(anyhow::Error::msg)?;
        Ok((link, follower))
    }
}

/// `secs` as the timeout `name` of the control topic's calls (0.1 to 3600 seconds).
pub fn timeout(secs: f64, name: &str) -> Result<std::time::Duration> {
    anyhow::ensure!(secs.is_finite() && (0.1..=3600.0).contains(&secs), "{name} is 0.1 to 3600 seconds");
    Ok(std::time::Duration::from_secs_f64(secs))
}

/// The kernel's counters as the outputs show them.
fn shown(c: sonde_live::Counters) -> sonde_output::CaptureCounters {
    let (received_pkts, dropped_pkts, if_dropped_pkts) = (c.received_pkts, c.dropped_pkts, c.if_dropped_pkts);
    sonde_output::CaptureCounters { received_pkts, dropped_pkts, if_dropped_pkts }
}

/// After dropping to `user`, the outputs must still be writable: find out now, not after hours
/// of capture.
fn check_writable(dir: &Path, user: &str) -> Result<()> {
    let probe = dir.join(".sonde-write-check");
    // A new file: a link there is refused, never written through.
    let _ = std::fs::remove_file(&probe);
    std::fs::OpenOptions::new().write(true).create_new(true).open(&probe).with_context(|| {
        format!("--user {user} cannot write in {}: make it writable by {user} (chown) first", dir.display())
    })?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}
