//! A real Apache Kafka 4.3.1 broker (KRaft, one node) for the tests (`kafka.rs`, `control.rs`),
//! started from Maven Central jars (tests/kafka/fetch.sh; `make test` fetches them first) and
//! killed when dropped, panic or not; in the host's network namespace, or in a test's own
//! (`Broker::start_in`), where the monitors capture. Without java or the jars the tests fail:
//! they never pass without a broker.

#![allow(dead_code)]

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Message, Offset, TopicPartitionList};
use serde_json::Value;

pub const CLUSTER_ID: &str = "MkU3OEVBNTcwNTJENDM2Qg";

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The broker's jars, fetched by tests/kafka/fetch.sh unless already there.
pub fn kafka_lib() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("kafka-4.3.1");
    let status = Command::new(repo().join("tests/kafka/fetch.sh")).arg(&dir).status();
    assert!(
        status.as_ref().is_ok_and(|s| s.success()),
        "cannot fetch the Kafka broker's jars with tests/kafka/fetch.sh (needs mvn, Maven Central): {status:?}"
    );
    dir.join("lib")
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port()
}

/// A running broker; killed when dropped.
pub struct Broker {
    child: Child,
    /// The address it listens on and advertises.
    host: String,
    port: u16,
    dir: tempfile::TempDir,
    lib: PathBuf,
    /// The network namespace it runs in (`ip netns exec`), `None`: the host's.
    netns: Option<String>,
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Broker {
    pub fn start() -> Broker {
        Broker::start_in(None)
    }

    /// The broker in the network namespace `netns` (its loopback up): only clients in there
    /// reach it; readiness is asked with `sonde control status`, run in there.
    pub fn start_in(netns: Option<&str>) -> Broker {
        Broker::launch("127.0.0.1", netns)
    }

    /// A broker on the host, listening on `host` (an address of this machine, e.g. the host's
    /// end of a veth pair whose other end is in a namespace).
    pub fn start_at(host: &str) -> Broker {
        Broker::launch(host, None)
    }

    fn launch(host: &str, netns: Option<&str>) -> Broker {
        let netns = netns.map(str::to_string);
        let lib = kafka_lib();
        let dir = tempfile::tempdir().expect("temp dir");
        let (port, controller) = (free_port(), free_port());
        let props = format!(
            "process.roles=broker,controller\nnode.id=1\ncontroller.quorum.voters=1@127.0.0.1:{controller}\n\
             listeners=PLAINTEXT://{host}:{port},CONTROLLER://127.0.0.1:{controller}\n\
             advertised.listeners=PLAINTEXT://{host}:{port}\ncontroller.listener.names=CONTROLLER\n\
             inter.broker.listener.name=PLAINTEXT\nlistener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT\n\
             log.dirs={}\noffsets.topic.replication.factor=1\ntransaction.state.log.replication.factor=1\n\
             transaction.state.log.min.isr=1\nshare.coordinator.state.topic.replication.factor=1\n\
             share.coordinator.state.topic.min.isr=1\ngroup.initial.rebalance.delay.ms=0\n",
            dir.path().join("logs").display()
        );
        let server = dir.path().join("server.properties");
        std::fs::write(&server, props).expect("server.properties");
        let log4j = dir.path().join("log4j2.properties");
        std::fs::write(
            &log4j,
            "rootLogger.level=warn\nrootLogger.appenderRef.out.ref=out\nappender.out.type=Console\n\
             appender.out.name=out\nappender.out.layout.type=PatternLayout\nappender.out.layout.pattern=%d %p %c: %m%n\n",
        )
        .expect("log4j2.properties");
        let format = java(None, &lib, dir.path(), "kafka.tools.StorageTool")
            .args(["format", "-t", CLUSTER_ID, "-c"])
            .arg(&server)
            .output()
            .unwrap_or_else(|e| panic!("cannot run java (make deps installs default-jre-headless): {e}"));
        assert!(format.status.success(), "kafka-storage format failed: {}", String::from_utf8_lossy(&format.stderr));
        let child = Broker::spawn(netns.as_deref(), &lib, dir.path());
        let mut broker = Broker { child, host: host.to_string(), port, dir, lib, netns };
        let t = Instant::now();
        broker.wait_ready();
        eprintln!("broker up on {host}:{port} in {:.1} s", t.elapsed().as_secs_f64());
        broker
    }

    fn spawn(netns: Option<&str>, lib: &Path, dir: &Path) -> Child {
        let log =
            std::fs::OpenOptions::new().create(true).append(true).open(dir.join("broker.log")).expect("broker.log");
        java(netns, lib, dir, "kafka.Kafka")
            .arg(dir.join("server.properties"))
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .stdin(Stdio::null())
            .spawn()
            .expect("start the broker")
    }

    /// SIGKILL: the broker is lost, as in a crash.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts the same broker again (same ports, same logs).
    pub fn restart(&mut self) {
        self.child = Broker::spawn(self.netns.as_deref(), &self.lib, self.dir.path());
        self.wait_ready();
    }

    pub fn address(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("broker.log")).unwrap_or_default()
    }

    /// Waits for the port, then for the broker to answer a metadata request.
    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(90);
        if let Some(netns) = self.netns.clone() {
            loop {
                if let Ok(Some(status)) = self.child.try_wait() {
                    panic!("the broker exited ({status}):\n{}", self.log());
                }
                let asked = Command::new("ip")
                    .args(["netns", "exec", &netns, env!("CARGO_BIN_EXE_sonde"), "control", "status", "--timeout", "2"])
                    .args(["--kafka", &self.address()])
                    .output();
                if asked.is_ok_and(|o| o.status.success()) {
                    return;
                }
                assert!(Instant::now() < deadline, "the broker did not answer in 90 s:\n{}", self.log());
                std::thread::sleep(Duration::from_millis(300));
            }
        }
        while TcpStream::connect((self.host.as_str(), self.port)).is_err() {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("the broker exited ({status}):\n{}", self.log());
            }
            assert!(Instant::now() < deadline, "the broker did not open its port in 90 s:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(200));
        }
        let consumer = self.consumer();
        while consumer.fetch_metadata(None, Duration::from_secs(5)).is_err() {
            assert!(Instant::now() < deadline, "the broker did not answer metadata in 90 s:\n{}", self.log());
        }
    }

    pub fn consumer(&self) -> BaseConsumer {
        ClientConfig::new()
            .set("bootstrap.servers", self.address())
            .set("group.id", "sonde-test")
            .set("enable.auto.commit", "false")
            .create()
            .expect("consumer")
    }

    /// Every message of `topic` from the beginning: reads until `want` arrived and nothing
    /// more came for a second (duplicates would show), or 60 s passed.
    pub fn read_topic(&self, topic: &str, want: usize) -> Vec<(String, Value)> {
        let consumer = self.consumer();
        let meta = consumer.fetch_metadata(Some(topic), Duration::from_secs(10)).expect("topic metadata");
        let mut tpl = TopicPartitionList::new();
        for p in meta.topics().iter().flat_map(|t| t.partitions()) {
            tpl.add_partition_offset(topic, p.id(), Offset::Beginning).expect("partition");
        }
        consumer.assign(&tpl).expect("assign");
        let mut got = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut quiet_since = Instant::now();
        while Instant::now() < deadline && (got.len() < want || quiet_since.elapsed() < Duration::from_secs(1)) {
            match consumer.poll(Duration::from_millis(200)) {
                Some(Ok(m)) => {
                    let key = String::from_utf8(m.key().expect("a key").to_vec()).expect("utf-8 key");
                    let value = serde_json::from_slice(m.payload().expect("a payload")).expect("JSON payload");
                    got.push((key, value));
                    quiet_since = Instant::now();
                }
                Some(Err(e)) => panic!("consuming {topic}: {e}"),
                None => {}
            }
        }
        got
    }
}

fn java(netns: Option<&str>, lib: &Path, dir: &Path, class: &str) -> Command {
    let mut c = match netns {
        Some(name) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", name, "java"]);
            c
        }
        None => Command::new("java"),
    };
    c.arg("-Xmx512m")
        .arg(format!("-Dlog4j2.configurationFile={}", dir.join("log4j2.properties").display()))
        .arg("-cp")
        .arg(format!("{}/*", lib.display()))
        .arg(class);
    c
}
