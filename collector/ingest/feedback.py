"""User feedback events: validation, idempotent storage, linking to calls, effective votes.

Feedback may arrive before its trace (clients send it as soon as the user clicks): it is kept
*pending* and linked when a call with that trace id or response id is stored. One effective
vote per (user, target): the latest by timestamp wins (target = the linked call, or the trace).
"""

from __future__ import annotations

import datetime as dt
import math
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine, and_, insert, or_, select, update

from collector.store.models import LLMCall
from collector.store.models.api import Feedback
from collector.timeparse import parse_time_ns, unix_nano

KINDS = ("thumbs_up", "thumbs_down", "rating", "regenerate", "escalation", "comment")
VOTE_KINDS = ("thumbs_up", "thumbs_down")
CHUNK = 500
_HEX = set("0123456789abcdef")


@dataclass(frozen=True, slots=True)
class FeedbackEvent:
    """A validated feedback event; ids lowercase hex; timestamp in unix nanoseconds."""

    feedback_id: str
    kind: str
    trace_id: str | None
    span_id: str | None
    response_id: str | None
    value: float | None
    comment: str | None
    user_id: str | None
    source: str | None
    attributes: dict[str, Any]
    timestamp_unix_nano: int


def _hex_id(value: Any, size: int, name: str) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string of {size} hex characters")
    v = value.strip().lower()
    if len(v) != size or not set(v) <= _HEX or set(v) == {"0"}:
        raise ValueError(f"{name} must be {size} hex characters (not all zero), got {value!r}")
    return v


#: deepest nesting of a body's free-form JSON (``metadata``, a score's ``attributes``): the
#: store's JSON encoder (orjson) stops at 255 levels, a 500 at insert; 64 is far beyond use
MAX_JSON_DEPTH = 64


def check_json(value: Any, name: str) -> None:
    """Refuse what the store cannot keep in free-form JSON: a NUL character in any string
    (PostgreSQL text and JSONB cannot hold it) or nesting deeper than :data:`MAX_JSON_DEPTH`.
    Walked without recursion (a body may be as deep as the JSON parser allows).

    Raises:
        ValueError: naming ``name``.
    """
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                raise ValueError(f"{name} must not contain NUL characters (\\u0000)")
        elif isinstance(item, Mapping | list | tuple):
            if depth >= MAX_JSON_DEPTH:
                raise ValueError(f"{name} is nested deeper than {MAX_JSON_DEPTH} levels")
            children = [*item.keys(), *item.values()] if isinstance(item, Mapping) else item
            stack.extend((child, depth + 1) for child in children)


def _timestamp(value: Any) -> int:
    """Unix ns of a feedback ``timestamp``: now when absent; 1970-01-01 .. 2262-04-11."""
    if value is None or value == "":
        return time.time_ns()
    if isinstance(value, bool):
        raise ValueError("timestamp must be ISO 8601 or unix seconds")
    if isinstance(value, int | float):
        try:
            return unix_nano(float(value), name="timestamp")
        except OverflowError:  # an int past a float's range (10**400)
            raise ValueError("timestamp must be a time from 1970-01-01 to 2262-04-11") from None
    if isinstance(value, str):
        if len(value) > 64:
            raise ValueError("timestamp must be at most 64 characters")
        return parse_time_ns(value, name="timestamp", durations=False)
    raise ValueError("timestamp must be ISO 8601 or unix seconds")


def parse_event(raw: Mapping[str, Any]) -> FeedbackEvent:
    """Validate one feedback JSON object.

    Accepts ``kind`` plus optional numeric ``value`` (ratings), or the short form
    ``{"value": "thumbs_up"}``. ``feedback_id`` is the idempotency key (assigned when absent).

    Raises:
        ValueError: the message names the offending field (HTTP 400).
    """
    if not isinstance(raw, Mapping):
        raise ValueError("feedback must be a JSON object")
    check_json(raw, "feedback")
    kind = raw.get("kind")
    value = raw.get("value")
    if kind is None and isinstance(value, str):
        kind, value = value, None
    if kind is None and isinstance(value, int | float) and not isinstance(value, bool):
        kind = "rating"
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
        raise ValueError("value must be a number")
    if value is not None:
        try:  # NaN and Infinity parse from JSON; an int may exceed a float's range
            finite = math.isfinite(value)
        except OverflowError:
            finite = False
        if not finite:
            raise ValueError("value must be a finite number")
    if kind == "rating" and value is None:
        raise ValueError("a rating needs a numeric value")
    trace_id = _hex_id(raw.get("trace_id"), 32, "trace_id")
    span_id = _hex_id(raw.get("span_id"), 16, "span_id")
    response_id = raw.get("response_id")
    if response_id is not None and (not isinstance(response_id, str) or len(response_id) > 512):
        raise ValueError("response_id must be a string of at most 512 characters")
    if trace_id is None and not response_id:
        raise ValueError("feedback needs trace_id or response_id")
    if span_id is not None and trace_id is None:
        raise ValueError("span_id needs trace_id")
    fid = raw.get("feedback_id")
    if fid is None or fid == "":
        fid = f"fb-{uuid.uuid4().hex}"
    if not isinstance(fid, str) or len(fid) > 128:
        raise ValueError("feedback_id must be a string of at most 128 characters")
    meta = raw.get("metadata") or {}
    if not isinstance(meta, Mapping):
        raise ValueError("metadata must be an object")
    comment = raw.get("comment")
    user = raw.get("user_id")
    if user is not None and len(str(user)) > 256:
        raise ValueError("user_id must be at most 256 characters")
    if meta.get("source") is not None and len(str(meta["source"])) > 64:
        raise ValueError("metadata.source must be at most 64 characters")
    return FeedbackEvent(
        feedback_id=fid,
        kind=str(kind),
        trace_id=trace_id,
        span_id=span_id,
        response_id=response_id or None,
        value=float(value) if value is not None else None,
        comment=str(comment) if comment is not None else None,
        user_id=str(user) if user is not None else None,
        source=str(meta["source"]) if meta.get("source") is not None else None,
        attributes=dict(meta),
        timestamp_unix_nano=_timestamp(raw.get("timestamp")),
    )


def _find_call(conn: Connection, tenant: str, ev: FeedbackEvent) -> tuple[str, str | None] | None:
    """(trace_id, span_id or None) of the call this event refers to, if it is stored."""
    c = LLMCall.__table__.c
    if ev.trace_id is not None:
        cond = [c.tenant == tenant, c.trace_id == ev.trace_id]
        if ev.span_id is not None:
            cond.append(or_(c.span_id == ev.span_id, c.engine_span_id == ev.span_id))
        row = conn.execute(select(c.trace_id, c.span_id).where(*cond).limit(1)).first()
        if row is None:
            return None
        return ev.trace_id, (row.span_id if ev.span_id is not None else None)
    row = conn.execute(
        select(c.trace_id, c.span_id)
        .where(
            c.tenant == tenant, or_(c.response_id == ev.response_id, c.call_id == ev.response_id)
        )
        .limit(1)
    ).first()
    return (row.trace_id, row.span_id) if row is not None else None


def store_event(engine: Engine, tenant: str, ev: FeedbackEvent) -> tuple[str, bool]:
    """Store ``ev`` unless its ``feedback_id`` exists; returns (status, duplicate) where status
    is ``linked`` or ``pending``."""
    f = Feedback.__table__.c
    now = dt.datetime.now(dt.UTC)
    with engine.begin() as conn:
        existing = conn.execute(
            select(f.linked_at).where(f.tenant == tenant, f.feedback_id == ev.feedback_id)
        ).first()
        if existing is not None:
            return ("linked" if existing.linked_at is not None else "pending"), True
        found = _find_call(conn, tenant, ev)
        trace_id, span_id = found if found else (ev.trace_id, ev.span_id)
        conn.execute(
            insert(Feedback).values(
                tenant=tenant,
                feedback_id=ev.feedback_id,
                trace_id=trace_id,
                span_id=span_id,
                response_id=ev.response_id,
                kind=ev.kind,
                value=ev.value,
                comment=ev.comment,
                user_id=ev.user_id,
                source=ev.source,
                attributes=ev.attributes,
                timestamp_unix_nano=ev.timestamp_unix_nano,
                received_at=now,
                linked_at=now if found else None,
            )
        )
    return ("linked" if found else "pending"), False


def link_pending(
    engine: Engine, tenant: str, trace_ids: Iterable[str], response_ids: Iterable[str]
) -> int:
    """Link pending feedback of ``tenant`` that refers to these traces or response ids
    (called after calls are stored). Returns the number linked."""
    f = Feedback.__table__.c
    traces = sorted(set(trace_ids))
    responses = sorted({r for r in response_ids if r})
    linked = 0
    with engine.begin() as conn:
        pending: list[Any] = []
        for values, col in ((traces, f.trace_id), (responses, f.response_id)):
            for i in range(0, len(values), CHUNK):
                pending.extend(
                    conn.execute(
                        select(f.feedback_id, f.trace_id, f.span_id, f.response_id).where(
                            f.tenant == tenant,
                            f.linked_at.is_(None),
                            col.in_(values[i : i + CHUNK]),
                        )
                    ).all()
                )
        now = dt.datetime.now(dt.UTC)
        for row in {r.feedback_id: r for r in pending}.values():
            ev = FeedbackEvent(
                row.feedback_id,
                "comment",
                row.trace_id,
                row.span_id,
                row.response_id,
                None,
                None,
                None,
                None,
                {},
                0,
            )
            found = _find_call(conn, tenant, ev)
            if found is None:
                continue
            conn.execute(
                update(Feedback)
                .where(f.tenant == tenant, f.feedback_id == row.feedback_id)
                .values(trace_id=found[0], span_id=found[1], linked_at=now)
            )
            linked += 1
    return linked


def has_pending(engine: Engine) -> set[str]:
    """Tenants that have pending (unlinked) feedback."""
    f = Feedback.__table__.c
    with engine.connect() as conn:
        return {
            r[0] for r in conn.execute(select(f.tenant).where(f.linked_at.is_(None)).distinct())
        }


def effective_votes(rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Count thumbs up/down with one vote per (user, target), the latest timestamp winning.

    ``rows`` have kind, user_id, trace_id, span_id, feedback_id, timestamp_unix_nano. Votes
    without a user each count (keyed by feedback_id).
    """
    latest: dict[tuple[str, str], tuple[int, str, str]] = {}
    for r in rows:
        if r["kind"] not in VOTE_KINDS:
            continue
        target = r["trace_id"] or r.get("response_id") or r["feedback_id"]
        voter = r["user_id"] or f"anonymous:{r['feedback_id']}"
        key = (voter, target)
        cand = (int(r["timestamp_unix_nano"]), str(r["feedback_id"]), str(r["kind"]))
        if key not in latest or cand > latest[key]:
            latest[key] = cand
    up = sum(1 for v in latest.values() if v[2] == "thumbs_up")
    down = sum(1 for v in latest.values() if v[2] == "thumbs_down")
    return {"thumbs_up": up, "thumbs_down": down, "effective_votes": up + down}


def feedback_rows(
    conn: Connection,
    tenant: str,
    *,
    trace_id: str | None = None,
    status: str | None = None,
    limit: int = 1000,
) -> list[dict[str, Any]]:
    """Feedback events of a tenant (``status``: linked | pending), newest first."""
    f = Feedback.__table__.c
    cond = [f.tenant == tenant]
    if trace_id is not None:
        cond.append(f.trace_id == trace_id)
    if status == "linked":
        cond.append(f.linked_at.is_not(None))
    elif status == "pending":
        cond.append(f.linked_at.is_(None))
    rows = conn.execute(
        select(Feedback.__table__)
        .where(and_(*cond))
        .order_by(f.timestamp_unix_nano.desc())
        .limit(limit)
    ).mappings()
    return [
        {
            "feedback_id": r["feedback_id"],
            "kind": r["kind"],
            "value": r["value"],
            "comment": r["comment"],
            "user_id": r["user_id"],
            "trace_id": r["trace_id"],
            "span_id": r["span_id"],
            "response_id": r["response_id"],
            "source": r["source"],
            "metadata": r["attributes"],
            "timestamp_unix_nano": r["timestamp_unix_nano"],
            "status": "linked" if r["linked_at"] is not None else "pending",
        }
        for r in rows
    ]


def votes_by_model(conn: Connection, tenant: str) -> dict[str, dict[str, int]]:
    """Effective votes per model over linked feedback; a trace-level vote counts once for
    each model called in that trace; pending (unlinked) feedback is excluded."""
    f = Feedback.__table__.c
    c = LLMCall.__table__.c
    fb = [
        dict(r)
        for r in conn.execute(
            select(Feedback.__table__).where(f.tenant == tenant, f.linked_at.is_not(None))
        ).mappings()
    ]
    traces = sorted({r["trace_id"] for r in fb if r["trace_id"]})
    models: dict[tuple[str, str | None], set[str]] = {}
    for i in range(0, len(traces), CHUNK):
        for row in conn.execute(
            select(c.trace_id, c.span_id, c.model).where(
                c.tenant == tenant, c.trace_id.in_(traces[i : i + CHUNK])
            )
        ):
            m = row.model or "unknown"
            models.setdefault((row.trace_id, row.span_id), set()).add(m)
            models.setdefault((row.trace_id, None), set()).add(m)
    per_model: dict[str, list[dict[str, Any]]] = {}
    for r in fb:
        for m in models.get((r["trace_id"], r["span_id"]), set()):
            per_model.setdefault(m, []).append(r)
    return {m: effective_votes(rows) for m, rows in per_model.items()}
