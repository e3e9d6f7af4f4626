"""Benchmark of the archive job (not a test; the numbers go to docs/spark.md, "Measured").

`python -m sonde.spark analyze` on 2 cores (`local[2]`, one trace a task, one worker a trace)
against `sonde analyze --format parquet --threads 2` run on the same files one after another,
both writing every table as Parquet. The input: COPIES links to one trace (the 1.2 M-packet
bench trace by default: `../shared/tools/mergetrace/make-bench-trace.sh /tmp/b/bench.pcap`)
spread over four probe directories, so that Spark's start (~10 s) is not the whole story. The
two are run alternately, ROUNDS times each, each in a fresh process, the job's time from its
start to its end (JVM and Spark start included). Compare an optimised extension with an
optimised CLI: the extension of `make python` with target/release/sonde, or the test-profile
extension with the test-profile CLI (SONDE_BIN).

    .venv/bin/python python/bench_spark.py [--trace /tmp/b/bench.pcap] [--copies 64] [--rounds 2] [--sonde-bin PATH]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROBES = ("p1", "p2", "p3", "p4")


def load() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def cli_total(sonde: Path, traces, threads: int) -> float:
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as out:
        for trace in traces:
            done = subprocess.run([str(sonde), "analyze", "-q", "--force", "--format", "parquet",
                                   "--threads", str(threads), "-r", str(trace), "-o", out],
                                  capture_output=True, text=True)
            if done.returncode not in (0, 3):
                sys.exit(f"{trace}: {done.stderr}")
    return time.perf_counter() - started


def spark_total(input_dir: Path, master: str) -> float:
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-spark-") as out:
        done = subprocess.run([sys.executable, "-m", "sonde.spark", "analyze", str(input_dir), out,
                               "--master", master, "--conf", "spark.ui.enabled=false",
                               "--conf", "spark.ui.showConsoleProgress=false"],
                              env=env, capture_output=True, text=True)
        elapsed = time.perf_counter() - started
        if done.returncode != 0:
            sys.exit(f"the job failed ({done.returncode}): {done.stderr[-3000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", default="/tmp/b/bench.pcap")
    parser.add_argument("--copies", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2, help="the CLI's --threads")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--sonde-bin", default=os.environ.get("SONDE_BIN", str(REPO / "target/release/sonde")))
    args = parser.parse_args()
    trace = Path(args.trace).absolute()
    if not trace.is_file():
        sys.exit(f"{trace}: missing (../shared/tools/mergetrace/make-bench-trace.sh {trace} builds it)")
    work = Path(tempfile.mkdtemp(prefix="bench-spark-in-"))
    try:
        links = []
        for i in range(args.copies):
            path = work / PROBES[i % len(PROBES)] / f"copy{i:03d}.pcap"
            path.parent.mkdir(exist_ok=True)
            path.symlink_to(trace)
            links.append(path)
        size_mb = trace.stat().st_size * args.copies / 1e6
        print(f"input: {args.copies} links to {trace} ({size_mb:.0f} MB in all); CLI {args.sonde_bin}; "
              f"Spark {args.master}; load before: {load()}", flush=True)
        cli_runs, spark_runs = [], []
        for round_ in range(args.rounds):
            c = cli_total(Path(args.sonde_bin), links, args.threads)
            cli_runs.append(c)
            print(f"round {round_ + 1}: CLI --threads {args.threads}, one after another: {c:.1f} s (load {load()})", flush=True)
            s = spark_total(work, args.master)
            spark_runs.append(s)
            print(f"round {round_ + 1}: Spark job {args.master}: {s:.1f} s, {s / c:.2f}x the CLI (load {load()})", flush=True)
        print(f"total: CLI {sum(cli_runs):.1f} s, Spark {sum(spark_runs):.1f} s, "
              f"ratio {sum(spark_runs) / sum(cli_runs):.2f} (best: CLI {min(cli_runs):.1f} s, Spark {min(spark_runs):.1f} s, "
              f"{min(spark_runs) / min(cli_runs):.2f})")
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
