"""The collector process's components, started in order on one exit stack.

:func:`start_components` builds the :class:`~driftline.api.deps.AppState`: the store engine,
the writer, the spool and its processor, the receivers' sink, the writer's after-commit hooks,
the OTLP/gRPC receiver and the scheduler. Each component that runs (a thread, a process, a
server, a task) registers its stop on the caller's :class:`contextlib.AsyncExitStack` the moment
it starts, so a failure at any later step stops exactly the ones started, in reverse order, and
the app's shutdown is the same unwinding (Arize Phoenix's lifespan pattern).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from functools import partial

from sqlalchemy import Engine

from alerts.runtime import RuntimeSlot
from collector.auth import ForbiddenError, KeyStore, ensure_tenant
from collector.cost.prices import PriceTable
from collector.ingest import feedback
from collector.ingest.capture import CapturePolicies
from collector.ingest.log_join import LogJoiner, joined_writer
from collector.ingest.normalize import CallRecord
from collector.ingest.writer import BatchWriter
from collector.scheduler import JobContext, Scheduler
from collector.settings import Settings
from collector.spool.log import Spool
from collector.spool.processor import SpoolProcessor
from collector.spool.quarantine import JournalFollower
from collector.spool.supervisor import ProcessorSupervisor
from collector.spool.worker import KPI_FILE
from collector.store import engine as store_engine
from collector.telemetry.exposition import ExpositionFile
from collector.telemetry.kpis import LLMKpis
from collector.telemetry.metrics import IngestMetrics
from driftline.api.deps import DEV_TENANT, AppState, principal_of
from driftline.jobs import load_jobs
from driftline.receive.grpc import LogsService, TraceService, start_grpc_server
from driftline.receive.sink import make_sink

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FeedbackLinker:
    """After-commit hook: links feedback that arrived before its call (tenants in ``pending``,
    a set the feedback API adds to) to the records just committed."""

    engine: Engine
    pending: set[str]

    def __call__(self, tenant: str, records: list[CallRecord]) -> None:
        if tenant in self.pending:
            feedback.link_pending(
                self.engine,
                tenant,
                (r.trace_id for r in records),
                (x for r in records for x in (r.response_id, r.call_id) if x),
            )


@dataclass(frozen=True)
class KpiObserver:
    """After-commit hook: the committed records' LLM KPIs (per-tenant series)."""

    kpis: LLMKpis

    def __call__(self, _tenant: str, records: list[CallRecord]) -> None:
        self.kpis.observe(records)


def ingest_tenant(state: AppState, authorization: str | None) -> str:
    """The tenant of a gRPC caller allowed to ingest.

    Raises:
        AuthError: missing, malformed, unknown or revoked key. ForbiddenError: no ingest role.
    """
    principal = principal_of(state, authorization)
    if not principal.allows("ingest"):
        raise ForbiddenError(f"this API key (role {principal.role}) may not ingest")
    return principal.tenant


def _spool(
    settings: Settings,
    stack: AsyncExitStack,
    writer: BatchWriter,
    joiner: LogJoiner,
    capture: CapturePolicies,
    metrics: IngestMetrics,
) -> tuple[Spool, SpoolProcessor | ProcessorSupervisor]:
    """Open the spool and start its processor (a thread, a supervised process, or only a
    watcher of another host's); both stop with ``stack``."""
    in_thread = settings.spool_processor == "thread"
    spool = Spool(
        settings.spool_dir, max_bytes=settings.spool_max_bytes, external_commits=not in_thread
    )
    stack.callback(spool.close)
    processor: SpoolProcessor | ProcessorSupervisor
    if in_thread:
        processor = SpoolProcessor(
            spool,
            writer,
            joiner=joiner,
            capture_mode=capture.mode,
            max_text_chars=settings.max_text_chars,
            redaction_cpu_s_per_record=settings.redaction_cpu_s_per_record,
            keep_s=settings.spool_keep_s,
            batch_bytes=settings.spool_batch_bytes,
        )
        processor.on_processed = metrics.spans_processed.inc
        processor.quarantine.max_bytes = settings.spool_quarantine_max_bytes
    else:  # its own process (or another host's): metrics come from its files
        processor = ProcessorSupervisor(
            settings,
            spool,
            spawn=settings.spool_processor == "process",
            on_processed=metrics.spans_processed.inc,
        )
    processor.on_quarantined = lambda r: metrics.spool_quarantined.labels(r).inc()
    metrics.spool_quarantine_dropped.set_function(JournalFollower(spool.dir).dropped_total)
    metrics.spool_bytes.set_function(lambda: spool.unprocessed_bytes)
    metrics.spool_lag_seconds.set_function(processor.lag_seconds)
    processor.start()
    stack.callback(processor.close)
    return spool, processor


def _grpc(state: AppState, stack: AsyncExitStack) -> None:
    """Start the OTLP/gRPC receiver (stopped with ``stack``); sets ``state.grpc_port``.

    Raises:
        RuntimeError: the port could not be bound (it names the address).
    """
    settings = state.settings
    tenant_of: Callable[[str | None], str] = partial(ingest_tenant, state)
    server, state.grpc_port = start_grpc_server(
        TraceService(state.sink, state.metrics, tenant_of),
        LogsService(state.sink, state.metrics, tenant_of),
        settings.host,
        settings.grpc_port,
        max_message_bytes=settings.grpc_max_message_bytes,
    )
    stack.callback(lambda: server.stop(grace=5).wait(10))
    log.info("OTLP/gRPC receiver on %s:%s", settings.host, state.grpc_port)


async def start_components(settings: Settings, stack: AsyncExitStack) -> AppState:
    """Start every component of the collector process on ``stack`` and return the app state.

    Raises whatever a step raises (ConfigError naming the variable, RuntimeError for a port in
    use, SQLAlchemy errors for an unreachable store); the components started before it are
    stopped when the caller's stack unwinds.
    """
    if settings.auto_migrate:
        store_engine.upgrade(settings.database_url)
    engine = store_engine.make_engine(settings.database_url)
    stack.callback(engine.dispose)
    prices = PriceTable.load(settings.prices)
    metrics = IngestMetrics.create()
    writer, joiner = joined_writer(engine, prices, settings)
    writer.start()
    stack.callback(writer.close)
    keys = KeyStore(engine)
    capture = CapturePolicies(engine, settings.capture_content)
    if settings.dev:
        ensure_tenant(engine, DEV_TENANT)
    pending = feedback.has_pending(engine)
    spool, processor = (
        _spool(settings, stack, writer, joiner, capture, metrics)
        if settings.spool_enabled
        else (None, None)
    )
    sink = make_sink(
        spool,
        writer,
        joiner,
        metrics,
        capture,
        settings.max_text_chars,
        settings.redaction_cpu_s_per_record,
    )
    state = AppState(
        settings, engine, prices, writer, metrics, keys, capture, joiner, RuntimeSlot(), sink
    )
    state.feedback_pending = pending
    state.spool, state.spool_processor = spool, processor
    if processor is not None and not isinstance(processor, SpoolProcessor):
        state.kpi_sources.append(ExpositionFile(settings.spool_dir / KPI_FILE))
    hooks: Iterable[Callable[[str, list[CallRecord]], None]] = (
        FeedbackLinker(engine, pending),
        KpiObserver(LLMKpis.create(state.kpi_registry)),  # not in the anonymous /metrics view
    )
    for hook in hooks:
        writer.add_after_commit(hook)
    if settings.grpc_port >= 0 and settings.grpc_enabled:
        _grpc(state, stack)
    scheduler = Scheduler(
        JobContext(settings, engine, metrics.registry),
        load_jobs(settings, alerts=state.alerts) if settings.scheduler_enabled else [],
    )
    scheduler.start()
    stack.push_async_callback(scheduler.stop)
    state.scheduler = scheduler
    return state
