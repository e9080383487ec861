"""Threshold-rule statistics over calls, read through the lake's query layer, in DuckDB.

:func:`call_values` reads the columns a rule needs with :func:`collector.lake.query.fetch_calls`
(sealed hours from the Parquet lake, the unsealed hot tail from the store, each call once; the
store alone when no lake is configured), the same read path as ``/api/v1/stats``, the dashboard
and drift runs, and aggregates them per label set in DuckDB. A 7-day rule therefore reads 7 days
of column-projected, filter-pushed Parquet plus at most the last hour or two from the store.

Definitions (the same as :mod:`alerts.series` documents):

* latencies: ``quantile_cont`` (Hyndman & Fan 1996 type 7, ``numpy.quantile``'s default) or
  ``avg`` over the non-null values; the count of non-null values is the sample size;
* ``error_rate``: ``status = 'error'`` over all calls;
* ``rejection_rate_429``: ``status = 'error'`` and
  :func:`collector.store.callstats.is_rate_limited` of ``error_type``, over all calls. The
  predicate is applied to each distinct ``error_type`` of the window (a handful), and DuckDB
  matches the calls against that set: one definition, no SQL copy of it to drift apart;
* ``cost_per_1k_tokens_usd``: ``1000 * sum(cost_usd) / sum(input_tokens + output_tokens)`` over
  calls with all three known; sample size = those calls; no tokens: unknown.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from collector.lake import query
from collector.lake.layout import Lake
from collector.store.analytics import FILTER_COLUMNS
from collector.store.callstats import is_rate_limited

#: latency statistics -> their ``llm_calls`` column
LATENCY_COLUMNS: dict[str, str] = {
    "ttft_s": "ttft_s",
    "tpot_s": "tpot_s",
    "e2e_s": "e2e_s",
    "queue_s": "queue_s",
    "itl_s": "itl_p95_s",
    "itl_p50_s": "itl_p50_s",
    "server_ttft_s": "server_ttft_s",
    "server_e2e_s": "server_e2e_s",
    "gateway_queue_s": "gateway_queue_s",
}
#: every statistic :func:`call_values` computes
CALL_STATS: frozenset[str] = frozenset(LATENCY_COLUMNS) | {
    "error_rate",
    "rejection_rate_429",
    "cost_per_1k_tokens_usd",
}

Key = tuple[str, ...]


def rate_limited_types(error_types: pa.ChunkedArray | pa.Array) -> pa.Array:
    """The distinct non-null values of ``error_types`` that
    :func:`~collector.store.callstats.is_rate_limited` accepts (a string array)."""
    distinct = pc.unique(error_types).drop_null().to_pylist()
    return pa.array(sorted(v for v in distinct if is_rate_limited(v)), pa.string())


def _value_columns(stat: str) -> list[str]:
    if stat in LATENCY_COLUMNS:
        return [LATENCY_COLUMNS[stat]]
    if stat in ("error_rate", "rejection_rate_429"):
        return ["status", "error_type"]
    return ["cost_usd", "input_tokens", "output_tokens"]


def _aggregates(stat: str, quantile: float | None) -> str:
    """SQL of ``n, value`` over the relation ``calls`` (``n`` = the sample size)."""
    if stat in LATENCY_COLUMNS:
        col = f'"{LATENCY_COLUMNS[stat]}"'
        if quantile is None:
            return f"count({col}), avg({col})"
        return f"count({col}), quantile_cont({col}, {float(quantile)!r})"
    if stat == "error_rate":
        return "count(*), (count(*) FILTER (WHERE status = 'error'))::DOUBLE / count(*)"
    if stat == "rejection_rate_429":
        hit = "status = 'error' AND error_type IN (SELECT error_type FROM limited)"
        return f"count(*), (count(*) FILTER (WHERE {hit}))::DOUBLE / count(*)"
    priced = "cost_usd IS NOT NULL AND input_tokens IS NOT NULL AND output_tokens IS NOT NULL"
    tokens = f"sum(input_tokens + output_tokens) FILTER (WHERE {priced})"
    cost = f"sum(cost_usd) FILTER (WHERE {priced})"
    value = f"CASE WHEN {tokens} > 0 THEN 1000.0 * {cost} / {tokens} END"
    return f"count(*) FILTER (WHERE {priced}), {value}"


def call_values(
    database_url: str,
    lake: Lake | None,
    tenant: str,
    *,
    stat: str,
    quantile: float | None,
    min_samples: int,
    since_ns: int,
    until_ns: int,
    label_columns: Sequence[str],
    filters: Sequence[tuple[str, str]],
) -> dict[Key, float | None]:
    """The statistic ``stat`` of the tenant's calls started in ``[since_ns, until_ns]`` (unix
    ns, both ends included), per label set.

    Args:
        database_url: SQLAlchemy URL of the store (read through ADBC: committed rows only).
        lake: the collector's lake (:func:`collector.lake.jobs.lake_of`), or None for the store.
        stat: one of :data:`CALL_STATS`.
        quantile: for latency statistics, the quantile in (0, 1); None for the mean.
        min_samples: fewer observations in a label set make its value None (unknown).
        label_columns: ``llm_calls`` columns to group by; a null label reads as ``""``.
        filters: ``(llm_calls column, value)`` equality filters, all of which must hold (a null
            never matches).

    Returns:
        label values (in ``label_columns`` order) -> value (unit of ``stat``) or None; only
        label sets that have calls in the window; empty when there are none.

    Raises:
        ValueError: an unknown ``stat``, or an unusable database URL (e.g. in-memory SQLite,
            which ADBC cannot open).
    """
    if stat not in CALL_STATS:
        raise ValueError(f"stat {stat!r} is not a call statistic")
    wanted: dict[str, str] = {}
    for col, value in filters:
        if wanted.setdefault(col, value) != value:
            return {}  # two filters on one column with different values: nothing matches
    pushed = {n: wanted[c] for n, c in FILTER_COLUMNS.items() if n == c and c in wanted}
    after = {c: v for c, v in wanted.items() if c not in pushed}
    names = list(dict.fromkeys([*label_columns, *after, *_value_columns(stat)]))
    calls = query.fetch_calls(
        database_url,
        lake,
        tenant,
        since_ns=since_ns,
        until_ns=until_ns + 1,
        columns=names,
        filters=pushed,
    )
    if calls.num_rows == 0:
        return {}
    keys = [f"coalesce(\"{c}\", '') AS k{i}" for i, c in enumerate(label_columns)]
    where = " AND ".join(f'"{c}" = ?' for c in after) or "TRUE"
    aggs = _aggregates(stat, quantile)
    group = f" GROUP BY {', '.join(f'k{i}' for i in range(len(keys)))}" if keys else ""
    sql = f"SELECT {', '.join([*keys, aggs])} FROM calls WHERE {where}{group}"
    con = query.cursor()
    try:
        con.register("calls", calls)
        if stat == "rejection_rate_429":
            limited = rate_limited_types(calls.column("error_type"))
            con.register("limited", pa.table({"error_type": limited}))
        rows = con.execute(sql, list(after.values())).fetchall()
    finally:
        con.close()
    n_keys = len(label_columns)
    out: dict[Key, float | None] = {}
    for row in rows:
        n, value = row[n_keys], row[n_keys + 1]
        key = tuple(str(v) for v in row[:n_keys])
        out[key] = None if n < min_samples or value is None else float(value)
    return out
