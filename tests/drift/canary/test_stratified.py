"""Stratified, Hajek-weighted contrasts: golden values from the formulas, and the two biases they
remove (a shift common to both arms across steps; unequal judge sampling)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from drift.canary.sequential import gaussian_mixture_log_e_value, mean_difference_test
from drift.canary.stratified import (
    RATE_SHRINKAGE,
    merge_blocks,
    stratified_mean_test,
    stratified_proportion_test,
    weighted_mean,
)


def test_one_stratum_equal_weights_is_welch_when_candidate_is_noisier() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.normal(0, 1, 200), rng.normal(0.1, 2, 50)
    got = stratified_mean_test(a, b, tau2=0.04, alternative="greater")
    ref = mean_difference_test(a, b, tau2=0.04, alternative="greater")
    assert got.statistic == pytest.approx(ref.statistic)
    assert got.variance == pytest.approx(ref.variance)
    assert got.log_e_value == pytest.approx(ref.log_e_value)


def test_small_arm_uses_the_null_boundary_variance() -> None:
    """Candidate variance below c^2 s_A^2: the null-boundary value is used instead."""
    a = np.array([1.0, 3.0, 5.0, 7.0])
    b = np.array([4.0, 4.1, 3.9])
    c = 1.1
    got = stratified_mean_test(a, b, tau2=0.5, baseline_factor=c, alternative="less")
    s2a = np.var(a, ddof=1)
    variance = c * c * s2a / 3 + c * c * s2a / 4
    assert got.variance == pytest.approx(variance)
    assert got.statistic == pytest.approx(b.mean() - c * a.mean())
    ref = gaussian_mixture_log_e_value(got.statistic, variance, tau2=0.5, alternative="less")
    assert got.log_e_value == pytest.approx(ref)


def test_hajek_means_and_cmh_weights_match_the_formulas() -> None:
    a = np.array([1.0, 2.0, 3.0, 10.0, 11.0])
    pa = np.array([0.5, 0.5, 1.0, 0.2, 0.2])
    sa = np.array([0, 0, 0, 1, 1])
    b = np.array([2.0, 4.0, 12.0, 13.0, 14.0])
    pb = np.array([1.0, 0.5, 1.0, 1.0, 0.25])
    sb = np.array([0, 0, 1, 1, 1])
    got = stratified_mean_test(
        a,
        b,
        tau2=1.0,
        baseline_strata=sa,
        candidate_strata=sb,
        baseline_inclusion=pa,
        candidate_inclusion=pb,
    )

    def hajek(y: np.ndarray, p: np.ndarray) -> float:
        return float(np.sum(y / p) / np.sum(1 / p))

    d0 = hajek(b[:2], pb[:2]) - hajek(a[:3], pa[:3])
    d1 = hajek(b[2:], pb[2:]) - hajek(a[3:], pa[3:])
    h0, h1 = 3 * 2 / 5, 2 * 3 / 5
    assert got.statistic == pytest.approx((h0 * d0 + h1 * d1) / (h0 + h1))
    assert weighted_mean(a, pa) == pytest.approx(hajek(a, pa))


def test_a_shift_common_to_both_arms_cancels_across_steps() -> None:
    """Step 0: 5 % candidate at latency 1.0; step 1: 25 % candidate, both arms x1.5."""
    rng = np.random.default_rng(3)
    n0, n1 = 4000, 4000
    arm0 = rng.random(n0) < 0.05
    arm1 = rng.random(n1) < 0.25
    y0 = rng.lognormal(0, 0.5, n0)
    y1 = 1.5 * rng.lognormal(0, 0.5, n1)
    a = np.concatenate([y0[~arm0], y1[~arm1]])
    b = np.concatenate([y0[arm0], y1[arm1]])
    sa = np.concatenate([np.zeros((~arm0).sum()), np.ones((~arm1).sum())])
    sb = np.concatenate([np.zeros(arm0.sum()), np.ones(arm1.sum())])
    pooled = stratified_mean_test(a, b, tau2=0.01, alternative="greater")
    strat = stratified_mean_test(
        a, b, tau2=0.01, alternative="greater", baseline_strata=sa, candidate_strata=sb
    )
    assert pooled.statistic > 0.1  # the candidate looks slower when pooled
    assert abs(strat.statistic) < 3 * math.sqrt(strat.variance or 0.0)


def test_proportion_variance_formula() -> None:
    ka, na, kb, nb = [2, 0], [100, 50], [1, 3], [10, 40]
    got = stratified_proportion_test(ka, na, kb, nb, tau2=1e-3, null_value=0.02)
    pa_all, pb_all = 3 / 152, 5 / 52
    m = RATE_SHRINKAGE
    v, est, hs = 0.0, 0.0, 0.0
    for k_a, n_a, k_b, n_b in zip(ka, na, kb, nb, strict=True):
        pa = (k_a + m * pa_all) / (n_a + m)
        pb = (k_b + m * pb_all) / (n_b + m)
        p0 = pa + 0.02
        vs = max(pb * (1 - pb), p0 * (1 - p0)) / n_b + pa * (1 - pa) / n_a
        h = n_a * n_b / (n_a + n_b)
        v += h * h * vs
        est += h * (k_b / n_b - k_a / n_a)
        hs += h
    assert got.statistic == pytest.approx(est / hs)
    assert got.variance == pytest.approx(v / hs**2)


def test_merge_blocks_keeps_steps_apart_and_fills_arms() -> None:
    step = [0] * 8 + [1] * 4
    block = [0, 0, 1, 1, 2, 2, 3, 3, 0, 0, 1, 1]
    arm = [0, 1] * 6
    labels = merge_blocks(step, block, arm, min_per_arm=2)
    assert list(labels) == [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2]
    # a short tail joins the previous group; one group when nothing fills up
    assert list(merge_blocks([0] * 3, [0, 1, 2], [0, 1, 0], min_per_arm=2)) == [0, 0, 0]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"baseline_strata": [0]}, "baseline_strata"),
        ({"candidate_inclusion": [0.0, 1.0, 1.0]}, "candidate_inclusion"),
        ({"baseline_strata": [0, 0, 0], "candidate_strata": [1, 1, 1]}, "no stratum"),
    ],
)
def test_invalid_inputs_name_the_parameter(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        stratified_mean_test([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], tau2=1.0, **kwargs)  # type: ignore[arg-type]


def test_hajek_mean_and_variance_are_the_quality_pages_estimator() -> None:
    """drift may not import judges; the canary's Hajek mean and linearised variance must equal
    judges.ppi.classic_mean's (the Quality page's PPI with lambda = 0)."""
    from judges.ppi import classic_mean

    rng = np.random.default_rng(8)
    a, pa = rng.normal(4, 0.5, 300), rng.choice([0.05, 1.0], 300)
    b, pb = rng.normal(4, 2.0, 80), rng.choice([0.5, 1.0], 80)
    ca, cb = classic_mean(a, inclusion=pa), classic_mean(b, inclusion=pb)
    got = stratified_mean_test(a, b, tau2=0.04, baseline_inclusion=pa, candidate_inclusion=pb)
    assert weighted_mean(a, pa) == pytest.approx(ca.estimate)
    assert got.statistic == pytest.approx(cb.estimate - ca.estimate)
    assert got.variance == pytest.approx(cb.se**2 + ca.se**2)


def test_null_boundary_compares_variances_pooled_over_strata() -> None:
    """Per stratum the candidate is once quieter and once noisier than the baseline; pooled they
    are equal, so nothing is inflated (a per-stratum max would inflate both strata)."""
    a = np.array([0.0, 2.0, 0.0, 2.0, 10.0, 14.0, 10.0, 14.0])  # s^2: 4/3 and 16/3
    b = np.array([0.0, 4.0, 0.0, 4.0, 11.0, 13.0, 11.0, 13.0])  # s^2: 16/3 and 4/3
    s = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    got = stratified_mean_test(a, b, tau2=1.0, baseline_strata=s, candidate_strata=s)
    v = np.array([16 / 3 / 4 + 4 / 3 / 4, 4 / 3 / 4 + 16 / 3 / 4])
    assert got.variance == pytest.approx(float(np.sum(v) / 4))  # h = 2 per stratum
    # a uniformly quieter candidate is scaled up to the baseline's pooled variance
    quiet = np.array([1.0, 1.5, 1.0, 1.5, 11.5, 12.5, 11.5, 12.5])  # s^2: 1/12 and 1/3
    got = stratified_mean_test(a, quiet, tau2=1.0, baseline_strata=s, candidate_strata=s)
    r = (4 / 3 + 16 / 3) / (1 / 12 + 1 / 3)
    v = np.array([r / 12 / 4 + 4 / 3 / 4, r / 3 / 4 + 16 / 3 / 4])
    assert got.variance == pytest.approx(float(np.sum(v) / 4))


def test_null_boundary_keeps_the_candidates_sampling_design() -> None:
    """Judged at different rates, equal scores: the arms' per-judgement variances differ by
    their design factors; the null boundary must not hand the baseline's to the candidate."""
    rng = np.random.default_rng(11)
    y_a, y_b = rng.normal(4, 0.8, 4000), rng.normal(4, 0.8, 4000)
    pa = np.where(rng.random(4000) < 0.5, 1.0, 0.05)  # weights 1 and 20: large design factor
    pb = np.full(4000, 0.5)  # equal weights: design factor 1
    got = stratified_mean_test(y_a, y_b, tau2=0.04, baseline_inclusion=pa, candidate_inclusion=pb)
    w = 1 / pa
    wn = w / w.mean()
    m_a = float(np.sum(w * y_a) / np.sum(w))
    v_a = float(np.sum(wn * wn * (y_a - m_a) ** 2) / (4000 - 1))
    v_b = float(np.var(y_b, ddof=1))
    pop_a = float(np.sum(wn * (y_a - m_a) ** 2) / (4000 - 1))
    r = max(1.0, pop_a / v_b)
    assert got.variance == pytest.approx(r * v_b / 4000 + v_a / 4000)
    assert r < 1.1 < v_a / v_b  # the old per-judgement maximum would have used v_a
