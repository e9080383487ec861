"""Distance-type drift scores: normed Wasserstein, Jensen–Shannon and PSI.

Effect sizes for large windows, where p-values flag drifts that do not matter
(docs/reference/drift-canary-judge-methods.md §1.1, §1.5). Each returns a
:class:`drift.twosample.DriftResult` with ``score_kind="distance"``, ``pvalue=None`` and
``drifted = statistic >= threshold``; same null and ``min_samples`` conventions as
:mod:`drift.twosample`.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.spatial.distance import jensenshannon

from drift.twosample import (
    DEFAULT_DISTANCE_THRESHOLD,
    DEFAULT_MIN_SAMPLES,
    DriftResult,
    categorical_window,
    check_test_params,
    has_enough,
    insufficient,
    numeric_window,
)

# Evidently's floor for the reference std in the normed Wasserstein distance
# (``wasserstein_distance_norm.py``): keeps the ratio finite for constant references.
WASSERSTEIN_STD_FLOOR = 0.001
# Evidently ``get_binned_data``: numerical columns with more unique reference values than this
# are binned (Sturges edges over reference ∪ current); others get one bin per value.
MAX_UNBINNED_VALUES = 20
PSI_EMPTY_BIN_SHARE = 1e-4


def wasserstein_test(
    reference: ArrayLike,
    current: ArrayLike,
    *,
    threshold: float = DEFAULT_DISTANCE_THRESHOLD,
    min_samples: int = DEFAULT_MIN_SAMPLES,
    std_floor: float = WASSERSTEIN_STD_FLOOR,
) -> DriftResult:
    """Wasserstein-1 distance normalised by the reference standard deviation.

    ``statistic = W1(ref, cur) / max(std(ref), std_floor)``: 0.1 means the mass moved about a
    tenth of a reference standard deviation. A constant reference (std 0) uses ``std_floor``,
    so identical constants give 0 and different constants a large finite value (case 18).

    Args:
        reference: shape (n_ref,), finite numbers in the signal's unit.
        current: shape (n_cur,), same unit.
        threshold: drift when ``statistic >= threshold`` (Evidently default 0.1).
        min_samples: minimum values per window for a verdict.
        std_floor: lower bound of the normaliser, in the signal's unit (Evidently: 0.001).

    Returns:
        ``DriftResult`` with ``score_kind="distance"`` and ``pvalue=None``.

    Raises:
        ValueError: non-finite values, wrong shape, or bad parameters.

    Source: scipy.stats.wasserstein_distance (summed in a fixed order,
    :func:`wasserstein_sorted`: within ~1e-15 relative of scipy's float, and the same float on
    every machine); Evidently ``wasserstein_distance_norm.py`` (std with ddof=0).
    """
    check_test_params(threshold, min_samples)
    if not std_floor > 0:
        raise ValueError(f"std_floor must be > 0, got {std_floor!r}")
    ref, cur = numeric_window(reference, "reference"), numeric_window(current, "current")
    if not has_enough(ref.size, cur.size, min_samples):
        return insufficient("wasserstein", "distance", threshold, ref.size, cur.size)
    norm = max(float(np.std(ref)), std_floor)
    # scipy's W1, summed in a fixed order (see wasserstein_sorted): reproducible across machines
    stat = wasserstein_sorted(np.sort(ref), np.sort(cur)) / norm
    return DriftResult(
        "wasserstein",
        stat,
        None,
        "distance",
        threshold,
        stat >= threshold,
        ref.size,
        cur.size,
        False,
    )


def wasserstein_sorted(
    u: NDArray[np.float64],
    v: NDArray[np.float64],
    order: NDArray[np.intp] | None = None,
    merged: NDArray[np.float64] | None = None,
) -> float:
    """``scipy.stats.wasserstein_distance(u, v)`` of two ascending arrays, summed in a fixed
    order: the same float on every machine.

    scipy (``_cdf_distance``, p = 1) merges both samples, takes the gaps between successive
    merged values and sums ``|F_u − F_v| · gap``, the CDFs counted by ``searchsorted`` after
    an ``argsort`` of each sample. scipy sums with ``np.vecdot`` on numpy 2, which hands
    vectors over 10,000 values to the BLAS ``ddot``: its float depends on the BLAS thread
    count (1 thread and 2 threads differ in the last digits), and under load each call waits
    for a BLAS thread to wake. Here the sum is numpy's pairwise ``np.sum(x * y)`` (what scipy
    does on numpy 1.x): independent of threads, so a stored effect size is reproducible, and
    within a few ulps of scipy's (relative error ~1e-15). Here the merge is one stable argsort
    of the two sorted runs (linear: two runs) and the CDFs are running counts of each
    sample's values in merged order. The two agree wherever the next merged value is larger
    (the count then includes every tie); where it is equal the gap is exactly 0 and both
    terms are 0.0, so the summed vector is identical to scipy's.

    Args:
        u, v: shape (n_u,), (n_v,), ascending, finite, non-empty (unchecked: callers pass
            :func:`drift.colwindow.prepare`'s sorted values).
        order: an argsort (ties in any order) of some ``concatenate([a, b])`` with ``u`` the
            sorted ``a`` and ``v`` the sorted ``b`` (:attr:`drift.colwindow.Prepared.order`),
            shape (n_u + n_v,), unchecked: the merge is read from it instead of sorted again.
            The merged values are the same sorted values, and the running counts differ only
            inside runs of ties, where the gap is 0: the same float (the sign of a zero
            total aside, which a −0.0 value could flip).
        merged: with ``order``, ``concatenate([a, b])[order]`` when at hand
            (:attr:`drift.colwindow.Prepared.merged`, unchecked): the merged values, which
            are otherwise put together from ``u`` and ``v`` (the same array).

    Returns:
        W1 in the values' unit.

    Source: scipy.stats.wasserstein_distance (Ramdas, Garcia & Cuturi 2017, eq. of the
    one-dimensional W1 as the L1 distance of the CDFs).
    """
    if order is None:
        pooled = np.concatenate((u, v))
        order = np.argsort(pooled, kind="stable")
        values = pooled[order]
        is_u = order < u.size
    else:
        is_u = order < u.size
        if merged is not None:
            values = merged
        else:
            values = np.empty(u.size + v.size, dtype=np.float64)
            values[is_u] = u  # the k-th value of a in sorted order is u[k]
            values[~is_u] = v
    deltas = np.diff(values)
    from_u = np.cumsum(is_u[:-1])
    u_cdf = from_u / u.size
    v_cdf = (np.arange(1, values.size) - from_u) / v.size
    return float(_vecdot(np.abs(u_cdf - v_cdf), deltas))


def _vecdot(x: NDArray[np.float64], y: NDArray[np.float64]) -> float:
    """``x · y`` by numpy's pairwise summation of ``x * y``: no BLAS, so the same float
    whatever the BLAS thread count (scipy's ``np_vecdot`` on numpy 1.x)."""
    return float(np.sum(x * y))


def normed_wasserstein_sorted(
    reference: NDArray[np.float64],
    current: NDArray[np.float64],
    *,
    std_floor: float = WASSERSTEIN_STD_FLOOR,
    order: NDArray[np.intp] | None = None,
    merged: NDArray[np.float64] | None = None,
) -> float:
    """:func:`wasserstein_test`'s statistic of two ascending, finite, non-empty arrays (the
    same float: both go through :func:`wasserstein_sorted`; ``order`` and ``merged`` as
    there). Unit: reference standard deviations."""
    norm = max(float(np.std(reference)), std_floor)
    return wasserstein_sorted(reference, current, order, merged) / norm


def binned_shares(
    reference: Sequence[Hashable] | ArrayLike,
    current: Sequence[Hashable] | ArrayLike,
    *,
    categorical: bool,
) -> tuple[NDArray[np.float64], NDArray[np.float64], tuple[str, ...]]:
    """Share of each window per bin, on a common set of bins.

    Numerical windows with more than 20 unique reference values are cut with
    ``np.histogram_bin_edges(ref ∪ cur, bins="sturges")``; otherwise (and for categorical
    windows) each distinct value of ref ∪ cur is its own bin.

    Args:
        reference: non-empty values, no nulls; numbers when ``categorical`` is False.
        current: same.
        categorical: treat values as categories.

    Returns:
        ``(ref_shares, cur_shares, unseen)``: two arrays of shape (n_bins,) summing to 1, and
        the category values (as str) seen only in current (empty for binned numerics).

    Raises:
        ValueError: empty window or nulls.

    Source: Evidently ``legacy/calculations/stattests/utils.py::get_binned_data``.
    """
    if categorical:
        ref_c = Counter(categorical_window(reference, "reference"))  # type: ignore[arg-type]
        cur_c = Counter(categorical_window(current, "current"))  # type: ignore[arg-type]
        if not ref_c or not cur_c:
            raise ValueError("reference and current must be non-empty")
        cats = sorted(set(ref_c) | set(cur_c), key=str)
        r = np.array([ref_c[c] for c in cats], dtype=np.float64)
        c = np.array([cur_c[c] for c in cats], dtype=np.float64)
        unseen = tuple(sorted(str(k) for k in cur_c if k not in ref_c))
        return r / r.sum(), c / c.sum(), unseen
    ref = numeric_window(reference, "reference")  # type: ignore[arg-type]
    cur = numeric_window(current, "current")  # type: ignore[arg-type]
    if ref.size == 0 or cur.size == 0:
        raise ValueError("reference and current must be non-empty")
    if np.unique(ref).size > MAX_UNBINNED_VALUES:
        edges = np.histogram_bin_edges(np.concatenate([ref, cur]), bins="sturges")
        r = np.histogram(ref, edges)[0].astype(np.float64)
        c = np.histogram(cur, edges)[0].astype(np.float64)
        return r / r.sum(), c / c.sum(), ()
    r, c, _ = binned_shares(ref.tolist(), cur.tolist(), categorical=True)
    return r, c, ()


def jensen_shannon_test(
    reference: Sequence[Hashable] | ArrayLike,
    current: Sequence[Hashable] | ArrayLike,
    *,
    categorical: bool,
    threshold: float = DEFAULT_DISTANCE_THRESHOLD,
    min_samples: int = DEFAULT_MIN_SAMPLES,
) -> DriftResult:
    """Jensen–Shannon distance (base 2, in [0, 1]) between the binned windows.

    Args:
        reference: values of one window, no nulls (numbers unless ``categorical``).
        current: same.
        categorical: one bin per category instead of numeric binning (see
            :func:`binned_shares`).
        threshold: drift when ``statistic >= threshold`` (Evidently / report default 0.1).
        min_samples: minimum values per window for a verdict.

    Returns:
        ``DriftResult`` with ``score_kind="distance"``, ``pvalue=None``; current-only
        categories are listed in ``unseen_categories`` and count with reference mass 0.

    Raises:
        ValueError: nulls, non-finite numbers, or bad parameters.

    Source: scipy.spatial.distance.jensenshannon(base=2) (Lin 1991); base 2 as NannyML and
    the reference notes §5 recommend (Evidently uses the natural log).
    """
    check_test_params(threshold, min_samples)
    n_ref, n_cur = len(list(reference)), len(list(current))  # type: ignore[arg-type]
    if not has_enough(n_ref, n_cur, min_samples):
        return insufficient("jensenshannon", "distance", threshold, n_ref, n_cur)
    r, c, unseen = binned_shares(reference, current, categorical=categorical)
    stat = float(jensenshannon(r, c, base=2))
    stat = 0.0 if not math.isfinite(stat) else max(stat, 0.0)
    return DriftResult(
        "jensenshannon",
        stat,
        None,
        "distance",
        threshold,
        stat >= threshold,
        n_ref,
        n_cur,
        False,
        unseen,
    )


def smooth_shares(shares: NDArray[np.float64]) -> NDArray[np.float64]:
    """Replace empty bins so logarithms stay finite (Evidently's rule).

    Empty bins get 1e-4, or ``min_nonzero / 1e6`` when the smallest non-zero share is already
    ≤ 1e-4. Shape (n_bins,) in, same shape out; not renormalised, as in Evidently.

    Source: Evidently ``psi_stattest.py`` / ``utils.py``.
    """
    out = shares.astype(np.float64, copy=True)
    nonzero = out[out > 0]
    fill = PSI_EMPTY_BIN_SHARE
    if nonzero.size and nonzero.min() <= PSI_EMPTY_BIN_SHARE:
        fill = float(nonzero.min()) / 1e6
    out[out == 0] = fill
    return out


def psi_test(
    reference: Sequence[Hashable] | ArrayLike,
    current: Sequence[Hashable] | ArrayLike,
    *,
    categorical: bool,
    threshold: float = DEFAULT_DISTANCE_THRESHOLD,
    min_samples: int = DEFAULT_MIN_SAMPLES,
) -> DriftResult:
    """Population stability index ``Σ (r_i − c_i) · ln(r_i / c_i)`` over common bins.

    Empty bins are smoothed by :func:`smooth_shares`, so PSI is finite even for disjoint
    windows (case 18 B); identical windows give exactly 0.

    Args:
        reference: values, no nulls; numbers unless ``categorical``.
        current: same.
        categorical: one bin per category instead of numeric binning.
        threshold: drift when ``statistic >= threshold``; 0.1 (Evidently default; industry
            rule of thumb: 0.1–0.25 moderate, > 0.25 major).
        min_samples: minimum values per window for a verdict.

    Returns:
        ``DriftResult`` with ``score_kind="distance"``, ``pvalue=None``.

    Raises:
        ValueError: nulls, non-finite numbers, or bad parameters.

    Source: Evidently ``psi_stattest.py``; Yurdakul (2018), "Statistical properties of
    population stability index".
    """
    check_test_params(threshold, min_samples)
    n_ref, n_cur = len(list(reference)), len(list(current))  # type: ignore[arg-type]
    if not has_enough(n_ref, n_cur, min_samples):
        return insufficient("psi", "distance", threshold, n_ref, n_cur)
    r, c, unseen = binned_shares(reference, current, categorical=categorical)
    r, c = smooth_shares(r), smooth_shares(c)
    stat = float(np.sum((r - c) * np.log(r / c)))
    return DriftResult(
        "psi", stat, None, "distance", threshold, stat >= threshold, n_ref, n_cur, False, unseen
    )
