"""One slow alert receiver never stops delivery for the others (attack report item 4).

A real local receiver that trickles its answer one byte a second (httpx's timeouts are per
read, so it never trips them) against the real worker and its egress client: the attempt ends
by its total deadline, another tenant's notification is delivered meanwhile, an unbounded
``timeout_s`` is refused at configuration, and an odd exception is a failed attempt.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import numpy as np
import pytest
from prometheus_client import CollectorRegistry
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from alerts import outbox
from alerts.delivery import DeliveryWorker, send_once
from alerts.grouping import Notification, group_of, notification_id
from alerts.payloads import render
from alerts.receivers import RECEIVER_MAX_TIMEOUT_S, Receiver, StaticReceivers
from alerts.state import AlertStatus, new_alert
from alerts.store import receiver_of_row
from collector import egress
from collector.retry import Outcome, RetryPolicy
from collector.store.models import AlertReceiver
from tests.alerts.conftest import LOOPBACK_EGRESS


class Trickler:
    """A TCP server that reads a request, then sends ``HTTP/1.1 200 OK...`` one byte a second."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.stop = threading.Event()
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            threading.Thread(target=self._trickle, args=(conn,), daemon=True).start()

    def _trickle(self, conn: socket.socket) -> None:
        try:
            conn.recv(65536)
            for byte in b"HTTP/1.1 200 OK\r\n" + b"x-slow: " + b"a" * 10_000:
                if self.stop.wait(1.0):
                    return
                conn.sendall(bytes([byte]))
        except OSError:
            return

    def close(self) -> None:
        self.stop.set()
        for c in [self.sock, *self.conns]:
            c.close()


class Fast:
    """A receiver that answers 200 at once and records when each request came."""

    def __init__(self) -> None:
        got = self.got = []  # type: list[float]

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length", 0)))
                got.append(time.monotonic())
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def trickler() -> Iterator[Trickler]:
    t = Trickler()
    yield t
    t.close()


@pytest.fixture
def fast() -> Iterator[Fast]:
    f = Fast()
    yield f
    f.close()


def _enqueue(engine: Engine, rcv: Receiver, now: float) -> str:
    a = new_alert("ttft_p95_high", {"service": "chat-api", "severity": "warning"})
    a = replace(a, status=AlertStatus.FIRING, active_since=now, fired_at=now)
    g = group_of(rcv.name, a.labels, ("alertname",))
    n = Notification(
        id=notification_id(rcv.tenant, g.group_id, 1),
        tenant=rcv.tenant,
        receiver=rcv.name,
        group_id=g.group_id,
        group_key=g.group_key,
        group_labels=g.group_labels,
        status="firing",
        reason="first notification",
        alerts=(a,),
        created_at=now,
    )
    with Session(engine) as s, s.begin():
        outbox.enqueue_notification(s, n, rcv.kind, render(n, rcv))
    return n.id


def _slow(port: int, timeout_s: float) -> Receiver:
    return Receiver(
        name="slow",
        tenant="a",
        kind="generic",
        url=f"http://127.0.0.1:{port}/",
        timeout_s=timeout_s,
    )


def test_a_trickling_receiver_ends_by_its_total_deadline(trickler: Trickler) -> None:
    """Before: each 1-byte read restarted httpx's 2 s read timeout; the attempt never ended."""
    out: list[Any] = []
    with egress.client(LOOPBACK_EGRESS) as c:
        t = threading.Thread(
            target=lambda: out.append(
                send_once(
                    c,
                    _slow(trickler.port, 2.0),
                    msg_id="msg_x",
                    body=b"{}",
                    now=time.time(),
                    timeout_s=10.0,
                )
            ),
            daemon=True,
        )
        started = time.monotonic()
        t.start()
        t.join(15.0)
        took = time.monotonic() - started
        trickler.close()  # let an old-code attempt end so the client closes
        t.join(5.0)
    assert took < 10.0, f"attempt still running after {took:.1f} s (deadline 2 s)"
    assert out and out[0].outcome is Outcome.RETRY and "Timeout" in (out[0].error or "")


def test_one_slow_receiver_does_not_hold_another_tenants_delivery(
    engine: Engine, trickler: Trickler, fast: Fast
) -> None:
    slow = _slow(trickler.port, RECEIVER_MAX_TIMEOUT_S)
    quick = Receiver(name="quick", tenant="b", kind="generic", url=f"http://127.0.0.1:{fast.port}/")
    worker = DeliveryWorker(
        engine,
        StaticReceivers([slow, quick]),
        registry=CollectorRegistry(),
        rng=np.random.default_rng(0),
        policy=RetryPolicy(request_timeout_s=10.0),
        egress_policy=LOOPBACK_EGRESS,
        concurrency=2,
    )
    stop = threading.Event()
    runner = threading.Thread(target=worker.run_forever, args=(stop,), kwargs={"poll_s": 0.1})
    _enqueue(engine, slow, time.time())
    runner.start()
    try:
        deadline = time.monotonic() + 5
        while not trickler.conns and time.monotonic() < deadline:
            time.sleep(0.05)
        assert trickler.conns, "the slow receiver was never called"
        sent = time.monotonic()
        _enqueue(engine, quick, time.time())
        while not fast.got and time.monotonic() < sent + 8:
            time.sleep(0.05)
        assert fast.got, "tenant b's notification waited for tenant a's slow receiver"
        assert fast.got[0] - sent < 5.0
    finally:
        stop.set()
        trickler.close()  # the slow attempt sees EOF and ends
        runner.join(15)
        worker.close()
    assert not runner.is_alive()


@pytest.mark.parametrize("value", [0, -1, RECEIVER_MAX_TIMEOUT_S + 1, 1e300])
def test_receiver_timeout_is_bounded_at_configuration(value: float) -> None:
    with pytest.raises(ValueError, match="timeout_s"):
        _slow(1, value)


def test_a_stored_unbounded_timeout_is_cut_on_load() -> None:
    """Rows written before the bound (1e300 was accepted) load with the bound, not a crash."""
    row = AlertReceiver(
        tenant="a",
        name="old",
        kind="generic",
        url="http://127.0.0.1:9/",
        secret=None,
        config={"timeout_s": 1e300},
        send_resolved=True,
    )
    assert receiver_of_row(row).timeout_s == RECEIVER_MAX_TIMEOUT_S
    row.config = {"timeout_s": float("nan")}
    assert receiver_of_row(row).timeout_s is None


def test_any_exception_of_an_attempt_is_a_failed_attempt() -> None:
    """Before: only httpx errors were caught; an OverflowError escaped send_once."""

    def boom(request: httpx.Request) -> httpx.Response:
        raise OverflowError("timeout value is too large")

    with httpx.Client(transport=httpx.MockTransport(boom)) as c:
        res = send_once(
            c, _slow(1, 5.0), msg_id="msg_y", body=b"{}", now=time.time(), timeout_s=5.0
        )
    assert res.outcome is Outcome.RETRY
    assert res.error == "error: OverflowError"
