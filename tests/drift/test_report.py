"""Drift report: selection, nulls, BH, dataset share, cases 18/19, stationary false alarms."""

from __future__ import annotations

import json
import math
from functools import partial
from typing import Any

import numpy as np
import pytest
from scipy import stats

from drift.report import Kind, SignalWindow, drift_report, run_test, select_test
from drift.thresholds import calibrate_quantile_threshold
from tests.support.fixtures import CASES


def _load(name: str) -> dict[str, Any]:
    with (CASES / name).open() as f:
        data: dict[str, Any] = json.load(f)
    return data


def test_case19_empty_null_and_tiny_windows() -> None:
    case = _load("19_drift_empty_window.json")
    windows = [
        SignalWindow(name, col["type"], col["reference"], col["current"])
        for name, col in case["columns"].items()
    ]
    report = drift_report(windows, min_samples=case["min_samples_per_window"])
    for name in ("ttft_seconds", "output_tokens", "tiny_window"):
        r = report.get(name)
        assert r.result.insufficient_data is True
        assert r.drifted is None and r.result.pvalue is None
    assert report.get("output_tokens").n_current_null == 200
    assert report.get("tiny_window").result.n_current == 3
    e2e = report.get("e2e_seconds").result
    assert e2e.method == "ks"
    assert (e2e.statistic, e2e.pvalue, e2e.drifted) == (0.0, 1.0, False)
    assert (report.n_drifted, report.n_evaluated) == (0, 1)
    assert report.drift_share == 0.0 and report.dataset_drifted is False


def test_nothing_evaluated_gives_none_share_not_nan() -> None:
    report = drift_report([SignalWindow("ttft_s", "numerical", [0.1] * 50, [])])
    assert report.n_evaluated == 0
    assert report.drift_share is None and report.dataset_drifted is None
    assert drift_report([]).drift_share is None


@pytest.mark.parametrize(
    "scenario,drifted", [("A_identical_constants", False), ("B_different_constants", True)]
)
def test_case18_through_the_report(scenario: str, drifted: bool) -> None:
    cols = _load("18_drift_constant_values.json")["scenarios"][scenario]["columns"]
    windows = [SignalWindow(n, c["type"], c["reference"], c["current"]) for n, c in cols.items()]
    report = drift_report(windows)
    for r in report.results:
        assert r.result.method == "z"  # at most two distinct values, n_ref <= 1000
        assert r.result.statistic is not None and math.isfinite(r.result.statistic)
        assert r.drifted is drifted
    assert report.dataset_drifted is drifted


def test_default_selection_follows_evidently_table() -> None:
    many = [float(i) for i in range(50)]
    assert select_test("numerical", many, many) == "ks"
    assert select_test("numerical", many * 30, many) == "wasserstein"
    assert select_test("numerical", [1.0, 2.0, 3.0] * 10, [1.0] * 30) == "chisquare"
    assert select_test("numerical", [0.0, 1.0] * 10, [1.0] * 30) == "z"
    assert select_test("numerical", [1.0, 2.0, 3.0] * 400, [1.0] * 30) == "jensenshannon"
    assert select_test("categorical", ["stop", "length", "tool_calls"], ["stop"]) == "chisquare"
    assert select_test("categorical", [True, False], [True]) == "z"
    assert select_test("categorical", ["en", "de", "fr"] * 400, ["en"]) == "jensenshannon"
    assert select_test("embedding", [], []) == "classifier_auc"
    with pytest.raises(ValueError, match="kind"):
        select_test("text", [], [])  # type: ignore[arg-type]


def test_nulls_are_dropped_and_counted() -> None:
    rng = np.random.default_rng(0)
    ref: list[float | None] = [*rng.normal(size=100).tolist(), None, float("nan")]
    cur: list[float | None] = [None, *rng.normal(size=80).tolist(), None, None]
    r = drift_report([SignalWindow("ttft_s", "numerical", ref, cur)]).get("ttft_s")
    assert (r.n_reference_null, r.n_current_null) == (2, 3)
    assert (r.result.n_reference, r.result.n_current) == (100, 80)
    want = stats.ks_2samp(
        [v for v in ref if v is not None and not math.isnan(v)], [v for v in cur if v is not None]
    )
    assert r.result.pvalue == pytest.approx(want.pvalue)


def test_bh_is_applied_across_signals_and_segments() -> None:
    rng = np.random.default_rng(5)
    windows = []
    for seg in ("model=a", "model=b"):
        for i in range(5):
            shift = 0.8 if (seg, i) == ("model=b", 0) else 0.0
            windows.append(
                SignalWindow(
                    f"s{i}",
                    "numerical",
                    rng.normal(size=300).tolist(),
                    rng.normal(shift, 1, size=100).tolist(),
                    segment=seg,
                )
            )
    windows.append(  # a distance test (large reference) stays outside the BH family
        SignalWindow(
            "big",
            "numerical",
            rng.normal(size=2000).tolist(),
            rng.normal(size=100).tolist(),
            segment="model=a",
        )
    )
    report = drift_report(windows, fdr_q=0.1)
    family = [r for r in report.results if r.result.score_kind == "pvalue"]
    assert len(family) == 10
    adjusted = stats.false_discovery_control([r.result.pvalue for r in family], method="bh")
    for r, adj in zip(family, adjusted, strict=True):
        assert r.adjusted_pvalue == pytest.approx(adj)
        assert r.drifted is bool(adj <= 0.1)
        assert r.result.threshold == 0.1
    assert report.get("s0", "model=b").drifted is True
    big = report.get("big", "model=a")
    assert big.result.method == "wasserstein" and big.adjusted_pvalue is None
    raw = drift_report(windows, fdr_q=None)
    assert raw.fdr_q is None and all(r.adjusted_pvalue is None for r in raw.results)
    shares = report.share_by_segment()
    assert set(shares) == {"model=a", "model=b"}
    assert shares["model=b"] == pytest.approx(
        sum(bool(r.drifted) for r in report.results if r.segment == "model=b") / 5
    )


def test_report_validation() -> None:
    w = SignalWindow("x", "numerical", [1.0] * 40, [1.0] * 40)
    with pytest.raises(ValueError, match="twice"):
        drift_report([w, w])
    with pytest.raises(ValueError, match="fdr_q"):
        drift_report([w], fdr_q=1.5)
    with pytest.raises(ValueError, match="method"):
        drift_report([SignalWindow("x", "numerical", [1.0] * 40, [1.0] * 40, method="t")])
    emb = SignalWindow("e", "embedding", [np.zeros(4)] * 40, [np.zeros(4)] * 40)
    with pytest.raises(ValueError, match="rng"):
        drift_report([emb])
    with pytest.raises(ValueError, match="reference"):
        drift_report([SignalWindow("x", "numerical", ["fast"] * 40, [1.0] * 40)])


def test_embedding_windows_and_overrides_in_the_report() -> None:
    rng = np.random.default_rng(9)
    ref = list(rng.normal(size=(120, 16)))
    cur = list(rng.normal(size=(100, 16)) + np.r_[0.8, np.zeros(15)])
    report = drift_report(
        [
            SignalWindow("prompt_embedding", "embedding", [*ref, None], cur),
            SignalWindow(
                "prompt_centroid", "embedding", ref, cur, method="mean_embedding_distance"
            ),
            SignalWindow(
                "len", "numerical", [1.0, 2.0] * 50, [1.0, 2.0] * 50, method="psi", threshold=0.25
            ),
        ],
        rng=rng,
    )
    emb = report.get("prompt_embedding")
    assert emb.result.method == "classifier_auc" and emb.n_reference_null == 1
    assert emb.drifted is True and emb.result.statistic is not None
    assert emb.result.statistic > 0.6
    assert report.get("prompt_centroid").drifted is True
    psi = report.get("len").result
    assert (psi.method, psi.threshold, psi.statistic, psi.drifted) == ("psi", 0.25, 0.0, False)


# --- stationary replay: false alarms ---------------------------------------------------------


def _calls(rng: np.random.Generator, n: int) -> dict[str, tuple[Kind, list[Any]]]:
    """One window of synthetic per-call signals from a fixed (stationary) process."""
    ttft = rng.lognormal(-1.5, 0.5, n)
    out = rng.negative_binomial(5, 0.05, n).astype(float)
    e2e = ttft + out * rng.gamma(20, 0.001, n)
    return {
        "ttft_s": ("numerical", ttft.tolist()),
        "output_tokens": ("numerical", out.tolist()),
        "e2e_s": ("numerical", e2e.tolist()),
        "finish_reason": (
            "categorical",
            rng.choice(["stop", "length", "tool_calls"], p=[0.85, 0.1, 0.05], size=n).tolist(),
        ),
        "refusal": ("categorical", (rng.random(n) < 0.03).tolist()),
        "language": (
            "categorical",
            rng.choice(["en", "de", "fr", "es"], p=[0.7, 0.1, 0.1, 0.1], size=n).tolist(),
        ),
    }


def test_stationary_replay_false_alarms_with_bh() -> None:
    """6 signals × 2 segments, 3 references × 100 windows of 200 calls: ≤ 1 alarm / 100."""
    rng = np.random.default_rng(20260601)
    alarms = unadjusted = tests = 0
    for _ in range(3):
        refs = {seg: _calls(rng, 1000) for seg in ("model=a", "model=b")}
        for _ in range(100):
            windows = []
            for seg, ref in refs.items():
                cur = _calls(rng, 200)
                windows += [
                    SignalWindow(name, kind, vals, cur[name][1], segment=seg)
                    for name, (kind, vals) in ref.items()
                ]
            report = drift_report(windows)  # default: BH at q = 0.05
            assert report.fdr_q == 0.05
            alarms += report.n_drifted
            unadjusted += sum(bool(r.unadjusted_drifted) for r in report.results)
            tests += len(report.results)
    assert tests == 3600
    assert alarms / tests <= 0.01
    # without BH each test alarms at about its own α: the scenario is not trivially quiet
    assert 0.02 < unadjusted / tests < 0.08


def test_large_reference_distance_thresholds_need_calibration() -> None:
    """Fixed Evidently thresholds (0.1) on 200-call windows alarm far above 1/100; the
    quantile-calibrated thresholds keep within the budget."""
    rng = np.random.default_rng(20260602)
    fixed = calibrated = tests = 0
    for _ in range(2):
        ref = _calls(rng, 5000)
        cals = {}
        for name, (kind, vals) in ref.items():
            method = select_test(kind, vals, vals)
            assert method in ("wasserstein", "jensenshannon")
            cals[name] = calibrate_quantile_threshold(
                vals,
                partial(run_test, method, kind),
                chunk_size=200,
                rng=rng,
                false_alarm_rate=0.005,
            )
        for _ in range(100):
            cur = _calls(rng, 200)
            plain = [SignalWindow(n, k, v, cur[n][1]) for n, (k, v) in ref.items()]
            tuned = [
                SignalWindow(n, k, v, cur[n][1], calibration=cals[n]) for n, (k, v) in ref.items()
            ]
            fixed += drift_report(plain).n_drifted
            calibrated += drift_report(tuned).n_drifted
            tests += len(plain)
    assert fixed / tests > 0.05
    assert calibrated / tests <= 0.01
