#!/usr/bin/env bash
# Runs one fuzz target under AFL++ for a while and reports what it did.
#
#   fuzz/run.sh TARGET SECONDS
#
# TARGET is a binary of the fuzz workspace (capture, wire, flow, define, define_changes, l7 in
# fuzz/Cargo.toml; merged in fuzz/merged/Cargo.toml); it is built (instrumented, `cargo afl
# build --release --bin TARGET`) if missing or with FUZZ_BUILD=1. The corpus starts from
# fuzz/seeds/TARGET (made by fuzz/seeds/gen.py, merged's by gen_merged.py) and
# fuzz/corpus/TARGET (what the hour-long campaigns grew, docs/fuzzing.md); the capture target also
# takes the shared corpus's small traces when ../shared/traces (or $SONDE_SHARED/traces) is
# there. Findings go to $FUZZ_OUT/TARGET (default target/fuzz/out/TARGET): the script prints
# AFL's figures (fuzzer_stats) and, for each crash, the input's path and how to replay it, and
# exits 1 when there was a crash. Hangs (an input slower than FUZZ_TIMEOUT_MS) are printed,
# and fail the run only with FUZZ_FAIL_ON_HANGS=1: on a machine shared with other jobs a slow
# moment looks like a hang.
set -euo pipefail

target=${1:?usage: fuzz/run.sh TARGET SECONDS}
seconds=${2:?usage: fuzz/run.sh TARGET SECONDS}
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
export CARGO_TARGET_DIR=${FUZZ_TARGET_DIR:-$root/target/fuzz}
out_root=${FUZZ_OUT:-$CARGO_TARGET_DIR/out}
out=$out_root/$target
bin=$CARGO_TARGET_DIR/release/$target
seeds=$here/seeds/$target

[ -d "$seeds" ] || { echo "fuzz: no seeds for $target ($seeds)" >&2; exit 2; }
if [ "${FUZZ_BUILD:-0}" = 1 ] || [ ! -x "$bin" ]; then
    (cd "$here" && cargo afl build --release --locked --bin "$target")
fi

# The starting corpus: the committed seeds, plus small shared traces for the capture readers.
input=$out_root/$target.in
# The target's scratch files (merged writes each input there as a Parquet file), under the run's
# output rather than /tmp: afl-fuzz kills the target at the end, before it can clean up.
scratch=$out_root/$target.tmp
rm -rf "$out" "$input" "$scratch"
mkdir -p "$input" "$out_root" "$scratch"
cp "$seeds"/* "$input"/
# What earlier campaigns grew (fuzz/corpus/TARGET: the inputs that reached new edges).
if [ -d "$here/corpus/$target" ]; then cp "$here/corpus/$target"/* "$input"/; fi
shared=${SONDE_SHARED:-$root/../shared}/traces
if [ "$target" = capture ] && [ -d "$shared" ]; then
    for part in robustness realistic; do
        # Twenty spread over the list (every seventh), without the repositories' notes.
        find "$shared/$part" -type f -size -8k -not -path '*/_meta/*' | sort | awk 'NR % 7 == 0' \
            | sed -n 1,20p >"$out_root/$target.shared"
        while read -r f; do cp "$f" "$input/shared_${part}_$(basename "$f")"; done <"$out_root/$target.shared"
    done
fi

# AFL++: no CPU-governor check, no core pinning (the machine is shared), no UI; a crash handler
# other than the core dump is fine; -V stops after the time given.
export AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_UI=1 AFL_NO_AFFINITY=1
export AFL_FAST_CAL=1 AFL_QUIET=1
log=$out_root/$target.log
status=0
TMPDIR=$scratch cargo afl fuzz -i "$input" -o "$out" -V "$seconds" -t "${FUZZ_TIMEOUT_MS:-2000}" -- "$bin" >"$log" 2>&1 \
    || status=$?
stats=$out/default/fuzzer_stats
if [ ! -f "$stats" ]; then
    echo "fuzz $target: afl-fuzz did not start (exit $status); its log, $log:" >&2
    tail -n 30 "$log" >&2
    exit 1
fi
stat() { sed -n "s/^$1 *: //p" "$stats"; }
printf 'fuzz %-15s %5ss  execs %-9s (%s/s)  edges %s/%s (bitmap %s)  corpus %s  crashes %s  hangs %s\n' \
    "$target" "$(stat run_time)" "$(stat execs_done)" "$(stat execs_per_sec)" "$(stat edges_found)" \
    "$(stat total_edges)" "$(stat bitmap_cvg)" "$(stat corpus_count)" "$(stat saved_crashes)" "$(stat saved_hangs)"
failed=0
for kind in crashes hangs; do
    for f in "$out"/default/"$kind"/id:*; do
        [ -e "$f" ] || continue
        echo "  $kind: $f"
        echo "    replay: $bin < '$f'"
        if [ "$kind" = crashes ] || [ "${FUZZ_FAIL_ON_HANGS:-0}" = 1 ]; then failed=1; fi
    done
done
exit $failed
