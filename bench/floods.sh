#!/usr/bin/env bash
# Floods through sonde (docs/reliability.md): each written by bench/flood.py, analysed once, and
# reported as a Markdown table row: packets, flows, evicted, peak RSS, packets per second.
#   bench/floods.sh [SONDE] [PACKETS]      (defaults: target/release/sonde, 2000000)
set -euo pipefail
cd "$(dirname "$0")/.."
sonde=${1:-target/release/sonde}
packets=${2:-2000000}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "| flood | packets | --max-flows | flows | evicted | table peak | peak RSS MB | wall s | CPU s | Mpps (CPU) |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for spec in ${FLOODS:-syn:100000 udp:100000 scan:100000 frag:100000 concurrent:1000000 concurrent:1100000}; do
    kind=${spec%%:*} max=${spec##*:}
    python3 bench/flood.py "$kind" "$packets" "$work/$kind.pcap"
    "$sonde" analyze -q --force -r "$work/$kind.pcap" -o "$work/out" --max-flows "$max" --threads 2 --interval 0
    python3 - "$work/out/summary.json" "$kind" "$packets" "$max" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
kind, packets, max_flows = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
f, t = s["flows"], s["timing"]
cpu = t["cpu_s"]
print(f"| {kind} | {packets:,} | {max_flows:,} | {f['tcp'] + f['udp']:,} | {f['evicted']:,} | "
      f"{s['table']['peak_live_flows']:,} | {t['peak_rss_bytes'] / 2**20:.0f} | {t['elapsed_s']:.2f} | "
      f"{cpu:.2f} | {packets / cpu / 1e6:.2f} |")
PY
    rm -rf "$work/out" "$work/$kind.pcap"
done
