"""OTLP/HTTP receivers: ``POST /v1/traces`` and ``POST /v1/logs`` (protobuf or JSON,
gzip/deflate/identity).

The route authenticates, checks type and size, decodes and validates, and hands the request to
the app's sink (:mod:`driftline.receive.sink`): with the spool on (``DRIFTLINE_SPOOL_ENABLED``,
the default) it answers once the request is fsynced to the spool (503 + Retry-After when the
spool is full), else once its spans are committed to the store. Status codes: 200
(+ ``partialSuccess`` for rejected spans), 400 undecodable, 413 over the size limit after
decompression, 415 unsupported type/encoding, 503 + Retry-After when the write queue is full or
the store is down. Source: opentelemetry-proto ``docs/specification.md``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsPartialSuccess,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTracePartialSuccess,
    ExportTraceServiceResponse,
)

from collector.auth import ForbiddenError, span_tenant
from collector.errors import BodyTooLargeError, CollectorError
from collector.ingest import decode as codec
from collector.ingest.logs import decode_logs
from collector.store.schema import SpanData
from driftline.api.deps import CurrentPrincipal, IngestTenant, State
from driftline.receive.gcpause import paused
from driftline.receive.sink import INLINE_JSON_BYTES, INLINE_PROTOBUF_BYTES, Caller, Payload

router = APIRouter()


async def off_loop(body: bytes, media: str, fn: Any, *args: Any) -> Any:
    """``fn(*args)``: on the event loop for a small ``body`` of type ``media`` (bytes,
    see :data:`~driftline.receive.sink.INLINE_PROTOBUF_BYTES`), else in a worker thread with the
    cyclic garbage collector paused (:func:`~driftline.receive.gcpause.gc_paused`). Raises what
    ``fn`` raises."""
    inline = INLINE_PROTOBUF_BYTES if media == codec.PROTOBUF else INLINE_JSON_BYTES
    if len(body) <= inline:
        return fn(*args)
    return await asyncio.to_thread(paused, fn, *args)


def otlp_response(media: str, rejected: int, message: str) -> Response:
    """An ``ExportTraceServiceResponse`` in the request's encoding (partial_success unset
    when nothing was rejected)."""
    resp = ExportTraceServiceResponse()
    if rejected:
        resp.partial_success.CopyFrom(
            ExportTracePartialSuccess(rejected_spans=rejected, error_message=message)
        )
    if media == codec.PROTOBUF:
        return Response(resp.SerializeToString(), 200, media_type=codec.PROTOBUF)
    return Response(json_format.MessageToJson(resp, indent=None), 200, media_type=codec.JSON)


async def _read(request: Request, state: State) -> tuple[str, bytes]:
    """(media type, decompressed body) of an OTLP/HTTP request, within the size limit."""
    media = codec.media_type(request.headers.get("content-type"))
    encoding = codec.content_encoding(request.headers.get("content-encoding"))
    limit = state.settings.max_body_bytes
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and encoding == "identity" and int(declared) > limit:
        raise BodyTooLargeError(f"request body of {declared} bytes exceeds {limit} bytes")
    return media, await codec.read_body(request.stream(), encoding, limit)


@router.post("/v1/logs", tags=["otlp"], summary="OTLP/HTTP log export")
async def export_logs(request: Request, state: State, tenant: IngestTenant) -> Response:
    """gen_ai content records are joined to their span's call record; evaluation results are
    stored as external scores; other records are counted, not stored."""
    sink = state.sink
    try:
        media, body = await _read(request, state)
        batch = await off_loop(body, media, decode_logs, body, media)
        payload, caller = Payload(media, body), Caller(tenant, "http")
        if sink.logs_inline(batch):
            fut = sink.logs(batch, payload, caller)
        else:
            fut = await asyncio.to_thread(sink.logs, batch, payload, caller)
        await asyncio.wrap_future(fut)
    except CollectorError as exc:
        state.metrics.requests_refused.labels("http", type(exc).__name__).inc()
        raise
    resp = ExportLogsServiceResponse()
    if batch.rejected:
        resp.partial_success.CopyFrom(
            ExportLogsPartialSuccess(
                rejected_log_records=batch.rejected, error_message=batch.error_message
            )
        )
    if media == codec.PROTOBUF:
        return Response(resp.SerializeToString(), 200, media_type=codec.PROTOBUF)
    return Response(json_format.MessageToJson(resp, indent=None), 200, media_type=codec.JSON)


@router.post("/v1/traces", tags=["otlp"], summary="OTLP/HTTP trace export")
async def export_traces(request: Request, state: State, principal: CurrentPrincipal) -> Response:
    """Spans are stored under the key's tenant; a ``gateway`` key's spans under the tenant
    their ``driftline.tenant`` names when the key may speak for it
    (:func:`collector.auth.span_tenant`). A gateway key's requests bypass the spool (its
    records carry one tenant per request) and are answered after the store commit."""
    if not principal.allows("ingest"):
        raise ForbiddenError(f"this API key (role {principal.role}) may not ingest")

    def tenant_of(span: SpanData) -> str:
        return span_tenant(principal, span.attributes)

    gateway = principal.role == "gateway"
    caller = Caller(principal.tenant, "http", tenant_of if gateway else None)
    sink = state.sink
    try:
        media, body = await _read(request, state)
        payload = Payload(media, body)
        if sink.traces_inline(payload, caller):  # the spool's hot path: no thread hop
            handed = sink.traces(payload, caller)
        else:  # large bodies, and decode + prepare (normalise, redact) for the store
            handed = await asyncio.to_thread(sink.traces, payload, caller)
        await asyncio.wrap_future(handed.future)
    except CollectorError as exc:
        state.metrics.requests_refused.labels("http", type(exc).__name__).inc()
        raise
    outcome = handed.finish()
    return otlp_response(media, outcome.rejected, outcome.error_message)
