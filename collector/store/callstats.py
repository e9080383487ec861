"""The DuckDB side of :func:`collector.store.analytics.call_stats`: group keys and metric SQL.

Input relations (registered Arrow tables): ``calls`` with the columns of
:func:`needed_columns` and ``votes`` (linked thumbs votes joined to their call). No I/O here.

Metrics per group (units in the names; None when unknown, never 0):

* ``count``; ``error_count`` / ``error_rate``: ``status = 'error'`` over ``count``;
  ``rejection_count`` / ``rejection_rate``: ``lower(error_type)`` in
  :data:`REJECTION_ERROR_TYPES` (HTTP 429 / overload / queue full) over ``count``.
* ``<f>_p50`` / ``_p95`` / ``_p99`` for ``f`` in ttft_s, tpot_s, e2e_s, queue_s: linear
  interpolation between order statistics (Hyndman & Fan 1996 type 7, numpy's default,
  DuckDB ``quantile_cont``) over the non-null values; ``n_<f>`` values used, ``null_<f>``
  calls where it is unknown.
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

import datetime as dt
from collections.abc import Sequence
from typing import Any

import duckdb

GROUP_KEYS: tuple[str, ...] = ("model", "variant", "rollout", "service", "tenant", "bucket")
#: lower-cased ``error.type`` values that mean the request was refused for load (HTTP 429,
#: overload, a full queue), counted as rejections
REJECTION_ERROR_TYPES: frozenset[str] = frozenset(
    {"429", "rate_limited", "too_many_requests", "queue_full", "rejected", "overloaded"}
)
LATENCY_FIELDS: tuple[str, ...] = ("ttft_s", "tpot_s", "e2e_s", "queue_s")
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
            ``bucket_s``, or ``bucket_s`` below 1 second.
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
        if not bucket_s >= 1:
            raise ValueError(f"bucket_s must be at least 1 second, got {bucket_s}")
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


def _quantiles(field: str) -> str:
    return f"quantile_cont({field}, [0.5, 0.95, 0.99]) AS q_{field}"


def _stats_sql(keys: Sequence[str], bucket_ns: int | None, need_end: bool) -> str:
    key_sel = ", ".join(_key_exprs(keys, bucket_ns))
    prefix = key_sel + ", " if key_sel else ""
    group = f"GROUP BY {', '.join('g_' + k for k in keys)}" if keys else ""
    source = "calls" if need_end else "(SELECT *, NULL::BIGINT AS end_unix_nano FROM calls)"
    tps = (
        "CASE WHEN output_tokens > 0 AND e2e_s - ttft_s > 0 "
        "THEN output_tokens / (e2e_s - ttft_s) END AS tps"
    )
    known = "input_tokens IS NOT NULL AND output_tokens IS NOT NULL"
    priced = f"CASE WHEN cost_usd IS NOT NULL AND {known} THEN input_tokens + output_tokens END"
    gpu = f"CASE WHEN gpu_cost_usd IS NOT NULL AND {known} THEN input_tokens + output_tokens END"
    latency = ",\n".join(
        f"{_quantiles(f)}, count({f}) AS n_{f}, count(*) - count({f}) AS null_{f}"
        for f in LATENCY_FIELDS
    )
    return f"""
WITH c AS (
  SELECT {prefix}*, {tps}, {priced} AS priced_tokens, {gpu} AS gpu_tokens
  FROM {source}
)
SELECT {"".join(f"g_{k} AS {k}, " for k in keys)}
  count(*) AS count,
  sum(is_error) AS error_count,
  sum(is_rejected) AS rejection_count,
  {latency},
  quantile_cont(tps, 0.5) AS output_tokens_per_s_p50,
  count(tps) AS n_output_tokens_per_s,
  sum(input_tokens) AS input_tokens_sum,
  sum(output_tokens) AS output_tokens_sum,
  count(*) - count(input_tokens) AS null_input_tokens,
  count(*) - count(output_tokens) AS null_output_tokens,
  sum(cost_usd) AS cost_usd_sum,
  sum(gpu_cost_usd) AS gpu_cost_usd_sum,
  1000 * sum(cost_usd) FILTER (WHERE priced_tokens IS NOT NULL)
    / NULLIF(sum(priced_tokens), 0) AS cost_per_1k_tokens_usd,
  1000 * sum(gpu_cost_usd) FILTER (WHERE gpu_tokens IS NOT NULL)
    / NULLIF(sum(gpu_tokens), 0) AS gpu_cost_per_1k_tokens_usd,
  sum(is_unpriced) AS unpriced_count,
  min(start_unix_nano) AS first_start_ns,
  max(end_unix_nano) AS last_end_ns
FROM c {group}
ORDER BY {", ".join(f"g_{k} NULLS LAST" for k in keys) if keys else "count"}
"""


def _votes_sql(keys: Sequence[str], bucket_ns: int | None) -> str:
    key_sel = ", ".join(_key_exprs(keys, bucket_ns))
    group = f"GROUP BY {', '.join('g_' + k for k in keys)}" if keys else ""
    return f"""
WITH v AS (
  SELECT {key_sel + ", " if key_sel else ""}* FROM votes
  QUALIFY row_number() OVER (
    PARTITION BY coalesce('u:' || user_id, 'f:' || feedback_id), trace_id, span_id
    ORDER BY timestamp_unix_nano DESC, feedback_id DESC) = 1
)
SELECT {"".join(f"g_{k} AS {k}, " for k in keys)}
  count(*) FILTER (WHERE kind = 'thumbs_up') AS up,
  count(*) FILTER (WHERE kind = 'thumbs_down') AS down
FROM v {group}
"""


def _iso(ns: int) -> str:
    return dt.datetime.fromtimestamp(ns / 1e9, tz=dt.UTC).isoformat().replace("+00:00", "Z")


def _rows(con: duckdb.DuckDBPyConnection, sql: str) -> list[dict[str, Any]]:
    cur = con.execute(sql)
    names = [d[0] for d in cur.description or []]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def _window_s(
    row: dict[str, Any], bucket_ns: int | None, since_ns: int | None, until_ns: int | None
) -> float | None:
    if bucket_ns is not None:
        if row["bucket"] is None:
            return None
        lo, hi = row["bucket"], row["bucket"] + bucket_ns
        lo = lo if since_ns is None else max(lo, since_ns)
        hi = hi if until_ns is None else min(hi, until_ns)
    elif since_ns is not None and until_ns is not None:
        lo, hi = since_ns, until_ns
    else:
        lo = row["first_start_ns"] if since_ns is None else since_ns
        hi = row["last_end_ns"] if until_ns is None else until_ns
        if lo is None or hi is None:
            return None
    return (hi - lo) / 1e9 if hi > lo else None


def _ratio(num: float | None, den: float | None) -> float | None:
    return None if num is None or not den else num / den


def aggregate(
    con: duckdb.DuckDBPyConnection,
    keys: Sequence[str],
    *,
    bucket_ns: int | None,
    since_ns: int | None,
    until_ns: int | None,
) -> list[dict[str, Any]]:
    """Run the metric SQL over ``calls`` and ``votes`` registered on ``con`` (see the module
    docstring for every metric) and return one dict per group."""
    need_end = "end_unix_nano" in [c[0] for c in con.execute("DESCRIBE calls").fetchall()]
    stats = _rows(con, _stats_sql(keys, bucket_ns, need_end))
    votes = {tuple(r[k] for k in keys): r for r in _rows(con, _votes_sql(keys, bucket_ns))}
    out = []
    for row in stats:
        group = tuple(row[k] for k in keys)
        item: dict[str, Any] = {}
        for k in keys:
            if k == "bucket":
                b = row["bucket"]
                item["bucket"] = None if b is None else _iso(b)
                item["bucket_start_unix_s"] = None if b is None else b / 1e9
            else:
                item[k] = row[k]
        window = _window_s(row, bucket_ns, since_ns, until_ns)
        count = row["count"]
        item |= {
            "count": count,
            "error_count": row["error_count"],
            "error_rate": _ratio(row["error_count"], count),
            "rejection_count": row["rejection_count"],
            "rejection_rate": _ratio(row["rejection_count"], count),
        }
        for f in LATENCY_FIELDS:
            q = row[f"q_{f}"]
            for name, i in (("p50", 0), ("p95", 1), ("p99", 2)):
                item[f"{f}_{name}"] = None if q is None else q[i]
            item[f"n_{f}"] = row[f"n_{f}"]
            item[f"null_{f}"] = row[f"null_{f}"]
        item["output_tokens_per_s_p50"] = row["output_tokens_per_s_p50"]
        item["n_output_tokens_per_s"] = row["n_output_tokens_per_s"]
        item["window_s"] = window
        item["output_tokens_per_s_aggregate"] = _ratio(row["output_tokens_sum"], window)
        for name in (
            "input_tokens_sum",
            "output_tokens_sum",
            "null_input_tokens",
            "null_output_tokens",
            "cost_usd_sum",
            "gpu_cost_usd_sum",
            "cost_per_1k_tokens_usd",
            "gpu_cost_per_1k_tokens_usd",
            "unpriced_count",
        ):
            item[name] = row[name]
        v = votes.get(group)
        up = v["up"] if v else 0
        down = v["down"] if v else 0
        item["thumbs_up_count"] = up
        item["thumbs_down_count"] = down
        item["thumbs_down_rate"] = _ratio(down, up + down)
        out.append(item)
    return out
