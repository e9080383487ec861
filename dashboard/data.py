"""The dashboard's data: every page reads through these cached query functions (no SQL in pages).

They call the store's query functions (``collector.store.queries``, the lake's query layer
``collector.lake.query`` for call frames, ``collector.ingest.feedback``, ``alerts``),
:mod:`dashboard.queries`, and :mod:`dashboard.sqlstats` for the traffic, latency and cost
charts (aggregated in DuckDB over the sealed Parquet and the store's tail: a month of calls
never becomes a pandas frame), and cache results for :data:`CACHE_TTL_S` seconds keyed by their
arguments (``st.cache_data``).
Times are unix nanoseconds (UTC) in arguments; durations seconds, money USD, tokens counts.
Filters are passed as sorted ``(column, value)`` tuples so they hash.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
import pyarrow.compute as pc
import streamlit as st
from sqlalchemy import Engine, inspect
from sqlalchemy.orm import Session

from alerts import outbox
from alerts import store as alert_store
from collector.ingest import feedback as fb
from collector.lake import jobs as lake_jobs
from collector.lake import query as lake_query
from collector.lake.layout import Lake
from collector.settings import load_settings
from collector.store import queries as store_queries
from collector.store.engine import make_engine
from dashboard import queries, sqlstats, stats, summarystats

CACHE_TTL_S = 15
#: :func:`call_page` looks in this last part of the range first (unix ns: one hour)
CALL_PAGE_FIRST_WINDOW_NS = 3600 * 10**9
#: call frames kept at once (:func:`calls`; a month of a busy tenant is ~100 MB each)
CALL_FRAMES_KEPT = 8
Filters = tuple[tuple[str, str], ...]


@st.cache_resource(show_spinner=False)
def engine(database_url: str) -> Engine:
    """One pooled SQLAlchemy engine per store URL for the whole server."""
    return make_engine(database_url)


@st.cache_data(ttl=60, show_spinner=False)
def tables_present(database_url: str, names: tuple[str, ...]) -> bool:
    """True when every table in ``names`` exists in the store (its migration has run)."""
    have = set(inspect(engine(database_url)).get_table_names())
    return all(n in have for n in names)


@st.cache_data(ttl=60, show_spinner=False)
def tenants(database_url: str) -> list[str]:
    """Every tenant name, sorted."""
    return queries.tenant_names(engine(database_url))


@st.cache_data(ttl=60, show_spinner=False)
def oldest_recent_call_ns(database_url: str, tenant: str, since_ns: int) -> int | None:
    """Start (unix ns) of the tenant's oldest call since ``since_ns``; None without."""
    return queries.oldest_recent_call_ns(engine(database_url), tenant, since_ns)


def _check_filters(filters: Filters) -> None:
    unknown = [k for k, _v in filters if k not in queries.FILTER_COLUMNS]
    if unknown:
        raise ValueError(f"filters: unknown column {unknown[0]!r}")


def _flags(v: Any) -> list[str]:
    if v is None:
        return []
    if isinstance(v, str):
        parsed = json.loads(v)
        return list(parsed) if isinstance(parsed, list) else []
    return list(v)


@st.cache_resource(show_spinner=False)
def lake(database_url: str) -> Lake | None:
    """The collector's lake for this store: ``DRIFTLINE_LAKE_URL`` / ``DRIFTLINE_LAKE_ENABLED``
    read when the dashboard first needs it (default: next to the SQLite store), or None."""
    return lake_jobs.lake_of(load_settings(database_url=database_url))


#: the string columns of a call frame with few distinct values: read as pandas categoricals
#: (one Python string per distinct value, not one per call)
_LOW_CARDINALITY = (
    "service_name",
    "operation",
    "model",
    "rollout",
    "variant",
    "status",
    "error_type",
    "finish_reason",
)


#: a resource cache, not a data cache: a data cache pickles the frame into the cache and
#: unpickles a copy on every hit (seconds at a million calls); callers must not mutate it
@st.cache_resource(ttl=CACHE_TTL_S, max_entries=CALL_FRAMES_KEPT, show_spinner=False)
def calls(
    database_url: str,
    tenant: str,
    since_ns: int,
    until_ns: int,
    filters: Filters = (),
    columns: tuple[str, ...] = queries.CHART_COLUMNS,
) -> pd.DataFrame:
    """``start_unix_nano`` and ``columns`` (of :data:`dashboard.queries.CALL_METRIC_COLUMNS`
    plus the derived ``is_unpriced``) of the calls started in ``[since_ns, until_ns)``, one
    row per call: newest first when ``trace_id`` is among ``columns``, else in no particular
    order (sorting a million calls costs most of a second). The frame is shared by every
    caller (read only).

    Read through the lake's query layer (:func:`collector.lake.query.fetch_calls`: sealed hours
    from Parquet, the rest from the store, Arrow throughout), the same read path as the API's
    stats and drift runs. Token counts are nullable floats (``Float64``), flags lists,
    ``is_unpriced`` 0/1; low-cardinality text columns (model, variant, status, ...) are
    categoricals (missing values stay missing).

    Raises:
        ValueError: an unknown filter or column, or an empty range.
    """
    flt = dict(filters)
    unknown = [k for k in flt if k not in queries.FILTER_COLUMNS]
    if unknown:
        raise ValueError(f"filters: unknown column {unknown[0]!r}")
    bad = [c for c in columns if c not in queries.CALL_METRIC_COLUMNS and c != "is_unpriced"]
    if bad:
        raise ValueError(f"columns: unknown column {bad[0]!r}")
    if until_ns <= since_ns:
        raise ValueError(f"empty range: until_ns ({until_ns}) <= since_ns ({since_ns})")
    names = list(dict.fromkeys(["start_unix_nano", *columns]))
    table = lake_query.fetch_calls(
        database_url,
        lake(database_url),
        tenant,
        since_ns=since_ns,
        until_ns=until_ns,
        columns=names,
        filters=flt,
    )
    if "trace_id" in names:  # only per-trace reads care which call comes first
        table = table.sort_by([("start_unix_nano", "descending")])
    for c in _LOW_CARDINALITY:
        if c in names:
            i = table.schema.get_field_index(c)
            table = table.set_column(i, c, pc.dictionary_encode(table.column(c)))
    df = table.to_pandas()
    if "flags" in df:
        df["flags"] = df["flags"].map(_flags)
    for c in ("input_tokens", "output_tokens", "cached_input_tokens"):
        if c in df:
            df[c] = df[c].astype("Float64")
    df["start_unix_nano"] = df["start_unix_nano"].astype("int64")
    return df


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def traffic(
    database_url: str,
    tenant: str,
    since_ns: int,
    until_ns: int,
    filters: Filters = (),
    exact: bool = False,
) -> tuple[stats.TrafficSummary, pd.DataFrame]:
    """Headline numbers of the window and the per-bucket series (see :mod:`dashboard.stats`),
    aggregated where the calls lie: from the lake's hourly summaries when they can answer and
    ``exact`` is false (percentiles within 1 %, the summary's ``quantile_relative_error``:
    :func:`dashboard.summarystats.traffic`), else from every call
    (:func:`dashboard.sqlstats.traffic`)."""
    _check_filters(filters)
    bucket = stats.bucket_size_s((until_ns - since_ns) / 1e9, max_buckets=60)
    the_lake = lake(database_url)
    args = (database_url, the_lake, tenant, since_ns, until_ns, dict(filters), bucket)
    if not exact:
        got = summarystats.traffic(*args)
        if got is not None:
            return got
    return sqlstats.traffic(*args)


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def latency_percentiles(
    database_url: str,
    tenant: str,
    since_ns: int,
    until_ns: int,
    filters: Filters = (),
    by: tuple[str, ...] = ("model", "variant"),
    metrics: tuple[str, ...] = stats.LATENCY_METRICS,
) -> pd.DataFrame:
    """TTFT / TPOT / queue / prefill / decode / e2e percentiles (``metrics`` of them) per
    bucket and group (s), aggregated where the calls lie
    (:func:`dashboard.sqlstats.percentiles_over_time`)."""
    _check_filters(filters)
    bucket = stats.bucket_size_s((until_ns - since_ns) / 1e9, max_buckets=48)
    return sqlstats.percentiles_over_time(
        database_url,
        lake(database_url),
        tenant,
        since_ns,
        until_ns,
        dict(filters),
        bucket,
        by,
        metrics,
    )


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def latency_page(
    database_url: str,
    tenant: str,
    since_ns: int,
    until_ns: int,
    metric: str,
    fields: tuple[str, ...],
    exact: bool = False,
) -> sqlstats.LatencyPage:
    """The Latency page's percentiles of ``metric`` per bucket by model / variant, its
    per-model percentiles of ``fields`` and its engine-latency series (buckets as
    :func:`latency_percentiles`): from the lake's hourly summaries when they can answer and
    ``exact`` is false (within 1 %: :func:`dashboard.summarystats.latency_page`), else from
    one read of every call (:func:`dashboard.sqlstats.latency_page`)."""
    bucket = stats.bucket_size_s((until_ns - since_ns) / 1e9, max_buckets=48)
    args = (database_url, lake(database_url), tenant, since_ns, until_ns, bucket, metric, fields)
    if not exact:
        got = summarystats.latency_page(*args)
        if got is not None:
            return got
    return sqlstats.latency_page(*args)


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def engine_samples(database_url: str, tenant: str, since_ns: int, until_ns: int) -> pd.DataFrame:
    """Scraped engine gauges (KV-cache usage, running / waiting, prefix-cache hit rate)."""
    df = queries.engine_samples_frame(engine(database_url), tenant, since_ns, until_ns)
    if not df.empty:
        df["time"] = pd.to_datetime(df["scraped_unix_nano"], unit="ns", utc=True)
    return df


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def cost(
    database_url: str, tenants_: tuple[str, ...], since_ns: int, until_ns: int, by: tuple[str, ...]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Cost breakdown by ``by`` (may include ``tenant``) and the USD per 1k tokens trend,
    aggregated where the calls lie: from the lake's hourly summaries when they can answer
    (sums: exact, :func:`dashboard.summarystats.cost`), else from every call
    (:func:`dashboard.sqlstats.cost`)."""
    bucket = stats.bucket_size_s((until_ns - since_ns) / 1e9, max_buckets=48)
    args = (database_url, lake(database_url), tenants_, since_ns, until_ns, by, bucket)
    got = summarystats.cost(*args)
    return got if got is not None else sqlstats.cost(*args)


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def feedback(database_url: str, tenant: str, since_ns: int, until_ns: int) -> pd.DataFrame:
    """Feedback events of the window (linked and pending)."""
    return queries.feedback_frame(engine(database_url), tenant, since_ns, until_ns)


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def feedback_rates(
    database_url: str, tenant: str, since_ns: int, until_ns: int, by: str = "variant"
) -> pd.DataFrame:
    """Feedback events per 100 calls by ``by`` and kind (calls' ``trace_id`` read only when
    there is feedback to attribute)."""
    events = feedback(database_url, tenant, since_ns, until_ns)
    if events.empty:  # calls per value of ``by`` only: counted where the calls lie
        return sqlstats.variant_counts(
            database_url, lake(database_url), tenant, since_ns, until_ns, by
        )
    columns = ("trace_id", by)
    return stats.feedback_rates(
        calls(database_url, tenant, since_ns, until_ns, columns=columns), events, by
    )


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def call_page(
    database_url: str, tenant: str, since_ns: int, until_ns: int, filters: Filters, limit: int
) -> list[dict[str, Any]]:
    """Newest ``limit`` calls matching ``filters`` (keys of ``CallFilter``), as call records.

    Looked for in the last :data:`CALL_PAGE_FIRST_WINDOW_NS` of the range first, widened 8x
    until ``limit`` calls are found or the whole range was read: the newest ``limit`` calls of
    a suffix ``[lo, until_ns)`` that holds at least ``limit`` are the newest of the range (the
    store sorts every matching call before its limit, so a month-long range costs seconds).
    """
    extra: dict[str, Any] = dict(filters)  # string-valued CallFilter fields
    span = CALL_PAGE_FIRST_WINDOW_NS
    with engine(database_url).connect() as conn:
        while True:
            lo = max(since_ns, until_ns - span)
            flt = store_queries.CallFilter(since_unix_nano=lo, until_unix_nano=until_ns, **extra)
            items, _ = store_queries.list_calls(conn, tenant, flt, limit=limit)
            if len(items) >= limit or lo <= since_ns:
                return items
            span *= 8


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def call_detail(database_url: str, tenant: str, call_id: str) -> dict[str, Any] | None:
    """One call with its spans, feedback events and judge results (None when absent)."""
    eng = engine(database_url)
    with eng.connect() as conn:
        call = store_queries.get_call(conn, tenant, call_id)
        if call is None:
            return None
        rows = fb.feedback_rows(conn, tenant, trace_id=call["trace_id"], limit=1000)
    call["feedback"] = [r for r in rows if r["span_id"] in (None, call["span_id"])]
    call["judge_results"] = (
        queries.judge_results_of_call(eng, tenant, call["trace_id"], call["span_id"])
        if tables_present(database_url, ("judge_results",))
        else None
    )
    return call


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def alerts(database_url: str, tenant: str) -> pd.DataFrame:
    """Every alert state of the tenant (firing first, then most recent); times UTC."""
    with Session(engine(database_url)) as s:
        states = list(alert_store.load_alerts(s, tenant).values())
    cols = ["status", "rule", "labels", "summary", "value", "fired_at", "resolved_at", "acked_by"]
    rows = [
        {
            "status": a.status.value,
            "rule": a.rule,
            "labels": ", ".join(f"{k}={v}" for k, v in sorted(a.labels.items())),
            "summary": a.annotations.get("summary", ""),
            "value": a.last_value,
            "fired_at": pd.to_datetime(a.fired_at, unit="s", utc=True) if a.fired_at else None,
            "resolved_at": pd.to_datetime(a.resolved_at, unit="s", utc=True)
            if a.resolved_at
            else None,
            "acked_by": a.acked_by,
        }
        for a in states
    ]
    df = pd.DataFrame(rows, columns=cols)
    order = {"firing": 0, "pending": 1, "resolved": 2, "inactive": 3}
    return df.sort_values(by="status", key=lambda s: s.map(order), kind="stable")


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def silences(database_url: str, tenant: str, now_s: float) -> pd.DataFrame:
    """Silences in effect at ``now_s`` (unix seconds)."""
    with Session(engine(database_url)) as s:
        active = alert_store.active_silences(s, tenant, now_s)
    return pd.DataFrame(
        [
            {
                "id": x.id,
                "matchers": ", ".join(f"{m.name}{m.op}{m.value}" for m in x.matchers),
                "starts_at": pd.to_datetime(x.starts_at, unit="s", utc=True),
                "ends_at": pd.to_datetime(x.ends_at, unit="s", utc=True),
                "created_by": x.created_by,
                "comment": x.comment,
            }
            for x in active
        ],
        columns=["id", "matchers", "starts_at", "ends_at", "created_by", "comment"],
    )


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def deliveries(database_url: str, tenant: str) -> pd.DataFrame:
    """The webhook outbox of the tenant: one row per notification with its delivery status."""
    items = outbox.list_items(engine(database_url), tenant)
    return pd.DataFrame(
        [
            {
                "receiver": i.receiver,
                "status": i.status,
                "attempts": i.attempts,
                "created_at": pd.to_datetime(i.created_at, unit="s", utc=True),
                "last_status_code": i.last_status_code,
                "last_error": i.last_error,
                "failure_reason": i.failure_reason,
            }
            for i in items
        ],
        columns=[
            "receiver",
            "status",
            "attempts",
            "created_at",
            "last_status_code",
            "last_error",
            "failure_reason",
        ],
    )
