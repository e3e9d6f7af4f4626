//! The run's exporters' glue: the Kafka producer's settings from the flags, each worker's IPFIX
//! feed, and a live run's intervals published to Kafka as they close.

use anyhow::Result;
use sonde_engine::{Drain, DrainObserver, Held, Part};
use sonde_flow::{FlowRecord, FlowSink, RttSample};
use sonde_stats::{FlowIntervals, PacketInterval, Report};

use crate::flags::AnalysisArgs;

/// The exporter's settings from `--kafka*`, checked.
pub fn kafka_config(args: &AnalysisArgs, brokers: &str) -> Result<sonde_kafka::Config> {
    anyhow::ensure!(!brokers.trim().is_empty(), "--kafka needs HOST:PORT[,HOST:PORT…]");
    anyhow::ensure!(!args.kafka_topic.is_empty(), "--kafka-topic cannot be empty");
    // librdkafka's own limits for queue.buffering.max.messages.
    anyhow::ensure!((1..=2_147_483_647).contains(&args.kafka_queue), "--kafka-queue is from 1 to 2147483647");
    let flush = args.kafka_flush_timeout;
    anyhow::ensure!(
        flush.is_finite() && (0.0..=86_400.0).contains(&flush),
        "--kafka-flush-timeout is in seconds, 0 to 86400"
    );
    let mut cfg = sonde_kafka::Config::new(brokers);
    cfg.topic = args.kafka_topic.clone();
    cfg.interval_topic = Some(args.kafka_interval_topic.clone()).filter(|t| !t.is_empty());
    cfg.queue = args.kafka_queue;
    cfg.flush_timeout = std::time::Duration::from_secs_f64(flush);
    cfg.options = args.kafka_option.clone();
    Ok(cfg)
}

/// A worker's feed of the IPFIX exporter: records leave as the flow logs show them
/// (anonymised under `--anonymize`).
pub struct IpfixFeed {
    pub sink: sonde_ipfix::ExportSink,
    pub anon: Option<sonde_anon::Anonymizer>,
}

impl FlowSink for IpfixFeed {
    fn flow(&mut self, record: &FlowRecord) {
        match self.anon.as_mut() {
            Some(anon) => self.sink.flow(&sonde_output::anonymized_record(record, anon)),
            None => self.sink.flow(record),
        }
    }
    fn rtt_sample(&mut self, _: &RttSample) {}
    fn interim(&mut self, record: &FlowRecord) {
        self.flow(record);
    }
}

/// Publishes each interval of a report to Kafka, but those up to `after` (published already);
/// returns the highest index published.
pub fn publish_intervals(exporter: &sonde_kafka::Exporter, report: &Report, after: Option<u64>) -> Result<Option<u64>> {
    let mut fresh = report.clone();
    fresh.intervals.retain(|&i, _| after.is_none_or(|a| i > a));
    let Some(&newest) = fresh.intervals.keys().next_back() else { return Ok(after) };
    let files = fresh.render().map_err(|e| anyhow::anyhow!("rendering the intervals for Kafka: {e}"))?;
    if let Some((_, text)) = files.iter().find(|(name, _)| *name == sonde_output::OutputFile::Intervals.name()) {
        exporter.publish_intervals(text);
    }
    Ok(Some(newest))
}

/// A live run's intervals to Kafka as they close: at each drain, the packet intervals closed
/// since the last, with the flow statistics of the flows ended by then (as the dashboard shows
/// them; a flow ending later is charged to the interval of its last packet in intervals.tsv
/// only). Goes before an observer that takes the held intervals (`--spool`'s rotation).
pub struct IntervalPublisher<'a> {
    pub exporter: &'a sonde_kafka::Exporter,
    pub cfg: sonde_stats::Config,
    pub anonymizer: Option<sonde_anon::Anonymizer>,
    /// The highest interval index published.
    pub published: Option<u64>,
}

impl<P: Part> DrainObserver<P> for IntervalPublisher<'_> {
    fn drained(&mut self, _: &Drain, held: &mut Held<P>) {
        let fresh: Vec<PacketInterval> =
            held.packets.iter().filter(|p| self.published.is_none_or(|a| p.index > a)).cloned().collect();
        let (Some(first), Some(newest)) = (fresh.iter().map(|p| p.index).min(), fresh.iter().map(|p| p.index).max())
        else {
            return;
        };
        let mut flows = FlowIntervals::new(&self.cfg);
        if let Some(held_flows) = &held.flows {
            flows.absorb(held_flows.intervals.range(first..=newest).map(|(i, f)| (*i, f.clone())).collect());
        }
        let mut report = Report::new(&self.cfg, fresh, vec![flows]);
        if let Some(anon) = &self.anonymizer {
            report.anonymize(&mut anon.clone());
        }
        match publish_intervals(self.exporter, &report, self.published) {
            Ok(newest) => self.published = newest,
            Err(e) => eprintln!("sonde: warning: {e}"),
        }
    }
}
