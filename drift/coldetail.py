"""What a stored drift result keeps beside its test: effect size, PSI, window summaries and a
histogram of counts (:func:`column_detail`), for the API and the dashboard.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.spatial.distance import jensenshannon

from drift.colwindow import ColumnWindow, Prepared, check_counts, distinct_sorted, prepare, shares
from drift.distances import (
    MAX_UNBINNED_VALUES,
    normed_wasserstein_sorted,
    psi_test,
    smooth_shares,
)
from drift.twosample import DriftResult


@dataclass(frozen=True, slots=True)
class ColumnDetail:
    """What a stored result keeps beside the test: effect size, PSI, summaries, histogram.

    Attributes:
        effect_size: normed Wasserstein (numerical), Jensen–Shannon distance base 2
            (categorical), rate difference current − reference (two categories {False, True}),
            AUC − 0.5 / centroid distance (embedding); ``None`` when a window is empty.
        effect_kind: name of that effect size.
        psi: population stability index over the same bins (``None`` for embeddings / empty).
        reference_summary, current_summary: ``{"n", "mean", "p50", "p95"}`` for numbers,
            ``{"n", "shares": {category: share}}`` (plus ``"rate"`` for booleans) otherwise.
        histogram: ``{"type": "bins", "edges", "reference", "current"}`` (counts per bin) or
            ``{"type": "categories", "categories", "reference", "current"}``; ``None`` when a
            window is empty or for embeddings.
    """

    effect_size: float | None
    effect_kind: str | None
    psi: float | None
    reference_summary: dict[str, Any]
    current_summary: dict[str, Any]
    histogram: dict[str, Any] | None


def _num_summary(x: NDArray[np.float64]) -> dict[str, Any]:
    if x.size == 0:
        return {"n": 0, "mean": None, "p50": None, "p95": None}
    p50, p95 = np.quantile(x, [0.5, 0.95])
    return {"n": int(x.size), "mean": float(x.mean()), "p50": float(p50), "p95": float(p95)}


def _cat_summary(counts: Mapping[Hashable, int]) -> dict[str, Any]:
    n = sum(counts.values())
    out: dict[str, Any] = {
        "n": n,
        "shares": {str(k): v / n for k, v in sorted(counts.items(), key=lambda kv: str(kv[0]))}
        if n
        else {},
    }
    if set(counts) <= {True, False}:
        out["rate"] = counts.get(True, 0) / n if n else None
    return out


def column_detail(
    w: ColumnWindow, result: DriftResult, prepared: Prepared | None = None
) -> ColumnDetail:
    """Effect size, PSI, window summaries and histogram of one column (see :class:`ColumnDetail`).

    Numbers are binned as :func:`drift.distances.binned_shares` does (Sturges edges over
    reference ∪ current when the reference has more than 20 distinct values, one bin per value
    otherwise); categories keep one bin each. Histograms hold counts, not shares.

    Raises ValueError for malformed windows (as :func:`column_report`).

    Sources: Evidently ``wasserstein_distance_norm`` / ``psi_stattest`` / ``get_binned_data``
    (reference notes §1.1).
    """
    if w.kind == "embedding":
        stat = result.statistic
        if result.method == "classifier_auc":
            effect = None if stat is None else stat - 0.5
            return ColumnDetail(effect, "auc_above_chance", None, {}, {}, None)
        return ColumnDetail(stat, "centroid_distance", None, {}, {}, None)
    if w.kind == "numerical":
        prep = prepare(w) if prepared is None else prepared
        ref, cur = prep.ref, prep.cur
        rs, cs = _num_summary(ref), _num_summary(cur)
        if ref.size == 0 or cur.size == 0:
            return ColumnDetail(None, "normed_wasserstein", None, rs, cs, None)
        if result.method == "wasserstein" and result.statistic is not None:
            wd: float | None = result.statistic
        else:
            # = wasserstein_test(...).statistic; the merge from the window's one sort
            wd = normed_wasserstein_sorted(ref, cur, order=prep.order, merged=prep.merged)
        if prep.ref_distinct > MAX_UNBINNED_VALUES:
            # binned_shares' Sturges edges over ref ∪ cur, counted with one searchsorted each
            lo, hi = min(ref[0], cur[0]), max(ref[-1], cur[-1])
            width = (hi - lo) / (np.log2(ref.size + cur.size) + 1.0)  # numpy's "sturges"
            edges = np.linspace(lo, hi, int(np.ceil((hi - lo) / width)) + 1)
            r_counts = np.diff(
                np.searchsorted(ref, edges[1:-1], side="left"), prepend=0, append=ref.size
            )
            c_counts = np.diff(
                np.searchsorted(cur, edges[1:-1], side="left"), prepend=0, append=cur.size
            )
            hist: dict[str, Any] = {
                "type": "bins",
                "edges": edges.tolist(),
                "reference": r_counts.astype(int).tolist(),
                "current": c_counts.astype(int).tolist(),
            }
            r_sm = smooth_shares(r_counts / ref.size)
            c_sm = smooth_shares(c_counts / cur.size)
            psi: float | None = float(np.sum((r_sm - c_sm) * np.log(r_sm / c_sm)))
        else:
            psi = psi_test(ref, cur, categorical=False, min_samples=1).statistic
            values = np.union1d(distinct_sorted(ref), distinct_sorted(cur))
            hist = {
                "type": "categories",
                "categories": values.tolist(),
                "reference": np.bincount(np.searchsorted(values, ref), minlength=values.size)
                .astype(int)
                .tolist(),
                "current": np.bincount(np.searchsorted(values, cur), minlength=values.size)
                .astype(int)
                .tolist(),
            }
        return ColumnDetail(wd, "normed_wasserstein", psi, rs, cs, hist)
    rc_ = check_counts(w.reference_counts, "reference_counts")
    cc_ = check_counts(w.current_counts, "current_counts")
    rs, cs = _cat_summary(rc_), _cat_summary(cc_)
    if not rc_ or not cc_:
        return ColumnDetail(None, "jensenshannon", None, rs, cs, None)
    cats, r, c = shares(rc_, cc_)
    rsm, csm = smooth_shares(r), smooth_shares(c)
    psi_v = float(np.sum((rsm - csm) * np.log(rsm / csm)))
    hist = {
        "type": "categories",
        "categories": [str(k) if not isinstance(k, bool | int | float) else k for k in cats],
        "reference": [rc_.get(k, 0) for k in cats],
        "current": [cc_.get(k, 0) for k in cats],
    }
    if set(rc_) | set(cc_) <= {True, False}:
        return ColumnDetail(cs["rate"] - rs["rate"], "rate_difference", psi_v, rs, cs, hist)
    js = float(jensenshannon(r, c, base=2))
    js = 0.0 if not math.isfinite(js) else max(js, 0.0)
    return ColumnDetail(js, "jensenshannon", psi_v, rs, cs, hist)
