"""Pure decoding tests: OTLP/JSON mapping rules, protobuf, bad ids, streaming decompression."""

from __future__ import annotations

import asyncio
import gzip
import json
import zlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from collector.errors import BodyTooLargeError, DecodeError, UnsupportedMediaError
from collector.ingest.decode import (
    content_encoding,
    decode_json,
    decode_protobuf,
    media_type,
    read_body,
)

TRACE = "5B8EFFF798038103D269B633813FC60C"
SPAN = "EEE19B7EC3C1B174"


def span_json(**over: Any) -> dict[str, Any]:
    s: dict[str, Any] = {
        "traceId": TRACE,
        "spanId": SPAN,
        "name": "chat gpt-4o",
        "kind": 3,
        "startTimeUnixNano": "1714000000000000001",
        "endTimeUnixNano": 1714000001000000001,
        "attributes": [{"key": "gen_ai.usage.input_tokens", "value": {"intValue": "12"}}],
    }
    s.update(over)
    return s


def body(*spans: dict[str, Any], resource: dict[str, Any] | None = None) -> bytes:
    return json.dumps(
        {
            "resourceSpans": [
                {
                    "resource": resource
                    or {"attributes": [{"key": "service.name", "value": {"stringValue": "svc"}}]},
                    "scopeSpans": [{"scope": {"name": "s", "version": "1"}, "spans": list(spans)}],
                }
            ]
        }
    ).encode()


def test_json_hex_ids_any_case_and_int64_exact() -> None:
    b = decode_json(body(span_json()))
    assert b.rejected == 0
    (s,) = b.spans
    assert s.trace_id == TRACE.lower() and s.span_id == SPAN.lower()
    assert s.start_unix_nano == 1714000000000000001  # no float rounding
    assert s.end_unix_nano == 1714000001000000001
    assert s.attributes["gen_ai.usage.input_tokens"] == 12
    assert s.service_name == "svc" and s.scope_name == "s" and s.scope_version == "1"


def test_json_snake_case_unknown_fields_and_int_enums() -> None:
    raw = {
        "trace_id": TRACE,
        "span_id": SPAN,
        "parent_span_id": "0000000000000000",
        "name": "x",
        "kind": 2,
        "start_time_unix_nano": "5",
        "end_time_unix_nano": "6",
        "status": {"code": 2, "message": "boom"},
        "someFutureField": {"nested": True},
        "events": [{"timeUnixNano": "5", "name": "exception", "attributes": []}],
    }
    (s,) = decode_json(body(raw)).spans
    assert s.parent_span_id is None  # all-zero parent = root
    assert s.kind == 2 and s.status_code == 2 and s.status_message == "boom"
    assert s.events[0]["name"] == "exception"


@pytest.mark.parametrize(
    ("override", "needle"),
    [
        ({"traceId": "00000000000000000000000000000000"}, "traceId"),
        ({"traceId": "abc"}, "traceId"),
        ({"traceId": "zz" * 16}, "not hex"),
        ({"spanId": ""}, "spanId"),
        ({"spanId": "0000000000000000"}, "spanId"),
        ({"parentSpanId": "abcd"}, "parentSpanId"),
        ({"startTimeUnixNano": "not-a-number"}, "spans[1]"),
    ],
)
def test_bad_span_rejected_alone(override: dict[str, Any], needle: str) -> None:
    good = span_json(spanId="00000000000000a1")
    bad = span_json(**override)
    b = decode_json(body(good, bad))
    assert [s.span_id for s in b.spans] == ["00000000000000a1"]
    assert b.rejected == 1
    assert needle in b.error_message


def test_json_invalid_utf8_is_replaced() -> None:
    raw = body(span_json(name="chat PLACEHOLDER")).replace(b"PLACEHOLDER", b"caf\xe9")
    (s,) = decode_json(raw).spans
    assert s.name == "chat caf\ufffd"


@pytest.mark.parametrize("raw", [b"[1,2]", b"{not json", b'{"resourceSpans": 5}'])
def test_json_undecodable_body(raw: bytes) -> None:
    with pytest.raises(DecodeError):
        decode_json(raw)


def test_json_structured_attribute_values() -> None:
    attrs = [
        {"key": "arr", "value": {"arrayValue": {"values": [{"stringValue": "stop"}]}}},
        {
            "key": "kv",
            "value": {"kvlistValue": {"values": [{"key": "a", "value": {"boolValue": True}}]}},
        },
        {"key": "d", "value": {"doubleValue": 1.5}},
        {"key": "b", "value": {"bytesValue": "AAE="}},
    ]
    (s,) = decode_json(body(span_json(attributes=attrs))).spans
    assert s.attributes == {"arr": ["stop"], "kv": {"a": True}, "d": 1.5, "b": "AAE="}


def test_protobuf_roundtrip_and_bad_ids() -> None:
    req = ExportTraceServiceRequest()
    ss = req.resource_spans.add().scope_spans.add()
    ok = Span(trace_id=bytes(range(1, 17)), span_id=bytes(range(1, 9)), name="chat m")
    bad = Span(trace_id=bytes(16), span_id=bytes(range(1, 9)), name="chat m")
    ss.spans.extend([ok, bad])
    b = decode_protobuf(req.SerializeToString())
    assert [s.trace_id for s in b.spans] == [bytes(range(1, 17)).hex()]
    assert b.rejected == 1 and "traceId" in b.error_message
    assert decode_protobuf(b"").spans == []
    with pytest.raises(DecodeError):
        decode_protobuf(b"\xff\xff\xff\xff")


def test_media_type_and_encoding() -> None:
    assert media_type("application/json; charset=utf-8") == "application/json"
    assert media_type("application/x-protobuf") == "application/x-protobuf"
    with pytest.raises(UnsupportedMediaError):
        media_type("text/plain")
    with pytest.raises(UnsupportedMediaError):
        media_type(None)
    assert content_encoding(None) == "identity"
    assert content_encoding("GZIP") == "gzip"
    with pytest.raises(UnsupportedMediaError, match="zstd"):
        content_encoding("zstd")


async def _chunks(data: bytes, size: int = 65536) -> AsyncIterator[bytes]:
    for i in range(0, len(data), size):
        yield data[i : i + size]


def _read(data: bytes, encoding: str, limit: int) -> bytes:
    return asyncio.run(read_body(_chunks(data), encoding, limit))


def test_read_body_gzip_deflate_identity_and_concatenated_members() -> None:
    payload = b"x" * 100_000
    assert _read(gzip.compress(payload), "gzip", 200_000) == payload
    assert _read(zlib.compress(payload), "deflate", 200_000) == payload
    assert _read(payload, "identity", 200_000) == payload
    two = gzip.compress(b"a" * 10) + gzip.compress(b"b" * 10)
    assert _read(two, "gzip", 100) == b"a" * 10 + b"b" * 10


def test_gzip_bomb_stops_at_the_limit() -> None:
    bomb = gzip.compress(b"\0" * (200 * 1024 * 1024), compresslevel=9)  # ~200 KB on the wire
    assert len(bomb) < 1024 * 1024
    with pytest.raises(BodyTooLargeError):
        _read(bomb, "gzip", 1024 * 1024)


def test_bad_or_truncated_gzip() -> None:
    with pytest.raises(DecodeError, match="decompress"):
        _read(b'{"resourceSpans": []}', "gzip", 1000)
    with pytest.raises(DecodeError, match="truncated"):
        _read(gzip.compress(b"y" * 1000)[:-12], "gzip", 10_000)


def test_identity_over_limit() -> None:
    with pytest.raises(BodyTooLargeError):
        _read(b"z" * 2000, "identity", 1000)
