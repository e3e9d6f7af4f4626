#!/usr/bin/env python3
"""Writes the `merged` fuzz target's seeds (fuzz/seeds/merged/): small valid Parquet files of
each of the merge job's six changelogs (docs/merged.md, "What the merge job writes"), each
prefixed with the target's selector byte (fuzz/merged/fuzz_targets/merged.rs: bits 0-2 the
changelog, bit 3 read through a Source too, bits 4-7 the second view's small limits).

Apart from gen.py because it needs pyarrow (gen.py is stdlib-only): run it with the project's
virtual environment, `.venv/bin/python fuzz/seeds/gen_merged.py` (`make python-env` makes it).
Deterministic for a given pyarrow (the files name the writer, "parquet-cpp-arrow version
N"); the committed seeds were written by pyarrow 26.0.1. The files vary what Spark's vary:
the codec (snappy, zstd, lz4, none), dictionary encoding, data page v1 or v2, statistics,
several row groups, columns in another order and extra ones, INT for a LONG column, a
LargeUtf8 string (kept in the Arrow schema), rows with nulls, and values near the edges.
"""

import io
import os
import shutil

import pyarrow as pa
import pyarrow.parquet as pq

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "merged")
# Changelog::ALL's order: the selector's low bits.
LOGS = ["intervals", "quantiles", "histograms", "probes", "hosts", "pairs"]
MAX_SEED = 8 * 1024

D, L, I, S, B = pa.float64(), pa.int64(), pa.int32(), pa.string(), pa.bool_()


def table(columns):
    return pa.table({name: pa.array(values, type=t) for name, t, values in columns})


def intervals():
    starts = [1_700_000_000.0, 1_700_000_000.0, 1_700_000_001.0, 1_700_000_002.0]
    return [
        ("start", D, starts),
        ("end", D, [s + 1.0 for s in starts]),
        ("proto", S, ["tcp", "udp", "tcp", "icmp"]),
        ("net", S, ["in", "out", "local", "in"]),
        ("packets", L, [120, 14, 9, 2]),
        ("bytes", L, [96_000, 1_400, 5_400, 196]),
        ("flows_opened", L, [3, 2, 1, 0]),
        ("flows_closed", L, [2, 2, 1, 0]),
        ("flows_active", L, [4, 0, 1, 0]),
        ("probes", I, [2, 1, 2, 1]),
        ("batch", L, [7, 7, 8, 8]),
    ]


def quantiles():
    return [
        ("start", D, [1_700_000_000.0, 1_700_000_000.0, 1_700_000_001.0]),
        ("end", D, [1_700_000_001.0, 1_700_000_001.0, 1_700_000_002.0]),
        ("metric", S, ["tcp_rtt_avg", "ip_len", "udp_custom"]),
        ("dir", S, ["c2s", "-", "s2c"]),
        ("net", S, ["in", "out", "in"]),
        ("unit", S, ["ms", "bytes", "widgets"]),
        ("count", L, [12, 134, 1]),
        ("mean", D, [40.2, 512.5, 1.0]),
        ("min", D, [10.0, 40.0, 1.0]),
        ("p50", D, [40.25, 576.0, 1.0]),
        ("p95", D, [80.5, 1_500.0, 1.0]),
        ("p99", D, [81.0, 1_500.0, 1.0]),
        ("max", D, [81.0, 1_514.0, 1.0]),
        ("probes", I, [2, 2, 1]),
        ("batch", L, [3, 3, 4]),
    ]


def histograms():
    lo = [40.0, 40.5, 80.0, 0.0, 512.0]
    return [
        ("start", D, [1_700_000_000.0] * 4 + [1_700_000_001.0]),
        ("end", D, [1_700_000_001.0] * 4 + [1_700_000_002.0]),
        ("metric", S, ["tcp_rtt_avg"] * 3 + ["udp_custom", "ip_len"]),
        ("dir", S, ["c2s"] * 3 + ["-", "-"]),
        ("net", S, ["in"] * 4 + ["out"]),
        ("bin_lo", D, lo),
        ("bin_hi", D, [x + 0.5 for x in lo]),
        ("count", L, [3, 1, 8, 1, 134]),
        ("batch", L, [3, 3, 3, 4, 4]),
    ]


def probes():
    return [
        ("probe", S, ["probe-a", "probe-b", "probe-c"]),
        ("last_start", D, [1_700_000_002.0, 1_700_000_002.0, 1_699_999_990.0]),
        ("last_end", D, [1_700_000_003.0, 1_700_000_003.0, 1_699_999_991.0]),
        ("seen_at", D, [1_700_000_003.4, 1_700_000_003.9, 1_700_000_003.5]),
        ("interval_s", D, [1.0, 1.0, 1.0]),
        ("lag_s", D, [0.4, 0.9, 12.5]),
        ("offset_s", D, [-0.25, 0.25, 11.85]),
        ("clock_off", B, [False, False, True]),
        ("batch", L, [8, 8, 8]),
    ]


def hosts():
    return [
        ("start", D, [1_700_000_000.0] * 3 + [1_700_000_060.0]),
        ("end", D, [1_700_000_060.0] * 3 + [1_700_000_120.0]),
        ("addr", S, ["10.0.0.1", "10.0.0.2", "2001:db8::1", "10.0.0.1"]),
        ("pkts_in", L, [10, 12, 3, 1]),
        ("bytes_in", L, [1_000, 9_000, 300, 60]),
        ("pkts_out", L, [12, 10, 0, 1]),
        ("bytes_out", L, [9_000, 1_000, 0, 60]),
        ("flows", L, [2, 2, 1, 1]),
        ("batch", L, [4, 4, 4, 5]),
    ]


def pairs():
    return [
        ("start", D, [1_700_000_000.0] * 3 + [1_700_000_060.0]),
        ("end", D, [1_700_000_060.0] * 3 + [1_700_000_120.0]),
        ("src", S, ["10.0.0.1", "10.0.0.2", "2001:db8::1", "10.0.0.1"]),
        ("dst", S, ["10.0.0.2", "10.0.0.1", "2001:db8::2", "192.0.2.7"]),
        ("packets", L, [12, 10, 3, 1]),
        ("bytes", L, [9_000, 1_000, 300, 60]),
        ("flows", L, [2, 2, 1, 1]),
        ("batch", L, [4, 4, 4, 5]),
    ]


SHAPES = [intervals, quantiles, histograms, probes, hosts, pairs]


def parquet(t, **options):
    buf = io.BytesIO()
    options.setdefault("store_schema", False)  # as Spark writes: no Arrow schema in the footer
    pq.write_table(t, buf, **options)
    return buf.getvalue()


def with_nulls(columns):
    """The contract's columns with a null in the second row of the third column."""
    out = []
    for k, (name, t, values) in enumerate(columns):
        values = list(values)
        if k == 2:
            values[1] = None
        out.append((name, t, values))
    return out


def edges(columns):
    """Values near the edges: the largest LONGs (their sums overflow), a negative count, a
    time of -0.0, and a NaN where a float is not a key."""
    out = []
    for name, t, values in columns:
        values = list(values)
        if t == L and name != "batch":
            values = [2**63 - 1 - k for k in range(len(values))]
            if len(values) > 3:
                values[3] = -1
        if name == "start":
            values[0] = -0.0
        if name in ("mean", "p99", "lag_s", "bin_hi"):
            values[-1] = float("nan")
        out.append((name, t, values))
    return out


def reordered(columns):
    """The columns in reverse order, an extra one, INT for every LONG but batch, and the first
    string column as LargeUtf8 (an Arrow schema in the footer says so)."""
    out = []
    seen_string = False
    for name, t, values in reversed(columns):
        if t == L and name != "batch":
            t = I
        elif t == S and not seen_string:
            t, seen_string = pa.large_string(), True
        out.append((name, t, values))
    out.append(("extra", D, [0.5] * len(columns[0][2])))
    return out


def seeds(i, shape):
    cols = shape()
    yield "snappy", i, parquet(table(cols), compression="snappy")
    yield "none_plain", i | 8, parquet(table(cols), compression="none", use_dictionary=False,
                                       write_statistics=False)
    yield "zstd_v2", i | 0x10, parquet(table(cols), compression="zstd", data_page_version="2.0")
    yield "lz4_row_groups", i | 0x28, parquet(table(cols), compression="lz4", row_group_size=2)
    yield "nulls", i | 0x40, parquet(table(with_nulls(cols)), compression="none")
    yield "edges", i | 0x88, parquet(table(edges(cols)), compression="none", use_dictionary=False)
    yield "reordered", i | 0xf0, parquet(table(reordered(cols)), compression="snappy", store_schema=True)


if __name__ == "__main__":
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    for i, (log, shape) in enumerate(zip(LOGS, SHAPES)):
        for name, sel, data in seeds(i, shape):
            data = bytes([sel]) + data
            assert len(data) < MAX_SEED, (log, name, len(data))
            with open(os.path.join(OUT, f"{log}_{name}"), "wb") as f:
                f.write(data)
