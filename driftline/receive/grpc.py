"""OTLP/gRPC receivers: ``opentelemetry.proto.collector.trace.v1.TraceService/Export`` and
``opentelemetry.proto.collector.logs.v1.LogsService/Export``.

Bad spans are reported in ``partial_success``; a full write queue or an unavailable store
answers ``UNAVAILABLE`` (retryable, per the OTLP spec's gRPC retry rules).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent import futures

import grpc
from google.protobuf import any_pb2
from google.protobuf.message import Message
from google.rpc import code_pb2, error_details_pb2, status_pb2
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from collector.auth import AuthError, ForbiddenError
from collector.errors import BadRequestError, QueueFullError, StoreUnavailableError
from collector.ingest import service
from collector.ingest.decode import check_request, spans_from_request
from collector.ingest.log_join import LogJoiner
from collector.ingest.logs import LogBatch, records_from_request
from collector.ingest.writer import BatchWriter
from collector.spool.log import LOGS_PROTOBUF, TRACES_PROTOBUF, Spool, SpoolFullError
from collector.telemetry.metrics import IngestMetrics

log = logging.getLogger(__name__)
COMMIT_TIMEOUT_S = 60.0


class TraceService(trace_service_pb2_grpc.TraceServiceServicer):
    """Servicer bound to one writer; ``tenant_of`` maps the ``authorization`` metadata value
    (or None) to a tenant, raising AuthError / ForbiddenError."""

    def __init__(
        self,
        writer: BatchWriter,
        metrics: IngestMetrics,
        tenant_of: Callable[[str | None], str],
        max_text_chars: int,
        capture_mode: Callable[[str], str] = lambda _t: "full",
    ) -> None:
        self._capture_mode = capture_mode
        self._writer = writer
        self._metrics = metrics
        self._tenant_of = tenant_of
        self._max_text_chars = max_text_chars
        #: when set, requests are acknowledged once fsynced to the spool
        self.spool: Spool | None = None

    def Export(
        self,
        request: trace_service_pb2.ExportTraceServiceRequest,
        context: grpc.ServicerContext,
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        metadata = dict(context.invocation_metadata() or ())
        try:
            tenant = self._tenant_of(metadata.get("authorization"))
        except AuthError as exc:
            context.abort(grpc.StatusCode.UNAUTHENTICATED, str(exc))
        except ForbiddenError as exc:
            context.abort(grpc.StatusCode.PERMISSION_DENIED, str(exc))
        if self.spool is not None:
            valid, batch = check_request(request)
            if valid:
                append_or_abort(self.spool, TRACES_PROTOBUF, tenant, request, context)
            self._metrics.spans_received.labels("grpc").inc(valid)
            resp = trace_service_pb2.ExportTraceServiceResponse()
            if batch.rejected:
                self._metrics.spans_rejected.labels("grpc", "invalid_span").inc(batch.rejected)
                resp.partial_success.rejected_spans = batch.rejected
                resp.partial_success.error_message = batch.error_message
            return resp
        batch = spans_from_request(request)
        try:
            pending = service.submit(
                batch,
                tenant=tenant,
                writer=self._writer,
                metrics=self._metrics,
                transport="grpc",
                max_text_chars=self._max_text_chars,
                capture_mode=self._capture_mode(tenant),
            )
            pending.future.result(timeout=COMMIT_TIMEOUT_S)
        except (QueueFullError, StoreUnavailableError, futures.TimeoutError) as exc:
            self._metrics.requests_refused.labels("grpc", "UNAVAILABLE").inc()
            context.abort(grpc.StatusCode.UNAVAILABLE, str(exc) or "store busy")
        outcome = service.done(pending, metrics=self._metrics, transport="grpc")
        resp = trace_service_pb2.ExportTraceServiceResponse()
        if outcome.rejected:
            resp.partial_success.rejected_spans = outcome.rejected
            resp.partial_success.error_message = outcome.error_message
        return resp


def append_or_abort(
    spool: Spool, kind: int, tenant: str, request: Message, context: grpc.ServicerContext
) -> None:
    """Append a validated request to the spool and wait for its fsync; a full spool aborts
    with RESOURCE_EXHAUSTED carrying a ``google.rpc.RetryInfo`` (OTLP: retryable then only)."""
    try:
        spool.append(kind, tenant, request.SerializeToString(), time.time_ns()).result(
            timeout=COMMIT_TIMEOUT_S
        )
    except SpoolFullError as exc:
        retry = error_details_pb2.RetryInfo()
        retry.retry_delay.FromSeconds(int(exc.retry_after_s or 1))
        detail = any_pb2.Any()
        detail.Pack(retry)
        st = status_pb2.Status(code=code_pb2.RESOURCE_EXHAUSTED, message=str(exc), details=[detail])
        context.set_trailing_metadata((("grpc-status-details-bin", st.SerializeToString()),))
        context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc))
    except futures.TimeoutError:
        context.abort(grpc.StatusCode.UNAVAILABLE, "spool busy")


def _tenant(tenant_of: Callable[[str | None], str], context: grpc.ServicerContext) -> str:
    metadata = dict(context.invocation_metadata() or ())
    try:
        return tenant_of(metadata.get("authorization"))
    except AuthError as exc:
        context.abort(grpc.StatusCode.UNAUTHENTICATED, str(exc))
    except ForbiddenError as exc:
        context.abort(grpc.StatusCode.PERMISSION_DENIED, str(exc))
    raise AssertionError("unreachable: abort raises")


class LogsService(logs_service_pb2_grpc.LogsServiceServicer):
    """gen_ai log records joined to their spans (see :mod:`collector.ingest.log_join`)."""

    def __init__(
        self,
        joiner: LogJoiner,
        writer: BatchWriter,
        metrics: IngestMetrics,
        tenant_of: Callable[[str | None], str],
        capture_mode: Callable[[str], str] = lambda _t: "full",
    ) -> None:
        self._joiner = joiner
        self._writer = writer
        self._metrics = metrics
        self._tenant_of = tenant_of
        self._capture_mode = capture_mode
        self.spool: Spool | None = None

    def Export(
        self,
        request: logs_service_pb2.ExportLogsServiceRequest,
        context: grpc.ServicerContext,
    ) -> logs_service_pb2.ExportLogsServiceResponse:
        tenant = _tenant(self._tenant_of, context)
        batch = records_from_request(request)
        if self.spool is not None:
            if batch.content or batch.evaluations:
                append_or_abort(self.spool, LOGS_PROTOBUF, tenant, request, context)
            service.count_logs(batch, self._metrics, "grpc")
        else:
            self._export(tenant, batch, context)
        resp = logs_service_pb2.ExportLogsServiceResponse()
        if batch.rejected:
            resp.partial_success.rejected_log_records = batch.rejected
            resp.partial_success.error_message = batch.error_message
        return resp

    def _export(self, tenant: str, batch: LogBatch, context: grpc.ServicerContext) -> None:
        try:
            fut = service.submit_logs(
                batch,
                tenant=tenant,
                joiner=self._joiner,
                writer=self._writer,
                metrics=self._metrics,
                transport="grpc",
                capture_mode=self._capture_mode(tenant),
            )
            fut.result(timeout=COMMIT_TIMEOUT_S)
        except (QueueFullError, StoreUnavailableError, futures.TimeoutError) as exc:
            self._metrics.requests_refused.labels("grpc", "UNAVAILABLE").inc()
            context.abort(grpc.StatusCode.UNAVAILABLE, str(exc) or "store busy")
        except BadRequestError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))


def start_grpc_server(
    servicer: TraceService,
    logs: LogsService | None,
    host: str,
    port: int,
    *,
    max_message_bytes: int,
) -> tuple[grpc.Server, int]:
    """Start the gRPC server; returns it and the bound port (``port=0`` picks a free one).

    ``max_message_bytes`` bounds each message received and sent (``DRIFTLINE_GRPC_MAX_MESSAGE_
    BYTES``): a larger request is refused with RESOURCE_EXHAUSTED before it is parsed.

    Raises:
        RuntimeError: the address could not be bound.
    """
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="driftline-grpc"),
        options=[
            ("grpc.max_receive_message_length", max_message_bytes),
            ("grpc.max_send_message_length", max_message_bytes),
        ],
    )
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(servicer, server)
    if logs is not None:
        logs_service_pb2_grpc.add_LogsServiceServicer_to_server(logs, server)
    bound = server.add_insecure_port(f"{host}:{port}")
    if bound == 0:
        raise RuntimeError(f"cannot bind the OTLP/gRPC receiver to {host}:{port}")
    server.start()
    return server, bound
