"""`driftline demo --replay --headless`: collector + synthetic spans, exits 0 with a summary."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import free_port


def test_demo_headless(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "collector.cli",
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
