"""The exact binomial test's p-value (:func:`binomtest_pvalue`), as scipy computes it, cheaper.

The rate test of a drift run (:func:`drift.calibrated.rate_test`) conditions on the total
events and tests the current window's share with the exact binomial test; thousands of those
per run made :func:`scipy.stats.binomtest`'s per-call argument handling the cost. This module
is scipy's own arithmetic without it (tests/drift/test_calibrated.py: float for float).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal

from scipy import stats

Alternative = Literal["two-sided", "greater", "less"]
ALTERNATIVES: tuple[str, ...] = ("two-sided", "greater", "less")


def _clip(v: float) -> float:
    """``np.clip(v, 0, 1)`` as rv_discrete applies it (NaN stays NaN)."""
    return 0.0 if v < 0.0 else 1.0 if v > 1.0 else v


def _pmf(x: float, n: int, p: float) -> float:
    """``scipy.stats.binom.pmf(x, n, p)`` for one integer-valued ``x`` and 0 < p < 1."""
    if x < 0 or x > n:
        return 0.0
    return _clip(float(stats.binom._pmf(float(x), float(n), p)))


def _cdf(x: float, n: int, p: float) -> float:
    """``scipy.stats.binom.cdf(x, n, p)`` for one integer-valued ``x`` and 0 < p < 1."""
    if x < 0:
        return 0.0
    if x >= n:
        return 1.0
    return _clip(float(stats.binom._cdf(float(x), float(n), p)))


def _sf(x: float, n: int, p: float) -> float:
    """``scipy.stats.binom.sf(x, n, p)`` for one integer-valued ``x`` and 0 < p < 1."""
    if x < 0:
        return 1.0
    if x >= n:
        return 0.0
    return _clip(float(stats.binom._sf(float(x), float(n), p)))


def binomtest_pvalue(k: int, n: int, p: float, alternative: Alternative = "two-sided") -> float:
    """``scipy.stats.binomtest(k, n, p, alternative).pvalue``: the same float, cheaper.

    The exact binomial test (two-sided: the total probability of all outcomes no more likely
    than ``k``, Zar 2010 §24.5, as scipy computes it). This is scipy's own arithmetic
    (scipy/stats/_binomtest.py, scipy >= 1.7): the same ``binom`` pmf/cdf/sf kernels on the
    same arguments, clipped to [0, 1] as ``rv_discrete`` does, the same relative tolerance
    ``1 + 1e-7`` and the same binary search for the far tail's boundary, without the per-call
    argument handling of ``rv_discrete`` (the cost of ``binomtest``: ~20x less time);
    tests/drift/test_calibrated.py checks it equals ``binomtest`` float for float.

    Args:
        k: successes, 0 <= k <= n.
        n: trials, >= 1.
        p: success probability under the null, 0 < p < 1 (other values go to scipy).
        alternative: ``"two-sided"``, ``"greater"`` or ``"less"``.

    Returns:
        The p-value, a probability in [0, 1].

    Raises:
        ValueError: as :func:`scipy.stats.binomtest` (k > n, n < 1, p outside [0, 1], unknown
            ``alternative``).
    """
    if not (0 <= k <= n and n >= 1 and 0.0 < p < 1.0) or alternative not in ALTERNATIVES:
        return float(stats.binomtest(k, n, p, alternative=alternative).pvalue)
    if alternative == "less":
        return _cdf(k, n, p)
    if alternative == "greater":
        return _sf(k - 1, n, p)
    d = _pmf(k, n, p)
    rerr = 1 + 1e-7
    if k == p * n:
        return 1.0
    if k < p * n:
        ix = _search(lambda x1: -_pmf(x1, n, p), -d * rerr, math.ceil(p * n), n)
        y = n - ix + int(d * rerr == _pmf(ix, n, p))
        pval = _cdf(k, n, p) + _sf(n - y, n, p)
    else:
        ix = _search(lambda x1: _pmf(x1, n, p), d * rerr, 0, math.floor(p * n))
        y = ix + 1
        pval = _cdf(y - 1, n, p) + _sf(k - 1, n, p)
    return min(1.0, pval)


def _search(a: Callable[[int], float], d: float, lo: int, hi: int) -> int:
    """scipy's ``_binary_search_for_binom_tst``: i in [lo - 1, hi] with a(i) <= d < a(i + 1)."""
    while lo < hi:
        mid = lo + (hi - lo) // 2
        midval = a(mid)
        if midval < d:
            lo = mid + 1
        elif midval > d:
            hi = mid - 1
        else:
            return mid
    return lo if a(lo) <= d else lo - 1
