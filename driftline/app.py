"""The collector's FastAPI application: ``create_app(settings)`` plus its lifespan.

The lifespan migrates the schema (``auto_migrate``), loads the price table, starts the span
writer and the OTLP/gRPC receiver, and stops them in reverse order.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import APIRouter, Depends, FastAPI

from alerts.runtime import RuntimeSlot
from collector.auth import ForbiddenError, KeyStore, ensure_tenant
from collector.cost.prices import PriceTable
from collector.errors import ConfigError
from collector.ingest import feedback
from collector.ingest.capture import CapturePolicies
from collector.ingest.grpc_server import LogsService, TraceService, start_grpc_server
from collector.ingest.log_join import joined_writer
from collector.ingest.normalize import CallRecord
from collector.scheduler import JobContext, Scheduler
from collector.settings import Settings, is_loopback
from collector.spool.log import Spool
from collector.spool.processor import SpoolProcessor
from collector.spool.supervisor import ProcessorSupervisor
from collector.spool.worker import KPI_FILE
from collector.store import engine as store_engine
from collector.telemetry.exposition import ExpositionFile
from collector.telemetry.kpis import LLMKpis
from collector.telemetry.metrics import IngestMetrics
from driftline.api import alerts as api_alerts
from driftline.api import calls, errors, health, otlp, quality, rollouts, stats
from driftline.api import drift as api_drift
from driftline.api import feedback as api_feedback
from driftline.api import scores as api_scores
from driftline.api import sessions as api_sessions
from driftline.api import traces as api_traces
from driftline.api.deps import DEV_TENANT, AppState, principal_of
from driftline.api.limits import LimitsMiddleware
from driftline.api.params import reject_nul
from driftline.jobs import load_jobs

log = logging.getLogger(__name__)

#: every APIRouter the app serves; one line per resource.
ROUTERS: list[APIRouter] = [
    otlp.router,
    calls.router,
    health.router,
    quality.router,
    stats.router,
    api_feedback.router,
    rollouts.router,
    api_drift.router,
    api_alerts.router,
    api_traces.router,
    api_sessions.router,
    api_scores.router,
]


def check_mode(settings: Settings) -> None:
    """Refuse unsafe modes at start-up.

    Raises:
        ConfigError: ``--dev`` (no authentication) bound beyond loopback.
    """
    if settings.dev and not is_loopback(settings.host):
        raise ConfigError(
            f"DRIFTLINE_HOST: --dev has no authentication and binds loopback only, "
            f"got {settings.host!r}"
        )


def create_app(settings: Settings) -> FastAPI:
    """Build the collector app for ``settings`` (nothing starts until the lifespan runs)."""
    check_mode(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if settings.auto_migrate:
            store_engine.upgrade(settings.database_url)
        engine = store_engine.make_engine(settings.database_url)
        prices = PriceTable.load(settings.prices)
        metrics = IngestMetrics.create()
        writer, joiner = joined_writer(engine, prices, settings)
        writer.start()
        keys = KeyStore(engine)
        capture = CapturePolicies(engine, settings.capture_content)
        pending = feedback.has_pending(engine)
        state = AppState(
            settings, engine, prices, writer, metrics, keys, capture, joiner, RuntimeSlot(), pending
        )
        if settings.dev:
            ensure_tenant(engine, DEV_TENANT)
        processor: SpoolProcessor | ProcessorSupervisor | None = None
        spool: Spool | None = None
        if settings.spool_enabled:
            in_thread = settings.spool_processor == "thread"
            spool = Spool(
                settings.spool_dir,
                max_bytes=settings.spool_max_bytes,
                external_commits=not in_thread,
            )
            if in_thread:
                processor = SpoolProcessor(
                    spool,
                    writer,
                    joiner=joiner,
                    capture_mode=capture.mode,
                    max_text_chars=settings.max_text_chars,
                    keep_s=settings.spool_keep_s,
                    batch_bytes=settings.spool_batch_bytes,
                )
                processor.on_processed = metrics.spans_processed.inc
            else:  # its own process (or another host's): metrics come from its files
                processor = ProcessorSupervisor(
                    settings,
                    spool,
                    spawn=settings.spool_processor == "process",
                    on_processed=metrics.spans_processed.inc,
                )
                state.kpi_sources.append(ExpositionFile(settings.spool_dir / KPI_FILE))
            processor.on_quarantined = lambda r: metrics.spool_quarantined.labels(r).inc()
            metrics.spool_bytes.set_function(lambda: spool.unprocessed_bytes)
            metrics.spool_lag_seconds.set_function(processor.lag_seconds)
            processor.start()
            state.spool = spool
            state.spool_processor = processor

        def link_feedback(tenant: str, records: list[CallRecord]) -> None:
            if tenant in pending:
                feedback.link_pending(
                    engine,
                    tenant,
                    (r.trace_id for r in records),
                    (x for r in records for x in (r.response_id, r.call_id) if x),
                )

        writer.add_after_commit(link_feedback)
        kpis = LLMKpis.create(state.kpi_registry)  # not in the anonymous /metrics view

        def observe_kpis(_tenant: str, records: list[CallRecord]) -> None:
            kpis.observe(records)

        writer.add_after_commit(observe_kpis)

        def grpc_tenant(authorization: str | None) -> str:
            principal = principal_of(state, authorization)
            if not principal.allows("ingest"):
                raise ForbiddenError(f"this API key (role {principal.role}) may not ingest")
            return principal.tenant

        grpc_server = None
        if settings.grpc_port >= 0 and settings.grpc_enabled:
            servicer = TraceService(
                writer, metrics, grpc_tenant, settings.max_text_chars, capture.mode
            )
            servicer.spool = state.spool
            logs_servicer = LogsService(joiner, writer, metrics, grpc_tenant, capture.mode)
            logs_servicer.spool = servicer.spool
            grpc_server, state.grpc_port = start_grpc_server(
                servicer,
                logs_servicer,
                settings.host,
                settings.grpc_port,
                max_message_bytes=settings.grpc_max_message_bytes,
            )
            log.info("OTLP/gRPC receiver on %s:%s", settings.host, state.grpc_port)
        app.state.driftline = state
        scheduler = Scheduler(
            JobContext(settings, engine, metrics.registry),
            load_jobs(settings, alerts=state.alerts) if settings.scheduler_enabled else [],
        )
        state.scheduler = scheduler
        scheduler.start()
        try:
            yield
        finally:
            await scheduler.stop()
            if grpc_server is not None:
                grpc_server.stop(grace=5).wait(10)
            if processor is not None:
                processor.close()
            if spool is not None:
                spool.close()
            writer.close()
            engine.dispose()

    app = FastAPI(
        title="driftline collector",
        version="0.1.0",
        summary="OTLP gen_ai ingestion and the LLM-call store",
        lifespan=lifespan,
        dependencies=[Depends(reject_nul)],  # PostgreSQL cannot bind NUL: 400, not 500
    )
    errors.install(app)
    app.add_middleware(LimitsMiddleware, max_request_bytes=settings.max_request_bytes)
    for router in ROUTERS:
        app.include_router(router)
    return app
