"""The story demo on a deliberately slow engine (the echo stand-in with a 1.5 s TTFT, no vLLM):
it measures the engine at warm-up, fits the offered load, prints progress lines, exits 0, and
its summary reaches a canary decision or says precisely why not (throughput, offered rate, the
seconds the first step needs against --duration)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, free_port

pytestmark = pytest.mark.slow


def test_story_on_a_slow_echo_engine_decides_or_says_why_not(tmp_path: Path) -> None:
    data = tmp_path / "demo"
    argv = [sys.executable, "-m", "driftline.cli", "demo", "--headless", "--no-dashboard"]
    argv += ["--engine", "echo", "--engine-ttft", "1.5", "--duration", "40"]
    argv += ["--data-dir", str(data)]
    for flag in ("--port", "--grpc-port", "--gateway-port", "--engine-port", "--receiver-port"):
        argv += [flag, str(free_port())]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=400, cwd=REPO)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    assert "warm-up: the engine served" in out.stdout
    assert "calls stored=" in out.stdout  # the 15 s progress line, headless too
    summary = json.loads((data / "demo-summary.json").read_text())
    plan = summary["load_plan"]
    assert plan["engine"] == "echo" and 0 < plan["offered_rps"] <= plan["throughput_rps"]
    bad = summary["rollouts"]["support-assistant"]["status"]
    if bad in ("running", "paused"):
        assert "why no canary decision" in out.stdout
        assert f"~{plan['first_step_s']:g} s" in out.stdout
    else:
        assert bad in ("rolled_back", "completed", "promoting")
    assert all(d.get("created_at") for d in summary["rollout_decisions"]["support-assistant"])
