"""Build canary evidence from per-arm observations (pure; the tests live in
drift.canary.sequential).

For each metric of a :class:`~drift.canary.policy.RolloutPolicy` the tested contrast is
``theta = mu_candidate - c * mu_baseline`` with (reference section 2.3, "Guardrail vs goal"):

============== ============================ ========== =========== ==============
direction      margin                        c          null delta0 harm side
============== ============================ ========== =========== ==============
increase_is_bad absolute m                   1          m           greater
increase_is_bad relative m                   1 + m      0           greater
decrease_is_bad absolute m                   1          -m          less
decrease_is_bad relative m                   1 - m      0           less
============== ============================ ========== =========== ==============

The harm test (one-sided toward harm) rolls back; the non-inferiority test (the other side,
same null) promotes. Both use ``threshold = K / alpha`` (e-Bonferroni over the K metrics).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats

from drift.canary.policy import (
    CanaryObservations,
    CountObservations,
    Direction,
    Evidence,
    MetricEvidence,
    MetricKind,
    MetricPolicy,
    MetricStatus,
    Observations,
    RatioObservations,
    RolloutPolicy,
    SampleObservations,
    to_float_array,
)
from drift.canary.rare_event import rare_event_test
from drift.canary.ratio import delta_method_ratio, ratio_difference_test
from drift.canary.sequential import (
    Alternative,
    SequentialResult,
    e_bonferroni_threshold,
    one_sample_mean_test,
)
from drift.canary.srm import srm_chi_square, srm_sequential
from drift.canary.stratified import (
    stratified_mean_test,
    stratified_proportion_test,
    weighted_mean,
)


def _contrast(metric: MetricPolicy) -> tuple[float, float, Alternative, Alternative]:
    """(baseline_factor c, null delta0, harm alternative, non-inferiority alternative)."""
    m = metric.margin
    if metric.direction is Direction.INCREASE_IS_BAD:
        return (1.0 + m, 0.0, "greater", "less") if metric.relative else (1.0, m, "greater", "less")
    return (1.0 - m, 0.0, "less", "greater") if metric.relative else (1.0, -m, "less", "greater")


def _tau2(metric: MetricPolicy, baseline_value: float, candidate_value: float) -> float:
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


def _no_data(
    metric: MetricPolicy, threshold: float, reason: str, n_a: int, n_b: int
) -> MetricEvidence:
    return MetricEvidence(
        name=metric.name,
        role=metric.role,
        kind=metric.kind.value,
        direction=metric.direction.value,
        status="no_data",
        threshold=threshold,
        harm=None,
        non_inferiority=None,
        baseline_value=None,
        candidate_value=None,
        n_baseline=n_a,
        n_candidate=n_b,
        mann_whitney_pvalue=None,
        reason=f"{metric.name}: {reason}",
    )


def _metric_evidence(
    metric: MetricPolicy,
    obs: Observations | None,
    threshold: float,
    alpha: float,
    fixed_n_report: bool,
) -> MetricEvidence:
    c, delta0, harm_alt, ni_alt = _contrast(metric)
    # each test at the per-metric level 1/threshold = alpha/K: its one-sided bound excludes the
    # null exactly when its e-value reaches the threshold (the dashboard draws that bound)
    alpha = 1.0 / threshold
    kind = metric.kind
    tests: list[SequentialResult] = []
    mw: float | None = None
    tail: SequentialResult | None = None
    if obs is None:
        return _no_data(metric, threshold, "no observations", 0, 0)
    if kind in (MetricKind.MEAN, MetricKind.PAIRWISE):
        if not isinstance(obs, SampleObservations):
            raise ValueError(f"metrics[{metric.name!r}] must be SampleObservations")
        a, sa, pa = _sample_arm(obs.baseline, obs.baseline_strata, obs.baseline_inclusion)
        b, sb, pb = _sample_arm(obs.candidate, obs.candidate_strata, obs.candidate_inclusion)
        if metric.cap is not None:
            a, b = np.minimum(a, metric.cap), np.minimum(b, metric.cap)
        if b.size < 2 or (kind is MetricKind.MEAN and not _has_stratum(sa, sb)):
            return _no_data(
                metric, threshold, "insufficient data (< 2 values in an arm)", a.size, b.size
            )
        weighted = obs.baseline_inclusion is not None or obs.candidate_inclusion is not None
        if weighted and kind is MetricKind.MEAN:
            eff_a, eff_b = kish_effective_n(pa), kish_effective_n(pb)
            if min(eff_a, eff_b) < MIN_EFFECTIVE_SAMPLES:
                reason = (
                    f"insufficient effective sample (Kish n_eff baseline={eff_a:.0f}, "
                    f"candidate={eff_b:.0f} < {MIN_EFFECTIVE_SAMPLES:.0f})"
                )
                return _no_data(metric, threshold, reason, a.size, b.size)
        if kind is MetricKind.PAIRWISE:
            base, cand = 0.5, float(b.mean())
            tau2 = _tau2(metric, base, cand)
            for alt in (harm_alt, ni_alt):
                tests.append(
                    one_sample_mean_test(
                        b, tau2=tau2, alpha=alpha, null_value=0.5 + delta0, alternative=alt
                    )
                )
        else:
            base, cand = weighted_mean(a, pa), weighted_mean(b, pb)
            tau2 = _tau2(metric, base, cand)
            for alt in (harm_alt, ni_alt):
                tests.append(
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
                )
            mw = _mann_whitney(a, b, harm_alt) if fixed_n_report else None
            if metric.cap is not None and obs.candidate_inclusion is None:
                tail = tail_exceedance_test(a, sa, b, sb, harm_alt, alpha)
    elif kind in (MetricKind.PROPORTION, MetricKind.RARE_EVENT):
        if not isinstance(obs, CountObservations):
            raise ValueError(f"metrics[{metric.name!r}] must be CountObservations")
        ka, na = to_float_array(obs.baseline_events), to_float_array(obs.baseline_trials)
        kb, nb = to_float_array(obs.candidate_events), to_float_array(obs.candidate_trials)
        if np.isnan(np.concatenate([ka, na, kb, nb])).any():
            raise ValueError(f"metrics[{metric.name!r}] counts must not be null")
        n_a, n_b = int(na.sum()), int(nb.sum())
        if n_a == 0 or n_b == 0:
            arm = "canary" if n_b == 0 else "baseline"
            return _no_data(metric, threshold, f"insufficient {arm} data (0 requests)", n_a, n_b)
        if kind is MetricKind.PROPORTION and not ((na > 0) & (nb > 0)).any():
            reason = "insufficient data (no interval with requests in both arms)"
            return _no_data(metric, threshold, reason, n_a, n_b)
        base, cand = float(ka.sum()) / n_a, float(kb.sum()) / n_b
        if fixed_n_report:
            mw = _mann_whitney(ka[na > 0] / na[na > 0], kb[nb > 0] / nb[nb > 0], harm_alt)
        if kind is MetricKind.RARE_EVENT:
            r0 = c  # rate ratio at the margin
            for alt in (harm_alt, ni_alt):
                tests.append(
                    rare_event_test(
                        ka, na, kb, nb, alpha=alpha, rate_ratio_null=r0, alternative=alt
                    )
                )
        else:
            tau2 = _tau2(metric, base, cand)
            for alt in (harm_alt, ni_alt):
                tests.append(
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
                )
    else:
        if not isinstance(obs, RatioObservations):
            raise ValueError(f"metrics[{metric.name!r}] must be RatioObservations")
        ya, xa = to_float_array(obs.baseline_numerator), to_float_array(obs.baseline_denominator)
        yb, xb = to_float_array(obs.candidate_numerator), to_float_array(obs.candidate_denominator)
        if min(ya.size, yb.size) < 2 or np.nansum(xa) == 0 or np.nansum(xb) == 0:
            return _no_data(
                metric,
                threshold,
                "insufficient data (< 2 units or no denominator)",
                ya.size,
                yb.size,
            )
        ra, rb = delta_method_ratio(ya, xa), delta_method_ratio(yb, xb)
        base, cand = ra.ratio, rb.ratio
        tau2 = _tau2(metric, base, cand)
        for alt in (harm_alt, ni_alt):
            tests.append(
                ratio_difference_test(
                    ra,
                    rb,
                    tau2=tau2,
                    alpha=alpha,
                    null_value=delta0,
                    baseline_factor=c,
                    alternative=alt,
                )
            )
    harm, ni = tests
    status: MetricStatus
    if harm.e_value >= threshold:
        status = "fail"
        verdict = f"worse than tolerated (harm e-value {harm.e_value:.3g} >= {threshold:.3g})"
    elif ni.e_value >= threshold:
        status = "pass"
        verdict = f"non-inferior (e-value {ni.e_value:.3g} >= {threshold:.3g})"
    else:
        status = "undecided"
        verdict = f"undecided (harm e {harm.e_value:.3g}, non-inferiority e {ni.e_value:.3g})"
    margin = f"{metric.margin:g}{' relative' if metric.relative else ''}"
    return MetricEvidence(
        name=metric.name,
        role=metric.role,
        kind=kind.value,
        direction=metric.direction.value,
        status=status,
        threshold=threshold,
        harm=harm,
        non_inferiority=ni,
        baseline_value=base,
        candidate_value=cand,
        n_baseline=harm.n_baseline,
        n_candidate=harm.n_candidate,
        mann_whitney_pvalue=mw,
        reason=(
            f"{metric.name}: baseline {base:.4g} candidate {cand:.4g} (margin {margin}) {verdict}"
        ),
        tail=tail,
    )


def build_evidence(
    observations: CanaryObservations, policy: RolloutPolicy, *, fixed_n_report: bool = True
) -> Evidence:
    """Evidence at one look: SRM gate and report, then each policy metric's two e-tests.

    ``observations.metrics`` maps metric name -> observations of the metric's kind
    (:class:`SampleObservations` for mean/pairwise, :class:`CountObservations` for
    proportion/rare_event, :class:`RatioObservations` for ratio); a missing name or empty arm
    is ``no_data``, never a zero. SRM uses Lindon & Malek's Dirichlet-multinomial e-value over
    ``assignments`` (one factor per step) and reports Pearson chi-square for the current step.

    ``fixed_n_report=False`` skips the Mann-Whitney report (simulations).
    Raises ValueError when observations do not match a metric's kind or counts are invalid.
    """
    k = len(policy.metrics)
    threshold = e_bonferroni_threshold(policy.alpha, k)
    segments = [
        (
            (a.baseline_count, a.candidate_count),
            (100.0 - a.candidate_weight_pct, a.candidate_weight_pct),
        )
        for a in observations.assignments
    ]
    srm_gate = srm_sequential(segments, alpha=policy.srm_alpha)
    srm_report = srm_chi_square(*segments[-1]) if segments else None
    current = observations.assignments[-1] if observations.assignments else None
    metrics = tuple(
        _metric_evidence(
            m, observations.metrics.get(m.name), threshold, policy.alpha, fixed_n_report
        )
        for m in policy.metrics
    )
    not_failing = sum(1 for m in metrics if m.status in ("pass", "undecided"))
    return Evidence(
        step_index=observations.step_index,
        elapsed_s=observations.elapsed_s,
        step_elapsed_s=observations.step_elapsed_s,
        step_baseline_count=current.baseline_count if current else 0,
        step_candidate_count=current.candidate_count if current else 0,
        srm_gate=srm_gate,
        srm_report=srm_report,
        metrics=metrics,
        alpha=policy.alpha,
        threshold=threshold,
        kayenta_score=round(100.0 * not_failing / k, 2),
        step_routed=observations.step_routed,
    )
