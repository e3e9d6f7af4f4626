#!/usr/bin/env bash
# Live capture rate: replays a trace on a veth pair (in a network namespace made here, deleted on
# exit) into `sonde monitor` at increasing rates, AF_PACKET and libpcap side by side; per rate:
# packets sent, read by sonde, offered to its socket, dropped by the kernel. Beside them, the
# sender's own limit: the same senders at the same rate with nothing reading the veth ("alone").
# Then sonde analyze's offline rate on the same trace, for the ratio (docs/live.md).
#
#   bench/live_rate.sh [TRACE]     (root; iproute2, python3, bc; tcpreplay or gcc for txring)
#
# Environment: SONDE (default target/release/sonde), RATES (packets/s, "topspeed" for as fast
# as the sender goes), BACKENDS ("afpacket pcap"), READERS (a list: each value is a row, passed
# as `--readers N`; default "1"; above 1 AF_PACKET only, pcap rows are skipped), THREADS (sonde's
# workers per reader, default 1: on a 2-core machine the sender needs the other core), RING_MB
# (64), SENDER (tcpreplay: `tcpreplay -K`, a system call per packet; txring: bench/txring.c, built
# here with gcc, frames handed over in batches through an AF_PACKET transmit ring), SENDERS
# (sender processes sending the trace at once, each at the rate: 2 at topspeed push harder than
# one can; sent_pps adds their rates), LOOPS (times each sender sends the trace, default 1),
# ALONE (1: the "alone" rows, the senders without sonde, one per rate; 0: not run), MONITOR_ARGS
# (more options for sonde monitor, e.g. "--http 127.0.0.1:0").
# Two columns say where the machine's time went while the senders ran: sonde_cpu, the CPU
# seconds sonde spent (all its threads, user and system; the kernel's receive work in softirq
# is counted to whichever process its core was running), and idle, the share of the machine's CPU time (all cores)
# left idle. An idle near 0 % means the rate is the machine's, not sonde's.
set -euo pipefail

SONDE=${SONDE:-target/release/sonde}
TRACE=${1:-/tmp/live-bench/bench300k.pcap}
RATES=${RATES:-"25000 50000 100000 150000 200000 topspeed"}
BACKENDS=${BACKENDS:-"afpacket pcap"}
READERS=${READERS:-1}
THREADS=${THREADS:-1}
RING_MB=${RING_MB:-64}
SENDER=${SENDER:-tcpreplay}
SENDERS=${SENDERS:-1}
LOOPS=${LOOPS:-1}
ALONE=${ALONE:-1}
read -r -a MONITOR_ARGS <<<"${MONITOR_ARGS:-}"
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NS=sonde-bench-$$
WORK=$(mktemp -d)

cleanup() {
    ip netns del "$NS" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

die() { echo "live_rate.sh: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root"
[ -r "$TRACE" ] || die "$TRACE: no such trace"
case $SENDER in
    tcpreplay) command -v tcpreplay >/dev/null || die "SENDER=tcpreplay: tcpreplay is not installed" ;;
    txring)
        command -v gcc >/dev/null || die "SENDER=txring: gcc is needed to build bench/txring.c"
        TXRING=$WORK/txring
        gcc -std=c11 -O2 -Wall -Wextra -o "$TXRING" "$BENCH_DIR/txring.c" ;;
    *) die "SENDER=$SENDER: tcpreplay or txring" ;;
esac
SONDE=$(realpath "$SONDE")
ip netns add "$NS"
ip netns exec "$NS" sysctl -qw net.ipv6.conf.default.disable_ipv6=1
ip -n "$NS" link add va type veth peer name vb
for i in va vb; do ip -n "$NS" link set "$i" mtu 9000 up; done

json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }

# send RATE: SENDERS sender processes on vb at once, each sending the trace LOOPS times at RATE;
# sets `sent` (packets, all senders) and `sent_pps` (their rates added).
send() {
    local rate=$1 s pids=() speed=()
    rm -f "$WORK"/send.*
    for s in $(seq "$SENDERS"); do
        if [ "$SENDER" = txring ]; then
            [ "$rate" = topspeed ] || speed=(--pps "$rate")
            ip netns exec "$NS" "$TXRING" --loops "$LOOPS" ${speed[@]+"${speed[@]}"} vb "$TRACE" >"$WORK/send.$s" 2>&1 &
        else
            if [ "$rate" = topspeed ]; then speed=(--topspeed); else speed=(--pps "$rate"); fi
            ip netns exec "$NS" tcpreplay -K --loop "$LOOPS" -i vb "${speed[@]}" "$TRACE" >"$WORK/send.$s" 2>&1 &
        fi
        pids+=($!)
    done
    for s in "${pids[@]}"; do
        wait "$s" || { cat "$WORK"/send.* >&2; die "$SENDER failed"; }
    done
    local out
    out=$(cat "$WORK"/send.*)
    if [ "$SENDER" = txring ]; then
        sent=$(sed -n 's/^txring: sent \([0-9]*\) frames.*/\1/p' <<<"$out" | paste -sd+ | bc)
        sent_pps=$(sed -n 's/^txring: .* \([0-9.]*\) packets\/s.*/\1/p' <<<"$out" | paste -sd+ | bc)
    else
        sent=$(sed -n 's/.*Actual: \([0-9]*\) packets.*/\1/p' <<<"$out" | paste -sd+ | bc)
        sent_pps=$(sed -n 's/.*Rated: [0-9.]* Bps, [0-9.]* Mbps, \([0-9.]*\) pps.*/\1/p' <<<"$out" | paste -sd+ | bc)
    fi
    [ -n "$sent" ] && [ -n "$sent_pps" ] || { echo "$out" >&2; die "no count in $SENDER's output"; }
}

echo "sender: $SENDER, $SENDERS at once, each sending $TRACE $LOOPS time(s)"
row='%-9s %-7s %-9s %10.0f %10s %10s %10s %10s %10s %9s %6s\n'
printf '%-9s %-7s %-9s %10s %10s %10s %10s %10s %10s %9s %6s\n' backend readers asked_pps sent_pps sent read offered dropped alone_pps sonde_cpu idle

# cpu_ticks: "busy idle" jiffies of the whole machine (/proc/stat, iowait counted idle).
cpu_ticks() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9, $5+$6; exit}' /proc/stat; }
# proc_ticks PID: user+system jiffies of a process, all its threads.
proc_ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
idle_share() { # idle_share "BUSY0 IDLE0" "BUSY1 IDLE1"
    local b0 i0 b1 i1
    read -r b0 i0 <<<"$1"; read -r b1 i1 <<<"$2"
    awk -v b=$((b1 - b0)) -v i=$((i1 - i0)) 'BEGIN{printf "%.0f%%", b + i ? 100 * i / (b + i) : 0}'
}
HZ=$(getconf CLK_TCK)
declare -A alone
for rate in $RATES; do
    alone[$rate]=-
    [ "$ALONE" = 1 ] || continue
    m0=$(cpu_ticks)
    send "$rate"
    m1=$(cpu_ticks)
    alone[$rate]=$(printf '%.0f' "$sent_pps")
    printf "$row" alone - "$rate" "$sent_pps" "$sent" - - - - - "$(idle_share "$m0" "$m1")"
done
for backend in $BACKENDS; do
    for readers in $READERS; do
        if [ "$backend" != afpacket ] && [ "$readers" != 1 ]; then
            echo "live_rate.sh: $backend with --readers $readers skipped (several readers are AF_PACKET's PACKET_FANOUT)" >&2
            continue
        fi
        for rate in $RATES; do
            out="$WORK/$backend-$readers-$rate"
            ip netns exec "$NS" "$SONDE" monitor -i va --capture "$backend" --ring-mb "$RING_MB" \
                --readers "$readers" --threads "$THREADS" --force -o "$out" ${MONITOR_ARGS[@]+"${MONITOR_ARGS[@]}"} \
                2>"$WORK/stderr" >/dev/null &
            pid=$!
            until grep -q "capturing on" "$WORK/stderr" 2>/dev/null; do
                kill -0 "$pid" 2>/dev/null || { cat "$WORK/stderr" >&2; exit 1; }
                sleep 0.05
            done
            m0=$(cpu_ticks); p0=$(proc_ticks "$pid")
            send "$rate"
            m1=$(cpu_ticks); p1=$(proc_ticks "$pid")
            sleep 0.5
            kill -INT "$pid"
            wait "$pid"
            read_pkts=$(json "$out/summary.json" 'd["packets"]["read"]')
            offered=$(json "$out/summary.json" 'd["capture"]["received_pkts"]')
            dropped=$(json "$out/summary.json" 'd["capture"]["dropped_pkts"]')
            printf "$row" "$backend" "$readers" "$rate" "$sent_pps" "$sent" "$read_pkts" "$offered" "$dropped" "${alone[$rate]}" \
                "$(awk -v t=$((p1 - p0)) -v hz="$HZ" 'BEGIN{printf "%.2f", t / hz}')" "$(idle_share "$m0" "$m1")"
        done
    done
done

"$SONDE" analyze -q --force --threads "$THREADS" -r "$TRACE" -o "$WORK/offline"
echo "offline: $(json "$WORK/offline/summary.json" 'round(d["rates"]["packets_per_s"])') packets/s" \
    "(sonde analyze --threads $THREADS, elapsed time, $(json "$WORK/offline/summary.json" 'd["packets"]["read"]') packets)"
