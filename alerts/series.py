"""Metric values for threshold rules, read at evaluation time.

:func:`rule_series` computes one :class:`~alerts.rules.Sample` at ``now`` per label
set for a :class:`~alerts.rules.ThresholdRule`: the statistic over the calls that
started in ``[now - window_s, now]`` (``llm_calls.start_unix_nano``), after the rule's
``filters``, split by its ``group_labels``. Fewer than ``min_samples`` observations give
``value=None`` (unknown: it neither fires nor resolves an alert).

Statistics (units in the name):

* latencies ``ttft_s``, ``tpot_s``, ``e2e_s`` (the caller's view), ``server_ttft_s``,
  ``server_e2e_s`` (the engine's view of merged gateway calls, and of engine-only calls),
  ``queue_s`` (engine queue), ``gateway_queue_s``, ``itl_s`` (per-call p95 ITL) and
  ``itl_p50_s`` (per-call median ITL): the rule's ``quantile`` by linear interpolation
  (Hyndman & Fan 1996 type 7, ``numpy.quantile`` default, the same as DuckDB
  ``quantile_cont``), or the mean when ``quantile`` is None; null latencies are skipped,
  never read as 0;
* ``error_rate``: calls with ``status = 'error'`` / calls;
* ``rejection_rate_429``: error calls refused for load / calls: ``error_type`` accepted by
  :func:`collector.store.callstats.is_rate_limited` (``429``, ``RateLimitError``,
  ``rate_limit_exceeded``, ``too_many_requests``, ``queue_full``, ``overloaded``, ... any case,
  surrounding blanks ignored: :data:`~collector.store.callstats.REJECTION_ERROR_TYPES`);
* ``cost_per_1k_tokens_usd``: ``1000 * sum(cost_usd) / sum(input_tokens + output_tokens)`` over
  priced calls with known tokens;
* ``kv_cache_usage``: the highest scraped ``kv_cache_usage`` (0..1) in the window
  (``engine_samples``; label ``model`` is the engine's ``model_name``, ``url`` its endpoint);
* ``spec_decode_acceptance_rate``: accepted / proposed draft tokens over the window, from the
  scraped counters' increases (``engine_samples``, same labels; engines without speculative
  decoding have no value). Group by ``url`` so the alert names the engine, e.g.
  ``spec_decode_acceptance_rate < 0.5`` with ``group_labels=("url", "model")``: below that the
  drafts cost more verification than they save (Leviathan, Kalman & Matias, "Fast Inference
  from Transformers via Speculative Decoding", ICML 2023, speed-up grows with acceptance);
* ``thumbs_down_rate``: thumbs-down / (thumbs-up + thumbs-down) feedback in the window
  (by the feedback timestamp; with filters or group labels, only feedback linked to a call);
* ``judge_score`` / ``judge_pass_rate``: no series here (the judge subsystem emits
  ``judge_drift`` events instead); rules on them stay unknown.

Where the rows come from:

* the call statistics (latencies, ``error_rate``, ``rejection_rate_429``,
  ``cost_per_1k_tokens_usd``; filters and group labels on call columns) are computed by
  :func:`alerts.callseries.call_values`: read through the one analytics read path,
  :func:`collector.lake.query.fetch_calls` (sealed hours from the Parquet lake, the unsealed
  hot tail from the store through ADBC, each call once; the store alone without a lake), and
  aggregated in DuckDB. A rule with a 7-day window reads 7 days of Parquet, not 7 days of
  store rows. These reads use their own connections: committed rows only; an in-memory SQLite
  store cannot be read this way (``ValueError``, the rule is logged and stays unknown);
* ``kv_cache_usage``, ``spec_decode_acceptance_rate`` (``engine_samples``) and
  ``thumbs_down_rate`` (``feedback``, joined to ``llm_calls`` for labels) are not in the lake
  and are read from the store through SQLAlchemy Core on the caller's connection.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from sqlalchemy import and_, select
from sqlalchemy.engine import Connection

from alerts.callseries import call_values
from alerts.rules import Sample, Series, ThresholdRule
from collector.lake.layout import Lake
from collector.store.models import LLMCall
from collector.store.models.api import EngineSample, Feedback

log = logging.getLogger(__name__)

#: rule ``filters`` / ``group_labels`` keys -> llm_calls columns
CALL_LABELS: dict[str, Any] = {
    "model": LLMCall.model,
    "service_name": LLMCall.service_name,
    "service": LLMCall.service_name,
    "variant": LLMCall.variant,
    "rollout": LLMCall.rollout,
    "provider": LLMCall.provider,
    "operation": LLMCall.operation,
    "request_model": LLMCall.request_model,
    "response_model": LLMCall.response_model,
}
_ENGINE_LABELS: dict[str, Any] = {"model": EngineSample.model_name, "url": EngineSample.url}
#: statistics read from scraped engine samples -> their value columns
_ENGINE_STATS: dict[str, tuple[Any, ...]] = {
    "kv_cache_usage": (EngineSample.kv_cache_usage,),
    "spec_decode_acceptance_rate": (
        EngineSample.url,
        EngineSample.spec_decode_draft_tokens_total,
        EngineSample.spec_decode_accepted_tokens_total,
    ),
}


def _cols(mapping: dict[str, Any], keys: Iterable[str], what: str) -> list[tuple[str, Any]]:
    out = []
    for k in keys:
        if k not in mapping:
            raise ValueError(f"{what} key {k!r} is not one of {', '.join(sorted(mapping))}")
        out.append((k, mapping[k]))
    return out


def _grouped(
    rows: Iterable[Sequence[Any]], names: Sequence[str]
) -> dict[tuple[str, ...], list[Sequence[Any]]]:
    """Split rows whose first ``len(names)`` columns are labels (null label -> ``""``)."""
    out: dict[tuple[str, ...], list[Sequence[Any]]] = defaultdict(list)
    n = len(names)
    for r in rows:
        out[tuple("" if v is None else str(v) for v in r[:n])].append(r[n:])
    return out


def _series(
    rule: ThresholdRule,
    names: Sequence[str],
    groups: dict[tuple[str, ...], list[Sequence[Any]]],
    now: float,
    agg: Callable[[Sequence[Sequence[Any]]], float | None],
) -> list[Series]:
    if not groups and not names:
        # No data at all: one unknown sample keeps the (single) alert where it is.
        return [Series(labels={}, samples=(Sample(now, None),))]
    return [
        Series(labels=dict(zip(names, key, strict=True)), samples=(Sample(now, agg(rows)),))
        for key, rows in sorted(groups.items())
    ]


def rule_series(
    conn: Connection,
    tenant: str,
    rule: ThresholdRule,
    now: float,
    *,
    lake: Lake | None = None,
) -> list[Series]:
    """One :class:`Series` per label set of ``rule.group_labels``, each with one sample at
    ``now`` (unix seconds) over the window ``[now - rule.window_s, now]``.

    Call statistics are read through the lake's query layer from the store ``conn`` is bound
    to (its URL) and ``lake`` (None: the store alone), on their own connections: they see
    committed rows, not rows written in ``conn``'s open transaction. Engine-sample and
    feedback statistics are read through ``conn``.

    Raises:
        ValueError: a filter or group label the statistic cannot be split by (names the key),
            or a store the query layer cannot read (an in-memory SQLite database).
    """
    since_ns = int((now - rule.window_s) * 1e9)
    until_ns = int(now * 1e9)
    names = list(rule.group_labels)
    if rule.stat in ("judge_score", "judge_pass_rate"):
        return []
    if rule.stat in _ENGINE_STATS:
        return _kv_series(conn, tenant, rule, names, since_ns, until_ns, now)
    if rule.stat == "thumbs_down_rate":
        return _thumbs_series(conn, tenant, rule, names, since_ns, until_ns, now)
    label_cols = [str(c.name) for _, c in _cols(CALL_LABELS, names, "group_labels")]
    filters = [
        (str(c.name), rule.filters[k]) for k, c in _cols(CALL_LABELS, rule.filters, "filters")
    ]
    values = call_values(
        conn.engine.url.render_as_string(hide_password=False),
        lake,
        tenant,
        stat=rule.stat,
        quantile=rule.quantile,
        min_samples=rule.min_samples,
        since_ns=since_ns,
        until_ns=until_ns,
        label_columns=label_cols,
        filters=filters,
    )
    if not values and not names:
        # No data at all: one unknown sample keeps the (single) alert where it is.
        return [Series(labels={}, samples=(Sample(now, None),))]
    return [
        Series(labels=dict(zip(names, key, strict=True)), samples=(Sample(now, value),))
        for key, value in sorted(values.items())
    ]


def _kv_series(
    conn: Connection,
    tenant: str,
    rule: ThresholdRule,
    names: Sequence[str],
    since_ns: int,
    until_ns: int,
    now: float,
) -> list[Series]:
    label_cols = [c for _, c in _cols(_ENGINE_LABELS, names, "group_labels")]
    value_cols = _ENGINE_STATS[rule.stat]
    q = (
        select(*label_cols, *value_cols)
        .where(
            EngineSample.tenant == tenant,
            EngineSample.scraped_unix_nano >= since_ns,
            EngineSample.scraped_unix_nano <= until_ns,
            *(c.is_not(None) for c in value_cols),
        )
        .order_by(EngineSample.scraped_unix_nano)
    )
    for k, col in _cols(_ENGINE_LABELS, rule.filters, "filters"):
        q = q.where(col == rule.filters[k])
    groups = _grouped(conn.execute(q).all(), names)

    def peak(rows: Sequence[Sequence[Any]]) -> float | None:
        vals = [float(r[0]) for r in rows]
        return max(vals) if len(vals) >= rule.min_samples else None

    def acceptance(rows: Sequence[Sequence[Any]]) -> float | None:
        # rows: (url, draft_total, accepted_total) in scrape order; counters per engine url
        if len(rows) < rule.min_samples:
            return None
        first: dict[str, tuple[int, int]] = {}
        last: dict[str, tuple[int, int]] = {}
        for url, draft, acc in rows:
            first.setdefault(url, (draft, acc))
            last[url] = (draft, acc)
        d = sum(max(0, last[u][0] - first[u][0]) for u in last)
        a = sum(max(0, last[u][1] - first[u][1]) for u in last)
        return a / d if d > 0 else None

    agg = acceptance if rule.stat == "spec_decode_acceptance_rate" else peak
    return _series(rule, names, groups, now, agg)


def _thumbs_series(
    conn: Connection,
    tenant: str,
    rule: ThresholdRule,
    names: Sequence[str],
    since_ns: int,
    until_ns: int,
    now: float,
) -> list[Series]:
    label_cols = [c for _, c in _cols(CALL_LABELS, names, "group_labels")]
    q = select(*label_cols, Feedback.kind).where(
        Feedback.tenant == tenant,
        Feedback.kind.in_(("thumbs_up", "thumbs_down")),
        Feedback.timestamp_unix_nano >= since_ns,
        Feedback.timestamp_unix_nano <= until_ns,
    )
    if names or rule.filters:
        q = q.join(
            LLMCall,
            and_(
                LLMCall.tenant == Feedback.tenant,
                LLMCall.trace_id == Feedback.trace_id,
                LLMCall.span_id == Feedback.span_id,
            ),
        )
        for k, col in _cols(CALL_LABELS, rule.filters, "filters"):
            q = q.where(col == rule.filters[k])
    groups = _grouped(conn.execute(q).all(), names)

    def rate(rows: Sequence[Sequence[Any]]) -> float | None:
        if len(rows) < rule.min_samples:
            return None
        return sum(1 for (kind,) in rows if kind == "thumbs_down") / len(rows)

    return _series(rule, names, groups, now, rate)


def check_rule_labels(rule: ThresholdRule) -> None:
    """Validate that ``rule.filters`` and ``rule.group_labels`` name dimensions its statistic
    can be split by.

    Raises:
        ValueError: an unknown key (the message names ``filters`` or ``group_labels``).
    """
    mapping = _ENGINE_LABELS if rule.stat in _ENGINE_STATS else CALL_LABELS
    _cols(mapping, rule.filters, "filters")
    _cols(mapping, rule.group_labels, "group_labels")
