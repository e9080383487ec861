"""The column path of a drift run equals drift.report on the same data (cases 18/19 included)."""

from __future__ import annotations

import dataclasses
import json
import math
from collections import Counter
from typing import Any

import numpy as np
import pytest

from drift.columnar import ColumnWindow, column_detail, column_report, evaluate_columns
from drift.report import SignalWindow, drift_report
from tests.support.fixtures import CASES


def _column(w: SignalWindow) -> ColumnWindow:
    """The same window in the column representation (NaN / null counts)."""
    if w.kind == "numerical":
        ref = np.array([np.nan if v is None else v for v in w.reference], dtype=np.float64)
        cur = np.array([np.nan if v is None else v for v in w.current], dtype=np.float64)
        return ColumnWindow(w.signal, "numerical", w.segment, reference=ref, current=cur)
    ref_c = Counter(v for v in w.reference if v is not None)
    cur_c = Counter(v for v in w.current if v is not None)
    return ColumnWindow(
        w.signal,
        "categorical",
        w.segment,
        reference_counts=ref_c,
        current_counts=cur_c,
        reference_nulls=sum(v is None for v in w.reference),
        current_nulls=sum(v is None for v in w.current),
    )


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return bool(a == b)


def _assert_equal_reports(windows: list[SignalWindow], **kw: Any) -> None:
    expected = drift_report(windows, **kw)
    got = column_report([_column(w) for w in windows], **kw)
    assert (got.n_evaluated, got.n_drifted, got.dataset_drifted) == (
        expected.n_evaluated,
        expected.n_drifted,
        expected.dataset_drifted,
    )
    assert got.drift_share == expected.drift_share
    for e, g in zip(expected.results, got.results, strict=True):
        assert (g.signal, g.segment, g.n_reference_null, g.n_current_null) == (
            e.signal,
            e.segment,
            e.n_reference_null,
            e.n_current_null,
        )
        assert g.unadjusted_drifted == e.unadjusted_drifted
        assert _same(g.adjusted_pvalue, e.adjusted_pvalue)
        for field in ("method", "score_kind", "threshold", "drifted", "n_reference", "n_current"):
            assert getattr(g.result, field) == getattr(e.result, field), (e.signal, field)
        assert g.result.insufficient_data == e.result.insufficient_data
        assert g.result.unseen_categories == e.result.unseen_categories
        for field in ("statistic", "pvalue"):
            ev, gv = getattr(e.result, field), getattr(g.result, field)
            assert (ev is None) == (gv is None) and (ev is None or _same(gv, ev)), (e.signal, field)


def test_case18_constant_windows_same_as_report() -> None:
    case = json.loads((CASES / "18_drift_constant_values.json").read_text())
    for scenario in case["scenarios"].values():
        windows = [
            SignalWindow(name, col["type"], col["reference"], col["current"])
            for name, col in scenario["columns"].items()
        ]
        _assert_equal_reports(windows)


@pytest.mark.parametrize(
    "scenario,drifted", [("A_identical_constants", False), ("B_different_constants", True)]
)
def test_case18_verdicts_through_columns(scenario: str, drifted: bool) -> None:
    case = json.loads((CASES / "18_drift_constant_values.json").read_text())
    cols = case["scenarios"][scenario]["columns"]
    sw = [SignalWindow(n, c["type"], c["reference"], c["current"]) for n, c in cols.items()]
    report = column_report([_column(w) for w in sw])
    for r in report.results:
        assert r.result.statistic is not None and math.isfinite(r.result.statistic)
        assert r.drifted is drifted
    # the KS test named by EXPECTED.md: statistic 0 / p 1 (A), statistic 1 (B)
    ks = column_report([dataclasses.replace(_column(sw[0]), method="ks")]).results[0].result
    assert ks.statistic == (1.0 if drifted else 0.0) and ks.drifted is drifted
    for w in sw:
        col = _column(w)
        d = column_detail(col, report.get(w.signal).result)
        assert d.psi is not None and math.isfinite(d.psi)
        assert (d.psi == 0.0) is (not drifted)
        assert d.effect_size is not None and math.isfinite(d.effect_size)


def test_case19_empty_null_and_tiny_windows() -> None:
    case = json.loads((CASES / "19_drift_empty_window.json").read_text())
    windows = [
        SignalWindow(name, col["type"], col["reference"], col["current"])
        for name, col in case["columns"].items()
    ]
    _assert_equal_reports(windows, min_samples=case["min_samples_per_window"])
    report = column_report(
        [_column(w) for w in windows], min_samples=case["min_samples_per_window"]
    )
    for name in ("ttft_seconds", "output_tokens", "tiny_window"):
        r = report.get(name).result
        assert r.insufficient_data and r.drifted is None and r.pvalue is None
    assert report.get("e2e_seconds").result.drifted is False
    assert (report.n_evaluated, report.n_drifted, report.drift_share) == (1, 0, 0.0)
    detail = column_detail(_column(windows[0]), report.get("ttft_seconds").result)
    assert detail.histogram is None and detail.effect_size is None  # empty current window


@pytest.mark.parametrize("n_ref", [200, 5000])
def test_random_mixed_windows_same_as_report(n_ref: int) -> None:
    rng = np.random.default_rng(n_ref)
    windows: list[SignalWindow] = []
    for seg in ("a", "b"):
        shift = 0.3 if seg == "b" else 0.0
        ref = rng.lognormal(size=n_ref).tolist()
        cur = (rng.lognormal(size=400) + shift).tolist()
        ref[::17] = [None] * len(ref[::17])
        windows.append(SignalWindow("latency", "numerical", ref, cur, segment=seg))
        windows.append(
            SignalWindow(
                "tokens5",
                "numerical",
                rng.integers(0, 5, n_ref).astype(float).tolist(),
                rng.integers(0, 5, 400).astype(float).tolist(),
                segment=seg,
            )
        )
        fr = ["stop", "length", "tool_calls"]
        windows.append(
            SignalWindow(
                "finish_reason",
                "categorical",
                [*rng.choice(fr, n_ref, p=[0.8, 0.15, 0.05]).tolist(), None],
                [*rng.choice([*fr, "content_filter"], 400).tolist(), None, None],
                segment=seg,
            )
        )
        windows.append(
            SignalWindow(
                "refusal",
                "categorical",
                (rng.random(n_ref) < 0.05).tolist(),
                (rng.random(400) < 0.05 + shift / 3).tolist(),
                segment=seg,
            )
        )
    _assert_equal_reports(windows)
    _assert_equal_reports(windows, fdr_q=None)


def test_details_histograms_and_effects() -> None:
    rng = np.random.default_rng(3)
    num = ColumnWindow(
        "e2e_s",
        "numerical",
        reference=rng.normal(10, 1, 2000),
        current=rng.normal(10.5, 1, 2000),
    )
    res = column_report([num]).results[0].result
    d = column_detail(num, res)
    assert d.effect_kind == "normed_wasserstein" and d.effect_size == pytest.approx(res.statistic)
    assert d.histogram is not None and d.histogram["type"] == "bins"
    assert sum(d.histogram["reference"]) == 2000 and sum(d.histogram["current"]) == 2000
    assert len(d.histogram["edges"]) == len(d.histogram["reference"]) + 1
    assert d.reference_summary["mean"] == pytest.approx(10, abs=0.1)
    prop = ColumnWindow(
        "refusal",
        "categorical",
        reference_counts={True: 50, False: 950},
        current_counts={True: 150, False: 850},
    )
    d = column_detail(prop, column_report([prop]).results[0].result)
    assert d.effect_kind == "rate_difference" and d.effect_size == pytest.approx(0.1)
    assert d.histogram == {
        "type": "categories",
        "categories": [False, True],
        "reference": [950, 50],
        "current": [850, 150],
    }
    assert d.psi is not None and d.psi > 0


def test_validation_names_the_parameter() -> None:
    with pytest.raises(ValueError, match="reference_counts"):
        column_report([ColumnWindow("x", "categorical", reference_counts={None: 3})])
    with pytest.raises(ValueError, match="twice"):
        w = ColumnWindow("x", "numerical", reference=np.ones(3), current=np.ones(3))
        column_report([w, w])
    with pytest.raises(ValueError, match="reference"):
        column_report([ColumnWindow("x", "numerical", current=np.ones(3))])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_numeric_bins_and_psi_match_the_core(seed: int) -> None:
    from drift.distances import binned_shares, psi_test

    rng = np.random.default_rng(seed)
    ref = rng.gamma(2.0, 3.0, 1000 + seed * 337)
    cur = rng.gamma(2.2, 3.0, 800)
    w = ColumnWindow("x", "numerical", reference=ref, current=cur)
    report, details = evaluate_columns([w])
    d = details[0]
    r_sh, c_sh, _ = binned_shares(ref, cur, categorical=False)
    assert d.histogram is not None
    assert np.allclose(np.array(d.histogram["reference"]) / ref.size, r_sh)
    assert np.allclose(np.array(d.histogram["current"]) / cur.size, c_sh)
    assert d.psi == pytest.approx(psi_test(ref, cur, categorical=False).statistic)
    assert d == column_detail(w, report.results[0].result)


def test_threaded_evaluation_equals_one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    # drift.columnar.evaluate_columns tests a large run's windows on threads: the same report
    # and details, float for float and in input order, as on one thread (and an error of a
    # malformed window still surfaces)
    import drift.columnar as columnar

    rng = np.random.default_rng(5)
    windows = []
    for seg in range(4):
        ref = rng.gamma(2.0, 1.0, 3_000)
        cur = rng.gamma(2.0, 1.0 + 0.03 * seg, 2_000)
        ref[rng.random(ref.size) < 0.01] = np.nan
        windows.append(
            ColumnWindow("x", "numerical", f"s{seg}", reference=ref, current=cur, ordered=True)
        )
        rc = (rng.random(3_000) < 0.03).astype(np.int64)
        cc = (rng.random(2_000) < 0.03 + 0.01 * seg).astype(np.int64)
        windows.append(
            ColumnWindow(
                "r",
                "categorical",
                f"s{seg}",
                reference_counts={False: int((rc == 0).sum()), True: int((rc == 1).sum())},
                current_counts={False: int((cc == 0).sum()), True: int((cc == 1).sum())},
                reference_codes=rc,
                current_codes=cc,
                categories=(False, True),
            )
        )
    monkeypatch.setattr(columnar, "PARALLEL_MIN_VALUES", 10**12)
    one = evaluate_columns(windows)
    monkeypatch.setattr(columnar, "PARALLEL_MIN_VALUES", 1)
    threaded = evaluate_columns(windows)
    assert repr(threaded) == repr(one)
    assert [r.signal for r in threaded[0].results] == [w.signal for w in windows]
    bad = dataclasses.replace(windows[0], segment="bad", reference=np.array([np.inf, 1.0]))
    with pytest.raises(ValueError, match="finite"):
        evaluate_columns([*windows, bad])
    # windows that arrive later (``more``: the text columns still being built) are tested
    # after the ones at hand, with the same report and details as one list; what ``more``
    # raises is raised, and a duplicate across the two parts is refused
    for parallel in (1, 10**12):
        monkeypatch.setattr(columnar, "PARALLEL_MIN_VALUES", parallel)
        split = evaluate_columns(windows[:5], more=lambda: windows[5:])
        assert repr(split) == repr(one)

    def failing() -> list[ColumnWindow]:
        raise RuntimeError("text read failed")

    with pytest.raises(RuntimeError, match="text read failed"):
        evaluate_columns(windows[:5], more=failing)
    with pytest.raises(ValueError):
        evaluate_columns(windows[:5], more=lambda: windows[4:])
