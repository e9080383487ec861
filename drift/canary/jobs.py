"""Evaluating stored rollouts and applying decisions: the collector's scheduled canary job.

One look at a running rollout (:func:`evaluate_rollout`): observations from the store
(:func:`drift.canary.observe.load_observations`) -> ``build_evidence`` -> ``decide`` ->
``next_weights``; a change of weights or status is applied with an audit record
(:func:`drift.canary.store.apply_transition`), a ``hold`` only updates the latest evidence.
Promote, rollback and inconclusive emit an alert event (``canary_promote`` /
``canary_rollback`` / ``canary_inconclusive``). Manual overrides (:func:`override_rollout`) go
through the same audited path. Paused and finished rollouts are not evaluated by the job.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict
from sqlalchemy import Engine

from collector.scheduler import Job, JobContext
from drift.canary.evidence import build_evidence
from drift.canary.observe import load_observations
from drift.canary.policy import Action, Decision, RolloutState, decide, next_weights
from drift.canary.store import (
    FINISHED,
    OVERRIDES,
    RolloutConflictError,
    RolloutRecord,
    RolloutStateError,
    Transition,
    apply_transition,
    evidence_to_json,
    get_rollout,
    list_rollouts,
    record_look,
)

log = logging.getLogger(__name__)

#: alert event kind per applied automatic action (alerts.rules.EventKind)
EVENT_KINDS: dict[str, str] = {
    "promote": "canary_promote",
    "rollback": "canary_rollback",
    "inconclusive": "canary_inconclusive",
}


class CanarySettings(BaseSettings):
    """Canary job settings (env prefix ``DRIFTLINE_CANARY_``)."""

    model_config = SettingsConfigDict(env_prefix="DRIFTLINE_CANARY_")

    enabled: bool = Field(default=True, description="Evaluate running rollouts on a schedule.")
    interval_s: float = Field(default=60.0, gt=0, description="Seconds between looks.")
    bucket_s: float = Field(
        default=60.0, gt=0, description="Interval length (s) of count metrics inside a step."
    )


@dataclass(frozen=True)
class EvaluationOutcome:
    """One look: the decision, the rollout after it, whether it changed the rollout, and the
    audit row id when it did."""

    decision: Decision
    rollout: RolloutRecord
    applied: bool
    decision_id: int | None


def _state(record: RolloutRecord) -> RolloutState:
    status = record.status if record.status in ("running", "paused", "completed") else "rolled_back"
    return RolloutState(
        record.step_index,
        record.candidate_weight_pct,
        record.baseline_weight_pct,
        status,  # type: ignore[arg-type]
    )


def decision_transition(record: RolloutRecord, decision: Decision) -> Transition | None:
    """The change ``decision`` makes to ``record`` via ``next_weights`` (None: nothing changes).

    A promote to a new step starts a new step entry (per-step minimums and SRM segment).
    """
    before = _state(record)
    after = next_weights(record.policy, before, decision)
    if after == before:
        return None
    return Transition(
        action=decision.action.value,
        step_index=after.step_index,
        candidate_weight_pct=after.candidate_weight_pct,
        status=after.status,
        reasons=decision.reasons,
        new_step=after.step_index != before.step_index and after.status == "running",
    )


def override_transition(record: RolloutRecord, action: str, reason: str) -> Transition:
    """The change a manual override makes.

    promote: next step (after the last, or at 100 %: ``completed``), status running;
    rollback: candidate 0 %, ``rolled_back``; abort: candidate 0 %, ``aborted``;
    pause: running -> paused; resume: paused -> running, restarting the step and the time limit.

    Raises:
        ValueError: unknown ``action`` or empty ``reason``.
        RolloutStateError: the rollout is finished, or pause/resume from the wrong status.
    """
    if action not in OVERRIDES:
        raise ValueError(f"action must be one of {', '.join(OVERRIDES)}, got {action!r}")
    if not reason.strip():
        raise ValueError("reason must be non-empty")
    if record.status in FINISHED:
        raise RolloutStateError(f"rollout {record.name!r} is {record.status}; nothing to {action}")
    reasons = (f"manual {action}: {reason}",)
    step, weight = record.step_index, record.candidate_weight_pct
    if action == "promote":
        steps = record.policy.steps_pct
        if step + 1 >= len(steps) or steps[step + 1] >= 100.0:
            return Transition(action, min(step + 1, len(steps) - 1), 100.0, "completed", reasons)
        return Transition(action, step + 1, steps[step + 1], "running", reasons, new_step=True)
    if action in ("rollback", "abort"):
        status = "rolled_back" if action == "rollback" else "aborted"
        return Transition(action, step, 0.0, status, reasons)
    if action == "pause":
        if record.status != "running":
            raise RolloutStateError(f"rollout {record.name!r} is {record.status}, not running")
        return Transition(action, step, weight, "paused", reasons)
    if record.status != "paused":
        raise RolloutStateError(f"rollout {record.name!r} is {record.status}, not paused")
    return Transition(action, step, weight, "running", reasons, new_step=True, restart_clock=True)


def emit_canary_event(engine: Engine, record: RolloutRecord, action: str, reasons: Any) -> None:
    """THE call site of ``alerts.events.emit_event`` for canary decisions.

    Emits ``canary_promote`` / ``canary_rollback`` / ``canary_inconclusive`` with labels
    ``rollout``, ``baseline``, ``candidate`` and the first reasons as annotation. Never raises:
    an alerting failure must not undo an applied decision (logged instead).
    """
    kind = EVENT_KINDS.get(action)
    if kind is None:
        return
    labels = {
        "rollout": record.name,
        "baseline": record.policy.baseline_variant,
        "candidate": record.policy.candidate_variant,
    }
    annotations = {
        "summary": f"canary {record.name}: {action} (status {record.status})",
        "reasons": "; ".join(str(r) for r in list(reasons)[:5]),
    }
    try:
        from collector.store.events import emit_event

        emit_event(
            engine,
            record.tenant,
            kind,
            labels=labels,
            annotations=annotations,
            at=dt.datetime.now(dt.UTC).timestamp(),
            value=record.candidate_weight_pct,
        )
    except Exception:
        log.exception("rollout %s/%s: could not emit %s", record.tenant, record.name, kind)


def evaluate_rollout(
    engine: Engine,
    record: RolloutRecord,
    *,
    now: dt.datetime,
    actor: str = "scheduler",
    bucket_s: float = 60.0,
    apply: bool = True,
    emit: Callable[[Engine, RolloutRecord, str, Any], None] = emit_canary_event,
) -> EvaluationOutcome:
    """One look at ``record`` at time ``now`` (tz-aware).

    Running rollouts with ``apply``: the decision is applied (audit row, version bump, alert
    event) or, for ``hold``, stored as the latest evidence. Otherwise the decision is only
    returned (``applied`` False).

    Raises:
        RolloutConflictError: the rollout changed while this look ran (nothing written).
        ValueError: naive ``now`` or a policy metric the store cannot measure.
    """
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    now_ns = int(now.timestamp() * 1_000_000) * 1000
    obs = load_observations(engine, record, now_ns=now_ns, bucket_s=bucket_s)
    evidence = build_evidence(obs, record.policy)
    decision = decide(evidence, record.policy)
    if not apply or record.status != "running":
        return EvaluationOutcome(decision, record, False, None)
    payload = evidence_to_json(evidence)
    change = decision_transition(record, decision)
    if change is None:
        if not record_look(
            engine,
            record,
            action=decision.action.value,
            reasons=decision.reasons,
            evidence=payload,
            now=now,
        ):
            raise RolloutConflictError(f"rollout {record.name!r} changed concurrently")
        return EvaluationOutcome(
            decision, get_rollout(engine, record.tenant, record.name), False, None
        )
    after, decision_id = apply_transition(
        engine, record, change, actor=actor, source="auto", now=now, evidence=payload
    )
    log.info(
        "rollout %s/%s: %s -> step %d, candidate %.1f %%, %s",
        record.tenant,
        record.name,
        decision.action.value,
        after.step_index,
        after.candidate_weight_pct,
        after.status,
    )
    if decision.action in (Action.PROMOTE, Action.ROLLBACK, Action.INCONCLUSIVE):
        emit(engine, after, decision.action.value, decision.reasons)
    return EvaluationOutcome(decision, after, True, decision_id)


def override_rollout(
    engine: Engine,
    tenant: str,
    name: str,
    action: str,
    reason: str,
    *,
    actor: str,
    now: dt.datetime,
) -> tuple[RolloutRecord, int]:
    """Apply a manual override (audited in ``rollout_decisions`` and ``rollout_overrides``).

    Returns ``(rollout after, audit row id)``; promote / rollback / abort emit alert events.

    Raises:
        RolloutNotFoundError, RolloutStateError, RolloutConflictError, ValueError (see
        :func:`override_transition`).
    """
    record = get_rollout(engine, tenant, name)
    change = override_transition(record, action, reason)
    after, decision_id = apply_transition(
        engine, record, change, actor=actor, source="manual", now=now, override_reason=reason
    )
    if action in ("promote", "rollback", "abort"):
        emit_canary_event(
            engine, after, "rollback" if action == "abort" else action, change.reasons
        )
    return after, decision_id


def evaluate_running(
    engine: Engine, *, now: dt.datetime, bucket_s: float = 60.0
) -> list[EvaluationOutcome]:
    """Evaluate every running rollout of every tenant; one failing rollout is logged and
    skipped (the others still run)."""
    outcomes = []
    for record in list_rollouts(engine, None, statuses=("running",)):
        try:
            outcomes.append(evaluate_rollout(engine, record, now=now, bucket_s=bucket_s))
        except Exception:
            log.exception("rollout %s/%s: evaluation failed", record.tenant, record.name)
    return outcomes


def jobs(settings: Any) -> list[Job]:
    """The collector's canary job (``DRIFTLINE_CANARY_*`` settings read here, at start-up)."""
    canary = CanarySettings()
    if not canary.enabled:
        return []

    def run(ctx: JobContext) -> None:
        evaluate_running(ctx.engine, now=dt.datetime.now(dt.UTC), bucket_s=canary.bucket_s)

    return [Job("canary-evaluate", canary.interval_s, run, initial_delay_s=canary.interval_s)]
