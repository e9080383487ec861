"""What counts as a usable judge score: one rule, in Python and as SQL.

A stored judge attempt (``judge_results``) is a *usable score* when the judge answered
(``status = 'ok'``: not a failure, parse error or refusal of the judge model, which are stored
with ``status = 'failed'`` and no score) **and** it gave a number (``score`` not NULL: an
"unknown" verdict or a label-only rubric has none). Every reader of judge scores — the judges'
own quality and export queries, drift's judge-score signal, the canary's judge metric, the
``gen_ai.evaluation.result`` attributes — uses this module, so the rule is written once:

* :func:`is_usable_score` for a row already in Python;
* :func:`usable_score` for a SQLAlchemy query over ``judge_results`` (or an alias of it);
* :func:`usable_score_sql` for the hand-written SQL of the ADBC / DuckDB paths.

It lives in the store (below ``judges`` and ``drift``) because both read it.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, and_

#: ``judge_results.status`` of an attempt the judge answered (a failure is ``failed``)
OK_STATUS = "ok"


def is_usable_score(status: str | None, score: float | None) -> bool:
    """Whether a judge attempt with ``status`` and ``score`` (the judge's scale, None = none)
    is a usable score."""
    return status == OK_STATUS and score is not None


def usable_score(table: Any) -> ColumnElement[bool]:
    """SQLAlchemy condition: rows of ``table`` (``JudgeResultRow``, its ``__table__``, or an
    alias of either: anything with ``status`` and ``score`` columns, directly or under ``.c``)
    that are usable scores."""
    cols = getattr(table, "c", table)
    return and_(cols.status == OK_STATUS, cols.score.is_not(None))


def usable_score_sql(alias: str) -> str:
    """The same condition as SQL text over the table alias ``alias`` (e.g. ``"r"``); portable
    across SQLite, PostgreSQL and DuckDB."""
    return f"({alias}.status = '{OK_STATUS}' AND {alias}.score IS NOT NULL)"
