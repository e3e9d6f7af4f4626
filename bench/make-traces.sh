#!/usr/bin/env bash
# Builds the benchmark traces into /tmp/sonde-bench/ (never into the repo: they are hundreds
# of MB to GB and can be rebuilt at any time):
#   bench.pcap       the real captures merged and replicated (~1.2 M packets, tens of thousands
#                    of flows), by ../shared/tools/mergetrace: flood- and scan-heavy, since many
#                    of the captures hold scans and half-open connections
#   flood.pcap       bench.pcap with a SYN flood (60,000 random sources) and a port scan (40,000
#                    probes) over its 140 s (bench/flood.py, mergecap): ~1.3 M packets, ~160 k
#                    flows, most of them one packet long
#   clean.pcap       the same from the captures whose TCP flows nearly all (≥ 90 %) open with a
#                    handshake: clean sessions (~1.1 M packets, about 21 packets per flow)
#   bench-tcptrace.pcap  the same less its frames shorter than 14 bytes, which crash tcptrace
#   scale.pcap       ~2,000 concurrent real Linux TCP connections, by the ground-truth
#                    generator's scale preset (needs root, iproute2, tcpdump)
#   conc-K.pcap      K TCP connections open at once, K = 1k 10k 100k 1M (bench/concurrent_flows.py),
#                    for how cost grows with the number of concurrent flows
# Each trace is checked with sonde: packets read, and for conc-K exactly K complete TCP flows.
# An existing trace is kept (delete it, or set FORCE=1, to rebuild).
#
# usage: bench/make-traces.sh [all|bench|flood|clean|scale|conc]   (default all)
# env:   OUT=/tmp/sonde-bench   SONDE=path/to/sonde (default: build it)   KS="1000 10000 ..."
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(dirname "$BENCH_DIR")
SHARED=$REPO_DIR/../shared/tools
OUT=${OUT:-/tmp/sonde-bench}
KS=${KS:-1000 10000 100000 1000000}
# Packets per concurrency trace: the same 2 M for small K (so each rate is measured over
# enough packets), and 14 per flow for large K (handshake 3 + 4 data/ACK pairs + teardown 3).
MIN_PACKETS=${MIN_PACKETS:-2000000}

log() { echo "make-traces: $*" >&2; }

want() { [[ ${FORCE:-} == 1 || ! -s $1 ]]; }

find_sonde() {
    if [[ -n ${SONDE:-} ]]; then return; fi
    export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/tmp/target-bench}
    (cd "$REPO_DIR" && cargo build --release -q -p sonde) >&2
    SONDE=$CARGO_TARGET_DIR/release/sonde
}

# Runs sonde over a trace; prints "packets tcp_flows tcp_complete udp_flows".
# $2: the trace's concurrent flows, when known (K = 1M needs more room than the default cap).
sonde_counts() {
    local dir k=${2:-0} args=()
    dir=$(mktemp -d)
    if ((k * 5 / 4 > 1000000)); then args=(--max-flows $((k * 5 / 4))); fi
    "$SONDE" analyze -r "$1" -o "$dir" --force -q "${args[@]}" >/dev/null
    python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
f = d["flows"]
print(d["packets"]["read"], f["tcp"], f["tcp_complete"], f["udp"])' "$dir/summary.json"
    rm -rf "$dir"
}

make_bench() {
    local t=$OUT/bench.pcap
    if want "$t"; then
        log "merging the real captures into $t"
        "$SHARED/mergetrace/make-bench-trace.sh" "$t"
    fi
    log "bench.pcap: packets, TCP flows, complete, UDP flows: $(sonde_counts "$t")"
    # tcptrace crashes on the few runt frames of bench.pcap; this copy lacks them
    if want "$OUT/bench-tcptrace.pcap"; then
        python3 "$BENCH_DIR/drop_short_frames.py" "$t" "$OUT/bench-tcptrace.pcap"
    fi
}

# The flood-heavy mix: bench.pcap and floods spread over its time span (flood.py starts at
# 1,700,000,000 s, as mergetrace's traces do).
make_flood() {
    local t=$OUT/flood.pcap tmp
    if want "$t"; then
        [[ -s $OUT/bench.pcap ]] || make_bench
        tmp=$(mktemp -d)
        python3 "$BENCH_DIR/flood.py" syn 60000 "$tmp/syn.pcap" --pps 430
        python3 "$BENCH_DIR/flood.py" scan 40000 "$tmp/scan.pcap" --pps 290 --seed 2
        log "merging bench.pcap with a SYN flood and a scan into $t"
        mergecap -F pcap -w "$t" "$OUT/bench.pcap" "$tmp/syn.pcap" "$tmp/scan.pcap"
        rm -rf "$tmp"
    fi
    log "flood.pcap: packets, TCP flows, complete, UDP flows: $(sonde_counts "$t")"
}

# The clean-sessions mix: ../shared/traces/INDEX.tsv's Ethernet captures (those mergetrace's
# make-bench-trace.sh takes) with at least 90 % of their TCP flows opened by a handshake.
make_clean() {
    local t=$OUT/clean.pcap traces=$REPO_DIR/../shared/traces tmp
    if want "$t"; then
        tmp=$(mktemp -d)
        awk -F'\t' -v t="$traces/" 'NR > 1 && $1 ~ /^realistic\// && $4 ~ /^EN10MB/ && $13 == "" &&
            $8 + $11 > 0 && $9 >= 0.9 * $8 {print t $1 "\t" $3}' "$traces/INDEX.tsv" >"$tmp/files.tsv"
        cut -f1 "$tmp/files.tsv" >"$tmp/list"
        python3 -c 'import json, sys
print(json.dumps({l.split("\t")[0]: int(l.split("\t")[1] or 1) for l in open(sys.argv[1]) if l.strip()}))' \
            "$tmp/files.tsv" >"$tmp/counts.json"
        log "merging $(wc -l <"$tmp/list") clean-session captures into $t"
        python3 "$SHARED/mergetrace/mergetrace.py" --list "$tmp/list" --counts "$tmp/counts.json" --out "$t" \
            --target 1100000 --seed 7 --window 20 >&2
        rm -rf "$tmp"
    fi
    log "clean.pcap: packets, TCP flows, complete, UDP flows: $(sonde_counts "$t")"
}

make_scale() {
    local t=$OUT/scale.pcap
    if want "$t"; then
        [[ $(id -u) == 0 ]] || { log "scale preset needs root: skipped"; return; }
        log "running the ground-truth generator's scale preset (a minute or two)"
        (cd "$OUT" && python3 "$SHARED/groundtruth/gen.py" run --preset scale --name scale --outdir "$OUT")
    fi
    log "scale.pcap: packets, TCP flows, complete, UDP flows: $(sonde_counts "$t")"
}

make_conc() {
    local k t packets got
    for k in $KS; do
        t=$OUT/conc-$k.pcap
        packets=$((k * 14 > MIN_PACKETS ? k * 14 : MIN_PACKETS))
        if want "$t"; then
            log "writing $t ($k flows, $packets packets)"
            python3 "$BENCH_DIR/concurrent_flows.py" "$k" "$packets" "$t"
        fi
        got=$(sonde_counts "$t" "$k")
        log "conc-$k.pcap: packets, TCP flows, complete, UDP flows: $got"
        read -r _ tcp complete udp <<<"$got"
        if [[ $tcp != "$k" || $complete != "$k" || $udp != 0 ]]; then
            log "conc-$k.pcap: expected $k complete TCP flows and no UDP"
            exit 1
        fi
    done
}

main() {
    local what=${1:-all}
    mkdir -p "$OUT"
    find_sonde
    case $what in
        all)   make_bench; make_flood; make_clean; make_scale; make_conc ;;
        bench) make_bench ;;
        flood) make_flood ;;
        clean) make_clean ;;
        scale) make_scale ;;
        conc)  make_conc ;;
        *) echo "usage: make-traces.sh [all|bench|flood|clean|scale|conc]" >&2; exit 2 ;;
    esac
    ls -l "$OUT"/*.pcap >&2
}

main "$@"
