"""Flows across probes (python/sonde/spark/flows.py) against a real Kafka broker
(python/tests/kafka_broker.py) and Spark in local mode: two "probes" — `sonde analyze --kafka
--probe-id p1|p2` on the two halves of a capture split by flow with BPF filters — publish their
flow records; the merge job (`python -m sonde.spark merge`, its own Spark) merges them into per-interval host and host-pair changelogs, which
must equal sonde's own application-layer tables of the WHOLE capture (`--tables`: al_hosts.tsv,
al_matrix.tsv summed over applications) row for row and counter for counter. An interim record,
an ICMP entry, a malformed message and a record days behind the watermark are sent too: counted,
never merged."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Dict, List

import pytest

from conftest import REPO, changelog_view, cli, shared, sonde_bin, spark_jars, tsv
from kafka_broker import Broker

sys.path.insert(0, str(REPO / "python"))
from sonde.spark import flows  # noqa: E402

TRACE = "groundtruth/mixed.pcap"
INTERVAL = 5
# By flow: the second bit of the ports' sum, the same both ways (as test_spark_merge.py).
HALF = "(tcp and ((tcp[0:2] + tcp[2:2]) & 2 = 0)) or (udp and ((udp[0:2] + udp[2:2]) & 2 = 0))"
FILTERS = {"p1": HALF, "p2": f"not ({HALF})"}
TOPIC = "flows-test"


@pytest.fixture(scope="module")
def broker():
    b = Broker()
    try:
        b.create_topics((TOPIC, 2))
        yield b
    finally:
        b.stop()


def publish(broker: Broker, trace: Path, probe: str, bpf: str, out: Path) -> dict:
    """A probe: `sonde analyze --kafka` of one half, its flows to the topic; its summary."""
    cmd = [str(sonde_bin()), "analyze", "-q", "--force", "-r", str(trace), "-o", str(out), "--interval", "0",
           "--kafka", broker.address, "--kafka-topic", TOPIC, "--kafka-interval-topic", "",
           "--kafka-histogram-topic", "", "--probe-id", probe, bpf]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, f"{cmd}: {done.stderr}"
    summary = json.loads((out / "summary.json").read_text())
    k = summary["kafka"]
    assert k["delivered"] == k["sent"] == k["flows"] > 0 and k["failed"] == 0, k
    return k


def test_two_probes_flows_merge_into_the_whole_captures_tables(broker, tmp_path):
    trace = shared(TRACE)
    jars = spark_jars()
    whole, _ = cli(trace, "--interval", str(INTERVAL), "--tables")
    sent = {p: publish(broker, trace, p, f, tmp_path / p) for p, f in FILTERS.items()}
    for p, k in sent.items():
        assert k["flows"] > 10, f"{p}: half empty: {k}"
    records = sum(k["flows"] for k in sent.values())
    icmp_entries = sum(len((tmp_path / p / "icmp_flows.tsv").read_text().splitlines()[1:])
                       for p in FILTERS if (tmp_path / p / "icmp_flows.tsv").exists())

    # What must not be merged: an interim record of a flow still open, an ICMP entry, a
    # malformed message, and an ended flow three days behind the watermark (late: it is the
    # last of its partition, read after batches of the probes' flows moved the watermark on).
    t0 = min(float(r["start"]) for r in tsv(whole / "al_hosts.tsv")) * 1000
    base = {"probe": "p1", "proto": "tcp", "c_port": 1, "s_port": 2, "c_pkts_all": 3, "s_pkts_all": 4,
            "c_bytes_all": 0, "s_bytes_all": 0, "c_bytes_ip": 300, "s_bytes_ip": 400,
            "first": t0, "last": t0 + 1000.5}
    extra = [
        json.dumps({**base, "c_ip": "192.0.2.1", "s_ip": "192.0.2.2", "end_reason": "open"}),
        json.dumps({"probe": "p1", "proto": "icmp", "client": "203.0.113.1", "server": "203.0.113.2",
                    "last": t0 + 1000.0}),
        "not json",
        json.dumps({**base, "c_ip": "198.51.100.1", "s_ip": "198.51.100.2", "end_reason": "fin",
                    "first": t0 - 3 * 86400e3, "last": t0 - 3 * 86400e3 + 1.0}),
    ]
    producer = broker.producer(TOPIC)
    producer.send([("p1", m) for m in extra])
    producer.close()

    # The merge job as a user runs it (its own Spark, the counters' topics absent: no error),
    # 20 messages a batch, compaction every 3 batches, until 8 s without a message.
    out = tmp_path / "merged"
    cmd = [sys.executable, "-m", "sonde.spark", "merge", "--kafka", broker.address, str(out),
           "--interval-topic", "absent-intervals", "--histogram-topic", "", "--flow-topic", TOPIC,
           "--flow-interval", str(INTERVAL), "--max-messages-per-batch", "20", "--compact-every", "3",
           "--trigger", "1", "--until-idle", "8", "--jars", str(jars), "--master", "local[2]"]
    started = time.monotonic()
    done = subprocess.run(cmd, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO / "python")},
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-5000:]
    st = json.loads((out / "_job.json").read_text())["flows"]
    print(f"\nthe job: {st['batches']} flow batches, {st['records']} records in "
          f"{time.monotonic() - started:.1f} s (Spark's start included); state rows {st.get('state_rows')}")
    assert st["records"] == records + len(extra), st
    assert (st["interim"], st["icmp"] - icmp_entries, st["malformed"]) == (1, 1, 1), st
    assert st["flows"] == records - icmp_entries + 1, st  # the late one passes the checks
    # The late flow: its two host rows and two pair rows behind the watermark.
    assert st["late_rows"] == 4, st
    # Several batches (20 messages each at most): the compaction ran.
    assert st["batches"] >= 3, st

    # Hosts: al_hosts.tsv of the whole capture summed over applications.
    want_hosts: Dict[tuple, List[int]] = defaultdict(lambda: [0] * 5)
    for r in tsv(whole / "al_hosts.tsv"):
        assert r["addr"] != "overflow"
        acc = want_hosts[(float(r["start"]), r["addr"])]
        for i, c in enumerate(("pkts_in", "bytes_in", "pkts_out", "bytes_out", "flows")):
            acc[i] += int(r[c])
    got_hosts = changelog_view(out / "hosts", flows.HOSTS_KEY)
    # mixed.pcap's two hosts over several intervals.
    assert len(got_hosts) >= 6 and len({k[0] for k in got_hosts}) >= 3, sorted(got_hosts)
    assert set(got_hosts) == set(want_hosts)
    for k, v in want_hosts.items():
        r = got_hosts[k]
        assert [r[c] for c in ("pkts_in", "bytes_in", "pkts_out", "bytes_out", "flows")] == v, k
        assert r["end"] == k[0] + INTERVAL, k

    # Pairs: al_matrix.tsv of the whole capture summed over applications.
    want_pairs: Dict[tuple, List[int]] = defaultdict(lambda: [0] * 3)
    for r in tsv(whole / "al_matrix.tsv"):
        assert r["src"] != "overflow"
        acc = want_pairs[(float(r["start"]), r["src"], r["dst"])]
        for i, c in enumerate(("packets", "bytes", "flows")):
            acc[i] += int(r[c])
    got_pairs = changelog_view(out / "pairs", flows.PAIRS_KEY)
    assert set(got_pairs) == set(want_pairs)
    for k, v in want_pairs.items():
        assert [got_pairs[k][c] for c in ("packets", "bytes", "flows")] == v, k

    # Compacted: fewer files than batches, and no staging directory left.
    names = [p.name for p in (out / "hosts").iterdir()]
    assert any("compact" in n for n in names), names
    assert not [n for n in names if n.startswith("_")], names
