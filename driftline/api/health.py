"""``/healthz`` and the Prometheus ``/metrics`` exposition."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import text

from driftline.api.deps import State

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="Liveness and store health")
def healthz(state: State) -> Any:
    try:
        with state.engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        db = "ok"
    except Exception as exc:
        db = f"unavailable: {type(exc).__name__}"
    body = {
        "status": "ok" if db == "ok" else "degraded",
        "database": db,
        "write_queue_spans": state.writer.queued_spans,
        "grpc_port": state.grpc_port,
    }
    processor = state.extras.get("spool_processor")
    if processor is not None:
        body["spool_bytes"] = processor.spool.unprocessed_bytes
        body["spool_lag_s"] = processor.lag_seconds()
    return JSONResponse(body, status_code=200 if db == "ok" else 503)


@router.get("/metrics", summary="Prometheus exposition of driftline's own metrics")
def metrics(state: State) -> Response:
    state.metrics.queue_spans.set(state.writer.queued_spans)
    return Response(generate_latest(state.metrics.registry), media_type=CONTENT_TYPE_LATEST)
