"""Aggregate calls inside DuckDB instead of fetching them: one SQL statement over a relation
``calls`` that is the sealed Parquet hours (scanned in the same statement, projection and
filters pushed into the scan) plus the unsealed hot tail of the store (read to Arrow).

The rows are those :func:`collector.lake.query.fetch_calls` returns for the same arguments
(each call exactly once: a sealed hour from its file, every other part of the range from the
store), but they never leave DuckDB: a month of a busy tenant (a million calls over 720 hourly
files) becomes a few hundred aggregate rows without a million-row Arrow table, a pandas frame
or a Python object per call. Measured on the dashboard's 1M-call benchmark store: see
``benchmarks/dashboard_render.py``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import duckdb
import pyarrow as pa

from collector.lake import manifest, query
from collector.lake.layout import Lake
from collector.store import analytics

#: name of the relation the caller's SQL reads
RELATION = "calls"


def _quote(value: str) -> str:
    """``value`` as a SQL string literal."""
    return "'" + value.replace("'", "''") + "'"


def _ident(name: str) -> str:
    """``name`` as a SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def _sealed_sql(
    lake: Lake,
    tenant: str,
    hours: Sequence[int],
    names: Sequence[str],
    since_ns: int,
    until_ns: int,
    flt: Mapping[str, str],
) -> str:
    """SQL of ``names`` of the tenant's calls in the sealed ``hours``, started in the range,
    matching ``flt`` (a null never matches): a scan of the Parquet files, the projection and
    filters pushed into it.

    Text, not DuckDB relation calls: each relation call binds its result again, i.e. re-reads
    the schema of every file (720 for a month: ~30 ms a statement on the benchmark store)."""
    paths = ", ".join(_quote(lake.reader_path(lake.data_path("calls", tenant, h))) for h in hours)
    cond = [f"start_unix_nano >= {int(since_ns)}", f"start_unix_nano < {int(until_ns)}"]
    cond += [f"{_ident(col)} = {_quote(value)}" for col, value in flt.items()]
    exprs = ", ".join(f"{_quote(tenant)} AS tenant" if n == "tenant" else _ident(n) for n in names)
    return (
        f"SELECT {exprs} FROM read_parquet([{paths}], hive_partitioning = false) "
        f"WHERE {' AND '.join(cond)}"
    )


def register_calls(
    con: duckdb.DuckDBPyConnection,
    database_url: str,
    lake: Lake | None,
    tenants: Sequence[str],
    *,
    since_ns: int,
    until_ns: int,
    columns: Sequence[str],
    filters: Mapping[str, str | None] | None = None,
    name: str = RELATION,
) -> None:
    """Register ``name`` on ``con`` (a :func:`collector.lake.query.cursor`; visible to it only) as
    a view of ``columns``
    of the calls of ``tenants`` started in ``[since_ns, until_ns)`` (unix ns) matching
    ``filters``: the rows :func:`collector.lake.query.fetch_calls` returns, with its column
    types, where sealed hours stay Parquet files scanned by each statement that reads the view
    and the rest of the range (``lake`` None: all of it) is read from the store now.

    ``columns``: ``llm_calls`` columns or the derived 0/1 indicators ``is_error``,
    ``is_rejected``, ``is_unpriced``; ``tenant`` gives the tenant each call belongs to.
    ``filters`` as :func:`collector.store.analytics.validate_filters` (``model``, ``variant``,
    ``rollout``, ``service``, ...; a null never matches).

    Raises:
        ValueError: an unknown column, no column, an empty or reversed range, a bad filter.
    """
    names = list(dict.fromkeys(columns))
    query.check_columns(names)
    if until_ns <= since_ns:
        raise ValueError(f"empty range: until_ns ({until_ns}) <= since_ns ({since_ns})")
    flt = analytics.validate_filters(filters)
    if lake is not None and not lake.local:
        con.register_filesystem(lake.fs)
    parts: list[str] = []
    tails: list[pa.Table] = [analytics.call_schema(names).empty_table()]
    for tenant in tenants:
        sealed = (
            query.overlapping(list(manifest.load(lake, tenant).hours), since_ns, until_ns)
            if lake is not None
            else []
        )
        if sealed:
            assert lake is not None
            parts.append(_sealed_sql(lake, tenant, sealed, names, since_ns, until_ns, flt))
        windows = query.complement(since_ns, until_ns, sealed)
        if windows:
            tails.append(analytics.fetch_windows(database_url, tenant, names, windows, flt))
    con.register(f"{name}_tail", pa.concat_tables(tails))
    tail = f"SELECT {', '.join(_ident(n) for n in names)} FROM {_ident(name + '_tail')}"
    # a temporary view: visible to this connection only, like a registered table
    view = " UNION ALL ".join([*parts, tail])
    con.execute(f"CREATE OR REPLACE TEMPORARY VIEW {_ident(name)} AS {view}")


def aggregate_calls(
    database_url: str,
    lake: Lake | None,
    tenants: Sequence[str],
    sql: str,
    *,
    since_ns: int,
    until_ns: int,
    columns: Sequence[str],
    filters: Mapping[str, str | None] | None = None,
) -> pa.Table:
    """The result of ``sql``, a DuckDB ``SELECT`` over the relation ``calls`` (:data:`RELATION`)
    that :func:`register_calls` makes of the other arguments: sealed hours scanned from the
    lake inside the statement, the rest of the range read from the store. The result is what
    ``sql`` over :func:`collector.lake.query.fetch_calls`'s rows gives, up to the order in
    which an aggregate visits rows (floating-point sums may differ in the last bits; counts,
    integer sums, minima and quantiles do not).

    Raises:
        ValueError: as :func:`register_calls`.
        duckdb.Error: ``sql`` does not run.
    """
    con = query.cursor()
    try:
        register_calls(
            con,
            database_url,
            lake,
            tenants,
            since_ns=since_ns,
            until_ns=until_ns,
            columns=columns,
            filters=filters,
        )
        result: pa.Table = con.sql(sql).to_arrow_table()
        return result
    finally:
        con.close()


__all__ = ["RELATION", "aggregate_calls", "register_calls"]
