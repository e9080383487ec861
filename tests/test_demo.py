"""`driftline demo --replay --headless`: collector + synthetic spans, exits 0 with a summary."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from driftline.demo.processes import port_free
from tests.conftest import free_port


def test_demo_headless(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "driftline.cli",
            "demo",
            "--headless",
            "--duration",
            "8",
            "--data-dir",
            str(tmp_path / "data"),
            "--port",
            str(free_port()),
            "--grpc-port",
            str(free_port()),
            "--rate",
            "10",
            "--replay",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    m = re.search(r"summary: calls=(\d+) \(gateway\+vLLM merged: (\d+)\)", out.stdout)
    assert m, out.stdout
    calls, merged = int(m.group(1)), int(m.group(2))
    assert calls > 10 and 0 < merged < calls
    assert (tmp_path / "data" / "driftline.db").exists()


def _processes_mentioning(text: str, *, but: int) -> list[int]:
    """Live processes (Linux /proc) whose command line contains ``text``, except ``but``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == but:
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_demo_stops_its_children_and_frees_the_ports(tmp_path: Path, sig: signal.Signals) -> None:
    """Ctrl-C (SIGINT to the demo) or SIGTERM: every child process ends, every port is free."""
    http, grpc = free_port(), free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "driftline.cli",
            "demo",
            "--headless",
            "--replay",
            "--data-dir",
            str(tmp_path / "data"),
            "--port",
            str(http),
            "--grpc-port",
            str(grpc),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{http}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.3)
        else:
            raise AssertionError("the demo's collector did not come up")
        children = _processes_mentioning(f"--grpc-port {grpc}", but=proc.pid)
        assert children, "the demo runs its collector as a child process"
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "stopping" in out, out
    deadline = time.monotonic() + 5
    while (
        _processes_mentioning(f"--grpc-port {grpc}", but=proc.pid) and time.monotonic() < deadline
    ):
        time.sleep(0.2)
    assert not _processes_mentioning(f"--grpc-port {grpc}", but=proc.pid)
    for port in (http, grpc):
        assert port_free("127.0.0.1", port), port
