"""Sample-ratio-mismatch (SRM) checks: the gate that runs before any canary metric is trusted.

- Fixed-n report: Pearson chi-square goodness of fit of assignment counts against the intended
  weights, ``sum (O_i - E_i)^2 / E_i`` with ``df = k - 1``; mismatch at ``p < 0.001`` (Fabijan
  et al., KDD 2019; reference ``docs/reference/drift-canary-judge-methods.md`` section 2.4).
- Sequential gate: the Dirichlet-multinomial e-value of Lindon & Malek, "Anytime-valid
  inference for multinomial count data" (NeurIPS 2022), reference section 2.4:
  ``E = [Gamma(sum a_i)/Gamma(sum a_i + n) prod Gamma(a_i + n_i)/Gamma(a_i)] / prod p0_i^n_i``.
  Segments with different intended weights (rollout steps) are multiplied: each segment's
  e-value is a test martingale given the past, so the product is one too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special, stats

#: Conventional fixed-n SRM threshold (chi-square(1) > 10.83).
SRM_PVALUE_THRESHOLD = 0.001


@dataclass(frozen=True)
class SrmChiSquareResult:
    """Pearson chi-square SRM report. ``statistic``/``pvalue`` are None without assignments."""

    statistic: float | None
    pvalue: float | None
    df: int
    observed: tuple[int, ...]
    expected: tuple[float, ...]
    threshold: float
    mismatch: bool
    score_kind: Literal["pvalue"] = "pvalue"


@dataclass(frozen=True)
class SrmSequentialResult:
    """Dirichlet-multinomial SRM e-value (product over segments); mismatch when E >= 1/alpha."""

    e_value: float
    log_e_value: float
    pvalue: float
    alpha: float
    mismatch: bool
    n: int
    score_kind: Literal["e_value"] = "e_value"


def _validate(
    counts: ArrayLike, weights: ArrayLike
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    n = np.asarray(counts)
    w = np.asarray(weights, dtype=np.float64)
    if n.ndim != 1 or w.ndim != 1 or n.shape != w.shape or n.size < 2:
        raise ValueError("counts and weights must be 1-d arrays of the same length >= 2")
    if np.any(n < 0) or not np.all(np.equal(np.mod(n, 1), 0)):
        raise ValueError("counts must be nonnegative integers")
    if np.any(~np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
        raise ValueError("weights must be nonnegative, finite and not all zero")
    return n.astype(np.int64), w / w.sum()


def srm_chi_square(
    counts: ArrayLike, weights: ArrayLike, *, threshold: float = SRM_PVALUE_THRESHOLD
) -> SrmChiSquareResult:
    """Pearson chi-square of assignment ``counts`` (shape (k,)) against intended ``weights``.

    ``weights`` are normalised to sum 1 (percent or fractions both work). Arms with weight 0
    are left out unless they received assignments, which is a certain mismatch (statistic inf,
    p-value 0). With no assignments the statistic and p-value are None (unknown, not 0).
    Source: Pearson's goodness-of-fit test (scipy.stats.chisquare), reference section 2.4.

    Raises ValueError for invalid counts/weights or a threshold outside (0, 1).
    """
    if not 0.0 < threshold < 1.0:
        raise ValueError(f"threshold must be in (0, 1), got {threshold}")
    n, p0 = _validate(counts, weights)
    total = int(n.sum())
    expected = tuple(float(x) for x in p0 * total)
    observed = tuple(int(x) for x in n)
    live = p0 > 0
    df = int(live.sum()) - 1
    if total == 0:
        return SrmChiSquareResult(None, None, df, observed, expected, threshold, False)
    if np.any(n[~live] > 0):
        return SrmChiSquareResult(math.inf, 0.0, df, observed, expected, threshold, True)
    if df < 1:
        return SrmChiSquareResult(0.0, 1.0, df, observed, expected, threshold, False)
    res = stats.chisquare(n[live], p0[live] * total)
    pvalue = float(res.pvalue)
    return SrmChiSquareResult(
        float(res.statistic), pvalue, df, observed, expected, threshold, pvalue < threshold
    )


def srm_log_e_value(
    counts: ArrayLike, weights: ArrayLike, *, concentration: float = 100.0
) -> float:
    """Log Dirichlet-multinomial e-value of ``counts`` (shape (k,)) against ``weights``.

    Prior ``a_i = concentration * p0_i`` (centred on the intended split; reference section 2.4
    suggests ``a_i = 1`` or ``a_i`` proportional to ``p0_i``). Computed with ``lgamma``. Arms with
    weight 0 are dropped unless they have counts, which gives ``+inf``.

    Raises ValueError for invalid counts/weights or a non-positive concentration.
    """
    if not concentration > 0:
        raise ValueError(f"concentration must be positive, got {concentration}")
    n, p0 = _validate(counts, weights)
    live = p0 > 0
    if np.any(n[~live] > 0):
        return math.inf
    n, p0 = n[live], p0[live]
    if n.size < 2 or n.sum() == 0:
        return 0.0
    a = concentration * p0
    total = float(n.sum())
    log_mixture = (
        special.gammaln(a.sum())
        - special.gammaln(a.sum() + total)
        + float(np.sum(special.gammaln(a + n) - special.gammaln(a)))
    )
    return float(log_mixture - float(np.sum(n * np.log(p0))))


def srm_sequential(
    segments: Sequence[tuple[ArrayLike, ArrayLike]],
    *,
    alpha: float = SRM_PVALUE_THRESHOLD,
    concentration: float = 100.0,
) -> SrmSequentialResult:
    """Anytime-valid SRM gate over rollout segments ``[(counts, weights), ...]``.

    Each segment (one rollout step, constant intended weights) contributes its
    Dirichlet-multinomial e-value; the product is tested against ``1/alpha`` (Ville's
    inequality). ``pvalue = min(1, 1/E)``. No segments or no assignments -> E = 1.

    Raises ValueError for invalid segments or alpha outside (0, 1).
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    log_e = 0.0
    n_total = 0
    for counts, weights in segments:
        log_e += srm_log_e_value(counts, weights, concentration=concentration)
        n_total += int(np.asarray(counts).sum())
    e_value = math.exp(min(log_e, 700.0))
    pvalue = min(1.0, math.exp(-log_e)) if log_e > -700.0 else 1.0
    return SrmSequentialResult(
        e_value=e_value,
        log_e_value=log_e,
        pvalue=pvalue,
        alpha=alpha,
        mismatch=log_e >= math.log(1.0 / alpha),
        n=n_total,
    )
