"""Read queries over the store, shared by the REST API, judges, drift and the dashboard.

Every function takes the tenant explicitly: a tenant never reads another tenant's rows.
"""

from __future__ import annotations

import base64
import datetime as dt
from dataclasses import dataclass
from typing import Any

import orjson
from sqlalchemy import Connection, and_, func, or_, select, tuple_

from collector.store import search
from collector.store.models import LLMCall, Span
from collector.store.models.api import Feedback
from collector.store.schema import CALL_COLUMNS, SPAN_API_COLUMNS

MAX_PAGE = 1000


@dataclass(frozen=True, slots=True)
class CallFilter:
    """Filters of :func:`list_calls`; ``since`` (inclusive) / ``until`` (exclusive) in unix ns."""

    trace_id: str | None = None
    span_id: str | None = None
    model: str | None = None
    service: str | None = None
    variant: str | None = None
    rollout: str | None = None
    finish_reason: str | None = None
    user_id: str | None = None
    session_id: str | None = None
    #: full-text query over captured text (every word must occur; see collector.store.search)
    q: str | None = None
    has_feedback: bool | None = None
    since_unix_nano: int | None = None
    until_unix_nano: int | None = None


def iso_from_unix_nano(ns: int | None) -> str | None:
    """``2024-04-25T00:00:00.123456Z`` (UTC, microseconds) or None."""
    if not ns:
        return None
    return (
        dt.datetime.fromtimestamp(ns / 1e9, tz=dt.UTC)
        .isoformat(timespec="microseconds")
        .replace("+00:00", "Z")
    )


def call_to_dict(row: Any) -> dict[str, Any]:
    """A call row as the API's call record: every field, nulls as None, times as ISO + ns."""
    out = {c: row[c] for c in CALL_COLUMNS}
    out["started_at"] = iso_from_unix_nano(out["start_unix_nano"])
    out["ended_at"] = iso_from_unix_nano(out["end_unix_nano"])
    return out


def encode_cursor(values: tuple[Any, ...]) -> str:
    return base64.urlsafe_b64encode(orjson.dumps(list(values))).decode().rstrip("=")


def cursor_int(value: Any) -> int:
    """``value`` when it is an int64 (what a stored time or id in a cursor is).

    Raises:
        ValueError: not an integer, or outside int64 (a forged cursor; the store would
            overflow binding it).
    """
    if type(value) is not int or not -(2**63) <= value < 2**63:
        raise ValueError("not an int64")
    return value


def decode_cursor(cursor: str) -> tuple[int, str, str]:
    """Raises ValueError when the cursor was not produced by :func:`encode_cursor`."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        start, trace_id, span_id = orjson.loads(raw)
        return cursor_int(start), str(trace_id), str(span_id)
    except Exception:
        raise ValueError(f"invalid cursor {cursor[:64]!r}") from None


def list_calls(
    conn: Connection,
    tenant: str,
    flt: CallFilter,
    *,
    limit: int = 100,
    cursor: str | None = None,
) -> tuple[list[dict[str, Any]], str | None]:
    """A page of calls, newest first, and the cursor of the next page (None at the end).

    Raises:
        ValueError: bad cursor, limit or search query.
    """
    if not 1 <= limit <= MAX_PAGE:
        raise ValueError(f"limit must be between 1 and {MAX_PAGE}")
    t = LLMCall.__table__
    start = func.coalesce(t.c.start_unix_nano, 0)
    conds = [t.c.tenant == tenant]
    for col, value in (
        (t.c.trace_id, flt.trace_id),
        (t.c.model, flt.model),
        (t.c.service_name, flt.service),
        (t.c.variant, flt.variant),
        (t.c.rollout, flt.rollout),
        (t.c.finish_reason, flt.finish_reason),
        (t.c.user_id, flt.user_id),
        (t.c.session_id, flt.session_id),
    ):
        if value is not None:
            conds.append(col == value)
    if flt.span_id is not None:
        conds.append(or_(t.c.span_id == flt.span_id, t.c.engine_span_id == flt.span_id))
    if flt.has_feedback is not None:
        f = Feedback.__table__
        linked = (
            select(f.c.feedback_id)
            .where(
                f.c.tenant == t.c.tenant,
                f.c.trace_id == t.c.trace_id,
                or_(f.c.span_id.is_(None), f.c.span_id == t.c.span_id),
            )
            .exists()
        )
        conds.append(linked if flt.has_feedback else ~linked)
    if flt.q is not None:
        conds.append(search.match_condition(conn.dialect.name, flt.q))
    if flt.since_unix_nano is not None:
        conds.append(t.c.start_unix_nano >= flt.since_unix_nano)
    if flt.until_unix_nano is not None:
        conds.append(t.c.start_unix_nano < flt.until_unix_nano)
    # Order: (coalesce(start, 0), trace_id, span_id) descending. Calls with a start time come
    # first and are read in the order of the (tenant, start) indexes, so a page reads about
    # `limit` rows however long the range (ordering by the coalesce expression itself made
    # every query sort every matching row); the rare calls without one follow.
    cs = None
    if cursor:
        cs, ct, csp = decode_cursor(cursor)
    rows: list[Any] = []
    if cs is None or cs > 0:
        dated = [*conds, t.c.start_unix_nano > 0]
        if cs is not None:
            dated += [
                t.c.start_unix_nano <= cs,  # a range on the index; the tuple decides ties
                tuple_(t.c.start_unix_nano, t.c.trace_id, t.c.span_id) < tuple_(cs, ct, csp),
            ]
        q = (
            select(t)
            .where(and_(*dated))
            .order_by(t.c.start_unix_nano.desc(), t.c.trace_id.desc(), t.c.span_id.desc())
            .limit(limit + 1)
        )
        rows = list(conn.execute(q).mappings())
    if len(rows) <= limit:
        undated = [*conds, or_(t.c.start_unix_nano.is_(None), t.c.start_unix_nano <= 0)]
        if cs is not None and cs <= 0:
            undated.append(tuple_(start, t.c.trace_id, t.c.span_id) < tuple_(cs, ct, csp))
        q = (
            select(t)
            .where(and_(*undated))
            .order_by(start.desc(), t.c.trace_id.desc(), t.c.span_id.desc())
            .limit(limit + 1 - len(rows))
        )
        rows += list(conn.execute(q).mappings())
    items = [call_to_dict(r) for r in rows[:limit]]
    next_cursor = None
    if len(rows) > limit:
        last = rows[limit - 1]
        next_cursor = encode_cursor(
            (last["start_unix_nano"] or 0, last["trace_id"], last["span_id"])
        )
    return items, next_cursor


def get_call(conn: Connection, tenant: str, call_id: str) -> dict[str, Any] | None:
    """One call by ``call_id`` or ``trace_id:span_id``, with its spans; None if absent.

    When several calls share a ``call_id`` (an id reused by two layers), the earliest wins.
    """
    t = LLMCall.__table__
    # One indexed lookup per key (ix_llm_calls_call_id, the primary key): an OR of the two
    # conditions made SQLite scan the tenant's calls (~25 ms at 40,000 calls).
    conds = [t.c.call_id == call_id]
    if ":" in call_id:
        trace_id, _, span_id = call_id.partition(":")
        conds.append(and_(t.c.trace_id == trace_id.lower(), t.c.span_id == span_id.lower()))
    order = (func.coalesce(t.c.start_unix_nano, 0), t.c.trace_id, t.c.span_id)
    found = [
        r
        for cond in conds
        if (
            r := conn.execute(select(t).where(t.c.tenant == tenant, cond).order_by(*order).limit(1))
            .mappings()
            .first()
        )
        is not None
    ]
    row = min(
        found,
        key=lambda r: (r["start_unix_nano"] or 0, r["trace_id"], r["span_id"]),
        default=None,
    )
    if row is None:
        return None
    out = call_to_dict(row)
    s = Span.__table__
    span_ids = [row["span_id"]] + ([row["engine_span_id"]] if row["engine_span_id"] else [])
    spans = conn.execute(
        select(s)
        .where(s.c.tenant == tenant, s.c.trace_id == row["trace_id"], s.c.span_id.in_(span_ids))
        .order_by(s.c.start_unix_nano)
    ).mappings()
    out["spans"] = [{k: sp[k] for k in SPAN_API_COLUMNS} for sp in spans]
    f = Feedback.__table__
    out["feedback"] = [
        {
            k: fb[k]
            for k in (
                "feedback_id",
                "kind",
                "value",
                "comment",
                "user_id",
                "timestamp_unix_nano",
                "source",
            )
        }
        for fb in conn.execute(
            select(f)
            .where(
                f.c.tenant == tenant,
                f.c.trace_id == row["trace_id"],
                or_(f.c.span_id.is_(None), f.c.span_id == row["span_id"]),
            )
            .order_by(f.c.timestamp_unix_nano)
        ).mappings()
    ]
    return out


def count_spans(conn: Connection, tenant: str) -> int:
    """Number of stored spans of a tenant."""
    s = Span.__table__
    return int(conn.execute(select(func.count()).where(s.c.tenant == tenant)).scalar_one())
