"""The `browser`/`vllm` requirement check of tests/conftest.py: a missing requirement is a skip
with the enabling command locally and a failure under CI (run in a child pytest)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, missing_requirement


def test_missing_chromium_names_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    reason = missing_requirement("browser")
    assert reason is not None and "apt-get install chromium chromium-driver" in reason


def _child(tmp_path: Path, ci: bool) -> subprocess.CompletedProcess[str]:
    test = REPO / "tests" / f"_tmp_req_{os.getpid()}_{int(ci)}_test.py"
    test.write_text("import pytest\n\n@pytest.mark.browser\ndef test_b():\n    pass\n")
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PATH"] = str(tmp_path)  # no chromium on it
    if ci:
        env["CI"] = "1"
    try:
        return subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            cwd=REPO,
        )
    finally:
        test.unlink()


def test_skip_locally_fail_under_ci(tmp_path: Path) -> None:
    local = _child(tmp_path, ci=False)
    assert local.returncode == 0 and "1 skipped" in local.stdout, local.stdout
    assert "apt-get install chromium" in local.stdout
    ci = _child(tmp_path, ci=True)
    assert ci.returncode == 1 and "1 error" in ci.stdout, ci.stdout
    assert "CI is set but Chromium" in ci.stdout
