"""`python -m sonde.spark merge` against a real Kafka broker (python/tests/kafka_broker.py) and
Spark in local mode: two "probes" publish contract 1's contributions made from REAL sonde
outputs (a capture split in two by flow with BPF filters, each half analysed by the CLI), a third
publishes with its clock days behind; the merged view must be the CLI's analysis of the whole
capture, counter for counter and bin for bin, with the same percentiles. Also the merge state's
restart (no Spark needed for that one)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import defaultdict
from decimal import Decimal
from pathlib import Path
from typing import Dict, List, Tuple

import pyarrow.parquet as pq
import pytest

from conftest import REPO, cli, read_tsv, shared
from kafka_broker import Broker

sys.path.insert(0, str(REPO / "python"))
from sonde.spark import merge  # noqa: E402

TRACE = "groundtruth/mixed.pcap"
ARGS = ("--interval", "1", "--internal", "10.77.0.1/32")
# By flow: the second bit of the ports' sum, the same both ways (the first is nearly always even:
# Linux gives connect() even ports, so it would leave one half with almost nothing).
HALF = "(tcp and ((tcp[0:2] + tcp[2:2]) & 2 = 0)) or (udp and ((udp[0:2] + udp[2:2]) & 2 = 0))"
FILTERS = {"p1": HALF, "p2": f"not ({HALF})"}
BEHIND_S = 3 * 86400  # probe p3's clock
SCALE = {"ms": 10**6, "%": 10**4}
HALF_DIGIT = {"ms": Decimal("0.0000005"), "%": Decimal("0.00005")}


@pytest.fixture(scope="module")
def broker():
    b = Broker()
    try:
        b.create_topics(("sonde-intervals", 2), ("sonde-histograms", 2))
        yield b
    finally:
        b.stop()


def spark_jars() -> Path:
    d = REPO / "target" / "tmp" / "spark-kafka-4.2.0"
    done = subprocess.run([str(REPO / "tests/spark/fetch.sh"), str(d)], capture_output=True, text=True)
    assert done.returncode == 0, f"cannot fetch Spark's Kafka source (needs mvn): {done.stderr}"
    return d / "lib"


def tsv(path: Path) -> List[Dict[str, str]]:
    header, rows = read_tsv(path)
    return [dict(zip(header, r)) for r in rows]


def interval_messages(probe: str, out: Path) -> List[Tuple[float, int, dict]]:
    """intervals.tsv as (start, round offset, message); every third row split in two, the
    second part one round later (as a flow closing later adds to its interval)."""
    msgs = []
    for i, r in enumerate(tsv(out / "intervals.tsv")):
        m = {"probe": probe, "start": float(r["start"]), "end": float(r["end"]), "proto": r["proto"],
             "net": r["net"], **{c: int(r[c]) for c in merge.COUNTERS}}
        if i % 3 == 0 and m["packets"] >= 2:
            first = {**m, "packets": m["packets"] // 2, "bytes": m["bytes"] // 2,
                     "flows_opened": 0, "flows_closed": 0, "flows_active": 0}
            rest = {**m, **{c: m[c] - first[c] for c in merge.COUNTERS}}
            msgs += [(m["start"], 0, first), (m["start"], 1, rest)]
        else:
            msgs.append((m["start"], 0, m))
    return msgs


def histogram_messages(probe: str, out: Path) -> List[Tuple[float, int, dict]]:
    """histograms.tsv's bins with quantiles.tsv's count, min, max and mean × count (the sum,
    to the printed mean's rounding), one message per key; every other key with two bins or more
    split into its lower and upper bins, the upper part one round later."""
    bins = defaultdict(list)
    for r in tsv(out / "histograms.tsv"):
        bins[(r["start"], r["metric"], r["dir"], r["net"])].append((r["bin_lo"], r["bin_hi"], int(r["count"])))
    msgs = []
    for i, q in enumerate(tsv(out / "quantiles.tsv")):
        key = (q["start"], q["metric"], q["dir"], q["net"])
        scale = SCALE.get(q["unit"], 1)
        b = bins[key]
        count = int(q["count"])
        total = int((Decimal(q["mean"]) * count * scale).to_integral_value())
        lo_v, hi_v = int(Decimal(q["min"]) * scale), int(Decimal(q["max"]) * scale)
        parts = [(b, lo_v, hi_v, total)]
        if i % 2 == 0 and len(b) >= 2:
            cut = len(b) // 2
            low, high = b[:cut], b[cut:]
            # The lower part's maximum and the upper part's minimum: values within their bins.
            low_max = max(lo_v, int(Decimal(low[-1][0]) * scale))
            high_min = min(hi_v, int(Decimal(high[0][0]) * scale))
            low_sum = sum(n for _, _, n in low) * lo_v
            parts = [(low, lo_v, low_max, low_sum), (high, high_min, hi_v, total - low_sum)]
        for delay, (pb, mn, mx, s) in enumerate(parts):
            msgs.append((float(q["start"]), delay, {
                "probe": probe, "start": float(q["start"]), "end": float(q["end"]), "metric": q["metric"],
                "dir": q["dir"], "net": q["net"], "unit": q["unit"], "count": sum(n for _, _, n in pb),
                "sum": s / scale, "min": mn / scale, "max": mx / scale,
                "bins": [[float(lo), float(hi), n] for lo, hi, n in pb]}))
        assert sum(n for _, _, n in b) == count, f"{out}: {key} bins do not add up"
    return msgs


def newest(directory: Path, key: Tuple[str, ...]) -> Dict[tuple, dict]:
    """The merged view of a changelog directory: the highest batch's row per key."""
    rows: Dict[tuple, dict] = {}
    files = [p for p in directory.glob("*.parquet") if not p.name.startswith(("_", "."))]
    assert files, f"nothing in {directory}"
    for p in files:
        for r in pq.read_table(p).to_pylist():
            k = tuple(r[c] for c in key)
            if k not in rows or r["batch"] > rows[k]["batch"]:
                rows[k] = r
    return rows


class MergeJob:
    """`python -m sonde.spark merge` on the broker into `out`, stopping after 6 s without a
    message; started when it says so on stderr."""

    def __init__(self, broker: Broker, out: Path, jars: Path):
        self.out = out
        self.log: List[str] = []
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "sonde.spark", "merge", "--kafka", broker.address, str(out),
             "--until-idle", "6", "--trigger", "1", "--jars", str(jars), "--master", "local[2]"],
            cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO / "python")},
            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        started = threading.Event()

        def read_stderr():
            for line in self.proc.stderr:
                self.log.append(line)
                if line.startswith("sonde merge:"):
                    started.set()
        threading.Thread(target=read_stderr, daemon=True).start()
        assert started.wait(120), "the merge job did not start:\n" + self.tail()

    def tail(self) -> str:
        return "".join(self.log[-60:])

    def wait_for_messages(self, n: int) -> None:
        deadline = time.monotonic() + 120
        while json.loads((self.out / "_job.json").read_text())["messages"] < n:
            assert time.monotonic() < deadline and self.proc.poll() is None, self.tail()
            time.sleep(0.2)

    def wait(self) -> None:
        assert self.proc.wait(180) == 0, "the merge job failed:\n" + self.tail()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def test_two_probes_merge_into_the_whole_captures_analysis(broker, tmp_path):
    trace = shared(TRACE)
    jars = spark_jars()
    whole, _ = cli(trace, *ARGS)
    halves = {p: cli(trace, *ARGS, f)[0] for p, f in FILTERS.items()}
    # Both halves hold flows (the split is by flow: each half's counters are a real probe's).
    for p, d in halves.items():
        assert len(tsv(d / "intervals.tsv")) > 5, f"{p}: half empty"

    out = tmp_path / "merged"
    starts = sorted({float(r["start"]) for r in tsv(whole / "intervals.tsv")})
    # Three rounds, each a third of the capture's intervals from both probes (sent together, as
    # two live probes would), the split rows' second parts a round later (a fourth round).
    cuts = [starts[len(starts) * k // 3] for k in range(3)] + [float("inf")]
    rounds: List[Tuple[List, List]] = [([], []) for _ in range(4)]
    for p, d in halves.items():
        for topic, made in ((0, interval_messages(p, d)), (1, histogram_messages(p, d))):
            for start, delay, m in made:
                rnd = next(k for k in range(3) if start < cuts[k + 1])
                rounds[min(rnd + delay, 3)][topic].append((p, json.dumps(m)))
    malformed = [("p1", "not json"), ("p1", '{"probe":"p1"}'),
                 ("p9", json.dumps({"probe": "p9", "start": starts[0], "end": starts[0] + 1, "metric": "ip_len",
                                    "dir": "-", "net": "ext", "unit": "bytes", "count": 5, "sum": 10,
                                    "min": 1, "max": 3, "bins": [[1, 2, 1], [3, 4, 1]]}))]
    # p3: two intervals of p1's, its clock three days behind.
    p3 = [("p3", json.dumps({**m, "probe": "p3", "start": m["start"] - BEHIND_S, "end": m["end"] - BEHIND_S}))
          for _, _, m in interval_messages("p1", halves["p1"])[:2]]

    intervals = broker.producer("sonde-intervals")
    histograms = broker.producer("sonde-histograms")
    statuses = []
    sent = 0
    # The job runs twice on the same checkpoint: stopped (idle) after two rounds, started again
    # for the rest; the second parts of round 2's split rows add to state the restart replayed.
    for run, batches in enumerate((rounds[:2], rounds[2:])):
        job = MergeJob(broker, out, jars)
        try:
            if run == 0:
                # The malformed messages first, alone: the job's first batch (Kafka consumers
                # made, code generated: seconds) is over when they are counted, so the rounds'
                # latency is the steady state's.
                intervals.send(malformed[:2])
                histograms.send(malformed[2:])
                sent += len(malformed)
                job.wait_for_messages(len(malformed))
            for ivs, hs in batches:
                intervals.send(ivs)
                histograms.send(hs)
                sent += len(ivs) + len(hs)
                time.sleep(2.5)
            if run == 1:
                intervals.send(p3)
                sent += len(p3)
                intervals.close()
                histograms.close()
            job.wait()
        finally:
            job.kill()
        statuses.append(json.loads((out / "_job.json").read_text()))

    first, status = statuses
    assert first["messages"] + status["messages"] == sent, statuses
    assert status["replayed_through"] == first["latest_batch"]["batch"], status
    assert first["malformed"] == 3 and first["_errors"] == 3, first["malformed_by_reason"]
    assert status["malformed"] == 0, status["malformed_by_reason"]
    assert status["late"] == len(p3), status  # days behind the others: past --max-age, not merged
    print("\nbatch  messages  latency s: min / median / max (Kafka arrival -> merged rows in Parquet);"
          " collect s, merge s; Spark's batch ms")
    for run, st in enumerate(statuses):
        print(f"run {run + 1}:")
        for i, b in enumerate(st["recent"]):
            lat = b.get("latency_s")
            if lat:
                print(f"{b['batch']:5d}  {b['messages']:8d}  {lat['min']:.3f} / {lat['median']:.3f} / {lat['max']:.3f};"
                      f" {b['collect_s']:.3f}, {b['merge_s']:.3f}; {b.get('spark_ms', {}).get('triggerExecution')}"
                      + ("  (the first batch: warming up)" if i == 0 or run == 0 and b["messages"] == 3 else ""))

    # Intervals: the whole capture's intervals.tsv, counter for counter; `probes` as published.
    got = newest(out / "intervals", ("start", "proto", "net"))
    want = {(float(r["start"]), r["proto"], r["net"]): r for r in tsv(whole / "intervals.tsv")}
    assert set(got) == set(want)
    by_probe = defaultdict(int)
    for d in halves.values():
        for r in tsv(d / "intervals.tsv"):
            by_probe[(float(r["start"]), r["proto"], r["net"])] += 1
    for k, r in want.items():
        assert got[k]["end"] == float(r["end"]), k
        assert {c: got[k][c] for c in merge.COUNTERS} == {c: int(r[c]) for c in merge.COUNTERS}, k
        assert got[k]["probes"] == by_probe[k], k

    # Histograms: bin for bin.
    got_bins = newest(out / "histograms", ("start", "metric", "dir", "net", "bin_lo"))
    want_bins = {(float(r["start"]), r["metric"], r["dir"], r["net"], float(r["bin_lo"])): r
                 for r in tsv(whole / "histograms.tsv")}
    assert set(got_bins) == set(want_bins)
    for k, r in want_bins.items():
        assert (got_bins[k]["bin_hi"], got_bins[k]["count"]) == (float(r["bin_hi"]), int(r["count"])), k

    # Quantiles: same bins, so the same percentiles; count, min and max exact; the mean to the
    # halves' printed means' rounding (their sums were rebuilt from mean × count).
    got_q = newest(out / "quantiles", ("start", "metric", "dir", "net"))
    half_q = {p: {(float(r["start"]), r["metric"], r["dir"], r["net"]): r for r in tsv(d / "quantiles.tsv")}
              for p, d in halves.items()}
    want_q = {(float(r["start"]), r["metric"], r["dir"], r["net"]): r for r in tsv(whole / "quantiles.tsv")}
    assert set(got_q) == set(want_q)
    differ = []
    for k, r in want_q.items():
        g = got_q[k]
        assert g["count"] == int(r["count"]) and g["unit"] == r["unit"], k
        for c in ("min", "p50", "p95", "p99", "max"):
            if g[c] != float(r[c]):
                differ.append((k, c, g[c], r[c]))
        unit_digit = HALF_DIGIT.get(r["unit"], Decimal("0.0005"))
        rounding = sum(int(h[k]["count"]) * unit_digit for h in half_q.values() if k in h) / int(r["count"])
        assert abs(Decimal(g["mean"]) - Decimal(r["mean"])) <= rounding + unit_digit + Decimal("1e-9"), (k, g["mean"], r["mean"])
        assert g["probes"] == sum(k in h for h in half_q.values()), k
    assert not differ, f"{len(differ)} percentiles differ from quantiles.tsv: {differ[:5]}"

    # Probes: the two in step, p3 flagged. p1 and p2 publish together; their offsets are what
    # tells their reading apart (the same batch: 0) and their last intervals' ends.
    probes = {k[0]: r for k, r in newest(out / "probes", ("probe",)).items()}
    assert set(probes) == {"p1", "p2", "p3"}
    p1, p2 = probes["p1"], probes["p2"]
    for p, d in halves.items():
        last = max(float(r["start"]) for r in tsv(d / "intervals.tsv") + tsv(d / "quantiles.tsv"))
        assert probes[p]["last_start"] == last and probes[p]["interval_s"] == 1.0, probes[p]
    spread = abs(p1["seen_at"] - p2["seen_at"]) + abs(p1["last_end"] - p2["last_end"])
    for p in (p1, p2):
        assert abs(p["offset_s"]) <= spread + 1e-6, (p1, p2)
        assert p["clock_off"] is (abs(p["offset_s"]) > p["interval_s"]), p
    if spread <= 1.0:
        assert not p1["clock_off"] and not p2["clock_off"], (p1, p2)
    assert probes["p3"]["clock_off"] is True, probes["p3"]
    assert probes["p3"]["offset_s"] > BEHIND_S / 2, probes["p3"]
    for r in probes.values():
        assert abs(r["lag_s"] - (r["seen_at"] - r["last_end"])) < 1e-6


def _rows(kind: str, msgs: List[dict]) -> List[dict]:
    return [{"kind": kind, "msg": m, "ts": None} for m in msgs]


def test_the_merge_state_survives_a_restart(tmp_path):
    """A restarted job replays its logged contributions: a contribution after the restart adds to
    what came before, and a batch Spark runs again (not yet committed) is not added twice."""
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    iv = {"probe": "p1", "start": 100.0, "end": 101.0, "proto": "tcp", "net": "in", "packets": 3,
          "bytes": 300, "flows_opened": 1, "flows_closed": 0, "flows_active": 1}
    h = {"probe": "p1", "start": 100.0, "end": 101.0, "metric": "tcp_rtt_avg", "dir": "c2s", "net": "in",
         "unit": "ms", "count": 2, "sum": 80.5, "min": 40.0, "max": 40.5,
         "bins": [[39.845888, 40.370176, 1], [40.370176, 40.894464, 1]]}
    other_unit = {**h, "unit": "bytes", "sum": 20, "min": 1, "max": 1000, "bins": [[1, 2, 1], [1000, 1008, 1]]}
    # And a probe days behind the two others: gone from the state and the probe table once the
    # batch is over.
    behind = {**iv, "probe": "p0", "start": iv["start"] - 86400, "end": iv["end"] - 86400}
    udp = {**iv, "probe": "p2", "proto": "udp"}
    job = merge.Job(out, ckpt, max_age_s=600, probe_window_s=60)
    job.run_batch(_rows("interval", [iv, behind, udp]) + _rows("histogram", [h, other_unit]), 0)
    assert job.merger.stats["conflicts"] == 1 and job.merger.stats["expired_keys"] == 1
    assert set(job.merger.probes) == {"p1", "p2"}
    job = merge.Job(out, ckpt, max_age_s=600, probe_window_s=60)  # restart
    assert job.replayed == 0
    # Batch 0 again: no change. Its log holds a contribution in another unit than the key's
    # (not merged then) and one of a probe gone since: its rows are written again without them.
    job.run_batch(_rows("interval", [iv, behind, udp]) + _rows("histogram", [h, other_unit]), 0)
    job.run_batch(_rows("interval", [{**iv, "probe": "p2"}]) + _rows("histogram", [{**h, "probe": "p2"}]), 1)
    got = newest(out / "intervals", ("start", "proto", "net"))[(100.0, "tcp", "in")]
    assert (got["packets"], got["bytes"], got["probes"], got["batch"]) == (6, 600, 2, 1)
    q = newest(out / "quantiles", ("start", "metric", "dir", "net"))[(100.0, "tcp_rtt_avg", "c2s", "in")]
    assert (q["count"], q["mean"], q["min"], q["max"]) == (4, 40.25, 40.0, 40.5)
    # Nearest rank 2 of 4 is in the lower bin: its middle (40.108032), within [min, max].
    assert q["p50"] == 40.108032 and q["p99"] == 40.5


def test_percentile_is_sonde_stats(tmp_path):
    """The reading of `Dist::percentile`: nearest rank, the bin's middle rounded down in base
    units, clamped to min and max (bins/values of sonde-stats' own unit test shape)."""
    bins = [(128, 130, 3), (130, 132, 1), (1024, 1040, 6)]
    assert merge.percentile(10, 128, 1039, bins, 30) == 129
    assert merge.percentile(10, 128, 1039, bins, 40) == 131
    assert merge.percentile(10, 128, 1035, bins, 99) == 1032
    assert merge.percentile(10, 128, 1030, bins, 99) == 1030  # kept within max
    assert merge.percentile(1, 5, 5, [(5, 6, 1)], 50) == 5


def test_state_is_bounded_by_max_age_of_packet_time(tmp_path):
    """Intervals older than --max-age behind the probes' median newest end leave the state (and
    their logged contributions the checkpoint); a contribution that comes for one later is
    counted as late and not merged (a half row would replace the whole one in the view)."""
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    job = merge.Job(out, ckpt, max_age_s=10, probe_window_s=60)

    def iv(probe: str, start: float) -> dict:
        return {"probe": probe, "start": start, "end": start + 1, "proto": "udp", "net": "ext", "packets": 1,
                "bytes": 60, "flows_opened": 0, "flows_closed": 0, "flows_active": 1}
    for b, start in enumerate(range(100, 130)):
        job.run_batch(_rows("interval", [iv("p1", start), iv("p2", start)]), b)
        assert len(job.merger.intervals) <= 10  # starts within 10 s before the newest end
    assert min(k[0] for k in job.merger.intervals) == 120.0  # the newest end, 130, less 10
    assert len(list((ckpt / "sonde-merge").glob("batch-*.json"))) <= 11
    job.run_batch(_rows("interval", [iv("p1", 105)]), 30)
    assert job.merger.stats["late"] == 1 and (105.0, "udp", "ext") not in job.merger.intervals
    view = newest(out / "intervals", ("start", "proto", "net"))
    assert view[(105.0, "udp", "ext")]["packets"] == 2  # the merged row stands
    status = json.loads((out / "_job.json").read_text())
    assert status["late"] == 1 and status["expired_keys"] == 20 and status["state"]["intervals"] == 10


def test_compaction_keeps_the_view_and_bounds_the_files(tmp_path):
    """Every `compact_every` batches a directory's single-batch files become one file of their
    newest rows: the same view (newest row per key), a bounded number of files."""
    views = []
    for every in (0, 4):
        out = tmp_path / f"out{every}"
        job = merge.Job(out, tmp_path / f"ckpt{every}", max_age_s=600, probe_window_s=60, compact_every=every)
        for b in range(10):
            start = 100.0 + b // 3  # three batches add to each interval
            ivs = [{"probe": f"p{b % 2}", "start": start, "end": start + 1, "proto": "tcp", "net": "in",
                    "packets": b + 1, "bytes": 100, "flows_opened": 1, "flows_closed": 0, "flows_active": 1}]
            hs = [{"probe": f"p{b % 2}", "start": start, "end": start + 1, "metric": "ip_len", "dir": "-",
                   "net": "in", "unit": "bytes", "count": 2, "sum": 100 + b, "min": 40, "max": 60 + b,
                   "bins": [[40, 41, 1], [60 + b, 61 + b, 1]]}]
            job.run_batch(_rows("interval", ivs) + _rows("histogram", hs), b)
        view = {name: newest(out / name, key) for name, key in merge.KEYS.items()}
        for r in view["probes"].values():  # the job's wall clock: differs between the two runs
            for wall in ("seen_at", "lag_s", "offset_s"):
                del r[wall]
        views.append(view)
        files = sorted(p.name for p in (out / "histograms").glob("*.parquet"))
        if every:
            assert files == ["part-00000003-compact.parquet", "part-00000007-compact.parquet",
                             "part-00000008-sonde.parquet", "part-00000009-sonde.parquet"]
            assert job.compacted_files >= 3 * 2 * 4  # two compactions of four files (probes: fewer files)
        else:
            assert len(files) == 10
    assert views[0] == views[1]
    assert views[0]["intervals"][(101.0, "tcp", "in")]["packets"] == 4 + 5 + 6


def test_malformed_messages_are_counted_and_skipped(tmp_path):
    """Every way a message can break contract 1 is counted under its reason, and nothing of it
    reaches the view; the good message beside them does."""
    iv = {"probe": "p1", "start": 100.0, "end": 101.0, "proto": "tcp", "net": "in", "packets": 3,
          "bytes": 300, "flows_opened": 1, "flows_closed": 0, "flows_active": 1}
    h = {"probe": "p1", "start": 100.0, "end": 101.0, "metric": "tcp_rtt_avg", "dir": "c2s", "net": "in",
         "unit": "ms", "count": 2, "sum": 80.5, "min": 40.0, "max": 40.5,
         "bins": [[39.845888, 40.370176, 1], [40.370176, 40.894464, 1]]}
    bad_iv = [None, {**iv, "probe": "no spaces"}, {**iv, "probe": "x" * 65}, {**iv, "start": None},
              {**iv, "end": 100.0}, {**iv, "packets": -1}, {**iv, "bytes": float("nan")}, {**iv, "proto": ""},
              {**iv, "flows_active": True}, {**iv, "start": float("inf")}]
    bad_h = [{**h, "count": 3}, {**h, "bins": []}, {**h, "bins": [[40.0, 39.0, 2]]}, {**h, "bins": [[1, 2]]},
             {**h, "bins": [[39.845888, 40.370176, 0], [40.370176, 40.894464, 2]]}, {**h, "min": 41.0},
             {**h, "sum": 80.0000001}, {**h, "unit": None}, {**h, "count": 0, "bins": []},
             {**h, "unit": "bytes", "bins": [[39, 40, 1], [40, 41, 1]], "min": 39, "max": 40, "sum": 79}]
    job = merge.Job(tmp_path / "out", tmp_path / "ckpt", max_age_s=600, probe_window_s=60)
    job.run_batch(_rows("interval", bad_iv + [iv]) + _rows("histogram", [h] + bad_h), 0)
    m = job.merger
    # The last of bad_h is well formed, but in another unit than the key already has: a conflict.
    assert m.stats["malformed"] == len(bad_iv) + len(bad_h) and m.stats["conflicts"] == 1, m.malformed_by_reason
    assert m.stats["messages"] == len(bad_iv) + len(bad_h) + 2
    got = newest(tmp_path / "out" / "intervals", ("start", "proto", "net"))
    assert [r["packets"] for r in got.values()] == [3]
    q = newest(tmp_path / "out" / "quantiles", ("start", "metric", "dir", "net"))
    assert [(r["count"], r["unit"]) for r in q.values()] == [(2, "ms")]
    status = json.loads((tmp_path / "out" / "_job.json").read_text())
    assert status["_errors"] == m.stats["malformed"] and sum(status["malformed_by_reason"].values()) == status["_errors"]


def test_state_past_max_rows_drops_the_oldest_intervals(tmp_path):
    """--max-state-rows: past it, whole intervals leave the state oldest first (counted), and a
    contribution for one of them is then late; the state never stays above the cap."""
    job = merge.Job(tmp_path / "out", tmp_path / "ckpt", max_age_s=10**6, probe_window_s=60, max_rows=25)
    for b in range(8):
        start = 100.0 + b
        ivs = [{"probe": "p1", "start": start, "end": start + 1, "proto": "tcp", "net": net, "packets": 1,
                "bytes": 60, "flows_opened": 0, "flows_closed": 0, "flows_active": 1} for net in ("in", "out")]
        hs = [{"probe": "p1", "start": start, "end": start + 1, "metric": "ip_len", "dir": "-", "net": "in",
               "unit": "bytes", "count": 3, "sum": 150, "min": 40, "max": 60,
               "bins": [[40, 41, 1], [50, 51, 1], [60, 61, 1]]}]
        job.run_batch(_rows("interval", ivs) + _rows("histogram", hs), b)
        assert job.merger.rows_held() <= 25
    m = job.merger
    assert m.rows_held() == 25 and min(k[0] for k in m.intervals) == 103.0  # 5 intervals of 5 rows
    assert m.stats["evicted_keys"] == 3 * 3 and m.stats["expired_keys"] == 0
    job.run_batch(_rows("interval", [{"probe": "p1", "start": 102.0, "end": 103.0, "proto": "tcp", "net": "in",
                                      "packets": 1, "bytes": 60, "flows_opened": 0, "flows_closed": 0,
                                      "flows_active": 0}]), 8)
    assert m.stats["late"] == 1
    status = json.loads((tmp_path / "out" / "_job.json").read_text())
    assert status["state"]["rows"] == 25 and status["evicted_keys"] == 9
