"""``python -m sonde.spark``: sonde's Spark jobs (docs/spark.md), also runnable as
``spark-submit …/sonde/spark/__main__.py …``.

    python -m sonde.spark analyze INPUT_DIR OUTPUT_DIR [options]   # trace archives → Parquet
    python -m sonde.spark merge …                                  # many probes' Kafka records → one view
"""

from __future__ import annotations

import argparse
import sys
from typing import List, Optional


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="python -m sonde.spark", description="sonde's Spark jobs (docs/spark.md)")
    commands = top.add_subparsers(dest="command", required=True)

    # --- analyze: trace archives (sonde/spark/archive.py) ---
    from sonde.spark import archive

    analyze = commands.add_parser(
        "analyze", help="analyse every trace of a directory into Parquet partitioned by probe and day",
        description=(archive.__doc__ or "").strip().split("\n\n")[0])
    archive.add_arguments(analyze)
    analyze.set_defaults(main=archive.main)

    # --- merge: many probes, one view (sonde/spark/merge.py) ---
    from sonde.spark import merge

    merging = commands.add_parser(
        "merge", help="merge the probes' Kafka intervals and histograms into one Parquet view",
        description=(merge.__doc__ or "").strip().split("\n\n")[0])
    merge.add_arguments(merging)
    merging.set_defaults(main=merge.main)

    return top


def main(argv: Optional[List[str]] = None) -> int:
    args = parser().parse_args(argv)
    return args.main(args) or 0


if __name__ == "__main__":
    sys.exit(main())
