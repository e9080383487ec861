"""``GET /api/v1/calls`` and ``GET /api/v1/calls/{call_id}``: the canonical call records."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query

from collector.errors import BadRequestError, NotFoundError
from collector.store import queries
from driftline.api.deps import State, Tenant
from driftline.api.params import Cursor, Since, Until, reject_unknown_params
from driftline.api.params import parse_time as parse_time  # re-exported: older imports

router = APIRouter(prefix="/api/v1", tags=["calls"])


def hex_id(value: str | None, size: int, name: str) -> str | None:
    if value is None:
        return None
    v = value.strip().lower()
    if len(v) != size or any(c not in "0123456789abcdef" for c in v):
        raise BadRequestError(f"{name} must be {size} hex characters, got {value!r}")
    return v


@router.get(
    "/calls",
    summary="List LLM call records, newest first",
    dependencies=[Depends(reject_unknown_params)],
)
def list_calls(
    state: State,
    tenant: Tenant,
    trace_id: str | None = None,
    span_id: str | None = None,
    model: str | None = None,
    service: str | None = None,
    variant: str | None = None,
    rollout: str | None = None,
    finish_reason: str | None = None,
    user: str | None = None,
    session: str | None = None,
    q: Annotated[
        str | None,
        Query(description="full-text search of the captured (redacted) text: every word"),
    ] = None,
    has_feedback: bool | None = None,
    since: Since = None,
    until: Until = None,
    limit: Annotated[int, Query(ge=1, le=queries.MAX_PAGE)] = 100,
    cursor: Cursor = None,
) -> dict[str, Any]:
    flt = queries.CallFilter(
        trace_id=hex_id(trace_id, 32, "trace_id"),
        span_id=hex_id(span_id, 16, "span_id"),
        model=model,
        service=service,
        variant=variant,
        rollout=rollout,
        finish_reason=finish_reason,
        user_id=user,
        session_id=session,
        q=q,
        has_feedback=has_feedback,
        since_unix_nano=parse_time(since, "since"),
        until_unix_nano=parse_time(until, "until"),
    )
    try:
        with state.engine.connect() as conn:
            items, next_cursor = queries.list_calls(conn, tenant, flt, limit=limit, cursor=cursor)
    except ValueError as exc:
        raise BadRequestError(str(exc)) from None
    return {"items": items, "next_cursor": next_cursor}


@router.get("/calls/{call_id}", summary="One LLM call record with its spans and feedback")
def get_call(call_id: str, state: State, tenant: Tenant) -> dict[str, Any]:
    with state.engine.connect() as conn:
        call = queries.get_call(conn, tenant, call_id)
    if call is None:
        raise NotFoundError(f"call {call_id!r} not found")
    return call
