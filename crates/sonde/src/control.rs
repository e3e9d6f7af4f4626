//! `sonde control publish|status`: one definitions file published once on the Kafka control
//! topic that every `sonde monitor --kafka-control` follows, and the probes' reports
//! (docs/kafka.md, "Control topic").

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Subcommand;
use sonde_kafka::control::{self, ControlConfig, PublishError};

#[derive(Debug, Subcommand)]
pub enum ControlCommand {
    /// Publish a definitions file as the control topic's next version (the newest + 1; 1 on an
    /// empty topic), after checking that it parses. Every probe following the topic applies it
    /// at its next packet.
    ///
    /// Example: sonde control publish --kafka broker:9092 --expect-version 3 web.defs
    ///
    /// Exit status: 0 published; 1 nothing published (the file does not parse, the topic is
    /// at another version than --expect-version, or the broker did not answer).
    Publish(PublishArgs),
    /// The control topic's newest version, and each probe's newest report: the version it
    /// applies and since when (packet time), or why it refused the newest.
    ///
    /// Exit status: 0 read; 1 the broker did not answer.
    Status(StatusArgs),
}

/// Where the topics are.
#[derive(Debug, clap::Args)]
pub struct TopicArgs {
    /// The bootstrap brokers, HOST:PORT[,HOST:PORT…].
    #[arg(long, value_name = "BROKERS", required = true)]
    pub kafka: String,
    /// The control topic (compacted, one partition; created so if missing).
    #[arg(long, value_name = "TOPIC", default_value = "sonde-control")]
    pub control_topic: String,
    /// Seconds each wait on the brokers may last.
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    pub timeout: f64,
    /// A librdkafka property, KEY=VALUE (repeatable): TLS, SASL…
    #[arg(long, value_name = "KEY=VALUE", value_parser = sonde_kafka::parse_option)]
    pub kafka_option: Vec<(String, String)>,
}

#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub topics: TopicArgs,
    /// The topic the probes report to.
    #[arg(long, value_name = "TOPIC", default_value = "sonde-probes")]
    pub status_topic: String,
}

#[derive(Debug, clap::Args)]
pub struct PublishArgs {
    #[command(flatten)]
    pub topics: TopicArgs,
    /// Publish only if the topic's newest version is N (0: nothing published yet): a change
    /// made against a version someone else has replaced is refused, not lost.
    #[arg(long, value_name = "N")]
    pub expect_version: Option<u64>,
    /// The definitions file (docs/definitions.md).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
}

impl TopicArgs {
    pub fn config(&self) -> Result<ControlConfig> {
        anyhow::ensure!(!self.kafka.trim().is_empty(), "--kafka needs HOST:PORT[,HOST:PORT…]");
        anyhow::ensure!(!self.control_topic.is_empty(), "--control-topic cannot be empty");
        Ok(ControlConfig {
            brokers: self.kafka.clone(),
            options: self.kafka_option.clone(),
            timeout: sonde_analysis::monitor::timeout(self.timeout, "--timeout")?,
        })
    }
}

pub fn run(cmd: &ControlCommand) -> Result<ExitCode> {
    match cmd {
        ControlCommand::Publish(args) => publish(args),
        ControlCommand::Status(args) => status(args),
    }
}

fn publish(args: &PublishArgs) -> Result<ExitCode> {
    let path = &args.file;
    // As --definitions reads a file: the same checks, the same messages (names under the default
    // limit: each probe checks its own).
    let (text, defs) = sonde_engine::settings::read_definitions(path, sonde_define::MAX_NAME_BYTES)?;
    let cfg = args.topics.config()?;
    match control::publish(&cfg, &args.topics.control_topic, args.expect_version, &text) {
        Ok(m) => {
            println!("published version {} ({} definitions) to {}", m.version, defs.len(), args.topics.control_topic);
            Ok(ExitCode::SUCCESS)
        }
        Err(e @ PublishError::Conflict { .. }) => {
            eprintln!("sonde: {e}");
            Ok(ExitCode::FAILURE)
        }
        Err(PublishError::Kafka(e)) => Err(anyhow::Error::msg(e)),
    }
}

fn status(args: &StatusArgs) -> Result<ExitCode> {
    anyhow::ensure!(!args.status_topic.is_empty(), "--status-topic cannot be empty");
    let cfg = args.topics.config()?;
    let (newest, _) = control::latest(&cfg, &args.topics.control_topic).map_err(anyhow::Error::msg)?;
    match newest {
        Some(m) => println!(
            "{}: version {}, published {}",
            args.topics.control_topic,
            m.version,
            sonde_types::time::utc(m.published as i64)
        ),
        None => println!("{}: nothing published", args.topics.control_topic),
    }
    let probes = control::statuses(&cfg, &args.status_topic).map_err(anyhow::Error::msg)?;
    for r in probes.values() {
        let since = r.since.map_or("its first packet".to_string(), |s| format!("{s:.6}"));
        let mut line = format!(
            "probe {}: version {} since {since} (definitions version {}), reported {}",
            r.probe,
            r.control_version,
            r.definitions_version,
            sonde_types::time::utc(r.at as i64)
        );
        if let Some(e) = &r.error {
            let which = r.failed_version.map_or(String::new(), |v| format!(" version {v}"));
            line.push_str(&format!("; refused{which}: {e}"));
        }
        println!("{line}");
    }
    Ok(ExitCode::SUCCESS)
}
