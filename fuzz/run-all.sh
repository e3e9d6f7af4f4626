#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each, FUZZ_JOBS (default 2) at a time, after building
# them all once; fails when any target found a crash (fuzz/run.sh prints the inputs).
#
#   fuzz/run-all.sh SECONDS [TARGET...]
set -uo pipefail

seconds=${1:?usage: fuzz/run-all.sh SECONDS [TARGET...]}
shift
here=$(cd "$(dirname "$0")" && pwd)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(capture wire flow define define_changes l7)
export CARGO_TARGET_DIR=${FUZZ_TARGET_DIR:-$(dirname "$here")/target/fuzz}
(cd "$here" && cargo afl build --release --locked) || exit 1

jobs=${FUZZ_JOBS:-2}
pids=() names=() failed=()
for t in "${targets[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do sleep 1; done
    "$here/run.sh" "$t" "$seconds" &
    pids+=($!) names+=("$t")
done
for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || failed+=("${names[$i]}")
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzz: findings or failures in: ${failed[*]}" >&2
    exit 1
fi
