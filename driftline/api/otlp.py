"""OTLP/HTTP trace receiver: ``POST /v1/traces`` (protobuf or JSON, gzip/deflate/identity).

The route validates and enqueues; it answers only after the spans are committed.
Status codes: 200 (+ ``partialSuccess`` for rejected spans), 400 undecodable, 413 over the
size limit after decompression, 415 unsupported type/encoding, 503 + Retry-After when the
write queue is full or the store is down. Source: opentelemetry-proto ``docs/specification.md``.
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request
from fastapi.responses import Response
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTracePartialSuccess,
    ExportTraceServiceResponse,
)

from collector.auth import ForbiddenError, span_tenant
from collector.errors import BodyTooLargeError, CollectorError
from collector.ingest import decode as codec
from collector.ingest import service
from collector.store.schema import SpanData
from driftline.api.deps import CurrentPrincipal, State

router = APIRouter()


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


@router.post("/v1/traces", tags=["otlp"], summary="OTLP/HTTP trace export")
async def export_traces(request: Request, state: State, principal: CurrentPrincipal) -> Response:
    """Spans are stored under the key's tenant; a ``gateway`` key's spans under the tenant
    their ``driftline.tenant`` names when the key may speak for it
    (:func:`collector.auth.span_tenant`)."""
    if not principal.allows("ingest"):
        raise ForbiddenError(f"this API key (role {principal.role}) may not ingest")
    tenant = principal.tenant

    def tenant_of(span: SpanData) -> str:
        return span_tenant(principal, span.attributes)

    media = codec.media_type(request.headers.get("content-type"))
    encoding = codec.content_encoding(request.headers.get("content-encoding"))
    limit = state.settings.max_body_bytes
    declared = request.headers.get("content-length")
    try:
        if declared and declared.isdigit() and encoding == "identity" and int(declared) > limit:
            raise BodyTooLargeError(f"request body of {declared} bytes exceeds {limit} bytes")
        body = await codec.read_body(request.stream(), encoding, limit)
        batch = codec.decode(body, media)
        pending = service.submit(
            batch,
            tenant=tenant,
            writer=state.writer,
            metrics=state.metrics,
            transport="http",
            max_text_chars=state.settings.max_text_chars,
            capture_mode=state.capture.mode(tenant),
            tenant_of=tenant_of if principal.role == "gateway" else None,
            capture_mode_of=state.capture.mode,
        )
        await asyncio.wrap_future(pending.future)
    except CollectorError as exc:
        state.metrics.requests_refused.labels("http", type(exc).__name__).inc()
        raise
    outcome = service.done(pending, metrics=state.metrics, transport="http")
    return otlp_response(media, outcome.rejected, outcome.error_message)
