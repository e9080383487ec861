"""``GET /api/v1/traces`` and ``GET /api/v1/traces/{trace_id}``: agent runs as span trees."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query

from collector.errors import BadRequestError, NotFoundError
from collector.store import traces
from collector.store.queries import MAX_PAGE
from driftline.api.calls import hex_id
from driftline.api.deps import State, Tenant
from driftline.api.params import Cursor, Seconds, Since, Until, parse_time, reject_unknown_params

router = APIRouter(prefix="/api/v1", tags=["traces"])


@router.get(
    "/traces",
    summary="List traces (newest first) with totals per trace",
    dependencies=[Depends(reject_unknown_params)],
)
def list_traces(
    state: State,
    tenant: Tenant,
    since: Since = None,
    until: Until = None,
    service: str | None = None,
    status: Annotated[str | None, Query(description="ok | error")] = None,
    has_llm: bool | None = None,
    min_duration_s: Seconds = None,
    user: str | None = None,
    session: str | None = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
    cursor: Cursor = None,
) -> dict[str, Any]:
    flt = traces.TraceFilter(
        since_unix_nano=parse_time(since, "since"),
        until_unix_nano=parse_time(until, "until"),
        service=service,
        status=status,
        has_llm=has_llm,
        min_duration_s=min_duration_s,
        user_id=user,
        session_id=session,
    )
    try:
        with state.engine.connect() as conn:
            items, next_cursor = traces.list_traces(conn, tenant, flt, limit=limit, cursor=cursor)
    except ValueError as exc:
        raise BadRequestError(str(exc)) from None
    return {"items": items, "next_cursor": next_cursor}


@router.get("/traces/{trace_id}", summary="One trace as a span tree with its LLM call records")
def get_trace(trace_id: str, state: State, tenant: Tenant) -> dict[str, Any]:
    tid = hex_id(trace_id, 32, "trace_id")
    assert tid is not None
    with state.engine.connect() as conn:
        out = traces.get_trace(conn, tenant, tid)
    if out is None:
        raise NotFoundError(f"trace {trace_id!r} not found")
    return out
