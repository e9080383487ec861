"""The DuckDB side of :func:`collector.store.analytics.call_stats`: group keys and metric SQL.

Input relations (registered Arrow tables): ``calls`` with the columns of
:func:`needed_columns` and ``votes`` (linked thumbs votes joined to their call). No I/O here.

Metrics per group (units in the names; None when unknown, never 0):

* ``count``; ``error_count`` / ``error_rate``: ``status = 'error'`` over ``count``;
  ``rejection_count`` / ``rejection_rate``: ``lower(error_type)``, blanks stripped, in
  :data:`REJECTION_ERROR_TYPES` (HTTP 429 / overload / queue full) over ``count``.
* ``<f>_p50`` / ``_p95`` / ``_p99`` for ``f`` in :data:`LATENCY_FIELDS`: linear
  interpolation between order statistics (Hyndman & Fan 1996 type 7, numpy's default,
  DuckDB ``quantile_cont``) over the non-null values; ``n_<f>`` values used, ``null_<f>``
  calls where it is unknown. The fields: ``ttft_s``, ``e2e_s`` (the caller's view when a
  gateway/SDK span merged with the engine's), ``server_ttft_s``, ``server_e2e_s`` (the
  engine's), ``tpot_s``, ``queue_s`` (engine queue), ``gateway_queue_s`` (gateway queue),
  ``itl_p50_s`` / ``itl_p95_s`` (each call's median / 95th-percentile inter-token gap, from
  streamed token timestamps): e.g. ``itl_p50_s_p99`` is the 99th percentile over calls of the
  per-call median ITL. Token-level pooling is not possible from per-call summaries, so these
  are distributions of per-call ITL statistics, not of all gaps pooled.
* ``output_tokens_per_s_p50``: per request ``output_tokens / (e2e_s - ttft_s)``, the decode
  rate after the first token (vLLM's "output throughput" per request), over calls where
  ``output_tokens > 0`` and ``e2e_s - ttft_s > 0``; ``n_output_tokens_per_s`` of them.
* ``output_tokens_per_s_aggregate``: ``sum(output_tokens) / window_s``. ``window_s``: the
  bucket clipped to ``[since, until)``; without buckets ``until - since``, or, when the range is
  open, the span from the group's first start to its last end.
* ``input_tokens_sum``, ``output_tokens_sum`` (known counts only; ``null_input_tokens`` /
  ``null_output_tokens`` unknown), ``cost_usd_sum``, ``gpu_cost_usd_sum``.
* ``cost_per_1k_tokens_usd``: ``1000 * sum(cost_usd) / sum(input_tokens + output_tokens)`` over
  priced calls with both token counts known; ``gpu_cost_per_1k_tokens_usd`` likewise with the
  amortised ``gpu_cost_usd``. ``unpriced_count``: calls flagged ``unpriced``.
* ``thumbs_up_count``, ``thumbs_down_count``, ``thumbs_down_rate = down / (up + down)`` over
  effective votes: one per (user, call), the latest ``timestamp_unix_nano`` wins (events of an
  unknown user count one each); None without votes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import duckdb

GROUP_KEYS: tuple[str, ...] = ("model", "variant", "rollout", "service", "tenant", "bucket")
#: lower-cased ``error.type`` values that mean the request was refused for load (HTTP 429, a
#: provider's rate limit, overload, a full queue): THE definition of "rate-limited", used by
#: ``/api/v1/stats``, alert rules (``rejection_rate_429``) and the dashboard alike
REJECTION_ERROR_TYPES: frozenset[str] = frozenset(
    {"429", "rate_limited", "too_many_requests", "queue_full", "rejected", "overloaded"}
    | {"ratelimiterror", "rate_limit_exceeded"}
)


#: the blanks stripped from an ``error_type`` before it is compared (ASCII whitespace; the SQL
#: of :func:`collector.store.analytics` strips the same characters, so Python and SQL agree)
ERROR_TYPE_BLANKS = " \t\n\r\x0b\x0c"


def is_rate_limited(error_type: str | None) -> bool:
    """True when a call's ``error_type`` is one of :data:`REJECTION_ERROR_TYPES` (any case,
    surrounding :data:`ERROR_TYPE_BLANKS` ignored)."""
    return (
        isinstance(error_type, str)
        and error_type.strip(ERROR_TYPE_BLANKS).lower() in REJECTION_ERROR_TYPES
    )


LATENCY_FIELDS: tuple[str, ...] = (
    "ttft_s",
    "tpot_s",
    "e2e_s",
    "queue_s",
    "server_ttft_s",
    "server_e2e_s",
    "gateway_queue_s",
    "itl_p50_s",
    "itl_p95_s",
)
_KEY_COLUMN = {"model": "model", "variant": "variant", "rollout": "rollout"}
_KEY_COLUMN |= {"service": "service_name", "tenant": "tenant"}
_BASE_COLUMNS = (
    "start_unix_nano",
    "is_error",
    "is_rejected",
    "is_unpriced",
    *LATENCY_FIELDS,
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "gpu_cost_usd",
)


def validate_group_by(
    group_by: Sequence[str], *, bucket_s: float | None, all_tenants: bool
) -> list[str]:
    """Checked, de-duplicated group keys (``bucket`` added when ``bucket_s`` is given).

    Raises:
        ValueError: unknown key, ``tenant`` without ``all_tenants``, ``bucket`` without
            ``bucket_s``, or ``bucket_s`` not a whole number of seconds >= 1.
    """
    keys: list[str] = []
    for key in group_by:
        if key not in GROUP_KEYS:
            raise ValueError(f"group_by: unknown key {key!r}; known: {', '.join(GROUP_KEYS)}")
        if key not in keys:
            keys.append(key)
    if "tenant" in keys and not all_tenants:
        raise ValueError("group_by: 'tenant' needs an admin read across tenants (all_tenants)")
    if bucket_s is not None:
        if not bucket_s >= 1 or bucket_s != int(bucket_s):
            raise ValueError(f"bucket_s must be a whole number of seconds >= 1, got {bucket_s}")
        if "bucket" not in keys:
            keys.append("bucket")
    elif "bucket" in keys:
        raise ValueError("bucket_s: required when group_by contains 'bucket'")
    return keys


def needed_columns(keys: Sequence[str], *, need_end: bool) -> list[str]:
    """Columns (``llm_calls`` names plus derived 0/1 indicators) the aggregation reads."""
    cols = [_KEY_COLUMN[k] for k in keys if k != "bucket"]
    cols += list(_BASE_COLUMNS)
    if need_end:
        cols.append("end_unix_nano")
    return cols


def _key_exprs(keys: Sequence[str], bucket_ns: int | None) -> list[str]:
    out = []
    for k in keys:
        if k == "bucket":
            width = int(bucket_ns or 1)
            out.append(f"(start_unix_nano // {width}) * {width} AS g_bucket")
        else:
            out.append(f"{_KEY_COLUMN[k]} AS g_{k}")
    return out


def metrics_sql(prefix: str, source: str, group: str) -> str:
    """``SELECT {prefix}<every per-group aggregate> FROM <source plus derived columns> {group}``.

    ``prefix`` selects the group columns (each followed by ``, ``) and may use the columns
    computed over ``source``'s rows (``source`` has :func:`needed_columns` with
    ``end_unix_nano``); ``group`` is the ``GROUP BY`` clause (or empty). The aggregate columns
    are the ``s`` relation of :func:`final_sql` (``count``, ``q_<f>`` lists of p50/p95/p99 …)."""
    tps = (
        "CASE WHEN output_tokens > 0 AND e2e_s - ttft_s > 0 "
        "THEN output_tokens / (e2e_s - ttft_s) END AS tps"
    )
    known = "input_tokens IS NOT NULL AND output_tokens IS NOT NULL"
    priced = f"CASE WHEN cost_usd IS NOT NULL AND {known} THEN input_tokens + output_tokens END"
    gpu = f"CASE WHEN gpu_cost_usd IS NOT NULL AND {known} THEN input_tokens + output_tokens END"
    latency = ",\n".join(
        f"quantile_cont({f}, [0.5, 0.95, 0.99]) AS q_{f}, count({f}) AS n_{f}"
        for f in LATENCY_FIELDS
    )
    return f"""
  SELECT {prefix}
    count(*) AS count,
    sum(is_error)::BIGINT AS error_count,
    sum(is_rejected)::BIGINT AS rejection_count,
    {latency},
    quantile_cont(tps, 0.5) AS output_tokens_per_s_p50,
    count(tps) AS n_output_tokens_per_s,
    sum(input_tokens)::BIGINT AS input_tokens_sum,
    sum(output_tokens)::BIGINT AS output_tokens_sum,
    count(input_tokens) AS n_input_tokens,
    count(output_tokens) AS n_output_tokens,
    sum(cost_usd) AS cost_usd_sum,
    sum(gpu_cost_usd) AS gpu_cost_usd_sum,
    1000 * sum(cost_usd) FILTER (WHERE priced_tokens IS NOT NULL)
      / NULLIF(sum(priced_tokens), 0) AS cost_per_1k_tokens_usd,
    1000 * sum(gpu_cost_usd) FILTER (WHERE gpu_tokens IS NOT NULL)
      / NULLIF(sum(gpu_tokens), 0) AS gpu_cost_per_1k_tokens_usd,
    sum(is_unpriced)::BIGINT AS unpriced_count,
    min(start_unix_nano) AS first_start_ns,
    max(end_unix_nano) AS last_end_ns
  FROM (SELECT *, {tps}, {priced} AS priced_tokens, {gpu} AS gpu_tokens FROM {source})
  {group}"""


def group_stats_sql(keys: Sequence[str], bucket_ns: int | None, need_end: bool) -> str:
    """Aggregates per group (``g_<key>`` columns) over ``calls`` (``need_end``: it has an
    ``end_unix_nano`` column)."""
    key_sel = ", ".join(_key_exprs(keys, bucket_ns))
    prefix = key_sel + ", " if key_sel else ""
    group = f"GROUP BY {', '.join('g_' + k for k in keys)}" if keys else ""
    source = "calls" if need_end else "(SELECT *, NULL::BIGINT AS end_unix_nano FROM calls)"
    return metrics_sql(prefix, source, group)


def _votes_sql(keys: Sequence[str], bucket_ns: int | None) -> str:
    """Effective thumbs votes per group over ``votes``: latest per (user, call)."""
    key_sel = ", ".join(_key_exprs(keys, bucket_ns))
    group = f"GROUP BY {', '.join('g_' + k for k in keys)}" if keys else ""
    return f"""
  SELECT {"".join(f"g_{k}, " for k in keys)}
    count(*) FILTER (WHERE kind = 'thumbs_up') AS up,
    count(*) FILTER (WHERE kind = 'thumbs_down') AS down
  FROM (
    SELECT {key_sel + ", " if key_sel else ""}kind FROM votes
    QUALIFY row_number() OVER (
      PARTITION BY coalesce('u:' || user_id, 'f:' || feedback_id), trace_id, span_id
      ORDER BY timestamp_unix_nano DESC, feedback_id DESC) = 1
  ) {group}"""


def _window_sql(bucket_ns: int | None, since_ns: int | None, until_ns: int | None) -> str:
    """SQL of the group's window in nanoseconds, as (lo, hi) expressions."""
    if bucket_ns is not None:
        lo, hi = "s.g_bucket", f"(s.g_bucket + {int(bucket_ns)})"
        lo = lo if since_ns is None else f"greatest({lo}, {int(since_ns)})"
        hi = hi if until_ns is None else f"least({hi}, {int(until_ns)})"
    else:
        lo = "s.first_start_ns" if since_ns is None else str(int(since_ns))
        hi = "s.last_end_ns" if until_ns is None else str(int(until_ns))
    return f"CASE WHEN {hi} > {lo} THEN ({hi} - {lo}) / 1e9 END"


def final_sql(
    keys: Sequence[str],
    *,
    bucket_ns: int | None,
    since_ns: int | None,
    until_ns: int | None,
    need_end: bool,
    stats_sql: str | None = None,
) -> str:
    """One statement from ``calls`` and ``votes`` to the output rows, column names final.

    ``stats_sql`` replaces the per-group aggregate over ``calls`` by another statement with the
    same columns (the lake answers from mergeable summaries this way, see
    :func:`collector.lake.summary.stats_sql`)."""
    out = []
    for k in keys:
        if k == "bucket":
            out.append(
                "strftime(make_timestamp(s.g_bucket // 1000), '%Y-%m-%dT%H:%M:%SZ') AS bucket"
            )
            out.append("s.g_bucket / 1e9 AS bucket_start_unix_s")
        else:
            out.append(f"s.g_{k} AS {k}")
    out += [
        "s.count",
        "s.error_count",
        "s.error_count / NULLIF(s.count, 0) AS error_rate",
        "s.rejection_count",
        "s.rejection_count / NULLIF(s.count, 0) AS rejection_rate",
    ]
    for f in LATENCY_FIELDS:
        out += [f"s.q_{f}[{i + 1}] AS {f}_{p}" for i, p in enumerate(("p50", "p95", "p99"))]
        out += [f"s.n_{f}", f"s.count - s.n_{f} AS null_{f}"]
    window = _window_sql(bucket_ns, since_ns, until_ns)
    out += [
        "s.output_tokens_per_s_p50",
        "s.n_output_tokens_per_s",
        f"{window} AS window_s",
        f"s.output_tokens_sum / ({window}) AS output_tokens_per_s_aggregate",
        "s.input_tokens_sum",
        "s.output_tokens_sum",
        "s.count - s.n_input_tokens AS null_input_tokens",
        "s.count - s.n_output_tokens AS null_output_tokens",
        "s.cost_usd_sum",
        "s.gpu_cost_usd_sum",
        "s.cost_per_1k_tokens_usd",
        "s.gpu_cost_per_1k_tokens_usd",
        "s.unpriced_count",
        "coalesce(v.up, 0) AS thumbs_up_count",
        "coalesce(v.down, 0) AS thumbs_down_count",
        "v.down / NULLIF(v.up + v.down, 0) AS thumbs_down_rate",
    ]
    on = " AND ".join(f"s.g_{k} IS NOT DISTINCT FROM v.g_{k}" for k in keys) or "TRUE"
    order = ", ".join(f"s.g_{k} NULLS LAST" for k in keys) or "s.count"
    return f"""
WITH s AS ({stats_sql or group_stats_sql(keys, bucket_ns, need_end)}),
v AS ({_votes_sql(keys, bucket_ns)})
SELECT {", ".join(out)}
FROM s LEFT JOIN v ON {on}
ORDER BY {order}
"""


def aggregate(
    con: duckdb.DuckDBPyConnection,
    keys: Sequence[str],
    *,
    bucket_ns: int | None,
    since_ns: int | None,
    until_ns: int | None,
    stats_sql: str | None = None,
) -> list[dict[str, Any]]:
    """Run the metric SQL over ``calls`` and ``votes`` registered on ``con`` (see the module
    docstring for every metric) and return one dict per group. With ``stats_sql`` (see
    :func:`final_sql`) the per-group aggregates come from that statement instead of ``calls``."""
    need_end = stats_sql is not None or "end_unix_nano" in [
        c[0] for c in con.execute("DESCRIBE calls").fetchall()
    ]
    sql = final_sql(
        keys,
        bucket_ns=bucket_ns,
        since_ns=since_ns,
        until_ns=until_ns,
        need_end=need_end,
        stats_sql=stats_sql,
    )
    rel = con.sql(sql)
    rows: list[dict[str, Any]] = rel.to_arrow_table().to_pylist() if rel is not None else []
    return rows
