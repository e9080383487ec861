"""Transport-independent ingestion: decoded spans -> normalised items -> durable write.

The receive room's store sink (``driftline.receive.sink.StoreSink``, used by the OTLP/HTTP and
OTLP/gRPC receivers with the spool off, and for gateway keys) calls :func:`submit` /
:func:`submit_logs`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass

from collector.ingest.decode import DecodedBatch
from collector.ingest.log_join import LogJoiner
from collector.ingest.logs import LogBatch
from collector.ingest.prepare import prepare, prepare_by_tenant
from collector.ingest.redaction_budget import DEFAULT_RECORD_CPU_S
from collector.ingest.writer import BatchWriter
from collector.store.schema import SpanData
from collector.telemetry.metrics import IngestMetrics


@dataclass(frozen=True, slots=True)
class IngestOutcome:
    """What to answer: spans accepted, spans rejected and the English reason."""

    accepted: int
    rejected: int
    error_message: str


@dataclass(slots=True)
class Pending:
    """An accepted request waiting for its commit."""

    future: Future[int]
    outcome: IngestOutcome
    started: float


def submit(
    batch: DecodedBatch,
    *,
    tenant: str,
    writer: BatchWriter,
    metrics: IngestMetrics,
    transport: str,
    max_text_chars: int,
    capture_mode: str = "full",
    tenant_of: Callable[[SpanData], str] | None = None,
    capture_mode_of: Callable[[str], str] | None = None,
    redaction_cpu_s_per_record: float = DEFAULT_RECORD_CPU_S,
) -> Pending:
    """Normalise and queue a decoded batch.

    ``tenant_of`` (a gateway key's request): each span's tenant, see
    :func:`collector.auth.span_tenant`; ``capture_mode_of(tenant)`` its content policy.

    Raises:
        QueueFullError: the write queue is full (answer 503 / UNAVAILABLE).
    """
    if tenant_of is None:
        items, errors = prepare(
            batch.spans,
            max_text_chars,
            capture_mode,
            redaction_cpu_s_per_record=redaction_cpu_s_per_record,
        )
    else:
        items, errors = prepare_by_tenant(
            batch.spans,
            max_text_chars,
            tenant=tenant,
            tenant_of=tenant_of,
            capture_mode_of=capture_mode_of or (lambda _t: capture_mode),
            redaction_cpu_s_per_record=redaction_cpu_s_per_record,
        )
    for msg in errors:
        batch.reject(1, msg)
    if batch.rejected:
        metrics.spans_rejected.labels(transport, "invalid_span").inc(batch.rejected)
    fut = writer.submit(tenant, items)
    metrics.queue_spans.set(writer.queued_spans)
    return Pending(
        future=fut,
        outcome=IngestOutcome(len(items), batch.rejected, batch.error_message),
        started=time.perf_counter(),
    )


def done(pending: Pending, *, metrics: IngestMetrics, transport: str) -> IngestOutcome:
    """Record metrics of a committed request."""
    metrics.spans_received.labels(transport).inc(pending.outcome.accepted)
    metrics.write_seconds.labels(transport).observe(time.perf_counter() - pending.started)
    return pending.outcome


def submit_logs(
    batch: LogBatch,
    *,
    tenant: str,
    joiner: LogJoiner,
    writer: BatchWriter,
    metrics: IngestMetrics,
    transport: str,
    capture_mode: str,
) -> Future[int]:
    """Store a decoded log batch and queue the join with spans already stored; count records.

    Raises:
        QueueFullError: the write queue is full. sqlalchemy.exc.OperationalError: store down.
    """
    fut = joiner.ingest(tenant, batch, capture_mode, writer)
    count_logs(batch, metrics, transport)
    return fut


def count_logs(batch: LogBatch, metrics: IngestMetrics, transport: str) -> None:
    """Count a request's log records by kind (``driftline_log_records_total``)."""
    for kind, n in (
        ("content", len(batch.content)),
        ("evaluation", len(batch.evaluations)),
        ("unjoinable", batch.unjoinable),
        ("other", batch.other),
        ("rejected", batch.rejected),
    ):
        if n:
            metrics.log_records.labels(transport, kind).inc(n)
