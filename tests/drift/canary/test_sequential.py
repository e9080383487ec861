"""Golden values for the anytime-valid tests, computed here from the reference formulas
(docs/reference/drift-canary-judge-methods.md section 2.3), never by calling the code twice."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, special, stats

from drift.canary.evidence import build_evidence
from drift.canary.policy import (
    CanaryObservations,
    Direction,
    MetricKind,
    MetricPolicy,
    RolloutPolicy,
    SampleObservations,
    StepAssignment,
)
from drift.canary.rare_event import rare_event_test
from drift.canary.ratio import delta_method_ratio, ratio_difference_test
from drift.canary.sequential import (
    always_valid_pvalue,
    e_benjamini_hochberg,
    e_bonferroni_threshold,
    gaussian_mixture_confidence_sequence,
    gaussian_mixture_log_e_value,
    mean_difference_test,
    one_sample_mean_test,
    one_sided_bound,
    proportion_difference_test,
)

INC = Direction.INCREASE_IS_BAD


def test_two_sided_mixture_matches_reference_formula() -> None:
    est, v, tau2, d0 = 0.3, 0.01, 0.04, 0.05
    expected = math.sqrt(v / (v + tau2)) * math.exp(tau2 * (est - d0) ** 2 / (2 * v * (v + tau2)))
    got = gaussian_mixture_log_e_value(est, v, tau2=tau2, null_value=d0)
    assert got == pytest.approx(math.log(expected), rel=1e-12)


def test_two_sided_mixture_matches_johari_paired_form() -> None:
    # mixtureSPRT: n pairs, V = 2 sigma^2 / n.
    n, sigma2, tau2, diff = 400, 1.3, 0.02, 0.21
    lam = math.sqrt(2 * sigma2 / (2 * sigma2 + n * tau2)) * math.exp(
        n**2 * tau2 * diff**2 / (4 * sigma2 * (2 * sigma2 + n * tau2))
    )
    got = gaussian_mixture_log_e_value(diff, 2 * sigma2 / n, tau2=tau2)
    assert got == pytest.approx(math.log(lam), rel=1e-12)


@pytest.mark.parametrize("alternative", ["greater", "less"])
@pytest.mark.parametrize("est", [-0.15, 0.02, 0.2])
def test_one_sided_mixture_equals_half_normal_integral(alternative: str, est: float) -> None:
    v, tau2, d0 = 0.004, 0.01, 0.03
    sign = 1.0 if alternative == "greater" else -1.0
    tau = math.sqrt(tau2)

    def integrand(u: float) -> float:  # Gaussian likelihood ratio x half-normal prior density
        theta = d0 + sign * u
        log_lr = ((est - d0) ** 2 - (est - theta) ** 2) / (2 * v)
        return math.exp(log_lr) * 2 * stats.norm.pdf(u, scale=tau)

    expected, _ = integrate.quad(integrand, 0, 20 * tau, epsabs=0, epsrel=1e-11, limit=200)
    got = gaussian_mixture_log_e_value(est, v, tau2=tau2, null_value=d0, alternative=alternative)  # type: ignore[arg-type]
    assert got == pytest.approx(math.log(expected), rel=1e-8, abs=1e-9)


def test_confidence_sequence_half_width_and_inversion() -> None:
    est, v, tau2, alpha = 1.2, 0.05, 0.3, 0.05
    half = math.sqrt(v * (v + tau2) / tau2 * math.log((v + tau2) / (v * alpha**2)))
    lower, upper = gaussian_mixture_confidence_sequence(est, v, tau2=tau2, alpha=alpha)
    assert (lower, upper) == pytest.approx((est - half, est + half), rel=1e-12)
    # The endpoints are where the two-sided e-value crosses 1/alpha.
    for end in (lower, upper):
        e = math.sqrt(v / (v + tau2)) * math.exp(tau2 * (est - end) ** 2 / (2 * v * (v + tau2)))
        assert e == pytest.approx(1 / alpha, rel=1e-9)


def test_mean_difference_test_uses_welch_variance_and_contrast() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.normal(1.0, 0.5, 300), rng.normal(1.2, 0.7, 200)
    c, d0, tau2 = 1.1, 0.0, 0.01
    est = b.mean() - c * a.mean()
    v = b.var(ddof=1) / 200 + c * c * a.var(ddof=1) / 300
    e = math.sqrt(v / (v + tau2)) * math.exp(tau2 * est**2 / (2 * v * (v + tau2)))
    res = mean_difference_test(a, b, tau2=tau2, baseline_factor=c, null_value=d0)
    assert res.statistic == pytest.approx(est, rel=1e-12)
    assert res.variance == pytest.approx(v, rel=1e-12)
    assert res.e_value == pytest.approx(e, rel=1e-9)
    assert res.pvalue == pytest.approx(min(1.0, 1 / e), rel=1e-9)
    assert (res.n_baseline, res.n_candidate, res.score_kind) == (300, 200, "e_value")


def test_mean_difference_cap_and_nan_handling() -> None:
    a = [1.0, 2.0, float("nan"), 50.0]
    b = [1.0, 3.0, 100.0]
    res = mean_difference_test(a, b, tau2=1.0, cap=10.0)
    assert res.n_baseline == 3
    assert res.statistic == pytest.approx((1 + 3 + 10) / 3 - (1 + 2 + 10) / 3)


def test_proportion_test_formula_with_smoothed_variance() -> None:
    ka, na, kb, nb, tau2 = 12, 1000, 30, 900, 0.0004
    s_a, s_b = (ka + 1) / (na + 2), (kb + 1) / (nb + 2)
    v = s_b * (1 - s_b) / nb + s_a * (1 - s_a) / na
    est = kb / nb - ka / na
    e2 = math.sqrt(v / (v + tau2)) * math.exp(tau2 * est**2 / (2 * v * (v + tau2)))
    z = math.sqrt(tau2) * est / math.sqrt(v * (v + tau2))
    res = proportion_difference_test(ka, na, kb, nb, tau2=tau2, alternative="greater")
    assert res.e_value == pytest.approx(2 * e2 * stats.norm.cdf(z), rel=1e-9)


def test_rare_event_equal_share_matches_beta_binomial_closed_form() -> None:
    ka, kb = 3, 12
    closed = special.betaln(kb + 1, ka + 1) - special.betaln(1, 1) - (ka + kb) * math.log(0.5)
    res = rare_event_test([ka], [1000], [kb], [1000], alternative="two-sided")
    assert res.log_e_value == pytest.approx(closed, abs=1e-4)
    # One-sided: prior truncated to rho > 1/2 and renormalised.
    one = closed + math.log(special.betaincc(kb + 1, ka + 1, 0.5) / 0.5)
    res1 = rare_event_test([ka], [1000], [kb], [1000], alternative="greater")
    assert res1.log_e_value == pytest.approx(one, abs=1e-4)


def test_rare_event_unequal_shares_match_direct_integral() -> None:
    ka, na = np.array([2, 0, 5]), np.array([900, 500, 700])
    kb, nb = np.array([1, 3, 4]), np.array([100, 500, 300])
    r0, a, b = 1.5, 1.0, 1.0
    s = nb / (na + nb)

    def log_lik(r: float) -> float:
        rho = s * r / (1 - s + s * r)
        return float(np.sum(kb * np.log(rho) + ka * np.log1p(-rho)))

    def integrand(q: float) -> float:  # q = r/(1+r) ~ Beta(a, b), restricted to r > r0
        r = q / (1 - q)
        return math.exp(log_lik(r) - log_lik(r0)) * stats.beta.pdf(q, a, b)

    q0 = r0 / (1 + r0)
    num, _ = integrate.quad(integrand, q0, 1, epsrel=1e-10, limit=200)
    expected = num / stats.beta.sf(q0, a, b)
    res = rare_event_test(ka, na, kb, nb, rate_ratio_null=r0, alternative="greater")
    assert res.log_e_value == pytest.approx(math.log(expected), abs=1e-4)
    assert res.ci_lower is None and res.variance is None


def test_rare_event_no_events_is_e_value_one() -> None:
    res = rare_event_test([0, 0], [100, 100], [0, 0], [10, 10])
    assert res.e_value == 1.0 and res.pvalue == 1.0


def test_delta_method_ratio_formula() -> None:
    y = np.array([1.0, 4.0, 2.5, 0.5, 3.0])
    x = np.array([1.0, 3.0, 2.0, 1.0, 2.0])
    n = 5
    r = y.mean() / x.mean()
    s_yy = sum((yi - y.mean()) ** 2 for yi in y) / (n - 1)
    s_xx = sum((xi - x.mean()) ** 2 for xi in x) / (n - 1)
    s_xy = sum((yi - y.mean()) * (xi - x.mean()) for yi, xi in zip(y, x, strict=True)) / (n - 1)
    var = (s_yy - 2 * r * s_xy + r * r * s_xx) / (n * x.mean() ** 2)
    est = delta_method_ratio(y, x)
    assert (est.ratio, est.variance, est.n) == pytest.approx((r, var, 5))
    res = ratio_difference_test(est, est, tau2=0.1)
    assert res.statistic == 0.0 and res.variance == pytest.approx(2 * var)


def test_one_sample_test_and_always_valid_pvalue() -> None:
    v = np.array([1, 1, 0.5, 0, 1, 1, 0.5, 1.0])
    res = one_sample_mean_test(v, tau2=0.01, null_value=0.5, alternative="greater")
    var = v.var(ddof=1) / 8
    assert res.variance == pytest.approx(var) and res.statistic == pytest.approx(v.mean())
    assert always_valid_pvalue([math.log(2), math.log(40), math.log(5)]) == pytest.approx(1 / 40)
    assert always_valid_pvalue([]) == 1.0


def test_e_bonferroni_and_e_bh() -> None:
    assert e_bonferroni_threshold(0.05, 4) == pytest.approx(80.0)
    # K=4, alpha=0.1: thresholds K/(alpha k) = 40, 20, 13.3, 10 for k = 1..4.
    assert e_benjamini_hochberg([25.0, 1.0, 50.0, 12.0], 0.1) == (True, False, True, False)
    assert e_benjamini_hochberg([14.0, 15.0, 14.0, 0.5], 0.1) == (True, True, True, False)
    assert e_benjamini_hochberg([1.0, 2.0], 0.05) == (False, False)


def test_mixture_stays_valid_under_fifty_looks() -> None:
    """A/A with 50 looks: the e-process crosses 1/alpha in at most ~alpha of the runs."""
    rng = np.random.default_rng(11)
    crossed = 0
    runs = 300
    for _ in range(runs):
        a, b = rng.normal(0, 1, 2500), rng.normal(0, 1, 2500)
        for n in range(50, 2501, 50):
            if mean_difference_test(a[:n], b[:n], tau2=0.01).e_value >= 20:
                crossed += 1
                break
    assert crossed / runs <= 0.05


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: mean_difference_test([1.0], [1.0, 2.0], tau2=1.0), "baseline"),
        (lambda: mean_difference_test([1.0, 2.0], [1.0, 2.0], tau2=0.0), "tau2"),
        (lambda: mean_difference_test([1.0, 2.0], [1.0, 2.0], tau2=1.0, alpha=1.5), "alpha"),
        (lambda: proportion_difference_test(5, 3, 1, 10, tau2=0.1), "events_baseline"),
        (lambda: gaussian_mixture_log_e_value(0.0, 0.0, tau2=1.0), "variance"),
        (lambda: rare_event_test([1], [0], [0], [5]), "exposure"),
        (lambda: delta_method_ratio([1.0, 2.0], [0.0, 0.0]), "denominator"),
    ],
)
def test_invalid_inputs_raise_value_error_naming_parameter(call: object, name: str) -> None:
    with pytest.raises(ValueError, match=name):
        call()  # type: ignore[operator]


@pytest.mark.parametrize("alternative", ["greater", "less"])
def test_one_sided_bound_inverts_the_e_value_at_the_threshold(alternative: str) -> None:
    est, var, tau2, alpha = 0.3, 0.01, 0.04, 0.05 / 8
    bound = one_sided_bound(est, var, tau2=tau2, alpha=alpha, alternative=alternative)  # type: ignore[arg-type]
    log_e = gaussian_mixture_log_e_value(
        est,
        var,
        tau2=tau2,
        null_value=bound,
        alternative=alternative,  # type: ignore[arg-type]
    )
    assert log_e == pytest.approx(math.log(1 / alpha), abs=1e-6)
    # rejection of theta0 <=> theta0 beyond the bound on the tested side
    sign = 1 if alternative == "greater" else -1
    for theta0 in (bound - 0.05 * sign, bound + 0.05 * sign):
        e = math.exp(
            gaussian_mixture_log_e_value(
                est,
                var,
                tau2=tau2,
                null_value=theta0,
                alternative=alternative,  # type: ignore[arg-type]
            )
        )
        assert (e >= 1 / alpha) == (sign * (bound - theta0) > 0)


def test_evidence_bounds_agree_with_the_decision() -> None:
    """The harm test's one-sided bound crosses the null exactly when its e-value reaches K/alpha
    (the dashboard draws these bounds)."""
    rng = np.random.default_rng(9)
    for shift in (0.0, 0.05, 0.2, 0.4):
        a, b = rng.normal(10, 1, 500), rng.normal(10 + shift, 1, 60)
        policy = RolloutPolicy(
            "p", "a", "b", metrics=(MetricPolicy("e2e_s", MetricKind.MEAN, INC, 0.1),)
        )
        obs = CanaryObservations(
            0, 1e4, 1e4, (StepAssignment(5, 500, 60),), {"e2e_s": SampleObservations(a, b)}
        )
        ev = build_evidence(obs, policy).metrics[0]
        assert ev.harm is not None and ev.non_inferiority is not None
        assert ev.harm.ci_lower is not None and ev.non_inferiority.ci_upper is not None
        assert (ev.harm.e_value >= ev.threshold) == (ev.harm.ci_lower > ev.harm.null_value)
        assert (ev.non_inferiority.e_value >= ev.threshold) == (
            ev.non_inferiority.ci_upper < ev.harm.null_value
        )
