#!/usr/bin/env bash
# Live capture rate: replays a trace with tcpreplay on a veth pair (in a network namespace made
# here, deleted on exit) into `sonde monitor` at increasing rates, AF_PACKET and libpcap side by
# side; per rate: packets sent, read by sonde, offered to its socket, dropped by the kernel.
# Then sonde analyze's offline rate on the same trace, for the ratio (docs/live.md).
#
#   bench/live_rate.sh [TRACE]     (root; tcpreplay, iproute2, python3)
#
# Environment: SONDE (default target/release/sonde), RATES (packets/s, "topspeed" for as fast
# as tcpreplay goes), BACKENDS ("afpacket pcap"), THREADS (sonde's workers, default 1: on a
# 2-core machine tcpreplay needs the other core), RING_MB (64), SENDERS (tcpreplay processes
# sending the trace at once, each at the rate: 2 at topspeed push harder than one can),
# MONITOR_ARGS (more options for sonde monitor, e.g. "--http 127.0.0.1:0").
set -euo pipefail

SONDE=${SONDE:-target/release/sonde}
TRACE=${1:-/tmp/live-bench/bench300k.pcap}
RATES=${RATES:-"25000 50000 100000 150000 200000 topspeed"}
BACKENDS=${BACKENDS:-"afpacket pcap"}
THREADS=${THREADS:-1}
RING_MB=${RING_MB:-64}
SENDERS=${SENDERS:-1}
read -r -a MONITOR_ARGS <<<"${MONITOR_ARGS:-}"
NS=sonde-bench-$$
WORK=$(mktemp -d)

cleanup() {
    ip netns del "$NS" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

[ "$(id -u)" = 0 ] || { echo "live_rate.sh: needs root" >&2; exit 1; }
SONDE=$(realpath "$SONDE")
ip netns add "$NS"
ip netns exec "$NS" sysctl -qw net.ipv6.conf.default.disable_ipv6=1
ip -n "$NS" link add va type veth peer name vb
for i in va vb; do ip -n "$NS" link set "$i" mtu 9000 up; done

json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }

printf '%-9s %-9s %10s %10s %10s %10s %10s\n' backend asked_pps sent_pps sent read offered dropped
for backend in $BACKENDS; do
    for rate in $RATES; do
        out="$WORK/$backend-$rate"
        ip netns exec "$NS" "$SONDE" monitor -i va --capture "$backend" --ring-mb "$RING_MB" \
            --threads "$THREADS" --force -o "$out" ${MONITOR_ARGS[@]+"${MONITOR_ARGS[@]}"} 2>"$WORK/stderr" >/dev/null &
        pid=$!
        until grep -q "capturing on" "$WORK/stderr" 2>/dev/null; do
            kill -0 "$pid" 2>/dev/null || { cat "$WORK/stderr" >&2; exit 1; }
            sleep 0.05
        done
        if [ "$rate" = topspeed ]; then speed=(--topspeed); else speed=(--pps "$rate"); fi
        senders=()
        for s in $(seq "$SENDERS"); do
            ip netns exec "$NS" tcpreplay -K -i vb "${speed[@]}" "$TRACE" >"$WORK/replay.$s" 2>&1 &
            senders+=($!)
        done
        wait "${senders[@]}"
        replay=$(cat "$WORK"/replay.*)
        sleep 0.5
        kill -INT "$pid"
        wait "$pid"
        sent=$(sed -n 's/.*Actual: \([0-9]*\) packets.*/\1/p' <<<"$replay" | paste -sd+ | bc)
        sent_pps=$(sed -n 's/.*Rated: [0-9.]* Bps, [0-9.]* Mbps, \([0-9.]*\) pps.*/\1/p' <<<"$replay" | paste -sd+ | bc)
        read_pkts=$(json "$out/summary.json" 'd["packets"]["read"]')
        offered=$(json "$out/summary.json" 'd["capture"]["received_pkts"]')
        dropped=$(json "$out/summary.json" 'd["capture"]["dropped_pkts"]')
        printf '%-9s %-9s %10.0f %10s %10s %10s %10s\n' "$backend" "$rate" "$sent_pps" "$sent" "$read_pkts" "$offered" "$dropped"
    done
done

"$SONDE" analyze -q --force --threads "$THREADS" -r "$TRACE" -o "$WORK/offline"
echo "offline: $(json "$WORK/offline/summary.json" 'round(d["rates"]["packets_per_s"])') packets/s" \
    "(sonde analyze --threads $THREADS, elapsed time, $(json "$WORK/offline/summary.json" 'd["packets"]["read"]') packets)"
