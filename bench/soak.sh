#!/usr/bin/env bash
# Soak: `sonde monitor` with every output that runs for months on (--spool with a quota,
# --store, --http, --kafka to a real broker, --ipfix to nfcapd), fed in a network namespace by
# tcpreplay looping a real merged trace with its addresses rewritten on every loop
# (`--unique-ip`: the flows keep being new), with the interval, the rotation and the idle
# timeouts scaled down so that an hour of wall time holds many rotations and timeout
# generations. Every SAMPLE seconds bench/soak.py records the monitor's resident memory, open
# descriptors, open flows, packets, spool bytes and exports into soak.csv; at the end it draws
# soak.svg and checks the run (docs/reliability.md, "Soak"): memory flat after the warm-up
# (slope <= MAX_SLOPE_MB_H), descriptors constant, the spool within its quota, every packet sent
# read or counted as dropped (the capture's counters at the end: the spool's chunks do not hold
# them), every Kafka and IPFIX record delivered or counted. Exit 1 if not.
#
#   bench/soak.sh [SECONDS]       (root; tcpreplay, nfdump, java + maven for the broker)
#
# Environment: SONDE (default target/release/sonde), TRACE (default: /tmp/sonde-soak/soak.pcap,
# made from ../shared/traces by the shared mergetrace tool), RATE (packets/s, default 20000),
# SAMPLE (seconds between samples, default 10), WARMUP (seconds left out of the slope, default
# a fifth of the run), WINDOW (the slope is fitted to the lowest sample of each WINDOW seconds,
# the floor of the saw-tooth the chunks make; default five rotations; 0: every sample), OUT
# (where soak.csv, soak.svg, report.txt and the run go; default
# /tmp/sonde-soak/run-DATE), QUOTA (spool quota, default 64M), MAX_SLOPE_MB_H (default 1),
# DNS_CACHE (the monitor's --dns-cache, default 10000: scaled down like the timeouts, so that
# the cache is full, and the memory with it, within the warm-up; its default 100,000 fills in
# about 15 minutes at 20,000 packets/s), ROTATE (the monitor's --rotate, default 60 s: the
# flow lines of a chunk are held until it is written, a saw-tooth of that period).
# A mover (soak.py's --keep-chunks 2) takes the complete chunks away as the spool's quota
# expects (docs/spool.md: a quota is a threshold; data is never dropped for it).
set -euo pipefail

REPO_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SECONDS_WANTED=${1:-3600}
SONDE=$(realpath "${SONDE:-$REPO_DIR/target/release/sonde}")
RATE=${RATE:-20000}
SAMPLE=${SAMPLE:-10}
WARMUP=${WARMUP:-$((SECONDS_WANTED / 5))}
QUOTA=${QUOTA:-64M}
DNS_CACHE=${DNS_CACHE:-10000}
ROTATE=${ROTATE:-60}
WINDOW=${WINDOW:-$((5 * ROTATE))}
MAX_SLOPE_MB_H=${MAX_SLOPE_MB_H:-1}
OUT=${OUT:-/tmp/sonde-soak/run-$(date -u +%Y%m%dT%H%M%S)}
TRACE=${TRACE:-/tmp/sonde-soak/soak.pcap}
KAFKA_DIR=${KAFKA_DIR:-$REPO_DIR/target/kafka-4.3.1}
NS=sonde-soak-$$

[ "$(id -u)" = 0 ] || { echo "soak.sh: needs root (a network namespace)" >&2; exit 1; }
for tool in tcpreplay nfcapd nfdump java ip; do
    command -v "$tool" >/dev/null || { echo "soak.sh: $tool not found (make deps installs it)" >&2; exit 1; }
done
mkdir -p "$OUT"
OUT=$(realpath "$OUT")
if [[ ! -s $TRACE ]]; then
    mkdir -p "$(dirname "$TRACE")"
    bash "$REPO_DIR/../shared/tools/mergetrace/make-bench-trace.sh" "$TRACE" 60000 3 >&2
fi
"$REPO_DIR/tests/kafka/fetch.sh" "$KAFKA_DIR"

pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    ip netns del "$NS" 2>/dev/null || true
}
trap cleanup EXIT

ip netns add "$NS"
ip netns exec "$NS" sysctl -qw net.ipv6.conf.default.disable_ipv6=1
ip -n "$NS" link set lo up
ip -n "$NS" link add va type veth peer name vb
for i in va vb; do ip -n "$NS" link set "$i" mtu 9000 up; done
in_ns() { ip netns exec "$NS" "$@"; }

# The broker (KRaft, one node) on the namespace's loopback, as the tests start it.
KPORT=39092 KCTL=39093
mkdir -p "$OUT/kafka/logs"
cat >"$OUT/kafka/server.properties" <<EOF
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$KCTL
listeners=PLAINTEXT://127.0.0.1:$KPORT,CONTROLLER://127.0.0.1:$KCTL
advertised.listeners=PLAINTEXT://127.0.0.1:$KPORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$OUT/kafka/logs
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
EOF
printf 'rootLogger.level=warn\nrootLogger.appenderRef.out.ref=out\nappender.out.type=Console\nappender.out.name=out\nappender.out.layout.type=PatternLayout\nappender.out.layout.pattern=%%d %%p %%c: %%m%%n\n' \
    >"$OUT/kafka/log4j2.properties"
KAFKA=(java -Xmx512m -Dlog4j2.configurationFile="$OUT/kafka/log4j2.properties" -cp "$KAFKA_DIR/lib/*")
"${KAFKA[@]}" kafka.tools.StorageTool format -t MkU3OEVBNTcwNTJENDM2Qg -c "$OUT/kafka/server.properties" >/dev/null
# (Started with `ip netns exec` itself, which execs the command: `$!` is the process.)
ip netns exec "$NS" "${KAFKA[@]}" kafka.Kafka "$OUT/kafka/server.properties" >"$OUT/kafka/broker.log" 2>&1 &
pids+=($!)
for _ in $(seq 180); do
    in_ns "$SONDE" control status --timeout 2 --kafka 127.0.0.1:$KPORT >/dev/null 2>&1 && break
    sleep 0.5
done

# nfcapd: a new file a minute.
NPORT=39995
mkdir -p "$OUT/nfcapd"
ip netns exec "$NS" nfcapd -b 127.0.0.1 -p $NPORT -w "$OUT/nfcapd" -t 60 -B 8000000 >"$OUT/nfcapd.log" 2>&1 &
NFCAPD_PID=$!
pids+=($NFCAPD_PID)

# The monitor: 10 s intervals, a chunk a minute, flows idle 30 s (TCP) and 15 s (UDP) end.
ip netns exec "$NS" "$SONDE" monitor -i va --capture afpacket --force -o "$OUT/monitor" --threads 1 \
    --interval 10 --rotate "$ROTATE" --tcp-timeout 30 --udp-timeout 15 --dns-cache "$DNS_CACHE" \
    --spool "$OUT/spool:$QUOTA" --store "$OUT/link.rrd" --store-archives 10s:1h,1m:1d --http 127.0.0.1:39080 \
    --kafka 127.0.0.1:$KPORT --ipfix udp://127.0.0.1:$NPORT \
    >"$OUT/monitor.out" 2>"$OUT/monitor.err" &
MONITOR_PID=$!
pids+=($MONITOR_PID)
until grep -q "capturing on" "$OUT/monitor.err" 2>/dev/null; do
    kill -0 $MONITOR_PID 2>/dev/null || { cat "$OUT/monitor.err" >&2; exit 1; }
    sleep 0.1
done

ip netns exec "$NS" tcpreplay -K -i vb --pps "$RATE" --loop 0 --unique-ip "$TRACE" >"$OUT/tcpreplay.out" 2>&1 &
REPLAY_PID=$!
pids+=($REPLAY_PID)

in_ns python3 "$REPO_DIR/bench/soak.py" sample --pid "$MONITOR_PID" --http http://127.0.0.1:39080 \
    --spool "$OUT/spool" --keep-chunks 2 --every "$SAMPLE" --for "$SECONDS_WANTED" --csv "$OUT/soak.csv"

# Stop the sender, let the link drain, then the monitor (SIGTERM: every output written).
kill -INT $REPLAY_PID 2>/dev/null || true
wait $REPLAY_PID 2>/dev/null || true
sleep 2
kill -TERM $MONITOR_PID
wait $MONITOR_PID || { echo "soak.sh: the monitor did not exit 0" >&2; cat "$OUT/monitor.err" >&2; exit 1; }
sleep 2
# Kafka's end offsets: what the broker holds.
in_ns "${KAFKA[@]}" org.apache.kafka.tools.GetOffsetShell --bootstrap-server 127.0.0.1:$KPORT \
    >"$OUT/kafka-offsets.txt" 2>"$OUT/kafka-offsets.err" || true
# nfcapd writes its last file when stopped.
kill -TERM $NFCAPD_PID 2>/dev/null || true
wait $NFCAPD_PID 2>/dev/null || true
sleep 2
nfdump -R "$OUT/nfcapd" -q -o csv 2>/dev/null | grep -c . >"$OUT/nfdump-records.txt" || true
nfdump -I -R "$OUT/nfcapd" >"$OUT/nfdump-stat.txt" 2>/dev/null || true

python3 "$REPO_DIR/bench/soak.py" check --dir "$OUT" --warmup "$WARMUP" --max-slope "$MAX_SLOPE_MB_H" \
    --quota "$QUOTA" --window "$WINDOW" | tee "$OUT/report.txt"
