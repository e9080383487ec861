"""The Overview's and the Latency page's aggregations answered from the lake's per-hour
summaries (:mod:`collector.lake.summary`) instead of every call of the range.

A month of traffic is 720 sealed hours; the exact path (:mod:`dashboard.sqlstats`) scans every
call of them from their Parquet files on each cold render (~0.5-0.8 s of a page's time on the
1M-call benchmark store). Here each sealed hour lying entirely inside the range contributes its
summary rows (kept in memory by :func:`collector.lake.query.read_summaries`, re-read when a late
span re-seals the hour), and only the rest of the range (the hours cut by its edges, the hours
not sealed yet) is read raw, binned on the fly and merged. Each call is counted exactly once.

Guarantee (the summaries' DDSketch bins: Masson, Rim & Lee, VLDB 2019; see
:mod:`collector.lake.summary`): every count, rate, token sum and USD sum is the exact one
(floating-point sums up to the order of addition); every percentile is the type-7 percentile
(``quantile_cont``) of the same values with each order statistic replaced by its bin's value,
hence within a relative :data:`collector.lake.summary.RELATIVE_ERROR` (1 %) of the exact
percentile for values in ``[1e-6 s, 1e6 s]`` and within 1e-6 s absolute below. The pages say
so next to the numbers and offer the exact path (``tests/dashboard/test_summarystats.py``
checks both claims against :mod:`dashboard.sqlstats` on a partly sealed store).

Each function returns None when summaries cannot answer (no lake, a bucket that is not a whole
number of hours, a filter on a column summaries are not keyed by, or no sealed hour inside the
range): the caller then takes the exact path.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import pandas as pd
import pyarrow as pa

from collector.lake import query, summary
from collector.lake import stats as lake_stats
from collector.lake.layout import HOUR_NS, Lake
from collector.store import analytics
from dashboard import sqlstats, stats

#: relative error bound of a percentile answered here (values in [1e-6, 1e6] seconds)
RELATIVE_ERROR = summary.RELATIVE_ERROR
#: what the pages print beside a percentile answered from summaries
CAPTION = (
    "Percentiles from the lake's hourly summaries (DDSketch bins): within 1 % of the exact "
    "value; counts, rates, tokens and cost are exact."
)


def _parts(
    database_url: str,
    lake: Lake | None,
    tenant: str,
    since_ns: int,
    until_ns: int,
    filters: Mapping[str, str],
    bucket_s: int,
    columns: Sequence[str],
) -> tuple[pa.Table, pa.Table] | None:
    """(summary rows of the sealed hours inside the range, ``columns`` of every other call of
    the range), or None when summaries cannot answer (see the module docstring)."""
    step = sqlstats.step_ns(bucket_s)
    if lake is None or step % HOUR_NS != 0:
        return None
    flt = analytics.validate_filters(dict(filters))
    if not summary.eligible([], None, list(flt)):
        return None
    summ, rest = lake_stats.summary_and_rest(
        database_url, lake, tenant, since_ns, until_ns, flt, columns
    )
    if summ is None:
        return None
    return summ, rest


def _bins_sql(fields: Sequence[str], groups: Mapping[str, tuple[str, str]]) -> str:
    """SQL: one row per (``groups`` columns, field ``f``, bin ``b``) with ``n`` values (BIGINT),
    over the summary rows ``summ`` (their histograms) and the raw calls ``rest`` (binned now).
    ``groups`` maps each output column to its expression over ``summ`` and over ``rest``."""
    gs = "".join(f"{e_summ} AS {g}, " for g, (e_summ, _e) in groups.items())
    gr = "".join(f"{e_rest} AS {g}, " for g, (_e, e_rest) in groups.items())
    names = "".join(f"{g}, " for g in groups)
    # each summary row is unnested into (key = bin, value = count) rows; the group columns are
    # computed once per summary row, before the unnest
    from_summ = " UNION ALL ".join(
        f"SELECT {names}'{f}' AS f, unnest(h_{f}, recursive := true) "
        f"FROM (SELECT {gs}h_{f} FROM summ)"
        for f in fields
    )
    from_rest = " UNION ALL ".join(
        f"SELECT {gr}'{f}' AS f, {summary.bin_sql(f)} AS key, 1 AS value "
        f"FROM rest WHERE {f} IS NOT NULL"
        for f in fields
    )
    return (
        f"SELECT {names}f, key AS b, sum(value)::BIGINT AS n FROM ("
        f"{from_summ} UNION ALL {from_rest}) GROUP BY ALL"
    )


def _run(summ: pa.Table, rest: pa.Table, sql: str) -> pa.Table:
    con = query.cursor()
    try:
        con.register("summ", summ)
        con.register("rest", rest)
        out: pa.Table = con.sql(sql).to_arrow_table()
        return out
    finally:
        con.close()


_TRAFFIC_RAW = ["start_unix_nano", "is_error", "is_rejected", "is_unpriced", "input_tokens"]
_TRAFFIC_RAW += ["output_tokens", "cost_usd", "ttft_s", "tpot_s"]


def traffic(
    database_url: str,
    lake: Lake | None,
    tenant: str,
    since_ns: int,
    until_ns: int,
    filters: Mapping[str, str],
    bucket_s: int,
) -> tuple[stats.TrafficSummary, pd.DataFrame] | None:
    """:func:`dashboard.sqlstats.traffic` of the same arguments, answered from summaries
    (guarantee: module docstring), or None when they cannot answer.

    Raises:
        ValueError: ``bucket_s`` < 1 or a bad filter.
    """
    parts = _parts(database_url, lake, tenant, since_ns, until_ns, filters, bucket_s, _TRAFFIC_RAW)
    if parts is None:
        return None
    step = sqlstats.step_ns(bucket_s)
    bucket = (f"hour_ns // {step} * {step}", f"start_unix_nano // {step} * {step}")
    known = "(input_tokens IS NOT NULL OR output_tokens IS NOT NULL)"
    sql = f"""
WITH counts AS (
  SELECT bucket_ns, sum(calls)::BIGINT AS calls, sum(errors)::BIGINT AS errors,
    sum(limited)::BIGINT AS limited, sum(n_tokens)::BIGINT AS n_tokens,
    sum(tokens)::BIGINT AS tokens, sum(cost_usd) AS cost_usd,
    sum(unpriced)::BIGINT AS unpriced, min(first_ns) AS first_ns
  FROM (
    SELECT hour_ns // {step} * {step} AS bucket_ns, count AS calls, error_count AS errors,
      rejection_count AS limited, n_input_tokens + n_output_tokens AS n_tokens,
      CASE WHEN n_input_tokens + n_output_tokens > 0
        THEN coalesce(input_tokens_sum, 0) + coalesce(output_tokens_sum, 0) END AS tokens,
      cost_usd_sum AS cost_usd, unpriced_count AS unpriced, first_start_ns AS first_ns
    FROM summ
    UNION ALL
    SELECT start_unix_nano // {step} * {step}, 1, is_error, is_rejected,
      (input_tokens IS NOT NULL)::INTEGER + (output_tokens IS NOT NULL)::INTEGER,
      CASE WHEN {known} THEN coalesce(input_tokens, 0) + coalesce(output_tokens, 0) END,
      cost_usd, is_unpriced, start_unix_nano
    FROM rest)
  GROUP BY bucket_ns),
b1 AS MATERIALIZED ({_bins_sql(("ttft_s", "tpot_s"), {"bucket_ns": bucket})}),
bins AS (
  SELECT 0 AS whole, bucket_ns, f, b, n FROM b1
  UNION ALL SELECT 1, NULL, f, b, sum(n)::BIGINT FROM b1 GROUP BY f, b),
perf AS MATERIALIZED ({summary.bin_quantiles_sql("bins", ["whole", "bucket_ns"], stats.QUANTILES)})
SELECT * FROM (
  SELECT 0 AS whole, c.*,
    (SELECT q FROM perf p WHERE p.whole = 0 AND p.bucket_ns = c.bucket_ns AND f = 'ttft_s')
      AS q_ttft_s,
    (SELECT q FROM perf p WHERE p.whole = 0 AND p.bucket_ns = c.bucket_ns AND f = 'tpot_s')
      AS q_tpot_s
  FROM counts c
  UNION ALL BY NAME SELECT 1 AS whole,
    (SELECT q FROM perf WHERE whole = 1 AND f = 'ttft_s') AS q_ttft_s,
    (SELECT q FROM perf WHERE whole = 1 AND f = 'tpot_s') AS q_tpot_s
) ORDER BY whole DESC, bucket_ns"""
    res = _run(*parts, sql).to_pylist()
    summ, series = sqlstats.traffic_result(res, since_ns, until_ns, bucket_s)
    return dataclasses.replace(summ, quantile_relative_error=RELATIVE_ERROR), series


def latency_page(
    database_url: str,
    lake: Lake | None,
    tenant: str,
    since_ns: int,
    until_ns: int,
    bucket_s: int,
    metric: str,
    fields: Sequence[str],
) -> sqlstats.LatencyPage | None:
    """:func:`dashboard.sqlstats.latency_page` of the same arguments (grouped by model and
    variant), answered from summaries (guarantee: module docstring), or None when they cannot
    answer.

    Raises:
        ValueError: as :func:`dashboard.sqlstats.latency_page`.
    """
    step = sqlstats.step_ns(bucket_s)
    metrics = sqlstats.check_metrics([metric])
    sqlstats.check_fields(fields)
    engine_fields = [f for _label, f in sqlstats.ENGINE_SERIES]
    hist = list(dict.fromkeys([*metrics, *fields, *engine_fields]))
    columns = ["start_unix_nano", "model", "variant", *hist]
    parts = _parts(database_url, lake, tenant, since_ns, until_ns, {}, bucket_s, columns)
    if parts is None:
        return None
    by = ("model", "variant")
    qn = summary.bin_quantiles_sql

    def pivot(names: Sequence[str], with_n: bool) -> str:
        out = []
        for f in names:
            if with_n:
                out.append(f"coalesce(any_value(n) FILTER (WHERE f = '{f}'), 0)::BIGINT AS n_{f}")
            out.append(f"any_value(q) FILTER (WHERE f = '{f}') AS q_{f}")
        return ", ".join(out)

    bucket = (f"hour_ns // {step} * {step}", f"start_unix_nano // {step} * {step}")
    label = (sqlstats.label_sql(by),) * 2
    model = ("model", "model")
    p0 = _bins_sql(metrics, {"bucket_ns": bucket, "label": label})
    p1 = _bins_sql(engine_fields, {"model": model, "bucket_ns": bucket})
    sql = f"""
WITH q2 AS ({qn(f"({_bins_sql(fields, {'model': model})})", ["model"], stats.QUANTILES)}),
models AS (SELECT DISTINCT model FROM summ UNION SELECT DISTINCT model FROM rest)
SELECT * FROM (
  SELECT 0 AS part, bucket_ns, label, {pivot(metrics, True)}
  FROM ({qn(f"({p0})", ["bucket_ns", "label"], stats.QUANTILES)}) GROUP BY bucket_ns, label
  UNION ALL BY NAME SELECT 1 AS part, model, bucket_ns, {pivot(engine_fields, False)}
  FROM ({qn(f"({p1})", ["model", "bucket_ns"], stats.QUANTILES)}) GROUP BY model, bucket_ns
  UNION ALL BY NAME SELECT 2 AS part, m.model, {pivot(fields, True)}
  FROM models m LEFT JOIN q2 ON q2.model IS NOT DISTINCT FROM m.model GROUP BY m.model
) ORDER BY part, model NULLS LAST, bucket_ns, label"""
    page = sqlstats.latency_result(_run(*parts, sql), metrics, fields)
    return dataclasses.replace(page, quantile_relative_error=RELATIVE_ERROR)


#: the Cost page's group keys summaries are keyed by (``tenant``: each tenant's own files)
_COST_KEYS = ("tenant", *summary.SUMMARY_KEYS)


def cost(
    database_url: str,
    lake: Lake | None,
    tenants: Sequence[str],
    since_ns: int,
    until_ns: int,
    by: Sequence[str],
    bucket_s: int,
) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """:func:`dashboard.sqlstats.cost` of the same arguments answered from summaries: every
    figure is a count or a sum, so the answer is exact (USD sums up to the order of addition);
    None when summaries cannot answer (a key they are not keyed by, a bucket that is not a
    whole number of hours, no lake, no sealed hour inside the range for any tenant).

    Raises:
        ValueError: ``bucket_s`` < 1.
    """
    step = sqlstats.step_ns(bucket_s)
    if lake is None or step % HOUR_NS != 0 or any(c not in _COST_KEYS for c in by) or not by:
        return None
    plain = [c for c in by if c != "tenant"]
    columns = ["start_unix_nano", *plain, "input_tokens", "output_tokens"]
    columns += ["cost_usd", "gpu_cost_usd", "is_unpriced"]
    summs, rests = [], []
    for tenant in tenants:
        summ, rest = lake_stats.summary_and_rest(
            database_url, lake, tenant, since_ns, until_ns, {}, columns
        )
        if summ is not None:
            summs.append(summ.append_column("tenant", pa.array([tenant] * summ.num_rows)))
        rests.append(rest.append_column("tenant", pa.array([tenant] * rest.num_rows)))
    if not summs:
        return None
    keys = ", ".join(f'coalesce(CAST("{c}" AS VARCHAR), \'?\') AS "k_{c}"' for c in by)
    key_set = ", ".join(f'"k_{c}"' for c in by)
    usd = (
        "CASE WHEN {c} IS NULL AND {g} IS NULL THEN NULL ELSE coalesce({c}, 0) + coalesce({g}, 0) "
        "END"
    )
    sql = f"""
SELECT {key_set}, bucket_ns, sum(calls)::BIGINT AS calls, sum(tokens)::BIGINT AS tokens,
  sum(cost_usd) AS cost_usd, sum(gpu_cost_usd) AS gpu_cost_usd, sum(usd) AS usd,
  sum(unpriced_calls)::BIGINT AS unpriced_calls
FROM (
  SELECT {keys}, hour_ns // {step} * {step} AS bucket_ns, count AS calls,
    coalesce(input_tokens_sum, 0) + coalesce(output_tokens_sum, 0) AS tokens,
    cost_usd_sum AS cost_usd, gpu_cost_usd_sum AS gpu_cost_usd,
    {usd.format(c="cost_usd_sum", g="gpu_cost_usd_sum")} AS usd,
    unpriced_count AS unpriced_calls
  FROM summ
  UNION ALL
  SELECT {keys}, start_unix_nano // {step} * {step}, 1,
    coalesce(input_tokens, 0) + coalesce(output_tokens, 0), cost_usd, gpu_cost_usd,
    {usd.format(c="cost_usd", g="gpu_cost_usd")}, is_unpriced
  FROM rest)
GROUP BY ALL"""
    summ_all = pa.concat_tables(summs, promote_options="permissive")
    rest_all = pa.concat_tables(rests, promote_options="permissive")
    fine = _run(summ_all, rest_all, sql).to_pandas()
    return sqlstats.cost_result(fine, by, bucket_s)


__all__ = ["CAPTION", "RELATIVE_ERROR", "cost", "latency_page", "traffic"]
