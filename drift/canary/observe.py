"""Build :class:`~drift.canary.policy.CanaryObservations` for a stored rollout from the call store.

Calls of a rollout: tenant's ``llm_calls`` with ``variant`` in (baseline, candidate), ``rollout``
equal to the rollout's name or NULL (clients that do not tag it), started in
``[first step start, now)``. Metric observations are cumulative over the rollout and stratified
(``drift.canary.stratified``): count metrics are split into intervals of ``bucket_s`` seconds
inside each step (the rare-event and proportion tests take contrasts per interval); per-call
values carry their stratum, the ``bucket_s`` windows of a step merged until each arm holds
:data:`STRATUM_MIN_PER_ARM` values (judge scores: by step only), and judge scores their judge
inclusion probability (Hajek means).

Metric names the store can measure (``MetricPolicy.name``), their kinds and sources:

=================== =================== =====================================================
name                kind                per call / per interval
=================== =================== =====================================================
ttft_s, tpot_s,     mean                the call's value in seconds (NULL: unknown, dropped)
e2e_s
cost_usd            mean                USD per request (NULL: unpriced, dropped)
error_rate          rare_event|propor.  status = error / all calls
refusal_rate        rare_event|propor.  drift.textsignals.is_refusal / calls with output text
length_finish_rate  rare_event|propor.  finish_reason = length / calls with a finish reason
thumbs_down_rate    rare_event|propor.  latest thumbs vote is down / calls with a thumbs vote
judge_score         mean                judges' ``judge_results`` (status ok): per call the
                                        latest score per rubric, averaged over rubrics;
                                        ``judge_score:<rubric>`` for one rubric
pairwise_win_rate   pairwise            ``judge_pairwise_results`` of the rollout, score 1/½/0
=================== =================== =====================================================
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import Engine, and_, func, or_, select
from sqlalchemy.sql.elements import ColumnElement

from collector.store.judgescore import usable_score
from collector.store.models import LLMCall
from collector.store.models.api import Feedback
from collector.store.models.judges import JudgeResultRow, JudgeSample, PairwiseResultRow
from drift.canary.observations import (
    CanaryObservations,
    CountObservations,
    Observations,
    SampleObservations,
    StepAssignment,
)
from drift.canary.policy import MetricKind, MetricPolicy
from drift.canary.store import RolloutRecord
from drift.canary.stratified import merge_blocks
from drift.textsignals import REFUSAL_WINDOW_CHARS, is_refusal

_MEAN_COLUMNS = ("ttft_s", "tpot_s", "e2e_s", "cost_usd")
_COUNT_METRICS = ("error_rate", "refusal_rate", "length_finish_rate", "thumbs_down_rate")
_COUNT_KINDS = (MetricKind.PROPORTION, MetricKind.RARE_EVENT)
#: characters of output text read for the refusal heuristic (its window after strip())
_TEXT_PREFIX = REFUSAL_WINDOW_CHARS + 3800
_NS = 1_000_000_000
#: time blocks inside a step are merged until each arm holds this many values (per-stratum
#: Hajek means and variances need a few dozen values; our choice, checked by the simulation)
STRATUM_MIN_PER_ARM = 30


def check_metric_source(metric: MetricPolicy) -> None:
    """Raise ValueError (naming ``metrics[name]``) when the store cannot measure ``metric``
    with its kind (table in the module docstring)."""
    name, kind = metric.name, metric.kind
    if name in _MEAN_COLUMNS or name == "judge_score" or name.startswith("judge_score:"):
        ok, want = kind is MetricKind.MEAN, "mean"
    elif name in _COUNT_METRICS:
        ok, want = kind in _COUNT_KINDS, "proportion or rare_event"
    elif name == "pairwise_win_rate":
        ok, want = kind is MetricKind.PAIRWISE, "pairwise"
    else:
        known = ", ".join((*_MEAN_COLUMNS, *_COUNT_METRICS, "judge_score[:<rubric>]"))
        raise ValueError(f"metrics[{name!r}]: unknown metric; known: {known}, pairwise_win_rate")
    if not ok:
        raise ValueError(f"metrics[{name!r}]: kind must be {want}, got {kind.value}")


@dataclass(frozen=True)
class _Calls:
    """Columns of the rollout's calls, one entry per call (None = unknown)."""

    keys: list[tuple[str, str]]
    start_ns: list[int]
    arm: list[int]  # 0 baseline, 1 candidate
    values: dict[str, list[Any]]


def _call_filter(record: RolloutRecord, until_ns: int) -> list[ColumnElement[bool]]:
    p = record.policy
    return [
        LLMCall.tenant == record.tenant,
        LLMCall.variant.in_([p.baseline_variant, p.candidate_variant]),
        or_(LLMCall.rollout == record.name, LLMCall.rollout.is_(None)),
        LLMCall.start_unix_nano >= record.data_since_unix_nano,
        LLMCall.start_unix_nano < until_ns,
    ]


def _load_calls(engine: Engine, record: RolloutRecord, until_ns: int, text: bool) -> _Calls:
    cols: list[Any] = [
        LLMCall.trace_id,
        LLMCall.span_id,
        LLMCall.start_unix_nano,
        LLMCall.variant,
        LLMCall.status,
        LLMCall.finish_reason,
        *(getattr(LLMCall, c) for c in _MEAN_COLUMNS),
    ]
    if text:
        cols.append(func.substr(LLMCall.output_text, 1, _TEXT_PREFIX).label("output_text"))
    query = select(*cols).where(*_call_filter(record, until_ns)).order_by(LLMCall.start_unix_nano)
    cand = record.policy.candidate_variant
    calls = _Calls([], [], [], defaultdict(list))
    with engine.connect() as conn:
        for row in conn.execute(query).mappings():
            calls.keys.append((row["trace_id"], row["span_id"]))
            calls.start_ns.append(int(row["start_unix_nano"]))
            calls.arm.append(1 if row["variant"] == cand else 0)
            for c in (*_MEAN_COLUMNS, "status", "finish_reason"):
                calls.values[c].append(row[c])
            if text:
                calls.values["output_text"].append(row["output_text"])
    return calls


def _judge_scores(
    engine: Engine, record: RolloutRecord, until_ns: int, rubric: str | None
) -> dict[tuple[str, str], tuple[float, float]]:
    """Per call (trace_id, span_id): (mean over rubrics of the latest ok score per rubric, the
    call's judge inclusion probability pi). pi is the smallest over its rubrics' samples as
    stored now (a late thumbs-down raises it to 1, ``judges.selection``); 1 for a result
    without a sample (judged on request, not sampled)."""
    j = JudgeResultRow
    js = JudgeSample
    query = (
        select(j.trace_id, j.span_id, j.rubric_name, j.score, js.inclusion_probability)
        .join(
            LLMCall,
            and_(
                LLMCall.tenant == j.tenant,
                LLMCall.trace_id == j.trace_id,
                LLMCall.span_id == j.span_id,
            ),
        )
        .outerjoin(
            js,
            and_(
                js.tenant == j.tenant,
                js.trace_id == j.trace_id,
                js.span_id == j.span_id,
                js.rubric == j.rubric_name,
            ),
        )
        .where(j.tenant == record.tenant, usable_score(j))
        .where(*_call_filter(record, until_ns))
        .order_by(j.id)
    )
    if rubric is not None:
        query = query.where(j.rubric_name == rubric)
    latest: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    pi: dict[tuple[str, str], float] = {}
    with engine.connect() as conn:
        for trace_id, span_id, rubric_name, score, prob in conn.execute(query):
            if score is not None:  # filtered in SQL; keeps the type checker informed
                key = (trace_id, span_id)
                latest[key][rubric_name] = float(score)  # later ids overwrite
                p = 1.0 if prob is None else min(1.0, max(float(prob), 1e-6))
                pi[key] = min(pi.get(key, 1.0), p)
    return {k: (sum(v.values()) / len(v), pi[k]) for k, v in latest.items()}


def _pairwise_scores(engine: Engine, record: RolloutRecord) -> list[float]:
    pw = PairwiseResultRow
    query = (
        select(pw.score)
        .where(pw.tenant == record.tenant, pw.rollout == record.name, pw.score.is_not(None))
        .order_by(pw.id)
    )
    with engine.connect() as conn:
        return [float(s) for (s,) in conn.execute(query) if s is not None]


def _thumbs(engine: Engine, record: RolloutRecord, until_ns: int) -> dict[tuple[str, str], bool]:
    """Per call: True when its latest thumbs vote (by timestamp) is down, False when up."""
    fb = Feedback
    query = (
        select(LLMCall.trace_id, LLMCall.span_id, fb.kind, fb.timestamp_unix_nano)
        .join(
            fb,
            and_(
                fb.tenant == LLMCall.tenant,
                fb.trace_id == LLMCall.trace_id,
                or_(fb.span_id == LLMCall.span_id, fb.span_id.is_(None)),
            ),
        )
        .where(fb.kind.in_(["thumbs_up", "thumbs_down"]))
        .where(*_call_filter(record, until_ns))
    )
    latest: dict[tuple[str, str], tuple[int, bool]] = {}
    with engine.connect() as conn:
        for trace_id, span_id, kind, ts in conn.execute(query):
            key = (trace_id, span_id)
            if key not in latest or ts >= latest[key][0]:
                latest[key] = (int(ts), kind == "thumbs_down")
    return {k: v[1] for k, v in latest.items()}


def _interval_index(
    record: RolloutRecord, start_ns: Sequence[int], bucket_s: float
) -> tuple[np.ndarray, int, np.ndarray, np.ndarray]:
    """Interval id of each call (step segment, bucket_s window inside it), the number of ids,
    and each call's step segment and window."""
    starts = np.array([int(s["started_unix_nano"]) for s in record.steps], dtype=np.int64)
    t = np.asarray(start_ns, dtype=np.int64)
    seg = np.clip(np.searchsorted(starts, t, side="right") - 1, 0, len(starts) - 1)
    within = ((t - starts[seg]) // int(bucket_s * _NS)).astype(np.int64)
    width = int(within.max()) + 1 if t.size else 1
    return seg * width + within, len(starts) * width, seg, within


def _counts(
    flags: Sequence[bool | None], arm: Sequence[int], interval: np.ndarray, n_intervals: int
) -> CountObservations:
    """Events / trials per interval and arm; a None flag is not a trial (unknown)."""
    events = np.zeros((2, n_intervals))
    trials = np.zeros((2, n_intervals))
    for flag, a, i in zip(flags, arm, interval, strict=True):
        if flag is None:
            continue
        trials[a, i] += 1
        events[a, i] += 1 if flag else 0
    used = trials.sum(axis=0) > 0
    return CountObservations(events[0, used], trials[0, used], events[1, used], trials[1, used])


def sample_strata(
    step: np.ndarray, block: np.ndarray, arm: np.ndarray, *, weighted: bool
) -> np.ndarray:
    """Stratum label per value: the ``bucket_s`` blocks of a step merged until each arm holds
    :data:`STRATUM_MIN_PER_ARM` values; weighted values (judge scores) by step only -- a few
    dozen unequally weighted values make a poor Hajek variance, and inside a step the share is
    constant, so fewer strata keep the contrast unbiased. Shapes (n,) each."""
    blocks = np.zeros_like(block) if weighted else block
    return merge_blocks(step, blocks, arm, min_per_arm=STRATUM_MIN_PER_ARM)


def _split(
    values: Sequence[float | None],
    arm: Sequence[int],
    step: np.ndarray,
    block: np.ndarray,
    inclusion: Sequence[float | None] | None = None,
) -> SampleObservations:
    """Per-arm values (None -> NaN), their strata (:func:`merge_blocks` over the known values)
    and inclusion probabilities."""
    y = np.array([math.nan if v is None else float(v) for v in values], dtype=np.float64)
    a = np.asarray(arm, dtype=np.int64)
    known = ~np.isnan(y)
    labels = np.full(y.size, -1, np.int64)
    if known.any():
        labels[known] = sample_strata(
            step[known], block[known], a[known], weighted=inclusion is not None
        )
    pi = None
    if inclusion is not None:
        pi = np.array([math.nan if p is None else p for p in inclusion], dtype=np.float64)
    return SampleObservations(
        y[a == 0],
        y[a == 1],
        baseline_strata=labels[a == 0],
        candidate_strata=labels[a == 1],
        baseline_inclusion=None if pi is None else pi[a == 0],
        candidate_inclusion=None if pi is None else pi[a == 1],
    )


def load_observations(
    engine: Engine, record: RolloutRecord, *, now_ns: int, bucket_s: float = 60.0
) -> CanaryObservations:
    """Observations of ``record``'s policy metrics from the store at time ``now_ns`` (unix ns).

    ``step_index``/``step_elapsed_s`` come from the current step entry, ``elapsed_s`` from
    ``record.started_unix_nano``; ``assignments`` count calls per arm in each step segment
    (SRM input). A metric with no source rows is left out (``build_evidence`` reports
    ``no_data``), never filled with zeros.

    Raises:
        ValueError: ``bucket_s`` <= 0, or a policy metric the store cannot measure
            (:func:`check_metric_source`).
    """
    if not bucket_s > 0:
        raise ValueError(f"bucket_s must be > 0, got {bucket_s}")
    metrics = record.policy.metrics
    for m in metrics:
        check_metric_source(m)
    names = {m.name for m in metrics}
    calls = _load_calls(engine, record, now_ns, text="refusal_rate" in names)
    interval, n_intervals, seg_of, block_of = _interval_index(record, calls.start_ns, bucket_s)
    arm = calls.arm
    status, finish = calls.values["status"], calls.values["finish_reason"]

    thumbs = _thumbs(engine, record, now_ns) if "thumbs_down_rate" in names else {}
    count_flags: dict[str, Callable[[], list[bool | None]]] = {
        "error_rate": lambda: [s == "error" for s in status],
        "refusal_rate": lambda: [is_refusal(t) for t in calls.values["output_text"]],
        "length_finish_rate": lambda: [None if f is None else f == "length" for f in finish],
        "thumbs_down_rate": lambda: [thumbs.get(k) for k in calls.keys],
    }
    out: dict[str, Observations] = {}
    for m in metrics:
        if m.name in _MEAN_COLUMNS:
            out[m.name] = _split(calls.values[m.name], arm, seg_of, block_of)
        elif m.name in count_flags:
            out[m.name] = _counts(count_flags[m.name](), arm, interval, n_intervals)
        elif m.name == "pairwise_win_rate":
            out[m.name] = SampleObservations(
                np.empty(0), np.array(_pairwise_scores(engine, record))
            )
        else:
            rubric = m.name.split(":", 1)[1] if ":" in m.name else None
            scores = _judge_scores(engine, record, now_ns, rubric)
            judged = [scores.get(k) for k in calls.keys]
            out[m.name] = _split(
                [None if j is None else j[0] for j in judged],
                arm,
                seg_of,
                block_of,
                [None if j is None else j[1] for j in judged],
            )

    seg = [int(s["started_unix_nano"]) for s in record.steps]
    bounds = [*seg[1:], now_ns]
    t = np.asarray(calls.start_ns, dtype=np.int64)
    a = np.asarray(arm, dtype=np.int64)
    assignments = []
    for entry, lo, hi in zip(record.steps, seg, bounds, strict=True):
        in_seg = (t >= lo) & (t < hi)
        assignments.append(
            StepAssignment(
                float(entry["candidate_weight_pct"]),
                int((in_seg & (a == 0)).sum()),
                int((in_seg & (a == 1)).sum()),
            )
        )
    return CanaryObservations(
        step_index=record.step_index,
        elapsed_s=max(0.0, (now_ns - record.started_unix_nano) / _NS),
        step_elapsed_s=max(0.0, (now_ns - seg[-1]) / _NS) if seg else 0.0,
        assignments=tuple(assignments),
        metrics=out,
    )
