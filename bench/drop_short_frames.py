#!/usr/bin/env python3
"""Copies a little-endian classic pcap, leaving out frames captured shorter than an Ethernet
header (14 bytes).

usage: drop_short_frames.py IN.pcap OUT.pcap

tcptrace 6.6.7 dies with SIGSEGV on such runts, and the merged benchmark trace has a few
(captures cut at 4 bytes), so bench/make-traces.sh writes bench-tcptrace.pcap with this:
the same trace less those frames, to measure tcptrace side by side with sonde.
"""
import struct
import sys


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    kept = dropped = 0
    with open(sys.argv[1], 'rb') as f, open(sys.argv[2], 'wb') as out:
        header = f.read(24)
        if struct.unpack_from('<I', header)[0] not in (0xA1B2C3D4, 0xA1B23C4D):
            sys.exit('not a little-endian classic pcap')
        out.write(header)
        while True:
            rec = f.read(16)
            if len(rec) < 16:
                break
            caplen = struct.unpack_from('<I', rec, 8)[0]
            data = f.read(caplen)
            if caplen < 14:
                dropped += 1
                continue
            out.write(rec)
            out.write(data)
            kept += 1
    print(f'{sys.argv[2]}: kept {kept} frames, left out {dropped} shorter than 14 bytes', file=sys.stderr)


if __name__ == '__main__':
    main()
