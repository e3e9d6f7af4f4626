#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each, FUZZ_JOBS (default 2) at a time, after building
# them all once; fails when any target found a crash (fuzz/run.sh prints the inputs).
#
#   fuzz/run-all.sh SECONDS [TARGET...]
#
# Without targets, all seven. The build is of what the targets need: the light package
# (sonde-fuzz) alone unless `merged` is among them, whose package (sonde-fuzz-merged) pulls
# Arrow and Parquet (make test's short run names the six light ones).
set -uo pipefail

seconds=${1:?usage: fuzz/run-all.sh SECONDS [TARGET...]}
shift
here=$(cd "$(dirname "$0")" && pwd)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(capture wire flow define define_changes l7 merged)
export CARGO_TARGET_DIR=${FUZZ_TARGET_DIR:-$(dirname "$here")/target/fuzz}
packages=(-p sonde-fuzz)
for t in "${targets[@]}"; do [ "$t" = merged ] && packages=(--workspace); done
(cd "$here" && cargo afl build --release --locked "${packages[@]}") || exit 1

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
