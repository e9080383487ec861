"""The harm and non-inferiority tests of one canary metric, per kind of observation.

For a metric of a :class:`~drift.canary.policy.RolloutPolicy` the tested contrast is
``theta = mu_candidate - c * mu_baseline`` (:func:`contrast`; the table is in
:mod:`drift.canary.evidence`). Each function here takes the metric's observations and returns
its two one-sided e-tests at the per-metric level ``alpha`` with the values the evidence
reports beside them (:class:`ArmTests`), or why the metric has no data yet (:data:`NoData`):

* :func:`sample_tests`: per-request values (``mean``: stratified, design-weighted when judged,
  plus the tail exceedance test of capped metrics; ``pairwise``: one-sample around 0.5);
* :func:`count_tests`: events over trials per interval (``proportion``, ``rare_event``);
* :func:`ratio_tests`: per-unit numerator / denominator (``ratio``, delta method).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats

from drift.canary.policy import (
    CountObservations,
    Direction,
    MetricKind,
    MetricPolicy,
    Observations,
    RatioObservations,
    SampleObservations,
    to_float_array,
)
from drift.canary.rare_event import rare_event_test
from drift.canary.ratio import delta_method_ratio, ratio_difference_test
from drift.canary.sequential import Alternative, SequentialResult, one_sample_mean_test
from drift.canary.stratified import (
    stratified_mean_test,
    stratified_proportion_test,
    weighted_mean,
)


class ArmTests(NamedTuple):
    """One metric's two tests (toward harm, toward non-inferiority) and the report beside them:
    baseline and candidate values in the metric's unit, the fixed-n Mann-Whitney p-value
    (report only) and the tail exceedance test (capped means only; never decisive)."""

    harm: SequentialResult
    non_inferiority: SequentialResult
    baseline_value: float
    candidate_value: float
    mann_whitney_pvalue: float | None = None
    tail: SequentialResult | None = None


#: why a metric cannot be tested yet, with the two arms' sizes: ``(reason, n_a, n_b)``
NoData = tuple[str, int, int]


def contrast(metric: MetricPolicy) -> tuple[float, float, Alternative, Alternative]:
    """(baseline_factor c, null delta0, harm alternative, non-inferiority alternative)."""
    m = metric.margin
    if metric.direction is Direction.INCREASE_IS_BAD:
        return (1.0 + m, 0.0, "greater", "less") if metric.relative else (1.0, m, "greater", "less")
    return (1.0 - m, 0.0, "less", "greater") if metric.relative else (1.0, -m, "less", "greater")


def tau2_of(metric: MetricPolicy, baseline_value: float, candidate_value: float) -> float:
    if metric.tau is not None:
        return metric.tau**2
    if not metric.relative:
        return metric.margin**2
    scale = abs(baseline_value) or abs(candidate_value) or 1.0
    return (metric.margin * scale) ** 2


def _mann_whitney(
    baseline: NDArray[np.float64], candidate: NDArray[np.float64], harm: Alternative
) -> float | None:
    """Fixed-n one-sided Mann-Whitney U p-value (scipy default method), report only."""
    if baseline.size == 0 or candidate.size == 0:
        return None
    res = stats.mannwhitneyu(candidate, baseline, alternative=harm)
    pvalue = float(res.pvalue)
    return None if math.isnan(pvalue) else pvalue


def _sample_arm(
    values: ArrayLike, strata: ArrayLike | None, inclusion: ArrayLike | None
) -> tuple[NDArray[np.float64], NDArray[np.int64], NDArray[np.float64]]:
    """Non-null values of one arm with their strata (0 when None) and pi (1 when None)."""
    y = to_float_array(values)
    s = np.zeros(y.size, np.int64) if strata is None else np.asarray(strata, np.int64).ravel()
    p = np.ones(y.size) if inclusion is None else to_float_array(inclusion)
    if s.shape != y.shape or p.shape != y.shape:
        raise ValueError("strata and inclusion need one entry per value")
    keep = ~(np.isnan(y) | np.isnan(p))
    return y[keep], s[keep], p[keep]


def _has_stratum(sa: NDArray[np.int64], sb: NDArray[np.int64]) -> bool:
    """True when some stratum holds >= 2 values of each arm (a contrast can be taken)."""
    common = np.intersect1d(sa, sb)
    return any(int((sa == s).sum()) >= 2 and int((sb == s).sum()) >= 2 for s in common)


#: Kish effective sample size each arm of a design-weighted (judged) metric needs before its
#: e-values count: the asymptotic confidence sequence behind them needs a burn-in, and a judged
#: arm of 10 calls whose weights range 1..20 (flags at pi = 1, others at 0.05) is ~5 effective
#: values -- its linearised variance is then meaningless (regression at a 50 % share was
#: promoted at the first look in 8 of 300 runs). 30: the usual normal-approximation minimum.
MIN_EFFECTIVE_SAMPLES = 30.0


def kish_effective_n(inclusion: NDArray[np.float64]) -> float:
    """Kish's effective sample size ``(sum w)^2 / sum w^2`` of weights ``w = 1/pi`` (Kish 1965,
    "Survey Sampling", section 11.7); equals the count when every pi is equal, 0 when empty."""
    if inclusion.size == 0:
        return 0.0
    w = 1.0 / inclusion
    return float(w.sum() ** 2 / np.sum(w * w))


#: the tail test's quantile: exceedances of each stratum's pooled 90th percentile
TAIL_QUANTILE = 0.9


def tail_exceedance_test(
    a: NDArray[np.float64],
    sa: NDArray[np.int64],
    b: NDArray[np.float64],
    sb: NDArray[np.int64],
    harm: Alternative,
    alpha: float,
) -> SequentialResult | None:
    """Distribution test for latency-like metrics: per stratum, the values above the pooled
    :data:`TAIL_QUANTILE` quantile of both arms are the events, the arm sizes the exposures;
    with identical distributions the candidate's share of exceedances is its share of
    requests, so the stratified conditional count e-value of ``rare_event_test`` (rate ratio
    1, toward harm) tests stochastic order in the tail -- the counting-process construction
    of Lindon, Sanden & Shirikian (2022, "Rapid regression detection in software deployments
    through sequential testing", KDD). The threshold is re-estimated at each look, so the
    guarantee is approximate; the result is reported, never decisive. None without strata
    holding both arms. ``harm``: "greater" (increase is bad) or "less".
    """
    rows = []
    for s in np.intersect1d(sa, sb):
        xa, xb = a[sa == s], b[sb == s]
        pooled = np.concatenate([xa, xb])
        if harm == "greater":
            cut = float(np.quantile(pooled, TAIL_QUANTILE))
            ea, eb = int((xa > cut).sum()), int((xb > cut).sum())
        else:
            cut = float(np.quantile(pooled, 1.0 - TAIL_QUANTILE))
            ea, eb = int((xa < cut).sum()), int((xb < cut).sum())
        rows.append((ea, xa.size, eb, xb.size))
    if not rows:
        return None
    ka, na, kb, nb = (np.array(col, dtype=np.float64) for col in zip(*rows, strict=True))
    return rare_event_test(ka, na, kb, nb, alpha=alpha, alternative="greater")


def sample_tests(
    metric: MetricPolicy, obs: Observations, alpha: float, fixed_n_report: bool
) -> ArmTests | NoData:
    """``mean`` / ``pairwise`` metrics from :class:`SampleObservations` (values capped at the
    metric's ``cap``; a judged arm weighted by 1/π needs :data:`MIN_EFFECTIVE_SAMPLES`).

    Raises:
        ValueError: ``obs`` is not :class:`SampleObservations`, or strata / inclusion do not
            have one entry per value.
    """
    c, delta0, harm_alt, ni_alt = contrast(metric)
    kind = metric.kind
    if not isinstance(obs, SampleObservations):
        raise ValueError(f"metrics[{metric.name!r}] must be SampleObservations")
    a, sa, pa = _sample_arm(obs.baseline, obs.baseline_strata, obs.baseline_inclusion)
    b, sb, pb = _sample_arm(obs.candidate, obs.candidate_strata, obs.candidate_inclusion)
    if metric.cap is not None:
        a, b = np.minimum(a, metric.cap), np.minimum(b, metric.cap)
    if b.size < 2 or (kind is MetricKind.MEAN and not _has_stratum(sa, sb)):
        return "insufficient data (< 2 values in an arm)", a.size, b.size
    weighted = obs.baseline_inclusion is not None or obs.candidate_inclusion is not None
    if weighted and kind is MetricKind.MEAN:
        eff_a, eff_b = kish_effective_n(pa), kish_effective_n(pb)
        if min(eff_a, eff_b) < MIN_EFFECTIVE_SAMPLES:
            reason = (
                f"insufficient effective sample (Kish n_eff baseline={eff_a:.0f}, "
                f"candidate={eff_b:.0f} < {MIN_EFFECTIVE_SAMPLES:.0f})"
            )
            return reason, a.size, b.size
    if kind is MetricKind.PAIRWISE:
        base, cand = 0.5, float(b.mean())
        tau2 = tau2_of(metric, base, cand)
        harm, ni = (
            one_sample_mean_test(
                b, tau2=tau2, alpha=alpha, null_value=0.5 + delta0, alternative=alt
            )
            for alt in (harm_alt, ni_alt)
        )
        return ArmTests(harm, ni, base, cand)
    base, cand = weighted_mean(a, pa), weighted_mean(b, pb)
    tau2 = tau2_of(metric, base, cand)
    harm, ni = (
        stratified_mean_test(
            a,
            b,
            tau2=tau2,
            alpha=alpha,
            null_value=delta0,
            baseline_factor=c,
            alternative=alt,
            baseline_strata=sa,
            candidate_strata=sb,
            baseline_inclusion=pa,
            candidate_inclusion=pb,
        )
        for alt in (harm_alt, ni_alt)
    )
    mw = _mann_whitney(a, b, harm_alt) if fixed_n_report else None
    tail = None
    if metric.cap is not None and obs.candidate_inclusion is None:
        tail = tail_exceedance_test(a, sa, b, sb, harm_alt, alpha)
    return ArmTests(harm, ni, base, cand, mw, tail)


def count_tests(
    metric: MetricPolicy, obs: Observations, alpha: float, fixed_n_report: bool
) -> ArmTests | NoData:
    """``proportion`` (stratified difference) / ``rare_event`` (conditional rate ratio, the
    margin as the ratio at the null) metrics from :class:`CountObservations` per interval.

    Raises:
        ValueError: ``obs`` is not :class:`CountObservations`, or a count is null.
    """
    c, delta0, harm_alt, ni_alt = contrast(metric)
    if not isinstance(obs, CountObservations):
        raise ValueError(f"metrics[{metric.name!r}] must be CountObservations")
    ka, na = to_float_array(obs.baseline_events), to_float_array(obs.baseline_trials)
    kb, nb = to_float_array(obs.candidate_events), to_float_array(obs.candidate_trials)
    if np.isnan(np.concatenate([ka, na, kb, nb])).any():
        raise ValueError(f"metrics[{metric.name!r}] counts must not be null")
    n_a, n_b = int(na.sum()), int(nb.sum())
    if n_a == 0 or n_b == 0:
        return f"insufficient {'canary' if n_b == 0 else 'baseline'} data (0 requests)", n_a, n_b
    if metric.kind is MetricKind.PROPORTION and not ((na > 0) & (nb > 0)).any():
        return "insufficient data (no interval with requests in both arms)", n_a, n_b
    base, cand = float(ka.sum()) / n_a, float(kb.sum()) / n_b
    mw = None
    if fixed_n_report:
        mw = _mann_whitney(ka[na > 0] / na[na > 0], kb[nb > 0] / nb[nb > 0], harm_alt)
    if metric.kind is MetricKind.RARE_EVENT:
        harm, ni = (
            rare_event_test(ka, na, kb, nb, alpha=alpha, rate_ratio_null=c, alternative=alt)
            for alt in (harm_alt, ni_alt)
        )
        return ArmTests(harm, ni, base, cand, mw)
    tau2 = tau2_of(metric, base, cand)
    harm, ni = (
        stratified_proportion_test(
            ka,
            na,
            kb,
            nb,
            tau2=tau2,
            alpha=alpha,
            null_value=delta0,
            baseline_factor=c,
            alternative=alt,
        )
        for alt in (harm_alt, ni_alt)
    )
    return ArmTests(harm, ni, base, cand, mw)


def ratio_tests(
    metric: MetricPolicy, obs: Observations, alpha: float, fixed_n_report: bool
) -> ArmTests | NoData:
    """``ratio`` metrics from :class:`RatioObservations` (delta-method ratio per arm).

    Raises:
        ValueError: ``obs`` is not :class:`RatioObservations`.
    """
    c, delta0, harm_alt, ni_alt = contrast(metric)
    if not isinstance(obs, RatioObservations):
        raise ValueError(f"metrics[{metric.name!r}] must be RatioObservations")
    ya, xa = to_float_array(obs.baseline_numerator), to_float_array(obs.baseline_denominator)
    yb, xb = to_float_array(obs.candidate_numerator), to_float_array(obs.candidate_denominator)
    if min(ya.size, yb.size) < 2 or np.nansum(xa) == 0 or np.nansum(xb) == 0:
        return "insufficient data (< 2 units or no denominator)", ya.size, yb.size
    ra, rb = delta_method_ratio(ya, xa), delta_method_ratio(yb, xb)
    tau2 = tau2_of(metric, ra.ratio, rb.ratio)
    harm, ni = (
        ratio_difference_test(
            ra,
            rb,
            tau2=tau2,
            alpha=alpha,
            null_value=delta0,
            baseline_factor=c,
            alternative=alt,
        )
        for alt in (harm_alt, ni_alt)
    )
    return ArmTests(harm, ni, ra.ratio, rb.ratio)
