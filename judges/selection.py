"""Choosing which stored LLM calls get judged: new calls → sampling policy → ``judge_samples``.

New calls are those whose primary span was received after the tenant's cursor and at least
``settle_s`` ago (a gateway span and its engine child may merge shortly after arrival), with both
``input_text`` and ``output_text``. Their features (model, variant, candidate arm of a running
rollout, thumbs-down / escalation feedback) go through ``judges.sampling.sample_batch`` with the
budget already spent today; each sampled call gets one pending sample per rubric, carrying π_i.
Thumbs-downs and escalations that arrive after their call was considered are picked up too
(always judged, π = 1): an unsampled call gets new samples, an already sampled one has its π
raised to 1 (stratum ``flagged_late``, ``judges.sampling.late_flagged``) so Hajek means and PPI
weight it as the design does. The cursor advances in the same transaction as the inserts.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    Connection,
    Engine,
    MetaData,
    Table,
    and_,
    func,
    inspect,
    or_,
    select,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite

from collector.store.models import LLMCall, Span, Tenant
from collector.store.models.api import Feedback
from collector.store.models.judges import JudgeCursor, JudgeResultRow, JudgeSample
from judges.sampling import (
    LATE_FLAG_STRATUM,
    BudgetUsage,
    CallFeatures,
    SamplingDecision,
    sample_batch,
)
from judges.settings import JudgeSettings

log = logging.getLogger(__name__)

FLAG_KINDS = ("thumbs_down", "escalation")
ROLLOUTS_TABLE = "rollouts"


@dataclass(frozen=True)
class SelectionReport:
    """One selection round of one tenant: calls considered, calls sampled, samples inserted."""

    tenant: str
    considered: int
    sampled: int
    samples_inserted: int
    late_flagged: int


def utc_day_start(now: dt.datetime) -> dt.datetime:
    """Midnight UTC of ``now``'s day (the budget's day)."""
    day = now.astimezone(dt.UTC)
    return day.replace(hour=0, minute=0, second=0, microsecond=0)


def insert_ignore(conn: Connection, table: Any, rows: Sequence[dict[str, Any]]) -> int:
    """Insert ``rows`` skipping unique-key conflicts; returns the number inserted."""
    if not rows:
        return 0
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    stmt = dialect.insert(table).on_conflict_do_nothing()
    inserted = 0
    for row in rows:  # rowcount per row: executemany rowcounts are not portable
        inserted += conn.execute(stmt, row).rowcount or 0
    return inserted


def running_candidate_variants(conn: Connection, tenant: str) -> set[tuple[str | None, str]]:
    """(rollout, candidate variant) of the tenant's running rollouts; empty without the table.

    Contract assumed with the canary engine: table ``rollouts`` with columns ``tenant``,
    ``name``, ``status`` (``running`` while it runs) and ``candidate_variant``. A store without
    that table (or those columns) oversamples nothing.
    """
    if not inspect(conn).has_table(ROLLOUTS_TABLE):
        return set()
    table = Table(ROLLOUTS_TABLE, MetaData(), autoload_with=conn)
    needed = {"tenant", "name", "status", "candidate_variant"}
    if not needed <= set(table.c.keys()):
        log.warning("table rollouts lacks columns %s; no candidate oversampling", needed)
        return set()
    rows = conn.execute(
        select(table.c.name, table.c.candidate_variant).where(
            table.c.tenant == tenant, table.c.status == "running"
        )
    )
    return {(r.name, r.candidate_variant) for r in rows if r.candidate_variant}


def budget_usage(
    conn: Connection, tenant: str, now: dt.datetime, settings: JudgeSettings
) -> BudgetUsage:
    """Judge spending of ``tenant`` today (UTC): calls sampled, and USD.

    USD = recorded judge costs today + the estimated cost of today's calls not yet judged.
    """
    start = utc_day_start(now)
    calls_today = conn.execute(
        select(func.count()).select_from(
            select(JudgeSample.trace_id, JudgeSample.span_id)
            .where(JudgeSample.tenant == tenant, JudgeSample.created_at >= start)
            .distinct()
            .subquery()
        )
    ).scalar_one()
    spent = conn.execute(
        select(func.sum(JudgeResultRow.cost_usd)).where(
            JudgeResultRow.tenant == tenant, JudgeResultRow.created_at >= start
        )
    ).scalar_one()
    waiting = conn.execute(
        select(func.count()).select_from(
            select(JudgeSample.trace_id, JudgeSample.span_id)
            .where(
                JudgeSample.tenant == tenant,
                JudgeSample.created_at >= start,
                JudgeSample.status.in_(("pending", "claimed")),
            )
            .distinct()
            .subquery()
        )
    ).scalar_one()
    estimate = (settings.cost_per_judgement_usd or 0.0) * int(waiting)
    return BudgetUsage(calls=int(calls_today), usd=float(spent or 0.0) + estimate)


def _flagged_calls(conn: Connection, tenant: str, keys: Iterable[tuple[str, str]]) -> set[Any]:
    """The subset of (trace_id, span_id) keys with a thumbs-down or escalation."""
    keys = list(keys)
    traces = {t for t, _ in keys}
    if not traces:
        return set()
    rows = conn.execute(
        select(Feedback.trace_id, Feedback.span_id).where(
            Feedback.tenant == tenant,
            Feedback.kind.in_(FLAG_KINDS),
            Feedback.trace_id.in_(traces),
        )
    ).all()
    flagged_traces = {r.trace_id for r in rows if r.span_id is None}
    flagged_spans = {(r.trace_id, r.span_id) for r in rows if r.span_id is not None}
    return {k for k in keys if k[0] in flagged_traces or k in flagged_spans}


def _sample_rows(
    tenant: str,
    calls: dict[str, Any],
    decisions: Sequence[SamplingDecision],
    rubrics: Sequence[str],
    now: dt.datetime,
) -> list[dict[str, Any]]:
    rows = []
    for d in decisions:
        if not d.sampled or d.inclusion_probability is None:
            continue
        call = calls[d.call_id]
        for rubric in rubrics:
            rows.append(
                {
                    "tenant": tenant,
                    "trace_id": call.trace_id,
                    "span_id": call.span_id,
                    "call_id": call.call_id,
                    "rubric": rubric,
                    "inclusion_probability": d.inclusion_probability,
                    "design_rate": d.design_rate,
                    "stratum": d.stratum,
                    "reason": d.reason,
                    "status": "pending",
                    "attempts": 0,
                    "created_at": now,
                    "updated_at": now,
                }
            )
    return rows


def _cursor(conn: Connection, tenant: str, now: dt.datetime) -> int:
    """The tenant's cursor, row-locked on PostgreSQL so two selectors never overlap."""
    insert_ignore(
        conn,
        JudgeCursor,
        [{"tenant": tenant, "received_unix_nano": 0, "updated_at": now}],
    )
    row = conn.execute(
        select(JudgeCursor.received_unix_nano).where(JudgeCursor.tenant == tenant).with_for_update()
    ).scalar_one()
    return int(row)


def _day_fraction(now: dt.datetime) -> float:
    elapsed = (now - utc_day_start(now)).total_seconds()
    return min(1.0, max(elapsed, 1.0) / 86400.0)


def select_for_tenant(
    conn: Connection, tenant: str, settings: JudgeSettings, now: dt.datetime, *, pace: bool
) -> SelectionReport:
    """One selection round for ``tenant`` inside the caller's transaction (see module doc)."""
    after = _cursor(conn, tenant, now)
    until = int(now.timestamp() * 1e9) - int(settings.settle_s * 1e9)
    rows = conn.execute(
        select(
            LLMCall.trace_id,
            LLMCall.span_id,
            LLMCall.call_id,
            LLMCall.model,
            LLMCall.variant,
            LLMCall.rollout,
            Span.received_unix_nano,
        )
        .join(
            Span,
            and_(
                Span.tenant == LLMCall.tenant,
                Span.trace_id == LLMCall.trace_id,
                Span.span_id == LLMCall.span_id,
            ),
        )
        .where(
            LLMCall.tenant == tenant,
            Span.received_unix_nano > after,
            Span.received_unix_nano <= until,
            LLMCall.input_text.is_not(None),
            LLMCall.output_text.is_not(None),
            LLMCall.output_text != "",
        )
        .order_by(Span.received_unix_nano)
        .limit(settings.select_limit)
    ).all()
    candidates = running_candidate_variants(conn, tenant)
    flagged = _flagged_calls(conn, tenant, ((r.trace_id, r.span_id) for r in rows))
    by_call: dict[str, Any] = {}
    features: list[CallFeatures] = []
    for r in rows:
        if r.call_id in by_call:  # two rows with one call_id: judge the first only
            continue
        by_call[r.call_id] = r
        is_flagged = (r.trace_id, r.span_id) in flagged
        features.append(
            CallFeatures(
                call_id=r.call_id,
                model=r.model,
                variant=r.variant,
                tenant=tenant,
                candidate_arm=(r.rollout, r.variant) in candidates,
                thumbs_down=is_flagged,
                escalated=is_flagged,
                judge_cost_usd=settings.cost_per_judgement_usd,
            )
        )
    usage = budget_usage(conn, tenant, now, settings)
    decisions = sample_batch(
        features,
        settings.sampling_policy(),
        usage=usage,
        day_fraction=_day_fraction(now) if pace else None,
    )
    inserted = insert_ignore(
        conn, JudgeSample, _sample_rows(tenant, by_call, decisions, settings.rubrics, now)
    )
    late = _late_flagged(conn, tenant, settings, now)
    new_cursor = until if len(rows) < settings.select_limit else int(rows[-1].received_unix_nano)
    conn.execute(
        update(JudgeCursor)
        .where(JudgeCursor.tenant == tenant)
        .values(received_unix_nano=max(after, new_cursor), updated_at=now)
    )
    return SelectionReport(
        tenant=tenant,
        considered=len(features),
        sampled=sum(1 for d in decisions if d.sampled),
        samples_inserted=inserted + late,
        late_flagged=late,
    )


def _flag_join(since: dt.datetime) -> Any:
    """A thumbs-down / escalation received since ``since`` on the call."""
    return and_(
        Feedback.tenant == LLMCall.tenant,
        Feedback.trace_id == LLMCall.trace_id,
        or_(
            Feedback.span_id.is_(None),
            Feedback.span_id == LLMCall.span_id,
            Feedback.span_id == LLMCall.engine_span_id,
        ),
        Feedback.kind.in_(FLAG_KINDS),
        Feedback.received_at >= since,
    )


def _late_flagged(conn: Connection, tenant: str, settings: JudgeSettings, now: dt.datetime) -> int:
    """Recent thumbs-downs / escalations: samples (π = 1, reason ``flagged``) for flagged calls
    not sampled yet, and π raised to 1 for flagged calls sampled before their flag arrived.

    The policy judges every flagged call, so its π is 1 whatever the earlier decision was
    (``judges.sampling.late_flagged``). Returns the number of samples inserted.
    """
    since = now - dt.timedelta(seconds=settings.flag_lookback_s)
    sample_match = and_(
        JudgeSample.tenant == LLMCall.tenant,
        JudgeSample.trace_id == LLMCall.trace_id,
        JudgeSample.span_id == LLMCall.span_id,
    )
    stale = (
        select(JudgeSample.id)
        .join(LLMCall, sample_match)
        .join(Feedback, _flag_join(since))
        .where(LLMCall.tenant == tenant, JudgeSample.inclusion_probability < 1.0)
        .distinct()
    )
    stale_ids = [i for (i,) in conn.execute(stale)]
    if stale_ids:
        conn.execute(
            update(JudgeSample)
            .where(JudgeSample.id.in_(stale_ids))
            .values(
                inclusion_probability=1.0,
                stratum=LATE_FLAG_STRATUM,
                reason="flagged",
                updated_at=now,
            )
        )
    rows = conn.execute(
        select(LLMCall.trace_id, LLMCall.span_id, LLMCall.call_id)
        .join(Feedback, _flag_join(since))
        .outerjoin(JudgeSample, sample_match)
        .where(
            LLMCall.tenant == tenant,
            JudgeSample.id.is_(None),
            LLMCall.input_text.is_not(None),
            LLMCall.output_text.is_not(None),
            LLMCall.output_text != "",
        )
        .distinct()
        .limit(settings.select_limit)
    ).all()
    out = []
    for r in rows:
        for rubric in settings.rubrics:
            out.append(
                {
                    "tenant": tenant,
                    "trace_id": r.trace_id,
                    "span_id": r.span_id,
                    "call_id": r.call_id,
                    "rubric": rubric,
                    "inclusion_probability": 1.0,
                    "design_rate": 1.0,
                    "stratum": "flagged",
                    "reason": "flagged",
                    "status": "pending",
                    "attempts": 0,
                    "created_at": now,
                    "updated_at": now,
                }
            )
    return insert_ignore(conn, JudgeSample, out)


def select_new_samples(
    engine: Engine,
    settings: JudgeSettings,
    *,
    now: dt.datetime | None = None,
    pace: bool = True,
) -> list[SelectionReport]:
    """Run one selection round for every tenant, one transaction per tenant.

    ``now``: tz-aware UTC (default: the current time). ``pace``: spread the daily budget over the
    UTC day (``day_fraction``). A tenant whose round fails is logged and skipped.
    """
    now = now or dt.datetime.now(dt.UTC)
    with engine.connect() as conn:
        tenants = [t for (t,) in conn.execute(select(Tenant.name).order_by(Tenant.name))]
    reports = []
    for tenant in tenants:
        try:
            with engine.begin() as conn:
                reports.append(select_for_tenant(conn, tenant, settings, now, pace=pace))
        except Exception:
            log.exception("judge selection failed for tenant %s", tenant)
    return reports
