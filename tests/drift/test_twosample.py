"""Two-sample tests, distances, multiple testing and calibrated thresholds.

Golden values come from direct scipy calls (or a hand computation where scipy has no
function); case 18 values from tests/fixtures/cases/EXPECTED.md.
"""

from __future__ import annotations

import json
import math
from functools import partial
from typing import Any

import numpy as np
import pytest
from scipy import stats
from scipy.spatial.distance import jensenshannon

from drift.distances import (
    binned_shares,
    jensen_shannon_test,
    normed_wasserstein_sorted,
    psi_test,
    smooth_shares,
    wasserstein_sorted,
    wasserstein_test,
)
from drift.errors import CalibrationError, DriftError
from drift.multitest import benjamini_hochberg, bonferroni
from drift.thresholds import (
    apply_calibrated,
    calibrate_quantile_threshold,
    calibrate_threshold,
)
from drift.twosample import chi_square_test, ks_test, proportion_z_test
from tests.support.fixtures import CASES


def _case18() -> dict[str, Any]:
    with (CASES / "18_drift_constant_values.json").open() as f:
        data: dict[str, Any] = json.load(f)["scenarios"]
    return data


# --- case 18: constant windows -------------------------------------------------------------


def test_case18_identical_constants_no_drift_no_nan() -> None:
    cols = _case18()["A_identical_constants"]["columns"]
    ttft, fr = cols["ttft_seconds"], cols["finish_reason"]
    ks = ks_test(ttft["reference"], ttft["current"])
    assert ks.statistic == 0.0
    assert ks.pvalue == 1.0
    assert ks.drifted is False
    psi = psi_test(ttft["reference"], ttft["current"], categorical=False)
    assert psi.statistic == 0.0 and psi.drifted is False
    wd = wasserstein_test(ttft["reference"], ttft["current"])  # reference std is 0
    assert wd.statistic == 0.0 and wd.drifted is False
    chi = chi_square_test(fr["reference"], fr["current"])
    assert chi.pvalue == 1.0 and chi.statistic == 0.0 and chi.drifted is False
    js = jensen_shannon_test(fr["reference"], fr["current"], categorical=True)
    assert js.statistic == 0.0 and js.drifted is False
    for r in (ks, psi, wd, chi, js):
        assert r.statistic is not None and math.isfinite(r.statistic)
        assert r.insufficient_data is False


def test_case18_different_constants_drift_all_finite() -> None:
    cols = _case18()["B_different_constants"]["columns"]
    ttft, fr = cols["ttft_seconds"], cols["finish_reason"]
    ks = ks_test(ttft["reference"], ttft["current"])
    assert ks.statistic == 1.0
    assert ks.pvalue == pytest.approx(1.9e-119, rel=0.05)
    assert ks.drifted is True
    chi = chi_square_test(fr["reference"], fr["current"])
    assert chi.statistic == pytest.approx(396.01)
    assert chi.pvalue == pytest.approx(4e-88, rel=0.05)
    assert chi.drifted is True
    assert chi.unseen_categories == ("length",)
    for r in (
        psi_test(ttft["reference"], ttft["current"], categorical=False),
        psi_test(fr["reference"], fr["current"], categorical=True),
        wasserstein_test(ttft["reference"], ttft["current"]),
        jensen_shannon_test(fr["reference"], fr["current"], categorical=True),
    ):
        assert r.statistic is not None and math.isfinite(r.statistic)
        assert r.drifted is True


# --- golden values vs scipy ----------------------------------------------------------------


@pytest.fixture
def samples() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    return rng.lognormal(-1.0, 0.5, 400), rng.lognormal(-0.9, 0.55, 300)


def test_ks_matches_scipy(samples: tuple[np.ndarray, np.ndarray]) -> None:
    ref, cur = samples
    want = stats.ks_2samp(ref, cur)
    got = ks_test(ref, cur)
    assert got.statistic == pytest.approx(want.statistic, abs=0, rel=1e-12)
    assert got.pvalue == pytest.approx(want.pvalue, rel=1e-12)
    assert got.drifted is bool(want.pvalue < 0.05)
    assert (got.n_reference, got.n_current, got.score_kind) == (400, 300, "pvalue")


def test_chi_square_is_contingency_over_union_of_categories() -> None:
    ref = ["stop"] * 80 + ["length"] * 15 + ["tool_calls"] * 5
    cur = ["stop"] * 60 + ["length"] * 25 + ["content_filter"] * 15
    # columns sorted by name: content_filter, length, stop, tool_calls
    table = np.array([[0, 15, 80, 5], [15, 25, 60, 0]])
    want = stats.chi2_contingency(table)
    got = chi_square_test(ref, cur)
    assert got.statistic == pytest.approx(want.statistic, rel=1e-12)
    assert got.pvalue == pytest.approx(want.pvalue, rel=1e-12)
    assert got.unseen_categories == ("content_filter",)
    assert got.drifted is True


def test_z_test_squared_equals_uncorrected_chi_square() -> None:
    ref = np.r_[np.ones(30), np.zeros(170)]
    cur = np.r_[np.ones(52), np.zeros(148)]
    got = proportion_z_test(ref, cur)
    want = stats.chi2_contingency(np.array([[30, 170], [52, 148]]), correction=False)
    assert got.statistic is not None and got.statistic > 0  # current rate is higher
    assert got.statistic**2 == pytest.approx(want.statistic, rel=1e-12)
    assert got.pvalue == pytest.approx(want.pvalue, rel=1e-10)


def test_z_test_both_constant_equal_is_p_one() -> None:
    got = proportion_z_test(np.zeros(50), np.zeros(60))
    assert (got.statistic, got.pvalue, got.drifted) == (0.0, 1.0, False)


def test_wasserstein_normed_matches_scipy(samples: tuple[np.ndarray, np.ndarray]) -> None:
    ref, cur = samples
    got = wasserstein_test(ref, cur)
    want = stats.wasserstein_distance(ref, cur) / np.std(ref)
    assert got.statistic == pytest.approx(want, rel=1e-12)
    assert got.pvalue is None and got.score_kind == "distance"
    assert got.drifted is bool(want >= 0.1)


def test_wasserstein_from_sorted_windows_is_scipys_float() -> None:
    # drift.coldetail's effect size: the same float as scipy on the sorted windows (ties and
    # shared values included: token counts, rounded latencies, constants, one value)
    rng = np.random.default_rng(11)
    pairs = [
        (rng.lognormal(5.0, 0.6, 20_000).astype(int), rng.lognormal(5.6, 0.6, 7_000).astype(int)),
        (rng.gamma(4.0, 0.06, 9_000), rng.gamma(4.0, 0.061, 11_000)),
        (np.round(rng.gamma(2.0, 1.0, 5_000), 2), np.round(rng.gamma(2.0, 1.1, 5_000), 2)),
        (rng.integers(0, 5, 3_000), rng.integers(2, 9, 500)),
        (np.full(40, 3.0), np.full(60, 3.0)),
        (np.full(40, 3.0), np.full(60, 4.0)),
        (np.array([1.0]), np.array([2.0, -1.0])),
    ]
    for ref, cur in pairs:
        r, c = np.sort(ref.astype(np.float64)), np.sort(cur.astype(np.float64))
        # scipy's float up to its summation (np.vecdot: BLAS, thread-count dependent)
        assert wasserstein_sorted(r, c) == pytest.approx(stats.wasserstein_distance(r, c), 1e-13)
        want = _scipy_w1_pairwise(r, c)  # scipy's own steps, summed as np.sum(x * y)
        assert wasserstein_sorted(r, c).hex() == want.hex()
        assert normed_wasserstein_sorted(r, c) == wasserstein_test(r, c, min_samples=1).statistic
        # the merge read from an (unstable) argsort of the unsorted windows: the same float
        pooled = np.concatenate([rng.permutation(ref), rng.permutation(cur)]).astype(np.float64)
        order = np.argsort(pooled)
        assert wasserstein_sorted(r, c, order).hex() == want.hex()
        # and the merged values handed over (drift.colwindow.Prepared.merged): the same float
        assert wasserstein_sorted(r, c, order, pooled[order]).hex() == want.hex()


def _scipy_w1_pairwise(u: np.ndarray, v: np.ndarray) -> float:
    """scipy's ``_cdf_distance`` (p = 1) step by step, with numpy 1.x's ``np.sum(x * y)``."""
    u_sorter, v_sorter = np.argsort(u), np.argsort(v)
    all_values = np.concatenate((u, v))
    all_values.sort(kind="mergesort")
    deltas = np.diff(all_values)
    u_cdf = u[u_sorter].searchsorted(all_values[:-1], "right") / u.size
    v_cdf = v[v_sorter].searchsorted(all_values[:-1], "right") / v.size
    return float(np.sum(np.abs(u_cdf - v_cdf) * deltas))


def test_wasserstein_sum_does_not_use_blas_threads() -> None:
    # a stored effect size must not depend on the machine's BLAS thread count: the sum is
    # numpy's pairwise reduction, never the threaded ddot (np.vecdot / np.dot over 10k values)
    from threadpoolctl import threadpool_limits  # scikit-learn's dependency

    rng = np.random.default_rng(5)
    r, c = np.sort(rng.gamma(2.0, 1.0, 60_000)), np.sort(rng.gamma(2.0, 1.05, 40_000))
    got = wasserstein_sorted(r, c)
    assert got.hex() == _scipy_w1_pairwise(r, c).hex()
    for threads in (1, 2, 4):
        with threadpool_limits(limits=threads, user_api="blas"):
            assert wasserstein_sorted(r, c).hex() == got.hex()


def test_jensen_shannon_matches_scipy_on_sturges_bins(
    samples: tuple[np.ndarray, np.ndarray],
) -> None:
    ref, cur = samples
    edges = np.histogram_bin_edges(np.concatenate([ref, cur]), bins="sturges")
    r = np.histogram(ref, edges)[0] / ref.size
    c = np.histogram(cur, edges)[0] / cur.size
    got = jensen_shannon_test(ref, cur, categorical=False)
    assert got.statistic == pytest.approx(jensenshannon(r, c, base=2), rel=1e-12)


def test_psi_hand_computed_and_smoothing() -> None:
    ref = ["a"] * 50 + ["b"] * 50
    cur = ["a"] * 25 + ["b"] * 75
    want = (0.5 - 0.25) * math.log(0.5 / 0.25) + (0.5 - 0.75) * math.log(0.5 / 0.75)
    got = psi_test(ref, cur, categorical=True)
    assert got.statistic == pytest.approx(want, rel=1e-12)
    assert got.drifted is True  # 0.275 >= 0.1
    assert smooth_shares(np.array([0.5, 0.5, 0.0])).tolist() == [0.5, 0.5, 1e-4]
    tiny = smooth_shares(np.array([1 - 5e-5, 5e-5, 0.0]))
    assert tiny[2] == pytest.approx(5e-5 / 1e6)


def test_binned_shares_few_values_get_one_bin_each() -> None:
    r, c, unseen = binned_shares([1, 1, 2, 2], [2, 3, 3, 3], categorical=False)
    assert r.tolist() == [0.5, 0.5, 0.0]
    assert c.tolist() == [0.0, 0.25, 0.75]
    assert unseen == ()


# --- insufficient data and validation ------------------------------------------------------


@pytest.mark.parametrize(
    "call",
    [
        lambda r, c: ks_test(r, c),
        lambda r, c: wasserstein_test(r, c),
        lambda r, c: psi_test(r, c, categorical=False),
        lambda r, c: jensen_shannon_test(r, c, categorical=False),
        lambda r, c: chi_square_test(r, c),
        lambda r, c: proportion_z_test(np.ones(len(r)), np.ones(len(c))),
    ],
)
def test_below_min_samples_gives_no_verdict(call: Any) -> None:
    ref = list(np.linspace(0.2, 0.69, 200))
    res = call(ref, [0.9, 0.95, 1.0])  # naive KS would call this drift (case 19)
    assert res.insufficient_data is True
    assert res.drifted is None and res.statistic is None and res.pvalue is None
    assert (res.n_reference, res.n_current) == (200, 3)
    empty = call(ref, [])
    assert empty.insufficient_data is True and empty.n_current == 0


def test_validation_names_the_parameter() -> None:
    with pytest.raises(ValueError, match="current"):
        ks_test([1.0] * 40, [1.0, float("nan")] * 20)
    with pytest.raises(ValueError, match="reference"):
        chi_square_test(["a", None] * 20, ["a"] * 40)
    with pytest.raises(ValueError, match="alpha"):
        ks_test([1.0] * 40, [1.0] * 40, alpha=-1)
    with pytest.raises(ValueError, match="min_samples"):
        ks_test([1.0] * 40, [1.0] * 40, min_samples=0)
    with pytest.raises(ValueError, match="0/1"):
        proportion_z_test([0.5] * 40, [1.0] * 40)
    with pytest.raises(ValueError, match="std_floor"):
        wasserstein_test([1.0] * 40, [1.0] * 40, std_floor=0)


# --- multiple testing ----------------------------------------------------------------------


def test_bh_matches_scipy_and_skips_none() -> None:
    rng = np.random.default_rng(3)
    p = np.r_[rng.uniform(size=20), rng.uniform(0, 0.002, size=5)]
    with_none: list[float | None] = [*p.tolist(), None]
    got = benjamini_hochberg(with_none, q=0.1)
    want = stats.false_discovery_control(p, method="bh")
    assert got.m == 25
    assert got.adjusted[-1] is None and got.rejected[-1] is None
    assert np.allclose([a for a in got.adjusted if a is not None], want, rtol=1e-12)
    assert [r for r in got.rejected if r is not None] == (want <= 0.1).tolist()
    # the step-up cutoff: the largest p_(k) with p_(k) <= q k / m
    srt = np.sort(p)
    ok = np.flatnonzero(srt <= 0.1 * np.arange(1, 26) / 25)
    assert got.cutoff == srt[ok.max()]


def test_bh_rejects_what_a_single_test_would_not_and_vice_versa() -> None:
    res = benjamini_hochberg([0.01, 0.02, 0.03, 0.04, 0.05], q=0.05)
    assert all(res.rejected)  # 0.05 <= 0.05 * 5/5
    res2 = benjamini_hochberg([0.01, 0.9, 0.9, 0.9, 0.9], q=0.04)
    assert res2.rejected == (False, False, False, False, False)  # 0.01 > 0.04/5
    assert benjamini_hochberg([None, None]).m == 0


def test_bonferroni() -> None:
    res = bonferroni([0.001, 0.02, None, 0.5], alpha=0.05)
    assert res.rejected == (True, False, None, False)
    assert res.adjusted == (pytest.approx(0.003), pytest.approx(0.06), None, 1.0)
    with pytest.raises(ValueError, match="pvalues"):
        bonferroni([1.5])
    with pytest.raises(ValueError, match="alpha"):
        bonferroni([0.5], alpha=1.0)


# --- noise-calibrated thresholds -----------------------------------------------------------


def test_calibrated_threshold_is_mean_plus_k_sd_of_chunk_statistics() -> None:
    rng = np.random.default_rng(11)
    ref = rng.normal(size=1000).tolist()
    test = partial(wasserstein_test, min_samples=30)
    cal = calibrate_threshold(ref, test, chunk_size=100, n_chunks=10, k=3.0)
    assert len(cal.chunk_scores) == 9  # 10 chunks of 100 leave no rest for the last one
    first = wasserstein_test(ref[100:], ref[:100]).statistic
    assert cal.chunk_scores[0] == pytest.approx(first)
    assert cal.threshold == pytest.approx(
        np.mean(cal.chunk_scores) + 3 * np.std(cal.chunk_scores, ddof=1)
    )
    # a same-distribution window of the calibrated size stays below it; a 1-sd shift does not
    same = apply_calibrated(test(ref, rng.normal(size=100).tolist()), cal)
    shifted = apply_calibrated(test(ref, rng.normal(1.0, 1.0, size=100).tolist()), cal)
    assert same.drifted is False and shifted.drifted is True
    assert shifted.score_kind == "distance" and shifted.threshold == cal.threshold


def test_calibration_on_constant_reference_and_errors() -> None:
    cal = calibrate_threshold([0.5] * 300, partial(ks_test), chunk_size=50)
    assert (cal.threshold, cal.sd) == (0.0, 0.0)
    assert apply_calibrated(ks_test([0.5] * 300, [0.5] * 50), cal).drifted is False
    assert apply_calibrated(ks_test([0.5] * 300, [0.7] * 50), cal).drifted is True
    with pytest.raises(CalibrationError):
        calibrate_threshold([0.5] * 60, partial(ks_test), chunk_size=50)
    with pytest.raises(DriftError):  # chunk below the test's min_samples: no statistic
        calibrate_threshold([0.5] * 300, partial(ks_test), chunk_size=10)
    with pytest.raises(ValueError, match="chunk_size"):
        calibrate_threshold([0.5] * 300, partial(ks_test), chunk_size=0)
    with pytest.raises(ValueError, match="calibration"):
        apply_calibrated(chi_square_test(["a"] * 40, ["a"] * 40), cal)


def test_quantile_threshold_is_the_conformal_order_statistic() -> None:
    rng = np.random.default_rng(12)
    ref = rng.lognormal(0, 1, size=2000).tolist()
    test = partial(wasserstein_test, min_samples=30)
    cal = calibrate_quantile_threshold(
        ref, test, chunk_size=100, rng=rng, false_alarm_rate=0.05, n_resamples=99
    )
    assert cal.rule == "quantile" and cal.k is None and cal.false_alarm_rate == 0.05
    assert len(cal.chunk_scores) == 99
    assert cal.threshold == sorted(cal.chunk_scores)[94]  # ceil(0.95 * 100) = 95th smallest
    # fresh stationary windows exceed it about 5% of the time, never much more
    exceed = [
        apply_calibrated(test(ref, rng.lognormal(0, 1, size=100).tolist()), cal).drifted
        for _ in range(200)
    ]
    assert sum(bool(e) for e in exceed) / 200 < 0.12
    with pytest.raises(ValueError, match="n_resamples"):
        calibrate_quantile_threshold(ref, test, chunk_size=100, rng=rng, false_alarm_rate=0.001)
    with pytest.raises(ValueError, match="false_alarm_rate"):
        calibrate_quantile_threshold(ref, test, chunk_size=100, rng=rng, false_alarm_rate=0)
    with pytest.raises(CalibrationError):
        calibrate_quantile_threshold(ref[:100], test, chunk_size=100, rng=rng)
