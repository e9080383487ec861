"""Tables of the judges (judges/): samples, judge results, pairwise results, review items, labels.

A *sample* is one (call, rubric) chosen by the sampling policy with its inclusion probability
π_judge; the worker claims it (status pending → claimed → done | failed, with a lease) and writes
one *result* per attempt (a failure is a row with ``status='failed'`` and no score, never a
score). A *review item* puts a judged sample in front of human reviewers; ``audit`` items form
the stratified uniformly random subset (probability ``inclusion_probability`` given judged) on
which agreement and PPI are computed. *Labels* are what reviewers answered (or skipped).
Every table is keyed by ``tenant``; wall times are tz-aware UTC.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from collector.store.models.base import Base, _utcnow
from collector.store.types import JSONType, UTCDateTime


class JudgeCursor(Base):
    """Per tenant: calls whose primary span was received up to this time were considered."""

    __tablename__ = "judge_cursors"

    tenant: Mapped[str] = mapped_column(String(64), primary_key=True)
    received_unix_nano: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=_utcnow)


class JudgeSample(Base):
    """One (call, rubric) to judge. ``inclusion_probability``: π_judge of the call (1 = flagged).

    ``status``: ``pending`` | ``claimed`` | ``done`` | ``failed``; ``lease_*`` name the worker
    holding a claim until ``lease_expires_at``; ``attempts`` counts judge attempts.
    """

    __tablename__ = "judge_samples"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    tenant: Mapped[str] = mapped_column(String(64))
    trace_id: Mapped[str] = mapped_column(String(32))
    span_id: Mapped[str] = mapped_column(String(16))
    call_id: Mapped[str] = mapped_column(String(512))
    rubric: Mapped[str] = mapped_column(String(64))
    inclusion_probability: Mapped[float] = mapped_column(Float)
    design_rate: Mapped[float] = mapped_column(Float)
    stratum: Mapped[str] = mapped_column(String(256))
    reason: Mapped[str] = mapped_column(String(32))
    #: r_audit of the call's audit stratum, set when judged (P(audit | judged)).
    audit_probability: Mapped[float | None] = mapped_column(Float)
    status: Mapped[str] = mapped_column(String(16))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    lease_owner: Mapped[str | None] = mapped_column(String(128))
    lease_expires_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=_utcnow)
    updated_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=_utcnow)

    __table_args__ = (
        UniqueConstraint("tenant", "trace_id", "span_id", "rubric", name="uq_judge_samples_call"),
        Index("ix_judge_samples_status", "tenant", "status", "id"),
        Index("ix_judge_samples_created", "tenant", "created_at"),
    )


class JudgeResultRow(Base):
    """One judge attempt on a sample: a score (``status='ok'``) or a recorded failure.

    Failures carry ``error_kind`` (``parse`` | ``unavailable`` | ``request``), ``error`` and the
    judge's ``raw_text`` when it answered; their score and label are NULL. Units: seconds, tokens,
    USD (NULL when unknown).
    """

    __tablename__ = "judge_results"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    sample_id: Mapped[int] = mapped_column(ForeignKey("judge_samples.id", ondelete="CASCADE"))
    tenant: Mapped[str] = mapped_column(String(64))
    trace_id: Mapped[str] = mapped_column(String(32))
    span_id: Mapped[str] = mapped_column(String(16))
    call_id: Mapped[str] = mapped_column(String(512))
    status: Mapped[str] = mapped_column(String(16))
    rubric_name: Mapped[str] = mapped_column(String(64))
    rubric_version: Mapped[str] = mapped_column(String(32))
    rubric_fingerprint: Mapped[str] = mapped_column(String(32))
    judge_model: Mapped[str] = mapped_column(String(256))
    response_model: Mapped[str | None] = mapped_column(String(256))
    score: Mapped[float | None] = mapped_column(Float)
    discrete_score: Mapped[int | None] = mapped_column(Integer)
    weighted_score: Mapped[float | None] = mapped_column(Float)
    score_probabilities: Mapped[list[Any] | None] = mapped_column(JSONType)
    label: Mapped[str | None] = mapped_column(String(64))
    explanation: Mapped[str | None] = mapped_column(Text)
    output_mode: Mapped[str | None] = mapped_column(String(16))
    logprobs_used: Mapped[bool | None] = mapped_column(Boolean)
    latency_s: Mapped[float | None] = mapped_column(Float)
    elapsed_s: Mapped[float | None] = mapped_column(Float)
    attempts: Mapped[int | None] = mapped_column(Integer)
    input_tokens: Mapped[int | None] = mapped_column(BigInteger)
    output_tokens: Mapped[int | None] = mapped_column(BigInteger)
    cost_usd: Mapped[float | None] = mapped_column(Float)
    error_kind: Mapped[str | None] = mapped_column(String(16))
    error: Mapped[str | None] = mapped_column(Text)
    raw_text: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=_utcnow)

    __table_args__ = (
        Index("ix_judge_results_sample", "sample_id"),
        Index("ix_judge_results_created", "tenant", "created_at"),
        Index("ix_judge_results_call", "tenant", "trace_id", "span_id"),
    )


class PairwiseResultRow(Base):
    """Baseline vs candidate answers to the same prompt in a rollout, judged in both orders.

    ``outcome`` from the candidate's side (``win`` | ``tie`` | ``loss``), ``score`` 1 / ½ / 0;
    ``judgements``: both orders (preferred arm, explanation, tokens) as JSON.
    """

    __tablename__ = "judge_pairwise_results"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    tenant: Mapped[str] = mapped_column(String(64))
    rollout: Mapped[str] = mapped_column(String(256))
    baseline_trace_id: Mapped[str] = mapped_column(String(32))
    baseline_span_id: Mapped[str] = mapped_column(String(16))
    candidate_trace_id: Mapped[str] = mapped_column(String(32))
    candidate_span_id: Mapped[str] = mapped_column(String(16))
    rubric_name: Mapped[str] = mapped_column(String(64))
    rubric_version: Mapped[str] = mapped_column(String(32))
    rubric_fingerprint: Mapped[str] = mapped_column(String(32))
    judge_model: Mapped[str] = mapped_column(String(256))
    status: Mapped[str] = mapped_column(String(16))
    outcome: Mapped[str | None] = mapped_column(String(8))
    score: Mapped[float | None] = mapped_column(Float)
    consistent: Mapped[bool | None] = mapped_column(Boolean)
    judgements: Mapped[list[Any] | None] = mapped_column(JSONType)
    elapsed_s: Mapped[float | None] = mapped_column(Float)
    input_tokens: Mapped[int | None] = mapped_column(BigInteger)
    output_tokens: Mapped[int | None] = mapped_column(BigInteger)
    cost_usd: Mapped[float | None] = mapped_column(Float)
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=_utcnow)

    __table_args__ = (
        UniqueConstraint(
            "tenant",
            "candidate_trace_id",
            "candidate_span_id",
            "rubric_name",
            name="uq_judge_pairwise_results_candidate",
        ),
        Index("ix_judge_pairwise_results_rollout", "tenant", "rollout", "created_at"),
    )


class ReviewItem(Base):
    """A judged sample put in front of reviewers.

    ``audit``: part of the stratified uniformly random audit subset, chosen with probability
    ``inclusion_probability`` among judged calls of its stratum (agreement and PPI use only these);
    other items (``reason`` ``flagged`` / ``low_score``) are for corrections.
    ``status``: ``pending`` | ``claimed`` | ``labelled``; a claim holds until ``lease_expires_at``.
    """

    __tablename__ = "review_items"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    tenant: Mapped[str] = mapped_column(String(64))
    sample_id: Mapped[int] = mapped_column(ForeignKey("judge_samples.id", ondelete="CASCADE"))
    trace_id: Mapped[str] = mapped_column(String(32))
    span_id: Mapped[str] = mapped_column(String(16))
    call_id: Mapped[str] = mapped_column(String(512))
    rubric: Mapped[str] = mapped_column(String(64))
    audit: Mapped[bool] = mapped_column(Boolean)
    inclusion_probability: Mapped[float | None] = mapped_column(Float)
    stratum: Mapped[str] = mapped_column(String(256))
    reason: Mapped[str] = mapped_column(String(32))
    status: Mapped[str] = mapped_column(String(16))
    lease_owner: Mapped[str | None] = mapped_column(String(128))
    lease_expires_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=_utcnow)
    labelled_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)

    __table_args__ = (
        UniqueConstraint("sample_id", name="uq_review_items_sample_id"),
        Index("ix_review_items_queue", "tenant", "status", "audit", "id"),
    )


class HumanLabel(Base):
    """A reviewer's answer on a review item: a score on the item's rubric, or a skip.

    ``score`` / ``label`` are on the rubric's scale (NULL when skipped); ``corrected_output`` is
    the reviewer's rewritten answer for the fine-tuning flywheel (NULL when none).
    """

    __tablename__ = "human_labels"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    tenant: Mapped[str] = mapped_column(String(64))
    review_item_id: Mapped[int] = mapped_column(ForeignKey("review_items.id", ondelete="CASCADE"))
    reviewer: Mapped[str] = mapped_column(String(128))
    score: Mapped[float | None] = mapped_column(Float)
    label: Mapped[str | None] = mapped_column(String(64))
    comment: Mapped[str | None] = mapped_column(Text)
    corrected_output: Mapped[str | None] = mapped_column(Text)
    skipped: Mapped[bool] = mapped_column(Boolean)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=_utcnow)

    __table_args__ = (Index("ix_human_labels_item", "review_item_id", "created_at"),)
