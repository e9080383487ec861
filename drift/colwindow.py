"""The columns a drift run tests (:class:`ColumnWindow`) and their one-pass preparation.

A numerical window is null-filtered and sorted once (:func:`prepare`); the sorted values serve
the distance tests, the bins and the summaries. Windows whose values are in time order
(``ordered``) or carry per-call codes / weights are tested by :mod:`drift.calibrated`.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from drift.report import Kind

Counts = Mapping[Hashable, int]


@dataclass(frozen=True, slots=True)
class ColumnWindow:
    """Reference and current data of one signal in one segment.

    Exactly one representation is used, by ``kind``:

    * ``"numerical"``: ``reference`` / ``current`` are float arrays of shape (n,), NaN = null.
    * ``"categorical"``: ``reference_counts`` / ``current_counts`` map category → count (no
      null key); ``reference_nulls`` / ``current_nulls`` count the nulls.
    * ``"embedding"``: ``reference`` / ``current`` are float arrays of shape (n, d), no nulls;
      ``reference_nulls`` / ``current_nulls`` count the calls left out (text not captured).

    ``signal``, ``segment``, ``method`` and ``threshold`` as in :class:`drift.report.SignalWindow`.

    Calibrated tests (:mod:`drift.calibrated`, chosen when ``method`` is ``None``):

    * ``ordered``: the numerical arrays are in time order (oldest first) →
      :func:`~drift.calibrated.block_rank_test`.
    * ``reference_weights`` / ``current_weights``: shape (n,) of 1/π (judge inclusion
      probability) aligned with the numerical arrays → :func:`~drift.calibrated.hajek_mean_test`.
    * ``reference_codes`` / ``current_codes``: int arrays, one code per call in time order
      (−1 = null), indexing ``categories`` → :func:`~drift.calibrated.rate_test` (categories
      ⊆ {False, True}) or :func:`~drift.calibrated.categorical_rate_test`; the counts are still
      required (details, histograms).
    * ``reference_age_s``: shape (n_ref,) aligned with ``reference_codes``, seconds from each
      reference call's start to the current window's start; with look-backs configured, a
      two-category window is tested over longer windows too
      (:func:`~drift.ratewindows.windowed_rate_test`).
    """

    signal: str
    kind: Kind
    segment: str | None = None
    reference: NDArray[np.float64] | None = None
    current: NDArray[np.float64] | None = None
    reference_counts: Counts | None = None
    current_counts: Counts | None = None
    reference_nulls: int = 0
    current_nulls: int = 0
    method: str | None = None
    threshold: float | None = None
    ordered: bool = False
    reference_weights: NDArray[np.float64] | None = None
    current_weights: NDArray[np.float64] | None = None
    reference_codes: NDArray[np.int64] | None = None
    current_codes: NDArray[np.int64] | None = None
    categories: tuple[Hashable, ...] = ()
    reference_age_s: NDArray[np.float64] | None = None


def numbers(values: NDArray[np.float64] | None, name: str) -> tuple[NDArray[np.float64], int]:
    if values is None:
        raise ValueError(f"{name} is required for a numerical window")
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{name} must have shape (n,), got {arr.shape}")
    kept = np.sort(arr[~np.isnan(arr)])  # sorted once: KS, Wasserstein and bins reuse it
    if kept.size and not (np.isfinite(kept[0]) and np.isfinite(kept[-1])):
        raise ValueError(f"{name} must hold finite numbers or NaN (null)")
    return kept, int(arr.size - kept.size)


#: fewest values for which :func:`argsort_values` looks for whole numbers (below it the look
#: costs about what it could save)
RADIX_MIN = 4096


def argsort_values(x: NDArray[np.float64]) -> NDArray[np.intp]:
    """An argsort of finite-or-NaN-free float64 ``x``, shape (n,) (ties in any order: the
    sorted values ``x[order]`` are those of ``np.argsort(x)``).

    Whole numbers spanning fewer than 2**16 values (token counts) are sorted as uint16
    offsets from the minimum, which numpy's stable sort radix-sorts (~1 ms instead of ~5 ms
    for 100,000 values on the 2-core machine); any other ``x`` by ``np.argsort``. The offsets
    are exact (whole numbers below 2**53), and a value that is not a whole number, or a span
    of 2**16 or more (inf and NaN included), fails the check and takes the general sort."""
    if x.size >= RADIX_MIN:
        head = x[:64]
        if np.array_equal(head, np.floor(head)):  # cheap look before the full pass
            lo = x.min()
            if np.isfinite(lo):  # -inf: inf - inf would be NaN (and a RuntimeWarning)
                offsets = x - lo
                if offsets.max() < 2**16:
                    keys = offsets.astype(np.uint16)
                    if np.array_equal(keys, offsets):
                        return np.argsort(keys, kind="stable")
    return np.argsort(x)


def distinct_sorted(x: NDArray[np.float64]) -> NDArray[np.float64]:
    """Distinct values of a sorted array in O(n) (``np.unique`` would sort again)."""
    if x.size == 0:
        return x
    return x[np.concatenate([[True], x[1:] != x[:-1]])]


@dataclass(frozen=True, slots=True)
class Prepared:
    """A numerical window after one pass: sorted non-null values and distinct counts.

    ``order`` (windows in time order without weights, those of the block rank test): an
    argsort of the non-null reference values then the non-null current ones, in time order,
    the one sort that gave ``ref`` and ``cur`` and that the test's ranks reuse; ``merged``:
    those pooled values in that order (ascending: ``ref`` and ``cur`` merged), with ``order``."""

    ref: NDArray[np.float64]
    cur: NDArray[np.float64]
    ref_nulls: int
    cur_nulls: int
    ref_distinct: int
    union_distinct: int
    order: NDArray[np.intp] | None = None
    merged: NDArray[np.float64] | None = None


def _one_sort(
    w: ColumnWindow,
) -> tuple[
    NDArray[np.float64], int, NDArray[np.float64], int, NDArray[np.intp], NDArray[np.float64]
]:
    """:func:`numbers` of both windows from one argsort of their non-null values in time
    order (the same sorted values: a sort's values do not depend on how ties are ordered),
    plus that argsort and the pooled values in its order."""
    arrays = []
    for values, name in ((w.reference, "reference"), (w.current, "current")):
        if values is None:
            raise ValueError(f"{name} is required for a numerical window")
        arr = np.asarray(values, dtype=np.float64)
        if arr.ndim != 1:
            raise ValueError(f"{name} must have shape (n,), got {arr.shape}")
        arrays.append((arr, arr[~np.isnan(arr)]))
    (r_all, r_kept), (c_all, c_kept) = arrays
    pooled = np.concatenate([r_kept, c_kept])
    order = argsort_values(pooled)
    in_ref = order < r_kept.size
    merged = pooled[order]  # one gather; each window's values are a mask of it
    ref, cur = merged[in_ref], merged[~in_ref]
    for name, kept in (("reference", ref), ("current", cur)):
        if kept.size and not (np.isfinite(kept[0]) and np.isfinite(kept[-1])):
            raise ValueError(f"{name} must hold finite numbers or NaN (null)")
    return ref, int(r_all.size - ref.size), cur, int(c_all.size - cur.size), order, merged


def prepare(w: ColumnWindow) -> Prepared:
    order = merged = None
    if w.ordered and w.reference_weights is None and w.method is None:
        ref, ref_nulls, cur, cur_nulls, order, merged = _one_sort(w)
    else:
        ref, ref_nulls = numbers(w.reference, "reference")
        cur, cur_nulls = numbers(w.current, "current")
    rd, cd = distinct_sorted(ref), distinct_sorted(cur)
    # exact when small; otherwise a lower bound above every cut-off (5 and 20) that uses it
    union = np.union1d(rd, cd).size if rd.size <= 64 and cd.size <= 64 else rd.size + cd.size
    return Prepared(
        ref, cur, ref_nulls, cur_nulls, int(rd.size), int(max(union, rd.size)), order, merged
    )


def check_counts(counts: Counts | None, name: str) -> dict[Hashable, int]:
    if counts is None:
        raise ValueError(f"{name} is required for a categorical window")
    out: dict[Hashable, int] = {}
    for k, v in counts.items():
        if k is None or (isinstance(k, float) and math.isnan(k)):
            raise ValueError(f"{name} must not have a null category (count nulls separately)")
        if int(v) < 0:
            raise ValueError(f"{name}[{k!r}] must be >= 0, got {v!r}")
        if int(v) > 0:
            out[k] = int(v)
    return out


def expand(counts: Mapping[Hashable, int]) -> list[Hashable]:
    out: list[Hashable] = []
    for k, v in counts.items():
        out.extend([k] * v)
    return out


def shares(
    ref: Mapping[Hashable, int], cur: Mapping[Hashable, int]
) -> tuple[list[Hashable], NDArray[np.float64], NDArray[np.float64]]:
    """Common categories (sorted by their string form, as ``binned_shares``) and both shares."""
    cats = sorted(set(ref) | set(cur), key=str)
    r = np.array([ref.get(c, 0) for c in cats], dtype=np.float64)
    c = np.array([cur.get(c, 0) for c in cats], dtype=np.float64)
    return cats, r / r.sum(), c / c.sum()
