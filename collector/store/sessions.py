"""Session queries: a session is the calls sharing a ``session_id`` (``gen_ai.conversation.id``
/ ``session.id``). A page of sessions with totals, and one session as a conversation.

Every function takes the tenant explicitly.
"""

from __future__ import annotations

import base64
from collections import defaultdict
from typing import Any

import orjson
from sqlalchemy import Connection, and_, case, func, or_, select, tuple_

from collector.store.models import LLMCall
from collector.store.models.api import Feedback
from collector.store.models.judges import JudgeResultRow
from collector.store.models.scores import ExternalScore
from collector.store.queries import (
    MAX_PAGE,
    call_to_dict,
    cursor_int,
    encode_cursor,
    iso_from_unix_nano,
)

#: calls returned by :func:`get_session` at most (oldest first)
MAX_SESSION_CALLS = 1000


def _decode_cursor(cursor: str) -> tuple[int, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        last, session_id = orjson.loads(raw)
        return cursor_int(last), str(session_id)
    except Exception:
        raise ValueError(f"invalid cursor {cursor[:64]!r}") from None


def _feedback_counts(
    conn: Connection, tenant: str, session_ids: list[str]
) -> dict[str, dict[str, int]]:
    """``{session_id: {kind: events}}`` of feedback linked to the sessions' calls."""
    c, f = LLMCall.__table__, Feedback.__table__
    q = (
        select(c.c.session_id, f.c.kind, func.count(func.distinct(f.c.feedback_id)))
        .select_from(
            c.join(
                f,
                and_(
                    f.c.tenant == c.c.tenant,
                    f.c.trace_id == c.c.trace_id,
                    or_(f.c.span_id.is_(None), f.c.span_id == c.c.span_id),
                ),
            )
        )
        .where(c.c.tenant == tenant, c.c.session_id.in_(session_ids))
        .group_by(c.c.session_id, f.c.kind)
    )
    out: dict[str, dict[str, int]] = defaultdict(dict)
    for sid, kind, n in conn.execute(q):
        out[sid][kind] = int(n)
    return out


def _judge_scores(
    conn: Connection, tenant: str, session_ids: list[str]
) -> dict[str, dict[str, dict[str, Any]]]:
    """``{session_id: {rubric: {"n": judged results, "mean_score": mean or None}}}``."""
    c, j = LLMCall.__table__, JudgeResultRow.__table__
    q = (
        select(c.c.session_id, j.c.rubric_name, func.count(), func.avg(j.c.score))
        .select_from(
            c.join(
                j,
                and_(
                    j.c.tenant == c.c.tenant,
                    j.c.trace_id == c.c.trace_id,
                    j.c.span_id == c.c.span_id,
                ),
            )
        )
        .where(c.c.tenant == tenant, c.c.session_id.in_(session_ids), j.c.status == "ok")
        .group_by(c.c.session_id, j.c.rubric_name)
    )
    out: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for sid, rubric, n, mean in conn.execute(q):
        out[sid][rubric] = {"n": int(n), "mean_score": float(mean) if mean is not None else None}
    return out


def _external_scores(
    conn: Connection, tenant: str, session_ids: list[str]
) -> dict[str, dict[str, dict[str, Any]]]:
    """``{session_id: {name: {"n", "mean_value"}}}`` of scores sent from outside, by the
    score's own ``session_id`` or its call's."""
    x = ExternalScore.__table__
    out: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for sid, name, n, mean in conn.execute(
        select(x.c.session_id, x.c.name, func.count(), func.avg(x.c.value))
        .where(x.c.tenant == tenant, x.c.session_id.in_(session_ids))
        .group_by(x.c.session_id, x.c.name)
    ):
        out[sid][name] = {"n": int(n), "mean_value": float(mean) if mean is not None else None}
    return out


def list_sessions(
    conn: Connection,
    tenant: str,
    *,
    session_id: str | None = None,
    user_id: str | None = None,
    since_unix_nano: int | None = None,
    until_unix_nano: int | None = None,
    limit: int = 50,
    cursor: str | None = None,
) -> tuple[list[dict[str, Any]], str | None]:
    """A page of sessions, most recently active first, and the next cursor.

    Each item: ``session_id``, ``calls``, ``traces``, ``users``, ``first_at`` / ``last_at``
    (ISO; plus ``*_unix_nano``), ``input_tokens``, ``output_tokens`` (tokens, None when all
    unknown), ``cost_usd`` (USD), ``errors``, ``feedback`` (``{kind: events}``) and
    ``judge_scores`` (``{rubric: {"n", "mean_score"}}`` over successful judge results) and
    ``external_scores`` (``{name: {"n", "mean_value"}}``, scores sent from outside).
    ``since`` / ``until`` select sessions whose last activity is in ``[since, until)``.

    Raises:
        ValueError: bad cursor or limit.
    """
    if not 1 <= limit <= MAX_PAGE:
        raise ValueError(f"limit must be between 1 and {MAX_PAGE}")
    c = LLMCall.__table__
    first = func.min(c.c.start_unix_nano)
    last = func.max(func.coalesce(c.c.end_unix_nano, c.c.start_unix_nano, 0))
    where = [c.c.tenant == tenant, c.c.session_id.is_not(None)]
    if user_id is not None:
        where.append(c.c.user_id == user_id)
    if session_id is not None:
        where.append(c.c.session_id == session_id)
    having = []
    if since_unix_nano is not None:
        having.append(last >= since_unix_nano)
    if until_unix_nano is not None:
        having.append(last < until_unix_nano)
    if cursor:
        cl, cs = _decode_cursor(cursor)
        having.append(tuple_(last, c.c.session_id) < tuple_(cl, cs))
    q = (
        select(
            c.c.session_id,
            func.count().label("calls"),
            func.count(func.distinct(c.c.trace_id)).label("traces"),
            func.count(func.distinct(c.c.user_id)).label("users"),
            first.label("first"),
            last.label("last"),
            func.sum(c.c.input_tokens).label("input_tokens"),
            func.sum(c.c.output_tokens).label("output_tokens"),
            func.sum(c.c.cost_usd).label("cost_usd"),
            func.sum(case((c.c.status == "error", 1), else_=0)).label("errors"),
        )
        .where(and_(*where))
        .group_by(c.c.session_id)
        .order_by(last.desc(), c.c.session_id.desc())
        .limit(limit + 1)
    )
    if having:
        q = q.having(and_(*having))
    rows = list(conn.execute(q).mappings())
    next_cursor = None
    if len(rows) > limit:
        rows = rows[:limit]
        next_cursor = encode_cursor((rows[-1]["last"], rows[-1]["session_id"]))
    ids = [r["session_id"] for r in rows]
    feedback = _feedback_counts(conn, tenant, ids) if ids else {}
    scores = _judge_scores(conn, tenant, ids) if ids else {}
    external = _external_scores(conn, tenant, ids) if ids else {}
    items = []
    for r in rows:
        sid = r["session_id"]
        items.append(
            {
                "session_id": sid,
                "calls": int(r["calls"]),
                "traces": int(r["traces"]),
                "users": int(r["users"]),
                "first_at": iso_from_unix_nano(r["first"]),
                "last_at": iso_from_unix_nano(r["last"]),
                "first_unix_nano": r["first"],
                "last_unix_nano": r["last"] or None,
                "input_tokens": None if r["input_tokens"] is None else int(r["input_tokens"]),
                "output_tokens": None if r["output_tokens"] is None else int(r["output_tokens"]),
                "cost_usd": None if r["cost_usd"] is None else float(r["cost_usd"]),
                "errors": int(r["errors"]),
                "feedback": feedback.get(sid, {}),
                "judge_scores": scores.get(sid, {}),
                "external_scores": external.get(sid, {}),
            }
        )
    return items, next_cursor


def get_session(conn: Connection, tenant: str, session_id: str) -> dict[str, Any] | None:
    """One session as a conversation: its summary (as in :func:`list_sessions`) and
    ``turns``, its calls oldest first (at most :data:`MAX_SESSION_CALLS`), each a call record
    plus its ``judge`` results (``[{rubric, score, label, explanation}]``). None if unknown."""
    c, j = LLMCall.__table__, JudgeResultRow.__table__
    rows = list(
        conn.execute(
            select(c)
            .where(c.c.tenant == tenant, c.c.session_id == session_id)
            .order_by(func.coalesce(c.c.start_unix_nano, 0), c.c.trace_id, c.c.span_id)
            .limit(MAX_SESSION_CALLS)
        ).mappings()
    )
    if not rows:
        return None
    judged: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for jr in conn.execute(
        select(j.c.trace_id, j.c.span_id, j.c.rubric_name, j.c.score, j.c.label, j.c.explanation)
        .join(
            c,
            and_(
                c.c.tenant == j.c.tenant, c.c.trace_id == j.c.trace_id, c.c.span_id == j.c.span_id
            ),
        )
        .where(j.c.tenant == tenant, c.c.session_id == session_id, j.c.status == "ok")
        .order_by(j.c.id)
    ).mappings():
        judged[(jr["trace_id"], jr["span_id"])].append(
            {k: jr[k] for k in ("rubric_name", "score", "label", "explanation")}
        )
    turns = []
    for r in rows:
        turn = call_to_dict(r)
        turn["judge"] = judged.get((r["trace_id"], r["span_id"]), [])
        turns.append(turn)
    (summary,), _ = list_sessions(conn, tenant, session_id=session_id, limit=1)
    return {**summary, "turns": turns, "truncated": len(rows) == MAX_SESSION_CALLS}
