"""The Python tables say what the CLI's TSV files say, row for row and column for column, on the
demo trace, the ground-truth captures and real traces of the shared corpus (SKIPPED without it),
typed: times are UTC timestamps, spans durations, flags booleans, and a value the TSV writes as
`-` (none) or a sample-less `0` is null."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import sonde
from conftest import DEMO, REPO, assert_table_equals_tsv, cli, shared

GROUND_TRUTH = ["clean", "lossy", "mixed", "ipv6"]

# Real captures of several kinds: TLS, VPN, mobile apps, a SYN scan, IPv6, VLAN, SLL, pcapng,
# tunnels; TCP and UDP.
REAL = [
    "realistic/arkime+arkime/tests/pcap/arkime_synthetic.pcap",
    "realistic/ntop+nDPI/tests/cfgs/default/pcap/android.pcap",
    "realistic/ntop+nDPI/tests/cfgs/default/pcap/anyconnect-vpn.pcap",
    "realistic/ntop+nDPI/tests/cfgs/default/pcap/ethereum.pcap",
    "realistic/ntop+nDPI/tests/cfgs/default/pcap/synscan.pcap",
    "realistic/FoxIO-LLC+ja4/pcap/tls-sni.pcapng",
    "realistic/CESNET+ipfixprobe/tests/functional/inputs/mqtt.pcap",
    "realistic/nfstream+nfstream/tests/pcaps/instagram.pcap",
    "robustness/seladb+PcapPlusPlus/Tests/ExamplesTest/pcap_examples/many-protocols.pcap",
    "robustness/seladb+PcapPlusPlus/Tests/Pcap++Test/PcapExamples/example.pcap",
]

FILES = ["intervals", "quantiles", "histograms"]


def compare_run(trace: Path, *args: str, **options) -> sonde.Run:
    """Analyses `trace` with the CLI (ARGS) and with Python (OPTIONS, the same settings) and
    checks every table equal; returns the Python run."""
    out, _ = cli(trace, *args)
    run = sonde.analyze(trace, strict=False, **options)
    assert_table_equals_tsv(run.tcp, out / "tcp_flows.tsv")
    assert_table_equals_tsv(run.udp, out / "udp_flows.tsv")
    assert_table_equals_tsv(run.icmp, out / "icmp_flows.tsv")
    written = sorted(p.stem for p in out.glob("*.tsv") if p.stem not in ("tcp_flows", "udp_flows", "icmp_flows"))
    assert sorted(run.tables) == written
    for name, table in run.tables.items():
        assert_table_equals_tsv(table, out / f"{name}.tsv", null_texts=("-", ""), time_unit_ns=10**9)
    return run


def test_demo_equals_the_cli_and_is_typed():
    run = compare_run(DEMO, "--threads", "2", threads=2)
    assert run.tcp.num_rows == 13 and run.udp.num_rows == 2
    schema = run.tcp.schema
    assert schema.field("first").type == pa.timestamp("ns", tz="UTC")
    assert schema.field("durat").type == pa.duration("ns")
    assert schema.field("c_rtt_avg").type == pa.duration("ns")
    assert schema.field("complete").type == pa.bool_()
    assert schema.field("c_pkts_all").type == pa.uint64()
    assert pa.types.is_dictionary(schema.field("c_ip").type)
    # The demo's flows start in 2026 or so: a real UTC time, not a count of ms.
    first = run.tcp.column("first")[0].as_py()
    assert first.tzinfo is not None and 2020 <= first.year <= 2100
    assert run.summary["packets"]["read"] == 443
    assert run.summary["flows"]["tcp"] == 13
    assert run.input_error is None
    assert {"intervals", "quantiles", "histograms"} <= set(run.tables)


def test_sample_less_metrics_are_null_not_zero():
    # UDP flows have no RTT; a TCP flow without a measured RTT has a null c_rtt_avg where the
    # TSV writes 0.
    out, _ = cli(DEMO, "--threads", "2")
    run = sonde.analyze(DEMO, threads=2)
    nulls = assert_table_equals_tsv(run.tcp, out / "tcp_flows.tsv")
    assert nulls, "the demo has sample-less metrics"
    for column, count in nulls.items():
        assert run.tcp.column(column).null_count == count


def test_options_reach_the_run():
    out, _ = cli(DEMO, "--interval", "1", "--tables", "--internal", "10.0.0.0/8", "tcp")
    run = sonde.analyze(DEMO, interval=1, tables=True, internal="10.0.0.0/8", filter="tcp")
    assert run.udp.num_rows == 0
    assert set(run.tables) >= {"hosts", "matrix", "protocols", "top"}
    assert run.intervals.num_rows > 1
    assert_table_equals_tsv(run.tcp, out / "tcp_flows.tsv")
    for name in run.tables:
        assert_table_equals_tsv(run.tables[name], out / f"{name}.tsv", null_texts=("-", ""), time_unit_ns=10**9)
    assert run.summary["filter"] == "tcp"
    assert run.summary["monitoring"]["interval_s"] == 1.0


def test_owners_are_typed_and_equal_the_cli():
    """`geoip` and `asn` (docs/owners.md): the six owner columns typed like the others, and
    equal to what the CLI writes. The values themselves are checked in tests/owners.rs."""
    city = shared("geoip/GeoIP2-City-Test.mmdb")
    asn = shared("geoip/GeoLite2-ASN-Test.mmdb")
    run = compare_run(DEMO, "--geoip", str(city), "--asn", str(asn), geoip=str(city), asn=str(asn))
    schema = run.tcp.schema
    assert schema.field("c_asn").type == pa.uint64()
    assert pa.types.is_dictionary(schema.field("s_country").type)
    assert pa.types.is_dictionary(schema.field("s_as_org").type)
    # The demo's addresses are in none of the test databases' networks: null, not "-".
    assert run.tcp.column("c_country").null_count == run.tcp.num_rows
    owners = run.summary["flows"]["owners"]
    assert owners["lookups"] == 2 * (run.tcp.num_rows + run.udp.num_rows)


def test_zeeks_vocabulary_is_typed_and_equals_the_cli():
    """`conn_state`, `history` and `uid` (docs/zeek.md) as the CLI writes them, with sonde's
    lifetimes and with `zeek_lifetimes` (a one-way capture whose SYNs go unanswered: Zeek's
    attempt timer splits its connections, and so does sonde with the option)."""
    trace = shared("traces/realistic/zeek+zeek/testing/btest/Traces/ssh/ssh.client-side-half-duplex.pcap")
    ends = {}
    for args, kwargs in (((), {}), (("--zeek-lifetimes",), {"zeek_lifetimes": True})):
        run = compare_run(trace, *args, **kwargs)
        for column in ("conn_state", "history", "uid"):
            assert pa.types.is_dictionary(run.tcp.schema.field(column).type)
            assert run.tcp.column(column).null_count == 0
        ends[bool(kwargs)] = run.tcp.column("end_reason").to_pylist()
    assert "expired" not in ends[False] and "expired" in ends[True]
    assert len(ends[True]) > len(ends[False])


def test_interval_off_gives_no_interval_tables():
    run = sonde.analyze(DEMO, interval=0)
    assert run.intervals is None and run.tables == {}
    assert run.summary["monitoring"] is None


def test_definitions_tables_equal_the_cli(tmp_path):
    # The shipped associations (data→ACK RTT, SYN→FIN) and a counted definition with gaps and
    # lengths: definitions.tsv and every definition_* table.
    defs = tmp_path / "defs"
    defs.write_text((REPO / "definitions" / "tcp-rtt.defs").read_text()
                    + "\nports = ip.proto == 6 key tcp.dport measure count,gap,length idle 1s\n")
    out, _ = cli(DEMO, "--interval", "1", "--definitions", str(defs))
    run = sonde.analyze(DEMO, interval=1, definitions=defs)
    assert run.definitions is not None and run.definitions.num_rows > 0
    written = sorted(p.stem for p in out.glob("definition*.tsv"))
    assert sorted(n for n in run.tables if n.startswith("definition")) == written
    assert {"definitions", "definition_associations", "definition_gaps", "definition_flows"} <= set(written)
    for name in written:
        assert_table_equals_tsv(run.tables[name], out / f"{name}.tsv", null_texts=("-", ""), time_unit_ns=10**9)
    assert "ports" in {d["name"] for d in run.summary["definitions"]}


def test_anonymized_tables_equal_the_cli(tmp_path):
    key = tmp_path / "key"
    out, _ = cli(DEMO, "--anonymize", "cryptopan", "--key", str(key))
    run = sonde.analyze(DEMO, anonymize="cryptopan", key=key)
    assert_table_equals_tsv(run.tcp, out / "tcp_flows.tsv")
    assert run.tcp.column("c_iscrypto").to_pylist() == [True] * run.tcp.num_rows
    assert run.summary["anonymization"]["mode"] == "cryptopan"


@pytest.mark.parametrize("name", GROUND_TRUTH)
def test_ground_truth_equals_the_cli(name):
    trace = shared(f"groundtruth/{name}.pcap")
    run = compare_run(trace)
    assert run.tcp.num_rows > 0


@pytest.mark.parametrize("relative", REAL)
def test_real_trace_equals_the_cli(relative):
    compare_run(shared(f"traces/{relative}"))


def test_two_readers_split_the_flows_and_give_the_tables_of_one():
    """With two workers a trace file is read by two readers, each analysing its share of the
    flows (docs/architecture.md), and the tables are those of one."""
    one, two = sonde.analyze(DEMO, threads=1), sonde.analyze(DEMO, threads=2)
    assert (one.summary["timing"]["readers"], two.summary["timing"]["readers"]) == (1, 2)
    assert one.tcp.equals(two.tcp) and one.udp.equals(two.udp)
