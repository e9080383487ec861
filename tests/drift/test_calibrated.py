"""Calibrated drift tests (drift/calibrated.py) and the drift simulation at the defaults.

The simulation tests drive :func:`drift.columnar.evaluate_columns` (what ``run_drift`` calls after
extraction) with ``DriftSettings()`` defaults, at small run counts and fixed seeds; the full
figures are in ``benchmarks/drift_calibration.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from scipy.signal import lfilter

from drift.calibrated import (
    binomtest_pvalue,
    block_layout,
    block_rank_test,
    categorical_rate_test,
    hajek_mean_test,
    rate_test,
)
from drift.colwindow import RADIX_MIN, argsort_values
from drift.simulate import result_lines, simulate


def _ar1(rng: np.random.Generator, n: int, rho: float) -> np.ndarray:
    e = rng.standard_normal(n)
    z, _ = lfilter([np.sqrt(1 - rho**2)], [1, -rho], e, zi=[rho * rng.standard_normal()])
    return np.asarray(z)


def test_block_layout_keeps_enough_reference_blocks() -> None:
    assert block_layout(24_000, 1_000) == (1_000, 24, 1)
    assert block_layout(960, 40) == (40, 24, 1)
    assert block_layout(2_400, 400) == (200, 12, 2)  # short reference: smaller blocks
    assert block_layout(100, 40) == (0, 0, 0)  # blocks under 10 calls: no verdict


def test_block_rank_test_holds_its_level_on_autocorrelated_heavy_tailed_data() -> None:
    """AR(1) rho 0.8, lognormal: KS on the same data rejects at 0.05 in about half the runs."""
    rng = np.random.default_rng(7)
    pvalues = []
    for _ in range(300):
        x = np.exp(_ar1(rng, 25 * 60, 0.8))
        pvalues.append(block_rank_test(x[: 24 * 60], x[24 * 60 :]).pvalue)
    p = np.array(pvalues)
    assert (p < 0.05).mean() <= 0.08  # nominal 0.05, binomial sd 0.013 at 300 runs
    assert (p < 0.01).mean() <= 0.025


def test_block_rank_test_detects_a_shift_and_a_tail_change_and_reports_no_data() -> None:
    rng = np.random.default_rng(8)
    ref = rng.lognormal(size=9_600)
    shifted = block_rank_test(ref, rng.lognormal(0.5, size=400))
    assert shifted.pvalue is not None and shifted.pvalue < 1e-6
    assert shifted.statistic is not None and shifted.statistic > 0
    wider = block_rank_test(ref, rng.lognormal(0, 2.0, size=400))
    assert wider.pvalue is not None and wider.pvalue < 1e-4
    few = block_rank_test(ref, ref[:20])
    assert few.insufficient_data and few.drifted is None and few.pvalue is None
    with pytest.raises(ValueError, match="reference"):
        block_rank_test([1.0, np.nan], [1.0])


def test_rate_test_level_power_and_tested_without_events() -> None:
    rng = np.random.default_rng(9)
    null = [
        rate_test(rng.random(24_000) < 0.01, rng.random(1_000) < 0.01).pvalue for _ in range(300)
    ]
    assert (np.array(null) < 0.01).mean() <= 0.02  # exact test: at most its level
    power = [
        rate_test(rng.random(24_000) < 0.01, rng.random(1_000) < 0.03).pvalue for _ in range(100)
    ]
    assert (np.array(power) < 0.001).mean() >= 0.8  # 1 % -> 3 % at 1,000 calls, alpha 0.001
    none = rate_test(np.zeros(500), np.zeros(40))
    assert none.insufficient_data is False and none.pvalue == 1.0 and none.drifted is False
    assert rate_test(np.zeros(500), np.zeros(10)).insufficient_data is True
    with pytest.raises(ValueError, match="0/1"):
        rate_test([0, 2] * 20, [0, 1] * 20)


def test_rate_test_widens_for_rates_that_move_with_the_hour() -> None:
    """Hourly rates 1 % x (1 +- 0.8): the exact binomial test alone over-rejects; the
    quasi-binomial guard brings it back to its level."""
    rng = np.random.default_rng(10)
    rejected = 0
    for _ in range(200):
        rates = 0.01 * (1 + 0.8 * np.sin(2 * np.pi * (np.arange(25) / 24 + rng.random())))
        x = np.concatenate([rng.random(2_000) < r for r in rates])
        rejected += (rate_test(x[: 24 * 2_000], x[24 * 2_000 :]).pvalue or 1) < 0.01
    assert rejected / 200 <= 0.03


def test_categorical_rate_test_bonferroni_across_categories() -> None:
    rng = np.random.default_rng(11)
    ref = rng.choice(3, size=5_000, p=[0.9, 0.08, 0.02])
    same = categorical_rate_test(ref, rng.choice(3, size=500, p=[0.9, 0.08, 0.02]))
    moved = categorical_rate_test(ref, rng.choice(3, size=500, p=[0.84, 0.08, 0.08]))
    assert same.pvalue is not None and moved.pvalue is not None
    assert moved.pvalue < 1e-4 < same.pvalue


def test_hajek_removes_the_bias_of_unequal_judge_sampling() -> None:
    """Flagged calls (score 2) always judged, others (score 4) at 5 % then 15 %: the plain mean
    of judged calls moves with the sampling rate, the Hajek mean does not."""
    rng = np.random.default_rng(12)
    plain_rejects, hajek_rejects = 0, 0
    for _ in range(50):
        windows = []
        for n, rate in ((24_000, 0.05), (1_000, 0.15)):
            flagged = rng.random(n) < 0.05
            pi = np.where(flagged, 1.0, rate)
            keep = rng.random(n) < pi
            y = np.where(flagged, 2.0, 4.0) + rng.normal(0, 0.5, n)
            windows.append((y[keep], 1 / pi[keep]))
        (yr, wr), (yc, wc) = windows
        hajek_rejects += (hajek_mean_test(yr, yc, wr, wc).pvalue or 1) < 0.01
        plain = hajek_mean_test(yr, yc, np.ones_like(yr), np.ones_like(yc))
        plain_rejects += (plain.pvalue or 1) < 0.01
    assert plain_rejects >= 45 and hajek_rejects <= 3


@pytest.mark.parametrize(
    ("scenario", "calls_per_hour", "runs"),
    [("stationary", 40, 40), ("ar1", 400, 25), ("daily-cycle", 2_000, 10)],
)
def test_simulated_null_runs_at_the_defaults_do_not_alarm(
    scenario: str, calls_per_hour: int, runs: int
) -> None:
    res = simulate(scenario, calls_per_hour, runs, seed=1)
    assert res.target is None and len(res.rates) == 9
    assert max(res.rates.values()) <= 1 / runs, result_lines(res)


@pytest.mark.parametrize(
    ("scenario", "calls_per_hour", "runs"), [("shift", 400, 15), ("rare-rate-3x", 1_000, 25)]
)
def test_simulated_changes_at_the_defaults_are_detected(
    scenario: str, calls_per_hour: int, runs: int
) -> None:
    res = simulate(scenario, calls_per_hour, runs, seed=2)
    assert res.target is not None and res.rates[res.target] >= 0.8, result_lines(res)
    # BH lowers the bar for the others once the target is rejected (q = 0.01 per null signal)
    assert max(v for k, v in res.rates.items() if k != res.target) <= 1 / runs
    assert any(line.startswith("RESULT detection_rate=") for line in result_lines(res))


def test_drift_simulate_cli_prints_result_lines() -> None:
    from click.testing import CliRunner

    from drift.cli import drift

    args = ["simulate", "--scenario", "rare-rate-3x", "--calls-per-hour", "1000", "--runs", "3"]
    out = CliRunner().invoke(drift, args)
    assert out.exit_code == 0, out.output
    assert "RESULT detection_rate=" in out.output
    assert "RESULT false_alarm_rate.ttft_s=" in out.output
    bad = CliRunner().invoke(drift, ["simulate", "--scenario", "nope"])
    assert bad.exit_code == 2 and "nope" in bad.output


def test_average_ranks_equal_scipy_rankdata_exactly() -> None:
    from scipy import stats

    from drift.calibrated import average_ranks

    rng = np.random.default_rng(5)
    for x in (
        rng.normal(size=5000),
        rng.integers(0, 20, 5000).astype(np.float64),  # heavy ties
        np.round(rng.gamma(2.0, 1.0, 5000), 2),
        np.array([3.0]),
        np.array([1.0, 1.0, 1.0]),
    ):
        got = average_ranks(x)
        assert got.dtype == np.float64
        assert np.array_equal(got, stats.rankdata(x))
        for kind in ("quicksort", "stable"):  # a known sort, ties in either order
            assert np.array_equal(average_ranks(x, np.argsort(x, kind=kind)), got)
    with pytest.raises(ValueError, match="argsort"):
        average_ranks(np.array([2.0, 1.0]), np.array([0, 1]))


def test_block_rank_test_reuses_a_sort_of_both_windows_with_the_same_result() -> None:
    # drift.colwindow.prepare's one argsort of a column: the same statistic and p-value, for
    # layouts that leave out the oldest reference calls and the newest current ones
    rng = np.random.default_rng(8)
    for n_ref, n_cur in ((50_000, 50_000), (24_000, 1_000), (5_000, 777), (400, 41)):
        ref = np.round(rng.lognormal(5.0, 0.6, n_ref))  # token counts: many ties
        cur = np.round(rng.lognormal(5.05, 0.6, n_cur))
        order = np.argsort(np.concatenate([ref, cur]))
        assert block_rank_test(ref, cur, order=order) == block_rank_test(ref, cur)
    with pytest.raises(ValueError, match="order"):
        block_rank_test(ref, cur, order=order[:-1])


def test_argsort_values_sorts_like_argsort_on_every_kind_of_column() -> None:
    # drift.colwindow.argsort_values: whole numbers spanning < 2**16 take the uint16 radix
    # sort, everything else np.argsort; either way a permutation with the sorted values, and
    # the block rank test given it is the test given np.argsort's order
    rng = np.random.default_rng(31)
    n = 20_000
    cases = {
        "tokens": np.round(rng.lognormal(5.0, 0.6, n)),
        "negative whole": rng.integers(-30_000, 30_000, n).astype(np.float64),
        "span 2**16 - 1": np.concatenate([[0.0, 65_535.0], rng.integers(0, 65_536, n)]),
        "span 2**16": np.concatenate([[0.0, 65_536.0], rng.integers(0, 65_536, n)]),
        "huge whole": 2.0**52 + rng.integers(0, 100, n),
        "seconds": rng.lognormal(-1.0, 1.0, n),
        "whole head, fraction later": np.concatenate([np.arange(64.0), rng.random(n)]),
        "inf": np.concatenate([np.arange(100.0), [np.inf], rng.integers(0, 9, n)]),
        "-inf": np.concatenate([[-np.inf], rng.integers(0, 9, n).astype(np.float64)]),
        "signed zeros": np.where(rng.random(n) < 0.5, -0.0, 0.0),
        "short": np.round(rng.lognormal(3.0, 1.0, RADIX_MIN - 1)),
    }
    for name, x in cases.items():
        order = argsort_values(x)
        assert np.array_equal(np.sort(order), np.arange(x.size)), name
        assert np.array_equal(x[order], np.sort(x)), name
    ref, cur = cases["tokens"][:15_000], cases["tokens"][15_000:]
    pooled = np.concatenate([ref, cur])
    assert block_rank_test(ref, cur, order=argsort_values(pooled)) == block_rank_test(
        ref, cur, order=np.argsort(pooled)
    )


def test_binomtest_pvalue_equals_scipy_binomtest_float_for_float() -> None:
    """Every alternative, k = 0 / n / at and next to the mode, p near 0 and 1, n up to 1e6."""
    rng = np.random.default_rng(19)
    ps = [1e-9, 1e-6, 0.01, 0.25, 1 / 3, 0.5, 0.5000049711178055, 0.9, 1 - 1e-6, 1 - 1e-9]
    cases = [(k, n, p) for n in (1, 2, 3, 7, 30) for k in range(n + 1) for p in ps]
    for n in (100, 1_000, 95_136, 10**6):
        for p in [*ps, float(rng.random())]:
            mode = int(n * p)
            ks = {0, n, mode, max(0, mode - 1), min(n, mode + 1), int(rng.integers(0, n + 1))}
            # near the mode's far-side boundary and a few standard deviations out
            sd = int(np.sqrt(n * p * (1 - p))) + 1
            ks |= {min(n, max(0, mode + j * sd)) for j in (-4, -2, 2, 4)}
            cases += [(k, n, p) for k in sorted(ks)]
    cases += [(2, 4, 0.5), (500_000, 10**6, 0.5), (3, 10, 0.3)]  # k == p * n: p-value 1
    for k, n, p in cases:
        for alt in ("two-sided", "less", "greater"):
            want = float(stats.binomtest(k, n, p, alternative=alt).pvalue)
            assert binomtest_pvalue(k, n, p, alt) == want, (k, n, p, alt)
    for k, n, p in [(0, 5, 0.0), (5, 5, 1.0), (1, 5, 0.0)]:  # p at 0 / 1: scipy itself
        assert binomtest_pvalue(k, n, p) == float(stats.binomtest(k, n, p).pvalue)
    with pytest.raises(ValueError):
        binomtest_pvalue(6, 5, 0.5)
    with pytest.raises(ValueError):
        binomtest_pvalue(1, 5, 0.5, "both")  # type: ignore[arg-type]
