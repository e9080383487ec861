"""Arrow reads of the store through ADBC (adbc-driver-sqlite / adbc-driver-postgresql).

The analytics path of DESIGN.md ("analytics read through ADBC into Arrow, then DuckDB"): SQL
with the row filters pushed down is run by the ADBC driver, the result arrives as a
``pyarrow.Table`` and is cast to a fixed schema derived from the SQLAlchemy tables, so DuckDB
always sees the same column types whatever the rows held (SQLite's driver infers a type per
result from its values; a column that is entirely NULL would otherwise come back as INT64).

Large time ranges are read in ``slices`` contiguous time slices on parallel connections (the
drivers release the GIL while stepping the statement), then concatenated.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sqlite3
import threading
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from sqlalchemy import JSON, BigInteger, Boolean, Float, Integer, Table
from sqlalchemy.engine import make_url

#: default number of parallel time slices for a large read
FETCH_SLICES = 4
#: SQLite's driver infers column types from the first batch: one batch (up to 1e8 rows, the
#: driver's limit is an int) gives every column one consistent type.
_SQLITE_BATCH_ROWS = str(100_000_000)


def arrow_type(column: Any) -> pa.DataType:
    """The Arrow type of a SQLAlchemy column (JSON travels as its text)."""
    t = column.type
    if isinstance(t, JSON):
        return pa.string()
    if isinstance(t, BigInteger | Integer):
        return pa.int64()
    if isinstance(t, Float):
        return pa.float64()
    if isinstance(t, Boolean):
        return pa.bool_()
    return pa.string()


def adbc_target(database_url: str) -> tuple[str, str]:
    """(dialect, driver URI) for a SQLAlchemy URL.

    ``sqlite:///path`` → ``("sqlite", "path")``;
    ``postgresql+psycopg://user:pw@host:port/db`` → ``("postgresql", "postgresql://...")``
    (a libpq URI, query parameters kept).

    Raises:
        ValueError: another dialect, or an in-memory SQLite database (not shareable).
    """
    url = make_url(database_url)
    backend = url.get_backend_name()
    if backend == "sqlite":
        db = url.database
        if not db or db == ":memory:":
            raise ValueError("database_url: an in-memory SQLite database cannot be read by ADBC")
        return "sqlite", db
    if backend == "postgresql":
        libpq = url.set(drivername="postgresql")
        return "postgresql", libpq.render_as_string(hide_password=False)
    raise ValueError(f"database_url: sqlite or postgresql expected, got {backend!r}")


_SQLITE_POOL: dict[tuple[int, str], list[Any]] = {}
_POOL_LOCK = threading.Lock()


@atexit.register
def _close_pool() -> None:
    """Close pooled read-only connections at interpreter exit (before module teardown)."""
    with _POOL_LOCK:
        for key, conns in list(_SQLITE_POOL.items()):
            if key[0] == os.getpid():
                for conn in conns:
                    with contextlib.suppress(Exception):
                        conn.close()
            conns.clear()


def _open_sqlite(path: str) -> Any:
    import adbc_driver_sqlite.dbapi as sqlite_dbapi

    # Read-only and never closed. ADBC links its own copy of SQLite: closing one of its
    # connections would drop the POSIX locks that Python's sqlite3 (the writer) holds on the
    # same file in this process, and a read-write copy that believes it is the last
    # connection checkpoints and deletes the WAL under the writer ("disk I/O error").
    # A read-only fd can take no write lock, so it never does that; keeping it open for the
    # process's life means no close() ever releases the writer's locks.
    uri = f"file:{urllib.parse.quote(os.path.abspath(path))}?mode=ro"
    conn = sqlite_dbapi.connect(uri, autocommit=True)  # autocommit: each query sees new rows
    cur = conn.cursor()
    # Wait for a lock held by the writer (WAL checkpoint, -shm set-up) instead of failing.
    cur.execute("PRAGMA busy_timeout = 30000")
    cur.fetchall()
    cur.close()
    return conn


@contextmanager
def connect(database_url: str) -> Iterator[Any]:
    """An ADBC DB-API connection to the store at ``database_url`` (see :func:`adbc_target`):
    PostgreSQL opens and closes one; SQLite lends a pooled read-only connection."""
    dialect, uri = adbc_target(database_url)
    if dialect != "sqlite":
        import adbc_driver_postgresql.dbapi as pg_dbapi

        with pg_dbapi.connect(uri) as conn:
            yield conn
        return
    key = (os.getpid(), os.path.abspath(uri))
    with _POOL_LOCK:
        free = _SQLITE_POOL.setdefault(key, [])
        conn = free.pop() if free else None
    if conn is None:
        conn = _open_sqlite(uri)
    try:
        yield conn
    finally:
        with _POOL_LOCK:
            _SQLITE_POOL[key].append(conn)


@dataclass
class SqlBuilder:
    """Collects bind parameters with the placeholder style of the dialect (``?`` / ``$n``)."""

    dialect: str
    params: list[Any] = field(default_factory=list)

    def param(self, value: Any) -> str:
        self.params.append(value)
        return "?" if self.dialect == "sqlite" else f"${len(self.params)}"


def _sqlite_rows(path: str, sql: str, params: Sequence[Any], schema: pa.Schema) -> pa.Table:
    """SQLite read through Python's own ``sqlite3`` (the library the writer uses).

    ADBC's SQLite driver links a second copy of SQLite. Two copies in one process do not see
    each other's POSIX locks, so one may checkpoint, delete the WAL or truncate the shared-memory
    index while the other has it mapped: seen here as "disk I/O error" and as SIGBUS crashes.
    Until the collector reads SQLite from a separate process, in-process SQLite reads use the
    writer's library; PostgreSQL reads use ADBC.
    """
    uri = f"file:{urllib.parse.quote(os.path.abspath(path))}?mode=ro"
    conn = sqlite3.connect(uri, uri=True, timeout=30, check_same_thread=False)
    try:
        rows = conn.execute(sql, list(params)).fetchall()
    finally:
        conn.close()
    columns = list(zip(*rows, strict=True)) if rows else [() for _ in schema]
    arrays = [
        pa.array(list(col), type=f.type) if not col else _column(list(col), f.type)
        for col, f in zip(columns, schema, strict=True)
    ]
    return pa.Table.from_arrays(arrays, schema=schema)


def _column(values: list[Any], typ: pa.DataType) -> pa.Array:
    """``values`` as ``typ``; SQLite's dynamic types (0/1 for booleans, ints in REAL columns)
    are converted through Arrow's inference and a cast."""
    try:
        return pa.array(values, type=typ)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array(values).cast(typ)


def run_query(database_url: str, sql: str, params: Sequence[Any], schema: pa.Schema) -> pa.Table:
    """Run one ``SELECT`` and return its rows as Arrow cast to ``schema`` (column order of the
    SELECT must match the schema's): ADBC for PostgreSQL, the writer's SQLite library for
    SQLite (see :func:`_sqlite_rows`)."""
    dialect, target = adbc_target(database_url)
    if dialect == "sqlite":
        return _sqlite_rows(target, sql, params, schema)
    with connect(database_url) as conn:
        cur = conn.cursor()
        try:
            cur.execute(sql, parameters=list(params) if params else None)
            table: pa.Table = cur.fetch_arrow_table()
        finally:
            cur.close()
    return conform(table, schema)


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` with the names and types of ``schema`` (all-NULL columns of any type cast)."""
    arrays = []
    for i, f in enumerate(schema):
        col = table.column(i)
        if col.type != f.type:
            col = pa.nulls(len(col), f.type) if col.null_count == len(col) else col.cast(f.type)
        arrays.append(col)
    return pa.Table.from_arrays(arrays, schema=schema)


def time_slices(since_ns: int, until_ns: int, slices: int) -> list[tuple[int, int]]:
    """``slices`` contiguous half-open ranges covering ``[since_ns, until_ns)``."""
    n = max(1, min(slices, until_ns - since_ns))
    edges = [since_ns + (until_ns - since_ns) * k // n for k in range(n + 1)]
    return [(edges[k], edges[k + 1]) for k in range(n) if edges[k] < edges[k + 1]]


#: a read window: (since_ns, until_ns) with None for an open side, or None for "start unknown"
Window = tuple[int | None, int | None] | None


def fetch_windows(
    database_url: str,
    build: Callable[[SqlBuilder, Window], str],
    schema: pa.Schema,
    windows: Sequence[Window],
) -> pa.Table:
    """Run ``build(sql, window)`` for every window (in parallel when several) and concatenate
    the results in window order."""
    dialect, _ = adbc_target(database_url)

    def one(window: Window) -> pa.Table:
        b = SqlBuilder(dialect)
        sql = build(b, window)
        return run_query(database_url, sql, b.params, schema)

    if len(windows) == 1:
        return one(windows[0])
    with ThreadPoolExecutor(max_workers=len(windows), thread_name_prefix="adbc-fetch") as pool:
        parts = list(pool.map(one, windows))
    return pa.concat_tables(parts)


def column_schema(table: Table, names: Sequence[str]) -> list[pa.Field]:
    """Arrow fields of ``names`` in ``table``."""
    return [pa.field(n, arrow_type(table.c[n])) for n in names]
