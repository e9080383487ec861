"""Drift thresholds calibrated on reference noise (NannyML's standard-deviation threshold).

A fixed threshold (p < 0.05, normed Wasserstein ≥ 0.1) ignores how noisy a statistic is at the
window size actually monitored: with small windows a distance exceeds 0.1 by chance, with huge
windows a p-value is tiny for a drift nobody cares about. Calibration asks instead "is this
larger than the chunk-to-chunk variation of the reference itself?": cut the reference into
chunks of the monitoring window's size, compute the statistic of each chunk against the rest of
the reference, and alert above ``mean + k·sd`` of those values
(docs/reference/drift-canary-judge-methods.md §1.2 "Thresholds", §5(i)).

Pure functions; the test is passed in as a callable, so any :mod:`drift.twosample` test works.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from drift.errors import CalibrationError
from drift.twosample import DriftResult

TwoSampleTest = Callable[[Sequence[Any], Sequence[Any]], DriftResult]


@dataclass(frozen=True, slots=True)
class CalibratedThreshold:
    """A noise-calibrated upper threshold for one test on one signal.

    Attributes:
        method: the test's ``DriftResult.method``.
        rule: ``"mean_k_sd"`` (:func:`calibrate_threshold`) or ``"quantile"``
            (:func:`calibrate_quantile_threshold`).
        threshold: the alert level; a window drifts when its score is strictly greater.
        k: the sd multiplier for ``"mean_k_sd"`` (NannyML default 3), else ``None``.
        false_alarm_rate: the per-window budget for ``"quantile"``, else ``None``.
        mean: mean chunk score; sd: sample standard deviation (ddof=1) of the chunk scores.
        chunk_size: rows per chunk; the threshold is valid for current windows of about this
            many rows.
        chunk_scores: the per-chunk scores, in chunk order.
    """

    method: str
    rule: Literal["mean_k_sd", "quantile"]
    threshold: float
    k: float | None
    false_alarm_rate: float | None
    mean: float
    sd: float
    chunk_size: int
    chunk_scores: tuple[float, ...]


def _score(result: DriftResult) -> float:
    """Magnitude that the threshold applies to: |statistic| (the z-test's z is signed)."""
    if result.statistic is None:
        raise CalibrationError(
            f"{result.method} gave no statistic on a reference chunk "
            f"(n={result.n_current}); raise chunk_size above the test's min_samples"
        )
    return abs(result.statistic)


def calibrate_threshold(
    reference: Sequence[Any],
    test: TwoSampleTest,
    *,
    chunk_size: int,
    n_chunks: int = 10,
    k: float = 3.0,
    rng: np.random.Generator | None = None,
) -> CalibratedThreshold:
    """Calibrate a threshold from the test's statistic on reference chunks.

    The reference (in time order) is cut into ``n_chunks`` consecutive chunks of ``chunk_size``
    rows (fewer chunks when the reference is short, at least 2); each chunk is tested against
    the reference rows outside it. Unlike NannyML, which compares a chunk with the whole
    reference including the chunk itself, the rest-of-reference comparison mimics a current
    window that shares no rows with the reference. With ``rng`` the rows are shuffled first,
    which removes the reference's own slow trends from the noise estimate (use only for
    windows that are a random sample, not a time slice).

    Args:
        reference: n_ref values without nulls (numbers, categories or embedding rows).
        test: ``test(reference_part, chunk) -> DriftResult``, e.g.
            ``functools.partial(ks_test, min_samples=30)``.
        chunk_size: rows per chunk, the size of the monitoring window (≥ 1).
        n_chunks: chunks wanted (≥ 2; NannyML's default chunker makes about 10).
        k: multiplier of the standard deviation (> 0; NannyML 3).
        rng: optional shuffling of rows before chunking.

    Returns:
        ``CalibratedThreshold``. A constant reference gives sd 0 and threshold equal to the
        mean (usually 0), so only a strictly larger statistic alarms.

    Raises:
        ValueError: bad ``chunk_size``, ``n_chunks`` or ``k``.
        CalibrationError: fewer than 2 chunks fit into the reference, or the test gives no
            statistic on a chunk (chunk below its ``min_samples``).

    Source: NannyML ``thresholds.py::StandardDeviationThreshold`` (std_lower_multiplier None,
    std_upper_multiplier 3) over ``SizeBasedChunker`` chunks.
    """
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size!r}")
    if n_chunks < 2:
        raise ValueError(f"n_chunks must be >= 2, got {n_chunks!r}")
    if not (math.isfinite(k) and k > 0):
        raise ValueError(f"k must be a finite number > 0, got {k!r}")
    n = len(reference)
    usable = min(n_chunks, n // chunk_size)
    # Each chunk needs a non-empty rest of reference to be compared with.
    if usable * chunk_size >= n:
        usable -= 1
    if usable < 2:
        raise CalibrationError(
            f"reference has {n} rows: fewer than 2 chunks of {chunk_size} plus a remainder"
        )
    order = rng.permutation(n) if rng is not None else np.arange(n)
    rows = list(reference)
    scores: list[float] = []
    method = ""
    for c in range(usable):
        inside = order[c * chunk_size : (c + 1) * chunk_size]
        mask = np.ones(n, dtype=bool)
        mask[inside] = False
        rest = [rows[i] for i in np.flatnonzero(mask)]
        chunk = [rows[i] for i in inside]
        result = test(rest, chunk)
        method = result.method
        scores.append(_score(result))
    arr = np.array(scores)
    mean, sd = float(arr.mean()), float(arr.std(ddof=1))
    return CalibratedThreshold(
        method, "mean_k_sd", mean + k * sd, k, None, mean, sd, chunk_size, tuple(scores)
    )


def calibrate_quantile_threshold(
    reference: Sequence[Any],
    test: TwoSampleTest,
    *,
    chunk_size: int,
    rng: np.random.Generator,
    false_alarm_rate: float = 0.01,
    n_resamples: int = 199,
) -> CalibratedThreshold:
    """Calibrate a threshold as an upper quantile of the statistic on random reference chunks.

    Draws ``n_resamples`` random chunks of ``chunk_size`` reference rows (without replacement
    within a chunk), scores each against the reference rows outside it, and sets the threshold
    to the ``⌈(1 − false_alarm_rate)·(n_resamples + 1)⌉``-th smallest score. If a stationary
    current window's score is exchangeable with the chunk scores, ``P(score > threshold) ≤
    false_alarm_rate`` (the split-conformal quantile argument); unlike ``mean + k·sd`` this
    holds for skewed statistics (Wasserstein on heavy-tailed latencies, JS on rare
    categories), where ``mean + 3·sd`` is exceeded in about 2% of stationary windows. Use it
    when the budget is "at most one false alarm per 1/false_alarm_rate windows".

    Args:
        reference: n_ref values without nulls; needs n_ref > chunk_size.
        test: ``test(reference_part, chunk) -> DriftResult``.
        chunk_size: rows per chunk, the size of the monitoring window (≥ 1).
        rng: source of the random chunks.
        false_alarm_rate: per-window false-alarm budget in (0, 1).
        n_resamples: chunks drawn; at least ``1/false_alarm_rate − 1`` so the quantile exists.

    Returns:
        ``CalibratedThreshold`` with ``rule="quantile"``.

    Raises:
        ValueError: bad parameters, or ``n_resamples`` too small for ``false_alarm_rate``.
        CalibrationError: reference not larger than ``chunk_size``, or no statistic on a chunk.

    Sources: alibi-detect online detectors (thresholds from reference bootstrap simulations,
    ERT = 1/false-alarm rate; reference notes §1.3); Vovk, Gammerman & Shafer (2005) and
    Lei et al. (2018, JASA) for the finite-sample conformal quantile.
    """
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size!r}")
    if not 0 < false_alarm_rate < 1:
        raise ValueError(f"false_alarm_rate must be in (0, 1), got {false_alarm_rate!r}")
    rank = math.ceil((1 - false_alarm_rate) * (n_resamples + 1))
    if rank > n_resamples:
        raise ValueError(
            f"n_resamples must be >= {math.ceil(1 / false_alarm_rate) - 1} "
            f"for false_alarm_rate={false_alarm_rate}, got {n_resamples!r}"
        )
    n = len(reference)
    if n <= chunk_size:
        raise CalibrationError(f"reference has {n} rows, not more than chunk_size={chunk_size}")
    rows = list(reference)
    scores: list[float] = []
    method = ""
    for _ in range(n_resamples):
        inside = rng.choice(n, size=chunk_size, replace=False)
        mask = np.ones(n, dtype=bool)
        mask[inside] = False
        result = test([rows[i] for i in np.flatnonzero(mask)], [rows[i] for i in inside])
        method = result.method
        scores.append(_score(result))
    arr = np.array(scores)
    threshold = float(np.sort(arr)[rank - 1])
    return CalibratedThreshold(
        method,
        "quantile",
        threshold,
        None,
        false_alarm_rate,
        float(arr.mean()),
        float(arr.std(ddof=1)),
        chunk_size,
        tuple(scores),
    )


def apply_calibrated(result: DriftResult, calibration: CalibratedThreshold) -> DriftResult:
    """Re-decide a test result with a calibrated threshold.

    Args:
        result: a result of the same test the threshold was calibrated for.
        calibration: from :func:`calibrate_threshold`.

    Returns:
        A copy with ``score_kind="distance"``, ``threshold=calibration.threshold`` and
        ``drifted = |statistic| > threshold`` (``None`` stays ``None`` for insufficient data).
        The p-value, if the test has one, is kept for information only.

    Raises:
        ValueError: ``result.method`` differs from ``calibration.method``.
    """
    if result.method != calibration.method:
        raise ValueError(f"calibration is for {calibration.method!r}, result is {result.method!r}")
    drifted = None if result.statistic is None else abs(result.statistic) > calibration.threshold
    return dataclasses.replace(
        result, score_kind="distance", threshold=calibration.threshold, drifted=drifted
    )
