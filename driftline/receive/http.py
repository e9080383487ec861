"""OTLP/HTTP receivers: ``POST /v1/traces`` and ``POST /v1/logs`` (protobuf or JSON,
gzip/deflate/identity).

The route authenticates, checks type and size, decodes and validates; with the spool on
(``DRIFTLINE_SPOOL_ENABLED``, the default) it answers once the request is fsynced to the spool
(503 + Retry-After when the spool is full), else once its spans are committed to the store.
Status codes: 200 (+ ``partialSuccess`` for rejected spans), 400 undecodable, 413 over the
size limit after decompression, 415 unsupported type/encoding, 503 + Retry-After when the
write queue is full or the store is down. Source: opentelemetry-proto ``docs/specification.md``.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any, TypeVar

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
from collector.ingest import service
from collector.ingest.logs import decode_logs
from collector.spool.log import LOGS_JSON, LOGS_PROTOBUF, TRACES_JSON, TRACES_PROTOBUF, Spool
from collector.store.schema import SpanData
from driftline.api.deps import AppState, CurrentPrincipal, IngestTenant, State

router = APIRouter()

#: bodies up to these sizes are decoded on the event loop; larger ones in a worker thread, so a
#: large request never stalls the other requests (``/healthz`` included). Protobuf validation on
#: the spool path reads ids and times only: 158 us on the loop for a 177 KB request of
#: benchmarks/ingest.py against 530 us through ``asyncio.to_thread`` (2-core VM, 50 requests),
#: so the hot path keeps it inline and a 1 MiB request holds the loop ~1 ms at most. OTLP/JSON
#: (every attribute converted) costs several times more per byte.
INLINE_PROTOBUF_BYTES = 1 << 20
INLINE_JSON_BYTES = 32 << 10

#: the cyclic garbage collector stays paused this long at most while large bodies decode
GC_PAUSE_MAX_S = 30.0

_T = TypeVar("_T")
_gc_lock = threading.Lock()
_gc_pausers = 0
_gc_paused_at = 0.0
_gc_owned = False


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause CPython's cyclic garbage collector while a large body is decoded (process-wide,
    counted: the last one out resumes it).

    Decoding a 30 MB OTLP/JSON body allocates millions of containers, which trigger full
    (generation 2) collections: each traversed the whole heap holding the GIL for 0.56-0.67 s
    on a 2-core VM, so the event loop stalled although the decode ran in a worker thread.
    Decoding creates no reference cycles: nothing is lost by collecting afterwards. Overlapping
    decodes never keep it paused past :data:`GC_PAUSE_MAX_S`.
    """
    global _gc_pausers, _gc_paused_at, _gc_owned
    with _gc_lock:
        _gc_pausers += 1
        now = time.monotonic()
        if _gc_pausers == 1:
            _gc_paused_at = now
            _gc_owned = gc.isenabled()
            gc.disable()
        elif _gc_owned and now - _gc_paused_at > GC_PAUSE_MAX_S:
            gc.enable()
            _gc_owned = False
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pausers -= 1
            if _gc_pausers == 0 and _gc_owned:
                gc.enable()
                _gc_owned = False


def _paused(fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
    with gc_paused():
        return fn(*args, **kwargs)


async def off_loop(body: bytes, media: str, fn: Callable[..., _T], *args: Any) -> _T:
    """``fn(*args)``: on the event loop for a small ``body`` of type ``media`` (bytes,
    see :data:`INLINE_PROTOBUF_BYTES`), else in a worker thread with the cyclic garbage
    collector paused (:func:`gc_paused`). Raises what ``fn`` raises."""
    inline = INLINE_PROTOBUF_BYTES if media == codec.PROTOBUF else INLINE_JSON_BYTES
    if len(body) <= inline:
        return fn(*args)
    return await asyncio.to_thread(_paused, fn, *args)


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
    try:
        media, body = await _read(request, state)
        batch = await off_loop(body, media, decode_logs, body, media)
        joiner = state.joiner
        spool = state.spool
        if spool is not None and (batch.content or batch.evaluations):
            kind = LOGS_PROTOBUF if media == codec.PROTOBUF else LOGS_JSON
            fut = spool.append(kind, tenant, body, time.time_ns())
            service.count_logs(batch, state.metrics, "http")
        else:
            fut = await asyncio.to_thread(
                service.submit_logs,
                batch,
                tenant=tenant,
                joiner=joiner,
                writer=state.writer,
                metrics=state.metrics,
                transport="http",
                capture_mode=state.capture.mode(tenant),
            )
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


def _check_protobuf(body: bytes) -> tuple[int, codec.DecodedBatch]:
    return codec.check_request(codec.parse_protobuf(body))


async def _spool_traces(
    spool: Spool, state: AppState, tenant: str, media: str, body: bytes
) -> Response:
    """Validate (protobuf: ids and times only, no attribute converted), append, fsync, answer."""
    if media == codec.PROTOBUF:
        valid, batch = await off_loop(body, media, _check_protobuf, body)
        kind = TRACES_PROTOBUF
    else:
        batch = await off_loop(body, media, codec.decode, body, media)
        valid, kind = len(batch.spans), TRACES_JSON
    if valid:
        await asyncio.wrap_future(spool.append(kind, tenant, body, time.time_ns()))
    if batch.rejected:
        state.metrics.spans_rejected.labels("http", "invalid_span").inc(batch.rejected)
    state.metrics.spans_received.labels("http").inc(valid)
    return otlp_response(media, batch.rejected, batch.error_message)


def _decode_and_submit(body: bytes, media: str, **kwargs: Any) -> service.Pending:
    with gc_paused() if len(body) > INLINE_JSON_BYTES else nullcontext():
        return service.submit(codec.decode(body, media), **kwargs)


@router.post("/v1/traces", tags=["otlp"], summary="OTLP/HTTP trace export")
async def export_traces(request: Request, state: State, principal: CurrentPrincipal) -> Response:
    """Spans are stored under the key's tenant; a ``gateway`` key's spans under the tenant
    their ``driftline.tenant`` names when the key may speak for it
    (:func:`collector.auth.span_tenant`). A gateway key's requests bypass the spool (its
    records carry one tenant per request) and are answered after the store commit."""
    if not principal.allows("ingest"):
        raise ForbiddenError(f"this API key (role {principal.role}) may not ingest")
    tenant = principal.tenant
    gateway = principal.role == "gateway"

    def tenant_of(span: SpanData) -> str:
        return span_tenant(principal, span.attributes)

    try:
        media, body = await _read(request, state)
        spool = state.spool
        if spool is not None and not gateway:  # durable on fsync; the processor writes
            return await _spool_traces(spool, state, tenant, media, body)
        # decode and prepare (normalise, redact) in a worker thread whatever the size: the
        # redaction of one request's text may take long, and the loop serves everyone
        pending = await asyncio.to_thread(
            _decode_and_submit,
            body,
            media,
            tenant=tenant,
            writer=state.writer,
            metrics=state.metrics,
            transport="http",
            max_text_chars=state.settings.max_text_chars,
            capture_mode=state.capture.mode(tenant),
            tenant_of=tenant_of if gateway else None,
            capture_mode_of=state.capture.mode,
        )
        await asyncio.wrap_future(pending.future)
    except CollectorError as exc:
        state.metrics.requests_refused.labels("http", type(exc).__name__).inc()
        raise
    outcome = service.done(pending, metrics=state.metrics, transport="http")
    return otlp_response(media, outcome.rejected, outcome.error_message)
