#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora (fuzz/seeds/<target>/), made here from scratch.

Small, valid inputs for each target's input format (see fuzz/fuzz_targets/*.rs): traces in
every format the capture readers take (plain and compressed), frames of every link type and
tunnel, TCP and UDP conversations, definitions and changes, application messages. The QUIC
Initial is RFC 9001 Appendix A.2's, read from sonde-l7's own test vectors; the definitions
from the project's definitions/ and docs. Run from anywhere: `python3 fuzz/seeds/gen.py`.
Deterministic: rerunning gives the same files (gzip's header time is fixed).
"""

import gzip
import lzma
import os
import re
import shutil
import struct
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def put(target, name, data):
    d = os.path.join(HERE, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


# ---- packets -------------------------------------------------------------------------------

def ipv4(proto, l4, src=b"\x0a\x00\x00\x01", dst=b"\x0a\x00\x00\x02", ttl=64, frag=0x4000):
    return struct.pack(">BBHHHBBH", 0x45, 0, 20 + len(l4), 0x1234, frag, ttl, proto, 0) + src + dst + l4


def ipv6(nxt, l4, src=b"\x20\x01" + b"\x00" * 13 + b"\x01", dst=b"\x20\x01" + b"\x00" * 13 + b"\x02"):
    return struct.pack(">IHBB", 0x60000000, len(l4), nxt, 64) + src + dst + l4


def tcp(sport=50000, dport=443, seq=1, ack=0, flags=0x02, payload=b"", opts=b""):
    opts = opts + b"\x01" * (-len(opts) % 4)
    hl = (20 + len(opts)) // 4
    return struct.pack(">HHIIBBHHH", sport, dport, seq, ack, hl << 4, flags, 65535, 0, 0) + opts + payload


SYN_OPTS = b"\x02\x04\x05\xb4\x04\x02\x08\x0a\x00\x00\x00\x01\x00\x00\x00\x00\x01\x03\x03\x07"


def udp(sport, dport, payload):
    return struct.pack(">HHHH", sport, dport, 8 + len(payload), 0) + payload


def icmp(t, c, rest=b"\x00\x01\x00\x01"):
    return struct.pack(">BBH", t, c, 0) + rest


def ether(ethertype, payload, vlans=()):
    h = b"\x00\x01\x02\x03\x04\x05\x00\x0a\x0b\x0c\x0d\x0e"
    for v in vlans:
        h += struct.pack(">HH", 0x8100, v)
    return h + struct.pack(">H", ethertype) + payload


def gre(inner, proto=0x0800):
    return struct.pack(">HH", 0, proto) + inner


def vxlan(inner_frame):
    return udp(40000, 4789, b"\x08\x00\x00\x00\x00\x00\x64\x00" + inner_frame)


def gtpu(inner):
    return udp(2152, 2152, struct.pack(">BBHI", 0x30, 0xFF, len(inner), 1) + inner)


# ---- application messages ------------------------------------------------------------------

def tls_client_hello(sni=b"example.org"):
    sni_ext = struct.pack(">HHHBH", 0, len(sni) + 5, len(sni) + 3, 0, len(sni)) + sni
    alpn = b"\x02h2\x08http/1.1"
    alpn_ext = struct.pack(">HHH", 16, len(alpn) + 2, len(alpn)) + alpn
    versions = struct.pack(">HHB", 43, 5, 4) + b"\x03\x04\x03\x03"
    groups = struct.pack(">HHH", 10, 6, 4) + b"\x00\x1d\x00\x17"
    sigalgs = struct.pack(">HHH", 13, 6, 4) + b"\x04\x03\x08\x04"
    exts = sni_ext + alpn_ext + versions + groups + sigalgs
    body = b"\x03\x03" + bytes(range(32)) + b"\x00" + struct.pack(">H", 4) + b"\x13\x01\xc0\x2f" + b"\x01\x00"
    body += struct.pack(">H", len(exts)) + exts
    hs = b"\x01" + struct.pack(">I", len(body))[1:] + body
    return b"\x16\x03\x01" + struct.pack(">H", len(hs)) + hs


def tls_server_hello():
    exts = struct.pack(">HHH", 43, 2, 0x0304)
    body = b"\x03\x03" + bytes(range(32, 64)) + b"\x00" + b"\x13\x01" + b"\x00" + struct.pack(">H", len(exts)) + exts
    hs = b"\x02" + struct.pack(">I", len(body))[1:] + body
    return b"\x16\x03\x03" + struct.pack(">H", len(hs)) + hs + b"\x17\x03\x03\x00\x05hello"


def dns_name(name):
    return b"".join(bytes([len(p)]) + p for p in name.split(b".")) + b"\x00"


def dns_query(name=b"example.org", qid=0x1234):
    return struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0) + dns_name(name) + struct.pack(">HH", 1, 1)


def dns_response(name=b"example.org", qid=0x1234):
    q = dns_name(name) + struct.pack(">HH", 1, 1)
    a = b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 300, 4) + b"\x5d\xb8\xd8\x22"
    a6 = b"\xc0\x0c" + struct.pack(">HHIH", 28, 1, 300, 16) + b"\x26\x06" + b"\x00" * 13 + b"\x01"
    return struct.pack(">HHHHHH", qid, 0x8180, 1, 2, 0, 0) + q + a + a6


def rtp(seq, ts, ssrc=0xDEADBEEF, pt=0, payload=b"\xff" * 160):
    return struct.pack(">BBHII", 0x80, pt, seq, ts, ssrc) + payload


def rtcp_sr(ssrc=0xDEADBEEF):
    return struct.pack(">BBHIIIIII", 0x80, 200, 6, ssrc, 0, 0, 0, 0, 0)


HTTP_REQ = b"GET /index.html HTTP/1.1\r\nHost: example.org\r\nUser-Agent: sonde-fuzz\r\n\r\n"
HTTP_RESP = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\nhello"


def quic_initial():
    src = open(os.path.join(ROOT, "crates/sonde-l7/src/quic/tests/vectors.rs")).read()
    m = re.search(r"V1_CLIENT_INITIAL: &str = concat!\((.*?)\);", src, re.S)
    return bytes.fromhex("".join(re.findall(r'"([0-9a-f]*)"', m.group(1))))


# ---- the frames every target starts from ---------------------------------------------------

SYN = ipv4(6, tcp(flags=0x02, opts=SYN_OPTS))
IP_FRAMES = {
    "tcp_syn": SYN,
    "tcp_data": ipv4(6, tcp(seq=2, ack=1001, flags=0x18, payload=HTTP_REQ)),
    "udp_dns": ipv4(17, udp(53000, 53, dns_query())),
    "icmp_echo": ipv4(1, icmp(8, 0)),
    "icmp_unreach": ipv4(1, icmp(3, 3, b"\x00\x00\x00\x00" + SYN[:28])),
    "ipv6_tcp": ipv6(6, tcp(flags=0x02, opts=SYN_OPTS)),
    "ipv6_ext_udp": ipv6(0, b"\x11\x00\x01\x04\x00\x00\x00\x00" + udp(5000, 53, dns_query())),
    "ipv6_frag": ipv6(44, b"\x06\x00\x00\x01\x00\x00\x00\x07" + tcp(flags=0x02)),
    "ipv4_frag_later": ipv4(6, b"\xaa" * 16, frag=0x0010),
    "gre": ipv4(47, gre(SYN)),
    "ipip": ipv4(4, SYN),
    "ip6in4": ipv4(41, ipv6(6, tcp())),
    "vxlan": ipv4(17, vxlan(ether(0x0800, SYN))),
    "gtpu": ipv4(17, gtpu(SYN)),
}


def framed(link, ip):
    v6 = ip[0] >> 4 == 6
    if link == "ethernet":
        return ether(0x86DD if v6 else 0x0800, ip)
    if link == "raw":
        return ip
    if link == "null":
        return struct.pack("<I", 24 if v6 else 2) + ip
    if link == "loop":
        return struct.pack(">I", 24 if v6 else 2) + ip
    if link == "sll":
        return struct.pack(">HHH", 0, 1, 6) + b"\x00\x01\x02\x03\x04\x05\x00\x00" + struct.pack(">H", 0x86DD if v6 else 0x0800) + ip
    if link == "sll2":
        return struct.pack(">HHIHBB", 0x86DD if v6 else 0x0800, 0, 2, 1, 0, 6) + b"\x00\x01\x02\x03\x04\x05\x00\x00" + ip
    if link == "ppp":
        return struct.pack(">H", 0x0057 if v6 else 0x0021) + ip
    if link == "ppp_hdlc":
        return b"\xff\x03" + struct.pack(">H", 0x0057 if v6 else 0x0021) + ip
    if link == "chdlc":
        return b"\x0f\x00" + struct.pack(">H", 0x86DD if v6 else 0x0800) + ip
    raise ValueError(link)


# The wire target's selector: its index in fuzz_targets/wire.rs's LINKS.
LINK_SEL = {"null": 0, "ethernet": 1, "raw": 2, "loop": 5, "sll": 6, "sll2": 9, "ppp": 10, "ppp_hdlc": 11, "chdlc": 12}


def wire_seeds():
    for link, sel in LINK_SEL.items():
        for name in ("tcp_syn", "udp_dns", "ipv6_tcp") if link != "ethernet" else IP_FRAMES:
            put("wire", f"{link}_{name}", bytes([sel, 0, 0]) + framed(link, IP_FRAMES[name]))
    eth = 1
    put("wire", "ethernet_qinq", bytes([eth, 0, 0]) + ether(0x0800, SYN, vlans=(10, 20)))
    mpls = struct.pack(">I", (16 << 12) | 0x100 | 64) + SYN
    put("wire", "ethernet_mpls", bytes([eth, 0, 0]) + ether(0x8847, mpls))
    pppoe = struct.pack(">BBHH", 0x11, 0, 1, len(SYN) + 2) + b"\x00\x21" + SYN
    put("wire", "ethernet_pppoe", bytes([eth, 0, 0]) + ether(0x8864, pppoe))
    put("wire", "ethernet_arp", bytes([eth, 0, 0]) + ether(0x0806, b"\x00\x01\x08\x00\x06\x04\x00\x01" + b"\x00" * 20))
    # A snaplen cut: 64 bytes captured of a longer packet (selector 0x41 = Ethernet, cut).
    data = framed("ethernet", IP_FRAMES["tcp_data"])
    put("wire", "ethernet_snaplen", bytes([211, 0, len(data) - 64]) + data[:64])  # 211 % 14 == 1: Ethernet


# ---- capture files -------------------------------------------------------------------------

TRACE = [(1_700_000_000, 1000 * i, framed("ethernet", f)) for i, f in enumerate(
    [SYN, IP_FRAMES["tcp_data"], IP_FRAMES["udp_dns"], IP_FRAMES["ipv6_tcp"]])]


def pcap(endian="<", magic=0xA1B2C3D4, link=1, frames=TRACE, modified=False):
    out = struct.pack(endian + "IHHiIII", magic, 2, 4, 0, 0, 65535, link)
    for s, frac, f in frames:
        out += struct.pack(endian + "IIII", s, frac, len(f), len(f) + (0 if f is not frames[-1][2] else 10))
        if modified:
            out += struct.pack(endian + "IHBB", 0, 0, 0, 0)
        out += f
    return out


def pcapng():
    def block(t, body):
        body += b"\x00" * (-len(body) % 4)
        n = 12 + len(body)
        return struct.pack("<II", t, n) + body + struct.pack("<I", n)
    shb = block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
    idb = block(1, struct.pack("<HHI", 1, 0, 65535) + struct.pack("<HHB", 9, 1, 9) + b"\x00" * 3 + b"\x00" * 4)
    idb_raw = block(1, struct.pack("<HHI", 101, 0, 65535))
    out = shb + idb + idb_raw
    for i, (s, frac, f) in enumerate(TRACE):
        ts = s * 10**9 + frac * 1000
        out += block(6, struct.pack("<IIIII", i % 2, ts >> 32, ts & 0xFFFFFFFF, len(f) if i % 2 == 0 else len(f) - 14,
                                    len(f)) + (f if i % 2 == 0 else f[14:]))
    out += block(3, struct.pack("<I", len(TRACE[0][2])) + TRACE[0][2])  # simple packet block
    return out


def erf():
    out = b""
    for s, frac, f in TRACE[:2]:
        ts = (s << 32) | (frac * (1 << 32) // 10**6)
        rlen = 16 + 2 + len(f)
        out += struct.pack("<Q", ts) + struct.pack(">BBHHH", 2, 4, rlen, 0, len(f)) + b"\x00\x00" + f
    ip = IP_FRAMES["udp_dns"]
    out += struct.pack("<Q", 1_700_000_001 << 32) + struct.pack(">BBHHH", 22, 4, 16 + len(ip), 0, len(ip)) + ip
    return out


def snoop():
    out = b"snoop\x00\x00\x00" + struct.pack(">II", 2, 4)
    for s, frac, f in TRACE:
        pad = -len(f) % 4
        out += struct.pack(">IIIIII", len(f), len(f), 24 + len(f) + pad, 0, s, frac) + f + b"\x00" * pad
    return out


def capture_seeds():
    put("capture", "pcap_le_usec", pcap())
    put("capture", "pcap_be_nsec", pcap(">", 0xA1B23C4D))
    put("capture", "pcap_modified", pcap(magic=0xA1B2CD34, modified=True))
    put("capture", "pcap_raw", pcap(link=101, frames=[(s, f, d[14:]) for s, f, d in TRACE]))
    put("capture", "pcapng", pcapng())
    put("capture", "erf", erf())
    put("capture", "snoop", snoop())
    put("capture", "pcap_gzip", gzip.compress(pcap(), mtime=0))
    put("capture", "pcapng_xz", lzma.compress(pcapng()))
    if shutil.which("zstd"):
        put("capture", "pcap_zstd", subprocess.run(["zstd", "-q", "-c", "-19"], input=pcap(), capture_output=True,
                                                   check=True).stdout)
    # The project's own trace, its first packets.
    demo = open(os.path.join(ROOT, "testdata/demo.pcap"), "rb").read()
    put("capture", "demo_head", demo[:3000])


# ---- flows ---------------------------------------------------------------------------------

def flow_packet(reverse, flags, step, ack_off, opts, win, ttl_dt, payload, port_sel=1, tcp_=True, v6=False, cut=False,
                client=0, when=0):
    b0 = (0x80 if v6 else 0) | (0 if tcp_ else 0x40) | (0x08 if reverse else 0) | client
    b8 = min(len(payload), 0x7F) | (0x80 if cut else 0)
    return bytes([b0, flags, step >> 8, step & 0xFF, ack_off, opts, win, ttl_dt, b8, (when << 6) | port_sel]) + payload


def flow_seeds():
    cfg = bytes([0x03, 0x20, 0x20, 0x05])
    req, resp = HTTP_REQ[:100], HTTP_RESP
    conv = [
        flow_packet(False, 0x02, 0, 0, 0x87, 0xFF, 0x10, b""),                 # SYN with options
        flow_packet(True, 0x12, 0, 1, 0x87, 0xFF, 0x10, b""),                  # SYN/ACK
        flow_packet(False, 0x10, 1, 1, 0x80, 0xFF, 0x10, b""),                 # ACK
        flow_packet(False, 0x18, 0, 1, 0x80, 0xFF, 0x10, req),                 # request
        flow_packet(True, 0x18, 1, len(req), 0x80, 0xFF, 0x10, resp),          # response
        flow_packet(False, 0x10, len(req), len(resp), 0x80, 0xFF, 0x10, b""),
        flow_packet(False, 0x11, 0, 0, 0x80, 0xFF, 0x10, b""),                 # FIN
        flow_packet(True, 0x11, len(resp), 1, 0x80, 0xFF, 0x10, b""),
        flow_packet(False, 0x10, 1, 1, 0x80, 0xFF, 0x10, b""),
    ]
    put("flow", "tcp_http", cfg + b"".join(conv))
    retx = conv[:4] + [flow_packet(False, 0x18, 0x4000 | len(req), 1, 0x88, 0xFF, 0x30, req)] + conv[4:6]
    put("flow", "tcp_retransmission_sack", cfg + b"".join(retx))
    put("flow", "tcp_rst", cfg + b"".join(conv[:3] + [flow_packet(True, 0x04, 1, 0, 0, 0, 0, b"")]))
    dns = [flow_packet(False, 0, 0, 0, 0, 0, 0, dns_query(), port_sel=2, tcp_=False),
           flow_packet(True, 0, 0, 0, 0, 0, 0x10, dns_response(), port_sel=2, tcp_=False)]
    put("flow", "udp_dns", cfg + b"".join(dns))
    media = [flow_packet(i % 3 == 2, 0, 0, 0, 0, 0, 0x20, rtp(i, 160 * i)[:60], port_sel=3, tcp_=False) for i in range(6)]
    put("flow", "udp_rtp_v6", cfg + b"".join(p[:0] + bytes([p[0] | 0x80]) + p[1:] for p in media))
    # Many flows through a small table, idle gaps and a time step back.
    many = [flow_packet(i & 1 == 1, 0x02, 0, 0, 0, 0xFF, 0x10, b"", port_sel=i & 3, client=i & 3, when=(i % 4))
            for i in range(12)]
    put("flow", "table_churn", bytes([0x09, 0x01, 0x01, 0x21]) + b"".join(many))
    tls = [flow_packet(False, 0x02, 0, 0, 0x07, 0xFF, 0x10, b""),
           flow_packet(True, 0x12, 0, 1, 0x07, 0xFF, 0x10, b""),
           flow_packet(False, 0x18, 1, 1, 0, 0xFF, 0x10, tls_client_hello()[:0x7F]),
           flow_packet(False, 0x18, 0x7F, 1, 0, 0xFF, 0x10, tls_client_hello()[0x7F:])]
    put("flow", "tcp_tls", cfg + b"".join(tls))


# ---- definitions ---------------------------------------------------------------------------

DEFS = [
    "web = ip.proto == 6 and tcp.dport in 80..88",
    "syn = tcp.flags & 0x12 == 0x02",
    "ports = ip.proto == 6 key tcp.dport measure count,gap,length idle 1s",
]


def define_seeds():
    frames = [(1, IP_FRAMES["tcp_syn"]), (1, IP_FRAMES["tcp_data"]), (0, framed("ethernet", IP_FRAMES["udp_dns"])),
              (1, IP_FRAMES["ipv6_tcp"]), (0, framed("ethernet", IP_FRAMES["vxlan"]))]
    packed = b"".join(bytes([min(len(f), 127), link]) + f[:127] for link, f in frames)
    put("define", "simple", "\n".join(DEFS).encode() + b"\x00" + packed)
    rtt = open(os.path.join(ROOT, "definitions/tcp-rtt.defs")).read()
    put("define", "tcp_rtt", rtt.encode() + b"\x00" + packed)
    docs = open(os.path.join(ROOT, "docs/definitions.md")).read()
    lines = [l.strip() for l in re.findall(r"^[a-z_0-9]+ *= .*$", docs, re.M)]
    for i, l in enumerate(lines[:12]):
        put("define", f"docs_{i:02}", l.encode() + b"\x00" + packed)
    changes = "# TIME VERSION CHANGE\n1700000000.25 1 add web = tcp.dport == 80\n" \
              "1700000001 2 replace web = tcp.dport in 80..88\n1700000002 3 remove syn\n"
    edits = 'POST {"version": 2, "definition": "dns = udp.dport == 53"}\n' \
            'PUT web {"version": 3, "definition": "web = tcp.dport == 443"}\n' \
            "DELETE ports 4\n"
    times = bytes([1, 2, 3, 5, 8, 13, 21, 1, 1, 1])
    put("define_changes", "changes", DEFS[1] + "\n" + DEFS[2] + "\x00" + changes + "\x00" + edits + "\x00")
    with open(os.path.join(HERE, "define_changes", "changes"), "ab") as f:
        f.write(times)
    assoc = rtt.split("\n# SYN")[0]
    put("define_changes", "assoc", assoc.encode() + b"\x001700000001 1 remove rtt\n\x00DELETE data 1\n\x00" + times)


# ---- application payloads ------------------------------------------------------------------

def segs(*parts):
    return b"".join(bytes([ctl]) + struct.pack(">H", len(p)) + p for ctl, p in parts)


def l7_seeds():
    # Selector: bit 0 UDP, bits 1-3 the server port (443, 80, 53, 5353, 5004, 8080, 853, 40000).
    put("l7", "tls", bytes([0 << 1]) + segs((0, tls_client_hello()), (1, tls_server_hello())))
    ch = tls_client_hello()
    put("l7", "tls_split", bytes([0]) + segs((0, ch[:20]), (0, ch[20:])))
    put("l7", "http", bytes([1 << 1]) + segs((0, HTTP_REQ), (1, HTTP_RESP)))
    put("l7", "dns_udp", bytes([1 | 2 << 1]) + segs((0, dns_query()), (1, dns_response())))
    put("l7", "dns_tcp", bytes([2 << 1]) + segs((0, struct.pack(">H", len(dns_query())) + dns_query())))
    put("l7", "mdns", bytes([1 | 3 << 1]) + segs((0, dns_response(b"printer.local"))))
    put("l7", "rtp", bytes([1 | 4 << 1]) + segs(*[(0, rtp(i, 160 * i)) for i in range(4)], (1, rtcp_sr())))
    put("l7", "quic_initial", bytes([1 | 0 << 1]) + segs((0, quic_initial())))


if __name__ == "__main__":
    for t in ("capture", "wire", "flow", "define", "define_changes", "l7"):
        shutil.rmtree(os.path.join(HERE, t), ignore_errors=True)
    capture_seeds()
    wire_seeds()
    flow_seeds()
    define_seeds()
    l7_seeds()
