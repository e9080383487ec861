"""Ratio metrics over randomisation units (e.g. USD per request by session): delta method.

Reference ``docs/reference/drift-canary-judge-methods.md`` section 2.3 (c); the contrast is
tested with the Gaussian mixture of ``drift.canary.sequential``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from drift.canary.sequential import (
    Alternative,
    SequentialResult,
    check_common,
    mixture_result,
    variance_floor,
)


@dataclass(frozen=True)
class RatioEstimate:
    """Delta-method estimate of ``sum(numerator) / sum(denominator)`` over ``n`` units."""

    ratio: float
    variance: float
    n: int


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
    check_common(alpha, tau2, alternative)
    c = baseline_factor
    variance = variance_floor(
        candidate.variance + c * c * baseline.variance, baseline.ratio, candidate.ratio
    )
    return mixture_result(
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
