"""Mergeable per-hour summaries of calls, and KPIs answered from them.

A summary row holds, per (hour, model, variant, rollout, service_name): counts and sums that add
exactly, the first start / last end, and for every latency field (and the per-request decode
rate) an exact histogram on fixed logarithmic bins. Histograms of any set of hours and groups
merge by adding counts per bin, so a month of hourly percentiles per model is answered from
720 × groups rows instead of a rescan of every call.

Bins (the DDSketch mapping: Masson, Rim & Lee, "DDSketch: a fast and fully-mergeable quantile
sketch with relative-error guarantees", VLDB 2019): bin 0 holds ``[0, MIN_VALUE)``; bin ``k >=
1`` holds ``[MIN_VALUE·γ^(k-1), MIN_VALUE·γ^k)`` with ``γ = (1 + α) / (1 - α)``; the bin's value
is ``2·MIN_VALUE·γ^k / (1 + γ)``, within a relative ``α`` of every value in it. Values above
``MAX_VALUE`` land in the last bin (clamped).

Guarantee (:data:`RELATIVE_ERROR` = α = 1 %): for values in ``[MIN_VALUE, MAX_VALUE]`` the
percentile answered from a summary is within a relative α of the exact type-7 percentile
(``quantile_cont``, linear interpolation between the order statistics ``x_(⌊h⌋)`` and
``x_(⌈h⌉)``, h = p·(n − 1)): each order statistic is replaced by its bin's value (relative error
≤ α) and the same interpolation of two values each within α is within α. Values below
``MIN_VALUE`` have an absolute error below ``MIN_VALUE`` (1 µs, 1e-6 tokens/s). Counts, sums,
rates and costs are exact (floating-point sums up to rounding).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import duckdb
import pyarrow as pa

from collector.lake.layout import HOUR_NS
from collector.store.callstats import LATENCY_FIELDS

#: relative error α of a percentile answered from a summary
RELATIVE_ERROR = 0.01
GAMMA = (1 + RELATIVE_ERROR) / (1 - RELATIVE_ERROR)
MIN_VALUE = 1e-6
MAX_VALUE = 1e6
MAX_BIN = math.ceil(math.log(MAX_VALUE / MIN_VALUE) / math.log(GAMMA))
#: summary group columns (``llm_calls`` names)
SUMMARY_KEYS: tuple[str, ...] = ("model", "variant", "rollout", "service_name")
#: histogrammed fields: the latency fields and ``tps`` (output tokens per second of decode)
HIST_FIELDS: tuple[str, ...] = (*LATENCY_FIELDS, "tps")
#: columns of the raw ``calls`` relation the summary reads
RAW_COLUMNS: tuple[str, ...] = (
    *SUMMARY_KEYS,
    "start_unix_nano",
    "end_unix_nano",
    "is_error",
    "is_rejected",
    "is_unpriced",
    *LATENCY_FIELDS,
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "gpu_cost_usd",
)


def bin_sql(x: str) -> str:
    """DuckDB expression: the bin index (INTEGER) of value ``x`` (NULL stays NULL)."""
    return (
        f"CASE WHEN {x} IS NULL THEN NULL WHEN {x} < {MIN_VALUE!r} THEN 0 ELSE "
        f"least({MAX_BIN}, floor(ln({x} / {MIN_VALUE!r}) / {math.log(GAMMA)!r})::INTEGER + 1) END"
    )


def value_sql(b: str) -> str:
    """DuckDB expression: the value of bin ``b`` (0.0 for bin 0)."""
    scale = 2 * MIN_VALUE / (1 + GAMMA)
    return f"CASE WHEN {b} = 0 THEN 0.0 ELSE {scale!r} * pow({GAMMA!r}, {b}) END"


def summarize_sql(source: str) -> str:
    """SQL: one summary row per (hour, keys) over the raw relation ``source`` (columns
    :data:`RAW_COLUMNS`). ``hour_ns`` is NULL for calls whose start is unknown."""
    keys = ", ".join(SUMMARY_KEYS)
    tps = (
        "CASE WHEN output_tokens > 0 AND e2e_s - ttft_s > 0 "
        "THEN output_tokens / (e2e_s - ttft_s) END"
    )
    known = "input_tokens IS NOT NULL AND output_tokens IS NOT NULL"
    hists = []
    for f in HIST_FIELDS:
        hists.append(
            f"map_entries(histogram({bin_sql(f)}))::STRUCT(key INTEGER, value BIGINT)[] AS h_{f}"
        )
    counts = ",\n    ".join(f"count({f})::BIGINT AS n_{f}" for f in HIST_FIELDS)
    return f"""
  SELECT hour_ns, {keys},
    count(*)::BIGINT AS count,
    sum(is_error)::BIGINT AS error_count,
    sum(is_rejected)::BIGINT AS rejection_count,
    sum(is_unpriced)::BIGINT AS unpriced_count,
    {counts},
    count(input_tokens)::BIGINT AS n_input_tokens,
    count(output_tokens)::BIGINT AS n_output_tokens,
    sum(input_tokens)::BIGINT AS input_tokens_sum,
    sum(output_tokens)::BIGINT AS output_tokens_sum,
    sum(cost_usd) AS cost_usd_sum,
    sum(gpu_cost_usd) AS gpu_cost_usd_sum,
    sum(cost_usd) FILTER (WHERE {known}) AS priced_cost_sum,
    sum(input_tokens + output_tokens) FILTER (WHERE cost_usd IS NOT NULL AND {known})::BIGINT
      AS priced_tokens_sum,
    sum(gpu_cost_usd) FILTER (WHERE {known}) AS gpu_priced_cost_sum,
    sum(input_tokens + output_tokens) FILTER (WHERE gpu_cost_usd IS NOT NULL AND {known})::BIGINT
      AS gpu_tokens_sum,
    min(start_unix_nano) AS first_start_ns,
    max(end_unix_nano) AS last_end_ns,
    {", ".join(hists)}
  FROM (SELECT *, (start_unix_nano // {HOUR_NS}) * {HOUR_NS} AS hour_ns, {tps} AS tps
        FROM {source})
  GROUP BY hour_ns, {keys}"""


def summarize(calls: pa.Table, con: duckdb.DuckDBPyConnection | None = None) -> pa.Table:
    """Summary rows (see the module docstring) of a raw calls table with :data:`RAW_COLUMNS`;
    ``con`` reuses an open DuckDB connection (opening one costs more than a small hour)."""
    own = con is None
    con = duckdb.connect() if con is None else con
    try:
        con.register("raw_calls", calls.select(list(RAW_COLUMNS)))
        out = con.sql(
            summarize_sql("raw_calls") + " ORDER BY hour_ns, " + ", ".join(SUMMARY_KEYS)
        ).to_arrow_table()
        con.unregister("raw_calls")
        return out
    finally:
        if own:
            con.close()


_KEY_COLUMN = {
    "model": "model",
    "variant": "variant",
    "rollout": "rollout",
    "service": "service_name",
}


def eligible(keys: Sequence[str], bucket_ns: int | None, filter_columns: Sequence[str]) -> bool:
    """Whether a stats request can be answered from summaries: group keys among model, variant,
    rollout, service and bucket; a bucket a whole number of hours; filters on those keys."""
    if any(k not in _KEY_COLUMN and k != "bucket" for k in keys):
        return False
    if bucket_ns is not None and bucket_ns % HOUR_NS != 0:
        return False
    return all(c in SUMMARY_KEYS for c in filter_columns)


def bin_quantiles_sql(
    bins: str, groups: Sequence[str], quantiles: Sequence[float] = (0.5, 0.95, 0.99)
) -> str:
    """SQL: merged-histogram percentiles. ``bins`` is a relation with the columns ``groups``,
    ``f`` (a field name), ``b`` (a bin index, :func:`bin_sql`) and ``n`` (values in that bin;
    one row per group, field and bin). The result has one row per group and field: the
    ``groups`` columns, ``f``, ``n`` (BIGINT, values counted) and ``q`` (DOUBLE[], one entry
    per ``quantiles`` value, in order): the type-7 percentile (``quantile_cont``) with each
    order statistic replaced by its bin's value (:func:`value_sql`), hence within a relative
    :data:`RELATIVE_ERROR` of the exact percentile of the same values (module docstring). A
    NULL group value is a group of its own (as ``GROUP BY``).

    Raises:
        ValueError: a quantile outside ``[0, 1]``, or none.
    """
    if not quantiles or any(not 0.0 <= float(p) <= 1.0 for p in quantiles):
        raise ValueError(f"quantiles: expected values in [0, 1], got {list(quantiles)}")
    gsel = "".join(f"{g}, " for g in groups)
    part = f"PARTITION BY {gsel}f"
    qs = []
    for p in quantiles:
        h = f"({float(p)!r} * (total - 1))"
        lo = f"min(b) FILTER (WHERE cum > floor({h}))"
        hi = f"min(b) FILTER (WHERE cum > ceil({h}))"
        frac = f"(any_value({h}) - floor(any_value({h})))"
        v_lo, v_hi = value_sql(f"({lo})"), value_sql(f"({hi})")
        qs.append(f"{v_lo} + {frac} * ({v_hi} - {v_lo})")
    return (
        f"SELECT {gsel}f, any_value(total)::BIGINT AS n, [{', '.join(qs)}] AS q FROM ("
        f"SELECT *, sum(n) OVER ({part} ORDER BY b) AS cum, sum(n) OVER ({part}) AS total "
        f"FROM {bins}) GROUP BY {gsel}f"
    )


def stats_sql(keys: Sequence[str], bucket_ns: int | None) -> str:
    """SQL over the summary relation ``summ`` giving the per-group columns that
    :func:`collector.store.callstats.final_sql` reads from its ``s`` relation."""
    kx = []
    for k in keys:
        if k == "bucket":
            w = int(bucket_ns or HOUR_NS)
            kx.append(f"(hour_ns // {w}) * {w} AS g_bucket")
        else:
            kx.append(f"{_KEY_COLUMN[k]} AS g_{k}")
    gsel = "".join(f"g_{k}, " for k in keys)
    group = f"GROUP BY {', '.join('g_' + k for k in keys)}" if keys else ""
    unnests = " UNION ALL ".join(
        f"SELECT {gsel}'{f}' AS f, unnest(h_{f}) AS e FROM base" for f in HIST_FIELDS
    )
    qsel = ",\n      ".join(
        f"any_value(q) FILTER (WHERE f = '{f}') AS q_{f}" for f in LATENCY_FIELDS
    )
    on = " AND ".join(f"a.g_{k} IS NOT DISTINCT FROM q.g_{k}" for k in keys) or "TRUE"
    qgroup = f"GROUP BY {', '.join('g_' + k for k in keys)}" if keys else ""
    perf = bin_quantiles_sql("bins", [f"g_{k}" for k in keys], (0.5, 0.95, 0.99))
    return f"""
  WITH base AS (SELECT {", ".join(kx) + ", " if kx else ""}* FROM summ),
  agg AS (
    SELECT {gsel}
      sum(count)::BIGINT AS count,
      sum(error_count)::BIGINT AS error_count,
      sum(rejection_count)::BIGINT AS rejection_count,
      {", ".join(f"sum(n_{f})::BIGINT AS n_{f}" for f in LATENCY_FIELDS)},
      sum(n_tps)::BIGINT AS n_output_tokens_per_s,
      sum(input_tokens_sum)::BIGINT AS input_tokens_sum,
      sum(output_tokens_sum)::BIGINT AS output_tokens_sum,
      sum(n_input_tokens)::BIGINT AS n_input_tokens,
      sum(n_output_tokens)::BIGINT AS n_output_tokens,
      sum(cost_usd_sum) AS cost_usd_sum,
      sum(gpu_cost_usd_sum) AS gpu_cost_usd_sum,
      1000 * sum(priced_cost_sum) / NULLIF(sum(priced_tokens_sum), 0) AS cost_per_1k_tokens_usd,
      1000 * sum(gpu_priced_cost_sum) / NULLIF(sum(gpu_tokens_sum), 0)
        AS gpu_cost_per_1k_tokens_usd,
      sum(unpriced_count)::BIGINT AS unpriced_count,
      min(first_start_ns) AS first_start_ns,
      max(last_end_ns) AS last_end_ns
    FROM base {group}),
  bins AS (
    SELECT {gsel}f, e.key AS b, sum(e.value)::BIGINT AS n FROM ({unnests})
    GROUP BY {gsel}f, e.key),
  perf AS ({perf}),
  q AS (
    SELECT {gsel}
      {qsel},
      any_value(q[1]) FILTER (WHERE f = 'tps') AS output_tokens_per_s_p50
    FROM perf {qgroup})
  SELECT a.*, {", ".join(f"q.q_{f}" for f in LATENCY_FIELDS)}, q.output_tokens_per_s_p50
  FROM agg a LEFT JOIN q ON {on}"""
