"""search: the PostgreSQL full-text index covers the first 80,000 characters of each text

``to_tsvector`` fails past 1,048,575 bytes ("string is too long for tsvector"), and with it the
COPY of the whole batch: a call with 1.1 MB of distinct words in its captured texts (under the
1,000,000-character stored limit per text) lost every span of its request. The index
expression now reads ``left(text, 80000)`` of input and output: at most 160,000 characters,
whose tsvector is under 1 MB whatever the words (worst case, one distinct 4-byte letter per
word: 12 bytes per 2 characters, 960,008 bytes measured). Queries spell the same expression
(``collector.store.search.PG_DOCUMENT``). SQLite's FTS5 has no such limit and is unchanged.

Revision ID: search_0003
Revises: search_0002
Create Date: 2026-12-06
"""

from __future__ import annotations

from alembic import op

revision = "search_0003"
down_revision = "search_0002"
branch_labels = None
depends_on = None

CHARS = 80_000
BOUNDED = (
    f"to_tsvector('simple', left(coalesce(input_text, ''), {CHARS}) || ' ' "
    f"|| left(coalesce(output_text, ''), {CHARS}))"
)
WHOLE = "to_tsvector('simple', coalesce(input_text, '') || ' ' || coalesce(output_text, ''))"


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP INDEX IF EXISTS ix_llm_calls_search")
        op.execute(f"CREATE INDEX ix_llm_calls_search ON llm_calls USING gin ({BOUNDED})")


def downgrade() -> None:
    # the unbounded index again: fails, as search_0001 would, should a stored call exceed it
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP INDEX IF EXISTS ix_llm_calls_search")
        op.execute(f"CREATE INDEX ix_llm_calls_search ON llm_calls USING gin ({WHOLE})")
