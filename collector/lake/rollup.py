"""Exact per-hour rollups: the final per-group KPIs of each sealed hour, for every subset of the
summary keys, computed once when the hour is sealed.

A rollup row holds, for one hour and one *grouping set* (a subset of :data:`SUMMARY_KEYS`; the
keys outside it are NULL and flagged in ``grouping_id``), exactly the per-group aggregates that
``/api/v1/stats`` computes from raw calls (:func:`collector.store.callstats.metrics_sql`: counts,
sums, ``quantile_cont`` p50/p95/p99 of every latency field, …). Percentiles do not merge, so a
rollup row answers only a group that is exactly one hour and exactly its grouping set; that is
the dashboard's most frequent request, ``group_by=<keys>,bucket&bucket=1h`` over days or weeks:
each output group is one rollup row, read instead of rescanning the hour's calls. The answer is
exact (the same SQL over the same rows; floating-point sums up to summation order).

``grouping_id`` is DuckDB's ``GROUPING(model, variant, rollout, service_name)``: bit ``3 - i``
is set when the ``i``-th key is *not* grouped (rolled up), so 0 = every key, 15 = the hour's
total. Every sealed hour has exactly one row with ``grouping_id = 15``: readers use it to tell
an hour that has rollups from one sealed before rollups existed (then read raw).
"""

from __future__ import annotations

from collections.abc import Sequence

import duckdb
import pyarrow as pa

from collector.lake.layout import HOUR_NS
from collector.lake.summary import SUMMARY_KEYS
from collector.lake.summary import eligible as summary_eligible
from collector.store import callstats

#: ``grouping_id`` of an hour's total row (no key grouped)
ALL_ROLLED_UP = (1 << len(SUMMARY_KEYS)) - 1
_KEY_COLUMN = {"model": "model", "variant": "variant", "rollout": "rollout"}
_KEY_COLUMN |= {"service": "service_name"}


def rollup_sql(source: str) -> str:
    """SQL: the rollup rows (see the module docstring) of the raw relation ``source`` (the
    columns of :func:`collector.store.callstats.needed_columns` for every summary key, with
    ``end_unix_nano``), one per (hour, grouping set, key values)."""
    keys = ", ".join(SUMMARY_KEYS)
    prefix = (
        f"(start_unix_nano // {HOUR_NS}) * {HOUR_NS} AS hour_ns, {keys}, "
        f"GROUPING({keys})::INTEGER AS grouping_id, "
    )
    return callstats.metrics_sql(prefix, source, f"GROUP BY hour_ns, CUBE({keys})")


def rollup(calls: pa.Table, con: duckdb.DuckDBPyConnection | None = None) -> pa.Table:
    """Rollup rows of a raw calls table (calls of known start; any columns, at least those
    :func:`rollup_sql` reads), sorted by ``hour_ns, grouping_id``; ``con`` reuses a DuckDB
    connection."""
    own = con is None
    con = duckdb.connect() if con is None else con
    try:
        con.register("rollup_calls", calls)
        sql = rollup_sql("rollup_calls") + " ORDER BY hour_ns, grouping_id"
        out = con.sql(sql).to_arrow_table()
        con.unregister("rollup_calls")
        return out
    finally:
        if own:
            con.close()


def eligible(keys: Sequence[str], bucket_ns: int | None, filter_columns: Sequence[str]) -> bool:
    """Whether rollups answer a stats request: buckets of exactly one hour, group keys among
    model, variant, rollout, service and bucket, filters on those keys."""
    return (
        bucket_ns == HOUR_NS
        and "bucket" in keys
        and summary_eligible(keys, bucket_ns, filter_columns)
    )


def grouping_id(keys: Sequence[str], filter_columns: Sequence[str]) -> int:
    """The ``grouping_id`` of the rows answering group keys ``keys`` (API names) with filters
    on ``filter_columns`` (``llm_calls`` names): the filtered columns are grouped too (each is
    fixed to one value, so that adds no groups)."""
    grouped = {_KEY_COLUMN[k] for k in keys if k != "bucket"} | set(filter_columns)
    n = len(SUMMARY_KEYS)
    return sum(1 << (n - 1 - i) for i, c in enumerate(SUMMARY_KEYS) if c not in grouped)


def stats_sql(keys: Sequence[str]) -> str:
    """SQL over the rollup relation ``roll`` (rows already of one grouping set) giving the
    ``g_<key>`` and aggregate columns :func:`collector.store.callstats.final_sql` reads."""
    sel = [f"{_KEY_COLUMN[k]} AS g_{k}" if k != "bucket" else "hour_ns AS g_bucket" for k in keys]
    drop = ", ".join(("hour_ns", *SUMMARY_KEYS, "grouping_id"))
    return f"SELECT {', '.join(sel)}, * EXCLUDE ({drop}) FROM roll"


__all__ = ["ALL_ROLLED_UP", "eligible", "grouping_id", "rollup", "rollup_sql", "stats_sql"]
