"""Many probes, one view: the Spark Structured Streaming job that merges what every
`sonde analyze|monitor --kafka` publishes (docs/spark.md, "Many probes, one view").

Input (contract 1): the interval topic's counters and the histogram topic's distributions, each
message an *additive contribution* of one probe to one interval. Output (contract 3): four
append-only Parquet changelogs under OUTPUT_DIR (`intervals/`, `quantiles/`, `histograms/`,
`probes/`); after each micro-batch, the new merged state of every key the batch changed is
appended with `batch` = the micro-batch id, so the row with the highest `batch` per key is the
merged view.

How: Spark's Kafka source reads both topics as one stream and parses each message with an
explicit schema; `foreachBatch` hands the batch (bounded by --max-messages-per-batch) to the
driver, which adds the contributions into the state it keeps per key (Python integers: counts and
sums are exact, sums in the metric's base unit — ns, ppm — as sonde adds them) and writes the
touched keys' rows with pyarrow. Why not `applyInPandasWithState`: the merged state is small (a
few hundred keys per interval), every output needs the whole of a key (percentiles read all of
its bins), and one driver-side step per batch writes the four tables with one batch id and no
Python-worker round trip, which keeps the latency to about a trigger. State is bounded by packet
time: an interval older than --max-age before the probes' median newest interval end is dropped
(a contribution that comes for it later is counted as `late` and skipped, never half-merged).
State survives a restart: each batch's accepted contributions are logged in the checkpoint
directory before they are applied (pruned as their intervals expire), and replayed at start;
a batch that Spark runs again after a crash is not added twice.
"""

from __future__ import annotations

import json
import math
import os
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Set, Tuple

import pyarrow as pa
import pyarrow.parquet as pq

from sonde.spark.files import atomic_write

# Values are integers in a base unit, written in the unit (docs/monitoring.md, "Bins"): ms of
# ns, % of ppm. Other units are their base unit.
UNIT_SCALE: Dict[str, int] = {"ms": 1_000_000, "%": 10_000}
PROBE_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
PERCENTS = (50, 95, 99)
KAFKA_PACKAGE = "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0"
# Where tests/spark/fetch.sh puts the Kafka source's jars in a checkout.
DEFAULT_JARS = Path(__file__).resolve().parents[3] / "target" / "tmp" / "spark-kafka-4.2.0" / "lib"
RECENT_BATCHES = 100

INTERVALS = pa.schema([
    ("start", pa.float64()), ("end", pa.float64()), ("proto", pa.string()), ("net", pa.string()),
    ("packets", pa.int64()), ("bytes", pa.int64()), ("flows_opened", pa.int64()),
    ("flows_closed", pa.int64()), ("flows_active", pa.int64()), ("probes", pa.int32()), ("batch", pa.int64()),
])
QUANTILES = pa.schema([
    ("start", pa.float64()), ("end", pa.float64()), ("metric", pa.string()), ("dir", pa.string()),
    ("net", pa.string()), ("unit", pa.string()), ("count", pa.int64()), ("mean", pa.float64()),
    ("min", pa.float64()), ("p50", pa.float64()), ("p95", pa.float64()), ("p99", pa.float64()),
    ("max", pa.float64()), ("probes", pa.int32()), ("batch", pa.int64()),
])
HISTOGRAMS = pa.schema([
    ("start", pa.float64()), ("end", pa.float64()), ("metric", pa.string()), ("dir", pa.string()),
    ("net", pa.string()), ("bin_lo", pa.float64()), ("bin_hi", pa.float64()), ("count", pa.int64()),
    ("batch", pa.int64()),
])
PROBES = pa.schema([
    ("probe", pa.string()), ("last_start", pa.float64()), ("last_end", pa.float64()),
    ("seen_at", pa.float64()), ("interval_s", pa.float64()), ("lag_s", pa.float64()),
    ("offset_s", pa.float64()), ("clock_off", pa.bool_()), ("batch", pa.int64()),
])
COUNTERS = ("packets", "bytes", "flows_opened", "flows_closed", "flows_active")


class Malformed(ValueError):
    """A message that breaks contract 1: counted by reason and skipped."""


def _finite(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise Malformed(f"{name} missing or not a number")
    return float(value)


def _count(value: Any, name: str) -> int:
    """A non-negative integer (a float with no fraction too: JSON has one number type)."""
    v = _finite(value, name)
    if v < 0 or v != int(v) or v >= 2**63:
        raise Malformed(f"{name} not a count")
    return int(v)


def _text(value: Any, name: str) -> str:
    if not isinstance(value, str) or not value or len(value) > 64:
        raise Malformed(f"{name} missing")
    return value


def _base(value: float, scale: int, name: str) -> int:
    """A value written in its unit (ms to the ns) back to its integer base unit. Exact below
    2**53 base units (a double's integers: 104 days of ns); a value whose fraction is not a
    double's rounding is no sonde value."""
    v = value * scale
    r = round(v)
    if abs(v - r) > max(1e-3, abs(v) * 1e-14) or abs(r) >= 2**63:
        raise Malformed(f"{name} is not a whole number of base units")
    return r


def _span(msg: Dict[str, Any]) -> Tuple[str, float, float]:
    probe = msg.get("probe")
    if not isinstance(probe, str) or not PROBE_ID.match(probe):
        raise Malformed("probe id missing or invalid")
    start, end = _finite(msg.get("start"), "start"), _finite(msg.get("end"), "end")
    if not end > start:
        raise Malformed("end not after start")
    return probe, start, end


def parse_interval(msg: Dict[str, Any]) -> Dict[str, Any]:
    """A checked interval contribution (raises Malformed)."""
    probe, start, end = _span(msg)
    out = {"probe": probe, "start": start, "end": end,
           "proto": _text(msg.get("proto"), "proto"), "net": _text(msg.get("net"), "net")}
    for c in COUNTERS:
        out[c] = _count(msg.get(c), c)
    return out


def parse_histogram(msg: Dict[str, Any]) -> Dict[str, Any]:
    """A checked histogram contribution, values in base units (raises Malformed)."""
    probe, start, end = _span(msg)
    unit = _text(msg.get("unit"), "unit")
    scale = UNIT_SCALE.get(unit, 1)
    count = _count(msg.get("count"), "count")
    bins = msg.get("bins")
    if count == 0 or not isinstance(bins, list) or not bins:
        raise Malformed("no values")
    lo_hi_n = []
    for b in bins:
        if not isinstance(b, (list, tuple)) or len(b) != 3:
            raise Malformed("bin not [lo, hi, count]")
        lo, hi = _base(_finite(b[0], "bin_lo"), scale, "bin_lo"), _base(_finite(b[1], "bin_hi"), scale, "bin_hi")
        n = _count(b[2], "bin count")
        if not lo < hi or n == 0:
            raise Malformed("empty or inverted bin")
        lo_hi_n.append((lo, hi, n))
    if sum(n for _, _, n in lo_hi_n) != count:
        raise Malformed("bins do not add up to count")
    lo_v = _base(_finite(msg.get("min"), "min"), scale, "min")
    hi_v = _base(_finite(msg.get("max"), "max"), scale, "max")
    if lo_v > hi_v:
        raise Malformed("min above max")
    return {"probe": probe, "start": start, "end": end, "metric": _text(msg.get("metric"), "metric"),
            "dir": _text(msg.get("dir"), "dir"), "net": _text(msg.get("net"), "net"), "unit": unit,
            "count": count, "sum": _base(_finite(msg.get("sum"), "sum"), scale, "sum"),
            "min": lo_v, "max": hi_v, "bins": lo_hi_n}


def percentile(count: int, lo_v: int, hi_v: int, bins: List[Tuple[int, int, int]], percent: int) -> int:
    """sonde-stats' `Dist::percentile`: nearest rank over the bins (sorted by lower edge), the
    middle of the bin holding that rank (integer, rounded down), kept within min and max."""
    rank = (count * max(1, min(100, percent)) + 99) // 100
    seen = 0
    for lo, hi, n in bins:
        seen += n
        if seen >= rank:
            return min(max(lo + (hi - lo) // 2, lo_v), hi_v)
    return hi_v


class Merger:
    """The merged state: contributions added per key, expired by packet time, and the rows of
    the keys a batch touched. No Spark here: the job feeds it, tests may too."""

    def __init__(self, max_age_s: float, probe_window_s: float = 60.0, max_rows: int = 1_000_000):
        self.max_age_s = max_age_s
        self.probe_window_s = probe_window_s
        self.max_rows = max_rows
        self.bins_held = 0
        # (start, proto, net) -> {"end", counters…, "probes": set}
        self.intervals: Dict[Tuple[float, str, str], Dict[str, Any]] = {}
        # (start, metric, dir, net) -> {"end", "unit", "count", "sum", "min", "max", "bins": {lo: [hi, n]}, "probes"}
        self.dists: Dict[Tuple[float, str, str, str], Dict[str, Any]] = {}
        # probe -> {"last_start", "last_end", "seen_at", "interval_s", "lag_s", "offset_s", "clock_off"}
        self.probes: Dict[str, Dict[str, Any]] = {}
        self.stats = {"messages": 0, "malformed": 0, "late": 0, "conflicts": 0, "expired_keys": 0,
                      "expired_probes": 0, "evicted_keys": 0}
        self.malformed_by_reason: Dict[str, int] = {}
        self.horizon = -math.inf

    def malformed(self, reason: str) -> None:
        self.stats["malformed"] += 1
        self.malformed_by_reason[reason] = self.malformed_by_reason.get(reason, 0) + 1

    def see_probe(self, probe: str, start: float, end: float, seen_at: float, touched: Set[str]) -> None:
        p = self.probes.get(probe)
        if p is None or start > p["last_start"]:
            self.probes[probe] = {"last_start": start, "last_end": end, "seen_at": seen_at,
                                  "interval_s": end - start, "lag_s": seen_at - end, "offset_s": 0.0,
                                  "clock_off": False}
            touched.add(probe)

    def add_interval(self, c: Dict[str, Any], touched: Set) -> None:
        if c["start"] < self.horizon:
            self.stats["late"] += 1
            return
        key = (c["start"], c["proto"], c["net"])
        row = self.intervals.get(key)
        if row is None:
            row = self.intervals[key] = {"end": c["end"], "probes": set(), **{k: 0 for k in COUNTERS}}
        row["end"] = max(row["end"], c["end"])
        for k in COUNTERS:
            row[k] += c[k]
        row["probes"].add(c["probe"])
        touched.add(key)

    def add_histogram(self, c: Dict[str, Any], touched: Set, touched_bins: Set) -> None:
        if c["start"] < self.horizon:
            self.stats["late"] += 1
            return
        key = (c["start"], c["metric"], c["dir"], c["net"])
        d = self.dists.get(key)
        if d is not None and (d["unit"] != c["unit"] or any(
                lo in d["bins"] and d["bins"][lo][0] != hi for lo, hi, _ in c["bins"])):
            self.stats["conflicts"] += 1  # another unit or binning for the same key: not mergeable
            self.malformed("unit or bins differ from the key's")
            return
        if d is None:
            d = self.dists[key] = {"end": c["end"], "unit": c["unit"], "count": 0, "sum": 0,
                                   "min": c["min"], "max": c["max"], "bins": {}, "probes": set()}
        d["end"] = max(d["end"], c["end"])
        d["count"] += c["count"]
        d["sum"] += c["sum"]
        d["min"] = min(d["min"], c["min"])
        d["max"] = max(d["max"], c["max"])
        for lo, hi, n in c["bins"]:
            if lo not in d["bins"]:
                self.bins_held += 1
            b = d["bins"].setdefault(lo, [hi, 0])
            b[1] += n
            touched_bins.add(key + (lo,))
        d["probes"].add(c["probe"])
        touched.add(key)

    def apply(self, intervals: Iterable[Dict[str, Any]], histograms: Iterable[Dict[str, Any]],
              seen_at: float) -> Tuple[Set, Set, Set, Set]:
        """Adds checked contributions; returns the touched keys (intervals, dists, bins, probes)."""
        ti: Set = set()
        td: Set = set()
        tb: Set = set()
        tp: Set[str] = set()
        for c in intervals:
            self.see_probe(c["probe"], c["start"], c["end"], seen_at, tp)
            self.add_interval(c, ti)
        for c in histograms:
            self.see_probe(c["probe"], c["start"], c["end"], seen_at, tp)
            self.add_histogram(c, td, tb)
        return ti, td, tb, tp

    def update_clocks(self, now: float, touched: Set[str]) -> None:
        """Each recent probe's offset from the others: its lag less the median lag of the probes
        seen in the last `probe_window_s`; `clock_off` past one interval. A probe whose flag or
        offset changed joins `touched`."""
        recent = {k: p for k, p in self.probes.items() if now - p["seen_at"] <= self.probe_window_s}
        if not recent:
            return
        median = statistics.median(p["lag_s"] for p in recent.values())
        for k, p in recent.items():
            offset = p["lag_s"] - median
            clock_off = abs(offset) > p["interval_s"]
            if offset != p["offset_s"] or clock_off != p["clock_off"]:
                p["offset_s"], p["clock_off"] = offset, clock_off
                touched.add(k)

    def expire(self, now: float) -> None:
        """Drops the intervals older than max_age before the median newest interval end of the
        recent probes (one probe's clock, ahead or behind, moves nothing)."""
        recent = [p["last_end"] for p in self.probes.values() if now - p["seen_at"] <= self.probe_window_s]
        if not recent:
            self.evict()
            return
        # The lower median: of two probes, one behind keeps state longer (bounded by max_rows)
        # rather than one ahead dropping the other's intervals as late.
        self.horizon = max(self.horizon, statistics.median_low(recent) - self.max_age_s)
        self.stats["expired_keys"] += self.drop_before(self.horizon)
        self.evict()
        gone = [k for k, p in self.probes.items() if p["last_end"] < self.horizon]
        for k in gone:
            del self.probes[k]
        self.stats["expired_probes"] += len(gone)

    def rows_held(self) -> int:
        """The state's size: interval rows and histogram bins."""
        return len(self.intervals) + self.bins_held

    def drop_before(self, horizon: float) -> int:
        """Drops the intervals that start before `horizon`; how many keys went."""
        dropped = 0
        for table in (self.intervals, self.dists):
            old = [k for k in table if k[0] < horizon]
            for k in old:
                if table is self.dists:
                    self.bins_held -= len(table[k]["bins"])
                del table[k]
            dropped += len(old)
        return dropped

    def evict(self) -> None:
        """Past `max_rows`, drops whole intervals, oldest first, until the state fits again; the
        horizon moves past them, so that what comes for them later is late, not half-merged."""
        if self.rows_held() <= self.max_rows:
            return
        per_start: Dict[float, int] = {}
        for k in self.intervals:
            per_start[k[0]] = per_start.get(k[0], 0) + 1
        for k, d in self.dists.items():
            per_start[k[0]] = per_start.get(k[0], 0) + len(d["bins"])
        held = self.rows_held()
        for start in sorted(per_start):
            if held <= self.max_rows:
                break
            held -= per_start[start]
            self.horizon = max(self.horizon, math.nextafter(start, math.inf))
        self.stats["evicted_keys"] += self.drop_before(self.horizon)

    def rows(self, batch: int, ti: Set, td: Set, tb: Set, tp: Set[str]) -> Dict[str, pa.Table]:
        """The touched keys' merged rows, as the four tables of contract 3."""
        iv = [{"start": k[0], "end": r["end"], "proto": k[1], "net": k[2], **{c: r[c] for c in COUNTERS},
               "probes": len(r["probes"]), "batch": batch}
              for k, r in ((k, self.intervals.get(k)) for k in sorted(ti)) if r is not None]
        qs = []
        for k in sorted(td):
            d = self.dists.get(k)
            if d is None:
                continue
            scale = UNIT_SCALE.get(d["unit"], 1)
            bins = sorted((lo, hi, n) for lo, (hi, n) in d["bins"].items())
            ps = [percentile(d["count"], d["min"], d["max"], bins, p) / scale for p in PERCENTS]
            qs.append({"start": k[0], "end": d["end"], "metric": k[1], "dir": k[2], "net": k[3],
                       "unit": d["unit"], "count": d["count"], "mean": d["sum"] / d["count"] / scale,
                       "min": d["min"] / scale, "p50": ps[0], "p95": ps[1], "p99": ps[2],
                       "max": d["max"] / scale, "probes": len(d["probes"]), "batch": batch})
        hs = []
        for k in sorted(tb):
            d = self.dists.get(k[:4])
            if d is None or k[4] not in d["bins"]:
                continue  # gone (expired), or a logged contribution that was not merged
            scale = UNIT_SCALE.get(d["unit"], 1)
            hi, n = d["bins"][k[4]]
            hs.append({"start": k[0], "end": d["end"], "metric": k[1], "dir": k[2], "net": k[3],
                       "bin_lo": k[4] / scale, "bin_hi": hi / scale, "count": n, "batch": batch})
        ps_rows = [{"probe": k, **{f: self.probes[k][f] for f in (
            "last_start", "last_end", "seen_at", "interval_s", "lag_s", "offset_s", "clock_off")}, "batch": batch}
            for k in sorted(tp) if k in self.probes]  # a probe gone with its intervals: no row
        return {"intervals": pa.Table.from_pylist(iv, INTERVALS), "quantiles": pa.Table.from_pylist(qs, QUANTILES),
                "histograms": pa.Table.from_pylist(hs, HISTOGRAMS), "probes": pa.Table.from_pylist(ps_rows, PROBES)}


def write_changelog(out: Path, batch: int, tables: Dict[str, pa.Table]) -> None:
    """Appends a batch's rows to the four directories, one file each, named by the batch (a
    batch written again after a crash replaces its own file)."""
    for name, table in tables.items():
        if table.num_rows == 0:
            continue
        d = out / name
        d.mkdir(parents=True, exist_ok=True)
        atomic_write(d / f"part-{batch:08d}-sonde.parquet", lambda p, t=table: pq.write_table(t, p))


KEYS: Dict[str, Tuple[str, ...]] = {
    "intervals": ("start", "proto", "net"), "quantiles": ("start", "metric", "dir", "net"),
    "histograms": ("start", "metric", "dir", "net", "bin_lo"), "probes": ("probe",),
}


def compact(out: Path, every: int) -> int:
    """Bounds the number of files: once a directory holds `every` single-batch files, they are
    replaced by one file of their newest row per key (the batch numbers kept, so the view is
    the same), written before they are deleted. Older compacted files are left as they are, so
    a compaction costs what those batches wrote. Returns the files removed."""
    removed = 0
    for name, key in KEYS.items():
        d = out / name
        files = sorted(d.glob("part-*-sonde.parquet")) if d.is_dir() else []
        if every <= 0 or len(files) < every:
            continue
        table = pa.concat_tables([pq.read_table(f) for f in files])
        newest = table.group_by(list(key)).aggregate([("batch", "max")]).rename_columns(list(key) + ["batch"])
        kept = table.join(newest, list(key) + ["batch"], join_type="inner").select(table.schema.names)
        kept = kept.sort_by([("batch", "ascending")] + [(k, "ascending") for k in key])
        last = files[-1].name.split("-")[1]
        atomic_write(d / f"part-{last}-compact.parquet", lambda p, t=kept: pq.write_table(t, p))
        for f in files:
            f.unlink(missing_ok=True)
        removed += len(files)
    return removed


class ContributionLog:
    """The accepted contributions of each batch, in the checkpoint directory, so that a restarted
    job rebuilds its state: one JSON file per batch, written before the batch is applied, and
    deleted when all of its intervals have expired."""

    def __init__(self, directory: Path):
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.max_start: Dict[int, float] = {}

    def path(self, batch: int) -> Path:
        return self.dir / f"batch-{batch:012d}.json"

    def write(self, batch: int, seen_at: float, intervals: List[Dict], histograms: List[Dict]) -> None:
        record = {"batch": batch, "seen_at": seen_at, "intervals": intervals, "histograms": histograms}
        atomic_write(self.path(batch), lambda p: p.write_text(json.dumps(record)))
        self.max_start[batch] = max((c["start"] for c in intervals + histograms), default=-math.inf)

    def replay(self, merger: Merger) -> int:
        """Applies every logged batch in order; the last batch id (-1 if none)."""
        last = -1
        for path in sorted(self.dir.glob("batch-*.json")):
            try:
                record = json.loads(path.read_text())
                batch = int(record["batch"])
            except (ValueError, KeyError, OSError):
                continue  # a file cut short by a crash: its batch is run again by Spark
            hs = [{**c, "bins": [tuple(b) for b in c["bins"]]} for c in record["histograms"]]
            merger.apply(record["intervals"], hs, record["seen_at"])
            merger.expire(record["seen_at"])
            self.max_start[batch] = max((c["start"] for c in record["intervals"] + hs), default=-math.inf)
            last = batch
        return last

    def prune(self, horizon: float) -> None:
        for batch, start in list(self.max_start.items()):
            if start < horizon:
                self.path(batch).unlink(missing_ok=True)
                del self.max_start[batch]


class Job:
    """One run of the merge: the Merger, its log, and the status file."""

    def __init__(self, out: Path, checkpoint: Path, max_age_s: float, probe_window_s: float,
                 compact_every: int = 300, max_rows: int = 1_000_000):
        self.out = out
        self.compact_every = compact_every
        self.compacted_files = 0
        self.merger = Merger(max_age_s, probe_window_s, max_rows)
        self.log = ContributionLog(checkpoint / "sonde-merge")
        self.replayed = self.log.replay(self.merger)
        self.batches = 0
        self.last_message_at = time.time()
        self.recent: List[Dict[str, Any]] = []
        self.latest: Optional[Dict[str, Any]] = None
        self.write_status(None)

    def run_batch(self, rows: List[Dict[str, Any]], batch: int, collect_s: float = 0.0) -> None:
        """One micro-batch: `rows` are the parsed messages ({"kind", "msg", "ts"}), which took
        `collect_s` to read from Kafka and parse."""
        seen_at = time.time()
        m = self.merger
        intervals, histograms = [], []
        if batch > self.replayed:
            for r in rows:
                m.stats["messages"] += 1
                try:
                    if r["msg"] is None:
                        raise Malformed("not JSON of the contract")
                    if r["kind"] == "interval":
                        intervals.append(parse_interval(r["msg"]))
                    else:
                        histograms.append(parse_histogram(r["msg"]))
                except Malformed as e:
                    m.malformed(str(e))
            if intervals or histograms:
                self.log.write(batch, seen_at, intervals, histograms)
            ti, td, tb, tp = m.apply(intervals, histograms, seen_at)
        else:
            # Spark runs the batch again (a crash before it committed it): already replayed from
            # the log, so only its rows are written again, from the log's copy.
            path = self.log.path(batch)
            record = json.loads(path.read_text()) if path.exists() else {"intervals": [], "histograms": []}
            intervals, histograms = record["intervals"], record["histograms"]
            ti = {(c["start"], c["proto"], c["net"]) for c in intervals}
            td = {(c["start"], c["metric"], c["dir"], c["net"]) for c in histograms}
            tb = {(c["start"], c["metric"], c["dir"], c["net"], b[0]) for c in histograms for b in c["bins"]}
            tp = {c["probe"] for c in intervals + histograms}
        m.update_clocks(seen_at, tp)
        write_changelog(self.out, batch, m.rows(batch, ti, td, tb, tp))
        self.compacted_files += compact(self.out, self.compact_every)
        m.expire(seen_at)
        self.log.prune(m.horizon)
        written = time.time()
        self.batches += 1
        if rows:
            self.last_message_at = written
        ts = sorted(r["ts"] for r in rows if r.get("ts") is not None)
        info = {"batch": batch, "messages": len(rows), "seen_at": seen_at, "written_at": written,
                "collect_s": collect_s, "merge_s": written - seen_at,
                "rows": {"intervals": len(ti), "quantiles": len(td), "histograms": len(tb), "probes": len(tp)}}
        if ts:
            # From a message's arrival in Kafka (its timestamp) to its merged rows on disk.
            info["latency_s"] = {"min": written - ts[-1], "median": written - statistics.median(ts),
                                 "max": written - ts[0]}
        self.recent = (self.recent + [info])[-RECENT_BATCHES:]
        self.latest = info
        self.write_status(info)

    def note_progress(self, progress: Optional[Dict[str, Any]]) -> None:
        """Adds Spark's own timings of a finished batch (its `durationMs`) to its entry."""
        if not progress:
            return
        for info in reversed(self.recent):
            if info["batch"] == progress.get("batchId") and "spark_ms" not in info:
                info["spark_ms"] = progress.get("durationMs", {})
                self.write_status(self.latest)
                return

    def write_status(self, info: Optional[Dict[str, Any]]) -> None:
        m = self.merger
        status = {"batches": self.batches, "latest_batch": info, "latest_batch_wall": info and info["written_at"],
                  **m.stats, "_errors": m.stats["malformed"], "malformed_by_reason": m.malformed_by_reason,
                  "state": {"intervals": len(m.intervals), "distributions": len(m.dists),
                            "bins": m.bins_held, "probes": len(m.probes),
                            "rows": m.rows_held(), "max_rows": m.max_rows},
                  "horizon": m.horizon if math.isfinite(m.horizon) else None,
                  "compacted_files": self.compacted_files, "replayed_through": self.replayed,
                  "recent": self.recent}
        self.out.mkdir(parents=True, exist_ok=True)
        atomic_write(self.out / "_job.json", lambda p: p.write_text(json.dumps(status, indent=1)))


def spark_session(master: str, jars: Optional[str]):
    """The jobs' session (sonde.spark.session) with Spark's Kafka source: the jars of `jars` (a
    directory or a comma-separated list), else Maven coordinates Spark resolves."""
    from sonde.spark.session import spark_session as session

    conf = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2", "spark.ui.showConsoleProgress": "false"}
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


def stream(spark, args):
    """Both topics as one stream of (kind, parsed message, Kafka timestamp)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    D, L, S = T.DoubleType(), T.LongType(), T.StringType()
    span = [T.StructField("probe", S), T.StructField("start", D), T.StructField("end", D)]
    interval = T.StructType(span + [T.StructField(n, S) for n in ("proto", "net")]
                            + [T.StructField(c, L) for c in COUNTERS])
    histogram = T.StructType(span + [T.StructField(n, S) for n in ("metric", "dir", "net", "unit")]
                             + [T.StructField("count", L)] + [T.StructField(n, D) for n in ("sum", "min", "max")]
                             + [T.StructField("bins", T.ArrayType(T.ArrayType(D)))])
    topics = [args.interval_topic] + ([args.histogram_topic] if args.histogram_topic else [])
    raw = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", args.kafka)
           .option("subscribe", ",".join(topics)).option("startingOffsets", args.starting_offsets)
           .option("failOnDataLoss", "false").option("maxOffsetsPerTrigger", str(args.max_messages_per_batch))
           .load())
    value = F.col("value").cast("string")
    is_interval = F.col("topic") == F.lit(args.interval_topic)
    return raw.select(
        F.when(is_interval, F.lit("interval")).otherwise(F.lit("histogram")).alias("kind"),
        F.when(is_interval, F.from_json(value, interval)).alias("interval"),
        F.when(~is_interval, F.from_json(value, histogram)).alias("histogram"),
        (F.unix_micros(F.col("timestamp")) / 1e6).alias("ts"),
    )


def _rows(df) -> List[Dict[str, Any]]:
    """The batch's messages on the driver: each parsed struct as a dict (None when the message
    was not JSON of the contract's shape: Spark gives no struct, or one of nulls)."""
    out = []
    for r in df.collect():
        parsed = r["interval"] if r["kind"] == "interval" else r["histogram"]
        msg = parsed.asDict(recursive=True) if parsed is not None else None
        if msg is not None and all(v is None for v in msg.values()):
            msg = None
        out.append({"kind": r["kind"], "msg": msg, "ts": r["ts"]})
    return out


def main(args) -> int:
    out = Path(args.output_dir)
    checkpoint = Path(args.checkpoint) if args.checkpoint else out / "_checkpoint"
    out.mkdir(parents=True, exist_ok=True)
    job = Job(out, checkpoint, args.max_age, args.probe_window, args.compact_every, args.max_state_rows)
    spark = spark_session(args.master, args.jars)
    spark.sparkContext.setLogLevel("WARN")
    def on_batch(df, batch: int) -> None:
        t = time.time()
        rows = _rows(df)
        job.run_batch(rows, batch, time.time() - t)

    query = (stream(spark, args).writeStream.foreachBatch(on_batch)
             .option("checkpointLocation", str(checkpoint / "spark"))
             .trigger(processingTime=f"{args.trigger} seconds").start())
    print(f"sonde merge: {args.kafka} -> {out} (checkpoint {checkpoint})", file=sys.stderr)
    job.last_message_at = time.time()  # idle from now: the session's start is not idleness
    try:
        while query.isActive:
            if query.awaitTermination(0.5):
                break
            job.note_progress(query.lastProgress)
            busy = query.status.get("isTriggerActive", False)
            if args.until_idle is not None and not busy and time.time() - job.last_message_at > args.until_idle:
                query.stop()
                break
    except KeyboardInterrupt:
        query.stop()
    error = query.exception()
    spark.stop()
    if error is not None:
        print(f"sonde merge: the stream failed: {error}", file=sys.stderr)
        return 1
    return 0


def add_arguments(p) -> None:
    """The `merge` subcommand's arguments."""
    p.add_argument("--kafka", required=True, metavar="BROKERS", help="bootstrap servers, host:port[,…]")
    p.add_argument("output_dir", metavar="OUTPUT_DIR")
    p.add_argument("--interval-topic", default="sonde-intervals")
    p.add_argument("--histogram-topic", default="sonde-histograms", help='"" to read no histograms')
    p.add_argument("--checkpoint", metavar="DIR", help="Spark's offsets and the merge state (default OUTPUT_DIR/_checkpoint)")
    p.add_argument("--trigger", type=float, default=1.0, metavar="SECS", help="micro-batch period (default 1)")
    p.add_argument("--starting-offsets", choices=("earliest", "latest"), default="earliest",
                   help="where a new checkpoint starts reading (default earliest: what the topics retain)")
    p.add_argument("--max-age", type=float, default=600.0, metavar="SECS",
                   help="packet time an interval's state is kept, behind the probes' median newest end (default 600)")
    p.add_argument("--max-state-rows", type=int, default=1_000_000, metavar="N",
                   help="interval rows and histogram bins the state holds at most; past it the oldest "
                   "intervals leave it early, counted as evicted_keys (default 1000000)")
    p.add_argument("--max-messages-per-batch", type=int, default=200_000, metavar="N",
                   help="messages read per micro-batch at most (default 200000)")
    p.add_argument("--probe-window", type=float, default=60.0, metavar="SECS",
                   help="probes seen this recently make the median lag of the clock check (default 60)")
    p.add_argument("--compact-every", type=int, default=300, metavar="N",
                   help="merge a directory's single-batch files into one once it has N (default 300; 0: never)")
    p.add_argument("--until-idle", type=float, metavar="SECS", help="stop when no message came for SECS")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--jars", help="the Kafka source's jars: a directory or comma-separated files "
                   "(default: target/tmp/spark-kafka-4.2.0/lib of a checkout, else fetched by Spark)")
