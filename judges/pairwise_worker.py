"""Pairwise judging of running rollouts: a judged candidate-arm call vs a baseline-arm answer to
the same prompt (identical ``input_text``, e.g. shadow / mirrored traffic), judged in both orders
by ``judges.pairwise.judge_pair`` (an inconsistent pair is a tie, reference §3.2).

Needs the canary engine's ``rollouts`` table with ``tenant``, ``name``, ``status``,
``baseline_variant`` and ``candidate_variant``; without it there is nothing to compare and the
pass does nothing.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import replace
from typing import Any

import openai
from sqlalchemy import Connection, Engine, MetaData, Table, and_, inspect, select
from sqlalchemy.orm import aliased

from collector.store.models import LLMCall
from collector.store.models.judges import JudgeSample, PairwiseResultRow
from judges.errors import JudgeError
from judges.pairwise import PairwiseResult, judge_pair
from judges.selection import ROLLOUTS_TABLE, insert_ignore
from judges.settings import JudgeSettings
from judges.transport import JUDGE_RETRY

log = logging.getLogger(__name__)


def running_rollouts(conn: Connection) -> list[tuple[str, str, str, str]]:
    """(tenant, rollout, baseline_variant, candidate_variant) of running rollouts; [] without
    the ``rollouts`` table or its columns."""
    if not inspect(conn).has_table(ROLLOUTS_TABLE):
        return []
    table = Table(ROLLOUTS_TABLE, MetaData(), autoload_with=conn)
    needed = {"tenant", "name", "status", "baseline_variant", "candidate_variant"}
    if not needed <= set(table.c.keys()):
        return []
    rows = conn.execute(
        select(
            table.c.tenant, table.c.name, table.c.baseline_variant, table.c.candidate_variant
        ).where(table.c.status == "running")
    )
    return [(r[0], r[1], r[2], r[3]) for r in rows if r[2] and r[3]]


def _pairs(
    conn: Connection, tenant: str, rollout: str, baseline: str, candidate: str, limit: int
) -> list[Any]:
    """Judged candidate calls without a pairwise result, each with one baseline answer."""
    cand = aliased(LLMCall)
    base = aliased(LLMCall)
    rows = conn.execute(
        select(
            cand.trace_id, cand.span_id, cand.input_text, cand.output_text,
            base.trace_id.label("b_trace"), base.span_id.label("b_span"),
            base.output_text.label("b_output"),
        )
        .join(
            JudgeSample,
            and_(
                JudgeSample.tenant == cand.tenant,
                JudgeSample.trace_id == cand.trace_id,
                JudgeSample.span_id == cand.span_id,
                JudgeSample.status == "done",
            ),
        )
        .join(
            base,
            and_(
                base.tenant == cand.tenant,
                base.rollout == cand.rollout,
                base.variant == baseline,
                base.input_text == cand.input_text,
                base.output_text.is_not(None),
            ),
        )
        .outerjoin(
            PairwiseResultRow,
            and_(
                PairwiseResultRow.tenant == cand.tenant,
                PairwiseResultRow.candidate_trace_id == cand.trace_id,
                PairwiseResultRow.candidate_span_id == cand.span_id,
            ),
        )
        .where(
            cand.tenant == tenant,
            cand.rollout == rollout,
            cand.variant == candidate,
            PairwiseResultRow.id.is_(None),
        )
        .order_by(cand.trace_id, cand.span_id, base.start_unix_nano.desc())
        .limit(limit * 4)
    ).all()  # fmt: skip
    first: dict[tuple[str, str], Any] = {}
    for r in rows:
        first.setdefault((r.trace_id, r.span_id), r)
    return list(first.values())[:limit]


def _row(
    tenant: str, rollout: str, pair: Any, result: PairwiseResult | None, error: str | None,
    rubric: Any, model: str,
) -> dict[str, Any]:  # fmt: skip
    row: dict[str, Any] = {
        "tenant": tenant,
        "rollout": rollout,
        "baseline_trace_id": pair.b_trace,
        "baseline_span_id": pair.b_span,
        "candidate_trace_id": pair.trace_id,
        "candidate_span_id": pair.span_id,
        "rubric_name": rubric.name,
        "rubric_version": rubric.version,
        "rubric_fingerprint": rubric.fingerprint,
        "judge_model": model,
        "status": "ok" if result is not None else "failed",
        "error": error,
        "created_at": dt.datetime.now(dt.UTC),
    }
    if result is not None:
        row.update(
            outcome=result.outcome,
            score=result.score,
            consistent=result.consistent,
            judgements=[
                {
                    "order": j.order,
                    "preferred": j.preferred,
                    "explanation": j.explanation,
                    "input_tokens": j.input_tokens,
                    "output_tokens": j.output_tokens,
                }
                for j in result.judgements
            ],
            elapsed_s=result.elapsed_s,
            input_tokens=result.input_tokens,
            output_tokens=result.output_tokens,
            cost_usd=result.cost_usd,
        )
    return row


async def judge_rollout_pairs(
    client: openai.AsyncOpenAI, engine: Engine, settings: JudgeSettings
) -> int:
    """Judge up to ``settings.batch_size`` new pairs per running rollout; returns pairs stored.

    Uses the first configured rubric. A failed pair is stored with ``status='failed'`` and its
    error (no outcome), so it is not retried forever.
    """
    _, model = settings.require_endpoint()
    rubric = settings.rubric(settings.rubrics[0])
    with engine.connect() as conn:
        rollouts = running_rollouts(conn)
        work = [
            (tenant, name, pair)
            for tenant, name, baseline, candidate in rollouts
            for pair in _pairs(conn, tenant, name, baseline, candidate, settings.batch_size)
        ]
    stored = 0
    for tenant, name, pair in work:
        try:
            result: PairwiseResult | None = await judge_pair(
                client,
                model=model,
                rubric=rubric,
                prompt=pair.input_text,
                baseline=pair.b_output,
                candidate=pair.output_text,
                price=settings.price(),
                max_tokens=settings.max_tokens,
                retry=replace(JUDGE_RETRY, request_timeout_s=settings.timeout_s),
                reasoning_max_chars=settings.reasoning_max_chars,
            )
            error = None
        except JudgeError as exc:
            log.warning("pairwise judging of %s/%s failed: %s", pair.trace_id, pair.span_id, exc)
            result, error = None, str(exc)
        with engine.begin() as conn:
            stored += insert_ignore(
                conn, PairwiseResultRow, [_row(tenant, name, pair, result, error, rubric, model)]
            )
    return stored
