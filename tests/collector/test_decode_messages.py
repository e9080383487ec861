"""Decode points of the attack report on issue 35 ("Smaller"): a deep value's error message is
one line, not one "Failed to parse value field" per level; a resource attribute nested past
the limit is cut to null (its spans kept), over OTLP/JSON and protobuf; a rejection names its
path once; a log record upb refuses is rejected alone."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collector.ingest import decode as codec
from collector.ingest.jsondoc import parse_error
from collector.ingest.logs import EVALUATION_EVENT, decode_logs
from tests.collector.test_otlp_http import pb_request
from tests.driftline.test_receive_deep_protobuf import deep_value


@pytest.fixture(autouse=True)
def _deep_json() -> Iterator[None]:
    """json.dumps of a 300-level document needs more than the default 1,000 frames."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 5000))
    yield
    sys.setrecursionlimit(old)


def deep_json(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {"stringValue": "x"}
    for _ in range(levels):
        value = {"arrayValue": {"values": [value]}}
    return value


def span(i: int, **extra: Any) -> dict[str, Any]:
    return {
        "traceId": "01" * 16,
        "spanId": f"{i:016x}",
        "name": "chat",
        "startTimeUnixNano": "1714000000000000000",
        "endTimeUnixNano": "1714000000500000000",
        **extra,
    }


def traces(resource_attrs: list[Any], spans: list[Any]) -> bytes:
    doc = {
        "resourceSpans": [
            {"resource": {"attributes": resource_attrs}, "scopeSpans": [{"spans": spans}]}
        ]
    }
    return json.dumps(doc).encode()


SERVICE = {"key": "service.name", "value": {"stringValue": "svc"}}


def test_a_deep_resource_attribute_is_cut_to_null_and_its_spans_kept_json() -> None:
    """Before: every span of the resource rejected (2 here), none kept."""
    deep = {"key": "deep", "value": deep_json(300)}
    batch = codec.decode_json(traces([SERVICE, deep], [span(1), span(2)]))
    assert batch.rejected == 0, batch.error_message
    assert [s.resource_attributes for s in batch.spans] == [
        {"service.name": "svc", "deep": None}
    ] * 2


def test_a_deep_resource_attribute_is_cut_to_null_and_its_spans_kept_protobuf() -> None:
    req = ExportTraceServiceRequest.FromString(pb_request(2))
    kv = req.resource_spans[0].resource.attributes.add()
    kv.key = "deep"
    kv.value.CopyFrom(deep_value(120))
    req.resource_spans[0].schema_url = "https://opentelemetry.io/schemas/1.26.0"
    batch = codec.decode_protobuf(req.SerializeToString())
    assert batch.rejected == 0 and len(batch.spans) == 2
    assert batch.spans[0].resource_attributes == {"service.name": "svc", "deep": None}


def test_a_malformed_resource_still_rejects_its_spans_with_the_reason() -> None:
    bad = {"key": "deep", "value": {"intValue": "not a number"}}
    attrs_batch = codec.decode_json(traces([SERVICE, bad], [span(1)]))
    assert attrs_batch.rejected == 0  # a bad value: cut to null like a deep one
    doc = {"resourceSpans": [{"resource": "nope", "scopeSpans": [{"spans": [span(1)]}]}]}
    batch = codec.decode_json(json.dumps(doc).encode())
    assert batch.rejected == 1 and "resource must be an object" in batch.error_message


def test_a_deep_span_attribute_error_is_one_short_line() -> None:
    """Before: "Failed to parse values field: " once per level (~150 times here)."""
    deep = [{"key": "deep", "value": deep_json(300)}]
    batch = codec.decode_json(traces([SERVICE], [span(1, attributes=deep), span(2)]))
    assert batch.rejected == 1 and len(batch.spans) == 1
    message = batch.error_message
    assert message.count("Failed to parse") == 0 and len(message) < 300, message
    assert message.startswith("resourceSpans[0].scopeSpans[0].spans[0]: attributes.value.values")
    assert "fields deep" in message


def test_a_deep_log_attribute_error_is_one_short_line() -> None:
    """The report's case: a 300-level log attribute repeated the prefix 300 times."""
    record = {
        "eventName": EVALUATION_EVENT,
        "timeUnixNano": "1714000000000000000",
        "attributes": [{"key": "d", "value": deep_json(300)}],
    }
    doc = {"resourceLogs": [{"scopeLogs": [{"logRecords": [record]}]}]}
    batch = decode_logs(json.dumps(doc).encode(), codec.JSON)
    assert batch.rejected == 1
    assert batch.error_message.count("Failed to parse") == 0
    assert len(batch.error_message) < 300


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("not a span", "not an object"),
        (span(3, traceId=5), "traceId must be a hex string, got int"),
        (span(3, spanId="zz"), "spanId 'zz' is not hex"),
        (span(3, links=[{"traceId": "zz"}]), "links: traceId 'zz' is not hex"),
    ],
)
def test_a_span_rejection_names_its_path_once(raw: Any, reason: str) -> None:
    batch = codec.decode_json(traces([SERVICE], [span(1), raw]))
    assert batch.error_message == f"resourceSpans[0].scopeSpans[0].spans[1]: {reason}"


@pytest.mark.parametrize(
    ("raw", "reason"),
    [("x", "not an object"), ({"traceId": 5}, "traceId must be a hex string")],
)
def test_a_log_rejection_names_its_path_once(raw: Any, reason: str) -> None:
    doc = {"resourceLogs": [{"scopeLogs": [{"logRecords": [raw]}]}]}
    batch = decode_logs(json.dumps(doc).encode(), codec.JSON)
    assert batch.error_message == f"resourceLogs[0].scopeLogs[0].logRecords[0]: {reason}"


def test_a_protobuf_log_record_upb_refuses_is_rejected_alone() -> None:
    """Before: the whole request was a DecodeError (HTTP 400, gRPC INTERNAL)."""
    req = ExportLogsServiceRequest()
    records = req.resource_logs.add().scope_logs.add().log_records
    for i, levels in enumerate((0, 60)):
        rec = records.add(event_name=EVALUATION_EVENT, time_unix_nano=1_714_000_000 * 10**9)
        name = rec.attributes.add(key="gen_ai.evaluation.name")
        name.value.string_value = f"eval{i}"
        if levels:
            deep = rec.attributes.add(key="deep")
            deep.value.CopyFrom(deep_value(levels))
    batch = decode_logs(req.SerializeToString(), codec.PROTOBUF)
    assert [e.name for e in batch.evaluations] == ["eval0"]
    assert batch.rejected == 1
    assert "logRecords[1]" in batch.error_message


def test_parse_error_keeps_short_messages_and_bounds_long_ones() -> None:
    assert parse_error(ValueError("plain")) == "plain"
    assert parse_error(ValueError("Failed to parse name field: bad")) == "name: bad"
    assert len(parse_error(ValueError("y" * 5000))) == 300


def _bad_spans_request(bad: int, good: int) -> bytes:
    """One scope of ``bad`` spans whose name is invalid UTF-8 (upb refuses each) then ``good``
    valid spans, written on the wire by hand (the SDK cannot build invalid UTF-8)."""
    req = ExportTraceServiceRequest.FromString(pb_request(good))
    scope = req.resource_spans[0].scope_spans[0].SerializeToString()
    bad_span = b"\x12\x03\x2a\x01\xff"  # ScopeSpans.spans (2) <- Span.name (5) = b"\xff"
    scope = bad_span * bad + scope
    resource = b"\x12" + _varint(len(scope)) + scope
    return b"\x0a" + _varint(len(resource)) + resource


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


def test_unparseable_spans_are_rejected_alone_with_a_bounded_message() -> None:
    batch = codec.decode_protobuf(_bad_spans_request(100, 2))
    assert len(batch.spans) == 2 and batch.rejected == 100
    assert batch.error_message.endswith("; and 80 more")
    assert "spans[0]: not parseable (String field had bad UTF-8)" in batch.error_message


def test_past_a_thousand_unparseable_spans_the_request_is_refused() -> None:
    """Each refused span costs an exception (~40-80 us): 1M five-byte ones (5 MB) took 79 s
    before this bound; now the request is refused after the first 1,001."""
    with pytest.raises(codec.DecodeError, match="more than 1000 items could not be parsed"):
        codec.decode_protobuf(_bad_spans_request(1_000_000, 1))
