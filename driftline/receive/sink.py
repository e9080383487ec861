"""Where a received OTLP request goes: one :class:`Sink`, chosen once at start-up.

* :class:`SpoolSink` (``DRIFTLINE_SPOOL_ENABLED``, the default): the request's bytes are appended
  to the spool and the future resolves once they are fsynced; the spool processor decodes and
  writes them later. Protobuf traces are only checked (ids and times, no attribute converted).
  A gateway key's trace requests carry one tenant per span, which a spool record cannot, so they
  go to the store path (:attr:`SpoolSink.direct`).
* :class:`StoreSink` (spool off): the request is decoded and prepared (normalised, redacted)
  and queued on the writer; the future resolves once its spans are committed.

A receiver asks :meth:`Sink.traces_inline` / :meth:`Sink.logs_inline` whether the hand-off is
cheap enough to run on its event loop (a small protobuf request to the spool: ~160 us, against
~530 us for a hop through ``asyncio.to_thread``), else it runs it in a worker thread.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future
from contextlib import nullcontext
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

from google.protobuf.message import Message
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collector.ingest import decode as codec
from collector.ingest import service
from collector.ingest.capture import CapturePolicies
from collector.ingest.log_join import LogJoiner
from collector.ingest.logs import LogBatch
from collector.ingest.redaction_budget import DEFAULT_RECORD_CPU_S
from collector.ingest.service import IngestOutcome
from collector.ingest.writer import BatchWriter
from collector.spool.log import LOGS_JSON, LOGS_PROTOBUF, TRACES_JSON, TRACES_PROTOBUF, Spool
from collector.store.schema import SpanData
from collector.telemetry.metrics import IngestMetrics
from driftline.receive.gcpause import gc_paused

#: bodies up to these sizes are handed off on the event loop; larger ones in a worker thread, so
#: a large request never stalls the other requests (``/healthz`` included). Protobuf validation
#: on the spool path reads ids and times only: 158 us on the loop for a 177 KB request of
#: benchmarks/ingest.py against 530 us through ``asyncio.to_thread`` (2-core VM, 50 requests),
#: so the hot path keeps it inline and a 1 MiB request holds the loop ~1 ms at most. OTLP/JSON
#: (every attribute converted) costs several times more per byte.
INLINE_PROTOBUF_BYTES = 1 << 20
INLINE_JSON_BYTES = 32 << 10


@dataclass(frozen=True, slots=True)
class Payload:
    """One export request as received, of media type ``media`` (``codec.PROTOBUF`` or
    ``codec.JSON``): its raw ``body`` and/or its parsed ``message`` (gRPC parses it after the key
    check) with ``rejects``, the spans rejected while parsing it (:func:`codec.parse_protobuf`)."""

    media: str
    body: bytes | None = None
    message: Message | None = None
    rejects: codec.DecodedBatch | None = None

    def parsed(self) -> tuple[ExportTraceServiceRequest, codec.DecodedBatch]:
        """The trace request and a new batch holding the parse's rejections (parsed now when
        only the body is held). Raises DecodeError (400 / INVALID_ARGUMENT)."""
        if self.message is None:
            return codec.parse_protobuf(self.raw())
        assert isinstance(self.message, ExportTraceServiceRequest)
        held = self.rejects or codec.DecodedBatch()
        return self.message, codec.DecodedBatch(rejected=held.rejected, errors=list(held.errors))

    def raw(self) -> bytes:
        """The request's bytes (a parsed message is serialised again)."""
        if self.body is not None:
            return self.body
        assert self.message is not None
        return self.message.SerializeToString()

    @property
    def size(self) -> int:
        """Bytes of the body (0 for a message alone: its size was bounded on receipt)."""
        return len(self.body) if self.body is not None else 0


@dataclass(frozen=True, slots=True)
class Caller:
    """Who sent a request: its ``tenant``, the ``transport`` (``http``/``grpc``, a metric label)
    and, for a gateway key, ``tenant_of(span)``: each span's tenant
    (:func:`collector.auth.span_tenant`)."""

    tenant: str
    transport: str
    tenant_of: Callable[[SpanData], str] | None = None


@dataclass(slots=True)
class Handed:
    """A request handed to the sink: ``future`` resolves once it is durable; then call
    :meth:`finish` (metrics) for what to answer."""

    future: Future[Any]
    outcome: IngestOutcome
    _finish: Callable[[], object] | None = None

    def finish(self) -> IngestOutcome:
        """Count the durable request; returns its outcome (accepted, rejected, reason)."""
        if self._finish is not None:
            self._finish()
        return self.outcome


def _done() -> Future[Any]:
    fut: Future[Any] = Future()
    fut.set_result(0)
    return fut


class Sink(Protocol):
    """Where validated requests go. Methods raise QueueFullError (SpoolFullError: spool full),
    StoreUnavailableError, DecodeError/BadRequestError (bad input) before handing anything."""

    name: str

    def traces_inline(self, payload: Payload, caller: Caller) -> bool:
        """Whether :meth:`traces` is cheap enough for an event loop."""

    def traces(self, payload: Payload, caller: Caller) -> Handed:
        """Validate a trace export request and hand it on."""

    def logs_inline(self, batch: LogBatch) -> bool:
        """Whether :meth:`logs` is cheap enough for an event loop."""

    def logs(self, batch: LogBatch, payload: Payload, caller: Caller) -> Future[Any]:
        """Hand on a decoded log export request (``batch``, from ``payload``)."""


class StoreSink:
    """Decode, prepare and queue on the writer; durable once committed (spool off)."""

    name = "store"

    def __init__(
        self,
        writer: BatchWriter,
        joiner: LogJoiner,
        metrics: IngestMetrics,
        capture: CapturePolicies,
        max_text_chars: int,
        redaction_cpu_s_per_record: float = DEFAULT_RECORD_CPU_S,
    ) -> None:
        self.writer = writer
        self.joiner = joiner
        self.metrics = metrics
        self.capture = capture
        self.max_text_chars = max_text_chars
        self.redaction_cpu_s = redaction_cpu_s_per_record

    def traces_inline(self, payload: Payload, caller: Caller) -> bool:
        # the redaction of one request's text may take long, and the loop serves everyone
        return False

    def traces(self, payload: Payload, caller: Caller) -> Handed:
        if payload.message is not None:
            batch = codec.spans_from_request(*payload.parsed())
        else:
            with gc_paused() if payload.size > INLINE_JSON_BYTES else nullcontext():
                batch = codec.decode(payload.raw(), payload.media)
        pending = service.submit(
            batch,
            tenant=caller.tenant,
            writer=self.writer,
            metrics=self.metrics,
            transport=caller.transport,
            max_text_chars=self.max_text_chars,
            capture_mode=self.capture.mode(caller.tenant),
            tenant_of=caller.tenant_of,
            capture_mode_of=self.capture.mode,
            redaction_cpu_s_per_record=self.redaction_cpu_s,
        )
        return Handed(
            pending.future,
            pending.outcome,
            partial(service.done, pending, metrics=self.metrics, transport=caller.transport),
        )

    def logs_inline(self, batch: LogBatch) -> bool:
        return False

    def logs(self, batch: LogBatch, payload: Payload, caller: Caller) -> Future[Any]:
        return service.submit_logs(
            batch,
            tenant=caller.tenant,
            joiner=self.joiner,
            writer=self.writer,
            metrics=self.metrics,
            transport=caller.transport,
            capture_mode=self.capture.mode(caller.tenant),
        )


class SpoolSink:
    """Append the request's bytes to the spool; durable once fsynced. Gateway-key trace
    requests go to :attr:`direct` (see the module docstring)."""

    name = "spool"

    def __init__(self, spool: Spool, direct: StoreSink) -> None:
        self.spool = spool
        self.direct = direct
        self.metrics = direct.metrics

    def traces_inline(self, payload: Payload, caller: Caller) -> bool:
        if caller.tenant_of is not None:
            return self.direct.traces_inline(payload, caller)
        inline = INLINE_PROTOBUF_BYTES if payload.media == codec.PROTOBUF else INLINE_JSON_BYTES
        return payload.size <= inline

    def traces(self, payload: Payload, caller: Caller) -> Handed:
        if caller.tenant_of is not None:
            return self.direct.traces(payload, caller)
        with nullcontext() if self.traces_inline(payload, caller) else gc_paused():
            valid, kind, batch = self._check(payload)
        fut = _done()
        if valid:
            fut = self.spool.append(kind, caller.tenant, payload.raw(), time.time_ns())
        if batch.rejected:
            self.metrics.spans_rejected.labels(caller.transport, "invalid_span").inc(batch.rejected)
        received = self.metrics.spans_received.labels(caller.transport)
        return Handed(
            fut,
            IngestOutcome(valid, batch.rejected, batch.error_message),
            partial(received.inc, valid),
        )

    @staticmethod
    def _check(payload: Payload) -> tuple[int, int, codec.DecodedBatch]:
        """(valid spans, spool record kind, batch of the rejections); protobuf: ids and times
        only. Raises DecodeError (400)."""
        if payload.media == codec.PROTOBUF:
            valid, batch = codec.check_request(*payload.parsed())
            return valid, TRACES_PROTOBUF, batch
        batch = codec.decode(payload.raw(), payload.media)
        return len(batch.spans), TRACES_JSON, batch

    def logs_inline(self, batch: LogBatch) -> bool:
        return True

    def logs(self, batch: LogBatch, payload: Payload, caller: Caller) -> Future[Any]:
        fut = _done()
        if batch.content or batch.evaluations:
            kind = LOGS_PROTOBUF if payload.media == codec.PROTOBUF else LOGS_JSON
            fut = self.spool.append(kind, caller.tenant, payload.raw(), time.time_ns())
        service.count_logs(batch, self.metrics, caller.transport)
        return fut


def make_sink(
    spool: Spool | None,
    writer: BatchWriter,
    joiner: LogJoiner,
    metrics: IngestMetrics,
    capture: CapturePolicies,
    max_text_chars: int,
    redaction_cpu_s_per_record: float = DEFAULT_RECORD_CPU_S,
) -> SpoolSink | StoreSink:
    """The app's sink: the spool when one is open (``DRIFTLINE_SPOOL_ENABLED``), else the
    store."""
    direct = StoreSink(writer, joiner, metrics, capture, max_text_chars, redaction_cpu_s_per_record)
    return direct if spool is None else SpoolSink(spool, direct)
