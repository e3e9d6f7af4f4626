#!/usr/bin/env bash
# Runs sonde and the flow meters installable here (bench/setup.sh) over one trace, side by side
# in one run, and prints a markdown table: median wall and CPU time, Mpps, peak RSS, and the
# ratio of sonde's one-worker rate to each tool's.
#
# usage: bench/compare.sh TRACE [REPS]          (REPS defaults to 3)
# env:   SONDE_REV=label       how the table names the sonde build (default: the repo's HEAD)
#        SONDE=path/to/sonde   binary to measure (default: build the work tree's release binary)
#        TOOLS="sonde1 sondeN softflowd ..."  subset/order of rows (default: all, see ALL_TOOLS)
#        KEEP=1                keep the per-run outputs and logs (printed at the end)
#        RESULTS=file          also append each tool's medians there, one tab-separated line:
#                              trace, tool, packets, flows, wall s, CPU s, peak RSS KB, note
#                              (bench/compare-traces.sh builds its table from them)
#
# Why it is built this way:
# - The machine is small (2 cores) and shared, so absolute times drift. Every repetition runs
#   all tools one after the other (round-robin, not tool after tool), so a busy minute slows
#   every tool alike, and the table reports medians over REPS. Mpps is packets ÷ wall time (the
#   rate a box keeps up with); Mpps per CPU s (packets ÷ user+sys time) is also printed because
#   it moves less when other jobs share the cores.
# - The trace is read once with cat before timing so every tool reads it from the page cache:
#   we measure packet processing, not the disk.
# - GNU time gives wall, user+sys of the whole process tree (NFStream's meter processes,
#   nfpcapd's threads) and peak RSS. RSS counts resident file pages too: a tool that mmaps
#   the trace (sonde, floor) is charged for the pages of the file it touched.
# - Each run is checked: exit status, and, where the tool says so, that it read every packet
#   and made flows. A tool that is missing, crashes or skips packets gets "n/a (why)" or a
#   note; the table is always printed.
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(dirname "$BENCH_DIR")
ALL_TOOLS="floor sonde1 sonde1c sondeN softflowd nfpcapd argus tcptrace tshark nfstream"

log() { echo "compare: $*" >&2; }
die() { log "$*"; exit 1; }

# --- what each row computes (shown in the table) -------------------------------------------
describe() {
    case $1 in
        floor)     echo "C 5-tuple counter over the mmapped file: the floor" ;;
        sonde1)    echo "Tstat's TCP/UDP metric set, flow logs written; one worker" ;;
        sonde1c)   echo "same, one worker, pinned to one core (taskset -c 0)" ;;
        sondeN)    echo "same, all cores (--threads $(nproc))" ;;
        softflowd) echo "5-tuple flows only (NetFlow v9 export)" ;;
        nfpcapd)   echo "5-tuple unidirectional flows, nfcapd file" ;;
        argus)     echo "bidirectional flow records, argus file" ;;
        tcptrace)  echo "full TCP analysis incl. RTT (-l -r), TCP only" ;;
        tshark)    echo "TCP+UDP conversations (full dissection)" ;;
        nfstream)  echo "flows, basic features, 1 meter, no DPI/stats" ;;
    esac
}

# --- setup ---------------------------------------------------------------------------------
find_sonde() {
    if [[ -n ${SONDE:-} ]]; then
        [[ -x $SONDE ]] || die "SONDE=$SONDE is not executable"
        return
    fi
    export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/tmp/target-bench}
    log "building sonde (cargo build --release -p sonde, target $CARGO_TARGET_DIR)"
    (cd "$REPO_DIR" && cargo build --release -q -p sonde) >&2 || die "sonde does not build; set SONDE="
    SONDE=$CARGO_TARGET_DIR/release/sonde
}

build_floor() {
    FLOOR=$WORK/floor
    gcc -O2 -o "$FLOOR" "$BENCH_DIR/floor.c" 2>"$WORK/floor.build.log" || FLOOR=
}

sonde_has_threads() { "$SONDE" analyze --help 2>/dev/null | grep -q -- --threads; }

# --- one run of one tool: prints the command's output into $out/log ---------------------------
# Returns non-zero if the tool is not available. $1 tool, $2 output dir (fresh for each run).
tool_cmd() {
    local tool=$1 out=$2
    case $tool in
        floor)     [[ -n $FLOOR ]] || return 1; CMD=("$FLOOR" "$TRACE") ;;
        sonde1)    CMD=("$SONDE" analyze -r "$TRACE" -o "$out" --force -q)
                   if sonde_has_threads; then CMD+=(--threads 1); fi ;;
        # Pinned to one core: the like-for-like comparison with the single-threaded peers
        # whatever threads sonde uses for one worker (early pipelines ran the reader in a
        # thread of its own next to the worker).
        sonde1c)   command -v taskset >/dev/null || return 1
                   CMD=(taskset -c 0 "$SONDE" analyze -r "$TRACE" -o "$out" --force -q)
                   if sonde_has_threads; then CMD+=(--threads 1); fi ;;
        sondeN)    sonde_has_threads || return 1
                   CMD=("$SONDE" analyze -r "$TRACE" -o "$out" --force -q --threads "$(nproc)") ;;
        # -r reads the file and exits at EOF flushing every flow; -d stays in the foreground;
        # -c none: no control socket; -p: no pid file in /var/run; -v 9 exports (and so
        # tracks) IPv6 too; -m: room for every flow, so no forced expiry (default 8192).
        # The NetFlow datagrams go to a closed port on loopback and are dropped.
        softflowd) command -v softflowd >/dev/null || return 1
                   CMD=(softflowd -r "$TRACE" -d -c none -p "$out/pid" -v 9 -m 4000000
                        -n 127.0.0.1:9) ;;
        # nfdump >= 1.7: -w flow directory (1.6 used -l); writes one nfcapd file per 5 minutes.
        nfpcapd)   command -v nfpcapd >/dev/null || return 1
                   CMD=(nfpcapd -r "$TRACE" -w "$out") ;;
        argus)     command -v argus >/dev/null || return 1
                   CMD=(argus -r "$TRACE" -w "$out/out.argus") ;;
        tcptrace)  command -v tcptrace >/dev/null || return 1
                   CMD=(tcptrace -n -l -r "$TRACE") ;;
        tshark)    command -v tshark >/dev/null || return 1
                   CMD=(tshark -r "$TRACE" -q -z conv,tcp -z conv,udp) ;;
        nfstream)  python3 -c 'import nfstream' 2>/dev/null || return 1
                   CMD=(python3 "$BENCH_DIR/nfstream_run.py" "$TRACE" 1) ;;
        *) die "unknown tool $tool" ;;
    esac
}

why_missing() {
    case $1 in
        floor)  echo "gcc failed, see $WORK/floor.build.log" ;;
        sondeN) echo "sonde has no --threads yet" ;;
        sonde1c) echo "taskset missing" ;;
        nfstream) echo "nfstream not importable; run bench/setup.sh" ;;
        *) echo "$1 not installed; run bench/setup.sh" ;;
    esac
}

# --- after a run: did the tool read the whole trace and make flows? ---------------------------
# Prints "FLOWS|NOTE" (NOTE empty when all is well). Checks are outside the timed region.
# sonde and floor must read every packet; a peer is flagged when it accounts for less than 99 %
# of the packets it should see (they differ in which odd frames they count: runts, LLC, ARP).
short_of() { (( ${1:-0} * 100 < ${2} * 99 )); }

check_run() {
    local tool=$1 out=$2 log=$2/log flows="" note="" seen
    case $tool in
        floor)
            read -r _ seen _ flows < <(tail -1 "$log") || true
            [[ $seen == "$PACKETS" ]] || note="read $seen of $PACKETS packets" ;;
        sonde1|sonde1c|sondeN)
            local speedup
            read -r seen flows speedup < <(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
print(d["packets"]["read"], d["flows"]["tcp"] + d["flows"]["udp"], d.get("rates", {}).get("speedup", ""))' \
                "$out/summary.json")
            # Tstat's speed-up figure as sonde's own summary states it (trace duration ÷ its CPU time)
            [[ -z $speedup ]] || echo "$speedup" >>"$WORK/$tool.speedup"
            [[ $seen == "$PACKETS" ]] || note="read $seen of $PACKETS packets" ;;
        softflowd)
            local processed ignored
            processed=$(awk '/^Packets processed:/ {print $3}' "$log")
            ignored=$(awk '/^Ignored packets:/ {print $3}' "$log")
            flows=$(awk '/^Flows expired:/ {print $3}' "$log")
            seen=$((processed + ignored))
            short_of "$seen" "$PACKETS" && note="saw $seen of $PACKETS packets" ;;
        nfpcapd)
            seen=$(awk -F'[:,] *' '/^Total: Processed/ {print $3}' "$log")
            flows=$(awk -F'Flows: ' '/Flows: / {split($2, a, ","); s += a[1]} END {print s}' "$log")
            short_of "$seen" "$PACKETS" && note="processed $seen of $PACKETS packets" ;;
        argus)
            # ra is part of argus-client; summing the records' packets proves argus read them all
            if command -v ra >/dev/null; then
                read -r flows seen < <(ra -r "$out/out.argus" -n -s pkts 2>/dev/null |
                                       awk '{n++; s += $1} END {print n + 0, s + 0}')
                short_of "$seen" "$PACKETS" && note="records hold $seen of $PACKETS packets"
            fi ;;
        tcptrace)
            # tcptrace does not count non-IP frames (ARP) among the packets it saw
            seen=$(awk '/packets seen/ {print $1; exit}' "$log")
            flows=$(grep -c '^TCP connection [0-9]' "$log" || true)
            short_of "${seen:-0}" $((PACKETS - NONIP)) && note="saw ${seen:-0} of $PACKETS packets" ;;
        tshark)
            flows=$(grep -c '<->' "$log" || true) ;;
        nfstream)
            read -r _ flows _ seen < <(tail -1 "$log") || true
            # NFStream counts IP packets only; ARP and the like are not in any flow
            short_of "${seen:-0}" $((PACKETS - NONIP)) && note="flows hold $seen of $PACKETS packets" ;;
    esac
    [[ -n $flows && $flows != 0 ]] || note="${note:+$note; }no flows"
    echo "${flows:-?}|$note"
}

# --- timing one run ------------------------------------------------------------------------
# Appends "wall cpu rss_kb flows|note" to $WORK/$tool.runs, or "FAIL why".
run_once() {
    local tool=$1 rep=$2 out=$WORK/$1.$2 rc=0
    rm -rf "$out"; mkdir -p "$out"
    tool_cmd "$tool" "$out" || return 0
    # GNU time's %e has 10 ms steps, too coarse for small traces: take wall time in ns around it
    local t0 t1
    t0=$(date +%s%N)
    /usr/bin/time -f '%e %U %S %M' -o "$out/time" "${CMD[@]}" >"$out/log" 2>&1 </dev/null || rc=$?
    t1=$(date +%s%N)
    if ((rc != 0)); then
        local sig
        sig=$(grep -o 'terminated by signal [0-9]*' "$out/time" | awk '{print $4}' || true)
        if [[ -n $sig ]]; then
            echo "FAIL crashed (signal $sig after $(tail -1 "$out/time" | awk '{print $1}') s)" >>"$WORK/$tool.runs"
        else
            echo "FAIL exit status $rc" >>"$WORK/$tool.runs"
        fi
        log "$tool rep $rep failed; log in $out/log"
        return 0
    fi
    local wall user sys rss
    read -r wall user sys rss < <(tail -1 "$out/time")
    wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.4f", (b - a) / 1e9}')
    echo "$wall $(echo "$user + $sys" | bc) $rss $(check_run "$tool" "$out")" >>"$WORK/$tool.runs"
    [[ -n ${KEEP:-} ]] || rm -rf "$out"
}

median() { sort -g | awk '{v[NR] = $1} END {if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

# --- table ---------------------------------------------------------------------------------
# Sets MED_WALL MED_CPU MED_RSS FLOWS NOTE for a tool, or FAILED=why.
summarise() {
    local runs=$WORK/$1.runs
    FAILED=""
    if [[ ! -s $runs ]]; then FAILED="n/a ($(why_missing "$1"))"; return; fi
    if grep -q '^FAIL' "$runs"; then FAILED="n/a ($(grep -m1 '^FAIL' "$runs" | cut -d' ' -f2-))"; return; fi
    MED_WALL=$(awk '{print $1}' "$runs" | median)
    MED_CPU=$(awk '{print $2}' "$runs" | median)
    MED_RSS=$(awk '{print $3}' "$runs" | median)
    FLOWS=$(awk '{print $4}' "$runs" | tail -1 | cut -d'|' -f1)
    NOTE=$(awk '{$1 = $2 = $3 = ""; print}' "$runs" | cut -d'|' -f2- | sort -u | paste -sd';' | sed 's/^ *//; s/^;//')
}

mpps() { awk -v p="$PACKETS" -v w="$1" 'BEGIN {if (w > 0) printf "%.2f", p / w / 1e6; else printf "–"}'; }

print_table() {
    local sonde_mpps="" tool
    summarise sonde1
    [[ -n $FAILED ]] || sonde_mpps=$(mpps "$MED_WALL")
    echo
    echo "| tool | computes | flows | wall s | CPU s | Mpps | Mpps per CPU s | peak RSS MB | sonde ÷ tool |"
    echo "|---|---|---:|---:|---:|---:|---:|---:|---:|"
    declare -gA RATE=()
    for tool in $TOOLS; do
        summarise "$tool"
        if [[ -n $FAILED ]]; then
            echo "| $tool | $(describe "$tool") | | $FAILED | | | | | |"
            continue
        fi
        local rate ratio=""
        rate=$(mpps "$MED_WALL"); RATE[$tool]=$rate
        [[ -z $sonde_mpps || $tool == sonde* ]] || ratio=$(awk -v a="$sonde_mpps" -v b="$rate" 'BEGIN {printf "%.2f×", a / b}')
        printf '| %s | %s%s | %s | %.3f | %.2f | %s | %s | %.0f | %s |\n' "$tool" "$(describe "$tool")" \
            "${NOTE:+ ⚠ $NOTE}" "$FLOWS" "$MED_WALL" "$MED_CPU" "$rate" "$(mpps "$MED_CPU")" \
            "$(echo "$MED_RSS / 1024" | bc -l)" "$ratio"
    done
    echo
    local peer base label
    for peer in softflowd tcptrace nfstream; do
        for base in sonde1 sonde1c; do
            label="one worker"; [[ $base == sonde1 ]] || label="one worker, one core"
            if [[ -n ${RATE[$base]:-} && -n ${RATE[$peer]:-} ]]; then
                echo "- sonde ($label) ÷ $peer: $(awk -v a="${RATE[$base]}" -v b="${RATE[$peer]}" 'BEGIN {printf "%.2f×", a / b}')"
            else
                echo "- sonde ($label) ÷ $peer: n/a"
            fi
        done
    done
    if [[ -n ${RATE[sonde1]:-} && -n ${RATE[sondeN]:-} ]]; then
        echo "- sonde all cores ÷ one worker: $(awk -v a="${RATE[sondeN]}" -v b="${RATE[sonde1]}" 'BEGIN {printf "%.2f×", a / b}')"
    fi
    if [[ -n ${RATE[sonde1]:-} && -n ${RATE[floor]:-} ]]; then
        echo "- sonde (one worker) ÷ floor: $(awk -v a="${RATE[sonde1]}" -v b="${RATE[floor]}" 'BEGIN {printf "%.2f", a / b}')"
    fi
    [[ -z ${SPEEDUP:-} ]] || echo "- sonde speed-up as Tstat reports it (trace duration ÷ CPU time, one worker, from sonde's summary): ${SPEEDUP}×"
}

# The medians of every tool that ran, one line each (RESULTS).
write_results() {
    local tool
    for tool in $TOOLS; do
        summarise "$tool"
        [[ -z $FAILED ]] || continue
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(basename "$TRACE")" "$tool" "$PACKETS" "$FLOWS" \
            "$MED_WALL" "$MED_CPU" "$MED_RSS" "$NOTE"
    done
}

# --- main ----------------------------------------------------------------------------------
main() {
    TRACE=${1:?usage: compare.sh TRACE [REPS]}
    REPS=${2:-3}
    [[ -r $TRACE ]] || die "cannot read $TRACE"
    TRACE=$(realpath "$TRACE")
    [[ -x /usr/bin/time ]] || die "GNU time missing (/usr/bin/time); run bench/setup.sh"
    command -v bc >/dev/null || die "bc missing"
    TOOLS=${TOOLS:-$ALL_TOOLS}
    WORK=$(mktemp -d /tmp/sonde-compare.XXXXXX)
    [[ -n ${KEEP:-} ]] || trap 'rm -rf "$WORK"' EXIT
    find_sonde
    build_floor

    # the machine is shared: the load says how much the other jobs weighed on this run
    LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
    log "warming the page cache with $TRACE"
    cat "$TRACE" >/dev/null

    # Packet count and trace duration: from a sonde run (untimed), capinfos as the fallback.
    local meta
    meta=$(mktemp -d "$WORK/meta.XXXX")
    PACKETS="" DURATION="" SPEEDUP="" NONIP=0
    if "$SONDE" analyze -r "$TRACE" -o "$meta" --force -q >/dev/null 2>&1; then
        read -r PACKETS DURATION NONIP < <(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
print(d["packets"]["read"], d.get("trace_duration_s", 0), d["protocols"]["non_ip"]["packets"])' "$meta/summary.json")
    fi
    if [[ -z $PACKETS ]] && command -v capinfos >/dev/null; then
        PACKETS=$(capinfos -c -M -T -r "$TRACE" | cut -f2)
    fi
    [[ -n $PACKETS ]] || die "cannot count the packets of $TRACE"

    local rep tool
    for ((rep = 1; rep <= REPS; rep++)); do
        for tool in $TOOLS; do
            log "rep $rep/$REPS: $tool"
            run_once "$tool" "$rep"
        done
    done
    # Tstat's speed-up figure: median over the one-worker runs of their summaries' rates.speedup
    if [[ -s $WORK/sonde1.speedup ]]; then
        SPEEDUP=$(median <"$WORK/sonde1.speedup" | awk '{printf "%.0f", $1}')
    fi

    echo "Trace \`$(basename "$TRACE")\`: $PACKETS packets, $(printf '%.1f' "${DURATION:-0}") s," \
        "$(du -m "$TRACE" | cut -f1) MB; $REPS repetitions, medians; $(nproc) cores," \
        "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'); $(date -u +%F) (load average $LOAD_BEFORE before, $(cut -d' ' -f1-3 /proc/loadavg) after)," \
        "sonde ${SONDE_REV:-$(git -C "$REPO_DIR" rev-parse --short HEAD 2>/dev/null || echo '?')}"
    print_table
    [[ -z ${RESULTS:-} ]] || write_results >>"$RESULTS"
    [[ -z ${KEEP:-} ]] || log "outputs kept in $WORK"
}

main "$@"
