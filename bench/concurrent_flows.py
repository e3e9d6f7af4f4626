#!/usr/bin/env python3
"""Writes a pcap in which K TCP connections are open at the same time.

usage: concurrent_flows.py K PACKETS OUT.pcap

Answers "how does a probe's cost grow with the number of concurrent flows" (the NetSniff
question): every flow opens (SYN, SYN/ACK, ACK), then the K flows exchange data round-robin
(client data segment, server ACK), so all K are live in the flow table for the whole trace
and each packet touches a different flow than the previous one (no cache locality for the
probe). At the end every flow closes (FIN, FIN/ACK, ACK). Each flow gets at least 4 data
segments, so the trace has at least 14*K packets whatever PACKETS asks for.

Output: little-endian microsecond pcap, Ethernet, IPv4, valid IP and TCP checksums.
Client i is 10.0.0.0 + 1 + i/50000 : 10000 + i%50000, server 192.0.2.0 + 1 + i%200 : 80 —
distinct 5-tuples for K up to tens of millions. Packets are 1 us apart.
Pure Python (struct); about 1 us of CPU per packet... times ten: ~10 s per million packets.
"""
import struct
import sys

PAYLOAD = 100  # bytes of data per data segment (zeros: contributes nothing to checksums)
MIN_DATA = 4   # data segments per flow, at least
SYN, ACK, FIN, PSH = 0x02, 0x10, 0x01, 0x08

PCAP_HDR = struct.pack('<IHHiIII', 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
REC = struct.Struct('<IIII')
# Ethernet + IPv4 (no options) + TCP (no options), network byte order.
FRAME = struct.Struct('>6s6sH BBHHHBBH4s4s HHIIBBHHH')
MAC_C, MAC_S = b'\x02\x00\x00\x00\x00\x01', b'\x02\x00\x00\x00\x00\x02'


def fold(s):
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s


class Writer:
    def __init__(self, out):
        self.out = out
        self.buf = bytearray()
        self.t = 1_700_000_000 * 1_000_000  # microseconds
        self.n = 0
        self.zeros = bytes(PAYLOAD)

    def packet(self, src, dst, sport, dport, seq, ack, flags, plen, to_server):
        iplen = 40 + plen
        # IPv4 header checksum: fixed fields 0x4500, ttl/proto 0x4006, DF flag 0x4000.
        ipsum = 0x4500 + iplen + 0x4000 + 0x4006 + (src >> 16) + (src & 0xFFFF) + (dst >> 16) + (dst & 0xFFFF)
        ipck = ~fold(ipsum) & 0xFFFF
        # TCP checksum over the pseudo-header and the header (payload is zeros).
        tsum = ((src >> 16) + (src & 0xFFFF) + (dst >> 16) + (dst & 0xFFFF) + 6 + 20 + plen
                + sport + dport + (seq >> 16) + (seq & 0xFFFF) + (ack >> 16) + (ack & 0xFFFF)
                + (0x5000 | flags) + 65535)
        tck = ~fold(tsum) & 0xFFFF
        macs = (MAC_S, MAC_C) if to_server else (MAC_C, MAC_S)
        t = self.t
        self.t += 1
        buf = self.buf
        buf += REC.pack(t // 1_000_000, t % 1_000_000, 14 + iplen, 14 + iplen)
        buf += FRAME.pack(macs[0], macs[1], 0x0800,
                          0x45, 0, iplen, 0, 0x4000, 64, 6, ipck,
                          src.to_bytes(4, 'big'), dst.to_bytes(4, 'big'),
                          sport, dport, seq, ack, 0x50, flags, 65535, tck, 0)
        if plen:
            buf += self.zeros
        self.n += 1
        if len(buf) > 1 << 22:
            self.out.write(buf)
            buf.clear()

    def close(self):
        self.out.write(self.buf)
        self.buf.clear()


def endpoints(i):
    cip = 0x0A000001 + i // 50000
    sip = 0xC0000201 + i % 200
    return cip, sip, 10000 + i % 50000, 80


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    k, packets, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    if k < 1:
        sys.exit('K must be >= 1')
    # 6 packets of handshake + teardown per flow, 2 per data round.
    rounds = max(MIN_DATA, (packets // k - 6 + 1) // 2)
    isn_c, isn_s = 1000, 5000
    with open(path, 'wb') as f:
        f.write(PCAP_HDR)
        w = Writer(f)
        pk = w.packet
        eps = [endpoints(i) for i in range(k)]
        # Open every flow: all K are live before the data starts.
        for cip, sip, cp, sp in eps:
            pk(cip, sip, cp, sp, isn_c, 0, SYN, 0, True)
            pk(sip, cip, sp, cp, isn_s, isn_c + 1, SYN | ACK, 0, False)
            pk(cip, sip, cp, sp, isn_c + 1, isn_s + 1, ACK, 0, True)
        # Data rounds: flow after flow, so consecutive packets always hit different flows.
        for r in range(rounds):
            seq = isn_c + 1 + r * PAYLOAD
            for cip, sip, cp, sp in eps:
                pk(cip, sip, cp, sp, seq, isn_s + 1, PSH | ACK, PAYLOAD, True)
                pk(sip, cip, sp, cp, isn_s + 1, seq + PAYLOAD, ACK, 0, False)
        # Close every flow.
        fin = isn_c + 1 + rounds * PAYLOAD
        for cip, sip, cp, sp in eps:
            pk(cip, sip, cp, sp, fin, isn_s + 1, FIN | ACK, 0, True)
            pk(sip, cip, sp, cp, isn_s + 1, fin + 1, FIN | ACK, 0, False)
            pk(cip, sip, cp, sp, fin + 1, isn_s + 2, ACK, 0, True)
        w.close()
    print(f'{path}: {k} flows, {rounds} data segments each, {w.n} packets', file=sys.stderr)


if __name__ == '__main__':
    main()
