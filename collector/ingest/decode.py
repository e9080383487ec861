"""OTLP trace decoding: bytes (protobuf or OTLP/JSON) -> frozen :class:`SpanData` records.

Pure functions, no I/O. One bad span never loses its batch: it is counted in
:attr:`DecodedBatch.rejected` with a message naming the problem, the others are kept.

Sources: opentelemetry-proto ``docs/specification.md`` (OTLP/HTTP, JSON mapping rules:
hex ids, int64 as string or number, integer enums, unknown fields ignored) and
``opentelemetry/proto/trace/v1/trace.proto``.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

import orjson
from google.protobuf import json_format
from google.protobuf.message import DecodeError as ProtoDecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from collector.errors import DecodeError
from collector.ingest.anyvalue import any_value as any_value  # re-exported (logs, tests)
from collector.ingest.anyvalue import attributes, json_resource_attributes
from collector.ingest.body import (  # noqa: F401 - re-exported: the receivers' one import
    JSON,
    PROTOBUF,
    SUPPORTED_ENCODINGS,
    content_encoding,
    media_type,
    read_body,
)
from collector.ingest.jsondoc import MAX_JSON_DEPTH, cut_deep, load_chunked, parse_error
from collector.ingest.wirewalk import WireError, recover
from collector.store.schema import SpanData

MAX_ERROR_MESSAGES = 20
#: OTLP/JSON bodies larger than this are parsed value by value (orjson below: one C call)
CHUNKED_JSON_BYTES = 1 << 20
#: the store keeps times as signed 64-bit integers; OTLP sends fixed64 (unsigned)
MAX_UNIX_NANO = 2**63 - 1


@dataclass(slots=True)
class DecodedBatch:
    """The spans of one export request plus the count and reasons of rejected ones."""

    spans: list[SpanData] = field(default_factory=list)
    rejected: int = 0
    errors: list[str] = field(default_factory=list)

    def reject(self, count: int, message: str) -> None:
        self.rejected += count
        if len(self.errors) < MAX_ERROR_MESSAGES:
            self.errors.append(message)

    @property
    def error_message(self) -> str:
        more = self.rejected - len(self.errors)
        text = "; ".join(self.errors)
        return text + (f"; and {more} more" if more > 0 and self.errors else "")


def _hex_id(raw: bytes, size: int) -> str | None:
    """Lowercase hex of an id of ``size`` bytes; None if the size is wrong or all zero."""
    if len(raw) != size or not any(raw):
        return None
    return raw.hex()


def span_problem(span: Span) -> str | None:
    """Why a span is rejected (a message naming the field), or None when it is valid: trace id
    of 16 and span id of 8 bytes, not all zero; parent span id empty or 8 bytes; times that
    fit a signed 64-bit integer. Cheap: no attribute is converted."""
    if len(span.trace_id) != 16 or not any(span.trace_id):
        return f"invalid traceId {span.trace_id.hex()!r}: must be 16 bytes and not all zero"
    if len(span.span_id) != 8 or not any(span.span_id):
        return (
            f"invalid spanId {span.span_id.hex()!r} in trace {span.trace_id.hex()}: "
            "must be 8 bytes and not all zero"
        )
    if span.parent_span_id and len(span.parent_span_id) != 8:
        return (
            f"invalid parentSpanId {span.parent_span_id.hex()!r} of span {span.span_id.hex()}: "
            "must be empty or 8 bytes"
        )
    if max(span.start_time_unix_nano, span.end_time_unix_nano) > MAX_UNIX_NANO:
        return f"span {span.span_id.hex()}: a time past 2262 does not fit a signed 64-bit integer"
    return None


def check_request(
    req: ExportTraceServiceRequest, batch: DecodedBatch | None = None
) -> tuple[int, DecodedBatch]:
    """(valid spans, a batch holding only the rejections) of a parsed request: the receivers'
    validation when the spool defers decoding (same rules as :func:`spans_from_request`);
    ``batch`` carries rejections found while parsing (:func:`parse_protobuf`)."""
    batch = DecodedBatch() if batch is None else batch
    valid = 0
    for rs in req.resource_spans:
        for ss in rs.scope_spans:
            for span in ss.spans:
                problem = span_problem(span)
                if problem is None:
                    valid += 1
                else:
                    batch.reject(1, problem)
    return valid, batch


def parse_protobuf(body: bytes) -> tuple[ExportTraceServiceRequest, DecodedBatch]:
    """Parse a binary ``ExportTraceServiceRequest``: (the request, a batch holding the spans
    rejected while parsing). One parse call; only when it fails are the spans parsed one by one
    (:func:`~collector.ingest.wirewalk.recover`): a span upb refuses (a value nested past its
    depth limit, invalid UTF-8) is rejected alone, a resource or scope attribute it refuses is
    cut to null.

    Raises:
        DecodeError: the bytes are not a protobuf message at the request, resource or scope
            level (HTTP 400, gRPC INVALID_ARGUMENT).
    """
    req = ExportTraceServiceRequest()
    try:
        req.ParseFromString(body)
        return req, DecodedBatch()
    except (ProtoDecodeError, ValueError) as exc:
        first = exc
    try:
        recovered = recover(body, ExportTraceServiceRequest())
    except WireError as exc:
        raise DecodeError(
            f"the body is not a valid OTLP protobuf message: {first}; {exc}"
        ) from None
    batch = DecodedBatch()
    for reason in recovered.reasons:
        batch.reject(1, reason)
    batch.rejected = recovered.rejected
    return recovered.message, batch


def span_from_proto(
    span: Span, resource: dict[str, Any], scope_name: str | None, scope_version: str | None
) -> SpanData:
    """Convert one protobuf span.

    Raises:
        ValueError: invalid trace id, span id or parent span id (the message names it).
    """
    problem = span_problem(span)
    if problem is not None:
        raise ValueError(problem)
    trace_id = span.trace_id.hex()
    span_id = span.span_id.hex()
    parent = _hex_id(span.parent_span_id, 8)  # all-zero parent = root
    return SpanData(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=parent,
        name=span.name,
        kind=int(span.kind),
        start_unix_nano=int(span.start_time_unix_nano),
        end_unix_nano=int(span.end_time_unix_nano),
        status_code=int(span.status.code),
        status_message=span.status.message or None,
        attributes=attributes(span.attributes),
        events=[
            {
                "name": e.name,
                "time_unix_nano": int(e.time_unix_nano),
                "attributes": attributes(e.attributes),
            }
            for e in span.events
        ],
        links=[
            {
                "trace_id": link.trace_id.hex(),
                "span_id": link.span_id.hex(),
                "attributes": attributes(link.attributes),
            }
            for link in span.links
        ],
        resource_attributes=resource,
        scope_name=scope_name or None,
        scope_version=scope_version or None,
    )


def spans_from_request(
    req: ExportTraceServiceRequest, batch: DecodedBatch | None = None
) -> DecodedBatch:
    """All valid spans of a parsed export request (the gRPC path and the protobuf path), added
    to ``batch`` (rejections found while parsing) or to a new one."""
    batch = DecodedBatch() if batch is None else batch
    for rs in req.resource_spans:
        resource = attributes(rs.resource.attributes)
        for ss in rs.scope_spans:
            for span in ss.spans:
                try:
                    batch.spans.append(
                        span_from_proto(span, resource, ss.scope.name, ss.scope.version)
                    )
                except ValueError as exc:
                    batch.reject(1, str(exc))
    return batch


def decode_protobuf(body: bytes) -> DecodedBatch:
    """Decode a binary ``ExportTraceServiceRequest`` (an empty body is a valid empty request).

    Raises:
        DecodeError: the bytes are not a valid protobuf message (HTTP 400).
    """
    return spans_from_request(*parse_protobuf(body))


# --------------------------------------------------------------------------- OTLP/JSON

_ID_FIELDS = {
    "traceId": 16,
    "trace_id": 16,
    "spanId": 8,
    "span_id": 8,
    "parentSpanId": 8,
    "parent_span_id": 8,
}


def _ids_to_base64(obj: dict[str, Any], what: str = "") -> dict[str, Any]:
    """Copy of ``obj`` with its hex id fields converted to the base64 that protobuf JSON expects;
    ``what`` prefixes error messages (e.g. ``"links: "``: the caller names the span).

    Raises:
        ValueError: an id is not a hex string.
    """
    out = dict(obj)
    for key in _ID_FIELDS:
        value = out.get(key)
        if value is None:
            continue
        if not isinstance(value, str):
            raise ValueError(f"{what}{key} must be a hex string, got {type(value).__name__}")
        try:
            raw = bytes.fromhex(value)
        except ValueError:
            raise ValueError(f"{what}{key} {value[:64]!r} is not hex") from None
        out[key] = base64.b64encode(raw).decode()
    return out


def _load_json(body: bytes) -> Any:
    """The JSON document of ``body`` ({} when blank). Invalid UTF-8 is replaced (U+FFFD) rather
    than failing; big ints stay exact; values nested past :data:`MAX_JSON_DEPTH` are cut to
    null (:func:`cut_deep`): one deep attribute never loses the request's other spans. A body
    over :data:`CHUNKED_JSON_BYTES` is parsed value by value (:func:`load_chunked`), so that
    its parse never holds the GIL for long.

    Raises:
        DecodeError: the body is not JSON (HTTP 400).
    """
    if not body.strip():
        return {}
    if len(body) <= CHUNKED_JSON_BYTES:
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError:
            pass
    text = body.decode("utf-8", errors="replace")
    for attempt in (text, None):
        try:
            return load_chunked(attempt if attempt is not None else cut_deep(text))
        except RecursionError:  # nested past Python's stack: cut, then once more
            continue
        except ValueError as exc:
            raise DecodeError(f"the body is not valid JSON: {exc}") from None
    raise DecodeError(f"the body is not valid JSON: nested past {MAX_JSON_DEPTH} levels")


def _list_field(obj: dict[str, Any], *names: str) -> list[Any]:
    for name in names:
        value = obj.get(name)
        if value is not None:
            if not isinstance(value, list):
                raise ValueError(f"{name} must be an array")
            return value
    return []


def decode_json(body: bytes) -> DecodedBatch:
    """Decode an OTLP/JSON ``ExportTraceServiceRequest``.

    Each span is parsed on its own (``json_format.ParseDict`` after hex ids are turned into
    base64), so a malformed span is rejected alone. Both lowerCamelCase and snake_case keys,
    int64 as string or number and integer enums are accepted; unknown fields are ignored.

    Raises:
        DecodeError: the body is not JSON or not a JSON object (HTTP 400).
    """
    doc = _load_json(body)
    if not isinstance(doc, dict):
        raise DecodeError("the body must be a JSON object (ExportTraceServiceRequest)")
    batch = DecodedBatch()
    try:
        resource_spans = _list_field(doc, "resourceSpans", "resource_spans")
    except ValueError as exc:
        raise DecodeError(str(exc)) from None
    for ri, rs in enumerate(resource_spans):
        where = f"resourceSpans[{ri}]"
        if not isinstance(rs, dict):
            batch.reject(0, f"{where} is not an object")
            continue
        try:
            scope_spans = _list_field(
                rs, "scopeSpans", "scope_spans", "instrumentationLibrarySpans"
            )
            res_doc = rs.get("resource") or {}
            if not isinstance(res_doc, dict):
                raise ValueError("resource must be an object")
            resource = json_resource_attributes(res_doc)
        except (ValueError, json_format.ParseError) as exc:
            scopes = rs.get("scopeSpans")
            count = sum(
                len(s["spans"])
                for s in (scopes if isinstance(scopes, list) else [])
                if isinstance(s, dict) and isinstance(s.get("spans"), list)
            )
            batch.reject(count, f"{where}: invalid resource: {parse_error(exc)}")
            continue
        for si, ss in enumerate(scope_spans):
            swhere = f"{where}.scopeSpans[{si}]"
            if not isinstance(ss, dict):
                batch.reject(0, f"{swhere} is not an object")
                continue
            scope = ss.get("scope") or ss.get("instrumentationLibrary") or {}
            scope_name = scope.get("name") if isinstance(scope, dict) else None
            scope_version = scope.get("version") if isinstance(scope, dict) else None
            try:
                spans = _list_field(ss, "spans")
            except ValueError as exc:
                batch.reject(0, f"{swhere}: {exc}")
                continue
            for pi, raw in enumerate(spans):
                pwhere = f"{swhere}.spans[{pi}]"
                try:
                    if not isinstance(raw, dict):
                        raise ValueError("not an object")
                    fixed = _ids_to_base64(raw)
                    links = raw.get("links")
                    if isinstance(links, list):
                        fixed["links"] = [
                            _ids_to_base64(link, "links: ") if isinstance(link, dict) else link
                            for link in links
                        ]
                    msg = Span()
                    json_format.ParseDict(fixed, msg, ignore_unknown_fields=True)
                    batch.spans.append(
                        span_from_proto(
                            msg,
                            resource,
                            str(scope_name) if scope_name else None,
                            str(scope_version) if scope_version else None,
                        )
                    )
                except Exception as exc:  # any malformed span is rejected alone
                    batch.reject(1, f"{pwhere}: {parse_error(exc)}")
    return batch


def decode(body: bytes, media: str) -> DecodedBatch:
    """Decode a body of the given media type (see :func:`media_type`)."""
    return decode_protobuf(body) if media == PROTOBUF else decode_json(body)
