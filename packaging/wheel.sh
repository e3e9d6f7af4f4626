#!/bin/bash
# sonde's wheel: the Python package (`import sonde`: python/sonde and the extension maturin
# builds) and the `sonde` command (the CLI's build, debug symbols stripped, as the wheel's
# script) in one abi3 wheel for CPython 3.9 and later.
#
# usage: packaging/wheel.sh BINARY OUTDIR [MATURIN OPTIONS...]   prints the wheel's path
# env:   MATURIN=path/to/maturin (default: maturin)
#
# `make wheel` runs it on the release build. maturin takes a wheel's data from the directory
# `<module-name>.data` beside pyproject.toml (here `sonde._sonde.data`), whose `scripts/` pip
# installs into the environment's bin/; it exists only while this script runs.
set -euo pipefail

bin=$(realpath "$1")
out=$(realpath -m "$2")
shift 2
repo=$(cd "$(dirname "$0")/.." && pwd)
data=$repo/sonde._sonde.data
[[ ! -e $data ]] || { echo "wheel.sh: $data exists (another build running?)" >&2; exit 1; }
trap 'rm -rf "$data"' EXIT

install -D -m 755 "$bin" "$data/scripts/sonde"
strip --strip-debug "$data/scripts/sonde"
# `linux`: the wheel links this system's libpcap, OpenSSL and libcurl (as the Debian package
# does), so no manylinux tag; pip installs it on this distribution and its kind.
(cd "$repo" && "${MATURIN:-maturin}" build --release --compatibility linux --out "$out" "$@" >&2)
ls -t "$out"/sonde-*.whl | head -1
