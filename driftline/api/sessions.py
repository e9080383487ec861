"""``GET /api/v1/sessions`` and ``GET /api/v1/sessions/{session_id}``: conversations."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query

from collector.errors import BadRequestError, NotFoundError
from collector.store import sessions
from collector.store.queries import MAX_PAGE
from driftline.api.deps import State, Tenant
from driftline.api.params import MAX_TIME_CHARS, Cursor, parse_time, reject_unknown_params

_ACTIVITY = "last activity {} (unix s, ISO 8601 or a duration ago)"

router = APIRouter(prefix="/api/v1", tags=["sessions"])


@router.get(
    "/sessions",
    summary="List sessions, most recently active first, with totals, feedback and judge scores",
    dependencies=[Depends(reject_unknown_params)],
)
def list_sessions(
    state: State,
    tenant: Tenant,
    user: str | None = None,
    since: Annotated[
        str | None, Query(max_length=MAX_TIME_CHARS, description=_ACTIVITY.format(">="))
    ] = None,
    until: Annotated[
        str | None, Query(max_length=MAX_TIME_CHARS, description=_ACTIVITY.format("<"))
    ] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
    cursor: Cursor = None,
) -> dict[str, Any]:
    try:
        with state.engine.connect() as conn:
            items, next_cursor = sessions.list_sessions(
                conn,
                tenant,
                user_id=user,
                since_unix_nano=parse_time(since, "since"),
                until_unix_nano=parse_time(until, "until"),
                limit=limit,
                cursor=cursor,
            )
    except ValueError as exc:
        raise BadRequestError(str(exc)) from None
    return {"items": items, "next_cursor": next_cursor}


@router.get("/sessions/{session_id}", summary="One session as a conversation (calls in order)")
def get_session(session_id: str, state: State, tenant: Tenant) -> dict[str, Any]:
    with state.engine.connect() as conn:
        out = sessions.get_session(conn, tenant, session_id)
    if out is None:
        raise NotFoundError(f"session {session_id!r} not found")
    return out
