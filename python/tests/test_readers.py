"""pyarrow, pandas, polars and DuckDB read the tables directly, with the documented types
(docs/python.md): times as UTC timestamps, spans as durations, flags as booleans, counts as
unsigned integers, and nulls where a metric has no sample."""

from __future__ import annotations

import datetime as dt

import duckdb
import pandas as pd
import polars as pl
import pyarrow as pa

import sonde
from conftest import DEMO


def demo() -> sonde.Run:
    return sonde.analyze(DEMO)


def test_pandas():
    run = demo()
    df = run.tcp.to_pandas()
    assert len(df) == 13
    assert str(df["first"].dtype) == "datetime64[ns, UTC]"
    assert str(df["durat"].dtype) == "timedelta64[ns]"
    assert df["complete"].dtype == bool
    assert str(df["c_pkts_all"].dtype) == "uint64"
    assert isinstance(df["c_ip"].dtype, pd.CategoricalDtype)
    # A TCP flow without RTT samples: NaT, not 0.
    nat = df["c_rtt_avg"].isna()
    assert nat.sum() == run.tcp.column("c_rtt_avg").null_count
    assert (df.loc[~nat, "c_rtt_avg"] > pd.Timedelta(0)).all()
    assert df["first"].min().year >= 2020


def test_polars():
    run = demo()
    df = pl.from_arrow(run.tcp)
    assert df.height == 13
    assert df.schema["first"] == pl.Datetime("ns", "UTC")
    assert df.schema["durat"] == pl.Duration("ns")
    assert df.schema["complete"] == pl.Boolean
    assert df.schema["c_pkts_all"] == pl.UInt64
    assert df["c_rtt_avg"].null_count() == run.tcp.column("c_rtt_avg").null_count
    by_server = df.group_by("s_port").agg(pl.len().alias("flows")).sort("flows", descending=True)
    assert by_server["flows"].sum() == 13
    assert pl.from_arrow(run.intervals).schema["start"] == pl.Datetime("ns", "UTC")


def test_duckdb():
    run = demo()
    tcp = run.tcp  # noqa: F841 (DuckDB finds it by name)
    con = duckdb.connect()
    types = dict(con.sql("select column_name, column_type from (describe select * from tcp)").fetchall())
    assert types["first"] == "TIMESTAMPTZ_NS"  # a UTC timestamp in ns
    assert types["durat"] == "INTERVAL"
    assert types["complete"] == "BOOLEAN"
    assert types["c_pkts_all"] == "UBIGINT"
    [(n, nulls, first)] = con.sql(
        "select count(*), count(*) - count(c_rtt_avg), min(first) from tcp"
    ).fetchall()
    assert n == 13 and nulls == run.tcp.column("c_rtt_avg").null_count
    assert isinstance(first, dt.datetime) and first.tzinfo is not None
    top = con.sql("select s_port, sum(s_bytes_all) b from tcp group by s_port order by b desc").fetchall()
    assert sum(b for _, b in top) == pa.compute.sum(run.tcp.column("s_bytes_all")).as_py()


def test_pyarrow_compute_and_zero_copy_sharing():
    run = demo()
    assert pa.compute.sum(run.tcp.column("c_pkts_all")).as_py() > 0
    # The same buffers each time they are looked at: the table holds Rust's memory, not a copy per access.
    a = run.tcp.column("c_pkts_all").chunk(0).buffers()[1].address
    b = run.tcp.column("c_pkts_all").chunk(0).buffers()[1].address
    assert a == b
