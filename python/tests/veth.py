"""The live Python tests' links: veth pairs (a probe captures on one end, tcpreplay sends into
the other), deleted when closed, whatever happened. They live in the test's own network
namespace, so that probes reach a broker on 127.0.0.1 and a Spark job reaches both; with IPv6
off and no address, the interfaces send nothing of their own into the captures."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import List, Optional


def why_not() -> Optional[str]:
    """Why this machine cannot run a live test (None when it can)."""
    if os.geteuid() != 0:
        return "not root (veth pairs and raw sockets need it)"
    for tool in ("ip", "tcpreplay", "dumpcap", "mergecap"):
        if shutil.which(tool) is None:
            return f"{tool} is missing (make deps installs iproute2, tcpreplay and tshark)"
    return None


class VethPairs:
    """`count` pairs named `<prefix>c<i>` (capture) ↔ `<prefix>r<i>` (replay)."""

    def __init__(self, count: int):
        self.prefix = f"sd{os.getpid() % 100000}"
        self.capture: List[str] = []
        self.replay_end: List[str] = []
        try:
            for i in range(count):
                c, r = f"{self.prefix}c{i}", f"{self.prefix}r{i}"
                ip(f"link add {c} type veth peer name {r}")
                self.capture.append(c)
                self.replay_end.append(r)
                for end in (c, r):
                    subprocess.run(["sysctl", "-qw", f"net.ipv6.conf.{end}.disable_ipv6=1"], check=True)
                    ip(f"link set {end} mtu 9000")
                    ip(f"link set {end} up")
        except BaseException:
            self.close()
            raise

    def replay(self, i: int, trace: Path, pps: int) -> subprocess.Popen:
        """tcpreplay of `trace` into pair `i` at `pps` packets per second, in the background."""
        argv = ["tcpreplay", "-q", "-i", self.replay_end[i], "--pps", str(pps), str(trace)]
        return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def close(self) -> None:
        for c in self.capture:
            subprocess.run(["ip", "link", "del", c], capture_output=True)

    def __enter__(self) -> "VethPairs":
        return self

    def __exit__(self, *_exc) -> None:
        self.close()


def ip(args: str) -> None:
    subprocess.run(["ip", *args.split()], check=True, capture_output=True)
