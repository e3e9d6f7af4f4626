#!/usr/bin/env bash
# The side-by-side table of docs/performance.md: sonde and the peers on two mixes of the real
# captures, the flood-heavy one (flood.pcap) and the clean-sessions one (clean.pcap), both made
# by bench/make-traces.sh. Each trace is measured by bench/compare.sh (the tools interleaved,
# REPS rounds, medians, page cache warm); this script sums the two up in one table: packets
# per CPU second of each tool, the all-cores wall rate against one worker's, and sonde against
# softflowd and the bare flow meter (bench/floor.c) measured in the same run.
#
# usage: bench/compare-traces.sh [REPS]          (REPS defaults to 5)
# env:   OUT=/tmp/sonde-bench   where the traces are (made if missing)
#        SONDE=path/to/sonde    binary to measure (default: build the release binary)
#        TOOLS="floor sonde1 sondeN softflowd nfpcapd"   (the default: the table's columns)
#        TRACES="flood clean"   which mixes
#        WRITE=1                put the table in docs/performance.md, between its
#                               compare-traces markers
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(dirname "$BENCH_DIR")
OUT=${OUT:-/tmp/sonde-bench}
REPS=${1:-5}
TRACES=${TRACES:-flood clean}
export TOOLS=${TOOLS:-floor sonde1 sondeN softflowd nfpcapd}

log() { echo "compare-traces: $*" >&2; }

if [[ -z ${SONDE:-} ]]; then
    export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/tmp/target-bench}
    log "building sonde (cargo build --release -p sonde, target $CARGO_TARGET_DIR)"
    (cd "$REPO_DIR" && cargo build --release -q -p sonde) >&2
    export SONDE=$CARGO_TARGET_DIR/release/sonde
fi
export OUT SONDE

results=$(mktemp)
trap 'rm -f "$results"' EXIT
for mix in $TRACES; do
    [[ -s $OUT/$mix.pcap ]] || "$BENCH_DIR/make-traces.sh" "$mix" >&2
    RESULTS=$results "$BENCH_DIR/compare.sh" "$OUT/$mix.pcap" "$REPS"
done

table=$(python3 - "$results" "$REPS" "$(nproc)" "${SONDE_REV:-$(git -C "$REPO_DIR" rev-parse --short HEAD)}" <<'PY'
import collections, sys
path, reps, cores, rev = sys.argv[1:]
rows = collections.OrderedDict()
for line in open(path):
    trace, tool, packets, flows, wall, cpu, rss, note = (line.rstrip("\n").split("\t") + [""])[:8]
    rows.setdefault(trace, {})[tool] = dict(packets=int(packets), flows=flows, wall=float(wall), cpu=float(cpu), note=note)
what = {"flood.pcap": "flood- and scan-heavy", "clean.pcap": "clean sessions"}
peers = [("softflowd", "softflowd"), ("nfpcapd", "nfpcapd"), ("floor", "bare C 5-tuple meter")]
def per_cpu(r):
    return r["packets"] / r["cpu"] / 1e6 if r and r["cpu"] > 0 else None
def fmt(x, unit=""):
    return "n/a" if x is None else f"{x:.2f}{unit}"
print(f"| trace | sonde 1 worker | sonde {cores} workers (wall) | " + " | ".join(p[1] for p in peers)
      + " | sonde ÷ softflowd | sonde ÷ bare meter |")
print("|---|" + "---:|" * (4 + len(peers)))
for trace, tools in rows.items():
    one, many = tools.get("sonde1"), tools.get("sondeN")
    first = per_cpu(one)
    scale = one["wall"] / many["wall"] if one and many and many["wall"] > 0 else None
    cols = [fmt(per_cpu(tools.get(p))) for p, _ in peers]
    ratio = lambda p: fmt(first / per_cpu(tools[p]), "×") if first and per_cpu(tools.get(p)) else "n/a"
    sonde_flows = (one or {}).get("flows", "?")
    packets = next(iter(tools.values()))["packets"]
    label = f"{what.get(trace, trace)} (`{trace}`), {packets / 1e6:.2f} M packets, {int(sonde_flows) / 1e3:.0f} k flows"
    print(f"| {label} | {fmt(first)} | {fmt(scale, '×')} of one worker | " + " | ".join(cols)
          + f" | {ratio('softflowd')} | {ratio('floor')} |")
print()
print(f"Mpps per CPU second (packets ÷ user+system time), medians of {reps} interleaved rounds; the "
      f"all-cores column is one worker's wall time ÷ {cores} workers'. sonde {rev}.")
PY
)
echo
echo "$table"
if [[ ${WRITE:-} == 1 ]]; then
    doc=$REPO_DIR/docs/performance.md
    python3 - "$doc" "$table" <<'PY'
import sys
path, table = sys.argv[1:]
text = open(path).read()
begin, end = "<!-- compare-traces:begin -->", "<!-- compare-traces:end -->"
if begin not in text or end not in text:
    sys.exit(f"{path}: no {begin} … {end} markers")
head, rest = text.split(begin, 1)
_, tail = rest.split(end, 1)
open(path, "w").write(f"{head}{begin}\n{table}\n{end}{tail}")
PY
    log "table written into docs/performance.md"
fi
