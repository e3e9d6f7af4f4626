#!/usr/bin/env python3
"""sonde against NFStream, flows per second on one trace in the same run (issue 17's target:
sonde ≥ 20× NFStream's flows per second with TCP metrics on).

usage: bench/nfstream_speed.py [TRACE] [--reps N] [--sonde BIN]

TRACE defaults to /tmp/sonde-bench/bench.pcap (made by
../shared/tools/mergetrace/make-bench-trace.sh). Three rows, run round-robin REPS times (3 by
default) so that a busy minute on this shared machine slows every row alike; the table gives
medians:

- sonde: `sonde analyze -r TRACE -o OUT --force -q`, default threads. Its TCP metrics (RTT,
  retransmissions, windows...) are always on.
- nfstream stats: NFStreamer(statistical_analysis=True, n_dissections=0), NFStream's closest to
  "TCP metrics on" (packet size and inter-arrival statistics, TCP flag counts); default meters.
- nfstream basic: the same with statistical_analysis=False (NFStream at its fastest).

Wall time is measured around each run; CPU time is user + sys of the run's whole process tree
(NFStream's meter processes included) from getrusage(RUSAGE_CHILDREN). Flows are what each
tool wrote or yielded. The ratios divide sonde's flows per second by NFStream's, per wall
second and per CPU second.
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_TRACE = Path("/tmp/sonde-bench/bench.pcap")


def nfstream_child(trace, stats):
    """Runs in a child process, so that its CPU time (and its meters') is measured apart."""
    from nfstream import NFStreamer

    streamer = NFStreamer(source=trace, statistical_analysis=stats, n_dissections=0)
    print(sum(1 for _ in streamer))


def timed(cmd):
    """(wall s, CPU s, stdout) of CMD; CPU is user + sys of it and every descendant waited for."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, out


def sonde_flows(out_dir):
    """Flows sonde wrote: the rows of its two flow logs."""
    rows = 0
    for name in ("tcp_flows.tsv", "udp_flows.tsv"):
        with open(out_dir / name) as fh:
            rows += sum(1 for _ in fh) - 1  # header line
    return rows


def run_sonde(sonde, trace, work):
    out = work / "sonde-out"
    wall, cpu, _ = timed([str(sonde), "analyze", "-r", str(trace), "-o", str(out), "--force", "-q"])
    return wall, cpu, sonde_flows(out)


def run_nfstream(trace, stats):
    cmd = [sys.executable, __file__, "--nfstream-child", str(trace), "--stats", str(int(stats))]
    wall, cpu, out = timed(cmd)
    return wall, cpu, int(out.strip())


ROWS = {
    "sonde": lambda a, w: run_sonde(a.sonde, a.trace, w),
    "nfstream stats": lambda a, w: run_nfstream(a.trace, True),
    "nfstream basic": lambda a, w: run_nfstream(a.trace, False),
}


def measure(args):
    """{row: [(wall, cpu, flows)] * reps}, round-robin."""
    runs = {row: [] for row in ROWS}
    with tempfile.TemporaryDirectory(prefix="sonde-nfs-bench.") as tmp:
        subprocess.run(["cat", str(args.trace)], stdout=subprocess.DEVNULL, check=True)  # cache
        for rep in range(args.reps):
            for row, run in ROWS.items():
                runs[row].append(run(args, Path(tmp)))
                print(f"rep {rep + 1} {row}: {runs[row][-1]}", file=sys.stderr)
    return runs


def medians(runs):
    out = {}
    for row, samples in runs.items():
        wall = statistics.median(s[0] for s in samples)
        cpu = statistics.median(s[1] for s in samples)
        flows = samples[0][2]
        assert all(s[2] == flows for s in samples), f"{row}: flows differ between runs"
        out[row] = dict(flows=flows, wall=wall, cpu=cpu, fps=flows / wall, fpcpu=flows / cpu)
    return out


def report(args, m):
    load = os.getloadavg()[0]
    print(f"{time.strftime('%Y-%m-%d %H:%M')} UTC, trace {args.trace} "
          f"({args.trace.stat().st_size / 1e6:.0f} MB), {args.reps} runs each, "
          f"nproc {os.cpu_count()}, load {load:.1f}\n")
    print("| row | flows | wall s | CPU s | flows/s | flows per CPU s | sonde ÷ row (flows/s) "
          "| sonde ÷ row (per CPU s) |")
    print("|---|---|---|---|---|---|---|---|")
    s = m["sonde"]
    for row, r in m.items():
        ratio = f"{s['fps'] / r['fps']:.1f}×" if row != "sonde" else ""
        ratio_cpu = f"{s['fpcpu'] / r['fpcpu']:.1f}×" if row != "sonde" else ""
        print(f"| {row} | {r['flows']} | {r['wall']:.2f} | {r['cpu']:.2f} | {r['fps']:,.0f} "
              f"| {r['fpcpu']:,.0f} | {ratio} | {ratio_cpu} |")
    target = s["fps"] / m["nfstream stats"]["fps"]
    print(f"\nTarget (≥ 20× NFStream's flows/s with TCP metrics on, same run, same trace): "
          f"{target:.1f}× — {'reached' if target >= 20 else 'NOT reached'}")
    if args.json:
        Path(args.json).write_text(json.dumps(m, indent=1))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("trace", nargs="?", type=Path, default=DEFAULT_TRACE)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--sonde", type=Path,
                   default=Path(os.environ.get("SONDE_BIN", REPO / "target/release/sonde")))
    p.add_argument("--json", help="also write the medians to this file")
    p.add_argument("--nfstream-child", help=argparse.SUPPRESS)
    p.add_argument("--stats", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.nfstream_child:
        return nfstream_child(args.nfstream_child, bool(args.stats))
    if not args.trace.is_file():
        sys.exit(f"{args.trace}: no such trace; make it with "
                 "../shared/tools/mergetrace/make-bench-trace.sh")
    report(args, medians(measure(args)))


if __name__ == "__main__":
    main()
