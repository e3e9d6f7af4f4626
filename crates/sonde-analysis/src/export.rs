//! The run's exporters' glue: the Kafka producer's settings from the config, each worker's IPFIX
//! feed, and a live run's intervals published to Kafka as they close.

use anyhow::Result;
use sonde_engine::{Drain, DrainObserver, Held, Part, Undrained};
use sonde_flow::{FlowRecord, FlowSink, RttSample};
use sonde_output::summary::{IpfixSummary, KafkaSummary, Summary};
use sonde_stats::Report;

use crate::AnalysisConfig;

/// The exporter's settings from `--kafka*`, checked.
pub fn kafka_config(args: &AnalysisConfig, brokers: &str) -> Result<sonde_kafka::Config> {
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
    cfg.probe = probe_id(args)?;
    cfg.topic = args.kafka_topic.clone();
    cfg.interval_topic = Some(args.kafka_interval_topic.clone()).filter(|t| !t.is_empty());
    cfg.histogram_topic = Some(args.kafka_histogram_topic.clone()).filter(|t| !t.is_empty());
    cfg.queue = args.kafka_queue;
    cfg.flush_timeout = std::time::Duration::from_secs_f64(flush);
    cfg.options = args.kafka_option.clone();
    Ok(cfg)
}

/// The probe's id: `--probe-id`, or the host name; checked ([`sonde_kafka::valid_probe_id`]).
pub fn probe_id(args: &AnalysisConfig) -> Result<String> {
    let id = match &args.probe_id {
        Some(id) => id.clone(),
        None => {
            let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
            let host = host.trim();
            anyhow::ensure!(
                sonde_kafka::valid_probe_id(host),
                "the host name {host:?} cannot be a probe id (1 to 64 of A-Z a-z 0-9 . _ -): give --probe-id"
            );
            host.to_string()
        }
    };
    anyhow::ensure!(sonde_kafka::valid_probe_id(&id), "--probe-id {id:?}: 1 to 64 of A-Z a-z 0-9 . _ - expected");
    Ok(id)
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
    fn icmp(&mut self, record: &sonde_flow::IcmpRecord) {
        self.sink.icmp(&sonde_output::shown_icmp(record, self.anon.as_mut()));
    }
}

/// A live run's intervals to Kafka as additive contributions (docs/kafka.md, "Merging"): at
/// each drain, the packet intervals every reader has closed, with the flow statistics of the
/// flows ended by then, and what flows ended since add to intervals published before; at the
/// end, the rest. Goes before an observer that takes the held intervals (`--spool`'s rotation).
pub struct IntervalPublisher<'a> {
    pub exporter: &'a sonde_kafka::Exporter,
    pub live: sonde_kafka::LiveIntervals,
}

impl<P: Part> DrainObserver<P> for IntervalPublisher<'_> {
    fn drained(&mut self, drain: &Drain, held: &mut Held<P>) {
        let new = &held.packets[held.packets.len().saturating_sub(held.new_packets)..];
        let contributions = self.live.drained(drain.reader, drain.clock_ns, new, &[&held.new_flows]);
        self.exporter.publish(&contributions);
    }

    fn wants_new_flows(&self) -> bool {
        true
    }

    fn finished(&mut self, rest: &Undrained<'_>) {
        self.exporter.publish(&self.live.finished(rest.packets, &rest.flows));
    }
}

/// The summary's section of an IPFIX export to `target`, from its counters.
pub fn ipfix_summary(target: &str, domain: u32, stats: sonde_ipfix::ExportStats) -> IpfixSummary {
    IpfixSummary {
        target: target.to_string(),
        domain,
        messages: stats.messages,
        bytes: stats.bytes,
        records: stats.records,
        dropped_records: stats.dropped_records,
        failed_messages: stats.failed_messages,
        failed_records: stats.failed_records,
        last_error: stats.last_error,
    }
}

/// Ends a Kafka export: a trace's intervals go out now (analyze has them only at its end; a
/// live run published its own as they closed, `live_published`), then the queue drains within
/// --kafka-flush-timeout; the summary's section from the counters.
pub fn finish_kafka(exporter: sonde_kafka::Exporter, intervals: Option<&Report>, live_published: bool) -> KafkaSummary {
    let config = exporter.config();
    let topics = config.interval_topic.is_some() || config.histogram_topic.is_some();
    if let (Some(report), false, true) = (intervals, live_published, topics) {
        exporter.publish(&sonde_kafka::Contributions::of_report(report));
    }
    let cfg = exporter.config().clone();
    kafka_summary(&cfg, exporter.finish())
}

/// The summary's section of a Kafka export configured as `cfg`, from its counters.
pub fn kafka_summary(cfg: &sonde_kafka::Config, stats: sonde_kafka::Stats) -> KafkaSummary {
    KafkaSummary {
        brokers: cfg.brokers.clone(),
        topic: cfg.topic.clone(),
        interval_topic: cfg.interval_topic.clone(),
        histogram_topic: cfg.histogram_topic.clone(),
        sent: stats.sent,
        flows: stats.flows,
        interim: stats.interim,
        intervals: stats.intervals,
        histograms: stats.histograms,
        delivered: stats.delivered,
        dropped_queue_full: stats.dropped_queue_full,
        failed: stats.failed,
        undelivered_at_exit: stats.undelivered_at_exit,
        last_error: stats.last_error,
    }
}

/// The IPFIX exporter's counters for `/metrics`, read at each scrape.
pub fn ipfix_metrics(live: sonde_ipfix::LiveStats) -> sonde_http::ExportCounters {
    Box::new(move || ipfix_counters(&ipfix_summary("", 0, live.stats())))
}

/// The Kafka exporter's counters for `/metrics`, read at each scrape.
pub fn kafka_metrics(exporter: &sonde_kafka::Exporter) -> sonde_http::ExportCounters {
    let (cfg, live) = (exporter.config().clone(), exporter.live());
    Box::new(move || kafka_counters(&kafka_summary(&cfg, live.stats())))
}

/// A finished run's exporters' counters for `/metrics`, from its summary.
pub fn final_metrics(summary: &Summary) -> sonde_http::ExportCounters {
    let (kafka, ipfix) = (summary.kafka.clone(), summary.ipfix.clone());
    Box::new(move || {
        let mut counters = kafka.as_ref().map(kafka_counters).unwrap_or_default();
        counters.extend(ipfix.as_ref().map(ipfix_counters).unwrap_or_default());
        counters
    })
}

/// The IPFIX exporter's counters.
fn ipfix_counters(s: &IpfixSummary) -> Vec<sonde_http::ExportCounter> {
    let counter = |name, help, labels, value| sonde_http::ExportCounter { name, help, labels, value };
    let messages = "IPFIX messages (templates included) handed to the socket or file (sent) or that could not be.";
    let records =
        "IPFIX data records: sent, dropped (the exporter's queue stayed full), failed (in messages that could not be sent).";
    vec![
        counter("sonde_ipfix_messages_total", messages, vec![("outcome", "sent")], s.messages),
        counter("sonde_ipfix_messages_total", messages, vec![("outcome", "failed")], s.failed_messages),
        counter("sonde_ipfix_records_total", records, vec![("outcome", "sent")], s.records),
        counter("sonde_ipfix_records_total", records, vec![("outcome", "dropped")], s.dropped_records),
        counter("sonde_ipfix_records_total", records, vec![("outcome", "failed")], s.failed_records),
        counter("sonde_ipfix_bytes_total", "IPFIX bytes handed to the socket or file.", vec![], s.bytes),
    ]
}

/// The Kafka exporter's counters.
fn kafka_counters(s: &KafkaSummary) -> Vec<sonde_http::ExportCounter> {
    let counter = |name, help, labels, value| sonde_http::ExportCounter { name, help, labels, value };
    let messages_help = "Kafka messages: accepted into the producer's queue (sent), acknowledged by the brokers \
        (delivered), dropped because the queue was full, failed.";
    let records_help =
        "Kafka messages accepted into the queue, by record: flows ended, interim records of flows open, \
        contributions to intervals and to their histograms.";
    let messages =
        |outcome, value| counter("sonde_kafka_messages_total", messages_help, vec![("outcome", outcome)], value);
    let records = |kind, value| counter("sonde_kafka_records_total", records_help, vec![("record", kind)], value);
    vec![
        messages("sent", s.sent),
        messages("delivered", s.delivered),
        messages("dropped_queue_full", s.dropped_queue_full),
        messages("failed", s.failed),
        records("flow", s.flows - s.interim),
        records("interim", s.interim),
        records("interval", s.intervals),
        records("histogram", s.histograms),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `/metrics` counts each record kind, the histogram contributions included.
    #[test]
    fn kafka_counters_count_each_record_kind() {
        let mut cfg = sonde_kafka::Config::new("127.0.0.1:9092");
        cfg.probe = "p1".into();
        let stats = sonde_kafka::Stats {
            sent: 17,
            delivered: 17,
            flows: 5,
            interim: 2,
            intervals: 4,
            histograms: 8,
            ..Default::default()
        };
        let summary = kafka_summary(&cfg, stats);
        assert_eq!(summary.histogram_topic.as_deref(), Some("sonde-histograms"));
        let records: Vec<(&str, u64)> = kafka_counters(&summary)
            .into_iter()
            .filter(|c| c.name == "sonde_kafka_records_total")
            .map(|c| (c.labels[0].1, c.value))
            .collect();
        assert_eq!(records, [("flow", 3), ("interim", 2), ("interval", 4), ("histogram", 8)]);
    }
}
