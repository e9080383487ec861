"""The OTLP/HTTP route's contract: status codes, response encodings, backpressure; and the
call API's filters, pagination and errors."""

from __future__ import annotations

import gzip
import json
import threading
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from google.rpc import status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from sqlalchemy import text

from collector.store import engine as store_engine
from tests.conftest import LiveCollector, free_port, make_settings, wait_for

PB = {"Content-Type": "application/x-protobuf"}


def pb_request(n: int, *, bad: int = 0, trace_byte: int = 1, model: str = "gpt-4o") -> bytes:
    req = ExportTraceServiceRequest()
    rs = req.resource_spans.add()
    kv = rs.resource.attributes.add()
    kv.key, kv.value.string_value = "service.name", "svc"
    ss = rs.scope_spans.add()
    for i in range(n):
        s = Span(
            trace_id=bytes([trace_byte]) * 16,
            span_id=(i + 1).to_bytes(8, "big"),
            name=f"chat {model}",
            start_time_unix_nano=1_714_000_000_000_000_000 + i * 10**9,
            end_time_unix_nano=1_714_000_000_500_000_000 + i * 10**9,
        )
        for key, value in (("gen_ai.usage.input_tokens", 100), ("gen_ai.usage.output_tokens", 10)):
            a = s.attributes.add()
            a.key, a.value.int_value = key, value
        a = s.attributes.add()
        a.key, a.value.string_value = "gen_ai.request.model", model
        ss.spans.append(s)
    for _ in range(bad):
        ss.spans.append(Span(trace_id=bytes(16), span_id=b"\x01" * 8, name="bad"))
    return req.SerializeToString()


def test_protobuf_partial_success(client: TestClient) -> None:
    r = client.post("/v1/traces", content=pb_request(3, bad=2), headers=PB)
    assert r.status_code == 200 and r.headers["content-type"] == "application/x-protobuf"
    resp = ExportTraceServiceResponse.FromString(r.content)
    assert resp.partial_success.rejected_spans == 2
    assert "traceId" in resp.partial_success.error_message
    assert len(client.get("/api/v1/calls").json()["items"]) == 3


def test_json_partial_success_shape(client: TestClient) -> None:
    body = {
        "resourceSpans": [
            {
                "scopeSpans": [
                    {
                        "spans": [
                            {"traceId": "00" * 16, "spanId": "11" * 8, "name": "x"},
                            {
                                "traceId": "ab" * 16,
                                "spanId": "11" * 8,
                                "name": "chat gpt-4o",
                                "attributes": [
                                    {
                                        "key": "gen_ai.request.model",
                                        "value": {"stringValue": "gpt-4o"},
                                    }
                                ],
                            },
                        ]
                    }
                ]
            }
        ]
    }
    r = client.post("/v1/traces", json=body)
    assert r.status_code == 200
    ps = r.json()["partialSuccess"]
    assert ps["rejectedSpans"] == "1" and "traceId" in ps["errorMessage"]


@pytest.mark.parametrize(
    ("headers", "content", "status"),
    [
        ({"Content-Type": "text/plain"}, b"hello", 415),
        ({"Content-Type": "application/json", "Content-Encoding": "zstd"}, b"{}", 415),
        ({"Content-Type": "application/json"}, b"{oops", 400),
        ({"Content-Type": "application/x-protobuf"}, b"\xff\xff\xff", 400),
        ({"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"}, b"nope", 400),
    ],
)
def test_client_errors_are_4xx_in_request_encoding(
    client: TestClient, headers: dict[str, str], content: bytes, status: int
) -> None:
    r = client.post("/v1/traces", content=content, headers=headers)
    assert r.status_code == status
    if headers["Content-Type"] == "application/x-protobuf":
        st = status_pb2.Status.FromString(r.content)
        assert st.message
    else:
        assert r.json()["message"]


def test_gzip_bomb_over_http_is_413(sqlite_url: str) -> None:
    from driftline.app import create_app

    bomb = gzip.compress(b"\0" * (64 * 1024 * 1024), compresslevel=9)
    settings = make_settings(sqlite_url, grpc_enabled=False, max_body_bytes=1024 * 1024)
    with TestClient(create_app(settings)) as c:
        r = c.post("/v1/traces", content=bomb, headers={**PB, "Content-Encoding": "gzip"})
        assert r.status_code == 413
        assert c.get("/healthz").json()["status"] == "ok"


def test_queue_full_answers_503_with_retry_after(sqlite_url: str) -> None:
    """While the store is locked, queued spans stay queued; more than the queue holds → 503."""
    settings = make_settings(sqlite_url, http_port=free_port(), queue_max_spans=5)
    lc = LiveCollector(settings).start()
    locker = store_engine.make_engine(sqlite_url)
    results: list[int] = []
    try:
        with locker.connect() as conn:
            conn.exec_driver_sql("BEGIN EXCLUSIVE")
            first = threading.Thread(
                target=lambda: results.append(
                    httpx.post(
                        f"{lc.http_url}/v1/traces", content=pb_request(4), headers=PB, timeout=60
                    ).status_code
                )
            )
            first.start()
            wait_for(lambda: lc.app.state.driftline.writer.queued_spans == 4)
            r = httpx.post(
                f"{lc.http_url}/v1/traces",
                content=pb_request(3, trace_byte=2),
                headers=PB,
                timeout=30,
            )
            assert r.status_code == 503
            assert r.headers["Retry-After"] == "1"
            conn.exec_driver_sql("ROLLBACK")
        first.join(60)
        assert results == [200]
        assert len(lc.calls()) == 4
        metrics = httpx.get(f"{lc.http_url}/metrics").text
        assert (
            'driftline_ingest_requests_refused_total{code="QueueFullError",transport="http"} 1.0'
            in metrics
        )
    finally:
        locker.dispose()
        lc.stop()


def _ingest_many(client: TestClient) -> None:
    for tb, model in ((1, "gpt-4o"), (2, "gpt-4o-mini")):
        r = client.post("/v1/traces", content=pb_request(7, trace_byte=tb, model=model), headers=PB)
        assert r.status_code == 200


def test_calls_pagination_and_filters(client: TestClient) -> None:
    _ingest_many(client)
    seen: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 4}
        if cursor:
            params["cursor"] = cursor
        page = client.get("/api/v1/calls", params=params).json()
        seen += [c["call_id"] for c in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert len(seen) == 14 and len(set(seen)) == 14
    assert len(client.get("/api/v1/calls", params={"model": "gpt-4o-mini"}).json()["items"]) == 7
    tid = "02" * 16
    assert len(client.get("/api/v1/calls", params={"trace_id": tid.upper()}).json()["items"]) == 7
    since = "2024-04-24T23:06:43Z"  # T0 + 3 s
    got = client.get("/api/v1/calls", params={"since": since, "service": "svc"}).json()["items"]
    assert len(got) == 8  # spans 3..6 of both traces
    until = client.get("/api/v1/calls", params={"until": "1714000002"}).json()["items"]
    assert len(until) == 4
    one = got[0]
    assert client.get(f"/api/v1/calls/{one['call_id']}").json()["span_id"] == one["span_id"]


@pytest.mark.parametrize(
    ("params", "needle"),
    [
        ({"trace_id": "xyz"}, "trace_id"),
        ({"since": "yesterday"}, "since"),
        ({"limit": 0}, "limit"),
        ({"cursor": "!!!"}, "cursor"),
    ],
)
def test_calls_bad_parameters_are_400(
    client: TestClient, params: dict[str, Any], needle: str
) -> None:
    r = client.get("/api/v1/calls", params=params)
    assert r.status_code == 400
    assert needle in r.json()["error"]["message"]


def test_unknown_call_is_404(client: TestClient) -> None:
    r = client.get("/api/v1/calls/nope")
    assert r.status_code == 404
    assert r.json()["error"]["code"] == "not_found"


def test_healthz_and_metrics(client: TestClient) -> None:
    _ingest_many(client)
    assert client.get("/healthz").json()["database"] == "ok"
    text_ = client.get("/metrics").text
    assert 'driftline_spans_received_total{transport="http"} 14.0' in text_


def test_nul_bytes_are_stored(client: TestClient) -> None:
    body = {
        "resourceSpans": [
            {
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": "cd" * 16,
                                "spanId": "11" * 8,
                                "name": "chat gpt-4o",
                                "attributes": [
                                    {
                                        "key": "gen_ai.request.model",
                                        "value": {"stringValue": "gpt-4o"},
                                    },
                                    {"key": "input.value", "value": {"stringValue": "a\u0000b"}},
                                ],
                            },
                        ]
                    }
                ]
            }
        ]
    }
    r = client.post(
        "/v1/traces", content=json.dumps(body), headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 200, r.text
    (c,) = client.get("/api/v1/calls").json()["items"]
    assert c["input_text"] in ("a\u0000b", "a\ufffdb")


def test_sqlite_pragmas(sqlite_url: str) -> None:
    eng = store_engine.make_engine(sqlite_url)
    with eng.connect() as conn:
        assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert conn.execute(text("PRAGMA synchronous")).scalar() == 2  # FULL
    eng.dispose()
