"""Trace queries: a page of traces (one summary per trace) and one trace as a span tree.

Every function takes the tenant explicitly. The tree and its totals come from
:func:`collector.store.trace_tree.build_tree` (one definition of the roll-up).
"""

from __future__ import annotations

import base64
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import orjson
from sqlalchemy import Connection, and_, case, func, select, tuple_

from collector.store.models import LLMCall, Span
from collector.store.queries import (
    MAX_PAGE,
    call_to_dict,
    cursor_int,
    encode_cursor,
    iso_from_unix_nano,
)
from collector.store.schema import SPAN_TREE_COLUMNS
from collector.store.trace_tree import build_tree

STATUSES = ("ok", "error")
_SPAN_COLS = SPAN_TREE_COLUMNS


@dataclass(frozen=True, slots=True)
class TraceFilter:
    """Filters of :func:`list_traces`.

    ``since`` (inclusive) / ``until`` (exclusive) apply to the trace's first span start (unix
    ns); ``service``: some span of the trace has this ``service.name``; ``status``: ``error``
    (some span has OTel status ERROR) or ``ok`` (none has); ``has_llm``: the trace has (no) LLM
    span; ``min_duration_s``: last span end - first span start, seconds; ``user_id`` /
    ``session_id``: some LLM call of the trace has this user / session.
    """

    since_unix_nano: int | None = None
    until_unix_nano: int | None = None
    service: str | None = None
    status: str | None = None
    has_llm: bool | None = None
    min_duration_s: float | None = None
    user_id: str | None = None
    session_id: str | None = None


def _decode_cursor(cursor: str) -> tuple[int, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        start, trace_id = orjson.loads(raw)
        return cursor_int(start), str(trace_id)
    except Exception:
        raise ValueError(f"invalid cursor {cursor[:64]!r}") from None


def list_traces(
    conn: Connection,
    tenant: str,
    flt: TraceFilter,
    *,
    limit: int = 50,
    cursor: str | None = None,
) -> tuple[list[dict[str, Any]], str | None]:
    """A page of trace summaries, newest first (by first span start), and the next cursor.

    Each item: ``trace_id``, ``started_at``/``start_unix_nano``, ``duration_s`` (seconds),
    ``root`` (``{span_id, name, kind, label, service_name, missing}`` of the first root),
    ``services``, ``session_id``, ``user_id`` (of its first call that has one) and the trace
    totals of :func:`~collector.store.trace_tree.build_tree` (``spans``, ``llm_calls``,
    ``input_tokens``, ``output_tokens``, ``cost_usd``, ``errors``, ``latency_s``).

    Raises:
        ValueError: bad cursor, limit, status or min_duration_s.
    """
    if not 1 <= limit <= MAX_PAGE:
        raise ValueError(f"limit must be between 1 and {MAX_PAGE}")
    if flt.status is not None and flt.status not in STATUSES:
        raise ValueError(f"status must be one of {', '.join(STATUSES)}, got {flt.status!r}")
    if flt.min_duration_s is not None and not flt.min_duration_s >= 0:
        raise ValueError(f"min_duration_s must be >= 0, got {flt.min_duration_s!r}")
    s = Span.__table__
    c = LLMCall.__table__
    first = func.min(s.c.start_unix_nano)
    last = func.max(s.c.end_unix_nano)
    having = []
    if flt.since_unix_nano is not None:
        having.append(first >= flt.since_unix_nano)
    if flt.until_unix_nano is not None:
        having.append(first < flt.until_unix_nano)
    if flt.service is not None:
        having.append(func.sum(case((s.c.service_name == flt.service, 1), else_=0)) > 0)
    if flt.status == "error":
        having.append(func.max(s.c.status_code) == 2)
    elif flt.status == "ok":
        having.append(func.max(s.c.status_code) < 2)
    if flt.has_llm is not None:
        llm = func.sum(case((s.c.llm_role.is_not(None), 1), else_=0))
        having.append(llm > 0 if flt.has_llm else llm == 0)
    if flt.min_duration_s is not None:
        having.append(last - first >= int(flt.min_duration_s * 1e9))
    if cursor:
        cs, ct = _decode_cursor(cursor)
        having.append(tuple_(first, s.c.trace_id) < tuple_(cs, ct))
    where = [s.c.tenant == tenant]
    for col, value in ((c.c.user_id, flt.user_id), (c.c.session_id, flt.session_id)):
        if value is not None:
            where.append(
                s.c.trace_id.in_(select(c.c.trace_id).where(c.c.tenant == tenant, col == value))
            )
    q = (
        select(s.c.trace_id, first.label("first_start"))
        .where(and_(*where))
        .group_by(s.c.trace_id)
        .order_by(first.desc(), s.c.trace_id.desc())
        .limit(limit + 1)
    )
    if having:
        q = q.having(and_(*having))
    page = [(r.trace_id, r.first_start) for r in conn.execute(q)]
    next_cursor = None
    if len(page) > limit:
        page = page[:limit]
        next_cursor = encode_cursor((page[-1][1], page[-1][0]))
    ids = [tid for tid, _ in page]
    spans, calls = _fetch(conn, tenant, ids)
    items = []
    for tid in ids:
        tree = build_tree(spans[tid], calls[tid])
        root = tree["roots"][0] if tree["roots"] else None
        totals = tree["totals"]
        sess = next((x["session_id"] for x in calls[tid] if x["session_id"]), None)
        user = next((x["user_id"] for x in calls[tid] if x["user_id"]), None)
        items.append(
            {
                "trace_id": tid,
                "started_at": iso_from_unix_nano(totals["start_unix_nano"]),
                "start_unix_nano": totals["start_unix_nano"],
                "duration_s": totals["latency_s"],
                "root": None
                if root is None
                else {
                    k: root[k]
                    for k in ("span_id", "name", "kind", "label", "service_name", "missing")
                },
                "services": sorted({sp["service_name"] for sp in spans[tid] if sp["service_name"]}),
                "session_id": sess,
                "user_id": user,
                **{k: v for k, v in totals.items() if k not in ("start_unix_nano",)},
            }
        )
    return items, next_cursor


def _fetch(
    conn: Connection, tenant: str, trace_ids: list[str]
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, list[dict[str, Any]]]]:
    """Spans and call records of ``trace_ids``, grouped by trace id."""
    spans: dict[str, list[dict[str, Any]]] = defaultdict(list)
    calls: dict[str, list[dict[str, Any]]] = defaultdict(list)
    if not trace_ids:
        return spans, calls
    s = Span.__table__
    c = LLMCall.__table__
    for row in conn.execute(
        select(*(s.c[k] for k in _SPAN_COLS)).where(
            s.c.tenant == tenant, s.c.trace_id.in_(trace_ids)
        )
    ).mappings():
        spans[row["trace_id"]].append(dict(row))
    for row in conn.execute(
        select(c).where(c.c.tenant == tenant, c.c.trace_id.in_(trace_ids))
    ).mappings():
        calls[row["trace_id"]].append(call_to_dict(row))
    return spans, calls


def get_trace(conn: Connection, tenant: str, trace_id: str) -> dict[str, Any] | None:
    """One trace as its span tree (see :func:`~collector.store.trace_tree.build_tree`), with
    ``trace_id``, ``started_at``, ``services`` and ``calls`` (the call ids, by start); None
    when the tenant has no span of this trace."""
    spans, calls = _fetch(conn, tenant, [trace_id])
    if not spans[trace_id]:
        return None
    tree = build_tree(spans[trace_id], calls[trace_id])
    ordered = sorted(calls[trace_id], key=lambda x: (x["start_unix_nano"] or 0, x["span_id"]))
    return {
        "trace_id": trace_id,
        "started_at": iso_from_unix_nano(tree["totals"]["start_unix_nano"]),
        "services": sorted({sp["service_name"] for sp in spans[trace_id] if sp["service_name"]}),
        "calls": [x["call_id"] for x in ordered],
        **tree,
    }
