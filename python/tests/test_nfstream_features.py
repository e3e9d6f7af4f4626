"""sonde's `--features ml` against NFStream's `statistical_analysis=True, splt_analysis=N`
(issue 37, item 3; docs/features.md).

Both tools run on the same captures; NFStream with its default packet size (accounting_mode 0:
bytes on the wire), sonde's idle timeouts (NFStream has one for all protocols, so it runs once
per protocol) and no active timeout (sonde never cuts a busy flow). Flows pair by protocol, the
two endpoints and the first packet's time (ms). On every paired flow every feature must be
equal: the integers exactly, the means and deviations within 1e-9 relative (both tools do the
same IEEE operations in the same order, and sonde's TSV writes the shortest decimal that reads
back as the same double, so they come out identical; the tolerance only keeps a last-bit
difference, were a libm to round otherwise, from counting as a disagreement). At least 99.5 % of
the paired flows must agree on every feature; each flow that does not, and each flow only one
tool has, is counted with its reason, and printed (pytest -s).
"""

from __future__ import annotations

import csv
import ipaddress
import math
import os
import subprocess
from collections import Counter, defaultdict
from pathlib import Path

import pytest

nfstream = pytest.importorskip("nfstream", reason="SKIPPED: nfstream is not installed")

REPO = Path(__file__).resolve().parents[2]
SONDE = Path(os.environ.get("SONDE_BIN", REPO / "target" / "release" / "sonde"))
SHARED = Path(os.environ.get("SONDE_SHARED", REPO.parent / "shared"))

SPLT = 20
IDLE_S = {"tcp": 300, "udp": 200}
PROTO = {"tcp": 6, "udp": 17}
NO_ACTIVE_TIMEOUT_S = 10**9
FLOOR = 0.995
REL_TOL = 1e-9

DIRS = ("bidirectional", "src2dst", "dst2src")
FLAGS = ("syn", "cwr", "ece", "urg", "ack", "psh", "rst", "fin")
INTS = (
    [f"{d}_packets" for d in DIRS]
    + [f"{d}_{s}_{u}" for u in ("ps", "piat_ms") for d in DIRS for s in ("min", "max")]
    + [f"{d}_{f}_packets" for d in DIRS for f in FLAGS]
)
FLOATS = [f"{d}_{s}_{u}" for u in ("ps", "piat_ms") for d in DIRS for s in ("mean", "stddev")]
LISTS = ["splt_direction", "splt_ps", "splt_piat_ms"]
FEATURES = INTS + FLOATS + LISTS

P = "traces/realistic/ntop+nDPI/tests/cfgs/default/pcap/"
A = "traces/realistic/arkime+arkime/tests/pcap/"
# A varied set: TCP and UDP, IPv4 and IPv6, scans, long flows, idle splits, GTP-U, IPv6
# extension headers, fragments, timestamps that step back; about 4,000 flows.
TRACES = [
    "testdata/demo.pcap",
    "groundtruth/clean.pcap",
    "groundtruth/lossy.pcap",
    "groundtruth/mixed.pcap",
    "groundtruth/ipv6.pcap",
    P + "synscan.pcap",
    "traces/realistic/nfstream+nfstream/tests/pcaps/skype.pcap",
    P + "gnutella.pcap",
    P + "dnscrypt-v1-and-resolver-pings.pcap",
    P + "zoom.pcap",
    P + "1kxun.pcap",
    P + "android.pcap",
    A + "gtp-iphone.pcap",
    A + "tcp_handshake_synthetic.pcap",
    P + "ipsec_isakmp_esp.pcap",
    "traces/realistic/FoxIO-LLC+ja4/pcap/tls3.pcapng",
    "traces/realistic/FoxIO-LLC+ja4/pcap/ssh2.pcapng",
]


def endpoint(ip, port):
    return (ipaddress.ip_address(ip).compressed, int(port))


def locate(rel):
    if rel.startswith("testdata/"):
        return REPO / rel
    path = SHARED / rel
    if not path.exists():
        pytest.skip(f"SKIPPED: {path} is not in the shared corpus (set SONDE_SHARED)")
    return path


# ---------------------------------------------------------------- sonde


def run_sonde(trace, out):
    """sonde's flows of TRACE with the features, from its TSV logs (their flat form)."""
    cmd = [str(SONDE), "analyze", "-q", "--force", "-r", str(trace), "-o", str(out),
           "--features", "ml", "--splt-packets", str(SPLT)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode in (0, 3), done.stderr
    flows = []
    for proto in PROTO:
        with open(out / f"{proto}_flows.tsv", newline="") as fh:
            for row in csv.DictReader(fh, delimiter="\t"):
                c, s = endpoint(row["c_ip"], row["c_port"]), endpoint(row["s_ip"], row["s_port"])
                src, dst = (c, s) if row["src_is_client"] == "1" else (s, c)
                feats = {k: int(row[k]) for k in INTS}
                feats.update({k: float(row[k]) for k in FLOATS})
                feats.update({k: [int(x) for x in row[k].split(",")] for k in LISTS})
                flows.append(dict(proto=proto, src=src, dst=dst, first=int(row["first"].split(".")[0]),
                                  end=row["end_reason"], tunnel=row["tunnel"], f=feats))
    return flows


# ---------------------------------------------------------------- NFStream


def run_nfstream(trace, proto):
    streamer = nfstream.NFStreamer(
        source=str(trace),
        idle_timeout=IDLE_S[proto],
        active_timeout=NO_ACTIVE_TIMEOUT_S,
        accounting_mode=0,  # its default: bytes on the wire
        n_dissections=0,
        statistical_analysis=True,
        splt_analysis=SPLT,
    )
    flows = []
    for f in streamer:
        if f.protocol != PROTO[proto]:
            continue
        feats = {k: getattr(f, k) for k in FEATURES}
        feats["splt_direction"] = list(feats["splt_direction"])
        feats["splt_ps"] = list(feats["splt_ps"])
        feats["splt_piat_ms"] = list(feats["splt_piat_ms"])
        flows.append(dict(proto=proto, src=endpoint(f.src_ip, f.src_port), dst=endpoint(f.dst_ip, f.dst_port),
                          first=f.bidirectional_first_seen_ms, vlan=f.vlan_id, tunnel=f.tunnel_id, f=feats))
    return flows


# ---------------------------------------------------------------- pairing and comparing


def key(flow):
    return (flow["proto"],) + tuple(sorted((flow["src"], flow["dst"])))


def pair(sonde, nfs):
    """Flows of the same tuple pair by their first packet's time (within 1 ms: sonde's TSV
    rounds to the µs, NFStream truncates to the ms), then by their first packets, else in time
    order when both tools have as many flows of the tuple."""
    s_by, n_by = defaultdict(list), defaultdict(list)
    for f in sonde:
        s_by[key(f)].append(f)
    for f in nfs:
        n_by[key(f)].append(f)
    pairs, s_only, n_only = [], [], []
    for k in s_by.keys() | n_by.keys():
        s_left = sorted(s_by.get(k, []), key=lambda f: f["first"])
        n_left = sorted(n_by.get(k, []), key=lambda f: f["first"])
        for a in list(s_left):
            twin = next((b for b in n_left if abs(a["first"] - b["first"]) <= 1), None)
            if twin is not None:
                pairs.append((a, twin))
                s_left.remove(a)
                n_left.remove(twin)
        # A trace whose timestamps step back: NFStream's first_seen is its clamped clock, sonde's
        # `first` the packet's own time. The same flow is then told by its packets: the same
        # count, and the same first packets (sizes and directions).
        for a in list(s_left):
            same = lambda b: all(a["f"][k] == b["f"][k] for k in ("bidirectional_packets", "splt_ps", "splt_direction"))  # noqa: E731
            twin = next((b for b in n_left if same(b)), None)
            if twin is not None:
                pairs.append((a, twin))
                s_left.remove(a)
                n_left.remove(twin)
        if len(s_left) == len(n_left):
            pairs += list(zip(s_left, n_left))
        else:
            s_only += s_left
            n_only += n_left
    return pairs, s_only, n_only


def equal(a, b):
    if isinstance(a, float) or isinstance(b, float):
        return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=REL_TOL)
    return a == b


def differing(s, n):
    """The features the two flows disagree on (the orientation, src, counts as one)."""
    diff = [k for k in FEATURES if not equal(s["f"][k], n["f"][k])]
    if s["src"] != n["src"]:
        diff.insert(0, "src")
    return diff


def reason(s, n, diff):
    """Why a paired flow differs, from what differs."""
    if s["f"]["bidirectional_packets"] != n["f"]["bidirectional_packets"]:
        if s["end"] in ("fin", "rst", "reused"):
            return "flow boundaries: sonde ends TCP flows at FIN/RST or a new SYN, NFStream does not"
        return "different packets in the flow (NFStream skips packets sonde counts, or the reverse)"
    if abs(s["first"] - n["first"]) > 1:
        return "timestamps step back: NFStream clamps them to its clock, and cuts the flow elsewhere"
    if "src" in diff:
        return "first packet: the tools see another first sender"
    if all("piat" in k for k in diff):
        return "inter-arrival times: timestamps stepping back (clocks clamped differently)"
    if all("_ps" in k or k == "splt_ps" for k in diff):
        return "packet sizes on the wire"
    return "unexplained: " + ",".join(diff)


def compare(trace, tmp_path):
    sonde = run_sonde(trace, tmp_path)
    nfs = [f for proto in PROTO for f in run_nfstream(trace, proto)]
    pairs, s_only, n_only = pair(sonde, nfs)
    per_feature = Counter()
    reasons = Counter()
    agree = 0
    for s, n in pairs:
        diff = differing(s, n)
        for k in FEATURES:
            per_feature[k] += k not in diff
        if not diff:
            agree += 1
        else:
            reasons[reason(s, n, diff)] += 1
    s_count, n_count = Counter(key(f) for f in sonde), Counter(key(f) for f in nfs)
    cut = {key(f) for f in sonde if f["end"] in ("fin", "rst", "reused")}
    for f in s_only:
        if f["proto"] == "tcp" and key(f) in cut and s_count[key(f)] > n_count[key(f)]:
            why = "a TCP tuple sonde cuts into more flows (FIN/RST, a new SYN), NFStream into fewer"
        elif f["tunnel"] != "-":
            why = "tunnel or key NFStream does not share"
        else:
            why = "unexplained: flow boundaries differ"
        reasons["only sonde: " + why] += 1
    for f in n_only:
        reasons["only NFStream: " + ("VLAN id in its key" if f["vlan"] else
                                     "tunnel only it decodes" if f["tunnel"] else "flow boundaries differ")] += 1
    return dict(sonde=len(sonde), nfs=len(nfs), paired=len(pairs), agree=agree,
                per_feature=per_feature, reasons=reasons)


def test_features_agree_with_nfstream(tmp_path):
    if not SONDE.is_file():
        pytest.skip(f"SKIPPED: no sonde binary at {SONDE} (set SONDE_BIN)")
    total = Counter()
    per_feature = Counter()
    reasons = Counter()
    for i, rel in enumerate(TRACES):
        r = compare(locate(rel), tmp_path / str(i))
        print(f"{Path(rel).name}: sonde {r['sonde']}, NFStream {r['nfs']}, paired {r['paired']}, "
              f"all features equal {r['agree']}; {dict(r['reasons'])}")
        for k in ("sonde", "nfs", "paired", "agree"):
            total[k] += r[k]
        per_feature.update(r["per_feature"])
        reasons.update(r["reasons"])
    share = total["agree"] / total["paired"]
    print(f"total: {dict(total)}: {100 * share:.2f} % of paired flows equal on every feature")
    for k in FEATURES:
        print(f"  {k}: {100 * per_feature[k] / total['paired']:.2f} %")
    for why, n in reasons.most_common():
        print(f"  {n}: {why}")
    assert total["paired"] > 3000
    assert not [r for r in reasons if "unexplained" in r], reasons
    assert share >= FLOOR, (share, reasons)


def test_python_and_parquet_give_the_features_as_typed_lists(tmp_path):
    """`sonde.analyze(..., features="ml")` and `--format parquet`: the same values as the TSV's
    flat form, the SPLT as lists of int64 (Python), the statistics as float64 and uint64."""
    if not SONDE.is_file():
        pytest.skip(f"SKIPPED: no sonde binary at {SONDE} (set SONDE_BIN)")
    sonde = pytest.importorskip("sonde", reason="SKIPPED: the extension is not built")
    import pyarrow as pa
    import pyarrow.parquet as pq

    trace = REPO / "testdata" / "demo.pcap"
    run = sonde.analyze(trace, features="ml", splt_packets=5, threads=1)
    plain = sonde.analyze(trace, threads=1)
    assert "splt_ps" not in plain.tcp.column_names and "src_is_client" not in plain.udp.column_names
    subprocess.run([str(SONDE), "analyze", "-q", "--force", "-r", str(trace), "-o", str(tmp_path / "tsv"),
                    "--features", "ml", "--splt-packets", "5", "--threads", "1"], check=True)
    subprocess.run([str(SONDE), "analyze", "-q", "--force", "-r", str(trace), "-o", str(tmp_path / "pq"),
                    "--features", "ml", "--splt-packets", "5", "--format", "parquet", "--threads", "1"], check=True)
    for proto, table in (("tcp", run.tcp), ("udp", run.udp)):
        assert table.schema.field("splt_ps").type == pa.list_(pa.int64())
        assert table.schema.field("bidirectional_mean_ps").type == pa.float64()
        assert table.schema.field("src2dst_max_piat_ms").type == pa.uint64()
        parquet = pq.read_table(tmp_path / "pq" / f"{proto}_flows.parquet")
        assert parquet.column("splt_piat_ms").to_pylist() == table.column("splt_piat_ms").to_pylist()
        with open(tmp_path / "tsv" / f"{proto}_flows.tsv", newline="") as fh:
            rows = list(csv.DictReader(fh, delimiter="\t"))
        assert len(rows) == table.num_rows > 0
        for row, typed in zip(rows, table.to_pylist()):
            for k in LISTS:
                assert [int(x) for x in row[k].split(",")] == typed[k], k
                assert len(typed[k]) == 5
            for k in FLOATS:
                assert float(row[k]) == typed[k], k
            for k in INTS:
                assert int(row[k]) == typed[k], k
