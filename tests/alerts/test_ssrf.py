"""Alert receivers reach public addresses only, unless ``DRIFTLINE_EGRESS_ALLOW`` lists more.

As an attacker holding a tenant's admin key would try it: receiver URLs on loopback admin ports,
cloud metadata, private ranges and their disguises (IPv4-mapped IPv6, decimal and hex forms); a
custom ``Host`` header; a name that resolves to a public address when configured and to
127.0.0.1 when used (DNS rebinding); a redirect to the metadata service; and a failed delivery
whose answer holds a local service's secret (read back through ``/alerts/deliveries``).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry
from sqlalchemy import Engine

from alerts import outbox
from alerts.delivery import MAX_ERROR_BODY_BYTES, DeliveryWorker
from alerts.receivers import ReceiverDirectory, StaticReceivers
from collector.auth import create_key
from collector.egress import EgressPolicy
from collector.errors import ConfigError
from collector.retry import RetryPolicy
from collector.settings import load_settings
from driftline.app import create_app
from tests.alerts.conftest import LOOPBACK_EGRESS, FakeClock, ScriptedReceiver, Step
from tests.alerts.test_alerts_delivery import _enqueue_firing, _receiver
from tests.conftest import make_settings

#: URLs a tenant admin must not point a receiver at (without an operator's allow-list)
INTERNAL = [
    "http://127.0.0.1:9/hook",
    "http://127.0.0.1:5432/",
    "http://169.254.169.254/latest/meta-data/",
    "http://10.0.0.1/",
    "http://192.168.1.1:8080/",
    "http://172.16.0.1/",
    "http://100.64.0.1/",  # shared address space (carrier NAT)
    "http://[::1]:8000/",
    "http://[::ffff:127.0.0.1]:8000/",  # IPv4-mapped IPv6
    "http://[fd00::1]/",
    "http://0.0.0.0:4318/",
    "http://localhost:4318/",
    "http://api.localhost/",
    "http://2130706433/",  # 127.0.0.1 as one decimal number
    "http://0x7f000001/",
    "http://[::127.0.0.1]/",  # IPv4-compatible IPv6
    "http://[64:ff9b::a9fe:a9fe]/",  # NAT64 of 169.254.169.254
    "http://[2002:7f00:1::]/",  # 6to4 of 127.0.0.1
]


@pytest.fixture
def keyed(db_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[TestClient, Any]]:
    """An app with keys and the default egress policy (public addresses only)."""
    monkeypatch.setenv("DRIFTLINE_ALERT_ENABLED", "false")
    settings = make_settings(db_url, dev=False, grpc_enabled=False)
    with TestClient(create_app(settings)) as c:
        engine = c.app.state.driftline.engine  # type: ignore[attr-defined]
        keys = {
            role: {"authorization": "Bearer " + create_key(engine, "default", role)}
            for role in ("admin", "read")
        }
        yield c, keys


@pytest.mark.parametrize("url", INTERNAL)
def test_admin_cannot_point_a_receiver_inside(keyed: tuple[TestClient, Any], url: str) -> None:
    client, keys = keyed
    body = {"name": "x", "kind": "generic", "url": url}
    r = client.post("/api/v1/alerts/receivers", json=body, headers=keys["admin"])
    assert r.status_code == 400, r.text
    assert "DRIFTLINE_EGRESS_ALLOW" in r.json()["error"]["message"]
    # nor by changing a public receiver afterwards
    ok = {"name": "x", "kind": "generic", "url": "https://93.184.215.14/hook"}
    assert client.post("/api/v1/alerts/receivers", json=ok, headers=keys["admin"]).status_code in (
        201,
        409,
    )
    r = client.put("/api/v1/alerts/receivers/x", json={**body, "name": None}, headers=keys["admin"])
    assert r.status_code == 400, r.text


@pytest.mark.parametrize(
    ("headers", "why"),
    [
        ({"Host": "metadata.google.internal"}, "Host"),
        ({"host": "127.0.0.1"}, "host"),
        ({"Transfer-Encoding": "chunked"}, "Transfer-Encoding"),
        ({"X-Ok": "a\r\nHost: evil"}, "CR, LF"),
        ({"Bad Name": "1"}, "token"),
        ({f"X-{i}": "1" for i in range(33)}, "at most 32"),
    ],
)
def test_receiver_headers_cannot_redirect_or_reframe(
    keyed: tuple[TestClient, Any], headers: dict[str, str], why: str
) -> None:
    client, keys = keyed
    body = {"name": "x", "url": "https://93.184.215.14/hook", "headers": headers}
    r = client.post("/api/v1/alerts/receivers", json=body, headers=keys["admin"])
    assert r.status_code == 400, r.text
    assert why in r.json()["error"]["message"]


def test_userinfo_and_other_schemes_are_refused(keyed: tuple[TestClient, Any]) -> None:
    client, keys = keyed
    for url in ("http://user:pw@93.184.215.14/", "file:///etc/passwd", "gopher://1.1.1.1/"):
        r = client.post(
            "/api/v1/alerts/receivers", json={"name": "x", "url": url}, headers=keys["admin"]
        )
        assert r.status_code == 400, (url, r.text)


def _worker(engine: Engine, rcvs: ReceiverDirectory, clock: FakeClock, **kw: Any) -> DeliveryWorker:
    return DeliveryWorker(
        engine,
        rcvs,
        registry=CollectorRegistry(),
        rng=np.random.default_rng(5),
        policy=RetryPolicy(request_timeout_s=2, max_attempts=1),
        clock=clock.now,
        sleep=clock.sleep,
        **kw,
    )


def test_dns_rebinding_is_refused_at_connect_time(
    engine: Engine,
    clock: FakeClock,
    receiver_server: ScriptedReceiver,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The name resolves to a public address when the receiver is checked, to 127.0.0.1 when
    the worker connects: the worker checks the address it is about to dial, not the name."""
    real = socket.getaddrinfo
    answers = iter(["93.184.215.14"])

    def rebinding_dns(host: Any, port: Any, *args: Any, **kw: Any) -> Any:
        if host == "hooks.rebind.test":  # first answer public, then loopback (TTL 0)
            ip = next(answers, "127.0.0.1")
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, int(port)))]
        return real(host, port, *args, **kw)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding_dns)
    url = f"http://hooks.rebind.test:{receiver_server.port}/hook"
    EgressPolicy().check_url(url)  # configuration time: public, accepted
    rcv = _receiver(url)
    nid = _enqueue_firing(engine, rcv, clock.now())
    worker = _worker(engine, StaticReceivers([rcv]), clock)
    try:
        worker.run_once()
    finally:
        worker.close()
    assert receiver_server.requests == []  # never dialled
    (item,) = outbox.list_items(engine, "default")
    assert item.id == nid and item.status == outbox.FAILED
    assert item.failure_reason == "permanent"
    assert (item.last_error or "").startswith("egress denied: hooks.rebind.test")


def test_the_allow_list_opens_exactly_what_it_names(
    engine: Engine, clock: FakeClock, receiver_server: ScriptedReceiver
) -> None:
    other_port = EgressPolicy.parse(f"127.0.0.1:{receiver_server.port + 1}")
    rcv = _receiver(receiver_server.url)
    _enqueue_firing(engine, rcv, clock.now())
    worker = _worker(engine, StaticReceivers([rcv]), clock, egress_policy=other_port)
    try:
        worker.run_once()
    finally:
        worker.close()
    assert receiver_server.requests == []
    exact = EgressPolicy.parse(f"127.0.0.1:{receiver_server.port}")
    outbox.redeliver(engine, "default", outbox.list_items(engine, "default")[0].id, clock.now())
    worker = _worker(engine, StaticReceivers([rcv]), clock, egress_policy=exact)
    try:
        worker.run_once()
    finally:
        worker.close()
    assert len(receiver_server.requests) == 1
    assert outbox.list_items(engine, "default")[0].status == outbox.DELIVERED


def test_redirects_are_not_followed(
    engine: Engine, clock: FakeClock, receiver_server: ScriptedReceiver
) -> None:
    receiver_server.script = [Step(307, {"location": "http://169.254.169.254/latest/"})]
    rcv = _receiver(receiver_server.url)
    _enqueue_firing(engine, rcv, clock.now())
    worker = _worker(engine, StaticReceivers([rcv]), clock, egress_policy=LOOPBACK_EGRESS)
    try:
        worker.run_once()
    finally:
        worker.close()
    assert len(receiver_server.requests) == 1
    assert outbox.list_items(engine, "default")[0].status != outbox.DELIVERED


class _LeakyService:
    """A local service that answers 500 with 1 MB holding a secret (and a NUL) at its start."""

    BODY = b"\x00db_password=TOPSECRET;" + b"x" * (1 << 20)

    def __init__(self) -> None:
        body = self.BODY

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length", "0")))
                self.send_response(500)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                with contextlib.suppress(OSError):  # the worker stops reading after 512 bytes
                    self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"


def test_failed_answer_is_truncated_and_shown_to_admins_only(
    keyed: tuple[TestClient, Any], clock: FakeClock
) -> None:
    client, keys = keyed
    engine: Engine = client.app.state.driftline.engine  # type: ignore[attr-defined]
    leaky = _LeakyService()
    try:
        rcv = _receiver(leaky.url)
        _enqueue_firing(engine, rcv, clock.now())
        worker = _worker(engine, StaticReceivers([rcv]), clock, egress_policy=LOOPBACK_EGRESS)
        try:
            worker.run_once()
        finally:
            worker.close()
    finally:
        leaky.server.shutdown()
        leaky.server.server_close()
    (seen,) = client.get("/api/v1/alerts/deliveries", headers=keys["read"]).json()["items"]
    assert seen["status"] == "failed" and seen["last_status_code"] == 500
    assert seen["last_error"] == "HTTP 500"  # the kind of failure, not the answer
    (full,) = client.get("/api/v1/alerts/deliveries", headers=keys["admin"]).json()["items"]
    error = full["last_error"]
    assert "TOPSECRET" in error and "\x00" not in error and error.endswith("[truncated]")
    assert len(error.encode()) <= MAX_ERROR_BODY_BYTES + len("HTTP 500: ") + len(" [truncated]")


def test_a_bad_allow_list_fails_at_start_naming_the_variable() -> None:
    for bad in ("http://hooks/", "10.0.0.0/33", "hooks.internal:99999", "a b"):
        with pytest.raises(ConfigError, match="DRIFTLINE_EGRESS_ALLOW"):
            load_settings(egress_allow=bad)
    assert load_settings(egress_allow="127.0.0.1/32, hooks.internal:8443,[::1]:9099")


def test_rows_stored_before_the_rules_fail_cleanly(
    engine: Engine, clock: FakeClock, receiver_server: ScriptedReceiver
) -> None:
    """A receiver row written before these rules (a Host header, a 3,000-character URL) never
    sends that header, and an unloadable row fails its notifications instead of crashing every
    delivery round."""
    from sqlalchemy.orm import Session

    from alerts.runtime import DbReceivers
    from collector.store.models import AlertReceiver

    with Session(engine) as s, s.begin():
        for name, url, headers in (
            ("hosty", receiver_server.url, {"Host": "metadata.internal", "X-Team": "a"}),
            ("long", "http://93.184.215.14/" + "a" * 3000, {}),
        ):
            s.add(
                AlertReceiver(
                    tenant="default",
                    name=name,
                    kind="generic",
                    url=url,
                    secret=None,
                    config={"headers": headers},
                    send_resolved=True,
                )
            )
    directory = DbReceivers(engine, StaticReceivers([]))
    hosty = directory.get("default", "hosty")
    assert hosty is not None and hosty.headers == {"X-Team": "a"}
    assert directory.get("default", "long") is None
    _enqueue_firing(engine, _receiver(receiver_server.url, name="hosty"), clock.now())
    _enqueue_firing(engine, _receiver(receiver_server.url, name="long"), clock.now(), rule="r2")
    worker = _worker(engine, directory, clock, egress_policy=LOOPBACK_EGRESS)
    try:
        worker.run_once()
    finally:
        worker.close()
    (req,) = receiver_server.requests
    assert req.headers["host"] == f"127.0.0.1:{receiver_server.port}"
    assert req.headers["x-team"] == "a"
    by_name = {i.receiver: i for i in outbox.list_items(engine, "default")}
    assert by_name["hosty"].status == outbox.DELIVERED
    assert by_name["long"].failure_reason == "unknown_receiver"
