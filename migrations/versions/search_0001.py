"""search: full-text index over captured (redacted) call text

SQLite: an FTS5 external-content table ``llm_calls_fts`` over ``llm_calls`` (input_text,
output_text; rowid = llm_calls.rowid) kept in step by three triggers; the writer's upserts
keep rowids, so the index follows updates. A later batch ("move and copy") migration of
``llm_calls`` renumbers rowids and drops the triggers: it must recreate both and run
``INSERT INTO llm_calls_fts(llm_calls_fts) VALUES('rebuild')``.
PostgreSQL: a GIN index on ``to_tsvector('simple', input || ' ' || output)``; queries use the
same expression (``collector.store.search``).

Revision ID: search_0001
Revises: 0003
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import op

revision = "search_0001"
down_revision = "0003"
branch_labels = ("search",)
depends_on = None

PG_EXPR = "to_tsvector('simple', coalesce(input_text, '') || ' ' || coalesce(output_text, ''))"

_HAS_TEXT = "{r}.input_text IS NOT NULL OR {r}.output_text IS NOT NULL"
_ADD = (
    "INSERT INTO llm_calls_fts(rowid, input_text, output_text) "
    "SELECT new.rowid, new.input_text, new.output_text WHERE " + _HAS_TEXT.format(r="new") + ";"
)
_REMOVE = (
    "INSERT INTO llm_calls_fts(llm_calls_fts, rowid, input_text, output_text) "
    "SELECT 'delete', old.rowid, old.input_text, old.output_text WHERE "
    + _HAS_TEXT.format(r="old")
    + ";"
)


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute(
            "CREATE VIRTUAL TABLE llm_calls_fts USING fts5("
            "input_text, output_text, content='llm_calls', content_rowid='rowid')"
        )
        op.execute(f"CREATE TRIGGER llm_calls_fts_ai AFTER INSERT ON llm_calls BEGIN {_ADD} END")
        op.execute(f"CREATE TRIGGER llm_calls_fts_ad AFTER DELETE ON llm_calls BEGIN {_REMOVE} END")
        op.execute(
            "CREATE TRIGGER llm_calls_fts_au AFTER UPDATE OF input_text, output_text "
            "ON llm_calls WHEN old.input_text IS NOT new.input_text "
            f"OR old.output_text IS NOT new.output_text BEGIN {_REMOVE} {_ADD} END"
        )
        op.execute(
            "INSERT INTO llm_calls_fts(rowid, input_text, output_text) "
            "SELECT rowid, input_text, output_text FROM llm_calls "
            "WHERE input_text IS NOT NULL OR output_text IS NOT NULL"
        )
    else:
        op.execute(f"CREATE INDEX ix_llm_calls_search ON llm_calls USING gin ({PG_EXPR})")


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        for trig in ("llm_calls_fts_ai", "llm_calls_fts_ad", "llm_calls_fts_au"):
            op.execute(f"DROP TRIGGER IF EXISTS {trig}")
        op.execute("DROP TABLE IF EXISTS llm_calls_fts")
    else:
        op.execute("DROP INDEX IF EXISTS ix_llm_calls_search")
