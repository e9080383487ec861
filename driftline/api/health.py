"""``/healthz`` and the Prometheus ``/metrics`` exposition.

``/metrics`` is scoped to the caller (:mod:`collector.telemetry.exposition`): without a key,
process and ingest-health metrics only; with a key that may read (a tenant's ``admin`` too),
also the LLM KPI series of the key's tenant (no ``tenant`` label); with a ``platform-admin`` key
(or ``--dev``) every tenant's series with a ``tenant`` label. A key that is present but invalid
gets 401, never the anonymous view.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST
from sqlalchemy import text

from collector.telemetry import exposition
from driftline.api.deps import State, principal_of

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="Liveness and store health")
def healthz(state: State) -> Any:
    """200 when the store answers, 503 ``degraded`` when it does not. Fields: ``status``,
    ``database`` (``ok`` or ``unavailable: <error>``), ``write_queue_spans`` (spans waiting for
    the writer), ``grpc_port``; with the spool also ``spool_bytes`` (unprocessed bytes),
    ``spool_lag_s`` (seconds the oldest unprocessed request has waited) and ``spool_processor``
    (``mode`` process | thread | external, ``pid``, ``restarts``, ``status_age_s``: seconds since
    the processor last wrote its status file; null in thread mode or when never).

    With the spool, ``status`` is also ``degraded`` (still HTTP 200: the receivers accept and
    nothing is lost; restarting the collector would not help) while the processor has not
    advanced for ``DRIFTLINE_SPOOL_STALL_S`` seconds with records pending, or records were
    quarantined within the last ``DRIFTLINE_SPOOL_QUARANTINE_WINDOW_S`` seconds; ``problems``
    lists why, in English (absent when none)."""
    try:
        with state.engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        db = "ok"
    except Exception as exc:
        db = f"unavailable: {type(exc).__name__}"
    body: dict[str, Any] = {
        "status": "ok" if db == "ok" else "degraded",
        "database": db,
        "write_queue_spans": state.writer.queued_spans,
        "grpc_port": state.grpc_port,
    }
    processor = state.spool_processor
    if processor is not None:  # from the spool's files when the processor runs elsewhere
        body["spool_bytes"] = processor.spool.unprocessed_bytes
        body["spool_lag_s"] = processor.lag_seconds()
        body["spool_processor"] = processor.describe()
        problems = processor.problems(
            stall_s=state.settings.spool_stall_s,
            window_s=state.settings.spool_quarantine_window_s,
        )
        if problems:
            body["status"] = "degraded"
            body["problems"] = problems
    return JSONResponse(body, status_code=200 if db == "ok" else 503)


@router.get("/metrics", summary="Prometheus exposition, scoped to the caller's key")
def metrics(request: Request, state: State) -> Response:
    state.metrics.queue_spans.set(state.writer.queued_spans)
    authorization = request.headers.get("authorization")
    tenant: str | None = None
    all_tenants = False
    if authorization or state.settings.dev:
        principal = principal_of(state, authorization)  # AuthError -> 401
        all_tenants = principal.allows("platform")  # a tenant admin sees its own tenant
        tenant = principal.tenant if principal.allows("read") else None
    body = exposition.scoped(
        state.metrics.registry,
        [state.kpi_registry, *state.kpi_sources],
        tenant=tenant,
        all_tenants=all_tenants,
    )
    return Response(body, media_type=CONTENT_TYPE_LATEST)
