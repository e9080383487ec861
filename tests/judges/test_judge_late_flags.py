"""Late thumbs-downs: the PPI interval of the quality page keeps its coverage when half of the
flags arrive after the sampling decision (issue 16); the simulation is judges.simulate."""

from __future__ import annotations

import pytest

from judges.simulate import late_flag_coverage


def test_late_flags_leave_the_ppi_estimate_unbiased() -> None:
    """25 runs of 2,000 calls: the estimate's SD is ~0.06, so its mean error has SE ~0.012;
    keeping the stale pi weights late-flagged bad answers 1/0.1 and underestimates by ~0.13."""
    _, bias = late_flag_coverage(25, 1, recompute=True)
    assert abs(bias) < 0.04
    _, stale_bias = late_flag_coverage(25, 1, recompute=False)
    assert stale_bias < -0.07


@pytest.mark.slow
@pytest.mark.xfail(
    strict=True,
    reason="measured 0.8675 at 400 runs (seed 2) after the merge, below the 0.89 target of "
    "issue 16 (open): the late-flag census stratum does not yet restore coverage; strict, so "
    "a fix that reaches the bound turns this into a failure to remove the mark",
)
def test_ppi_keeps_coverage_with_late_flags() -> None:
    """Nominal 0.90, 400 runs of 6,000 calls (binomial SE 0.015): >= 0.88 here;
    benchmarks/canary_calibration.py prints the figure (target >= 0.89)."""
    coverage, _ = late_flag_coverage(400, 2, recompute=True, population=6000)
    assert coverage >= 0.88
    stale_coverage, _ = late_flag_coverage(400, 2, recompute=False, population=6000)
    assert stale_coverage < coverage
