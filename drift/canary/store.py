"""Rollouts in the store: policy/evidence JSON, create/read, and applying state changes with an
audit record (tables in ``collector.store.models.canary``).

Every change of weights or status bumps ``rollouts.version`` (what the gateway sees) and writes
one ``rollout_decisions`` row (who / what / when / why) in the same transaction. Writers use
optimistic concurrency on ``version``: a change computed from a stale read is refused
(:class:`RolloutConflictError`), so a scheduler look and a manual override never interleave.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, RowMapping, insert, select, update

from collector.store.models.canary import Rollout, RolloutDecision, RolloutOverride
from drift.canary.codec import evidence_to_json, policy_from_json, policy_to_json
from drift.canary.policy import RolloutPolicy, initial_state
from drift.errors import DriftError

#: statuses in which nothing changes any more
FINISHED = ("completed", "rolled_back", "aborted")
STATUSES = ("running", "paused", *FINISHED)
OVERRIDES = ("promote", "rollback", "pause", "resume", "abort")


class RolloutError(DriftError):
    """Root of rollout store errors."""


class RolloutNotFoundError(RolloutError):
    """No rollout of that name for the tenant."""


class RolloutExistsError(RolloutError):
    """A rollout of that name already exists for the tenant."""


class RolloutStateError(RolloutError):
    """The requested change is not allowed in the rollout's current status."""


class RolloutConflictError(RolloutError):
    """The rollout changed since it was read (version mismatch); read again and retry."""


__all__ = ["evidence_to_json", "policy_from_json", "policy_to_json"]  # codec, re-exported


@dataclass(frozen=True)
class RolloutRecord:
    """One ``rollouts`` row. Weights in percent; ``started_unix_nano``: when the rollout's
    clock last (re)started (creation or resume); ``steps``: step entries, the last current."""

    tenant: str
    name: str
    policy: RolloutPolicy
    step_index: int
    candidate_weight_pct: float
    baseline_weight_pct: float
    status: str
    version: int
    steps: tuple[Mapping[str, Any], ...]
    started_unix_nano: int
    created_at: dt.datetime
    updated_at: dt.datetime
    finished_at: dt.datetime | None
    last_evaluated_at: dt.datetime | None
    last_action: str | None
    last_reasons: tuple[str, ...]
    last_evidence: Mapping[str, Any] | None

    def weights(self) -> dict[str, float]:
        """The gateway's weights: variant -> share in [0, 1]."""
        return {
            self.policy.baseline_variant: self.baseline_weight_pct / 100.0,
            self.policy.candidate_variant: self.candidate_weight_pct / 100.0,
        }

    @property
    def data_since_unix_nano(self) -> int:
        """Start of the rollout's first step (unix ns): calls before it are not evidence."""
        return int(self.steps[0]["started_unix_nano"]) if self.steps else self.started_unix_nano


def _record(row: RowMapping) -> RolloutRecord:
    return RolloutRecord(
        tenant=row["tenant"],
        name=row["name"],
        policy=policy_from_json(row["policy"]),
        step_index=row["step_index"],
        candidate_weight_pct=row["candidate_weight_pct"],
        baseline_weight_pct=row["baseline_weight_pct"],
        status=row["status"],
        version=row["version"],
        steps=tuple(row["steps"]),
        started_unix_nano=row["started_unix_nano"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        finished_at=row["finished_at"],
        last_evaluated_at=row["last_evaluated_at"],
        last_action=row["last_action"],
        last_reasons=tuple(row["last_reasons"] or ()),
        last_evidence=row["last_evidence"],
    )


def create_rollout(
    engine: Engine, tenant: str, policy: RolloutPolicy, *, actor: str, now: dt.datetime
) -> RolloutRecord:
    """Insert a running rollout at step 0 (``initial_state``), version 1, with an audit row.

    Raises:
        RolloutExistsError: ``policy.name`` exists for ``tenant``.
        ValueError: ``now`` is naive.
    """
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    now_ns = _ns(now)
    state = initial_state(policy)
    with engine.begin() as conn:
        exists = conn.execute(
            select(Rollout.name).where(Rollout.tenant == tenant, Rollout.name == policy.name)
        ).first()
        if exists:
            raise RolloutExistsError(f"rollout {policy.name!r} already exists")
        conn.execute(
            insert(Rollout).values(
                tenant=tenant,
                name=policy.name,
                baseline_variant=policy.baseline_variant,
                candidate_variant=policy.candidate_variant,
                policy=policy_to_json(policy),
                step_index=state.step_index,
                candidate_weight_pct=state.candidate_weight_pct,
                baseline_weight_pct=state.baseline_weight_pct,
                status=state.status,
                version=1,
                steps=[_step(state.step_index, state.candidate_weight_pct, now_ns)],
                started_unix_nano=now_ns,
                created_at=now,
                updated_at=now,
                created_by=actor,
            )
        )
        conn.execute(
            insert(RolloutDecision).values(
                tenant=tenant,
                rollout=policy.name,
                decided_at=now,
                actor=actor,
                source="manual",
                action="create",
                step_before=state.step_index,
                step_after=state.step_index,
                status_before=state.status,
                status_after=state.status,
                candidate_weight_before=state.candidate_weight_pct,
                candidate_weight_after=state.candidate_weight_pct,
                version=1,
                reasons=["rollout created"],
                evidence=None,
            )
        )
    return get_rollout(engine, tenant, policy.name)


def _ns(t: dt.datetime) -> int:
    return int(t.timestamp() * 1_000_000) * 1000


def _step(index: int, candidate_pct: float, started_ns: int) -> dict[str, Any]:
    return {
        "step_index": index,
        "candidate_weight_pct": candidate_pct,
        "started_unix_nano": started_ns,
    }


def get_rollout(engine: Engine, tenant: str, name: str) -> RolloutRecord:
    """The rollout ``name`` of ``tenant``.

    Raises:
        RolloutNotFoundError: no such rollout.
    """
    with engine.connect() as conn:
        row = (
            conn.execute(
                select(Rollout.__table__).where(Rollout.tenant == tenant, Rollout.name == name)
            )
            .mappings()
            .first()
        )
    if row is None:
        raise RolloutNotFoundError(f"no rollout named {name!r}")
    return _record(row)


def list_rollouts(
    engine: Engine, tenant: str | None, *, statuses: Sequence[str] | None = None
) -> list[RolloutRecord]:
    """Rollouts of ``tenant`` (None: every tenant, for the scheduler), oldest first, optionally
    only those with a status in ``statuses``."""
    query = select(Rollout.__table__).order_by(Rollout.tenant, Rollout.created_at, Rollout.name)
    if tenant is not None:
        query = query.where(Rollout.tenant == tenant)
    if statuses is not None:
        query = query.where(Rollout.status.in_(list(statuses)))
    with engine.connect() as conn:
        return [_record(r) for r in conn.execute(query).mappings()]


@dataclass(frozen=True)
class Transition:
    """A change to apply: new step, weights (percent) and status, and why."""

    action: str
    step_index: int
    candidate_weight_pct: float
    status: str
    reasons: tuple[str, ...]
    new_step: bool = False
    restart_clock: bool = False


def apply_transition(
    engine: Engine,
    record: RolloutRecord,
    change: Transition,
    *,
    actor: str,
    source: str,
    now: dt.datetime,
    evidence: Mapping[str, Any] | None = None,
    override_reason: str | None = None,
) -> tuple[RolloutRecord, int]:
    """Apply ``change`` to the rollout read as ``record``; write the audit row (and the override
    row when ``override_reason`` is given) in the same transaction.

    Returns ``(new record, audit row id)``. ``new_step`` appends a step entry starting ``now``
    (SRM segments and per-step minimums restart); ``restart_clock`` restarts the time limit.

    Raises:
        RolloutConflictError: the row's version is no longer ``record.version``.
        ValueError: a status outside :data:`STATUSES` or a weight outside [0, 100].
    """
    if change.status not in STATUSES:
        raise ValueError(f"change.status must be one of {STATUSES}, got {change.status!r}")
    if not 0.0 <= change.candidate_weight_pct <= 100.0:
        raise ValueError("change.candidate_weight_pct must be in [0, 100]")
    now_ns = _ns(now)
    steps = [dict(s) for s in record.steps]
    if change.new_step:
        steps.append(_step(change.step_index, change.candidate_weight_pct, now_ns))
    values: dict[str, Any] = {
        "step_index": change.step_index,
        "candidate_weight_pct": change.candidate_weight_pct,
        "baseline_weight_pct": 100.0 - change.candidate_weight_pct,
        "status": change.status,
        "version": record.version + 1,
        "steps": steps,
        "updated_at": now,
    }
    if change.restart_clock:
        values["started_unix_nano"] = now_ns
    if change.status in FINISHED and record.status not in FINISHED:
        values["finished_at"] = now
    if evidence is not None:
        values |= {
            "last_evaluated_at": now,
            "last_action": change.action,
            "last_reasons": list(change.reasons),
            "last_evidence": dict(evidence),
        }
    with engine.begin() as conn:
        res = conn.execute(
            update(Rollout)
            .where(
                Rollout.tenant == record.tenant,
                Rollout.name == record.name,
                Rollout.version == record.version,
            )
            .values(**values)
        )
        if res.rowcount != 1:
            raise RolloutConflictError(f"rollout {record.name!r} changed concurrently")
        decision_id = conn.execute(
            insert(RolloutDecision)
            .values(
                tenant=record.tenant,
                rollout=record.name,
                decided_at=now,
                actor=actor,
                source=source,
                action=change.action,
                step_before=record.step_index,
                step_after=change.step_index,
                status_before=record.status,
                status_after=change.status,
                candidate_weight_before=record.candidate_weight_pct,
                candidate_weight_after=change.candidate_weight_pct,
                version=record.version + 1,
                reasons=list(change.reasons),
                evidence=dict(evidence) if evidence is not None else None,
            )
            .returning(RolloutDecision.id)
        ).scalar_one()
        if override_reason is not None:
            conn.execute(
                insert(RolloutOverride).values(
                    tenant=record.tenant,
                    rollout=record.name,
                    action=change.action,
                    reason=override_reason,
                    actor=actor,
                    created_at=now,
                    decision_id=decision_id,
                )
            )
    return get_rollout(engine, record.tenant, record.name), int(decision_id)


def record_look(
    engine: Engine,
    record: RolloutRecord,
    *,
    action: str,
    reasons: Sequence[str],
    evidence: Mapping[str, Any],
    now: dt.datetime,
) -> bool:
    """Store a look that changes nothing (``hold``) on the rollout row; no version bump, no
    audit row. Returns False when the rollout changed since ``record`` was read."""
    with engine.begin() as conn:
        res = conn.execute(
            update(Rollout)
            .where(
                Rollout.tenant == record.tenant,
                Rollout.name == record.name,
                Rollout.version == record.version,
            )
            .values(
                last_evaluated_at=now,
                last_action=action,
                last_reasons=list(reasons),
                last_evidence=dict(evidence),
            )
        )
        return bool(res.rowcount == 1)


def list_decisions(
    engine: Engine, tenant: str, name: str, *, limit: int = 50
) -> list[dict[str, Any]]:
    """The audit log of a rollout, newest first (``limit`` rows), as JSON-ready dicts
    (times ISO 8601 UTC, weights percent)."""
    query = (
        select(RolloutDecision.__table__)
        .where(RolloutDecision.tenant == tenant, RolloutDecision.rollout == name)
        .order_by(RolloutDecision.id.desc())
        .limit(limit)
    )
    with engine.connect() as conn:
        rows = list(conn.execute(query).mappings())
    return [
        {
            "id": r["id"],
            "decided_at": r["decided_at"].isoformat().replace("+00:00", "Z"),
            "actor": r["actor"],
            "source": r["source"],
            "action": r["action"],
            "step_before": r["step_before"],
            "step_after": r["step_after"],
            "status_before": r["status_before"],
            "status_after": r["status_after"],
            "candidate_weight_pct_before": r["candidate_weight_before"],
            "candidate_weight_pct_after": r["candidate_weight_after"],
            "version": r["version"],
            "reasons": list(r["reasons"]),
        }
        for r in rows
    ]
