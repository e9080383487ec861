"""Engine KPIs over time from scraped ``engine_samples``: ADBC → Arrow → DuckDB.

Gauges (KV-cache usage, requests running / waiting) are averaged and maxed per group.
Counter rates follow Prometheus ``increase()``: per engine (url, model, engine index) the
increase between consecutive samples, a decrease meaning a restart (the new value is the
increase since it); the first sample of the range has no predecessor and adds nothing.
Prefix-cache hit rate = Σ Δhits / Σ Δqueries and spec-decode acceptance rate =
Σ Δaccepted / Σ Δdraft tokens (vLLM docs/design/metrics.md, the reference §5); when the counters
are not exported the mean of the scraper's own windowed rates is used.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, cast

import duckdb
import pyarrow as pa
from sqlalchemy import Table

from collector.store import arrowfetch
from collector.store.arrowfetch import SqlBuilder
from collector.store.models.api import EngineSample

SAMPLES = cast(Table, EngineSample.__table__)
_COLUMNS = [
    "url",
    "engine_kind",
    "model_name",
    "engine_index",
    "scraped_unix_nano",
    "kv_cache_usage",
    "requests_running",
    "requests_waiting",
    "prefix_cache_queries_total",
    "prefix_cache_hits_total",
    "spec_decode_draft_tokens_total",
    "spec_decode_accepted_tokens_total",
    "preemptions_total",
    "prefix_cache_hit_rate",
    "spec_decode_acceptance_rate",
    "gpu_cost_usd",
    "ttft_p95_s",
    "itl_p95_s",
]
_COUNTERS = (
    "prefix_cache_queries_total",
    "prefix_cache_hits_total",
    "spec_decode_draft_tokens_total",
    "spec_decode_accepted_tokens_total",
    "preemptions_total",
)


def _increase(col: str) -> str:
    prev = f"lag({col}) OVER w"
    return f"CASE WHEN {col} < {prev} THEN {col} ELSE {col} - {prev} END AS d_{col}"


def engine_stats(
    database_url: str,
    tenant: str,
    since_ns: int | None = None,
    until_ns: int | None = None,
    bucket_s: float | None = None,
) -> list[dict[str, Any]]:
    """Engine KPIs per (url, model) and, with ``bucket_s``, per time bucket.

    Args:
        database_url: SQLAlchemy URL of the store (read through ADBC).
        tenant: whose engine samples.
        since_ns, until_ns: unix nanoseconds on ``scraped_unix_nano`` (inclusive / exclusive).
        bucket_s: bucket width in seconds (≥ 1), aligned to the unix epoch; None: one row per
            engine for the whole range.

    Returns:
        Dicts sorted by url, model, bucket with: ``url``, ``engine_kind``, ``model``,
        (``bucket`` ISO 8601, ``bucket_start_unix_s``), ``samples``,
        ``kv_cache_usage_mean`` / ``_max`` (fraction 0–1), ``requests_running_mean`` / ``_max``,
        ``requests_waiting_mean`` / ``_max`` (queue depth), ``prefix_cache_hit_rate``,
        ``spec_decode_acceptance_rate`` (fractions), ``preemptions`` (count in the group),
        ``gpu_cost_usd_sum`` (the replica's cost recorded on its samples in the group, USD;
        None when no cost is configured for it); ``ttft_p95_s_median`` / ``_max`` and
        ``itl_p95_s_median`` / ``_max``: the median and the highest of the engine's own p95
        TTFT / inter-token latency per scrape interval (from its histograms,
        :func:`collector.engines.rates.engine_rates`), seconds — a summary of interval p95s,
        not the p95 of the group. Unknown values are None.

    Raises:
        ValueError: ``bucket_s`` below 1, ``until_ns < since_ns`` or an unsupported URL.
    """
    if bucket_s is not None and not bucket_s >= 1:
        raise ValueError(f"bucket_s must be at least 1 second, got {bucket_s}")
    if since_ns is not None and until_ns is not None and until_ns < since_ns:
        raise ValueError(f"until_ns ({until_ns}) is before since_ns ({since_ns})")
    dialect, _ = arrowfetch.adbc_target(database_url)
    b = SqlBuilder(dialect)
    where = [f"tenant = {b.param(tenant)}"]
    if since_ns is not None:
        where.append(f"scraped_unix_nano >= {b.param(since_ns)}")
    if until_ns is not None:
        where.append(f"scraped_unix_nano < {b.param(until_ns)}")
    sql = f"SELECT {', '.join(_COLUMNS)} FROM engine_samples WHERE {' AND '.join(where)}"
    schema = pa.schema(arrowfetch.column_schema(SAMPLES, _COLUMNS))
    samples = arrowfetch.run_query(database_url, sql, b.params, schema)
    width = None if bucket_s is None else round(bucket_s * 1e9)
    bucket = f"(scraped_unix_nano // {width}) * {width}" if width else "NULL::BIGINT"
    deltas = ", ".join(_increase(c) for c in _COUNTERS)
    query = f"""
WITH d AS (
  SELECT *, {bucket} AS bucket, {deltas} FROM samples
  WINDOW w AS (PARTITION BY url, model_name, engine_index ORDER BY scraped_unix_nano)
)
SELECT url, any_value(engine_kind) AS engine_kind, model_name AS model, bucket,
  count(*) AS samples,
  avg(kv_cache_usage) AS kv_cache_usage_mean, max(kv_cache_usage) AS kv_cache_usage_max,
  avg(requests_running) AS requests_running_mean, max(requests_running) AS requests_running_max,
  avg(requests_waiting) AS requests_waiting_mean, max(requests_waiting) AS requests_waiting_max,
  coalesce(sum(d_prefix_cache_hits_total) / NULLIF(sum(d_prefix_cache_queries_total), 0),
           avg(prefix_cache_hit_rate)) AS prefix_cache_hit_rate,
  coalesce(sum(d_spec_decode_accepted_tokens_total)
             / NULLIF(sum(d_spec_decode_draft_tokens_total), 0),
           avg(spec_decode_acceptance_rate)) AS spec_decode_acceptance_rate,
  sum(d_preemptions_total) AS preemptions,
  sum(gpu_cost_usd) AS gpu_cost_usd_sum,
  median(ttft_p95_s) AS ttft_p95_s_median, max(ttft_p95_s) AS ttft_p95_s_max,
  median(itl_p95_s) AS itl_p95_s_median, max(itl_p95_s) AS itl_p95_s_max
FROM d GROUP BY url, model_name, bucket
ORDER BY url, model_name NULLS LAST, bucket
"""
    con = duckdb.connect()
    try:
        con.register("samples", samples)
        cur = con.execute(query)
        names = [c[0] for c in cur.description or []]
        rows = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
    finally:
        con.close()
    for row in rows:
        start = row.pop("bucket")
        if width is not None:
            row["bucket"] = dt.datetime.fromtimestamp(start / 1e9, tz=dt.UTC).isoformat()
            row["bucket"] = row["bucket"].replace("+00:00", "Z")
            row["bucket_start_unix_s"] = start / 1e9
        if row["preemptions"] is not None:
            row["preemptions"] = int(row["preemptions"])
    return rows
