//! `sonde monitor`: the analysis of `analyze`, fed by live interfaces (sonde-live) until SIGINT
//! or SIGTERM, then every open flow and interval flushed and every output written.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use sonde_live::{Backend, LiveSource};

use crate::flags::{CaptureArg, MonitorArgs};
use crate::{analysis, controls, http};
use sonde_analysis::LiveOptions;

/// The capture's settings and counters, for summary.json.
use sonde_output::summary::{CaptureSummary, InterfaceCounters};

pub fn run(args: &MonitorArgs) -> Result<ExitCode> {
    anyhow::ensure!(args.ring_mb > 0, "--ring-mb must be at least 1");
    anyhow::ensure!(args.tick_ms > 0, "--tick-ms must be at least 1");
    let stop = sonde_live::stop_on_signals().context("installing the SIGINT/SIGTERM handlers")?;
    let reload = sonde_live::reload_on_sighup().context("installing the SIGHUP handler")?;
    // The address is checked and bound before the capture opens.
    let server =
        args.http.map(|addr| http::prepare(addr, args.http_token.as_deref(), &args.http_limits)).transpose()?;
    let cfg = sonde_live::Config {
        interfaces: args.interfaces.clone(),
        backend: match args.capture {
            CaptureArg::Afpacket => Backend::AfPacket,
            CaptureArg::Pcap => Backend::Pcap,
        },
        buffer_bytes: args.ring_mb.saturating_mul(1 << 20),
        promisc: args.promisc,
        tick_ns: args.tick_ms.saturating_mul(1_000_000),
        interval_ns: args.analysis.interval_ns()?,
    };
    let input_name = args.interfaces.join(",");
    anyhow::ensure!(args.readers >= 1, "--readers must be at least 1");
    anyhow::ensure!(
        args.analysis.layout == sonde_analysis::FlowLayout::Sonde || (args.http.is_none() && args.spool.is_empty()),
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
    // The control topic read to its end before the capture opens: a broker that does not
    // answer stops the run here.
    let control_start = match (args.control.kafka_control, &args.analysis.kafka) {
        (true, Some(brokers)) => Some(ControlStart::read(args, brokers)?),
        _ => None,
    };
    let (mut prepared, mut sources) = analysis::prepare(&args.analysis, || {
        Ok(match args.readers {
            1 => vec![LiveSource::open(&cfg, stop)?],
            n => LiveSource::open_fanout(&cfg, n, stop)?,
        })
    })?;
    prepared.create_outputs()?;
    if args.readers > 1 {
        prepared.set_workers(args.analysis.threads.unwrap_or(1));
    }
    let control = match control_start {
        Some(start) => Some(start.follow(args, &mut prepared)?),
        None => None,
    };
    // Always live: drains every half second feed the HTTP state (with --http) and let SIGHUP
    // reload the definitions at the packet it reaches.
    let (edits_tx, edits) = crossbeam_channel::unbounded();
    let reloader = Arc::new(controls::Reloader::new(reload, args.analysis.definitions.clone(), {
        // Networks in a file are the configuration SIGHUP reloads.
        let (list, file) = (args.analysis.internal.clone(), args.analysis.internal_file.clone());
        file.map(|file| {
            Box::new(move || Ok(sonde_engine::settings::internal_nets(&list, Some(&file), "--internal")?))
                as Box<dyn Fn() -> Result<Vec<ipnet::IpNet>> + Send + Sync>
        })
    }));
    let quiet = args.analysis.quiet;
    let mut opts = LiveOptions {
        state: None,
        controls: (0..args.readers)
            .map(|i| {
                let hooks = controls::Hooks::new(edits.clone(), Some(reloader.clone()), quiet);
                let hooks = match (&control, i) {
                    (Some((link, _)), 0) => hooks.with_control(link.clone()),
                    _ => hooks,
                };
                Box::new(hooks) as Box<dyn sonde_engine::Controls>
            })
            .collect(),
        input: input_name.clone(),
        started_unix_s: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64()),
        rotation: None,
    };
    if !args.spool.is_empty() {
        let every = sonde_spool::Every { span_ns: (args.rotate * 1e9).round() as u64, max_bytes: args.rotate_size };
        let shape = prepared.chunk_shape();
        opts.rotation = Some(sonde_spool::Rotation::open(args.spool.clone(), every, shape, quiet).context("--spool")?);
    }
    let server = match server {
        Some(server) => {
            if args.readers == 1 {
                prepared.count_definitions()?;
            }
            let editor = Box::new(sonde_http::Editor { edits: edits_tx });
            let state = sonde_http::RunState::with_editor(server.starting(&input_name), Some(editor));
            opts.started_unix_s = server.started_unix_s();
            if let Some((link, _)) = &control {
                let link = link.clone();
                state.set_control(Box::new(move || link.json()));
            }
            if let Some(store) = &args.analysis.store {
                // Read at each request: the store as the last run left it until this one ends.
                state.set_store(store.clone());
            }
            opts.state = Some(state.clone());
            Some(server.serve_live(state, args.analysis.quiet)?)
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
    let progress = analysis::progress(&args.analysis);
    let mut finished = prepared.write(&mut readers, (&input_name, None), Some(opts), progress)?;
    drop(readers);
    finished.report.interrupted_by = sonde_live::stopped_by().map(str::to_string);
    // The fanout sockets' counters, added up per interval and per interface.
    let counters = sonde_live::CaptureCounters::of(&sources);
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
            CaptureArg::Afpacket => "afpacket",
            CaptureArg::Pcap => "pcap",
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
    let code = analysis::finish(&args.analysis, &finished)?;
    if let (Some(server), Some(state)) = (server, &state) {
        // The finished run, as `analyze --http` would serve it, then the server stops.
        let mut last = http::finished_snapshot(&finished, started_unix_s)?;
        last.live = state.snapshot().live.clone();
        state.publish(last);
        server.stop().context("stopping the http server")?;
    }
    Ok(code)
}

/// `--kafka-control` at start: the control topic read to its end.
struct ControlStart {
    cfg: sonde_kafka::control::ControlConfig,
    newest: Option<sonde_kafka::control::ControlMessage>,
    /// Where the follower starts: after the newest.
    offset: i64,
}

impl ControlStart {
    fn read(args: &MonitorArgs, brokers: &str) -> Result<ControlStart> {
        let c = &args.control;
        let cfg = sonde_kafka::control::ControlConfig {
            brokers: brokers.to_string(),
            options: args.analysis.kafka_option.clone(),
            timeout: crate::control::timeout(c.kafka_control_timeout, "--kafka-control-timeout")?,
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
        args: &MonitorArgs,
        prepared: &mut sonde_analysis::Analysis,
    ) -> Result<(Arc<controls::ControlLink>, sonde_kafka::control::Follower)> {
        let c = &args.control;
        let status = sonde_kafka::control::StatusSender::connect(&self.cfg, &c.kafka_status_topic)
            .map_err(anyhow::Error::msg)?;
        let link = Arc::new(controls::ControlLink::new(
            sonde_analysis::export::probe_id(&args.analysis)?,
            c.kafka_control_topic.clone(),
            c.kafka_status_topic.clone(),
            status,
            controls::ControlState { definitions_version: 1, ..Default::default() },
            args.http_limits.http_max_definitions,
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
