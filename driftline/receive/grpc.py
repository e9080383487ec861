"""OTLP/gRPC receivers: ``opentelemetry.proto.collector.trace.v1.TraceService/Export`` and
``opentelemetry.proto.collector.logs.v1.LogsService/Export``.

Each servicer receives the request's raw bytes (registered with no request deserializer), so it
authenticates the ``authorization`` metadata before parsing anything; then parses (a malformed
message is ``INVALID_ARGUMENT``, a span upb refuses alone is rejected alone), validates, and hands
the request to the app's sink (:mod:`driftline.receive.sink`). Bad spans are reported in
``partial_success``; a full write queue or an unavailable store answers ``UNAVAILABLE``
(retryable, per the OTLP spec's gRPC retry rules); a full spool ``RESOURCE_EXHAUSTED`` with a
``google.rpc.RetryInfo``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent import futures
from typing import Any

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from collector.auth import AuthError, ForbiddenError
from collector.errors import (
    BadRequestError,
    CollectorError,
    DecodeError,
    QueueFullError,
    StoreUnavailableError,
)
from collector.ingest.decode import PROTOBUF, parse_protobuf
from collector.ingest.logs import decode_logs
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
    except (DecodeError, BadRequestError) as exc:
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
    raise AssertionError("unreachable: abort raises")


def _invalid(context: grpc.ServicerContext, exc: CollectorError) -> Any:
    context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))


class TraceService:
    """Trace exports handed to ``sink``; ``tenant_of`` maps the ``authorization`` metadata
    value (or None) to a tenant, raising AuthError / ForbiddenError."""

    def __init__(
        self, sink: Sink, metrics: IngestMetrics, tenant_of: Callable[[str | None], str]
    ) -> None:
        self._sink = sink
        self._metrics = metrics
        self._tenant_of = tenant_of

    def Export(
        self, request: bytes, context: grpc.ServicerContext
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        """``request``: an encoded ``ExportTraceServiceRequest`` (parsed after the key check)."""
        caller = Caller(_tenant(self._tenant_of, context), "grpc")
        try:
            message, rejects = parse_protobuf(request)
        except (DecodeError, BadRequestError) as exc:
            return _invalid(context, exc)
        payload = Payload(PROTOBUF, body=request, message=message, rejects=rejects)
        handed = _hand(
            self._sink, self._metrics, context, lambda: self._sink.traces(payload, caller)
        )
        outcome = handed.finish()
        resp = trace_service_pb2.ExportTraceServiceResponse()
        if outcome.rejected:
            resp.partial_success.rejected_spans = outcome.rejected
            resp.partial_success.error_message = outcome.error_message
        return resp


class LogsService:
    """gen_ai log records (see :mod:`collector.ingest.log_join`) handed to ``sink``."""

    def __init__(
        self, sink: Sink, metrics: IngestMetrics, tenant_of: Callable[[str | None], str]
    ) -> None:
        self._sink = sink
        self._metrics = metrics
        self._tenant_of = tenant_of

    def Export(
        self, request: bytes, context: grpc.ServicerContext
    ) -> logs_service_pb2.ExportLogsServiceResponse:
        """``request``: an encoded ``ExportLogsServiceRequest`` (parsed after the key check)."""
        caller = Caller(_tenant(self._tenant_of, context), "grpc")
        try:
            batch = decode_logs(request, PROTOBUF)
        except (DecodeError, BadRequestError) as exc:
            return _invalid(context, exc)
        payload = Payload(PROTOBUF, body=request)
        _hand(self._sink, self._metrics, context, lambda: self._sink.logs(batch, payload, caller))
        resp = logs_service_pb2.ExportLogsServiceResponse()
        if batch.rejected:
            resp.partial_success.rejected_log_records = batch.rejected
            resp.partial_success.error_message = batch.error_message
        return resp


TRACES_SERVICE = trace_service_pb2.DESCRIPTOR.services_by_name["TraceService"].full_name
LOGS_SERVICE = logs_service_pb2.DESCRIPTOR.services_by_name["LogsService"].full_name


def _raw_handler(service: str, export: Callable[..., Any]) -> grpc.GenericRpcHandler:
    """The service's ``Export`` method receiving the request's bytes unparsed (no request
    deserializer: the servicer checks the key first, then parses) and answering a message."""
    method = grpc.unary_unary_rpc_method_handler(
        export, request_deserializer=None, response_serializer=_serialize
    )
    return grpc.method_handlers_generic_handler(service, {"Export": method})


def _serialize(message: Any) -> bytes:
    return bytes(message.SerializeToString())


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
    server.add_generic_rpc_handlers(
        (
            _raw_handler(TRACES_SERVICE, servicer.Export),
            *(() if logs is None else (_raw_handler(LOGS_SERVICE, logs.Export),)),
        )
    )
    bound = server.add_insecure_port(f"{host}:{port}")
    if bound == 0:
        raise RuntimeError(f"cannot bind the OTLP/gRPC receiver to {host}:{port}")
    server.start()
    return server, bound
