"""Monte-Carlo check of the canary decision engine on simulated rollouts (pure, explicit ``rng``).

Each run is one rollout of the one-metric policy of :func:`simulation_policy` with steps
``(share, next share, 100 %)`` (:func:`step_shares`). Requests arrive in ``looks`` batches of
``samples_per_look``; each goes to the candidate with the current step's share. After every batch
the production path decides on the cumulative data: :func:`drift.canary.evidence.build_evidence`
then :func:`drift.canary.policy.decide`, and :func:`drift.canary.policy.next_weights` applies the
decision (promote -> next step, rollback -> end). Strata are what the canary job builds
(``drift.canary.observe``): one stratum per step and time block (a look), blocks merged inside a
step until each arm holds :data:`~drift.canary.observe.STRATUM_MIN_PER_ARM` values (judge
scores: by step, ``drift.canary.observe.sample_strata``); count
metrics one interval per look. Metrics and effects: ``drift.canary.simulate_metrics``.

Scenarios:

- ``aa``: candidate identical. Any rollback is false; promotion is correct.
- ``aa-load-step``: identical, but from step 1 on every request of both arms is slower (x1.5),
  more often truncated (rate x1.5) or judged lower (-0.3): the load / time-of-day shift that
  pooling mistook for a candidate effect. Any rollback is false.
- ``ni-boundary``: the candidate sits exactly at the margin: both nulls hold at their boundary,
  so any promote and any rollback is false.
- ``regression``: candidate twice the margin worse: any promote is false; rollback is correct.
- ``judge-biased-sampling``: judge-score only, candidate 0.3 worse (margin 0.2) judged at the
  sampler's unequal rates: any promote is false.

Outputs (per run, a decision counts once): ``false_promote_rate`` (runs with a promote where
promote is false), ``false_rollback_rate`` (runs with a rollback where rollback is false),
``false_decision_rate`` (runs with either), and for ``regression`` / ``judge-biased-sampling``
``detection_samples_ratio``: requests (both arms) by which 80 % of runs rolled back, divided by
:func:`~drift.canary.simulate_metrics.fixed_n` for the scenario's effect at the first step's
share (inf when fewer than 80 % roll back). The horizon is ``3 x fixed_n`` requests (the
regression's effect for ``aa*`` and ``ni-boundary``) unless ``samples_per_look`` is given.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from drift.canary.evidence import build_evidence
from drift.canary.observations import (
    CanaryObservations,
    CountObservations,
    SampleObservations,
    StepAssignment,
)
from drift.canary.observe import sample_strata
from drift.canary.policy import Action, RolloutPolicy, decide, initial_state, next_weights
from drift.canary.simulate_metrics import SPECS, Metric, MetricSpec, draw, fixed_n, judge_sample

Scenario = Literal["aa", "regression", "aa-load-step", "ni-boundary", "judge-biased-sampling"]
SCENARIOS: tuple[Scenario, ...] = (
    "aa",
    "regression",
    "aa-load-step",
    "ni-boundary",
    "judge-biased-sampling",
)
_LOOK_S = 60.0


@dataclass(frozen=True)
class SimulationResult:
    """Outcome counts and the rates defined in the module docstring."""

    scenario: str
    metric: str
    runs: int
    looks: int
    samples_per_look: int
    share: float
    alpha: float
    promote: int
    rollback: int
    undecided: int
    false_promote_rate: float
    false_rollback_rate: float
    false_decision_rate: float
    detection_samples_ratio: float | None
    fixed_n_samples: float


def step_shares(share: float) -> tuple[float, float]:
    """Candidate shares of steps 0 and 1: ``share`` then ``min(5 share, (1 + share) / 2)``
    (5 % -> 25 %, 25 % -> 62.5 %, 50 % -> 75 %)."""
    return share, min(5 * share, (1 + share) / 2)


def simulation_policy(spec: MetricSpec, share: float, alpha: float, looks: int) -> RolloutPolicy:
    """One metric (K = 1, threshold 1/alpha), steps ``(share, next, 100)`` in percent, 50
    requests and no minimum time per step, time limit = the last look."""
    s0, s1 = step_shares(share)
    return RolloutPolicy(
        name="simulation",
        baseline_variant="baseline",
        candidate_variant="candidate",
        steps_pct=(100 * s0, 100 * s1, 100.0),
        min_samples_per_step=50,
        min_step_duration_s=0.0,
        max_duration_s=looks * _LOOK_S,
        alpha=alpha,
        metrics=(spec.policy,),
    )


def _effect(spec: MetricSpec, scenario: Scenario) -> float | None:
    if scenario in ("aa", "aa-load-step"):
        return None
    if scenario == "ni-boundary":
        return spec.ni_boundary
    return -0.3 if scenario == "judge-biased-sampling" else spec.regression


class _Stream:
    """Cumulative per-arm data of one run."""

    def __init__(self) -> None:
        self.values: list[list[np.ndarray]] = [[], []]
        self.pi: list[list[np.ndarray]] = [[], []]
        self.step: list[list[np.ndarray]] = [[], []]
        self.block: list[list[np.ndarray]] = [[], []]
        self.counts: list[tuple[float, float, float, float]] = []

    def add(self, arm: int, values: np.ndarray, pi: np.ndarray, step: int, look: int) -> None:
        self.values[arm].append(values)
        self.pi[arm].append(pi)
        self.step[arm].append(np.full(values.size, step))
        self.block[arm].append(np.full(values.size, look))

    def sample_observations(self, weighted: bool) -> SampleObservations:
        v = [np.concatenate(x) if x else np.empty(0) for x in self.values]
        arm = np.concatenate([np.zeros(v[0].size, np.int64), np.ones(v[1].size, np.int64)])
        step = np.concatenate([np.concatenate(x) if x else np.empty(0) for x in self.step])
        block = np.concatenate([np.concatenate(x) if x else np.empty(0) for x in self.block])
        labels = sample_strata(step, block, arm, weighted=weighted)
        pi = [np.concatenate(x) if x else np.empty(0) for x in self.pi]
        return SampleObservations(
            v[0],
            v[1],
            baseline_strata=labels[arm == 0],
            candidate_strata=labels[arm == 1],
            baseline_inclusion=pi[0] if weighted else None,
            candidate_inclusion=pi[1] if weighted else None,
        )


def simulate_run(
    scenario: Scenario,
    spec: MetricSpec,
    policy: RolloutPolicy,
    *,
    looks: int,
    samples_per_look: int,
    rng: np.random.Generator,
) -> tuple[bool, bool, int | None]:
    """One rollout; returns (promoted at least once, rolled back, requests at the rollback)."""
    effect = _effect(spec, scenario)
    state = initial_state(policy)
    stream = _Stream()
    assignments: list[StepAssignment] = []
    step_started = 0
    promoted = False
    total = 0
    for look in range(looks):
        share = state.candidate_weight_pct / 100.0
        step = state.step_index
        load = scenario == "aa-load-step" and step >= 1
        if len(assignments) <= step:
            assignments.append(StepAssignment(100 * share, 0, 0))
            step_started = look
        n_cand = int(rng.binomial(samples_per_look, share))
        counts = []
        for arm, n in ((0, samples_per_look - n_cand), (1, n_cand)):
            values = draw(spec, rng, n, effect if arm == 1 else None, load)
            pi = np.ones(values.size)
            if spec.metric == "judge-score":
                values, pi = judge_sample(values, arm == 1, rng)
            stream.add(arm, values, pi, step, look)
            counts += [float(values.sum()), float(n)]
        stream.counts.append((counts[0], counts[1], counts[2], counts[3]))
        a = assignments[step]
        assignments[step] = StepAssignment(
            a.candidate_weight_pct,
            a.baseline_count + samples_per_look - n_cand,
            a.candidate_count + n_cand,
        )
        total += samples_per_look
        obs: SampleObservations | CountObservations
        if spec.metric == "proportion":
            ka, na, kb, nb = (np.array(c) for c in zip(*stream.counts, strict=True))
            obs = CountObservations(ka, na, kb, nb)
        else:
            obs = stream.sample_observations(weighted=spec.metric == "judge-score")
        observations = CanaryObservations(
            step_index=step,
            elapsed_s=(look + 1) * _LOOK_S,
            step_elapsed_s=(look + 1 - step_started) * _LOOK_S,
            assignments=tuple(assignments),
            metrics={spec.policy.name: obs},
        )
        decision = decide(build_evidence(observations, policy, fixed_n_report=False), policy)
        if decision.action is Action.ROLLBACK:
            return promoted, True, total
        promoted |= decision.action is Action.PROMOTE
        state = next_weights(policy, state, decision)
        if state.status != "running":
            break
    return promoted, False, None


def simulate(
    scenario: Scenario,
    metric: Metric,
    *,
    runs: int,
    rng: np.random.Generator,
    share: float = 0.05,
    looks: int = 50,
    samples_per_look: int | None = None,
    alpha: float = 0.05,
) -> SimulationResult:
    """Run ``runs`` simulated rollouts and summarise them (definitions in the module docstring).

    Raises ValueError for an unknown scenario or metric, ``judge-biased-sampling`` with another
    metric than judge-score, non-positive sizes or a share outside (0, 1).
    """
    if scenario not in SCENARIOS:
        raise ValueError(f"scenario must be one of {SCENARIOS}, got {scenario!r}")
    if metric not in SPECS:
        raise ValueError(f"metric must be one of {tuple(SPECS)}, got {metric!r}")
    if scenario == "judge-biased-sampling" and metric != "judge-score":
        raise ValueError("scenario judge-biased-sampling needs metric judge-score")
    if runs < 1 or looks < 1 or (samples_per_look is not None and samples_per_look < 2):
        raise ValueError("runs and looks must be >= 1, samples_per_look >= 2")
    if not 0 < share < 1:
        raise ValueError(f"share must be in (0, 1), got {share}")
    spec = SPECS[metric]
    effect = _effect(
        spec, "judge-biased-sampling" if scenario == "judge-biased-sampling" else "regression"
    )
    n_fixed = fixed_n(spec, share, alpha, effect=effect)
    per_look = samples_per_look or max(2, math.ceil(3 * n_fixed / looks))
    policy = simulation_policy(spec, share, alpha, looks)
    outcomes = [
        simulate_run(scenario, spec, policy, looks=looks, samples_per_look=per_look, rng=rng)
        for _ in range(runs)
    ]
    promote = sum(1 for p, _, _ in outcomes if p)
    rollback = sum(1 for _, r, _ in outcomes if r)
    promote_false = scenario not in ("aa", "aa-load-step")
    rollback_false = scenario in ("aa", "aa-load-step", "ni-boundary")
    false_any = sum(1 for p, r, _ in outcomes if (p and promote_false) or (r and rollback_false))
    ratio: float | None = None
    if scenario in ("regression", "judge-biased-sampling"):
        stops = sorted(n if n is not None else math.inf for _, _, n in outcomes)
        ratio = stops[math.ceil(0.8 * runs) - 1] / n_fixed
    return SimulationResult(
        scenario=scenario,
        metric=metric,
        runs=runs,
        looks=looks,
        samples_per_look=per_look,
        share=share,
        alpha=alpha,
        promote=promote,
        rollback=rollback,
        undecided=sum(1 for p, r, _ in outcomes if not p and not r),
        false_promote_rate=promote / runs if promote_false else 0.0,
        false_rollback_rate=rollback / runs if rollback_false else 0.0,
        false_decision_rate=false_any / runs,
        detection_samples_ratio=ratio,
        fixed_n_samples=n_fixed,
    )
