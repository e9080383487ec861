"""A start-up step that fails after background components started stops every one of them.

The lifespan starts the writer, the spool, its processor (a thread or a supervised process),
the gRPC server and the scheduler on one exit stack (driftline/components.py). Before it, a
failure at the gRPC port or at the alert jobs' configuration left the writer, spool and
processor threads (and the processor's process) running in a process whose app never served.
"""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import psutil
import pytest
from fastapi.testclient import TestClient

from driftline.app import create_app
from tests.conftest import make_settings
from tests.support import free_port, wait_for


def _ours() -> list[str]:
    """Names of the live threads the collector starts (all named ``driftline-*``)."""
    return sorted(t.name for t in threading.enumerate() if t.name.startswith("driftline"))


def _children(before: frozenset[int] = frozenset()) -> list[psutil.Process]:
    """Live child processes started after ``before`` (pids alive before the app started: an
    earlier test of the same pytest worker may have left its own, e.g. PySpark's JVM), but
    multiprocessing's resource tracker (one per interpreter, started with the first spawned
    child; not the app's)."""
    out = []
    for p in psutil.Process().children(recursive=True):
        if p.pid in before:
            continue
        try:
            if p.is_running() and "resource_tracker" not in " ".join(p.cmdline()):
                out.append(p)
        except psutil.NoSuchProcess:
            continue
    return out


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _start_fails(settings_kw: dict[str, object], sqlite_url: str) -> str:
    """Start the app; return the start-up error's text once nothing of it is left running."""
    before = frozenset(p.pid for p in _children())
    assert _ours() == []
    app = create_app(make_settings(sqlite_url, **settings_kw))
    with pytest.raises(Exception) as err, TestClient(app):  # the cause is asserted by callers
        pass
    # stops are synchronous: nothing may be left once the error is out (a short grace only
    # for a thread's last instructions after its join returned)
    assert wait_for(lambda: _ours() == [], timeout_s=5), _ours()
    assert wait_for(lambda: _children(before) == [], timeout_s=5), _children(before)
    return str(err.value)


@pytest.mark.parametrize("processor", ["thread", "process"])
def test_grpc_port_in_use_stops_the_writer_spool_and_processor(
    sqlite_url: str, tmp_path: Path, processor: str
) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        text = _start_fails(
            {
                "grpc_port": port,
                "spool_enabled": True,
                "spool_dir": tmp_path / "spool",
                "spool_processor": processor,
            },
            sqlite_url,
        )
    assert f"127.0.0.1:{port}" in text and "bind" in text


def test_bad_alert_receivers_file_stops_everything_started_before_it(
    sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The alert jobs read their receivers file when the scheduler is built, the last step:
    the gRPC server, writer, spool and supervised processor were already running."""
    absent = tmp_path / "receivers.yaml"
    monkeypatch.setenv("DRIFTLINE_ALERT_RECEIVERS_FILE", str(absent))
    grpc_port = free_port()
    text = _start_fails(
        {
            "grpc_port": grpc_port,
            "scheduler_enabled": True,
            "spool_enabled": True,
            "spool_dir": tmp_path / "spool",
            "spool_processor": "process",
        },
        sqlite_url,
    )
    assert "DRIFTLINE_ALERT_RECEIVERS_FILE" in text and str(absent) in text
    assert wait_for(lambda: _port_free(grpc_port), timeout_s=10)
