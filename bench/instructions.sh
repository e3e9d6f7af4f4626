#!/usr/bin/env bash
# The reference instruction count of docs/performance.md (issue 33's figure): instructions per
# packet of `sonde analyze` with one worker over the reference mix, minus the same run over
# testdata/demo.pcap (start-up, the outputs' fixed costs), divided by the mix's packets.
# Instructions (callgrind) repeat run to run within ~0.2 %, unlike times.
#
# usage: bench/instructions.sh [EXTRA SONDE FLAGS...]   e.g. --app-packets 0
# env:   SONDE=path/to/sonde   binary to measure (default: target/release/sonde, built)
#        REF=/tmp/ref.pcap     the mix (made by the shared mergetrace tool when missing)
set -euo pipefail

REPO_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REF=${REF:-/tmp/ref.pcap}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

if [[ -z ${SONDE:-} ]]; then
    (cd "$REPO_DIR" && cargo build --release -q -p sonde) >&2
    SONDE=$REPO_DIR/target/release/sonde
fi
if [[ ! -s $REF ]]; then
    bash "$REPO_DIR/../shared/tools/mergetrace/make-bench-trace.sh" "$REF" 60000 3 >&2
fi

instructions() {
    valgrind --tool=callgrind --callgrind-out-file="$OUT/cg.out" \
        "$SONDE" analyze -r "$1" -o "$OUT/run" --force -q --threads 1 "${@:2}" 2>&1 >/dev/null |
        sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}

packets=$("$SONDE" analyze -r "$REF" -o "$OUT/count" --force -q --outputs '' --threads 1 >/dev/null &&
    python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['packets']['read'])" "$OUT/count/summary.json")
ref=$(instructions "$REF" "$@")
base=$(instructions "$REPO_DIR/testdata/demo.pcap" "$@")
echo "reference mix: $packets packets, $ref instructions; demo.pcap: $base"
echo "instructions per packet: $(((ref - base) / packets))  (flags: ${*:-default})"
