#!/usr/bin/env bash
# A/B timing of sonde builds on one trace: runs every binary once per round, alternating, for
# REPS rounds, and prints the median and minimum wall and CPU (user+sys) seconds of each.
#
# usage: bench/ab.sh TRACE REPS BINARY...      e.g. bench/ab.sh /tmp/sonde-bench/bench.pcap 9 /tmp/old /tmp/new
# env:   THREADS=N   sonde's --threads (default 1)
#
# Why: this machine is shared and its speed drifts by tens of percent within minutes, so a
# change is judged only against the other build measured in the same rounds. Alternating
# spreads a busy minute over every build; the median resists outliers. Differences under about
# 5 % are noise here: count instructions with callgrind for those.
set -euo pipefail

if [ $# -lt 3 ]; then
    sed -n '2,6p' "$0" >&2
    exit 2
fi
trace=$1 reps=$2
shift 2
work=$(mktemp -d /tmp/sonde-ab.XXXXXX)
trap 'rm -rf "$work"' EXIT

for ((r = 1; r <= reps; r++)); do
    for i in $(seq $#); do
        bin=${!i}
        rm -rf "$work/out"
        /usr/bin/time -f '%e %U %S' -o "$work/time" \
            "$bin" analyze -r "$trace" -o "$work/out" --force -q --threads "${THREADS:-1}" >/dev/null
        awk '{ print $1, $2 + $3 }' "$work/time" >>"$work/times.$i"
    done
done

# median and minimum of column $2 of file $1
stats() { cut -d' ' -f"$2" "$1" | sort -n | awk '{ v[NR] = $1 } END { printf "median %.3f  min %.3f", v[int((NR + 1) / 2)], v[1] }'; }
for i in $(seq $#); do
    printf '%-40s wall %s   cpu %s\n' "${!i}" "$(stats "$work/times.$i" 1)" "$(stats "$work/times.$i" 2)"
done
