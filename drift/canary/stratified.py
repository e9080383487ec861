"""Stratified, design-weighted two-arm contrasts for canary rollouts (pure functions, no I/O).

Why strata: a rollout changes the candidate's traffic share between steps (5 % -> 25 % -> ...),
while load and time of day move every metric for both arms. Pooling the whole rollout weighs the
candidate toward late periods and the baseline toward early ones, so a shift common to both arms
looks like a candidate effect (A/A, latency x1.5 between step 0 and step 1: the pooled harm
e-value crossed K/alpha in 95 % of runs). Here each stratum (a step, or a time block inside a
step) gives its own contrast ``d_s = m_B,s - c m_A,s``; they are combined with the
Cochran-Mantel-Haenszel weights ``h_s = n_A,s n_B,s / (n_A,s + n_B,s)``, which depend on counts
only, so a shift common to both arms inside a stratum cancels (Cochran 1954, "Some methods for
strengthening the common chi-square tests", Biometrics 10; Mantel & Haenszel 1959). The rare-event
test does the same with per-interval exposure shares (``drift.canary.rare_event``).

Why weights: the judge sampler includes calls with unequal probabilities (candidate 0.5,
baseline 0.05, every flagged call 1). Each arm's mean in a stratum is the Hajek ratio
``sum(y/pi) / sum(1/pi)`` with the linearised variance ``sum(w_i^2 (y_i - m)^2) / (n (n - 1))``,
``w`` normalised to mean 1 (Sarndal, Swensson & Wretman 1992, "Model Assisted Survey Sampling",
section 5.7) -- the estimator ``judges.ppi`` uses for the quality page.

Why the null variance: with a 5 % arm the plug-in (Wald) variance of the small arm is too small
exactly when its sample happens to look good (few events, no tail), which made the
non-inferiority test cross K/alpha in 3.4 % of runs at the null boundary against a bound of
0.6 %. The candidate's per-observation variance is therefore the larger of its own estimate and
the variance it has at the null boundary: for means ``c^2 s_A^2`` (the candidate at the margin is
the baseline scaled by ``c``, or shifted by the absolute margin, ``c = 1``), compared on
population variances pooled over strata (a per-stratum maximum of two noisy estimates is biased
upward) and applied as a factor to the candidate's own linearised variance, which keeps its
sampling design (judged calls: the arms are judged at different rates, so their per-judgement
variances differ even when their scores do not); for proportions
``p0 (1 - p0)`` with ``p0 = c p_A + delta0`` -- the score-test idea of Farrington & Manning
(1990, "Test statistics and sample size formulae for comparative binomial trials with null
hypothesis of non-zero risk difference or non-unity relative risk", Stat. Med. 9) with the
well-measured baseline arm standing in for the restricted MLE.

Validity: the combined estimate is asymptotically normal with the stated variance, so the
Gaussian-mixture e-value of ``drift.canary.sequential`` on it is the asymptotic confidence
sequence of Waudby-Smith, Arbour, Sinha, Kennedy & Ramdas (2023, "Time-uniform central limit
theory and asymptotic confidence sequences", arXiv:2103.06476): Ville's bound
``P(exists t: E_t >= 1/alpha) <= alpha`` holds as the sample grows, at every look.
``drift.canary.simulate`` checks it at the defaults (A/A with a load step, the null boundary,
5 %/25 %/50 % arms, biased judge sampling).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from drift.canary.sequential import Alternative, SequentialResult, mixture_result

#: pseudo-count pulling each stratum's rate toward the arm's overall rate (variance only; our
#: choice: strata of 60 s hold a handful of requests, whose own rate is mostly 0)
RATE_SHRINKAGE = 100.0


def _arrays(
    values: ArrayLike, strata: ArrayLike | None, inclusion: ArrayLike | None, name: str
) -> tuple[NDArray[np.float64], NDArray[np.int64], NDArray[np.float64]]:
    y = np.asarray(values, dtype=np.float64).ravel()
    s = np.zeros(y.size, np.int64) if strata is None else np.asarray(strata, np.int64).ravel()
    pi = np.ones(y.size) if inclusion is None else np.asarray(inclusion, np.float64).ravel()
    if s.shape != y.shape or pi.shape != y.shape:
        raise ValueError(f"{name}_strata and {name}_inclusion need one entry per {name} value")
    keep = ~(np.isnan(y) | np.isnan(pi))
    y, s, pi = y[keep], s[keep], pi[keep]
    if not np.all(np.isfinite(y)):
        raise ValueError(f"{name} contains infinite values")
    if np.any(pi <= 0) or np.any(pi > 1):
        raise ValueError(f"{name}_inclusion must be probabilities in (0, 1]")
    return y, s, pi


def _hajek_by_stratum(
    y: NDArray[np.float64], idx: NDArray[np.int64], pi: NDArray[np.float64], m: int
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Per stratum 0..m-1: (count, Hajek mean, per-observation linearised variance, weighted
    population variance) of one arm; variances NaN where the count is below 2. With ``w``
    normalised to mean 1 in the stratum, the linearised variance is
    ``sum(w^2 (y - mean)^2) / (n - 1)`` (module docstring) and the population variance
    ``sum(w (y - mean)^2) / (n - 1)``; they are equal when every pi is equal."""
    w = 1.0 / pi
    n = np.bincount(idx, minlength=m).astype(np.float64)
    sw = np.bincount(idx, weights=w, minlength=m)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.bincount(idx, weights=w * y, minlength=m) / sw
        dev2 = (y - mean[idx]) ** 2
        wbar = sw / n
        var = np.bincount(idx, weights=w * w * dev2, minlength=m) / (wbar * wbar) / (n - 1)
        pop = np.bincount(idx, weights=w * dev2, minlength=m) / wbar / (n - 1)
    return n, mean, np.where(n >= 2, var, np.nan), np.where(n >= 2, pop, np.nan)


def weighted_mean(values: ArrayLike, inclusion: ArrayLike | None = None) -> float:
    """Hajek mean ``sum(y/pi) / sum(1/pi)`` of the non-null values (NaN when none)."""
    y, _, pi = _arrays(values, None, inclusion, "values")
    return float(np.sum(y / pi) / np.sum(1.0 / pi)) if y.size else math.nan


def stratified_mean_test(
    baseline: ArrayLike,
    candidate: ArrayLike,
    *,
    tau2: float,
    alpha: float = 0.05,
    null_value: float = 0.0,
    baseline_factor: float = 1.0,
    alternative: Alternative = "two-sided",
    baseline_strata: ArrayLike | None = None,
    candidate_strata: ArrayLike | None = None,
    baseline_inclusion: ArrayLike | None = None,
    candidate_inclusion: ArrayLike | None = None,
    cap: float | None = None,
) -> SequentialResult:
    """Mixture e-test of ``theta = sum_s h_s (m_B,s - c m_A,s) / sum_s h_s`` (module docstring).

    ``baseline``, ``candidate``: per-request values, shape (n_A,), (n_B,), NaN = unknown.
    ``*_strata``: integer stratum label per value (None: one stratum); a stratum where an arm has
    fewer than 2 values carries no contrast and is left out. ``*_inclusion``: each value's
    probability pi of having been observed (None: all 1); means are Hajek means. ``cap``: values
    above it are replaced by it first (seconds / USD). Variance per stratum
    ``r v_B/n_B + c^2 v_A/n_A`` with ``v`` the linearised variance per observation and
    ``r = max(1, c^2 S_A^2 / S_B^2)``, ``S^2`` the weighted population variance pooled over
    strata (null-boundary variance, module docstring; without weights ``v = S^2 = s^2``).

    Raises ValueError when no stratum has 2 values in each arm, or for invalid arguments.
    """
    a, sa, pa = _arrays(baseline, baseline_strata, baseline_inclusion, "baseline")
    b, sb, pb = _arrays(candidate, candidate_strata, candidate_inclusion, "candidate")
    if cap is not None:
        a, b = np.minimum(a, cap), np.minimum(b, cap)
    c = baseline_factor
    labels, inverse = np.unique(np.concatenate([sa, sb]), return_inverse=True)
    m = labels.size
    n_a, m_a, v_a, p_a = _hajek_by_stratum(a, inverse[: a.size], pa, m)
    n_b, m_b, v_b, p_b = _hajek_by_stratum(b, inverse[a.size :], pb, m)
    used = (n_a >= 2) & (n_b >= 2)
    if not used.any():
        raise ValueError("no stratum has at least 2 values in each arm")
    n_a, m_a, v_a, p_a, n_b, m_b, v_b, p_b = (
        x[used] for x in (n_a, m_a, v_a, p_a, n_b, m_b, v_b, p_b)
    )
    # null boundary: the candidate's population variance is at least c^2 times the baseline's,
    # compared on within-stratum variances pooled over strata (a per-stratum max of two noisy
    # estimates is biased upward: ~9 % more variance with 50-value strata), applied to the
    # candidate's own per-stratum linearised variances (which carry its design factor)
    pool_a = float(np.sum((n_a - 1) * p_a) / np.sum(n_a - 1))
    pool_b = float(np.sum((n_b - 1) * p_b) / np.sum(n_b - 1))
    inflate = max(1.0, c * c * pool_a / pool_b) if pool_b > 0 else 1.0
    v_s = v_b * inflate / n_b + c * c * v_a / n_a
    h = n_a * n_b / (n_a + n_b)
    estimate = float(np.sum(h * (m_b - c * m_a)) / h.sum())
    var = float(np.sum(h * h * v_s) / h.sum() ** 2)
    scale = max(1.0, abs(float(np.mean(a))), abs(float(np.mean(b))))
    variance = max(var, (1e-9 * scale) ** 2)
    return mixture_result(
        "stratified_mixture_mean",
        estimate,
        variance,
        tau2=tau2,
        alpha=alpha,
        null_value=null_value,
        alternative=alternative,
        n_baseline=int(a.size),
        n_candidate=int(b.size),
    )


def stratified_proportion_test(
    events_baseline: ArrayLike,
    trials_baseline: ArrayLike,
    events_candidate: ArrayLike,
    trials_candidate: ArrayLike,
    *,
    tau2: float,
    alpha: float = 0.05,
    null_value: float = 0.0,
    baseline_factor: float = 1.0,
    alternative: Alternative = "two-sided",
) -> SequentialResult:
    """Mixture e-test of ``theta = sum_s h_s (p_B,s - c p_A,s) / sum_s h_s`` from per-stratum
    event/trial counts, shape (m,) each (one entry per step or interval).

    Variance per stratum ``max(p~_B(1-p~_B), p0(1-p0))/n_B + c^2 p~_A(1-p~_A)/n_A`` with
    ``p~`` the stratum's rate shrunk toward the arm's overall ``(k+1)/(n+2)`` by
    :data:`RATE_SHRINKAGE` pseudo-trials and ``p0 = c p~_A + delta0`` clipped to [1e-6, 1 - 1e-6]
    (null-boundary variance, module docstring). Strata without trials in an arm are left out.

    Raises ValueError for shape mismatches, negative counts or events > trials, or when no
    stratum has trials in both arms.
    """
    arrays = [
        np.atleast_1d(np.asarray(v, dtype=np.float64)).ravel()
        for v in (events_baseline, trials_baseline, events_candidate, trials_candidate)
    ]
    ka, na, kb, nb = arrays
    if not all(x.shape == ka.shape for x in arrays):
        raise ValueError("events_* and trials_* must have the same length")
    if any(np.any(~np.isfinite(x)) or np.any(x < 0) for x in arrays):
        raise ValueError("events_* and trials_* must be finite and nonnegative")
    if np.any(ka > na) or np.any(kb > nb):
        raise ValueError("events_* must not exceed trials_*")
    c = baseline_factor
    used = (na > 0) & (nb > 0)
    if not used.any():
        raise ValueError("no stratum has trials in both arms")
    pa_all = (ka.sum() + 1.0) / (na.sum() + 2.0)
    pb_all = (kb.sum() + 1.0) / (nb.sum() + 2.0)
    ka, na, kb, nb = ka[used], na[used], kb[used], nb[used]
    pa = (ka + RATE_SHRINKAGE * pa_all) / (na + RATE_SHRINKAGE)
    pb = (kb + RATE_SHRINKAGE * pb_all) / (nb + RATE_SHRINKAGE)
    p0 = np.clip(c * pa + null_value, 1e-6, 1 - 1e-6)
    v = np.maximum(pb * (1 - pb), p0 * (1 - p0)) / nb + c * c * pa * (1 - pa) / na
    h = na * nb / (na + nb)
    estimate = float(np.sum(h * (kb / nb - c * ka / na)) / h.sum())
    variance = float(np.sum(h * h * v) / h.sum() ** 2)
    return mixture_result(
        "stratified_mixture_proportion",
        estimate,
        variance,
        tau2=tau2,
        alpha=alpha,
        null_value=null_value,
        alternative=alternative,
        n_baseline=int(na.sum()),
        n_candidate=int(nb.sum()),
    )


def merge_blocks(
    step: ArrayLike, block: ArrayLike, arm: ArrayLike, *, min_per_arm: int = 5
) -> NDArray[np.int64]:
    """Stratum label per observation: time blocks inside a step, consecutive blocks merged
    until each arm has ``min_per_arm`` values (a short last group joins the previous one).

    ``step``, ``block``: integer step index and time-block index per observation; ``arm``: 0
    baseline, 1 candidate; shape (n,) each. Blocks never merge across steps (the traffic share
    changes there; inside a step it is constant, so merging blocks keeps the contrast unbiased
    under a common shift). Raises ValueError for shape mismatches or ``min_per_arm`` < 2.
    """
    st, bl, ar = (np.asarray(x, np.int64).ravel() for x in (step, block, arm))
    if not st.shape == bl.shape == ar.shape:
        raise ValueError("step, block and arm must have the same length")
    if min_per_arm < 2:
        raise ValueError(f"min_per_arm must be >= 2, got {min_per_arm}")
    labels = np.zeros(st.size, np.int64)
    next_label = 0
    for s in np.unique(st):
        in_step = st == s
        blocks, inv = np.unique(bl[in_step], return_inverse=True)
        per_block = np.zeros((2, blocks.size), np.int64)
        np.add.at(per_block, ((ar[in_step] != 0).astype(np.int64), inv), 1)
        group_of = np.zeros(blocks.size, np.int64)
        group, counts = 0, np.zeros(2, np.int64)
        closed_at = -1  # last block index that closed a full group
        for k in range(blocks.size):
            group_of[k] = group
            counts += per_block[:, k]
            if counts.min() >= min_per_arm:
                closed_at, group, counts = k, group + 1, np.zeros(2, np.int64)
        if closed_at >= 0 and closed_at < blocks.size - 1:
            group_of[closed_at + 1 :] = group_of[closed_at]  # a short tail joins the last group
        labels[in_step] = next_label + group_of[inv]
        next_label += int(group_of.max()) + 1
    return labels
