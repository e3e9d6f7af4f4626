//! Kafka export of a run (docs/kafka.md): each finished flow as one JSON message with the flow
//! log's field names (JSON Lines formatting of sonde-output) plus `"probe"` and `"proto"`, keyed
//! by the flow; each interval's rows of intervals.tsv and its histograms to two more topics, as
//! additive contributions keyed by the probe ([`intervals`]).
//!
//! Why rdkafka: librdkafka is the reference client (the idempotent producer, `acks=all`,
//! bounded local queue, retries and delivery reports are all built in and well proven), and
//! every TLS or SASL setting is one of its properties, passed through as given. rskafka, pure
//! Rust, has no idempotent producer and leaves queueing, retries and delivery accounting to us.
//!
//! One [`Exporter`] per run holds a `ThreadedProducer` shared by every worker (`Arc`): librdkafka's
//! produce call is thread-safe and never waits on the network (it only enqueues), so each
//! worker formats and enqueues its own flows in parallel; the producer's own thread serves the
//! delivery reports. A message that finds the queue full is dropped and counted — analysis never
//! waits for the broker.

#[macro_use]
mod error;
pub mod control;
pub use error::Error;

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::ClientContext;
use sonde_anon::Anonymizer;
use sonde_flow::{FlowRecord, FlowSink, IcmpKind, IcmpRecord, RttSample, TcpRecord, UdpRecord};
use sonde_output::{shown_icmp, Format, LineFormat};
use sonde_stats::{Net, Proto, Unit};

pub mod intervals;

pub use intervals::{Contribution, Contributions, LiveIntervals};

/// What the exporter is told: the brokers, the topics, the local queue and any librdkafka
/// property.
#[derive(Debug, Clone)]
pub struct Config {
    /// `bootstrap.servers`: `HOST:PORT[,HOST:PORT…]`.
    pub brokers: String,
    /// The probe's id, first in every message and the key of the intervals' and histograms'
    /// ([`valid_probe_id`]).
    pub probe: String,
    pub topic: String,
    /// Where the intervals go (`None`: not published).
    pub interval_topic: Option<String>,
    /// Where the intervals' histograms go (`None`: not published).
    pub histogram_topic: Option<String>,
    /// Messages the local queue holds at most (`queue.buffering.max.messages`).
    pub queue: usize,
    /// How long the broker has to answer the metadata request at start.
    pub connect_timeout: Duration,
    /// How long the end of the run waits for the queue to drain.
    pub flush_timeout: Duration,
    /// librdkafka properties as `(key, value)`, set last (they may override the above).
    pub options: Vec<(String, String)>,
}

impl Config {
    pub fn new(brokers: &str) -> Config {
        Config {
            brokers: brokers.to_string(),
            probe: "sonde".to_string(),
            topic: "sonde-flows".to_string(),
            interval_topic: Some("sonde-intervals".to_string()),
            histogram_topic: Some("sonde-histograms".to_string()),
            queue: 100_000,
            connect_timeout: Duration::from_secs(5),
            flush_timeout: Duration::from_secs(30),
            options: Vec::new(),
        }
    }
}

/// Whether `id` can name a probe: 1 to 64 of `A-Z a-z 0-9 . _ -`.
pub fn valid_probe_id(id: &str) -> bool {
    (1..=64).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

/// `KEY=VALUE` as a librdkafka property.
pub fn parse_option(text: &str) -> Result<(String, String), Error> {
    match text.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        _ => Err(error!("expected KEY=VALUE (a librdkafka property), got {text:?}")),
    }
}

/// What the export did, at the end of the run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Messages accepted into the local queue (flows, intervals and histograms).
    pub sent: u64,
    /// Messages the broker acknowledged (`acks=all`).
    pub delivered: u64,
    /// Messages dropped because the local queue was full (never sent).
    pub dropped_queue_full: u64,
    /// Messages that failed: a delivery error (retries exhausted, `message.timeout.ms`), refused
    /// at enqueue for another reason, or still undelivered when the final flush timed out.
    pub failed: u64,
    /// Of which: still in the queue when the flush timed out.
    pub undelivered_at_exit: u64,
    /// Flow messages accepted into the queue.
    pub flows: u64,
    /// Of which: interim records of flows still open (`--active-timeout`).
    pub interim: u64,
    /// Interval messages accepted into the queue.
    pub intervals: u64,
    /// Histogram messages accepted into the queue.
    pub histograms: u64,
    pub last_error: Option<String>,
}

/// Delivery reports, counted (served by the producer's thread).
#[derive(Default)]
struct Counters {
    sent: AtomicU64,
    delivered: AtomicU64,
    dropped_queue_full: AtomicU64,
    failed: AtomicU64,
    flows: AtomicU64,
    interim: AtomicU64,
    intervals: AtomicU64,
    histograms: AtomicU64,
    last_error: Mutex<Option<String>>,
}

impl Counters {
    fn error(&self, e: &KafkaError) {
        self.failed.fetch_add(1, Relaxed);
        if let Ok(mut last) = self.last_error.lock() {
            *last = Some(e.to_string());
        }
    }
}

struct Context(Arc<Counters>);

impl ClientContext for Context {}

impl ProducerContext for Context {
    type DeliveryOpaque = ();
    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        match result {
            Ok(_) => {
                self.0.delivered.fetch_add(1, Relaxed);
            }
            Err((e, _)) => self.0.error(e),
        }
    }
}

/// The run's producer, connected.
pub struct Exporter {
    producer: Arc<ThreadedProducer<Context>>,
    counters: Arc<Counters>,
    config: Config,
}

impl Exporter {
    /// Makes the producer and asks the brokers for metadata: a broker that does not answer
    /// within `connect_timeout`, or a bad property, is an error (one line) before any packet.
    pub fn connect(config: Config) -> Result<Exporter, Error> {
        let mut cc = ClientConfig::new();
        cc.set("bootstrap.servers", &config.brokers)
            .set("enable.idempotence", "true")
            .set("acks", "all")
            .set("queue.buffering.max.messages", config.queue.to_string())
            .set("client.id", "sonde");
        for (k, v) in &config.options {
            cc.set(k, v);
        }
        let counters = Arc::new(Counters::default());
        let producer: ThreadedProducer<Context> =
            cc.create_with_context(Context(counters.clone())).map_err(|e| error!("kafka: bad configuration: {e}"))?;
        producer.client().fetch_metadata(None, config.connect_timeout).map_err(|e| {
            format!("kafka: no broker answered at {} within {:?}: {e}", config.brokers, config.connect_timeout)
        })?;
        Ok(Exporter { producer: Arc::new(producer), counters, config })
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// A worker's sink: formats each flow as a message and enqueues it.
    pub fn sink(&self, anon: Option<Anonymizer>) -> KafkaSink {
        let anonymized = anon.is_some();
        KafkaSink {
            producer: self.producer.clone(),
            counters: self.counters.clone(),
            topic: self.config.topic.clone(),
            head: format!("{{\"probe\":{},", json_string(&self.config.probe)),
            tcp_format: LineFormat::of(Format::Jsonl, anonymized),
            udp_format: LineFormat::of(Format::Jsonl, anonymized),
            icmp_format: LineFormat::of(Format::Jsonl, anonymized),
            scratch: Vec::new(),
            payload: Vec::new(),
            key: String::new(),
            anon,
        }
    }

    /// Publishes contributions to intervals: one message per (interval, proto, net) with
    /// anything to add to the topic of intervals, one per (interval, metric, dir, net) to that
    /// of histograms, each keyed by the probe. Returns the messages enqueued.
    pub fn publish(&self, contributions: &Contributions) -> u64 {
        let (probe, step) = (json_string(&self.config.probe), contributions.interval_ns.max(1));
        let mut n = 0;
        let mut json = String::new();
        for (&i, c) in &contributions.parts {
            let start = i.saturating_mul(step);
            let span = format!(
                "{{\"probe\":{probe},\"start\":{},\"end\":{}",
                sonde_types::time::seconds_6(start),
                sonde_types::time::seconds_6(start.saturating_add(step))
            );
            if let Some(topic) = self.config.interval_topic.as_deref() {
                for (proto, net) in Proto::ALL.into_iter().flat_map(|p| Net::ALL.into_iter().map(move |n| (p, n))) {
                    let row = c.row(proto, net);
                    if row.iter().all(|&v| v == 0) {
                        continue;
                    }
                    json.clear();
                    json.push_str(&span);
                    interval_fields(&mut json, proto, net, row);
                    if send(&self.producer, &self.counters, topic, &self.config.probe, json.as_bytes()) {
                        self.counters.intervals.fetch_add(1, Relaxed);
                        n += 1;
                    }
                }
            }
            if let Some(topic) = self.config.histogram_topic.as_deref() {
                for (&(metric, dir, net), d) in &c.dists {
                    json.clear();
                    json.push_str(&span);
                    histogram_fields(&mut json, metric, dir, net, d);
                    if send(&self.producer, &self.counters, topic, &self.config.probe, json.as_bytes()) {
                        self.counters.histograms.fetch_add(1, Relaxed);
                        n += 1;
                    }
                }
            }
        }
        n
    }

    /// Waits up to `flush_timeout` for the queue to drain, then returns the counters. Call
    /// after every worker's sink is dropped.
    pub fn finish(self) -> Stats {
        let c = &self.counters;
        let undelivered = match self.producer.flush(self.config.flush_timeout) {
            Ok(()) => 0,
            Err(e) => {
                if let Ok(mut last) = c.last_error.lock() {
                    *last = Some(format!("flush: {e}"));
                }
                self.producer.in_flight_count().max(0) as u64
            }
        };
        let mut stats = c.stats();
        stats.failed += undelivered;
        stats.undelivered_at_exit = undelivered;
        stats
    }

    /// The counters, readable while the run goes on (and after it).
    pub fn live(&self) -> LiveStats {
        LiveStats(self.counters.clone())
    }
}

/// The exporter's counters as they move (`/metrics`).
#[derive(Clone)]
pub struct LiveStats(Arc<Counters>);

impl LiveStats {
    /// The counters now; messages still queued are neither delivered nor failed yet.
    pub fn stats(&self) -> Stats {
        self.0.stats()
    }
}

impl Counters {
    fn stats(&self) -> Stats {
        Stats {
            sent: self.sent.load(Relaxed),
            delivered: self.delivered.load(Relaxed),
            dropped_queue_full: self.dropped_queue_full.load(Relaxed),
            failed: self.failed.load(Relaxed),
            undelivered_at_exit: 0,
            flows: self.flows.load(Relaxed),
            interim: self.interim.load(Relaxed),
            intervals: self.intervals.load(Relaxed),
            histograms: self.histograms.load(Relaxed),
            last_error: self.last_error.lock().ok().and_then(|l| l.clone()),
        }
    }
}

/// Enqueues one message; `false` (counted) when the queue is full or librdkafka refuses it.
fn send(producer: &ThreadedProducer<Context>, counters: &Counters, topic: &str, key: &str, payload: &[u8]) -> bool {
    match producer.send(BaseRecord::to(topic).key(key).payload(payload)) {
        Ok(()) => {
            counters.sent.fetch_add(1, Relaxed);
            true
        }
        Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
            counters.dropped_queue_full.fetch_add(1, Relaxed);
            false
        }
        Err((e, _)) => {
            counters.error(&e);
            false
        }
    }
}

fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `,"proto":…,"net":…,"packets":…,…}` of an interval message.
fn interval_fields(json: &mut String, proto: Proto, net: Net, row: [u64; 5]) {
    use std::fmt::Write;
    let [packets, bytes, opened, closed, active] = row;
    let _ = write!(
        json,
        ",\"proto\":\"{}\",\"net\":\"{}\",\"packets\":{packets},\"bytes\":{bytes},\"flows_opened\":{opened},\
         \"flows_closed\":{closed},\"flows_active\":{active}}}",
        proto.name(),
        net.name()
    );
}

/// `,"metric":…,"count":…,"sum":…,"min":…,"max":…,"bins":[[lo,hi,n],…]}` of a histogram
/// message: values in the metric's unit, written as histograms.tsv writes them (exactly).
fn histogram_fields(
    json: &mut String,
    metric: sonde_stats::Metric,
    dir: sonde_stats::Dir,
    net: Net,
    d: &sonde_stats::Dist,
) {
    use std::fmt::Write;
    let unit = metric.unit();
    let _ = write!(
        json,
        ",\"metric\":\"{}\",\"dir\":\"{}\",\"net\":\"{}\",\"unit\":\"{}\",\"count\":{},\"sum\":",
        metric.name(),
        dir.name(),
        net.name(),
        unit.name(),
        d.count
    );
    push_sum(json, unit, d.sum);
    json.push_str(",\"min\":");
    unit.format(d.min, json);
    json.push_str(",\"max\":");
    unit.format(d.max, json);
    json.push_str(",\"bins\":[");
    for (k, (bin, n)) in d.sorted_bins().into_iter().enumerate() {
        let (lo, hi) = d.binning.range(bin);
        json.push_str(if k > 0 { ",[" } else { "[" });
        unit.format(lo, json);
        json.push(',');
        unit.format(hi, json);
        let _ = write!(json, ",{n}]");
    }
    json.push_str("]}");
}

/// A sum of base-unit values in `unit`, exactly (as [`Unit::format`] writes one value).
fn push_sum(json: &mut String, unit: Unit, sum: u128) {
    use std::fmt::Write;
    let _ = match unit {
        Unit::Ms => write!(json, "{}.{:06}", sum / 1_000_000, sum % 1_000_000),
        Unit::Percent => write!(json, "{}.{:04}", sum / 10_000, sum % 10_000),
        _ => write!(json, "{sum}"),
    };
}

/// A worker's feed of the exporter.
pub struct KafkaSink {
    producer: Arc<ThreadedProducer<Context>>,
    counters: Arc<Counters>,
    topic: String,
    /// `{"probe":"…",`.
    head: String,
    tcp_format: LineFormat<TcpRecord>,
    udp_format: LineFormat<UdpRecord>,
    /// ICMP entries (`icmp_flows`' columns, whose own `proto` is `icmp` or `icmpv6`).
    icmp_format: LineFormat<IcmpRecord>,
    scratch: Vec<u8>,
    payload: Vec<u8>,
    key: String,
    anon: Option<Anonymizer>,
}

impl KafkaSink {
    fn push(&mut self, record: &FlowRecord, interim: bool) {
        let (proto, line) = match record {
            FlowRecord::Tcp(t) => ("tcp", self.tcp_format.format(&mut self.scratch, t)),
            FlowRecord::Udp(u) => ("udp", self.udp_format.format(&mut self.scratch, u)),
        };
        // The log's line `{…}\n` becomes `{"probe":"…","proto":"…",…}`.
        let body = line.strip_suffix(b"\n").unwrap_or(line);
        self.payload.clear();
        self.payload.extend_from_slice(self.head.as_bytes());
        self.payload.extend_from_slice(if proto == "tcp" { b"\"proto\":\"tcp\"," } else { b"\"proto\":\"udp\"," });
        self.payload.extend_from_slice(body.get(1..).unwrap_or_default());
        flow_key(&mut self.key, proto, record);
        if send(&self.producer, &self.counters, &self.topic, &self.key, &self.payload) {
            self.counters.flows.fetch_add(1, Relaxed);
            if interim {
                self.counters.interim.fetch_add(1, Relaxed);
            }
        }
    }
}

/// `proto client_ip:port server_ip:port first_ns`: one flow, one key, one partition.
fn flow_key(key: &mut String, proto: &str, record: &FlowRecord) {
    use std::fmt::Write;
    let e = record.endpoints();
    key.clear();
    let _ = write!(
        key,
        "{proto} {}:{} {}:{} {}",
        e.client_ip,
        e.client_port,
        e.server_ip,
        e.server_port,
        record.first_ns()
    );
}

impl KafkaSink {
    fn publish(&mut self, record: &FlowRecord, interim: bool) {
        match self.anon.as_mut() {
            Some(anon) => {
                let shown = sonde_output::anonymized_record(record, anon);
                self.push(&shown, interim)
            }
            None => self.push(record, interim),
        }
    }
}

impl KafkaSink {
    /// An ICMP entry as `icmp_flows.jsonl` writes it, the probe first (its line has its own
    /// `proto`, `icmp` or `icmpv6`), keyed `proto client server echo:IDENT|TYPE/CODE first_ns`.
    fn push_icmp(&mut self, record: &IcmpRecord) {
        use std::fmt::Write;
        let line = self.icmp_format.format(&mut self.scratch, record);
        let body = line.strip_suffix(b"\n").unwrap_or(line);
        self.payload.clear();
        self.payload.extend_from_slice(self.head.as_bytes());
        self.payload.extend_from_slice(body.get(1..).unwrap_or_default());
        let k = &record.key;
        self.key.clear();
        let proto = k.proto();
        let _ = match k.kind {
            IcmpKind::Echo { ident } => write!(self.key, "{proto} {} {} echo:{ident}", k.client, k.server),
            IcmpKind::Message { icmp_type, code } => {
                write!(self.key, "{proto} {} {} {icmp_type}/{code}", k.client, k.server)
            }
        };
        let _ = write!(self.key, " {}", record.first_ns);
        if send(&self.producer, &self.counters, &self.topic, &self.key, &self.payload) {
            self.counters.flows.fetch_add(1, Relaxed);
        }
    }
}

impl FlowSink for KafkaSink {
    fn flow(&mut self, record: &FlowRecord) {
        self.publish(record, false);
    }
    fn icmp(&mut self, record: &IcmpRecord) {
        let shown = shown_icmp(record, self.anon.as_mut());
        self.push_icmp(&shown);
    }
    fn rtt_sample(&mut self, _: &RttSample) {}
    /// A message like a finished flow's, its `"end"` `"open"`.
    fn interim(&mut self, record: &FlowRecord) {
        self.publish(record, true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_parse() {
        assert_eq!(parse_option("security.protocol=SSL"), Ok(("security.protocol".into(), "SSL".into())));
        assert_eq!(parse_option("sasl.password=a=b"), Ok(("sasl.password".into(), "a=b".into())));
        assert!(parse_option("novalue").is_err());
        assert!(parse_option("=x").is_err());
    }

    #[test]
    fn probe_ids() {
        for good in ["p1", "probe-2.example_net", &"a".repeat(64)] {
            assert!(valid_probe_id(good), "{good}");
        }
        for bad in ["", "a b", "p/1", "é", "a\"", &"a".repeat(65)] {
            assert!(!valid_probe_id(bad), "{bad}");
        }
    }

    /// A histogram message's numbers are histograms.tsv's: exact, in the metric's unit.
    #[test]
    fn histogram_fields_are_the_tsv_numbers() {
        let mut d = sonde_stats::Dist::new(sonde_stats::Metric::TcpRttAvg.binning());
        for ns in [40_236_000, 40_388_000, 40_262_000] {
            d.add(ns);
        }
        let mut json = String::from("{\"probe\":\"p1\"");
        histogram_fields(&mut json, sonde_stats::Metric::TcpRttAvg, sonde_stats::Dir::C2s, Net::In, &d);
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["unit"], "ms");
        assert_eq!((v["count"].as_u64(), v["sum"].as_f64()), (Some(3), Some(120.886)));
        assert_eq!((v["min"].as_f64(), v["max"].as_f64()), (Some(40.236), Some(40.388)));
        let bins: Vec<(f64, f64, u64)> = v["bins"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| (b[0].as_f64().unwrap(), b[1].as_f64().unwrap(), b[2].as_u64().unwrap()))
            .collect();
        assert_eq!(bins, [(39.845888, 40.370176, 2), (40.370176, 40.894464, 1)]);
        let mut sum = String::new();
        push_sum(&mut sum, Unit::Percent, 1_234_567);
        assert_eq!(sum, "123.4567");
    }

    #[test]
    fn bad_property_is_an_error_without_a_broker() {
        let mut cfg = Config::new("127.0.0.1:1");
        cfg.options.push(("no.such.property".into(), "1".into()));
        let err = Exporter::connect(cfg).err().unwrap();
        assert!(err.to_string().contains("no.such.property"), "{err}");
    }

    #[test]
    fn absent_broker_is_an_error_within_the_timeout() {
        let mut cfg = Config::new("127.0.0.1:1");
        cfg.connect_timeout = Duration::from_millis(1500);
        let t = std::time::Instant::now();
        let err = Exporter::connect(cfg).err().unwrap();
        assert!(err.to_string().starts_with("kafka: no broker answered at 127.0.0.1:1"), "{err}");
        assert!(!err.to_string().contains('\n'));
        assert!(t.elapsed() < Duration::from_secs(10));
    }
}
