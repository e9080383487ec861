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
same null) promotes. Both use ``threshold = K / alpha`` (e-Bonferroni over the K metrics). The
tests of each kind of metric are in :mod:`drift.canary.armtests`.
"""

from __future__ import annotations

from drift.canary.armtests import (  # noqa: F401 (kish_effective_n, tail test: public here too)
    MIN_EFFECTIVE_SAMPLES,
    TAIL_QUANTILE,
    ArmTests,
    count_tests,
    kish_effective_n,
    ratio_tests,
    sample_tests,
    tail_exceedance_test,
)
from drift.canary.policy import (
    CanaryObservations,
    Evidence,
    MetricEvidence,
    MetricKind,
    MetricPolicy,
    MetricStatus,
    Observations,
    RolloutPolicy,
)
from drift.canary.sequential import e_bonferroni_threshold
from drift.canary.srm import srm_chi_square, srm_sequential


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


#: the tests of each kind of metric (:mod:`drift.canary.armtests`)
_TESTS = {
    MetricKind.MEAN: sample_tests,
    MetricKind.PAIRWISE: sample_tests,
    MetricKind.PROPORTION: count_tests,
    MetricKind.RARE_EVENT: count_tests,
    MetricKind.RATIO: ratio_tests,
}


def _metric_evidence(
    metric: MetricPolicy,
    obs: Observations | None,
    threshold: float,
    alpha: float,
    fixed_n_report: bool,
) -> MetricEvidence:
    """One metric's evidence: its two tests (:data:`_TESTS` by kind) and the verdict — fail
    when the harm e-value reaches ``threshold``, else pass when the non-inferiority one does,
    else undecided; ``no_data`` without observations or with too few."""
    # each test at the per-metric level 1/threshold = alpha/K: its one-sided bound excludes the
    # null exactly when its e-value reaches the threshold (the dashboard draws that bound)
    alpha = 1.0 / threshold
    if obs is None:
        return _no_data(metric, threshold, "no observations", 0, 0)
    tested = _TESTS[metric.kind](metric, obs, alpha, fixed_n_report)
    if not isinstance(tested, ArmTests):
        return _no_data(metric, threshold, *tested)
    harm, ni = tested.harm, tested.non_inferiority
    base, cand = tested.baseline_value, tested.candidate_value
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
        kind=metric.kind.value,
        direction=metric.direction.value,
        status=status,
        threshold=threshold,
        harm=harm,
        non_inferiority=ni,
        baseline_value=base,
        candidate_value=cand,
        n_baseline=harm.n_baseline,
        n_candidate=harm.n_candidate,
        mann_whitney_pvalue=tested.mann_whitney_pvalue,
        reason=(
            f"{metric.name}: baseline {base:.4g} candidate {cand:.4g} (margin {margin}) {verdict}"
        ),
        tail=tested.tail,
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
