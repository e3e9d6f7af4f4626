#!/usr/bin/env python3
"""Agreement of sonde's application labels with NFStream's (nDPI's), flow by flow.

usage: nfstream_labels.py SONDE_BINARY TRACE... > table.md

For each trace: `sonde analyze` (flow logs as TSV) and NFStream (nDPI on, its default 20
packets per flow for dissection, idle timeout 300 s to match sonde's TCP timeout), then the
flows are joined by protocol, endpoints (either orientation) and first packet time (within
1 ms). nDPI's name is reduced to its master protocol (`TLS.Google` -> `TLS`) and mapped to
sonde's taxonomy (NDPI_TO_SONDE below; docs/l7.md gives the same table); a flow agrees when
sonde's label (payload-told, or port-told) equals nDPI's mapped one. Prints a markdown table:
per sonde label, flows, flows matched in NFStream, agreeing share, and the commonest nDPI names
of the disagreements, then the totals.
"""
import collections
import csv
import os
import subprocess
import sys
import tempfile

from nfstream import NFStreamer

# nDPI master protocol -> sonde label (lower case). Unlisted names map to themselves, lowered.
NDPI_TO_SONDE = {
    "tls": "tls", "dtls": "dtls", "quic": "quic", "http": "http", "http_proxy": "http",
    "http_connect": "http", "dns": "dns", "mdns": "mdns", "llmnr": "llmnr", "rtp": "rtp",
    "rtcp": "rtcp", "srtp": "rtp", "ssh": "ssh", "smtp": "smtp", "smtps": "smtps",
    "pop3": "pop3", "pop3s": "pop3s", "imap": "imap", "imaps": "imaps", "ftp_control": "ftp",
    "ftp_data": "ftp-data", "ntp": "ntp", "snmp": "snmp", "dhcp": "dhcp", "dhcpv6": "dhcpv6",
    "netbios": "netbios", "smbv1": "smb", "smbv23": "smb", "rdp": "rdp", "sip": "sip",
    "stun": "stun", "bgp": "bgp", "ldap": "ldap", "telnet": "telnet", "mysql": "mysql",
    "postgresql": "postgresql", "syslog": "syslog", "unknown": "unknown",
}


def master(name):
    return (name or "Unknown").split(".")[0].lower()


def sonde_flows(binary, trace, out):
    subprocess.run([binary, "analyze", "-r", trace, "-o", out, "--force", "-q", "--threads", "1"],
                   check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    flows = []
    for proto, name in ((6, "tcp_flows.tsv"), (17, "udp_flows.tsv")):
        path = os.path.join(out, name)
        if not os.path.exists(path):
            continue
        with open(path) as f:
            for row in csv.DictReader(f, delimiter="\t"):
                first_ms = float(row["first"]) if proto == 6 else float(row["first"])
                flows.append({
                    "key": endpoints(proto, row["c_ip"], row["c_port"], row["s_ip"], row["s_port"]),
                    "first_ms": first_ms,
                    "label": row.get("app", "unknown"),
                    "by_port": row.get("app_by_port") == "1",
                })
    return flows


def endpoints(proto, a, ap, b, bp):
    x, y = (a, int(ap)), (b, int(bp))
    return (proto,) + (x + y if x <= y else y + x)


def nfstream_flows(trace):
    flows = collections.defaultdict(list)
    for f in NFStreamer(source=trace, idle_timeout=300, active_timeout=10**9, statistical_analysis=False):
        if f.protocol not in (6, 17):
            continue
        key = endpoints(f.protocol, f.src_ip, f.src_port, f.dst_ip, f.dst_port)
        flows[key].append((f.bidirectional_first_seen_ms, f.application_name))
    return flows


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    binary, traces = sys.argv[1], sys.argv[2:]
    per_label = collections.defaultdict(lambda: {"flows": 0, "matched": 0, "agree": 0, "other": collections.Counter()})
    with tempfile.TemporaryDirectory() as tmp:
        for trace in traces:
            ours = sonde_flows(binary, trace, os.path.join(tmp, "out"))
            try:
                theirs = nfstream_flows(trace)
            except Exception as e:  # NFStream refuses some link types
                print(f"<!-- {trace}: NFStream failed: {e} -->", file=sys.stderr)
                continue
            for flow in ours:
                label = flow["label"] + ("?" if flow["by_port"] else "")
                row = per_label[label]
                row["flows"] += 1
                candidates = [n for t, n in theirs.get(flow["key"], []) if abs(t - flow["first_ms"]) <= 1.0]
                if not candidates:
                    continue
                row["matched"] += 1
                ndpi = master(candidates[0])
                mapped = NDPI_TO_SONDE.get(ndpi, ndpi)
                if mapped == flow["label"]:
                    row["agree"] += 1
                else:
                    row["other"][candidates[0]] += 1
    print("| sonde label | flows | matched in NFStream | agree with nDPI | commonest nDPI names when not |")
    print("|---|---:|---:|---:|---|")
    total = {"flows": 0, "matched": 0, "agree": 0}
    for label in sorted(per_label, key=lambda l: -per_label[l]["flows"]):
        row = per_label[label]
        for k in total:
            total[k] += row[k]
        share = f"{100 * row['agree'] / row['matched']:.1f} %" if row["matched"] else "-"
        other = ", ".join(f"{n} ({c})" for n, c in row["other"].most_common(4))
        print(f"| {label} | {row['flows']} | {row['matched']} | {row['agree']} ({share}) | {other} |")
    share = f"{100 * total['agree'] / total['matched']:.1f} %" if total["matched"] else "-"
    print(f"| **all** | {total['flows']} | {total['matched']} | {total['agree']} ({share}) | |")


if __name__ == "__main__":
    main()
