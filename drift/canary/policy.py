"""Canary / A-B rollout policy and the pure decision engine.

``build_evidence(observations, policy)`` turns per-arm observations into anytime-valid evidence
(SRM gate, one harm test and one non-inferiority test per metric); ``decide(evidence, policy)``
maps evidence to ``promote | hold | rollback | inconclusive``; ``next_weights(policy, state,
decision)`` gives the traffic split to apply. Applying it (gateway weights, audit row) is the
caller's job. Method choices: ``docs/reference/drift-canary-judge-methods.md`` sections 2.3,
2.4 and 5 (ii).

Decision rule (reference section 5 (ii)), with K metrics and ``threshold = K / alpha``
(e-Bonferroni, valid at every look):

1. An arm without stored calls in the current step -> ``hold`` while its calls may still be in
   flight (calls are stored when they finish: a slow engine takes tens of seconds); ``inconclusive``
   ("insufficient canary data", the rollout pauses) only on evidence that traffic should have
   arrived and did not: the gateway's own routing counts when the caller has them, else the
   step's minimum time and ``no_traffic_pause_s`` both passed and the other arm's traffic
   implies >= 10 calls for it (or the time limit). Missing data is not measured harm (case 25
   B/C), and routing needs a human.
2. SRM gate: Dirichlet-multinomial e-value >= 1/srm_alpha -> ``rollback`` (assignment is
   broken, e.g. the gateway drops canary requests; no metric is trusted).
3. Any metric's harm e-value (null: harm <= tolerated margin) >= threshold -> ``rollback``;
   a required metric without data -> ``inconclusive`` / ``hold`` as in 1.
4. Step minimum samples (both arms) and minimum time not reached -> ``hold``.
5. Every required metric's non-inferiority e-value (null: harm >= margin) >= threshold ->
   ``promote``. (One-sided version of "confidence-sequence bound inside the margin".)
6. Time limit reached -> ``inconclusive``; otherwise ``hold``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Literal

from drift.canary.observations import (
    CanaryObservations,
    CountObservations,
    Observations,
    RatioObservations,
    SampleObservations,
    StepAssignment,
    to_float_array,
)
from drift.canary.sequential import SequentialResult
from drift.canary.srm import SrmChiSquareResult, SrmSequentialResult


class MetricKind(StrEnum):
    """How a metric's observations look and which test applies."""

    MEAN = "mean"  # per-request values: ttft_s, tpot_s, judge score, cost_usd per request
    PROPORTION = "proportion"  # per-interval events/trials, Gaussian mixture on p_B - c p_A
    RARE_EVENT = "rare_event"  # per-interval events/trials, conditional count e-value
    RATIO = "ratio"  # per-unit numerator/denominator (sessions), delta method
    PAIRWISE = "pairwise"  # candidate-vs-baseline judge outcomes: win 1, tie 0.5, loss 0


class Direction(StrEnum):
    INCREASE_IS_BAD = "increase_is_bad"
    DECREASE_IS_BAD = "decrease_is_bad"


class Action(StrEnum):
    PROMOTE = "promote"
    HOLD = "hold"
    ROLLBACK = "rollback"
    INCONCLUSIVE = "inconclusive"


__all__ = [
    "CanaryObservations",
    "CountObservations",
    "Observations",
    "RatioObservations",
    "SampleObservations",
    "StepAssignment",
    "to_float_array",
]


@dataclass(frozen=True)
class MetricPolicy:
    """One guardrail or quality metric.

    ``margin``: tolerated harm, >= 0; in metric units (seconds, USD, rate points) or, with
    ``relative=True``, as a fraction of the baseline value (0.1 = 10 % worse is tolerated).
    ``rare_event`` metrics need a relative margin (rate ratio ``1 + margin``); ``pairwise``
    metrics an absolute one on the win rate (null 0.5 - margin). ``tau``: Gaussian-mixture
    prior scale in contrast units (~ the effect you care about); None -> the margin in units
    (relative margins use the current baseline estimate, a plug-in). ``cap``: values above are
    capped before averaging (seconds / USD). ``required=False`` lets the metric lack data
    without blocking promotion (e.g. sparse thumbs-down feedback).
    """

    name: str
    kind: MetricKind
    direction: Direction
    margin: float
    relative: bool = False
    tau: float | None = None
    cap: float | None = None
    role: Literal["guardrail", "quality"] = "guardrail"
    required: bool = True

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("name must be non-empty")
        if not (self.margin >= 0 and math.isfinite(self.margin)):
            raise ValueError(f"margin of {self.name} must be finite and >= 0")
        if self.tau is not None and not self.tau > 0:
            raise ValueError(f"tau of {self.name} must be positive")
        if self.kind is MetricKind.RARE_EVENT and not self.relative:
            raise ValueError(f"margin of rare_event metric {self.name} must be relative")
        if self.kind is MetricKind.PAIRWISE and (
            self.relative or self.direction is not Direction.DECREASE_IS_BAD
        ):
            raise ValueError(
                f"pairwise metric {self.name} needs an absolute margin, decrease_is_bad"
            )
        if self.relative and self.direction is Direction.DECREASE_IS_BAD and self.margin >= 1:
            raise ValueError(f"relative margin of {self.name} must be < 1 for decrease_is_bad")
        if self.margin == 0 and self.tau is None and self.kind is not MetricKind.RARE_EVENT:
            raise ValueError(f"tau of {self.name} is required when margin is 0")


def default_metrics() -> tuple[MetricPolicy, ...]:
    """The issue's guardrails plus judge score as quality metric (margins are starting points)."""
    inc, dec = Direction.INCREASE_IS_BAD, Direction.DECREASE_IS_BAD
    return (
        MetricPolicy("ttft_s", MetricKind.MEAN, inc, 0.10, relative=True, cap=30.0),
        MetricPolicy("tpot_s", MetricKind.MEAN, inc, 0.10, relative=True, cap=2.0),
        # rare events roll back when clearly worse, but cannot block a promotion: with zero
        # events in both arms non-inferiority can never be shown
        MetricPolicy("error_rate", MetricKind.RARE_EVENT, inc, 0.5, relative=True, required=False),
        MetricPolicy(
            "refusal_rate", MetricKind.RARE_EVENT, inc, 0.5, relative=True, required=False
        ),
        MetricPolicy("length_finish_rate", MetricKind.PROPORTION, inc, 0.02),
        MetricPolicy("thumbs_down_rate", MetricKind.PROPORTION, inc, 0.03, required=False),
        # self-hosted variants are often unpriced (cost null): no data must not block
        MetricPolicy("cost_usd", MetricKind.MEAN, inc, 0.10, relative=True, required=False),
        MetricPolicy("judge_score", MetricKind.MEAN, dec, 0.2, role="quality"),
    )


@dataclass(frozen=True)
class RolloutPolicy:
    """A rollout: candidate weight steps in percent (increasing, last 100), per-step minimum
    samples (each arm) and time (s), overall time limit (s), family alpha, SRM gate alpha."""

    name: str
    baseline_variant: str
    candidate_variant: str
    steps_pct: tuple[float, ...] = (5.0, 25.0, 50.0, 100.0)
    min_samples_per_step: int = 200
    min_step_duration_s: float = 600.0
    max_duration_s: float = 6 * 3600.0
    metrics: tuple[MetricPolicy, ...] = field(default_factory=default_metrics)
    alpha: float = 0.05
    srm_alpha: float = 0.001
    #: seconds into a step before an arm without stored calls counts as missing traffic
    no_traffic_pause_s: float = 300.0

    def __post_init__(self) -> None:
        if not self.steps_pct or any(not 0 < s <= 100 for s in self.steps_pct):
            raise ValueError("steps_pct must be non-empty percentages in (0, 100]")
        if list(self.steps_pct) != sorted(set(self.steps_pct)) or self.steps_pct[-1] != 100:
            raise ValueError("steps_pct must be strictly increasing and end at 100")
        if self.baseline_variant == self.candidate_variant:
            raise ValueError("candidate_variant must differ from baseline_variant")
        if self.min_samples_per_step < 2:
            raise ValueError("min_samples_per_step must be >= 2")
        if self.min_step_duration_s < 0 or self.max_duration_s <= 0:
            raise ValueError("min_step_duration_s must be >= 0 and max_duration_s > 0")
        if not self.no_traffic_pause_s >= 0:
            raise ValueError("no_traffic_pause_s must be >= 0")
        if not 0 < self.alpha < 1 or not 0 < self.srm_alpha < 1:
            raise ValueError("alpha and srm_alpha must be in (0, 1)")
        names = [m.name for m in self.metrics]
        if not names or len(names) != len(set(names)):
            raise ValueError("metrics must be non-empty with unique names")


MetricStatus = Literal["fail", "pass", "undecided", "no_data"]


@dataclass(frozen=True)
class MetricEvidence:
    """Per-metric evidence: ``harm`` (rollback) and ``non_inferiority`` (promote) e-tests;
    ``mann_whitney_pvalue`` is a fixed-n one-sided report (Kayenta-style), never decisive;
    ``tail``: for capped mean metrics (latency, cost), the anytime-valid test that the
    candidate exceeds each stratum's pooled 90th percentile more often than its traffic share
    implies (distribution, not mean; reported, not decisive)."""

    name: str
    role: str
    kind: str
    direction: str
    status: MetricStatus
    threshold: float
    harm: SequentialResult | None
    non_inferiority: SequentialResult | None
    baseline_value: float | None
    candidate_value: float | None
    n_baseline: int
    n_candidate: int
    mann_whitney_pvalue: float | None
    reason: str
    tail: SequentialResult | None = None


@dataclass(frozen=True)
class Evidence:
    """All evidence at one look. ``kayenta_score``: 100 * share of metrics not failing, with
    no-data metrics counted as failing (Kayenta's NodataFailMetric); None without metrics.
    ``step_routed``: the gateway's routing counts for the current step, when known."""

    step_index: int
    elapsed_s: float
    step_elapsed_s: float
    step_baseline_count: int
    step_candidate_count: int
    srm_gate: SrmSequentialResult
    srm_report: SrmChiSquareResult | None
    metrics: tuple[MetricEvidence, ...]
    alpha: float
    threshold: float
    kayenta_score: float | None
    step_routed: StepAssignment | None = None


@dataclass(frozen=True)
class Decision:
    action: Action
    reasons: tuple[str, ...]
    evidence: Evidence


@dataclass(frozen=True)
class RolloutState:
    """Current step and weights (percent) of a rollout."""

    step_index: int
    candidate_weight_pct: float
    baseline_weight_pct: float
    status: Literal["running", "paused", "completed", "rolled_back"] = "running"


def _time_limit(evidence: Evidence, policy: RolloutPolicy) -> bool:
    return evidence.elapsed_s >= policy.max_duration_s


#: an arm with zero requests is a finding only once the other arm's traffic implies at least
#: this many requests for it (else it is just early: few requests at a small weight)
EMPTY_ARM_MIN_EXPECTED = 10.0


def _expected_in_empty_arm(
    evidence: Evidence, policy: RolloutPolicy, counts: StepAssignment | None = None
) -> float:
    """Requests the empty arm should have received given the other arm's count (stored calls,
    or ``counts``) and the current step's weights (0 when both arms are empty)."""
    steps = policy.steps_pct
    w = steps[min(evidence.step_index, len(steps) - 1)] / 100.0
    nb, nc = evidence.step_baseline_count, evidence.step_candidate_count
    if counts is not None:
        nb, nc = counts.baseline_count, counts.candidate_count
    if nc == 0 and nb > 0:
        return math.inf if w >= 1 else nb * w / (1 - w)
    if nb == 0 and nc > 0:
        return math.inf if w <= 0 else nc * (1 - w) / w
    return 0.0


def _traffic_missing(
    evidence: Evidence, policy: RolloutPolicy, waited: bool, both_empty: bool
) -> bool:
    """Evidence that an empty arm's traffic should have arrived (rule 1 of the module doc)."""
    routed = evidence.step_routed
    if routed is not None:  # the gateway's own counts: routed calls not stored are in flight
        expected = _expected_in_empty_arm(evidence, policy, routed)
        return waited and expected >= EMPTY_ARM_MIN_EXPECTED
    if not waited or evidence.step_elapsed_s < policy.no_traffic_pause_s:
        return False
    return both_empty or _expected_in_empty_arm(evidence, policy) >= EMPTY_ARM_MIN_EXPECTED


def decide(evidence: Evidence, policy: RolloutPolicy) -> Decision:
    """Map one look's evidence to an action (rule in the module docstring, reference 5 (ii)).

    Pure; never raises on missing data: no-data arms or metrics give ``hold`` early and
    ``inconclusive`` once the step's minimum time or the time limit has passed, never
    ``promote``. Returns ``Decision(action, reasons, evidence)``.
    """
    limit = _time_limit(evidence, policy)
    waited = evidence.step_elapsed_s >= policy.min_step_duration_s or limit
    srm = evidence.srm_gate
    srm_reason = (
        f"sample ratio mismatch: SRM e-value {srm.e_value:.3g} >= 1/{policy.srm_alpha:g}; "
        "metric evidence is not trusted"
    )
    empty: list[str] = []
    if evidence.step_candidate_count == 0:
        empty.append("insufficient canary data: no candidate calls stored yet in this step")
    if evidence.step_baseline_count == 0:
        empty.append("insufficient baseline data: no baseline calls stored yet in this step")
    if empty:
        # An empty arm is missing data, not a measured harm (case 25 B/C): a human looks once
        # traffic should have arrived and did not; until then its calls may be in flight: hold.
        reasons = (*empty, srm_reason) if srm.mismatch else tuple(empty)
        conclusive = limit or _traffic_missing(evidence, policy, waited, len(empty) == 2)
        if not conclusive:
            reasons = (*reasons, "holding: calls of this step may still be in flight")
        return Decision(Action.INCONCLUSIVE if conclusive else Action.HOLD, reasons, evidence)
    if srm.mismatch:
        return Decision(Action.ROLLBACK, (srm_reason,), evidence)
    failing = [m for m in evidence.metrics if m.status == "fail"]
    if failing:
        return Decision(Action.ROLLBACK, tuple(m.reason for m in failing), evidence)
    required = {m.name for m in policy.metrics if m.required}
    missing = [m.reason for m in evidence.metrics if m.status == "no_data" and m.name in required]
    if missing:
        # a required metric without values yet (e.g. TTFT of two requests) is early, not a
        # finding: hold until the time limit, then hand it to a human
        return Decision(Action.INCONCLUSIVE if limit else Action.HOLD, tuple(missing), evidence)

    waiting: list[str] = []
    n_min = policy.min_samples_per_step
    if min(evidence.step_baseline_count, evidence.step_candidate_count) < n_min:
        waiting.append(
            f"step samples baseline={evidence.step_baseline_count} "
            f"candidate={evidence.step_candidate_count} below minimum {n_min}"
        )
    if evidence.step_elapsed_s < policy.min_step_duration_s:
        waiting.append(
            f"step time {evidence.step_elapsed_s:.0f} s below minimum "
            f"{policy.min_step_duration_s:.0f} s"
        )
    open_metrics = [m for m in evidence.metrics if m.name in required and m.status != "pass"]
    if not waiting and not open_metrics:
        return Decision(
            Action.PROMOTE,
            tuple(m.reason for m in evidence.metrics if m.status == "pass"),
            evidence,
        )
    reasons = tuple(waiting + [m.reason for m in open_metrics])
    if limit:
        return Decision(
            Action.INCONCLUSIVE,
            (f"time limit {policy.max_duration_s:.0f} s reached without evidence", *reasons),
            evidence,
        )
    return Decision(Action.HOLD, reasons, evidence)


def initial_state(policy: RolloutPolicy) -> RolloutState:
    """State at the start of a rollout: step 0 at ``steps_pct[0]`` percent candidate weight."""
    first = policy.steps_pct[0]
    return RolloutState(0, first, 100.0 - first, "running")


def next_weights(policy: RolloutPolicy, state: RolloutState, decision: Decision) -> RolloutState:
    """New step and weights (percent) after ``decision``.

    promote -> next step (after the last step: candidate 100 %, ``completed``); rollback ->
    candidate 0 %, ``rolled_back``; inconclusive -> weights unchanged, ``paused`` (a human
    decides, as Argo Rollouts' Inconclusive); hold -> unchanged. A finished rollout
    (``completed`` / ``rolled_back``) never changes. Raises ValueError for a step index outside
    the policy.
    """
    if not 0 <= state.step_index < len(policy.steps_pct):
        raise ValueError(f"state.step_index {state.step_index} outside the policy's steps")
    if state.status in ("completed", "rolled_back"):
        return state
    action = decision.action
    if action is Action.ROLLBACK:
        return replace(
            state, candidate_weight_pct=0.0, baseline_weight_pct=100.0, status="rolled_back"
        )
    if action is Action.INCONCLUSIVE:
        return replace(state, status="paused")
    if action is Action.PROMOTE:
        if state.step_index + 1 >= len(policy.steps_pct):
            return replace(
                state, candidate_weight_pct=100.0, baseline_weight_pct=0.0, status="completed"
            )
        weight = policy.steps_pct[state.step_index + 1]
        if weight >= 100.0:
            return RolloutState(state.step_index + 1, 100.0, 0.0, "completed")
        return RolloutState(state.step_index + 1, weight, 100.0 - weight, "running")
    return state
