# The two commands of the README, and what they need.
#   make demo   installs what is needed, builds sonde and analyses the trace the repo ships
#   make test   runs every check CI runs: format, lints, the whole test suite

SHELL := /bin/bash
# What building the CLI needs (libpcap for BPF filters; cmake, curl and OpenSSL's headers for
# librdkafka, built from source), and what only the tests need.
BUILD_PACKAGES := libpcap-dev pkg-config cmake libcurl4-openssl-dev libssl-dev
TEST_PACKAGES := tcptrace rrdtool tshark chromium tcpreplay iproute2 nfdump default-jre-headless maven prometheus zsh fish dpkg-dev
CARGO ?= cargo
GO ?= $(or $(shell command -v go),/usr/local/go/bin/go)

.PHONY: demo deb wheel test bench test-deps test-packages format-check deps build lint browser-deps python python-env kafka-jars spark-jars goflow2 fuzz fuzz-deps fuzz-short fuzz-short-build

VENV := .venv
PYTHON ?= python3

# The system packages the CLI's build needs (BUILD_PACKAGES), and Rust.
deps:
	@$(call apt_install,$(BUILD_PACKAGES))
	@command -v $(CARGO) >/dev/null || { echo "cargo not found: install Rust (https://rustup.rs)"; exit 1; }

# The tests' system packages: tcptrace, rrdtool and tshark (compared against; tshark's question
# about non-root capture is answered up front); chromium (the dashboard's browser test); nfdump
# (nfcapd, the IPFIX collector the export is tested against); tcpreplay and iproute2 (live
# capture); a JRE and maven (Kafka, Spark); prometheus (promtool); zsh and fish (the completion
# scripts); dpkg-dev (dpkg-shlibdeps: the Debian package's test). One apt run, before the parallel downloads of test-deps (apt holds a lock).
test-packages: deps
	@echo 'wireshark-common wireshark-common/install-setuid boolean false' | debconf-set-selections 2>/dev/null || true
	@$(call apt_install,$(TEST_PACKAGES))

# Installs the Debian packages of $(1) that are missing, in one apt run.
apt_install = missing=""; for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then echo "installing:$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; fi

build: deps
	$(CARGO) build --release -p sonde

# The project's virtual environment: the Python package's test requirements (pyarrow, pandas,
# polars, DuckDB, NFStream, pytest, maturin).
python-env: deps
	@$(PYTHON) -c 'import ensurepip, venv' 2>/dev/null || \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv python3-dev >/dev/null; }
	@test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check -r python/requirements-test.txt

# The speed figures of docs/performance.md: the peers the harness runs against (valgrind for the
# instruction counts, softflowd, nfdump's nfpcapd), then the side-by-side table of the two bench
# traces and the reference mix's instructions per packet (issue 33's figure).
BENCH_PACKAGES := valgrind softflowd nfdump
bench: build
	@$(call apt_install,$(BENCH_PACKAGES))
	SONDE=$(abspath target/release/sonde) bench/compare-traces.sh
	SONDE=$(abspath target/release/sonde) bench/instructions.sh

# The Debian package of the release build (packaging/deb.sh: the binary, the systemd unit
# sonde@.service, /etc/sonde/example.toml, completions and manual pages) into target/deb/.
deb: build
	packaging/deb.sh target/release/sonde target/deb

# The wheel (packaging/wheel.sh): the Python package and the `sonde` command, the release
# builds, into target/wheels/.
wheel: build python-env
	MATURIN=$(abspath $(VENV))/bin/maturin packaging/wheel.sh target/release/sonde target/wheels

# The wheel installed into the environment (`import sonde`, and .venv/bin/sonde), then the
# package's example.
python: wheel
	$(VENV)/bin/pip install -q --disable-pip-version-check --no-deps --force-reinstall \
		$$(ls -t target/wheels/sonde-*.whl | head -1)
	$(VENV)/bin/sonde --version
	$(VENV)/bin/python python/examples/demo.py testdata/demo.pcap

# The README's first command: what the CLI needs, the CLI alone (release), its analysis of the
# trace the repo ships. `make python` adds the Python package and its example.
demo: build
	./target/release/sonde analyze -r testdata/demo.pcap -o demo-out --force
	@echo "sonde's outputs are in $(abspath demo-out)/ (the flow logs, the interval statistics; summary.json: the run)"

lint: format-check deps
	$(CARGO) clippy --workspace --all-targets -- -D warnings

format-check:
	$(CARGO) fmt --all -- --check
	cd fuzz && $(CARGO) fmt --all -- --check

# Clippy's lints while the tests are compiled: cargo runs clippy-driver (a rustc with clippy's
# lints) for the workspace's own crates only, warnings denied, so the code is compiled once, not
# once for clippy and again for the tests (CI's time).
CLIPPY_BUILD = RUSTC_WORKSPACE_WRAPPER=$(shell command -v clippy-driver) CLIPPY_ARGS=-Dwarnings

# The dashboard's browser test: node and npm (Debian's, unless some node is already installed),
# then playwright-core from the committed lock (no browser download: it drives Debian's chromium).
browser-deps: deps
	@command -v node >/dev/null && command -v npm >/dev/null || \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null; }
	cd tests/browser && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --silent

# A real Kafka broker's jars for tests/kafka.rs (Maven Central; skipped when present).
kafka-jars: deps
	tests/kafka/fetch.sh target/tmp/kafka-4.3.1

# Spark's Kafka source for `python -m sonde.spark merge` and python/tests/test_spark_merge.py: the
# connector's jars that pyspark (installed by python-env) does not ship (Maven Central; skipped
# when present).
spark-jars: python-env
	PYTHON=$(VENV)/bin/python tests/spark/fetch.sh target/tmp/spark-kafka-4.2.0

# GoFlow2, the collector crates/sonde/tests/ipfix.rs decodes sonde's IPFIX with, from the Go module proxy
# (skipped when the binary is there; delete it after changing the version).
goflow2:
	@test -x target/tmp/go-bin/goflow2 || { \
		command -v $(GO) >/dev/null || { echo "goflow2: go not found (set GO=/path/to/go)" >&2; exit 1; }; \
		GOBIN=$(abspath target/tmp/go-bin) $(GO) install github.com/netsampler/goflow2/v2/cmd/goflow2@v2.2.6; }

# Coverage-guided fuzzing (docs/fuzzing.md): cargo-afl from crates.io into ~/.cargo/bin, and the
# AFL++ it drives, built from the sources cargo-afl ships (a C compiler and make, no network)
# into ~/.local/share/afl.rs; each step is skipped when done. The targets are fuzz/'s own
# workspace, built instrumented into target/fuzz.
AFL_VERSION := 0.18.2
FUZZ_SECONDS ?= 600
FUZZ_TEST_SECONDS ?= 15
export FUZZ_TARGET_DIR ?= $(abspath target/fuzz)

fuzz-deps:
	@$(CARGO) afl --version 2>/dev/null | grep -q 'cargo-afl $(AFL_VERSION)' || \
		$(CARGO) install cargo-afl --locked --version $(AFL_VERSION)
	@out=$$($(CARGO) afl config --build 2>&1) || echo "$$out" | grep -q 'already built' || { echo "$$out" >&2; exit 1; }

# Every target for FUZZ_SECONDS (default 10 min) each, two at a time, the seven (`merged`
# too); one target: `fuzz/run.sh TARGET SECONDS`. Fails when a target found a crash, whose
# input it prints.
fuzz: fuzz-deps
	fuzz/run-all.sh $(FUZZ_SECONDS)

# make test's short run: FUZZ_TEST_SECONDS (15 s) per target, enough to catch a regression on
# the seeds and the paths near them. Built at opt-level 1 (a quarter less CPU to build from
# scratch, as fast for 15 s), apart from `make fuzz`'s opt-level 3 build so neither rebuilds
# the other. The six light targets only (the sonde-fuzz package): `merged` pulls Arrow and
# Parquet, about 20 min of CPU to build instrumented, and runs in `make fuzz`.
FUZZ_SHORT_TARGETS := capture wire flow define define_changes l7
fuzz-short: fuzz-short-build
	AFL_OPT_LEVEL=1 FUZZ_TARGET_DIR=$(abspath target/fuzz-short) fuzz/run-all.sh $(FUZZ_TEST_SECONDS) $(FUZZ_SHORT_TARGETS)

fuzz-short-build: fuzz-deps
	cd fuzz && AFL_OPT_LEVEL=1 CARGO_TARGET_DIR=$(abspath target/fuzz-short) $(CARGO) afl build --release --locked -p sonde-fuzz

# What the tests start or compare with, side by side: the downloads (npm, PyPI, Maven Central,
# the Go proxy, crates.io for cargo-afl) wait on the network together.
test-deps: test-packages
	$(MAKE) --no-print-directory -j6 format-check browser-deps python-env kafka-jars spark-jars goflow2

# The Python tests use the test profile's builds, so CI never builds the workspace in release:
# the CLI `cargo test` just built, and the extension linked from the same artifacts (built for
# the whole workspace, so that features resolve as for `cargo test`: `-p sonde-py` alone
# rebuilt Arrow and Parquet, 7 min) and put where maturin puts it (`maturin develop --profile
# test` would build a test harness instead).
test: test-deps
	@command -v clippy-driver >/dev/null || { echo "clippy-driver not found: rustup component add clippy" >&2; exit 1; }
	$(CLIPPY_BUILD) $(CARGO) test --workspace --no-run
	@# The fuzz targets' instrumented build (and cargo-afl, once per machine) runs beside the
	@# tests, which spend much of their time waiting (replays at set rates, brokers starting).
	@rm -f target/fuzz-short-build.rc; { $(MAKE) --no-print-directory fuzz-short-build > target/fuzz-short-build.log 2>&1; echo $$? > target/fuzz-short-build.rc; } &
	$(CLIPPY_BUILD) $(CARGO) test --workspace
	$(CLIPPY_BUILD) $(CARGO) build --profile test --workspace --lib --bins --tests --examples --benches
	cp target/debug/lib_sonde.so python/sonde/_sonde.abi3.so
	PYTHONPATH=python SONDE_BIN=$(abspath target/debug/sonde) $(VENV)/bin/python -m pytest -q python/tests
	@while [ ! -f target/fuzz-short-build.rc ]; do sleep 2; done; \
		[ "$$(cat target/fuzz-short-build.rc)" = 0 ] || { cat target/fuzz-short-build.log >&2; exit 1; }
	$(MAKE) --no-print-directory fuzz-short
