"""Benchmarks of the Python package (not a test; numbers go to docs/python.md).

1. `sonde.analyze` into pyarrow tables against `sonde analyze` writing its TSV outputs, on a
   bench trace (../shared/tools/mergetrace/make-bench-trace.sh builds a 1.2 M-packet one): the
   best of N runs each, same threads.
2. `sonde.stream` over a ~2 GB trace (made in /tmp from the bench trace by concatenating
   copies shifted in time, so every flow of a copy times out before the next begins): peak RSS
   of the process, and RSS sampled while it goes (it should stay flat).

    .venv/bin/python python/bench.py --trace /tmp/bench.pcap [--big /tmp/sonde-2g.pcap] [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def cli_seconds(trace: Path, threads: int) -> float:
    with tempfile.TemporaryDirectory() as out:
        started = time.perf_counter()
        subprocess.run([str(REPO / "target/release/sonde"), "analyze", "-q", "--force", "-r", str(trace),
                        "-o", out, "--threads", str(threads)], check=False)
        return time.perf_counter() - started


def python_seconds(trace: Path, threads: int) -> float:
    # In a fresh process each time, as the CLI is, importing pyarrow and sonde outside the timing.
    code = ("import sys, time, sonde, pyarrow\n"
            "t = time.perf_counter(); r = sonde.analyze(sys.argv[1], threads=int(sys.argv[2]), strict=False)\n"
            "print(time.perf_counter() - t, r.tcp.num_rows + r.udp.num_rows)")
    done = subprocess.run([sys.executable, "-c", code, str(trace), str(threads)], capture_output=True, text=True,
                          check=True)
    seconds, flows = done.stdout.split()
    return float(seconds)


def concatenated(source: Path, out: Path, target_bytes: int) -> None:
    """`source` (a µs little-endian pcap, as mergetrace writes) repeated until `target_bytes`,
    each copy shifted past the last one's end plus an hour (every flow has timed out by then)."""
    data = source.read_bytes()
    header, body = data[:24], data[24:]
    assert header[:4] == b"\xd4\xc3\xb2\xa1", "a little-endian µs pcap"
    first = last = None
    offsets = []
    i = 0
    while i + 16 <= len(body):
        sec, usec, incl, _ = struct.unpack_from("<IIII", body, i)
        first = sec if first is None else first
        last = sec
        offsets.append(i)
        i += 16 + incl
    span = last - first + 3600
    copies = max(1, target_bytes // len(body))
    with open(out, "wb") as f:
        f.write(header)
        for c in range(copies):
            chunk = bytearray(body)
            for off in offsets:
                sec = struct.unpack_from("<I", chunk, off)[0]
                struct.pack_into("<I", chunk, off, sec + c * span)
            f.write(chunk)


def rss_kb(pid: int) -> tuple:
    """(anonymous, file-backed) resident KiB: the trace is memory-mapped, so its pages read so far
    count in RSS as file-backed (page cache the kernel may drop), apart from the run's own memory."""
    fields = {}
    for line in open(f"/proc/{pid}/status"):
        key, _, rest = line.partition(":")
        if key in ("RssAnon", "RssFile"):
            fields[key] = int(rest.split()[0])
    return fields.get("RssAnon", 0), fields.get("RssFile", 0)


def stream_memory(trace: Path, threads: int) -> None:
    code = ("import sys, sonde\n"
            "n = 0\n"
            "s = sonde.stream(sys.argv[1], threads=int(sys.argv[2]), strict=False)\n"
            "for b in s: n += b.batch.num_rows\n"
            "import resource\n"
            "print(n, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
    started = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-c", code, str(trace), str(threads)], stdout=subprocess.PIPE, text=True)
    samples = []

    def sample():
        while child.poll() is None:
            try:
                samples.append((time.perf_counter() - started, rss_kb(child.pid)))
            except OSError:
                break
            time.sleep(0.25)

    sampler = threading.Thread(target=sample)
    sampler.start()
    out, _ = child.communicate()
    sampler.join()
    flows, peak_kb = out.split()
    elapsed = time.perf_counter() - started
    size = trace.stat().st_size
    peak_anon = max((a for _, (a, _) in samples), default=0)
    print(f"stream: {size / 1e9:.2f} GB, {int(flows):,} flows in {elapsed:.1f} s; peak RSS {int(peak_kb) / 1024:.0f} MiB "
          f"(ru_maxrss, with the mapped trace's pages); peak anonymous RSS {peak_anon / 1024:.0f} MiB")
    step = max(1, len(samples) // 12)
    print("  RSS while streaming (s: anonymous + file-backed MiB): "
          + ", ".join(f"{t:.1f}: {a / 1024:.0f}+{f / 1024:.0f}" for t, (a, f) in samples[::step]))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trace", type=Path, required=True, help="the bench trace")
    p.add_argument("--big", type=Path, default=Path("/tmp/sonde-2g.pcap"), help="the ~2 GB trace (made if absent)")
    p.add_argument("--big-bytes", type=float, default=2e9)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--skip-stream", action="store_true")
    a = p.parse_args()

    cli = min(cli_seconds(a.trace, a.threads) for _ in range(a.runs))
    py = min(python_seconds(a.trace, a.threads) for _ in range(a.runs))
    print(f"analyze {a.trace.name} ({a.trace.stat().st_size / 1e6:.0f} MB, {a.threads} threads, best of {a.runs}): "
          f"CLI to TSV {cli:.2f} s, Python to pyarrow {py:.2f} s ({(py / cli - 1) * 100:+.1f} %)")
    if a.skip_stream:
        return
    if not a.big.exists():
        print(f"making {a.big} from {a.trace}…")
        concatenated(a.trace, a.big, int(a.big_bytes))
    stream_memory(a.big, a.threads)


if __name__ == "__main__":
    main()
