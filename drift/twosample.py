"""Two-sample drift hypothesis tests over one signal: reference window vs current window.

Pure functions over 1-D arrays, no I/O. Every test returns a frozen :class:`DriftResult` with
scipy's names (``statistic``, ``pvalue``) plus ``score_kind`` saying which of the two the
``threshold`` applies to:

* ``score_kind == "pvalue"``: drift when ``pvalue < threshold`` (a significance level).
* ``score_kind == "distance"``: drift when ``statistic >= threshold`` (an effect size, see
  :mod:`drift.distances`), or ``statistic > threshold`` for thresholds calibrated on reference
  noise (:mod:`drift.thresholds`).

Below ``min_samples`` non-null values in either window a test returns ``insufficient_data=True``
with ``statistic``, ``pvalue`` and ``drifted`` all ``None``: no verdict, never a p-value
computed on three points (tests/fixtures/cases/19_drift_empty_window.json).

Methods and defaults follow Evidently's legacy stattests
(``src/evidently/legacy/calculations/stattests/``, see
docs/reference/drift-canary-judge-methods.md §1.1) except where a docstring says otherwise.
Nulls (``None`` / NaN) must be dropped by the caller (:func:`drift.report.drift_report` does
it and counts them); here they raise ``ValueError``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats

ScoreKind = Literal["pvalue", "distance"]

DEFAULT_MIN_SAMPLES = 30
DEFAULT_ALPHA = 0.05
DEFAULT_DISTANCE_THRESHOLD = 0.1


@dataclass(frozen=True, slots=True)
class DriftResult:
    """Outcome of one drift test on one signal (× segment).

    Attributes:
        method: test name, e.g. ``"ks"``, ``"chisquare"``, ``"wasserstein"``.
        statistic: test statistic or distance; ``None`` when ``insufficient_data``.
        pvalue: p-value in [0, 1] for tests that have one, else ``None``.
        score_kind: ``"pvalue"`` (threshold is a significance level on ``pvalue``) or
            ``"distance"`` (threshold applies to ``statistic``).
        threshold: the significance level or distance threshold used for ``drifted``.
        drifted: the verdict; ``None`` when ``insufficient_data`` (no verdict).
        n_reference: non-null reference values used.
        n_current: non-null current values used.
        insufficient_data: fewer than ``min_samples`` values in either window.
        unseen_categories: categories present in current but absent from reference
            (categorical tests only; sorted by their string form).
    """

    method: str
    statistic: float | None
    pvalue: float | None
    score_kind: ScoreKind
    threshold: float
    drifted: bool | None
    n_reference: int
    n_current: int
    insufficient_data: bool
    unseen_categories: tuple[str, ...] = ()


def insufficient(
    method: str, score_kind: ScoreKind, threshold: float, n_reference: int, n_current: int
) -> DriftResult:
    """Build the no-verdict result returned below ``min_samples``.

    Shapes: scalars only. Raises nothing.
    """
    return DriftResult(
        method=method,
        statistic=None,
        pvalue=None,
        score_kind=score_kind,
        threshold=threshold,
        drifted=None,
        n_reference=n_reference,
        n_current=n_current,
        insufficient_data=True,
    )


def numeric_window(values: ArrayLike, name: str) -> NDArray[np.float64]:
    """Validate one numerical window: 1-D, finite floats. Raises ValueError naming ``name``."""
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must hold numbers (nulls dropped beforehand)") from exc
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must hold finite numbers (drop nulls/NaN beforehand)")
    return arr


def categorical_window(values: Iterable[Hashable], name: str) -> list[Hashable]:
    """Validate one categorical window: no None/NaN. Raises ValueError naming ``name``."""
    out = list(values)
    for v in out:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            raise ValueError(f"{name} must not contain nulls (drop them beforehand)")
    return out


def check_test_params(threshold: float, min_samples: int, name: str = "threshold") -> None:
    """Validate a threshold called ``name`` (finite, ≥ 0) and ``min_samples`` (≥ 1).

    Raises ValueError naming the bad parameter.
    """
    if not math.isfinite(threshold) or threshold < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {threshold!r}")
    if min_samples < 1:
        raise ValueError(f"min_samples must be >= 1, got {min_samples!r}")


def has_enough(n_reference: int, n_current: int, min_samples: int) -> bool:
    """Whether both windows reach ``min_samples`` values."""
    return n_reference >= min_samples and n_current >= min_samples


def ks_test(
    reference: ArrayLike,
    current: ArrayLike,
    *,
    alpha: float = DEFAULT_ALPHA,
    min_samples: int = DEFAULT_MIN_SAMPLES,
) -> DriftResult:
    """Two-sided two-sample Kolmogorov–Smirnov test.

    Args:
        reference: shape (n_ref,), finite numbers in the signal's unit (e.g. seconds, tokens).
        current: shape (n_cur,), same unit.
        alpha: significance level; drift when ``pvalue < alpha``.
        min_samples: minimum non-null values per window for a verdict.

    Returns:
        ``DriftResult`` with ``statistic`` = sup |F_ref − F_cur| in [0, 1], ``score_kind="pvalue"``.
        Identical constant windows give statistic 0 and p-value 1 (case 18 A).

    Raises:
        ValueError: non-finite values, wrong shape, or bad ``alpha`` / ``min_samples``.

    Source: scipy.stats.ks_2samp (exact distribution for small samples, asymptotic otherwise);
    Evidently ``ks_stattest.py``.
    """
    check_test_params(alpha, min_samples, "alpha")
    ref, cur = numeric_window(reference, "reference"), numeric_window(current, "current")
    if not has_enough(ref.size, cur.size, min_samples):
        return insufficient("ks", "pvalue", alpha, ref.size, cur.size)
    res = stats.ks_2samp(ref, cur, alternative="two-sided")
    p = float(res.pvalue)
    return DriftResult(
        "ks", float(res.statistic), p, "pvalue", alpha, p < alpha, ref.size, cur.size, False
    )


def chi_square_test(
    reference: Iterable[Hashable],
    current: Iterable[Hashable],
    *,
    alpha: float = DEFAULT_ALPHA,
    min_samples: int = DEFAULT_MIN_SAMPLES,
) -> DriftResult:
    """Pearson chi-square test of homogeneity on the 2 × k contingency table.

    The columns are the union of the categories seen in either window, so a category that only
    appears in current counts (Evidently's goodness-of-fit form would divide by a zero expected
    count). Categories absent from reference are reported in ``unseen_categories``.

    Args:
        reference: categorical values (str, int, bool, ...), no nulls; length n_ref.
        current: same, length n_cur.
        alpha: significance level; drift when ``pvalue < alpha``.
        min_samples: minimum values per window for a verdict.

    Returns:
        ``DriftResult`` with the chi-square statistic (Yates-corrected when the table is 2 × 2,
        scipy's default), ``score_kind="pvalue"``. A single category in both windows gives
        statistic 0 and p-value 1. Two disjoint constant windows of 200 give 396.01, p ≈ 4e-88
        (case 18 B).

    Raises:
        ValueError: nulls in the input or bad ``alpha`` / ``min_samples``.

    Source: scipy.stats.chi2_contingency (Pearson 1900; Yates 1934 for 2 × 2); NannyML chi2.
    """
    check_test_params(alpha, min_samples, "alpha")
    ref = Counter(categorical_window(reference, "reference"))
    cur = Counter(categorical_window(current, "current"))
    n_ref, n_cur = sum(ref.values()), sum(cur.values())
    unseen = tuple(sorted(str(c) for c in cur if c not in ref))
    if not has_enough(n_ref, n_cur, min_samples):
        return insufficient("chisquare", "pvalue", alpha, n_ref, n_cur)
    cats = sorted(set(ref) | set(cur), key=str)
    if len(cats) == 1:
        stat, p = 0.0, 1.0
    else:
        table = np.array([[ref[c] for c in cats], [cur[c] for c in cats]], dtype=np.float64)
        res = stats.chi2_contingency(table, correction=True)
        stat, p = float(res.statistic), float(res.pvalue)
    return DriftResult(
        "chisquare", stat, p, "pvalue", alpha, p < alpha, n_ref, n_cur, False, unseen
    )


def proportion_z_test(
    reference: ArrayLike,
    current: ArrayLike,
    *,
    alpha: float = DEFAULT_ALPHA,
    min_samples: int = DEFAULT_MIN_SAMPLES,
) -> DriftResult:
    """Two-sided pooled two-proportion z-test on 0/1 (or boolean) values.

    ``z = (p_cur − p_ref) / sqrt(P(1 − P)(1/n_ref + 1/n_cur))`` with pooled
    ``P = (x_ref + x_cur)/(n_ref + n_cur)``, ``p = 2(1 − Φ(|z|))``. When ``P`` is 0 or 1 both
    windows are constant and equal: statistic 0, p-value 1.

    Args:
        reference: shape (n_ref,), values in {0, 1} (e.g. refusal, empty output, thumbs-down).
        current: shape (n_cur,), values in {0, 1}.
        alpha: significance level; drift when ``pvalue < alpha``.
        min_samples: minimum values per window for a verdict.

    Returns:
        ``DriftResult`` with ``statistic`` = z (positive when the current rate is higher).

    Raises:
        ValueError: values other than 0/1, wrong shape, bad ``alpha`` / ``min_samples``.

    Source: Evidently ``z_stattest.py``; any statistics text (e.g. Agresti, Categorical Data
    Analysis, §2.2).
    """
    check_test_params(alpha, min_samples, "alpha")
    ref, cur = numeric_window(reference, "reference"), numeric_window(current, "current")
    for name, arr in (("reference", ref), ("current", cur)):
        if not np.all((arr == 0) | (arr == 1)):
            raise ValueError(f"{name} must hold only 0/1 values for the proportion z-test")
    if not has_enough(ref.size, cur.size, min_samples):
        return insufficient("z", "pvalue", alpha, ref.size, cur.size)
    p_ref, p_cur = float(ref.mean()), float(cur.mean())
    pooled = (ref.sum() + cur.sum()) / (ref.size + cur.size)
    if pooled in (0.0, 1.0):
        z, p = 0.0, 1.0
    else:
        se = math.sqrt(pooled * (1 - pooled) * (1 / ref.size + 1 / cur.size))
        z = (p_cur - p_ref) / se
        p = float(2 * stats.norm.sf(abs(z)))
    return DriftResult("z", float(z), p, "pvalue", alpha, p < alpha, ref.size, cur.size, False)
