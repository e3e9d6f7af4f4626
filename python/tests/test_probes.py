"""Many probes, one view, end to end with the real components: a real capture split by flow
across two `sonde monitor` probes on two veth pairs (tcpreplay), each publishing to a real Kafka
broker; the Spark Structured Streaming merge job (`python -m sonde.spark merge`, local[2]) adding
them up into Parquet; `sonde serve --merged` serving that view. The merged view must equal,
counter for counter and bin for bin, the offline analysis of everything the probes captured
(dumpcap beside each probe sees the same packets with the same timestamps). Needs root."""

from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import sys
import threading
import time
import urllib.request
import zlib
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Tuple

import duckdb
import pytest

from conftest import REPO, read_tsv, shared, sonde_bin
from kafka_broker import Broker
from veth import VethPairs, why_not

pytestmark = pytest.mark.skipif(why_not() is not None, reason=f"SKIPPED: {why_not()}")

INTERVAL = 2
PPS = 400


def split_by_flow(trace: Path, outs: List[Path]) -> List[int]:
    """Writes each frame of a classic Ethernet pcap to one of `outs` by a hash of its flow's
    two endpoints (the same both ways); frames that are not TCP or UDP over IP go to the first.
    Returns the frames each got."""
    data = trace.read_bytes()
    header, pos = data[:24], 24
    assert struct.unpack("<I", header[:4])[0] == 0xA1B2C3D4, f"{trace}: not a little-endian µs pcap"
    files = [open(p, "wb") for p in outs]
    for f in files:
        f.write(header)
    counts = [0] * len(outs)
    while pos + 16 <= len(data):
        incl = struct.unpack("<I", data[pos + 8:pos + 12])[0]
        record = data[pos:pos + 16 + incl]
        pos += 16 + incl
        i = flow_hash(record[16:]) % len(outs)
        files[i].write(record)
        counts[i] += 1
    for f in files:
        f.close()
    return counts


def flow_hash(frame: bytes) -> int:
    ethertype, l3 = struct.unpack("!H", frame[12:14])[0], 14
    while ethertype == 0x8100 and len(frame) >= l3 + 4:
        ethertype, l3 = struct.unpack("!H", frame[l3 + 2:l3 + 4])[0], l3 + 4
    if ethertype == 0x0800 and len(frame) >= l3 + 20:
        proto, ihl = frame[l3 + 9], (frame[l3] & 0x0F) * 4
        fragment = struct.unpack("!H", frame[l3 + 6:l3 + 8])[0] & 0x1FFF
        src, dst, l4 = frame[l3 + 12:l3 + 16], frame[l3 + 16:l3 + 20], l3 + ihl
    elif ethertype == 0x86DD and len(frame) >= l3 + 40:
        proto, fragment = frame[l3 + 6], 0
        src, dst, l4 = frame[l3 + 8:l3 + 24], frame[l3 + 24:l3 + 40], l3 + 40
    else:
        return 0
    if proto not in (6, 17) or fragment or len(frame) < l4 + 4:
        return 0
    ends = sorted([src + frame[l4:l4 + 2], dst + frame[l4 + 2:l4 + 4]])
    return zlib.crc32(bytes([proto]) + ends[0] + ends[1])


def get(url: str):
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


def newest(directory: Path, key: str) -> duckdb.DuckDBPyRelation:
    """The merged view of one changelog: its newest row per key."""
    return duckdb.sql(
        f"SELECT * EXCLUDE (rn) FROM (SELECT *, row_number() OVER (PARTITION BY {key} ORDER BY batch DESC) AS rn "
        f"FROM read_parquet('{directory}/*.parquet')) WHERE rn = 1")


def batches_done(merged: Path) -> int:
    """The merge job's batches so far (its `_job.json`, rewritten whole after each)."""
    try:
        return json.loads((merged / "_job.json").read_text())["batches"]
    except (OSError, ValueError, KeyError):
        return 0


def started(proc: subprocess.Popen, words: str) -> None:
    """Reads `proc`'s stderr until a line holding `words` (then keeps draining it)."""
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if words in line:
            break
    else:
        raise AssertionError(f"{proc.args}: exited before saying {words!r}:\n{''.join(seen)}")
    threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()


def test_two_probes_merge_to_the_offline_analysis(tmp_path: Path) -> None:
    trace = shared("groundtruth/mixed.pcap")
    halves = [tmp_path / "half0.pcap", tmp_path / "half1.pcap"]
    counts = split_by_flow(trace, halves)
    assert min(counts) > 1000, counts
    sonde = str(sonde_bin())
    merged = tmp_path / "merged"
    merged.mkdir()
    broker = Broker()
    procs: List[subprocess.Popen] = []
    try:
        broker.create_topics(("sonde-intervals", 2), ("sonde-histograms", 2), ("sonde-flows", 2))
        with VethPairs(2) as links:
            caps = [tmp_path / f"cap{i}.pcapng" for i in range(2)]
            for i, link in enumerate(links.capture):
                dump = subprocess.Popen(["dumpcap", "-q", "-i", link, "-w", str(caps[i])],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                procs.append(dump)
                probe = subprocess.Popen(
                    [sonde, "monitor", "-i", link, "--force", "-o", str(tmp_path / f"probe{i}"),
                     "--interval", str(INTERVAL), "--probe-id", f"p{i}", "--kafka", broker.address],
                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                procs.append(probe)
                started(probe, f"capturing on {link}")
            merge = subprocess.Popen(
                [sys.executable, "-m", "sonde.spark", "merge", "--kafka", broker.address, str(merged),
                 "--trigger", "1", "--until-idle", "25"],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                env={**os.environ, "PYTHONPATH": str(REPO / "python")})
            procs.append(merge)
            serve = subprocess.Popen([sonde, "serve", "--merged", str(merged), "--http", "127.0.0.1:0",
                                      "--reload", "0.5", "-q"],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            procs.append(serve)
            url = next(w for w in serve.stdout.readline().split() if w.startswith("http://")).rstrip("/")
            deadline = time.monotonic() + 30
            while not all(c.exists() for c in caps):
                assert time.monotonic() < deadline, "dumpcap did not start"
                time.sleep(0.1)
            # A third probe whose clock is far off publishes the demo trace (days old) now, and
            # again while the live probes publish. The replay waits for the job to have merged
            # the first: the latencies below are the running job's, not its start's (Spark's
            # session, its Kafka consumers).
            def late_probe() -> None:
                subprocess.run([sonde, "analyze", "-q", "--force", "-r", str(REPO / "testdata/demo.pcap"), "-o",
                                str(tmp_path / "late"), "--interval", str(INTERVAL), "--probe-id", "late",
                                "--kafka", broker.address], check=True)

            late_probe()
            while not batches_done(merged):
                assert merge.poll() is None, merge.stderr.read()
                assert time.monotonic() < deadline + 180, "the merge job did not start"
                time.sleep(0.2)
            replays = [links.replay(i, halves[i], PPS // 2) for i in range(2)]
            # What the server shows of each interval while the replay runs: (wall clock, packets).
            seen: Dict[float, List[Tuple[float, int]]] = defaultdict(list)
            replayed_at = time.monotonic()
            while any(r.poll() is None for r in replays):
                if replayed_at is not None and time.monotonic() > replayed_at + 8:
                    late_probe()
                    replayed_at = None
                now = time.time()
                for interval in get(f"{url}/api/intervals")["items"]:
                    seen[interval["start_s"]].append((now, sum(t["packets"] for t in interval["traffic"])))
                time.sleep(0.25)
            for r in replays:
                assert r.wait() == 0, r.stderr.read()
            time.sleep(1)
            for p in procs[:4]:
                p.send_signal(signal.SIGINT)
            for p in procs[:4]:
                assert p.wait(timeout=60) == 0, p.args
            assert merge.wait(timeout=300) == 0, merge.stderr.read()
            time.sleep(1.5)
            served = get(f"{url}/api/intervals")
            probes = get(f"{url}/api/probes")
            pairs_served = get(f"{url}/api/flows?limit=1000")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        broker.stop()

    # The offline analysis of everything the probes captured.
    whole = tmp_path / "whole.pcapng"
    subprocess.run(["mergecap", "-w", str(whole), *map(str, caps)], check=True)
    offline = tmp_path / "offline"
    subprocess.run([sonde, "analyze", "-q", "--force", "-r", str(whole), "-o", str(offline),
                    "--interval", str(INTERVAL), "--tables"], check=True)

    head, rows = read_tsv(offline / "intervals.tsv")
    want = {(float(r[0]), r[2], r[3]): tuple(int(v) for v in r[4:9]) for r in rows}
    # The late probe's intervals are days before the live ones: left aside.
    live = min(k[0] for k in want)
    got = {(r[0], r[2], r[3]): tuple(r[4:9]) for r in newest(merged / "intervals", "start, proto, net").fetchall()
           if r[0] >= live}
    assert head[4:9] == ["packets", "bytes", "flows_opened", "flows_closed", "flows_active"]
    assert got == want

    _, rows = read_tsv(offline / "histograms.tsv")
    want_bins = {(float(r[0]), r[2], r[3], r[4], float(r[5])): (float(r[6]), int(r[7])) for r in rows}
    got_bins = {(r[0], r[1], r[2], r[3], r[4]): (r[5], r[6]) for r in newest(
        merged / "histograms", "start, metric, dir, net, bin_lo").project(
        "start, metric, dir, net, bin_lo, bin_hi, count").fetchall() if r[0] >= live}
    assert got_bins == want_bins

    head, rows = read_tsv(offline / "quantiles.tsv")
    want_q = {(float(r[0]), r[2], r[3], r[4]): r for r in rows}
    quantiles = newest(merged / "quantiles", "start, metric, dir, net").filter(f"start >= {live}").df()
    assert len(quantiles) == len(want_q)
    for q in quantiles.itertuples():
        w = dict(zip(head, want_q[(q.start, q.metric, q.dir, q.net)]))
        assert q.count == int(w["count"]) and q.unit == w["unit"]
        # The same bins give the same percentiles: equal to the TSV's printed precision.
        for col in ("min", "p50", "p95", "p99", "max", "mean"):
            decimals = len(w[col].partition(".")[2])
            assert abs(getattr(q, col) - float(w[col])) <= 0.5 * 10 ** -decimals + 1e-9, (q, col, w[col])

    # The probe whose clock is off, and only it, is flagged; the served view is the merged one.
    assert {p["probe"]: p["clock_off"] for p in probes["items"]} == {"p0": False, "p1": False, "late": True}, probes
    served_rows = {(i["start_s"], t["proto"], t["net"]): t["packets"] for i in served["items"] for t in i["traffic"]
                   if i["start_s"] >= live}
    assert served_rows == {k: v[0] for k, v in want.items()}

    # Flows across probes: every flow record the probes published merged (none late, malformed
    # or interim), and each live host's traffic over the run equal to the offline analysis's
    # application-layer host table (the job charges a flow to a 60 s interval, the offline one
    # to a 2 s one: compared summed over the run).
    job = json.loads((merged / "_job.json").read_text())["flows"]
    sent = {d: json.loads((tmp_path / d / "summary.json").read_text())["kafka"]["flows"]
            for d in ("probe0", "probe1", "late")}
    # The late probe published twice; its second flows may be behind the watermark (late_rows).
    assert job["records"] == sent["probe0"] + sent["probe1"] + 2 * sent["late"], (job, sent)
    assert job["malformed"] == job["interim"] == 0, job
    _, rows = read_tsv(offline / "al_hosts.tsv")
    want_hosts: Dict[str, List[int]] = defaultdict(lambda: [0, 0, 0, 0, 0])
    for r in rows:
        for i, v in enumerate(r[-5:]):
            want_hosts[r[2]][i] += int(v)
    assert read_tsv(offline / "al_hosts.tsv")[0][-5:] == ["pkts_in", "bytes_in", "pkts_out", "bytes_out", "flows"]
    got_hosts: Dict[str, List[int]] = defaultdict(lambda: [0, 0, 0, 0, 0])
    for r in newest(merged / "hosts", "start, addr").filter(f"start >= {live - 60}").project(
            "addr, pkts_in, bytes_in, pkts_out, bytes_out, flows").fetchall():
        for i, v in enumerate(r[1:]):
            got_hosts[r[0]][i] += v
    assert dict(got_hosts) == dict(want_hosts)
    assert pairs_served["rows"] and pairs_served["proto"] == "pairs", pairs_served

    # How long after its end each interval was served with all its packets, network-wide (its
    # flows' statistics may come later: a flow counts when it ends). Printed, not asserted.
    packets: Dict[float, int] = defaultdict(int)
    for (start, _, _), v in want.items():
        packets[start] += v[0]
    by_start = {s: next(t for t, n in seen[s] if n == packets[s]) - (s + INTERVAL)
                for s in sorted(packets) if any(n == packets[s] for _, n in seen.get(s, []))}
    print("latency by interval:", " ".join(f"{v:.2f}" for v in by_start.values()))
    latencies = sorted(by_start.values())
    assert len(latencies) >= len(packets) // 2, (len(latencies), len(packets))
    print(f"merged-view latency over {len(latencies)} intervals: median {latencies[len(latencies) // 2]:.2f} s, "
          f"max {latencies[-1]:.2f} s (interval {INTERVAL} s)")
