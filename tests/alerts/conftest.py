"""Fixtures for alert tests: real SQLite/PostgreSQL stores, a fake clock, and a real scripted
HTTP receiver on 127.0.0.1 standing in for on-call webhooks."""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from collector.egress import EgressPolicy
from collector.store.engine import make_engine
from tests.support import free_port

#: DRIFTLINE_EGRESS_ALLOW of tests whose receivers listen on loopback (the scripted receiver)
LOOPBACK_ALLOW = "127.0.0.1/32"
#: the delivery worker's policy under that setting
LOOPBACK_EGRESS = EgressPolicy.parse(LOOPBACK_ALLOW)


class FakeClock:
    """Injectable time: starts at the real time (signatures stay within tolerance)."""

    def __init__(self) -> None:
        self.t = float(int(time.time()))
        self.sleeps: list[float] = []
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self.t

    def sleep(self, dt: float) -> None:
        with self._lock:
            self.sleeps.append(dt)
            self.t += dt

    def advance_to(self, t: float) -> None:
        with self._lock:
            self.t = max(self.t, t)


@dataclass(frozen=True)
class Received:
    at: float
    path: str
    headers: dict[str, str]
    body: bytes
    status: int | None


@dataclass
class Step:
    """One scripted reply: ``status`` with ``headers``, or ``hang_s`` seconds of silence."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    hang_s: float = 0.0


class ScriptedReceiver:
    """A real HTTP server; replies follow ``script`` in order, then ``default``.

    ``stop()`` closes the listening socket (clients get connection refused) and ``start()``
    reopens it on the same port.
    """

    def __init__(self, clock: FakeClock, default: Step | None = None) -> None:
        self.clock = clock
        self.script: list[Step] = []
        self.default = default or Step(200)
        self.requests: list[Received] = []
        self.port = free_port()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def _next(self) -> Step:
        with self._lock:
            return self.script.pop(0) if self.script else self.default

    def start(self) -> None:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                step = outer._next()
                rec = Received(
                    outer.clock.now(),
                    self.path,
                    {k.lower(): v for k, v in self.headers.items()},
                    body,
                    None if step.hang_s else step.status,
                )
                with outer._lock:
                    outer.requests.append(rec)
                if step.hang_s:
                    time.sleep(step.hang_s)
                    return
                payload = b"ok"
                self.send_response(step.status)
                for k, v in step.headers.items():
                    self.send_header(k, v)
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        ThreadingHTTPServer.allow_reuse_address = True
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def receiver_server(clock: FakeClock) -> Iterator[ScriptedReceiver]:
    srv = ScriptedReceiver(clock)
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture
def sqlite_url(tmp_path: Path, _sqlite_template: Path) -> Iterator[str]:
    """A SQLite store migrated to every head (a copy of the session's template)."""
    shutil.copyfile(_sqlite_template, tmp_path / "alerts.db")
    yield f"sqlite:///{tmp_path / 'alerts.db'}"


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The same test on SQLite and PostgreSQL, each a fresh store migrated to every head."""
    if request.param == "sqlite":
        yield request.getfixturevalue("sqlite_url")
    else:
        yield request.getfixturevalue("pg_url")


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    e = make_engine(db_url)
    yield e
    e.dispose()
