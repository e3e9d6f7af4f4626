"""`sonde.stream` yields the same flows as `sonde.analyze`, in batches while they end, and then
the same intervals and summary."""

from __future__ import annotations

import pyarrow as pa
import pytest

import sonde
from conftest import DEMO, raw_values, shared


def rows(table: pa.Table) -> list:
    """The table's rows as tuples of plain values, sorted (a stream's order is the order flows ended)."""
    columns = [raw_values(table.column(n)) for n in table.column_names]
    return sorted(zip(*columns), key=repr)


def streamed(path, **options):
    s = sonde.stream(path, **options)
    batches = {"tcp": [], "udp": []}  # no "icmp" batch unless asked for
    for protocol, batch in s:
        assert isinstance(batch, pa.RecordBatch)
        assert batch.num_rows <= options.get("rows", 8_192)
        batches[protocol].append(batch)
    tcp_schema, udp_schema = sonde.schemas()
    tcp = pa.Table.from_batches(batches["tcp"], schema=tcp_schema)
    udp = pa.Table.from_batches(batches["udp"], schema=udp_schema)
    return s, tcp, udp, len(batches["tcp"]) + len(batches["udp"])


@pytest.mark.parametrize("threads", [1, 2])
def test_a_stream_yields_what_analyze_returns(threads):
    run = sonde.analyze(DEMO, threads=threads)
    s, tcp, udp, n = streamed(DEMO, rows=3, threads=threads)
    assert n >= 5  # 15 flows in batches of 3 at most
    assert rows(tcp) == rows(run.tcp) and rows(udp) == rows(run.udp)
    assert s.result.tcp is None and s.result.udp is None
    assert sorted(s.result.tables) == sorted(run.tables)
    for name, table in run.tables.items():
        assert s.result.tables[name].equals(table), name
    assert s.result.summary["flows"] == run.summary["flows"]
    assert s.result.summary["packets"] == run.summary["packets"]


@pytest.mark.parametrize("threads", [1, 2])
def test_icmp_entries_stream_when_asked(threads):
    run = sonde.analyze(DEMO, threads=threads)
    assert run.icmp.num_rows > 0, "the demo has ICMP entries"
    batches = {"tcp": [], "udp": [], "icmp": []}
    for protocol, batch in sonde.stream(DEMO, rows=2, threads=threads, icmp=True):
        assert batch.num_rows <= 2
        batches[protocol].append(batch)
    icmp = pa.Table.from_batches(batches["icmp"], schema=run.icmp.schema)
    assert rows(icmp) == rows(run.icmp)
    tcp_schema, _ = sonde.schemas()
    assert rows(pa.Table.from_batches(batches["tcp"], schema=tcp_schema)) == rows(run.tcp)


def test_the_schemas_are_the_tables():
    tcp, udp = sonde.schemas()
    run = sonde.analyze(DEMO)
    assert run.tcp.schema.equals(tcp) and run.udp.schema.equals(udp)
    assert tcp.field("c_rtt_avg").metadata, "fields carry their definitions"


def test_a_stream_stopped_early_ends_with_what_was_read():
    s = sonde.stream(DEMO, rows=1)
    first = next(iter(s))
    s.stop()
    rest = list(s)
    assert s.result is not None
    assert 1 + len(rest) == s.result.summary["flows"]["tcp"] + s.result.summary["flows"]["udp"]
    assert first.protocol in ("tcp", "udp")


def test_a_stream_dropped_early_does_not_hang():
    for _ in range(3):
        s = sonde.stream(DEMO, rows=1)
        next(iter(s))
        del s


def test_a_real_trace_streams_like_analyze():
    trace = shared("traces/realistic/ntop+nDPI/tests/cfgs/default/pcap/android.pcap")
    run = sonde.analyze(trace, threads=2)
    s, tcp, udp, n = streamed(trace, rows=7, threads=2)
    assert n > 4
    assert rows(tcp) == rows(run.tcp) and rows(udp) == rows(run.udp)
