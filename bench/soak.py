#!/usr/bin/env python3
"""The soak's sampler and its check (bench/soak.sh; docs/reliability.md, "Soak").

  soak.py sample --pid PID --http URL --spool DIR --every S --for S --csv FILE
      every S seconds for S seconds: the monitor's resident memory (VmRSS, RssAnon), open
      descriptors, threads, open flows and packets (its /metrics), Kafka messages delivered, IPFIX
      records sent and the spool's bytes and chunks, one CSV row each; with --keep-chunks N, then
      moves away (deletes) the complete files of all chunks but the newest N, as a mover would.
  soak.py check --dir OUT --warmup S --max-slope MB_H --quota Q [--window S]
      reads OUT/soak.csv and what soak.sh left in OUT, draws OUT/soak.svg, prints the report and
      exits 1 if memory grew, descriptors changed, the spool passed its quota, or a packet or
      an exported record is neither delivered nor counted. The memory held between chunks (a
      chunk's flow lines until it is written) is a saw-tooth of the rotation's period, tens of
      MB at 14,000 packets/s, whose phase against the samples makes a least-squares slope over
      every sample wander by several MB/h; with --window S (a few rotations) the slope is
      fitted to the lowest sample of each S seconds, the saw-tooth's floor: what stays.
"""

import argparse
import csv
import json
import os
import re
import sys
import time
import urllib.request

COLUMNS = ["t_s", "rss_mb", "anon_mb", "fds", "threads", "open_flows", "packets", "kafka_delivered",
           "ipfix_records", "spool_bytes", "spool_chunks"]


def status_kb(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def metrics(url):
    """Sums of each family of /metrics, by family and outcome label where there is one."""
    text = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
    sums = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r'([a-z_]+)(\{[^}]*\})?\s+(\S+)', line)
        if not m:
            continue
        name, labels, value = m.group(1), m.group(2) or "", float(m.group(3))
        outcome = re.search(r'outcome="([a-z_]+)"', labels)
        key = name + (":" + outcome.group(1) if outcome else "")
        sums[key] = sums.get(key, 0.0) + value
    return sums


def spool_usage(spool):
    size = chunks = 0
    for root, _, files in os.walk(spool):
        for name in files:
            try:
                size += os.path.getsize(os.path.join(root, name))
            except OSError:
                pass
        chunks += root != spool
    return size, chunks


def move_away(spool, keep):
    """What an operator's mover does: the files the manifest lists (complete, safe to move) of
    every chunk but the newest `keep` are taken away (deleted here)."""
    try:
        lines = open(os.path.join(spool, "manifest.tsv")).read().splitlines()[1:]
    except FileNotFoundError:
        return
    chunks = sorted({line.split("\t")[0] for line in lines})
    for line in lines:
        chunk, name = line.split("\t")[:2]
        if chunk in chunks[:-keep]:
            try:
                os.remove(os.path.join(spool, chunk, name))
            except FileNotFoundError:
                pass
    for chunk in chunks[:-keep]:
        try:
            os.rmdir(os.path.join(spool, chunk))
        except OSError:
            pass


def sample(a):
    start = time.monotonic()
    with open(a.csv, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(COLUMNS)
        while True:
            t = time.monotonic() - start
            try:
                m = metrics(a.http)
            except OSError as e:
                print(f"soak.py: /metrics: {e}", file=sys.stderr)
                m = {}
            try:
                fds = len(os.listdir(f"/proc/{a.pid}/fd"))
                rss, anon, threads = (status_kb(a.pid, k) for k in ("VmRSS", "RssAnon", "Threads"))
            except FileNotFoundError:
                sys.exit("soak.py: the monitor is gone")
            spool_bytes, chunks = spool_usage(a.spool)
            opened, closed = m.get("sonde_flows_opened_total", 0), m.get("sonde_flows_closed_total", 0)
            out.writerow([round(t, 1), round(rss / 1024, 2), round(anon / 1024, 2), fds, threads, int(opened - closed), int(m.get("sonde_packets_total", 0)), int(m.get("sonde_kafka_messages_total:delivered", 0)),
                          int(m.get("sonde_ipfix_records_total:sent", 0)), spool_bytes, chunks])
            f.flush()
            if a.keep_chunks:
                move_away(a.spool, a.keep_chunks)
            if t >= a.seconds:
                return
            time.sleep(max(0.0, min(a.every, a.seconds - t) - (time.monotonic() - start - t)))


def slope_per_hour(xs, ys):
    """Least-squares slope of ys over xs (seconds), per hour."""
    n = len(xs)
    if n < 2:
        return 0.0
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    return 3600 * sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0


def parse_size(text):
    m = re.fullmatch(r"(\d+)([KMG]?)", text.strip().upper())
    return int(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2)]


def svg(rows, path):
    """Three panels over the run's minutes: resident memory, descriptors, open flows."""
    panels = [("rss_mb", "resident MB (VmRSS)"), ("anon_mb", "anonymous MB (RssAnon)"), ("fds", "open descriptors"),
              ("open_flows", "open flows (opened - closed)")]
    w, h, pad = 720, 150, 50
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h * len(panels)}" font-family="sans-serif" font-size="11">']
    t_max = max(float(r["t_s"]) for r in rows) or 1
    for i, (col, title) in enumerate(panels):
        ys = [float(r[col]) for r in rows]
        lo, hi = min(ys), max(ys)
        hi = hi if hi > lo else lo + 1
        y0 = i * h
        pts = " ".join(f"{pad + (w - 2 * pad) * float(r['t_s']) / t_max:.1f},"
                       f"{y0 + h - 25 - (h - 45) * (float(r[col]) - lo) / (hi - lo):.1f}" for r in rows)
        parts.append(f'<text x="{pad}" y="{y0 + 14}">{title}: {lo:g} to {max(ys):g} over {t_max / 60:.0f} min</text>')
        parts.append(f'<line x1="{pad}" y1="{y0 + h - 25}" x2="{w - pad}" y2="{y0 + h - 25}" stroke="#999"/>')
        parts.append(f'<polyline fill="none" stroke="#1f77b4" stroke-width="1.5" points="{pts}"/>')
    parts.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(parts) + "\n")


def check(a):
    rows = list(csv.DictReader(open(os.path.join(a.dir, "soak.csv"))))
    summary = json.load(open(os.path.join(a.dir, "monitor", "summary.json")))
    svg(rows, os.path.join(a.dir, "soak.svg"))
    failures = []
    warm = [r for r in rows if float(r["t_s"]) >= a.warmup]
    xs = [float(r["t_s"]) for r in warm]
    rss_slope = slope_per_hour(xs, [float(r["rss_mb"]) for r in warm])
    anon_slope = slope_per_hour(xs, [float(r["anon_mb"]) for r in warm])
    every_sample = rss_slope
    whole = []
    if a.window > 0:
        floors = {}
        for r in warm:
            w = int((float(r["t_s"]) - a.warmup) // a.window)
            if w not in floors or float(r["rss_mb"]) < float(floors[w]["rss_mb"]):
                floors[w] = r
        # The last window may be cut short (the run's end): its floor would sit higher.
        whole = [floors[w] for w in sorted(floors) if (w + 1) * a.window + a.warmup <= float(rows[-1]["t_s"]) + 1]
    if len(whole) < 2:
        if a.window > 0:
            print(f"fewer than two whole {a.window:.0f} s windows after the warm-up: the slope is over every sample")
        whole = []
    else:
        rss_slope = slope_per_hour([float(r["t_s"]) for r in whole], [float(r["rss_mb"]) for r in whole])
        anon_slope = slope_per_hour([float(r["t_s"]) for r in whole], [float(r["anon_mb"]) for r in whole])
    fds = [int(r["fds"]) for r in warm]
    hours = float(rows[-1]["t_s"]) / 3600
    p = summary["packets"]
    cap = summary.get("capture") or {}
    print(f"run: {hours:.2f} h wall, {p['read']:,} packets read, {summary['flows']['tcp'] + summary['flows']['udp']:,} "
          f"TCP and UDP flows; samples {len(rows)} (after the {a.warmup:.0f} s warm-up: {len(warm)})")
    print(f"memory after the warm-up: VmRSS {min(float(r['rss_mb']) for r in warm):.1f}-{max(float(r['rss_mb']) for r in warm):.1f} MB, "
          f"slope over every sample {every_sample:+.2f} MB/h")
    if whole:
        print(f"memory's floor (the lowest sample of each {a.window:.0f} s, {len(whole)} windows): VmRSS "
              f"{min(float(r['rss_mb']) for r in whole):.1f}-{max(float(r['rss_mb']) for r in whole):.1f} MB")
    print(f"judged slope{' (floor)' if whole else ''}: VmRSS {rss_slope:+.2f} MB/h, RssAnon {anon_slope:+.2f} MB/h "
          f"(limit {a.max_slope} MB/h)")
    if rss_slope > a.max_slope:
        failures.append(f"resident memory grows {rss_slope:.2f} MB/h")
    print(f"descriptors after the warm-up: {min(fds)}-{max(fds)}")
    if max(fds) - min(fds) > 2:
        failures.append(f"descriptors moved from {min(fds)} to {max(fds)}")
    quota = parse_size(a.quota)
    spool_max = max(int(r["spool_bytes"]) for r in rows)
    spool = summary.get("spool") or {}
    print(f"spool: at most {spool_max:,} bytes of a {quota:,} quota; {spool.get('chunks', 0)} chunks, "
          f"{spool.get('over_quota_chunks', 0)} over quota, {spool.get('failed_chunks', 0)} failed")
    if spool_max > quota or spool.get("failed_chunks", 0):
        failures.append("the spool passed its quota or lost a chunk")
    received, dropped, unread = (cap.get(k, 0) for k in ("received_pkts", "dropped_pkts", "unread_pkts"))
    sent = None
    replay = open(os.path.join(a.dir, "tcpreplay.out")).read()
    m = re.search(r"Actual: (\d+) packets", replay)
    if m:
        sent = int(m.group(1))
    print(f"packets: tcpreplay sent {sent if sent is not None else '?'}, the socket was offered {received:,}, "
          f"read {p['read']:,}, dropped {dropped:,}, unread at the stop {unread:,}")
    if p["read"] + dropped + unread != received:
        failures.append("read + dropped + unread != offered")
    if sent is not None and sent != received:
        failures.append(f"{sent - received} packets sent were never offered to the socket")
    k = summary.get("kafka") or {}
    offsets = 0
    try:
        for line in open(os.path.join(a.dir, "kafka-offsets.txt")):
            topic, _, end = line.strip().rpartition(":")
            if topic and not topic.startswith("__"):
                offsets += int(end)
    except FileNotFoundError:
        pass
    print(f"kafka: {k.get('sent', 0):,} sent, {k.get('delivered', 0):,} delivered, {k.get('dropped_queue_full', 0):,} "
          f"dropped (queue full), {k.get('failed', 0):,} failed; the broker holds {offsets:,}")
    if k.get("sent", 0) != k.get("delivered", 0) + k.get("dropped_queue_full", 0) + k.get("failed", 0) \
            or offsets != k.get("delivered", 0) or not k.get("sent"):
        failures.append("a Kafka message is neither at the broker nor counted")
    x = summary.get("ipfix") or {}
    collected = int(open(os.path.join(a.dir, "nfdump-records.txt")).read().strip() or 0)
    print(f"ipfix: {x.get('records', 0):,} records sent in {x.get('messages', 0):,} messages, "
          f"{x.get('dropped_records', 0):,} dropped, {x.get('failed_records', 0):,} failed; nfcapd holds {collected:,}")
    if collected != x.get("records", 0) or not collected:
        failures.append("an IPFIX record sent is not at nfcapd")
    for f in failures:
        print(f"FAILED: {f}")
    print("soak: " + ("passed" if not failures else "failed"))
    sys.exit(1 if failures else 0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("sample")
    s.add_argument("--pid", type=int, required=True)
    s.add_argument("--http", required=True)
    s.add_argument("--spool", required=True)
    s.add_argument("--every", type=float, default=60)
    s.add_argument("--for", dest="seconds", type=float, required=True)
    s.add_argument("--csv", required=True)
    s.add_argument("--keep-chunks", type=int, default=0, help="move away all but the newest N chunks (0: none)")
    c = sub.add_parser("check")
    c.add_argument("--dir", required=True)
    c.add_argument("--warmup", type=float, default=0)
    c.add_argument("--max-slope", type=float, default=1.0)
    c.add_argument("--quota", default="64M")
    c.add_argument("--window", type=float, default=0,
                   help="fit the slope to the lowest sample of each WINDOW seconds (0: every sample)")
    a = ap.parse_args()
    sample(a) if a.cmd == "sample" else check(a)


if __name__ == "__main__":
    main()
