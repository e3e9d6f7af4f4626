"""sonde: a passive network traffic probe, from Python.

sonde reads packet traces (or live interfaces), follows every TCP and UDP flow, and reports
round-trip times, retransmissions, reordering, windows and per-interval statistics. This
package runs sonde's analysis (the same library the ``sonde`` command runs) and hands its
results over as ``pyarrow.Table`` objects, shared with Rust through the Arrow C data interface
(no copy, no Python object per flow):

>>> import sonde
>>> run = sonde.analyze("testdata/demo.pcap")
>>> run.tcp.num_rows, run.summary["packets"]["read"]          # doctest: +SKIP
>>> sonde.to_pandas(run.tcp)                                     # doctest: +SKIP

The columns are those of the CLI's ``tcp_flows.tsv`` and ``udp_flows.tsv`` (Tstat's names,
defined in docs/metrics.md), typed: times are UTC timestamps, spans durations, flags booleans,
counts unsigned integers, and a metric without a sample (an RTT never measured) is null, never 0.

``analyze`` waits for the whole trace; ``stream`` yields batches of flows as they end (memory
stays flat on a trace larger than memory); ``monitor`` does the same on live interfaces. The
analysis runs with the GIL released; Ctrl-C raises ``KeyboardInterrupt`` within 100 ms.
Errors are ``SondeError`` subclasses carrying the CLI's messages.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Iterator, List, NamedTuple, Optional, Sequence, Union

import pyarrow as pa

from . import _sonde
from ._sonde import CaptureError, SettingsError, SondeError, TraceError, TruncatedTraceError

__version__: str = _sonde.__version__

__all__ = [
    "analyze",
    "stream",
    "monitor",
    "schemas",
    "parquet_form",
    "to_pandas",
    "Run",
    "FlowStream",
    "FlowBatch",
    "SondeError",
    "SettingsError",
    "TraceError",
    "TruncatedTraceError",
    "CaptureError",
]

PathLike = Union[str, "os.PathLike[str]"]
"""A path: a ``str`` or an ``os.PathLike`` (``pathlib.Path``)."""


def _options(
    threads: Optional[int],
    interval: float,
    tables: bool,
    table_size: int,
    top: int,
    internal: Union[None, str, Sequence[str]],
    internal_file: Optional[PathLike],
    definitions: Optional[PathLike],
    definition_changes: Optional[PathLike],
    definition_fids: int,
    tcp_timeout: float,
    udp_timeout: float,
    closed_linger: float,
    max_flows: int,
    filter: Optional[str],
    anonymize: Optional[str],
    key: Optional[PathLike],
    thin: bool,
    app_packets: int,
    dns_cache: int,
    geoip: Optional[PathLike],
    asn: Optional[PathLike],
    owner_cache: int,
    zeek_lifetimes: bool,
    features: Union[None, str, Sequence[str]] = None,
    splt_packets: int = 20,
) -> str:
    """The options as the extension takes them: JSON of sonde-analysis' config (the CLI's keys),
    lists split, paths as text."""
    if isinstance(internal, str):
        internal = [n for n in internal.split(",") if n.strip()]
    if isinstance(features, str):
        features = [f for f in features.split(",") if f.strip()]
    return json.dumps({
        "threads": threads,
        "interval": float(interval),
        "tables": bool(tables),
        "table_size": int(table_size),
        "top": int(top),
        "internal": list(internal or []),
        "internal_file": internal_file,
        "definitions": definitions,
        "definition_changes": definition_changes,
        "definition_fids": int(definition_fids),
        "tcp_timeout": float(tcp_timeout),
        "udp_timeout": float(udp_timeout),
        "closed_linger": float(closed_linger),
        "max_flows": int(max_flows),
        "filter": [filter] if filter else [],
        "anonymize": anonymize,
        "key": key,
        "thin": "natra" if thin else None,
        "app_packets": int(app_packets),
        "dns_cache": int(dns_cache),
        "geoip": geoip,
        "asn": asn,
        "owner_cache": int(owner_cache),
        "zeek_lifetimes": bool(zeek_lifetimes),
        "features": list(features or []),
        "splt_packets": int(splt_packets),
    }, default=os.fspath)


class Run:
    """What a run found: its flow logs and interval tables as ``pyarrow.Table``, its summary.

    Attributes:
        tcp: one row per TCP flow (``tcp_flows.tsv``'s rows and order); None for a stream's
            result, whose flows came as batches.
        udp: one row per UDP flow (``udp_flows.tsv``).
        icmp: one row per ICMP or ICMPv6 echo session or other message (``icmp_flows.tsv``;
            docs/icmp.md); None for a stream's result.
        tables: every interval and definition table by name: ``intervals``, ``quantiles``,
            ``histograms`` (with ``interval`` on), ``hosts``, ``matrix``, ``protocols``, ``top``
            (with ``tables=True``), ``definitions`` and the ``definition_*`` tables (with
            ``definitions``).
        summary: summary.json as a dict (docs/schema/summary.schema.json): packets and bytes
            per link type and protocol, decode problems, flows by end reason, timing.
        input_error: None, or the CLI's warning when the input ended early (truncated or
            corrupt; the results cover what came before).
    """

    tcp: Optional[pa.Table]
    udp: Optional[pa.Table]
    icmp: Optional[pa.Table]
    tables: Dict[str, pa.Table]
    summary: Dict[str, Any]
    input_error: Optional[str]

    def __init__(self, native: Dict[str, Any]) -> None:
        self.tcp = native["tcp"]
        self.udp = native["udp"]
        self.icmp = native["icmp"]
        self.tables = dict(native["tables"])
        self.summary = json.loads(native["summary"])
        self.input_error = native["input_error"]

    @property
    def intervals(self) -> Optional[pa.Table]:
        """intervals.tsv: traffic and flows per interval, protocol and direction (None with ``interval=0``)."""
        return self.tables.get("intervals")

    @property
    def quantiles(self) -> Optional[pa.Table]:
        """quantiles.tsv: each distribution's percentiles per interval (None with ``interval=0``)."""
        return self.tables.get("quantiles")

    @property
    def histograms(self) -> Optional[pa.Table]:
        """histograms.tsv: each distribution's bins per interval (None with ``interval=0``)."""
        return self.tables.get("histograms")

    @property
    def definitions(self) -> Optional[pa.Table]:
        """definitions.tsv: packets and bytes per flow definition, FID and interval (None without ``definitions``)."""
        return self.tables.get("definitions")

    def __repr__(self) -> str:
        rows = lambda t: "-" if t is None else t.num_rows  # noqa: E731
        names = ", ".join(sorted(self.tables))
        return f"<sonde.Run {self.summary.get('input')!r}: {rows(self.tcp)} TCP and {rows(self.udp)} UDP flows; tables: {names or 'none'}>"


def _finished(native: Dict[str, Any], strict: bool) -> Run:
    run = Run(native)
    if run.input_error is not None and strict:
        error = TruncatedTraceError(run.input_error)
        error.result = run  # type: ignore[attr-defined]
        raise error
    return run


def analyze(
    path: PathLike,
    *,
    threads: Optional[int] = None,
    interval: float = 300.0,
    tables: bool = False,
    table_size: int = 100_000,
    top: int = 10,
    internal: Union[None, str, Sequence[str]] = None,
    internal_file: Optional[PathLike] = None,
    definitions: Optional[PathLike] = None,
    definition_changes: Optional[PathLike] = None,
    definition_fids: int = 100_000,
    tcp_timeout: float = 300.0,
    udp_timeout: float = 200.0,
    closed_linger: float = 60.0,
    max_flows: int = 1_000_000,
    filter: Optional[str] = None,
    anonymize: Optional[str] = None,
    key: Optional[PathLike] = None,
    thin: bool = False,
    app_packets: int = 8,
    dns_cache: int = 100_000,
    geoip: Optional[PathLike] = None,
    asn: Optional[PathLike] = None,
    owner_cache: int = 65_536,
    zeek_lifetimes: bool = False,
    features: Union[None, str, Sequence[str]] = None,
    splt_packets: int = 20,
    strict: bool = True,
) -> Run:
    """Analyses the trace at ``path`` and returns its flows, intervals and summary.

    The trace may be pcap, pcapng, ERF or snoop, plain or gzip/zstd/xz-compressed (found from
    its content). Every option is ``sonde analyze``'s flag of the same name (README, "Usage"):

    Args:
        threads: flow-tracking workers (default: the machine's cores); the results are the
            same for any number.
        interval: monitoring interval in seconds (0 = off): ``intervals``, ``quantiles``,
            ``histograms``.
        tables: also the RMON2-style ``hosts``, ``matrix``, ``protocols`` and ``top`` tables.
        table_size: rows per table and interval (the rest in an overflow row).
        top: hosts in the ``top`` table.
        internal: internal networks (``"10.0.0.0/8"``, a list, or comma-separated), for
            ``c_isint``/``s_isint`` and the in/out directions.
        internal_file: internal networks, one per line (Tstat's net.conf style).
        definitions: a flow-definitions file (docs/definitions.md) to count per interval.
        definition_changes: changes to the definitions at packet times.
        definition_fids: most flow identifiers per definition and interval.
        tcp_timeout, udp_timeout: idle timeouts in seconds (Tstat's 300 and 200).
        closed_linger: seconds a closed TCP flow waits for its last ACKs.
        max_flows: flows held at once (the longest-idle is evicted when full).
        filter: a BPF filter in tcpdump syntax, e.g. ``"tcp port 443"``.
        anonymize: ``"cryptopan"``, ``"hash"``, ``"zero"`` or ``"tcpdpriv"``: every address anonymised.
        key: the key file for ``cryptopan`` and ``hash`` (created, mode 600, if absent).
        thin: drop pure TCP ACKs before analysis (NATRA, docs/thinning.md).
        app_packets: payload packets of each flow direction read for application facts
            (TLS, QUIC, HTTP, DNS, RTP; docs/l7.md); 0 turns them off.
        dns_cache: DNS answers kept for DN-Hunter (the name a flow's client resolved).
        geoip, asn: MaxMind DB files of countries and of autonomous systems: the flow logs'
            ``c_country``/``s_country`` and ``c_asn``/``s_asn``/``c_as_org``/``s_as_org``
            (docs/owners.md).
        owner_cache: addresses whose owners each worker keeps.
        zeek_lifetimes: end TCP flows where Zeek's timers end its connections (5 s after an
            unanswered SYN, 5 s after a complete close), so the flows pair with Zeek's conn.log
            (docs/zeek.md).
        features: ``"ml"``: NFStream's flow features (``statistical_analysis=True,
            splt_analysis=splt_packets``) as columns after the flow logs' own, in NFStream's
            names; the SPLT as lists of int64 (docs/features.md).
        splt_packets: with ``features="ml"``, the packets of each flow's SPLT (lists padded
            with -1 to it); 0 leaves the SPLT columns out.
        strict: when the input ends early (truncated or corrupt), raise
            ``TruncatedTraceError`` (the partial run is its ``result``); with False, return
            the partial run with ``input_error`` set.

    Raises:
        TraceError: the trace is missing, unreadable or not a capture.
        TruncatedTraceError: the trace ended early (``strict``); ``.result`` is the run.
        SettingsError: an option is wrong.
        KeyboardInterrupt: Ctrl-C (the run is stopped).
    """
    opts = _options(threads, interval, tables, table_size, top, internal, internal_file, definitions,
                    definition_changes, definition_fids, tcp_timeout, udp_timeout, closed_linger,
                    max_flows, filter, anonymize, key, thin, app_packets, dns_cache,
                    geoip, asn, owner_cache, zeek_lifetimes, features, splt_packets)
    return _finished(_sonde.analyze(path, opts), strict)


class FlowBatch(NamedTuple):
    """Flows that ended, as one record batch of their log's schema."""

    protocol: str
    """``"tcp"``, ``"udp"`` or (with ``icmp=True``) ``"icmp"``: which log's columns the batch has."""
    batch: pa.RecordBatch
    """The flows, one row each, in the order they ended."""


class FlowStream:
    """The flows of a running analysis, as batches while they end.

    Iterate for ``FlowBatch(protocol, batch)``; each batch holds up to ``rows`` flows of one
    protocol, in the order the flows ended (with several threads, interleaved). At most a few
    batches wait for the reader: a run faster than its reader waits, so memory stays bounded.
    When the iteration ends, ``result`` holds the rest of the run (intervals, definitions,
    summary; ``tcp``/``udp`` are None). Ctrl-C during iteration raises KeyboardInterrupt and
    stops the run; iterating again yields the flows still open then, and ends.

    A ``with`` block stops the run when it is left.
    """

    def __init__(self, native: Any, strict: bool) -> None:
        self._native = native
        self._strict = strict
        self._result: Optional[Run] = None

    def __iter__(self) -> Iterator[FlowBatch]:
        for protocol, batch in self._native:
            yield FlowBatch(protocol, batch)
        native = self._native.result()
        if native is not None and self._result is None:
            self._result = _finished(native, self._strict)

    def stop(self) -> None:
        """Ends the run where it is; the flows open then still come, then the iteration ends."""
        self._native.stop()

    @property
    def result(self) -> Optional[Run]:
        """The run's intervals, definitions and summary once the iteration has ended, else None."""
        return self._result

    def __enter__(self) -> "FlowStream":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def stream(
    path: PathLike,
    *,
    rows: int = 8_192,
    threads: Optional[int] = None,
    interval: float = 300.0,
    tables: bool = False,
    table_size: int = 100_000,
    top: int = 10,
    internal: Union[None, str, Sequence[str]] = None,
    internal_file: Optional[PathLike] = None,
    definitions: Optional[PathLike] = None,
    definition_changes: Optional[PathLike] = None,
    definition_fids: int = 100_000,
    tcp_timeout: float = 300.0,
    udp_timeout: float = 200.0,
    closed_linger: float = 60.0,
    max_flows: int = 1_000_000,
    filter: Optional[str] = None,
    anonymize: Optional[str] = None,
    key: Optional[PathLike] = None,
    thin: bool = False,
    app_packets: int = 8,
    dns_cache: int = 100_000,
    geoip: Optional[PathLike] = None,
    asn: Optional[PathLike] = None,
    owner_cache: int = 65_536,
    zeek_lifetimes: bool = False,
    features: Union[None, str, Sequence[str]] = None,
    splt_packets: int = 20,
    strict: bool = True,
    icmp: bool = False,
) -> FlowStream:
    """Analyses the trace at ``path``, yielding its flows in batches of up to ``rows`` as they end.

    The options are ``analyze``'s. The trace is opened (and the options checked) before this
    returns, so ``TraceError`` and ``SettingsError`` come from the call; ``TruncatedTraceError``
    (``strict``) comes at the end of the iteration, after every flow read before the damage.
    With ``icmp=True`` the ICMP entries (``icmp_flows``' rows, docs/icmp.md) come too, as
    ``"icmp"`` batches.
    """
    opts = _options(threads, interval, tables, table_size, top, internal, internal_file, definitions,
                    definition_changes, definition_fids, tcp_timeout, udp_timeout, closed_linger,
                    max_flows, filter, anonymize, key, thin, app_packets, dns_cache,
                    geoip, asn, owner_cache, zeek_lifetimes, features, splt_packets)
    return FlowStream(_sonde.stream(path, opts, int(rows), bool(icmp)), strict)


def monitor(
    interface: Union[str, Sequence[str]],
    *,
    duration: Optional[float] = None,
    rows: int = 1_024,
    capture: str = "afpacket",
    ring_mb: int = 64,
    promisc: bool = False,
    tick_ms: int = 100,
    threads: Optional[int] = None,
    interval: float = 300.0,
    tables: bool = False,
    table_size: int = 100_000,
    top: int = 10,
    internal: Union[None, str, Sequence[str]] = None,
    internal_file: Optional[PathLike] = None,
    definitions: Optional[PathLike] = None,
    definition_changes: Optional[PathLike] = None,
    definition_fids: int = 100_000,
    tcp_timeout: float = 300.0,
    udp_timeout: float = 200.0,
    closed_linger: float = 60.0,
    max_flows: int = 1_000_000,
    filter: Optional[str] = None,
    anonymize: Optional[str] = None,
    key: Optional[PathLike] = None,
    thin: bool = False,
    app_packets: int = 8,
    dns_cache: int = 100_000,
    geoip: Optional[PathLike] = None,
    asn: Optional[PathLike] = None,
    owner_cache: int = 65_536,
    zeek_lifetimes: bool = False,
    features: Union[None, str, Sequence[str]] = None,
    splt_packets: int = 20,
) -> FlowStream:
    """Captures on live interfaces (``sonde monitor``), yielding flows in batches as they end.

    Needs the capture privilege (root or CAP_NET_RAW). Runs until ``stop()``, ``duration``
    seconds, or Ctrl-C (KeyboardInterrupt; iterate again for the flows still open then).

    Args:
        interface: an interface name, or several (merged by timestamp).
        duration: seconds to capture (None: until stopped).
        rows: flows per batch at most (a batch also comes at each end of the run).
        capture: ``"afpacket"`` (Linux TPACKET_V3 ring) or ``"pcap"`` (libpcap).
        ring_mb: per interface, the ring's (or libpcap's buffer's) size in MiB.
        promisc: promiscuous mode while capturing.
        tick_ms: wall time without a packet after which packet time moves on.
        The other options are ``analyze``'s.

    Raises:
        CaptureError: an interface cannot be captured on.
        SettingsError: an option is wrong.
    """
    interfaces = [interface] if isinstance(interface, str) else list(interface)
    opts = _options(threads, interval, tables, table_size, top, internal, internal_file, definitions,
                    definition_changes, definition_fids, tcp_timeout, udp_timeout, closed_linger,
                    max_flows, filter, anonymize, key, thin, app_packets, dns_cache,
                    geoip, asn, owner_cache, zeek_lifetimes, features, splt_packets)
    cap = {"capture": capture, "ring_mb": int(ring_mb), "promisc": bool(promisc),
           "tick_ms": int(tick_ms), "duration": None if duration is None else float(duration)}
    return FlowStream(_sonde.monitor(interfaces, opts, cap, int(rows)), strict=False)


def schemas() -> "tuple[pa.Schema, pa.Schema]":
    """The flow logs' schemas ``(tcp, udp)``; each field's metadata holds its unit and definition."""
    return _sonde.schemas()


def parquet_form(data: Union[pa.Table, pa.RecordBatch, pa.Schema]) -> Any:
    """``data`` (a table, batch or schema of sonde's) in the form ``sonde analyze --format
    parquet`` writes, by the same rule (sonde-arrow's ``parquet_batch``): times
    ``timestamp[us, tz=UTC]`` (floored to the µs), spans ``float64`` milliseconds with the field
    metadata ``unit`` = ``ms``, every other column as it is. Write it to Parquet, and DuckDB,
    Spark (without legacy options), polars and pandas read its times and spans with their unit;
    the tables themselves keep ``timestamp[ns]`` and ``duration[ns]`` (docs/typed-outputs.md)."""
    if isinstance(data, pa.Schema):
        return _sonde.parquet_schema(data)
    if isinstance(data, pa.RecordBatch):
        return _sonde.parquet_batch(data)
    if isinstance(data, pa.Table):
        return _sonde.parquet_table(data)
    raise TypeError(f"parquet_form: a pyarrow Table, RecordBatch or Schema, not {type(data).__name__}")


def to_pandas(table: Union[pa.Table, pa.RecordBatch]) -> Any:
    """``table`` as a ``pandas.DataFrame`` whose counts and flags stay integers and booleans
    where some are null: ``uint64`` as pandas' nullable ``UInt64`` and ``bool`` as ``boolean``
    (``<NA>`` for null), where ``table.to_pandas()`` makes a ``float64`` of a count column with a
    null (``s_mss``, ``s_ttl_min``…) and an ``object`` of such a flag column. Times stay
    ``datetime64[ns, UTC]`` (``[us, UTC]`` read from Parquet), spans ``timedelta64[ns]`` (float
    ms read from Parquet), text ``category``, statistics ``float64`` (NaN for null)."""
    import pandas as pd

    nullable = {pa.uint64(): pd.UInt64Dtype(), pa.bool_(): pd.BooleanDtype()}
    return table.to_pandas(types_mapper=nullable.get)
