"""SRM report and sequential gate (reference section 2.4); expected values computed here."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from drift.canary.srm import srm_chi_square, srm_log_e_value, srm_sequential


def test_chi_square_matches_scipy_and_threshold() -> None:
    res = srm_chi_square([4700, 5300], [50, 50])
    ref = stats.chisquare([4700, 5300], [5000, 5000])
    assert res.statistic == pytest.approx(ref.statistic)
    assert res.pvalue == pytest.approx(ref.pvalue)
    assert res.df == 1 and res.mismatch and res.expected == (5000.0, 5000.0)
    ok = srm_chi_square([4980, 5020], [0.5, 0.5])
    assert not ok.mismatch and ok.score_kind == "pvalue"


def test_chi_square_without_assignments_is_unknown_not_zero() -> None:
    res = srm_chi_square([0, 0], [95, 5])
    assert res.statistic is None and res.pvalue is None and not res.mismatch


def test_zero_weight_arm_with_traffic_is_a_mismatch() -> None:
    assert srm_chi_square([100, 3], [100, 0]).mismatch
    assert srm_log_e_value([100, 3], [100, 0]) == math.inf
    assert srm_log_e_value([100, 0], [100, 0]) == 0.0


def test_dirichlet_multinomial_e_value_formula() -> None:
    counts, p0, c = [930, 70], [0.95, 0.05], 100.0
    a = [c * p for p in p0]
    n = sum(counts)
    log_e = (
        math.lgamma(sum(a))
        - math.lgamma(sum(a) + n)
        + sum(math.lgamma(ai + ni) - math.lgamma(ai) for ai, ni in zip(a, counts, strict=True))
        - sum(ni * math.log(pi) for ni, pi in zip(counts, p0, strict=True))
    )
    assert srm_log_e_value(counts, p0, concentration=c) == pytest.approx(log_e, rel=1e-12)


def test_sequential_gate_multiplies_segments() -> None:
    seg1 = ([900, 100], [90, 10])
    seg2 = ([1500, 500], [75, 25])
    res = srm_sequential([seg1, seg2])
    total = srm_log_e_value(*seg1) + srm_log_e_value(*seg2)
    assert res.log_e_value == pytest.approx(total)
    assert res.n == 3000 and res.pvalue == pytest.approx(min(1.0, math.exp(-total)))
    empty = srm_sequential([])
    assert empty.e_value == 1.0 and not empty.mismatch


def test_sequential_gate_detects_dropped_canary_requests() -> None:
    """A gateway that drops 15 % of the 10 % canary's requests is caught; a correct split is not."""
    rng = np.random.default_rng(7)
    n = 20000
    cand = rng.binomial(n, 0.10)
    dropped = rng.binomial(cand, 0.85)
    assert srm_sequential([([n - cand, dropped], [90, 10])]).mismatch
    assert not srm_sequential([([n - cand, cand], [90, 10])]).mismatch


def test_sequential_gate_false_alarms_stay_rare_over_many_looks() -> None:
    rng = np.random.default_rng(3)
    alarms = 0
    for _ in range(200):
        assign = rng.random(20000) < 0.2
        cum = np.cumsum(assign)
        for t in range(400, 20001, 400):
            if srm_sequential([([t - cum[t - 1], cum[t - 1]], [80, 20])], alpha=0.05).mismatch:
                alarms += 1
                break
    assert alarms / 200 <= 0.05


@pytest.mark.parametrize(
    ("counts", "weights", "name"),
    [([1, 2, 3], [1, 1], "counts"), ([-1, 2], [1, 1], "counts"), ([1, 2], [0, 0], "weights")],
)
def test_invalid_inputs(counts: list[int], weights: list[float], name: str) -> None:
    with pytest.raises(ValueError, match=name):
        srm_chi_square(counts, weights)
