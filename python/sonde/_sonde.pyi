"""The extension module under ``sonde`` (crates/sonde-py): use ``sonde``'s functions, which give
every option its default; these take the options as one dict with every key present."""

from typing import Any, Dict, Iterator, List, Optional, Tuple, Union
import os

import pyarrow as pa

__version__: str

class SondeError(Exception):
    """Anything sonde raises."""

class SettingsError(SondeError):
    """An option is wrong; the message says which and why."""

class TraceError(SondeError):
    """The input cannot be read: missing, unreadable, not a capture, or a format variant sonde cannot read."""

class TruncatedTraceError(TraceError):
    """The input ended early (truncated or corrupt): everything before the damage was analysed,
    and that partial run is the exception's ``result`` (a ``sonde.Run``)."""

    result: Any

class CaptureError(SondeError):
    """A live interface cannot be captured on."""

class FlowStream(Iterator[Tuple[str, pa.RecordBatch]]):
    """The flows of a run as ``(protocol, pyarrow.RecordBatch)`` pairs while it goes."""

    def __iter__(self) -> "FlowStream": ...
    def __next__(self) -> Tuple[str, pa.RecordBatch]:
        """The next batch of ended flows; KeyboardInterrupt on Ctrl-C (the run stops)."""
    def stop(self) -> None:
        """Ends the run where it is; the flows open then still come, then the iteration ends."""
    def result(self) -> Optional[Dict[str, Any]]:
        """The run's results (``analyze``'s dict, without flow tables) once the iteration ended."""

def analyze(path: Union[str, os.PathLike[str]], options: str) -> Dict[str, Any]:
    """Analyses a trace to its end: a dict with ``tcp``, ``udp`` (pyarrow.Table), ``tables``
    (name → pyarrow.Table), ``summary`` (summary.json's text) and ``input_error`` (str or None)."""

def stream(path: Union[str, os.PathLike[str]], options: str, rows: int, icmp: bool = False) -> FlowStream:
    """Analyses a trace, its flows coming as batches of up to ``rows`` while they end."""

def monitor(interfaces: List[str], options: str, capture: Dict[str, Any], rows: int, icmp: bool = False) -> FlowStream:
    """Captures on live interfaces, the flows coming as batches while they end."""

def schemas() -> Tuple[pa.Schema, pa.Schema]:
    """The flow logs' schemas (tcp, udp)."""

def parquet_table(table: pa.Table) -> pa.Table:
    """``table`` in its Parquet form (times floored to µs, spans as float ms with field metadata
    ``unit`` = ``ms``): the rule ``sonde analyze --format parquet`` writes by."""

def parquet_batch(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` in its Parquet form (as ``parquet_table``'s)."""

def parquet_schema(schema: pa.Schema) -> pa.Schema:
    """``schema`` in its Parquet form (as ``parquet_table``'s)."""
