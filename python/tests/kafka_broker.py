"""A real Apache Kafka 4.3.1 broker (KRaft, one node) for the Python tests, started from the
Maven Central jars tests/kafka/fetch.sh fetches (as crates/sonde/tests/kafka.rs does) and
stopped by the test; and producers that send lines through the broker's own console producer.
Without java or the jars the test fails: it never passes without a broker."""

from __future__ import annotations

import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import List, Optional, Tuple

from conftest import REPO

CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"
LOG4J = ("rootLogger.level=warn\nrootLogger.appenderRef.out.ref=out\nappender.out.type=Console\n"
         "appender.out.name=out\nappender.out.layout.type=PatternLayout\nappender.out.layout.pattern=%d %p %c: %m%n\n")


def kafka_lib() -> Path:
    """The broker's jars, fetched by tests/kafka/fetch.sh unless already there."""
    d = REPO / "target" / "tmp" / "kafka-4.3.1"
    done = subprocess.run([str(REPO / "tests/kafka/fetch.sh"), str(d)], capture_output=True, text=True)
    assert done.returncode == 0, f"cannot fetch the Kafka broker's jars (needs mvn): {done.stderr}"
    return d / "lib"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Broker:
    """A running broker on 127.0.0.1; `stop()` kills it and removes its logs."""

    def __init__(self) -> None:
        self.lib = kafka_lib()
        self._tmp = tempfile.TemporaryDirectory(prefix="sonde-kafka-")
        self.dir = Path(self._tmp.name)
        self.port, controller = free_port(), free_port()
        (self.dir / "server.properties").write_text(
            f"process.roles=broker,controller\nnode.id=1\ncontroller.quorum.voters=1@127.0.0.1:{controller}\n"
            f"listeners=PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{controller}\n"
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.port}\ncontroller.listener.names=CONTROLLER\n"
            "inter.broker.listener.name=PLAINTEXT\nlistener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT\n"
            f"log.dirs={self.dir / 'logs'}\noffsets.topic.replication.factor=1\ntransaction.state.log.replication.factor=1\n"
            "transaction.state.log.min.isr=1\nshare.coordinator.state.topic.replication.factor=1\n"
            "share.coordinator.state.topic.min.isr=1\ngroup.initial.rebalance.delay.ms=0\n")
        (self.dir / "log4j2.properties").write_text(LOG4J)
        fmt = subprocess.run(self.java("kafka.tools.StorageTool", "format", "-t", CLUSTER_ID, "-c",
                                       str(self.dir / "server.properties")), capture_output=True, text=True)
        assert fmt.returncode == 0, f"kafka-storage format failed: {fmt.stderr}"
        self._log = open(self.dir / "broker.log", "ab")
        self.proc = subprocess.Popen(self.java("kafka.Kafka", str(self.dir / "server.properties")),
                                     stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.producers: List[Producer] = []
        deadline = time.monotonic() + 90
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                assert self.proc.poll() is None, f"the broker exited:\n{self.log()}"
                assert time.monotonic() < deadline, f"the broker did not open its port in 90 s:\n{self.log()}"
                time.sleep(0.2)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def java(self, cls: str, *args: str) -> List[str]:
        return ["java", "-Xmx384m", f"-Dlog4j2.configurationFile={self.dir / 'log4j2.properties'}",
                "-cp", f"{self.lib}/*", cls, *args]

    def log(self) -> str:
        return (self.dir / "broker.log").read_text(errors="replace")[-5000:]

    def create_topics(self, *topics: Tuple[str, int]) -> None:
        """Creates (name, partitions) topics; retried while the broker is still starting."""
        for name, partitions in topics:
            deadline = time.monotonic() + 60
            while True:
                done = subprocess.run(self.java("org.apache.kafka.tools.TopicCommand", "--bootstrap-server",
                                                self.address, "--create", "--if-not-exists", "--topic", name,
                                                "--partitions", str(partitions), "--replication-factor", "1"),
                                      capture_output=True, text=True)
                if done.returncode == 0:
                    break
                assert time.monotonic() < deadline, f"cannot create {name}: {done.stderr}\n{self.log()}"
                time.sleep(1)

    def producer(self, topic: str) -> "Producer":
        p = Producer(self, topic)
        self.producers.append(p)
        return p

    def stop(self) -> None:
        for p in self.producers:
            p.close()
        self.proc.kill()
        self.proc.wait()
        self._log.close()
        self._tmp.cleanup()


class Producer:
    """The console producer of the broker's jars, kept running: `send` writes key TAB value
    lines to it; each is sent within the producer's linger (acks=all, so a closed producer's
    lines are in the log)."""

    def __init__(self, broker: Broker, topic: str) -> None:
        self.topic = topic
        self.proc: Optional[subprocess.Popen] = subprocess.Popen(
            broker.java("org.apache.kafka.tools.ConsoleProducer", "--bootstrap-server", broker.address,
                        "--topic", topic, "--property", "parse.key=true", "--property", "key.separator=\t",
                        "--producer-property", "linger.ms=5", "--producer-property", "acks=all"),
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def send(self, lines: List[Tuple[str, str]]) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        for key, value in lines:
            assert "\n" not in value and "\t" not in key
            self.proc.stdin.write(f"{key}\t{value}\n")
        self.proc.stdin.flush()

    def close(self) -> None:
        """Ends the input and waits for the producer to send what it has and exit."""
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        try:
            _, err = proc.communicate(timeout=60)  # closes stdin: the producer ends
            assert proc.returncode == 0, f"console producer for {self.topic}: {err}"
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
