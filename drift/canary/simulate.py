"""Monte-Carlo check of the canary decision engine on simulated request streams (pure, ``rng``).

Each run is one rollout step at a fixed candidate share. Requests arrive in ``looks`` batches
of ``samples_per_look``; each request goes to the candidate with probability ``share``. After
every batch the engine sees the cumulative data (``build_evidence`` + ``decide``); the run ends at
the first promote, rollback or inconclusive (time limit = the last look).

Simulated metrics (the policy from :func:`simulation_policy`, K = 3, family alpha):

- ``ttft_s``: lognormal(ln 0.4, 0.6) seconds, capped at 10 s, increase_is_bad, relative margin 5 %.
- ``error_rate``: Bernoulli(0.02) per request in per-look intervals, rare-event test, rate-ratio
  margin 50 %.
- ``judge_score``: normal(4, 0.8) clipped to [1, 5], decrease_is_bad, absolute margin 0.2.

Scenarios: ``aa`` (candidate identical) and ``regression`` (candidate TTFT x 1.10, i.e. a 10 %
regression, twice the tolerated margin; everything else identical).

Definitions:

- ``false_decision_rate``: in ``aa``, the share of runs that roll back (for any reason, SRM gate
  included): no rollback is ever warranted there. A promote in ``aa`` is correct, because the
  candidate's true effect (0) is inside every margin and ``decide`` only promotes after every
  metric's non-inferiority e-value reached K/alpha. In ``regression``, the share of runs that
  promote: the true TTFT harm exceeds its margin, so any promote is false.
- ``detection_samples_ratio`` (``regression`` only): the total number of requests (both arms)
  by which 80 % of runs have rolled back, divided by the total a fixed-n one-sided z-test needs
  for the same contrast (``mu_B - 1.05 mu_A <= 0``), the same per-metric level alpha/K and power
  0.8, at the same split: ``N = (z_{1-alpha/K} + z_{0.8})^2 (sd_B^2/share + 1.05^2
  sd_A^2/(1-share)) / (mu_B - 1.05 mu_A)^2`` (standard sample-size formula), with the capped
  lognormal's mean and SD taken from 10^6 draws. ``inf`` if fewer than 80 % of runs roll back.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats

from drift.canary.evidence import build_evidence
from drift.canary.policy import (
    Action,
    CanaryObservations,
    CountObservations,
    Direction,
    MetricKind,
    MetricPolicy,
    RolloutPolicy,
    SampleObservations,
    StepAssignment,
    decide,
)

Scenario = Literal["aa", "regression"]
_TTFT_LOG_MEAN, _TTFT_LOG_SD, _TTFT_CAP = math.log(0.4), 0.6, 10.0
_ERROR_RATE = 0.02
_TTFT_MARGIN = 0.05
_REGRESSION = 1.10
_LOOK_INTERVAL_S = 60.0


@dataclass(frozen=True)
class SimulationResult:
    """Outcome counts and the two headline numbers (definitions in the module docstring)."""

    scenario: str
    runs: int
    looks: int
    samples_per_look: int
    share: float
    alpha: float
    promote: int
    rollback: int
    inconclusive: int
    false_decision_rate: float
    mean_samples_at_decision: float | None
    detection_samples_ratio: float | None
    fixed_n_samples: float | None


def simulation_policy(alpha: float, looks: int) -> RolloutPolicy:
    """The 3-metric, one-decision-step policy the simulation runs (time limit = last look)."""
    inc, dec = Direction.INCREASE_IS_BAD, Direction.DECREASE_IS_BAD
    return RolloutPolicy(
        name="simulation",
        baseline_variant="baseline",
        candidate_variant="candidate",
        steps_pct=(50.0, 100.0),
        min_samples_per_step=50,
        min_step_duration_s=0.0,
        max_duration_s=looks * _LOOK_INTERVAL_S,
        alpha=alpha,
        metrics=(
            MetricPolicy(
                "ttft_s", MetricKind.MEAN, inc, _TTFT_MARGIN, relative=True, cap=_TTFT_CAP
            ),
            MetricPolicy("error_rate", MetricKind.RARE_EVENT, inc, 0.5, relative=True),
            MetricPolicy("judge_score", MetricKind.MEAN, dec, 0.2, role="quality"),
        ),
    )


def _ttft(rng: np.random.Generator, n: int, scale: float) -> np.ndarray:
    return scale * rng.lognormal(_TTFT_LOG_MEAN, _TTFT_LOG_SD, size=n)


def fixed_n_total_samples(
    alpha: float, n_metrics: int, share: float, rng: np.random.Generator, power: float = 0.8
) -> float:
    """Total requests a fixed-n one-sided z-test needs to detect the simulated TTFT regression
    (formula in the module docstring). Raises ValueError for invalid arguments."""
    if not 0 < share < 1:
        raise ValueError(f"share must be in (0, 1), got {share}")
    if not 0 < power < 1 or not 0 < alpha < 1 or n_metrics < 1:
        raise ValueError("power and alpha must be in (0, 1), n_metrics >= 1")
    draws = np.minimum(_ttft(rng, 1_000_000, 1.0), _TTFT_CAP)
    mu_a, sd_a = float(draws.mean()), float(draws.std(ddof=1))
    cand = np.minimum(_REGRESSION * _ttft(rng, 1_000_000, 1.0), _TTFT_CAP)
    mu_b, sd_b = float(cand.mean()), float(cand.std(ddof=1))
    c = 1.0 + _TTFT_MARGIN
    z = stats.norm.ppf(1 - alpha / n_metrics) + stats.norm.ppf(power)
    variance_per_total = sd_b**2 / share + c * c * sd_a**2 / (1 - share)
    return float(z * z * variance_per_total / (mu_b - c * mu_a) ** 2)


def simulate_run(
    scenario: Scenario,
    policy: RolloutPolicy,
    *,
    looks: int,
    samples_per_look: int,
    share: float,
    rng: np.random.Generator,
) -> tuple[Action, int]:
    """One simulated step; returns (final action, total requests seen at that look)."""
    scale = _REGRESSION if scenario == "regression" else 1.0
    ttft: tuple[list[np.ndarray], list[np.ndarray]] = ([], [])
    judge: tuple[list[np.ndarray], list[np.ndarray]] = ([], [])
    errors = np.zeros((2, looks))
    trials = np.zeros((2, looks))
    total = 0
    for look in range(looks):
        n_cand = int(rng.binomial(samples_per_look, share))
        for arm, n, arm_scale in ((0, samples_per_look - n_cand, 1.0), (1, n_cand, scale)):
            ttft[arm].append(_ttft(rng, n, arm_scale))
            judge[arm].append(np.clip(rng.normal(4.0, 0.8, size=n), 1.0, 5.0))
            errors[arm, look] = rng.binomial(n, _ERROR_RATE)
            trials[arm, look] = n
        total += samples_per_look
        obs = CanaryObservations(
            step_index=0,
            elapsed_s=(look + 1) * _LOOK_INTERVAL_S,
            step_elapsed_s=(look + 1) * _LOOK_INTERVAL_S,
            assignments=(StepAssignment(100 * share, int(trials[0].sum()), int(trials[1].sum())),),
            metrics={
                "ttft_s": SampleObservations(np.concatenate(ttft[0]), np.concatenate(ttft[1])),
                "error_rate": CountObservations(
                    errors[0, : look + 1],
                    trials[0, : look + 1],
                    errors[1, : look + 1],
                    trials[1, : look + 1],
                ),
                "judge_score": SampleObservations(
                    np.concatenate(judge[0]), np.concatenate(judge[1])
                ),
            },
        )
        action = decide(build_evidence(obs, policy, fixed_n_report=False), policy).action
        if action is not Action.HOLD:
            return action, total
    return Action.HOLD, total


def simulate(
    scenario: Scenario,
    *,
    runs: int,
    looks: int,
    rng: np.random.Generator,
    samples_per_look: int = 400,
    share: float = 0.5,
    alpha: float = 0.05,
) -> SimulationResult:
    """Run ``runs`` simulated steps of ``looks`` looks each and summarise (see module docstring).

    Raises ValueError for an unknown scenario or non-positive sizes.
    """
    if scenario not in ("aa", "regression"):
        raise ValueError(f"scenario must be 'aa' or 'regression', got {scenario!r}")
    if runs < 1 or looks < 1 or samples_per_look < 2:
        raise ValueError("runs and looks must be >= 1, samples_per_look >= 2")
    if not 0 < share < 1:
        raise ValueError(f"share must be in (0, 1), got {share}")
    policy = simulation_policy(alpha, looks)
    actions: list[Action] = []
    samples: list[int] = []
    for _ in range(runs):
        action, n = simulate_run(
            scenario, policy, looks=looks, samples_per_look=samples_per_look, share=share, rng=rng
        )
        actions.append(action)
        samples.append(n)
    counts = {a: sum(1 for x in actions if x is a) for a in Action}
    decided = [n for a, n in zip(actions, samples, strict=True) if a is not Action.HOLD]
    ratio: float | None = None
    fixed: float | None = None
    if scenario == "regression":
        false_rate = counts[Action.PROMOTE] / runs
        fixed = fixed_n_total_samples(alpha, len(policy.metrics), share, rng)
        stops = sorted(
            n if a is Action.ROLLBACK else math.inf for a, n in zip(actions, samples, strict=True)
        )
        q80 = stops[math.ceil(0.8 * runs) - 1]
        ratio = q80 / fixed
    else:
        false_rate = counts[Action.ROLLBACK] / runs
    return SimulationResult(
        scenario=scenario,
        runs=runs,
        looks=looks,
        samples_per_look=samples_per_look,
        share=share,
        alpha=alpha,
        promote=counts[Action.PROMOTE],
        rollback=counts[Action.ROLLBACK],
        inconclusive=counts[Action.INCONCLUSIVE] + counts[Action.HOLD],
        false_decision_rate=false_rate,
        mean_samples_at_decision=float(np.mean(decided)) if decided else None,
        detection_samples_ratio=ratio,
        fixed_n_samples=fixed,
    )
