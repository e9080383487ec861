"""Seeded small simulations of the production evidence/decision path meet the issue's targets;
the CLI prints RESULT lines. Full runs: benchmarks/canary_calibration.py.

Run counts are small (20-30); a rate <= alpha = 0.05 then allows one false decision, which is
what the bound promises at these sizes. The whole scenario x metric x share matrix is
benchmarks/canary_calibration.py. Horizons are shortened with ``samples_per_look`` where
the test is about validity (a shorter horizon has fewer looks, never more crossings per look)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from click.testing import CliRunner
from scipy import stats

from drift.canary.cli import canary
from drift.canary.simulate import simulate
from drift.canary.simulate_metrics import (
    JUDGE_BASE_RATE,
    JUDGE_CANDIDATE_RATE,
    SPECS,
    draw,
    fixed_n,
    judge_design_variance,
    judge_sample,
)
from judges.sampling import CallFeatures, SamplingPolicy, sample_batch


def test_aa_load_step_does_not_roll_back_an_identical_candidate() -> None:
    """Latency x1.5 for both arms from step 1 (5 % -> 25 %): pooled, 95 % of runs rolled back."""
    res = simulate(
        "aa-load-step", "lognormal-latency", runs=20, rng=np.random.default_rng(1), looks=30
    )
    assert res.false_rollback_rate <= 0.05
    assert res.promote >= 15  # identical candidates do get promoted


def test_ni_boundary_small_arm_proportion_keeps_both_bounds() -> None:
    """1 % vs 3 %, margin 0.02, 5 % canary: the Wald variance crossed in 3.4 % vs 0.6 %."""
    res = simulate("ni-boundary", "proportion", runs=30, rng=np.random.default_rng(2))
    assert res.false_promote_rate <= 0.05
    assert res.false_rollback_rate <= 0.05


def test_regression_detected_within_twice_fixed_n() -> None:
    res = simulate("regression", "mean", runs=30, rng=np.random.default_rng(3))
    assert res.false_promote_rate == 0.0
    assert res.detection_samples_ratio is not None
    assert res.detection_samples_ratio <= 2.0


def test_judge_biased_sampling_is_not_promoted() -> None:
    """Candidate 0.3 worse (margin 0.2); plain judged means promoted it (e-value ~1e79)."""
    res = simulate(
        "judge-biased-sampling", "judge-score", runs=20, rng=np.random.default_rng(4), looks=30
    )
    assert res.false_promote_rate <= 0.05
    assert res.rollback >= 12


# The full matrix (aa, aa-load-step, ni-boundary x mean, proportion, lognormal-latency,
# judge-score x candidate shares 5 %, 25 %, 50 %) took 10-15 minutes at 40 runs a cell: it is a
# benchmark, `python benchmarks/canary_calibration.py --runs 200` (figures in
# docs/canary-guarantees.md); the tests above assert one hard cell of each scenario.


def test_simulated_judge_sampling_has_the_samplers_design() -> None:
    """drift may not import judges; the simulation's draw must match sample_batch's rates."""
    rng = np.random.default_rng(6)
    scores = np.full(4000, 4.0)
    scores[:400] = 2.0  # half of these get flagged
    for candidate, rate in ((True, JUDGE_CANDIDATE_RATE), (False, JUDGE_BASE_RATE)):
        policy = SamplingPolicy(
            base_rate=JUDGE_BASE_RATE, candidate_rate=JUDGE_CANDIDATE_RATE, salt="t"
        )
        decisions = sample_batch(
            [CallFeatures(f"c{i}", candidate_arm=candidate) for i in range(4000)], policy
        )
        assert {d.inclusion_probability for d in decisions} == {rate}
        assert {
            d.inclusion_probability
            for d in sample_batch([CallFeatures("f", thumbs_down=True)], policy)
        } == {1.0}
        judged, pi = judge_sample(scores, candidate, rng)
        flagged = pi == 1.0
        assert set(np.unique(pi)) <= {1.0, rate}
        expected = 200 + rate * 3800
        sd = math.sqrt(200 * 0.25 + 3800 * rate * (1 - rate)) + 1
        assert abs(judged.size - expected) < 4 * sd
        assert np.all(judged[flagged] == 2.0)


def test_fixed_n_matches_the_sample_size_formula() -> None:
    z = stats.norm.ppf(0.95) + stats.norm.ppf(0.8)
    expected = z * z * (4 / 0.05 + 4 / 0.95) / 0.2**2
    assert fixed_n(SPECS["mean"], 0.05, 0.05) == pytest.approx(expected)
    p = z * z * (0.05 * 0.95 / 0.25 + 0.01 * 0.99 / 0.75) / 0.02**2
    assert fixed_n(SPECS["proportion"], 0.25, 0.05) == pytest.approx(p)


def test_cli_prints_result_lines() -> None:
    out = CliRunner().invoke(
        canary,
        [
            "simulate",
            "--scenario",
            "ni-boundary",
            "--metric",
            "proportion",
            "--candidate-share",
            "0.25",
            "--runs",
            "3",
            "--looks",
            "10",
            "--seed",
            "3",
        ],
    )
    assert out.exit_code == 0, out.output
    lines = dict(
        line.removeprefix("RESULT ").split(" ")[0].split("=")
        for line in out.output.splitlines()
        if line.startswith("RESULT ")
    )
    assert set(lines) == {
        "false_decision_rate",
        "false_promote_rate",
        "false_rollback_rate",
        "detection_samples_ratio",
        "fixed_n_samples",
    }
    assert 0.0 <= float(lines["false_decision_rate"]) <= 1.0
    assert lines["detection_samples_ratio"] == "nan"


def test_cli_rejects_judge_biased_sampling_with_another_metric() -> None:
    out = CliRunner().invoke(
        canary, ["simulate", "--scenario", "judge-biased-sampling", "--metric", "mean"]
    )
    assert out.exit_code == 2
    assert "--metric judge-score" in out.output


def test_invalid_arguments() -> None:
    with pytest.raises(ValueError, match="scenario"):
        simulate("ab", "mean", runs=1, rng=np.random.default_rng(0))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="share"):
        simulate("aa", "mean", runs=1, rng=np.random.default_rng(0), share=1.0)


def test_judge_design_variance_is_the_hajek_means_variance() -> None:
    """fixed_n's judge-score variances (flags at pi = 1, clipping) against Monte Carlo."""
    rng = np.random.default_rng(7)
    spec, n = SPECS["judge-score"], 20_000
    for candidate, rate in ((False, JUDGE_BASE_RATE), (True, JUDGE_CANDIDATE_RATE)):
        means = []
        for _ in range(300):
            judged, pi = judge_sample(draw(spec, rng, n, None, False), candidate, rng)
            means.append(np.sum(judged / pi) / np.sum(1 / pi))
        expected = judge_design_variance(0.0, rate)
        # the variance of 300 draws is within ~25 % (chi-square, 300 df) at 4 sd
        assert n * float(np.var(means, ddof=1)) == pytest.approx(expected, rel=0.25)


def test_judge_regression_at_a_small_arm_is_detected_within_twice_fixed_n() -> None:
    """5 % canary, judge scores sampled at 0.5 / 0.05 with flags: the null-boundary variance
    used to take the baseline's per-judgement variance (ratio 2.9 against the exact fixed-n)."""
    res = simulate("regression", "judge-score", runs=120, rng=np.random.default_rng(8))
    assert res.false_promote_rate == 0.0
    assert res.detection_samples_ratio is not None
    assert res.detection_samples_ratio <= 2.0
