"""What the Python tests share: where the repository, the CLI and the shared corpus are, the
CLI's outputs of a trace (run once per trace and options), and the comparison of a typed table
with the TSV file the CLI wrote from the same run's settings."""

from __future__ import annotations

import functools
import os
import subprocess
import tempfile
from decimal import Decimal
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pyarrow as pa
import pytest

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "testdata" / "demo.pcap"


def sonde_bin() -> Path:
    """The CLI the tables are compared with: $SONDE_BIN, else the release build, else the debug one."""
    given = os.environ.get("SONDE_BIN")
    candidates = [Path(given)] if given else [REPO / "target/release/sonde", REPO / "target/debug/sonde"]
    for c in candidates:
        if c.is_file():
            return c
    raise RuntimeError(f"no sonde binary at {candidates} (make build makes it)")


def shared_dir() -> Optional[Path]:
    """The shared corpus ($SONDE_SHARED, else ../shared beside the repository), if present."""
    d = Path(os.environ.get("SONDE_SHARED", REPO.parent / "shared"))
    return d if d.is_dir() else None


def shared(relative: str) -> Path:
    """A file of the shared corpus; the test is SKIPPED without the corpus."""
    d = shared_dir()
    if d is None:
        pytest.skip(f"SKIPPED: no shared corpus at {REPO.parent / 'shared'} (set SONDE_SHARED)")
    path = d / relative
    if not path.exists():
        pytest.skip(f"SKIPPED: {path} is not in the shared corpus")
    return path


_TMP = tempfile.TemporaryDirectory(prefix="sonde-pytest-")


@functools.lru_cache(maxsize=None)
def cli(trace: Path, *args: str) -> Tuple[Path, int]:
    """`sonde analyze -r TRACE ARGS` into a fresh directory: (the directory, the exit status)."""
    out = Path(tempfile.mkdtemp(dir=_TMP.name))
    cmd = [str(sonde_bin()), "analyze", "-q", "--force", "-r", str(trace), "-o", str(out), *args]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode in (0, 3), f"{cmd}: {done.stderr}"
    return out, done.returncode


def read_tsv(path: Path) -> Tuple[List[str], List[List[str]]]:
    lines = path.read_text().splitlines()
    header = lines[0].split("\t")
    rows = [line.split("\t") for line in lines[1:]]
    return header, rows


def tsv(path: Path) -> List[Dict[str, str]]:
    """A TSV's rows as dicts by its header."""
    header, rows = read_tsv(path)
    return [dict(zip(header, r)) for r in rows]


def changelog_view(directory: Path, key) -> Dict[tuple, dict]:
    """The merged view of one of the Spark merge's changelog directories: the highest batch's row
    per key (docs/merged.md)."""
    import pyarrow.parquet as pq

    rows: Dict[tuple, dict] = {}
    files = [p for p in directory.glob("*.parquet") if not p.name.startswith(("_", "."))]
    assert files, f"nothing in {directory}"
    for p in files:
        for r in pq.read_table(p).to_pylist():
            k = tuple(r[c] for c in key)
            if k not in rows or r["batch"] > rows[k]["batch"]:
                rows[k] = r
    return rows


def spark_jars() -> Path:
    """The directory of Spark's Kafka source's jars (tests/spark/fetch.sh, cached in target/)."""
    d = REPO / "target" / "tmp" / "spark-kafka-4.2.0"
    done = subprocess.run([str(REPO / "tests/spark/fetch.sh"), str(d)], capture_output=True, text=True)
    assert done.returncode == 0, f"cannot fetch Spark's Kafka source (needs mvn): {done.stderr}"
    return d / "lib"


def as_tsv_text(value, typ: pa.DataType) -> Optional[str]:
    """A typed value other than a time or span as the TSV text it must come from; None for null."""
    if value is None:
        return None
    if pa.types.is_dictionary(typ):
        typ = typ.value_type
    if pa.types.is_boolean(typ):
        return "1" if value else "0"
    if pa.types.is_integer(typ) or pa.types.is_string(typ) or pa.types.is_large_string(typ):
        return str(value)
    raise AssertionError(f"unexpected type {typ}")


def same_instant(ns: int, text: str, unit_ns: int) -> bool:
    """Whether `text`, a number of `unit_ns` printed with some decimals (rounded half up), is
    `ns` at that resolution."""
    want = Decimal(text) * unit_ns
    digits = -Decimal(text).as_tuple().exponent
    resolution = Decimal(unit_ns) / (Decimal(10) ** digits)
    return abs(Decimal(ns) - want) <= resolution / 2


def raw_values(column: pa.ChunkedArray) -> list:
    """The column's values, times and spans as integer ns (not Python datetimes)."""
    typ = column.type
    if pa.types.is_timestamp(typ) or pa.types.is_duration(typ):
        column = column.cast(pa.int64())
    elif pa.types.is_dictionary(typ):
        column = column.cast(typ.value_type)
    return column.to_pylist()


def assert_table_equals_tsv(table: pa.Table, tsv: Path, null_texts=("-", "0", "0.000", ""),
                            time_unit_ns: int = 1_000_000) -> Dict[str, int]:
    """Every row and column of `table` says what the TSV file says, row for row: the same
    column names in the same order, a null only where the TSV has `-` (no value) or a
    sample-less `0`, every other value equal once written the TSV's way: times in
    `time_unit_ns` (the flow logs' ms, the interval tables' seconds), spans in ms, floats as
    printed. Returns the nulls per column (so a test can see they exist)."""
    header, rows = read_tsv(tsv)
    assert table.column_names == header, f"{tsv.name}: columns differ"
    assert table.num_rows == len(rows), f"{tsv.name}: {table.num_rows} rows, TSV {len(rows)}"
    nulls: Dict[str, int] = {}
    for j, name in enumerate(header):
        column = table.column(name)
        typ = column.type
        for i, value in enumerate(raw_values(column)):
            want = rows[i][j]
            at = f"{tsv.name} row {i + 1} {name}"
            if value is None:
                assert want in null_texts, f"{at}: null, TSV {want!r}"
                nulls[name] = nulls.get(name, 0) + 1
            elif pa.types.is_timestamp(typ):
                assert same_instant(value, want, time_unit_ns), f"{at}: {value} ns, TSV {want!r}"
            elif pa.types.is_duration(typ):
                assert same_instant(value, want, 1_000_000), f"{at}: {value} ns, TSV {want!r}"
            elif pa.types.is_floating(typ):
                assert want not in ("-", ""), f"{at}: {value}, TSV {want!r}"
                printed = Decimal(want)
                half = Decimal(10) ** printed.as_tuple().exponent / 2
                assert abs(printed - Decimal(value)) <= half + abs(printed) * Decimal("1e-12"), f"{at}: {value}, TSV {want!r}"
            else:
                got = as_tsv_text(value, typ)
                assert got == want, f"{at}: {got!r}, TSV {want!r}"
    return nulls


# Every `sql` block of these pages runs verbatim in a test: its first line is a comment naming
# the question and the engines it is written for, `-- <question> (<engine>[ and <engine>])`.
DOC_QUERY_PAGES = ("typed-outputs.md", "spark.md")
ENGINES = {"DuckDB": "duckdb", "Spark SQL": "spark"}


def doc_queries(page: str) -> List[Tuple[str, str, str]]:
    """The `sql` blocks of docs/`page`: (question, engine: "duckdb" or "spark", query text),
    a block written for both engines once for each."""
    import re

    text = (REPO / "docs" / page).read_text()
    found = []
    for block in re.findall(r"^```sql\n(.*?)^```", text, flags=re.S | re.M):
        head = re.fullmatch(r"-- (.+) \((.+)\)", block.splitlines()[0])
        assert head, f"docs/{page}: a sql block without its `-- question (engine)` line: {block[:80]!r}"
        for engine in head.group(2).split(" and "):
            assert engine in ENGINES, f"docs/{page}: unknown engine {engine!r} in {head.group(0)!r}"
            found.append((head.group(1), ENGINES[engine], block))
    return found
