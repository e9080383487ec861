"""OTLP log decoding: bytes (protobuf or OTLP/JSON) -> gen_ai event records.

Pure functions, no I/O. gen_ai content events (``gen_ai.client.inference.operation.details``
and the older ``gen_ai.{system,user,assistant,tool}.message`` / ``gen_ai.choice``) become
span-event dicts (``{name, time_unix_nano, attributes}``, the body's fields among the
attributes) keyed by the span they belong to; ``gen_ai.evaluation.result`` records become
:class:`Evaluation`; every other record is counted and dropped. A malformed record is rejected
alone (``partialSuccess.rejectedLogRecords``).

Sources: opentelemetry-proto ``opentelemetry/proto/logs/v1/logs.proto`` (``event_name``, field
12; older SDKs put the name in an ``event.name`` attribute); semconv gen-ai events
(``otel-genai-otlp-webhooks.md`` §2.6-2.7).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError as ProtoDecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord

from collector.errors import DecodeError
from collector.ingest.decode import MAX_ERROR_MESSAGES, PROTOBUF, _load_json, any_value, attributes
from collector.ingest.jsondoc import parse_error
from collector.ingest.values import evaluation_text_error, time_error
from collector.ingest.wirewalk import WireError, recover

DETAILS_EVENT = "gen_ai.client.inference.operation.details"
EVALUATION_EVENT = "gen_ai.evaluation.result"
CONTENT_EVENTS = frozenset(
    {
        DETAILS_EVENT,
        "gen_ai.system.message",
        "gen_ai.user.message",
        "gen_ai.assistant.message",
        "gen_ai.tool.message",
        "gen_ai.tools.message",
        "gen_ai.choice",
    }
)


@dataclass(frozen=True, slots=True)
class Evaluation:
    """One ``gen_ai.evaluation.result`` record. ``score_value`` None when not sent."""

    trace_id: str | None
    span_id: str | None
    response_id: str | None
    name: str
    score_value: float | None
    score_label: str | None
    explanation: str | None
    attributes: dict[str, Any]
    time_unix_nano: int


@dataclass(slots=True)
class LogBatch:
    """The gen_ai records of one export request, plus counts of the others."""

    content: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    evaluations: list[Evaluation] = field(default_factory=list)
    other: int = 0
    unjoinable: int = 0
    rejected: int = 0
    errors: list[str] = field(default_factory=list)

    def reject(self, message: str) -> None:
        self.rejected += 1
        if len(self.errors) < MAX_ERROR_MESSAGES:
            self.errors.append(message)

    @property
    def error_message(self) -> str:
        return "; ".join(self.errors)


def _id(raw: bytes, size: int, what: str) -> str | None:
    if not raw or not any(raw):
        return None
    if len(raw) != size:
        raise ValueError(f"invalid {what} {raw.hex()!r}: must be {size} bytes or empty")
    return raw.hex()


def _score(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def add_record(batch: LogBatch, rec: LogRecord) -> None:
    """Classify one log record into ``batch``.

    Raises:
        ValueError: a trace or span id of the wrong size; a time the store cannot hold, an
            evaluation name, label or response id longer than its column
            (:func:`~collector.ingest.values.time_error`, ``evaluation_text_error``).
    """
    trace_id = _id(rec.trace_id, 16, "traceId")
    span_id = _id(rec.span_id, 8, "spanId")
    attrs = attributes(rec.attributes)
    name = rec.event_name or attrs.pop("event.name", None)
    attrs.pop("event.name", None)
    time = int(rec.time_unix_nano or rec.observed_time_unix_nano)
    kept = name in CONTENT_EVENTS or name == EVALUATION_EVENT
    if kept and (error := time_error(f"{name} record", time)):
        raise ValueError(error)
    if name == EVALUATION_EVENT:
        ev_name = attrs.get("gen_ai.evaluation.name")
        evaluation = Evaluation(
            trace_id=trace_id,
            span_id=span_id,
            response_id=_text(attrs.get("gen_ai.response.id")),
            name=str(ev_name) if ev_name else "unnamed",
            score_value=_score(attrs.get("gen_ai.evaluation.score.value")),
            score_label=_text(attrs.get("gen_ai.evaluation.score.label")),
            explanation=_text(attrs.get("gen_ai.evaluation.explanation")),
            attributes=attrs,
            time_unix_nano=time,
        )
        e = evaluation
        texts = {"name": e.name, "score_label": e.score_label, "response_id": e.response_id}
        if error := evaluation_text_error(f"{name} record", texts):
            raise ValueError(error)
        batch.evaluations.append(evaluation)
        return
    if name not in CONTENT_EVENTS:
        batch.other += 1
        return
    if trace_id is None or span_id is None:
        batch.unjoinable += 1
        return
    if rec.HasField("body"):
        body = any_value(rec.body)
        if isinstance(body, dict):
            attrs.update(body)
        elif body is not None:
            attrs["content"] = body
    batch.content.append(
        (trace_id, span_id, {"name": name, "time_unix_nano": time, "attributes": attrs})
    )


def records_from_request(req: ExportLogsServiceRequest) -> LogBatch:
    """The classified records of a parsed request (the gRPC path and the protobuf path)."""
    batch = LogBatch()
    for rl in req.resource_logs:
        for sl in rl.scope_logs:
            for rec in sl.log_records:
                try:
                    add_record(batch, rec)
                except ValueError as exc:
                    batch.reject(str(exc))
    return batch


def _hex_to_b64(obj: dict[str, Any]) -> dict[str, Any]:
    out = dict(obj)
    for key in ("traceId", "trace_id", "spanId", "span_id"):
        value = out.get(key)
        if value in (None, ""):
            continue
        if not isinstance(value, str):
            raise ValueError(f"{key} must be a hex string")
        try:
            out[key] = base64.b64encode(bytes.fromhex(value)).decode()
        except ValueError:
            raise ValueError(f"{key} {value[:64]!r} is not hex") from None
    return out


def _items(obj: Any, *names: str) -> list[Any]:
    if not isinstance(obj, dict):
        return []
    for name in names:
        value = obj.get(name)
        if isinstance(value, list):
            return value
    return []


def _decode_protobuf(body: bytes) -> LogBatch:
    """One parse call; when it fails, each record is parsed alone
    (:func:`~collector.ingest.wirewalk.recover`) and only those upb refuses are rejected.

    Raises:
        DecodeError: not a protobuf message at the request, resource or scope level.
    """
    req = ExportLogsServiceRequest()
    try:
        req.ParseFromString(body)
        return records_from_request(req)
    except (ProtoDecodeError, ValueError) as exc:
        first = exc
    try:
        recovered = recover(body, ExportLogsServiceRequest())
    except WireError as exc:
        raise DecodeError(
            f"the body is not a valid OTLP protobuf message: {first}; {exc}"
        ) from None
    batch = records_from_request(recovered.message)
    for reason in recovered.reasons:
        batch.reject(reason)
    batch.rejected += recovered.rejected - len(recovered.reasons)
    return batch


def decode_logs(body: bytes, media: str) -> LogBatch:
    """Decode an ``ExportLogsServiceRequest`` body (see :func:`collector.ingest.decode.media_type`).

    Raises:
        DecodeError: not a protobuf message / not a JSON object (HTTP 400).
    """
    if media == PROTOBUF:
        return _decode_protobuf(body)
    doc = _load_json(body)
    if not isinstance(doc, dict):
        raise DecodeError("the body must be a JSON object (ExportLogsServiceRequest)")
    batch = LogBatch()
    for ri, rl in enumerate(_items(doc, "resourceLogs", "resource_logs")):
        for si, sl in enumerate(_items(rl, "scopeLogs", "scope_logs")):
            for li, raw in enumerate(_items(sl, "logRecords", "log_records")):
                where = f"resourceLogs[{ri}].scopeLogs[{si}].logRecords[{li}]"
                try:
                    if not isinstance(raw, dict):
                        raise ValueError("not an object")
                    rec = LogRecord()
                    json_format.ParseDict(_hex_to_b64(raw), rec, ignore_unknown_fields=True)
                    add_record(batch, rec)
                except Exception as exc:  # any malformed record is rejected alone
                    batch.reject(f"{where}: {parse_error(exc)}")
    return batch
