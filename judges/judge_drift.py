"""Judge drift: has the human − judge gap (the PPI rectifier) moved between two windows?

When the mean of Y − f on recent human labels moves, the judge — not the served model — has
drifted (reference §3.6 "Practical recipe", §5 (iii) and idea 4). The test is Welch's two-sample
t-test on the per-item gaps (``scipy.stats.ttest_ind(equal_var=False)``), reported in the drift
vocabulary of docs/DESIGN.md (``statistic``, ``pvalue``, ``score_kind``, ``threshold``, ``drifted``,
``n_reference``, ``n_current``, ``insufficient_data``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats

from judges.ppi import FloatArray, finite_array


@dataclass(frozen=True)
class JudgeDriftResult:
    """Change of the mean human − judge gap from the reference to the current window.

    ``gap_change`` = gap_current − gap_reference (label units), with its (1 − threshold) Welch
    interval [``ci_low``, ``ci_high``]. ``drifted``: pvalue < threshold; None with
    ``insufficient_data`` (either window under ``min_samples``) or when the test is undefined
    (both windows have zero gap variance), in which case ``pvalue`` is None too.
    """

    statistic: float | None
    pvalue: float | None
    score_kind: Literal["pvalue"]
    threshold: float
    drifted: bool | None
    insufficient_data: bool
    n_reference: int
    n_current: int
    gap_reference: float | None
    gap_current: float | None
    gap_change: float | None
    ci_low: float | None
    ci_high: float | None


def _gaps(
    name: str, human: Sequence[float] | FloatArray, judge: Sequence[float] | FloatArray
) -> FloatArray:
    h = finite_array(f"human_{name}", human, 0)
    j = finite_array(f"judge_{name}", judge, 0)
    if h.size != j.size:
        raise ValueError(f"human_{name} and judge_{name} must have the same length")
    return h - j


def judge_drift(
    human_reference: Sequence[float] | FloatArray,
    judge_reference: Sequence[float] | FloatArray,
    human_current: Sequence[float] | FloatArray,
    judge_current: Sequence[float] | FloatArray,
    *,
    threshold: float = 0.05,
    min_samples: int = 30,
) -> JudgeDriftResult:
    """Welch t-test that the mean human − judge gap differs between the two windows.

    Inputs are paired human labels and judge scores per window (same numeric scale). Raises
    ValueError naming the parameter: unequal lengths within a window, non-finite values,
    ``threshold`` outside (0, 1) or ``min_samples`` < 2.
    """
    if not 0.0 < threshold < 1.0:
        raise ValueError("threshold must be in (0, 1)")
    if min_samples < 2:
        raise ValueError("min_samples must be >= 2")
    ref = _gaps("reference", human_reference, judge_reference)
    cur = _gaps("current", human_current, judge_current)
    n_ref, n_cur = int(ref.size), int(cur.size)
    gap_ref = float(ref.mean()) if n_ref else None
    gap_cur = float(cur.mean()) if n_cur else None
    change = gap_cur - gap_ref if gap_ref is not None and gap_cur is not None else None
    if n_ref < min_samples or n_cur < min_samples:
        return JudgeDriftResult(
            None, None, "pvalue", threshold, None, True, n_ref, n_cur, gap_ref, gap_cur, change,
            None, None,
        )  # fmt: skip
    if np.var(ref) == 0.0 and np.var(cur) == 0.0:
        return JudgeDriftResult(
            None, None, "pvalue", threshold, None, False, n_ref, n_cur, gap_ref, gap_cur, change,
            None, None,
        )  # fmt: skip
    result = stats.ttest_ind(cur, ref, equal_var=False)
    interval = result.confidence_interval(1.0 - threshold)
    pvalue = float(result.pvalue)
    return JudgeDriftResult(
        statistic=float(result.statistic),
        pvalue=pvalue,
        score_kind="pvalue",
        threshold=threshold,
        drifted=pvalue < threshold,
        insufficient_data=False,
        n_reference=n_ref,
        n_current=n_cur,
        gap_reference=gap_ref,
        gap_current=gap_cur,
        gap_change=change,
        ci_low=float(interval.low),
        ci_high=float(interval.high),
    )
