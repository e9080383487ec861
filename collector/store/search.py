"""Full-text search over captured (redacted) call text: ``q=`` on the calls list.

The index is made by migration ``search_0001``: on SQLite an FTS5 external-content table
``llm_calls_fts`` (tokenizer ``unicode61``) kept in step by triggers; on PostgreSQL a GIN
index on ``to_tsvector('simple', input || ' ' || output)``, of the first
:data:`PG_SEARCH_CHARS` characters of each (``search_0003``). Both match calls containing every
word of the query (case-insensitive, whole words; no stemming, so languages are treated alike).
Only what was stored is searchable: text is redacted before it is written, so a redacted
e-mail address cannot be found by its value.
"""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import ColumnElement, bindparam, literal_column, text

#: tables the ORM does not model (the SQLite FTS5 table and its shadow tables)
UNMODELLED_TABLES = frozenset(
    {"llm_calls_fts"}
    | {f"llm_calls_fts_{s}" for s in ("data", "idx", "content", "docsize", "config")}
)
#: indexes the ORM does not model (the PostgreSQL GIN expression index)
UNMODELLED_INDEXES = frozenset({"ix_llm_calls_search"})
#: characters of each text (input, output) PostgreSQL's index covers (migration
#: ``search_0003``): a tsvector over 1,048,575 bytes fails the write of the whole batch, and
#: 2 x 80,000 characters stay under it whatever the words (960,008 bytes at worst, measured)
PG_SEARCH_CHARS = 80_000
#: the indexed PostgreSQL expression; queries must spell it exactly so the index is used
PG_DOCUMENT = (
    f"to_tsvector('simple', left(coalesce(llm_calls.input_text, ''), {PG_SEARCH_CHARS}) || ' ' "
    f"|| left(coalesce(llm_calls.output_text, ''), {PG_SEARCH_CHARS}))"
)
MAX_QUERY_CHARS = 500
_WORD = re.compile(r"\w+", re.UNICODE)


def include_name(name: str | None, type_: str, _parent: Any) -> bool:
    """alembic ``include_name`` hook: skip the unmodelled search objects when comparing."""
    if type_ == "table":
        return name not in UNMODELLED_TABLES
    return not (type_ == "index" and name in UNMODELLED_INDEXES)


def words(q: str) -> list[str]:
    """The words of a search query (``\\w+`` runs), lowercased.

    Raises:
        ValueError: empty, longer than :data:`MAX_QUERY_CHARS`, or without any word.
    """
    if len(q) > MAX_QUERY_CHARS:
        raise ValueError(f"q must be at most {MAX_QUERY_CHARS} characters, got {len(q)}")
    found = [w.lower() for w in _WORD.findall(q)]
    if not found:
        raise ValueError(f"q must contain at least one word, got {q!r}")
    return found


def match_condition(dialect: str, q: str) -> ColumnElement[bool]:
    """A WHERE condition on ``llm_calls`` (unaliased) true for calls whose input or output
    text contains every word of ``q``.

    Raises:
        ValueError: see :func:`words`.
    """
    ws = words(q)
    if dialect == "sqlite":
        # each word a quoted FTS5 string: user text never reaches the FTS5 query syntax
        fts_query = " ".join('"' + w.replace('"', '""') + '"' for w in ws)
        sub = text("SELECT rowid FROM llm_calls_fts WHERE llm_calls_fts MATCH :fts_q").bindparams(
            bindparam("fts_q", fts_query)
        )
        return literal_column("llm_calls.rowid").in_(sub.columns(literal_column("rowid")))
    cond: ColumnElement[bool] = text(
        f"{PG_DOCUMENT} @@ plainto_tsquery('simple', :ts_q)"
    ).bindparams(bindparam("ts_q", " ".join(ws)))  # type: ignore[assignment]
    return cond
