"""Multiple-testing control across signals × segments.

A drift run tests many signals in many segments at once; at a per-test level of 0.05 some of
them alarm on every run by chance alone. Benjamini–Hochberg controls the false discovery rate
for the report; Bonferroni controls the family-wise error rate for paging on a small critical
set (docs/reference/drift-canary-judge-methods.md §1.5, §5(i)).

Pure functions; ``None`` entries (no p-value: insufficient data or a distance-type test) are
carried through untouched and do not count towards the number of hypotheses ``m``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class MultipleTestResult:
    """Decisions for a family of p-values.

    Attributes:
        method: ``"bh"`` or ``"bonferroni"``.
        level: the FDR level q (BH) or family-wise level α (Bonferroni).
        m: number of p-values in the family (``None`` entries excluded).
        rejected: per input, ``True``/``False``, or ``None`` where the input was ``None``.
        adjusted: per input, the adjusted p-value (compare with ``level``), or ``None``.
        cutoff: the largest raw p-value rejected, ``None`` when nothing is rejected.
    """

    method: str
    level: float
    m: int
    rejected: tuple[bool | None, ...]
    adjusted: tuple[float | None, ...]
    cutoff: float | None


def _validate(pvalues: Sequence[float | None], level: float, name: str) -> list[int]:
    if not 0 < level < 1:
        raise ValueError(f"{name} must be in (0, 1), got {level!r}")
    present = []
    for i, p in enumerate(pvalues):
        if p is None:
            continue
        if not (math.isfinite(p) and 0.0 <= p <= 1.0):
            raise ValueError(f"pvalues[{i}] must be in [0, 1] or None, got {p!r}")
        present.append(i)
    return present


def benjamini_hochberg(pvalues: Sequence[float | None], q: float = 0.05) -> MultipleTestResult:
    """Benjamini–Hochberg step-up procedure at FDR level ``q``.

    Sort the m p-values, find the largest k with ``p_(k) ≤ q·k/m`` and reject the k smallest.
    Adjusted p-values are ``min_{j ≥ i} min(1, m·p_(j)/j)`` (equal to
    ``scipy.stats.false_discovery_control(p, method="bh")``); ``rejected[i]`` is
    ``adjusted[i] ≤ q``.

    Args:
        pvalues: length-n sequence of p-values in [0, 1] or ``None`` (skipped).
        q: target false discovery rate in (0, 1).

    Returns:
        ``MultipleTestResult`` aligned with ``pvalues``.

    Raises:
        ValueError: ``q`` outside (0, 1) or a p-value outside [0, 1].

    Source: Benjamini & Hochberg (1995), JRSS-B 57(1), 289–300, step-up procedure; valid under
    independence or positive regression dependence (Benjamini & Yekutieli 2001).
    """
    present = _validate(pvalues, q, "q")
    m = len(present)
    rejected: list[bool | None] = [None] * len(pvalues)
    adjusted: list[float | None] = [None] * len(pvalues)
    if m == 0:
        return MultipleTestResult("bh", q, 0, tuple(rejected), tuple(adjusted), None)
    p = np.array([pvalues[i] for i in present], dtype=np.float64)
    order = np.argsort(p, kind="stable")
    ranked = p[order] * m / np.arange(1, m + 1)
    adj_sorted = np.minimum(1.0, np.minimum.accumulate(ranked[::-1])[::-1])
    adj = np.empty(m)
    adj[order] = adj_sorted
    cutoff: float | None = None
    for j, i in enumerate(present):
        adjusted[i] = float(adj[j])
        rejected[i] = bool(adj[j] <= q)
        if rejected[i]:
            cutoff = float(p[j]) if cutoff is None else max(cutoff, float(p[j]))
    return MultipleTestResult("bh", q, m, tuple(rejected), tuple(adjusted), cutoff)


def bonferroni(pvalues: Sequence[float | None], alpha: float = 0.05) -> MultipleTestResult:
    """Bonferroni correction at family-wise level ``alpha``: reject when ``p·m ≤ alpha``.

    Args:
        pvalues: length-n sequence of p-values in [0, 1] or ``None`` (skipped).
        alpha: family-wise error rate in (0, 1).

    Returns:
        ``MultipleTestResult`` aligned with ``pvalues``; adjusted = ``min(1, m·p)``.

    Raises:
        ValueError: ``alpha`` outside (0, 1) or a p-value outside [0, 1].

    Source: Bonferroni inequality (Dunn 1961); alibi-detect's default feature-wise correction.
    """
    present = _validate(pvalues, alpha, "alpha")
    m = len(present)
    rejected: list[bool | None] = [None] * len(pvalues)
    adjusted: list[float | None] = [None] * len(pvalues)
    cutoff: float | None = None
    for i in present:
        p = float(pvalues[i])  # type: ignore[arg-type]
        adjusted[i] = min(1.0, p * m)
        rejected[i] = p * m <= alpha
        if rejected[i]:
            cutoff = p if cutoff is None else max(cutoff, p)
    return MultipleTestResult("bonferroni", alpha, m, tuple(rejected), tuple(adjusted), cutoff)
