"""Reads of the store that the collector does not expose as query functions yet.

SQLAlchemy Core selects (no raw SQL), one tenant at a time, returned as pandas frames for the
cached layer in :mod:`dashboard.data`. Times are unix nanoseconds (UTC); durations seconds,
money USD, token counts ints; NULL stays missing (NaN / None), never 0.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
from sqlalchemy import Engine, and_, desc, func, select

from collector.store.models import LLMCall, Tenant
from collector.store.models.api import EngineSample, Feedback

#: most calls one dashboard query loads (newest first); the caption says when it is reached.
MAX_ROWS = 200_000

#: metric columns of ``llm_calls`` the charts need (no captured text).
CALL_METRIC_COLUMNS: tuple[str, ...] = (
    "call_id",
    "trace_id",
    "span_id",
    "start_unix_nano",
    "service_name",
    "operation",
    "model",
    "rollout",
    "variant",
    "status",
    "error_type",
    "finish_reason",
    "input_tokens",
    "output_tokens",
    "cached_input_tokens",
    "queue_s",
    "prefill_s",
    "decode_s",
    "ttft_s",
    "tpot_s",
    "e2e_s",
    "cost_usd",
    "gpu_cost_usd",
    "flags",
)
#: the columns of a call frame that the traffic, latency and cost charts read
#: (:mod:`dashboard.stats`): no ids, no flags list (``is_unpriced`` says what they need of it)
CHART_COLUMNS: tuple[str, ...] = (
    "start_unix_nano",
    "service_name",
    "model",
    "variant",
    "status",
    "error_type",
    "input_tokens",
    "output_tokens",
    "queue_s",
    "prefill_s",
    "decode_s",
    "ttft_s",
    "tpot_s",
    "e2e_s",
    "cost_usd",
    "gpu_cost_usd",
    "is_unpriced",
)
FILTER_COLUMNS = ("model", "variant", "rollout", "service_name")


def _check_range(since_ns: int, until_ns: int) -> None:
    if since_ns >= until_ns:
        raise ValueError("since_ns must be before until_ns")


def tenant_names(engine: Engine) -> list[str]:
    """Names of every tenant, sorted."""
    with engine.connect() as conn:
        return [r[0] for r in conn.execute(select(Tenant.name).order_by(Tenant.name))]


def oldest_recent_call_ns(engine: Engine, tenant: str, since_ns: int) -> int | None:
    """Start (unix ns) of the tenant's oldest call at or after ``since_ns``; None without."""
    t = LLMCall.__table__
    with engine.connect() as conn:
        value = conn.execute(
            select(func.min(t.c.start_unix_nano)).where(
                t.c.tenant == tenant, t.c.start_unix_nano >= since_ns
            )
        ).scalar_one()
    return int(value) if value is not None else None


def calls_frame(
    engine: Engine,
    tenant: str,
    since_ns: int,
    until_ns: int,
    filters: dict[str, str] | None = None,
    *,
    limit: int = MAX_ROWS,
) -> pd.DataFrame:
    """Metric columns of the calls started in ``[since_ns, until_ns)``, newest first.

    ``filters`` maps a column of :data:`FILTER_COLUMNS` to the value it must equal.

    Raises:
        ValueError: an empty range or an unknown filter column.
    """
    _check_range(since_ns, until_ns)
    t = LLMCall.__table__
    conds = [
        t.c.tenant == tenant,
        t.c.start_unix_nano >= since_ns,
        t.c.start_unix_nano < until_ns,
    ]
    for col, value in (filters or {}).items():
        if col not in FILTER_COLUMNS:
            raise ValueError(f"filters: unknown column {col!r}")
        conds.append(t.c[col] == value)
    q = (
        select(*(t.c[c] for c in CALL_METRIC_COLUMNS))
        .where(and_(*conds))
        .order_by(desc(t.c.start_unix_nano))
        .limit(limit)
    )
    with engine.connect() as conn:
        rows = conn.execute(q).all()
    df = pd.DataFrame(rows, columns=list(CALL_METRIC_COLUMNS))
    for c in ("input_tokens", "output_tokens", "cached_input_tokens"):
        df[c] = pd.to_numeric(df[c], errors="coerce").astype("Float64")
    for c in ("queue_s", "prefill_s", "decode_s", "ttft_s", "tpot_s", "e2e_s"):
        df[c] = pd.to_numeric(df[c], errors="coerce").astype("float64")
    for c in ("cost_usd", "gpu_cost_usd"):
        df[c] = pd.to_numeric(df[c], errors="coerce").astype("float64")
    df["start_unix_nano"] = df["start_unix_nano"].astype("int64")
    return df


def feedback_frame(engine: Engine, tenant: str, since_ns: int, until_ns: int) -> pd.DataFrame:
    """Feedback events with a timestamp in ``[since_ns, until_ns)`` (linked or pending).

    Columns: feedback_id, trace_id, span_id, response_id, kind, value, comment, user_id,
    source, timestamp_unix_nano, linked (bool).
    """
    _check_range(since_ns, until_ns)
    f = Feedback.__table__
    cols = (
        "feedback_id",
        "trace_id",
        "span_id",
        "response_id",
        "kind",
        "value",
        "comment",
        "user_id",
        "source",
        "timestamp_unix_nano",
    )
    q = (
        select(*(f.c[c] for c in cols), f.c.linked_at.isnot(None).label("linked"))
        .where(
            f.c.tenant == tenant,
            f.c.timestamp_unix_nano >= since_ns,
            f.c.timestamp_unix_nano < until_ns,
        )
        .order_by(desc(f.c.timestamp_unix_nano))
        .limit(MAX_ROWS)
    )
    with engine.connect() as conn:
        rows = conn.execute(q).all()
    return pd.DataFrame(rows, columns=[*cols, "linked"])


def engine_samples_frame(engine: Engine, tenant: str, since_ns: int, until_ns: int) -> pd.DataFrame:
    """Scraped engine samples in ``[since_ns, until_ns)``, oldest first (all columns)."""
    _check_range(since_ns, until_ns)
    e = EngineSample.__table__
    q = (
        select(e)
        .where(
            e.c.tenant == tenant,
            e.c.scraped_unix_nano >= since_ns,
            e.c.scraped_unix_nano < until_ns,
        )
        .order_by(e.c.scraped_unix_nano)
        .limit(MAX_ROWS)
    )
    with engine.connect() as conn:
        rows = conn.execute(q).all()
    return pd.DataFrame(rows, columns=[c.name for c in e.columns])


def judge_results_of_call(
    engine: Engine, tenant: str, trace_id: str, span_id: str
) -> list[dict[str, Any]]:
    """Judge attempts on one call (scores and recorded failures), oldest first."""
    from collector.store.models.judges import JudgeResultRow

    j = JudgeResultRow.__table__
    cols = ("rubric_name", "judge_model", "status", "score", "label", "explanation", "error")
    q = (
        select(*(j.c[c] for c in cols), j.c.created_at)
        .where(j.c.tenant == tenant, j.c.trace_id == trace_id, j.c.span_id == span_id)
        .order_by(j.c.id)
    )
    with engine.connect() as conn:
        return [dict(r) for r in conn.execute(q).mappings()]
