#!/usr/bin/env python3
"""Agreement of sonde's application labels with NFStream's (nDPI's), flow by flow.

usage: nfstream_labels.py [--jobs N] [--flows FLOWS.tsv] [--refused REFUSED.tsv]
                          SONDE_BINARY TRACE... > table.md
       nfstream_labels.py --from-flows FLOWS.tsv [--refused REFUSED.tsv] - > table.md

Run it with a Python that has `nfstream` (6.6.0 was measured; docs/l7.md, "Agreement with nDPI").

For each trace: `sonde analyze` (flow logs as TSV, default timeouts: TCP 300 s, UDP 200 s) and
NFStream (nDPI on, its default 20 packets per flow for dissection, active timeout out of reach,
idle timeout 300 s; when the trace lasts longer than 200 s a second run with 200 s gives the UDP
flows, as sonde's timeouts differ per protocol and NFStream has one). TCP and UDP flows only.

Join: flows are keyed by protocol and the unordered pair of endpoints (either orientation).
sonde's `first` is ms since the epoch with 3 decimals (µs), NFStream's first-seen is truncated to
the ms: a pair is floor(sonde first) within 1 ms of NFStream's (closest first, each flow used
once). A flow left alone on its key in both tools is paired too (NFStream clamps times that step
back, so its first time can be later; docs/nfstream.md).

nDPI's name is reduced to its master protocol (`TLS.Google` -> `TLS`; a name without a dot is
the name) and mapped to sonde's taxonomy by the table of docs/l7.md, section "Labels" (its nDPI
column, read from the file, and checked against `ndpi_name` in crates/sonde-l7/src/label.rs). A
name that table does not have maps to no sonde label. A flow agrees when sonde's label (told by
the payload, or by the port) equals nDPI's mapped one; `unknown` agrees with nDPI's `Unknown`.

Prints markdown: per sonde label and how it was told (payload / port / none), flows, share of all
flows, matched in NFStream, agreeing share, and the commonest nDPI names of the disagreements;
then the totals, a matrix of how each side told its label (nDPI: by payload, guessed, or
Unknown), and the matched flows by kind of disagreement. --flows writes every sonde flow
with its NFStream partner (for sampling the disagreements); --refused the traces NFStream
refused, with its error. --from-flows prints the tables again from those two files (its capture
count then leaves out captures in which sonde had no TCP/UDP flow).
"""
import argparse
import collections
import csv
import json
import math
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs", "l7.md")
LABEL_RS = os.path.join(ROOT, "crates", "sonde-l7", "src", "label.rs")
TCP_IDLE_S, UDP_IDLE_S = 300, 200


def mapping_from_docs(path=DOCS):
    """nDPI name (lower case) -> sonde label, from the nDPI column of docs/l7.md's label table."""
    text = open(path).read()
    section = text.split("\n## Labels", 1)[1].split("\n## ", 1)[0]
    ndpi_to_sonde = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not cells[0].startswith("`"):
            continue
        labels = re.findall(r"`([^`]+)`", cells[0])
        names = [n.strip() for n in cells[3].split(",") if n.strip()]
        if len(labels) != len(names):
            raise SystemExit(f"{path}: label row {line!r}: {len(labels)} labels, {len(names)} nDPI names")
        for label, name in zip(labels, names):
            ndpi_to_sonde.setdefault(name.lower(), label)
    if not ndpi_to_sonde:
        raise SystemExit(f"{path}: no label table found")
    return ndpi_to_sonde


def check_against_rust(ndpi_to_sonde, path=LABEL_RS):
    """The docs' table must be ndpi_name's (label.rs), both ways."""
    if not os.path.exists(path):
        return
    src = open(path).read().split("pub fn ndpi_name", 1)[1].split("\n}\n", 1)[0]
    rust = {label: name for label, name in re.findall(r'"([a-z0-9-]+)" => "([^"]+)"', src)}
    docs = {label: name for name, label in ndpi_to_sonde.items()}
    mism = [(l, rust.get(l), n) for l, n in docs.items() if l != "unknown" and rust.get(l, "").lower() != n]
    mism += [(l, n, None) for l, n in rust.items() if l not in docs]
    if mism:
        raise SystemExit(f"docs/l7.md and label.rs's ndpi_name disagree: {mism}")


def master(name):
    return (name or "Unknown").split(".")[0]


def endpoints(proto, a, ap, b, bp):
    x, y = (a, int(ap)), (b, int(bp))
    return (proto,) + (x + y if x <= y else y + x)


def sonde_flows(binary, trace, out):
    subprocess.run([binary, "analyze", "-r", trace, "-o", out, "--force", "-q", "--threads", "1"],
                   check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    flows, duration = [], 0.0
    try:
        with open(os.path.join(out, "summary.json")) as f:
            duration = float(json.load(f).get("trace_duration_s") or 0.0)
    except (OSError, ValueError):
        pass
    for proto, name in ((6, "tcp_flows.tsv"), (17, "udp_flows.tsv")):
        path = os.path.join(out, name)
        if not os.path.exists(path):
            continue
        with open(path) as f:
            for row in csv.DictReader(f, delimiter="\t"):
                flows.append({
                    "proto": proto, "key": endpoints(proto, row["c_ip"], row["c_port"], row["s_ip"], row["s_port"]),
                    "c": f"{row['c_ip']}:{row['c_port']}", "s": f"{row['s_ip']}:{row['s_port']}",
                    "first": row["first"], "first_ms": math.floor(float(row["first"])),
                    "label": row.get("app") or "unknown", "by_port": row.get("app_by_port") == "1",
                    "tunnel": row.get("tunnel", "-"),
                    "hint": next((row[k] for k in ("c_tls_SNI", "quic_SNI", "http_hostname", "dns_qry", "fqdn")
                                  if row.get(k) not in (None, "", "-")), "-"),
                })
    return flows, duration


def nfstream_flows(trace, duration):
    from nfstream import NFStreamer

    runs = [(TCP_IDLE_S, (6, 17) if duration <= UDP_IDLE_S else (6,))]
    if duration > UDP_IDLE_S:
        runs.append((UDP_IDLE_S, (17,)))
    flows = collections.defaultdict(list)
    for idle, protos in runs:
        streamer = NFStreamer(source=trace, decode_tunnels=True, idle_timeout=idle, active_timeout=10**9,
                              statistical_analysis=False)
        for f in streamer:
            if f.protocol not in protos:
                continue
            key = endpoints(f.protocol, f.src_ip, f.src_port, f.dst_ip, f.dst_port)
            flows[key].append({"first_ms": f.bidirectional_first_seen_ms, "name": f.application_name or "Unknown",
                               "guessed": bool(f.application_is_guessed)})
    return flows


def join(ours, theirs):
    """Pairs (sonde flow, NFStream flow or None)."""
    by_key = collections.defaultdict(list)
    for flow in ours:
        by_key[flow["key"]].append(flow)
    pairs = []
    for key, mine in by_key.items():
        others = list(theirs.get(key, []))
        matched = {}
        cands = sorted((abs(o["first_ms"] - m["first_ms"]), i, j) for i, m in enumerate(mine)
                       for j, o in enumerate(others) if abs(o["first_ms"] - m["first_ms"]) <= 1)
        used = set()
        for _, i, j in cands:
            if i not in matched and j not in used:
                matched[i] = others[j]
                used.add(j)
        left_mine = [i for i in range(len(mine)) if i not in matched]
        left_others = [j for j in range(len(others)) if j not in used]
        if len(left_mine) == 1 and len(left_others) == 1:
            matched[left_mine[0]] = others[left_others[0]]
        pairs += [(m, matched.get(i)) for i, m in enumerate(mine)]
    return pairs


def one_trace(args):
    binary, trace, mapping = args
    with tempfile.TemporaryDirectory(prefix="nfs-labels-") as tmp:
        ours, duration = sonde_flows(binary, trace, os.path.join(tmp, "out"))
    try:
        theirs = nfstream_flows(trace, duration)
    except Exception as e:  # NFStream refuses some link types and formats
        return trace, ours, None, f"{type(e).__name__}: {e}".replace("\n", " ")
    rows = []
    for m, o in join(ours, theirs):
        told = "payload" if m["label"] != "unknown" and not m["by_port"] else ("port" if m["by_port"] else "none")
        row = dict(m, told=told, ndpi="-", ndpi_guessed="-", mapped="-", agree="-")
        if o is not None:
            mapped = mapping.get(master(o["name"]).lower(), "")
            row.update(ndpi=o["name"], ndpi_guessed="1" if o["guessed"] else "0", mapped=mapped or "(none)",
                       agree="1" if mapped == m["label"] else "0")
        rows.append(row)
    return trace, rows, len(ours), None


FLOW_COLUMNS = ["trace", "proto", "c", "s", "first", "label", "told", "tunnel", "hint", "ndpi", "ndpi_guessed",
                "mapped", "agree"]


def kind(r):
    """What sort of disagreement a matched pair is."""
    ndpi_unknown = master(r["ndpi"]) == "Unknown"
    if r["agree"] == "1":
        return "agree"
    if ndpi_unknown:
        return f"sonde `{r['label']}` ({r['told']}), nDPI Unknown"
    if r["label"] == "unknown":
        return ("sonde unknown, nDPI a protocol sonde has a label for" if r["mapped"] != "(none)"
                else "sonde unknown, nDPI a name outside sonde's taxonomy")
    if r["mapped"] == "(none)":
        return f"sonde labelled ({r['told']}), nDPI a name outside sonde's taxonomy"
    return f"sonde labelled ({r['told']}), nDPI another sonde label"


def report(rows, n_traces, refused):
    per = collections.defaultdict(lambda: {"flows": 0, "matched": 0, "agree": 0, "other": collections.Counter()})
    matrix, kinds = collections.Counter(), collections.Counter()
    kind_names = collections.defaultdict(collections.Counter)
    for r in rows:
        cell = per[(r["label"], r["told"])]
        cell["flows"] += 1
        if r["agree"] == "-":
            continue
        cell["matched"] += 1
        ndpi_told = "Unknown" if master(r["ndpi"]) == "Unknown" else (
            "guessed" if r["ndpi_guessed"] == "1" else "payload")
        matrix[(r["told"], ndpi_told, r["agree"])] += 1
        k = kind(r)
        kinds[k] += 1
        if r["agree"] == "1":
            cell["agree"] += 1
        else:
            name = r["ndpi"] + (" (g)" if r["ndpi_guessed"] == "1" else "")
            cell["other"][name] += 1
            kind_names[k][master(r["ndpi"]) if r["label"] != "unknown" or r["mapped"] != "(none)"
                          else r["ndpi"]] += 1

    total = {"flows": 0, "matched": 0, "agree": 0}
    for cell in per.values():
        for k in total:
            total[k] += cell[k]
    pct = lambda x, y: f"{100 * x / y:.1f} %" if y else "-"
    print(f"{n_traces - len(refused)} captures compared ({len(refused)} refused by NFStream, "
          f"{sum(int(n) for _, n, _ in refused)} sonde flows in them left out); "
          f"{total['flows']} sonde flows, {total['matched']} matched in NFStream.\n")
    print("| sonde label | told by | flows | share of flows | matched in NFStream | agree with nDPI | "
          "commonest nDPI names when not ((g): nDPI guessed) |")
    print("|---|---|---:|---:|---:|---:|---|")
    for (label, told) in sorted(per, key=lambda k: (-per[k]["flows"], k)):
        c = per[(label, told)]
        other = ", ".join(f"{n} {k}" for n, k in c["other"].most_common(4))
        print(f"| `{label}` | {told} | {c['flows']} | {pct(c['flows'], total['flows'])} | {c['matched']} | "
              f"{c['agree']} ({pct(c['agree'], c['matched'])}) | {other} |")
    print(f"| **all** | | {total['flows']} | 100 % | {total['matched']} | "
          f"{total['agree']} ({pct(total['agree'], total['matched'])}) | |")
    print("\nMatched flows by how each side told its label (agree / matched):\n")
    cols = ("payload", "guessed", "Unknown")
    print("| sonde \\ nDPI | payload (not guessed) | guessed | Unknown | all |")
    print("|---|---:|---:|---:|---:|")
    for told in ("payload", "port", "none"):
        cells = []
        for col in cols:
            ag, n = matrix[(told, col, "1")], matrix[(told, col, "1")] + matrix[(told, col, "0")]
            cells.append(f"{ag} / {n}")
        ag = sum(matrix[(told, c, "1")] for c in cols)
        n = ag + sum(matrix[(told, c, "0")] for c in cols)
        print(f"| {told} | " + " | ".join(cells) + f" | {ag} / {n} ({pct(ag, n)}) |")
    for told in ("payload", "port"):
        named = [r for r in rows if r["told"] == told and r["agree"] != "-" and master(r["ndpi"]) != "Unknown"
                 and r["mapped"] != "(none)"]
        ag = sum(r["agree"] == "1" for r in named)
        print(f"\nsonde told by {told}, nDPI a name of sonde's taxonomy: {ag} / {len(named)} agree "
              f"({pct(ag, len(named))})", end="")
    print("\n\nMatched flows by kind of (dis)agreement:\n")
    print("| kind | flows | share of matched | commonest nDPI names |")
    print("|---|---:|---:|---|")
    for k, n in kinds.most_common():
        names = ", ".join(f"{x} {c}" for x, c in kind_names[k].most_common(6))
        print(f"| {k} | {n} | {pct(n, total['matched'])} | {names} |")


def main():
    ap = argparse.ArgumentParser(usage=__doc__.split("\n\n")[1])
    ap.add_argument("binary")
    ap.add_argument("traces", nargs="*")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--flows", help="write every sonde flow and its NFStream partner here (TSV)")
    ap.add_argument("--refused", help="write the traces NFStream refused here (TSV)")
    ap.add_argument("--from-flows", help="print the tables again from an earlier run's --flows (and --refused) "
                    "files; BINARY is then ignored, TRACE... is not needed")
    a = ap.parse_args()
    if a.from_flows:
        with open(a.from_flows) as f:
            rows = list(csv.DictReader(f, delimiter="\t"))
        refused = [tuple(l.rstrip("\n").split("\t", 2)) for l in open(a.refused)] if a.refused else []
        n_traces = len({r["trace"] for r in rows} | {t for t, _, _ in refused})
        report(rows, n_traces, refused)
        return
    mapping = mapping_from_docs()
    check_against_rust(mapping)
    rows, refused, done = [], [], 0
    # NFStream starts its own processes: the workers must not be daemonic (a Pool's are).
    with ProcessPoolExecutor(a.jobs) as pool:
        for trace, trows, n, err in pool.map(one_trace, [(a.binary, t, mapping) for t in a.traces]):
            done += 1
            print(f"{done}/{len(a.traces)} {trace}" + (f" refused: {err}" if err else ""), file=sys.stderr)
            if err is not None:
                refused.append((trace, len(trows), err))
                continue
            rows += [dict(r, trace=trace) for r in trows]
    if a.flows:
        with open(a.flows, "w", newline="") as f:
            writer = csv.DictWriter(f, FLOW_COLUMNS, delimiter="\t", extrasaction="ignore", lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)
    if a.refused:
        with open(a.refused, "w") as f:
            for t, n, err in sorted(refused):
                f.write(f"{t}\t{n}\t{err}\n")
    report(rows, len(a.traces), refused)


if __name__ == "__main__":
    main()
