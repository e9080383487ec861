"""Seeded small simulation runs meet the issue's targets; the CLI prints RESULT lines."""

from __future__ import annotations

import math

import numpy as np
import pytest
from click.testing import CliRunner
from scipy import stats

from drift.canary.cli import canary
from drift.canary.simulate import fixed_n_total_samples, simulate


def test_aa_false_decisions_within_alpha() -> None:
    res = simulate("aa", runs=40, looks=50, rng=np.random.default_rng(10))
    assert res.false_decision_rate <= 0.05
    assert res.rollback + res.promote + res.inconclusive == 40
    assert res.promote > 0  # equal candidates do get promoted


def test_regression_detected_within_twice_fixed_n() -> None:
    res = simulate("regression", runs=40, looks=50, rng=np.random.default_rng(11))
    assert res.false_decision_rate <= 0.05
    assert res.detection_samples_ratio is not None
    assert res.detection_samples_ratio <= 2.0
    assert res.rollback >= 32


def test_fixed_n_matches_sample_size_formula_for_lognormal() -> None:
    """Check against the capped lognormal's moments computed by integration, not sampling."""
    mu, s, cap = math.log(0.4), 0.6, 10.0
    dist = stats.lognorm(s, scale=math.exp(mu))

    def capped_moments(scale: float) -> tuple[float, float]:
        d = stats.lognorm(s, scale=scale * math.exp(mu))
        m1 = d.expect(lambda x: x, ub=cap) + cap * d.sf(cap)
        m2 = d.expect(lambda x: x * x, ub=cap) + cap * cap * d.sf(cap)
        return m1, m2 - m1 * m1

    assert dist.mean() == pytest.approx(0.4 * math.exp(0.18))
    mu_a, var_a = capped_moments(1.0)
    mu_b, var_b = capped_moments(1.1)
    z = stats.norm.ppf(1 - 0.05 / 3) + stats.norm.ppf(0.8)
    expected = z * z * (var_b / 0.5 + 1.05**2 * var_a / 0.5) / (mu_b - 1.05 * mu_a) ** 2
    got = fixed_n_total_samples(0.05, 3, 0.5, np.random.default_rng(0))
    assert got == pytest.approx(expected, rel=0.03)


def test_cli_prints_result_lines() -> None:
    out = CliRunner().invoke(
        canary,
        ["simulate", "--scenario", "regression", "--runs", "5", "--looks", "50", "--seed", "3"],
    )
    assert out.exit_code == 0, out.output
    lines = dict(
        line.removeprefix("RESULT ").split(" ")[0].split("=")
        for line in out.output.splitlines()
        if line.startswith("RESULT ")
    )
    assert set(lines) == {"false_decision_rate", "detection_samples_ratio", "fixed_n_samples"}
    assert 0.0 <= float(lines["false_decision_rate"]) <= 1.0


def test_invalid_scenario() -> None:
    with pytest.raises(ValueError, match="scenario"):
        simulate("ab", runs=1, looks=1, rng=np.random.default_rng(0))  # type: ignore[arg-type]
