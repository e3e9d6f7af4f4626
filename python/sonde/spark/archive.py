"""Trace archives on Spark: every trace file under INPUT_DIR analysed in an executor, through the
Python binding (``sonde.analyze``), into Parquet partitioned by probe and day (docs/spark.md,
"Trace archives").

    python -m sonde.spark analyze INPUT_DIR OUTPUT_DIR [--probe NAME] [--master local[2]] [options]

Layout: ``OUTPUT_DIR/<table>/probe=<p>/day=<YYYY-MM-DD>/<trace id>.parquet`` for each table of
the run (``tcp``, ``udp``, ``intervals``, ``quantiles``, ``histograms``, the ``--tables`` and
``--definitions`` tables), and ``OUTPUT_DIR/traces/probe=<p>/<trace id>.parquet``, the manifest:
one row per trace with its status. A row's day is the UTC date of its ``first`` (flows) or
``start`` (interval tables). Each file holds the CLI's columns and types for that trace
(``sonde analyze --format parquet``), rows in the CLI's order, plus ``trace``: the trace's
path relative to INPUT_DIR. A trace's id is that path with ``/`` as ``__``.

Each task writes its files under a hidden name and renames them, then removes the files an
earlier run of the same (probe, trace) left that this run did not write: a re-run replaces a
trace's files, and a reader never sees a half-written file. A trace that cannot be read, or
ends early, is in the manifest with its error; it never fails the job.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Tuple

from sonde.spark.files import atomic_write

MANIFEST = "traces"
DEFAULT_PROBE = "default"
PROBE_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")

# Exit statuses of `python -m sonde.spark analyze`.
EXIT_OK = 0
EXIT_USAGE = 2
EXIT_SOME_TRACES_BAD = 3

# What is taken as a trace: a name ending so (before an optional compression suffix), or a file
# starting with a pcap, pcapng or snoop magic number whatever its name.
TRACE_SUFFIXES = (".pcap", ".pcapng", ".cap", ".erf", ".snoop", ".ntar", ".dmp", ".trace")
COMPRESSION_SUFFIXES = (".gz", ".zst", ".zstd", ".xz")
TRACE_MAGICS = (
    bytes.fromhex("d4c3b2a1"), bytes.fromhex("a1b2c3d4"),  # pcap, µs
    bytes.fromhex("4d3cb2a1"), bytes.fromhex("a1b23c4d"),  # pcap, ns
    bytes.fromhex("34cdb2a1"), bytes.fromhex("a1b2cd34"),  # pcap, modified (Kuznetsov)
    bytes.fromhex("0a0d0d0a"),                             # pcapng section header
    b"snoo",                                               # snoop
)

# The manifest's columns (docs/spark.md): int64 and float64 so Spark reads them as BIGINT and
# DOUBLE; times as the tables' ns timestamps.
def manifest_schema():
    import pyarrow as pa

    return pa.schema([
        ("trace", pa.string()),
        ("status", pa.string()),           # ok | input_error | failed
        ("error", pa.string()),            # null when ok
        ("packets", pa.int64()),
        ("bytes", pa.int64()),             # wire bytes
        ("tcp_flows", pa.int64()),
        ("udp_flows", pa.int64()),
        ("first", pa.timestamp("us", tz="UTC")),  # floored to the µs, as the tables' times
        ("last", pa.timestamp("us", tz="UTC")),
        ("tables", pa.string()),           # "name:rows" of each table written, comma-separated
        ("rows", pa.int64()),              # rows written, every table
        ("size_bytes", pa.int64()),        # the trace file's size
        ("seconds", pa.float64()),         # wall time of the task: analysis and writing
        ("sonde_version", pa.string()),
        ("options", pa.string()),          # the analysis options, JSON
    ])


class Trace(NamedTuple):
    """One trace file of INPUT_DIR and where its results go."""

    path: str   # absolute
    rel: str    # relative to INPUT_DIR, with "/"
    probe: str
    id: str     # rel with "/" as "__": the file name of its results
    size: int


def is_trace(path: Path) -> bool:
    name = path.name.lower()
    for suffix in COMPRESSION_SUFFIXES:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    if name.endswith(TRACE_SUFFIXES):
        return True
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError:
        return False
    return head in TRACE_MAGICS


def trace_id(rel: str) -> str:
    return rel.replace("/", "__")


def probe_of(rel: str, given: Optional[str]) -> str:
    """``--probe``, else the first directory level under INPUT_DIR, else ``default``."""
    if given is not None:
        return given
    parts = rel.split("/")
    return parts[0] if len(parts) > 1 else DEFAULT_PROBE


def find_traces(input_dir: Path, probe: Optional[str], skip: Optional[Path] = None) -> Tuple[List[Trace], List[str]]:
    """Every trace under ``input_dir`` (links followed, names starting with ``.`` or ``_``
    skipped, as is ``skip``), sorted by path; and the problems that stop the job (a probe
    directory whose name is not a probe name, two traces with one id)."""
    traces: List[Trace] = []
    problems: List[str] = []
    seen_dirs = set()
    skip_real = os.path.realpath(skip) if skip is not None else None
    for root, dirs, files in os.walk(input_dir, followlinks=True):
        real = os.path.realpath(root)
        if real in seen_dirs or real == skip_real:
            dirs[:] = []
            continue
        seen_dirs.add(real)
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
        for name in sorted(files):
            if name.startswith((".", "_")):
                continue
            path = Path(root) / name
            if not path.is_file() or not is_trace(path):
                continue
            rel = path.relative_to(input_dir).as_posix()
            traces.append(Trace(str(path.absolute()), rel, probe_of(rel, probe), trace_id(rel), path.stat().st_size))
    traces.sort(key=lambda t: t.rel)
    bad = sorted({t.probe for t in traces if not PROBE_NAME.fullmatch(t.probe)})
    problems += [f"{p!r} is not a probe name ([A-Za-z0-9._-], 1 to 64): rename the directory or give --probe" for p in bad]
    by_id: Dict[Tuple[str, str], str] = {}
    for t in traces:
        other = by_id.setdefault((t.probe, t.id), t.rel)
        if other != t.rel:
            problems.append(f"{other!r} and {t.rel!r} have one trace id {t.id!r}: rename one")
    return traces, problems


# ---------------------------------------------------------------------------------------------
# The executor's side: one trace, one task.

DAY_NS = 86_400 * 10**9


def split_by_day(table, default_day: Optional[_dt.date]):
    """``table``'s rows per UTC day of their ``first`` (flows) or ``start`` (interval tables),
    each part in the table's order; a table with neither goes whole to ``default_day``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    column = next((c for c in ("first", "start") if c in table.column_names), None)
    if column is None or table.num_rows == 0:
        return [] if table.num_rows == 0 or default_day is None else [(default_day, table)]
    days = pc.cast(table.column(column), pa.date32())
    if default_day is not None:
        days = pc.fill_null(days, pa.scalar(default_day, pa.date32()))
    distinct = sorted(d for d in pc.unique(days).to_pylist() if d is not None)
    if len(distinct) == 1:
        return [(distinct[0], table)]
    return [(d, table.filter(pc.equal(days, pa.scalar(d, pa.date32())))) for d in distinct]


def _with_trace(table, rel: str):
    import pyarrow as pa

    indices = pa.array([0] * table.num_rows, pa.int32())
    column = pa.DictionaryArray.from_arrays(indices, pa.array([rel], pa.string()))
    return table.append_column(pa.field("trace", column.type), column)


def _write(table, path: Path) -> None:
    """``table`` to ``path`` whole or not at all: written under a hidden name, then renamed."""
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda tmp: pq.write_table(table, tmp, compression="zstd"))


def _remove_stale(out: Path, trace: Trace, written: set) -> None:
    """The files an earlier run of this (probe, trace) left that this run did not write."""
    name = f"{trace.id}.parquet"
    try:
        tables = [e for e in os.scandir(out) if e.is_dir() and e.name != MANIFEST and not e.name.startswith((".", "_"))]
    except FileNotFoundError:
        return
    for table in tables:
        probe_dir = Path(table.path) / f"probe={trace.probe}"
        if not probe_dir.is_dir():
            continue
        for day in os.scandir(probe_dir):
            old = Path(day.path) / name
            if old not in written and old.is_file():
                old.unlink()


def _trace_tables(run) -> Dict[str, Any]:
    tables = {"tcp": run.tcp, "udp": run.udp, "icmp": run.icmp}
    tables.update(run.tables)
    return {name: t for name, t in tables.items() if t is not None}


def analyze_trace(trace: Trace, out_dir: str, options: Dict[str, Any]) -> Dict[str, Any]:
    """Analyses one trace and writes its tables and manifest row; returns the manifest row.
    Never raises for a bad trace: its error is in the row."""
    import pyarrow as pa

    import sonde

    started = time.monotonic()
    out = Path(out_dir)
    row: Dict[str, Any] = {name: None for name in manifest_schema().names}
    row.update(trace=trace.rel, size_bytes=trace.size, sonde_version=sonde.__version__,
               options=json.dumps(options, sort_keys=True, default=str), rows=0, tables="")
    written: set = set()
    try:
        run = sonde.analyze(trace.path, strict=False, **options)
        summary = run.summary
        first_ns, last_ns = summary.get("first_ts_ns"), summary.get("last_ts_ns")
        default_day = None if first_ns is None else _dt.date(1970, 1, 1) + _dt.timedelta(days=first_ns // DAY_NS)
        counts = []
        for name, table in sorted(_trace_tables(run).items()):
            # The CLI's Parquet form (times in µs, spans as float ms), by the CLI's rule.
            for day, part in split_by_day(sonde.parquet_form(table), default_day):
                path = out / name / f"probe={trace.probe}" / f"day={day.isoformat()}" / f"{trace.id}.parquet"
                _write(_with_trace(part, trace.rel), path)
                written.add(path)
            if table.num_rows:
                counts.append(f"{name}:{table.num_rows}")
                row["rows"] += table.num_rows
        flows = summary.get("flows") or {}
        packets = summary.get("packets") or {}
        row.update(status="ok" if run.input_error is None else "input_error", error=run.input_error,
                   packets=packets.get("read"), bytes=packets.get("wire_bytes"),
                   tcp_flows=flows.get("tcp"), udp_flows=flows.get("udp"),
                   first=None if first_ns is None else first_ns // 1000,
                   last=None if last_ns is None else last_ns // 1000, tables=",".join(counts))
    except Exception as error:  # noqa: BLE001 — a bad trace, whatever it raised, is a row
        row.update(status="failed", error=f"{type(error).__name__}: {error}")
    try:
        _remove_stale(out, trace, written)
    except OSError as error:
        row.update(status="failed", error=f"removing an earlier run's files: {error}")
    row["seconds"] = time.monotonic() - started
    try:
        manifest = pa.Table.from_pylist([row], schema=manifest_schema())
        _write(manifest, out / MANIFEST / f"probe={trace.probe}" / f"{trace.id}.parquet")
    except Exception as error:  # noqa: BLE001
        row.update(status="failed", error=f"writing the manifest: {type(error).__name__}: {error}")
    return row


# ---------------------------------------------------------------------------------------------
# The driver's side.


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``analyze``'s arguments: the job's, then sonde.analyze's options under the CLI's names."""
    parser.add_argument("input_dir", metavar="INPUT_DIR", help="the traces, searched recursively; INPUT_DIR/<probe>/… names each trace's probe")
    parser.add_argument("output_dir", metavar="OUTPUT_DIR", help="the archive: OUTPUT_DIR/<table>/probe=<p>/day=<YYYY-MM-DD>/<trace id>.parquet")
    parser.add_argument("--probe", help="the probe of every trace (default: the first directory under INPUT_DIR, else 'default')")
    parser.add_argument("--master", help="Spark master, e.g. local[2] (default: spark-submit's, else local[*])")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting, repeatable")
    sonde_opts = parser.add_argument_group("analysis options (sonde analyze's flags; docs/python.md)")
    sonde_opts.add_argument("--threads", type=int, default=1, help="workers per trace (default 1: one task per core)")
    sonde_opts.add_argument("--interval", type=float, default=300.0, help="monitoring interval, s (0 = off; default 300)")
    sonde_opts.add_argument("--tables", action="store_true", help="also the RMON2-style tables")
    sonde_opts.add_argument("--table-size", type=int, default=100_000)
    sonde_opts.add_argument("--top", type=int, default=10)
    sonde_opts.add_argument("--internal", action="append", default=[], metavar="CIDR[,CIDR…]")
    sonde_opts.add_argument("--internal-file")
    sonde_opts.add_argument("--definitions")
    sonde_opts.add_argument("--definition-changes")
    sonde_opts.add_argument("--definition-fids", type=int, default=100_000)
    sonde_opts.add_argument("--tcp-timeout", type=float, default=300.0)
    sonde_opts.add_argument("--udp-timeout", type=float, default=200.0)
    sonde_opts.add_argument("--closed-linger", type=float, default=60.0)
    sonde_opts.add_argument("--max-flows", type=int, default=1_000_000)
    sonde_opts.add_argument("--filter", help="BPF filter, tcpdump syntax")
    sonde_opts.add_argument("--anonymize", choices=["cryptopan", "hash", "zero", "tcpdpriv"])
    sonde_opts.add_argument("--key")
    sonde_opts.add_argument("--thin", choices=["natra"])
    sonde_opts.add_argument("--app-packets", type=int, default=8)
    sonde_opts.add_argument("--dns-cache", type=int, default=100_000)


def analysis_options(args: argparse.Namespace) -> Dict[str, Any]:
    """sonde.analyze's keyword arguments from the parsed flags (paths made absolute: the
    executors may run elsewhere)."""
    absolute = lambda p: None if p is None else os.path.abspath(p)  # noqa: E731
    internal = [n.strip() for item in args.internal for n in item.split(",") if n.strip()]
    return {
        "threads": args.threads,
        "interval": args.interval,
        "tables": args.tables,
        "table_size": args.table_size,
        "top": args.top,
        "internal": internal,
        "internal_file": absolute(args.internal_file),
        "definitions": absolute(args.definitions),
        "definition_changes": absolute(args.definition_changes),
        "definition_fids": args.definition_fids,
        "tcp_timeout": args.tcp_timeout,
        "udp_timeout": args.udp_timeout,
        "closed_linger": args.closed_linger,
        "max_flows": args.max_flows,
        "filter": args.filter,
        "anonymize": args.anonymize,
        "key": absolute(args.key),
        "thin": args.thin == "natra",
        "app_packets": args.app_packets,
        "dns_cache": args.dns_cache,
    }


def check_options(traces: Iterable[Trace], options: Dict[str, Any]) -> Optional[str]:
    """The options checked once in the driver, on the first readable trace, before any task:
    a SettingsError's message, else None. This also creates a missing ``--key`` once, so that
    parallel tasks never race to create different keys."""
    import sonde

    for trace in traces:
        try:
            stream = sonde.stream(trace.path, rows=1, strict=False, **options)
        except sonde.SettingsError as error:
            return str(error)
        except sonde.SondeError:
            continue  # an unreadable trace: its task will say so
        stream.stop()
        for _ in stream:
            pass
        return None
    return None


def run_job(spark, traces: List[Trace], out_dir: str, options: Dict[str, Any]) -> List[Dict[str, Any]]:
    """One task per trace, the largest first (so the long ones do not come last); the manifest
    rows in the traces' order."""
    if not traces:
        return []
    ordered = sorted(traces, key=lambda t: (-t.size, t.rel))
    rows = (spark.sparkContext.parallelize(ordered, len(ordered))
            .map(lambda t: analyze_trace(t, out_dir, options))
            .collect())
    return sorted(rows, key=lambda r: r["trace"])


def main(args: argparse.Namespace) -> int:
    input_dir, output_dir = Path(args.input_dir), Path(args.output_dir).absolute()
    if not input_dir.is_dir():
        print(f"sonde.spark: {input_dir}: not a directory", file=sys.stderr)
        return EXIT_USAGE
    if args.probe is not None and not PROBE_NAME.fullmatch(args.probe):
        print(f"sonde.spark: --probe {args.probe!r}: a probe name is [A-Za-z0-9._-], 1 to 64", file=sys.stderr)
        return EXIT_USAGE
    conf = {}
    for item in args.conf:
        key, sep, value = item.partition("=")
        if not sep:
            print(f"sonde.spark: --conf {item!r}: KEY=VALUE", file=sys.stderr)
            return EXIT_USAGE
        conf[key] = value
    traces, problems = find_traces(input_dir, args.probe, skip=output_dir)
    if problems:
        for p in problems:
            print(f"sonde.spark: {p}", file=sys.stderr)
        return EXIT_USAGE
    options = analysis_options(args)
    problem = check_options(traces, options)
    if problem is not None:
        print(f"sonde.spark: {problem}", file=sys.stderr)
        return EXIT_USAGE

    from pyspark.sql import SparkSession

    from .session import spark_session

    ours = SparkSession.getActiveSession() is None  # else the caller's session: left running
    spark = spark_session("sonde archive", args.master, conf)
    started = time.monotonic()
    try:
        rows = run_job(spark, traces, str(output_dir), options)
    finally:
        if ours:
            spark.stop()
    elapsed = time.monotonic() - started
    by_status: Dict[str, int] = {}
    for r in rows:
        by_status[r["status"]] = by_status.get(r["status"], 0) + 1
    counts = ", ".join(f"{n} {s}" for s, n in sorted(by_status.items())) or "none"
    print(f"sonde.spark: {len(rows)} traces ({counts}) in {elapsed:.1f} s into {output_dir} "
          f"(manifest: {output_dir / MANIFEST})", file=sys.stderr)
    for r in rows:
        if r["status"] != "ok":
            print(f"sonde.spark: {r['trace']}: {r['status']}: {r['error']}", file=sys.stderr)
    return EXIT_OK if set(by_status) <= {"ok"} else EXIT_SOME_TRACES_BAD


# ---------------------------------------------------------------------------------------------
# Reading the archive: the Spark SQL of docs/spark.md ("Questions") runs over these views
# (python/tests/test_spark_archive.py runs every query of that page verbatim).

def register_views(spark, archive_dir: str, tables: Iterable[str] = ("tcp", "udp")) -> None:
    """The archive's tables as temporary views of the session, by their names (partition
    columns ``probe`` and ``day`` included)."""
    for name in tables:
        spark.read.parquet(os.path.join(archive_dir, name)).createOrReplaceTempView(name)
