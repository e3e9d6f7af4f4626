"""pyarrow, pandas, polars and DuckDB read the tables directly, with the documented types
(docs/python.md): times as UTC timestamps, spans as durations, flags as booleans, counts as
unsigned integers, and nulls where a metric has no sample. The CLI's Parquet files (and
`sonde.parquet_form`, the same rule) read with their units in DuckDB, polars and pandas
(docs/typed-outputs.md), and the DuckDB queries of the docs run verbatim on them."""

from __future__ import annotations

import datetime as dt

import duckdb
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

import sonde
from conftest import DEMO, DOC_QUERY_PAGES, cli, doc_queries


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


def test_to_pandas_keeps_nullable_counts_integers():
    run = demo()
    assert run.tcp.column("s_mss").null_count > 0
    # pyarrow's default: a count column with a null becomes float64 (the issue sonde.to_pandas solves).
    assert str(run.tcp.to_pandas()["s_mss"].dtype) == "float64"
    df = sonde.to_pandas(run.tcp)
    assert str(df["s_mss"].dtype) == "UInt64" and str(df["s_ttl_min"].dtype) == "UInt64"
    assert df["s_mss"].isna().sum() == run.tcp.column("s_mss").null_count
    assert df["s_mss"].dropna().tolist() == [v for v in run.tcp.column("s_mss").to_pylist() if v is not None]
    assert str(df["complete"].dtype) == "boolean"
    assert str(df["first"].dtype) == "datetime64[ns, UTC]" and str(df["durat"].dtype) == "timedelta64[ns]"
    assert isinstance(df["c_ip"].dtype, pd.CategoricalDtype)
    # From the CLI's Parquet: times in µs, spans float ms, counts still integers.
    out = parquet_dir()
    df = sonde.to_pandas(pq.read_table(out / "tcp_flows.parquet"))
    assert str(df["s_mss"].dtype) == "UInt64" and str(df["first"].dtype) == "datetime64[us, UTC]"
    assert str(df["c_rtt_avg"].dtype) == "float64"
    assert str(pd.read_parquet(out / "tcp_flows.parquet", dtype_backend="numpy_nullable")["s_mss"].dtype) == "UInt64"


def parquet_dir():
    out, _ = cli(DEMO, "--format", "parquet", "--interval", "60", "--tables")
    return out


def test_parquet_files_read_with_their_units():
    """The issue's measure: DuckDB's typeof(c_rtt_avg) on tcp_flows.parquet is no bare integer,
    and every time and span of every file reads with its unit."""
    out = parquet_dir()
    con = duckdb.connect()
    row = con.execute(f"select typeof(first), typeof(c_rtt_avg), typeof(durat), typeof(s_mss), epoch(first) "
                  f"from '{out}/tcp_flows.parquet' limit 1").fetchone()
    assert row[:4] == ("TIMESTAMP WITH TIME ZONE", "DOUBLE", "DOUBLE", "UBIGINT") and row[4] > 1.5e9
    arrow_tables = sonde.analyze(DEMO, interval=60, tables=True)
    checked = 0
    for path in sorted(out.glob("*.parquet")):
        table = pq.read_table(path)
        for field in table.schema:
            kind = con.execute(f"select typeof(\"{field.name}\") from '{path}' limit 1").fetchone()
            if pa.types.is_timestamp(field.type):
                assert field.type == pa.timestamp("us", tz="UTC") and kind == ("TIMESTAMP WITH TIME ZONE",)
                checked += 1
            elif field.metadata and field.metadata.get(b"unit") == b"ms":
                assert field.type == pa.float64() and kind == ("DOUBLE",), (path.name, field.name)
                checked += 1
            assert kind != ("BIGINT",), (path.name, field.name)
        polars = pl.read_parquet(path).schema
        assert all(polars[f.name] == pl.Datetime("us", "UTC") for f in table.schema if pa.types.is_timestamp(f.type))
        # The Python tables in Parquet's form are the CLI's files, type for type, value for value.
        name = {"tcp_flows": "tcp", "udp_flows": "udp", "icmp_flows": "icmp"}.get(path.stem)
        ours = getattr(arrow_tables, name) if name else arrow_tables.tables[path.stem]
        form = sonde.parquet_form(ours)
        assert form.schema.equals(table.schema, check_metadata=True), path.name
        assert form.equals(table), path.name
    assert checked > 50


def test_parquet_form_of_batches_and_schemas():
    run = demo()
    batch = run.tcp.to_batches()[0]
    assert sonde.parquet_form(batch).schema == sonde.parquet_form(run.tcp.schema) == sonde.parquet_form(run.tcp).schema
    rtt = sonde.parquet_form(run.tcp.schema).field("c_rtt_avg")
    assert rtt.type == pa.float64() and rtt.metadata[b"unit"] == b"ms" and rtt.metadata[b"tsv_unit"] == b"ms"
    ns = run.tcp.column("c_rtt_avg").cast(pa.int64()).to_pylist()
    ms = sonde.parquet_form(run.tcp).column("c_rtt_avg").to_pylist()
    assert [None if v is None else round(v * 1e6) for v in ms] == ns


def test_the_docs_duckdb_queries_run_verbatim(tmp_path, monkeypatch):
    """Every DuckDB query of docs/typed-outputs.md and docs/spark.md, verbatim, on the demo's
    Parquet files: the former from the directory holding `out`, the latter over views tcp and udp."""
    out = parquet_dir()
    (tmp_path / "out").symlink_to(out)
    monkeypatch.chdir(tmp_path)
    con = duckdb.connect()
    for name in ("tcp", "udp"):
        con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet('out/{name}_flows.parquet')")
    ran = 0
    for page in DOC_QUERY_PAGES:
        for question, engine, query in doc_queries(page):
            if engine != "duckdb" or "'merged/" in query:  # the merge's changelog: test_spark_merge.py
                continue
            rows = con.execute(query).fetchall()
            assert rows, f"docs/{page}: {question}: no rows on the demo"
            if question == "Types":
                assert rows == [("TIMESTAMP WITH TIME ZONE", "DOUBLE", "UBIGINT", "BOOLEAN", "VARCHAR")]
            ran += 1
    assert ran >= 6
