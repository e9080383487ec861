"""Arrow reads of the per-call inputs that do not live in ``llm_calls``: thumbs votes
(``feedback``) and judge results (``judge_results``, from the judges subsystem).

Both go through :mod:`collector.store.arrowfetch` (ADBC → Arrow, fixed schema). The judge table
is optional: when it does not exist (judges not migrated / not installed) the read returns
``None`` with the reason, and the run records it instead of failing.
"""

from __future__ import annotations

import logging
import sqlite3

import adbc_driver_manager
import pyarrow as pa

from collector.store import arrowfetch
from collector.store.judgescore import OK_STATUS, usable_score_sql

log = logging.getLogger(__name__)

#: judge rubric whose verdict overrides the refusal heuristic, and its labels meaning "refused"
REFUSAL_RUBRIC = "refusal"
REFUSAL_LABELS = ("refusal", "refused", "decline", "declined", "yes")

_VOTES_SCHEMA = pa.schema(
    [
        ("trace_id", pa.string()),
        ("span_id", pa.string()),
        ("user_id", pa.string()),
        ("feedback_id", pa.string()),
        ("kind", pa.string()),
        ("timestamp_unix_nano", pa.int64()),
    ]
)
_JUDGE_SCHEMA = pa.schema(
    [
        ("trace_id", pa.string()),
        ("span_id", pa.string()),
        ("score", pa.float64()),
        ("refusal", pa.bool_()),
        ("pi", pa.float64()),
    ]
)


def thumbs_votes(database_url: str, tenant: str, since_ns: int) -> pa.Table:
    """Thumbs-up / thumbs-down events of the tenant with a trace id, sent at or after
    ``since_ns`` (unix ns; feedback follows its call, so the reference window's start).

    Returns a table with ``trace_id, span_id, user_id, feedback_id, kind,
    timestamp_unix_nano``; unlinked feedback (no trace id) is excluded (case 21).
    """
    dialect, _ = arrowfetch.adbc_target(database_url)
    b = arrowfetch.SqlBuilder(dialect)
    sql = (
        "SELECT trace_id, span_id, user_id, feedback_id, kind, timestamp_unix_nano "
        f"FROM feedback WHERE tenant = {b.param(tenant)} AND trace_id IS NOT NULL "
        "AND kind IN ('thumbs_up', 'thumbs_down') "
        f"AND timestamp_unix_nano >= {b.param(since_ns)}"
    )
    return arrowfetch.run_query(database_url, sql, b.params, _VOTES_SCHEMA)


def judge_scores(
    database_url: str,
    tenant: str,
    since_ns: int,
    *,
    rubric: str | None = None,
) -> tuple[pa.Table | None, str]:
    """Successful judge results of the tenant's calls started at or after ``since_ns``.

    Args:
        database_url: the store.
        tenant: whose results.
        since_ns: unix ns; results of calls that started earlier are not read.
        rubric: only this rubric's score (``None``: every rubric except ``REFUSAL_RUBRIC``;
            a call's judge score is then the mean over its rubrics).

    Returns:
        ``(table, "")`` with ``trace_id, span_id, score, refusal, pi`` (``pi``: the call's
        inclusion probability π stored by the judge sampler in ``judge_samples``, read as is,
        so a probability the sampler revises is used revised; ``refusal`` is the verdict
        of the ``REFUSAL_RUBRIC`` rubric, label in ``REFUSAL_LABELS``, else NULL), or
        ``(None, reason)`` when the judges' table is absent.
    """
    dialect, _ = arrowfetch.adbc_target(database_url)
    b = arrowfetch.SqlBuilder(dialect)
    labels = ", ".join(f"'{lbl}'" for lbl in REFUSAL_LABELS)
    score_rubric = (
        f"r.rubric_name = {b.param(rubric)}"
        if rubric is not None
        else f"r.rubric_name <> '{REFUSAL_RUBRIC}'"
    )
    sql = (
        "SELECT r.trace_id, r.span_id, "
        f"CASE WHEN {score_rubric} AND {usable_score_sql('r')} THEN r.score END AS score, "
        f"CASE WHEN r.rubric_name = '{REFUSAL_RUBRIC}' THEN lower(r.label) IN ({labels}) END "
        "AS refusal, s.inclusion_probability AS pi FROM judge_results r "
        "JOIN judge_samples s ON s.id = r.sample_id "
        "JOIN llm_calls c ON c.tenant = r.tenant "
        "AND c.trace_id = r.trace_id AND c.span_id = r.span_id "
        f"WHERE r.tenant = {b.param(tenant)} AND r.status = '{OK_STATUS}' "
        f"AND c.start_unix_nano >= {b.param(since_ns)}"
    )
    try:
        return arrowfetch.run_query(database_url, sql, b.params, _JUDGE_SCHEMA), ""
    except (adbc_driver_manager.ProgrammingError, sqlite3.OperationalError) as exc:
        log.info("drift: no judge results (%s)", exc)
        return None, "no judge_results table (judges subsystem not migrated)"
