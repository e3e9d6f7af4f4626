//! The control and status topics (docs/kafka.md, "Control topic"): one definitions file
//! published once on a compacted topic, followed by every probe; each probe's report of the
//! version it applies on a second compacted topic.
//!
//! The control topic holds one partition and one key, `definitions`; its value is a
//! [`ControlMessage`] (`{"version":N,"definitions":"…","published":…}`). Compaction keeps the
//! newest, so a probe that starts late reads one message to catch up. The status topic is keyed
//! by probe id, each value a [`StatusReport`].
//!
//! Everything here waits on the network and runs outside the packet path: reading a topic to its
//! end, creating a topic, publishing, and a [`Follower`] thread that hands every new version to
//! a callback. Each wait is bounded by the [`ControlConfig`]'s timeout.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll, Wake, Waker};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::Error;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Message, Offset, TopicPartitionList};
use serde::{Deserialize, Serialize};

/// The control topic's one key.
pub const CONTROL_KEY: &str = "definitions";

/// Where the topics are and how long any one wait on the brokers may last.
#[derive(Debug, Clone)]
pub struct ControlConfig {
    /// `bootstrap.servers`.
    pub brokers: String,
    /// librdkafka properties (TLS, SASL…), set last.
    pub options: Vec<(String, String)>,
    /// Bound on each wait: metadata, watermarks, reading to the end, creating a topic, delivery.
    pub timeout: Duration,
}

impl ControlConfig {
    pub fn new(brokers: &str) -> ControlConfig {
        ControlConfig { brokers: brokers.to_string(), options: Vec::new(), timeout: Duration::from_secs(10) }
    }

    fn client(&self) -> ClientConfig {
        let mut cc = ClientConfig::new();
        cc.set("bootstrap.servers", &self.brokers).set("client.id", "sonde-control");
        for (k, v) in &self.options {
            cc.set(k, v);
        }
        cc
    }

    fn consumer(&self) -> Result<BaseConsumer, Error> {
        let mut cc = self.client();
        // Partitions are assigned by hand: the group is never joined nor committed to.
        cc.set("group.id", "sonde-control").set("enable.auto.commit", "false").set("enable.partition.eof", "false");
        cc.create().map_err(|e| error!("kafka: bad configuration: {e}"))
    }
}

/// One version of the definitions, the control topic's value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ControlMessage {
    pub version: u64,
    /// A definitions file's text (docs/definitions.md).
    pub definitions: String,
    /// Wall clock of the publisher, epoch seconds (metadata only).
    pub published: f64,
}

impl ControlMessage {
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    pub fn from_json(bytes: &[u8]) -> Result<ControlMessage, Error> {
        serde_json::from_slice(bytes).map_err(|e| error!("not a control message: {e}"))
    }
}

/// A probe's report: the control version it applies and since when (the status topic's value).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatusReport {
    pub probe: String,
    /// The control topic's version applied (0: none yet).
    pub control_version: u64,
    /// Packet time (epoch s) from which that version counts; `null` before the first packet.
    pub since: Option<f64>,
    /// The probe's own version of its definition set (definitions.tsv `version`).
    pub definitions_version: u64,
    /// Wall clock of the report, epoch seconds.
    pub at: f64,
    /// Why the newest version published could not be applied (the probe keeps the one above).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The version that failed, with `error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_version: Option<u64>,
}

impl StatusReport {
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// Wall clock, epoch seconds: for `published` and `at` only, never for the analysis.
pub fn wall_s() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// Creates `topic` compacted with one partition (replication: the brokers' default) unless it
/// exists.
pub fn ensure_compacted_topic(cfg: &ControlConfig, topic: &str) -> Result<(), Error> {
    let admin: AdminClient<DefaultClientContext> =
        cfg.client().create().map_err(|e| error!("kafka: bad configuration: {e}"))?;
    admin
        .inner()
        .fetch_metadata(None, cfg.timeout)
        .map_err(|e| error!("kafka: no broker answered at {} within {:?}: {e}", cfg.brokers, cfg.timeout))?;
    let new = NewTopic::new(topic, 1, TopicReplication::Fixed(-1)).set("cleanup.policy", "compact");
    let opts = AdminOptions::new().request_timeout(Some(cfg.timeout)).operation_timeout(Some(cfg.timeout));
    let results = block_on(admin.create_topics([&new], &opts), cfg.timeout).ok_or_else(|| {
        format!("kafka: no broker answered at {} within {:?} (creating {topic})", cfg.brokers, cfg.timeout)
    })?;
    match results {
        Err(e) => Err(error!("kafka: creating {topic}: {e}")),
        Ok(rs) => match rs.into_iter().next() {
            Some(Err((_, RDKafkaErrorCode::TopicAlreadyExists))) | Some(Ok(_)) | None => Ok(()),
            Some(Err((_, code))) => Err(error!("kafka: creating {topic}: {code}")),
        },
    }
}

/// A topic read to its end.
#[derive(Debug, Clone, Default)]
pub struct TopicContents {
    /// (key, value), oldest first per partition.
    pub messages: Vec<(String, Vec<u8>)>,
    /// Per partition: the offset after the last message read.
    pub ends: Vec<(i32, i64)>,
}

/// Every message of `topic` from its beginning to its end as it is now. A topic that does not
/// exist reads as empty.
pub fn read_to_end(cfg: &ControlConfig, topic: &str) -> Result<TopicContents, Error> {
    let consumer = cfg.consumer()?;
    let meta = consumer
        .fetch_metadata(Some(topic), cfg.timeout)
        .map_err(|e| error!("kafka: no broker answered at {} within {:?}: {e}", cfg.brokers, cfg.timeout))?;
    let Some(t) = meta.topics().iter().find(|t| t.name() == topic) else { return Ok(TopicContents::default()) };
    if t.error().is_some() || t.partitions().is_empty() {
        return Ok(TopicContents::default());
    }
    let mut ends = Vec::new();
    let mut tpl = TopicPartitionList::new();
    for p in t.partitions() {
        let (low, high) = consumer
            .fetch_watermarks(topic, p.id(), cfg.timeout)
            .map_err(|e| error!("kafka: reading {topic}'s offsets: {e}"))?;
        ends.push((p.id(), high));
        if high > low {
            tpl.add_partition_offset(topic, p.id(), Offset::Offset(low)).map_err(|e| error!("{e}"))?;
        }
    }
    let mut got = Vec::new();
    if tpl.count() == 0 {
        return Ok(TopicContents { messages: got, ends });
    }
    consumer.assign(&tpl).map_err(|e| error!("kafka: reading {topic}: {e}"))?;
    let mut next: BTreeMap<i32, i64> = BTreeMap::new();
    let done = |next: &BTreeMap<i32, i64>| ends.iter().all(|&(p, high)| next.get(&p).copied().unwrap_or(0) >= high);
    let deadline = Instant::now() + cfg.timeout;
    // Compaction may leave gaps below the high watermark: a partition is read once a message
    // at or after its last offset came, or its position passed it.
    while !done(&next) {
        if Instant::now() > deadline {
            return Err(error!("kafka: reading {topic} to its end took longer than {:?}", cfg.timeout));
        }
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                next.insert(m.partition(), m.offset() + 1);
                let key = String::from_utf8_lossy(m.key().unwrap_or_default()).into_owned();
                got.push((key, m.payload().unwrap_or_default().to_vec()));
            }
            Some(Err(e)) => return Err(error!("kafka: reading {topic}: {e}")),
            None => {
                if let Ok(pos) = consumer.position() {
                    for e in pos.elements() {
                        if let Offset::Offset(o) = e.offset() {
                            let n = next.entry(e.partition()).or_insert(0);
                            *n = (*n).max(o);
                        }
                    }
                }
            }
        }
    }
    let ends = ends.into_iter().map(|(p, high)| (p, next.get(&p).copied().unwrap_or(high).max(high))).collect();
    Ok(TopicContents { messages: got, ends })
}

/// The control topic's newest version (`None`: nothing published yet) and the offset after
/// it, where a follower starts. A value that is not a control message is skipped.
pub fn latest(cfg: &ControlConfig, topic: &str) -> Result<(Option<ControlMessage>, i64), Error> {
    let TopicContents { messages, ends } = read_to_end(cfg, topic)?;
    // (Only partition 0 is written; on a topic made with more, `messages` holds the others too.)
    let newest = messages
        .iter()
        .filter(|(k, _)| k == CONTROL_KEY)
        .filter_map(|(_, v)| ControlMessage::from_json(v).ok())
        .max_by_key(|m| m.version);
    let end = ends.iter().find(|(p, _)| *p == 0).map_or(0, |&(_, o)| o);
    Ok((newest, end))
}

/// Each probe's newest report on the status topic, by probe id.
pub fn statuses(cfg: &ControlConfig, topic: &str) -> Result<BTreeMap<String, StatusReport>, Error> {
    let messages = read_to_end(cfg, topic)?.messages;
    let mut by_probe = BTreeMap::new();
    for (_, value) in messages {
        if let Ok(r) = serde_json::from_slice::<StatusReport>(&value) {
            by_probe.insert(r.probe.clone(), r);
        }
    }
    Ok(by_probe)
}

/// Why `publish` published nothing.
#[derive(Debug, Clone, PartialEq)]
pub enum PublishError {
    /// `--expect-version` is not the topic's newest version.
    Conflict {
        expected: u64,
        latest: u64,
    },
    Kafka(Error),
}

impl std::fmt::Display for PublishError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PublishError::Conflict { expected, latest } => write!(
                f,
                "conflict: --expect-version {expected} but the control topic is at version {latest}; nothing published"
            ),
            PublishError::Kafka(e) => e.fmt(f),
        }
    }
}

/// Publishes `definitions` (already checked by the caller) as the newest version + 1 (1 on an
/// empty topic), after creating the topic if missing; with `expect_version`, only if the topic
/// is at that version. Returns what was published, once the broker acknowledged it.
pub fn publish(
    cfg: &ControlConfig,
    topic: &str,
    expect_version: Option<u64>,
    definitions: &str,
) -> Result<ControlMessage, PublishError> {
    ensure_compacted_topic(cfg, topic).map_err(PublishError::Kafka)?;
    let (newest, _) = latest(cfg, topic).map_err(PublishError::Kafka)?;
    let at = newest.map_or(0, |m| m.version);
    if let Some(expected) = expect_version.filter(|&e| e != at) {
        return Err(PublishError::Conflict { expected, latest: at });
    }
    let message = ControlMessage { version: at + 1, definitions: definitions.to_string(), published: wall_s() };
    send_acknowledged(cfg, topic, CONTROL_KEY, &message.to_json()).map_err(PublishError::Kafka)?;
    Ok(message)
}

/// Sends one message to partition 0 (the one the probes follow, even on a topic someone made
/// with more) and waits (within the timeout) for the broker's acknowledgement.
fn send_acknowledged(cfg: &ControlConfig, topic: &str, key: &str, value: &str) -> Result<(), Error> {
    let producer: BaseProducer = cfg
        .client()
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("message.timeout.ms", cfg.timeout.as_millis().max(1).to_string())
        .create()
        .map_err(|e| error!("kafka: bad configuration: {e}"))?;
    producer
        .send(BaseRecord::to(topic).partition(0).key(key).payload(value))
        .map_err(|(e, _)| error!("kafka: publishing to {topic}: {e}"))?;
    producer.flush(cfg.timeout).map_err(|e| error!("kafka: publishing to {topic}: not acknowledged: {e}"))
}

/// A probe's status reports: enqueued (never waiting on the broker), delivered by librdkafka's
/// thread.
pub struct StatusSender {
    producer: BaseProducer,
    topic: String,
}

impl StatusSender {
    /// Creates the status topic if missing and the producer.
    pub fn connect(cfg: &ControlConfig, topic: &str) -> Result<StatusSender, Error> {
        ensure_compacted_topic(cfg, topic)?;
        let producer: BaseProducer = cfg
            .client()
            .set("enable.idempotence", "true")
            .set("acks", "all")
            .create()
            .map_err(|e| error!("kafka: bad configuration: {e}"))?;
        Ok(StatusSender { producer, topic: topic.to_string() })
    }

    /// Enqueues `report` keyed by its probe; an error says why it could not be.
    pub fn send(&self, report: &StatusReport) -> Result<(), Error> {
        let value = report.to_json();
        let sent = self.producer.send(BaseRecord::to(&self.topic).key(&report.probe).payload(&value));
        self.producer.poll(Duration::ZERO);
        sent.map_err(|(e, _)| error!("kafka: status to {}: {e}", self.topic))
    }

    /// Waits up to `timeout` for the reports queued to be delivered.
    pub fn flush(&self, timeout: Duration) -> Result<(), Error> {
        self.producer.flush(timeout).map_err(|e| error!("kafka: status to {}: {e}", self.topic))
    }
}

/// What a follower hands on: a new version, or a value it could not read.
#[derive(Debug, Clone, PartialEq)]
pub enum Followed {
    Version(ControlMessage),
    Unreadable(String),
}

/// A thread reading the control topic from an offset on, handing each message to a callback;
/// stopped (and joined) when dropped.
pub struct Follower {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Follower {
    /// Follows partition 0 of `topic` from `offset` (from [`latest`]). Errors of the broker
    /// while following are retried by librdkafka; they reach `on_error`.
    pub fn start(
        cfg: &ControlConfig,
        topic: &str,
        offset: i64,
        mut on_message: impl FnMut(Followed) + Send + 'static,
        mut on_error: impl FnMut(String) + Send + 'static,
    ) -> Result<Follower, Error> {
        let consumer = cfg.consumer()?;
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(topic, 0, Offset::Offset(offset)).map_err(|e| error!("{e}"))?;
        consumer.assign(&tpl).map_err(|e| error!("kafka: following {topic}: {e}"))?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::Builder::new()
            .name("sonde-control".into())
            .spawn(move || {
                while !stopped.load(Ordering::Relaxed) {
                    match consumer.poll(Duration::from_millis(200)) {
                        Some(Ok(m)) if m.key() == Some(CONTROL_KEY.as_bytes()) => {
                            on_message(match ControlMessage::from_json(m.payload().unwrap_or_default()) {
                                Ok(c) => Followed::Version(c),
                                Err(e) => Followed::Unreadable(format!("offset {}: {e}", m.offset())),
                            })
                        }
                        Some(Ok(_)) | None => {}
                        Some(Err(e)) => on_error(e.to_string()),
                    }
                }
            })
            .map_err(|e| error!("starting the control topic's thread: {e}"))?;
        Ok(Follower { stop, thread: Some(thread) })
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Runs an rdkafka admin future on this thread, at most `timeout` (plus its own timeouts):
/// `None` if it did not finish.
fn block_on<F: Future>(fut: F, timeout: Duration) -> Option<F::Output> {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = TaskContext::from_waker(&waker);
    let mut fut = std::pin::pin!(fut);
    // The admin call's own request timeout answers first; this bound is a backstop.
    let deadline = Instant::now() + timeout * 2 + Duration::from_secs(1);
    loop {
        if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            return Some(out);
        }
        let now = Instant::now();
        if now >= deadline {
            return None;
        }
        std::thread::park_timeout((deadline - now).min(Duration::from_millis(100)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_message_round_trips() {
        let m = ControlMessage { version: 3, definitions: "web = tcp.dport == 80\n# \"x\"\n".into(), published: 1.5 };
        assert_eq!(ControlMessage::from_json(m.to_json().as_bytes()), Ok(m));
        assert!(ControlMessage::from_json(b"{\"version\":\"x\"}").is_err());
        assert!(ControlMessage::from_json(b"\xff").is_err());
    }

    #[test]
    fn status_without_error_has_no_error_field() {
        let r = StatusReport {
            probe: "p1".into(),
            control_version: 2,
            since: None,
            definitions_version: 4,
            at: 10.0,
            error: None,
            failed_version: None,
        };
        let json = r.to_json();
        assert!(json.starts_with("{\"probe\":\"p1\",\"control_version\":2,\"since\":null"), "{json}");
        assert!(!json.contains("error"));
    }

    #[test]
    fn absent_broker_is_an_error_within_the_timeout() {
        let mut cfg = ControlConfig::new("127.0.0.1:1");
        cfg.timeout = Duration::from_millis(1500);
        let t = Instant::now();
        let err = latest(&cfg, "sonde-control").err().unwrap();
        assert!(err.to_string().starts_with("kafka: no broker answered at 127.0.0.1:1"), "{err}");
        let err = publish(&cfg, "sonde-control", None, "a = tcp").err().unwrap();
        assert!(err.to_string().starts_with("kafka: no broker answered"), "{err}");
        assert!(t.elapsed() < Duration::from_secs(15));
    }
}
