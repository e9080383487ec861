"""Retention: delete telemetry older than each tenant's ``retention_days``, in batches."""

from __future__ import annotations

import time

from sqlalchemy import Engine, delete, select, tuple_

from collector.store.models import LLMCall, Span, Tenant
from collector.store.models.api import Feedback
from collector.store.models.logs import GenAILogEvent
from collector.store.models.scores import ExternalScore

NS_PER_DAY = 86_400 * 10**9


def _delete_batched(
    engine: Engine, table: type, tenant: str, cutoff_ns: int, time_col: str, batch_size: int
) -> int:
    t = table.__table__  # type: ignore[attr-defined]
    key_cols = [c for c in t.primary_key.columns]
    total = 0
    while True:
        batch = (
            select(*key_cols)
            .where(t.c.tenant == tenant, t.c[time_col] < cutoff_ns)
            .limit(batch_size)
            .scalar_subquery()
            if len(key_cols) == 1
            else select(*key_cols)
            .where(t.c.tenant == tenant, t.c[time_col] < cutoff_ns)
            .limit(batch_size)
        )
        with engine.begin() as conn:
            n = conn.execute(delete(t).where(tuple_(*key_cols).in_(batch))).rowcount
        total += n
        if n < batch_size:
            return total


def apply_retention(
    engine: Engine, *, batch_size: int = 5000, now_ns: int | None = None
) -> dict[str, dict[str, int]]:
    """Delete calls, spans, feedback, log content records and external scores older than each
    tenant's policy.

    Returns {tenant: {"llm_calls": n, "spans": n, "feedback": n, "gen_ai_log_events": n,
    "external_scores": n}}. Pending feedback whose
    timestamp is older than the policy is deleted too (the retention period has ended).
    """
    now = now_ns if now_ns is not None else time.time_ns()
    with engine.connect() as conn:
        policies = conn.execute(select(Tenant.name, Tenant.retention_days)).all()
    out: dict[str, dict[str, int]] = {}
    for tenant, days in policies:
        cutoff = now - int(days) * NS_PER_DAY
        out[tenant] = {
            "llm_calls": _delete_batched(
                engine, LLMCall, tenant, cutoff, "start_unix_nano", batch_size
            ),
            "spans": _delete_batched(engine, Span, tenant, cutoff, "start_unix_nano", batch_size),
            "feedback": _delete_batched(
                engine, Feedback, tenant, cutoff, "timestamp_unix_nano", batch_size
            ),
            "gen_ai_log_events": _delete_batched(
                engine, GenAILogEvent, tenant, cutoff, "received_unix_nano", batch_size
            ),
            "external_scores": _delete_batched(
                engine, ExternalScore, tenant, cutoff, "timestamp_unix_nano", batch_size
            ),
        }
    return out
