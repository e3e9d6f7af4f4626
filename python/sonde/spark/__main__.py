"""`python -m sonde.spark analyze|merge …` (docs/spark.md)."""

from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sonde.spark", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    # --- analyze: the trace archive job (archive.py) ---
    analyze = commands.add_parser("analyze", help="analyse every trace of a directory into Parquet")
    analyze.set_defaults(run=lambda args: __import__("sonde.spark.archive", fromlist=["main"]).main(args))

    # --- merge: the streaming merge of many probes (merge.py) ---
    from sonde.spark import merge

    merge_parser = commands.add_parser(
        "merge", help="merge the probes' Kafka intervals and histograms into one Parquet view")
    merge.add_arguments(merge_parser)
    merge_parser.set_defaults(run=merge.main)
    # --- end merge ---

    args = parser.parse_args(argv)
    return args.run(args) or 0


if __name__ == "__main__":
    sys.exit(main())
