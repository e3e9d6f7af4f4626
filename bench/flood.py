#!/usr/bin/env python3
"""Writes a flood as a pcap (Ethernet, microseconds), for tests/floods.rs and bench/floods.sh.

    flood.py KIND PACKETS OUT.pcap [--pps N] [--seed S]

KIND:
  syn         SYNs from random sources and ports to one server: every packet a new flow
  udp         UDP datagrams from random sources and ports: every packet a new flow
  scan        one source sweeping TCP ports 1-65535 over a /16 (a horizontal and vertical scan)
  frag        IPv4 fragments of UDP datagrams with random IDs, first and later fragments apart
              (the later ones carry no ports: decode and count, no flow)
  concurrent  PACKETS/2 UDP flows all open at once: each sends one datagram, then each another
"""
import random
import struct
import sys

ETH = b"\x00\x11\x22\x33\x44\x55\x66\x77\x88\x99\xaa\xbb\x08\x00"


def ipv4(src, dst, proto, payload, ident=0, frag=0):
    total = 20 + len(payload)
    header = struct.pack("!BBHHHBBH4s4s", 0x45, 0, total, ident, frag, 64, proto, 0, src, dst)
    return header + payload


def tcp_syn(sport, dport, seq):
    return struct.pack("!HHIIBBHHH", sport, dport, seq, 0, 0x50, 0x02, 65535, 0, 0)


def udp(sport, dport, payload):
    return struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload


def addr(n):
    return struct.pack("!I", n)


def frames(kind, n, rng):
    server = addr(0xC0000201)  # 192.0.2.1
    if kind == "syn":
        for i in range(n):
            src = addr(rng.getrandbits(32) | 0x01000000)
            yield ipv4(src, server, 6, tcp_syn(rng.randrange(1024, 65536), 80, rng.getrandbits(32)), i & 0xFFFF)
    elif kind == "udp":
        for i in range(n):
            src = addr(rng.getrandbits(32) | 0x01000000)
            yield ipv4(src, server, 17, udp(rng.randrange(1024, 65536), 53, b"\x00" * 12), i & 0xFFFF)
    elif kind == "scan":
        scanner = addr(0xC6336401)  # 198.51.100.1
        for i in range(n):
            port, host = i % 65535 + 1, (i // 65535) % 65536
            dst = addr(0x0A000000 | host)
            yield ipv4(scanner, dst, 6, tcp_syn(40000 + i % 1000, port, i), i & 0xFFFF)
    elif kind == "frag":
        for i in range(n):
            src = addr(0x0A000000 | rng.getrandbits(24))
            ident = rng.getrandbits(16)
            if i % 2 == 0:  # a first fragment: the UDP header, more fragments follow
                yield ipv4(src, server, 17, udp(rng.randrange(1024, 65536), 5060, b"x" * 24), ident, 0x2000)
            else:  # a later fragment at offset 32 bytes
                yield ipv4(src, server, 17, b"y" * 32, ident, 4)
    elif kind == "concurrent":
        flows = n // 2
        for round_ in range(2):
            for f in range(flows):
                src = addr(0x0A000000 | (f >> 8 & 0xFFFF) << 8 | 1)
                yield ipv4(src, server, 17, udp(1024 + (f & 0xFF), 4000, b"r%d" % round_), f & 0xFFFF)
    else:
        sys.exit(f"unknown kind {kind!r}")


def main():
    args = sys.argv[1:]
    opts = {"--pps": "100000", "--seed": "1"}
    while len(args) > 3 and args[-2] in opts:
        opts[args[-2]] = args[-1]
        args = args[:-2]
    if len(args) != 3:
        sys.exit(__doc__)
    kind, n, out = args[0], int(args[1]), args[2]
    pps, rng = int(opts["--pps"]), random.Random(int(opts["--seed"]))
    with open(out, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        t0 = 1_700_000_000 * 1_000_000
        buf = []
        for i, packet in enumerate(frames(kind, n, rng)):
            frame = ETH + packet
            us = t0 + i * 1_000_000 // pps
            buf.append(struct.pack("<IIII", us // 1_000_000, us % 1_000_000, len(frame), len(frame)) + frame)
            if len(buf) == 65536:
                f.write(b"".join(buf))
                buf.clear()
        f.write(b"".join(buf))


if __name__ == "__main__":
    main()
