"""Column-oriented drift report: the tests and the run's one multiplicity control over numpy
arrays and category counts (what :func:`drift.runs.run_drift` evaluates).

Windows in time order (``ordered`` numbers, ``reference_codes`` categories) or with judge weights
are tested by the calibrated tests of :mod:`drift.calibrated` (block-calibrated rank test, exact
rate test — for rare proportions also over longer windows ending now, :mod:`drift.ratewindows`
— Hájek z): every production verdict is then a p-value, and
:func:`drift.report.assemble_report` applies one Benjamini–Hochberg step to all of them. Windows
without time order (the list API :func:`drift.report.drift_report`, text samples) keep the
selection table of :mod:`drift.report` (a test asserts both paths agree there); nulls are
dropped with one vectorised mask and the large-window Jensen–Shannon distance is computed from
counts. Per-result details (effect size, PSI, summaries, histograms) are in
:mod:`drift.coldetail`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from scipy.spatial.distance import jensenshannon

from drift import calibrated
from drift.coldetail import ColumnDetail, column_detail
from drift.colwindow import ColumnWindow, Prepared, check_counts, expand, prepare, shares
from drift.distances import MAX_UNBINNED_VALUES
from drift.ratewindows import windowed_rate_test
from drift.report import (
    DEFAULT_DRIFT_SHARE,
    DEFAULT_FDR_Q,
    LARGE_REFERENCE,
    DriftReport,
    Kind,
    assemble_report,
    check_report_params,
    run_test,
)
from drift.twosample import DEFAULT_DISTANCE_THRESHOLD, DEFAULT_MIN_SAMPLES, DriftResult

__all__ = [
    "ColumnDetail",
    "ColumnWindow",
    "column_detail",
    "column_report",
    "evaluate_columns",
    "select_method",
]


def _calibrated(
    w: ColumnWindow,
    min_samples: int,
    rate_lookbacks_s: Sequence[float] = (),
    prepared: Prepared | None = None,
) -> tuple[DriftResult, int, int] | None:
    """The calibrated test of ``w`` when it carries time order / codes / weights, else None
    (``prepared``: its :func:`prepare`, whose sort the block rank test reuses)."""
    if w.method is not None:
        return None
    if w.kind == "numerical" and (w.ordered or w.reference_weights is not None):
        ref = np.asarray(w.reference, dtype=np.float64)
        cur = np.asarray(w.current, dtype=np.float64)
        rk, ck = ~np.isnan(ref), ~np.isnan(cur)
        nulls = int(ref.size - rk.sum()), int(cur.size - ck.sum())
        if w.reference_weights is not None and w.current_weights is not None:
            rw = np.asarray(w.reference_weights, dtype=np.float64)
            cw = np.asarray(w.current_weights, dtype=np.float64)
            res = calibrated.hajek_mean_test(
                ref[rk], cur[ck], rw[rk], cw[ck], min_samples=min_samples
            )
        else:
            order = prepared.order if prepared is not None else None
            res = calibrated.block_rank_test(ref[rk], cur[ck], min_samples=min_samples, order=order)
        return res, *nulls
    if w.kind == "categorical" and w.reference_codes is not None and w.current_codes is not None:
        rc = np.asarray(w.reference_codes, dtype=np.int64)
        cc = np.asarray(w.current_codes, dtype=np.int64)
        ref_c, cur_c = rc[rc >= 0], cc[cc >= 0]
        nulls = int(rc.size - ref_c.size), int(cc.size - cur_c.size)
        cats = w.categories
        if set(cats) <= {True, False}:
            idx = cats.index(True) if True in cats else -2
            if rate_lookbacks_s and w.reference_age_s is not None:
                age = np.asarray(w.reference_age_s, dtype=np.float64)[rc >= 0]
                res = windowed_rate_test(
                    ref_c == idx, cur_c == idx, age, rate_lookbacks_s, min_samples=min_samples
                )
            else:
                res = calibrated.rate_test(ref_c == idx, cur_c == idx, min_samples=min_samples)
        else:
            res = calibrated.categorical_rate_test(ref_c, cur_c, min_samples=min_samples)
            if res.unseen_categories:
                names = tuple(sorted(str(cats[int(i)]) for i in res.unseen_categories))
                res = dataclasses.replace(res, unseen_categories=names)
        return res, *nulls
    return None


def select_method(kind: Kind, n_reference: int, n_unique: int, *, large_n: int) -> str:
    """:func:`drift.report.select_test` from sizes: same table, no pass over the values."""
    if kind == "embedding":
        return "classifier_auc"
    small = n_reference <= large_n
    if kind == "numerical" and n_unique > 5:
        return "ks" if small else "wasserstein"
    if not small:
        return "jensenshannon"
    return "chisquare" if n_unique > 2 else "z"


def _js_from_counts(
    ref: Mapping[Hashable, int], cur: Mapping[Hashable, int], threshold: float, min_samples: int
) -> DriftResult:
    """:func:`drift.distances.jensen_shannon_test` (categorical) computed from counts."""
    n_ref, n_cur = sum(ref.values()), sum(cur.values())
    if n_ref < min_samples or n_cur < min_samples:
        return DriftResult(
            "jensenshannon", None, None, "distance", threshold, None, n_ref, n_cur, True
        )
    _, r, c = shares(ref, cur)
    stat = float(jensenshannon(r, c, base=2))
    stat = 0.0 if not math.isfinite(stat) else max(stat, 0.0)
    unseen = tuple(sorted(str(k) for k in cur if k not in ref))
    return DriftResult(
        "jensenshannon", stat, None, "distance", threshold, stat >= threshold, n_ref, n_cur,
        False, unseen,
    )  # fmt: skip


def _test(
    w: ColumnWindow,
    min_samples: int,
    large_n: int,
    rng: np.random.Generator | None,
    prepared: Prepared | None = None,
    rate_lookbacks_s: Sequence[float] = (),
) -> tuple[DriftResult, int, int]:
    """(result, reference nulls, current nulls) of one window."""
    calibrated_result = _calibrated(w, min_samples, rate_lookbacks_s, prepared)
    if calibrated_result is not None:
        return calibrated_result
    if w.kind == "numerical":
        prep = prepare(w) if prepared is None else prepared
        ref, cur, ref_nulls, cur_nulls = prep.ref, prep.cur, prep.ref_nulls, prep.cur_nulls
        n_unique = prep.union_distinct
        method = w.method or select_method(w.kind, ref.size, n_unique, large_n=large_n)
        if method == "jensenshannon" and n_unique <= MAX_UNBINNED_VALUES:
            # binned_shares uses one bin per value here: the same as counting the values
            rv, rc = np.unique(ref, return_counts=True)
            cv, cc = np.unique(cur, return_counts=True)
            thr = DEFAULT_DISTANCE_THRESHOLD if w.threshold is None else w.threshold
            res = _js_from_counts(
                dict(zip(rv.tolist(), rc.tolist(), strict=True)),
                dict(zip(cv.tolist(), cc.tolist(), strict=True)),
                thr,
                min_samples,
            )
            return dataclasses.replace(res, unseen_categories=()), ref_nulls, cur_nulls
        small = method in ("chisquare", "z")  # small windows: the list path is cheap
        ref_in: Any = ref.tolist() if small else ref
        cur_in: Any = cur.tolist() if small else cur
        res = run_test(
            method, w.kind, ref_in, cur_in, threshold=w.threshold, min_samples=min_samples
        )
        return res, ref_nulls, cur_nulls
    if w.kind == "categorical":
        rc_ = check_counts(w.reference_counts, "reference_counts")
        cc_ = check_counts(w.current_counts, "current_counts")
        n_ref = sum(rc_.values())
        method = w.method or select_method(w.kind, n_ref, len(set(rc_) | set(cc_)), large_n=large_n)
        if method == "jensenshannon":
            thr = DEFAULT_DISTANCE_THRESHOLD if w.threshold is None else w.threshold
            return _js_from_counts(rc_, cc_, thr, min_samples), w.reference_nulls, w.current_nulls
        res = run_test(
            method,
            w.kind,
            expand(rc_),
            expand(cc_),
            threshold=w.threshold,
            min_samples=min_samples,
        )
        return res, w.reference_nulls, w.current_nulls
    if w.kind == "embedding":
        if w.reference is None or w.current is None:
            raise ValueError("reference and current are required for an embedding window")
        method = w.method or "classifier_auc"
        res = run_test(
            method,
            w.kind,
            list(np.asarray(w.reference)),
            list(np.asarray(w.current)),
            threshold=w.threshold,
            min_samples=min_samples,
            rng=rng,
        )
        return res, w.reference_nulls, w.current_nulls
    raise ValueError(f"kind must be numerical, categorical or embedding, got {w.kind!r}")


def _check_unique(windows: Sequence[ColumnWindow]) -> None:
    seen: set[tuple[str, str | None]] = set()
    for w in windows:
        key = (w.signal, w.segment)
        if key in seen:
            raise ValueError(f"windows contains {key!r} twice")
        seen.add(key)


def column_report(
    windows: Sequence[ColumnWindow],
    *,
    min_samples: int = DEFAULT_MIN_SAMPLES,
    fdr_q: float | None = DEFAULT_FDR_Q,
    drift_share: float = DEFAULT_DRIFT_SHARE,
    large_n: int = LARGE_REFERENCE,
    rng: np.random.Generator | None = None,
    rate_lookbacks_s: Sequence[float] = (),
) -> DriftReport:
    """Test every signal × segment and summarise, as :func:`drift.report.drift_report`.

    Args:
        windows: the columns; (signal, segment) pairs must be unique.
        min_samples, fdr_q, drift_share, large_n, rng: as in :func:`drift.report.drift_report`
            (BH at ``fdr_q`` across every p-value result; ``drift_share`` over evaluated ones).
        rate_lookbacks_s: seconds before the current window's start that the longer windows of
            a rare proportion reach back (:func:`drift.ratewindows.windowed_rate_test`, for
            windows with ``reference_age_s``); empty: the current window only.

    Returns:
        ``DriftReport`` equal to ``drift_report`` on the same data written as lists.

    Raises:
        ValueError: duplicate (signal, segment), bad kinds/methods/values or parameters.

    Sources: see :mod:`drift.report` (Evidently selection table, Benjamini & Hochberg 1995).
    """
    check_report_params(min_samples, fdr_q, drift_share)
    _check_unique(windows)
    raw = [(w, *_test(w, min_samples, large_n, rng, None, rate_lookbacks_s)) for w in windows]
    return assemble_report(raw, fdr_q=fdr_q, drift_share=drift_share)


#: numeric values (all numerical windows together) from which :func:`evaluate_columns` tests
#: the windows on :data:`EVALUATION_THREADS` threads (smaller runs: one thread, no pool)
PARALLEL_MIN_VALUES = 200_000
#: threads of a large run's evaluation (numpy's sorts, merges and sums release the GIL)
EVALUATION_THREADS = 2


def _evaluate_one(
    w: ColumnWindow,
    min_samples: int,
    large_n: int,
    rng: np.random.Generator | None,
    rate_lookbacks_s: Sequence[float],
) -> tuple[tuple[DriftResult, int, int], ColumnDetail]:
    """(test result with null counts, detail) of one window, numbers null-filtered and
    sorted once for both (the detail reads only the result's method and statistic, which the
    run's BH step leaves as they are)."""
    prepared = prepare(w) if w.kind == "numerical" else None
    tested = _test(w, min_samples, large_n, rng, prepared, rate_lookbacks_s)
    return tested, column_detail(w, tested[0], prepared)


def evaluate_columns(
    windows: Sequence[ColumnWindow],
    *,
    min_samples: int = DEFAULT_MIN_SAMPLES,
    fdr_q: float | None = DEFAULT_FDR_Q,
    drift_share: float = DEFAULT_DRIFT_SHARE,
    large_n: int = LARGE_REFERENCE,
    rng: np.random.Generator | None = None,
    rate_lookbacks_s: Sequence[float] = (),
    more: Callable[[], Sequence[ColumnWindow]] | None = None,
) -> tuple[DriftReport, tuple[ColumnDetail, ...]]:
    """:func:`column_report` plus :func:`column_detail` of every window, in input order.

    ``more``: windows that follow ``windows``, returned by a function that may still be
    building them (:attr:`drift.signals.Extraction.pending`): it is called once the windows at
    hand are queued on the threads, so they are tested while it runs; the result is that of
    ``evaluate_columns([*windows, *more()])`` (whether threads are used is decided on
    ``windows`` alone; what ``more`` raises is raised).

    Each numerical window is null-filtered and sorted once for both. Windows are independent,
    so a large run (at least :data:`PARALLEL_MIN_VALUES` numeric values) tests them on
    :data:`EVALUATION_THREADS` threads; embedding windows, whose tests draw from ``rng``, are
    tested in input order on the calling thread, so the draws and every result are those of a
    one-thread run. Arguments, return value of the report and errors (the first malformed
    window in input order) as :func:`column_report`.
    """
    check_report_params(min_samples, fdr_q, drift_share)
    windows = list(windows)
    _check_unique(windows)
    args = (min_samples, large_n, rng, rate_lookbacks_s)
    n_values = sum(
        np.size(w.reference) + np.size(w.current)
        for w in windows
        if w.kind == "numerical" and w.reference is not None and w.current is not None
    )
    pool = (
        ThreadPoolExecutor(EVALUATION_THREADS, thread_name_prefix="drift-eval")
        if n_values >= PARALLEL_MIN_VALUES and EVALUATION_THREADS > 1
        else None
    )
    try:
        futures = {
            i: pool.submit(_evaluate_one, w, *args)
            for i, w in enumerate(windows)
            if pool is not None and w.kind != "embedding"
        }
        if more is not None:
            first = len(windows)
            windows = [*windows, *more()]
            _check_unique(windows)
            futures.update(
                (i, pool.submit(_evaluate_one, windows[i], *args))
                for i in range(first, len(windows))
                if pool is not None and windows[i].kind != "embedding"
            )
        done = [
            futures[i].result() if i in futures else _evaluate_one(w, *args)
            for i, w in enumerate(windows)
        ]
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
    raw = [(w, *tested) for w, (tested, _) in zip(windows, done, strict=True)]
    report = assemble_report(raw, fdr_q=fdr_q, drift_share=drift_share)
    return report, tuple(detail for _, detail in done)
