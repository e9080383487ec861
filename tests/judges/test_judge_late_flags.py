"""Late thumbs-downs: the PPI interval of the quality page keeps its coverage when half of the
flags arrive after the sampling decision (issue 16); the simulation is judges.simulate."""

from __future__ import annotations

from scipy import stats

from judges.simulate import late_flag_coverage


def test_late_flags_leave_the_ppi_estimate_unbiased() -> None:
    """25 runs of 2,000 calls: the estimate's SD is ~0.06, so its mean error has SE ~0.012;
    keeping the stale pi weights late-flagged bad answers 1/0.1 and underestimates by ~0.13."""
    _, bias = late_flag_coverage(25, 1, recompute=True)
    assert abs(bias) < 0.04
    _, stale_bias = late_flag_coverage(25, 1, recompute=False)
    assert stale_bias < -0.07


def test_recomputed_late_flags_judge_the_same_calls_as_on_time_flags() -> None:
    """With pi = 1 a late-flagged call is sampled and weighted as an on-time flag: the same seed
    with half or none of the flags late gives the same estimates, hence the same figures."""
    late = late_flag_coverage(10, 3, recompute=True, late_share=0.5)
    on_time = late_flag_coverage(10, 3, recompute=True, late_share=0.0)
    assert late == on_time


def test_ppi_keeps_coverage_with_late_flags() -> None:
    """Nominal 0.90, half of the flags late; the issue's target is coverage >= 0.89.

    The number of covering runs out of R independent runs is Binomial(R, c). The test fails when
    it falls below the 1 % quantile of Binomial(R, 0.89), i.e. when the runs reject c >= 0.89 at
    level 1 %: R = 200 gives a bound of 167/200 = 0.835 (binomial SD 0.022). A calibrated interval
    fails it with probability < 1 %; one with true coverage 0.80 passes with probability 0.12.
    The old stale pi must fail the same bound: its coverage, ~0.71, is 2.8 binomial SDs below it
    with 100 runs. Measured with 1,000 runs (seeds 20-24): 0.905; benchmarks/canary_calibration.py
    prints the figure at 6,000 calls per run."""
    runs = 200
    bound = stats.binom.ppf(0.01, runs, 0.89) / runs
    coverage, _ = late_flag_coverage(runs, 2, recompute=True)
    assert coverage >= bound
    stale_coverage, _ = late_flag_coverage(runs // 2, 2, recompute=False)
    assert stale_coverage < bound
