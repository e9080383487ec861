"""Drift report: the selected test per signal × segment, FDR control, dataset-level share.

:func:`drift_report` takes, for each signal (× segment), the reference and current columns as
they come out of the store (``None`` / NaN = unknown), drops and counts the nulls, picks a test
by type and size the way Evidently does (:func:`select_test`), runs it, applies
Benjamini–Hochberg across every p-value test of the report, and summarises the share of
drifted signals over the *evaluated* ones only. Pure: no I/O, randomness only through ``rng``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from drift.distances import jensen_shannon_test, psi_test, wasserstein_test
from drift.embeddings import classifier_two_sample_test, mean_embedding_distance_test
from drift.multitest import benjamini_hochberg
from drift.thresholds import CalibratedThreshold, apply_calibrated
from drift.twosample import (
    DEFAULT_MIN_SAMPLES,
    DriftResult,
    chi_square_test,
    ks_test,
    numeric_window,
    proportion_z_test,
)

Kind = Literal["numerical", "categorical", "embedding"]
KINDS: tuple[str, ...] = ("numerical", "categorical", "embedding")
METHODS: tuple[str, ...] = (
    "ks",
    "chisquare",
    "z",
    "wasserstein",
    "jensenshannon",
    "psi",
    "classifier_auc",
    "mean_embedding_distance",
)
# Evidently switches from p-value tests to distances above this many reference rows.
LARGE_REFERENCE = 1000
DEFAULT_FDR_Q = 0.05
DEFAULT_DRIFT_SHARE = 0.5


@dataclass(frozen=True, slots=True)
class SignalWindow:
    """Reference and current values of one signal in one segment.

    Attributes:
        signal: signal name, e.g. ``"ttft_s"``, ``"finish_reason"``, ``"prompt_embedding"``.
        kind: ``"numerical"`` (numbers in the signal's unit), ``"categorical"`` (hashables,
            bools for rates such as refusal) or ``"embedding"`` (equal-length float vectors).
        reference: values of the reference window; ``None`` / NaN are nulls.
        current: values of the current window; same conventions.
        segment: segment label (e.g. ``"model=gpt-4o"``) or ``None`` for all traffic.
        method: force a test (one of :data:`METHODS`) instead of :func:`select_test`.
        threshold: override the test's default threshold (α or distance).
        calibration: a noise-calibrated threshold (:mod:`drift.thresholds`) for this test;
            the result is then decided by it and excluded from the BH family.
    """

    signal: str
    kind: Kind
    reference: Sequence[Any]
    current: Sequence[Any]
    segment: str | None = None
    method: str | None = None
    threshold: float | None = None
    calibration: CalibratedThreshold | None = None


@dataclass(frozen=True, slots=True)
class SignalResult:
    """Outcome for one signal × segment.

    Attributes:
        signal, segment, kind: as in the input ``SignalWindow``.
        result: the test result; for p-value tests in the BH family ``result.drifted`` is the BH
            decision and ``result.threshold`` the FDR level q.
        n_reference_null, n_current_null: nulls dropped from each window.
        adjusted_pvalue: BH-adjusted p-value, ``None`` outside the BH family.
        unadjusted_drifted: the test's own verdict before BH (``None`` = no verdict).
    """

    signal: str
    segment: str | None
    kind: Kind
    result: DriftResult
    n_reference_null: int
    n_current_null: int
    adjusted_pvalue: float | None
    unadjusted_drifted: bool | None

    @property
    def drifted(self) -> bool | None:
        """Final verdict (``None`` when there was not enough data)."""
        return self.result.drifted


@dataclass(frozen=True, slots=True)
class DriftReport:
    """All signal results plus the dataset-level summary.

    Attributes:
        results: one ``SignalResult`` per input window, in input order.
        n_evaluated: results with a verdict (not ``insufficient_data``).
        n_drifted: evaluated results that drifted.
        drift_share: ``n_drifted / n_evaluated``; ``None`` when nothing was evaluated.
        drift_share_threshold: dataset drifts when ``drift_share >= drift_share_threshold``.
        dataset_drifted: that verdict, ``None`` when nothing was evaluated.
        fdr_q: BH level used, ``None`` when no correction was applied.
    """

    results: tuple[SignalResult, ...]
    n_evaluated: int
    n_drifted: int
    drift_share: float | None
    drift_share_threshold: float
    dataset_drifted: bool | None
    fdr_q: float | None

    def get(self, signal: str, segment: str | None = None) -> SignalResult:
        """The result for ``signal`` in ``segment``. Raises KeyError when absent."""
        for r in self.results:
            if r.signal == signal and r.segment == segment:
                return r
        raise KeyError((signal, segment))

    def share_by_segment(self) -> dict[str | None, float | None]:
        """Drift share per segment over that segment's evaluated signals (``None`` if none)."""
        out: dict[str | None, float | None] = {}
        for seg in dict.fromkeys(r.segment for r in self.results):
            ev = [r for r in self.results if r.segment == seg and not r.result.insufficient_data]
            out[seg] = sum(bool(r.drifted) for r in ev) / len(ev) if ev else None
        return out


def _is_null(v: Any) -> bool:
    if v is None:
        return True
    if isinstance(v, float | np.floating):
        return math.isnan(float(v))
    return False


def drop_nulls(values: Sequence[Any]) -> tuple[list[Any], int]:
    """Remove ``None`` and NaN; return (kept values in order, number removed)."""
    kept = [v for v in values if not _is_null(v)]
    return kept, len(values) - len(kept)


def select_test(
    kind: Kind, reference: Sequence[Any], current: Sequence[Any], *, large_n: int = LARGE_REFERENCE
) -> str:
    """Default test for a column, by type and size (nulls already dropped).

    | kind | n_ref ≤ large_n | n_ref > large_n |
    |---|---|---|
    | numerical, ≤ 5 unique values in ref ∪ cur | chisquare if > 2 unique, else z | jensenshannon |
    | numerical, > 5 unique | ks | wasserstein (normed) |
    | categorical | chisquare if > 2 unique, else z | jensenshannon |
    | embedding | classifier_auc | classifier_auc |

    Raises ValueError for an unknown ``kind``.

    Source: Evidently ``legacy/calculations/stattests/registry.py::_get_default_stattest``
    (reference notes §1.1); embeddings: classifier with a permutation null at every size
    (Evidently switches to a fixed AUC > 0.55 above 1000 rows; the permutation null stays valid).
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if kind == "embedding":
        return "classifier_auc"  # before hashing: vectors are not hashable
    n_unique = len(set(reference) | set(current))
    small = len(reference) <= large_n
    if kind == "numerical" and n_unique > 5:
        return "ks" if small else "wasserstein"
    if not small:
        return "jensenshannon"
    return "chisquare" if n_unique > 2 else "z"


def _indicator(reference: list[Any], current: list[Any]) -> tuple[list[float], list[float]]:
    """Map a two-valued column to 0/1 (1 = True / 1 / the larger category) for the z-test."""
    values = set(reference) | set(current)
    if len(values) > 2:
        raise ValueError(f"the z-test needs at most 2 distinct values, got {len(values)}")
    if values <= {0, 1}:  # bools and 0/1 numbers
        return [float(v) for v in reference], [float(v) for v in current]
    try:
        top = max(values)
    except TypeError:  # mixed types: any fixed choice works for a two-sided test
        top = max(values, key=str)
    return [float(v == top) for v in reference], [float(v == top) for v in current]


def run_test(
    method: str,
    kind: Kind,
    reference: list[Any],
    current: list[Any],
    *,
    threshold: float | None = None,
    min_samples: int = DEFAULT_MIN_SAMPLES,
    rng: np.random.Generator | None = None,
) -> DriftResult:
    """Run one named test on null-free windows.

    Args:
        method: one of :data:`METHODS`.
        kind: the column kind (decides binning for jensenshannon / psi).
        reference, current: values without nulls.
        threshold: α for p-value tests, distance threshold otherwise; ``None`` = the test's
            default (α 0.05, distance 0.1).
        min_samples: minimum values per window for a verdict.
        rng: required by the embedding tests.

    Returns:
        The test's ``DriftResult``.

    Raises:
        ValueError: unknown method, a method that does not fit the data, or ``rng`` missing for
            an embedding test.
    """
    kw: dict[str, Any] = {"min_samples": min_samples}
    if method in ("ks", "chisquare", "z", "classifier_auc", "mean_embedding_distance"):
        if threshold is not None:
            kw["alpha"] = threshold
    elif method in ("wasserstein", "jensenshannon", "psi"):
        if threshold is not None:
            kw["threshold"] = threshold
    else:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if method in ("classifier_auc", "mean_embedding_distance"):
        if rng is None:
            raise ValueError(f"rng is required for the {method} test")
        fn: Callable[..., DriftResult] = (
            classifier_two_sample_test
            if method == "classifier_auc"
            else mean_embedding_distance_test
        )
        rows = [*reference, *current]
        width = int(np.asarray(rows[0]).size) if rows else 1

        def matrix(vectors: list[Any]) -> np.ndarray:
            if not vectors:  # an empty window still has the other window's width
                return np.zeros((0, width))
            return np.vstack([np.asarray(v, dtype=np.float64).ravel() for v in vectors])

        return fn(matrix(reference), matrix(current), rng=rng, **kw)
    if method == "z":
        ref_z, cur_z = _indicator(reference, current)
        return proportion_z_test(ref_z, cur_z, **kw)
    if method == "ks":
        return ks_test(reference, current, **kw)
    if method == "chisquare":
        return chi_square_test(reference, current, **kw)
    if method == "wasserstein":
        return wasserstein_test(reference, current, **kw)
    categorical = kind != "numerical"
    if method == "jensenshannon":
        return jensen_shannon_test(reference, current, categorical=categorical, **kw)
    return psi_test(reference, current, categorical=categorical, **kw)


def drift_report(
    windows: Sequence[SignalWindow],
    *,
    min_samples: int = DEFAULT_MIN_SAMPLES,
    fdr_q: float | None = DEFAULT_FDR_Q,
    drift_share: float = DEFAULT_DRIFT_SHARE,
    large_n: int = LARGE_REFERENCE,
    rng: np.random.Generator | None = None,
) -> DriftReport:
    """Test every signal × segment and summarise.

    Steps per window: drop and count nulls; pick the test (``window.method`` or
    :func:`select_test`); below ``min_samples`` non-null values in either window the result is
    ``insufficient_data`` (no verdict, not counted). Then, when ``fdr_q`` is set,
    Benjamini–Hochberg at level ``fdr_q`` re-decides every evaluated p-value result without a
    calibrated threshold (distance tests keep their own thresholds). Finally
    ``drift_share = n_drifted / n_evaluated`` over evaluated results only (``None`` when none:
    never NaN, never a division by zero; case 19 gives 0 of 1).

    Args:
        windows: the signals × segments to test; (signal, segment) pairs must be unique.
        min_samples: minimum non-null values per window (case 19: 30).
        fdr_q: BH false discovery rate across the report, or ``None`` for per-test α.
        drift_share: dataset-level drift when the share of drifted signals ≥ this
            (Evidently ``drift_share`` default 0.5).
        large_n: reference size above which distance tests are selected.
        rng: needed when an embedding window is present.

    Returns:
        ``DriftReport``.

    Raises:
        ValueError: duplicate (signal, segment), an unknown kind/method, bad parameters, or a
            value that does not fit its kind (e.g. text in a numerical column).

    Sources: Evidently ``get_dataset_drift`` (share of drifted columns); Benjamini & Hochberg
    (1995) via :func:`drift.multitest.benjamini_hochberg`.
    """
    check_report_params(min_samples, fdr_q, drift_share)
    seen: set[tuple[str, str | None]] = set()
    raw: list[tuple[SignalWindow, DriftResult, int, int]] = []
    for w in windows:
        key = (w.signal, w.segment)
        if key in seen:
            raise ValueError(f"windows contains {key!r} twice")
        seen.add(key)
        if w.kind not in KINDS:
            raise ValueError(f"windows[{w.signal!r}].kind must be one of {KINDS}, got {w.kind!r}")
        ref, ref_nulls = drop_nulls(w.reference)
        cur, cur_nulls = drop_nulls(w.current)
        if w.kind == "numerical":  # reject text in a number column before any selection
            ref = numeric_window(ref, "reference").tolist()
            cur = numeric_window(cur, "current").tolist()
        method = w.method or select_test(w.kind, ref, cur, large_n=large_n)
        res = run_test(
            method, w.kind, ref, cur, threshold=w.threshold, min_samples=min_samples, rng=rng
        )
        if w.calibration is not None:
            res = apply_calibrated(res, w.calibration)
        raw.append((w, res, ref_nulls, cur_nulls))

    return assemble_report(raw, fdr_q=fdr_q, drift_share=drift_share)


def assemble_report(
    raw: Sequence[tuple[Any, DriftResult, int, int]],
    *,
    fdr_q: float | None,
    drift_share: float,
) -> DriftReport:
    """Benjamini-Hochberg across every p-value result of ``raw`` ((window, result, reference
    nulls, current nulls) per signal x segment), then the dataset-level drift share over
    evaluated results only (Evidently's DatasetDriftMetric; never NaN: None when nothing was
    evaluated). Shared by :func:`drift_report` and :func:`drift.columnar.column_report`.
    """
    family = [
        i
        for i, (_, res, _, _) in enumerate(raw)
        if fdr_q is not None and res.score_kind == "pvalue" and res.pvalue is not None
    ]
    adjusted: dict[int, tuple[bool, float]] = {}
    if fdr_q is not None and family:
        bh = benjamini_hochberg([raw[i][1].pvalue for i in family], q=fdr_q)
        for j, i in enumerate(family):
            adjusted[i] = (bool(bh.rejected[j]), float(bh.adjusted[j]))  # type: ignore[arg-type]

    results: list[SignalResult] = []
    for i, (w, res, ref_nulls, cur_nulls) in enumerate(raw):
        final, adj = res, None
        if i in adjusted and fdr_q is not None:
            rejected, adj = adjusted[i]
            final = dataclasses.replace(res, drifted=rejected, threshold=fdr_q)
        results.append(
            SignalResult(w.signal, w.segment, w.kind, final, ref_nulls, cur_nulls, adj, res.drifted)
        )
    evaluated = [r for r in results if not r.result.insufficient_data]
    n_drifted = sum(bool(r.drifted) for r in evaluated)
    share = n_drifted / len(evaluated) if evaluated else None
    return DriftReport(
        results=tuple(results),
        n_evaluated=len(evaluated),
        n_drifted=n_drifted,
        drift_share=share,
        drift_share_threshold=drift_share,
        dataset_drifted=None if share is None else share >= drift_share,
        fdr_q=fdr_q,
    )


def check_report_params(min_samples: int, fdr_q: float | None, drift_share: float) -> None:
    """Check a report's parameters (:func:`drift_report`, :func:`drift.columnar`'s reports).

    Raises:
        ValueError: ``min_samples`` < 1, ``fdr_q`` outside (0, 1) and not None, or
            ``drift_share`` outside (0, 1]; the message names the parameter.
    """
    if min_samples < 1:
        raise ValueError(f"min_samples must be >= 1, got {min_samples!r}")
    if fdr_q is not None and not 0 < fdr_q < 1:
        raise ValueError(f"fdr_q must be in (0, 1) or None, got {fdr_q!r}")
    if not 0 < drift_share <= 1:
        raise ValueError(f"drift_share must be in (0, 1], got {drift_share!r}")
