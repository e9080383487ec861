"""Tables of canary / A-B rollouts (drift.canary.store reads and writes them).

- ``rollouts``: one row per (tenant, rollout name): the policy
  (``drift.canary.policy.RolloutPolicy`` as
  JSON), the current step, weights in percent, status, a ``version`` bumped on every change of
  weights or status (the gateway reads it), the step history (start times, for the SRM gate) and
  the latest evaluation.
- ``rollout_decisions``: the audit log: who (``actor``), what (action, weights and status before
  and after), when (``decided_at``), why (``reasons``, ``evidence``). One row per applied
  decision (automatic promote / rollback / inconclusive, every manual override); evaluations
  that only ``hold`` update ``rollouts.last_*`` and write no row.
- ``rollout_overrides``: manual overrides as requested (action, reason, actor), linked to the
  decision row they produced.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import BigInteger, Float, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from collector.store.models.base import Base, _utcnow
from collector.store.types import JSONType, UTCDateTime


class Rollout(Base):
    """A rollout of ``candidate_variant`` against ``baseline_variant``.

    ``status``: ``running`` | ``paused`` | ``completed`` | ``rolled_back`` | ``aborted``.
    ``steps``: ``[{"step_index", "candidate_weight_pct", "started_unix_nano"}, ...]``, one entry
    per step entered (the last is the current one).
    """

    __tablename__ = "rollouts"

    tenant: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(256), primary_key=True)
    baseline_variant: Mapped[str] = mapped_column(String(256))
    candidate_variant: Mapped[str] = mapped_column(String(256))
    policy: Mapped[dict[str, Any]] = mapped_column(JSONType)
    step_index: Mapped[int] = mapped_column(Integer)
    candidate_weight_pct: Mapped[float] = mapped_column(Float)
    baseline_weight_pct: Mapped[float] = mapped_column(Float)
    status: Mapped[str] = mapped_column(String(16))
    version: Mapped[int] = mapped_column(Integer)
    steps: Mapped[list[Any]] = mapped_column(JSONType)
    started_unix_nano: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=_utcnow)
    updated_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=_utcnow)
    finished_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    last_evaluated_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    last_action: Mapped[str | None] = mapped_column(String(16))
    last_reasons: Mapped[list[Any] | None] = mapped_column(JSONType)
    last_evidence: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    created_by: Mapped[str | None] = mapped_column(Text)

    __table_args__ = (Index("ix_rollouts_status", "status"),)


class RolloutDecision(Base):
    """One applied decision (audit record). ``source``: ``auto`` (scheduler / evaluate) or
    ``manual`` (override); weights are percent; ``evidence`` is the look's Evidence as JSON
    (None for manual overrides without an evaluation)."""

    __tablename__ = "rollout_decisions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    tenant: Mapped[str] = mapped_column(String(64))
    rollout: Mapped[str] = mapped_column(String(256))
    decided_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=_utcnow)
    actor: Mapped[str] = mapped_column(Text)
    source: Mapped[str] = mapped_column(String(16))
    action: Mapped[str] = mapped_column(String(16))
    step_before: Mapped[int] = mapped_column(Integer)
    step_after: Mapped[int] = mapped_column(Integer)
    status_before: Mapped[str] = mapped_column(String(16))
    status_after: Mapped[str] = mapped_column(String(16))
    candidate_weight_before: Mapped[float] = mapped_column(Float)
    candidate_weight_after: Mapped[float] = mapped_column(Float)
    version: Mapped[int] = mapped_column(Integer)
    reasons: Mapped[list[Any]] = mapped_column(JSONType)
    evidence: Mapped[dict[str, Any] | None] = mapped_column(JSONType)

    __table_args__ = (Index("ix_rollout_decisions_rollout", "tenant", "rollout", "decided_at"),)


class RolloutOverride(Base):
    """A manual override request: ``promote`` | ``rollback`` | ``pause`` | ``resume`` |
    ``abort`` with a reason; ``decision_id`` is the audit row it produced."""

    __tablename__ = "rollout_overrides"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    tenant: Mapped[str] = mapped_column(String(64))
    rollout: Mapped[str] = mapped_column(String(256))
    action: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str] = mapped_column(Text)
    actor: Mapped[str] = mapped_column(Text)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=_utcnow)
    decision_id: Mapped[int | None] = mapped_column(Integer)

    __table_args__ = (Index("ix_rollout_overrides_rollout", "tenant", "rollout", "created_at"),)
