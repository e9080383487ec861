"""Rare-event conditional count e-value (errors, refusals), valid while the traffic share changes.

Lindon & Malek's counting-process e-values (reference
``docs/reference/drift-canary-judge-methods.md`` section 2.3 (b)): conditioning on the events
of each interval removes every rate shift common to both arms; the candidate's count is binomial
in its exposure share.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

from drift.canary.sequential import Alternative, SequentialResult, check_common


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
    check_common(alpha, 1.0, alternative)
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
