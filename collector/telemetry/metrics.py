"""Prometheus metrics of the collector's own health (one registry per app instance): process
(CPU, memory, file descriptors, Python GC / platform) and ingest health. No series here names a
tenant's model or money; per-tenant series live in a registry of their own
(:mod:`collector.telemetry.kpis`, :mod:`collector.telemetry.exposition`)."""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
)


@dataclass(frozen=True)
class IngestMetrics:
    """driftline_* self-metrics; label ``transport`` is ``http`` or ``grpc``."""

    registry: CollectorRegistry
    spans_received: Counter
    spans_rejected: Counter
    requests_refused: Counter
    queue_spans: Gauge
    write_seconds: Histogram
    log_records: Counter
    spool_bytes: Gauge
    spool_lag_seconds: Gauge
    spans_processed: Counter
    spool_quarantined: Counter
    spool_quarantine_dropped: Gauge

    @classmethod
    def create(cls, registry: CollectorRegistry | None = None) -> IngestMetrics:
        reg = registry or CollectorRegistry()
        if registry is None:  # a fresh registry: add the process, GC and platform collectors
            ProcessCollector(registry=reg)
            GCCollector(registry=reg)
            PlatformCollector(registry=reg)
        return cls(
            registry=reg,
            spans_received=Counter(
                "driftline_spans_received",
                "Spans accepted and stored.",
                ["transport"],
                registry=reg,
            ),
            spans_rejected=Counter(
                "driftline_spans_rejected",
                "Spans rejected in partialSuccess, by reason.",
                ["transport", "reason"],
                registry=reg,
            ),
            requests_refused=Counter(
                "driftline_ingest_requests_refused",
                "OTLP requests refused as a whole, by HTTP status / gRPC code.",
                ["transport", "code"],
                registry=reg,
            ),
            queue_spans=Gauge(
                "driftline_write_queue_spans", "Spans waiting to be committed.", registry=reg
            ),
            write_seconds=Histogram(
                "driftline_ingest_request_seconds",
                "Time from a decoded OTLP request to its durable commit, in seconds.",
                ["transport"],
                buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
                registry=reg,
            ),
            log_records=Counter(
                "driftline_log_records",
                "OTLP log records received, by kind: content (joined to its call), evaluation,"
                " unjoinable (gen_ai content without span ids), other (not stored), rejected.",
                ["transport", "kind"],
                registry=reg,
            ),
            spool_bytes=Gauge(
                "driftline_spool_bytes", "Spooled bytes not yet in the store.", registry=reg
            ),
            spool_lag_seconds=Gauge(
                "driftline_spool_lag_seconds",
                "Age of the oldest spooled request not yet in the store, in seconds.",
                registry=reg,
            ),
            spans_processed=Counter(
                "driftline_spool_spans_processed",
                "Spans written from the spool to the store (rate = processed spans/s).",
                registry=reg,
            ),
            spool_quarantined=Counter(
                "driftline_spool_quarantined_records",
                "Spooled requests the processor could not store and set aside in the spool's "
                "quarantine (driftline spool quarantine list), by reason: integrity, data, "
                "programming (the store refused them), decode, overflow, value, other.",
                ["reason"],
                registry=reg,
            ),
            spool_quarantine_dropped=Gauge(
                "driftline_spool_quarantine_dropped_records",
                "Quarantined spool records dropped (oldest first) to keep the quarantine under "
                "DRIFTLINE_SPOOL_QUARANTINE_MAX_BYTES, since the spool began (its journal).",
                registry=reg,
            ),
        )
