"""Fast loading of a freshly migrated SQLite benchmark store (millions of synthetic calls).

The store must end exactly as the product's writer would leave it: the same rows (``rowid`` in
insertion order), every index, the full-text index of the captured texts and its triggers.
Only the way there is faster than the writer's per-batch upsert (``collector.store.bulk``):

* the secondary indexes of the loaded tables are dropped, and re-created from their own
  ``CREATE INDEX`` text (``sqlite_master.sql``) once the rows are in (one sort per index
  instead of a random B-tree insert per row; the primary key's index stays and is kept up as
  rows arrive);
* the ``llm_calls`` FTS5 triggers are dropped, the full-text index is filled after loading
  with the migration's own backfill statement (``migrations/versions/search_0001.py``: every
  row with an input or output text; the same predicate as the insert trigger), and the
  triggers are re-created from their own text;
* while loading: no rollback journal, ``synchronous=OFF``, a large page cache (an interrupted
  load leaves a broken file: the benchmarks then regenerate it, they never reuse a store whose
  row count is not exactly the one asked for); the file is switched back to WAL at the end.

On leaving, the schema (``type, name, tbl_name, sql`` of every ``sqlite_master`` row) is
compared with the one before, and ``PRAGMA integrity_check`` plus FTS5's own ``integrity-check``
must pass; otherwise :class:`RuntimeError`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: ``migrations/versions/search_0001.py``'s backfill of the full-text index
FTS_BACKFILL = (
    "INSERT INTO llm_calls_fts(rowid, input_text, output_text) "
    "SELECT rowid, input_text, output_text FROM llm_calls "
    "WHERE input_text IS NOT NULL OR output_text IS NOT NULL"
)


def schema(con: sqlite3.Connection) -> list[tuple[str, str, str, str | None]]:
    """Every ``sqlite_master`` row as ``(type, name, tbl_name, sql)``, sorted."""
    rows = con.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall()
    return sorted(rows, key=lambda r: (r[0], r[1]))


@contextmanager
def fast_load(
    path: Path, tables: tuple[str, ...] = ("llm_calls", "feedback"), cache_mb: int = 512
) -> Iterator[sqlite3.Connection]:
    """A ``sqlite3`` connection to the migrated store at ``path`` for bulk ``INSERT`` of new rows
    into ``tables`` (the caller commits; large transactions are fastest).

    Raises:
        RuntimeError: the schema after loading differs from the one before, or an integrity
            check fails.
    """
    con = sqlite3.connect(path, isolation_level=None)
    try:
        before = schema(con)
        marks = ", ".join("?" * len(tables))
        indexes = con.execute(
            f"SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL "
            f"AND tbl_name IN ({marks})",
            tables,
        ).fetchall()
        triggers = con.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'llm_calls'"
        ).fetchall()
        has_fts = any(r[1] == "llm_calls_fts" for r in before)
        con.execute("PRAGMA journal_mode=OFF")
        con.execute("PRAGMA synchronous=OFF")
        con.execute(f"PRAGMA cache_size=-{cache_mb * 1024}")
        con.execute("BEGIN")
        for name, _ in indexes:
            con.execute(f"DROP INDEX {name}")
        for name, _ in triggers:
            con.execute(f"DROP TRIGGER {name}")
        con.execute("COMMIT")
        yield con
        if con.in_transaction:
            con.execute("COMMIT")
        con.execute("BEGIN")
        for _, sql in indexes:
            con.execute(sql)
        if has_fts and triggers:
            con.execute(FTS_BACKFILL)
        for _, sql in triggers:
            con.execute(sql)
        con.execute("COMMIT")
        con.execute("PRAGMA journal_mode=WAL")
        after = schema(con)
        if after != before:
            raise RuntimeError(f"schema changed by the fast load: {set(before) ^ set(after)}")
        check = con.execute("PRAGMA integrity_check").fetchall()
        if check != [("ok",)]:
            raise RuntimeError(f"integrity_check after the fast load: {check[:5]}")
        if has_fts:
            con.execute("INSERT INTO llm_calls_fts(llm_calls_fts) VALUES ('integrity-check')")
    finally:
        con.close()
