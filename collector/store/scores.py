"""External scores: idempotent insert and listing (table ``external_scores``)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, and_, insert, or_, select

from collector.store.models import LLMCall
from collector.store.models.scores import ExternalScore
from collector.store.queries import MAX_PAGE, decode_cursor, encode_cursor, iso_from_unix_nano

COLUMNS = tuple(c.name for c in ExternalScore.__table__.columns if c.name != "created_at")


def link(conn: Connection, tenant: str, row: dict[str, Any]) -> dict[str, Any]:
    """Fill ``trace_id``/``span_id``/``session_id`` of a score from its call when known
    (by ``trace_id`` + ``span_id``, or by ``response_id``)."""
    c = LLMCall.__table__
    cond = None
    if row.get("trace_id") and row.get("span_id"):
        cond = and_(c.c.trace_id == row["trace_id"], c.c.span_id == row["span_id"])
    elif row.get("response_id") and not row.get("trace_id"):
        cond = or_(c.c.response_id == row["response_id"], c.c.call_id == row["response_id"])
    if cond is None:
        return row
    found = conn.execute(
        select(c.c.trace_id, c.c.span_id, c.c.session_id).where(c.c.tenant == tenant, cond).limit(1)
    ).first()
    if found is not None:
        row = {**row, "trace_id": found.trace_id, "span_id": found.span_id}
        row["session_id"] = row.get("session_id") or found.session_id
    return row


def insert_scores(conn: Connection, tenant: str, rows: list[dict[str, Any]]) -> list[bool]:
    """Insert scores (dicts with the table's columns); per row True when it was new, False
    when ``score_id`` was already stored (the stored score is kept: idempotent retries)."""
    t = ExternalScore.__table__
    ids = [r["score_id"] for r in rows]
    existing = set(
        conn.execute(
            select(t.c.score_id).where(t.c.tenant == tenant, t.c.score_id.in_(ids))
        ).scalars()
    )
    out = []
    seen: set[str] = set()
    for r in rows:
        new = r["score_id"] not in existing and r["score_id"] not in seen
        seen.add(r["score_id"])
        if new:
            conn.execute(
                insert(ExternalScore).values({**{k: r.get(k) for k in COLUMNS}, "tenant": tenant})
            )
        out.append(new)
    return out


def list_scores(
    conn: Connection,
    tenant: str,
    *,
    trace_id: str | None = None,
    name: str | None = None,
    session_id: str | None = None,
    limit: int = 100,
    cursor: str | None = None,
) -> tuple[list[dict[str, Any]], str | None]:
    """A page of scores, newest first. Raises ValueError on a bad cursor or limit."""
    if not 1 <= limit <= MAX_PAGE:
        raise ValueError(f"limit must be between 1 and {MAX_PAGE}")
    t = ExternalScore.__table__
    conds = [t.c.tenant == tenant]
    for col, v in ((t.c.trace_id, trace_id), (t.c.name, name), (t.c.session_id, session_id)):
        if v is not None:
            conds.append(col == v)
    if cursor:
        ts, _, sid = decode_cursor(cursor)
        conds.append(
            or_(
                t.c.timestamp_unix_nano < ts,
                and_(t.c.timestamp_unix_nano == ts, t.c.score_id < sid),
            )
        )
    rows = list(
        conn.execute(
            select(t)
            .where(and_(*conds))
            .order_by(t.c.timestamp_unix_nano.desc(), t.c.score_id.desc())
            .limit(limit + 1)
        ).mappings()
    )
    nxt = None
    if len(rows) > limit:
        rows = rows[:limit]
        nxt = encode_cursor((rows[-1]["timestamp_unix_nano"], "", rows[-1]["score_id"]))
    items = []
    for r in rows:
        d = {k: r[k] for k in COLUMNS if k != "tenant"}
        d["timestamp"] = iso_from_unix_nano(r["timestamp_unix_nano"])
        items.append(d)
    return items, nxt
