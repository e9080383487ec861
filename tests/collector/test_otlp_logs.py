"""OTLP logs: gen_ai event records joined to their span's call record whichever arrives first,
evaluation results stored as external scores, other records counted; the route's contract."""

from __future__ import annotations

import gzip
import json
from typing import Any

from fastapi.testclient import TestClient
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord
from sqlalchemy import text

from collector.ingest.decode import any_value
from tests.collector.test_otlp_http import pb_request

PB = {"Content-Type": "application/x-protobuf"}
TRACE = bytes([1]) * 16
T0 = 1_714_000_000_000_000_000


def _any(value: Any) -> AnyValue:
    if isinstance(value, dict):
        av = AnyValue()
        for k, v in value.items():
            av.kvlist_value.values.append(KeyValue(key=k, value=_any(v)))
        return av
    if isinstance(value, list):
        av = AnyValue()
        av.array_value.values.extend(_any(v) for v in value)
        return av
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    return AnyValue(string_value=str(value))


def record(
    name: str,
    *,
    span: int | None = 1,
    body: Any = None,
    attrs: dict[str, Any] | None = None,
    at: int = 0,
    in_attribute: bool = False,
) -> LogRecord:
    rec = LogRecord(time_unix_nano=T0 + at)
    if in_attribute:  # older SDKs: the name in an ``event.name`` attribute
        rec.attributes.append(KeyValue(key="event.name", value=_any(name)))
    else:
        rec.event_name = name
    if span is not None:
        rec.trace_id, rec.span_id = TRACE, span.to_bytes(8, "big")
    if body is not None:
        rec.body.CopyFrom(_any(body))
    for k, v in (attrs or {}).items():
        rec.attributes.append(KeyValue(key=k, value=_any(v)))
    assert any_value(_any(body)) == body or body is None
    return rec


def logs_request(*records: LogRecord) -> bytes:
    req = ExportLogsServiceRequest()
    req.resource_logs.add().scope_logs.add().log_records.extend(records)
    return req.SerializeToString()


def call(client: TestClient, span_id: int = 1) -> dict[str, Any]:
    items = client.get("/api/v1/calls").json()["items"]
    (c,) = [c for c in items if c["span_id"] == span_id.to_bytes(8, "big").hex()]
    return dict(c)


LEGACY = (
    record("gen_ai.system.message", body={"content": "Be brief."}, at=1),
    record("gen_ai.user.message", body={"content": "Capital of France?"}, at=2, in_attribute=True),
    record(
        "gen_ai.choice",
        body={"index": 0, "finish_reason": "stop", "message": {"content": "Paris."}},
        at=3,
    ),
)


def test_legacy_events_before_and_after_their_span(client: TestClient) -> None:
    # span 1 first, then its records; records of span 2 first, then the span
    assert client.post("/v1/traces", content=pb_request(1), headers=PB).status_code == 200
    r = client.post("/v1/logs", content=logs_request(*LEGACY), headers=PB)
    assert r.status_code == 200
    assert not ExportLogsServiceResponse.FromString(r.content).HasField("partial_success")
    early = [
        record(
            rec.event_name or "gen_ai.user.message",
            span=2,
            body=any_value(rec.body),
            at=rec.time_unix_nano - T0,
        )
        for rec in LEGACY
    ]
    assert client.post("/v1/logs", content=logs_request(*early), headers=PB).status_code == 200
    assert client.post("/v1/traces", content=pb_request(2), headers=PB).status_code == 200
    for sid in (1, 2):
        c = call(client, sid)
        assert c["input_text"] == "system: Be brief.\nuser: Capital of France?"
        assert c["output_text"] == "Paris." and c["finish_reasons"] == ["stop"]
    # re-sent records and re-sent spans change nothing (idempotent)
    assert client.post("/v1/logs", content=logs_request(*LEGACY), headers=PB).status_code == 200
    assert client.post("/v1/traces", content=pb_request(2), headers=PB).status_code == 200
    assert call(client, 1)["input_text"] == "system: Be brief.\nuser: Capital of France?"
    engine = client.app.state.driftline.engine  # type: ignore[attr-defined]
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM gen_ai_log_events")).scalar() == 6


def test_operation_details_json_gzip_and_evaluation(client: TestClient) -> None:
    details = {
        "gen_ai.operation.name": "chat",
        "gen_ai.input.messages": [
            {"role": "user", "parts": [{"type": "text", "content": "Hi there"}]}
        ],
        "gen_ai.output.messages": [
            {
                "role": "assistant",
                "parts": [{"type": "text", "content": "Hello!"}],
                "finish_reason": "length",
            }
        ],
    }
    span_hex = (3).to_bytes(8, "big").hex()
    body = {
        "resourceLogs": [
            {
                "scopeLogs": [
                    {
                        "logRecords": [
                            {
                                "timeUnixNano": str(T0),
                                "eventName": "gen_ai.client.inference.operation.details",
                                "traceId": TRACE.hex(),
                                "spanId": span_hex,
                                "attributes": [
                                    {"key": k, "value": json.loads(_json_any(v))}
                                    for k, v in details.items()
                                ],
                            },
                            {
                                "timeUnixNano": str(T0 + 5),
                                "eventName": "gen_ai.evaluation.result",
                                "traceId": TRACE.hex(),
                                "spanId": span_hex,
                                "attributes": [
                                    {
                                        "key": "gen_ai.evaluation.name",
                                        "value": {"stringValue": "Relevance"},
                                    },
                                    {
                                        "key": "gen_ai.evaluation.score.value",
                                        "value": {"doubleValue": 0.75},
                                    },
                                    {
                                        "key": "gen_ai.evaluation.score.label",
                                        "value": {"stringValue": "relevant"},
                                    },
                                ],
                            },
                            {"timeUnixNano": str(T0), "body": {"stringValue": "an app log line"}},
                            {"traceId": "zz", "eventName": "gen_ai.choice"},
                        ]
                    }
                ]
            }
        ]
    }
    r = client.post(
        "/v1/logs",
        content=gzip.compress(json.dumps(body).encode()),
        headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
    )
    assert r.status_code == 200, r.text
    assert r.json()["partialSuccess"]["rejectedLogRecords"] == "1"
    assert client.post("/v1/traces", content=pb_request(3), headers=PB).status_code == 200
    c = call(client, 3)
    assert (c["input_text"], c["output_text"], c["finish_reasons"]) == (
        "Hi there",
        "Hello!",
        ["length"],
    )
    engine = client.app.state.driftline.engine  # type: ignore[attr-defined]
    with engine.connect() as conn:
        rows = conn.execute(
            text("SELECT span_id, name, value, label, source FROM external_scores")
        ).all()
    assert [tuple(r) for r in rows] == [(span_hex, "Relevance", 0.75, "relevant", "otel_event")]
    metrics = client.get("/metrics").text
    assert 'driftline_log_records_total{kind="other",transport="http"} 1.0' in metrics


def _json_any(value: Any) -> str:
    from google.protobuf import json_format

    return json_format.MessageToJson(_any(value), indent=None)


def test_bad_logs_requests_are_4xx_never_5xx(client: TestClient) -> None:
    assert client.post("/v1/logs", content=b"\xff\x00garbage", headers=PB).status_code == 400
    assert (
        client.post(
            "/v1/logs", content=b"[1]", headers={"Content-Type": "application/json"}
        ).status_code
        == 400
    )
    assert (
        client.post("/v1/logs", content=b"{}", headers={"Content-Type": "text/plain"}).status_code
        == 415
    )
    bad_id = LogRecord(event_name="gen_ai.choice", trace_id=b"\x01" * 3, span_id=b"\x01" * 8)
    r = client.post("/v1/logs", content=logs_request(bad_id, *LEGACY), headers=PB)
    assert ExportLogsServiceResponse.FromString(r.content).partial_success.rejected_log_records == 1


def test_late_logs_do_not_count_a_call_twice_in_metrics(client: TestClient) -> None:
    def e2e_count() -> float:
        for line in client.get("/metrics").text.splitlines():
            if line.startswith("driftline_e2e_seconds_count"):
                return float(line.rsplit(" ", 1)[1])
        return 0.0

    assert client.post("/v1/traces", content=pb_request(1), headers=PB).status_code == 200
    before = e2e_count()
    assert before >= 1
    assert client.post("/v1/logs", content=logs_request(*LEGACY), headers=PB).status_code == 200
    assert call(client, 1)["output_text"] == "Paris."  # the late content joined the call
    assert e2e_count() == before


def _span_with_pii(span_id: int) -> bytes:
    """Span ``span_id`` of :func:`pb_request` alone, its system instructions holding an e-mail
    address (one redaction under the default ``redacted`` policy)."""
    req = ExportTraceServiceRequest.FromString(pb_request(span_id))
    spans = req.resource_spans[0].scope_spans[0].spans
    del spans[: span_id - 1]
    instructions = json.dumps([{"type": "text", "content": "Write to ops@example.com."}])
    spans[0].attributes.append(KeyValue(key="gen_ai.system_instructions", value=_any(instructions)))
    return req.SerializeToString()


def test_redactions_of_log_content_count_whichever_arrives_first(client: TestClient) -> None:
    """The call's ``redactions`` is the span's own count plus its records' counts, in both
    orders, and re-sent records or spans do not count twice."""

    def records(span_id: int) -> bytes:
        return logs_request(
            record("gen_ai.user.message", span=span_id, body={"content": "I am bob@example.org"}),
            record(
                "gen_ai.choice",
                span=span_id,
                body={"index": 0, "finish_reason": "stop", "message": {"content": "Hi a@b.io"}},
                at=1,
            ),
        )

    def post(path: str, body: bytes) -> None:
        assert client.post(path, content=body, headers=PB).status_code == 200

    post("/v1/traces", _span_with_pii(1))  # span first
    assert call(client, 1)["redactions"] == 1
    post("/v1/logs", records(1))
    post("/v1/logs", records(2))  # records first
    post("/v1/traces", _span_with_pii(2))
    for sid in (1, 2):
        c = call(client, sid)
        assert c["redactions"] == 3, sid
        assert c["input_text"] == "system: Write to [EMAIL].\nuser: I am [EMAIL]"
        assert c["output_text"] == "Hi [EMAIL]"
    # re-sent records (joined again through the writer) and re-sent spans count once
    post("/v1/logs", records(1))
    post("/v1/logs", records(2))
    post("/v1/traces", _span_with_pii(1))
    assert [call(client, sid)["redactions"] for sid in (1, 2)] == [3, 3]
    # one more record after the join adds its own count
    extra = record("gen_ai.user.message", span=1, body={"content": "also c@d.org"}, at=2)
    post("/v1/logs", logs_request(extra))
    assert call(client, 1)["redactions"] == 4
