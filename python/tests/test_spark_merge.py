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

import pytest

from conftest import REPO, changelog_view, cli, doc_queries, shared, spark_jars, tsv
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
    # The restart resumed from Spark's checkpoint: its batches follow the first run's.
    assert status["recent"][0]["batch"] > first["latest_batch"]["batch"], status
    assert first["malformed"] == 3 and first["_errors"] == 3, first["malformed_by_reason"]
    assert status["malformed"] == 0, status["malformed_by_reason"]
    assert status["late"] == len(p3), status  # days behind the others: past --max-age, not merged
    print("\nbatch  messages  latency s: min / median / max (Kafka arrival -> merged rows in Parquet);"
          " Spark's batch ms; state rows")
    for run, st in enumerate(statuses):
        print(f"run {run + 1}:")
        for i, b in enumerate(st["recent"]):
            lat = b.get("latency_s")
            if lat:
                print(f"{b['batch']:5d}  {b['messages']:8d}  {lat['min']:.3f} / {lat['median']:.3f} / {lat['max']:.3f};"
                      f" {b.get('spark_ms', {}).get('triggerExecution')}; {b.get('state_rows')}"
                      + ("  (the first batch: warming up)" if i == 0 or run == 0 and b["messages"] == 3 else ""))

    # Intervals: the whole capture's intervals.tsv, counter for counter; `probes` as published.
    got = changelog_view(out / "intervals", ("start", "proto", "net"))
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
    # docs/spark.md's DuckDB query of the merged view, verbatim, gives the same rows.
    [(_, _, query)] = [q for q in doc_queries("spark.md") if "'merged/" in q[2]]
    import duckdb
    cwd = os.getcwd()
    os.chdir(out.parent)  # the query reads 'merged/intervals/*.parquet'
    try:
        cursor = duckdb.connect().execute(query)
        names = [d[0] for d in cursor.description]
        rows = [dict(zip(names, row)) for row in cursor.fetchall()]
    finally:
        os.chdir(cwd)
    assert {(r["start"], r["proto"], r["net"]): r for r in rows} == got

    # Histograms: bin for bin.
    got_bins = changelog_view(out / "histograms", ("start", "metric", "dir", "net", "bin_lo"))
    want_bins = {(float(r["start"]), r["metric"], r["dir"], r["net"], float(r["bin_lo"])): r
                 for r in tsv(whole / "histograms.tsv")}
    assert set(got_bins) == set(want_bins)
    for k, r in want_bins.items():
        assert (got_bins[k]["bin_hi"], got_bins[k]["count"]) == (float(r["bin_hi"]), int(r["count"])), k

    # Quantiles: same bins, so the same percentiles; count, min and max exact; the mean to the
    # halves' printed means' rounding (their sums were rebuilt from mean × count).
    got_q = changelog_view(out / "quantiles", ("start", "metric", "dir", "net"))
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
    probes = {k[0]: r for k, r in changelog_view(out / "probes", ("probe",)).items()}
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


# --- the merge itself on Spark, fed from files instead of Kafka (no broker: each file one batch) ---

IV = {"probe": "p1", "start": 100.0, "end": 101.0, "proto": "tcp", "net": "in", "packets": 3,
      "bytes": 300, "flows_opened": 1, "flows_closed": 0, "flows_active": 1}
H = {"probe": "p1", "start": 100.0, "end": 101.0, "metric": "tcp_rtt_avg", "dir": "c2s", "net": "in",
     "unit": "ms", "count": 2, "sum": 80.5, "min": 40.0, "max": 40.5,
     "bins": [[39.845888, 40.370176, 1], [40.370176, 40.894464, 1]]}


@pytest.fixture(scope="module")
def spark():
    session = merge.spark_session("local[2]", None, 2)
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


class FileRun:
    """The merge job's query (`merge.start`) on a file source holding Kafka-shaped records
    (topic, value, timestamp), one file per batch, run to the end of the files
    (`availableNow`); run again on the same checkpoint, it is a restart."""

    def __init__(self, spark, tmp: Path, *options: str):
        from sonde.spark.__main__ import parser

        self.spark, self.src, self.out, self.ckpt = spark, tmp / "src", tmp / "out", tmp / "ckpt"
        self.src.mkdir(parents=True)
        self.args = parser().parse_args(["merge", "--kafka", "unused", str(self.out), *options])
        self.files = 0

    def send(self, intervals=(), histograms=()) -> None:
        """One batch's messages (dicts, or text sent as it is)."""
        now = time.time()
        lines = [json.dumps({"topic": topic, "value": m if isinstance(m, str) else json.dumps(m), "timestamp": now})
                 for topic, msgs in (("sonde-intervals", intervals), ("sonde-histograms", histograms)) for m in msgs]
        path = self.src / f"{self.files:06d}.json"
        tmp = self.src / f".{path.name}"
        tmp.write_text("\n".join(lines) + "\n")
        os.utime(tmp, (1e9 + self.files, 1e9 + self.files))  # the source takes files oldest first
        tmp.rename(path)
        self.files += 1

    def run(self) -> dict:
        from pyspark.sql import functions as F
        from pyspark.sql import types as T

        schema = T.StructType([T.StructField("topic", T.StringType()), T.StructField("value", T.StringType()),
                               T.StructField("timestamp", T.DoubleType())])
        raw = (self.spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).json(str(self.src))
               .withColumn("timestamp", F.timestamp_seconds("timestamp")))
        status = merge.Status(self.out, self.args.max_age)
        query, listener = merge.start(self.spark, raw, self.args, self.out, self.ckpt, status, availableNow=True)
        query.awaitTermination()
        assert query.exception() is None, query.exception()
        deadline = time.monotonic() + 30
        while status.totals["batches"] < len(query.recentProgress) and time.monotonic() < deadline:
            time.sleep(0.1)  # the listener's reports come after the batches
        self.spark.streams.removeListener(listener)
        status.write()
        return json.loads((self.out / "_job.json").read_text())

    def view(self, table: str) -> Dict[tuple, dict]:
        return changelog_view(self.out / table, merge.KEYS[table])


def test_restart_resumes_from_the_checkpoint_and_conflicts_are_counted(spark, tmp_path):
    """A restarted job resumes from Spark's checkpoint (offsets and the state store): what comes
    after the restart adds to what came before; a contribution in another unit than its key's is
    counted as a conflict and not merged."""
    run = FileRun(spark, tmp_path)
    other_unit = {**H, "unit": "bytes", "sum": 20, "min": 1, "max": 1000, "bins": [[1, 2, 1], [1000, 1008, 1]]}
    run.send([IV, {**IV, "probe": "p2", "proto": "udp"}], [H])
    run.send([], [other_unit])
    first = run.run()
    assert first["conflicts"] == 1 and first["malformed"] == 1, first
    assert first["malformed_by_reason"] == {merge.CONFLICT: 1}
    run.send([{**IV, "probe": "p2"}], [{**H, "probe": "p2"}])
    second = run.run()  # restart
    assert second["messages"] == 2 and second["recent"][0]["batch"] == 2, second
    got = run.view("intervals")[(100.0, "tcp", "in")]
    assert (got["packets"], got["bytes"], got["probes"], got["batch"]) == (6, 600, 2, 2)
    q = run.view("quantiles")[(100.0, "tcp_rtt_avg", "c2s", "in")]
    assert (q["count"], q["mean"], q["min"], q["max"], q["unit"], q["probes"]) == (4, 40.25, 40.0, 40.5, "ms", 2)
    # Nearest rank 2 of 4 is in the lower bin: its middle (40.108032), within [min, max].
    assert q["p50"] == 40.108032 and q["p99"] == 40.5
    bins = run.view("histograms")
    assert {k[4]: r["count"] for k, r in bins.items()} == {39.845888: 2, 40.370176: 2}
    assert set(run.view("probes")) == {("p1",), ("p2",)}


def test_state_is_bounded_by_the_watermark_and_late_contributions_are_counted(spark, tmp_path):
    """With --max-age 10 an interval's key leaves Spark's state once the newest start read is
    more than 10 s later; a contribution that comes for it later is counted as late and not
    merged (a half row would replace the whole one in the view)."""
    run = FileRun(spark, tmp_path, "--max-age", "10")

    def iv(probe: str, start: float) -> dict:
        return {"probe": probe, "start": start, "end": start + 1, "proto": "udp", "net": "ext", "packets": 1,
                "bytes": 60, "flows_opened": 0, "flows_closed": 0, "flows_active": 1}
    for first in (100, 110, 120):
        run.send([iv(p, s) for s in range(first, first + 10) for p in ("p1", "p2")])
    run.send([iv("p1", 105)])
    status = run.run()
    assert status["late"] == 1, status
    assert status["watermark"].startswith("1970-01-01T00:01:59"), status  # 129 - 10 s
    # The state: the ten intervals the watermark has not passed (120…129) and the probes' group.
    assert status["state"]["rows"] == 11, status["state"]
    assert [b["state_rows"] for b in status["recent"]][:4] == [11, 21, 21, 11], status["recent"]
    view = run.view("intervals")
    assert view[(105.0, "udp", "ext")]["packets"] == 2 and len(view) == 30  # the merged row stands


def test_compaction_keeps_the_view_and_bounds_the_files(spark, tmp_path):
    """Every `--compact-every` files a changelog's single-batch files become one set of files of
    their newest rows (Spark jobs): the same view (newest row per key), fewer files."""
    views = []
    for every in (0, 4):
        run = FileRun(spark, tmp_path / f"run{every}", "--compact-every", str(every))
        for b in range(10):
            start = 100.0 + b // 3  # three batches add to each interval
            run.send([{**IV, "probe": f"p{b % 2}", "start": start, "end": start + 1, "packets": b + 1}],
                     [{"probe": f"p{b % 2}", "start": start, "end": start + 1, "metric": "ip_len", "dir": "-",
                       "net": "in", "unit": "bytes", "count": 2, "sum": 100 + b, "min": 40, "max": 60 + b,
                       "bins": [[40, 41, 1], [60 + b, 61 + b, 1]]}])
        status = run.run()
        view = {name: run.view(name) for name in merge.KEYS}
        for r in view["probes"].values():  # the job's wall clock: differs between the two runs
            for wall in ("seen_at", "lag_s", "offset_s", "clock_off"):
                del r[wall]
        views.append(view)
        files = sorted(p.name for p in (run.out / "histograms").glob("*.parquet"))
        if every:
            assert files == ["part-00000003-compact-000.parquet", "part-00000007-compact-000.parquet",
                             "part-00000008-000.parquet", "part-00000009-000.parquet"], files
            assert 3 * 8 <= status["compacted_files"] <= 4 * 8, status  # twice four of each table (probes: fewer)
        else:
            assert len(files) == 10 and status["compacted_files"] == 0
    assert views[0] == views[1]
    assert views[0]["intervals"][(101.0, "tcp", "in")]["packets"] == 4 + 5 + 6


def test_malformed_messages_are_counted_by_reason_and_skipped(spark, tmp_path):
    """Every way a message can break contract 1 is found by the checks (SQL on the executors)
    under its reason; none reaches the view and the good messages beside them do."""
    bad_iv = {"not JSON of the contract": ["not json", "{}"],
              "probe id missing or invalid": [{**IV, "probe": "no spaces"}, {**IV, "probe": "x" * 65}],
              "start or end missing or not a number": [{**IV, "start": None}, {**IV, "start": "1"}],
              "end not after start": [{**IV, "end": 100.0}],
              "interval ends after the job's clock + --max-ahead": [{**IV, "start": 4e9, "end": 4e9 + 1}],
              "proto missing": [{**IV, "proto": ""}],
              "counter missing or not a count": [{**IV, "packets": -1}, {**IV, "bytes": 1.5}, {**IV, "flows_active": None}]}
    bad_h = {"metric, dir or unit missing": [{**H, "unit": None}],
             "no values": [{**H, "count": 0, "bins": []}],
             "bin not [lo, hi, count]": [{**H, "bins": [[1, 2]]}],
             "bin bounds not whole base units": [{**H, "bins": [[39.8458885, 40.370176, 2]]}],
             "bin count not a count": [{**H, "bins": [[39.845888, 40.370176, 1.5], [40.370176, 40.894464, 0.5]]}],
             "empty or inverted bin": [{**H, "bins": [[40.370176, 39.845888, 2]]},
                                       {**H, "bins": [[39.845888, 40.370176, 0], [40.370176, 40.894464, 2]]}],
             "bins do not add up to count": [{**H, "count": 3}],
             "sum, min or max not whole base units": [{**H, "sum": 80.5000001}],
             "min above max": [{**H, "min": 41.0}]}
    run = FileRun(spark, tmp_path)
    run.send([m for ms in bad_iv.values() for m in ms] + [IV], [m for ms in bad_h.values() for m in ms] + [H])
    status = run.run()
    want = {r: len(ms) for r, ms in {**bad_iv, **bad_h}.items()}
    assert status["malformed_by_reason"] == want
    assert status["malformed"] == status["_errors"] == sum(want.values())
    assert status["messages"] == sum(want.values()) + 2
    assert [r["packets"] for r in run.view("intervals").values()] == [3]
    assert [(r["count"], r["unit"]) for r in run.view("quantiles").values()] == [(2, "ms")]


def test_percentiles_are_sonde_stats_rule():
    """The binding's percentiles are sonde-stats' rule: nearest rank, the bin's middle rounded
    down in base units, kept within min and max."""
    from sonde import _sonde

    los, his, ns = [128, 130, 1024], [130, 132, 1040], [3, 1, 6]
    assert _sonde.percentiles(10, 128, 1039, los, his, ns) == (1032, 1032, 1032)
    assert _sonde.percentiles(4, 128, 1039, [128, 130], [130, 132], [3, 1]) == (129, 131, 131)
    assert _sonde.percentiles(10, 128, 1030, los, his, ns)[2] == 1030  # kept within max
    assert _sonde.percentiles(1, 5, 5, [5], [6], [1]) == (5, 5, 5)
    with pytest.raises(ValueError):
        _sonde.percentiles(1, 5, 5, [5], [6, 7], [1])
