#!/usr/bin/env python3
"""N simulated sonde probes publishing contract-1 contributions to a real Kafka broker, as
`sonde monitor --kafka` does (docs/kafka.md, "Intervals", "Histograms", "Merging"), for the
Spark merge's scaling measurements (bench/merge-scaling.py, docs/spark.md "Scaling: the load
generator").

    bench/merge-load.py --kafka 127.0.0.1:9092 --probes 1000 --live --interval 1 --duration 60
    bench/merge-load.py --kafka 127.0.0.1:9092 --probes 1000 --backlog 30 --expect expected.json

What a probe sends is a real probe's: the generator runs `sonde analyze --interval 1` on a trace
(default: the shared corpus' groundtruth/mixed.pcap, else testdata/demo.pcap) and takes each
second of its intervals.tsv, quantiles.tsv and histograms.tsv as a *slot*: its (proto, net)
counter rows and its (metric, dir, net) distributions with their unit, count, min, max and
non-empty bins, bin edges as the file writes them (sonde's real bin edges). For each interval,
a probe takes one slot (chosen by a seeded generator from the probe, the interval and --seed)
and a multiplier m in {1, 1, 2, 3}: the counters and every bin's count times m (the min and max
stay, so the distribution is still one sonde could make). The sum of a distribution, which
the files give only as a rounded mean, is `round(mean × count)` in the metric's base unit (ns
for ms, ppm for %), kept within count × [min, max], times m.

Messages are written as sonde writes them: the probe id first, `start`/`end` with six
decimals, ms values with 6 decimals, % with 4, the others whole; key = the probe id; topics
`sonde-intervals` and `sonde-histograms`. As a live probe does, a share of the interval rows
(--late-share) publish their flow counters (flows_opened/closed/active, packets 0) in a
second message at the probe's next publication (a flow that ended later); everything else is
published once per interval.

Modes:
  --live       each probe publishes its interval at the interval's end plus its own delay
               (0.05–0.5 s, as a monitor publishes at its first drain after the end); packet time
               = wall time; for --duration seconds.
  --backlog K  K intervals per probe as fast as possible, packet time from --epoch (for
               throughput runs from a preloaded topic), interval by interval, all probes each.

At the end it prints one JSON line (messages, bytes, seconds, publish rate, delivery errors)
and, with --expect FILE, writes the merged sums the job must reach: totals (packets, bytes,
flows, histogram counts) and each key's sums (intervals: start, proto, net and the counters;
distributions: start, metric, dir, net, unit, count, sum, min, max in base units), and in live
mode each interval's last publication time.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from decimal import Decimal
from pathlib import Path
from typing import Dict, List, Optional, Tuple

REPO = Path(__file__).resolve().parents[1]
SCALE = {"ms": 1_000_000, "%": 10_000}
COUNTERS = ("packets", "bytes", "flows_opened", "flows_closed", "flows_active")
FLOW_COUNTERS = ("flows_opened", "flows_closed", "flows_active")
MULTIPLIERS = (1, 1, 2, 3)


def default_trace() -> Path:
    shared = Path(os.environ.get("SONDE_SHARED", REPO.parent / "shared")) / "groundtruth" / "mixed.pcap"
    return shared if shared.is_file() else REPO / "testdata" / "demo.pcap"


def sonde_bin() -> str:
    given = os.environ.get("SONDE_BIN")
    for c in ([given] if given else []) + [str(REPO / "target/release/sonde"), str(REPO / "target/debug/sonde")]:
        if c and Path(c).is_file():
            return c
    found = shutil.which("sonde")
    if found:
        return found
    sys.exit("merge-load: no sonde binary (SONDE_BIN, target/release/sonde or target/debug/sonde)")


def tsv(path: Path) -> List[Dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def fmt_value(base: int, unit: str) -> str:
    """A base-unit integer as sonde writes it in `unit` (sonde-stats Unit::format, push_sum)."""
    if unit == "ms":
        return f"{base // 1_000_000}.{base % 1_000_000:06d}"
    if unit == "%":
        return f"{base // 10_000}.{base % 10_000:04d}"
    return str(base)


def to_base(text: str, unit: str) -> int:
    v = Decimal(text) * SCALE.get(unit, 1)
    assert v == v.to_integral_value(), f"{text} {unit}: not a whole base unit"
    return int(v)


class Slot:
    """One second of a real analysis: its interval rows and distributions, and each message's
    text after `"end":…` pre-rendered for every multiplier."""

    def __init__(self, rows: List[Dict[str, str]], dists: List[Tuple[Dict[str, str], List[Tuple[str, str, int]]]]):
        self.rows = []  # (proto, net, counters tuple)
        for r in rows:
            self.rows.append((r["proto"], r["net"], tuple(int(r[c]) for c in COUNTERS)))
        self.dists = []  # (metric, dir, net, unit, count, sum_base, min_base, max_base, [(lo_text, hi_text, n)])
        for q, bins in dists:
            unit = q["unit"]
            count = int(q["count"])
            assert sum(n for _, _, n in bins) == count, f"bins do not add up: {q}"
            lo_v, hi_v = to_base(q["min"], unit), to_base(q["max"], unit)
            total = int((Decimal(q["mean"]) * count * SCALE.get(unit, 1)).to_integral_value())
            total = min(max(total, lo_v * count), hi_v * count)
            self.dists.append((q["metric"], q["dir"], q["net"], unit, count, total, lo_v, hi_v, bins))
        self.interval_tail: Dict[int, List[Tuple[Tuple, str, str]]] = {}
        self.hist_tail: Dict[int, List[str]] = {}
        for m in set(MULTIPLIERS):
            self.interval_tail[m] = []
            for proto, net, c in self.rows:
                c = tuple(x * m for x in c)
                full = (f',"proto":"{proto}","net":"{net}","packets":{c[0]},"bytes":{c[1]},"flows_opened":{c[2]},'
                        f'"flows_closed":{c[3]},"flows_active":{c[4]}}}')
                packets_only = (f',"proto":"{proto}","net":"{net}","packets":{c[0]},"bytes":{c[1]},"flows_opened":0,'
                                f'"flows_closed":0,"flows_active":0}}')
                flows_only = (f',"proto":"{proto}","net":"{net}","packets":0,"bytes":0,"flows_opened":{c[2]},'
                              f'"flows_closed":{c[3]},"flows_active":{c[4]}}}')
                # Split only a row with packets and flows: a message whose counters are all 0 is not sent.
                split = any(c[2:]) and any(c[:2])
                self.interval_tail[m].append((c, full, packets_only if split else None, flows_only))
            self.hist_tail[m] = []
            for metric, d, net, unit, count, total, lo_v, hi_v, bins in self.dists:
                b = ",".join(f"[{lo},{hi},{n * m}]" for lo, hi, n in bins)
                self.hist_tail[m].append(
                    f',"metric":"{metric}","dir":"{d}","net":"{net}","unit":"{unit}","count":{count * m},'
                    f'"sum":{fmt_value(total * m, unit)},"min":{fmt_value(lo_v, unit)},"max":{fmt_value(hi_v, unit)},'
                    f'"bins":[{b}]}}')


def load_slots(trace: Path, internal: str, template: Optional[Path]) -> List[Slot]:
    """The slots of `sonde analyze --interval 1` of `trace` (or of an analysis already in `template`)."""
    tmp = None
    if template is None:
        tmp = tempfile.mkdtemp(prefix="merge-load-")
        template = Path(tmp)
        cmd = [sonde_bin(), "analyze", "-q", "--force", "-r", str(trace), "-o", str(template), "--interval", "1"]
        if internal:
            cmd += ["--internal", internal]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode not in (0, 3):
            sys.exit(f"merge-load: {' '.join(cmd)}: {done.stderr.strip()}")
    try:
        rows = defaultdict(list)
        for r in tsv(template / "intervals.tsv"):
            rows[r["start"]].append(r)
        bins = defaultdict(list)
        for r in tsv(template / "histograms.tsv"):
            bins[(r["start"], r["metric"], r["dir"], r["net"])].append((r["bin_lo"], r["bin_hi"], int(r["count"])))
        dists = defaultdict(list)
        for q in tsv(template / "quantiles.tsv"):
            dists[q["start"]].append((q, bins[(q["start"], q["metric"], q["dir"], q["net"])]))
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    slots = [Slot(rows[s], dists.get(s, [])) for s in sorted(rows, key=float)]
    if not slots:
        sys.exit(f"merge-load: no interval in the analysis of {trace}")
    return slots


class Expect:
    """The sums the merged view must reach."""

    def __init__(self) -> None:
        self.intervals: Dict[Tuple[float, str, str], List[int]] = {}
        self.dists: Dict[Tuple[float, str, str, str], list] = {}
        self.published_at: Dict[float, float] = {}

    def add_row(self, start: float, proto: str, net: str, c: Tuple[int, ...]) -> None:
        row = self.intervals.setdefault((start, proto, net), [0] * 5)
        for i, v in enumerate(c):
            row[i] += v

    def add_dist(self, start: float, d: tuple, m: int) -> None:
        metric, dr, net, unit, count, total, lo_v, hi_v, _ = d
        e = self.dists.get((start, metric, dr, net))
        if e is None:
            self.dists[(start, metric, dr, net)] = [unit, count * m, total * m, lo_v, hi_v]
        else:
            e[1] += count * m
            e[2] += total * m
            e[3] = min(e[3], lo_v)
            e[4] = max(e[4], hi_v)

    def write(self, path: Path, head: dict) -> None:
        totals = {c: sum(r[i] for r in self.intervals.values()) for i, c in enumerate(COUNTERS)}
        totals["histogram_count"] = sum(d[1] for d in self.dists.values())
        doc = {**head, "totals": totals,
               "interval_keys": len(self.intervals), "distribution_keys": len(self.dists),
               "intervals": [[s, p, n, *c] for (s, p, n), c in sorted(self.intervals.items())],
               "distributions": [[s, m, d, n, *v] for (s, m, d, n), v in sorted(self.dists.items())],
               "published_at": sorted(self.published_at.items())}
        tmp = path.with_name("." + path.name + ".tmp")
        tmp.write_text(json.dumps(doc))
        tmp.rename(path)


class Probes:
    """The simulated probes' messages: probe i's interval k (its start) from a seeded choice."""

    def __init__(self, slots: List[Slot], n: int, prefix: str, seed: int, late_share: float, interval: float):
        self.slots = slots
        self.ids = [f"{prefix}{i:05d}" for i in range(n)]
        self.heads = [f'{{"probe":"{p}","start":' for p in self.ids]
        self.seed = seed
        self.late_share = late_share
        self.interval = interval
        self.deferred: List[List[Tuple[float, str]]] = [[] for _ in range(n)]  # per probe: (start, text) for next time
        r = random.Random(seed)
        self.delay = [0.05 + 0.45 * r.random() for _ in range(n)]  # a live probe's drain after the end

    def messages(self, i: int, start: float, expect: Optional[Expect]) -> Tuple[List[str], List[str]]:
        """Probe i's interval at `start`: (interval messages, histogram messages), with what it
        deferred from its previous interval first."""
        r = random.Random(self.seed * 1_000_003 + i * 7_919 + int(round(start * 1000)))
        slot = self.slots[r.randrange(len(self.slots))]
        m = MULTIPLIERS[r.randrange(len(MULTIPLIERS))]
        head = self.heads[i]
        span = f"{head}{start:.6f},\"end\":{start + self.interval:.6f}"
        ints = [f"{self.heads[i]}{s:.6f},\"end\":{s + self.interval:.6f}{t}" for s, t in self.deferred[i]]
        self.deferred[i] = []
        for (proto, net, _), (c, full, packets_only, flows_only) in zip(slot.rows, slot.interval_tail[m]):
            if packets_only is not None and r.random() < self.late_share:
                ints.append(span + packets_only)
                self.deferred[i].append((start, flows_only))
            else:
                ints.append(span + full)
            if expect is not None:
                expect.add_row(start, proto, net, c)
        hists = [span + t for t in slot.hist_tail[m]]
        if expect is not None:
            for d in slot.dists:
                expect.add_dist(start, d, m)
        return ints, hists

    def flush_deferred(self, i: int) -> List[str]:
        out = [f"{self.heads[i]}{s:.6f},\"end\":{s + self.interval:.6f}{t}" for s, t in self.deferred[i]]
        self.deferred[i] = []
        return out


class Publisher:
    def __init__(self, brokers: str, interval_topic: str, histogram_topic: str, options: List[str]):
        try:
            from confluent_kafka import Producer
        except ImportError:
            sys.exit("merge-load: needs confluent-kafka (.venv/bin/pip install 'confluent-kafka==2.16.*')")
        conf = {"bootstrap.servers": brokers, "enable.idempotence": True, "acks": "all", "linger.ms": 20,
                "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 1_048_576,
                "batch.num.messages": 10_000, "compression.type": "none"}
        for o in options:
            k, _, v = o.partition("=")
            conf[k] = v
        self.producer = Producer(conf)
        self.topics = (interval_topic, histogram_topic)
        self.sent = 0
        self.bytes = 0
        self.delivered = 0
        self.failed = 0
        self.last_error: Optional[str] = None

    def _report(self, err, _msg) -> None:
        if err is None:
            self.delivered += 1
        else:
            self.failed += 1
            self.last_error = str(err)

    def send(self, key: str, ints: List[str], hists: List[str]) -> None:
        for topic, texts in ((self.topics[0], ints), (self.topics[1], hists)):
            if not topic:
                continue
            for t in texts:
                while True:
                    try:
                        self.producer.produce(topic, t.encode(), key.encode(), on_delivery=self._report)
                        break
                    except BufferError:
                        self.producer.poll(0.05)
                self.sent += 1
                self.bytes += len(t)
        self.producer.poll(0)

    def flush(self) -> int:
        return self.producer.flush(120)


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--kafka", required=True, metavar="BROKERS")
    ap.add_argument("--probes", type=int, default=100, help="simulated probes (default 100)")
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--live", action="store_true", help="one interval per --interval of wall time, for --duration")
    mode.add_argument("--backlog", type=int, metavar="K", help="K intervals per probe as fast as possible")
    ap.add_argument("--interval", type=float, default=1.0, metavar="SECS", help="the probes' interval (default 1)")
    ap.add_argument("--duration", type=float, default=60.0, metavar="SECS", help="--live: how long (default 60)")
    ap.add_argument("--epoch", type=float, default=1795300000.0, help="--backlog: the first interval's start")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--probe-prefix", default="sim", help="probe ids PREFIX00000… (default sim)")
    ap.add_argument("--late-share", type=float, default=0.1,
                    help="share of interval rows with flows whose flow counters come a publication later (default 0.1)")
    ap.add_argument("--trace", type=Path, default=None, help="the trace whose analysis the probes replay "
                    "(default ../shared/groundtruth/mixed.pcap, else testdata/demo.pcap)")
    ap.add_argument("--internal", default="10.77.0.1/32", help="the analysis' --internal (default 10.77.0.1/32)")
    ap.add_argument("--template", type=Path, help="a directory with an `sonde analyze --interval 1` output instead")
    ap.add_argument("--interval-topic", default="sonde-intervals")
    ap.add_argument("--histogram-topic", default="sonde-histograms")
    ap.add_argument("--kafka-option", action="append", default=[], metavar="KEY=VALUE", help="a librdkafka property")
    ap.add_argument("--expect", type=Path, metavar="FILE", help="write the expected merged sums (JSON) here")
    args = ap.parse_args()

    trace = args.trace or default_trace()
    slots = load_slots(trace, args.internal, args.template)
    probes = Probes(slots, args.probes, args.probe_prefix, args.seed, args.late_share, args.interval)
    pub = Publisher(args.kafka, args.interval_topic, args.histogram_topic, args.kafka_option)
    expect = Expect() if args.expect else None
    per_slot = sum(len(s.rows) + len(s.dists) for s in slots) / len(slots)
    print(f"merge-load: {args.probes} probes from {trace.name if args.template is None else args.template} "
          f"({len(slots)} slots, {per_slot:.1f} messages a probe-interval) -> {args.kafka}", file=sys.stderr)

    behind: List[float] = []  # live: how late each publication round started, s
    t0 = time.time()
    if args.backlog is not None:
        for k in range(args.backlog):
            start = args.epoch + k * args.interval
            for i, p in enumerate(probes.ids):
                ints, hists = probes.messages(i, start, expect)
                pub.send(p, ints, hists)
        for i, p in enumerate(probes.ids):
            pub.send(p, probes.flush_deferred(i), [])
    else:
        order = sorted(range(args.probes), key=lambda i: probes.delay[i])
        end_at = t0 + args.duration
        # The first whole interval that ends after now + its publication's delay.
        tick = (int(t0 // args.interval) + 1) * args.interval
        while tick <= end_at:
            start = tick - args.interval
            late = 0.0
            for i in order:
                due = tick + probes.delay[i]
                now = time.time()
                if due > now:
                    pub.producer.poll(min(due - now, 0.05))
                    while time.time() < due:
                        pub.producer.poll(max(0.0, min(due - time.time(), 0.05)))
                else:
                    late = max(late, now - due)
                ints, hists = probes.messages(i, start, expect)
                pub.send(probes.ids[i], ints, hists)
            if expect is not None:
                expect.published_at[start] = time.time()
            behind.append(late)
            tick += args.interval
        for i in order:  # a monitor's end: the flows' counters it still held
            pub.send(probes.ids[i], probes.flush_deferred(i), [])
    sent_s = time.time() - t0
    left = pub.flush()
    seconds = time.time() - t0
    report = {"probes": args.probes, "mode": "live" if args.live else "backlog", "interval_s": args.interval,
              "messages": pub.sent, "bytes": pub.bytes, "delivered": pub.delivered, "failed": pub.failed + left,
              "last_error": pub.last_error, "seconds": round(seconds, 3), "enqueue_seconds": round(sent_s, 3),
              "messages_per_s": round(pub.sent / seconds, 1) if seconds > 0 else None,
              "mb_per_s": round(pub.bytes / seconds / 1e6, 2) if seconds > 0 else None}
    if behind:
        report["rounds"] = len(behind)
        report["behind_schedule_max_s"] = round(max(behind), 3)
        report["behind_schedule_mean_s"] = round(sum(behind) / len(behind), 3)
    if expect is not None:
        expect.write(args.expect, {"report": report, "trace": str(trace), "seed": args.seed,
                                   "interval_s": args.interval, "probes": probes.ids[:3] + ["…"]})
    print(json.dumps(report))
    return 0 if report["failed"] == 0 and pub.delivered == pub.sent else 1


if __name__ == "__main__":
    sys.exit(main())
