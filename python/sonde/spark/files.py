"""Files the jobs write whole or not at all."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Callable


def atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    """`write(tmp)` to a hidden name beside `path`, then renamed into place: a reader (Spark,
    `sonde serve`, DuckDB) never sees half a file, and a failed write leaves nothing."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
