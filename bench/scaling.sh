#!/usr/bin/env bash
# How sonde's cost grows with the number of concurrent flows (the NetSniff question): runs sonde
# over the conc-K traces of bench/make-traces.sh and prints a markdown table of packets/s and
# memory per flow for each K.
#
# usage: bench/scaling.sh [REPS]        (REPS defaults to 3; medians)
# env:   OUT=/tmp/sonde-bench  SONDE=path/to/sonde (default: build it)  KS="1000 10000 ..."
#        SONDE_REV=label  how the table names the sonde build (default: the repo's HEAD)
#        THREADS=N  pass --threads N (default 1 when sonde has --threads: the per-core figure)
#
# Why it is built this way:
# - Rate: sonde reads the trace file (from the page cache, warmed first), wall time by GNU time.
# - Memory: the file run's peak RSS includes the pages of the memory-mapped trace, which grow
#   with the trace, not with the flows. So memory is measured in a second run that reads the
#   same trace from a pipe (-r -): peak RSS there is the flow state plus a fixed base. The base
#   is the peak RSS of the same pipe run over a 10-flow trace; bytes per flow =
#   (peak RSS at K − base) ÷ K, which charges the flow table, the per-flow TCP/RTT state and
#   any allocator slack to the flows.
# - --max-flows is raised above K where the default cap (1 M) would evict flows.
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(dirname "$BENCH_DIR")
OUT=${OUT:-/tmp/sonde-bench}
KS=${KS:-1000 10000 100000 1000000}

log() { echo "scaling: $*" >&2; }
die() { log "$*"; exit 1; }

find_sonde() {
    if [[ -n ${SONDE:-} ]]; then return; fi
    export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/tmp/target-bench}
    (cd "$REPO_DIR" && cargo build --release -q -p sonde) >&2 || die "sonde does not build; set SONDE="
    SONDE=$CARGO_TARGET_DIR/release/sonde
}

median() { sort -g | awk '{v[NR] = $1} END {if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

# sonde_args K: the analyze options for a K-flow trace
sonde_args() {
    ARGS=(--force -q)
    if "$SONDE" analyze --help | grep -q -- --threads; then ARGS+=(--threads "${THREADS:-1}"); fi
    if (($1 * 5 / 4 > 1000000)); then ARGS+=(--max-flows $(($1 * 5 / 4))); fi
}

# run_file TRACE K: prints "wall_s packets tcp_complete" for one run reading the file
run_file() {
    local dir t0 t1
    dir=$(mktemp -d "$WORK/run.XXXX")
    sonde_args "$2"
    t0=$(date +%s%N)
    /usr/bin/time -f '%e %U %S %M' -o "$dir/time" "$SONDE" analyze -r "$1" -o "$dir" "${ARGS[@]}"
    t1=$(date +%s%N)
    python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
print("%.4f" % (int(sys.argv[2]) / 1e9), d["packets"]["read"], d["flows"]["tcp_complete"],
      d["table"]["peak_live_flows"])' "$dir/summary.json" $((t1 - t0))
    rm -rf "$dir"
}

# run_pipe TRACE K: prints the peak RSS in kB of a run reading the trace from a pipe
run_pipe() {
    local dir
    dir=$(mktemp -d "$WORK/run.XXXX")
    sonde_args "$2"
    /usr/bin/time -f '%M' -o "$dir/time" "$SONDE" analyze -r - -o "$dir" "${ARGS[@]}" <"$1"
    tail -1 "$dir/time"
    rm -rf "$dir"
}

main() {
    local reps=${1:-3} k t
    find_sonde
    # the machine is shared: the load says how much the other jobs weighed on this run
    LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
    WORK=$(mktemp -d /tmp/sonde-scaling.XXXXXX)
    trap 'rm -rf "$WORK"' EXIT

    # Baseline memory: a trace with 10 flows
    python3 "$BENCH_DIR/concurrent_flows.py" 10 200 "$WORK/tiny.pcap" 2>/dev/null
    local base
    base=$(for ((r = 0; r < reps; r++)); do run_pipe "$WORK/tiny.pcap" 10; done | median)
    log "baseline peak RSS (10 flows, from a pipe): $base kB"

    echo "sonde ${SONDE_REV:-$(git -C "$REPO_DIR" rev-parse --short HEAD 2>/dev/null || echo '?')}, $(nproc) cores," \
        "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(date -u +%F) (load average $LOAD_BEFORE before);" \
        "$reps repetitions, medians; baseline RSS $((base / 1024)) MB"
    echo
    echo "| concurrent TCP flows | packets | packets per flow | peak live flows | wall s | Mpps | peak RSS MB (pipe) | bytes per flow |"
    echo "|---:|---:|---:|---:|---:|---:|---:|---:|"
    declare -A RATE=()
    for k in $KS; do
        t=$OUT/conc-$k.pcap
        if [[ ! -s $t ]]; then
            echo "| $k | n/a (no $t; run bench/make-traces.sh conc) | | | | | | |"
            continue
        fi
        log "K=$k: warming the page cache"
        cat "$t" >/dev/null
        local runs=$WORK/file.$k rss=$WORK/rss.$k
        for ((r = 1; r <= reps; r++)); do
            log "K=$k rep $r/$reps"
            run_file "$t" "$k" >>"$runs"
            run_pipe "$t" "$k" >>"$rss"
        done
        local wall packets complete live mrss
        wall=$(awk '{print $1}' "$runs" | median)
        read -r _ packets complete live < <(tail -1 "$runs")
        mrss=$(median <"$rss")
        RATE[$k]=$(awk -v p="$packets" -v w="$wall" 'BEGIN {printf "%.2f", p / w / 1e6}')
        local note=""
        [[ $complete == "$k" ]] || note=" ⚠ $complete complete flows"
        printf '| %s%s | %s | %s | %s | %.3f | %s | %.0f | %.0f |\n' "$k" "$note" "$packets" "$((packets / k))" "$live" "$wall" \
            "${RATE[$k]}" "$(echo "$mrss / 1024" | bc -l)" "$(echo "($mrss - $base) * 1024 / $k" | bc -l)"
    done
    echo
    echo "- load average after the runs: $(cut -d' ' -f1-3 /proc/loadavg)"
    if [[ -n ${RATE[10000]:-} && -n ${RATE[1000000]:-} ]]; then
        echo "- throughput at 10 k ÷ at 1 M concurrent flows: $(awk -v a="${RATE[10000]}" -v b="${RATE[1000000]}" 'BEGIN {printf "%.2f×", a / b}') (target: < 2×)"
    fi
}

main "$@"
