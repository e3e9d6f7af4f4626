"""Errors are Python exceptions with the CLI's messages; a truncated trace keeps its partial
result reachable; the GIL is released while packets are analysed; Ctrl-C interrupts at once."""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import threading
import time
from pathlib import Path

import pytest

import sonde
from conftest import DEMO, assert_table_equals_tsv, cli, sonde_bin


def cli_stderr(trace: Path, tmp_path: Path) -> str:
    out = tmp_path / "cli-out"
    done = subprocess.run([str(sonde_bin()), "analyze", "-q", "-r", str(trace), "-o", str(out)],
                          capture_output=True, text=True)
    return done.stderr.strip()


def test_a_missing_trace_is_a_trace_error_with_the_cli_message(tmp_path):
    missing = tmp_path / "nope.pcap"
    with pytest.raises(sonde.TraceError) as e:
        sonde.analyze(missing)
    assert not isinstance(e.value, sonde.TruncatedTraceError)
    assert cli_stderr(missing, tmp_path) == f"sonde: {e.value}"
    assert "No such file" in str(e.value)


def test_not_a_capture_is_a_trace_error_with_the_cli_message(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("hello, this is not a capture\n")
    with pytest.raises(sonde.TraceError) as e:
        sonde.analyze(text)
    assert cli_stderr(text, tmp_path) == f"sonde: {e.value}"
    assert "not a capture file" in str(e.value)
    with pytest.raises(sonde.TraceError):
        sonde.stream(text)


def test_a_truncated_trace_raises_with_its_partial_result(tmp_path):
    cut = tmp_path / "cut.pcap"
    data = DEMO.read_bytes()
    cut.write_bytes(data[: len(data) * 2 // 3])
    out, status = cli(cut)
    assert status == 3
    with pytest.raises(sonde.TruncatedTraceError) as e:
        sonde.analyze(cut)
    assert isinstance(e.value, sonde.TraceError) and isinstance(e.value, sonde.SondeError)
    warning = cli_stderr(cut, tmp_path)
    assert warning == f"sonde: warning: {e.value}"
    partial = e.value.result
    assert partial.input_error == str(e.value)
    assert partial.summary["input_error"]["offset"] > 0
    assert_table_equals_tsv(partial.tcp, out / "tcp_flows.tsv")
    # Or returned, not raised.
    run = sonde.analyze(cut, strict=False)
    assert run.input_error == str(e.value) and run.tcp.num_rows == partial.tcp.num_rows


def test_a_truncated_stream_raises_at_its_end_after_every_flow(tmp_path):
    cut = tmp_path / "cut.pcap"
    data = DEMO.read_bytes()
    cut.write_bytes(data[: len(data) * 2 // 3])
    s = sonde.stream(cut)
    rows = 0
    with pytest.raises(sonde.TruncatedTraceError) as e:
        for batch in s:
            rows += batch.batch.num_rows
    assert rows == e.value.result.summary["flows"]["tcp"] + e.value.result.summary["flows"]["udp"]


@pytest.mark.parametrize(
    "options, message",
    [
        ({"interval": -1}, "interval must be 0 (off) or at least 0.001 seconds"),
        ({"threads": 0}, "threads must be from 1 to 256"),
        ({"threads": 257}, "threads must be from 1 to 256"),
        ({"tcp_timeout": 0}, "tcp_timeout must be a positive number of seconds"),
        ({"filter": "tcp port"}, "filter"),
        ({"internal": "10.0.0.0/33"}, "internal 10.0.0.0/33"),
        ({"internal": "10.0.0.0/255.0.255.0"}, "internal 10.0.0.0/255.0.255.0: netmask is not contiguous"),
        # The binary's rule (sonde_engine::settings), not a silent 1.
        ({"max_flows": 0}, "max_flows must be from 1 to 1073741824"),
        ({"anonymize": "rot13"}, "rot13"),
        ({"anonymize": "cryptopan"}, "needs key"),
        ({"definitions": "/nonexistent/defs"}, "reading definitions /nonexistent/defs"),
    ],
)
def test_wrong_options_are_settings_errors(options, message):
    with pytest.raises(sonde.SettingsError) as e:
        sonde.analyze(DEMO, **options)
    assert message in str(e.value)


def pcap_header() -> bytes:
    return struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 101)


def udp_frame(i: int) -> bytes:
    ip = bytes([0x45, 0, 0, 32, 0, 1, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2])
    udp = struct.pack(">HHHH", 5000 + i % 1000, 53, 12, 0) + b"abcd"
    frame = ip + udp
    return struct.pack("<IIII", 1_700_000_000 + i, 0, len(frame), len(frame)) + frame


@pytest.fixture
def fifo_trace(tmp_path):
    """A trace that never ends: a FIFO holding a header and a few packets, kept open for writing.

    Python's own SIGINT handler is put first: a test run started in the background by a shell
    without job control inherits SIGINT ignored, Python then leaves it ignored (and polars,
    which other tests import, puts its own handler over that), and the Ctrl-C tests waited for
    a KeyboardInterrupt that never came."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    path = tmp_path / "live.pcap"
    os.mkfifo(path)
    fd = os.open(path, os.O_RDWR)
    os.write(fd, pcap_header() + b"".join(udp_frame(i) for i in range(10)))
    yield path, fd
    os.close(fd)  # the run's reader sees the end and its thread finishes


def test_ctrl_c_interrupts_at_once_and_the_gil_is_free_meanwhile(fifo_trace):
    path, _ = fifo_trace
    ticks = []
    stop_ticking = threading.Event()

    def tick():
        while not stop_ticking.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.01)

    ticker = threading.Thread(target=tick)
    ticker.start()
    sigint_at = []

    def interrupt():
        sigint_at.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGINT)

    timer = threading.Timer(0.5, interrupt)
    timer.start()
    started = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            sonde.analyze(path, threads=2)
        raised_at = time.monotonic()
    finally:
        stop_ticking.set()
        ticker.join()
        timer.cancel()
    # Python ran beside the analysis (the GIL was released)...
    assert len([t for t in ticks if started < t < sigint_at[0]]) >= 10
    # ... and Ctrl-C was raised within the 100 ms poll (and some scheduling slack).
    assert raised_at - sigint_at[0] < 0.6


def test_ctrl_c_in_a_stream_stops_the_run_and_the_rest_still_comes(fifo_trace):
    path, fd = fifo_trace
    s = sonde.stream(path, rows=1_000)
    timer = threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        next(iter(s))
    # The run was told to stop; its reader, waiting for bytes, sees that at its next frame.
    os.write(fd, udp_frame(10))
    # Its open flows end and come, then the result.
    rows = sum(b.batch.num_rows for b in s)
    assert rows == 11  # eleven UDP flows (eleven client ports)
    assert s.result is not None and s.result.summary["packets"]["read"] == 11
