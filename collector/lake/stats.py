"""``/api/v1/stats`` over the lake: the same KPIs as :func:`collector.store.analytics.call_stats`,
answered from per-hour summaries when the request allows it, else from raw calls.

* ``source="raw"``: every call is read (:func:`collector.lake.query.fetch_calls`: sealed
  Parquet plus the store's hot tail) and aggregated exactly (:mod:`collector.store.callstats`).
* ``source="summary"``: hours sealed entirely inside the range come from their summary files;
  the rest of the range (edge hours cut by ``since`` / ``until``, hours not sealed yet) is read
  raw and summarised on the fly, then everything is merged. Percentiles are within a relative
  :data:`collector.lake.summary.RELATIVE_ERROR` of the exact ones (see that module); counts,
  sums, rates and costs are exact.
* ``source="auto"`` (default): for buckets of exactly one hour (group keys among model,
  variant, rollout, service, bucket; filters on those; no tenant grouping), *rollups*: each
  group of a sealed hour inside the range is its exact rollup row
  (:mod:`collector.lake.rollup`, computed when the hour was sealed), every other group (edge
  hours cut by the range, hours not sealed yet or sealed before rollups existed) is aggregated
  from raw calls; exact. Else summary when the request is eligible, the bucket is a day or
  more (or absent), and at least one sealed hour lies inside the range; else raw.

Every returned row says which it came from: ``source`` (``"rollup"`` | ``"summary"`` |
``"raw"``) and ``quantile_relative_error`` (0.01 for summary, 0.0 for rollup and raw).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import pyarrow as pa

from collector.lake import aggregate, manifest, query, rollup, summary
from collector.lake.layout import HOUR_NS, Lake
from collector.store import analytics, arrowfetch, callstats
from collector.store.arrowfetch import FETCH_SLICES

Source = Literal["auto", "raw", "summary"]
#: ``auto`` answers from summaries only for buckets of a day or more (or no bucket): an hourly
#: bucket merges few summary rows, whose histograms then hold about as many entries as there
#: are calls (measured: slower than the raw read at 100 k calls)
AUTO_MIN_BUCKET_NS = 24 * 3600 * 10**9


def summary_and_rest(
    database_url: str,
    lake: Lake,
    tenant: str,
    since_ns: int | None,
    until_ns: int | None,
    flt: Mapping[str, str],
    columns: Sequence[str],
    slices: int = FETCH_SLICES,
) -> tuple[pa.Table | None, pa.Table]:
    """The tenant's calls in ``[since_ns, until_ns)`` matching ``flt`` (summary-key columns),
    split in two: the summary rows (:mod:`collector.lake.summary`) of the sealed hours lying
    entirely inside the range (None when there is none), and ``columns`` of every other call
    of the range (edge hours cut by the range, hours not sealed yet, from the lake or the
    store through the query layer; ``since_ns`` None: with the calls of unknown start). Each
    call is in exactly one part.

    Raises:
        FileNotFoundError: a sealed hour without a summary file.
    """
    sealed = manifest.load(lake, tenant).sealed_in(since_ns, until_ns)
    summ = query.read_summaries(lake, tenant, sealed, flt) if sealed else None
    rest = list(query.complement(since_ns, until_ns, sealed))
    raw = _raw_rest(database_url, lake, tenant, rest, columns, flt, slices)
    return summ, raw


def _summaries(
    database_url: str,
    lake: Lake,
    tenant: str,
    since_ns: int | None,
    until_ns: int | None,
    flt: Mapping[str, str],
    slices: int,
) -> pa.Table:
    """Summary rows covering ``[since_ns, until_ns)`` of the tenant, filters applied: sealed
    summaries of the hours inside the range, plus the rest read raw (through the query layer:
    sealed hours cut by the range's edges come from the lake) and summarised now."""
    summ, raw = summary_and_rest(
        database_url, lake, tenant, since_ns, until_ns, flt, summary.RAW_COLUMNS, slices
    )
    parts = [] if summ is None else [summ]
    if raw.num_rows or not parts:
        con = query.cursor()  # opening a DuckDB database costs more than a small hour
        try:
            parts.append(summary.summarize(raw, con))
        finally:
            con.close()
    if len(parts) == 1:
        return parts[0]
    return pa.concat_tables([p.cast(parts[0].schema) for p in parts])


def _raw_rest(
    database_url: str,
    lake: Lake,
    tenant: str,
    windows: Sequence[arrowfetch.Window],
    names: Sequence[str],
    flt: Mapping[str, str],
    slices: int,
) -> pa.Table:
    """``names`` of the tenant's calls in ``windows`` through the query layer (sealed parts
    from the lake, the rest from the store; ``None``: the calls of unknown start)."""
    parts = [analytics.call_schema(names).empty_table()]
    for w in windows:
        if w is None:  # calls whose start is unknown live only in the store
            parts.append(analytics.fetch_windows(database_url, tenant, names, [None], flt))
            continue
        parts.append(
            query.fetch_calls(
                database_url,
                lake,
                tenant,
                since_ns=w[0],
                until_ns=w[1],
                columns=names,
                filters=dict(flt),
                slices=slices,
            )
        )
    return pa.concat_tables(parts)


def _from_rollups(
    database_url: str,
    lake: Lake,
    tenant: str,
    keys: Sequence[str],
    since_ns: int | None,
    until_ns: int | None,
    flt: Mapping[str, str],
    slices: int,
) -> list[dict[str, Any]]:
    """Hourly-bucket KPIs, exact: groups of sealed hours inside the range from their rollup
    rows, every other hour (edges cut by the range, hours not sealed or sealed without rollups)
    aggregated from its raw calls. The two sets of groups are disjoint (a group is one hour)."""
    sealed = manifest.load(lake, tenant).sealed_in(since_ns, until_ns)
    gid = rollup.grouping_id(keys, list(flt))
    roll, present = query.read_rollups(lake, tenant, sealed, gid, flt)
    names = callstats.needed_columns(keys, need_end=False)
    windows = query.complement(since_ns, until_ns, present)
    rest = _raw_rest(database_url, lake, tenant, windows, names, flt, slices)
    con = query.cursor()
    try:
        con.register("votes", analytics.fetch_votes(database_url, tenant, since_ns, until_ns, flt))
        con.register("calls", rest)
        sql = callstats.group_stats_sql(keys, HOUR_NS, need_end=False)
        if present:
            con.register("roll", roll)
            raw_sql = sql
            sql = rollup.stats_sql(keys)
            if rest.num_rows:
                sql = f"{sql} UNION ALL BY NAME ({raw_sql})"
        rows = callstats.aggregate(
            con, keys, bucket_ns=HOUR_NS, since_ns=since_ns, until_ns=until_ns, stats_sql=sql
        )
    finally:
        con.close()
    rolled = {h // 10**9 for h in present}
    for r in rows:
        start = r["bucket_start_unix_s"]
        r["source"] = "rollup" if start is not None and int(start) in rolled else "raw"
        r["quantile_relative_error"] = 0.0
    return rows


def call_stats(
    database_url: str,
    lake: Lake | None,
    tenant: str | None,
    *,
    group_by: Sequence[str] = (),
    since_ns: int | None = None,
    until_ns: int | None = None,
    bucket_s: float | None = None,
    filters: Mapping[str, str | None] | None = None,
    all_tenants: bool = False,
    source: Source = "auto",
    slices: int = FETCH_SLICES,
) -> list[dict[str, Any]]:
    """Per-group KPIs of the tenant's calls started in ``[since_ns, until_ns)``.

    Arguments, rows and errors as :func:`collector.store.analytics.call_stats`, plus ``lake``
    (None: the store only, raw) and ``source`` (see the module docstring). Each row also has
    ``source`` and ``quantile_relative_error``.

    Raises:
        ValueError: as ``analytics.call_stats``; ``source="summary"`` for a request that
            summaries cannot answer; an unknown ``source``.
    """
    if source not in ("auto", "raw", "summary"):
        raise ValueError(f"source must be auto, raw or summary, got {source!r}")
    keys = callstats.validate_group_by(group_by, bucket_s=bucket_s, all_tenants=all_tenants)
    if tenant is None and not all_tenants:
        raise ValueError("tenant: required unless all_tenants=True")
    analytics.validate_range(since_ns, until_ns)
    flt = analytics.validate_filters(filters)
    bucket_ns = None if bucket_s is None else round(bucket_s * 1e9)
    can = lake is not None and not all_tenants and summary.eligible(keys, bucket_ns, list(flt))
    if source == "summary" and not can:
        raise ValueError(
            "source: summary needs group keys among model, variant, rollout, service, bucket, "
            "a bucket of whole hours and a lake"
        )
    if (
        source == "auto"
        and can
        and lake is not None
        and tenant is not None
        and rollup.eligible(keys, bucket_ns, list(flt))
    ):
        return _from_rollups(database_url, lake, tenant, keys, since_ns, until_ns, flt, slices)
    use_summary = source == "summary" or (
        source == "auto"
        and can
        and (bucket_ns is None or bucket_ns >= AUTO_MIN_BUCKET_NS)
        and lake is not None
        and tenant is not None
        and bool(manifest.load(lake, tenant).sealed_in(since_ns, until_ns))
    )
    who = None if all_tenants else tenant
    con = query.cursor()
    try:
        con.register("votes", analytics.fetch_votes(database_url, who, since_ns, until_ns, flt))
        if use_summary:
            assert lake is not None and tenant is not None
            summ = _summaries(database_url, lake, tenant, since_ns, until_ns, flt, slices)
            con.register("summ", summ)
            rows = callstats.aggregate(
                con,
                keys,
                bucket_ns=bucket_ns,
                since_ns=since_ns,
                until_ns=until_ns,
                stats_sql=summary.stats_sql(keys, bucket_ns),
            )
            error = summary.RELATIVE_ERROR
        else:
            need_end = "bucket" not in keys and (since_ns is None or until_ns is None)
            names = callstats.needed_columns(keys, need_end=need_end)
            calls = query.fetch_calls(
                database_url,
                lake,
                tenant,
                since_ns=since_ns,
                until_ns=until_ns,
                columns=names,
                filters=filters,
                all_tenants=all_tenants,
                slices=slices,
            )
            con.register("calls", calls)
            rows = callstats.aggregate(
                con, keys, bucket_ns=bucket_ns, since_ns=since_ns, until_ns=until_ns
            )
            error = 0.0
    finally:
        con.close()
    tag = "summary" if use_summary else "raw"
    for r in rows:
        r["source"] = tag
        r["quantile_relative_error"] = error
    return rows


def exact_call_stats(
    database_url: str,
    lake: Lake | None,
    tenant: str,
    groupings: Sequence[tuple[Sequence[str], float | None]],
    *,
    since_ns: int,
    until_ns: int,
    filters: Mapping[str, str | None] | None = None,
) -> list[list[dict[str, Any]]]:
    """For each ``(group_by, bucket_s)`` of ``groupings``, the rows of :func:`call_stats` with
    ``source="raw"`` (exact) over the tenant's calls in ``[since_ns, until_ns)``, all from one
    read: the unsealed tail of the store is read once and the sealed hours are scanned by
    DuckDB in place (:func:`collector.lake.aggregate.register_calls`), not fetched into Arrow
    once per grouping. Rows equal :func:`call_stats`'s up to the order in which a sum adds
    floating-point values (USD sums, cost per 1k tokens: last bits).

    Raises:
        ValueError: as :func:`call_stats` for any grouping; an empty range.
    """
    keyed = [
        (callstats.validate_group_by(g, bucket_s=b, all_tenants=False), b) for g, b in groupings
    ]
    analytics.validate_range(since_ns, until_ns)
    flt = analytics.validate_filters(filters)
    names: list[str] = []
    for keys, _b in keyed:
        names += callstats.needed_columns(keys, need_end=False)
    con = query.cursor()
    try:
        con.register("votes", analytics.fetch_votes(database_url, tenant, since_ns, until_ns, flt))
        aggregate.register_calls(
            con,
            database_url,
            lake,
            [tenant],
            since_ns=since_ns,
            until_ns=until_ns,
            columns=list(dict.fromkeys(names)),
            filters=filters,
        )
        out = []
        for keys, bucket_s in keyed:
            bucket_ns = None if bucket_s is None else round(bucket_s * 1e9)
            rows = callstats.aggregate(
                con, keys, bucket_ns=bucket_ns, since_ns=since_ns, until_ns=until_ns
            )
            for r in rows:
                r["source"] = "raw"
                r["quantile_relative_error"] = 0.0
            out.append(rows)
        return out
    finally:
        con.close()


__all__ = ["Source", "call_stats", "exact_call_stats", "summary_and_rest"]
