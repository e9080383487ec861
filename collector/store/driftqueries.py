"""Reads and writes of the drift tables (``drift_runs``, ``drift_results``).

The drift monitor (``drift/runs.py``) writes through :func:`insert_run`, :func:`finish_run`
and :func:`insert_results`; the REST API (``driftline/api/drift.py``) and the dashboard read
through :func:`list_runs` and :func:`get_run`. Times in the returned dicts: ISO 8601 UTC for wall
times, unix seconds (float) for window bounds, as DESIGN.md's REST conventions.
"""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any, cast

from sqlalchemy import Connection, Table, and_, insert, or_, select, update

from collector.store.models.drift import DriftResultRow, DriftRun

RUNS = cast(Table, DriftRun.__table__)
RESULTS = cast(Table, DriftResultRow.__table__)
MAX_PAGE = 500
_WINDOW_COLUMNS = (
    "reference_start_unix_nano",
    "reference_end_unix_nano",
    "current_start_unix_nano",
    "current_end_unix_nano",
)


def insert_run(conn: Connection, values: Mapping[str, Any]) -> None:
    """Insert one ``drift_runs`` row (column → value)."""
    conn.execute(insert(RUNS).values(**values))


def finish_run(conn: Connection, tenant: str, run_id: str, values: Mapping[str, Any]) -> None:
    """Update the run's summary columns (status, counts, finished_at, ...)."""
    conn.execute(
        update(RUNS).where(RUNS.c.tenant == tenant, RUNS.c.run_id == run_id).values(**values)
    )


def insert_results(conn: Connection, rows: Sequence[Mapping[str, Any]]) -> None:
    """Insert ``drift_results`` rows (executemany)."""
    if rows:
        conn.execute(insert(RESULTS), list(rows))


def _encode_cursor(started: dt.datetime, run_id: str) -> str:
    raw = f"{started.isoformat()}|{run_id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_cursor(cursor: str) -> tuple[dt.datetime, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        started, run_id = raw.split("|", 1)
        return dt.datetime.fromisoformat(started), run_id
    except (ValueError, UnicodeDecodeError):
        raise ValueError(f"cursor: invalid cursor {cursor!r}") from None


def run_to_dict(row: Mapping[str, Any]) -> dict[str, Any]:
    """A ``drift_runs`` row as the API shows it (window bounds in unix seconds)."""
    out = {k: v for k, v in row.items() if k not in _WINDOW_COLUMNS}
    for key in ("started_at", "finished_at"):
        out[key] = None if row[key] is None else row[key].isoformat()
    out["reference"] = {
        "kind": row["reference_kind"],
        "label": row["reference_label"],
        "start_s": row["reference_start_unix_nano"] / 1e9,
        "end_s": row["reference_end_unix_nano"] / 1e9,
    }
    out["current"] = {
        "start_s": row["current_start_unix_nano"] / 1e9,
        "end_s": row["current_end_unix_nano"] / 1e9,
    }
    return out


def list_runs(
    conn: Connection, tenant: str, *, limit: int = 50, cursor: str | None = None
) -> tuple[list[dict[str, Any]], str | None]:
    """A page of the tenant's runs, newest first, and the next page's cursor (None at the end).

    Raises:
        ValueError: bad ``limit`` (1..MAX_PAGE) or ``cursor``.
    """
    if not 1 <= limit <= MAX_PAGE:
        raise ValueError(f"limit must be in 1..{MAX_PAGE}, got {limit!r}")
    q = select(RUNS).where(RUNS.c.tenant == tenant)
    if cursor:
        started, run_id = _decode_cursor(cursor)
        q = q.where(
            or_(
                RUNS.c.started_at < started,
                and_(RUNS.c.started_at == started, RUNS.c.run_id < run_id),
            )
        )
    rows = conn.execute(
        q.order_by(RUNS.c.started_at.desc(), RUNS.c.run_id.desc()).limit(limit + 1)
    ).mappings()
    items = [dict(r) for r in rows]
    nxt = None
    if len(items) > limit:
        items = items[:limit]
        nxt = _encode_cursor(items[-1]["started_at"], items[-1]["run_id"])
    return [run_to_dict(r) for r in items], nxt


def get_run(
    conn: Connection, tenant: str, run_id: str, *, drifted_only: bool = False
) -> dict[str, Any] | None:
    """One run with its results (in test order, histograms included), or None if absent."""
    row = (
        conn.execute(select(RUNS).where(RUNS.c.tenant == tenant, RUNS.c.run_id == run_id))
        .mappings()
        .first()
    )
    if row is None:
        return None
    q = select(RESULTS).where(RESULTS.c.tenant == tenant, RESULTS.c.run_id == run_id)
    if drifted_only:
        q = q.where(RESULTS.c.drifted.is_(True))
    results = [
        {k: v for k, v in r.items() if k not in ("tenant", "run_id")}
        for r in conn.execute(q.order_by(RESULTS.c.seq)).mappings()
    ]
    out = run_to_dict(dict(row))
    out["results"] = results
    return out


def previously_drifted(conn: Connection, tenant: str, run_id: str) -> set[tuple[str, str | None]]:
    """(signal, segment) pairs that drifted in the tenant's latest ``ok`` run before ``run_id``."""
    prev = conn.execute(
        select(RUNS.c.run_id)
        .where(RUNS.c.tenant == tenant, RUNS.c.status == "ok", RUNS.c.run_id != run_id)
        .order_by(RUNS.c.started_at.desc())
        .limit(1)
    ).scalar()
    if prev is None:
        return set()
    rows = conn.execute(
        select(RESULTS.c.signal, RESULTS.c.segment).where(
            RESULTS.c.tenant == tenant, RESULTS.c.run_id == prev, RESULTS.c.drifted.is_(True)
        )
    )
    return {(r.signal, r.segment) for r in rows}
