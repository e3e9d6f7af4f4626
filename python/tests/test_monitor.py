"""`sonde.monitor` on the loopback interface: the flows of packets sent during the capture come
as batches, and the capture ends at `duration`. Needs root (SKIPPED without)."""

from __future__ import annotations

import os
import socket
import threading
import time

import pytest

import sonde

PORT = 45_999


@pytest.mark.skipif(os.geteuid() != 0, reason="SKIPPED: live capture needs root")
def test_monitor_captures_loopback_flows_until_its_duration():
    # The capture is open when monitor() returns; its duration leaves the sender seconds to
    # spare (a loaded machine once stretched 20 sends 20 ms apart past a 1.5 s duration).
    s = sonde.monitor("lo", duration=4, filter=f"udp port {PORT}", interval=0, tick_ms=50)

    def send():
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            for i in range(20):
                sock.sendto(b"sonde", ("127.0.0.1", PORT))
                time.sleep(0.005)

    sender = threading.Thread(target=send)
    time.sleep(0.2)
    started = time.monotonic()
    sender.start()
    udp = [b.batch for b in s if b.protocol == "udp"]
    sender.join()
    assert time.monotonic() - started < 8
    flows = [row for batch in udp for row in batch.to_pylist()]
    assert len(flows) == 1, flows
    assert flows[0]["s_port"] == PORT
    # AF_PACKET on loopback shows each packet twice (leaving and arriving): 40 today; 20 if
    # sonde-live ever drops loopback's outgoing copies.
    assert flows[0]["c_pkts_all"] in (20, 40)
    assert s.result is not None and s.result.summary["input"] == "lo"


def test_monitor_on_a_missing_interface_is_a_capture_error():
    with pytest.raises((sonde.CaptureError, sonde.SettingsError)):
        sonde.monitor("no-such-if0", duration=1)
