"""Anytime-valid sequential tests for canary / A-B comparisons (pure functions, no I/O).

Every test returns an e-value ``E_t``: a nonnegative (super)martingale under the null with
``E_0 = 1``, so by Ville's inequality ``P(exists t: E_t >= 1/alpha) <= alpha`` however often the
caller looks. Sources (see ``shared/reference/drift-canary-judge-methods.md`` section 2.3):

- Gaussian-mixture mSPRT and its confidence sequence: Johari, Koomen, Pekelis, Walsh,
  "Always valid inference", Operations Research 2022 (section 2.3 (a)).
- One-sided mixture: the same likelihood ratio mixed over a half-normal prior (derived below).
- Rare-event conditional count test: beta-binomial mixture over the candidate's share of events,
  in the spirit of Lindon et al.'s counting-process e-values (section 2.3 (b)).
- Delta-method ratio variance (section 2.3 (c)); e-Bonferroni and e-BH across metrics
  (Wang & Ramdas 2022, section 2.3 "Many metrics and many looks").

Contrasts: every two-arm test is about ``theta = mu_candidate - c * mu_baseline`` where ``c`` is
``baseline_factor`` (1 for an absolute difference, ``1 + margin`` for a relative margin), so a
non-inferiority null ``theta <= delta0`` is one call.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

Alternative = Literal["two-sided", "greater", "less"]
_ALTERNATIVES = ("two-sided", "greater", "less")


@dataclass(frozen=True)
class SequentialResult:
    """One look of an anytime-valid test.

    ``statistic`` is the point estimate of the tested contrast (metric units; for
    ``rare_event`` the log rate ratio candidate/baseline). ``pvalue = min(1, 1/E)`` is valid at
    this look; the running minimum over looks (:func:`always_valid_pvalue`) is valid at any
    stopping time. ``ci_lower``/``ci_upper`` bound the contrast with a (1 - alpha) confidence
    sequence, or are None when the method has none.
    """

    method: str
    statistic: float
    null_value: float
    alternative: str
    e_value: float
    log_e_value: float
    pvalue: float
    alpha: float
    ci_lower: float | None
    ci_upper: float | None
    variance: float | None
    n_baseline: int
    n_candidate: int
    score_kind: Literal["e_value"] = "e_value"


@dataclass(frozen=True)
class RatioEstimate:
    """Delta-method estimate of ``sum(numerator) / sum(denominator)`` over ``n`` units."""

    ratio: float
    variance: float
    n: int


def _check_alpha(alpha: float) -> None:
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")


def _check_common(alpha: float, tau2: float, alternative: str) -> None:
    _check_alpha(alpha)
    if not (tau2 > 0.0 and math.isfinite(tau2)):
        raise ValueError(f"tau2 must be a positive finite number, got {tau2}")
    if alternative not in _ALTERNATIVES:
        raise ValueError(f"alternative must be one of {_ALTERNATIVES}, got {alternative!r}")


def _clean(values: ArrayLike, name: str, minimum: int) -> NDArray[np.float64]:
    arr = np.asarray(values, dtype=np.float64).ravel()
    arr = arr[~np.isnan(arr)]
    if arr.size < minimum:
        raise ValueError(f"{name} needs at least {minimum} non-null observations, got {arr.size}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains infinite values")
    return arr


def gaussian_mixture_log_e_value(
    estimate: float,
    variance: float,
    *,
    tau2: float,
    null_value: float = 0.0,
    alternative: Alternative = "two-sided",
) -> float:
    """Log of the Gaussian-mixture mSPRT e-value for ``H0: theta = null_value``.

    Two-sided (mixing prior N(delta0, tau2), reference section 2.3 (a)):
    ``E = sqrt(V/(V+tau2)) * exp(tau2 (est - delta0)^2 / (2 V (V+tau2)))``.
    One-sided (prior: half-normal on the alternative side, density ``2 phi_tau(u)``, u > 0):
    integrating ``exp(u (est - delta0)/V - u^2/(2V))`` gives
    ``E_greater = 2 * E_two_sided * Phi(tau (est - delta0) / sqrt(V (V + tau2)))``; ``less``
    mirrors it. The one-sided e-value is also a supermartingale under the composite null
    ``theta <= delta0`` (``theta >= delta0`` for ``less``). ``variance`` is Var(estimate), > 0.

    Raises ValueError for a non-positive variance or tau2, or an unknown alternative.
    """
    _check_common(0.5, tau2, alternative)
    if not (variance > 0.0 and math.isfinite(variance)):
        raise ValueError(f"variance must be a positive finite number, got {variance}")
    diff = estimate - null_value
    log_e = 0.5 * math.log(variance / (variance + tau2)) + tau2 * diff * diff / (
        2.0 * variance * (variance + tau2)
    )
    if alternative == "two-sided":
        return log_e
    z = math.sqrt(tau2) * diff / math.sqrt(variance * (variance + tau2))
    if alternative == "less":
        z = -z
    return math.log(2.0) + log_e + float(special.log_ndtr(z))


def gaussian_mixture_confidence_sequence(
    estimate: float, variance: float, *, tau2: float, alpha: float
) -> tuple[float, float]:
    """(1 - alpha) confidence sequence for theta, inverting the two-sided mixture e-value.

    ``estimate +- sqrt(V (V + tau2) / tau2 * ln((V + tau2) / (V alpha^2)))`` (reference
    section 2.3 (a)); time-uniform: it covers theta at every look simultaneously with
    probability >= 1 - alpha. Returns ``(lower, upper)`` in the units of ``estimate``.

    Raises ValueError for non-positive variance/tau2 or alpha outside (0, 1).
    """
    _check_common(alpha, tau2, "two-sided")
    if not (variance > 0.0 and math.isfinite(variance)):
        raise ValueError(f"variance must be a positive finite number, got {variance}")
    half = math.sqrt(
        variance * (variance + tau2) / tau2 * math.log((variance + tau2) / (variance * alpha**2))
    )
    return estimate - half, estimate + half


def always_valid_pvalue(log_e_values: Sequence[float]) -> float:
    """Running always-valid p-value ``p_t = min_{s <= t} min(1, 1/E_s)`` over looks (Johari 2022).

    ``log_e_values``: the log e-values of the looks so far, shape (t,). Empty -> 1.0.
    """
    if len(log_e_values) == 0:
        return 1.0
    return float(min(1.0, math.exp(-max(log_e_values))))


def _result(
    method: str,
    estimate: float,
    variance: float,
    *,
    tau2: float,
    alpha: float,
    null_value: float,
    alternative: Alternative,
    n_baseline: int,
    n_candidate: int,
) -> SequentialResult:
    log_e = gaussian_mixture_log_e_value(
        estimate, variance, tau2=tau2, null_value=null_value, alternative=alternative
    )
    lower, upper = gaussian_mixture_confidence_sequence(estimate, variance, tau2=tau2, alpha=alpha)
    return SequentialResult(
        method=method,
        statistic=estimate,
        null_value=null_value,
        alternative=alternative,
        e_value=math.exp(min(log_e, 700.0)),
        log_e_value=log_e,
        pvalue=min(1.0, math.exp(-log_e)) if log_e > -700.0 else 1.0,
        alpha=alpha,
        ci_lower=lower,
        ci_upper=upper,
        variance=variance,
        n_baseline=n_baseline,
        n_candidate=n_candidate,
    )


def _variance_floor(variance: float, *scales: float) -> float:
    # Constant data give V = 0, where the mixture is undefined; a floor relative to the data's
    # scale keeps identical constant arms a clean "no difference" (Kayenta: constant -> Pass).
    scale = max([1.0, *(abs(s) for s in scales)])
    return max(variance, (1e-9 * scale) ** 2)


def mean_difference_test(
    baseline: ArrayLike,
    candidate: ArrayLike,
    *,
    tau2: float,
    alpha: float = 0.05,
    null_value: float = 0.0,
    baseline_factor: float = 1.0,
    alternative: Alternative = "two-sided",
    cap: float | None = None,
) -> SequentialResult:
    """Gaussian-mixture test of ``theta = mean(candidate) - c * mean(baseline)``.

    ``baseline``, ``candidate``: per-request values, shape (n_A,), (n_B,); NaN = unknown and
    dropped. ``cap``: values above it are replaced by it first (mean of capped values, for
    latency/cost tails; fixed in the policy, not estimated from data). ``c = baseline_factor``.
    ``V = s_B^2/n_B + c^2 s_A^2/n_A`` (sample variances, ddof=1; reference section 2.3 (a)).

    Raises ValueError when an arm has fewer than 2 observations or an argument is invalid.
    """
    _check_common(alpha, tau2, alternative)
    a = _clean(baseline, "baseline", 2)
    b = _clean(candidate, "candidate", 2)
    if cap is not None:
        a, b = np.minimum(a, cap), np.minimum(b, cap)
    c = baseline_factor
    mean_a, mean_b = float(a.mean()), float(b.mean())
    variance = float(b.var(ddof=1)) / b.size + c * c * float(a.var(ddof=1)) / a.size
    variance = _variance_floor(variance, mean_a, mean_b)
    return _result(
        "gaussian_mixture_mean",
        mean_b - c * mean_a,
        variance,
        tau2=tau2,
        alpha=alpha,
        null_value=null_value,
        alternative=alternative,
        n_baseline=int(a.size),
        n_candidate=int(b.size),
    )


def proportion_difference_test(
    events_baseline: int,
    trials_baseline: int,
    events_candidate: int,
    trials_candidate: int,
    *,
    tau2: float,
    alpha: float = 0.05,
    null_value: float = 0.0,
    baseline_factor: float = 1.0,
    alternative: Alternative = "two-sided",
) -> SequentialResult:
    """Gaussian-mixture test of ``theta = p_B - c * p_A`` from event/trial counts.

    ``V = p~_B(1-p~_B)/n_B + c^2 p~_A(1-p~_A)/n_A`` (reference section 2.3 (b)), where the
    variance uses ``p~ = (k + 1)/(n + 2)`` so that zero-event arms keep a positive variance
    (our choice; the estimate itself uses ``k/n``).

    Raises ValueError for negative counts, events > trials, or an arm without trials.
    """
    _check_common(alpha, tau2, alternative)
    for name, k, n in (
        ("baseline", events_baseline, trials_baseline),
        ("candidate", events_candidate, trials_candidate),
    ):
        if n < 1:
            raise ValueError(f"trials_{name} must be >= 1, got {n}")
        if not 0 <= k <= n:
            raise ValueError(f"events_{name} must be in [0, trials_{name}], got {k}")
    c = baseline_factor
    p_a, p_b = events_baseline / trials_baseline, events_candidate / trials_candidate
    s_a = (events_baseline + 1) / (trials_baseline + 2)
    s_b = (events_candidate + 1) / (trials_candidate + 2)
    variance = s_b * (1 - s_b) / trials_candidate + c * c * s_a * (1 - s_a) / trials_baseline
    return _result(
        "gaussian_mixture_proportion",
        p_b - c * p_a,
        variance,
        tau2=tau2,
        alpha=alpha,
        null_value=null_value,
        alternative=alternative,
        n_baseline=int(trials_baseline),
        n_candidate=int(trials_candidate),
    )


def delta_method_ratio(numerator: ArrayLike, denominator: ArrayLike) -> RatioEstimate:
    """Ratio ``R = mean(Y)/mean(X)`` over randomisation units with its delta-method variance.

    ``numerator`` Y, ``denominator`` X: shape (n,), one entry per unit (e.g. USD and requests
    per session); pairs with a NaN are dropped. ``Var(R) = (s_Y^2 - 2 R s_XY + R^2 s_X^2) /
    (n Xbar^2)`` (reference section 2.3 (c)).

    Raises ValueError for mismatched shapes, fewer than 2 units or a zero mean denominator.
    """
    y = np.asarray(numerator, dtype=np.float64).ravel()
    x = np.asarray(denominator, dtype=np.float64).ravel()
    if y.shape != x.shape:
        raise ValueError(f"numerator and denominator shapes differ: {y.shape} vs {x.shape}")
    keep = ~(np.isnan(y) | np.isnan(x))
    y, x = y[keep], x[keep]
    if y.size < 2:
        raise ValueError(f"numerator needs at least 2 non-null units, got {y.size}")
    x_bar = float(x.mean())
    if x_bar == 0.0:
        raise ValueError("denominator has mean 0; the ratio is undefined")
    ratio = float(y.mean()) / x_bar
    cov = np.cov(np.vstack([y, x]), ddof=1)
    var = (cov[0, 0] - 2 * ratio * cov[0, 1] + ratio * ratio * cov[1, 1]) / (y.size * x_bar**2)
    return RatioEstimate(ratio=ratio, variance=max(float(var), 0.0), n=int(y.size))


def ratio_difference_test(
    baseline: RatioEstimate,
    candidate: RatioEstimate,
    *,
    tau2: float,
    alpha: float = 0.05,
    null_value: float = 0.0,
    baseline_factor: float = 1.0,
    alternative: Alternative = "two-sided",
) -> SequentialResult:
    """Gaussian-mixture test of ``theta = R_B - c R_A`` with ``V = Var_B + c^2 Var_A``.

    Inputs from :func:`delta_method_ratio` (reference section 2.3 (c)). Raises ValueError for
    invalid arguments.
    """
    _check_common(alpha, tau2, alternative)
    c = baseline_factor
    variance = _variance_floor(
        candidate.variance + c * c * baseline.variance, baseline.ratio, candidate.ratio
    )
    return _result(
        "gaussian_mixture_ratio",
        candidate.ratio - c * baseline.ratio,
        variance,
        tau2=tau2,
        alpha=alpha,
        null_value=null_value,
        alternative=alternative,
        n_baseline=baseline.n,
        n_candidate=candidate.n,
    )


def one_sample_mean_test(
    values: ArrayLike,
    *,
    tau2: float,
    alpha: float = 0.05,
    null_value: float = 0.0,
    alternative: Alternative = "two-sided",
) -> SequentialResult:
    """Gaussian-mixture test of ``mean(values) = null_value`` (``V = s^2/n``).

    Used for pairwise judge outcomes (win 1, tie 0.5, loss 0 of candidate vs baseline), whose
    null is a win rate of 0.5. ``values`` shape (n,), NaN dropped; ``n_baseline`` is reported
    as 0. Raises ValueError for fewer than 2 values or invalid arguments.
    """
    _check_common(alpha, tau2, alternative)
    v = _clean(values, "values", 2)
    mean = float(v.mean())
    variance = _variance_floor(float(v.var(ddof=1)) / v.size, mean)
    return _result(
        "gaussian_mixture_one_sample",
        mean,
        variance,
        tau2=tau2,
        alpha=alpha,
        null_value=null_value,
        alternative=alternative,
        n_baseline=0,
        n_candidate=int(v.size),
    )


def e_bonferroni_threshold(alpha: float, n_tests: int) -> float:
    """Familywise e-value threshold ``K/alpha`` (reject metric k when ``E_k >= K/alpha``)."""
    _check_alpha(alpha)
    if n_tests < 1:
        raise ValueError(f"n_tests must be >= 1, got {n_tests}")
    return n_tests / alpha


def e_benjamini_hochberg(e_values: Sequence[float], alpha: float) -> tuple[bool, ...]:
    """e-BH (Wang & Ramdas 2022): reject the k* largest e-values, FDR <= alpha under any
    dependence, where ``k* = max{k : e_(k) >= K / (alpha k)}`` (e-values sorted decreasing).

    ``e_values`` shape (K,); returns one rejection flag per input, in input order.
    """
    _check_alpha(alpha)
    e = np.asarray(e_values, dtype=np.float64)
    if np.any(np.isnan(e)) or np.any(e < 0):
        raise ValueError("e_values must be nonnegative numbers")
    k_total = e.size
    order = np.argsort(-e, kind="stable")
    ranks = np.arange(1, k_total + 1)
    ok = e[order] >= k_total / (alpha * ranks)
    k_star = int(ranks[ok].max()) if ok.any() else 0
    reject = np.zeros(k_total, dtype=bool)
    reject[order[:k_star]] = True
    return tuple(bool(r) for r in reject)


def _log_sigmoid(x: NDArray[np.float64]) -> NDArray[np.float64]:
    return -np.logaddexp(0.0, -x)


def rare_event_test(
    events_baseline: ArrayLike,
    exposure_baseline: ArrayLike,
    events_candidate: ArrayLike,
    exposure_candidate: ArrayLike,
    *,
    alpha: float = 0.05,
    rate_ratio_null: float = 1.0,
    alternative: Alternative = "greater",
    prior_a: float = 1.0,
    prior_b: float = 1.0,
) -> SequentialResult:
    """Conditional count e-value for rare events (errors, refusals) over intervals.

    Inputs: per-interval event counts and exposures (requests), shape (m,) each. Given the
    ``N_i`` events of interval i and the candidate's exposure share ``s_i``, the candidate's
    count is ``Binomial(N_i, rho_i(r))`` with ``rho_i(r) = s_i r / (1 - s_i + s_i r)`` and
    ``r`` the candidate/baseline rate ratio (reference section 2.3 (b); per-interval shares keep
    it valid while the traffic weight changes between steps). The e-value mixes the likelihood
    ratio against ``r0 = rate_ratio_null`` over a Beta(a, b) prior on ``r/(1+r)`` (the event
    share at equal exposure), truncated to ``r > r0`` for ``greater`` / ``r < r0`` for
    ``less``. For one interval with ``s = 1/2`` and ``r0 = 1`` this is exactly the reference's
    ``B(k_B+a, k_A+b)/B(a,b) / (rho0^k_B (1-rho0)^k_A)``. The integral over ``log r`` is a
    trapezoid rule on a global grid plus a fine grid around the likelihood's peak.

    ``statistic`` is ``log((k_B+0.5)/E_B) - log((k_A+0.5)/E_A)``; no confidence sequence.
    Raises ValueError for shape mismatches, negative counts, events without exposure, or
    invalid parameters.
    """
    _check_common(alpha, 1.0, alternative)
    if not (rate_ratio_null > 0 and math.isfinite(rate_ratio_null)):
        raise ValueError(f"rate_ratio_null must be positive, got {rate_ratio_null}")
    if prior_a <= 0 or prior_b <= 0:
        raise ValueError(f"prior_a and prior_b must be positive, got {prior_a}, {prior_b}")
    arrays = [
        np.atleast_1d(np.asarray(v, dtype=np.float64))
        for v in (events_baseline, exposure_baseline, events_candidate, exposure_candidate)
    ]
    k_a, n_a, k_b, n_b = arrays
    if not all(arr.shape == k_a.shape and arr.ndim == 1 for arr in arrays):
        raise ValueError("events_* and exposure_* must be 1-d arrays of the same length")
    for name, arr in zip(
        ("events_baseline", "exposure_baseline", "events_candidate", "exposure_candidate"),
        arrays,
        strict=True,
    ):
        if np.any(~np.isfinite(arr)) or np.any(arr < 0):
            raise ValueError(f"{name} must be finite and nonnegative")
    if np.any((k_a > 0) & (n_a == 0)) or np.any((k_b > 0) & (n_b == 0)):
        raise ValueError("events reported for an interval with zero exposure")
    total_a, total_b = float(n_a.sum()), float(n_b.sum())
    sum_ka, sum_kb = float(k_a.sum()), float(k_b.sum())
    estimate = (
        math.log((sum_kb + 0.5) / total_b) - math.log((sum_ka + 0.5) / total_a)
        if total_a > 0 and total_b > 0
        else math.nan
    )
    # Only intervals with events in a two-arm interval carry information.
    keep = (k_a + k_b > 0) & (n_a > 0) & (n_b > 0)
    # The likelihood depends on the counts only through their sums per exposure share.
    shifts, group = np.unique(np.log(n_b[keep]) - np.log(n_a[keep]), return_inverse=True)
    ka = np.bincount(group, weights=k_a[keep], minlength=shifts.size).astype(np.float64)
    kb = np.bincount(group, weights=k_b[keep], minlength=shifts.size).astype(np.float64)
    shift = shifts  # logit of the candidate's exposure share s_i
    x0 = math.log(rate_ratio_null)
    log_e = 0.0
    if ka.size:
        log_e = _rare_event_log_mixture(ka, kb, shift, x0, alternative, prior_a, prior_b)
    return SequentialResult(
        method="beta_binomial_rare_event",
        statistic=estimate,
        null_value=x0,
        alternative=alternative,
        e_value=math.exp(min(log_e, 700.0)),
        log_e_value=log_e,
        pvalue=min(1.0, math.exp(-log_e)) if log_e > -700.0 else 1.0,
        alpha=alpha,
        ci_lower=None,
        ci_upper=None,
        variance=None,
        n_baseline=int(total_a),
        n_candidate=int(total_b),
    )


def _rare_event_log_mixture(
    ka: NDArray[np.float64],
    kb: NDArray[np.float64],
    shift: NDArray[np.float64],
    x0: float,
    alternative: str,
    a: float,
    b: float,
) -> float:
    def log_lik(x: NDArray[np.float64]) -> NDArray[np.float64]:
        z = x[:, None] + shift[None, :]
        return (_log_sigmoid(z) @ kb) + (_log_sigmoid(-z) @ ka)

    def log_prior(x: NDArray[np.float64]) -> NDArray[np.float64]:
        return a * _log_sigmoid(x) + b * _log_sigmoid(-x) - special.betaln(a, b)

    coarse = np.linspace(-40.0, 40.0, 801)
    center = math.log((kb.sum() + 0.5) / (ka.sum() + 0.5)) - float(np.median(shift))
    sd = math.sqrt(1.0 / (ka.sum() + 0.5) + 1.0 / (kb.sum() + 0.5))
    peak = float(coarse[np.argmax(log_lik(coarse) + log_prior(coarse))])
    grid = np.unique(
        np.concatenate(
            [
                coarse,
                np.linspace(center - 12 * sd, center + 12 * sd, 801),
                np.linspace(peak - 0.2, peak + 0.2, 201),
                [x0],
            ]
        )
    )
    sigma0 = 1.0 / (1.0 + math.exp(-x0))
    if alternative == "greater":
        grid = grid[grid >= x0]
        log_mass = math.log(float(special.betaincc(a, b, sigma0)))
    elif alternative == "less":
        grid = grid[grid <= x0]
        log_mass = math.log(float(special.betainc(a, b, sigma0)))
    else:
        log_mass = 0.0
    log_f = log_lik(grid) + log_prior(grid)
    top = float(log_f.max())
    integral = float(np.trapezoid(np.exp(log_f - top), grid))
    return top + math.log(integral) - log_mass - float(log_lik(np.array([x0]))[0])
