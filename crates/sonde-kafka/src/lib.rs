//! Kafka export of a run (docs/kafka.md): each finished flow as one JSON message with the flow
//! log's field names (JSON Lines formatting of sonde-output) plus `"proto"`, keyed by the flow,
//! and each interval's row of intervals.tsv to a second topic.
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

pub mod control;

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::ClientContext;
use sonde_anon::Anonymizer;
use sonde_flow::{FlowRecord, FlowSink, RttSample, TcpRecord, UdpRecord};
use sonde_output::{mark_anonymized, tcp_columns, udp_columns, Format, LineFormat};

/// What the exporter is told: the brokers, the topics, the local queue and any librdkafka
/// property.
#[derive(Debug, Clone)]
pub struct Config {
    /// `bootstrap.servers`: `HOST:PORT[,HOST:PORT…]`.
    pub brokers: String,
    pub topic: String,
    /// Where the intervals go (`None`: not published).
    pub interval_topic: Option<String>,
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
            topic: "sonde-flows".to_string(),
            interval_topic: Some("sonde-intervals".to_string()),
            queue: 100_000,
            connect_timeout: Duration::from_secs(5),
            flush_timeout: Duration::from_secs(30),
            options: Vec::new(),
        }
    }
}

/// `KEY=VALUE` as a librdkafka property.
pub fn parse_option(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        _ => Err(format!("expected KEY=VALUE (a librdkafka property), got {text:?}")),
    }
}

/// What the export did, at the end of the run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Messages accepted into the local queue (flows and intervals).
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
    pub fn connect(config: Config) -> Result<Exporter, String> {
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
            cc.create_with_context(Context(counters.clone())).map_err(|e| format!("kafka: bad configuration: {e}"))?;
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
        let (tcp, udp) = match anon {
            Some(_) => (mark_anonymized(tcp_columns()), mark_anonymized(udp_columns())),
            None => (tcp_columns(), udp_columns()),
        };
        KafkaSink {
            producer: self.producer.clone(),
            counters: self.counters.clone(),
            topic: self.config.topic.clone(),
            tcp_format: LineFormat::new(Format::Jsonl, &tcp),
            udp_format: LineFormat::new(Format::Jsonl, &udp),
            scratch: Vec::new(),
            payload: Vec::new(),
            key: String::new(),
            anon,
        }
    }

    /// Publishes each row of an intervals.tsv text (a header and rows) as a JSON object keyed
    /// by its column names, keyed by the interval's start; numbers stay numbers. Returns the
    /// messages enqueued.
    pub fn publish_intervals(&self, intervals_tsv: &str) -> u64 {
        let Some(topic) = self.config.interval_topic.as_deref() else { return 0 };
        let mut lines = intervals_tsv.lines();
        let Some(header) = lines.next() else { return 0 };
        let names: Vec<&str> = header.split('\t').collect();
        let mut n = 0;
        for row in lines.filter(|l| !l.is_empty()) {
            let values: Vec<&str> = row.split('\t').collect();
            let mut json = String::from("{");
            for (i, (name, value)) in names.iter().zip(&values).enumerate() {
                if i > 0 {
                    json.push(',');
                }
                json.push_str(&json_string(name));
                json.push(':');
                json.push_str(&json_value(value));
            }
            json.push('}');
            if send(&self.producer, &self.counters, topic, values.first().copied().unwrap_or(""), json.as_bytes()) {
                n += 1;
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
        let sent = self.sent.load(Relaxed);
        let flows = self.flows.load(Relaxed);
        Stats {
            sent,
            delivered: self.delivered.load(Relaxed),
            dropped_queue_full: self.dropped_queue_full.load(Relaxed),
            failed: self.failed.load(Relaxed),
            undelivered_at_exit: 0,
            flows,
            interim: self.interim.load(Relaxed),
            intervals: sent.saturating_sub(flows),
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

/// A TSV cell as JSON: a finite number as it is, `-` as null, anything else as a string.
fn json_value(cell: &str) -> String {
    match cell {
        "-" | "" => "null".to_string(),
        c if c.parse::<f64>().is_ok_and(f64::is_finite) && !c.starts_with('+') && !c.ends_with('.') => {
            // JSON has no leading zeros nor a bare leading dot.
            let digits = c.trim_start_matches('-');
            let leading_zero = digits.len() > 1 && digits.starts_with('0') && !digits.starts_with("0.");
            if leading_zero || digits.starts_with('.') || c.contains(['e', 'E', 'i', 'n', 'N', 'I']) {
                json_string(c)
            } else {
                c.to_string()
            }
        }
        c => json_string(c),
    }
}

/// A worker's feed of the exporter.
pub struct KafkaSink {
    producer: Arc<ThreadedProducer<Context>>,
    counters: Arc<Counters>,
    topic: String,
    tcp_format: LineFormat<TcpRecord>,
    udp_format: LineFormat<UdpRecord>,
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
        // The log's line `{…}\n` becomes `{"proto":"…",…}`.
        let body = line.strip_suffix(b"\n").unwrap_or(line);
        self.payload.clear();
        self.payload.extend_from_slice(format!("{{\"proto\":\"{proto}\",").as_bytes());
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

impl FlowSink for KafkaSink {
    fn flow(&mut self, record: &FlowRecord) {
        self.publish(record, false);
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
    fn interval_cells_are_json() {
        assert_eq!(json_value("12"), "12");
        assert_eq!(json_value("0.250"), "0.250");
        assert_eq!(json_value("-3"), "-3");
        assert_eq!(json_value("-"), "null");
        assert_eq!(json_value("007"), "\"007\"");
        assert_eq!(json_value("inf"), "\"inf\"");
        assert_eq!(json_value("NaN"), "\"NaN\"");
        assert_eq!(json_value("1e5"), "\"1e5\"");
        assert_eq!(json_value("tcp\"x"), "\"tcp\\\"x\"");
        for cell in ["12", "0.250", "-", "007", "inf", "a\tb"] {
            let v: serde_json::Value = serde_json::from_str(&json_value(cell)).unwrap();
            assert!(!v.is_array());
        }
    }

    #[test]
    fn bad_property_is_an_error_without_a_broker() {
        let mut cfg = Config::new("127.0.0.1:1");
        cfg.options.push(("no.such.property".into(), "1".into()));
        let err = Exporter::connect(cfg).err().unwrap();
        assert!(err.contains("no.such.property"), "{err}");
    }

    #[test]
    fn absent_broker_is_an_error_within_the_timeout() {
        let mut cfg = Config::new("127.0.0.1:1");
        cfg.connect_timeout = Duration::from_millis(1500);
        let t = std::time::Instant::now();
        let err = Exporter::connect(cfg).err().unwrap();
        assert!(err.starts_with("kafka: no broker answered at 127.0.0.1:1"), "{err}");
        assert!(!err.contains('\n'));
        assert!(t.elapsed() < Duration::from_secs(10));
    }
}
