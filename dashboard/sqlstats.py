"""The dashboard's chart aggregations computed inside DuckDB, over the calls where they lie
(:func:`collector.lake.aggregate.aggregate_calls`: sealed Parquet plus the store's hot tail),
instead of over a pandas frame of every call.

Each function returns what its :mod:`dashboard.stats` counterpart returns for the frame of the
same calls (same columns, dtypes, row order and definitions; ``tests/dashboard/test_sqlstats.py``
compares them on one store): counts, token sums and rates exactly, percentiles as DuckDB's
``quantile_cont`` (the same definition 7 as pandas), floating-point sums (USD) up to the order
in which rows are added. Times are unix nanoseconds in arguments, seconds in rates, USD.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from collector.lake import aggregate
from collector.lake.layout import Lake
from collector.store import callstats
from dashboard import stats

#: the blanks trimmed off an ``error_type`` before it is compared, as
#: :func:`collector.store.callstats.is_rate_limited` and the store's SQL do
_WHITESPACE = callstats.ERROR_TYPE_BLANKS
_KINDS = ", ".join(f"'{k}'" for k in sorted(callstats.REJECTION_ERROR_TYPES))
#: SQL of "this call was rate-limited" (:data:`collector.store.callstats.REJECTION_ERROR_TYPES`)
RATE_LIMITED_SQL = f"coalesce(lower(trim(error_type, '{_WHITESPACE}')) IN ({_KINDS}), false)"
_KNOWN_TOKENS = "(input_tokens IS NOT NULL OR output_tokens IS NOT NULL)"
_TOKENS = "(coalesce(input_tokens, 0) + coalesce(output_tokens, 0))"
_UNPRICED = "coalesce(is_unpriced, 0) <> 0"
_QS = "[" + ", ".join(repr(float(q)) for q in stats.QUANTILES) + "]"
_QNAMES = [f"p{round(q * 100)}" for q in stats.QUANTILES]


def step_ns(bucket_s: int) -> int:
    if bucket_s < 1:
        raise ValueError("bucket_s must be at least 1")
    return bucket_s * 1_000_000_000


def label_sql(by: Sequence[str]) -> str:
    """SQL of :func:`dashboard.stats.group_label` (``"?"`` for an unknown value)."""
    if not by:
        return "'all'"
    return " || ' / ' || ".join(f"coalesce(CAST(\"{c}\" AS VARCHAR), '?')" for c in by)


def _quantiles(values: object) -> dict[str, float | None]:
    """``{"p50": ..}`` of a ``quantile_cont`` list (None: no known value)."""
    if values is None:
        return dict.fromkeys(_QNAMES)
    return {n: _opt(v) for n, v in zip(_QNAMES, list(values), strict=True)}  # type: ignore[call-overload]


def _opt(v: float | None) -> float | None:
    return None if v is None or math.isnan(v) else float(v)


def traffic(
    database_url: str,
    lake: Lake | None,
    tenant: str,
    since_ns: int,
    until_ns: int,
    filters: Mapping[str, str],
    bucket_s: int,
) -> tuple[stats.TrafficSummary, pd.DataFrame]:
    """(:func:`dashboard.stats.summarize` over :func:`dashboard.stats.observed_span_s`,
    :func:`dashboard.stats.traffic_over_time` per ``bucket_s`` seconds) of the tenant's calls
    in ``[since_ns, until_ns)`` matching ``filters``: one scan, both groupings.

    Raises:
        ValueError: ``bucket_s`` < 1, an empty range or a bad filter.
    """
    step = step_ns(bucket_s)
    metrics = ", ".join(f"quantile_cont({m}, {_QS}) AS q_{m}" for m in ("ttft_s", "tpot_s"))
    # the window's counts and sums are those of its buckets added up (below); only its
    # quantiles need every value again: computing all aggregates twice (GROUPING SETS) cost
    # ~20 % more CPU on a month of the 1M-call benchmark store
    sql = f"""
WITH c AS MATERIALIZED (SELECT *, start_unix_nano // {step} * {step} AS b FROM calls)
SELECT * FROM (
  SELECT 0 AS whole, b AS bucket_ns, count(*) AS calls,
    count_if(status = 'error')::BIGINT AS errors,
    count_if({RATE_LIMITED_SQL})::BIGINT AS limited,
    count_if({_KNOWN_TOKENS})::BIGINT AS n_tokens,
    sum({_TOKENS}) FILTER (WHERE {_KNOWN_TOKENS})::BIGINT AS tokens,
    sum(cost_usd) AS cost_usd, {metrics},
    count_if({_UNPRICED})::BIGINT AS unpriced, min(start_unix_nano) AS first_ns
  FROM c GROUP BY b
  UNION ALL BY NAME SELECT 1 AS whole, {metrics} FROM c
) ORDER BY whole DESC, bucket_ns"""
    cols = ["start_unix_nano", "status", "error_type", "input_tokens", "output_tokens"]
    cols += ["cost_usd", "ttft_s", "tpot_s", "is_unpriced"]
    res = aggregate.aggregate_calls(
        database_url,
        lake,
        [tenant],
        sql,
        since_ns=since_ns,
        until_ns=until_ns,
        columns=cols,
        filters=filters,
    ).to_pylist()
    return traffic_result(res, since_ns, until_ns, bucket_s)


def traffic_result(
    res: Sequence[Mapping[str, Any]], since_ns: int, until_ns: int, bucket_s: int
) -> tuple[stats.TrafficSummary, pd.DataFrame]:
    """:func:`traffic`'s result from its statement's rows: first the window's row (``q_ttft_s``,
    ``q_tpot_s`` quantile lists), then one per bucket in order (``bucket_ns``, ``calls``,
    ``errors``, ``limited``, ``n_tokens`` (> 0 iff some call has a known token count),
    ``tokens``, ``cost_usd``, ``q_ttft_s``, ``q_tpot_s``, ``unpriced``, ``first_ns``)."""
    whole, buckets = res[0], res[1:]
    n = sum(int(r["calls"]) for r in buckets)
    if n == 0:
        empty = stats.summarize(pd.DataFrame(), 1.0)
        return empty, stats.traffic_over_time(pd.DataFrame(), bucket_s)
    costs = [r["cost_usd"] for r in buckets if r["cost_usd"] is not None]
    first = max(min(int(r["first_ns"]) for r in buckets), since_ns)
    window_s = max((until_ns - first) / 1e9, 1.0)
    n_tokens = sum(int(r["n_tokens"]) for r in buckets)
    summary = stats.TrafficSummary(
        calls=n,
        requests_per_s=n / window_s,
        error_rate=sum(int(r["errors"]) for r in buckets) / n,
        rate_limited_rate=sum(int(r["limited"]) for r in buckets) / n,
        ttft_s=_quantiles(whole["q_ttft_s"]),
        tpot_s=_quantiles(whole["q_tpot_s"]),
        tokens_per_s=float(sum(int(r["tokens"] or 0) for r in buckets)) / window_s
        if n_tokens
        else None,
        cost_usd=math.fsum(costs) if costs else None,
        unpriced_calls=sum(int(r["unpriced"]) for r in buckets),
    )
    calls = np.array([r["calls"] for r in buckets], dtype="int64")

    def col(key: str) -> np.ndarray:
        return np.array([np.nan if r[key] is None else r[key] for r in buckets], dtype="float64")

    out = pd.DataFrame(
        {
            "bucket": pd.to_datetime(
                np.array([r["bucket_ns"] for r in buckets], dtype="int64"), unit="ns", utc=True
            ),
            "calls": calls,
            "requests_per_s": calls / bucket_s,
            "error_rate": np.array([r["errors"] for r in buckets], dtype="float64") / calls,
            "rate_limited_rate": np.array([r["limited"] for r in buckets], dtype="float64") / calls,
            "tokens_per_s": col("tokens") / bucket_s,
            "cost_usd": col("cost_usd"),
        }
    )
    for m in ("ttft_s", "tpot_s"):
        qs = [r[f"q_{m}"] or [None] * len(_QNAMES) for r in buckets]
        for i, name in enumerate(_QNAMES):
            out[f"{m}_{name}"] = np.array(
                [np.nan if q[i] is None else q[i] for q in qs], dtype="float64"
            )
    return summary, out


def check_metrics(metrics: Sequence[str]) -> list[str]:
    """``metrics`` in :data:`dashboard.stats.LATENCY_METRICS` order; ValueError otherwise."""
    unknown = [m for m in metrics if m not in stats.LATENCY_METRICS]
    if unknown or not metrics:
        raise ValueError(f"metrics: expected some of {stats.LATENCY_METRICS}, got {metrics}")
    return [m for m in stats.LATENCY_METRICS if m in metrics]


def _percentiles_sql(step: int, by: Sequence[str], metrics: Sequence[str], source: str) -> str:
    """Per bucket and group label: ``n_<m>`` and the ``q_<m>`` quantile list of each metric,
    over ``source`` (unordered)."""
    aggs = ", ".join(
        f'count("{m}") AS "n_{m}", quantile_cont("{m}", {_QS}) AS "q_{m}"' for m in metrics
    )
    return (
        f"SELECT start_unix_nano // {step} * {step} AS bucket_ns, {label_sql(by)} AS label, "
        f"{aggs} FROM {source} GROUP BY ALL"
    )


def _percentiles_frame(res: pd.DataFrame, metrics: Sequence[str]) -> pd.DataFrame:
    """The long frame of :func:`percentiles_over_time` from :func:`_percentiles_sql`'s rows
    (ordered by bucket, label)."""
    cols = ["bucket", "group", "metric", "quantile", "value_s", "n"]
    frames = []
    for m in metrics:
        have = res[res[f"n_{m}"] > 0]
        if have.empty:
            continue
        values = np.array(have[f"q_{m}"].tolist(), dtype="float64")
        for i, name in enumerate(_QNAMES):
            frames.append(
                pd.DataFrame(
                    {
                        "bucket_ns": have["bucket_ns"].to_numpy(dtype="int64"),
                        "group": have["label"].to_numpy(dtype="object"),
                        "value_s": values[:, i],
                        "n": have[f"n_{m}"].to_numpy(dtype="int64"),
                        "metric": m,
                        "quantile": name,
                    }
                )
            )
    if not frames:
        return pd.DataFrame(columns=cols)
    out = pd.concat(frames, ignore_index=True)
    out["bucket"] = pd.to_datetime(out["bucket_ns"].to_numpy(dtype="int64"), unit="ns", utc=True)
    return out[cols]


def percentiles_over_time(
    database_url: str,
    lake: Lake | None,
    tenant: str,
    since_ns: int,
    until_ns: int,
    filters: Mapping[str, str],
    bucket_s: int,
    by: Sequence[str] = ("model", "variant"),
    metrics: Sequence[str] = stats.LATENCY_METRICS,
) -> pd.DataFrame:
    """:func:`dashboard.stats.percentiles_over_time` of the tenant's calls in
    ``[since_ns, until_ns)`` matching ``filters``: long frame ``bucket, group, metric,
    quantile, value_s, n``; only the rows of ``metrics`` (a subset of
    :data:`dashboard.stats.LATENCY_METRICS`, its order kept: each metric's quantiles are most
    of the statement's cost, so a page showing one metric asks for that one).

    Raises:
        ValueError: ``bucket_s`` < 1, an empty range, a bad filter, no metric or one not in
            :data:`dashboard.stats.LATENCY_METRICS`.
    """
    step = step_ns(bucket_s)
    metrics = check_metrics(metrics)
    sql = _percentiles_sql(step, by, metrics, "calls") + " ORDER BY bucket_ns, label"
    res = aggregate.aggregate_calls(
        database_url,
        lake,
        [tenant],
        sql,
        since_ns=since_ns,
        until_ns=until_ns,
        columns=["start_unix_nano", *by, *metrics],
        filters=filters,
    ).to_pandas()
    return _percentiles_frame(res, metrics)


def cost(
    database_url: str,
    lake: Lake | None,
    tenants: Sequence[str],
    since_ns: int,
    until_ns: int,
    by: Sequence[str],
    bucket_s: int,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(:func:`dashboard.stats.cost_breakdown`, :func:`dashboard.stats.cost_per_1k_over_time`
    per ``bucket_s``) of the calls of ``tenants`` in ``[since_ns, until_ns)``, grouped by
    ``by`` (columns of a call frame, or ``tenant``): one scan, both groupings.

    Raises:
        ValueError: ``bucket_s`` < 1 or an empty range.
    """
    step = step_ns(bucket_s)
    keys = ", ".join(f'coalesce(CAST("{c}" AS VARCHAR), \'?\') AS "k_{c}"' for c in by)
    row_usd = (
        "CASE WHEN cost_usd IS NULL AND gpu_cost_usd IS NULL THEN NULL "
        "ELSE coalesce(cost_usd, 0) + coalesce(gpu_cost_usd, 0) END"
    )
    key_set = ", ".join(f'"k_{c}"' for c in by)
    # one grouping by bucket and key, added up per key (the breakdown) and per bucket and
    # label (the trend) here: every aggregate is a count or a sum (GROUPING SETS computed
    # each twice over every call)
    sql = f"""
SELECT {key_set}, bucket_ns, count(*) AS calls,
  sum({_TOKENS})::BIGINT AS tokens, sum(cost_usd) AS cost_usd,
  sum(gpu_cost_usd) AS gpu_cost_usd, sum(usd) AS usd,
  count_if({_UNPRICED})::BIGINT AS unpriced_calls
FROM (SELECT *, {keys}, start_unix_nano // {step} * {step} AS bucket_ns,
        {row_usd} AS usd FROM calls)
GROUP BY ALL"""
    columns = ["start_unix_nano", *by, "input_tokens", "output_tokens"]
    columns += ["cost_usd", "gpu_cost_usd", "is_unpriced"]
    fine = aggregate.aggregate_calls(
        database_url,
        lake,
        list(tenants),
        sql,
        since_ns=since_ns,
        until_ns=until_ns,
        columns=columns,
    ).to_pandas()
    return cost_result(fine, by, bucket_s)


#: the aggregates of :func:`cost`'s statement per key and bucket (besides ``k_<c>``, ``bucket_ns``)
COST_AGGREGATES = ("calls", "tokens", "cost_usd", "gpu_cost_usd", "usd", "unpriced_calls")


def cost_result(
    fine: pd.DataFrame, by: Sequence[str], bucket_s: int
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`cost`'s result from its statement's rows: one per key (``k_<c>`` for ``c`` in
    ``by``, unknown as ``"?"``) and ``bucket_ns`` with :data:`COST_AGGREGATES` (``usd``: priced
    plus GPU USD, NULL when neither is known)."""
    if fine.empty:
        empty = pd.DataFrame()
        return stats.cost_breakdown(empty, by), stats.cost_per_1k_over_time(empty, bucket_s, by)
    for c in ("cost_usd", "gpu_cost_usd", "usd"):
        fine[c] = fine[c].to_numpy(dtype="float64", na_value=np.nan)
    sums = ["calls", "tokens", "cost_usd", "gpu_cost_usd", "unpriced_calls"]
    # min_count=1: a group without a known USD value stays unknown (as SQL's sum)
    groups = fine.groupby([f"k_{c}" for c in by], sort=False, as_index=False)[sums].sum(min_count=1)
    fine["label"] = fine[f"k_{by[0]}"].str.cat([fine[f"k_{c}"] for c in by[1:]], sep=" / ")
    trend = fine.groupby(["bucket_ns", "label"], sort=True, as_index=False)[["tokens", "usd"]].sum(
        min_count=1
    )
    # the breakdown: groups in key order (as pandas' groupby), then by total as there
    table = pd.DataFrame({c: groups[f"k_{c}"].to_numpy(dtype="object") for c in by})
    table["calls"] = groups["calls"].to_numpy(dtype="int64")
    table["tokens"] = groups["tokens"].to_numpy(dtype="float64")
    table["cost_usd"] = groups["cost_usd"].to_numpy(dtype="float64", na_value=np.nan)
    table["gpu_cost_usd"] = groups["gpu_cost_usd"].to_numpy(dtype="float64", na_value=np.nan)
    table["unpriced_calls"] = groups["unpriced_calls"].to_numpy(dtype="int64")
    table = table.sort_values(list(by), kind="stable").reset_index(drop=True)
    table["total_usd"] = table[["cost_usd", "gpu_cost_usd"]].sum(axis=1, min_count=1)
    per_k = table["total_usd"] / (table["tokens"] / 1000.0)
    table["usd_per_1k_tokens"] = per_k.where(table["tokens"] > 0)
    cols = [*by, "calls", "tokens", "cost_usd", "gpu_cost_usd", "total_usd"]
    cols += ["usd_per_1k_tokens", "unpriced_calls"]
    table = table[cols].sort_values("total_usd", ascending=False, na_position="last")
    usd = trend["usd"].to_numpy(dtype="float64", na_value=np.nan)
    tokens = trend["tokens"].to_numpy(dtype="float64")
    with np.errstate(divide="ignore", invalid="ignore"):
        per_1k = np.where(tokens > 0, usd / (tokens / 1000.0), np.nan)
    keep = ~np.isnan(per_1k)
    out = pd.DataFrame(
        {
            "bucket": pd.to_datetime(
                trend["bucket_ns"].to_numpy(dtype="int64")[keep], unit="ns", utc=True
            ),
            "group": trend["label"].to_numpy(dtype="object")[keep],
            "usd_per_1k_tokens": per_1k[keep],
        }
    )
    return table, out


def variant_counts(
    database_url: str,
    lake: Lake | None,
    tenant: str,
    since_ns: int,
    until_ns: int,
    by: str = "variant",
) -> pd.DataFrame:
    """:func:`dashboard.stats.feedback_rates` without feedback events: ``by, calls`` (``"?"``
    for an unknown value), sorted by ``by``.

    Raises:
        ValueError: an empty range or an unknown column ``by``.
    """
    sql = (
        f'SELECT coalesce(CAST("{by}" AS VARCHAR), \'?\') AS "{by}", count(*) AS calls '
        f'FROM calls GROUP BY ALL ORDER BY "{by}"'
    )
    res = aggregate.aggregate_calls(
        database_url, lake, [tenant], sql, since_ns=since_ns, until_ns=until_ns, columns=[by]
    ).to_pandas()
    return pd.DataFrame(
        {by: res[by].to_numpy(dtype="object"), "calls": res["calls"].to_numpy(dtype="int64")}
    )


#: (label, field) of the Latency page's per-bucket chart of engine-side latencies
ENGINE_SERIES: tuple[tuple[str, str], ...] = (
    ("ITL", "itl_p50_s"),
    ("engine TTFT", "server_ttft_s"),
)


def _engine_sql(step: int, source: str) -> str:
    """Per model and bucket: the ``q_<field>`` quantile lists of :data:`ENGINE_SERIES` over
    ``source`` (unordered)."""
    aggs = ", ".join(f"quantile_cont({f}, {_QS}) AS q_{f}" for _label, f in ENGINE_SERIES)
    return (
        f"SELECT model, start_unix_nano // {step} * {step} AS bucket_ns, {aggs} "
        f"FROM {source} GROUP BY ALL"
    )


def _engine_frame(res: list[dict[str, Any]]) -> pd.DataFrame:
    """The long frame of :func:`engine_latency_over_time` from :func:`_engine_sql`'s rows
    (ordered by model, nulls last, then bucket)."""
    cols = ["bucket", "group", "quantile", "value_ms"]
    rows = [
        {
            "bucket": pd.to_datetime(r["bucket_ns"] / 1e9, unit="s", utc=True),
            "group": f"{r['model'] or '?'} {label}",
            "quantile": name,
            "value_ms": r[f"q_{f}"][i] * 1000.0,
        }
        for r in res
        for label, f in ENGINE_SERIES
        for i, name in enumerate(_QNAMES)
        if r[f"q_{f}"] is not None and r[f"q_{f}"][i] is not None
    ]
    return pd.DataFrame(rows, columns=cols)


def engine_latency_over_time(
    database_url: str,
    lake: Lake | None,
    tenant: str,
    since_ns: int,
    until_ns: int,
    bucket_s: int,
) -> pd.DataFrame:
    """Long frame ``bucket, group, quantile, value_ms``: per ``bucket_s`` bucket and model
    (``"?"`` unknown), the p50 / p95 / p99 (ms) over calls of each :data:`ENGINE_SERIES` field
    (``group`` = ``"<model> <label>"``), buckets without a known value left out; the values
    :func:`collector.lake.stats.call_stats` by model and bucket gives for these fields (the
    same ``quantile_cont``), rows in its order (model, nulls last, then bucket), without its
    other metrics.

    Raises:
        ValueError: ``bucket_s`` < 1 or an empty range.
    """
    step = step_ns(bucket_s)
    sql = _engine_sql(step, "calls") + " ORDER BY model NULLS LAST, bucket_ns"
    res = aggregate.aggregate_calls(
        database_url,
        lake,
        [tenant],
        sql,
        since_ns=since_ns,
        until_ns=until_ns,
        columns=["model", "start_unix_nano", *(f for _label, f in ENGINE_SERIES)],
    ).to_pylist()
    return _engine_frame(res)


def _by_model_sql(fields: Sequence[str], source: str) -> str:
    """Per model: ``n_<f>`` and the ``q_<f>`` quantile list of each of ``fields`` over
    ``source`` (unordered)."""
    aggs = ", ".join(
        f'count("{f}") AS "n_{f}", quantile_cont("{f}", {_QS}) AS "q_{f}"' for f in fields
    )
    return f"SELECT model, {aggs} FROM {source} GROUP BY ALL"


def _by_model_rows(res: list[dict[str, Any]], fields: Sequence[str]) -> list[dict[str, Any]]:
    """``model, n_<f>, <f>_p50, <f>_p95, <f>_p99`` per model from :func:`_by_model_sql`'s
    rows."""
    out = []
    for r in res:
        row: dict[str, Any] = {"model": r["model"]}
        for f in fields:
            row[f"n_{f}"] = r[f"n_{f}"]
            q = r[f"q_{f}"] or [None] * len(_QNAMES)
            row.update({f"{f}_{name}": q[i] for i, name in enumerate(_QNAMES)})
        out.append(row)
    return out


def check_fields(fields: Sequence[str]) -> None:
    """ValueError unless ``fields`` are some of :data:`collector.store.callstats.LATENCY_FIELDS`."""
    bad = [f for f in fields if f not in callstats.LATENCY_FIELDS]
    if bad or not fields:
        raise ValueError(f"fields: expected some of {callstats.LATENCY_FIELDS}, got {fields}")


@dataclass(frozen=True, slots=True)
class LatencyPage:
    """What the Latency page charts, from one read of the calls (:func:`latency_page`).

    ``percentiles``: :func:`percentiles_over_time` of one metric; ``by_model``: per model
    (sorted, unknown last) ``model``, ``n_<f>`` and ``<f>_p50`` / ``_p95`` / ``_p99`` (s, None
    without a known value) of each field, the values of those keys in
    :func:`collector.lake.stats.exact_call_stats` rows by model; ``engine``:
    :func:`engine_latency_over_time`; ``quantile_relative_error``: 0.0 when every percentile is
    exact, else their relative error bound (:mod:`dashboard.summarystats`)."""

    percentiles: pd.DataFrame
    by_model: list[dict[str, Any]]
    engine: pd.DataFrame
    quantile_relative_error: float = 0.0


def latency_page(
    database_url: str,
    lake: Lake | None,
    tenant: str,
    since_ns: int,
    until_ns: int,
    bucket_s: int,
    metric: str,
    fields: Sequence[str],
    by: Sequence[str] = ("model", "variant"),
) -> LatencyPage:
    """The Latency page's three aggregations of the tenant's calls in ``[since_ns, until_ns)``
    in one DuckDB statement: the calls are scanned once (a materialised CTE of the columns
    used), then grouped three ways. Equal to :func:`percentiles_over_time` (``metric``, no
    filter, ``by``), :func:`engine_latency_over_time` and ``exact_call_stats(..., [(["model"],
    None)])`` restricted to ``fields`` (of :data:`collector.store.callstats.LATENCY_FIELDS`):
    the same ``quantile_cont`` over the same values (``tests/dashboard/test_sqlstats.py``).
    A month of the 1M-call benchmark store took three reads of 720 hourly files before (each
    read's fixed cost: ~0.2 s of Parquet overhead), and ``exact_call_stats`` computed every
    metric of the API (and read the store's votes) where the page shows eight latencies.

    Raises:
        ValueError: ``bucket_s`` < 1, an empty range, ``metric`` not in
            :data:`dashboard.stats.LATENCY_METRICS`, no field or one not in
            :data:`collector.store.callstats.LATENCY_FIELDS`.
    """
    step = step_ns(bucket_s)
    metrics = check_metrics([metric])
    check_fields(fields)
    engine_fields = [f for _label, f in ENGINE_SERIES]
    columns = list(dict.fromkeys(["start_unix_nano", "model", *by, *metrics, *fields]))
    columns += [f for f in engine_fields if f not in columns]
    sql = f"""
WITH c AS MATERIALIZED (SELECT {", ".join(f'"{c}"' for c in columns)} FROM calls)
SELECT * FROM (
  SELECT 0 AS part, * FROM ({_percentiles_sql(step, by, metrics, "c")})
  UNION ALL BY NAME SELECT 1 AS part, * FROM ({_engine_sql(step, "c")})
  UNION ALL BY NAME SELECT 2 AS part, * FROM ({_by_model_sql(fields, "c")})
) ORDER BY part, model NULLS LAST, bucket_ns, label"""
    res = aggregate.aggregate_calls(
        database_url,
        lake,
        [tenant],
        sql,
        since_ns=since_ns,
        until_ns=until_ns,
        columns=columns,
    )
    return latency_result(res, metrics, fields)


def latency_result(res: pa.Table, metrics: Sequence[str], fields: Sequence[str]) -> LatencyPage:
    """:func:`latency_page`'s result from its statement's rows (column ``part``: 0 percentiles
    over time, 1 engine series, 2 by model; ordered by part, model nulls last, bucket, label)."""
    engine_fields = [f for _label, f in ENGINE_SERIES]

    def part(k: int, names: Sequence[str]) -> pa.Table:
        return res.filter(pc.equal(res.column("part"), k)).select(list(names))

    pct_cols = ["bucket_ns", "label", *(f"{p}_{m}" for m in metrics for p in ("n", "q"))]
    eng_cols = ["model", "bucket_ns", *(f"q_{f}" for f in engine_fields)]
    model_cols = ["model", *(f"{p}_{f}" for f in fields for p in ("n", "q"))]
    return LatencyPage(
        percentiles=_percentiles_frame(part(0, pct_cols).to_pandas(), metrics),
        by_model=_by_model_rows(part(2, model_cols).to_pylist(), fields),
        engine=_engine_frame(part(1, eng_cols).to_pylist()),
    )
