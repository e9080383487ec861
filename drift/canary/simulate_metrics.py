"""The simulated metrics of ``drift.canary.simulate``: data generators, policies, fixed-n sizes.

==================  ===================================  ===========  =========  ==========  =====
``--metric``        per request (baseline)               margin       ni-bound.  regression  load
==================  ===================================  ===========  =========  ==========  =====
mean                e2e_s ~ Normal(10, 2) s              +0.2 s abs.  +0.2 s     +0.4 s      x1.5
proportion          length_finish ~ Bernoulli(0.01)      +0.02 abs.   0.03       0.05        x1.5
lognormal-latency   ttft_s ~ LogNormal(ln 0.4, 1), <=10  +10 % rel.   x1.10      x1.20       x1.5
judge-score         judge ~ Normal(4, 0.8) on [1, 5]     -0.2 abs.    -0.2       -0.4        -0.3
==================  ===================================  ===========  =========  ==========  =====

judge-biased-sampling: judge-score at -0.3. Judge scores are observed at the design of
``judges.sampling`` (candidate 0.5, baseline 0.05, flagged calls 1); a score below 3 gets a
thumbs-down with probability 0.5, so the judged set over-represents bad answers unequally between
the arms -- the biased sampling of production. Effects are exact on the metric's mean: the judge
score's latent shift and the latency's scale are solved (scipy.optimize.brentq) so that the
clipped / capped mean moves by the stated amount, so ``ni-boundary`` candidates sit exactly on
the margin. "load" applies to both arms from step 1 on in ``aa-load-step``.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import integrate, optimize, stats

from drift.canary.policy import Direction, MetricKind, MetricPolicy

Metric = Literal["mean", "proportion", "lognormal-latency", "judge-score"]
METRICS: tuple[Metric, ...] = ("mean", "proportion", "lognormal-latency", "judge-score")
_INC, _DEC = Direction.INCREASE_IS_BAD, Direction.DECREASE_IS_BAD
_LN_MU, _LN_SIGMA, _LN_CAP = math.log(0.4), 1.0, 10.0
#: the judge sampler's design rates (``judges.sampling``: base_rate, candidate_rate; flagged 1)
JUDGE_BASE_RATE, JUDGE_CANDIDATE_RATE = 0.05, 0.5


@dataclass(frozen=True)
class MetricSpec:
    """One simulated metric: its policy, effects (candidate vs baseline) and load factor."""

    metric: Metric
    policy: MetricPolicy
    ni_boundary: float
    regression: float
    load: float


SPECS: dict[Metric, MetricSpec] = {
    "mean": MetricSpec("mean", MetricPolicy("e2e_s", MetricKind.MEAN, _INC, 0.2), 0.2, 0.4, 1.5),
    "proportion": MetricSpec(
        "proportion",
        MetricPolicy("length_finish_rate", MetricKind.PROPORTION, _INC, 0.02),
        0.03,
        0.05,
        1.5,
    ),
    "lognormal-latency": MetricSpec(
        "lognormal-latency",
        MetricPolicy("ttft_s", MetricKind.MEAN, _INC, 0.10, relative=True, cap=_LN_CAP),
        1.10,
        1.20,
        1.5,
    ),
    "judge-score": MetricSpec(
        "judge-score",
        MetricPolicy("judge_score", MetricKind.MEAN, _DEC, 0.2, role="quality"),
        -0.2,
        -0.4,
        -0.3,
    ),
}


def draw(
    spec: MetricSpec, rng: np.random.Generator, n: int, effect: float | None, load: bool
) -> np.ndarray:
    """``n`` per-request values of one arm. ``effect``: the arm's effect (None: baseline);
    ``load``: apply the load factor (step >= 1 of ``aa-load-step``). For ``proportion`` the
    values are 0/1 events."""
    m = spec.metric
    if m == "mean":
        x = rng.normal(10.0, 2.0, n) + (effect or 0.0)
        return x * (spec.load if load else 1.0)
    if m == "proportion":
        p = 0.01 if effect is None else effect
        return (rng.random(n) < p * (spec.load if load else 1.0)).astype(np.float64)
    if m == "lognormal-latency":
        scale = (1.0 if effect is None else _lognormal_scale(effect)) * (spec.load if load else 1.0)
        return scale * rng.lognormal(_LN_MU, _LN_SIGMA, n)
    shift = (0.0 if effect is None else _judge_shift(effect)) + (spec.load if load else 0.0)
    return np.clip(rng.normal(4.0 + shift, 0.8, n), 1.0, 5.0)


def _clipped_normal_mean(mu: float, sd: float = 0.8, lo: float = 1.0, hi: float = 5.0) -> float:
    a, b = (lo - mu) / sd, (hi - mu) / sd
    inside = stats.norm.cdf(b) - stats.norm.cdf(a)
    partial = mu * inside + sd * (stats.norm.pdf(a) - stats.norm.pdf(b))
    return float(lo * stats.norm.cdf(a) + partial + hi * stats.norm.sf(b))


@functools.cache
def _judge_shift(effect: float) -> float:
    """Latent shift that moves the clipped judge score's mean by exactly ``effect``."""
    target = _clipped_normal_mean(4.0) + effect
    return float(optimize.brentq(lambda s: _clipped_normal_mean(4.0 + s) - target, -3, 3))


@functools.cache
def _lognormal_scale(ratio: float) -> float:
    """Scale that multiplies the capped lognormal's mean by exactly ``ratio``."""
    target = ratio * _capped_lognormal_moments(1.0)[0]
    return float(optimize.brentq(lambda k: _capped_lognormal_moments(k)[0] - target, 0.1, 10))


def judge_sample(
    scores: np.ndarray, candidate: bool, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Which calls get judged, and their inclusion probabilities: returns (judged scores, pi).

    The design of ``judges.sampling.sample_batch`` without a budget: a flagged call (thumbs-down:
    score < 3, w.p. 0.5) is judged with pi = 1, any other call independently with its design
    rate (candidate 0.5, baseline 0.05). ``drift`` may not import ``judges`` (import-linter
    layers), so the rates are drawn here; tests/drift/canary/test_simulate.py checks them against
    ``sample_batch``.
    """
    flagged = (scores < 3.0) & (rng.random(scores.size) < 0.5)
    rate = JUDGE_CANDIDATE_RATE if candidate else JUDGE_BASE_RATE
    pi = np.where(flagged, 1.0, rate)
    keep = flagged | (rng.random(scores.size) < rate)
    return scores[keep], pi[keep]


@functools.cache
def judge_design_variance(shift: float, rate: float) -> float:
    """Per-request variance of the Hajek mean of judge scores under :func:`judge_sample`'s design:
    ``N Var(mean) -> E[(y - mu)^2 (F + (1 - F) / rate)]`` for ``y`` the clipped score
    ``clip(Normal(4 + shift, 0.8), 1, 5)`` and ``F`` the flag (``y < 3`` w.p. 0.5, judged with
    pi = 1); the linearisation ``mean - mu ~ (1/N) sum S_i (y_i - mu) / pi_i`` of the ratio
    estimator (Sarndal, Swensson & Wretman 1992, section 5.7) over the superpopulation of calls.
    Units: score^2 per request. Raises ValueError for ``rate`` outside (0, 1]."""
    if not 0 < rate <= 1:
        raise ValueError(f"rate must be in (0, 1], got {rate}")
    mu_latent, sd = 4.0 + shift, 0.8
    mu = _clipped_normal_mean(mu_latent)
    d = stats.norm(mu_latent, sd)
    inv_pi_flag = 0.5 * 1.0 + 0.5 / rate  # y < 3: flagged w.p. 0.5 (pi = 1), else pi = rate
    below = integrate.quad(lambda y: (y - mu) ** 2 * d.pdf(y), 1.0, 3.0, limit=200)[0]
    above = integrate.quad(lambda y: (y - mu) ** 2 * d.pdf(y), 3.0, 5.0, limit=200)[0]
    low_mass = (1.0 - mu) ** 2 * d.cdf(1.0)  # clipped at 1 (y < 3)
    high_mass = (5.0 - mu) ** 2 * d.sf(5.0)  # clipped at 5
    return float((below + low_mass) * inv_pi_flag + (above + high_mass) / rate)


def _capped_lognormal_moments(scale: float) -> tuple[float, float]:
    d = stats.lognorm(_LN_SIGMA, scale=scale * math.exp(_LN_MU))
    m1 = integrate.quad(lambda x: x * d.pdf(x), 0, _LN_CAP, limit=200)[0] + _LN_CAP * d.sf(_LN_CAP)
    m2 = integrate.quad(lambda x: x * x * d.pdf(x), 0, _LN_CAP, limit=200)[0]
    m2 += _LN_CAP**2 * d.sf(_LN_CAP)
    return m1, m2 - m1 * m1


def fixed_n(
    spec: MetricSpec,
    share: float,
    alpha: float,
    power: float = 0.8,
    effect: float | None = None,
) -> float:
    """Total requests (both arms) a fixed-n one-sided z-test at level ``alpha`` needs to reject
    the harm null with ``power`` at candidate ``share`` for the candidate ``effect`` (default:
    the regression's):
    ``N = (z_{1-alpha} + z_power)^2 (sd_B^2/share + c^2 sd_A^2/(1-share)) / (theta - delta0)^2``
    (standard sample-size formula). judge-score: the per-request variances are those of the
    Hajek mean under the sampler's design (:func:`judge_design_variance`: clipping, flags and
    design rates included), i.e. the fixed-n test of the same estimator with known variance.
    Raises ValueError for share outside (0, 1)."""
    if not 0 < share < 1:
        raise ValueError(f"share must be in (0, 1), got {share}")
    z = float(stats.norm.ppf(1 - alpha) + stats.norm.ppf(power))
    m, eff = spec.metric, spec.regression if effect is None else effect
    c, delta0 = 1.0, spec.policy.margin
    if m == "mean":
        var_a = var_b = 4.0
        theta = eff
    elif m == "proportion":
        var_a, var_b, theta = 0.01 * 0.99, eff * (1 - eff), eff - 0.01
    elif m == "lognormal-latency":
        mu_a, var_a = _capped_lognormal_moments(1.0)
        mu_b, var_b = _capped_lognormal_moments(eff)
        c, delta0 = 1.0 + spec.policy.margin, 0.0
        theta = mu_b - c * mu_a
    else:
        var_a = judge_design_variance(0.0, JUDGE_BASE_RATE)
        var_b = judge_design_variance(_judge_shift(eff), JUDGE_CANDIDATE_RATE)
        theta, delta0 = -eff, spec.policy.margin  # decrease is bad: harm on -theta
    per_total = var_b / share + c * c * var_a / (1 - share)
    return z * z * per_total / (theta - delta0) ** 2
