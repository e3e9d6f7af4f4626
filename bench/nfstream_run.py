#!/usr/bin/env python3
"""Runs NFStream over a pcap and counts the flows, for bench/compare.sh.

usage: nfstream_run.py TRACE [N_METERS]

N_METERS defaults to 1: one metering process, the one-core comparison. statistical_analysis
is off (NFStream's basic flow features only), and so is nDPI (n_dissections=0), so the row
measures flow metering, not application classification. Prints "flows N packets P", P being
the sum of the flows' packets, so the harness can check that the whole trace was read.
"""
import sys

from nfstream import NFStreamer


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    n_meters = int(sys.argv[2]) if len(sys.argv) == 3 else 1
    streamer = NFStreamer(source=sys.argv[1], statistical_analysis=False, n_dissections=0,
                          n_meters=n_meters)
    flows = packets = 0
    for flow in streamer:
        flows += 1
        packets += flow.bidirectional_packets
    print(f"flows {flows} packets {packets}")


if __name__ == "__main__":
    main()
