"""Feedback API: ``POST /api/v1/feedback`` (one event), ``POST /api/v1/feedback/batch``,
``GET /api/v1/feedback`` and ``GET /api/v1/feedback/summary``.

Feedback is accepted (202) even before its trace arrives; it is then *pending* and linked when
the call is stored. Re-sending a ``feedback_id`` is acknowledged and stores nothing new.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Query
from fastapi.responses import JSONResponse

from collector.errors import BadRequestError
from collector.ingest import feedback as fb
from driftline.api.deps import IngestTenant, ReadTenant, State

router = APIRouter(prefix="/api/v1", tags=["feedback"])
MAX_BATCH = 1000


def _accept(state: State, tenant: str, raw: Any) -> dict[str, Any]:
    ev = fb.parse_event(raw)
    status, duplicate = fb.store_event(state.engine, tenant, ev)
    if status == "pending":
        state.feedback_pending.add(tenant)
    return {"feedback_id": ev.feedback_id, "status": status, "duplicate": duplicate}


@router.post("/feedback", status_code=202, summary="Record one feedback event")
def post_feedback(
    state: State, tenant: IngestTenant, body: Annotated[dict[str, Any], Body()]
) -> JSONResponse:
    try:
        result = _accept(state, tenant, body)
    except ValueError as exc:
        raise BadRequestError(str(exc)) from None
    return JSONResponse(result, status_code=202)


@router.post("/feedback/batch", status_code=202, summary="Record many feedback events")
def post_feedback_batch(
    state: State, tenant: IngestTenant, body: Annotated[dict[str, Any], Body()]
) -> JSONResponse:
    items = body.get("items")
    if not isinstance(items, list):
        raise BadRequestError('body must be {"items": [feedback, ...]}')
    if len(items) > MAX_BATCH:
        raise BadRequestError(f"at most {MAX_BATCH} items per batch")
    accepted: list[dict[str, Any]] = []
    rejected: list[dict[str, Any]] = []
    for i, raw in enumerate(items):
        try:
            accepted.append(_accept(state, tenant, raw))
        except ValueError as exc:
            rejected.append({"index": i, "message": str(exc)})
    return JSONResponse({"items": accepted, "rejected": rejected}, status_code=202)


@router.get("/feedback", summary="List feedback events, newest first")
def list_feedback(
    state: State,
    tenant: ReadTenant,
    trace_id: str | None = None,
    status: Annotated[str | None, Query(pattern="^(linked|pending)$")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> dict[str, Any]:
    try:
        tid = fb._hex_id(trace_id, 32, "trace_id")
    except ValueError as exc:
        raise BadRequestError(str(exc)) from None
    with state.engine.connect() as conn:
        rows = fb.feedback_rows(conn, tenant, trace_id=tid, status=status, limit=limit)
    return {"items": rows, "next_cursor": None}


@router.get("/feedback/summary", summary="Effective votes per trace or per model")
def feedback_summary(
    state: State, tenant: ReadTenant, trace_id: str | None = None
) -> dict[str, Any]:
    with state.engine.connect() as conn:
        if trace_id is not None:
            try:
                tid = fb._hex_id(trace_id, 32, "trace_id")
            except ValueError as exc:
                raise BadRequestError(str(exc)) from None
            rows = fb.feedback_rows(conn, tenant, trace_id=tid, limit=100_000)
            return {"trace_id": tid, **fb.effective_votes(rows)}
        return {"models": fb.votes_by_model(conn, tenant)}
