"""OTLP/gRPC receivers: ``opentelemetry.proto.collector.trace.v1.TraceService/Export`` and
``opentelemetry.proto.collector.logs.v1.LogsService/Export``.

Each servicer authenticates the ``authorization`` metadata, validates, and hands the request to
the app's sink (:mod:`driftline.receive.sink`). Bad spans are reported in ``partial_success``; a
full write queue or an unavailable store answers ``UNAVAILABLE`` (retryable, per the OTLP spec's
gRPC retry rules); a full spool ``RESOURCE_EXHAUSTED`` with a ``google.rpc.RetryInfo``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent import futures
from typing import Any

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from collector.auth import AuthError, ForbiddenError
from collector.errors import BadRequestError, QueueFullError, StoreUnavailableError
from collector.ingest.decode import PROTOBUF
from collector.ingest.logs import records_from_request
from collector.spool.log import SpoolFullError
from collector.telemetry.metrics import IngestMetrics
from driftline.receive.sink import Caller, Payload, Sink

log = logging.getLogger(__name__)
COMMIT_TIMEOUT_S = 60.0


def _tenant(tenant_of: Callable[[str | None], str], context: grpc.ServicerContext) -> str:
    metadata = dict(context.invocation_metadata() or ())
    try:
        return tenant_of(metadata.get("authorization"))
    except AuthError as exc:
        context.abort(grpc.StatusCode.UNAUTHENTICATED, str(exc))
    except ForbiddenError as exc:
        context.abort(grpc.StatusCode.PERMISSION_DENIED, str(exc))
    raise AssertionError("unreachable: abort raises")


def _abort_spool_full(exc: SpoolFullError, context: grpc.ServicerContext) -> None:
    """RESOURCE_EXHAUSTED carrying a ``google.rpc.RetryInfo`` (OTLP: retryable then only)."""
    retry = error_details_pb2.RetryInfo()
    retry.retry_delay.FromSeconds(int(exc.retry_after_s or 1))
    detail = any_pb2.Any()
    detail.Pack(retry)
    st = status_pb2.Status(code=code_pb2.RESOURCE_EXHAUSTED, message=str(exc), details=[detail])
    context.set_trailing_metadata((("grpc-status-details-bin", st.SerializeToString()),))
    context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc))


def _hand(
    sink: Sink, metrics: IngestMetrics, context: grpc.ServicerContext, hand: Callable[[], Any]
) -> Any:
    """``hand()`` (a sink call returning a future or a :class:`Handed`) and wait for the future;
    errors become gRPC status codes (``context.abort`` raises)."""
    try:
        handed = hand()
        fut = handed if isinstance(handed, futures.Future) else handed.future
        fut.result(timeout=COMMIT_TIMEOUT_S)
        return handed
    except SpoolFullError as exc:
        _abort_spool_full(exc, context)
    except futures.TimeoutError:
        if sink.name == "spool":
            context.abort(grpc.StatusCode.UNAVAILABLE, "spool busy")
        metrics.requests_refused.labels("grpc", "UNAVAILABLE").inc()
        context.abort(grpc.StatusCode.UNAVAILABLE, "store busy")
    except (QueueFullError, StoreUnavailableError) as exc:
        metrics.requests_refused.labels("grpc", "UNAVAILABLE").inc()
        context.abort(grpc.StatusCode.UNAVAILABLE, str(exc) or "store busy")
    except BadRequestError as exc:
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
    raise AssertionError("unreachable: abort raises")


class TraceService(trace_service_pb2_grpc.TraceServiceServicer):
    """Trace exports handed to ``sink``; ``tenant_of`` maps the ``authorization`` metadata
    value (or None) to a tenant, raising AuthError / ForbiddenError."""

    def __init__(
        self, sink: Sink, metrics: IngestMetrics, tenant_of: Callable[[str | None], str]
    ) -> None:
        self._sink = sink
        self._metrics = metrics
        self._tenant_of = tenant_of

    def Export(
        self,
        request: trace_service_pb2.ExportTraceServiceRequest,
        context: grpc.ServicerContext,
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        caller = Caller(_tenant(self._tenant_of, context), "grpc")
        payload = Payload(PROTOBUF, message=request)
        handed = _hand(
            self._sink, self._metrics, context, lambda: self._sink.traces(payload, caller)
        )
        outcome = handed.finish()
        resp = trace_service_pb2.ExportTraceServiceResponse()
        if outcome.rejected:
            resp.partial_success.rejected_spans = outcome.rejected
            resp.partial_success.error_message = outcome.error_message
        return resp


class LogsService(logs_service_pb2_grpc.LogsServiceServicer):
    """gen_ai log records (see :mod:`collector.ingest.log_join`) handed to ``sink``."""

    def __init__(
        self, sink: Sink, metrics: IngestMetrics, tenant_of: Callable[[str | None], str]
    ) -> None:
        self._sink = sink
        self._metrics = metrics
        self._tenant_of = tenant_of

    def Export(
        self,
        request: logs_service_pb2.ExportLogsServiceRequest,
        context: grpc.ServicerContext,
    ) -> logs_service_pb2.ExportLogsServiceResponse:
        caller = Caller(_tenant(self._tenant_of, context), "grpc")
        batch = records_from_request(request)
        payload = Payload(PROTOBUF, message=request)
        _hand(self._sink, self._metrics, context, lambda: self._sink.logs(batch, payload, caller))
        resp = logs_service_pb2.ExportLogsServiceResponse()
        if batch.rejected:
            resp.partial_success.rejected_log_records = batch.rejected
            resp.partial_success.error_message = batch.error_message
        return resp


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
