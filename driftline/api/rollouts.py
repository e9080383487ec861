"""Canary / A-B rollouts: ``/api/v1/rollouts`` (create, list, read, weights, evaluate, override,
decisions, verdict). Statistics and state changes live in ``drift.canary.policy*``; this router only
validates, calls them and maps their errors to HTTP.

Verdict (Argo Rollouts ``web`` metric provider and Flagger webhooks):

- ``GET /api/v1/rollouts/{name}/verdict`` always answers **200** with ``{"pass": bool,
  "decision": ...}``. Argo's web provider treats a non-2xx answer as a measurement *error*
  (counted against ``consecutiveErrorLimit``), not as a failure, so the verdict must be in the
  body: ``successCondition: result.pass == true``,
  ``failureCondition: result.decision == "rollback"``.
- ``POST /api/v1/rollouts/{name}/verdict`` is the Flagger webhook (Flagger POSTs its payload and
  counts any non-2xx as a failed check): **200** when ``pass``, **412** (Precondition Failed)
  otherwise, with the same JSON body.

``gate=guardrail`` (default): pass unless the candidate was rolled back / aborted or the latest
look decided ``rollback`` (no measured harm; Flagger ``rollout`` / Argo background analysis).
``gate=promotion``: pass only when the rollout completed, the latest look promoted, or every
required metric is non-inferior with no SRM (Flagger ``confirm-promotion``). No data never
passes the promotion gate.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Depends, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from collector.auth import ForbiddenError, Principal
from collector.errors import BadRequestError, CollectorError, ConflictError, NotFoundError
from drift.canary.jobs import evaluate_rollout, override_rollout
from drift.canary.observe import check_metric_source
from drift.canary.policy import Direction, MetricKind, MetricPolicy, RolloutPolicy, default_metrics
from drift.canary.store import (
    RolloutConflictError,
    RolloutError,
    RolloutExistsError,
    RolloutNotFoundError,
    RolloutRecord,
    RolloutStateError,
    create_rollout,
    get_rollout,
    list_decisions,
    list_rollouts,
    policy_to_json,
)
from driftline.api.deps import AdminTenant, CurrentPrincipal, ReadTenant, State, get_principal

router = APIRouter(prefix="/api/v1", tags=["rollouts"])

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,255}$")
#: kind of each measurable metric when the request does not say (drift.canary.observe)
_DEFAULT_KIND = {
    "error_rate": MetricKind.RARE_EVENT,
    "refusal_rate": MetricKind.RARE_EVENT,
    "length_finish_rate": MetricKind.PROPORTION,
    "thumbs_down_rate": MetricKind.PROPORTION,
    "pairwise_win_rate": MetricKind.PAIRWISE,
}


async def weights_tenant(request: Request) -> str:
    """Tenant of a caller allowed to read, or to ingest (the gateway uses an ingest key)."""
    principal = await get_principal(request)
    if not (principal.allows("read") or principal.allows("ingest")):
        raise ForbiddenError(f"this API key (role {principal.role}) may not read rollout weights")
    return principal.tenant


WeightsTenant = Annotated[str, Depends(weights_tenant)]


class MetricIn(BaseModel):
    """A guardrail or quality metric; ``kind``/``direction`` default from the name and role."""

    name: str = Field(min_length=1, max_length=128)
    margin: float = Field(ge=0, description="tolerated harm: metric units, or a fraction")
    relative: bool = False
    kind: MetricKind | None = None
    direction: Direction | None = None
    tau: float | None = Field(default=None, gt=0)
    cap: float | None = Field(default=None, gt=0)
    required: bool = True

    def to_policy(self, role: Literal["guardrail", "quality"]) -> MetricPolicy:
        kind = self.kind or _DEFAULT_KIND.get(self.name, MetricKind.MEAN)
        default_dir = Direction.DECREASE_IS_BAD if role == "quality" else Direction.INCREASE_IS_BAD
        return MetricPolicy(
            name=self.name,
            kind=kind,
            direction=self.direction or default_dir,
            margin=self.margin,
            relative=self.relative,
            tau=self.tau,
            cap=self.cap,
            role=role,
            required=self.required,
        )


class RolloutIn(BaseModel):
    """``POST /api/v1/rollouts``. ``guardrails`` omitted: the default guardrails
    (drift.canary.policy.default_metrics); ``quality`` omitted: judge_score (absolute margin 0.2),
    ``null``: no quality metric. Times in seconds, steps in percent of traffic."""

    name: str
    baseline_variant: str = Field(min_length=1, max_length=256)
    candidate_variant: str = Field(min_length=1, max_length=256)
    steps_pct: list[float] = Field(default_factory=lambda: [5.0, 25.0, 50.0, 100.0])
    min_samples_per_step: int = 200
    min_step_duration_s: float = 600.0
    max_duration_s: float = 6 * 3600.0
    guardrails: list[MetricIn] | None = None
    quality: MetricIn | None = None
    alpha: float = 0.05
    srm_alpha: float = 0.001
    #: seconds into a step before an arm with no stored call pauses the rollout (calls of a
    #: slow engine are stored when they finish; until then the rollout holds)
    no_traffic_pause_s: float = 300.0

    def to_policy(self) -> RolloutPolicy:
        defaults = default_metrics()
        if self.guardrails is None:
            metrics = [m for m in defaults if m.role == "guardrail"]
        else:
            metrics = [g.to_policy("guardrail") for g in self.guardrails]
        if "quality" not in self.model_fields_set:
            metrics += [m for m in defaults if m.role == "quality"]
        elif self.quality is not None:
            metrics.append(self.quality.to_policy("quality"))
        policy = RolloutPolicy(
            name=self.name,
            baseline_variant=self.baseline_variant,
            candidate_variant=self.candidate_variant,
            steps_pct=tuple(self.steps_pct),
            min_samples_per_step=self.min_samples_per_step,
            min_step_duration_s=self.min_step_duration_s,
            max_duration_s=self.max_duration_s,
            metrics=tuple(metrics),
            alpha=self.alpha,
            srm_alpha=self.srm_alpha,
            no_traffic_pause_s=self.no_traffic_pause_s,
        )
        for m in policy.metrics:
            check_metric_source(m)
        return policy


class OverrideIn(BaseModel):
    """``POST /api/v1/rollouts/{name}/override``."""

    action: Literal["promote", "rollback", "pause", "resume", "abort"]
    reason: str = Field(min_length=1, max_length=2000)


def _iso(t: dt.datetime | None) -> str | None:
    return None if t is None else t.isoformat().replace("+00:00", "Z")


def _actor(principal: Principal) -> str:
    return f"api-key:{principal.key_id}" if principal.key_id else f"dev:{principal.tenant}"


def rollout_view(r: RolloutRecord, *, evidence: bool) -> dict[str, Any]:
    """JSON of a rollout: state, weights (0..1) and, with ``evidence``, the latest look."""
    out: dict[str, Any] = {
        "name": r.name,
        "baseline_variant": r.policy.baseline_variant,
        "candidate_variant": r.policy.candidate_variant,
        "status": r.status,
        "step_index": r.step_index,
        "steps_pct": list(r.policy.steps_pct),
        "candidate_weight_pct": r.candidate_weight_pct,
        "baseline_weight_pct": r.baseline_weight_pct,
        "weights": r.weights(),
        "version": r.version,
        "created_at": _iso(r.created_at),
        "updated_at": _iso(r.updated_at),
        "finished_at": _iso(r.finished_at),
        "step_started_at": _iso(
            dt.datetime.fromtimestamp(int(r.steps[-1]["started_unix_nano"]) / 1e9, dt.UTC)
        )
        if r.steps
        else None,
        "latest": {
            "evaluated_at": _iso(r.last_evaluated_at),
            "decision": r.last_action,
            "reasons": list(r.last_reasons),
        },
    }
    if evidence:
        out["policy"] = policy_to_json(r.policy)
        out["latest"]["evidence"] = r.last_evidence
    return out


def _get(state: State, tenant: str, name: str) -> RolloutRecord:
    try:
        return get_rollout(state.engine, tenant, name)
    except RolloutNotFoundError as exc:
        raise NotFoundError(str(exc)) from None


def _client_error(exc: Exception) -> CollectorError:
    """409 for a state conflict (exists, wrong status, concurrent change), 404 for a missing
    rollout, else 400."""
    if isinstance(exc, RolloutExistsError | RolloutStateError | RolloutConflictError):
        return ConflictError(str(exc))
    if isinstance(exc, RolloutNotFoundError):
        return NotFoundError(str(exc))
    return BadRequestError(str(exc))


@router.post("/rollouts", status_code=201, summary="Start a canary / A-B rollout")
def post_rollout(
    state: State, tenant: AdminTenant, principal: CurrentPrincipal, body: RolloutIn
) -> JSONResponse:
    if not _NAME.match(body.name):
        raise BadRequestError("name must match [A-Za-z0-9][A-Za-z0-9._-]{0,255}")
    try:
        policy = body.to_policy()
        record = create_rollout(
            state.engine, tenant, policy, actor=_actor(principal), now=dt.datetime.now(dt.UTC)
        )
    except (ValueError, RolloutError) as exc:
        raise _client_error(exc) from None
    return JSONResponse(rollout_view(record, evidence=True), status_code=201)


@router.get("/rollouts", summary="List rollouts")
def get_rollouts(
    state: State,
    tenant: ReadTenant,
    status: Annotated[str | None, Query(description="only this status")] = None,
) -> dict[str, Any]:
    records = list_rollouts(state.engine, tenant, statuses=[status] if status else None)
    return {"items": [rollout_view(r, evidence=False) for r in records], "next_cursor": None}


@router.get("/rollouts/{name}", summary="A rollout: state, weights, latest evidence")
def get_rollout_route(state: State, tenant: ReadTenant, name: str) -> dict[str, Any]:
    return rollout_view(_get(state, tenant, name), evidence=True)


@router.get("/rollouts/{name}/weights", summary="Traffic weights the gateway applies")
def get_weights(state: State, tenant: WeightsTenant, name: str) -> dict[str, Any]:
    record = _get(state, tenant, name)
    return {"rollout": record.name, "weights": record.weights(), "version": record.version}


@router.get("/rollouts/{name}/decisions", summary="Audit log, newest first")
def get_decisions(
    state: State,
    tenant: ReadTenant,
    name: str,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
) -> dict[str, Any]:
    _get(state, tenant, name)
    return {"items": list_decisions(state.engine, tenant, name, limit=limit), "next_cursor": None}


@router.post("/rollouts/{name}/evaluate", summary="Look now (and apply the decision)")
def post_evaluate(
    state: State,
    tenant: AdminTenant,
    principal: CurrentPrincipal,
    name: str,
    apply: bool = True,
) -> dict[str, Any]:
    record = _get(state, tenant, name)
    try:
        outcome = evaluate_rollout(
            state.engine,
            record,
            now=dt.datetime.now(dt.UTC),
            actor=_actor(principal),
            apply=apply,
        )
    except (ValueError, RolloutError) as exc:
        raise _client_error(exc) from None
    return {
        "decision": outcome.decision.action.value,
        "reasons": list(outcome.decision.reasons),
        "applied": outcome.applied,
        "decision_id": outcome.decision_id,
        "kayenta_score": outcome.decision.evidence.kayenta_score,
        "rollout": rollout_view(outcome.rollout, evidence=False),
    }


@router.post("/rollouts/{name}/override", summary="Manual promote/rollback/pause/resume/abort")
def post_override(
    state: State, tenant: AdminTenant, principal: CurrentPrincipal, name: str, body: OverrideIn
) -> dict[str, Any]:
    _get(state, tenant, name)
    try:
        record, decision_id = override_rollout(
            state.engine,
            tenant,
            name,
            body.action,
            body.reason,
            actor=_actor(principal),
            now=dt.datetime.now(dt.UTC),
        )
    except (ValueError, RolloutError) as exc:
        raise _client_error(exc) from None
    return {"decision_id": decision_id, "rollout": rollout_view(record, evidence=False)}


def verdict(record: RolloutRecord, gate: str) -> dict[str, Any]:
    """The verdict body (module docstring: gates and their meaning)."""
    harmed = record.status in ("rolled_back", "aborted") or record.last_action == "rollback"
    if gate == "guardrail":
        passed = not harmed
    else:
        ev = record.last_evidence or {}
        required = {m.name for m in record.policy.metrics if m.required}
        metrics = [m for m in ev.get("metrics", []) if m.get("name") in required]
        srm_ok = not (ev.get("srm_gate") or {}).get("mismatch", True)
        all_pass = bool(metrics) and all(m.get("status") == "pass" for m in metrics)
        passed = not harmed and (
            record.status == "completed"
            or record.last_action == "promote"
            or (srm_ok and all_pass and len(metrics) == len(required))
        )
    ev = record.last_evidence or {}
    return {
        "rollout": record.name,
        "gate": gate,
        "pass": passed,
        "decision": record.last_action,
        "status": record.status,
        "step_index": record.step_index,
        "candidate_weight_pct": record.candidate_weight_pct,
        "version": record.version,
        "evaluated_at": _iso(record.last_evaluated_at),
        "kayenta_score": ev.get("kayenta_score"),
        "reasons": list(record.last_reasons),
    }


Gate = Annotated[Literal["guardrail", "promotion"], Query()]


@router.get("/rollouts/{name}/verdict", summary="Verdict for Argo Rollouts (always 200)")
def get_verdict(
    state: State, tenant: ReadTenant, name: str, gate: Gate = "guardrail"
) -> dict[str, Any]:
    return verdict(_get(state, tenant, name), gate)


@router.post("/rollouts/{name}/verdict", summary="Flagger webhook: 200 pass, 412 fail")
def post_verdict(
    state: State,
    tenant: ReadTenant,
    name: str,
    gate: Gate = "guardrail",
    payload: Annotated[dict[str, Any] | None, Body()] = None,
) -> JSONResponse:
    body = verdict(_get(state, tenant, name), gate)
    return JSONResponse(body, status_code=200 if body["pass"] else 412)
