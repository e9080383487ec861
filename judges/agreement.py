"""Judge-vs-human agreement: weighted Cohen's κ, Spearman ρ, confusion matrix, agreement over time.

Pure functions over paired label sequences, no I/O (reference §3.4). Pairs where either side is
None (unknown) are skipped, so ``n`` is the number of pairs actually compared.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from scipy import stats

KappaWeights = Literal["none", "linear", "quadratic"]


@dataclass(frozen=True)
class KappaResult:
    """Cohen's κ between human and judge labels.

    ``statistic``: κ in [-1, 1], None when undefined (fewer than 2 pairs, or chance agreement is
    total, e.g. every label identical). ``observed_agreement``: fraction of exact matches (None
    when n = 0). ``labels``: the ordered categories the weights are computed on.
    """

    statistic: float | None
    weights: KappaWeights
    n: int
    observed_agreement: float | None
    labels: tuple[Hashable, ...]


@dataclass(frozen=True)
class SpearmanResult:
    """Spearman rank correlation; ``statistic`` / ``pvalue`` None when undefined (n < 3 or a
    constant sequence)."""

    statistic: float | None
    pvalue: float | None
    n: int


@dataclass(frozen=True)
class ConfusionMatrix:
    """Counts with rows = human label, columns = judge label, in ``labels`` order.

    ``precision[k]`` / ``recall[k]``: the judge's precision and recall for class k taking the
    human label as truth; None when undefined (no judge / no human labels of class k).
    """

    labels: tuple[Hashable, ...]
    counts: tuple[tuple[int, ...], ...]
    precision: tuple[float | None, ...]
    recall: tuple[float | None, ...]
    n: int


@dataclass(frozen=True)
class BucketAgreement:
    """Agreement inside one time bucket [start_s, end_s) (Unix seconds).

    ``mean_gap``: mean of human − judge (numeric labels only, else None): its drift over time is
    the judge drift of reference §3.6.
    """

    start_s: float
    end_s: float
    n: int
    kappa: float | None
    observed_agreement: float | None
    mean_gap: float | None


def _is_nan(value: object) -> bool:
    return isinstance(value, float) and math.isnan(value)


def _pairs(human: Sequence[object], judge: Sequence[object]) -> tuple[list[object], list[object]]:
    if len(human) != len(judge):
        raise ValueError(
            f"human and judge must have the same length ({len(human)} vs {len(judge)})"
        )
    kept_h: list[object] = []
    kept_j: list[object] = []
    for h, j in zip(human, judge, strict=True):
        if h is None or j is None:
            continue
        if _is_nan(h) or _is_nan(j):
            continue
        kept_h.append(h)
        kept_j.append(j)
    return kept_h, kept_j


def _labels(
    human: list[object], judge: list[object], labels: Sequence[Hashable] | None
) -> tuple[Hashable, ...]:
    if labels is None:
        observed: set[Any] = set(human) | set(judge)
        try:
            return tuple(sorted(observed))
        except TypeError as exc:
            raise ValueError("labels: observed labels cannot be ordered; pass labels") from exc
    ordered = tuple(labels)
    if len(set(ordered)) != len(ordered):
        raise ValueError("labels must be distinct")
    unknown = (set(human) | set(judge)) - set(ordered)
    if unknown:
        raise ValueError(f"labels does not list {sorted(map(str, unknown))}")
    return ordered


def _counts(human: list[object], judge: list[object], labels: tuple[Hashable, ...]) -> np.ndarray:
    index = {label: k for k, label in enumerate(labels)}
    counts = np.zeros((len(labels), len(labels)), dtype=np.int64)
    for h, j in zip(human, judge, strict=True):
        counts[index[h], index[j]] += 1
    return counts


def cohen_kappa(
    human: Sequence[object],
    judge: Sequence[object],
    *,
    weights: KappaWeights = "quadratic",
    labels: Sequence[Hashable] | None = None,
) -> KappaResult:
    """Weighted Cohen's κ = 1 − Σ w_ij O_ij / Σ w_ij E_ij (Cohen 1968; reference §3.4).

    O is the observed confusion matrix, E = outer(row totals, column totals) / n the chance
    matrix; disagreement weights w_ij = 1 − δ_ij (none), |i − j| (linear) or (i − j)² (quadratic)
    over the positions of ``labels`` (default: the sorted union of observed labels). Matches
    ``sklearn.metrics.cohen_kappa_score``. Raises ValueError for unequal lengths, duplicate
    ``labels`` or labels missing from ``labels``.
    """
    if weights not in ("none", "linear", "quadratic"):
        raise ValueError("weights must be 'none', 'linear' or 'quadratic'")
    h, j = _pairs(human, judge)
    ordered = _labels(h, j, labels)
    n = len(h)
    if n == 0:
        return KappaResult(None, weights, 0, None, ordered)
    counts = _counts(h, j, ordered).astype(float)
    observed_agreement = float(np.trace(counts) / n)
    positions = np.arange(len(ordered), dtype=float)
    diff = positions[:, None] - positions[None, :]
    if weights == "none":
        w = (diff != 0).astype(float)
    elif weights == "linear":
        w = np.abs(diff)
    else:
        w = diff**2
    expected = np.outer(counts.sum(axis=1), counts.sum(axis=0)) / n
    denominator = float((w * expected).sum())
    if n < 2 or denominator == 0.0:
        return KappaResult(None, weights, n, observed_agreement, ordered)
    kappa = 1.0 - float((w * counts).sum()) / denominator
    return KappaResult(kappa, weights, n, observed_agreement, ordered)


def spearman(human: Sequence[float | None], judge: Sequence[float | None]) -> SpearmanResult:
    """Spearman's ρ with its two-sided p-value (``scipy.stats.spearmanr``; G-Eval meta-evaluation,
    reference §3.1). Raises ValueError for unequal lengths."""
    h, j = _pairs(human, judge)
    n = len(h)
    if n < 3 or len(set(h)) < 2 or len(set(j)) < 2:
        return SpearmanResult(None, None, n)
    result = stats.spearmanr(np.asarray(h, dtype=float), np.asarray(j, dtype=float))
    return SpearmanResult(float(result.statistic), float(result.pvalue), n)


def confusion_matrix(
    human: Sequence[object], judge: Sequence[object], *, labels: Sequence[Hashable] | None = None
) -> ConfusionMatrix:
    """Confusion matrix (rows human, columns judge) with the judge's per-class precision/recall
    (reference §3.4: report them next to κ when prevalence is skewed)."""
    h, j = _pairs(human, judge)
    ordered = _labels(h, j, labels)
    counts = _counts(h, j, ordered)
    precision: list[float | None] = []
    recall: list[float | None] = []
    for k in range(len(ordered)):
        judged_k = int(counts[:, k].sum())
        human_k = int(counts[k, :].sum())
        precision.append(float(counts[k, k]) / judged_k if judged_k else None)
        recall.append(float(counts[k, k]) / human_k if human_k else None)
    return ConfusionMatrix(
        labels=ordered,
        counts=tuple(tuple(int(c) for c in row) for row in counts),
        precision=tuple(precision),
        recall=tuple(recall),
        n=len(h),
    )


def agreement_over_time(
    times_s: Sequence[float],
    human: Sequence[object],
    judge: Sequence[object],
    *,
    bucket_s: float,
    weights: KappaWeights = "quadratic",
    labels: Sequence[Hashable] | None = None,
    min_samples: int = 2,
) -> tuple[BucketAgreement, ...]:
    """κ, raw agreement and mean human − judge gap per time bucket, oldest first.

    ``times_s``: Unix seconds of each pair; buckets are [k·bucket_s, (k+1)·bucket_s). Empty
    buckets are omitted; buckets with fewer than ``min_samples`` pairs report ``kappa=None``.
    ``labels`` (default: sorted union over all buckets) keeps κ weights identical across buckets.
    Raises ValueError for unequal lengths, ``bucket_s`` <= 0 or ``min_samples`` < 2.
    """
    if bucket_s <= 0:
        raise ValueError("bucket_s must be > 0")
    if min_samples < 2:
        raise ValueError("min_samples must be >= 2")
    if len(times_s) != len(human) or len(times_s) != len(judge):
        raise ValueError("times_s, human and judge must have the same length")
    h_all, j_all = _pairs(human, judge)
    ordered = _labels(h_all, j_all, labels)
    buckets: dict[int, list[int]] = {}
    for i, t in enumerate(times_s):
        if not math.isfinite(t):
            raise ValueError("times_s must be finite")
        buckets.setdefault(math.floor(t / bucket_s), []).append(i)
    out: list[BucketAgreement] = []
    for key in sorted(buckets):
        h, j = _pairs([human[i] for i in buckets[key]], [judge[i] for i in buckets[key]])
        if not h:
            continue
        kappa = cohen_kappa(h, j, weights=weights, labels=ordered)
        numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in h + j)
        gap = float(np.mean(np.asarray(h, float) - np.asarray(j, float))) if numeric else None
        out.append(
            BucketAgreement(
                start_s=key * bucket_s,
                end_s=(key + 1) * bucket_s,
                n=len(h),
                kappa=kappa.statistic if len(h) >= min_samples else None,
                observed_agreement=kappa.observed_agreement,
                mean_gap=gap,
            )
        )
    return tuple(out)
