"""Many probes, one view: the Spark Structured Streaming job that merges what every
`sonde analyze|monitor --kafka` publishes (docs/spark.md, "Many probes, one view").

Input (contract 1): the interval topic's counters and the histogram topic's distributions, each
message an *additive contribution* of one probe to one interval. Output (contract 3): four
append-only Parquet changelogs under OUTPUT_DIR (`intervals/`, `quantiles/`, `histograms/`,
`probes/`); after each micro-batch the new merged state of every key the batch changed is
appended with `batch` = the micro-batch id, so the row with the highest `batch` per key is the
merged view.

How, all on Spark's machinery: the Kafka source reads both topics; each message is parsed
(`from_json` with the contract's schema) and checked by SQL expressions on the executors (a
malformed one is counted by reason in the query's observed metrics and dropped); event time is
the interval's start, with a watermark `--max-age` behind the newest; the contributions are
grouped by their key — (start, proto, net) for counters, (start, metric, dir, net) for
distributions — and merged by `applyInPandasWithState`, whose state lives in Spark's state store
(the RocksDB provider) and is checkpointed with the offsets, so a restart resumes exactly where
the last committed batch left it. Each key's state is the exact integer sums in the metric's
base unit (ns, ppm) and its bins; percentiles come from sonde's own rule through the Python
binding (`sonde._sonde.percentiles`, sonde-stats' `percentiles`). A key leaves the state when
the watermark passes its start (an event-time timeout); a contribution for a key the watermark
has passed is counted as `late` and not merged. One more group of the same operator keeps the
probes' table (their newest interval, lag and clock offset). `foreachBatch` writes each table's
rows with Spark's Parquet writer (sonde.spark.changelog). The driver only plans the batches,
renames files, and writes `_job.json` from Spark's progress reports.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, NamedTuple, Optional, Tuple

from sonde.spark import changelog, flows
from sonde.spark.files import atomic_write

# Values are integers in a base unit, written in the unit (docs/monitoring.md, "Bins"): ms of
# ns, % of ppm. Other units are their base unit.
UNIT_SCALE: Dict[str, int] = {"ms": 1_000_000, "%": 10_000}
PROBE_ID = r"^[A-Za-z0-9._-]{1,64}$"
KAFKA_PACKAGE = "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0"
# Where tests/spark/fetch.sh puts the Kafka source's jars in a checkout.
DEFAULT_JARS = Path(__file__).resolve().parents[3] / "target" / "tmp" / "spark-kafka-4.2.0" / "lib"
RECENT_BATCHES = 100
COUNTERS = ("packets", "bytes", "flows_opened", "flows_closed", "flows_active")
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"

# The checks every message passes, in order; the first it fails is its reason (docs/spark.md,
# "How contributions merge"). Counted per reason in `_job.json`.
REASONS = (
    "not JSON of the contract", "probe id missing or invalid", "start or end missing or not a number",
    "end not after start", "interval ends after the job's clock + --max-ahead", "proto missing", "net missing",
    "counter missing or not a count", "metric, dir or unit missing", "count not a count", "no values",
    "bin not [lo, hi, count]", "bin bounds not whole base units", "bin count not a count",
    "empty or inverted bin", "bins do not add up to count", "sum, min or max not whole base units",
    "min above max",
)
CONFLICT = "unit or bins differ from the key's"

# The four tables' columns (contract 3, docs/spark.md "The output"), after `batch`'s addition.
TABLES: Dict[str, Tuple[str, ...]] = {
    "intervals": ("start", "end", "proto", "net", *COUNTERS, "probes"),
    "quantiles": ("start", "end", "metric", "dir", "net", "unit", "count", "mean", "min", "p50", "p95",
                  "p99", "max", "probes"),
    "histograms": ("start", "end", "metric", "dir", "net", "bin_lo", "bin_hi", "count"),
    "probes": ("probe", "last_start", "last_end", "seen_at", "interval_s", "lag_s", "offset_s", "clock_off"),
}
KEYS: Dict[str, Tuple[str, ...]] = {
    "intervals": ("start", "proto", "net"), "quantiles": ("start", "metric", "dir", "net"),
    "histograms": ("start", "metric", "dir", "net", "bin_lo"), "probes": ("probe",),
}


def _schemas():
    """The operator's input, output and state schemas (Spark types)."""
    from pyspark.sql import types as T

    D, L, S, I, B = T.DoubleType(), T.LongType(), T.StringType(), T.IntegerType(), T.BooleanType()
    f = T.StructField
    key = [f("kind", S), f("start", D), f("name", S), f("dir", S), f("net", S)]
    # What the merge emits: one row per changed key of every table (and a row per late or
    # conflicting group of contributions, counted then dropped); `name` is proto or metric.
    out = T.StructType([f("table", S), f("start", D), f("end", D), f("name", S), f("dir", S), f("net", S),
                        f("unit", S)] + [f(c, L) for c in COUNTERS]
                       + [f("count", L), f("mean", D), f("min", D), f("p50", D), f("p95", D), f("p99", D),
                          f("max", D), f("probes", I), f("bin_lo", D), f("bin_hi", D), f("probe", S),
                          f("last_start", D), f("last_end", D), f("seen_at", D), f("interval_s", D),
                          f("lag_s", D), f("offset_s", D), f("clock_off", B)])
    # A key's state: its sums (counters, or count/sum/min/max in base units), its bins as three
    # int64 arrays' bytes (lo, hi, n; sorted by lo), and its probes, one name per line. The
    # probes group keeps its table as JSON in `doc`.
    state = T.StructType([f("end", D), f("unit", S)] + [f(c, L) for c in COUNTERS]
                         + [f("count", L), f("sum", L), f("min", L), f("max", L), f("los", T.BinaryType()),
                            f("his", T.BinaryType()), f("ns", T.BinaryType()), f("probes", S), f("doc", S)])
    return key, out, state


def _whole(x, tolerance_floor: float = 1e-3):
    """A value in base units (a Column) that is a whole number up to a double's rounding."""
    from pyspark.sql import functions as F

    return F.abs(x - F.round(x)) <= F.greatest(F.lit(tolerance_floor), F.abs(x) * F.lit(1e-14))


def kafka(spark, args):
    """Both topics as one stream of Kafka records (topic, value, timestamp…)."""
    from sonde.spark.session import kafka_stream

    topics = [args.interval_topic] + ([args.histogram_topic] if args.histogram_topic else [])
    return kafka_stream(spark, args, topics)


def contributions(raw, interval_topic: str, max_ahead_s: float):
    """Kafka records (`topic`, `value`, `timestamp`) as checked contributions, a `reason` for each
    malformed one: `from_json` with contract 1's schemas, and the checks as SQL expressions (on
    the executors). Values in base units (`sum`, `min`, `max`, the bins' `los`, `his`, `ns`)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    D, L, S = T.DoubleType(), T.LongType(), T.StringType()
    f = T.StructField
    span = [f("probe", S), f("start", D), f("end", D)]
    interval = T.StructType(span + [f("proto", S), f("net", S)] + [f(c, L) for c in COUNTERS])
    histogram = T.StructType(span + [f(n, S) for n in ("metric", "dir", "net", "unit")] + [f("count", L)]
                             + [f(n, D) for n in ("sum", "min", "max")] + [f("bins", T.ArrayType(T.ArrayType(D)))])
    # One parse per message, with both topics' fields (fields of the other topic are ignored).
    both = T.StructType(interval.fields + [x for x in histogram.fields if x.name not in interval.names])
    parsed = raw.select(F.col("topic"), F.from_json(F.col("value").cast("string"), both).alias("j"),
                        (F.unix_micros(F.col("timestamp")) / 1e6).alias("ts"))
    is_iv = F.col("topic") == F.lit(interval_topic)
    j = F.col("j")
    present = lambda names: F.greatest(*[j[n].isNotNull() for n in names])  # noqa: E731
    c = parsed.select(
        F.when(is_iv, F.lit("i")).otherwise(F.lit("d")).alias("kind"), *[j[n].alias(n) for n in ("probe", "start", "end")],
        F.when(is_iv, j["proto"]).otherwise(j["metric"]).alias("name"),
        F.when(is_iv, F.lit("-")).otherwise(j["dir"]).alias("dir"), j["net"].alias("net"),
        F.when(~is_iv, j["unit"]).alias("unit"), *[F.when(is_iv, j[c]).alias(c) for c in COUNTERS],
        *[F.when(~is_iv, j[c]).alias(c) for c in ("count", "sum", "min", "max", "bins")],
        (j.isNull() | ~F.when(is_iv, present(interval.names)).otherwise(present(histogram.names))).alias("empty"),
        "ts")

    col, lit = F.col, F.lit
    finite = lambda x: x.isNotNull() & ~F.isnan(x) & (F.abs(x) < lit(float("inf")))  # noqa: E731
    text = lambda x: x.isNotNull() & (F.length(x) >= 1) & (F.length(x) <= 64)  # noqa: E731
    scale = F.when(col("unit") == "ms", lit(float(UNIT_SCALE["ms"]))).when(col("unit") == "%", lit(float(UNIT_SCALE["%"]))).otherwise(lit(1.0))
    is_d = col("kind") == "d"
    # The bins' five checks in one pass (an interpreted lambda a bin): a bit a check failed by any
    # bin (a check that is not true — false or null — fails), and the counts' total.
    def bin_step(acc, b):
        lo, hi, n = F.get(b, lit(0)), F.get(b, lit(1)), F.get(b, lit(2))
        oks = [(F.size(b) == 3) & finite(lo) & finite(hi) & finite(n),
               _whole(lo * scale) & _whole(hi * scale),
               (n >= 0) & (n == F.floor(n)) & (n < 2.0**62),
               (F.round(lo * scale) < F.round(hi * scale)) & (n > 0)]
        mask = acc["mask"]
        for bit, ok in enumerate(oks):
            mask = mask.bitwiseOR(F.when(F.coalesce(ok, lit(False)), lit(0)).otherwise(lit(1 << bit)))
        return F.struct(mask.alias("mask"), (acc["total"] + n.try_cast(L)).alias("total"))

    bins = F.aggregate("bins", F.struct(lit(0).alias("mask"), lit(0).try_cast(L).alias("total")), bin_step)
    c = c.withColumn("_bins", bins)
    bin_ok = lambda bit: col("_bins.mask").bitwiseAND(lit(1 << bit)) == 0  # noqa: E731
    checks = [
        col("empty"),
        ~F.coalesce(col("probe").rlike(PROBE_ID), lit(False)),
        ~(finite(col("start")) & finite(col("end"))),
        ~(col("end") > col("start")),
        col("end") > F.unix_micros(F.current_timestamp()) / 1e6 + lit(float(max_ahead_s)),
        ~is_d & ~text(col("name")),
        ~text(col("net")),
        ~is_d & F.greatest(*[F.coalesce(col(x) < 0, lit(True)) for x in COUNTERS]),
        is_d & ~(text(col("name")) & text(col("dir")) & text(col("unit"))),
        is_d & ~F.coalesce(col("count") >= 0, lit(False)),
        is_d & ((col("count") == 0) | col("bins").isNull() | (F.size(col("bins")) == 0)),
        is_d & ~bin_ok(0),
        is_d & ~bin_ok(1),
        is_d & ~bin_ok(2),
        is_d & ~bin_ok(3),
        is_d & (col("_bins.total") != col("count")),
        is_d & ~(finite(col("sum")) & finite(col("min")) & finite(col("max"))
                 & _whole(col("sum") * scale) & _whole(col("min") * scale) & _whole(col("max") * scale)),
        is_d & (col("min") > col("max")),
    ]
    reason = F.lit(None).cast(S)
    for r, failed in reversed(list(zip(REASONS, checks))):
        reason = F.when(F.coalesce(failed, lit(True)), lit(r)).otherwise(reason)
    c = c.withColumn("reason", reason)
    base = lambda x: F.round(x * scale).try_cast(L)  # noqa: E731
    return c.select(
        "kind", "probe", "start", "end", "name", "dir", "net", "unit", *COUNTERS, "count",
        base(col("sum")).alias("sum"), base(col("min")).alias("min"), base(col("max")).alias("max"),
        F.transform("bins", lambda b: F.round(F.get(b, lit(0)) * scale).try_cast(L)).alias("los"),
        F.transform("bins", lambda b: F.round(F.get(b, lit(1)) * scale).try_cast(L)).alias("his"),
        F.transform("bins", lambda b: F.get(b, lit(2)).try_cast(L)).alias("ns"),
        "ts", "reason")


# --- the merge of one key (runs in Spark's Python workers, on the executors) ---

class Held(NamedTuple):
    """A key's state row (the operator's state schema, in order)."""
    end: Optional[float]
    unit: Optional[str]
    packets: Optional[int]
    bytes: Optional[int]
    flows_opened: Optional[int]
    flows_closed: Optional[int]
    flows_active: Optional[int]
    count: Optional[int]
    sum: Optional[int]
    min: Optional[int]
    max: Optional[int]
    los: Optional[bytes]
    his: Optional[bytes]
    ns: Optional[bytes]
    probes: Optional[str]
    doc: Optional[str]


def _held(state) -> Optional[Held]:
    return Held(*state.get) if state.exists else None


def _scale(unit: Optional[str]) -> int:
    return UNIT_SCALE.get(unit or "", 1)


def _row(table: str, **values: Any) -> Dict[str, Any]:
    return {"table": table, **values}


def merge_group(key: Tuple, pdfs: Iterator, state, max_age_s: float, probe_window_s: float,
                max_probes: int) -> Iterator:
    """`applyInPandasWithState`'s function: adds one key's new contributions to its state and
    yields its new rows (pandas). Keys are (kind, start, name, dir, net); kind `i` counters,
    `d` a distribution, `p` the probes' table (one group)."""
    import pandas as pd

    kind = key[0]
    if state.hasTimedOut:
        state.remove()
        return
    frames = [pdf for pdf in pdfs if len(pdf)]
    if not frames:
        return
    rows = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    if kind == "p":
        out = merge_probes(rows, state, max_age_s, probe_window_s, max_probes)
    else:
        start = float(key[1])
        if start * 1000.0 <= state.getCurrentWatermarkMs():
            # The watermark has passed this interval: its key has left (or is leaving) the
            # state, so merging would replace the whole row with a part. Counted, not merged.
            yield _frame([_row("late", count=len(rows))])
            return
        out = merge_counters(key, rows, state) if kind == "i" else merge_distribution(key, rows, state)
        # The key leaves the state once the watermark reaches its start (the newest interval
        # start read is then --max-age later): from then on Spark drops its contributions as
        # late (event time at or before the watermark), and the timeout fires (watermark past
        # the timestamp).
        state.setTimeoutTimestamp(int(math.ceil(start * 1000.0)) - 1)
    if out:
        yield _frame(out)


def _frame(rows: List[Dict[str, Any]]):
    """Rows as the operator's output (every column; Python values kept exact: object columns)."""
    import pandas as pd

    return pd.DataFrame(rows, columns=_schemas()[1].fieldNames(), dtype=object)


def merge_counters(key: Tuple, rows, state) -> List[Dict[str, Any]]:
    _, start, proto, _, net = key
    s = _held(state)
    if s is not None:
        end, sums, probes = s.end, [getattr(s, c) for c in COUNTERS], set(s.probes.split("\n"))
    else:
        end, sums, probes = -math.inf, [0] * len(COUNTERS), set()
    end = max(end, float(rows["end"].max()))
    sums = [a + int(rows[c].sum()) for a, c in zip(sums, COUNTERS)]
    probes.update(rows["probe"])
    state.update(Held(end, None, *sums, None, None, None, None, None, None, None, "\n".join(sorted(probes)), None))
    return [_row("intervals", start=start, end=end, name=proto, dir="-", net=net,
                 **dict(zip(COUNTERS, sums)), probes=len(probes))]


def merge_distribution(key: Tuple, rows, state) -> List[Dict[str, Any]]:
    """Counts, sums and bins (matched by their lower edge) add; min and max by min and max; a
    contribution of another unit or binning than the key's is a conflict, counted, not merged."""
    import numpy as np

    from sonde import _sonde

    _, start, metric, dir_, net = key
    s = _held(state)
    if s is not None:
        end, unit, count, total, lo_v, hi_v = s.end, s.unit, s.count, s.sum, s.min, s.max
        bins = dict(zip(np.frombuffer(s.los, np.int64).tolist(),
                        zip(np.frombuffer(s.his, np.int64).tolist(), np.frombuffer(s.ns, np.int64).tolist())))
        probes = set(s.probes.split("\n"))
    else:
        end, unit, count, total, lo_v, hi_v, bins, probes = -math.inf, None, 0, 0, None, None, {}, set()
    touched = set()
    conflicts = 0
    for r in rows.itertuples(index=False):
        los, his, ns = r.los.tolist(), r.his.tolist(), r.ns.tolist()
        if unit is None:
            unit = r.unit
        if r.unit != unit or any(lo in bins and bins[lo][0] != hi for lo, hi in zip(los, his)):
            conflicts += 1
            continue
        end = max(end, r.end)
        count += int(r.count)
        total += int(r.sum)
        lo_v = int(r.min) if lo_v is None else min(lo_v, int(r.min))
        hi_v = int(r.max) if hi_v is None else max(hi_v, int(r.max))
        for lo, hi, n in zip(los, his, ns):
            old = bins.get(lo)
            bins[lo] = (hi, n + (old[1] if old else 0))
            touched.add(lo)
        probes.add(r.probe)
    out = [_row("conflict", count=conflicts)] if conflicts else []
    if not touched:
        return out
    order = sorted(bins)
    los = np.array(order, np.int64)
    his = np.array([bins[lo][0] for lo in order], np.int64)
    ns = np.array([bins[lo][1] for lo in order], np.int64)
    state.update(Held(end, unit, None, None, None, None, None, count, total, lo_v, hi_v, los.tobytes(),
                      his.tobytes(), ns.tobytes(), "\n".join(sorted(probes)), None))
    scale = _scale(unit)
    p50, p95, p99 = _sonde.percentiles(count, lo_v, hi_v, los.tolist(), his.tolist(), ns.tolist())
    out.append(_row("quantiles", start=start, end=end, name=metric, dir=dir_, net=net, unit=unit, count=count,
                    mean=total / count / scale, min=lo_v / scale, p50=p50 / scale, p95=p95 / scale,
                    p99=p99 / scale, max=hi_v / scale, probes=len(probes)))
    out += [_row("histograms", start=start, end=end, name=metric, dir=dir_, net=net, bin_lo=lo / scale,
                 bin_hi=bins[lo][0] / scale, count=bins[lo][1]) for lo in sorted(touched)]
    return out


def merge_probes(rows, state, max_age_s: float, probe_window_s: float, max_probes: int) -> List[Dict[str, Any]]:
    """The probes' table: each probe's newest interval, when the job read it (the batch's
    processing time), its lag, and its offset from the median lag of the probes seen in the last
    `probe_window_s` (`clock_off` past one interval). Probes whose newest interval is `max_age_s`
    older than the recent probes' lower median newest end leave the table (after their row is
    written); past `max_probes`, those seen longest ago."""
    now = state.getCurrentProcessingTimeMs() / 1000.0
    s = _held(state)
    doc = json.loads(s.doc) if s is not None else {"probes": {}, "expired": 0, "dropped": 0}
    probes: Dict[str, Dict[str, Any]] = doc["probes"]
    touched = set()
    newest = rows.sort_values("p_start").groupby("probe", sort=False).tail(1)
    for r in newest.itertuples(index=False):
        p = probes.get(r.probe)
        if p is None or r.p_start > p["last_start"]:
            probes[r.probe] = {"last_start": float(r.p_start), "last_end": float(r.end), "seen_at": now,
                               "interval_s": float(r.end - r.p_start), "lag_s": now - float(r.end),
                               "offset_s": 0.0, "clock_off": False}
            touched.add(r.probe)
    recent = {k: p for k, p in probes.items() if now - p["seen_at"] <= probe_window_s}
    if recent:
        median = statistics.median(p["lag_s"] for p in recent.values())
        for k, p in recent.items():
            offset = p["lag_s"] - median
            clock_off = abs(offset) > p["interval_s"]
            if offset != p["offset_s"] or clock_off != p["clock_off"]:
                p["offset_s"], p["clock_off"] = offset, clock_off
                touched.add(k)
    out = [_row("probes", probe=k, **probes[k]) for k in sorted(touched)]
    if recent:
        horizon = statistics.median_low(p["last_end"] for p in recent.values()) - max_age_s
        gone = [k for k, p in probes.items() if p["last_end"] < horizon]
        for k in gone:
            del probes[k]
        doc["expired"] += len(gone)
    if len(probes) > max_probes:
        for k in sorted(probes, key=lambda k: probes[k]["seen_at"])[:len(probes) - max_probes]:
            del probes[k]
            doc["dropped"] += 1
    state.update(Held(*(None,) * 15, json.dumps(doc)))
    return out


# --- the job (driver) ---

def spark_session(master: str, jars: Optional[str], partitions: int):
    """The jobs' session (sonde.spark.session) with Spark's Kafka source — the jars of `jars` (a
    directory or a comma-separated list), else Maven coordinates Spark resolves — and the RocksDB
    state store."""
    from sonde.spark.session import spark_session as session

    conf = {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
            # The state's partitions: fixed by the checkpoint at its first start.
            "spark.sql.shuffle.partitions": str(partitions),
            "spark.sql.streaming.stateStore.providerClass": ROCKSDB,
            "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
            # Batches are small and frequent: Arrow batches of any size, no adaptive re-planning.
            "spark.sql.adaptive.enabled": "false"}
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    if jars is None and DEFAULT_JARS.is_dir():
        jars = str(DEFAULT_JARS)
    if jars:
        p = Path(jars)
        listed = sorted(str(j) for j in p.glob("*.jar")) if p.is_dir() else jars.split(",")
        conf["spark.jars"] = ",".join(listed)
    else:
        conf["spark.jars.packages"] = KAFKA_PACKAGE
    return session("sonde-merge", master, conf)


def merged(raw, args):
    """The streaming DataFrame of merged rows from Kafka records `raw`: checked contributions
    (malformed ones counted in the observed metrics `input` and dropped), the watermark, and the
    stateful merge (its late and conflicting contributions counted in `output`)."""
    from pyspark.sql import functions as F
    from pyspark.sql.streaming.state import GroupStateTimeout

    col = F.col
    c = contributions(raw, args.interval_topic, args.max_ahead)
    c = c.observe("input", F.count(F.lit(1)).alias("messages"), F.min("ts").alias("ts_min"),
                  F.percentile_approx("ts", 0.5).alias("ts_median"), F.max("ts").alias("ts_max"),
                  *[F.count_if(col("reason") == r).alias(f"reason_{i}") for i, r in enumerate(REASONS)])
    good = c.where(col("reason").isNull()).drop("reason", "ts")
    # Every contribution goes to its key's group, and its probe, start and end to the probes' group
    # (one scan of the source: each row made into both).
    data = good.select("kind", "start", "name", "dir", "net", "probe", col("start").alias("p_start"), "end", "unit",
                       *COUNTERS, "count", "sum", "min", "max", "los", "his", "ns")
    shown = {"kind": F.lit("p"), "start": F.lit(0.0), "name": F.lit(""), "dir": F.lit(""), "net": F.lit(""),
             "probe": col("probe"), "p_start": col("start"), "end": col("end")}
    as_data = F.struct(*[col(f.name) if f.name != "p_start" else col("start").alias("p_start") for f in data.schema])
    as_probe = F.struct(*[shown.get(f.name, F.lit(None)).cast(f.dataType).alias(f.name) for f in data.schema])
    rows = good.select(F.explode(F.array(as_data, as_probe)).alias("r")).select("r.*")
    # Event time: the interval's start. The probes' group's rows have none, so that Spark never
    # drops them as late: a probe whose clock is behind still shows in the probes' table.
    event_time = F.when(col("kind") != "p", F.timestamp_seconds(col("p_start")))
    rows = rows.withColumn("t", event_time).withWatermark("t", f"{args.max_age} seconds")
    key, out, state = _schemas()
    max_age, window, max_probes = float(args.max_age), float(args.probe_window), int(args.max_probes)

    def fn(k, pdfs, st):
        return merge_group(k, pdfs, st, max_age, window, max_probes)

    m = rows.groupBy("kind", "start", "name", "dir", "net").applyInPandasWithState(
        fn, out, state, "Update", GroupStateTimeout.EventTimeTimeout)
    return m.observe("output", *[F.sum(F.when(col("table") == t, F.coalesce(col("count"), F.lit(1)) if t in ("late", "conflict") else F.lit(1)).otherwise(0)).alias(t)
                                 for t in ("intervals", "quantiles", "histograms", "probes", "late", "conflict")])


class Status:
    """`_job.json`: what the job has read, merged and written since it started, from Spark's
    progress reports (a StreamingQueryListener) and the batch writer."""

    def __init__(self, out: Path, max_age_s: float):
        self.out = out
        self.lock = threading.Lock()
        self.totals = {"batches": 0, "messages": 0, "malformed": 0, "late": 0, "conflicts": 0,
                       "compacted_files": 0}
        self.by_reason: Dict[str, int] = {}
        self.written: Dict[int, Tuple[float, Dict[str, int]]] = {}  # batch -> (written at, rows)
        self.recent: List[Dict[str, Any]] = []
        self.state: Dict[str, Any] = {}
        self.watermark: Optional[str] = None
        self.max_age_s = max_age_s
        self.flows: Optional[Dict[str, Any]] = None  # the flow query's (sonde.spark.flows.status)
        self.last_message_at = time.time()
        self.write()

    def batch_written(self, batch: int, compacted: int) -> None:
        with self.lock:
            self.written[batch] = (time.time(), {})
            self.totals["compacted_files"] += compacted

    def progress(self, p: Dict[str, Any]) -> None:
        """One finished batch's progress report (`StreamingQueryProgress` as JSON)."""
        metrics = p.get("observedMetrics") or {}
        inp, outp = metrics.get("input") or {}, metrics.get("output") or {}
        n = int(inp.get("messages") or 0)
        with self.lock:
            batch = int(p["batchId"])
            written_at, _ = self.written.pop(batch, (time.time(), {}))
            self.totals["batches"] += 1
            self.totals["messages"] += n
            bad = 0
            for i, r in enumerate(REASONS):
                k = int(inp.get(f"reason_{i}") or 0)
                if k:
                    self.by_reason[r] = self.by_reason.get(r, 0) + k
                    bad += k
            conflicts = int(outp.get("conflict") or 0)
            if conflicts:
                self.by_reason[CONFLICT] = self.by_reason.get(CONFLICT, 0) + conflicts
            self.totals["malformed"] += bad + conflicts
            self.totals["conflicts"] += conflicts
            ops = p.get("stateOperators") or []
            # Late: dropped by Spark before the merge (past the previous batch's watermark), or
            # found by the merge (past this batch's).
            dropped = int(ops[0].get("numRowsDroppedByWatermark") or 0) if ops else 0
            self.totals["late"] += int(outp.get("late") or 0) + dropped
            if ops:
                op = ops[0]
                self.state = {"rows": op.get("numRowsTotal"), "memory_bytes": op.get("memoryUsedBytes"),
                              "removed": op.get("numRowsRemoved"), "updated": op.get("numRowsUpdated"),
                              "custom": op.get("customMetrics", {})}
            self.watermark = (p.get("eventTime") or {}).get("watermark")
            info = {"batch": batch, "messages": n, "written_at": written_at,
                    "rows": {t: int(outp.get(t) or 0) for t in ("intervals", "quantiles", "histograms", "probes")},
                    "late": int(outp.get("late") or 0) + dropped, "watermark": (p.get("eventTime") or {}).get("watermark"),
                    "spark_ms": p.get("durationMs", {}), "state_rows": self.state.get("rows")}
            if n and inp.get("ts_min") is not None:
                # From a message's arrival in Kafka (its timestamp) to its merged rows in Parquet.
                info["latency_s"] = {"min": written_at - float(inp["ts_max"]),
                                     "median": written_at - float(inp["ts_median"]),
                                     "max": written_at - float(inp["ts_min"])}
                self.last_message_at = time.time()
            self.recent = (self.recent + [info])[-RECENT_BATCHES:]
        self.write()

    def write(self) -> None:
        with self.lock:
            status = {**self.totals, "_errors": self.totals["malformed"], "malformed_by_reason": self.by_reason,
                      "latest_batch": self.recent[-1] if self.recent else None,
                      "latest_batch_wall": self.recent[-1]["written_at"] if self.recent else None,
                      "state": self.state, "watermark": self.watermark, "max_age_s": self.max_age_s,
                      "recent": self.recent}
            if self.flows is not None:
                status["flows"] = self.flows
        self.out.mkdir(parents=True, exist_ok=True)
        atomic_write(self.out / "_job.json", lambda p: p.write_text(json.dumps(status, indent=1)))


def writer(spark, out: Path, status: Status, compact_every: int):
    """The `foreachBatch` function: each table's rows of the batch written by Spark's Parquet
    writer into its changelog (sonde.spark.changelog); compaction every `compact_every` files."""
    from pyspark.sql import functions as F

    files = changelog.Files(spark, str(out))
    # The operator's `name` column is the table's proto or metric.
    names = {"intervals": {"proto": "name"}, "quantiles": {"metric": "name"}, "histograms": {"metric": "name"},
             "probes": {}}
    pool = ThreadPoolExecutor(len(TABLES) - 1)

    def on_batch(df, batch: int) -> None:
        df = df.where(F.col("table").isin(*TABLES)).persist()

        def write(table: str) -> None:
            columns = [F.col(names[table].get(c, c)).alias(c) for c in TABLES[table]]
            rows = df.where(F.col("table") == table).select(*columns, F.lit(batch).cast("long").alias("batch"))
            if table in ("intervals", "quantiles"):
                rows = rows.withColumn("probes", F.col("probes").cast("int"))
            changelog.write(files, rows, table, batch)

        try:
            # The first write computes the batch (the merge, into the cache); the other three
            # read the cache, as concurrent Spark jobs (their fixed costs overlap).
            first, *rest = TABLES
            write(first)
            list(pool.map(write, rest))
        finally:
            df.unpersist()
        compacted = sum(changelog.compact(spark, files, t, KEYS[t], compact_every) for t in TABLES)
        status.batch_written(batch, compacted)

    return on_batch


def start(spark, raw, args, out: Path, checkpoint: Path, status: Status, **trigger):
    """Starts the merge of Kafka records `raw` (a streaming DataFrame) into `out`, reporting to
    `status`: Spark's streaming query. `trigger`: DataStreamWriter.trigger's (default: every
    --trigger seconds)."""
    from pyspark.sql.streaming import StreamingQueryListener

    class Listener(StreamingQueryListener):
        def onQueryStarted(self, event):
            pass

        def onQueryProgress(self, event):
            if str(event.progress.id) == query_id[0]:
                status.progress(json.loads(event.progress.json))

        def onQueryIdle(self, event):
            pass

        def onQueryTerminated(self, event):
            pass

    query_id = [""]
    listener = Listener()
    spark.streams.addListener(listener)
    query = (merged(raw, args).writeStream.outputMode("update")
             .foreachBatch(writer(spark, out, status, args.compact_every))
             .option("checkpointLocation", str(checkpoint / "spark"))
             .trigger(**(trigger or {"processingTime": f"{args.trigger} seconds"})).start())
    query_id[0] = str(query.id)
    return query, listener


def main(args) -> int:
    out = Path(args.output_dir).absolute()
    checkpoint = Path(args.checkpoint).absolute() if args.checkpoint else out / "_checkpoint"
    out.mkdir(parents=True, exist_ok=True)
    status = Status(out, args.max_age)
    spark = spark_session(args.master, args.jars, args.partitions)
    spark.sparkContext.setLogLevel("WARN")
    query, _ = start(spark, kafka(spark, args), args, out, checkpoint, status)
    queries = [query]
    # Flows across probes: a second query in the same session, with its own checkpoint.
    flow_query = flows.start(spark, args, str(out), str(checkpoint / "flows")) if args.flow_topic else None
    if flow_query is not None:
        queries.append(flow_query)
    print(f"sonde merge: {args.kafka} -> {out} (checkpoint {checkpoint})", file=sys.stderr)
    status.last_message_at = time.time()  # idle from now: the session's start is not idleness
    flow_records = 0
    try:
        while all(q.isActive for q in queries):
            if query.awaitTermination(0.5):
                break
            if flow_query is not None:
                status.flows = flows.status(flow_query)
                if status.flows["records"] != flow_records:
                    flow_records = status.flows["records"]
                    status.last_message_at = time.time()
                    status.write()
            busy = any(q.status.get("isTriggerActive", False) for q in queries)
            if args.until_idle is not None and not busy and time.time() - status.last_message_at > args.until_idle:
                break
    except KeyboardInterrupt:
        pass
    for q in queries:
        if q.isActive:
            q.stop()
    errors = [e for e in (q.exception() for q in queries) if e is not None]
    time.sleep(0.2)  # the listener's last report
    if flow_query is not None:
        status.flows = flows.status(flow_query)
    status.write()
    spark.stop()
    for error in errors:
        print(f"sonde merge: the stream failed: {error}", file=sys.stderr)
    return 1 if errors else 0


def add_arguments(p) -> None:
    """The `merge` subcommand's arguments."""
    p.add_argument("--kafka", required=True, metavar="BROKERS", help="bootstrap servers, host:port[,…]")
    p.add_argument("output_dir", metavar="OUTPUT_DIR")
    p.add_argument("--interval-topic", default="sonde-intervals")
    p.add_argument("--histogram-topic", default="sonde-histograms", help='"" to read no histograms')
    p.add_argument("--checkpoint", metavar="DIR", help="Spark's offsets and state (default OUTPUT_DIR/_checkpoint)")
    p.add_argument("--trigger", type=float, default=1.0, metavar="SECS", help="micro-batch period (default 1)")
    p.add_argument("--starting-offsets", choices=("earliest", "latest"), default="earliest",
                   help="where a new checkpoint starts reading (default earliest: what the topics retain)")
    p.add_argument("--max-age", type=float, default=600.0, metavar="SECS",
                   help="the watermark's delay: an interval's state is kept until the newest interval start "
                   "read is SECS later (default 600)")
    p.add_argument("--max-ahead", type=float, default=300.0, metavar="SECS",
                   help="a contribution whose interval ends more than SECS after the job's clock is refused "
                   "(counted): it would move the watermark for every probe (default 300)")
    p.add_argument("--max-probes", type=int, default=10_000, metavar="N",
                   help="probes the probe table keeps at most; past it, those seen longest ago leave it (default 10000)")
    p.add_argument("--max-messages-per-batch", type=int, default=200_000, metavar="N",
                   help="messages read per micro-batch at most (default 200000)")
    p.add_argument("--partitions", type=int, default=2, metavar="N",
                   help="the state's partitions (tasks per batch; fixed at a checkpoint's first start; default 2)")
    p.add_argument("--probe-window", type=float, default=60.0, metavar="SECS",
                   help="probes seen this recently make the median lag of the clock check (default 60)")
    p.add_argument("--compact-every", type=int, default=300, metavar="N",
                   help="merge a directory's single-batch files into one once it has N (default 300; 0: never)")
    p.add_argument("--until-idle", type=float, metavar="SECS", help="stop when no message came for SECS")
    p.add_argument("--master", default="local[2]")
    flows.add_arguments(p)
    p.add_argument("--jars", help="the Kafka source's jars: a directory or comma-separated files "
                   "(default: target/tmp/spark-kafka-4.2.0/lib of a checkout, else fetched by Spark)")
