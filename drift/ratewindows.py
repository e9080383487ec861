"""Rare proportions tested over several windows that end now, for power at low volume.

A tripled refusal rate (1 % → 3 %) in one hour of 400 calls is about Poisson(12) events against
4 expected. Within the run's one multiplicity control (Benjamini–Hochberg at q = 0.01 over m
verdicts, so about q/m for a lone changed signal) no valid test of that hour reaches 80 %
power: an exact one-sided test would need a level of ≈ 0.021 (P(Pois(12) ≥ 9) = 0.85 while
P(Pois(4) ≥ 9) = 0.021). The information is not in the hour; it accrues with time. So the rate
test (:func:`drift.calibrated.rate_test`: exact conditional test, overdispersion guard) is run
on the current window **and** on longer windows that end with it — the current window plus the
newest reference calls of the last ``L`` hours, for each configured look-back ``L`` (default
windows of 2 and 3 hours: ``DRIFTLINE_DRIFT_RATE_WINDOWS_HOURS``) — each against the rest of
the reference (never overlapping it), and the p-values are combined by a **weighted Bonferroni**
bound: p = min_w p_w / a_w with weights a_w summing to 1 (the current window keeps
:data:`CURRENT_WEIGHT`, the longer windows share the rest equally). Weighted Bonferroni is valid
under any dependence between the windows (Holm 1979; Genovese, Roeder & Wasserman 2006,
Biometrika 93(3)), and the windows are fixed by the clock before the data are seen, so
P(p ≤ α) ≤ α under no change whenever each window's test is valid.

The longer windows are tested one-sided (a rise: for refusal, empty output, guardrail hits and
thumbs-down a rise is the harm), the current window two-sided (a drop — a guardrail that
stopped firing — is still seen within the hour). The longest default window is 3 hours: the
overdispersion guard measures the daily cycle on blocks of the reference, and a 6-hour window
(against 19 hours of reference, 12 blocks) let a cycle through (P(p ≤ 0.01) ≈ 0.012–0.014 per
test at 400 calls/h under a daily cycle, against 0.009 with 2- and 3-hour windows and 0.006 for
the current hour alone; 6,000 simulated tests each).

The price is **detection delay**, stated rather than hidden: a change is best seen by the run
whose longest window lies entirely after it. Simulated at the defaults (400 calls/h, 1 % → 3 %,
:mod:`drift.simulate`, 300 runs each): the run 1 hour after the change flags it in 0.38 of runs
(the current-window test alone: 0.45), 2 hours after in 0.70 (alone: 0.33), 3 hours after in
0.87 (alone: 0.18: its rolling reference by then holds changed hours), 6 hours after in 0.12
(the change has become part of the reference; the alert resolves). Of hourly runs after a
change, at least one flags it within 1 / 2 / 3 hours in 0.47 / 0.79 / 0.90 of changes (alone:
0.55 / 0.68 / 0.77). At 1,000 calls/h the first run flags it in 0.87 (alone: 0.91). Look-back
windows need a reference that ends where the current window starts; with a pinned or deploy
reference only the current window is tested.

The same idea underlies scan statistics over windows ending now (Naus 1965; Kulldorff 1997,
Commun. Stat. Theory Methods 26(6)), whose Monte Carlo calibration gained no power over this
bound in simulation (the exact tests' discreteness leaves Bonferroni nearly tight), so the
deterministic bound is used.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from drift.calibrated import Alternative, rate_test
from drift.twosample import DriftResult, insufficient

RATE_WINDOWS_METHOD = "rate_exact_windows"
#: share of the level kept by the current window when longer windows are tested too
CURRENT_WEIGHT = 0.4
_ALPHA = 0.05  # display level only; the run's verdicts come from the BH step


def window_weights(n_longer: int) -> tuple[float, ...]:
    """Bonferroni weights (current window first, then each longer window); they sum to 1.

    Raises ValueError when ``n_longer`` < 0.
    """
    if n_longer < 0:
        raise ValueError(f"n_longer must be >= 0, got {n_longer!r}")
    if n_longer == 0:
        return (1.0,)
    return (CURRENT_WEIGHT, *([(1.0 - CURRENT_WEIGHT) / n_longer] * n_longer))


def _ages(reference_age_s: ArrayLike, n: int) -> NDArray[np.float64]:
    age = np.asarray(reference_age_s, dtype=np.float64)
    if age.shape != (n,):
        raise ValueError(f"reference_age_s must have shape ({n},), got {age.shape}")
    if not np.all(np.isfinite(age)) or np.any(age < 0):
        raise ValueError("reference_age_s must hold finite seconds >= 0")
    return age


def windowed_rate_test(
    reference: ArrayLike,
    current: ArrayLike,
    reference_age_s: ArrayLike,
    lookbacks_s: Sequence[float],
    *,
    min_samples: int = 30,
    alternative: Alternative = "two-sided",
    longer_alternative: Alternative = "greater",
) -> DriftResult:
    """:func:`~drift.calibrated.rate_test` on the current window and on longer windows ending
    with it, combined by weighted Bonferroni (module docstring).

    Args:
        reference: shape (n_ref,), 0/1 per call, in time order (oldest first).
        current: shape (n_cur,), 0/1 per call, in time order.
        reference_age_s: shape (n_ref,), seconds from each reference call's start to the start
            of the current window (≥ 0); the reference must end where the current window
            starts.
        lookbacks_s: seconds before the current window's start that each longer window
            reaches back (> 0); empty: the current window alone (plain ``rate_test``).
        min_samples: fewest calls on each side of a window for that window's test; a window
            below it keeps its weight unused. ``insufficient_data`` when no window has enough.
        alternative: of the current window's test, as in :func:`~drift.calibrated.rate_test`
            (default two-sided: a drop, e.g. a guardrail that stopped firing, is seen there).
        longer_alternative: of the longer windows' tests; default ``"greater"``: they exist to
            see a harm build up (refusal, empty output, guardrail hit, thumbs-down rising).

    Returns:
        ``DriftResult`` (method ``rate_exact_windows``; ``rate_exact`` when ``lookbacks_s``
        is empty): ``pvalue`` = min(1, min_w p_w / a_w); ``statistic``, ``n_reference`` and
        ``n_current`` are those of the window that attains the minimum (``n_current`` larger
        than the current window's calls means a longer window decided).

    Raises:
        ValueError: values other than 0/1, shapes, negative or non-finite ages or look-backs,
            ``min_samples`` < 1.
    """
    ref = np.asarray(reference, dtype=np.float64)
    cur = np.asarray(current, dtype=np.float64)
    if ref.ndim != 1:
        raise ValueError(f"reference must have shape (n,), got {ref.shape}")
    age = _ages(reference_age_s, ref.size)
    lbs = [float(x) for x in lookbacks_s]
    if any(not (math.isfinite(x) and x > 0) for x in lbs):
        raise ValueError(f"lookbacks_s must be finite seconds > 0, got {list(lookbacks_s)!r}")
    if not lbs:
        return rate_test(ref, cur, min_samples=min_samples, alternative=alternative)
    weights = window_weights(len(lbs))
    best: tuple[float, DriftResult] | None = None
    for lookback, weight in zip([0.0, *lbs], weights, strict=True):
        moved = age < lookback  # the newest reference calls (empty for the current window)
        res = rate_test(
            ref[~moved],
            np.concatenate([ref[moved], cur]),
            min_samples=min_samples,
            alternative=alternative if lookback == 0.0 else longer_alternative,
        )
        if res.pvalue is None:
            continue
        bound = min(1.0, res.pvalue / weight)
        if best is None or bound < best[0]:
            best = (bound, res)
    if best is None:
        return insufficient(RATE_WINDOWS_METHOD, "pvalue", _ALPHA, ref.size, cur.size)
    p, res = best
    return DriftResult(
        RATE_WINDOWS_METHOD, res.statistic, p, "pvalue", _ALPHA, p < _ALPHA, res.n_reference,
        res.n_current, False,
    )  # fmt: skip
