"""Drift's judge_score reads the judge sampler's inclusion probability from the store and tests
Hajek-weighted means (a real migrated SQLite store; rows as the judges subsystem writes them)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
from sqlalchemy import insert

from collector.store import engine as store_engine
from collector.store.models import LLMCall
from collector.store.models.judges import JudgeResultRow, JudgeSample
from drift.columnar import evaluate_columns
from drift.signals import ExtractConfig, extract
from drift.windows import Windows

HOUR = 3600 * 10**9
BASE = 1_790_000_000 * 10**9


def test_judge_score_is_weighted_by_the_stored_inclusion_probability(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    store_engine.upgrade(url)
    engine = store_engine.make_engine(url)
    now = dt.datetime.now(dt.UTC)
    calls, samples, results = [], [], []
    rng = np.random.default_rng(3)
    unflagged_seen = [0, 0]
    for i in range(320):
        win = 0 if i < 240 else 1  # 240 reference calls (hour 0), 80 current (hour 1)
        flagged = i % 4 == 0
        pi = 1.0 if flagged else (0.1 if win == 0 else 0.5)
        # flagged calls always judged, others every 10th (reference) / every 2nd (current)
        unflagged_seen[win] += not flagged
        judged = flagged or unflagged_seen[win] % (10 if win == 0 else 2) == 0
        trace, span = f"{i:032x}", f"{i:016x}"
        start = BASE + win * HOUR + (i % 240 + 1) * 10**9
        calls.append(
            {"tenant": "t", "trace_id": trace, "span_id": span, "call_id": f"c{i}",
             "start_unix_nano": start, "status": "ok", "flags": [], "dialect": "otel"}
        )  # fmt: skip
        if not judged:
            continue
        samples.append(
            {"id": i + 1, "tenant": "t", "trace_id": trace, "span_id": span, "call_id": f"c{i}",
             "rubric": "helpful", "inclusion_probability": pi, "design_rate": pi, "stratum": "s",
             "reason": "flagged" if flagged else "random", "status": "done", "attempts": 1,
             "created_at": now, "updated_at": now}
        )  # fmt: skip
        results.append(
            {"sample_id": i + 1, "tenant": "t", "trace_id": trace, "span_id": span,
             "call_id": f"c{i}", "status": "ok", "rubric_name": "helpful", "rubric_version": "1",
             "rubric_fingerprint": "f", "judge_model": "m",
             "score": float((2.0 if flagged else 4.0) + rng.normal(0, 0.3))}
        )  # fmt: skip
    with engine.begin() as conn:
        conn.execute(insert(LLMCall), calls)
        conn.execute(insert(JudgeSample), samples)
        conn.execute(insert(JudgeResultRow), results)
    engine.dispose()
    windows = Windows(BASE, BASE + HOUR, BASE + HOUR, BASE + 2 * HOUR, "range", None)
    config = ExtractConfig(signals=("judge_score",), segment_by=())
    ex = extract(url, "t", windows, config, rng=np.random.default_rng(0))
    (col,) = [c for c in ex.columns if c.signal == "judge_score"]
    assert col.reference_weights is not None and col.current_weights is not None
    assert col.reference is not None and col.current is not None
    judged_ref = ~np.isnan(col.reference)
    assert sorted(set(col.reference_weights[judged_ref].tolist())) == [1.0, 10.0]
    assert sorted(set(col.current_weights[~np.isnan(col.current)].tolist())) == [1.0, 2.0]
    report, _ = evaluate_columns(ex.columns, min_samples=30, fdr_q=0.01)
    res = report.get("judge_score").result
    # same quality in both windows; only the sampling rate of unflagged calls changed
    assert res.method == "hajek_z" and res.pvalue is not None and res.pvalue > 0.01
    plain_ref = col.reference[~np.isnan(col.reference)].mean()
    plain_cur = col.current[~np.isnan(col.current)].mean()
    assert plain_cur - plain_ref > 0.2  # what the unweighted mean would have reported
