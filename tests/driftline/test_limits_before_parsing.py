"""Limits before parsing (issue 35, item 3): the key is checked from the request head and the
body is bounded before any route reads it, on a real uvicorn server and a real gRPC server.

Each test speaks raw HTTP/1.1 over a socket: it sends the head and a small part of a body that
declares (or streams) far more, then waits for the answer. A server that reads the body before
it answers never answers (the test times out and fails) - what main did for every REST route
with a body.
"""

from __future__ import annotations

import re
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from collector.auth import create_key
from collector.store import engine as store_engine
from driftline.api.limits import Requirement, route_keys
from tests.conftest import LiveCollector, make_settings
from tests.support import free_port

LIMIT = 64 * 1024
#: how long a server that answers from the head may take (it never reads the rest)
ANSWER_S = 5.0


class Keys:
    def __init__(self, ingest: str, read: str) -> None:
        self.ingest, self.read = ingest, read


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, _sqlite_template: Path
) -> Iterator[tuple[LiveCollector, Keys]]:
    folder = tmp_path_factory.mktemp("limits")
    shutil.copyfile(_sqlite_template, folder / "driftline.db")
    url = f"sqlite:///{folder}/driftline.db"
    settings = make_settings(
        url,
        dev=False,
        http_port=free_port(),
        grpc_port=0,
        max_request_bytes=LIMIT,
        grpc_max_message_bytes=LIMIT,
        auto_migrate=False,
        scheduler_enabled=False,
    )
    engine = store_engine.make_engine(url)
    keys = Keys(create_key(engine, "acme", "ingest"), create_key(engine, "acme", "read"))
    engine.dispose()
    lc = LiveCollector(settings).start()
    try:
        yield lc, keys
    finally:
        lc.stop()


def _exchange(port: int, head: str, body: bytes) -> bytes:
    """Send ``head`` and ``body`` (not the whole body the head announces), then read what the
    server answers within :data:`ANSWER_S` (b"" when it answers nothing)."""
    with socket.create_connection(("127.0.0.1", port), timeout=ANSWER_S) as s:
        s.sendall(head.encode() + body)
        try:
            return s.recv(65536)
        except TimeoutError:
            return b""


def _head(path: str, declared: int, key: str | None = None, chunked: bool = False) -> str:
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json"]
    lines.append("Transfer-Encoding: chunked" if chunked else f"Content-Length: {declared}")
    if key is not None:
        lines.append(f"Authorization: Bearer {key}")
    return "\r\n".join(lines) + "\r\n\r\n"


def _status(raw: bytes) -> int | None:
    return int(raw.split(b" ", 2)[1]) if raw.startswith(b"HTTP/1.1 ") else None


@pytest.mark.parametrize("key", [None, "dl_000000000000_wrong", "not-a-bearer"])
def test_a_bad_key_gets_401_before_the_body_is_read(
    server: tuple[LiveCollector, Keys], key: str | None
) -> None:
    lc, _keys = server
    # 100 MB announced, 16 KiB sent: the answer must come from the head alone
    raw = _exchange(lc.settings.http_port, _head("/api/v1/feedback", 100 << 20, key), b"{" * 16384)
    assert _status(raw) == 401, raw[:300]
    assert b'"unauthorized"' in raw


def test_a_key_without_the_permission_gets_403_before_the_body_is_read(
    server: tuple[LiveCollector, Keys],
) -> None:
    lc, keys = server
    raw = _exchange(lc.settings.http_port, _head("/api/v1/feedback", 100 << 20, keys.read), b"{")
    assert _status(raw) == 403, raw[:300]
    assert b"may not ingest" in raw


def test_content_length_over_the_limit_gets_413_at_once(
    server: tuple[LiveCollector, Keys],
) -> None:
    lc, keys = server
    raw = _exchange(lc.settings.http_port, _head("/api/v1/feedback", LIMIT + 1, keys.ingest), b"{")
    assert _status(raw) == 413, raw[:300]
    assert b'"body_too_large"' in raw


def test_a_chunked_body_is_cut_at_the_limit(server: tuple[LiveCollector, Keys]) -> None:
    """Chunks past the limit, no terminating chunk: 413 without waiting for the end."""
    lc, keys = server
    chunk = b"x" * 8192
    body = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(LIMIT // len(chunk) + 2))
    raw = _exchange(lc.settings.http_port, _head("/api/v1/feedback", 0, keys.ingest, True), body)
    assert _status(raw) == 413, raw[:300]
    assert b'"body_too_large"' in raw


def test_within_the_limit_the_route_answers_as_before(server: tuple[LiveCollector, Keys]) -> None:
    lc, keys = server
    auth = {"Authorization": f"Bearer {keys.ingest}"}
    r = httpx.post(f"{lc.http_url}/api/v1/feedback", json={"score": 1}, headers=auth)
    assert r.status_code == 400 and "kind must be one of" in r.text  # the route parsed it
    r = httpx.post(f"{lc.http_url}/api/v1/feedback", content=b"{", headers=auth)
    assert r.status_code == 400  # still parsed and refused by the route
    assert httpx.get(f"{lc.http_url}/healthz").status_code == 200  # no key needed
    r = httpx.get(f"{lc.http_url}/api/v1/calls", headers={"Authorization": f"Bearer {keys.read}"})
    assert r.status_code == 200
    assert httpx.get(f"{lc.http_url}/api/v1/calls").status_code == 401


def test_otlp_without_a_key_gets_401_before_its_body(server: tuple[LiveCollector, Keys]) -> None:
    lc, _keys = server
    raw = _exchange(lc.settings.http_port, _head("/v1/traces", 50 << 20), b"{" * 1024)
    assert _status(raw) == 401, raw[:300]


def _big_export(size: int) -> trace_service_pb2.ExportTraceServiceRequest:
    req = trace_service_pb2.ExportTraceServiceRequest()
    span = req.resource_spans.add().scope_spans.add().spans.add()
    span.trace_id, span.span_id, span.name = b"\x01" * 16, b"\x02" * 8, "big"
    span.attributes.append(KeyValue(key="blob", value=AnyValue(string_value="x" * size)))
    return req


def test_grpc_refuses_a_message_over_the_setting(server: tuple[LiveCollector, Keys]) -> None:
    """main took 50 MB messages (the limit was the 64 MiB OTLP/HTTP one): 50 MB here, and just
    over the configured limit."""
    lc, keys = server
    channel = grpc.insecure_channel(
        lc.grpc_endpoint, options=[("grpc.max_send_message_length", 64 << 20)]
    )
    stub = trace_service_pb2_grpc.TraceServiceStub(channel)
    meta = (("authorization", f"Bearer {keys.ingest}"),)
    try:
        for size in (LIMIT + 1, 50_000_000):
            with pytest.raises(grpc.RpcError) as err:
                stub.Export(_big_export(size), metadata=meta, timeout=30)
            assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        ok = stub.Export(_big_export(1000), metadata=meta, timeout=30)
        assert ok.partial_success.rejected_spans == 0
    finally:
        channel.close()


def _every_route(lc: LiveCollector) -> list[tuple[str, str, Requirement]]:
    """(method, concrete path, requirement) of every API route of the live app."""
    out: list[tuple[str, str, Requirement]] = []
    for route in route_keys(lc.app.routes):
        path = re.sub(r"\(\?P<[^>]+>[^)]*\)", "x1", route.pattern.pattern)
        path = path.strip("^$").replace("\\", "")
        out.extend((method, path, route.requirement) for method in sorted(route.methods))
    return out


def test_every_route_that_needs_a_key_answers_from_the_head(
    server: tuple[LiveCollector, Keys],
) -> None:
    """Attack every route: no key, 100 MB announced, a few bytes sent. Each route that needs a
    key answers 401 at once; every other one answers 413 at once (OTLP: 401, its own limit
    comes after the key)."""
    lc, _keys = server
    routes = _every_route(lc)
    assert len([r for r in routes if r[2] is not None]) >= 30  # the walk found the routers
    for method, path, requirement in routes:
        head = _head(path, 100 << 20).replace("POST ", f"{method} ", 1)
        raw = _exchange(lc.settings.http_port, head, b"{" * 1024)
        expected = 401 if requirement is not None else 413
        assert _status(raw) == expected, (method, path, raw[:200])
