"""Start-up errors in one or two lines that name the setting or port (no traceback), and
SIGTERM to `driftline dashboard` stops its Streamlit child (the port is free afterwards)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest

from driftline.demo.processes import port_free
from tests.conftest import REPO, free_port, pg_admin_url


def _collector(*args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "driftline.cli", "collector", "--dev"]
    argv += ["--port", str(free_port()), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=REPO)


def _short_error(out: subprocess.CompletedProcess[str]) -> str:
    assert out.returncode != 0
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert 1 <= len(lines) <= 2, out.stderr
    assert "Traceback" not in out.stderr
    return out.stderr


@pytest.mark.postgres
def test_missing_postgres_database_names_the_setting() -> None:
    base = pg_admin_url().rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://")
    name = f"driftline_absent_{uuid.uuid4().hex[:8]}"
    err = _short_error(
        _collector("--grpc-port", str(free_port()), "--database-url", f"{base}/{name}")
    )
    assert "DRIFTLINE_DATABASE_URL" in err and "does not exist" in err and "createdb" in err


def test_unreachable_postgres_names_the_setting_and_hides_the_password() -> None:
    url = f"postgresql+psycopg://u:hunter2@127.0.0.1:{free_port()}/x"
    err = _short_error(_collector("--grpc-port", str(free_port()), "--database-url", url))
    assert "DRIFTLINE_DATABASE_URL" in err and "refused" in err and "hunter2" not in err


def test_grpc_port_in_use_says_so(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        err = _short_error(
            _collector("--grpc-port", str(port), "--database-url", f"sqlite:///{tmp_path}/d.db")
        )
    assert f"port {port} (OTLP/gRPC)" in err and "in use" in err and "--grpc-port" in err


def test_sigterm_to_dashboard_stops_streamlit(tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "DRIFTLINE_DATABASE_URL": f"sqlite:///{tmp_path}/d.db"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "driftline.cli", "dashboard", "--dev", "--port", str(port)],
        env=env,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # only the CLI process gets the signal, as from `kill PID`
    )
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/_stcore/health", timeout=1).is_success:
                    break
            except httpx.HTTPError:
                time.sleep(0.5)
        else:
            raise AssertionError("the dashboard did not start")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        deadline = time.monotonic() + 10
        while not port_free("127.0.0.1", port) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert port_free("127.0.0.1", port), "Streamlit still holds the port"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # whatever is left of the group
