"""Fast write paths and the write-path lookups of the span writer.

SQLite: ``executemany`` with plain tuples and ``INSERT .. ON CONFLICT DO UPDATE``; ``llm_calls``
(FTS5 triggers) through a temporary staging table and one ``INSERT .. SELECT`` (see
:data:`SQLITE_STAGED`).
PostgreSQL: binary ``COPY`` into a temporary staging table, then one
``INSERT .. SELECT .. ON CONFLICT DO UPDATE`` (idempotent on the primary key).
Column lists come from the SQLAlchemy tables, so the SQL never drifts from ``models.py``.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from typing import Any, cast

import orjson
from psycopg.types.json import Jsonb
from sqlalchemy import JSON, BigInteger, Connection, Float, Integer, Table, select

from collector.store.models import LLMCall, Span
from collector.store.schema import SpanData

SPANS = cast(Table, Span.__table__)
CALLS = cast(Table, LLMCall.__table__)

CHUNK = 500  # ids per IN (...) list

#: SQLite tables written through a staging table (one ``INSERT .. SELECT`` per batch) instead of
#: a row-at-a-time ``executemany``: ``llm_calls`` has the FTS5 triggers (``search_0001``), and
#: SQLite 3.40's FTS5 flushes its pending terms to a new index segment at every statement
#: savepoint, i.e. once per row of an ``executemany`` whose trigger writes the FTS table. One
#: statement per batch flushes once: the same rows and index, ~90 us less CPU per call
#: (``benchmarks/ingest_cpu.py``, 800 calls per transaction into a 20k-call store).
SQLITE_STAGED = frozenset({"llm_calls"})


#: ``_null(None) is None``: ``dict.get`` of an empty dict, a C function (no Python frame)
_null = cast(Callable[[None], None], {}.get)

# Python's sqlite3 binds a None parameter as NULL only after looking for an adapter, and the
# failed ``PrepareProtocol.__adapt__`` lookup on the way formats an AttributeError message for
# every None (a span's call row has ~20). Registering the identity adapter for None finds it in
# the adapter table first: the same NULL, 9.4 -> 5.8 us per 46-column row with 23 NULLs.
sqlite3.register_adapter(type(None), _null)


def _dumps(obj: Any) -> str:
    return orjson.dumps(obj, option=orjson.OPT_NON_STR_KEYS).decode()


def _pg_json_dumps(obj: Any) -> str:
    # PostgreSQL text and jsonb cannot hold NUL; replace it rather than fail the whole batch.
    return _dumps(obj).replace("\\u0000", "\\ufffd")


def _is_json(col: Any) -> bool:
    return isinstance(col.type, JSON)


def _pg_type(col: Any) -> str:
    t = col.type
    if isinstance(t, JSON):
        return "jsonb"
    if isinstance(t, BigInteger):
        return "int8"
    if isinstance(t, Integer):
        return "int4"
    if isinstance(t, Float):
        return "float8"
    return "text"


def column_bound(col: Any) -> int | None:
    """The most characters a text column keeps: ``info["max_chars"]`` (a ``Text`` column in an
    index) or its varchar length; None when unbounded. The one definition of each bound is
    the column's, in :mod:`collector.store.models`."""
    bound = col.info.get("max_chars") or getattr(col.type, "length", None)
    return int(bound) if bound else None


@functools.cache
def text_bounds(table: Table, indexed_only: bool) -> tuple[tuple[int, int, str], ...]:
    """``(column position, max characters, cut marker)`` of ``table``'s bounded text columns;
    with ``indexed_only``, only those in an index or the primary key.

    Every store cuts the indexed ones (a btree row over 2,704 bytes fails a PostgreSQL COPY
    and with it every span of the batch; SQLite cuts the same, so both stores keep the same
    value); PostgreSQL also cuts the other varchar(n) columns, which it would refuse."""
    indexed = {c.name for ix in table.indexes for c in ix.columns}
    indexed |= {c.name for c in table.primary_key.columns}
    out = []
    for i, col in enumerate(table.columns):
        if _pg_type(col) != "text" or (bound := column_bound(col)) is None:
            continue
        if indexed_only and col.name not in indexed:
            continue
        out.append((i, bound, str(col.info.get("cut_marker", ""))))
    return tuple(out)


def cut(value: Any, bound: int, marker: str = "") -> Any:
    """``value`` cut to ``bound`` characters, the last of them ``marker`` when one is given;
    anything that is not a str that long is returned as it is."""
    if not isinstance(value, str) or len(value) <= bound:
        return value
    return value[: bound - len(marker)] + marker


def _bounded(
    rows: Sequence[Sequence[Any]], bounds: tuple[tuple[int, int, str], ...]
) -> Sequence[Sequence[Any]]:
    """``rows`` with every value of ``bounds``' columns cut (rows within bounds unchanged)."""
    out: list[Sequence[Any]] | None = None
    for k, row in enumerate(rows):
        if any(isinstance(row[i], str) and len(row[i]) > n for i, n, _ in bounds):
            r = list(row)
            for i, n, mark in bounds:
                r[i] = cut(r[i], n, mark)
            out = out if out is not None else list(rows)
            out[k] = tuple(r)
    return rows if out is None else out


def upsert(conn: Connection, table: Table, rows: Sequence[Sequence[Any]]) -> None:
    """Insert ``rows`` (tuples in ``table.columns`` order) or update them on key conflict.

    Rows must have unique primary keys within one call (PostgreSQL refuses to update a row
    twice in one statement).
    """
    if not rows:
        return
    cols = list(table.columns)
    names = [c.name for c in cols]
    keys = [c.name for c in table.primary_key.columns]
    updates = ", ".join(f"{n} = excluded.{n}" for n in names if n not in keys)
    col_list = ", ".join(names)
    json_idx = [i for i, c in enumerate(cols) if _is_json(c)]
    if conn.dialect.name == "postgresql":  # cuts every bounded column itself
        _pg_copy_upsert(conn, table, rows, names, keys, updates, json_idx, cols)
        return
    rows = _bounded(rows, text_bounds(table, True))
    conflict = f"ON CONFLICT ({', '.join(keys)}) DO UPDATE SET {updates}"
    values = f"VALUES ({', '.join('?' * len(names))})"
    if json_idx:
        dumps, option = orjson.dumps, orjson.OPT_NON_STR_KEYS  # _dumps, inlined
        fixed: list[tuple[Any, ...]] = []
        for row in rows:
            r = list(row)
            for i in json_idx:
                v = r[i]
                if v is not None:
                    r[i] = dumps(v, option=option).decode()
            fixed.append(tuple(r))
        rows = fixed
    if table.name not in SQLITE_STAGED:
        conn.exec_driver_sql(
            f"INSERT INTO {table.name} ({col_list}) {values} {conflict}", list(rows)
        )
        return
    stage = f"temp._stage_{table.name}"
    conn.exec_driver_sql(
        f"CREATE TEMP TABLE IF NOT EXISTS _stage_{table.name} AS SELECT * FROM {table.name} WHERE 0"
    )
    conn.exec_driver_sql(f"INSERT INTO {stage} ({col_list}) {values}", list(rows))
    # ``WHERE true``: without it SQLite would parse ON CONFLICT as a join constraint
    conn.exec_driver_sql(
        f"INSERT INTO {table.name} ({col_list}) "
        f"SELECT {col_list} FROM {stage} WHERE true {conflict}"
    )
    conn.exec_driver_sql(f"DELETE FROM {stage}")


def _pg_copy_upsert(
    conn: Connection,
    table: Table,
    rows: Sequence[Sequence[Any]],
    names: list[str],
    keys: list[str],
    updates: str,
    json_idx: list[int],
    cols: list[Any],
) -> None:
    raw = conn.connection.driver_connection
    stage = f"_stage_{table.name}"
    col_list = ", ".join(names)
    text_idx = [i for i, c in enumerate(cols) if _pg_type(c) == "text"]
    # PostgreSQL refuses a value longer than its varchar(n), or a btree index row over 2,704
    # bytes, and fails the whole COPY (every span of the batch): such a value (a user or
    # session id, a model name of 300 characters, a 6,000-character service name) is cut to
    # its bound (text_bounds); SQLite cuts only the indexed ones and keeps the others whole
    limits = {i: (n, mark) for i, n, mark in text_bounds(table, False)}
    with raw.cursor() as cur:  # type: ignore[union-attr]
        cur.execute(
            f"CREATE TEMP TABLE IF NOT EXISTS {stage} "
            f"(LIKE {table.name} INCLUDING DEFAULTS) ON COMMIT DELETE ROWS"
        )
        with cur.copy(f"COPY {stage} ({col_list}) FROM STDIN (FORMAT BINARY)") as cp:
            cp.set_types([_pg_type(c) for c in cols])
            for row in rows:
                r = list(row)
                for i in json_idx:
                    if r[i] is not None:
                        r[i] = Jsonb(r[i], dumps=_pg_json_dumps)
                for i in text_idx:
                    v = r[i]
                    if isinstance(v, str):
                        if "\x00" in v:
                            v = v.replace("\x00", "\ufffd")
                        if i in limits:
                            v = cut(v, *limits[i])
                        r[i] = v
                cp.write_row(r)
        cur.execute(
            f"INSERT INTO {table.name} ({col_list}) SELECT {col_list} FROM {stage} "
            f"ON CONFLICT ({', '.join(keys)}) DO UPDATE SET {updates}"
        )
        cur.execute(f"DELETE FROM {stage}")


def delete_calls(conn: Connection, tenant: str, keys: Iterable[tuple[str, str]]) -> None:
    """Delete ``llm_calls`` rows by (trace_id, span_id) (engine calls merged into a parent)."""
    t = CALLS
    for trace_id, span_id in keys:
        conn.execute(
            t.delete().where(t.c.tenant == tenant, t.c.trace_id == trace_id, t.c.span_id == span_id)
        )


def llm_span_index(
    conn: Connection, tenant: str, trace_ids: Iterable[str]
) -> list[tuple[str, str, str | None, str]]:
    """(trace_id, span_id, parent_span_id, llm_role) of stored LLM spans in these traces.

    Plain driver SQL: the writer runs this for every batch, and building and compiling the
    ``IN`` of up to 500 ids through SQLAlchemy cost more than the index lookups themselves.
    """
    ids = sorted(set(trace_ids))
    mark = "%s" if conn.dialect.paramstyle in ("format", "pyformat") else "?"
    out: list[tuple[str, str, str | None, str]] = []
    for i in range(0, len(ids), CHUNK):
        chunk = ids[i : i + CHUNK]
        sql = (
            f"SELECT trace_id, span_id, parent_span_id, llm_role FROM {SPANS.name} "
            f"WHERE tenant = {mark} AND trace_id IN ({', '.join([mark] * len(chunk))}) "
            "AND llm_role IS NOT NULL"
        )
        out.extend((r[0], r[1], r[2], r[3]) for r in conn.exec_driver_sql(sql, (tenant, *chunk)))
    return out


def load_spans(
    conn: Connection, tenant: str, keys: Iterable[tuple[str, str]]
) -> dict[tuple[str, str], SpanData]:
    """Stored spans rebuilt as :class:`SpanData`, by (trace_id, span_id)."""
    t = SPANS
    out: dict[tuple[str, str], SpanData] = {}
    for trace_id, span_id in keys:
        row = (
            conn.execute(
                select(t).where(
                    t.c.tenant == tenant, t.c.trace_id == trace_id, t.c.span_id == span_id
                )
            )
            .mappings()
            .first()
        )
        if row is None:
            continue
        out[(trace_id, span_id)] = span_from_row(row)
    return out


def span_from_row(row: Any) -> SpanData:
    """A ``spans`` row (mapping) as :class:`SpanData`."""
    return SpanData(
        trace_id=row["trace_id"],
        span_id=row["span_id"],
        parent_span_id=row["parent_span_id"],
        name=row["name"],
        kind=row["kind"],
        start_unix_nano=row["start_unix_nano"],
        end_unix_nano=row["end_unix_nano"],
        status_code=row["status_code"],
        status_message=row["status_message"],
        attributes=row["attributes"] or {},
        events=row["events"] or [],
        links=row["links"] or [],
        resource_attributes=row["resource_attributes"] or {},
        scope_name=row["scope_name"],
        scope_version=row["scope_version"],
    )
