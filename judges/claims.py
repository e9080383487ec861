"""Claiming pending judge samples and recording what the judge said.

Claims: PostgreSQL selects pending (or lease-expired) samples ``FOR UPDATE SKIP LOCKED`` so
several workers never wait on or double-claim a row; SQLite (one writer) uses a plain
transaction. Either way each row is taken with a conditional UPDATE, so a sample is held by one
worker at a time. Results: a verdict marks the sample ``done`` and may open a review item — an
*audit* item when the call falls in the stratified uniformly random audit subset (hash of the
call id under the audit policy, probability r_audit of its stratum, reference §3.6 "Practical
recipe"), or a correction item for flagged / low-scoring calls. A failure is stored as a failed
result (never a score); transient failures return the sample to the queue until
``max_attempts``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, and_, insert, or_, select, update

from collector.store.models import LLMCall
from collector.store.models.judges import JudgeResultRow, JudgeSample, ReviewItem
from judges.errors import JudgeError, JudgeParseError, JudgeRequestError
from judges.runner import JudgeResult
from judges.sampling import CallFeatures, design_rate, hash_unit
from judges.selection import insert_ignore
from judges.settings import JudgeSettings


@dataclass(frozen=True)
class ClaimedSample:
    """A sample held by this worker, with the call's text and features."""

    id: int
    tenant: str
    trace_id: str
    span_id: str
    call_id: str
    rubric: str
    reason: str
    attempts: int
    inclusion_probability: float
    model: str | None
    variant: str | None
    input_text: str
    output_text: str


def _claimable(now: dt.datetime) -> Any:
    return or_(
        JudgeSample.status == "pending",
        and_(JudgeSample.status == "claimed", JudgeSample.lease_expires_at < now),
    )


def claim_samples(
    engine: Engine,
    *,
    worker_id: str,
    limit: int,
    lease_s: float,
    now: dt.datetime | None = None,
    exclude: Collection[int] = (),
) -> list[ClaimedSample]:
    """Claim up to ``limit`` samples (any tenant, oldest first) for ``lease_s`` seconds.

    ``exclude``: sample ids not to take (e.g. ones this round already tried and requeued).

    Samples whose call has lost its text (retention, redaction policy) are marked failed.
    Raises ValueError naming the parameter for ``limit`` < 1 or ``lease_s`` <= 0.
    """
    if limit < 1:
        raise ValueError("limit must be >= 1")
    if lease_s <= 0:
        raise ValueError("lease_s must be > 0")
    now = now or dt.datetime.now(dt.UTC)
    expires = now + dt.timedelta(seconds=lease_s)
    with engine.begin() as conn:
        query = select(JudgeSample.id).where(_claimable(now)).order_by(JudgeSample.id).limit(limit)
        if exclude:
            query = query.where(JudgeSample.id.not_in(list(exclude)))
        if conn.dialect.name == "postgresql":
            query = query.with_for_update(skip_locked=True)
        ids = [i for (i,) in conn.execute(query)]
        taken: list[int] = []
        for sample_id in ids:
            res = conn.execute(
                update(JudgeSample)
                .where(JudgeSample.id == sample_id, _claimable(now))
                .values(
                    status="claimed",
                    lease_owner=worker_id,
                    lease_expires_at=expires,
                    attempts=JudgeSample.attempts + 1,
                    updated_at=now,
                )
            )
            if res.rowcount:
                taken.append(sample_id)
        if not taken:
            return []
        rows = conn.execute(
            select(JudgeSample.__table__, LLMCall.model, LLMCall.variant, LLMCall.input_text,
                   LLMCall.output_text)
            .outerjoin(
                LLMCall,
                and_(
                    LLMCall.tenant == JudgeSample.tenant,
                    LLMCall.trace_id == JudgeSample.trace_id,
                    LLMCall.span_id == JudgeSample.span_id,
                ),
            )
            .where(JudgeSample.id.in_(taken))
            .order_by(JudgeSample.id)
        ).all()  # fmt: skip
        claimed: list[ClaimedSample] = []
        for s in rows:
            if not s.input_text or not s.output_text:
                conn.execute(
                    update(JudgeSample)
                    .where(JudgeSample.id == s.id)
                    .values(status="failed", lease_owner=None, updated_at=now)
                )
                continue
            claimed.append(
                ClaimedSample(
                    id=s.id,
                    tenant=s.tenant,
                    trace_id=s.trace_id,
                    span_id=s.span_id,
                    call_id=s.call_id,
                    rubric=s.rubric,
                    reason=s.reason,
                    attempts=s.attempts,
                    inclusion_probability=s.inclusion_probability,
                    model=s.model,
                    variant=s.variant,
                    input_text=s.input_text,
                    output_text=s.output_text,
                )
            )
        return claimed


def _base_row(sample: ClaimedSample, now: dt.datetime) -> dict[str, Any]:
    return {
        "sample_id": sample.id,
        "tenant": sample.tenant,
        "trace_id": sample.trace_id,
        "span_id": sample.span_id,
        "call_id": sample.call_id,
        "created_at": now,
    }


def _release(sample: ClaimedSample, worker_id: str, status: str, now: dt.datetime) -> Any:
    return (
        update(JudgeSample)
        .where(JudgeSample.id == sample.id, JudgeSample.lease_owner == worker_id)
        .values(status=status, lease_owner=None, lease_expires_at=None, updated_at=now)
    )


@dataclass(frozen=True)
class ReviewDecision:
    """Audit design of a judged call: ``audit_rate`` = P(audit | judged) of its stratum;
    ``reason`` is ``audit``, ``flagged``, ``low_score`` or None (no review item)."""

    audit: bool
    audit_rate: float
    stratum: str
    reason: str | None


def review_decision(
    sample: ClaimedSample, score: float | None, settings: JudgeSettings
) -> ReviewDecision:
    """Whether a judged sample enters the review queue, and why.

    Audit: u_i = hash(call_id, audit salt) < r_audit(stratum), so π_audit = r_audit given the
    call was judged (deterministic, same on every replica; reference §3.5 "Deterministic hash
    sampling"). Otherwise flagged calls and calls scored at or below ``low_score_threshold``
    become correction items, which take no part in agreement or PPI.
    """
    policy = settings.audit_policy()
    features = CallFeatures(
        call_id=sample.call_id, model=sample.model, variant=sample.variant, tenant=sample.tenant
    )
    rate = design_rate(features, policy)
    if rate.rate > 0 and hash_unit(sample.call_id, policy.salt) < rate.rate:
        return ReviewDecision(True, rate.rate, rate.stratum, "audit")
    reason = None
    threshold = settings.low_score_threshold
    if sample.reason == "flagged":
        reason = "flagged"
    elif threshold is not None and score is not None and score <= threshold:
        reason = "low_score"
    return ReviewDecision(False, rate.rate, rate.stratum, reason)


def record_result(
    engine: Engine,
    sample: ClaimedSample,
    result: JudgeResult,
    settings: JudgeSettings,
    *,
    worker_id: str,
    now: dt.datetime | None = None,
) -> bool:
    """Store a verdict, mark the sample done and open its review item if any.

    Returns False (nothing stored) when this worker no longer holds the claim.
    """
    now = now or dt.datetime.now(dt.UTC)
    decision = review_decision(sample, result.score, settings)
    with engine.begin() as conn:
        release = _release(sample, worker_id, "done", now).values(
            audit_probability=decision.audit_rate
        )
        if not conn.execute(release).rowcount:
            return False
        conn.execute(
            insert(JudgeResultRow).values(
                **_base_row(sample, now),
                status="ok",
                rubric_name=result.rubric_name,
                rubric_version=result.rubric_version,
                rubric_fingerprint=result.rubric_fingerprint,
                judge_model=result.judge_model,
                response_model=result.response_model,
                score=result.score,
                discrete_score=result.discrete_score,
                weighted_score=result.weighted_score,
                score_probabilities=(
                    [list(p) for p in result.score_probabilities]
                    if result.score_probabilities is not None
                    else None
                ),
                label=result.label,
                explanation=result.explanation,
                output_mode=result.output_mode,
                logprobs_used=result.logprobs_used,
                latency_s=result.latency_s,
                elapsed_s=result.elapsed_s,
                attempts=result.attempts,
                input_tokens=result.input_tokens,
                output_tokens=result.output_tokens,
                cost_usd=result.cost_usd,
            )
        )
        if decision.reason is not None:
            insert_ignore(
                conn,
                ReviewItem,
                [
                    {
                        "tenant": sample.tenant,
                        "sample_id": sample.id,
                        "trace_id": sample.trace_id,
                        "span_id": sample.span_id,
                        "call_id": sample.call_id,
                        "rubric": sample.rubric,
                        "audit": decision.audit,
                        "inclusion_probability": decision.audit_rate if decision.audit else None,
                        "stratum": decision.stratum,
                        "reason": decision.reason,
                        "status": "pending",
                        "created_at": now,
                    }
                ],
            )
    return True


def error_kind(exc: JudgeError) -> str:
    """``parse`` | ``request`` | ``unavailable`` (the last is retried)."""
    if isinstance(exc, JudgeParseError):
        return "parse"
    if isinstance(exc, JudgeRequestError):
        return "request"
    return "unavailable"


def record_failure(
    engine: Engine,
    sample: ClaimedSample,
    exc: JudgeError,
    *,
    rubric_version: str,
    rubric_fingerprint: str,
    judge_model: str,
    max_attempts: int,
    worker_id: str,
    now: dt.datetime | None = None,
) -> str:
    """Store a failed attempt (no score) and return the sample's new status.

    Parse and request failures are final (``failed``); an unavailable judge puts the sample back
    to ``pending`` until ``max_attempts`` attempts were made. Returns ``lost`` when this worker
    no longer holds the claim (nothing stored).
    """
    now = now or dt.datetime.now(dt.UTC)
    kind = error_kind(exc)
    final = kind != "unavailable" or sample.attempts >= max_attempts
    status = "failed" if final else "pending"
    with engine.begin() as conn:
        if not conn.execute(_release(sample, worker_id, status, now)).rowcount:
            return "lost"
        conn.execute(
            insert(JudgeResultRow).values(
                **_base_row(sample, now),
                status="failed",
                rubric_name=sample.rubric,
                rubric_version=rubric_version,
                rubric_fingerprint=rubric_fingerprint,
                judge_model=judge_model,
                error_kind=kind,
                error=str(exc),
                raw_text=exc.raw_text,
            )
        )
    return status
